//! # Fake Discord — a test double for the REST API (v10) and the gateway websocket
//!
//! Role: a real server on 127.0.0.1 that the Discord adapter (serenity) talks to as if it were
//! Discord: REST under `/api/v10/…` (the routes OPC uses, with Discord's JSON error shape
//! `{"message", "code"}`) and a `ws://` gateway speaking v10 JSON (HELLO → IDENTIFY → READY,
//! heartbeat → ACK, RESUME → RESUMED) on which tests push dispatches (`MESSAGE_CREATE`,
//! `INTERACTION_CREATE`). Shapes follow Discord's docs (the excerpts in `shared/data/discord`), and
//! are complete enough for serenity's strict models.
//!
//! What it records: every REST call ([`Call`]: method, path, whether `Authorization: Bot <token>`
//! was right, JSON body), interaction callbacks with their delay after the dispatch ([`Callback`]),
//! IDENTIFY payloads, and the current state of every message posted (so edits are visible).
//!
//! Invariants:
//! - binds 127.0.0.1 only; no other host is ever contacted;
//! - REST routes other than interaction callbacks and webhooks (authorised by their interaction
//!   token, as on Discord) answer 401 without the right bot token, and record the call anyway;
//! - a message's thread can be started once; again → 400 with code 160004, as Discord does;
//! - it refuses what Discord refuses: starting a thread from a message inside a thread or forum post
//!   → 400 with code 50024; posting in a channel it does not know → 404 with code 10003; an
//!   interaction's webhook (follow-up `POST /webhooks/{app}/{token}`, `PATCH …/messages/@original`)
//!   before Discord has received the interaction's initial response → 404 "Unknown Webhook" (10015);
//!   a second initial response → 400 with code 40060;
//! - Discord "receives" an HTTP interaction's initial response when [`FakeDiscord::deliver_interaction`]
//!   has read the HTTP answer, and a gateway interaction's when its callback arrives;
//! - plain JSON text frames: serenity asks for no transport compression (its URL is `?v=10`);
//! - READY follows IDENTIFY at once, unless withheld ([`FakeDiscord::withhold_ready`]) until
//!   [`FakeDiscord::release_ready`]; [`FakeDiscord::close_sessions`] ends every ready session with a
//!   close code, as Discord does when it closes a connection for good (4004 authentication failed,
//!   4014 disallowed intents); [`FakeDiscord::open_sockets`] counts the gateway websockets open.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The guild the fake's conversations happen in.
pub const GUILD_ID: &str = "1100000000000000001";
/// A text channel of that guild.
pub const CHANNEL_ID: &str = "1100000000000000002";
/// A user who talks to the bot.
pub const USER_ID: &str = "1100000000000000003";
/// A forum channel of that guild: its posts are threads.
pub const FORUM_ID: &str = "1100000000000000004";

/// Channel types (Discord docs, "channel types").
const GUILD_TEXT: u64 = 0;
const DM: u64 = 1;
const PUBLIC_THREAD: u64 = 11;
const GUILD_FORUM: u64 = 15;
/// A timestamp for everything the fake makes.
const TIMESTAMP: &str = "2025-01-01T00:00:00.000000+00:00";
/// Heartbeat interval announced in HELLO (Discord's usual value).
const HEARTBEAT_MS: u64 = 41_250;
/// The key of the in-process frame telling a session to close with a code (never sent as is).
const CLOSE: &str = "fake-close";

/// One REST call the fake received.
#[derive(Clone, Debug)]
pub struct Call {
    /// `GET`, `POST`, `PUT`, `PATCH` …
    pub method: String,
    /// The path, e.g. `/api/v10/channels/1/messages`.
    pub path: String,
    /// Whether the `Authorization` header was `Bot <the fake's token>`.
    pub authorized: bool,
    /// The JSON body (`Null` when empty or not JSON).
    pub body: Value,
    /// The status the fake answered.
    pub status: u16,
}

/// An interaction callback (`POST /interactions/{id}/{token}/callback`).
#[derive(Clone, Debug)]
pub struct Callback {
    /// The interaction id.
    pub interaction_id: String,
    /// The response body (`{"type": 5, …}`).
    pub body: Value,
    /// Time between the fake sending the interaction and receiving this callback.
    pub after_dispatch: Duration,
}

