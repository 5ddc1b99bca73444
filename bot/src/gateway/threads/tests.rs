//! The gateway's records on both backends: SQLite in a temporary directory, and PostgreSQL in a
//! fresh database from `opc_tests::postgres` (skipped with one line where there is no server, a
//! failure under CI). Here, not in `tests/tests/`, because `opc` is a binary crate: its modules are
//! reachable from its own unit tests only.
//!
//! Each test names its backend in its assertion messages. The race test opens two `Threads` with
//! connections of their own, as two nodes sharing the database would.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};

use opc_adapters::{CardState, Place, Platform, Posted};

use super::*;

/// A database both backends' `Threads` can be opened on, as often as a test needs.
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
    fn open(&self) -> Threads {
        match self {
            Db::Sqlite(dir) => Threads::open(&dir.path().join("opc.db")).unwrap(),
            Db::Postgres(url) => {
                Threads::open_postgres(opc_pg::Blocking::connect(url, "gateway-test").unwrap())
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

fn place(thread: &str) -> Place {
    Place {
        platform: Platform::Slack,
        workspace: "T1".into(),
        channel: "C1".into(),
        thread: thread.into(),
    }
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

#[test]
fn a_thread_keeps_its_first_conversation_across_reopening() {
    for db in databases("threads_first_conversation") {
        let backend = db.name();
        let threads = db.open();
        assert_eq!(
            threads.bind(&place("1.0"), "conv-a").unwrap(),
            "conv-a",
            "{backend}"
        );
        // A racing second message loses: the thread keeps conv-a.
        assert_eq!(
            threads.bind(&place("1.0"), "conv-b").unwrap(),
            "conv-a",
            "{backend}"
        );
        drop(threads);
        let threads = db.open();
        let (conversation, found) = threads
            .conversation(Platform::Slack, "T1", "1.0")
            .unwrap()
            .unwrap();
        assert_eq!(
            (conversation.as_str(), found),
            ("conv-a", place("1.0")),
            "{backend}"
        );
        assert!(
            threads
                .conversation(Platform::Slack, "T1", "2.0")
                .unwrap()
                .is_none(),
            "{backend}"
        );
        assert!(
            threads
                .conversation(Platform::Discord, "T1", "1.0")
                .unwrap()
                .is_none(),
            "{backend}"
        );
        assert_eq!(
            threads.place_of("conv-a").unwrap(),
            Some(place("1.0")),
            "{backend}"
        );
        assert_eq!(threads.place_of("conv-b").unwrap(), None, "{backend}");
    }
}

#[test]
fn platforms_name_every_conversation_from_a_chat() {
    for db in databases("threads_platforms") {
        let backend = db.name();
        let threads = db.open();
        assert!(threads.platforms().unwrap().is_empty(), "{backend}");
        threads.bind(&place("1.0"), "conv-slack").unwrap();
        let web = Place {
            platform: Platform::Web,
            workspace: String::new(),
            channel: "w1".into(),
            thread: "w1".into(),
        };
        threads.bind(&web, "conv-web").unwrap();
        let platforms = threads.platforms().unwrap();
        assert_eq!(platforms.len(), 2, "{backend}: {platforms:?}");
        assert_eq!(
            platforms.get("conv-slack").map(String::as_str),
            Some("slack"),
            "{backend}"
        );
        assert_eq!(
            platforms.get("conv-web").map(String::as_str),
            Some("web"),
            "{backend}"
        );
        assert_eq!(
            threads.place_of("conv-web").unwrap(),
            Some(web),
            "{backend}"
        );
    }
}

#[test]
fn cards_are_kept_per_message_and_redrawn_in_place() {
    for db in databases("threads_cards") {
        let backend = db.name();
        let threads = db.open();
        let slack = Posted {
            platform: Platform::Slack,
            channel: "C1".into(),
            id: "1.5".into(),
        };
        let web = Posted {
            platform: Platform::Web,
            channel: "w1".into(),
            id: "3".into(),
        };
        threads
            .add_card(&slack, &card(7, CardState::Pending))
            .unwrap();
        threads
            .add_card(&web, &card(7, CardState::Pending))
            .unwrap();
        threads
            .add_card(&slack, &card(8, CardState::Pending))
            .unwrap();
        // Redrawn: the message's card is replaced, not added.
        let decided = CardState::Decided {
            option: "approve".into(),
            by: "ana".into(),
            at: "2026-01-01T00:00:00Z".into(),
            approved: true,
        };
        threads.add_card(&slack, &card(7, decided.clone())).unwrap();
        drop(threads);
        let threads = db.open();
        let mut cards = threads.cards(7).unwrap();
        cards.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        assert_eq!(cards.len(), 2, "{backend}: {cards:?}");
        assert_eq!(cards[0].0, slack, "{backend}");
        assert_eq!(cards[0].1.state, decided, "{backend}");
        assert_eq!(cards[1].0, web, "{backend}");
        assert_eq!(cards[1].1.state, CardState::Pending, "{backend}");
        assert_eq!(threads.cards(8).unwrap().len(), 1, "{backend}");
        assert!(threads.cards(9).unwrap().is_empty(), "{backend}");
    }
}

/// Two nodes bind the first message of the same threads at the same moment, each with a
/// conversation of its own: for every thread both must end with the same one, the one recorded.
#[test]
fn two_nodes_binding_one_thread_at_once_agree_on_its_conversation() {
    const THREADS: usize = 60;
    for db in databases("threads_bind_race") {
        let backend = db.name();
        let nodes = [Arc::new(db.open()), Arc::new(db.open())];
        let start = Arc::new(Barrier::new(nodes.len()));
        let runs: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                let (node, start) = (node.clone(), start.clone());
                std::thread::spawn(move || {
                    (0..THREADS)
                        .map(|t| {
                            // Both nodes start each thread's first message together.
                            start.wait();
                            node.bind(&place(&format!("{t}.0")), &format!("node{n}-{t}"))
                                .map_err(|e| e.to_string())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut answers = runs.into_iter().map(|r| r.join().unwrap());
        let (node0, node1) = (answers.next().unwrap(), answers.next().unwrap());
        for (t, (first, second)) in node0.iter().zip(&node1).enumerate() {
            let (first, second) = (first.as_ref(), second.as_ref());
            assert!(
                first.is_ok() && second.is_ok(),
                "{backend}: thread {t}: {first:?} / {second:?}"
            );
            assert_eq!(first, second, "{backend}: thread {t}");
            let stored = nodes[0]
                .conversation(Platform::Slack, "T1", &format!("{t}.0"))
                .unwrap()
                .map(|(c, _)| c);
            assert_eq!(
                stored.as_deref(),
                first.ok().map(String::as_str),
                "{backend}: thread {t}"
            );
        }
    }
}
