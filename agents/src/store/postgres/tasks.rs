//! Conversations and task records on PostgreSQL: creating tasks (one live root per conversation,
//! across every node), reading them back, and their saved session histories. The SQL of
//! `store/tasks.rs`, in PostgreSQL's dialect, plus the `node` column (the cluster node that ran
//! the task), which SQLite has not: every read here selects [`task_columns`].

use std::sync::OnceLock;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::super::tasks::TASK_COLUMNS;
use super::super::{NewTask, StoreError, TaskId, TaskRecord, TaskState, now_ms};
use super::recall;
use super::sql::{Tx, exec, get, one, opt, rows, u32_of, u64_of};
use crate::llm::Message;

/// The columns of a task row on PostgreSQL: SQLite's [`TASK_COLUMNS`] (one list for both), then
/// `node` (index 22).
pub(super) fn task_columns() -> &'static str {
    static COLUMNS: OnceLock<String> = OnceLock::new();
    COLUMNS.get_or_init(|| format!("{TASK_COLUMNS}, node"))
}

/// How many columns [`task_columns`] selects: a query that selects more after them reads those from
/// this index on.
pub(super) const TASK_COLUMN_COUNT: usize = 23;

/// A task row (the columns of [`task_columns`], in order).
pub(super) fn task_from_row(row: &Row) -> Result<TaskRecord, StoreError> {
    const DOING: &str = "reading a task";
    let state: String = get(row, 8, DOING)?;
    Ok(TaskRecord {
        id: get(row, 0, DOING)?,
        parent_id: get(row, 1, DOING)?,
        root_id: get(row, 2, DOING)?,
        conversation_id: get(row, 3, DOING)?,
        agent: get(row, 4, DOING)?,
        depth: u32_of(get(row, 5, DOING)?),
        tool_use_id: get(row, 6, DOING)?,
        tool_index: u32_of(get(row, 7, DOING)?),
        state: TaskState::parse(&state).unwrap_or(TaskState::Failed),
        input: get(row, 9, DOING)?,
        output: get(row, 10, DOING)?,
        summary: get(row, 11, DOING)?,
        error: get(row, 12, DOING)?,
        escalation: get(row, 13, DOING)?,
        created_at: get(row, 14, DOING)?,
        updated_at: get(row, 15, DOING)?,
        finished_at: get(row, 16, DOING)?,
        tokens_in: u64_of(get(row, 17, DOING)?),
        tokens_out: u64_of(get(row, 18, DOING)?),
        cost_usd: get(row, 19, DOING)?,
        llm_calls: u32_of(get(row, 20, DOING)?),
        unknown_usage_calls: u32_of(get(row, 21, DOING)?),
        node: get(row, TASK_COLUMN_COUNT - 1, DOING)?,
    })
}

/// Record a new conversation with `root_agent`, under `id` (no-op if it exists).
pub(super) async fn create_conversation(
    t: &Tx<'_>,
    id: &str,
    root_agent: &str,
) -> Result<(), StoreError> {
    exec(
        t.c(),
        "creating a conversation",
        "INSERT INTO conversations (id, root_agent, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT (id) DO NOTHING",
        &[&id, &root_agent, &now_ms()],
    )
    .await?;
    Ok(())
}

/// The latest root task of a conversation, if any.
pub(super) async fn last_root_task(
    c: &impl GenericClient,
    conversation_id: &str,
) -> Result<Option<TaskRecord>, StoreError> {
    opt(
        c,
        "finding a conversation's last task",
        &format!(
            "SELECT {columns} FROM tasks WHERE conversation_id = $1 AND parent_id IS NULL \
             ORDER BY id DESC LIMIT 1",
            columns = task_columns()
        ),
        &[&conversation_id],
    )
    .await?
    .as_ref()
    .map(task_from_row)
    .transpose()
}

