//! # Facts: long-term semantic memory, bi-temporal and never destroyed
//!
//! Role: the third layer of an agent's memory (beside core blocks and recall). A fact is a short
//! statement ("The Orion launch is on 2026-05-17") in an agent's namespace (`agent/<id>`, recall's).
//! Every change opens a new *version*; nothing is ever deleted.
//!
//! Invariants (and why):
//! - a version is immutable once written except for being *closed* (`invalidated_at`, `valid_to`,
//!   `reason` and the closing batch's provenance), so any past belief can be replayed;
//! - a batch of operations is applied in ONE transaction: a stale or unknown target fails the whole
//!   batch and nothing is written (a model's half-understood answer never corrupts the store);
//! - at most one version of a fact is current (`invalidated_at IS NULL`);
//! - the BM25 index (FTS5) is written in the same transaction as the versions, so it never lags;
//!   vectors are derived and optional (BM25 alone until the embedder loads).
//!
//! Map: the tables are memory's migration 4 ([`crate::schema::facts`]); [`time`] (RFC 3339),
//! [`entities`] (subjects, aliases), [`apply`] (a batch in one transaction), [`query`] (the views),
//! [`search`] (hybrid BM25 + vectors), [`ops`] (the `record_facts` tool), [`prompt`] (the memory
//! calls' text), [`json`] (renderings).

pub mod apply;
pub mod entities;
pub mod json;
pub mod ops;
pub mod prompt;
pub mod query;
pub mod search;
pub mod time;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::embed::EmbedSlot;
use crate::recall::vectors::quantise;
use search::CurrentVectors;

/// Where a version came from (the seed's MemoryProvenance.source).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The agent itself (extraction of its exchange, `archival_insert`).
    #[default]
    Agent,
    /// A sleep-time consolidation run.
    Consolidation,
    /// A person (console, CLI).
    Human,
    /// The system (imports, migrations).
    System,
}

impl Source {
    /// The stored and rendered name.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Agent => "agent",
            Source::Consolidation => "consolidation",
            Source::Human => "human",
            Source::System => "system",
        }
    }

    /// The inverse of [`Source::as_str`].
    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "agent" => Some(Source::Agent),
            "consolidation" => Some(Source::Consolidation),
            "human" => Some(Source::Human),
            "system" => Some(Source::System),
            _ => None,
        }
    }
}

/// Provenance of a batch (every version it opens or closes carries it).
#[derive(Clone, Debug, Default)]
pub struct Provenance {
    /// The agent id whose memory this is (namespace `agent/<id>`).
    pub agent: String,
    /// The task whose exchange was extracted.
    pub task: Option<i64>,
    /// The conversation (thread) of the exchange.
    pub conversation: Option<String>,
    /// Recall seqs of the exchange, when known.
    pub source_messages: Vec<i64>,
    /// `provider/model` of the call.
    pub model: Option<String>,
    /// `llm_calls.id` of the call.
    pub ledger_id: Option<i64>,
    /// Who made the change.
    pub source: Source,
}

/// One version of a fact. `id` is the version's id (what a prompt lists and an op targets);
/// `fact_id` is the fact's (all its versions share it). Times are Unix ms.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FactVersion {
    /// The version's id.
    pub id: i64,
    /// The fact's id (shared by its versions).
    pub fact_id: i64,
    /// `agent/<id>`.
    pub namespace: String,
    /// The statement.
    pub text: String,
    /// What it is about, as written (linked to an entity).
    pub subject: Option<String>,
    /// World time from which it holds (None: open).
    pub valid_from: Option<i64>,
    /// World time until which it holds, exclusive (None: open).
    pub valid_to: Option<i64>,
    /// System time it was recorded.
    pub recorded_at: i64,
    /// System time it stopped being believed (None: current).
    pub invalidated_at: Option<i64>,
    /// Why it was closed (or why this version was opened by an UPDATE).
    pub reason: Option<String>,
    /// Who wrote it.
    pub source: Source,
    /// The agent whose memory it is.
    pub agent: String,
    /// The task it came from.
    pub task: Option<i64>,
    /// The conversation it came from.
    pub conversation: Option<String>,
    /// Recall seqs of the exchange.
    pub source_messages: Vec<i64>,
    /// `provider/model` of the call that produced it.
    pub model: Option<String>,
    /// `llm_calls.id` of that call.
    pub ledger_id: Option<i64>,
}

