//! The engine's durable state: conversations, the task tree with each task's session history, the
//! per-call ledger, pending approvals and notices to conversations.
//!
//! The seam is the [`Store`] trait ([`seam`]): every operation the engine, the gateway, the admin
//! console and `opc tasks` need, async, so a second backend (PostgreSQL, to let several gateways share
//! one org) implements it without touching the engine. [`SqliteStore`] ([`sqlite`]) is the backend of
//! today: one SQLite file (rusqlite, bundled, WAL) with a dedicated writer thread that commits the
//! operations arriving together as one group (a savepoint each), and a separate read connection.
//!
//! Errors are backend-neutral ([`error`]): a failure of the database itself is a [`DbFailure`] that
//! says what it means ([`DbFault`]: unavailable, conflict, corrupt, other), never a driver's type, so
//! callers match on the same variants whichever backend runs.
//!
//! Each operation is written twice, plus one line: its contract once, in the trait (`seam`), and its
//! SQL once, in an `impl Db` function of the same name and arguments (synchronous, one
//! connection); `SqliteStore`'s impl of the trait is a macro over one line per operation (`read` runs
//! the `Db` function inline, on the read connection of a file, `write` carries the arguments owned to the writer
//! thread, `carry`, and runs it there), and only the operations that do more than forward (encoding
//! on the caller's thread, two `Db` functions in one job) are written by hand. A natively async
//! backend implements the trait directly: twice, no line between.
//!
//! Below the seam, the SQL lives in `impl Db` blocks over one connection, one concern per file:
//! - [`schema`]: the versioned migrations (the `agents` row of `schema_versions`), the only place the
//!   schema changes;
//! - `state`: [`TaskState`] and its transitions; `tasks`: conversations, task records and histories;
//! - `lifecycle`: starting, moving, ending and cancelling tasks; `ledger`: LLM calls and totals, and
//!   memory work's calls (kept out of the tasks' totals);
//! - `memory_jobs`: the durable queue of memory work (fact extraction, consolidation), queued with a
//!   root's completion;
//! - `tool_calls`: the tool-call ledger and the Bash commands approved for a conversation;
//! - `approvals`, `notices`, `recovery` (startup), `lock` (one engine per database),
//!   `checkpointer` (WAL checkpoints off the writers' path), [`erase`] (`opc privacy erase`: every
//!   stored copy of a value rewritten, in every table of the file), `commits` (each write
//!   transaction's commit latency, on both backends, as the `opc.store.commit.duration` metric).
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
use std::time::Duration;

use rusqlite::{Connection, Row};

mod approvals;
mod carry;
mod checkpointer;
pub mod cluster;
mod commits;
pub mod erase;
mod error;
mod ledger;
mod lifecycle;
mod lock;
mod memory_jobs;
mod notices;
pub mod postgres;
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
pub use cluster::{Claimed, Cluster, NodeIdentity, NodeRow, RELAY_LIMIT, SavedConfig, Wake};
pub use error::{DbFailure, DbFault, StoreError};
pub use ledger::{
    CallPrivacy, CallRecord, LatestCall, PrivacyDay, Spend, TaskPrivacy, TimedCall, Totals,
    tokens_text,
};
pub use lifecycle::Ending;
pub use lock::claim as claim_database;
pub use memory_jobs::{JobEnd, JobKind, MemoryJob};
pub use notices::Notice;
pub use postgres::PgStore;
pub use recovery::Recovery;
pub use seam::Store;
pub use sqlite::SqliteStore;
pub use state::{TaskId, TaskState};
pub use tasks::{NewTask, TaskRecord};
pub use tool_calls::{ToolCallRecord, ToolOutcome};

use checkpointer::Checkpointer;

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
    move |e| StoreError::Database {
        doing,
        source: failure(&e),
    }
}

/// The error of opening the database at `path` (for `map_err`).
fn opening(path: &str) -> impl Fn(rusqlite::Error) -> StoreError + Copy + '_ {
    move |e| StoreError::Open {
        path: path.to_string(),
        source: failure(&e),
    }
}

