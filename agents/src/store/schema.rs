//! The engine's schema (tasks, the ledgers of LLM and tool calls, approvals, notices), as versioned migrations in one place.
//!
//! The migrations are the `agents` component of the file's one migration story ([`opc_migrate`]): its
//! version is the `agents` row of `schema_versions`, and [`migrate`] applies the missing migrations in
//! order, all in one `IMMEDIATE` transaction with the version, so a crash mid-upgrade leaves the old
//! version, and two processes opening the file at once (`opc run` and `opc tasks`) cannot both apply a
//! migration. A database from a newer build is refused ([`StoreError::TooNew`]) instead of being misread.
//!
//! Before `schema_versions`, this component kept its version in `PRAGMA user_version`: a database from
//! then is adopted at that version (nothing re-runs), and `user_version` is kept in step so that those
//! older builds still refuse a database upgraded past them. Migration 1 is the schema from before
//! versioning; its statements are all `IF NOT EXISTS`, so a database from before that (version 0, tables
//! present) upgrades cleanly too.
//!
//! The other components of the file (memory, the web transcript, the gateway's threads) have their own
//! rows and their own migrations. To change the engine's schema, append a migration; never edit a
//! published one.

use opc_migrate::{Component, Legacy, MigrateError, Migration};
use rusqlite::Connection;

use super::StoreError;

/// Every migration, in order; migration `n` (1-based) brings the engine's tables to version `n`.
const MIGRATIONS: &[Migration] = &[
    Migration {
        what: "the initial schema",
        sql: V1,
    },
    Migration {
        what: "notices remember when they were delivered",
        // NULL = not delivered yet, which is what every existing notice is.
        sql: "ALTER TABLE notices ADD COLUMN delivered_at INTEGER;
              CREATE INDEX notices_undelivered ON notices(id) WHERE delivered_at IS NULL;",
    },
    Migration {
        what: "the ledger marks calls whose token usage the provider did not report",
        // Earlier calls cannot be told apart any more: they stay counted as reported.
        sql: "ALTER TABLE llm_calls ADD COLUMN usage_unknown INTEGER NOT NULL DEFAULT 0;
              ALTER TABLE tasks ADD COLUMN unknown_usage_calls INTEGER NOT NULL DEFAULT 0;",
    },
    Migration {
        what: "the ledger records what the privacy gateway did per call (counts by type, never values)",
        // NULL = the privacy gateway did not handle the call (disabled, or a call from before it).
        sql: "ALTER TABLE llm_calls ADD COLUMN privacy_mode TEXT;
              ALTER TABLE llm_calls ADD COLUMN privacy_counts TEXT;
              ALTER TABLE llm_calls ADD COLUMN privacy_routed_to TEXT;
              ALTER TABLE llm_calls ADD COLUMN privacy_blocked TEXT;",
    },
    Migration {
        what: "approval options carry their outcome",
        // No table changes: `approvals.options` may now hold `{label, outcome}` objects beside plain
        // labels, which builds before this cannot read. The version bump is what makes those builds
        // refuse the file (through `user_version`, kept in step) instead of failing on the first
        // approval row they meet; rows written before it are read with the same rule as ever.
        sql: "",
    },
    Migration {
        what: "the ledger records every tool call; Bash commands approved for a conversation",
        // `detail` is what the tool noted as safe to keep (never its input); `exit_code` is a
        // command's. `approved_commands` is keyed by the exact command, agent and conversation.
        sql: "CREATE TABLE tool_calls (
                  id          INTEGER PRIMARY KEY,
                  task_id     INTEGER NOT NULL REFERENCES tasks(id),
                  agent       TEXT NOT NULL,
                  tool        TEXT NOT NULL,
                  tool_use_id TEXT NOT NULL,
                  outcome     TEXT NOT NULL,
                  exit_code   INTEGER,
                  detail      TEXT,
                  duration_ms INTEGER NOT NULL,
                  created_at  INTEGER NOT NULL
              );
              CREATE INDEX tool_calls_task ON tool_calls(task_id, id);
              CREATE TABLE approved_commands (
                  conversation_id TEXT NOT NULL,
                  agent           TEXT NOT NULL,
                  command         TEXT NOT NULL,
                  approval_id     INTEGER NOT NULL,
                  created_at      INTEGER NOT NULL,
                  PRIMARY KEY (conversation_id, agent, command)
              );",
    },
    Migration {
        what: "the durable queue of memory work (fact extraction, consolidation); the ledger tells memory work apart",
        // `memory_jobs`: one row per job, kept after it ends (its state says how). `memory_agents`:
        // per agent, the completed roots consolidation has not seen yet (the `frequency` count) and
        // when the last one was seen (the `idleAfter` trigger). `llm_calls.work`: `task` or
        // `memory`; every call before this was a task's.
        sql: "CREATE TABLE memory_jobs (
                  id              INTEGER PRIMARY KEY,
                  kind            TEXT NOT NULL,
                  agent           TEXT NOT NULL,
                  task_id         INTEGER REFERENCES tasks(id),
                  root_id         INTEGER,
                  conversation_id TEXT,
                  state           TEXT NOT NULL,
                  attempts        INTEGER NOT NULL DEFAULT 0,
                  not_before      INTEGER NOT NULL,
                  error           TEXT,
                  created_at      INTEGER NOT NULL,
                  updated_at      INTEGER NOT NULL
              );
              CREATE INDEX memory_jobs_queued ON memory_jobs(not_before, id) WHERE state = 'queued';
              CREATE TABLE memory_agents (
                  agent            TEXT PRIMARY KEY,
                  pending_roots    INTEGER NOT NULL DEFAULT 0,
                  last_root        INTEGER,
                  last_seen_at     INTEGER NOT NULL
              );
              ALTER TABLE llm_calls ADD COLUMN work TEXT NOT NULL DEFAULT 'task';
              CREATE INDEX llm_calls_memory ON llm_calls(agent, created_at) WHERE work = 'memory';",
    },
    Migration {
        what: "tasks keep the trace context they were created under",
        // The W3C `traceparent` of the span a task was created under (telemetry, issue 37), so a
        // resumed tree stays one trace. NULL = telemetry was off, which every earlier task reads as.
        sql: "ALTER TABLE tasks ADD COLUMN trace TEXT;",
    },
    Migration {
        what: "the ledger records remote embedding calls apart (tokens and cost, never text)",
        // Issue 39: an embedding call belongs to no task (the stores embed rows in the
        // background), so it has a table of its own; `privacy_counts` is what was masked, by type.
        sql: EMBEDDING_CALLS,
    },
];

