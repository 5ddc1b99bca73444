//! # Recall memory: every message, searchable by BM25 and by meaning
//!
//! Role: append messages with provenance to the database (the truth: the engine's SQLite file, or
//! PostgreSQL shared by every node), keep two derived indexes — tantivy BM25 in a directory of this
//! node's (`<db>.index/` beside a SQLite file) and MiniLM vectors (stored in the database, searched in
//! memory) — and answer searches filtered to the namespaces an agent may read (the caller passes the
//! ACL's answer).
//!
//! Map: this file is the store (its API and everything both backends share: indexing, embedding,
//! search, fusion); `sqlite.rs` and `postgres.rs` hold each backend's SQL, `tail.rs` PostgreSQL's
//! commit-order cursor; [`bm25`] and [`vectors`] the two indexes; [`erase`] erasure.
//!
//! Invariants (and why):
//! - The database is the truth; both indexes are derived and catch up from their own cursor, so a
//!   crash between a row and its indexing loses nothing: on the next start the indexer resumes after
//!   the cursor. On SQLite a cursor is a `seq` (one writer: rows commit in `seq` order); on PostgreSQL
//!   it is a position in commit order (`tail`), since there a row with a smaller `seq` may commit
//!   later. The BM25 cursor is the index's commit payload; the vectors' is rebuilt at open from the
//!   stored vectors.
//! - A write is one transaction that assigns the sequence number (the outbox is the range of rows
//!   after an indexer's cursor, see [`crate::schema::recall`]).
//! - Search never takes the writer's lock: it reads tantivy through its own reader, the vectors
//!   through a read lock, and the database through a read-only connection (SQLite) or the one
//!   connection, between the indexer's short statements (PostgreSQL).
//! - Embedding is slow (~100 sentences/s), so it runs in the background indexer; messages not yet
//!   embedded are still found by BM25, and until the model has loaded every search is BM25 only.
//!   On PostgreSQL a row is embedded once for all nodes: a vector another node stored is loaded.
//! - Vectors come in generations, one per embedder model ([`generation`]): the in-memory index
//!   holds the ACTIVE generation's vectors only and a query is embedded by that generation's
//!   embedder (the slot's configured one, or its previous one while a new generation fills), so
//!   a query is never compared with vectors of another model. When the configured embedder is
//!   another model, the indexer fills its generation in the background (rows in the embedder's
//!   preferred batches, a round at a time between the active generation's rounds); when every row
//!   has a new vector it switches in one transaction, deletes the old vectors, and swaps the
//!   in-memory index whole. Without the previous embedder the vector half of search is off until
//!   the switch (keywords only, said once in the log).
//! - An embedder that fails (`EmbedError::Unavailable`: an endpoint down) never loses a row: rows
//!   stay without a vector and the indexer retries with backoff (doubling up to
//!   [`MAX_BACKOFF`], one warning per failing episode) while BM25 indexing goes on at once;
//!   searches skip the query embedding while the embedder is known to be down (keywords only), so
//!   an answer never waits on it.

pub mod bm25;
pub mod date;
pub mod erase;
pub mod eval;
pub mod fusion;
pub mod generation;
pub mod message;
mod postgres;
mod sqlite;
mod tail;
pub mod vectors;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use fusion::Fusion;
pub use message::{Hit, Message, NewMessage};
pub use sqlite::append_in;

use crate::embed::{EmbedSlot, Embedder};
use bm25::Bm25;
use generation::{Generation, Switch};
use postgres::Postgres;
use sqlite::Sqlite;
use tail::Position;
use vectors::VectorIndex;

/// Rows indexed by BM25 per commit.
const BM25_BATCH: i64 = 2000;
/// Rows read, embedded and written per round (one transaction). Large, so that sorting a round by
/// length puts texts of similar length together (little padding) and a busy store pays one write
/// transaction per few hundred rows, not per few.
const EMBED_BATCH: i64 = 256;
/// The embedder sees at most this many bytes of a text. MiniLM keeps its first 256 word pieces; a piece
/// covers at most ~20 bytes of text and its separator, so 8 KiB always holds them all and the vector
/// is the same as for the whole text, while a 1 MB tool output no longer goes through the tokenizer.
const EMBED_TEXT_BYTES: usize = 8 * 1024;
/// Bound on one embedding call's attention work, in texts × (estimated pieces)²: the attention
/// scores of a call are texts × 12 heads × pieces² floats per layer. 2¹⁹ keeps that at 24 MB (eight
/// full-length texts, or thirty-two of 128 pieces) where a call of 32 texts of 256 pieces held 400 MB
/// of temporaries and drove the process's RSS up and down by that much while the store caught up.
const EMBED_ATTENTION_BUDGET: usize = 1 << 19;
/// Texts per embedding call at most for the local model (a remote embedder's calls take its own
/// [`Embedder::batch_size`]).
const EMBED_GROUP: usize = 32;
/// How often the background indexer looks for work when nobody woke it (a missed wake-up costs at
/// most this much delay).
const IDLE_POLL: Duration = Duration::from_secs(2);
/// The longest wait between two attempts of an embedder that keeps failing (the wait doubles from
/// [`IDLE_POLL`] up to this).
pub const MAX_BACKOFF: Duration = Duration::from_secs(120);
/// How long searches skip the query embedding after an embedder failed (the indexer's next success
/// lifts it sooner).
const DOWN_FOR: Duration = Duration::from_secs(30);

