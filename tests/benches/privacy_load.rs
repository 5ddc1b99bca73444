//! # Privacy end to end: what the gateway adds per request, and conversations per second
//!
//! Measures issue 38 §3's end-to-end rows with the real (release) `opc` binary as child processes,
//! each figure privacy on beside privacy off in the same run (medians):
//!
//! 1. **Per-request cost.** The repository's example org (a fresh copy), its CEO answering every
//!    message directly through the scripted LLM server, started twice: as written (privacy on, the
//!    NER tier loaded) and with `framework.privacy.enabled: false`. Both run at once and the requests
//!    alternate between them, so both see the same machine. Three kinds of request, `N` of each
//!    (default 8) after a warm-up, each timed from sending the message (web chat API) to reading the
//!    CEO's answer on the conversation's event stream:
//!    - `follow-up`: a new message of about 300 bytes with a name, a street address and a phone
//!      number, in a conversation that already had one;
//!    - `first, PII`: the same kind of message as the first of a new conversation;
//!    - `first, plain`: "ok thanks, please proceed" as the first of a new conversation.
//!
//!    Reported per kind: median on, median off, and on − off (what privacy costs). Every message is
//!    distinct (new names, addresses, phones), so no detection is answered from a cache by accident.
//! 2. **Throughput.** The example org again, the CEO delegating to the VP Engineering, who delegates
//!    to the Backend Lead, who answers (three levels, scripted): `C` conversations (default 300),
//!    20 in flight at a time, each created with a distinct 300-byte question with personal data and
//!    read back until the CEO's answer. Privacy off, then on (`--rounds R` repeats the pair).
//!    Reported: conversations per second and p50 latency of each, and on ÷ off.
//!
//! Targets (issue 38): privacy's cost per single-turn request (a new conversation each time) ≤ 15 ms;
//! throughput with privacy on ≥ 0.5× off.
//!
//! `--spans` (diagnostic) also exports the processes' traces to an in-process OTLP receiver and prints,
//! per kind of request, the median time inside the `opc.privacy` spans (the NER gate and the masking
//! of each model call), the `chat` spans and the memory spans, on and off: where the time goes.
//! Telemetry costs time of its own, so the figures of a `--spans` run are not the bench's figures.
//!
//! `--dump` (diagnostic) prints the sizes of the texts the CEO's last requests of each kind carried
//! (privacy off: real text), which shows what is new in each kind; `PRIVACY_LOAD_SPANS=1` with
//! `--spans` lists every span.
//!
//! Run: `cargo build --release -p opc-bot && cargo bench -p opc-tests --bench privacy_load`
//! (`-- --requests N`, `-- --conversations C`, `-- --rounds R`, `-- --only a|b`, `-- --spans`, `-- --dump`,
//! `-- --binary PATH` to measure another build of `opc`). The NER model must be cached
//! (`cargo run -q -p opc-bot -- models fetch`); the bench stops with that advice when it is not.
//! Without `--bench` (as under `cargo test --all-targets`) it returns at once: it needs the release
//! binary and the models.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use opc_tests::example;
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{marker, relay};
use opc_tests::otlp::OtlpReceiver;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::sse::Sse;
use tokio::sync::Mutex;

/// The CEO's answer in part 1 (every request waits for exactly this text).
const ANSWER: &str = "Noted, I will take care of it.";
/// The CEO's final answer in part 2 starts with this.
const CEO_PREFIX: &str = "Summary from engineering: ";
/// What the Backend Lead answers in part 2.
const LEAD_ANSWER: &str =
    "Done: the change is scheduled for this week and the customer will hear from us.";
/// How long one request may take before the bench gives up (a loaded 2-core machine is slow).
const REQUEST_LIMIT: Duration = Duration::from_secs(300);

