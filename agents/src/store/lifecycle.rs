//! Moving tasks along their lifecycle: starting a session, state transitions, endings, and
//! cancellation of a subtree — each one transaction, checked against [`TaskState::may_become`] inside
//! it, so two writers cannot both win.

use rusqlite::{Connection, OptionalExtension, params};

use super::approvals::reject_pending;
use super::tasks::{TASK_COLUMNS, task_from_row};
use super::{Db, StoreError, SystemDecider, TaskId, TaskRecord, TaskState, exec, now_ms, row, sql};
use crate::llm::Message;

/// How a task ended, for [`Db::finish`].
#[derive(Clone, Debug)]
pub enum Ending<'a> {
    /// Completed with an output, and the summary the parent saw if compressed.
    Completed {
        /// The answer.
        output: &'a str,
        /// Its summary.
        summary: Option<&'a str>,
    },
    /// Failed.
    Failed(&'a str),
    /// Escalated (JSON of the escalation).
    Escalated(&'a str),
    /// Cancelled.
    Cancelled(&'a str),
}

/// The columns an ending writes: the state, and the output, summary, error and escalation.
pub(super) struct EndingRow<'a> {
    pub(super) state: TaskState,
    pub(super) output: Option<&'a str>,
    pub(super) summary: Option<&'a str>,
    pub(super) error: Option<&'a str>,
    pub(super) escalation: Option<&'a str>,
}

impl<'a> Ending<'a> {
    /// What ending task `id`, now in `current`, this way writes; a completion is refused unless the
    /// task may pass through RESULT_PROPAGATING (both backends check it with the row locked).
    pub(super) fn row(self, id: TaskId, current: TaskState) -> Result<EndingRow<'a>, StoreError> {
        let row = |state, output, summary, error, escalation| EndingRow {
            state,
            output,
            summary,
            error,
            escalation,
        };
        let row = match self {
            Ending::Completed { output, summary } => {
                row(TaskState::Completed, Some(output), summary, None, None)
            }
            Ending::Failed(error) => row(TaskState::Failed, None, None, Some(error), None),
            Ending::Escalated(json) => row(TaskState::Escalated, None, None, None, Some(json)),
            Ending::Cancelled(reason) => row(TaskState::Cancelled, None, None, Some(reason), None),
        };
        if row.state == TaskState::Completed
            && current != TaskState::ResultPropagating
            && !current.may_become(TaskState::ResultPropagating)
        {
            return Err(StoreError::BadTransition {
                task: id,
                from: current.as_str(),
                to: row.state.as_str(),
            });
        }
        Ok(row)
    }
}