/// Which versions a listing or search sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// `invalidated_at IS NULL`.
    Current,
    /// `recorded_at <= t AND (invalidated_at IS NULL OR invalidated_at > t)`.
    BelievedAt(i64),
    /// Current versions whose `[valid_from, valid_to)` holds t (null = open).
    ValidAt(i64),
    /// Every version.
    History,
}

/// One operation of `record_facts`, validated.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Open a new fact.
    Add {
        /// The statement.
        text: String,
        /// What it is about.
        subject: Option<String>,
        /// World time from.
        valid_from: Option<i64>,
        /// World time to.
        valid_to: Option<i64>,
    },
    /// Close `target` and open a new version of the same fact.
    Update {
        /// A listed version id.
        target: i64,
        /// The new statement.
        text: String,
        /// What it is about.
        subject: Option<String>,
        /// World time from (also the closed version's `valid_to`).
        valid_from: Option<i64>,
        /// World time to.
        valid_to: Option<i64>,
        /// Why.
        reason: Option<String>,
    },
    /// Close `target`.
    Invalidate {
        /// A listed version id.
        target: i64,
        /// Why.
        reason: Option<String>,
        /// World time it stopped holding.
        valid_to: Option<i64>,
    },
    /// Nothing new.
    Noop,
}

/// What a batch did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Applied {
    /// Version ids opened by ADD.
    pub added: Vec<i64>,
    /// (closed version, new version) per UPDATE.
    pub updated: Vec<(i64, i64)>,
    /// Version ids closed by INVALIDATE.
    pub invalidated: Vec<i64>,
    /// ADDs dropped as exact duplicates of a current fact.
    pub duplicates: usize,
    /// NOOPs.
    pub noops: usize,
}

/// A search.
#[derive(Clone, Debug)]
pub struct FactQuery {
    /// The words.
    pub text: String,
    /// The namespaces the searcher may read (the ACL's answer).
    pub namespaces: Vec<String>,
    /// `Current` or `BelievedAt`.
    pub view: View,
    /// How many hits at most.
    pub limit: usize,
}

/// One search result.
#[derive(Clone, Debug)]
pub struct FactHit {
    /// The version found.
    pub version: FactVersion,
    /// Fused score (higher is better).
    pub score: f32,
}

/// What went wrong in the facts store.
#[derive(Debug, thiserror::Error)]
pub enum FactError {
    /// SQLite failed.
    #[error("facts database {path}: {source}")]
    Db {
        /// The database file.
        path: String,
        /// The error.
        source: rusqlite::Error,
    },
    /// Bad input: the message says what and how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// A target is no longer a current version (another batch closed it first).
    #[error(
        "fact version {0} is no longer current (it was updated or invalidated since it was listed); nothing was written"
    )]
    Stale(i64),
    /// The memory tables could not be brought up to date, or are too old or too new to read.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
}

/// Facts over the engine's SQLite file (memory's own connections, WAL). Clone + Send + Sync.
#[derive(Clone)]
pub struct FactStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// The one writing connection; None when opened read-only.
    writer: Option<Mutex<Connection>>,
    /// Read-only connections, checked out for one lookup each.
    readers: Mutex<Vec<Connection>>,
    slot: EmbedSlot,
    /// The current versions' vectors (loaded on the first search once the embedder is there).
    vectors: RwLock<CurrentVectors>,
    /// Current versions may lack a vector (written before the embedder loaded).
    pending: AtomicBool,
}

/// Current versions embedded after a batch, at most (the rest at the next batch or
/// [`FactStore::embed_pending`]).
const BACKFILL: usize = 32;

impl FactStore {
    fn db_err(&self, source: rusqlite::Error) -> FactError {
        FactError::Db {
            path: self.inner.path.display().to_string(),
            source,
        }
    }

