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
//! Map: [`schema_sql`] (migration 4), [`time`] (RFC 3339), [`entities`] (subjects, aliases),
//! [`apply`] (a batch in one transaction), [`query`] (the views), [`search`] (hybrid BM25 + vectors),
//! [`ops`] (the `record_facts` tool), [`prompt`] (the memory calls' text), [`json`] (renderings).

pub mod apply;
pub mod entities;
pub mod json;
pub mod ops;
pub mod prompt;
pub mod query;
pub mod schema_sql;
pub mod search;
pub mod time;

#[cfg(test)]
mod tests;

use std::path::Path;

use crate::embed::EmbedSlot;

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
#[allow(dead_code)] // skeleton: filled in next
pub struct FactStore {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    #[allow(dead_code)]
    slot: EmbedSlot,
}

impl FactStore {
    /// Open (migrating) read-write. `slot` gives the embedder once loaded (hybrid search; BM25 alone until then).
    pub fn open(db_path: &Path, slot: EmbedSlot) -> Result<Self, FactError> {
        let _ = db_path;
        let _ = FactStore {
            inner: std::sync::Arc::new(Inner { slot }),
        };
        todo!()
    }

    /// Open read-only for the CLI beside a running `opc run` (no migration; refuses a newer schema).
    pub fn open_read_only(db_path: &Path, slot: EmbedSlot) -> Result<Self, FactError> {
        let _ = (db_path, slot);
        todo!()
    }

    /// Apply one batch to `namespace` in ONE transaction (see [`apply`]).
    pub fn apply(
        &self,
        namespace: &str,
        ops: &[Op],
        provenance: &Provenance,
        now_ms: i64,
    ) -> Result<Applied, FactError> {
        let _ = (namespace, ops, provenance, now_ms);
        todo!()
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
        let _ = (namespace, text, subject, provenance, now_ms);
        todo!()
    }

    /// Versions of `namespace` in `view`, newest first (History: by fact, then version).
    pub fn list(&self, namespace: &str, view: View) -> Result<Vec<FactVersion>, FactError> {
        let _ = (namespace, view);
        todo!()
    }

    /// Every version of one fact, oldest first.
    pub fn history(&self, fact_id: i64) -> Result<Vec<FactVersion>, FactError> {
        let _ = fact_id;
        todo!()
    }

    /// Hybrid (BM25 + vectors) search in `query.view` (Current or BelievedAt) over `query.namespaces`.
    pub fn search(&self, query: &FactQuery) -> Result<Vec<FactHit>, FactError> {
        let _ = query;
        todo!()
    }

    /// Graph-lite: versions in `view` linked to the entity `subject` names (normalised, aliases).
    pub fn about(
        &self,
        namespaces: &[String],
        subject: &str,
        view: View,
    ) -> Result<Vec<FactVersion>, FactError> {
        let _ = (namespaces, subject, view);
        todo!()
    }

    /// Whether an exchange with this content hash was already extracted for `namespace`.
    pub fn extracted(&self, namespace: &str, exchange_hash: &str) -> Result<bool, FactError> {
        let _ = (namespace, exchange_hash);
        todo!()
    }

    /// Record that an exchange was extracted for `namespace`.
    pub fn mark_extracted(
        &self,
        namespace: &str,
        exchange_hash: &str,
        now_ms: i64,
    ) -> Result<(), FactError> {
        let _ = (namespace, exchange_hash, now_ms);
        todo!()
    }
}
