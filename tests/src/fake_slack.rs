//! # Fake Slack — a test double for the Web API, Socket Mode and response URLs
//!
//! Role: a real HTTP + websocket server on 127.0.0.1 that the Slack adapter talks to instead of
//! slack.com, shaped after Slack's own fixtures (shared/data/slack: `web_api_mock_responses.json`,
//! `socket_mode_envelopes.jsonl`, the Web API OpenAPI excerpt), embedded here so tests need no files:
//! - Web API: `GET|POST /api/{method}` for `auth.test`, `apps.connections.open`, `chat.postMessage`,
//!   `chat.update`, `chat.postEphemeral`; the `Authorization: Bearer` token is checked (the app token
//!   for `apps.connections.open`, the bot token otherwise) and a wrong one gets
//!   `{"ok":false,"error":"invalid_auth"}`, as Slack answers (HTTP 200);
//! - Socket Mode: `apps.connections.open` returns `ws://127.0.0.1:PORT/link/?ticket=…`; the socket
//!   sends `hello`, then whatever the test pushes ([`FakeSlack::push_envelope`]); acks are recorded
//!   with their receive time;
//! - response URLs: `POST /hooks/…` (what [`FakeSlack::response_url`] hands out) answers `ok`.
//!
//! Every Web API and response-URL call is recorded ([`Call`]: method, params — JSON body, form or
//! query — token, time) and can be awaited ([`FakeSlack::wait_for_call`]). Builders produce
//! Slack-shaped payloads ([`app_mention`], [`thread_message`], [`block_actions`], [`slash_command`])
//! and signed Events API requests ([`sign`], [`signed_headers`]).
//!
//! Invariants: binds only 127.0.0.1; no lock is held across an `.await`; the server stops when the
//! [`FakeSlack`] is dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

/// The workspace the fake pretends to be (as in Slack's `auth.test` fixture).
pub const TEAM_ID: &str = "T111";
/// The bot's user id returned by `auth.test`.
pub const BOT_USER_ID: &str = "W11";
/// The bot id returned by `auth.test`.
pub const BOT_ID: &str = "B111";
/// The app id in envelopes and socket URLs.
pub const APP_ID: &str = "A111";

/// One recorded Web API or response-URL call.
#[derive(Clone, Debug)]
pub struct Call {
    /// The Web API method (`chat.postMessage` …) or `response_url`.
    pub method: String,
    /// The parameters: the JSON body, the form or the query, as a JSON object.
    pub params: Value,
    /// The bearer token sent, if any.
    pub token: Option<String>,
    /// The path requested (useful for response URLs).
    pub path: String,
    /// When the call arrived.
    pub at: Instant,
    /// What the fake answered (`Null` for response URLs).
    pub response: Value,
}

impl Call {
    /// The `ts` the fake gave the message this call posted or updated.
    pub fn response_ts(&self) -> Option<String> {
        self.response["ts"].as_str().map(str::to_string)
    }
}

/// One acknowledgement received on the Socket Mode websocket.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The acked envelope id.
    pub envelope_id: String,
    /// The whole ack frame (Slack allows a `payload` next to the id).
    pub frame: Value,
    /// When the ack arrived.
    pub at: Instant,
}

struct Shared {
    addr: SocketAddr,
    bot_token: String,
    app_token: String,
    calls: Mutex<Vec<Call>>,
    acks: Mutex<Vec<Ack>>,
    /// Live sockets, newest last.
    sockets: Mutex<Vec<(u64, mpsc::UnboundedSender<Message>)>>,
    connections: AtomicU64,
    changed: Notify,
    next_ts: AtomicU64,
}

impl Shared {
    fn changed(&self) {
        self.changed.notify_waiters();
    }

    fn ts(&self) -> String {
        let n = self.next_ts.fetch_add(1, Ordering::Relaxed);
        format!("1700000000.{n:06}")
    }
}

