//! Conversations and task records on PostgreSQL: creating tasks (one live root per conversation,
//! across every node), reading them back, and their saved session histories. The SQL of
//! `store/tasks.rs`, in PostgreSQL's dialect, plus the `node` column (the cluster node that ran
//! the task), which SQLite has not: every read here selects [`task_columns`].

use std::sync::OnceLock;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::super::tasks::TASK_COLUMNS;
use super::super::{NewTask, StoreError, TaskId, TaskRecord, TaskState, now_ms};
use super::recall;
use super::sql::{Lease, Step, Tx, atomic, exec, get, opt, rows, u32_of, u64_of};
use crate::llm::Message;

/// The columns of a task row on PostgreSQL: SQLite's [`TASK_COLUMNS`] (one list for both, `trace`
/// its last, index 22), then `node` (index 23).
pub(super) fn task_columns() -> &'static str {
    static COLUMNS: OnceLock<String> = OnceLock::new();
    COLUMNS.get_or_init(|| format!("{TASK_COLUMNS}, node"))
}

/// How many columns [`task_columns`] selects: a query that selects more after them reads those from
/// this index on.
pub(super) const TASK_COLUMN_COUNT: usize = 24;

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
        trace: get(row, 22, DOING)?,
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
/// node `node` when a node's fenced store creates it (under `lease`); its id. One pipelined write
/// ([`atomic`]): one round trip, two under a lease.
///
/// A root task first locks its conversation's row (created if new), held to the commit, so two
/// senders (on two nodes) cannot both start a root in one conversation: the statement that looks
/// for a live root and inserts the new one starts after the lock is held, so it sees any root a
/// sender before it committed. A child holds its parent's row (shared) to the commit: a cancel of
/// its subtree on another node, which locks it for update, then either runs first or sees this
/// child. The task's id is drawn in the insert itself, so a root's `root_id` is written with it, and
/// its instructions' recall row is written by the same statement.
pub(super) async fn create_task(
    c: deadpool_postgres::Object,
    lease: Option<Lease>,
    task: &NewTask<'_>,
    messages: &str,
    node: Option<&str>,
) -> Result<TaskId, StoreError> {
    const DOING: &str = "creating a task";
    let now = now_ms();
    let depth = i64::from(task.depth);
    let tool_index = i64::from(task.tool_index);
    let created = TaskState::Created.as_str();
    // The recall row of its instructions: the statement writes the new id as its task (see
    // `recall_values`).
    let author = match task.parent_id {
        Some(_) => "",
        None => task.author.unwrap_or(recall::USER),
    };
    let entry = recall::Entry::new(0, task.agent, task.conversation_id, author, task.input, now);
    let recall_params = entry.as_ref().map(recall::Entry::params);
    let recall_params = recall_params.as_ref().map_or(&[][..], |p| &p[..]);
    let with_recall = entry.is_some();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &task.conversation_id,
        &task.agent,
        &depth,
        &task.tool_use_id,
        &tool_index,
        &created,
        &task.input,
        &messages,
        &now,
        &node,
        &with_recall,
    ];
    let rows = match task.parent_id {
        None => {
            let lock_params: [&(dyn ToSql + Sync); 3] = [&task.conversation_id, &task.agent, &now];
            params.extend_from_slice(recall_or_nulls(recall_params));
            params.push(&task.trace);
            let rows = atomic(
                c,
                lease,
                &[
                    // Created if new, locked either way (a conflict's `DO UPDATE` locks the row as
                    // `FOR UPDATE` does; a new row is this transaction's until it commits).
                    Step {
                        doing: DOING,
                        sql: "INSERT INTO conversations (id, root_agent, created_at) \
                              VALUES ($1, $2, $3) \
                              ON CONFLICT (id) DO UPDATE SET root_agent = conversations.root_agent",
                        params: &lock_params,
                    },
                    Step {
                        doing: DOING,
                        sql: create_root_sql(),
                        params: &params,
                    },
                ],
            )
            .await?;
            let row = rows.get(1).and_then(|r| r.first()).ok_or_else(no_answer)?;
            if let Some(live) = get::<Option<TaskId>>(row, 1, DOING)? {
                return Err(StoreError::Busy {
                    conversation: task.conversation_id.to_string(),
                    task: live,
                });
            }
            return get::<Option<TaskId>>(row, 0, DOING)?.ok_or_else(no_answer);
        }
        Some(parent) => {
            params.extend_from_slice(recall_or_nulls(recall_params));
            params.push(&task.trace);
            params.push(&parent);
            atomic(
                c,
                lease,
                &[Step {
                    doing: DOING,
                    sql: create_child_sql(),
                    params: &params,
                }],
            )
            .await?
        }
    };
    let row = rows
        .first()
        .and_then(|r| r.first())
        .ok_or(StoreError::NoTask(task.parent_id.unwrap_or_default()))?;
    get(row, 0, DOING)
}

