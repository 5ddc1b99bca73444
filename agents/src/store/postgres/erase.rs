//! Erasure on PostgreSQL (`opc privacy erase VALUE` with `framework.memory.storage: postgres`):
//! every stored copy of a value, in every table of the org's schema, rewritten as `[erased]`, while
//! `opc run` nodes may keep serving the org.
//!
//! Why generic, as on SQLite ([`super::super::erase`]): the schema holds the engine's tables, the
//! cluster's, memory's, the gateway's and the web chat's, each created by its own crate; the tables
//! and their text columns (`text`, `varchar`, `json`…; generated ones such as the facts' `tsv` are
//! recomputed by PostgreSQL) are read from the catalog of the connection's current schema, and every
//! text value is matched by [`Matcher`].
//!
//! Invariants:
//! - one `REPEATABLE READ` transaction for everything: every table is rewritten or none is. It reads
//!   all tables first (one snapshot), then writes; a row a node changed after that snapshot makes
//!   the write fail with a serialization error instead of overwriting the node's change, and the
//!   whole erasure is tried again ([`ATTEMPTS`]), as it is after a deadlock with a node;
//! - a value in a row's structure (a JSON document's key) or in the cluster's names (a node, a
//!   hold) refuses the erasure before anything is written;
//! - foreign keys over a rewritten column (a conversation id held by its tasks) are made
//!   deferrable inside the transaction and put back before its commit (DDL is transactional here:
//!   no other connection sees the change);
//! - recall's rows are rewritten through its guard (`opc_memory::recall::erase::postgres`), and
//!   rewritten recall rows and fact versions get this transaction's `xid`, so every running node's
//!   tailing indexes read them again after the commit (BM25 documents replaced by seq, vectors
//!   dropped and computed again from the new text); their stored vectors are deleted;
//! - a dry run ([`scan`]) runs in a read-only transaction and changes nothing.
//!
//! What a running node holds in memory is out of reach: a task in flight keeps its session and may
//! save it again. [`Erasure::running`] names those tasks so the command can say so (the SQLite
//! erasure refuses to run beside `opc run` for the same reason; here the other caches follow:
//! core blocks are read from the database at every turn, the search indexes re-read the rows).

use std::time::Duration;

use opc_memory::recall::erase::postgres as recall_pg;
use opc_privacy::erase::Matcher;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, IsolationLevel, Transaction};

use super::super::erase::{EraseError, Erasure, TableCount};
use super::super::{DbFailure, TaskState};
use super::sql::failure;

/// How many times an erasure that met a node's concurrent change (a serialization failure or a
/// deadlock) runs in all.
const ATTEMPTS: usize = 4;

/// Recall's append-only table.
const RECALL_TABLE: &str = "recall_messages";
/// The facts' versions: their vectors are derived from the text.
const FACT_VERSIONS: &str = "memory_fact_versions";

/// The cluster's names (nodes, their hosts and addresses, holds): OPC's structure, never personal
/// data; rewriting one would rename a running node or a hold under it.
const CLUSTER_NAMES: &[(&str, &str)] = &[
    ("cluster_nodes", "id"),
    ("cluster_nodes", "host"),
    ("cluster_nodes", "address"),
    ("tree_leases", "node"),
    ("cluster_holds", "name"),
    ("cluster_holds", "node"),
    ("tasks", "node"),
    ("config_history", "node"),
];

/// Every ordinary table of the current schema, in name order.
const TABLES: &str = "SELECT c.relname::text FROM pg_class c \
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' ORDER BY c.relname";

/// The writable text columns of the current schema's tables: (table, column, type).
const TEXT_COLUMNS: &str = "SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod) \
     FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid JOIN pg_type t ON t.oid = a.atttypid \
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' \
       AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' \
       AND (t.typcategory = 'S' OR a.atttypid IN ('json'::regtype, 'jsonb'::regtype)) \
     ORDER BY c.relname, a.attnum";

/// The foreign keys of the current schema that are not deferrable: (constraint, table, its
/// columns, referenced table, their columns).
const FOREIGN_KEYS: &str = "SELECT con.conname::text, cl.relname::text, \
       ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = con.conrelid AND a.attnum = ANY(con.conkey)), \
       fcl.relname::text, \
       ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = con.confrelid AND a.attnum = ANY(con.confkey)) \
     FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.conrelid JOIN pg_class fcl ON fcl.oid = con.confrelid \
     WHERE con.contype = 'f' AND NOT con.condeferrable AND cl.relnamespace = current_schema()::regnamespace";

