//! Startup recovery on PostgreSQL: what a stopped process left behind is made consistent before the
//! engine takes work — expired approvals rejected, interrupted tasks failed with a notice, suspended
//! trees kept. The SQL of `store/recovery.rs`, in PostgreSQL's dialect, in one transaction.
//!
//! The engine runs it after [`lock_exclusive`](super::super::Store::lock_exclusive), so no other
//! engine is moving tasks meanwhile; it still locks what it changes, as every write here does: the
//! expired pending approvals (`FOR UPDATE`, so the ids it reports are the ones it rejects even if a
//! person decides one at the same moment) and the live task rows it fails.

use super::super::{ApprovalState, Recovery, StoreError, SystemDecider, TaskId, TaskState, now_ms};
use super::sql::{Tx, exec, get, rows};

/// Startup recovery, in the caller's transaction:
/// - pending approvals past their deadline are rejected (`decided_by = timeout`);
/// - tasks suspended on a still-pending approval, and their ancestors, stay as they are (a decision
///   resumes them);
/// - every other live task was running when the previous process stopped: it is marked FAILED
///   ("interrupted"), and each affected conversation gets a notice (one per interrupted root).
pub(super) async fn recover(t: &Tx<'_>) -> Result<Recovery, StoreError> {
    const DOING: &str = "recovering after a restart";
    let now = now_ms();
    let pending = ApprovalState::Pending.as_str();
    let timeout = SystemDecider::Timeout.as_str();
    let terminal = TaskState::terminal_sql();
    let expired_approvals = rows(
        t.c(),
        DOING,
        "SELECT id FROM approvals WHERE state = $2 AND expires_at <= $1 ORDER BY id FOR UPDATE",
        &[&now, &pending],
    )
    .await?
    .iter()
    .map(|r| get(r, 0, DOING))
    .collect::<Result<_, _>>()?;
    super::approvals::reject_pending(t, "expires_at <= $1", &now, SystemDecider::Timeout, now)
        .await?;
    // Live tasks that are neither waiting on an approval pending at startup (expired just now or
    // not) nor an ancestor of one.
    let interrupted: Vec<(TaskId, String, bool)> = rows(
        t.c(),
        DOING,
        &format!(
            "WITH RECURSIVE keep(id) AS ( \
               SELECT task_id FROM approvals WHERE state = $2 OR (decided_by = $3 AND decided_at = $1) \
               UNION SELECT t.parent_id FROM tasks t JOIN keep ON t.id = keep.id WHERE t.parent_id IS NOT NULL) \
             SELECT id, conversation_id, parent_id IS NULL FROM tasks \
             WHERE state NOT IN {terminal} \
               AND id NOT IN (SELECT id FROM keep) ORDER BY id FOR UPDATE OF tasks",
        ),
        &[&now, &pending, &timeout],
    )
    .await?
    .iter()
    .map(|r| Ok((get(r, 0, DOING)?, get(r, 1, DOING)?, get(r, 2, DOING)?)))
    .collect::<Result<_, StoreError>>()?;
    let suspended_roots = rows(
        t.c(),
        DOING,
        &format!(
            "SELECT DISTINCT a.root_id FROM approvals a JOIN tasks t ON t.id = a.task_id \
             WHERE (a.state = $2 OR (a.decided_by = $3 AND a.decided_at = $1)) \
             AND t.state NOT IN {terminal} ORDER BY a.root_id",
        ),
        &[&now, &pending, &timeout],
    )
    .await?
    .iter()
    .map(|r| get(r, 0, DOING))
    .collect::<Result<_, _>>()?;
    for (id, conversation, is_root) in &interrupted {
        exec(
            t.c(),
            DOING,
            "UPDATE tasks SET state = $3, error = 'interrupted: the process stopped while this task was running', \
             updated_at = $2, finished_at = $2 WHERE id = $1",
            &[id, &now, &TaskState::Failed.as_str()],
        )
        .await?;
        if *is_root {
            let text = format!(
                "Task {id} was interrupted because OPC stopped while it was running; \
                 its partial work was discarded. Send the request again to retry."
            );
            super::notices::insert(t, conversation, Some(*id), &text, now).await?;
        }
    }
    Ok(Recovery {
        interrupted,
        expired_approvals,
        // Read in this transaction: it sees the rejections above, and what it reports is what
        // commits.
        pending_approvals: super::approvals::pending_approvals(t.c()).await?,
        suspended_roots,
    })
}
