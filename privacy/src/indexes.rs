//! The indexes a vault keeps for restoring and for the egress guard, and when they are rebuilt.
//!
//! Why here: the vault owns them (its public calls take `&self` and share one copy between all the
//! calls of a conversation), while the index types are built from the vault's entries alone; this
//! module sits between the two, so the vault names a cache, not the guard's or the restorer's rules.
//!
//! Invariants:
//! - each index is tagged with the number of entries it was built for; a vault only ever appends
//!   entries, so an index is current exactly when that number is the vault's length;
//! - indexes are built lazily, once per change of the vault, and shared by reference counting, so a
//!   call that adds nothing pays only a lock and a clone of an `Arc`;
//! - the guard's index is first an NFA (cheap to build while values keep arriving), then, once it has
//!   been used a few times unchanged, a DFA (fast to search in the steady state), for a vault of at
//!   most `FAST_MAX_VALUES` values.

use std::sync::Arc;

use crate::guard::GuardIndex;
use crate::mapping::Entry;
use crate::restore::RestoreIndex;

/// Uses of an unchanged guard index after which it is rebuilt as a DFA (a vault that stopped growing,
/// as in later calls of a conversation), and the most values for which that is done (a DFA's build
/// time and memory grow fast with the number of patterns).
const FAST_AFTER_USES: u32 = 4;
const FAST_MAX_VALUES: usize = 1000;

/// Indexes built from a vault's entries, each tagged with the entry count it was built for.
#[derive(Default)]
pub(crate) struct Indexes {
    restore: Option<(usize, Arc<RestoreIndex>)>,
    guard: Option<GuardSlot>,
}

/// The guard's index and how often it was used since the vault last changed.
struct GuardSlot {
    version: usize,
    index: Arc<GuardIndex>,
    uses: u32,
    fast: bool,
}

impl Indexes {
    /// The index for restoring `entries`, rebuilt when they changed since it was last built.
    pub(crate) fn restore(&mut self, entries: &[Entry]) -> Arc<RestoreIndex> {
        match &self.restore {
            Some((n, index)) if *n == entries.len() => index.clone(),
            _ => {
                let index = Arc::new(RestoreIndex::build(entries));
                self.restore = Some((entries.len(), index.clone()));
                index
            }
        }
    }

    /// The index for the egress guard and for sweeping known values of `entries`, rebuilt when they
    /// changed: as an NFA first, as a DFA once used a few times unchanged.
    pub(crate) fn guard(&mut self, entries: &[Entry]) -> Arc<GuardIndex> {
        let version = entries.len();
        if let Some(slot) = &mut self.guard
            && slot.version == version
        {
            slot.uses += 1;
            if !slot.fast && slot.uses >= FAST_AFTER_USES && version <= FAST_MAX_VALUES {
                slot.index = Arc::new(GuardIndex::build(entries, true));
                slot.fast = true;
            }
            return slot.index.clone();
        }
        let index = Arc::new(GuardIndex::build(entries, false));
        self.guard = Some(GuardSlot {
            version,
            index: index.clone(),
            uses: 0,
            fast: false,
        });
        index
    }
}
