//! # opc-retry — one backoff policy for every retry loop
//!
//! Role: the one exponential backoff OPC uses wherever it tries something again — the LLM call
//! stack's retry layer (`opc-agents`), Slack's Socket Mode reconnect loop (`opc-adapters`) and the
//! delivery of engine notices (`opc`). A [`RetryPolicy`] says how many attempts, how long to wait
//! between them (base · factor^n, capped, optionally jittered) and honours a server's own
//! `Retry-After`; [`retry`] runs an operation under it, deciding on the error's [`Retryable`] kind.
//!
//! Invariants:
//! - a server's `retry-after` wins over the computed backoff (capped by [`RetryPolicy::max_delay`],
//!   so a hostile or confused server cannot park a loop for hours);
//! - only errors that say they may pass ([`Retryable::is_retryable`]) are tried again: a refusal
//!   (bad request, missing permission) fails at once;
//! - the crate depends on no other OPC crate, so the lowest crates (adapters) may use it.

use std::future::Future;
use std::time::Duration;

/// How the computed backoff is spread, so that many clients failing together do not retry together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jitter {
    /// Exactly the computed backoff (deterministic; for loops that only one process runs).
    None,
    /// A uniformly random delay in `[backoff/2, backoff]` ("equal jitter"): spread, yet never much
    /// shorter than asked.
    Equal,
}

/// Exponential backoff: attempt `n` (1-based) failed → wait `base_delay · factor^(n-1)`, capped at
/// `max_delay`, jittered; or the server's `retry-after` when it gave one (also capped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, including the first (1 = no retry; `u32::MAX` = without end).
    pub max_attempts: u32,
    /// Backoff after the first failed attempt.
    pub base_delay: Duration,
    /// Growth of the backoff from one attempt to the next.
    pub factor: u32,
    /// Cap on one backoff (and on an honoured `retry-after`).
    pub max_delay: Duration,
    /// How the backoff is spread.
    pub jitter: Jitter,
}

impl Default for RetryPolicy {
    /// The LLM stack's policy: 4 attempts, 0.5 s doubling to at most 30 s, equal jitter.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            factor: 2,
            max_delay: Duration::from_secs(30),
            jitter: Jitter::Equal,
        }
    }
}

impl RetryPolicy {
    /// Whether another attempt may follow attempt number `attempt` (1-based).
    pub fn allows_another(&self, attempt: u32) -> bool {
        attempt < self.max_attempts
    }

    /// The backoff after attempt `attempt` (1-based) failed, before jitter: `base · factor^(attempt-1)`,
    /// capped.
    pub fn backoff(&self, attempt: u32) -> Duration {
        // The exponent is bounded so that the multiplier cannot overflow into nonsense before the cap.
        let exp = attempt.saturating_sub(1).min(16);
        self.base_delay
            .saturating_mul(self.factor.max(1).saturating_pow(exp))
            .min(self.max_delay)
    }

    /// The wait before the attempt after `attempt` (1-based): the server's `retry_after` when given
    /// (capped), else [`RetryPolicy::backoff`] with the policy's jitter.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let backoff = self.backoff(attempt);
        match self.jitter {
            Jitter::None => backoff,
            Jitter::Equal => {
                let half = backoff / 2;
                half + backoff.saturating_sub(half).mul_f64(fastrand::f64())
            }
        }
    }
}

/// What a retry loop needs to know about a failure.
pub trait Retryable {
    /// Whether the same request may succeed if tried again soon (unreachable, rate-limited, a server
    /// error), as opposed to a refusal that will repeat.
    fn is_retryable(&self) -> bool;

