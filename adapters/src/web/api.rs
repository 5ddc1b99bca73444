//! The JSON API under `/api`: start a conversation, list a browser's conversations, send a message,
//! open a conversation's event stream, decide an approval, read the banner. Each handler turns a request into an inbound event
//! (or a stream) and every failure into a JSON `{"error"}` a person can act on.
//!
//! Invariants:
//! - handlers never wait for the gateway: the inbox is offered the event with `try_send`, a full or
//!   closed inbox is answered `503` with `Retry-After`;
//! - a user message is recorded and handed to the inbox under the lock the gateway's `post` takes, so
//!   the question is in the transcript before its answer can be;
//! - each conversation is its own user (its id is the user id), so rate limits apply per
//!   conversation;
//! - message text is never logged;
//! - a list names its conversations by id (the ids one browser keeps): there is no listing of every
//!   conversation, so one page cannot read another's titles without their ids.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc::error::TrySendError;

use super::MAX_BODY;
use super::choice::Choice;
use super::events;
use super::state::{Shared, valid_id};
use super::transcript::{Author, MAX_LISTED, TranscriptError};
use crate::{Command, Inbound, InboundKind, Place, Platform, Posted, ReplyHandle, User};

/// The place of a conversation: the web chat has no channels, so the conversation is both.
fn place_of(conversation: &str) -> Place {
    Place {
        platform: Platform::Web,
        workspace: "web".to_string(),
        channel: conversation.to_string(),
        thread: conversation.to_string(),
    }
}

/// The person behind a conversation. Each conversation is its own user, so that one page's flood does
/// not use up the allowance of every other page (there are no accounts behind the access token).
fn operator(conversation: &str) -> User {
    User {
        id: conversation.to_string(),
        name: "operator".to_string(),
        roles: Vec::new(),
    }
}

/// Where replies to a conversation's events go; read back by the adapter's `respond`.
fn reply_handle(conversation: &str) -> ReplyHandle {
    ReplyHandle(json!({ "conversation": conversation }))
}

/// The answer to a message without text.
const EMPTY_MESSAGE: &str = "the message is empty: send {\"text\": \"…\"} with some text";

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

fn database_error(e: &TranscriptError) -> Response {
    tracing::error!(platform = "web", error = %e, "web chat database failed");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "OPC could not read or write its database; try again, and check the server's log",
    )
}

fn no_such_conversation() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such conversation; start a new one",
    )
}

fn busy() -> Response {
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the gateway is busy; try again in a moment",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The gateway's standing notice, or `null`. Read by the page when it opens and after each send, so
/// a reload that fixes (or breaks) the provider shows at the next message.
pub(super) async fn banner(State(shared): State<Arc<Shared>>) -> Response {
    let banner = shared
        .banner
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    let mut response = axum::Json(json!({ "banner": banner })).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The JSON object of a request body; `Ok(None)` for an empty body. Its `Content-Type` was checked
/// before the page ran: the listener lets a change through only as same-origin `application/json`
/// ([`crate::pages::protect`]), so a cross-site form or `text/plain` post never gets here.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn read_json(body: Result<Bytes, BytesRejection>) -> Result<Option<Value>, Response> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the request body is larger than {MAX_BODY} bytes"),
            )
        } else {
            error(rejection.status(), "could not read the request body")
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value.is_object() => Ok(Some(value)),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object, e.g. {\"text\": \"hello\"}",
        )),
    }
}

/// The JSON object of a request body that must have one; an empty body is a `400` saying `empty`
/// (what to send).
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn required_json(body: Result<Bytes, BytesRejection>, empty: &str) -> Result<Value, Response> {
    read_json(body)?.ok_or_else(|| error(StatusCode::BAD_REQUEST, empty))
}

/// `text` of a body as a message, or the error to answer.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn message_text(body: &Value) -> Result<String, Response> {
    match body.get("text") {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err(error(StatusCode::BAD_REQUEST, EMPTY_MESSAGE))
        }
        Some(_) => Err(error(StatusCode::BAD_REQUEST, "`text` must be a string")),
    }
}

/// The message a body that must have one carries, or the error to answer.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn required_text(body: Result<Bytes, BytesRejection>) -> Result<String, Response> {
    message_text(&required_json(body, EMPTY_MESSAGE)?)
}

