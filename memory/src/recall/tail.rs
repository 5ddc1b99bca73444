//! Reading `recall_messages` in commit order on PostgreSQL, for the blocking client: a [`Position`]
//! that each of a node's indexers (BM25, vectors) keeps, and the windows read after it.
//!
//! Why not "every `seq` after the last one seen" (SQLite's cursor): a sequence is drawn at insert,
//! not at commit. A transaction that drew `seq` 7 can commit after one that drew 8; a reader that saw
//! 8 and moved its cursor past it would never see 7. Every row instead carries the id of the
//! transaction that wrote it (`xid`, an `xid8` filled by the column's default), and the cursor is a
//! *horizon* of transactions: `pg_snapshot_xmin` of a snapshot is the oldest transaction still
//! running when it was taken, so every transaction below it has ended, committed or not, and its rows
//! are final. (The engine's async store follows the table the same way:
//! `opc_agents::store::postgres::RecallTail`.)
//!
//! Each read runs in one `REPEATABLE READ` read-only transaction (one snapshot): it reads the
//! snapshot's horizon `h`, returns the rows after the position whose `xid` is below `h`, in
//! `(xid, seq)` order, and gives the position after them. A full window leaves the position on its
//! last row (possibly inside one transaction's rows), so the next read continues it; a short one moves
//! it to the horizon. So a row is returned exactly once, after its transaction committed, whatever
//! order the transactions took their `seq`s and committed in; the price is that a long transaction
//! still running holds back rows committed after it began — any transaction on the server, since
//! transaction ids (and so the horizon) are the server's, not one database's.
//!
//! Invariants: a position never moves backwards (a later snapshot's `xmin` is never older); a
//! position is only handed out after the rows before it were returned; its text form
//! ([`Position::to_payload`]) is what a restart resumes from.

use opc_pg::postgres::{self, IsolationLevel, Row};

use super::Message;

/// Where a reader of `recall_messages` in commit order stands: everything before `(xid, seq)` was
/// returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// The transaction (an `xid8` as text) of the position; `None`: the start.
    xid: Option<String>,
    /// The `seq` within that transaction after which rows are new (0: all of its rows).
    seq: i64,
}

/// The payload's prefix: tells a PostgreSQL position from SQLite's plain sequence number.
const PAYLOAD_PREFIX: &str = "pg:";

impl Position {
    /// The start: every row is after it.
    pub fn start() -> Position {
        Position::default()
    }

    /// The position as text, to persist (the BM25 index's commit payload).
    pub fn to_payload(&self) -> String {
        match &self.xid {
            Some(xid) => format!("{PAYLOAD_PREFIX}{xid}:{}", self.seq),
            None => String::new(),
        }
    }

    /// A persisted position; the start for anything else (no payload, or one this format did not
    /// write): the reader then returns every row again, which a derived index absorbs (it replaces
    /// documents by `seq`).
    pub fn from_payload(payload: Option<&str>) -> Position {
        let parsed = payload
            .and_then(|p| p.trim().strip_prefix(PAYLOAD_PREFIX))
            .and_then(|p| p.split_once(':'))
            .and_then(|(xid, seq)| Some((xid.parse::<u64>().ok()?, seq.parse::<i64>().ok()?)));
        match parsed {
            Some((xid, seq)) => Position {
                xid: Some(xid.to_string()),
                seq,
            },
            None => Position::start(),
        }
    }

    /// The SQL condition "after this position and final", on `recall_messages m`, with the position
    /// in `$1`, `$2` and the horizon in `$3`.
    const WINDOW: &'static str = "($1::text IS NULL OR (m.xid, m.seq) > ($1::text::xid8, $2::BIGINT)) \
                                  AND m.xid < $3::text::xid8";

    /// The position's parameters `$1`, `$2`.
    fn params(&self) -> (Option<String>, i64) {
        (self.xid.clone(), self.seq)
    }
}

/// One window read after a position: its rows, and the position after them.
pub struct Window<T> {
    /// The rows, in `(xid, seq)` order.
    pub rows: Vec<T>,
    /// Where the next read starts.
    pub next: Position,
}

/// The columns of a [`Message`], on `recall_messages m`, in [`message`]'s order.
pub const MESSAGE_COLUMNS: &str = "m.seq, m.namespace, m.author, m.conversation, m.task, m.thread, \
                               m.source_id, m.time_ms, m.content_hash, m.text";

/// A [`Message`] from a row of [`MESSAGE_COLUMNS`] (from column 0).
pub fn message(r: &Row) -> Result<Message, postgres::Error> {
    Ok(Message {
        seq: r.try_get(0)?,
        namespace: r.try_get(1)?,
        author: r.try_get(2)?,
        conversation: r.try_get(3)?,
        task: r.try_get(4)?,
        thread: r.try_get(5)?,
        source_id: r.try_get(6)?,
        time_ms: r.try_get(7)?,
        content_hash: r.try_get(8)?,
        text: r.try_get(9)?,
    })
}

