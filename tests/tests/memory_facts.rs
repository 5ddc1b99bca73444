//! # Long-term facts end to end (issue 25's "Done when"), on the real `opc run`
//!
//! Role: drive the real `opc run` over its web chat, with the scripted LLM answering both the agents'
//! turns and the memory work (requests whose system prompt's first line is `OPC memory: extract` or
//! `OPC memory: consolidate`, answered from the script's memory queues), and read the facts back with
//! the real `opc memory facts` beside the running gateway. What is checked:
//! - "The launch is on May 3rd", then in another conversation "the launch moved to May 17th": the
//!   second extraction lists the first fact (one JSON object per line, with its id) and UPDATEs it;
//!   current facts show May 17th, `--at` a time between the two shows May 3rd, `--history` keeps both
//!   (the older closed), each with its own conversation; a third conversation's request carries the
//!   current fact (the Select step);
//! - the user's answer never waits for extraction (memory work answered 2 s late: the answer's event
//!   arrives before the memory request is answered);
//! - a `record_facts` answer that is malformed, or names an id that was not listed, changes nothing;
//! - two duplicate facts from two conversations are merged by consolidation (INVALIDATE "duplicate of
//!   <id>", source `consolidation`), and a conversation running while the consolidation call is held
//!   is answered meanwhile;
//! - an extraction interrupted by a stop runs at the next start;
//! - privacy composes: the extraction call sees masked text, the stored fact holds the real value;
//! - numbers for the closing note, printed (never asserted): memory-work calls and tokens per root
//!   task, and the answer latency with archival on and off (medians).
//!
//! Invariants: every wait has a deadline ([`WAIT`]); order and causality are asserted, never how fast
//! anything is; memory work is answered only when the test says so (queues), so no step races.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime};

use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, KEY_VAR, marker, provider_yaml};
use opc_tests::scripted_llm::{Fault, MemoryKind, RecordedRequest, Script, ScriptedLlm, Step};
use opc_tests::sse::Sse;
use opc_tests::wait::{WAIT, output_of, wait_for};
use opc_tests::web_chat;
use serde_json::{Value, json};

/// The CEO's answer to every message (the event each conversation waits for).
const ANSWER: &str = "NOTED.";
/// How late the scripted LLM answers memory work where the test checks that answers do not wait.
const MEMORY_DELAY_MS: u64 = 2_000;
const MAY_3: &str = "The launch is on May 3rd";
const MAY_17: &str = "The launch is on May 17th";
/// World times the script gives the two launch facts (`valid_from`).
const FROM_3: &str = "2026-01-01T00:00:00Z";
const FROM_17: &str = "2026-02-01T00:00:00Z";

/// An org on disk: the CEO alone, its provider the scripted LLM, the web chat on port 0.
struct Org {
    dir: tempfile::TempDir,
}

/// What differs between the orgs of these tests.
#[derive(Clone, Copy)]
struct Settings {
    /// `memory.archival` of the CEO.
    archival: bool,
    /// `consolidation.frequency` (completed root tasks per run).
    frequency: u32,
    /// The privacy gateway (pattern tier: `requireNer: false`).
    privacy: bool,
}

impl Settings {
    /// Archival on, consolidation too rare to run (its requests would wait on an empty queue, and
    /// the memory worker with them), privacy off.
    const FACTS: Settings = Settings {
        archival: true,
        frequency: 10_000,
        privacy: false,
    };
}

