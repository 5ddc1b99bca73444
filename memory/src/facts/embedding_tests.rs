//! Facts' embedding generations and an embedder that is down, on SQLite, with test embedders of
//! different sizes (words hashed into buckets by a seed of their own: two seeds are two "models"
//! whose vectors rank differently), switchable down and counting their texts.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use super::*;
use crate::embed::{EmbedError, Embedder};

struct Model {
    id: String,
    dims: usize,
    seed: usize,
    /// Texts it still embeds before it is down (`usize::MAX`: unlimited).
    budget: AtomicUsize,
    texts: AtomicUsize,
    /// Components it returns (another number than `dims` to test the check).
    returns: usize,
}

impl Model {
    fn new(id: &str, dims: usize, seed: usize) -> Arc<Model> {
        Arc::new(Model {
            id: id.into(),
            dims,
            seed,
            budget: usize::MAX.into(),
            texts: 0.into(),
            returns: dims,
        })
    }
}

impl Embedder for Model {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let left = self.budget.load(SeqCst);
        if left < texts.len() {
            self.budget.store(0, SeqCst);
            return Err(EmbedError::Unavailable("test endpoint down".into()));
        }
        if left != usize::MAX {
            self.budget.store(left - texts.len(), SeqCst);
        }
        self.texts.fetch_add(texts.len(), SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; self.returns];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(self.seed, |h, b| h.wrapping_mul(31) ^ usize::from(b));
                    v[h % self.returns] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                v.into_iter().map(|x| x / n).collect()
            })
            .collect())
    }
    fn model_id(&self) -> &str {
        &self.id
    }
    fn dimensions(&self) -> usize {
        self.dims
    }
}

const NS: &str = "agent/ceo";

fn who() -> Provenance {
    Provenance {
        agent: "ceo".into(),
        task: None,
        conversation: None,
        source_messages: vec![],
        model: None,
        ledger_id: None,
        source: Source::Agent,
    }
}

fn fact(i: usize) -> String {
    let animals = [
        "otter", "heron", "lynx", "ibis", "tapir", "gecko", "okapi", "quokka",
    ];
    format!("The {} number{i} eats colour{}", animals[i % 8], i * 7)
}

fn add_all(s: &FactStore, range: std::ops::Range<usize>) {
    let ops: Vec<Op> = range
        .map(|i| Op::Add {
            text: fact(i),
            subject: None,
            predicate: None,
            object: None,
            valid_from: None,
            valid_to: None,
        })
        .collect();
    s.apply(NS, &ops, &who(), 1_000).unwrap();
}

fn search(s: &FactStore, text: &str) -> Vec<FactHit> {
    s.search(&FactQuery {
        text: text.into(),
        namespaces: vec![NS.into()],
        view: View::Current,
        limit: 5,
    })
    .unwrap()
}

fn vector_models(path: &std::path::Path) -> Vec<(String, i64)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT model, COUNT(*) FROM memory_fact_vectors GROUP BY model ORDER BY model")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn held_model(s: &FactStore) -> String {
    s.inner.vectors.read().unwrap().model.clone()
}

/// Wait (with a deadline) until `done`.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_model_change_re_embeds_the_facts_in_the_background_and_search_switches_when_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let old = Model::new("old-model", 96, 5381);
    let new = Model::new("new-model", 160, 7);
    {
        let s = FactStore::open(&path, EmbedSlot::with(old.clone())).unwrap();
        add_all(&s, 0..300);
        assert_eq!(vector_models(&path), vec![("old-model".into(), 300)]);
    }
    // The new model lands one round of the fill (256), then is down.
    new.budget.store(256, SeqCst);
    let slot = EmbedSlot::with(new.clone());
    slot.set_previous(old.clone());
    let s = FactStore::open(&path, slot).unwrap();
    assert_eq!(s.embed_pending(256).unwrap(), 256);
    assert!(matches!(
        s.embed_pending(256),
        Err(FactError::Embed(EmbedError::Unavailable(_)))
    ));
    assert_eq!(
        vector_models(&path),
        vec![("new-model".into(), 256), ("old-model".into(), 300)]
    );
    let gens = s.embedding_generations().unwrap();
    assert_eq!(gens.len(), 2, "{gens:?}");
    // Searches stay on the old generation: the old model embeds the query, the old vectors answer.
    let (old_before, new_before) = (old.texts.load(SeqCst), new.texts.load(SeqCst));
    let hits = search(&s, &fact(42));
    assert_eq!(hits[0].version.text, fact(42));
    assert_eq!(held_model(&s), "old-model");
    assert_eq!(old.texts.load(SeqCst), old_before + 1);
    assert_eq!(
        new.texts.load(SeqCst),
        new_before,
        "the new model never embeds a query yet"
    );
    // A fact written meanwhile gets its vector of the active generation.
    add_all(&s, 300..301);
    assert_eq!(
        vector_models(&path),
        vec![("new-model".into(), 256), ("old-model".into(), 301)]
    );
    // Back up: the background filler completes and switches.
    new.budget.store(usize::MAX, SeqCst);
    s.kick_filler();
    until("the switch", || {
        s.embedding_generations().unwrap().len() == 1
    });
    assert_eq!(vector_models(&path), vec![("new-model".into(), 301)]);
    let old_before = old.texts.load(SeqCst);
    let hits = search(&s, &fact(300));
    assert_eq!(hits[0].version.text, fact(300));
    assert_eq!(held_model(&s), "new-model");
    assert_eq!(old.texts.load(SeqCst), old_before, "the old model is done");
    let gens = s.embedding_generations().unwrap();
    assert_eq!(gens[0].model, "new-model");
    assert_eq!(gens[0].state, GenerationState::Active);
    assert_eq!(gens[0].descriptor["dimensions"], 160);
}

#[test]
fn a_down_embedder_never_fails_a_batch_and_its_facts_are_embedded_when_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let model = Model::new("remote", 64, 11);
    model.budget.store(0, SeqCst);
    let s = FactStore::open(&path, EmbedSlot::with(model.clone())).unwrap();
    add_all(&s, 0..3);
    assert!(vector_models(&path).is_empty(), "written without vectors");
    // Keywords answer meanwhile, and the query is not sent to the embedder known to be down.
    let calls = model.texts.load(SeqCst);
    assert_eq!(search(&s, &fact(1))[0].version.text, fact(1));
    assert_eq!(model.texts.load(SeqCst), calls);
    model.budget.store(usize::MAX, SeqCst);
    until("the background filler", || {
        vector_models(&path) == vec![("remote".to_string(), 3)]
    });
}

#[test]
fn a_vector_of_the_wrong_size_is_an_error_naming_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut liar = Model::new("liar", 64, 3);
    Arc::get_mut(&mut liar).unwrap().returns = 32;
    let s = FactStore::open(&dir.path().join("db.sqlite"), EmbedSlot::with(liar)).unwrap();
    add_all(&s, 0..1);
    let err = s.embed_pending(10).unwrap_err().to_string();
    assert!(
        err.contains("fact version 1") && err.contains("declares 64"),
        "{err}"
    );
    assert_eq!(
        search(&s, &fact(0))[0].version.text,
        fact(0),
        "keywords answer"
    );
}
