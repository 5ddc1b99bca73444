//! Discord: the gateway websocket (serenity) for messages and interactions, optional HTTP interactions
//! endpoint, REST (serenity's `Http`) for posting, editing, approval cards and interaction replies.
//!
//! Conversation threads: a mention in a guild text channel starts a conversation whose thread key is
//! the mention message's id. Discord threads started from a message have the message's id as their
//! channel id, so the adapter only starts the thread when it first posts there (`POST
//! /channels/{channel}/messages/{message}/threads`), and later messages written in that thread arrive
//! with `channel_id` = the thread key. A mention inside an existing thread (one a person started, a
//! forum post) cannot start a thread — Discord refuses a thread in a thread (code 50024) — so that
//! thread itself is the conversation's place; the adapter learns a channel's type once (`GET
//! /channels/{id}`) and remembers it. In DMs the conversation lives in the DM channel itself.
//!
//! Layout, one concern per file: `interactions` (the HTTP interactions endpoint and its Ed25519
//! check), `connection` (the gateway websocket, opened and closed on demand: a node of a cluster
//! holds it only while it holds the cluster's Discord singleton; a node alone reopens it when it
//! stops by itself), `gateway` (serenity's event handler), `events` (messages and interactions →
//! [`Inbound`]), `rest` (REST calls, threads, and their errors), `cards` (approval cards as
//! embeds); this file holds the configuration, the adapter and its [`Adapter`] implementation.
//!
//! Invariants:
//! - every interaction is acknowledged (deferred response) before its event is put in the inbox, so
//!   Discord's 3 s limit never depends on the gateway; on the HTTP endpoint the acknowledgement is the
//!   HTTP answer, and the event is handed on only once that answer has been written out, so no
//!   follow-up can reach Discord before the interaction's webhook exists ("Unknown Webhook");
//! - the answer to a deferred command (type 5, "thinking…") edits that loading message (`PATCH
//!   /webhooks/{app}/{token}/messages/@original`); later answers are follow-ups;
//! - an answer is never dropped for want of a thread: when Discord refuses to start one, the answer is
//!   posted where the mention was, as a reply to it;
//! - HTTP interactions are verified (Ed25519 over timestamp + raw body) before their body is parsed;
//! - the bot's own messages and other bots' messages never reach the inbox; a redelivered message or
//!   interaction reaches it once ([`Dedup`]);
//! - outgoing messages carry `allowed_mentions: {parse: []}`: agent text can never ping anyone;
//! - the token is never logged or put in an error (interaction tokens neither: errors carry the route
//!   template, status and Discord's error code only), and neither is message text.

mod cards;
mod connection;
mod events;
mod gateway;
mod interactions;
mod rest;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::{Value, json};
use serenity::all::{
    ApplicationId, ChannelId, Http, LightMethod, MessageId, Route, UserId, Verifier,
};

use crate::{
    Adapter, AdapterError, Card, Command, Dedup, Inbox, Place, Platform, Posted, ReplyHandle,
    Visibility,
};

use cards::card_body;
use connection::Connection;
use interactions::parse_public_key;
use rest::{api_error, build_http, reply_field, snowflake};

/// Discord's own API base URL (the default of [`DiscordConfig::api_base_url`]).
pub const DISCORD_API: &str = "https://discord.com/api";

/// How long [`DiscordAdapter::connect`] waits for the gateway's READY.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Interaction response types (Discord docs, "interaction callback type").
const DEFERRED_CHANNEL_MESSAGE: u64 = 5;
const DEFERRED_UPDATE_MESSAGE: u64 = 6;
/// Message flag EPHEMERAL.
const EPHEMERAL: u64 = 64;
/// "A thread has already been created for this message".
const THREAD_ALREADY_CREATED: i64 = 160_004;
/// How many thread names (from mention text) are remembered until the thread is started; also the
/// bound of the other per-id memories (channel types, places, answered interactions).
const THREAD_NAMES_MAX: usize = 10_000;
/// Channel types that are threads (announcement, public, private).
const THREAD_TYPES: [u64; 3] = [10, 11, 12];

/// How the adapter reaches Discord. The caller reads the secrets from env vars.
#[derive(Clone)]
pub struct DiscordConfig {
    /// The bot token (without the `Bot ` prefix; it is added when missing).
    pub bot_token: String,
    /// The application's public key (hex), enabling the HTTP interactions endpoint.
    pub public_key: Option<String>,
    /// The application id; learnt from READY when absent.
    pub application_id: Option<String>,
    /// REST base URL, `https://discord.com/api` unless testing against a fake.
    pub api_base_url: String,
}

