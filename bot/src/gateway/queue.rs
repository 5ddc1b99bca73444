//! Messages waiting for their conversation: a conversation answers one message at a time (the engine
//! refuses a second root while one runs), so a message that arrives while its conversation is busy
//! waits here and is answered after the current one, instead of being refused and lost.
//!
//! Invariants:
//! - a conversation is *busy* from the moment the gateway starts (or finds) a request in it until
//!   [`Queues::next`] finds nothing waiting; while busy, new messages queue instead of starting;
//! - order is kept: first in, first answered;
//! - bounded: at most `bound` messages wait per conversation; past it [`Queues::admit`] hands the
//!   message back, to be refused with a notice (never dropped silently);
//! - one lock, never held across an `.await`; memory is per busy conversation only (an idle
//!   conversation has no entry).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// What to do with a message in a conversation.
#[derive(Debug, PartialEq)]
pub enum Admit<T> {
    /// The conversation was idle and is now busy with this message: start it.
    Start(T),
    /// The conversation is busy: the message waits.
    Queued {
        /// Its place in line; 1 = next.
        position: usize,
    },
    /// The conversation is busy and `bound` messages already wait: refuse it, saying so.
    Full(T),
}

/// The waiting lines of every busy conversation.
pub struct Queues<T> {
    bound: usize,
    busy: Mutex<HashMap<String, VecDeque<T>>>,
}

impl<T> Queues<T> {
    /// At most `bound` waiting messages per conversation.
    pub fn new(bound: usize) -> Queues<T> {
        Queues {
            bound,
            busy: Mutex::new(HashMap::new()),
        }
    }

    /// How many messages may wait per conversation.
    pub fn bound(&self) -> usize {
        self.bound
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<T>>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start `item` in an idle conversation, or queue it behind the running one.
    pub fn admit(&self, conversation: &str, item: T) -> Admit<T> {
        let mut busy = self.lock();
        match busy.get_mut(conversation) {
            None => {
                busy.insert(conversation.to_string(), VecDeque::new());
                Admit::Start(item)
            }
            Some(waiting) if waiting.len() >= self.bound => Admit::Full(item),
            Some(waiting) => {
                waiting.push_back(item);
                Admit::Queued {
                    position: waiting.len(),
                }
            }
        }
    }

    /// Whether `conversation` is busy (a message admitted now would wait).
    pub fn is_busy(&self, conversation: &str) -> bool {
        self.lock().contains_key(conversation)
    }

    /// Mark `conversation` busy (a request started in it without [`Queues::admit`]: a new
    /// conversation, a request resumed after a restart).
    pub fn mark_busy(&self, conversation: &str) {
        self.lock().entry(conversation.to_string()).or_default();
    }

    /// Put `item` first in line: it could not start yet (the conversation turned out to be running a
    /// request the gateway had not started) and keeps its place.
    pub fn push_front(&self, conversation: &str, item: T) {
        self.lock()
            .entry(conversation.to_string())
            .or_default()
            .push_front(item);
    }

    /// The current request of `conversation` ended: the next waiting message, which the conversation
    /// is now busy with, or `None` — and the conversation is idle.
    pub fn next(&self, conversation: &str) -> Option<T> {
        let mut busy = self.lock();
        let next = busy.get_mut(conversation).and_then(VecDeque::pop_front);
        if next.is_none() {
            busy.remove(conversation);
        }
        next
    }

    /// Take every waiting message out, oldest first per conversation (shutdown: each is then told
    /// it was not answered).
    pub fn drain(&self) -> Vec<T> {
        let mut busy = self.lock();
        busy.drain().flat_map(|(_, line)| line).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_wait_in_order_up_to_the_bound_and_the_conversation_goes_idle_after() {
        let queues = Queues::new(2);
        assert_eq!(queues.admit("c", 1), Admit::Start(1));
        assert_eq!(queues.admit("c", 2), Admit::Queued { position: 1 });
        assert_eq!(queues.admit("c", 3), Admit::Queued { position: 2 });
        assert_eq!(queues.admit("c", 4), Admit::Full(4));
        // Another conversation is independent.
        assert_eq!(queues.admit("d", 10), Admit::Start(10));
        assert_eq!(queues.next("c"), Some(2));
        assert_eq!(queues.admit("c", 5), Admit::Queued { position: 2 });
        assert_eq!(queues.next("c"), Some(3));
        assert_eq!(queues.next("c"), Some(5));
        assert_eq!(queues.next("c"), None);
        // Idle again: the next message starts at once.
        assert_eq!(queues.admit("c", 6), Admit::Start(6));
    }

    #[test]
    fn a_busy_mark_queues_and_a_pushed_back_message_keeps_its_place() {
        let queues = Queues::new(3);
        queues.mark_busy("c");
        assert_eq!(queues.admit("c", 1), Admit::Queued { position: 1 });
        assert_eq!(queues.next("c"), Some(1));
        queues.push_front("c", 1);
        assert_eq!(queues.admit("c", 2), Admit::Queued { position: 2 });
        assert_eq!(queues.next("c"), Some(1));
        assert_eq!(queues.drain().len(), 1);
        assert_eq!(queues.next("c"), None);
    }
}
