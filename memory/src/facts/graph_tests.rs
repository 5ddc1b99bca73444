//! Graph memory's behaviour on SQLite (PostgreSQL answers alike: `tests/tests/pg_graph.rs`): an
//! edge appears with its fact and closes with it (UPDATE, INVALIDATE), `BelievedAt` before and
//! after a change, objects resolved through aliases, namespaces isolated, depth 1/2/3, truncation,
//! cycles, the whole graph, entities named in a text, neighbouring facts, the four renderings
//! (names with `"`, `\` and newlines), and the validation of relations.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use serde_json::json;

use super::graph::{Graph, GraphQuery, grams};
use super::*;

const NS: &str = "agent/ceo";

fn store() -> (tempfile::TempDir, FactStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = FactStore::open(&dir.path().join("db.sqlite"), EmbedSlot::new()).unwrap();
    (dir, s)
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

/// Add a chain of relations `names[0] -r-> names[1] -r-> …` at `at`.
fn chain(s: &FactStore, ns: &str, names: &[&str], at: i64) {
    let ops: Vec<Op> = names
        .windows(2)
        .map(|w| rel(&format!("{} feeds {}", w[0], w[1]), w[0], "feeds", w[1]))
        .collect();
    s.apply(ns, &ops, &who(), at).unwrap();
}

#[test]
fn an_edge_lives_and_dies_with_its_version() {
    let (_dir, s) = store();
    let added = s
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
        .unwrap();
    let v1 = added.added[0];
    let g = s.graph(&q(Some("marco diaz"), 1, View::Current)).unwrap();
    assert_eq!(shape(&g), ["Marco Diaz -leads-> Orion project"]);
    assert_eq!(g.edges[0].version_id, v1);
    assert!(!g.truncated);
    let marco = g.root.unwrap();
    assert_eq!(
        g.nodes.iter().find(|n| n.id == marco).unwrap().name,
        "Marco Diaz"
    );
    // The version says its relation.
    let listed = s.list(NS, View::Current).unwrap();
    assert_eq!(listed[0].predicate.as_deref(), Some("leads"));
    assert_eq!(listed[0].object.as_deref(), Some("Orion project"));

    // An UPDATE that names no relation keeps it (on the new version); the old edge is closed.
    let updated = s
        .apply(
            NS,
            &[Op::Update {
                target: v1,
                text: "Marco Diaz leads the Orion project since May".into(),
                subject: None,
                predicate: None,
                object: None,
                valid_from: None,
                valid_to: None,
                reason: None,
            }],
            &who(),
            2000,
        )
        .unwrap();
    let v2 = updated.updated[0].1;
    let g = s.graph(&q(Some("Marco Diaz"), 1, View::Current)).unwrap();
    assert_eq!(shape(&g), ["Marco Diaz -leads-> Orion project"]);
    assert_eq!(g.edges[0].version_id, v2);

    // An UPDATE with a new relation replaces the edge.
    let updated = s
        .apply(
            NS,
            &[Op::Update {
                target: v2,
                text: "Marco Diaz advises the Orion project".into(),
                subject: None,
                predicate: Some("advises".into()),
                object: Some("the Orion project".into()),
                valid_from: None,
                valid_to: None,
                reason: Some("stepped down".into()),
            }],
            &who(),
            3000,
        )
        .unwrap();
    let v3 = updated.updated[0].1;
    let g = s.graph(&q(Some("Marco Diaz"), 1, View::Current)).unwrap();
    assert_eq!(shape(&g), ["Marco Diaz -advises-> Orion project"]);

    // As believed before and after each change.
    let at = |t| {
        shape(
            &s.graph(&q(Some("Marco Diaz"), 1, View::BelievedAt(t)))
                .unwrap(),
        )
    };
    assert!(at(999).is_empty(), "nothing was believed before the fact");
    assert_eq!(at(1500), ["Marco Diaz -leads-> Orion project"]);
    assert_eq!(at(2500), ["Marco Diaz -leads-> Orion project"]);
    assert_eq!(at(3500), ["Marco Diaz -advises-> Orion project"]);
    let g = s
        .graph(&q(Some("Marco Diaz"), 1, View::BelievedAt(1500)))
        .unwrap();
    assert_eq!(g.edges[0].version_id, v1);
    assert_eq!(g.edges[0].invalidated_at, Some(2000));

    // INVALIDATE closes the edge; the past still shows it.
    s.apply(
        NS,
        &[Op::Invalidate {
            target: v3,
            reason: Some("left the company".into()),
            valid_to: None,
        }],
        &who(),
        4000,
    )
    .unwrap();
    let g = s.graph(&q(Some("Marco Diaz"), 1, View::Current)).unwrap();
    assert!(g.edges.is_empty());
    assert_eq!(g.root, Some(marco), "the entity is still known");
    assert_eq!(at(3500), ["Marco Diaz -advises-> Orion project"]);
    assert!(at(4500).is_empty(), "the closing record is never believed");
}

#[test]
fn an_update_naming_a_new_subject_without_a_relation_drops_it() {
    let (_dir, s) = store();
    let v = s
        .apply(
            NS,
            &[rel("Ana owns billing", "Ana", "owns", "billing")],
            &who(),
            10,
        )
        .unwrap()
        .added[0];
    s.apply(
        NS,
        &[Op::Update {
            target: v,
            text: "Billing moved to the new platform".into(),
            subject: Some("billing".into()),
            predicate: None,
            object: None,
            valid_from: None,
            valid_to: None,
            reason: None,
        }],
        &who(),
        20,
    )
    .unwrap();
    assert!(
        s.graph(&q(None, 1, View::Current))
            .unwrap()
            .edges
            .is_empty()
    );
    let current = s.list(NS, View::Current).unwrap();
    assert_eq!(current[0].predicate, None);

    // An object with no subject to keep is refused, and nothing is written.
    let plain = s
        .apply(
            NS,
            &[Op::Add {
                text: "Launch day is fixed".into(),
                subject: None,
                predicate: None,
                object: None,
                valid_from: None,
                valid_to: None,
            }],
            &who(),
            30,
        )
        .unwrap()
        .added[0];
    let err = s
        .apply(
            NS,
            &[Op::Update {
                target: plain,
                text: "Launch day depends on QA".into(),
                subject: None,
                predicate: Some("depends on".into()),
                object: Some("QA".into()),
                valid_from: None,
                valid_to: None,
                reason: None,
            }],
            &who(),
            40,
        )
        .unwrap_err();
    assert!(err.to_string().contains("facts[0].subject"), "{err}");
    assert_eq!(s.list(NS, View::Current).unwrap().len(), 2);
}

#[test]
fn objects_resolve_through_aliases() {
    let (_dir, s) = store();
    s.apply(
        NS,
        &[rel(
            "Marco Diaz leads the Orion project",
            "Marco Diaz",
            "leads",
            "Orion project",
        )],
        &who(),
        10,
    )
    .unwrap();
    s.alias(NS, "Orion project", "Orion", 11).unwrap();
    s.apply(
        NS,
        &[rel("Ana Ruiz tests Orion", "Ana Ruiz", "tests", "Orion")],
        &who(),
        12,
    )
    .unwrap();
    let g = s.graph(&q(Some("orion"), 1, View::Current)).unwrap();
    assert_eq!(
        shape(&g),
        [
            "Ana Ruiz -tests-> Orion project",
            "Marco Diaz -leads-> Orion project"
        ]
    );
    let orion = g.nodes.iter().find(|n| n.name == "Orion project").unwrap();
    assert_eq!(g.root, Some(orion.id));
    assert_eq!(orion.aliases, ["Orion"]);
    assert_eq!(orion.namespace, NS);
}

#[test]
fn namespaces_isolate() {
    let (_dir, s) = store();
    chain(&s, "agent/a", &["Alpha", "Beta"], 10);
    chain(&s, "agent/b", &["Alpha", "Gamma"], 10);
    let mut query = q(Some("Alpha"), 2, View::Current);
    query.namespaces = vec!["agent/a".into()];
    assert_eq!(shape(&s.graph(&query).unwrap()), ["Alpha -feeds-> Beta"]);
    query.namespaces = vec!["agent/b".into()];
    assert_eq!(shape(&s.graph(&query).unwrap()), ["Alpha -feeds-> Gamma"]);
    query.namespaces = vec!["agent/b".into(), "agent/a".into()];
    let both = s.graph(&query).unwrap();
    assert_eq!(both.edges.len(), 2);
    let root = both.root.unwrap();
    assert_eq!(
        both.nodes.iter().find(|n| n.id == root).unwrap().namespace,
        "agent/b",
        "the first namespace's entity is the root reported"
    );
    query.namespaces = vec!["agent/c".into()];
    let none = s.graph(&query).unwrap();
    assert!(none.edges.is_empty() && none.root.is_none());
    query.namespaces = Vec::new();
    assert!(s.graph(&query).unwrap().edges.is_empty());
    // Whole graph and entities_in too.
    let mut all = q(None, 1, View::Current);
    all.namespaces = vec!["agent/a".into()];
    assert_eq!(shape(&s.graph(&all).unwrap()), ["Alpha -feeds-> Beta"]);
    let found = s
        .entities_in(&["agent/a".into()], "alpha and gamma and beta")
        .unwrap();
    let names: Vec<&str> = found.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["Alpha", "Beta"]);
}

