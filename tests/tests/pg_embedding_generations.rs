//! Embedding generations on PostgreSQL (`framework.memory.storage: postgres`), two nodes sharing
//! one database: a model change re-embeds in the background while every node keeps searching the
//! old generation (its vectors and its embedder for the query), one node's switch deletes the old
//! vectors, and the other node follows the switch at its next catch-up — loading the new vectors,
//! not embedding them again. An endpoint that is down delays the vectors, never the rows. Recall
//! and facts alike. (SQLite's side is tested in the memory crate: `recall::tests`,
//! `facts::embedding_tests`.)
//!
//! The embedders are test "models" of different sizes (words hashed into buckets by a seed of
//! their own, so two models rank differently), switchable down, counting their texts. Without a
//! PostgreSQL server the tests skip with one line, and fail under CI.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use opc_memory::embed::{EmbedError, EmbedSlot, Embedder};
use opc_memory::facts::{FactQuery, FactStore, Op, Provenance, Source, View};
use opc_memory::recall::generation::GenerationState;
use opc_memory::recall::{Mode, NewMessage, Query, RecallError, RecallStore};
use opc_tests::postgres::fresh_database;

static NEVER: AtomicBool = AtomicBool::new(false);

struct Model {
    id: &'static str,
    dims: usize,
    seed: usize,
    /// Texts it still embeds before it is down (`usize::MAX`: unlimited).
    budget: AtomicUsize,
    texts: AtomicUsize,
}

impl Model {
    fn new(id: &'static str, dims: usize, seed: usize, up: bool) -> Arc<Model> {
        Arc::new(Model {
            id,
            dims,
            seed,
            budget: if up { usize::MAX } else { 0 }.into(),
            texts: 0.into(),
        })
    }

    fn up(&self) {
        self.budget.store(usize::MAX, SeqCst);
    }
}

impl Embedder for Model {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.budget.load(SeqCst) < texts.len() {
            return Err(EmbedError::Unavailable("test endpoint down".into()));
        }
        self.texts.fetch_add(texts.len(), SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; self.dims];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(self.seed, |h, b| h.wrapping_mul(31) ^ usize::from(b));
                    v[h % self.dims] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                v.into_iter().map(|x| x / n).collect()
            })
            .collect())
    }
    fn model_id(&self) -> &str {
        self.id
    }
    fn dimensions(&self) -> usize {
        self.dims
    }
}

fn database(test: &str) -> Option<String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(fresh_database(test))
}

fn connect(url: &str) -> opc_pg::Blocking {
    opc_pg::Blocking::connect(url, "generations-test").unwrap()
}

fn animal(i: usize) -> String {
    let animals = [
        "otter", "heron", "lynx", "ibis", "tapir", "gecko", "okapi", "quokka",
    ];
    format!(
        "note {i} about the {} number{i} colour{}",
        animals[i % 8],
        i * 7
    )
}

fn slot(current: &Arc<Model>, previous: &Arc<Model>) -> EmbedSlot {
    let slot = EmbedSlot::with(current.clone());
    slot.set_previous(previous.clone());
    slot
}