    /// How long the server asked us to wait, when it said.
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

/// How [`retry`] ended when it did not succeed.
#[derive(Debug)]
pub struct Failed<E> {
    /// The last attempt's error.
    pub error: E,
    /// Attempts made.
    pub attempts: u32,
}

/// Run `operation` until it succeeds, fails with an error that is not retryable, runs out of
/// attempts, or `stop` completes while waiting between attempts (an attempt in flight is never cut
/// short). `on_retry(attempt, delay, &error)` is told before each wait (for logging).
pub async fn retry<T, E, Op, Fut, Stop>(
    policy: &RetryPolicy,
    mut operation: Op,
    stop: Stop,
    mut on_retry: impl FnMut(u32, Duration, &E),
) -> Result<T, Failed<E>>
where
    E: Retryable,
    Op: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    Stop: Future<Output = ()>,
{
    let mut stop = std::pin::pin!(stop);
    let mut attempt = 1;
    loop {
        let error = match operation().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if !error.is_retryable() || !policy.allows_another(attempt) {
            return Err(Failed {
                error,
                attempts: attempt,
            });
        }
        let delay = policy.delay(attempt, error.retry_after());
        on_retry(attempt, delay, &error);
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = &mut stop => return Err(Failed { error, attempts: attempt }),
        }
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::cell::RefCell;

    fn fixed() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(100),
            factor: 3,
            max_delay: Duration::from_secs(1),
            jitter: Jitter::None,
        }
    }

    #[test]
    fn backoff_grows_by_the_factor_up_to_the_cap() {
        let p = fixed();
        let delays: Vec<_> = (1..=5).map(|a| p.delay(a, None)).collect();
        assert_eq!(
            delays,
            [100, 300, 900, 1000, 1000].map(Duration::from_millis)
        );
        // Huge attempt numbers do not overflow.
        assert_eq!(p.delay(u32::MAX, None), Duration::from_secs(1));
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let p = fixed();
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn equal_jitter_stays_within_half_and_whole() {
        let p = RetryPolicy::default();
        for attempt in 1..6 {
            let backoff = p.backoff(attempt);
            for _ in 0..50 {
                let d = p.delay(attempt, None);
                assert!(d >= backoff / 2 && d <= backoff, "{d:?} vs {backoff:?}");
            }
        }
    }

    #[derive(Debug, PartialEq)]
    enum E {
        Passing(Option<Duration>),
        Refused,
    }

    impl Retryable for E {
        fn is_retryable(&self) -> bool {
            matches!(self, E::Passing(_))
        }
        fn retry_after(&self) -> Option<Duration> {
            match self {
                E::Passing(after) => *after,
                E::Refused => None,
            }
        }
    }

    /// Runs `outcomes` in order under `fixed()`, returning the result and the waits asked for.
    async fn run(outcomes: Vec<Result<u32, E>>) -> (Result<u32, Failed<E>>, Vec<Duration>) {
        let outcomes = RefCell::new(outcomes.into_iter());
        let mut waits = Vec::new();
        let result = retry(
            &fixed(),
            || {
                let next = outcomes
                    .borrow_mut()
                    .next()
                    .expect("an outcome per attempt");
                async move { next }
            },
            std::future::pending(),
            |_, delay, _| waits.push(delay),
        )
        .await;
        (result, waits)
    }

    #[tokio::test(start_paused = true)]
    async fn retries_passing_errors_honouring_retry_after() {
        let (result, waits) = run(vec![
            Err(E::Passing(Some(Duration::from_millis(250)))),
            Err(E::Passing(None)),
            Ok(7),
        ])
        .await;
        assert_eq!(result.unwrap(), 7);
        assert_eq!(waits, [250, 300].map(Duration::from_millis));
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_is_not_retried_and_attempts_run_out() {
        let (result, waits) = run(vec![Err(E::Refused), Ok(1)]).await;
        let failed = result.unwrap_err();
        assert_eq!((failed.error, failed.attempts), (E::Refused, 1));
        assert!(waits.is_empty());

        let (result, waits) = run((0..4).map(|_| Err(E::Passing(None))).collect()).await;
        assert_eq!(result.unwrap_err().attempts, 4);
        assert_eq!(waits.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn stop_ends_the_wait() {
        let start = tokio::time::Instant::now();
        let result: Result<(), _> = retry(
            &fixed(),
            || async { Err(E::Passing(Some(Duration::from_secs(1)))) },
            tokio::time::sleep(Duration::from_millis(10)),
            |_, _, _| {},
        )
        .await;
        assert_eq!(result.unwrap_err().attempts, 1);
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
