//! Reading recall rows in commit order on PostgreSQL: [`RecallTail`], the cursor a node's recall
//! indexer (and anything else that follows a table) keeps.
//!
//! Why not "every `seq` after the last one seen": a sequence is drawn at insert, not at commit. A
//! transaction that drew `seq` 7 can commit after one that drew 8; a reader that saw 8 and moved its
//! cursor past it would never see 7. Every row instead carries the id of the transaction that wrote
//! it (`xid`, an `xid8`, filled by the column's default), and the cursor is a *horizon* of
//! transactions: `pg_snapshot_xmin` of a snapshot is the oldest transaction still running when it was
//! taken, so every transaction below it has ended, committed or not, and its rows are final.
//!
//! Each [`RecallTail::next`] runs in one `REPEATABLE READ` read-only transaction (one snapshot):
//! it reads the snapshot's horizon `h`, returns the rows whose `xid` lies in `[previous h, h)` in
//! `seq` order, and moves the cursor to `h`. So a row is returned exactly once, after its
//! transaction committed, whatever order the transactions took their `seq`s and committed in; the
//! price is that a long transaction still running holds back rows committed after it began.
//!
//! Invariants: the horizon never moves backwards (a later snapshot's `xmin` is never older), and
//! a horizon is only kept after the rows below it were returned.

use deadpool_postgres::GenericClient;
use opc_memory::recall::Message;

use super::super::StoreError;
use super::sql::{get, pg};

/// A cursor over `recall_messages` in commit order (see the module doc): a position `(xid, seq)`,
/// everything before which was returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecallTail {
    /// The transaction (an `xid8` as text) of the position; `None`: the start.
    xid: Option<String>,
    /// The `seq` within that transaction after which rows are new (0: all of its rows).
    seq: i64,
}

impl RecallTail {
    /// A cursor from the first row.
    pub fn from_start() -> RecallTail {
        RecallTail::default()
    }

    /// The rows committed since the last call, at most `limit`, in `(xid, seq)` order, and move the
    /// cursor past them. A full batch leaves the cursor on its last row (possibly inside one
    /// transaction's rows), so the next call continues it; a short one moves it to the horizon.
    pub async fn next(
        &mut self,
        client: &mut deadpool_postgres::Object,
        limit: u32,
    ) -> Result<Vec<Message>, StoreError> {
        const DOING: &str = "reading new recall rows";
        let limit = limit.max(1);
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(pg(DOING))?;
        let horizon: String = get(
            &tx.query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[])
                .await
                .map_err(pg(DOING))?,
            0,
            DOING,
        )?;
        let rows = tx
            .query(
                "SELECT seq, namespace, author, conversation, task, thread, source_id, time_ms, \
                 content_hash, text, xid::text FROM recall_messages \
                 WHERE ($1::text IS NULL OR (xid, seq) > ($1::text::xid8, $2::BIGINT)) \
                 AND xid < $3::text::xid8 \
                 ORDER BY xid, seq LIMIT $4",
                &[&self.xid, &self.seq, &horizon, &i64::from(limit)],
            )
            .await
            .map_err(pg(DOING))?;
        let mut out = Vec::with_capacity(rows.len());
        let mut last = None;
        for row in &rows {
            let seq: i64 = get(row, 0, DOING)?;
            out.push(Message {
                seq,
                namespace: get(row, 1, DOING)?,
                author: get(row, 2, DOING)?,
                conversation: get(row, 3, DOING)?,
                task: get(row, 4, DOING)?,
                thread: get(row, 5, DOING)?,
                source_id: get(row, 6, DOING)?,
                time_ms: get(row, 7, DOING)?,
                content_hash: get(row, 8, DOING)?,
                text: get(row, 9, DOING)?,
            });
            last = Some((get::<String>(row, 10, DOING)?, seq));
        }
        tx.commit().await.map_err(pg(DOING))?;
        match last {
            Some((xid, seq)) if out.len() >= limit as usize => {
                self.xid = Some(xid);
                self.seq = seq;
            }
            _ => {
                self.xid = Some(horizon);
                self.seq = 0;
            }
        }
        Ok(out)
    }
}

/// Whether `c` reaches a database whose recall table carries the commit-order column (a check for
/// callers that follow the table).
pub async fn has_commit_order(c: &impl GenericClient) -> Result<bool, StoreError> {
    const DOING: &str = "checking the recall table";
    let row = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
             WHERE table_name = 'recall_messages' AND column_name = 'xid')",
            &[],
        )
        .await
        .map_err(pg(DOING))?;
    get(&row, 0, DOING)
}