const FIRST: &[&str] = &[
    "Johanna", "Ravi", "Marta", "Emeka", "Aiko", "Luis", "Fatima", "Henrik", "Priya", "Tomasz",
    "Ngozi", "Camille", "Declan", "Yusuf", "Ingrid", "Mateo",
];
const LAST: &[&str] = &[
    "Whitfield",
    "Subramanian",
    "Lindqvist",
    "Okafor",
    "Tanaka",
    "Ortega",
    "Haddad",
    "Brandt",
    "Raman",
    "Kowalski",
    "Adeyemi",
    "Marchand",
    "Fitzgerald",
    "Demir",
    "Solberg",
    "Castillo",
];
const STREETS: &[&str] = &[
    "Maple Avenue",
    "Harbor Street",
    "Elm Court",
    "Pinecrest Road",
    "Willow Lane",
    "Cedar Drive",
    "Lakeview Boulevard",
    "Orchard Way",
];
const CITIES: &[(&str, &str, &str)] = &[
    ("Springfield", "IL", "62704"),
    ("Portland", "OR", "97205"),
    ("Madison", "WI", "53703"),
    ("Austin", "TX", "78701"),
    ("Columbus", "OH", "43215"),
    ("Denver", "CO", "80202"),
];

/// The `i`-th message with personal data: about 300 bytes, a name, a street address and a phone
/// number, each different from every other message's.
fn pii_message(i: usize) -> String {
    let name = format!(
        "{} {}",
        FIRST[i % FIRST.len()],
        LAST[(i / FIRST.len() + i * 7) % LAST.len()]
    );
    let (city, state, zip) = CITIES[i % CITIES.len()];
    format!(
        "Hi, this is {name}. Please update my delivery address to {} {}, {city}, {state} {zip} and \
         call me at (415) {:03}-{:04} if anything is unclear. I moved last week, so the old address \
         on file is no longer valid; order {} should go to the new one. Thanks a lot for your help!",
        100 + (i * 37) % 900,
        STREETS[(i / 3) % STREETS.len()],
        200 + (i * 13) % 700,
        1000 + (i * 7919) % 9000,
        48_000 + i
    )
}

/// The plain first message of the table.
const PLAIN: &str = "ok thanks, please proceed";

/// The example org, copied with its prompts: provider at `llm`, web chat on port 0, no rate limits,
/// room for the load; privacy as written, or off. Consolidation is off on both sides: it runs every
/// few interactions in the background and would land in some requests and not others.
fn example_org(dir: &Path, llm: &str, privacy: bool) -> PathBuf {
    example::copy_org(dir, |original| {
        let mut config = original
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
            .replace("taskTimeout: 5m", "taskTimeout: 60m")
            .replace(
                "consolidation:\n      enabled: true",
                "consolidation:\n      enabled: false",
            );
        if !privacy {
            config = config.replace(
                "  privacy:\n    enabled: true",
                "  privacy:\n    enabled: false",
            );
        }
        assert!(
            config.contains(&format!("baseUrl: {llm}"))
                && config.contains("messages: 1000000")
                && config.contains("consolidation:\n      enabled: false")
                && config.contains(&format!("  privacy:\n    enabled: {privacy}")),
            "the example config changed shape: update this bench's edits"
        );
        config
    })
}

/// One `opc run` of the example org, with its directory.
struct Side {
    opc: OpcRun,
    _dir: tempfile::TempDir,
}

fn start(binary: &Path, llm: &str, privacy: bool, otlp: Option<&str>) -> Side {
    let dir = tempfile::tempdir().unwrap();
    let config = example_org(dir.path(), llm, privacy);
    let mut env = vec![("ANTHROPIC_API_KEY", "bench-key")];
    if let Some(endpoint) = otlp {
        env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint));
        env.push(("OTEL_SERVICE_NAME", if privacy { "on" } else { "off" }));
        // Export every 200 ms, so a request's spans are in before the next request starts.
        env.push(("OTEL_BSP_SCHEDULE_DELAY", "200"));
    }
    let opc = OpcRun::try_start_binary(binary, &config, &env)
        .unwrap_or_else(|(code, err)| panic!("{} exited with {code:?}:\n{err}", binary.display()));
    Side { opc, _dir: dir }
}

/// The NER model in the cache, or a clear stop: the privacy-on side would wait for it and fail.
fn require_model() {
    let found =
        opc_models::cache_root().and_then(|root| opc_models::RAMPART.locate(&root).map(|_| root));
    if let Err(e) = found {
        eprintln!(
            "privacy_load: the NER model is not in the cache ({e}); fetch it with \
             `cargo run -q -p opc-bot -- models fetch`, then run the bench again"
        );
        std::process::exit(2);
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (v.len() as f64 - 1.0)).round() as usize;
    v[rank.min(v.len() - 1)]
}

