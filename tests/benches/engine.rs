//! # Agents-engine benchmark
//!
//! Measures what the engine itself costs, separately from the models it calls:
//!
//! 1. **Per-turn overhead on the 4-level chain, zero latency.** The chain CEO → VP Eng → Backend Lead
//!    → Backend Dev makes 7 LLM calls (ceo, vp, lead, dev, lead, vp, ceo); chains run one after the
//!    other and each chain's wall time / 7 is one sample of "framework time per agent turn".
//!    Variants:
//!    - *engine only*: an in-process [`LlmService`] that answers at once, wrapped in the standard
//!      call stack (trace, router, cost, retry, limit, timeout), on a real on-disk SQLite database, whole
//!      responses and streamed;
//!    - *loopback HTTP*: the scripted LLM server in a separate process, Anthropic wire, whole
//!      responses and streamed (this includes the server's own time and the HTTP round trip).
//! 2. **1,000 concurrent root tasks at 100 ms scripted latency, `maxConcurrentAgents: 200`**, against
//!    the scripted server in a separate process (so its memory is not counted): once with roots that
//!    answer directly, once with the 4-level chain. Reports wall time against the ideal schedule,
//!    and peak RSS growth (`VmHWM` after resetting it through `/proc/self/clear_refs`) per in-flight
//!    root task and per in-flight task. Each scenario runs in a fresh copy of this binary, so heap
//!    left over from earlier work cannot hide its growth.
//! 3. **Telemetry's overhead (issue 37)**, off and on in the same run: the per-turn time of the
//!    chain with the in-process model, and the wall / ideal ratios of 1,000 single-turn and chain
//!    roots. Every run is a fresh copy of this binary, in the order off, on, on with content
//!    capture, off, on, … (so machine noise hits every variant alike), repeated `--reps` times;
//!    medians are compared. *On* is what a user of `opc run` gets: `opc_telemetry::settings::resolve`
//!    from the process's variables with `OTEL_EXPORTER_OTLP_ENDPOINT` at a real OTLP/HTTP receiver
//!    (`opc_tests::otlp`, decoding every export, in this parent process on the same CPUs),
//!    `opc_telemetry::install`, and its layer on a `tracing_subscriber` registry as the global
//!    default, all before the engine starts (the metric instruments bind to the global meter
//!    provider on first use). *Off* is no subscriber at all, so the figure includes the registry's
//!    own cost too: an upper bound. Every on-run must deliver its spans (and the metrics, and with
//!    capture the messages) to the receiver, every off-run none, so a broken pipeline fails the
//!    run instead of looking cheap.
//! 4. A summary of the issues' targets with PASS / MISS.
//!
//! Every chain and every root checks its final answer, so failures are never timed as successes.
//!
//! Run: `cargo bench -p opc-tests --bench engine`. Options after `--`: `--quick` (fewer chains, for
//! a smoke run); `--diagnose` (adds when each wave of requests reached the model, the store's cost
//! per root, the memory of one request, and the concurrency scenarios with an in-process model and
//! with an in-memory database, to tell the engine's, HTTP's and SQLite's shares apart);
//! `--roots N` (default 1000); `--telemetry` (only the telemetry comparison, 3, and its targets);
//! `--reps N` (repetitions of each telemetry variant, default 5, 3 with `--quick`); `--only LIST`
//! (the comparison's scenarios, of `turns,single,chain`; all by default). Without
//! `--bench` (which `cargo bench` passes), e.g. under `cargo test --all-targets`, it only runs a
//! small smoke version of every scenario, telemetry on included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::pin::Pin;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::join_all;
use opc_agents::context::NoMemory;
use opc_agents::llm::layers::{StackOptions, standard_stack};
use opc_agents::llm::provider::Providers;
use opc_agents::llm::{
    Content, LlmError, LlmRequest, LlmResponse, LlmService, Message, Role, SharedLlm, StopReason,
    StreamDelta, Usage,
};
use opc_agents::{Engine, SqliteStore, Store, TaskState};
use opc_tests::org::{Execution, TestOrg, Wire, marker};
use opc_tests::scripted_llm::{RecordedRequest, Script, Step};
use serde_json::json;

/// LLM calls in one 4-level chain: ceo, vp, lead, dev, lead, vp, ceo.
const CHAIN_CALLS: u32 = 7;
/// Tasks in one 4-level chain.
const CHAIN_TASKS: u64 = 4;
/// Scripted latency of every call in the concurrency scenarios.
const LATENCY_MS: u64 = 100;
/// `maxConcurrentAgents` in the concurrency scenarios.
const MAX_CONCURRENT_AGENTS: u32 = 200;

/// Targets from the issue.
/// Issue 23: per-turn overhead p99 under 500 µs, over loopback HTTP (whole and streamed) and so
/// also in process.
const TARGET_P99_US: f64 = 500.0;
/// Issue 23: 1,000 single-turn roots within 1.1× the ideal schedule.
const TARGET_RATIO_SINGLE: f64 = 1.1;
/// Issue 23: the 4-level chain within 1.05× the ideal schedule.
const TARGET_RATIO_CHAIN: f64 = 1.05;
const TARGET_KB_PER_TASK: f64 = 100.0;

// -------------------------------------------------------------------------------------------------
// The chain: who delegates to whom, and the answer each level gives.
//
//   ceo          turn 0: delegate vp-eng       "VP: {input}"     turn 1: "C[{last result}]"
//   vp-eng       turn 0: delegate lead-backend "LEAD: {input}"   turn 1: "V[{last result}]"
//   lead-backend turn 0: delegate dev-backend  "DEV: {input}"    turn 1: "L[{last result}]"
//   dev-backend  turn 0: "DONE({input})"
//
// so the root's answer to `x` is `C[V[L[DONE(DEV: LEAD: VP: x)]]]`. Every level's first message
// derives from the root's, so distinct root messages give distinct sessions at every level (the
// scripted server keeps one cursor per agent and first message).

/// `(agent, child, task prefix, answer wrapper)` for the managers of the chain.
const MANAGERS: [(&str, &str, &str, &str); 3] = [
    ("ceo", "vp-eng", "VP: ", "C"),
    ("vp-eng", "lead-backend", "LEAD: ", "V"),
    ("lead-backend", "dev-backend", "DEV: ", "L"),
];
/// The leaf of the chain.
const LEAF: &str = "dev-backend";

/// The root's final answer for `input`.
fn chain_answer(input: &str) -> String {
    format!("C[V[L[DONE(DEV: LEAD: VP: {input})]]]")
}

/// The root's answer for `input` in the single-turn scenario.
fn single_answer(input: &str) -> String {
    format!("ANSWER({input})")
}

/// The chain as a scripted-server script, every step delayed by `delay_ms`.
fn chain_script(delay_ms: u64) -> Script {
    let mut script = Script::new();
    for (agent, child, prefix, wrap) in MANAGERS {
        script = script.agent(
            marker(agent),
            vec![
                Step::tool(
                    "delegate",
                    json!({"agent": child, "task": format!("{prefix}{{{{input}}}}")}),
                )
                .with_delay_ms(delay_ms),
                Step::text(format!("{wrap}[{{{{last_result}}}}]")).with_delay_ms(delay_ms),
            ],
        );
    }
    script.agent(
        marker(LEAF),
        vec![Step::text("DONE({{input}})").with_delay_ms(delay_ms)],
    )
}

/// The root answers at once (one call per root), after `delay_ms`.
fn single_script(delay_ms: u64) -> Script {
    Script::new().agent(
        marker("ceo"),
        vec![Step::text("ANSWER({{input}})").with_delay_ms(delay_ms)],
    )
}

