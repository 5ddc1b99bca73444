//! The PostgreSQL store's vocabulary below the seam: what a PostgreSQL error means in the store's
//! backend-neutral terms ([`failure`]), statements run through the connection's statement cache,
//! and the write transaction ([`Tx`]) that remembers whether it appended to recall memory.
//!
//! A leaf: every concern file of `postgres/` uses it, and it uses none of them.

use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::super::{DbFailure, DbFault, StoreError};

/// Parameters of one statement.
pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// What a PostgreSQL error means, in the store's terms (`opc_pg`'s one classification: the message
/// kept whole, a server error's message and detail being the server's words, never the URL).
pub(crate) fn failure(e: &tokio_postgres::Error) -> DbFailure {
    DbFailure {
        fault: fault_of(opc_pg::fault(e)),
        message: opc_pg::message(e),
    }
}

/// `opc_pg`'s fault as the store's.
pub(crate) fn fault_of(fault: opc_pg::Fault) -> DbFault {
    match fault {
        opc_pg::Fault::Unavailable => DbFault::Unavailable,
        opc_pg::Fault::Conflict => DbFault::Conflict,
        opc_pg::Fault::Corrupt => DbFault::Corrupt,
        opc_pg::Fault::Other => DbFault::Other,
    }
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
