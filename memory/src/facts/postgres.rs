//! The facts store on PostgreSQL (`framework.memory.storage: postgres`): the tables of memory's
//! PostgreSQL migrations 2 and 3 ([`crate::schema::postgres`]; 3 adds graph memory's relation
//! columns), reached through one `opc_pg::Blocking` connection, possibly shared by several nodes.
//! The graph's queries are [`super::graph`]'s SQL, shared with SQLite; [`PgFacts::select`] runs them.
//!
//! Invariants (and why):
//! - a batch is ONE transaction, like SQLite's; but other nodes write at the same time, so every
//!   read-check-write locks what it checked: an UPDATE or INVALIDATE locks its target version row
//!   (`SELECT … FOR UPDATE`) before judging it current, so two nodes closing the same current version
//!   serialise and the second finds it closed (`Stale`); the `memory_fact_versions_one_current`
//!   unique index stands behind it. An ADD takes a transaction-scoped advisory lock on (namespace,
//!   content hash) before its duplicate check, so the same statement added by two nodes at once is
//!   stored once. Entities and aliases are inserted `ON CONFLICT DO NOTHING` and read back, so two
//!   nodes naming a new subject at once end with one entity. A batch that meets a deadlock or a
//!   uniqueness conflict is retried whole (a few times): the retry sees the winner's commit and
//!   answers as SQLite's single writer would (`Stale`, a duplicate, the existing entity);
//! - keyword search is PostgreSQL's full-text search over the generated `tsv` column (text weight
//!   A, subject B), asked for the same words as FTS5 ([`search::query_words`]), OR-ed: each word
//!   goes through `plainto_tsquery` as a bound parameter (never spliced into query syntax), and the
//!   matches are ranked BM25-like in SQL (see [`PgFacts::bm25`]);
//! - the in-memory vectors of current versions (shared code: [`CurrentVectors`]) follow the table
//!   in commit order, not by a generation counter: every write to a version row sets its `xid`
//!   column to the writing transaction (insert, closing, embedding), and [`PgFacts::follow`] reads
//!   the rows whose `xid` is at or past its horizon (`pg_snapshot_xmin` of its last snapshot: every
//!   transaction below it has ended), applying each row's current state. A row read again is
//!   applied again (idempotent), so nothing committed is missed and nothing needs the global row
//!   lock that SQLite's `memory_facts_meta.generation` bump would be here (PostgreSQL leaves that
//!   row alone).

use std::sync::{Mutex, PoisonError, RwLock};

use opc_pg::Blocking;
use opc_pg::postgres::error::SqlState;
use opc_pg::postgres::types::ToSql;
use opc_pg::postgres::{self, Client, GenericClient, IsolationLevel, Row, Transaction};

use super::apply::{Changes, NewVersion, Opened, Target, TargetRow, target_state, updated_fields};
use super::entities::{AliasError, normalise};
use super::graph::{Arg, Cell, Kind, Sql};
use super::prompt::content_hash;
use super::query::COLUMNS;
use super::search::{self, Best, CurrentVectors, PAST_VECTORS, dot_i8, from_blob, to_blob};
use super::{Applied, Embedded, FactError, FactVersion, Op, Provenance, Source, View};
use crate::recall::vectors::quantise;

/// The memory schema version (of [`crate::schema::postgres::COMPONENT`]) that created the facts tables.
const FACTS_SINCE: i64 = 2;
/// How many times a batch that met a deadlock or a uniqueness conflict runs in all.
const ATTEMPTS: usize = 4;
/// The first key of the advisory locks on (namespace, content hash) (`fact` in ASCII); the
/// two-key lock space never meets the one-key space the migrations' lock uses.
const DUPLICATE_LOCK: i32 = 0x6661_6374;

/// A bound parameter, owned (the connection's closures are `'static`).
type Param = Box<dyn ToSql + Sync + Send>;

fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// The PostgreSQL side of a [`super::FactStore`].
pub(super) struct PgFacts {
    conn: Blocking,
    read_only: bool,
    /// The vectors' horizon (an `xid8` as text): every version row last written by a transaction
    /// below it is reflected in the in-memory vectors; None until they are loaded. Held while
    /// following, so follows apply their snapshots in order.
    horizon: Mutex<Option<String>>,
}

impl PgFacts {
    /// Open read-write, migrating memory's PostgreSQL tables first.
    pub(super) fn open(conn: Blocking) -> Result<Self, FactError> {
        conn.migrate(&crate::schema::postgres::COMPONENT)?;
        Ok(PgFacts {
            conn,
            read_only: false,
            horizon: Mutex::new(None),
        })
    }

