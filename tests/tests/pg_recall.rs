//! Recall memory (`opc_memory::recall::RecallStore`) on both backends: SQLite in a temp dir and
//! PostgreSQL (`framework.memory.storage: postgres`) in a fresh database. The same behaviours run on
//! each — append then search by keyword and by meaning, a restart that indexes nothing twice and
//! misses nothing, rows written by another connection found by the indexer — with the backend's
//! name in every assertion; plus what only PostgreSQL has to get right: rows whose transactions
//! commit in the other order than their `seq`s (each indexed exactly once), a second node with its
//! own index directory that finds what the first appended and loads its vectors instead of embedding
//! them again, and two nodes embedding the same rows at once (both succeed, each row stored once).
//!
//! The embedder is a deterministic bag of words (so vectors are exercised without the model files),
//! counting the texts it embeds; one test runs the real MiniLM when it is cached (`opc-testgate`,
//! group `embedding`). Without a PostgreSQL server the PostgreSQL half skips with one line, and
//! fails under CI.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

use opc_memory::embed::{EmbedError, EmbedSlot, Embedder};
use opc_memory::recall::{CatchUp, Mode, NewMessage, Query, RecallStore};
use opc_pg::postgres::{self, NoTls};
use opc_tests::postgres::fresh_database;
use opc_tests::word_vectors::words;

static NEVER: AtomicBool = AtomicBool::new(false);

/// A deterministic embedder: each word adds 1 to a component chosen by its hash, normalised. It
/// counts the rows it embeds (not the queries); with a [`Meeting`], its first call waits there for the other node's
/// first call (so that two nodes are embedding the same rows at once).
struct Words {
    texts: Arc<AtomicUsize>,
    meet: Option<Arc<Meeting>>,
    met: AtomicBool,
}

/// Where two embedders' first calls wait for each other (at most 20 s).
#[derive(Default)]
struct Meeting {
    arrived: Mutex<usize>,
    all: Condvar,
}

impl Embedder for Words {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Rows only: a row's embedded text opens with its day (`[…] author: text`), a query's not.
        let rows = texts.iter().filter(|t| t.starts_with('[')).count();
        self.texts.fetch_add(rows, Ordering::SeqCst);
        if let Some(m) = &self.meet
            && !self.met.swap(true, Ordering::SeqCst)
        {
            let mut arrived = m.arrived.lock().unwrap();
            *arrived += 1;
            m.all.notify_all();
            let _ = m
                .all
                .wait_timeout_while(arrived, Duration::from_secs(20), |n| *n < 2)
                .unwrap();
        }
        Ok(texts.iter().map(|t| words(t)).collect())
    }
    fn model_id(&self) -> &'static str {
        "test-words"
    }
    fn dimensions(&self) -> usize {
        opc_memory::embed::DIM
    }
}

/// Catch up until both indexes hold every committed row (a transaction still open anywhere on the
/// server holds the horizon back for a moment: tests run side by side on one server); what was
/// done, summed.
fn settle(store: &RecallStore) -> CatchUp {
    try_settle(store).unwrap()
}

