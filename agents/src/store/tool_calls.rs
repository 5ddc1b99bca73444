//! The tool-call ledger (one row per tool call: tool, duration, outcome, a Bash command's exit
//! code) and the Bash commands approved "for this conversation".
//!
//! What the ledger stores about a call is what the tool noted as safe (the tools' `CallNote`; the store sits below the tools and names no tool type):
//! never a tool's input. For Bash that is the allowed prefix each part of the command matched, or
//! its program's name alone — no arguments — because a command may carry personal data that the
//! ledger, unlike the task's history, is not meant to hold.
//!
//! A remembered approval is keyed by the exact command text, the agent and the conversation: the same
//! command from another agent, or in another conversation, asks again. The command is stored as it
//! ran (the approval card showed it too); `opc privacy erase` rewrites it with every other copy, after
//! which it simply no longer matches and the next run asks again.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Db, StoreError, TaskId, exec, now_ms, sql};

/// How a tool call ended, for the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolOutcome {
    /// The tool's result is not an error.
    Ok,
    /// A tool error (`is_error`): invalid arguments, a refusal, a non-zero exit, a rejection.
    Error,
}

impl ToolOutcome {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Error => "error",
        }
    }

    pub(super) fn parse(text: &str) -> ToolOutcome {
        if text == "ok" {
            ToolOutcome::Ok
        } else {
            ToolOutcome::Error
        }
    }
}

/// One tool call for the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolCallRecord {
    /// The task that called it.
    pub task_id: TaskId,
    /// The agent.
    pub agent: String,
    /// The tool's wire name.
    pub tool: String,
    /// The model's id of the call.
    pub tool_use_id: String,
    /// How it ended.
    pub outcome: ToolOutcome,
    /// A command's exit code, when it ran to an exit.
    pub exit_code: Option<i32>,
    /// A short description that holds no personal data (Bash: the command without its arguments).
    pub detail: Option<String>,
    /// Wall time of the call (an approval's wait and a delegation's subtree included).
    pub duration_ms: u64,
    /// When it finished, ms since epoch (set by the store).
    pub created_at: i64,
}

impl Db {
    /// Record one tool call.
    pub fn record_tool_call(&self, call: &ToolCallRecord) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "INSERT INTO tool_calls (task_id, agent, tool, tool_use_id, outcome, exit_code, detail, \
             duration_ms, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                call.task_id,
                call.agent,
                call.tool,
                call.tool_use_id,
                call.outcome.as_str(),
                call.exit_code,
                call.detail,
                call.duration_ms as i64,
                now_ms()
            ],
        )
        .map_err(sql("recording a tool call"))?;
        Ok(())
    }

    /// Every tool call of a tree's tasks, in the order they finished.
    pub fn tool_calls(&self, root_id: TaskId) -> Result<Vec<ToolCallRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT c.task_id, c.agent, c.tool, c.tool_use_id, c.outcome, c.exit_code, c.detail, \
                 c.duration_ms, c.created_at FROM tool_calls c JOIN tasks t ON t.id = c.task_id \
                 WHERE t.root_id = ?1 ORDER BY c.id",
            )
            .map_err(sql("reading tool calls"))?;
        let rows = stmt
            .query_map([root_id], |row| {
                Ok(ToolCallRecord {
                    task_id: row.get(0)?,
                    agent: row.get(1)?,
                    tool: row.get(2)?,
                    tool_use_id: row.get(3)?,
                    outcome: ToolOutcome::parse(&row.get::<_, String>(4)?),
                    exit_code: row.get(5)?,
                    detail: row.get(6)?,
                    duration_ms: row.get::<_, i64>(7)?.max(0) as u64,
                    created_at: row.get(8)?,
                })
            })
            .map_err(sql("reading tool calls"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading tool calls"))
    }

    /// Whether `agent` had this exact `command` approved for the rest of `conversation_id`.
    pub fn command_approved(
        &self,
        conversation_id: &str,
        agent: &str,
        command: &str,
    ) -> Result<bool, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT 1 FROM approved_commands \
                 WHERE conversation_id = ?1 AND agent = ?2 AND command = ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![conversation_id, agent, command], |_| Ok(()))
                    .optional()
            })
            .map(|found| found.is_some())
            .map_err(sql("reading approved commands"))
    }

    /// Remember that approval `approval` approved `command` for `agent` for the rest of
    /// `conversation_id` (again is a no-op: the first approval stays on record).
    pub fn approve_command(
        &self,
        conversation_id: &str,
        agent: &str,
        command: &str,
        approval: i64,
    ) -> Result<(), StoreError> {
        exec(
            &self.conn(),
            "INSERT OR IGNORE INTO approved_commands \
             (conversation_id, agent, command, approval_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![conversation_id, agent, command, approval, now_ms()],
        )
        .map_err(sql("remembering an approved command"))?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::{child, root};
    use super::*;

    fn call(task: TaskId, tool: &str, outcome: ToolOutcome, exit: Option<i32>) -> ToolCallRecord {
        ToolCallRecord {
            task_id: task,
            agent: "a".into(),
            tool: tool.into(),
            tool_use_id: format!("t-{tool}"),
            outcome,
            exit_code: exit,
            detail: (tool == "Bash").then(|| "cargo test …".to_string()),
            duration_ms: 42,
            created_at: 0,
        }
    }

    #[test]
    fn tool_calls_are_read_back_per_tree_in_order() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let c = child(&store, r, "d1");
        let other = root(&store, "d");
        store
            .record_tool_call(&call(r, "delegate", ToolOutcome::Ok, None))
            .unwrap();
        store
            .record_tool_call(&call(c, "Bash", ToolOutcome::Error, Some(101)))
            .unwrap();
        store
            .record_tool_call(&call(other, "Bash", ToolOutcome::Ok, Some(0)))
            .unwrap();
        let calls = store.tool_calls(r).unwrap();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(
            (calls[0].task_id, calls[0].tool.as_str(), calls[0].outcome),
            (r, "delegate", ToolOutcome::Ok)
        );
        assert_eq!(
            (
                calls[1].task_id,
                calls[1].exit_code,
                calls[1].outcome,
                calls[1].detail.as_deref(),
                calls[1].duration_ms
            ),
            (c, Some(101), ToolOutcome::Error, Some("cargo test …"), 42)
        );
        assert!(calls[1].created_at > 0);
        assert_eq!(store.tool_calls(other).unwrap().len(), 1);
    }

    #[test]
    fn an_approved_command_is_remembered_per_conversation_agent_and_exact_text() {
        let store = Db::in_memory().unwrap();
        assert!(!store.command_approved("c", "dev", "make x").unwrap());
        store.approve_command("c", "dev", "make x", 7).unwrap();
        // Again is harmless.
        store.approve_command("c", "dev", "make x", 8).unwrap();
        assert!(store.command_approved("c", "dev", "make x").unwrap());
        assert!(!store.command_approved("d", "dev", "make x").unwrap());
        assert!(!store.command_approved("c", "ops", "make x").unwrap());
        assert!(!store.command_approved("c", "dev", "make x ").unwrap());
        assert!(!store.command_approved("c", "dev", "make").unwrap());
        let first: i64 = store
            .conn()
            .query_row(
                "SELECT approval_id FROM approved_commands WHERE command = 'make x'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(first, 7);
    }
}
