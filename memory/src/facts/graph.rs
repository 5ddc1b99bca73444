//! Graph memory: entities and the relations between them, read off the fact versions.
//!
//! An edge is a fact VERSION with a `predicate` and an object entity (columns of
//! `memory_fact_versions`, memory's SQLite migration 5 [`crate::schema::graph`], PostgreSQL
//! migration 3): from the version's subject entity to its object entity, both resolved through the
//! alias table of the version's namespace. So the graph is bi-temporal for free: an edge is current
//! while its version is, closes when the version is updated or invalidated, and
//! [`View::BelievedAt`] shows the graph as it was believed then.
//!
//! Invariant the queries rely on: both ends of an edge are entities of the version's namespace
//! (the store resolves subject and object in it), so a walk from roots of the reader's namespaces
//! never reaches another namespace's entity.
//!
//! Queries (each one SQL text for both backends, `Sql`: only the placeholders differ, `?N` on
//! SQLite and `$N` on PostgreSQL, written by `Marks`; depth and limits are validated integers
//! spelled into the text, every name is a bound parameter):
//! - [`FactStore::graph`]: a recursive CTE from the root over edges in both directions, depth ≤ 3,
//!   under the view and the reader's namespaces. It reaches the entities within `depth - 1` hops
//!   (`UNION`: an (entity, hop) pair is expanded once, so cycles terminate), then takes every edge
//!   touching them, deduplicated by version, nearest first, capped at `max_edges` (the result says
//!   it was truncated);
//! - [`FactStore::entities_in`]: the normalised word 1..4-grams of a text (bounded) against the
//!   alias table, one `IN` query;
//! - [`FactStore::neighbour_facts`]: versions whose subject or object entity is among the given
//!   entities or their 1-hop neighbours.
//!
//! Renderings ([`Graph::to_json`], [`Graph::to_dot`], [`Graph::to_cypher`], [`Graph::to_text`])
//! escape every name and text for their format, so a name with `"`, `\` or a newline cannot break
//! out of its string.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::json;

use super::entities::normalise;
use super::time::{format_time, json_time};
use super::{Backend, FactError, FactStore, FactVersion, View};

/// The deepest neighbourhood [`FactStore::graph`] walks.
pub const MAX_DEPTH: u8 = 3;
/// Words of a text [`FactStore::entities_in`] reads at most (its n-grams bound the one query).
pub const MAX_WORDS: usize = 256;
/// The longest alias [`FactStore::entities_in`] matches, in words.
pub const MAX_GRAM: usize = 4;
/// Ids per `IN` list when reading nodes (well under SQLite's parameter limit).
const CHUNK: usize = 500;

/// A graph query.
#[derive(Clone, Debug)]
pub struct GraphQuery {
    /// What the reader may read (the ACL's answer), like [`super::FactQuery`].
    pub namespaces: Vec<String>,
    /// A name or alias; None = the whole graph (bounded by `max_edges`).
    pub entity: Option<String>,
    /// 1..=3 hops from the entity.
    pub depth: u8,
    /// `Current`, `BelievedAt(ms)` or `ValidAt(ms)` (`History` has no single graph).
    pub view: View,
    /// The most edges returned; the result says whether more were there.
    pub max_edges: usize,
}

/// An entity.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GraphNode {
    /// Its id.
    pub id: i64,
    /// Its display name (the first spelling seen).
    pub name: String,
    /// Its other spellings (aliases), sorted.
    pub aliases: Vec<String>,
    /// Its namespace.
    pub namespace: String,
}

/// A relation: one fact version with a predicate and an object.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GraphEdge {
    /// The subject entity.
    pub from: i64,
    /// The object entity.
    pub to: i64,
    /// The relation ("leads").
    pub predicate: String,
    /// The fact.
    pub fact_id: i64,
    /// The version carrying the relation.
    pub version_id: i64,
    /// The version's statement.
    pub text: String,
    /// World time from (None: open).
    pub valid_from: Option<i64>,
    /// World time to (None: open).
    pub valid_to: Option<i64>,
    /// System time recorded.
    pub recorded_at: i64,
    /// System time closed (None: current).
    pub invalidated_at: Option<i64>,
}

