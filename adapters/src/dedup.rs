//! Remembering event ids for a while, so a platform's redelivery reaches the gateway once.
//!
//! Why: Slack retries an HTTP event when the first delivery was slow or failed (`X-Slack-Retry-Num`) and
//! Socket Mode resends unacknowledged envelopes (`retry_attempt`); Discord may replay dispatches after a
//! resume. Each redelivery carries the same event id, so running an agent twice is avoided by
//! remembering ids for longer than the platforms retry (Slack: about an hour in total).
//!
//! Invariant: memory is bounded — at most `capacity` ids are kept; the oldest are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A bounded, time-windowed set of seen event ids. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Dedup {
    window: Duration,
    capacity: usize,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    at: HashMap<String, Instant>,
    order: VecDeque<(Instant, String)>,
}

impl Dedup {
    /// Remember ids for `window`, at most `capacity` of them.
    pub fn new(window: Duration, capacity: usize) -> Dedup {
        Dedup {
            window,
            capacity: capacity.max(1),
            seen: Mutex::new(Seen::default()),
        }
    }

    /// `true` the first time `id` is offered within the window, `false` for a repeat.
    pub fn first(&self, id: &str) -> bool {
        let now = Instant::now();
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Forget what has expired; then, only for a new id, make room for it.
        while seen
            .order
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > self.window)
        {
            seen.forget_oldest();
        }
        if seen.at.contains_key(id) {
            return false;
        }
        while seen.order.len() >= self.capacity {
            seen.forget_oldest();
        }
        seen.at.insert(id.to_string(), now);
        seen.order.push_back((now, id.to_string()));
        true
    }
}

impl Seen {
    fn forget_oldest(&mut self) {
        if let Some((at, old)) = self.order.pop_front()
            && self.at.get(&old) == Some(&at)
        {
            self.at.remove(&old);
        }
    }
}

impl Default for Dedup {
    /// Two hours, 100,000 ids: longer than Slack's retry schedule, a few MB at most.
    fn default() -> Dedup {
        Dedup::new(Duration::from_secs(2 * 3600), 100_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_refused_until_forgotten() {
        let dedup = Dedup::new(Duration::from_secs(60), 2);
        assert!(dedup.first("a"));
        assert!(!dedup.first("a"));
        assert!(dedup.first("b"));
        // Capacity 2: adding "c" forgets "a", the oldest.
        assert!(dedup.first("c"));
        assert!(dedup.first("a"));
        assert!(!dedup.first("c"));
    }

    #[test]
    fn the_window_expires() {
        let dedup = Dedup::new(Duration::from_millis(1), 10);
        assert!(dedup.first("a"));
        std::thread::sleep(Duration::from_millis(5));
        assert!(dedup.first("a"));
    }
}
