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
//! Layout, one concern per file: `signature` (request signatures), `routes` (the HTTP Events API
//! routes), `socket` (the Socket Mode loop), `events` (payloads → [`Inbound`]), `web_api`
//! (outbound calls and their errors), `cards` (approval cards as Block Kit), [`manifest`] (the app
//! manifest); this file holds the configuration, the adapter and its [`Adapter`] implementation.
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

mod cards;
mod events;
mod routes;
mod signature;
mod socket;
mod web_api;

pub use cards::card_blocks;
pub use signature::{SignatureError, verify_signature};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use http_body_util::Full;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    Adapter, AdapterError, Card, Dedup, Inbox, Place, Platform, Posted, ReplyHandle, Visibility,
    markdown,
};

use cards::card_content;
use routes::{http_commands, http_events, http_interactions};
use socket::{open_socket_url, socket_loop};
use web_api::{Connector, WebClient, api_error, connector_for};

/// The public Slack Web API.
pub const DEFAULT_API_BASE_URL: &str = "https://slack.com/api";

/// Slack's limit for a section block's text, and so for every message this adapter writes.
const MAX_MESSAGE_LEN: usize = 3000;

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
                        // A refusal names the token; a rate limit or outage says nothing about it.
                        AdapterError::Api { error, .. } if !e.is_retryable() => AdapterError::Invalid(format!(
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
}

impl Drop for SlackAdapter {
    fn drop(&mut self) {
        self.stop.cancel();
    }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
}
