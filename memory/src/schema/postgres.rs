//! Memory's tables on PostgreSQL (`framework.memory.storage: postgres`), as the `memory` component
//! of the database's migration story (`opc_pg::migrate`).
//!
//! Only the SQL lives here (memory keeps no PostgreSQL client): the engine's PostgreSQL store
//! applies it beside its own tables, and appends recall rows inside its transactions, as the SQLite
//! store does.
//!
//! `recall_messages` on PostgreSQL differs in one column: `xid`, the writing transaction's id
//! (`pg_current_xact_id()`). Why: a sequence hands out `seq` at insert, not at commit, so a
//! transaction that took `seq` 7 may commit after one that took 8, and an indexer that remembers
//! "everything up to 8" would skip 7 forever. A reader instead tails by transaction: every
//! transaction older than `pg_snapshot_xmin(pg_current_snapshot())` has ended, so the rows with
//! `xid` below that horizon are final, and a reader that moves its horizon forward reads each
//! committed row exactly once.

use opc_migrate::{Component, Legacy, Migration};

/// Every migration of memory's PostgreSQL tables, in order.
const MIGRATIONS: &[Migration] = &[Migration {
    what: "recall messages, tailed in commit order",
    sql: "
CREATE TABLE recall_messages (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid          xid8   NOT NULL DEFAULT pg_current_xact_id(),
    namespace    TEXT   NOT NULL,
    author       TEXT   NOT NULL,
    conversation TEXT   NOT NULL,
    task         TEXT,
    thread       TEXT,
    source_id    TEXT,
    time_ms      BIGINT NOT NULL,
    content_hash TEXT   NOT NULL,
    text         TEXT   NOT NULL
);
CREATE INDEX recall_messages_xid ON recall_messages(xid);
CREATE INDEX recall_messages_thread ON recall_messages(conversation, thread, seq);
CREATE FUNCTION recall_messages_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'recall_messages is append-only'; END $$;
CREATE TRIGGER recall_messages_no_change BEFORE UPDATE OR DELETE ON recall_messages
    FOR EACH ROW EXECUTE FUNCTION recall_messages_append_only();
CREATE TABLE recall_vectors (
    seq    BIGINT PRIMARY KEY REFERENCES recall_messages(seq),
    model  TEXT   NOT NULL,
    vector BYTEA  NOT NULL
);
",
}];

/// Memory's tables on PostgreSQL: its `schema_versions` row is `memory`.
pub const COMPONENT: Component = Component {
    name: "memory",
    migrations: MIGRATIONS,
    legacy: Legacy::None,
};
