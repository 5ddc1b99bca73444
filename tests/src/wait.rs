//! Waiting in tests, always with a deadline and a message: every wait either sees what it waits for or
//! panics saying what it waited for and for how long. No test may loop or await without one of these
//! (or an equivalent `tokio::time::timeout(..).expect(..)`). Tests take their deadlines from here
//! ([`WAIT`], [`WAIT_LONG`]) rather than each defining its own.
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

/// The deadline of every wait in the tests: how long one awaited thing (an event, an answer, a child
/// exiting) may take on a loaded 2-core machine before the test fails as hung. It only stops a hang:
/// each wait ends as soon as what it waits for happens.
pub const WAIT: Duration = Duration::from_secs(30);

/// The deadline of waits that include loading the NER model, a cold `opc` start or a whole `opc chat`
/// on a busy machine.
pub const WAIT_LONG: Duration = Duration::from_secs(120);

/// One deadline shared by several awaits, for loops that skip what they do not want (keep-alives,
/// other events): each await gets only what is left, so a steady stream of skipped items cannot
/// extend the wait past `limit`.
#[derive(Debug, Clone)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
    what: String,
}

impl Deadline {
    /// A deadline `limit` from now, for waiting on `what`.
    pub fn after(limit: Duration, what: impl Into<String>) -> Deadline {
        Deadline {
            at: Instant::now() + limit,
            limit,
            what: what.into(),
        }
    }

    /// Await `future` within what is left of the deadline, or panic naming what was awaited.
    pub async fn run<F: Future>(&self, future: F) -> F::Output {
        match tokio::time::timeout_at(self.at, future).await {
            Ok(output) => output,
            Err(_) => panic!("timed out after {:?} waiting for {}", self.limit, self.what),
        }
    }
}

/// Wait for `child` to exit, up to `limit`; `None` if it is still running then.
pub fn exit_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Wait for `child` to exit within `limit`; else kill it and panic naming `what`.
pub fn child_within(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    match exit_within(child, limit) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out after {limit:?} waiting for {what} (the process was killed)")
        }
    }
}

/// [`std::process::Child::wait_with_output`] with a deadline: the exit status and everything the
/// child printed, or, after `limit`, the child killed and a panic naming `what` with its stderr so far.
/// Blocking: from async code call it through [`output_within_async`].
pub fn output_within(
    mut child: std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::Output {
    use std::io::Read;
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::sync::mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send(bytes);
        });
        rx
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = exit_within(&mut child, limit);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    // The child has exited, so its pipes close and the readers finish (unless it left a grandchild
    // holding them: then give up on the rest after a bounded wait).
    let collect =
        |rx: std::sync::mpsc::Receiver<Vec<u8>>| rx.recv_timeout(WAIT).unwrap_or_default();
    let stdout = collect(stdout);
    let stderr = collect(stderr);
    match status {
        Some(status) => std::process::Output {
            status,
            stdout,
            stderr,
        },
        None => panic!(
            "timed out after {limit:?} waiting for {what} (the process was killed); stderr:\n{}",
            String::from_utf8_lossy(&stderr)
        ),
    }
}

/// [`output_within`] on a blocking thread, so the test's servers keep running while the child runs.
pub async fn output_within_async(
    child: std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::Output {
    let what = what.to_string();
    match tokio::task::spawn_blocking(move || output_within(child, limit, &what)).await {
        Ok(output) => output,
        // The blocking wait panicked (its deadline passed): carry its message into the test.
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("waiting for a child process: {e}"),
        },
    }
}

/// [`std::process::Command::output`] with a deadline, for tests that run a short `opc` command.
pub trait OutputWithin {
    /// Run the command as [`std::process::Command::output`] does (stdin closed, stdout and stderr
    /// captured) and wait at most `limit` for it to exit; past that it is killed and the test panics
    /// with its stderr so far. `Err` only when it cannot be started.
    fn output_within(&mut self, limit: Duration) -> std::io::Result<std::process::Output>;
}

impl OutputWithin for std::process::Command {
    fn output_within(&mut self, limit: Duration) -> std::io::Result<std::process::Output> {
        use std::process::Stdio;
        let child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        Ok(output_within(child, limit, &format!("{self:?} to exit")))
    }
}

/// [`OutputWithin::output_within`] for async tests: the command runs and is waited for on a blocking
/// thread, so the test's servers (a scripted LLM on the same runtime) keep serving meanwhile.
pub async fn output_of(
    mut command: std::process::Command,
    limit: Duration,
) -> std::process::Output {
    use std::process::Stdio;
    let what = format!("{command:?} to exit");
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {command:?}: {e}"));
    output_within_async(child, limit, &what).await
}
