//! Migration 1: core memory blocks and their edit history, the tables of the blocks module.
//!
//! Kept with the other migrations (not beside the blocks' code) so the migration list depends on no
//! feature; the blocks only read and write what this made.

/// The SQL of migration 1 (append-only: never edit it once released).
///
/// A block is keyed by `(namespace, label)`. `namespace` is `agent/<id>` for an agent's own blocks
/// and `shared` for `sharedBlocks`. `config_value` is the config value last applied, so a start can
/// tell an admin's edit of the config (apply it, record it) from the agents' edits since (keep them).
pub const V1: &str = "
CREATE TABLE memory_blocks (
    namespace    TEXT    NOT NULL,
    label        TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    value        TEXT    NOT NULL,
    char_limit   INTEGER NOT NULL,
    read_only    INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    config_value TEXT    NOT NULL,
    updated_ms   INTEGER NOT NULL,
    PRIMARY KEY (namespace, label)
) WITHOUT ROWID;
CREATE TABLE memory_block_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace  TEXT    NOT NULL,
    label      TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    operation  TEXT    NOT NULL,
    author     TEXT    NOT NULL,
    task_id    INTEGER,
    at_ms      INTEGER NOT NULL,
    old_value  TEXT,
    new_value  TEXT    NOT NULL
);
CREATE INDEX memory_block_history_by_label ON memory_block_history (label, id);
";
