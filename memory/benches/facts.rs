//! Benchmark: the facts store at scale — 100k facts × 10 versions (1M versions) in 10 agent
//! namespaces, written through `FactStore::apply` (ADD, then nine rounds of UPDATE), then: store size
//! on disk, open + vector load, `search` p50/p95 (BM25 alone; hybrid with the query embedding
//! excluded; hybrid with the real MiniLM embedding the query), `BelievedAt` (`--at`) list and search
//! p95, and the other views.
//!
//! The data: seeded (same every run), real-looking fact sentences (Zipf-distributed common words,
//! names, amounts, a per-fact reference so no version is a duplicate), a subject per fact from 2,000
//! per namespace. Vectors: embedding 1M texts with MiniLM would take hours on this machine, so the
//! bulk gets random unit vectors (quantised like real ones: the scan costs the same whatever the
//! numbers), written straight into `memory_fact_vectors` under MiniLM's model id. The query's own
//! vector is random too in "hybrid (query vector given)", and MiniLM's in "hybrid + MiniLM" (when the
//! model is in the cache): that line includes embedding the query.
//!
//! Searches run as one agent (its own namespace: 10k current facts) and as the CEO (all 10: 100k).
//! `BelievedAt` times are spread over the ten rounds of writes.
//!
//! Each latency line gives wall-clock p50/p95 and, in parentheses, the measuring thread's CPU time
//! (`/proc/thread-self/schedstat`): on a shared machine the wall clock includes waiting for a core.
//! The CPU column leaves out other threads (MiniLM's workers) and, on kernels that account by tick,
//! moves in 4 ms steps: read it as a bound, the wall clock on a quiet machine as the number.
//!
//! Run: `cargo bench -p opc-memory --bench facts` (`-- --facts 10000` for a quick run; `-- --db
//! PATH` keeps the store there and reuses it on the next run: 1 GB at 100k facts).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use opc_memory::embed::{EmbedError, EmbedSlot, Embedder, MiniLm};
use opc_memory::facts::{FactQuery, FactStore, Op, Provenance, Source, View};
use opc_memory::recall::vectors::quantise;

mod common;
use common::{NAMES, QUERIES, Rng, WARM_UP, percentile};

const NAMESPACES: usize = 10;
const PAST_QUERIES: usize = 60;
const BATCH: usize = 1000;
const DAY: i64 = 86_400_000;
const BASE: i64 = 1_780_000_000_000;

const WORDS: &str = "team report meeting call update week plan budget client launch draft \
    deadline invoice contract design release customer order ticket issue bug fix deploy server \
    data sales quarter numbers forecast hiring offer candidate interview schedule travel flight \
    hotel expense approval legal policy security audit vendor price quote renewal churn \
    roadmap feature spec backlog sprint migration database outage incident pager \
    latency dashboard metrics revenue margin cost cloud bill discount partner webinar campaign \
    newsletter blog press event booth demo trial onboarding training docs handbook office \
    lease furniture laptop license payroll benefits bonus promotion feedback goals owns prefers \
    moved approved signed paused cancelled delayed starts ends needs costs runs";
fn fact_text(rng: &mut Rng, words: &[&str], fact: usize, version: usize) -> String {
    let len = 5 + rng.below(10);
    let mut out: Vec<String> = (0..len)
        .map(|_| words[rng.zipf(words.len())].to_string())
        .collect();
    out.insert(0, NAMES[rng.below(NAMES.len())].to_string());
    if rng.below(3) == 0 {
        out.push(format!("${}", rng.below(50_000)));
    }
    out.push(format!("ref F{fact}v{version}"));
    out.join(" ")
}

/// Random query vectors under MiniLM's model id: hybrid search without the embedding's cost.
struct QueryVectors(Mutex<Rng>);

impl Embedder for QueryVectors {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut rng = self.0.lock().unwrap();
        Ok(texts.iter().map(|_| rng.unit_vector()).collect())
    }
    fn model_id(&self) -> &'static str {
        "all-MiniLM-L6-v2"
    }
    fn dimensions(&self) -> usize {
        opc_memory::embed::DIM
    }
}

