//! # Graph memory on both backends (issue 39): SQLite and PostgreSQL answer alike
//!
//! Role: graph memory's queries are one SQL text for both backends (`opc_memory::facts::graph`,
//! placeholders aside); this runs the important behaviours against SQLite (a temporary file) and
//! PostgreSQL (a fresh database), with the backend's name in every assertion message: an edge
//! appears with its fact and closes with it (UPDATE, INVALIDATE), `BelievedAt` before and after,
//! objects through aliases, namespaces isolated, depth 1/2/3, cycles, truncation, the whole graph,
//! entities named in a text, neighbouring facts, and identical renderings. Then what only several
//! nodes can do: two handles naming the same new object at once end with one entity.
//! The SQLite-only details (validation, escaping) are memory's `facts/graph_tests.rs`.
//!
//! Invariants: each PostgreSQL test has a database of its own (`fresh_database`: skipped with one
//! line when no server is here, a failure under CI); nothing waits on time.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use opc_memory::embed::EmbedSlot;
use opc_memory::facts::graph::{Graph, GraphQuery};
use opc_memory::facts::{FactStore, Op, Provenance, Source, View};

const NS: &str = "agent/ceo";

/// Where a test's facts live: a SQLite file, or a PostgreSQL database.
struct Place {
    name: &'static str,
    dir: tempfile::TempDir,
    url: Option<String>,
}

impl Place {
    fn open(&self) -> FactStore {
        match &self.url {
            None => FactStore::open(&self.dir.path().join("db.sqlite"), EmbedSlot::new()),
            Some(url) => FactStore::open_postgres(
                opc_pg::Blocking::connect(url, "pg-graph-test").unwrap(),
                EmbedSlot::new(),
            ),
        }
        .unwrap_or_else(|e| panic!("{}: open: {e}", self.name))
    }
}

/// SQLite, and PostgreSQL when there is a server.
fn places(test: &str) -> Vec<Place> {
    let mut out = vec![Place {
        name: "sqlite",
        dir: tempfile::tempdir().unwrap(),
        url: None,
    }];
    let url = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(opc_tests::postgres::fresh_database(test));
    if let Some(url) = url {
        out.push(Place {
            name: "postgres",
            dir: tempfile::tempdir().unwrap(),
            url: Some(url),
        });
    }
    out
}

fn who() -> Provenance {
    Provenance {
        agent: "ceo".into(),
        source: Source::Agent,
        ..Provenance::default()
    }
}

fn rel(text: &str, subject: &str, predicate: &str, object: &str) -> Op {
    Op::Add {
        text: text.into(),
        subject: Some(subject.into()),
        predicate: Some(predicate.into()),
        object: Some(object.into()),
        valid_from: None,
        valid_to: None,
    }
}

fn q(entity: Option<&str>, depth: u8, view: View) -> GraphQuery {
    GraphQuery {
        namespaces: vec![NS.into()],
        entity: entity.map(Into::into),
        depth,
        view,
        max_edges: 100,
    }
}

/// The edges as `from -predicate-> to` by name, sorted.
fn shape(g: &Graph) -> Vec<String> {
    let name = |id| {
        g.nodes
            .iter()
            .find(|n| n.id == id)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| format!("#{id}"))
    };
    let mut out: Vec<String> = g
        .edges
        .iter()
        .map(|e| format!("{} -{}-> {}", name(e.from), e.predicate, name(e.to)))
        .collect();
    out.sort();
    out
}

fn chain(s: &FactStore, ns: &str, names: &[&str], at: i64) {
    let ops: Vec<Op> = names
        .windows(2)
        .map(|w| rel(&format!("{} feeds {}", w[0], w[1]), w[0], "feeds", w[1]))
        .collect();
    s.apply(ns, &ops, &who(), at).unwrap();
}

#[test]
fn an_edge_lives_and_dies_with_its_version() {
    for place in places("pg_graph_lifecycle") {
        let (s, at) = (place.open(), place.name);
        let v1 = s
            .apply(
                NS,
                &[rel(
                    "Marco Diaz leads the Orion project",
                    "Marco Diaz",
                    "leads",
                    "Orion project",
                )],
                &who(),
                1000,
            )
            .unwrap()
            .added[0];
        let graph = |view| shape(&s.graph(&q(Some("Marco Diaz"), 1, view)).unwrap());
        assert_eq!(
            graph(View::Current),
            ["Marco Diaz -leads-> Orion project"],
            "{at}"
        );
        let v2 = s
            .apply(
                NS,
                &[Op::Update {
                    target: v1,
                    text: "Marco Diaz advises the Orion project".into(),
                    subject: None,
                    predicate: Some("advises".into()),
                    object: Some("Orion project".into()),
                    valid_from: None,
                    valid_to: None,
                    reason: None,
                }],
                &who(),
                2000,
            )
            .unwrap()
            .updated[0]
            .1;
        assert_eq!(
            graph(View::Current),
            ["Marco Diaz -advises-> Orion project"],
            "{at}"
        );
        assert_eq!(
            graph(View::BelievedAt(1500)),
            ["Marco Diaz -leads-> Orion project"],
            "{at}"
        );
        assert!(graph(View::BelievedAt(999)).is_empty(), "{at}");
        // An UPDATE without a relation keeps it.
        let v3 = s
            .apply(
                NS,
                &[Op::Update {
                    target: v2,
                    text: "Marco Diaz advises the Orion project, part time".into(),
                    subject: None,
                    predicate: None,
                    object: None,
                    valid_from: None,
                    valid_to: None,
                    reason: None,
                }],
                &who(),
                3000,
            )
            .unwrap()
            .updated[0]
            .1;
        let g = s.graph(&q(Some("Marco Diaz"), 1, View::Current)).unwrap();
        assert_eq!(g.edges.len(), 1, "{at}");
        assert_eq!(g.edges[0].version_id, v3, "{at}");
        s.apply(
            NS,
            &[Op::Invalidate {
                target: v3,
                reason: Some("left".into()),
                valid_to: None,
            }],
            &who(),
            4000,
        )
        .unwrap();
        assert!(graph(View::Current).is_empty(), "{at}");
        assert!(graph(View::BelievedAt(4500)).is_empty(), "{at}");
        assert_eq!(
            graph(View::BelievedAt(3500)),
            ["Marco Diaz -advises-> Orion project"],
            "{at}"
        );
        let history = s.list(NS, View::History).unwrap();
        assert!(
            history
                .iter()
                .any(|v| v.predicate.as_deref() == Some("leads")),
            "{at}: the version keeps its relation"
        );
    }
}

