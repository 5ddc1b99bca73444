//! Facts' embedding generations and background embedding: which model's vectors the facts search
//! uses, the filling of a new one, and the retries of an embedder that is down.
//!
//! Role: the facts side of [`crate::recall::generation`] (the same table and rules, `store =
//! 'facts'`). A generation's rows are the CURRENT versions: they are what the in-memory vectors hold
//! and what a change of model re-embeds; a switch needs every current version to have a vector of
//! the new model, then deletes the old model's vectors — those of closed versions too, so a past
//! (`BelievedAt`) search finds closed versions by keywords until they are embedded again (they are
//! not: history is not re-embedded).
//!
//! The generation bookkeeping runs on a connection of its own ([`GenDb`]: on SQLite one opened on
//! the same file, on PostgreSQL a clone of the store's), so it never holds the facts writer.
//!
//! [`Filler`]: one background thread per store at most, started when there is vector work (a
//! generation filling, versions written while the embedder was down) and ending when there is none.
//! It holds the store weakly (a dropped store ends it) and backs off from a failing embedder
//! (doubling from [`IDLE`] to [`MAX_BACKOFF`], one warning per failing episode).
//!
//! Invariants: a read-only store never writes a generation; a vector is stored under the model
//! that computed it; searches embed the query with the ACTIVE generation's embedder only.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::FactError;
use crate::recall::generation::{self, Generation, Plan, Store, Switch};

/// The pause of the background filler when it has nothing to do this moment but a generation is
/// still filling (rows lacking behind it), and the first backoff after a failure.
pub const IDLE: Duration = Duration::from_secs(2);
/// The longest backoff between two attempts of an embedder that keeps failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(120);
/// How long searches and batches skip an embedder after it failed (the filler's next success lifts
/// it sooner).
pub const DOWN_FOR: Duration = Duration::from_secs(30);

/// Where the generation rows are, on the store's database.
pub(super) enum GenDb {
    /// The engine's SQLite file, through a connection of this module's (opened on first use).
    Sqlite {
        path: PathBuf,
        read_only: bool,
        conn: Mutex<Option<Connection>>,
    },
    /// PostgreSQL, through a clone of the store's connection.
    Postgres(opc_pg::Blocking),
}

const TABLE: &str = "memory_fact_vectors";

impl GenDb {
    /// On the SQLite file `path`.
    pub(super) fn sqlite(path: &Path, read_only: bool) -> Self {
        GenDb::Sqlite {
            path: path.to_path_buf(),
            read_only,
            conn: Mutex::new(None),
        }
    }

    fn on_sqlite<T>(
        path: &Path,
        read_only: bool,
        conn: &Mutex<Option<Connection>>,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, FactError> {
        let db = |source| FactError::Db {
            path: path.display().to_string(),
            source,
        };
        let mut slot = conn.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let c = if read_only {
                let c = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(db)?;
                c.busy_timeout(Duration::from_secs(5)).map_err(db)?;
                c
            } else {
                crate::schema::open(path).map_err(db)?
            };
            *slot = Some(c);
        }
        match slot.as_mut() {
            Some(c) => f(c).map_err(db),
            None => Err(FactError::Invalid(
                "facts: no generations connection".into(),
            )),
        }
    }

    /// Facts' generations as recorded.
    pub(super) fn list(&self) -> Result<Vec<Generation>, FactError> {
        match self {
            GenDb::Sqlite {
                path,
                read_only,
                conn,
            } => Self::on_sqlite(path, *read_only, conn, |c| {
                generation::list_sqlite(c, Store::Facts)
            }),
            GenDb::Postgres(pg) => Ok(pg.run("reading embedding generations", |c| {
                generation::list_pg(c, Store::Facts)
            })?),
        }
    }

    /// Carry out a plan's bookkeeping (create its generation, drop stale ones).
    pub(super) fn apply_plan(&self, plan: &Plan) -> Result<(), FactError> {
        let now = opc_migrate::now_ms();
        match self {
            GenDb::Sqlite {
                path,
                read_only,
                conn,
            } => Self::on_sqlite(path, *read_only, conn, |c| {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                generation::apply_sqlite(&tx, Store::Facts, plan, TABLE, now)?;
                tx.commit()
            }),
            GenDb::Postgres(pg) => {
                let plan = plan.clone();
                Ok(pg.run("recording embedding generations", move |c| {
                    generation::apply_pg(c, Store::Facts, &plan, TABLE, now)
                })?)
            }
        }
    }

