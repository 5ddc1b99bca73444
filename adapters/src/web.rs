//! The built-in web chat: a chat page, a small JSON API and a server-sent event stream per
//! conversation, served on the gateway's own HTTP server. It is the default channel: it needs no
//! platform token.
//!
//! Pages (from [`Adapter::pages`], put behind the access token by the gateway with its own; see
//! [`crate::pages`]):
//! - `GET /` — the page (HTML, CSS and JS in one response, no external fetches);
//! - `POST /api/conversations` — `201 {"id"}`; an optional `{"text"}` is sent as the first message;
//! - `POST /api/conversations/{id}/messages` `{"text"}` — `202`; `/word rest` is a command (shown in
//!   the conversation as typed, then answered with a notice), anything else a mention continuing the
//!   conversation;
//! - `GET /api/conversations/{id}/events` — SSE: first `reset`, then the conversation's transcript
//!   (`message`, `card`, `notice`, `progress`), then live `message` / `edit` / `card` / `card_update` /
//!   `notice` / `progress`; a keep-alive comment every 15 s;
//! - `POST /api/approvals/{approval}` `{"option"}` — `202`, a button click on an approval card:
//!   `option` is the chosen option's 0-based index (`0` for the first button) or its label, matched
//!   without regard to case (`"approve"`); anything else is a `400` listing the options;
//! - `GET /api/banner` — `{"banner"}`: the gateway's standing notice ([`Adapter::set_banner`], e.g. a
//!   missing LLM key, with how to fix it) or `null`; the page shows it above the conversation.
//!
//! What reaches the listener at all is decided before routing by [`exposure`]: a foreign `Host` is
//! answered 421, and with an access token every path under `/admin` and `/api` needs it first.
//!
//! Invariants:
//! - conversations live in the transcript ([`transcript`], SQLite in the engine's database file):
//!   messages, cards, notices and the trace outlive a restart, and an approval card posted before it
//!   can still be decided after it;
//! - memory is per subscriber, not per conversation: a conversation takes memory only while an event
//!   stream is open on it (a small broadcast channel, [`SUBSCRIBER_BUFFER`]), and none once the last
//!   stream closes;
//! - each conversation is its own user ([`User::id`] is the conversation id), so rate limits apply per
//!   conversation;
//! - handlers never wait for the gateway: the inbox is offered the event with `try_send`, a full inbox
//!   is answered `503` with `Retry-After`;
//! - a user message is recorded and handed to the inbox under the same lock the gateway's `post` takes,
//!   and a subscription is opened under the lock that reads its replay, so every subscriber sees a
//!   question before its answer, and nothing twice;
//! - message text is never logged.

pub mod exposure;
pub mod transcript;

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::mpsc::error::TrySendError;

use crate::{
    Adapter, AdapterError, Card, Command, Inbound, InboundKind, Inbox, Page, Place, Platform,
    Posted, ReplyHandle, User, Visibility,
};
use transcript::{Author, Entry, Transcript, TranscriptError};

pub use transcript::{MAX_MESSAGES, MAX_PROGRESS};

/// Largest request body accepted, in bytes.
pub const MAX_BODY: usize = 32 * 1024;
/// Live events buffered per conversation with open streams; a subscriber that falls further behind is
/// disconnected, and its `EventSource` reconnects and gets a full replay. Small, because streamed
/// answers arrive as edits at most every [`Adapter::edit_interval`], and the buffer is allocated
/// whole when the first stream opens.
pub const SUBSCRIBER_BUFFER: usize = 64;
/// How often an idle event stream carries a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

const PAGE: &str = include_str!("web/page.html");
const CSS: &str = include_str!("web/chat.css");
const JS: &str = include_str!("web/chat.js");

/// The web chat's configuration.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// The page's title.
    pub title: String,
    /// The SQLite database file holding the transcript (the engine's); `None` keeps it in memory, so
    /// it ends with the process.
    pub database: Option<PathBuf>,
}

