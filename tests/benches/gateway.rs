//! # Gateway benchmark
//!
//! Measures what users feel of `opc run` itself, with the real (release) binary as a child process:
//!
//! 1. **Time to ready and idle RSS, web chat only.** The repository's example org (a fresh copy, on
//!    port 0, no API key — the fresh-machine case) is started 20 times. *Ready* is the time from
//!    spawning the process to reading its ready line (printed after the config is validated, the
//!    database opened, the engine built and the socket bound); the binary's own figure (from `main`
//!    to the ready line) is reported too. *Idle RSS* is `VmRSS` one second after ready.
//! 2. **Ack latency over the HTTP Events API at 200 events/s.** `opc run` with Slack in HTTP mode
//!    against the fake Slack, the CEO answering every mention through the scripted LLM server (so every
//!    event causes real work: a root task, an LLM round trip, posts to Slack). Signed `app_mention`
//!    events are sent open-loop, one every 5 ms from 50 users in 10 channels; the latency of each is
//!    request sent → HTTP 200 received. A warm-up of 200 events is discarded.
//!
//!    Only real answers count: a posted or edited message whose text is the scripted answer (a failure
//!    or rate-limit notice is not one).
//! 3. **Memory under web chat load.** `opc run` with the web chat and the scripted LLM (5 runs, medians):
//!    idle (after one exchange, so the code of an answer has run once), then after 1,000 empty
//!    conversations (`POST /api/conversations`), then after 1,000 conversations each created with a
//!    question, 50 requests at a time, every one answered (read back from its event stream, which is
//!    then closed), at the end and 20 s later (past the 15 s keep-alive that notices closed streams).
//!    `VmRSS` is what the issue measured; `RssAnon` leaves out the binary's code pages.
//!    `--conversations N`, `--rounds R` (R loads in a row) and `--only-memory` vary it;
//!    `OPC_BENCH_MALLOC=NAME=VALUE` passes one glibc tunable (e.g. `MALLOC_ARENA_MAX=1`) to `opc`.
//!
//! Targets (issue 4): ack p99 < 20 ms; idle RSS < 15 MB; ready < 100 ms. Issue 9: 1,000 empty web
//! conversations < 30 MB over idle; after a load of 1,000 conversations, RSS within 20% of idle.
//!
//! Run: `cargo build --release -p opc-bot && cargo bench -p opc-tests --bench gateway` (the bench runs
//! `target/release/opc`; build it first so it is current). `-- --quick` for a short run. Without
//! `--bench` (as under `cargo test --all-targets`) it runs a small smoke version.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use opc_tests::example;
use opc_tests::fake_slack::{self, FakeSlack, app_mention};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::proc_status::status_kb;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use tokio::sync::Mutex;

const SECRET: &str = "bench-signing-secret";
/// The scripted answer to every request.
const ANSWER: &str = "ok";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

fn rss_kb(pid: u32) -> u64 {
    status_kb(pid, "VmRSS:")
}

/// The example org, copied with its prompts, listening on port 0.
fn example_org(dir: &Path) -> std::path::PathBuf {
    example::copy_org(dir, |config| {
        config.replace("listen: 127.0.0.1:7420", "listen: \"127.0.0.1:0\"")
    })
}

struct Startup {
    ready_ms: Vec<f64>,
    own_ms: Vec<f64>,
    rss_kb: Vec<f64>,
}

