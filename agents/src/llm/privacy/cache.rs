//! The detection cache shared by every conversation ([`DetectCache`]), for the texts they have in
//! common.
//!
//! Invariant: it holds spans, never text, and is bounded ([`SHARED_CACHE_ENTRIES`]).

use std::sync::{Arc, Mutex};

use opc_privacy::detect::Detector;

/// How many texts' detections [`DetectCache`] keeps; past it, it starts again empty.
const SHARED_CACHE_ENTRIES: usize = 4096;

/// Detections shared by every conversation, for the texts they have in common: each agent's system
/// prompt and tool descriptions repeat in every conversation, and with the NER model a text costs
/// milliseconds. Keyed by a keyed hash of the text, its length, and whether the model was in use (a
/// result from before the model landed must not stand in for one with it). Holds spans, never text.
pub(super) struct DetectCache {
    hasher: std::hash::RandomState,
    map: Mutex<std::collections::HashMap<CacheKey, Arc<[opc_privacy::Entity]>>>,
}

/// (keyed hash of the text, its length, whether the model was in use).
type CacheKey = (u64, usize, bool);

impl DetectCache {
    /// An empty cache.
    pub(super) fn new() -> Self {
        DetectCache {
            hasher: std::hash::RandomState::new(),
            map: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// What `detector` finds in `text`, from the cache when it was asked before.
    pub(super) fn detect(&self, detector: &Detector, text: &str) -> Vec<opc_privacy::Entity> {
        use std::hash::BuildHasher;
        let key = (
            self.hasher.hash_one(text),
            text.len(),
            detector.uses_model(),
        );
        let map = || self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = map().get(&key) {
            return hit.to_vec();
        }
        let found = detector.detect(text);
        let mut map = map();
        if map.len() >= SHARED_CACHE_ENTRIES {
            map.clear();
        }
        map.insert(key, found.clone().into());
        found
    }
}