fn try_settle(store: &RecallStore) -> Result<CatchUp, opc_memory::recall::RecallError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sum = CatchUp::default();
    loop {
        let done = store.catch_up(&NEVER)?;
        sum.indexed += done.indexed;
        sum.embedded += done.embedded;
        let (bm25, vectors, last) = store.cursors()?;
        if bm25 == last && vectors == last {
            return Ok(sum);
        }
        assert!(
            Instant::now() < deadline,
            "not caught up: {:?}",
            (bm25, vectors, last)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A slot holding a [`Words`] embedder, and its count of rows embedded.
fn counted(meet: Option<Arc<Meeting>>) -> (EmbedSlot, Arc<AtomicUsize>) {
    let texts = Arc::new(AtomicUsize::new(0));
    let slot = EmbedSlot::with(Arc::new(Words {
        texts: texts.clone(),
        meet,
        met: AtomicBool::new(false),
    }));
    (slot, texts)
}

/// Where the truth is: a SQLite file, or a PostgreSQL database (each node keeps its BM25 index in
/// a directory of its own under `dir`).
enum Db {
    Sqlite {
        path: PathBuf,
        _dir: tempfile::TempDir,
    },
    Postgres {
        url: String,
        dir: tempfile::TempDir,
    },
}

impl Db {
    fn name(&self) -> &'static str {
        match self {
            Db::Sqlite { .. } => "sqlite",
            Db::Postgres { .. } => "postgres",
        }
    }

    /// Open the store as node `node` (SQLite has one node: its index sits beside the file).
    fn open(&self, node: &str, slot: EmbedSlot) -> RecallStore {
        match self {
            Db::Sqlite { path, .. } => RecallStore::open(path, slot).unwrap(),
            Db::Postgres { url, dir } => {
                let conn = opc_pg::Blocking::connect(url, "recall-test").unwrap();
                RecallStore::open_postgres(conn, &dir.path().join(node), slot)
                    .unwrap_or_else(|e| panic!("postgres: open {node}: {e}"))
            }
        }
    }

    /// Append `text` outside the store, on a connection of its own (as the engine does, in its own
    /// transaction); its seq.
    fn append_elsewhere(&self, text: &str) -> i64 {
        match self {
            Db::Sqlite { path, .. } => {
                let conn = rusqlite::Connection::open(path).unwrap();
                opc_memory::recall::append_in(&conn, &msg("ceo", "c9", 5_000, text)).unwrap()
            }
            Db::Postgres { url, .. } => raw(url).query_one(INSERT, &[&text]).unwrap().get(0),
        }
    }
}

const INSERT: &str = "INSERT INTO recall_messages (namespace, author, conversation, time_ms, \
                      content_hash, text) VALUES ('ceo', 'user', 'c9', 5000, 'h', $1) RETURNING seq";

fn raw(url: &str) -> postgres::Client {
    postgres::Client::connect(url, NoTls).unwrap()
}

fn sqlite() -> Db {
    let dir = tempfile::tempdir().unwrap();
    Db::Sqlite {
        path: dir.path().join("db.sqlite"),
        _dir: dir,
    }
}

/// A fresh PostgreSQL database for `test`, if there is a server (a skip line here, a failure under
/// CI).
fn postgres(test: &str) -> Option<Db> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(fresh_database(test))
        .map(|url| Db::Postgres {
            url,
            dir: tempfile::tempdir().unwrap(),
        })
}

/// SQLite, and PostgreSQL when there is a server.
fn backends(test: &str) -> Vec<Db> {
    let mut out = vec![sqlite()];
    out.extend(postgres(test));
    out
}

fn msg(ns: &str, conversation: &str, time_ms: i64, text: &str) -> NewMessage {
    NewMessage {
        namespace: ns.into(),
        author: "alice".into(),
        conversation: conversation.into(),
        task: Some("task-1".into()),
        thread: Some("t1".into()),
        source_id: None,
        time_ms,
        text: text.into(),
    }
}

/// The seqs a search finds for `text` among every namespace used here.
fn found(store: &RecallStore, text: &str, mode: Mode) -> Vec<i64> {
    let mut q = Query::new(text, vec!["ceo".into(), "cto".into()], mode, 50);
    q.tuning.neighbour = 0.0;
    store
        .search(&q)
        .unwrap()
        .into_iter()
        .map(|h| h.message.seq)
        .collect()
}

#[test]
fn appended_messages_are_found_by_keyword_and_by_meaning() {
    for db in backends("recall_append_search") {
        let be = db.name();
        let (slot, _) = counted(None);
        let store = db.open("a", slot);
        let launch = store
            .append(&msg("ceo", "c1", 1_000, "The launch date moved to March"))
            .unwrap();
        let secret = store
            .append_all(&[
                msg("cto", "c1", 2_000, "The launch date is secret"),
                msg("ceo", "c2", 3_000, "Lunch is at noon"),
            ])
            .unwrap();
        assert_eq!(secret.len(), 2, "{be}");
        assert!(launch < secret[0] && secret[0] < secret[1], "{be}");
        assert_eq!(
            settle(&store),
            CatchUp {
                indexed: 3,
                embedded: 3
            },
            "{be}"
        );
        assert_eq!(
            store.cursors().unwrap(),
            (secret[1], secret[1], secret[1]),
            "{be}"
        );
        for mode in [Mode::Bm25, Mode::Vector, Mode::Hybrid] {
            let hits = store
                .search(&Query::new("launch date", vec!["ceo".into()], mode, 5))
                .unwrap();
            assert_eq!(hits[0].message.seq, launch, "{be} {mode:?}");
            assert!(
                hits.iter().all(|h| h.message.namespace == "ceo"),
                "{be} {mode:?}"
            );
            let m = &hits[0].message;
            assert_eq!(
                (m.author.as_str(), m.task.as_deref(), m.time_ms),
                ("alice", Some("task-1"), 1_000),
                "{be}"
            );
            assert_eq!(
                m.content_hash,
                msg("", "", 0, "The launch date moved to March").content_hash(),
                "{be}"
            );
        }
        let mut q = Query::new(
            "launch date",
            vec!["ceo".into(), "cto".into()],
            Mode::Bm25,
            5,
        );
        q.range = (1_500, 2_500);
        let hits = store.search(&q).unwrap();
        assert_eq!(hits.len(), 1, "{be}");
        assert_eq!(hits[0].message.seq, secret[0], "{be}");
    }
}