    fn build(path: &Path, writer: Option<Connection>, slot: EmbedSlot) -> Self {
        FactStore {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writer: writer.map(Mutex::new),
                readers: Mutex::new(Vec::new()),
                slot,
                vectors: RwLock::new(CurrentVectors::default()),
                pending: AtomicBool::new(true),
            }),
        }
    }

    /// Open (migrating) read-write. `slot` gives the embedder once loaded (hybrid search; BM25 alone until then).
    pub fn open(db_path: &Path, slot: EmbedSlot) -> Result<Self, FactError> {
        let db = |source| FactError::Db {
            path: db_path.display().to_string(),
            source,
        };
        let mut conn = crate::schema::open(db_path).map_err(db)?;
        crate::schema::migrate(&mut conn)?;
        Ok(Self::build(db_path, Some(conn), slot))
    }

    /// Open read-only for the CLI beside a running `opc run` (no migration; refuses a newer schema).
    pub fn open_read_only(db_path: &Path, slot: EmbedSlot) -> Result<Self, FactError> {
        let path = db_path.display().to_string();
        let db = |source| FactError::Db {
            path: path.clone(),
            source,
        };
        let conn = read_conn(db_path).map_err(db)?;
        let found: Option<i64> = conn
            .query_row(
                "SELECT version FROM schema_versions WHERE component = 'memory'",
                [],
                |r| r.get(0),
            )
            .optional()
            .or_else(|e| match e {
                // No `schema_versions` table: nothing was ever migrated in this file.
                rusqlite::Error::SqliteFailure(_, Some(ref m)) if m.contains("no such table") => {
                    Ok(None)
                }
                e => Err(e),
            })
            .map_err(db)?;
        let known = crate::schema::MIGRATIONS.len() as i64;
        let found = found.unwrap_or(0);
        if found > known {
            return Err(FactError::Schema(
                opc_migrate::MigrateError::TooNew {
                    component: "memory",
                    path,
                    found,
                    known,
                }
                .into(),
            ));
        }
        if found < 4 {
            return Err(FactError::Invalid(format!(
                "{path} has no facts tables yet (memory schema version {found}, facts need 4): \
                 start `opc run` or `opc chat` with this config once to create them"
            )));
        }
        let store = Self::build(db_path, None, slot);
        store.put_reader(conn);
        Ok(store)
    }

    /// Whether this store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.inner.writer.is_none()
    }

    fn put_reader(&self, conn: Connection) {
        if let Ok(mut pool) = self.inner.readers.lock() {
            pool.push(conn);
        }
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, FactError> {
        let pooled = self.inner.readers.lock().ok().and_then(|mut p| p.pop());
        let conn = match pooled {
            Some(c) => c,
            None => read_conn(&self.inner.path).map_err(|e| self.db_err(e))?,
        };
        let out = f(&conn).map_err(|e| self.db_err(e));
        self.put_reader(conn);
        out
    }

    fn writer(&self) -> Result<std::sync::MutexGuard<'_, Connection>, FactError> {
        let Some(w) = &self.inner.writer else {
            return Err(FactError::Invalid(format!(
                "{}: the facts store was opened read-only (beside a running `opc run`); it cannot be changed from here",
                self.inner.path.display()
            )));
        };
        // A panic while holding the lock leaves SQLite consistent (the transaction rolled back).
        Ok(w.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Embed `texts` when the embedder is loaded: (model id, int8 vectors with their scales).
    #[allow(clippy::type_complexity)]
    fn embed(
        &self,
        texts: &[&str],
    ) -> Result<Option<(&'static str, Vec<(Vec<i8>, f32)>)>, FactError> {
        let Some(model) = self.inner.slot.get() else {
            return Ok(None);
        };
        if texts.is_empty() {
            return Ok(Some((model.model_id(), Vec::new())));
        }
        let vectors = model.embed(texts)?;
        Ok(Some((
            model.model_id(),
            vectors.iter().map(|v| quantise(v)).collect(),
        )))
    }

    /// Apply one batch to `namespace` in ONE transaction. ADD opens a version (dropped as a duplicate
    /// when a current fact of the namespace has the same content hash); UPDATE closes the target's
    /// current version (invalidated_at = now, valid_to = the new valid_from when given) and opens a new
    /// version of the same fact; INVALIDATE closes it with the reason; NOOP records nothing. A target
    /// that is not a current version of this namespace fails the whole batch (`Stale`/`Invalid`): nothing written.
    pub fn apply(
        &self,
        namespace: &str,
        ops: &[Op],
        provenance: &Provenance,
        now_ms: i64,
    ) -> Result<Applied, FactError> {
        self.apply_marking(namespace, ops, provenance, now_ms, None)
    }

    /// [`FactStore::apply`], and when `exchange_hash` is given, [`FactStore::mark_extracted`] in the
    /// same transaction (a crash leaves both or neither, so an exchange is never extracted twice nor
    /// marked without its facts).
    pub fn apply_marking(
        &self,
        namespace: &str,
        ops: &[Op],
        provenance: &Provenance,
        now_ms: i64,
        exchange_hash: Option<&str>,
    ) -> Result<Applied, FactError> {
        apply::validate(namespace, ops)?;
        // Embed before taking the writer (the slow part; duplicates are embedded for nothing, rarely).
        let texts: Vec<&str> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Add { text, .. } | Op::Update { text, .. } => Some(text.trim()),
                _ => None,
            })
            .collect();
        let embedded = self.embed(&texts)?;
        let by_text: std::collections::HashMap<&str, &(Vec<i8>, f32)> = match &embedded {
            Some((_, v)) => texts.iter().copied().zip(v.iter()).collect(),
            None => Default::default(),
        };
        let mut conn = self.writer()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        let (applied, changes) = apply::run(&tx, namespace, ops, provenance, now_ms)?;
        let e = |err| self.db_err(err);
        if let Some((model, _)) = &embedded {
            for o in &changes.opened {
                if let Some((q, scale)) = by_text.get(o.text.as_str()) {
                    tx.execute(
                        "INSERT OR REPLACE INTO memory_fact_vectors (version_id, model, scale, vector)
                         VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![o.id, model, f64::from(*scale), search::to_blob(q)],
                    )
                    .map_err(e)?;
                }
            }
        }
        if let Some(hash) = exchange_hash {
            tx.execute(
                "INSERT OR IGNORE INTO memory_facts_extracted (namespace, exchange_hash, at_ms) VALUES (?1, ?2, ?3)",
                rusqlite::params![namespace, hash, now_ms],
            )
            .map_err(e)?;
        }
        let generation: i64 = tx
            .query_row(
                "UPDATE memory_facts_meta SET generation = generation + 1 WHERE id = 1 RETURNING generation",
                [],
                |r| r.get(0),
            )
            .map_err(e)?;
        tx.commit().map_err(e)?;
        // The in-memory vectors follow, if they were at the generation just before this one.
        if let Ok(mut cv) = self.inner.vectors.write() {
            if cv.generation == Some(generation - 1) {
                for id in &changes.closed {
                    cv.remove(*id);
                }
                for o in &changes.opened {
                    if let Some((q, scale)) = by_text.get(o.text.as_str()) {
                        cv.insert(o.id, &o.namespace, o.recorded_at, q, *scale);
                    }
                }
                cv.generation = Some(generation);
            } else {
                cv.generation = None;
            }
        }
        drop(conn);
        if embedded.is_none() && !changes.opened.is_empty() {
            self.inner.pending.store(true, Ordering::Relaxed);
        } else if embedded.is_some() && self.inner.pending.load(Ordering::Relaxed) {
            // Versions written before the embedder loaded: a few per batch.
            self.embed_pending(BACKFILL)?;
        }
        Ok(applied)
    }

    /// Embed up to `limit` current versions that have no vector of the loaded model yet (written
    /// before it loaded); returns how many. Nothing to do (0) when the embedder is not loaded.
    pub fn embed_pending(&self, limit: usize) -> Result<usize, FactError> {
        let Some(model) = self.inner.slot.get().map(|m| m.model_id()) else {
            return Ok(0);
        };
        if self.inner.writer.is_none() {
            return Ok(0);
        }
        let todo: Vec<(i64, String)> = self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT v.id, v.text FROM memory_fact_versions v
                 WHERE v.invalidated_at IS NULL AND NOT EXISTS (
                     SELECT 1 FROM memory_fact_vectors x WHERE x.version_id = v.id AND x.model = ?1)
                 LIMIT ?2",
            )?;
            let rows = stmt.query_map(
                rusqlite::params![model, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            rows.collect()
        })?;
        if todo.len() < limit {
            self.inner.pending.store(false, Ordering::Relaxed);
        }
        if todo.is_empty() {
            return Ok(0);
        }
        let texts: Vec<&str> = todo.iter().map(|t| t.1.as_str()).collect();
        let Some((model, vectors)) = self.embed(&texts)? else {
            return Ok(0);
        };
        let mut conn = self.writer()?;
        let e = |err| self.db_err(err);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        for ((id, _), (q, scale)) in todo.iter().zip(&vectors) {
            tx.execute(
                "INSERT OR REPLACE INTO memory_fact_vectors (version_id, model, scale, vector) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![id, model, f64::from(*scale), search::to_blob(q)],
            )
            .map_err(e)?;
        }
        // Other processes holding vectors in memory reload them (the generation moved).
        tx.execute(
            "UPDATE memory_facts_meta SET generation = generation + 1 WHERE id = 1",
            [],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        // This one too, at its next search.
        if let Ok(mut cv) = self.inner.vectors.write() {
            cv.generation = None;
        }
        Ok(todo.len())
    }

    /// `archival_insert`: one ADD with source from `provenance`.
    pub fn insert(
        &self,
        namespace: &str,
        text: &str,
        subject: Option<&str>,
        provenance: &Provenance,
        now_ms: i64,
    ) -> Result<Applied, FactError> {
        let op = Op::Add {
            text: text.to_string(),
            subject: subject.map(str::to_string),
            valid_from: None,
            valid_to: None,
        };
        self.apply(namespace, &[op], provenance, now_ms)
    }

    /// Versions of `namespace` in `view`, newest first (History: facts newest first, each fact's
    /// versions oldest first).
    pub fn list(&self, namespace: &str, view: View) -> Result<Vec<FactVersion>, FactError> {
        self.read(|c| query::list(c, namespace, view))
    }

    /// Every version of one fact, oldest first.
    pub fn history(&self, fact_id: i64) -> Result<Vec<FactVersion>, FactError> {
        self.read(|c| query::history(c, fact_id))
    }

    /// The current vectors at the database's generation (reloaded when another process wrote).
    fn current_vectors(
        &self,
        model: &str,
    ) -> Result<std::sync::RwLockReadGuard<'_, CurrentVectors>, FactError> {
        let generation: i64 = self.read(|c| {
            c.query_row(
                "SELECT generation FROM memory_facts_meta WHERE id = 1",
                [],
                |r| r.get(0),
            )
        })?;
        let fresh = self
            .inner
            .vectors
            .read()
            .map(|cv| cv.generation == Some(generation))
            .unwrap_or(false);
        if !fresh {
            let loaded = self.read(|c| CurrentVectors::load(c, model, generation))?;
            if let Ok(mut cv) = self.inner.vectors.write() {
                *cv = loaded;
            }
        }
        self.inner
            .vectors
            .read()
            .map_err(|_| FactError::Invalid("facts vectors: a search panicked".to_string()))
    }

    /// Hybrid (BM25 + vectors) search in `query.view` over `query.namespaces`. `Current` and
    /// `BelievedAt` use both lists; `ValidAt` and `History` search by BM25 alone.
    pub fn search(&self, query: &FactQuery) -> Result<Vec<FactHit>, FactError> {
        if query.namespaces.is_empty() || query.limit == 0 || query.text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let pool = search::POOL.max(query.limit);
        let bm25 =
            self.read(|c| search::bm25(c, &query.text, &query.namespaces, query.view, pool))?;
        let recorded_by = match query.view {
            View::Current => Some(i64::MAX),
            View::BelievedAt(t) => Some(t),
            View::ValidAt(_) | View::History => None,
        };
        let mut vector = Vec::new();
        if let (Some(by), Some(model)) = (recorded_by, self.inner.slot.get()) {
            let q = model
                .embed(&[query.text.as_str()])?
                .into_iter()
                .next()
                .unwrap_or_default();
            let id = model.model_id();
            let mut best = search::Best::new(pool);
            for (vid, s) in self
                .current_vectors(id)?
                .search(&q, &query.namespaces, by, pool)
            {
                best.offer(s, vid);
            }
            if let View::BelievedAt(t) = query.view {
                self.read(|c| search::score_past(c, id, &q, &query.namespaces, t, &mut best))?;
            }
            vector = best.into_list();
        }
        let mut fused = search::fuse(&bm25, &vector);
        fused.truncate(query.limit);
        let ids: Vec<i64> = fused.iter().map(|f| f.0).collect();
        let mut versions: std::collections::HashMap<i64, FactVersion> = self
            .read(|c| query::by_ids(c, &ids))?
            .into_iter()
            .map(|v| (v.id, v))
            .collect();
        Ok(fused
            .into_iter()
            .filter_map(|(id, score)| {
                versions
                    .remove(&id)
                    .map(|version| FactHit { version, score })
            })
            .collect())
    }

    /// Graph-lite: versions in `view` linked to the entity `subject` names (normalised, aliases), in
    /// each of `namespaces`; newest first.
    pub fn about(
        &self,
        namespaces: &[String],
        subject: &str,
        view: View,
    ) -> Result<Vec<FactVersion>, FactError> {
        self.read(|c| {
            let mut ids = Vec::new();
            for ns in namespaces {
                if let Some(id) = entities::find(c, ns, subject)? {
                    ids.push(id);
                }
            }
            query::by_entities(c, &ids, view)
        })
    }

    /// Make `alias` name the same entity as `entity` in `namespace` ("Orion" for "the Orion
    /// launch"), so [`FactStore::about`] finds its facts under either name. Returns the entity id.
    pub fn alias(
        &self,
        namespace: &str,
        entity: &str,
        alias: &str,
        now_ms: i64,
    ) -> Result<i64, FactError> {
        let conn = self.writer()?;
        match entities::add_alias(&conn, namespace, entity, alias, now_ms)
            .map_err(|e| self.db_err(e))?
        {
            Ok(id) => Ok(id),
            Err(entities::AliasError::UnknownEntity) => Err(FactError::Invalid(format!(
                "no subject {entity:?} in {namespace}: alias a subject some fact already names"
            ))),
            Err(entities::AliasError::Empty) => Err(FactError::Invalid(format!(
                "alias {alias:?} has no letters or digits"
            ))),
            Err(entities::AliasError::Taken(other)) => Err(FactError::Invalid(format!(
                "{alias:?} already names another subject (entity {other}) in {namespace}"
            ))),
        }
    }

    /// Whether an exchange with this content hash was already extracted for `namespace` (skip the call).
    pub fn extracted(&self, namespace: &str, exchange_hash: &str) -> Result<bool, FactError> {
        self.read(|c| {
            c.query_row(
                "SELECT 1 FROM memory_facts_extracted WHERE namespace = ?1 AND exchange_hash = ?2",
                [namespace, exchange_hash],
                |_| Ok(()),
            )
            .optional()
            .map(|r| r.is_some())
        })
    }

    /// Record that an exchange was extracted for `namespace` (prefer [`FactStore::apply_marking`],
    /// which does it in the batch's transaction).
    pub fn mark_extracted(
        &self,
        namespace: &str,
        exchange_hash: &str,
        now_ms: i64,
    ) -> Result<(), FactError> {
        let conn = self.writer()?;
        conn.execute(
            "INSERT OR IGNORE INTO memory_facts_extracted (namespace, exchange_hash, at_ms) VALUES (?1, ?2, ?3)",
            rusqlite::params![namespace, exchange_hash, now_ms],
        )
        .map_err(|e| self.db_err(e))?;
        Ok(())
    }
}

/// A read-only connection (WAL lets it read beside the writer, even in another process).
fn read_conn(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}