/// What a SQLite error means, in the store's backend-neutral terms (the message kept whole).
fn failure(e: &rusqlite::Error) -> DbFailure {
    use rusqlite::ErrorCode as Code;
    let fault = match e.sqlite_error_code() {
        Some(
            Code::DatabaseBusy
            | Code::DatabaseLocked
            | Code::CannotOpen
            | Code::SystemIoFailure
            | Code::DiskFull
            | Code::FileLockingProtocolFailed,
        ) => DbFault::Unavailable,
        Some(Code::ConstraintViolation) => DbFault::Conflict,
        Some(Code::DatabaseCorrupt | Code::NotADatabase | Code::TypeMismatch) => DbFault::Corrupt,
        Some(_) => DbFault::Other,
        None => match e {
            rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
            | rusqlite::Error::Utf8Error(..) => DbFault::Corrupt,
            _ => DbFault::Other,
        },
    };
    DbFailure {
        fault,
        message: e.to_string(),
    }
}

/// Why the memory tables of the file could not be brought up to date, in the store's terms: the
/// fault of the SQLite error behind it, if any (a newer schema is `Other`), and its whole message.
fn memory_failure(e: &opc_memory::schema::SchemaError) -> DbFailure {
    let mut cause = std::error::Error::source(e);
    let mut fault = DbFault::Other;
    while let Some(c) = cause {
        if let Some(sqlite) = c.downcast_ref::<rusqlite::Error>() {
            fault = failure(sqlite).fault;
            break;
        }
        cause = c.source();
    }
    DbFailure {
        fault,
        message: e.to_string(),
    }
}

/// The time as the store writes it (Unix ms): `opc-migrate`'s one clock for every table.
pub use opc_migrate::now_ms;

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
        let open_err = opening(&display);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: display.clone(),
                source: DbFailure {
                    fault: DbFault::Unavailable,
                    message: e.to_string(),
                },
            })?;
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
        let conn = Connection::open_in_memory().map_err(opening(":memory:"))?;
        Self::init(conn, ":memory:")
    }

    fn init(mut conn: Connection, path: &str) -> Result<Db, StoreError> {
        let open_err = opening(path);
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
        opc_memory::schema::migrate(&mut conn).map_err(|e| StoreError::Memory {
            path: path.to_string(),
            source: memory_failure(&e),
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
        let display = path.display().to_string();
        let open_err = opening(&display);
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
                trace: None,
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
                trace: None,
            })
            .unwrap()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// SQLite's errors reach callers as what they mean, with SQLite's own words kept whole.
    #[test]
    fn sqlite_errors_are_classified_by_meaning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (a INTEGER UNIQUE); INSERT INTO t VALUES (1);")
            .unwrap();

        let duplicate = exec(&conn, "INSERT INTO t VALUES (1)", []).unwrap_err();
        let error = sql("adding a row")(duplicate);
        assert_eq!(error.fault(), Some(DbFault::Conflict));
        assert_eq!(
            error.to_string(),
            "task database error while adding a row: UNIQUE constraint failed: t.a"
        );

        let text = row(&conn, "SELECT 'x'", [], |r| r.get::<_, i64>(0)).unwrap_err();
        assert_eq!(failure(&text).fault, DbFault::Corrupt);

        // A second writer, refused at once while the first holds the write lock.
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let other = Connection::open(&path).unwrap();
        other.busy_timeout(Duration::ZERO).unwrap();
        let busy = exec(&other, "INSERT INTO t VALUES (2)", []).unwrap_err();
        assert_eq!(failure(&busy).fault, DbFault::Unavailable);
        assert_eq!(failure(&busy).message, busy.to_string());

        let syntax = exec(&conn, "NOT SQL", []).unwrap_err();
        assert_eq!(failure(&syntax).fault, DbFault::Other);
        assert_eq!(StoreError::NoTask(1).fault(), None);
    }
}
