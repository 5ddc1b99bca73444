//! The durable queue of memory work on PostgreSQL: the SQL of `store/memory_jobs.rs`, in
//! PostgreSQL's dialect, made safe for several nodes sharing the database.
//!
//! What it keeps, as on SQLite: an `extract` job per completed task of a root's tree is inserted in
//! the transaction that completes the root ([`enqueue_extractions`]), so a completed root always has
//! its jobs and a root that did not complete has none; a `consolidate` job is queued when an agent
//! has `frequency` roots consolidation has not seen ([`memory_root_seen`]) or has been idle after
//! one ([`idle_consolidations`]); a job ends at most once (`UPDATE … WHERE state = 'queued'`).
//!
//! What differs from SQLite, because several nodes' workers read one queue:
//! - [`next_memory_job`] *claims* the job it hands out: one statement pushes the job's `not_before`
//!   [`CLAIM_WINDOW_MS`] ahead, picking it `FOR UPDATE SKIP LOCKED`, so two workers never get one
//!   job and neither waits for the other. The worker then ends it or puts it off (which sets
//!   `not_before` again); a worker that died with it, or was stopped in the middle of it, leaves it
//!   queued, and it is due again when the window has passed (not at once, as on SQLite). A second
//!   call therefore hands out the *next* job, never the same one.
//! - [`memory_root_seen`] and [`idle_consolidations`] run one at a time across the cluster, under
//!   the transaction-scoped advisory lock [`CONSOLIDATION_LOCK`], taken by their first statement.
//!   Why not row locks alone: `idle_consolidations` reads "no consolidation queued for this agent"
//!   (`NOT EXISTS` over `memory_jobs`); when its `FOR UPDATE` meets an agent row another node changed
//!   and committed meanwhile, PostgreSQL re-checks the new row version, but the `NOT EXISTS` still
//!   reads the statement's old snapshot and misses the consolidation the other node just queued.
//!   Under the lock, each caller's statements start after the previous caller's commit and see it.
//!   One key for the whole concern, not one per agent: these are short, rare transactions, and one
//!   key cannot deadlock with itself.
//!
//! Locks that remain, because two nodes may finish roots of one agent at once:
//! - [`memory_root_seen`] counts with one upsert on the agent's `memory_agents` row and queues the
//!   consolidation in the same transaction: exactly one consolidation per `frequency` roots.
//! - [`idle_consolidations`] locks the `memory_agents` rows it picks (`FOR UPDATE SKIP LOCKED`) and
//!   resets their count before its commit: each idle agent gets one consolidation.
//! - [`end_memory_job`], [`drop_memory_job`] and [`defer_memory_job`] are single conditional
//!   statements on the job's row (`state = 'queued'`), so a job ended by one node is not ended,
//!   dropped or put off again by another.
//! - [`enqueue_extractions`] runs inside the transaction that completes the root, which holds the
//!   root's task row locked: it cannot run twice for one root.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::super::memory_jobs::JOB_COLUMNS;
use super::super::{
    DbFailure, DbFault, JobEnd, JobKind, MemoryJob, StoreError, TaskId, TaskState, now_ms,
};
use super::sql::{Tx, exec, get, one, opt, rows, u32_of, u64_of};

/// How long a job handed out by [`next_memory_job`] stays claimed (10 minutes): longer than a job
/// runs (an extraction is one call, a consolidation a short loop, each under the retry layer's
/// deadlines), short enough that a job whose worker died is run elsewhere soon after.
pub(super) const CLAIM_WINDOW_MS: i64 = 10 * 60 * 1000;

/// The advisory lock (one `bigint` key) under which consolidations are counted and queued ("opc-con"
/// in ASCII, recognisable in `pg_locks`; distinct from the engine's and the migrations' keys, and
/// from memory's two-key locks, which PostgreSQL keeps in a separate key space).
pub(super) const CONSOLIDATION_LOCK: i64 = i64::from_be_bytes(*b"\0opc-con");

