//! The web chat's transcript in SQLite: its conversations, their messages, approval cards, notices and
//! trace, so that a conversation outlives `opc run` (a SIGTERM or a kill -9) and costs no memory while
//! nobody watches it.
//!
//! Why SQLite, in the engine's database file: the gateway's own records (threads, cards) and the
//! engine's tasks are there already, so one file holds everything a restart needs. The tables are this
//! module's own (`web_*`), created and changed only by its migrations ([`MIGRATIONS`]), the `web`
//! component of the file's one migration story (`opc_migrate`, its row in `schema_versions`). Before
//! that, the version was kept in `web_schema`: a database from then is adopted at that version, and
//! `web_schema` is kept in step so that older builds still refuse a newer database.
//!
//! Invariants:
//! - every write is one transaction: a message and its conversation's counter change together, so a
//!   crash leaves no gap and no duplicate number;
//! - message numbers are per conversation, from 1, never reused; notices are numbered with the messages,
//!   so a replay shows them in the order they came;
//! - the trace keeps the last [`MAX_PROGRESS`] events per conversation; messages are all kept (they are
//!   the transcript), a replay sends the last [`MAX_MESSAGES`];
//! - approval cards are found by their approval id, whichever conversation holds them.

use std::path::Path;

use opc_migrate::now_ms;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde_json::Value;

use crate::Card;

/// Messages (user messages, answers, cards, notices) replayed to a new subscriber; the oldest go first.
pub const MAX_MESSAGES: usize = 200;
/// Trace events kept per conversation; the oldest go first.
pub const MAX_PROGRESS: usize = 500;

/// The `web_*` tables' migrations, in order (append only; never edit a published one).
pub const MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "the web chat's conversations, messages and trace",
    sql: V1,
}];

/// The transcript's tables as a component of the database file.
pub const COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "web",
    migrations: MIGRATIONS,
    legacy: opc_migrate::Legacy::VersionTable("web_schema"),
};

