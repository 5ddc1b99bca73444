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
