//! The gateway websocket (serenity's client and its shards), opened and closed on demand: alone,
//! `opc run` opens it once at start ([`DiscordAdapter::connect`]) and reopens it with a backoff
//! whenever it stops by itself; a node of a cluster opens it only while it holds the cluster's
//! Discord singleton, and closes it when it loses it, so exactly one node receives the gateway's
//! events ([`DiscordAdapter::standby`], [`DiscordAdapter::open_gateway`],
//! [`DiscordAdapter::close_gateway`]). REST and the HTTP interactions endpoint work either way.
//!
//! serenity's client stops by itself when Discord closes the connection for good (authentication
//! failed, intents refused) and `Client::start` returns; the task running it then clears the state
//! — only if it still holds that same client's shards, since a close and an open may have replaced
//! them meanwhile — and logs it once, so [`DiscordAdapter::gateway_open`] says `false` and whoever
//! opens the connection (the keeper of a single node, the cluster's hold task) opens it again.
//!
//! Invariants: at most one connection per adapter (open and close are serialised); an open that
//! fails, is abandoned, or whose future is dropped leaves no connection behind; after
//! [`crate::Adapter::shutdown`] nothing opens again.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serenity::all::{ClientBuilder, GatewayIntents, ShardManager};
use tokio::sync::{Notify, oneshot};

use crate::{AdapterError, Platform};

use super::gateway::Handler;
use super::rest::{api_error, build_http, error_kind};
use super::{DiscordAdapter, DiscordConfig, READY_TIMEOUT};

/// The first wait of a single node before reopening a connection that stopped by itself.
const REOPEN_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between reopenings (Discord allows 1000 IDENTIFYs a day).
const REOPEN_MAX: Duration = Duration::from_secs(300);
/// A connection that stayed open this long before stopping was healthy: the next reopening starts
/// from [`REOPEN_FIRST`] again instead of doubling the last wait.
const STABLE: Duration = Duration::from_secs(60);

/// The gateway connection of one adapter.
pub(super) struct Connection {
    /// How to reach Discord (a new client is built per open).
    pub(super) config: DiscordConfig,
    pub(super) state: tokio::sync::Mutex<State>,
    /// Woken when the open connection stops by itself, and on shutdown (the single node's keeper).
    stopped: Notify,
}

impl Connection {
    pub(super) fn new(config: DiscordConfig) -> Connection {
        Connection {
            config,
            state: tokio::sync::Mutex::new(State::default()),
            stopped: Notify::new(),
        }
    }

    /// serenity's client running `shards` has returned (`why`): forget the connection if it is
    /// still the open one (not already closed, or replaced by a later open), and say so once.
    async fn client_stopped(&self, shards: &Arc<ShardManager>, why: &str) {
        let current = {
            let mut state = self.state.lock().await;
            match &state.shards {
                Some(open) if Arc::ptr_eq(open, shards) => state.shards.take(),
                _ => None,
            }
        };
        if current.is_none() {
            // Closed on purpose (close_gateway, shutdown) or already replaced: nothing to notice.
            return;
        }
        tracing::warn!(
            reason = why,
            "the discord gateway connection stopped by itself; it will be opened again"
        );
        self.stopped.notify_one();
        // The client is gone; this only releases serenity's shard queuer (a dead shard runner may
        // make serenity warn that it could not shut it down cleanly).
        shards.shutdown_all().await;
    }
}

#[derive(Default)]
pub(super) struct State {
    /// The open connection's shards.
    shards: Option<Arc<ShardManager>>,
    /// Shut down: never open again.
    closed: bool,
}

/// Shuts down a client's shards unless disarmed: an open whose future is dropped before it
/// finishes (its caller gave up) leaves no connection behind.
struct Pending(Option<Arc<ShardManager>>);

impl Pending {
    /// The open succeeded (or already shut its shards down): nothing to undo.
    fn disarm(&mut self) -> Option<Arc<ShardManager>> {
        self.0.take()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(shards) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { shards.shutdown_all().await });
        }
    }
}

impl DiscordAdapter {
    /// Open the gateway connection, unless open: start serenity's client, wait for READY (up to
    /// 30 s), register the slash commands. An error leaves it closed.
    pub async fn open_gateway(&self) -> Result<(), AdapterError> {
        self.open_gateway_unless(std::future::pending()).await
    }