/// A user message → the inbound event it means.
fn inbound_for(conversation: &str, text: &str, traceparent: Option<String>) -> Inbound {
    let kind = match text.trim_start().strip_prefix('/') {
        Some(command) => {
            let (name, rest) = command
                .split_once(char::is_whitespace)
                .unwrap_or((command, ""));
            InboundKind::Command(Command::parse(name, rest))
        }
        None => InboundKind::Mention {
            text: text.to_string(),
            continues: Some(conversation.to_string()),
        },
    };
    Inbound {
        place: place_of(conversation),
        user: operator(conversation),
        reply: reply_handle(conversation),
        kind,
        delivery: None,
        traceparent,
    }
}

/// The request's W3C `traceparent` header, as sent (at most its spec's 55 characters plus room
/// for future versions; anything longer or not ASCII is ignored).
fn traceparent(headers: &HeaderMap) -> Option<String> {
    headers
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .filter(|value| value.len() <= 128)
        .map(str::to_string)
}

/// Record the user's message and hand it to the inbox, atomically with respect to `post`. A command is
/// recorded too, as typed, so the page shows what was asked above the notice that answers it.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn deliver(
    shared: &Shared,
    conversation: &str,
    text: &str,
    headers: &HeaderMap,
) -> Result<(), Response> {
    let inbound = inbound_for(conversation, text, traceparent(headers));
    let is_command = matches!(inbound.kind, InboundKind::Command(_));
    // A command's echo is the text trimmed (`/status`, not `  /status\n`); a message is kept as written.
    let shown = if is_command { text.trim() } else { text };
    let mut state = shared.lock();
    match state.transcript.exists(conversation) {
        Ok(true) => {}
        Ok(false) => return Err(no_such_conversation()),
        Err(e) => return Err(database_error(&e)),
    }
    match shared.inbox.try_send(inbound) {
        Ok(()) => {
            // Recorded under the lock, before the gateway can answer: the question precedes its answer.
            if let Err(e) = state.push(conversation, Author::User, shown, None, false) {
                // The message is on its way; only the page's record of it is missing.
                tracing::error!(platform = "web", error = %e, "could not record a user message");
            }
            tracing::debug!(platform = "web", command = is_command, "inbound message");
            Ok(())
        }
        Err(TrySendError::Full(_)) => {
            tracing::warn!(platform = "web", "inbox full, message refused");
            Err(busy())
        }
        Err(TrySendError::Closed(_)) => {
            tracing::warn!(platform = "web", "inbox closed, message refused");
            Err(busy())
        }
    }
}