/// A running fake Slack.
pub struct FakeSlack {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeSlack {
    /// Start on 127.0.0.1 with an ephemeral port.
    pub async fn start() -> FakeSlack {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            addr,
            bot_token: "xoxb-fake-bot-token".to_string(),
            app_token: "xapp-fake-app-token".to_string(),
            calls: Mutex::new(Vec::new()),
            acks: Mutex::new(Vec::new()),
            sockets: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            changed: Notify::new(),
            next_ts: AtomicU64::new(100),
        });
        let app = Router::new()
            .route("/api/{method}", any(web_api))
            .route("/hooks/{*rest}", post(hook))
            .route("/link/", get(link))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSlack { shared, task }
    }

    /// The Web API base URL (`http://127.0.0.1:PORT/api`), for `SlackConfig::api_base_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.shared.addr)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The bot token the fake accepts.
    pub fn bot_token(&self) -> String {
        self.shared.bot_token.clone()
    }

    /// The app-level token the fake accepts for `apps.connections.open`.
    pub fn app_token(&self) -> String {
        self.shared.app_token.clone()
    }

    /// A response URL served by the fake (calls to it are recorded as method `response_url`).
    pub fn response_url(&self, id: &str) -> String {
        format!(
            "http://{}/hooks/commands/{TEAM_ID}/{id}/secret",
            self.shared.addr
        )
    }

    /// Every Web API / response-URL call so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared.calls).clone()
    }

    /// The calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// Every ack so far.
    pub fn acks(&self) -> Vec<Ack> {
        lock(&self.shared.acks).clone()
    }

    /// How many websockets have been opened so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Wait until `check` finds something in the fake's state, or `timeout` passes.
    async fn wait<T>(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&FakeSlack) -> Option<T>,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(found) = check(self) {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// The first call of `method` whose params satisfy `predicate`, waiting up to `timeout`.
    pub async fn wait_for_call(
        &self,
        method: &str,
        predicate: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Call> {
        self.wait(timeout, |fake| {
            fake.calls()
                .into_iter()
                .find(|c| c.method == method && predicate(&c.params))
        })
        .await
    }

    /// The ack of `envelope_id`, waiting up to `timeout`.
    pub async fn wait_for_ack(&self, envelope_id: &str, timeout: Duration) -> Option<Ack> {
        self.wait(timeout, |fake| {
            fake.acks()
                .into_iter()
                .find(|a| a.envelope_id == envelope_id)
        })
        .await
    }

    /// Wait until at least `n` websockets have been opened (and the newest is live).
    pub async fn wait_for_connections(&self, n: u64, timeout: Duration) -> bool {
        self.wait(timeout, |fake| {
            (fake.connections() >= n && !lock(&fake.shared.sockets).is_empty()).then_some(())
        })
        .await
        .is_some()
    }

    /// Wait until no websocket is open (the client closed it), up to `timeout`.
    pub async fn wait_for_no_socket(&self, timeout: Duration) -> bool {
        self.wait(timeout, |fake| {
            lock(&fake.shared.sockets).is_empty().then_some(())
        })
        .await
        .is_some()
    }

    /// Send a frame on the newest live socket, waiting (up to 10 s) for one to be connected.
    pub async fn push_frame(&self, frame: Value) {
        assert!(
            self.wait_for_connections(1, Duration::from_secs(10)).await,
            "no Socket Mode client connected"
        );
        let sockets = lock(&self.shared.sockets);
        let (_, tx) = sockets.last().expect("a live socket");
        tx.send(Message::Text(frame.to_string().into()))
            .expect("socket open");
    }

    /// Push an envelope (see [`envelope`]) to the connected client; returns its envelope id (one is
    /// generated when the envelope has none).
    pub async fn push_envelope(&self, mut envelope: Value) -> String {
        let id = match envelope.get("envelope_id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => {
                let id = format!("env-{}", self.shared.ts().replace('.', "-"));
                envelope["envelope_id"] = json!(id);
                id
            }
        };
        self.push_frame(envelope).await;
        id
    }

    /// Ask the client to reconnect, as Slack does before it rotates a connection.
    pub async fn send_disconnect(&self) {
        self.push_frame(json!({
            "type": "disconnect",
            "reason": "refresh_requested",
            "debug_info": {"host": "applink-fake"},
        }))
        .await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string)
}

