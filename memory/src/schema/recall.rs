//! Migration 2: recall memory's tables (applied with the others by [`super::migrate`]; the recall
//! store only reads and writes them).
//!
//! - `recall_messages`: append-only (triggers refuse UPDATE and DELETE). `seq` is the sequence number
//!   of the write: `AUTOINCREMENT` never reuses a value, and SQLite's single writer commits rows in
//!   `seq` order, so "everything after seq N" is exactly what an indexer has not seen. That range is the
//!   outbox: it is written in the same transaction as the row, because it *is* the row.
//! - `recall_vectors`: one embedding per message (f32 little-endian blob), derived and rebuildable.

/// Migration 2: recall messages (with provenance and sequence) and their vectors.
pub const V2: &str = "
CREATE TABLE IF NOT EXISTS recall_messages (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace    TEXT    NOT NULL,
    author       TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    task         TEXT,
    thread       TEXT,
    source_id    TEXT,
    time_ms      INTEGER NOT NULL,
    content_hash TEXT    NOT NULL,
    text         TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS recall_messages_thread ON recall_messages(conversation, thread, seq);
CREATE TRIGGER IF NOT EXISTS recall_messages_no_update BEFORE UPDATE ON recall_messages
    BEGIN SELECT RAISE(ABORT, 'recall_messages is append-only'); END;
CREATE TRIGGER IF NOT EXISTS recall_messages_no_delete BEFORE DELETE ON recall_messages
    BEGIN SELECT RAISE(ABORT, 'recall_messages is append-only'); END;
CREATE TABLE IF NOT EXISTS recall_vectors (
    seq    INTEGER PRIMARY KEY REFERENCES recall_messages(seq),
    model  TEXT    NOT NULL,
    vector BLOB    NOT NULL
);
";