fn startup(runs: usize) -> Startup {
    let dir = tempfile::tempdir().unwrap();
    let config = example_org(dir.path());
    let mut result = Startup {
        ready_ms: Vec::new(),
        own_ms: Vec::new(),
        rss_kb: Vec::new(),
    };
    for _ in 0..runs {
        let started = Instant::now();
        let opc = OpcRun::start(&config, &[("ANTHROPIC_API_KEY", "")]);
        result
            .ready_ms
            .push(started.elapsed().as_secs_f64() * 1000.0);
        let own = opc
            .banner
            .split("ready in ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|ms| ms.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        result.own_ms.push(own);
        std::thread::sleep(Duration::from_secs(1));
        result.rss_kb.push(rss_kb(opc.pid()) as f64);
        let (code, _) = opc.stop();
        assert_eq!(code, Some(0), "opc run stops cleanly");
    }
    result
}

async fn ack_latency(events: usize, warmup: usize, per_second: u64) -> Vec<f64> {
    let slack = FakeSlack::start().await;
    let llm = ScriptedLlm::start(Script::new().agent(marker("ceo"), vec![Step::text(ANSWER)]))
        .await
        .unwrap();
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: http\n    botTokenEnv: OPC_BENCH_SLACK_BOT\n    signingSecretEnv: OPC_BENCH_SLACK_SECRET\n    apiBaseUrl: {}\ngateway:\n  rateLimit:\n    perUser: {{ messages: 1000000, per: 1m }}\n    perChannel: {{ messages: 1000000, per: 1m }}\n",
        slack.api_url()
    );
    let execution = Execution {
        max_concurrent_agents: 200,
        ..Execution::default()
    };
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, execution, &sections);
    let opc = OpcRun::start(
        &org.config_path(),
        &[
            (KEY_VAR, KEY),
            ("OPC_BENCH_SLACK_BOT", &slack.bot_token()),
            ("OPC_BENCH_SLACK_SECRET", SECRET),
        ],
    );
    let client = opc_tests::http_client();
    let url = opc.url("/slack/events");
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(events)));
    let interval = Duration::from_micros(1_000_000 / per_second);
    let start = tokio::time::Instant::now();
    let mut sends = Vec::with_capacity(warmup + events);
    for i in 0..warmup + events {
        tokio::time::sleep_until(start + interval * i as u32).await;
        let body = app_mention(
            &format!("C{}", i % 10),
            &format!("U{}", i % 50),
            &format!("<@W11> request {i}"),
            &format!("6000.{i:06}"),
            None,
        )
        .to_string();
        let headers = fake_slack::signed_headers(SECRET, fake_slack::now_unix(), &body);
        let mut request = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let latencies = latencies.clone();
        sends.push(tokio::spawn(async move {
            let sent = Instant::now();
            let status = request.send().await.map(|r| r.status().as_u16());
            let ms = sent.elapsed().as_secs_f64() * 1000.0;
            assert_eq!(status.ok(), Some(200), "event {i} acknowledged");
            if i >= warmup {
                latencies.lock().await.push(ms);
            }
        }));
    }
    for send in sends {
        send.await.unwrap();
    }
    // Every event did real work: wait until the answers are posted, so the run is not idle work.
    let deadline = Instant::now() + Duration::from_secs(60);
    while real_answers(&slack) < warmup + events && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answered = real_answers(&slack);
    assert!(
        answered >= warmup + events,
        "only {answered} of {} events were answered",
        warmup + events
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
    latencies.lock().await.clone()
}

/// How many answers the fake Slack shows: a posted or edited message whose text is exactly the scripted
/// answer. A failure notice, a rate-limit notice or a partial stream is not an answer. Each answer is
/// shown once: posted as final, or posted partial then edited to final (never both).
fn real_answers(slack: &FakeSlack) -> usize {
    ["chat.postMessage", "chat.update"]
        .into_iter()
        .flat_map(|method| slack.calls_of(method))
        .filter(|call| call.params["text"] == ANSWER)
        .count()
}

/// Memory of `opc run` in kB: `VmRSS` (what the issue measured) and `RssAnon` (its heap and stacks,
/// without the binary's code pages, which fill in as code paths run for the first time).
#[derive(Clone, Copy)]
struct Rss {
    total: f64,
    anon: f64,
}

fn rss(pid: u32) -> Rss {
    Rss {
        total: status_kb(pid, "VmRSS:") as f64,
        anon: status_kb(pid, "RssAnon:") as f64,
    }
}

/// `opc run` (web chat only, the scripted LLM behind it): idle, after `count` empty conversations, and
/// after a load of `count` conversations each asking once and answered (at the end, and 20 s later).
struct Memory {
    idle: Rss,
    empty: Rss,
    loaded: Rss,
    settled: Rss,
}