/// The table of remote embedding calls (PostgreSQL's migration 5 is the same in its types).
const EMBEDDING_CALLS: &str = "CREATE TABLE embedding_calls (
                  id             INTEGER PRIMARY KEY,
                  model          TEXT NOT NULL,
                  texts          BIGINT NOT NULL,
                  tokens         BIGINT NOT NULL,
                  cost_usd       DOUBLE PRECISION NOT NULL,
                  usage_unknown  BIGINT NOT NULL DEFAULT 0,
                  duration_ms    BIGINT NOT NULL,
                  attempts       BIGINT NOT NULL,
                  error          TEXT,
                  privacy_counts TEXT,
                  created_at     BIGINT NOT NULL
              );
              CREATE INDEX embedding_calls_at ON embedding_calls(created_at);";

/// The engine's tables as a component of the file: its `schema_versions` row is `agents`.
pub const COMPONENT: Component = Component {
    name: "agents",
    migrations: MIGRATIONS,
    legacy: Legacy::UserVersion,
};

/// The schema version this build creates.
pub const VERSION: i64 = COMPONENT.version();

/// Bring the engine's tables to [`VERSION`], in one transaction. `path` names the file in errors.
pub(super) fn migrate(conn: &mut Connection, path: &str) -> Result<(), StoreError> {
    match opc_migrate::migrate(conn, &COMPONENT) {
        Ok(_) => Ok(()),
        Err(MigrateError::TooNew { found, known, .. }) => Err(StoreError::TooNew {
            path: path.to_string(),
            found,
            known,
        }),
        Err(MigrateError::Sql { what, source, .. }) => Err(StoreError::Migrate {
            path: path.to_string(),
            what,
            source: super::failure(&source),
        }),
    }
}

