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
//! - the keyword index (FTS5 on SQLite, the generated `tsv` column on PostgreSQL) is written in the
//!   same transaction as the versions, so it never lags; vectors are derived and optional (keywords
//!   alone until the embedder loads);
//! - on PostgreSQL several nodes share the tables: every read-check-write locks what it checked
//!   (see `postgres`), so two nodes never both change one current version.
//!
//! Map: two backends behind [`FactStore`], each operation's SQL once per backend: SQLite
//! (`sqlite`: connections and transactions; the SQL in [`apply`], [`entities`], [`query`],
//! [`search`]; the tables are memory's migration 4, [`crate::schema::facts`], and 5,
//! [`crate::schema::graph`]) and PostgreSQL (`postgres`; the tables are
//! [`crate::schema::postgres`]'s migrations 2 and 3). Shared by both:
//! [`time`] (RFC 3339), [`entities::normalise`] (subjects, aliases), [`apply::validate`] and
//! `apply::target_state` (a batch's checks), [`search`]'s query words, in-memory vectors and
//! fusion, [`ops`] (the `record_facts` tool), [`prompt`] (the memory calls' text), [`json`]
//! (renderings), [`graph`] (graph memory: a version's `predicate` + object entity is an edge; the
//! neighbourhood walk, entities named in a text, and the graph's renderings; its SQL is one text
//! for both backends).

pub mod apply;
mod embedding;
pub mod entities;
pub mod graph;
pub mod json;
pub mod ops;
mod postgres;
pub mod prompt;
pub mod query;
pub mod search;
mod sqlite;
pub mod time;