#[test]
fn depth_walks_both_directions() {
    let (_dir, s) = store();
    chain(&s, NS, &["A1", "B2", "C3", "D4", "E5"], 10);
    let edges = |e: &str, d| s.graph(&q(Some(e), d, View::Current)).unwrap().edges.len();
    assert_eq!(edges("A1", 1), 1);
    assert_eq!(edges("A1", 2), 2);
    assert_eq!(edges("A1", 3), 3);
    // From the middle, both directions.
    assert_eq!(
        shape(&s.graph(&q(Some("C3"), 1, View::Current)).unwrap()),
        ["B2 -feeds-> C3", "C3 -feeds-> D4"]
    );
    assert_eq!(edges("C3", 2), 4);
    assert_eq!(edges("E5", 3), 3);
    // Nearest first.
    let g = s.graph(&q(Some("A1"), 3, View::Current)).unwrap();
    let texts: Vec<&str> = g.edges.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["A1 feeds B2", "B2 feeds C3", "C3 feeds D4"]);
    assert_eq!(g.nodes.len(), 4);
}

#[test]
fn cycles_terminate_and_edges_are_not_repeated() {
    let (_dir, s) = store();
    chain(&s, NS, &["Xa", "Yb", "Zc", "Xa"], 10);
    // A self-loop too.
    s.apply(NS, &[rel("Xa checks Xa", "Xa", "checks", "Xa")], &who(), 11)
        .unwrap();
    for depth in 1..=3 {
        let g = s.graph(&q(Some("Xa"), depth, View::Current)).unwrap();
        let ids: HashSet<i64> = g.edges.iter().map(|e| e.version_id).collect();
        assert_eq!(ids.len(), g.edges.len(), "depth {depth}: an edge repeated");
        assert_eq!(g.nodes.len(), 3);
    }
    assert_eq!(
        s.graph(&q(Some("Xa"), 1, View::Current))
            .unwrap()
            .edges
            .len(),
        3
    );
    assert_eq!(
        s.graph(&q(Some("Xa"), 3, View::Current))
            .unwrap()
            .edges
            .len(),
        4
    );
}

