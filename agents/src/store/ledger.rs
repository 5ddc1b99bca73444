//! The ledger: one row per LLM call (tokens, cost, time, attempts, tools called), added to its task's
//! running totals in the same transaction.
//!
//! Invariant: a call whose provider sent no token usage is recorded as *unknown* (`usage_unknown`),
//! and counted per task (`unknown_usage_calls`), so totals over it are lower bounds, shown as such
//! ([`Totals`], [`tokens_text`]) — never a silent 0 tokens and $0.
//!
//! Memory work's calls are rows of the same table (`work = 'memory'`), recorded against the task
//! they are about but never added to its totals; [`Db::memory_tokens_since`] sums an agent's for
//! its daily cap.

use rusqlite::params;
use serde::Serialize;

use std::collections::HashMap;

use super::tasks::encode_history;
use super::{Db, StoreError, TaskId, TaskState, exec, now_ms, row, sql};
use crate::llm::Message;
use crate::llm::privacy::{PrivacyReport, TypeCounts};

/// One LLM call for the ledger.
#[derive(Clone, Debug, Serialize)]
pub struct CallRecord {
    /// The task it was made for.
    pub task_id: TaskId,
    /// The agent (or `summarizer`).
    pub agent: String,
    /// `provider/model`.
    pub model: String,
    /// Prompt tokens (0 when unknown).
    pub tokens_in: u64,
    /// Generated tokens (0 when unknown).
    pub tokens_out: u64,
    /// USD (0 when the usage is unknown).
    pub cost_usd: f64,
    /// The provider sent no token usage for this (successful) call: its tokens and cost are unknown.
    pub usage_unknown: bool,
    /// Wall time of the call, retries included.
    pub duration_ms: u64,
    /// Attempts made.
    pub attempts: u32,
    /// Wire names of the tools the model called.
    pub tool_calls: Vec<String>,
    /// The error, for a failed call.
    pub error: Option<String>,
    /// What the privacy gateway did (`None` when it did not handle the call).
    pub privacy: Option<CallPrivacy>,
}

/// An LLM call with the time it ended, for the request timeline.
///
/// Why the end: the ledger row is written when the call returns (its tokens and cost are known only
/// then), so the row's time is the call's end and the call started `duration_ms` before it.
#[derive(Clone, Debug, Serialize)]
pub struct TimedCall {
    /// When the call ended, ms since epoch.
    pub ended_at: i64,
    /// The call.
    #[serde(flatten)]
    pub call: CallRecord,
}

impl TimedCall {
    /// When the call started, ms since epoch (its end less its wall time, retries included).
    pub fn started_at(&self) -> i64 {
        self.ended_at
            .saturating_sub(i64::try_from(self.call.duration_ms).unwrap_or(i64::MAX))
    }
}

/// What the privacy gateway did to one call, for the ledger: counts by type, never values.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CallPrivacy {
    /// `mask`, `redact` or `route`; `blocked` when the egress guard stopped the call.
    pub mode: String,
    /// Personal data found in the request, by type.
    pub counts: TypeCounts,
    /// Where `route` sent the request (`provider/model`).
    pub routed_to: Option<String>,
    /// The type of the real value the egress guard found, when it stopped the call.
    pub blocked: Option<String>,
}

impl From<&PrivacyReport> for CallPrivacy {
    fn from(report: &PrivacyReport) -> Self {
        CallPrivacy {
            mode: report.mode.to_string(),
            counts: report.counts.clone(),
            routed_to: report.routed_to.clone(),
            blocked: None,
        }
    }
}

impl CallPrivacy {
    /// What the privacy gateway did to a call that ended with `result`, for its ledger row: its
    /// report, or `blocked` with the type the egress guard found. `None` when it did not handle it.
    pub fn of(result: &Result<crate::llm::LlmResponse, crate::llm::LlmError>) -> Option<Self> {
        match result {
            Ok(response) => response.privacy.as_ref().map(CallPrivacy::from),
            Err(crate::llm::LlmError::Leak { kind, .. }) => Some(CallPrivacy {
                mode: "blocked".into(),
                blocked: Some(kind.as_str().to_string()),
                ..CallPrivacy::default()
            }),
            Err(_) => None,
        }
    }
}