// -------------------------------------------------------------------------------------------------
// In-process LLM: the same chain, answered instantly.

/// Answers the chain without any I/O (after `delay`, a timer), so a chain's time is the engine's own.
struct InstantLlm {
    ids: AtomicU64,
    delay: Duration,
    /// The root answers at once (the single-turn scenario) instead of delegating.
    single: bool,
    /// When each call arrived (for the wave diagnostics).
    arrivals: Arc<Mutex<Vec<SystemTime>>>,
}

impl InstantLlm {
    fn answer(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let agent = request
            .system
            .lines()
            .find_map(|line| line.strip_prefix("Agent id: "))
            .unwrap_or_default();
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let input = request
            .messages
            .first()
            .map(Message::text)
            .unwrap_or_default();
        let last_result = request
            .messages
            .iter()
            .rev()
            .flat_map(|m| m.content.iter().rev())
            .find_map(|c| match c {
                Content::ToolResult { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .unwrap_or_default();
        let content = if self.single && agent == "ceo" {
            vec![Content::text(single_answer(&input))]
        } else if agent == LEAF {
            vec![Content::text(format!("DONE({input})"))]
        } else {
            let Some((_, child, prefix, wrap)) = MANAGERS.iter().find(|m| m.0 == agent) else {
                return Err(LlmError::Malformed {
                    provider: "instant".into(),
                    message: format!("no scripted answer for agent {agent:?}"),
                });
            };
            if turn == 0 {
                let id = self.ids.fetch_add(1, Ordering::Relaxed);
                vec![Content::ToolUse {
                    id: format!("toolu_instant{id:012}"),
                    name: "delegate".into(),
                    input: json!({"agent": child, "task": format!("{prefix}{input}")}),
                }]
            } else {
                vec![Content::text(format!("{wrap}[{last_result}]"))]
            }
        };
        let stop_reason = if content.iter().any(|c| matches!(c, Content::ToolUse { .. })) {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        if let Some(sink) = &request.stream {
            for block in &content {
                if let Content::Text { text } = block {
                    sink.send(StreamDelta::Text(text.clone()));
                }
            }
        }
        let prompt_chars = request.system.len()
            + request
                .messages
                .iter()
                .map(|m| m.text().len() + 64)
                .sum::<usize>();
        Ok(LlmResponse {
            content,
            stop_reason,
            usage: Some(Usage {
                input_tokens: (prompt_chars / 4).max(1) as u64,
                output_tokens: 12,
            }),
            cost_usd: 0.0,
            attempts: 1,
            privacy: None,
        })
    }
}

// Written out by hand (the shape `#[async_trait]` generates) so this crate needs no extra dependency.
impl LlmService for InstantLlm {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: LlmRequest,
    ) -> Pin<Box<dyn Future<Output = Result<LlmResponse, LlmError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            if !self.single
                && request.meta.agent == "ceo"
                && request.messages.len() == 1
                && CEO_REQUEST.get().is_none()
            {
                let _ = CEO_REQUEST.set(LlmRequest {
                    stream: None,
                    ..request.clone()
                });
            }
            self.arrivals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(SystemTime::now());
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            self.answer(&request)
        })
    }
}

/// The CEO's first request of the chain, kept for the memory diagnostic.
static CEO_REQUEST: std::sync::OnceLock<LlmRequest> = std::sync::OnceLock::new();

impl InstantLlm {
    fn new(delay: Duration, single: bool) -> InstantLlm {
        InstantLlm {
            ids: AtomicU64::new(0),
            delay,
            single,
            arrivals: Arc::default(),
        }
    }
}

/// An engine on `org`'s database (or, as a diagnostic, an in-memory one) whose only provider is
/// `llm` in the standard stack.
async fn instant_engine(
    org: &TestOrg,
    streaming: bool,
    llm: InstantLlm,
    memory_store: bool,
) -> Engine {
    let loaded = &org.loaded;
    let options = TestOrg::options(streaming);
    let provider = "llm";
    let prices = loaded
        .config
        .framework
        .providers
        .get(provider)
        .map(|p| p.models.clone())
        .expect("the test org has provider `llm`");
    let stack = standard_stack(StackOptions {
        provider: provider.to_string(),
        attempt_timeout: options.attempt_timeout,
        retry: options.retry,
        max_concurrent: None,
        requests_per_minute: None,
        prices,
        shared: None,
    });
    let service: SharedLlm = stack.service(Arc::new(llm));
    let providers = Providers::from_services([(provider.to_string(), service)]);
    let store = if memory_store {
        SqliteStore::in_memory().expect("open an in-memory task database")
    } else {
        SqliteStore::open(&org.database()).expect("open the task database")
    };
    Engine::new(
        Arc::new(loaded.config.clone()),
        Arc::new(loaded.org.clone()),
        &loaded.base_dir,
        providers,
        Arc::new(store),
        Arc::new(NoMemory),
        options,
    )
    .await
    .expect("build the engine")
}

// -------------------------------------------------------------------------------------------------
// The scripted server, in its own process.

/// A `scripted-llm` child process serving a script; killed and reaped on drop.
struct ServerProcess {
    child: Child,
    url: String,
    _stdout: BufReader<ChildStdout>,
    _dir: tempfile::TempDir,
}

impl ServerProcess {
    fn start(script: &Script) -> ServerProcess {
        let dir = tempfile::tempdir().expect("tempdir for the script");
        let path = dir.path().join("script.json");
        std::fs::write(
            &path,
            serde_json::to_string(script).expect("serialise the script"),
        )
        .expect("write the script");
        let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-llm"))
            .arg("--script")
            .arg(&path)
            .args(["--listen", "127.0.0.1:0", "--quiet"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start scripted-llm");
        let mut stdout = BufReader::new(child.stdout.take().expect("scripted-llm stdout"));
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("read scripted-llm's first line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("scripted-llm said {line:?}"))
            .to_string();
        ServerProcess {
            child,
            url,
            _stdout: stdout,
            _dir: dir,
        }
    }

    /// The server process's peak RSS so far, in kB.
    fn peak_rss_kb(&self) -> Option<u64> {
        status_kb(&format!("/proc/{}/status", self.child.id()), "VmHWM")
    }

    /// The server process's CPU time so far.
    fn cpu_time(&self) -> Option<Duration> {
        cpu_time(&self.child.id().to_string())
    }

    /// When each request of the measured run reached the server (warm-up sessions excluded).
    async fn arrivals(&self) -> Vec<SystemTime> {
        let client = opc_agents::llm::provider::http_client();
        let records: Vec<RecordedRequest> = client
            .get(format!("{}/_requests", self.url))
            .send()
            .await
            .expect("GET /_requests")
            .json()
            .await
            .expect("parse /_requests");
        let mut times: Vec<SystemTime> = records
            .into_iter()
            .filter(|r| !r.session.contains("warm-up"))
            .map(|r| r.received_at)
            .collect();
        times.sort();
        times
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// -------------------------------------------------------------------------------------------------
// Memory

/// A `kB` field of a `/proc/*/status` file.
fn status_kb(path: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        line.strip_prefix(field)?
            .strip_prefix(':')?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()
    })
}

fn self_kb(field: &str) -> u64 {
    status_kb("/proc/self/status", field).unwrap_or(0)
}

/// Resets this process's peak RSS (`VmHWM`) to its current RSS (Linux ≥ 4.0).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// User + system CPU time of a process so far, from `/proc/PID/stat` (clock ticks of 10 ms).
fn cpu_time(pid: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3 (state).
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Samples this process's RSS on a plain thread until stopped; a cross-check of `VmHWM`.
struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start() -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut max = 0;
            while !flag.load(Ordering::Relaxed) {
                max = max.max(self_kb("VmRSS"));
                std::thread::sleep(Duration::from_millis(5));
            }
            max.max(self_kb("VmRSS"))
        });
        RssSampler { stop, thread }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("RSS sampler thread")
    }
}

