//! Recall memory's SQL on PostgreSQL (`framework.memory.storage: postgres`), over one blocking
//! connection ([`opc_pg::Blocking`]); several nodes may share the database.
//!
//! What differs from SQLite, and why:
//! - Rows are read in commit order ([`super::tail`]), never "after seq N": a sequence is drawn at
//!   insert, so a row with a smaller `seq` may commit later. The engine appends recall rows inside
//!   its own transactions on its own connections (and other nodes append too), so every indexer
//!   follows the table, whoever wrote it.
//! - Vectors are computed once for all nodes: `recall_vectors` is shared. The vector follower
//!   ([`Postgres::follow_vectors`]) loads a row's stored vector when some node embedded it already,
//!   and only a row without one is embedded here; two nodes embedding the same row both succeed
//!   (`ON CONFLICT DO NOTHING`), and the loser takes the winner's vector, so every node holds the
//!   same one. Which rows this node has in memory is its follower's position plus the rows it passed
//!   that nobody had embedded yet ([`Feed::missing`]); both are rebuilt at open, as SQLite's vectors
//!   are loaded at open: the stored vectors are the persistent state.
//! - Each node keeps its own BM25 index directory; its position is that index's commit payload.
//! - A row is read again when a later transaction rewrote it (`opc privacy erase` moves its `xid`,
//!   see `opc_memory::recall::erase::postgres`): BM25 replaces its document by `seq`, the vector
//!   index replaces or drops its vector, so no node keeps what the row said before. A vector computed
//!   from text read before such a rewrite is not stored ([`Postgres::put_vectors`] checks the row's
//!   content hash), so no node adopts it.
//!
//! - Generations ([`super::generation`]): vectors are keyed by (row, model). The follower reads
//!   the vectors of its index's generation only. When a node sees that another generation became
//!   active (some node switched), it follows the table again from the start into a fresh index of
//!   that generation and swaps it in whole ([`Postgres::reset_feed`]). A vector is stored only while
//!   its generation is recorded, so a node that has not seen a switch yet cannot bring back vectors
//!   of the generation the switch deleted.
//!
//! Invariants: every write is one transaction; nothing here takes a lock on a row that another
//! writer waits for, except the `recall_vectors` row two nodes insert at once (the second waits for
//! the first's commit, then does nothing).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, RwLock};

use opc_pg::Blocking;
use opc_pg::postgres::IsolationLevel;

use super::generation::{self, Generation, Plan, Store, Switch};
use super::tail::{self, Position, Window};
use super::vectors::{self, VectorIndex};
use super::{Message, NewMessage, Pair, RecallError};

/// Rows per window when following the table for vectors (no text is read: rows are small).
const FOLLOW_BATCH: i64 = 4096;

/// Store one vector (`$1` seq, `$2` model, `$3` blob) unless the row's text changed since it was
/// read (`$4`, the content hash then; NULL: not checked), its generation is no longer recorded (a
/// switch deleted it), or some node stored it first.
const STORE_VECTOR: &str = "INSERT INTO recall_vectors (seq, model, vector) \
     SELECT $1::BIGINT, $2::TEXT, $3::BYTEA \
     WHERE ($4::text IS NULL OR EXISTS (SELECT 1 FROM recall_messages \
         WHERE seq = $1::BIGINT AND content_hash = $4::text)) \
     AND EXISTS (SELECT 1 FROM memory_embedding_generations WHERE store = 'recall' AND model = $2::TEXT) \
     ON CONFLICT (seq, model) DO NOTHING";

/// Where the vector follower stands.
#[derive(Default)]
struct Feed {
    /// Every row before this position was seen: its stored vector loaded, or its seq in `missing`.
    at: Position,
    /// Rows seen without a stored vector and not embedded here yet.
    missing: BTreeSet<i64>,
    /// The content hash of each row handed out to embed ([`Postgres::to_embed`]) and not stored
    /// yet: its vector is stored only while the row still has that text.
    handed: HashMap<i64, String>,
}

