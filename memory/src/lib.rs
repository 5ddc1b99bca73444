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
//! - [`schema`]: the memory tables' own versioned migrations in the engine's SQLite file.
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
