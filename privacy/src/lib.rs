//! # opc-privacy — the privacy gateway
//!
//! Role: find personal data (regex recognisers plus a local NER model) in every LLM request, replace it
//! with same-type fake values kept in a per-session vault, and restore the real values in the reply,
//! including streamed replies.
//!
//! Invariants (enforced once the privacy issue lands):
//! - no detected PII value leaves the process in an LLM request when privacy is enabled;
//! - within one session a real value always maps to the same fake value, and restoring is longest-match
//!   first so that overlapping fakes never restore partially;
//! - vaults live in memory only and are dropped with their session; nothing here is ever logged.
//!
//! The gateway plugs into the agents crate's LLM call stack as one layer; agent code never sees it.
//!
//! Layout (one concern per file):
//! - [`entity`]: the typed span every part speaks;
//! - `detect/`: recognisers (one per file, a small trait), context words, the NER tier, and the
//!   [`Detector`](detect) that runs them and resolves overlaps;
//! - `vault.rs` / `fake.rs`: one vault per conversation, typed fakes from the `fake` crate, seeded;
//! - `mapping.rs` / `indexes.rs`: a vault's entries, and the indexes it keeps over them for restoring
//!   and for the egress guard (`guard.rs`), rebuilt when the vault changed;
//! - `mask.rs` / `restore.rs` / `stream.rs`: replace, restore (longest match first), and restore a stream
//!   without ever emitting half a fake.

pub mod conversation;
pub mod detect;
pub mod entity;
pub mod erase;
mod fake;
mod guard;
mod indexes;
mod mapping;
pub mod mask;
mod restore;
pub mod stream;
pub mod vault;

pub use conversation::Conversation;
pub use entity::{Entity, EntityType};
pub use guard::Held;
pub use mask::{Counts, Masked};
/// The NER's int8 kernel choice (`OPC_KERNEL`), so the binary can refuse a bad value at start-up
/// without depending on `opc-infer` itself.
pub use opc_infer::kernel;
pub use stream::StreamRestorer;
pub use vault::{Style, Vault, VaultFull};
