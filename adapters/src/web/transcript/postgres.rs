//! The transcript's SQL on PostgreSQL (`framework.memory.storage: postgres`), where several nodes
//! share the tables, over one [`opc_pg::Blocking`] connection.
//!
//! Why a lock where SQLite needs none: SQLite serialises every writer, PostgreSQL does not. Two nodes
//! appending to one conversation must each take a different next number, so a write that numbers
//! something first locks the conversation's row (`SELECT … FOR UPDATE`) and holds it to its commit:
//! the second writer waits, then reads the number the first one left.
//!
//! Invariants: every write is one transaction, run in one closure on the connection's thread; a
//! replay reads in one read-only `REPEATABLE READ` transaction, so its messages and trace are of one
//! moment even while other nodes write. A PostgreSQL database has no legacy: its story starts at this
//! file's migration 1, the SQLite schema in PostgreSQL's types (integers `BIGINT`, read as `i64`).

use opc_migrate::now_ms;
use opc_pg::Blocking;
use opc_pg::postgres::{Client, IsolationLevel, Transaction};

use super::{
    MAX_MESSAGES, MAX_PROGRESS, MessageRow, NewMessage, ReplayRows, SUMMARY_CHARS, SummaryRow,
    TranscriptError,
};

/// The `web_*` tables' migrations on PostgreSQL, in order (append only; never edit a published one).
const MIGRATIONS: &[opc_migrate::Migration] = &[
    opc_migrate::Migration {
        what: "the web chat's conversations, messages and trace",
        sql: V1,
    },
    opc_migrate::Migration {
        what: "the time of each conversation's last message (for the chat's list)",
        sql: V2,
    },
];

/// The transcript's tables in a PostgreSQL database: its `schema_versions` row is `web`, as on
/// SQLite.
pub const POSTGRES_COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "web",
    migrations: MIGRATIONS,
    legacy: opc_migrate::Legacy::None,
};

const V1: &str = "
CREATE TABLE web_conversations (
    id             TEXT PRIMARY KEY,
    created_at     BIGINT NOT NULL,
    next_message   BIGINT NOT NULL DEFAULT 1,
    next_progress  BIGINT NOT NULL DEFAULT 1
);
CREATE TABLE web_messages (
    conversation  TEXT NOT NULL,
    number        BIGINT NOT NULL,
    author        TEXT NOT NULL,
    text          TEXT NOT NULL,
    card          TEXT,
    approval      BIGINT,
    PRIMARY KEY (conversation, number)
);
CREATE INDEX web_messages_by_approval ON web_messages (approval) WHERE approval IS NOT NULL;
CREATE TABLE web_progress (
    conversation  TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    event         TEXT NOT NULL,
    PRIMARY KEY (conversation, seq)
);
";

/// Migration 2, as on SQLite.
const V2: &str = "ALTER TABLE web_conversations ADD COLUMN last_at BIGINT;";

const CREATE: &str = "INSERT INTO web_conversations (id, created_at) VALUES ($1, $2) \
                      ON CONFLICT DO NOTHING";

/// Record conversation `id` if it is new (one statement; another node's concurrent insert of the
/// same id makes this one wait for its commit, then do nothing).
pub(super) fn create(conn: &Blocking, id: &str) -> Result<(), TranscriptError> {
    let id = id.to_string();
    conn.run("recording a conversation", move |client| {
        client.execute(CREATE, &[&id, &now_ms()])
    })?;
    Ok(())
}

pub(super) fn exists(conn: &Blocking, id: &str) -> Result<bool, TranscriptError> {
    let id = id.to_string();
    Ok(conn.run("looking up a conversation", move |client| {
        Ok(client
            .query_opt("SELECT 1 FROM web_conversations WHERE id = $1", &[&id])?
            .is_some())
    })?)
}

/// Append `message`, creating the conversation first when `create` is set. Locks conversation
/// `id`'s row from taking its number to the commit.
pub(super) fn push(
    conn: &Blocking,
    id: &str,
    message: NewMessage,
    create: bool,
) -> Result<Option<i64>, TranscriptError> {
    let id = id.to_string();
    Ok(conn.run("recording a message", move |client| {
        let mut tx = client.transaction()?;
        if create {
            tx.execute(CREATE, &[&id, &now_ms()])?;
        }
        let Some(number) = next(&mut tx, &id, Counter::Message)? else {
            return Ok(None);
        };
        tx.execute(
            "UPDATE web_conversations SET last_at = $2 WHERE id = $1",
            &[&id, &now_ms()],
        )?;
        tx.execute(
            "INSERT INTO web_messages (conversation, number, author, text, card, approval) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &id,
                &number,
                &message.author,
                &message.text,
                &message.card,
                &message.approval,
            ],
        )?;
        tx.commit()?;
        Ok(Some(number))
    })?)
}

/// One statement: it locks the message's row alone.
pub(super) fn edit(
    conn: &Blocking,
    id: &str,
    number: i64,
    text: &str,
) -> Result<bool, TranscriptError> {
    let (id, text) = (id.to_string(), text.to_string());
    Ok(conn.run("editing a message", move |client| {
        Ok(client.execute(
            "UPDATE web_messages SET text = $3 \
             WHERE conversation = $1 AND number = $2 AND card IS NULL",
            &[&id, &number, &text],
        )? > 0)
    })?)
}

/// One statement: it locks the card's row alone.
pub(super) fn update_card(
    conn: &Blocking,
    id: &str,
    number: i64,
    drawn: NewMessage,
) -> Result<bool, TranscriptError> {
    let id = id.to_string();
    Ok(conn.run("updating an approval card", move |client| {
        Ok(client.execute(
            "UPDATE web_messages SET text = $3, card = $4, approval = $5 \
             WHERE conversation = $1 AND number = $2 AND card IS NOT NULL",
            &[&id, &number, &drawn.text, &drawn.card, &drawn.approval],
        )? > 0)
    })?)
}

