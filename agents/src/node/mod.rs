//! A cluster node's background work (issue 36 §2): the heartbeat that renews this node's leases
//! and notices the trees it lost, and the dispatcher that claims queued or orphaned trees while the
//! node has room and turns the cluster's wake-ups into local actions.
//!
//! Why its own module, reaching the engine through [`NodeHost`] (which it owns): the loop is the
//! same whatever runs the trees, and the engine stays the one place that starts and stops them.
//!
//! Invariants:
//! - a claim happens only while the node has room ([`NodeHost::room`]): sending every request to
//!   one node still spreads the work over every node's slots;
//! - a tree is given up locally ([`NodeHost::lost`]) as soon as a heartbeat shows its lease moved
//!   on, or when no heartbeat succeeded for a whole lease (the database may have let another node
//!   take it); the fenced store makes a late write harmless either way, this only stops the work;
//! - a wake-up is a hint: every [`Wake::Tick`] re-reads what the hints would have said.
//!
//! `relay` carries the live events of this node's trees to the other nodes, and theirs here.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::events::EventBus;
use crate::store::{Claimed, Cluster, StoreError, TaskId, Wake};

mod relay;

/// What the node loop asks of the engine.
#[async_trait::async_trait]
pub(crate) trait NodeHost: Send + Sync + 'static {
    /// How many more trees this node should take on now.
    fn room(&self) -> usize;
    /// Agent slots in use, and the trees this node runs with their lease tokens.
    fn load(&self) -> (u32, Vec<(TaskId, i64)>);
    /// Run a tree this node just claimed.
    fn run(&self, claim: Claimed);
    /// Stop running `root` here: its lease moved on (nothing more is written for it).
    fn lost(&self, root: TaskId);
    /// Root `root` ended somewhere: answer whoever waits for it here.
    async fn ended(&self, root: TaskId);
    /// Re-read everything a missed wake-up could have said (waiting roots, approvals).
    async fn catch_up(&self);
    /// An approval was decided somewhere: wake the session waiting for it here.
    fn decided(&self, approval: i64);
    /// A task was cancelled somewhere: stop it here if it runs here.
    fn cancelled(&self, task: TaskId);
    /// Hold this node's claims off until the guard drops: a claim and the local record of the tree
    /// it claimed happen under it, and so does a heartbeat, which would otherwise hand back a lease
    /// claimed between reading what runs here and renewing it.
    async fn claims(&self) -> tokio::sync::OwnedMutexGuard<()>;
    /// Whether this node claims trees it did not queue itself (`opc run` does; `opc chat` runs
    /// only its own).
    fn serves(&self) -> bool;
}

/// Join the cluster and start the node's loops on `tracker`; they stop with `shutdown`.
pub(crate) async fn start(
    cluster: Arc<dyn Cluster>,
    host: Arc<dyn NodeHost>,
    slots_total: u32,
    bus: EventBus,
    tracker: &tokio_util::task::TaskTracker,
    shutdown: CancellationToken,
) -> Result<(), StoreError> {
    cluster.join(slots_total).await?;
    // Subscribed before the first claim, so a root queued in between wakes the dispatcher.
    let wakes = cluster.wakes();
    tracker.spawn(heartbeat(cluster.clone(), host.clone(), shutdown.clone()));
    tracker.spawn(relay::relay_out(
        cluster.clone(),
        bus.clone(),
        shutdown.clone(),
    ));
    tracker.spawn(dispatch(cluster, host, bus, wakes, shutdown));
    Ok(())
}

/// Renew this node's leases every third of a lease, and give up the trees whose lease moved on.
async fn heartbeat(
    cluster: Arc<dyn Cluster>,
    host: Arc<dyn NodeHost>,
    shutdown: CancellationToken,
) {
    let ttl = cluster.lease_ttl();
    let every = ttl / 3;
    let mut last_ok = tokio::time::Instant::now();
    let mut failing = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let beat = {
            let _no_claims = host.claims().await;
            let (in_use, held) = host.load();
            cluster
                .heartbeat(in_use, &held)
                .await
                .map(|renewed| (renewed, held))
        };
        match beat {
            Ok((renewed, held)) => {
                if failing {
                    tracing::info!("cluster heartbeat: PostgreSQL answers again");
                    failing = false;
                }
                last_ok = tokio::time::Instant::now();
                let renewed: HashSet<TaskId> = renewed.into_iter().collect();
                for (root, _) in held {
                    if !renewed.contains(&root) {
                        tracing::warn!(
                            root,
                            "this node's lease on the tree moved to another node; stopping it here"
                        );
                        host.lost(root);
                    }
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "cluster heartbeat failed; retrying");
                    failing = true;
                }
                if last_ok.elapsed() >= ttl {
                    // Another node may hold these trees by now: stop working on them here (a
                    // write would be refused anyway) and let whoever claims them resume them.
                    for (root, _) in host.load().1 {
                        host.lost(root);
                    }
                }
            }
        }
    }
}

/// Claim while there is room, and act on the cluster's wake-ups.
async fn dispatch(
    cluster: Arc<dyn Cluster>,
    host: Arc<dyn NodeHost>,
    bus: EventBus,
    mut wakes: tokio::sync::broadcast::Receiver<Wake>,
    shutdown: CancellationToken,
) {
    let instance = cluster.node().instance;
    // Work queued before this node joined is claimed at once.
    let mut claim_now = true;
    loop {
        if claim_now && host.serves() {
            claim(&*cluster, &*host).await;
        }
        let wake = tokio::select! {
            _ = shutdown.cancelled() => return,
            wake = wakes.recv() => wake,
        };
        claim_now = match wake {
            Ok(Wake::Work) => true,
            Ok(Wake::RootEnded(root)) => {
                host.ended(root).await;
                // A tree ended here or elsewhere: there may be room now.
                true
            }
            Ok(Wake::Approval(id)) => {
                host.decided(id);
                false
            }
            Ok(Wake::Cancelled(task)) => {
                host.cancelled(task);
                false
            }
            // The bot follows saved configs itself (it subscribes to the wake-ups): nothing here.
            Ok(Wake::Config(_)) => false,
            Ok(Wake::Events(payload)) => {
                relay::relay_in(&bus, instance, &payload);
                false
            }
            Ok(Wake::Tick) | Err(RecvError::Lagged(_)) => {
                host.catch_up().await;
                true
            }
            Err(RecvError::Closed) => {
                // The listener is gone (the store was dropped): poll on our own.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                host.catch_up().await;
                true
            }
        };
    }
}

/// Claim trees while the node has room and there are trees to claim.
async fn claim(cluster: &dyn Cluster, host: &dyn NodeHost) {
    while host.room() > 0 {
        let _no_heartbeat = host.claims().await;
        match cluster.claim().await {
            Ok(Some(claimed)) => host.run(claimed),
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim queued work; retrying on the next wake-up");
                return;
            }
        }
    }
}
