//! The built-in web chat: a chat page, a small JSON API and a server-sent event stream per
//! conversation, served on the gateway's own HTTP server. It is the default channel: it needs no
//! platform token.
//!
//! Routes (from [`Adapter::routes`]; the gateway owns `/healthz`, `/api/org` and `/org`):
//! - `GET /` — the page (HTML, CSS and JS in one response, no external fetches);
//! - `POST /api/conversations` — `201 {"id"}`; an optional `{"text"}` is sent as the first message;
//! - `POST /api/conversations/{id}/messages` `{"text"}` — `202`; `/word rest` is a command, anything
//!   else a mention continuing the conversation;
//! - `GET /api/conversations/{id}/events` — SSE: first `reset`, then the conversation's current state
//!   (`message`, `card`, `progress`), then live `message` / `edit` / `card` / `card_update` / `notice`
//!   / `progress`; a keep-alive comment every 15 s;
//! - `POST /api/approvals/{approval}` `{"option"}` — `202`, a button click on an approval card.
//!
//! Invariants:
//! - with an access token configured, every route checks it (header `Authorization: Bearer …` or query
//!   `token=…`, compared in constant time) before reading anything else of the request;
//! - handlers never wait for the gateway: the inbox is offered the event with `try_send`, a full inbox
//!   is answered `503` with `Retry-After`;
//! - a user message is recorded and handed to the inbox under the same lock the gateway's `post` takes,
//!   so every subscriber sees a question before its answer;
//! - memory is bounded ([`MAX_CONVERSATIONS`], [`MAX_MESSAGES`], [`MAX_PROGRESS`]); the oldest is
//!   forgotten first. State is in memory only: a restart forgets the page's history (the gateway keeps
//!   its own record and may post into a conversation again, which recreates it);
//! - message text and tokens are never logged.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::mpsc::error::TrySendError;

use crate::{
    Adapter, AdapterError, Card, Command, Inbound, InboundKind, Inbox, Place, Platform, Posted,
    ReplyHandle, User, Visibility,
};

/// Conversations kept in memory; creating one more forgets the least recently used.
pub const MAX_CONVERSATIONS: usize = 1000;
/// Messages (user messages, answers, cards) kept per conversation for replay; the oldest go first.
pub const MAX_MESSAGES: usize = 200;
/// Progress events kept per conversation for replay; the oldest go first.
pub const MAX_PROGRESS: usize = 500;
/// Largest request body accepted, in bytes.
pub const MAX_BODY: usize = 32 * 1024;
/// Live events buffered per slow subscriber; one that falls further behind is disconnected, and its
/// `EventSource` reconnects and gets a full replay.
const SUBSCRIBER_BUFFER: usize = 1024;
/// How often an idle event stream carries a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

const PAGE: &str = include_str!("web/page.html");
const CSS: &str = include_str!("web/chat.css");
const JS: &str = include_str!("web/chat.js");

/// The web chat's configuration.
#[derive(Clone)]
pub struct WebConfig {
    /// When set, every route requires it (`Authorization: Bearer <token>` or `?token=<token>`). The
    /// gateway only serves the web chat without one on a loopback address.
    pub access_token: Option<String>,
    /// The page's title.
    pub title: String,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| "<redacted>"),
            )
            .field("title", &self.title)
            .finish()
    }
}

/// The web chat adapter. Cheap to share: routes and outbound calls use the same state.
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
    /// Cancelled by [`Adapter::shutdown`]: open event streams end, so the server can stop (an SSE
    /// response never ends by itself, and graceful shutdown waits for every response).
    closing: tokio_util::sync::CancellationToken,
}

#[derive(Default)]
struct ChatState {
    conversations: HashMap<String, Conversation>,
    /// Approval id → (conversation, message number) of its card.
    approvals: HashMap<i64, (String, u64)>,
    /// Monotonic use counter, for least-recently-used eviction.
    clock: u64,
}

struct Conversation {
    messages: VecDeque<Message>,
    progress: VecDeque<Value>,
    next_message: u64,
    last_used: u64,
    live: broadcast::Sender<WebEvent>,
}

struct Message {
    id: u64,
    author: &'static str,
    text: String,
    card: Option<Card>,
}

/// One event on a conversation's stream.
#[derive(Clone, Debug)]
enum WebEvent {
    /// Start of a replay: the page forgets what it shows.
    Reset,
    Message {
        id: u64,
        author: &'static str,
        text: String,
    },
    Edit {
        id: u64,
        text: String,
    },
    Card {
        id: u64,
        card: Card,
        update: bool,
    },
    Notice {
        text: String,
    },
    Progress(Value),
}