/// Append a trace event and forget the oldest past [`MAX_PROGRESS`]. Locks conversation `id`'s row
/// to the commit, so two nodes' events get distinct numbers and trim in turn.
pub(super) fn progress(conn: &Blocking, id: &str, event: String) -> Result<bool, TranscriptError> {
    let id = id.to_string();
    Ok(conn.run("recording a trace event", move |client| {
        let mut tx = client.transaction()?;
        let Some(seq) = next(&mut tx, &id, Counter::Progress)? else {
            return Ok(false);
        };
        tx.execute(
            "INSERT INTO web_progress (conversation, seq, event) VALUES ($1, $2, $3)",
            &[&id, &seq, &event],
        )?;
        let keep = MAX_PROGRESS as i64;
        if seq > keep {
            tx.execute(
                "DELETE FROM web_progress WHERE conversation = $1 AND seq <= $2",
                &[&id, &(seq - keep)],
            )?;
        }
        tx.commit()?;
        Ok(true)
    })?)
}

pub(super) fn card(
    conn: &Blocking,
    approval: i64,
) -> Result<Option<(String, i64, String)>, TranscriptError> {
    Ok(conn.run("looking up an approval card", move |client| {
        client
            .query_opt(
                "SELECT conversation, number, card FROM web_messages \
                 WHERE approval = $1 AND card IS NOT NULL ORDER BY number DESC LIMIT 1",
                &[&approval],
            )?
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .transpose()
    })?)
}

pub(super) fn replay(conn: &Blocking, id: &str) -> Result<Option<ReplayRows>, TranscriptError> {
    let id = id.to_string();
    Ok(
        conn.run("reading a conversation", move |client: &mut Client| {
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            if tx
                .query_opt("SELECT 1 FROM web_conversations WHERE id = $1", &[&id])?
                .is_none()
            {
                return Ok(None);
            }
            let newest_first = tx
                .query(
                    "SELECT number, author, text, card FROM web_messages WHERE conversation = $1 \
                 ORDER BY number DESC LIMIT $2",
                    &[&id, &(MAX_MESSAGES as i64)],
                )?
                .iter()
                .map(|r| {
                    Ok(MessageRow {
                        number: r.try_get(0)?,
                        author: r.try_get(1)?,
                        text: r.try_get(2)?,
                        card: r.try_get(3)?,
                    })
                })
                .collect::<Result<Vec<_>, opc_pg::postgres::Error>>()?;
            let trace = tx
                .query(
                    "SELECT event FROM web_progress WHERE conversation = $1 ORDER BY seq",
                    &[&id],
                )?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<Vec<String>, _>>()?;
            tx.commit()?;
            Ok(Some(ReplayRows {
                newest_first,
                trace,
            }))
        })?,
    )
}

/// The summary of each of `ids` that exists (in no particular order), in one statement.
pub(super) fn summaries(
    conn: &Blocking,
    ids: &[String],
) -> Result<Vec<SummaryRow>, TranscriptError> {
    let ids = ids.to_vec();
    Ok(conn.run("reading conversations", move |client| {
        client
            .query(
                "SELECT c.id, COALESCE(c.last_at, c.created_at), c.next_message - 1, \
                    (SELECT substr(m.text, 1, $2) FROM web_messages m \
                        WHERE m.conversation = c.id AND m.author = 'user' ORDER BY m.number LIMIT 1), \
                    (SELECT substr(m.text, 1, $2) FROM web_messages m \
                        WHERE m.conversation = c.id ORDER BY m.number DESC LIMIT 1), \
                    (SELECT m.author FROM web_messages m \
                        WHERE m.conversation = c.id ORDER BY m.number DESC LIMIT 1) \
                 FROM web_conversations c WHERE c.id = ANY($1)",
                &[&ids, &(SUMMARY_CHARS as i32)],
            )?
            .iter()
            .map(|r| {
                Ok(SummaryRow {
                    id: r.try_get(0)?,
                    at: r.try_get(1)?,
                    messages: r.try_get(2)?,
                    title: r.try_get(3)?,
                    last: r.try_get(4)?,
                    last_author: r.try_get(5)?,
                })
            })
            .collect()
    })?)
}

/// A conversation's counters.
#[derive(Clone, Copy)]
enum Counter {
    Message,
    Progress,
}

/// Take the next value of conversation `id`'s `counter`; `None` for an unknown conversation. Locks
/// the conversation's row (`FOR UPDATE`) until `tx` ends: another node taking a number of the same
/// conversation waits here, then reads the value this one left.
fn next(
    tx: &mut Transaction<'_>,
    id: &str,
    counter: Counter,
) -> Result<Option<i64>, opc_pg::postgres::Error> {
    let (take, advance) = match counter {
        Counter::Message => (
            "SELECT next_message FROM web_conversations WHERE id = $1 FOR UPDATE",
            "UPDATE web_conversations SET next_message = next_message + 1 WHERE id = $1",
        ),
        Counter::Progress => (
            "SELECT next_progress FROM web_conversations WHERE id = $1 FOR UPDATE",
            "UPDATE web_conversations SET next_progress = next_progress + 1 WHERE id = $1",
        ),
    };
    let Some(row) = tx.query_opt(take, &[&id])? else {
        return Ok(None);
    };
    let value: i64 = row.try_get(0)?;
    tx.execute(advance, &[&id])?;
    Ok(Some(value))
}