/// Who writes a message.
#[derive(Clone, Debug)]
pub struct Author {
    /// Snowflake id.
    pub id: String,
    /// Username.
    pub name: String,
    /// Whether it is a bot account.
    pub bot: bool,
}

impl Author {
    /// A human user.
    pub fn user(id: &str, name: &str) -> Author {
        Author {
            id: id.into(),
            name: name.into(),
            bot: false,
        }
    }

    /// Another bot.
    pub fn bot(id: &str, name: &str) -> Author {
        Author {
            id: id.into(),
            name: name.into(),
            bot: true,
        }
    }

    fn json(&self) -> Value {
        user_json(&self.id, &self.name, self.bot)
    }
}

/// A channel the fake knows.
#[derive(Clone, Debug)]
struct Channel {
    kind: u64,
    parent: Option<String>,
    name: String,
}

impl Channel {
    fn is_thread(&self) -> bool {
        matches!(self.kind, 10..=12)
    }
}

/// An interaction the fake sent, and what became of it.
#[derive(Clone, Debug)]
struct Sent {
    token: String,
    at: Instant,
    channel: String,
    /// The message a component was clicked on.
    message: Option<String>,
    /// The initial response, once Discord has received it.
    initial: Option<Value>,
    /// The message `@original` names (the loading message of a deferral, or the clicked message).
    original: Option<String>,
}

#[derive(Default)]
struct Recorded {
    calls: Vec<Call>,
    callbacks: Vec<Callback>,
    identifies: Vec<Value>,
    /// Interaction id → what was sent.
    interactions: HashMap<String, Sent>,
    /// Messages started as threads.
    threads: HashSet<String>,
    /// Channel id → channel (text channels, forums, threads, DMs).
    channels: HashMap<String, Channel>,
    /// Message id → current message object.
    messages: HashMap<String, Value>,
    /// Gateway sessions that received READY.
    sessions: Vec<mpsc::UnboundedSender<Value>>,
}

struct Inner {
    addr: SocketAddr,
    token: String,
    application_id: String,
    bot_user_id: String,
    key: SigningKey,
    next_id: AtomicU64,
    seq: AtomicU64,
    recorded: Mutex<Recorded>,
    /// `true` while READY is withheld.
    ready_gate: tokio::sync::watch::Sender<bool>,
    /// Gateway websockets open now.
    sockets: AtomicU64,
}

impl Inner {
    fn recorded(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn new_id(&self) -> String {
        (1_300_000_000_000_000_000u64 + self.next_id.fetch_add(1, Ordering::SeqCst)).to_string()
    }

    fn bot_json(&self) -> Value {
        user_json(&self.bot_user_id, "opc-bot", true)
    }

    /// Send a dispatch to every ready session.
    fn dispatch(&self, event: &str, data: Value) {
        let frame = json!({
            "op": 0,
            "t": event,
            "s": self.seq.fetch_add(1, Ordering::SeqCst) + 2,
            "d": data,
        });
        let mut recorded = self.recorded();
        recorded.sessions.retain(|s| s.send(frame.clone()).is_ok());
    }
}

/// The fake: see the module documentation. Stops when dropped.
pub struct FakeDiscord {
    inner: Arc<Inner>,
    server: JoinHandle<()>,
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn user_json(id: &str, name: &str, bot: bool) -> Value {
    json!({
        "id": id,
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": null,
        "bot": bot,
        "public_flags": 0,
    })
}

fn member_json(user: &Value, roles: &[&str]) -> Value {
    json!({
        "user": user,
        "nick": null,
        "avatar": null,
        "roles": roles,
        "joined_at": TIMESTAMP,
        "premium_since": null,
        "deaf": false,
        "mute": false,
        "flags": 0,
        "pending": false,
        "permissions": "2147483647",
    })
}

fn error(status: StatusCode, code: u64, message: &str) -> (StatusCode, Value) {
    (status, json!({"message": message, "code": code}))
}

/// Discord received interaction `id`'s initial response `body`: its webhook now exists, and a
/// deferred message (type 5) shows a loading message that `@original` names.
fn receive_initial(inner: &Inner, recorded: &mut Recorded, id: &str, body: &Value) {
    let Some(sent) = recorded.interactions.get(id).cloned() else {
        return;
    };
    let original = match body["type"].as_u64() {
        Some(4 | 5) => {
            let mut shown = body["data"].clone();
            if shown.is_null() {
                shown = json!({});
            }
            let message = new_message_in(inner, recorded, &sent.channel, &shown);
            message["id"].as_str().map(str::to_string)
        }
        _ => sent.message.clone(),
    };
    if let Some(sent) = recorded.interactions.get_mut(id) {
        sent.initial = Some(body.clone());
        sent.original = original;
    }
}

impl FakeDiscord {
    /// Start on 127.0.0.1 with a fresh port.
    pub async fn start() -> FakeDiscord {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let inner = Arc::new(Inner {
            addr,
            token: "fake-discord-bot-token".into(),
            application_id: "1200000000000000001".into(),
            bot_user_id: "1200000000000000002".into(),
            key: SigningKey::from_bytes(&[7u8; 32]),
            next_id: AtomicU64::new(1),
            seq: AtomicU64::new(0),
            recorded: Mutex::new(Recorded::default()),
            ready_gate: tokio::sync::watch::Sender::new(false),
            sockets: AtomicU64::new(0),
        });
        {
            let mut recorded = inner.recorded();
            for (id, kind, name) in [
                (CHANNEL_ID, GUILD_TEXT, "general"),
                (FORUM_ID, GUILD_FORUM, "help-forum"),
            ] {
                recorded.channels.insert(
                    id.to_string(),
                    Channel {
                        kind,
                        parent: None,
                        name: name.to_string(),
                    },
                );
            }
        }
        let app = Router::new()
            .route("/gateway-ws", get(gateway))
            .fallback(rest)
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeDiscord { inner, server }
    }