/// A neighbourhood (or the whole graph, bounded).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Graph {
    /// The entities of the edges (and the root).
    pub nodes: Vec<GraphNode>,
    /// The edges, nearest the root first.
    pub edges: Vec<GraphEdge>,
    /// More edges were there than `max_edges`.
    pub truncated: bool,
    /// The entity asked for, when found.
    pub root: Option<i64>,
}

/// A bound parameter of a [`Sql`].
#[derive(Clone, Debug)]
pub(super) enum Arg {
    Int(i64),
    Text(String),
}

/// What a selected column holds (how a backend decodes it).
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    Int,
    Text,
}

/// A decoded column (NULL as None).
#[derive(Clone, Debug)]
pub(super) enum Cell {
    Int(Option<i64>),
    Text(Option<String>),
}

impl Cell {
    fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(v) => *v,
            Cell::Text(_) => None,
        }
    }

    fn text(&self) -> Option<String> {
        match self {
            Cell::Text(v) => v.clone(),
            Cell::Int(_) => None,
        }
    }
}

/// One query for either backend: its text and its parameters, in order.
#[derive(Clone, Debug)]
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) args: Vec<Arg>,
}

/// The placeholder style: the one difference between the two backends' texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Marks {
    /// `?1`, `?2`, …
    Sqlite,
    /// `$1`, `$2`, …
    Postgres,
}

/// Builds a [`Sql`]: each pushed parameter gets the next placeholder.
struct Builder {
    marks: Marks,
    args: Vec<Arg>,
}

impl Builder {
    fn new(marks: Marks) -> Self {
        Builder {
            marks,
            args: Vec::new(),
        }
    }

    fn push(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        match self.marks {
            Marks::Sqlite => format!("?{}", self.args.len()),
            Marks::Postgres => format!("${}", self.args.len()),
        }
    }

    /// `m1, m2, …` for an `IN` list (never empty: callers check).
    fn list(&mut self, args: impl IntoIterator<Item = Arg>) -> String {
        args.into_iter()
            .map(|a| self.push(a))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The view as a WHERE fragment over `v` (its time bound once, used twice).
    fn view(&mut self, view: View) -> String {
        match view {
            View::Current => "v.invalidated_at IS NULL".to_string(),
            View::BelievedAt(t) => {
                let m = self.push(Arg::Int(t));
                format!(
                    "v.recorded_at <= {m} AND (v.invalidated_at IS NULL OR v.invalidated_at > {m})"
                )
            }
            View::ValidAt(t) => {
                let m = self.push(Arg::Int(t));
                format!(
                    "v.invalidated_at IS NULL AND (v.valid_from IS NULL OR v.valid_from <= {m}) \
                     AND (v.valid_to IS NULL OR v.valid_to > {m})"
                )
            }
            View::History => "1 = 1".to_string(),
        }
    }

    fn done(self, text: String) -> Sql {
        Sql {
            text,
            args: self.args,
        }
    }
}

fn texts(items: &[String]) -> impl Iterator<Item = Arg> + '_ {
    items.iter().map(|s| Arg::Text(s.clone()))
}

fn ints(items: &[i64]) -> impl Iterator<Item = Arg> + '_ {
    items.iter().map(|&i| Arg::Int(i))
}

/// The columns of an edge, in the order [`edge`] reads them.
const EDGE_COLUMNS: &str = "v.id, v.fact_id, v.entity_id, v.object_entity_id, v.predicate, v.text, \
     v.valid_from, v.valid_to, v.recorded_at, v.invalidated_at";
const EDGE_KINDS: &[Kind] = &[
    Kind::Int,
    Kind::Int,
    Kind::Int,
    Kind::Int,
    Kind::Text,
    Kind::Text,
    Kind::Int,
    Kind::Int,
    Kind::Int,
    Kind::Int,
];

fn edge(row: &[Cell]) -> Option<GraphEdge> {
    Some(GraphEdge {
        version_id: row.first()?.int()?,
        fact_id: row.get(1)?.int()?,
        from: row.get(2)?.int()?,
        to: row.get(3)?.int()?,
        predicate: row.get(4)?.text().unwrap_or_default(),
        text: row.get(5)?.text().unwrap_or_default(),
        valid_from: row.get(6)?.int(),
        valid_to: row.get(7)?.int(),
        recorded_at: row.get(8)?.int()?,
        invalidated_at: row.get(9)?.int(),
    })
}

