//! Reply duty across a cluster (issue 36 §2: "each reply is posted once", and a node's death costs
//! no answer): the node that streams a request's answer into its thread holds the cluster hold
//! `reply:<root>` while it does, renewed every `leaseTtl / 3`. When that node dies or is paused past
//! the lease, the hold lapses and another node takes the duty over: it finds the thread from the
//! database, follows the tree wherever it runs, and posts the answer. A clean stop hands every duty
//! on at once.
//!
//! Invariants:
//! - without a cluster (SQLite, one process) nothing here runs: the node that received a request is
//!   the only one that can answer it;
//! - an answer is posted only after a renewal of its hold succeeded just before ([`Duty::confirm`]),
//!   and the hold is deleted after the post ([`Cluster::hold_done`]), so a node that lost the duty
//!   (paused, cut off) does not post beside the one that took it over; renewals and take-overs
//!   never recreate a hold ([`Cluster::renew_hold`], [`Cluster::take_lapsed`]), so a duty done by
//!   one node is not taken up by another; a duty whose hold the database cannot confirm is posted
//!   anyway — a duplicate answer beats a lost one;
//! - a hold whose deletion failed stays registered and is deleted at a later renewal, never left to
//!   lapse (a lapsed hold would be posted again by another node);
//! - a duty is taken over only from a node that is gone (no heartbeat for two leases, or stopped)
//!   and only by a node that runs the thread's platform; a holder that merely lost the database
//!   for a while renews its own duties when it is back;
//! - the streamed message of a node that died stays as it was; the node that takes over posts the
//!   answer as a new message of the thread (and, in the web chat, in the shared transcript).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opc_agents::store::{Cluster, TaskId};
use tokio_util::sync::CancellationToken;

use super::Gateway;

/// The prefix of a reply duty's hold name: `reply:<root task id>`.
const PREFIX: &str = "reply:";

/// What a node says when it finds that another node has taken a reply's duty over (it was paused
/// or cut off past the lease): said once per duty, whichever notices first, the renewal or the
/// check before posting.
pub(super) const LOST: &str = "another node has this reply's duty now (this node was paused or cut off past the lease): it posts the answer";

/// How many leases without a heartbeat make a node gone, for its duties and waiting messages:
/// more than one, so that a database outage a little longer than the lease (every node's
/// heartbeat stopped alike) does not move duties between nodes that are all running.
const GONE_AFTER_LEASES: u32 = 2;

/// How many lapsed duties one scan takes over at most (the next scan takes the rest).
const SCAN_LIMIT: u32 = 16;

/// The hold name of root `root`'s reply duty.
fn hold_name(root: TaskId) -> String {
    format!("{PREFIX}{root}")
}

/// The root of reply duty hold `name`, if it is one.
fn root_of(name: &str) -> Option<TaskId> {
    name.strip_prefix(PREFIX)?.parse().ok()
}

/// Where one duty of this node stands.
enum State {
    /// The answer is being streamed; cancelled when another node took the duty over.
    Streaming(CancellationToken),
    /// Streamed, but the database could not record the hold when it started: the next renewal
    /// takes it ([`Cluster::hold`]) instead of renewing one that is not there.
    Unrecorded(CancellationToken),
    /// The answer was posted; the hold's deletion failed and is retried at the next renewal.
    Posted,
}

/// The reply duties this node holds, renewed together by [`Gateway::keep_duties`].
#[derive(Default)]
pub(super) struct Duties {
    held: Mutex<HashMap<TaskId, State>>,
}

impl Duties {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, State>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Root `root`'s duty was found taken over by another node: stop it, forget it, and say so
    /// ([`LOST`]) unless it was said already. The renewal and the check before posting can both
    /// find it at once on two threads; checking and cancelling under the lock makes the first
    /// the only one to say it.
    fn lose(&self, root: TaskId, token: &CancellationToken) {
        let mut held = self.lock();
        if !token.is_cancelled() {
            token.cancel();
            tracing::warn!(task = root, "{LOST}");
        }
        held.remove(&root);
    }
}

/// One reply duty held by this node: the right, and the obligation, to post root `root`'s answer.
pub(super) struct Duty {
    cluster: Arc<dyn Cluster>,
    gateway: Gateway,
    root: TaskId,
    lost: CancellationToken,
}

