//! Slack: Socket Mode or the HTTP Events API in, the Web API out.
//!
//! Inbound: `app_mention` → [`InboundKind::Mention`], thread replies that do not mention the bot →
//! [`InboundKind::Message`], `block_actions` on approval cards → [`InboundKind::Action`], slash commands
//! (`/opc status`, `/status` …) → [`InboundKind::Command`]. Two transports deliver the same payloads:
//! - Socket Mode (default; no public URL needed): our own websocket loop (`apps.connections.open` with
//!   the app token, then the `wss://` URL it returns). Own loop rather than slack-morphism's listener,
//!   because that listener installs process-wide SIGTERM/SIGINT handlers (signal-hook) that would fight
//!   the gateway's shutdown, and acks only after its callback returns; ours acks each envelope as soon
//!   as it is read, reconnects on `disconnect` envelopes and lost sockets, and stops on
//!   [`Adapter::shutdown`].
//! - HTTP (`POST /slack/events`, `/slack/interactions`, `/slack/commands` from [`Adapter::routes`]):
//!   each request's `X-Slack-Signature` (v0 HMAC-SHA256 over `v0:{timestamp}:{raw body}`) is checked in
//!   constant time, with the timestamp within 5 minutes, before its body is parsed; anything else is
//!   answered 401 and dropped.
//!
//! Outbound: slack-morphism's Web API client (`chat.postMessage`, `chat.update`, `chat.postEphemeral`),
//! with a plain-HTTP connector when the configured API URL is `http://` (local fakes) and TLS otherwise;
//! command and button replies go to the payload's `response_url`.
//!
//! Invariants:
//! - acknowledging never waits for the gateway: events are handed on with `try_send` (a full inbox
//!   drops the event with a warning rather than making Slack retry into the same flood);
//! - a redelivered event (HTTP `X-Slack-Retry-Num`, Socket Mode `retry_attempt`) reaches the inbox once:
//!   events are deduplicated by `event_id`, interactions and commands by `trigger_id` (else the envelope
//!   id);
//! - the bot's own messages never reach the inbox;
//! - tokens, the signing secret, `response_url`s and message text are never logged.

/// The Slack app this adapter needs (scopes, events, command, routes), as a manifest.
pub mod manifest;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use sha2::Sha256;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    Action, Adapter, AdapterError, Card, CardState, Command, Dedup, Inbound, InboundKind, Inbox,
    Place, Platform, Posted, ReplyHandle, User, Visibility, markdown,
};

/// The public Slack Web API.
pub const DEFAULT_API_BASE_URL: &str = "https://slack.com/api";

/// Slack's limit for a section block's text, and so for every message this adapter writes.
const MAX_MESSAGE_LEN: usize = 3000;
/// Slack's limit for a button label.
const MAX_BUTTON_LABEL: usize = 75;
/// Slack's limit of elements in one actions block.
const MAX_BUTTONS: usize = 25;
/// How far a request's timestamp may be from now (Slack: 5 minutes).
const MAX_SIGNATURE_AGE_SECS: i64 = 5 * 60;

/// How Slack delivers events to OPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SlackMode {
    /// Socket Mode: OPC opens a websocket to Slack (needs an app-level token `xapp-…`, no public URL).
    #[default]
    Socket,
    /// Events API: Slack POSTs to the gateway's `/slack/*` routes (needs the signing secret and a
    /// public URL).
    Http,
}

/// What the Slack adapter needs. Built by the gateway from config and environment variables.
#[derive(Clone)]
pub struct SlackConfig {
    /// Socket Mode or HTTP.
    pub mode: SlackMode,
    /// The bot token (`xoxb-…`) for the Web API.
    pub bot_token: String,
    /// The app-level token (`xapp-…`) for Socket Mode.
    pub app_token: Option<String>,
    /// The signing secret that verifies HTTP requests from Slack.
    pub signing_secret: Option<String>,
    /// The Web API base URL, without a trailing method: [`DEFAULT_API_BASE_URL`], or a local fake's
    /// `http://127.0.0.1:PORT/api`.
    pub api_base_url: String,
}

impl std::fmt::Debug for SlackConfig {
    /// Secrets are shown only as present or absent.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redact = |present: bool| if present { "<redacted>" } else { "<none>" };
        f.debug_struct("SlackConfig")
            .field("mode", &self.mode)
            .field("bot_token", &redact(!self.bot_token.is_empty()))
            .field("app_token", &redact(self.app_token.is_some()))
            .field("signing_secret", &redact(self.signing_secret.is_some()))
            .field("api_base_url", &self.api_base_url)
            .finish()
    }
}

/// Why a request's Slack signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `X-Slack-Signature` or `X-Slack-Request-Timestamp` header.
    #[error("signature headers missing")]
    Missing,
    /// The timestamp is not a number or more than 5 minutes from now (a replay).
    #[error("timestamp stale or malformed")]
    Stale,
    /// The signature does not match the body.
    #[error("signature mismatch")]
    Mismatch,
    /// This exact signed request was already received (a replay; Slack's own retries are signed
    /// anew and carry `X-Slack-Retry-Num`).
    #[error("request replayed")]
    Replayed,
}

