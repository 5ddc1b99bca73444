//! The facts store's behaviour: the May 3rd → May 17th story through every view, duplicates, stale
//! and foreign targets (whole batch or nothing), garbage `record_facts` inputs, entities and
//! aliases, hybrid search, and a read-only store beside a writer.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::time::parse_time;
use super::*;
use crate::embed::{DIM, EmbedError, Embedder};
use crate::test_support::bag_of_words;

fn store() -> (tempfile::TempDir, FactStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = FactStore::open(&dir.path().join("db.sqlite"), EmbedSlot::new()).unwrap();
    (dir, s)
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

const NS: &str = "agent/ceo";

fn t(s: &str) -> i64 {
    parse_time(s).unwrap()
}

/// The issue's story at the store level: May 3rd recorded in one conversation, moved to May 17th in
/// another; every view answers as the CLI's flags promise.
#[test]
fn the_launch_moves_from_may_3rd_to_may_17th() {
    let (_dir, s) = store();
    let day1 = t("2026-04-20T10:00:00Z");
    let day2 = t("2026-04-25T10:00:00Z");
    let first = s
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
        .unwrap();
    assert_eq!(first.added.len(), 1);
    let v1 = first.added[0];

    let listed: HashSet<i64> = [v1].into();
    let ops = ops::parse(
        &json!({"facts": [{"op": "UPDATE", "target": v1, "text": "The Orion launch is on 2026-05-17",
            "valid_from": "2026-04-25T10:00:00Z", "reason": "moved"}]}),
        &listed,
    )
    .unwrap();
    let second = s.apply(NS, &ops, &who("conv-2"), day2).unwrap();
    assert_eq!(second.updated.len(), 1);
    let (closed, v2) = second.updated[0];
    assert_eq!(closed, v1);

    // Current: May 17th only.
    let current = s.list(NS, View::Current).unwrap();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0].id, v2);
    assert!(current[0].text.contains("05-17"));
    assert_eq!(current[0].subject.as_deref(), Some("Orion launch"), "kept");

    // Believed between the two: May 3rd.
    let between = s
        .list(NS, View::BelievedAt(t("2026-04-22T00:00:00Z")))
        .unwrap();
    assert_eq!(between.iter().map(|v| v.id).collect::<Vec<_>>(), vec![v1]);
    // Before anything was recorded: nothing. At the second write: only the new one.
    assert!(s.list(NS, View::BelievedAt(day1 - 1)).unwrap().is_empty());
    assert_eq!(
        s.list(NS, View::BelievedAt(day2)).unwrap()[0].id,
        v2,
        "at the instant of the update the new version is believed"
    );

    // History: both, the older closed, each with its conversation; one fact.
    let history = s.list(NS, View::History).unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].id, v1);
    assert_eq!(history[0].fact_id, history[1].fact_id);
    assert_eq!(history[0].invalidated_at, Some(day2));
    assert_eq!(
        history[0].valid_to,
        Some(day2),
        "closed where the new one starts"
    );
    assert_eq!(history[0].conversation.as_deref(), Some("conv-1"));
    assert_eq!(history[1].conversation.as_deref(), Some("conv-2"));
    assert_eq!(history[1].invalidated_at, None);
    assert_eq!(history[1].reason.as_deref(), Some("moved"));
    assert_eq!(s.history(history[0].fact_id).unwrap(), history);

    // Valid in the world: before the move, nothing current held (the current version starts at
    // day2); after, May 17th.
    assert!(s.list(NS, View::ValidAt(day1)).unwrap().is_empty());
    assert_eq!(s.list(NS, View::ValidAt(day2 + 1)).unwrap()[0].id, v2);

    // Provenance and the CLI's JSON.
    let j = history[0].to_json();
    assert_eq!(j["recorded_at"], "2026-04-20T10:00:00Z");
    assert_eq!(j["invalidated_at"], "2026-04-25T10:00:00Z");
    assert_eq!(j["source"], "agent");
    assert_eq!(j["conversation"], "conv-1");
    assert_eq!(j["task"], 7);
    assert_eq!(history[0].source_messages, vec![3, 4]);
    assert_eq!(history[0].ledger_id, Some(11));
    let line = history[1].prompt_line();
    assert!(!line.contains('\n'));
    let parsed: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(parsed["id"], v2);
    assert_eq!(parsed["valid_from"], "2026-04-25T10:00:00Z");

    // BelievedAt search finds the old belief, Current the new.
    let q = |view| FactQuery {
        text: "when is the Orion launch".into(),
        namespaces: vec![NS.into()],
        view,
        limit: 5,
    };
    assert_eq!(s.search(&q(View::Current)).unwrap()[0].version.id, v2);
    let past = s
        .search(&q(View::BelievedAt(t("2026-04-22T00:00:00Z"))))
        .unwrap();
    assert_eq!(past.len(), 1);
    assert_eq!(past[0].version.id, v1);
}

