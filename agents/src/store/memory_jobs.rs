//! The durable queue of memory work.
//!
//! An `extract` job per completed task of a root's tree is inserted in the transaction that
//! completes the root ([`enqueue_extractions`], called from the two places a task completes:
//! `Db::finish` and `Db::record_turn_encoded`), so a completed root always has its jobs and a root
//! that did not complete has none. A `consolidate` job is inserted when an agent has `frequency`
//! completed roots consolidation has not seen ([`Db::memory_root_seen`]), or has been idle long
//! enough after one ([`Db::idle_consolidations`]). The worker (the engine's `memory_work` module)
//! reads the next due job, runs it, and ends it (`done`, `rejected`, `failed`) or puts it off
//! (`not_before`): a job interrupted by a stop stays `queued`, so the next start runs it.
//!
//! The memory-work calls themselves are rows of the ledger (the `ledger` file), which queues these
//! jobs when a root completes; this file needs nothing of it.
//!
//! Invariants: every change here is one transaction (a savepoint inside the writer's group commit);
//! a job's row is never deleted once it ran, except a job the worker skips without any work (its
//! agent keeps no facts), which is dropped so the queue holds only work.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::{Db, StoreError, TaskId, TaskState, exec, now_ms, row, sql};

/// What a memory job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Extract facts from one task's exchange (one LLM call).
    Extract,
    /// Consolidate one agent's facts and blocks (a short loop of calls).
    Consolidate,
}

impl JobKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Extract => "extract",
            JobKind::Consolidate => "consolidate",
        }
    }

    pub(super) fn parse(s: &str) -> Option<JobKind> {
        match s {
            "extract" => Some(JobKind::Extract),
            "consolidate" => Some(JobKind::Consolidate),
            _ => None,
        }
    }
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobEnd {
    /// It did its work (a batch applied, or nothing to do).
    Done,
    /// The model's answer was malformed: nothing was written, and it is not retried.
    Rejected,
    /// It failed too often (the model was unreachable): given up.
    Failed,
}

impl JobEnd {
    /// The stored state.
    pub fn as_str(self) -> &'static str {
        match self {
            JobEnd::Done => "done",
            JobEnd::Rejected => "rejected",
            JobEnd::Failed => "failed",
        }
    }
}

/// One memory job as the worker reads it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryJob {
    /// The job.
    pub id: i64,
    /// What it does.
    pub kind: JobKind,
    /// Whose memory.
    pub agent: String,
    /// The task it is about (extract), or the one that triggered it (consolidate).
    pub task: Option<TaskId>,
    /// That task's root.
    pub root: Option<TaskId>,
    /// That task's conversation.
    pub conversation: Option<String>,
    /// `queued`, `done`, `rejected` or `failed`.
    pub state: String,
    /// Attempts that failed so far (a model that could not be reached).
    pub attempts: u32,
    /// Not run before this time (Unix ms).
    pub not_before: i64,
    /// Why it was put off or ended, when it was.
    pub error: Option<String>,
}

pub(super) const JOB_COLUMNS: &str =
    "id, kind, agent, task_id, root_id, conversation_id, state, attempts, not_before, error";

fn job_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryJob> {
    let kind: String = r.get(1)?;
    Ok(MemoryJob {
        id: r.get(0)?,
        kind: JobKind::parse(&kind).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                1,
                rusqlite::types::Type::Text,
                format!("unknown memory job kind `{kind}`").into(),
            )
        })?,
        agent: r.get(2)?,
        task: r.get(3)?,
        root: r.get(4)?,
        conversation: r.get(5)?,
        state: r.get(6)?,
        attempts: r.get(7)?,
        not_before: r.get(8)?,
        error: r.get(9)?,
    })
}