impl WebEvent {
    fn to_sse(&self) -> Event {
        let (name, data) = match self {
            WebEvent::Reset => ("reset", json!({})),
            WebEvent::Message { id, author, text } => (
                "message",
                json!({"id": id.to_string(), "author": author, "text": text}),
            ),
            WebEvent::Edit { id, text } => ("edit", json!({"id": id.to_string(), "text": text})),
            WebEvent::Card { id, card, update } => (
                if *update { "card_update" } else { "card" },
                json!({"id": id.to_string(), "card": card, "text": card.to_markdown()}),
            ),
            WebEvent::Notice { text } => ("notice", json!({"text": text})),
            WebEvent::Progress(event) => ("progress", event.clone()),
        };
        let event = Event::default().event(name).data(data.to_string());
        if matches!(self, WebEvent::Reset) {
            event.retry(Duration::from_secs(2))
        } else {
            event
        }
    }
}

impl Conversation {
    fn new(now: u64) -> Conversation {
        Conversation {
            messages: VecDeque::new(),
            progress: VecDeque::new(),
            next_message: 1,
            last_used: now,
            live: broadcast::channel(SUBSCRIBER_BUFFER).0,
        }
    }

    /// The events that rebuild this conversation's page, oldest first.
    fn snapshot(&self) -> Vec<WebEvent> {
        let mut events = vec![WebEvent::Reset];
        for message in &self.messages {
            events.push(match &message.card {
                Some(card) => WebEvent::Card {
                    id: message.id,
                    card: card.clone(),
                    update: false,
                },
                None => WebEvent::Message {
                    id: message.id,
                    author: message.author,
                    text: message.text.clone(),
                },
            });
        }
        events.extend(self.progress.iter().cloned().map(WebEvent::Progress));
        events
    }

    fn publish(&self, event: WebEvent) {
        // No subscriber is fine: the state is replayed on connect.
        let _ = self.live.send(event);
    }
}

impl ChatState {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The conversation `id`, marked as used; `None` if unknown.
    fn touch(&mut self, id: &str) -> Option<&mut Conversation> {
        let now = self.tick();
        let conversation = self.conversations.get_mut(id)?;
        conversation.last_used = now;
        Some(conversation)
    }

    /// Create conversation `id` (or use it if it exists), forgetting the least recently used one when
    /// full.
    fn open(&mut self, id: &str) -> &mut Conversation {
        let now = self.tick();
        if !self.conversations.contains_key(id) {
            while self.conversations.len() >= MAX_CONVERSATIONS {
                let Some(oldest) = self
                    .conversations
                    .iter()
                    .min_by_key(|(_, c)| c.last_used)
                    .map(|(key, _)| key.clone())
                else {
                    break;
                };
                self.conversations.remove(&oldest);
                self.approvals
                    .retain(|_, (conversation, _)| *conversation != oldest);
                tracing::debug!(
                    platform = "web",
                    "forgot the least recently used conversation"
                );
            }
        }
        let conversation = self
            .conversations
            .entry(id.to_string())
            .or_insert_with(|| Conversation::new(now));
        conversation.last_used = now;
        conversation
    }

    /// Record a message in conversation `id` (created if needed), publish it, return its number.
    fn push_message(
        &mut self,
        id: &str,
        author: &'static str,
        text: &str,
        card: Option<Card>,
    ) -> u64 {
        let conversation = self.open(id);
        let number = conversation.next_message;
        conversation.next_message += 1;
        conversation.messages.push_back(Message {
            id: number,
            author,
            text: text.to_string(),
            card: card.clone(),
        });
        let mut dropped = Vec::new();
        while conversation.messages.len() > MAX_MESSAGES {
            if let Some(old) = conversation.messages.pop_front()
                && let Some(card) = old.card
            {
                dropped.push((card.approval, old.id));
            }
        }
        conversation.publish(match &card {
            Some(card) => WebEvent::Card {
                id: number,
                card: card.clone(),
                update: false,
            },
            None => WebEvent::Message {
                id: number,
                author,
                text: text.to_string(),
            },
        });
        for (approval, message) in dropped {
            if self
                .approvals
                .get(&approval)
                .is_some_and(|(c, m)| c == id && *m == message)
            {
                self.approvals.remove(&approval);
            }
        }
        if let Some(card) = card {
            self.approvals
                .insert(card.approval, (id.to_string(), number));
        }
        number
    }
}

