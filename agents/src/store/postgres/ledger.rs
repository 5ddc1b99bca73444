//! The ledger on PostgreSQL: one `llm_calls` row per LLM call, added to its task's running totals
//! in the same transaction. The SQL of `store/ledger.rs`, in PostgreSQL's dialect; its invariants
//! hold here as there:
//! - a call whose provider sent no token usage is recorded as *unknown* (`usage_unknown`) and
//!   counted per task (`unknown_usage_calls`), so totals over it are lower bounds, never a silent 0;
//! - memory work's calls are rows of the same table (`work = 'memory'`) recorded against the task
//!   they are about, never added to its totals.
//!
//! Locks: [`record_turn`] adds to the totals with one `UPDATE … SET x = x + $n`, which
//! PostgreSQL applies to the row's latest committed version under its row lock, so concurrent calls
//! of one task (from any node) all count. With a final answer, it first locks the task's row
//! (`SELECT … FOR UPDATE`, before anything else it writes, as the lifecycle does) and checks the
//! transition on it, so a completion racing a cancellation (or another completion) cannot both win.
//! [`record_memory_call`] only inserts (no task row locked beyond the reference's key-share lock).
//!
//! Days are UTC days of the ms timestamps, cut in Rust with the same `div_euclid` and named by the
//! SQLite side's `day_text`, so both backends group a call into the same day.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::super::ledger::{day_text, encode_turn};
use super::super::{
    CallPrivacy, CallRecord, DbFailure, DbFault, LatestCall, PrivacyDay, Spend, StoreError, TaskId,
    TaskPrivacy, TaskState, TimedCall, Totals, now_ms,
};
use super::recall;
use super::sql::{Lease, Step, Tx, atomic, exec, get, i64_of, one, rows, u32_of, u64_of};
use crate::llm::privacy::TypeCounts;

/// One UTC day, in ms.
const DAY_MS: i64 = 86_400_000;

/// The columns of one `llm_calls` row, in [`CallRow::params`]' order. The one place that knows
/// them, for task and memory calls alike.
const CALL_COLUMNS: &str = "task_id, agent, model, tokens_in, tokens_out, cost_usd, duration_ms, \
     attempts, tool_calls, error, created_at, usage_unknown, privacy_mode, privacy_counts, \
     privacy_routed_to, privacy_blocked, work";

/// The insert of one `llm_calls` row ([`CallRow`]'s parameters), answering its id.
fn insert_call_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        let values: Vec<String> = (1..=17).map(|i| format!("${i}")).collect();
        format!(
            "INSERT INTO llm_calls ({CALL_COLUMNS}) VALUES ({}) RETURNING id",
            values.join(", ")
        )
    })
}

/// The values of one `llm_calls` row for `call` (its tool names already encoded), as `work` (`task`
/// or `memory`), in [`CALL_COLUMNS`]' order.
struct CallRow<'a> {
    call: &'a CallRecord,
    tools: &'a str,
    work: &'a str,
    tokens_in: i64,
    tokens_out: i64,
    duration_ms: i64,
    attempts: i64,
    now: i64,
    usage_unknown: i64,
    mode: Option<&'a str>,
    counts: Option<String>,
    routed_to: Option<&'a str>,
    blocked: Option<&'a str>,
}

