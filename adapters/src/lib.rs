//! # opc-adapters — chat platforms behind one trait
//!
//! Role: normalise Slack, Discord and the built-in web chat into one stream of [`Inbound`] events
//! (mention, thread message, button action, slash command) and one set of outbound operations
//! ([`Adapter`]: post, edit, approval card, ephemeral reply). One module per platform; a new platform
//! is a new module implementing [`Adapter`] and sending [`Inbound`]s into the gateway's [`Inbox`].
//!
//! Invariants:
//! - of the OPC crates, this one depends only on two leaves that know nothing of agents: `opc-retry`
//!   (the one backoff policy, for Socket Mode reconnects) and `opc-migrate` (the web transcript's
//!   schema, in the engine's database file). It knows platforms, not agents, and the gateway (in
//!   `bot/`) decides what an event means for a conversation;
//! - inbound HTTP requests are verified (Slack signatures, Discord Ed25519, the access token on every
//!   [`Page`]) before anything in them is parsed;
//! - every inbound event is acknowledged to its platform before it is handed on, and handing on never
//!   waits for agent work (the inbox is a queue, drained by the gateway);
//! - a platform's redelivery of an event (Slack retries, gateway replays) reaches the inbox once
//!   ([`Dedup`]);
//! - tokens are read by the caller from env vars and passed in; adapters never log them, nor message
//!   text (it may hold personal data).

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod dedup;
pub mod discord;
pub mod markdown;
pub mod pages;
pub mod session;
pub mod slack;
pub mod stream;
mod text;
pub mod web;

pub use dedup::Dedup;
pub use pages::Page;
pub use stream::StreamingReply;

/// The chat platforms OPC speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Slack (Socket Mode or the HTTP Events API).
    Slack,
    /// Discord (gateway websocket, optional HTTP interactions).
    Discord,
    /// The built-in web chat.
    Web,
}

impl Platform {
    /// The lowercase name used in config (`slack:U123` approvers) and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Slack => "slack",
            Platform::Discord => "discord",
            Platform::Web => "web",
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A thread on a platform: where a conversation's messages go. Serialisable, because the gateway
/// stores it so that a conversation can be answered (and its approval cards posted) after a restart.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Place {
    /// The platform.
    pub platform: Platform,
    /// Slack team id, Discord guild id (`@me` for direct messages), `web` for the web chat.
    pub workspace: String,
    /// The channel the thread belongs to (Slack channel id, Discord parent channel id, web: the
    /// conversation id).
    pub channel: String,
    /// The thread's key, unique within the workspace: Slack `thread_ts` (the root message's `ts`), the
    /// Discord thread's channel id (equal to the id of the message it was started from; the DM channel
    /// id in direct messages), the web chat's conversation id. A `thread` equal to `channel` (or
    /// empty) means the channel itself: posts go to its top level.
    pub thread: String,
}

/// Who sent an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The platform's user id (`U012AB3CD`, a Discord snowflake; on the web chat the conversation id,
    /// so that rate limits apply per conversation).
    pub id: String,
    /// Display name, for cards ("decided by …").
    pub name: String,
    /// Role ids the user holds where the platform has roles (Discord guild members); empty elsewhere.
    pub roles: Vec<String>,
}

/// A message the bot posted, so it can be edited later. Serialisable (stored with approval cards).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Posted {
    /// The platform.
    pub platform: Platform,
    /// The channel the message is in (Slack channel, Discord channel or thread id, web conversation).
    pub channel: String,
    /// The message id (Slack `ts`, Discord snowflake, web message number).
    pub id: String,
}

/// How to answer one event to the person who caused it (an ephemeral reply where the platform has
/// them). Opaque to the gateway: each adapter puts in what it needs (Slack channel + user, Discord
/// interaction token, web conversation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplyHandle(pub serde_json::Value);

/// One event from a platform, normalised.
#[derive(Clone, Debug, PartialEq)]
pub struct Inbound {
    /// Where it happened. For a message this is the thread a new conversation would live in.
    pub place: Place,
    /// Who did it.
    pub user: User,
    /// How to answer this event to `user` alone.
    pub reply: ReplyHandle,
    /// What happened.
    pub kind: InboundKind,
    /// The platform's id of this delivery (`slack:event:<event_id>`, `slack:interactive:<trigger_id>/…`,
    /// `discord:m<message id>`, `discord:i<interaction id>`), the one [`Dedup`] checks in process:
    /// several nodes of a cluster check it once more across the cluster, so an event delivered to two
    /// of them is handled by one. `None` where a delivery cannot repeat (the web chat).
    pub delivery: Option<String>,
    /// The W3C trace context (`traceparent`) the platform's request carried: the web chat's HTTP
    /// header, so a request traced by the caller joins that trace. `None` for Slack and Discord
    /// (their events carry none). Kept as the raw header: the gateway checks it.
    pub traceparent: Option<String>,
}

