//! The gateway websocket (serenity's client and its shards), opened and closed on demand: alone,
//! `opc run` opens it once at start ([`DiscordAdapter::connect`]); a node of a cluster opens it only
//! while it holds the cluster's Discord singleton, and closes it when it loses it, so exactly one
//! node receives the gateway's events ([`DiscordAdapter::standby`], [`DiscordAdapter::open_gateway`],
//! [`DiscordAdapter::close_gateway`]). REST and the HTTP interactions endpoint work either way.
//!
//! Invariants: at most one connection per adapter (open and close are serialised); an open that
//! fails leaves no connection behind; after [`crate::Adapter::shutdown`] nothing opens again.

use std::sync::{Arc, Mutex};

use serenity::all::{ClientBuilder, GatewayIntents, ShardManager};

use crate::{AdapterError, Platform};

use super::gateway::Handler;
use super::rest::{api_error, build_http, error_kind};
use super::{DiscordAdapter, DiscordConfig, READY_TIMEOUT};

/// The gateway connection of one adapter.
pub(super) struct Connection {
    /// How to reach Discord (a new client is built per open).
    pub(super) config: DiscordConfig,
    pub(super) state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
pub(super) struct State {
    /// The open connection's shards.
    shards: Option<Arc<ShardManager>>,
    /// Shut down: never open again.
    closed: bool,
}

impl DiscordAdapter {
    /// Open the gateway connection, unless open: start serenity's client, wait for READY (up to
    /// 30 s), register the slash commands. An error leaves it closed.
    pub async fn open_gateway(&self) -> Result<(), AdapterError> {
        let mut state = self.connection.state.lock().await;
        if state.closed || state.shards.is_some() {
            return Ok(());
        }
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
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
        tokio::spawn(async move {
            if let Err(error) = client.start().await {
                tracing::error!(error = %error_kind(&error), "discord gateway stopped");
            }
        });
        let ready = match tokio::time::timeout(READY_TIMEOUT, ready_rx).await {
            Ok(Ok(ready)) => ready,
            Ok(Err(_)) | Err(_) => {
                shards.shutdown_all().await;
                return Err(AdapterError::Transport {
                    platform: Platform::Discord,
                    method: "gateway READY".into(),
                    error: format!("no READY within {} s", READY_TIMEOUT.as_secs()),
                });
            }
        };
        let _ = self.shared.application_id.set(ready);
        if let Err(error) = self.register_commands().await {
            shards.shutdown_all().await;
            return Err(error);
        }
        state.shards = Some(shards);
        Ok(())
    }

    /// Close the gateway connection, if open (REST and the interactions endpoint keep working).
    pub async fn close_gateway(&self) {
        let shards = self.connection.state.lock().await.shards.take();
        if let Some(shards) = shards {
            shards.shutdown_all().await;
        }
    }

    /// Whether the gateway connection is open.
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
        if let Some(shards) = shards {
            shards.shutdown_all().await;
        }
    }
}
