//! Exactly one node of a cluster holds the Discord gateway connection (issue 36 §2 "Platforms"):
//! every node's Discord adapter starts without it ([`DiscordAdapter::standby`]) and serves REST and
//! the HTTP interactions endpoint; this task asks the cluster for the [`HOLD`] singleton every
//! `leaseTtl / 3`, opens the connection while it holds it and closes it when it loses it. A node
//! that does not hold it keeps asking, so when the holder dies (its hold lapses) another opens the
//! connection within the lease.
//!
//! Opening waits for Discord's READY (up to 30 s, longer than a short lease), so the hold is
//! renewed on the same schedule while the open runs ([`open_renewing`]): a slow READY does not
//! let the hold lapse and a second node connect.
//!
//! Invariants:
//! - the connection is open only after a successful `hold` and is closed as soon as a `hold` says
//!   another instance has it, or when the hold cannot be renewed for a whole lease (the database
//!   is unreachable: another node may hold it by now) — also while it is still opening: the open is
//!   abandoned and whatever it opened closed before the node asks again;
//! - a connection that would not open gives the hold back, so another node may try;
//! - a connection that stopped by itself (Discord closed it for good; the adapter notices and says
//!   it is no longer open) is reopened at the next ask, at once the first time; when opens keep
//!   failing, or connections keep stopping before the next ask sees them open, the node gives the
//!   hold back and waits before asking again, twice as long each time (up to [`BACKOFF_MAX`]), so
//!   a refused bot does not IDENTIFY every few seconds (Discord allows 1000 a day);
//! - on stop ([`DiscordHold::stop`]) the connection is closed and the hold given back, so another
//!   node takes over at once instead of after the lease.

use std::sync::Arc;
use std::time::{Duration, Instant};

use opc_adapters::AdapterError;
use opc_adapters::discord::DiscordAdapter;
use opc_agents::store::Cluster;
use tokio_util::sync::CancellationToken;

/// The name of the Discord gateway's singleton in the cluster.
pub const HOLD: &str = "discord-gateway";

/// The longest a node waits before asking again after failed opens.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

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

/// What became of an open run while renewing the hold.
enum Opening {
    Opened,
    Failed(AdapterError),
    /// A renewal said another instance holds it now.
    Lost,
    /// The hold could not be renewed for a whole lease.
    Lapsed,
    /// The task was told to stop.
    Stopped,
}

/// How long to wait before asking again after `failures` consecutive failures: not at all for
/// the first, then `every` doubled per further failure, up to [`BACKOFF_MAX`].
fn backoff(failures: u32, every: Duration) -> Duration {
    if failures <= 1 {
        return Duration::ZERO;
    }
    let doublings = (failures - 1).min(16);
    every.saturating_mul(1u32 << doublings).min(BACKOFF_MAX)
}

