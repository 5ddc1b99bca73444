//! The seam at the privacy position of the call stack: the layer placed there ([`Seam`]), and the
//! per-root state it keeps for a conversation ([`RootStates`]), whose lifecycle the engine drives
//! ([`RootLifecycle`]).
//!
//! Per-root state: a layer that keeps state for a conversation (the privacy layer's vault) keeps it in a
//! [`RootStates`] registry, keyed by the root task id that every call carries ([`super::CallMeta`]). The
//! engine opens a root's state when the root's tree starts running in this process and closes it when
//! the tree has no live task, so the state lives exactly as long as the conversation's tree and never
//! outlives it.
//!
//! Why a leaf of its own: the layer at that position (`privacy`) builds a seam, and the call stack
//! (`stack`) takes one and tells the layer's calls who listens; with the seam in either, the two
//! would depend on each other.
//!
//! Invariant: a registry never creates state on a lookup: a call whose root is not open gets `None`,
//! and the layer decides what that means (the privacy layer then uses a vault for that call alone).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Layer;

/// Told when a root task's tree starts and stops running in this process.
pub trait RootLifecycle: Send + Sync {
    /// Root task `root` of `conversation` starts (or resumes) running here.
    fn root_started(&self, root: i64, conversation: &str);
    /// Root task `root`'s tree has no live task left here (finished, suspended to disk, or shut down).
    fn root_ended(&self, root: i64);
}

/// Makes a root's state from its id and conversation.
type MakeState<S> = Box<dyn Fn(i64, &str) -> S + Send + Sync>;

/// State of type `S` per running root task, made by a factory when the root starts and dropped when it
/// ends. Lookups by root id are cheap and never create state.
pub struct RootStates<S> {
    make: MakeState<S>,
    live: Mutex<HashMap<i64, Arc<S>>>,
}

impl<S: Send + Sync + 'static> RootStates<S> {
    /// A registry whose state for a root is `make(root, conversation)`.
    pub fn new(make: impl Fn(i64, &str) -> S + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(RootStates {
            make: Box::new(make),
            live: Mutex::default(),
        })
    }

    /// The state of root `root`, while it runs.
    pub fn get(&self, root: i64) -> Option<Arc<S>> {
        self.lock().get(&root).cloned()
    }

    /// How many roots have state now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no root has state now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<S>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<S: Send + Sync + 'static> RootLifecycle for RootStates<S> {
    fn root_started(&self, root: i64, conversation: &str) {
        self.lock()
            .entry(root)
            .or_insert_with(|| Arc::new((self.make)(root, conversation)));
    }

    fn root_ended(&self, root: i64) {
        // Dropped outside the lock (a state may be large); a call still holding its Arc finishes with it.
        let gone = self.lock().remove(&root);
        drop(gone);
    }
}

/// A layer for the privacy position (between trace and the router), and the per-root registries it
/// reads, whose lifecycle the engine drives.
pub struct Seam {
    /// The layer.
    pub layer: Box<dyn Layer>,
    /// Registries the layer keeps per-root state in.
    pub roots: Vec<Arc<dyn RootLifecycle>>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn root_states_live_from_start_to_end_and_lookups_never_create() {
        let made = Arc::new(AtomicU32::new(0));
        let counter = made.clone();
        let states = RootStates::new(move |root, conversation: &str| {
            counter.fetch_add(1, Ordering::SeqCst);
            format!("{root}:{conversation}")
        });
        assert!(states.get(7).is_none());
        states.root_started(7, "c-7");
        states.root_started(7, "c-7");
        assert_eq!(made.load(Ordering::SeqCst), 1);
        let held = states.get(7).unwrap();
        assert_eq!(held.as_str(), "7:c-7");
        states.root_ended(7);
        assert!(states.get(7).is_none());
        assert!(states.is_empty());
        // A call still holding the state finishes with it.
        assert_eq!(held.as_str(), "7:c-7");
    }
}