/// A row of [`FOREIGN_KEYS`].
type ForeignKey = (String, String, Vec<String>, String, Vec<String>);

/// The rewritten fact versions (`$1`, ids): read again by every node's vector follower.
const FACTS_REWRITTEN: &str =
    "UPDATE memory_fact_versions SET xid = pg_current_xact_id() WHERE id = ANY($1)";
/// Their vectors (of the old text); the nodes embed the current ones again.
const FACTS_DROP_VECTORS: &str = "DELETE FROM memory_fact_vectors WHERE version_id = ANY($1)";

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// One table to scan.
struct Table {
    name: String,
    /// Text columns: (name, type as `format_type` writes it).
    columns: Vec<(String, String)>,
}

/// One row to rewrite: its address in the snapshot, its id (the special tables'), its new texts by
/// column index.
struct Change {
    ctid: String,
    id: Option<i64>,
    texts: Vec<(usize, String)>,
}

/// A table's scan: its count and its rows to rewrite.
struct Scanned {
    table: Table,
    count: TableCount,
    changes: Vec<Change>,
}

/// The id column read beside a changed row of `table`, when the erasure needs it.
fn id_column(table: &str) -> Option<&'static str> {
    match table {
        RECALL_TABLE => Some("seq"),
        FACT_VERSIONS | "tasks" => Some("id"),
        _ => None,
    }
}

/// A failure while `doing`, at `place`.
fn pg(place: &str, doing: &str) -> impl FnOnce(tokio_postgres::Error) -> EraseError {
    let place = place.to_string();
    let doing = doing.to_string();
    move |e| {
        let retry = e.code().is_some_and(|c| {
            *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        });
        EraseError::Postgres {
            place,
            doing,
            source: failure(&e),
            retry,
        }
    }
}

/// Whether `e` is a conflict with a concurrent writer that a new attempt can get past.
fn is_conflict(e: &EraseError) -> bool {
    matches!(e, EraseError::Postgres { retry: true, .. })
}

async fn tables(tx: &Transaction<'_>, place: &str) -> Result<Vec<Table>, EraseError> {
    let names = tx
        .query(TABLES, &[])
        .await
        .map_err(pg(place, "listing the tables"))?;
    let columns = tx
        .query(TEXT_COLUMNS, &[])
        .await
        .map_err(pg(place, "listing the text columns"))?;
    let mut out = Vec::with_capacity(names.len());
    for r in &names {
        let name: String = r.try_get(0).map_err(pg(place, "listing the tables"))?;
        out.push(Table {
            name,
            columns: Vec::new(),
        });
    }
    for r in &columns {
        let get = |i| -> Result<String, EraseError> {
            r.try_get(i).map_err(pg(place, "listing the text columns"))
        };
        let (table, column, ty) = (get(0)?, get(1)?, get(2)?);
        if let Some(t) = out.iter_mut().find(|t| t.name == table) {
            t.columns.push((column, ty));
        }
    }
    Ok(out)
}