impl<'a> CallRow<'a> {
    fn new(call: &'a CallRecord, tools: &'a str, work: &'a str) -> Self {
        let privacy = call.privacy.as_ref();
        CallRow {
            call,
            tools,
            work,
            tokens_in: i64_of(call.tokens_in),
            tokens_out: i64_of(call.tokens_out),
            duration_ms: i64_of(call.duration_ms),
            attempts: i64::from(call.attempts),
            now: now_ms(),
            usage_unknown: i64::from(call.usage_unknown),
            mode: privacy.map(|p| p.mode.as_str()),
            counts: privacy.map(|p| p.counts.to_json()),
            routed_to: privacy.and_then(|p| p.routed_to.as_deref()),
            blocked: privacy.and_then(|p| p.blocked.as_deref()),
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 17] {
        [
            &self.call.task_id,
            &self.call.agent,
            &self.call.model,
            &self.tokens_in,
            &self.tokens_out,
            &self.call.cost_usd,
            &self.duration_ms,
            &self.attempts,
            &self.tools,
            &self.call.error,
            &self.now,
            &self.usage_unknown,
            &self.mode,
            &self.counts,
            &self.routed_to,
            &self.blocked,
            &self.work,
        ]
    }
}

/// Record one LLM call, add it to its task's totals and save the session history that includes its
/// answer (already encoded) — one transaction per model turn. With `completed`, the answer is final
/// and the task is completed with it in the same transaction (through RESULT_PROPAGATING), its
/// answer written to recall memory and its tree's extractions queued; returns whether it was (a task
/// that already ended, e.g. cancelled, keeps its ending), and whether it appended to recall memory.
///
/// One statement ([`record_turn_sql`]), so one round trip and no BEGIN/COMMIT (two round trips under a
/// lease: the lease is checked first). It locks the task's row first (`FOR UPDATE`, before the call's
/// row takes its key-share lock on it, so this write and a lifecycle change of the same task queue on
/// one lock in one order) and decides from the state it locked, which is the row's latest committed
/// one: PostgreSQL re-reads a row it had to wait for. The lifecycle's answer is given to the
/// statement as lists of states: the states that may complete, and the ended ones (a task that ended
/// meanwhile keeps its ending; the call still counts). In any other state the statement writes
/// nothing and the state it found is the refusal.
pub(super) async fn record_turn(
    c: deadpool_postgres::Object,
    lease: Option<Lease>,
    call: &CallRecord,
    tools: &str,
    history: Option<&str>,
    completed: Option<&str>,
) -> Result<(bool, bool), StoreError> {
    const DOING: &str = "recording an LLM call";
    let row = CallRow::new(call, tools, "task");
    let completing: Vec<&str> = match completed {
        Some(_) => TaskState::ALL
            .into_iter()
            .filter(|s| s.may_become(TaskState::ResultPropagating))
            .map(TaskState::as_str)
            .collect(),
        None => Vec::new(),
    };
    // Without a final answer, any state takes the call (as on SQLite: no state is read).
    let ended: Vec<&str> = TaskState::ALL
        .into_iter()
        .filter(|s| completed.is_none() || s.is_terminal())
        .map(TaskState::as_str)
        .collect();
    let recall_text = completed.filter(|t| !t.trim().is_empty());
    let recall_hash = recall_text.map(recall::hash_of);
    let completed_state = TaskState::Completed.as_str();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &row.tokens_in,
        &row.tokens_out,
        &call.cost_usd,
        &row.usage_unknown,
        &history,
        &row.now,
        &completed_state,
        &completed,
        &completing,
        &ended,
        &recall_text,
        &recall_hash,
    ];
    let call_params = row.params();
    params.extend_from_slice(&call_params);
    let rows = atomic(
        c,
        lease,
        &[Step {
            doing: DOING,
            sql: record_turn_sql(),
            params: &params,
        }],
    )
    .await?;
    let found = rows
        .first()
        .and_then(|r| r.first())
        .ok_or(StoreError::NoTask(call.task_id))?;
    let state: Option<String> = get(found, 0, DOING)?;
    let state = state.ok_or(StoreError::NoTask(call.task_id))?;
    let current = TaskState::parse(&state).ok_or(StoreError::Corrupt {
        what: "state",
        task: call.task_id,
        message: state,
    })?;
    if completed.is_none() || current.is_terminal() {
        return Ok((false, false));
    }
    if !current.may_become(TaskState::ResultPropagating) {
        return Err(StoreError::BadTransition {
            task: call.task_id,
            from: current.as_str(),
            to: TaskState::Completed.as_str(),
        });
    }
    Ok((true, recall_text.is_some()))
}