impl Duty {
    /// Cancelled when another node took this duty over: stop streaming, post nothing.
    pub(super) fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Whether this node may post the answer now: its hold renewed just now. `true` when the
    /// database cannot say (a duplicate answer beats a lost one). A duty found lost here is said
    /// so here ([`LOST`]); one the renewal found lost was said so there.
    pub(super) async fn confirm(&self) -> bool {
        if self.lost.is_cancelled() {
            return false;
        }
        let unrecorded = matches!(
            self.gateway.inner.duties.lock().get(&self.root),
            Some(State::Unrecorded(_))
        );
        let name = hold_name(self.root);
        let held = if unrecorded {
            self.cluster.hold(&name).await
        } else {
            self.cluster.renew_hold(&name).await
        };
        match held {
            Ok(true) => true,
            Ok(false) => {
                self.gateway.inner.duties.lose(self.root, &self.lost);
                false
            }
            Err(error) => {
                tracing::warn!(task = self.root, %error, "could not confirm this node still has a reply's duty; posting it (it may be posted twice)");
                true
            }
        }
    }

    /// The answer was posted: forget the duty across the cluster (retried at the next renewal
    /// when the database refuses now).
    pub(super) async fn done(self) {
        let duties = &self.gateway.inner.duties;
        match self.cluster.hold_done(&hold_name(self.root)).await {
            Ok(()) => {
                duties.lock().remove(&self.root);
            }
            Err(error) => {
                tracing::warn!(task = self.root, %error, "could not record a reply as posted; retrying");
                duties.lock().insert(self.root, State::Posted);
            }
        }
    }

    /// This node stops without posting (OPC is stopping, or the duty was lost): hand the duty on,
    /// so another node takes it over at once instead of after the lease.
    pub(super) async fn hand_over(self) {
        self.gateway.inner.duties.lock().remove(&self.root);
        if self.lost.is_cancelled() {
            return;
        }
        if let Err(error) = self.cluster.let_go(&hold_name(self.root)).await {
            tracing::warn!(task = self.root, %error, "could not hand a reply's duty on; another node takes it when the hold lapses");
        }
    }
}

impl Gateway {
    /// Take root `root`'s reply duty for this node; `None` without a cluster (nothing to share).
    /// A database that cannot record it does not stop the answer: the duty is then this node's
    /// alone, as without a cluster.
    pub(super) async fn take_duty(&self, root: TaskId) -> Option<Duty> {
        let cluster = self.inner.cluster.clone()?;
        let lost = CancellationToken::new();
        let mut state = State::Streaming(lost.clone());
        match cluster.hold(&hold_name(root)).await {
            Ok(true) => {}
            Ok(false) => {
                // Another node's already (it took over a lapsed hold): it posts the answer.
                return Some(Duty {
                    cluster,
                    gateway: self.clone(),
                    root,
                    lost: cancelled(),
                });
            }
            Err(error) => {
                tracing::warn!(task = root, %error, "could not record this node's reply duty in the cluster yet; retrying with the next renewal");
                state = State::Unrecorded(lost.clone());
            }
        }
        self.inner.duties.lock().insert(root, state);
        Some(Duty {
            cluster,
            gateway: self.clone(),
            root,
            lost,
        })
    }

