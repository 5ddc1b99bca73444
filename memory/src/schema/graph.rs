//! Migration 5: graph memory, the relations between entities, as columns of the fact versions.
//!
//! Layout (and why):
//! - An edge is a fact VERSION with a `predicate` ("leads") and an `object` (as written), resolved
//!   through the alias table like the subject (`object_entity_id`, per namespace). The edge lives and
//!   dies with its version, so it is bi-temporal for free: closing or replacing a version closes its
//!   edge, and `BelievedAt(t)` shows the graph as it was believed at t. No separate edge table means
//!   no second write to keep in step with the versions.
//! - A version is an edge iff `object_entity_id IS NOT NULL` (which implies a subject entity: the
//!   store never links an object without a subject). Two indexes cover the traversal, one per
//!   direction: by subject entity and by object entity, each then by `invalidated_at`, so the
//!   current edges of an entity are one prefix (`invalidated_at IS NULL`, `Current`) and its closed
//!   ones follow in closing order (the `invalidated_at > t` half of `BelievedAt(t)`, a range in the
//!   same index); the other end and `recorded_at` are in the index too, so the walk and the choice
//!   of the nearest `max_edges` edges read no table row (covering), whatever the view.
//! - Why not four partial indexes (current / closed × out / in): a walk step matches "subject = x OR
//!   object = x", which SQLite answers with one index per OR term (MULTI-INDEX OR) only when each
//!   index's own WHERE is implied by its term alone; `entity_id = x` implies `entity_id IS NOT
//!   NULL`, never `invalidated_at IS NULL`. (Measured: with the partial ones SQLite scanned the
//!   namespace; `memory/benches/graph.rs`.) PostgreSQL plans the same OR as a BitmapOr of the two.
//! - Existing versions get NULLs (no relation): nothing is rewritten.

/// The SQL of migration 5 (append-only: never edit it once released).
pub const V5: &str = "
ALTER TABLE memory_fact_versions ADD COLUMN predicate TEXT;
ALTER TABLE memory_fact_versions ADD COLUMN object TEXT;
ALTER TABLE memory_fact_versions ADD COLUMN object_entity_id INTEGER REFERENCES memory_entities (id);
CREATE INDEX memory_fact_edges_out
    ON memory_fact_versions (entity_id, invalidated_at, object_entity_id, recorded_at)
    WHERE entity_id IS NOT NULL;
CREATE INDEX memory_fact_edges_in
    ON memory_fact_versions (object_entity_id, invalidated_at, entity_id, recorded_at)
    WHERE object_entity_id IS NOT NULL;
";
