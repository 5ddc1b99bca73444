//! # Long-term facts on both backends (issue 36): SQLite and PostgreSQL answer alike
//!
//! Role: run the facts store's important behaviours (memory's `facts/tests.rs`: the May 3rd → May
//! 17th story through every view, duplicates, stale and foreign targets failing the whole batch,
//! entities and aliases, extraction bookkeeping, read-only stores, hybrid search, input edge
//! cases, namespaces) against SQLite (a temporary file) and PostgreSQL (a fresh database), with the
//! backend's name in every assertion message; then what only several nodes can do: two handles (as
//! two nodes would hold) racing to close the same current version, to add the same statement, and
//! to create the same entity; a node's in-memory vectors following another node's writes; and a
//! search-quality sanity check (both backends put the expected fact first).
//!
//! Invariants: each PostgreSQL test has a database of its own (`fresh_database`: skipped with one
//! line when no server is here, a failure under CI); nothing waits on time.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use opc_memory::embed::{DIM, EmbedError, EmbedSlot, Embedder};
use opc_memory::facts::time::parse_time;
use opc_memory::facts::{
    FactError, FactQuery, FactStore, FactVersion, Op, Provenance, Source, View, ops,
};
use serde_json::{Value, json};

const NS: &str = "agent/ceo";

/// Where a test's facts live: a SQLite file, or a PostgreSQL database.
struct Place {
    name: &'static str,
    dir: tempfile::TempDir,
    url: Option<String>,
}

impl Place {
    /// A handle on the facts, as a node (or a process) would open it: for PostgreSQL, a new
    /// connection.
    fn open(&self, slot: EmbedSlot) -> FactStore {
        match &self.url {
            None => FactStore::open(&self.dir.path().join("db.sqlite"), slot),
            Some(_) => FactStore::open_postgres(self.conn(), slot),
        }
        .unwrap_or_else(|e| panic!("{}: open: {e}", self.name))
    }

    fn open_read_only(&self, slot: EmbedSlot) -> Result<FactStore, FactError> {
        match &self.url {
            None => FactStore::open_read_only(&self.dir.path().join("db.sqlite"), slot),
            Some(_) => FactStore::open_postgres_read_only(self.conn(), slot),
        }
    }

    fn conn(&self) -> opc_pg::Blocking {
        opc_pg::Blocking::connect(self.url.as_deref().unwrap(), "pg-facts-test").unwrap()
    }

    fn is_pg(&self) -> bool {
        self.url.is_some()
    }
}

/// A fresh PostgreSQL database for `test` (None: no server here, skipped).
fn pg_url(test: &str) -> Option<String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(opc_tests::postgres::fresh_database(test))
}

/// SQLite, and PostgreSQL when there is a server.
fn places(test: &str) -> Vec<Place> {
    let mut out = vec![Place {
        name: "sqlite",
        dir: tempfile::tempdir().unwrap(),
        url: None,
    }];
    if let Some(url) = pg_url(test) {
        out.push(Place {
            name: "postgres",
            dir: tempfile::tempdir().unwrap(),
            url: Some(url),
        });
    }
    out
}

fn who(conversation: &str) -> Provenance {
    Provenance {
        agent: "ceo".into(),
        task: Some(7),
        conversation: Some(conversation.into()),
        source_messages: vec![3, 4],
        model: Some("p/fast".into()),
        ledger_id: Some(11),
        source: Source::Agent,
    }
}

fn add(text: &str, subject: Option<&str>) -> Op {
    Op::Add {
        text: text.into(),
        subject: subject.map(Into::into),
        predicate: None,
        object: None,
        valid_from: None,
        valid_to: None,
    }
}

fn upd(target: i64, text: &str) -> Op {
    Op::Update {
        target,
        text: text.into(),
        subject: None,
        predicate: None,
        object: None,
        valid_from: None,
        valid_to: None,
        reason: None,
    }
}