/// The messages committed after `at`, at most `limit` (the BM25 indexer's read).
pub fn messages(
    client: &mut postgres::Client,
    at: &Position,
    limit: i64,
) -> Result<Window<Message>, postgres::Error> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, m.xid::text FROM recall_messages m WHERE {} \
         ORDER BY m.xid, m.seq LIMIT $4",
        Position::WINDOW
    );
    window(client, at, limit, &sql, 10, None, message)
}

/// A row as the vector indexer needs it: its stored vector when some node embedded it already.
pub struct VectorRow {
    /// The message.
    pub seq: i64,
    /// Its namespace.
    pub namespace: String,
    /// Its time, ms.
    pub time_ms: i64,
    /// The stored vector (f32 little-endian), or `None`: nobody has embedded it yet.
    pub vector: Option<Vec<u8>>,
}

/// The rows committed after `at`, at most `limit`, each with its stored vector of `model` if any
/// (the vector indexer's read: the text is not read here, only for the rows it embeds).
pub fn vector_rows(
    client: &mut postgres::Client,
    at: &Position,
    limit: i64,
    model: &str,
) -> Result<Window<VectorRow>, postgres::Error> {
    let sql = format!(
        "SELECT m.seq, m.namespace, m.time_ms, v.vector, m.xid::text FROM recall_messages m \
         LEFT JOIN recall_vectors v ON v.seq = m.seq AND v.model = $5 WHERE {} \
         ORDER BY m.xid, m.seq LIMIT $4",
        Position::WINDOW
    );
    window(client, at, limit, &sql, 4, Some(model), |r| {
        Ok(VectorRow {
            seq: r.try_get(0)?,
            namespace: r.try_get(1)?,
            time_ms: r.try_get(2)?,
            vector: r.try_get(3)?,
        })
    })
}

/// Run `sql` (rows after the position and below the horizon, `m.seq` first and the row's `xid` as
/// text in column `xid_column`; `extra` as `$5` when given) in one snapshot and move the position
/// (see the module doc).
fn window<T>(
    client: &mut postgres::Client,
    at: &Position,
    limit: i64,
    sql: &str,
    xid_column: usize,
    extra: Option<&str>,
    map: impl Fn(&Row) -> Result<T, postgres::Error>,
) -> Result<Window<T>, postgres::Error> {
    let limit = limit.max(1);
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let horizon: String = tx
        .query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[])?
        .try_get(0)?;
    let (xid, seq) = at.params();
    let found = match extra {
        Some(e) => tx.query(sql, &[&xid, &seq, &horizon, &limit, &e])?,
        None => tx.query(sql, &[&xid, &seq, &horizon, &limit])?,
    };
    let mut rows = Vec::with_capacity(found.len());
    let mut last = None;
    for r in &found {
        let seq: i64 = r.try_get(0)?;
        rows.push(map(r)?);
        last = Some((r.try_get::<_, String>(xid_column)?, seq));
    }
    tx.commit()?;
    let next = match last {
        Some((xid, seq)) if rows.len() as i64 >= limit => Position {
            xid: Some(xid),
            seq,
        },
        _ => Position {
            xid: Some(horizon),
            seq: 0,
        },
    };
    Ok(Window { rows, next })
}

/// The smallest `seq` committed after `at` (visible to `client`'s snapshot): the first row a reader
/// at `at` has still to return; `None` when it has returned every committed row.
pub fn first_after(
    client: &mut impl postgres::GenericClient,
    at: &Position,
) -> Result<Option<i64>, postgres::Error> {
    let (xid, seq) = at.params();
    client
        .query_one(
            "SELECT MIN(m.seq) FROM recall_messages m \
             WHERE $1::text IS NULL OR (m.xid, m.seq) > ($1::text::xid8, $2::BIGINT)",
            &[&xid, &seq],
        )?
        .try_get(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_position_survives_its_payload_and_anything_else_is_the_start() {
        let at = Position {
            xid: Some("7421".into()),
            seq: 12,
        };
        assert_eq!(Position::from_payload(Some(&at.to_payload())), at);
        assert_eq!(Position::from_payload(None), Position::start());
        // SQLite's payload (a plain seq), a damaged one: read again from the start.
        for other in ["42", "pg:x:1", "pg:12", ""] {
            assert_eq!(
                Position::from_payload(Some(other)),
                Position::start(),
                "{other}"
            );
        }
        assert_eq!(Position::start().to_payload(), "");
    }
}