// ---------------------------------------------------------------------------------------------------
// Part 1: per-request cost

/// The kinds of request of part 1.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    FollowUp,
    FirstPii,
    FirstPlain,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::FollowUp, Kind::FirstPii, Kind::FirstPlain];

    fn label(self) -> &'static str {
        match self {
            Kind::FollowUp => "follow-up in a conversation (300 B, name + address + phone)",
            Kind::FirstPii => "first message of a new conversation (300 B, name + address + phone)",
            Kind::FirstPlain => {
                "first message of a new conversation (\"ok thanks, please proceed\")"
            }
        }
    }
}

/// A conversation kept open on one side for the follow-ups.
struct Open {
    id: String,
    sse: Sse,
}

/// Send `text` in `conversation` and wait for the CEO's answer: milliseconds from sending to reading it.
async fn exchange(opc: &OpcRun, open: &mut Open, text: &str) -> f64 {
    let started = Instant::now();
    opc_tests::web_chat::say(opc, &open.id, text).await;
    open.sse
        .wait_for("message|edit", REQUEST_LIMIT, |data| {
            data["text"].as_str() == Some(ANSWER)
        })
        .await;
    started.elapsed().as_secs_f64() * 1000.0
}

/// One request of `kind` on `opc` (`follow` is the side's open conversation): its latency in ms.
async fn request(opc: &OpcRun, kind: Kind, follow: &mut Open, i: usize) -> f64 {
    match kind {
        Kind::FollowUp => exchange(opc, follow, &pii_message(i)).await,
        Kind::FirstPii | Kind::FirstPlain => {
            let (id, sse) = opc_tests::web_chat::open(opc).await;
            let mut open = Open { id, sse };
            let text = match kind {
                Kind::FirstPii => pii_message(i),
                _ => PLAIN.to_string(),
            };
            exchange(opc, &mut open, &text).await
        }
    }
}

/// Span time per request: (privacy, chat, memory) milliseconds summed over a request's spans.
type SpanTimes = (f64, f64, f64);

