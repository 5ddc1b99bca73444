//! Which chat thread holds which conversation, and which messages are approval cards — persisted beside
//! the engine's tasks (the same SQLite database file, or the same PostgreSQL database with
//! `framework.memory.storage: postgres`), so that after a restart a follow-up in an old thread
//! continues its conversation and a click on an old card still finds its approval.
//!
//! Why a table of our own, not a column in the engine's `conversations`: threads are a platform
//! concept; the engine knows conversations only (`agents` does not depend on `adapters`).
//!
//! This file holds what both backends share — the types, the encoding of places, messages and cards
//! as JSON — and dispatches each operation to the backend's SQL (`sqlite.rs`, `postgres.rs`), written
//! once per backend. The tables are created and changed only by each backend's migrations, the
//! `gateway` component of the database's one migration story (its row in `schema_versions`).
//!
//! Invariants (both backends): one conversation per (platform, workspace, thread) — the key is the
//! primary key and a first message inserts with `ON CONFLICT DO NOTHING`, then reads back, so two
//! first messages in one thread, on one node or on two, both end with the one conversation recorded
//! first; each write is one statement (an implicit transaction).

mod postgres;
mod sqlite;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use opc_adapters::{Card, Place, Platform, Posted};
use rusqlite::Connection;

pub use postgres::POSTGRES_COMPONENT;

