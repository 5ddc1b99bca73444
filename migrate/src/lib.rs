//! # opc-migrate — one migration story for the one database file
//!
//! Role: every table in OPC's SQLite file (`framework.memory.path`) is created and changed only by a
//! versioned migration of the component that owns it: `agents` (tasks, ledger, approvals, notices),
//! `memory` (core blocks, recall, erasures), `web` (the web chat's transcript) and `gateway` (threads and
//! approval cards). Each component lists its migrations in order; [`migrate`] brings one component up to
//! date and records its version in `schema_versions`, one row per component.
//!
//! Invariants:
//! - a component's pending migrations and its version row change in ONE `BEGIN IMMEDIATE` transaction,
//!   so a crash mid-upgrade leaves the old version (and its old tables), and two processes opening the
//!   file at once (`opc run` and `opc tasks`) cannot both apply a migration;
//! - a database whose version for a component is newer than this build knows is refused
//!   ([`MigrateError::TooNew`]: which component, which file, how to fix), never misread or written;
//! - migrations are append-only: a released migration's SQL is never edited, only followed;
//! - databases from before `schema_versions` are *adopted*: the version the component kept its own way
//!   ([`Legacy`]: `PRAGMA user_version`, a one-row version table, or the mere presence of its tables) is
//!   recorded as it is, without re-running anything. Those old markers are then kept in step, so an
//!   older build that still reads them refuses a newer database instead of misreading it;
//! - opening an up-to-date database writes nothing.

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};

/// One schema change of one component.
#[derive(Debug)]
pub struct Migration {
    /// What it does, named in the error if it fails.
    pub what: &'static str,
    /// The SQL (a batch of statements).
    pub sql: &'static str,
}

/// Where a component kept its version before `schema_versions` existed (read once, to adopt a database
/// made by an older build; then kept in step, see the crate's invariants).
#[derive(Clone, Copy, Debug)]
pub enum Legacy {
    /// Nothing: the component is newer than `schema_versions`.
    None,
    /// `PRAGMA user_version` (the engine's tables).
    UserVersion,
    /// `SELECT MAX(version) FROM <table>`, a table holding the version (memory's `memory_schema`, the
    /// web chat's `web_schema`).
    VersionTable(&'static str),
    /// The component never recorded a version: if `table` exists, the database is at `version`.
    TableExists {
        /// A table its first migration creates.
        table: &'static str,
        /// The version a database holding it is at.
        version: i64,
    },
}

/// A component owning tables in the file, with its migrations in order: migration `n` (1-based) brings
/// the component to version `n`.
#[derive(Debug)]
pub struct Component {
    /// Its name, the key of its `schema_versions` row (`agents`, `memory`, `web`, `gateway`).
    pub name: &'static str,
    /// Every migration, in order.
    pub migrations: &'static [Migration],
    /// Where a database from before `schema_versions` kept its version.
    pub legacy: Legacy,
}

impl Component {
    /// The version this build brings the component to.
    pub const fn version(&self) -> i64 {
        self.migrations.len() as i64
    }
}

/// What [`migrate`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The component's version before (0 for a new database).
    pub from: i64,
    /// Its version now, [`Component::version`].
    pub to: i64,
    /// Whether the version came from a database made before `schema_versions` (and was recorded now).
    pub adopted: bool,
}

