//! The sessions table in PostgreSQL (`framework.memory.storage: postgres`), shared by a cluster's
//! nodes, over one [`opc_pg::Blocking`] connection.
//!
//! Invariants: each write is one statement, committed by itself; a PostgreSQL database has no
//! legacy: its story starts at this file's migration 1, the SQLite schema in PostgreSQL's types
//! (integers `BIGINT`, read as `i64`).

use opc_pg::Blocking;

use super::{Row, SessionsError};

/// The sessions' migrations on PostgreSQL, in order (append only; never edit a published one).
const MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "console sign-in sessions",
    sql: V1,
}];

/// The sessions table in a PostgreSQL database: its `schema_versions` row is `sessions`, as on
/// SQLite.
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
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
";

pub(super) fn insert(conn: &Blocking, key: String, row: Row) -> Result<(), SessionsError> {
    conn.run("keeping a session", move |client| {
        client.execute(
            "INSERT INTO console_sessions (id_digest, role, token_check, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
            &[&key, &row.0, &row.1, &row.2, &row.3],
        )
    })?;
    Ok(())
}

pub(super) fn find(conn: &Blocking, key: String) -> Result<Option<Row>, SessionsError> {
    Ok(conn.run("looking up a session", move |client| {
        client
            .query_opt(
                "SELECT role, token_check, created_at, expires_at FROM console_sessions \
                 WHERE id_digest = $1",
                &[&key],
            )?
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
            .transpose()
    })?)
}

pub(super) fn remove(conn: &Blocking, key: String) -> Result<(), SessionsError> {
    conn.run("deleting a session", move |client| {
        client.execute("DELETE FROM console_sessions WHERE id_digest = $1", &[&key])
    })?;
    Ok(())
}

pub(super) fn purge(conn: &Blocking, now_ms: i64) -> Result<u64, SessionsError> {
    Ok(conn.run("purging expired sessions", move |client| {
        client.execute(
            "DELETE FROM console_sessions WHERE expires_at <= $1",
            &[&now_ms],
        )
    })?)
}
