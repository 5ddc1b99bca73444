//! One conformance suite for every backend of the engine's [`Store`] seam: each test runs the same
//! scenario against SQLite (a file in a temp dir) and PostgreSQL (a fresh database on the
//! throw-away server, `opc_tests::postgres`), through `Arc<dyn Store>` as the engine holds it.
//!
//! What it pins down is the seam's contract (`agents/src/store/seam.rs`): atomic operations, durable
//! when they resolve Ok, transitions checked, approvals decided once, recall rows written with the
//! change they describe. Without a PostgreSQL server the PostgreSQL half skips with one line on a
//! developer's machine and fails under CI (`opc-testgate`, group `postgres`).
//!
//! One module per concern, as the store's own files are split.

#![allow(clippy::unwrap_used)]

mod store_conformance {
    mod approvals;
    pub mod harness;
    mod ledger;
    mod lifecycle;
    mod memory_jobs;
    mod notices;
    mod tasks;
    mod tool_calls;
}