impl WebChat {
    /// The web chat; inbound events go to `inbox`. Mount [`Adapter::routes`] on the gateway's server.
    pub fn new(config: WebConfig, inbox: Inbox) -> Arc<WebChat> {
        let page = PAGE
            .replace("{{TITLE}}", &escape_html(&config.title))
            .replace("{{CSS}}", CSS)
            .replace("{{JS}}", JS);
        Arc::new(WebChat {
            shared: Arc::new(Shared {
                config,
                inbox,
                page,
                state: Mutex::new(ChatState::default()),
                closing: tokio_util::sync::CancellationToken::new(),
            }),
        })
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

fn operator() -> User {
    User {
        id: "operator".to_string(),
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

fn message_number(message: &Posted) -> Result<u64, AdapterError> {
    message
        .id
        .parse()
        .map_err(|_| AdapterError::Invalid("not a web chat message id".to_string()))
}

/// The conversation holding message `number` (a card when `card`), and the message's index in it.
fn stored<'a>(
    state: &'a mut ChatState,
    message: &Posted,
    number: u64,
    card: bool,
) -> Result<(&'a mut Conversation, usize), AdapterError> {
    let conversation = state
        .touch(&message.channel)
        .ok_or_else(|| AdapterError::Invalid("web chat conversation forgotten".to_string()))?;
    let index = conversation
        .messages
        .iter()
        .position(|m| m.id == number && m.card.is_some() == card)
        .ok_or_else(|| {
            AdapterError::Invalid(format!(
                "web chat {} forgotten",
                if card { "card" } else { "message" }
            ))
        })?;
    Ok((conversation, index))
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

    async fn post(&self, place: &Place, text: &str) -> Result<Posted, AdapterError> {
        if !valid_id(&place.channel) {
            return Err(AdapterError::Invalid(
                "not a web chat conversation".to_string(),
            ));
        }
        let number = self
            .shared
            .lock()
            .push_message(&place.channel, "bot", text, None);
        Ok(Posted {
            platform: Platform::Web,
            channel: place.channel.clone(),
            id: number.to_string(),
        })
    }

    async fn edit(&self, message: &Posted, text: &str) -> Result<(), AdapterError> {
        let number = message_number(message)?;
        let mut state = self.shared.lock();
        let (conversation, index) = stored(&mut state, message, number, false)?;
        conversation.messages[index].text = text.to_string();
        conversation.publish(WebEvent::Edit {
            id: number,
            text: text.to_string(),
        });
        Ok(())
    }

    async fn post_card(&self, place: &Place, card: &Card) -> Result<Posted, AdapterError> {
        if !valid_id(&place.channel) {
            return Err(AdapterError::Invalid(
                "not a web chat conversation".to_string(),
            ));
        }
        let number = self.shared.lock().push_message(
            &place.channel,
            "bot",
            &card.to_markdown(),
            Some(card.clone()),
        );
        Ok(Posted {
            platform: Platform::Web,
            channel: place.channel.clone(),
            id: number.to_string(),
        })
    }

    async fn update_card(&self, message: &Posted, card: &Card) -> Result<(), AdapterError> {
        let number = message_number(message)?;
        let mut state = self.shared.lock();
        let (conversation, index) = stored(&mut state, message, number, true)?;
        let stored = &mut conversation.messages[index];
        stored.text = card.to_markdown();
        stored.card = Some(card.clone());
        conversation.publish(WebEvent::Card {
            id: number,
            card: card.clone(),
            update: true,
        });
        Ok(())
    }

    /// A `notice` on the conversation's stream; the web chat has one operator, so both visibilities
    /// look the same. Notices are not replayed.
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
            .ok_or_else(|| AdapterError::Invalid("not a web chat reply handle".to_string()))?;
        let mut state = self.shared.lock();
        let conversation = state
            .touch(conversation)
            .ok_or_else(|| AdapterError::Invalid("web chat conversation forgotten".to_string()))?;
        conversation.publish(WebEvent::Notice {
            text: text.to_string(),
        });
        Ok(())
    }

    /// Kept for the page's trace. Streamed tokens are skipped: the answer arrives by edits.
    async fn progress(&self, place: &Place, event: &Value) {
        let kind = event.get("event").and_then(Value::as_str).unwrap_or("");
        if matches!(kind, "token" | "stream_restarted") || !valid_id(&place.channel) {
            return;
        }
        let mut state = self.shared.lock();
        let Some(conversation) = state.touch(&place.channel) else {
            return;
        };
        conversation.progress.push_back(event.clone());
        while conversation.progress.len() > MAX_PROGRESS {
            conversation.progress.pop_front();
        }
        conversation.publish(WebEvent::Progress(event.clone()));
    }

    fn routes(&self) -> Router {
        let shared = self.shared.clone();
        Router::new()
            .route("/", get(page))
            .route("/api/conversations", post(create_conversation))
            .route("/api/conversations/{id}/messages", post(send_message))
            .route("/api/conversations/{id}/events", get(events))
            .route("/api/approvals/{approval}", post(decide))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .route_layer(middleware::from_fn_with_state(shared.clone(), authorize))
            .with_state(shared)
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP handlers

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

async fn authorize(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let Some(expected) = shared.config.access_token.as_deref() else {
        return next.run(request).await;
    };
    let from_header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|v| v.trim().to_string());
    let from_query = request.uri().query().and_then(|query| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == "token")
            .map(|(_, value)| percent_decode(value))
    });
    let ok = [from_header, from_query]
        .into_iter()
        .flatten()
        .any(|given| constant_time_eq(given.as_bytes(), expected.as_bytes()));
    if ok {
        return next.run(request).await;
    }
    tracing::debug!(platform = "web", "request without a valid access token");
    let mut response = error(
        StatusCode::UNAUTHORIZED,
        "this web chat needs its access token: send the header `Authorization: Bearer <token>`, \
         or open the page as `/?token=<token>`",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

async fn page(State(shared): State<Arc<Shared>>) -> Response {
    let nonce = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let body = shared.page.replace("{{NONCE}}", &nonce);
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    );
    let mut response = (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&csp) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
}

/// The JSON object of a request body; `Ok(None)` for an empty body.
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
        user: operator(),
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

/// Record the user's message and hand it to the inbox, atomically with respect to `post`.
#[allow(clippy::result_large_err)] // the error is the HTTP answer itself; not a hot path
fn deliver(shared: &Shared, conversation: &str, text: &str) -> Result<(), Response> {
    let inbound = inbound_for(conversation, text);
    let is_command = matches!(inbound.kind, InboundKind::Command(_));
    let mut state = shared.lock();
    if state.touch(conversation).is_none() {
        return Err(error(
            StatusCode::NOT_FOUND,
            "no such conversation (it may have been forgotten); start a new one",
        ));
    }
    match shared.inbox.try_send(inbound) {
        Ok(()) => {
            // Commands are answered by notices; they are not part of the conversation's history.
            if !is_command {
                state.push_message(conversation, "user", text, None);
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
    shared.lock().open(&id);
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
    let (snapshot, live) = {
        let mut state = shared.lock();
        let Some(conversation) = state.touch(&id) else {
            return error(
                StatusCode::NOT_FOUND,
                "no such conversation (it may have been forgotten); start a new one",
            );
        };
        // Snapshot and subscription under one lock: nothing is missed, nothing doubled.
        (conversation.snapshot(), conversation.live.subscribe())
    };
    let replay = futures_util::stream::iter(snapshot);
    let live = futures_util::stream::unfold(live, |mut live| async move {
        match live.recv().await {
            Ok(event) => Some((event, live)),
            // Too slow (or the conversation was forgotten): end the stream; the client reconnects
            // and gets a full replay (or a 404).
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
                "send {\"option\": <index of the chosen option>}",
            );
        }
        Err(response) => return response,
    };
    let Some(option) = body
        .get("option")
        .and_then(Value::as_u64)
        .and_then(|o| usize::try_from(o).ok())
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "`option` must be the index (0, 1, …) of the chosen option",
        );
    };
    let Ok(approval) = approval.parse::<i64>() else {
        return error(StatusCode::NOT_FOUND, "no such approval");
    };
    let mut state = shared.lock();
    let Some((conversation, number)) = state.approvals.get(&approval).cloned() else {
        return error(StatusCode::NOT_FOUND, "no such approval");
    };
    let Some(stored) = state.touch(&conversation).and_then(|c| {
        c.messages
            .iter()
            .find(|m| m.id == number)
            .and_then(|m| m.card.as_ref())
    }) else {
        return error(StatusCode::NOT_FOUND, "no such approval");
    };
    if option >= stored.options.len() {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "`option` must be below {}, the number of options",
                stored.options.len()
            ),
        );
    }
    let inbound = Inbound {
        place: place_of(&conversation),
        user: operator(),
        reply: reply_handle(&conversation),
        kind: InboundKind::Action {
            action: crate::Action::Decide { approval, option },
            card: Posted {
                platform: Platform::Web,
                channel: conversation.clone(),
                id: number.to_string(),
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

/// Compare without an early exit, so the time taken says nothing about where a guess went wrong.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

/// Decode `%XX` escapes and `+` in a query value; malformed escapes are kept as written.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert_eq!(percent_decode("a%2Fb+c%zz%4"), "a/b c%zz%4");
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
    fn debug_redacts_the_token() {
        let config = WebConfig {
            access_token: Some("hunter2".into()),
            title: "t".into(),
        };
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
