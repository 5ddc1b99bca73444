//! Hybrid search over facts: BM25 (SQLite FTS5) and MiniLM vectors, fused like recall's.
//!
//! Why FTS5 and not tantivy (which recall uses): FTS5 lives in the same SQLite file and is written in
//! the same transaction as the version. So BM25 never lags a write (no derived index, no cursor to
//! catch up, no second directory), a failed batch leaves no index entry behind, the views' filters
//! are plain SQL joined to the match, and a read-only CLI beside a running `opc run` sees exactly
//! what is committed. The cost: FTS5 scores every matching row (no top-k pruning like tantivy's), so
//! the current facts have their own index (a tenth of the rows at ten versions a fact) and the
//! reader's namespaces are ANDed into the match (see [`crate::schema::facts`]).
//!
//! Vectors: each version's vector is stored as int8 with one scale (`memory_fact_vectors`, 388
//! bytes a version with MiniLM), keyed by (version, model): the active embedding generation's, and
//! while a new one fills, its too (`crate::recall::generation`). [`CurrentVectors`] holds ONE
//! model's vectors (`model`), all of one size fixed by the first inserted; the store replaces it
//! whole when the generation switches, so a query is never compared with another model's vectors. Only the **current** versions' vectors are held in memory (that is what
//! extraction, Select and `archival_search` without `at` search: 100k current facts are ~39 MB);
//! a `BelievedAt(t)` search scores the current versions recorded by t from memory and reads the
//! vectors of the versions closed after t from SQLite (an index range, capped at
//! [`PAST_VECTORS`] rows in all, those closed soonest after t first; past the cap, BM25 alone). Until the embedder has loaded, or for a
//! version not yet embedded, the search is BM25 alone.

use std::collections::HashMap;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params_from_iter};

use crate::recall::fusion::{self, Fusion};
use crate::recall::vectors::quantise;

use super::View;
use super::query::view_filter;

/// Candidates taken from each list before fusing.
pub const POOL: usize = 100;
/// Closed versions whose vectors a `BelievedAt` search reads from SQLite at most.
pub const PAST_VECTORS: usize = 20_000;
/// How the lists are fused: recall's measured default (weighted 0.5 / 0.5).
pub const FUSION: Fusion = Fusion::Weighted { vector: 0.5 };

/// Words left out of the BM25 query: they match nearly every fact and only slow the match down.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has",
    "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "so", "that",
    "the", "their", "there", "this", "to", "us", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "you", "your",
];
/// Namespaces at most whose tokens go into the FTS5 match (more are filtered in the join).
pub const NS_IN_MATCH: usize = 4;
/// Query terms at most.
pub const MAX_TERMS: usize = 32;

/// The words a keyword search looks for, on either backend: the text split at every
/// non-alphanumeric character (as FTS5's `unicode61` tokenizer splits it), lowercased, stop words
/// dropped unless nothing else is left, each once, at most [`MAX_TERMS`]. Empty when there is no
/// word at all. Every word is alphanumeric only, so it is never query syntax on either backend.
pub fn query_words(text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut kept: Vec<&String> = words
        .iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect();
    if kept.is_empty() {
        kept = words.iter().collect();
    }
    let mut seen = std::collections::HashSet::new();
    kept.into_iter()
        .filter(|w| seen.insert(w.as_str()))
        .take(MAX_TERMS)
        .cloned()
        .collect()
}

