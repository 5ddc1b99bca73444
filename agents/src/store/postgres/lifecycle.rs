//! Moving tasks along their lifecycle on PostgreSQL: starting a session, state transitions, endings
//! and cancellation of a subtree. The SQL of `store/lifecycle.rs`, in PostgreSQL's dialect, each
//! operation inside the store's write transaction ([`Tx`]).
//!
//! Why row locks: several nodes share the database, so "read the state, check
//! [`TaskState::may_become`], write the next one" must not interleave with another node's. Every
//! operation here locks the row(s) it checked until its commit:
//! - `begin`, `transition`, `finish` lock the task's row (`FOR UPDATE`) before reading its state, so
//!   of two writers racing from one state the second sees the first's result (and is refused, or
//!   finds the task already ended);
//! - `cancel_subtree` / `cancel_descendants` lock the named task's row, then the subtree's live rows
//!   in ascending id order (a parent's id is below its children's, so two overlapping cancels, or a
//!   cancel and a transition, take their locks in one order and cannot deadlock). A row that ended
//!   while the cancel waited for its lock is re-checked by PostgreSQL and left with its ending.

use super::super::lifecycle::EndingRow;
use super::super::{Ending, StoreError, SystemDecider, TaskId, TaskRecord, TaskState, now_ms};
use super::sql::{Tx, exec, get, opt, rows};
use super::tasks::{TASK_COLUMN_COUNT, task_columns, task_from_row};
use crate::llm::Message;

/// Start (or resume) a task's session: its record (CREATED becomes ASSIGNED, and EXECUTING right
/// away when a model turn is next) and its saved history. Locks the task's row.
pub(super) async fn begin(
    t: &Tx<'_>,
    id: TaskId,
) -> Result<(TaskRecord, Vec<Message>), StoreError> {
    const DOING: &str = "starting a task";
    // The history is the column after the task's: one locked read for both.
    let row = opt(
        t.c(),
        DOING,
        &format!(
            "SELECT {}, messages FROM tasks WHERE id = $1 FOR UPDATE",
            task_columns()
        ),
        &[&id],
    )
    .await?
    .ok_or(StoreError::NoTask(id))?;
    let mut record = task_from_row(&row)?;
    let text: String = get(&row, TASK_COLUMN_COUNT, DOING)?;
    let messages: Vec<Message> = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        what: "session history",
        task: id,
        message: e.to_string(),
    })?;
    // A new task is assigned; if its next step is a model turn (the history ends with the task or
    // tool results), it is executing from here on — one commit instead of two.
    let next_is_turn = messages
        .last()
        .is_some_and(|m| m.role == crate::llm::Role::User);
    let next = match record.state {
        TaskState::Created | TaskState::Assigned if next_is_turn => Some(TaskState::Executing),
        TaskState::Created => Some(TaskState::Assigned),
        _ => None,
    };
    if let Some(next) = next {
        exec(
            t.c(),
            DOING,
            "UPDATE tasks SET state = $2, updated_at = $3 WHERE id = $1",
            &[&id, &next.as_str(), &now_ms()],
        )
        .await?;
        record.state = next;
    }
    Ok((record, messages))
}

/// Move a task to `next`, if the lifecycle allows it from its current state (read on the task's
/// row, locked). Returns the previous state. Same-state "transitions" are no-ops.
pub(super) async fn transition(
    t: &Tx<'_>,
    id: TaskId,
    next: TaskState,
) -> Result<TaskState, StoreError> {
    let current = state_in(t, id).await?;
    if current == next {
        return Ok(current);
    }
    if !current.may_become(next) {
        return Err(StoreError::BadTransition {
            task: id,
            from: current.as_str(),
            to: next.as_str(),
        });
    }
    exec(
        t.c(),
        "changing a task's state",
        "UPDATE tasks SET state = $2, updated_at = $3 WHERE id = $1",
        &[&id, &next.as_str(), &now_ms()],
    )
    .await?;
    Ok(current)
}