/// A form or query string as a JSON object of strings.
fn form_object(text: &str) -> Value {
    let mut map = serde_json::Map::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        map.insert(percent_decode(k), Value::String(percent_decode(v)));
    }
    Value::Object(map)
}

fn percent_decode(text: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encode for `application/x-www-form-urlencoded`.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

async fn web_api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let params = if content_type.starts_with("application/json") {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    } else if !body.is_empty() {
        form_object(&String::from_utf8_lossy(&body))
    } else {
        form_object(query.as_deref().unwrap_or(""))
    };
    let token = bearer(&headers);
    let at = Instant::now();

    let expected = if method == "apps.connections.open" {
        &shared.app_token
    } else {
        &shared.bot_token
    };
    let answer = match token.clone() {
        None => json!({"ok": false, "error": "not_authed"}),
        Some(token) if &token != expected => json!({"ok": false, "error": "invalid_auth"}),
        Some(_) => answer(&shared, &method, &params),
    };
    lock(&shared.calls).push(Call {
        method: method.clone(),
        params,
        token,
        path: format!("/api/{method}"),
        at,
        response: answer.clone(),
    });
    shared.changed();
    axum::Json(answer).into_response()
}

/// What Slack answers to `method` (shapes from Slack's fixtures and the OpenAPI excerpt).
fn answer(shared: &Shared, method: &str, params: &Value) -> Value {
    let channel = params.get("channel").and_then(Value::as_str);
    match method {
        "auth.test" => json!({
            "ok": true,
            "url": "https://xyz.slack.com/",
            "team": "Testing Workspace",
            "user": "bot-user",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": false,
        }),
        "apps.connections.open" => json!({
            "ok": true,
            "url": format!("ws://{}/link/?ticket={}&app_id={APP_ID}", shared.addr, shared.ts()),
        }),
        "chat.postMessage" => match channel {
            None => json!({"ok": false, "error": "channel_not_found"}),
            Some(channel) => {
                let ts = shared.ts();
                let mut message = json!({
                    "type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": ts,
                    "text": params.get("text").cloned().unwrap_or(json!("")),
                });
                if let Some(thread) = params.get("thread_ts") {
                    message["thread_ts"] = thread.clone();
                }
                if let Some(blocks) = params.get("blocks") {
                    message["blocks"] = blocks.clone();
                }
                json!({"ok": true, "channel": channel, "ts": ts, "message": message})
            }
        },
        "chat.update" => match (channel, params.get("ts").and_then(Value::as_str)) {
            (Some(channel), Some(ts)) => {
                let text = params.get("text").cloned().unwrap_or(json!(""));
                let mut message = json!({"user": BOT_USER_ID, "bot_id": BOT_ID, "text": text});
                if let Some(blocks) = params.get("blocks") {
                    message["blocks"] = blocks.clone();
                }
                json!({"ok": true, "channel": channel, "ts": ts, "text": text, "message": message})
            }
            (None, _) => json!({"ok": false, "error": "channel_not_found"}),
            (_, None) => json!({"ok": false, "error": "message_not_found"}),
        },
        "chat.postEphemeral" => {
            if channel.is_none() || params.get("user").is_none() {
                json!({"ok": false, "error": "user_not_in_channel"})
            } else {
                json!({"ok": true, "message_ts": shared.ts()})
            }
        }
        _ => json!({"ok": false, "error": "unknown_method"}),
    }
}