    /// Make `model` the active generation if every current version has a vector of it, deleting
    /// the old model's vectors, in one transaction; on SQLite the facts' change counter moves so
    /// that other processes reload their vectors.
    pub(super) fn switch(&self, model: &str) -> Result<Switch, FactError> {
        const LACKING: &str = "SELECT EXISTS(SELECT 1 FROM memory_fact_versions v \
             WHERE v.invalidated_at IS NULL AND NOT EXISTS (SELECT 1 FROM memory_fact_vectors x \
             WHERE x.version_id = v.id AND x.model = ";
        match self {
            GenDb::Sqlite {
                path,
                read_only,
                conn,
            } => Self::on_sqlite(path, *read_only, conn, |c| {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let lacking: bool =
                    tx.query_row(&format!("{LACKING}?1))"), [model], |r| r.get(0))?;
                if lacking {
                    return Ok(Switch::Lacking);
                }
                if !generation::switch_sqlite(&tx, Store::Facts, model, TABLE)? {
                    return Ok(Switch::NotFilling);
                }
                tx.execute(
                    "UPDATE memory_facts_meta SET generation = generation + 1 WHERE id = 1",
                    [],
                )?;
                tx.commit()?;
                Ok(Switch::Done)
            }),
            GenDb::Postgres(pg) => {
                let model = model.to_string();
                Ok(
                    pg.run("switching the facts embedding generation", move |c| {
                        let mut tx = c.transaction()?;
                        let lacking: bool = tx
                            .query_one(&format!("{LACKING}$1))"), &[&model])?
                            .try_get(0)?;
                        if lacking {
                            tx.rollback()?;
                            return Ok(Switch::Lacking);
                        }
                        let done = generation::switch_pg(&mut tx, Store::Facts, &model, TABLE)?;
                        tx.commit()?;
                        Ok(if done {
                            Switch::Done
                        } else {
                            Switch::NotFilling
                        })
                    })?,
                )
            }
        }
    }
}

/// The store's embedding health: which embedder is down until when, what was said once.
#[derive(Default)]
pub(super) struct Health {
    /// Model id → until when searches and batches skip it.
    down: Mutex<Vec<(String, Instant)>>,
    /// Said once: the vector half of search is off (the active generation's embedder is missing).
    pub(super) said_off: AtomicBool,
    /// Said once per episode: embedding failed in a batch or a search.
    said_down: AtomicBool,
    /// A background filler is running.
    pub(super) filler: AtomicBool,
}

impl Health {
    /// Whether `model` failed within [`DOWN_FOR`].
    pub(super) fn is_down(&self, model: &str) -> bool {
        self.down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|(m, until)| m == model && Instant::now() < *until)
    }

    /// `model` failed (`error`): skip it for a while; say so once per episode.
    pub(super) fn failed(&self, model: &str, error: &dyn std::fmt::Display) {
        if !self.said_down.swap(true, Ordering::Relaxed) {
            tracing::warn!(%error, "facts: the embedder failed; facts are written and searched by keywords meanwhile, and embedded later (nothing is lost)");
        }
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        down.retain(|(m, _)| m != model);
        down.push((model.to_string(), Instant::now() + DOWN_FOR));
    }

    /// `model` worked.
    pub(super) fn worked(&self, model: &str) {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        if !down.is_empty() {
            down.retain(|(m, _)| m != model);
            if down.is_empty() && self.said_down.swap(false, Ordering::Relaxed) {
                tracing::info!("facts: the embedder works again");
            }
        }
    }
}

/// What a round of background embedding found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// It embedded rows: go again at once.
    Busy,
    /// Nothing now, but a generation is still filling (rows lacking behind its cursor, another
    /// process's rows): look again after [`IDLE`].
    Waiting,
    /// Nothing left: the filler ends.
    Idle,
}

/// The background filler's loop over a weakly held store: `work` does one round. Ends when the
/// store is dropped or there is no work; `running` is cleared on the way out.
pub(super) fn run_filler<S>(
    store: Weak<S>,
    running: impl Fn(&S) -> &AtomicBool,
    work: impl Fn(&Arc<S>) -> Result<Round, FactError>,
) {
    let mut wait = IDLE;
    let mut failing = false;
    loop {
        let Some(s) = store.upgrade() else {
            return;
        };
        let pause = match work(&s) {
            Ok(round @ (Round::Busy | Round::Waiting)) => {
                if failing {
                    tracing::info!("facts: background embedding works again");
                }
                failing = false;
                wait = IDLE;
                (round == Round::Waiting).then_some(IDLE)
            }
            Ok(Round::Idle) => {
                running(&s).store(false, Ordering::Relaxed);
                return;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "facts: background embedding failed; retrying with backoff up to {}s (versions wait without vectors, nothing is lost)", MAX_BACKOFF.as_secs());
                }
                wait = if failing {
                    (wait * 2).min(MAX_BACKOFF)
                } else {
                    IDLE
                };
                failing = true;
                Some(wait)
            }
        };
        drop(s);
        if let Some(p) = pause {
            std::thread::sleep(p);
        }
    }
}