// -------------------------------------------------------------------------------------------------
// Statistics

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// CPUs of this machine.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Per-turn results of one sequential-chain variant (passed from a child process as JSON in the
/// telemetry comparison).
#[derive(serde::Serialize, serde::Deserialize)]
struct TurnStats {
    label: String,
    chains: usize,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    max: Duration,
    chains_per_s: f64,
}

impl TurnStats {
    fn print(&self) {
        println!(
            "  {:<44} {:>4} chains  per turn p50 {:>6.1} µs  p90 {:>6.1} µs  p99 {:>6.1} µs  max {:>6.1} µs  {:>5.1} chains/s",
            self.label,
            self.chains,
            us(self.p50),
            us(self.p90),
            us(self.p99),
            us(self.max),
            self.chains_per_s
        );
    }
}

/// When one wave of requests (the next [`MAX_CONCURRENT_AGENTS`] in arrival order) reached the server.
#[derive(serde::Serialize, serde::Deserialize)]
struct Wave {
    first_ms: f64,
    last_ms: f64,
}

/// Results of one concurrency scenario (passed from the child process as JSON).
#[derive(serde::Serialize, serde::Deserialize)]
struct LoadStats {
    label: String,
    roots: usize,
    calls: u64,
    wall: Duration,
    ideal: Duration,
    ideal_note: String,
    /// Time to call `engine.send` for every root (inside `wall`).
    send_loop: Duration,
    /// CPU time (user + system) of the engine process during the run.
    engine_cpu: Duration,
    /// CPU time of the scripted server process during the run.
    server_cpu: Option<Duration>,
    /// Arrival of each wave of requests at the server (`--diagnose` only).
    waves: Vec<Wave>,
    baseline_kb: u64,
    peak_kb: u64,
    peak_source: String,
    sampled_peak_kb: u64,
    max_live_tasks: u64,
    tasks_per_root: u64,
    server_peak_kb: Option<u64>,
}

impl LoadStats {
    fn ratio(&self) -> f64 {
        self.wall.as_secs_f64() / self.ideal.as_secs_f64()
    }

    fn growth_kb(&self) -> f64 {
        self.peak_kb.saturating_sub(self.baseline_kb) as f64
    }

    fn kb_per_root(&self) -> f64 {
        self.growth_kb() / self.roots as f64
    }

    /// Per task, dividing by every task the roots make (an upper bound of the tasks alive at once).
    fn kb_per_task_all(&self) -> f64 {
        self.growth_kb() / (self.roots as u64 * self.tasks_per_root) as f64
    }

    /// Per task, dividing by the most tasks that were really alive at once.
    fn kb_per_live_task(&self) -> f64 {
        self.growth_kb() / self.max_live_tasks.max(1) as f64
    }

    fn print(&self) {
        println!("  {}", self.label);
        println!(
            "    {} roots, {} LLM calls, all COMPLETED with the right answer",
            self.roots, self.calls
        );
        println!(
            "    wall {:>8.1} ms   ideal {:>8.1} ms   ratio {:.3}×",
            ms(self.wall),
            ms(self.ideal),
            self.ratio()
        );
        println!("    ideal: {}", self.ideal_note);
        let cpus = cpus();
        let cpu_budget = self.wall.as_secs_f64() * cpus as f64;
        println!(
            "    sending all roots took {:.1} ms; CPU during the run: engine {:.0} ms, server {} \
             (of {:.0} ms available on {cpus} CPUs: {:.0}% busy)",
            ms(self.send_loop),
            ms(self.engine_cpu),
            self.server_cpu
                .map_or_else(|| "?".to_string(), |d| format!("{:.0} ms", ms(d))),
            cpu_budget * 1e3,
            100.0 * (self.engine_cpu + self.server_cpu.unwrap_or_default()).as_secs_f64()
                / cpu_budget
        );
        if !self.waves.is_empty() {
            println!(
                "    request arrivals at the server, by wave of {MAX_CONCURRENT_AGENTS} (ms after the first send):"
            );
            for (i, w) in self.waves.iter().enumerate() {
                println!(
                    "      wave {i:>2}: first {:>7.1}  last {:>7.1}  spread {:>6.1}  (ideal start {:>5})",
                    w.first_ms,
                    w.last_ms,
                    w.last_ms - w.first_ms,
                    i as u64 * LATENCY_MS
                );
            }
        }
        println!(
            "    RSS: baseline {} kB, peak {} kB ({}), sampled max {} kB → +{:.0} kB",
            self.baseline_kb,
            self.peak_kb,
            self.peak_source,
            self.sampled_peak_kb,
            self.growth_kb()
        );
        println!("    per in-flight root task: {:.1} kB", self.kb_per_root());
        if self.tasks_per_root > 1 {
            println!(
                "    per in-flight task: {:.1} kB over all {} tasks; {:.1} kB over the {} tasks alive at once at most",
                self.kb_per_task_all(),
                self.roots as u64 * self.tasks_per_root,
                self.kb_per_live_task(),
                self.max_live_tasks
            );
        } else {
            println!("    most tasks alive at once: {}", self.max_live_tasks);
        }
        if let Some(kb) = self.server_peak_kb {
            println!("    (scripted server process peak RSS, not counted: {kb} kB)");
        }
    }
}

// -------------------------------------------------------------------------------------------------
// Scenarios

/// Runs one chain for `input` and checks its answer.
async fn one_chain(engine: &Engine, input: &str) {
    let run = engine.send(None, input).await.expect("send");
    let outcome = run.wait().await;
    assert_eq!(
        outcome.state,
        TaskState::Completed,
        "chain {input:?} did not complete: {}",
        outcome.text
    );
    assert_eq!(outcome.text, chain_answer(input), "chain {input:?}");
}

/// Sequential chains: `warmup` unmeasured, then `n` measured.
async fn sequential_chains(
    engine: &Engine,
    label: &'static str,
    tag: &str,
    warmup: usize,
    n: usize,
) -> TurnStats {
    for i in 0..warmup {
        one_chain(engine, &format!("{tag} warm-up {i}")).await;
    }
    let mut per_turn = Vec::with_capacity(n);
    let started = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        one_chain(engine, &format!("{tag} chain {i}")).await;
        per_turn.push(t.elapsed() / CHAIN_CALLS);
    }
    let total = started.elapsed();
    per_turn.sort();
    TurnStats {
        label: label.to_string(),
        chains: n,
        p50: percentile(&per_turn, 50.0),
        p90: percentile(&per_turn, 90.0),
        p99: percentile(&per_turn, 99.0),
        max: per_turn.last().copied().unwrap_or_default(),
        chains_per_s: n as f64 / total.as_secs_f64(),
    }
}

/// With `memory_store`, the database is in memory (a diagnostic: the engine without file I/O).
async fn turn_overhead_engine_only(
    streaming: bool,
    memory_store: bool,
    warmup: usize,
    n: usize,
) -> TurnStats {
    // The URL is never used: the only provider is in-process.
    let org = TestOrg::new("http://127.0.0.1:9", Wire::Anthropic, Execution::default());
    let engine = instant_engine(
        &org,
        streaming,
        InstantLlm::new(Duration::ZERO, false),
        memory_store,
    )
    .await;
    let label = match (streaming, memory_store) {
        (false, false) => "engine only, in-process",
        (true, false) => "engine only, in-process, streamed",
        (_, true) => "engine only, in-memory database (diagnostic)",
    };
    let stats = sequential_chains(&engine, label, "instant", warmup, n).await;
    engine.shutdown().await;
    stats
}