    /// Open read-only: no migration; refuses a newer schema, or one without the facts tables.
    pub(super) fn open_read_only(conn: Blocking) -> Result<Self, FactError> {
        let found: Option<i64> = conn.run("reading memory's schema version", |c| {
            let exists: bool = c
                .query_one("SELECT to_regclass('schema_versions') IS NOT NULL", &[])?
                .try_get(0)?;
            if !exists {
                return Ok(None);
            }
            c.query_opt(
                "SELECT version FROM schema_versions WHERE component = 'memory'",
                &[],
            )?
            .map(|r| r.try_get::<_, i64>(0))
            .transpose()
        })?;
        let found = found.unwrap_or(0);
        let known = crate::schema::postgres::COMPONENT.version();
        let place = conn.place().to_string();
        if found > known {
            return Err(opc_pg::PgMigrateError::TooNew {
                component: "memory",
                place,
                found,
                known,
            }
            .into());
        }
        if found < FACTS_SINCE {
            return Err(FactError::Invalid(format!(
                "the PostgreSQL database {place} has no facts tables yet (memory schema version \
                 {found}, facts need {FACTS_SINCE}): start `opc run` or `opc chat` with this config \
                 once to create them"
            )));
        }
        // The reads name columns of every migration (graph memory's relation, …), as on SQLite.
        if found < known {
            return Err(FactError::Invalid(format!(
                "the PostgreSQL database {place} has memory schema version {found}, this build                  reads {known}: start `opc run` or `opc chat` of this build with this config once                  to upgrade it"
            )));
        }
        Ok(PgFacts {
            conn,
            read_only: true,
            horizon: Mutex::new(None),
        })
    }

    pub(super) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The database, as `host:port/name`.
    pub(super) fn place(&self) -> String {
        format!("PostgreSQL {}", self.conn.place())
    }

    fn writable(&self) -> Result<(), FactError> {
        if self.read_only {
            return Err(super::read_only(&self.place()));
        }
        Ok(())
    }

    /// Run the batch (with its vectors and the exchange's mark) in one transaction, retried whole
    /// on a deadlock or a uniqueness conflict. Locks: each UPDATE/INVALIDATE target's version row,
    /// each ADD's (namespace, content hash) advisory lock, the entity and alias rows it inserts.
    pub(super) fn apply(
        &self,
        namespace: &str,
        ops: &[Op],
        provenance: &Provenance,
        now_ms: i64,
        exchange_hash: Option<&str>,
        embedded: Option<&Embedded>,
    ) -> Result<(Applied, Changes), FactError> {
        self.writable()?;
        let batch = Batch {
            namespace: namespace.to_string(),
            ops: ops.to_vec(),
            provenance: provenance.clone(),
            now_ms,
            exchange_hash: exchange_hash.map(str::to_string),
            vectors: embedded.cloned(),
        };
        self.conn.run("applying a batch of facts", move |c| {
            retrying(c, |c| batch.run(c))
        })?
    }

