//! The stored engine events (`console_events`), in the org's database beside the engine's tables: the
//! SQLite file, or PostgreSQL with `framework.memory.storage: postgres` (every node of a cluster writes
//! its own events there, tagged with its node id).
//!
//! Why a table of the console's own: the engine's bus is for live consumers and keeps nothing; the
//! Events page's history, its export and the overview's last events need what happened before the
//! tab was opened, and before a restart.
//!
//! Invariants (both backends):
//! - the table is created and changed only by this file's migrations, the `console` component of the
//!   database's one migration story (its row in `schema_versions`);
//! - a batch of events is written in ONE transaction: all of it lands, or none (and it is retried);
//! - ids only grow (SQLite `AUTOINCREMENT`, PostgreSQL `BIGSERIAL`), even after a purge, so paging
//!   newest-first with `before=<id>` never repeats an event, and on SQLite (one writer) never skips
//!   one. On PostgreSQL ids are handed out at insert, not at commit: with several nodes writing, a
//!   batch that commits after a page was read can hold lower ids than that page's last, and is
//!   found by a new query rather than by `before`;
//! - `data` is the event's JSON as the console streams it, minus free text (see the recorder's
//!   `FREE_TEXT`): ids, agent ids, states, counts, tool names; never a message.

use std::sync::Mutex;

use rusqlite::{Connection, params_from_iter};

/// The console's migrations on SQLite, in order (append only; never edit a published one).
const SQLITE_MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "the engine's events, kept for the console's history",
    sql: SQLITE_V1,
}];

/// The console's tables as a component of the SQLite database file.
pub const SQLITE_COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "console",
    migrations: SQLITE_MIGRATIONS,
    legacy: opc_migrate::Legacy::None,
};

const SQLITE_V1: &str = "
CREATE TABLE console_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    request  INTEGER,
    task     INTEGER,
    agent    TEXT,
    node     TEXT,
    data     TEXT NOT NULL
);
CREATE INDEX console_events_by_at ON console_events (at);
CREATE INDEX console_events_by_request ON console_events (request, id);
CREATE INDEX console_events_by_task ON console_events (task, id);
CREATE INDEX console_events_by_agent ON console_events (agent, id);
CREATE INDEX console_events_by_kind ON console_events (kind, id);
";

/// The console's migrations on PostgreSQL, in order (append only).
const POSTGRES_MIGRATIONS: &[opc_migrate::Migration] = &[opc_migrate::Migration {
    what: "the engine's events, kept for the console's history",
    sql: POSTGRES_V1,
}];

/// The console's tables in a PostgreSQL database: its `schema_versions` row is `console`, as on
/// SQLite.
pub const POSTGRES_COMPONENT: opc_migrate::Component = opc_migrate::Component {
    name: "console",
    migrations: POSTGRES_MIGRATIONS,
    legacy: opc_migrate::Legacy::None,
};

const POSTGRES_V1: &str = "
CREATE TABLE console_events (
    id       BIGSERIAL PRIMARY KEY,
    at       BIGINT NOT NULL,
    kind     TEXT NOT NULL,
    request  BIGINT,
    task     BIGINT,
    agent    TEXT,
    node     TEXT,
    data     TEXT NOT NULL
);
CREATE INDEX console_events_by_at ON console_events (at);
CREATE INDEX console_events_by_request ON console_events (request, id);
CREATE INDEX console_events_by_task ON console_events (task, id);
CREATE INDEX console_events_by_agent ON console_events (agent, id);
CREATE INDEX console_events_by_kind ON console_events (kind, id);
";

/// A database error, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused.
    #[error("console events: {doing}: {source}")]
    Sqlite {
        /// What was being done.
        doing: &'static str,
        /// Why it failed.
        #[source]
        source: rusqlite::Error,
    },
    /// The table was written by a newer OPC, or a migration failed.
    #[error("console events: {0}")]
    Schema(#[from] opc_migrate::MigrateError),
    /// PostgreSQL failed (the server is named as `host:port/name`, never by its URL).
    #[error("console events: {0}")]
    Postgres(#[from] opc_pg::PgError),
    /// PostgreSQL's table was written by a newer OPC, or a migration failed there.
    #[error("console events: {0}")]
    PostgresSchema(#[from] opc_pg::PgMigrateError),
}

fn failed(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sqlite { doing, source }
}

/// An event to record.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// When the console saw it (Unix ms).
    pub at: i64,
    /// Its kind (`task_created`, `delegated`, …).
    pub kind: String,
    /// The request (root task) it belongs to.
    pub request: Option<i64>,
    /// Its task.
    pub task: Option<i64>,
    /// The agent it is about (`from` for a delegation).
    pub agent: Option<String>,
    /// Its JSON.
    pub data: String,
}

/// A recorded event.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEvent {
    /// Its id: newer events have larger ids.
    pub id: i64,
    /// When the console saw it (Unix ms).
    pub at: i64,
    /// Its kind.
    pub kind: String,
    /// The request (root task).
    pub request: Option<i64>,
    /// Its task.
    pub task: Option<i64>,
    /// Its agent.
    pub agent: Option<String>,
    /// The node that recorded it (PostgreSQL); `None` on SQLite.
    pub node: Option<String>,
    /// Its JSON.
    pub data: String,
}

