//! The ledger: one row per LLM call (tokens, cost, time, attempts, tools called), added to its task's
//! running totals in the same transaction.

use rusqlite::{TransactionBehavior, params};
use serde::Serialize;

use super::tasks::encode_history;
use super::{Store, StoreError, TaskId, TaskState, exec, now_ms, row, sql};
use crate::llm::Message;

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

impl Store {
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
        // Encoded before the transaction: nothing is written if either cannot be.
        let tools = serde_json::to_string(&call.tool_calls).map_err(|e| StoreError::Encode {
            what: "tool calls",
            task: call.task_id,
            message: e.to_string(),
        })?;
        let history = messages
            .map(|m| encode_history(m, call.task_id))
            .transpose()?;
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
                    tool_calls: serde_json::from_str(&tools).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(
                            8,
                            rusqlite::types::Type::Text,
                            format!("tool calls: {e}").into(),
                        )
                    })?,
                    error: row.get(9)?,
                })
            })
            .map_err(sql("reading the ledger"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading the ledger"))
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
}
