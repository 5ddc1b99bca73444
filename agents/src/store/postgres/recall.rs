//! What the engine writes to recall memory on PostgreSQL: the same rows as the SQLite store's
//! (`store/recall.rs`: instructions, answers, approvals asked and decided, escalations), appended to
//! memory's `recall_messages` **inside the transaction that records the change**, so a turn and its
//! recall row commit together or not at all. The row's `xid` column (its transaction) is filled by
//! the table's default; readers tail by it (see `opc_memory::schema::postgres`). A task's
//! instructions and a completing turn's answer are written by the statement that makes the change
//! (`tasks.rs`, `ledger.rs`), with [`COLUMNS`] and [`hash_of`] from here.

use opc_memory::recall::NewMessage;
use opc_memory::recall::message::without_recall;
use tokio_postgres::types::ToSql;

use super::super::recall::USER_AUTHOR;
use super::super::{StoreError, TaskId};
use super::sql::{Tx, exec, get, opt};

/// The author of a person's message (re-exported for the concern files).
pub(super) const USER: &str = USER_AUTHOR;

/// The columns of a recall row the engine writes (all but `seq` and `xid`, the table's own), in the
/// order of [`Entry::params`].
pub(super) const COLUMNS: &str =
    "namespace, author, conversation, task, thread, source_id, time_ms, content_hash, text";

/// The insert of one [`Entry`].
const INSERT: &str = "INSERT INTO recall_messages (namespace, author, conversation, task, thread, \
     source_id, time_ms, content_hash, text) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// The content hash of a recall row of `text` (memory's, for the statements that write the row's
/// other columns themselves).
pub(super) fn hash_of(text: &str) -> String {
    NewMessage {
        namespace: String::new(),
        author: String::new(),
        conversation: String::new(),
        task: None,
        thread: None,
        source_id: None,
        time_ms: 0,
        text: text.to_string(),
    }
    .content_hash()
}

/// One recall row: the row [`append`] writes.
pub(super) struct Entry {
    msg: NewMessage,
    hash: String,
}

impl Entry {
    /// Task `id`'s row: `text`, in `agent`'s namespace and `conversation`, written by `author`;
    /// `None` for a blank text (nothing to recall, as [`append`] skips it).
    pub(super) fn new(
        id: TaskId,
        agent: &str,
        conversation: &str,
        author: &str,
        text: &str,
        now: i64,
    ) -> Option<Entry> {
        // As on SQLite: a copy of the recall preamble is not stored again (`without_recall`).
        let text = without_recall(text);
        if text.trim().is_empty() {
            return None;
        }
        let msg = NewMessage {
            namespace: agent.to_string(),
            author: author.to_string(),
            conversation: conversation.to_string(),
            task: Some(id.to_string()),
            thread: Some(conversation.to_string()),
            source_id: None,
            time_ms: now,
            text: text.to_string(),
        };
        let hash = msg.content_hash();
        Some(Entry { msg, hash })
    }

    /// The parameters of its insert, in [`COLUMNS`]' order.
    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 9] {
        let m = &self.msg;
        [
            &m.namespace,
            &m.author,
            &m.conversation,
            &m.task,
            &m.thread,
            &m.source_id,
            &m.time_ms,
            &self.hash,
            &m.text,
        ]
    }
}

/// Record task `id`'s result (`text`, written by its agent).
pub(super) async fn answered(
    t: &Tx<'_>,
    id: TaskId,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(t, id).await?;
    append(t, id, &agent, &conversation, &agent, text, now).await
}

/// Record that task `id`'s agent asked a human to approve `summary`.
pub(super) async fn approval_requested(
    t: &Tx<'_>,
    id: TaskId,
    summary: &str,
    options: &[String],
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(t, id).await?;
    let text = format!(
        "Asked for approval: {summary} (options: {})",
        options.join(", ")
    );
    append(t, id, &agent, &conversation, &agent, &text, now).await
}

/// Record an approval's decision: `decision` on `summary` (task `id`'s request), by `by`, written by
/// `author`.
pub(super) async fn approval_decided(
    t: &Tx<'_>,
    id: TaskId,
    summary: &str,
    decision: &str,
    by: &str,
    author: &str,
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(t, id).await?;
    let text = format!("Approval decided: {decision}, by {by}: {summary}");
    append(t, id, &agent, &conversation, author, &text, now).await
}

/// Record task `id`'s escalation (`json`, as stored in `tasks.escalation`), rendered as people see it.
pub(super) async fn escalated(
    t: &Tx<'_>,
    id: TaskId,
    json: &str,
    now: i64,
) -> Result<(), StoreError> {
    let (agent, conversation) = task_of(t, id).await?;
    let text = match serde_json::from_str::<crate::ending::Escalation>(json) {
        Ok(e) => crate::ending::render_escalation(&agent, &e),
        Err(_) => format!("Escalated by {agent}: {json}"),
    };
    append(t, id, &agent, &conversation, &agent, &text, now).await
}

/// The agent and conversation of task `id`.
async fn task_of(t: &Tx<'_>, id: TaskId) -> Result<(String, String), StoreError> {
    const DOING: &str = "recording in recall memory";
    let row = opt(
        t.c(),
        DOING,
        "SELECT agent, conversation_id FROM tasks WHERE id = $1",
        &[&id],
    )
    .await?
    .ok_or(StoreError::NoTask(id))?;
    Ok((get(&row, 0, DOING)?, get(&row, 1, DOING)?))
}

async fn append(
    t: &Tx<'_>,
    id: TaskId,
    agent: &str,
    conversation: &str,
    author: &str,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
    let Some(entry) = Entry::new(id, agent, conversation, author, text, now) else {
        return Ok(());
    };
    exec(t.c(), "appending to recall memory", INSERT, &entry.params()).await?;
    t.recall_appended();
    Ok(())
}