/// The roots: the entity `norm` names in each namespace, as (namespace, entity id).
pub(super) fn roots_sql(marks: Marks, namespaces: &[String], norm: &str) -> Sql {
    let mut b = Builder::new(marks);
    let ns = b.list(texts(namespaces));
    let n = b.push(Arg::Text(norm.to_string()));
    b.done(format!(
        "SELECT a.namespace, a.entity_id FROM memory_entity_aliases a
         WHERE a.namespace IN ({ns}) AND a.norm = {n}"
    ))
}

/// The neighbourhood's edges: every edge in view touching an entity within `depth - 1` hops of
/// `roots`, deduplicated, nearest first, at most `limit`.
///
/// Returns the version ids, nearest first; [`edges_sql`] then reads those rows.
///
/// Shape (and why): `reach` walks (entity, hop) pairs; `top` picks the nearest `limit` edges by
/// version id from the two edge indexes alone (they hold both ends, `invalidated_at` and
/// `recorded_at`: covering). The rows themselves are read by id in a second query: joined here,
/// PostgreSQL's planner (expecting `limit` rows) hashed the whole namespace instead of probing the
/// few ids (119 ms for 4 edges, measured). The walk needs no namespace filter: both ends of an
/// edge are entities of the version's namespace, so the roots' namespaces (checked on the roots)
/// are the only ones it can reach; the rows read are checked again all the same.
pub(super) fn neighbourhood_sql(
    marks: Marks,
    namespaces: &[String],
    roots: &[i64],
    depth: u8,
    view: View,
    limit: usize,
) -> Sql {
    let mut b = Builder::new(marks);
    let roots = b.list(ints(roots));
    let ns = b.list(texts(namespaces));
    let filter = b.view(view);
    // Entities at hop < depth - 1 are expanded; their edges lead to hop depth - 1 at most, and
    // the edges of entities at hop < depth reach depth at most.
    let expand = depth.saturating_sub(1);
    b.done(format!(
        "WITH RECURSIVE reach(entity, hop) AS (
             SELECT e.id, 0 FROM memory_entities e WHERE e.id IN ({roots}) AND e.namespace IN ({ns})
             UNION
             SELECT CASE WHEN v.entity_id = r.entity THEN v.object_entity_id ELSE v.entity_id END,
                    r.hop + 1
             FROM reach r JOIN memory_fact_versions v
                 ON v.entity_id = r.entity OR v.object_entity_id = r.entity
             WHERE r.hop < {expand} AND v.object_entity_id IS NOT NULL AND {filter}
         ),
         near(entity, hop) AS (SELECT entity, MIN(hop) FROM reach GROUP BY entity),
         top(vid, hop) AS (
             SELECT v.id, MIN(n.hop)
             FROM near n JOIN memory_fact_versions v
                 ON v.entity_id = n.entity OR v.object_entity_id = n.entity
             WHERE v.object_entity_id IS NOT NULL AND {filter}
             GROUP BY v.id
             ORDER BY MIN(n.hop), v.id
             LIMIT {limit}
         )
         SELECT vid FROM top ORDER BY hop, vid"
    ))
}

/// The edges with these version ids in `namespaces` (any order).
pub(super) fn edges_sql(marks: Marks, namespaces: &[String], ids: &[i64]) -> Sql {
    let mut b = Builder::new(marks);
    let ids = b.list(ints(ids));
    let ns = b.list(texts(namespaces));
    b.done(format!(
        "SELECT {EDGE_COLUMNS} FROM memory_fact_versions v
         WHERE v.id IN ({ids}) AND v.namespace IN ({ns}) AND v.object_entity_id IS NOT NULL"
    ))
}

/// The whole graph's edges in view, newest first, at most `limit`.
pub(super) fn all_edges_sql(marks: Marks, namespaces: &[String], view: View, limit: usize) -> Sql {
    let mut b = Builder::new(marks);
    let ns = b.list(texts(namespaces));
    let filter = b.view(view);
    b.done(format!(
        "SELECT {EDGE_COLUMNS} FROM memory_fact_versions v
         WHERE v.object_entity_id IS NOT NULL AND v.namespace IN ({ns}) AND {filter}
         ORDER BY v.recorded_at DESC, v.id DESC
         LIMIT {limit}"
    ))
}

