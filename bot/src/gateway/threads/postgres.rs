//! The gateway's records in PostgreSQL (`framework.memory.storage: postgres`), where several nodes
//! share the tables, over one [`opc_pg::Blocking`] connection.
//!
//! Why no explicit lock: a thread's first conversation is decided by the primary key. `INSERT … ON
//! CONFLICT DO NOTHING` by a second node while the first node's insert of the same key is not yet
//! committed waits for that commit, then does nothing; the read back that follows (a new statement,
//! so a new snapshot under READ COMMITTED) sees the first node's row. Both nodes end with the one
//! conversation recorded first. The read back must be its own statement: a statement's snapshot
//! (one `WITH … INSERT … SELECT`) could not see a row committed while it waited.
//!
//! Invariants: each write is one statement, committed by itself; a PostgreSQL database has no
//! legacy: its story starts at this file's migration 1, the SQLite schema in PostgreSQL's types
//! (integers `BIGINT`, read as `i64`).

use std::collections::HashMap;

use opc_agents::store::now_ms;
use opc_pg::Blocking;

use super::{Binding, Key, StoredCard, ThreadsError};

/// The gateway's migrations on PostgreSQL, in order (append only; never edit a published one).
const MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "chat threads and approval cards",
    sql: V1,
}];

/// The gateway's tables in a PostgreSQL database: its `schema_versions` row is `gateway`, as on
/// SQLite.
pub const POSTGRES_COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "gateway",
    migrations: MIGRATIONS,
    legacy: opc_migrate::Legacy::None,
};

const V1: &str = "
CREATE TABLE gateway_threads (
    platform      TEXT NOT NULL,
    workspace     TEXT NOT NULL,
    thread        TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    place         TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (platform, workspace, thread)
);
CREATE INDEX gateway_threads_by_conversation ON gateway_threads (conversation);
CREATE TABLE gateway_cards (
    approval  BIGINT NOT NULL,
    posted    TEXT NOT NULL,
    card      TEXT NOT NULL,
    PRIMARY KEY (approval, posted)
);
";

const CONVERSATION: &str = "SELECT conversation, place FROM gateway_threads \
                            WHERE platform = $1 AND workspace = $2 AND thread = $3";

pub(super) fn conversation(
    conn: &Blocking,
    key: Key,
) -> Result<Option<(String, String)>, ThreadsError> {
    Ok(conn.run("looking up a thread", move |client| {
        client
            .query_opt(CONVERSATION, &[&key.platform, &key.workspace, &key.thread])?
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .transpose()
    })?)
}

pub(super) fn platforms(conn: &Blocking) -> Result<HashMap<String, String>, ThreadsError> {
    Ok(conn.run("listing threads", |client| {
        client
            .query("SELECT conversation, platform FROM gateway_threads", &[])?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    })?)
}

pub(super) fn place_of(
    conn: &Blocking,
    conversation: &str,
) -> Result<Option<String>, ThreadsError> {
    let conversation = conversation.to_string();
    Ok(
        conn.run("looking up a conversation's thread", move |client| {
            client
                .query_opt(
                    "SELECT place FROM gateway_threads WHERE conversation = $1 \
                 ORDER BY created_at LIMIT 1",
                    &[&conversation],
                )?
                .map(|r| r.try_get(0))
                .transpose()
        })?,
    )
}

/// Insert unless the thread is recorded (the insert locks the key until it commits, at once), then
/// read back who holds it (see the module doc).
pub(super) fn bind(conn: &Blocking, binding: Binding) -> Result<String, ThreadsError> {
    Ok(conn.run("recording a thread", move |client| {
        let key = &binding.key;
        client.execute(
            "INSERT INTO gateway_threads \
             (platform, workspace, thread, conversation, place, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            &[
                &key.platform,
                &key.workspace,
                &key.thread,
                &binding.conversation,
                &binding.place,
                &now_ms(),
            ],
        )?;
        client
            .query_one(
                "SELECT conversation FROM gateway_threads \
                 WHERE platform = $1 AND workspace = $2 AND thread = $3",
                &[&key.platform, &key.workspace, &key.thread],
            )?
            .try_get(0)
    })?)
}

/// Record a posted card, replacing what was kept for that message (one statement; it locks that
/// row alone).
pub(super) fn add_card(conn: &Blocking, card: StoredCard) -> Result<(), ThreadsError> {
    conn.run("recording an approval card", move |client| {
        client.execute(
            "INSERT INTO gateway_cards (approval, posted, card) VALUES ($1, $2, $3) \
             ON CONFLICT (approval, posted) DO UPDATE SET card = excluded.card",
            &[&card.approval, &card.posted, &card.card],
        )
    })?;
    Ok(())
}

pub(super) fn cards(conn: &Blocking, approval: i64) -> Result<Vec<(String, String)>, ThreadsError> {
    Ok(conn.run("reading approval cards", move |client| {
        client
            .query(
                "SELECT posted, card FROM gateway_cards WHERE approval = $1",
                &[&approval],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    })?)
}