impl Org {
    fn write(llm: &ScriptedLlm, settings: Settings) -> Org {
        let dir = tempfile::tempdir().unwrap();
        let Settings {
            archival,
            frequency,
            privacy,
        } = settings;
        let providers = provider_yaml(&llm.url(), true);
        let yaml = format!(
            r#"
framework:
  name: Facts Org
{providers}
  privacy: {{ enabled: {privacy}, requireNer: false }}
  memory:
    consolidation: {{ enabled: true, frequency: {frequency}, idleAfter: 1h }}
agents:
  ceo:
    role: CEO
    prompt: "You run the company."
    tools: [escalate]
    memory: {{ recall: false, archival: {archival} }}
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#
        );
        std::fs::write(dir.path().join("opc.config.yaml"), yaml).unwrap();
        Org { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("opc.config.yaml")
    }

    fn database(&self) -> PathBuf {
        self.dir.path().join(".opc/opc.db")
    }

    fn run(&self) -> OpcRun {
        OpcRun::start(&self.config(), &[(KEY_VAR, KEY)])
    }

    /// `opc memory facts ceo ARGS --format json` beside the running gateway: the `facts` array.
    async fn facts(&self, args: &[&str]) -> Vec<Value> {
        let mut command = Command::new(opc_binary());
        command
            .args(["memory", "facts", "ceo"])
            .args(args)
            .args(["--format", "json", "--config"])
            .arg(self.config())
            .env("NO_COLOR", "1")
            .env("OPC_LOG", "warn")
            .env("OPC_MODELS_OFFLINE", "1");
        let out = output_of(command, WAIT).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "opc memory facts ceo {args:?}: {}\n{stderr}",
            out.status
        );
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "opc memory facts ceo {args:?} printed no JSON ({e}):\n{}\n{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        json["facts"]
            .as_array()
            .unwrap_or_else(|| panic!("no `facts` array in {json}"))
            .clone()
    }

