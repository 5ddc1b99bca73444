//! The engine's durable state in SQLite (rusqlite, bundled, WAL): conversations, the task tree with each
//! task's session history, the per-call ledger, pending approvals and notices to conversations.
//!
//! Why SQLite and one connection behind a mutex: every operation here is a handful of indexed row
//! reads/writes (tens of microseconds in WAL mode with `synchronous=NORMAL`), far below an LLM round
//! trip, so a single writer never becomes the bottleneck and the engine stays free of connection pools.
//!
//! Invariants:
//! - every state change is one transaction, and a task's state only moves along [`TaskState::may_become`]
//!   (checked inside the transaction, so two writers cannot both win);
//! - an approval is decided at most once (`UPDATE … WHERE state = 'pending'`);
//! - session histories are saved after every turn, so a new process can resume a suspended task.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use serde::Serialize;

use crate::llm::Message;

/// A task id (SQLite rowid).
pub type TaskId = i64;

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    /// Recorded, not yet picked up.
    Created,
    /// Picked up by its agent's session.
    Assigned,
    /// Waiting for children it delegated to.
    Delegated,
    /// Its agent is thinking (an LLM call or a tool is running).
    Executing,
    /// Final answer produced; being summarised / handed to the parent.
    ResultPropagating,
    /// Done, with an output.
    Completed,
    /// Failed, with an error.
    Failed,
    /// Ended by an escalation to the parent.
    Escalated,
    /// Suspended until a human decides an approval.
    AwaitingApproval,
    /// Cancelled (by a human, or because an ancestor was).
    Cancelled,
}

impl TaskState {
    /// Every state, in lifecycle order.
    pub const ALL: [TaskState; 10] = [
        TaskState::Created,
        TaskState::Assigned,
        TaskState::Delegated,
        TaskState::Executing,
        TaskState::ResultPropagating,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Escalated,
        TaskState::AwaitingApproval,
        TaskState::Cancelled,
    ];

    /// The name stored in the database and shown to people.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Created => "CREATED",
            TaskState::Assigned => "ASSIGNED",
            TaskState::Delegated => "DELEGATED",
            TaskState::Executing => "EXECUTING",
            TaskState::ResultPropagating => "RESULT_PROPAGATING",
            TaskState::Completed => "COMPLETED",
            TaskState::Failed => "FAILED",
            TaskState::Escalated => "ESCALATED",
            TaskState::AwaitingApproval => "AWAITING_APPROVAL",
            TaskState::Cancelled => "CANCELLED",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        TaskState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether the task has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Escalated | TaskState::Cancelled
        )
    }

    /// The allowed transitions. Any live state may fail or be cancelled; `ESCALATED` is reachable from
    /// any live state too, since a timeout escalates whatever the task was doing.
    pub fn may_become(self, next: TaskState) -> bool {
        use TaskState::*;
        if self.is_terminal() {
            return false;
        }
        match next {
            Failed | Cancelled | Escalated => true,
            Assigned => self == Created,
            Executing => matches!(self, Assigned | Delegated | AwaitingApproval | Executing),
            // A turn may delegate and ask for approval at once, so the two waits can alternate.
            Delegated => matches!(self, Executing | AwaitingApproval),
            AwaitingApproval => matches!(self, Executing | Delegated),
            ResultPropagating => self == Executing,
            Completed => self == ResultPropagating,
            Created => false,
        }
    }
}

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

/// One task as stored.
#[derive(Clone, Debug, Serialize)]
pub struct TaskRecord {
    /// Its id.
    pub id: TaskId,
    /// The task that delegated it (`None` for a root task).
    pub parent_id: Option<TaskId>,
    /// The root task of its tree.
    pub root_id: TaskId,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// The agent running it.
    pub agent: String,
    /// Depth in the delegation tree (root = 0).
    pub depth: u32,
    /// The parent's tool call that created it.
    pub tool_use_id: Option<String>,
    /// Position inside a `delegate_parallel` call.
    pub tool_index: u32,
    /// Current state.
    pub state: TaskState,
    /// The instructions it was given.
    pub input: String,
    /// Its final answer (the original, even when the parent was given a summary).
    pub output: Option<String>,
    /// The summary the parent saw, when the output was compressed.
    pub summary: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The structured escalation it ended with (JSON).
    pub escalation: Option<String>,
    /// Created, ms since epoch.
    pub created_at: i64,
    /// Last change, ms since epoch.
    pub updated_at: i64,
    /// Ended, ms since epoch.
    pub finished_at: Option<i64>,
    /// Prompt tokens over all its LLM calls.
    pub tokens_in: u64,
    /// Generated tokens over all its LLM calls.
    pub tokens_out: u64,
    /// USD over all its LLM calls.
    pub cost_usd: f64,
    /// LLM calls made.
    pub llm_calls: u32,
}

const TASK_COLUMNS: &str = "id, parent_id, root_id, conversation_id, agent, depth, tool_use_id, tool_index, \
     state, input, output, summary, error, escalation, created_at, updated_at, finished_at, \
     tokens_in, tokens_out, cost_usd, llm_calls";

fn task_from_row(row: &Row<'_>) -> rusqlite::Result<TaskRecord> {
    let state: String = row.get(8)?;
    Ok(TaskRecord {
        id: row.get(0)?,
        parent_id: row.get(1)?,
        root_id: row.get(2)?,
        conversation_id: row.get(3)?,
        agent: row.get(4)?,
        depth: row.get(5)?,
        tool_use_id: row.get(6)?,
        tool_index: row.get(7)?,
        state: TaskState::parse(&state).unwrap_or(TaskState::Failed),
        input: row.get(9)?,
        output: row.get(10)?,
        summary: row.get(11)?,
        error: row.get(12)?,
        escalation: row.get(13)?,
        created_at: row.get(14)?,
        updated_at: row.get(15)?,
        finished_at: row.get(16)?,
        tokens_in: row.get::<_, i64>(17)? as u64,
        tokens_out: row.get::<_, i64>(18)? as u64,
        cost_usd: row.get(19)?,
        llm_calls: row.get(20)?,
    })
}