/// The state of task `id`, its row locked `FOR UPDATE` until the transaction ends: what the caller
/// decides from it cannot be overtaken by another writer (another node) before it commits.
pub(super) async fn state_in(t: &Tx<'_>, id: TaskId) -> Result<TaskState, StoreError> {
    const DOING: &str = "reading a task's state";
    let row = opt(
        t.c(),
        DOING,
        "SELECT state FROM tasks WHERE id = $1 FOR UPDATE",
        &[&id],
    )
    .await?
    .ok_or(StoreError::NoTask(id))?;
    let state: String = get(&row, 0, DOING)?;
    TaskState::parse(&state).ok_or(StoreError::Corrupt {
        what: "state",
        task: id,
        message: state,
    })
}

/// End a task (its row locked). Completing goes through RESULT_PROPAGATING first. A task that
/// already ended keeps its first ending (e.g. cancelled while its last LLM call was in flight) and
/// `false` is returned.
pub(super) async fn finish(t: &Tx<'_>, id: TaskId, ending: Ending<'_>) -> Result<bool, StoreError> {
    let current = state_in(t, id).await?;
    if current.is_terminal() {
        return Ok(false);
    }
    let now = now_ms();
    let EndingRow {
        state,
        output,
        summary,
        error,
        escalation,
    } = ending.row(id, current)?;
    exec(
        t.c(),
        "ending a task",
        "UPDATE tasks SET state = $2, output = $3, summary = $4, error = $5, escalation = $6, \
         updated_at = $7, finished_at = $7 WHERE id = $1",
        &[
            &id,
            &state.as_str(),
            &output,
            &summary,
            &error,
            &escalation,
            &now,
        ],
    )
    .await?;
    if let Some(output) = output {
        super::recall::answered(t, id, output, now).await?;
        // A completed root: its tree's exchanges are queued for fact extraction, in this
        // transaction (the worker runs them after the answer is out).
        super::memory_jobs::enqueue_extractions(t, id, now).await?;
    }
    if let Some(json) = escalation {
        super::recall::escalated(t, id, json, now).await?;
    }
    Ok(true)
}

/// Cancel a task and every live task below it; their pending approvals are rejected. Returns the
/// ids that were cancelled (the subtree's live tasks), in ascending order.
pub(super) async fn cancel_subtree(
    t: &Tx<'_>,
    id: TaskId,
    reason: &str,
) -> Result<Vec<TaskId>, StoreError> {
    cancel_below(t, id, reason, true).await
}

/// Cancel every live task below `id` (not `id` itself), as [`cancel_subtree`] does.
pub(super) async fn cancel_descendants(
    t: &Tx<'_>,
    id: TaskId,
    reason: &str,
) -> Result<Vec<TaskId>, StoreError> {
    cancel_below(t, id, reason, false).await
}

async fn cancel_below(
    t: &Tx<'_>,
    id: TaskId,
    reason: &str,
    include_self: bool,
) -> Result<Vec<TaskId>, StoreError> {
    const DOING: &str = "cancelling tasks";
    // The named task first (and a missing one is an error, as on SQLite).
    state_in(t, id).await?;
    // Then the subtree's live rows, locked in id order (the sort happens before the locking, so
    // every cancel takes its locks in one order). The walk goes through ended tasks too: a live
    // grandchild of an ended child is still below `id`.
    let ids: Vec<TaskId> = rows(
        t.c(),
        DOING,
        &format!(
            "WITH RECURSIVE sub(id) AS (SELECT $1::BIGINT UNION ALL \
             SELECT t.id FROM tasks t JOIN sub ON t.parent_id = sub.id) \
             SELECT tasks.id FROM tasks JOIN sub ON tasks.id = sub.id \
             WHERE tasks.state NOT IN {} \
             AND ($2 OR tasks.id <> $1) ORDER BY tasks.id FOR UPDATE OF tasks",
            TaskState::terminal_sql()
        ),
        &[&id, &include_self],
    )
    .await?
    .iter()
    .map(|r| get(r, 0, DOING))
    .collect::<Result<_, _>>()?;
    let now = now_ms();
    for task in &ids {
        exec(
            t.c(),
            DOING,
            "UPDATE tasks SET state = $4, error = $2, updated_at = $3, finished_at = $3 WHERE id = $1",
            &[task, &reason, &now, &TaskState::Cancelled.as_str()],
        )
        .await?;
        super::approvals::reject_pending(t, "task_id = $1", task, SystemDecider::Cancelled, now)
            .await?;
    }
    Ok(ids)
}