    /// The REST base URL to configure (`http://127.0.0.1:port/api`).
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.inner.addr)
    }

    /// The bot token the fake accepts.
    pub fn bot_token(&self) -> String {
        self.inner.token.clone()
    }

    /// The application id (sent in READY).
    pub fn application_id(&self) -> String {
        self.inner.application_id.clone()
    }

    /// The bot's user id.
    pub fn bot_user_id(&self) -> String {
        self.inner.bot_user_id.clone()
    }

    /// The Ed25519 public key (hex) interactions are signed with.
    pub fn public_key_hex(&self) -> String {
        hex::encode(self.inner.key.verifying_key().to_bytes())
    }

    /// Sign an HTTP interaction as Discord does: `(timestamp, hex signature of timestamp + body)`.
    pub fn sign(&self, body: &[u8]) -> (String, String) {
        let timestamp = "1735689600".to_string();
        let mut message = timestamp.as_bytes().to_vec();
        message.extend_from_slice(body);
        let signature = self.inner.key.sign(&message);
        (timestamp, hex::encode(signature.to_bytes()))
    }

    /// A thread a person started in text channel `parent` (not from a message of the bot's).
    /// Returns its channel id.
    pub fn start_thread(&self, parent: &str, name: &str) -> String {
        let id = self.inner.new_id();
        self.inner.recorded().channels.insert(
            id.clone(),
            Channel {
                kind: PUBLIC_THREAD,
                parent: Some(parent.to_string()),
                name: name.to_string(),
            },
        );
        id
    }

    /// A post in the forum [`FORUM_ID`] (a forum post is a thread). Returns its channel id.
    pub fn start_forum_post(&self, name: &str) -> String {
        self.start_thread(FORUM_ID, name)
    }