fn invalidate(target: i64) -> Op {
    Op::Invalidate {
        target,
        reason: None,
        valid_to: None,
    }
}

fn t(s: &str) -> i64 {
    parse_time(s).unwrap()
}

fn q(text: &str, view: View) -> FactQuery {
    FactQuery {
        text: text.into(),
        namespaces: vec![NS.into()],
        view,
        limit: 5,
    }
}

fn ids(v: &[FactVersion]) -> Vec<i64> {
    v.iter().map(|v| v.id).collect()
}

fn hit_ids(s: &FactStore, query: &FactQuery) -> Vec<i64> {
    s.search(query)
        .unwrap()
        .iter()
        .map(|h| h.version.id)
        .collect()
}

#[test]
fn the_launch_moves_from_may_3rd_to_may_17th() {
    for p in places("facts_launch_moves") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        let day1 = t("2026-04-20T10:00:00Z");
        let day2 = t("2026-04-25T10:00:00Z");
        let v1 = s
            .apply(
                NS,
                &[Op::Add {
                    text: "The Orion launch is on 2026-05-03".into(),
                    subject: Some("Orion launch".into()),
                    predicate: None,
                    object: None,
                    valid_from: Some(day1),
                    valid_to: None,
                }],
                &who("conv-1"),
                day1,
            )
            .unwrap()
            .added[0];
        let listed: HashSet<i64> = [v1].into();
        let ops = ops::parse(
            &json!({"facts": [{"op": "UPDATE", "target": v1, "text": "The Orion launch is on 2026-05-17",
                "valid_from": "2026-04-25T10:00:00Z", "reason": "moved"}]}),
            &listed,
        )
        .unwrap();
        let second = s.apply(NS, &ops, &who("conv-2"), day2).unwrap();
        let (closed, v2) = second.updated[0];
        assert_eq!(closed, v1, "{b}");

        let current = s.list(NS, View::Current).unwrap();
        assert_eq!(ids(&current), vec![v2], "{b}");
        assert_eq!(
            current[0].subject.as_deref(),
            Some("Orion launch"),
            "{b}: kept"
        );
        let between = t("2026-04-22T00:00:00Z");
        assert_eq!(
            ids(&s.list(NS, View::BelievedAt(between)).unwrap()),
            vec![v1],
            "{b}"
        );
        assert!(
            s.list(NS, View::BelievedAt(day1 - 1)).unwrap().is_empty(),
            "{b}"
        );
        assert_eq!(
            ids(&s.list(NS, View::BelievedAt(day2)).unwrap()),
            vec![v2],
            "{b}"
        );

        let history = s.list(NS, View::History).unwrap();
        assert_eq!(ids(&history), vec![v1, v2], "{b}");
        assert_eq!(history[0].fact_id, history[1].fact_id, "{b}");
        assert_eq!(history[0].invalidated_at, Some(day2), "{b}");
        assert_eq!(
            history[0].valid_to,
            Some(day2),
            "{b}: closed where the new one starts"
        );
        assert_eq!(history[0].conversation.as_deref(), Some("conv-1"), "{b}");
        assert_eq!(history[1].conversation.as_deref(), Some("conv-2"), "{b}");
        assert_eq!(history[1].reason.as_deref(), Some("moved"), "{b}");
        assert_eq!(history[0].source_messages, vec![3, 4], "{b}");
        assert_eq!(history[0].ledger_id, Some(11), "{b}");
        assert_eq!(history[0].task, Some(7), "{b}");
        assert_eq!(s.history(history[0].fact_id).unwrap(), history, "{b}");
        assert!(s.list(NS, View::ValidAt(day1)).unwrap().is_empty(), "{b}");
        assert_eq!(
            ids(&s.list(NS, View::ValidAt(day2 + 1)).unwrap()),
            vec![v2],
            "{b}"
        );

        let j = history[0].to_json();
        assert_eq!(j["recorded_at"], "2026-04-20T10:00:00Z", "{b}");
        assert_eq!(j["invalidated_at"], "2026-04-25T10:00:00Z", "{b}");
        assert_eq!(j["source"], "agent", "{b}");
        let parsed: Value = serde_json::from_str(&history[1].prompt_line()).unwrap();
        assert_eq!(parsed["valid_from"], "2026-04-25T10:00:00Z", "{b}");

        let ask = |view| q("when is the Orion launch", view);
        assert_eq!(hit_ids(&s, &ask(View::Current)), vec![v2], "{b}");
        assert_eq!(
            hit_ids(&s, &ask(View::BelievedAt(between))),
            vec![v1],
            "{b}"
        );
        let mut history_hits = hit_ids(&s, &ask(View::History));
        history_hits.sort();
        assert_eq!(history_hits, vec![v1, v2], "{b}: both versions");
        assert_eq!(hit_ids(&s, &ask(View::ValidAt(day2 + 1))), vec![v2], "{b}");
        // The date's parts are words on both backends (FTS5 splits at the dashes; PostgreSQL's
        // column strips the punctuation before parsing).
        assert_eq!(hit_ids(&s, &q("05 17", View::Current)), vec![v2], "{b}");
    }
}

