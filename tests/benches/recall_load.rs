//! # Recall under load: background embedding while the gateway serves
//!
//! Measures what issue 22 saw after 1,000 web conversations with the example org: how fast recall's
//! background indexer embeds new rows (MiniLM) while `opc run` is busy answering, and how high the
//! process's memory goes meanwhile.
//!
//! Setup: the repository's example org (a fresh copy: every agent, privacy on with the NER tier,
//! recall on for the agents that have it), its provider pointed at the scripted LLM server, the web
//! chat on port 0 and the rate limits lifted. The CEO delegates every question to the VP Engineering
//! and relays the answer, so each conversation writes several recall rows (the question, the
//! delegated task, both answers), as a real exchange does. The release binary runs as a child
//! process with both local models from the cache (`opc models fetch`).
//!
//! Why a bulk as well: the gateway with privacy on writes a few rows per second (every model call is
//! masked), far fewer than the embedder can take, so conversations alone measure serving, not the
//! embedder (issue 22's 5.4 rows/s "bounded by serving"). While the conversations are served, a
//! writer beside the gateway keeps a backlog of at least `--backlog` rows (default 1,500) of the same
//! kind of text in `recall_messages` (the gateway's own SQLite file, WAL, one transaction per top-up,
//! as the engine appends rows), so the indexer always has work while serving competes with it for
//! the CPU. `--backlog 0` measures the conversations alone, as before.
//!
//! Method: one warm-up conversation, then wait until its rows are embedded (the embedder has loaded).
//! Then `N` conversations (default 200), 50 in flight at a time, each created with a distinct
//! question of about 200 bytes naming a person, and each answered (read back from its event stream).
//! A sampler reads, every 250 ms, the rows in `recall_messages` and `recall_vectors` (a read-only
//! SQLite connection beside the gateway's, WAL) and `VmRSS` of the process. Reported:
//! - rows embedded per second *while serving* (from the first question to the last answer), and the
//!   smallest backlog seen meanwhile (above zero: the embedder, not the load, set the pace);
//! - rows per second from the first question until every row is embedded (serving plus catch-up);
//! - peak `VmRSS` over the whole run, and idle `VmRSS` before the load.
//!
//! Targets (issue 38): ≥ 100 rows/s while serving; peak RSS < 400 MB.
//!
//! Run: `cargo build --release -p opc-bot && cargo bench -p opc-tests --bench recall_load`
//! (`-- --conversations N` to vary the load, `-- --backlog ROWS` the bulk, `-- --binary PATH` to
//! measure another build of `opc`). Without `--bench` (as under `cargo test --all-targets`) it
//! returns at once: it needs the release binary and both models.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use opc_memory::recall::{NewMessage, append_in};
use opc_tests::example;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{marker, relay};
use opc_tests::proc_status::status_kb;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};

/// What the VP answers (with the question in it, so every row is distinct).
const VP_ANSWER: &str = "Here is where things stand. The backend team reviewed the request and \
    agreed on a plan: ship the smaller change first, measure it for a week, then decide on the rest. \
    Details for the record: {{input}}";
/// The CEO's final answer starts with this (the scripted answer every conversation waits for).
const CEO_PREFIX: &str = "Summary from engineering: ";

const NAMES: &[&str] = &[
    "Johanna Whitfield",
    "Ravi Subramanian",
    "Marta K. Lindqvist",
    "Emeka Okafor",
    "Søren Jørgensen",
    "Aiko Tanaka",
    "Luis Ortega",
    "Fatima Haddad",
];
const TOPICS: &[&str] = &[
    "the renewal of the hosting contract before the end of the quarter",
    "why the nightly export job keeps timing out on Mondays",
    "whether we can move the onboarding call to Thursday afternoon",
    "the draft budget for the new analytics dashboard",
    "a customer complaint about duplicate invoices in October",
    "hiring a second on-call engineer for the payments service",
    "the migration plan for the old reporting database",
    "what the team learned from last week's outage review",
];

fn question(i: usize) -> String {
    format!(
        "Question {i}: please ask {} about {}, and tell me what we decided, who owns the follow-up, \
         and when we expect the next update on it.",
        NAMES[i % NAMES.len()],
        TOPICS[(i / NAMES.len()) % TOPICS.len()]
    )
}

/// The example org, copied with its prompts: provider at `llm`, web chat on port 0, no rate limits,
/// room for the load's concurrency.
fn example_org(dir: &Path, llm: &str) -> PathBuf {
    example::copy_org(dir, |original| {
        let config = original
            .replace("listen: 127.0.0.1:7420", "listen: \"127.0.0.1:0\"")
            .replace(
                "apiKeyEnv: ANTHROPIC_API_KEY",
                &format!("baseUrl: {llm}\n      apiKeyEnv: ANTHROPIC_API_KEY"),
            )
            .replace(
                "perUser: { messages: 10, per: 1m }",
                "perUser: { messages: 1000000, per: 1m }",
            )
            .replace(
                "perChannel: { messages: 60, per: 1m }",
                "perChannel: { messages: 1000000, per: 1m }",
            )
            .replace("maxConcurrentAgents: 10", "maxConcurrentAgents: 200")
            // The load queues work on purpose: a task waiting its turn must not time out.
            .replace("taskTimeout: 5m", "taskTimeout: 60m");
        assert!(
            config.contains(&format!("baseUrl: {llm}")) && config.contains("messages: 1000000"),
            "the example config changed shape: update this bench's edits"
        );
        config
    })
}