/// What the privacy gateway did over one task's calls, for `opc tasks --tree`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskPrivacy {
    /// Per type, the most any one of the task's requests carried (each request carries the whole
    /// history, so this is what the task's largest request had masked).
    pub masked: TypeCounts,
    /// Calls routed to the trusted model.
    pub routed: u32,
    /// Calls the egress guard stopped.
    pub blocked: u32,
}

/// Tokens and cost summed over a task tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Prompt tokens.
    pub tokens_in: u64,
    /// Generated tokens.
    pub tokens_out: u64,
    /// USD.
    pub cost_usd: f64,
    /// Calls whose usage the provider did not report: the sums above are then lower bounds.
    pub unknown_usage_calls: u32,
}

/// A token count as people should read it: `1234`, or `≥ 1234 (usage unknown for 2 calls)` when some
/// calls' usage is unknown, so the number is a lower bound.
pub fn tokens_text(tokens: u64, unknown_usage_calls: u32) -> String {
    match unknown_usage_calls {
        0 => tokens.to_string(),
        1 => format!("≥ {tokens} (usage unknown for 1 call)"),
        n => format!("≥ {tokens} (usage unknown for {n} calls)"),
    }
}

/// Insert one `llm_calls` row for `call` (its tool names already encoded), as `work` (`task` or
/// `memory`); its id. The one place that knows the row's columns, for task and memory calls alike.
fn insert_call(
    conn: &rusqlite::Connection,
    call: &CallRecord,
    tools: &str,
    work: &str,
) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO llm_calls (task_id, agent, model, tokens_in, tokens_out, cost_usd, duration_ms, \
         attempts, tool_calls, error, created_at, usage_unknown, privacy_mode, privacy_counts, \
         privacy_routed_to, privacy_blocked, work) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
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
            now_ms(),
            call.usage_unknown,
            call.privacy.as_ref().map(|p| p.mode.as_str()),
            call.privacy.as_ref().map(|p| p.counts.to_json()),
            call.privacy.as_ref().and_then(|p| p.routed_to.as_deref()),
            call.privacy.as_ref().and_then(|p| p.blocked.as_deref()),
            work,
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// The columns a [`CallRecord`] is read from, in [`call_from_row`]'s order.
const READ_COLUMNS: &str = "task_id, agent, model, tokens_in, tokens_out, cost_usd, duration_ms, attempts, \
     tool_calls, error, usage_unknown, privacy_mode, privacy_counts, privacy_routed_to, \
     privacy_blocked";

/// A ledger row read as [`READ_COLUMNS`] (the first 15 columns of `row`).
fn call_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<CallRecord> {
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
        tool_calls: serde_json::from_str(&tools).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                8,
                rusqlite::types::Type::Text,
                format!("tool calls: {e}").into(),
            )
        })?,
        error: row.get(9)?,
        usage_unknown: row.get(10)?,
        privacy: match row.get::<_, Option<String>>(11)? {
            None => None,
            Some(mode) => Some(CallPrivacy {
                mode,
                counts: TypeCounts::from_json(
                    &row.get::<_, Option<String>>(12)?.unwrap_or_default(),
                ),
                routed_to: row.get(13)?,
                blocked: row.get(14)?,
            }),
        },
    })
}

/// A call's tool calls as stored (JSON).
fn encode_tools(call: &CallRecord) -> Result<String, StoreError> {
    serde_json::to_string(&call.tool_calls).map_err(|e| StoreError::Encode {
        what: "tool calls",
        task: call.task_id,
        message: e.to_string(),
    })
}

/// A model turn as stored: its call's tool calls, and the session history when given. Encoded before
/// the transaction (by the async store, on the caller's thread), so nothing is written if either
/// cannot be.
pub(super) fn encode_turn(
    call: &CallRecord,
    messages: Option<&[Message]>,
) -> Result<(String, Option<String>), StoreError> {
    let tools = encode_tools(call)?;
    let history = messages
        .map(|m| encode_history(m, call.task_id))
        .transpose()?;
    Ok((tools, history))
}

impl Db {
    /// Record one LLM call and add it to its task's totals, in one transaction.
    #[cfg(test)]
    pub fn record_call(&self, call: &CallRecord) -> Result<(), StoreError> {
        self.record_turn(call, None, None).map(|_| ())
    }