/// Entities by id: (id, name, namespace).
pub(super) fn nodes_sql(marks: Marks, ids: &[i64]) -> Sql {
    let mut b = Builder::new(marks);
    let ids = b.list(ints(ids));
    b.done(format!(
        "SELECT e.id, e.name, e.namespace FROM memory_entities e WHERE e.id IN ({ids})"
    ))
}

/// The spellings of entities: (entity id, alias), sorted.
pub(super) fn aliases_sql(marks: Marks, ids: &[i64]) -> Sql {
    let mut b = Builder::new(marks);
    let ids = b.list(ints(ids));
    b.done(format!(
        "SELECT a.entity_id, a.alias FROM memory_entity_aliases a
         WHERE a.entity_id IN ({ids}) ORDER BY a.entity_id, a.alias"
    ))
}

/// Aliases among `grams` in `namespaces`: (entity id, display name, matched norm).
pub(super) fn entities_in_sql(marks: Marks, namespaces: &[String], grams: &[String]) -> Sql {
    let mut b = Builder::new(marks);
    let ns = b.list(texts(namespaces));
    let grams = b.list(texts(grams));
    b.done(format!(
        "SELECT a.entity_id, e.name, a.norm
         FROM memory_entity_aliases a JOIN memory_entities e ON e.id = a.entity_id
         WHERE a.namespace IN ({ns}) AND a.norm IN ({grams})"
    ))
}

/// Version ids about `entities` or their 1-hop neighbours (subject or object among them), in
/// view, newest first, at most `limit`.
pub(super) fn neighbour_ids_sql(
    marks: Marks,
    namespaces: &[String],
    entities: &[i64],
    view: View,
    limit: usize,
) -> Sql {
    let mut b = Builder::new(marks);
    let ids = b.list(ints(entities));
    let ns = b.list(texts(namespaces));
    let filter = b.view(view);
    b.done(format!(
        "WITH seed(entity) AS (
             SELECT e.id FROM memory_entities e WHERE e.id IN ({ids}) AND e.namespace IN ({ns})
         ),
         hop(entity) AS (
             SELECT entity FROM seed
             UNION
             SELECT v.object_entity_id FROM seed s JOIN memory_fact_versions v ON v.entity_id = s.entity
             WHERE v.object_entity_id IS NOT NULL AND {filter}
             UNION
             SELECT v.entity_id FROM seed s JOIN memory_fact_versions v ON v.object_entity_id = s.entity
             WHERE {filter}
         )
         SELECT v.id FROM memory_fact_versions v
         WHERE (v.entity_id IN (SELECT entity FROM hop) OR v.object_entity_id IN (SELECT entity FROM hop))
             AND v.namespace IN ({ns}) AND {filter}
         ORDER BY v.recorded_at DESC, v.id DESC
         LIMIT {limit}"
    ))
}

/// The normalised word n-grams (1..=[`MAX_GRAM`]) of the first [`MAX_WORDS`] words of `text`,
/// each with its first word position (deduplicated).
pub fn grams(text: &str) -> Vec<(String, usize)> {
    let norm = normalise_words(text);
    let words: Vec<&str> = norm.split_whitespace().take(MAX_WORDS).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for start in 0..words.len() {
        for len in 1..=MAX_GRAM.min(words.len() - start) {
            let gram = normalise(&words[start..start + len].join(" "));
            if !gram.is_empty() && seen.insert(gram.clone()) {
                out.push((gram, start));
            }
        }
    }
    out
}

/// Lowercase, every non-alphanumeric character a space (as [`normalise`] does, without dropping
/// articles: that is done per n-gram).
fn normalise_words(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect()
}

fn check(q: &GraphQuery) -> Result<(), FactError> {
    if !(1..=MAX_DEPTH).contains(&q.depth) {
        return Err(FactError::Invalid(format!(
            "graph: depth {} is out of range; use 1, 2 or 3",
            q.depth
        )));
    }
    if q.max_edges == 0 {
        return Err(FactError::Invalid(
            "graph: max_edges is 0; ask for at least one edge".to_string(),
        ));
    }
    if q.view == View::History {
        return Err(FactError::Invalid(
            "graph: the History view has no single graph; ask for the current graph or one believed at a time"
                .to_string(),
        ));
    }
    Ok(())
}