/// Scan one table for the value.
async fn scan_table(
    tx: &Transaction<'_>,
    place: &str,
    table: Table,
    matcher: &Matcher,
) -> Result<Scanned, EraseError> {
    let mut count = TableCount {
        table: table.name.clone(),
        rows: 0,
        occurrences: 0,
    };
    if table.columns.is_empty() {
        return Ok(Scanned {
            table,
            count,
            changes: Vec::new(),
        });
    }
    let id = id_column(&table.name);
    let select = format!(
        "SELECT ctid::text, {}, {} FROM {}",
        id.map_or("NULL::BIGINT".to_string(), |c| format!(
            "{}::BIGINT",
            quote(c)
        )),
        table
            .columns
            .iter()
            .map(|(c, _)| format!("{}::text", quote(c)))
            .collect::<Vec<_>>()
            .join(", "),
        quote(&table.name)
    );
    let doing = format!("reading {}", table.name);
    let rows = tx.query(&select, &[]).await.map_err(pg(place, &doing))?;
    let mut changes = Vec::new();
    for row in &rows {
        let mut texts = Vec::new();
        for (i, (column, _)) in table.columns.iter().enumerate() {
            let text: Option<String> = row.try_get(2 + i).map_err(pg(place, &doing))?;
            let Some(text) = text else { continue };
            match matcher.erase(&text) {
                Ok(Some((new, n))) => {
                    if CLUSTER_NAMES.contains(&(table.name.as_str(), column.as_str())) {
                        return Err(EraseError::Structure {
                            table: table.name.clone(),
                            column: column.clone(),
                            reason: "the value is part of the name or address of a node of the cluster (or of \
                                     what it holds); erasing it would rename a running node. Pass the whole \
                                     personal value"
                                .into(),
                        });
                    }
                    count.occurrences += n;
                    texts.push((i, new));
                }
                Ok(None) => {}
                Err(unsafe_) => {
                    return Err(EraseError::Structure {
                        table: table.name.clone(),
                        column: column.clone(),
                        reason: unsafe_.to_string(),
                    });
                }
            }
        }
        if !texts.is_empty() {
            count.rows += 1;
            changes.push(Change {
                ctid: row.try_get(0).map_err(pg(place, &doing))?,
                id: row.try_get(1).map_err(pg(place, &doing))?,
                texts,
            });
        }
    }
    Ok(Scanned {
        table,
        count,
        changes,
    })
}

/// Scan every table in `tx`'s snapshot.
async fn scan_all(
    tx: &Transaction<'_>,
    place: &str,
    matcher: &Matcher,
) -> Result<Vec<Scanned>, EraseError> {
    let mut out = Vec::new();
    for table in tables(tx, place).await? {
        out.push(scan_table(tx, place, table, matcher).await?);
    }
    Ok(out)
}

/// The erasure's counts from the scans (and the rewritten recall rows).
fn summary(scanned: &[Scanned]) -> Erasure {
    let mut out = Erasure {
        tables: scanned.iter().map(|s| s.count.clone()).collect(),
        ..Erasure::default()
    };
    out.recall_seqs = ids(scanned, RECALL_TABLE);
    out.recall_seqs.sort_unstable();
    out
}

/// The ids of the changed rows of `table`.
fn ids(scanned: &[Scanned], table: &str) -> Vec<i64> {
    scanned
        .iter()
        .filter(|s| s.table.name == table)
        .flat_map(|s| s.changes.iter().filter_map(|c| c.id))
        .collect()
}

/// The tasks among `ids` that have not ended, with the node running them (if recorded).
async fn running(
    tx: &Transaction<'_>,
    place: &str,
    ids: &[i64],
) -> Result<Vec<(i64, Option<String>)>, EraseError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let ended: Vec<&str> = TaskState::ALL
        .iter()
        .filter(|s| s.is_terminal())
        .map(|s| s.as_str())
        .collect();
    let doing = "reading the tasks still running";
    let rows = tx
        .query(
            "SELECT id, node FROM tasks WHERE id = ANY($1) AND NOT (state = ANY($2)) ORDER BY id",
            &[&ids, &ended],
        )
        .await
        .map_err(pg(place, doing))?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(pg(place, doing))
}

/// A connection of its own to the database `url` names, for an erasure: nothing is migrated (a dry
/// run changes nothing; [`rewrite`]'s caller opens the store first, which migrates). Gives up after
/// [`super::CONNECT_DEADLINE`]; errors name the database as `host:port/name`, never the URL.
pub async fn connect(url: &str) -> Result<(Client, String), EraseError> {
    let failed = |place: String, message: String| EraseError::Postgres {
        place,
        doing: "connecting".into(),
        source: DbFailure {
            fault: super::super::DbFault::Unavailable,
            message,
        },
        retry: false,
    };
    let place = opc_pg::parse(url)
        .map(|c| opc_pg::place(&c))
        .map_err(|e| failed(e.place, e.message))?;
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|_| failed(place.clone(), "not a PostgreSQL URL".into()))?;
    config.connect_timeout(super::CONNECT_DEADLINE);
    let connected = tokio::time::timeout(
        super::CONNECT_DEADLINE,
        config.connect(tokio_postgres::NoTls),
    )
    .await
    .map_err(|_| {
        failed(
            place.clone(),
            format!("no answer within {}s", super::CONNECT_DEADLINE.as_secs()),
        )
    })?;
    let (client, connection) = connected.map_err(pg(&place, "connecting"))?;
    tokio::spawn(async move {
        // Ends when the client is dropped; an error then is the connection closing.
        let _ = connection.await;
    });
    Ok((client, place))
}

