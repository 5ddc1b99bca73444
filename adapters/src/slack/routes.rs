//! The HTTP Events API routes (`POST /slack/events`, `/slack/interactions`, `/slack/commands`): verify,
//! answer Slack at once, hand the payload to the shared parsing.
//!
//! Invariants: nothing in a body is parsed before its signature is verified (401 otherwise); the
//! answer never waits for the gateway; `url_verification` challenges are echoed.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tracing::warn;

use super::Receiver;
use super::events::str_at;

/// Decode an `application/x-www-form-urlencoded` body into a JSON object of strings.
pub(super) fn form_object(body: &[u8]) -> Value {
    let map: serde_json::Map<String, Value> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    Value::Object(map)
}

pub(super) async fn http_events(
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

pub(super) async fn http_interactions(
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

pub(super) async fn http_commands(
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
