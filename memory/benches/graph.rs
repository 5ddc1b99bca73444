//! Benchmark: graph memory's neighbourhood query at scale — 100k edges between ~20k entities in a
//! few agent namespaces, written through `FactStore::apply` (ADDs with a predicate and an object;
//! then a tenth of them UPDATEd to another object, so closed edges exist for `BelievedAt`), then
//! `graph()` p50/p95 from random entities: depth 1, 2 and 3 with `max_edges` 2000, depth 2 as
//! believed before the updates, and `about()` (one entity's facts, graph-lite) as the reference
//! line of the same run.
//!
//! The data: seeded (same every run). Degrees are power-law-ish: each edge's subject and object are
//! drawn Zipf (1/rank) over a per-namespace shuffle of its entities, so a few hubs hold thousands of
//! edges and most entities a handful — the shape that makes a depth-2 neighbourhood expensive when
//! it passes through a hub. Query roots are drawn uniformly over the entities that have an edge.
//!
//! Backends: SQLite always; PostgreSQL too when `--postgres URL` or `OPC_TEST_POSTGRES_URL` is
//! given (use a throw-away database: the bench writes memory's tables into it).
//!
//! Run: `cargo bench -p opc-memory --bench graph` (`-- --edges 10000` for a quick run; `-- --db
//! PATH` keeps the SQLite store there and reuses it on the next run).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use opc_memory::embed::EmbedSlot;
use opc_memory::facts::graph::GraphQuery;
use opc_memory::facts::{FactStore, Op, Provenance, Source, View};

// Shared with the facts and recall benches; this one uses the generator and percentiles only.
#[allow(dead_code)]
mod common;
use common::{Rng, WARM_UP, percentile};

const BATCH: usize = 1000;
const BASE: i64 = 1_780_000_000_000;
const PREDICATES: &[&str] = &[
    "leads",
    "works on",
    "reports to",
    "depends on",
    "owns",
    "reviews",
    "supplies",
    "funds",
];

/// `cargo bench -p opc-memory --bench graph [-- --edges N --entities N --namespaces N --db PATH]`
#[derive(Parser)]
struct Args {
    /// Edges in all (current after the run: the updated tenth keeps one current edge each).
    #[arg(long, default_value_t = 100_000)]
    edges: usize,
    /// Entities in all, spread over the namespaces.
    #[arg(long, default_value_t = 20_000)]
    entities: usize,
    /// Agent namespaces.
    #[arg(long, default_value_t = 4)]
    namespaces: usize,
    /// Timed queries per line.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// The cap on edges per neighbourhood.
    #[arg(long, default_value_t = 2000)]
    max_edges: usize,
    /// Keep the SQLite store here, and reuse it when it exists.
    #[arg(long)]
    db: Option<PathBuf>,
    /// A throw-away PostgreSQL database to measure too (else `OPC_TEST_POSTGRES_URL`, if set).
    #[arg(long)]
    postgres: Option<String>,
    #[command(flatten)]
    _cargo: common::CargoBench,
}

fn who() -> Provenance {
    Provenance {
        agent: "bench".into(),
        source: Source::System,
        ..Provenance::default()
    }
}

fn ns(i: usize) -> String {
    format!("agent/g{i}")
}

fn name(ns: usize, k: usize) -> String {
    format!("Entity {ns}-{k}")
}