#[test]
fn a_reopened_store_indexes_nothing_twice_and_misses_nothing() {
    for db in backends("recall_reopen") {
        let be = db.name();
        let (slot, texts) = counted(None);
        let first = {
            let store = db.open("a", slot.clone());
            let seqs = store
                .append_all(&[
                    msg("ceo", "c1", 1_000, "budget review on monday"),
                    msg("ceo", "c1", 2_000, "budget approved by the board"),
                ])
                .unwrap();
            settle(&store);
            seqs
        };
        assert_eq!(texts.load(Ordering::SeqCst), 2, "{be}");
        // Reopened: caught up at once (the vectors loaded from the database), nothing to do.
        let store = db.open("a", slot.clone());
        assert_eq!(
            store.cursors().unwrap(),
            (first[1], first[1], first[1]),
            "{be}"
        );
        assert_eq!(store.catch_up(&NEVER).unwrap(), CatchUp::default(), "{be}");
        assert_eq!(texts.load(Ordering::SeqCst), 2, "{be}: embedded again");
        // Rows written while the store is closed are taken at the next start, once.
        let later = store
            .append(&msg("ceo", "c1", 3_000, "budget frozen"))
            .unwrap();
        drop(store);
        let elsewhere = db.append_elsewhere("budget frozen again elsewhere");
        let store = db.open("a", slot.clone());
        let (bm25, vectors, last) = store.cursors().unwrap();
        assert_eq!(last, elsewhere, "{be}");
        assert!(bm25 < later && vectors < later, "{be}: {bm25} {vectors}");
        assert_eq!(
            settle(&store),
            CatchUp {
                indexed: 2,
                embedded: 2
            },
            "{be}"
        );
        assert_eq!(store.cursors().unwrap(), (last, last, last), "{be}");
        assert_eq!(store.catch_up(&NEVER).unwrap(), CatchUp::default(), "{be}");
        assert_eq!(texts.load(Ordering::SeqCst), 4, "{be}");
        for mode in [Mode::Bm25, Mode::Vector] {
            let mut seqs = found(&store, "budget", mode);
            seqs.sort_unstable();
            assert_eq!(
                seqs,
                vec![first[0], first[1], later, elsewhere],
                "{be} {mode:?}"
            );
        }
    }
}