/// Recall's connection to PostgreSQL and the vector follower's state.
pub struct Postgres {
    conn: Blocking,
    feed: Mutex<Feed>,
}

impl Postgres {
    /// Bring memory's tables up to date on `conn` (idempotent; under the migrations' advisory lock,
    /// so nodes starting together migrate once).
    pub fn open(conn: Blocking) -> Result<Postgres, RecallError> {
        conn.migrate(&crate::schema::postgres::COMPONENT)?;
        Ok(Postgres {
            conn,
            feed: Mutex::new(Feed::default()),
        })
    }

    fn feed(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append `msgs` in one transaction; their sequence numbers. Locks nothing but the new rows.
    pub fn append_all(&self, msgs: &[NewMessage]) -> Result<Vec<i64>, RecallError> {
        let msgs = msgs.to_vec();
        Ok(self.conn.run("appending to recall memory", move |c| {
            let mut tx = c.transaction()?;
            let insert = tx.prepare(
                "INSERT INTO recall_messages (namespace, author, conversation, task, thread, \
                 source_id, time_ms, content_hash, text) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 RETURNING seq",
            )?;
            let mut seqs = Vec::with_capacity(msgs.len());
            for m in &msgs {
                let row = tx.query_one(
                    &insert,
                    &[
                        &m.namespace,
                        &m.author,
                        &m.conversation,
                        &m.task,
                        &m.thread,
                        &m.source_id,
                        &m.time_ms,
                        &m.content_hash(),
                        &m.text,
                    ],
                )?;
                seqs.push(row.try_get(0)?);
            }
            tx.commit()?;
            Ok(seqs)
        })?)
    }

    /// The messages committed after `at`, at most `limit`, and the position after them.
    pub fn messages(&self, at: &Position, limit: i64) -> Result<Window<Message>, RecallError> {
        let at = at.clone();
        Ok(self.conn.run("reading new recall rows", move |c| {
            tail::messages(c, &at, limit)
        })?)
    }

    /// The messages with these seqs (any order), in one query.
    pub fn load(&self, seqs: &[i64]) -> Result<Vec<Message>, RecallError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let seqs = seqs.to_vec();
        Ok(self.conn.run("reading recall messages", move |c| {
            let sql = format!(
                "SELECT {} FROM recall_messages m WHERE m.seq = ANY($1)",
                tail::MESSAGE_COLUMNS
            );
            c.query(&sql, &[&seqs])?.iter().map(tail::message).collect()
        })?)
    }

    /// For each `(conversation, thread, a, b)`: whether a message of that conversation and thread
    /// lies strictly between `a` and `b` (one round trip for all of them).
    pub fn gaps(&self, pairs: &[Pair]) -> Result<Vec<bool>, RecallError> {
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let pairs = pairs.to_vec();
        Ok(self.conn.run("reading recall neighbours", move |c| {
            // Two statements rather than `IS NOT DISTINCT FROM`, which the thread index cannot serve.
            let threaded = c.prepare(
                "SELECT EXISTS(SELECT 1 FROM recall_messages WHERE conversation = $1 \
                 AND thread = $2 AND seq > $3 AND seq < $4)",
            )?;
            let unthreaded = c.prepare(
                "SELECT EXISTS(SELECT 1 FROM recall_messages WHERE conversation = $1 \
                 AND thread IS NULL AND seq > $2 AND seq < $3)",
            )?;
            pairs
                .iter()
                .map(|(conversation, thread, a, b)| {
                    let row = match thread {
                        Some(t) => c.query_one(&threaded, &[conversation, t, a, b])?,
                        None => c.query_one(&unthreaded, &[conversation, a, b])?,
                    };
                    row.try_get(0)
                })
                .collect()
        })?)
    }

