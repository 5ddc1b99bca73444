//! Erasure in recall memory: the one rewrite an append-only table allows, and the derived indexes
//! brought in line with it.
//!
//! `opc privacy erase` rewrites every stored text that holds a value (`opc_agents::store::erase`
//! walks the tables). `recall_messages` refuses UPDATE (its triggers keep it append-only), so the
//! rewrite goes through this module, inside the caller's transaction:
//! - [`allow_rewrite`] lifts the guard (drops the triggers, keeping their SQL);
//! - the caller rewrites rows;
//! - [`finish_rewrite`] recomputes the rewritten rows' content hashes (so a recalled snippet still
//!   checks out), deletes their vectors (an embedding of the old text is a copy of it in another
//!   form), records the erasure in `recall_erasures` with the rows still to be re-indexed, and puts the
//!   triggers back. All of it commits or rolls back with the rewrite.
//!
//! After the commit, [`RecallStore::finish_erasures`] re-indexes those rows in the BM25 index,
//! re-embeds the ones that had vectors (when the model is loaded), merges the index into one segment
//! and deletes the old segment files, then clears the erasure's `pending` column. A crash before that
//! leaves `pending` set, and the next `opc privacy erase` finishes it first.
//!
//! The record (`recall_erasures`, memory's migration 3 in [`crate::schema::erasures`]): when, the
//! value's length in characters, and the counts per table. Never the value, nor a hash of it (a hash
//! of an e-mail address is found again by hashing guesses).

use opc_migrate::now_ms;
use rusqlite::{OptionalExtension, Transaction, params};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Message, RecallError, RecallStore, vectors};

/// The append-only guard, lifted for one transaction.
#[must_use = "pass it to finish_rewrite, or the guard is not restored in this transaction"]
pub struct Rewrite {
    /// The guard triggers' SQL, to create them again.
    triggers: Vec<String>,
}

/// Lift `recall_messages`' append-only triggers inside `tx` (they come back in [`finish_rewrite`], in
/// the same transaction: no other connection ever sees the table unguarded).
pub fn allow_rewrite(tx: &Transaction<'_>) -> rusqlite::Result<Rewrite> {
    let mut stmt = tx.prepare(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'recall_messages'",
    )?;
    let triggers: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (name, _) in &triggers {
        tx.execute_batch(&format!("DROP TRIGGER \"{}\"", name.replace('"', "\"\"")))?;
    }
    Ok(Rewrite {
        triggers: triggers.into_iter().map(|(_, sql)| sql).collect(),
    })
}

/// What one erasure did, as recorded.
#[derive(Debug, Clone)]
pub struct Record {
    /// The erased value's length in characters.
    pub value_chars: usize,
    /// Counts per table, as the caller reports them.
    pub counts: Value,
}

/// After the caller rewrote the recall rows `seqs` in `tx`: fix their hashes, drop their vectors,
/// record the erasure (pending re-indexing) and restore the guard. The erasure's id.
pub fn finish_rewrite(
    tx: &Transaction<'_>,
    rewrite: Rewrite,
    seqs: &[i64],
    record: &Record,
) -> rusqlite::Result<i64> {
    let mut embedded = Vec::new();
    {
        let mut text = tx.prepare("SELECT text FROM recall_messages WHERE seq = ?1")?;
        let mut hash = tx.prepare("UPDATE recall_messages SET content_hash = ?2 WHERE seq = ?1")?;
        let mut drop_vector = tx.prepare("DELETE FROM recall_vectors WHERE seq = ?1")?;
        for &seq in seqs {
            let Some(t): Option<String> = text.query_row([seq], |r| r.get(0)).optional()? else {
                continue;
            };
            hash.execute(params![seq, hex::encode(Sha256::digest(t.as_bytes()))])?;
            if drop_vector.execute([seq])? > 0 {
                embedded.push(seq);
            }
        }
    }
    let pending = json!({ "index": seqs, "embed": embedded });
    tx.execute(
        "INSERT INTO recall_erasures (at_ms, value_chars, counts, pending) VALUES (?1, ?2, ?3, ?4)",
        params![
            now_ms(),
            record.value_chars as i64,
            record.counts.to_string(),
            pending.to_string()
        ],
    )?;
    let id = tx.last_insert_rowid();
    for sql in rewrite.triggers {
        tx.execute_batch(&sql)?;
    }
    Ok(id)
}

/// What [`RecallStore::finish_erasures`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Finished {
    /// Erasures finished (normally the one just committed; more when an earlier one was interrupted).
    pub erasures: usize,
    /// Index documents replaced by their rewritten text.
    pub reindexed: usize,
    /// Vectors computed again from the rewritten text.
    pub reembedded: usize,
    /// Vectors deleted and not computed again (the embedding model is not loaded): those rows are
    /// found by keywords only.
    pub vectors_dropped: usize,
}

/// Seqs in a `pending` list.
fn seqs(v: &Value, key: &str) -> Vec<i64> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .collect()
}

impl RecallStore {
    /// Take the BM25 index's writer for an erasure, before anything is rewritten: when another
    /// process holds it, [`RecallError::IndexBusy`] and nothing has changed. The writer never merges
    /// on its own (the erasure merges everything itself, once).
    pub fn claim_index(&self) -> Result<(), RecallError> {
        let mut writer = self
            .inner
            .index_writer
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if writer.is_none() {
            let w = self.inner.bm25.writer()?;
            w.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
            *writer = Some(w);
        }
        Ok(())
    }