    /// Send `MESSAGE_CREATE`; `guild` `None` is a DM. Returns the message id.
    pub fn dispatch_message_create(
        &self,
        channel: &str,
        guild: Option<&str>,
        author: &Author,
        content: &str,
        mentions_bot: bool,
    ) -> String {
        let id = self.inner.new_id();
        if guild.is_none() {
            self.inner
                .recorded()
                .channels
                .entry(channel.to_string())
                .or_insert(Channel {
                    kind: DM,
                    parent: None,
                    name: String::new(),
                });
        }
        let mut message = json!({
            "id": id,
            "channel_id": channel,
            "author": author.json(),
            "content": content,
            "timestamp": TIMESTAMP,
            "edited_timestamp": null,
            "tts": false,
            "mention_everyone": false,
            "mentions": if mentions_bot { vec![self.inner.bot_json()] } else { vec![] },
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": false,
            "type": 0,
            "flags": 0,
            "components": [],
        });
        if let Some(guild) = guild {
            message["guild_id"] = json!(guild);
            message["member"] = json!({
                "roles": [],
                "joined_at": TIMESTAMP,
                "deaf": false,
                "mute": false,
                "flags": 0,
            });
        }
        self.inner.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// An `INTERACTION_CREATE` body for a button click on message `message` in `channel` of the
    /// fake's guild, by `user` holding `roles`. Registers its token; returns (interaction id, body).
    pub fn component_interaction(
        &self,
        channel: &str,
        message: &str,
        custom_id: &str,
        user: &str,
        roles: &[&str],
    ) -> (String, Value) {
        let message_json = self
            .inner
            .recorded()
            .messages
            .get(message)
            .cloned()
            .unwrap_or_else(|| {
                json!({
                    "id": message, "channel_id": channel, "author": self.inner.bot_json(),
                    "content": "", "timestamp": TIMESTAMP, "edited_timestamp": null, "tts": false,
                    "mention_everyone": false, "mentions": [], "mention_roles": [],
                    "attachments": [], "embeds": [], "pinned": false, "type": 0, "components": [],
                })
            });
        let mut body = self.interaction_base(3, channel, user, roles);
        body["message"] = message_json;
        body["data"] = json!({"custom_id": custom_id, "component_type": 2});
        (self.register(&body), body)
    }

    /// An `INTERACTION_CREATE` body for slash command `name` with string options, in the fake's
    /// channel, by [`USER_ID`] holding `roles`. Registers its token; returns (interaction id, body).
    pub fn command_interaction(
        &self,
        name: &str,
        options: &[(&str, &str)],
        roles: &[&str],
    ) -> (String, Value) {
        let mut body = self.interaction_base(2, CHANNEL_ID, USER_ID, roles);
        let options: Vec<Value> = options
            .iter()
            .map(|(n, v)| json!({"name": n, "type": 3, "value": v}))
            .collect();
        body["data"] = json!({
            "id": self.inner.new_id(),
            "name": name,
            "type": 1,
            "options": options,
        });
        (self.register(&body), body)
    }

    /// A PING interaction body (type 1), as Discord sends to check an endpoint.
    pub fn ping_interaction(&self) -> Value {
        json!({
            "id": self.inner.new_id(),
            "application_id": self.inner.application_id,
            "type": 1,
            "token": format!("tok-{}", self.inner.new_id()),
            "version": 1,
        })
    }

    fn interaction_base(&self, kind: u64, channel: &str, user: &str, roles: &[&str]) -> Value {
        let id = self.inner.new_id();
        json!({
            "id": id,
            "application_id": self.inner.application_id,
            "type": kind,
            "token": format!("interaction-token-{id}"),
            "version": 1,
            "guild_id": GUILD_ID,
            "channel_id": channel,
            "channel": {"id": channel, "type": 0, "name": "general", "permissions": "2147483647"},
            "member": member_json(&user_json(user, "alice", false), roles),
            "app_permissions": "2147483647",
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": GUILD_ID},
            "context": 0,
            "attachment_size_limit": 10_485_760,
        })
    }

    fn register(&self, body: &Value) -> String {
        let id = body["id"].as_str().unwrap_or_default().to_string();
        let sent = Sent {
            token: body["token"].as_str().unwrap_or_default().to_string(),
            at: Instant::now(),
            channel: body["channel_id"]
                .as_str()
                .unwrap_or(CHANNEL_ID)
                .to_string(),
            message: body["message"]["id"].as_str().map(str::to_string),
            initial: None,
            original: None,
        };
        self.inner.recorded().interactions.insert(id.clone(), sent);
        id
    }

    /// Send an interaction to an HTTP interactions endpoint at `url` as Discord does: signed, and
    /// its answer read as the initial response (from then on its webhook exists). Returns the status
    /// and the answer's JSON (`Null` when not JSON).
    pub async fn deliver_interaction(&self, url: &str, body: &Value) -> (u16, Value) {
        let bytes = serde_json::to_vec(body).expect("an interaction serialises");
        let (timestamp, signature) = self.sign(&bytes);
        let _ = rustls::crypto::ring::default_provider().install_default();
        let answer = reqwest::Client::new()
            .post(url)
            .header("X-Signature-Ed25519", signature)
            .header("X-Signature-Timestamp", timestamp)
            .header("content-type", "application/json")
            .body(bytes)
            .send()
            .await
            .expect("the interactions endpoint answers");
        let status = answer.status().as_u16();
        let answer: Value = answer.json().await.unwrap_or(Value::Null);
        if status == 200
            && let Some(id) = body["id"].as_str()
        {
            let mut recorded = self.inner.recorded();
            receive_initial(&self.inner, &mut recorded, id, &answer);
        }
        (status, answer)
    }

    /// Send a button click on `message` over the gateway; returns the interaction id.
    pub fn dispatch_component(
        &self,
        channel: &str,
        message: &str,
        custom_id: &str,
        user: &str,
        roles: &[&str],
    ) -> String {
        let (id, body) = self.component_interaction(channel, message, custom_id, user, roles);
        self.inner.dispatch("INTERACTION_CREATE", body);
        id
    }

    /// Send a slash command over the gateway; returns the interaction id.
    pub fn dispatch_command(&self, name: &str, options: &[(&str, &str)], roles: &[&str]) -> String {
        let (id, body) = self.command_interaction(name, options, roles);
        self.inner.dispatch("INTERACTION_CREATE", body);
        id
    }

    /// Every REST call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.recorded().calls.clone()
    }