#[test]
fn queries_answer_alike() {
    let mut renderings = Vec::new();
    for place in places("pg_graph_queries") {
        let (s, at) = (place.open(), place.name);
        chain(&s, NS, &["A1", "B2", "C3", "D4", "E5"], 10);
        chain(&s, NS, &["Xa", "Yb", "Zc", "Xa"], 11);
        chain(&s, "agent/other", &["A1", "Secret"], 12);
        s.apply(
            NS,
            &[rel(
                "Ana tests the Orion project",
                "Ana",
                "tests",
                "Orion project",
            )],
            &who(),
            13,
        )
        .unwrap();
        s.alias(NS, "Orion project", "Orion", 14).unwrap();
        s.apply(
            NS,
            &[rel("Bo funds Orion", "Bo", "funds", "Orion")],
            &who(),
            15,
        )
        .unwrap();
        let edges = |e: &str, d| s.graph(&q(Some(e), d, View::Current)).unwrap().edges.len();
        assert_eq!(
            [edges("A1", 1), edges("A1", 2), edges("A1", 3)],
            [1, 2, 3],
            "{at}"
        );
        assert_eq!(
            shape(&s.graph(&q(Some("C3"), 1, View::Current)).unwrap()),
            ["B2 -feeds-> C3", "C3 -feeds-> D4"],
            "{at}"
        );
        assert_eq!(edges("Xa", 3), 3, "{at}: the cycle once");
        assert_eq!(
            shape(&s.graph(&q(Some("orion"), 1, View::Current)).unwrap()),
            ["Ana -tests-> Orion project", "Bo -funds-> Orion project"],
            "{at}: the object through its alias"
        );
        let mut capped = q(Some("A1"), 3, View::Current);
        capped.max_edges = 2;
        let g = s.graph(&capped).unwrap();
        assert!(g.truncated && g.edges.len() == 2, "{at}");
        let whole = s.graph(&q(None, 1, View::Current)).unwrap();
        assert_eq!(whole.edges.len(), 9, "{at}");
        assert!(
            !shape(&whole).iter().any(|e| e.contains("Secret")),
            "{at}: another namespace's edge"
        );
        let found = s
            .entities_in(
                &[NS.into()],
                "Does A1 still feed b2? Ask about the Orion launch",
            )
            .unwrap();
        let names: Vec<&str> = found.iter().map(|f| f.1.as_str()).collect();
        assert_eq!(names, ["A1", "B2", "Orion project"], "{at}");
        let facts = s
            .neighbour_facts(&[NS.into()], &[found[0].0], View::Current, 10)
            .unwrap();
        let texts: HashSet<&str> = facts.iter().map(|v| v.text.as_str()).collect();
        assert_eq!(
            texts,
            HashSet::from(["A1 feeds B2", "B2 feeds C3"]),
            "{at}: A1's facts and its neighbour B2's"
        );
        let g = s.graph(&q(Some("A1"), 3, View::Current)).unwrap();
        // Ids differ between backends; the renderings with names only do not.
        renderings.push((at, shape(&g), g.to_text().lines().count()));
    }
    if let [(a, sa, ta), (b, sb, tb)] = renderings.as_slice() {
        assert_eq!(sa, sb, "{a} vs {b}");
        assert_eq!(ta, tb, "{a} vs {b}");
    }
}

/// Two nodes naming the same new object at once end with one entity (the insert is `ON CONFLICT
/// DO NOTHING` and read back), so the graph has one node for it.
#[test]
fn two_nodes_naming_a_new_object_share_one_entity() {
    for place in places("pg_graph_race") {
        if place.url.is_none() {
            continue;
        }
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = ["Ana", "Bo"]
            .into_iter()
            .map(|who_| {
                let s = place.open();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    s.apply(
                        NS,
                        &[rel(
                            &format!("{who_} works on Kestrel"),
                            who_,
                            "works on",
                            "Kestrel",
                        )],
                        &who(),
                        10,
                    )
                    .unwrap();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let g = place
            .open()
            .graph(&q(Some("kestrel"), 1, View::Current))
            .unwrap();
        assert_eq!(g.edges.len(), 2, "{}", place.name);
        assert_eq!(g.nodes.len(), 3, "{}: one Kestrel", place.name);
    }
}
