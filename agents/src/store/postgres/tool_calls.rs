//! The tool-call ledger and the Bash commands approved "for this conversation", on PostgreSQL: the
//! SQL of `store/tool_calls.rs`, in PostgreSQL's dialect. What the ledger holds (never a tool's
//! input) is decided above the store, as on SQLite.
//!
//! Writes lock only the rows they insert: a tool call is a new row; a remembered approval is
//! `INSERT … ON CONFLICT DO NOTHING` on its key (conversation, agent, command), so when two nodes
//! remember the same command the first approval stays on record and the second changes nothing.

use deadpool_postgres::GenericClient;

use super::super::{DbFailure, DbFault, StoreError, TaskId, ToolCallRecord, ToolOutcome, now_ms};
use super::sql::{Tx, exec, get, i64_of, opt, rows, u64_of};

/// Record one tool call.
pub(super) async fn record_tool_call(t: &Tx<'_>, call: &ToolCallRecord) -> Result<(), StoreError> {
    let exit_code = call.exit_code.map(i64::from);
    exec(
        t.c(),
        "recording a tool call",
        "INSERT INTO tool_calls (task_id, agent, tool, tool_use_id, outcome, exit_code, detail, \
         duration_ms, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &call.task_id,
            &call.agent,
            &call.tool,
            &call.tool_use_id,
            &call.outcome.as_str(),
            &exit_code,
            &call.detail,
            &i64_of(call.duration_ms),
            &now_ms(),
        ],
    )
    .await?;
    Ok(())
}

/// Every tool call of a tree's tasks, in the order they were recorded.
pub(super) async fn tool_calls(
    c: &impl GenericClient,
    root_id: TaskId,
) -> Result<Vec<ToolCallRecord>, StoreError> {
    const DOING: &str = "reading tool calls";
    rows(
        c,
        DOING,
        "SELECT c.task_id, c.agent, c.tool, c.tool_use_id, c.outcome, c.exit_code, c.detail, \
         c.duration_ms, c.created_at FROM tool_calls c JOIN tasks t ON t.id = c.task_id \
         WHERE t.root_id = $1 ORDER BY c.id",
        &[&root_id],
    )
    .await?
    .iter()
    .map(|r| {
        let outcome: String = get(r, 4, DOING)?;
        // Written from an `i32`; a wider value is a corrupt row, not a panic.
        let exit_code = get::<Option<i64>>(r, 5, DOING)?
            .map(|code| {
                i32::try_from(code).map_err(|_| StoreError::Database {
                    doing: DOING,
                    source: DbFailure {
                        fault: DbFault::Corrupt,
                        message: format!("exit code {code} does not fit 32 bits"),
                    },
                })
            })
            .transpose()?;
        Ok(ToolCallRecord {
            task_id: get(r, 0, DOING)?,
            agent: get(r, 1, DOING)?,
            tool: get(r, 2, DOING)?,
            tool_use_id: get(r, 3, DOING)?,
            outcome: ToolOutcome::parse(&outcome),
            exit_code,
            detail: get(r, 6, DOING)?,
            duration_ms: u64_of(get(r, 7, DOING)?),
            created_at: get(r, 8, DOING)?,
        })
    })
    .collect()
}

/// Whether `agent` had this exact `command` approved for the rest of `conversation_id`.
pub(super) async fn command_approved(
    c: &impl GenericClient,
    conversation_id: &str,
    agent: &str,
    command: &str,
) -> Result<bool, StoreError> {
    Ok(opt(
        c,
        "reading approved commands",
        "SELECT 1 FROM approved_commands WHERE conversation_id = $1 AND agent = $2 AND command = $3",
        &[&conversation_id, &agent, &command],
    )
    .await?
    .is_some())
}

/// Remember that approval `approval` approved `command` for `agent` for the rest of
/// `conversation_id` (again is a no-op: the first approval stays on record).
pub(super) async fn approve_command(
    t: &Tx<'_>,
    conversation_id: &str,
    agent: &str,
    command: &str,
    approval: i64,
) -> Result<(), StoreError> {
    exec(
        t.c(),
        "remembering an approved command",
        "INSERT INTO approved_commands (conversation_id, agent, command, approval_id, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (conversation_id, agent, command) DO NOTHING",
        &[&conversation_id, &agent, &command, &approval, &now_ms()],
    )
    .await?;
    Ok(())
}