/// A database error, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum ThreadsError {
    /// SQLite refused.
    #[error("gateway database: {doing}: {source}")]
    Sqlite {
        /// What was being done.
        doing: &'static str,
        /// Why it failed.
        #[source]
        source: rusqlite::Error,
    },
    /// The tables were written by a newer OPC, or a migration failed (the message says which and where).
    #[error("gateway database: {0}")]
    Schema(#[from] opc_migrate::MigrateError),
    /// PostgreSQL failed (the message names the server as `host:port/name`, never its URL).
    #[error("gateway database: {0}")]
    Postgres(#[from] opc_pg::PgError),
    /// PostgreSQL's tables were written by a newer OPC, or a migration failed there.
    #[error("gateway database: {0}")]
    PostgresSchema(#[from] opc_pg::PgMigrateError),
}

/// Where the records live.
enum Backend {
    /// One connection, shared by the gateway's tasks.
    Sqlite(Mutex<Connection>),
    /// One connection on its own thread (its calls are serialised there).
    Postgres(opc_pg::Blocking),
}

/// The thread ↔ conversation map and the approval cards.
pub struct Threads {
    backend: Backend,
}

impl Threads {
    /// Open (and create if needed) the tables in the SQLite database at `path`.
    pub fn open(path: &Path) -> Result<Threads, ThreadsError> {
        Ok(Threads {
            backend: Backend::Sqlite(Mutex::new(sqlite::open(path)?)),
        })
    }

    /// Open the tables in the PostgreSQL database `conn` is connected to, bringing them up to date
    /// first ([`POSTGRES_COMPONENT`]); other nodes may share them.
    pub fn open_postgres(conn: opc_pg::Blocking) -> Result<Threads, ThreadsError> {
        conn.migrate(&POSTGRES_COMPONENT)?;
        Ok(Threads {
            backend: Backend::Postgres(conn),
        })
    }

    /// The conversation living in a thread, with the place its replies go to.
    pub fn conversation(
        &self,
        platform: Platform,
        workspace: &str,
        thread: &str,
    ) -> Result<Option<(String, Place)>, ThreadsError> {
        let key = Key {
            platform: platform.as_str(),
            workspace: workspace.to_string(),
            thread: thread.to_string(),
        };
        let found = match &self.backend {
            Backend::Sqlite(conn) => sqlite::conversation(&lock(conn), &key)?,
            Backend::Postgres(conn) => postgres::conversation(conn, key)?,
        };
        // A place this build cannot read is a thread it cannot answer in: as if unknown.
        Ok(found.and_then(|(conversation, place)| {
            serde_json::from_str(&place)
                .ok()
                .map(|place| (conversation, place))
        }))
    }

    /// The platform of every conversation that came from a chat platform (`web`, `slack`,
    /// `discord`), by conversation id.
    pub fn platforms(&self) -> Result<HashMap<String, String>, ThreadsError> {
        match &self.backend {
            Backend::Sqlite(conn) => sqlite::platforms(&lock(conn)),
            Backend::Postgres(conn) => postgres::platforms(conn),
        }
    }

    /// Where a conversation's replies go (its thread), if it came from a chat platform.
    pub fn place_of(&self, conversation: &str) -> Result<Option<Place>, ThreadsError> {
        let place = match &self.backend {
            Backend::Sqlite(conn) => sqlite::place_of(&lock(conn), conversation)?,
            Backend::Postgres(conn) => postgres::place_of(conn, conversation)?,
        };
        Ok(place.and_then(|p| serde_json::from_str(&p).ok()))
    }

    /// Record that `place`'s thread holds `conversation`. Returns the conversation that holds the
    /// thread afterwards: `conversation`, or the one recorded first if another message (on this node
    /// or another) won a race.
    pub fn bind(&self, place: &Place, conversation: &str) -> Result<String, ThreadsError> {
        let binding = Binding {
            key: Key {
                platform: place.platform.as_str(),
                workspace: place.workspace.clone(),
                thread: place.thread.clone(),
            },
            conversation: conversation.to_string(),
            place: serde_json::to_string(place).unwrap_or_default(),
        };
        match &self.backend {
            Backend::Sqlite(conn) => sqlite::bind(&lock(conn), &binding),
            Backend::Postgres(conn) => postgres::bind(conn, binding),
        }
    }

    /// Remember an approval card that was posted (replacing what was kept for that message).
    pub fn add_card(&self, posted: &Posted, card: &Card) -> Result<(), ThreadsError> {
        let stored = StoredCard {
            approval: card.approval,
            posted: serde_json::to_string(posted).unwrap_or_default(),
            card: serde_json::to_string(card).unwrap_or_default(),
        };
        match &self.backend {
            Backend::Sqlite(conn) => sqlite::add_card(&lock(conn), &stored),
            Backend::Postgres(conn) => postgres::add_card(conn, stored),
        }
    }

    /// The cards posted for an approval.
    pub fn cards(&self, approval: i64) -> Result<Vec<(Posted, Card)>, ThreadsError> {
        let rows = match &self.backend {
            Backend::Sqlite(conn) => sqlite::cards(&lock(conn), approval)?,
            Backend::Postgres(conn) => postgres::cards(conn, approval)?,
        };
        // A card this build cannot read cannot be redrawn: it is left out.
        Ok(rows
            .into_iter()
            .filter_map(|(posted, card)| {
                Some((
                    serde_json::from_str(&posted).ok()?,
                    serde_json::from_str(&card).ok()?,
                ))
            })
            .collect())
    }
}

/// Messages waiting for a busy conversation, kept in the database so that another node answers
/// them if the node holding them dies (a cluster, PostgreSQL). With SQLite there is one node and
/// nothing to share: nothing is kept (a stop tells each sender to send again).
impl Threads {
    /// Keep `message` (the waiting message, as JSON) for node instance `instance`; its id, or
    /// `None` with SQLite.
    pub fn park(
        &self,
        conversation: &str,
        instance: i64,
        platform: Platform,
        message: String,
    ) -> Result<Option<i64>, ThreadsError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(conn) => {
                postgres::park(conn, conversation, instance, platform.as_str(), message).map(Some)
            }
        }
    }

    /// Take kept message `id` to answer it: `false` when another node took it first (it answers
    /// it).
    pub fn unpark(&self, id: i64) -> Result<bool, ThreadsError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(true),
            Backend::Postgres(conn) => postgres::unpark(conn, id),
        }
    }

    /// Take up to `limit` kept messages of `platforms` whose node instance is not in `live`
    /// (it died, or stopped and handed them on), oldest first: `(conversation, message)`.
    pub fn orphans(
        &self,
        live: Vec<i64>,
        platforms: Vec<String>,
        limit: i64,
    ) -> Result<Vec<(String, String)>, ThreadsError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(Vec::new()),
            Backend::Postgres(conn) => postgres::orphans(conn, live, platforms, limit),
        }
    }
}

/// The SQLite connection; a poisoned lock is taken over (every write is one statement, so a panic
/// cannot have left one half done).
fn lock(conn: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|p| p.into_inner())
}

/// A thread's key.
struct Key {
    platform: &'static str,
    workspace: String,
    thread: String,
}

/// A thread's first conversation, to record (`place` is the place's JSON).
struct Binding {
    key: Key,
    conversation: String,
    place: String,
}

/// A posted card, to record (`posted` and `card` are JSON).
struct StoredCard {
    approval: i64,
    posted: String,
    card: String,
}