/// The web chat adapter. Cheap to share: pages and outbound calls use the same state.
pub struct WebChat {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for WebChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebChat")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

struct Shared {
    config: WebConfig,
    inbox: Inbox,
    /// The page with the title filled in; the CSP nonce is filled in per response.
    page: String,
    state: Mutex<ChatState>,
    /// The gateway's standing notice (markdown), shown as the page's banner.
    banner: std::sync::RwLock<Option<String>>,
    /// Cancelled by [`Adapter::shutdown`]: open event streams end, so the server can stop (an SSE
    /// response never ends by itself, and graceful shutdown waits for every response).
    closing: tokio_util::sync::CancellationToken,
}

struct ChatState {
    transcript: Transcript,
    /// Conversation → its live channel, only while at least one event stream is open on it.
    live: HashMap<String, broadcast::Sender<WebEvent>>,
}

/// One event on a conversation's stream.
#[derive(Clone, Debug)]
enum WebEvent {
    /// Start of a replay: the page forgets what it shows.
    Reset,
    Message {
        id: i64,
        author: Author,
        text: String,
    },
    Edit {
        id: i64,
        text: String,
    },
    Card {
        id: i64,
        card: Box<Card>,
        update: bool,
    },
    Progress(Value),
}

impl WebEvent {
    fn to_sse(&self) -> Event {
        let (name, data) = match self {
            WebEvent::Reset => ("reset", json!({})),
            WebEvent::Message {
                id,
                author: Author::Notice,
                text,
            } => ("notice", json!({"id": id.to_string(), "text": text})),
            WebEvent::Message { id, author, text } => (
                "message",
                json!({"id": id.to_string(), "author": author.as_str(), "text": text}),
            ),
            WebEvent::Edit { id, text } => ("edit", json!({"id": id.to_string(), "text": text})),
            WebEvent::Card { id, card, update } => (
                if *update { "card_update" } else { "card" },
                json!({"id": id.to_string(), "card": card, "text": card.to_markdown()}),
            ),
            WebEvent::Progress(event) => ("progress", event.clone()),
        };
        let event = Event::default().event(name).data(data.to_string());
        if matches!(self, WebEvent::Reset) {
            event.retry(Duration::from_secs(2))
        } else {
            event
        }
    }

    fn from_entry(entry: Entry) -> WebEvent {
        match entry {
            Entry::Message {
                number,
                author,
                text,
            } => WebEvent::Message {
                id: number,
                author,
                text,
            },
            Entry::Card { number, card } => WebEvent::Card {
                id: number,
                card: Box::new(card),
                update: false,
            },
            Entry::Progress(event) => WebEvent::Progress(event),
        }
    }
}

impl ChatState {
    /// Send `event` to conversation `id`'s open streams, if any; forget its channel once none is open.
    fn publish(&mut self, id: &str, event: WebEvent) {
        if let Some(live) = self.live.get(id)
            && live.send(event).is_err()
        {
            self.live.remove(id);
        }
    }

    /// Record a message in conversation `id` (created if `create`) and publish it; its number, or
    /// `None` for an unknown conversation.
    fn push(
        &mut self,
        id: &str,
        author: Author,
        text: &str,
        card: Option<&Card>,
        create: bool,
    ) -> Result<Option<i64>, TranscriptError> {
        let Some(number) = self.transcript.push(id, author, text, card, create)? else {
            return Ok(None);
        };
        self.publish(
            id,
            match card {
                Some(card) => WebEvent::Card {
                    id: number,
                    card: Box::new(card.clone()),
                    update: false,
                },
                None => WebEvent::Message {
                    id: number,
                    author,
                    text: text.to_string(),
                },
            },
        );
        Ok(Some(number))
    }
}

/// An open event stream's hold on its conversation's channel: dropping it (the client went away, or
/// the server stops) forgets the channel once no other stream is open.
struct Subscription {
    receiver: Option<broadcast::Receiver<WebEvent>>,
    shared: Arc<Shared>,
    conversation: String,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.receiver.take());
        let mut state = self.shared.lock();
        if state
            .live
            .get(&self.conversation)
            .is_some_and(|live| live.receiver_count() == 0)
        {
            state.live.remove(&self.conversation);
        }
    }
}

impl WebChat {
    /// The web chat; inbound events go to `inbox`. Serve [`Adapter::pages`] on the gateway's server.
    /// Fails when the transcript's database cannot be opened.
    pub fn new(config: WebConfig, inbox: Inbox) -> Result<Arc<WebChat>, AdapterError> {
        let transcript = Transcript::open(config.database.as_deref())
            .map_err(|e| AdapterError::Invalid(e.to_string()))?;
        let page = PAGE
            .replace("{{TITLE}}", &escape_html(&config.title))
            .replace("{{CSS}}", CSS)
            .replace("{{JS}}", JS);
        Ok(Arc::new(WebChat {
            shared: Arc::new(Shared {
                config,
                inbox,
                page,
                state: Mutex::new(ChatState {
                    transcript,
                    live: HashMap::new(),
                }),
                banner: std::sync::RwLock::new(None),
                closing: tokio_util::sync::CancellationToken::new(),
            }),
        }))
    }

