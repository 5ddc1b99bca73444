//! Waiting in tests, always with a deadline and a message: every wait either sees what it waits for or
//! panics saying what it waited for and for how long. No test may loop or await without one of these
//! (or an equivalent `tokio::time::timeout(..).expect(..)`).
//!
//! Why polling for state and not timing: tests assert order and causality ("B happened after A"), never
//! wall-clock thresholds, so they hold on a loaded 2-core machine; the deadline only stops a hang.

use std::future::Future;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;

/// How often [`wait_until`] and [`wait_for`] look again.
const POLL: Duration = Duration::from_millis(10);

/// Await `future`, or panic after `limit` naming `what` was awaited.
pub async fn within<F: Future>(limit: Duration, what: &str, future: F) -> F::Output {
    match tokio::time::timeout(limit, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// Poll `found` until it returns something, or panic after `limit` naming `what`.
pub async fn wait_for<T>(limit: Duration, what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = found() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Poll `done` until it holds, or panic after `limit` naming `what`.
pub async fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    wait_for(limit, what, || done().then_some(())).await;
}

/// The first event on `events` that `pick` maps to something, within one deadline for the whole search
/// (a steady stream of other events cannot extend it). Panics naming `what` on timeout or if the
/// channel closes.
pub async fn next_event<E: Clone, T>(
    events: &mut broadcast::Receiver<E>,
    limit: Duration,
    what: &str,
    mut pick: impl FnMut(E) -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    let mut missed = 0;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(event)) => {
                if let Some(found) = pick(event) {
                    return found;
                }
            }
            // A slow receiver skipped some events; the one awaited may still come.
            Ok(Err(broadcast::error::RecvError::Lagged(n))) => missed += n,
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                panic!("the event channel closed while waiting for {what}")
            }
            Err(_) => panic!(
                "timed out after {limit:?} waiting for {what} ({missed} events were skipped by lag)"
            ),
        }
    }
}

/// Run a blocking wait on a thread and give up after `limit`, naming `what`: for std APIs with no
/// timeout of their own (reading a child's stdout, waiting for it to exit).
pub fn blocking_within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => Some(value),
        Err(_) => {
            eprintln!("timed out after {limit:?} waiting for {what}");
            None
        }
    }
}
