//! Per-conversation state: the vault, plus a detection cache keyed by message text, so re-masking the
//! same history on every call runs the detector only on text it has not seen.
//!
//! Invariants:
//! - the cache is bounded (entries, first in first out) and keyed by a keyed hash of the text and its
//!   length (the hasher's keys are random per conversation, so texts cannot be crafted to collide);
//! - the cache holds spans and types only, never text; masking itself (the vault lookup and the sweep)
//!   runs on every call, so a value the vault learned later is masked in old messages too;
//! - detection is a pure function of the text for the cache to be valid: the closure must not change
//!   behaviour within a conversation (the detector's config is fixed while the engine runs).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use crate::entity::Entity;
use crate::mask::Masked;
use crate::vault::{Style, Vault, VaultFull};

/// Messages whose detections the cache keeps by default.
pub const DEFAULT_CACHE_ENTRIES: usize = 4096;

type Key = (u64, usize);

/// A conversation's vault and detection cache. One per root task tree.
pub struct Conversation {
    vault: Vault,
    cache: HashMap<Key, Arc<[Entity]>>,
    order: VecDeque<Key>,
    cache_entries: usize,
    hasher: RandomState,
    hits: u64,
    misses: u64,
}

impl fmt::Debug for Conversation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conversation")
            .field("vault", &self.vault)
            .field("cached", &self.cache.len())
            .field("hits", &self.hits)
            .field("misses", &self.misses)
            .finish()
    }
}

impl Conversation {
    /// A conversation with an empty vault (see [`Vault::new`]) and a cache of
    /// [`DEFAULT_CACHE_ENTRIES`] texts.
    pub fn new(seed: u64, style: Style, capacity: usize) -> Self {
        Self::with_cache(seed, style, capacity, DEFAULT_CACHE_ENTRIES)
    }

    /// The same with a cache of `cache_entries` texts (0 disables it).
    pub fn with_cache(seed: u64, style: Style, capacity: usize, cache_entries: usize) -> Self {
        Conversation {
            vault: Vault::new(seed, style, capacity),
            cache: HashMap::new(),
            order: VecDeque::new(),
            cache_entries,
            hasher: RandomState::new(),
            hits: 0,
            misses: 0,
        }
    }

    /// The vault (for restoring and the egress guard).
    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    /// The vault, to substitute single values (such as a tool input's fields).
    pub fn vault_mut(&mut self) -> &mut Vault {
        &mut self.vault
    }

    /// Mask `text`, running `detect` only when this text's detections are not cached.
    pub fn mask_text(
        &mut self,
        detect: &dyn Fn(&str) -> Vec<Entity>,
        text: &str,
    ) -> Result<Masked, VaultFull> {
        let entities = self.detections(detect, text);
        self.vault.mask(text, &entities)
    }

    /// Mask all of a request's texts at once (see [`Vault::mask_batch`]), each detected at most once
    /// per conversation.
    pub fn mask_texts(
        &mut self,
        detect: &dyn Fn(&str) -> Vec<Entity>,
        texts: &[&str],
    ) -> Result<Vec<Masked>, VaultFull> {
        let entities: Vec<Arc<[Entity]>> =
            texts.iter().map(|t| self.detections(detect, t)).collect();
        let items: Vec<(&str, &[Entity])> = texts
            .iter()
            .zip(&entities)
            .map(|(t, e)| (*t, &e[..]))
            .collect();
        self.vault.mask_batch(&items)
    }

    /// The detections for `text`, from the cache or from `detect` (then cached).
    fn detections(&mut self, detect: &dyn Fn(&str) -> Vec<Entity>, text: &str) -> Arc<[Entity]> {
        let key = (self.hasher.hash_one(text), text.len());
        if let Some(entities) = self.cache.get(&key) {
            self.hits += 1;
            return entities.clone();
        }
        self.misses += 1;
        let entities: Arc<[Entity]> = detect(text).into();
        if self.cache_entries > 0 {
            if self.order.len() >= self.cache_entries
                && let Some(old) = self.order.pop_front()
            {
                self.cache.remove(&old);
            }
            self.order.push_back(key);
            self.cache.insert(key, entities.clone());
        }
        entities
    }

    /// Texts answered from the cache, and texts that ran the detector.
    pub fn cache_stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::cell::Cell;

    use crate::entity::EntityType;

    use super::*;

    fn emails(text: &str) -> Vec<Entity> {
        let mut out = Vec::new();
        let mut offset = 0;
        for word in text.split(' ') {
            if word.contains('@') {
                out.push(Entity {
                    kind: EntityType::Email,
                    start: offset,
                    end: offset + word.len(),
                    score: 1.0,
                });
            }
            offset += word.len() + 1;
        }
        out
    }

    #[test]
    fn detection_runs_once_per_text() {
        let mut c = Conversation::new(1, Style::Fake, 100);
        let calls = Cell::new(0);
        let detect = |t: &str| {
            calls.set(calls.get() + 1);
            emails(t)
        };
        let history = ["write to a@x.io", "and b@y.io", "thanks"];
        let first: Vec<Masked> = history
            .iter()
            .map(|t| c.mask_text(&detect, t).unwrap())
            .collect();
        let again: Vec<Masked> = history
            .iter()
            .map(|t| c.mask_text(&detect, t).unwrap())
            .collect();
        assert_eq!(calls.get(), 3);
        assert_eq!(first, again);
        assert_eq!(c.cache_stats(), (3, 3));
        c.mask_text(&detect, "new c@z.io").unwrap();
        assert_eq!(calls.get(), 4);
        assert_eq!(c.vault().len(), 3);
        let batch = c.mask_texts(&detect, &history).unwrap();
        assert_eq!(batch, first);
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut c = Conversation::with_cache(1, Style::Fake, 100, 2);
        let calls = Cell::new(0);
        let detect = |t: &str| {
            calls.set(calls.get() + 1);
            emails(t)
        };
        for t in ["one", "two", "three", "one"] {
            c.mask_text(&detect, t).unwrap();
        }
        // "one" was evicted by "three", so it ran again.
        assert_eq!(calls.get(), 4);
        assert_eq!(c.cache.len(), 2);
    }
}
