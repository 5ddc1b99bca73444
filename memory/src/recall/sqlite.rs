//! Recall memory's SQL on SQLite: the engine's file is the truth, one writing connection and a pool
//! of read-only ones.
//!
//! Invariants (and why):
//! - SQLite has one writer, so rows commit in `seq` order: "every row after seq N" is exactly what an
//!   indexer has not seen, and each index's cursor is a plain `seq`.
//! - Searches never take the writer's lock: they read through a pooled read-only connection (WAL
//!   lets readers run beside the writer).
//! - Every write is one transaction (`BEGIN IMMEDIATE` for appends: the sequence number is assigned
//!   inside it).
//! - Vectors are stored per (row, model): the active generation's and, while one fills, the new
//!   one's ([`super::generation`]). A generation switches inside one write transaction that first
//!   checks every row has a vector of it, so no row is left without one after the switch.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params};

use super::generation::{self, Generation, Plan, Store, Switch};
use super::{Message, NewMessage, RecallError};

/// Recall's connections to one SQLite file.
pub struct Sqlite {
    path: PathBuf,
    /// The one writing connection (appends and vector rows).
    writer: Mutex<Connection>,
    /// Read-only connections for searches, checked out for the length of one lookup.
    readers: Mutex<Vec<Connection>>,
}

fn open_conn(path: &Path, flags: OpenFlags) -> Result<Connection, RecallError> {
    let db = |source| RecallError::Db {
        path: path.display().to_string(),
        source,
    };
    let conn = Connection::open_with_flags(path, flags).map_err(db)?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(db)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(db)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(db)?;
    // Searches read a few hundred rows scattered over the file (hits and their neighbours): map it
    // rather than copy each page through a syscall, and keep more pages cached (measured at 1M rows,
    // see the recall bench).
    conn.pragma_update(None, "mmap_size", 1i64 << 30)
        .map_err(db)?;
    conn.pragma_update(None, "cache_size", -16_384i64)
        .map_err(db)?;
    Ok(conn)
}

const MESSAGE_COLUMNS: &str =
    "seq, namespace, author, conversation, task, thread, source_id, time_ms, content_hash, text";

fn row_to_message(r: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    Ok(Message {
        seq: r.get(0)?,
        namespace: r.get(1)?,
        author: r.get(2)?,
        conversation: r.get(3)?,
        task: r.get(4)?,
        thread: r.get(5)?,
        source_id: r.get(6)?,
        time_ms: r.get(7)?,
        content_hash: r.get(8)?,
        text: r.get(9)?,
    })
}

