//! Start-up: trees that were suspended on an approval when OPC stopped get their answer streamed to
//! their thread again, and each thread whose request still waits for a person is told so, once.
//!
//! Invariants: a notice is posted before its request's answer is followed (never after it), at most
//! one per channel per [`opc_adapters::Adapter::edit_interval`]; a resumed conversation is busy
//! until its request ends, so a new message in its thread waits for it.

use std::collections::HashMap;

use opc_adapters::Platform;
use opc_agents::store::TaskId;

use super::Gateway;

impl Gateway {
    /// Trees that were suspended on an approval when OPC stopped: each one's answer goes to its
    /// thread, and each thread whose request still waits for a person is told so, once, now:
    /// "OPC restarted; this request is still waiting for approval #N."
    ///
    /// Why at restart and not at shutdown: only now is it true (a stop may be for good), it is the
    /// same after a crash or kill -9 (where no shutdown code runs), and it tells the approvers that
    /// the card they saw before still works. Nothing is said at shutdown, because a suspended tree
    /// has not failed. Each restart says it once per waiting request; a request whose approval was
    /// decided (or expired) by now gets nothing, its answer follows.
    ///
    /// The notices are posted one after another, at most one per channel per
    /// [`opc_adapters::Adapter::edit_interval`] (a restart with many waiting requests does not flood a channel),
    /// and each request's answer is followed only after its notice, so the notice never comes after
    /// the answer. Events are subscribed before any of it, so none of a tree's progress is missed.
    pub(super) async fn resume_suspended(&self) {
        let inner = &self.inner;
        let mut resumed = Vec::new();
        for &root in &inner.engine.recovery().suspended_roots {
            let conversation = match inner.engine.store().task(root).await {
                Ok(task) => task.conversation_id,
                Err(_) => continue,
            };
            let Ok(Some(place)) = inner.threads.place_of(&conversation) else {
                continue;
            };
            let Some(adapter) = self.adapter(place.platform) else {
                continue;
            };
            let events = inner.engine.events().subscribe();
            // Busy from now on: a message in the thread waits for the resumed request.
            inner.queues.mark_busy(&conversation);
            resumed.push((root, conversation, place, adapter, events));
        }
        if resumed.is_empty() {
            return;
        }
        let this = self.clone();
        inner.tracker.spawn(async move {
            let mut last_post: HashMap<(Platform, String), tokio::time::Instant> = HashMap::new();
            for (root, conversation, place, adapter, events) in resumed {
                if this.inner.stop.is_cancelled() {
                    break;
                }
                if let Some(text) = this.still_waiting(root).await {
                    let channel = (place.platform, place.channel.clone());
                    if let Some(at) = last_post.get(&channel) {
                        let due = *at + adapter.edit_interval();
                        tokio::select! {
                            () = tokio::time::sleep_until(due) => {}
                            () = this.inner.stop.cancelled() => break,
                        }
                    }
                    let rendered = adapter.render(&text);
                    if let Err(e) = adapter.post(&place, &rendered).await {
                        tracing::warn!(platform = %adapter.platform(), task = root, error = %e, "could not say a request still waits for its approval");
                        this.inner.channels.error(
                            adapter.platform(),
                            "posting a restart notice",
                            &e,
                        );
                    }
                    last_post.insert(channel, tokio::time::Instant::now());
                }
                let follow = this.clone();
                this.inner.tracker.spawn(async move {
                    let engine = follow.inner.engine.clone();
                    let outcome = async move { engine.root_outcome(root).await.ok().flatten() };
                    let duty = follow.take_duty(root).await;
                    follow
                        .stream_reply(adapter, place, root, events, outcome, duty)
                        .await;
                    follow.next_in(&conversation).await;
                });
            }
        });
    }

    /// "OPC restarted; this request is still waiting for approval #N." when root `root` has
    /// approvals pending now, else `None`.
    async fn still_waiting(&self, root: TaskId) -> Option<String> {
        let pending: Vec<String> = self
            .inner
            .engine
            .pending_approvals()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.root_id == root)
            .map(|a| format!("#{}", a.id))
            .collect();
        match pending.as_slice() {
            [] => None,
            [one] => Some(format!(
                "OPC restarted; this request is still waiting for approval {one}."
            )),
            many => Some(format!(
                "OPC restarted; this request is still waiting for approvals {}.",
                many.join(", ")
            )),
        }
    }
}
