//! The gateway's records in SQLite, in the engine's database file.
//!
//! Before `schema_versions` the gateway kept no version: a database holding `gateway_threads` is
//! adopted at version 1, the schema it had then.
//!
//! Invariants: each write is one statement (an implicit transaction); the connection uses WAL like
//! the engine's, so readers never block writers; SQLite serialises writers, across processes too.

use std::collections::HashMap;
use std::path::Path;

use opc_agents::store::now_ms;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Binding, Key, StoredCard, ThreadsError};

/// The gateway's migrations on SQLite, in order (append only; never edit a published one).
const MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "chat threads and approval cards",
    sql: V1,
}];

/// The gateway's tables as a component of the SQLite database file.
pub const COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "gateway",
    migrations: MIGRATIONS,
    legacy: opc_migrate::Legacy::TableExists {
        table: "gateway_threads",
        version: 1,
    },
};

/// Migration 1 (`IF NOT EXISTS` as it was when these tables had no version).
const V1: &str = "
CREATE TABLE IF NOT EXISTS gateway_threads (
    platform      TEXT NOT NULL,
    workspace     TEXT NOT NULL,
    thread        TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    place         TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (platform, workspace, thread)
);
CREATE INDEX IF NOT EXISTS gateway_threads_by_conversation ON gateway_threads (conversation);
CREATE TABLE IF NOT EXISTS gateway_cards (
    approval  INTEGER NOT NULL,
    posted    TEXT NOT NULL,
    card      TEXT NOT NULL,
    PRIMARY KEY (approval, posted)
);
";

fn failed(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> ThreadsError {
    move |source| ThreadsError::Sqlite { doing, source }
}

/// The database at `path` (created if needed), with its tables up to date.
pub(super) fn open(path: &Path) -> Result<Connection, ThreadsError> {
    let mut conn = Connection::open(path).map_err(failed("opening the database"))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(failed("setting the busy timeout"))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(failed("enabling WAL"))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(failed("setting synchronous"))?;
    // A small page cache: lookups by key touch a few pages each.
    conn.pragma_update(None, "cache_size", -256)
        .map_err(failed("setting the cache size"))?;
    opc_migrate::migrate(&mut conn, &COMPONENT)?;
    Ok(conn)
}

const CONVERSATION: &str = "SELECT conversation, place FROM gateway_threads \
                            WHERE platform = ?1 AND workspace = ?2 AND thread = ?3";

pub(super) fn conversation(
    conn: &Connection,
    key: &Key,
) -> Result<Option<(String, String)>, ThreadsError> {
    conn.prepare_cached(CONVERSATION)
        .and_then(|mut stmt| {
            stmt.query_row(params![key.platform, key.workspace, key.thread], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
        })
        .map_err(failed("looking up a thread"))
}

pub(super) fn platforms(conn: &Connection) -> Result<HashMap<String, String>, ThreadsError> {
    let mut stmt = conn
        .prepare_cached("SELECT conversation, platform FROM gateway_threads")
        .map_err(failed("listing threads"))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(failed("listing threads"))?;
    rows.collect::<Result<_, _>>()
        .map_err(failed("listing threads"))
}

pub(super) fn place_of(
    conn: &Connection,
    conversation: &str,
) -> Result<Option<String>, ThreadsError> {
    conn.prepare_cached(
        "SELECT place FROM gateway_threads WHERE conversation = ?1 ORDER BY created_at LIMIT 1",
    )
    .and_then(|mut stmt| stmt.query_row([conversation], |r| r.get(0)).optional())
    .map_err(failed("looking up a conversation's thread"))
}

/// Insert unless the thread is recorded, then read back who holds it.
pub(super) fn bind(conn: &Connection, binding: &Binding) -> Result<String, ThreadsError> {
    let key = &binding.key;
    conn.prepare_cached(
        "INSERT INTO gateway_threads (platform, workspace, thread, conversation, place, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            key.platform,
            key.workspace,
            key.thread,
            binding.conversation,
            binding.place,
            now_ms()
        ])
    })
    .map_err(failed("recording a thread"))?;
    conn.prepare_cached(
        "SELECT conversation FROM gateway_threads \
         WHERE platform = ?1 AND workspace = ?2 AND thread = ?3",
    )
    .and_then(|mut stmt| {
        stmt.query_row(params![key.platform, key.workspace, key.thread], |r| {
            r.get(0)
        })
    })
    .map_err(failed("reading a thread back"))
}

pub(super) fn add_card(conn: &Connection, card: &StoredCard) -> Result<(), ThreadsError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO gateway_cards (approval, posted, card) VALUES (?1, ?2, ?3)",
    )
    .and_then(|mut stmt| stmt.execute(params![card.approval, card.posted, card.card]))
    .map_err(failed("recording an approval card"))?;
    Ok(())
}

pub(super) fn cards(
    conn: &Connection,
    approval: i64,
) -> Result<Vec<(String, String)>, ThreadsError> {
    let mut stmt = conn
        .prepare_cached("SELECT posted, card FROM gateway_cards WHERE approval = ?1")
        .map_err(failed("reading approval cards"))?;
    let rows = stmt
        .query_map([approval], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(failed("reading approval cards"))?;
    rows.collect::<Result<_, _>>()
        .map_err(failed("reading approval cards"))
}