impl StoredEvent {
    /// As the API answers it: `{id, at, kind, request, task, agent, node, data}`, `data` as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "at": self.at,
            "kind": self.kind,
            "request": self.request,
            "task": self.task,
            "agent": self.agent,
            "node": self.node,
            "data": serde_json::from_str::<serde_json::Value>(&self.data).unwrap_or(serde_json::Value::Null),
        })
    }
}

/// Which events to read: every given condition holds (an empty `kinds` is any kind); newest first,
/// at most `limit`, all older than `before` (an id) when given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    /// The request (root task id).
    pub request: Option<i64>,
    /// The task.
    pub task: Option<i64>,
    /// The agent.
    pub agent: Option<String>,
    /// Any of these kinds.
    pub kinds: Vec<String>,
    /// At or after (Unix ms).
    pub from: Option<i64>,
    /// At or before (Unix ms).
    pub to: Option<i64>,
    /// Ids below this one.
    pub before: Option<i64>,
    /// How many, at most.
    pub limit: u32,
}

/// A parameter of a built query.
#[derive(Clone, Debug)]
enum Param {
    Int(i64),
    Text(String),
}

impl Filter {
    /// The `WHERE` clause (or nothing) and its parameters, with `placeholder(n)` naming the n-th
    /// (1-based): `?n` for SQLite, `$n` for PostgreSQL.
    fn clause(&self, placeholder: fn(usize) -> String) -> (String, Vec<Param>) {
        let mut conditions = Vec::new();
        let mut params = Vec::new();
        let mut add = |sql: &str, param: Param, params: &mut Vec<Param>| {
            params.push(param);
            conditions.push(sql.replace("{}", &placeholder(params.len())));
        };
        if let Some(request) = self.request {
            add("request = {}", Param::Int(request), &mut params);
        }
        if let Some(task) = self.task {
            add("task = {}", Param::Int(task), &mut params);
        }
        if let Some(agent) = &self.agent {
            add("agent = {}", Param::Text(agent.clone()), &mut params);
        }
        if let Some(from) = self.from {
            add("at >= {}", Param::Int(from), &mut params);
        }
        if let Some(to) = self.to {
            add("at <= {}", Param::Int(to), &mut params);
        }
        if let Some(before) = self.before {
            add("id < {}", Param::Int(before), &mut params);
        }
        if !self.kinds.is_empty() {
            let mut names = Vec::new();
            for kind in &self.kinds {
                params.push(Param::Text(kind.clone()));
                names.push(placeholder(params.len()));
            }
            conditions.push(format!("kind IN ({})", names.join(", ")));
        }
        let clause = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        (clause, params)
    }
}

const COLUMNS: &str = "id, at, kind, request, task, agent, node, data";

/// Where the events live.
enum Backend {
    /// One connection (the recorder and the readers each open their own).
    Sqlite(Mutex<Connection>),
    /// One connection on its own thread.
    Postgres(opc_pg::Blocking),
}

/// The stored events: one connection to them.
pub struct EventStore {
    backend: Backend,
}

impl std::fmt::Debug for EventStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStore").finish_non_exhaustive()
    }
}