/// This thread's time on a CPU so far (`/proc/thread-self/schedstat`, ns): unlike the wall clock, it
/// leaves out the time spent waiting for a core, which on a shared machine is most of it.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Wall and CPU p50 / p95 (ms) of `f` over the items, after a warm-up.
fn latencies<T>(items: &[T], mut f: impl FnMut(&T)) -> [f64; 4] {
    for q in items.iter().take(WARM_UP) {
        f(q);
    }
    let (mut wall, mut cpu): (Vec<Duration>, Vec<Duration>) = items
        .iter()
        .map(|q| {
            let (t, c) = (Instant::now(), cpu_ns());
            f(q);
            (
                t.elapsed(),
                Duration::from_nanos(cpu_ns().saturating_sub(c)),
            )
        })
        .unzip();
    wall.sort();
    cpu.sort();
    [
        percentile(&wall, 0.5),
        percentile(&wall, 0.95),
        percentile(&cpu, 0.5),
        percentile(&cpu, 0.95),
    ]
}

fn report(label: &str, [p50, p95, c50, c95]: [f64; 4]) {
    println!(
        "  {label:<48} p50 {p50:>7.2} ms  p95 {p95:>7.2} ms   (CPU p50 {c50:>7.2}  p95 {c95:>7.2})"
    );
}

fn file_mb(path: &Path) -> f64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let wal = path.with_extension("sqlite-wal");
    (size(path) + size(&wal)) as f64 / 1e6
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn checkpoint(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
}

/// `cargo bench -p opc-memory --bench facts [-- --facts N --versions N --db PATH]`
#[derive(Parser)]
struct Args {
    /// Facts in all, spread over the namespaces.
    #[arg(long, default_value_t = 100_000)]
    facts: usize,
    /// Versions of each fact (one ADD, then UPDATE rounds).
    #[arg(long, default_value_t = 10)]
    versions: usize,
    /// Keep the store here, and reuse it when it exists (the seeded data is the same every run, so
    /// repeated runs measure the queries without paying the ingest again).
    #[arg(long)]
    db: Option<PathBuf>,
    #[command(flatten)]
    _cargo: common::CargoBench,
}

fn main() {
    let args = Args::parse();
    let (facts, versions) = (args.facts, args.versions);
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let dir = tempfile::tempdir().unwrap();
    let path = args.db.unwrap_or_else(|| dir.path().join("db.sqlite"));
    let reuse = path.exists();
    println!(
        "facts: {facts} facts × {versions} versions in {NAMESPACES} namespaces ({} versions)",
        facts * versions
    );

    let per_ns = facts / NAMESPACES;
    let round_end: Vec<i64> = (0..versions)
        .map(|round| BASE + round as i64 * DAY + per_ns.div_ceil(BATCH) as i64 * NAMESPACES as i64)
        .collect();
    if reuse {
        println!("  (reusing the store at {})", path.display());
    } else {
        ingest(&path, facts, versions, &words, &round_end);
    }
    checkpoint(&path);
    println!(
        "  {:<48} {:>8.0} MB ({:.0} bytes a version)",
        "store size on disk",
        file_mb(&path),
        file_mb(&path) * 1e6 / (facts * versions) as f64
    );
    queries_and_views(&path, facts, versions, &words, &round_end);
}

