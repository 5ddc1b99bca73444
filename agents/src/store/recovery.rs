//! Startup recovery: what a stopped process left behind is made consistent before the engine takes
//! work — expired approvals rejected, interrupted tasks failed with a notice, suspended trees kept.

use rusqlite::params;

use super::approvals::reject_pending;
use super::{
    Approval, ApprovalState, Db, StoreError, SystemDecider, TaskId, TaskState, exec, now_ms, sql,
};

/// What startup recovery did.
#[derive(Clone, Debug, Default)]
pub struct Recovery {
    /// Tasks a crash left running, now FAILED: `(task, conversation, is_root)`.
    pub interrupted: Vec<(TaskId, String, bool)>,
    /// Approvals that expired while no process was running, now rejected.
    pub expired_approvals: Vec<i64>,
    /// Approvals still pending (their tasks stay suspended).
    pub pending_approvals: Vec<Approval>,
    /// Roots of trees suspended on an approval that was pending at startup (decided by expiry or
    /// still pending): the engine re-enters them so they wait again, or carry on with the rejection.
    pub suspended_roots: Vec<TaskId>,
}

impl Db {
    /// Startup recovery, in one transaction:
    /// - pending approvals past their deadline are rejected (`decided_by = timeout`);
    /// - tasks suspended on a still-pending approval, and their ancestors, stay as they are (a decision
    ///   resumes them);
    /// - every other live task was running when the previous process stopped: it is marked FAILED
    ///   ("interrupted"), and each affected conversation gets a notice.
    pub fn recover(&self) -> Result<Recovery, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .savepoint()
            .map_err(sql("recovering after a restart"))?;
        let now = now_ms();
        let pending = ApprovalState::Pending.as_str();
        let timeout = SystemDecider::Timeout.as_str();
        let terminal = TaskState::terminal_sql();
        let mut recovery = Recovery::default();
        {
            let mut stmt = tx
                .prepare("SELECT id FROM approvals WHERE state = ?2 AND expires_at <= ?1")
                .map_err(sql("recovering after a restart"))?;
            let rows = stmt
                .query_map(params![now, pending], |r| r.get(0))
                .map_err(sql("recovering after a restart"))?;
            recovery.expired_approvals = rows
                .collect::<Result<_, _>>()
                .map_err(sql("recovering after a restart"))?;
        }
        reject_pending(&tx, "expires_at <= ?1", now, SystemDecider::Timeout, now)?;
        // Live tasks that are neither waiting on an approval pending at startup (expired just now or
        // not) nor an ancestor of one.
        let interrupted: Vec<(TaskId, String, bool)> = {
            let mut stmt = tx
                .prepare(&format!(
                    "WITH RECURSIVE keep(id) AS ( \
                       SELECT task_id FROM approvals WHERE state = ?2 OR (decided_by = ?3 AND decided_at = ?1) \
                       UNION SELECT t.parent_id FROM tasks t JOIN keep ON t.id = keep.id WHERE t.parent_id IS NOT NULL) \
                     SELECT id, conversation_id, parent_id IS NULL FROM tasks \
                     WHERE state NOT IN {terminal} \
                       AND id NOT IN (SELECT id FROM keep) ORDER BY id",
                ))
                .map_err(sql("recovering after a restart"))?;
            let rows = stmt
                .query_map(params![now, pending, timeout], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(sql("recovering after a restart"))?;
            rows.collect::<Result<_, _>>()
                .map_err(sql("recovering after a restart"))?
        };
        recovery.suspended_roots = {
            let mut stmt = tx
                .prepare(&format!(
                    "SELECT DISTINCT a.root_id FROM approvals a JOIN tasks t ON t.id = a.task_id \
                     WHERE (a.state = ?2 OR (a.decided_by = ?3 AND a.decided_at = ?1)) \
                     AND t.state NOT IN {terminal} ORDER BY a.root_id",
                ))
                .map_err(sql("recovering after a restart"))?;
            let rows = stmt
                .query_map(params![now, pending, timeout], |r| r.get(0))
                .map_err(sql("recovering after a restart"))?;
            rows.collect::<Result<_, _>>()
                .map_err(sql("recovering after a restart"))?
        };
        for (id, conversation, is_root) in &interrupted {
            exec(&tx,
                "UPDATE tasks SET state = ?3, error = 'interrupted: the process stopped while this task was running', \
                 updated_at = ?2, finished_at = ?2 WHERE id = ?1",
                params![id, now, TaskState::Failed.as_str()],
            )
            .map_err(sql("recovering after a restart"))?;
            if *is_root {
                let text = format!(
                    "Task {id} was interrupted because OPC stopped while it was running; \
                     its partial work was discarded. Send the request again to retry."
                );
                super::notices::insert(&tx, conversation, Some(*id), &text, now)
                    .map_err(sql("recovering after a restart"))?;
            }
        }
        recovery.interrupted = interrupted;
        tx.commit().map_err(sql("recovering after a restart"))?;
        self.recall_appended();
        drop(conn);
        recovery.pending_approvals = self.pending_approvals()?;
        Ok(recovery)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::TaskState;
    use crate::store::testing::{child, root};

    #[test]
    fn recovery_fails_running_tasks_but_keeps_suspended_chains() {
        let store = Db::in_memory().unwrap();
        // Chain 1: root → child awaiting approval. Both stay.
        let r1 = root(&store, "c");
        let c1 = child(&store, r1, "t1");
        store
            .request_approval(
                &store.task(c1).unwrap(),
                "t2",
                "ok?",
                &["approve".into()],
                Duration::from_secs(60),
            )
            .unwrap();
        // Chain 2: root executing. Interrupted.
        let r2 = root(&store, "d");
        store.transition(r2, TaskState::Assigned).unwrap();
        store.transition(r2, TaskState::Executing).unwrap();
        let recovery = store.recover().unwrap();
        assert_eq!(recovery.interrupted, vec![(r2, "d".to_string(), true)]);
        assert_eq!(recovery.pending_approvals.len(), 1);
        assert_eq!(store.task(r2).unwrap().state, TaskState::Failed);
        assert_eq!(store.task(r1).unwrap().state, TaskState::Created);
        assert_eq!(store.notices("d").unwrap().len(), 1);
    }
}
