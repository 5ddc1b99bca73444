//! The PostgreSQL store's vocabulary below the seam: what a PostgreSQL error means in the store's
//! backend-neutral terms ([`failure`]), statements run through the connection's statement cache,
//! the write transaction ([`Tx`]) that remembers whether it appended to recall memory, and the
//! pipelined write ([`Pipe`], [`atomic`]) of the hot paths.
//!
//! Why pipelining: a write's cost on PostgreSQL is its round trips, not the server's work (a busy
//! engine's writes wait on the network and the server's turn, its CPU mostly idle). `Tx` awaits
//! every statement, so a write of `n` statements costs `n + 2` round trips (BEGIN and COMMIT
//! included). A pipelined write sends BEGIN, its statements and COMMIT together and reads the
//! answers after: one round trip. PostgreSQL runs them in order, each statement in the transaction
//! the earlier ones opened, so a later statement sees the earlier ones' writes and the locks they
//! took; a failing statement aborts the transaction, the statements after it fail unrun and the
//! COMMIT rolls it back, so the write is still atomic and reports the first failure. A write that
//! must decide in Rust from what it read (a state checked against the lifecycle) opens with a
//! pipelined read ([`Pipe::open`]) and ends with a pipelined batch and its COMMIT ([`Pipe::commit`]):
//! two round trips.
//!
//! Every commit here ([`Tx::commit`], [`atomic`], [`Pipe::commit`]) is timed for the store's commit
//! latency metric (`store/commits.rs`).
//!
//! A leaf: every concern file of `postgres/` uses it, and it uses none of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::super::commits::{self, Backend};
use super::super::{DbFailure, DbFault, StoreError, TaskId};

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

    /// Commit; whether it appended to recall memory. The commit latency metric times the COMMIT's
    /// round trip alone (the statements before it were each awaited already).
    pub(super) async fn commit(self) -> Result<bool, StoreError> {
        let recall = self.recall.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        let done = self.tx.commit().await;
        commits::record(Backend::Postgres, started);
        done.map_err(pg("committing"))?;
        Ok(recall)
    }
}

/// One statement of a pipelined write: what it does (for errors), its SQL and its parameters.
pub(super) struct Step<'a> {
    pub(super) doing: &'static str,
    pub(super) sql: &'a str,
    pub(super) params: Params<'a>,
}

/// The lease a fenced store's writes are checked against (`cluster/fence.rs`'s `Fence` as the
/// pipelined writes carry it): the check is the write's first statement, in its transaction.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lease {
    pub(super) root: TaskId,
    pub(super) token: i64,
}

/// The fence's lease check (`cluster/fence.rs` runs it alone, and the pipelined writes here run it
/// first): one row while the lease is the fence's, the lease row share-locked to the commit (why:
/// see `cluster/fence.rs`). Kept here, below both, so the two cannot drift apart.
pub(super) const LEASE_CHECK: &str =
    "SELECT 1 FROM tree_leases WHERE root_id = $1 AND token = $2 FOR SHARE";

/// What one pipelined message answered.
type Answer = Result<Vec<Row>, tokio_postgres::Error>;