/// What went wrong in recall memory.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// SQLite failed.
    #[error("recall database {path}: {source}")]
    Db {
        /// The database file.
        path: String,
        /// The error.
        source: rusqlite::Error,
    },
    /// The search index failed.
    #[error(
        "recall search index: {0}; it is derived from the database: delete the `.index` directory beside it to rebuild"
    )]
    Index(String),
    /// Another process holds the index's writer lock (it is the one indexing this database). Searches
    /// still work, over what that process has indexed.
    #[error(
        "recall search index: another process is indexing this database (is `opc run` running on it?)"
    )]
    IndexBusy,
    /// Embedding failed.
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    /// A filesystem error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// The caller asked for something impossible.
    #[error("{0}")]
    Invalid(String),
    /// The memory tables could not be brought up to date.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
    /// PostgreSQL failed (the database is named as `host:port/name`, never by its URL).
    #[error("recall memory: {0}")]
    Postgres(#[from] opc_pg::PgError),
    /// Memory's PostgreSQL tables could not be brought up to date.
    #[error("recall memory: {0}")]
    PgSchema(#[from] opc_pg::PgMigrateError),
}

/// Which lists a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    /// Keywords only.
    Bm25,
    /// Meaning only (falls back to BM25 while the model is not loaded).
    Vector,
    /// Both, fused.
    Hybrid,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "bm25" => Ok(Mode::Bm25),
            "vector" => Ok(Mode::Vector),
            "hybrid" => Ok(Mode::Hybrid),
            other => Err(format!(
                "unknown search mode {other:?}: use bm25, vector or hybrid"
            )),
        }
    }
}

/// A search request.
#[derive(Debug, Clone)]
pub struct Query {
    /// The words.
    pub text: String,
    /// Namespaces the asking agent may read (from the ACL). Empty finds nothing.
    pub namespaces: Vec<String>,
    /// Inclusive time range in ms; `(i64::MIN, i64::MAX)` for all time.
    pub range: (i64, i64),
    /// Which lists.
    pub mode: Mode,
    /// How many hits.
    pub limit: usize,
    /// Tuning (defaults chosen on LoCoMo, see docs/memory.md).
    pub tuning: Tuning,
    /// The query's vector, when the caller has embedded it already (batch evaluation); else the
    /// store embeds `text`.
    pub vector: Option<Vec<f32>>,
}

/// Knobs of a search; [`Tuning::default`] is the best measured on three LoCoMo dev conversations and
/// checked on the other two (weighted fusion beat RRF by 11 points of R@10 once the neighbour boost is
/// on; 0.3 vector / 0.7 BM25, 200 candidates a list and the author boost added 1.8 on the tuned
/// conversations and 1.9 on the held-out ones; see docs/memory.md).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Tuning {
    /// How the lists are fused in [`Mode::Hybrid`].
    pub fusion: Fusion,
    /// Candidates taken from each list before fusing.
    pub pool: usize,
    /// Neighbour boost factor (0 turns it off).
    pub neighbour: f32,
    /// Drop question stop words from the BM25 query.
    pub drop_stop_words: bool,
    /// Added to a message whose author the query names ([`fusion::author_boost`]; 0 turns it off).
    pub author: f32,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            fusion: Fusion::Weighted { vector: 0.3 },
            pool: 200,
            neighbour: 0.5,
            drop_stop_words: true,
            author: 0.2,
        }
    }
}

impl Query {
    /// A search over `namespaces` for `text`, all time, default tuning.
    pub fn new(text: impl Into<String>, namespaces: Vec<String>, mode: Mode, limit: usize) -> Self {
        Self {
            text: text.into(),
            namespaces,
            range: (i64::MIN, i64::MAX),
            mode,
            limit,
            tuning: Tuning::default(),
            vector: None,
        }
    }
}

/// Where the truth is kept.
enum Backend {
    /// The engine's SQLite file.
    Sqlite(Sqlite),
    /// PostgreSQL, shared by every node.
    Postgres(Postgres),
}

struct Inner {
    backend: Backend,
    bm25: Bm25,
    /// The BM25 writer; held only by an indexer (catch-up), never by a search.
    index_writer: Mutex<Option<tantivy::IndexWriter>>,
    vectors: RwLock<VectorIndex>,
    /// Held by the vector half of a catch-up: two at once would embed the same rows and push them
    /// into the index twice.
    embedding: Mutex<()>,
    slot: EmbedSlot,
    /// Set when there may be work for the indexer.
    wake: (Mutex<bool>, Condvar),
    /// The filling generation's cursor: `(model, seq)` — every row up to `seq` has a vector of
    /// `model`, or had when passed (the switch's check catches a row that lost it since).
    fill: Mutex<(String, i64)>,
    /// Embedders (by model id) that failed recently, until when: searches do not wait on them.
    down: Mutex<HashMap<String, Instant>>,
    /// Said once: the vector half of search is off (the active generation's embedder is missing).
    said_off: AtomicBool,
}

/// Recall memory over one database (a SQLite file, or PostgreSQL); cheap to clone, shareable across
/// threads.
#[derive(Clone)]
pub struct RecallStore {
    inner: Arc<Inner>,
}

/// How far a catch-up got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Rows added to the BM25 index.
    pub indexed: usize,
    /// Rows embedded.
    pub embedded: usize,
}

/// A pair of messages of one conversation and thread, for the neighbour boost: `(conversation,
/// thread, earlier seq, later seq)`.
type Pair = (String, Option<String>, i64, i64);

impl RecallStore {
    /// Open (creating when needed) recall memory in the SQLite file `db_path`, with its BM25 index in
    /// `<db_path>.index/`. Loads the stored vectors into memory; does not index (call
    /// [`Self::catch_up`] or [`Self::spawn_indexer`]). `slot` receives the embedder when it loads.
    pub fn open(db_path: &Path, slot: EmbedSlot) -> Result<Self, RecallError> {
        let db = Sqlite::open(db_path)?;
        let mut index_dir = db_path.as_os_str().to_owned();
        index_dir.push(".index");
        let bm25 = Bm25::open(Path::new(&index_dir))?;
        let active = active_model(&db.generations()?);
        let vectors = load_sqlite(&db, &active)?;
        Ok(Self::assemble(Backend::Sqlite(db), bm25, vectors, slot))
    }

