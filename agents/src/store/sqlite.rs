//! [`SqliteStore`]: the [`Store`] seam over one SQLite file, with a dedicated writer thread that
//! commits the operations arriving together as one transaction (group commit).
//!
//! Why: with one commit per operation, a thousand conversations each paid their own WAL append and
//! wal-index update at every state change, serialised behind one connection mutex that async tasks
//! held on runtime threads. Now every write is a job sent to the writer thread; the caller's task
//! suspends until its job is committed.
//!
//! The writer loop: take the first waiting job, then every job already queued behind it (those that
//! arrived while the previous group was committing), up to [`MAX_GROUP`]; `BEGIN IMMEDIATE`; run each
//! job inside its own `SAVEPOINT` (released when it succeeds, rolled back when it fails, so one failed
//! operation — a transition the lifecycle refuses, a missing task — leaves its neighbours' changes in
//! the group); `COMMIT`; only then answer every job and wake the recall indexer.
//!
//! Durability is exactly today's: a future resolves Ok only after the `COMMIT` that holds its changes
//! returned, with the same `journal_mode=WAL`, `synchronous=NORMAL` (the commit's WAL frames are
//! written to the file before `COMMIT` returns, so a kill -9 of the process loses nothing that was
//! answered; as before, only an OS crash or power loss may lose the last commits). If the `COMMIT`
//! itself fails, every job of the group is answered with that error (its changes were rolled back).
//! Each group's `COMMIT` is timed for the store's commit latency metric (`commits.rs`).
//!
//! Reads do not queue behind writes: a file database gets a second, read-only connection, which in WAL
//! mode sees the last commit. A caller reads its own writes because its write future resolved after
//! that commit. Reads run inline on the caller's thread: they are a few indexed rows (microseconds),
//! cheaper than a hop to another thread. An in-memory database (tests, benchmarks) has one connection,
//! so its reads use the writer's (and may see a group that is still being committed).
//!
//! A job sent is run even if its caller stops waiting (a dropped future does not undo a write).
//!
//! The [`Store`] impl forwards each operation to the `Db` function of the same name in one line of
//! `sqlite_store!` (a read inline, a write as a job with its arguments carried owned, `carry.rs`);
//! only operations that do more than forward are written out.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::carry::Carry;
use super::commits::{self, Backend};
use super::ledger::encode_turn;
use super::tasks::encode_history;
use super::{
    Approval, CallRecord, Db, DbFailure, Decided, Ending, JobEnd, LatestCall, MemoryJob, NewTask,
    Notice, OfferedOption, PrivacyDay, Recovery, Spend, Store, StoreError, TaskId, TaskPrivacy,
    TaskRecord, TaskState, TimedCall, ToolCallRecord, Totals, exec, failure,
};
use crate::llm::Message;

/// The most operations committed as one transaction: bounds how long the first of a group waits for
/// the last (each is a handful of row writes, tens of microseconds).
const MAX_GROUP: usize = 256;

/// How long the idle writer keeps looking for the next job (yielding its core between looks) before
/// it sleeps on the channel. Why: a session's writes often come back to back (a child's `begin`
/// right after its `create_task`, the `DELEGATED` transition right after the turn was recorded),
/// and a sleeping writer costs each of them a futex wake and a trip through the scheduler (tens of
/// µs on a busy machine). Short, because a longer spin (200 µs, to also cover a loopback model
/// call) cost ~20% more engine CPU in the concurrency scenarios and took a core from the HTTP path
/// on a 2-core machine; yielding, so it gives way to runnable work.
const IDLE_SPIN: Duration = Duration::from_micros(50);

/// The next job for the writer, or `None` once every sender is gone and the queue is drained.
fn next_job(queue: &mpsc::Receiver<Box<dyn Job>>) -> Option<Box<dyn Job>> {
    let spin_until = std::time::Instant::now() + IDLE_SPIN;
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) if std::time::Instant::now() < spin_until => {
                std::thread::yield_now();
            }
            Err(mpsc::TryRecvError::Empty) => return queue.recv().ok(),
        }
    }
}

