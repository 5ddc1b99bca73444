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

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use serenity::all::{
    ApplicationId, ChannelId, ClientBuilder, CommandDataOptionValue, CommandInteraction,
    ComponentInteraction, Context, EventHandler, GatewayIntents, Http, HttpBuilder, HttpError,
    Interaction, InteractionId, LightMethod, Message, MessageId, MessageType, Ready, Request,
    Route, ShardManager, UserId, Verifier,
};

use crate::{
    Action, Adapter, AdapterError, Card, CardState, Command, Dedup, Inbound, InboundKind, Inbox,
    Place, Platform, Posted, ReplyHandle, User, Visibility,
};

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
const THREAD_ALREADY_CREATED: isize = 160_004;
/// Embed description limit (an approval card is an embed).
const EMBED_DESCRIPTION_MAX: usize = 4096;
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
    shards: Arc<ShardManager>,
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
    /// Validate the token, start the gateway, wait for READY, register the slash commands.
    pub async fn connect(
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

        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let handler = Handler {
            shared: shared.clone(),
            ready: Mutex::new(Some(ready_tx)),
        };
        let intents = GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT;
        let mut client = ClientBuilder::new_with_http(build_http(&config), intents)
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
        let _ = shared.application_id.set(ready);
        let adapter = Arc::new(DiscordAdapter {
            shared,
            shards,
            verifier,
        });
        if let Err(error) = adapter.register_commands().await {
            adapter.shards.shutdown_all().await;
            return Err(error);
        }
        tracing::info!(bot = %me.id, "discord connected");
        Ok(adapter)
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

    /// Where a place's messages go, starting its thread first when needed. When Discord refuses the
    /// thread (a thread inside a thread, missing permissions …), the mention's channel, replying to
    /// the mention: the answer is never dropped.
    async fn target_for(&self, place: &Place) -> Result<Target, AdapterError> {
        if place.thread == place.channel {
            return Ok(Target {
                channel: ChannelId::from(snowflake(&place.channel)?),
                reply_to: None,
            });
        }
        let thread = ChannelId::from(snowflake(&place.thread)?);
        let mut known = self.shared.targets.lock().await;
        if let Some(target) = known.get(&place.thread) {
            return Ok(*target);
        }
        let name = self
            .shared
            .names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&place.thread)
            .unwrap_or_else(|| "OPC".to_string());
        let result = self
            .shared
            .call(
                "POST /channels/{id}/messages/{id}/threads",
                Route::ChannelMessageThreads {
                    channel_id: ChannelId::from(snowflake(&place.channel)?),
                    message_id: MessageId::from(snowflake(&place.thread)?),
                },
                LightMethod::Post,
                Some(json!({"name": name, "auto_archive_duration": 1440})),
            )
            .await;
        let target = match result {
            Ok(_) => Target {
                channel: thread,
                reply_to: None,
            },
            Err(AdapterError::Api { error, .. })
                if error.contains(&format!("code {THREAD_ALREADY_CREATED}")) =>
            {
                Target {
                    channel: thread,
                    reply_to: None,
                }
            }
            Err(AdapterError::Api { error, .. }) => {
                tracing::warn!(%error, "discord refused to start a thread; answering in the channel");
                Target {
                    channel: ChannelId::from(snowflake(&place.channel)?),
                    reply_to: Some(MessageId::from(snowflake(&place.thread)?)),
                }
            }
            Err(error) => return Err(error),
        };
        remember(&mut known, place.thread.clone(), target);
        Ok(target)
    }

    /// Post `body` where `place`'s messages go.
    async fn post_to(&self, place: &Place, mut body: Value) -> Result<Posted, AdapterError> {
        let target = self.target_for(place).await?;
        if let Some(message) = target.reply_to {
            body["message_reference"] =
                json!({"message_id": message.to_string(), "fail_if_not_exists": false});
            body["allowed_mentions"]["replied_user"] = json!(false);
        }
        self.create_message(target.channel, body).await
    }

    async fn create_message(
        &self,
        channel: ChannelId,
        body: Value,
    ) -> Result<Posted, AdapterError> {
        let answer = self
            .shared
            .call(
                "POST /channels/{id}/messages",
                Route::ChannelMessages {
                    channel_id: channel,
                },
                LightMethod::Post,
                Some(body),
            )
            .await?;
        let id = answer
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| AdapterError::Api {
                platform: Platform::Discord,
                method: "POST /channels/{id}/messages".into(),
                error: "answer without a message id".into(),
            })?;
        Ok(Posted {
            platform: Platform::Discord,
            channel: channel.to_string(),
            id: id.to_string(),
        })
    }

    async fn edit_message(&self, message: &Posted, body: Value) -> Result<(), AdapterError> {
        self.shared
            .call(
                "PATCH /channels/{id}/messages/{id}",
                Route::ChannelMessage {
                    channel_id: ChannelId::from(snowflake(&message.channel)?),
                    message_id: MessageId::from(snowflake(&message.id)?),
                },
                LightMethod::Patch,
                Some(body),
            )
            .await?;
        Ok(())
    }

    /// The HTTP interactions endpoint: verify, answer PING, acknowledge and deliver the rest.
    async fn http_interaction(&self, headers: &HeaderMap, body: &[u8]) -> Response {
        let Some(verifier) = &self.verifier else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let verified = match (
            header("x-signature-ed25519"),
            header("x-signature-timestamp"),
        ) {
            (Some(signature), Some(timestamp)) => {
                verifier.verify(signature, timestamp, body).is_ok()
            }
            _ => false,
        };
        if !verified {
            tracing::warn!("discord interaction with a missing or bad signature refused");
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"error": "invalid request signature"})),
            )
                .into_response();
        }
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            tracing::warn!(kind = "not json", "malformed discord interaction dropped");
            return StatusCode::BAD_REQUEST.into_response();
        };
        if value.get("type").and_then(Value::as_u64) == Some(1) {
            return axum::Json(json!({"type": 1})).into_response();
        }
        let interaction = match parse_interaction(body) {
            Ok(interaction) => interaction,
            Err(reason) => {
                tracing::warn!(
                    kind = "interaction",
                    path = %reason.path,
                    line = reason.line,
                    column = reason.column,
                    reason = %reason.reason,
                    "malformed discord interaction dropped"
                );
                return StatusCode::BAD_REQUEST.into_response();
            }
        };
        let Some((inbound, deferred)) = self.shared.interaction_inbound(&interaction) else {
            // Unknown or repeated: acknowledge so Discord shows no error, deliver nothing.
            return axum::Json(json!({"type": DEFERRED_UPDATE_MESSAGE})).into_response();
        };
        // The HTTP answer is the acknowledgement. The event is handed on only once the answer has
        // been written out: Discord creates the interaction's webhook when it receives the answer,
        // and a follow-up sent before that is refused ("Unknown Webhook").
        let (report, written) = tokio::sync::oneshot::channel();
        let inbox = self.shared.inbox.clone();
        tokio::spawn(async move {
            if written.await != Ok(true) {
                tracing::warn!(
                    "discord interaction answer not written (connection lost); interaction dropped"
                );
                return;
            }
            if inbox.send(inbound).await.is_err() {
                tracing::warn!("discord inbox closed; interaction dropped");
            }
        });
        let body = WrittenReport {
            body: http_body_util::Full::new(Bytes::from(deferred.to_string())),
            written: false,
            report: Some(report),
        };
        Response::builder()
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::new(body))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    }
}