/// Inside the transaction that completes task `id`: when it is a root, queue an `extract` job for
/// every completed task of its tree (the root included). Returns how many were queued.
pub(super) fn enqueue_extractions(
    tx: &Connection,
    id: TaskId,
    now: i64,
) -> Result<usize, StoreError> {
    let is_root: bool = row(
        tx,
        "SELECT parent_id IS NULL FROM tasks WHERE id = ?1",
        [id],
        |r| r.get(0),
    )
    .optional()
    .map_err(sql("queueing memory work"))?
    .unwrap_or(false);
    if !is_root {
        return Ok(0);
    }
    exec(
        tx,
        "INSERT INTO memory_jobs (kind, agent, task_id, root_id, conversation_id, state, attempts, \
         not_before, created_at, updated_at) \
         SELECT 'extract', agent, id, root_id, conversation_id, 'queued', 0, ?2, ?2, ?2 \
         FROM tasks WHERE root_id = ?1 AND state = ?3 ORDER BY id",
        params![id, now, TaskState::Completed.as_str()],
    )
    .map_err(sql("queueing memory work"))
}

impl Db {
    /// The next queued job due at `now` (oldest first), if any.
    pub fn next_memory_job(&self, now: i64) -> Result<Option<MemoryJob>, StoreError> {
        row(
            &self.conn(),
            &format!(
                "SELECT {JOB_COLUMNS} FROM memory_jobs WHERE state = 'queued' AND not_before <= ?1 \
                 ORDER BY not_before, id LIMIT 1"
            ),
            [now],
            job_from_row,
        )
        .optional()
        .map_err(sql("reading the memory queue"))
    }

    /// When the next queued job is due (Unix ms), if any is queued.
    pub fn next_memory_job_at(&self) -> Result<Option<i64>, StoreError> {
        row(
            &self.conn(),
            "SELECT MIN(not_before) FROM memory_jobs WHERE state = 'queued'",
            [],
            |r| r.get(0),
        )
        .map_err(sql("reading the memory queue"))
    }

