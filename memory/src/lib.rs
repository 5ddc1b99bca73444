//! # opc-memory — organisational memory
//!
//! Role: core memory blocks (always in an agent's context, self-edited through tools), recall memory
//! (conversation history searched by SQLite + tantivy + vectors fused with RRF), semantic facts, and the
//! namespace ACL that decides which agent may read or write which memory, using the
//! [`opc_hierarchy::OrgTree`].
//!
//! Map:
//! - [`acl`]: the namespace ACL, drawn from the org tree;
//! - [`blocks`]: core memory blocks (seeded from the config, edited under the ACL with optimistic
//!   concurrency and a full history);
//! - [`facts`]: semantic facts, bi-temporal versions never destroyed, subjects as entities, hybrid
//!   search;
//! - [`recall`]: conversation history, searched by BM25 and by meaning (vectors), fused;
//! - [`embed`]: the MiniLM embedder that recall and facts share;
//! - [`schema`]: the one owner of memory's SQL: every table's versioned migration in the engine's
//!   SQLite file (the features depend on it, never the reverse).
//!
//! Invariants:
//! - every read and write is checked against the org tree before it touches storage;
//! - a block's value never exceeds its limit, and concurrent edits are serialised by a version check;
//! - every entry carries immutable provenance (author, task, thread, time, content hash).

pub mod acl;
pub mod blocks;
pub mod embed;
pub mod facts;
pub mod recall;
pub mod schema;
#[cfg(test)]
mod test_support;