/// A response body that reports, when the server is done with it, whether it was written out whole.
struct WrittenReport {
    body: http_body_util::Full<Bytes>,
    written: bool,
    report: Option<tokio::sync::oneshot::Sender<bool>>,
}

impl axum::body::HttpBody for WrittenReport {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.body).poll_frame(cx);
        if this.body.is_end_stream() {
            this.written = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for WrittenReport {
    fn drop(&mut self) {
        if let Some(report) = self.report.take() {
            let _ = report.send(self.written);
        }
    }
}

/// Why an interaction could not be read: where in the JSON and what kind of problem — never the
/// content (the reason keeps serde's "expected …" and field names, drops the values it quotes).
#[derive(Debug)]
struct Malformed {
    path: String,
    line: usize,
    column: usize,
    reason: String,
}

fn parse_interaction(body: &[u8]) -> Result<Interaction, Malformed> {
    // serenity reads `Interaction` through an intermediate map, which loses the path and position of
    // an error; reading the concrete kind straight from the bytes keeps both.
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(rename = "type")]
        kind: u8,
    }
    let kind = serde_json::from_slice::<Kind>(body)
        .map(|k| k.kind)
        .unwrap_or(0);
    let mut reader = serde_json::Deserializer::from_slice(body);
    let parsed = match kind {
        2 | 4 => serde_path_to_error::deserialize(&mut reader).map(|c| match kind {
            2 => Interaction::Command(c),
            _ => Interaction::Autocomplete(c),
        }),
        3 => serde_path_to_error::deserialize(&mut reader).map(Interaction::Component),
        5 => serde_path_to_error::deserialize(&mut reader).map(Interaction::Modal),
        _ => serde_path_to_error::deserialize(&mut reader),
    };
    parsed.map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        Malformed {
            path,
            line: inner.line(),
            column: inner.column(),
            reason: content_free_reason(&inner),
        }
    })
}