/// The [`Store`] over one SQLite file (or an in-memory database).
pub struct SqliteStore {
    /// Jobs for the writer thread (taken on drop, which ends the thread once the queue is drained).
    jobs: Option<mpsc::Sender<Box<dyn Job>>>,
    /// The writer thread, joined on drop: every job sent before is committed when drop returns.
    writer: Option<std::thread::JoinHandle<()>>,
    /// The writer's connection: the lock file and the recall hook live here, and an in-memory
    /// database's reads use it.
    db: Arc<Db>,
    /// The read connection of a file database.
    reader: Option<Db>,
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`, in WAL mode, and bring its schema up to date
    /// ([`super::schema::migrate`]).
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let db = Db::open(path)?;
        let reader = Db::reader(path)?;
        Self::start(db, Some(reader))
    }

    /// A private in-memory database (tests, benchmarks).
    pub fn in_memory() -> Result<SqliteStore, StoreError> {
        Self::start(Db::in_memory()?, None)
    }

    fn start(db: Db, reader: Option<Db>) -> Result<SqliteStore, StoreError> {
        let db = Arc::new(db);
        let (jobs, queue) = mpsc::channel::<Box<dyn Job>>();
        let writer_db = db.clone();
        let writer = std::thread::Builder::new()
            .name("opc-sqlite-writer".into())
            .spawn(move || {
                while let Some(first) = next_job(&queue) {
                    let mut group = vec![first];
                    while group.len() < MAX_GROUP {
                        match queue.try_recv() {
                            Ok(job) => group.push(job),
                            Err(_) => break,
                        }
                    }
                    commit_group(&writer_db, group);
                }
            })
            .map_err(|e| StoreError::Writer(format!("cannot start the writer thread: {e}")))?;
        Ok(SqliteStore {
            jobs: Some(jobs),
            writer: Some(writer),
            db,
            reader,
        })
    }

    /// Run `op` on the writer thread, in the next group; resolves once that group is committed.
    async fn write<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    {
        let stopped = || StoreError::Writer("the store is closed".into());
        let (reply, answer) = oneshot::channel();
        self.jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(Box::new(Op { op, reply }))
            .map_err(|_| stopped())?;
        answer
            .await
            .map_err(|_| StoreError::Writer("the writer thread stopped before answering".into()))?
    }

    /// Run `op` on the read connection (see the module doc).
    fn read<T>(&self, op: impl FnOnce(&Db) -> Result<T, StoreError>) -> Result<T, StoreError> {
        op(self.reader.as_ref().unwrap_or(&self.db))
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Commit `group` as one transaction, one savepoint per job, and answer every job.
fn commit_group(db: &Db, group: Vec<Box<dyn Job>>) {
    if let Err(e) = exec(&db.conn(), "BEGIN IMMEDIATE", []) {
        let e = failure(&e);
        for job in group {
            job.fail("starting a transaction", &e);
        }
        return;
    }
    let mut ran: Vec<Box<dyn Ran>> = Vec::with_capacity(group.len());
    let mut broken: Option<DbFailure> = None;
    for job in group {
        if let Some(e) = &broken {
            job.fail("committing", e);
            continue;
        }
        if let Err(e) = exec(&db.conn(), "SAVEPOINT opc_op", []) {
            job.fail("starting an operation", &failure(&e));
            continue;
        }
        let done = job.run(db);
        let end = if done.ok() {
            exec(&db.conn(), "RELEASE opc_op", [])
        } else {
            // One guard for both statements (a second `db.conn()` in the same expression would wait on
            // the first's lock forever).
            let conn = db.conn();
            exec(&conn, "ROLLBACK TO opc_op", []).and_then(|_| exec(&conn, "RELEASE opc_op", []))
        };
        // A savepoint that cannot be ended means SQLite rolled the whole transaction back (an I/O
        // error, a full disk): nothing of this group can be committed.
        if let Err(e) = end {
            broken = Some(failure(&e));
        }
        ran.push(done);
    }
    let committed = match broken {
        Some(e) => Err(e),
        None => {
            // The commit latency metric: the `COMMIT` alone, once per group (one transaction).
            let started = std::time::Instant::now();
            let done = exec(&db.conn(), "COMMIT", []);
            commits::record(Backend::Sqlite, started);
            done.map(|_| ()).map_err(|e| failure(&e))
        }
    };
    match committed {
        Ok(()) => {
            db.notify_recall();
            for done in ran {
                done.send(None);
            }
        }
        Err(e) => {
            let conn = db.conn();
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            drop(conn);
            db.recall_dirty
                .store(false, std::sync::atomic::Ordering::Release);
            tracing::warn!(error = %e, "a group commit of the task database failed");
            for done in ran {
                done.send(Some(&e));
            }
        }
    }
}

/// A write waiting for the writer thread.
trait Job: Send {
    /// Run it (inside its savepoint).
    fn run(self: Box<Self>, db: &Db) -> Box<dyn Ran>;
    /// Answer it with `why` without running it.
    fn fail(self: Box<Self>, doing: &'static str, why: &DbFailure);
}

/// A write that ran, waiting for its group's commit to be answered.
trait Ran: Send {
    /// Whether the operation succeeded (its savepoint is released, not rolled back).
    fn ok(&self) -> bool;
    /// Answer the caller; `commit_failed` is the group's commit error, if any.
    fn send(self: Box<Self>, commit_failed: Option<&DbFailure>);
}

struct Op<T, F> {
    op: F,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

struct Outcome<T> {
    result: Result<T, StoreError>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Job for Op<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
{
    fn run(self: Box<Self>, db: &Db) -> Box<dyn Ran> {
        let Op { op, reply } = *self;
        // A panic inside one operation must not end the writer thread (every later write would fail):
        // its savepoint is rolled back like any failure. The connection stays consistent (rusqlite's
        // savepoints roll back on drop, and `Db::conn` recovers a poisoned lock).
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| op(db)))
            .unwrap_or_else(|_| Err(StoreError::Writer("a store operation panicked".into())));
        Box::new(Outcome { result, reply })
    }

    fn fail(self: Box<Self>, doing: &'static str, why: &DbFailure) {
        let _ = self.reply.send(Err(StoreError::Database {
            doing,
            source: why.clone(),
        }));
    }
}

impl<T: Send> Ran for Outcome<T> {
    fn ok(&self) -> bool {
        self.result.is_ok()
    }

    fn send(self: Box<Self>, commit_failed: Option<&DbFailure>) {
        let result = match (self.result, commit_failed) {
            (Ok(_), Some(e)) => Err(StoreError::Database {
                doing: "committing",
                source: e.clone(),
            }),
            (result, _) => result,
        };
        // The caller may have stopped waiting; the write stands either way.
        let _ = self.reply.send(result);
    }
}

/// The [`Store`] impl of [`SqliteStore`]: `read { .. }` ops run [`SqliteStore::read`] inline,
/// `write { .. }` ops are sent to the writer with their arguments carried (`carry.rs`); each line
/// forwards to the `Db` function of the same name and arguments. `by_hand { .. }` holds the items
/// that do more than forward (encoding on the caller's thread, composing two `Db` functions).
/// One macro emits the whole impl: `#[async_trait]` must see every method written out.
macro_rules! sqlite_store {
    (
        read { $( $r:ident ( $($ra:ident : $rt:ty),* ) -> $rr:ty ; )* }
        write { $( $w:ident ( $($wa:ident : $wt:ty),* ) -> $wr:ty ; )* }
        by_hand { $($hand:tt)* }
    ) => {
        #[async_trait::async_trait]
        impl Store for SqliteStore {
            $($hand)*

            $(
                async fn $r(&self, $($ra: $rt),*) -> Result<$rr, StoreError> {
                    self.read(|db| db.$r($($ra),*))
                }
            )*

            $(
                async fn $w(&self, $($wa: $wt),*) -> Result<$wr, StoreError> {
                    $( let $wa = <$wt as Carry>::carry($wa); )*
                    self.write(move |db| db.$w($(<$wt as Carry>::lend(&$wa)),*)).await
                }
            )*
        }
    };
}

sqlite_store! {
    read {
        last_root_task(conversation_id: &str) -> Option<TaskRecord>;
        task(id: TaskId) -> TaskRecord;
        child_for(parent: TaskId, tool_use_id: &str, index: u32) -> Option<TaskRecord>;
        messages(id: TaskId) -> Vec<Message>;
        tree(root_id: TaskId) -> Vec<TaskRecord>;
        recent_roots(limit: u32) -> Vec<TaskRecord>;
        live_tasks() -> Vec<TaskRecord>;
        calls(task_id: TaskId) -> Vec<CallRecord>;
        tree_calls(root_id: TaskId) -> Vec<TimedCall>;
        privacy_by_task(root_id: TaskId) -> HashMap<TaskId, TaskPrivacy>;
        tree_totals(root_id: TaskId) -> (u64, u64, f64);
        totals(root_id: TaskId) -> Totals;
        privacy_by_day(since_ms: i64) -> Vec<PrivacyDay>;
        spend_since(since_ms: i64) -> Vec<Spend>;
        embedding_spend_since(since_ms: i64) -> Vec<Spend>;
        latest_calls(window: u32) -> Vec<LatestCall>;
        tool_calls(root_id: TaskId) -> Vec<ToolCallRecord>;
        approval(id: i64) -> Option<Approval>;
        pending_approvals() -> Vec<Approval>;
        recent_approvals(limit: u32) -> Vec<Approval>;
        tree_approvals(root_id: TaskId) -> Vec<Approval>;
        command_approved(conversation_id: &str, agent: &str, command: &str) -> bool;
        notices(conversation_id: &str) -> Vec<String>;
        undelivered_notices() -> Vec<Notice>;
        next_memory_job(now: i64) -> Option<MemoryJob>;
        next_memory_job_at() -> Option<i64>;
        memory_jobs(limit: u32) -> Vec<MemoryJob>;
        memory_calls(task_id: TaskId) -> Vec<(i64, CallRecord)>;
        memory_tokens_since(agent: &str, since_ms: i64) -> u64;
        recall_seqs(task: TaskId, conversation: &str) -> Vec<i64>;
    }
    write {
        recover() -> Recovery;
        create_conversation(id: &str, root_agent: &str) -> ();
        begin(id: TaskId) -> (TaskRecord, Vec<Message>);
        transition(id: TaskId, next: TaskState) -> TaskState;
        finish(id: TaskId, ending: Ending<'_>) -> bool;
        cancel_subtree(id: TaskId, reason: &str) -> Vec<TaskId>;
        cancel_descendants(id: TaskId, reason: &str) -> Vec<TaskId>;
        record_tool_call(call: &ToolCallRecord) -> ();
        request_approval(
            task: &TaskRecord,
            tool_use_id: &str,
            summary: &str,
            options: &[OfferedOption],
            timeout: Duration
        ) -> (Approval, bool);
        decide(id: i64, decision: &str, by: &str) -> Decided;
        approve_command(conversation_id: &str, agent: &str, command: &str, approval: i64) -> ();
        add_notice(conversation_id: &str, task_id: Option<TaskId>, text: &str) -> ();
        mark_notice_delivered(id: i64) -> bool;
        end_memory_job(id: i64, end: JobEnd, error: Option<&str>) -> bool;
        drop_memory_job(id: i64) -> ();
        defer_memory_job(id: i64, not_before: i64, failed_attempt: bool, why: &str) -> ();
        record_memory_call(call: &CallRecord) -> i64;
        record_embedding_call(call: &crate::llm::embed::EmbedCall) -> ();
        memory_root_seen(
            agent: &str,
            root: TaskId,
            task: TaskId,
            conversation: Option<&str>,
            frequency: u32
        ) -> Option<i64>;
        idle_consolidations(idle_before: i64) -> Vec<(String, i64)>;
    }
    by_hand {
        async fn lock_exclusive(&self) -> Result<(), StoreError> {
            self.db.lock_exclusive()
        }

        fn on_recall_append(&self, notify: Box<dyn Fn() + Send + Sync>) {
            let _ = self.db.recall_notify.set(notify);
        }

        async fn create_task(&self, task: &NewTask<'_>) -> Result<TaskId, StoreError> {
            // Encoded here, on the caller's thread: the writer thread is the one serial resource.
            let messages = encode_history(task.messages, task.parent_id.unwrap_or_default())?;
            let parent_id = task.parent_id;
            let conversation_id = task.conversation_id.to_string();
            let agent = task.agent.to_string();
            let depth = task.depth;
            let tool_use_id = task.tool_use_id.map(str::to_string);
            let tool_index = task.tool_index;
            let input = task.input.to_string();
            let author = task.author.map(str::to_string);
            let trace = task.trace.map(str::to_string);
            self.write(move |db| {
                let task = NewTask {
                    parent_id,
                    conversation_id: &conversation_id,
                    agent: &agent,
                    depth,
                    tool_use_id: tool_use_id.as_deref(),
                    tool_index,
                    input: &input,
                    messages: &[],
                    author: author.as_deref(),
                    trace: trace.as_deref(),
                };
                db.create_task_encoded(&task, &messages)
            })
            .await
        }

        async fn save_messages(&self, id: TaskId, messages: &[Message]) -> Result<(), StoreError> {
            let text = encode_history(messages, id)?;
            self.write(move |db| db.save_messages_encoded(id, &text))
                .await
        }

        async fn transition_and_save(
            &self,
            id: TaskId,
            next: TaskState,
            messages: &[Message],
        ) -> Result<TaskState, StoreError> {
            let text = encode_history(messages, id)?;
            // One job, so one savepoint: a refused transition saves nothing.
            self.write(move |db| {
                let previous = db.transition(id, next)?;
                db.save_messages_encoded(id, &text)?;
                Ok(previous)
            })
            .await
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
            // Encoded here, on the caller's thread: the writer thread is the one serial resource.
            let (tools, history) = encode_turn(call, messages)?;
            let call = call.clone();
            let completed = completed.map(str::to_string);
            self.write(move |db| {
                db.record_turn_encoded(&call, &tools, history.as_deref(), completed.as_deref())
            })
            .await
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::llm::Message;

    fn new_root<'a>(conversation: &'a str, messages: &'a [Message]) -> NewTask<'a> {
        NewTask {
            parent_id: None,
            conversation_id: conversation,
            agent: "ceo",
            depth: 0,
            tool_use_id: None,
            tool_index: 0,
            input: "hello",
            messages,
            author: None,
            trace: None,
        }
    }

    /// Operations sent together are committed as one group; a refused one (a transition the
    /// lifecycle does not allow, an unknown task) fails alone, and every operation that resolved Ok
    /// is on disk after the store is dropped and the file reopened.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_failed_operation_in_a_group_does_not_fail_or_undo_its_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.db");
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let history = [Message::user("hello")];
        let mut ids = Vec::new();
        for i in 0..40 {
            ids.push(
                store
                    .create_task(&new_root(&format!("c{i}"), &history))
                    .await
                    .unwrap(),
            );
        }
        // Many writers at once, so the writer finds them queued and commits them in groups: even
        // tasks move on, odd ones are asked for a transition CREATED may not make, and some
        // operations name a task that does not exist.
        let mut writers = Vec::new();
        for (n, &id) in ids.iter().enumerate() {
            let store = store.clone();
            writers.push(tokio::spawn(async move {
                let next = if n % 2 == 0 {
                    TaskState::Assigned
                } else {
                    TaskState::Completed
                };
                let moved = store.transition(id, next).await;
                let missing = store.transition(id + 10_000, TaskState::Assigned).await;
                let noted = store.add_notice(&format!("c{n}"), Some(id), "note").await;
                (id, n, moved, missing, noted)
            }));
        }
        let mut results = Vec::new();
        for writer in writers {
            results.push(writer.await.unwrap());
        }
        for (id, n, moved, missing, noted) in &results {
            if n % 2 == 0 {
                assert_eq!(moved.as_ref().unwrap(), &TaskState::Created, "task {id}");
            } else {
                assert!(
                    matches!(moved, Err(StoreError::BadTransition { .. })),
                    "task {id}: {moved:?}"
                );
            }
            assert!(matches!(missing, Err(StoreError::NoTask(_))), "{missing:?}");
            noted.as_ref().unwrap();
        }
        drop(store);

        // Reopened: every operation that resolved Ok is there, and nothing a refused one tried.
        let store = SqliteStore::open(&path).unwrap();
        for (id, n, ..) in &results {
            let expected = if n % 2 == 0 {
                TaskState::Assigned
            } else {
                TaskState::Created
            };
            assert_eq!(store.task(*id).await.unwrap().state, expected, "task {id}");
            assert_eq!(store.notices(&format!("c{n}")).await.unwrap(), ["note"]);
        }
    }

    /// `transition_and_save` is one atomic operation: a refused transition saves no history, an
    /// allowed one moves the state and saves the history together.
    #[tokio::test]
    async fn transition_and_save_saves_the_history_only_with_the_transition() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("opc.db")).unwrap();
        let history = [Message::user("hello")];
        let id = store.create_task(&new_root("c", &history)).await.unwrap();
        let longer = [Message::user("hello"), Message::user("results")];
        // CREATED may not become COMPLETED: nothing changes.
        let refused = store
            .transition_and_save(id, TaskState::Completed, &longer)
            .await;
        assert!(
            matches!(refused, Err(StoreError::BadTransition { .. })),
            "{refused:?}"
        );
        assert_eq!(store.task(id).await.unwrap().state, TaskState::Created);
        assert_eq!(store.messages(id).await.unwrap().len(), 1);
        // CREATED may become ASSIGNED: both change.
        let previous = store
            .transition_and_save(id, TaskState::Assigned, &longer)
            .await
            .unwrap();
        assert_eq!(previous, TaskState::Created);
        assert_eq!(store.task(id).await.unwrap().state, TaskState::Assigned);
        assert_eq!(store.messages(id).await.unwrap().len(), 2);
    }

    /// Operations really are grouped: the jobs queued while the writer is busy are committed as the
    /// next group, in one transaction. Each sees its predecessors' rows on the writer's connection,
    /// while the read connection (which sees only commits) sees none of them until the group ends.
    #[tokio::test]
    async fn operations_queued_during_a_commit_are_committed_as_one_group() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("opc.db")).unwrap();
        let history = [Message::user("hello")];
        let root = store.create_task(&new_root("c", &history)).await.unwrap();
        let jobs = store.jobs.clone().unwrap();
        // Hold the writer inside a job until every other job is queued.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (entered_tx, entered) = oneshot::channel::<()>();
        let (reply, blocked) = oneshot::channel();
        let hold = move |_: &Db| {
            let _ = entered_tx.send(());
            held.recv()
                .map_err(|_| StoreError::Writer("test released".into()))
        };
        jobs.send(Box::new(Op { op: hold, reply })).unwrap();
        entered.await.unwrap();
        let reader_path = dir.path().join("opc.db");
        let mut answers = Vec::new();
        for i in 0..10usize {
            let (reply, answer) = oneshot::channel();
            let path = reader_path.clone();
            let op = move |db: &Db| {
                db.add_notice("c", Some(root), &format!("n{i}"))?;
                let mine = db.notices("c")?.len();
                let committed = Db::reader(&path)?.notices("c")?.len();
                Ok((mine, committed))
            };
            jobs.send(Box::new(Op { op, reply })).unwrap();
            answers.push(answer);
        }
        release.send(()).unwrap();
        blocked.await.unwrap().unwrap();
        for (i, answer) in answers.into_iter().enumerate() {
            let (mine, committed) = answer.await.unwrap().unwrap();
            assert_eq!(mine, i + 1, "job {i} sees the group's earlier rows");
            assert_eq!(
                committed, 0,
                "job {i}: nothing of the group is committed yet"
            );
        }
        assert_eq!(store.notices("c").await.unwrap().len(), 10);
    }
}
