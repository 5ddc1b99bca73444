//! Store tests with a deterministic fake embedder (hashed bag of words), so they run without the
//! model files; the real model is exercised by `embed`'s tests and the LoCoMo eval.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::embed::{DIM, EmbedError, Embedder};
use crate::test_support::bag_of_words;

struct BagOfWords;

impl Embedder for BagOfWords {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                bag_of_words(t, |w| {
                    w.bytes()
                        .fold(5381usize, |h, b| h.wrapping_mul(33) ^ usize::from(b))
                        % DIM
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

fn msg(ns: &str, conv: &str, thread: &str, t: i64, text: &str) -> NewMessage {
    NewMessage {
        namespace: ns.into(),
        author: "alice".into(),
        conversation: conv.into(),
        task: Some("task-1".into()),
        thread: Some(thread.into()),
        source_id: None,
        time_ms: t,
        text: text.into(),
    }
}

static NEVER: AtomicBool = AtomicBool::new(false);

#[test]
fn appended_messages_are_found_with_provenance_and_filtered_by_namespace_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = RecallStore::open(
        &dir.path().join("db.sqlite"),
        EmbedSlot::with(Arc::new(BagOfWords)),
    )
    .unwrap();
    let a = store
        .append(&msg(
            "ceo",
            "c1",
            "t1",
            1_000,
            "The launch date moved to March",
        ))
        .unwrap();
    store
        .append(&msg("cto", "c1", "t1", 2_000, "The launch date is secret"))
        .unwrap();
    store
        .append(&msg("ceo", "c2", "t2", 3_000, "Lunch is at noon"))
        .unwrap();
    let done = store.catch_up(&NEVER).unwrap();
    assert_eq!(
        done,
        CatchUp {
            indexed: 3,
            embedded: 3
        }
    );
    for mode in [Mode::Bm25, Mode::Vector, Mode::Hybrid] {
        let hits = store
            .search(&Query::new("launch date", vec!["ceo".into()], mode, 5))
            .unwrap();
        assert_eq!(hits[0].message.seq, a, "{mode:?}");
        assert!(
            hits.iter().all(|h| h.message.namespace == "ceo"),
            "{mode:?}"
        );
        let m = &hits[0].message;
        assert_eq!(
            (m.author.as_str(), m.task.as_deref(), m.time_ms),
            ("alice", Some("task-1"), 1_000)
        );
        assert_eq!(
            m.content_hash,
            msg("", "", "", 0, "The launch date moved to March").content_hash()
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
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].message.namespace, "cto");
    assert!(
        store
            .search(&Query::new("launch", vec![], Mode::Hybrid, 5))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_messages_table_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let store = RecallStore::open(&path, EmbedSlot::new()).unwrap();
    store.append(&msg("a", "c", "t", 0, "hello")).unwrap();
    let conn = Connection::open(&path).unwrap();
    let err = conn
        .execute("UPDATE recall_messages SET text = 'x'", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    assert!(conn.execute("DELETE FROM recall_messages", []).is_err());
}

#[test]
fn rows_written_but_never_indexed_are_indexed_on_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    {
        // The process "dies" after the SQLite commit and before any index work.
        let store = RecallStore::open(&path, EmbedSlot::new()).unwrap();
        store
            .append(&msg("a", "c", "t", 0, "first message about kangaroos"))
            .unwrap();
        store.catch_up(&NEVER).unwrap();
        store
            .append(&msg("a", "c", "t", 1, "second message about wombats"))
            .unwrap();
        assert!(
            store
                .search(&Query::new("wombats", vec!["a".into()], Mode::Bm25, 5))
                .unwrap()
                .is_empty()
        );
    }
    let store = RecallStore::open(&path, EmbedSlot::with(Arc::new(BagOfWords))).unwrap();
    assert_eq!(store.cursors().unwrap(), (1, 0, 2));
    let indexer = store.spawn_indexer().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while store.cursors().unwrap() != (2, 2, 2) {
        assert!(
            std::time::Instant::now() < deadline,
            "indexer did not catch up: {:?}",
            store.cursors()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    indexer.shutdown();
    let hits = store
        .search(&Query::new("wombats", vec!["a".into()], Mode::Hybrid, 5))
        .unwrap();
    assert_eq!(hits[0].message.text, "second message about wombats");
    // Vectors persisted: a fresh open has them without embedding again.
    drop(store);
    let store = RecallStore::open(&path, EmbedSlot::new()).unwrap();
    assert_eq!(store.cursors().unwrap(), (2, 2, 2));
}

#[test]
fn before_the_model_loads_hybrid_search_answers_from_bm25() {
    let dir = tempfile::tempdir().unwrap();
    let slot = EmbedSlot::new();
    let store = RecallStore::open(&dir.path().join("db.sqlite"), slot.clone()).unwrap();
    store
        .append(&msg("a", "c", "t", 0, "the quarterly budget"))
        .unwrap();
    let done = store.catch_up(&NEVER).unwrap();
    assert_eq!(
        done,
        CatchUp {
            indexed: 1,
            embedded: 0
        }
    );
    assert!(!store.vectors_ready());
    let hits = store
        .search(&Query::new("budget", vec!["a".into()], Mode::Vector, 5))
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].vector_rank, None);
    slot.set(Arc::new(BagOfWords));
    assert_eq!(store.catch_up(&NEVER).unwrap().embedded, 1);
    let hits = store
        .search(&Query::new("budget", vec!["a".into()], Mode::Vector, 5))
        .unwrap();
    assert_eq!(hits[0].vector_rank, Some(1));
}

/// BM25 answers the same whichever way it filters: no filter (every namespace allowed), an
/// unfiltered search filtered afterwards (a large share allowed), or the filter in the query (a small
/// share), including when the afterwards-filter sees too few hits and searches again.
#[test]
fn bm25_filters_namespaces_the_same_every_way() {
    let dir = tempfile::tempdir().unwrap();
    let store = RecallStore::open(&dir.path().join("db.sqlite"), EmbedSlot::new()).unwrap();
    // "budget" in every row; rows in "big" outscore the rest ("budget" twice), so an unfiltered window
    // for "small" is all "big" rows and the post-filter must fall back.
    let mut rows = Vec::new();
    for i in 0..3000 {
        let (ns, text) = match i % 10 {
            0 => ("small", format!("budget line {i}")),
            1..=3 => ("mid", format!("budget note {i}")),
            _ => ("big", format!("budget budget review {i}")),
        };
        rows.push(msg(ns, &format!("c{i}"), "t", i, &text));
    }
    store.append_all(&rows).unwrap();
    store.catch_up(&NEVER).unwrap();
    let bm25 = &store.inner.bm25;
    let ns = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let namespace_of = |seq: i64| rows[(seq - 1) as usize].namespace.clone();
    for allowed in [
        ns(&["small", "mid", "big"]),
        ns(&["mid", "big"]),
        ns(&["small", "mid"]),
        ns(&["small"]),
    ] {
        let hits = bm25
            .search("budget", &allowed, (i64::MIN, i64::MAX), 20, true)
            .unwrap();
        assert_eq!(hits.len(), 20, "{allowed:?}");
        assert!(
            hits.iter()
                .all(|(s, _)| allowed.contains(&namespace_of(*s))),
            "{allowed:?}"
        );
        // The same seqs as the filter in the query (a bounded range forces that path).
        let filtered = bm25
            .search("budget", &allowed, (i64::MIN, i64::MAX - 1), 20, true)
            .unwrap();
        let seqs = |h: &[(i64, f32)]| {
            let mut s: Vec<i64> = h.iter().map(|x| x.0).collect();
            s.sort_unstable();
            s
        };
        assert_eq!(seqs(&hits), seqs(&filtered), "{allowed:?}");
    }
}

/// Records the texts of every call, and answers as [`BagOfWords`].
struct Recording(std::sync::Mutex<Vec<Vec<String>>>);

impl Embedder for Recording {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.0
            .lock()
            .unwrap()
            .push(texts.iter().map(|t| t.to_string()).collect());
        BagOfWords.embed(texts)
    }
    fn model_id(&self) -> &'static str {
        "recording"
    }
    fn dimensions(&self) -> usize {
        DIM
    }
}

#[test]
fn the_indexer_embeds_in_bounded_groups_of_similar_length_and_keeps_each_rows_own_vector() {
    // Short chat lines and long answers, interleaved, plus one text far past what the model reads.
    let mut texts: Vec<String> = Vec::new();
    for i in 0..300 {
        texts.push(match i % 3 {
            0 => format!("short line {i}"),
            1 => format!("a longer answer {i} ").repeat(40),
            _ => format!("medium text {i} about the quarterly plan and its owners"),
        });
    }
    texts.push("x".repeat(50_000));
    let model = Recording(std::sync::Mutex::new(Vec::new()));
    let vectors = embed_grouped(&model, &texts).unwrap();
    // Each row has the vector of its own text, whatever group it went in.
    assert_eq!(vectors.len(), texts.len());
    for (i, text) in texts.iter().enumerate() {
        assert_eq!(vectors[i], BagOfWords.embed(&[text]).unwrap()[0], "row {i}");
    }
    let calls = model.0.into_inner().unwrap();
    assert_eq!(
        calls.iter().map(Vec::len).sum::<usize>(),
        texts.len(),
        "every text embedded exactly once"
    );
    for call in &calls {
        let longest = call
            .iter()
            .map(|t| estimated_pieces(t.len()))
            .max()
            .unwrap();
        assert!(!call.is_empty() && call.len() <= EMBED_GROUP);
        assert!(
            call.len() == 1 || call.len() * longest * longest <= EMBED_ATTENTION_BUDGET,
            "a call of {} texts of up to {longest} pieces is over the budget",
            call.len()
        );
    }
    // Grouped by length: short lines are never padded to a long answer's length.
    assert!(
        calls
            .iter()
            .all(|c| !(c.iter().any(|t| t.starts_with("short"))
                && c.iter().any(|t| t.starts_with("a longer")))),
        "short and long texts were embedded together"
    );
}

#[test]
fn a_long_message_is_cut_for_the_embedder_on_a_character_boundary() {
    let long = "é".repeat(EMBED_TEXT_BYTES); // 2 bytes each: twice the cut
    let m = Message {
        seq: 1,
        namespace: "n".into(),
        author: "alice".into(),
        conversation: "c".into(),
        task: None,
        thread: None,
        source_id: None,
        time_ms: 0,
        content_hash: String::new(),
        text: long,
    };
    let text = embedded_text(&m);
    assert!(text.len() <= EMBED_TEXT_BYTES && text.len() > EMBED_TEXT_BYTES - 4);
    assert!(text.starts_with(&m.indexed_text()[..64]));
    let short = Message {
        text: "hello".into(),
        ..m
    };
    assert_eq!(embedded_text(&short), short.indexed_text());
}

/// A test embedder of any size whose words land in buckets picked by `seed`: two of them with
/// different seeds are different "models" — a query of one compared with vectors of the other
/// ranks the rows at random. It can be switched down (every call fails with
/// [`EmbedError::Unavailable`]), limited to a number of texts (then down), and counts its texts.
struct Model {
    id: String,
    dims: usize,
    seed: usize,
    /// Texts it still embeds before it is down (`usize::MAX`: unlimited).
    budget: std::sync::atomic::AtomicUsize,
    texts: std::sync::atomic::AtomicUsize,
    /// Components it actually returns (another number than `dims` to test the check).
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

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.returns];
        for w in text
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
    }

    fn set_budget(&self, texts: usize) {
        self.budget
            .store(texts, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Embedder for Model {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        use std::sync::atomic::Ordering::SeqCst;
        let left = self.budget.load(SeqCst);
        if left < texts.len() {
            self.budget.store(0, SeqCst);
            return Err(EmbedError::Unavailable("test endpoint down".into()));
        }
        if left != usize::MAX {
            self.budget.store(left - texts.len(), SeqCst);
        }
        self.texts.fetch_add(texts.len(), SeqCst);
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
    fn model_id(&self) -> &str {
        &self.id
    }
    fn dimensions(&self) -> usize {
        self.dims
    }
}

/// Distinct texts: each names its own animal and number, so the best vector hit of a text is itself.
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

/// The seq of the best vector hit for `text` (vector list only).
fn best_vector_hit(store: &RecallStore, text: &str) -> Option<i64> {
    store
        .search(&Query::new(text, vec!["a".into()], Mode::Vector, 5))
        .unwrap()
        .into_iter()
        .find(|h| h.vector_rank == Some(1))
        .map(|h| h.message.seq)
}

fn vector_models(path: &std::path::Path) -> Vec<(String, i64)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT model, COUNT(*) FROM recall_vectors GROUP BY model ORDER BY model")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_model_change_re_embeds_in_the_background_and_search_switches_only_when_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let old = Model::new("old-model", 96, 5381);
    let new = Model::new("new-model", 160, 7);
    // The two models rank differently: a query of the new one against the old vectors does not
    // find its own text first for most texts (so a mixed search would show).
    let olds: Vec<Vec<f32>> = (0..40).map(|i| old.vector(&animal(i))).collect();
    let misses = (0..40)
        .filter(|&i| {
            let q: Vec<f32> = new.vector(&animal(i))[..96].to_vec();
            let best = (0..40)
                .max_by(|&a, &b| {
                    crate::embed::dot(&q, &olds[a]).total_cmp(&crate::embed::dot(&q, &olds[b]))
                })
                .unwrap();
            best != i
        })
        .count();
    assert!(
        misses > 30,
        "the two test models rank alike ({misses} of 40 differ)"
    );

    {
        let store = RecallStore::open(&path, EmbedSlot::with(old.clone())).unwrap();
        let texts: Vec<NewMessage> = (0..300)
            .map(|i| msg("a", "c", "t", i as i64, &animal(i)))
            .collect();
        store.append_all(&texts).unwrap();
        assert_eq!(store.catch_up(&NEVER).unwrap().embedded, 300);
        assert_eq!(store.active_generation(), "old-model");
    }

    // Restart with the new model configured and the old one registered as previous; the new one
    // goes down after 256 + 20 texts: the first round of the fill lands, the second does not.
    new.set_budget(256 + 20);
    let slot = EmbedSlot::with(new.clone());
    slot.set_previous(old.clone());
    let store = RecallStore::open(&path, slot).unwrap();
    store
        .append(&msg("a", "c", "t", 1000, &animal(300)))
        .unwrap();
    let err = store.catch_up(&NEVER).unwrap_err();
    assert!(
        matches!(err, RecallError::Embed(EmbedError::Unavailable(_))),
        "{err}"
    );
    // The new row got its vector of the active generation (by the old model) all the same.
    assert_eq!(store.cursors().unwrap(), (301, 301, 301));
    let gens = store.embedding_generations().unwrap();
    assert_eq!(gens.len(), 2, "{gens:?}");
    assert!(
        gens.iter()
            .any(|g| g.model == "old-model" && g.state == generation::GenerationState::Active)
    );
    let filling = gens.iter().find(|g| g.model == "new-model").unwrap();
    assert_eq!(filling.state, generation::GenerationState::Filling);
    assert_eq!(filling.descriptor["dimensions"], 160);
    assert_eq!(
        vector_models(&path),
        vec![("new-model".into(), 256), ("old-model".into(), 301)],
        "half filled"
    );
    // Searches stay on the old generation, query and vectors alike: each text finds itself.
    assert_eq!(store.active_generation(), "old-model");
    for i in [3usize, 42, 299, 300] {
        assert_eq!(
            best_vector_hit(&store, &animal(i)),
            Some(i as i64 + 1),
            "text {i}"
        );
    }
    // The endpoint is back: the fill completes, and the store switches in one step.
    new.set_budget(usize::MAX);
    store.catch_up(&NEVER).unwrap();
    assert_eq!(store.active_generation(), "new-model");
    assert_eq!(
        vector_models(&path),
        vec![("new-model".into(), 301)],
        "old vectors deleted"
    );
    let gens = store.embedding_generations().unwrap();
    assert_eq!(gens.len(), 1);
    assert_eq!(gens[0].state, generation::GenerationState::Active);
    let before = old.texts.load(std::sync::atomic::Ordering::SeqCst);
    for i in [3usize, 42, 299, 300] {
        assert_eq!(
            best_vector_hit(&store, &animal(i)),
            Some(i as i64 + 1),
            "text {i}"
        );
    }
    assert_eq!(
        old.texts.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "queries are embedded by the new model now"
    );
    // A new row goes to the new generation; a reopen with the new model alone loads it.
    store
        .append(&msg("a", "c", "t", 2000, &animal(301)))
        .unwrap();
    store.catch_up(&NEVER).unwrap();
    drop(store);
    let store = RecallStore::open(&path, EmbedSlot::with(new.clone())).unwrap();
    assert_eq!(store.cursors().unwrap(), (302, 302, 302));
    assert_eq!(best_vector_hit(&store, &animal(301)), Some(302));
}

#[test]
fn without_the_previous_embedder_search_is_keywords_only_until_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let old = Model::new("old-model", 96, 5381);
    let new = Model::new("new-model", 96, 7);
    {
        let store = RecallStore::open(&path, EmbedSlot::with(old.clone())).unwrap();
        store.append(&msg("a", "c", "t", 0, &animal(1))).unwrap();
        store.catch_up(&NEVER).unwrap();
    }
    new.set_budget(0);
    let store = RecallStore::open(&path, EmbedSlot::with(new.clone())).unwrap();
    assert!(store.catch_up(&NEVER).is_err());
    // Same size, other model: the old vectors are never searched with the new model's query.
    assert!(!store.vectors_ready());
    let hits = store
        .search(&Query::new(animal(1), vec!["a".into()], Mode::Vector, 5))
        .unwrap();
    assert_eq!(hits.len(), 1, "keywords answer");
    assert_eq!(hits[0].vector_rank, None);
    new.set_budget(usize::MAX);
    store.catch_up(&NEVER).unwrap();
    assert!(store.vectors_ready());
    assert_eq!(best_vector_hit(&store, &animal(1)), Some(1));
}

