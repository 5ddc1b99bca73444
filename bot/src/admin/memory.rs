//! The console's Memory and Privacy pages: core memory blocks as stored, a search of recall memory
//! as an agent would see it, an agent's long-term facts (current, believed at a time, true at a
//! time, or every version) with one fact's version history, the graph of an agent's entities and
//! relations around one entity (the graph view), and what the privacy gateway did per day.
//!
//! Invariants:
//! - read-only: blocks are read on their own read-only connection, facts through a read-only
//!   [`FactStore`] (as `opc memory facts` reads them, so the two always agree), and a search goes
//!   through memory's ACL for the agent it is made as (the root by default, which reads every agent's);
//! - the Privacy page shows counts by type and day, never a value: they come from the ledger, which
//!   never stored one;
//! - the graph view is drawn from a bounded answer: the neighbourhood of one entity, nearest edges
//!   first, at most `max` edges (and the count left out), whatever the size of the store.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use opc_memory::embed::EmbedSlot;
use opc_memory::facts::graph::{Graph, GraphQuery};
use opc_memory::facts::{FactStore, FactVersion, View};
use opc_memory::recall::{Mode, Query as RecallQuery};
use serde::Deserialize;
use serde_json::json;

use super::Admin;
use super::config::error;

/// Days the Privacy page covers.
const PRIVACY_DAYS: i64 = 30;
/// Most hits a search returns.
const MAX_HITS: usize = 50;

fn not_running() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the gateway is not running in this process",
    )
}

/// The agent a memory page asks for (`?agent=`, the org's root when absent or empty) and whether
/// it records new facts (`memory.archival`); the 404's message when the running org has no such
/// agent.
fn asked_agent(
    loaded: &opc_hierarchy::Loaded,
    asked: Option<String>,
) -> Result<(String, bool), String> {
    let agent = asked
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| loaded.org.root().to_string());
    match loaded.config.agents.get(&agent) {
        Some(config) => Ok((agent, config.memory.archival)),
        None => Err(format!("there is no agent `{agent}` in the running org")),
    }
}

/// `GET /admin/api/memory/blocks`: every stored block (namespace, label, value, limit, version).
pub async fn blocks(State(admin): State<Arc<Admin>>) -> Response {
    let Some(live) = admin.live.get() else {
        return not_running();
    };
    let loaded = live.get();
    let database = crate::setup::database_choice(&loaded);
    let read = tokio::task::spawn_blocking(move || match database? {
        crate::setup::Database::Postgres { url, .. } => {
            let conn = opc_pg::Blocking::connect(&url, "admin").map_err(|e| e.to_string())?;
            opc_memory::blocks::read_all_postgres(&conn).map_err(|e| e.to_string())
        }
        crate::setup::Database::Sqlite(database) => {
            if !database.exists() {
                return Ok(Vec::new());
            }
            let conn = rusqlite::Connection::open_with_flags(
                &database,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .map_err(|e| e.to_string())?;
            let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
            opc_memory::blocks::read_all(&conn).map_err(|e| e.to_string())
        }
    })
    .await;
    match read {
        Ok(Ok(blocks)) => {
            let list: Vec<_> = blocks
                .into_iter()
                .map(|b| {
                    json!({
                        "namespace": b.namespace,
                        "label": b.label,
                        "description": b.description,
                        "chars": b.value.chars().count(),
                        "value": b.value,
                        "limit": b.limit,
                        "read_only": b.read_only,
                        "version": b.version,
                    })
                })
                .collect();
            Json(json!({"blocks": list})).into_response()
        }
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot read the memory blocks: {e}"),
        ),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

/// A search of recall memory.
#[derive(Deserialize)]
pub struct Search {
    q: String,
    /// Search as this agent (what it may read); the root by default.
    agent: Option<String>,
    limit: Option<usize>,
}

/// `GET /admin/api/memory/search?q=…&agent=…&limit=…`: recall memory's hybrid search (keywords and,
/// once the model has loaded, meaning), with each hit's provenance.
pub async fn search(
    State(admin): State<Arc<Admin>>,
    query: Result<Query<Search>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (Some(live), Some(recall)) = (admin.live.get(), admin.recall.get()) else {
        return not_running();
    };
    let Ok(Query(search)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the search as ?q=<words>, optionally &agent=<id> and &limit=<n>",
        );
    };
    if search.q.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "the search `q` is empty");
    }
    let loaded = live.get();
    let agent = search
        .agent
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| loaded.org.root().to_string());
    if !loaded.org.contains(&agent) {
        return error(
            StatusCode::NOT_FOUND,
            &format!("there is no agent `{agent}` in the running org"),
        );
    }
    let namespaces =
        opc_memory::acl::Acl::new(&loaded.config, Arc::new(loaded.org.clone())).readable(&agent);
    let limit = search.limit.unwrap_or(10).clamp(1, MAX_HITS);
    let recall = recall.clone();
    let text = search.q;
    let found = tokio::task::spawn_blocking(move || {
        recall.search(&RecallQuery::new(text, namespaces, Mode::Hybrid, limit))
    })
    .await;
    match found {
        Ok(Ok(hits)) => Json(json!({"agent": agent, "hits": hits})).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the search did not finish",
        ),
    }
}