/// Take [`CONSOLIDATION_LOCK`] for the rest of the transaction (waits for the node holding it).
async fn lock_consolidations(t: &Tx<'_>, doing: &'static str) -> Result<(), StoreError> {
    exec(
        t.c(),
        doing,
        "SELECT pg_advisory_xact_lock($1)",
        &[&CONSOLIDATION_LOCK],
    )
    .await?;
    Ok(())
}

/// A job row (the columns of [`JOB_COLUMNS`], in order). An unknown kind is corrupt: the worker
/// would not know what to run.
fn job_from_row(row: &Row) -> Result<MemoryJob, StoreError> {
    const DOING: &str = "reading the memory queue";
    let kind: String = get(row, 1, DOING)?;
    Ok(MemoryJob {
        id: get(row, 0, DOING)?,
        kind: JobKind::parse(&kind).ok_or_else(|| StoreError::Database {
            doing: DOING,
            source: DbFailure {
                fault: DbFault::Corrupt,
                message: format!("unknown memory job kind `{kind}`"),
            },
        })?,
        agent: get(row, 2, DOING)?,
        task: get(row, 3, DOING)?,
        root: get(row, 4, DOING)?,
        conversation: get(row, 5, DOING)?,
        state: get(row, 6, DOING)?,
        attempts: u32_of(get(row, 7, DOING)?),
        not_before: get(row, 8, DOING)?,
        error: get(row, 9, DOING)?,
    })
}

/// Claim the next queued job due at `now` (oldest first), if any: its `not_before` moves to `now` +
/// [`CLAIM_WINDOW_MS`] (the job returned carries that value), so no other worker gets it until the
/// window passes. One statement, so the pick and the claim commit together; `SKIP LOCKED`, so a
/// job another worker is claiming at this instant is passed over, not waited for.
pub(super) async fn next_memory_job(
    c: &impl GenericClient,
    now: i64,
) -> Result<Option<MemoryJob>, StoreError> {
    opt(
        c,
        "claiming a job from the memory queue",
        &format!(
            "UPDATE memory_jobs SET not_before = $2 WHERE id = (SELECT id FROM memory_jobs \
             WHERE state = 'queued' AND not_before <= $1 ORDER BY not_before, id LIMIT 1 \
             FOR UPDATE SKIP LOCKED) RETURNING {JOB_COLUMNS}"
        ),
        &[&now, &now.saturating_add(CLAIM_WINDOW_MS)],
    )
    .await?
    .as_ref()
    .map(job_from_row)
    .transpose()
}

/// When the next queued job is due (Unix ms), if any is queued.
pub(super) async fn next_memory_job_at(c: &impl GenericClient) -> Result<Option<i64>, StoreError> {
    const DOING: &str = "reading the memory queue";
    let row = one(
        c,
        DOING,
        "SELECT MIN(not_before) FROM memory_jobs WHERE state = 'queued'",
        &[],
    )
    .await?;
    get(&row, 0, DOING)
}

/// The latest `limit` jobs, newest first (tests, the console).
pub(super) async fn memory_jobs(
    c: &impl GenericClient,
    limit: u32,
) -> Result<Vec<MemoryJob>, StoreError> {
    rows(
        c,
        "reading the memory queue",
        &format!("SELECT {JOB_COLUMNS} FROM memory_jobs ORDER BY id DESC LIMIT $1"),
        &[&i64::from(limit)],
    )
    .await?
    .iter()
    .map(job_from_row)
    .collect()
}

/// The recall rows (their `seq`) written for task `task` of `conversation`: the source messages of
/// what is extracted from it. Memory's `recall_messages.task` is TEXT holding the task id.
pub(super) async fn recall_seqs(
    c: &impl GenericClient,
    task: TaskId,
    conversation: &str,
) -> Result<Vec<i64>, StoreError> {
    const DOING: &str = "reading recall rows";
    rows(
        c,
        DOING,
        "SELECT seq FROM recall_messages WHERE conversation = $1 AND task = $2 ORDER BY seq",
        &[&conversation, &task.to_string()],
    )
    .await?
    .iter()
    .map(|r| get(r, 0, DOING))
    .collect()
}