async fn hold(adapter: Arc<DiscordAdapter>, cluster: Arc<dyn Cluster>, stop: CancellationToken) {
    let ttl = cluster.lease_ttl();
    let every = ttl / 3;
    // When the hold was last taken or renewed.
    let mut renewed: Option<Instant> = None;
    // Whether this node opened the connection: found closed while held, it stopped by itself.
    let mut opened = false;
    // Opens that failed and connections that stopped, since an ask last saw one open.
    let mut failures: u32 = 0;
    // After repeated failures, the node does not ask again before this.
    let mut quiet_until: Option<Instant> = None;
    loop {
        if quiet_until.is_none_or(|at| Instant::now() >= at) {
            quiet_until = None;
            match cluster.hold(HOLD).await {
                Ok(true) => {
                    renewed = Some(Instant::now());
                    if adapter.gateway_open().await {
                        failures = 0;
                    } else {
                        if std::mem::take(&mut opened) {
                            // The adapter logged why; count it so a flapping connection backs off.
                            failures += 1;
                        }
                        let wait = backoff(failures, every);
                        if wait > Duration::ZERO {
                            tracing::warn!(
                                failures,
                                wait_s = wait.as_secs(),
                                "the discord gateway keeps stopping; giving the hold back for a while"
                            );
                            renewed = None;
                            quiet_until = Some(Instant::now() + wait);
                            if let Err(error) = cluster.let_go(HOLD).await {
                                tracing::warn!(%error, "could not give the discord hold back");
                            }
                        } else {
                            match open_renewing(&adapter, &*cluster, &stop, &mut renewed).await {
                                Opening::Opened => {
                                    opened = true;
                                    tracing::info!(
                                        node = %cluster.node().id,
                                        "this node holds the discord gateway connection"
                                    );
                                }
                                Opening::Failed(error) => {
                                    failures += 1;
                                    let wait = backoff(failures, every);
                                    tracing::warn!(
                                        %error,
                                        wait_s = wait.as_secs(),
                                        "could not open the discord gateway; giving the hold back"
                                    );
                                    renewed = None;
                                    quiet_until = Some(Instant::now() + wait);
                                    if let Err(error) = cluster.let_go(HOLD).await {
                                        tracing::warn!(%error, "could not give the discord hold back");
                                    }
                                }
                                Opening::Lost => {
                                    renewed = None;
                                    tracing::info!(
                                        "another node holds the discord gateway now: abandoned our open"
                                    );
                                }
                                Opening::Lapsed => {
                                    renewed = None;
                                    tracing::warn!(
                                        "the discord hold lapsed unrenewed while opening (another node may hold it): abandoned our open"
                                    );
                                }
                                Opening::Stopped => break,
                            }
                        }
                    }
                }
                Ok(false) => {
                    renewed = None;
                    opened = false;
                    if adapter.gateway_open().await {
                        tracing::info!("another node holds the discord gateway now: closing ours");
                        adapter.close_gateway().await;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "could not renew the discord gateway hold");
                    if renewed.is_none_or(|at| at.elapsed() >= ttl) && adapter.gateway_open().await
                    {
                        tracing::warn!(
                            "the discord hold lapsed unrenewed (another node may hold it): closing ours"
                        );
                        adapter.close_gateway().await;
                        renewed = None;
                        opened = false;
                    }
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

/// Open the connection while renewing the hold every `leaseTtl / 3`, as the task does between
/// asks; abandon the open (closing whatever it opened) when a renewal says another instance holds
/// it, when the hold goes unrenewed for a whole lease, or on stop.
async fn open_renewing(
    adapter: &DiscordAdapter,
    cluster: &dyn Cluster,
    stop: &CancellationToken,
    renewed: &mut Option<Instant>,
) -> Opening {
    let ttl = cluster.lease_ttl();
    let every = ttl / 3;
    let give_up = CancellationToken::new();
    let open = adapter.open_gateway_unless(give_up.clone().cancelled_owned());
    tokio::pin!(open);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Why the open is being abandoned, once it is.
    let mut abandoned: Option<Opening> = None;
    loop {
        tokio::select! {
            result = &mut open => {
                return match (abandoned, result) {
                    (Some(why), Ok(())) => {
                        // READY came just as the open was abandoned: close it again.
                        adapter.close_gateway().await;
                        why
                    }
                    (Some(why), Err(_)) => why,
                    (None, Ok(())) => Opening::Opened,
                    (None, Err(error)) => Opening::Failed(error),
                };
            }
            _ = ticker.tick(), if abandoned.is_none() => match cluster.hold(HOLD).await {
                Ok(true) => *renewed = Some(Instant::now()),
                Ok(false) => {
                    abandoned = Some(Opening::Lost);
                    give_up.cancel();
                }
                Err(error) => {
                    tracing::warn!(%error, "could not renew the discord gateway hold while opening");
                    if renewed.is_none_or(|at| at.elapsed() >= ttl) {
                        abandoned = Some(Opening::Lapsed);
                        give_up.cancel();
                    }
                }
            },
            () = stop.cancelled(), if abandoned.is_none() => {
                abandoned = Some(Opening::Stopped);
                give_up.cancel();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_after_the_first_failure_and_is_bounded() {
        let every = Duration::from_secs(5);
        assert_eq!(backoff(0, every), Duration::ZERO);
        assert_eq!(backoff(1, every), Duration::ZERO);
        assert_eq!(backoff(2, every), Duration::from_secs(10));
        assert_eq!(backoff(3, every), Duration::from_secs(20));
        assert_eq!(backoff(40, every), BACKOFF_MAX);
    }
}