#[test]
fn exact_duplicates_are_dropped() {
    let (_dir, s) = store();
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
    assert_eq!((a.added.len(), a.duplicates), (1, 1));
    let b = s
        .insert(NS, "THE LAUNCH IS ON MAY 3RD!", None, &who("c2"), 2)
        .unwrap();
    assert_eq!((b.added.len(), b.duplicates), (0, 1));
    // Another namespace may hold the same text.
    let c = s
        .insert(
            "agent/cto",
            "The launch is on May 3rd.",
            None,
            &who("c3"),
            3,
        )
        .unwrap();
    assert_eq!(c.added.len(), 1);
    // Once invalidated, the same text may be added again (it is new information again).
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
    assert_eq!(
        s.insert(NS, "The launch is on May 3rd", None, &who("c5"), 5)
            .unwrap()
            .added
            .len(),
        1
    );
    let history = s.list(NS, View::History).unwrap();
    assert_eq!(
        history.len(),
        3,
        "nothing deleted: the closed version, the record of its closing, the new one"
    );
    // The closing is a version of its own, with the closer's provenance, never current.
    let closing = history
        .iter()
        .find(|v| v.conversation.as_deref() == Some("c4"))
        .expect("the INVALIDATE is a version");
    assert_eq!(closing.reason.as_deref(), Some("cancelled"));
    assert_eq!(closing.recorded_at, 4);
    assert_eq!(closing.invalidated_at, Some(4));
    assert!(
        s.list(NS, View::BelievedAt(4))
            .unwrap()
            .iter()
            .all(|v| v.id != closing.id)
    );
}

#[test]
fn a_stale_or_foreign_target_fails_the_whole_batch() {
    let (_dir, s) = store();
    let v1 = s
        .insert(NS, "Budget is 10k", None, &who("c"), 1)
        .unwrap()
        .added[0];
    let upd = |target| Op::Update {
        target,
        text: "Budget is 12k".into(),
        subject: None,
        predicate: None,
        object: None,
        valid_from: None,
        valid_to: None,
        reason: None,
    };
    let v2 = s.apply(NS, &[upd(v1)], &who("c"), 2).unwrap().updated[0].1;
    let before = s.list(NS, View::History).unwrap();

    // v1 is closed now: an ADD before the stale UPDATE must not survive.
    let err = s
        .apply(
            NS,
            &[add("Office moves to Lyon", None), upd(v1)],
            &who("c"),
            3,
        )
        .unwrap_err();
    assert!(matches!(err, FactError::Stale(id) if id == v1), "{err}");
    assert!(err.to_string().contains("no longer current"));
    assert_eq!(
        s.list(NS, View::History).unwrap(),
        before,
        "nothing written"
    );

    // Another agent's version, or no version at all.
    let other = s
        .insert("agent/cto", "CTO fact", None, &who("c"), 4)
        .unwrap()
        .added[0];
    let err = s
        .apply(
            NS,
            &[Op::Invalidate {
                target: other,
                reason: None,
                valid_to: None,
            }],
            &who("c"),
            5,
        )
        .unwrap_err();
    assert!(
        matches!(err, FactError::Invalid(ref m) if m.contains("not in agent/ceo")),
        "{err}"
    );
    let err = s.apply(NS, &[upd(9999)], &who("c"), 5).unwrap_err();
    assert!(
        matches!(err, FactError::Invalid(ref m) if m.contains("facts[0].target")),
        "{err}"
    );
    // Two ops on one fact in a batch: the second finds it closed.
    let err = s.apply(NS, &[upd(v2), upd(v2)], &who("c"), 6).unwrap_err();
    assert!(matches!(err, FactError::Stale(_)), "{err}");
    assert_eq!(s.list(NS, View::History).unwrap(), before);
    // Bad input straight to apply.
    let err = s.apply(NS, &[add("   ", None)], &who("c"), 7).unwrap_err();
    assert!(err.to_string().contains("facts[0].text"), "{err}");
    let err = s.apply("", &[add("x", None)], &who("c"), 7).unwrap_err();
    assert!(err.to_string().contains("namespace"), "{err}");
}

