//! The built-in web chat: a chat page, a small JSON API and a server-sent event stream per
//! conversation, served on the gateway's own HTTP server. It is the default channel: it needs no
//! platform token.
//!
//! Pages (from [`crate::Adapter::pages`], put behind the access token by the gateway with its own;
//! see [`crate::pages`]):
//! - `GET /` — the page (HTML, CSS and JS in one response, no external fetches);
//! - `POST /api/conversations` — `201 {"id"}`; an optional `{"text"}` is sent as the first message;
//! - `GET /api/conversations?ids=a,b,c` — `{"conversations": [{"id", "title", "last", "last_author",
//!   "at", "messages"}]}`, newest first: the list of the conversations one browser keeps (the page
//!   keeps their ids in `localStorage`); unknown ids are left out, more than
//!   [`transcript::MAX_LISTED`] is a `400`;
//! - `POST /api/conversations/{id}/messages` `{"text"}` — `202`; `/word rest` is a command (shown in
//!   the conversation as typed, then answered with a notice), anything else a mention continuing the
//!   conversation;
//! - `GET /api/conversations/{id}/events` — SSE: first `reset`, then the conversation's transcript
//!   (`message`, `card`, `notice`, `progress`), then live `message` / `edit` / `card` / `card_update` /
//!   `notice` / `progress`; a keep-alive comment every 15 s;
//! - `POST /api/approvals/{approval}` `{"option"}` — `202`, a button click on an approval card:
//!   `option` is the chosen option's 0-based index (`0` for the first button) or its label, matched
//!   without regard to case (`"approve"`); anything else is a `400` listing the options;
//! - `GET /api/banner` — `{"banner"}`: the gateway's standing notice
//!   ([`crate::Adapter::set_banner`], e.g. a missing LLM key, with how to fix it) or `null`; the page
//!   shows it above the conversation.
//!
//! What reaches the listener at all is decided before routing by [`exposure`]: a foreign `Host` is
//! answered 421, and with an access token every path under `/admin` and `/api` needs it first.
//!
//! One concern per file, each depending only on the ones listed after it: `adapter` (the
//! [`WebChat`] adapter: outbound calls and the page list), `page` (the chat page), `api` (the JSON
//! handlers), `choice` (the option a decision names), `events` (the SSE stream and its
//! subscription), `state` (what the handlers and the adapter share, behind one lock), [`transcript`]
//! (SQLite).
//!
//! Invariants:
//! - conversations live in the transcript ([`transcript`], SQLite in the engine's database file):
//!   messages, cards, notices and the trace outlive a restart, and an approval card posted before it
//!   can still be decided after it;
//! - memory is per subscriber, not per conversation: a conversation takes memory only while an event
//!   stream is open on it (a small broadcast channel, [`SUBSCRIBER_BUFFER`]), and none once the last
//!   stream closes;
//! - each conversation is its own user ([`crate::User::id`] is the conversation id), so rate limits
//!   apply per conversation;
//! - handlers never wait for the gateway: the inbox is offered the event with `try_send`, a full inbox
//!   is answered `503` with `Retry-After`;
//! - a user message is recorded and handed to the inbox under the same lock the gateway's `post` takes,
//!   and a subscription is opened under the lock that reads its replay, so every subscriber sees a
//!   question before its answer, and nothing twice;
//! - message text is never logged.

mod adapter;
mod api;
mod choice;
mod events;
pub mod exposure;
mod page;
mod state;
pub mod transcript;

use std::path::PathBuf;

pub use adapter::WebChat;
pub use transcript::{MAX_MESSAGES, MAX_PROGRESS};

/// Largest request body accepted, in bytes.
pub const MAX_BODY: usize = 32 * 1024;
/// Live events buffered per conversation with open streams; a subscriber that falls further behind is
/// disconnected, and its `EventSource` reconnects and gets a full replay. Small, because streamed
/// answers arrive as edits at most every [`crate::Adapter::edit_interval`], and the buffer is
/// allocated whole when the first stream opens.
pub const SUBSCRIBER_BUFFER: usize = 64;

/// The web chat's configuration.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// The page's title.
    pub title: String,
    /// Where the transcript is kept.
    pub database: WebDatabase,
}

/// Where the web chat keeps its transcript.
#[derive(Clone, Debug)]
pub enum WebDatabase {
    /// In memory: it ends with the process (tests).
    Memory,
    /// The SQLite database file (the engine's).
    Sqlite(PathBuf),
    /// The org's PostgreSQL database (`storage: postgres`), over a connection of its own.
    Postgres(opc_pg::Blocking),
}