/// Check a Slack request signature: `signature` must be `"v0=" + hex(HMAC-SHA256(signing_secret,
/// "v0:{timestamp}:{body}"))`, compared in constant time, and `timestamp` within 5 minutes of
/// `now_unix`. The signature is checked first, so a forged request is told `Mismatch` whatever its
/// timestamp.
pub fn verify_signature(
    signing_secret: &str,
    timestamp: &str,
    body: &[u8],
    signature: &str,
    now_unix: i64,
) -> Result<(), SignatureError> {
    let hex_sig = signature
        .strip_prefix("v0=")
        .ok_or(SignatureError::Mismatch)?;
    let expected = hex::decode(hex_sig).map_err(|_| SignatureError::Mismatch)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes())
        .map_err(|_| SignatureError::Mismatch)?;
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)?;
    let ts: i64 = timestamp.parse().map_err(|_| SignatureError::Stale)?;
    if (now_unix - ts).abs() > MAX_SIGNATURE_AGE_SECS {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

type Connector = HttpsConnector<HttpConnector>;
type WebClient = SlackClient<SlackClientHyperConnector<Connector>>;

/// The HTTP connector for `base_url`: TLS with the system's roots for `https://`, plain HTTP for
/// `http://` (local fakes and proxies).
fn connector_for(base_url: &str) -> Result<Connector, AdapterError> {
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    if base_url.starts_with("https://") {
        Ok(builder
            .with_native_roots()
            .map_err(|e| AdapterError::Invalid(format!("no TLS root certificates for Slack: {e}")))?
            .https_only()
            .enable_http1()
            .enable_http2()
            .build())
    } else if base_url.starts_with("http://") {
        // Plain HTTP; the TLS half is never used (no roots), so no certificate store is needed.
        let tls = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        Ok(builder
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build())
    } else {
        Err(AdapterError::Invalid(format!(
            "Slack api_base_url must start with https:// or http://, got `{base_url}`"
        )))
    }
}

/// A Web API failure as an [`AdapterError`], keeping only the error code or kind (never a body).
fn api_error(method: &str, error: SlackClientError) -> AdapterError {
    let transport = |error: String| AdapterError::Transport {
        platform: Platform::Slack,
        method: method.to_string(),
        error,
    };
    match error {
        SlackClientError::ApiError(e) => AdapterError::Api {
            platform: Platform::Slack,
            method: method.to_string(),
            error: e.code,
        },
        SlackClientError::RateLimitError(_) => AdapterError::Api {
            platform: Platform::Slack,
            method: method.to_string(),
            error: "ratelimited".to_string(),
        },
        SlackClientError::HttpError(e) => transport(format!("HTTP status {}", e.status_code)),
        SlackClientError::SystemError(e) => transport(
            e.message
                .as_deref()
                .unwrap_or("connection failed")
                .to_string(),
        ),
        SlackClientError::HttpProtocolError(_) => transport("HTTP protocol error".to_string()),
        SlackClientError::ProtocolError(_) => transport("unexpected response".to_string()),
        SlackClientError::EndOfStream(_) => transport("connection closed".to_string()),
        SlackClientError::SocketModeProtocolError(_) => transport("socket mode error".to_string()),
    }
}

/// Now, in Unix seconds.
fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The Slack adapter: one workspace, one bot.
pub struct SlackAdapter {
    client: WebClient,
    bot_token: SlackApiToken,
    /// For `response_url` replies, which are not Web API methods.
    hooks: HyperClient<Connector, Full<Bytes>>,
    receiver: Arc<Receiver>,
    stop: CancellationToken,
    socket: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for SlackAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackAdapter")
            .field("team", &self.receiver.team)
            .field("bot_user", &self.receiver.bot_user)
            .finish_non_exhaustive()
    }
}

impl SlackAdapter {
    /// Check the configuration, learn who the bot is (`auth.test`) and, in Socket Mode, open the
    /// websocket, kept open (reconnecting as Slack asks) until [`Adapter::shutdown`].
    pub async fn connect(
        config: SlackConfig,
        inbox: Inbox,
    ) -> Result<Arc<SlackAdapter>, AdapterError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        if config.bot_token.trim().is_empty() {
            return Err(AdapterError::Invalid(
                "Slack needs a bot token (xoxb-…)".to_string(),
            ));
        }
        let app_token = match config.mode {
            SlackMode::Socket => match config.app_token.as_deref().map(str::trim) {
                Some(token) if !token.is_empty() => Some(token.to_string()),
                _ => {
                    return Err(AdapterError::Invalid(
                        "Slack Socket Mode needs an app-level token (xapp-…, scope \
                         connections:write); or use HTTP mode with a signing secret"
                            .to_string(),
                    ));
                }
            },
            SlackMode::Http => None,
        };
        let signing_secret = config
            .signing_secret
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        if config.mode == SlackMode::Http && signing_secret.is_none() {
            return Err(AdapterError::Invalid(
                "Slack HTTP mode needs the app's signing secret to verify requests".to_string(),
            ));
        }

        let base = config.api_base_url.trim_end_matches('/').to_string();
        let connector = connector_for(&base)?;
        let client = SlackClient::new(
            SlackClientHyperConnector::with_connector(connector.clone()).with_slack_api_url(&base),
        );
        let hooks = HyperClient::builder(TokioExecutor::new()).build(connector);
        let bot_token = SlackApiToken::new(config.bot_token.clone().into());

