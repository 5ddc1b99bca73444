//! Migration 4: the facts tables, their indexes, and the FTS5 index over version texts.
//!
//! Layout (and why):
//! - `memory_facts` is one row per fact (its id is what every version shares); `memory_fact_versions`
//!   one row per version. A version is never deleted and never rewritten except to be *closed*:
//!   `invalidated_at`, `valid_to`, `reason` and the `closed_*` provenance of the batch that closed it.
//! - Bi-temporal: `valid_from`/`valid_to` are world time (may be null: open), `recorded_at`/
//!   `invalidated_at` system time (Unix ms).
//! - The views are indexed queries: `Current` and `ValidAt` read the partial index of current
//!   versions; `BelievedAt(t)` is the union of current versions recorded by t (the same partial
//!   index) and closed versions whose `invalidated_at > t` (a partial index on closing time that
//!   also holds `recorded_at`, so the rows not believed at t are skipped inside the index);
//!   `History` and a fact's history read `(namespace, fact_id, id)` / `(fact_id, id)`.
//! - Exact duplicates: `content_hash` (of the normalised text) under a partial index of current
//!   versions per namespace.
//! - Graph-lite: `memory_entities` (one row per subject per namespace: display name and normalised
//!   name) and `memory_entity_aliases` (every normalised name that resolves to an entity, the
//!   canonical one included); a version links to its entity, indexed for "everything about X".
//! - Two contentless FTS5 indexes (rowid = version id), written in the same transaction as the
//!   versions, so BM25 never lags: `memory_facts_fts` holds every version (past views);
//!   `memory_facts_fts_current` only the current ones (a closed version is deleted from it, which
//!   `contentless_delete` allows), so the hot search (current facts) scores a tenth of the rows at
//!   ten versions a fact. Each row's `ns` column holds one token naming its namespace (the facts
//!   search's `ns_token`), so a search ANDs the reader's namespaces into the match instead of
//!   scoring other agents' facts and filtering them out afterwards.
//! - `memory_fact_vectors` holds a MiniLM vector per version (int8 with one scale; derived, filled
//!   when the embedder is loaded).
//! - `memory_facts_extracted` records the exchanges already extracted (by content hash), so a
//!   re-queued job does not pay for a second call.
//! - `memory_facts_meta.generation` is bumped by every write, so a process holding vectors in
//!   memory notices another process's writes.

/// The SQL of migration 4 (append-only: never edit it once released).
pub const V4: &str = "
CREATE TABLE memory_entities (
    id         INTEGER PRIMARY KEY,
    namespace  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    norm       TEXT    NOT NULL,
    created_ms INTEGER NOT NULL,
    UNIQUE (namespace, norm)
);
CREATE TABLE memory_entity_aliases (
    namespace  TEXT    NOT NULL,
    norm       TEXT    NOT NULL,
    alias      TEXT    NOT NULL,
    entity_id  INTEGER NOT NULL REFERENCES memory_entities (id),
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, norm)
) WITHOUT ROWID;
CREATE INDEX memory_entity_aliases_by_entity ON memory_entity_aliases (entity_id);

CREATE TABLE memory_facts (
    id         INTEGER PRIMARY KEY,
    namespace  TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE memory_fact_versions (
    id                  INTEGER PRIMARY KEY,
    fact_id             INTEGER NOT NULL REFERENCES memory_facts (id),
    namespace           TEXT    NOT NULL,
    text                TEXT    NOT NULL,
    subject             TEXT,
    entity_id           INTEGER REFERENCES memory_entities (id),
    content_hash        TEXT    NOT NULL,
    valid_from          INTEGER,
    valid_to            INTEGER,
    recorded_at         INTEGER NOT NULL,
    invalidated_at      INTEGER,
    reason              TEXT,
    source              TEXT    NOT NULL CHECK (source IN ('agent', 'consolidation', 'human', 'system')),
    agent               TEXT    NOT NULL,
    task                INTEGER,
    conversation        TEXT,
    source_messages     TEXT    NOT NULL DEFAULT '[]',
    model               TEXT,
    ledger_id           INTEGER,
    closed_source       TEXT,
    closed_agent        TEXT,
    closed_task         INTEGER,
    closed_conversation TEXT,
    closed_model        TEXT,
    closed_ledger_id    INTEGER
);
CREATE INDEX memory_fact_versions_current ON memory_fact_versions (namespace, recorded_at)
    WHERE invalidated_at IS NULL;
CREATE INDEX memory_fact_versions_closed ON memory_fact_versions (namespace, invalidated_at, recorded_at)
    WHERE invalidated_at IS NOT NULL;
CREATE UNIQUE INDEX memory_fact_versions_one_current ON memory_fact_versions (fact_id)
    WHERE invalidated_at IS NULL;
CREATE INDEX memory_fact_versions_by_fact ON memory_fact_versions (fact_id, id);
CREATE INDEX memory_fact_versions_history ON memory_fact_versions (namespace, fact_id, id);
CREATE INDEX memory_fact_versions_hash ON memory_fact_versions (namespace, content_hash)
    WHERE invalidated_at IS NULL;
CREATE INDEX memory_fact_versions_by_entity ON memory_fact_versions (entity_id, recorded_at)
    WHERE entity_id IS NOT NULL;

CREATE VIRTUAL TABLE memory_facts_fts USING fts5 (
    ns, text, subject,
    content = '',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE memory_facts_fts_current USING fts5 (
    ns, text, subject,
    content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE memory_fact_vectors (
    version_id INTEGER PRIMARY KEY REFERENCES memory_fact_versions (id),
    model      TEXT    NOT NULL,
    scale      REAL    NOT NULL,
    vector     BLOB    NOT NULL
);

CREATE TABLE memory_facts_extracted (
    namespace     TEXT    NOT NULL,
    exchange_hash TEXT    NOT NULL,
    at_ms         INTEGER NOT NULL,
    PRIMARY KEY (namespace, exchange_hash)
) WITHOUT ROWID;

CREATE TABLE memory_facts_meta (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
INSERT INTO memory_facts_meta (id, generation) VALUES (1, 0);
";