/// End a queued job. `false` when it was not queued (ended already, perhaps by another node).
pub(super) async fn end_memory_job(
    t: &Tx<'_>,
    id: i64,
    end: JobEnd,
    error: Option<&str>,
) -> Result<bool, StoreError> {
    let n = exec(
        t.c(),
        "ending a memory job",
        "UPDATE memory_jobs SET state = $2, error = $3, updated_at = $4 \
         WHERE id = $1 AND state = 'queued'",
        &[&id, &end.as_str(), &error, &now_ms()],
    )
    .await?;
    Ok(n == 1)
}

/// Drop a queued job that needs no work (its agent keeps no facts).
pub(super) async fn drop_memory_job(t: &Tx<'_>, id: i64) -> Result<(), StoreError> {
    exec(
        t.c(),
        "dropping a memory job",
        "DELETE FROM memory_jobs WHERE id = $1 AND state = 'queued'",
        &[&id],
    )
    .await?;
    Ok(())
}

/// Put a queued job off until `not_before`, saying why; `failed_attempt` counts one more failed
/// attempt (a model that could not be reached), a cap does not.
pub(super) async fn defer_memory_job(
    t: &Tx<'_>,
    id: i64,
    not_before: i64,
    failed_attempt: bool,
    why: &str,
) -> Result<(), StoreError> {
    exec(
        t.c(),
        "putting a memory job off",
        "UPDATE memory_jobs SET not_before = $2, attempts = attempts + $3, error = $4, \
         updated_at = $5 WHERE id = $1 AND state = 'queued'",
        &[
            &id,
            &not_before,
            &i64::from(failed_attempt),
            &why,
            &now_ms(),
        ],
    )
    .await?;
    Ok(())
}

/// Agent `agent` finished its part of root `root` (its extraction ran): count the root toward
/// consolidation, once per root. When `frequency` roots are counted, queue a `consolidate` job
/// (about `task`) and start counting again; returns its id.
///
/// Runs under [`CONSOLIDATION_LOCK`] (a second node counting waits, then counts from the value this
/// one committed). The upsert's `RETURNING` leaves the agent's row locked to the commit as well, so
/// the count it returns is this transaction's alone until the consolidation is queued and the
/// count reset.
pub(super) async fn memory_root_seen(
    t: &Tx<'_>,
    agent: &str,
    root: TaskId,
    task: TaskId,
    conversation: Option<&str>,
    frequency: u32,
) -> Result<Option<i64>, StoreError> {
    const DOING: &str = "counting work for consolidation";
    lock_consolidations(t, DOING).await?;
    let now = now_ms();
    let row = one(
        t.c(),
        DOING,
        "INSERT INTO memory_agents AS a (agent, pending_roots, last_root, last_seen_at) \
         VALUES ($1, 1, $2, $3) \
         ON CONFLICT (agent) DO UPDATE SET \
           pending_roots = a.pending_roots \
             + CASE WHEN COALESCE(a.last_root, -1) <> EXCLUDED.last_root THEN 1 ELSE 0 END, \
           last_root = EXCLUDED.last_root, last_seen_at = EXCLUDED.last_seen_at \
         RETURNING pending_roots",
        &[&agent, &root, &now],
    )
    .await?;
    let pending = u64_of(get(&row, 0, DOING)?);
    if pending < u64::from(frequency.max(1)) {
        return Ok(None);
    }
    Ok(Some(
        queue_consolidation(t, agent, Some(task), Some(root), conversation, now).await?,
    ))
}