        let auth = client
            .open_session(&bot_token)
            .auth_test()
            .await
            .map_err(|e| match e {
                SlackClientError::ApiError(e) => AdapterError::Invalid(format!(
                    "Slack refused the bot token at auth.test ({}): check the bot token (xoxb-…)",
                    e.code
                )),
                other => api_error("auth.test", other),
            })?;
        let receiver = Arc::new(Receiver {
            inbox,
            dedup: Dedup::default(),
            // Longer than the 5-minute window: an older copy is refused as stale anyway.
            signatures: Dedup::new(Duration::from_secs(6 * 60), 200_000),
            bot_user: auth.user_id.to_string(),
            bot_id: auth.bot_id.map(|id| id.to_string()),
            team: auth.team_id.to_string(),
            signing_secret,
        });
        info!(team = %receiver.team, bot_user = %receiver.bot_user, mode = ?config.mode, "slack connected");

        let stop = CancellationToken::new();
        let socket = match app_token {
            Some(app_token) => {
                let app_token = SlackApiToken::new(app_token.into());
                // The first URL is fetched here so that a refused app token fails `connect`.
                let url = open_socket_url(&client, &app_token)
                    .await
                    .map_err(|e| match e {
                        AdapterError::Api { error, .. } => AdapterError::Invalid(format!(
                            "Slack refused the app-level token at apps.connections.open ({error}): \
                             check the app token (xapp-…, scope connections:write)"
                        )),
                        other => other,
                    })?;
                let task = tokio::spawn(socket_loop(
                    receiver.clone(),
                    client.clone(),
                    app_token,
                    Some(url),
                    stop.clone(),
                ));
                Some(task)
            }
            None => None,
        };

        Ok(Arc::new(SlackAdapter {
            client,
            bot_token,
            hooks,
            receiver,
            stop,
            socket: Mutex::new(socket),
        }))
    }

    /// The bot's user id (`U…`), learnt from `auth.test`.
    pub fn bot_user_id(&self) -> &str {
        &self.receiver.bot_user
    }

    /// The workspace (team) id, learnt from `auth.test`.
    pub fn team_id(&self) -> &str {
        &self.receiver.team
    }

    fn session(&self) -> SlackClientSession<'_, SlackClientHyperConnector<Connector>> {
        self.client.open_session(&self.bot_token)
    }

    async fn post_message(
        &self,
        channel: &str,
        thread: Option<&str>,
        content: SlackMessageContent,
    ) -> Result<Posted, AdapterError> {
        let mut request = SlackApiChatPostMessageRequest::new(channel.to_string().into(), content);
        // An empty thread, or the channel itself, means the top level of the channel (see `Place`).
        if let Some(thread) = thread.filter(|t| !t.is_empty() && *t != channel) {
            request = request.with_thread_ts(thread.to_string().into());
        }
        let response = self
            .session()
            .chat_post_message(&request)
            .await
            .map_err(|e| api_error("chat.postMessage", e))?;
        Ok(Posted {
            platform: Platform::Slack,
            channel: response.channel.to_string(),
            id: response.ts.to_string(),
        })
    }

    async fn update_message(
        &self,
        message: &Posted,
        content: SlackMessageContent,
    ) -> Result<(), AdapterError> {
        let request = SlackApiChatUpdateRequest::new(
            message.channel.clone().into(),
            content,
            message.id.clone().into(),
        );
        self.session()
            .chat_update(&request)
            .await
            .map_err(|e| api_error("chat.update", e))?;
        Ok(())
    }

    /// POST a reply to an interaction's `response_url`.
    async fn post_response_url(
        &self,
        url: &str,
        text: &str,
        visibility: Visibility,
    ) -> Result<(), AdapterError> {
        let transport = |error: String| AdapterError::Transport {
            platform: Platform::Slack,
            method: "response_url".to_string(),
            error,
        };
        let body = json!({
            "response_type": match visibility {
                Visibility::Ephemeral => "ephemeral",
                Visibility::Public => "in_channel",
            },
            "text": text,
            "replace_original": false,
        });
        let request = hyper::Request::post(url)
            .header("content-type", "application/json; charset=utf-8")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|_| AdapterError::Invalid("malformed Slack response_url".to_string()))?;
        let response = self.hooks.request(request).await.map_err(|e| {
            transport(
                if e.is_connect() {
                    "connection failed"
                } else {
                    "request failed"
                }
                .to_string(),
            )
        })?;
        let status = response.status();
        // Drain the body so the connection can be reused.
        let _ = response.into_body().collect().await;
        if !status.is_success() {
            return Err(AdapterError::Api {
                platform: Platform::Slack,
                method: "response_url".to_string(),
                error: format!("HTTP status {status}"),
            });
        }
        Ok(())
    }
}