    /// Up to `limit` current versions without a vector of `model`: (id, text).
    pub(super) fn unembedded(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, FactError> {
        let model = model.to_string();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self.conn.run("finding facts to embed", move |c| {
            c.query(
                "SELECT v.id, v.text FROM memory_fact_versions v
                 WHERE v.invalidated_at IS NULL AND NOT EXISTS (
                     SELECT 1 FROM memory_fact_vectors x WHERE x.version_id = v.id AND x.model = $1)
                 LIMIT $2",
                &[&model, &limit],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
        })?)
    }

    /// Store vectors of `model` for existing versions in one transaction, and move those versions'
    /// `xid` to it so that every node's vectors pick them up. Locks the version rows (in id order,
    /// so two nodes embedding the same versions never deadlock with each other).
    ///
    /// Each row comes with the text it was computed from: a version whose text changed since (an
    /// `opc privacy erase` committed meanwhile) gets no vector, so no node adopts a vector of the
    /// erased text; it is embedded again from its new text.
    pub(super) fn store_vectors(
        &self,
        model: &str,
        rows: &[(i64, String, Vec<i8>, f32)],
    ) -> Result<(), FactError> {
        self.writable()?;
        let model = model.to_string();
        let rows = rows.to_vec();
        Ok(self.conn.run("storing fact vectors", move |c| {
            retrying(c, |c| {
                let mut tx = c.transaction()?;
                let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
                let now: std::collections::HashMap<i64, String> = tx
                    .query(
                        "SELECT id, text FROM memory_fact_versions WHERE id = ANY($1) \
                         ORDER BY id FOR UPDATE",
                        &[&ids],
                    )?
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect::<Result<_, postgres::Error>>()?;
                let ids: Vec<i64> = rows
                    .iter()
                    .filter(|(id, text, ..)| now.get(id) == Some(text))
                    .map(|r| r.0)
                    .collect();
                for (id, _, q, scale) in rows.iter().filter(|r| ids.contains(&r.0)) {
                    upsert_vector(&mut tx, *id, &model, q, *scale)?;
                }
                tx.execute(
                    "UPDATE memory_fact_versions SET xid = pg_current_xact_id() WHERE id = ANY($1)",
                    &[&ids],
                )?;
                tx.commit()
            })
        })?)
    }

    /// Forget the vectors' horizon: the next [`Self::follow`] loads from the start (the embedding
    /// generation switched: the vectors of another model are followed).
    pub(super) fn reset_follow(&self) {
        *self.horizon.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Bring `vectors` up to date with the table, in commit order (see the module doc): the first
    /// call loads every current version's vector of `model`; later ones apply the rows written
    /// since the horizon.
    pub(super) fn follow(
        &self,
        vectors: &RwLock<CurrentVectors>,
        model: &str,
    ) -> Result<(), FactError> {
        let mut horizon = self.horizon.lock().unwrap_or_else(PoisonError::into_inner);
        let since = horizon.clone();
        let model = model.to_string();
        let from_start = since.is_none();
        let (next, rows) = self.conn.run("following fact vectors", move |c| {
            let mut tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let next: String = tx
                .query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[])?
                .try_get(0)?;
            let rows = match &since {
                None => tx.query(
                    "SELECT v.id, v.namespace, v.recorded_at, TRUE, x.scale, x.vector
                     FROM memory_fact_versions v
                     JOIN memory_fact_vectors x ON x.version_id = v.id AND x.model = $1
                     WHERE v.invalidated_at IS NULL",
                    &[&model],
                )?,
                Some(since) => tx.query(
                    "SELECT v.id, v.namespace, v.recorded_at, v.invalidated_at IS NULL, x.scale, x.vector
                     FROM memory_fact_versions v
                     LEFT JOIN memory_fact_vectors x ON x.version_id = v.id AND x.model = $1
                     WHERE v.xid >= $2::text::xid8",
                    &[&model, since],
                )?,
            };
            tx.commit()?;
            let rows = rows
                .iter()
                .map(|r| {
                    let vector: Option<Vec<u8>> = r.try_get(5)?;
                    let scale: Option<f64> = r.try_get(4)?;
                    Ok(VectorRow {
                        id: r.try_get(0)?,
                        namespace: r.try_get(1)?,
                        recorded_at: r.try_get(2)?,
                        current: r.try_get(3)?,
                        vector: vector
                            .as_deref()
                            .and_then(from_blob)
                            .zip(scale.map(|s| s as f32)),
                    })
                })
                .collect::<Result<Vec<_>, postgres::Error>>()?;
            Ok((next, rows))
        })?;
        let mut cv = vectors.write().unwrap_or_else(PoisonError::into_inner);
        if from_start {
            *cv = CurrentVectors::default();
        }
        for row in rows {
            match (row.current, row.vector) {
                (true, Some((q, scale))) => {
                    cv.insert(row.id, &row.namespace, row.recorded_at, &q, scale);
                }
                _ => cv.remove(row.id),
            }
        }
        drop(cv);
        *horizon = Some(next);
        Ok(())
    }

    pub(super) fn list(&self, namespace: &str, view: View) -> Result<Vec<FactVersion>, FactError> {
        let ns: Param = Box::new(namespace.to_string());
        let (sql, params): (String, Vec<Param>) = match view {
            View::Current => (
                format!(
                    "SELECT {COLUMNS} FROM memory_fact_versions v
                     WHERE v.namespace = $1 AND v.invalidated_at IS NULL
                     ORDER BY v.recorded_at DESC, v.id DESC"
                ),
                vec![ns],
            ),
            View::BelievedAt(t) => (
                format!(
                    "SELECT * FROM (
                       SELECT {COLUMNS} FROM memory_fact_versions v
                       WHERE v.namespace = $1 AND v.invalidated_at IS NULL AND v.recorded_at <= $2
                       UNION ALL
                       SELECT {COLUMNS} FROM memory_fact_versions v
                       WHERE v.namespace = $1 AND v.invalidated_at IS NOT NULL
                         AND v.invalidated_at > $2 AND v.recorded_at <= $2) AS believed
                     ORDER BY recorded_at DESC, id DESC"
                ),
                vec![ns, Box::new(t)],
            ),
            View::ValidAt(t) => (
                format!(
                    "SELECT {COLUMNS} FROM memory_fact_versions v
                     WHERE v.namespace = $1 AND v.invalidated_at IS NULL
                       AND (v.valid_from IS NULL OR v.valid_from <= $2)
                       AND (v.valid_to IS NULL OR v.valid_to > $2)
                     ORDER BY v.recorded_at DESC, v.id DESC"
                ),
                vec![ns, Box::new(t)],
            ),
            View::History => (
                format!(
                    "SELECT {COLUMNS} FROM memory_fact_versions v
                     WHERE v.namespace = $1
                     ORDER BY v.fact_id DESC, v.id ASC"
                ),
                vec![ns],
            ),
        };
        self.versions("listing facts", sql, params)
    }

    pub(super) fn history(&self, fact_id: i64) -> Result<Vec<FactVersion>, FactError> {
        self.versions(
            "reading a fact's history",
            format!(
                "SELECT {COLUMNS} FROM memory_fact_versions v WHERE v.fact_id = $1 ORDER BY v.id"
            ),
            vec![Box::new(fact_id)],
        )
    }

