//! Benchmark: recall memory at scale — ingest rate, start-up load, and search latency p50/p95 at 10k,
//! 100k and 1M stored messages, through the same `RecallStore` the engine uses; then the latency the
//! Select step adds to a turn (one hybrid search, with the query embedded by the real MiniLM when it is
//! in the model cache).
//!
//! The data: seeded, real-looking chat lines (Zipf-distributed common English words, plus names,
//! ticket ids and amounts, so queries have both long and short posting lists) in 8 agent namespaces,
//! 20 messages a conversation; random unit vectors stand in for embeddings at scale (the scan costs the
//! same whatever the numbers). Searches run as the CEO, who may read every namespace: the filter
//! drops nothing, which is the worst case for the scan.
//!
//! What each line measures:
//! - `append`: messages/s into SQLite, 1,000 a transaction (the engine writes a turn's few rows in the
//!   turn's own transaction; `append, one a transaction` is that case).
//! - `bm25 index`: messages/s the background indexer adds to tantivy (`catch_up`).
//! - `open`: opening the store, which loads the stored vectors into memory (what `opc run` pays at
//!   start, in the background).
//! - `search bm25 | vector | hybrid`: `RecallStore::search` end to end (lists, fusion, the neighbour
//!   boost, reading the hits back from SQLite), limit 10, pool 100; then hybrid as a manager who
//!   reads 3 of the 8 namespaces.
//! - `vector prefilter keeps`: above 65,536 rows the vector list is a one-bit prefilter re-scored
//!   exactly; this is how much of the exact top 10 / top 100 it keeps on random vectors (the worst
//!   case), with both scans' medians.
//!
//! Run: `cargo bench -p opc-memory --bench recall` (`-- --scales 10000,100000` to skip 1M; 1M needs
//! about 2.5 GB of disk in the temp dir and 1 GB of memory).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use clap::Parser;
use opc_memory::embed::{EmbedSlot, MiniLm};
use opc_memory::recall::{Mode, NewMessage, Query, RecallStore, vectors};

mod common;
use common::{NAMES, QUERIES, Rng, WARM_UP, percentile};

const NAMESPACES: &[&str] = &[
    "ceo", "vp-eng", "vp-sales", "lead-web", "lead-api", "writer", "analyst", "support",
];

const WORDS: &str = "the to and a of I you we it is for that on in this with be can have will \
    me my please our be at as so are was not do just if what about send check need get up new \
    team report meeting call update week today tomorrow review plan budget client launch draft \
    deadline invoice contract design release customer order ticket issue bug fix deploy server \
    data sales quarter numbers forecast hiring offer candidate interview schedule travel flight \
    hotel expense approve approval legal policy security audit vendor price quote renewal churn \
    roadmap feature spec backlog sprint standup retro migration database outage incident pager \
    latency dashboard metrics revenue margin cost cloud bill discount partner webinar campaign \
    newsletter blog post press event booth demo trial onboarding training docs handbook office \
    lease furniture laptop license renewal payroll benefits bonus promotion feedback goals";
fn sentence(rng: &mut Rng, words: &[&str], len: usize) -> String {
    let mut out: Vec<String> = Vec::with_capacity(len + 2);
    for _ in 0..len {
        out.push(words[rng.zipf(words.len())].to_string());
    }
    // Rare tokens: a name, a ticket id, an amount.
    match rng.below(4) {
        0 => out.insert(rng.below(len), NAMES[rng.below(NAMES.len())].to_string()),
        1 => out.push(format!("TCK-{}", rng.below(100_000))),
        2 => out.push(format!("${}", rng.below(50_000))),
        _ => {}
    }
    out.join(" ")
}

fn message(rng: &mut Rng, words: &[&str], i: usize) -> NewMessage {
    let ns = NAMESPACES[rng.below(NAMESPACES.len())];
    let len = 8 + rng.below(18);
    NewMessage {
        namespace: ns.into(),
        author: if i.is_multiple_of(2) {
            "U024BE7LH".into()
        } else {
            ns.into()
        },
        conversation: format!("web:{}", i / 20),
        task: Some(format!("t{}", i / 4)),
        thread: None,
        source_id: None,
        time_ms: 1_700_000_000_000 + i as i64 * 60_000,
        text: sentence(rng, words, len),
    }
}

