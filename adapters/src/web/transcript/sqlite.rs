//! The transcript's SQL on SQLite, in the engine's database file.
//!
//! Why there: the gateway's own records (threads, cards) and the engine's tasks are there already, so
//! one file holds everything a restart needs. Before `schema_versions`, the version was kept in
//! `web_schema`: a database from then is adopted at that version, and `web_schema` is kept in step so
//! that older builds still refuse a newer database.
//!
//! Invariants: every write is one transaction (SQLite's write lock serialises writers, across
//! processes too, so taking a conversation's next number by `UPDATE … RETURNING` cannot race).

use std::path::Path;

use opc_migrate::now_ms;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::{
    MAX_MESSAGES, MAX_PROGRESS, MessageRow, NewMessage, ReplayRows, SUMMARY_CHARS, SummaryRow,
    TranscriptError,
};

/// The `web_*` tables' migrations on SQLite, in order (append only; never edit a published one).
pub const MIGRATIONS: &[opc_migrate::Migration] = &[
    opc_migrate::Migration {
        what: "the web chat's conversations, messages and trace",
        sql: V1,
    },
    opc_migrate::Migration {
        what: "the time of each conversation's last message (for the chat's list)",
        sql: V2,
    },
];

/// The transcript's tables as a component of the SQLite database file.
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

/// Migration 2: when a conversation's last message was recorded (Unix ms; `NULL` for a conversation
/// from before it, read as its `created_at`).
const V2: &str = "ALTER TABLE web_conversations ADD COLUMN last_at INTEGER;";

fn failed(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> TranscriptError {
    move |source| TranscriptError::Sqlite { doing, source }
}

/// The database at `path` (created if needed), or in memory for `None`, with its tables up to date.
pub(super) fn open(path: Option<&Path>) -> Result<Connection, TranscriptError> {
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
    Ok(conn)
}

const CREATE: &str = "INSERT INTO web_conversations (id, created_at) VALUES (?1, ?2) \
                      ON CONFLICT DO NOTHING";

pub(super) fn create(conn: &mut Connection, id: &str) -> Result<(), TranscriptError> {
    conn.prepare_cached(CREATE)
        .and_then(|mut stmt| stmt.execute(params![id, now_ms()]))
        .map_err(failed("recording a conversation"))?;
    Ok(())
}

pub(super) fn exists(conn: &Connection, id: &str) -> Result<bool, TranscriptError> {
    conn.prepare_cached("SELECT 1 FROM web_conversations WHERE id = ?1")
        .and_then(|mut stmt| stmt.exists([id]))
        .map_err(failed("looking up a conversation"))
}

pub(super) fn push(
    conn: &mut Connection,
    id: &str,
    message: &NewMessage,
    create: bool,
) -> Result<Option<i64>, TranscriptError> {
    let tx = conn
        .transaction()
        .map_err(failed("starting to record a message"))?;
    if create {
        tx.prepare_cached(CREATE)
            .and_then(|mut stmt| stmt.execute(params![id, now_ms()]))
            .map_err(failed("recording a conversation"))?;
    }
    let Some(number) = next(&tx, id, "next_message")? else {
        return Ok(None);
    };
    tx.prepare_cached("UPDATE web_conversations SET last_at = ?2 WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute(params![id, now_ms()]))
        .map_err(failed("dating a message"))?;
    tx.prepare_cached(
        "INSERT INTO web_messages (conversation, number, author, text, card, approval) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            id,
            number,
            message.author,
            message.text,
            message.card,
            message.approval
        ])
    })
    .map_err(failed("recording a message"))?;
    tx.commit().map_err(failed("committing a message"))?;
    Ok(Some(number))
}

pub(super) fn edit(
    conn: &mut Connection,
    id: &str,
    number: i64,
    text: &str,
) -> Result<bool, TranscriptError> {
    let changed = conn
        .prepare_cached(
            "UPDATE web_messages SET text = ?3 \
             WHERE conversation = ?1 AND number = ?2 AND card IS NULL",
        )
        .and_then(|mut stmt| stmt.execute(params![id, number, text]))
        .map_err(failed("editing a message"))?;
    Ok(changed > 0)
}