/// Send `steps` on `c`, after BEGIN when `begin`, and `end` (`COMMIT`) after them, all in one
/// round trip; the rows of each step, or the first failure (the statements after a failed one fail
/// unrun: PostgreSQL aborted the transaction, and its COMMIT rolls back).
///
/// Every statement is prepared first (from the connection's cache: a round trip only the first time
/// a connection sees it), so that every message is queued on the first poll, in order: a prepare
/// awaited in the middle would let the COMMIT overtake the statements behind it.
async fn send(
    c: &deadpool_postgres::Object,
    begin: bool,
    steps: &[Step<'_>],
    end: Option<&'static str>,
) -> Result<Vec<Vec<Row>>, StoreError> {
    let mut statements = Vec::with_capacity(steps.len());
    for step in steps {
        statements.push(c.prepare_cached(step.sql).await.map_err(pg(step.doing))?);
    }
    type Message<'f> = Pin<Box<dyn Future<Output = Answer> + Send + 'f>>;
    let mut messages: Vec<(&'static str, Message<'_>)> = Vec::with_capacity(steps.len() + 2);
    if begin {
        messages.push((
            "starting a transaction",
            Box::pin(async move { c.batch_execute("BEGIN").await.map(|()| Vec::new()) }),
        ));
    }
    for (step, statement) in steps.iter().zip(&statements) {
        messages.push((step.doing, Box::pin(c.query(statement, step.params))));
    }
    if let Some(end) = end {
        messages.push((
            "committing",
            Box::pin(async move { c.batch_execute(end).await.map(|()| Vec::new()) }),
        ));
    }
    let mut answers: Vec<Option<Answer>> = messages.iter().map(|_| None).collect();
    // Poll every message in order (each is queued on its first poll), until all have answered.
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for ((_, message), answer) in messages.iter_mut().zip(answers.iter_mut()) {
            if answer.is_none() {
                match message.as_mut().poll(cx) {
                    Poll::Ready(a) => *answer = Some(a),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    let mine = usize::from(begin)..usize::from(begin) + steps.len();
    let mut rows = Vec::with_capacity(steps.len());
    for (i, ((doing, _), answer)) in messages.iter().zip(answers).enumerate() {
        let answer = match answer {
            Some(Ok(answer)) => answer,
            Some(Err(e)) => return Err(pg(doing)(e)),
            // Unreachable: the poll above ends only when every message answered.
            None => {
                return Err(StoreError::Database {
                    doing,
                    source: DbFailure {
                        fault: DbFault::Other,
                        message: "a pipelined statement went unanswered".into(),
                    },
                });
            }
        };
        if mine.contains(&i) {
            rows.push(answer);
        }
    }
    Ok(rows)
}

/// A whole write in one round trip: BEGIN, `steps`, COMMIT (a lone statement is sent alone: it is
/// its own transaction); the rows of each step. Under a
/// `lease`, two: the lease is checked first ([`StoreError::Fenced`], nothing written, when it moved
/// on), then the steps and the COMMIT.
///
/// The commit latency metric: the COMMIT travels with the statements, so it cannot be timed
/// apart; the round trip that carries it is timed (the whole write here, [`Pipe::commit`]'s round
/// trip under a lease).
pub(super) async fn atomic(
    c: deadpool_postgres::Object,
    lease: Option<Lease>,
    steps: &[Step<'_>],
) -> Result<Vec<Vec<Row>>, StoreError> {
    if lease.is_some() {
        let (pipe, _) = Pipe::open(c, lease, &[]).await?;
        return pipe.commit(steps).await;
    }
    let started = std::time::Instant::now();
    let done = if steps.len() == 1 {
        // One statement is a transaction of its own: no BEGIN and COMMIT to send.
        send(&c, false, steps, None).await
    } else {
        send(&c, true, steps, Some("COMMIT")).await
    };
    commits::record(Backend::Postgres, started);
    done
}

/// A pipelined write transaction that reads before it decides: opened with its first statements
/// ([`Pipe::open`], one round trip), ended with its last ones and the COMMIT ([`Pipe::commit`], one
/// more) or rolled back ([`Pipe::rollback`]).
///
/// It owns its pooled connection: dropped while open (its future dropped between the two round
/// trips), it takes the connection out of the pool and closes it, so the server rolls the
/// transaction back and no one else's statement runs inside it.
pub(super) struct Pipe {
    c: Option<deadpool_postgres::Object>,
}

impl Pipe {
    /// BEGIN, the lease check under a `lease`, then `steps`, in one round trip; the rows of each
    /// step. A failure (or a lease that moved on: [`StoreError::Fenced`]) rolls back.
    pub(super) async fn open(
        c: deadpool_postgres::Object,
        lease: Option<Lease>,
        steps: &[Step<'_>],
    ) -> Result<(Pipe, Vec<Vec<Row>>), StoreError> {
        let pipe = Pipe { c: Some(c) };
        let Some(c) = &pipe.c else {
            return Err(closed());
        };
        let opened = match lease {
            None => send(c, true, steps, None).await,
            Some(lease) => {
                let params: [&(dyn ToSql + Sync); 2] = [&lease.root, &lease.token];
                let mut all = Vec::with_capacity(steps.len() + 1);
                all.push(Step {
                    doing: "checking the tree's lease",
                    sql: LEASE_CHECK,
                    params: &params,
                });
                all.extend(steps.iter().map(|s| Step {
                    doing: s.doing,
                    sql: s.sql,
                    params: s.params,
                }));
                match send(c, true, &all, None).await {
                    Ok(mut rows) if rows.first().is_some_and(|r| !r.is_empty()) => {
                        rows.remove(0);
                        Ok(rows)
                    }
                    Ok(_) => Err(StoreError::Fenced { root: lease.root }),
                    Err(e) => Err(e),
                }
            }
        };
        match opened {
            Ok(rows) => Ok((pipe, rows)),
            Err(e) => {
                pipe.rollback().await;
                Err(e)
            }
        }
    }

    /// Send `steps` and the COMMIT, in one round trip; the rows of each step. A failure rolls the
    /// whole transaction back. The commit latency metric times this round trip (the COMMIT
    /// travels with `steps`, so it cannot be timed apart).
    pub(super) async fn commit(mut self, steps: &[Step<'_>]) -> Result<Vec<Vec<Row>>, StoreError> {
        let Some(c) = &self.c else {
            return Err(closed());
        };
        let started = std::time::Instant::now();
        let sent = send(c, false, steps, Some("COMMIT")).await;
        commits::record(Backend::Postgres, started);
        match sent {
            Ok(rows) => {
                // Ended: the connection goes back to the pool.
                self.c.take();
                Ok(rows)
            }
            // A statement that could not be prepared was never sent, nor was the COMMIT: end the
            // transaction here (a ROLLBACK after a COMMIT that rolled back is a harmless warning).
            Err(e) => {
                self.rollback().await;
                Err(e)
            }
        }
    }

    /// Roll back (the connection closes instead when the ROLLBACK fails).
    pub(super) async fn rollback(mut self) {
        if let Some(c) = &self.c
            && c.batch_execute("ROLLBACK").await.is_ok()
        {
            self.c.take();
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        if let Some(c) = self.c.take() {
            // Still open: never hand this connection out again (see the type's doc).
            drop(deadpool_postgres::Object::take(c));
        }
    }
}

/// The error of a [`Pipe`] used after it ended (a bug, never a panic).
fn closed() -> StoreError {
    StoreError::Database {
        doing: "writing",
        source: DbFailure {
            fault: DbFault::Other,
            message: "the transaction already ended".into(),
        },
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