/// Which facts the Memory page lists: at most one of `at`, `valid_at` and `history`.
#[derive(Deserialize)]
pub struct FactsQuery {
    /// Whose facts; the root by default.
    agent: Option<String>,
    /// Believed at this time (RFC 3339, or a date: its start, UTC).
    at: Option<String>,
    /// True in the world at this time.
    valid_at: Option<String>,
    /// Every version.
    #[serde(default)]
    history: bool,
}

/// Run `read` on a read-only fact store of the running database, off the async threads; `Ok(None)`
/// when the database does not exist yet (nothing was ever stored).
async fn read_facts<T: Send + 'static>(
    admin: &Admin,
    read: impl FnOnce(&FactStore) -> Result<T, opc_memory::facts::FactError> + Send + 'static,
) -> Result<Option<T>, Response> {
    let Some(live) = admin.live.get() else {
        return Err(not_running());
    };
    let loaded = live.get();
    let database = crate::setup::database_choice(&loaded);
    let done = tokio::task::spawn_blocking(move || {
        let store = match database.map_err(opc_memory::facts::FactError::Invalid)? {
            crate::setup::Database::Postgres { url, .. } => {
                let conn = opc_pg::Blocking::connect(&url, "admin")?;
                FactStore::open_postgres_read_only(conn, EmbedSlot::new())?
            }
            crate::setup::Database::Sqlite(database) => {
                if !database.exists() {
                    return Ok(None);
                }
                FactStore::open_read_only(&database, EmbedSlot::new())?
            }
        };
        read(&store).map(Some)
    })
    .await;
    match done {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(e)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot read the facts: {e}"),
        )),
        Err(_) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the read did not finish",
        )),
    }
}