pub(super) fn update_card(
    conn: &mut Connection,
    id: &str,
    number: i64,
    drawn: &NewMessage,
) -> Result<bool, TranscriptError> {
    let changed = conn
        .prepare_cached(
            "UPDATE web_messages SET text = ?3, card = ?4, approval = ?5 \
             WHERE conversation = ?1 AND number = ?2 AND card IS NOT NULL",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![id, number, drawn.text, drawn.card, drawn.approval])
        })
        .map_err(failed("updating an approval card"))?;
    Ok(changed > 0)
}

pub(super) fn progress(
    conn: &mut Connection,
    id: &str,
    event: &str,
) -> Result<bool, TranscriptError> {
    let tx = conn
        .transaction()
        .map_err(failed("starting to record a trace event"))?;
    let Some(seq) = next(&tx, id, "next_progress")? else {
        return Ok(false);
    };
    tx.prepare_cached("INSERT INTO web_progress (conversation, seq, event) VALUES (?1, ?2, ?3)")
        .and_then(|mut stmt| stmt.execute(params![id, seq, event]))
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

pub(super) fn card(
    conn: &Connection,
    approval: i64,
) -> Result<Option<(String, i64, String)>, TranscriptError> {
    conn.prepare_cached(
        "SELECT conversation, number, card FROM web_messages \
         WHERE approval = ?1 AND card IS NOT NULL ORDER BY number DESC LIMIT 1",
    )
    .and_then(|mut stmt| {
        stmt.query_row([approval], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
    })
    .map_err(failed("looking up an approval card"))
}

pub(super) fn replay(conn: &Connection, id: &str) -> Result<Option<ReplayRows>, TranscriptError> {
    if !exists(conn, id)? {
        return Ok(None);
    }
    let mut newest_first = Vec::new();
    {
        let mut stmt = conn
            .prepare_cached(
                "SELECT number, author, text, card FROM web_messages WHERE conversation = ?1 \
                 ORDER BY number DESC LIMIT ?2",
            )
            .map_err(failed("reading messages"))?;
        let rows = stmt
            .query_map(params![id, MAX_MESSAGES as i64], |r| {
                Ok(MessageRow {
                    number: r.get(0)?,
                    author: r.get(1)?,
                    text: r.get(2)?,
                    card: r.get(3)?,
                })
            })
            .map_err(failed("reading messages"))?;
        for row in rows {
            newest_first.push(row.map_err(failed("reading messages"))?);
        }
    }
    let mut stmt = conn
        .prepare_cached("SELECT event FROM web_progress WHERE conversation = ?1 ORDER BY seq")
        .map_err(failed("reading the trace"))?;
    let trace = stmt
        .query_map([id], |r| r.get::<_, String>(0))
        .map_err(failed("reading the trace"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed("reading the trace"))?;
    Ok(Some(ReplayRows {
        newest_first,
        trace,
    }))
}

/// The summary of each of `ids` that exists (in no particular order), in one read transaction.
pub(super) fn summaries(
    conn: &mut Connection,
    ids: &[String],
) -> Result<Vec<SummaryRow>, TranscriptError> {
    let tx = conn
        .transaction()
        .map_err(failed("starting to read conversations"))?;
    let mut found = Vec::with_capacity(ids.len());
    {
        let mut stmt = tx
            .prepare_cached(SUMMARY)
            .map_err(failed("reading conversations"))?;
        for id in ids {
            let row = stmt
                .query_row(params![id, SUMMARY_CHARS as i64], |r| {
                    Ok(SummaryRow {
                        id: r.get(0)?,
                        at: r.get(1)?,
                        messages: r.get(2)?,
                        title: r.get(3)?,
                        last: r.get(4)?,
                        last_author: r.get(5)?,
                    })
                })
                .optional()
                .map_err(failed("reading conversations"))?;
            found.extend(row);
        }
    }
    tx.commit().map_err(failed("reading conversations"))?;
    Ok(found)
}

/// One conversation's summary: the first user message and the last message, cut in SQL so a long
/// message is not read whole.
const SUMMARY: &str = "
SELECT c.id, COALESCE(c.last_at, c.created_at), c.next_message - 1,
    (SELECT substr(m.text, 1, ?2) FROM web_messages m
        WHERE m.conversation = c.id AND m.author = 'user' ORDER BY m.number LIMIT 1),
    (SELECT substr(m.text, 1, ?2) FROM web_messages m
        WHERE m.conversation = c.id ORDER BY m.number DESC LIMIT 1),
    (SELECT m.author FROM web_messages m
        WHERE m.conversation = c.id ORDER BY m.number DESC LIMIT 1)
FROM web_conversations c WHERE c.id = ?1";

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
