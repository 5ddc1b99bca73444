//! The console's sign-in sessions, kept in the org's database (the SQLite file, or the PostgreSQL
//! database with `framework.memory.storage: postgres`) so that they survive a restart of `opc run`
//! and every node of a cluster knows them: the store behind [`opc_adapters::session::SessionStore`].
//! Also the limit on sign-in attempts per peer ([`Attempts`], governor's keyed limiter).
//!
//! What is kept per session: the SHA-256 digest of its id (never the id: a copy of the database opens
//! no session), its role, the check value that binds it to the token it was made with, and its
//! creation and expiry times. The listener ([`opc_adapters::session::Access`]) decides what is valid;
//! this module stores.
//!
//! The table is created and changed only by each backend's migrations, the `sessions` component of
//! the database's one migration story (its row in `schema_versions`). `opc run` opens it only when an
//! access token is configured: without one there is nothing to sign in to.
//!
//! Invariants (both backends): each call is one statement (an implicit transaction); digests are
//! stored as lower-case hex.

mod postgres;
mod sqlite;

/// The sessions table's migrations on PostgreSQL (`opc store copy` creates every component's tables).
pub use postgres::COMPONENT as POSTGRES_COMPONENT;

#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use opc_adapters::session::{AttemptLimit, Role, Session, SessionStore, StoreError};
use rusqlite::Connection;

/// A database error, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// SQLite refused.
    #[error("sessions database: {doing}: {source}")]
    Sqlite {
        /// What was being done.
        doing: &'static str,
        /// Why it failed.
        #[source]
        source: rusqlite::Error,
    },
    /// The table was written by a newer OPC, or a migration failed (the message says which and where).
    #[error("sessions database: {0}")]
    Schema(#[from] opc_migrate::MigrateError),
    /// PostgreSQL failed (the message names the server as `host:port/name`, never its URL).
    #[error("sessions database: {0}")]
    Postgres(#[from] opc_pg::PgError),
    /// PostgreSQL's table was written by a newer OPC, or a migration failed there.
    #[error("sessions database: {0}")]
    PostgresSchema(#[from] opc_pg::PgMigrateError),
    /// A stored row this build cannot read (a role it does not know, a digest that is not hex).
    #[error("sessions database: a stored session is unreadable ({0})")]
    Unreadable(String),
}

/// Where the rows live.
enum Backend {
    Sqlite(Mutex<Connection>),
    Postgres(opc_pg::Blocking),
}

/// The sessions table.
pub struct Sessions {
    backend: Backend,
}

/// A row as both backends read it: role, token check (hex), created, expires.
type Row = (String, String, i64, i64);

impl Sessions {
    /// Open (and create if needed) the table in the SQLite database at `path`.
    pub fn open(path: &Path) -> Result<Sessions, SessionsError> {
        Ok(Sessions {
            backend: Backend::Sqlite(Mutex::new(sqlite::open(path)?)),
        })
    }

    /// Open the table in the PostgreSQL database `conn` is connected to, bringing it up to date first
    /// ([`postgres::COMPONENT`]); other nodes may share it.
    pub fn open_postgres(conn: opc_pg::Blocking) -> Result<Sessions, SessionsError> {
        conn.migrate(&postgres::COMPONENT)?;
        Ok(Sessions {
            backend: Backend::Postgres(conn),
        })
    }

    fn insert_row(&self, key: String, session: &Session) -> Result<(), SessionsError> {
        let row = (
            session.role.as_str().to_string(),
            to_hex(&session.token_check),
            session.created_at,
            session.expires_at,
        );
        match &self.backend {
            Backend::Sqlite(conn) => sqlite::insert(&lock(conn), &key, &row),
            Backend::Postgres(conn) => postgres::insert(conn, key, row),
        }
    }

    fn find_row(&self, key: String) -> Result<Option<Session>, SessionsError> {
        let row = match &self.backend {
            Backend::Sqlite(conn) => sqlite::find(&lock(conn), &key)?,
            Backend::Postgres(conn) => postgres::find(conn, key)?,
        };
        row.map(|(role, check, created_at, expires_at)| {
            Ok(Session {
                role: Role::parse(&role)
                    .ok_or_else(|| SessionsError::Unreadable(format!("role `{role}`")))?,
                token_check: from_hex(&check)
                    .ok_or_else(|| SessionsError::Unreadable("its token check".into()))?,
                created_at,
                expires_at,
            })
        })
        .transpose()
    }

    fn remove_row(&self, key: String) -> Result<(), SessionsError> {
        match &self.backend {
            Backend::Sqlite(conn) => sqlite::remove(&lock(conn), &key),
            Backend::Postgres(conn) => postgres::remove(conn, key),
        }
    }

    fn purge_rows(&self, now_ms: i64) -> Result<u64, SessionsError> {
        match &self.backend {
            Backend::Sqlite(conn) => sqlite::purge(&lock(conn), now_ms),
            Backend::Postgres(conn) => postgres::purge(conn, now_ms),
        }
    }
}

impl SessionStore for Sessions {
    fn insert(&self, id_digest: &[u8], session: &Session) -> Result<(), StoreError> {
        Ok(self.insert_row(to_hex(id_digest), session)?)
    }

    fn find(&self, id_digest: &[u8]) -> Result<Option<Session>, StoreError> {
        Ok(self.find_row(to_hex(id_digest))?)
    }

    fn remove(&self, id_digest: &[u8]) -> Result<(), StoreError> {
        Ok(self.remove_row(to_hex(id_digest))?)
    }

    fn purge(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(self.purge_rows(now_ms)?)
    }
}

/// `bytes` as lower-case hex.
fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex (either case) back to bytes; `None` when it is not hex.
fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn lock(conn: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sign-in attempts allowed from one peer at once.
const ATTEMPTS_BURST: u32 = 10;

/// Then one more every this long: 10 a minute, so a token of 128 bits or even a 10-character
/// password is out of reach online, while someone who mistypes a few times never waits.
const ATTEMPT_EVERY: Duration = Duration::from_secs(6);

/// The sign-in attempts' limit per peer: a burst of [`ATTEMPTS_BURST`], then one per
/// [`ATTEMPT_EVERY`] (governor's keyed GCRA: constant memory per peer, no timer). Per process: in a
/// cluster each node counts its own.
pub struct Attempts {
    limiter:
        RateLimiter<IpAddr, governor::state::keyed::DefaultKeyedStateStore<IpAddr>, DefaultClock>,
}

impl Attempts {
    /// The limiter, empty.
    pub fn new() -> Attempts {
        let quota = Quota::with_period(ATTEMPT_EVERY)
            .unwrap_or_else(|| Quota::per_minute(NonZeroU32::MIN))
            .allow_burst(NonZeroU32::new(ATTEMPTS_BURST).unwrap_or(NonZeroU32::MIN));
        Attempts {
            limiter: RateLimiter::keyed(quota),
        }
    }
}

impl AttemptLimit for Attempts {
    fn attempt(&self, peer: IpAddr) -> Result<(), Duration> {
        // Peers that are full again are dropped now and then, so the map stays as small as the set
        // of recent guessers.
        if self.limiter.len() > 1024 {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&peer)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}