/// serde_json's message without the input it quotes: `invalid type: string "hi", expected u64` →
/// `invalid type, expected u64`; `missing field `id`` is kept (a field name of the model).
fn content_free_reason(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(m, _)| m);
    if message.starts_with("missing field") {
        return message.to_string();
    }
    // The kind is what comes before a quoted value: `unknown variant `hi`, expected …` quotes the
    // input without a colon.
    let kind = message
        .split([':', '`', '"', '\''])
        .next()
        .unwrap_or_default()
        .trim_end();
    match message.rsplit_once(", expected ") {
        Some((_, expected)) => format!("{kind}, expected {expected}"),
        None => match error.classify() {
            serde_json::error::Category::Syntax => "syntax error".into(),
            serde_json::error::Category::Eof => "unexpected end".into(),
            serde_json::error::Category::Io => "read error".into(),
            // Custom messages may quote what they read: keep only those that quote nothing.
            serde_json::error::Category::Data if !kind.contains(['"', '`', '\'']) => {
                kind.to_string()
            }
            serde_json::error::Category::Data => "invalid data".into(),
        },
    }
}

/// Serenity's HTTP client for this config: Discord itself, or the given base URL as a proxy (rate
/// limiter off, since a fake does not send Discord's rate-limit headers).
fn build_http(config: &DiscordConfig) -> Http {
    let base = config.api_base_url.trim_end_matches('/');
    let mut builder = HttpBuilder::new(&config.bot_token);
    if base != DISCORD_API {
        // serenity's routes are `https://discord.com/api/v10/…`; a proxy replaces the origin.
        let origin = base.strip_suffix("/api").unwrap_or(base);
        builder = builder.proxy(origin).ratelimiter_disabled(true);
    }
    if let Some(id) = config
        .application_id
        .as_deref()
        .and_then(|id| snowflake(id).ok())
    {
        builder = builder.application_id(ApplicationId::from(id));
    }
    builder.build()
}

fn parse_public_key(hex: &str) -> Result<Verifier, AdapterError> {
    let bad = || AdapterError::Invalid("Discord public key must be 64 hex digits".into());
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Verifier::try_new(key).map_err(|_| bad())
}

/// A Discord snowflake id.
fn snowflake(id: &str) -> Result<NonZeroU64, AdapterError> {
    id.parse::<NonZeroU64>()
        .map_err(|_| AdapterError::Invalid(format!("not a Discord id: `{id}`")))
}

