//! The web chat's transcript: its conversations, their messages, approval cards, notices and trace, so
//! that a conversation outlives `opc run` (a SIGTERM or a kill -9) and costs no memory while nobody
//! watches it.
//!
//! Where: in SQLite, the engine's database file (`sqlite.rs`), or in PostgreSQL
//! (`framework.memory.storage: postgres`, `postgres.rs`), where several nodes share the tables. This
//! file holds what both backends share — the types, the encoding of cards and the rebuilding of a
//! replay from rows — and dispatches each operation to the backend's SQL, written once per backend.
//! The tables are this module's own (`web_*`), created and changed only by its migrations: the `web`
//! component of the database's one migration story (`opc_migrate` on SQLite, `opc_pg` on
//! PostgreSQL; its row in `schema_versions`).
//!
//! Invariants (both backends):
//! - every write is one transaction: a message and its conversation's counter change together, so a
//!   crash leaves no gap and no duplicate number;
//! - message numbers are per conversation, from 1, never reused, even when several nodes write to one
//!   conversation at once (the conversation's row is locked while its next number is taken);
//!   notices are numbered with the messages, so a replay shows them in the order they came;
//! - the trace keeps the last [`MAX_PROGRESS`] events per conversation; messages are all kept (they
//!   are the transcript), a replay sends the last [`MAX_MESSAGES`];
//! - approval cards are found by their approval id, whichever conversation holds them;
//! - a conversation's summary (for the chat's list) is read by id only, with at most [`MAX_LISTED`]
//!   ids at once and its texts cut in SQL, so a list costs a bounded read whatever the
//!   conversations hold.

mod postgres;
mod sqlite;

use std::path::Path;

use serde_json::Value;

use crate::Card;

pub use postgres::POSTGRES_COMPONENT;
pub use sqlite::{COMPONENT, MIGRATIONS};

/// Messages (user messages, answers, cards, notices) replayed to a new subscriber; the oldest go first.
pub const MAX_MESSAGES: usize = 200;
/// Trace events kept per conversation; the oldest go first.
pub const MAX_PROGRESS: usize = 500;

/// Most conversations summarised by one [`Transcript::summaries`] call (the chat's list asks for the
/// conversations one browser keeps; a longer list is refused, not cut).
pub const MAX_LISTED: usize = 100;
/// Characters of a summary's title (the conversation's first user message) and of its last message;
/// longer texts are cut and end in `…`.
pub const TITLE_CHARS: usize = 60;
/// See [`TITLE_CHARS`].
pub const LAST_CHARS: usize = 120;
/// Characters read from the database for a summary's texts: one more than shown, to know that a text
/// was cut.
const SUMMARY_CHARS: usize = LAST_CHARS + 1;

/// A database error, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// SQLite refused.
    #[error("web chat database: {doing}: {source}")]
    Sqlite {
        /// What was being done.
        doing: &'static str,
        /// Why it failed.
        #[source]
        source: rusqlite::Error,
    },
    /// The tables were written by a newer OPC, or a migration failed (the message says which and where).
    #[error("web chat database: {0}")]
    Schema(#[from] opc_migrate::MigrateError),
    /// PostgreSQL failed (the message names the server as `host:port/name`, never its URL).
    #[error("web chat database: {0}")]
    Postgres(#[from] opc_pg::PgError),
    /// PostgreSQL's tables were written by a newer OPC, or a migration failed there.
    #[error("web chat database: {0}")]
    PostgresSchema(#[from] opc_pg::PgMigrateError),
    /// An approval card could not be encoded (nothing was written).
    #[error("web chat database: encoding an approval card: {0}")]
    Encoding(#[source] serde_json::Error),
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Author {
    /// The person at the page.
    User,
    /// OPC: answers and approval cards.
    Bot,
    /// A notice to the person (a command's answer, a refusal, a rate limit).
    Notice,
}

impl Author {
    /// The name on the event stream and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Author::User => "user",
            Author::Bot => "bot",
            Author::Notice => "notice",
        }
    }

    fn parse(text: &str) -> Author {
        match text {
            "user" => Author::User,
            "notice" => Author::Notice,
            _ => Author::Bot,
        }
    }
}

/// One thing a replay shows, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// A message or a notice.
    Message {
        /// Its number in the conversation.
        number: i64,
        /// Who wrote it.
        author: Author,
        /// Its latest text.
        text: String,
    },
    /// An approval card, as last drawn.
    Card {
        /// Its number in the conversation.
        number: i64,
        /// The card.
        card: Card,
    },
    /// A trace event.
    Progress(Value),
}

/// Where a card is.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredCard {
    /// The conversation holding it.
    pub conversation: String,
    /// Its message number.
    pub number: i64,
    /// The card, as last drawn.
    pub card: Card,
}

