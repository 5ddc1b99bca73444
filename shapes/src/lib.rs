//! # opc-shapes — the vocabulary the config and the privacy detector share
//!
//! Role: the one list of credential shapes ([`credentials`]) and the one list of entity types
//! ([`EntityType`]). The config validator (`opc-hierarchy`) rejects inline secrets and checks
//! `detectTypes` with them; the privacy crate masks the same credentials, keeps their vendor prefix in
//! fakes, and tags its spans with the same types. One list in one place means the validator and the
//! gateway can never disagree about what a key looks like.
//!
//! Invariant: no dependencies. The config crate parses YAML and must not build the privacy crate's ML
//! stack (candle, tokenizers, gemm), phone metadata or zip; `tests/tests/crate_graph.rs` checks that.

pub mod credentials;
pub mod entity;

pub use entity::{EntityType, served_by_ner};