#[test]
fn a_down_embedder_delays_vectors_without_loss_and_keywords_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let model = Model::new("remote", 64, 11);
    model.set_budget(0);
    let store = RecallStore::open(
        &dir.path().join("db.sqlite"),
        EmbedSlot::with(model.clone()),
    )
    .unwrap();
    let texts: Vec<NewMessage> = (0..10)
        .map(|i| msg("a", "c", "t", i as i64, &animal(i)))
        .collect();
    store.append_all(&texts).unwrap();
    for _ in 0..3 {
        let err = store.catch_up(&NEVER).unwrap_err();
        assert!(
            matches!(err, RecallError::Embed(EmbedError::Unavailable(_))),
            "{err}"
        );
    }
    assert_eq!(
        store.cursors().unwrap(),
        (10, 0, 10),
        "indexed by keywords, no vector lost or faked"
    );
    // The answer path does not call the embedder it knows is down: keywords answer at once.
    let calls = model.texts.load(std::sync::atomic::Ordering::SeqCst);
    let hits = store
        .search(&Query::new(animal(4), vec!["a".into()], Mode::Hybrid, 3))
        .unwrap();
    assert_eq!(hits[0].message.seq, 5);
    assert!(hits.iter().all(|h| h.vector_rank.is_none()));
    assert_eq!(model.texts.load(std::sync::atomic::Ordering::SeqCst), calls);
    // Back up: every row is embedded, and searches use vectors again.
    model.set_budget(usize::MAX);
    assert_eq!(store.catch_up(&NEVER).unwrap().embedded, 10);
    assert_eq!(store.cursors().unwrap(), (10, 10, 10));
    assert_eq!(best_vector_hit(&store, &animal(4)), Some(5));
}