/// [`record_turn`]'s statement. `$13` is the task (the call row's first value; `$13`–`$29` are a
/// [`CallRow`]'s parameters); `$1`–`$4` its tokens in, out, cost and unknown usage; `$5` the
/// history to save (or NULL); `$6` the time; `$7` the completed state's name and `$8` the answer
/// (NULL: not final); `$9` the states that complete with it, `$10` the states that only take the
/// call; `$11` and `$12` the answer's recall text and hash (NULL: none). Answers the state it found
/// (NULL: no such task).
fn record_turn_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        let values: Vec<String> = (13..=29).map(|i| format!("${i}")).collect();
        format!(
            "WITH cur AS (SELECT id, state, agent, conversation_id, parent_id IS NULL AS is_root \
             FROM tasks WHERE id = $13 FOR UPDATE), \
             ok AS (SELECT cur.*, cur.state = ANY($9::TEXT[]) AS completes FROM cur \
             WHERE cur.state = ANY($9::TEXT[]) OR cur.state = ANY($10::TEXT[])), \
             call AS (INSERT INTO llm_calls ({CALL_COLUMNS}) SELECT {values} FROM ok), \
             saved AS (UPDATE tasks t SET tokens_in = t.tokens_in + $1, \
             tokens_out = t.tokens_out + $2, cost_usd = t.cost_usd + $3, llm_calls = t.llm_calls + 1, \
             unknown_usage_calls = t.unknown_usage_calls + $4, \
             messages = COALESCE($5::TEXT, t.messages), \
             updated_at = CASE WHEN ok.completes OR $5::TEXT IS NOT NULL THEN $6 ELSE t.updated_at END, \
             state = CASE WHEN ok.completes THEN $7::TEXT ELSE t.state END, \
             output = CASE WHEN ok.completes THEN $8::TEXT ELSE t.output END, \
             finished_at = CASE WHEN ok.completes THEN $6 ELSE t.finished_at END \
             FROM ok WHERE t.id = ok.id), \
             recall AS (INSERT INTO recall_messages ({recall_columns}) \
             SELECT ok.agent, ok.agent, ok.conversation_id, ok.id::TEXT, ok.conversation_id, NULL, \
             $6, $12::TEXT, $11::TEXT FROM ok WHERE ok.completes AND $11::TEXT IS NOT NULL), \
             jobs AS ({jobs}) \
             SELECT (SELECT state FROM cur)",
            values = values.join(", "),
            recall_columns = recall::COLUMNS,
            // The tree's completed tasks, this root among them: the statement reads the rows as
            // they were before it, so the root is named by its id.
            jobs = "INSERT INTO memory_jobs (kind, agent, task_id, root_id, conversation_id, \
                    state, attempts, not_before, created_at, updated_at) \
                    SELECT 'extract', x.agent, x.id, x.root_id, x.conversation_id, 'queued', 0, \
                    $6, $6, $6 FROM tasks x, ok \
                    WHERE ok.completes AND ok.is_root AND x.root_id = ok.id \
                    AND (x.state = $7::TEXT OR x.id = ok.id) ORDER BY x.id",
        )
    })
}

/// The LLM calls made for a task, in order (its own work: memory work about it is apart, see
/// [`memory_calls`]).
pub(super) async fn calls(
    c: &impl GenericClient,
    task_id: TaskId,
) -> Result<Vec<CallRecord>, StoreError> {
    Ok(calls_of(c, task_id, "task")
        .await?
        .into_iter()
        .map(|(_, call)| call)
        .collect())
}

/// The calls of `task_id` of one kind of work (`task` or `memory`), in order, with their ids. One
/// statement, so the ids and the calls are read from one snapshot.
async fn calls_of(
    c: &impl GenericClient,
    task_id: TaskId,
    work: &str,
) -> Result<Vec<(i64, CallRecord)>, StoreError> {
    rows(
        c,
        "reading the ledger",
        "SELECT id, task_id, agent, model, tokens_in, tokens_out, cost_usd, duration_ms, attempts, \
         tool_calls, error, usage_unknown, privacy_mode, privacy_counts, privacy_routed_to, \
         privacy_blocked FROM llm_calls WHERE task_id = $1 AND work = $2 ORDER BY id",
        &[&task_id, &work],
    )
    .await?
    .iter()
    .map(call_from_row)
    .collect()
}