    /// Every interaction callback so far.
    pub fn callbacks(&self) -> Vec<Callback> {
        self.inner.recorded().callbacks.clone()
    }

    /// From now on, answer IDENTIFY with READY only once [`FakeDiscord::release_ready`] is called (a
    /// slow Discord). Heartbeats are still answered meanwhile.
    pub fn withhold_ready(&self) {
        self.inner.ready_gate.send_replace(true);
    }

    /// Send the READY withheld since [`FakeDiscord::withhold_ready`], and answer IDENTIFY at once again.
    pub fn release_ready(&self) {
        self.inner.ready_gate.send_replace(false);
    }

    /// How many gateway websockets are open now.
    pub fn open_sockets(&self) -> u64 {
        self.inner.sockets.load(Ordering::SeqCst)
    }

    /// Close every ready gateway session with close `code` (4014: disallowed intents, a close
    /// serenity does not reconnect after). Returns how many sessions were told.
    pub fn close_sessions(&self, code: u16) -> usize {
        let mut recorded = self.inner.recorded();
        let told = recorded
            .sessions
            .iter()
            .filter(|s| s.send(json!({ CLOSE: code })).is_ok())
            .count();
        recorded.sessions.clear();
        told
    }

    /// Every IDENTIFY payload (`d`) received on the gateway.
    pub fn identifies(&self) -> Vec<Value> {
        self.inner.recorded().identifies.clone()
    }

    /// A message as it is now (after edits), if the bot posted it.
    pub fn message(&self, id: &str) -> Option<Value> {
        self.inner.recorded().messages.get(id).cloned()
    }

    /// The bot's messages in `channel` as they are now (after edits), oldest first.
    pub fn messages_in(&self, channel: &str) -> Vec<Value> {
        let mut found: Vec<Value> = self
            .inner
            .recorded()
            .messages
            .values()
            .filter(|m| m["channel_id"] == channel)
            .cloned()
            .collect();
        found.sort_by_key(|m| m["id"].as_str().unwrap_or_default().to_string());
        found
    }

