//! The detection cache shared by every conversation ([`DetectCache`]), for the texts they have in
//! common: each agent's system prompt, and the pieces of text that come back in later
//! conversations (a message recalled into another conversation's request, see [`super::parts`]).
//!
//! Why: a conversation's vault and its own cache start empty with every root task, so without this
//! every new conversation would run the NER model again over text the process has read before. With
//! the model a text costs milliseconds; a recalled block of a dozen messages cost a new conversation
//! hundreds (issue 38).
//!
//! Invariants:
//! - a cached detection is the detection of that exact text by this layer's detector (its options are
//!   fixed for the layer's life; a reload builds a new layer and a new cache), with or without the NER
//!   model as the key says: a result from before the model landed never stands in for one with it;
//! - keyed by a keyed hash of the text (random keys per process, so texts cannot be crafted to
//!   collide) and its length; it holds spans, never text;
//! - bounded ([`SHARED_CACHE_ENTRIES`], first in first out), so memory does not grow with traffic;
//! - what is cached is detection only: masking (the vault's substitutes, the sweep) runs per
//!   conversation on every call, since substitutes are per-conversation vault entries.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use opc_privacy::Entity;
use opc_privacy::detect::Detector;

use super::parts::parts;

/// How many texts' detections [`DetectCache`] keeps; past it, the oldest go first. A few hundred
/// bytes each (spans only): a few MB at most.
const SHARED_CACHE_ENTRIES: usize = 16_384;

/// (keyed hash of the text, its length, whether the model was in use).
type CacheKey = (u64, usize, bool);

/// Detections shared by every conversation (see the module doc).
pub(super) struct DetectCache {
    hasher: std::hash::RandomState,
    map: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<CacheKey, Arc<[Entity]>>,
    order: VecDeque<CacheKey>,
}

impl Entries {
    fn insert(&mut self, key: CacheKey, found: Arc<[Entity]>) {
        if self.map.insert(key, found).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > SHARED_CACHE_ENTRIES {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

impl DetectCache {
    /// An empty cache.
    pub(super) fn new() -> Self {
        DetectCache {
            hasher: std::hash::RandomState::new(),
            map: Mutex::new(Entries::default()),
        }
    }

    fn key(&self, detector: &Detector, text: &str) -> CacheKey {
        (
            self.hasher.hash_one(text),
            text.len(),
            detector.uses_model(),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Detect every text of `texts` the cache does not hold yet, together (the NER model reads a
    /// batch for far less per text than one text at a time), and keep the results.
    pub(super) fn prefetch(&self, detector: &Detector, texts: &[&str]) {
        let mut missing: Vec<(&str, CacheKey)> = Vec::new();
        {
            let entries = self.lock();
            for &text in texts {
                let key = self.key(detector, text);
                if !entries.map.contains_key(&key) && !missing.iter().any(|(_, k)| *k == key) {
                    missing.push((text, key));
                }
            }
        }
        if missing.is_empty() {
            return;
        }
        let batch: Vec<&str> = missing.iter().map(|(text, _)| *text).collect();
        let found = detector.detect_batch(&batch);
        let mut entries = self.lock();
        for ((_, key), found) in missing.into_iter().zip(found) {
            entries.insert(key, found.into());
        }
    }

    /// What `detector` finds in `text`, from the cache when it was asked before.
    pub(super) fn detect(&self, detector: &Detector, text: &str) -> Arc<[Entity]> {
        let key = self.key(detector, text);
        if let Some(hit) = self.lock().map.get(&key) {
            return hit.clone();
        }
        let found: Arc<[Entity]> = detector.detect(text).into();
        self.lock().insert(key, found.clone());
        found
    }

    /// What `detector` finds in `text`, part by part ([`parts`]): each part from the cache or detected
    /// alone, its spans moved to the part's place in `text`.
    pub(super) fn detect_parts(&self, detector: &Detector, text: &str) -> Vec<Entity> {
        let mut out = Vec::new();
        for part in parts(text) {
            let offset = part.start;
            out.extend(self.detect(detector, &text[part]).iter().map(|e| Entity {
                start: e.start + offset,
                end: e.end + offset,
                ..*e
            }));
        }
        out
    }

    /// How many texts the cache holds (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use opc_privacy::EntityType;
    use opc_privacy::detect::{DetectOptions, NerSlot};

    use super::*;

    fn detector() -> Detector {
        Detector::new(
            DetectOptions {
                types: EntityType::ALL.to_vec(),
                whitelist: Vec::new(),
                threshold: 0.5,
            },
            NerSlot::default(),
        )
    }

    #[test]
    fn a_recalled_block_is_detected_part_by_part_with_the_spans_in_place() {
        let detector = detector();
        let cache = DetectCache::new();
        let said = "Write to dana.whitfield@example.com about the invoice";
        // The message, detected when it was said.
        let alone = cache.detect(&detector, said);
        assert_eq!(alone.len(), 1);
        let held = cache.len();
        let block = format!(
            "Relevant memory:\n- [29 November 2026, user] {said}\n- [29 November 2026, ceo] Done.\n\nTask:\n"
        );
        let found = cache.detect_parts(&detector, &block);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].text(&block), "dana.whitfield@example.com");
        assert_eq!(found[0].kind, EntityType::Email);
        // The message itself was answered from the cache: only the other parts are new.
        let parts = parts(&block).len();
        assert_eq!(cache.len(), held + parts - 1);
        // Whole-text detection finds the same spans.
        let whole: Vec<(usize, usize)> = detector
            .detect(&block)
            .iter()
            .map(|e| (e.start, e.end))
            .collect();
        let by_parts: Vec<(usize, usize)> = found.iter().map(|e| (e.start, e.end)).collect();
        assert_eq!(whole, by_parts);
    }

    #[test]
    fn prefetch_detects_what_is_missing_and_the_cache_is_bounded() {
        let detector = detector();
        let cache = DetectCache::new();
        cache.prefetch(&detector, &["call +1 415 555 0132", "hello", "hello"]);
        assert_eq!(cache.len(), 2);
        let phone = cache.detect(&detector, "call +1 415 555 0132");
        assert_eq!(phone.len(), 1);
        assert_eq!(cache.len(), 2, "answered from the cache");
        let mut entries = Entries::default();
        for i in 0..SHARED_CACHE_ENTRIES + 10 {
            entries.insert((i as u64, 1, false), Arc::from(Vec::new()));
        }
        assert_eq!(entries.map.len(), SHARED_CACHE_ENTRIES);
        assert_eq!(entries.order.len(), SHARED_CACHE_ENTRIES);
        assert!(
            !entries.map.contains_key(&(0, 1, false)),
            "the oldest went first"
        );
    }
}