/// Write the graph; returns the time between the ADDs and the UPDATEs (for `BelievedAt`).
fn ingest(store: &FactStore, a: &Args) -> i64 {
    let per_ns = a.entities / a.namespaces;
    let edges_per_ns = a.edges / a.namespaces;
    let mut rng = Rng(7);
    let mut clock = BASE;
    let started = Instant::now();
    let mut added: Vec<Vec<i64>> = Vec::new();
    for n in 0..a.namespaces {
        // A shuffle, so the hubs are not the low numbers of every namespace.
        let mut perm: Vec<usize> = (0..per_ns).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        let mut ids = Vec::with_capacity(edges_per_ns);
        for start in (0..edges_per_ns).step_by(BATCH) {
            let ops: Vec<Op> = (start..(start + BATCH).min(edges_per_ns))
                .map(|i| {
                    let s = name(n, perm[rng.zipf(per_ns)]);
                    let o = name(n, perm[rng.zipf(per_ns)]);
                    let p = PREDICATES[rng.below(PREDICATES.len())];
                    Op::Add {
                        text: format!("{s} {p} {o} (#{i})"),
                        subject: Some(s),
                        predicate: Some(p.to_string()),
                        object: Some(o),
                        valid_from: None,
                        valid_to: None,
                    }
                })
                .collect();
            clock += 1;
            ids.extend(store.apply(&ns(n), &ops, &who(), clock).unwrap().added);
        }
        added.push(ids);
    }
    clock += 1_000;
    let between = clock;
    // A tenth moves to another object: its old edge is closed (BelievedAt sees it).
    for (n, ids) in added.iter().enumerate() {
        let targets: Vec<i64> = ids.iter().copied().step_by(10).collect();
        for chunk in targets.chunks(BATCH) {
            let ops: Vec<Op> = chunk
                .iter()
                .map(|&target| {
                    let o = name(n, rng.below(per_ns));
                    Op::Update {
                        target,
                        text: format!("moved to {o} (#{target})"),
                        subject: None,
                        predicate: Some("works on".into()),
                        object: Some(o),
                        valid_from: None,
                        valid_to: None,
                        reason: None,
                    }
                })
                .collect();
            clock += 1;
            store.apply(&ns(n), &ops, &who(), clock).unwrap();
        }
    }
    println!(
        "  {:<44} {:>8.1} s",
        "ingest (through apply)",
        started.elapsed().as_secs_f64()
    );
    between
}

/// This thread's time on a CPU so far (`/proc/thread-self/schedstat`, ns): unlike the wall clock,
/// it leaves out waiting for a core, which on a shared machine is much of it. (On PostgreSQL the
/// work is the server's: only the wall clock means anything there.)
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Wall p50 / p95 and this thread's CPU p50 / p95 (ms) of `f` over the items, after a warm-up
/// (the first items again, untimed).
fn latencies<T>(items: &[T], mut f: impl FnMut(&T)) -> Timing {
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
    Timing(
        percentile(&wall, 0.5),
        percentile(&wall, 0.95),
        percentile(&cpu, 0.5),
        percentile(&cpu, 0.95),
    )
}

/// Wall p50, p95, CPU p50, p95 (ms).
struct Timing(f64, f64, f64, f64);

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Timing(p50, p95, c50, c95) = self;
        write!(
            f,
            "p50 {p50:>7.2} ms  p95 {p95:>7.2} ms  (CPU p50 {c50:>6.2}  p95 {c95:>6.2})"
        )
    }
}