impl EventStore {
    /// Open (and create or bring up to date) the table in the SQLite database at `path`.
    pub fn open_sqlite(path: &std::path::Path) -> Result<EventStore, StoreError> {
        let mut conn = Connection::open(path).map_err(failed("opening the database"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(failed("setting the busy timeout"))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(failed("enabling WAL"))?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(failed("setting synchronous"))?;
        opc_migrate::migrate(&mut conn, &SQLITE_COMPONENT)?;
        Ok(EventStore {
            backend: Backend::Sqlite(Mutex::new(conn)),
        })
    }

    /// Open the table in the PostgreSQL database `conn` is connected to, bringing it up to date
    /// first; other nodes share it.
    pub fn open_postgres(conn: opc_pg::Blocking) -> Result<EventStore, StoreError> {
        conn.migrate(&POSTGRES_COMPONENT)?;
        Ok(EventStore {
            backend: Backend::Postgres(conn),
        })
    }

    /// Record `events` (in order), as recorded by `node`, in one transaction.
    pub fn insert(&self, node: Option<&str>, events: &[NewEvent]) -> Result<(), StoreError> {
        const INSERT_SQLITE: &str = "INSERT INTO console_events (at, kind, request, task, agent, node, data) \
                                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
        const INSERT_PG: &str = "INSERT INTO console_events (at, kind, request, task, agent, node, data) \
                                 VALUES ($1, $2, $3, $4, $5, $6, $7)";
        if events.is_empty() {
            return Ok(());
        }
        match &self.backend {
            Backend::Sqlite(conn) => {
                let mut conn = lock(conn);
                let tx = conn
                    .transaction()
                    .map_err(failed("starting a transaction"))?;
                {
                    let mut stmt = tx
                        .prepare_cached(INSERT_SQLITE)
                        .map_err(failed("recording events"))?;
                    for e in events {
                        stmt.execute(rusqlite::params![
                            e.at, e.kind, e.request, e.task, e.agent, node, e.data
                        ])
                        .map_err(failed("recording events"))?;
                    }
                }
                tx.commit().map_err(failed("committing events"))
            }
            Backend::Postgres(conn) => {
                let events = events.to_vec();
                let node = node.map(str::to_string);
                Ok(conn.run("recording events", move |client| {
                    let mut tx = client.transaction()?;
                    let stmt = tx.prepare(INSERT_PG)?;
                    for e in &events {
                        tx.execute(
                            &stmt,
                            &[
                                &e.at, &e.kind, &e.request, &e.task, &e.agent, &node, &e.data,
                            ],
                        )?;
                    }
                    tx.commit()
                })?)
            }
        }
    }

    /// The events `filter` selects, newest first.
    pub fn query(&self, filter: &Filter) -> Result<Vec<StoredEvent>, StoreError> {
        let limit = i64::from(filter.limit);
        match &self.backend {
            Backend::Sqlite(conn) => {
                let (clause, params) = filter.clause(|n| format!("?{n}"));
                let sql = format!(
                    "SELECT {COLUMNS} FROM console_events{clause} ORDER BY id DESC LIMIT {limit}"
                );
                let conn = lock(conn);
                let mut stmt = conn
                    .prepare_cached(&sql)
                    .map_err(failed("reading events"))?;
                let rows = stmt
                    .query_map(params_from_iter(params.iter().map(sqlite_param)), |r| {
                        Ok(StoredEvent {
                            id: r.get(0)?,
                            at: r.get(1)?,
                            kind: r.get(2)?,
                            request: r.get(3)?,
                            task: r.get(4)?,
                            agent: r.get(5)?,
                            node: r.get(6)?,
                            data: r.get(7)?,
                        })
                    })
                    .map_err(failed("reading events"))?;
                rows.collect::<Result<_, _>>()
                    .map_err(failed("reading events"))
            }
            Backend::Postgres(conn) => {
                let (clause, params) = filter.clause(|n| format!("${n}"));
                let sql = format!(
                    "SELECT {COLUMNS} FROM console_events{clause} ORDER BY id DESC LIMIT {limit}"
                );
                Ok(conn.run("reading events", move |client| {
                    let boxed: Vec<Box<dyn opc_pg::postgres::types::ToSql + Sync>> =
                        params.into_iter().map(pg_param).collect();
                    let refs: Vec<&(dyn opc_pg::postgres::types::ToSql + Sync)> =
                        boxed.iter().map(|p| p.as_ref()).collect();
                    client
                        .query(&sql, &refs)?
                        .iter()
                        .map(|r| {
                            Ok(StoredEvent {
                                id: r.try_get(0)?,
                                at: r.try_get(1)?,
                                kind: r.try_get(2)?,
                                request: r.try_get(3)?,
                                task: r.try_get(4)?,
                                agent: r.try_get(5)?,
                                node: r.try_get(6)?,
                                data: r.try_get(7)?,
                            })
                        })
                        .collect()
                })?)
            }
        }
    }

    /// How many events `filter` selects, counting no further than `cap` (its `before` and `limit`
    /// are ignored: this is the size of a whole export).
    pub fn count(&self, filter: &Filter, cap: u32) -> Result<u64, StoreError> {
        let filter = Filter {
            before: None,
            ..filter.clone()
        };
        let cap = i64::from(cap);
        match &self.backend {
            Backend::Sqlite(conn) => {
                let (clause, params) = filter.clause(|n| format!("?{n}"));
                let sql = format!(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM console_events{clause} LIMIT {cap})"
                );
                let conn = lock(conn);
                conn.prepare_cached(&sql)
                    .and_then(|mut stmt| {
                        stmt.query_row(params_from_iter(params.iter().map(sqlite_param)), |r| {
                            r.get::<_, i64>(0)
                        })
                    })
                    .map(|n| n.max(0).unsigned_abs())
                    .map_err(failed("counting events"))
            }
            Backend::Postgres(conn) => {
                let (clause, params) = filter.clause(|n| format!("${n}"));
                let sql = format!(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM console_events{clause} LIMIT {cap}) AS capped"
                );
                Ok(conn.run("counting events", move |client| {
                    let boxed: Vec<Box<dyn opc_pg::postgres::types::ToSql + Sync>> =
                        params.into_iter().map(pg_param).collect();
                    let refs: Vec<&(dyn opc_pg::postgres::types::ToSql + Sync)> =
                        boxed.iter().map(|p| p.as_ref()).collect();
                    let n: i64 = client.query_one(&sql, &refs)?.try_get(0)?;
                    Ok(n.max(0).unsigned_abs())
                })?)
            }
        }
    }