/// One conversation as the chat's list shows it. Its texts are plain (as written, markdown and all),
/// on one line, cut to [`TITLE_CHARS`] / [`LAST_CHARS`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    /// The conversation's id.
    pub id: String,
    /// Its first user message; `None` before one was sent.
    pub title: Option<String>,
    /// Its last message (or notice, or card), `None` when it has none.
    pub last: Option<String>,
    /// Who wrote the last message (`user`, `bot`, `notice`).
    pub last_author: Option<&'static str>,
    /// When its last message was recorded (Unix ms), or when it was started.
    pub at: i64,
    /// How many messages it holds.
    pub messages: i64,
}

/// A summary as either backend reads it, its texts cut to [`SUMMARY_CHARS`] characters.
struct SummaryRow {
    id: String,
    at: i64,
    messages: i64,
    title: Option<String>,
    last: Option<String>,
    last_author: Option<String>,
}

/// A message as either backend stores it (`card` is the card's JSON).
struct MessageRow {
    number: i64,
    author: String,
    text: String,
    card: Option<String>,
}

/// What a backend reads for a replay: the last [`MAX_MESSAGES`] messages, newest first, then the
/// trace's events (JSON text), oldest first.
struct ReplayRows {
    newest_first: Vec<MessageRow>,
    trace: Vec<String>,
}

/// A message to append, encoded once for either backend.
struct NewMessage {
    author: &'static str,
    text: String,
    card: Option<String>,
    approval: Option<i64>,
}

/// Where the transcript lives.
enum Backend {
    Sqlite(rusqlite::Connection),
    Postgres(opc_pg::Blocking),
}

/// The transcript's connection.
pub struct Transcript {
    backend: Backend,
}

impl Transcript {
    /// Open the tables in the SQLite database at `path` (created if needed), or in memory for `None`
    /// (tests, and embeddings that need no restart).
    pub fn open(path: Option<&Path>) -> Result<Transcript, TranscriptError> {
        Ok(Transcript {
            backend: Backend::Sqlite(sqlite::open(path)?),
        })
    }

    /// Open the tables in the PostgreSQL database `conn` is connected to, bringing them up to date
    /// first ([`POSTGRES_COMPONENT`]); other nodes may share them.
    pub fn open_postgres(conn: opc_pg::Blocking) -> Result<Transcript, TranscriptError> {
        conn.migrate(&POSTGRES_COMPONENT)?;
        Ok(Transcript {
            backend: Backend::Postgres(conn),
        })
    }

    /// Record conversation `id` if it is new.
    pub fn create(&mut self, id: &str) -> Result<(), TranscriptError> {
        match &mut self.backend {
            Backend::Sqlite(conn) => sqlite::create(conn, id),
            Backend::Postgres(conn) => postgres::create(conn, id),
        }
    }

    /// Whether conversation `id` exists.
    pub fn exists(&self, id: &str) -> Result<bool, TranscriptError> {
        match &self.backend {
            Backend::Sqlite(conn) => sqlite::exists(conn, id),
            Backend::Postgres(conn) => postgres::exists(conn, id),
        }
    }

    /// Append a message (a card when `card` is set) to conversation `id`, creating the conversation
    /// when `create` is set; its number, or `None` for an unknown conversation not created.
    pub fn push(
        &mut self,
        id: &str,
        author: Author,
        text: &str,
        card: Option<&Card>,
        create: bool,
    ) -> Result<Option<i64>, TranscriptError> {
        let message = NewMessage {
            author: author.as_str(),
            text: text.to_string(),
            card: card.map(encode).transpose()?,
            approval: card.map(|c| c.approval),
        };
        match &mut self.backend {
            Backend::Sqlite(conn) => sqlite::push(conn, id, &message, create),
            Backend::Postgres(conn) => postgres::push(conn, id, message, create),
        }
    }

    /// Replace the text of message `number` (not a card) of conversation `id`; whether it exists.
    pub fn edit(&mut self, id: &str, number: i64, text: &str) -> Result<bool, TranscriptError> {
        match &mut self.backend {
            Backend::Sqlite(conn) => sqlite::edit(conn, id, number, text),
            Backend::Postgres(conn) => postgres::edit(conn, id, number, text),
        }
    }