impl FactStore {
    fn marks(&self) -> Marks {
        match &self.inner.backend {
            Backend::Sqlite(_) => Marks::Sqlite,
            Backend::Postgres(_) => Marks::Postgres,
        }
    }

    fn select(
        &self,
        doing: &'static str,
        sql: Sql,
        kinds: &'static [Kind],
    ) -> Result<Vec<Vec<Cell>>, FactError> {
        match &self.inner.backend {
            Backend::Sqlite(b) => b.select(&sql, kinds),
            Backend::Postgres(b) => b.select(doing, sql, kinds),
        }
    }

    /// The neighbourhood of `q.entity` (recursive CTE; the same SQL text on SQLite and PostgreSQL
    /// but for placeholders), or the whole graph when `q.entity` is None, bounded by `q.max_edges`.
    /// An unknown entity is an empty graph with `root` None, not an error.
    pub fn graph(&self, q: &GraphQuery) -> Result<Graph, FactError> {
        check(q)?;
        if q.namespaces.is_empty() {
            return Ok(Graph::default());
        }
        let marks = self.marks();
        let limit = q.max_edges.saturating_add(1);
        let (rows, roots) = match &q.entity {
            None => (
                self.select(
                    "reading the graph",
                    all_edges_sql(marks, &q.namespaces, q.view, limit),
                    EDGE_KINDS,
                )?,
                Vec::new(),
            ),
            Some(name) => {
                let norm = normalise(name);
                if norm.is_empty() {
                    return Ok(Graph::default());
                }
                let mut found: Vec<(usize, i64)> = self
                    .select(
                        "finding an entity",
                        roots_sql(marks, &q.namespaces, &norm),
                        &[Kind::Text, Kind::Int],
                    )?
                    .iter()
                    .filter_map(|r| {
                        let ns = r.first()?.text()?;
                        let at = q.namespaces.iter().position(|n| *n == ns)?;
                        Some((at, r.get(1)?.int()?))
                    })
                    .collect();
                // The reader's namespaces in the order given: the first is the root reported.
                found.sort_unstable();
                let roots: Vec<i64> = found.into_iter().map(|(_, id)| id).collect();
                if roots.is_empty() {
                    return Ok(Graph::default());
                }
                let ids: Vec<i64> = self
                    .select(
                        "reading a neighbourhood",
                        neighbourhood_sql(marks, &q.namespaces, &roots, q.depth, q.view, limit),
                        &[Kind::Int],
                    )?
                    .iter()
                    .filter_map(|r| r.first()?.int())
                    .collect();
                let mut rows = Vec::with_capacity(ids.len());
                for chunk in ids.chunks(CHUNK) {
                    rows.extend(self.select(
                        "reading a neighbourhood's edges",
                        edges_sql(marks, &q.namespaces, chunk),
                        EDGE_KINDS,
                    )?);
                }
                // Back in the walk's order (nearest first).
                let at: HashMap<i64, usize> =
                    ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
                rows.sort_by_key(|r| {
                    r.first()
                        .and_then(Cell::int)
                        .and_then(|id| at.get(&id).copied())
                        .unwrap_or(usize::MAX)
                });
                (rows, roots)
            }
        };
        let mut edges: Vec<GraphEdge> = rows.iter().filter_map(|r| edge(r)).collect();
        let truncated = edges.len() > q.max_edges;
        edges.truncate(q.max_edges);
        let mut ids: BTreeSet<i64> = roots.iter().copied().collect();
        for e in &edges {
            ids.insert(e.from);
            ids.insert(e.to);
        }
        let ids: Vec<i64> = ids.into_iter().collect();
        let nodes = self.nodes(&ids)?;
        Ok(Graph {
            nodes,
            edges,
            truncated,
            root: roots.first().copied(),
        })
    }