#[test]
fn exact_duplicates_are_dropped() {
    for p in places("facts_duplicates") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        let a = s
            .apply(
                NS,
                &[
                    add("The launch is on May 3rd.", None),
                    add("the launch   is on may 3rd", None),
                ],
                &who("c1"),
                1,
            )
            .unwrap();
        assert_eq!((a.added.len(), a.duplicates), (1, 1), "{b}");
        let again = s
            .insert(NS, "THE LAUNCH IS ON MAY 3RD!", None, &who("c2"), 2)
            .unwrap();
        assert_eq!((again.added.len(), again.duplicates), (0, 1), "{b}");
        let other = s
            .insert(
                "agent/cto",
                "The launch is on May 3rd.",
                None,
                &who("c3"),
                3,
            )
            .unwrap();
        assert_eq!(other.added.len(), 1, "{b}: another namespace");
        s.apply(
            NS,
            &[Op::Invalidate {
                target: a.added[0],
                reason: Some("cancelled".into()),
                valid_to: None,
            }],
            &who("c4"),
            4,
        )
        .unwrap();
        let readded = s
            .insert(NS, "The launch is on May 3rd", None, &who("c5"), 5)
            .unwrap();
        assert_eq!(readded.added.len(), 1, "{b}: new information again");
        let history = s.list(NS, View::History).unwrap();
        assert_eq!(history.len(), 3, "{b}: closed, its closing, the new one");
        let closing = history
            .iter()
            .find(|v| v.conversation.as_deref() == Some("c4"))
            .unwrap_or_else(|| panic!("{b}: the INVALIDATE is a version"));
        assert_eq!(closing.reason.as_deref(), Some("cancelled"), "{b}");
        assert_eq!(
            (closing.recorded_at, closing.invalidated_at),
            (4, Some(4)),
            "{b}"
        );
        assert!(
            s.list(NS, View::BelievedAt(4))
                .unwrap()
                .iter()
                .all(|v| v.id != closing.id),
            "{b}: a closing is never believed"
        );
    }
}