    /// Redraw card `number` of conversation `id`; whether it exists.
    pub fn update_card(
        &mut self,
        id: &str,
        number: i64,
        card: &Card,
    ) -> Result<bool, TranscriptError> {
        let drawn = NewMessage {
            author: Author::Bot.as_str(),
            text: card.to_markdown(),
            card: Some(encode(card)?),
            approval: Some(card.approval),
        };
        match &mut self.backend {
            Backend::Sqlite(conn) => sqlite::update_card(conn, id, number, &drawn),
            Backend::Postgres(conn) => postgres::update_card(conn, id, number, drawn),
        }
    }

    /// Append a trace event to conversation `id`, forgetting the oldest past [`MAX_PROGRESS`];
    /// whether the conversation exists.
    pub fn progress(&mut self, id: &str, event: &Value) -> Result<bool, TranscriptError> {
        let event = event.to_string();
        match &mut self.backend {
            Backend::Sqlite(conn) => sqlite::progress(conn, id, &event),
            Backend::Postgres(conn) => postgres::progress(conn, id, event),
        }
    }

    /// The card of approval `approval`, wherever it is.
    pub fn card(&self, approval: i64) -> Result<Option<StoredCard>, TranscriptError> {
        let found = match &self.backend {
            Backend::Sqlite(conn) => sqlite::card(conn, approval)?,
            Backend::Postgres(conn) => postgres::card(conn, approval)?,
        };
        // A card this build cannot read is as good as missing: its buttons cannot be redrawn.
        Ok(found.and_then(|(conversation, number, card)| {
            serde_json::from_str(&card).ok().map(|card| StoredCard {
                conversation,
                number,
                card,
            })
        }))
    }

    /// What rebuilds conversation `id`'s page: its last [`MAX_MESSAGES`] messages, then its trace;
    /// `None` for an unknown conversation.
    pub fn replay(&self, id: &str) -> Result<Option<Vec<Entry>>, TranscriptError> {
        let rows = match &self.backend {
            Backend::Sqlite(conn) => sqlite::replay(conn, id)?,
            Backend::Postgres(conn) => postgres::replay(conn, id)?,
        };
        Ok(rows.map(entries))
    }
}

impl Transcript {
    /// The summaries of those of `ids` that exist, newest first (by last message; ties by id); ids
    /// not found are left out. At most [`MAX_LISTED`] ids: the caller bounds the list.
    pub fn summaries(&mut self, ids: &[String]) -> Result<Vec<Summary>, TranscriptError> {
        let ids = &ids[..ids.len().min(MAX_LISTED)];
        let rows = match &mut self.backend {
            Backend::Sqlite(conn) => sqlite::summaries(conn, ids)?,
            Backend::Postgres(conn) => postgres::summaries(conn, ids)?,
        };
        let mut summaries: Vec<Summary> = rows
            .into_iter()
            .map(|row| Summary {
                id: row.id,
                title: row.title.map(|t| one_line(&t, TITLE_CHARS)),
                last: row.last.map(|t| one_line(&t, LAST_CHARS)),
                last_author: row.last_author.map(|a| Author::parse(&a).as_str()),
                at: row.at,
                messages: row.messages,
            })
            .collect();
        summaries.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.id.cmp(&b.id)));
        Ok(summaries)
    }
}

/// `text` on one line (runs of whitespace become one space), cut to `chars` characters with `…`
/// when longer.
fn one_line(text: &str, chars: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    for word in text.split_whitespace() {
        for c in (!out.is_empty())
            .then_some(' ')
            .into_iter()
            .chain(word.chars())
        {
            if count == chars {
                out.push('…');
                return out;
            }
            out.push(c);
            count += 1;
        }
    }
    out
}

/// A card as stored: its JSON.
fn encode(card: &Card) -> Result<String, TranscriptError> {
    serde_json::to_string(card).map_err(TranscriptError::Encoding)
}

