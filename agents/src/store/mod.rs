//! The engine's durable state: conversations, the task tree with each task's session history, the
//! per-call ledger, pending approvals and notices to conversations.
//!
//! The seam is the [`Store`] trait ([`seam`]): every operation the engine, the gateway, the admin
//! console and `opc tasks` need, async, so a second backend (PostgreSQL, to let several gateways share
//! one org) implements it without touching the engine. [`SqliteStore`] ([`sqlite`]) is the backend of
//! today: one SQLite file (rusqlite, bundled, WAL) with a dedicated writer thread that commits the
//! operations arriving together as one group (a savepoint each), and a separate read connection.
//!
//! Below the seam, the SQL lives in `impl Db` blocks over one connection, one concern per file:
//! - [`schema`]: the versioned migrations (the `agents` row of `schema_versions`), the only place the
//!   schema changes;
//! - `state`: [`TaskState`] and its transitions; `tasks`: conversations, task records and histories;
//! - `lifecycle`: starting, moving, ending and cancelling tasks; `ledger`: LLM calls and totals;
//! - `memory_jobs`: the durable queue of memory work (fact extraction, consolidation), queued with a
//!   root's completion, and the ledger's memory-work rows (kept out of the tasks' totals);
//! - `tool_calls`: the tool-call ledger and the Bash commands approved for a conversation;
//! - `approvals`, `notices`, `recovery` (startup), `lock` (one engine per database),
//!   `checkpointer` (WAL checkpoints off the writers' path), [`erase`] (`opc privacy erase`: every
//!   stored copy of a value rewritten, in every table of the file).
//!
//! Invariants:
//! - every state change is one transaction (a savepoint inside the writer's group commit), and a
//!   task's state only moves along [`TaskState::may_become`] (checked inside it, so two writers cannot
//!   both win);
//! - an operation's future resolves only after the commit that holds it: what a caller was told is
//!   stored survives a kill -9 exactly as it did with one commit per operation;
//! - an approval is decided at most once (`UPDATE … WHERE state = pending`);
//! - session histories are saved after every turn, so a new process can resume a suspended task.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, Row};

mod approvals;
mod checkpointer;
pub mod erase;
mod ledger;
mod lifecycle;
mod lock;
mod memory_jobs;
mod notices;
pub mod recall;
mod recovery;
pub mod schema;
mod seam;
mod sqlite;
mod state;
mod tasks;
mod tool_calls;

pub use approvals::{
    Approval, ApprovalOption, ApprovalState, Decided, OfferedOption, OptionOutcome, SystemDecider,
    check_options, resolve_options,
};
pub use ledger::{
    CallPrivacy, CallRecord, LatestCall, PrivacyDay, Spend, TaskPrivacy, Totals, tokens_text,
};
pub use lifecycle::Ending;
pub use lock::claim as claim_database;
pub use memory_jobs::{JobEnd, JobKind, MemoryJob};
pub use notices::Notice;
pub use recovery::Recovery;
pub use seam::Store;
pub use sqlite::SqliteStore;
pub use state::{TaskId, TaskState};
pub use tasks::{NewTask, TaskRecord};
pub use tool_calls::{ToolCallRecord, ToolOutcome};

use checkpointer::Checkpointer;

/// Store errors. SQLite failures are wrapped with what the store was doing.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or migrated.
    #[error("cannot open the task database {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// Why.
        source: rusqlite::Error,
    },
    /// The database was written by a newer OPC, whose schema this build does not know.
    #[error(
        "the task database {path} has schema version {found}, newer than this build of OPC knows ({known}); \
         upgrade OPC, or point `framework.memory.path` at another file"
    )]
    TooNew {
        /// The file.
        path: String,
        /// Its `user_version`.
        found: i64,
        /// The newest version this build migrates to.
        known: i64,
    },
    /// A schema migration failed (the database keeps its previous version).
    #[error("cannot upgrade the task database {path} ({what}): {source}")]
    Migrate {
        /// The file.
        path: String,
        /// The migration.
        what: &'static str,
        /// Why.
        source: rusqlite::Error,
    },
    /// The memory tables (recall messages, core blocks) in the same file could not be brought up to
    /// date; the engine records every turn there, so it does not start without them.
    #[error("cannot prepare the memory tables in {path}: {source}")]
    Memory {
        /// The file.
        path: String,
        /// Why.
        source: opc_memory::schema::SchemaError,
    },
    /// A query failed.
    #[error("task database error while {doing}: {source}")]
    Sql {
        /// What the store was doing.
        doing: &'static str,
        /// Why.
        source: rusqlite::Error,
    },
    /// A stored JSON column could not be read back.
    #[error("task database holds unreadable {what} for task {task}: {message}")]
    Corrupt {
        /// Which column.
        what: &'static str,
        /// The task.
        task: TaskId,
        /// The decode error.
        message: String,
    },
    /// Something to be stored could not be encoded as JSON; nothing was written (a history that
    /// cannot be saved must never replace the saved one).
    #[error("cannot save the {what} of task {task}: {message}")]
    Encode {
        /// What was being saved.
        what: &'static str,
        /// The task.
        task: TaskId,
        /// The encoder's error.
        message: String,
    },
    /// A transition the lifecycle does not allow.
    #[error("task {task} cannot go from {from} to {to}")]
    BadTransition {
        /// The task.
        task: TaskId,
        /// Its current state.
        from: &'static str,
        /// The refused state.
        to: &'static str,
    },
    /// No such task.
    #[error("there is no task {0}")]
    NoTask(TaskId),
    /// The conversation's previous request is still running.
    #[error(
        "conversation {conversation} is still working on task {task}; wait for it or cancel it"
    )]
    Busy {
        /// The conversation.
        conversation: String,
        /// Its running root task.
        task: TaskId,
    },
    /// The store's writer stopped (it panicked, or the store is shutting down); the operation may not
    /// have been stored.
    #[error("the task database's writer stopped: {0}")]
    Writer(String),
    /// Another OPC process is using this database.
    #[error(
        "another OPC process is using {path} (lock file {lock}); stop it first, or point `framework.memory.path` elsewhere"
    )]
    Locked {
        /// The database.
        path: String,
        /// The lock file.
        lock: String,
    },
}