fn ingest(path: &Path, facts: usize, versions: usize, words: &[&str], expected_end: &[i64]) {
    let ns = |i: usize| format!("agent/a{i}");
    let store = FactStore::open(path, EmbedSlot::new()).unwrap();
    let mut rng = Rng(42);
    let per_ns = facts / NAMESPACES;
    let mut current: Vec<Vec<i64>> = (0..NAMESPACES)
        .map(|_| Vec::with_capacity(per_ns))
        .collect();
    let started = Instant::now();
    for (round, &end) in expected_end.iter().enumerate().take(versions) {
        let mut clock = BASE + round as i64 * DAY;
        for (n, ids) in current.iter_mut().enumerate() {
            let who = Provenance {
                agent: format!("a{n}"),
                task: Some(round as i64),
                conversation: Some(format!("web:{round}")),
                source: Source::Agent,
                ..Default::default()
            };
            for start in (0..per_ns).step_by(BATCH) {
                let end = (start + BATCH).min(per_ns);
                let ops: Vec<Op> = (start..end)
                    .map(|i| {
                        let fact = n * per_ns + i;
                        let text = fact_text(&mut rng, words, fact, round);
                        let subject = Some(format!("Project {}", rng.below(2000)));
                        if round == 0 {
                            Op::Add {
                                text,
                                subject,
                                predicate: None,
                                object: None,
                                valid_from: Some(clock),
                                valid_to: None,
                            }
                        } else {
                            Op::Update {
                                target: ids[i],
                                text,
                                subject,
                                predicate: None,
                                object: None,
                                valid_from: Some(clock),
                                valid_to: None,
                                reason: Some("changed".into()),
                            }
                        }
                    })
                    .collect();
                clock += 1;
                let applied = store.apply(&ns(n), &ops, &who, clock).unwrap();
                if round == 0 {
                    assert_eq!(applied.added.len(), end - start, "no duplicates");
                    ids.extend(applied.added);
                } else {
                    for (k, (_, new)) in applied.updated.into_iter().enumerate() {
                        ids[start + k] = new;
                    }
                }
            }
        }
        assert_eq!(clock, end);
    }
    let took = started.elapsed();
    println!(
        "  {:<48} {:>10.0} versions/s ({} in {:.1} s, batches of {BATCH})",
        "apply (ADD, then UPDATE rounds)",
        (facts * versions) as f64 / took.as_secs_f64(),
        facts * versions,
        took.as_secs_f64()
    );
    drop(store);
    checkpoint(path);
    let without_vectors = file_mb(path);

    // Synthetic vectors for every version (int8 + scale, as the store writes them).
    {
        let mut conn = rusqlite::Connection::open(path).unwrap();
        let max: i64 = conn
            .query_row("SELECT max(id) FROM memory_fact_versions", [], |r| r.get(0))
            .unwrap();
        let mut vrng = Rng(7);
        for chunk in (1..=max).collect::<Vec<_>>().chunks(10_000) {
            let tx = conn.transaction().unwrap();
            for id in chunk {
                let (q, scale) = quantise(&vrng.unit_vector());
                let blob: Vec<u8> = q.iter().map(|x| x.to_le_bytes()[0]).collect();
                tx.execute(
                    "INSERT INTO memory_fact_vectors (version_id, model, scale, vector) VALUES (?1, 'all-MiniLM-L6-v2', ?2, ?3)",
                    rusqlite::params![id, f64::from(scale), blob],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
    }
    checkpoint(path);
    println!(
        "  {:<48} {:>8.0} MB without the vectors, {:.0} MB with them",
        "store size on disk",
        without_vectors,
        file_mb(path)
    );
}

fn queries_and_views(
    path: &Path,
    facts: usize,
    versions: usize,
    words: &[&str],
    round_end: &[i64],
) {
    let path = path.to_path_buf();
    let ns = |i: usize| format!("agent/a{i}");

    // Queries: 1–3 common words, sometimes a name or a reference.
    let mut qrng = Rng(99);
    let texts: Vec<String> = (0..QUERIES)
        .map(|_| {
            let mut q: Vec<String> = (0..1 + qrng.below(3))
                .map(|_| words[qrng.below(words.len())].to_string())
                .collect();
            match qrng.below(3) {
                0 => q.push(NAMES[qrng.below(NAMES.len())].to_string()),
                1 => q.push(format!("F{}v0", qrng.below(facts))),
                _ => {}
            }
            q.join(" ")
        })
        .collect();
    let one: Vec<String> = vec![ns(3)];
    let three: Vec<String> = vec![ns(3), ns(4), ns(5)];
    let all: Vec<String> = (0..NAMESPACES).map(ns).collect();
    let queries = |namespaces: &[String], view: &dyn Fn(usize) -> View| -> Vec<FactQuery> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| FactQuery {
                text: t.clone(),
                namespaces: namespaces.to_vec(),
                view: view(i),
                limit: 10,
            })
            .collect()
    };
    let mut trng = Rng(5);
    let at_times: Vec<i64> = (0..QUERIES)
        .map(|_| {
            let r = trng.below(versions);
            round_end[r] + (trng.below(DAY as usize / 2)) as i64
        })
        .collect();
    let at = |i: usize| View::BelievedAt(at_times[i]);
    let current = |_| View::Current;

    // BM25 alone (no embedder).
    let bm25 = FactStore::open_read_only(&path, EmbedSlot::new()).unwrap();
    for (label, namespaces) in [
        ("one agent", &one),
        ("manager, 3 namespaces", &three),
        ("CEO, 10 namespaces", &all),
    ] {
        let qs = queries(namespaces, &current);
        report(
            &format!("search bm25, current, {label}"),
            latencies(&qs, |q| {
                bm25.search(q).unwrap();
            }),
        );
    }

    // Hybrid, the query's vector given (random): load the current vectors, then search.
    let rss = rss_mb();
    let hybrid = FactStore::open_read_only(
        &path,
        EmbedSlot::with(Arc::new(QueryVectors(Mutex::new(Rng(3))))),
    )
    .unwrap();
    let t = Instant::now();
    hybrid
        .search(&FactQuery {
            text: "budget".into(),
            namespaces: one.clone(),
            view: View::Current,
            limit: 10,
        })
        .unwrap();
    println!(
        "  {:<48} {:>8.0} ms (RSS +{:.0} MB: the current versions' int8 vectors)",
        "first hybrid search (loads vectors)",
        t.elapsed().as_secs_f64() * 1000.0,
        rss_mb() - rss
    );
    for (label, namespaces) in [
        ("one agent", &one),
        ("manager, 3 namespaces", &three),
        ("CEO, 10 namespaces", &all),
    ] {
        report(
            &format!("search hybrid (query vector given), {label}"),
            latencies(&queries(namespaces, &current), |q| {
                hybrid.search(q).unwrap();
            }),
        );
    }
    // Searching the past is the rare path (`archival_search` with `at`): fewer queries.
    for (label, namespaces) in [("one agent", &one), ("CEO, 10 namespaces", &all)] {
        let qs: Vec<FactQuery> = queries(namespaces, &at)
            .into_iter()
            .take(PAST_QUERIES)
            .collect();
        report(
            &format!("--at search hybrid (vector given), {label}"),
            latencies(&qs, |q| {
                hybrid.search(q).unwrap();
            }),
        );
        report(
            &format!("--at search bm25, {label}"),
            latencies(&qs, |q| {
                bm25.search(q).unwrap();
            }),
        );
    }

    // The views a CLI lists (one agent: 10k facts, 100k versions).
    let idx: Vec<usize> = (0..QUERIES).collect();
    let mut rows = 0usize;
    report(
        "--at list (BelievedAt), one agent",
        latencies(&idx, |&i| {
            rows = bm25.list(&ns(3), at(i)).unwrap().len();
        }),
    );
    println!("  {:<48} {rows} versions a listing", "");
    report(
        "--at list, after the last write",
        latencies(&idx, |&_i| {
            bm25.list(&ns(3), View::BelievedAt(round_end[versions - 1] + 1))
                .unwrap();
        }),
    );
    report(
        "current list, one agent",
        latencies(&idx, |_| {
            bm25.list(&ns(3), View::Current).unwrap();
        }),
    );
    report(
        "--valid-at list, one agent",
        latencies(&idx, |&i| {
            bm25.list(&ns(3), View::ValidAt(at_times[i])).unwrap();
        }),
    );
    report(
        "history of one fact",
        latencies(&idx, |&i| {
            bm25.history(1 + (i * 37 % facts) as i64).unwrap();
        }),
    );
    let subjects: HashSet<usize> = (0..QUERIES).map(|i| i * 13 % 2000).collect();
    let subjects: Vec<usize> = subjects.into_iter().collect();
    report(
        "about(subject), current, one agent",
        latencies(&subjects, |&s| {
            bm25.about(&one, &format!("project {s}"), View::Current)
                .unwrap();
        }),
    );

    // The real MiniLM embedding the query (when it is in the cache).
    match MiniLm::load_shared() {
        Ok(model) => {
            let real = FactStore::open_read_only(&path, EmbedSlot::with(model)).unwrap();
            for (label, namespaces) in [("one agent", &one), ("CEO, 10 namespaces", &all)] {
                report(
                    &format!("search hybrid + MiniLM query, {label}"),
                    latencies(&queries(namespaces, &current), |q| {
                        real.search(q).unwrap();
                    }),
                );
            }
        }
        Err(e) => println!("  (MiniLM not in the cache: {e}; `opc models fetch`)"),
    }
}
