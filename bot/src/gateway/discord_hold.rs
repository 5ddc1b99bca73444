//! Exactly one node of a cluster holds the Discord gateway connection (issue 36 §2 "Platforms"):
//! every node's Discord adapter starts without it ([`DiscordAdapter::standby`]) and serves REST and
//! the HTTP interactions endpoint; this task asks the cluster for the [`HOLD`] singleton every
//! `leaseTtl / 3`, opens the connection while it holds it and closes it when it loses it. A node
//! that does not hold it keeps asking, so when the holder dies (its hold lapses) another opens the
//! connection within the lease.
//!
//! Invariants:
//! - the connection is open only after a successful `hold` and is closed as soon as a `hold` says
//!   another instance has it, or when the hold cannot be renewed for a whole lease (the database
//!   is unreachable: another node may hold it by now);
//! - a connection that would not open gives the hold back, so another node may try;
//! - on stop ([`DiscordHold::stop`]) the connection is closed and the hold given back, so another
//!   node takes over at once instead of after the lease.

use std::sync::Arc;
use std::time::Instant;

use opc_adapters::discord::DiscordAdapter;
use opc_agents::store::Cluster;
use tokio_util::sync::CancellationToken;

/// The name of the Discord gateway's singleton in the cluster.
pub const HOLD: &str = "discord-gateway";

/// The running holder task.
pub struct DiscordHold {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl DiscordHold {
    /// Start asking for the hold for `adapter` on `cluster`.
    pub fn spawn(adapter: Arc<DiscordAdapter>, cluster: Arc<dyn Cluster>) -> DiscordHold {
        let stop = CancellationToken::new();
        let task = tokio::spawn(hold(adapter, cluster, stop.clone()));
        DiscordHold { stop, task }
    }

    /// Stop: close the connection and give the hold back.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn hold(adapter: Arc<DiscordAdapter>, cluster: Arc<dyn Cluster>, stop: CancellationToken) {
    let ttl = cluster.lease_ttl();
    let every = ttl / 3;
    // When the hold was last taken or renewed.
    let mut renewed: Option<Instant> = None;
    loop {
        match cluster.hold(HOLD).await {
            Ok(true) => {
                renewed = Some(Instant::now());
                if !adapter.gateway_open().await {
                    match adapter.open_gateway().await {
                        Ok(()) => tracing::info!(
                            node = %cluster.node().id,
                            "this node holds the discord gateway connection"
                        ),
                        Err(error) => {
                            tracing::warn!(%error, "could not open the discord gateway; giving the hold back");
                            renewed = None;
                            if let Err(error) = cluster.let_go(HOLD).await {
                                tracing::warn!(%error, "could not give the discord hold back");
                            }
                        }
                    }
                }
            }
            Ok(false) => {
                renewed = None;
                if adapter.gateway_open().await {
                    tracing::info!("another node holds the discord gateway now: closing ours");
                    adapter.close_gateway().await;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not renew the discord gateway hold");
                if renewed.is_none_or(|at| at.elapsed() >= ttl) && adapter.gateway_open().await {
                    tracing::warn!(
                        "the discord hold lapsed unrenewed (another node may hold it): closing ours"
                    );
                    adapter.close_gateway().await;
                    renewed = None;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = stop.cancelled() => break,
        }
    }
    adapter.close_gateway().await;
    if let Err(error) = cluster.let_go(HOLD).await {
        tracing::warn!(%error, "could not give the discord hold back on stop");
    }
}
