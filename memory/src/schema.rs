//! The memory crate's own schema version and migrations, in the engine's SQLite file.
//!
//! Why a table rather than `PRAGMA user_version`: the engine's migrations (agents/src/store/schema.rs)
//! own `user_version`, and two crates versioning one integer would overwrite each other. Memory keeps
//! its version in `memory_schema(version)`, one row, and never touches `user_version`.
//!
//! Invariants:
//! - all pending migrations run in ONE `BEGIN IMMEDIATE` transaction, together with the version bump,
//!   so a crash leaves the schema at the old version or the new one, never between;
//! - a database whose memory schema is newer than this build knows is refused with a clear error
//!   (an older binary must not write tables whose meaning it does not know);
//! - migrations are append-only: a released migration's SQL is never edited, only followed.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

/// Migration 1: core memory blocks and their edit history.
///
/// A block is keyed by `(namespace, label)`. `namespace` is `agent/<id>` for an agent's own blocks
/// and `shared` for `sharedBlocks`. `config_value` is the config value last applied, so a start can
/// tell an admin's edit of the config (apply it, record it) from the agents' edits since (keep them).
const V1: &str = "
CREATE TABLE memory_blocks (
    namespace    TEXT    NOT NULL,
    label        TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    value        TEXT    NOT NULL,
    char_limit   INTEGER NOT NULL,
    read_only    INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    config_value TEXT    NOT NULL,
    updated_ms   INTEGER NOT NULL,
    PRIMARY KEY (namespace, label)
) WITHOUT ROWID;
CREATE TABLE memory_block_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace  TEXT    NOT NULL,
    label      TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    operation  TEXT    NOT NULL,
    author     TEXT    NOT NULL,
    task_id    INTEGER,
    at_ms      INTEGER NOT NULL,
    old_value  TEXT,
    new_value  TEXT    NOT NULL
);
CREATE INDEX memory_block_history_by_label ON memory_block_history (label, id);
";

/// Every migration, in order: index `i` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[V1, crate::recall::schema_sql::V2, crate::recall::erase::V3];

/// Why the memory schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The database was written by a newer build.
    #[error(
        "the memory tables in this database are at schema version {found}, but this build knows only up to {known}: \
         run a newer `opc`, or point `framework.memory.path` at another file"
    )]
    TooNew {
        /// The stored version.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// SQLite failed.
    #[error("memory schema migration failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// Bring the memory tables up to [`MIGRATIONS`]`.len()`, in one immediate transaction.
/// Returns the version before migrating.
pub fn migrate(conn: &mut Connection) -> Result<i64, SchemaError> {
    let known = MIGRATIONS.len() as i64;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS memory_schema (version INTEGER NOT NULL);")?;
    let stored: Option<i64> = tx
        .query_row("SELECT version FROM memory_schema", [], |r| r.get(0))
        .optional()?;
    let found = stored.unwrap_or(0);
    if found > known {
        return Err(SchemaError::TooNew { found, known });
    }
    for sql in &MIGRATIONS[found as usize..] {
        tx.execute_batch(sql)?;
    }
    match stored {
        None => tx.execute("INSERT INTO memory_schema (version) VALUES (?1)", [known])?,
        Some(_) => tx.execute("UPDATE memory_schema SET version = ?1", [known])?,
    };
    tx.commit()?;
    Ok(found)
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
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM memory_schema", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("db.sqlite")).unwrap();
        migrate(&mut conn).unwrap();
        conn.execute("UPDATE memory_schema SET version = 99", [])
            .unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(
            matches!(err, SchemaError::TooNew { found: 99, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("newer `opc`"));
    }
}