#[test]
fn a_stale_or_foreign_target_fails_the_whole_batch() {
    for p in places("facts_stale_batch") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        let v1 = s
            .insert(NS, "Budget is 10k", None, &who("c"), 1)
            .unwrap()
            .added[0];
        let v2 = s
            .apply(NS, &[upd(v1, "Budget is 12k")], &who("c"), 2)
            .unwrap()
            .updated[0]
            .1;
        let before = s.list(NS, View::History).unwrap();
        let err = s
            .apply(
                NS,
                &[
                    add("Office moves to Lyon", Some("Office")),
                    upd(v1, "Budget is 12k"),
                ],
                &who("c"),
                3,
            )
            .unwrap_err();
        assert!(
            matches!(err, FactError::Stale(id) if id == v1),
            "{b}: {err}"
        );
        assert_eq!(
            s.list(NS, View::History).unwrap(),
            before,
            "{b}: nothing written"
        );
        assert!(
            s.about(&[NS.into()], "office", View::History)
                .unwrap()
                .is_empty(),
            "{b}: no entity left behind"
        );
        let other = s
            .insert("agent/cto", "CTO fact", None, &who("c"), 4)
            .unwrap()
            .added[0];
        let err = s.apply(NS, &[invalidate(other)], &who("c"), 5).unwrap_err();
        assert!(
            matches!(err, FactError::Invalid(ref m) if m.contains("not in agent/ceo")),
            "{b}: {err}"
        );
        let err = s.apply(NS, &[upd(999_999, "x")], &who("c"), 5).unwrap_err();
        assert!(
            matches!(err, FactError::Invalid(ref m) if m.contains("facts[0].target")),
            "{b}: {err}"
        );
        let err = s
            .apply(
                NS,
                &[upd(v2, "Budget is 13k"), upd(v2, "Budget is 14k")],
                &who("c"),
                6,
            )
            .unwrap_err();
        assert!(matches!(err, FactError::Stale(_)), "{b}: {err}");
        assert_eq!(s.list(NS, View::History).unwrap(), before, "{b}");
        let err = s.apply(NS, &[add("   ", None)], &who("c"), 7).unwrap_err();
        assert!(err.to_string().contains("facts[0].text"), "{b}: {err}");
    }
}

#[test]
fn subjects_become_entities_with_aliases() {
    for p in places("facts_entities") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        let a = s
            .insert(
                NS,
                "The Orion launch is on May 17",
                Some("The Orion Launch"),
                &who("c"),
                1,
            )
            .unwrap()
            .added[0];
        let o = s
            .insert(
                NS,
                "Orion launch needs 3 servers",
                Some("orion launch"),
                &who("c"),
                2,
            )
            .unwrap()
            .added[0];
        let c = s
            .insert(NS, "Vega is paused", Some("Vega"), &who("c"), 3)
            .unwrap()
            .added[0];
        let ns = vec![NS.to_string()];
        assert_eq!(
            ids(&s.about(&ns, "orion LAUNCH!", View::Current).unwrap()),
            vec![o, a],
            "{b}"
        );
        assert!(
            s.about(&ns, "Orion", View::Current).unwrap().is_empty(),
            "{b}: no alias yet"
        );
        s.alias(NS, "the orion launch", "Orion", 4).unwrap();
        assert_eq!(
            ids(&s.about(&ns, "Orion", View::Current).unwrap()),
            vec![o, a],
            "{b}"
        );
        assert_eq!(
            ids(&s.about(&ns, "Vega", View::Current).unwrap()),
            vec![c],
            "{b}"
        );
        let err = s.alias(NS, "Vega", "Orion", 5).unwrap_err();
        assert!(err.to_string().contains("another subject"), "{b}: {err}");
        assert!(s.alias(NS, "Nothing", "x", 5).is_err(), "{b}");
        assert!(s.alias(NS, "Vega", "!!!", 5).is_err(), "{b}");
        s.apply(
            NS,
            &[upd(a, "The Orion launch is on May 24")],
            &who("c"),
            10,
        )
        .unwrap();
        let now = s.about(&ns, "Orion", View::Current).unwrap();
        assert_eq!(now.len(), 2, "{b}");
        assert!(now.iter().all(|v| v.id != a), "{b}");
        assert!(
            ids(&s.about(&ns, "Orion", View::BelievedAt(5)).unwrap()).contains(&a),
            "{b}"
        );
        assert_eq!(
            s.about(&ns, "Orion", View::History).unwrap().len(),
            3,
            "{b}"
        );
        assert!(
            s.about(&["agent/cto".to_string()], "Orion", View::Current)
                .unwrap()
                .is_empty(),
            "{b}: per namespace"
        );
    }
}