async fn turn_overhead_http(streaming: bool, warmup: usize, n: usize) -> TurnStats {
    let server = ServerProcess::start(&chain_script(0));
    let org = TestOrg::new(&server.url, Wire::Anthropic, Execution::default());
    let engine = org.engine(TestOrg::options(streaming)).await;
    let label = if streaming {
        "loopback HTTP, Anthropic, streamed"
    } else {
        "loopback HTTP, Anthropic, whole"
    };
    let stats = sequential_chains(&engine, label, "http", warmup, n).await;
    engine.shutdown().await;
    stats
}

/// Most tasks alive at once, from the tasks' recorded creation and end times (ms resolution; an
/// end and a start in the same ms count as not overlapping, so this never over-counts).
async fn max_live_tasks(engine: &Engine, roots: &[i64]) -> u64 {
    let mut points: Vec<(i64, i64)> = Vec::new();
    for root in roots {
        for task in engine.store().tree(*root).await.expect("read a task tree") {
            points.push((task.created_at, 1));
            points.push((task.finished_at.unwrap_or(i64::MAX), -1));
        }
    }
    // Ends (-1) sort before starts (+1) at the same instant.
    points.sort();
    let (mut live, mut max) = (0i64, 0i64);
    for (_, delta) in points {
        live += delta;
        max = max.max(live);
    }
    max as u64
}