/// The kinds of inbound event.
#[derive(Clone, Debug, PartialEq)]
pub enum InboundKind {
    /// The bot was mentioned. Continues the conversation of thread `continues` if it has one; otherwise
    /// starts a new conversation in `Inbound::place`.
    Mention {
        /// The text, with the bot's own mention removed.
        text: String,
        /// The thread this message was written in, if any (Slack `thread_ts`, the Discord channel id).
        continues: Option<String>,
    },
    /// A message that does not mention the bot, written in thread `continues`: a follow-up if that
    /// thread has a conversation, ignored otherwise. The bot's own messages never arrive.
    Message {
        /// The text.
        text: String,
        /// The thread it was written in.
        continues: String,
    },
    /// A button on an approval card was clicked.
    Action {
        /// What the button means.
        action: Action,
        /// The card the button was on (to update it).
        card: Posted,
    },
    /// A slash command.
    Command(Command),
}

/// A button's meaning. Buttons carry it in their platform id, written by [`Action::encode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Choose option number `option` (0-based, in the card's order) of approval `approval`.
    Decide {
        /// The approval id.
        approval: i64,
        /// Index into the card's options.
        option: usize,
    },
}

impl Action {
    const PREFIX: &'static str = "opc:decide:";

    /// The id to put on a button (Slack `action_id`, Discord `custom_id`; at most 40 bytes).
    pub fn encode(&self) -> String {
        match self {
            Action::Decide { approval, option } => format!("{}{approval}:{option}", Self::PREFIX),
        }
    }

    /// Read a button id written by [`Action::encode`]; `None` for anything else.
    pub fn decode(id: &str) -> Option<Action> {
        let rest = id.strip_prefix(Self::PREFIX)?;
        let (approval, option) = rest.split_once(':')?;
        Some(Action::Decide {
            approval: approval.parse().ok()?,
            option: option.parse().ok()?,
        })
    }
}

/// The slash commands (`/opc status` on Slack, `/status` on Discord and the web chat).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Active tasks with their delegation path, state and elapsed time.
    Status,
    /// The org tree.
    Agents,
    /// Recent conversations with their cost.
    Tasks,
    /// Cancel a task tree (approvers only).
    Cancel(String),
    /// What the commands do.
    Help,
    /// Anything else: answered with the help text and what was not understood.
    Unknown(String),
}

impl Command {
    /// Parse a command from its name and argument text, as every platform delivers them. The name may
    /// carry a leading `/`. `opc` as the name takes the subcommand from the first word (Slack apps
    /// usually register one `/opc` command).
    pub fn parse(name: &str, args: &str) -> Command {
        let name = name.trim().trim_start_matches('/');
        let args = args.trim();
        if name == "opc" {
            let (sub, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
            return if sub.is_empty() {
                Command::Help
            } else {
                Command::parse(sub, rest)
            };
        }
        match name {
            "status" => Command::Status,
            "agents" => Command::Agents,
            "tasks" => Command::Tasks,
            "help" => Command::Help,
            "cancel" => Command::Cancel(args.to_string()),
            other => Command::Unknown(format!("/{other} {args}").trim_end().to_string()),
        }
    }

    /// The commands, for registration on platforms that need it (Discord) and for `/help`.
    pub const ALL: &'static [(&'static str, &'static str)] = &[
        (
            "status",
            "Active tasks: delegation path, state, elapsed time",
        ),
        ("agents", "The org tree"),
        ("tasks", "Recent conversations and their cost"),
        (
            "cancel",
            "Cancel a task tree: /cancel <task id> (approvers only)",
        ),
        ("help", "What the commands do"),
    ];
}