    pub(super) fn by_ids(&self, ids: &[i64]) -> Result<Vec<FactVersion>, FactError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.versions(
            "reading facts",
            format!("SELECT {COLUMNS} FROM memory_fact_versions v WHERE v.id = ANY($1)"),
            vec![Box::new(ids.to_vec())],
        )
    }

    /// Run one of [`super::graph`]'s queries (SQL shared with SQLite), decoding each column as
    /// `kinds` says.
    pub(super) fn select(
        &self,
        doing: &'static str,
        sql: Sql,
        kinds: &'static [Kind],
    ) -> Result<Vec<Vec<Cell>>, FactError> {
        let params: Vec<Param> = sql
            .args
            .into_iter()
            .map(|a| -> Param {
                match a {
                    Arg::Int(i) => Box::new(i),
                    Arg::Text(s) => Box::new(s),
                }
            })
            .collect();
        let text = sql.text;
        Ok(self.conn.run(doing, move |c| {
            c.query(&text, &refs(&params))?
                .iter()
                .map(|r| {
                    kinds
                        .iter()
                        .enumerate()
                        .map(|(i, k)| match k {
                            Kind::Int => r.try_get(i).map(Cell::Int),
                            Kind::Text => r.try_get(i).map(Cell::Text),
                        })
                        .collect::<Result<Vec<Cell>, postgres::Error>>()
                })
                .collect()
        })?)
    }

    fn versions(
        &self,
        doing: &'static str,
        sql: String,
        params: Vec<Param>,
    ) -> Result<Vec<FactVersion>, FactError> {
        Ok(self.conn.run(doing, move |c| {
            c.query(&sql, &refs(&params))?.iter().map(version).collect()
        })?)
    }

    /// The keyword list: (version id, score; higher is better), best first, at most `pool`.
    ///
    /// The rows of `namespaces` in `view` whose `tsv` matches any of the words are scored as BM25
    /// scores them with every term counted once (facts are one sentence: a word rarely repeats):
    /// per word, `idf · w·(k1+1) / (w + k1·(1 − b + b·dl/avgdl))`, where `w` is 1 for a match in
    /// the text plus ½ for one in the subject (FTS5's column weights here), `dl` the row's count of
    /// distinct words, `avgdl` their mean over the matching rows, and `idf` from the word's count of
    /// matching rows against the rows of the view (`k1` = 1.2, `b` = 0.75, as FTS5).
    pub(super) fn bm25(
        &self,
        text: &str,
        namespaces: &[String],
        view: View,
        pool: usize,
    ) -> Result<Vec<(i64, f32)>, FactError> {
        let words = search::query_words(text);
        if words.is_empty() || namespaces.is_empty() {
            return Ok(Vec::new());
        }
        let mut params: Vec<Param> = vec![
            Box::new(namespaces.to_vec()),
            Box::new(i64::try_from(pool).unwrap_or(i64::MAX)),
        ];
        let filter = view_filter(view, &mut params);
        let first = params.len() + 1;
        let queries: Vec<String> = (0..words.len())
            .map(|k| format!("plainto_tsquery('english', ${})", first + k))
            .collect();
        for w in words {
            params.push(Box::new(w));
        }
        let any = queries.join(" || ");
        let weights: String = queries
            .iter()
            .enumerate()
            .map(|(k, q)| {
                format!(
                    ", ((ts_filter(v.tsv, '{{a}}') @@ {q})::int::float8
                       + 0.5 * (ts_filter(v.tsv, '{{b}}') @@ {q})::int::float8) AS w{k}"
                )
            })
            .collect();
        let counts: String = (0..queries.len())
            .map(|k| format!(", count(*) FILTER (WHERE w{k} > 0) OVER () AS df{k}"))
            .collect();
        let score = (0..queries.len())
            .map(|k| {
                format!(
                    "CASE WHEN s.w{k} > 0 THEN ln(1 + (n.n - s.df{k} + 0.5) / (s.df{k} + 0.5))
                       * s.w{k} * 2.2 / (s.w{k} + 1.2 * (0.25 + 0.75 * s.dl / greatest(s.avgdl, 1)))
                     ELSE 0 END"
                )
            })
            .collect::<Vec<_>>()
            .join(" + ");
        let sql = format!(
            "WITH m AS (
               SELECT v.id, length(v.tsv)::float8 AS dl{weights}
               FROM memory_fact_versions v
               WHERE v.namespace = ANY($1) AND {filter} AND v.tsv @@ ({any})
             ), s AS (
               SELECT m.*, avg(m.dl) OVER () AS avgdl{counts} FROM m
             ), n AS (
               SELECT count(*)::float8 AS n FROM memory_fact_versions v
               WHERE v.namespace = ANY($1) AND {filter}
             )
             SELECT s.id, ({score})::float8 AS score FROM s, n
             ORDER BY score DESC, s.id DESC LIMIT $2"
        );
        Ok(self.conn.run("searching facts by keyword", move |c| {
            c.query(&sql, &refs(&params))?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get::<_, f64>(1)? as f32)))
                .collect()
        })?)
    }

    /// Vectors of versions of `namespaces` closed after `t` but recorded by it (believed at t),
    /// scored against `query` into `best` (at most [`PAST_VECTORS`] rows read in all, each
    /// namespace's soonest-closed first), as SQLite's `search::score_past`.
    pub(super) fn score_past(
        &self,
        model: &str,
        query: &[f32],
        namespaces: &[String],
        t: i64,
        best: &mut Best,
    ) -> Result<(), FactError> {
        let model = model.to_string();
        let namespaces = namespaces.to_vec();
        let rows: Vec<(i64, f64, Vec<u8>)> = self.conn.run("reading past fact vectors", move |c| {
            let mut out = Vec::new();
            for ns in &namespaces {
                let budget = PAST_VECTORS.saturating_sub(out.len());
                if budget == 0 {
                    break;
                }
                for r in c.query(
                    "SELECT v.id, x.scale, x.vector FROM memory_fact_versions v
                       JOIN memory_fact_vectors x ON x.version_id = v.id
                     WHERE v.namespace = $1 AND v.invalidated_at IS NOT NULL AND v.invalidated_at > $2
                       AND v.recorded_at <= $2 AND x.model = $3
                     ORDER BY v.invalidated_at LIMIT $4",
                    &[ns, &t, &model, &i64::try_from(budget).unwrap_or(i64::MAX)],
                )? {
                    out.push((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?));
                }
            }
            Ok(out)
        })?;
        let (q, qscale) = quantise(query);
        for (id, scale, blob) in rows {
            if let Some(row) = from_blob(&blob) {
                best.offer(dot_i8(&q, &row) as f32 * scale as f32 * qscale, id);
            }
        }
        Ok(())
    }

    pub(super) fn about(
        &self,
        namespaces: &[String],
        subject: &str,
        view: View,
    ) -> Result<Vec<FactVersion>, FactError> {
        let namespaces = namespaces.to_vec();
        let norm = normalise(subject);
        Ok(self.conn.run("reading facts about a subject", move |c| {
            let mut ids = Vec::new();
            for ns in &namespaces {
                if let Some(id) = find(c, ns, &norm)? {
                    ids.push(id);
                }
            }
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let mut params: Vec<Param> = vec![Box::new(ids)];
            let filter = view_filter(view, &mut params);
            let order = if view == View::History {
                "v.fact_id DESC, v.id ASC"
            } else {
                "v.recorded_at DESC, v.id DESC"
            };
            c.query(
                &format!(
                    "SELECT {COLUMNS} FROM memory_fact_versions v
                     WHERE v.entity_id = ANY($1) AND {filter} ORDER BY {order}"
                ),
                &refs(&params),
            )?
            .iter()
            .map(version)
            .collect()
        })?)
    }

    /// Make `alias` name `entity`'s entity. Locks: the alias row it inserts (`ON CONFLICT DO
    /// NOTHING`, then read back: of two nodes giving one name to two entities, the second is told
    /// it is taken).
    pub(super) fn alias(
        &self,
        namespace: &str,
        entity: &str,
        alias: &str,
        now_ms: i64,
    ) -> Result<Result<i64, AliasError>, FactError> {
        self.writable()?;
        let namespace = namespace.to_string();
        let entity = normalise(entity);
        let norm = normalise(alias);
        let alias = alias.trim().to_string();
        Ok(self.conn.run("adding an alias", move |c| {
            let mut tx = c.transaction()?;
            let Some(id) = find(&mut tx, &namespace, &entity)? else {
                return Ok(Err(AliasError::UnknownEntity));
            };
            if norm.is_empty() {
                return Ok(Err(AliasError::Empty));
            }
            tx.execute(
                "INSERT INTO memory_entity_aliases (namespace, norm, alias, entity_id, created_ms)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, norm) DO NOTHING",
                &[&namespace, &norm, &alias, &id, &now_ms],
            )?;
            let owner = find(&mut tx, &namespace, &norm)?;
            tx.commit()?;
            Ok(match owner {
                Some(other) if other != id => Err(AliasError::Taken(other)),
                _ => Ok(id),
            })
        })?)
    }

    pub(super) fn extracted(
        &self,
        namespace: &str,
        exchange_hash: &str,
    ) -> Result<bool, FactError> {
        let (namespace, hash) = (namespace.to_string(), exchange_hash.to_string());
        Ok(self.conn.run("reading extracted exchanges", move |c| {
            Ok(c.query_opt(
                "SELECT 1 FROM memory_facts_extracted WHERE namespace = $1 AND exchange_hash = $2",
                &[&namespace, &hash],
            )?
            .is_some())
        })?)
    }

    pub(super) fn mark_extracted(
        &self,
        namespace: &str,
        exchange_hash: &str,
        now_ms: i64,
    ) -> Result<(), FactError> {
        self.writable()?;
        let (namespace, hash) = (namespace.to_string(), exchange_hash.to_string());
        Ok(self.conn.run("marking an exchange extracted", move |c| {
            mark(c, &namespace, &hash, now_ms)
        })?)
    }
}