/// Why a component's tables could not be brought up to date. The database keeps its previous version.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The database was written by a newer build, whose tables this build does not know.
    #[error(
        "the database {path} holds the {component} tables at schema version {found}, but this build of OPC \
         knows only up to version {known}: a newer OPC wrote it. Run that newer `opc` (or a later one), \
         or point `framework.memory.path` at another file"
    )]
    TooNew {
        /// The component.
        component: &'static str,
        /// The file (`:memory:` for an in-memory database).
        path: String,
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// SQLite failed while doing `what` (a migration's description, or a step around them).
    #[error("cannot upgrade the {component} tables in {path} ({what}): {source}")]
    Sql {
        /// The component.
        component: &'static str,
        /// The file.
        path: String,
        /// The migration or step.
        what: &'static str,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
}

/// The table holding one row per component. Created by [`migrate`] itself (it versions everything
/// else, and its own shape is fixed: a new column would come as a migration of a `schema` component).
const SCHEMA_VERSIONS: &str = "
CREATE TABLE IF NOT EXISTS schema_versions (
    component   TEXT PRIMARY KEY,
    version     INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
);";

/// The file `conn` has open, for errors (`:memory:` for an in-memory or temporary database).
pub fn path_of(conn: &Connection) -> String {
    match conn.path() {
        Some(path) if !path.is_empty() => path.to_string(),
        _ => ":memory:".to_string(),
    }
}

/// Bring `component`'s tables to [`Component::version`], in one immediate transaction; see the crate's
/// invariants. Returns the versions before and after.
pub fn migrate(conn: &mut Connection, component: &Component) -> Result<Applied, MigrateError> {
    let path = path_of(conn);
    let failed = |what: &'static str| {
        let path = path.clone();
        move |source| MigrateError::Sql {
            component: component.name,
            path,
            what,
            source,
        }
    };
    let known = component.version();
    // Read without a write lock first: an up-to-date database (every start but the first after an
    // upgrade) is then opened without writing or waiting for a writer.
    if recorded(conn, component.name).map_err(failed("reading the schema version"))? == Some(known)
    {
        return Ok(Applied {
            from: known,
            to: known,
            adopted: false,
        });
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(failed("starting the schema transaction"))?;
    tx.execute_batch(SCHEMA_VERSIONS)
        .map_err(failed("creating schema_versions"))?;
    let stored = recorded(&tx, component.name).map_err(failed("reading the schema version"))?;
    let (from, adopted) = match stored {
        Some(version) => (version, false),
        None => match legacy_version(&tx, component.legacy)
            .map_err(failed("reading the version kept before schema_versions"))?
        {
            Some(version) => (version, true),
            None => (0, false),
        },
    };
    if from > known {
        return Err(MigrateError::TooNew {
            component: component.name,
            path,
            found: from,
            known,
        });
    }
    let from_index = usize::try_from(from.max(0)).unwrap_or(0);
    for migration in &component.migrations[from_index..] {
        tx.execute_batch(migration.sql)
            .map_err(failed(migration.what))?;
    }
    tx.execute(
        "INSERT INTO schema_versions (component, version, updated_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (component) DO UPDATE SET version = excluded.version, updated_ms = excluded.updated_ms",
        rusqlite::params![component.name, known, now_ms()],
    )
    .map_err(failed("recording the schema version"))?;
    if from != known {
        keep_legacy_in_step(&tx, component.legacy, known)
            .map_err(failed("recording the version for older builds"))?;
    }
    tx.commit().map_err(failed("committing the migrations"))?;
    Ok(Applied {
        from,
        to: known,
        adopted,
    })
}

/// The version `schema_versions` records for `component`, if the table and the row exist.
fn recorded(conn: &Connection, component: &str) -> rusqlite::Result<Option<i64>> {
    if !table_exists(conn, "schema_versions")? {
        return Ok(None);
    }
    conn.query_row(
        "SELECT version FROM schema_versions WHERE component = ?1",
        [component],
        |r| r.get(0),
    )
    .optional()
}

fn table_exists(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [table],
        |r| r.get(0),
    )
}

/// The version a database from before `schema_versions` is at, if it holds the component's tables.
fn legacy_version(tx: &Transaction<'_>, legacy: Legacy) -> rusqlite::Result<Option<i64>> {
    match legacy {
        Legacy::None => Ok(None),
        Legacy::UserVersion => {
            let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            Ok((version > 0).then_some(version))
        }
        Legacy::VersionTable(table) => {
            if !table_exists(tx, table)? {
                return Ok(None);
            }
            tx.query_row(&format!("SELECT MAX(version) FROM \"{table}\""), [], |r| {
                r.get(0)
            })
        }
        Legacy::TableExists { table, version } => Ok(table_exists(tx, table)?.then_some(version)),
    }
}

/// Write `version` where builds from before `schema_versions` look for it, so they refuse a database
/// this build upgraded past them. Only a marker that exists already is updated: a new database gets
/// `schema_versions` alone (apart from `user_version`, which every SQLite file has).
fn keep_legacy_in_step(tx: &Transaction<'_>, legacy: Legacy, version: i64) -> rusqlite::Result<()> {
    match legacy {
        Legacy::None | Legacy::TableExists { .. } => Ok(()),
        // PRAGMA takes no bound parameters; `version` is an integer.
        Legacy::UserVersion => tx.execute_batch(&format!("PRAGMA user_version = {version}")),
        Legacy::VersionTable(table) => {
            if table_exists(tx, table)? {
                tx.execute(&format!("UPDATE \"{table}\" SET version = ?1"), [version])?;
            }
            Ok(())
        }
    }
}

