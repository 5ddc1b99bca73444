//! serenity's gateway event handler: READY (the application id), messages and interactions, handed to
//! the shared parsing in [`super::events`].
//!
//! Invariants: the handler never blocks the shard: each event is parsed and sent to the inbox (a
//! bounded queue the gateway drains); READY is reported once per client, to the open that started it
//! ([`super::DiscordAdapter::open_gateway`]).

use std::sync::{Arc, Mutex};

use serenity::all::{ApplicationId, Context, EventHandler, Interaction, Message, Ready};

use super::Shared;

/// serenity's event handler: READY, messages, interactions.
pub(super) struct Handler {
    pub(super) shared: Arc<Shared>,
    pub(super) ready: Mutex<Option<tokio::sync::oneshot::Sender<ApplicationId>>>,
}

#[serenity::async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        tracing::info!(session_guilds = ready.guilds.len(), "discord gateway READY");
        let sender = self.ready.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(sender) = sender {
            let _ = sender.send(ready.application.id);
        }
    }

    async fn message(&self, _ctx: Context, message: Message) {
        if let Some(inbound) = self.shared.message_inbound(&message).await
            && self.shared.inbox.send(inbound).await.is_err()
        {
            tracing::warn!("discord inbox closed; message dropped");
        }
    }

    async fn interaction_create(&self, _ctx: Context, interaction: Interaction) {
        self.shared.handle_interaction(interaction).await;
    }
}