    /// Record one LLM call, add it to its task's totals and save the session history that includes its
    /// answer — one transaction per model turn. With `completed`, the answer is final and the task is
    /// completed with it in the same transaction (it passes through RESULT_PROPAGATING); returns
    /// whether it was (a task that already ended, e.g. cancelled, keeps its ending).
    #[cfg(test)]
    pub fn record_turn(
        &self,
        call: &CallRecord,
        messages: Option<&[Message]>,
        completed: Option<&str>,
    ) -> Result<bool, StoreError> {
        let (tools, history) = encode_turn(call, messages)?;
        self.record_turn_encoded(call, &tools, history.as_deref(), completed)
    }

    /// Record one LLM call (see `Db::record_turn`) with the tool calls and the history already encoded (the async store encodes
    /// on the caller's thread, off the single writer's).
    pub(super) fn record_turn_encoded(
        &self,
        call: &CallRecord,
        tools: &str,
        history: Option<&str>,
        completed: Option<&str>,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("recording an LLM call"))?;
        insert_call(&tx, call, tools, "task").map_err(sql("recording an LLM call"))?;
        exec(
            &tx,
            "UPDATE tasks SET tokens_in = tokens_in + ?2, tokens_out = tokens_out + ?3, \
             cost_usd = cost_usd + ?4, llm_calls = llm_calls + 1, \
             unknown_usage_calls = unknown_usage_calls + ?5 WHERE id = ?1",
            params![
                call.task_id,
                call.tokens_in as i64,
                call.tokens_out as i64,
                call.cost_usd,
                u32::from(call.usage_unknown)
            ],
        )
        .map_err(sql("recording an LLM call"))?;
        if let Some(text) = history {
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
                    "UPDATE tasks SET state = ?4, output = ?2, updated_at = ?3, finished_at = ?3 \
                     WHERE id = ?1",
                    params![call.task_id, output, now, TaskState::Completed.as_str()],
                )
                .map_err(sql("ending a task"))?;
                super::recall::answered(&tx, call.task_id, output, now)?;
                super::memory_jobs::enqueue_extractions(&tx, call.task_id, now)?;
                done = true;
            }
        }
        tx.commit().map_err(sql("recording an LLM call"))?;
        if done {
            self.recall_appended();
        }
        Ok(done)
    }

    /// The LLM calls made for a task, in order (its own work: memory work about it is apart, see
    /// `Db::memory_calls`).
    pub fn calls(&self, task_id: TaskId) -> Result<Vec<CallRecord>, StoreError> {
        self.calls_of(task_id, "task")
    }

    /// The calls of `task_id` of one kind of work (`task` or `memory`), in order.
    fn calls_of(&self, task_id: TaskId, work: &str) -> Result<Vec<CallRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {READ_COLUMNS} FROM llm_calls WHERE task_id = ?1 AND work = ?2 ORDER BY id"
            ))
            .map_err(sql("reading the ledger"))?;
        let rows = stmt
            .query_map(rusqlite::params![task_id, work], call_from_row)
            .map_err(sql("reading the ledger"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading the ledger"))
    }

    /// Every task call (not memory work) of root `root_id`'s tree, in the order they were recorded,
    /// each with the time it ended: the request timeline's model segments.
    pub fn tree_calls(&self, root_id: TaskId) -> Result<Vec<TimedCall>, StoreError> {
        let conn = self.conn();
        let columns = READ_COLUMNS
            .split(", ")
            .map(|c| format!("c.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {columns}, c.created_at FROM llm_calls c JOIN tasks t ON t.id = c.task_id \
                 WHERE t.root_id = ?1 AND c.work = 'task' ORDER BY c.id"
            ))
            .map_err(sql("reading the ledger"))?;
        let rows = stmt
            .query_map([root_id], |row| {
                Ok(TimedCall {
                    call: call_from_row(row)?,
                    ended_at: row.get(15)?,
                })
            })
            .map_err(sql("reading the ledger"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading the ledger"))
    }

    /// What the privacy gateway did per task of root `root_id`'s tree (tasks it handled no call of are
    /// absent).
    pub fn privacy_by_task(
        &self,
        root_id: TaskId,
    ) -> Result<HashMap<TaskId, TaskPrivacy>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT c.task_id, c.privacy_counts, c.privacy_routed_to, c.privacy_blocked FROM llm_calls c \
                 JOIN tasks t ON t.id = c.task_id \
                 WHERE t.root_id = ?1 AND c.privacy_mode IS NOT NULL ORDER BY c.id",
            )
            .map_err(sql("reading the ledger"))?;
        let rows = stmt
            .query_map([root_id], |row| {
                Ok((
                    row.get::<_, TaskId>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<String>>(3)?,
                ))
            })
            .map_err(sql("reading the ledger"))?;
        let mut out: HashMap<TaskId, TaskPrivacy> = HashMap::new();
        for row in rows {
            let (task, counts, routed_to, blocked) = row.map_err(sql("reading the ledger"))?;
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
    /// some calls' usage is unknown; [`Db::totals`] says how many.
    pub fn tree_totals(&self, root_id: TaskId) -> Result<(u64, u64, f64), StoreError> {
        let t = self.totals(root_id)?;
        Ok((t.tokens_in, t.tokens_out, t.cost_usd))
    }

    /// Sum of tokens and cost over a tree, with the number of calls whose usage is unknown.
    pub fn totals(&self, root_id: TaskId) -> Result<Totals, StoreError> {
        row(
            &self.conn(),
            "SELECT COALESCE(SUM(tokens_in), 0), COALESCE(SUM(tokens_out), 0), \
             COALESCE(SUM(cost_usd), 0), COALESCE(SUM(unknown_usage_calls), 0) \
             FROM tasks WHERE root_id = ?1",
            [root_id],
            |r| {
                Ok(Totals {
                    tokens_in: r.get::<_, i64>(0)? as u64,
                    tokens_out: r.get::<_, i64>(1)? as u64,
                    cost_usd: r.get(2)?,
                    unknown_usage_calls: r.get(3)?,
                })
            },
        )
        .map_err(sql("summing a task tree"))
    }
}

/// Memory work's calls (fact extraction, consolidation): rows of the same table with
/// `work = 'memory'`, recorded against the task they are about but NOT added to its totals (the
/// user's request did not spend them).
impl Db {
    /// Record one memory-work LLM call (`work = 'memory'`) against its task, WITHOUT adding it to the
    /// task's totals. Returns the ledger row's id (the facts' provenance names it).
    pub fn record_memory_call(&self, call: &CallRecord) -> Result<i64, StoreError> {
        let tools = encode_tools(call)?;
        let conn = self.conn();
        insert_call(&conn, call, &tools, "memory").map_err(sql("recording a memory-work call"))
    }

    /// Tokens (in + out) of `agent`'s memory work recorded since `since_ms`.
    pub fn memory_tokens_since(&self, agent: &str, since_ms: i64) -> Result<u64, StoreError> {
        row(
            &self.conn(),
            "SELECT COALESCE(SUM(tokens_in + tokens_out), 0) FROM llm_calls \
             WHERE work = 'memory' AND agent = ?1 AND created_at >= ?2",
            params![agent, since_ms],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n.max(0) as u64)
        .map_err(sql("summing memory work"))
    }

    /// The memory-work calls of task `task_id`, in order.
    pub fn memory_calls(&self, task_id: TaskId) -> Result<Vec<(i64, CallRecord)>, StoreError> {
        let ids: Vec<i64> = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id FROM llm_calls WHERE task_id = ?1 AND work = 'memory' ORDER BY id",
                )
                .map_err(sql("reading the ledger"))?;
            let rows = stmt
                .query_map([task_id], |r| r.get(0))
                .map_err(sql("reading the ledger"))?;
            rows.collect::<Result<_, _>>()
                .map_err(sql("reading the ledger"))?
        };
        let calls = self.calls_of(task_id, "memory")?;
        Ok(ids.into_iter().zip(calls).collect())
    }
}