/// `roots` concurrent root tasks at [`LATENCY_MS`] per call, with `maxConcurrentAgents` 200. Run in
/// a fresh process (see [`main`]) so the heap left by earlier work does not hide this run's growth.
///
/// With `in_process`, the model is [`InstantLlm`] sleeping [`LATENCY_MS`] instead of the scripted
/// server (a diagnostic: the engine without HTTP, and without a second process on the same CPUs);
/// with `memory_store` too, the database is in memory (the engine without file I/O).
async fn concurrent_roots(
    chain: bool,
    in_process: bool,
    memory_store: bool,
    postgres: Option<&str>,
    roots: usize,
    warm_up: usize,
    diagnose: bool,
) -> LoadStats {
    let script = if chain {
        chain_script(LATENCY_MS)
    } else {
        single_script(LATENCY_MS)
    };
    let server = (!in_process).then(|| ServerProcess::start(&script));
    let execution = Execution {
        max_concurrent_agents: MAX_CONCURRENT_AGENTS,
        task_timeout: "5m",
        compression_threshold: 2000,
        approval_timeout: "1h",
    };
    let (engine, in_process_arrivals, _org) = match &server {
        Some(server) => {
            let org = TestOrg::new(&server.url, Wire::Anthropic, execution);
            let engine = match postgres {
                // The store on PostgreSQL (a pool of 16, `maxConnections`' default).
                Some(url) => {
                    let store = opc_agents::PgStore::connect(url, 16)
                        .await
                        .expect("connect to the benchmark's PostgreSQL");
                    org.engine_on(Arc::new(store), TestOrg::options(false))
                        .await
                }
                None => org.engine(TestOrg::options(false)).await,
            };
            (engine, None, org)
        }
        None => {
            let org = TestOrg::new("http://127.0.0.1:9", Wire::Anthropic, execution);
            let llm = InstantLlm::new(Duration::from_millis(LATENCY_MS), !chain);
            let arrivals = llm.arrivals.clone();
            (
                instant_engine(&org, false, llm, memory_store).await,
                Some(arrivals),
                org,
            )
        }
    };
    let answer = |input: &str| {
        if chain {
            chain_answer(input)
        } else {
            single_answer(input)
        }
    };

    // Warm up: the HTTP client, the database file and the runtime's threads exist before measuring.
    let mut warm = Vec::with_capacity(warm_up);
    for i in 0..warm_up {
        let input = format!("warm-up {i}");
        let run = engine
            .send(None, &input)
            .await
            .expect("send a warm-up root");
        warm.push((input, run));
    }
    for (input, run) in warm {
        let outcome = run.wait().await;
        assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
        assert_eq!(outcome.text, answer(&input));
    }

    let baseline_kb = self_kb("VmRSS");
    let reset = reset_peak_rss();
    let sampler = RssSampler::start();
    let engine_cpu_before = cpu_time("self").unwrap_or_default();
    let server_cpu_before = server.as_ref().and_then(ServerProcess::cpu_time);
    if let Some(arrivals) = &in_process_arrivals {
        arrivals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
    let started_at = SystemTime::now();

    let started = Instant::now();
    let mut runs = Vec::with_capacity(roots);
    for i in 0..roots {
        let run = engine
            .send(None, &format!("task {i}"))
            .await
            .expect("send a root task");
        runs.push(run);
    }
    let send_loop = started.elapsed();
    let root_ids: Vec<i64> = runs.iter().map(|r| r.task).collect();
    let outcomes = join_all(runs.into_iter().map(|r| r.wait())).await;
    let wall = started.elapsed();

    let hwm_kb = self_kb("VmHWM");
    let sampled_peak_kb = sampler.stop();
    let engine_cpu = cpu_time("self")
        .unwrap_or_default()
        .saturating_sub(engine_cpu_before);
    let server_cpu = server
        .as_ref()
        .and_then(ServerProcess::cpu_time)
        .zip(server_cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    for (i, outcome) in outcomes.iter().enumerate() {
        let input = format!("task {i}");
        assert_eq!(
            outcome.state,
            TaskState::Completed,
            "root {input:?}: {}",
            outcome.text
        );
        assert_eq!(outcome.text, answer(&input), "root {input:?}");
    }
    let (peak_kb, peak_source) = if reset {
        (hwm_kb, "VmHWM after clear_refs")
    } else {
        (
            hwm_kb.max(sampled_peak_kb),
            "clear_refs FAILED: VmHWM since process start",
        )
    };

    let calls_per_root = if chain { u64::from(CHAIN_CALLS) } else { 1 };
    let calls = roots as u64 * calls_per_root;
    let slots = u64::from(MAX_CONCURRENT_AGENTS);
    let waves = calls.div_ceil(slots);
    let by_slots = Duration::from_millis(waves * LATENCY_MS);
    let by_chain = Duration::from_millis(calls_per_root * LATENCY_MS);
    let ideal = by_slots.max(by_chain);
    let ideal_note = if chain {
        let why = if by_slots >= by_chain {
            format!(
                "A slot is held only during an LLM call, never while a parent waits for its \
                 child, and the semaphore is FIFO, so the {waves} waves rotate through the {} \
                 groups of up to {slots} roots and no slot need idle",
                (roots as u64).div_ceil(slots)
            )
        } else {
            "Few roots: the chain's own sequence of calls bounds it".to_string()
        };
        format!(
            "max(one chain = {calls_per_root} sequential calls × {LATENCY_MS} ms = {} ms, \
             slot-bound = ceil({calls} calls / {slots} slots) × {LATENCY_MS} ms = {} ms). {why}",
            by_chain.as_millis(),
            by_slots.as_millis(),
        )
    } else {
        format!(
            "ceil({calls} calls / {slots} slots) × {LATENCY_MS} ms = {} ms",
            by_slots.as_millis()
        )
    };
    let max_live = max_live_tasks(&engine, &root_ids).await;
    let arrivals = match (&server, &in_process_arrivals) {
        _ if !diagnose => Vec::new(),
        (Some(server), _) => server.arrivals().await,
        (None, Some(arrivals)) => {
            let mut times = arrivals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            times.sort();
            times
        }
        (None, None) => Vec::new(),
    };
    let waves = if diagnose {
        arrivals
            .chunks(MAX_CONCURRENT_AGENTS as usize)
            .map(|chunk| {
                let offset = |t: &SystemTime| {
                    t.duration_since(started_at)
                        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
                };
                Wave {
                    first_ms: chunk.first().map_or(0.0, offset),
                    last_ms: chunk.last().map_or(0.0, offset),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let stats = LoadStats {
        label: format!(
            "{}{}",
            if chain {
                "4-level chain (7 calls per root)"
            } else {
                "single turn (root answers directly)"
            },
            match (in_process, memory_store) {
                (false, _) if postgres.is_some() => ", store on PostgreSQL",
                (false, _) => "",
                (true, false) => ", in-process model (diagnostic)",
                (true, true) => ", in-process model, in-memory database (diagnostic)",
            }
        ),
        roots,
        calls,
        wall,
        ideal,
        ideal_note,
        send_loop,
        engine_cpu,
        server_cpu,
        waves,
        baseline_kb,
        peak_kb,
        peak_source: peak_source.into(),
        sampled_peak_kb,
        max_live_tasks: max_live,
        tasks_per_root: if chain { CHAIN_TASKS } else { 1 },
        server_peak_kb: server.as_ref().and_then(ServerProcess::peak_rss_kb),
    };
    engine.shutdown().await;
    stats
}

/// Diagnostic: the database work of `n` single-turn roots, done sequentially on one thread with the
/// same store calls the engine makes (`Engine::send`: create_conversation, create_task;
/// `session::run_task` / `session_inner` / `call_model` / `complete` / `finish` / `run_root`: task,
/// transition ×3, messages, record_call, save_messages, finish, task ×2, tree_totals). Every store
/// call holds the store's single connection lock, so `n` × this is a floor under the wall time of
/// `n` concurrent roots whatever the number of CPUs. Returns the time per root.
async fn store_floor(store: &dyn Store, n: usize) -> Duration {
    use opc_agents::store::{CallRecord, Ending, NewTask};
    let started = Instant::now();
    for i in 0..n {
        let conversation = format!("c-floor-{i}");
        let input = format!("task {i}");
        store
            .create_conversation(&conversation, "ceo")
            .await
            .expect("create_conversation");
        let mut messages = vec![Message::user(input.clone())];
        let id = store
            .create_task(&NewTask {
                parent_id: None,
                conversation_id: &conversation,
                agent: "ceo",
                depth: 0,
                tool_use_id: None,
                tool_index: 0,
                input: &input,
                messages: &messages,
                author: None,
                trace: None,
            })
            .await
            .expect("create_task");
        store.task(id).await.expect("task");
        store
            .transition(id, TaskState::Assigned)
            .await
            .expect("assign");
        messages = store.messages(id).await.expect("messages");
        store
            .transition(id, TaskState::Executing)
            .await
            .expect("execute");
        store
            .record_call(&CallRecord {
                task_id: id,
                agent: "ceo".into(),
                model: "llm/test-model".into(),
                tokens_in: 120,
                tokens_out: 12,
                cost_usd: 0.0005,
                usage_unknown: false,
                duration_ms: 100,
                attempts: 1,
                tool_calls: Vec::new(),
                error: None,
                privacy: None,
            })
            .await
            .expect("record_call");
        let answer = single_answer(&input);
        messages.push(Message {
            role: Role::Assistant,
            content: vec![Content::text(answer.clone())],
        });
        store
            .save_messages(id, &messages)
            .await
            .expect("save_messages");
        store
            .transition(id, TaskState::ResultPropagating)
            .await
            .expect("propagate");
        store
            .finish(
                id,
                Ending::Completed {
                    output: &answer,
                    summary: None,
                },
            )
            .await
            .expect("finish");
        store.task(id).await.expect("task");
        store.task(id).await.expect("task");
        store.tree_totals(id).await.expect("tree_totals");
    }
    started.elapsed() / n as u32
}

/// Diagnostic: what one copy of the CEO's request costs in memory (RSS growth over many copies,
/// so allocator overhead is included), next to its size as JSON.
fn print_request_size() {
    let Some(request) = CEO_REQUEST.get() else {
        return;
    };
    const COPIES: usize = 5_000;
    let per_copy_kb = |make: &dyn Fn() -> Box<dyn std::any::Any>| {
        let before = self_kb("VmRSS");
        let copies: Vec<_> = (0..COPIES).map(|_| make()).collect();
        let after = self_kb("VmRSS");
        drop(copies);
        after.saturating_sub(before) as f64 / COPIES as f64
    };
    let tools_kb = per_copy_kb(&|| Box::new(request.tools.clone()));
    let request_kb = per_copy_kb(&|| Box::new(request.clone()));
    let tools_json = serde_json::to_string(&request.tools).map_or(0, |j| j.len());
    println!(
        "  the CEO's request: system prompt {} B, {} tool specs {} B as JSON; in memory one copy of \
         the tool specs takes {tools_kb:.1} kB and of the whole request {request_kb:.1} kB. A task \
         waiting for a slot holds 2 copies (session_inner's `specs`/`system`/`messages` and the \
         LlmRequest), a call in flight 3 (+ the retry layer's per-attempt clone)",
        request.system.len(),
        request.tools.len(),
        tools_json
    );
}

fn print_store_floor(roots: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let on_disk = SqliteStore::open(&dir.path().join("floor.db")).expect("open a store");
    let runtime = runtime();
    runtime.block_on(store_floor(&on_disk, 100));
    let disk = runtime.block_on(store_floor(&on_disk, roots));
    let in_memory = SqliteStore::in_memory().expect("in-memory store");
    runtime.block_on(store_floor(&in_memory, 100));
    let memory = runtime.block_on(store_floor(&in_memory, roots));
    println!(
        "  store floor: the 13 store calls of one single-turn root take {:.0} µs on disk \
         ({:.0} µs in memory), one after the other; all go through one connection lock, so \
         {roots} roots need ≥ {:.0} ms of that lock ({:.0} ms in memory)",
        us(disk),
        us(memory),
        ms(disk * roots as u32),
        ms(memory * roots as u32)
    );
}

// -------------------------------------------------------------------------------------------------
// Telemetry off and on, side by side (issue 37)

/// Issue 37: telemetry on adds at most this much to the wall / ideal ratios, in percent.
const TARGET_TELEMETRY_PCT: f64 = 3.0;

/// The child process's scenario that times sequential chains with the in-process model.
const TURNS_SCENARIO: &str = "turns-in-process";

/// How a run exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// Nothing installed: no subscriber, no pipelines (the instruments are the API's no-ops).
    Off,
    /// The `opc run` pipeline, exporting to a receiver.
    On,
    /// [`Variant::On`] with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
    Content,
}

impl Variant {
    /// The order of the runs within one repetition.
    const ALL: [Variant; 3] = [Variant::Off, Variant::On, Variant::Content];

    fn arg(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::On => "on",
            Variant::Content => "content",
        }
    }

    fn parse(arg: &str) -> Variant {
        Variant::ALL
            .into_iter()
            .find(|v| v.arg() == arg)
            .unwrap_or_else(|| panic!("--telemetry {arg:?}: expected off, on or content"))
    }

    fn label(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::On => "on",
            Variant::Content => "on, content capture",
        }
    }

    /// For the targets table.
    fn short(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::On => "on",
            Variant::Content => "on + capture",
        }
    }
}

/// In a scenario's child process, before any engine work: the pipeline `opc run` builds
/// (`bot/src/log.rs`, `bot/src/main.rs`) from this process's `OTEL_*` variables, which the parent
/// set, with its layer on a registry as the global subscriber. First, because the metric
/// instruments bind to the global meter provider when first used. `None` when off.
fn install_telemetry(variant: Variant) -> Option<opc_telemetry::Telemetry> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    if variant == Variant::Off {
        return None;
    }
    let settings = opc_telemetry::settings::resolve(
        |name| std::env::var(name).ok(),
        &opc_telemetry::FromConfig::default(),
    )
    .unwrap_or_else(|problems| panic!("the telemetry settings:\n{problems}"));
    assert!(
        settings.is_on(),
        "telemetry {} but no endpoint: the parent sets OTEL_EXPORTER_OTLP_ENDPOINT",
        variant.arg()
    );
    assert_eq!(settings.capture_content, variant == Variant::Content);
    let telemetry = opc_telemetry::install(&settings)
        .expect("build the telemetry pipelines")
        .expect("telemetry is on");
    tracing_subscriber::registry()
        .with(telemetry.layer())
        .try_init()
        .expect("set the global subscriber");
    Some(telemetry)
}

/// One run of a scenario in its child process, and what reached the receiver.
struct Run<T> {
    stats: T,
    /// CPU time of this (parent) process during the run: the receiver's, as the parent only waits.
    receiver_cpu: Option<Duration>,
    /// Spans received.
    spans: usize,
}

/// The runs of one scenario, by variant, in the order they ran.
struct Runs<T> {
    /// What one run's spans are divided by for "spans per root".
    roots: usize,
    runs: Vec<(Variant, Run<T>)>,
}

impl<T> Runs<T> {
    fn of(&self, variant: Variant) -> impl Iterator<Item = &Run<T>> {
        self.runs
            .iter()
            .filter(move |(v, _)| *v == variant)
            .map(|(_, run)| run)
    }

    fn median(&self, variant: Variant, value: impl Fn(&T) -> f64) -> f64 {
        median(self.of(variant).map(|r| value(&r.stats)).collect())
    }

    /// `on`'s median over `off`'s, as percent added.
    fn added_pct(&self, variant: Variant, value: impl Fn(&T) -> f64 + Copy) -> f64 {
        let off = self.median(Variant::Off, value);
        100.0 * (self.median(variant, value) - off) / off
    }

    /// Median receiver CPU (ms) and spans per root of `variant`'s runs.
    fn receiver(&self, variant: Variant) -> String {
        if variant == Variant::Off {
            return String::new();
        }
        let cpu = median(
            self.of(variant)
                .filter_map(|r| r.receiver_cpu.map(ms))
                .collect(),
        );
        let spans = median(
            self.of(variant)
                .map(|r| r.spans as f64 / self.roots as f64)
                .collect(),
        );
        format!("receiver CPU {cpu:>5.0} ms, {spans:>4.1} spans per root")
    }
}

/// The median (the mean of the middle two for an even count); 0 for none.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The scenario runs of the comparison.
struct TelemetryComparison {
    reps: usize,
    turns: Runs<TurnStats>,
    single: Runs<LoadStats>,
    chain: Runs<LoadStats>,
}

/// Runs `scenario` once as `variant` says; an on-run exports to a fresh receiver here, which must
/// then hold its spans and metrics (and with capture, the messages).
fn telemetry_run<T: serde::de::DeserializeOwned>(
    scenario: &str,
    args: &[String],
    variant: Variant,
    delegates: bool,
) -> Run<T> {
    if variant == Variant::Off {
        return Run {
            stats: in_child(scenario, args, variant, None),
            receiver_cpu: None,
            spans: 0,
        };
    }
    // A runtime of one thread for the receiver: this process does nothing else meanwhile.
    let receiver_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("the receiver's runtime");
    let receiver = receiver_runtime.block_on(opc_tests::otlp::OtlpReceiver::start());
    let cpu_before = cpu_time("self");
    let stats = in_child(scenario, args, variant, Some(&receiver.endpoint()));
    let receiver_cpu = cpu_time("self")
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    // The child flushed before it exited, and the receiver records a request before answering
    // it: everything is here already.
    let spans = receiver.spans();
    let errors = receiver.errors();
    assert!(
        errors.is_empty(),
        "{scenario}: the receiver could not read {errors:?}"
    );
    let mut wanted = vec!["invoke_agent ceo"];
    if delegates {
        wanted.extend(["invoke_agent dev-backend", "execute_tool delegate"]);
    }
    for name in wanted {
        assert!(
            spans.iter().any(|s| s.name == name),
            "{scenario}, telemetry {}: no span {name:?} received; {}",
            variant.arg(),
            opc_tests::otlp::span_names(&spans[..spans.len().min(20)])
        );
    }
    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert!(!chats.is_empty(), "{scenario}: no chat span received");
    let captured = chats
        .iter()
        .filter(|s| s.attr("gen_ai.input.messages").is_some())
        .count();
    match variant {
        Variant::Content => assert_eq!(
            captured,
            chats.len(),
            "{scenario}: with capture on, every chat span carries its messages"
        ),
        _ => assert_eq!(
            captured, 0,
            "{scenario}: messages captured with capture off"
        ),
    }
    let metrics = receiver.metric_names();
    for name in ["gen_ai.client.operation.duration", "opc.requests"] {
        assert!(
            metrics.contains(name),
            "{scenario}: no metric {name} received; received {metrics:?}"
        );
    }
    Run {
        stats,
        receiver_cpu,
        spans: spans.len(),
    }
}

/// Runs each scenario `reps` times per variant, alternating off, on, content, off, …
///
/// `only` (`--only turns,single,chain`): the scenarios to run, all when `None`.
fn telemetry_comparison(
    reps: usize,
    roots: usize,
    warmup: usize,
    chains: usize,
    only: Option<&str>,
) -> TelemetryComparison {
    let runs = |scenario: &str| only.is_none_or(|list| list.split(',').any(|s| s == scenario));
    let turn_args = [
        "--warmup".to_string(),
        warmup.to_string(),
        "--chains".to_string(),
        chains.to_string(),
    ];
    let root_args = ["--roots".to_string(), roots.to_string()];
    let mut turns = Runs {
        roots: warmup + chains,
        runs: Vec::new(),
    };
    // The concurrency scenarios' warm-up roots export too.
    let mut single = Runs {
        roots: roots + 4,
        runs: Vec::new(),
    };
    let mut chain = Runs {
        roots: roots + 4,
        runs: Vec::new(),
    };
    for _ in 0..reps * usize::from(runs("turns")) {
        for variant in Variant::ALL {
            turns.runs.push((
                variant,
                telemetry_run(TURNS_SCENARIO, &turn_args, variant, true),
            ));
        }
    }
    for _ in 0..reps * usize::from(runs("single")) {
        for variant in Variant::ALL {
            single
                .runs
                .push((variant, telemetry_run("single", &root_args, variant, false)));
        }
    }
    for _ in 0..reps * usize::from(runs("chain")) {
        for variant in Variant::ALL {
            chain
                .runs
                .push((variant, telemetry_run("chain", &root_args, variant, true)));
        }
    }
    TelemetryComparison {
        reps,
        turns,
        single,
        chain,
    }
}

impl TelemetryComparison {
    fn print(&self) {
        let turns = &self.turns;
        if !turns.runs.is_empty() {
            println!(
                "  per turn, 4-level chain, in-process model (median over runs of each run's percentile)"
            );
            for variant in Variant::ALL {
                let p50 = turns.median(variant, |t| us(t.p50));
                let p99 = turns.median(variant, |t| us(t.p99));
                let added = if variant == Variant::Off {
                    String::new()
                } else {
                    format!(
                        "p50 {:+6.1} µs ({:+5.1}%)   {}",
                        p50 - turns.median(Variant::Off, |t| us(t.p50)),
                        turns.added_pct(variant, |t| us(t.p50)),
                        turns.receiver(variant)
                    )
                };
                println!(
                    "    {:<22} p50 {p50:>6.1} µs  p99 {p99:>6.1} µs   {added}",
                    variant.label()
                );
            }
        }
        for (name, runs) in [
            ("single turn (root answers directly)", &self.single),
            ("4-level chain (7 calls per root)", &self.chain),
        ] {
            if runs.runs.is_empty() {
                continue;
            }
            println!(
                "  {name}, {} roots, wall / ideal (median; each run's ratio in run order)",
                runs.roots - 4
            );
            for variant in Variant::ALL {
                let ratio = runs.median(variant, LoadStats::ratio);
                let cpu = runs.median(variant, |s| ms(s.engine_cpu));
                let each: Vec<String> = runs
                    .of(variant)
                    .map(|r| format!("{:.3}", r.stats.ratio()))
                    .collect();
                let added = if variant == Variant::Off {
                    String::new()
                } else {
                    format!("({:+5.2}%)", runs.added_pct(variant, LoadStats::ratio))
                };
                println!(
                    "    {:<22} {ratio:.3}× {added:<10} engine CPU {cpu:>6.0} ms  {}  [{}]",
                    variant.label(),
                    runs.receiver(variant),
                    each.join(" ")
                );
            }
        }
    }

    /// The rows of the targets table.
    fn print_targets(&self) {
        for variant in [Variant::On, Variant::Content] {
            for (name, runs) in [("single turn", &self.single), ("chain", &self.chain)] {
                if runs.runs.is_empty() {
                    continue;
                }
                let added = runs.added_pct(variant, LoadStats::ratio);
                println!(
                    "  {:<66} {:>10.2} % {:>7} %  {}",
                    format!(
                        "telemetry {}: added to wall / ideal, {name}",
                        variant.short()
                    ),
                    added,
                    format!("≤ {TARGET_TELEMETRY_PCT}"),
                    verdict(added <= TARGET_TELEMETRY_PCT)
                );
            }
        }
        for variant in [Variant::On, Variant::Content] {
            let turns = &self.turns;
            if turns.runs.is_empty() {
                break;
            }
            println!(
                "  {:<66} {:>10.2} % {:>10}  (no target: zero-latency model)",
                format!(
                    "telemetry {}: added to p50 per turn, chain, in-process model",
                    variant.short()
                ),
                turns.added_pct(variant, |t| us(t.p50)),
                "",
            );
        }
        println!(
            "  ({} run(s) of each variant, alternating; the receiver shares the machine's {} CPUs)",
            self.reps,
            cpus()
        );
    }
}

// -------------------------------------------------------------------------------------------------
// Main

/// The line prefix a scenario child process puts before its JSON result.
const RESULT_PREFIX: &str = "@@engine-bench-result ";

/// Runs a concurrency scenario in a fresh copy of this binary and returns its result.
fn concurrent_in_child(scenario: &str, roots: usize, diagnose: bool) -> LoadStats {
    concurrent_in_child_on(scenario, roots, diagnose, None)
}

/// [`concurrent_in_child`], the store on the PostgreSQL database `postgres` names.
fn concurrent_in_child_on(
    scenario: &str,
    roots: usize,
    diagnose: bool,
    postgres: Option<&str>,
) -> LoadStats {
    let mut args = vec!["--roots".to_string(), roots.to_string()];
    if let Some(url) = postgres {
        args.extend(["--postgres".to_string(), url.to_string()]);
    }
    if diagnose {
        args.push("--diagnose".to_string());
    }
    in_child(scenario, &args, Variant::Off, None)
}

/// Runs `scenario` in a fresh copy of this binary with `args` and telemetry as `variant` says
/// (exporting to `endpoint`), and returns what it printed after [`RESULT_PREFIX`].
fn in_child<T: serde::de::DeserializeOwned>(
    scenario: &str,
    args: &[String],
    variant: Variant,
    endpoint: Option<&str>,
) -> T {
    let exe = std::env::current_exe().expect("path of this benchmark binary");
    let mut command = Command::new(exe);
    command
        .args(["--scenario", scenario, "--telemetry", variant.arg()])
        .args(args)
        .arg("--bench");
    // The child's telemetry is exactly what this run sets: none of the caller's `OTEL_*`
    // variables (an endpoint, `OTEL_SDK_DISABLED`, a sampler) leaks into either variant.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(name);
        }
    }
    if variant != Variant::Off {
        let endpoint = endpoint.expect("a receiver for a telemetry-on run");
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
        if variant == Variant::Content {
            command.env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
        }
    }
    let output = command
        .stderr(Stdio::inherit())
        .output()
        .expect("run the scenario process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "scenario {scenario} (telemetry {}) failed ({}):\n{stdout}",
        variant.arg(),
        output.status
    );
    let json = stdout
        .lines()
        .find_map(|line| line.strip_prefix(RESULT_PREFIX))
        .unwrap_or_else(|| panic!("scenario {scenario} printed no result:\n{stdout}"));
    serde_json::from_str(json).expect("parse the scenario result")
}