/// A serenity error, without URLs (they may hold interaction tokens) nor request content.
fn api_error(method: &str, error: serenity::Error) -> AdapterError {
    match error {
        serenity::Error::Http(HttpError::UnsuccessfulRequest(response)) => AdapterError::Api {
            platform: Platform::Discord,
            method: method.to_string(),
            error: format!(
                "HTTP {}, code {}: {}",
                response.status_code.as_u16(),
                response.error.code,
                response.error.message
            ),
        },
        other => AdapterError::Transport {
            platform: Platform::Discord,
            method: method.to_string(),
            error: error_kind(&other),
        },
    }
}

/// What kind of failure a serenity error is, without its details (URLs may carry tokens).
fn error_kind(error: &serenity::Error) -> String {
    match error {
        serenity::Error::Http(HttpError::Request(e)) => {
            if e.is_connect() {
                "connection failed".into()
            } else if e.is_timeout() {
                "timed out".into()
            } else {
                "request failed".into()
            }
        }
        serenity::Error::Http(HttpError::UnsuccessfulRequest(r)) => {
            format!("HTTP {}", r.status_code.as_u16())
        }
        serenity::Error::Http(_) => "http error".into(),
        serenity::Error::Json(_) => "malformed answer".into(),
        serenity::Error::Gateway(e) => format!("gateway: {e}"),
        serenity::Error::Tungstenite(_) => "websocket error".into(),
        _ => "error".into(),
    }
}

impl Shared {
    /// Whether this is the first answer to the interaction with `token` (and remember that it was).
    fn first_answer(&self, token: &str) -> bool {
        let mut originals = self.originals.lock().unwrap_or_else(|p| p.into_inner());
        if originals.contains(token) {
            return false;
        }
        if originals.len() >= THREAD_NAMES_MAX {
            originals.clear();
        }
        originals.insert(token.to_string())
    }

    fn app_id(&self) -> Result<ApplicationId, AdapterError> {
        self.application_id
            .get()
            .copied()
            .ok_or_else(|| AdapterError::Invalid("Discord application id unknown".into()))
    }