/// `GET /admin/api/memory/facts?agent=…[&at=TIME | &valid_at=TIME | &history=true]`: an agent's
/// facts as `opc memory facts` lists them — `{agent, archival, view, time, facts: [...]}`, each fact
/// as in `opc memory facts --format json`. `archival` says whether the agent records new facts
/// (stored ones are listed either way).
pub async fn facts(
    State(admin): State<Arc<Admin>>,
    query: Result<Query<FactsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Some(live) = admin.live.get() else {
        return not_running();
    };
    let Ok(Query(query)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the facts as ?agent=<id>, and at most one of &at=<time>, &valid_at=<time> or &history=true",
        );
    };
    let (agent, archival) = match asked_agent(&live.get(), query.agent.clone()) {
        Ok(found) => found,
        Err(missing) => return error(StatusCode::NOT_FOUND, &missing),
    };
    let time = |name: &str, text: Option<String>| -> Result<Option<i64>, String> {
        match text.filter(|t| !t.trim().is_empty()) {
            None => Ok(None),
            Some(t) => opc_memory::facts::time::parse_time(&t)
                .map(Some)
                .map_err(|e| format!("`{name}`: {e}")),
        }
    };
    let (at, valid_at) = match (time("at", query.at), time("valid_at", query.valid_at)) {
        (Ok(at), Ok(valid_at)) => (at, valid_at),
        (Err(e), _) | (_, Err(e)) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let view = match (query.history, at, valid_at) {
        (false, None, None) => View::Current,
        (false, Some(t), None) => View::BelievedAt(t),
        (false, None, Some(t)) => View::ValidAt(t),
        (true, None, None) => View::History,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "`at`, `valid_at` and `history` are different views: give at most one",
            );
        }
    };
    let (name, time) = match view {
        View::Current => ("current", None),
        View::BelievedAt(t) => ("at", Some(t)),
        View::ValidAt(t) => ("valid_at", Some(t)),
        View::History => ("history", None),
    };
    let namespace = opc_memory::blocks::agent_namespace(&agent);
    match read_facts(&admin, move |store| store.list(&namespace, view)).await {
        Ok(found) => Json(json!({
            "agent": agent,
            "archival": archival,
            "view": name,
            "time": time.map(opc_memory::facts::time::format_time),
            "facts": found.unwrap_or_default().iter().map(FactVersion::to_json).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(response) => response,
    }
}

/// `GET /admin/api/memory/facts/{fact_id}`: every version of one fact, oldest first
/// (`{fact_id, versions: [...]}`), each as in `opc memory facts --format json`.
pub async fn fact_history(
    State(admin): State<Arc<Admin>>,
    id: Result<Path<i64>, axum::extract::rejection::PathRejection>,
) -> Response {
    let Ok(Path(fact_id)) = id else {
        return error(
            StatusCode::BAD_REQUEST,
            "the fact id is a number: /admin/api/memory/facts/<fact_id>",
        );
    };
    match read_facts(&admin, move |store| store.history(fact_id)).await {
        Ok(Some(versions)) if !versions.is_empty() => Json(json!({
            "fact_id": fact_id,
            "versions": versions.iter().map(FactVersion::to_json).collect::<Vec<_>>(),
        }))
        .into_response(),
        Ok(_) => error(
            StatusCode::NOT_FOUND,
            &format!("there is no fact {fact_id}"),
        ),
        Err(response) => response,
    }
}

/// Edges the graph view draws unless asked otherwise: enough for a neighbourhood, few enough that
/// every label stays readable.
const GRAPH_EDGES: usize = 150;
/// Most edges the graph view may ask to draw.
const MAX_GRAPH_EDGES: usize = 1_000;
/// Most edges read to choose what to draw (the most connected entity, the nearest edges, how many
/// are left out): bounds the work of one request whatever the size of the store.
const GRAPH_SCAN: usize = 20_000;
/// Entities the view's search offers (the most connected first).
const GRAPH_ENTITIES: usize = 100;

/// What the graph view draws.
#[derive(Deserialize)]
pub struct GraphParams {
    /// Whose graph; the root by default.
    agent: Option<String>,
    /// The entity (a name or alias) to draw around; the most connected one when absent.
    entity: Option<String>,
    /// Hops from the entity: 1 to 3 (1 by default). Text, so a bad value gets its own message.
    depth: Option<String>,
    /// Believed at this time (RFC 3339, or a date: its start, UTC); now when absent.
    at: Option<String>,
    /// Most edges drawn (1 to [`MAX_GRAPH_EDGES`]; [`GRAPH_EDGES`] by default).
    max: Option<String>,
}

/// What [`neighbourhood`] found: the graph to draw and how it was chosen.
struct Drawn {
    /// At most `max` edges, nearest the root first, and the nodes they join.
    graph: Graph,
    /// Edges of the neighbourhood not drawn.
    left_out: usize,
    /// Whether `left_out` is exact (false: the scan itself was cut, so at least that many).
    exact: bool,
    /// `entity` (asked for), `most_connected` (none asked: the best connected one) or `empty`.
    start: &'static str,
    /// The most connected entities `(id, name, edges)`, when none was asked for (for the search).
    entities: Vec<(i64, String, usize)>,
}

/// `GET /admin/api/memory/graph?agent=…&entity=…&depth=1..3&at=TIME&max=N`: the agent's entities and
/// relations within `depth` hops of `entity` (by name or alias; the most connected entity when none
/// is given), as believed now or at `at` — `opc memory graph --format json`'s object
/// (`nodes`, `edges`, `truncated`, `root`) plus `agent`, `archival`, `depth`, `at`, `max`, `start`,
/// `left_out` (edges of the neighbourhood not drawn; `left_out_exact` false when the count is a
/// floor) and, when no entity was given, `entities` (the most connected, for the search). The
/// namespace is the agent's own, as the facts page reads it. An unknown entity is an empty graph
/// with `root` null, not an error.
pub async fn graph(
    State(admin): State<Arc<Admin>>,
    query: Result<Query<GraphParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Some(live) = admin.live.get() else {
        return not_running();
    };
    let Ok(Query(query)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "give the graph as ?agent=<id>&entity=<name>&depth=<1..3>&at=<time>&max=<edges>",
        );
    };
    let (agent, archival) = match asked_agent(&live.get(), query.agent.clone()) {
        Ok(found) => found,
        Err(missing) => return error(StatusCode::NOT_FOUND, &missing),
    };
    let depth = match query
        .depth
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        None => 1,
        Some(d) => match d.parse::<u8>() {
            Ok(n @ 1..=3) => n,
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("`depth` is 1, 2 or 3 (hops from the entity), not `{d}`"),
                );
            }
        },
    };
    let max = match query
        .max
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        None => GRAPH_EDGES,
        Some(m) => match m.parse::<usize>() {
            Ok(n) if (1..=MAX_GRAPH_EDGES).contains(&n) => n,
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("`max` is a number of edges from 1 to {MAX_GRAPH_EDGES}, not `{m}`"),
                );
            }
        },
    };
    let at = match query.at.filter(|t| !t.trim().is_empty()) {
        None => None,
        Some(t) => match opc_memory::facts::time::parse_time(&t) {
            Ok(t) => Some(t),
            Err(e) => return error(StatusCode::BAD_REQUEST, &format!("`at`: {e}")),
        },
    };
    let view = at.map_or(View::Current, View::BelievedAt);
    let entity = query
        .entity
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty());
    let namespaces = vec![opc_memory::blocks::agent_namespace(&agent)];
    let asked = entity.clone();
    let read = read_facts(&admin, move |store| {
        neighbourhood(store, namespaces, entity, depth, view, max)
    })
    .await;
    let drawn = match read {
        Ok(Some(drawn)) => drawn,
        // No database yet: nothing was ever stored.
        Ok(None) => Drawn {
            graph: Graph::default(),
            left_out: 0,
            exact: true,
            start: if asked.is_some() { "entity" } else { "empty" },
            entities: Vec::new(),
        },
        Err(response) => return response,
    };
    let mut body = drawn.graph.to_json();
    if let Some(fields) = body.as_object_mut() {
        fields.insert("agent".into(), json!(agent));
        fields.insert("archival".into(), json!(archival));
        fields.insert("entity".into(), json!(asked));
        fields.insert("depth".into(), json!(depth));
        fields.insert(
            "at".into(),
            json!(at.map(opc_memory::facts::time::format_time)),
        );
        fields.insert("max".into(), json!(max));
        fields.insert("start".into(), json!(drawn.start));
        fields.insert("left_out".into(), json!(drawn.left_out));
        fields.insert("left_out_exact".into(), json!(drawn.exact));
        if drawn.start != "entity" {
            fields.insert(
                "entities".into(),
                drawn
                    .entities
                    .iter()
                    .map(|(id, name, edges)| json!({"id": id, "name": name, "edges": edges}))
                    .collect(),
            );
        }
    }
    Json(body).into_response()
}

