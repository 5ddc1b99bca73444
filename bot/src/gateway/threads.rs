//! Which chat thread holds which conversation, and which messages are approval cards — persisted in
//! the same SQLite database as the engine's tasks, so that after a restart a follow-up in an old thread
//! continues its conversation and a click on an old card still finds its approval.
//!
//! Why a table of our own, not a column in the engine's `conversations`: threads are a platform
//! concept; the engine knows conversations only (`agents` does not depend on `adapters`).
//!
//! The tables are created and changed only by [`MIGRATIONS`], the `gateway` component of the file's one
//! migration story (`opc_migrate`, its row in `schema_versions`). Before that table the gateway kept no
//! version: a database holding `gateway_threads` is adopted at version 1, the schema it had then.
//!
//! Invariants: one conversation per (platform, workspace, thread) — the key is the primary key, so a
//! race between two first messages in one thread cannot create two; each write is one statement (an
//! implicit transaction); the connection uses WAL like the engine's, so readers never block writers.

use std::path::Path;
use std::sync::Mutex;

use opc_adapters::{Card, Place, Platform, Posted};
use opc_agents::store::now_ms;
use rusqlite::{Connection, OptionalExtension, params};

/// The gateway's migrations, in order (append only; never edit a published one).
const MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "chat threads and approval cards",
    sql: V1,
}];

/// The gateway's tables as a component of the database file.
pub const COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "gateway",
    migrations: MIGRATIONS,
    legacy: opc_migrate::Legacy::TableExists {
        table: "gateway_threads",
        version: 1,
    },
};

/// Migration 1 (`IF NOT EXISTS` as it was when these tables had no version).
const V1: &str = "
CREATE TABLE IF NOT EXISTS gateway_threads (
    platform      TEXT NOT NULL,
    workspace     TEXT NOT NULL,
    thread        TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    place         TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (platform, workspace, thread)
);
CREATE INDEX IF NOT EXISTS gateway_threads_by_conversation ON gateway_threads (conversation);
CREATE TABLE IF NOT EXISTS gateway_cards (
    approval  INTEGER NOT NULL,
    posted    TEXT NOT NULL,
    card      TEXT NOT NULL,
    PRIMARY KEY (approval, posted)
);
";

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
}