    /// One REST call through serenity's client (rate limiter, auth), answered as JSON (`Null` when
    /// empty).
    async fn call(
        &self,
        method: &str,
        route: Route<'_>,
        verb: LightMethod,
        body: Option<Value>,
    ) -> Result<Value, AdapterError> {
        let body = body
            .map(|b| serde_json::to_vec(&b))
            .transpose()
            .map_err(|e| AdapterError::Invalid(format!("cannot encode {method}: {e}")))?;
        let response = self
            .http
            .request(Request::new(route, verb).body(body))
            .await
            .map_err(|e| api_error(method, e))?;
        let bytes = response
            .bytes()
            .await
            .map_err(|_| AdapterError::Transport {
                platform: Platform::Discord,
                method: method.to_string(),
                error: "answer cut short".into(),
            })?;
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|_| AdapterError::Api {
            platform: Platform::Discord,
            method: method.to_string(),
            error: "malformed answer".into(),
        })
    }

    /// Whether `channel` is a thread (a person's thread, a forum post, a conversation thread), asked
    /// once per channel. When Discord cannot be asked, `false`: posting then tries to start a thread
    /// and, refused, answers in the channel.
    async fn is_thread(&self, channel: ChannelId) -> bool {
        let known = self
            .is_thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&channel)
            .copied();
        if let Some(known) = known {
            return known;
        }
        let answer = self
            .call(
                "GET /channels/{id}",
                Route::Channel {
                    channel_id: channel,
                },
                LightMethod::Get,
                None,
            )
            .await;
        match answer {
            Ok(found) => {
                let is_thread = found
                    .get("type")
                    .and_then(Value::as_u64)
                    .is_some_and(|kind| THREAD_TYPES.contains(&kind));
                let mut known = self.is_thread.lock().unwrap_or_else(|p| p.into_inner());
                remember(&mut known, channel, is_thread);
                is_thread
            }
            Err(error) => {
                tracing::warn!(%error, "could not learn a discord channel's type");
                false
            }
        }
    }

    /// A message from the gateway → an inbound event, or `None` when it is not for us.
    async fn message_inbound(&self, message: &Message) -> Option<Inbound> {
        let bot = *self.bot_id.get()?;
        if message.author.bot || message.author.id == bot {
            return None;
        }
        if !matches!(
            message.kind,
            MessageType::Regular | MessageType::InlineReply
        ) {
            return None;
        }
        if !self.dedup.first(&format!("m{}", message.id)) {
            return None;
        }
        let channel = message.channel_id.to_string();
        let mention_forms = [format!("<@{bot}>"), format!("<@!{bot}>")];
        let mentioned = message.mentions.iter().any(|u| u.id == bot)
            || mention_forms
                .iter()
                .any(|m| message.content.contains(m.as_str()));
        let in_thread =
            mentioned && message.guild_id.is_some() && self.is_thread(message.channel_id).await;
        let (workspace, thread) = match message.guild_id {
            // Inside a thread the conversation is that thread; elsewhere a thread started from the
            // mention.
            Some(guild) if in_thread => (guild.to_string(), channel.clone()),
            Some(guild) => (guild.to_string(), message.id.to_string()),
            None => ("@me".to_string(), channel.clone()),
        };
        let user = User {
            id: message.author.id.to_string(),
            name: display_name(&message.author),
            roles: message
                .member
                .as_ref()
                .map(|m| m.roles.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
        };
        let reply = ReplyHandle(json!({
            "kind": "message",
            "channel": channel,
            "message": message.id.to_string(),
        }));
        // In a DM the bot is always the one addressed: every message there is a mention.
        let kind = if mentioned || message.guild_id.is_none() {
            let mut text = message.content.clone();
            for form in &mention_forms {
                text = text.replace(form.as_str(), "");
            }
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if message.guild_id.is_some() && !in_thread {
                self.remember_thread_name(&thread, &text);
            }
            InboundKind::Mention {
                text,
                continues: Some(channel.clone()),
            }
        } else {
            if message.content.trim().is_empty() {
                return None;
            }
            InboundKind::Message {
                text: message.content.clone(),
                continues: channel.clone(),
            }
        };
        let thread = match kind {
            InboundKind::Message { .. } => channel.clone(),
            _ => thread,
        };
        Some(Inbound {
            place: Place {
                platform: Platform::Discord,
                workspace,
                channel,
                thread,
            },
            user,
            reply,
            kind,
        })
    }

    fn remember_thread_name(&self, thread: &str, text: &str) {
        let mut name = String::new();
        for word in text.split_whitespace() {
            if name.chars().count() + word.chars().count() + 1 > 80 {
                break;
            }
            if !name.is_empty() {
                name.push(' ');
            }
            name.push_str(word);
        }
        if name.is_empty() {
            name = "OPC".into();
        }
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        remember(&mut names, thread.to_string(), name);
    }

    /// An interaction → its inbound event and the deferred response that acknowledges it, or `None`
    /// for interactions OPC does not handle (and repeats).
    fn interaction_inbound(&self, interaction: &Interaction) -> Option<(Inbound, Value)> {
        match interaction {
            Interaction::Command(command) => {
                if !self.dedup.first(&format!("i{}", command.id)) {
                    return None;
                }
                Some((
                    command_inbound(command),
                    json!({"type": DEFERRED_CHANNEL_MESSAGE, "data": {"flags": EPHEMERAL}}),
                ))
            }
            Interaction::Component(component) => {
                let Some(action) = Action::decode(&component.data.custom_id) else {
                    tracing::warn!(kind = "component", "unknown discord button id dropped");
                    return None;
                };
                if !self.dedup.first(&format!("i{}", component.id)) {
                    return None;
                }
                Some((
                    component_inbound(component, action),
                    json!({"type": DEFERRED_UPDATE_MESSAGE}),
                ))
            }
            _ => None,
        }
    }

    /// Gateway path: acknowledge within Discord's 3 s, then hand on.
    async fn handle_interaction(&self, interaction: Interaction) {
        let (id, token) = match &interaction {
            Interaction::Command(c) => (c.id, c.token.clone()),
            Interaction::Component(c) => (c.id, c.token.clone()),
            _ => return,
        };
        let Some((inbound, deferred)) = self.interaction_inbound(&interaction) else {
            return;
        };
        if let Err(error) = self.acknowledge(id, &token, deferred).await {
            tracing::warn!(interaction = %id, %error, "discord interaction not acknowledged");
            return;
        }
        if self.inbox.send(inbound).await.is_err() {
            tracing::warn!("discord inbox closed; interaction dropped");
        }
    }

    async fn acknowledge(
        &self,
        id: InteractionId,
        token: &str,
        body: Value,
    ) -> Result<(), AdapterError> {
        self.call(
            "POST /interactions/{id}/{token}/callback",
            Route::InteractionResponse {
                interaction_id: id,
                token,
            },
            LightMethod::Post,
            Some(body),
        )
        .await?;
        Ok(())
    }
}

