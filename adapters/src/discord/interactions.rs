//! The HTTP interactions endpoint (`POST /discord/interactions`): the Ed25519 signature check, reading
//! an interaction, and the acknowledgement that is the HTTP answer.
//!
//! Invariants: nothing in a body is parsed before its signature (over timestamp + raw body) is
//! verified (401 otherwise); the event is handed on only once the answer has been written out, so no
//! follow-up reaches Discord before the interaction's webhook exists ("Unknown Webhook"); a malformed
//! interaction is explained by JSON path and position, never by its content.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use serenity::all::{Interaction, Verifier};

use crate::AdapterError;

use super::{DEFERRED_UPDATE_MESSAGE, DiscordAdapter};

impl DiscordAdapter {
    /// The HTTP interactions endpoint: verify, answer PING, acknowledge and deliver the rest.
    pub(super) async fn http_interaction(&self, headers: &HeaderMap, body: &[u8]) -> Response {
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
pub(super) struct WrittenReport {
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
pub(super) struct Malformed {
    path: String,
    line: usize,
    column: usize,
    reason: String,
}

pub(super) fn parse_interaction(body: &[u8]) -> Result<Interaction, Malformed> {
    // serenity reads `Interaction` through an intermediate map, which loses the path and position of
    // an error; reading the concrete kind straight from the bytes keeps both.
    #[derive(serde::Deserialize)]
    pub(super) struct Kind {
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
pub(super) fn content_free_reason(error: &serde_json::Error) -> String {
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

pub(super) fn parse_public_key(hex: &str) -> Result<Verifier, AdapterError> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