impl DiscordConfig {
    /// A config for Discord itself, without an HTTP interactions endpoint.
    pub fn new(bot_token: impl Into<String>) -> DiscordConfig {
        DiscordConfig {
            bot_token: bot_token.into(),
            public_key: None,
            application_id: None,
            api_base_url: DISCORD_API.to_string(),
        }
    }
}

impl std::fmt::Debug for DiscordConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordConfig")
            .field("bot_token", &"<redacted>")
            .field("public_key", &self.public_key)
            .field("application_id", &self.application_id)
            .field("api_base_url", &self.api_base_url)
            .finish()
    }
}

/// The Discord adapter: see the module documentation.
pub struct DiscordAdapter {
    shared: Arc<Shared>,
    /// The gateway websocket, open or not (`connection`).
    connection: Arc<Connection>,
    verifier: Option<Arc<Verifier>>,
}

/// State shared by the adapter, the gateway event handler and the HTTP endpoint.
struct Shared {
    http: Arc<Http>,
    inbox: Inbox,
    bot_id: OnceLock<UserId>,
    application_id: OnceLock<ApplicationId>,
    dedup: Dedup,
    /// Where the messages of a place's thread go, once known: the thread (started, or found started),
    /// or the mention's channel when Discord refused to start one.
    targets: tokio::sync::Mutex<HashMap<String, Target>>,
    /// Thread names from mention text, until the thread is started.
    names: Mutex<HashMap<String, String>>,
    /// Whether a channel is a thread, learnt once per channel.
    is_thread: Mutex<HashMap<ChannelId, bool>>,
    /// Tokens of deferred commands whose loading message (`@original`) was already replaced.
    originals: Mutex<HashSet<String>>,
}

/// Where a place's messages are posted.
#[derive(Clone, Copy, Debug)]
struct Target {
    channel: ChannelId,
    /// Set when the answer goes to the mention's channel instead of its thread: reply to the mention.
    reply_to: Option<MessageId>,
}

/// Insert into a bounded memory: forget everything when full (entries are cheap to learn again).
fn remember<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>, key: K, value: V) {
    if map.len() >= THREAD_NAMES_MAX {
        map.clear();
    }
    map.insert(key, value);
}
impl DiscordAdapter {
    /// Validate the token, start the gateway, wait for READY, register the slash commands; from then
    /// on the connection is reopened (with a backoff) whenever it stops by itself. For a node alone:
    /// a node of a cluster uses [`DiscordAdapter::standby`].
    pub async fn connect(
        config: DiscordConfig,
        inbox: Inbox,
    ) -> Result<Arc<DiscordAdapter>, AdapterError> {
        let adapter = DiscordAdapter::standby(config, inbox).await?;
        adapter.open_gateway().await?;
        adapter.keep_open();
        tracing::info!(bot = ?adapter.bot_user_id(), "discord connected");
        Ok(adapter)
    }

