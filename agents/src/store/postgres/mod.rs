//! [`PgStore`]: the [`Store`] seam on PostgreSQL (`framework.memory.storage: postgres`).
//!
//! Why PostgreSQL itself: several `opc run` nodes share one org's state there (issue 36), and what
//! they need of each other — row locks, `SKIP LOCKED`, advisory locks, LISTEN/NOTIFY, commit-ordered
//! tailing — is PostgreSQL's, not a cluster of our own making.
//!
//! Shape: a pool of connections (`deadpool-postgres`, at most `maxConnections`, each with its own
//! statement cache). A read takes a connection and runs one concern's query on it; a write takes a
//! connection, opens a transaction, runs the concern's function inside it ([`sql::Tx`]) and commits.
//! The writes every root makes (`create_task`, `begin`, `record_turn`) are pipelined instead
//! ([`sql::Pipe`], [`sql::atomic`]): their statements, BEGIN and COMMIT travel together, one round
//! trip (two for a write that decides in Rust from what it read), where a [`sql::Tx`] pays one per
//! statement.
//! The SQL lives in one file per concern, mirroring the SQLite store's: `tasks`, `lifecycle`,
//! `ledger`, `approvals`, `notices`, `tool_calls`, `memory_jobs`, `recovery`, `recall`; [`schema`]
//! is the engine's migrations, applied with memory's at [`PgStore::connect`].
//!
//! The promises of [`Store`] hold as on SQLite:
//! - every state change is one transaction, committed before its future resolves Ok (an Err or a
//!   dropped future rolls it back);
//! - a task's state moves only along [`TaskState::may_become`], checked on the task's row locked
//!   `FOR UPDATE`, so two writers (two nodes) cannot both win; a new root locks its conversation's
//!   row first, so two nodes cannot both start one;
//! - an approval is decided at most once (`UPDATE … WHERE state = 'pending'`);
//! - recall rows are written in the transaction of the change they describe, and the recall hook
//!   runs after its commit.
//!
//! Several nodes (issue 36 §2): [`PgStore::cluster`] is the cluster seam on this database
//! (`cluster`: nodes, tree leases, wake-ups). A tree's sessions write through a *fenced* clone of
//! the store, which checks the tree's lease token first in every write transaction (the `write` arm
//! of `pg_store!` and every write by hand) and refuses with [`StoreError::Fenced`] once another
//! node took the tree over; its `create_task` stamps `tasks.node`. A pipelined write sends the same
//! check as its first statement ([`sql::Lease`]). Reads are not fenced. A store
//! without a fence (SQLite's peer, one engine per database) writes exactly as before.
//!
//! The URL is never stored or shown: errors name the database as `host:port/name` ([`opc_pg::place`]).
//! The parsed connection settings are kept (private, never printed) for the wake-up listener's
//! own connection.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::config::SslMode;

use super::ledger::encode_turn;
use super::tasks::encode_history;
use super::{
    Approval, CallRecord, DbFailure, DbFault, Decided, Ending, JobEnd, LatestCall, MemoryJob,
    NewTask, Notice, OfferedOption, PrivacyDay, Recovery, Spend, Store, StoreError, TaskId,
    TaskPrivacy, TaskRecord, TaskState, TimedCall, ToolCallRecord, Totals,
};
use crate::llm::Message;

mod approvals;
mod cluster;
pub mod erase;
mod ledger;
mod lifecycle;
mod memory_jobs;
mod notices;
mod recall;
mod recovery;
pub mod schema;
mod sql;
mod tail;
mod tasks;
mod tool_calls;

use cluster::Fence;
pub use cluster::WakeListener;
use sql::{Tx, pg, pool_failure};
pub use tail::{RecallTail, has_commit_order};

/// How long `opc run` waits for PostgreSQL at start before it gives up (issue 36: exit within 10 s).
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(8);

/// The advisory lock a single engine holds on its database (`lock_exclusive`), distinct from the
/// migrations' ("opc-eng" in ASCII).
const ENGINE_LOCK: i64 = i64::from_be_bytes(*b"\0opc-eng");

/// The [`Store`] over a PostgreSQL database. Cloning is cheap and shares the pool, the recall hook
/// and the engine's claim; a fenced clone ([`Cluster::fenced`](super::Cluster::fenced)) adds its
/// tree's lease.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// `host:port/name`, for messages.
    place: String,
    /// The parsed connection settings (with the URL's password: never printed), for connections
    /// outside the pool (the wake-up listener's).
    config: tokio_postgres::Config,
    /// Called after a commit that appended to recall memory.
    recall_notify: Arc<OnceLock<Box<dyn Fn() + Send + Sync>>>,
    /// The connection holding [`ENGINE_LOCK`], once claimed (released when it closes).
    claim: Arc<tokio::sync::Mutex<Option<deadpool_postgres::ClientWrapper>>>,
    /// The lease every write checks first, in a tree's store; `None` in the shared store.
    fence: Option<Fence>,
}