#[test]
fn extracted_exchanges_are_remembered_with_their_batch() {
    for p in places("facts_extracted") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        assert!(!s.extracted(NS, "h1").unwrap(), "{b}");
        s.apply_marking(NS, &[Op::Noop], &who("c"), 1, Some("h1"))
            .unwrap();
        assert!(s.extracted(NS, "h1").unwrap(), "{b}");
        assert!(!s.extracted("agent/cto", "h1").unwrap(), "{b}");
        assert!(
            s.apply_marking(NS, &[invalidate(42)], &who("c"), 2, Some("h2"))
                .is_err(),
            "{b}"
        );
        assert!(
            !s.extracted(NS, "h2").unwrap(),
            "{b}: a failed batch marks nothing"
        );
        s.mark_extracted(NS, "h2", 3).unwrap();
        s.mark_extracted(NS, "h2", 4).unwrap();
        assert!(s.extracted(NS, "h2").unwrap(), "{b}");
    }
}

#[test]
fn read_only_beside_a_writer() {
    for p in places("facts_read_only") {
        let b = p.name;
        if !p.is_pg() {
            // A file nobody migrated (PostgreSQL's fresh database is that already).
            drop(rusqlite::Connection::open(p.dir.path().join("db.sqlite")).unwrap());
        }
        let err = p.open_read_only(EmbedSlot::new()).err().unwrap();
        assert!(
            err.to_string().contains("no facts tables yet"),
            "{b}: {err}"
        );
        let writer = p.open(EmbedSlot::new());
        writer.insert(NS, "First", None, &who("c"), 1).unwrap();
        let reader = p.open_read_only(EmbedSlot::new()).unwrap();
        assert!(reader.is_read_only() && !writer.is_read_only(), "{b}");
        assert_eq!(reader.list(NS, View::Current).unwrap().len(), 1, "{b}");
        writer.insert(NS, "Second", None, &who("c"), 2).unwrap();
        assert_eq!(
            reader.list(NS, View::Current).unwrap().len(),
            2,
            "{b}: sees commits"
        );
        let err = reader.insert(NS, "Third", None, &who("c"), 3).unwrap_err();
        assert!(err.to_string().contains("read-only"), "{b}: {err}");
        let err = reader.mark_extracted(NS, "h", 3).unwrap_err();
        assert!(err.to_string().contains("read-only"), "{b}: {err}");
        assert_eq!(
            reader.search(&q("second", View::Current)).unwrap().len(),
            1,
            "{b}"
        );
        // A newer schema is refused.
        match &p.url {
            None => {
                let conn = rusqlite::Connection::open(p.dir.path().join("db.sqlite")).unwrap();
                conn.execute(
                    "UPDATE schema_versions SET version = 99 WHERE component = 'memory'",
                    [],
                )
                .unwrap();
            }
            Some(_) => {
                p.conn()
                    .run("test", |c| {
                        c.execute(
                            "UPDATE schema_versions SET version = 99 WHERE component = 'memory'",
                            &[],
                        )
                    })
                    .unwrap();
            }
        }
        let err = p.open_read_only(EmbedSlot::new()).err().unwrap();
        assert!(err.to_string().contains("newer"), "{b}: {err}");
    }
}

/// A deterministic stand-in for MiniLM (as memory's unit tests): words hashed into buckets, with
/// "release" meaning "launch".
struct BagOfWords;

impl Embedder for BagOfWords {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; DIM];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let w = w.to_lowercase();
                    let w = if w == "release" { "launch" } else { w.as_str() };
                    let h = w
                        .bytes()
                        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
                    v[(h % DIM as u64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if n > 0.0 {
                    v.iter_mut().for_each(|x| *x /= n);
                }
                v
            })
            .collect())
    }
    fn model_id(&self) -> &'static str {
        "bag-of-words"
    }
    fn dimensions(&self) -> usize {
        DIM
    }
}