    /// Bring the indexes in line with every erasure still pending: re-index the rewritten rows the
    /// index already held, re-embed the ones that had vectors (when the model is loaded), merge the
    /// index into one segment and delete the files of the old ones, then mark the erasures done.
    /// Compacts the index even when nothing is pending (deleted documents of earlier updates may
    /// still hold old text). Call [`Self::claim_index`] first.
    pub fn finish_erasures(&self) -> Result<Finished, RecallError> {
        let pending: Vec<(i64, Value)> = self
            .pending_erasures()?
            .into_iter()
            .map(|(id, text)| (id, serde_json::from_str(&text).unwrap_or(Value::Null)))
            .collect();
        let mut index: Vec<i64> = pending.iter().flat_map(|(_, p)| seqs(p, "index")).collect();
        let mut embed: Vec<i64> = pending.iter().flat_map(|(_, p)| seqs(p, "embed")).collect();
        index.sort_unstable();
        index.dedup();
        embed.sort_unstable();
        embed.dedup();
        let mut done = Finished {
            erasures: pending.len(),
            ..Finished::default()
        };
        {
            let mut slot = self
                .inner
                .index_writer
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let Some(writer) = slot.as_mut() else {
                return Err(RecallError::Invalid(
                    "finish_erasures needs the index writer: call claim_index first".into(),
                ));
            };
            // Rows after the cursor are not in the index yet: they are indexed later, from the
            // rewritten text.
            let behind = self.indexed_already(&index)?;
            let messages = self.load(&behind)?;
            self.inner.bm25.replace(writer, &messages)?;
            done.reindexed = messages.len();
            self.inner.bm25.compact(writer)?;
            // Wait for the merge's threads and let go of the lock.
            if let Some(w) = slot.take() {
                w.wait_merging_threads()
                    .map_err(|e| RecallError::Index(e.to_string()))?;
            }
        }
        if !embed.is_empty() {
            // The active generation's embedder (a generation filling meanwhile finds these rows
            // without its vector and embeds them itself).
            match self.query_embedder() {
                Some(model) => {
                    let mut messages = self.load(&embed)?;
                    messages.sort_by_key(|m| m.seq);
                    let texts: Vec<String> = messages.iter().map(Message::indexed_text).collect();
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    let vecs = model.embed(&refs)?;
                    let rows: Vec<(i64, Vec<u8>)> = messages
                        .iter()
                        .zip(&vecs)
                        .map(|(m, v)| (m.seq, vectors::to_blob(v)))
                        .collect();
                    self.replace_vectors(model.model_id(), rows)?;
                    done.reembedded = messages.len();
                }
                None => done.vectors_dropped = embed.len(),
            }
        }
        if !pending.is_empty() {
            let ids: Vec<i64> = pending.iter().map(|(id, _)| *id).collect();
            self.clear_erasures(&ids)?;
        }
        Ok(done)
    }
}

/// Erasure on PostgreSQL (`framework.memory.storage: postgres`): the SQL the engine's PostgreSQL
/// erasure (`opc_agents::store::postgres::erase`) runs inside its one transaction for recall's
/// tables, kept here beside SQLite's because the rules are recall's.
///
/// What differs from SQLite, and why: nodes still running keep their own BM25 index and in-memory
/// vectors, fed by tailing `recall_messages` in commit order (`xid`, see `tail.rs`). So a rewritten
/// row's `xid` is moved to the erasing transaction ([`postgres::REWRITTEN`]): every node's tail
/// reads it again after the commit, its BM25 document is replaced by `seq` and its vector dropped
/// (the stored one is deleted here; a node embeds the new text and the others load that vector).
/// Nothing is left for the erasing command to re-index, so the record's `pending` is NULL.
pub mod postgres {
    /// Lift the append-only guard (its trigger) for the erasing transaction: `ALTER TABLE` is
    /// transactional in PostgreSQL, so other connections never see the table unguarded, and its lock
    /// holds recall's appenders back until the commit.
    pub const LIFT_GUARD: &str = "ALTER TABLE recall_messages DISABLE TRIGGER USER";

    /// Put the guard back, in the same transaction.
    pub const RESTORE_GUARD: &str = "ALTER TABLE recall_messages ENABLE TRIGGER USER";

    /// After the rows `$1` (seqs) were rewritten: their content hashes recomputed from the new text
    /// (SHA-256 of its UTF-8, lower-case hex, as `NewMessage::content_hash`), and their `xid` moved
    /// to this transaction so that every node's tail reads them again.
    pub const REWRITTEN: &str = "UPDATE recall_messages \
         SET content_hash = encode(sha256(convert_to(text, 'UTF8')), 'hex'), xid = pg_current_xact_id() \
         WHERE seq = ANY($1)";

    /// The rewritten rows' vectors (an embedding of the old text is a copy of it in another form).
    pub const DROP_VECTORS: &str = "DELETE FROM recall_vectors WHERE seq = ANY($1)";

    /// The record (`$1` at_ms, `$2` value_chars, `$3` counts as JSON text); returns its id. Nothing
    /// is pending: the nodes' tails re-index.
    pub const RECORD: &str = "INSERT INTO recall_erasures (at_ms, value_chars, counts, pending) \
         VALUES ($1, $2, $3, NULL) RETURNING id";
}