/// Spend of one agent on one model in one conversation (the admin console's costs page groups it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spend {
    /// The agent.
    pub agent: String,
    /// `provider/model`.
    pub model: String,
    /// The conversation.
    pub conversation: String,
    /// `task` (the conversation's own calls) or `memory` (memory work about it: extraction,
    /// consolidation), shown apart.
    pub work: String,
    /// LLM calls.
    pub calls: u64,
    /// Prompt tokens.
    pub tokens_in: u64,
    /// Generated tokens.
    pub tokens_out: u64,
    /// USD.
    pub cost_usd: f64,
}

/// What the privacy gateway did on one day (UTC): counts by type, never values.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PrivacyDay {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// LLM calls the gateway handled.
    pub calls: u64,
    /// Values masked, by type, summed over calls (a value sent in several calls counts in each).
    pub masked: std::collections::BTreeMap<String, u64>,
    /// Calls routed to a trusted model instead of masked.
    pub routed: u64,
    /// Calls blocked.
    pub blocked: u64,
}

impl Db {
    /// What the privacy gateway did per UTC day since `since_ms`, oldest first.
    pub fn privacy_by_day(&self, since_ms: i64) -> Result<Vec<PrivacyDay>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT created_at, privacy_counts, privacy_routed_to, privacy_blocked FROM llm_calls \
                 WHERE privacy_mode IS NOT NULL AND created_at >= ?1 ORDER BY id",
            )
            .map_err(sql("reading the ledger"))?;
        let rows = stmt
            .query_map([since_ms], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<String>>(3)?,
                ))
            })
            .map_err(sql("reading the ledger"))?;
        let mut days: std::collections::BTreeMap<i64, PrivacyDay> = Default::default();
        for row in rows {
            let (at, counts, routed_to, blocked) = row.map_err(sql("reading the ledger"))?;
            let day = at.div_euclid(86_400_000);
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
    pub fn spend_since(&self, since_ms: i64) -> Result<Vec<Spend>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT c.agent, c.model, t.conversation_id, COUNT(*), SUM(c.tokens_in), \
                 SUM(c.tokens_out), SUM(c.cost_usd), c.work \
                 FROM llm_calls c JOIN tasks t ON t.id = c.task_id WHERE c.created_at >= ?1 \
                 GROUP BY c.agent, c.model, t.conversation_id, c.work ORDER BY SUM(c.cost_usd) DESC",
            )
            .map_err(sql("summing spend"))?;
        let rows = stmt
            .query_map([since_ms], |r| {
                Ok(Spend {
                    agent: r.get(0)?,
                    model: r.get(1)?,
                    conversation: r.get(2)?,
                    work: r.get(7)?,
                    calls: r.get::<_, i64>(3)? as u64,
                    tokens_in: r.get::<_, i64>(4)? as u64,
                    tokens_out: r.get::<_, i64>(5)? as u64,
                    cost_usd: r.get(6)?,
                })
            })
            .map_err(sql("summing spend"))?;
        rows.collect::<Result<_, _>>().map_err(sql("summing spend"))
    }
}