/// The FTS5 MATCH expression for free text: its [`query_words`], each quoted (so no user text is
/// ever FTS5 syntax), joined with OR. None when there is no word at all.
pub fn match_expr(text: &str) -> Option<String> {
    let terms: Vec<String> = query_words(text)
        .into_iter()
        .map(|w| format!("\"{w}\""))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// The one FTS5 token naming a namespace in the indexes' `ns` column: `ns` + the namespace's bytes
/// in hex + `0` (exact for any namespace, and the trailing digit keeps the porter stemmer off it).
pub fn ns_token(namespace: &str) -> String {
    format!("ns{}0", hex::encode(namespace.as_bytes()))
}

const CURRENT_FTS: &str = "memory_facts_fts_current";
const ALL_FTS: &str = "memory_facts_fts";

/// A WHERE fragment over `v` that pushes its own parameters.
type Filter<'a> = &'a dyn Fn(&mut Vec<SqlValue>) -> String;

/// The BM25 list: (version id, score; higher is better), best first.
///
/// - `Current` matches the current index alone (no join when the namespaces are in the match);
/// - `ValidAt(t)` the current index, joined for the validity window;
/// - `History` the index of every version;
/// - `BelievedAt(t)` in two parts: the current versions recorded by t (the current index), and the
///   versions believed at t but closed since, from the index of every version restricted to the
///   rowid range those versions span (read off the closed index). Without the range the match would
///   score every past version of every fact; with it, a time in the past costs about what a current
///   search costs when facts change at a steady pace (ids grow with time). The two parts' scores
///   come from two indexes (slightly different term statistics) and are merged as they are: close
///   enough for ranking, and the fusion with the vector list normalises them anyway.
pub fn bm25(
    conn: &Connection,
    text: &str,
    namespaces: &[String],
    view: View,
    pool: usize,
) -> rusqlite::Result<Vec<(i64, f32)>> {
    let Some(words) = match_expr(text) else {
        return Ok(Vec::new());
    };
    if namespaces.is_empty() {
        return Ok(Vec::new());
    }
    match view {
        View::Current => run(conn, CURRENT_FTS, &words, namespaces, None, None, pool),
        View::ValidAt(_) => {
            let f = |p: &mut Vec<SqlValue>| view_filter(view, p);
            run(conn, CURRENT_FTS, &words, namespaces, Some(&f), None, pool)
        }
        View::History => run(conn, ALL_FTS, &words, namespaces, None, None, pool),
        View::BelievedAt(t) => {
            let recorded = |p: &mut Vec<SqlValue>| {
                p.push(SqlValue::Integer(t));
                format!("v.recorded_at <= ?{}", p.len())
            };
            let mut list = run(
                conn,
                CURRENT_FTS,
                &words,
                namespaces,
                Some(&recorded),
                None,
                pool,
            )?;
            let closed_since = |p: &mut Vec<SqlValue>| {
                p.push(SqlValue::Integer(t));
                let n = p.len();
                format!(
                    "v.invalidated_at IS NOT NULL AND v.invalidated_at > ?{n} AND v.recorded_at <= ?{n}"
                )
            };
            let mut params = Vec::new();
            let marks = namespace_marks(namespaces, &mut params);
            let filter = closed_since(&mut params);
            let span: (Option<i64>, Option<i64>) = conn
                .prepare_cached(&format!(
                    "SELECT min(v.id), max(v.id) FROM memory_fact_versions v
                     WHERE v.namespace IN ({marks}) AND {filter}"
                ))?
                .query_row(params_from_iter(params), |r| Ok((r.get(0)?, r.get(1)?)))?;
            if let (Some(lo), Some(hi)) = span {
                list.extend(run(
                    conn,
                    ALL_FTS,
                    &words,
                    namespaces,
                    Some(&closed_since),
                    Some((lo, hi)),
                    pool,
                )?);
                list.sort_by(|a, b| b.1.total_cmp(&a.1));
                list.truncate(pool);
            }
            Ok(list)
        }
    }
}

fn namespace_marks(namespaces: &[String], params: &mut Vec<SqlValue>) -> String {
    namespaces
        .iter()
        .map(|n| {
            params.push(SqlValue::Text(n.clone()));
            format!("?{}", params.len())
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// One FTS5 match over `table`, narrowed to `namespaces` (in the match, or in the join when there are
/// many), `filter` (over the versions, joined) and a rowid range.
fn run(
    conn: &Connection,
    table: &str,
    words: &str,
    namespaces: &[String],
    filter: Option<Filter<'_>>,
    range: Option<(i64, i64)>,
    pool: usize,
) -> rusqlite::Result<Vec<(i64, f32)>> {
    // A few namespaces narrow the match itself (their tokens ANDed in); many would make FTS5 merge
    // that many long posting lists, so they are checked row by row in the join instead.
    let in_match = namespaces.len() <= NS_IN_MATCH;
    let expr = if in_match {
        let ns = namespaces
            .iter()
            .map(|n| format!("\"{}\"", ns_token(n)))
            .collect::<Vec<_>>()
            .join(" OR ");
        format!("ns : ({ns}) AND {{text subject}} : ({words})")
    } else {
        format!("{{text subject}} : ({words})")
    };
    let mut params: Vec<SqlValue> = vec![SqlValue::Text(expr)];
    let mut filters = Vec::new();
    if let Some((lo, hi)) = range {
        params.push(SqlValue::Integer(lo));
        params.push(SqlValue::Integer(hi));
        filters.push(format!(
            "{table}.rowid BETWEEN ?{} AND ?{}",
            params.len() - 1,
            params.len()
        ));
    }
    let join = !in_match || filter.is_some();
    if !in_match {
        let marks = namespace_marks(namespaces, &mut params);
        filters.push(format!("v.namespace IN ({marks})"));
    }
    if let Some(f) = filter {
        filters.push(f(&mut params));
    }
    params.push(SqlValue::Integer(i64::try_from(pool).unwrap_or(i64::MAX)));
    let limit = params.len();
    let and = filters
        .iter()
        .map(|f| format!(" AND {f}"))
        .collect::<String>();
    // bm25() is lower-is-better; the namespace column counts for nothing, the subject half the text.
    let sql = if join {
        format!(
            "SELECT v.id, bm25({table}, 0.0, 1.0, 0.5) AS s
             FROM {table} JOIN memory_fact_versions v ON v.id = {table}.rowid
             WHERE {table} MATCH ?1{and}
             ORDER BY s LIMIT ?{limit}"
        )
    } else {
        format!(
            "SELECT rowid, bm25({table}, 0.0, 1.0, 0.5) AS s FROM {table}
             WHERE {table} MATCH ?1{and} ORDER BY s LIMIT ?{limit}"
        )
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params_from_iter(params), |r| {
        Ok((r.get::<_, i64>(0)?, -(r.get::<_, f64>(1)? as f32)))
    })?;
    rows.collect()
}

/// Dot product of two int8 vectors: fixed-size chunks of 16 with i32 lanes, so the compiler sees no
/// bounds to check and vectorises the loop (pmaddwd on x86).
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let (ca, ra) = a.as_chunks::<16>();
    let (cb, rb) = b.as_chunks::<16>();
    let mut acc = [0i32; 16];
    for (x, y) in ca.iter().zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    acc.iter().sum::<i32>()
        + ra.iter()
            .zip(rb)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum::<i32>()
}

/// Int8 vector bytes as a blob, and back (None for a blob of the wrong length).
pub fn to_blob(q: &[i8]) -> Vec<u8> {
    q.iter().map(|x| x.to_le_bytes()[0]).collect()
}

/// The inverse of [`to_blob`] (any size but empty: the holder checks it against its generation's).
pub fn from_blob(b: &[u8]) -> Option<Vec<i8>> {
    (!b.is_empty()).then(|| b.iter().map(|x| i8::from_le_bytes([*x])).collect())
}

/// The current versions' vectors, in memory. Rows are removed by swapping the last one in.
#[derive(Default)]
pub struct CurrentVectors {
    /// `memory_facts_meta.generation` this reflects; None until loaded.
    pub generation: Option<i64>,
    /// The embedding generation (model id) of every vector held; empty until loaded.
    pub model: String,
    /// Components per vector (0 until the first insert).
    dims: usize,
    ids: Vec<i64>,
    namespaces: Vec<u32>,
    recorded: Vec<i64>,
    scales: Vec<f32>,
    data: Vec<i8>,
    position: HashMap<i64, usize>,
    ns_ids: HashMap<String, u32>,
}

impl CurrentVectors {
    /// Number of vectors held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Bytes held by the vectors and their columns (for the bench's report).
    pub fn bytes(&self) -> usize {
        self.data.len() + self.ids.len() * (8 + 4 + 8 + 4) + self.position.len() * 16
    }

    /// Add (or replace) a current version's vector; one of another size than those held is left
    /// out (the version is then found by keywords), with a warning naming it.
    pub fn insert(&mut self, id: i64, namespace: &str, recorded_at: i64, q: &[i8], scale: f32) {
        if self.dims == 0 && self.ids.is_empty() {
            self.dims = q.len();
        }
        if q.len() != self.dims || q.is_empty() {
            tracing::warn!(
                version = id,
                components = q.len(),
                expected = self.dims,
                model = %self.model,
                "facts: a vector of another size than its generation's was left out"
            );
            return;
        }
        self.remove(id);
        let next = u32::try_from(self.ns_ids.len()).unwrap_or(u32::MAX);
        let ns = *self.ns_ids.entry(namespace.to_string()).or_insert(next);
        self.position.insert(id, self.ids.len());
        self.ids.push(id);
        self.namespaces.push(ns);
        self.recorded.push(recorded_at);
        self.scales.push(scale);
        self.data.extend_from_slice(q);
    }

    /// Drop a version (closed).
    pub fn remove(&mut self, id: i64) {
        let Some(i) = self.position.remove(&id) else {
            return;
        };
        let last = self.ids.len() - 1;
        if i != last {
            let moved = self.ids[last];
            self.ids.swap(i, last);
            self.namespaces.swap(i, last);
            self.recorded.swap(i, last);
            self.scales.swap(i, last);
            let dims = self.dims;
            let (head, tail) = self.data.split_at_mut(last * dims);
            head[i * dims..(i + 1) * dims].copy_from_slice(&tail[..dims]);
            self.position.insert(moved, i);
        }
        self.ids.pop();
        self.namespaces.pop();
        self.recorded.pop();
        self.scales.pop();
        self.data.truncate(last * self.dims);
    }

    /// Load every current version's vector of `model` from SQLite.
    pub fn load(conn: &Connection, model: &str, generation: i64) -> rusqlite::Result<Self> {
        let mut out = CurrentVectors {
            generation: Some(generation),
            model: model.to_string(),
            ..Default::default()
        };
        let mut stmt = conn.prepare(
            "SELECT v.id, v.namespace, v.recorded_at, x.scale, x.vector
             FROM memory_fact_versions v JOIN memory_fact_vectors x ON x.version_id = v.id
             WHERE v.invalidated_at IS NULL AND x.model = ?1",
        )?;
        let mut rows = stmt.query([model])?;
        while let Some(r) = rows.next()? {
            let blob: Vec<u8> = r.get(4)?;
            if let Some(q) = from_blob(&blob) {
                let ns: String = r.get(1)?;
                out.insert(r.get(0)?, &ns, r.get(2)?, &q, r.get::<_, f64>(3)? as f32);
            }
        }
        Ok(out)
    }

    /// The best `limit` current versions for `query` among `namespaces`, recorded at or before
    /// `recorded_by`, as (id, cosine), best first.
    pub fn search(
        &self,
        query: &[f32],
        namespaces: &[String],
        recorded_by: i64,
        limit: usize,
    ) -> Vec<(i64, f32)> {
        let allowed: Vec<u32> = namespaces
            .iter()
            .filter_map(|n| self.ns_ids.get(n).copied())
            .collect();
        if allowed.is_empty() || limit == 0 || query.len() != self.dims || self.dims == 0 {
            return Vec::new();
        }
        let mut mask = vec![false; self.ns_ids.len()];
        for a in allowed {
            mask[a as usize] = true;
        }
        let (q, qscale) = quantise(query);
        let mut best = Best::new(limit);
        for i in 0..self.ids.len() {
            if !mask[self.namespaces[i] as usize] || self.recorded[i] > recorded_by {
                continue;
            }
            let row = &self.data[i * self.dims..(i + 1) * self.dims];
            best.offer(
                dot_i8(&q, row) as f32 * self.scales[i] * qscale,
                self.ids[i],
            );
        }
        best.into_list()
    }
}

/// The best `limit` (score, id) seen, kept sorted (the scan dominates; this stays small).
pub struct Best {
    limit: usize,
    list: Vec<(f32, i64)>,
}

impl Best {
    /// An empty list keeping `limit`.
    pub fn new(limit: usize) -> Self {
        Best {
            limit,
            list: Vec::with_capacity(limit + 1),
        }
    }

    /// Consider one candidate.
    pub fn offer(&mut self, score: f32, id: i64) {
        if self.list.len() == self.limit && self.list.last().is_some_and(|l| score <= l.0) {
            return;
        }
        let pos = self.list.partition_point(|b| b.0 >= score);
        self.list.insert(pos, (score, id));
        self.list.truncate(self.limit);
    }

    /// (id, score), best first.
    pub fn into_list(self) -> Vec<(i64, f32)> {
        self.list.into_iter().map(|(s, id)| (id, s)).collect()
    }
}

/// Vectors of versions of `namespaces` closed after `t` but recorded by it (believed at t), scored
/// against `query` into `best` (at most [`PAST_VECTORS`] rows read in all, each namespace's
/// soonest-closed first: the beliefs nearest t).
pub fn score_past(
    conn: &Connection,
    model: &str,
    query: &[f32],
    namespaces: &[String],
    t: i64,
    best: &mut Best,
) -> rusqlite::Result<()> {
    let (q, qscale) = quantise(query);
    let mut stmt = conn.prepare_cached(
        "SELECT v.id, x.scale, x.vector FROM memory_fact_versions v
           JOIN memory_fact_vectors x ON x.version_id = v.id
         WHERE v.namespace = ?1 AND v.invalidated_at IS NOT NULL AND v.invalidated_at > ?2
           AND v.recorded_at <= ?2 AND x.model = ?3
         ORDER BY v.invalidated_at LIMIT ?4",
    )?;
    let mut budget = PAST_VECTORS;
    for ns in namespaces {
        let mut rows = stmt.query(rusqlite::params![
            ns,
            t,
            model,
            i64::try_from(budget).unwrap_or(i64::MAX)
        ])?;
        while let Some(r) = rows.next()? {
            budget = budget.saturating_sub(1);
            let blob: Vec<u8> = r.get(2)?;
            // Of the query's model (the SQL says so), so of its size; checked all the same.
            if let Some(row) = from_blob(&blob).filter(|row| row.len() == q.len()) {
                best.offer(
                    dot_i8(&q, &row) as f32 * r.get::<_, f64>(1)? as f32 * qscale,
                    r.get(0)?,
                );
            }
        }
    }
    Ok(())
}

/// Fuse the two lists (recall's fusion), best first, as (id, score).
pub fn fuse(bm25: &[(i64, f32)], vector: &[(i64, f32)]) -> Vec<(i64, f32)> {
    if vector.is_empty() {
        return bm25.to_vec();
    }
    fusion::fuse(bm25, vector, FUSION)
        .into_iter()
        .map(|f| (f.seq, f.score))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::DIM;

    #[test]
    fn match_expressions_are_quoted_words() {
        assert_eq!(
            match_expr("When is the Orion launch?").as_deref(),
            Some("\"orion\" OR \"launch\"")
        );
        assert_eq!(match_expr("the").as_deref(), Some("\"the\""));
        assert_eq!(
            match_expr("\"; DROP TABLE x; --  NEAR( *").as_deref(),
            Some("\"drop\" OR \"table\" OR \"x\" OR \"near\"")
        );
        assert_eq!(match_expr("  ?!  "), None);
    }

    #[test]
    fn dot_matches_the_plain_sum() {
        let a: Vec<i8> = (0..DIM + 5).map(|i| (i as i32 % 255 - 127) as i8).collect();
        let b: Vec<i8> = (0..DIM + 5)
            .map(|i| (i as i32 * 7 % 255 - 127) as i8)
            .collect();
        let plain: i32 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        assert_eq!(dot_i8(&a, &b), plain);
    }

    #[test]
    fn current_vectors_remove_by_swapping() {
        let mut cv = CurrentVectors::default();
        let mk = |x: i8| vec![x; DIM];
        cv.insert(1, "agent/a", 1, &mk(1), 1.0);
        cv.insert(2, "agent/a", 2, &mk(2), 1.0);
        cv.insert(3, "agent/b", 3, &mk(3), 1.0);
        cv.remove(1);
        assert_eq!(cv.len(), 2);
        let hits = cv.search(
            &vec![1.0; DIM],
            &["agent/a".into(), "agent/b".into()],
            i64::MAX,
            10,
        );
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![3, 2]);
        let hits = cv.search(&vec![1.0; DIM], &["agent/a".into()], i64::MAX, 10);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2]);
        let hits = cv.search(&vec![1.0; DIM], &["agent/b".into()], 2, 10);
        assert!(hits.is_empty(), "recorded after the bound");
    }
}
