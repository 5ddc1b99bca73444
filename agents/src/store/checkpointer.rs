//! The background WAL checkpointer of a file database.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

/// Moves the WAL into the database file from a thread with its own connection, once a second.
///
/// Why not SQLite's automatic checkpoint: it runs inside whichever commit crosses the threshold, while
/// that commit holds the engine's connection lock — every agent waiting on the store then waits for
/// ~1,000 pages to be copied and fsynced (it was the p99 of a turn). A passive checkpoint on the side
/// never blocks writers.
pub(super) struct Checkpointer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    pub(super) fn start(path: &Path) -> Option<Checkpointer> {
        let conn = Connection::open(path).ok()?;
        conn.busy_timeout(Duration::from_secs(5)).ok()?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("opc-sqlite-checkpoint".into())
            .spawn(move || {
                let checkpoint = || {
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::warn!(error = %e, "WAL checkpoint failed");
                    }
                };
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(Duration::from_secs(1))
                {
                    checkpoint();
                }
                checkpoint();
            })
            .ok()?;
        Some(Checkpointer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
