//! The memory crate's migrations (core blocks, recall, erasures, facts), in the engine's SQLite file:
//! the one owner of memory's SQL schema.
//!
//! They are the `memory` component of the file's one migration story ([`opc_migrate`]): its version is
//! the `memory` row of `schema_versions`. Before that table, memory kept its version in
//! `memory_schema(version)`, one row: a database from then is adopted at that version (nothing
//! re-runs), and `memory_schema` is kept in step so that those older builds still refuse a database
//! upgraded past them.
//!
//! Map: one file per migration, in order: [`blocks`] (1), [`recall`] (2), [`erasures`] (3), [`facts`]
//! (4), [`graph`] (5), [`embeddings`] (6). The features (blocks, recall, facts) call [`migrate`] and [`open`] and depend on this module;
//! it depends on none of them, so a feature's SQL never reaches back into the list that creates it.
//!
//! Invariants:
//! - all pending migrations run in ONE `BEGIN IMMEDIATE` transaction, together with the version bump,
//!   so a crash leaves the schema at the old version or the new one, never between;
//! - a database whose memory schema is newer than this build knows is refused with a clear error
//!   (an older binary must not write tables whose meaning it does not know);
//! - migrations are append-only: a released migration's SQL is never edited, only followed.

pub mod blocks;
pub mod embeddings;
pub mod erasures;
pub mod facts;
pub mod graph;
/// Memory's tables on PostgreSQL (SQL only).
pub mod postgres;
pub mod recall;

use opc_migrate::{Component, Legacy, Migration};
use rusqlite::Connection;

/// Every migration, in order: migration `n` (1-based) brings the memory tables to version `n`.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        what: "core memory blocks and their history",
        sql: blocks::V1,
    },
    Migration {
        what: "recall messages and their vectors",
        sql: recall::V2,
    },
    Migration {
        what: "the record of recall erasures",
        sql: erasures::V3,
    },
    Migration {
        what: "facts: bi-temporal versions, entities, their FTS5 index and vectors",
        sql: facts::V4,
    },
    Migration {
        what: "graph memory: relations (predicate, object entity) on fact versions",
        sql: graph::V5,
    },
    Migration {
        what: "embedding generations: vectors keyed by (row, model) and each generation's state",
        sql: embeddings::V6,
    },
];

/// The memory tables as a component of the file: its `schema_versions` row is `memory`.
pub const COMPONENT: Component = Component {
    name: "memory",
    migrations: MIGRATIONS,
    legacy: Legacy::VersionTable("memory_schema"),
};

/// Why the memory schema could not be brought up to date (the database keeps its previous version).
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A newer build wrote the tables, or a migration failed; the message says which, and where.
    /// (Boxed: the engine's errors carry this one, and stay small.)
    #[error(transparent)]
    Migrate(Box<opc_migrate::MigrateError>),
}

impl From<opc_migrate::MigrateError> for SchemaError {
    fn from(error: opc_migrate::MigrateError) -> Self {
        SchemaError::Migrate(Box::new(error))
    }
}

/// Bring the memory tables up to [`COMPONENT`]'s version, in one immediate transaction.
/// Returns the version before migrating.
pub fn migrate(conn: &mut Connection) -> Result<i64, SchemaError> {
    Ok(opc_migrate::migrate(conn, &COMPONENT)?.from)
}

/// Open a connection to the engine's database the way memory uses it: WAL, a 5 s busy timeout, foreign
/// keys on. Memory always uses its own connections, never the engine store's.
pub fn open(path: &std::path::Path) -> Result<Connection, rusqlite::Error> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn migrates_once_and_leaves_user_version_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("db.sqlite")).unwrap();
        conn.pragma_update(None, "user_version", 7).unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), 0);
        assert_eq!(migrate(&mut conn).unwrap(), MIGRATIONS.len() as i64);
        let uv: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(uv, 7);
        let version: i64 = conn
            .query_row(
                "SELECT version FROM schema_versions WHERE component = 'memory'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
    }

    #[test]
    fn a_database_with_memory_schema_is_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("db.sqlite")).unwrap();
        conn.execute_batch(blocks::V1).unwrap();
        conn.execute_batch(
            "CREATE TABLE memory_schema (version INTEGER NOT NULL); INSERT INTO memory_schema VALUES (1);
             INSERT INTO memory_blocks VALUES ('shared', 'policy', 'd', 'be kind', 100, 0, 1, 'be kind', 5);",
        )
        .unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), 1, "adopted at version 1");
        let value: String = conn
            .query_row("SELECT value FROM memory_blocks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(value, "be kind");
        let kept: i64 = conn
            .query_row("SELECT version FROM memory_schema", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            kept,
            MIGRATIONS.len() as i64,
            "kept in step for older builds"
        );
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("db.sqlite")).unwrap();
        migrate(&mut conn).unwrap();
        conn.execute(
            "UPDATE schema_versions SET version = 99 WHERE component = 'memory'",
            [],
        )
        .unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(
            matches!(
                &err,
                SchemaError::Migrate(e) if matches!(**e, opc_migrate::MigrateError::TooNew { found: 99, .. })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("newer `opc`"));
    }
}