#[test]
fn max_edges_truncates_and_says_so() {
    let (_dir, s) = store();
    let ops: Vec<Op> = (0..10)
        .map(|i| {
            rel(
                &format!("Hub links Leaf{i}"),
                "Hub",
                "links",
                &format!("Leaf{i}"),
            )
        })
        .collect();
    s.apply(NS, &ops, &who(), 10).unwrap();
    let mut query = q(Some("Hub"), 2, View::Current);
    query.max_edges = 4;
    let g = s.graph(&query).unwrap();
    assert_eq!(g.edges.len(), 4);
    assert!(g.truncated);
    assert_eq!(g.nodes.len(), 5, "the hub and the four leaves kept");
    assert!(g.to_text().contains("truncated"));
    query.max_edges = 10;
    let g = s.graph(&query).unwrap();
    assert_eq!(g.edges.len(), 10);
    assert!(!g.truncated);
    let mut all = q(None, 1, View::Current);
    all.max_edges = 3;
    let g = s.graph(&all).unwrap();
    assert!(g.truncated && g.edges.len() == 3 && g.root.is_none());
}

#[test]
fn unknown_entities_and_bad_queries() {
    let (_dir, s) = store();
    chain(&s, NS, &["Known", "Other"], 10);
    let g = s.graph(&q(Some("Nobody"), 2, View::Current)).unwrap();
    assert_eq!(g, Graph::default());
    let g = s.graph(&q(Some("!!!"), 2, View::Current)).unwrap();
    assert_eq!(g, Graph::default());
    for (depth, view, max, says) in [
        (0, View::Current, 10, "depth 0"),
        (4, View::Current, 10, "depth 4"),
        (1, View::Current, 0, "max_edges"),
        (1, View::History, 10, "History"),
    ] {
        let mut query = q(Some("Known"), depth, view);
        query.max_edges = max;
        let err = s.graph(&query).unwrap_err();
        assert!(matches!(err, FactError::Invalid(_)), "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    // ValidAt is a graph of current versions.
    assert_eq!(
        s.graph(&q(Some("Known"), 1, View::ValidAt(10)))
            .unwrap()
            .edges
            .len(),
        1
    );
}

#[test]
fn entities_named_in_a_text_and_their_neighbours_facts() {
    let (_dir, s) = store();
    s.apply(
        NS,
        &[
            rel(
                "Marco Diaz leads the Orion project",
                "Marco Diaz",
                "leads",
                "Orion project",
            ),
            Op::Add {
                text: "The Orion project deadline is 2026-06-30".into(),
                subject: Some("Orion project".into()),
                predicate: None,
                object: None,
                valid_from: None,
                valid_to: None,
            },
            Op::Add {
                text: "The cafeteria closes at 3pm".into(),
                subject: Some("cafeteria".into()),
                predicate: None,
                object: None,
                valid_from: None,
                valid_to: None,
            },
        ],
        &who(),
        10,
    )
    .unwrap();
    let found = s
        .entities_in(
            &[NS.into()],
            "What is Marco Diaz's deadline? The ORION project, I mean.",
        )
        .unwrap();
    let names: Vec<&str> = found.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["Marco Diaz", "Orion project"]);
    assert!(s.entities_in(&[NS.into()], "").unwrap().is_empty());
    assert!(s.entities_in(&[], "Marco Diaz").unwrap().is_empty());

    let marco: Vec<i64> = found.iter().take(1).map(|(id, _)| *id).collect();
    let facts = s
        .neighbour_facts(&[NS.into()], &marco, View::Current, 10)
        .unwrap();
    let texts: HashSet<&str> = facts.iter().map(|v| v.text.as_str()).collect();
    assert_eq!(
        texts,
        HashSet::from([
            "Marco Diaz leads the Orion project",
            "The Orion project deadline is 2026-06-30"
        ]),
        "the deadline is about Marco's neighbour"
    );
    assert_eq!(
        s.neighbour_facts(&[NS.into()], &marco, View::Current, 1)
            .unwrap()
            .len(),
        1
    );
    assert!(
        s.neighbour_facts(&["agent/other".into()], &marco, View::Current, 10)
            .unwrap()
            .is_empty()
    );
    assert!(
        s.neighbour_facts(&[NS.into()], &marco, View::BelievedAt(5), 10)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn grams_are_normalised_and_bounded() {
    let g: Vec<String> = grams("The Orion's launch!")
        .into_iter()
        .map(|(g, _)| g)
        .collect();
    assert!(g.contains(&"orion".to_string()));
    assert!(g.contains(&"orion s launch".to_string()));
    assert!(g.contains(&"orion launch".to_string()) || g.contains(&"orion s launch".to_string()));
    assert!(g.contains(&"launch".to_string()));
    let long = "word ".repeat(10_000);
    assert_eq!(grams(&long).len(), 4, "duplicates collapse");
    let distinct: String = (0..10_000).map(|i| format!("w{i} ")).collect();
    assert!(grams(&distinct).len() <= graph::MAX_WORDS * graph::MAX_GRAM);
}

#[test]
fn renderings_escape_names() {
    let (_dir, s) = store();
    s.apply(
        NS,
        &[rel(
            "Quote \"Q\" Co\nsupplies back\\slash Ltd",
            "Quote \"Q\" Co",
            "supplies",
            "back\\slash Ltd",
        )],
        &who(),
        1_767_225_600_000,
    )
    .unwrap();
    let g = s.graph(&q(Some("quote q co"), 1, View::Current)).unwrap();
    assert_eq!(g.edges.len(), 1);

    let dot = g.to_dot();
    assert!(dot.starts_with("digraph memory {"), "{dot}");
    assert!(
        dot.contains(r#"[label="Quote \"Q\" Co", style=bold]"#),
        "{dot}"
    );
    assert!(dot.contains(r#"[label="back\\slash Ltd"]"#), "{dot}");
    assert!(
        dot.contains(r#"tooltip="Quote \"Q\" Co\nsupplies back\\slash Ltd""#),
        "{dot}"
    );
    assert!(dot.contains("-> n"));

    let cypher = g.to_cypher();
    assert!(
        cypher.contains(r#"SET n.name = "Quote \"Q\" Co""#),
        "{cypher}"
    );
    assert!(cypher.contains(r#"n.name = "back\\slash Ltd""#), "{cypher}");
    assert!(cypher.contains("MERGE (a)-[r:REL {fact_id: "), "{cypher}");
    assert!(cypher.contains(r#"r.predicate = "supplies""#), "{cypher}");
    assert_eq!(cypher.lines().count(), 3, "one statement a line: {cypher}");
    for line in cypher.lines() {
        assert!(line.ends_with(';'), "{line}");
    }

    let text = g.to_text();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("Quote \"Q\" Co —supplies→ back\\slash Ltd  [fact "),
        "{text}"
    );

    let j = g.to_json();
    assert_eq!(j["edges"][0]["predicate"], json!("supplies"));
    assert_eq!(
        j["edges"][0]["text"],
        json!("Quote \"Q\" Co\nsupplies back\\slash Ltd")
    );
    assert_eq!(j["edges"][0]["recorded_at"], json!("2026-01-01T00:00:00Z"));
    assert_eq!(j["edges"][0]["valid_from"], json!(null));
    assert_eq!(j["truncated"], json!(false));
    assert_eq!(j["root"], json!(g.root));
    assert_eq!(j["nodes"].as_array().unwrap().len(), 2);
    assert!(j["nodes"][0]["aliases"].is_array());
    // Round trip: the JSON parses back as the same strings.
    let back: serde_json::Value = serde_json::from_str(&j.to_string()).unwrap();
    assert_eq!(back, j);
    assert_eq!(Graph::default().to_text(), "(no relations)\n");
}

#[test]
fn record_facts_relations_are_validated() {
    let listed = HashSet::from([5]);
    let parse = |v: serde_json::Value, graph| ops::parse_for(&v, &listed, graph);
    let ok = parse(
        json!({"facts":[{"op":"ADD","text":"Marco Diaz leads the Orion project","subject":"Marco Diaz",
                         "predicate":"leads","object":"Orion project"},
                        {"op":"UPDATE","target":5,"text":"Ana tests it","predicate":"tests","object":"Orion"}]}),
        true,
    )
    .unwrap();
    assert!(
        matches!(&ok[0], Op::Add { predicate: Some(p), object: Some(o), .. } if p == "leads" && o == "Orion project")
    );
    assert!(matches!(
        &ok[1],
        Op::Update {
            predicate: Some(_),
            object: Some(_),
            subject: None,
            ..
        }
    ));
    let err = |v, graph| parse(v, graph).unwrap_err().0;
    let off = err(
        json!({"facts":[{"op":"ADD","text":"t","subject":"s","predicate":"p","object":"o"}]}),
        false,
    );
    assert!(
        off.starts_with("facts[0].predicate: graph memory is off"),
        "{off}"
    );
    assert!(
        ops::parse(
            &json!({"facts":[{"op":"ADD","text":"t","object":"o"}]}),
            &listed
        )
        .unwrap_err()
        .0
        .contains("graph memory is off")
    );
    for (input, says) in [
        (
            json!({"facts":[{"op":"ADD","text":"t","subject":"s","predicate":"p"}]}),
            "facts[0].object: required with a predicate",
        ),
        (
            json!({"facts":[{"op":"NOOP"},{"op":"ADD","text":"t","subject":"s","object":"o"}]}),
            "facts[1].predicate: required with an object",
        ),
        (
            json!({"facts":[{"op":"ADD","text":"t","predicate":"p","object":"o"}]}),
            "facts[0].subject: required with an object",
        ),
        (
            json!({"facts":[{"op":"ADD","text":"t","subject":"s","predicate":"p".repeat(61),"object":"o"}]}),
            "facts[0].predicate: 61 characters, at most 60",
        ),
        (
            json!({"facts":[{"op":"ADD","text":"t","subject":"s","predicate":"p","object":"o".repeat(201)}]}),
            "facts[0].object: 201 characters, at most 200",
        ),
        (
            json!({"facts":[{"op":"ADD","text":"t","subject":"s","predicate":7,"object":"o"}]}),
            "facts[0].predicate: expected a string or null",
        ),
        (
            json!({"facts":[{"op":"INVALIDATE","target":5,"predicate":"p","object":"o"}]}),
            "facts[0].predicate: INVALIDATE takes no relation",
        ),
    ] {
        let got = err(input, true);
        assert!(got.starts_with(says), "{got} (expected {says})");
    }
    // Direct ops are checked by the store too.
    let (_dir, s) = store();
    let e = s
        .apply(
            NS,
            &[Op::Add {
                text: "t".into(),
                subject: Some("s".into()),
                predicate: Some("p".into()),
                object: None,
                valid_from: None,
                valid_to: None,
            }],
            &who(),
            1,
        )
        .unwrap_err();
    assert!(e.to_string().starts_with("facts[0].object"), "{e}");
    // The schemas.
    let with = ops::record_facts_schema_for(true);
    let without = ops::record_facts_schema_for(false);
    assert_eq!(without, ops::record_facts_schema());
    let props = "/properties/facts/items/properties";
    assert!(with.pointer(props).unwrap().get("predicate").is_some());
    assert!(with.pointer(props).unwrap().get("object").is_some());
    assert!(without.pointer(props).unwrap().get("predicate").is_none());
}

#[test]
fn renderings_of_versions_carry_relations_only_when_set() {
    let (_dir, s) = store();
    s.apply(
        NS,
        &[
            rel("Marco Diaz leads Orion", "Marco Diaz", "leads", "Orion"),
            Op::Add {
                text: "Plain fact".into(),
                subject: None,
                predicate: None,
                object: None,
                valid_from: None,
                valid_to: None,
            },
        ],
        &who(),
        1,
    )
    .unwrap();
    let listed = s.list(NS, View::Current).unwrap();
    let with = listed.iter().find(|v| v.predicate.is_some()).unwrap();
    let plain = listed.iter().find(|v| v.predicate.is_none()).unwrap();
    assert!(with.prompt_line().contains(r#""predicate":"leads""#));
    assert_eq!(with.to_json()["object"], json!("Orion"));
    assert!(!plain.prompt_line().contains("predicate"));
    assert!(plain.to_json().get("predicate").is_none());
}
