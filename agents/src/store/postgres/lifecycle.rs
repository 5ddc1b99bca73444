//! Moving tasks along their lifecycle on PostgreSQL: starting a session, state transitions, endings
//! and cancellation of a subtree. The SQL of `store/lifecycle.rs`, in PostgreSQL's dialect, each
//! operation inside the store's write transaction ([`Tx`]), but `begin`, which is pipelined
//! (`sql.rs`: a read and a version-checked update, or the locked way).
//!
//! Why row locks: several nodes share the database, so "read the state, check
//! [`TaskState::may_become`], write the next one" must not interleave with another node's. Every
//! operation here locks the row(s) it checked until its commit:
//! - `transition`, `finish` lock the task's row (`FOR UPDATE`) before reading its state, so of two
//!   writers racing from one state the second sees the first's result (and is refused, or finds the
//!   task already ended); `begin` writes only onto the row version it read (`xmin`), which another
//!   writer's change replaces, and then takes the locked way;
//! - `cancel_subtree` / `cancel_descendants` lock the named task's row, then the subtree's live rows
//!   in ascending id order (a parent's id is below its children's, so two overlapping cancels, or a
//!   cancel and a transition, take their locks in one order and cannot deadlock). A row that ended
//!   while the cancel waited for its lock is re-checked by PostgreSQL and left with its ending.

use super::super::lifecycle::EndingRow;
use super::super::{Ending, StoreError, SystemDecider, TaskId, TaskRecord, TaskState, now_ms};
use super::sql::{Lease, Pipe, Step, Tx, exec, get, opt, rows};
use super::tasks::{TASK_COLUMN_COUNT, task_columns, task_from_row};
use crate::llm::Message;

/// Start (or resume) a task's session: its record (CREATED becomes ASSIGNED, and EXECUTING right
/// away when a model turn is next) and its saved history.
///
/// In the shared store, optimistically: a plain read, then (when the state moves) an `UPDATE` that
/// applies only if the row is still the version read (`xmin`, the transaction that wrote that
/// version: any later write of the row, committed before or while the update waits for it, gives it
/// another), two statements and no transaction around them. A read with no change to make is the
/// locked read-and-commit's answer without its lock. When the row changed in between, it is done
/// the locked way, as in a fenced store: the row read `FOR UPDATE` in a pipelined transaction (after
/// the lease check), the state change sent with the COMMIT.
pub(super) async fn begin(
    c: deadpool_postgres::Object,
    lease: Option<Lease>,
    id: TaskId,
) -> Result<(TaskRecord, Vec<Message>), StoreError> {
    const DOING: &str = "starting a task";
    const MOVE: &str = "UPDATE tasks SET state = $2, updated_at = $3 WHERE id = $1";
    if lease.is_none() {
        // The history is the column after the task's, the row's version the one after it.
        let read = format!(
            "SELECT {}, messages, xmin::TEXT FROM tasks WHERE id = $1",
            task_columns()
        );
        let row = opt(&c, DOING, &read, &[&id])
            .await?
            .ok_or(StoreError::NoTask(id))?;
        let (mut record, messages) = begun(&row, id)?;
        let Some(next) = next_of(&record, &messages) else {
            return Ok((record, messages));
        };
        let version: String = get(&row, TASK_COLUMN_COUNT + 1, DOING)?;
        let moved = exec(
            &c,
            DOING,
            &format!("{MOVE} AND xmin::TEXT = $4"),
            &[&id, &next.as_str(), &now_ms(), &version],
        )
        .await?;
        if moved == 1 {
            record.state = next;
            return Ok((record, messages));
        }
    }
    let read = format!(
        "SELECT {}, messages FROM tasks WHERE id = $1 FOR UPDATE",
        task_columns()
    );
    let (pipe, rows) = Pipe::open(
        c,
        lease,
        &[Step {
            doing: DOING,
            sql: &read,
            params: &[&id],
        }],
    )
    .await?;
    let read = rows
        .first()
        .and_then(|r| r.first())
        .ok_or(StoreError::NoTask(id))
        .and_then(|row| begun(row, id));
    let (mut record, messages) = match read {
        Ok(read) => read,
        Err(e) => {
            pipe.rollback().await;
            return Err(e);
        }
    };
    match next_of(&record, &messages) {
        Some(next) => {
            pipe.commit(&[Step {
                doing: DOING,
                sql: MOVE,
                params: &[&id, &next.as_str(), &now_ms()],
            }])
            .await?;
            record.state = next;
        }
        None => {
            pipe.commit(&[]).await?;
        }
    }
    Ok((record, messages))
}

/// The task and its history, from a row of [`task_columns`] then `messages`.
fn begun(row: &tokio_postgres::Row, id: TaskId) -> Result<(TaskRecord, Vec<Message>), StoreError> {
    let record = task_from_row(row)?;
    let text: String = get(row, TASK_COLUMN_COUNT, "starting a task")?;
    let messages = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        what: "session history",
        task: id,
        message: e.to_string(),
    })?;
    Ok((record, messages))
}

/// The state a task's session starts in, when it moves: a new task is assigned; if its next step is
/// a model turn (the history ends with the task or tool results), it is executing from here on —
/// one write instead of two.
fn next_of(record: &TaskRecord, messages: &[Message]) -> Option<TaskState> {
    let next_is_turn = messages
        .last()
        .is_some_and(|m| m.role == crate::llm::Role::User);
    match record.state {
        TaskState::Created | TaskState::Assigned if next_is_turn => Some(TaskState::Executing),
        TaskState::Created => Some(TaskState::Assigned),
        _ => None,
    }
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
