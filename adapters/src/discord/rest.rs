//! Discord's REST API, outbound, through serenity's `Http` (its rate limiter and auth): posting,
//! editing, starting a conversation's thread, acknowledging interactions, and how failures become
//! [`AdapterError`]s.
//!
//! Invariants: an error carries the route template, HTTP status and Discord's JSON error code, never
//! a URL (interaction URLs hold tokens), the token or request content; an answer is never dropped for
//! want of a thread (refused: posted in the mention's channel, as a reply to it).

use std::num::NonZeroU64;

use serde_json::{Value, json};
use serenity::all::{
    ApplicationId, ChannelId, Http, HttpBuilder, HttpError, InteractionId, LightMethod, MessageId,
    Request, Route,
};

use crate::{AdapterError, Place, Platform, Posted, ReplyHandle};

use super::{
    DISCORD_API, DiscordAdapter, DiscordConfig, Shared, THREAD_ALREADY_CREATED, THREAD_NAMES_MAX,
    Target, remember,
};

impl DiscordAdapter {
    /// Where a place's messages go, starting its thread first when needed. When Discord refuses the
    /// thread (a thread inside a thread, missing permissions …), the mention's channel, replying to
    /// the mention: the answer is never dropped.
    pub(super) async fn target_for(&self, place: &Place) -> Result<Target, AdapterError> {
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
            Err(AdapterError::Api {
                code: Some(THREAD_ALREADY_CREATED),
                ..
            }) => Target {
                channel: thread,
                reply_to: None,
            },
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
    pub(super) async fn post_to(
        &self,
        place: &Place,
        mut body: Value,
    ) -> Result<Posted, AdapterError> {
        let target = self.target_for(place).await?;
        if let Some(message) = target.reply_to {
            body["message_reference"] =
                json!({"message_id": message.to_string(), "fail_if_not_exists": false});
            body["allowed_mentions"]["replied_user"] = json!(false);
        }
        self.create_message(target.channel, body).await
    }

    pub(super) async fn create_message(
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
        let id = answer.get("id").and_then(Value::as_str).ok_or_else(|| {
            AdapterError::api(
                Platform::Discord,
                "POST /channels/{id}/messages",
                "answer without a message id",
            )
        })?;
        Ok(Posted {
            platform: Platform::Discord,
            channel: channel.to_string(),
            id: id.to_string(),
        })
    }

    pub(super) async fn edit_message(
        &self,
        message: &Posted,
        body: Value,
    ) -> Result<(), AdapterError> {
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
}

/// Serenity's HTTP client for this config: Discord itself, or the given base URL as a proxy (rate
/// limiter off, since a fake does not send Discord's rate-limit headers).
pub(super) fn build_http(config: &DiscordConfig) -> Http {
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

/// A Discord snowflake id.
pub(super) fn snowflake(id: &str) -> Result<NonZeroU64, AdapterError> {
    id.parse::<NonZeroU64>()
        .map_err(|_| AdapterError::Invalid(format!("not a Discord id: `{id}`")))
}

/// A serenity error, without URLs (they may hold interaction tokens) nor request content: a refusal
/// keeps its HTTP status and Discord's JSON error code. No retry-after: against Discord itself
/// serenity's rate limiter waits out a 429 (its `retry_after`) and tries again before answering; a
/// 429 that reaches us (rate limiter off, behind a proxy) is retryable by its status, and serenity
/// does not hand on its headers.
pub(super) fn api_error(method: &str, error: serenity::Error) -> AdapterError {
    match error {
        serenity::Error::Http(HttpError::UnsuccessfulRequest(response)) => {
            AdapterError::api(Platform::Discord, method, response.error.message)
                .with_status(response.status_code.as_u16())
                .with_code(response.error.code as i64)
        }
        other => AdapterError::Transport {
            platform: Platform::Discord,
            method: method.to_string(),
            error: error_kind(&other),
        },
    }
}

/// What kind of failure a serenity error is, without its details (URLs may carry tokens).
pub(super) fn error_kind(error: &serenity::Error) -> String {
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
    pub(super) fn first_answer(&self, token: &str) -> bool {
        let mut originals = self.originals.lock().unwrap_or_else(|p| p.into_inner());
        if originals.contains(token) {
            return false;
        }
        if originals.len() >= THREAD_NAMES_MAX {
            originals.clear();
        }
        originals.insert(token.to_string())
    }

    pub(super) fn app_id(&self) -> Result<ApplicationId, AdapterError> {
        self.application_id
            .get()
            .copied()
            .ok_or_else(|| AdapterError::Invalid("Discord application id unknown".into()))
    }

    /// One REST call through serenity's client (rate limiter, auth), answered as JSON (`Null` when
    /// empty).
    pub(super) async fn call(
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
        serde_json::from_slice(&bytes)
            .map_err(|_| AdapterError::api(Platform::Discord, method, "malformed answer"))
    }

    pub(super) async fn acknowledge(
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

pub(super) fn reply_field<'a>(
    reply: &'a ReplyHandle,
    field: &str,
) -> Result<&'a str, AdapterError> {
    reply
        .0
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::Invalid(format!("not a Discord reply handle (no `{field}`)")))
}