/// Every task call (not memory work) of root `root_id`'s tree, in the order recorded, each with the
/// time it ended (the row's time: it is written when the call returns).
pub(super) async fn tree_calls(
    c: &impl GenericClient,
    root_id: TaskId,
) -> Result<Vec<TimedCall>, StoreError> {
    const DOING: &str = "reading the ledger";
    rows(
        c,
        DOING,
        "SELECT c.id, c.task_id, c.agent, c.model, c.tokens_in, c.tokens_out, c.cost_usd, \
         c.duration_ms, c.attempts, c.tool_calls, c.error, c.usage_unknown, c.privacy_mode, \
         c.privacy_counts, c.privacy_routed_to, c.privacy_blocked, c.created_at \
         FROM llm_calls c JOIN tasks t ON t.id = c.task_id \
         WHERE t.root_id = $1 AND c.work = 'task' ORDER BY c.id",
        &[&root_id],
    )
    .await?
    .iter()
    .map(|row| {
        let (_, call) = call_from_row(row)?;
        Ok(TimedCall {
            call,
            ended_at: get(row, 16, DOING)?,
        })
    })
    .collect()
}

/// A ledger row (the columns of [`calls_of`], in order) with its id.
fn call_from_row(row: &Row) -> Result<(i64, CallRecord), StoreError> {
    const DOING: &str = "reading the ledger";
    let tools: String = get(row, 9, DOING)?;
    let tool_calls = serde_json::from_str(&tools).map_err(|e| StoreError::Database {
        doing: DOING,
        source: DbFailure {
            fault: DbFault::Corrupt,
            message: format!("tool calls: {e}"),
        },
    })?;
    let privacy = match get::<Option<String>>(row, 12, DOING)? {
        None => None,
        Some(mode) => Some(CallPrivacy {
            mode,
            counts: TypeCounts::from_json(
                &get::<Option<String>>(row, 13, DOING)?.unwrap_or_default(),
            ),
            routed_to: get(row, 14, DOING)?,
            blocked: get(row, 15, DOING)?,
        }),
    };
    let call = CallRecord {
        task_id: get(row, 1, DOING)?,
        agent: get(row, 2, DOING)?,
        model: get(row, 3, DOING)?,
        tokens_in: u64_of(get(row, 4, DOING)?),
        tokens_out: u64_of(get(row, 5, DOING)?),
        cost_usd: get(row, 6, DOING)?,
        duration_ms: u64_of(get(row, 7, DOING)?),
        attempts: u32_of(get(row, 8, DOING)?),
        tool_calls,
        error: get(row, 10, DOING)?,
        usage_unknown: get::<i64>(row, 11, DOING)? != 0,
        privacy,
    };
    Ok((get(row, 0, DOING)?, call))
}

/// What the privacy gateway did per task of root `root_id`'s tree (tasks it handled no call of are
/// absent).
pub(super) async fn privacy_by_task(
    c: &impl GenericClient,
    root_id: TaskId,
) -> Result<HashMap<TaskId, TaskPrivacy>, StoreError> {
    const DOING: &str = "reading the ledger";
    let found = rows(
        c,
        DOING,
        "SELECT c.task_id, c.privacy_counts, c.privacy_routed_to, c.privacy_blocked FROM llm_calls c \
         JOIN tasks t ON t.id = c.task_id \
         WHERE t.root_id = $1 AND c.privacy_mode IS NOT NULL ORDER BY c.id",
        &[&root_id],
    )
    .await?;
    let mut out: HashMap<TaskId, TaskPrivacy> = HashMap::new();
    for row in &found {
        let task: TaskId = get(row, 0, DOING)?;
        let counts: Option<String> = get(row, 1, DOING)?;
        let routed_to: Option<String> = get(row, 2, DOING)?;
        let blocked: Option<String> = get(row, 3, DOING)?;
        let entry = out.entry(task).or_default();
        if blocked.is_some() {
            entry.blocked += 1;
        } else if routed_to.is_some() {
            entry.routed += 1;
        } else {
            entry
                .masked
                .max_with(&TypeCounts::from_json(counts.as_deref().unwrap_or("{}")));
        }
    }
    Ok(out)
}

/// Sum of tokens and cost over a tree: `(tokens_in, tokens_out, cost_usd)`. Lower bounds when
/// some calls' usage is unknown; [`totals`] says how many.
pub(super) async fn tree_totals(
    c: &impl GenericClient,
    root_id: TaskId,
) -> Result<(u64, u64, f64), StoreError> {
    let t = totals(c, root_id).await?;
    Ok((t.tokens_in, t.tokens_out, t.cost_usd))
}

