//! The Privacy page's vault status: `GET /admin/api/privacy/vault`.
//!
//! What a vault is here: the privacy gateway keeps one per running request tree (root task), in
//! memory, from its first model call until the tree has no live task; each maps the real values its
//! conversation carried to their substitutes. This endpoint lists the live vaults of this process
//! ([`opc_privacy::vault::live_vaults`]) grouped by conversation: how many values each holds, by
//! type, and when the first and last were stored; with the fake scheme (how substitutes are made, per
//! detected type, for the configured mode).
//!
//! Invariants:
//! - never a value, real or fake (a fake maps to a real one): only types, counts, times and
//!   conversation ids leave this module;
//! - conversations are listed newest first (by their latest stored value) and paginated by a cursor
//!   (`before`, that time in Unix ms), so the answer is bounded whatever the process holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use opc_adapters::Page;
use opc_privacy::Style;
use opc_privacy::vault::{VaultStatus, live_vaults};
use serde_json::{Value, json};

use super::Admin;
use super::config::error;

/// Conversations per page by default, and at most.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 200;

/// This module's endpoints.
pub(super) fn pages(admin: &Arc<Admin>) -> Vec<Page> {
    vec![Page::new(
        Method::GET,
        "/admin/api/privacy/vault",
        status,
        admin.clone(),
    )]
}

/// A page's cursor and size.
#[derive(Debug, PartialEq)]
struct Window {
    limit: usize,
    before: Option<u64>,
}

/// `limit` and `before` of the query, or what is wrong with them.
fn window(query: &str) -> Result<Window, String> {
    let mut window = Window {
        limit: DEFAULT_LIMIT,
        before: None,
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "limit" => {
                window.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        format!("`limit` must be a whole number from 1 to {MAX_LIMIT}")
                    })?;
            }
            "before" => {
                window.before = Some(value.parse().map_err(|_| {
                    "`before` must be a time in Unix milliseconds (the `next_before` of the previous page)"
                        .to_string()
                })?);
            }
            other => {
                return Err(format!(
                    "unknown parameter `{other}`: this endpoint takes `limit` and `before`"
                ));
            }
        }
    }
    Ok(window)
}

/// One conversation's vaults, merged.
struct Held {
    roots: Vec<i64>,
    by_type: BTreeMap<&'static str, usize>,
    oldest_ms: u64,
    newest_ms: u64,
}

/// The live vaults that hold something, by conversation (`None`: a model call outside any
/// conversation's tree, whose vault lives for that call alone).
fn by_conversation(vaults: Vec<VaultStatus>) -> BTreeMap<Option<String>, Held> {
    let mut merged: BTreeMap<Option<String>, Held> = BTreeMap::new();
    for vault in vaults {
        let (Some(oldest), Some(newest)) = (vault.oldest_ms, vault.newest_ms) else {
            continue;
        };
        let (root, conversation) = match vault.label {
            Some((root, conversation)) => (Some(root), Some(conversation)),
            None => (None, None),
        };
        let held = merged.entry(conversation).or_insert(Held {
            roots: Vec::new(),
            by_type: BTreeMap::new(),
            oldest_ms: oldest,
            newest_ms: newest,
        });
        held.roots.extend(root);
        for (kind, n) in vault.by_type {
            *held.by_type.entry(kind.as_str()).or_default() += n;
        }
        held.oldest_ms = held.oldest_ms.min(oldest);
        held.newest_ms = held.newest_ms.max(newest);
    }
    merged
}

/// The answer for `vaults`, at time `now_ms`, in mode `style` (`None`: privacy is off) detecting
/// `types`.
fn answer(
    vaults: Vec<VaultStatus>,
    window: &Window,
    now_ms: u64,
    mode: Option<(&str, Style)>,
    types: &[&str],
) -> Value {
    let merged = by_conversation(vaults);
    let values: usize = merged.values().flat_map(|h| h.by_type.values()).sum();
    let oldest = merged.values().map(|h| h.oldest_ms).min();
    let mut rows: Vec<(Option<String>, Held)> = merged
        .into_iter()
        .filter(|(_, h)| window.before.is_none_or(|before| h.newest_ms < before))
        .collect();
    rows.sort_by(|a, b| {
        b.1.newest_ms
            .cmp(&a.1.newest_ms)
            .then_with(|| a.0.cmp(&b.0))
    });
    let more = rows.len() > window.limit;
    rows.truncate(window.limit);
    let next_before = more
        .then(|| rows.last().map(|(_, h)| h.newest_ms))
        .flatten();
    let conversations: Vec<Value> = rows
        .into_iter()
        .map(|(conversation, held)| {
            json!({
                "conversation": conversation,
                "roots": held.roots,
                "values": held.by_type.values().sum::<usize>(),
                "by_type": held.by_type,
                "oldest_ms": held.oldest_ms,
                "newest_ms": held.newest_ms,
            })
        })
        .collect();
    let scheme: Vec<Value> = mode.map_or_else(Vec::new, |(_, style)| {
        style
            .scheme()
            .into_iter()
            .filter(|(kind, _)| types.contains(&kind.as_str()))
            .map(|(kind, how)| json!({ "type": kind.as_str(), "how": how }))
            .collect()
    });
    json!({
        "enabled": mode.is_some(),
        "mode": mode.map(|(name, _)| name),
        "values": values,
        "oldest_ms": oldest,
        "oldest_age_ms": oldest.map(|t| now_ms.saturating_sub(t)),
        "conversations": conversations,
        "next_before": next_before,
        "scheme": scheme,
    })
}

