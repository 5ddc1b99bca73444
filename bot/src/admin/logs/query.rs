//! `GET /admin/api/events/history`: the stored events, filtered, newest first — one page as JSON, or
//! every match as JSON lines for an export.
//!
//! Invariants:
//! - every parameter is checked before anything is read: an unknown one, a repeated single one, a
//!   number that is not one, a time that is not one, `from` after `to`, a limit out of range — each
//!   is a 400 saying which parameter, what was wrong and what to write;
//! - an export is streamed page by page (never held whole in memory) and stops at [`EXPORT_CAP`]
//!   events, which it says in a header before the first line and in a last line.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::super::Admin;
use super::super::config::error;
use super::store::{EventStore, Filter, StoredEvent};

/// The most distinct `kind`s one query filters by (each is a bound parameter of one `IN (…)`).
const MAX_KINDS: usize = 50;
/// A page's events when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 200;
/// The most a page may ask for.
pub const MAX_LIMIT: u32 = 1_000;
/// The most events an export holds.
pub const EXPORT_CAP: u32 = 100_000;
/// Events read per step of an export.
const EXPORT_PAGE: u32 = 1_000;

/// The parameters, as the console's form and scripts write them.
const KNOWN: &str = "request, task, agent, kind, from, to, before, limit, format";

/// How the events are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One page: `{"events": [...], "more": bool}`.
    Json,
    /// JSON lines, one event a line, as a download.
    Jsonl,
}

/// Parse the query's pairs (a key may repeat: `kind`), or say what is wrong.
pub fn parse(pairs: &[(String, String)]) -> Result<(Filter, Format), String> {
    let mut filter = Filter::default();
    let mut format = Format::Json;
    let mut limit: Option<u32> = None;
    let mut seen: Vec<&str> = Vec::new();
    for (key, value) in pairs {
        let value = value.trim();
        if key != "kind" {
            if seen.contains(&key.as_str()) {
                return Err(format!(
                    "`{key}` is given twice: give it once (only `kind` may repeat)"
                ));
            }
            seen.push(key);
        }
        // An empty value is no condition (the console's form sends its empty fields).
        if value.is_empty() {
            continue;
        }
        match key.as_str() {
            "request" => filter.request = Some(id(key, value)?),
            "task" => filter.task = Some(id(key, value)?),
            "before" => filter.before = Some(id(key, value)?),
            "agent" => filter.agent = Some(value.to_string()),
            "kind" => {
                for kind in value.split(',').map(str::trim).filter(|k| !k.is_empty()) {
                    if !kind
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    {
                        return Err(format!(
                            "`kind`: {kind:?} is not an event kind: kinds are snake_case, e.g. `delegated` or `agent_finished` (several: kind=a,b or kind=a&kind=b)"
                        ));
                    }
                    if !filter.kinds.iter().any(|k| k == kind) {
                        if filter.kinds.len() >= MAX_KINDS {
                            return Err(format!(
                                "`kind`: more than {MAX_KINDS} kinds; name fewer, or leave `kind` out for every kind"
                            ));
                        }
                        filter.kinds.push(kind.to_string());
                    }
                }
            }
            "from" => filter.from = Some(time(key, value)?),
            "to" => filter.to = Some(time(key, value)?),
            "limit" => {
                limit = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| {
                            format!("`limit`: {value:?} is not a count: write a whole number from 1 to {MAX_LIMIT}")
                        })?,
                );
            }
            "format" => {
                format = match value {
                    "json" => Format::Json,
                    "jsonl" => Format::Jsonl,
                    _ => {
                        return Err(format!(
                            "`format`: {value:?} is not a format: write `json` (a page, the default) or `jsonl` (JSON lines, to download)"
                        ));
                    }
                }
            }
            _ => {
                return Err(format!(
                    "`{key}` is not a parameter of the event history: the parameters are {KNOWN}"
                ));
            }
        }
    }
    if let (Some(from), Some(to)) = (filter.from, filter.to)
        && from > to
    {
        return Err("`from` is after `to`: give the earlier time as `from`".into());
    }
    let max = match format {
        Format::Json => MAX_LIMIT,
        Format::Jsonl => EXPORT_CAP,
    };
    filter.limit = match limit {
        Some(n) if n > max => {
            return Err(format!(
                "`limit`: {n} is more than {max}, the most {} holds: page with `before=<the last id>`",
                if format == Format::Json {
                    "one page"
                } else {
                    "one export"
                }
            ));
        }
        Some(n) => n,
        None if format == Format::Json => DEFAULT_LIMIT,
        None => EXPORT_CAP,
    };
    Ok((filter, format))
}

fn id(key: &str, value: &str) -> Result<i64, String> {
    value
        .trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            format!("`{key}`: {value:?} is not an id: write a positive number, e.g. {key}=42")
        })
}

/// Unix ms, or RFC 3339 with an offset, or a date (00:00 UTC).
fn time(key: &str, value: &str) -> Result<i64, String> {
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<i64>().map_err(|_| {
            format!("`{key}`: {value:?} is too large for a time in Unix milliseconds")
        });
    }
    opc_memory::facts::time::parse_time(value)
        .map_err(|e| format!("`{key}`: {e}; or Unix milliseconds"))
}

