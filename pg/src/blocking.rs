//! [`Blocking`]: one PostgreSQL connection on a thread of its own, for synchronous callers.
//!
//! Why: memory, the web transcript and the gateway's records run their SQL synchronously (as with
//! rusqlite), often on a runtime thread. The blocking client drives a runtime of its own and must
//! not be used there, so the connection lives on a dedicated thread; a call sends a closure over a
//! channel and waits for its answer, as it waited for SQLite's lock before.
//!
//! Invariants:
//! - closures run one at a time, in the order they were sent, each on the one connection (so a
//!   closure's transaction is never interleaved with another's);
//! - a connection that was lost (a restarted server, a cut network) is reopened before the next
//!   closure runs (one that sat idle is checked first, so a restart while it was idle costs no
//!   caller an error); while the server cannot be reached, every call fails at once with
//!   [`Fault::Unavailable`](crate::Fault::Unavailable) and the next call tries again;
//! - the thread ends when the last handle is dropped, after the closures already sent.

use std::sync::{Arc, mpsc};
use std::time::Duration;

use postgres::{Client, NoTls};

use crate::error::{Fault, PgError};

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(8);

/// A connection idle this long is checked (an empty query) before the next closure runs: the
/// client learns that the server went away (a restart) only when it next talks to it, and the
/// closure that finds out would fail although a new connection would serve it. Under steady use no
/// check is made.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// How long that check may take before the connection counts as lost.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

type Job = Box<dyn FnOnce(Result<&mut Client, PgError>) + Send>;

/// A connection on its own thread (see the module doc). Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Blocking {
    jobs: mpsc::Sender<Job>,
    place: Arc<str>,
}

impl std::fmt::Debug for Blocking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blocking")
            .field("place", &self.place)
            .finish()
    }
}

impl Blocking {
    /// Connect to the database `url` names, for `what` (the thread's name: `opc-pg-<what>`); the
    /// first connection is made here, so a server that cannot be reached is an error now.
    pub fn connect(url: &str, what: &str) -> Result<Blocking, PgError> {
        let mut config = crate::parse(url)?;
        config.connect_timeout(CONNECT_TIMEOUT);
        let place: Arc<str> = crate::place(&config).into();
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, first) = mpsc::channel::<Result<(), PgError>>();
        let thread_place = place.clone();
        std::thread::Builder::new()
            .name(format!("opc-pg-{what}"))
            .spawn(move || {
                let open = |config: &postgres::Config| {
                    config
                        .connect(NoTls)
                        .map_err(|e| PgError::of(&e, &thread_place, "connecting"))
                };
                let mut client = match open(&config) {
                    Ok(client) => {
                        let _ = ready.send(Ok(()));
                        Some(client)
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let mut used = std::time::Instant::now();
                while let Ok(job) = queue.recv() {
                    if used.elapsed() >= CHECK_AFTER_IDLE
                        && let Some(c) = client.as_mut()
                        && c.is_valid(CHECK_TIMEOUT).is_err()
                    {
                        client = None;
                    }
                    used = std::time::Instant::now();
                    if client.as_ref().is_none_or(Client::is_closed) {
                        client = None;
                        match open(&config) {
                            Ok(c) => client = Some(c),
                            Err(e) => {
                                job(Err(e));
                                continue;
                            }
                        }
                    }
                    match client.as_mut() {
                        Some(c) => job(Ok(c)),
                        None => job(Err(PgError {
                            place: thread_place.to_string(),
                            doing: "connecting",
                            fault: Fault::Unavailable,
                            message: "no connection".into(),
                        })),
                    }
                }
            })
            .map_err(|e| PgError {
                place: place.to_string(),
                doing: "starting its connection thread",
                fault: Fault::Other,
                message: e.to_string(),
            })?;
        first.recv().map_err(|_| PgError {
            place: place.to_string(),
            doing: "connecting",
            fault: Fault::Other,
            message: "the connection thread stopped".into(),
        })??;
        Ok(Blocking { jobs, place })
    }

    /// The database, as `host:port/name`.
    pub fn place(&self) -> &str {
        &self.place
    }

    /// Run `f` on the connection and wait for its answer. `doing` names the work in errors.
    pub fn run<T, F>(&self, doing: &'static str, f: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    {
        let (reply, answer) = mpsc::sync_channel(1);
        let place = self.place.clone();
        let job: Job = Box::new(move |client| {
            let out = match client {
                Ok(c) => f(c).map_err(|e| PgError::of(&e, &place, doing)),
                Err(e) => Err(PgError { doing, ..e }),
            };
            let _ = reply.send(out);
        });
        let gone = || PgError {
            place: self.place.to_string(),
            doing,
            fault: Fault::Other,
            message: "the connection thread stopped".into(),
        };
        self.jobs.send(job).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

impl Blocking {
    /// Bring `component`'s tables up to date on this connection ([`crate::migrate()`]).
    pub fn migrate(
        &self,
        component: &'static opc_migrate::Component,
    ) -> Result<opc_migrate::Applied, crate::PgMigrateError> {
        let place = self.place.to_string();
        self.run("migrating", move |client| {
            Ok(crate::migrate(client, component, &place))
        })?
    }
}