#[test]
fn the_background_indexer_finds_rows_other_connections_wrote() {
    for db in backends("recall_indexer") {
        let be = db.name();
        let (slot, _) = counted(None);
        let store = db.open("a", slot);
        let indexer = store.spawn_indexer().unwrap();
        // Nobody notifies the store: the indexer's poll finds the row.
        let seq = db.append_elsewhere("quarterly forecast");
        let deadline = Instant::now() + Duration::from_secs(20);
        while store.cursors().unwrap() != (seq, seq, seq) {
            assert!(
                Instant::now() < deadline,
                "{be}: not indexed: {:?}",
                store.cursors()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        indexer.shutdown();
        assert_eq!(found(&store, "forecast", Mode::Bm25), vec![seq], "{be}");
        assert_eq!(found(&store, "forecast", Mode::Vector)[0], seq, "{be}");
    }
}

/// Two transactions draw their `seq`s in one order and commit in the other (both ways round: the
/// first to insert is the first to take a transaction id, or the last): the indexer never takes a
/// row before its commit, never skips the one that committed last, and takes each exactly once,
/// in the BM25 index and in the vectors, across a restart too.
#[test]
fn rows_committed_out_of_seq_order_are_indexed_exactly_once() {
    let Some(db) = postgres("recall_out_of_order") else {
        return;
    };
    let Db::Postgres { url, .. } = &db else {
        unreachable!()
    };
    let (slot, texts) = counted(None);
    let store = db.open("a", slot.clone());
    let mut indexed = CatchUp::default();
    let mut total = |c: CatchUp| {
        indexed.indexed += c.indexed;
        indexed.embedded += c.embedded;
    };
    let mut expected = Vec::new();
    for xid_first in [false, true] {
        let (mut one, mut two) = (raw(url), raw(url));
        let mut t1 = one.transaction().unwrap();
        if xid_first {
            // t1 takes its transaction id before t2, its seq after.
            t1.query_one("SELECT pg_current_xact_id()", &[]).unwrap();
        }
        let mut t2 = two.transaction().unwrap();
        let (s1, s2): (i64, i64) = if xid_first {
            let s2 = t2.query_one(INSERT, &[&"zebra second"]).unwrap().get(0);
            (t1.query_one(INSERT, &[&"zebra first"]).unwrap().get(0), s2)
        } else {
            let s1 = t1.query_one(INSERT, &[&"zebra first"]).unwrap().get(0);
            (s1, t2.query_one(INSERT, &[&"zebra second"]).unwrap().get(0))
        };
        // The transaction that began first commits last.
        t2.commit().unwrap();
        total(store.catch_up(&NEVER).unwrap());
        // The open transaction holds the horizon: neither row is taken yet (the uncommitted one
        // cannot be, and taking the committed one would move the cursor past the other).
        let seen = found(&store, "zebra", Mode::Bm25);
        assert!(
            !seen.contains(&s1) && !seen.contains(&s2),
            "xid first {xid_first}: taken before the horizon passed: {seen:?}"
        );
        let (bm25, vectors, last) = store.cursors().unwrap();
        assert_eq!(last, s2, "xid first {xid_first}");
        assert!(
            bm25 < s2 && vectors < s2,
            "xid first {xid_first}: {bm25} {vectors}"
        );
        t1.commit().unwrap();
        total(settle(&store));
        expected.extend([s1, s2]);
        let mut seen = found(&store, "zebra", Mode::Bm25);
        seen.sort_unstable();
        expected.sort_unstable();
        assert_eq!(seen, expected, "xid first {xid_first}");
        let last = *expected.iter().max().unwrap();
        assert_eq!(store.cursors().unwrap(), (last, last, last));
    }
    assert_eq!(
        indexed,
        CatchUp {
            indexed: 4,
            embedded: 4
        },
        "a row indexed twice or missed"
    );
    let mut vector_hits = found(&store, "zebra", Mode::Vector);
    vector_hits.sort_unstable();
    assert_eq!(vector_hits, expected, "the vectors");
    // A restart resumes after both: nothing is indexed or embedded again.
    drop(store);
    let store = db.open("a", slot);
    assert_eq!(store.catch_up(&NEVER).unwrap(), CatchUp::default());
    assert_eq!(texts.load(Ordering::SeqCst), 4);
    let mut vector_hits = found(&store, "zebra", Mode::Vector);
    vector_hits.sort_unstable();
    assert_eq!(vector_hits, expected, "the vectors after a restart");
}

/// A second node over the same database, with its own index directory, finds what the first
/// appended, by keyword (its own BM25 index) and by meaning (the first node's vectors, loaded, not
/// embedded again); and the first finds what the second appends.
#[test]
fn a_second_node_finds_what_the_first_appended_and_embeds_nothing_twice() {
    let Some(db) = postgres("recall_two_nodes") else {
        return;
    };
    let (slot_a, texts_a) = counted(None);
    let (slot_b, texts_b) = counted(None);
    let a = db.open("a", slot_a);
    let seqs = a
        .append_all(&[
            msg("ceo", "c1", 1_000, "harbour inspection scheduled"),
            msg("cto", "c2", 2_000, "harbour cranes need repair"),
        ])
        .unwrap();
    assert_eq!(
        settle(&a),
        CatchUp {
            indexed: 2,
            embedded: 2
        }
    );
    let b = db.open("b", slot_b);
    assert_eq!(
        settle(&b),
        CatchUp {
            indexed: 2,
            embedded: 0
        },
        "node b embedded rows node a had embedded"
    );
    assert_eq!(b.cursors().unwrap(), (seqs[1], seqs[1], seqs[1]));
    for mode in [Mode::Bm25, Mode::Vector] {
        let mut hits = found(&b, "harbour", mode);
        hits.sort_unstable();
        assert_eq!(hits, seqs, "node b, {mode:?}");
    }
    let third = b
        .append(&msg("ceo", "c1", 3_000, "harbour reopened"))
        .unwrap();
    // Whichever node comes first embeds it; the other loads it.
    assert_eq!(settle(&b).embedded, 1);
    assert_eq!(
        settle(&a),
        CatchUp {
            indexed: 1,
            embedded: 0
        }
    );
    assert!(found(&a, "reopened", Mode::Bm25).contains(&third));
    assert_eq!(found(&a, "harbour reopened", Mode::Vector)[0], third);
    assert_eq!(
        texts_a.load(Ordering::SeqCst) + texts_b.load(Ordering::SeqCst),
        3
    );
    // Each node's index is its own directory.
    let Db::Postgres { dir, .. } = &db else {
        unreachable!()
    };
    for node in ["a", "b"] {
        assert!(has_index(&dir.path().join(node)), "node {node}'s index");
    }
}

fn has_index(dir: &Path) -> bool {
    dir.join("meta.json").exists()
}

/// Two nodes embed the same rows at once (each saw them without a vector): both catch-ups succeed,
/// each row is stored once, and both nodes search the stored vectors. (Without `ON CONFLICT DO
/// NOTHING` the slower node's insert fails on the primary key.)
#[test]
fn two_nodes_embedding_the_same_rows_at_once_both_succeed() {
    let Some(db) = postgres("recall_embed_race") else {
        return;
    };
    let Db::Postgres { url, .. } = &db else {
        unreachable!()
    };
    let meeting = Arc::new(Meeting::default());
    let (slot_a, texts_a) = counted(Some(meeting.clone()));
    let (slot_b, texts_b) = counted(Some(meeting));
    let a = db.open("a", slot_a);
    let b = db.open("b", slot_b);
    // Each node takes its index writer now, so that the race starts at the vectors.
    assert_eq!(a.catch_up(&NEVER).unwrap(), CatchUp::default());
    assert_eq!(b.catch_up(&NEVER).unwrap(), CatchUp::default());
    let seqs = a
        .append_all(
            &(0..5)
                .map(|i| msg("ceo", "c1", i, &format!("glacier survey number {i}")))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let start = Arc::new(Barrier::new(2));
    let racers: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .map(|node| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                try_settle(&node)
            })
        })
        .collect();
    for (node, racer) in ["a", "b"].iter().zip(racers) {
        let done = racer
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("node {node}: {e}"));
        assert_eq!(done.indexed, 5, "node {node}");
    }
    // Both embedded (each saw the rows without vectors), and the table holds each row once.
    assert_eq!(texts_a.load(Ordering::SeqCst), 5);
    assert_eq!(texts_b.load(Ordering::SeqCst), 5);
    let stored: i64 = raw(url)
        .query_one(
            "SELECT COUNT(*) FROM recall_vectors WHERE seq = ANY($1)",
            &[&seqs],
        )
        .unwrap()
        .get(0);
    assert_eq!(stored, 5);
    for (node, store) in [("a", &a), ("b", &b)] {
        assert_eq!(
            store.cursors().unwrap(),
            (seqs[4], seqs[4], seqs[4]),
            "node {node}"
        );
        assert_eq!(
            found(store, "glacier survey number 3", Mode::Vector)[0],
            seqs[3],
            "node {node}"
        );
    }
}

