//! What the web chat holds while it runs: the transcript behind one lock, the live channels of the
//! conversations someone watches, and the events published on them.
//!
//! Why one lock: a message is recorded and published under the same lock that opens a subscription
//! and reads its replay, so a subscriber sees every event once, in the order it was recorded.
//!
//! Invariants:
//! - a conversation has a live channel only while at least one event stream is open on it; a publish
//!   that finds no receiver left forgets the channel;
//! - a poisoned lock is taken over, not propagated: the transcript is written in transactions, so a
//!   panic elsewhere leaves it whole.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, RwLock};

use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::WebConfig;
use super::transcript::{Author, Transcript, TranscriptError};
use crate::{Card, Inbox};

/// The state pages and outbound calls share.
pub(super) struct Shared {
    pub(super) config: WebConfig,
    pub(super) inbox: Inbox,
    /// The page with the title filled in; the CSP nonce is filled in per response.
    pub(super) page: String,
    pub(super) state: Mutex<ChatState>,
    /// The gateway's standing notice (markdown), shown as the page's banner.
    pub(super) banner: RwLock<Option<String>>,
    /// Cancelled by the adapter's `shutdown`: open event streams end, so the server can stop (an SSE
    /// response never ends by itself, and graceful shutdown waits for every response).
    pub(super) closing: CancellationToken,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, ChatState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub(super) struct ChatState {
    pub(super) transcript: Transcript,
    /// Conversation → its live channel, only while at least one event stream is open on it.
    pub(super) live: HashMap<String, broadcast::Sender<WebEvent>>,
}

/// One event on a conversation's stream.
#[derive(Clone, Debug)]
pub(super) enum WebEvent {
    /// Start of a replay: the page forgets what it shows.
    Reset,
    Message {
        id: i64,
        author: Author,
        text: String,
    },
    Edit {
        id: i64,
        text: String,
    },
    Card {
        id: i64,
        card: Box<Card>,
        update: bool,
    },
    Progress(Value),
}

impl ChatState {
    /// Send `event` to conversation `id`'s open streams, if any; forget its channel once none is open.
    pub(super) fn publish(&mut self, id: &str, event: WebEvent) {
        if let Some(live) = self.live.get(id)
            && live.send(event).is_err()
        {
            self.live.remove(id);
        }
    }

    /// Record a message in conversation `id` (created if `create`) and publish it; its number, or
    /// `None` for an unknown conversation.
    pub(super) fn push(
        &mut self,
        id: &str,
        author: Author,
        text: &str,
        card: Option<&Card>,
        create: bool,
    ) -> Result<Option<i64>, TranscriptError> {
        let Some(number) = self.transcript.push(id, author, text, card, create)? else {
            return Ok(None);
        };
        self.publish(
            id,
            match card {
                Some(card) => WebEvent::Card {
                    id: number,
                    card: Box::new(card.clone()),
                    update: false,
                },
                None => WebEvent::Message {
                    id: number,
                    author,
                    text: text.to_string(),
                },
            },
        );
        Ok(Some(number))
    }
}

/// A conversation id as this adapter makes them (and as it accepts from the gateway).
pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_ids_are_short_and_plain() {
        assert!(valid_id("0123abcd"));
        assert!(!valid_id("../x"));
    }
}