    /// [`DiscordAdapter::open_gateway`], abandoned as soon as `abandon` completes (the caller no
    /// longer may hold the connection): whatever was opened is closed before this returns an error.
    pub async fn open_gateway_unless(
        &self,
        abandon: impl Future<Output = ()>,
    ) -> Result<(), AdapterError> {
        let mut state = self.connection.state.lock().await;
        if state.closed || state.shards.is_some() {
            return Ok(());
        }
        let (ready_tx, ready_rx) = oneshot::channel();
        let handler = Handler {
            shared: self.shared.clone(),
            ready: Mutex::new(Some(ready_tx)),
        };
        let intents = GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT;
        let mut client = ClientBuilder::new_with_http(build_http(&self.connection.config), intents)
            .event_handler(handler)
            .await
            .map_err(|e| api_error("GET /gateway", e))?;
        let shards = client.shard_manager.clone();
        let mut pending = Pending(Some(shards.clone()));
        // The client's end: told to the open while it waits, and to the connection afterwards.
        let (stopped_tx, mut stopped_rx) = oneshot::channel::<String>();
        tokio::spawn(async move {
            let why = match client.start().await {
                Ok(()) => "closed".to_string(),
                Err(error) => error_kind(&error),
            };
            drop(client);
            let _ = stopped_tx.send(why);
        });
        let failed = |error: String| AdapterError::Transport {
            platform: Platform::Discord,
            method: "gateway READY".into(),
            error,
        };
        let ready = tokio::select! {
            ready = ready_rx => ready.ok(),
            why = &mut stopped_rx => {
                // The client is over: nothing to shut down.
                pending.disarm();
                let why = why.unwrap_or_else(|_| "stopped".into());
                return Err(failed(format!("the gateway connection ended before READY ({why})")));
            }
            () = tokio::time::sleep(READY_TIMEOUT) => None,
            () = abandon => {
                if let Some(shards) = pending.disarm() {
                    shards.shutdown_all().await;
                }
                return Err(failed("abandoned before READY".into()));
            }
        };
        let Some(ready) = ready else {
            if let Some(shards) = pending.disarm() {
                shards.shutdown_all().await;
            }
            return Err(failed(format!(
                "no READY within {} s",
                READY_TIMEOUT.as_secs()
            )));
        };
        let _ = self.shared.application_id.set(ready);
        if let Err(error) = self.register_commands().await {
            if let Some(shards) = pending.disarm() {
                shards.shutdown_all().await;
            }
            return Err(error);
        }
        pending.disarm();
        state.shards = Some(shards.clone());
        drop(state);
        // From now on a stop of the client is the open connection's: notice it.
        let connection = Arc::downgrade(&self.connection);
        tokio::spawn(async move {
            let why = stopped_rx.await.unwrap_or_else(|_| "stopped".into());
            if let Some(connection) = connection.upgrade() {
                connection.client_stopped(&shards, &why).await;
            }
        });
        Ok(())
    }

    /// Close the gateway connection, if open (REST and the interactions endpoint keep working).
    pub async fn close_gateway(&self) {
        let shards = self.connection.state.lock().await.shards.take();
        if let Some(shards) = shards {
            shards.shutdown_all().await;
        }
    }

    /// Whether the gateway connection is open (`false` once it stopped by itself).
    pub async fn gateway_open(&self) -> bool {
        self.connection.state.lock().await.shards.is_some()
    }

    /// Close the connection for good (the adapter's shutdown).
    pub(super) async fn close_for_good(&self) {
        let shards = {
            let mut state = self.connection.state.lock().await;
            state.closed = true;
            state.shards.take()
        };
        // The keeper (single node) wakes, sees `closed`, and ends.
        self.connection.stopped.notify_one();
        if let Some(shards) = shards {
            shards.shutdown_all().await;
        }
    }

    /// Alone (no cluster): reopen the connection whenever it stops by itself, after a wait that
    /// doubles (from [`REOPEN_FIRST`] up to [`REOPEN_MAX`]) while reopenings fail or stop again
    /// soon. Holds the adapter weakly: it ends when the adapter is shut down or dropped.
    pub(super) fn keep_open(self: &Arc<DiscordAdapter>) {
        let adapter = Arc::downgrade(self);
        let connection = self.connection.clone();
        tokio::spawn(keeper(adapter, connection));
    }
}

async fn keeper(adapter: Weak<DiscordAdapter>, connection: Arc<Connection>) {
    let mut wait = REOPEN_FIRST;
    let mut opened = Instant::now();
    loop {
        connection.stopped.notified().await;
        if connection.state.lock().await.closed {
            return;
        }
        wait = if opened.elapsed() >= STABLE {
            REOPEN_FIRST
        } else {
            wait
        };
        loop {
            tracing::info!(
                wait_s = wait.as_secs(),
                "opening the discord gateway connection again"
            );
            tokio::time::sleep(wait).await;
            let Some(adapter) = adapter.upgrade() else {
                return;
            };
            if connection.state.lock().await.closed {
                return;
            }
            let result = adapter.open_gateway().await;
            drop(adapter);
            let next = (wait * 2).min(REOPEN_MAX);
            match result {
                Ok(()) => {
                    tracing::info!("the discord gateway connection is open again");
                    opened = Instant::now();
                    wait = next;
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, "could not open the discord gateway connection again");
                    wait = next;
                }
            }
        }
    }
}