/// Migration 1 (`IF NOT EXISTS` as it was when `web_schema` kept the version).
const V1: &str = "
CREATE TABLE IF NOT EXISTS web_conversations (
    id             TEXT PRIMARY KEY,
    created_at     INTEGER NOT NULL,
    next_message   INTEGER NOT NULL DEFAULT 1,
    next_progress  INTEGER NOT NULL DEFAULT 1
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS web_messages (
    conversation  TEXT NOT NULL,
    number        INTEGER NOT NULL,
    author        TEXT NOT NULL,
    text          TEXT NOT NULL,
    card          TEXT,
    approval      INTEGER,
    PRIMARY KEY (conversation, number)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS web_messages_by_approval ON web_messages (approval)
    WHERE approval IS NOT NULL;
CREATE TABLE IF NOT EXISTS web_progress (
    conversation  TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    event         TEXT NOT NULL,
    PRIMARY KEY (conversation, seq)
) WITHOUT ROWID;
";

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
}

fn failed(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> TranscriptError {
    move |source| TranscriptError::Sqlite { doing, source }
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

/// The transcript's connection.
pub struct Transcript {
    conn: Connection,
}

impl Transcript {
    /// Open the tables in the database at `path` (created if needed), or in memory for `None` (tests,
    /// and embeddings that need no restart).
    pub fn open(path: Option<&Path>) -> Result<Transcript, TranscriptError> {
        let mut conn = match path {
            Some(path) => Connection::open(path),
            None => Connection::open_in_memory(),
        }
        .map_err(failed("opening the database"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(failed("setting the busy timeout"))?;
        if path.is_some() {
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(failed("enabling WAL"))?;
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(failed("setting synchronous"))?;
        }
        // A small page cache: the transcript is read on (re)connect only.
        conn.pragma_update(None, "cache_size", -512)
            .map_err(failed("setting the cache size"))?;
        opc_migrate::migrate(&mut conn, &COMPONENT)?;
        Ok(Transcript { conn })
    }

    /// Record conversation `id` if it is new.
    pub fn create(&mut self, id: &str) -> Result<(), TranscriptError> {
        self.conn
            .prepare_cached(
                "INSERT INTO web_conversations (id, created_at) VALUES (?1, ?2) \
                 ON CONFLICT DO NOTHING",
            )
            .and_then(|mut stmt| stmt.execute(params![id, now_ms()]))
            .map_err(failed("recording a conversation"))?;
        Ok(())
    }

    /// Whether conversation `id` exists.
    pub fn exists(&self, id: &str) -> Result<bool, TranscriptError> {
        self.conn
            .prepare_cached("SELECT 1 FROM web_conversations WHERE id = ?1")
            .and_then(|mut stmt| stmt.exists([id]))
            .map_err(failed("looking up a conversation"))
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
        let card_json = card.map(serde_json::to_string).transpose().map_err(|e| {
            failed("encoding an approval card")(rusqlite::Error::ToSqlConversionFailure(Box::new(
                e,
            )))
        })?;
        let tx = self
            .conn
            .transaction()
            .map_err(failed("starting to record a message"))?;
        if create {
            tx.prepare_cached(
                "INSERT INTO web_conversations (id, created_at) VALUES (?1, ?2) \
                 ON CONFLICT DO NOTHING",
            )
            .and_then(|mut stmt| stmt.execute(params![id, now_ms()]))
            .map_err(failed("recording a conversation"))?;
        }
        let Some(number) = next(&tx, id, "next_message")? else {
            return Ok(None);
        };
        tx.prepare_cached(
            "INSERT INTO web_messages (conversation, number, author, text, card, approval) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                id,
                number,
                author.as_str(),
                text,
                card_json,
                card.map(|c| c.approval)
            ])
        })
        .map_err(failed("recording a message"))?;
        tx.commit().map_err(failed("committing a message"))?;
        Ok(Some(number))
    }

    /// Replace the text of message `number` (not a card) of conversation `id`; whether it exists.
    pub fn edit(&mut self, id: &str, number: i64, text: &str) -> Result<bool, TranscriptError> {
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE web_messages SET text = ?3 \
                 WHERE conversation = ?1 AND number = ?2 AND card IS NULL",
            )
            .and_then(|mut stmt| stmt.execute(params![id, number, text]))
            .map_err(failed("editing a message"))?;
        Ok(changed > 0)
    }

    /// Redraw card `number` of conversation `id`; whether it exists.
    pub fn update_card(
        &mut self,
        id: &str,
        number: i64,
        card: &Card,
    ) -> Result<bool, TranscriptError> {
        let card_json = serde_json::to_string(card).map_err(|e| {
            failed("encoding an approval card")(rusqlite::Error::ToSqlConversionFailure(Box::new(
                e,
            )))
        })?;
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE web_messages SET text = ?3, card = ?4, approval = ?5 \
                 WHERE conversation = ?1 AND number = ?2 AND card IS NOT NULL",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    id,
                    number,
                    card.to_markdown(),
                    card_json,
                    card.approval
                ])
            })
            .map_err(failed("updating an approval card"))?;
        Ok(changed > 0)
    }

    /// Append a trace event to conversation `id`, forgetting the oldest past [`MAX_PROGRESS`];
    /// whether the conversation exists.
    pub fn progress(&mut self, id: &str, event: &Value) -> Result<bool, TranscriptError> {
        let tx = self
            .conn
            .transaction()
            .map_err(failed("starting to record a trace event"))?;
        let Some(seq) = next(&tx, id, "next_progress")? else {
            return Ok(false);
        };
        tx.prepare_cached(
            "INSERT INTO web_progress (conversation, seq, event) VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut stmt| stmt.execute(params![id, seq, event.to_string()]))
        .map_err(failed("recording a trace event"))?;
        let keep = MAX_PROGRESS as i64;
        if seq > keep {
            tx.prepare_cached("DELETE FROM web_progress WHERE conversation = ?1 AND seq <= ?2")
                .and_then(|mut stmt| stmt.execute(params![id, seq - keep]))
                .map_err(failed("forgetting old trace events"))?;
        }
        tx.commit().map_err(failed("committing a trace event"))?;
        Ok(true)
    }

    /// The card of approval `approval`, wherever it is.
    pub fn card(&self, approval: i64) -> Result<Option<StoredCard>, TranscriptError> {
        let found: Option<(String, i64, String)> = self
            .conn
            .prepare_cached(
                "SELECT conversation, number, card FROM web_messages \
                 WHERE approval = ?1 AND card IS NOT NULL ORDER BY number DESC LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([approval], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .optional()
            })
            .map_err(failed("looking up an approval card"))?;
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
        if !self.exists(id)? {
            return Ok(None);
        }
        let mut entries = Vec::new();
        {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT number, author, text, card FROM web_messages WHERE conversation = ?1 \
                     ORDER BY number DESC LIMIT ?2",
                )
                .map_err(failed("reading messages"))?;
            let rows = stmt
                .query_map(params![id, MAX_MESSAGES as i64], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                })
                .map_err(failed("reading messages"))?;
            for row in rows {
                let (number, author, text, card) = row.map_err(failed("reading messages"))?;
                let card = card.and_then(|c| serde_json::from_str::<Card>(&c).ok());
                entries.push(match card {
                    Some(card) => Entry::Card { number, card },
                    None => Entry::Message {
                        number,
                        author: Author::parse(&author),
                        text,
                    },
                });
            }
        }
        entries.reverse();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT event FROM web_progress WHERE conversation = ?1 ORDER BY seq")
            .map_err(failed("reading the trace"))?;
        let rows = stmt
            .query_map([id], |r| r.get::<_, String>(0))
            .map_err(failed("reading the trace"))?;
        for row in rows {
            let event = row.map_err(failed("reading the trace"))?;
            if let Ok(event) = serde_json::from_str(&event) {
                entries.push(Entry::Progress(event));
            }
        }
        Ok(Some(entries))
    }
}

/// Take the next value of counter `column` of conversation `id`; `None` for an unknown conversation.
fn next(
    tx: &Transaction<'_>,
    id: &str,
    column: &'static str,
) -> Result<Option<i64>, TranscriptError> {
    let sql = match column {
        "next_progress" => {
            "UPDATE web_conversations SET next_progress = next_progress + 1 WHERE id = ?1 \
             RETURNING next_progress - 1"
        }
        _ => {
            "UPDATE web_conversations SET next_message = next_message + 1 WHERE id = ?1 \
             RETURNING next_message - 1"
        }
    };
    tx.prepare_cached(sql)
        .and_then(|mut stmt| stmt.query_row([id], |r| r.get::<_, i64>(0)).optional())
        .map_err(failed("numbering a message"))
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
