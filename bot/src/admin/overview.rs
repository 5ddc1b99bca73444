//! `GET /admin/api/overview`: the console's first page in one read — active requests, agents by
//! state, approvals waiting with their age, spend today and over the last 7 days, the providers'
//! health, the NER model's state and the last 20 stored events.
//!
//! Everything comes from where the other pages read it (the engine's tasks, approvals and ledger,
//! `GET /admin/api/providers`, the privacy gateway's readiness, the stored events), so the overview
//! and the page an operator clicks through to always agree.
//!
//! Invariants:
//! - an agent's state is one of `working` (a task of its thinks or runs tools), `waiting` (on its
//!   children or a human), `failed` (it runs nothing, and its last task in the last 24 h failed) and
//!   `idle`; the counts add up to the org's agents;
//! - spend totals hold every kind of call (tasks, memory work, embeddings), as the Costs page's;
//! - a part that cannot be read (the stored events) is said in its place; the rest still answers.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use opc_adapters::Page;
use opc_agents::store::{Spend, TaskRecord, now_ms};
use serde_json::{Value, json};

use super::Admin;
use super::config::error;
use super::logs::store::Filter;

/// Active requests listed (all are counted).
const REQUESTS_LISTED: usize = 10;
/// Approvals listed (all are counted).
const APPROVALS_LISTED: usize = 10;
/// Stored events shown.
const EVENTS: u32 = 20;
/// How far back an agent's failed last task makes it `failed`.
const FAILED_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// This module's endpoints.
pub(super) fn pages(admin: &Arc<Admin>) -> Vec<Page> {
    vec![Page::new(
        Method::GET,
        "/admin/api/overview",
        overview,
        admin.clone(),
    )]
}

/// What the engine's database says, read in one task.
struct Read {
    live: Vec<TaskRecord>,
    approvals: Vec<opc_agents::store::Approval>,
    today: Vec<Spend>,
    week: Vec<Spend>,
}