/// `POST /api/conversations`: a new conversation, and its first message if the body has one.
pub(super) async fn create_conversation(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match read_json(body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let text = match &body {
        Some(body) if body.get("text").is_some() => match message_text(body) {
            Ok(text) => Some(text),
            Err(response) => return response,
        },
        _ => None,
    };
    let id = format!("{:016x}", fastrand::u64(..));
    if let Err(e) = shared.lock().transcript.create(&id) {
        return database_error(&e);
    }
    if let Some(text) = text
        && let Err(response) = deliver(&shared, &id, &text, &headers)
    {
        return response;
    }
    (StatusCode::CREATED, axum::Json(json!({ "id": id }))).into_response()
}

/// `GET /api/conversations?ids=a,b,c`: the summaries of those conversations that exist, newest first
/// (`{"conversations": [{"id", "title", "last", "last_author", "at", "messages"}]}`); ids the server
/// does not know are left out, so the page can forget them.
pub(super) async fn list_conversations(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
) -> Response {
    let ids = match listed_ids(query.as_deref().unwrap_or("")) {
        Ok(ids) => ids,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let summaries = if ids.is_empty() {
        Vec::new()
    } else {
        match shared.lock().transcript.summaries(&ids) {
            Ok(summaries) => summaries,
            Err(e) => return database_error(&e),
        }
    };
    let mut response = axum::Json(json!({ "conversations": summaries })).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The ids of a list request's query (`ids=a,b,c`; an encoded comma is a comma), each once, in the
/// order given; or what is wrong with it.
fn listed_ids(query: &str) -> Result<Vec<String>, String> {
    let mut ids: Vec<String> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let Some(value) = pair.strip_prefix("ids=") else {
            return Err(format!(
                "unknown parameter `{}`: ask for conversations as ?ids=<id>,<id>,…",
                pair.split('=').next().unwrap_or(pair)
            ));
        };
        let value = value.replace("%2C", ",").replace("%2c", ",");
        for id in value.split(',').filter(|id| !id.is_empty()) {
            if !valid_id(id) {
                return Err(
                    "`ids` must be conversation ids (letters, digits and `-`, at most 64 each), \
                     separated by commas"
                        .to_string(),
                );
            }
            if !ids.iter().any(|known| known == id) {
                ids.push(id.to_string());
            }
        }
    }
    if ids.len() > MAX_LISTED {
        return Err(format!(
            "{} conversation ids asked for; ask for at most {MAX_LISTED} at once",
            ids.len()
        ));
    }
    Ok(ids)
}

/// `POST /api/conversations/{id}/messages`: a message (or command) continuing a conversation.
pub(super) async fn send_message(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let text = match required_text(body) {
        Ok(text) => text,
        Err(response) => return response,
    };
    if !valid_id(&id) {
        return no_such_conversation();
    }
    match deliver(&shared, &id, &text, &headers) {
        Ok(()) => (
            StatusCode::ACCEPTED,
            axum::Json(json!({ "accepted": true })),
        )
            .into_response(),
        Err(response) => response,
    }
}

/// `GET /api/conversations/{id}/events`: the conversation's event stream.
pub(super) async fn event_stream(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    if !valid_id(&id) {
        return no_such_conversation();
    }
    match events::open(&shared, id) {
        Ok(Some(response)) => response,
        Ok(None) => no_such_conversation(),
        Err(e) => database_error(&e),
    }
}

/// `POST /api/approvals/{approval}`: a button click on an approval card.
pub(super) async fn decide(
    State(shared): State<Arc<Shared>>,
    Path(approval): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match required_json(
        body,
        "send {\"option\": \"<the chosen option's label>\"} or {\"option\": <its 0-based index>}",
    ) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let Some(choice) = body.get("option").and_then(Choice::of) else {
        return error(
            StatusCode::BAD_REQUEST,
            "`option` must be the chosen option's label (\"approve\") or its 0-based index (0 for the \
             first option)",
        );
    };
    let Ok(approval) = approval.parse::<i64>() else {
        return error(StatusCode::NOT_FOUND, "no such approval");
    };
    // Under the lock, like `deliver`: the decision is ordered with the conversation's messages.
    let state = shared.lock();
    let stored = match state.transcript.card(approval) {
        Ok(Some(stored)) => stored,
        Ok(None) => return error(StatusCode::NOT_FOUND, "no such approval"),
        Err(e) => return database_error(&e),
    };
    let option = match choice.index_in(&stored.card.options) {
        Ok(option) => option,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let conversation = stored.conversation;
    let inbound = Inbound {
        place: place_of(&conversation),
        user: operator(&conversation),
        reply: reply_handle(&conversation),
        kind: InboundKind::Action {
            action: crate::Action::Decide { approval, option },
            card: Posted {
                platform: Platform::Web,
                channel: conversation.clone(),
                id: stored.number.to_string(),
            },
        },
        delivery: None,
        traceparent: None,
    };
    match shared.inbox.try_send(inbound) {
        Ok(()) => {
            tracing::debug!(platform = "web", approval, option, "approval decision");
            (
                StatusCode::ACCEPTED,
                axum::Json(json!({ "accepted": true })),
            )
                .into_response()
        }
        Err(_) => {
            tracing::warn!(platform = "web", "inbox full or closed, decision refused");
            busy()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slash_text_is_a_command_and_other_text_a_mention() {
        let inbound = inbound_for("c1", "/cancel 42", None);
        assert_eq!(
            inbound.kind,
            InboundKind::Command(Command::Cancel("42".into()))
        );
        let inbound = inbound_for("c1", "hello /status", None);
        assert!(
            matches!(inbound.kind, InboundKind::Mention { continues: Some(ref c), .. } if c == "c1")
        );
    }

    #[test]
    fn a_list_query_names_plain_ids_and_not_too_many() {
        assert_eq!(listed_ids("ids=a,b%2Cc,a,").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(listed_ids("").unwrap(), Vec::<String>::new());
        assert!(
            listed_ids("ids=../x")
                .unwrap_err()
                .contains("conversation ids")
        );
        assert!(
            listed_ids("id=a")
                .unwrap_err()
                .contains("unknown parameter `id`")
        );
        let many = (0..=MAX_LISTED).map(|i| i.to_string()).collect::<Vec<_>>();
        assert!(
            listed_ids(&format!("ids={}", many.join(",")))
                .unwrap_err()
                .contains("at most")
        );
    }

    #[test]
    fn each_conversation_is_its_own_user() {
        assert_ne!(
            inbound_for("c1", "hi", None).user.id,
            inbound_for("c2", "hi", None).user.id
        );
    }
}