    /// Wait until the bot has a message in `channel` whose content is `text` (posted, or edited to
    /// it); `false` after `timeout`.
    pub async fn wait_for_message(&self, channel: &str, text: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self
                .messages_in(channel)
                .iter()
                .any(|m| m["content"] == text)
            {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Wait for a call with `method` whose path matches `pattern` (`*` stands for one segment) and
    /// for which `predicate` holds; `None` after `timeout`.
    pub async fn wait_for_call(
        &self,
        method: &str,
        pattern: &str,
        predicate: impl Fn(&Call) -> bool,
        timeout: Duration,
    ) -> Option<Call> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .calls()
                .into_iter()
                .find(|c| c.method == method && path_matches(pattern, &c.path) && predicate(c));
            if found.is_some() {
                return found;
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Calls with `method` whose path matches `pattern`.
    pub fn calls_matching(&self, method: &str, pattern: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method && path_matches(pattern, &c.path))
            .collect()
    }
}

/// `*` matches one path segment.
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = pattern.trim_matches('/').split('/').collect();
    let path: Vec<&str> = path.trim_matches('/').split('/').collect();
    pattern.len() == path.len() && pattern.iter().zip(&path).all(|(p, s)| *p == "*" || p == s)
}

async fn rest(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bot {}", inner.token));
    let (status, answer) = answer(&inner, &method, &path, authorized, &body);
    inner.recorded().calls.push(Call {
        method: method.to_string(),
        path,
        authorized,
        body,
        status: status.as_u16(),
    });
    if status == StatusCode::NO_CONTENT {
        return status.into_response();
    }
    (status, axum::Json(answer)).into_response()
}

fn answer(
    inner: &Inner,
    method: &Method,
    path: &str,
    authorized: bool,
    body: &Value,
) -> (StatusCode, Value) {
    let Some(route) = path.strip_prefix("/api/v10/") else {
        return error(StatusCode::NOT_FOUND, 0, "404: Not Found");
    };
    let parts: Vec<&str> = route.split('/').collect();
    let token_routed = matches!(parts.first(), Some(&"interactions") | Some(&"webhooks"));
    if !token_routed && !authorized {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    let gateway_url = format!("ws://{}/gateway-ws", inner.addr);
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["users", "@me"]) => (StatusCode::OK, inner.bot_json()),
        ("GET", ["gateway"]) => (StatusCode::OK, json!({"url": gateway_url})),
        ("GET", ["gateway", "bot"]) => (
            StatusCode::OK,
            json!({"url": gateway_url, "shards": 1, "session_start_limit":
                {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}),
        ),
        ("PUT", ["applications", app, "commands"]) => {
            if *app != inner.application_id {
                return error(StatusCode::NOT_FOUND, 10002, "Unknown Application");
            }
            let Some(commands) = body.as_array() else {
                return error(StatusCode::BAD_REQUEST, 50035, "Invalid Form Body");
            };
            let registered: Vec<Value> = commands
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    c["id"] = json!(inner.new_id());
                    c["application_id"] = json!(inner.application_id);
                    c["version"] = json!(inner.new_id());
                    c["default_member_permissions"] = Value::Null;
                    c
                })
                .collect();
            (StatusCode::OK, Value::Array(registered))
        }
        ("POST", ["channels", channel, "messages"]) => {
            let mut recorded = inner.recorded();
            if !recorded.channels.contains_key(*channel) {
                return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
            }
            let message = new_message_in(inner, &mut recorded, channel, body);
            (StatusCode::OK, message)
        }
        ("PATCH", ["channels", channel, "messages", id]) => {
            let mut recorded = inner.recorded();
            match recorded.messages.get_mut(*id) {
                Some(message) if message["channel_id"] == json!(channel) => {
                    apply_edit(message, body);
                    (StatusCode::OK, message.clone())
                }
                _ => error(StatusCode::NOT_FOUND, 10008, "Unknown Message"),
            }
        }
        ("POST", ["channels", channel, "messages", id, "threads"]) => {
            let mut recorded = inner.recorded();
            match recorded.channels.get(*channel) {
                None => return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel"),
                Some(found) if found.is_thread() || found.kind == GUILD_FORUM => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        50024,
                        "Cannot execute action on this channel type",
                    );
                }
                Some(_) => {}
            }
            if !recorded.threads.insert(id.to_string()) {
                return error(
                    StatusCode::BAD_REQUEST,
                    160_004,
                    "A thread has already been created for this message",
                );
            }
            recorded.channels.insert(
                id.to_string(),
                Channel {
                    kind: PUBLIC_THREAD,
                    parent: Some(channel.to_string()),
                    name: body["name"].as_str().unwrap_or_default().to_string(),
                },
            );
            (
                StatusCode::CREATED,
                json!({
                    "id": id, "type": 11, "guild_id": GUILD_ID, "parent_id": channel,
                    "name": body["name"], "owner_id": inner.bot_user_id, "flags": 0,
                    "last_message_id": null, "rate_limit_per_user": 0,
                    "message_count": 0, "member_count": 1,
                    "thread_metadata": {"archived": false, "auto_archive_duration":
                        body["auto_archive_duration"].as_u64().unwrap_or(1440),
                        "archive_timestamp": TIMESTAMP, "locked": false},
                }),
            )
        }
        ("POST", ["interactions", id, token, "callback"]) => {
            let mut recorded = inner.recorded();
            match recorded.interactions.get(*id) {
                Some(sent) if sent.token == *token => {
                    if sent.initial.is_some() {
                        return error(
                            StatusCode::BAD_REQUEST,
                            40060,
                            "Interaction has already been acknowledged.",
                        );
                    }
                    let after_dispatch = sent.at.elapsed();
                    recorded.callbacks.push(Callback {
                        interaction_id: id.to_string(),
                        body: body.clone(),
                        after_dispatch,
                    });
                    receive_initial(inner, &mut recorded, id, body);
                    (StatusCode::NO_CONTENT, Value::Null)
                }
                _ => error(StatusCode::NOT_FOUND, 10062, "Unknown interaction"),
            }
        }
        ("POST", ["webhooks", app, token]) | ("PATCH", ["webhooks", app, token, "messages", _]) => {
            let mut recorded = inner.recorded();
            // Discord creates an interaction's webhook when it receives the initial response.
            let sent = recorded
                .interactions
                .values()
                .find(|s| s.token == *token && s.initial.is_some())
                .cloned();
            let Some(sent) = sent.filter(|_| *app == inner.application_id) else {
                return error(StatusCode::NOT_FOUND, 10015, "Unknown Webhook");
            };
            if *method == Method::POST {
                let mut message = new_message_in(inner, &mut recorded, &sent.channel, body);
                message["webhook_id"] = json!(inner.application_id);
                let id = message["id"].as_str().unwrap_or_default().to_string();
                recorded.messages.insert(id, message.clone());
                return (StatusCode::OK, message);
            }
            let target = match parts.last() {
                Some(&"@original") => sent.original.clone(),
                Some(id) => Some(id.to_string()),
                None => None,
            };
            match target.and_then(|id| recorded.messages.get_mut(&id)) {
                Some(message) => {
                    apply_edit(message, body);
                    (StatusCode::OK, message.clone())
                }
                None => error(StatusCode::NOT_FOUND, 10008, "Unknown Message"),
            }
        }
        ("GET", ["channels", channel]) => match inner.recorded().channels.get(*channel) {
            Some(found) => (StatusCode::OK, channel_json(inner, channel, found)),
            None => error(StatusCode::NOT_FOUND, 10003, "Unknown Channel"),
        },
        _ => error(StatusCode::NOT_FOUND, 0, "404: Not Found"),
    }
}