/// `GET /admin/api/privacy/vault?limit=&before=`: `{"enabled", "mode", "values", "oldest_ms",
/// "oldest_age_ms", "conversations": [{"conversation", "roots", "values", "by_type", "oldest_ms",
/// "newest_ms"}], "next_before", "scheme": [{"type", "how"}]}`.
async fn status(State(admin): State<Arc<Admin>>, RawQuery(query): RawQuery) -> Response {
    let window = match window(query.as_deref().unwrap_or("")) {
        Ok(window) => window,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let Some(live) = admin.live.get() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "opc run is still starting; try again in a moment",
        );
    };
    let loaded = live.get();
    let settings = &loaded.config.framework.privacy;
    let mode_name = format!("{:?}", settings.mode).to_lowercase();
    let style = if mode_name == "redact" {
        Style::Placeholder
    } else {
        Style::Fake
    };
    let types: Vec<&str> = settings.detect_types.iter().map(|t| t.as_str()).collect();
    let now = u64::try_from(opc_agents::store::now_ms()).unwrap_or(0);
    let body = answer(
        live_vaults(),
        &window,
        now,
        settings.enabled.then_some((mode_name.as_str(), style)),
        &types,
    );
    ([(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use opc_privacy::EntityType;

    fn vault(
        conversation: Option<&str>,
        root: i64,
        types: &[(EntityType, usize)],
        t: u64,
    ) -> VaultStatus {
        VaultStatus {
            label: conversation.map(|c| (root, c.to_string())),
            style: Style::Fake,
            by_type: types.to_vec(),
            oldest_ms: Some(t),
            newest_ms: Some(t + 10),
        }
    }

    #[test]
    fn vaults_are_merged_per_conversation_newest_first_and_paged() {
        let vaults = vec![
            vault(Some("a"), 1, &[(EntityType::Email, 1)], 100),
            vault(Some("b"), 2, &[(EntityType::PersonName, 2)], 300),
            vault(
                Some("a"),
                3,
                &[(EntityType::Email, 2), (EntityType::Phone, 1)],
                200,
            ),
            vault(None, 0, &[(EntityType::Url, 1)], 50),
            VaultStatus {
                label: Some((9, "empty".into())),
                style: Style::Fake,
                by_type: Vec::new(),
                oldest_ms: None,
                newest_ms: None,
            },
        ];
        let page = answer(
            vaults.clone(),
            &Window {
                limit: 2,
                before: None,
            },
            1_000,
            Some(("mask", Style::Fake)),
            &["EMAIL"],
        );
        assert_eq!(page["values"], 7);
        assert_eq!(page["oldest_ms"], 50);
        assert_eq!(page["oldest_age_ms"], 950);
        let rows = page["conversations"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["conversation"], "b");
        assert_eq!(rows[1]["conversation"], "a");
        assert_eq!(rows[1]["by_type"], json!({"EMAIL": 3, "PHONE": 1}));
        assert_eq!(rows[1]["roots"], json!([1, 3]));
        assert_eq!(
            (&rows[1]["oldest_ms"], &rows[1]["newest_ms"]),
            (&json!(100), &json!(210))
        );
        assert_eq!(page["next_before"], 210);
        assert_eq!(page["scheme"].as_array().unwrap().len(), 1);
        let next = answer(
            vaults,
            &Window {
                limit: 2,
                before: Some(210),
            },
            1_000,
            None,
            &[],
        );
        let rows = next["conversations"].as_array().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["conversation"], Value::Null);
        assert_eq!(next["next_before"], Value::Null);
        assert_eq!(next["enabled"], false);
    }

    #[test]
    fn the_window_is_checked() {
        assert_eq!(
            window("").unwrap(),
            Window {
                limit: DEFAULT_LIMIT,
                before: None
            }
        );
        assert_eq!(
            window("limit=5&before=12").unwrap(),
            Window {
                limit: 5,
                before: Some(12)
            }
        );
        assert!(window("limit=0").unwrap_err().contains("from 1 to"));
        assert!(
            window("before=x")
                .unwrap_err()
                .contains("Unix milliseconds")
        );
        assert!(
            window("page=2")
                .unwrap_err()
                .contains("unknown parameter `page`")
        );
    }
}
