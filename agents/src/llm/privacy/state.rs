//! One conversation's privacy state ([`PrivacyState`]: its vault), and the egress guard over it
//! ([`VaultGuard`]).
//!
//! Invariants: real values stay in the vault, behind its lock; the guard reports a value's type,
//! never the value.

use std::sync::{Arc, Mutex, MutexGuard};

use opc_privacy::{Conversation, EntityType, Held, Style};

use crate::llm::LeakCheck;

/// Real values one conversation's vault may hold; past it a call fails closed.
pub const VAULT_CAPACITY: usize = 10_000;

/// One conversation's privacy state: its vault and detection cache.
pub struct PrivacyState {
    conversation: Mutex<Conversation>,
}

impl PrivacyState {
    /// A fresh state with an empty vault.
    pub fn new(style: Style) -> Self {
        PrivacyState {
            conversation: Mutex::new(Conversation::new(fastrand::u64(..), style, VAULT_CAPACITY)),
        }
    }

    /// A fresh state for root `root` of `conversation`, its vault labelled with them so the console's
    /// vault status names the conversation (never a value).
    pub fn for_root(style: Style, root: i64, conversation: &str) -> Self {
        let state = PrivacyState::new(style);
        state.lock().vault_mut().label(root, conversation);
        state
    }

    /// The conversation (vault and per-text detections), locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, Conversation> {
        self.conversation.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many real values the vault holds (for tests and diagnostics; never the values).
    pub fn vault_len(&self) -> usize {
        self.lock().vault().len()
    }

    /// `text` with every substitute replaced by its real value.
    pub fn restore(&self, text: &str) -> String {
        self.lock().vault().restore(text).into_owned()
    }
}

/// The guard the masked request carries: every real value of the conversation's vault, but those
/// the request's structure carries (masking cannot replace them there, so they are left out: the
/// values masking returned as [`Held`]).
pub(super) struct VaultGuard(Arc<PrivacyState>, Held);

impl VaultGuard {
    /// The guard over `state`'s vault, but the `held` values.
    pub(super) fn new(state: Arc<PrivacyState>, held: Held) -> Self {
        VaultGuard(state, held)
    }
}

impl LeakCheck for VaultGuard {
    fn leak_in(&self, payload: &str) -> Option<EntityType> {
        self.0.lock().vault().leak_in_except(payload, &self.1)
    }
}