#[test]
fn hybrid_search_finds_by_meaning_and_follows_other_nodes() {
    for p in places("facts_hybrid") {
        let b = p.name;
        let slot = EmbedSlot::new();
        let s = p.open(slot.clone());
        let early = s
            .insert(NS, "The Orion launch is on May 17", None, &who("c"), 1)
            .unwrap()
            .added[0];
        s.insert(NS, "Billing is owned by Alice", None, &who("c"), 2)
            .unwrap();
        assert!(
            s.search(&q("release", View::Current)).unwrap().is_empty(),
            "{b}: BM25 alone"
        );

        assert!(slot.set(Arc::new(BagOfWords)));
        let later = s
            .insert(NS, "Vega release slipped", None, &who("c"), 3)
            .unwrap()
            .added[0];
        let found = hit_ids(&s, &q("release", View::Current));
        assert_eq!(found[0], later, "{b}: both lists agree on it");
        assert!(found.contains(&early), "{b}: found by meaning: {found:?}");
        assert_eq!(s.embed_pending(10).unwrap(), 0, "{b}: backfilled already");

        let v = s
            .apply(
                NS,
                &[upd(early, "The Orion launch is on May 24")],
                &who("c"),
                4,
            )
            .unwrap()
            .updated[0]
            .1;
        let now = hit_ids(&s, &q("release", View::Current));
        assert!(now.contains(&v) && !now.contains(&early), "{b}: {now:?}");
        let then = hit_ids(&s, &q("release", View::BelievedAt(3)));
        assert!(then.contains(&early) && !then.contains(&v), "{b}: {then:?}");

        // Another node (another handle on the same database) writes: this one's vectors follow,
        // both its new version and its closing of one this node holds in memory.
        let other = p.open(slot.clone());
        let x = other
            .insert(NS, "Orion launch party in Lyon", None, &who("c"), 5)
            .unwrap()
            .added[0];
        let seen = hit_ids(&s, &q("release", View::Current));
        assert!(seen.contains(&x), "{b}: {seen:?}");
        other.apply(NS, &[invalidate(v)], &who("c"), 6).unwrap();
        let seen = hit_ids(&s, &q("release", View::Current));
        assert!(
            !seen.contains(&v),
            "{b}: closed by the other node: {seen:?}"
        );
        // Vectors embedded by another node (written before its embedder loaded) arrive too.
        let bare = p.open(EmbedSlot::new());
        let y = bare
            .insert(NS, "Atlas release is in June", None, &who("c"), 7)
            .unwrap()
            .added[0];
        let fresh = EmbedSlot::new();
        assert!(fresh.set(Arc::new(BagOfWords)));
        let embedder = p.open(fresh);
        assert!(embedder.embed_pending(10).unwrap() >= 1, "{b}");
        let seen = hit_ids(&s, &q("launch", View::Current));
        assert!(seen.contains(&y), "{b}: {seen:?}");
    }
}

#[test]
fn search_input_edge_cases() {
    for p in places("facts_search_edges") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        s.insert(NS, "Alpha beta", None, &who("c"), 1).unwrap();
        for text in [
            "",
            "   ",
            "?!",
            "\"",
            "NEAR(",
            "*",
            "alpha OR",
            "alpha & | ! <-> :* 'x'",
            "beta\"; DROP TABLE memory_fact_versions; --",
            "the",
        ] {
            let r = s.search(&q(text, View::Current));
            assert!(r.is_ok(), "{b}: {text}: {:?}", r.err());
        }
        assert_eq!(
            hit_ids(&s, &q("alpha & | ! <-> :*", View::Current)).len(),
            1,
            "{b}"
        );
        let none = FactQuery {
            namespaces: vec![],
            ..q("alpha", View::Current)
        };
        assert!(s.search(&none).unwrap().is_empty(), "{b}");
        assert_eq!(s.list(NS, View::Current).unwrap().len(), 1, "{b}");
    }
}