    /// The entities with these ids, with their aliases, sorted by id.
    fn nodes(&self, ids: &[i64]) -> Result<Vec<GraphNode>, FactError> {
        let marks = self.marks();
        let mut nodes = Vec::with_capacity(ids.len());
        let mut aliases: HashMap<i64, Vec<String>> = HashMap::new();
        for chunk in ids.chunks(CHUNK) {
            for r in self.select(
                "reading entities",
                nodes_sql(marks, chunk),
                &[Kind::Int, Kind::Text, Kind::Text],
            )? {
                if let (Some(id), Some(name), Some(namespace)) = (
                    r.first().and_then(Cell::int),
                    r.get(1).and_then(Cell::text),
                    r.get(2).and_then(Cell::text),
                ) {
                    nodes.push(GraphNode {
                        id,
                        name,
                        aliases: Vec::new(),
                        namespace,
                    });
                }
            }
            for r in self.select(
                "reading aliases",
                aliases_sql(marks, chunk),
                &[Kind::Int, Kind::Text],
            )? {
                if let (Some(id), Some(alias)) =
                    (r.first().and_then(Cell::int), r.get(1).and_then(Cell::text))
                {
                    aliases.entry(id).or_default().push(alias);
                }
            }
        }
        nodes.sort_by_key(|n| n.id);
        for n in &mut nodes {
            let mut mine = aliases.remove(&n.id).unwrap_or_default();
            mine.retain(|a| *a != n.name);
            mine.sort();
            mine.dedup();
            n.aliases = mine;
        }
        Ok(nodes)
    }

    /// Entities of `namespaces` named in `text` (alias match on normalised word n-grams, no
    /// model): (entity id, display name), in the order the text first names them.
    pub fn entities_in(
        &self,
        namespaces: &[String],
        text: &str,
    ) -> Result<Vec<(i64, String)>, FactError> {
        let grams = grams(text);
        if namespaces.is_empty() || grams.is_empty() {
            return Ok(Vec::new());
        }
        let at: HashMap<&str, usize> = grams.iter().map(|(g, i)| (g.as_str(), *i)).collect();
        let list: Vec<String> = grams.iter().map(|(g, _)| g.clone()).collect();
        let rows = self.select(
            "finding entities in a text",
            entities_in_sql(self.marks(), namespaces, &list),
            &[Kind::Int, Kind::Text, Kind::Text],
        )?;
        let mut found: Vec<(usize, i64, String)> = rows
            .iter()
            .filter_map(|r| {
                let norm = r.get(2)?.text()?;
                Some((
                    *at.get(norm.as_str())?,
                    r.first()?.int()?,
                    r.get(1)?.text()?,
                ))
            })
            .collect();
        found.sort();
        let mut seen = HashSet::new();
        Ok(found
            .into_iter()
            .filter(|(_, id, _)| seen.insert(*id))
            .map(|(_, id, name)| (id, name))
            .collect())
    }

    /// Versions in `view` about the given entities and their 1-hop neighbours (subject or object
    /// among them), in `namespaces`, newest first, at most `limit`.
    pub fn neighbour_facts(
        &self,
        namespaces: &[String],
        entities: &[i64],
        view: View,
        limit: usize,
    ) -> Result<Vec<FactVersion>, FactError> {
        if namespaces.is_empty() || entities.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        // Bounded like a node read: more seeds than that is not a question a prompt asks.
        let entities = &entities[..entities.len().min(CHUNK)];
        let ids: Vec<i64> = self
            .select(
                "reading neighbouring facts",
                neighbour_ids_sql(self.marks(), namespaces, entities, view, limit),
                &[Kind::Int],
            )?
            .iter()
            .filter_map(|r| r.first()?.int())
            .collect();
        let found = match &self.inner.backend {
            Backend::Sqlite(b) => b.by_ids(&ids)?,
            Backend::Postgres(b) => b.by_ids(&ids)?,
        };
        let mut by_id: HashMap<i64, FactVersion> = found.into_iter().map(|v| (v.id, v)).collect();
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }
}

/// A string as a double-quoted literal of DOT or Cypher: `\` and `"` escaped, line breaks as `\n`
/// (and other control characters dropped), so no name can end its string early.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One line of human text: control characters (newlines) become spaces.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

