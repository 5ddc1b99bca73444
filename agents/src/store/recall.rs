//! What the engine writes to recall memory: each task's instructions and each task's answer, each
//! approval asked for and how it was decided, and each escalation, appended
//! to `recall_messages` (memory's table, in the same SQLite file) **inside the transaction that records
//! the turn**. So a turn and its recall row are committed together or not at all; the recall indexer
//! (memory's background thread) reads new rows by sequence number and catches up after a crash.
//!
//! Provenance: the namespace is the agent whose task it is (the ACL filters on it: an agent searches
//! its own namespace, a superior every descendant's); the author is the delegating agent, or for a
//! person's message the gateway's `platform:user id` ([`USER_AUTHOR`] when none was given, as from
//! `opc chat`), the agent for its answer, its
//! approval request and its escalation, and the decider (a platform user id, or [`SYSTEM_AUTHOR`] for
//! an expiry or a cancellation) for an approval's decision;
//! the thread is the conversation, so recall's neighbour boost stays within one conversation.
//!
//! Hygiene: a row holds what was written, never the recalled memory put before a task: the session
//! puts it in the request only, and a copy of it at the start of a text is cut out here.

use opc_memory::recall::message::without_recall;
use opc_memory::recall::{NewMessage, append_in};
use rusqlite::{Connection, OptionalExtension};

use super::{StoreError, TaskId, sql};

/// The author of a person's message.
pub const USER_AUTHOR: &str = "user";

/// Record task `id`'s instructions: `text`, given to `agent` in `conversation` by `author`.
pub(super) fn given(
    tx: &Connection,
    id: TaskId,
    agent: &str,
    conversation: &str,
    author: &str,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
    append(tx, id, agent, conversation, author, text, now)
}

/// Record task `id`'s result (`text`, written by its agent).
pub(super) fn answered(
    tx: &Connection,
    id: TaskId,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(tx, id)?;
    append(tx, id, &agent, &conversation, &agent, text, now)
}

/// The author of what the system decides on nobody's behalf (an approval that expired or was cancelled).
pub const SYSTEM_AUTHOR: &str = "opc";

/// Record that task `id`'s agent asked a human to approve `summary`.
pub(super) fn approval_requested(
    tx: &Connection,
    id: TaskId,
    summary: &str,
    options: &[String],
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(tx, id)?;
    let text = format!(
        "Asked for approval: {summary} (options: {})",
        options.join(", ")
    );
    append(tx, id, &agent, &conversation, &agent, &text, now)
}

/// Record an approval's decision: `decision` on `summary` (task `id`'s request), by `by` (a person, or
/// why the system decided), written by `author` (that person, or [`SYSTEM_AUTHOR`]).
pub(super) fn approval_decided(
    tx: &Connection,
    id: TaskId,
    summary: &str,
    decision: &str,
    by: &str,
    author: &str,
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(tx, id)?;
    let text = format!("Approval decided: {decision}, by {by}: {summary}");
    append(tx, id, &agent, &conversation, author, &text, now)
}

/// Record task `id`'s escalation (`json`, as stored in `tasks.escalation`), rendered as people see it.
pub(super) fn escalated(
    tx: &Connection,
    id: TaskId,
    json: &str,
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(tx, id)?;
    let text = match serde_json::from_str::<crate::ending::Escalation>(json) {
        Ok(e) => crate::ending::render_escalation(&agent, &e),
        Err(_) => format!("Escalated by {agent}: {json}"),
    };
    append(tx, id, &agent, &conversation, &agent, &text, now)
}

/// The agent and conversation of task `id`.
fn task_of(tx: &Connection, id: TaskId) -> Result<(String, String), StoreError> {
    tx.query_row(
        "SELECT agent, conversation_id FROM tasks WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(sql("recording in recall memory"))?
    .ok_or(StoreError::NoTask(id))
}

/// The agent of task `id` (the author of its children's instructions).
pub(super) fn agent_of(tx: &Connection, id: TaskId) -> Result<String, StoreError> {
    tx.query_row("SELECT agent FROM tasks WHERE id = ?1", [id], |r| r.get(0))
        .optional()
        .map_err(sql("recording a task in recall memory"))?
        .ok_or(StoreError::NoTask(id))
}

fn append(
    tx: &Connection,
    id: TaskId,
    agent: &str,
    conversation: &str,
    author: &str,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
    // What the Select step put before a task is memory already: a copy of it (a delegation that
    // quoted its manager's request) is not stored again (`without_recall`).
    let text = without_recall(text);
    if text.trim().is_empty() {
        return Ok(());
    }
    append_in(
        tx,
        &NewMessage {
            namespace: agent.to_string(),
            author: author.to_string(),
            conversation: conversation.to_string(),
            task: Some(id.to_string()),
            thread: Some(conversation.to_string()),
            source_id: None,
            time_ms: now,
            text: text.to_string(),
        },
    )
    .map_err(sql("appending to recall memory"))?;
    Ok(())
}
