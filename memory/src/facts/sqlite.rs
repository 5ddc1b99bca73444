//! The facts store on SQLite (the engine's file, memory's own connections, WAL): one writing
//! connection behind a mutex, read-only connections pooled for lookups.
//!
//! Invariants: every change is one `BEGIN IMMEDIATE` transaction (SQLite has one writer at a time,
//! so a batch's read-check-write needs no row lock); each also bumps `memory_facts_meta.generation`,
//! which is how another process holding vectors in memory learns that it must reload them
//! ([`FactStore`](super::FactStore) compares it before a vector search). The SQL of each operation
//! lives in [`super::apply`], [`super::entities`], [`super::query`], [`super::search`] and
//! [`super::graph`]; this file holds the connections and the transactions around them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params_from_iter};

use super::apply::{self, Changes};
use super::entities::{self, AliasError};
use super::graph::{Arg, Cell, Kind, Sql};
use super::search::{self, Best, CurrentVectors};
use super::{Applied, Embedded, FactError, FactVersion, Op, Provenance, View, query};

/// The SQLite side of a [`super::FactStore`].
pub(super) struct SqliteFacts {
    path: PathBuf,
    /// The one writing connection; None when opened read-only.
    writer: Option<Mutex<Connection>>,
    /// Read-only connections, checked out for one lookup each.
    readers: Mutex<Vec<Connection>>,
}