/// Append `msg` inside the caller's transaction or savepoint (so the engine can write a turn and its recall row
/// atomically on its own connection); its sequence number. Call [`super::RecallStore::notify`] after the
/// commit so the indexer picks it up without waiting for its poll.
pub fn append_in(tx: &rusqlite::Connection, msg: &NewMessage) -> rusqlite::Result<i64> {
    tx.execute(
        "INSERT INTO recall_messages (namespace, author, conversation, task, thread, source_id,
             time_ms, content_hash, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            msg.namespace,
            msg.author,
            msg.conversation,
            msg.task,
            msg.thread,
            msg.source_id,
            msg.time_ms,
            msg.content_hash(),
            msg.text
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

impl Sqlite {
    /// Open (creating when needed) the file at `path` and bring memory's tables up to date.
    pub fn open(path: &Path) -> Result<Sqlite, RecallError> {
        let mut writer = open_conn(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        // Memory's migrations (core blocks, then these recall tables), in one transaction.
        crate::schema::migrate(&mut writer)?;
        Ok(Sqlite {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
        })
    }

    fn db_err(&self) -> impl Fn(rusqlite::Error) -> RecallError + '_ {
        move |source| RecallError::Db {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Run `f` on a pooled read-only connection.
    fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, RecallError> {
        let pooled = self.readers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match pooled {
            Some(c) => c,
            None => open_conn(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)?,
        };
        let out = f(&conn).map_err(self.db_err());
        self.readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
        out
    }

    /// Run `f` in one transaction on the writing connection (`BEGIN IMMEDIATE`: the write lock is
    /// taken at the start, so the transaction never fails half-way on a busy file).
    fn write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, RecallError> {
        let mut conn = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(self.db_err())?;
        let out = f(&tx).map_err(self.db_err())?;
        tx.commit().map_err(self.db_err())?;
        Ok(out)
    }

    /// Every stored vector of `model` with its message's namespace and time, in `seq` order:
    /// `(seq, namespace, time, blob)`.
    pub fn stored_vectors(
        &self,
        model: &str,
        mut each: impl FnMut(i64, String, i64, Vec<u8>) -> Result<(), RecallError>,
    ) -> Result<(), RecallError> {
        let conn = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut stmt = conn
            .prepare(
                "SELECT v.seq, m.namespace, m.time_ms, v.vector FROM recall_vectors v
                 JOIN recall_messages m ON m.seq = v.seq WHERE v.model = ?1 ORDER BY v.seq",
            )
            .map_err(self.db_err())?;
        let mut rows = stmt.query([model]).map_err(self.db_err())?;
        while let Some(r) = rows.next().map_err(self.db_err())? {
            let read = || -> rusqlite::Result<(i64, String, i64, Vec<u8>)> {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            };
            let (seq, namespace, time, blob) = read().map_err(self.db_err())?;
            each(seq, namespace, time, blob)?;
        }
        Ok(())
    }

    /// Append `msgs` in one transaction; their sequence numbers.
    pub fn append_all(&self, msgs: &[NewMessage]) -> Result<Vec<i64>, RecallError> {
        self.write(|tx| msgs.iter().map(|m| append_in(tx, m)).collect())
    }

    /// The last sequence number (0 when empty).
    pub fn last_seq(&self) -> Result<i64, RecallError> {
        self.with_reader(|c| {
            c.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM recall_messages",
                [],
                |r| r.get(0),
            )
        })
    }

    /// Up to `limit` messages after `after`, in `seq` order.
    pub fn messages_after(&self, after: i64, limit: i64) -> Result<Vec<Message>, RecallError> {
        self.with_reader(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM recall_messages WHERE seq > ?1 ORDER BY seq LIMIT ?2"
            ))?;
            stmt.query_map(params![after, limit], row_to_message)?
                .collect()
        })
    }

    /// The messages with these seqs (any order), in one query.
    pub fn load(&self, seqs: &[i64]) -> Result<Vec<Message>, RecallError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        // Integers only, so the list is written into the statement (one query instead of one per
        // hit: a search loads up to 200).
        let list = seqs
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        self.with_reader(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM recall_messages WHERE seq IN ({list})"
            ))?;
            stmt.query_map([], row_to_message)?.collect()
        })
    }

    /// For each `(conversation, thread, a, b)`: whether a message of that conversation and thread
    /// lies strictly between `a` and `b`.
    pub fn gaps(&self, pairs: &[super::Pair]) -> Result<Vec<bool>, RecallError> {
        self.with_reader(|c| {
            let mut between = c.prepare_cached(
                "SELECT EXISTS(SELECT 1 FROM recall_messages WHERE conversation = ?1 AND thread IS ?2
                 AND seq > ?3 AND seq < ?4)",
            )?;
            pairs
                .iter()
                .map(|(conversation, thread, a, b)| {
                    between.query_row(params![conversation, thread, a, b], |r| r.get(0))
                })
                .collect()
        })
    }

    /// Store vectors `(seq, blob)` of `model` in one transaction, replacing any there (a row is
    /// embedded again only after an erasure rewrote it).
    pub fn put_vectors(&self, model: &str, rows: &[(i64, Vec<u8>)]) -> Result<(), RecallError> {
        self.write(|tx| {
            let mut put = tx.prepare_cached(
                "INSERT OR REPLACE INTO recall_vectors (seq, model, vector) VALUES (?1, ?2, ?3)",
            )?;
            for (seq, blob) in rows {
                put.execute(params![seq, model, blob])?;
            }
            Ok(())
        })
    }

    /// Recall's embedding generations.
    pub fn generations(&self) -> Result<Vec<Generation>, RecallError> {
        self.with_reader(|c| generation::list_sqlite(c, Store::Recall))
    }

    /// Carry out a plan's bookkeeping (create its generation, drop stale ones), in one transaction.
    pub fn apply_plan(&self, plan: &Plan) -> Result<(), RecallError> {
        let now = opc_migrate::now_ms();
        self.write(|tx| generation::apply_sqlite(tx, Store::Recall, plan, "recall_vectors", now))
    }

    /// Up to `limit` messages after `after` without a vector of `model`, in `seq` order (the
    /// filling generation's work).
    pub fn to_fill(
        &self,
        model: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Message>, RecallError> {
        self.with_reader(|c| {
            let columns = MESSAGE_COLUMNS
                .split(", ")
                .map(|col| format!("m.{col}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {columns} FROM recall_messages m WHERE m.seq > ?1 AND NOT EXISTS
                 (SELECT 1 FROM recall_vectors v WHERE v.seq = m.seq AND v.model = ?2)
                 ORDER BY m.seq LIMIT ?3"
            ))?;
            stmt.query_map(params![after, model, limit], row_to_message)?
                .collect()
        })
    }

    /// Make `model` the active generation if every row has a vector of it, deleting the old
    /// generation's vectors, in one transaction.
    pub fn switch(&self, model: &str) -> Result<Switch, RecallError> {
        self.write(|tx| {
            let lacking: bool = tx.query_row(
                "SELECT EXISTS(SELECT 1 FROM recall_messages m WHERE NOT EXISTS
                 (SELECT 1 FROM recall_vectors v WHERE v.seq = m.seq AND v.model = ?1))",
                [model],
                |r| r.get(0),
            )?;
            if lacking {
                return Ok(Switch::Lacking);
            }
            Ok(
                if generation::switch_sqlite(tx, Store::Recall, model, "recall_vectors")? {
                    Switch::Done
                } else {
                    Switch::NotFilling
                },
            )
        })
    }

    /// The erasures whose indexing is still pending: `(id, pending)` in id order.
    pub fn pending_erasures(&self) -> Result<Vec<(i64, String)>, RecallError> {
        self.with_reader(|c| {
            let mut stmt = c.prepare(
                "SELECT id, pending FROM recall_erasures WHERE pending IS NOT NULL ORDER BY id",
            )?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
    }

    /// Mark the erasures `ids` done, in one transaction.
    pub fn clear_erasures(&self, ids: &[i64]) -> Result<(), RecallError> {
        self.write(|tx| {
            for id in ids {
                tx.execute(
                    "UPDATE recall_erasures SET pending = NULL WHERE id = ?1",
                    [id],
                )?;
            }
            Ok(())
        })
    }
}