    /// Follow the table from the vector follower's position to the horizon: push every stored
    /// vector into `index` and remember the rows without one. The rows pushed.
    pub fn follow_vectors(&self, index: &RwLock<VectorIndex>) -> Result<usize, RecallError> {
        let model = index
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .model
            .clone();
        if model.is_empty() {
            return Ok(0);
        }
        let mut feed = self.feed();
        let mut loaded = 0;
        loop {
            let at = feed.at.clone();
            let m = model.clone();
            let window = self.conn.run("reading recall vectors", move |c| {
                tail::vector_rows(c, &at, FOLLOW_BATCH, &m)
            })?;
            let full = window.rows.len() as i64 >= FOLLOW_BATCH;
            {
                let mut index = index.write().unwrap_or_else(|e| e.into_inner());
                for row in &window.rows {
                    match row.vector.as_deref().and_then(vectors::from_blob) {
                        Some(v) => {
                            index.push(row.seq, &row.namespace, row.time_ms, &v)?;
                            loaded += 1;
                        }
                        None => {
                            // Read again without a vector (rewritten by an erasure): the vector
                            // of its old text goes, and the row is embedded again.
                            index.remove(row.seq);
                            feed.missing.insert(row.seq);
                        }
                    }
                }
            }
            feed.at = window.next;
            if !full {
                return Ok(loaded);
            }
        }
    }

    /// Up to `limit` rows still to embed, oldest first; rows some node embedded meanwhile are pushed
    /// into `index` from the table instead (and are not returned). Empty: nothing is missing.
    pub fn to_embed(
        &self,
        limit: usize,
        index: &RwLock<VectorIndex>,
    ) -> Result<Vec<Message>, RecallError> {
        let model = index
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .model
            .clone();
        loop {
            let seqs: Vec<i64> = self.feed().missing.iter().take(limit).copied().collect();
            if seqs.is_empty() {
                return Ok(Vec::new());
            }
            let wanted = seqs.clone();
            let model = model.clone();
            let (messages, stored) = self.conn.run("reading recall rows to embed", move |c| {
                let mut tx = c
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()?;
                let sql = format!(
                    "SELECT {}, v.vector FROM recall_messages m \
                     LEFT JOIN recall_vectors v ON v.seq = m.seq AND v.model = $2 \
                     WHERE m.seq = ANY($1) ORDER BY m.seq",
                    tail::MESSAGE_COLUMNS
                );
                let mut messages = Vec::new();
                let mut stored = Vec::new();
                for r in tx.query(&sql, &[&wanted, &model])? {
                    let m = tail::message(&r)?;
                    match r.try_get::<_, Option<Vec<u8>>>(10)? {
                        Some(blob) => stored.push((m, blob)),
                        None => messages.push(m),
                    }
                }
                tx.commit()?;
                Ok((messages, stored))
            })?;
            let mut feed = self.feed();
            {
                let mut index = index.write().unwrap_or_else(|e| e.into_inner());
                for (m, blob) in &stored {
                    if let Some(v) = vectors::from_blob(blob) {
                        index.push(m.seq, &m.namespace, m.time_ms, &v)?;
                    }
                }
            }
            // Adopted rows, and any seq that did not come back (the table is append-only, so none
            // should), are done; the rest stay missing until embedded.
            let pending: BTreeSet<i64> = messages.iter().map(|m| m.seq).collect();
            for seq in &seqs {
                if !pending.contains(seq) {
                    feed.missing.remove(seq);
                }
            }
            for m in &messages {
                feed.handed.insert(m.seq, m.content_hash.clone());
            }
            if !messages.is_empty() {
                return Ok(messages);
            }
        }
    }