impl SqliteFacts {
    fn db_err(&self, source: rusqlite::Error) -> FactError {
        FactError::Db {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Open (migrating) read-write.
    pub(super) fn open(db_path: &Path) -> Result<Self, FactError> {
        let db = |source| FactError::Db {
            path: db_path.display().to_string(),
            source,
        };
        let mut conn = crate::schema::open(db_path).map_err(db)?;
        crate::schema::migrate(&mut conn)?;
        Ok(SqliteFacts {
            path: db_path.to_path_buf(),
            writer: Some(Mutex::new(conn)),
            readers: Mutex::new(Vec::new()),
        })
    }

    /// Open read-only (no migration; refuses a newer schema or one without the facts tables).
    pub(super) fn open_read_only(db_path: &Path) -> Result<Self, FactError> {
        let path = db_path.display().to_string();
        let db = |source| FactError::Db {
            path: path.clone(),
            source,
        };
        let conn = read_conn(db_path).map_err(db)?;
        let found: Option<i64> = conn
            .query_row(
                "SELECT version FROM schema_versions WHERE component = 'memory'",
                [],
                |r| r.get(0),
            )
            .optional()
            .or_else(|e| match e {
                // No `schema_versions` table: nothing was ever migrated in this file.
                rusqlite::Error::SqliteFailure(_, Some(ref m)) if m.contains("no such table") => {
                    Ok(None)
                }
                e => Err(e),
            })
            .map_err(db)?;
        let known = crate::schema::MIGRATIONS.len() as i64;
        let found = found.unwrap_or(0);
        if found > known {
            return Err(FactError::Schema(
                opc_migrate::MigrateError::TooNew {
                    component: "memory",
                    path,
                    found,
                    known,
                }
                .into(),
            ));
        }
        if found < 4 {
            return Err(FactError::Invalid(format!(
                "{path} has no facts tables yet (memory schema version {found}, facts need 4): \
                 start `opc run` or `opc chat` with this config once to create them"
            )));
        }
        // The reads name columns of every migration (graph memory's relation, …): an older
        // schema is upgraded by a writer first, never read half-understood.
        if found < known {
            return Err(FactError::Invalid(format!(
                "{path} has memory schema version {found}, this build reads {known}: start                  `opc run` or `opc chat` of this build with this config once to upgrade it"
            )));
        }
        Ok(SqliteFacts {
            path: db_path.to_path_buf(),
            writer: None,
            readers: Mutex::new(vec![conn]),
        })
    }

    /// Whether this store was opened read-only.
    pub(super) fn is_read_only(&self) -> bool {
        self.writer.is_none()
    }

    /// Where the facts are, for messages.
    pub(super) fn place(&self) -> String {
        self.path.display().to_string()
    }

    fn put_reader(&self, conn: Connection) {
        if let Ok(mut pool) = self.readers.lock() {
            pool.push(conn);
        }
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, FactError> {
        let pooled = self.readers.lock().ok().and_then(|mut p| p.pop());
        let conn = match pooled {
            Some(c) => c,
            None => read_conn(&self.path).map_err(|e| self.db_err(e))?,
        };
        let out = f(&conn).map_err(|e| self.db_err(e));
        self.put_reader(conn);
        out
    }

    fn writer(&self) -> Result<std::sync::MutexGuard<'_, Connection>, FactError> {
        let Some(w) = &self.writer else {
            return Err(super::read_only(&self.place()));
        };
        // A panic while holding the lock leaves SQLite consistent (the transaction rolled back).
        Ok(w.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Run the batch (with its vectors and the exchange's mark) in one immediate transaction;
    /// returns what it did and the generation it left.
    pub(super) fn apply(
        &self,
        namespace: &str,
        ops: &[Op],
        provenance: &Provenance,
        now_ms: i64,
        exchange_hash: Option<&str>,
        embedded: Option<&Embedded>,
    ) -> Result<(Applied, Changes, i64), FactError> {
        let mut conn = self.writer()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        let (applied, changes) = apply::run(&tx, namespace, ops, provenance, now_ms)?;
        let e = |err| self.db_err(err);
        if let Some(emb) = embedded {
            for o in &changes.opened {
                if let Some((q, scale)) = emb.by_text.get(o.text.as_str()) {
                    tx.execute(
                        "INSERT OR REPLACE INTO memory_fact_vectors (version_id, model, scale, vector)
                         VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![o.id, emb.model, f64::from(*scale), search::to_blob(q)],
                    )
                    .map_err(e)?;
                }
            }
        }
        if let Some(hash) = exchange_hash {
            tx.execute(
                "INSERT OR IGNORE INTO memory_facts_extracted (namespace, exchange_hash, at_ms) VALUES (?1, ?2, ?3)",
                rusqlite::params![namespace, hash, now_ms],
            )
            .map_err(e)?;
        }
        let generation: i64 = tx
            .query_row(
                "UPDATE memory_facts_meta SET generation = generation + 1 WHERE id = 1 RETURNING generation",
                [],
                |r| r.get(0),
            )
            .map_err(e)?;
        tx.commit().map_err(e)?;
        Ok((applied, changes, generation))
    }

    /// Up to `limit` current versions without a vector of `model`: (id, text).
    pub(super) fn unembedded(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, FactError> {
        self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT v.id, v.text FROM memory_fact_versions v
                 WHERE v.invalidated_at IS NULL AND NOT EXISTS (
                     SELECT 1 FROM memory_fact_vectors x WHERE x.version_id = v.id AND x.model = ?1)
                 LIMIT ?2",
            )?;
            let rows = stmt.query_map(
                rusqlite::params![model, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            rows.collect()
        })
    }

    /// Store vectors of `model` for existing versions, in one transaction that bumps the generation
    /// (other processes holding vectors in memory reload them).
    pub(super) fn store_vectors(
        &self,
        model: &str,
        rows: &[(i64, Vec<i8>, f32)],
    ) -> Result<(), FactError> {
        let mut conn = self.writer()?;
        let e = |err| self.db_err(err);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        for (id, q, scale) in rows {
            tx.execute(
                "INSERT OR REPLACE INTO memory_fact_vectors (version_id, model, scale, vector) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![id, model, f64::from(*scale), search::to_blob(q)],
            )
            .map_err(e)?;
        }
        tx.execute(
            "UPDATE memory_facts_meta SET generation = generation + 1 WHERE id = 1",
            [],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        Ok(())
    }

    /// `memory_facts_meta.generation`.
    pub(super) fn generation(&self) -> Result<i64, FactError> {
        self.read(|c| {
            c.query_row(
                "SELECT generation FROM memory_facts_meta WHERE id = 1",
                [],
                |r| r.get(0),
            )
        })
    }

    /// Every current version's vector of `model`, at `generation`.
    pub(super) fn load_vectors(
        &self,
        model: &str,
        generation: i64,
    ) -> Result<CurrentVectors, FactError> {
        self.read(|c| CurrentVectors::load(c, model, generation))
    }

    pub(super) fn list(&self, namespace: &str, view: View) -> Result<Vec<FactVersion>, FactError> {
        self.read(|c| query::list(c, namespace, view))
    }

    pub(super) fn history(&self, fact_id: i64) -> Result<Vec<FactVersion>, FactError> {
        self.read(|c| query::history(c, fact_id))
    }

    pub(super) fn by_ids(&self, ids: &[i64]) -> Result<Vec<FactVersion>, FactError> {
        self.read(|c| query::by_ids(c, ids))
    }

    /// Run one of [`super::graph`]'s queries (SQL shared with PostgreSQL), decoding each column
    /// as `kinds` says.
    pub(super) fn select(&self, sql: &Sql, kinds: &[Kind]) -> Result<Vec<Vec<Cell>>, FactError> {
        let params: Vec<SqlValue> = sql
            .args
            .iter()
            .map(|a| match a {
                Arg::Int(i) => SqlValue::Integer(*i),
                Arg::Text(s) => SqlValue::Text(s.clone()),
            })
            .collect();
        self.read(|c| {
            let mut stmt = c.prepare_cached(&sql.text)?;
            let rows = stmt.query_map(params_from_iter(params), |r| {
                kinds
                    .iter()
                    .enumerate()
                    .map(|(i, k)| match k {
                        Kind::Int => r.get(i).map(Cell::Int),
                        Kind::Text => r.get(i).map(Cell::Text),
                    })
                    .collect::<rusqlite::Result<Vec<Cell>>>()
            })?;
            rows.collect()
        })
    }

    pub(super) fn bm25(
        &self,
        text: &str,
        namespaces: &[String],
        view: View,
        pool: usize,
    ) -> Result<Vec<(i64, f32)>, FactError> {
        self.read(|c| search::bm25(c, text, namespaces, view, pool))
    }

    pub(super) fn score_past(
        &self,
        model: &str,
        query: &[f32],
        namespaces: &[String],
        t: i64,
        best: &mut Best,
    ) -> Result<(), FactError> {
        self.read(|c| search::score_past(c, model, query, namespaces, t, best))
    }

    pub(super) fn about(
        &self,
        namespaces: &[String],
        subject: &str,
        view: View,
    ) -> Result<Vec<FactVersion>, FactError> {
        self.read(|c| {
            let mut ids = Vec::new();
            for ns in namespaces {
                if let Some(id) = entities::find(c, ns, subject)? {
                    ids.push(id);
                }
            }
            query::by_entities(c, &ids, view)
        })
    }

    pub(super) fn alias(
        &self,
        namespace: &str,
        entity: &str,
        alias: &str,
        now_ms: i64,
    ) -> Result<Result<i64, AliasError>, FactError> {
        let conn = self.writer()?;
        entities::add_alias(&conn, namespace, entity, alias, now_ms).map_err(|e| self.db_err(e))
    }

    pub(super) fn extracted(
        &self,
        namespace: &str,
        exchange_hash: &str,
    ) -> Result<bool, FactError> {
        self.read(|c| {
            c.query_row(
                "SELECT 1 FROM memory_facts_extracted WHERE namespace = ?1 AND exchange_hash = ?2",
                [namespace, exchange_hash],
                |_| Ok(()),
            )
            .optional()
            .map(|r| r.is_some())
        })
    }

    pub(super) fn mark_extracted(
        &self,
        namespace: &str,
        exchange_hash: &str,
        now_ms: i64,
    ) -> Result<(), FactError> {
        let conn = self.writer()?;
        conn.execute(
            "INSERT OR IGNORE INTO memory_facts_extracted (namespace, exchange_hash, at_ms) VALUES (?1, ?2, ?3)",
            rusqlite::params![namespace, exchange_hash, now_ms],
        )
        .map_err(|e| self.db_err(e))?;
        Ok(())
    }
}

/// A read-only connection (WAL lets it read beside the writer, even in another process).
fn read_conn(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}
