//! # Cluster benchmark (issue 36 §5)
//!
//! Several nodes serving one org on one PostgreSQL database, measured side by side in one run:
//!
//! 1. **Scale-out.** 32 single-turn roots sent to one node, each model call taking 0.5 s (the
//!    scripted LLM, in process, `with_delay_ms(500)`), `maxConcurrentAgents: 4` a node: wall time
//!    with one node vs with two (in-process [`Engine`]s with `EngineOptions.cluster`, each with its
//!    own pool and lease, as `tests/tests/cluster_engine.rs` builds them), alternating, several
//!    repetitions, medians and their ratio (target ≥ 1.8× faster with two; the ideal is 2×:
//!    8 waves of 4 calls vs 4 waves of 8).
//! 2. **Failover.** Two real `opc run --node NAME` processes (`framework.cluster.leaseTtl: 3s`, and
//!    15 s, the default): a request's tree runs on one node with its model call in flight; that node
//!    is killed with `kill -9`, and the time until the other node re-issues the model call (when it
//!    reaches the scripted LLM) and until the tree's `tasks.node` names the other node is measured.
//!    Median of several repetitions (target ≤ leaseTtl + 5 s). The lease's remaining life at the
//!    kill (read from `tree_leases`) splits it into "waiting for the lease to lapse" and "noticing
//!    and claiming it".
//! 3. **Connections per node.** `pg_stat_activity` of the org's database grouped by
//!    `application_name`, which the bench sets per node in the URL (`?application_name=NODE`):
//!    right after start, idle after work, and the most seen under the load of (1), with one node
//!    and with two; the same for `opc run` nodes (idle, and under 32 web-chat requests at one node,
//!    which is also timed once as a cross-check of (1) through the whole product).
//!
//! Every root checks its answer and every failover checks that the tree completed on the other
//! node, so a failure is never timed as a success. The machine has 2 cores, usually shared: compare
//! within one run, and quote medians and ratios.
//!
//! Run: `cargo bench -p opc-tests --bench cluster`. Options after `--`: `--reps N` (scale-out
//! repetitions per variant, default 5; failover repetitions at 3 s, default 5); `--no-default-ttl`
//! (skip the failover at 15 s, which takes about a minute). PostgreSQL: `OPC_TEST_POSTGRES_URL`'s
//! server, else a throw-away one (Debian's server binaries); without either it says so and exits 0.
//! Without `--bench` (which `cargo bench` passes) it only runs one small repetition of each part.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::join_all;
use opc_agents::store::{NodeIdentity, PgStore, Store};
use opc_agents::{Engine, EngineOptions, TaskState};
use opc_tests::cluster::{Db, WEB, poll};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::postgres::{PgServer, create_database};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};

/// Requests of the scale-out measure.
const REQUESTS: usize = 32;
/// Model latency of every call in the scale-out measure.
const LATENCY_MS: u64 = 500;
/// `maxConcurrentAgents` of every node.
const SLOTS: u32 = 4;
/// The pool size of an in-process node: `framework.memory.postgres.maxConnections`' default.
const POOL: u32 = 16;
/// The lease of the in-process nodes of the scale-out: the product's default.
const DEFAULT_TTL: Duration = Duration::from_secs(15);
/// Issue 36 §5's targets.
const TARGET_SPEEDUP: f64 = 1.8;
const TARGET_FAILOVER_SLACK: Duration = Duration::from_secs(5);
/// The deadline of anything a failover waits for (a 15 s lease, a busy machine).
const FAILOVER_DEADLINE: Duration = Duration::from_secs(90);

// -------------------------------------------------------------------------------------------------
// Connections

/// Connections to the org's database per `application_name` (the bench's own reading session
/// excluded), or why they could not be read.
async fn connections(db: &Db) -> BTreeMap<String, i64> {
    db.rows(
        "SELECT coalesce(nullif(application_name, ''), '(unnamed)'), count(*) \
         FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() \
         GROUP BY 1 ORDER BY 1",
        &[],
    )
    .await
    .iter()
    .map(|row| (row.get(0), row.get(1)))
    .collect()
}