/// A channel object as `GET /channels/{id}` answers it.
fn channel_json(inner: &Inner, id: &str, channel: &Channel) -> Value {
    let mut answer = json!({"id": id, "type": channel.kind, "name": channel.name, "flags": 0});
    if channel.kind != DM {
        answer["guild_id"] = json!(GUILD_ID);
    }
    if let Some(parent) = &channel.parent {
        answer["parent_id"] = json!(parent);
        answer["owner_id"] = json!(inner.bot_user_id);
        answer["thread_metadata"] = json!({"archived": false, "auto_archive_duration": 1440,
            "archive_timestamp": TIMESTAMP, "locked": false});
    }
    answer
}

/// A message the bot posts in `channel`, recorded (callers hold the lock).
fn new_message_in(inner: &Inner, recorded: &mut Recorded, channel: &str, body: &Value) -> Value {
    let id = inner.new_id();
    let mut message = json!({
        "id": id, "channel_id": channel, "author": inner.bot_json(), "content": "",
        "timestamp": TIMESTAMP, "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [],
        "embeds": [], "pinned": false, "type": 0, "flags": 0, "components": [],
    });
    if body.get("message_reference").is_some() {
        message["type"] = json!(19);
        message["message_reference"] = body["message_reference"].clone();
    }
    apply_edit(&mut message, body);
    recorded.messages.insert(id, message.clone());
    message
}

