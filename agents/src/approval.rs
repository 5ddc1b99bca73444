//! The `request_approval` flow (the session runs it for the tool of that name, through the tools'
//! `ToolHost` seam): persist a pending approval, suspend the task, and resume it with the human's
//! decision. It takes the summary and options, not the tool's argument type, so it does not depend on
//! `tools`.
//!
//! Fail closed: no decision before `approvalTimeout` is a rejection, and so is a cancelled task. The
//! approval row is the source of truth; the in-process waiter only wakes the session early. A decision
//! taken while no session waits (the process restarted) resumes the tree from the database instead
//! ([`crate::Engine::decide`]).
//!
//! Invariant: while the task waits, its deadline and its ancestors' are paused (see [`crate::clock`]),
//! and it holds no agent slot.

use std::sync::Arc;
use std::time::Duration;

use crate::events::Event;
use crate::state::EngineState;
use crate::store::{
    Approval, ApprovalState, Decided, OfferedOption, StoreError, SystemDecider, TaskRecord,
    TaskState, now_ms,
};

/// Ask, wait, and answer the tool call with the decision: `(content, is_error)`. If anything fails
/// while the approval is pending, it is rejected (fail closed) before the error is returned.
pub(crate) async fn request(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    tool_use_id: &str,
    summary: &str,
    options: &[OfferedOption],
    clocks: &[crate::clock::Clock],
) -> Result<(String, bool), StoreError> {
    ask(rt, record, tool_use_id, summary, options, clocks)
        .await
        .map(|a| answer(&a))
}

/// Ask, wait, and return the decided approval (for a tool that acts on the option chosen: Bash).
/// If anything fails while the approval is pending, it is rejected (fail closed) before the error is
/// returned.
pub(crate) async fn ask(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    tool_use_id: &str,
    summary: &str,
    options: &[OfferedOption],
    clocks: &[crate::clock::Clock],
) -> Result<Approval, StoreError> {
    let store = rt.store();
    let timeout = rt.config().framework.execution.approval_timeout;
    let (approval, created) = store
        .request_approval(record, tool_use_id, summary, options, timeout)
        .await?;
    if approval.state != ApprovalState::Pending {
        // Decided while this tree was suspended (or in another process): the wait ends here.
        observe(&approval);
        return Ok(approval);
    }
    let result = wait(rt, record, &approval, created, clocks).await;
    if let Ok(decided) = &result {
        observe(decided);
    }
    if result.is_err()
        && let Err(e) = store
            .decide(approval.id, "reject", SystemDecider::Error.as_str())
            .await
    {
        // The first error (returned) fails the task; this one only means the approval stays pending
        // until it expires (startup recovery rejects expired ones). Logged with its ids, since both
        // errors come from the same store.
        tracing::error!(
            approval = approval.id,
            task = record.id,
            error = %e,
            "cannot reject an approval after its wait failed"
        );
    }
    result
}

/// The wait for a decided approval, as a span under the asking tool call and a metric.
fn observe(approval: &Approval) {
    let Some(decided_ms) = approval.decided_at else {
        return;
    };
    crate::spans::approval_waited(&crate::spans::ApprovalWait {
        id: approval.id,
        option: approval.decision.as_deref().unwrap_or("reject"),
        decided_by: approval.decided_by.as_deref().unwrap_or("unknown"),
        asked_ms: approval.created_at,
        decided_ms,
    });
}

async fn wait(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    approval: &Approval,
    created: bool,
    clocks: &[crate::clock::Clock],
) -> Result<Approval, StoreError> {
    let store = rt.store();
    // Register before re-reading, so a decision landing in between is not missed.
    let (mut rx, _unregister) = rt.approvals().register(approval.id);
    let before = store
        .transition(record.id, TaskState::AwaitingApproval)
        .await?;
    if created {
        rt.events().publish(Event::ApprovalRequested {
            approval: approval.id,
            task: record.id,
            conversation: record.conversation_id.clone(),
            agent: record.agent.clone(),
            path: rt.path_of(&record.agent),
            summary: approval.summary.clone(),
            options: approval.labels(),
        });
    }
    let _paused: Vec<_> = clocks.iter().map(|c| c.pause()).collect();
    let remaining =
        Duration::from_millis(approval.expires_at.saturating_sub(now_ms()).max(0) as u64);
    let decided_in_time = tokio::time::timeout(remaining, async {
        loop {
            if let Some(a) = store.approval(approval.id).await?
                && a.state != ApprovalState::Pending
            {
                return Ok::<_, StoreError>(a);
            }
            if rx.changed().await.is_err() {
                // Cannot happen while `_unregister` holds the sender in the map; wait for the timeout.
                std::future::pending::<()>().await;
            }
        }
    })
    .await;
    let decided = match decided_in_time {
        Ok(result) => result?,
        Err(_) => match store
            .decide(approval.id, "reject", SystemDecider::Timeout.as_str())
            .await?
        {
            Decided::Recorded(a) | Decided::Expired(a) | Decided::AlreadyDecided(a) => {
                if a.system_decider() == Some(SystemDecider::Timeout) {
                    rt.events().publish(Event::ApprovalResolved {
                        approval: a.id,
                        task: a.task_id,
                        decision: "reject".into(),
                        by: SystemDecider::Timeout.as_str().into(),
                    });
                }
                a
            }
            Decided::NotFound => approval.clone(),
        },
    };
    // Back to what the task was doing (a parallel delegation may still be running).
    let back = if before == TaskState::Delegated {
        TaskState::Delegated
    } else {
        TaskState::Executing
    };
    store.transition(record.id, back).await?;
    Ok(decided)
}

/// The tool result the model sees for a decided approval: the outcome first (the model acts on it),
/// then the option chosen when its label does not already say it.
fn answer(approval: &Approval) -> (String, bool) {
    let decision = approval.decision.as_deref().unwrap_or("reject");
    let by = approval.decided_by.as_deref().unwrap_or("unknown");
    let chose = if ["approve", "reject"]
        .iter()
        .any(|k| decision.trim().eq_ignore_ascii_case(k))
    {
        String::new()
    } else {
        format!(" (chose \"{decision}\")")
    };
    let text = match approval.system_decider() {
        Some(SystemDecider::Timeout) => {
            "rejected: no decision was made before the approval timed out".to_string()
        }
        Some(SystemDecider::Cancelled) => "rejected: the request was cancelled".to_string(),
        Some(SystemDecider::Error) => "rejected: the approval could not be processed".to_string(),
        None if approval.state == ApprovalState::Approved => format!("approved by {by}{chose}"),
        None => format!("rejected by {by}{chose}"),
    };
    (text, false)
}