impl Db {
    /// Start (or resume) a task's session in one transaction: its record (CREATED becomes ASSIGNED, and
    /// EXECUTING right away when a model turn is next) and its saved history.
    pub fn begin(&self, id: TaskId) -> Result<(TaskRecord, Vec<Message>), StoreError> {
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("starting a task"))?;
        let mut record = row(
            &tx,
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
            [id],
            task_from_row,
        )
        .optional()
        .map_err(sql("starting a task"))?
        .ok_or(StoreError::NoTask(id))?;
        let text: String = row(&tx, "SELECT messages FROM tasks WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .map_err(sql("starting a task"))?;
        let messages: Vec<Message> =
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
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
                &tx,
                "UPDATE tasks SET state = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, next.as_str(), now_ms()],
            )
            .map_err(sql("starting a task"))?;
            record.state = next;
        }
        tx.commit().map_err(sql("starting a task"))?;
        Ok((record, messages))
    }

    /// Move a task to `next`, if the lifecycle allows it from its current state. Returns the previous
    /// state. Same-state "transitions" are no-ops.
    pub fn transition(&self, id: TaskId, next: TaskState) -> Result<TaskState, StoreError> {
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("changing a task's state"))?;
        let current = Self::state_in(&tx, id)?;
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
            &tx,
            "UPDATE tasks SET state = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, next.as_str(), now_ms()],
        )
        .map_err(sql("changing a task's state"))?;
        tx.commit().map_err(sql("changing a task's state"))?;
        Ok(current)
    }

    pub(super) fn state_in(tx: &Connection, id: TaskId) -> Result<TaskState, StoreError> {
        let state: String = row(tx, "SELECT state FROM tasks WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()
        .map_err(sql("reading a task's state"))?
        .ok_or(StoreError::NoTask(id))?;
        TaskState::parse(&state).ok_or(StoreError::Corrupt {
            what: "state",
            task: id,
            message: state,
        })
    }

    /// End a task. Completing goes through RESULT_PROPAGATING first. A task that already ended keeps its
    /// first ending (e.g. cancelled while its last LLM call was in flight) and `false` is returned.
    pub fn finish(&self, id: TaskId, ending: Ending<'_>) -> Result<bool, StoreError> {
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("ending a task"))?;
        let current = Self::state_in(&tx, id)?;
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
            &tx,
            "UPDATE tasks SET state = ?2, output = ?3, summary = ?4, error = ?5, escalation = ?6, \
             updated_at = ?7, finished_at = ?7 WHERE id = ?1",
            params![id, state.as_str(), output, summary, error, escalation, now],
        )
        .map_err(sql("ending a task"))?;
        if let Some(output) = output {
            super::recall::answered(&tx, id, output, now)?;
            // A completed root: its tree's exchanges are queued for fact extraction, in this
            // transaction (the worker runs them after the answer is out).
            super::memory_jobs::enqueue_extractions(&tx, id, now)?;
        }
        if let Some(json) = escalation {
            super::recall::escalated(&tx, id, json, now)?;
        }
        tx.commit().map_err(sql("ending a task"))?;
        if output.is_some() || escalation.is_some() {
            self.recall_appended();
        }
        Ok(true)
    }
    /// Cancel a task and every live task below it, in one transaction; their pending approvals are
    /// rejected. Returns the ids that were cancelled (the subtree's live tasks).
    pub fn cancel_subtree(&self, id: TaskId, reason: &str) -> Result<Vec<TaskId>, StoreError> {
        self.cancel_below(id, reason, true)
    }

    /// Cancel every live task below `id` (not `id` itself), as [`Db::cancel_subtree`] does.
    pub fn cancel_descendants(&self, id: TaskId, reason: &str) -> Result<Vec<TaskId>, StoreError> {
        self.cancel_below(id, reason, false)
    }

    fn cancel_below(
        &self,
        id: TaskId,
        reason: &str,
        include_self: bool,
    ) -> Result<Vec<TaskId>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.savepoint().map_err(sql("cancelling tasks"))?;
        Self::state_in(&tx, id)?;
        let ids: Vec<TaskId> = {
            let mut stmt = tx
                .prepare(&format!(
                    "WITH RECURSIVE sub(id) AS (SELECT ?1 UNION ALL \
                     SELECT t.id FROM tasks t JOIN sub ON t.parent_id = sub.id) \
                     SELECT tasks.id FROM tasks JOIN sub ON tasks.id = sub.id \
                     WHERE state NOT IN {} \
                     AND (?2 OR tasks.id <> ?1) ORDER BY tasks.id",
                    TaskState::terminal_sql()
                ))
                .map_err(sql("cancelling tasks"))?;
            let rows = stmt
                .query_map(params![id, include_self], |r| r.get(0))
                .map_err(sql("cancelling tasks"))?;
            rows.collect::<Result<_, _>>()
                .map_err(sql("cancelling tasks"))?
        };
        let now = now_ms();
        for task in &ids {
            exec(&tx,
                "UPDATE tasks SET state = ?4, error = ?2, updated_at = ?3, finished_at = ?3 WHERE id = ?1",
                params![task, reason, now, TaskState::Cancelled.as_str()],
            )
            .map_err(sql("cancelling tasks"))?;
            reject_pending(&tx, "task_id = ?1", task, SystemDecider::Cancelled, now)?;
        }
        tx.commit().map_err(sql("cancelling tasks"))?;
        self.recall_appended();
        Ok(ids)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::testing::{child, root};

    #[test]
    fn lifecycle_transitions_are_checked() {
        let store = Db::in_memory().unwrap();
        let id = root(&store, "c");
        assert_eq!(store.task(id).unwrap().root_id, id);
        store.transition(id, TaskState::Assigned).unwrap();
        assert!(matches!(
            store.transition(id, TaskState::Completed),
            Err(StoreError::BadTransition { .. })
        ));
        store.transition(id, TaskState::Executing).unwrap();
        store.transition(id, TaskState::ResultPropagating).unwrap();
        assert!(
            store
                .finish(
                    id,
                    Ending::Completed {
                        output: "done",
                        summary: None
                    }
                )
                .unwrap()
        );
        // A second ending is ignored.
        assert!(!store.finish(id, Ending::Failed("late")).unwrap());
        let task = store.task(id).unwrap();
        assert_eq!(task.state, TaskState::Completed);
        assert_eq!(task.output.as_deref(), Some("done"));
    }

    #[test]
    fn cancel_reaches_the_whole_subtree_and_rejects_its_approvals() {
        let store = Db::in_memory().unwrap();
        let r = root(&store, "c");
        let c = child(&store, r, "t1");
        let g = child(&store, c, "t2");
        let task = store.task(g).unwrap();
        let approval = store
            .request_approval(
                &task,
                "t3",
                "ship?",
                &["approve".into(), "reject".into()],
                Duration::from_secs(60),
            )
            .unwrap()
            .0;
        let cancelled = store.cancel_subtree(r, "cancelled by user").unwrap();
        assert_eq!(cancelled, vec![r, c, g]);
        let approval = store.approval(approval.id).unwrap().unwrap();
        assert_eq!(approval.state, crate::store::ApprovalState::Rejected);
        assert_eq!(approval.decided_by.as_deref(), Some("cancelled"));
    }
}