#[cfg(test)]
mod embedding_tests;
#[cfg(test)]
mod graph_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::embed::{EmbedSlot, Embedder};
use crate::recall::generation::{self, Generation, GenerationState, Switch};
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
    /// The relation to `object` (graph memory: "leads"); set together with `object`.
    pub predicate: Option<String>,
    /// The entity the relation points to, as written (linked to an entity like `subject`).
    pub object: Option<String>,
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
        /// The relation from `subject` to `object` (graph memory; both or neither).
        predicate: Option<String>,
        /// The entity the relation points to (needs `subject`).
        object: Option<String>,
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
        /// The relation from `subject` to `object` (both or neither; neither, with no new
        /// subject, keeps the fact's relation).
        predicate: Option<String>,
        /// The entity the relation points to (needs a subject, given or kept).
        object: Option<String>,
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
    /// PostgreSQL failed (the message names the server as `host:port/name`, never its URL).
    #[error(transparent)]
    Pg(#[from] opc_pg::PgError),
    /// Memory's PostgreSQL tables could not be brought up to date, or are newer than this build.
    #[error(transparent)]
    PgSchema(#[from] opc_pg::PgMigrateError),
}

/// Facts over the engine's SQLite file (memory's own connections, WAL) or PostgreSQL
/// (`framework.memory.storage: postgres`, shared by every node). Clone + Send + Sync.
#[derive(Clone)]
pub struct FactStore {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    slot: EmbedSlot,
    /// The current versions' vectors (loaded on the first search once the embedder is there).
    vectors: RwLock<CurrentVectors>,
    /// Current versions may lack a vector (written before the embedder loaded, or while it was
    /// down).
    pending: AtomicBool,
    /// The embedding generations' rows ([`embedding`]).
    gens: embedding::GenDb,
    /// Which embedder is down, what was said, whether the background filler runs.
    health: embedding::Health,
}

/// Where the facts are: each operation's SQL is written once per backend ([`sqlite`],
/// [`postgres`]); validation, embedding, fusion and the in-memory vectors are shared here.
enum Backend {
    Sqlite(sqlite::SqliteFacts),
    Postgres(postgres::PgFacts),
}

/// A batch's vectors, by trimmed text: the loaded model's id and each text's int8 vector and scale.
#[derive(Clone)]
pub(crate) struct Embedded {
    model: String,
    by_text: HashMap<String, (Vec<i8>, f32)>,
}

/// Current versions embedded after a batch, at most (the rest at the next batch or
/// [`FactStore::embed_pending`]).
const BACKFILL: usize = 32;
/// Current versions per round of the background filler (one write transaction per generation).
const FILL_ROUND: usize = 256;

/// The error of a change asked of a store opened read-only.
fn read_only(place: &str) -> FactError {
    FactError::Invalid(format!(
        "{place}: the facts store was opened read-only (beside a running `opc run`); it cannot be changed from here"
    ))
}

impl FactStore {
    fn build(backend: Backend, slot: EmbedSlot, gens: embedding::GenDb) -> Self {
        FactStore {
            inner: Arc::new(Inner {
                backend,
                slot,
                vectors: RwLock::new(CurrentVectors::default()),
                pending: AtomicBool::new(true),
                gens,
                health: embedding::Health::default(),
            }),
        }
    }

    /// Open (migrating) read-write. `slot` gives the embedder once loaded (hybrid search; BM25 alone until then).
    pub fn open(db_path: &Path, slot: EmbedSlot) -> Result<Self, FactError> {
        Ok(Self::build(
            Backend::Sqlite(sqlite::SqliteFacts::open(db_path)?),
            slot,
            embedding::GenDb::sqlite(db_path, false),
        ))
    }

    /// Open read-only for the CLI beside a running `opc run` (no migration; refuses a newer schema).
    pub fn open_read_only(db_path: &Path, slot: EmbedSlot) -> Result<Self, FactError> {
        Ok(Self::build(
            Backend::Sqlite(sqlite::SqliteFacts::open_read_only(db_path)?),
            slot,
            embedding::GenDb::sqlite(db_path, true),
        ))
    }

    /// Open read-write on PostgreSQL, bringing memory's PostgreSQL tables up to date first
    /// (`conn.migrate(&crate::schema::postgres::COMPONENT)`). Several nodes may share the database.
    pub fn open_postgres(conn: opc_pg::Blocking, slot: EmbedSlot) -> Result<Self, FactError> {
        let gens = embedding::GenDb::Postgres(conn.clone());
        Ok(Self::build(
            Backend::Postgres(postgres::PgFacts::open(conn)?),
            slot,
            gens,
        ))
    }

    /// Open read-only on PostgreSQL, for the CLI beside running nodes: no migration; refuses a
    /// database whose memory tables are newer than this build, or that has no facts tables yet.
    pub fn open_postgres_read_only(
        conn: opc_pg::Blocking,
        slot: EmbedSlot,
    ) -> Result<Self, FactError> {
        let gens = embedding::GenDb::Postgres(conn.clone());
        Ok(Self::build(
            Backend::Postgres(postgres::PgFacts::open_read_only(conn)?),
            slot,
            gens,
        ))
    }

    /// Whether this store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        match &self.inner.backend {
            Backend::Sqlite(b) => b.is_read_only(),
            Backend::Postgres(b) => b.is_read_only(),
        }
    }

    /// The generations on disk and what to do about them ([`generation::plan`]), with the
    /// bookkeeping done when this store may write (the first generation created, a new one
    /// started, abandoned ones dropped).
    fn plan(&self) -> Result<generation::Plan, FactError> {
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
        let plan = plan_of(&self.inner.gens.list()?);
        if (plan.create.is_none() && plan.stale.is_empty()) || self.is_read_only() {
            return Ok(plan);
        }
        self.inner.gens.apply_plan(&plan)?;
        if let Some((model, _, GenerationState::Filling)) = &plan.create {
            tracing::info!(
                from = plan.active.as_deref().unwrap_or(""),
                to = %model,
                "facts: the embedding model changed; re-embedding the current facts in the background (searches keep the current vectors until it is complete)"
            );
        }
        // Read again: another process or node may have raced this one (its generation stands).
        Ok(plan_of(&self.inner.gens.list()?))
    }

    /// Facts' embedding generations as recorded (the active one, and one filling when the
    /// configured embedder changed), so a start-up can rebuild the previous embedder
    /// ([`EmbedSlot::set_previous`]).
    pub fn embedding_generations(&self) -> Result<Vec<Generation>, FactError> {
        self.inner.gens.list()
    }

    /// Embed `texts` with `model`, in calls of its preferred batch size, as int8 vectors with their
    /// scales; every vector must have the size the model declares (an error naming the version,
    /// from `ids`, or the text's place otherwise). A failure of the embedder is remembered
    /// ([`embedding::Health`]); a success lifts it.
    fn embed_checked(
        &self,
        model: &dyn Embedder,
        texts: &[&str],
        ids: Option<&[i64]>,
    ) -> Result<Vec<(Vec<i8>, f32)>, FactError> {
        let id = model.model_id();
        let want = model.dimensions();
        let mut out = Vec::with_capacity(texts.len());
        for (n, chunk) in texts.chunks(model.batch_size().max(1)).enumerate() {
            let vectors = match model.embed(chunk) {
                Ok(v) => v,
                Err(e) => {
                    self.inner.health.failed(id, &e);
                    return Err(e.into());
                }
            };
            if vectors.len() != chunk.len() {
                return Err(FactError::Invalid(format!(
                    "embedder {id:?} returned {} vectors for {} texts; the facts stay without vectors",
                    vectors.len(),
                    chunk.len()
                )));
            }
            for (i, v) in vectors.iter().enumerate() {
                if v.len() != want {
                    let at = n * model.batch_size().max(1) + i;
                    let row = match ids.and_then(|ids| ids.get(at)) {
                        Some(version) => format!("fact version {version}"),
                        None => format!("text {} of the batch", at + 1),
                    };
                    return Err(FactError::Invalid(format!(
                        "embedder {id:?} returned {} components for {row} where it declares {want}: \
                         check its `dimensions` setting; the facts stay without vectors",
                        v.len()
                    )));
                }
                out.push(quantise(v));
            }
        }
        self.inner.health.worked(id);
        Ok(out)
    }

    /// Embed `texts` with the active generation's embedder: (model id, int8 vectors with their
    /// scales). `None` when that embedder is not loaded, is known to be down, or fails now (the
    /// versions are then written without vectors and embedded later, in the background): a batch
    /// never fails, nor waits on a down embedder, because of its vectors.
    #[allow(clippy::type_complexity)]
    fn embed(
        &self,
        plan: &generation::Plan,
        texts: &[&str],
    ) -> Result<Option<(String, Vec<(Vec<i8>, f32)>)>, FactError> {
        let Some(model) = plan
            .active
            .as_deref()
            .and_then(|m| self.inner.slot.for_model(m))
        else {
            return Ok(None);
        };
        let id = model.model_id().to_string();
        if texts.is_empty() {
            return Ok(Some((id, Vec::new())));
        }
        if self.inner.health.is_down(&id) {
            return Ok(None);
        }
        match self.embed_checked(model.as_ref(), texts, None) {
            Ok(vectors) => Ok(Some((id, vectors))),
            Err(e) => {
                tracing::debug!(error = %e, "facts: the batch is written without vectors");
                Ok(None)
            }
        }
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
        if self.is_read_only() {
            return Err(read_only(&self.place()));
        }
        // Embed before taking the writer (the slow part; duplicates are embedded for nothing, rarely).
        let texts: Vec<&str> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Add { text, .. } | Op::Update { text, .. } => Some(text.trim()),
                _ => None,
            })
            .collect();
        let plan = self.plan()?;
        let embedded = self.embed(&plan, &texts)?.map(|(model, vectors)| Embedded {
            model: model.to_string(),
            by_text: texts.iter().map(|t| t.to_string()).zip(vectors).collect(),
        });
        let (applied, changes) = match &self.inner.backend {
            Backend::Sqlite(b) => {
                let (applied, changes, generation) = b.apply(
                    namespace,
                    ops,
                    provenance,
                    now_ms,
                    exchange_hash,
                    embedded.as_ref(),
                )?;
                // The in-memory vectors follow, if they were at the generation just before this one.
                if let Ok(mut cv) = self.inner.vectors.write() {
                    if cv.generation == Some(generation - 1) {
                        for id in &changes.closed {
                            cv.remove(*id);
                        }
                        if let Some(emb) = embedded.as_ref().filter(|e| e.model == cv.model) {
                            for o in &changes.opened {
                                if let Some((q, scale)) = emb.by_text.get(o.text.as_str()) {
                                    cv.insert(o.id, &o.namespace, o.recorded_at, q, *scale);
                                }
                            }
                        }
                        cv.generation = Some(generation);
                    } else {
                        cv.generation = None;
                    }
                }
                (applied, changes)
            }
            // The in-memory vectors follow the table in commit order at the next search (they
            // are never edited from here: another node may have changed the same rows since).
            Backend::Postgres(b) => b.apply(
                namespace,
                ops,
                provenance,
                now_ms,
                exchange_hash,
                embedded.as_ref(),
            )?,
        };
        if embedded.is_none() && !changes.opened.is_empty() {
            self.inner.pending.store(true, Ordering::Relaxed);
        } else if embedded.is_some() && self.inner.pending.load(Ordering::Relaxed) {
            // Versions written before the embedder loaded: a few per batch. The batch is committed:
            // a failure here only leaves them to the background filler.
            if let Err(e) = self.embed_pending(BACKFILL) {
                tracing::debug!(error = %e, "facts: backfilling vectors failed; retrying in the background");
            }
        }
        if self.inner.pending.load(Ordering::Relaxed) || plan.filling.is_some() {
            self.kick_filler();
        }
        Ok(applied)
    }

    /// Where the facts are, for messages (a file, or PostgreSQL's `host:port/name`).
    fn place(&self) -> String {
        match &self.inner.backend {
            Backend::Sqlite(b) => b.place(),
            Backend::Postgres(b) => b.place(),
        }
    }

    /// Embed up to `limit` current versions without a vector of the active generation (written
    /// before its embedder loaded, or while it was down), and up to `limit` of a generation filling
    /// (switching to it when none is left); returns how many. Nothing to do (0) when no embedder is
    /// loaded or the store is read-only.
    pub fn embed_pending(&self, limit: usize) -> Result<usize, FactError> {
        self.vector_round(limit).map(|(n, _)| n)
    }

    /// [`Self::embed_pending`], and what is left for the background filler.
    fn vector_round(&self, limit: usize) -> Result<(usize, embedding::Round), FactError> {
        if self.is_read_only() || self.inner.slot.get().is_none() {
            return Ok((0, embedding::Round::Idle));
        }
        let plan = self.plan()?;
        let mut done = 0;
        let mut waiting = false;
        let mut failed = None;
        let active = plan
            .active
            .as_deref()
            .and_then(|m| self.inner.slot.for_model(m));
        if let Some(model) = active {
            match self.embed_missing(model.as_ref(), limit) {
                Ok(n) => {
                    if n < limit {
                        self.inner.pending.store(false, Ordering::Relaxed);
                    }
                    done += n;
                }
                Err(e) => failed = Some(e),
            }
        }
        let filling = plan
            .filling
            .as_deref()
            .and_then(|m| self.inner.slot.for_model(m));
        if let Some(model) = filling {
            match self.embed_missing(model.as_ref(), limit) {
                Ok(0) => match self.inner.gens.switch(model.model_id())? {
                    // The in-memory vectors follow at the next search: they are of another model
                    // now (`current_vectors` reloads them).
                    Switch::Done => {
                        tracing::info!(model = %model.model_id(), "facts: re-embedding complete; searching the new embedding generation");
                    }
                    Switch::Lacking => waiting = true,
                    Switch::NotFilling => {}
                },
                Ok(n) => done += n,
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let round = if done > 0 {
            embedding::Round::Busy
        } else if waiting {
            embedding::Round::Waiting
        } else {
            embedding::Round::Idle
        };
        Ok((done, round))
    }

    /// Embed up to `limit` current versions without a vector of `model` and store them under it;
    /// how many.
    fn embed_missing(&self, model: &dyn Embedder, limit: usize) -> Result<usize, FactError> {
        let id = model.model_id();
        let todo = match &self.inner.backend {
            Backend::Sqlite(b) => b.unembedded(id, limit)?,
            Backend::Postgres(b) => b.unembedded(id, limit)?,
        };
        if todo.is_empty() {
            return Ok(0);
        }
        let texts: Vec<&str> = todo.iter().map(|t| t.1.as_str()).collect();
        let ids: Vec<i64> = todo.iter().map(|t| t.0).collect();
        let vectors = self.embed_checked(model, &texts, Some(&ids))?;
        let rows: Vec<(i64, Vec<i8>, f32)> = todo
            .iter()
            .zip(vectors)
            .map(|((id, _), (q, scale))| (*id, q, scale))
            .collect();
        match &self.inner.backend {
            Backend::Sqlite(b) => {
                b.store_vectors(id, &rows)?;
                // This process reloads too, at its next search.
                if let Ok(mut cv) = self.inner.vectors.write() {
                    cv.generation = None;
                }
            }
            Backend::Postgres(b) => {
                // With the text each vector is of: one erased meanwhile is not stored.
                let rows: Vec<(i64, String, Vec<i8>, f32)> = todo
                    .iter()
                    .zip(rows)
                    .map(|((_, text), (id, q, scale))| (id, text.clone(), q, scale))
                    .collect();
                b.store_vectors(id, &rows)?
            }
        }
        Ok(todo.len())
    }

    /// Start the background filler when it is not running ([`embedding::run_filler`]): it embeds
    /// what is pending and fills a new generation, with backoff while the embedder fails, and ends
    /// when there is nothing left (or the store is dropped).
    fn kick_filler(&self) {
        if self.is_read_only()
            || self.inner.slot.get().is_none()
            || self.inner.health.filler.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("facts-embedder".into())
            .spawn(move || {
                embedding::run_filler(
                    weak,
                    |inner: &Inner| &inner.health.filler,
                    |inner| {
                        let store = FactStore {
                            inner: Arc::clone(inner),
                        };
                        store.vector_round(FILL_ROUND).map(|(_, round)| round)
                    },
                )
            });
        if spawned.is_err() {
            self.inner.health.filler.store(false, Ordering::Release);
        }
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
            predicate: None,
            object: None,
            valid_from: None,
            valid_to: None,
        };
        self.apply(namespace, &[op], provenance, now_ms)
    }

    /// Versions of `namespace` in `view`, newest first (History: facts newest first, each fact's
    /// versions oldest first).
    pub fn list(&self, namespace: &str, view: View) -> Result<Vec<FactVersion>, FactError> {
        match &self.inner.backend {
            Backend::Sqlite(b) => b.list(namespace, view),
            Backend::Postgres(b) => b.list(namespace, view),
        }
    }

    /// Every version of one fact, oldest first.
    pub fn history(&self, fact_id: i64) -> Result<Vec<FactVersion>, FactError> {
        match &self.inner.backend {
            Backend::Sqlite(b) => b.history(fact_id),
            Backend::Postgres(b) => b.history(fact_id),
        }
    }

    /// The current vectors, up to date with the database: on SQLite reloaded when the generation
    /// moved (another process wrote); on PostgreSQL followed in commit order.
    fn current_vectors(
        &self,
        model: &str,
    ) -> Result<std::sync::RwLockReadGuard<'_, CurrentVectors>, FactError> {
        match &self.inner.backend {
            Backend::Sqlite(b) => {
                let generation = b.generation()?;
                let fresh = self
                    .inner
                    .vectors
                    .read()
                    .map(|cv| cv.generation == Some(generation) && cv.model == model)
                    .unwrap_or(false);
                if !fresh {
                    let loaded = b.load_vectors(model, generation)?;
                    if let Ok(mut cv) = self.inner.vectors.write() {
                        *cv = loaded;
                    }
                }
            }
            Backend::Postgres(b) => {
                let held = self
                    .inner
                    .vectors
                    .read()
                    .map(|cv| cv.model.clone())
                    .unwrap_or_default();
                if held != model {
                    // Another generation (a switch): follow its vectors from the start.
                    b.reset_follow();
                }
                b.follow(&self.inner.vectors, model)?;
                if held != model
                    && let Ok(mut cv) = self.inner.vectors.write()
                {
                    cv.model = model.to_string();
                }
            }
        }
        self.inner
            .vectors
            .read()
            .map_err(|_| FactError::Invalid("facts vectors: a search panicked".to_string()))
    }

    /// The active generation's embedder, which embeds queries (never another model's); `None`
    /// when it is not loaded (said once when the configured one is another model, filling).
    fn query_embedder(&self) -> Result<Option<Arc<dyn Embedder>>, FactError> {
        let plan = self.plan()?;
        if plan.filling.is_some() {
            self.kick_filler();
        }
        let model = plan
            .active
            .as_deref()
            .and_then(|m| self.inner.slot.for_model(m));
        if model.is_none()
            && self.inner.slot.get().is_some()
            && !self.inner.health.said_off.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                generation = plan.active.as_deref().unwrap_or(""),
                "facts: the embedder of the stored vectors is not available (the configured model is another, being filled in the background); searching by keywords only until the new vectors are complete"
            );
        }
        Ok(model)
    }

    /// The query's vector; `None` (keywords only) while `model` is known to be down, or when it
    /// fails now (then remembered as down).
    fn embed_query(&self, model: &dyn Embedder, text: &str) -> Option<Vec<f32>> {
        if self.inner.health.is_down(model.model_id()) {
            return None;
        }
        match model.embed_query(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.inner.health.failed(model.model_id(), &e);
                None
            }
        }
    }

    /// Hybrid (BM25 + vectors) search in `query.view` over `query.namespaces`. `Current` and
    /// `BelievedAt` use both lists; `ValidAt` and `History` search by BM25 alone.
    pub fn search(&self, query: &FactQuery) -> Result<Vec<FactHit>, FactError> {
        if query.namespaces.is_empty() || query.limit == 0 || query.text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let pool = search::POOL.max(query.limit);
        let bm25 = match &self.inner.backend {
            Backend::Sqlite(b) => b.bm25(&query.text, &query.namespaces, query.view, pool)?,
            Backend::Postgres(b) => b.bm25(&query.text, &query.namespaces, query.view, pool)?,
        };
        let recorded_by = match query.view {
            View::Current => Some(i64::MAX),
            View::BelievedAt(t) => Some(t),
            View::ValidAt(_) | View::History => None,
        };
        let mut vector = Vec::new();
        if let (Some(by), Some(model)) = (recorded_by, self.query_embedder()?)
            && let Some(q) = self.embed_query(model.as_ref(), &query.text)
        {
            let id = model.model_id();
            let mut best = search::Best::new(pool);
            for (vid, s) in self
                .current_vectors(id)?
                .search(&q, &query.namespaces, by, pool)
            {
                best.offer(s, vid);
            }
            if let View::BelievedAt(t) = query.view {
                match &self.inner.backend {
                    Backend::Sqlite(b) => b.score_past(id, &q, &query.namespaces, t, &mut best)?,
                    Backend::Postgres(b) => {
                        b.score_past(id, &q, &query.namespaces, t, &mut best)?
                    }
                }
            }
            vector = best.into_list();
        }
        let mut fused = search::fuse(&bm25, &vector);
        fused.truncate(query.limit);
        let ids: Vec<i64> = fused.iter().map(|f| f.0).collect();
        let found = match &self.inner.backend {
            Backend::Sqlite(b) => b.by_ids(&ids)?,
            Backend::Postgres(b) => b.by_ids(&ids)?,
        };
        let mut versions: HashMap<i64, FactVersion> =
            found.into_iter().map(|v| (v.id, v)).collect();
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
        match &self.inner.backend {
            Backend::Sqlite(b) => b.about(namespaces, subject, view),
            Backend::Postgres(b) => b.about(namespaces, subject, view),
        }
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
        let added = match &self.inner.backend {
            Backend::Sqlite(b) => b.alias(namespace, entity, alias, now_ms)?,
            Backend::Postgres(b) => b.alias(namespace, entity, alias, now_ms)?,
        };
        match added {
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
        match &self.inner.backend {
            Backend::Sqlite(b) => b.extracted(namespace, exchange_hash),
            Backend::Postgres(b) => b.extracted(namespace, exchange_hash),
        }
    }

    /// Record that an exchange was extracted for `namespace` (prefer [`FactStore::apply_marking`],
    /// which does it in the batch's transaction).
    pub fn mark_extracted(
        &self,
        namespace: &str,
        exchange_hash: &str,
        now_ms: i64,
    ) -> Result<(), FactError> {
        match &self.inner.backend {
            Backend::Sqlite(b) => b.mark_extracted(namespace, exchange_hash, now_ms),
            Backend::Postgres(b) => b.mark_extracted(namespace, exchange_hash, now_ms),
        }
    }
}