/// Wait until conversation `id`'s transcript shows the scripted answer, then close the stream (as a
/// page that goes away does).
async fn answered(client: &reqwest::Client, opc: &OpcRun, id: &str) {
    let shown = format!("\"text\":\"{ANSWER}\"");
    let url = opc.url(&format!("/api/conversations/{id}/events"));
    let mut body = client.get(url).send().await.unwrap().bytes_stream();
    let mut seen = String::new();
    while !seen.contains(&shown) {
        let chunk = tokio::time::timeout(Duration::from_secs(60), body.next())
            .await
            .unwrap_or_else(|_| panic!("conversation {id} not answered within 60 s: {seen}"))
            .expect("the event stream ended before the answer")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

async fn create(client: &reqwest::Client, opc: &OpcRun, text: Option<String>) -> String {
    let request = client.post(opc.url("/api/conversations"));
    // `{}` without a text: a change is always JSON (the listener refuses anything else).
    let request = match text {
        Some(text) => request.json(&serde_json::json!({ "text": text })),
        None => request.json(&serde_json::json!({})),
    };
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 201, "conversation created");
    let body: serde_json::Value = response.json().await.unwrap();
    body["id"].as_str().unwrap().to_string()
}

async fn memory(count: usize, rounds: usize) -> Memory {
    let llm = ScriptedLlm::start(Script::new().agent(marker("ceo"), vec![Step::text(ANSWER)]))
        .await
        .unwrap();
    let execution = Execution {
        max_concurrent_agents: 200,
        ..Execution::default()
    };
    let sections = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, execution, sections);
    let malloc = std::env::var("OPC_BENCH_MALLOC").unwrap_or_default();
    let mut env = vec![(KEY_VAR, KEY)];
    if let Some(tunable) = malloc.split_once('=') {
        env.push(tunable);
    }
    let opc = OpcRun::start(&org.config_path(), &env);
    let client = opc_tests::http_client();
    // Idle after one exchange, so the code paths of an answer have run once.
    let warm = create(&client, &opc, Some("warm-up".to_string())).await;
    answered(&client, &opc, &warm).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = rss(opc.pid());

    for _ in 0..count {
        create(&client, &opc, None).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let empty = rss(opc.pid());

    // The load: `rounds` × `count` new conversations, 50 at a time, each created with its question.
    for round in 0..rounds {
        let mut ids = Vec::with_capacity(count);
        for batch in (0..count).collect::<Vec<_>>().chunks(50) {
            let created = futures_util::future::join_all(
                batch
                    .iter()
                    .map(|i| create(&client, &opc, Some(format!("question {round}.{i}")))),
            )
            .await;
            ids.extend(created);
        }
        for id in &ids {
            answered(&client, &opc, id).await;
        }
        if std::env::var_os("OPC_BENCH_VERBOSE").is_some() {
            let now = rss(opc.pid());
            eprintln!(
                "round {round}: RSS {:.1} MB, anon {:.1} MB",
                now.total / 1024.0,
                now.anon / 1024.0
            );
        }
    }
    let loaded = rss(opc.pid());
    // Closed streams are noticed at their next keep-alive (15 s): wait past it.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let settled = rss(opc.pid());
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
    Memory {
        idle,
        empty,
        loaded,
        settled,
    }
}

fn median(values: &[f64]) -> f64 {
    percentile(&sorted(values.to_vec()), 50.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let quick = !bench || args.iter().any(|a| a == "--quick");
    let (runs, events, warmup) = if quick { (3, 200, 20) } else { (20, 2000, 200) };

    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    let only_memory = args.iter().any(|a| a == "--only-memory");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let memory_runs = if quick { 1 } else { 5 };
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let conversations = args
        .iter()
        .position(|a| a == "--conversations")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(if bench { 1000 } else { 100 });
    let memory: Vec<Memory> = (0..memory_runs)
        .map(|_| runtime.block_on(memory(conversations, rounds)))
        .collect();
    let pick = |f: fn(&Memory) -> Rss| {
        let of = |g: fn(Rss) -> f64| {
            median(&memory.iter().map(|m| g(f(m))).collect::<Vec<_>>()) / 1024.0
        };
        (of(|r| r.total), of(|r| r.anon))
    };
    let idle = pick(|m| m.idle);
    let empty = pick(|m| Rss {
        total: m.empty.total - m.idle.total,
        anon: m.empty.anon - m.idle.anon,
    });
    let loaded = pick(|m| m.loaded);
    let settled = pick(|m| m.settled);
    let print_memory = || {
        println!(
            "| RSS over idle ({:.1} MB; anon {:.1} MB) after {conversations} empty web conversations | {:.1} MB (anon {:.1} MB) | | < 30 MB: {} |",
            idle.0,
            idle.1,
            empty.0,
            empty.1,
            verdict(empty.0 < 30.0)
        );
        println!(
            "| RSS after {conversations} web conversations answered: at the end / 20 s later | {:.1} MB (anon {:.1} MB) | {:.1} MB ({:+.0}% of idle; anon {:.1} MB, {:+.0}%) | within 20% of idle: {} |",
            loaded.0,
            loaded.1,
            settled.0,
            (settled.0 / idle.0 - 1.0) * 100.0,
            settled.1,
            (settled.1 / idle.1 - 1.0) * 100.0,
            verdict(settled.0 <= idle.0 * 1.2)
        );
    };
    if only_memory {
        print_memory();
        return;
    }

    let startup = startup(runs);
    let ready = sorted(startup.ready_ms);
    let own = sorted(startup.own_ms);
    let rss = sorted(startup.rss_kb);

    let acks = sorted(runtime.block_on(ack_latency(events, warmup, 200)));
    println!("gateway benchmark ({runs} starts, {events} events at 200/s after {warmup} warm-up)");
    println!("| measure | p50 | p90/p99 | target |");
    println!("|---|---|---|---|");
    println!(
        "| time to ready (spawn → ready line) | {:.1} ms | p90 {:.1} ms | < 100 ms: {} |",
        percentile(&ready, 50.0),
        percentile(&ready, 90.0),
        verdict(percentile(&ready, 50.0) < 100.0)
    );
    println!(
        "| time to ready (the binary's own figure) | {:.1} ms | p90 {:.1} ms | |",
        percentile(&own, 50.0),
        percentile(&own, 90.0)
    );
    println!(
        "| idle RSS, web chat only | {:.1} MB | p90 {:.1} MB | < 15 MB: {} |",
        percentile(&rss, 50.0) / 1024.0,
        percentile(&rss, 90.0) / 1024.0,
        verdict(percentile(&rss, 50.0) / 1024.0 < 15.0)
    );
    println!(
        "| Events API ack latency at 200 events/s | {:.2} ms | p99 {:.2} ms (max {:.2}) | p99 < 20 ms: {} |",
        percentile(&acks, 50.0),
        percentile(&acks, 99.0),
        acks.last().copied().unwrap_or(f64::NAN),
        verdict(percentile(&acks, 99.0) < 20.0)
    );
    print_memory();
}