/// The neighbourhood the graph view draws: around `entity`, or around the most connected entity of
/// the first [`GRAPH_SCAN`] edges when none is given; cut to `max` edges nearest the root.
fn neighbourhood(
    store: &FactStore,
    namespaces: Vec<String>,
    entity: Option<String>,
    depth: u8,
    view: View,
    max: usize,
) -> Result<Drawn, opc_memory::facts::FactError> {
    let read = |entity: Option<String>, depth: u8| {
        store.graph(&GraphQuery {
            namespaces: namespaces.clone(),
            entity,
            depth,
            view,
            max_edges: GRAPH_SCAN,
        })
    };
    let (entity, start, entities) = match entity {
        Some(entity) => (entity, "entity", Vec::new()),
        None => {
            let ranked = most_connected(&read(None, 1)?);
            match ranked.first() {
                Some((_, name, _)) => (
                    name.clone(),
                    "most_connected",
                    ranked.into_iter().take(GRAPH_ENTITIES).collect(),
                ),
                None => {
                    return Ok(Drawn {
                        graph: Graph::default(),
                        left_out: 0,
                        exact: true,
                        start: "empty",
                        entities: Vec::new(),
                    });
                }
            }
        }
    };
    let found = read(Some(entity), depth)?;
    let exact = !found.truncated;
    let (graph, left_out) = nearest(found, max);
    Ok(Drawn {
        graph,
        left_out,
        exact,
        start,
        entities,
    })
}

