//! What the engine writes to recall memory: each task's instructions and each task's answer, appended
//! to `recall_messages` (memory's table, in the same SQLite file) **inside the transaction that records
//! the turn**. So a turn and its recall row are committed together or not at all; the recall indexer
//! (memory's background thread) reads new rows by sequence number and catches up after a crash.
//!
//! Provenance: the namespace is the agent whose task it is (the ACL filters on it: an agent searches
//! its own namespace, a superior every descendant's); the author is the delegating agent or `user`
//! for a person's message (the store does not see platform user ids), or the agent for its answer;
//! the thread is the conversation, so recall's neighbour boost stays within one conversation.

use opc_memory::recall::{NewMessage, append_in};
use rusqlite::{OptionalExtension, Transaction};

use super::{StoreError, TaskId, sql};

/// The author of a person's message.
pub const USER_AUTHOR: &str = "user";

/// Record task `id`'s instructions: `text`, given to `agent` in `conversation` by `author`.
pub(super) fn given(
    tx: &Transaction<'_>,
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
    tx: &Transaction<'_>,
    id: TaskId,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
    let found: Option<(String, String)> = tx
        .query_row(
            "SELECT agent, conversation_id FROM tasks WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql("recording an answer in recall memory"))?;
    let Some((agent, conversation)) = found else {
        return Err(StoreError::NoTask(id));
    };
    append(tx, id, &agent, &conversation, &agent, text, now)
}

/// The agent of task `id` (the author of its children's instructions).
pub(super) fn agent_of(tx: &Transaction<'_>, id: TaskId) -> Result<String, StoreError> {
    tx.query_row("SELECT agent FROM tasks WHERE id = ?1", [id], |r| r.get(0))
        .optional()
        .map_err(sql("recording a task in recall memory"))?
        .ok_or(StoreError::NoTask(id))
}

fn append(
    tx: &Transaction<'_>,
    id: TaskId,
    agent: &str,
    conversation: &str,
    author: &str,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
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
