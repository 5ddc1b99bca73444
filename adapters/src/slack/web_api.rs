//! Slack's Web API, outbound: the HTTP connector, the slack-morphism client calls
//! (`chat.postMessage`, `chat.update`) and `response_url` replies, and how their failures become
//! [`AdapterError`]s.
//!
//! Invariants: an error keeps the platform's error code, HTTP status and retry-after, never a
//! response body or a `response_url` (it is a bearer credential); the connector speaks TLS for
//! `https://` and plain HTTP only for an explicit `http://` base URL (local fakes).

use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use crate::{AdapterError, Platform, Posted, Visibility};

use super::SlackAdapter;

pub(super) type Connector = HttpsConnector<HttpConnector>;
pub(super) type WebClient = SlackClient<SlackClientHyperConnector<Connector>>;

/// The HTTP connector for `base_url`: TLS with the system's roots for `https://`, plain HTTP for
/// `http://` (local fakes and proxies).
pub(super) fn connector_for(base_url: &str) -> Result<Connector, AdapterError> {
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

/// A Web API failure as an [`AdapterError`], keeping the error code, HTTP status and retry-after
/// (never a body): a 429 is slack-morphism's `RateLimitError` (its `Retry-After` parsed), a refusal
/// answered with 200 is `ApiError` (its code), any other status is `HttpError`.
pub(super) fn api_error(method: &str, error: SlackClientError) -> AdapterError {
    let transport = |error: String| AdapterError::Transport {
        platform: Platform::Slack,
        method: method.to_string(),
        error,
    };
    match error {
        SlackClientError::ApiError(e) => AdapterError::api(Platform::Slack, method, e.code),
        SlackClientError::RateLimitError(e) => AdapterError::api(
            Platform::Slack,
            method,
            e.code.unwrap_or_else(|| "ratelimited".to_string()),
        )
        .with_status(429)
        .with_retry_after(e.retry_after),
        SlackClientError::HttpError(e) => AdapterError::api(
            Platform::Slack,
            method,
            e.status_code.canonical_reason().unwrap_or("HTTP error"),
        )
        .with_status(e.status_code.as_u16()),
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

impl SlackAdapter {
    pub(super) fn session(&self) -> SlackClientSession<'_, SlackClientHyperConnector<Connector>> {
        self.client.open_session(&self.bot_token)
    }

    pub(super) async fn post_message(
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

    pub(super) async fn update_message(
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
    pub(super) async fn post_response_url(
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
        let retry_after = response
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // Drain the body so the connection can be reused.
        let _ = response.into_body().collect().await;
        if !status.is_success() {
            return Err(AdapterError::api(
                Platform::Slack,
                "response_url",
                status.canonical_reason().unwrap_or("HTTP error"),
            )
            .with_status(status.as_u16())
            .with_retry_after(retry_after));
        }
        Ok(())
    }
}
