//! Streaming a root task's answer into its thread: tokens go into one [`StreamingReply`], the rest of
//! the tree's events go to the adapter as progress, and the outcome is shown exactly at the end.
//!
//! Invariants:
//! - only events of the root's own tree are followed (the tree is learnt from `TaskCreated` and
//!   `Delegated`), and only the root's tokens are streamed;
//! - a streamed answer that waited for an approval is posted below the approval card, not above it
//!   ([`StreamingReply::seal`]);
//! - events published before the outcome are shown before the answer;
//! - a request OPC stopped for (no outcome) gets no message: the restart says what became of it
//!   (alone), or the node that takes its reply duty over posts it (in a cluster, [`super::reply_duty`]);
//! - in a cluster, the answer is posted only while this node holds the reply's duty.

use std::collections::HashSet;
use std::sync::Arc;

use opc_adapters::{Adapter, Place, StreamingReply};
use opc_agents::store::TaskId;
use opc_agents::{Event, Outcome, TaskState};
use tokio::sync::broadcast;

use super::Gateway;
use super::reply_duty::Duty;

impl Gateway {
    /// Stream root task `root`'s answer into `place`, then show its outcome exactly. Progress events of
    /// the tree go to the adapter (the web chat shows them as a trace).
    pub(super) async fn stream_reply(
        &self,
        adapter: Arc<dyn Adapter>,
        place: Place,
        root: TaskId,
        mut events: broadcast::Receiver<Event>,
        outcome: impl Future<Output = Option<Outcome>>,
        duty: Option<Duty>,
    ) {
        let mut reply = StreamingReply::new(adapter.clone(), place.clone());
        let mut tree: HashSet<TaskId> = HashSet::from([root]);
        let mut events_open = true;
        // After a failed update, the next try waits a second (the platform or the database is
        // down: trying at every token would flood the log and the platform), and only the first
        // failure of a run is logged.
        let mut retry_at: Option<tokio::time::Instant> = None;
        let mut failed = false;
        tokio::pin!(outcome);
        let outcome = loop {
            let due = reply.due().map(|due| match retry_at {
                Some(retry) => due.max(retry),
                None => due,
            });
            tokio::select! {
                outcome = &mut outcome => break outcome,
                // Another node took the reply over: it posts the answer.
                () = lost(duty.as_ref()) => break None,
                event = events.recv(), if events_open => match event {
                    Ok(event) => follow(&adapter, &place, root, &mut tree, &mut reply, event).await,
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => events_open = false,
                },
                () = sleep_until(due), if due.is_some() => {
                    match reply.flush_if_due().await {
                        Ok(_) => retry_at = None,
                        Err(e) => {
                            retry_at = Some(tokio::time::Instant::now() + std::time::Duration::from_secs(1));
                            if !failed {
                                failed = true;
                                tracing::warn!(platform = %adapter.platform(), error = %e, "could not update a streaming reply; retrying every second");
                            }
                            self.inner.channels.error(adapter.platform(), "updating a streaming reply", &e);
                        }
                    }
                }
            }
        };
        // The tree's events were all published before its outcome, but `select!` may have taken the
        // outcome first: show what is still buffered, so the trace is complete before the answer.
        loop {
            match events.try_recv() {
                Ok(event) => follow(&adapter, &place, root, &mut tree, &mut reply, event).await,
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
        let Some(outcome) = outcome else {
            // OPC stops (or the duty moved on): another node of the cluster posts the answer.
            if let Some(duty) = duty {
                duty.hand_over().await;
            }
            return;
        };
        if let Some(duty) = &duty
            && !duty.confirm().await
        {
            // (`confirm` said so.)
            return;
        }
        if let Err(e) = reply.finish(&final_text(&outcome)).await {
            tracing::warn!(platform = %adapter.platform(), error = %e, "could not post an answer");
            self.inner
                .channels
                .error(adapter.platform(), "posting an answer", &e);
        }
        if let Some(duty) = duty {
            duty.done().await;
        }
    }
}

/// Whether `event` belongs to root `root`'s tree; learns the tree's tasks from `TaskCreated`.
fn in_tree(event: &Event, root: TaskId, tree: &mut HashSet<TaskId>) -> bool {
    match event {
        Event::TaskCreated { task, root: of, .. } => {
            if *of == root {
                tree.insert(*task);
                true
            } else {
                false
            }
        }
        Event::AgentStarted { task, .. }
        | Event::ToolCalled { task, .. }
        | Event::ToolFinished { task, .. }
        | Event::Token { task, .. }
        | Event::StreamRestarted { task }
        | Event::PrivacyMasked { task, .. }
        | Event::PrivacyBlocked { task, .. }
        | Event::AgentFinished { task, .. }
        | Event::Escalated { task, .. }
        | Event::ApprovalRequested { task, .. }
        | Event::ApprovalResolved { task, .. } => tree.contains(task),
        // Not a conversation's: config changes, and memory work (after the answer, off its tree).
        Event::ConfigReloaded { .. }
        | Event::ConfigRejected { .. }
        | Event::FactsRecorded { .. }
        | Event::FactsRejected { .. }
        | Event::MemoryWorkCapped { .. }
        | Event::MemoryWorkFailed { .. }
        | Event::Consolidated { .. } => false,
        Event::Delegated { task, child, .. } => {
            if tree.contains(task) {
                tree.insert(*child);
                true
            } else {
                false
            }
        }
    }
}

/// One engine event while streaming root `root`'s reply: its tokens go into the reply, the rest of its
/// tree's events to the adapter as progress.
async fn follow(
    adapter: &Arc<dyn Adapter>,
    place: &Place,
    root: TaskId,
    tree: &mut HashSet<TaskId>,
    reply: &mut StreamingReply,
    event: Event,
) {
    if !in_tree(&event, root, tree) {
        return;
    }
    if matches!(event, Event::ApprovalRequested { .. })
        && let Err(e) = reply.seal().await
    {
        // The answer still comes; it may then show above the card.
        tracing::warn!(platform = %adapter.platform(), error = %e, "could not finish a streamed reply before an approval card");
    }
    match &event {
        Event::Token { task, text, .. } if *task == root => reply.push(text),
        Event::Token { .. } => {}
        Event::StreamRestarted { task } if *task == root => reply.restart(),
        _ => {
            if matches!(&event, Event::ToolCalled { task, .. } if *task == root) {
                reply.end_turn();
            }
            if let Ok(json) = serde_json::to_value(&event) {
                adapter.progress(place, &json).await;
            }
        }
    }
}

/// The text shown for an outcome: the answer, or what went wrong.
fn final_text(outcome: &Outcome) -> String {
    match outcome.state {
        TaskState::Completed => outcome.text.clone(),
        TaskState::Cancelled => format!("**Cancelled.** {}", outcome.text),
        TaskState::Escalated => outcome.text.clone(),
        _ => format!("**This request failed.** {}", outcome.text),
    }
}

/// Resolves when `duty` was taken over by another node; never without a duty.
async fn lost(duty: Option<&Duty>) {
    match duty {
        Some(duty) => duty.lost().cancelled().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