fn display_name(user: &serenity::all::User) -> String {
    user.global_name
        .clone()
        .unwrap_or_else(|| user.name.clone())
}

fn interaction_user(user: &serenity::all::User, member: Option<&serenity::all::Member>) -> User {
    User {
        id: user.id.to_string(),
        name: member
            .and_then(|m| m.nick.clone())
            .unwrap_or_else(|| display_name(user)),
        roles: member
            .map(|m| m.roles.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
    }
}

fn interaction_place(
    guild: Option<serenity::all::GuildId>,
    channel: ChannelId,
    thread: String,
) -> Place {
    Place {
        platform: Platform::Discord,
        workspace: guild.map_or_else(|| "@me".to_string(), |g| g.to_string()),
        channel: channel.to_string(),
        thread,
    }
}

/// How to answer an interaction. `deferred_message`: it was acknowledged with a deferred message
/// (type 5), whose loading message the first answer replaces.
fn interaction_reply(
    application: ApplicationId,
    token: &str,
    deferred_message: bool,
) -> ReplyHandle {
    ReplyHandle(json!({
        "kind": "interaction",
        "application_id": application.to_string(),
        "token": token,
        "deferred_message": deferred_message,
    }))
}

fn command_inbound(command: &CommandInteraction) -> Inbound {
    let args = command
        .data
        .options
        .iter()
        .filter_map(|option| match &option.value {
            CommandDataOptionValue::String(s) => Some(s.clone()),
            CommandDataOptionValue::Integer(i) => Some(i.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let channel = command.channel_id.to_string();
    Inbound {
        place: interaction_place(command.guild_id, command.channel_id, channel),
        user: interaction_user(&command.user, command.member.as_deref()),
        reply: interaction_reply(command.application_id, &command.token, true),
        kind: InboundKind::Command(Command::parse(&command.data.name, &args)),
    }
}

fn component_inbound(component: &ComponentInteraction, action: Action) -> Inbound {
    let channel = component.channel_id.to_string();
    Inbound {
        place: interaction_place(component.guild_id, component.channel_id, channel.clone()),
        user: interaction_user(&component.user, component.member.as_ref()),
        reply: interaction_reply(component.application_id, &component.token, false),
        kind: InboundKind::Action {
            action,
            card: Posted {
                platform: Platform::Discord,
                channel,
                id: component.message.id.to_string(),
            },
        },
    }
}

/// The card's body: an embed with its markdown, and a row of buttons while it is pending.
fn card_body(card: &Card) -> Value {
    let description = crate::text::cut_with_ellipsis(
        &crate::markdown::discord(&card.to_markdown()),
        EMBED_DESCRIPTION_MAX,
    );
    let components: Vec<Value> = match card.state {
        CardState::Pending => card
            .options
            .iter()
            .enumerate()
            .take(25)
            .collect::<Vec<_>>()
            .chunks(5)
            .map(|row| {
                let buttons: Vec<Value> = row
                    .iter()
                    .map(|(i, option)| {
                        json!({
                            "type": 2,
                            "style": if *i == 0 { 1 } else { 2 },
                            "label": crate::text::cut_with_ellipsis(option, 80),
                            "custom_id": card.button_id(*i),
                        })
                    })
                    .collect();
                json!({"type": 1, "components": buttons})
            })
            .collect(),
        CardState::Decided { .. } => Vec::new(),
    };
    json!({
        "content": "",
        "embeds": [{"description": description, "color": 0x5865F2}],
        "components": components,
        "allowed_mentions": {"parse": []},
    })
}

fn reply_field<'a>(reply: &'a ReplyHandle, field: &str) -> Result<&'a str, AdapterError> {
    reply
        .0
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::Invalid(format!("not a Discord reply handle (no `{field}`)")))
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
            shards: self.shards.clone(),
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
        self.shards.shutdown_all().await;
    }
}

