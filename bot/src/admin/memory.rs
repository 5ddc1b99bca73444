//! The console's Memory and Privacy pages: core memory blocks as stored, a search of recall memory
//! as an agent would see it, an agent's long-term facts (current, believed at a time, true at a
//! time, or every version) with one fact's version history, and what the privacy gateway did per day.
//!
//! Invariants:
//! - read-only: blocks are read on their own read-only connection, facts through a read-only
//!   [`FactStore`] (as `opc memory facts` reads them, so the two always agree), and a search goes
//!   through memory's ACL for the agent it is made as (the root by default, which reads every agent's);
//! - the Privacy page shows counts by type and day, never a value: they come from the ledger, which
//!   never stored one.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use opc_memory::embed::EmbedSlot;
use opc_memory::facts::{FactStore, FactVersion, View};
use opc_memory::recall::{Mode, Query as RecallQuery};
use serde::Deserialize;
use serde_json::json;

use super::Admin;
use super::config::error;

/// Days the Privacy page covers.
const PRIVACY_DAYS: i64 = 30;
/// Most hits a search returns.
const MAX_HITS: usize = 50;

fn not_running() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the gateway is not running in this process",
    )
}

/// `GET /admin/api/memory/blocks`: every stored block (namespace, label, value, limit, version).
pub async fn blocks(State(admin): State<Arc<Admin>>) -> Response {
    let Some(live) = admin.live.get() else {
        return not_running();
    };
    let loaded = live.get();
    let database = crate::setup::database_choice(&loaded);
    let read = tokio::task::spawn_blocking(move || match database? {
        crate::setup::Database::Postgres { url, .. } => {
            let conn = opc_pg::Blocking::connect(&url, "admin").map_err(|e| e.to_string())?;
            opc_memory::blocks::read_all_postgres(&conn).map_err(|e| e.to_string())
        }
        crate::setup::Database::Sqlite(database) => {
            if !database.exists() {
                return Ok(Vec::new());
            }
            let conn = rusqlite::Connection::open_with_flags(
                &database,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .map_err(|e| e.to_string())?;
            let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
            opc_memory::blocks::read_all(&conn).map_err(|e| e.to_string())
        }
    })
    .await;
    match read {
        Ok(Ok(blocks)) => {
            let list: Vec<_> = blocks
                .into_iter()
                .map(|b| {
                    json!({
                        "namespace": b.namespace,
                        "label": b.label,
                        "description": b.description,
                        "chars": b.value.chars().count(),
                        "value": b.value,
                        "limit": b.limit,
                        "read_only": b.read_only,
                        "version": b.version,
                    })
                })
                .collect();
            Json(json!({"blocks": list})).into_response()
        }
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot read the memory blocks: {e}"),
        ),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

/// A search of recall memory.
#[derive(Deserialize)]
pub struct Search {
    q: String,
    /// Search as this agent (what it may read); the root by default.
    agent: Option<String>,
    limit: Option<usize>,
}

/// `GET /admin/api/memory/search?q=…&agent=…&limit=…`: recall memory's hybrid search (keywords and,
/// once the model has loaded, meaning), with each hit's provenance.
pub async fn search(
    State(admin): State<Arc<Admin>>,
    query: Result<Query<Search>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (Some(live), Some(recall)) = (admin.live.get(), admin.recall.get()) else {
        return not_running();
    };
    let Ok(Query(search)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the search as ?q=<words>, optionally &agent=<id> and &limit=<n>",
        );
    };
    if search.q.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "the search `q` is empty");
    }
    let loaded = live.get();
    let agent = search
        .agent
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| loaded.org.root().to_string());
    if !loaded.org.contains(&agent) {
        return error(
            StatusCode::NOT_FOUND,
            &format!("there is no agent `{agent}` in the running org"),
        );
    }
    let namespaces =
        opc_memory::acl::Acl::new(&loaded.config, Arc::new(loaded.org.clone())).readable(&agent);
    let limit = search.limit.unwrap_or(10).clamp(1, MAX_HITS);
    let recall = recall.clone();
    let text = search.q;
    let found = tokio::task::spawn_blocking(move || {
        recall.search(&RecallQuery::new(text, namespaces, Mode::Hybrid, limit))
    })
    .await;
    match found {
        Ok(Ok(hits)) => Json(json!({"agent": agent, "hits": hits})).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the search did not finish",
        ),
    }
}

/// Which facts the Memory page lists: at most one of `at`, `valid_at` and `history`.
#[derive(Deserialize)]
pub struct FactsQuery {
    /// Whose facts; the root by default.
    agent: Option<String>,
    /// Believed at this time (RFC 3339, or a date: its start, UTC).
    at: Option<String>,
    /// True in the world at this time.
    valid_at: Option<String>,
    /// Every version.
    #[serde(default)]
    history: bool,
}