impl Drop for SlackAdapter {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The Block Kit blocks of an approval card: the request as mrkdwn, then one button per option (the
/// first primary) while pending, or a context line with the decision.
pub fn card_blocks(card: &Card) -> Value {
    let header = format!(
        "**Approval needed** from **{}** ({}) — {}\n\n{}",
        card.agent,
        card.role,
        card.path.join(" › "),
        card.summary
    );
    let mut blocks = vec![json!({
        "type": "section",
        "block_id": format!("opc-approval-{}", card.approval),
        "text": {"type": "mrkdwn", "text": crate::text::cut_with_ellipsis(&markdown::slack_mrkdwn(&header), MAX_MESSAGE_LEN)},
    })];
    match &card.state {
        CardState::Pending => {
            let buttons: Vec<Value> = card
                .options
                .iter()
                .enumerate()
                .take(MAX_BUTTONS)
                .map(|(index, option)| {
                    let mut button = json!({
                        "type": "button",
                        "action_id": card.button_id(index),
                        "text": {"type": "plain_text", "text": crate::text::cut_with_ellipsis(option, MAX_BUTTON_LABEL)},
                        "value": index.to_string(),
                    });
                    if index == 0 {
                        button["style"] = json!("primary");
                    }
                    button
                })
                .collect();
            if !buttons.is_empty() {
                blocks.push(json!({
                    "type": "actions",
                    "block_id": format!("opc-approval-{}-options", card.approval),
                    "elements": buttons,
                }));
            }
        }
        CardState::Decided { option, by, at, .. } => {
            let line = format!(
                "*{}: {}* — decided by {} at {}",
                card.state.verdict().unwrap_or_default(),
                markdown::slack_escape(option),
                markdown::slack_escape(by),
                markdown::slack_escape(at)
            );
            blocks.push(json!({
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": crate::text::cut_with_ellipsis(&line, MAX_MESSAGE_LEN)}],
            }));
        }
    }
    Value::Array(blocks)
}

/// A card as message content: blocks plus the plain fallback text notifications show.
fn card_content(card: &Card) -> Result<SlackMessageContent, AdapterError> {
    let blocks: Vec<SlackBlock> = serde_json::from_value(card_blocks(card))
        .map_err(|e| AdapterError::Invalid(format!("approval card blocks: {e}")))?;
    let fallback = crate::text::cut_with_ellipsis(
        &markdown::slack_mrkdwn(&card.to_markdown()),
        MAX_MESSAGE_LEN,
    );
    Ok(SlackMessageContent::new()
        .with_text(fallback)
        .with_blocks(blocks))
}

#[async_trait::async_trait]
impl Adapter for SlackAdapter {
    fn platform(&self) -> Platform {
        Platform::Slack
    }

    fn max_message_len(&self) -> usize {
        MAX_MESSAGE_LEN
    }

    fn edit_interval(&self) -> Duration {
        // chat.update is Tier 3 (~50/min) and Slack asks for about one message write per second per
        // channel.
        Duration::from_millis(1000)
    }

    fn render(&self, markdown: &str) -> String {
        markdown::slack_mrkdwn(markdown)
    }

    async fn post(&self, place: &Place, text: &str) -> Result<Posted, AdapterError> {
        self.post_message(
            &place.channel,
            Some(&place.thread),
            SlackMessageContent::new().with_text(text.to_string()),
        )
        .await
    }

    async fn edit(&self, message: &Posted, text: &str) -> Result<(), AdapterError> {
        self.update_message(
            message,
            SlackMessageContent::new().with_text(text.to_string()),
        )
        .await
    }

    async fn post_card(&self, place: &Place, card: &Card) -> Result<Posted, AdapterError> {
        self.post_message(&place.channel, Some(&place.thread), card_content(card)?)
            .await
    }

    async fn update_card(&self, message: &Posted, card: &Card) -> Result<(), AdapterError> {
        self.update_message(message, card_content(card)?).await
    }

    async fn respond(
        &self,
        reply: &ReplyHandle,
        text: &str,
        visibility: Visibility,
    ) -> Result<(), AdapterError> {
        let handle = &reply.0;
        if let Some(url) = handle.get("response_url").and_then(Value::as_str) {
            return self.post_response_url(url, text, visibility).await;
        }
        let channel = handle.get("channel").and_then(Value::as_str);
        let user = handle.get("user").and_then(Value::as_str);
        let thread = handle
            .get("thread_ts")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty());
        let (Some(channel), Some(user)) = (channel, user) else {
            return Err(AdapterError::Invalid(
                "not a Slack reply handle (no response_url, channel or user)".to_string(),
            ));
        };
        match visibility {
            Visibility::Public => {
                self.post_message(
                    channel,
                    thread,
                    SlackMessageContent::new().with_text(text.to_string()),
                )
                .await?;
            }
            Visibility::Ephemeral => {
                let mut request = SlackApiChatPostEphemeralRequest::new(
                    channel.to_string().into(),
                    user.to_string().into(),
                    SlackMessageContent::new().with_text(text.to_string()),
                );
                if let Some(thread) = thread {
                    request = request.with_thread_ts(thread.to_string().into());
                }
                self.session()
                    .chat_post_ephemeral(&request)
                    .await
                    .map_err(|e| api_error("chat.postEphemeral", e))?;
            }
        }
        Ok(())
    }

    fn routes(&self) -> Router {
        if self.receiver.signing_secret.is_none() {
            // Without the secret nothing could be verified: serve nothing.
            return Router::new();
        }
        Router::new()
            .route("/slack/events", post(http_events))
            .route("/slack/interactions", post(http_interactions))
            .route("/slack/commands", post(http_commands))
            .with_state(self.receiver.clone())
    }

    async fn shutdown(&self) {
        self.stop.cancel();
        let task = self
            .socket
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(task) = task
            && tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
        {
            warn!("slack socket task did not stop in time");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inbound: payload → Inbound, shared by both transports.

/// What the transports share: who the bot is, where events go, what was seen.
struct Receiver {
    inbox: Inbox,
    dedup: Dedup,
    /// Signatures of verified HTTP requests, to refuse a captured request sent again.
    signatures: Dedup,
    bot_user: String,
    bot_id: Option<String>,
    team: String,
    signing_secret: Option<String>,
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut current = value;
    for key in path {
        current = current.get(key)?;
    }
    current.as_str().filter(|s| !s.is_empty())
}

/// Remove the bot's own mention (`<@U123>` or `<@U123|name>`) from a message.
fn strip_mention(text: &str, bot_user: &str) -> String {
    let open = format!("<@{bot_user}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        // Only a whole id: `<@U12>` must not match `<@U123>`.
        if (after.starts_with('>') || after.starts_with('|'))
            && let Some(end) = after.find('>')
        {
            out.push_str(&rest[..start]);
            rest = &after[end + 1..];
            continue;
        }
        out.push_str(&rest[..start + open.len()]);
        rest = after;
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Receiver {
    /// Hand an event on without waiting.
    fn deliver(&self, inbound: Inbound, kind: &'static str) {
        match self.inbox.try_send(inbound) {
            Ok(()) => debug!(kind, "slack event delivered"),
            Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                warn!(kind, "inbox full: slack event dropped");
            }
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                warn!(kind, "inbox closed: slack event dropped");
            }
        }
    }

    /// `true` the first time this delivery is seen.
    fn first(&self, key: &str) -> bool {
        if self.dedup.first(key) {
            true
        } else {
            debug!(key, "slack redelivery dropped");
            false
        }
    }

    fn is_own(&self, event: &Value) -> bool {
        str_at(event, &["user"]) == Some(self.bot_user.as_str())
            || (self.bot_id.is_some() && str_at(event, &["bot_id"]) == self.bot_id.as_deref())
    }

    /// A Socket Mode envelope (already acknowledged).
    fn envelope(&self, envelope: &Value) {
        let envelope_id = str_at(envelope, &["envelope_id"]);
        let payload = envelope.get("payload").unwrap_or(&Value::Null);
        if let Some(retry) = envelope.get("retry_attempt").and_then(Value::as_u64)
            && retry > 0
        {
            debug!(retry, "slack envelope redelivered");
        }
        match str_at(envelope, &["type"]) {
            Some("events_api") => self.event_callback(payload, envelope_id),
            Some("interactive") => self.interactive(payload, envelope_id),
            Some("slash_commands") => self.slash_command(payload, envelope_id),
            other => debug!(kind = other.unwrap_or("-"), "slack envelope ignored"),
        }
    }

    /// An Events API `event_callback` body.
    fn event_callback(&self, body: &Value, fallback_id: Option<&str>) {
        if str_at(body, &["type"]) != Some("event_callback") {
            debug!(
                kind = str_at(body, &["type"]).unwrap_or("-"),
                "slack payload ignored"
            );
            return;
        }
        let Some(id) = str_at(body, &["event_id"]).or(fallback_id) else {
            warn!("slack event without event_id dropped");
            return;
        };
        if !self.first(&format!("event:{id}")) {
            return;
        }
        let event = body.get("event").unwrap_or(&Value::Null);
        let team = str_at(body, &["team_id"])
            .or_else(|| str_at(event, &["team"]))
            .unwrap_or(&self.team)
            .to_string();
        match str_at(event, &["type"]) {
            Some("app_mention") => self.mention(event, team),
            Some("message") => self.message(event, team),
            other => debug!(kind = other.unwrap_or("-"), "slack event ignored"),
        }
    }

    /// The parts every message-like event needs, or `None` (logged) when malformed.
    fn message_parts<'a>(
        &self,
        event: &'a Value,
    ) -> Option<(&'a str, &'a str, &'a str, Option<&'a str>, &'a str)> {
        let parts = (
            str_at(event, &["user"]),
            str_at(event, &["channel"]),
            str_at(event, &["ts"]),
        );
        let (Some(user), Some(channel), Some(ts)) = parts else {
            warn!(
                kind = str_at(event, &["type"]).unwrap_or("-"),
                "malformed slack message event dropped"
            );
            return None;
        };
        let thread_ts = str_at(event, &["thread_ts"]);
        let text = str_at(event, &["text"]).unwrap_or("");
        Some((user, channel, ts, thread_ts, text))
    }

    fn mention(&self, event: &Value, team: String) {
        if self.is_own(event) {
            return;
        }
        let Some((user, channel, ts, thread_ts, text)) = self.message_parts(event) else {
            return;
        };
        self.deliver_mention(team, user, channel, ts, thread_ts, text);
    }

    fn deliver_mention(
        &self,
        team: String,
        user: &str,
        channel: &str,
        ts: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) {
        let thread = thread_ts.unwrap_or(ts);
        self.deliver(
            Inbound {
                place: Place {
                    platform: Platform::Slack,
                    workspace: team,
                    channel: channel.to_string(),
                    thread: thread.to_string(),
                },
                user: User {
                    id: user.to_string(),
                    name: user.to_string(),
                    roles: Vec::new(),
                },
                reply: ReplyHandle(json!({
                    "channel": channel, "user": user, "thread_ts": thread,
                })),
                kind: InboundKind::Mention {
                    text: strip_mention(text, &self.bot_user),
                    continues: thread_ts.map(str::to_string),
                },
            },
            "mention",
        );
    }

    fn message(&self, event: &Value, team: String) {
        // Edits, deletions, joins, bot messages …: only what a person wrote counts.
        if let Some(subtype) = str_at(event, &["subtype"])
            && !matches!(subtype, "thread_broadcast" | "file_share" | "me_message")
        {
            debug!(subtype, "slack message subtype ignored");
            return;
        }
        if self.is_own(event) {
            return;
        }
        let Some((user, channel, ts, thread_ts, text)) = self.message_parts(event) else {
            return;
        };
        // Direct messages carry no app_mention: every one is addressed to the bot.
        if str_at(event, &["channel_type"]) == Some("im") {
            self.deliver_mention(team, user, channel, ts, thread_ts, text);
            return;
        }
        if text.contains(&format!("<@{}>", self.bot_user))
            || text.contains(&format!("<@{}|", self.bot_user))
        {
            // The app_mention event for the same message is the one delivered.
            return;
        }
        let Some(thread_ts) = thread_ts else {
            return;
        };
        self.deliver(
            Inbound {
                place: Place {
                    platform: Platform::Slack,
                    workspace: team,
                    channel: channel.to_string(),
                    thread: thread_ts.to_string(),
                },
                user: User {
                    id: user.to_string(),
                    name: user.to_string(),
                    roles: Vec::new(),
                },
                reply: ReplyHandle(json!({
                    "channel": channel, "user": user, "thread_ts": thread_ts,
                })),
                kind: InboundKind::Message {
                    text: text.to_string(),
                    continues: thread_ts.to_string(),
                },
            },
            "message",
        );
    }

    /// An interactive payload (`block_actions` from approval card buttons).
    fn interactive(&self, payload: &Value, fallback_id: Option<&str>) {
        if str_at(payload, &["type"]) != Some("block_actions") {
            debug!(
                kind = str_at(payload, &["type"]).unwrap_or("-"),
                "slack interaction ignored"
            );
            return;
        }
        let Some(id) = str_at(payload, &["trigger_id"]).or(fallback_id) else {
            warn!("slack interaction without trigger_id dropped");
            return;
        };
        if !self.first(&format!("interactive:{id}")) {
            return;
        }
        let user_id = str_at(payload, &["user", "id"]);
        let channel = str_at(payload, &["channel", "id"])
            .or_else(|| str_at(payload, &["container", "channel_id"]));
        let message_ts = str_at(payload, &["container", "message_ts"])
            .or_else(|| str_at(payload, &["message", "ts"]));
        let (Some(user_id), Some(channel), Some(message_ts)) = (user_id, channel, message_ts)
        else {
            warn!("malformed slack block_actions dropped");
            return;
        };
        let name = str_at(payload, &["user", "username"])
            .or_else(|| str_at(payload, &["user", "name"]))
            .unwrap_or(user_id);
        let team = str_at(payload, &["team", "id"])
            .or_else(|| str_at(payload, &["user", "team_id"]))
            .unwrap_or(&self.team);
        let thread = str_at(payload, &["message", "thread_ts"])
            .or_else(|| str_at(payload, &["container", "thread_ts"]))
            .unwrap_or(message_ts);
        let mut reply = json!({"channel": channel, "user": user_id, "thread_ts": thread});
        if let Some(url) = str_at(payload, &["response_url"]) {
            reply["response_url"] = json!(url);
        }
        let actions = payload
            .get("actions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for action in actions {
            let Some(decoded) = str_at(action, &["action_id"]).and_then(Action::decode) else {
                debug!("slack action not ours ignored");
                continue;
            };
            self.deliver(
                Inbound {
                    place: Place {
                        platform: Platform::Slack,
                        workspace: team.to_string(),
                        channel: channel.to_string(),
                        thread: thread.to_string(),
                    },
                    user: User {
                        id: user_id.to_string(),
                        name: name.to_string(),
                        roles: Vec::new(),
                    },
                    reply: ReplyHandle(reply.clone()),
                    kind: InboundKind::Action {
                        action: decoded,
                        card: Posted {
                            platform: Platform::Slack,
                            channel: channel.to_string(),
                            id: message_ts.to_string(),
                        },
                    },
                },
                "action",
            );
        }
    }

    /// A slash command (Socket Mode payload or the HTTP form as a JSON object).
    ///
    /// Commands belong to no thread: `place.thread` is empty, and posting to such a place posts at
    /// the channel's top level.
    fn slash_command(&self, payload: &Value, fallback_id: Option<&str>) {
        let Some(id) = str_at(payload, &["trigger_id"]).or(fallback_id) else {
            warn!("slack command without trigger_id dropped");
            return;
        };
        if !self.first(&format!("command:{id}")) {
            return;
        }
        let parts = (
            str_at(payload, &["command"]),
            str_at(payload, &["user_id"]),
            str_at(payload, &["channel_id"]),
        );
        let (Some(command), Some(user_id), Some(channel)) = parts else {
            warn!("malformed slack command dropped");
            return;
        };
        let text = str_at(payload, &["text"]).unwrap_or("");
        let mut reply = json!({"channel": channel, "user": user_id});
        if let Some(url) = str_at(payload, &["response_url"]) {
            reply["response_url"] = json!(url);
        }
        self.deliver(
            Inbound {
                place: Place {
                    platform: Platform::Slack,
                    workspace: str_at(payload, &["team_id"])
                        .unwrap_or(&self.team)
                        .to_string(),
                    channel: channel.to_string(),
                    thread: String::new(),
                },
                user: User {
                    id: user_id.to_string(),
                    name: str_at(payload, &["user_name"])
                        .unwrap_or(user_id)
                        .to_string(),
                    roles: Vec::new(),
                },
                reply: ReplyHandle(reply),
                kind: InboundKind::Command(Command::parse(command, text)),
            },
            "command",
        );
    }

    /// Check an HTTP request's signature before anything in it is read.
    fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), SignatureError> {
        let secret = self
            .signing_secret
            .as_deref()
            .ok_or(SignatureError::Missing)?;
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(timestamp), Some(signature)) = (
            header("x-slack-request-timestamp"),
            header("x-slack-signature"),
        ) else {
            return Err(SignatureError::Missing);
        };
        verify_signature(secret, timestamp, body, signature, now_unix())?;
        if self.signatures.first(signature) {
            Ok(())
        } else {
            Err(SignatureError::Replayed)
        }
    }

    /// Verify, or the 401 response.
    fn check(&self, route: &'static str, headers: &HeaderMap, body: &[u8]) -> Option<Response> {
        match self.verify(headers, body) {
            Ok(()) => {
                if let Some(retry) = headers
                    .get("x-slack-retry-num")
                    .and_then(|v| v.to_str().ok())
                {
                    debug!(route, retry, "slack request redelivered");
                }
                None
            }
            Err(why) => {
                warn!(route, reason = %why, "slack request refused");
                Some((StatusCode::UNAUTHORIZED, "invalid signature").into_response())
            }
        }
    }
}

/// Decode an `application/x-www-form-urlencoded` body into a JSON object of strings.
fn form_object(body: &[u8]) -> Value {
    let map: serde_json::Map<String, Value> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    Value::Object(map)
}

async fn http_events(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = receiver.check("events", &headers, &body) {
        return refused;
    }
    let Ok(payload) = serde_json::from_slice::<Value>(&body) else {
        warn!(route = "events", "malformed slack request body");
        return (StatusCode::BAD_REQUEST, "malformed body").into_response();
    };
    match str_at(&payload, &["type"]) {
        Some("url_verification") => {
            let challenge = str_at(&payload, &["challenge"]).unwrap_or("");
            axum::Json(json!({ "challenge": challenge })).into_response()
        }
        _ => {
            receiver.event_callback(&payload, None);
            StatusCode::OK.into_response()
        }
    }
}

async fn http_interactions(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = receiver.check("interactions", &headers, &body) {
        return refused;
    }
    let form = form_object(&body);
    let payload = str_at(&form, &["payload"]).and_then(|p| serde_json::from_str::<Value>(p).ok());
    let Some(payload) = payload else {
        warn!(route = "interactions", "malformed slack request body");
        return (StatusCode::BAD_REQUEST, "malformed body").into_response();
    };
    receiver.interactive(&payload, None);
    StatusCode::OK.into_response()
}

async fn http_commands(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = receiver.check("commands", &headers, &body) {
        return refused;
    }
    receiver.slash_command(&form_object(&body), None);
    StatusCode::OK.into_response()
}

// ---------------------------------------------------------------------------------------------
// Socket Mode.

/// Ask Slack for a fresh websocket URL (each is single-use).
async fn open_socket_url(
    client: &WebClient,
    app_token: &SlackApiToken,
) -> Result<String, AdapterError> {
    let response = client
        .open_session(app_token)
        .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
        .await
        .map_err(|e| api_error("apps.connections.open", e))?;
    Ok(response.url.0.to_string())
}

/// Why a socket session ended.
enum SocketEnd {
    /// Shutdown was asked for.
    Stopped,
    /// Slack asked us to reconnect (`disconnect` envelope).
    Disconnect,
    /// The socket failed or closed.
    Lost,
}

/// Keep a Socket Mode connection until `stop`: connect, read, reconnect with backoff.
async fn socket_loop(
    receiver: Arc<Receiver>,
    client: WebClient,
    app_token: SlackApiToken,
    mut next_url: Option<String>,
    stop: CancellationToken,
) {
    const MIN_BACKOFF: Duration = Duration::from_millis(500);
    const MAX_BACKOFF: Duration = Duration::from_secs(30);
    let mut backoff = MIN_BACKOFF;
    loop {
        if stop.is_cancelled() {
            return;
        }
        let url = match next_url.take() {
            Some(url) => Ok(url),
            None => open_socket_url(&client, &app_token).await,
        };
        let end = match url {
            Err(e) => {
                warn!(error = %e, "slack socket url refused");
                SocketEnd::Lost
            }
            Ok(url) => {
                let connected = tokio::select! {
                    _ = stop.cancelled() => return,
                    connected = tokio_tungstenite::connect_async(url.as_str()) => connected,
                };
                match connected {
                    Ok((socket, _)) => {
                        // Connected: a later loss starts its backoff afresh.
                        backoff = MIN_BACKOFF;
                        run_socket(&receiver, socket, &stop).await
                    }
                    Err(e) => {
                        warn!(error = %e, "slack socket connect failed");
                        SocketEnd::Lost
                    }
                }
            }
        };
        match end {
            SocketEnd::Stopped => return,
            SocketEnd::Disconnect => info!("slack asked to reconnect"),
            SocketEnd::Lost => {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Read one websocket session: ack every envelope the moment it is read, then hand it on.
async fn run_socket<S>(
    receiver: &Receiver,
    socket: tokio_tungstenite::WebSocketStream<S>,
    stop: &CancellationToken,
) -> SocketEnd
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = socket.split();
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => {
                let _ = sink.send(WsMessage::Close(None)).await;
                return SocketEnd::Stopped;
            }
            next = stream.next() => next,
        };
        let text = match next {
            None => return SocketEnd::Lost,
            Some(Err(e)) => {
                warn!(error = %e, "slack socket failed");
                return SocketEnd::Lost;
            }
            Some(Ok(WsMessage::Text(text))) => text,
            Some(Ok(WsMessage::Close(_))) => return SocketEnd::Lost,
            // Pings are answered by tungstenite itself.
            Some(Ok(_)) => continue,
        };
        let Ok(envelope) = serde_json::from_str::<Value>(text.as_str()) else {
            warn!("malformed slack socket frame dropped");
            continue;
        };
        match str_at(&envelope, &["type"]) {
            Some("hello") => debug!("slack socket hello"),
            Some("disconnect") => {
                debug!(
                    reason = str_at(&envelope, &["reason"]).unwrap_or("-"),
                    "slack socket disconnect"
                );
                let _ = sink.send(WsMessage::Close(None)).await;
                return SocketEnd::Disconnect;
            }
            _ => {
                if let Some(id) = str_at(&envelope, &["envelope_id"]) {
                    let ack = json!({ "envelope_id": id }).to_string();
                    if let Err(e) = sink.send(WsMessage::Text(ack.into())).await {
                        warn!(error = %e, "slack ack failed");
                        return SocketEnd::Lost;
                    }
                }
                receiver.envelope(&envelope);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    // The official request-signing vector from slackapi/python-slack-sdk (MIT), as in
    // shared/data/slack/signature_test_vector.json.
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TIMESTAMP: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    #[test]
    fn the_official_vector_verifies() {
        let now = 1531420618 + 10;
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, BODY.as_bytes(), SIGNATURE, now),
            Ok(())
        );
    }

    #[test]
    fn tampering_and_staleness_are_refused() {
        let now = 1531420618;
        let tampered = format!("{BODY}------");
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, tampered.as_bytes(), SIGNATURE, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature("wrong", TIMESTAMP, BODY.as_bytes(), SIGNATURE, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, BODY.as_bytes(), "v0=zz", now),
            Err(SignatureError::Mismatch)
        );
        // 600 s old: stale even though the signature matches.
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, BODY.as_bytes(), SIGNATURE, now + 600),
            Err(SignatureError::Stale)
        );
    }