/// The time as every table of the database file stores it: Unix milliseconds, from the system clock
/// (0 before 1970, saturating far in the future). One definition for every crate that writes rows,
/// so no two tables can disagree on the unit or the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TWO: &[Migration] = &[
        Migration {
            what: "a table",
            sql: "CREATE TABLE t (a INTEGER);",
        },
        Migration {
            what: "a column",
            sql: "ALTER TABLE t ADD COLUMN b TEXT;",
        },
    ];

    const fn component(legacy: Legacy) -> Component {
        Component {
            name: "test",
            migrations: TWO,
            legacy,
        }
    }

    fn version_row(conn: &Connection) -> Option<i64> {
        recorded(conn, "test").unwrap()
    }

    #[test]
    fn a_new_database_gets_every_migration_and_one_row() {
        let mut conn = Connection::open_in_memory().unwrap();
        let applied = migrate(&mut conn, &component(Legacy::None)).unwrap();
        assert_eq!(
            applied,
            Applied {
                from: 0,
                to: 2,
                adopted: false
            }
        );
        conn.execute("INSERT INTO t (a, b) VALUES (1, 'x')", [])
            .unwrap();
        assert_eq!(version_row(&conn), Some(2));
        let again = migrate(&mut conn, &component(Legacy::None)).unwrap();
        assert_eq!((again.from, again.to), (2, 2));
    }

    #[test]
    fn an_old_database_is_adopted_and_only_the_rest_runs() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (7); PRAGMA user_version = 1;",
        )
        .unwrap();
        let applied = migrate(&mut conn, &component(Legacy::UserVersion)).unwrap();
        assert_eq!(
            applied,
            Applied {
                from: 1,
                to: 2,
                adopted: true
            }
        );
        let (a, b): (i64, Option<String>) = conn
            .query_row("SELECT a, b FROM t", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((a, b), (7, None));
        let uv: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(uv, 2, "kept in step for older builds");
    }

    #[test]
    fn version_tables_and_bare_tables_are_adopted() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t (a INTEGER, b TEXT); CREATE TABLE old_schema (version INTEGER NOT NULL);
             INSERT INTO old_schema VALUES (2);",
        )
        .unwrap();
        let applied = migrate(&mut conn, &component(Legacy::VersionTable("old_schema"))).unwrap();
        assert_eq!((applied.from, applied.adopted), (2, true));

        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a INTEGER);").unwrap();
        let bare = component(Legacy::TableExists {
            table: "t",
            version: 1,
        });
        let applied = migrate(&mut conn, &bare).unwrap();
        assert_eq!((applied.from, applied.to, applied.adopted), (1, 2, true));
    }

    #[test]
    fn a_newer_database_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("opc.db");
        let mut conn = Connection::open(&file).unwrap();
        migrate(&mut conn, &component(Legacy::None)).unwrap();
        conn.execute(
            "UPDATE schema_versions SET version = 5 WHERE component = 'test'",
            [],
        )
        .unwrap();
        let err = migrate(&mut conn, &component(Legacy::None)).unwrap_err();
        assert!(
            matches!(
                err,
                MigrateError::TooNew {
                    found: 5,
                    known: 2,
                    ..
                }
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("test tables"), "{text}");
        assert!(text.contains("opc.db"), "{text}");
        assert!(text.contains("framework.memory.path"), "{text}");
        assert_eq!(version_row(&conn), Some(5));
    }

    #[test]
    fn a_failing_migration_leaves_the_old_version() {
        const BAD: &[Migration] = &[
            Migration {
                what: "a table",
                sql: "CREATE TABLE t (a INTEGER);",
            },
            Migration {
                what: "a broken step",
                sql: "ALTER TABLE missing ADD COLUMN b TEXT;",
            },
        ];
        let mut conn = Connection::open_in_memory().unwrap();
        let bad = Component {
            name: "test",
            migrations: BAD,
            legacy: Legacy::None,
        };
        let err = migrate(&mut conn, &bad).unwrap_err();
        assert!(err.to_string().contains("a broken step"), "{err}");
        assert!(!table_exists(&conn, "t").unwrap(), "rolled back");
        assert_eq!(version_row(&conn), None);
    }
}
