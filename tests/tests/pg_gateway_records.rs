//! The web chat's transcript on both backends: SQLite in a temporary directory, and PostgreSQL in a
//! fresh database (`opc_tests::postgres`; without a server the PostgreSQL half skips with one line,
//! and fails under CI). Every assertion names its backend.
//!
//! The gateway's threads and cards (`opc`'s `gateway::threads`) are tested the same way by that
//! module's own unit tests: `opc` is a binary crate, so its modules cannot be reached from here.
//!
//! The race: two `Transcript`s with connections of their own, as two nodes sharing the database,
//! append to one conversation (that neither has created yet) at the same time; its numbers must be
//! distinct and consecutive from 1.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};

use opc_adapters::web::transcript::{Author, Entry, MAX_MESSAGES, MAX_PROGRESS, Transcript};
use opc_adapters::{Card, CardState};

/// A database both backends' `Transcript` can be opened on, as often as a test needs.
enum Db {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Db {
    fn name(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    /// A new connection to the database, as a (re)started node would open.
    fn open(&self) -> Transcript {
        match self {
            Db::Sqlite(dir) => Transcript::open(Some(&dir.path().join("opc.db"))).unwrap(),
            Db::Postgres(url) => {
                Transcript::open_postgres(opc_pg::Blocking::connect(url, "web-test").unwrap())
                    .unwrap()
            }
        }
    }
}

/// SQLite always; PostgreSQL when there is a server.
fn databases(test: &str) -> Vec<Db> {
    let mut dbs = vec![Db::Sqlite(tempfile::tempdir().unwrap())];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Some(url) = runtime.block_on(opc_tests::postgres::fresh_database(test)) {
        dbs.push(Db::Postgres(url));
    }
    dbs
}

fn card(approval: i64, state: CardState) -> Card {
    Card {
        approval,
        agent: "support".into(),
        role: "Support".into(),
        path: vec!["ceo".into(), "support".into()],
        summary: "Refund?".into(),
        options: vec!["approve".into(), "reject".into()],
        go_ahead: Some(0),
        state,
    }
}

fn decided() -> CardState {
    CardState::Decided {
        option: "approve".into(),
        by: "ana".into(),
        at: "2026-01-01T00:00:00Z".into(),
        approved: true,
    }
}

#[test]
fn a_conversation_survives_reopening_with_its_messages_cards_notices_and_trace() {
    for db in databases("web_transcript_reopen") {
        let backend = db.name();
        {
            let mut t = db.open();
            t.create("c1").unwrap();
            assert!(t.exists("c1").unwrap(), "{backend}");
            assert!(!t.exists("nope").unwrap(), "{backend}");
            assert_eq!(
                t.push("c1", Author::User, "hi", None, false).unwrap(),
                Some(1),
                "{backend}"
            );
            assert_eq!(
                t.push("c1", Author::Bot, "…", None, false).unwrap(),
                Some(2),
                "{backend}"
            );
            assert!(t.edit("c1", 2, "hello").unwrap(), "{backend}");
            assert_eq!(
                t.push(
                    "c1",
                    Author::Bot,
                    "card",
                    Some(&card(7, CardState::Pending)),
                    false
                )
                .unwrap(),
                Some(3),
                "{backend}"
            );
            assert_eq!(
                t.push("c1", Author::Notice, "note", None, false).unwrap(),
                Some(4),
                "{backend}"
            );
            assert!(
                t.progress("c1", &serde_json::json!({"event": "delegated"}))
                    .unwrap(),
                "{backend}"
            );
            // Unknown conversations are not created by accident.
            assert_eq!(
                t.push("nope", Author::Bot, "x", None, false).unwrap(),
                None,
                "{backend}"
            );
            assert!(
                !t.progress("nope", &serde_json::json!({})).unwrap(),
                "{backend}"
            );
            assert!(!t.exists("nope").unwrap(), "{backend}");
            // Creating twice is harmless.
            t.create("c1").unwrap();
        }
        let mut t = db.open();
        let replay = t.replay("c1").unwrap().unwrap();
        assert_eq!(replay.len(), 5, "{backend}: {replay:?}");
        assert_eq!(
            replay[0],
            Entry::Message {
                number: 1,
                author: Author::User,
                text: "hi".into()
            },
            "{backend}"
        );
        assert_eq!(
            replay[1],
            Entry::Message {
                number: 2,
                author: Author::Bot,
                text: "hello".into()
            },
            "{backend}"
        );
        assert!(
            matches!(&replay[2], Entry::Card { number: 3, card } if card.approval == 7),
            "{backend}: {:?}",
            replay[2]
        );
        assert!(
            matches!(
                &replay[3],
                Entry::Message {
                    author: Author::Notice,
                    ..
                }
            ),
            "{backend}"
        );
        assert_eq!(
            replay[4],
            Entry::Progress(serde_json::json!({"event": "delegated"})),
            "{backend}"
        );
        let found = t.card(7).unwrap().unwrap();
        assert_eq!(
            (found.conversation.as_str(), found.number),
            ("c1", 3),
            "{backend}"
        );
        assert!(t.card(8).unwrap().is_none(), "{backend}");
        // Numbers continue after a reopen.
        assert_eq!(
            t.push("c1", Author::User, "again", None, false).unwrap(),
            Some(5),
            "{backend}"
        );
        assert!(t.replay("nope").unwrap().is_none(), "{backend}");
        // `push` with `create` records a new conversation; its numbers start at 1.
        assert_eq!(
            t.push("c2", Author::Bot, "first", None, true).unwrap(),
            Some(1),
            "{backend}"
        );
        assert!(t.exists("c2").unwrap(), "{backend}");
    }
}

#[test]
fn a_card_is_redrawn_in_place_and_is_not_edited_as_text() {
    for db in databases("web_transcript_cards") {
        let backend = db.name();
        let mut t = db.open();
        let pending = card(7, CardState::Pending);
        assert_eq!(
            t.push("c", Author::Bot, "msg", None, true).unwrap(),
            Some(1),
            "{backend}"
        );
        assert_eq!(
            t.push(
                "c",
                Author::Bot,
                &pending.to_markdown(),
                Some(&pending),
                true
            )
            .unwrap(),
            Some(2),
            "{backend}"
        );
        // A card is not a message to edit, and a message is not a card to redraw.
        assert!(!t.edit("c", 2, "text").unwrap(), "{backend}");
        assert!(!t.update_card("c", 1, &pending).unwrap(), "{backend}");
        assert!(!t.edit("c", 9, "text").unwrap(), "{backend}");
        assert!(!t.update_card("other", 2, &pending).unwrap(), "{backend}");
        let done = card(7, decided());
        assert!(t.update_card("c", 2, &done).unwrap(), "{backend}");
        drop(t);
        let t = db.open();
        let found = t.card(7).unwrap().unwrap();
        assert_eq!(found.card, done, "{backend}");
        assert_eq!(
            (found.conversation.as_str(), found.number),
            ("c", 2),
            "{backend}"
        );
        let replay = t.replay("c").unwrap().unwrap();
        assert_eq!(
            replay[1],
            Entry::Card {
                number: 2,
                card: done
            },
            "{backend}"
        );
        assert_eq!(
            replay[0],
            Entry::Message {
                number: 1,
                author: Author::Bot,
                text: "msg".into()
            },
            "{backend}"
        );
    }
}

#[test]
fn the_trace_and_the_replay_are_bounded() {
    for db in databases("web_transcript_bounds") {
        let backend = db.name();
        let mut t = db.open();
        t.create("c").unwrap();
        for i in 0..MAX_PROGRESS + 10 {
            t.progress("c", &serde_json::json!({ "i": i })).unwrap();
        }
        let replay = t.replay("c").unwrap().unwrap();
        assert_eq!(replay.len(), MAX_PROGRESS, "{backend}");
        assert_eq!(
            replay[0],
            Entry::Progress(serde_json::json!({ "i": 10 })),
            "{backend}"
        );
        t.create("m").unwrap();
        for i in 0..MAX_MESSAGES + 5 {
            t.push("m", Author::User, &format!("m{i}"), None, false)
                .unwrap();
        }
        let replay = t.replay("m").unwrap().unwrap();
        assert_eq!(replay.len(), MAX_MESSAGES, "{backend}");
        assert_eq!(
            replay[0],
            Entry::Message {
                number: 6,
                author: Author::User,
                text: "m5".into()
            },
            "{backend}"
        );
        assert!(
            matches!(replay.last(), Some(Entry::Message { number, .. }) if *number == (MAX_MESSAGES + 5) as i64),
            "{backend}"
        );
    }
}

/// Two nodes append to one new conversation at once (both creating it): every message gets its own
/// number, and the numbers are exactly 1..=2n; the trace, numbered the same way, keeps every event.
#[test]
fn two_nodes_appending_to_one_conversation_get_distinct_consecutive_numbers() {
    const EACH: usize = 40;
    for db in databases("web_transcript_race") {
        let backend = db.name();
        let start = Arc::new(Barrier::new(2));
        let runs: Vec<_> = (0..2)
            .map(|n| {
                let mut node = db.open();
                let start = start.clone();
                std::thread::spawn(move || {
                    (0..EACH)
                        .map(|i| {
                            start.wait();
                            let number = node
                                .push("shared", Author::User, &format!("node{n}-{i}"), None, true)
                                .map_err(|e| e.to_string())?;
                            node.progress("shared", &serde_json::json!({ "node": n, "i": i }))
                                .map_err(|e| e.to_string())?;
                            Ok::<_, String>(number)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut numbers = Vec::new();
        for run in runs {
            for answer in run.join().unwrap() {
                match answer {
                    Ok(Some(number)) => numbers.push(number),
                    other => panic!("{backend}: a push failed: {other:?}"),
                }
            }
        }
        numbers.sort_unstable();
        let expected: Vec<i64> = (1..=(2 * EACH) as i64).collect();
        assert_eq!(numbers, expected, "{backend}");
        let replay = db.open().replay("shared").unwrap().unwrap();
        let messages: Vec<i64> = replay
            .iter()
            .filter_map(|e| match e {
                Entry::Message { number, .. } => Some(*number),
                _ => None,
            })
            .collect();
        assert_eq!(messages, expected, "{backend}");
        let events = replay
            .iter()
            .filter(|e| matches!(e, Entry::Progress(_)))
            .count();
        assert_eq!(events, 2 * EACH, "{backend}");
    }
}