impl PgStore {
    /// Connect to the database `url` names (a pool of at most `max_connections`), check that it
    /// answers within [`CONNECT_DEADLINE`], and bring the engine's and memory's tables up to date.
    /// Errors name the database as `host:port/name`, never the URL.
    pub async fn connect(url: &str, max_connections: u32) -> Result<PgStore, StoreError> {
        let place =
            opc_pg::parse(url)
                .map(|c| opc_pg::place(&c))
                .map_err(|e| StoreError::Open {
                    path: e.place,
                    source: DbFailure {
                        fault: DbFault::Other,
                        message: e.message,
                    },
                })?;
        // It parsed above, so it parses here (the async client's and the blocking client's
        // configs are the same parser).
        let config: tokio_postgres::Config = url.parse().map_err(|_| StoreError::Open {
            path: place.clone(),
            source: DbFailure {
                fault: DbFault::Other,
                message: "not a PostgreSQL URL".into(),
            },
        })?;
        let open = |fault, message: String| StoreError::Open {
            path: format!("PostgreSQL at {place}"),
            source: DbFailure { fault, message },
        };
        if config.get_ssl_mode() == SslMode::Require {
            return Err(open(
                DbFault::Other,
                "`sslmode=require` asks for TLS, which this build does not speak to PostgreSQL yet; \
                 reach the server over a private network and drop `sslmode`"
                    .into(),
            ));
        }
        let mut config = config;
        config.connect_timeout(CONNECT_DEADLINE);
        // A paused node's open transaction must not hold its locks past a takeover (opc-pg).
        let options = opc_pg::session_options(config.get_options());
        config.options(&options);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_connections.max(2) as usize)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(CONNECT_DEADLINE))
            .build()
            .map_err(|e| open(DbFault::Other, e.to_string()))?;
        let client = tokio::time::timeout(CONNECT_DEADLINE, pool.get())
            .await
            .map_err(|_| {
                open(
                    DbFault::Unavailable,
                    format!("no answer within {}s", CONNECT_DEADLINE.as_secs()),
                )
            })?
            .map_err(|e| match pool_failure(e) {
                StoreError::Database { source, .. } => StoreError::Open {
                    path: format!("PostgreSQL at {place}"),
                    source,
                },
                other => other,
            })?;
        drop(client);
        // The migrations run on a blocking connection of their own (opc-pg), off the runtime.
        let url = url.to_string();
        let migrated = tokio::task::spawn_blocking(move || {
            let conn = opc_pg::Blocking::connect(&url, "migrate")?;
            for component in [&schema::COMPONENT, &opc_memory::schema::postgres::COMPONENT] {
                conn.migrate(component)?;
            }
            Ok::<_, opc_pg::PgMigrateError>(())
        })
        .await
        .map_err(|e| open(DbFault::Other, format!("the migration thread failed: {e}")))?;
        migrated.map_err(|e| match e {
            opc_pg::PgMigrateError::TooNew { found, known, .. } => StoreError::TooNew {
                path: format!("PostgreSQL at {place}"),
                found,
                known,
            },
            opc_pg::PgMigrateError::Pg(e) => StoreError::Migrate {
                path: format!("PostgreSQL at {place}"),
                what: e.doing,
                source: DbFailure {
                    fault: sql::fault_of(e.fault),
                    message: e.message,
                },
            },
        })?;
        Ok(PgStore {
            pool,
            place,
            config,
            recall_notify: Arc::new(OnceLock::new()),
            claim: Arc::new(tokio::sync::Mutex::new(None)),
            fence: None,
        })
    }

    /// The database, as `host:port/name`.
    pub fn place(&self) -> &str {
        &self.place
    }

    /// The pool (the other components that keep their tables in the same database).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(pool_failure)
    }

    /// Open a write transaction on `c`; in a fenced store, its first statement checks the tree's
    /// lease ([`StoreError::Fenced`] when it moved on, and nothing is written).
    async fn write<'c>(&self, c: &'c mut deadpool_postgres::Object) -> Result<Tx<'c>, StoreError> {
        let tx = Tx::new(
            c.transaction()
                .await
                .map_err(pg("starting a transaction"))?,
        );
        if let Some(fence) = &self.fence {
            fence.check(&tx).await?;
        }
        Ok(tx)
    }

    /// The lease a pipelined write of a fenced store checks first (`None` in the shared store).
    fn lease(&self) -> Option<sql::Lease> {
        self.fence.as_ref().map(|f| sql::Lease {
            root: f.root,
            token: f.token,
        })
    }

    /// Wake the recall indexer after a commit that appended to recall memory.
    fn committed(&self, recall: bool) {
        if recall && let Some(notify) = self.recall_notify.get() {
            notify();
        }
    }
}

