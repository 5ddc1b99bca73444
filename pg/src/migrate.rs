//! A component's migrations on PostgreSQL: one `schema_versions` row per component, pending
//! migrations applied with their version in one transaction.
//!
//! Why a transaction-scoped advisory lock: several `opc run` nodes start at once against one
//! database, and PostgreSQL has no `BEGIN IMMEDIATE`. The first to take the lock applies the
//! migrations; the others wait on it, then find the version recorded and apply nothing. One key for
//! every component (they are applied one after another, at start), released by the commit.
//!
//! A PostgreSQL database has no legacy: every component's story there starts at its first
//! PostgreSQL migration, so `Component::legacy` is not read. A database whose version is newer than
//! this build knows is refused, never written.

use opc_migrate::{Applied, Component};

use crate::error::PgError;

/// Why a component's tables could not be brought up to date (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum PgMigrateError {
    /// The database was written by a newer build.
    #[error(
        "the PostgreSQL database {place} holds the {component} tables at schema version {found}, but this \
         build of OPC knows only up to version {known}: a newer OPC wrote it. Run that newer `opc` on \
         every node, or point `framework.memory.postgres.urlEnv` at another database"
    )]
    TooNew {
        /// The component.
        component: &'static str,
        /// The database, as `host:port/name`.
        place: String,
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// PostgreSQL failed.
    #[error(transparent)]
    Pg(#[from] PgError),
}

/// The advisory lock key of schema changes ("opc-mig" in ASCII, recognisable in `pg_locks`).
pub const MIGRATION_LOCK: i64 = i64::from_be_bytes(*b"\0opc-mig");

/// Bring `component`'s tables to its version (see the module doc). `place` names the database.
pub fn migrate(
    client: &mut postgres::Client,
    component: &Component,
    place: &str,
) -> Result<Applied, PgMigrateError> {
    let failed = |doing: &'static str| move |e: postgres::Error| PgError::of(&e, place, doing);
    let known = component.version();
    let mut tx = client
        .transaction()
        .map_err(failed("starting the schema transaction"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(failed("waiting for other nodes' migrations"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_versions (
             component   TEXT PRIMARY KEY,
             version     BIGINT NOT NULL,
             updated_ms  BIGINT NOT NULL
         )",
    )
    .map_err(failed("creating schema_versions"))?;
    let from: i64 = tx
        .query_opt(
            "SELECT version FROM schema_versions WHERE component = $1",
            &[&component.name],
        )
        .map_err(failed("reading the schema version"))?
        .map_or(Ok(0), |row| row.try_get(0))
        .map_err(failed("reading the schema version"))?;
    if from > known {
        return Err(PgMigrateError::TooNew {
            component: component.name,
            place: place.to_string(),
            found: from,
            known,
        });
    }
    if from == known {
        tx.commit().map_err(failed("ending the schema check"))?;
        return Ok(Applied {
            from,
            to: known,
            adopted: false,
        });
    }
    let from_index = usize::try_from(from.max(0)).unwrap_or(0);
    for migration in &component.migrations[from_index..] {
        tx.batch_execute(migration.sql)
            .map_err(failed(migration.what))?;
    }
    tx.execute(
        "INSERT INTO schema_versions (component, version, updated_ms) VALUES ($1, $2, $3)
         ON CONFLICT (component) DO UPDATE SET version = excluded.version, updated_ms = excluded.updated_ms",
        &[&component.name, &known, &opc_migrate::now_ms()],
    )
    .map_err(failed("recording the schema version"))?;
    tx.commit().map_err(failed("committing the migrations"))?;
    Ok(Applied {
        from,
        to: known,
        adopted: false,
    })
}