    /// Poll `opc memory facts ceo ARGS` until `done` holds for the list (within [`WAIT`]).
    async fn facts_until(
        &self,
        args: &[&str],
        what: &str,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let facts = self.facts(args).await;
            if done(&facts) {
                return facts;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {WAIT:?} waiting for {what}; `opc memory facts ceo {args:?}` shows {facts:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The engine's conversation behind a web conversation (the gateway's thread map).
    fn conversation_of(&self, web: &str) -> String {
        let db = rusqlite::Connection::open_with_flags(
            self.database(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        db.query_row(
            "SELECT conversation FROM gateway_threads WHERE thread = ?1",
            [web],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("the engine conversation of web conversation {web}: {e}"))
    }

    /// Who closed a fact version (`closed_source`, which the JSON does not show), read-only.
    fn closed_source(&self, version: i64) -> Option<String> {
        let db = rusqlite::Connection::open_with_flags(
            self.database(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        db.query_row(
            "SELECT closed_source FROM memory_fact_versions WHERE id = ?1",
            [version],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("closed_source of fact version {version}: {e}"))
    }

    /// The ledger's memory work: (calls, tokens in, tokens out), and the task calls of root tasks'
    /// totals (read-only, beside the gateway).
    fn ledger(&self) -> Ledger {
        let db = rusqlite::Connection::open_with_flags(
            self.database(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let (memory_calls, tokens_in, tokens_out) = db
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(tokens_in), 0), COALESCE(SUM(tokens_out), 0) \
                 FROM llm_calls WHERE work = 'memory'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let (task_calls, roots, root_totals) = db
            .query_row(
                "SELECT (SELECT COUNT(*) FROM llm_calls WHERE work = 'task'), \
                        COUNT(*), COALESCE(SUM(llm_calls), 0) FROM tasks WHERE parent_id IS NULL",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        Ledger {
            memory_calls,
            tokens_in,
            tokens_out,
            task_calls,
            roots,
            root_totals,
        }
    }
}

/// What the ledger says about memory work.
#[derive(Debug)]
struct Ledger {
    memory_calls: i64,
    tokens_in: i64,
    tokens_out: i64,
    /// `llm_calls` rows of agents' turns.
    task_calls: i64,
    roots: i64,
    /// The root tasks' `llm_calls` totals, summed (memory work must not be in them).
    root_totals: i64,
}

impl Ledger {
    fn print(&self, what: &str) {
        let roots = self.roots.max(1) as f64;
        println!(
            "{what}: {} root tasks; memory work: {} LLM calls ({:.2} per root task), {} tokens in + {} out ({:.0} per root task)",
            self.roots,
            self.memory_calls,
            self.memory_calls as f64 / roots,
            self.tokens_in,
            self.tokens_out,
            (self.tokens_in + self.tokens_out) as f64 / roots,
        );
    }
}

/// One conversation's exchange, as the web chat saw it.
struct Said {
    /// The web conversation's id.
    id: String,
    /// When the CEO's answer event was read off the stream.
    answered: SystemTime,
    /// From sending the message to reading the answer.
    latency: Duration,
}

/// Open a web conversation, say `text`, and wait for the CEO's answer.
async fn converse(opc: &OpcRun, text: &str) -> Said {
    let (id, mut sse) = web_chat::open(opc).await;
    let sent = SystemTime::now();
    web_chat::say(opc, &id, text).await;
    sse.wait_for("message|edit", WAIT, |data| data["text"] == ANSWER)
        .await;
    let answered = sse.seen.last().unwrap().received_at;
    Said {
        id,
        answered,
        latency: answered.duration_since(sent).unwrap_or_default(),
    }
}

/// The `n`-th (1-based) memory request of `kind` (waits for it to arrive).
async fn memory_request(llm: &ScriptedLlm, kind: MemoryKind, n: usize) -> RecordedRequest {
    wait_for(WAIT, &format!("memory request {n} of {kind:?}"), || {
        llm.memory_requests(kind).into_iter().nth(n - 1)
    })
    .await
}

/// When the `n`-th memory request of `kind` was answered (waits for it).
async fn answered_at(llm: &ScriptedLlm, kind: MemoryKind, n: usize) -> SystemTime {
    wait_for(
        WAIT,
        &format!("memory request {n} of {kind:?} to be answered"),
        || {
            llm.memory_requests(kind)
                .get(n - 1)
                .and_then(|r| r.answered_at)
        },
    )
    .await
}

/// The facts a memory request lists: its lines that are JSON objects with an `id`.
fn listed(request: &RecordedRequest) -> Vec<Value> {
    request
        .json_lines()
        .into_iter()
        .filter(|line| line.get("id").is_some_and(Value::is_i64))
        .collect()
}

/// The checks every memory request of `kind` must pass (the issue's contract).
fn check_contract(request: &RecordedRequest, kind: MemoryKind) {
    assert_eq!(
        request.system.lines().next(),
        Some(kind.first_line()),
        "the system prompt's first line"
    );
    assert!(
        request.tool_names().iter().any(|t| t == "record_facts"),
        "record_facts is offered: {:?}",
        request.tool_names()
    );
    if kind == MemoryKind::Extract {
        assert_eq!(
            request.tool_names(),
            ["record_facts"],
            "extraction offers one tool"
        );
        assert_eq!(
            request.forced_tool().as_deref(),
            Some("record_facts"),
            "and forces it: {}",
            request.body["tool_choice"]
        );
    }
    // `consolidation.model` is unset: memory work runs on the fast model.
    assert_eq!(request.body["model"], "test-fast");
}

/// The one fact of a listing with this text.
fn one<'a>(facts: &'a [Value], text: &str) -> &'a Value {
    let found: Vec<&Value> = facts.iter().filter(|f| f["text"] == text).collect();
    assert_eq!(found.len(), 1, "one {text:?} in {facts:#?}");
    found[0]
}

/// An RFC 3339 time of the JSON as `SystemTime`.
fn time(value: &Value) -> SystemTime {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("a time, not {value}"));
    humantime::parse_rfc3339_weak(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// The admin console's event stream (the engine's events, named by kind).
async fn events(opc: &OpcRun) -> Sse {
    Sse::connect(&opc.url("/admin/api/events"), None).await
}

/// The CEO answers every message with [`ANSWER`]; memory work has its queues.
fn script(extract: Vec<Step>) -> Script {
    Script::new()
        .agent(marker("ceo"), vec![Step::text(ANSWER)])
        .memory(MemoryKind::Extract, extract)
        .memory(MemoryKind::Consolidate, vec![])
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_launch_date_is_versioned_in_time_selected_later_and_never_delays_the_answer() {
    // The first extraction is scripted up front, 2 s late: nothing the test does orders it after the
    // answer, so only the engine can (by not waiting for it).
    let first = Step::record_facts(json!([
        {"op": "ADD", "text": MAY_3, "subject": "launch", "valid_from": FROM_3}
    ]))
    .with_delay_ms(MEMORY_DELAY_MS);
    let llm = ScriptedLlm::start(script(vec![first])).await.unwrap();
    let org = Org::write(&llm, Settings::FACTS);
    let opc = org.run();
    let mut events = events(&opc).await;

    // Conversation 1: the answer arrives before the extraction is answered.
    let one_said = converse(&opc, "The launch is on May 3rd").await;
    let extract = memory_request(&llm, MemoryKind::Extract, 1).await;
    check_contract(&extract, MemoryKind::Extract);
    let asked = extract.user_texts().join("\n");
    assert!(
        asked.contains("The launch is on May 3rd") && asked.contains(ANSWER),
        "the exchange: {asked}"
    );
    assert!(listed(&extract).is_empty(), "no facts yet: {asked}");
    let memory_answered = answered_at(&llm, MemoryKind::Extract, 1).await;
    assert!(
        one_said.answered < memory_answered,
        "the user's answer waited for the extraction"
    );
    println!(
        "conversation 1: answered {:?} after the message; the extraction (answered {} ms late by the \
         scripted LLM) was answered {:?} after the user's answer",
        one_said.latency,
        MEMORY_DELAY_MS,
        memory_answered.duration_since(one_said.answered).unwrap(),
    );
    events
        .wait_for("facts_recorded", WAIT, |e| e["agent"] == "ceo")
        .await;
    let current = org
        .facts_until(&[], "the May 3rd fact", |f| f.len() == 1)
        .await;
    let v1 = one(&current, MAY_3).clone();
    assert_eq!(v1["subject"], "launch");
    assert_eq!(v1["source"], "agent");
    assert_eq!(v1["agent"], "ceo");
    assert_eq!(time(&v1["valid_from"]), time(&json!(FROM_3)));
    assert!(v1["invalidated_at"].is_null());
    assert!(v1["task"].is_i64(), "{v1}");
    let conversation_1 = org.conversation_of(&one_said.id);
    assert_eq!(
        v1["conversation"],
        json!(conversation_1),
        "its conversation"
    );

    // A time T between the two conversations, in whole seconds, after the first fact was recorded.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let t = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    assert!(time(&json!(t)) > time(&v1["recorded_at"]));
    tokio::time::sleep(Duration::from_millis(1_100)).await;

    // Conversation 2: the extraction lists the May 3rd fact, one JSON object per line, with its id.
    let two_said = converse(&opc, "The launch moved to May 17th").await;
    let extract = memory_request(&llm, MemoryKind::Extract, 2).await;
    check_contract(&extract, MemoryKind::Extract);
    let listing = listed(&extract);
    let old = listing
        .iter()
        .find(|f| f["id"] == v1["id"])
        .unwrap_or_else(|| panic!("the May 3rd fact (id {}) listed: {listing:#?}", v1["id"]));
    assert_eq!(old["text"], MAY_3);
    for key in ["id", "text", "subject", "valid_from"] {
        assert!(old.get(key).is_some(), "{key} in the listed {old}");
    }
    let line = extract
        .user_texts()
        .join("\n")
        .lines()
        .find(|l| l.contains(MAY_3))
        .unwrap()
        .to_string();
    assert_eq!(
        serde_json::from_str::<Value>(line.trim()).ok().as_ref(),
        Some(old),
        "the fact is a JSON object on a line of its own: {line:?}"
    );
    llm.push_memory(
        MemoryKind::Extract,
        Step::record_facts(json!([{
            "op": "UPDATE", "target": v1["id"], "text": MAY_17, "subject": "launch",
            "valid_from": FROM_17, "reason": "the launch moved"
        }]))
        .with_delay_ms(MEMORY_DELAY_MS),
    );
    let memory_answered = answered_at(&llm, MemoryKind::Extract, 2).await;
    assert!(two_said.answered < memory_answered);
    events
        .wait_for("facts_recorded", WAIT, |e| e["agent"] == "ceo")
        .await;

    // Current: May 17th, a new version of the same fact. `--at T`: May 3rd. History: both.
    let current = org
        .facts_until(&[], "the May 17th fact", |f| {
            f.iter().any(|v| v["text"] == MAY_17)
        })
        .await;
    assert_eq!(current.len(), 1, "{current:#?}");
    let v2 = one(&current, MAY_17).clone();
    assert_eq!(
        v2["fact_id"], v1["fact_id"],
        "an UPDATE versions the same fact"
    );
    assert_ne!(v2["id"], v1["id"]);
    assert_eq!(v2["source"], "agent");
    let conversation_2 = org.conversation_of(&two_said.id);
    assert_eq!(
        v2["conversation"],
        json!(conversation_2),
        "its conversation"
    );
    assert_ne!(conversation_1, conversation_2);

    let believed = org.facts(&["--at", &t]).await;
    assert_eq!(believed.len(), 1, "--at {t}: {believed:#?}");
    assert_eq!(believed[0]["text"], MAY_3);
    assert_eq!(believed[0]["id"], v1["id"]);

    let history = org.facts(&["--history"]).await;
    assert_eq!(history.len(), 2, "{history:#?}");
    let (old, new) = (one(&history, MAY_3), one(&history, MAY_17));
    assert!(
        old["invalidated_at"].is_string(),
        "the older is closed: {old}"
    );
    assert!(time(&old["invalidated_at"]) > time(&json!(t)));
    assert_eq!(
        time(&old["valid_to"]),
        time(&json!(FROM_17)),
        "UPDATE ends the old version's world time where the new one starts: {old}"
    );
    assert!(new["invalidated_at"].is_null(), "{new}");
    assert_eq!(old["conversation"], json!(conversation_1));
    assert_eq!(new["conversation"], json!(conversation_2));
    let valid = org.facts(&["--valid-at", "2026-03-01"]).await;
    assert_eq!(
        valid.iter().map(|f| f["text"].clone()).collect::<Vec<_>>(),
        [json!(MAY_17)]
    );

    // Conversation 3: the CEO's request carries the current fact, not the closed one.
    llm.push_memory(
        MemoryKind::Extract,
        Step::record_facts(json!([{"op": "NOOP"}])),
    );
    converse(&opc, "When is the launch?").await;
    let ceo: Vec<RecordedRequest> = llm
        .requests_for(&marker("ceo"))
        .into_iter()
        .filter(|r| r.body.to_string().contains("When is the launch?"))
        .collect();
    assert_eq!(ceo.len(), 1);
    let body = ceo[0].body.to_string();
    assert!(body.contains(MAY_17), "the Select step: {body}");
    assert!(
        !body.contains("May 3rd"),
        "the closed version stays out: {body}"
    );
    memory_request(&llm, MemoryKind::Extract, 3).await;
    answered_at(&llm, MemoryKind::Extract, 3).await;

    // Conversation 4: a batch naming an id that was not listed is dropped whole (its ADD too).
    let before = org.facts(&["--history"]).await;
    converse(&opc, "Also, the budget is 40k.").await;
    let extract = memory_request(&llm, MemoryKind::Extract, 4).await;
    assert!(
        listed(&extract)
            .iter()
            .all(|f| f["id"] != json!(987_654_321))
    );
    llm.push_memory(
        MemoryKind::Extract,
        Step::record_facts(json!([
            {"op": "ADD", "text": "The budget is 40k", "subject": "budget"},
            {"op": "UPDATE", "target": 987_654_321, "text": "The launch is cancelled"}
        ])),
    );
    let rejected = events
        .wait_for("facts_rejected", WAIT, |e| e["agent"] == "ceo")
        .await;
    println!("rejected (unlisted id): {rejected}");
    assert_eq!(org.facts(&["--history"]).await, before, "nothing changed");

    // Conversation 5: garbage that does not fit the schema changes nothing either.
    converse(&opc, "And the office moved to Lisbon.").await;
    memory_request(&llm, MemoryKind::Extract, 5).await;
    llm.push_memory(
        MemoryKind::Extract,
        Step::tool(
            "record_facts",
            json!({"facts": [{"op": "EXPLODE", "text": 42, "target": "the lot"}], "also": [1, 2]}),
        ),
    );
    let rejected = events
        .wait_for("facts_rejected", WAIT, |e| e["agent"] == "ceo")
        .await;
    println!("rejected (schema): {rejected}");
    assert_eq!(org.facts(&["--history"]).await, before, "nothing changed");

    // The ledger: memory work is recorded as such, one call per task, and not in the tasks' totals.
    let ledger = org.ledger();
    assert_eq!(ledger.roots, 5, "{ledger:?}");
    assert_eq!(
        ledger.memory_calls, 5,
        "one extraction call per task: {ledger:?}"
    );
    assert_eq!(ledger.task_calls, 5, "{ledger:?}");
    assert_eq!(
        ledger.root_totals, 5,
        "memory work is not in the tasks' totals: {ledger:?}"
    );
    ledger.print("versioned launch");
    // The console's Costs page shows memory work apart.
    let costs: Value = opc_tests::http_client()
        .get(opc.url("/admin/api/costs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let calls = |group: &str, key: &str| {
        costs["today"][group]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["key"] == key))
            .map(|r| r["calls"].clone())
    };
    assert_eq!(calls("by_work", "memory"), Some(json!(5)), "{costs:#}");
    assert_eq!(calls("by_work", "task"), Some(json!(5)), "{costs:#}");
    assert_eq!(calls("memory_by_agent", "ceo"), Some(json!(5)), "{costs:#}");
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidation_merges_duplicates_while_a_conversation_is_answered() {
    let llm = ScriptedLlm::start(script(vec![])).await.unwrap();
    let org = Org::write(
        &llm,
        Settings {
            frequency: 2,
            ..Settings::FACTS
        },
    );
    let opc = org.run();
    let mut events = events(&opc).await;

    // Two conversations, each recording what is the same fact in other words.
    let a_said = converse(&opc, "Our office is in Berlin.").await;
    memory_request(&llm, MemoryKind::Extract, 1).await;
    llm.push_memory(
        MemoryKind::Extract,
        Step::record_facts(json!([
            {"op": "ADD", "text": "The office is in Berlin", "subject": "office"}
        ])),
    );
    events
        .wait_for("facts_recorded", WAIT, |e| e["agent"] == "ceo")
        .await;
    let b_said = converse(&opc, "Remember: the office is located in Berlin.").await;
    let extract = memory_request(&llm, MemoryKind::Extract, 2).await;
    assert_eq!(listed(&extract).len(), 1, "the first is listed");
    llm.push_memory(
        MemoryKind::Extract,
        Step::record_facts(json!([
            {"op": "ADD", "text": "Our office is located in Berlin", "subject": "office"}
        ])),
    );
    events
        .wait_for("facts_recorded", WAIT, |e| e["agent"] == "ceo")
        .await;
    let current = org.facts_until(&[], "both facts", |f| f.len() == 2).await;
    let a = one(&current, "The office is in Berlin").clone();
    let b = one(&current, "Our office is located in Berlin").clone();

    // Two completed roots: consolidation runs, listing both. The scripted LLM holds its answer.
    let consolidate = memory_request(&llm, MemoryKind::Consolidate, 1).await;
    check_contract(&consolidate, MemoryKind::Consolidate);
    let listing = listed(&consolidate);
    for fact in [&a, &b] {
        assert!(
            listing.iter().any(|f| f["id"] == fact["id"]),
            "{} listed in {listing:#?}",
            fact["id"]
        );
    }

    // A conversation while the consolidation call is in flight: answered meanwhile.
    let c_said = converse(&opc, "What is on the agenda today?").await;
    assert!(
        llm.memory_requests(MemoryKind::Consolidate)[0]
            .answered_at
            .is_none(),
        "the conversation was answered while consolidation was still held"
    );
    println!(
        "answer latency: {:?} and {:?} with no memory work in flight, {:?} during consolidation",
        a_said.latency, b_said.latency, c_said.latency
    );

    // The merge: the duplicate is closed as such, and the fact kept is reworded from both (a new
    // version of the same fact). Both are versioned edits of the consolidation run.
    let reason = format!("duplicate of {}", a["id"]);
    const MERGED: &str = "The office is in Berlin, Germany";
    llm.push_memory(
        MemoryKind::Consolidate,
        Step::record_facts(json!([
            {"op": "INVALIDATE", "target": b["id"], "reason": reason},
            {"op": "UPDATE", "target": a["id"], "text": MERGED, "subject": "office",
             "reason": format!("merged with {}", b["id"])}
        ])),
    );
    // A run may take more than one turn: the next one ends it.
    llm.push_memory(MemoryKind::Consolidate, Step::text("Memory is tidy."));
    let consolidated = events
        .wait_for("consolidated", WAIT, |e| e["agent"] == "ceo")
        .await;
    println!("consolidated: {consolidated}");
    assert_eq!(
        (&consolidated["invalidated"], &consolidated["updated"]),
        (&json!(1), &json!(1)),
        "{consolidated}"
    );
    let current = org
        .facts_until(&[], "the duplicates merged", |f| {
            f.len() == 1 && f[0]["text"] == MERGED
        })
        .await;
    assert_eq!(current[0]["fact_id"], a["fact_id"]);
    assert_eq!(current[0]["source"], "consolidation", "{}", current[0]);
    let history = org.facts(&["--history"]).await;
    // The duplicate (closed) and the record of its closing, the kept fact's old and new versions.
    assert_eq!(history.len(), 4, "{history:#?}");
    let duplicate: Vec<&Value> = history
        .iter()
        .filter(|v| v["text"] == "Our office is located in Berlin")
        .collect();
    assert_eq!(duplicate.len(), 2, "{history:#?}");
    let (closed, closing) = (duplicate[0], duplicate[1]);
    assert!(closed["invalidated_at"].is_string(), "{closed}");
    assert_eq!(closed["reason"], json!(reason));
    assert_eq!(closed["source"], "agent", "{closed}");
    // The INVALIDATE is a version of its own, whose source is consolidation, never current.
    assert_eq!(closing["source"], "consolidation", "{closing}");
    assert_eq!(closing["reason"], json!(reason));
    assert_eq!(closing["fact_id"], closed["fact_id"]);
    assert_eq!(
        closing["recorded_at"], closing["invalidated_at"],
        "{closing}"
    );
    assert!(one(&history, "The office is in Berlin")["invalidated_at"].is_string());
    assert_eq!(
        org.closed_source(closed["id"].as_i64().unwrap()).as_deref(),
        Some("consolidation")
    );

    // The third conversation's extraction (queued behind or beside consolidation) gets a NOOP.
    memory_request(&llm, MemoryKind::Extract, 3).await;
    llm.push_memory(
        MemoryKind::Extract,
        Step::record_facts(json!([{"op": "NOOP"}])),
    );
    answered_at(&llm, MemoryKind::Extract, 3).await;
    // Three extractions and the run's two turns, once the last call's row is written.
    let ledger = wait_for(WAIT, "five memory calls in the ledger", || {
        Some(org.ledger()).filter(|l| l.memory_calls == 5)
    })
    .await;
    assert_eq!(ledger.root_totals, ledger.task_calls, "{ledger:?}");
    ledger.print("consolidation");
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extraction_interrupted_by_a_stop_runs_at_the_next_start() {
    // The first extraction call never gets an answer; the one after the restart does.
    let steps = vec![
        Step::fault(Fault::Hang),
        Step::record_facts(json!([{"op": "ADD", "text": MAY_3, "subject": "launch"}])),
    ];
    let llm = ScriptedLlm::start(script(steps)).await.unwrap();
    let org = Org::write(&llm, Settings::FACTS);
    let opc = org.run();
    let said = converse(&opc, "The launch is on May 3rd").await;
    memory_request(&llm, MemoryKind::Extract, 1).await;
    assert!(org.facts(&[]).await.is_empty());
    // SIGTERM while the extraction call is in flight: a clean exit, the job left queued.
    assert_eq!(
        opc.stop().0,
        Some(0),
        "a clean stop with memory work in flight"
    );

    let opc = org.run();
    memory_request(&llm, MemoryKind::Extract, 2).await;
    let current = org.facts_until(&[], "the fact", |f| f.len() == 1).await;
    assert_eq!(current[0]["text"], MAY_3);
    assert_eq!(
        current[0]["conversation"],
        json!(org.conversation_of(&said.id))
    );
    assert_eq!(llm.memory_requests(MemoryKind::Extract).len(), 2);
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_are_extracted_from_masked_text_and_stored_restored() {
    const EMAIL: &str = "jane.roe@example.org";
    let llm = ScriptedLlm::start(script(vec![])).await.unwrap();
    let org = Org::write(
        &llm,
        Settings {
            privacy: true,
            ..Settings::FACTS
        },
    );
    let opc = org.run();
    converse(&opc, &format!("The billing contact is {EMAIL}.")).await;
    let extract = memory_request(&llm, MemoryKind::Extract, 1).await;
    let body = extract.body.to_string();
    assert!(
        !body.contains(EMAIL),
        "the real email reached the provider: {body}"
    );
    // The model states the fact with the stand-in it was shown.
    let asked = extract.user_texts().join("\n");
    let stand_in = asked
        .split("The billing contact is ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|s| s.trim_end_matches('.').to_string())
        .unwrap_or_else(|| panic!("the exchange in {asked}"));
    assert_ne!(stand_in, EMAIL);
    llm.push_memory(
        MemoryKind::Extract,
        Step::record_facts(json!([
            {"op": "ADD", "text": format!("The billing contact is {stand_in}"), "subject": "billing"}
        ])),
    );
    let current = org.facts_until(&[], "the fact", |f| f.len() == 1).await;
    assert_eq!(
        current[0]["text"],
        format!("The billing contact is {EMAIL}"),
        "stored restored (locally, like recall)"
    );
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_work_adds_no_latency_to_the_answer() {
    // The same conversations on two gateways, archival on and off, in alternating blocks of `runs`
    // back-to-back conversations. In a steady "on" block each extraction (answered at once) runs
    // while the next conversation is answered, as under steady traffic; in a drained "on" block each
    // extraction ends before the next message; before an "off" block the "on" gateway's memory work
    // has drained, so it never overlaps the other's conversations.
    // `OPC_FACTS_LATENCY_RUNS` sets the block size (default 5) for the closing note's numbers.
    const ROUNDS: usize = 2;
    let runs: usize = std::env::var("OPC_FACTS_LATENCY_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let text = |n: usize| format!("Sprint {n} ships feature {n}, please note it.");
    // One warm-up conversation per gateway, then the measured ones: one extraction each on "on".
    // Per round: a steady "on" block, an "on" block where each extraction finishes before the next
    // message (what is left is the answer path's own cost), and an "off" block.
    let conversations = 1 + ROUNDS * 2 * runs;
    let extract = (0..conversations)
        .map(|n| {
            Step::record_facts(json!([
                {"op": "ADD", "text": format!("Sprint {n} ships feature {n}"), "subject": format!("sprint {n}")}
            ]))
        })
        .collect();
    let llm = ScriptedLlm::start(script(extract)).await.unwrap();
    let on = Org::write(&llm, Settings::FACTS);
    let off = Org::write(
        &llm,
        Settings {
            archival: false,
            ..Settings::FACTS
        },
    );
    let (opc_on, opc_off) = (on.run(), off.run());
    converse(&opc_off, &text(0)).await;
    converse(&opc_on, &text(0)).await;
    let (mut steady, mut drained, mut without) = (Vec::new(), Vec::new(), Vec::new());
    let mut n = 1;
    for _ in 0..ROUNDS {
        for _ in 0..runs {
            steady.push(converse(&opc_on, &text(n)).await.latency);
            n += 1;
        }
        on.facts_until(&[], "the block's memory work to drain", |f| f.len() == n)
            .await;
        for _ in 0..runs {
            drained.push(converse(&opc_on, &text(n)).await.latency);
            n += 1;
            on.facts_until(&[], "the extraction", |f| f.len() == n)
                .await;
        }
        for i in 0..runs {
            without.push(converse(&opc_off, &text(n - runs + i)).await.latency);
        }
    }
    assert_eq!(on.facts(&[]).await.len(), conversations);
    assert!(off.facts(&[]).await.is_empty());
    assert_eq!(
        llm.memory_requests(MemoryKind::Extract).len(),
        conversations
    );
    let samples = without.len();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (steady, drained, without) = (median(steady), median(drained), median(without));
    println!(
        "answer latency, medians of {samples}: archival off {:.1} ms; on, memory work overlapping the \
         next conversation {:.1} ms ({:+.1}); on, each extraction done before the next message {:.1} ms ({:+.1})",
        ms(without),
        ms(steady),
        ms(steady) - ms(without),
        ms(drained),
        ms(drained) - ms(without),
    );
    on.ledger().print("latency run, archival on");
    assert_eq!(opc_on.stop().0, Some(0));
    assert_eq!(opc_off.stop().0, Some(0));
}
