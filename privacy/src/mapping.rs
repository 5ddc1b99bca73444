//! One mapping of a vault: a real value, its substitute and the type of the value.
//!
//! Why a module of its own: the vault keeps these, and the indexes for restoring and for the egress
//! guard are built from them. The vault caches those indexes, so it sits above them; what both need
//! sits below both, here.
//!
//! Invariant: the texts are `Arc<str>`, shared by the vault's maps and by every index built from them,
//! never copied.

use std::sync::Arc;

use crate::entity::EntityType;

/// One mapping. `Arc<str>` so the indexes share the text instead of copying it.
pub(crate) struct Entry {
    pub(crate) real: Arc<str>,
    pub(crate) sub: Arc<str>,
    pub(crate) kind: EntityType,
}