/// Queue a `consolidate` job for every agent idle since `idle_before` (Unix ms) with roots
/// consolidation has not seen, and no consolidation queued. Returns `(agent, job)` pairs.
///
/// Runs under [`CONSOLIDATION_LOCK`]: a second node looking at once waits, and its look starts after
/// this commit, seeing the counts reset and the consolidations queued (see the module doc for why
/// the row locks alone do not do it). The rows picked are still locked (`FOR UPDATE SKIP LOCKED`)
/// so that no other writer changes an agent's count between the look and the reset.
pub(super) async fn idle_consolidations(
    t: &Tx<'_>,
    idle_before: i64,
) -> Result<Vec<(String, i64)>, StoreError> {
    const DOING: &str = "queueing idle consolidations";
    lock_consolidations(t, DOING).await?;
    let idle = rows(
        t.c(),
        DOING,
        "SELECT a.agent, a.last_root FROM memory_agents a WHERE a.pending_roots > 0 \
         AND a.last_seen_at <= $1 AND NOT EXISTS (SELECT 1 FROM memory_jobs j \
         WHERE j.agent = a.agent AND j.kind = 'consolidate' AND j.state = 'queued') \
         ORDER BY a.agent FOR UPDATE OF a SKIP LOCKED",
        &[&idle_before],
    )
    .await?;
    let now = now_ms();
    let mut out = Vec::with_capacity(idle.len());
    for row in &idle {
        let agent: String = get(row, 0, DOING)?;
        let root: Option<TaskId> = get(row, 1, DOING)?;
        // The task the run is about (its ledger rows go there): the root's task for this agent.
        let (task, conversation): (Option<TaskId>, Option<String>) = match root {
            Some(root) => {
                let r = one(
                    t.c(),
                    DOING,
                    "SELECT MAX(id), MAX(conversation_id) FROM tasks WHERE root_id = $1 AND agent = $2",
                    &[&root, &agent],
                )
                .await?;
                (get(&r, 0, DOING)?, get(&r, 1, DOING)?)
            }
            None => (None, None),
        };
        let job = queue_consolidation(t, &agent, task, root, conversation.as_deref(), now).await?;
        out.push((agent, job));
    }
    Ok(out)
}

/// Queue a consolidation for `agent` and reset its count (in the caller's transaction, which holds
/// the agent's `memory_agents` row locked).
async fn queue_consolidation(
    t: &Tx<'_>,
    agent: &str,
    task: Option<TaskId>,
    root: Option<TaskId>,
    conversation: Option<&str>,
    now: i64,
) -> Result<i64, StoreError> {
    const DOING: &str = "queueing a consolidation";
    exec(
        t.c(),
        DOING,
        "UPDATE memory_agents SET pending_roots = 0 WHERE agent = $1",
        &[&agent],
    )
    .await?;
    let row = one(
        t.c(),
        DOING,
        "INSERT INTO memory_jobs (kind, agent, task_id, root_id, conversation_id, state, attempts, \
         not_before, created_at, updated_at) \
         VALUES ('consolidate', $1, $2, $3, $4, 'queued', 0, $5, $5, $5) RETURNING id",
        &[&agent, &task, &root, &conversation, &now],
    )
    .await?;
    get(&row, 0, DOING)
}

/// Queue an extraction for every completed task of root `$1`'s tree, at `$2` (`$3`: the completed
/// state's name); the completing write's pipelined statement too (`ledger.rs`).
pub(super) const ENQUEUE_EXTRACTIONS: &str = "INSERT INTO memory_jobs (kind, agent, task_id, root_id, \
     conversation_id, state, attempts, not_before, created_at, updated_at) \
     SELECT 'extract', agent, id, root_id, conversation_id, 'queued', 0, $2, $2, $2 \
     FROM tasks WHERE root_id = $1 AND state = $3 ORDER BY id";

/// Inside the transaction that completes task `id`: when it is a root, queue an `extract` job for
/// every completed task of its tree (the root included). How many were queued.
pub(super) async fn enqueue_extractions(
    t: &Tx<'_>,
    id: TaskId,
    now: i64,
) -> Result<usize, StoreError> {
    const DOING: &str = "queueing memory work";
    let is_root = match opt(
        t.c(),
        DOING,
        "SELECT parent_id IS NULL FROM tasks WHERE id = $1",
        &[&id],
    )
    .await?
    {
        Some(row) => get::<bool>(&row, 0, DOING)?,
        None => false,
    };
    if !is_root {
        return Ok(0);
    }
    let n = exec(
        t.c(),
        DOING,
        ENQUEUE_EXTRACTIONS,
        &[&id, &now, &TaskState::Completed.as_str()],
    )
    .await?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}
