//! The restoring sink ([`RestoringSink`]): the request's sink for streamed text, wrapped in place so
//! the consumer sees real values, never a substitute, whole or in part.
//!
//! Invariants: it holds back only what may still become a substitute (a [`StreamRestorer`]), hands
//! on the rest at once, flushes what it holds at the end, and drops it on a retry's restart.

use std::sync::{Arc, Mutex, MutexGuard};

use opc_privacy::StreamRestorer;

use super::state::PrivacyState;
use crate::llm::{DeltaSink, StreamDelta, TokenSink};

/// The request's sink, wrapped: restores streamed text, holding back only a possible substitute prefix.
pub(super) struct RestoringSink {
    inner: TokenSink,
    state: Arc<PrivacyState>,
    restorer: Mutex<StreamRestorer>,
}

impl RestoringSink {
    /// `inner`, restoring with `state`'s vault.
    pub(super) fn new(inner: TokenSink, state: Arc<PrivacyState>) -> Self {
        RestoringSink {
            inner,
            state,
            restorer: Mutex::new(StreamRestorer::new()),
        }
    }

    fn restorer(&self) -> MutexGuard<'_, StreamRestorer> {
        self.restorer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The end of the stream: hand on what was held back.
    pub(super) fn finish(&self) {
        let rest = {
            let conversation = self.state.lock();
            self.restorer().finish(conversation.vault())
        };
        if !rest.is_empty() {
            self.inner.send(StreamDelta::Text(rest));
        }
    }
}

impl DeltaSink for RestoringSink {
    fn send(&self, delta: StreamDelta) {
        match delta {
            StreamDelta::Text(text) => {
                let ready = {
                    let conversation = self.state.lock();
                    self.restorer().push(conversation.vault(), &text)
                };
                if !ready.is_empty() {
                    self.inner.send(StreamDelta::Text(ready));
                }
            }
            StreamDelta::Restart => {
                self.restorer().reset();
                self.inner.send(StreamDelta::Restart);
            }
        }
    }
}