    /// Delete the events seen before `cutoff` (Unix ms); how many went.
    pub fn purge(&self, cutoff: i64) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(conn) => lock(conn)
                .execute("DELETE FROM console_events WHERE at < ?1", [cutoff])
                .map(|n| n as u64)
                .map_err(failed("deleting old events")),
            Backend::Postgres(conn) => Ok(conn.run("deleting old events", move |client| {
                client.execute("DELETE FROM console_events WHERE at < $1", &[&cutoff])
            })?),
        }
    }

    /// Each agent's last finished task since `since` (Unix ms): `(agent, final state)`, from its
    /// newest `agent_finished` event.
    pub fn last_finished(&self, since: i64) -> Result<Vec<(String, String)>, StoreError> {
        const SQL: &str = "SELECT agent, data FROM console_events WHERE id IN \
             (SELECT MAX(id) FROM console_events WHERE kind = 'agent_finished' AND at >= {since} \
              AND agent IS NOT NULL GROUP BY agent)";
        let rows: Vec<(String, String)> = match &self.backend {
            Backend::Sqlite(conn) => {
                let conn = lock(conn);
                let mut stmt = conn
                    .prepare_cached(&SQL.replace("{since}", "?1"))
                    .map_err(failed("reading agents' last tasks"))?;
                let rows = stmt
                    .query_map([since], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(failed("reading agents' last tasks"))?;
                rows.collect::<Result<_, _>>()
                    .map_err(failed("reading agents' last tasks"))?
            }
            Backend::Postgres(conn) => conn.run("reading agents' last tasks", move |client| {
                client
                    .query(&SQL.replace("{since}", "$1"), &[&since])?
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect()
            })?,
        };
        Ok(rows
            .into_iter()
            .map(|(agent, data)| {
                let state = serde_json::from_str::<serde_json::Value>(&data)
                    .ok()
                    .and_then(|v| v["state"].as_str().map(str::to_string))
                    .unwrap_or_default();
                (agent, state)
            })
            .collect())
    }
}

fn sqlite_param(p: &Param) -> rusqlite::types::Value {
    match p {
        Param::Int(i) => rusqlite::types::Value::Integer(*i),
        Param::Text(s) => rusqlite::types::Value::Text(s.clone()),
    }
}

fn pg_param(p: Param) -> Box<dyn opc_pg::postgres::types::ToSql + Sync> {
    match p {
        Param::Int(i) => Box::new(i),
        Param::Text(s) => Box::new(s),
    }
}

