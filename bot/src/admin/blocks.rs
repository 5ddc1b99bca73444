//! The Memory page's block editor: an admin changes a core memory block's value
//! (`POST /admin/api/memory/blocks/edit`) and reads a block's history
//! (`GET /admin/api/memory/blocks/history`). The list itself is `GET /admin/api/memory/blocks`
//! ([`super::memory::blocks`]).
//!
//! How it reaches the blocks: as the list does, on a connection of its own to the org's database
//! (the engine's SQLite file, or PostgreSQL) — the console holds no `BlockStore` — through
//! [`opc_memory::blocks::admin_write`], which keeps every rule of an edit but the agents' ACL.
//!
//! Invariants:
//! - an edit is one transaction that holds the block while it checks: a read-only block is refused
//!   (403: it follows the config), an edit from an older version is refused (409) with the current
//!   value and version so the page can show both texts and nothing typed is lost, a value over the
//!   block's limit is refused (400, saying by how many characters);
//! - every change is in the block's history with the author `admin`;
//! - a viewer cannot edit: the listener refuses a viewer's POST before it reaches this module;
//! - a block's value is never logged (it may hold anything an agent noted): only its name and version.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use opc_adapters::Page;
use opc_memory::blocks::{AdminEdit, Block, BlockError, HistoryEntry, SHARED};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Admin;
use super::config::error;

/// This module's endpoints.
pub(super) fn pages(admin: &Arc<Admin>) -> Vec<Page> {
    vec![
        Page::new(
            Method::POST,
            "/admin/api/memory/blocks/edit",
            edit,
            admin.clone(),
        )
        .body_limit(super::MAX_BODY_BYTES),
        Page::new(
            Method::GET,
            "/admin/api/memory/blocks/history",
            history,
            admin.clone(),
        ),
    ]
}

/// An edit from the console: the whole new value of one block, and the version it was made from.
#[derive(Deserialize)]
struct EditBody {
    namespace: String,
    label: String,
    value: String,
    version: u64,
}

/// Which block's history.
#[derive(Deserialize)]
struct Which {
    namespace: String,
    label: String,
}

/// Where the org's blocks are, as the running config says.
enum Place {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

/// The running config's database, or why there is none (the status and message of the answer).
fn place(admin: &Admin) -> Result<Place, (StatusCode, String)> {
    let Some(live) = admin.live.get() else {
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is not running in this process".to_string(),
        ));
    };
    match crate::setup::database_choice(&live.get()) {
        Ok(crate::setup::Database::Sqlite(path)) => Ok(Place::Sqlite(path)),
        Ok(crate::setup::Database::Postgres { url, .. }) => Ok(Place::Postgres(url)),
        Err(message) => Err((StatusCode::INTERNAL_SERVER_ERROR, message)),
    }
}

/// A block's name as the page shows it: `shared/<label>` or `<agent>/<label>`.
fn name(namespace: &str, label: &str) -> String {
    match namespace.strip_prefix("agent/") {
        Some(agent) => format!("{agent}/{label}"),
        None => format!("{namespace}/{label}"),
    }
}

/// Where the config sets a block's value, for the read-only refusal's hint.
fn config_key(namespace: &str, label: &str) -> String {
    match namespace.strip_prefix("agent/") {
        Some(agent) => format!("agents.{agent}.memory.blocks (label `{label}`)"),
        None => format!("sharedBlocks.{label}"),
    }
}

fn block_json(b: &Block) -> Value {
    json!({
        "namespace": b.namespace,
        "label": b.label,
        "description": b.description,
        "chars": b.size(),
        "value": b.value,
        "limit": b.limit,
        "read_only": b.read_only,
        "version": b.version,
    })
}