/// The spans of `service` that started within `window` (Unix ns), summed by family.
fn span_times(receiver: &OtlpReceiver, service: &str, window: (u64, u64)) -> SpanTimes {
    let mut times = (0.0, 0.0, 0.0);
    for span in receiver.spans() {
        let ours = span
            .resource
            .get("service.name")
            .and_then(|v| v.as_str())
            .is_some_and(|s| s == service);
        if !ours || span.start_ns < window.0 || span.start_ns > window.1 {
            continue;
        }
        let ms = span.end_ns.saturating_sub(span.start_ns) as f64 / 1e6;
        if std::env::var_os("PRIVACY_LOAD_SPANS").is_some() {
            eprintln!("span {service} {} {ms:.1} ms", span.name);
        }
        if span.name.starts_with("opc.privacy") {
            times.0 += ms;
        } else if span.name.starts_with("chat") {
            times.1 += ms;
        } else if span.name.starts_with("search_memory")
            || span.name.starts_with("update_memory")
            || span.name.starts_with("embeddings")
        {
            times.2 += ms;
        }
    }
    times
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

struct PerKind {
    on: Vec<f64>,
    off: Vec<f64>,
    spans_on: Vec<SpanTimes>,
    spans_off: Vec<SpanTimes>,
}

async fn per_request(
    binary: &Path,
    requests: usize,
    spans: bool,
    dump: bool,
) -> Vec<(Kind, PerKind)> {
    // One scripted server per side, so what each side sent can be told apart (`--dump`).
    let script = || {
        Script::new()
            .agent(marker("ceo"), vec![Step::text(ANSWER)])
            .fallback(vec![Step::text("Noted.")])
    };
    let llm_on = ScriptedLlm::start(script()).await.unwrap();
    let llm_off = ScriptedLlm::start(script()).await.unwrap();
    let receiver = if spans {
        Some(OtlpReceiver::start().await)
    } else {
        None
    };
    let endpoint = receiver.as_ref().map(OtlpReceiver::endpoint);
    let on = start(binary, &llm_on.url(), true, endpoint.as_deref());
    let off = start(binary, &llm_off.url(), false, endpoint.as_deref());
    let sides = [(&on.opc, "on"), (&off.opc, "off")];
    let mut follow = Vec::new();
    for (opc, _) in sides {
        let (id, sse) = opc_tests::web_chat::open(opc).await;
        follow.push(Open { id, sse });
    }
    // Warm-up: the NER model loads on the first call that needs it (up to `nerWait`), and each
    // side's first requests fault in code and caches. Two of each kind, not counted.
    let mut n = 0usize;
    for _ in 0..2 {
        for kind in Kind::ALL {
            for (s, (opc, _)) in sides.iter().enumerate() {
                request(opc, kind, &mut follow[s], 10_000 + n).await;
                n += 1;
            }
        }
    }
    let mut out: Vec<(Kind, PerKind)> = Kind::ALL
        .into_iter()
        .map(|k| {
            (
                k,
                PerKind {
                    on: Vec::new(),
                    off: Vec::new(),
                    spans_on: Vec::new(),
                    spans_off: Vec::new(),
                },
            )
        })
        .collect();
    // Interleaved: every round sends one request of each kind to each side, alternating which side
    // goes first, so drift in the machine's load falls on both.
    for round in 0..requests {
        for (k, kind) in Kind::ALL.into_iter().enumerate() {
            let order: [usize; 2] = if (round + k) % 2 == 0 { [0, 1] } else { [1, 0] };
            for s in order {
                let (opc, service) = sides[s];
                let from = unix_ns();
                let ms = request(opc, kind, &mut follow[s], round * 10 + k * 2 + s).await;
                let to = unix_ns();
                let slot = &mut out[k].1;
                if s == 0 {
                    slot.on.push(ms);
                } else {
                    slot.off.push(ms);
                }
                if let Some(receiver) = &receiver {
                    // Let the batch exporter flush the request's spans before the next one starts.
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    let times = span_times(receiver, service, (from, to));
                    if s == 0 {
                        slot.spans_on.push(times);
                    } else {
                        slot.spans_off.push(times);
                    }
                }
            }
        }
    }
    if dump {
        // What the CEO's requests of the last round carried (the privacy-off side: real text), by
        // size only: which texts are new in each kind of request.
        let ceo = llm_off.requests_for(&marker("ceo"));
        for (kind, request) in Kind::ALL.iter().zip(ceo.iter().rev().take(3).rev()) {
            let texts: Vec<usize> = request.user_texts().iter().map(String::len).collect();
            let tools = request.body["tools"].to_string().len();
            println!(
                "dump: {}: system {} B, tools {} B, user texts (B) {:?}",
                kind.label(),
                request.system.len(),
                tools,
                texts
            );
            if let Some(first) = request.user_texts().first() {
                println!(
                    "dump:   first user text begins {:?}",
                    first.chars().take(160).collect::<String>()
                );
            }
        }
    }
    let (code, _) = on.opc.stop();
    assert_eq!(code, Some(0), "opc run (privacy on) stops cleanly");
    let (code, _) = off.opc.stop();
    assert_eq!(code, Some(0), "opc run (privacy off) stops cleanly");
    out
}

// ---------------------------------------------------------------------------------------------------
// Part 2: throughput

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

/// Wait until conversation `id` shows the CEO's answer, then close its stream.
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

struct Load {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

async fn load(binary: &Path, llm: &str, privacy: bool, conversations: usize, seed: usize) -> Load {
    let side = start(binary, llm, privacy, None);
    let opc = Arc::new(side.opc);
    let client = opc_tests::http_client();
    // Warm-up: two conversations (the NER model loads on the first call that needs it).
    for i in 0..2 {
        let id = create(&client, &opc, pii_message(seed + 900_000 + i)).await;
        answered(&client, &opc, &id).await;
    }
    let next = Arc::new(Mutex::new(0usize));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(conversations)));
    let started = Instant::now();
    let workers: Vec<_> = (0..20)
        .map(|_| {
            let (opc, client, next, latencies) =
                (opc.clone(), client.clone(), next.clone(), latencies.clone());
            tokio::spawn(async move {
                loop {
                    let i = {
                        let mut next = next.lock().await;
                        if *next >= conversations {
                            return;
                        }
                        *next += 1;
                        *next - 1
                    };
                    let t = Instant::now();
                    let id = create(&client, &opc, pii_message(seed + i)).await;
                    answered(&client, &opc, &id).await;
                    latencies
                        .lock()
                        .await
                        .push(t.elapsed().as_secs_f64() * 1000.0);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let wall = started.elapsed().as_secs_f64();
    let latencies = latencies.lock().await.clone();
    let opc = Arc::try_unwrap(opc).unwrap_or_else(|_| panic!("the workers hold no handle"));
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0), "opc run stops cleanly");
    Load {
        per_second: conversations as f64 / wall,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
    }
}

async fn throughput(binary: &Path, conversations: usize, rounds: usize) -> Vec<(Load, Load)> {
    let llm = ScriptedLlm::start(
        Script::new()
            .agent(marker("ceo"), relay("vp-eng", "{{input}}", CEO_PREFIX))
            .agent(
                marker("vp-eng"),
                relay("lead-backend", "{{input}}", "From the backend team: "),
            )
            .agent(marker("lead-backend"), vec![Step::text(LEAD_ANSWER)])
            .fallback(vec![Step::text("Noted.")]),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    for round in 0..rounds {
        let seed = round * 100_000;
        let off = load(binary, &llm.url(), false, conversations, seed).await;
        let on = load(binary, &llm.url(), true, conversations, seed).await;
        out.push((on, off));
    }
    out
}

// ---------------------------------------------------------------------------------------------------

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    require_model();
    let requests: usize = arg(&args, "--requests").unwrap_or(8);
    let conversations: usize = arg(&args, "--conversations").unwrap_or(300);
    let rounds: usize = arg(&args, "--rounds").unwrap_or(1);
    let only: Option<String> = arg(&args, "--only");
    let spans = args.iter().any(|a| a == "--spans");
    let dump = args.iter().any(|a| a == "--dump");
    let binary: PathBuf = arg(&args, "--binary").unwrap_or_else(opc_binary);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };

    if only.as_deref() != Some("b") {
        let results = runtime.block_on(per_request(&binary, requests, spans, dump));
        println!(
            "privacy per request: the example org's CEO answering, {requests} requests of each kind, \
             privacy on and off side by side (medians, ms)"
        );
        println!("| request | privacy on | privacy off | added by privacy |");
        println!("|---|---|---|---|");
        for (kind, r) in &results {
            let (on, off) = (median(&r.on), median(&r.off));
            let target = match kind {
                Kind::FollowUp => String::new(),
                _ => format!(" (≤ 15 ms: {})", verdict(on - off <= 15.0)),
            };
            println!(
                "| {} | {on:.1} | {off:.1} | {:+.1}{target} |",
                kind.label(),
                on - off
            );
        }
        if spans {
            println!();
            println!(
                "where the time goes (median per request of the summed spans, ms; telemetry on)"
            );
            println!("| request | opc.privacy | chat on / off | memory on / off |");
            println!("|---|---|---|---|");
            for (kind, r) in &results {
                let pick = |v: &[SpanTimes], f: fn(&SpanTimes) -> f64| {
                    median(&v.iter().map(f).collect::<Vec<_>>())
                };
                println!(
                    "| {} | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} |",
                    kind.label(),
                    pick(&r.spans_on, |t| t.0),
                    pick(&r.spans_on, |t| t.1),
                    pick(&r.spans_off, |t| t.1),
                    pick(&r.spans_on, |t| t.2),
                    pick(&r.spans_off, |t| t.2),
                );
            }
        }
    }
    if only.as_deref() != Some("a") {
        let results = runtime.block_on(throughput(&binary, conversations, rounds));
        println!();
        println!(
            "privacy under load: {conversations} web conversations at concurrency 20, three levels \
             (CEO → VP Engineering → Backend Lead), privacy off then on"
        );
        println!("| round | privacy on | privacy off | on ÷ off |");
        println!("|---|---|---|---|");
        for (round, (on, off)) in results.iter().enumerate() {
            let ratio = on.per_second / off.per_second;
            println!(
                "| {} | {:.2} conv/s, p50 {:.0} ms, p99 {:.0} ms | {:.2} conv/s, p50 {:.0} ms, p99 {:.0} ms | {ratio:.2}× (≥ 0.5×: {}) |",
                round + 1,
                on.per_second,
                on.p50_ms,
                on.p99_ms,
                off.per_second,
                off.p50_ms,
                off.p99_ms,
                verdict(ratio >= 0.5)
            );
        }
    }
}