#[test]
fn the_indexer_backs_off_from_a_down_embedder_and_catches_up_when_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let model = Model::new("remote", 64, 11);
    model.set_budget(0);
    let store = RecallStore::open(
        &dir.path().join("db.sqlite"),
        EmbedSlot::with(model.clone()),
    )
    .unwrap();
    let indexer = store.spawn_indexer().unwrap();
    store.append(&msg("a", "c", "t", 0, &animal(0))).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // Keywords are indexed at once though the embedder is down.
    while store.cursors().unwrap().0 != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "BM25 did not catch up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    model.set_budget(usize::MAX);
    while store.cursors().unwrap() != (1, 1, 1) {
        assert!(
            std::time::Instant::now() < deadline,
            "vectors did not catch up: {:?}",
            store.cursors()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    indexer.shutdown();
}

#[test]
fn a_vector_of_the_wrong_size_is_an_error_naming_the_row_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut liar = Model::new("liar", 64, 3);
    Arc::get_mut(&mut liar).unwrap().returns = 32;
    let store = RecallStore::open(&dir.path().join("db.sqlite"), EmbedSlot::with(liar)).unwrap();
    store.append(&msg("a", "c", "t", 0, "hello there")).unwrap();
    let err = store.catch_up(&NEVER).unwrap_err().to_string();
    assert!(
        err.contains("recall message 1") && err.contains("declares 64"),
        "{err}"
    );
    assert_eq!(store.cursors().unwrap(), (1, 0, 1));
    let hits = store
        .search(&Query::new("hello", vec!["a".into()], Mode::Hybrid, 3))
        .unwrap();
    assert_eq!(hits.len(), 1, "keywords still answer");
}

