//! The console's logs: the engine's events stored with a retention ([`store`], [`recorder`]) and read
//! back, filtered and exported, by `GET /admin/api/events/history` ([`query`]) — the Events page's
//! history below its live tail (`assets/logs.js`) and the overview's last events.
//!
//! Invariants:
//! - the stored events are those the console streams (streamed tokens aside), from this process's
//!   engine only (each node of a cluster records its own, tagged with its node id), without answer
//!   text;
//! - recording never slows a request: the engine's bus is followed by a task that only hands rows on;
//!   a blocking writer commits them in groups;
//! - history that cannot be opened (a database from a newer build, a server that is down at start)
//!   leaves the rest of the console working: start-up says why in one line, and the history answers
//!   503 with the same reason.

mod query;
mod recorder;
pub(super) mod store;

use std::sync::Arc;

use axum::http::Method;
use opc_adapters::Page;

pub(super) use query::read;
use store::EventStore;

use super::Admin;

/// The stored events of a running `opc run`: a connection for the console's reads (the recorder
/// has its own), or why there is none.
#[derive(Debug)]
pub(super) struct History {
    store: Result<Arc<EventStore>, String>,
}

/// Open the stored events in the org's database (the one `opc run` started with), start recording
/// `engine`'s events there as `node`, with the retention read from `live` at each purge.
pub(super) fn start(
    engine: &opc_agents::Engine,
    live: &Arc<crate::live::LiveConfig>,
    node: Option<String>,
) -> History {
    let open = || -> Result<(EventStore, EventStore), String> {
        match crate::setup::database_choice(&live.started())? {
            crate::setup::Database::Sqlite(path) => Ok((
                EventStore::open_sqlite(&path).map_err(|e| e.to_string())?,
                EventStore::open_sqlite(&path).map_err(|e| e.to_string())?,
            )),
            crate::setup::Database::Postgres { url, .. } => {
                let connect = |what| {
                    opc_pg::Blocking::connect(&url, what)
                        .map_err(|e| e.to_string())
                        .and_then(|c| EventStore::open_postgres(c).map_err(|e| e.to_string()))
                };
                Ok((connect("console-events")?, connect("console")?))
            }
        }
    };
    match open() {
        Ok((writer, reader)) => {
            let live = live.clone();
            recorder::start(engine, writer, node, move || {
                live.get().config.framework.console.event_retention
            });
            History {
                store: Ok(Arc::new(reader)),
            }
        }
        Err(why) => {
            crate::term::eprint(&format!(
                "opc: the console keeps no event history this run: {why}\n"
            ));
            History { store: Err(why) }
        }
    }
}

/// The stored events' reading connection, or why there is none (a 503's message).
pub(super) fn reader(admin: &Admin) -> Result<Arc<EventStore>, String> {
    match admin.history.get().map(|h| &h.store) {
        Some(Ok(store)) => Ok(store.clone()),
        Some(Err(why)) => Err(format!("the event history is not available: {why}")),
        None => Err("the gateway is not running in this process".into()),
    }
}

/// This module's endpoints.
pub(super) fn pages(admin: &Arc<Admin>) -> Vec<Page> {
    vec![Page::new(
        Method::GET,
        "/admin/api/events/history",
        query::history,
        admin.clone(),
    )]
}