/// Migration 1: the schema as it was before versioning (every statement idempotent, so a database
/// created then — `user_version` 0 with these tables — upgrades cleanly).
pub(super) const V1: &str = "
CREATE TABLE IF NOT EXISTS conversations (
    id          TEXT PRIMARY KEY,
    root_agent  TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tasks (
    id              INTEGER PRIMARY KEY,
    parent_id       INTEGER REFERENCES tasks(id),
    root_id         INTEGER NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    agent           TEXT NOT NULL,
    depth           INTEGER NOT NULL,
    tool_use_id     TEXT,
    tool_index      INTEGER NOT NULL DEFAULT 0,
    state           TEXT NOT NULL,
    input           TEXT NOT NULL,
    output          TEXT,
    summary         TEXT,
    error           TEXT,
    escalation      TEXT,
    messages        TEXT NOT NULL DEFAULT '[]',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    tokens_in       INTEGER NOT NULL DEFAULT 0,
    tokens_out      INTEGER NOT NULL DEFAULT 0,
    cost_usd        REAL NOT NULL DEFAULT 0,
    llm_calls       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tasks_parent ON tasks(parent_id, tool_use_id, tool_index);
CREATE INDEX IF NOT EXISTS tasks_root ON tasks(root_id);
CREATE INDEX IF NOT EXISTS tasks_conversation ON tasks(conversation_id, id);
DROP INDEX IF EXISTS tasks_state;
CREATE TABLE IF NOT EXISTS llm_calls (
    id          INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL REFERENCES tasks(id),
    agent       TEXT NOT NULL,
    model       TEXT NOT NULL,
    tokens_in   INTEGER NOT NULL,
    tokens_out  INTEGER NOT NULL,
    cost_usd    REAL NOT NULL,
    duration_ms INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    tool_calls  TEXT NOT NULL,
    error       TEXT,
    created_at  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_calls_task ON llm_calls(task_id);
CREATE TABLE IF NOT EXISTS approvals (
    id              INTEGER PRIMARY KEY,
    task_id         INTEGER NOT NULL REFERENCES tasks(id),
    root_id         INTEGER NOT NULL,
    conversation_id TEXT NOT NULL,
    agent           TEXT NOT NULL,
    tool_use_id     TEXT NOT NULL,
    summary         TEXT NOT NULL,
    options         TEXT NOT NULL,
    state           TEXT NOT NULL,
    decision        TEXT,
    decided_by      TEXT,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    decided_at      INTEGER,
    UNIQUE (task_id, tool_use_id)
);
CREATE TABLE IF NOT EXISTS notices (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    task_id         INTEGER,
    text            TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);
";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::Db as Store;

    #[test]
    fn a_database_from_before_versioning_upgrades_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(V1).unwrap();
            conn.execute(
                "INSERT INTO notices (conversation_id, task_id, text, created_at) VALUES ('c', NULL, 'hi', 1)",
                [],
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let notices = store.undelivered_notices().unwrap();
        assert_eq!(notices.len(), 1, "an old notice counts as undelivered");
        assert_eq!(notices[0].text, "hi");
        let version: i64 = store
            .conn()
            .query_row(
                "SELECT version FROM schema_versions WHERE component = 'agents'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, VERSION);
        drop(store);
        // Opening again applies nothing and keeps the rows.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.undelivered_notices().unwrap().len(), 1);
    }

    /// A task from before the trace column reads back with no trace context, and a new task in
    /// the upgraded file keeps its own.
    #[test]
    fn tasks_from_before_the_trace_column_read_back_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(V1).unwrap();
            conn.execute_batch(
                "INSERT INTO conversations (id, root_agent, created_at) VALUES ('c', 'ceo', 1);
                 INSERT INTO tasks (id, root_id, conversation_id, agent, depth, state, input, \
                 created_at, updated_at) VALUES (1, 1, 'c', 'ceo', 0, 'COMPLETED', 'old', 1, 1);",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let old = store.task(1).unwrap();
        assert_eq!((old.input.as_str(), old.trace), ("old", None));
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let new = store
            .create_task(&crate::store::NewTask {
                parent_id: None,
                conversation_id: "c",
                agent: "ceo",
                depth: 0,
                tool_use_id: None,
                tool_index: 0,
                input: "new",
                messages: &[],
                author: None,
                trace: Some(trace),
            })
            .unwrap();
        assert_eq!(store.task(new).unwrap().trace.as_deref(), Some(trace));
    }

    #[test]
    fn a_database_from_a_newer_build_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.db");
        drop(Store::open(&path).unwrap());
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute(
                "UPDATE schema_versions SET version = ?1 WHERE component = 'agents'",
                [VERSION + 1],
            )
            .unwrap();
        }
        let err = Store::open(&path).err().expect("refused");
        assert!(
            matches!(&err, StoreError::TooNew { found, known, .. } if *found == VERSION + 1 && *known == VERSION),
            "{err}"
        );
        assert!(err.to_string().contains("framework.memory.path"), "{err}");
    }

    #[test]
    fn a_database_from_before_schema_versions_and_a_newer_build_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&format!("PRAGMA user_version = {}", VERSION + 1))
                .unwrap();
        }
        assert!(matches!(
            Store::open(&path),
            Err(StoreError::TooNew { found, known, .. }) if found == VERSION + 1 && known == VERSION
        ));
    }
}