/// The recall row's parameters, or as many NULLs when there is none (blank instructions: the
/// statement then inserts no recall row).
fn recall_or_nulls<'a>(recall: &'a [&'a (dyn ToSql + Sync)]) -> &'a [&'a (dyn ToSql + Sync)] {
    const TEXT: Option<&str> = None;
    const NUMBER: Option<i64> = None;
    static NULLS: [&(dyn ToSql + Sync); 9] = [
        &TEXT, &TEXT, &TEXT, &TEXT, &TEXT, &TEXT, &NUMBER, &TEXT, &TEXT,
    ];
    if recall.is_empty() { &NULLS } else { recall }
}

/// A statement that should have answered one row answered none (a bug, never a panic).
fn no_answer() -> StoreError {
    StoreError::Database {
        doing: "creating a task",
        source: super::super::DbFailure {
            fault: super::super::DbFault::Other,
            message: "the insert answered no row".into(),
        },
    }
}

/// The columns a new task is inserted with (`$1`–`$10` and `$21`, its trace context, of
/// [`create_root_sql`] and [`create_child_sql`], after the id and the root id), and its recall
/// row's (`$12`–`$20`: a [`recall::Entry`]'s parameters, `$15` its task standing in for the new id).
const NEW_TASK: &str = "conversation_id, agent, depth, tool_use_id, tool_index, state, input, \
     messages, created_at, updated_at, node, trace";

/// The values of [`NEW_TASK`].
const NEW_TASK_VALUES: &str = "$1::TEXT, $2::TEXT, $3::BIGINT, $4::TEXT, $5::BIGINT, $6::TEXT, \
     $7::TEXT, $8::TEXT, $9::BIGINT, $9::BIGINT, $10::TEXT, $21::TEXT";

/// The recall row of a new task `fresh.id` (when `$11`), written by `author` (an SQL expression).
/// `$15`, the entry's task, is not written but must be read for its type to be known.
fn recall_values(author: &str) -> String {
    format!(
        "INSERT INTO recall_messages ({columns}) \
         SELECT $12::TEXT, {author}, $14::TEXT, COALESCE(fresh.id::TEXT, $15::TEXT), $16::TEXT, \
         $17::TEXT, $18::BIGINT, $19::TEXT, $20::TEXT",
        columns = recall::COLUMNS,
    )
}

/// A root: no live root in its conversation (the one found is answered instead), a new id that is
/// also its root id; answers `(new id, live root id)`, one of them NULL.
fn create_root_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "WITH live AS (SELECT id FROM tasks WHERE conversation_id = $1 AND parent_id IS NULL \
             AND state NOT IN {terminal} LIMIT 1), \
             fresh AS (INSERT INTO tasks (id, parent_id, root_id, {NEW_TASK}) \
             SELECT n.id, NULL, n.id, {NEW_TASK_VALUES} \
             FROM (SELECT nextval(pg_get_serial_sequence('tasks', 'id')) AS id) n \
             WHERE NOT EXISTS (SELECT 1 FROM live) RETURNING id), \
             recall AS ({recall} FROM fresh WHERE $11) \
             SELECT (SELECT id FROM fresh), (SELECT id FROM live)",
            terminal = TaskState::terminal_sql(),
            recall = recall_values("$13::TEXT"),
        )
    })
}

/// A child of `$22` (held `FOR SHARE`): its root id and its instructions' author are the parent's
/// (`$13` is not read); answers the new id, or no row when the parent does not exist.
fn create_child_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "WITH parent AS (SELECT root_id, agent FROM tasks WHERE id = $22 FOR SHARE), \
             fresh AS (INSERT INTO tasks (parent_id, root_id, {NEW_TASK}) \
             SELECT $22::BIGINT, parent.root_id, {NEW_TASK_VALUES} FROM parent RETURNING id), \
             recall AS ({recall} FROM fresh, parent WHERE $11) \
             SELECT id FROM fresh",
            recall = recall_values("COALESCE(parent.agent, $13::TEXT)"),
        )
    })
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
        assert!(task_columns().ends_with(", trace, node"));
    }
}