/// An approval card: a request from an agent, with a button per option.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// The approval id.
    pub approval: i64,
    /// The agent asking.
    pub agent: String,
    /// Its role ("VP Operations").
    pub role: String,
    /// Its delegation path from the root, root first.
    pub path: Vec<String>,
    /// What is to be decided (markdown).
    pub summary: String,
    /// The options, in button order.
    pub options: Vec<String>,
    /// The index of the go-ahead option in [`Card::options`] (the first, when several approve): its
    /// button is the primary one. An option's label need not say it approves, and the go-ahead need
    /// not come first (`["Not now", "Approve"]`), so the gateway says which it is, from the
    /// outcomes the approval recorded. `None` when not known (cards recorded before it existed):
    /// then no button is primary.
    #[serde(default)]
    pub go_ahead: Option<usize>,
    /// Pending, or how it was decided.
    pub state: CardState,
}

/// Whether a card can still be clicked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CardState {
    /// Waiting for an approver: buttons shown.
    Pending,
    /// Decided: buttons removed, the decision shown ("Approved: Yes, ship it — decided by ana").
    Decided {
        /// The option chosen (its label), or why the system rejected it ("no decision in time").
        option: String,
        /// Who decided: a display name, or `OPC` when the system did.
        by: String,
        /// When, RFC 3339 UTC.
        at: String,
        /// Whether the option chosen approves: an option's label need not say it ("Yes, ship it").
        /// Absent from cards recorded before it existed (then `false`; a redraw sets it).
        #[serde(default)]
        approved: bool,
    },
}

impl CardState {
    /// `Approved` or `Rejected`, for a decided card.
    pub fn verdict(&self) -> Option<&'static str> {
        match self {
            CardState::Pending => None,
            CardState::Decided { approved: true, .. } => Some("Approved"),
            CardState::Decided {
                approved: false, ..
            } => Some("Rejected"),
        }
    }
}

impl Card {
    /// The button id for option `index`.
    pub fn button_id(&self, index: usize) -> String {
        Action::Decide {
            approval: self.approval,
            option: index,
        }
        .encode()
    }

    /// Whether option `index`'s button is the primary one: the go-ahead's.
    pub fn is_primary(&self, index: usize) -> bool {
        self.go_ahead == Some(index)
    }

    /// The request as markdown: who asks ([`Card::agent`], the requesting agent, with its role and
    /// delegation path), then what is to be decided. Every platform's card leads with it.
    pub fn request_markdown(&self) -> String {
        format!(
            "**Approval needed**, requested by **{}** ({}) — {}\n\n{}",
            self.agent,
            self.role,
            self.path.join(" › "),
            self.summary
        )
    }

    /// The card as plain markdown (fallback text, notifications, the web chat's accessible text).
    pub fn to_markdown(&self) -> String {
        let mut text = self.request_markdown();
        match &self.state {
            CardState::Pending => {
                text.push_str("\n\nOptions: ");
                text.push_str(&self.options.join(" / "));
            }
            CardState::Decided {
                option,
                by,
                at,
                approved,
            } => {
                let verdict = if *approved { "Approved" } else { "Rejected" };
                text.push_str(&format!(
                    "\n\n**{verdict}: {option}** — decided by {by} at {at}"
                ));
            }
        }
        text
    }
}

/// Whether a reply is for the one user only (Slack ephemeral, Discord ephemeral interaction response)
/// or for the channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    /// Only the user who caused the event sees it, where the platform allows that.
    Ephemeral,
    /// Everyone in the channel or thread sees it.
    Public,
}

/// Where adapters deliver inbound events; the gateway drains it. Bounded so that a flood is
/// back-pressured at the platform edge instead of growing memory.
pub type Inbox = tokio::sync::mpsc::Sender<Inbound>;

/// Why a platform call failed. The kind of failure is kept in typed fields (HTTP status, the
/// platform's error code, the server's retry-after), filled where the Slack and Discord clients see
/// them, so that callers decide on those ([`AdapterError::is_retryable`],
/// [`AdapterError::retry_after`]) and never on the message text.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The platform answered, with an error.
    #[error("{platform} refused `{method}`: {}", refusal(*.status, *.code, .error))]
    Api {
        /// Which platform.
        platform: Platform,
        /// The API method or route.
        method: String,
        /// The platform's error as it names it: Slack's error code (`channel_not_found`,
        /// `ratelimited`), Discord's message (`Unknown Message`). Never the request's content.
        error: String,
        /// The HTTP status, when the refusal came with one (Slack answers most refusals with 200).
        status: Option<u16>,
        /// Discord's numeric JSON error code (`10008`, `160004`); Slack's codes are `error`.
        code: Option<i64>,
        /// How long the platform asked us to wait before trying again (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// The platform could not be reached, or the exchange broke off.
    #[error("{platform} unreachable during `{method}`: {error}")]
    Transport {
        /// Which platform.
        platform: Platform,
        /// The API method or route.
        method: String,
        /// What failed.
        error: String,
    },
    /// The adapter was given something it cannot use (a bad token, an unknown reply handle …).
    #[error("{0}")]
    Invalid(String),
}