    /// How many conversations have an open event stream (and so hold memory).
    pub fn live_conversations(&self) -> usize {
        self.shared.lock().live.len()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, ChatState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

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

fn reply_handle(conversation: &str) -> ReplyHandle {
    ReplyHandle(json!({ "conversation": conversation }))
}

/// A conversation id as this adapter makes them (and as it accepts from the gateway).
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn message_number(message: &Posted) -> Result<i64, AdapterError> {
    message
        .id
        .parse()
        .map_err(|_| AdapterError::Invalid("not a web chat message id".to_string()))
}

fn database(e: TranscriptError) -> AdapterError {
    AdapterError::Invalid(e.to_string())
}

fn not_a_conversation() -> AdapterError {
    AdapterError::Invalid("not a web chat conversation".to_string())
}

#[async_trait::async_trait]
impl Adapter for WebChat {
    fn platform(&self) -> Platform {
        Platform::Web
    }

    async fn shutdown(&self) {
        self.shared.closing.cancel();
    }

    fn max_message_len(&self) -> usize {
        100_000
    }

    fn edit_interval(&self) -> Duration {
        Duration::from_millis(100)
    }

    /// The page renders markdown itself (escaped first), so the text goes out as written.
    fn render(&self, markdown: &str) -> String {
        markdown.to_string()
    }

    fn set_banner(&self, text: Option<&str>) {
        *self
            .shared
            .banner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = text.map(str::to_string);
    }

    async fn post(&self, place: &Place, text: &str) -> Result<Posted, AdapterError> {
        if !valid_id(&place.channel) {
            return Err(not_a_conversation());
        }
        let number = self
            .shared
            .lock()
            .push(&place.channel, Author::Bot, text, None, true)
            .map_err(database)?
            .ok_or_else(not_a_conversation)?;
        Ok(Posted {
            platform: Platform::Web,
            channel: place.channel.clone(),
            id: number.to_string(),
        })
    }

    async fn edit(&self, message: &Posted, text: &str) -> Result<(), AdapterError> {
        let number = message_number(message)?;
        let mut state = self.shared.lock();
        if !state
            .transcript
            .edit(&message.channel, number, text)
            .map_err(database)?
        {
            return Err(AdapterError::Invalid(
                "no such web chat message".to_string(),
            ));
        }
        state.publish(
            &message.channel,
            WebEvent::Edit {
                id: number,
                text: text.to_string(),
            },
        );
        Ok(())
    }

    async fn post_card(&self, place: &Place, card: &Card) -> Result<Posted, AdapterError> {
        if !valid_id(&place.channel) {
            return Err(not_a_conversation());
        }
        let number = self
            .shared
            .lock()
            .push(
                &place.channel,
                Author::Bot,
                &card.to_markdown(),
                Some(card),
                true,
            )
            .map_err(database)?
            .ok_or_else(not_a_conversation)?;
        Ok(Posted {
            platform: Platform::Web,
            channel: place.channel.clone(),
            id: number.to_string(),
        })
    }

    async fn update_card(&self, message: &Posted, card: &Card) -> Result<(), AdapterError> {
        let number = message_number(message)?;
        let mut state = self.shared.lock();
        if !state
            .transcript
            .update_card(&message.channel, number, card)
            .map_err(database)?
        {
            return Err(AdapterError::Invalid("no such web chat card".to_string()));
        }
        state.publish(
            &message.channel,
            WebEvent::Card {
                id: number,
                card: Box::new(card.clone()),
                update: true,
            },
        );
        Ok(())
    }

    /// A `notice` in the conversation, recorded in its transcript (so a page that reconnects still
    /// shows it); the web chat's user is the conversation, so both visibilities look the same.
    async fn respond(
        &self,
        reply: &ReplyHandle,
        text: &str,
        _visibility: Visibility,
    ) -> Result<(), AdapterError> {
        let conversation = reply
            .0
            .get("conversation")
            .and_then(Value::as_str)
            .filter(|id| valid_id(id))
            .ok_or_else(|| AdapterError::Invalid("not a web chat reply handle".to_string()))?;
        self.shared
            .lock()
            .push(conversation, Author::Notice, text, None, false)
            .map_err(database)?
            .ok_or_else(not_a_conversation)?;
        Ok(())
    }

    /// Kept for the page's trace. Streamed tokens are skipped: the answer arrives by edits.
    async fn progress(&self, place: &Place, event: &Value) {
        let kind = event.get("event").and_then(Value::as_str).unwrap_or("");
        if matches!(kind, "token" | "stream_restarted") || !valid_id(&place.channel) {
            return;
        }
        let mut state = self.shared.lock();
        match state.transcript.progress(&place.channel, event) {
            Ok(true) => state.publish(&place.channel, WebEvent::Progress(event.clone())),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(platform = "web", error = %e, "could not record a trace event")
            }
        }
    }

    fn pages(&self) -> Vec<Page> {
        let shared = self.shared.clone();
        vec![
            Page::new(Method::GET, "/", page, shared.clone()),
            Page::new(
                Method::POST,
                "/api/conversations",
                create_conversation,
                shared.clone(),
            )
            .body_limit(MAX_BODY),
            Page::new(
                Method::POST,
                "/api/conversations/{id}/messages",
                send_message,
                shared.clone(),
            )
            .body_limit(MAX_BODY),
            Page::new(
                Method::GET,
                "/api/conversations/{id}/events",
                events,
                shared.clone(),
            ),
            Page::new(
                Method::POST,
                "/api/approvals/{approval}",
                decide,
                shared.clone(),
            )
            .body_limit(MAX_BODY),
            Page::new(Method::GET, "/api/banner", banner, shared),
        ]
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP handlers

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

async fn page(State(shared): State<Arc<Shared>>) -> Response {
    crate::pages::html_page(&shared.page)
}

/// The gateway's standing notice, or `null`. Read by the page when it opens and after each send, so
/// a reload that fixes (or breaks) the provider shows at the next message.
async fn banner(State(shared): State<Arc<Shared>>) -> Response {
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

/// `text` of a body as a message, or the error to answer.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn message_text(body: &Value) -> Result<String, Response> {
    match body.get("text") {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
        Some(Value::String(_)) | None | Some(Value::Null) => Err(error(
            StatusCode::BAD_REQUEST,
            "the message is empty: send {\"text\": \"…\"} with some text",
        )),
        Some(_) => Err(error(StatusCode::BAD_REQUEST, "`text` must be a string")),
    }
}

/// A user message → the inbound event it means.
fn inbound_for(conversation: &str, text: &str) -> Inbound {
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
    }
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

/// Record the user's message and hand it to the inbox, atomically with respect to `post`. A command is
/// recorded too, as typed, so the page shows what was asked above the notice that answers it.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn deliver(shared: &Shared, conversation: &str, text: &str) -> Result<(), Response> {
    let inbound = inbound_for(conversation, text);
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

async fn create_conversation(
    State(shared): State<Arc<Shared>>,
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
        && let Err(response) = deliver(&shared, &id, &text)
    {
        return response;
    }
    (StatusCode::CREATED, axum::Json(json!({ "id": id }))).into_response()
}

async fn send_message(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match read_json(body) {
        Ok(Some(body)) => body,
        Ok(None) => {
            return error(
                StatusCode::BAD_REQUEST,
                "the message is empty: send {\"text\": \"…\"} with some text",
            );
        }
        Err(response) => return response,
    };
    let text = match message_text(&body) {
        Ok(text) => text,
        Err(response) => return response,
    };
    if !valid_id(&id) {
        return no_such_conversation();
    }
    match deliver(&shared, &id, &text) {
        Ok(()) => (
            StatusCode::ACCEPTED,
            axum::Json(json!({ "accepted": true })),
        )
            .into_response(),
        Err(response) => response,
    }
}

async fn events(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    if !valid_id(&id) {
        return no_such_conversation();
    }
    let (replay, live) = {
        let mut state = shared.lock();
        // Replay and subscription under one lock: nothing is missed, nothing doubled.
        let replay = match state.transcript.replay(&id) {
            Ok(Some(replay)) => replay,
            Ok(None) => return no_such_conversation(),
            Err(e) => return database_error(&e),
        };
        let live = state
            .live
            .entry(id.clone())
            .or_insert_with(|| broadcast::channel(SUBSCRIBER_BUFFER).0)
            .subscribe();
        (replay, live)
    };
    let subscription = Subscription {
        receiver: Some(live),
        shared: shared.clone(),
        conversation: id,
    };
    let replay = futures_util::stream::iter(
        std::iter::once(WebEvent::Reset).chain(replay.into_iter().map(WebEvent::from_entry)),
    );
    let live = futures_util::stream::unfold(subscription, |mut subscription| async move {
        let receiver = subscription.receiver.as_mut()?;
        match receiver.recv().await {
            Ok(event) => Some((event, subscription)),
            // Too slow: end the stream; the client reconnects and gets a full replay.
            Err(broadcast::error::RecvError::Lagged(_))
            | Err(broadcast::error::RecvError::Closed) => None,
        }
    });
    let stream = replay
        .chain(live)
        .take_until(shared.closing.clone().cancelled_owned())
        .map(|event| Ok::<Event, Infallible>(event.to_sse()));
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn decide(
    State(shared): State<Arc<Shared>>,
    Path(approval): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match read_json(body) {
        Ok(Some(body)) => body,
        Ok(None) => {
            return error(
                StatusCode::BAD_REQUEST,
                "send {\"option\": \"<the chosen option's label>\"} or {\"option\": <its 0-based index>}",
            );
        }
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

/// The option a decision names: the CLI counts from 1 and people read labels, so the API takes either
/// a label or the button's 0-based index (what the page sends), and says which when neither fits.
#[derive(Clone, Debug, PartialEq)]
enum Choice {
    /// The 0-based index of the option.
    Index(u64),
    /// The option's label, matched without regard to case.
    Label(String),
}

impl Choice {
    /// `option` of a request body; `None` when it is neither a whole number nor a label.
    fn of(value: &Value) -> Option<Choice> {
        match value {
            Value::Number(n) => n.as_u64().map(Choice::Index),
            Value::String(label) if !label.trim().is_empty() => {
                Some(Choice::Label(label.trim().to_string()))
            }
            _ => None,
        }
    }

    /// The index of the chosen option among `options`, or a message listing them.
    fn index_in(&self, options: &[String]) -> Result<usize, String> {
        let found = match self {
            Choice::Index(index) => usize::try_from(*index)
                .ok()
                .filter(|&index| index < options.len()),
            Choice::Label(label) => {
                let wanted = label.to_lowercase();
                options.iter().position(|o| o.to_lowercase() == wanted)
            }
        };
        found.ok_or_else(|| {
            let listed = options
                .iter()
                .enumerate()
                .map(|(i, o)| format!("{i}: \"{o}\""))
                .collect::<Vec<_>>()
                .join(", ");
            let asked = match self {
                Choice::Index(index) => format!("index {index}"),
                Choice::Label(label) => format!("\"{label}\""),
            };
            format!(
                "`option` {asked} is not an option of this approval; send one of its labels, or its \
                 0-based index: {listed}"
            )
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(
            escape_html("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert!(valid_id("0123abcd"));
        assert!(!valid_id("../x"));
    }

    #[test]
    fn slash_text_is_a_command_and_other_text_a_mention() {
        let inbound = inbound_for("c1", "/cancel 42");
        assert_eq!(
            inbound.kind,
            InboundKind::Command(Command::Cancel("42".into()))
        );
        let inbound = inbound_for("c1", "hello /status");
        assert!(
            matches!(inbound.kind, InboundKind::Mention { continues: Some(ref c), .. } if c == "c1")
        );
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_choice_is_a_label_in_any_case_or_a_0_based_index() {
        let options = ["Approve".to_string(), "Reject".to_string()];
        assert_eq!(Choice::of(&json!(1)).unwrap().index_in(&options), Ok(1));
        assert_eq!(
            Choice::of(&json!(" REJECT ")).unwrap().index_in(&options),
            Ok(1)
        );
        assert_eq!(
            Choice::of(&json!("approve")).unwrap().index_in(&options),
            Ok(0)
        );
        let unknown = Choice::of(&json!("maybe"))
            .unwrap()
            .index_in(&options)
            .unwrap_err();
        assert!(
            unknown.contains("\"maybe\"") && unknown.contains("0: \"Approve\", 1: \"Reject\""),
            "{unknown}"
        );
        assert!(Choice::of(&json!(2)).unwrap().index_in(&options).is_err());
        for bad in [json!(-1), json!(1.5), json!(""), json!(null), json!([0])] {
            assert_eq!(Choice::of(&bad), None, "{bad}");
        }
    }

    #[test]
    fn each_conversation_is_its_own_user() {
        assert_ne!(
            inbound_for("c1", "hi").user.id,
            inbound_for("c2", "hi").user.id
        );
    }
}
