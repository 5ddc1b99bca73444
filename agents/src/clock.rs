//! A task's deadline (`taskTimeout`) that stops running while a human decides.
//!
//! Why pausable: `taskTimeout` bounds an agent's *own* work. Two kinds of waiting do not count:
//! - waiting for children: otherwise a parent (which started first) would always time out before a hung
//!   child, and the child's timeout could never reach the parent as an escalation;
//! - waiting for a human: `approvalTimeout` (default 1 h) is longer than `taskTimeout` (default 5 min),
//!   so every approval would turn into a timeout escalation. While an approval is pending, the clocks of
//!   the waiting task and of all its ancestors are paused.
//!
//! A paused clock resumes with the time it had left.
//!
//! Invariant: a clock expires only when it has been un-paused for its whole budget in total.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug)]
struct State {
    paused: u32,
    deadline: Instant,
    paused_at: Option<Instant>,
}

/// One task's deadline. Cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct Clock {
    state: Arc<watch::Sender<State>>,
    budget: Duration,
}

impl Clock {
    /// A clock that expires `budget` from now.
    pub fn start(budget: Duration) -> Self {
        let now = Instant::now();
        Clock {
            state: Arc::new(watch::Sender::new(State {
                paused: 0,
                deadline: now
                    .checked_add(budget)
                    .unwrap_or(now + Duration::from_secs(86_400 * 365)),
                paused_at: None,
            })),
            budget,
        }
    }

    /// The budget it started with.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Resolves when the clock runs out (never while paused).
    pub async fn expired(&self) {
        let mut rx = self.state.subscribe();
        loop {
            let state = *rx.borrow_and_update();
            if state.paused > 0 {
                if rx.changed().await.is_err() {
                    return std::future::pending().await;
                }
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(state.deadline) => return,
                changed = rx.changed() => if changed.is_err() { return std::future::pending().await },
            }
        }
    }

    /// Pause until the guard is dropped. Pauses nest.
    pub fn pause(&self) -> PauseGuard {
        self.state.send_modify(|s| {
            if s.paused == 0 {
                s.paused_at = Some(Instant::now());
            }
            s.paused += 1;
        });
        PauseGuard {
            clock: self.clone(),
        }
    }
}

/// Keeps a [`Clock`] paused while alive.
#[derive(Debug)]
pub struct PauseGuard {
    clock: Clock,
}

impl Drop for PauseGuard {
    fn drop(&mut self) {
        self.clock.state.send_modify(|s| {
            s.paused = s.paused.saturating_sub(1);
            if s.paused == 0
                && let Some(at) = s.paused_at.take()
            {
                s.deadline += at.elapsed();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pausing_extends_the_deadline() {
        let clock = Clock::start(Duration::from_secs(10));
        let started = Instant::now();
        let guard = clock.pause();
        let waiter = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.expired().await })
        };
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiter.is_finished());
        drop(guard);
        let _ = waiter.await;
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_secs(70), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(71), "{elapsed:?}");
    }
}