/// Remote embedding calls (issue 39): a table of their own (`embedding_calls`), since they belong
/// to no task; [`Db::embedding_spend_since`] gives them as [`Spend`] rows of work `embedding`.
impl Db {
    /// Record one remote embedding call.
    pub fn record_embedding_call(
        &self,
        call: &crate::llm::embed::EmbedCall,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO embedding_calls (model, texts, tokens, cost_usd, usage_unknown, \
                 duration_ms, attempts, error, privacy_counts, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    call.model,
                    i64::from(call.texts),
                    call.tokens as i64,
                    call.cost_usd,
                    call.usage_unknown,
                    call.duration_ms as i64,
                    call.attempts,
                    call.error,
                    call.masked.as_ref().map(|m| m.to_json()),
                    now_ms(),
                ],
            )
            .map(|_| ())
            .map_err(sql("recording an embedding call"))
    }

    /// Embedding spend since `since_ms`, by model, most expensive first.
    pub fn embedding_spend_since(&self, since_ms: i64) -> Result<Vec<Spend>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT model, COUNT(*), SUM(tokens), SUM(cost_usd) FROM embedding_calls \
                 WHERE created_at >= ?1 GROUP BY model ORDER BY SUM(cost_usd) DESC, model",
            )
            .map_err(sql("summing embedding spend"))?;
        let rows = stmt
            .query_map([since_ms], |r| {
                Ok(Spend {
                    agent: String::new(),
                    model: r.get(0)?,
                    conversation: String::new(),
                    work: "embedding".into(),
                    calls: r.get::<_, i64>(1)? as u64,
                    tokens_in: r.get::<_, i64>(2)? as u64,
                    tokens_out: 0,
                    cost_usd: r.get(3)?,
                })
            })
            .map_err(sql("summing embedding spend"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("summing embedding spend"))
    }
}