fn apply_edit(message: &mut Value, body: &Value) {
    for field in ["content", "embeds", "components", "flags"] {
        if let Some(value) = body.get(field) {
            message[field] = value.clone();
        }
    }
}

async fn gateway(State(inner): State<Arc<Inner>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| async move {
        inner.sockets.fetch_add(1, Ordering::SeqCst);
        let counted = Counted(inner.clone());
        session(inner, socket).await;
        drop(counted);
    })
}

/// Counts a gateway websocket open until dropped (also when its task is aborted).
struct Counted(Arc<Inner>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.sockets.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Wait while READY is withheld, answering heartbeats; `false` when the client went away.
async fn ready_released(inner: &Inner, socket: &mut WebSocket) -> bool {
    let mut gate = inner.ready_gate.subscribe();
    loop {
        if !*gate.borrow_and_update() {
            return true;
        }
        tokio::select! {
            changed = gate.changed() => if changed.is_err() { return true },
            message = socket.recv() => match message {
                Some(Ok(WsMessage::Text(text))) => {
                    let heartbeat = serde_json::from_str::<Value>(text.as_str())
                        .is_ok_and(|frame| frame["op"] == 1);
                    if heartbeat && !send(socket, &json!({"op": 11})).await {
                        return false;
                    }
                }
                Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => return false,
                Some(Ok(_)) => {}
            },
        }
    }
}

async fn send(socket: &mut WebSocket, frame: &Value) -> bool {
    socket
        .send(WsMessage::Text(frame.to_string().into()))
        .await
        .is_ok()
}

/// One gateway connection: HELLO, then IDENTIFY/RESUME, heartbeats, and dispatches from the tests.
async fn session(inner: Arc<Inner>, mut socket: WebSocket) {
    if !send(
        &mut socket,
        &json!({"op": 10, "d": {"heartbeat_interval": HEARTBEAT_MS}}),
    )
    .await
    {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let mut tx = Some(tx);
    loop {
        tokio::select! {
            frame = rx.recv() => {
                let Some(frame) = frame else { return };
                if let Some(code) = frame[CLOSE].as_u64() {
                    let _ = socket.send(WsMessage::Close(Some(axum::extract::ws::CloseFrame {
                        code: u16::try_from(code).unwrap_or(4000),
                        reason: "Closed by the fake Discord.".into(),
                    }))).await;
                    return;
                }
                if !send(&mut socket, &frame).await { return; }
            }
            message = socket.recv() => {
                let Some(Ok(message)) = message else { return };
                let WsMessage::Text(text) = message else { continue };
                let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                match frame["op"].as_u64() {
                    Some(1) => {
                        let acked = send(&mut socket, &json!({"op": 11})).await;
                        if !acked { return; }
                    }
                    Some(2) => {
                        let token = frame["d"]["token"].as_str().unwrap_or_default();
                        let token = token.strip_prefix("Bot ").unwrap_or(token);
                        inner.recorded().identifies.push(frame["d"].clone());
                        if token != inner.token {
                            let _ = socket.send(WsMessage::Close(Some(axum::extract::ws::CloseFrame {
                                code: 4004,
                                reason: "Authentication failed.".into(),
                            }))).await;
                            return;
                        }
                        if !ready_released(&inner, &mut socket).await { return; }
                        let ready = json!({
                            "op": 0, "t": "READY", "s": 1,
                            "d": {
                                "v": 10,
                                "user": inner.bot_json(),
                                "guilds": [{"id": GUILD_ID, "unavailable": true}],
                                "session_id": format!("session-{}", inner.new_id()),
                                "resume_gateway_url": format!("ws://{}/gateway-ws", inner.addr),
                                "shard": [0, 1],
                                "application": {"id": inner.application_id, "flags": 0},
                            }
                        });
                        if !send(&mut socket, &ready).await { return; }
                        if let Some(tx) = tx.take() {
                            inner.recorded().sessions.push(tx);
                        }
                    }
                    Some(6) => {
                        let resumed = json!({"op": 0, "t": "RESUMED", "s": 1, "d": {}});
                        if !send(&mut socket, &resumed).await { return; }
                        if let Some(tx) = tx.take() {
                            inner.recorded().sessions.push(tx);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
