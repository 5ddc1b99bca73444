//! The sessions table in SQLite, in the engine's database file.
//!
//! Invariants: each write is one statement (an implicit transaction); the connection uses WAL like
//! the engine's, so readers never block writers.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::{Row, SessionsError};

/// The sessions' migrations on SQLite, in order (append only; never edit a published one).
const MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "console sign-in sessions",
    sql: V1,
}];

/// The sessions table as a component of the SQLite database file.
pub const COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "sessions",
    migrations: MIGRATIONS,
    legacy: opc_migrate::Legacy::None,
};

const V1: &str = "
CREATE TABLE console_sessions (
    id_digest    TEXT PRIMARY KEY,
    role         TEXT NOT NULL,
    token_check  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
";

fn failed(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> SessionsError {
    move |source| SessionsError::Sqlite { doing, source }
}

/// The database at `path` (created if needed), with the table up to date.
pub(super) fn open(path: &Path) -> Result<Connection, SessionsError> {
    let mut conn = Connection::open(path).map_err(failed("opening the database"))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(failed("setting the busy timeout"))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(failed("enabling WAL"))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(failed("setting synchronous"))?;
    opc_migrate::migrate(&mut conn, &COMPONENT)?;
    Ok(conn)
}

pub(super) fn insert(conn: &Connection, key: &str, row: &Row) -> Result<(), SessionsError> {
    conn.prepare_cached(
        "INSERT INTO console_sessions (id_digest, role, token_check, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| s.execute(params![key, row.0, row.1, row.2, row.3]))
    .map_err(failed("keeping a session"))?;
    Ok(())
}

pub(super) fn find(conn: &Connection, key: &str) -> Result<Option<Row>, SessionsError> {
    conn.prepare_cached(
        "SELECT role, token_check, created_at, expires_at FROM console_sessions WHERE id_digest = ?1",
    )
    .and_then(|mut s| {
        s.query_row([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()
    })
    .map_err(failed("looking up a session"))
}

pub(super) fn remove(conn: &Connection, key: &str) -> Result<(), SessionsError> {
    conn.prepare_cached("DELETE FROM console_sessions WHERE id_digest = ?1")
        .and_then(|mut s| s.execute([key]))
        .map_err(failed("deleting a session"))?;
    Ok(())
}

pub(super) fn purge(conn: &Connection, now_ms: i64) -> Result<u64, SessionsError> {
    let n = conn
        .prepare_cached("DELETE FROM console_sessions WHERE expires_at <= ?1")
        .and_then(|mut s| s.execute([now_ms]))
        .map_err(failed("purging expired sessions"))?;
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}