    #[test]
    fn mentions_are_stripped_whole() {
        assert_eq!(strip_mention("<@W11> hello there", "W11"), "hello there");
        assert_eq!(strip_mention("hi <@W11|bot>, go", "W11"), "hi , go");
        assert_eq!(strip_mention("<@W111> not me", "W11"), "<@W111> not me");
    }

    #[test]
    fn config_debug_redacts_secrets() {
        let config = SlackConfig {
            mode: SlackMode::Socket,
            bot_token: "xoxb-TOPSECRET".into(),
            app_token: Some("xapp-TOPSECRET".into()),
            signing_secret: None,
            api_base_url: DEFAULT_API_BASE_URL.into(),
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("TOPSECRET"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn card_blocks_have_buttons_until_decided() {
        let mut card = Card {
            approval: 7,
            agent: "ops".into(),
            role: "VP Operations".into(),
            path: vec!["ceo".into(), "ops".into()],
            summary: "Spend **$5k** on <ads>?".into(),
            options: vec!["Approve".into(), "Reject".into()],
            state: CardState::Pending,
        };
        let blocks = card_blocks(&card);
        assert_eq!(blocks[0]["type"], "section");
        let text = blocks[0]["text"]["text"].as_str().unwrap();
        assert!(
            text.contains("*$5k*") && text.contains("&lt;ads&gt;"),
            "{text}"
        );
        let buttons = blocks[1]["elements"].as_array().unwrap();
        assert_eq!(buttons.len(), 2);
        assert_eq!(buttons[0]["action_id"], card.button_id(0));
        assert_eq!(buttons[0]["style"], "primary");
        assert!(buttons[1].get("style").is_none());
        // The blocks are valid Block Kit for slack-morphism.
        card_content(&card).unwrap();

        card.state = CardState::Decided {
            option: "Approve".into(),
            by: "alice".into(),
            at: "2026-01-01T00:00:00Z".into(),
            approved: true,
        };
        let blocks = card_blocks(&card);
        assert_eq!(blocks.as_array().unwrap().len(), 2);
        assert_eq!(blocks[1]["type"], "context");
        assert!(
            blocks[1]["elements"][0]["text"]
                .as_str()
                .unwrap()
                .contains("*Approved: Approve* — decided by alice at 2026-01-01T00:00:00Z")
        );
        card_content(&card).unwrap();
    }
}