/// The real embedder (when it is cached): a paraphrase is found by meaning on both backends.
#[test]
fn the_real_model_finds_a_paraphrase_on_both_backends() {
    let Some(model) = opc_testgate::need(
        opc_testgate::Group::Embedding,
        "the_real_model_finds_a_paraphrase_on_both_backends",
        opc_memory::embed::MiniLm::load_shared()
            .map_err(|e| format!("embedding model not available ({e}); `opc models fetch`")),
    ) else {
        return;
    };
    for db in backends("recall_real_model") {
        let be = db.name();
        let store = db.open("a", EmbedSlot::with(model.clone()));
        let seqs = store
            .append_all(&[
                msg("ceo", "c1", 1_000, "The cat sat on the mat all afternoon."),
                msg(
                    "ceo",
                    "c1",
                    2_000,
                    "Quarterly revenue grew by eight percent.",
                ),
            ])
            .unwrap();
        assert_eq!(settle(&store).embedded, 2, "{be}");
        let hits = store
            .search(&Query::new(
                "a kitten resting on a rug",
                vec!["ceo".into()],
                Mode::Vector,
                2,
            ))
            .unwrap();
        assert_eq!(hits[0].message.seq, seqs[0], "{be}");
        assert_eq!(hits[0].vector_rank, Some(1), "{be}");
    }
}