/// The latest LLM call to one `provider/model`, for the console's provider state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatestCall {
    /// `provider/model`.
    pub model: String,
    /// The error, for a failed call.
    pub error: Option<String>,
    /// When it was recorded (Unix ms).
    pub at: i64,
}

impl Db {
    /// The latest call per `provider/model` among the last `window` calls: what the console shows as
    /// each provider's last outcome. Bounded by `window`, so a long ledger costs the same to read.
    pub fn latest_calls(&self, window: u32) -> Result<Vec<LatestCall>, StoreError> {
        let conn = self.conn();
        // SQLite takes the bare columns of a MAX() aggregate from the row holding the maximum.
        let mut stmt = conn
            .prepare_cached(
                "SELECT model, error, created_at, MAX(id) FROM \
                 (SELECT id, model, error, created_at FROM llm_calls ORDER BY id DESC LIMIT ?1) \
                 GROUP BY model ORDER BY MAX(id) DESC",
            )
            .map_err(sql("reading the latest calls"))?;
        let rows = stmt
            .query_map([window], |r| {
                Ok(LatestCall {
                    model: r.get(0)?,
                    error: r.get(1)?,
                    at: r.get(2)?,
                })
            })
            .map_err(sql("reading the latest calls"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading the latest calls"))
    }
}

/// `YYYY-MM-DD` of day `day` (days since the Unix epoch, UTC; a day before the epoch is its first,
/// one past what a date can say is the last date there is).
pub(super) fn day_text(day: i64) -> String {
    let at = jiff::Timestamp::from_second(day.max(0).saturating_mul(86_400))
        .unwrap_or(jiff::Timestamp::MAX);
    at.to_zoned(jiff::tz::TimeZone::UTC).date().to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::testing::root;

    fn call(task: TaskId, tokens: u64, usage_unknown: bool) -> CallRecord {
        CallRecord {
            task_id: task,
            agent: "ceo".into(),
            model: "p/m".into(),
            tokens_in: tokens,
            tokens_out: tokens,
            cost_usd: if usage_unknown { 0.0 } else { 0.5 },
            usage_unknown,
            duration_ms: 1,
            attempts: 1,
            tool_calls: vec!["delegate".into()],
            error: None,
            privacy: None,
        }
    }

    #[test]
    fn calls_without_usage_are_counted_as_unknown_not_as_zero() {
        let store = Db::in_memory().unwrap();
        let id = root(&store, "c");
        store.record_call(&call(id, 10, false)).unwrap();
        store.record_call(&call(id, 0, true)).unwrap();
        let calls = store.calls(id).unwrap();
        assert_eq!(
            calls.iter().map(|c| c.usage_unknown).collect::<Vec<_>>(),
            [false, true]
        );
        assert_eq!(calls[0].tool_calls, ["delegate"]);
        let task = store.task(id).unwrap();
        assert_eq!((task.llm_calls, task.unknown_usage_calls), (2, 1));
        let totals = store.totals(id).unwrap();
        assert_eq!(
            totals,
            Totals {
                tokens_in: 10,
                tokens_out: 10,
                cost_usd: 0.5,
                unknown_usage_calls: 1
            }
        );
        assert_eq!(
            tokens_text(
                totals.tokens_in + totals.tokens_out,
                totals.unknown_usage_calls
            ),
            "≥ 20 (usage unknown for 1 call)"
        );
        assert_eq!(tokens_text(20, 0), "20");
        assert_eq!(tokens_text(20, 3), "≥ 20 (usage unknown for 3 calls)");
    }

    #[test]
    fn memory_calls_are_in_the_ledger_but_not_in_the_task_totals() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let call = CallRecord {
            task_id: r,
            agent: "ceo".into(),
            model: "p/fast".into(),
            tokens_in: 100,
            tokens_out: 20,
            cost_usd: 0.25,
            usage_unknown: false,
            duration_ms: 3,
            attempts: 1,
            tool_calls: vec!["record_facts".into()],
            error: None,
            privacy: None,
        };
        let id = store.record_memory_call(&call).unwrap();
        assert!(id > 0);
        let task = store.task(r).unwrap();
        assert_eq!((task.tokens_in, task.llm_calls), (0, 0));
        assert_eq!(store.totals(r).unwrap().tokens_in, 0);
        assert!(store.calls(r).unwrap().is_empty(), "task calls only");
        let memory = store.memory_calls(r).unwrap();
        assert_eq!(memory.len(), 1);
        assert_eq!(memory[0].0, id);
        assert_eq!(memory[0].1.tool_calls, ["record_facts"]);
        assert_eq!(store.memory_tokens_since("ceo", 0).unwrap(), 120);
        assert_eq!(store.memory_tokens_since("vp", 0).unwrap(), 0);
        assert_eq!(
            store.memory_tokens_since("ceo", now_ms() + 60_000).unwrap(),
            0
        );
    }

    #[test]
    fn spend_is_grouped_by_agent_model_and_conversation() {
        let store = Db::in_memory().unwrap();
        let task = root(&store, "c");
        store.record_call(&call(task, 10, false)).unwrap();
        store.record_call(&call(task, 5, false)).unwrap();
        let spend = store.spend_since(0).unwrap();
        assert_eq!(spend.len(), 1);
        assert_eq!((spend[0].calls, spend[0].conversation.as_str()), (2, "c"));
        assert!(store.spend_since(now_ms() + 60_000).unwrap().is_empty());
    }

    #[test]
    fn embedding_calls_are_kept_apart_and_summed_by_model() {
        let store = Db::in_memory().unwrap();
        let call = |model: &str, tokens: u64, cost_usd: f64| crate::llm::embed::EmbedCall {
            model: model.into(),
            texts: 4,
            tokens,
            cost_usd,
            usage_unknown: false,
            duration_ms: 3,
            attempts: 1,
            error: None,
            masked: None,
        };
        store
            .record_embedding_call(&call("oai/small", 40, 0.5))
            .unwrap();
        store
            .record_embedding_call(&call("oai/small", 10, 0.25))
            .unwrap();
        store
            .record_embedding_call(&call("oai/large", 5, 1.0))
            .unwrap();
        let spend = store.embedding_spend_since(0).unwrap();
        let rows: Vec<_> = spend
            .iter()
            .map(|s| (s.model.as_str(), s.work.as_str(), s.calls, s.tokens_in))
            .collect();
        assert_eq!(
            rows,
            [
                ("oai/large", "embedding", 1, 5),
                ("oai/small", "embedding", 2, 50)
            ]
        );
        // Not a task's spend.
        assert!(store.spend_since(0).unwrap().is_empty());
        assert!(
            store
                .embedding_spend_since(now_ms() + 60_000)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_latest_call_per_model_is_found_within_the_window() {
        let store = Db::in_memory().unwrap();
        let task = root(&store, "c");
        let mut failed = call(task, 0, false);
        failed.error = Some("p returned HTTP 401: bad key".into());
        store.record_call(&call(task, 1, false)).unwrap();
        store.record_call(&failed).unwrap();
        let mut other = call(task, 1, false);
        other.model = "q/m".into();
        store.record_call(&other).unwrap();
        let latest = store.latest_calls(100).unwrap();
        assert_eq!(
            latest
                .iter()
                .map(|c| (c.model.as_str(), c.error.as_deref()))
                .collect::<Vec<_>>(),
            [("q/m", None), ("p/m", Some("p returned HTTP 401: bad key"))]
        );
        // Only the last call is looked at: `p/m` is outside a window of one.
        let latest = store.latest_calls(1).unwrap();
        assert_eq!(latest.len(), 1);
        assert_eq!(latest[0].model, "q/m");
    }

    #[test]
    fn days_are_utc_dates() {
        assert_eq!(day_text(0), "1970-01-01");
        assert_eq!(day_text(20_000), "2024-10-04");
        assert_eq!(day_text(-3), "1970-01-01");
    }
}
