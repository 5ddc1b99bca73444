//! The blocks' SQL on PostgreSQL (`framework.memory.storage: postgres`), over an
//! [`opc_pg::Blocking`] connection; several nodes may share the database.
//!
//! Invariants:
//! - every change is one transaction (a closure on the connection, committed at its end; an early
//!   return drops the transaction, which rolls it back);
//! - an edit locks the block's row (`SELECT … FOR UPDATE`) before it checks the version, so of two
//!   nodes editing one block from one version the second waits, then reads the first's version and
//!   is told it is stale;
//! - seeding inserts a missing block with `ON CONFLICT DO NOTHING` (a node that loses the race waits
//!   for the winner's commit, then finds the row) and locks a stored one (`FOR UPDATE`) before it
//!   compares the config's value, so nodes seeding at once write each `seed` or admin change once.
//!   It takes its locks in (namespace, label) order, as every seeding node does, so two seedings
//!   never deadlock; an edit holds one row only;
//! - integers are BIGINT: what does not fit the block's types (a negative version, a limit beyond
//!   `u32`) is reported as [`Fault::Corrupt`], never cast or unwrapped.
//!
//! The rules (what seeding does, whether an edit applies) are `mod.rs`'s; this file only reads and
//! writes rows.

use std::collections::HashMap;
use std::sync::Arc;

use opc_migrate::now_ms;
use opc_pg::postgres::{Row, Transaction};
use opc_pg::{Blocking, Fault, PgError};

use super::{Block, BlockError, Configured, EditRequest, HistoryEntry, Seeding, Stored, seeding};

const COLUMNS: &str = "namespace, label, description, value, char_limit, read_only, version";

/// Stored data this build cannot read as its types.
fn corrupt(place: &str, doing: &'static str, message: String) -> PgError {
    PgError {
        place: place.to_string(),
        doing,
        fault: Fault::Corrupt,
        message,
    }
}

/// A version as stored (BIGINT), checked.
fn version(v: i64, place: &str, doing: &'static str) -> Result<u64, PgError> {
    u64::try_from(v).map_err(|_| corrupt(place, doing, format!("a block version is {v}")))
}

/// A block's row as stored, read on the connection's thread and checked by [`RawBlock::block`].
struct RawBlock {
    namespace: String,
    label: String,
    description: String,
    value: String,
    limit: i64,
    read_only: bool,
    version: i64,
}

impl RawBlock {
    /// `row`, selected as [`COLUMNS`].
    fn read(row: &Row) -> Result<RawBlock, opc_pg::postgres::Error> {
        Ok(RawBlock {
            namespace: row.try_get(0)?,
            label: row.try_get(1)?,
            description: row.try_get(2)?,
            value: row.try_get(3)?,
            limit: row.try_get(4)?,
            read_only: row.try_get(5)?,
            version: row.try_get(6)?,
        })
    }

    fn block(self, place: &str, doing: &'static str) -> Result<Block, PgError> {
        let limit = u32::try_from(self.limit).map_err(|_| {
            corrupt(
                place,
                doing,
                format!(
                    "memory block `{}` in `{}` has the limit {}",
                    self.label, self.namespace, self.limit
                ),
            )
        })?;
        Ok(Block {
            version: version(self.version, place, doing)?,
            namespace: self.namespace,
            label: self.label,
            description: self.description,
            value: self.value,
            limit,
            read_only: self.read_only,
        })
    }
}

/// The blocks `keys` (namespace, label) name, in order (`None` where none is stored): one query.
pub(super) fn load_each(
    conn: &Blocking,
    keys: Vec<(String, String)>,
) -> Result<Vec<Option<Block>>, PgError> {
    const DOING: &str = "reading memory blocks";
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let (namespaces, labels): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
    let rows = conn.run(DOING, move |client| {
        client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM memory_blocks
                     WHERE (namespace, label) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
                ),
                &[&namespaces, &labels],
            )?
            .iter()
            .map(RawBlock::read)
            .collect::<Result<Vec<_>, _>>()
    })?;
    let mut found: HashMap<(String, String), Block> = HashMap::with_capacity(rows.len());
    for raw in rows {
        let block = raw.block(conn.place(), DOING)?;
        found.insert((block.namespace.clone(), block.label.clone()), block);
    }
    Ok(keys.iter().map(|key| found.remove(key)).collect())
}