    /// Every `leaseTtl / 3` until the gateway stops: renew this node's reply duties (a duty another
    /// node has taken over is stopped here), take over the duties of nodes that died, then the
    /// messages that waited on them (`parked.rs`).
    pub(super) async fn keep_duties(self, cluster: Arc<dyn Cluster>) {
        let every = cluster.lease_ttl() / 3;
        let mut failing = false;
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = self.inner.stop.cancelled() => break,
            }
            let ok = self.renew(&*cluster).await
                && self.adopt(&cluster).await
                && self.adopt_waiting(&cluster).await;
            if !ok && !failing {
                tracing::warn!("cannot renew or share reply duties across the cluster; retrying");
            }
            failing = !ok;
        }
    }

    /// Renew every duty held; `false` when the database failed.
    async fn renew(&self, cluster: &dyn Cluster) -> bool {
        let roots: Vec<(TaskId, Option<(CancellationToken, bool)>)> = self
            .inner
            .duties
            .lock()
            .iter()
            .map(|(root, state)| {
                let token = match state {
                    State::Streaming(token) => Some((token.clone(), true)),
                    State::Unrecorded(token) => Some((token.clone(), false)),
                    State::Posted => None,
                };
                (*root, token)
            })
            .collect();
        let mut ok = true;
        for (root, streaming) in roots {
            let name = hold_name(root);
            let Some((token, recorded)) = streaming else {
                match cluster.hold_done(&name).await {
                    Ok(()) => {
                        self.inner.duties.lock().remove(&root);
                    }
                    Err(_) => ok = false,
                }
                continue;
            };
            let held = if recorded {
                cluster.renew_hold(&name).await
            } else {
                cluster.hold(&name).await
            };
            match held {
                Ok(true) if !recorded => {
                    // Recorded now (unless the answer was posted meanwhile).
                    if let Some(state @ State::Unrecorded(_)) =
                        self.inner.duties.lock().get_mut(&root)
                    {
                        *state = State::Streaming(token);
                    }
                }
                Ok(true) => {}
                // A warning: this node was paused or cut off past the lease.
                Ok(false) => self.inner.duties.lose(root, &token),
                Err(_) => ok = false,
            }
        }
        ok
    }

    /// Take over the reply duties whose holders stopped renewing them; `false` when the database
    /// failed.
    async fn adopt(&self, cluster: &Arc<dyn Cluster>) -> bool {
        let lapsed = match cluster.lapsed_holds(PREFIX, SCAN_LIMIT).await {
            Ok(lapsed) => lapsed,
            Err(_) => return false,
        };
        if lapsed.is_empty() {
            return true;
        }
        // Only a gone node's duties: a holder that merely could not reach the database for a
        // while (an outage every node saw) renews its own when it is back, and keeps its pages.
        let Some(live) = self.live_instances(cluster).await else {
            return false;
        };
        for (name, holder) in lapsed {
            if live.contains(&holder) {
                continue;
            }
            let Some(root) = root_of(&name) else { continue };
            if self.inner.duties.lock().contains_key(&root) {
                // Ours, lapsed while the database was away: the next renewal takes it back.
                continue;
            }
            let Some((conversation, place, adapter)) = self.thread_of(root).await else {
                continue;
            };
            match cluster.take_lapsed(&name).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => return false,
            }
            tracing::info!(task = root, platform = %place.platform, "took over the reply of a request whose node stopped");
            let lost = CancellationToken::new();
            self.inner
                .duties
                .lock()
                .insert(root, State::Streaming(lost.clone()));
            let duty = Duty {
                cluster: cluster.clone(),
                gateway: self.clone(),
                root,
                lost,
            };
            let events = self.inner.engine.events().subscribe();
            // Busy from now on on this node: a follow-up that reaches it waits for this answer.
            self.inner.queues.mark_busy(&conversation);
            let this = self.clone();
            self.inner.tracker.spawn(async move {
                let engine = this.inner.engine.clone();
                let outcome = async move { engine.root_outcome(root).await.ok().flatten() };
                this.stream_reply(adapter, place, root, events, outcome, Some(duty))
                    .await;
                this.next_in(&conversation).await;
            });
        }
        true
    }

    /// The instances of the nodes that count as running: heartbeat within [`GONE_AFTER_LEASES`]
    /// leases (by this node's clock) and not stopped, this node included; `None` when the database
    /// failed.
    pub(super) async fn live_instances(&self, cluster: &Arc<dyn Cluster>) -> Option<Vec<i64>> {
        let nodes = cluster.nodes().await.ok()?;
        let now = opc_agents::store::now_ms();
        let grace = cluster.lease_ttl() * GONE_AFTER_LEASES;
        let mut live: Vec<i64> = nodes
            .iter()
            .filter(|n| n.alive(now, grace))
            .map(|n| n.instance)
            .collect();
        live.push(cluster.node().instance);
        Some(live)
    }

    /// Root `root`'s conversation, thread and adapter on this node; `None` (said once in the log
    /// at debug level) when its thread is unknown or its platform does not run here.
    async fn thread_of(
        &self,
        root: TaskId,
    ) -> Option<(String, opc_adapters::Place, Arc<dyn opc_adapters::Adapter>)> {
        let conversation = match self.inner.engine.store().task(root).await {
            Ok(task) => task.conversation_id,
            Err(error) => {
                tracing::debug!(task = root, %error, "a lapsed reply duty's task could not be read");
                return None;
            }
        };
        let place = match self.inner.threads.place_of(&conversation) {
            Ok(Some(place)) => place,
            Ok(None) => {
                tracing::debug!(task = root, "a lapsed reply duty has no thread recorded");
                return None;
            }
            Err(error) => {
                tracing::debug!(task = root, %error, "a lapsed reply duty's thread could not be read");
                return None;
            }
        };
        let adapter = self.adapter(place.platform)?;
        Some((conversation, place, adapter))
    }
}

/// A token already cancelled: a duty held by another node from the start.
fn cancelled() -> CancellationToken {
    let token = CancellationToken::new();
    token.cancel();
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_names_round_trip() {
        assert_eq!(hold_name(42), "reply:42");
        assert_eq!(root_of("reply:42"), Some(42));
        assert_eq!(root_of("reply:x"), None);
        assert_eq!(root_of("discord-gateway"), None);
    }
}