/// The graph's entities by the number of edges touching them, most first (ties by name, then id,
/// so the choice is stable): `(id, name, edges)`.
fn most_connected(graph: &Graph) -> Vec<(i64, String, usize)> {
    let mut degree: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for edge in &graph.edges {
        *degree.entry(edge.from).or_default() += 1;
        if edge.to != edge.from {
            *degree.entry(edge.to).or_default() += 1;
        }
    }
    let mut ranked: Vec<(i64, String, usize)> = graph
        .nodes
        .iter()
        .filter_map(|n| degree.get(&n.id).map(|d| (n.id, n.name.clone(), *d)))
        .collect();
    ranked.sort_by(|a, b| {
        b.2.cmp(&a.2)
            .then_with(|| a.1.cmp(&b.1))
            .then(a.0.cmp(&b.0))
    });
    ranked
}

/// `graph` cut to its `max` edges nearest the root (by hops, undirected; in the graph's order
/// within a hop), with the nodes they join (and the root): a drawn neighbourhood is always
/// connected, because an edge at `n` hops is drawn only after the one that reaches it. Returns the
/// cut graph and how many edges were left out.
fn nearest(graph: Graph, max: usize) -> (Graph, usize) {
    let Graph {
        nodes,
        edges,
        truncated,
        root,
    } = graph;
    let mut hops: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    if let Some(root) = root {
        let mut next: std::collections::HashMap<i64, Vec<i64>> = std::collections::HashMap::new();
        for e in &edges {
            next.entry(e.from).or_default().push(e.to);
            next.entry(e.to).or_default().push(e.from);
        }
        hops.insert(root, 0);
        let mut queue = std::collections::VecDeque::from([root]);
        while let Some(id) = queue.pop_front() {
            let here = hops.get(&id).copied().unwrap_or(0);
            for &other in next.get(&id).map(Vec::as_slice).unwrap_or_default() {
                if let std::collections::hash_map::Entry::Vacant(slot) = hops.entry(other) {
                    slot.insert(here + 1);
                    queue.push_back(other);
                }
            }
        }
    }
    let rank = |e: &opc_memory::facts::graph::GraphEdge| {
        let at = |id: i64| hops.get(&id).copied().unwrap_or(usize::MAX);
        at(e.from).min(at(e.to))
    };
    let mut edges = edges;
    // Stable: the graph's own order within a hop.
    edges.sort_by_key(rank);
    let left_out = edges.len().saturating_sub(max);
    edges.truncate(max);
    let kept: std::collections::HashSet<i64> = edges
        .iter()
        .flat_map(|e| [e.from, e.to])
        .chain(root)
        .collect();
    let nodes = nodes.into_iter().filter(|n| kept.contains(&n.id)).collect();
    (
        Graph {
            nodes,
            edges,
            truncated: truncated || left_out > 0,
            root,
        },
        left_out,
    )
}