#[test]
fn the_store_is_shared_across_threads() {
    for p in places("facts_threads") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        let threads: Vec<_> = (0..4)
            .map(|n| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..10 {
                        s.insert(
                            &format!("agent/t{n}"),
                            &format!("Fact {i} of thread {n}"),
                            None,
                            &who("c"),
                            i,
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for n in 0..4 {
            assert_eq!(
                s.list(&format!("agent/t{n}"), View::Current).unwrap().len(),
                10,
                "{b}"
            );
        }
    }
}

#[test]
fn a_namespace_never_matches_another_sharing_its_prefix() {
    for p in places("facts_ns_prefix") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        s.insert("agent/a", "Quarterly budget approved", None, &who("c"), 1)
            .unwrap();
        s.insert("agent/ab", "Quarterly budget rejected", None, &who("c"), 2)
            .unwrap();
        for view in [
            View::Current,
            View::BelievedAt(5),
            View::History,
            View::ValidAt(5),
        ] {
            let hits = s
                .search(&FactQuery {
                    text: "quarterly budget".into(),
                    namespaces: vec!["agent/a".into()],
                    view,
                    limit: 10,
                })
                .unwrap();
            assert_eq!(hits.len(), 1, "{b}: {view:?}");
            assert_eq!(hits[0].version.namespace, "agent/a", "{b}");
        }
    }
}

/// Two nodes (two handles, two connections) apply `op(target)` to the same current version at
/// once, for each of `rounds` facts: exactly one succeeds each time, the other is told `Stale`.
fn race_on_one_version(p: &Place, op: fn(i64) -> Op, rounds: usize) {
    let b = p.name;
    let nodes = [p.open(EmbedSlot::new()), p.open(EmbedSlot::new())];
    for round in 0..rounds {
        let target = nodes[0]
            .insert(NS, &format!("Round {round} fact"), None, &who("c"), 1)
            .unwrap()
            .added[0];
        let barrier = Arc::new(Barrier::new(2));
        let results: Vec<Result<_, FactError>> = nodes
            .iter()
            .map(|s| {
                let (s, barrier) = (s.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    s.apply(NS, &[op(target)], &who("c"), 2)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(
            won, 1,
            "{b}: round {round}: exactly one node wins: {results:?}"
        );
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(e, FactError::Stale(id) if *id == target),
                    "{b}: round {round}: {e}"
                );
            }
        }
        let history = nodes[1].list(NS, View::History).unwrap();
        let fact = history.iter().find(|v| v.id == target).unwrap().fact_id;
        let current = nodes[1]
            .history(fact)
            .unwrap()
            .iter()
            .filter(|v| v.invalidated_at.is_none())
            .count();
        let closings = nodes[1]
            .history(fact)
            .unwrap()
            .iter()
            .filter(|v| v.recorded_at == 2 && v.invalidated_at == Some(2))
            .count();
        assert!(
            current <= 1 && closings <= 1,
            "{b}: round {round}: one change recorded"
        );
    }
}

#[test]
fn two_nodes_closing_one_version_one_wins() {
    for p in places("facts_race_close") {
        race_on_one_version(&p, invalidate, 20);
        race_on_one_version(&p, |t| upd(t, "Changed by a node"), 20);
    }
}

#[test]
fn two_nodes_adding_one_statement_or_subject_end_with_one() {
    for p in places("facts_race_entities") {
        let b = p.name;
        let nodes = [p.open(EmbedSlot::new()), p.open(EmbedSlot::new())];
        for round in 0..20 {
            let subject = format!("Project {round}");
            let barrier = Arc::new(Barrier::new(2));
            let handles: Vec<_> = nodes
                .iter()
                .enumerate()
                .map(|(n, s)| {
                    let (s, barrier, subject) = (s.clone(), barrier.clone(), subject.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        s.apply(
                            NS,
                            &[
                                add(&format!("Node {n} says {subject} is green"), Some(&subject)),
                                add(&format!("{subject} ships in May"), Some(&subject)),
                            ],
                            &who("c"),
                            round,
                        )
                    })
                })
                .collect();
            for h in handles {
                let r = h.join().unwrap();
                assert!(r.is_ok(), "{b}: round {round}: {r:?}");
            }
            let about = nodes[0]
                .about(&[NS.into()], &subject, View::Current)
                .unwrap();
            assert_eq!(
                about.len(),
                3,
                "{b}: round {round}: one entity holds all three: {about:?}"
            );
            // The same statement from both nodes is stored once.
            let ships = nodes[1]
                .list(NS, View::Current)
                .unwrap()
                .into_iter()
                .filter(|v| v.text == format!("{subject} ships in May"))
                .count();
            assert_eq!(ships, 1, "{b}: round {round}");
        }
        // The same statement without a subject (nothing else serialises the two batches).
        for round in 0..20 {
            let text = format!("Release {round} is signed off");
            let barrier = Arc::new(Barrier::new(2));
            let handles: Vec<_> = nodes
                .iter()
                .map(|s| {
                    let (s, barrier, text) = (s.clone(), barrier.clone(), text.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        s.insert(NS, &text, None, &who("c"), 200)
                    })
                })
                .collect();
            let added: usize = handles
                .into_iter()
                .map(|h| h.join().unwrap().unwrap().added.len())
                .sum();
            assert_eq!(added, 1, "{b}: round {round}: stored once");
        }
        // Two nodes giving one alias to two entities: one is told it is taken.
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = ["Project 1", "Project 2"]
            .into_iter()
            .zip(nodes.iter().cloned())
            .map(|(entity, s)| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    s.alias(NS, entity, "Flagship", 100)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{b}: {results:?}"
        );
    }
}