/// A replay's entries, oldest first, from what a backend read. Rows this build cannot decode (a
/// card or an event of another shape) are shown as plain messages or left out, never an error: the
/// rest of the conversation is still worth showing.
fn entries(rows: ReplayRows) -> Vec<Entry> {
    let mut entries: Vec<Entry> = rows
        .newest_first
        .into_iter()
        .rev()
        .map(
            |row| match row.card.and_then(|c| serde_json::from_str::<Card>(&c).ok()) {
                Some(card) => Entry::Card {
                    number: row.number,
                    card,
                },
                None => Entry::Message {
                    number: row.number,
                    author: Author::parse(&row.author),
                    text: row.text,
                },
            },
        )
        .collect();
    entries.extend(
        rows.trace
            .iter()
            .filter_map(|event| serde_json::from_str(event).ok())
            .map(Entry::Progress),
    );
    entries
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::CardState;

    fn card(approval: i64) -> Card {
        Card {
            approval,
            agent: "support".into(),
            role: "Support".into(),
            path: vec!["ceo".into(), "support".into()],
            summary: "Refund?".into(),
            options: vec!["approve".into(), "reject".into()],
            go_ahead: Some(0),
            state: CardState::Pending,
        }
    }

    #[test]
    fn a_conversation_survives_reopening_with_its_messages_cards_notices_and_trace() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opc.db");
        {
            let mut t = Transcript::open(Some(&db)).unwrap();
            t.create("c1").unwrap();
            assert_eq!(
                t.push("c1", Author::User, "hi", None, false).unwrap(),
                Some(1)
            );
            assert_eq!(
                t.push("c1", Author::Bot, "…", None, false).unwrap(),
                Some(2)
            );
            assert!(t.edit("c1", 2, "hello").unwrap());
            assert_eq!(
                t.push("c1", Author::Bot, "card", Some(&card(7)), false)
                    .unwrap(),
                Some(3)
            );
            assert_eq!(
                t.push("c1", Author::Notice, "note", None, false).unwrap(),
                Some(4)
            );
            assert!(
                t.progress("c1", &serde_json::json!({"event": "delegated"}))
                    .unwrap()
            );
            // Unknown conversations are not created by accident.
            assert_eq!(t.push("nope", Author::Bot, "x", None, false).unwrap(), None);
            assert!(!t.progress("nope", &serde_json::json!({})).unwrap());
        }
        let mut t = Transcript::open(Some(&db)).unwrap();
        let replay = t.replay("c1").unwrap().unwrap();
        assert_eq!(replay.len(), 5);
        assert_eq!(
            replay[1],
            Entry::Message {
                number: 2,
                author: Author::Bot,
                text: "hello".into()
            }
        );
        assert!(matches!(&replay[2], Entry::Card { number: 3, card } if card.approval == 7));
        assert!(matches!(
            &replay[3],
            Entry::Message {
                author: Author::Notice,
                ..
            }
        ));
        assert!(matches!(&replay[4], Entry::Progress(_)));
        let found = t.card(7).unwrap().unwrap();
        assert_eq!((found.conversation.as_str(), found.number), ("c1", 3));
        // Numbers continue after a reopen.
        assert_eq!(
            t.push("c1", Author::User, "again", None, false).unwrap(),
            Some(5)
        );
        assert!(t.replay("nope").unwrap().is_none());
    }

    #[test]
    fn summaries_show_the_first_question_and_the_last_message_newest_first() {
        let mut t = Transcript::open(None).unwrap();
        t.create("old").unwrap();
        t.push("old", Author::User, "first\n  question", None, false)
            .unwrap();
        t.push("old", Author::Bot, "answer", None, false).unwrap();
        t.create("empty").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        t.create("new").unwrap();
        let long = "x".repeat(500);
        t.push("new", Author::User, &long, None, false).unwrap();
        let ids: Vec<String> = ["new", "nope", "old", "empty", "../x"]
            .map(String::from)
            .to_vec();
        let listed = t.summaries(&ids).unwrap();
        let order: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(order[0], "new");
        assert_eq!(order.len(), 3, "unknown ids are left out: {order:?}");
        let old = listed.iter().find(|s| s.id == "old").unwrap();
        assert_eq!(old.title.as_deref(), Some("first question"));
        assert_eq!(old.last.as_deref(), Some("answer"));
        assert_eq!(old.last_author, Some("bot"));
        assert_eq!(old.messages, 2);
        let new = &listed[0];
        assert_eq!(
            new.title.as_deref().unwrap().chars().count(),
            TITLE_CHARS + 1
        );
        assert!(new.title.as_deref().unwrap().ends_with('…'));
        assert_eq!(new.last.as_deref().unwrap().chars().count(), LAST_CHARS + 1);
        let empty = listed.iter().find(|s| s.id == "empty").unwrap();
        assert_eq!((empty.title.as_deref(), empty.messages), (None, 0));
    }

    #[test]
    fn one_line_cuts_at_characters_not_bytes() {
        assert_eq!(one_line("  a\n\tb  ", 10), "a b");
        assert_eq!(one_line("ééé", 2), "éé…");
        assert_eq!(one_line("ab", 2), "ab");
    }

    #[test]
    fn the_trace_is_bounded() {
        let mut t = Transcript::open(None).unwrap();
        t.create("c").unwrap();
        for i in 0..MAX_PROGRESS + 10 {
            t.progress("c", &serde_json::json!({ "i": i })).unwrap();
        }
        let replay = t.replay("c").unwrap().unwrap();
        assert_eq!(replay.len(), MAX_PROGRESS);
        assert_eq!(replay[0], Entry::Progress(serde_json::json!({ "i": 10 })));
    }
}