/// The [`Store`] impl of [`PgStore`]: `read { .. }` ops run the concern's function on a pooled
/// connection, `write { .. }` ops inside a transaction committed before they answer; each line names
/// the concern module whose function of the same name and arguments it runs. `by_hand { .. }`
/// holds the items that do more than forward.
macro_rules! pg_store {
    (
        read { $( $m:ident :: $r:ident ( $($ra:ident : $rt:ty),* ) -> $rr:ty ; )* }
        write { $( $wm:ident :: $w:ident ( $($wa:ident : $wt:ty),* ) -> $wr:ty ; )* }
        by_hand { $($hand:tt)* }
    ) => {
        #[async_trait::async_trait]
        impl Store for PgStore {
            $($hand)*

            $(
                async fn $r(&self, $($ra: $rt),*) -> Result<$rr, StoreError> {
                    let c = self.client().await?;
                    $m::$r(&c, $($ra),*).await
                }
            )*

            $(
                async fn $w(&self, $($wa: $wt),*) -> Result<$wr, StoreError> {
                    let mut c = self.client().await?;
                    let tx = self.write(&mut c).await?;
                    let out = $wm::$w(&tx, $($wa),*).await?;
                    let recall = tx.commit().await?;
                    self.committed(recall);
                    Ok(out)
                }
            )*
        }
    };
}