    /// The latest `limit` jobs, newest first (tests, the console).
    pub fn memory_jobs(&self, limit: u32) -> Result<Vec<MemoryJob>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {JOB_COLUMNS} FROM memory_jobs ORDER BY id DESC LIMIT ?1"
            ))
            .map_err(sql("reading the memory queue"))?;
        let rows = stmt
            .query_map([limit], job_from_row)
            .map_err(sql("reading the memory queue"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading the memory queue"))
    }

    /// End a queued job. `false` when it was not queued (ended already).
    pub fn end_memory_job(
        &self,
        id: i64,
        end: JobEnd,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        let n = exec(
            &self.conn(),
            "UPDATE memory_jobs SET state = ?2, error = ?3, updated_at = ?4 \
             WHERE id = ?1 AND state = 'queued'",
            params![id, end.as_str(), error, now_ms()],
        )
        .map_err(sql("ending a memory job"))?;
        Ok(n == 1)
    }

    /// Drop a queued job that needs no work (its agent keeps no facts).
    pub fn drop_memory_job(&self, id: i64) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "DELETE FROM memory_jobs WHERE id = ?1 AND state = 'queued'",
            [id],
        )
        .map_err(sql("dropping a memory job"))?;
        Ok(())
    }

    /// Put a queued job off until `not_before`, saying why; `failed_attempt` counts one more failed
    /// attempt (a model that could not be reached), a cap does not.
    pub fn defer_memory_job(
        &self,
        id: i64,
        not_before: i64,
        failed_attempt: bool,
        why: &str,
    ) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "UPDATE memory_jobs SET not_before = ?2, attempts = attempts + ?3, error = ?4, \
             updated_at = ?5 WHERE id = ?1 AND state = 'queued'",
            params![id, not_before, i64::from(failed_attempt), why, now_ms()],
        )
        .map_err(sql("putting a memory job off"))?;
        Ok(())
    }

    /// Agent `agent` finished its part of root `root` (its extraction ran): count the root toward
    /// consolidation, once per root. When `frequency` roots are counted, queue a `consolidate` job
    /// (about `task`) and start counting again; returns its id.
    pub fn memory_root_seen(
        &self,
        agent: &str,
        root: TaskId,
        task: TaskId,
        conversation: Option<&str>,
        frequency: u32,
    ) -> Result<Option<i64>, StoreError> {
        let conn = self.conn();
        let now = now_ms();
        let doing = "counting work for consolidation";
        exec(
            &conn,
            "INSERT INTO memory_agents (agent, pending_roots, last_root, last_seen_at) \
             VALUES (?1, 1, ?2, ?3) \
             ON CONFLICT(agent) DO UPDATE SET \
               pending_roots = pending_roots + (COALESCE(last_root, -1) <> ?2), \
               last_root = ?2, last_seen_at = ?3",
            params![agent, root, now],
        )
        .map_err(sql(doing))?;
        let pending: u32 = row(
            &conn,
            "SELECT pending_roots FROM memory_agents WHERE agent = ?1",
            [agent],
            |r| r.get(0),
        )
        .map_err(sql(doing))?;
        if pending < frequency.max(1) {
            return Ok(None);
        }
        Ok(Some(queue_consolidation(
            &conn,
            agent,
            Some(task),
            Some(root),
            conversation,
            now,
        )?))
    }

    /// Queue a `consolidate` job for every agent idle since `idle_before` (Unix ms) with roots
    /// consolidation has not seen, and no consolidation queued. Returns `(agent, job)` pairs.
    pub fn idle_consolidations(&self, idle_before: i64) -> Result<Vec<(String, i64)>, StoreError> {
        let conn = self.conn();
        let doing = "queueing idle consolidations";
        let idle: Vec<(String, Option<TaskId>)> = {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT a.agent, a.last_root FROM memory_agents a WHERE a.pending_roots > 0 \
                     AND a.last_seen_at <= ?1 AND NOT EXISTS (SELECT 1 FROM memory_jobs j \
                     WHERE j.agent = a.agent AND j.kind = 'consolidate' AND j.state = 'queued') \
                     ORDER BY a.agent",
                )
                .map_err(sql(doing))?;
            let rows = stmt
                .query_map([idle_before], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(sql(doing))?;
            rows.collect::<Result<_, _>>().map_err(sql(doing))?
        };
        let now = now_ms();
        let mut out = Vec::new();
        for (agent, root) in idle {
            // The task the run is about (its ledger rows go there): the root's task for this agent.
            let (task, conversation): (Option<TaskId>, Option<String>) = match root {
                Some(root) => row(
                    &conn,
                    "SELECT MAX(id), MAX(conversation_id) FROM tasks WHERE root_id = ?1 AND agent = ?2",
                    params![root, agent],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(sql(doing))?,
                None => (None, None),
            };
            let job = queue_consolidation(&conn, &agent, task, root, conversation.as_deref(), now)?;
            out.push((agent, job));
        }
        Ok(out)
    }

    /// The recall rows (their `seq`) written for task `task` of `conversation`: the source messages
    /// of what is extracted from it.
    pub fn recall_seqs(&self, task: TaskId, conversation: &str) -> Result<Vec<i64>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq FROM recall_messages WHERE conversation = ?1 AND task = ?2 ORDER BY seq",
            )
            .map_err(sql("reading recall rows"))?;
        let rows = stmt
            .query_map(params![conversation, task.to_string()], |r| r.get(0))
            .map_err(sql("reading recall rows"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading recall rows"))
    }
}