#[test]
fn a_database_with_minilm_vectors_keeps_them_as_the_active_generation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    {
        // The schema as the last release left it (memory migrations 1..5), with one MiniLM vector.
        let mut conn = crate::schema::open(&path).unwrap();
        let before = opc_migrate::Component {
            migrations: &crate::schema::MIGRATIONS[..5],
            ..crate::schema::COMPONENT
        };
        opc_migrate::migrate(&mut conn, &before).unwrap();
        crate::recall::append_in(&conn, &msg("a", "c", "t", 0, "the otter swims")).unwrap();
        let v = vec![1.0f32 / (crate::embed::DIM as f32).sqrt(); crate::embed::DIM];
        conn.execute(
            "INSERT INTO recall_vectors (seq, model, vector) VALUES (1, ?1, ?2)",
            rusqlite::params![crate::embed::MINILM_ID, vectors::to_blob(&v)],
        )
        .unwrap();
    }
    let store = RecallStore::open(&path, EmbedSlot::new()).unwrap();
    let gens = store.embedding_generations().unwrap();
    assert_eq!(gens.len(), 1);
    assert_eq!(gens[0].model, crate::embed::MINILM_ID);
    assert_eq!(gens[0].state, generation::GenerationState::Active);
    assert_eq!(gens[0].descriptor["provider"], "local");
    assert_eq!(gens[0].descriptor["dimensions"], 384);
    assert_eq!(store.active_generation(), crate::embed::MINILM_ID);
    assert_eq!(
        store.cursors().unwrap().1,
        1,
        "the stored vector is loaded, not re-embedded"
    );
}