#[test]
fn parse_accepts_the_contract() {
    let listed: HashSet<i64> = [5, 6].into();
    let ops = ops::parse(
        &json!({"facts": [
            {"op": "ADD", "text": " Alice owns billing ", "subject": "Billing", "valid_from": "2026-05-03", "valid_to": null},
            {"op": "UPDATE", "target": 5, "text": "Launch on May 17", "valid_from": "2026-05-01T12:00:00+02:00", "reason": "moved"},
            {"op": "INVALIDATE", "target": 6, "reason": "duplicate of 5"},
            {"op": "NOOP"}
        ]}),
        &listed,
    )
    .unwrap();
    assert_eq!(ops.len(), 4);
    assert_eq!(
        ops[0],
        Op::Add {
            text: "Alice owns billing".into(),
            subject: Some("Billing".into()),
            predicate: None,
            object: None,
            valid_from: Some(t("2026-05-03T00:00:00Z")),
            valid_to: None
        }
    );
    assert!(
        matches!(&ops[1], Op::Update { target: 5, valid_from: Some(v), .. } if *v == t("2026-05-01T10:00:00Z"))
    );
    assert!(
        matches!(&ops[2], Op::Invalidate { target: 6, reason: Some(r), .. } if r == "duplicate of 5")
    );
    assert_eq!(ops[3], Op::Noop);
    assert!(
        ops::parse(&json!({"facts": []}), &listed)
            .unwrap()
            .is_empty()
    );
    // The schema is what the tool offers.
    let schema = ops::record_facts_schema();
    assert_eq!(schema["required"], json!(["facts"]));
    assert_eq!(
        schema["properties"]["facts"]["items"]["properties"]["op"]["enum"],
        json!(["ADD", "UPDATE", "INVALIDATE", "NOOP"])
    );
    assert!(!ops::record_facts_description().is_empty());
}