/// `POST /admin/api/memory/blocks/edit` with `{"namespace", "label", "value", "version"}`: write the
/// block's whole value as the admin, from `version`. 200 `{"block"}`; 400 over the limit (`limit`,
/// `chars`, `over`); 403 read-only; 404 no such block; 409 stale (`current: {value, version}`).
async fn edit(
    State(admin): State<Arc<Admin>>,
    body: Result<Json<EditBody>, JsonRejection>,
) -> Response {
    let Ok(Json(body)) = body else {
        return error(
            StatusCode::BAD_REQUEST,
            "expected a JSON body {\"namespace\": \"agent/<id>\" or \"shared\", \"label\": \"…\", \"value\": \"the whole new text\", \"version\": <the version you read>}",
        );
    };
    if body.namespace != SHARED && !body.namespace.starts_with("agent/") {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "`namespace` is `agent/<id>` or `shared`, not `{}`",
                body.namespace
            ),
        );
    }
    let place = match place(&admin) {
        Ok(place) => place,
        Err((status, message)) => return error(status, &message),
    };
    let edit = AdminEdit {
        namespace: body.namespace,
        label: body.label,
        value: body.value,
        version: body.version,
    };
    let job = edit.clone();
    let written = tokio::task::spawn_blocking(move || match place {
        Place::Sqlite(path) => {
            if !path.exists() {
                return Err(BlockError::NotFound {
                    label: job.label.clone(),
                    owner: None,
                    available: Vec::new(),
                });
            }
            let mut conn = opc_memory::schema::open(&path)?;
            opc_memory::blocks::admin_write(&mut conn, &job)
        }
        Place::Postgres(url) => {
            let conn = opc_pg::Blocking::connect(&url, "admin")?;
            opc_memory::blocks::admin_write_postgres(&conn, &job)
        }
    })
    .await;
    let shown = name(&edit.namespace, &edit.label);
    match written {
        Ok(Ok(block)) => {
            tracing::info!(
                block = %shown,
                version = block.version,
                "memory block edited from the admin console"
            );
            Json(json!({"block": block_json(&block)})).into_response()
        }
        Ok(Err(BlockError::Stale { current, value, .. })) => (
            StatusCode::CONFLICT,
            Json(json!({
                "error": format!(
                    "memory block {shown} changed since you opened it (you edited version {}, it is now version {current}); nothing was saved. Its current text is shown beside yours: merge them and save again",
                    edit.version
                ),
                "current": {"value": value, "version": current},
            })),
        )
            .into_response(),
        Ok(Err(BlockError::OverLimit {
            limit, new_size, ..
        })) => (
            StatusCode::BAD_REQUEST,
            Json(json!({
                "error": format!(
                    "memory block {shown} holds at most {limit} characters: this text has {new_size}, {} too many; shorten it",
                    new_size.saturating_sub(limit as usize)
                ),
                "limit": limit,
                "chars": new_size,
                "over": new_size.saturating_sub(limit as usize),
            })),
        )
            .into_response(),
        Ok(Err(BlockError::ReadOnly { .. })) => (
            StatusCode::FORBIDDEN,
            Json(json!({
                "error": format!(
                    "memory block {shown} is read-only: read-only blocks come from the config; change its value in {} (the next start or reload applies it)",
                    config_key(&edit.namespace, &edit.label)
                ),
                "read_only": true,
            })),
        )
            .into_response(),
        Ok(Err(BlockError::NotFound { .. })) => error(
            StatusCode::NOT_FOUND,
            &format!(
                "there is no memory block {shown} (namespace `{}`, label `{}`): blocks are defined in the config",
                edit.namespace, edit.label
            ),
        ),
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot edit memory block {shown}: {e}"),
        ),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the edit did not finish"),
    }
}

fn entry_json(e: &HistoryEntry) -> Value {
    json!({
        "version": e.version,
        "operation": e.operation,
        "author": e.author,
        "task": e.task,
        "at": e.at_ms,
        "old_value": e.old_value,
        "new_value": e.new_value,
    })
}

/// `GET /admin/api/memory/blocks/history?namespace=…&label=…`: the block's changes, newest first
/// (`{"history": [{version, operation, author, task, at, old_value, new_value}]}`); 404 when the
/// block has none (it does not exist).
async fn history(
    State(admin): State<Arc<Admin>>,
    which: Result<Query<Which>, QueryRejection>,
) -> Response {
    let Ok(Query(which)) = which else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the block: /admin/api/memory/blocks/history?namespace=agent/<id>|shared&label=<label>",
        );
    };
    let place = match place(&admin) {
        Ok(place) => place,
        Err((status, message)) => return error(status, &message),
    };
    let (namespace, label) = (which.namespace.clone(), which.label.clone());
    let read = tokio::task::spawn_blocking(move || match place {
        Place::Sqlite(path) => {
            if !path.exists() {
                return Ok(Vec::new());
            }
            let conn = rusqlite::Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )?;
            let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
            opc_memory::blocks::read_history(&conn, &label, Some(&namespace))
        }
        Place::Postgres(url) => {
            let conn = opc_pg::Blocking::connect(&url, "admin")?;
            opc_memory::blocks::read_history_postgres(&conn, &label, Some(&namespace))
        }
    })
    .await;
    let shown = name(&which.namespace, &which.label);
    match read {
        Ok(Ok(entries)) if entries.is_empty() => error(
            StatusCode::NOT_FOUND,
            &format!("there is no memory block {shown}"),
        ),
        Ok(Ok(entries)) => {
            let list: Vec<Value> = entries.iter().rev().map(entry_json).collect();
            Json(json!({"namespace": which.namespace, "label": which.label, "history": list}))
                .into_response()
        }
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot read the history of memory block {shown}: {e}"),
        ),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_named_as_the_page_names_it_and_its_config_key_is_given() {
        assert_eq!(name("agent/support", "notes"), "support/notes");
        assert_eq!(name(SHARED, "plan"), "shared/plan");
        assert_eq!(config_key(SHARED, "plan"), "sharedBlocks.plan");
        assert_eq!(
            config_key("agent/ceo", "persona"),
            "agents.ceo.memory.blocks (label `persona`)"
        );
    }
}