/// Issue 36: 1,000 single-turn roots with the store on PostgreSQL, wall / ideal, within this factor of
/// SQLite's in the same run.
const TARGET_POSTGRES_VS_SQLITE: f64 = 1.15;

/// A fresh database for the PostgreSQL row: on `OPC_TEST_POSTGRES_URL`'s server, else on a
/// throw-away one started here (kept alive by the returned guard); `None` without a server.
fn postgres_database() -> Option<(String, Option<opc_tests::postgres::PgServer>)> {
    let (admin, server) = match std::env::var("OPC_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => match opc_tests::postgres::PgServer::start() {
            Ok(server) => (server.url("postgres"), Some(server)),
            Err(why) => {
                eprintln!("engine bench: no PostgreSQL row ({why})");
                return None;
            }
        },
    };
    let url = runtime()
        .block_on(opc_tests::postgres::create_database(&admin, "engine_bench"))
        .expect("create the benchmark's database");
    Some((url, server))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// The allocator the `opc` binary ships with (`bot/src/main.rs`), so the engine is measured as it runs.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value_of = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it, and
    // then it only checks that every scenario works, on a small scale (as criterion does).
    let smoke = !args.iter().any(|a| a == "--bench");
    let quick = smoke || args.iter().any(|a| a == "--quick");
    let diagnose = args.iter().any(|a| a == "--diagnose");
    let (warmup, chains) = match (smoke, quick) {
        (true, _) => (2, 5),
        (false, true) => (5, 40),
        (false, false) => (20, 300),
    };
    let roots: usize = value_of("--roots")
        .map(|r| r.parse().expect("--roots N"))
        .unwrap_or(if smoke { 50 } else { 1000 });

    // Child mode: one scenario in a fresh process, telemetry installed first when asked.
    if let Some(scenario) = value_of("--scenario") {
        let variant = value_of("--telemetry").map_or(Variant::Off, |v| Variant::parse(&v));
        let telemetry = install_telemetry(variant);
        let json = if scenario == TURNS_SCENARIO {
            let count = |name: &str| -> usize {
                value_of(name)
                    .unwrap_or_else(|| panic!("{TURNS_SCENARIO} needs {name} N"))
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} N"))
            };
            let stats = runtime().block_on(turn_overhead_engine_only(
                false,
                false,
                count("--warmup"),
                count("--chains"),
            ));
            serde_json::to_string(&stats)
        } else {
            let postgres = value_of("--postgres");
            let (chain, in_process, memory_store) = match scenario.as_str() {
                "single" | "single-postgres" => (false, false, false),
                "chain" => (true, false, false),
                "single-in-process" => (false, true, false),
                "chain-in-process" => (true, true, false),
                "single-in-process-memory-db" => (false, true, true),
                "chain-in-process-memory-db" => (true, true, true),
                other => panic!("unknown scenario {other:?}"),
            };
            // `--warm N` (a diagnostic): N concurrent warm-up roots, e.g. 200 to open the HTTP
            // connections the measured run needs before it starts.
            let warm_up = value_of("--warm").map_or(4, |n| n.parse().expect("--warm N"));
            let stats = runtime().block_on(concurrent_roots(
                chain,
                in_process,
                memory_store,
                postgres.as_deref(),
                roots,
                warm_up,
                diagnose,
            ));
            serde_json::to_string(&stats)
        };
        // After the measurement: what is pending goes to the receiver (as `opc run` does at a
        // clean stop), and a pipeline that cannot deliver fails the run.
        if let Some(telemetry) = telemetry {
            telemetry
                .shutdown(Duration::from_secs(30))
                .expect("flush the telemetry to the receiver");
        }
        println!("{RESULT_PREFIX}{}", json.expect("serialise the result"));
        return;
    }
    let telemetry_only = args.iter().any(|a| a == "--telemetry");
    // `--only turns,single,chain`: which scenarios the telemetry comparison runs (all by default).
    let only = value_of("--only");
    let reps: usize = value_of("--reps")
        .map(|r| r.parse().expect("--reps N"))
        .unwrap_or(match (smoke, quick) {
            (true, _) => 1,
            (false, true) => 3,
            (false, false) => 5,
        });
    if telemetry_only {
        println!();
        print_banner(smoke, quick);
        let comparison = telemetry_section(reps, roots, warmup, chains, only.as_deref());
        println!();
        println!("4. Targets");
        print_targets_header();
        comparison.print_targets();
        println!();
        return;
    }

    println!();
    print_banner(smoke, quick);
    println!(
        "1. Per-turn overhead, 4-level chain, zero latency ({warmup} warm-up + {chains} measured \
         chains, sequential; per turn = chain time / {CHAIN_CALLS})"
    );
    let turns = runtime().block_on(async {
        vec![
            turn_overhead_engine_only(false, false, warmup, chains).await,
            turn_overhead_engine_only(true, false, warmup, chains).await,
            turn_overhead_http(false, warmup, chains).await,
            turn_overhead_http(true, warmup, chains).await,
        ]
    });
    for t in &turns {
        t.print();
    }
    if diagnose {
        runtime()
            .block_on(turn_overhead_engine_only(false, true, warmup, chains))
            .print();
    }

    println!();
    println!(
        "2. {roots} concurrent root tasks, {LATENCY_MS} ms scripted latency per call, \
         maxConcurrentAgents {MAX_CONCURRENT_AGENTS}, Anthropic wire, whole responses \
         (each scenario in a fresh process)"
    );
    let single = concurrent_in_child("single", roots, diagnose);
    single.print();
    let chain = concurrent_in_child("chain", roots, diagnose);
    chain.print();
    // The same single-turn roots with the store on PostgreSQL (issue 36's target: within 1.15× of
    // SQLite's wall / ideal, measured side by side in this run). A throw-away server, or the one
    // `OPC_TEST_POSTGRES_URL` names; a fresh database each run.
    let postgres = postgres_database();
    let on_postgres = postgres
        .as_ref()
        .map(|(url, _)| concurrent_in_child_on("single-postgres", roots, diagnose, Some(url)));
    match &on_postgres {
        Some(stats) => stats.print(),
        None => println!("  (no PostgreSQL server here: the PostgreSQL row is skipped)"),
    }
    if diagnose {
        println!();
        println!("   Diagnostics (--diagnose)");
        print_store_floor(roots);
        print_request_size();
        for scenario in [
            "single-in-process",
            "chain-in-process",
            "single-in-process-memory-db",
            "chain-in-process-memory-db",
        ] {
            concurrent_in_child(scenario, roots, diagnose).print();
        }
    }

    println!();
    let comparison = telemetry_section(reps, roots, warmup, chains, only.as_deref());

    println!();
    println!("4. Targets");
    print_targets_header();
    for t in &turns {
        println!(
            "  {:<66} {:>9.1} µs {:>7} µs  {}",
            format!("p99 per turn, {}", t.label),
            us(t.p99),
            TARGET_P99_US,
            verdict(us(t.p99) < TARGET_P99_US)
        );
    }
    for (s, target) in [(&single, TARGET_RATIO_SINGLE), (&chain, TARGET_RATIO_CHAIN)] {
        println!(
            "  {:<66} {:>11.3}× {:>9}×  {}",
            format!("wall / ideal, {}", s.label),
            s.ratio(),
            target,
            verdict(s.ratio() <= target)
        );
    }
    if let Some(pg) = &on_postgres {
        let relative = pg.ratio() / single.ratio();
        println!(
            "  {:<66} {:>11.3}× {:>9}×  {}",
            "PostgreSQL / SQLite, wall / ideal of single-turn roots",
            relative,
            TARGET_POSTGRES_VS_SQLITE,
            verdict(relative <= TARGET_POSTGRES_VS_SQLITE)
        );
    }
    println!(
        "  {:<66} {:>9.1} kB {:>7} kB  {}",
        "RSS per in-flight task, single turn (1 task per root)",
        single.kb_per_root(),
        TARGET_KB_PER_TASK,
        verdict(single.kb_per_root() < TARGET_KB_PER_TASK)
    );
    println!(
        "  {:<66} {:>9.1} kB {:>7} kB  {}",
        format!(
            "RSS per in-flight task, chain ({} tasks alive at most)",
            chain.max_live_tasks
        ),
        chain.kb_per_live_task(),
        TARGET_KB_PER_TASK,
        verdict(chain.kb_per_live_task() < TARGET_KB_PER_TASK)
    );
    println!(
        "  {:<66} {:>9.1} kB {:>10}  (4 tasks per root; the target is per task)",
        "RSS per in-flight root task, chain",
        chain.kb_per_root(),
        "",
    );
    comparison.print_targets();
    println!();
}