/// Every malformed shape is rejected with a message naming where, and nothing panics.
#[test]
fn parse_rejects_garbage_naming_the_path() {
    let listed: HashSet<i64> = [5].into();
    let cases: Vec<(Value, &str)> = vec![
        (json!(null), "input"),
        (json!("facts"), "input"),
        (json!(42), "input"),
        (json!([{"op": "NOOP"}]), "input"),
        (json!({}), "facts: required"),
        (json!({"facts": null}), "facts: expected an array"),
        (json!({"facts": {"op": "NOOP"}}), "facts: expected an array"),
        (json!({"facts": "ADD"}), "facts: expected an array"),
        (json!({"facts": [], "extra": 1}), "input.extra"),
        (json!({"facts": [null]}), "facts[0]: expected an object"),
        (json!({"facts": [[]]}), "facts[0]: expected an object"),
        (json!({"facts": ["ADD"]}), "facts[0]: expected an object"),
        (json!({"facts": [{}]}), "facts[0].op: required"),
        (json!({"facts": [{"op": 1}]}), "facts[0].op"),
        (
            json!({"facts": [{"op": "add", "text": "x"}]}),
            "facts[0].op",
        ),
        (
            json!({"facts": [{"op": "DELETE", "target": 5}]}),
            "facts[0].op",
        ),
        (json!({"facts": [{"op": "ADD"}]}), "facts[0].text: required"),
        (
            json!({"facts": [{"op": "ADD", "text": "  "}]}),
            "facts[0].text: required",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": 5}]}),
            "facts[0].text: expected a string",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": ["a"]}]}),
            "facts[0].text",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": "x".repeat(2001)}]}),
            "facts[0].text: 2001 characters",
        ),
        (json!({"facts": [{"op": "ADD", "text": "a\u{0}b"}]}), "NUL"),
        (
            json!({"facts": [{"op": "ADD", "text": "x", "subject": {}}]}),
            "facts[0].subject",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": "x", "target": 5}]}),
            "facts[0].target: ADD",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": "x", "valid_from": "tomorrow"}]}),
            "facts[0].valid_from",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": "x", "valid_from": 1714000000}]}),
            "facts[0].valid_from",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": "x", "valid_from": "2026-05-03T09:00:00"}]}),
            "facts[0].valid_from",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": "x", "valid_from": "2026-05-10", "valid_to": "2026-05-03"}]}),
            "facts[0].valid_to",
        ),
        (
            json!({"facts": [{"op": "ADD", "text": "x", "colour": "red"}]}),
            "facts[0].colour: unknown field",
        ),
        (
            json!({"facts": [{"op": "NOOP"}, {"op": "UPDATE", "text": "x"}]}),
            "facts[1].target: required",
        ),
        (
            json!({"facts": [{"op": "NOOP"}, {"op": "NOOP"}, {"op": "UPDATE", "target": 17, "text": "x"}]}),
            "facts[2].target: 17 was not listed",
        ),
        (
            json!({"facts": [{"op": "UPDATE", "target": "5", "text": "x"}]}),
            "facts[0].target: expected an integer",
        ),
        (
            json!({"facts": [{"op": "UPDATE", "target": 5.5, "text": "x"}]}),
            "facts[0].target: 5.5 is not an integer",
        ),
        (
            json!({"facts": [{"op": "UPDATE", "target": -1, "text": "x"}]}),
            "facts[0].target: -1 was not listed",
        ),
        (
            json!({"facts": [{"op": "UPDATE", "target": 1e300, "text": "x"}]}),
            "facts[0].target",
        ),
        (
            json!({"facts": [{"op": "UPDATE", "target": 18446744073709551615u64, "text": "x"}]}),
            "facts[0].target",
        ),
        (
            json!({"facts": [{"op": "UPDATE", "target": 5}]}),
            "facts[0].text: required",
        ),
        (
            json!({"facts": [{"op": "INVALIDATE", "target": 5, "text": "x"}]}),
            "facts[0].text: INVALIDATE",
        ),
        (
            json!({"facts": [{"op": "INVALIDATE"}]}),
            "facts[0].target: required",
        ),
        (
            json!({"facts": [{"op": "INVALIDATE", "target": 5}, {"op": "UPDATE", "target": 5, "text": "y"}]}),
            "facts[1].target: 5 is already the target of facts[0]",
        ),
        (
            json!({"facts": [{"op": "INVALIDATE", "target": 5, "reason": "r".repeat(501)}]}),
            "facts[0].reason",
        ),
        (
            json!({"facts": vec![json!({"op": "NOOP"}); 101]}),
            "facts: 101 operations",
        ),
    ];
    for (input, expected) in cases {
        let err = ops::parse(&input, &listed).unwrap_err();
        assert!(
            err.0.contains(expected),
            "{input}: {err} (expected {expected:?})"
        );
    }
}