    /// Store the vectors `(seq, blob)` this node computed, in one transaction; a row another node
    /// stored first is kept as it is (`ON CONFLICT DO NOTHING`: the insert waits for that node's
    /// commit, then does nothing). Returns the stored vectors of those rows, for the caller to use in
    /// place of its own. A row whose text changed since [`Self::to_embed`] read it (an erasure
    /// committed meanwhile) gets no vector: the vector is of the old text; the follower reads the
    /// row again and it is embedded anew.
    pub fn put_vectors(
        &self,
        model: &str,
        rows: Vec<(i64, Vec<u8>)>,
    ) -> Result<HashMap<i64, Vec<u8>>, RecallError> {
        let model = model.to_string();
        let hashes: Vec<Option<String>> = {
            let mut feed = self.feed();
            rows.iter()
                .map(|(seq, _)| feed.handed.remove(seq))
                .collect()
        };
        Ok(self.conn.run("storing recall vectors", move |c| {
            let mut tx = c.transaction()?;
            let insert = tx.prepare(STORE_VECTOR)?;
            let mut taken = Vec::new();
            for ((seq, blob), hash) in rows.iter().zip(&hashes) {
                if tx.execute(&insert, &[seq, &model, blob, hash])? == 0 {
                    taken.push(*seq);
                }
            }
            let mut theirs = HashMap::new();
            if !taken.is_empty() {
                for r in tx.query(
                    "SELECT seq, vector FROM recall_vectors WHERE seq = ANY($1) AND model = $2",
                    &[&taken, &model],
                )? {
                    theirs.insert(r.try_get(0)?, r.try_get(1)?);
                }
            }
            tx.commit()?;
            Ok(theirs)
        })?)
    }

    /// The rows `seqs` are in the vector index now.
    pub fn embedded(&self, seqs: impl IntoIterator<Item = i64>) {
        let mut feed = self.feed();
        for seq in seqs {
            feed.missing.remove(&seq);
        }
    }

    /// Store vectors `(seq, blob)` of `model` in one transaction, replacing any there (an erasure
    /// rewrote the rows' text). Locks those `recall_vectors` rows.
    pub fn replace_vectors(
        &self,
        model: &str,
        rows: Vec<(i64, Vec<u8>)>,
    ) -> Result<(), RecallError> {
        let model = model.to_string();
        Ok(self.conn.run("storing recall vectors", move |c| {
            let mut tx = c.transaction()?;
            let put = tx.prepare(
                "INSERT INTO recall_vectors (seq, model, vector) VALUES ($1, $2, $3) \
                 ON CONFLICT (seq, model) DO UPDATE SET vector = EXCLUDED.vector",
            )?;
            for (seq, blob) in &rows {
                tx.execute(&put, &[seq, &model, blob])?;
            }
            tx.commit()
        })?)
    }

    /// (BM25 cursor, vector cursor, last seq) as [`super::RecallStore::cursors`] reports them: an
    /// index's cursor is the largest seq below which every committed row is indexed (one less than
    /// the first committed row it has still to take), all read in one snapshot. `bm25` is the BM25
    /// index's position.
    pub fn cursors(&self, bm25: Position) -> Result<(i64, i64, i64), RecallError> {
        let (vector_at, vector_missing) = {
            let feed = self.feed();
            (feed.at.clone(), feed.missing.first().copied())
        };
        let (last, bm25_first, vector_first) =
            self.conn.run("reading the recall cursors", move |c| {
                let mut tx = c
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()?;
                let last: i64 = tx
                    .query_one("SELECT COALESCE(MAX(seq), 0) FROM recall_messages", &[])?
                    .try_get(0)?;
                let bm25_first = tail::first_after(&mut tx, &bm25)?;
                let vector_first = tail::first_after(&mut tx, &vector_at)?;
                tx.commit()?;
                Ok((last, bm25_first, vector_first))
            })?;
        let cursor = |first: Option<i64>| first.map_or(last, |s| s - 1);
        let vector_first = [vector_first, vector_missing].into_iter().flatten().min();
        Ok((cursor(bm25_first), cursor(vector_first), last))
    }

    /// Forget where the vector follower stands (the index is replaced by one of another
    /// generation, which follows the table from the start).
    pub fn reset_feed(&self) {
        *self.feed() = Feed::default();
    }

    /// Recall's embedding generations.
    pub fn generations(&self) -> Result<Vec<Generation>, RecallError> {
        Ok(self.conn.run("reading embedding generations", |c| {
            generation::list_pg(c, Store::Recall)
        })?)
    }