impl Graph {
    /// `{"nodes":[{"id","name","aliases","namespace"}],"edges":[{"from","to","predicate",
    /// "fact_id","version_id","text","valid_from","valid_to","recorded_at","invalidated_at"}],
    /// "truncated","root"}`; times as RFC 3339 strings or null.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "nodes": self.nodes.iter().map(|n| json!({
                "id": n.id,
                "name": n.name,
                "aliases": n.aliases,
                "namespace": n.namespace,
            })).collect::<Vec<_>>(),
            "edges": self.edges.iter().map(|e| json!({
                "from": e.from,
                "to": e.to,
                "predicate": e.predicate,
                "fact_id": e.fact_id,
                "version_id": e.version_id,
                "text": e.text,
                "valid_from": json_time(e.valid_from),
                "valid_to": json_time(e.valid_to),
                "recorded_at": json_time(Some(e.recorded_at)),
                "invalidated_at": json_time(e.invalidated_at),
            })).collect::<Vec<_>>(),
            "truncated": self.truncated,
            "root": self.root,
        })
    }

    /// A Graphviz digraph: one node `nID` per entity (labelled with its name; the root drawn
    /// bold), one edge per relation (labelled with its predicate); every label escaped.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph memory {\n  node [shape=box];\n");
        for n in &self.nodes {
            let bold = if self.root == Some(n.id) {
                ", style=bold"
            } else {
                ""
            };
            let _ = writeln!(out, "  n{} [label={}{bold}];", n.id, quoted(&n.name));
        }
        for e in &self.edges {
            let _ = writeln!(
                out,
                "  n{} -> n{} [label={}, tooltip={}];",
                e.from,
                e.to,
                quoted(&e.predicate),
                quoted(&e.text)
            );
        }
        if self.truncated {
            out.push_str("  // truncated: more edges than asked for\n");
        }
        out.push_str("}\n");
        out
    }

    /// Cypher statements (one per line) that MERGE the graph into Neo4j or Memgraph: entities as
    /// `(:Entity {id})` with name and namespace, relations as `[:REL {fact_id}]` with predicate,
    /// text and times (RFC 3339); every string escaped.
    pub fn to_cypher(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let _ = writeln!(
                out,
                "MERGE (n:Entity {{id: {}}}) SET n.name = {}, n.namespace = {};",
                n.id,
                quoted(&n.name),
                quoted(&n.namespace)
            );
        }
        let time = |t: Option<i64>| t.map_or("null".to_string(), |t| quoted(&format_time(t)));
        for e in &self.edges {
            let _ = writeln!(
                out,
                "MATCH (a:Entity {{id: {}}}), (b:Entity {{id: {}}}) \
                 MERGE (a)-[r:REL {{fact_id: {}}}]->(b) \
                 SET r.predicate = {}, r.version_id = {}, r.text = {}, r.valid_from = {}, r.valid_to = {};",
                e.from,
                e.to,
                e.fact_id,
                quoted(&e.predicate),
                e.version_id,
                quoted(&e.text),
                time(e.valid_from),
                time(e.valid_to)
            );
        }
        out
    }

    /// Human text, one relation a line: `Marco Diaz —leads→ Orion project  [fact 12, valid from …]`;
    /// then a line saying it was truncated, if it was.
    pub fn to_text(&self) -> String {
        let names: HashMap<i64, &str> =
            self.nodes.iter().map(|n| (n.id, n.name.as_str())).collect();
        let name = |id: i64| one_line(names.get(&id).copied().unwrap_or("?"));
        let mut out = String::new();
        if self.edges.is_empty() {
            out.push_str("(no relations)\n");
        }
        for e in &self.edges {
            let mut when = Vec::new();
            if let Some(t) = e.valid_from {
                when.push(format!("valid from {}", format_time(t)));
            }
            if let Some(t) = e.valid_to {
                when.push(format!("valid to {}", format_time(t)));
            }
            if let Some(t) = e.invalidated_at {
                when.push(format!("closed {}", format_time(t)));
            }
            let when = if when.is_empty() {
                String::new()
            } else {
                format!(", {}", when.join(", "))
            };
            let _ = writeln!(
                out,
                "{} —{}→ {}  [fact {}{when}]",
                name(e.from),
                one_line(&e.predicate),
                name(e.to),
                e.fact_id
            );
        }
        if self.truncated {
            let _ = writeln!(
                out,
                "(truncated at {} relations; ask for a smaller depth or more edges)",
                self.edges.len()
            );
        }
        out
    }
}
