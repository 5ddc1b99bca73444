//! Migration 3: `recall_erasures`, the record of `opc privacy erase` runs over recall memory.
//!
//! One row per erasure: when, the value's length in characters, the counts per table, and `pending`
//! (the rows still to re-index, cleared once the derived indexes are in line). Never the value nor a
//! hash of it. The recall store's erase module writes and reads it; the table lives here with the
//! other migrations so that the migration list depends on no feature.

/// The SQL of migration 3 (append-only: never edit it once released).
pub const V3: &str = "
CREATE TABLE IF NOT EXISTS recall_erasures (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms       INTEGER NOT NULL,
    value_chars INTEGER NOT NULL,
    counts      TEXT    NOT NULL,
    pending     TEXT
);
";