/// p50 / p95 (ms) of `f` over the queries, after a warm-up.
fn latencies(queries: &[Query], mut f: impl FnMut(&Query)) -> (f64, f64) {
    for q in queries.iter().take(WARM_UP) {
        f(q);
    }
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            f(q);
            t.elapsed()
        })
        .collect();
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.95))
}

fn report(label: &str, (p50, p95): (f64, f64)) {
    println!("  {label:<28} p50 {p50:>8.2} ms   p95 {p95:>8.2} ms");
}

fn rate(label: &str, n: usize, took: Duration) {
    println!(
        "  {label:<28} {:>10.0} messages/s ({n} in {:.1} s)",
        n as f64 / took.as_secs_f64(),
        took.as_secs_f64()
    );
}

/// Store `n` random unit vectors for seqs 1..=n, as the indexer would (one transaction per 10,000).
fn store_vectors(db: &Path, n: usize, rng: &mut Rng) {
    let mut conn = rusqlite::Connection::open(db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    for start in (1..=n).step_by(10_000) {
        let tx = conn.transaction().unwrap();
        {
            let mut stmt = tx
                .prepare(
                    "INSERT INTO recall_vectors (seq, model, vector) VALUES (?1, 'random', ?2)",
                )
                .unwrap();
            for seq in start..(start + 10_000).min(n + 1) {
                stmt.execute(rusqlite::params![
                    seq as i64,
                    vectors::to_blob(&rng.unit_vector())
                ])
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }
}

fn scale(n: usize, words: &[&str], single: bool) {
    println!("{n} messages");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opc.db");
    let store = RecallStore::open(&db, EmbedSlot::new()).unwrap();
    let mut rng = Rng(42);

    if single {
        let batch: Vec<NewMessage> = (0..2000).map(|i| message(&mut rng, words, i)).collect();
        let t = Instant::now();
        for m in &batch {
            store.append(m).unwrap();
        }
        rate("append, one a transaction", batch.len(), t.elapsed());
    }
    let already = if single { 2000 } else { 0 };
    let mut took = Duration::ZERO;
    for start in (already..n).step_by(1000) {
        let batch: Vec<NewMessage> = (start..(start + 1000).min(n))
            .map(|i| message(&mut rng, words, i))
            .collect();
        let t = Instant::now();
        store.append_all(&batch).unwrap();
        took += t.elapsed();
    }
    rate("append, 1,000 a transaction", n - already, took);
    let t = Instant::now();
    let done = store.catch_up(&AtomicBool::new(false)).unwrap();
    rate("bm25 index (catch-up)", done.indexed, t.elapsed());
    drop(store);

    store_vectors(&db, n, &mut rng);
    let t = Instant::now();
    let store = RecallStore::open(&db, EmbedSlot::new()).unwrap();
    println!(
        "  {:<28} {:>10.2} s (loads {n} vectors)",
        "open",
        t.elapsed().as_secs_f64()
    );

    let all: Vec<String> = NAMESPACES.iter().map(|s| s.to_string()).collect();
    let queries: Vec<Query> = (0..QUERIES + WARM_UP)
        .map(|_| {
            let mut q = Query::new(sentence(&mut rng, words, 4), all.clone(), Mode::Hybrid, 10);
            q.vector = Some(rng.unit_vector());
            q
        })
        .collect();
    for (label, mode) in [
        ("search bm25", Mode::Bm25),
        ("search vector", Mode::Vector),
        ("search hybrid", Mode::Hybrid),
    ] {
        let qs: Vec<Query> = queries
            .iter()
            .cloned()
            .map(|mut q| {
                q.mode = mode;
                q
            })
            .collect();
        report(
            label,
            latencies(&qs, |q| {
                std::hint::black_box(store.search(q).unwrap());
            }),
        );
    }
    // A manager's view: three of the eight namespaces.
    let some: Vec<String> = NAMESPACES[..3].iter().map(|s| s.to_string()).collect();
    let qs: Vec<Query> = queries
        .iter()
        .cloned()
        .map(|mut q| {
            q.namespaces = some.clone();
            q
        })
        .collect();
    report(
        "search hybrid, 3 namespaces",
        latencies(&qs, |q| {
            std::hint::black_box(store.search(q).unwrap());
        }),
    );
    drop(store);
    prefilter_agreement(n, 10);
    prefilter_agreement(n, 100);
}

/// How much of the exact top `limit` the one-bit prefilter keeps, on random unit vectors (the worst
/// case: no row stands out) — at `n` rows, over 20 queries.
fn prefilter_agreement(n: usize, limit: usize) {
    if n < vectors::EXACT_BELOW {
        return;
    }
    let mut rng = Rng(99);
    let mut idx = vectors::VectorIndex::default();
    for seq in 1..=n {
        idx.push(seq as i64, "ceo", 0, &rng.unit_vector()).unwrap();
    }
    let all = ["ceo".to_string()];
    let (mut kept, mut total) = (0, 0);
    let (mut exact_time, mut filtered_time) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let q = rng.unit_vector();
        let t = Instant::now();
        let exact = idx.search_with(&q, &all, (i64::MIN, i64::MAX), limit, true);
        exact_time.push(t.elapsed());
        let t = Instant::now();
        let approx = idx.search_with(&q, &all, (i64::MIN, i64::MAX), limit, false);
        filtered_time.push(t.elapsed());
        total += exact.len();
        kept += exact
            .iter()
            .filter(|e| approx.iter().any(|a| a.0 == e.0))
            .count();
    }
    exact_time.sort();
    filtered_time.sort();
    println!(
        "  {:<28} {:>9.1} % of the exact top {limit} (random vectors); exact scan p50 {:.2} ms, prefilter p50 {:.2} ms",
        "vector prefilter keeps",
        100.0 * kept as f64 / total.max(1) as f64,
        percentile(&exact_time, 0.5),
        percentile(&filtered_time, 0.5),
    );
}

/// What the Select step adds to a turn: one hybrid search for the task text, the query embedded by
/// the real model, over `n` stored messages.
fn select_step(n: usize, words: &[&str]) {
    let model = match MiniLm::load_shared() {
        Ok(m) => m,
        Err(e) => {
            println!(
                "select step: skipped (embedding model not in the cache: {e}; `opc models fetch`)"
            );
            return;
        }
    };
    println!("select step ({n} messages, query embedded by MiniLM)");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opc.db");
    let mut rng = Rng(7);
    {
        let store = RecallStore::open(&db, EmbedSlot::new()).unwrap();
        for start in (0..n).step_by(1000) {
            let batch: Vec<NewMessage> = (start..(start + 1000).min(n))
                .map(|i| message(&mut rng, words, i))
                .collect();
            store.append_all(&batch).unwrap();
        }
        store.catch_up(&AtomicBool::new(false)).unwrap();
    }
    store_vectors(&db, n, &mut rng);
    let store = RecallStore::open(&db, EmbedSlot::with(model)).unwrap();
    let all: Vec<String> = NAMESPACES.iter().map(|s| s.to_string()).collect();
    let queries: Vec<Query> = (0..QUERIES / 2 + WARM_UP)
        .map(|_| Query::new(sentence(&mut rng, words, 12), all.clone(), Mode::Hybrid, 10))
        .collect();
    report(
        "recall for a task",
        latencies(&queries, |q| {
            std::hint::black_box(store.search(q).unwrap());
        }),
    );
}

/// `cargo bench -p opc-memory --bench recall [-- --scales N,N,…]`
#[derive(Parser)]
struct Args {
    /// Stored messages at each scale (the first also times one append a transaction).
    #[arg(long, value_delimiter = ',', default_values_t = [10_000, 100_000, 1_000_000])]
    scales: Vec<usize>,
    #[command(flatten)]
    _cargo: common::CargoBench,
}

fn main() {
    let args = Args::parse();
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    for (i, n) in args.scales.iter().enumerate() {
        scale(*n, &words, i == 0);
    }
    select_step(10_000, &words);
}