/// Sum of tokens and cost over a tree, with the number of calls whose usage is unknown (one
/// statement: one snapshot of the tree's rows).
pub(super) async fn totals(c: &impl GenericClient, root_id: TaskId) -> Result<Totals, StoreError> {
    const DOING: &str = "summing a task tree";
    let row = one(
        c,
        DOING,
        "SELECT COALESCE(SUM(tokens_in), 0)::BIGINT, COALESCE(SUM(tokens_out), 0)::BIGINT, \
         COALESCE(SUM(cost_usd), 0)::DOUBLE PRECISION, COALESCE(SUM(unknown_usage_calls), 0)::BIGINT \
         FROM tasks WHERE root_id = $1",
        &[&root_id],
    )
    .await?;
    Ok(Totals {
        tokens_in: u64_of(get(&row, 0, DOING)?),
        tokens_out: u64_of(get(&row, 1, DOING)?),
        cost_usd: get(&row, 2, DOING)?,
        unknown_usage_calls: u32_of(get(&row, 3, DOING)?),
    })
}

/// What the privacy gateway did per UTC day since `since_ms`, oldest first.
pub(super) async fn privacy_by_day(
    c: &impl GenericClient,
    since_ms: i64,
) -> Result<Vec<PrivacyDay>, StoreError> {
    const DOING: &str = "reading the ledger";
    let found = rows(
        c,
        DOING,
        "SELECT created_at, privacy_counts, privacy_routed_to, privacy_blocked FROM llm_calls \
         WHERE privacy_mode IS NOT NULL AND created_at >= $1 ORDER BY id",
        &[&since_ms],
    )
    .await?;
    let mut days: BTreeMap<i64, PrivacyDay> = BTreeMap::new();
    for row in &found {
        let at: i64 = get(row, 0, DOING)?;
        let counts: Option<String> = get(row, 1, DOING)?;
        let routed_to: Option<String> = get(row, 2, DOING)?;
        let blocked: Option<String> = get(row, 3, DOING)?;
        let day = at.div_euclid(DAY_MS);
        let entry = days.entry(day).or_insert_with(|| PrivacyDay {
            day: day_text(day),
            ..PrivacyDay::default()
        });
        entry.calls += 1;
        if blocked.is_some() {
            entry.blocked += 1;
        } else if routed_to.is_some() {
            entry.routed += 1;
        } else {
            for (kind, n) in TypeCounts::from_json(counts.as_deref().unwrap_or("{}")).iter() {
                *entry.masked.entry(kind.to_string()).or_default() += u64::from(n);
            }
        }
    }
    Ok(days.into_values().collect())
}

/// Spend since `since_ms` (Unix ms), by agent, model, conversation and work (the conversation's
/// own, or memory work about it), most expensive first.
pub(super) async fn spend_since(
    c: &impl GenericClient,
    since_ms: i64,
) -> Result<Vec<Spend>, StoreError> {
    const DOING: &str = "summing spend";
    rows(
        c,
        DOING,
        "SELECT c.agent, c.model, t.conversation_id, COUNT(*), SUM(c.tokens_in)::BIGINT, \
         SUM(c.tokens_out)::BIGINT, SUM(c.cost_usd), c.work \
         FROM llm_calls c JOIN tasks t ON t.id = c.task_id WHERE c.created_at >= $1 \
         GROUP BY c.agent, c.model, t.conversation_id, c.work ORDER BY SUM(c.cost_usd) DESC",
        &[&since_ms],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(Spend {
            agent: get(r, 0, DOING)?,
            model: get(r, 1, DOING)?,
            conversation: get(r, 2, DOING)?,
            work: get(r, 7, DOING)?,
            calls: u64_of(get(r, 3, DOING)?),
            tokens_in: u64_of(get(r, 4, DOING)?),
            tokens_out: u64_of(get(r, 5, DOING)?),
            cost_usd: get(r, 6, DOING)?,
        })
    })
    .collect()
}