/// A small seeded generator of arbitrary JSON (deep, wide, odd numbers and strings): parse never
/// panics, and whatever it accepts applies cleanly or fails cleanly.
#[test]
fn parse_survives_random_json() {
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }
    fn value(r: &mut Rng, depth: u32) -> Value {
        const WORDS: &[&str] = &[
            "ADD",
            "UPDATE",
            "INVALIDATE",
            "NOOP",
            "op",
            "facts",
            "text",
            "target",
            "subject",
            "valid_from",
            "valid_to",
            "reason",
            "2026-05-03",
            "2026-05-03T09:00:00Z",
            "",
            "\u{0}",
            "💥",
            "5",
        ];
        match r.below(if depth > 4 { 5 } else { 8 }) {
            0 => Value::Null,
            1 => Value::Bool(r.below(2) == 0),
            2 => json!(r.next() as i64 % 10),
            3 => json!(f64::from(r.below(1000) as u32) / 7.0),
            4 => json!(WORDS[r.below(WORDS.len() as u64) as usize]),
            5 | 6 => {
                let mut m = serde_json::Map::new();
                for _ in 0..r.below(5) {
                    let k = WORDS[r.below(WORDS.len() as u64) as usize];
                    m.insert(k.to_string(), value(r, depth + 1));
                }
                Value::Object(m)
            }
            _ => Value::Array((0..r.below(5)).map(|_| value(r, depth + 1)).collect()),
        }
    }
    let (_dir, s) = store();
    let v = s.insert(NS, "seed fact", None, &who("c"), 1).unwrap().added[0];
    let listed: HashSet<i64> = [v, 5].into();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut accepted = 0;
    for i in 0..6_000 {
        // Half of the inputs are shaped like the contract, so parsing gets deep.
        let input = if i % 2 == 0 {
            let items: Vec<Value> = (0..rng.below(4))
                .map(|_| {
                    let mut item = value(&mut rng, 3);
                    if let Value::Object(m) = &mut item {
                        m.insert(
                            "op".into(),
                            json!(["ADD", "UPDATE", "INVALIDATE", "NOOP"][rng.below(4) as usize]),
                        );
                    }
                    item
                })
                .collect();
            json!({ "facts": items })
        } else {
            value(&mut rng, 0)
        };
        if let Ok(ops) = ops::parse(&input, &listed) {
            accepted += 1;
            let before = s.list(NS, View::History).unwrap();
            if s.apply(NS, &ops, &who("c"), 2 + i).is_err() {
                assert_eq!(s.list(NS, View::History).unwrap(), before, "{input}");
            }
        }
    }
    assert!(
        accepted > 100,
        "the generator reaches valid inputs too ({accepted})"
    );
    assert!(s.list(NS, View::Current).unwrap().len() <= 1 + accepted);
}

