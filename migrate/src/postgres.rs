//! The same migration story on PostgreSQL (`framework.memory.storage: postgres`): one
//! `schema_versions` row per component, pending migrations applied with their version in one
//! transaction.
//!
//! Why a transaction-scoped advisory lock: several `opc run` nodes start at once against one
//! database, and PostgreSQL has no `BEGIN IMMEDIATE`. The first to take the lock applies the
//! migrations; the others wait on it, then find the version recorded and apply nothing. One key for
//! every component (they are applied one after another, at start), released by the commit.
//!
//! A PostgreSQL database has no legacy: every component's story there starts at its first
//! PostgreSQL migration, so [`crate::Component::legacy`] is not read.

use tokio_postgres::Client;

use crate::{Applied, Component};

/// The advisory lock key of schema changes ("opc-mig" in ASCII, so it is recognisable in
/// `pg_locks`).
pub const MIGRATION_LOCK: i64 = i64::from_be_bytes(*b"\0opc-mig");

/// Why a component's tables on PostgreSQL could not be brought up to date (nothing was changed).
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
        /// The database, as `host:port/name` (never the URL: it may hold a password).
        place: String,
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// PostgreSQL failed while doing `what`.
    #[error(
        "cannot upgrade the {component} tables in the PostgreSQL database {place} ({what}): {source}"
    )]
    Sql {
        /// The component.
        component: &'static str,
        /// The database, as `host:port/name`.
        place: String,
        /// The migration or step.
        what: &'static str,
        /// Why.
        #[source]
        source: tokio_postgres::Error,
    },
}

/// Bring `component`'s tables on PostgreSQL to [`Component::version`] (see the module doc).
/// `place` names the database in errors.
pub async fn migrate(
    client: &mut Client,
    component: &Component,
    place: &str,
) -> Result<Applied, PgMigrateError> {
    let failed = |what: &'static str| {
        let place = place.to_string();
        move |source| PgMigrateError::Sql {
            component: component.name,
            place,
            what,
            source,
        }
    };
    let known = component.version();
    let tx = client
        .transaction()
        .await
        .map_err(failed("starting the schema transaction"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(failed("waiting for other nodes' migrations"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_versions (
             component   TEXT PRIMARY KEY,
             version     BIGINT NOT NULL,
             updated_ms  BIGINT NOT NULL
         )",
    )
    .await
    .map_err(failed("creating schema_versions"))?;
    let from: i64 = tx
        .query_opt(
            "SELECT version FROM schema_versions WHERE component = $1",
            &[&component.name],
        )
        .await
        .map_err(failed("reading the schema version"))?
        .map_or(0, |row| row.get(0));
    if from > known {
        return Err(PgMigrateError::TooNew {
            component: component.name,
            place: place.to_string(),
            found: from,
            known,
        });
    }
    if from == known {
        tx.commit()
            .await
            .map_err(failed("ending the schema check"))?;
        return Ok(Applied {
            from,
            to: known,
            adopted: false,
        });
    }
    let from_index = usize::try_from(from.max(0)).unwrap_or(0);
    for migration in &component.migrations[from_index..] {
        tx.batch_execute(migration.sql)
            .await
            .map_err(failed(migration.what))?;
    }
    tx.execute(
        "INSERT INTO schema_versions (component, version, updated_ms) VALUES ($1, $2, $3)
         ON CONFLICT (component) DO UPDATE SET version = excluded.version, updated_ms = excluded.updated_ms",
        &[&component.name, &known, &crate::now_ms()],
    )
    .await
    .map_err(failed("recording the schema version"))?;
    tx.commit()
        .await
        .map_err(failed("committing the migrations"))?;
    Ok(Applied {
        from,
        to: known,
        adopted: false,
    })
}