/// Record a new task with its history already encoded (`task.messages` is not read), run by cluster
/// node `node` when a node's fenced store creates it. A root task locks its conversation's row
/// first, so two nodes cannot both start a root in one conversation.
pub(super) async fn create_task_encoded(
    t: &Tx<'_>,
    task: &NewTask<'_>,
    messages: &str,
    node: Option<&str>,
) -> Result<TaskId, StoreError> {
    const DOING: &str = "creating a task";
    let now = now_ms();
    let root_id: Option<TaskId> = match task.parent_id {
        Some(parent) => {
            // The parent's row is held (shared) to the commit: a cancel of its subtree on another
            // node, which locks it for update, then either runs first or sees this child.
            let row = opt(
                t.c(),
                DOING,
                "SELECT root_id FROM tasks WHERE id = $1 FOR SHARE",
                &[&parent],
            )
            .await?
            .ok_or(StoreError::NoTask(parent))?;
            Some(get(&row, 0, DOING)?)
        }
        None => {
            exec(
                t.c(),
                DOING,
                "INSERT INTO conversations (id, root_agent, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO NOTHING",
                &[&task.conversation_id, &task.agent, &now],
            )
            .await?;
            // One request at a time per conversation: the conversation's row is the lock, held to
            // the commit, so two senders (on two nodes) cannot both start a root.
            exec(
                t.c(),
                DOING,
                "SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE",
                &[&task.conversation_id],
            )
            .await?;
            let live = opt(
                t.c(),
                DOING,
                &format!(
                    "SELECT id FROM tasks WHERE conversation_id = $1 AND parent_id IS NULL \
                     AND state NOT IN {} LIMIT 1",
                    TaskState::terminal_sql()
                ),
                &[&task.conversation_id],
            )
            .await?;
            if let Some(live) = live {
                return Err(StoreError::Busy {
                    conversation: task.conversation_id.to_string(),
                    task: get(&live, 0, DOING)?,
                });
            }
            None
        }
    };
    let depth = i64::from(task.depth);
    let tool_index = i64::from(task.tool_index);
    let row = one(
        t.c(),
        DOING,
        "INSERT INTO tasks (parent_id, root_id, conversation_id, agent, depth, tool_use_id, tool_index, \
         state, input, messages, created_at, updated_at, node) \
         VALUES ($1, COALESCE($2::BIGINT, 0), $3, $4, $5, $6, $7, $11, $8, $9, $10, $10, $12) RETURNING id",
        &[
            &task.parent_id,
            &root_id,
            &task.conversation_id,
            &task.agent,
            &depth,
            &task.tool_use_id,
            &tool_index,
            &task.input,
            &messages,
            &now,
            &TaskState::Created.as_str(),
            &node,
        ],
    )
    .await?;
    let id: TaskId = get(&row, 0, DOING)?;
    if root_id.is_none() {
        exec(
            t.c(),
            DOING,
            "UPDATE tasks SET root_id = id WHERE id = $1",
            &[&id],
        )
        .await?;
    }
    let author = match task.parent_id {
        Some(parent) => recall::agent_of(t, parent).await?,
        None => task.author.unwrap_or(recall::USER).to_string(),
    };
    recall::given(
        t,
        id,
        task.agent,
        task.conversation_id,
        &author,
        task.input,
        now,
    )
    .await?;
    Ok(id)
}

/// One task.
pub(super) async fn task(c: &impl GenericClient, id: TaskId) -> Result<TaskRecord, StoreError> {
    let row = opt(
        c,
        "reading a task",
        &format!("SELECT {} FROM tasks WHERE id = $1", task_columns()),
        &[&id],
    )
    .await?
    .ok_or(StoreError::NoTask(id))?;
    task_from_row(&row)
}

/// The child a parent's tool call created, if it exists.
pub(super) async fn child_for(
    c: &impl GenericClient,
    parent: TaskId,
    tool_use_id: &str,
    index: u32,
) -> Result<Option<TaskRecord>, StoreError> {
    opt(
        c,
        "finding a child task",
        &format!(
            "SELECT {columns} FROM tasks WHERE parent_id = $1 AND tool_use_id = $2 AND tool_index = $3",
            columns = task_columns()
        ),
        &[&parent, &tool_use_id, &i64::from(index)],
    )
    .await?
    .as_ref()
    .map(task_from_row)
    .transpose()
}

/// A task's saved session history.
pub(super) async fn messages(
    c: &impl GenericClient,
    id: TaskId,
) -> Result<Vec<Message>, StoreError> {
    const DOING: &str = "reading a session";
    let row = opt(c, DOING, "SELECT messages FROM tasks WHERE id = $1", &[&id])
        .await?
        .ok_or(StoreError::NoTask(id))?;
    let text: String = get(&row, 0, DOING)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        what: "session history",
        task: id,
        message: e.to_string(),
    })
}

/// Save a task's session history, already encoded.
pub(super) async fn save_messages_encoded(
    c: &impl GenericClient,
    id: TaskId,
    text: &str,
) -> Result<(), StoreError> {
    exec(
        c,
        "saving a session",
        "UPDATE tasks SET messages = $2, updated_at = $3 WHERE id = $1",
        &[&id, &text, &now_ms()],
    )
    .await?;
    Ok(())
}

/// Every task of a tree, in creation order (parents before children).
pub(super) async fn tree(
    c: &impl GenericClient,
    root_id: TaskId,
) -> Result<Vec<TaskRecord>, StoreError> {
    list(
        c,
        &format!(
            "SELECT {} FROM tasks WHERE root_id = $1 ORDER BY id",
            task_columns()
        ),
        &[&root_id],
    )
    .await
}

/// The most recent root tasks, newest first.
pub(super) async fn recent_roots(
    c: &impl GenericClient,
    limit: u32,
) -> Result<Vec<TaskRecord>, StoreError> {
    list(
        c,
        &format!(
            "SELECT {columns} FROM tasks WHERE parent_id IS NULL ORDER BY id DESC LIMIT $1",
            columns = task_columns()
        ),
        &[&i64::from(limit)],
    )
    .await
}

/// Tasks that have not ended, oldest first.
pub(super) async fn live_tasks(c: &impl GenericClient) -> Result<Vec<TaskRecord>, StoreError> {
    list(
        c,
        &format!(
            "SELECT {columns} FROM tasks WHERE state NOT IN {} ORDER BY id",
            TaskState::terminal_sql(),
            columns = task_columns()
        ),
        &[],
    )
    .await
}

async fn list(
    c: &impl GenericClient,
    query: &str,
    params: super::sql::Params<'_>,
) -> Result<Vec<TaskRecord>, StoreError> {
    rows(c, "listing tasks", query, params)
        .await?
        .iter()
        .map(task_from_row)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count the readers index by is the list's.
    #[test]
    fn the_column_count_is_the_lists() {
        assert_eq!(task_columns().split(',').count(), TASK_COLUMN_COUNT);
        assert!(task_columns().ends_with(", node"));
    }
}