    /// Open recall memory in PostgreSQL over `conn` (applying memory's migrations), with this node's
    /// BM25 index in `index_dir` (each node keeps its own; the database is shared). Loads the stored
    /// vectors into memory; does not index (call [`Self::catch_up`] or [`Self::spawn_indexer`]).
    /// `slot` receives the embedder when it loads. The indexer finds rows whoever wrote them: this
    /// store, the engine's transactions, other nodes.
    pub fn open_postgres(
        conn: opc_pg::Blocking,
        index_dir: &Path,
        slot: EmbedSlot,
    ) -> Result<Self, RecallError> {
        let db = Postgres::open(conn)?;
        let bm25 = Bm25::open(index_dir)?;
        let vectors = RwLock::new(VectorIndex::new(&active_model(&db.generations()?)));
        db.follow_vectors(&vectors)?;
        Ok(Self::assemble(Backend::Postgres(db), bm25, vectors, slot))
    }

    fn assemble(
        backend: Backend,
        bm25: Bm25,
        vectors: RwLock<VectorIndex>,
        slot: EmbedSlot,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                backend,
                bm25,
                // Taken by the first catch-up: a process that only searches never locks the index.
                index_writer: Mutex::new(None),
                vectors,
                embedding: Mutex::new(()),
                slot,
                wake: (Mutex::new(false), Condvar::new()),
                fill: Mutex::new((String::new(), 0)),
                down: Mutex::new(HashMap::new()),
                said_off: AtomicBool::new(false),
            }),
        }
    }

    /// Append one message (one transaction); its sequence number. Wakes the indexer.
    pub fn append(&self, msg: &NewMessage) -> Result<i64, RecallError> {
        let seqs = self.append_all(std::slice::from_ref(msg))?;
        seqs.first()
            .copied()
            .ok_or_else(|| RecallError::Invalid("the append returned no sequence number".into()))
    }

    /// Append many messages in one transaction; their sequence numbers. Wakes the indexer.
    pub fn append_all(&self, msgs: &[NewMessage]) -> Result<Vec<i64>, RecallError> {
        let seqs = match &self.inner.backend {
            Backend::Sqlite(db) => db.append_all(msgs)?,
            Backend::Postgres(db) => db.append_all(msgs)?,
        };
        self.notify();
        Ok(seqs)
    }

    /// Tell the indexer there is work (after an [`append_in`] on another connection, or a row the
    /// engine appended to PostgreSQL).
    pub fn notify(&self) {
        let (flag, cv) = &self.inner.wake;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// Whether vectors can be searched (the active generation's embedder has loaded).
    pub fn vectors_ready(&self) -> bool {
        self.query_embedder().is_some()
    }

    /// The embedder whose vectors the index holds (the active generation's), when loaded: the one
    /// a caller must embed a [`Query::vector`] with.
    pub fn query_embedder(&self) -> Option<Arc<dyn Embedder>> {
        let model = self
            .inner
            .vectors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .model
            .clone();
        if model.is_empty() {
            // No vectors yet: the configured embedder starts the first generation.
            return self.inner.slot.get().cloned();
        }
        self.inner.slot.for_model(&model)
    }

    /// Recall's embedding generations as recorded (the active one, and one filling when the
    /// configured embedder changed), so a start-up can rebuild the previous embedder
    /// ([`EmbedSlot::set_previous`]).
    pub fn embedding_generations(&self) -> Result<Vec<Generation>, RecallError> {
        match &self.inner.backend {
            Backend::Sqlite(db) => db.generations(),
            Backend::Postgres(db) => db.generations(),
        }
    }

    /// The generation the in-memory index holds (empty: none yet).
    pub fn active_generation(&self) -> String {
        self.inner
            .vectors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .model
            .clone()
    }

    /// (BM25 cursor, vector cursor, last seq): how far each index is behind the truth. An index is
    /// caught up when its cursor is the last seq. On PostgreSQL a cursor is the largest seq below
    /// which every committed row is in that index (rows commit out of `seq` order there, so a cursor
    /// steps back when a row with a smaller seq commits after a larger one was indexed).
    pub fn cursors(&self) -> Result<(i64, i64, i64), RecallError> {
        match &self.inner.backend {
            Backend::Sqlite(db) => {
                let last = db.last_seq()?;
                let vec = self
                    .inner
                    .vectors
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .cursor;
                Ok((self.inner.bm25.cursor()?, vec, last))
            }
            Backend::Postgres(db) => db.cursors(self.bm25_position()?),
        }
    }

    /// PostgreSQL: the BM25 index's position in commit order (its commit payload).
    fn bm25_position(&self) -> Result<Position, RecallError> {
        Ok(Position::from_payload(
            self.inner.bm25.payload()?.as_deref(),
        ))
    }

    /// Bring both indexes up to the last row: BM25 first (cheap), then vectors when the embedder is
    /// loaded. `stop` is checked between batches. The background indexer calls this; tests and the
    /// eval call it directly.
    pub fn catch_up(&self, stop: &AtomicBool) -> Result<CatchUp, RecallError> {
        let mut done = CatchUp {
            indexed: self.catch_up_bm25(stop)?,
            embedded: 0,
        };
        done.embedded = self.catch_up_vectors(stop)?;
        Ok(done)
    }

    /// The BM25 half of [`Self::catch_up`]: batches after the index's cursor, each committed with the
    /// cursor after it. The rows indexed.
    fn catch_up_bm25(&self, stop: &AtomicBool) -> Result<usize, RecallError> {
        let mut indexed = 0;
        let mut writer = self
            .inner
            .index_writer
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if writer.is_none() {
            *writer = Some(self.inner.bm25.writer()?);
        }
        let Some(writer) = writer.as_mut() else {
            return Ok(indexed);
        };
        let bm25 = &self.inner.bm25;
        loop {
            let added = match &self.inner.backend {
                Backend::Sqlite(db) => {
                    let batch = db.messages_after(bm25.cursor()?, BM25_BATCH)?;
                    if batch.is_empty() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    bm25.add(writer, &batch)?;
                    batch.len()
                }
                Backend::Postgres(db) => {
                    let window = db.messages(&self.bm25_position()?, BM25_BATCH)?;
                    // An empty window moves nothing worth a commit: the rows between the stored
                    // position and the horizon it reached are none, and reading them again is free.
                    if window.rows.is_empty() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    bm25.add_at(writer, &window.rows, &window.next.to_payload())?;
                    window.rows.len()
                }
            };
            indexed += added;
        }
        Ok(indexed)
    }

    /// The vector half of [`Self::catch_up`]: follow the generations on disk (create the first,
    /// start filling a new one, swap the index when another process switched), on PostgreSQL load
    /// the vectors other nodes stored, then alternate rounds of the active generation (rows without
    /// a vector, embedded by its own embedder when loaded) and of the filling one (switching when
    /// it is complete) until neither has work. The rows embedded here. An embedder's failure is
    /// returned after the other generation's round ran; no row is marked done without its vector.
    fn catch_up_vectors(&self, stop: &AtomicBool) -> Result<usize, RecallError> {
        let _one = self
            .inner
            .embedding
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let plan = self.plan()?;
        self.follow_generation(plan.active.as_deref().unwrap_or(""))?;
        if let Backend::Postgres(db) = &self.inner.backend {
            db.follow_vectors(&self.inner.vectors)?;
        }
        let active = plan
            .active
            .as_deref()
            .and_then(|m| self.inner.slot.for_model(m));
        let filling = plan
            .filling
            .as_deref()
            .and_then(|m| self.inner.slot.for_model(m));
        // An embedder searches skip as down is tried once with a probe (searches may use it again
        // at once when it answers, though no row is waiting for it).
        for model in active.iter().chain(&filling) {
            if self.is_down(model.model_id()) {
                self.embed_checked(model.as_ref(), &[], &["probe".to_string()])?;
            }
        }
        let mut embedded = 0;
        let mut failed: Option<RecallError> = None;
        let (mut active_open, mut filling_open) = (active.is_some(), filling.is_some());
        while (active_open || filling_open) && !stop.load(Ordering::Relaxed) {
            if let (true, Some(model)) = (active_open, &active) {
                match self.active_round(model.as_ref()) {
                    Ok(0) => active_open = false,
                    Ok(n) => embedded += n,
                    Err(e) => {
                        active_open = false;
                        failed.get_or_insert(e);
                    }
                }
            }
            if let (true, Some(model)) = (filling_open, &filling) {
                match self.fill_round(model.as_ref()) {
                    Ok(Fill::Embedded(n)) => embedded += n,
                    Ok(Fill::Idle) => filling_open = false,
                    // The index holds the new generation now: no round of the old embedder
                    // follows (it would push its vectors into the new index).
                    Ok(Fill::Switched) => break,
                    Err(e) => {
                        filling_open = false;
                        failed.get_or_insert(e);
                    }
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(embedded),
        }
    }

    /// The generations on disk and what to do about them, with the bookkeeping done (the first
    /// generation created, a new one started, abandoned ones dropped).
    fn plan(&self) -> Result<generation::Plan, RecallError> {
        let configured = self
            .inner
            .slot
            .get()
            .map(|m| (m.model_id().to_string(), m.descriptor().to_string()));
        let plan_of = |gens: &[Generation]| {
            generation::plan(
                gens,
                configured.as_ref().map(|(m, d)| (m.as_str(), d.clone())),
            )
        };
        let plan = plan_of(&self.embedding_generations()?);
        if plan.create.is_none() && plan.stale.is_empty() {
            return Ok(plan);
        }
        match &self.inner.backend {
            Backend::Sqlite(db) => db.apply_plan(&plan)?,
            Backend::Postgres(db) => db.apply_plan(&plan)?,
        }
        if let Some((model, _, generation::GenerationState::Filling)) = &plan.create {
            tracing::info!(
                from = plan.active.as_deref().unwrap_or(""),
                to = %model,
                "recall memory: the embedding model changed; re-embedding every message in the background (searches keep the current vectors until it is complete)"
            );
        }
        // Read again: another node may have raced this one (its generation stands).
        Ok(plan_of(&self.embedding_generations()?))
    }

    /// Make the in-memory index hold generation `active` (another process or node switched, or
    /// the first generation was just created): built off to the side from the stored vectors, then
    /// swapped in whole, so a search sees the old generation or the new one, never a mix.
    fn follow_generation(&self, active: &str) -> Result<(), RecallError> {
        let held = self
            .inner
            .vectors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .model
            .clone();
        if held == active {
            return Ok(());
        }
        let fresh = match &self.inner.backend {
            Backend::Sqlite(db) => load_sqlite(db, active)?,
            Backend::Postgres(db) => {
                db.reset_feed();
                let fresh = RwLock::new(VectorIndex::new(active));
                db.follow_vectors(&fresh)?;
                fresh
            }
        };
        let fresh = fresh.into_inner().unwrap_or_else(|e| e.into_inner());
        *self
            .inner
            .vectors
            .write()
            .unwrap_or_else(|e| e.into_inner()) = fresh;
        self.inner.said_off.store(false, Ordering::Relaxed);
        if !held.is_empty() {
            tracing::info!(from = %held, to = %active, "recall memory: now searching the new embedding generation");
        }
        Ok(())
    }

    /// One round of the active generation: the next rows without its vector, embedded by `model`
    /// and stored (one transaction), then pushed into the index. The rows embedded (0: none left).
    fn active_round(&self, model: &dyn Embedder) -> Result<usize, RecallError> {
        let batch = match &self.inner.backend {
            Backend::Sqlite(db) => {
                let cursor = self
                    .inner
                    .vectors
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .cursor;
                db.messages_after(cursor, embed_rows(model))?
            }
            Backend::Postgres(db) => {
                db.to_embed(embed_rows(model) as usize, &self.inner.vectors)?
            }
        };
        if batch.is_empty() {
            return Ok(0);
        }
        let texts: Vec<String> = batch.iter().map(embedded_text).collect();
        let mut vecs = self.embed_checked(model, &batch, &texts)?;
        let rows: Vec<(i64, Vec<u8>)> = batch
            .iter()
            .zip(&vecs)
            .map(|(m, v)| (m.seq, vectors::to_blob(v)))
            .collect();
        match &self.inner.backend {
            Backend::Sqlite(db) => db.put_vectors(model.model_id(), &rows)?,
            Backend::Postgres(db) => {
                // Rows another node embedded first keep its vector, here as in the table.
                let theirs = db.put_vectors(model.model_id(), rows)?;
                for (m, v) in batch.iter().zip(vecs.iter_mut()) {
                    if let Some(stored) = theirs.get(&m.seq).and_then(|b| vectors::from_blob(b)) {
                        *v = stored;
                    }
                }
            }
        }
        {
            let mut index = self
                .inner
                .vectors
                .write()
                .unwrap_or_else(|e| e.into_inner());
            for (m, v) in batch.iter().zip(&vecs) {
                index.push(m.seq, &m.namespace, m.time_ms, v)?;
            }
        }
        if let Backend::Postgres(db) = &self.inner.backend {
            db.embedded(batch.iter().map(|m| m.seq));
        }
        Ok(batch.len())
    }

    /// One round of the filling generation (`model`'s): the next rows without its vector, embedded
    /// and stored; when none is left, the switch.
    fn fill_round(&self, model: &dyn Embedder) -> Result<Fill, RecallError> {
        let id = model.model_id();
        let after = {
            let mut fill = self.inner.fill.lock().unwrap_or_else(|e| e.into_inner());
            if fill.0 != id {
                *fill = (id.to_string(), 0);
            }
            fill.1
        };
        let batch = match &self.inner.backend {
            Backend::Sqlite(db) => db.to_fill(id, after, embed_rows(model))?,
            Backend::Postgres(db) => db.to_fill(id, after, embed_rows(model))?,
        };
        let Some(last) = batch.last().map(|m| m.seq) else {
            let switched = match &self.inner.backend {
                Backend::Sqlite(db) => db.switch(id)?,
                Backend::Postgres(db) => db.switch(id)?,
            };
            match switched {
                Switch::Done => {
                    tracing::info!(model = %id, "recall memory: re-embedding complete; switching to the new embedding generation");
                    self.follow_generation(id)?;
                    return Ok(Fill::Switched);
                }
                // A row lost its vector behind the cursor (an erasure) or committed behind it
                // (PostgreSQL): go round again from the start at the next catch-up.
                Switch::Lacking => self.inner.fill.lock().unwrap_or_else(|e| e.into_inner()).1 = 0,
                Switch::NotFilling => {}
            }
            return Ok(Fill::Idle);
        };
        let texts: Vec<String> = batch.iter().map(embedded_text).collect();
        let vecs = self.embed_checked(model, &batch, &texts)?;
        match &self.inner.backend {
            Backend::Sqlite(db) => {
                let rows: Vec<(i64, Vec<u8>)> = batch
                    .iter()
                    .zip(&vecs)
                    .map(|(m, v)| (m.seq, vectors::to_blob(v)))
                    .collect();
                db.put_vectors(id, &rows)?;
            }
            Backend::Postgres(db) => {
                let rows = batch
                    .iter()
                    .zip(&vecs)
                    .map(|(m, v)| (m.seq, vectors::to_blob(v), m.content_hash.clone()))
                    .collect();
                db.put_filled(id, rows)?;
            }
        }
        self.inner.fill.lock().unwrap_or_else(|e| e.into_inner()).1 = last;
        Ok(Fill::Embedded(batch.len()))
    }

    /// Embed the texts of `batch` with `model` and check every vector has the generation's size
    /// (the embedder's declared dimensions, and the index's when it holds this generation): a
    /// vector of another size is an error naming its row, and nothing of the batch is stored. A
    /// failure marks the embedder down for searches ([`DOWN_FOR`]); a success lifts that.
    fn embed_checked(
        &self,
        model: &dyn Embedder,
        batch: &[Message],
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, RecallError> {
        let vecs = match embed_grouped(model, texts) {
            Ok(v) => v,
            Err(e) => {
                self.mark_down(model.model_id());
                return Err(e);
            }
        };
        self.mark_up(model.model_id());
        let want = model.dimensions();
        if batch.is_empty() {
            // A probe: only whether the embedder answers, with vectors of its size.
            return match vecs.iter().find(|v| v.len() != want) {
                Some(v) => Err(RecallError::Invalid(format!(
                    "embedder {:?} returned {} components where it declares {want}: check its \
                     `dimensions` setting",
                    model.model_id(),
                    v.len()
                ))),
                None => Ok(vecs),
            };
        }
        if vecs.len() != batch.len() {
            return Err(RecallError::Invalid(format!(
                "embedder {:?} returned {} vectors for {} texts; the rows stay without vectors",
                model.model_id(),
                vecs.len(),
                batch.len()
            )));
        }
        for (m, v) in batch.iter().zip(&vecs) {
            if v.len() != want {
                return Err(RecallError::Invalid(format!(
                    "embedder {:?} returned {} components for recall message {} where it declares {want}: \
                     check its `dimensions` setting; the rows stay without vectors",
                    model.model_id(),
                    v.len(),
                    m.seq
                )));
            }
        }
        Ok(vecs)
    }

    fn mark_down(&self, model: &str) {
        self.inner
            .down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(model.to_string(), Instant::now() + DOWN_FOR);
    }

    fn mark_up(&self, model: &str) {
        let mut down = self.inner.down.lock().unwrap_or_else(|e| e.into_inner());
        if !down.is_empty() {
            down.remove(model);
        }
    }

    fn is_down(&self, model: &str) -> bool {
        self.inner
            .down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(model)
            .is_some_and(|until| Instant::now() < *until)
    }

    /// Start the background indexer: it catches up now, then whenever woken (or every
    /// [`IDLE_POLL`]). BM25 runs at every round; the vector half waits out a backoff after a
    /// failure (an embedder that is down is not called in a hot loop). Stop it with
    /// [`Indexer::shutdown`].
    pub fn spawn_indexer(&self) -> Result<Indexer, RecallError> {
        let store = self.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("recall-indexer".into())
            .spawn(move || {
                // One warning per failing episode (per half), not one per poll.
                let mut bm25 = Episode::default();
                let mut vectors = Episode::default();
                while !stop2.load(Ordering::Relaxed) {
                    let r = store.catch_up_bm25(&stop2).map(|_| ());
                    bm25.record(r, "keyword index");
                    if vectors.due() && !stop2.load(Ordering::Relaxed) {
                        let r = store.catch_up_vectors(&stop2).map(|_| ());
                        vectors.record(r, "vectors");
                    }
                    let (flag, cv) = &store.inner.wake;
                    let mut woken = flag.lock().unwrap_or_else(|e| e.into_inner());
                    if !*woken && !stop2.load(Ordering::Relaxed) {
                        woken = cv
                            .wait_timeout(woken, IDLE_POLL)
                            .map(|(g, _)| g)
                            .unwrap_or_else(|e| e.into_inner().0);
                    }
                    *woken = false;
                }
            })
            .map_err(|e| RecallError::Io {
                context: "starting the recall indexer thread".into(),
                source: e,
            })?;
        Ok(Indexer {
            stop,
            store: self.clone(),
            handle: Some(handle),
        })
    }

    /// Search. BM25 always runs; the vector list runs in [`Mode::Vector`] and [`Mode::Hybrid`] once
    /// the embedder has loaded or the query brings its vector (otherwise those modes answer from
    /// BM25 alone).
    pub fn search(&self, q: &Query) -> Result<Vec<Hit>, RecallError> {
        if q.limit == 0 || q.namespaces.is_empty() {
            return Ok(Vec::new());
        }
        let t = q.tuning;
        let pool = t.pool.max(q.limit);
        // A query that brings its own vector can search the stored vectors without the embedder;
        // otherwise the query is embedded by the active generation's embedder — never by another
        // model — unless it is known to be down (the answer does not wait on it).
        let query_vector = match &q.vector {
            _ if q.mode == Mode::Bm25 => None,
            Some(v) => Some(v.clone()),
            None => self.embed_query(&q.text),
        };
        let use_vectors = query_vector.is_some();
        let use_bm25 = q.mode != Mode::Vector || !use_vectors;
        let vector_list = |qv: &[f32]| {
            self.inner
                .vectors
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .search(qv, &q.namespaces, q.range, pool)
        };
        let bm25_list = || {
            self.inner
                .bm25
                .search(&q.text, &q.namespaces, q.range, pool, t.drop_stop_words)
        };
        // The two lists are independent: in hybrid mode the vector scan runs on a second thread
        // while BM25 runs here, so a search costs the slower of the two, not their sum.
        let (bm25, vector) = match (use_bm25, query_vector) {
            (true, Some(qv)) => std::thread::scope(|scope| {
                let scan = scope.spawn(|| vector_list(&qv));
                let bm25 = bm25_list();
                let vector = scan.join().unwrap_or_default();
                bm25.map(|b| (b, vector))
            })?,
            (true, None) => (bm25_list()?, Vec::new()),
            (false, Some(qv)) => (Vec::new(), vector_list(&qv)),
            (false, None) => (Vec::new(), Vec::new()),
        };
        let fusion = match (use_bm25, use_vectors) {
            (true, true) => t.fusion,
            (true, false) => Fusion::Weighted { vector: 0.0 },
            _ => Fusion::Weighted { vector: 1.0 },
        };
        let mut fused = fusion::fuse(&bm25, &vector, fusion);
        let messages = self.load(&fused.iter().map(|f| f.seq).collect::<Vec<_>>())?;
        fusion::author_boost(&mut fused, &messages, &q.text, t.author);
        if t.neighbour > 0.0 {
            let neighbours = self.neighbours(&messages)?;
            let by_seq: std::collections::HashMap<i64, (Option<i64>, Option<i64>)> =
                messages.iter().map(|m| m.seq).zip(neighbours).collect();
            let ns: Vec<_> = fused
                .iter()
                .map(|f| by_seq.get(&f.seq).copied().unwrap_or((None, None)))
                .collect();
            fusion::neighbour_boost(&mut fused, &ns, t.neighbour);
        }
        let mut by_seq: std::collections::HashMap<i64, Message> =
            messages.into_iter().map(|m| (m.seq, m)).collect();
        Ok(fused
            .into_iter()
            .filter_map(|f| {
                by_seq.remove(&f.seq).map(|message| Hit {
                    message,
                    score: f.score,
                    bm25_rank: f.bm25_rank,
                    vector_rank: f.vector_rank,
                })
            })
            .take(q.limit)
            .collect())
    }

    /// The query's vector by the active generation's embedder; `None` (keywords only) when that
    /// embedder is not loaded, is known to be down, or fails now (it is then marked down, and the
    /// failure logged once per episode).
    fn embed_query(&self, text: &str) -> Option<Vec<f32>> {
        let Some(model) = self.query_embedder() else {
            if self.inner.slot.get().is_some() && !self.inner.said_off.swap(true, Ordering::Relaxed)
            {
                tracing::warn!(
                    generation = %self.active_generation(),
                    "recall memory: the embedder of the stored vectors is not available (the configured model is another, being filled in the background); searching by keywords only until the new vectors are complete"
                );
            }
            return None;
        };
        if self.is_down(model.model_id()) {
            return None;
        }
        match model.embed_query(text) {
            Ok(v) => Some(v),
            Err(e) => {
                if !self.is_down(model.model_id()) {
                    tracing::warn!(error = %e, "recall memory: the query could not be embedded; searching by keywords only for now");
                }
                self.mark_down(model.model_id());
                None
            }
        }
    }

    /// The messages with these seqs (any order), in one query.
    fn load(&self, seqs: &[i64]) -> Result<Vec<Message>, RecallError> {
        match &self.inner.backend {
            Backend::Sqlite(db) => db.load(seqs),
            Backend::Postgres(db) => db.load(seqs),
        }
    }

    /// The erasures whose indexing is still pending: `(id, pending)` in id order ([`erase`]).
    fn pending_erasures(&self) -> Result<Vec<(i64, String)>, RecallError> {
        match &self.inner.backend {
            Backend::Sqlite(db) => db.pending_erasures(),
            Backend::Postgres(db) => db.pending_erasures(),
        }
    }

    /// Of the rows `seqs`, those the BM25 index has already taken ([`erase`] replaces them; the
    /// others are indexed later, from their rewritten text). On PostgreSQL the index follows commit
    /// order, not `seq`, so every row is taken as indexed: replacing one the index has not reached
    /// yet adds it now, and reaching it later replaces it again (never doubles it).
    fn indexed_already(&self, seqs: &[i64]) -> Result<Vec<i64>, RecallError> {
        match &self.inner.backend {
            Backend::Sqlite(_) => {
                let cursor = self.inner.bm25.cursor()?;
                Ok(seqs.iter().copied().filter(|s| *s <= cursor).collect())
            }
            Backend::Postgres(_) => Ok(seqs.to_vec()),
        }
    }

    /// Store vectors `(seq, blob)` of `model`, replacing any there (an erasure rewrote the rows).
    fn replace_vectors(&self, model: &str, rows: Vec<(i64, Vec<u8>)>) -> Result<(), RecallError> {
        match &self.inner.backend {
            Backend::Sqlite(db) => db.put_vectors(model, &rows),
            Backend::Postgres(db) => db.replace_vectors(model, rows),
        }
    }

    /// Mark the erasures `ids` done.
    fn clear_erasures(&self, ids: &[i64]) -> Result<(), RecallError> {
        match &self.inner.backend {
            Backend::Sqlite(db) => db.clear_erasures(ids),
            Backend::Postgres(db) => db.clear_erasures(ids),
        }
    }

    /// For each message, the previous and next message of its conversation and thread — as far as
    /// the neighbour boost needs them: only a neighbour that is itself among `msgs` can lift a hit,
    /// so each message is paired with the nearest other message of `msgs` in its thread when nothing
    /// was written between them (one small query per such pair, not two per message).
    fn neighbours(&self, msgs: &[Message]) -> Result<Vec<Adjacent>, RecallError> {
        let mut out: Vec<Adjacent> = vec![(None, None); msgs.len()];
        let mut threads: std::collections::HashMap<(&str, Option<&str>), Vec<usize>> =
            std::collections::HashMap::new();
        for (i, m) in msgs.iter().enumerate() {
            threads
                .entry((m.conversation.as_str(), m.thread.as_deref()))
                .or_default()
                .push(i);
        }
        let mut pairs: Vec<Pair> = Vec::new();
        let mut members_of: Vec<(usize, usize)> = Vec::new();
        for ((conversation, thread), mut members) in threads {
            members.sort_by_key(|&i| msgs[i].seq);
            for pair in members.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                pairs.push((
                    conversation.to_string(),
                    thread.map(str::to_string),
                    msgs[a].seq,
                    msgs[b].seq,
                ));
                members_of.push((a, b));
            }
        }
        let gaps = match &self.inner.backend {
            Backend::Sqlite(db) => db.gaps(&pairs)?,
            Backend::Postgres(db) => db.gaps(&pairs)?,
        };
        for ((a, b), gap) in members_of.into_iter().zip(gaps) {
            if !gap {
                out[a].1 = Some(msgs[b].seq);
                out[b].0 = Some(msgs[a].seq);
            }
        }
        Ok(out)
    }
}

/// What the embedder is given for `m`: its indexed text, cut at [`EMBED_TEXT_BYTES`] (on a character
/// boundary).
fn embedded_text(m: &Message) -> String {
    let mut text = m.indexed_text();
    if text.len() > EMBED_TEXT_BYTES {
        let mut end = EMBED_TEXT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The word pieces a text of `bytes` bytes is expected to take, for grouping: one per 3 bytes (English
/// runs nearer one per 4; CJK one per character, 3 bytes), capped at the model's 256, plus [CLS] and
/// [SEP]. An overestimate only makes a group smaller.
fn estimated_pieces(bytes: usize) -> usize {
    (bytes / 3).min(crate::embed::MAX_PIECES) + 2
}

/// Embed `texts` (one vector each, in order) in calls of similar-length texts whose attention work
/// stays within [`EMBED_ATTENTION_BUDGET`]: sorted by length, each call takes the next texts while
/// (count × longest²) fits, at most [`EMBED_GROUP`], at least one.
///
/// The attention budget is the local model's concern (its memory per call); a remote embedder gets
/// calls of its own [`Embedder::batch_size`] texts, whatever their length.
fn embed_grouped(model: &dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, RecallError> {
    let local = model.descriptor()["provider"] == "local";
    let group = if local {
        EMBED_GROUP
    } else {
        model.batch_size().max(1)
    };
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut out = vec![Vec::new(); texts.len()];
    let mut rest = &order[..];
    while !rest.is_empty() {
        let mut take = 1;
        while take < rest.len().min(group) {
            // Sorted ascending: the longest of the first `take + 1` is the last of them.
            let longest = estimated_pieces(texts[rest[take]].len());
            if local && (take + 1) * longest * longest > EMBED_ATTENTION_BUDGET {
                break;
            }
            take += 1;
        }
        let (group, tail) = rest.split_at(take);
        let refs: Vec<&str> = group.iter().map(|&i| texts[i].as_str()).collect();
        let vecs = model.embed(&refs)?;
        if vecs.len() != refs.len() {
            return Err(RecallError::Invalid(format!(
                "embedder {:?} returned {} vectors for {} texts; the rows stay without vectors",
                model.model_id(),
                vecs.len(),
                refs.len()
            )));
        }
        for (&i, v) in group.iter().zip(vecs) {
            out[i] = v;
        }
        rest = tail;
    }
    Ok(out)
}

/// The previous and next message's seq in the same thread.
type Adjacent = (Option<i64>, Option<i64>);

/// What a round of the filling generation did.
enum Fill {
    /// Embedded and stored this many rows.
    Embedded(usize),
    /// Nothing to do now (rows still lacking behind the cursor: the next catch-up goes round
    /// again; or the generation went away).
    Idle,
    /// Every row had a vector of it: it is the active generation now, in memory too.
    Switched,
}

/// Rows per embedding round for `model`: [`EMBED_BATCH`], or more for an embedder that prefers
/// larger calls (a round is one write transaction).
fn embed_rows(model: &dyn Embedder) -> i64 {
    EMBED_BATCH.max(i64::try_from(model.batch_size()).unwrap_or(EMBED_BATCH))
}

/// The active generation among `generations` (empty: none).
fn active_model(generations: &[Generation]) -> String {
    generations
        .iter()
        .find(|g| g.state == generation::GenerationState::Active)
        .map(|g| g.model.clone())
        .unwrap_or_default()
}

/// An index of generation `model` loaded from SQLite's stored vectors. A stored vector of another
/// size than the generation's is left out with a warning naming its row (the database is otherwise
/// usable; that row is searched by keywords).
fn load_sqlite(db: &Sqlite, model: &str) -> Result<RwLock<VectorIndex>, RecallError> {
    let mut index = VectorIndex::new(model);
    if !model.is_empty() {
        db.stored_vectors(model, |seq, namespace, time, blob| {
            match vectors::from_blob(&blob).map(|v| index.push(seq, &namespace, time, &v)) {
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "recall memory: a stored vector was left out")
                }
                None => tracing::warn!(
                    seq,
                    "recall memory: a stored vector is not whole f32s; left out"
                ),
                Some(Ok(())) => {}
            }
            Ok(())
        })?;
    }
    Ok(RwLock::new(index))
}

/// One half of the indexer's failing episodes: one warning when it starts, one line when it ends,
/// and for the vector half a backoff that doubles from [`IDLE_POLL`] to [`MAX_BACKOFF`].
#[derive(Default)]
struct Episode {
    failing: bool,
    wait: Duration,
    retry_at: Option<Instant>,
}

impl Episode {
    fn due(&self) -> bool {
        self.retry_at.is_none_or(|at| Instant::now() >= at)
    }

    fn record(&mut self, result: Result<(), RecallError>, half: &str) {
        match result {
            Ok(()) => {
                if self.failing {
                    tracing::info!("recall indexer: {half} caught up again");
                }
                *self = Episode::default();
            }
            Err(e) => {
                self.wait = if self.failing {
                    (self.wait * 2).min(MAX_BACKOFF)
                } else {
                    IDLE_POLL
                };
                self.retry_at = Some(Instant::now() + self.wait);
                if !self.failing {
                    tracing::warn!(error = %e, "recall indexer: {half} failed; retrying with backoff up to {}s until it works (nothing is lost; searches cover what is indexed)", MAX_BACKOFF.as_secs());
                } else {
                    tracing::debug!(error = %e, "recall indexer: {half} failed again");
                }
                self.failing = true;
            }
        }
    }
}

/// The background indexer; [`Indexer::shutdown`] (or drop) stops it after its current batch.
pub struct Indexer {
    stop: Arc<AtomicBool>,
    store: RecallStore,
    handle: Option<JoinHandle<()>>,
}

impl Indexer {
    /// Stop and wait for the thread (it finishes the batch in hand: at most one embedding batch).
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.store.notify();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Indexer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The unit tests open the SQLite file directly (`super::*`).
#[cfg(test)]
use rusqlite::Connection;
#[cfg(test)]
mod tests;