fn failed(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> ThreadsError {
    move |source| ThreadsError::Sqlite { doing, source }
}

/// The thread ↔ conversation map and the approval cards.
pub struct Threads {
    conn: Mutex<Connection>,
}

impl Threads {
    /// Open (and create if needed) the tables in the database at `path`.
    pub fn open(path: &Path) -> Result<Threads, ThreadsError> {
        let mut conn = Connection::open(path).map_err(failed("opening the database"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(failed("setting the busy timeout"))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(failed("enabling WAL"))?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(failed("setting synchronous"))?;
        // A small page cache: lookups by key touch a few pages each.
        conn.pragma_update(None, "cache_size", -256)
            .map_err(failed("setting the cache size"))?;
        opc_migrate::migrate(&mut conn, &COMPONENT)?;
        Ok(Threads {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The conversation living in a thread, with the place its replies go to.
    pub fn conversation(
        &self,
        platform: Platform,
        workspace: &str,
        thread: &str,
    ) -> Result<Option<(String, Place)>, ThreadsError> {
        let found: Option<(String, String)> = self
            .conn()
            .prepare_cached(
                "SELECT conversation, place FROM gateway_threads \
                 WHERE platform = ?1 AND workspace = ?2 AND thread = ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![platform.as_str(), workspace, thread], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(failed("looking up a thread"))?;
        Ok(found.and_then(|(conversation, place)| {
            serde_json::from_str(&place)
                .ok()
                .map(|place| (conversation, place))
        }))
    }

    /// The platform of every conversation that came from a chat platform (`web`, `slack`,
    /// `discord`), by conversation id.
    pub fn platforms(&self) -> Result<std::collections::HashMap<String, String>, ThreadsError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT conversation, platform FROM gateway_threads")
            .map_err(failed("listing threads"))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(failed("listing threads"))?;
        rows.collect::<Result<_, _>>()
            .map_err(failed("listing threads"))
    }

    /// Where a conversation's replies go (its thread), if it came from a chat platform.
    pub fn place_of(&self, conversation: &str) -> Result<Option<Place>, ThreadsError> {
        let place: Option<String> = self
            .conn()
            .prepare_cached(
                "SELECT place FROM gateway_threads WHERE conversation = ?1 ORDER BY created_at LIMIT 1",
            )
            .and_then(|mut stmt| stmt.query_row([conversation], |r| r.get(0)).optional())
            .map_err(failed("looking up a conversation's thread"))?;
        Ok(place.and_then(|p| serde_json::from_str(&p).ok()))
    }

    /// Record that `place`'s thread holds `conversation`. Returns the conversation that holds the
    /// thread afterwards: `conversation`, or the one recorded first if another message won a race.
    pub fn bind(&self, place: &Place, conversation: &str) -> Result<String, ThreadsError> {
        let place_json = serde_json::to_string(place).unwrap_or_default();
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO gateway_threads (platform, workspace, thread, conversation, place, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                place.platform.as_str(),
                place.workspace,
                place.thread,
                conversation,
                place_json,
                now_ms()
            ])
        })
        .map_err(failed("recording a thread"))?;
        conn.prepare_cached(
            "SELECT conversation FROM gateway_threads \
             WHERE platform = ?1 AND workspace = ?2 AND thread = ?3",
        )
        .and_then(|mut stmt| {
            stmt.query_row(
                params![place.platform.as_str(), place.workspace, place.thread],
                |r| r.get(0),
            )
        })
        .map_err(failed("reading a thread back"))
    }

    /// Remember an approval card that was posted.
    pub fn add_card(&self, posted: &Posted, card: &Card) -> Result<(), ThreadsError> {
        let posted_json = serde_json::to_string(posted).unwrap_or_default();
        let card_json = serde_json::to_string(card).unwrap_or_default();
        self.conn()
            .prepare_cached(
                "INSERT OR REPLACE INTO gateway_cards (approval, posted, card) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut stmt| stmt.execute(params![card.approval, posted_json, card_json]))
            .map_err(failed("recording an approval card"))?;
        Ok(())
    }

    /// The cards posted for an approval.
    pub fn cards(&self, approval: i64) -> Result<Vec<(Posted, Card)>, ThreadsError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT posted, card FROM gateway_cards WHERE approval = ?1")
            .map_err(failed("reading approval cards"))?;
        let rows = stmt
            .query_map([approval], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(failed("reading approval cards"))?;
        let mut cards = Vec::new();
        for row in rows {
            let (posted, card) = row.map_err(failed("reading approval cards"))?;
            if let (Ok(posted), Ok(card)) =
                (serde_json::from_str(&posted), serde_json::from_str(&card))
            {
                cards.push((posted, card));
            }
        }
        Ok(cards)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn place(thread: &str) -> Place {
        Place {
            platform: Platform::Slack,
            workspace: "T1".into(),
            channel: "C1".into(),
            thread: thread.into(),
        }
    }

    #[test]
    fn a_thread_keeps_its_first_conversation_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opc.db");
        let threads = Threads::open(&db).unwrap();
        assert_eq!(threads.bind(&place("1.0"), "conv-a").unwrap(), "conv-a");
        // A racing second message loses: the thread keeps conv-a.
        assert_eq!(threads.bind(&place("1.0"), "conv-b").unwrap(), "conv-a");
        drop(threads);
        let threads = Threads::open(&db).unwrap();
        let (conversation, found) = threads
            .conversation(Platform::Slack, "T1", "1.0")
            .unwrap()
            .unwrap();
        assert_eq!((conversation.as_str(), found), ("conv-a", place("1.0")));
        assert!(
            threads
                .conversation(Platform::Slack, "T1", "2.0")
                .unwrap()
                .is_none()
        );
        assert!(
            threads
                .conversation(Platform::Discord, "T1", "1.0")
                .unwrap()
                .is_none()
        );
        assert_eq!(threads.place_of("conv-a").unwrap(), Some(place("1.0")));
    }
}