/// A dry run: what [`rewrite`] would change, in one read-only snapshot; nothing is written or
/// locked beyond what any reader takes.
pub async fn scan(
    client: &mut Client,
    place: &str,
    matcher: &Matcher,
) -> Result<Erasure, EraseError> {
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg(place, "starting a read"))?;
    let scanned = scan_all(&tx, place, matcher).await?;
    let mut out = summary(&scanned);
    out.running = running(&tx, place, &ids(&scanned, "tasks")).await?;
    tx.commit().await.map_err(pg(place, "ending the read"))?;
    Ok(out)
}

/// Rewrite every stored copy of the value in the database behind `client` (its current schema), in
/// one transaction, and record the erasure in `recall_erasures`; tried again when a node's
/// concurrent change conflicts with it. The tables are expected to be migrated (the caller opened
/// the store). Afterwards, [`vacuum`] the tables it rewrote.
pub async fn rewrite(
    client: &mut Client,
    place: &str,
    matcher: &Matcher,
) -> Result<Erasure, EraseError> {
    let mut attempt = 1;
    loop {
        match rewrite_once(client, place, matcher).await {
            Err(e) if attempt < ATTEMPTS && is_conflict(&e) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50 * attempt as u64)).await;
            }
            other => return other,
        }
    }
}