/// The run's title and setting.
fn print_banner(smoke: bool, quick: bool) {
    println!(
        "== opc agents-engine benchmark{} ==",
        if smoke {
            " (smoke run, not under `cargo bench`: numbers are not meaningful)"
        } else if quick {
            " (--quick)"
        } else {
            ""
        }
    );
    println!(
        "   {} CPUs, tokio multi-thread runtime with 2 workers, scripted server in a separate process",
        cpus()
    );
    println!();
}

fn print_targets_header() {
    println!(
        "  {:<66} {:>12} {:>10}  verdict",
        "measure", "value", "target"
    );
}

/// Section 3: telemetry off and on, alternating, each run in a fresh process.
fn telemetry_section(
    reps: usize,
    roots: usize,
    warmup: usize,
    chains: usize,
    only: Option<&str>,
) -> TelemetryComparison {
    println!(
        "3. Telemetry's overhead (issue 37): off / on / on with content capture, alternating \
         (off, on, content, off, …), each run a fresh process, {reps} run(s) of each; medians"
    );
    println!(
        "   on: opc_telemetry's settings from OTEL_EXPORTER_OTLP_ENDPOINT, install(), its layer on a \
         tracing_subscriber registry; OTLP/HTTP protobuf, default batching, to a receiver in this \
         parent process that decodes every export (its CPU is on the same {} CPUs); off: no \
         subscriber at all. Per turn: {warmup} warm-up + {chains} chains per run.",
        cpus()
    );
    let comparison = telemetry_comparison(reps, roots, warmup, chains, only);
    comparison.print();
    comparison
}