/// `GET /admin/api/privacy`: whether the privacy gateway is on and in which mode, where its NER model
/// stands (`ner`: `{"state": "off" | "pattern_only" | "loading" | "ready" | "failed", "reason"?}`, plus
/// `requireNer` and `nerWait` in seconds), and what it did per day over the last 30 days (counts by
/// type, calls routed, calls blocked).
pub async fn privacy(State(admin): State<Arc<Admin>>) -> Response {
    let (Some(live), Some(gateway)) = (admin.live.get(), admin.gateway.get()) else {
        return not_running();
    };
    let loaded = live.get();
    let settings = &loaded.config.framework.privacy;
    let engine = gateway.engine().clone();
    let ner = opc_agents::llm::privacy::readiness(&loaded.config, &engine.ner_slot());
    let since = opc_agents::store::now_ms() - PRIVACY_DAYS * 86_400_000;
    match tokio::spawn(async move { engine.store().privacy_by_day(since).await }).await {
        Ok(Ok(days)) => Json(json!({
            "enabled": settings.enabled,
            "mode": format!("{:?}", settings.mode).to_lowercase(),
            "ner": ner,
            "requireNer": settings.require_ner,
            "nerWait": settings.ner_wait.as_secs_f64(),
            "days": days,
        }))
        .into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use opc_memory::facts::graph::{GraphEdge, GraphNode};

    fn node(id: i64) -> GraphNode {
        GraphNode {
            id,
            name: format!("e{id}"),
            aliases: Vec::new(),
            namespace: "agent/ceo".into(),
        }
    }

    fn edge(fact_id: i64, from: i64, to: i64) -> GraphEdge {
        GraphEdge {
            from,
            to,
            predicate: "knows".into(),
            fact_id,
            version_id: fact_id,
            text: String::new(),
            valid_from: None,
            valid_to: None,
            recorded_at: 0,
            invalidated_at: None,
        }
    }

    /// A chain 1 - 2 - 3 - 4 with a far edge listed first, and a star around 1.
    fn sample() -> Graph {
        Graph {
            nodes: (1..=6).map(node).collect(),
            edges: vec![
                edge(30, 3, 4),
                edge(20, 3, 2),
                edge(10, 1, 2),
                edge(11, 5, 1),
                edge(12, 1, 6),
            ],
            truncated: false,
            root: Some(1),
        }
    }

    #[test]
    fn a_cut_keeps_the_nearest_edges_and_only_their_nodes() {
        let (cut, left_out) = nearest(sample(), 3);
        let ids: Vec<i64> = cut.edges.iter().map(|e| e.fact_id).collect();
        assert_eq!(ids, [10, 11, 12], "hop 0 first, in the graph's order");
        assert_eq!(left_out, 2);
        assert!(cut.truncated);
        let nodes: Vec<i64> = cut.nodes.iter().map(|n| n.id).collect();
        assert_eq!(nodes, [1, 2, 5, 6]);
        let (cut, _) = nearest(sample(), 4);
        assert_eq!(cut.edges.last().unwrap().fact_id, 20, "then hop 1");
        let (all, left_out) = nearest(sample(), 10);
        assert_eq!((all.edges.len(), left_out, all.truncated), (5, 0, false));
    }

    #[test]
    fn the_root_alone_is_kept_and_a_rootless_graph_keeps_its_order() {
        let (cut, left_out) = nearest(sample(), 0);
        assert_eq!((cut.edges.len(), left_out), (0, 5));
        assert_eq!(cut.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), [1]);
        let mut rootless = sample();
        rootless.root = None;
        let (cut, _) = nearest(rootless, 2);
        assert_eq!(
            cut.edges.iter().map(|e| e.fact_id).collect::<Vec<_>>(),
            [30, 20]
        );
    }

    #[test]
    fn the_most_connected_entity_comes_first_ties_by_name() {
        let ranked = most_connected(&sample());
        assert_eq!(ranked[0], (1, "e1".to_string(), 3));
        assert_eq!(ranked[1], (2, "e2".to_string(), 2));
        assert_eq!(ranked[2], (3, "e3".to_string(), 2));
        assert_eq!(ranked.len(), 6);
    }
}
