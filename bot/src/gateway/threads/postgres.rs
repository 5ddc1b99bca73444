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
const MIGRATIONS: &[opc_migrate::Migration] = &[
    opc_migrate::Migration {
        what: "chat threads and approval cards",
        sql: V1,
    },
    opc_migrate::Migration {
        what: "messages waiting for a busy conversation, per node instance",
        sql: V2,
    },
];

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

/// A message waiting for its busy conversation, kept by the node instance whose memory queue holds
/// it: whoever deletes the row answers the message (that node when it starts it, or another node
/// when that instance died).
const V2: &str = "
CREATE TABLE gateway_waiting (
    id            BIGSERIAL PRIMARY KEY,
    conversation  TEXT NOT NULL,
    instance      BIGINT NOT NULL,
    platform      TEXT NOT NULL,
    message       TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);
CREATE INDEX gateway_waiting_by_instance ON gateway_waiting (instance);
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

/// Keep a waiting message for `instance`; its row id.
pub(super) fn park(
    conn: &Blocking,
    conversation: &str,
    instance: i64,
    platform: &'static str,
    message: String,
) -> Result<i64, ThreadsError> {
    let conversation = conversation.to_string();
    Ok(conn.run("keeping a waiting message", move |client| {
        client
            .query_one(
                "INSERT INTO gateway_waiting (conversation, instance, platform, message, created_at) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
                &[&conversation, &instance, &platform, &message, &now_ms()],
            )?
            .try_get(0)
    })?)
}

/// Delete waiting row `id`; `true` when this call deleted it (nobody else took it).
pub(super) fn unpark(conn: &Blocking, id: i64) -> Result<bool, ThreadsError> {
    Ok(conn.run("taking a waiting message", move |client| {
        Ok(client.execute("DELETE FROM gateway_waiting WHERE id = $1", &[&id])? == 1)
    })?)
}

/// Take (delete and return) up to `limit` waiting rows of `platforms` kept by instances not in
/// `live`, oldest first: `(conversation, message)`.
pub(super) fn orphans(
    conn: &Blocking,
    live: Vec<i64>,
    platforms: Vec<String>,
    limit: i64,
) -> Result<Vec<(String, String)>, ThreadsError> {
    Ok(conn.run("taking over waiting messages", move |client| {
        let mut rows: Vec<(i64, String, String)> = client
            .query(
                "DELETE FROM gateway_waiting WHERE id IN ( \
                     SELECT id FROM gateway_waiting \
                     WHERE NOT (instance = ANY($1)) AND platform = ANY($2) \
                     ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) \
                 RETURNING id, conversation, message",
                &[&live, &platforms, &limit],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect::<Result<_, opc_pg::postgres::Error>>()?;
        rows.sort_by_key(|r| r.0);
        Ok(rows.into_iter().map(|(_, c, m)| (c, m)).collect())
    })?)
}