/// For a handful of facts and questions, both backends put the expected fact first.
#[test]
fn both_backends_find_the_expected_fact_first() {
    let facts = [
        ("The Orion launch is on 2026-05-17", Some("Orion launch")),
        ("Alice owns the billing service", Some("billing")),
        ("The office moves to Lyon in September", Some("office")),
        ("Bob prefers meetings after 10am", Some("Bob")),
        (
            "The Vega project is paused until the budget is approved",
            Some("Vega"),
        ),
        (
            "Customer Acme renewed their contract for three years",
            Some("Acme"),
        ),
        ("The staging database runs PostgreSQL 15", None),
        ("Weekly reports are sent every Friday to the board", None),
        ("The launch party is at the Lyon office", None),
    ];
    let questions = [
        ("When is the Orion launch?", 0),
        ("who owns billing", 1),
        ("Where is the office moving?", 2),
        ("When does Bob like to meet?", 3),
        ("why is Vega paused", 4),
        ("Acme contract renewal", 5),
        ("which postgres version does staging run", 6),
        ("when are reports sent", 7),
        ("launch party location", 8),
    ];
    for p in places("facts_quality") {
        let b = p.name;
        let s = p.open(EmbedSlot::new());
        let ids: Vec<i64> = facts
            .iter()
            .enumerate()
            .map(|(i, (text, subject))| {
                s.insert(NS, text, *subject, &who("c"), i as i64)
                    .unwrap()
                    .added[0]
            })
            .collect();
        for (question, want) in questions {
            let hits = s.search(&q(question, View::Current)).unwrap();
            let got: Vec<&str> = hits.iter().map(|h| h.version.text.as_str()).collect();
            assert_eq!(
                hits.first().map(|h| h.version.id),
                Some(ids[want]),
                "{b}: {question:?} → {got:?}"
            );
        }
    }
}