/// Catch up until `done` (a transaction elsewhere on the server may hold the horizon back for a
/// moment), within a deadline; errors of a down embedder are expected meanwhile.
fn catch_up_until(store: &RecallStore, what: &str, done: impl Fn(&RecallStore) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let _ = store.catch_up(&NEVER);
        if done(store) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The seq of the best vector hit for `text`.
fn best_vector_hit(store: &RecallStore, text: &str) -> Option<i64> {
    store
        .search(&Query::new(text, vec!["a".into()], Mode::Vector, 5))
        .unwrap()
        .into_iter()
        .find(|h| h.vector_rank == Some(1))
        .map(|h| h.message.seq)
}

#[test]
fn recall_generations_switch_once_for_every_node_and_a_down_endpoint_loses_nothing() {
    let test = "recall_generations_switch_once_for_every_node";
    let Some(url) = database(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let old = Model::new("old-model", 96, 5381, true);
    let mut seqs = Vec::new();
    {
        let first = RecallStore::open_postgres(
            connect(&url),
            &dir.path().join("a0"),
            EmbedSlot::with(old.clone()),
        )
        .unwrap();
        let rows: Vec<NewMessage> = (0..40)
            .map(|i| NewMessage {
                namespace: "a".into(),
                author: "alice".into(),
                conversation: "c".into(),
                task: None,
                thread: None,
                source_id: None,
                time_ms: i as i64,
                text: animal(i),
            })
            .collect();
        seqs.extend(first.append_all(&rows).unwrap());
        catch_up_until(&first, "the old vectors", |s| {
            let (b, v, l) = s.cursors().unwrap();
            b == l && v == l
        });
    }
    // Both nodes are configured with the new model (down for now) and keep the old one.
    let new_a = Model::new("new-model", 160, 7, false);
    let new_b = Model::new("new-model", 160, 7, false);
    let a = RecallStore::open_postgres(connect(&url), &dir.path().join("a"), slot(&new_a, &old))
        .unwrap();
    let b = RecallStore::open_postgres(connect(&url), &dir.path().join("b"), slot(&new_b, &old))
        .unwrap();
    for node in [&a, &b] {
        let err = node.catch_up(&NEVER).unwrap_err();
        assert!(
            matches!(err, RecallError::Embed(EmbedError::Unavailable(_))),
            "{err}"
        );
        assert_eq!(node.active_generation(), "old-model");
    }
    let gens = a.embedding_generations().unwrap();
    assert_eq!(gens.len(), 2, "{gens:?}");
    assert!(
        gens.iter()
            .any(|g| g.model == "new-model" && g.state == GenerationState::Filling)
    );
    for node in [&a, &b] {
        for i in [0usize, 17, 39] {
            assert_eq!(best_vector_hit(node, &animal(i)), Some(seqs[i]), "text {i}");
        }
    }
    // Node a's endpoint is back: it fills and switches; the old vectors are gone.
    new_a.up();
    catch_up_until(&a, "node a's switch", |s| {
        s.active_generation() == "new-model"
    });
    assert_eq!(a.embedding_generations().unwrap().len(), 1);
    // Node b has not caught up yet: it still searches the old generation, whole and alone.
    assert_eq!(b.active_generation(), "old-model");
    assert_eq!(best_vector_hit(&b, &animal(17)), Some(seqs[17]));
    // Its next catch-up follows the switch: the new vectors are loaded, not embedded again.
    new_b.up();
    catch_up_until(&b, "node b following the switch", |s| {
        s.active_generation() == "new-model"
    });
    assert_eq!(
        new_b.texts.load(SeqCst),
        1,
        "node b embedded nothing but its probe of the endpoint"
    );
    let (_, vectors, last) = b.cursors().unwrap();
    assert_eq!(vectors, last);
    for (name, node) in [("a", &a), ("b", &b)] {
        for i in [0usize, 17, 39] {
            assert_eq!(
                best_vector_hit(node, &animal(i)),
                Some(seqs[i]),
                "node {name} text {i}"
            );
        }
    }
    assert_eq!(
        new_b.texts.load(SeqCst),
        1 + 3,
        "node b's queries go to the new model"
    );
}

#[test]
fn facts_generations_switch_on_postgres_and_a_down_endpoint_never_fails_a_batch() {
    let test = "facts_generations_switch_on_postgres";
    let Some(url) = database(test) else {
        return;
    };
    let ns = "agent/ceo";
    let who = Provenance {
        agent: "ceo".into(),
        task: None,
        conversation: None,
        source_messages: vec![],
        model: None,
        ledger_id: None,
        source: Source::Agent,
    };
    let ops = |range: std::ops::Range<usize>| -> Vec<Op> {
        range
            .map(|i| Op::Add {
                text: animal(i),
                subject: None,
                predicate: None,
                object: None,
                valid_from: None,
                valid_to: None,
            })
            .collect()
    };
    let search = |s: &FactStore, text: &str| {
        s.search(&FactQuery {
            text: text.into(),
            namespaces: vec![ns.into()],
            view: View::Current,
            limit: 3,
        })
        .unwrap()
    };
    let old = Model::new("old-model", 96, 5381, true);
    FactStore::open_postgres(connect(&url), EmbedSlot::with(old.clone()))
        .unwrap()
        .apply(ns, &ops(0..30), &who, 1_000)
        .unwrap();
    let new_a = Model::new("new-model", 160, 7, false);
    let a = FactStore::open_postgres(connect(&url), slot(&new_a, &old)).unwrap();
    // A batch while the new endpoint is down: written, with its vector of the active generation.
    a.apply(ns, &ops(30..31), &who, 2_000).unwrap();
    assert!(a.embed_pending(100).is_err(), "the new endpoint is down");
    let queries = old.texts.load(SeqCst);
    assert_eq!(search(&a, &animal(30))[0].version.text, animal(30));
    assert_eq!(
        old.texts.load(SeqCst),
        queries + 1,
        "the old model embeds the query"
    );
    // A reader node (search only, the old embedder as previous) sees the old generation.
    let reader_new = Model::new("new-model", 160, 7, true);
    let reader = FactStore::open_postgres(connect(&url), slot(&reader_new, &old)).unwrap();
    assert_eq!(search(&reader, &animal(3))[0].version.text, animal(3));
    new_a.up();
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.embedding_generations().unwrap().len() != 1 {
        let _ = a.embed_pending(100);
        assert!(Instant::now() < deadline, "no switch");
        std::thread::sleep(Duration::from_millis(20));
    }
    let gens = a.embedding_generations().unwrap();
    assert_eq!(
        (gens[0].model.as_str(), gens[0].state),
        ("new-model", GenerationState::Active)
    );
    // Both nodes now embed queries with the new model, against the new vectors.
    for node in [&a, &reader] {
        let before = old.texts.load(SeqCst);
        assert_eq!(search(node, &animal(12))[0].version.text, animal(12));
        assert_eq!(old.texts.load(SeqCst), before, "the old model is done");
    }
}