/// The SQLite connection; a poisoned lock is taken over (each write is one transaction, so a panic
/// cannot have left one half done).
fn lock(conn: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn event(at: i64, kind: &str, request: i64, task: i64, agent: &str) -> NewEvent {
        NewEvent {
            at,
            kind: kind.into(),
            request: Some(request),
            task: Some(task),
            agent: Some(agent.into()),
            data: serde_json::json!({"event": kind, "task": task, "agent": agent}).to_string(),
        }
    }

    fn store() -> (tempfile::TempDir, EventStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = EventStore::open_sqlite(&dir.path().join("opc.db")).unwrap();
        (dir, store)
    }

    fn ids(events: &[StoredEvent]) -> Vec<i64> {
        events.iter().map(|e| e.id).collect()
    }

    fn sample(store: &EventStore) {
        store
            .insert(
                None,
                &[
                    event(1_000, "task_created", 1, 1, "ceo"),
                    event(2_000, "agent_started", 1, 1, "ceo"),
                    event(3_000, "delegated", 1, 1, "ceo"),
                    event(4_000, "agent_started", 1, 2, "vp"),
                    event(5_000, "agent_finished", 1, 2, "vp"),
                    event(6_000, "agent_finished", 1, 1, "ceo"),
                    event(7_000, "task_created", 3, 3, "ceo"),
                ],
            )
            .unwrap();
    }

    fn all() -> Filter {
        Filter {
            limit: 1000,
            ..Filter::default()
        }
    }

    #[test]
    fn filters_select_and_combine_newest_first() {
        let (_dir, store) = store();
        sample(&store);
        assert_eq!(ids(&store.query(&all()).unwrap()), [7, 6, 5, 4, 3, 2, 1]);
        let f = |filter: Filter| ids(&store.query(&filter).unwrap());
        assert_eq!(
            f(Filter {
                request: Some(3),
                ..all()
            }),
            [7]
        );
        assert_eq!(
            f(Filter {
                task: Some(2),
                ..all()
            }),
            [5, 4]
        );
        assert_eq!(
            f(Filter {
                agent: Some("vp".into()),
                ..all()
            }),
            [5, 4]
        );
        assert_eq!(
            f(Filter {
                kinds: vec!["delegated".into(), "task_created".into()],
                ..all()
            }),
            [7, 3, 1]
        );
        assert_eq!(
            f(Filter {
                from: Some(2_000),
                to: Some(4_000),
                ..all()
            }),
            [4, 3, 2]
        );
        assert_eq!(
            f(Filter {
                request: Some(1),
                agent: Some("ceo".into()),
                kinds: vec!["agent_started".into(), "agent_finished".into()],
                from: Some(2_500),
                ..all()
            }),
            [6]
        );
        assert_eq!(
            store
                .count(
                    &Filter {
                        request: Some(1),
                        ..all()
                    },
                    100
                )
                .unwrap(),
            6
        );
        assert_eq!(
            store.count(&all(), 3).unwrap(),
            3,
            "counting stops at the cap"
        );
    }

    #[test]
    fn paging_with_before_is_complete_without_duplicates() {
        let (_dir, store) = store();
        sample(&store);
        let mut seen = Vec::new();
        let mut before = None;
        loop {
            let page = store
                .query(&Filter {
                    before,
                    limit: 3,
                    ..all()
                })
                .unwrap();
            if page.is_empty() {
                break;
            }
            before = page.last().map(|e| e.id);
            seen.extend(ids(&page));
        }
        assert_eq!(seen, [7, 6, 5, 4, 3, 2, 1]);
    }

    /// The purge takes what is older than the cutoff and nothing else; ids keep growing after it.
    #[test]
    fn a_purge_deletes_only_older_events_and_ids_keep_growing() {
        let (_dir, store) = store();
        sample(&store);
        assert_eq!(store.purge(7_000).unwrap(), 6);
        assert_eq!(ids(&store.query(&all()).unwrap()), [7]);
        store.purge(100_000).unwrap();
        store
            .insert(Some("node-a"), &[event(8_000, "task_created", 9, 9, "ceo")])
            .unwrap();
        let after = store.query(&all()).unwrap();
        assert_eq!(ids(&after), [8], "an id is never reused");
        assert_eq!(after[0].node.as_deref(), Some("node-a"));
    }

    #[test]
    fn each_agents_last_finished_task_is_read_from_its_events() {
        let (_dir, store) = store();
        let finished = |at, task, agent: &str, state: &str| NewEvent {
            data: serde_json::json!({"event": "agent_finished", "state": state}).to_string(),
            ..event(at, "agent_finished", 1, task, agent)
        };
        store
            .insert(
                None,
                &[
                    finished(1_000, 2, "vp", "FAILED"),
                    finished(2_000, 3, "vp", "COMPLETED"),
                    finished(3_000, 1, "ceo", "FAILED"),
                    finished(500, 4, "dev", "FAILED"),
                ],
            )
            .unwrap();
        let mut last = store.last_finished(900).unwrap();
        last.sort();
        assert_eq!(
            last,
            [
                ("ceo".into(), "FAILED".into()),
                ("vp".into(), "COMPLETED".into())
            ]
        );
    }

    #[test]
    fn reopening_migrates_nothing_and_keeps_the_events() {
        let (dir, store) = store();
        sample(&store);
        drop(store);
        let again = EventStore::open_sqlite(&dir.path().join("opc.db")).unwrap();
        assert_eq!(again.query(&all()).unwrap().len(), 7);
    }
}
