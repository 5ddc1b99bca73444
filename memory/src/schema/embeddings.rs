//! Migration 6: embedding generations — vectors of several models side by side while the stores
//! re-embed into a new one (applied with the others by [`super::migrate`]).
//!
//! - `memory_embedding_generations`: per store (`recall`, `facts`), each generation's key (the
//!   embedder's model id, which names the model and its dimensions), its descriptor (the JSON a
//!   start-up needs to build that embedder again — provider, model, dimensions, base URL, the NAME
//!   of the key's environment variable; never a secret) and its state: `active` (searched) or
//!   `filling` (being embedded in the background). At most one active generation per store (a
//!   partial unique index says so). `store` and `state` are not CHECKed in SQL: the code writes
//!   only those values and reads anything else as `filling`, and `opc privacy erase` (which may
//!   rewrite any text column of any table, and whose tests write one into each) stays generic.
//! - `recall_vectors` and `memory_fact_vectors` are keyed by (row, model) from here on, so a row may
//!   hold its vector of the active generation and of the filling one at once. SQLite cannot change a
//!   primary key in place: each table is copied into a new one and renamed (once, inside the
//!   migration's transaction).
//! - A database with vectors already (MiniLM's, from before generations) gets that model's
//!   generation inferred as `active` — the most common model among its vectors, described as the
//!   local provider — so nothing is re-embedded by the upgrade.

/// Migration 6: the generations table, and the vector tables keyed by (row, model).
pub const V6: &str = "
CREATE TABLE memory_embedding_generations (
    store      TEXT    NOT NULL,
    model      TEXT    NOT NULL,
    descriptor TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    started_ms INTEGER NOT NULL,
    PRIMARY KEY (store, model)
) WITHOUT ROWID;
CREATE UNIQUE INDEX memory_embedding_generations_one_active
    ON memory_embedding_generations (store) WHERE state = 'active';

CREATE TABLE recall_vectors_by_model (
    seq    INTEGER NOT NULL REFERENCES recall_messages (seq),
    model  TEXT    NOT NULL,
    vector BLOB    NOT NULL,
    PRIMARY KEY (seq, model)
);
INSERT INTO recall_vectors_by_model (seq, model, vector) SELECT seq, model, vector FROM recall_vectors;
DROP TABLE recall_vectors;
ALTER TABLE recall_vectors_by_model RENAME TO recall_vectors;

CREATE TABLE memory_fact_vectors_by_model (
    version_id INTEGER NOT NULL REFERENCES memory_fact_versions (id),
    model      TEXT    NOT NULL,
    scale      REAL    NOT NULL,
    vector     BLOB    NOT NULL,
    PRIMARY KEY (version_id, model)
);
INSERT INTO memory_fact_vectors_by_model (version_id, model, scale, vector)
    SELECT version_id, model, scale, vector FROM memory_fact_vectors;
DROP TABLE memory_fact_vectors;
ALTER TABLE memory_fact_vectors_by_model RENAME TO memory_fact_vectors;

INSERT INTO memory_embedding_generations (store, model, descriptor, state, started_ms)
    SELECT 'recall', model,
           json_object('provider', 'local', 'model', model, 'dimensions', length(vector) / 4),
           'active', CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT model, MIN(vector) AS vector, COUNT(*) AS n FROM recall_vectors GROUP BY model
          ORDER BY n DESC LIMIT 1);
INSERT INTO memory_embedding_generations (store, model, descriptor, state, started_ms)
    SELECT 'facts', model,
           json_object('provider', 'local', 'model', model, 'dimensions', length(vector)),
           'active', CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT model, MIN(vector) AS vector, COUNT(*) AS n FROM memory_fact_vectors GROUP BY model
          ORDER BY n DESC LIMIT 1);
";