/// What a new task starts with.
#[derive(Clone, Debug)]
pub struct NewTask<'a> {
    /// The delegating task, for child tasks.
    pub parent_id: Option<TaskId>,
    /// The conversation.
    pub conversation_id: &'a str,
    /// The agent.
    pub agent: &'a str,
    /// Depth (root = 0).
    pub depth: u32,
    /// The parent's tool call.
    pub tool_use_id: Option<&'a str>,
    /// Index inside `delegate_parallel`.
    pub tool_index: u32,
    /// Instructions.
    pub input: &'a str,
    /// The session history it starts from.
    pub messages: &'a [Message],
}

/// How a task ended, for [`Store::finish`].
#[derive(Clone, Debug)]
pub enum Ending<'a> {
    /// Completed with an output, and the summary the parent saw if compressed.
    Completed {
        /// The answer.
        output: &'a str,
        /// Its summary.
        summary: Option<&'a str>,
    },
    /// Failed.
    Failed(&'a str),
    /// Escalated (JSON of the escalation).
    Escalated(&'a str),
    /// Cancelled.
    Cancelled(&'a str),
}

/// One LLM call for the ledger.
#[derive(Clone, Debug, Serialize)]
pub struct CallRecord {
    /// The task it was made for.
    pub task_id: TaskId,
    /// The agent (or `summarizer`).
    pub agent: String,
    /// `provider/model`.
    pub model: String,
    /// Prompt tokens.
    pub tokens_in: u64,
    /// Generated tokens.
    pub tokens_out: u64,
    /// USD.
    pub cost_usd: f64,
    /// Wall time of the call, retries included.
    pub duration_ms: u64,
    /// Attempts made.
    pub attempts: u32,
    /// Wire names of the tools the model called.
    pub tool_calls: Vec<String>,
    /// The error, for a failed call.
    pub error: Option<String>,
}

/// A human approval.
#[derive(Clone, Debug, Serialize)]
pub struct Approval {
    /// Its id.
    pub id: i64,
    /// The task that asked.
    pub task_id: TaskId,
    /// That task's root.
    pub root_id: TaskId,
    /// The conversation.
    pub conversation_id: String,
    /// The agent that asked.
    pub agent: String,
    /// The tool call waiting for it.
    pub tool_use_id: String,
    /// What is to be approved.
    pub summary: String,
    /// The choices offered.
    pub options: Vec<String>,
    /// `pending`, `approved`, `rejected`.
    pub state: String,
    /// The option chosen.
    pub decision: Option<String>,
    /// Who decided (`timeout` / `cancelled` when the system did).
    pub decided_by: Option<String>,
    /// Created, ms since epoch.
    pub created_at: i64,
    /// Undecided after this → rejected.
    pub expires_at: i64,
    /// Decided, ms since epoch.
    pub decided_at: Option<i64>,
}

fn approval_from_row(row: &Row<'_>) -> rusqlite::Result<Approval> {
    let options: String = row.get(7)?;
    Ok(Approval {
        id: row.get(0)?,
        task_id: row.get(1)?,
        root_id: row.get(2)?,
        conversation_id: row.get(3)?,
        agent: row.get(4)?,
        tool_use_id: row.get(5)?,
        summary: row.get(6)?,
        options: serde_json::from_str(&options).unwrap_or_default(),
        state: row.get(8)?,
        decision: row.get(9)?,
        decided_by: row.get(10)?,
        created_at: row.get(11)?,
        expires_at: row.get(12)?,
        decided_at: row.get(13)?,
    })
}

const APPROVAL_COLUMNS: &str = "id, task_id, root_id, conversation_id, agent, tool_use_id, summary, options, \
     state, decision, decided_by, created_at, expires_at, decided_at";

/// The result of trying to decide an approval.
#[derive(Clone, Debug, PartialEq)]
pub enum Decided {
    /// Recorded.
    Recorded(Approval),
    /// It was already decided (by someone, a timeout or a cancellation).
    AlreadyDecided(Approval),
    /// It expired before the decision; it is now rejected.
    Expired(Approval),
    /// No such approval.
    NotFound,
}

impl PartialEq for Approval {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.state == other.state && self.decision == other.decision
    }
}

/// What startup recovery did.
#[derive(Clone, Debug, Default)]
pub struct Recovery {
    /// Tasks a crash left running, now FAILED: `(task, conversation, is_root)`.
    pub interrupted: Vec<(TaskId, String, bool)>,
    /// Approvals that expired while no process was running, now rejected.
    pub expired_approvals: Vec<i64>,
    /// Approvals still pending (their tasks stay suspended).
    pub pending_approvals: Vec<Approval>,
    /// Roots of trees suspended on an approval that was pending at startup (decided by expiry or
    /// still pending): the engine re-enters them so they wait again, or carry on with the rejection.
    pub suspended_roots: Vec<TaskId>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS conversations (
    id          TEXT PRIMARY KEY,
    root_agent  TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tasks (
    id              INTEGER PRIMARY KEY,
    parent_id       INTEGER REFERENCES tasks(id),
    root_id         INTEGER NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    agent           TEXT NOT NULL,
    depth           INTEGER NOT NULL,
    tool_use_id     TEXT,
    tool_index      INTEGER NOT NULL DEFAULT 0,
    state           TEXT NOT NULL,
    input           TEXT NOT NULL,
    output          TEXT,
    summary         TEXT,
    error           TEXT,
    escalation      TEXT,
    messages        TEXT NOT NULL DEFAULT '[]',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    tokens_in       INTEGER NOT NULL DEFAULT 0,
    tokens_out      INTEGER NOT NULL DEFAULT 0,
    cost_usd        REAL NOT NULL DEFAULT 0,
    llm_calls       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tasks_parent ON tasks(parent_id, tool_use_id, tool_index);
CREATE INDEX IF NOT EXISTS tasks_root ON tasks(root_id);
CREATE INDEX IF NOT EXISTS tasks_conversation ON tasks(conversation_id, id);
DROP INDEX IF EXISTS tasks_state;
CREATE TABLE IF NOT EXISTS llm_calls (
    id          INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL REFERENCES tasks(id),
    agent       TEXT NOT NULL,
    model       TEXT NOT NULL,
    tokens_in   INTEGER NOT NULL,
    tokens_out  INTEGER NOT NULL,
    cost_usd    REAL NOT NULL,
    duration_ms INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    tool_calls  TEXT NOT NULL,
    error       TEXT,
    created_at  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_calls_task ON llm_calls(task_id);
CREATE TABLE IF NOT EXISTS approvals (
    id              INTEGER PRIMARY KEY,
    task_id         INTEGER NOT NULL REFERENCES tasks(id),
    root_id         INTEGER NOT NULL,
    conversation_id TEXT NOT NULL,
    agent           TEXT NOT NULL,
    tool_use_id     TEXT NOT NULL,
    summary         TEXT NOT NULL,
    options         TEXT NOT NULL,
    state           TEXT NOT NULL,
    decision        TEXT,
    decided_by      TEXT,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    decided_at      INTEGER,
    UNIQUE (task_id, tool_use_id)
);
CREATE TABLE IF NOT EXISTS notices (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    task_id         INTEGER,
    text            TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);
";

/// The engine's database.
pub struct Store {
    conn: Mutex<Connection>,
    /// The database file (`None` in memory).
    path: Option<std::path::PathBuf>,
    /// The held lock file, once [`Store::lock_exclusive`] succeeded; released on drop.
    lock: Mutex<Option<std::fs::File>>,
    /// Stops the background checkpointer (file databases only) when the store is dropped.
    _checkpointer: Option<Checkpointer>,
}

/// Moves the WAL into the database file from a thread with its own connection, once a second.
///
/// Why not SQLite's automatic checkpoint: it runs inside whichever commit crosses the threshold, while
/// that commit holds the engine's connection lock — every agent waiting on the store then waits for
/// ~1,000 pages to be copied and fsynced (it was the p99 of a turn). A passive checkpoint on the side
/// never blocks writers.
struct Checkpointer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    fn start(path: &Path) -> Option<Checkpointer> {
        let conn = Connection::open(path).ok()?;
        conn.busy_timeout(Duration::from_secs(5)).ok()?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("opc-sqlite-checkpoint".into())
            .spawn(move || {
                let checkpoint = || {
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::warn!(error = %e, "WAL checkpoint failed");
                    }
                };
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(Duration::from_secs(1))
                {
                    checkpoint();
                }
                checkpoint();
            })
            .ok()?;
        Some(Checkpointer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Store {
    /// Open (creating if needed) the database at `path`, in WAL mode.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| open_err(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        }
        let conn = Connection::open(path).map_err(open_err)?;
        let mut store = Self::init(conn).map_err(open_err)?;
        store
            .conn()
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(open_err)?;
        store.path = Some(path.to_path_buf());
        store._checkpointer = Checkpointer::start(path);
        Ok(store)
    }

    /// Claim the database for this process: the engine runs startup recovery and resumes suspended
    /// trees, which must never happen twice over one database. Readers (`opc tasks`) do not lock.
    pub fn lock_exclusive(&self) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut lock_path = path.clone().into_os_string();
        lock_path.push(".lock");
        let lock_path = std::path::PathBuf::from(lock_path);
        let locked = |reason: String| StoreError::Locked {
            path: path.display().to_string(),
            lock: format!("{}: {reason}", lock_path.display()),
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| locked(e.to_string()))?;
        match file.try_lock() {
            Ok(()) => {
                *self.lock.lock().unwrap_or_else(|p| p.into_inner()) = Some(file);
                Ok(())
            }
            Err(std::fs::TryLockError::WouldBlock) => Err(locked("held by another process".into())),
            Err(std::fs::TryLockError::Error(e)) => Err(locked(e.to_string())),
        }
    }

    /// A private in-memory database (tests, benchmarks).
    pub fn in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: ":memory:".into(),
            source,
        })?;
        Self::init(conn).map_err(|source| StoreError::Open {
            path: ":memory:".into(),
            source,
        })
    }

    fn init(conn: Connection) -> rusqlite::Result<Store> {
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.set_prepared_statement_cache_capacity(64);
        conn.execute_batch(SCHEMA)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path: None,
            lock: Mutex::new(None),
            _checkpointer: None,
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll back on
        // drop), so a poisoned lock is still safe to use.
        self.conn
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    // -------------------------------------------------------------------------------- conversations

    /// Record a new conversation with `root_agent`, under `id`.
    pub fn create_conversation(&self, id: &str, root_agent: &str) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "INSERT OR IGNORE INTO conversations (id, root_agent, created_at) VALUES (?1, ?2, ?3)",
            params![id, root_agent, now_ms()],
        )
        .map_err(sql("creating a conversation"))?;
        Ok(())
    }

    /// The latest root task of a conversation, if any.
    pub fn last_root_task(&self, conversation_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        row(
            &self.conn(),
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE conversation_id = ?1 AND parent_id IS NULL \
                     ORDER BY id DESC LIMIT 1"
            ),
            [conversation_id],
            task_from_row,
        )
        .optional()
        .map_err(sql("finding a conversation's last task"))
    }

    /// Tell a conversation something (e.g. that its task was interrupted).
    pub fn add_notice(
        &self,
        conversation_id: &str,
        task_id: Option<TaskId>,
        text: &str,
    ) -> Result<(), StoreError> {
        exec(&self.conn(),
                "INSERT INTO notices (conversation_id, task_id, text, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![conversation_id, task_id, text, now_ms()],
            )
            .map_err(sql("adding a notice"))?;
        Ok(())
    }

    /// A conversation's notices, oldest first.
    pub fn notices(&self, conversation_id: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT text FROM notices WHERE conversation_id = ?1 ORDER BY id")
            .map_err(sql("reading notices"))?;
        let rows = stmt
            .query_map([conversation_id], |row| row.get(0))
            .map_err(sql("reading notices"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading notices"))
    }

    // -------------------------------------------------------------------------------- tasks

    /// Record a new task (state CREATED). A root task is its own root, and records its conversation if
    /// it is the first; it is refused while the conversation has a live root ([`StoreError::Busy`]).
    pub fn create_task(&self, task: &NewTask<'_>) -> Result<TaskId, StoreError> {
        let messages = serde_json::to_string(task.messages).unwrap_or_else(|_| "[]".into());
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("creating a task"))?;
        let root_id: Option<TaskId> = match task.parent_id {
            Some(parent) => Some(
                row(
                    &tx,
                    "SELECT root_id FROM tasks WHERE id = ?1",
                    [parent],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql("creating a task"))?
                .ok_or(StoreError::NoTask(parent))?,
            ),
            None => {
                // One request at a time per conversation: checked in the inserting transaction, so two
                // concurrent senders cannot both start a root.
                let live: Option<TaskId> = row(
                    &tx,
                    "SELECT id FROM tasks WHERE conversation_id = ?1 AND parent_id IS NULL \
                         AND state NOT IN ('COMPLETED', 'FAILED', 'ESCALATED', 'CANCELLED')",
                    [task.conversation_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql("creating a task"))?;
                if let Some(live) = live {
                    return Err(StoreError::Busy {
                        conversation: task.conversation_id.to_string(),
                        task: live,
                    });
                }
                exec(
                    &tx,
                    "INSERT OR IGNORE INTO conversations (id, root_agent, created_at) VALUES (?1, ?2, ?3)",
                    params![task.conversation_id, task.agent, now_ms()],
                )
                .map_err(sql("creating a task"))?;
                None
            }
        };
        let now = now_ms();
        exec(&tx,
            "INSERT INTO tasks (parent_id, root_id, conversation_id, agent, depth, tool_use_id, tool_index, \
             state, input, messages, created_at, updated_at) \
             VALUES (?1, COALESCE(?2, 0), ?3, ?4, ?5, ?6, ?7, 'CREATED', ?8, ?9, ?10, ?10)",
            params![
                task.parent_id,
                root_id,
                task.conversation_id,
                task.agent,
                task.depth,
                task.tool_use_id,
                task.tool_index,
                task.input,
                messages,
                now
            ],
        )
        .map_err(sql("creating a task"))?;
        let id = tx.last_insert_rowid();
        if root_id.is_none() {
            exec(&tx, "UPDATE tasks SET root_id = id WHERE id = ?1", [id])
                .map_err(sql("creating a task"))?;
        }
        tx.commit().map_err(sql("creating a task"))?;
        Ok(id)
    }

    /// One task.
    pub fn task(&self, id: TaskId) -> Result<TaskRecord, StoreError> {
        row(
            &self.conn(),
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
            [id],
            task_from_row,
        )
        .optional()
        .map_err(sql("reading a task"))?
        .ok_or(StoreError::NoTask(id))
    }

    /// The child a parent's tool call created, if it exists (makes delegation idempotent on resume).
    pub fn child_for(
        &self,
        parent: TaskId,
        tool_use_id: &str,
        index: u32,
    ) -> Result<Option<TaskRecord>, StoreError> {
        row(&self.conn(),
                &format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE parent_id = ?1 AND tool_use_id = ?2 AND tool_index = ?3"
                ),
                params![parent, tool_use_id, index],
                task_from_row,
            )
            .optional()
            .map_err(sql("finding a child task"))
    }

    /// Start (or resume) a task's session in one transaction: its record (CREATED becomes ASSIGNED, and
    /// EXECUTING right away when a model turn is next) and its saved history.
    pub fn begin(&self, id: TaskId) -> Result<(TaskRecord, Vec<Message>), StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("starting a task"))?;
        let mut record = row(
            &tx,
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
            [id],
            task_from_row,
        )
        .optional()
        .map_err(sql("starting a task"))?
        .ok_or(StoreError::NoTask(id))?;
        let text: String = row(&tx, "SELECT messages FROM tasks WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .map_err(sql("starting a task"))?;
        let messages: Vec<Message> =
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                what: "session history",
                task: id,
                message: e.to_string(),
            })?;
        // A new task is assigned; if its next step is a model turn (the history ends with the task or
        // tool results), it is executing from here on — one commit instead of two.
        let next_is_turn = messages
            .last()
            .is_some_and(|m| m.role == crate::llm::Role::User);
        let next = match record.state {
            TaskState::Created | TaskState::Assigned if next_is_turn => Some(TaskState::Executing),
            TaskState::Created => Some(TaskState::Assigned),
            _ => None,
        };
        if let Some(next) = next {
            exec(
                &tx,
                "UPDATE tasks SET state = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, next.as_str(), now_ms()],
            )
            .map_err(sql("starting a task"))?;
            record.state = next;
        }
        tx.commit().map_err(sql("starting a task"))?;
        Ok((record, messages))
    }

    /// A task's saved session history.
    pub fn messages(&self, id: TaskId) -> Result<Vec<Message>, StoreError> {
        let text: String = row(
            &self.conn(),
            "SELECT messages FROM tasks WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql("reading a session"))?
        .ok_or(StoreError::NoTask(id))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            what: "session history",
            task: id,
            message: e.to_string(),
        })
    }

    /// Save a task's session history (after every turn).
    pub fn save_messages(&self, id: TaskId, messages: &[Message]) -> Result<(), StoreError> {
        let text = serde_json::to_string(messages).unwrap_or_else(|_| "[]".into());
        exec(
            &self.conn(),
            "UPDATE tasks SET messages = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, text, now_ms()],
        )
        .map_err(sql("saving a session"))?;
        Ok(())
    }

    /// Move a task to `next`, if the lifecycle allows it from its current state. Returns the previous
    /// state. Same-state "transitions" are no-ops.
    pub fn transition(&self, id: TaskId, next: TaskState) -> Result<TaskState, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("changing a task's state"))?;
        let current = Self::state_in(&tx, id)?;
        if current == next {
            return Ok(current);
        }
        if !current.may_become(next) {
            return Err(StoreError::BadTransition {
                task: id,
                from: current.as_str(),
                to: next.as_str(),
            });
        }
        exec(
            &tx,
            "UPDATE tasks SET state = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, next.as_str(), now_ms()],
        )
        .map_err(sql("changing a task's state"))?;
        tx.commit().map_err(sql("changing a task's state"))?;
        Ok(current)
    }

    fn state_in(tx: &Connection, id: TaskId) -> Result<TaskState, StoreError> {
        let state: String = row(tx, "SELECT state FROM tasks WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()
        .map_err(sql("reading a task's state"))?
        .ok_or(StoreError::NoTask(id))?;
        TaskState::parse(&state).ok_or(StoreError::Corrupt {
            what: "state",
            task: id,
            message: state,
        })
    }

    /// End a task. Completing goes through RESULT_PROPAGATING first. A task that already ended keeps its
    /// first ending (e.g. cancelled while its last LLM call was in flight) and `false` is returned.
    pub fn finish(&self, id: TaskId, ending: Ending<'_>) -> Result<bool, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("ending a task"))?;
        let current = Self::state_in(&tx, id)?;
        if current.is_terminal() {
            return Ok(false);
        }
        let now = now_ms();
        let (state, output, summary, error, escalation) = match ending {
            Ending::Completed { output, summary } => {
                (TaskState::Completed, Some(output), summary, None, None)
            }
            Ending::Failed(error) => (TaskState::Failed, None, None, Some(error), None),
            Ending::Escalated(json) => (TaskState::Escalated, None, None, None, Some(json)),
            Ending::Cancelled(reason) => (TaskState::Cancelled, None, None, Some(reason), None),
        };
        if state == TaskState::Completed
            && current != TaskState::ResultPropagating
            && !current.may_become(TaskState::ResultPropagating)
        {
            return Err(StoreError::BadTransition {
                task: id,
                from: current.as_str(),
                to: state.as_str(),
            });
        }
        exec(
            &tx,
            "UPDATE tasks SET state = ?2, output = ?3, summary = ?4, error = ?5, escalation = ?6, \
             updated_at = ?7, finished_at = ?7 WHERE id = ?1",
            params![id, state.as_str(), output, summary, error, escalation, now],
        )
        .map_err(sql("ending a task"))?;
        tx.commit().map_err(sql("ending a task"))?;
        Ok(true)
    }

    /// Record one LLM call and add it to its task's totals, in one transaction.
    pub fn record_call(&self, call: &CallRecord) -> Result<(), StoreError> {
        self.record_turn(call, None, None).map(|_| ())
    }

    /// Record one LLM call, add it to its task's totals and save the session history that includes its
    /// answer — one transaction per model turn. With `completed`, the answer is final and the task is
    /// completed with it in the same transaction (it passes through RESULT_PROPAGATING); returns
    /// whether it was (a task that already ended, e.g. cancelled, keeps its ending).
    pub fn record_turn(
        &self,
        call: &CallRecord,
        messages: Option<&[Message]>,
        completed: Option<&str>,
    ) -> Result<bool, StoreError> {
        let tools = serde_json::to_string(&call.tool_calls).unwrap_or_else(|_| "[]".into());
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("recording an LLM call"))?;
        exec(&tx,
            "INSERT INTO llm_calls (task_id, agent, model, tokens_in, tokens_out, cost_usd, duration_ms, \
             attempts, tool_calls, error, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                call.task_id,
                call.agent,
                call.model,
                call.tokens_in as i64,
                call.tokens_out as i64,
                call.cost_usd,
                call.duration_ms as i64,
                call.attempts,
                tools,
                call.error,
                now_ms()
            ],
        )
        .map_err(sql("recording an LLM call"))?;
        exec(
            &tx,
            "UPDATE tasks SET tokens_in = tokens_in + ?2, tokens_out = tokens_out + ?3, \
             cost_usd = cost_usd + ?4, llm_calls = llm_calls + 1 WHERE id = ?1",
            params![
                call.task_id,
                call.tokens_in as i64,
                call.tokens_out as i64,
                call.cost_usd
            ],
        )
        .map_err(sql("recording an LLM call"))?;
        if let Some(messages) = messages {
            let text = serde_json::to_string(messages).unwrap_or_else(|_| "[]".into());
            exec(
                &tx,
                "UPDATE tasks SET messages = ?2, updated_at = ?3 WHERE id = ?1",
                params![call.task_id, text, now_ms()],
            )
            .map_err(sql("saving a session"))?;
        }
        let mut done = false;
        if let Some(output) = completed {
            let current = Self::state_in(&tx, call.task_id)?;
            if !current.is_terminal() {
                if !current.may_become(TaskState::ResultPropagating) {
                    return Err(StoreError::BadTransition {
                        task: call.task_id,
                        from: current.as_str(),
                        to: TaskState::Completed.as_str(),
                    });
                }
                let now = now_ms();
                exec(
                    &tx,
                    "UPDATE tasks SET state = 'COMPLETED', output = ?2, updated_at = ?3, finished_at = ?3 \
                     WHERE id = ?1",
                    params![call.task_id, output, now],
                )
                .map_err(sql("ending a task"))?;
                done = true;
            }
        }
        tx.commit().map_err(sql("recording an LLM call"))?;
        Ok(done)
    }

    /// The LLM calls made for a task, in order.
    pub fn calls(&self, task_id: TaskId) -> Result<Vec<CallRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT task_id, agent, model, tokens_in, tokens_out, cost_usd, duration_ms, attempts, \
                 tool_calls, error FROM llm_calls WHERE task_id = ?1 ORDER BY id",
            )
            .map_err(sql("reading the ledger"))?;
        let rows = stmt
            .query_map([task_id], |row| {
                let tools: String = row.get(8)?;
                Ok(CallRecord {
                    task_id: row.get(0)?,
                    agent: row.get(1)?,
                    model: row.get(2)?,
                    tokens_in: row.get::<_, i64>(3)? as u64,
                    tokens_out: row.get::<_, i64>(4)? as u64,
                    cost_usd: row.get(5)?,
                    duration_ms: row.get::<_, i64>(6)? as u64,
                    attempts: row.get(7)?,
                    tool_calls: serde_json::from_str(&tools).unwrap_or_default(),
                    error: row.get(9)?,
                })
            })
            .map_err(sql("reading the ledger"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading the ledger"))
    }

    /// Every task of a tree, in creation order (parents before children).
    pub fn tree(&self, root_id: TaskId) -> Result<Vec<TaskRecord>, StoreError> {
        self.query_tasks(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE root_id = ?1 ORDER BY id"),
            params![root_id],
        )
    }

    /// The most recent root tasks, newest first.
    pub fn recent_roots(&self, limit: u32) -> Result<Vec<TaskRecord>, StoreError> {
        self.query_tasks(
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE parent_id IS NULL ORDER BY id DESC LIMIT ?1"
            ),
            params![limit],
        )
    }

    /// Tasks that have not ended, oldest first.
    pub fn live_tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        self.query_tasks(
            &format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE state NOT IN \
                 ('COMPLETED', 'FAILED', 'ESCALATED', 'CANCELLED') ORDER BY id"
            ),
            params![],
        )
    }

    /// Sum of tokens and cost over a tree: `(tokens_in, tokens_out, cost_usd)`.
    pub fn tree_totals(&self, root_id: TaskId) -> Result<(u64, u64, f64), StoreError> {
        row(&self.conn(),
                "SELECT COALESCE(SUM(tokens_in), 0), COALESCE(SUM(tokens_out), 0), COALESCE(SUM(cost_usd), 0) \
                 FROM tasks WHERE root_id = ?1",
                [root_id],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64, r.get(2)?)),
            )
            .map_err(sql("summing a task tree"))
    }

    fn query_tasks(
        &self,
        query: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(query).map_err(sql("listing tasks"))?;
        let rows = stmt
            .query_map(params, task_from_row)
            .map_err(sql("listing tasks"))?;
        rows.collect::<Result<_, _>>().map_err(sql("listing tasks"))
    }

    /// Cancel a task and every live task below it, in one transaction; their pending approvals are
    /// rejected. Returns the ids that were cancelled (the subtree's live tasks).
    pub fn cancel_subtree(&self, id: TaskId, reason: &str) -> Result<Vec<TaskId>, StoreError> {
        self.cancel_below(id, reason, true)
    }

    /// Cancel every live task below `id` (not `id` itself), as [`Store::cancel_subtree`] does.
    pub fn cancel_descendants(&self, id: TaskId, reason: &str) -> Result<Vec<TaskId>, StoreError> {
        self.cancel_below(id, reason, false)
    }

    fn cancel_below(
        &self,
        id: TaskId,
        reason: &str,
        include_self: bool,
    ) -> Result<Vec<TaskId>, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("cancelling tasks"))?;
        Self::state_in(&tx, id)?;
        let ids: Vec<TaskId> = {
            let mut stmt = tx
                .prepare(
                    "WITH RECURSIVE sub(id) AS (SELECT ?1 UNION ALL \
                     SELECT t.id FROM tasks t JOIN sub ON t.parent_id = sub.id) \
                     SELECT tasks.id FROM tasks JOIN sub ON tasks.id = sub.id \
                     WHERE state NOT IN ('COMPLETED', 'FAILED', 'ESCALATED', 'CANCELLED') \
                     AND (?2 OR tasks.id <> ?1) ORDER BY tasks.id",
                )
                .map_err(sql("cancelling tasks"))?;
            let rows = stmt
                .query_map(params![id, include_self], |r| r.get(0))
                .map_err(sql("cancelling tasks"))?;
            rows.collect::<Result<_, _>>()
                .map_err(sql("cancelling tasks"))?
        };
        let now = now_ms();
        for task in &ids {
            exec(&tx,
                "UPDATE tasks SET state = 'CANCELLED', error = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1",
                params![task, reason, now],
            )
            .map_err(sql("cancelling tasks"))?;
            exec(&tx,
                "UPDATE approvals SET state = 'rejected', decision = 'reject', decided_by = 'cancelled', \
                 decided_at = ?2 WHERE task_id = ?1 AND state = 'pending'",
                params![task, now],
            )
            .map_err(sql("cancelling tasks"))?;
        }
        tx.commit().map_err(sql("cancelling tasks"))?;
        Ok(ids)
    }

    // -------------------------------------------------------------------------------- approvals

    /// Record a pending approval for a task's tool call, or return the existing one for that call (so a
    /// resumed session does not ask twice). The flag says whether it was created now.
    pub fn request_approval(
        &self,
        task: &TaskRecord,
        tool_use_id: &str,
        summary: &str,
        options: &[String],
        timeout: Duration,
    ) -> Result<(Approval, bool), StoreError> {
        let options_json = serde_json::to_string(options).unwrap_or_else(|_| "[]".into());
        let now = now_ms();
        let expires = now.saturating_add(timeout.as_millis() as i64);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("requesting an approval"))?;
        let created = exec(&tx,
            "INSERT OR IGNORE INTO approvals (task_id, root_id, conversation_id, agent, tool_use_id, summary, \
             options, state, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9)",
            params![
                task.id,
                task.root_id,
                task.conversation_id,
                task.agent,
                tool_use_id,
                summary,
                options_json,
                now,
                expires
            ],
        )
        .map_err(sql("requesting an approval"))?
            == 1;
        let approval = row(
            &tx,
            &format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE task_id = ?1 AND tool_use_id = ?2"
            ),
            params![task.id, tool_use_id],
            approval_from_row,
        )
        .map_err(sql("requesting an approval"))?;
        tx.commit().map_err(sql("requesting an approval"))?;
        Ok((approval, created))
    }

    /// One approval.
    pub fn approval(&self, id: i64) -> Result<Option<Approval>, StoreError> {
        row(
            &self.conn(),
            &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
            [id],
            approval_from_row,
        )
        .optional()
        .map_err(sql("reading an approval"))
    }

    /// Approvals still waiting for a human, oldest first.
    pub fn pending_approvals(&self) -> Result<Vec<Approval>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = 'pending' ORDER BY id"
            ))
            .map_err(sql("listing approvals"))?;
        let rows = stmt
            .query_map([], approval_from_row)
            .map_err(sql("listing approvals"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("listing approvals"))
    }

    /// Decide an approval once. `decision` is one of its options; anything other than `approve` counts
    /// as a rejection for the state column. An expired approval is rejected instead of recorded.
    pub fn decide(&self, id: i64, decision: &str, by: &str) -> Result<Decided, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("deciding an approval"))?;
        let read = |tx: &Connection| {
            row(
                tx,
                &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
                [id],
                approval_from_row,
            )
            .optional()
            .map_err(sql("deciding an approval"))
        };
        let Some(approval) = read(&tx)? else {
            return Ok(Decided::NotFound);
        };
        if approval.state != "pending" {
            return Ok(Decided::AlreadyDecided(approval));
        }
        let now = now_ms();
        let expired = now >= approval.expires_at;
        let (state, decision, by) = if expired {
            ("rejected", "reject", "timeout")
        } else if decision == "approve" {
            ("approved", decision, by)
        } else {
            ("rejected", decision, by)
        };
        exec(
            &tx,
            "UPDATE approvals SET state = ?2, decision = ?3, decided_by = ?4, decided_at = ?5 \
             WHERE id = ?1 AND state = 'pending'",
            params![id, state, decision, by, now],
        )
        .map_err(sql("deciding an approval"))?;
        let updated = read(&tx)?.unwrap_or(approval);
        tx.commit().map_err(sql("deciding an approval"))?;
        Ok(if expired {
            Decided::Expired(updated)
        } else {
            Decided::Recorded(updated)
        })
    }

    // -------------------------------------------------------------------------------- recovery

    /// Startup recovery, in one transaction:
    /// - pending approvals past their deadline are rejected (`decided_by = timeout`);
    /// - tasks suspended on a still-pending approval, and their ancestors, stay as they are (a decision
    ///   resumes them);
    /// - every other live task was running when the previous process stopped: it is marked FAILED
    ///   ("interrupted"), and each affected conversation gets a notice.
    pub fn recover(&self) -> Result<Recovery, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("recovering after a restart"))?;
        let now = now_ms();
        let mut recovery = Recovery::default();
        {
            let mut stmt = tx
                .prepare("SELECT id FROM approvals WHERE state = 'pending' AND expires_at <= ?1")
                .map_err(sql("recovering after a restart"))?;
            let rows = stmt
                .query_map([now], |r| r.get(0))
                .map_err(sql("recovering after a restart"))?;
            recovery.expired_approvals = rows
                .collect::<Result<_, _>>()
                .map_err(sql("recovering after a restart"))?;
        }
        exec(&tx,
            "UPDATE approvals SET state = 'rejected', decision = 'reject', decided_by = 'timeout', decided_at = ?1 \
             WHERE state = 'pending' AND expires_at <= ?1",
            [now],
        )
        .map_err(sql("recovering after a restart"))?;
        // Live tasks that are neither waiting on an approval pending at startup (expired just now or
        // not) nor an ancestor of one.
        let interrupted: Vec<(TaskId, String, bool)> = {
            let mut stmt = tx
                .prepare(
                    "WITH RECURSIVE keep(id) AS ( \
                       SELECT task_id FROM approvals WHERE state = 'pending' OR (decided_by = 'timeout' AND decided_at = ?1) \
                       UNION SELECT t.parent_id FROM tasks t JOIN keep ON t.id = keep.id WHERE t.parent_id IS NOT NULL) \
                     SELECT id, conversation_id, parent_id IS NULL FROM tasks \
                     WHERE state NOT IN ('COMPLETED', 'FAILED', 'ESCALATED', 'CANCELLED') \
                       AND id NOT IN (SELECT id FROM keep) ORDER BY id",
                )
                .map_err(sql("recovering after a restart"))?;
            let rows = stmt
                .query_map([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(sql("recovering after a restart"))?;
            rows.collect::<Result<_, _>>()
                .map_err(sql("recovering after a restart"))?
        };
        recovery.suspended_roots = {
            let mut stmt = tx
                .prepare(
                    "SELECT DISTINCT a.root_id FROM approvals a JOIN tasks t ON t.id = a.task_id \
                     WHERE (a.state = 'pending' OR (a.decided_by = 'timeout' AND a.decided_at = ?1)) \
                     AND t.state NOT IN ('COMPLETED', 'FAILED', 'ESCALATED', 'CANCELLED') ORDER BY a.root_id",
                )
                .map_err(sql("recovering after a restart"))?;
            let rows = stmt
                .query_map([now], |r| r.get(0))
                .map_err(sql("recovering after a restart"))?;
            rows.collect::<Result<_, _>>()
                .map_err(sql("recovering after a restart"))?
        };
        for (id, conversation, is_root) in &interrupted {
            exec(&tx,
                "UPDATE tasks SET state = 'FAILED', error = 'interrupted: the process stopped while this task was running', \
                 updated_at = ?2, finished_at = ?2 WHERE id = ?1",
                params![id, now],
            )
            .map_err(sql("recovering after a restart"))?;
            if *is_root {
                exec(&tx,
                    "INSERT INTO notices (conversation_id, task_id, text, created_at) VALUES (?1, ?2, ?3, ?4)",
                    params![
                        conversation,
                        id,
                        format!(
                            "Task {id} was interrupted because OPC stopped while it was running; \
                             its partial work was discarded. Send the request again to retry."
                        ),
                        now
                    ],
                )
                .map_err(sql("recovering after a restart"))?;
            }
        }
        recovery.interrupted = interrupted;
        tx.commit().map_err(sql("recovering after a restart"))?;
        drop(conn);
        recovery.pending_approvals = self.pending_approvals()?;
        Ok(recovery)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn root(store: &Store, conv: &str) -> TaskId {
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
            })
            .unwrap()
    }

    fn child(store: &Store, parent: TaskId, tool: &str) -> TaskId {
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
            })
            .unwrap()
    }

    #[test]
    fn lifecycle_transitions_are_checked() {
        let store = Store::in_memory().unwrap();
        let id = root(&store, "c");
        assert_eq!(store.task(id).unwrap().root_id, id);
        store.transition(id, TaskState::Assigned).unwrap();
        assert!(matches!(
            store.transition(id, TaskState::Completed),
            Err(StoreError::BadTransition { .. })
        ));
        store.transition(id, TaskState::Executing).unwrap();
        store.transition(id, TaskState::ResultPropagating).unwrap();
        assert!(
            store
                .finish(
                    id,
                    Ending::Completed {
                        output: "done",
                        summary: None
                    }
                )
                .unwrap()
        );
        // A second ending is ignored.
        assert!(!store.finish(id, Ending::Failed("late")).unwrap());
        let task = store.task(id).unwrap();
        assert_eq!(task.state, TaskState::Completed);
        assert_eq!(task.output.as_deref(), Some("done"));
    }

    #[test]
    fn cancel_reaches_the_whole_subtree_and_rejects_its_approvals() {
        let store = Store::in_memory().unwrap();
        let r = root(&store, "c");
        let c = child(&store, r, "t1");
        let g = child(&store, c, "t2");
        let task = store.task(g).unwrap();
        let approval = store
            .request_approval(
                &task,
                "t3",
                "ship?",
                &["approve".into(), "reject".into()],
                Duration::from_secs(60),
            )
            .unwrap()
            .0;
        let cancelled = store.cancel_subtree(r, "cancelled by user").unwrap();
        assert_eq!(cancelled, vec![r, c, g]);
        let approval = store.approval(approval.id).unwrap().unwrap();
        assert_eq!(approval.state, "rejected");
        assert_eq!(approval.decided_by.as_deref(), Some("cancelled"));
    }

    #[test]
    fn approvals_are_decided_once_and_expire() {
        let store = Store::in_memory().unwrap();
        let r = root(&store, "c");
        let task = store.task(r).unwrap();
        let options = ["approve".to_string(), "reject".to_string()];
        let (a, created) = store
            .request_approval(&task, "t1", "ship?", &options, Duration::from_secs(60))
            .unwrap();
        assert!(created);
        // Asking again for the same tool call returns the same approval.
        let (again, created) = store
            .request_approval(&task, "t1", "ship?", &options, Duration::from_secs(60))
            .unwrap();
        assert_eq!(a.id, again.id);
        assert!(!created);
        assert!(
            matches!(store.decide(a.id, "approve", "u1").unwrap(), Decided::Recorded(x) if x.state == "approved")
        );
        assert!(
            matches!(store.decide(a.id, "reject", "u2").unwrap(), Decided::AlreadyDecided(x) if x.decided_by.as_deref() == Some("u1"))
        );
        let (b, _) = store
            .request_approval(&task, "t2", "ship?", &options, Duration::ZERO)
            .unwrap();
        assert!(
            matches!(store.decide(b.id, "approve", "u1").unwrap(), Decided::Expired(x) if x.state == "rejected")
        );
        assert_eq!(
            store.decide(999, "approve", "u1").unwrap(),
            Decided::NotFound
        );
    }

    #[test]
    fn recovery_fails_running_tasks_but_keeps_suspended_chains() {
        let store = Store::in_memory().unwrap();
        // Chain 1: root → child awaiting approval. Both stay.
        let r1 = root(&store, "c");
        let c1 = child(&store, r1, "t1");
        store
            .request_approval(
                &store.task(c1).unwrap(),
                "t2",
                "ok?",
                &["approve".into()],
                Duration::from_secs(60),
            )
            .unwrap();
        // Chain 2: root executing. Interrupted.
        let r2 = root(&store, "d");
        store.transition(r2, TaskState::Assigned).unwrap();
        store.transition(r2, TaskState::Executing).unwrap();
        let recovery = store.recover().unwrap();
        assert_eq!(recovery.interrupted, vec![(r2, "d".to_string(), true)]);
        assert_eq!(recovery.pending_approvals.len(), 1);
        assert_eq!(store.task(r2).unwrap().state, TaskState::Failed);
        assert_eq!(store.task(r1).unwrap().state, TaskState::Created);
        assert_eq!(store.notices("d").unwrap().len(), 1);
    }
}