async fn create(client: &reqwest::Client, opc: &OpcRun, text: String) -> String {
    let response = client
        .post(opc.url("/api/conversations"))
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "conversation created");
    let body: serde_json::Value = response.json().await.unwrap();
    body["id"].as_str().unwrap().to_string()
}

/// Wait (at most 15 minutes in all: a loaded machine is slow) until conversation `id` shows the CEO's
/// answer, then close its stream.
async fn answered(client: &reqwest::Client, opc: &OpcRun, id: &str) {
    let url = opc.url(&format!("/api/conversations/{id}/events"));
    let read = async {
        let mut body = client.get(url).send().await.unwrap().bytes_stream();
        let mut seen = String::new();
        while !seen.contains(CEO_PREFIX) {
            let chunk = body
                .next()
                .await
                .expect("the event stream ended before the answer")
                .unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    tokio::time::timeout(Duration::from_secs(900), read)
        .await
        .unwrap_or_else(|_| panic!("conversation {id} not answered within 15 minutes"));
}

/// One sample: seconds since the sampler started, rows written, rows embedded, VmRSS in kB.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: f64,
    rows: i64,
    embedded: i64,
    rss_kb: u64,
}

fn counts(db: &Path) -> Option<(i64, i64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.busy_timeout(Duration::from_secs(2)).ok()?;
    conn.query_row(
        "SELECT (SELECT COUNT(*) FROM recall_messages), (SELECT COUNT(*) FROM recall_vectors)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .ok()
}

/// The `i`-th row of the bulk: a question or an answer like the conversations', distinct per `i`.
fn bulk_row(i: usize, now_ms: i64) -> NewMessage {
    let (namespace, author, text) = if i.is_multiple_of(2) {
        ("ceo", "web-user", question(i))
    } else {
        (
            "vp-eng",
            "vp-eng",
            VP_ANSWER.replace("{{input}}", &question(i)),
        )
    };
    NewMessage {
        namespace: namespace.into(),
        author: author.into(),
        conversation: format!("bulk-{}", i / 4),
        task: None,
        thread: None,
        source_id: None,
        time_ms: now_ms,
        text,
    }
}

/// Beside the gateway, until `stop`: every 250 ms, top the backlog (rows not yet embedded) up to
/// `backlog` rows, in one transaction. The rows it wrote.
fn bulk_writer(db: PathBuf, backlog: i64, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<i64> {
    std::thread::spawn(move || {
        let mut conn = rusqlite::Connection::open(&db).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let mut written = 0i64;
        while !stop.load(Ordering::Relaxed) {
            if let Some((rows, embedded)) = counts(&db) {
                let missing = backlog - (rows - embedded);
                if missing > 0 {
                    let now_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64);
                    let tx = conn.transaction().unwrap();
                    for _ in 0..missing {
                        append_in(&tx, &bulk_row(written as usize, now_ms)).unwrap();
                        written += 1;
                    }
                    tx.commit().unwrap();
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        written
    })
}

/// Sample every 250 ms until `stop`.
fn sampler(
    db: PathBuf,
    pid: u32,
    origin: Instant,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Sample>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if let Some((rows, embedded)) = counts(&db) {
                out.push(Sample {
                    at: origin.elapsed().as_secs_f64(),
                    rows,
                    embedded,
                    rss_kb: status_kb(pid, "VmRSS:"),
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        out
    })
}

/// The embedded count at time `t` (the last sample at or before it).
fn embedded_at(samples: &[Sample], t: f64) -> i64 {
    samples
        .iter()
        .take_while(|s| s.at <= t)
        .last()
        .map_or(0, |s| s.embedded)
}

struct Outcome {
    conversations: usize,
    rows_serving: i64,
    embedded_serving: i64,
    serving_s: f64,
    rows_total: i64,
    caught_up_s: Option<f64>,
    idle_kb: u64,
    peak_kb: u64,
    /// The most rows waiting to be embedded at any sample.
    backlog: i64,
    /// The fewest rows waiting at any sample while serving (zero: the load, not the embedder, set
    /// the pace at least once).
    min_backlog_serving: i64,
    /// Rows the bulk writer added while serving.
    bulk_rows: i64,
}

async fn run(conversations: usize, backlog: i64, binary: Option<&Path>) -> Outcome {
    let llm = ScriptedLlm::start(
        Script::new()
            .agent(marker("ceo"), relay("vp-eng", "{{input}}", CEO_PREFIX))
            .agent(marker("vp-eng"), vec![Step::text(VP_ANSWER)])
            .fallback(vec![Step::text("Noted.")]),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = example_org(dir.path(), &llm.url());
    let db = dir.path().join(".opc").join("opc.db");
    let env = [("ANTHROPIC_API_KEY", "bench-key")];
    let opc = match binary {
        Some(binary) => {
            OpcRun::try_start_binary(binary, &config, &env).unwrap_or_else(|(code, err)| {
                panic!("{} exited with {code:?}:\n{err}", binary.display())
            })
        }
        None => OpcRun::start(&config, &env),
    };
    let pid = opc.pid();
    let client = opc_tests::http_client();

    // Warm-up: one exchange, then wait until its rows are embedded (the embedder has loaded).
    let warm = create(&client, &opc, question(usize::MAX / 2)).await;
    answered(&client, &opc, &warm).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (rows, embedded) = counts(&db).unwrap_or((0, 0));
        if rows > 0 && embedded >= rows {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the warm-up's rows were not embedded within 180 s ({embedded} of {rows}): is the \
             embedding model cached (`opc models fetch`)?\n{}",
            opc.stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_kb = status_kb(pid, "VmRSS:");

    let origin = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let sampling = sampler(db.clone(), pid, origin, stop.clone());
    let before = counts(&db).unwrap_or((0, 0));
    let serve_start = origin.elapsed().as_secs_f64();
    let bulk_stop = Arc::new(AtomicBool::new(false));
    let bulk = (backlog > 0).then(|| bulk_writer(db.clone(), backlog, bulk_stop.clone()));
    let indices: Vec<usize> = (0..conversations).collect();
    for batch in indices.chunks(50) {
        let ids = futures_util::future::join_all(
            batch.iter().map(|&i| create(&client, &opc, question(i))),
        )
        .await;
        futures_util::future::join_all(ids.iter().map(|id| answered(&client, &opc, id))).await;
    }
    let serve_end = origin.elapsed().as_secs_f64();
    bulk_stop.store(true, Ordering::Relaxed);
    let bulk_rows = bulk.map_or(0, |b| b.join().unwrap());
    let after_serving = counts(&db).unwrap_or((0, 0));
    // Catch-up: every row embedded (at most 20 minutes).
    let deadline = Instant::now() + Duration::from_secs(1200);
    let mut caught_up = None;
    while Instant::now() < deadline {
        let (rows, embedded) = counts(&db).unwrap_or((0, 0));
        if embedded >= rows {
            caught_up = Some(origin.elapsed().as_secs_f64() - serve_start);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let samples = sampling.join().unwrap();
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0), "opc run stops cleanly");
    let embedded_serving =
        embedded_at(&samples, serve_end).max(after_serving.1) - embedded_at(&samples, serve_start);
    Outcome {
        conversations,
        rows_serving: after_serving.0 - before.0,
        embedded_serving: embedded_serving.max(after_serving.1 - before.1),
        serving_s: serve_end - serve_start,
        rows_total: counts(&db).map_or(after_serving.0, |c| c.0) - before.0,
        caught_up_s: caught_up,
        idle_kb,
        peak_kb: samples
            .iter()
            .map(|s| s.rss_kb)
            .max()
            .unwrap_or(0)
            .max(idle_kb),
        backlog: samples
            .iter()
            .map(|s| s.rows - s.embedded)
            .max()
            .unwrap_or(0),
        // From the first top-up (one second in) to the end of serving.
        min_backlog_serving: samples
            .iter()
            .filter(|s| s.at >= serve_start + 1.0 && s.at <= serve_end)
            .map(|s| s.rows - s.embedded)
            .min()
            .unwrap_or(0),
        bulk_rows,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    let conversations = args
        .iter()
        .position(|a| a == "--conversations")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let backlog = args
        .iter()
        .position(|a| a == "--backlog")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1500);
    let binary = args
        .iter()
        .position(|a| a == "--binary")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let o = runtime.block_on(run(conversations, backlog, binary.as_deref()));
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    let serving_rate = o.embedded_serving as f64 / o.serving_s;
    let peak_mb = o.peak_kb as f64 / 1024.0;
    println!(
        "recall under load: {} web conversations with the example org, backlog kept ≥ {backlog} rows ({} rows written while serving, {} of them by the bulk writer, {:.1} s)",
        o.conversations, o.rows_serving, o.bulk_rows, o.serving_s
    );
    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!(
        "| rows embedded while serving | {} in {:.1} s = {serving_rate:.1} rows/s | ≥ 100 rows/s: {} |",
        o.embedded_serving,
        o.serving_s,
        verdict(serving_rate >= 100.0)
    );
    match o.caught_up_s {
        Some(s) => println!(
            "| all {} rows embedded, from the first question | {s:.1} s = {:.1} rows/s | |",
            o.rows_total,
            o.rows_total as f64 / s
        ),
        None => println!(
            "| all {} rows embedded | not within 20 minutes | |",
            o.rows_total
        ),
    }
    println!(
        "| largest backlog (rows written, not yet embedded) | {} rows | |",
        o.backlog
    );
    println!(
        "| smallest backlog while serving | {} rows | > 0: the embedder set the pace |",
        o.min_backlog_serving
    );
    println!(
        "| VmRSS idle (models loaded) / peak under load | {:.1} MB / {peak_mb:.1} MB | peak < 400 MB: {} |",
        o.idle_kb as f64 / 1024.0,
        verdict(peak_mb < 400.0)
    );
}