/// `GET /admin/api/overview` (see the module doc).
async fn overview(State(admin): State<Arc<Admin>>) -> Response {
    let (Some(gateway), Some(live)) = (admin.gateway.get(), admin.live.get()) else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is not running in this process",
        );
    };
    let loaded = live.get();
    let engine = gateway.engine().clone();
    let now = now_ms();
    let midnight = now - now.rem_euclid(DAY_MS);
    let read = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let store = engine.store();
            let spend = |since| async move {
                let mut rows = store.spend_since(since).await?;
                rows.extend(store.embedding_spend_since(since).await?);
                Ok::<_, opc_agents::store::StoreError>(rows)
            };
            Ok::<_, opc_agents::store::StoreError>(Read {
                live: store.live_tasks().await?,
                approvals: store.pending_approvals().await?,
                today: spend(midnight).await?,
                week: spend(now - 7 * DAY_MS).await?,
            })
        })
        .await
    };
    let read = match read {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    };
    // The stored events: the last ones, and each agent's last finished task (for `failed`).
    let (events, finished, events_error) = match super::logs::reader(&admin) {
        Ok(store) => {
            let got = super::logs::read(store, move |s| {
                Ok((
                    s.query(&Filter {
                        limit: EVENTS,
                        ..Filter::default()
                    })?,
                    s.last_finished(now - FAILED_WINDOW_MS)?,
                ))
            })
            .await;
            match got {
                Ok((events, finished)) => (events, finished, None),
                Err(_) => (
                    Vec::new(),
                    Vec::new(),
                    Some("the stored events could not be read".to_string()),
                ),
            }
        }
        Err(why) => (Vec::new(), Vec::new(), Some(why)),
    };
    let providers = providers(&admin).await;
    let settings = &loaded.config.framework.privacy;
    let ner = opc_agents::llm::privacy::readiness(&loaded.config, &engine.ner_slot());

    // Agents by state.
    let mut tasks: HashMap<&str, Vec<&TaskRecord>> = HashMap::new();
    for t in &read.live {
        tasks.entry(t.agent.as_str()).or_default().push(t);
    }
    let failed: HashMap<&str, bool> = finished
        .iter()
        .map(|(agent, state)| (agent.as_str(), state == "FAILED"))
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let by_agent: Vec<Value> = loaded
        .config
        .agents
        .keys()
        .map(|id| {
            let mine = tasks
                .get(id.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let state = match super::live::state_of(mine) {
                "thinking" => "working",
                "waiting on approval" | "waiting on children" => "waiting",
                _ if failed.get(id.as_str()).copied().unwrap_or(false) => "failed",
                _ => "idle",
            };
            *counts.entry(state).or_default() += 1;
            json!({"id": id, "state": state})
        })
        .collect();
    let count = |s: &str| counts.get(s).copied().unwrap_or(0);

    // Active requests: live roots, newest first.
    let mut roots: Vec<&TaskRecord> = read.live.iter().filter(|t| t.parent_id.is_none()).collect();
    roots.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    let in_tree = |root: i64| read.live.iter().filter(|t| t.root_id == root).count();
    let requests: Vec<Value> = roots
        .iter()
        .take(REQUESTS_LISTED)
        .map(|t| {
            json!({
                "id": t.id,
                "agent": t.agent,
                "state": t.state.as_str(),
                "input": crate::term::one_line(&t.input, 80),
                "created_at": t.created_at,
                "age_ms": (now - t.created_at).max(0),
                "live_tasks": in_tree(t.id),
            })
        })
        .collect();
    let approvals: Vec<Value> = read
        .approvals
        .iter()
        .take(APPROVALS_LISTED)
        .map(|a| {
            json!({
                "id": a.id,
                "agent": a.agent,
                "summary": crate::term::one_line(&a.summary, 120),
                "task": a.task_id,
                "request": a.root_id,
                "created_at": a.created_at,
                "age_ms": (now - a.created_at).max(0),
                "expires_at": a.expires_at,
            })
        })
        .collect();
    Json(json!({
        "now": now,
        "generation": live.generation(),
        "requests": {"active": roots.len(), "list": requests},
        "agents": {
            "total": by_agent.len(),
            "working": count("working"),
            "waiting": count("waiting"),
            "failed": count("failed"),
            "idle": count("idle"),
            "by_agent": by_agent,
        },
        "approvals": {"waiting": read.approvals.len(), "list": approvals},
        "spend": {"today": total(&read.today), "week": total(&read.week), "since_today": midnight},
        "providers": providers,
        "ner": {
            "enabled": settings.enabled,
            "readiness": ner,
            "requireNer": settings.require_ner,
            "nerWait": settings.ner_wait.as_secs_f64(),
        },
        "events": events.iter().map(super::logs::store::StoredEvent::to_json).collect::<Vec<_>>(),
        "events_error": events_error,
    }))
    .into_response()
}

/// Spend rows summed: calls, tokens and cost.
fn total(rows: &[Spend]) -> Value {
    let (calls, tokens_in, tokens_out, cost) = rows.iter().fold((0, 0, 0, 0.0), |t, r| {
        (
            t.0 + r.calls,
            t.1 + r.tokens_in,
            t.2 + r.tokens_out,
            t.3 + r.cost_usd,
        )
    });
    json!({"calls": calls, "tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost})
}

/// The providers as `GET /admin/api/providers` lists them (read through it, so both agree); an
/// empty list when it cannot answer.
async fn providers(admin: &Arc<Admin>) -> Value {
    let response = super::live::providers(State(admin.clone())).await;
    if !response.status().is_success() {
        return json!([]);
    }
    let Ok(body) = axum::body::to_bytes(response.into_body(), 4 << 20).await else {
        return json!([]);
    };
    serde_json::from_slice::<Value>(&body)
        .map(|v| v["providers"].clone())
        .unwrap_or_else(|_| json!([]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn spend_adds_up_every_row() {
        let row = |calls, cost| Spend {
            agent: "ceo".into(),
            model: "llm/m".into(),
            conversation: "c".into(),
            work: "task".into(),
            calls,
            tokens_in: 10,
            tokens_out: 5,
            cost_usd: cost,
        };
        let t = total(&[row(2, 0.5), row(1, 0.25)]);
        assert_eq!(t["calls"], 3);
        assert_eq!(t["tokens_in"], 20);
        assert_eq!(t["cost_usd"], 0.75);
        assert_eq!(total(&[])["cost_usd"], 0.0);
    }
}