/// Queue a consolidation for `agent` and reset its count (one transaction with the caller's).
fn queue_consolidation(
    conn: &Connection,
    agent: &str,
    task: Option<TaskId>,
    root: Option<TaskId>,
    conversation: Option<&str>,
    now: i64,
) -> Result<i64, StoreError> {
    let doing = "queueing a consolidation";
    exec(
        conn,
        "UPDATE memory_agents SET pending_roots = 0 WHERE agent = ?1",
        [agent],
    )
    .map_err(sql(doing))?;
    exec(
        conn,
        "INSERT INTO memory_jobs (kind, agent, task_id, root_id, conversation_id, state, attempts, \
         not_before, created_at, updated_at) VALUES ('consolidate', ?1, ?2, ?3, ?4, 'queued', 0, ?5, ?5, ?5)",
        params![agent, task, root, conversation, now],
    )
    .map_err(sql(doing))?;
    Ok(conn.last_insert_rowid())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::Ending;
    use crate::store::testing::{child, root};

    fn complete(store: &Db, id: TaskId, output: &str) {
        store.transition(id, TaskState::Assigned).unwrap();
        store.transition(id, TaskState::Executing).unwrap();
        assert!(
            store
                .finish(
                    id,
                    Ending::Completed {
                        output,
                        summary: None
                    }
                )
                .unwrap()
        );
    }

    #[test]
    fn completing_a_root_queues_an_extraction_per_completed_task_of_its_tree() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let done = child(&store, r, "t1");
        let failed = child(&store, r, "t2");
        complete(&store, done, "child answer");
        store.finish(failed, Ending::Failed("boom")).unwrap();
        // A child's completion queues nothing.
        assert!(store.memory_jobs(10).unwrap().is_empty());
        complete(&store, r, "root answer");
        let mut jobs = store.memory_jobs(10).unwrap();
        jobs.reverse();
        assert_eq!(
            jobs.iter()
                .map(|j| (j.kind, j.agent.as_str(), j.task, j.state.as_str()))
                .collect::<Vec<_>>(),
            [
                (JobKind::Extract, "ceo", Some(r), "queued"),
                (JobKind::Extract, "vp", Some(done), "queued")
            ]
        );
        assert_eq!(jobs[0].root, Some(r));
        assert_eq!(jobs[0].conversation.as_deref(), Some("c"));
        assert_eq!(
            store.next_memory_job(now_ms()).unwrap().unwrap().id,
            jobs[0].id
        );
    }

    #[test]
    fn a_root_that_does_not_complete_queues_nothing() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        store.finish(r, Ending::Failed("boom")).unwrap();
        assert!(store.memory_jobs(10).unwrap().is_empty());
    }

    #[test]
    fn consolidation_is_queued_every_frequency_roots_and_when_idle() {
        let store = Db::in_memory().unwrap();
        let r1 = root(&store, "c1");
        let r2 = root(&store, "c2");
        // The same root twice counts once.
        assert_eq!(
            store
                .memory_root_seen("ceo", r1, r1, Some("c1"), 2)
                .unwrap(),
            None
        );
        assert_eq!(
            store
                .memory_root_seen("ceo", r1, r1, Some("c1"), 2)
                .unwrap(),
            None
        );
        let job = store
            .memory_root_seen("ceo", r2, r2, Some("c2"), 2)
            .unwrap()
            .expect("the second root queues a consolidation");
        let queued = store.memory_jobs(1).unwrap().remove(0);
        assert_eq!((queued.id, queued.kind), (job, JobKind::Consolidate));
        assert_eq!(queued.task, Some(r2));
        // The count started again: nothing is idle-pending.
        assert!(store.idle_consolidations(now_ms() + 1).unwrap().is_empty());
        // One more root, then idle: one consolidation, and not a second while it is queued... the
        // first one is still queued, so none.
        let r3 = root(&store, "c3");
        store
            .memory_root_seen("ceo", r3, r3, Some("c3"), 5)
            .unwrap();
        assert!(store.idle_consolidations(now_ms() + 1).unwrap().is_empty());
        store.end_memory_job(job, JobEnd::Done, None).unwrap();
        assert!(
            store
                .idle_consolidations(now_ms() - 60_000)
                .unwrap()
                .is_empty(),
            "not idle yet"
        );
        let idle = store.idle_consolidations(now_ms() + 1).unwrap();
        assert_eq!(idle.len(), 1);
        assert_eq!(idle[0].0, "ceo");
        let job = store.memory_jobs(1).unwrap().remove(0);
        assert_eq!(
            (job.task, job.conversation.as_deref()),
            (Some(r3), Some("c3"))
        );
    }

    #[test]
    fn a_deferred_job_waits_and_an_ended_one_is_not_run_again() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        complete(&store, r, "answer");
        let job = store.next_memory_job(now_ms()).unwrap().unwrap();
        let later = now_ms() + 60_000;
        store
            .defer_memory_job(job.id, later, true, "unreachable")
            .unwrap();
        assert_eq!(store.next_memory_job(now_ms()).unwrap(), None);
        assert_eq!(store.next_memory_job_at().unwrap(), Some(later));
        let again = store.next_memory_job(later).unwrap().unwrap();
        assert_eq!(
            (again.attempts, again.error.as_deref()),
            (1, Some("unreachable"))
        );
        assert!(
            store
                .end_memory_job(job.id, JobEnd::Rejected, Some("bad"))
                .unwrap()
        );
        assert!(!store.end_memory_job(job.id, JobEnd::Done, None).unwrap());
        assert_eq!(store.next_memory_job(later).unwrap(), None);
        assert_eq!(store.next_memory_job_at().unwrap(), None);
    }
}