/// Slack's error codes that name a passing condition (answered with HTTP 200, so without a status).
const SLACK_PASSING_CODES: &[&str] = &[
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];

/// An `Api` error's text: `HTTP 404, code 10008: Unknown Message`, `ratelimited`.
fn refusal(status: Option<u16>, code: Option<i64>, error: &str) -> String {
    match (status, code) {
        (Some(status), Some(code)) => format!("HTTP {status}, code {code}: {error}"),
        (Some(status), None) => format!("HTTP {status}: {error}"),
        (None, Some(code)) => format!("code {code}: {error}"),
        (None, None) => error.to_string(),
    }
}

impl AdapterError {
    /// A refusal with nothing known but the platform's error (no status, code or retry-after).
    pub fn api(platform: Platform, method: impl Into<String>, error: impl Into<String>) -> Self {
        AdapterError::Api {
            platform,
            method: method.into(),
            error: error.into(),
            status: None,
            code: None,
            retry_after: None,
        }
    }

    /// This refusal with its HTTP status (no-op on other kinds).
    pub fn with_status(mut self, status: u16) -> Self {
        if let AdapterError::Api { status: s, .. } = &mut self {
            *s = Some(status);
        }
        self
    }

    /// This refusal with the platform's numeric error code (no-op on other kinds).
    pub fn with_code(mut self, code: i64) -> Self {
        if let AdapterError::Api { code: c, .. } = &mut self {
            *c = Some(code);
        }
        self
    }

    /// This refusal with the wait the platform asked for (no-op on other kinds).
    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        if let AdapterError::Api { retry_after: r, .. } = &mut self {
            *r = retry_after;
        }
        self
    }

    /// Whether the same call may succeed if made again soon: the platform was unreachable, rate-limited
    /// the call (HTTP 429, a retry-after, Slack's `ratelimited`), or failed on its side (HTTP 5xx,
    /// Slack's `internal_error` …). A refusal (4xx, a missing permission, an unknown channel) and an
    /// invalid input are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            AdapterError::Transport { .. } => true,
            AdapterError::Invalid(_) => false,
            AdapterError::Api {
                platform,
                error,
                status,
                retry_after,
                ..
            } => {
                retry_after.is_some()
                    || status.is_some_and(|s| s == 429 || (500..600).contains(&s))
                    || (*platform == Platform::Slack
                        && SLACK_PASSING_CODES.contains(&error.as_str()))
            }
        }
    }

    /// How long the platform asked us to wait before trying again, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AdapterError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status of a refusal, when it came with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            AdapterError::Api { status, .. } => *status,
            _ => None,
        }
    }

    /// Discord's numeric error code of a refusal, when it came with one.
    pub fn code(&self) -> Option<i64> {
        match self {
            AdapterError::Api { code, .. } => *code,
            _ => None,
        }
    }
}

impl opc_retry::Retryable for AdapterError {
    fn is_retryable(&self) -> bool {
        AdapterError::is_retryable(self)
    }

    fn retry_after(&self) -> Option<Duration> {
        AdapterError::retry_after(self)
    }
}