async fn hook(
    State(shared): State<Arc<Shared>>,
    Path(rest): Path<String>,
    body: Bytes,
) -> Response {
    let params = serde_json::from_slice(&body).unwrap_or(Value::Null);
    lock(&shared.calls).push(Call {
        method: "response_url".to_string(),
        params,
        token: None,
        path: format!("/hooks/{rest}"),
        at: Instant::now(),
        response: Value::Null,
    });
    shared.changed();
    (StatusCode::OK, "ok").into_response()
}

async fn link(State(shared): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| serve_socket(shared, socket))
}

async fn serve_socket(shared: Arc<Shared>, socket: WebSocket) {
    let id = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let hello = json!({
        "type": "hello",
        "num_connections": 1,
        "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
        "connection_info": {"app_id": APP_ID},
    });
    if sink
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    lock(&shared.sockets).push((id, tx));
    shared.changed();
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(frame) => if sink.send(frame).await.is_err() { break },
                None => break,
            },
            incoming = stream.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(frame) = serde_json::from_str::<Value>(text.as_str())
                        && let Some(envelope_id) = frame.get("envelope_id").and_then(Value::as_str)
                    {
                        lock(&shared.acks).push(Ack {
                            envelope_id: envelope_id.to_string(),
                            frame: frame.clone(),
                            at: Instant::now(),
                        });
                        shared.changed();
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    lock(&shared.sockets).retain(|(sid, _)| *sid != id);
    shared.changed();
}

// -------------------------------------------------------------------------------------------
// Payload builders.

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Wrap an Events API body, interactive payload or slash command in a Socket Mode envelope:
/// `kind` is `events_api`, `interactive` or `slash_commands`; `retry_attempt` 0 for a first delivery.
pub fn envelope(kind: &str, payload: Value, retry_attempt: u32) -> Value {
    let mut envelope = json!({
        "envelope_id": format!("{:08x}-4d35-4d0b-b6aa-3361493e1caf", next_id()),
        "payload": payload,
        "type": kind,
        "accepts_response_payload": kind != "events_api",
    });
    if kind == "events_api" {
        envelope["retry_attempt"] = json!(retry_attempt);
        envelope["retry_reason"] = json!(if retry_attempt > 0 { "timeout" } else { "" });
    }
    envelope
}

/// The same envelope delivered again, as Slack does after a missing ack (`retry_attempt` set).
pub fn redelivery(envelope: &Value, retry_attempt: u32) -> Value {
    let mut again = envelope.clone();
    again["retry_attempt"] = json!(retry_attempt);
    again["retry_reason"] = json!("timeout");
    again
}

