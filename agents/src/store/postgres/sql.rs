//! The PostgreSQL store's vocabulary below the seam: what a PostgreSQL error means in the store's
//! backend-neutral terms ([`failure`]), statements run through the connection's statement cache,
//! and the write transaction ([`Tx`]) that remembers whether it appended to recall memory.
//!
//! A leaf: every concern file of `postgres/` uses it, and it uses none of them.

use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::super::{DbFailure, DbFault, StoreError};

/// Parameters of one statement.
pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// What a PostgreSQL error means (the message kept whole; a server error's message and detail are
/// the server's words, which never hold the connection URL).
pub(crate) fn failure(e: &tokio_postgres::Error) -> DbFailure {
    let fault = match e.code() {
        Some(code) => {
            let class = &code.code()[..2];
            if *code == SqlState::UNIQUE_VIOLATION
                || *code == SqlState::FOREIGN_KEY_VIOLATION
                || *code == SqlState::EXCLUSION_VIOLATION
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
            {
                DbFault::Conflict
            } else if matches!(class, "08" | "53" | "57" | "58") {
                // Connection exceptions, insufficient resources, operator intervention (a shutdown,
                // a restart), system errors: the server may serve the operation later.
                DbFault::Unavailable
            } else if matches!(class, "22" | "XX") {
                DbFault::Corrupt
            } else {
                DbFault::Other
            }
        }
        // No SQLSTATE: the connection (closed, reset, timed out: an I/O error underneath), or the
        // client's own refusal (a value that does not fit its column's type).
        None if e.is_closed() || io_underneath(e) => DbFault::Unavailable,
        None => DbFault::Other,
    };
    let message = match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {detail}", db.message()),
            None => db.message().to_string(),
        },
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    };
    DbFailure { fault, message }
}

/// Whether an I/O error lies under `e` (the connection failed, not the statement).
fn io_underneath(e: &tokio_postgres::Error) -> bool {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The error of an operation that failed while `doing` (for `map_err`).
pub(super) fn pg(doing: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |e| StoreError::Database {
        doing,
        source: failure(&e),
    }
}

/// The error of a pool that could not hand out a connection.
pub(super) fn pool_failure(e: deadpool_postgres::PoolError) -> StoreError {
    let source = match &e {
        deadpool_postgres::PoolError::Backend(pg) => failure(pg),
        other => DbFailure {
            fault: DbFault::Unavailable,
            message: other.to_string(),
        },
    };
    StoreError::Database {
        doing: "connecting to PostgreSQL",
        source,
    }
}

/// Run `sql` (prepared once per connection) and return the rows it changed.
pub(super) async fn exec(
    c: &impl GenericClient,
    doing: &'static str,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg(doing))?;
    c.execute(&statement, params).await.map_err(pg(doing))
}

/// Every row of `sql`.
pub(super) async fn rows(
    c: &impl GenericClient,
    doing: &'static str,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg(doing))?;
    c.query(&statement, params).await.map_err(pg(doing))
}

/// The row of `sql`, if there is one.
pub(super) async fn opt(
    c: &impl GenericClient,
    doing: &'static str,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<Row>, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg(doing))?;
    c.query_opt(&statement, params).await.map_err(pg(doing))
}

/// The one row of `sql` (an error when there is none).
pub(super) async fn one(
    c: &impl GenericClient,
    doing: &'static str,
    sql: &str,
    params: Params<'_>,
) -> Result<Row, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg(doing))?;
    c.query_one(&statement, params).await.map_err(pg(doing))
}

/// A write: one PostgreSQL transaction, committed by the store after the operation succeeded.
pub(crate) struct Tx<'a> {
    /// The transaction.
    pub(super) tx: deadpool_postgres::Transaction<'a>,
    /// Set by an operation that appended to recall memory: the store wakes the indexer after the
    /// commit (never before: it must find the rows).
    recall: AtomicBool,
}

impl<'a> Tx<'a> {
    pub(super) fn new(tx: deadpool_postgres::Transaction<'a>) -> Self {
        Tx {
            tx,
            recall: AtomicBool::new(false),
        }
    }

    /// The transaction, as a client for [`exec`] and friends.
    pub(super) fn c(&self) -> &deadpool_postgres::Transaction<'a> {
        &self.tx
    }

    /// Note that this transaction appended to recall memory.
    pub(super) fn recall_appended(&self) {
        self.recall.store(true, Ordering::Relaxed);
    }

    /// Commit; whether it appended to recall memory.
    pub(super) async fn commit(self) -> Result<bool, StoreError> {
        let recall = self.recall.load(Ordering::Relaxed);
        self.tx.commit().await.map_err(pg("committing"))?;
        Ok(recall)
    }
}

/// A stored count as `u32` (a negative one reads as 0: the column is never written negative).
pub(super) fn u32_of(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

/// A stored count as `u64` (a negative one reads as 0).
pub(super) fn u64_of(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A count to store (saturating: no count of OPC's reaches `i64::MAX`).
pub(super) fn i64_of(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Column `idx` of `row`; a value that does not read as `T` is corrupt (never a panic).
pub(super) fn get<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r Row,
    idx: usize,
    doing: &'static str,
) -> Result<T, StoreError> {
    row.try_get(idx).map_err(|e| StoreError::Database {
        doing,
        source: DbFailure {
            fault: DbFault::Corrupt,
            message: e.to_string(),
        },
    })
}