/// `GET /admin/api/events/history` (see the module doc): `{"events": [{id, at, kind, request, task,
/// agent, node, data}], "more": bool}`, or with `format=jsonl` the same events as JSON lines.
pub async fn history(
    State(admin): State<Arc<Admin>>,
    query: Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(pairs)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "the query string could not be read: write it as ?request=42&kind=delegated",
        );
    };
    let (filter, format) = match parse(&pairs) {
        Ok(parsed) => parsed,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let store = match super::reader(&admin) {
        Ok(store) => store,
        Err(why) => return error(StatusCode::SERVICE_UNAVAILABLE, &why),
    };
    match format {
        Format::Json => {
            let asked = filter.limit;
            let mut one_more = filter.clone();
            one_more.limit = asked + 1;
            match read(store, move |s| s.query(&one_more)).await {
                Ok(mut events) => {
                    let more = events.len() > asked as usize;
                    events.truncate(asked as usize);
                    axum::Json(json!({
                        "events": events.iter().map(StoredEvent::to_json).collect::<Vec<_>>(),
                        "more": more,
                    }))
                    .into_response()
                }
                Err(response) => response,
            }
        }
        Format::Jsonl => export(store, filter).await,
    }
}

/// Run `f` on a blocking thread; a failure is a 500 with its message.
pub async fn read<T: Send + 'static>(
    store: Arc<EventStore>,
    f: impl FnOnce(&EventStore) -> Result<T, super::store::StoreError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(e)) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())),
        Err(_) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the read did not finish",
        )),
    }
}

/// The export: a header says how many events it holds and whether the cap cut it; then the lines.
async fn export(store: Arc<EventStore>, filter: Filter) -> Response {
    let wanted = filter.limit;
    let counted = {
        let filter = filter.clone();
        read(store.clone(), move |s| s.count(&filter, EXPORT_CAP + 1)).await
    };
    let total = match counted {
        Ok(n) => n,
        Err(response) => return response,
    };
    let capped = wanted == EXPORT_CAP && total > u64::from(EXPORT_CAP);
    // Pages of the export: (next filter, events still to send, finished).
    let state = (filter, wanted, false);
    let stream = futures_util::stream::unfold(state, move |(mut filter, left, finished)| {
        let store = store.clone();
        async move {
            if finished {
                return None;
            }
            if left == 0 {
                if !capped {
                    return None;
                }
                let note = json!({
                    "capped": true,
                    "limit": EXPORT_CAP,
                    "next_before": filter.before,
                    "note": format!("the export stops at {EXPORT_CAP} events: export the rest with before=<next_before>, or narrow the filters"),
                });
                return Some((
                    Ok::<_, std::io::Error>(format!("{note}\n")),
                    (filter, 0, true),
                ));
            }
            filter.limit = left.min(EXPORT_PAGE);
            let page = {
                let filter = filter.clone();
                tokio::task::spawn_blocking(move || store.query(&filter)).await
            };
            let events = match page {
                Ok(Ok(events)) => events,
                Ok(Err(e)) => {
                    return Some((Err(std::io::Error::other(e.to_string())), (filter, 0, true)));
                }
                Err(_) => {
                    return Some((
                        Err(std::io::Error::other("the read did not finish")),
                        (filter, 0, true),
                    ));
                }
            };
            if events.is_empty() {
                return None;
            }
            let sent = u32::try_from(events.len()).unwrap_or(u32::MAX);
            let full_page = sent == filter.limit;
            let mut lines = String::new();
            for e in &events {
                lines.push_str(&e.to_json().to_string());
                lines.push('\n');
            }
            filter.before = events.last().map(|e| e.id);
            let left = if full_page { left - sent } else { 0 };
            let finished = !full_page && !capped;
            Some((Ok(lines), (filter, left, finished)))
        }
    });
    let mut response = Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"opc-events.jsonl\""),
    );
    headers.insert(
        "x-opc-events",
        HeaderValue::from(total.min(u64::from(wanted))),
    );
    headers.insert(
        "x-opc-export-capped",
        HeaderValue::from_static(if capped { "true" } else { "false" }),
    );
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn parameters_become_a_filter() {
        let (f, format) = parse(&pairs(&[
            ("request", "12"),
            ("kind", "delegated,agent_finished"),
            ("kind", "delegated"),
            ("kind", "tool_called"),
            ("agent", "vp"),
            ("from", "2026-05-03"),
            ("to", "1777939200000"),
            ("task", ""),
        ]))
        .unwrap();
        assert_eq!(format, Format::Json);
        assert_eq!(f.request, Some(12));
        assert_eq!(f.task, None, "an empty field is no condition");
        assert_eq!(f.kinds, ["delegated", "agent_finished", "tool_called"]);
        assert_eq!(f.agent.as_deref(), Some("vp"));
        assert_eq!(f.from, Some(1_777_766_400_000));
        assert_eq!(f.to, Some(1_777_939_200_000));
        assert_eq!(f.limit, DEFAULT_LIMIT);
        let (f, format) = parse(&pairs(&[("format", "jsonl")])).unwrap();
        assert_eq!((format, f.limit), (Format::Jsonl, EXPORT_CAP));
    }

    #[test]
    fn bad_parameters_say_which_and_how() {
        let bad = |list: &[(&str, &str)], needle: &str| {
            let e = parse(&pairs(list)).unwrap_err();
            assert!(e.contains(needle), "{e}");
        };
        bad(&[("request", "abc")], "`request`");
        bad(&[("task", "-3")], "positive number");
        bad(&[("limit", "0")], "from 1 to 1000");
        bad(&[("limit", "1001")], "page with `before");
        bad(&[("from", "yesterday")], "RFC 3339");
        bad(
            &[("from", "2026-05-04"), ("to", "2026-05-03")],
            "`from` is after `to`",
        );
        bad(&[("kind", "Delegated!")], "snake_case");
        bad(&[("agnet", "vp")], "the parameters are");
        bad(&[("agent", "a"), ("agent", "b")], "given twice");
        bad(&[("format", "csv")], "`jsonl`");
    }
}