#[test]
fn subjects_become_entities_with_aliases() {
    let (_dir, s) = store();
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
    let b = s
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
    let ids = |v: Vec<FactVersion>| v.into_iter().map(|v| v.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.about(&ns, "orion LAUNCH!", View::Current).unwrap()),
        vec![b, a]
    );
    assert!(
        s.about(&ns, "Orion", View::Current).unwrap().is_empty(),
        "no alias yet"
    );
    s.alias(NS, "the orion launch", "Orion", 4).unwrap();
    assert_eq!(
        ids(s.about(&ns, "Orion", View::Current).unwrap()),
        vec![b, a]
    );
    assert_eq!(ids(s.about(&ns, "Vega", View::Current).unwrap()), vec![c]);
    // An alias cannot steal another subject, nor name nothing.
    assert!(
        s.alias(NS, "Vega", "Orion", 5)
            .unwrap_err()
            .to_string()
            .contains("another subject")
    );
    assert!(s.alias(NS, "Nothing", "x", 5).is_err());
    // The views apply: after an update, the old version is about Orion only in the past.
    s.apply(
        NS,
        &[Op::Update {
            target: a,
            text: "The Orion launch is on May 24".into(),
            subject: None,
            predicate: None,
            object: None,
            valid_from: None,
            valid_to: None,
            reason: None,
        }],
        &who("c"),
        10,
    )
    .unwrap();
    let now = s.about(&ns, "Orion", View::Current).unwrap();
    assert_eq!(now.len(), 2);
    assert!(now.iter().all(|v| v.id != a));
    assert!(ids(s.about(&ns, "Orion", View::BelievedAt(5)).unwrap()).contains(&a));
    assert_eq!(s.about(&ns, "Orion", View::History).unwrap().len(), 3);
    // Entities are per namespace: another agent's "Orion" is another entity.
    assert!(
        s.about(&["agent/cto".to_string()], "Orion", View::Current)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn extracted_exchanges_are_remembered_with_their_batch() {
    let (_dir, s) = store();
    assert!(!s.extracted(NS, "h1").unwrap());
    s.apply_marking(NS, &[Op::Noop], &who("c"), 1, Some("h1"))
        .unwrap();
    assert!(s.extracted(NS, "h1").unwrap());
    assert!(!s.extracted("agent/cto", "h1").unwrap());
    // A failed batch does not mark its exchange.
    assert!(
        s.apply_marking(
            NS,
            &[Op::Invalidate {
                target: 42,
                reason: None,
                valid_to: None
            }],
            &who("c"),
            2,
            Some("h2")
        )
        .is_err()
    );
    assert!(!s.extracted(NS, "h2").unwrap());
    s.mark_extracted(NS, "h2", 3).unwrap();
    s.mark_extracted(NS, "h2", 4).unwrap();
    assert!(s.extracted(NS, "h2").unwrap());
}

#[test]
fn read_only_beside_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    // A file nobody migrated: a clear error, not a crash.
    crate::schema::open(&path).unwrap();
    let err = FactStore::open_read_only(&path, EmbedSlot::new())
        .err()
        .unwrap();
    assert!(err.to_string().contains("no facts tables yet"), "{err}");

    let writer = FactStore::open(&path, EmbedSlot::new()).unwrap();
    writer.insert(NS, "First", None, &who("c"), 1).unwrap();
    let reader = FactStore::open_read_only(&path, EmbedSlot::new()).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(reader.list(NS, View::Current).unwrap().len(), 1);
    writer.insert(NS, "Second", None, &who("c"), 2).unwrap();
    assert_eq!(
        reader.list(NS, View::Current).unwrap().len(),
        2,
        "sees commits"
    );
    let err = reader.insert(NS, "Third", None, &who("c"), 3).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    assert_eq!(
        reader
            .search(&FactQuery {
                text: "second".into(),
                namespaces: vec![NS.into()],
                view: View::Current,
                limit: 3
            })
            .unwrap()
            .len(),
        1
    );

    // A newer schema is refused.
    let conn = crate::schema::open(&path).unwrap();
    conn.execute(
        "UPDATE schema_versions SET version = 99 WHERE component = 'memory'",
        [],
    )
    .unwrap();
    let err = FactStore::open_read_only(&path, EmbedSlot::new())
        .err()
        .unwrap();
    assert!(err.to_string().contains("newer"), "{err}");
}

/// A deterministic stand-in for MiniLM: words hashed into buckets, so texts sharing words (or a
/// synonym mapped to the same bucket) are close.
struct BagOfWords;