/// serenity's event handler: READY, messages, interactions.
struct Handler {
    shared: Arc<Shared>,
    ready: Mutex<Option<tokio::sync::oneshot::Sender<ApplicationId>>>,
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

    #[test]
    fn pending_cards_have_buttons_decided_cards_none() {
        let mut card = Card {
            approval: 7,
            agent: "cfo".into(),
            role: "CFO".into(),
            path: vec!["ceo".into(), "cfo".into()],
            summary: "Pay?".into(),
            options: vec!["Approve".into(), "Reject".into()],
            state: CardState::Pending,
        };
        let body = card_body(&card);
        assert_eq!(
            body["components"][0]["components"][1]["custom_id"],
            card.button_id(1)
        );
        card.state = CardState::Decided {
            option: "Approve".into(),
            by: "ann".into(),
            at: "2025-01-01T00:00:00Z".into(),
            approved: true,
        };
        assert_eq!(card_body(&card)["components"], json!([]));
    }

    #[test]
    fn a_malformed_interaction_is_explained_by_path_and_position_never_content() {
        let wrong_type =
            br#"{"type": 2, "id": "1", "application_id": "1", "token": "t", "version": 1,
            "data": {"id": "1", "name": "status", "type": "secret text"}}"#;
        let error = parse_interaction(wrong_type).expect_err("malformed");
        assert_eq!(error.path, "data.type");
        assert_eq!((error.line, error.column), (2, 71));
        assert_eq!(error.reason, "invalid type, expected u8");

        let bad_id = br#"{"type": 3, "id": "hello secret"}"#;
        let error = parse_interaction(bad_id).expect_err("malformed");
        assert_eq!(error.path, "id");
        assert!(!format!("{error:?}").contains("secret"), "{error:?}");

        let missing = br#"{"type": 2, "id": "1"}"#;
        let error = parse_interaction(missing).expect_err("malformed");
        assert!(error.reason.starts_with("missing field"), "{error:?}");

        // An enum's unknown variant is quoted without a colon; the reason must not carry it.
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        enum Kind {
            Known,
        }
        let variant = serde_json::from_str::<Kind>(r#""secret-variant""#).expect_err("unknown");
        let reason = content_free_reason(&variant);
        assert!(!reason.contains("secret"), "{reason}");
        assert!(reason.starts_with("unknown variant"), "{reason}");

        let cut = br#"{"type": 2, "id": "1""#;
        assert_eq!(
            parse_interaction(cut).expect_err("malformed").reason,
            "unexpected end"
        );
    }

    #[tokio::test]
    async fn an_answer_body_reports_written_only_once_it_was_read_whole() {
        use http_body_util::BodyExt;
        let (report, written) = tokio::sync::oneshot::channel();
        let body = WrittenReport {
            body: http_body_util::Full::new(Bytes::from_static(b"{\"type\":5}")),
            written: false,
            report: Some(report),
        };
        let read = body.collect().await.expect("infallible").to_bytes();
        assert_eq!(&read[..], b"{\"type\":5}");
        assert_eq!(written.await, Ok(true));

        // Dropped before it was written (the connection went away): reported as not written.
        let (report, written) = tokio::sync::oneshot::channel();
        drop(WrittenReport {
            body: http_body_util::Full::new(Bytes::from_static(b"{}")),
            written: false,
            report: Some(report),
        });
        assert_eq!(written.await, Ok(false));
    }

    #[test]
    fn public_keys_are_checked() {
        assert!(parse_public_key("zz").is_err());
        assert!(parse_public_key(&"0".repeat(63)).is_err());
    }
}
