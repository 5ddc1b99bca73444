//! The blocks' SQL on SQLite: memory's own connection to the engine's file.
//!
//! Invariants: every change (seeding a config, an edit with its history row) is one `BEGIN
//! IMMEDIATE` transaction, which takes the file's write lock before it reads, so what it checked
//! (a block's version, whether it is stored) cannot change before it writes. The rules (what
//! seeding does, whether an edit applies) are `mod.rs`'s; this file only reads and writes rows.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{Block, BlockError, Configured, EditRequest, HistoryEntry, Seeding, Stored, seeding};
use opc_migrate::now_ms;

const COLUMNS: &str = "namespace, label, description, value, char_limit, read_only, version";

fn row_block(row: &rusqlite::Row<'_>) -> rusqlite::Result<Block> {
    Ok(Block {
        namespace: row.get(0)?,
        label: row.get(1)?,
        description: row.get(2)?,
        value: row.get(3)?,
        limit: row.get(4)?,
        read_only: row.get(5)?,
        version: row.get::<_, i64>(6)? as u64,
    })
}

/// The block `namespace`/`label`, if stored.
pub(super) fn load(
    conn: &Connection,
    namespace: &str,
    label: &str,
) -> rusqlite::Result<Option<Block>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM memory_blocks WHERE namespace = ?1 AND label = ?2"),
        params![namespace, label],
        row_block,
    )
    .optional()
}

/// Seed `configured` (see [`seeding`]), in one immediate transaction.
pub(super) fn sync(conn: &mut Connection, configured: &[Configured]) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    for c in configured {
        let stored = tx
            .query_row(
                "SELECT value, config_value, version FROM memory_blocks WHERE namespace = ?1 AND label = ?2",
                params![c.namespace, c.label],
                |r| {
                    Ok(Stored {
                        value: r.get(0)?,
                        applied: r.get(1)?,
                        version: r.get::<_, i64>(2)? as u64,
                    })
                },
            )
            .optional()?;
        match seeding(c, stored, now) {
            Seeding::Insert(entry) => {
                tx.execute(
                    "INSERT INTO memory_blocks (namespace, label, description, value, char_limit, read_only, version, config_value, updated_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?4, ?7)",
                    params![c.namespace, c.label, c.description, c.value, c.limit, c.read_only, now],
                )?;
                insert_history(&tx, &entry)?;
            }
            Seeding::Admin(entry) => {
                tx.execute(
                    "UPDATE memory_blocks SET description = ?3, value = ?4, char_limit = ?5, read_only = ?6,
                     version = ?7, config_value = ?4, updated_ms = ?8 WHERE namespace = ?1 AND label = ?2",
                    params![
                        c.namespace,
                        c.label,
                        c.description,
                        c.value,
                        c.limit,
                        c.read_only,
                        entry.version as i64,
                        now
                    ],
                )?;
                insert_history(&tx, &entry)?;
            }
            Seeding::Describe => {
                tx.execute(
                    "UPDATE memory_blocks SET description = ?3, char_limit = ?4, read_only = ?5
                     WHERE namespace = ?1 AND label = ?2",
                    params![c.namespace, c.label, c.description, c.limit, c.read_only],
                )?;
            }
        }
    }
    tx.commit()
}

/// Apply `request` in one immediate transaction: read the block, decide, write it and its history.
pub(super) fn edit(conn: &mut Connection, request: &EditRequest) -> Result<Block, BlockError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let Some(current) = load(&tx, &request.namespace, &request.label)? else {
        return Err(request.missing());
    };
    let now = now_ms();
    let (block, entry) = request.decide(current, now)?;
    tx.execute(
        "UPDATE memory_blocks SET value = ?3, version = ?4, updated_ms = ?5 WHERE namespace = ?1 AND label = ?2",
        params![
            block.namespace,
            block.label,
            block.value,
            block.version as i64,
            now
        ],
    )?;
    insert_history(&tx, &entry)?;
    tx.commit()?;
    Ok(block)
}

/// Every stored block, by namespace and label.
pub(super) fn all(conn: &Connection) -> rusqlite::Result<Vec<Block>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM memory_blocks ORDER BY namespace, label"
    ))?;
    let rows = stmt.query_map([], row_block)?;
    rows.collect()
}

/// The history of `label` (in `namespace`, or any), oldest first.
pub(super) fn history(
    conn: &Connection,
    label: &str,
    namespace: Option<&str>,
) -> rusqlite::Result<Vec<HistoryEntry>> {
    let mut stmt = conn.prepare(
        "SELECT namespace, label, version, operation, author, task_id, at_ms, old_value, new_value
         FROM memory_block_history WHERE label = ?1 AND (?2 IS NULL OR namespace = ?2) ORDER BY id",
    )?;
    let rows = stmt.query_map(params![label, namespace], |r| {
        Ok(HistoryEntry {
            namespace: r.get(0)?,
            label: r.get(1)?,
            version: r.get::<_, i64>(2)? as u64,
            operation: r.get(3)?,
            author: r.get(4)?,
            task: r.get(5)?,
            at_ms: r.get(6)?,
            old_value: r.get(7)?,
            new_value: r.get(8)?,
        })
    })?;
    rows.collect()
}

fn insert_history(tx: &Connection, e: &HistoryEntry) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO memory_block_history (namespace, label, version, operation, author, task_id, at_ms, old_value, new_value)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            e.namespace,
            e.label,
            e.version as i64,
            e.operation,
            e.author,
            e.task,
            e.at_ms,
            e.old_value,
            e.new_value
        ],
    )?;
    Ok(())
}