/// Seed `configured` (see [`seeding`]) in one transaction, locking what it checks (module doc).
pub(super) fn sync(conn: &Blocking, configured: Arc<Vec<Configured>>) -> Result<(), PgError> {
    const DOING: &str = "seeding the memory blocks";
    let place = conn.place().to_string();
    conn.run(DOING, move |client| {
        let mut order: Vec<&Configured> = configured.iter().collect();
        order.sort_by(|a, b| (&a.namespace, &a.label).cmp(&(&b.namespace, &b.label)));
        let mut tx = client.transaction()?;
        let now = now_ms();
        for c in order {
            let limit = i64::from(c.limit);
            // The insert `Seeding::Insert` asks for, made first: whether it inserted is the one
            // answer to "is it stored" that a concurrent seeding cannot change under us.
            let inserted = tx.query_opt(
                "INSERT INTO memory_blocks (namespace, label, description, value, char_limit, read_only, version, config_value, updated_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, 1, $4, $7)
                 ON CONFLICT (namespace, label) DO NOTHING RETURNING version",
                &[&c.namespace, &c.label, &c.description, &c.value, &limit, &c.read_only, &now],
            )?;
            let stored = match inserted {
                Some(_) => None,
                None => {
                    let Some(row) = tx.query_opt(
                        "SELECT value, config_value, version FROM memory_blocks
                         WHERE namespace = $1 AND label = $2 FOR UPDATE",
                        &[&c.namespace, &c.label],
                    )?
                    else {
                        // Blocks are never deleted: a conflict on a row that is gone is not ours.
                        return Ok(Err(PgError {
                            place: place.clone(),
                            doing: DOING,
                            fault: Fault::Conflict,
                            message: format!(
                                "memory block `{}` in `{}` conflicted on insert, then was not found",
                                c.label, c.namespace
                            ),
                        }));
                    };
                    let v: i64 = row.try_get(2)?;
                    let version = match version(v, &place, DOING) {
                        Ok(v) => v,
                        Err(e) => return Ok(Err(e)),
                    };
                    Some(Stored {
                        value: row.try_get(0)?,
                        applied: row.try_get(1)?,
                        version,
                    })
                }
            };
            match seeding(c, stored, now) {
                Seeding::Insert(entry) => insert_history(&mut tx, &entry)?,
                Seeding::Admin(entry) => {
                    tx.execute(
                        "UPDATE memory_blocks SET description = $3, value = $4, char_limit = $5, read_only = $6,
                         version = $7, config_value = $4, updated_ms = $8 WHERE namespace = $1 AND label = $2",
                        &[
                            &c.namespace,
                            &c.label,
                            &c.description,
                            &c.value,
                            &limit,
                            &c.read_only,
                            &(entry.version as i64),
                            &now,
                        ],
                    )?;
                    insert_history(&mut tx, &entry)?;
                }
                Seeding::Describe => {
                    tx.execute(
                        "UPDATE memory_blocks SET description = $3, char_limit = $4, read_only = $5
                         WHERE namespace = $1 AND label = $2",
                        &[&c.namespace, &c.label, &c.description, &limit, &c.read_only],
                    )?;
                }
            }
        }
        tx.commit()?;
        Ok(Ok(()))
    })?
}

/// Apply `request` in one transaction that locks the block's row, then decides, writes it and its
/// history.
pub(super) fn edit(conn: &Blocking, request: EditRequest) -> Result<Block, BlockError> {
    const DOING: &str = "editing a memory block";
    let place = conn.place().to_string();
    conn.run(DOING, move |client| {
        let mut tx = client.transaction()?;
        let Some(row) = tx.query_opt(
            &format!(
                "SELECT {COLUMNS} FROM memory_blocks WHERE namespace = $1 AND label = $2 FOR UPDATE"
            ),
            &[&request.namespace, &request.label],
        )?
        else {
            return Ok(Err(request.missing()));
        };
        let current = match RawBlock::read(&row)?.block(&place, DOING) {
            Ok(block) => block,
            Err(e) => return Ok(Err(e.into())),
        };
        let now = now_ms();
        let (block, entry) = match request.decide(current, now) {
            Ok(decided) => decided,
            Err(e) => return Ok(Err(e)),
        };
        tx.execute(
            "UPDATE memory_blocks SET value = $3, version = $4, updated_ms = $5
             WHERE namespace = $1 AND label = $2",
            &[
                &block.namespace,
                &block.label,
                &block.value,
                &(block.version as i64),
                &now,
            ],
        )?;
        insert_history(&mut tx, &entry)?;
        tx.commit()?;
        Ok(Ok(block))
    })?
}

/// Every stored block, by namespace and label.
pub(super) fn all(conn: &Blocking) -> Result<Vec<Block>, PgError> {
    const DOING: &str = "reading memory blocks";
    let rows = conn.run(DOING, |client| {
        client
            .query(
                &format!("SELECT {COLUMNS} FROM memory_blocks ORDER BY namespace, label"),
                &[],
            )?
            .iter()
            .map(RawBlock::read)
            .collect::<Result<Vec<_>, _>>()
    })?;
    rows.into_iter()
        .map(|raw| raw.block(conn.place(), DOING))
        .collect()
}

/// The history of `label` (in `namespace`, or any), oldest first.
pub(super) fn history(
    conn: &Blocking,
    label: String,
    namespace: Option<String>,
) -> Result<Vec<HistoryEntry>, PgError> {
    const DOING: &str = "reading a memory block's history";
    let rows = conn.run(DOING, move |client| {
        client
            .query(
                "SELECT namespace, label, version, operation, author, task_id, at_ms, old_value, new_value
                 FROM memory_block_history
                 WHERE label = $1 AND ($2::text IS NULL OR namespace = $2) ORDER BY id",
                &[&label, &namespace],
            )?
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<_, i64>(2)?,
                    HistoryEntry {
                        namespace: r.try_get(0)?,
                        label: r.try_get(1)?,
                        version: 0,
                        operation: r.try_get(3)?,
                        author: r.try_get(4)?,
                        task: r.try_get(5)?,
                        at_ms: r.try_get(6)?,
                        old_value: r.try_get(7)?,
                        new_value: r.try_get(8)?,
                    },
                ))
            })
            .collect::<Result<Vec<_>, opc_pg::postgres::Error>>()
    })?;
    rows.into_iter()
        .map(|(v, entry)| {
            Ok(HistoryEntry {
                version: version(v, conn.place(), DOING)?,
                ..entry
            })
        })
        .collect()
}

fn insert_history(
    tx: &mut Transaction<'_>,
    e: &HistoryEntry,
) -> Result<(), opc_pg::postgres::Error> {
    tx.execute(
        "INSERT INTO memory_block_history (namespace, label, version, operation, author, task_id, at_ms, old_value, new_value)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &e.namespace,
            &e.label,
            &(e.version as i64),
            &e.operation,
            &e.author,
            &e.task,
            &e.at_ms,
            &e.old_value,
            &e.new_value,
        ],
    )?;
    Ok(())
}