fn event_callback(event: Value) -> Value {
    let event_time = event
        .get("ts")
        .and_then(Value::as_str)
        .and_then(|ts| ts.split('.').next())
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1610197986);
    json!({
        "token": "xxx",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": format!("Ev{:010}", next_id()),
        "event_time": event_time,
        "authorizations": [{"enterprise_id": null, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                            "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false,
        "event_context": "1-message-T111-C111",
    })
}

/// An Events API `event_callback` body with an `app_mention` event; `text` should contain
/// `<@W11>` ([`BOT_USER_ID`]).
pub fn app_mention(
    channel: &str,
    user: &str,
    text: &str,
    ts: &str,
    thread_ts: Option<&str>,
) -> Value {
    let mut event = json!({
        "client_msg_id": format!("c9b466b5-845c-49c6-a371-{:012}", next_id()),
        "type": "app_mention",
        "text": text,
        "user": user,
        "ts": ts,
        "team": TEAM_ID,
        "channel": channel,
        "event_ts": ts,
    });
    if let Some(thread) = thread_ts {
        event["thread_ts"] = json!(thread);
    }
    event_callback(event)
}

/// An Events API body with a `message` event written in thread `thread_ts`.
pub fn thread_message(channel: &str, user: &str, text: &str, ts: &str, thread_ts: &str) -> Value {
    event_callback(json!({
        "client_msg_id": format!("c9b466b5-845c-49c6-a371-{:012}", next_id()),
        "type": "message",
        "text": text,
        "user": user,
        "ts": ts,
        "thread_ts": thread_ts,
        "parent_user_id": BOT_USER_ID,
        "team": TEAM_ID,
        "channel": channel,
        "event_ts": ts,
        "channel_type": "channel",
    }))
}

/// An Events API body with a `message` event posted by the bot itself in a thread.
pub fn own_message(channel: &str, text: &str, ts: &str, thread_ts: &str) -> Value {
    event_callback(json!({
        "type": "message",
        "text": text,
        "user": BOT_USER_ID,
        "bot_id": BOT_ID,
        "app_id": APP_ID,
        "ts": ts,
        "thread_ts": thread_ts,
        "team": TEAM_ID,
        "channel": channel,
        "event_ts": ts,
        "channel_type": "channel",
    }))
}

/// An interactive `block_actions` payload: `user` clicked the button `action_id` on the bot's
/// message `message_ts` (in thread `thread_ts`, if any) in `channel`.
pub fn block_actions(
    channel: &str,
    user: &str,
    message_ts: &str,
    thread_ts: Option<&str>,
    action_id: &str,
    response_url: &str,
) -> Value {
    let mut message = json!({
        "type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": message_ts,
        "text": "Approval needed",
    });
    let mut container = json!({
        "type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": false,
    });
    if let Some(thread) = thread_ts {
        message["thread_ts"] = json!(thread);
        container["thread_ts"] = json!(thread);
    }
    json!({
        "type": "block_actions",
        "user": {"id": user, "username": format!("{user}-name"), "name": format!("{user}-name"),
                 "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "xxx",
        "container": container,
        "trigger_id": format!("{}.222.{:032x}", next_id(), next_id()),
        "team": {"id": TEAM_ID, "domain": "testing"},
        "enterprise": null,
        "is_enterprise_install": false,
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "response_url": response_url,
        "actions": [{
            "action_id": action_id,
            "block_id": "opc-approval",
            "text": {"type": "plain_text", "text": "Approve", "emoji": true},
            "value": "0",
            "style": "primary",
            "type": "button",
            "action_ts": "1610198080.300836",
        }],
    })
}

/// A slash command payload (Socket Mode shape; as a form it is what HTTP mode receives).
pub fn slash_command(
    channel: &str,
    user: &str,
    command: &str,
    text: &str,
    response_url: &str,
) -> Value {
    json!({
        "token": "xxx",
        "team_id": TEAM_ID,
        "team_domain": "testing",
        "channel_id": channel,
        "channel_name": "general",
        "user_id": user,
        "user_name": format!("{user}-name"),
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "response_url": response_url,
        "trigger_id": format!("{}.222.{:032x}", next_id(), next_id()),
    })
}

/// A JSON object of strings as an `application/x-www-form-urlencoded` body (slash commands over
/// HTTP).
pub fn form_body(fields: &Value) -> String {
    fields
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    format!("{}={}", percent_encode(k), percent_encode(&v))
                })
                .collect::<Vec<_>>()
                .join("&")
        })
        .unwrap_or_default()
}

/// An interactive payload as Slack POSTs it over HTTP: `payload=<json>` form-encoded.
pub fn interaction_form(payload: &Value) -> String {
    format!("payload={}", percent_encode(&payload.to_string()))
}

/// Now, in Unix seconds (for `X-Slack-Request-Timestamp`).
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Slack's v0 request signature: `"v0=" + hex(HMAC-SHA256(secret, "v0:{timestamp}:{body}"))`.
pub fn sign(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// The headers Slack sends with a signed request: timestamp and signature.
pub fn signed_headers(secret: &str, timestamp: i64, body: &str) -> Vec<(String, String)> {
    vec![
        (
            "x-slack-request-timestamp".to_string(),
            timestamp.to_string(),
        ),
        (
            "x-slack-signature".to_string(),
            sign(secret, timestamp, body),
        ),
    ]
}