/// Run `read` on a read-only fact store of the running database, off the async threads; `Ok(None)`
/// when the database does not exist yet (nothing was ever stored).
async fn read_facts<T: Send + 'static>(
    admin: &Admin,
    read: impl FnOnce(&FactStore) -> Result<T, opc_memory::facts::FactError> + Send + 'static,
) -> Result<Option<T>, Response> {
    let Some(live) = admin.live.get() else {
        return Err(not_running());
    };
    let loaded = live.get();
    let database = crate::setup::database_choice(&loaded);
    let done = tokio::task::spawn_blocking(move || {
        let store = match database.map_err(opc_memory::facts::FactError::Invalid)? {
            crate::setup::Database::Postgres { url, .. } => {
                let conn = opc_pg::Blocking::connect(&url, "admin")?;
                FactStore::open_postgres_read_only(conn, EmbedSlot::new())?
            }
            crate::setup::Database::Sqlite(database) => {
                if !database.exists() {
                    return Ok(None);
                }
                FactStore::open_read_only(&database, EmbedSlot::new())?
            }
        };
        read(&store).map(Some)
    })
    .await;
    match done {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(e)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot read the facts: {e}"),
        )),
        Err(_) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the read did not finish",
        )),
    }
}

/// `GET /admin/api/memory/facts?agent=…[&at=TIME | &valid_at=TIME | &history=true]`: an agent's
/// facts as `opc memory facts` lists them — `{agent, archival, view, time, facts: [...]}`, each fact
/// as in `opc memory facts --format json`. `archival` says whether the agent records new facts
/// (stored ones are listed either way).
pub async fn facts(
    State(admin): State<Arc<Admin>>,
    query: Result<Query<FactsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Some(live) = admin.live.get() else {
        return not_running();
    };
    let Ok(Query(query)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the facts as ?agent=<id>, and at most one of &at=<time>, &valid_at=<time> or &history=true",
        );
    };
    let loaded = live.get();
    let agent = query
        .agent
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| loaded.org.root().to_string());
    let Some(config) = loaded.config.agents.get(&agent) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("there is no agent `{agent}` in the running org"),
        );
    };
    let archival = config.memory.archival;
    let time = |name: &str, text: Option<String>| -> Result<Option<i64>, String> {
        match text.filter(|t| !t.trim().is_empty()) {
            None => Ok(None),
            Some(t) => opc_memory::facts::time::parse_time(&t)
                .map(Some)
                .map_err(|e| format!("`{name}`: {e}")),
        }
    };
    let (at, valid_at) = match (time("at", query.at), time("valid_at", query.valid_at)) {
        (Ok(at), Ok(valid_at)) => (at, valid_at),
        (Err(e), _) | (_, Err(e)) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let view = match (query.history, at, valid_at) {
        (false, None, None) => View::Current,
        (false, Some(t), None) => View::BelievedAt(t),
        (false, None, Some(t)) => View::ValidAt(t),
        (true, None, None) => View::History,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "`at`, `valid_at` and `history` are different views: give at most one",
            );
        }
    };
    let (name, time) = match view {
        View::Current => ("current", None),
        View::BelievedAt(t) => ("at", Some(t)),
        View::ValidAt(t) => ("valid_at", Some(t)),
        View::History => ("history", None),
    };
    let namespace = opc_memory::blocks::agent_namespace(&agent);
    match read_facts(&admin, move |store| store.list(&namespace, view)).await {
        Ok(found) => Json(json!({
            "agent": agent,
            "archival": archival,
            "view": name,
            "time": time.map(opc_memory::facts::time::format_time),
            "facts": found.unwrap_or_default().iter().map(FactVersion::to_json).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(response) => response,
    }
}

/// `GET /admin/api/memory/facts/{fact_id}`: every version of one fact, oldest first
/// (`{fact_id, versions: [...]}`), each as in `opc memory facts --format json`.
pub async fn fact_history(
    State(admin): State<Arc<Admin>>,
    id: Result<Path<i64>, axum::extract::rejection::PathRejection>,
) -> Response {
    let Ok(Path(fact_id)) = id else {
        return error(
            StatusCode::BAD_REQUEST,
            "the fact id is a number: /admin/api/memory/facts/<fact_id>",
        );
    };
    match read_facts(&admin, move |store| store.history(fact_id)).await {
        Ok(Some(versions)) if !versions.is_empty() => Json(json!({
            "fact_id": fact_id,
            "versions": versions.iter().map(FactVersion::to_json).collect::<Vec<_>>(),
        }))
        .into_response(),
        Ok(_) => error(
            StatusCode::NOT_FOUND,
            &format!("there is no fact {fact_id}"),
        ),
        Err(response) => response,
    }
}

/// `GET /admin/api/privacy`: whether the privacy gateway is on and in which mode, where its NER model
/// stands (`ner`: `{"state": "off" | "pattern_only" | "loading" | "ready" | "failed", "reason"?}`, plus
/// `requireNer` and `nerWait` in seconds), and what it did per day over the last 30 days (counts by
/// type, calls routed, calls blocked).
pub async fn privacy(State(admin): State<Arc<Admin>>) -> Response {
    let (Some(live), Some(gateway)) = (admin.live.get(), admin.gateway.get()) else {
        return not_running();
    };
    let loaded = live.get();
    let settings = &loaded.config.framework.privacy;
    let engine = gateway.engine().clone();
    let ner = opc_agents::llm::privacy::readiness(&loaded.config, &engine.ner_slot());
    let since = opc_agents::store::now_ms() - PRIVACY_DAYS * 86_400_000;
    match tokio::spawn(async move { engine.store().privacy_by_day(since).await }).await {
        Ok(Ok(days)) => Json(json!({
            "enabled": settings.enabled,
            "mode": format!("{:?}", settings.mode).to_lowercase(),
            "ner": ner,
            "requireNer": settings.require_ner,
            "nerWait": settings.ner_wait.as_secs_f64(),
            "days": days,
        }))
        .into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}