fn measure(label: &str, store: &FactStore, a: &Args, between: i64) {
    println!("{label}:");
    // Roots: uniform over the entities that have a current edge (an unknown name would be a
    // free answer), each in its own namespace.
    let mut named: Vec<Vec<String>> = Vec::new();
    for n in 0..a.namespaces {
        let mut names: Vec<String> = store
            .list(&ns(n), View::Current)
            .unwrap()
            .into_iter()
            .flat_map(|v| [v.subject, v.object])
            .flatten()
            .collect();
        names.sort();
        names.dedup();
        named.push(names);
    }
    let mut rng = Rng(99);
    let roots: Vec<(String, String)> = (0..a.queries)
        .map(|_| {
            let n = rng.below(a.namespaces);
            (ns(n), named[n][rng.below(named[n].len())].clone())
        })
        .collect();
    let query = |(space, entity): &(String, String), depth, view| GraphQuery {
        namespaces: vec![space.clone()],
        entity: Some(entity.clone()),
        depth,
        view,
        max_edges: a.max_edges,
    };
    for depth in 1..=3u8 {
        let timing = latencies(&roots, |r| {
            store.graph(&query(r, depth, View::Current)).unwrap();
        });
        let (mut edges, mut truncated) = (0usize, 0usize);
        for r in &roots {
            let g = store.graph(&query(r, depth, View::Current)).unwrap();
            edges += g.edges.len();
            truncated += usize::from(g.truncated);
        }
        println!(
            "  {:<44} {timing}  {:.0} edges a query, {truncated}/{} truncated",
            format!("graph depth {depth}, max_edges {}", a.max_edges),
            edges as f64 / roots.len() as f64,
            roots.len(),
        );
    }
    let timing = latencies(&roots, |r| {
        store
            .graph(&query(r, 2, View::BelievedAt(between)))
            .unwrap();
    });
    println!(
        "  {:<44} {timing}",
        "graph depth 2, believed before the updates"
    );
    let timing = latencies(&roots, |(space, entity)| {
        store
            .about(std::slice::from_ref(space), entity, View::Current)
            .unwrap();
    });
    println!(
        "  {:<44} {timing}",
        "reference: about() (one entity's facts)"
    );
    let timing = latencies(&roots, |(space, entity)| {
        let text = format!("What does {entity} depend on, and who leads it?");
        let found = store
            .entities_in(std::slice::from_ref(space), &text)
            .unwrap();
        let ids: Vec<i64> = found.iter().map(|f| f.0).collect();
        store
            .neighbour_facts(std::slice::from_ref(space), &ids, View::Current, 20)
            .unwrap();
    });
    println!("  {:<44} {timing}", "entities_in + neighbour_facts (20)");
}

fn sqlite(a: &Args) {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = a.db.clone().unwrap_or_else(|| dir.path().join("db.sqlite"));
    let reuse = path.exists();
    let store = FactStore::open(&path, EmbedSlot::new()).unwrap();
    println!("SQLite ({}):", path.display());
    let between = if reuse {
        println!("  (reusing the store)");
        reused_between(a)
    } else {
        ingest(&store, a)
    };
    checkpoint(&path);
    measure("SQLite", &store, a, between);
}

/// The time between the ADDs and the UPDATEs of a store written by [`ingest`] in an earlier run.
fn reused_between(a: &Args) -> i64 {
    BASE + (a.edges / a.namespaces).div_ceil(BATCH) as i64 * a.namespaces as i64 + 1_000
}

fn checkpoint(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    conn.execute_batch("ANALYZE").unwrap();
}

fn postgres(a: &Args, url: &str) {
    let conn = opc_pg::Blocking::connect(url, "graph-bench").unwrap();
    let store = FactStore::open_postgres(conn, EmbedSlot::new()).unwrap();
    println!("PostgreSQL:");
    let whole = GraphQuery {
        namespaces: vec![ns(0)],
        entity: None,
        depth: 1,
        view: View::Current,
        max_edges: 1,
    };
    // Seeded data: a database that has it already is measured again without the ingest.
    let between = if store.graph(&whole).unwrap().edges.is_empty() {
        ingest(&store, a)
    } else {
        println!("  (reusing the database's graph)");
        reused_between(a)
    };
    let conn = opc_pg::Blocking::connect(url, "graph-bench-analyze").unwrap();
    conn.run("analyzing", |c| c.batch_execute("ANALYZE"))
        .unwrap();
    measure("PostgreSQL", &store, a, between);
}

fn main() {
    let a = Args::parse();
    println!(
        "graph: {} edges between {} entities in {} namespaces; {} queries a line",
        a.edges, a.entities, a.namespaces, a.queries
    );
    sqlite(&a);
    let url = a
        .postgres
        .clone()
        .or_else(|| std::env::var("OPC_TEST_POSTGRES_URL").ok());
    if let Some(url) = url {
        postgres(&a, &url);
    } else {
        println!("PostgreSQL: skipped (no --postgres URL nor OPC_TEST_POSTGRES_URL)");
    }
}