    /// Carry out a plan's bookkeeping (create its generation, drop stale ones), in one transaction.
    pub fn apply_plan(&self, plan: &Plan) -> Result<(), RecallError> {
        let plan = plan.clone();
        let now = opc_migrate::now_ms();
        Ok(self.conn.run("recording embedding generations", move |c| {
            generation::apply_pg(c, Store::Recall, &plan, "recall_vectors", now)
        })?)
    }

    /// Up to `limit` committed messages after seq `after` without a vector of `model`, in `seq`
    /// order (the filling generation's work; a row that commits behind the filler is found by the
    /// switch's check, which sends the filler round again).
    pub fn to_fill(
        &self,
        model: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Message>, RecallError> {
        let model = model.to_string();
        Ok(self.conn.run("reading recall rows to re-embed", move |c| {
            let sql = format!(
                "SELECT {} FROM recall_messages m WHERE m.seq > $1 AND NOT EXISTS \
                 (SELECT 1 FROM recall_vectors v WHERE v.seq = m.seq AND v.model = $2) \
                 ORDER BY m.seq LIMIT $3",
                tail::MESSAGE_COLUMNS
            );
            c.query(&sql, &[&after, &model, &limit])?
                .iter()
                .map(tail::message)
                .collect()
        })?)
    }

    /// Store vectors `(seq, blob, content hash read with the text)` of the filling generation
    /// `model`, in one transaction; a row rewritten since (another hash) or embedded by another node
    /// first is left as it is.
    pub fn put_filled(
        &self,
        model: &str,
        rows: Vec<(i64, Vec<u8>, String)>,
    ) -> Result<(), RecallError> {
        let model = model.to_string();
        self.conn
            .run("storing re-embedded recall vectors", move |c| {
                let mut tx = c.transaction()?;
                let insert = tx.prepare(STORE_VECTOR)?;
                for (seq, blob, hash) in &rows {
                    tx.execute(&insert, &[seq, &model, blob, &Some(hash.as_str())])?;
                }
                tx.commit()
            })?;
        Ok(())
    }

    /// Make `model` the active generation if every committed row has a vector of it, deleting the
    /// old generation's vectors, in one transaction (the generation rows locked first: two nodes
    /// switch once).
    pub fn switch(&self, model: &str) -> Result<Switch, RecallError> {
        let model = model.to_string();
        Ok(self
            .conn
            .run("switching the recall embedding generation", move |c| {
                let mut tx = c.transaction()?;
                let lacking: bool = tx
                    .query_one(
                        "SELECT EXISTS(SELECT 1 FROM recall_messages m WHERE NOT EXISTS \
                     (SELECT 1 FROM recall_vectors v WHERE v.seq = m.seq AND v.model = $1))",
                        &[&model],
                    )?
                    .try_get(0)?;
                if lacking {
                    tx.rollback()?;
                    return Ok(Switch::Lacking);
                }
                let done = generation::switch_pg(&mut tx, Store::Recall, &model, "recall_vectors")?;
                tx.commit()?;
                Ok(if done {
                    Switch::Done
                } else {
                    Switch::NotFilling
                })
            })?)
    }

    /// The erasures whose indexing is still pending: `(id, pending)` in id order.
    pub fn pending_erasures(&self) -> Result<Vec<(i64, String)>, RecallError> {
        Ok(self.conn.run("reading pending recall erasures", |c| {
            c.query(
                "SELECT id, pending FROM recall_erasures WHERE pending IS NOT NULL ORDER BY id",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
        })?)
    }

    /// Mark the erasures `ids` done, in one statement (locks those `recall_erasures` rows).
    pub fn clear_erasures(&self, ids: &[i64]) -> Result<(), RecallError> {
        let ids = ids.to_vec();
        self.conn.run("finishing recall erasures", move |c| {
            c.execute(
                "UPDATE recall_erasures SET pending = NULL WHERE id = ANY($1)",
                &[&ids],
            )
        })?;
        Ok(())
    }
}