/// Record one remote embedding call (issue 39): its own table, no task.
pub(super) async fn record_embedding_call(
    t: &Tx<'_>,
    call: &crate::llm::embed::EmbedCall,
) -> Result<(), StoreError> {
    const DOING: &str = "recording an embedding call";
    let masked = call.masked.as_ref().map(|m| m.to_json());
    let params: [&(dyn ToSql + Sync); 10] = [
        &call.model,
        &i64::from(call.texts),
        &(call.tokens as i64),
        &call.cost_usd,
        &i64::from(call.usage_unknown),
        &(call.duration_ms as i64),
        &i64::from(call.attempts),
        &call.error,
        &masked,
        &now_ms(),
    ];
    exec(
        t.c(),
        DOING,
        "INSERT INTO embedding_calls (model, texts, tokens, cost_usd, usage_unknown, duration_ms, \
         attempts, error, privacy_counts, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &params,
    )
    .await
    .map(|_| ())
}

/// Embedding spend since `since_ms`, by model, most expensive first (work `embedding`).
pub(super) async fn embedding_spend_since(
    c: &impl GenericClient,
    since_ms: i64,
) -> Result<Vec<Spend>, StoreError> {
    const DOING: &str = "summing embedding spend";
    rows(
        c,
        DOING,
        "SELECT model, COUNT(*), SUM(tokens)::BIGINT, SUM(cost_usd) FROM embedding_calls \
         WHERE created_at >= $1 GROUP BY model ORDER BY SUM(cost_usd) DESC, model",
        &[&since_ms],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(Spend {
            agent: String::new(),
            model: get(r, 0, DOING)?,
            conversation: String::new(),
            work: "embedding".into(),
            calls: u64_of(get(r, 1, DOING)?),
            tokens_in: u64_of(get(r, 2, DOING)?),
            tokens_out: 0,
            cost_usd: get(r, 3, DOING)?,
        })
    })
    .collect()
}

/// The latest call per `provider/model` among the last `window` calls, newest first: what the
/// console shows as each provider's last outcome. Bounded by `window`, so a long ledger costs the
/// same to read. (`DISTINCT ON` keeps each model's newest row, where SQLite relies on the bare
/// columns of a `MAX()` aggregate.)
pub(super) async fn latest_calls(
    c: &impl GenericClient,
    window: u32,
) -> Result<Vec<LatestCall>, StoreError> {
    const DOING: &str = "reading the latest calls";
    rows(
        c,
        DOING,
        "SELECT model, error, created_at FROM \
         (SELECT DISTINCT ON (model) id, model, error, created_at FROM \
          (SELECT id, model, error, created_at FROM llm_calls ORDER BY id DESC LIMIT $1) recent \
          ORDER BY model, id DESC) latest \
         ORDER BY id DESC",
        &[&i64::from(window)],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(LatestCall {
            model: get(r, 0, DOING)?,
            error: get(r, 1, DOING)?,
            at: get(r, 2, DOING)?,
        })
    })
    .collect()
}

/// The memory-work calls of task `task_id`, in order, with their ledger ids.
pub(super) async fn memory_calls(
    c: &impl GenericClient,
    task_id: TaskId,
) -> Result<Vec<(i64, CallRecord)>, StoreError> {
    calls_of(c, task_id, "memory").await
}

/// Tokens (in + out) of `agent`'s memory work recorded since `since_ms`.
pub(super) async fn memory_tokens_since(
    c: &impl GenericClient,
    agent: &str,
    since_ms: i64,
) -> Result<u64, StoreError> {
    const DOING: &str = "summing memory work";
    let row = one(
        c,
        DOING,
        "SELECT COALESCE(SUM(tokens_in + tokens_out), 0)::BIGINT FROM llm_calls \
         WHERE work = 'memory' AND agent = $1 AND created_at >= $2",
        &[&agent, &since_ms],
    )
    .await?;
    Ok(u64_of(get(&row, 0, DOING)?))
}

/// Record one memory-work LLM call (`work = 'memory'`) against its task, WITHOUT adding it to the
/// task's totals (the user's request did not spend it). Returns the ledger row's id (the facts'
/// provenance names it).
pub(super) async fn record_memory_call(t: &Tx<'_>, call: &CallRecord) -> Result<i64, StoreError> {
    const DOING: &str = "recording a memory-work call";
    let (tools, _) = encode_turn(call, None)?;
    let row = one(
        t.c(),
        DOING,
        insert_call_sql(),
        &CallRow::new(call, &tools, "memory").params(),
    )
    .await?;
    get(&row, 0, DOING)
}