    /// Validate the token and be ready to post and to serve the HTTP interactions endpoint, without
    /// the gateway connection: [`DiscordAdapter::open_gateway`] opens it (a node of a cluster, while
    /// it holds the Discord singleton).
    pub async fn standby(
        config: DiscordConfig,
        inbox: Inbox,
    ) -> Result<Arc<DiscordAdapter>, AdapterError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let verifier = match &config.public_key {
            Some(key) => Some(Arc::new(parse_public_key(key)?)),
            None => None,
        };
        let http = Arc::new(build_http(&config));
        let me = http
            .get_current_user()
            .await
            .map_err(|e| api_error("GET /users/@me", e))?;
        let shared = Arc::new(Shared {
            http,
            inbox,
            bot_id: OnceLock::new(),
            application_id: OnceLock::new(),
            dedup: Dedup::default(),
            targets: tokio::sync::Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
            is_thread: Mutex::new(HashMap::new()),
            originals: Mutex::new(HashSet::new()),
        });
        let _ = shared.bot_id.set(me.id);
        if let Some(id) = &config.application_id {
            let _ = shared
                .application_id
                .set(ApplicationId::from(snowflake(id)?));
        }
        Ok(Arc::new(DiscordAdapter {
            shared,
            connection: Arc::new(Connection::new(config)),
            verifier,
        }))
    }

    /// The bot's user id.
    pub fn bot_user_id(&self) -> Option<String> {
        self.shared.bot_id.get().map(ToString::to_string)
    }

    /// The application id (from config or READY).
    pub fn application_id(&self) -> Option<String> {
        self.shared.application_id.get().map(ToString::to_string)
    }

    /// Overwrite the global slash commands with [`Command::ALL`].
    async fn register_commands(&self) -> Result<(), AdapterError> {
        let app = self.shared.app_id()?;
        let commands: Vec<Value> = Command::ALL
            .iter()
            .map(|(name, description)| {
                let mut command = json!({"name": name, "description": description, "type": 1});
                if *name == "cancel" {
                    command["options"] = json!([{
                        "type": 3,
                        "name": "task",
                        "description": "The task id",
                        "required": true,
                    }]);
                }
                command
            })
            .collect();
        self.shared
            .call(
                "PUT /applications/{id}/commands",
                Route::Commands {
                    application_id: app,
                },
                LightMethod::Put,
                Some(Value::Array(commands)),
            )
            .await?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Adapter for DiscordAdapter {
    fn platform(&self) -> Platform {
        Platform::Discord
    }

    fn max_message_len(&self) -> usize {
        2000
    }

    fn edit_interval(&self) -> Duration {
        // Discord allows 5 edits per 5 s per channel; keep a margin.
        Duration::from_millis(1200)
    }

    fn render(&self, markdown: &str) -> String {
        crate::markdown::discord(markdown)
    }

    async fn post(&self, place: &Place, text: &str) -> Result<Posted, AdapterError> {
        self.post_to(
            place,
            json!({"content": text, "allowed_mentions": {"parse": []}}),
        )
        .await
    }

    async fn edit(&self, message: &Posted, text: &str) -> Result<(), AdapterError> {
        self.edit_message(
            message,
            json!({"content": text, "allowed_mentions": {"parse": []}}),
        )
        .await
    }

    async fn post_card(&self, place: &Place, card: &Card) -> Result<Posted, AdapterError> {
        self.post_to(place, card_body(card)).await
    }

    async fn update_card(&self, message: &Posted, card: &Card) -> Result<(), AdapterError> {
        self.edit_message(message, card_body(card)).await
    }

    async fn respond(
        &self,
        reply: &ReplyHandle,
        text: &str,
        visibility: Visibility,
    ) -> Result<(), AdapterError> {
        match reply_field(reply, "kind")? {
            "interaction" => {
                let application =
                    ApplicationId::from(snowflake(reply_field(reply, "application_id")?)?);
                let token = reply_field(reply, "token")?;
                let mut body = json!({"content": text, "allowed_mentions": {"parse": []}});
                let deferred =
                    reply.0.get("deferred_message").and_then(Value::as_bool) == Some(true);
                if deferred && self.shared.first_answer(token) {
                    // Replace the "thinking…" message; its visibility was set by the deferral.
                    self.shared
                        .call(
                            "PATCH /webhooks/{id}/{token}/messages/@original",
                            Route::WebhookOriginalInteractionResponse {
                                application_id: application,
                                token,
                            },
                            LightMethod::Patch,
                            Some(body),
                        )
                        .await?;
                    return Ok(());
                }
                if visibility == Visibility::Ephemeral {
                    body["flags"] = json!(EPHEMERAL);
                }
                self.shared
                    .call(
                        "POST /webhooks/{id}/{token}",
                        Route::WebhookFollowupMessages {
                            application_id: application,
                            token,
                        },
                        LightMethod::Post,
                        Some(body),
                    )
                    .await?;
                Ok(())
            }
            "message" => {
                // Discord has no ephemeral messages outside interactions: reply in the channel.
                let channel = ChannelId::from(snowflake(reply_field(reply, "channel")?)?);
                let message = reply_field(reply, "message")?;
                self.create_message(
                    channel,
                    json!({
                        "content": text,
                        "allowed_mentions": {"parse": [], "replied_user": false},
                        "message_reference": {"message_id": message, "fail_if_not_exists": false},
                    }),
                )
                .await?;
                Ok(())
            }
            other => Err(AdapterError::Invalid(format!(
                "unknown Discord reply handle kind `{other}`"
            ))),
        }
    }

    fn routes(&self) -> axum::Router {
        if self.verifier.is_none() {
            return axum::Router::new();
        }
        let adapter = DiscordAdapter {
            shared: self.shared.clone(),
            connection: self.connection.clone(),
            verifier: self.verifier.clone(),
        };
        let adapter = Arc::new(adapter);
        axum::Router::new().route(
            "/discord/interactions",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let adapter = adapter.clone();
                async move { adapter.http_interaction(&headers, &body).await }
            }),
        )
    }

    async fn shutdown(&self) {
        self.close_for_good().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn debug_redacts_the_token() {
        let config = DiscordConfig::new("secret-token");
        assert!(!format!("{config:?}").contains("secret-token"));
    }

    #[test]
    fn everyone_and_here_are_neutralised() {
        let text = crate::markdown::discord("hi @everyone and @here");
        assert!(!text.contains("@everyone") && !text.contains("@here"));
    }
}