async fn rewrite_once(
    client: &mut Client,
    place: &str,
    matcher: &Matcher,
) -> Result<Erasure, EraseError> {
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .start()
        .await
        .map_err(pg(place, "starting the rewrite"))?;
    let scanned = scan_all(&tx, place, matcher).await?;
    let mut out = summary(&scanned);
    out.running = running(&tx, place, &ids(&scanned, "tasks")).await?;
    // Foreign keys over a column about to be rewritten are checked at the end, not per row: a
    // key rewritten in a parent and its children alike is consistent only once both are.
    let touched: Vec<(&str, &str)> = scanned
        .iter()
        .flat_map(|s| {
            s.changes.iter().flat_map(move |c| {
                c.texts
                    .iter()
                    .map(move |(i, _)| (s.table.name.as_str(), s.table.columns[*i].0.as_str()))
            })
        })
        .collect();
    let mut deferred: Vec<(String, String)> = Vec::new();
    if !touched.is_empty() {
        let keys = tx
            .query(FOREIGN_KEYS, &[])
            .await
            .map_err(pg(place, "listing the foreign keys"))?;
        for k in &keys {
            let read = || -> Result<ForeignKey, tokio_postgres::Error> {
                Ok((
                    k.try_get(0)?,
                    k.try_get(1)?,
                    k.try_get(2)?,
                    k.try_get(3)?,
                    k.try_get(4)?,
                ))
            };
            let (name, table, columns, parent, parent_columns) =
                read().map_err(pg(place, "listing the foreign keys"))?;
            let hit = touched.iter().any(|(t, c)| {
                (*t == table && columns.iter().any(|x| x == c))
                    || (*t == parent && parent_columns.iter().any(|x| x == c))
            });
            if hit {
                deferred.push((table, name));
            }
        }
        for (table, name) in &deferred {
            tx.batch_execute(&format!(
                "ALTER TABLE {} ALTER CONSTRAINT {} DEFERRABLE INITIALLY DEFERRED",
                quote(table),
                quote(name)
            ))
            .await
            .map_err(pg(place, "deferring a foreign key"))?;
        }
        if !deferred.is_empty() {
            tx.batch_execute("SET CONSTRAINTS ALL DEFERRED")
                .await
                .map_err(pg(place, "deferring the foreign keys"))?;
        }
    }
    let recall_seqs = out.recall_seqs.clone();
    if !recall_seqs.is_empty() {
        tx.batch_execute(recall_pg::LIFT_GUARD)
            .await
            .map_err(pg(place, "lifting recall's append-only guard"))?;
    }
    for s in &scanned {
        let doing = format!("rewriting {}", s.table.name);
        for change in &s.changes {
            let set = change
                .texts
                .iter()
                .enumerate()
                .map(|(n, (i, _))| {
                    let (column, ty) = &s.table.columns[*i];
                    format!("{} = CAST(${}::text AS {ty})", quote(column), n + 1)
                })
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "UPDATE {} SET {set} WHERE ctid = ${}::text::tid",
                quote(&s.table.name),
                change.texts.len() + 1
            );
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = change
                .texts
                .iter()
                .map(|(_, t)| t as &(dyn tokio_postgres::types::ToSql + Sync))
                .collect();
            params.push(&change.ctid);
            let n = tx
                .execute(sql.as_str(), &params)
                .await
                .map_err(pg(place, &doing))?;
            if n != 1 {
                return Err(EraseError::Postgres {
                    place: place.to_string(),
                    doing,
                    source: DbFailure {
                        fault: super::super::DbFault::Conflict,
                        message: "a row changed while it was being rewritten".into(),
                    },
                    retry: true,
                });
            }
        }
    }
    if !recall_seqs.is_empty() {
        tx.execute(recall_pg::REWRITTEN, &[&recall_seqs])
            .await
            .map_err(pg(place, "moving the rewritten recall rows"))?;
        tx.execute(recall_pg::DROP_VECTORS, &[&recall_seqs])
            .await
            .map_err(pg(place, "dropping the rewritten recall rows' vectors"))?;
        tx.batch_execute(recall_pg::RESTORE_GUARD)
            .await
            .map_err(pg(place, "restoring recall's append-only guard"))?;
    }
    let facts = ids(&scanned, FACT_VERSIONS);
    if !facts.is_empty() {
        tx.execute(FACTS_DROP_VECTORS, &[&facts])
            .await
            .map_err(pg(place, "dropping the rewritten facts' vectors"))?;
        tx.execute(FACTS_REWRITTEN, &[&facts])
            .await
            .map_err(pg(place, "moving the rewritten facts"))?;
    }
    if !deferred.is_empty() {
        // Checked now (a broken reference fails the erasure here), then put back as they were.
        tx.batch_execute("SET CONSTRAINTS ALL IMMEDIATE")
            .await
            .map_err(pg(place, "checking the foreign keys"))?;
        for (table, name) in &deferred {
            tx.batch_execute(&format!(
                "ALTER TABLE {} ALTER CONSTRAINT {} NOT DEFERRABLE",
                quote(table),
                quote(name)
            ))
            .await
            .map_err(pg(place, "restoring a foreign key"))?;
        }
    }
    let at_ms = opc_migrate::now_ms();
    let counts = serde_json::to_value(&out.tables)
        .unwrap_or_default()
        .to_string();
    let chars = i64::try_from(matcher.chars()).unwrap_or(i64::MAX);
    let record: i64 = tx
        .query_one(recall_pg::RECORD, &[&at_ms, &chars, &counts])
        .await
        .and_then(|r| r.try_get(0))
        .map_err(pg(place, "recording the erasure"))?;
    out.record = Some(record);
    tx.commit()
        .await
        .map_err(pg(place, "committing the rewrite"))?;
    Ok(out)
}

/// `VACUUM` the tables `done` rewrote, so that the rows' old versions are gone from them (their
/// bytes stay in the files until the space is reused, and in the server's write-ahead log and
/// backups). The tables that could not be vacuumed, with why (not fatal: the rewrite is committed).
pub async fn vacuum(client: &Client, done: &Erasure) -> Vec<(String, String)> {
    let mut failed = Vec::new();
    let mut tables: Vec<&str> = done
        .tables
        .iter()
        .filter(|t| t.rows > 0)
        .map(|t| t.table.as_str())
        .collect();
    if !done.recall_seqs.is_empty() {
        tables.push("recall_vectors");
    }
    if tables.contains(&FACT_VERSIONS) {
        tables.push("memory_fact_vectors");
    }
    for table in tables {
        if let Err(e) = client
            .batch_execute(&format!("VACUUM {}", quote(table)))
            .await
        {
            failed.push((table.to_string(), failure(&e).message));
        }
    }
    failed
}