/// A version row as the vectors' follower reads it.
struct VectorRow {
    id: i64,
    namespace: String,
    recorded_at: i64,
    current: bool,
    vector: Option<(Vec<i8>, f32)>,
}

/// Run `f` (one transaction) again while it fails with a deadlock, a serialization failure or a
/// uniqueness conflict (another node's concurrent commit), [`ATTEMPTS`] times in all.
fn retrying<T>(
    c: &mut Client,
    mut f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
) -> Result<T, postgres::Error> {
    let mut attempt = 1;
    loop {
        match f(c) {
            Err(e)
                if attempt < ATTEMPTS
                    && e.code().is_some_and(|code| {
                        *code == SqlState::T_R_DEADLOCK_DETECTED
                            || *code == SqlState::T_R_SERIALIZATION_FAILURE
                            || *code == SqlState::UNIQUE_VIOLATION
                    }) =>
            {
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// A batch, owned (it crosses to the connection's thread).
struct Batch {
    namespace: String,
    ops: Vec<Op>,
    provenance: Provenance,
    now_ms: i64,
    exchange_hash: Option<String>,
    /// The loaded model's id and each trimmed text's vector.
    vectors: Option<Embedded>,
}

impl Batch {
    /// One attempt: the outer error is PostgreSQL's (retried or reported), the inner one the
    /// batch's own (a stale or foreign target: the transaction is dropped, so nothing is written).
    #[allow(clippy::type_complexity)]
    fn run(
        &self,
        c: &mut Client,
    ) -> Result<Result<(Applied, Changes), FactError>, postgres::Error> {
        let ns = self.namespace.as_str();
        let (p, now_ms) = (&self.provenance, self.now_ms);
        let mut tx = c.transaction()?;
        let mut applied = Applied::default();
        let mut changes = Changes::default();
        for (i, op) in self.ops.iter().enumerate() {
            match op {
                Op::Noop => applied.noops += 1,
                Op::Add {
                    text,
                    subject,
                    predicate,
                    object,
                    valid_from,
                    valid_to,
                } => {
                    let text = text.trim();
                    let hash = content_hash(text);
                    // The same statement added by two nodes at once: the second waits for the
                    // first's commit here, then finds its version a duplicate.
                    tx.execute(
                        "SELECT pg_advisory_xact_lock($1, $2)",
                        &[&DUPLICATE_LOCK, &lock_key(ns, &hash)],
                    )?;
                    let dup = tx.query_opt(
                        "SELECT id FROM memory_fact_versions
                         WHERE namespace = $1 AND content_hash = $2 AND invalidated_at IS NULL LIMIT 1",
                        &[&ns, &hash],
                    )?;
                    if dup.is_some() {
                        applied.duplicates += 1;
                        continue;
                    }
                    let fact_id: i64 = tx
                        .query_one(
                            "INSERT INTO memory_facts (namespace, created_ms) VALUES ($1, $2) RETURNING id",
                            &[&ns, &now_ms],
                        )?
                        .try_get(0)?;
                    let v = NewVersion {
                        fact_id,
                        text,
                        subject: subject.as_deref().map(str::trim),
                        predicate: predicate.as_deref().map(str::trim),
                        object: object.as_deref().map(str::trim),
                        valid_from: *valid_from,
                        valid_to: *valid_to,
                        reason: None,
                    };
                    let id = open_version(&mut tx, ns, &v, p, now_ms)?;
                    applied.added.push(id);
                    changes.opened.push(opened(id, ns, now_ms, text));
                }
                Op::Update {
                    target,
                    text,
                    subject,
                    predicate,
                    object,
                    valid_from,
                    valid_to,
                    reason,
                } => {
                    let old = match current_target(&mut tx, ns, i, *target)? {
                        Ok(found) => found,
                        Err(e) => return Ok(Err(e)),
                    };
                    // An UPDATE that names no subject keeps the fact's (and its relation).
                    let (subject, predicate, object) = match updated_fields(
                        i,
                        &old,
                        subject.as_deref().map(str::trim),
                        predicate.as_deref().map(str::trim),
                        object.as_deref().map(str::trim),
                    ) {
                        Ok(fields) => fields,
                        Err(e) => return Ok(Err(e)),
                    };
                    close(&mut tx, *target, *valid_from, reason.as_deref(), p, now_ms)?;
                    let text = text.trim();
                    let v = NewVersion {
                        fact_id: old.fact_id,
                        text,
                        subject,
                        predicate,
                        object,
                        valid_from: *valid_from,
                        valid_to: *valid_to,
                        reason: reason.as_deref(),
                    };
                    let id = open_version(&mut tx, ns, &v, p, now_ms)?;
                    applied.updated.push((*target, id));
                    changes.closed.push(*target);
                    changes.opened.push(opened(id, ns, now_ms, text));
                }
                Op::Invalidate {
                    target,
                    reason,
                    valid_to,
                } => {
                    if let Err(e) = current_target(&mut tx, ns, i, *target)? {
                        return Ok(Err(e));
                    }
                    close(&mut tx, *target, *valid_to, reason.as_deref(), p, now_ms)?;
                    record_closing(&mut tx, ns, *target, p, now_ms)?;
                    applied.invalidated.push(*target);
                    changes.closed.push(*target);
                }
            }
        }
        if let Some(emb) = &self.vectors {
            for o in &changes.opened {
                if let Some((q, scale)) = emb.by_text.get(&o.text) {
                    upsert_vector(&mut tx, o.id, &emb.model, q, *scale)?;
                }
            }
        }
        if let Some(hash) = &self.exchange_hash {
            mark(&mut tx, ns, hash, now_ms)?;
        }
        tx.commit()?;
        Ok(Ok((applied, changes)))
    }
}

fn opened(id: i64, namespace: &str, recorded_at: i64, text: &str) -> Opened {
    Opened {
        id,
        namespace: namespace.to_string(),
        recorded_at,
        text: text.to_string(),
    }
}

/// The advisory lock's second key for (namespace, content hash): FNV-1a, folded to 32 bits (a
/// collision only makes two different statements wait for each other).
fn lock_key(namespace: &str, hash: &str) -> i32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in namespace.bytes().chain([0]).chain(hash.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    i32::from_le_bytes(((h ^ (h >> 32)) as u32).to_le_bytes())
}

/// The target's fact id, subject and relation, after locking its row (`FOR UPDATE`: a node closing the same
/// version at the same time waits for this transaction, then sees the version closed).
fn current_target(
    tx: &mut Transaction<'_>,
    namespace: &str,
    i: usize,
    target: i64,
) -> Result<Result<Target, FactError>, postgres::Error> {
    let row: Option<TargetRow> = tx
        .query_opt(
            "SELECT fact_id, namespace, invalidated_at, subject, predicate, object
             FROM memory_fact_versions WHERE id = $1 FOR UPDATE",
            &[&target],
        )?
        .map(|r| -> Result<TargetRow, postgres::Error> {
            Ok(TargetRow {
                fact_id: r.try_get(0)?,
                namespace: r.try_get(1)?,
                invalidated_at: r.try_get(2)?,
                subject: r.try_get(3)?,
                predicate: r.try_get(4)?,
                object: r.try_get(5)?,
            })
        })
        .transpose()?;
    Ok(target_state(namespace, i, target, row))
}

/// Close `target` (current, checked and locked) with the batch's provenance; its `xid` moves to
/// this transaction (the vectors' followers drop it).
fn close(
    tx: &mut Transaction<'_>,
    target: i64,
    valid_to: Option<i64>,
    reason: Option<&str>,
    p: &Provenance,
    now_ms: i64,
) -> Result<u64, postgres::Error> {
    tx.execute(
        "UPDATE memory_fact_versions SET invalidated_at = $2, valid_to = COALESCE($3, valid_to),
             reason = COALESCE($4, reason), closed_source = $5, closed_agent = $6, closed_task = $7,
             closed_conversation = $8, closed_model = $9, closed_ledger_id = $10,
             xid = pg_current_xact_id()
         WHERE id = $1 AND invalidated_at IS NULL",
        &[
            &target,
            &now_ms,
            &valid_to,
            &reason,
            &p.source.as_str(),
            &p.agent,
            &p.task,
            &p.conversation,
            &p.model,
            &p.ledger_id,
        ],
    )
}

/// Record an INVALIDATE as a version of its own, never current (as SQLite's `record_closing`).
fn record_closing(
    tx: &mut Transaction<'_>,
    namespace: &str,
    target: i64,
    p: &Provenance,
    now_ms: i64,
) -> Result<i64, postgres::Error> {
    let messages = serde_json::to_string(&p.source_messages).unwrap_or_else(|_| "[]".into());
    tx.query_one(
        "INSERT INTO memory_fact_versions (fact_id, namespace, text, subject, entity_id, content_hash,
             valid_from, valid_to, recorded_at, invalidated_at, reason, source, agent, task,
             conversation, source_messages, model, ledger_id, closed_source, closed_agent,
             closed_task, closed_conversation, closed_model, closed_ledger_id, predicate, object,
             object_entity_id)
         SELECT fact_id, $2::TEXT, text, subject, entity_id, content_hash, valid_from, valid_to,
             $3::BIGINT, $3::BIGINT, reason, $4::TEXT, $5::TEXT, $6::BIGINT, $7::TEXT, $8::TEXT,
             $9::TEXT, $10::BIGINT, $4::TEXT, $5::TEXT, $6::BIGINT, $7::TEXT, $9::TEXT, $10::BIGINT,
             predicate, object, object_entity_id
         FROM memory_fact_versions WHERE id = $1
         RETURNING id",
        &[
            &target,
            &namespace,
            &now_ms,
            &p.source.as_str(),
            &p.agent,
            &p.task,
            &p.conversation,
            &messages,
            &p.model,
            &p.ledger_id,
        ],
    )?
    .try_get(0)
}

fn open_version(
    tx: &mut Transaction<'_>,
    namespace: &str,
    v: &NewVersion<'_>,
    p: &Provenance,
    now_ms: i64,
) -> Result<i64, postgres::Error> {
    let entity = match v.subject {
        Some(s) => resolve(tx, namespace, s, now_ms)?,
        None => None,
    };
    // An edge needs both ends, as on SQLite (`apply::open_version`).
    let (predicate, object) = match (v.predicate, v.object, entity) {
        (Some(p), Some(o), Some(_)) => (Some(p), Some(o)),
        _ => (None, None),
    };
    let object_entity = match object {
        Some(o) => resolve(tx, namespace, o, now_ms)?,
        None => None,
    };
    let messages = serde_json::to_string(&p.source_messages).unwrap_or_else(|_| "[]".into());
    tx.query_one(
        "INSERT INTO memory_fact_versions (fact_id, namespace, text, subject, entity_id, content_hash,
             valid_from, valid_to, recorded_at, reason, source, agent, task, conversation,
             source_messages, model, ledger_id, predicate, object, object_entity_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
             $18, $19, $20)
         RETURNING id",
        &[
            &v.fact_id,
            &namespace,
            &v.text,
            &v.subject,
            &entity,
            &content_hash(v.text),
            &v.valid_from,
            &v.valid_to,
            &now_ms,
            &v.reason,
            &p.source.as_str(),
            &p.agent,
            &p.task,
            &p.conversation,
            &messages,
            &p.model,
            &p.ledger_id,
            &predicate,
            &object,
            &object_entity,
        ],
    )?
    .try_get(0)
}

/// The entity the normalised name `norm` resolves to in `namespace` (through the aliases).
fn find(
    c: &mut impl GenericClient,
    namespace: &str,
    norm: &str,
) -> Result<Option<i64>, postgres::Error> {
    if norm.is_empty() {
        return Ok(None);
    }
    c.query_opt(
        "SELECT entity_id FROM memory_entity_aliases WHERE namespace = $1 AND norm = $2",
        &[&namespace, &norm],
    )?
    .map(|r| r.try_get(0))
    .transpose()
}

/// Resolve `name` in `namespace`, creating its entity and alias on first sight. Two nodes naming
/// a new subject at once: both inserts are `ON CONFLICT DO NOTHING` (the second waits for the
/// first's commit, then does nothing), and the answer is read back from the alias table, so both
/// end with the one entity.
fn resolve(
    tx: &mut Transaction<'_>,
    namespace: &str,
    name: &str,
    now_ms: i64,
) -> Result<Option<i64>, postgres::Error> {
    let norm = normalise(name);
    if norm.is_empty() {
        return Ok(None);
    }
    if let Some(id) = find(tx, namespace, &norm)? {
        return Ok(Some(id));
    }
    let name = name.trim();
    tx.execute(
        "INSERT INTO memory_entities (namespace, name, norm, created_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT (namespace, norm) DO NOTHING",
        &[&namespace, &name, &norm, &now_ms],
    )?;
    let id: i64 = tx
        .query_one(
            "SELECT id FROM memory_entities WHERE namespace = $1 AND norm = $2",
            &[&namespace, &norm],
        )?
        .try_get(0)?;
    tx.execute(
        "INSERT INTO memory_entity_aliases (namespace, norm, alias, entity_id, created_ms)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, norm) DO NOTHING",
        &[&namespace, &norm, &name, &id, &now_ms],
    )?;
    // The alias table has the last word (another node may have aliased this name meanwhile).
    Ok(find(tx, namespace, &norm)?.or(Some(id)))
}

fn upsert_vector(
    tx: &mut Transaction<'_>,
    id: i64,
    model: &str,
    q: &[i8],
    scale: f32,
) -> Result<u64, postgres::Error> {
    tx.execute(
        "INSERT INTO memory_fact_vectors (version_id, model, scale, vector) VALUES ($1, $2, $3, $4)
         ON CONFLICT (version_id, model) DO UPDATE
             SET scale = EXCLUDED.scale, vector = EXCLUDED.vector",
        &[&id, &model, &f64::from(scale), &to_blob(q)],
    )
}

fn mark(
    c: &mut impl GenericClient,
    namespace: &str,
    hash: &str,
    now_ms: i64,
) -> Result<(), postgres::Error> {
    c.execute(
        "INSERT INTO memory_facts_extracted (namespace, exchange_hash, at_ms) VALUES ($1, $2, $3)
         ON CONFLICT (namespace, exchange_hash) DO NOTHING",
        &[&namespace, &hash, &now_ms],
    )?;
    Ok(())
}

/// The view as a WHERE fragment over `v`, with its time parameter (if any) pushed to `params`.
fn view_filter(view: View, params: &mut Vec<Param>) -> String {
    let mut push = |t: i64| {
        params.push(Box::new(t));
        params.len()
    };
    match view {
        View::Current => "v.invalidated_at IS NULL".to_string(),
        View::BelievedAt(t) => {
            let n = push(t);
            format!(
                "v.recorded_at <= ${n} AND (v.invalidated_at IS NULL OR v.invalidated_at > ${n})"
            )
        }
        View::ValidAt(t) => {
            let n = push(t);
            format!(
                "v.invalidated_at IS NULL AND (v.valid_from IS NULL OR v.valid_from <= ${n}) \
                 AND (v.valid_to IS NULL OR v.valid_to > ${n})"
            )
        }
        View::History => "TRUE".to_string(),
    }
}

/// One version from a row selected with [`COLUMNS`].
fn version(r: &Row) -> Result<FactVersion, postgres::Error> {
    let source: String = r.try_get(10)?;
    let messages: String = r.try_get(14)?;
    Ok(FactVersion {
        id: r.try_get(0)?,
        fact_id: r.try_get(1)?,
        namespace: r.try_get(2)?,
        text: r.try_get(3)?,
        subject: r.try_get(4)?,
        valid_from: r.try_get(5)?,
        valid_to: r.try_get(6)?,
        recorded_at: r.try_get(7)?,
        invalidated_at: r.try_get(8)?,
        reason: r.try_get(9)?,
        // The column has a CHECK constraint; an unknown value cannot be stored.
        source: Source::parse(&source).unwrap_or(Source::System),
        agent: r.try_get(11)?,
        task: r.try_get(12)?,
        conversation: r.try_get(13)?,
        source_messages: serde_json::from_str(&messages).unwrap_or_default(),
        model: r.try_get(15)?,
        ledger_id: r.try_get(16)?,
        predicate: r.try_get(17)?,
        object: r.try_get(18)?,
    })
}