/// The most connections seen per name over several samples.
fn max_into(into: &mut BTreeMap<String, i64>, sample: &BTreeMap<String, i64>) {
    for (name, n) in sample {
        let at = into.entry(name.clone()).or_default();
        *at = (*at).max(*n);
    }
}

fn show(counts: &BTreeMap<String, i64>) -> String {
    if counts.is_empty() {
        return "none".into();
    }
    counts
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `url` with `application_name=name`, so `pg_stat_activity` tells the nodes apart.
fn named(url: &str, name: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={name}")
}

// -------------------------------------------------------------------------------------------------
// 1. Scale-out, in-process nodes

fn identity(name: &str) -> NodeIdentity {
    static INSTANCES: AtomicI64 = AtomicI64::new(1);
    NodeIdentity {
        id: name.to_string(),
        instance: i64::from(std::process::id()) << 20 | INSTANCES.fetch_add(1, Ordering::Relaxed),
        address: None,
        host: "bench".into(),
        pid: std::process::id(),
        started_ms: 0,
        config_digest: "same".into(),
    }
}

/// An in-process node on `url`: its own pool, cluster membership and engine.
async fn engine_node(org: &TestOrg, url: &str, name: &str) -> (Engine, Arc<PgStore>) {
    let store = Arc::new(
        PgStore::connect(&named(url, name), POOL)
            .await
            .expect("connect a node to the benchmark's PostgreSQL"),
    );
    let cluster = store.cluster(identity(name), DEFAULT_TTL);
    let engine = org
        .engine_on(
            store.clone(),
            EngineOptions {
                cluster: Some(cluster),
                ..TestOrg::options(false)
            },
        )
        .await;
    (engine, store)
}

/// One scale-out run.
struct ScaleRun {
    wall: Duration,
    /// Roots each node ran, by name.
    ran: BTreeMap<String, usize>,
    /// Connections: after the nodes started, the most under load, after the load (idle).
    started: BTreeMap<String, i64>,
    load: BTreeMap<String, i64>,
    after: BTreeMap<String, i64>,
}

/// Send `REQUESTS` roots to node `a` of `nodes` fresh nodes on a fresh database, and wait for all.
/// With `sample`, `pg_stat_activity` is read every 100 ms while they run (a run kept apart from
/// the timed ones, so the sampling costs them nothing).
async fn scale_once(admin: &str, org: &TestOrg, nodes: usize, tag: &str, sample: bool) -> ScaleRun {
    let url = create_database(admin, &format!("cluster_scale_{tag}"))
        .await
        .expect("create a scale-out database");
    let db = Db::new(&url);
    let mut engines = Vec::new();
    let mut store = None;
    for name in ["a", "b"].into_iter().take(nodes) {
        let (engine, s) = engine_node(org, &url, name).await;
        store.get_or_insert(s);
        engines.push(engine);
    }
    let store = store.expect("at least one node");
    let started = if sample {
        tokio::time::sleep(Duration::from_millis(500)).await;
        connections(&db).await
    } else {
        BTreeMap::new()
    };
    // Warm up every node (a pooled connection or two, the HTTP client), one root each at once.
    let warm = join_all(engines.iter().enumerate().map(|(i, e)| async move {
        let input = format!("{tag} warm-up {i}");
        let outcome = e
            .send(None, &input)
            .await
            .expect("send a warm-up")
            .wait()
            .await;
        assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    }));
    warm.await;

    let load = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let stop = stop_flag();
    let sampler = sample.then(|| {
        let (db, load, stop) = (db.clone(), load.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let now = connections(&db).await;
                max_into(&mut load.lock().unwrap(), &now);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });

    let a = &engines[0];
    let inputs: Vec<String> = (0..REQUESTS).map(|i| format!("{tag} task {i}")).collect();
    let begun = Instant::now();
    let mut runs = Vec::with_capacity(REQUESTS);
    for input in &inputs {
        runs.push(a.send(None, input).await.expect("send a root"));
    }
    let ids: Vec<i64> = runs.iter().map(|r| r.task).collect();
    let outcomes = join_all(runs.into_iter().map(|r| r.wait())).await;
    let wall = begun.elapsed();

    stop.store(true, Ordering::Relaxed);
    if let Some(sampler) = sampler {
        sampler.await.expect("the connection sampler");
    }
    for (input, outcome) in inputs.iter().zip(&outcomes) {
        assert_eq!(
            outcome.state,
            TaskState::Completed,
            "{input}: {}",
            outcome.text
        );
        assert_eq!(outcome.text, format!("ANSWER({input})"), "{input}");
    }
    let mut ran = BTreeMap::new();
    for id in ids {
        let node = store
            .task(id)
            .await
            .expect("read a root")
            .node
            .unwrap_or_else(|| "(none)".into());
        *ran.entry(node).or_default() += 1;
    }
    let after = if sample {
        tokio::time::sleep(Duration::from_secs(1)).await;
        connections(&db).await
    } else {
        BTreeMap::new()
    };
    for engine in engines {
        engine.shutdown().await;
    }
    let load = load.lock().unwrap().clone();
    ScaleRun {
        wall,
        ran,
        started,
        load,
        after,
    }
}

/// A stop flag for the sampler.
fn stop_flag() -> Arc<std::sync::atomic::AtomicBool> {
    Arc::new(std::sync::atomic::AtomicBool::new(false))
}

struct ScaleOut {
    one: Vec<Duration>,
    two: Vec<Duration>,
    /// Roots run per node in the two-node runs, summed.
    spread: BTreeMap<String, usize>,
    sampled_one: ScaleRun,
    sampled_two: ScaleRun,
}

async fn scale_out(admin: &str, reps: usize) -> ScaleOut {
    let (_llm, org) = TestOrg::scripted(Script::new().agent(
        marker("ceo"),
        vec![Step::text("ANSWER({{input}})").with_delay_ms(LATENCY_MS)],
    ))
    .execution(Execution {
        max_concurrent_agents: SLOTS,
        ..Execution::default()
    })
    .start()
    .await;
    let (mut one, mut two, mut spread) = (Vec::new(), Vec::new(), BTreeMap::new());
    for rep in 0..reps {
        // Alternate which goes first, so a drift of the machine's load favours neither.
        let order: [usize; 2] = if rep % 2 == 0 { [1, 2] } else { [2, 1] };
        for nodes in order {
            let run = scale_once(admin, &org, nodes, &format!("r{rep}n{nodes}"), false).await;
            println!(
                "   rep {rep}, {nodes} node{}: {:>6.0} ms  (roots run: {})",
                if nodes == 1 { " " } else { "s" },
                ms(run.wall),
                run.ran
                    .iter()
                    .map(|(n, c)| format!("{n} {c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if nodes == 1 {
                one.push(run.wall);
            } else {
                for (node, n) in run.ran {
                    *spread.entry(node).or_default() += n;
                }
                two.push(run.wall);
            }
        }
    }
    let sampled_one = scale_once(admin, &org, 1, "s1", true).await;
    let sampled_two = scale_once(admin, &org, 2, "s2", true).await;
    ScaleOut {
        one,
        two,
        spread,
        sampled_one,
        sampled_two,
    }
}

// -------------------------------------------------------------------------------------------------
// 2. and 3. Real `opc run` nodes

/// An org on PostgreSQL with the web chat, lease `ttl` (`None`: the default), `SLOTS` a node.
fn opc_org(llm_url: &str, ttl: Option<&str>) -> TestOrg {
    let cluster = ttl.map_or(String::new(), |t| {
        format!("  cluster:\n    leaseTtl: {t}\n")
    });
    let framework = format!("  memory:\n    storage: postgres\n{cluster}");
    TestOrg::with_extras(
        llm_url,
        Wire::Anthropic,
        Execution {
            max_concurrent_agents: SLOTS,
            ..Execution::default()
        },
        &Extras {
            framework: &framework,
            sections: WEB,
            ..Extras::default()
        },
    )
}

/// `opc run --node NAME` on `org`, its connections named after it.
fn opc_node(org: &TestOrg, url: &str, name: &str) -> OpcRun {
    let url = named(url, name);
    OpcRun::start_with_args(
        &org.config_path(),
        &["--node", name],
        &[
            (KEY_VAR, KEY),
            ("DATABASE_URL", url.as_str()),
            ("OPC_LOG", "warn"),
        ],
    )
}

/// Whether process `pid` is gone or a zombie.
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// One failover.
struct Failover {
    /// kill -9 → the re-issued model call reached the scripted LLM.
    reissued: Duration,
    /// kill -9 → `tasks.node` named the other node (polled every 20 ms).
    moved: Duration,
    /// The lease's remaining life at the kill.
    lease_left: Duration,
}

/// `reps` failovers with lease `ttl` on a fresh database.
async fn failover(admin: &str, ttl: &str, reps: usize) -> Vec<Failover> {
    let url = create_database(admin, &format!("cluster_failover_{ttl}"))
        .await
        .expect("create a failover database");
    let db = Db::new(&url);
    // Each request's first model call is answered long after the kill (it stays in flight); the
    // same call re-issued by the node that took the tree over is answered at once.
    let llm = ScriptedLlm::start(Script::new().agent(
        marker("ceo"),
        vec![
            Step::text("Answer to {{input}}").with_delay_ms(300_000),
            Step::text("Answer to {{input}}"),
        ],
    ))
    .await
    .expect("start the scripted LLM");
    let org = opc_org(&llm.url(), Some(ttl));
    let names = ["node-a", "node-b"];
    let mut nodes: BTreeMap<&str, OpcRun> = names
        .iter()
        .map(|name| (*name, opc_node(&org, &url, name)))
        .collect();
    let ceo = marker("ceo");
    let mut results = Vec::new();
    for rep in 0..reps {
        let text = format!("Failover request {ttl} {rep}");
        // Alternate the node the request is sent to.
        let to = names[rep % 2];
        let (_conversation, _page) = opc_tests::web_chat::start(&nodes[to], &text).await;
        let (db_ref, llm_ref, ceo_ref, text_ref) = (&db, &llm, &ceo, text.as_str());
        let (root, owner) = poll(
            FAILOVER_DEADLINE,
            "the request's model call in flight",
            move || async move {
                let asked = llm_ref
                    .requests_for(ceo_ref)
                    .iter()
                    .any(|q| q.session.contains(text_ref) && q.answered_at.is_none());
                if !asked {
                    return None;
                }
                db_ref
                    .roots()
                    .await
                    .into_iter()
                    .find(|r| r.input.contains(text_ref) && !r.ended())
                    .and_then(|r| Some((r.id, r.node?)))
            },
        )
        .await;
        let owner: &str = names
            .iter()
            .find(|n| **n == owner)
            .unwrap_or_else(|| panic!("the tree runs on an unknown node {owner:?}"));
        let lease_ms: i64 = db
            .rows(
                "SELECT expires_ms - (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
                 FROM tree_leases WHERE root_id = $1",
                &[&root],
            )
            .await
            .first()
            .map(|row| row.get(0))
            .expect("the tree's lease");
        let pid = nodes[owner].pid();
        let killed_at = SystemTime::now();
        let killed = Instant::now();
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -9 {pid}");
        while !dead(pid) {
            assert!(
                killed.elapsed() < FAILOVER_DEADLINE,
                "{owner} survived kill -9"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Read a moment before the kill; the node renews no more after it.
        let lease_left = Duration::from_millis(lease_ms.max(0) as u64);
        // Poll both signs at 20 ms until both are seen.
        let (mut reissued, mut moved) = (None, None);
        while reissued.is_none() || moved.is_none() {
            assert!(
                killed.elapsed() < FAILOVER_DEADLINE,
                "no failover of {text:?} within {FAILOVER_DEADLINE:?} of killing {owner}"
            );
            if reissued.is_none() {
                reissued = llm
                    .requests_for(&ceo)
                    .iter()
                    .filter(|q| q.session.contains(text.as_str()))
                    .nth(1)
                    .map(|q| {
                        q.received_at
                            .duration_since(killed_at)
                            .unwrap_or(Duration::ZERO)
                    });
            }
            if moved.is_none() {
                let now = db
                    .rows("SELECT node FROM tasks WHERE id = $1", &[&root])
                    .await
                    .first()
                    .and_then(|row| row.get::<_, Option<String>>(0));
                if now.as_deref().is_some_and(|n| n != owner) {
                    moved = Some(killed.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The tree completed, with its answer, on the other node.
        let done = poll(
            FAILOVER_DEADLINE,
            "the taken-over tree to end",
            move || async move {
                db_ref
                    .roots()
                    .await
                    .into_iter()
                    .find(|r| r.id == root)
                    .filter(|r| r.ended())
            },
        )
        .await;
        assert_eq!(done.state, "COMPLETED", "{done:?}");
        assert_eq!(
            done.output.as_deref(),
            Some(format!("Answer to {text}").as_str()),
            "{done:?}"
        );
        assert_ne!(done.node.as_deref(), Some(owner), "{done:?}");
        let f = Failover {
            reissued: reissued.expect("seen"),
            moved: moved.expect("seen"),
            lease_left,
        };
        println!(
            "   leaseTtl {ttl}, rep {rep}: killed {owner}; lease left {:>5.0} ms; call re-issued \
             after {:>5.0} ms; tasks.node moved after {:>5.0} ms",
            ms(f.lease_left),
            ms(f.reissued),
            ms(f.moved)
        );
        results.push(f);
        // The killed node comes back (reaped first), for the next repetition.
        drop(nodes.remove(owner));
        nodes.insert(owner, opc_node(&org, &url, owner));
    }
    drop(nodes);
    results
}

/// Connections of `opc run` nodes: idle with one node, under 32 web-chat requests at it (timed
/// once: a cross-check of (1) through the product), then the same with two nodes.
struct OpcLoad {
    runs: Vec<OpcLoadRun>,
}

/// Nodes, idle connections, the most under load, wall of the requests.
type OpcLoadRun = (usize, Connections, Connections, Duration);

/// Connections per `application_name`.
type Connections = BTreeMap<String, i64>;

async fn opc_load(admin: &str, requests: usize) -> OpcLoad {
    let llm = ScriptedLlm::start(Script::new().agent(
        marker("ceo"),
        vec![Step::text("Answer to {{input}}").with_delay_ms(LATENCY_MS)],
    ))
    .await
    .expect("start the scripted LLM");
    let org = opc_org(&llm.url(), None);
    let mut runs = Vec::new();
    for count in [1, 2] {
        let url = create_database(admin, &format!("cluster_opc_load_{count}"))
            .await
            .expect("create a database");
        let db = Db::new(&url);
        let nodes: Vec<OpcRun> = ["node-a", "node-b"]
            .iter()
            .take(count)
            .map(|name| opc_node(&org, &url, name))
            .collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let idle = connections(&db).await;
        let mut load = BTreeMap::new();
        let begun = Instant::now();
        let mut pages = Vec::new();
        for i in 0..requests {
            let text = format!("Load {count} request {i}");
            pages.push(opc_tests::web_chat::start(&nodes[0], &text).await);
        }
        loop {
            max_into(&mut load, &connections(&db).await);
            let roots = db.roots().await;
            let done = roots.iter().filter(|r| r.ended()).count();
            if done >= requests {
                assert!(
                    roots.iter().all(|r| r.state == "COMPLETED"
                        && r.output.as_deref() == Some(format!("Answer to {}", r.input).as_str())),
                    "{roots:#?}"
                );
                break;
            }
            assert!(
                begun.elapsed() < FAILOVER_DEADLINE,
                "{done} of {requests} requests answered after {FAILOVER_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let wall = begun.elapsed();
        drop(pages);
        for node in nodes {
            let (code, _) = node.stop();
            assert_eq!(code, Some(0), "a node did not stop cleanly");
        }
        runs.push((count, idle, load, wall));
    }
    OpcLoad { runs }
}

// -------------------------------------------------------------------------------------------------
// Main

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(values: &[Duration]) -> Duration {
    let mut v = values.to_vec();
    v.sort();
    match v.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The admin URL of a server for the bench's databases, and the throw-away server to keep alive.
fn postgres() -> Option<(String, Option<PgServer>)> {
    match std::env::var("OPC_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some((url, None)),
        _ => match PgServer::start() {
            Ok(server) => Some((server.url("postgres"), Some(server))),
            Err(why) => {
                println!("cluster bench: no PostgreSQL server here ({why}); nothing measured");
                None
            }
        },
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value_of = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let smoke = !args.iter().any(|a| a == "--bench");
    let reps: usize = value_of("--reps")
        .map(|r| r.parse().expect("--reps N"))
        .unwrap_or(if smoke { 1 } else { 5 });
    let default_ttl = !smoke && !args.iter().any(|a| a == "--no-default-ttl");
    let Some((admin, server)) = postgres() else {
        return;
    };
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!();
    println!(
        "== opc cluster benchmark{} ==",
        if smoke {
            " (smoke run, not under `cargo bench`: numbers are not meaningful)"
        } else {
            ""
        }
    );
    println!(
        "   {cpus} CPUs (shared with other work: load average {}), PostgreSQL {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        if server.is_some() {
            "throw-away server (fsync off)"
        } else {
            "from OPC_TEST_POSTGRES_URL"
        }
    );
    let rt = runtime();

    println!();
    println!(
        "1. Scale-out: {REQUESTS} single-turn roots sent to node a, {LATENCY_MS} ms per model call, \
         maxConcurrentAgents {SLOTS} a node, in-process nodes (pool {POOL}, leaseTtl 15 s); \
         1 vs 2 nodes alternating, {reps} reps"
    );
    let scale = rt.block_on(scale_out(&admin, reps));

    println!();
    println!("2. Failover: two `opc run` nodes, kill -9 of the node whose model call is in flight");
    let fast = rt.block_on(failover(&admin, "3s", reps));
    let slow = default_ttl.then(|| rt.block_on(failover(&admin, "15s", reps.min(3))));

    println!();
    println!(
        "3. Connections to the org's database per node (pg_stat_activity by application_name)"
    );
    let opc = rt.block_on(opc_load(&admin, if smoke { 8 } else { REQUESTS }));
    for (label, run) in [
        ("in-process, 1 node", &scale.sampled_one),
        ("in-process, 2 nodes", &scale.sampled_two),
    ] {
        println!(
            "   {label:<22} started: {}; under load (max): {}; idle after: {}  [wall {:.0} ms, sampled]",
            show(&run.started),
            show(&run.load),
            show(&run.after),
            ms(run.wall)
        );
    }
    for (count, idle, load, wall) in &opc.runs {
        println!(
            "   opc run, {count} node{:<9} idle: {}; under load (max): {}  [{} web-chat requests \
             at node-a answered in {:.0} ms]",
            if *count == 1 { "" } else { "s" },
            show(idle),
            show(load),
            if smoke { 8 } else { REQUESTS },
            ms(*wall)
        );
    }

    println!();
    println!("4. Summary");
    let (one, two) = (median(&scale.one), median(&scale.two));
    let speedup = one.as_secs_f64() / two.as_secs_f64();
    let waves = |nodes: u64| (REQUESTS as u64).div_ceil(nodes * u64::from(SLOTS)) * LATENCY_MS;
    println!(
        "   scale-out median wall: 1 node {:.0} ms (ideal {} ms), 2 nodes {:.0} ms (ideal {} ms); \
         speed-up {speedup:.2}× (target ≥ {TARGET_SPEEDUP}×): {}; two-node roots per node, all reps: {}",
        ms(one),
        waves(1),
        ms(two),
        waves(2),
        verdict(speedup >= TARGET_SPEEDUP),
        scale
            .spread
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (ttl, secs, results) in [("3s", 3, Some(&fast)), ("15s", 15, slow.as_ref())] {
        let Some(results) = results else {
            continue;
        };
        let reissued = median(&results.iter().map(|f| f.reissued).collect::<Vec<_>>());
        let moved = median(&results.iter().map(|f| f.moved).collect::<Vec<_>>());
        let left = median(&results.iter().map(|f| f.lease_left).collect::<Vec<_>>());
        let target = Duration::from_secs(secs) + TARGET_FAILOVER_SLACK;
        println!(
            "   failover, leaseTtl {ttl}, median of {}: call re-issued {:.0} ms, tasks.node moved \
             {:.0} ms (target ≤ {} ms): {}; of which the lease's remaining life {:.0} ms",
            results.len(),
            ms(reissued),
            ms(moved),
            target.as_millis(),
            verdict(reissued.max(moved) <= target),
            ms(left)
        );
    }
    println!();
}