/// One chat platform, outbound. Inbound events are sent to the [`Inbox`] given to the adapter's
/// constructor; HTTP endpoints (Slack Events API, Discord interactions, the web chat) are mounted by the
/// gateway from [`Adapter::routes`].
#[async_trait::async_trait]
pub trait Adapter: Send + Sync + 'static {
    /// Which platform this is.
    fn platform(&self) -> Platform;

    /// Longest message the platform accepts, in characters; longer replies are split.
    fn max_message_len(&self) -> usize;

    /// Least time between two edits of one streaming message (the platform's rate limits).
    fn edit_interval(&self) -> Duration;

    /// Markdown as agents write it → the platform's own format.
    fn render(&self, markdown: &str) -> String;

    /// Post `text` (already rendered) in a thread.
    async fn post(&self, place: &Place, text: &str) -> Result<Posted, AdapterError>;

    /// Replace the text of a message this adapter posted.
    async fn edit(&self, message: &Posted, text: &str) -> Result<(), AdapterError>;

    /// Post an approval card (buttons for a pending card) in a thread or channel.
    async fn post_card(&self, place: &Place, card: &Card) -> Result<Posted, AdapterError>;

    /// Redraw a card, e.g. decided: no buttons, who decided and when.
    async fn update_card(&self, message: &Posted, card: &Card) -> Result<(), AdapterError>;

    /// Answer the user behind an event (`reply` from its [`Inbound`]).
    async fn respond(
        &self,
        reply: &ReplyHandle,
        text: &str,
        visibility: Visibility,
    ) -> Result<(), AdapterError>;

    /// Live progress of a conversation (engine events as JSON: delegation, tool calls …) for platforms
    /// that show a trace. Chat platforms ignore it.
    async fn progress(&self, _place: &Place, _event: &serde_json::Value) {}

    /// Pages this adapter serves to people on the gateway's server (none by default). The gateway puts
    /// them behind its access token ([`pages::protect`]), together with its own.
    fn pages(&self) -> Vec<Page> {
        Vec::new()
    }

    /// Webhook endpoints this adapter serves on the gateway's server, each verifying its platform's
    /// signature itself (none by default). They are not behind the access token (the platform does not
    /// have it), so anything else belongs in [`Adapter::pages`].
    fn routes(&self) -> axum::Router {
        axum::Router::new()
    }

    /// A standing notice about the gateway itself, such as "the LLM key is missing" (already rendered
    /// for this platform), or `None` once it no longer applies. The gateway sets it at start and after
    /// every reload. Platforms with a page of their own show it there (the web chat's banner); chat
    /// platforms ignore it, as they answer each message with the notice instead.
    fn set_banner(&self, _text: Option<&str>) {}

    /// Stop receiving: close websockets, stop background tasks. Outbound calls may still be made
    /// until the adapter is dropped (the gateway posts final answers while it drains).
    async fn shutdown(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(platform: Platform, error: &str, status: Option<u16>) -> AdapterError {
        let error = AdapterError::api(platform, "chat.postMessage", error);
        match status {
            Some(status) => error.with_status(status),
            None => error,
        }
    }

    #[test]
    fn rate_limits_server_errors_and_lost_connections_are_retryable() {
        let limited = api(Platform::Slack, "ratelimited", Some(429))
            .with_retry_after(Some(Duration::from_secs(3)));
        assert!(limited.is_retryable());
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(3)));
        assert!(api(Platform::Discord, "You are being rate limited.", Some(429)).is_retryable());
        assert!(api(Platform::Discord, "Internal Server Error", Some(502)).is_retryable());
        assert!(api(Platform::Slack, "internal_error", None).is_retryable());
        assert!(
            AdapterError::Transport {
                platform: Platform::Slack,
                method: "chat.update".into(),
                error: "connection failed".into(),
            }
            .is_retryable()
        );
    }

    #[test]
    fn refusals_and_invalid_input_are_not_retryable() {
        assert!(!api(Platform::Slack, "channel_not_found", None).is_retryable());
        assert!(!api(Platform::Slack, "Not Found", Some(404)).is_retryable());
        let missing_access = api(Platform::Discord, "Missing Access", Some(403)).with_code(50001);
        assert!(!missing_access.is_retryable());
        assert_eq!(missing_access.code(), Some(50001));
        assert_eq!(missing_access.status(), Some(403));
        // A Discord message that happens to read like a Slack code is still a refusal.
        assert!(!api(Platform::Discord, "ratelimited", Some(400)).is_retryable());
        assert!(!AdapterError::Invalid("bad handle".into()).is_retryable());
        assert_eq!(AdapterError::Invalid("x".into()).retry_after(), None);
    }

    #[test]
    fn the_text_keeps_status_and_code() {
        let error = api(Platform::Discord, "Unknown Message", Some(404)).with_code(10008);
        assert_eq!(
            error.to_string(),
            "discord refused `chat.postMessage`: HTTP 404, code 10008: Unknown Message"
        );
        assert_eq!(
            api(Platform::Slack, "channel_not_found", None).to_string(),
            "slack refused `chat.postMessage`: channel_not_found"
        );
    }
}