pg_store! {
    read {
        tasks::last_root_task(conversation_id: &str) -> Option<TaskRecord>;
        tasks::task(id: TaskId) -> TaskRecord;
        tasks::child_for(parent: TaskId, tool_use_id: &str, index: u32) -> Option<TaskRecord>;
        tasks::messages(id: TaskId) -> Vec<Message>;
        tasks::tree(root_id: TaskId) -> Vec<TaskRecord>;
        tasks::recent_roots(limit: u32) -> Vec<TaskRecord>;
        tasks::live_tasks() -> Vec<TaskRecord>;
        ledger::calls(task_id: TaskId) -> Vec<CallRecord>;
        ledger::tree_calls(root_id: TaskId) -> Vec<TimedCall>;
        ledger::privacy_by_task(root_id: TaskId) -> HashMap<TaskId, TaskPrivacy>;
        ledger::tree_totals(root_id: TaskId) -> (u64, u64, f64);
        ledger::totals(root_id: TaskId) -> Totals;
        ledger::privacy_by_day(since_ms: i64) -> Vec<PrivacyDay>;
        ledger::spend_since(since_ms: i64) -> Vec<Spend>;
        ledger::embedding_spend_since(since_ms: i64) -> Vec<Spend>;
        ledger::latest_calls(window: u32) -> Vec<LatestCall>;
        ledger::memory_calls(task_id: TaskId) -> Vec<(i64, CallRecord)>;
        ledger::memory_tokens_since(agent: &str, since_ms: i64) -> u64;
        tool_calls::tool_calls(root_id: TaskId) -> Vec<ToolCallRecord>;
        tool_calls::command_approved(conversation_id: &str, agent: &str, command: &str) -> bool;
        approvals::approval(id: i64) -> Option<Approval>;
        approvals::pending_approvals() -> Vec<Approval>;
        approvals::recent_approvals(limit: u32) -> Vec<Approval>;
        approvals::tree_approvals(root_id: TaskId) -> Vec<Approval>;
        notices::notices(conversation_id: &str) -> Vec<String>;
        notices::undelivered_notices() -> Vec<Notice>;
        memory_jobs::next_memory_job(now: i64) -> Option<MemoryJob>;
        memory_jobs::next_memory_job_at() -> Option<i64>;
        memory_jobs::memory_jobs(limit: u32) -> Vec<MemoryJob>;
        memory_jobs::recall_seqs(task: TaskId, conversation: &str) -> Vec<i64>;
    }
    write {
        recovery::recover() -> Recovery;
        tasks::create_conversation(id: &str, root_agent: &str) -> ();
        lifecycle::transition(id: TaskId, next: TaskState) -> TaskState;
        lifecycle::finish(id: TaskId, ending: Ending<'_>) -> bool;
        lifecycle::cancel_subtree(id: TaskId, reason: &str) -> Vec<TaskId>;
        lifecycle::cancel_descendants(id: TaskId, reason: &str) -> Vec<TaskId>;
        tool_calls::record_tool_call(call: &ToolCallRecord) -> ();
        approvals::request_approval(
            task: &TaskRecord,
            tool_use_id: &str,
            summary: &str,
            options: &[OfferedOption],
            timeout: Duration
        ) -> (Approval, bool);
        approvals::decide(id: i64, decision: &str, by: &str) -> Decided;
        tool_calls::approve_command(conversation_id: &str, agent: &str, command: &str, approval: i64) -> ();
        notices::add_notice(conversation_id: &str, task_id: Option<TaskId>, text: &str) -> ();
        notices::mark_notice_delivered(id: i64) -> bool;
        memory_jobs::end_memory_job(id: i64, end: JobEnd, error: Option<&str>) -> bool;
        memory_jobs::drop_memory_job(id: i64) -> ();
        memory_jobs::defer_memory_job(id: i64, not_before: i64, failed_attempt: bool, why: &str) -> ();
        ledger::record_memory_call(call: &CallRecord) -> i64;
        ledger::record_embedding_call(call: &crate::llm::embed::EmbedCall) -> ();
        memory_jobs::memory_root_seen(
            agent: &str,
            root: TaskId,
            task: TaskId,
            conversation: Option<&str>,
            frequency: u32
        ) -> Option<i64>;
        memory_jobs::idle_consolidations(idle_before: i64) -> Vec<(String, i64)>;
    }
    by_hand {
        async fn lock_exclusive(&self) -> Result<(), StoreError> {
            let mut claim = self.claim.lock().await;
            if claim.is_some() {
                return Ok(());
            }
            let client = deadpool_postgres::Object::take(self.client().await?);
            let held: bool = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&ENGINE_LOCK])
                .await
                .map_err(pg("claiming the database"))?
                .get(0);
            if !held {
                return Err(StoreError::Claimed {
                    place: self.place.clone(),
                });
            }
            *claim = Some(client);
            Ok(())
        }

        fn on_recall_append(&self, notify: Box<dyn Fn() + Send + Sync>) {
            let _ = self.recall_notify.set(notify);
        }

        async fn create_task(&self, task: &NewTask<'_>) -> Result<TaskId, StoreError> {
            let messages = encode_history(task.messages, task.parent_id.unwrap_or_default())?;
            let c = self.client().await?;
            let node = self.fence.as_ref().map(|f| &*f.node);
            let id = tasks::create_task(c, self.lease(), task, &messages, node).await?;
            // Its instructions went to recall memory with it (unless blank).
            self.committed(!task.input.trim().is_empty());
            Ok(id)
        }

        async fn begin(&self, id: TaskId) -> Result<(TaskRecord, Vec<Message>), StoreError> {
            lifecycle::begin(self.client().await?, self.lease(), id).await
        }

        async fn save_messages(&self, id: TaskId, messages: &[Message]) -> Result<(), StoreError> {
            let text = encode_history(messages, id)?;
            let mut c = self.client().await?;
            if self.fence.is_none() {
                // One statement: no transaction needed (as before the cluster).
                return tasks::save_messages_encoded(&c, id, &text).await;
            }
            let tx = self.write(&mut c).await?;
            tasks::save_messages_encoded(tx.c(), id, &text).await?;
            tx.commit().await?;
            Ok(())
        }

        async fn transition_and_save(
            &self,
            id: TaskId,
            next: TaskState,
            messages: &[Message],
        ) -> Result<TaskState, StoreError> {
            let text = encode_history(messages, id)?;
            let mut c = self.client().await?;
            let tx = self.write(&mut c).await?;
            let previous = lifecycle::transition(&tx, id, next).await?;
            tasks::save_messages_encoded(tx.c(), id, &text).await?;
            let recall = tx.commit().await?;
            self.committed(recall);
            Ok(previous)
        }

        async fn record_call(&self, call: &CallRecord) -> Result<(), StoreError> {
            self.record_turn(call, None, None).await.map(|_| ())
        }

        async fn record_turn(
            &self,
            call: &CallRecord,
            messages: Option<&[Message]>,
            completed: Option<&str>,
        ) -> Result<bool, StoreError> {
            let (tools, history) = encode_turn(call, messages)?;
            let c = self.client().await?;
            let (done, recall) = ledger::record_turn(
                c,
                self.lease(),
                call,
                &tools,
                history.as_deref(),
                completed,
            )
            .await?;
            self.committed(recall);
            Ok(done)
        }
    }
}