/// `execute` through the connection's statement cache: the engine runs the same few statements
/// thousands of times, and re-parsing SQL was a measurable share of each call.
fn exec(conn: &Connection, query: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(query)?.execute(params)
}

/// `query_row` through the statement cache.
fn row<T>(
    conn: &Connection,
    query: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(query)?.query_row(params, f)
}

fn sql(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sql { doing, source }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One SQLite connection and the SQL of every operation (synchronous). [`SqliteStore`] runs the
/// writes on its writer thread's `Db` and the reads on a second one (file databases).
struct Db {
    conn: Mutex<Connection>,
    /// The database file (`None` in memory).
    path: Option<std::path::PathBuf>,
    /// The held lock file, once [`Db::lock_exclusive`] succeeded; released on drop.
    lock: Mutex<Option<std::fs::File>>,
    /// Stops the background checkpointer (file databases only) when the store is dropped.
    _checkpointer: Option<Checkpointer>,
    /// Called after a commit that appended to recall memory (wakes the recall indexer).
    recall_notify: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Set by an operation that appended to recall memory; the writer calls `recall_notify` once its
    /// group is committed (never before: the indexer must find the rows).
    recall_dirty: AtomicBool,
}
impl Db {
    fn recall_appended(&self) {
        self.recall_dirty.store(true, Ordering::Release);
    }

    /// Wake the recall indexer if a committed operation appended to recall memory.
    fn notify_recall(&self) {
        if self.recall_dirty.swap(false, Ordering::AcqRel)
            && let Some(notify) = self.recall_notify.get()
        {
            notify();
        }
    }

    /// Open (creating if needed) the database at `path`, in WAL mode, and bring its schema up to date
    /// ([`schema::migrate`]).
    fn open(path: &Path) -> Result<Db, StoreError> {
        let display = path.display().to_string();
        let open_err = |source| StoreError::Open {
            path: display.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| open_err(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        }
        let conn = Connection::open(path).map_err(open_err)?;
        let mut store = Self::init(conn, &display)?;
        store
            .conn()
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(open_err)?;
        // A 1 MB page cache (SQLite's default is 2 MB): the hot rows are the live tasks', and a
        // burst of conversations should not leave a full cache behind (issue 9 §3).
        store
            .conn()
            .pragma_update(None, "cache_size", -1024)
            .map_err(open_err)?;
        store.path = Some(path.to_path_buf());
        store._checkpointer = Checkpointer::start(path);
        Ok(store)
    }

    /// A private in-memory database (tests, benchmarks).
    fn in_memory() -> Result<Db, StoreError> {
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: ":memory:".into(),
            source,
        })?;
        Self::init(conn, ":memory:")
    }

    fn init(mut conn: Connection, path: &str) -> Result<Db, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_string(),
            source,
        };
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(64);
        schema::migrate(&mut conn, path)?;
        // Recall memory's tables live in the same file: every turn appends to them in its own
        // transaction (see `recall.rs`), so they must exist before the first task.
        opc_memory::schema::migrate(&mut conn).map_err(|source| StoreError::Memory {
            path: path.to_string(),
            source,
        })?;
        Ok(Db::over(conn))
    }

    fn over(conn: Connection) -> Db {
        Db {
            conn: Mutex::new(conn),
            path: None,
            lock: Mutex::new(None),
            _checkpointer: None,
            recall_notify: std::sync::OnceLock::new(),
            recall_dirty: AtomicBool::new(false),
        }
    }

    /// A second connection to the file database at `path` (already opened and migrated by
    /// [`Db::open`]), for reads only: in WAL mode it reads the last commit while the writer works.
    fn reader(path: &Path) -> Result<Db, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
                | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(open_err)?;
        conn.pragma_update(None, "cache_size", -1024)
            .map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(Db::over(conn))
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll back on
        // drop), so a poisoned lock is still safe to use.
        self.conn
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// Fixtures shared by the store's unit tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod testing {
    use super::{Db, NewTask, TaskId};
    use crate::llm::Message;

    pub(super) fn root(store: &Db, conv: &str) -> TaskId {
        store.create_conversation(conv, "ceo").unwrap();
        store
            .create_task(&NewTask {
                parent_id: None,
                conversation_id: conv,
                agent: "ceo",
                depth: 0,
                tool_use_id: None,
                tool_index: 0,
                input: "hello",
                messages: &[Message::user("hello")],
                author: None,
            })
            .unwrap()
    }

    pub(super) fn child(store: &Db, parent: TaskId, tool: &str) -> TaskId {
        store
            .create_task(&NewTask {
                parent_id: Some(parent),
                conversation_id: "c",
                agent: "vp",
                depth: 1,
                tool_use_id: Some(tool),
                tool_index: 0,
                input: "do it",
                messages: &[],
                author: None,
            })
            .unwrap()
    }
}