impl Embedder for BagOfWords {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                bag_of_words(t, |w| {
                    // "release" means "launch" to this model: found by meaning, not by words.
                    let w = if w == "release" { "launch" } else { w };
                    let h = w
                        .bytes()
                        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
                    (h % DIM as u64) as usize
                })
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
fn hybrid_search_finds_by_meaning_once_the_embedder_loads() {
    let dir = tempfile::tempdir().unwrap();
    let slot = EmbedSlot::new();
    let s = FactStore::open(&dir.path().join("db.sqlite"), slot.clone()).unwrap();
    // Written before the model loaded: no vector yet.
    let early = s
        .insert(NS, "The Orion launch is on May 17", None, &who("c"), 1)
        .unwrap()
        .added[0];
    s.insert(NS, "Billing is owned by Alice", None, &who("c"), 2)
        .unwrap();
    let q = |text: &str, view| FactQuery {
        text: text.into(),
        namespaces: vec![NS.into()],
        view,
        limit: 5,
    };
    assert!(
        s.search(&q("release", View::Current)).unwrap().is_empty(),
        "BM25 alone: no shared word"
    );

    assert!(slot.set(Arc::new(BagOfWords)));
    // The next batch embeds what was written before (a few per batch), and its own.
    let later = s
        .insert(NS, "Vega release slipped", None, &who("c"), 3)
        .unwrap()
        .added[0];
    let hits = s.search(&q("release", View::Current)).unwrap();
    let ids: Vec<i64> = hits.iter().map(|h| h.version.id).collect();
    assert_eq!(ids[0], later, "both lists agree on it");
    assert!(ids.contains(&early), "found by meaning: {ids:?}");
    assert_eq!(s.embed_pending(10).unwrap(), 0, "backfilled already");

    // Closed versions leave the in-memory vectors, and BelievedAt reads them from SQLite.
    let v = s
        .apply(
            NS,
            &[Op::Update {
                target: early,
                text: "The Orion launch is on May 24".into(),
                subject: None,
                predicate: None,
                object: None,
                valid_from: None,
                valid_to: None,
                reason: None,
            }],
            &who("c"),
            4,
        )
        .unwrap()
        .updated[0]
        .1;
    let now: Vec<i64> = s
        .search(&q("release", View::Current))
        .unwrap()
        .iter()
        .map(|h| h.version.id)
        .collect();
    assert!(now.contains(&v) && !now.contains(&early), "{now:?}");
    let then: Vec<i64> = s
        .search(&q("release", View::BelievedAt(3)))
        .unwrap()
        .iter()
        .map(|h| h.version.id)
        .collect();
    assert!(then.contains(&early) && !then.contains(&v), "{then:?}");

    // Another process's write (same file, another store) is seen: the generation moved.
    let other = FactStore::open(&dir.path().join("db.sqlite"), slot.clone()).unwrap();
    let x = other
        .insert(NS, "Orion launch party in Lyon", None, &who("c"), 5)
        .unwrap()
        .added[0];
    let ids: Vec<i64> = s
        .search(&q("release", View::Current))
        .unwrap()
        .iter()
        .map(|h| h.version.id)
        .collect();
    assert!(ids.contains(&x), "{ids:?}");
}

#[test]
fn search_input_edge_cases() {
    let (_dir, s) = store();
    s.insert(NS, "Alpha beta", None, &who("c"), 1).unwrap();
    for text in [
        "",
        "   ",
        "?!",
        "\"",
        "NEAR(",
        "*",
        "alpha OR",
        "beta\"; DROP TABLE memory_fact_versions; --",
    ] {
        let r = s.search(&FactQuery {
            text: text.into(),
            namespaces: vec![NS.into()],
            view: View::Current,
            limit: 5,
        });
        assert!(r.is_ok(), "{text}: {:?}", r.err());
    }
    assert_eq!(
        s.search(&FactQuery {
            text: "alpha".into(),
            namespaces: vec![],
            view: View::Current,
            limit: 5
        })
        .unwrap()
        .len(),
        0
    );
    assert_eq!(s.list(NS, View::Current).unwrap().len(), 1);
}

#[test]
fn the_store_is_shared_across_threads() {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<FactStore>();
    let (_dir, s) = store();
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
            10
        );
    }
}

#[test]
fn a_namespace_never_matches_another_sharing_its_prefix() {
    let (_dir, s) = store();
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
        assert_eq!(hits.len(), 1, "{view:?}");
        assert_eq!(hits[0].version.namespace, "agent/a");
    }
}
