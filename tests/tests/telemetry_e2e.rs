//! Issue 37, end to end: OpenTelemetry traces and metrics from the real `opc run`, over OTLP/HTTP
//! to a small receiver on 127.0.0.1 ([`opc_tests::otlp`]), with the example config's privacy and
//! sandbox settings (privacy on, the real NER model, the sandbox enforced).
//!
//! The org is ceo → vp → worker. A web chat message carrying a W3C `traceparent` header and a
//! person's name and e-mail goes to the CEO; the scripted LLM makes the CEO delegate to the VP, the
//! VP to the worker, the worker run `ls` in Bash, and each answer go back up. The CEO and the VP
//! have recall memory on (as the example's CEO and VPs do), so each of their runs searches recall
//! once before its first turn; the worker has it off, and no agent has archival memory, so the
//! flow makes no other memory operation.
//!
//! What it proves, against the contract of the issue:
//! - every span of the flow, with its name, kind and key attributes: `opc.inbound web`,
//!   `invoke_agent {id}` for the three agents, `chat test-model` with provider, models, usage and
//!   finish reasons, `opc.privacy` with its counts, `execute_tool delegate` in the CEO and the VP,
//!   `execute_tool Bash` in the worker, `search_memory recall` in the CEO and the VP;
//! - the tree, as one trace joined to the caller's: `opc.inbound web` is the child of the
//!   `traceparent`'s span, in its trace; each agent's `invoke_agent` is under the inbound span (the
//!   root) or under its parent's `execute_tool delegate`, which is under the parent's `invoke_agent`;
//!   `chat` and memory spans are under their agent's `invoke_agent`, `opc.privacy` under `chat`;
//! - the metrics the flow produces (token usage, operation duration, requests, slots, store
//!   commits, sandbox runs);
//! - no byte received holds the name or the e-mail, while the scripted LLM's requests show they
//!   were personal data the gateway masked; with content capture on (and OTLP JSON), the chat spans
//!   carry the masked text, exactly what the model saw, and still no real value;
//! - a collector that is down (a closed port) or refusing (503) neither stops nor delays the
//!   answer, and costs one warning line on stderr however many exports fail;
//! - a clean stop (SIGTERM) flushes the spans and metrics still pending before the process exits.
//!
//! Needs the NER model (the example's `requireNer` holds calls until it loads): skipped with one line
//! where the cache lacks it, a failure under CI (`opc_testgate`). The org dir is private (0700), as
//! in the other tests whose agents run Bash in the real sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use opc_tests::example;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{KEY, KEY_VAR, marker, relay};
use opc_tests::otlp::{Mode, OtlpReceiver, ReceivedSpan, Signal, SpanKind, span_names};
use opc_tests::sandbox::private_dir;
use opc_tests::scripted_llm::{
    INPUT_PLACEHOLDER, RecordedRequest, Script, ScriptedLlm, Step, bash_call, step_results,
};
use opc_tests::sse::Sse;
use opc_tests::wait::{WAIT, WAIT_LONG, wait_until, within};
use opc_tests::web_chat;
use serde_json::{Value, json};

/// The user's request: a person's name and e-mail, which must never leave the process as written.
const REQUEST: &str = "Please list the files in the workspace, then ask Priya Raman <priya.raman@example.com> to review them.";
/// Parts of the personal data in [`REQUEST`].
const PERSONAL: [&str; 4] = ["Priya", "Raman", "priya.raman", "priya.raman@example.com"];
/// The worker's answer, and as the VP and the CEO relay it.
const WORKER_ANSWER: &str = "WORKER: the workspace is listed; the review is asked for.";
const ANSWER: &str = "CEO: VP: WORKER: the workspace is listed; the review is asked for.";

/// The caller's trace: the web request's `traceparent` names this trace and span.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The token counts every scripted reply reports, so the spans' usage can be checked exactly.
const INPUT_TOKENS: u64 = 321;
const OUTPUT_TOKENS: u64 = 17;

/// The model every agent uses (the default model of the org at the scripted server).
const MODEL: &str = "test-model";

/// Export intervals short enough that a test sees its data soon (the SDK's defaults are 5 s and
/// 60 s).
const SHORT_INTERVAL: &str = "200";

/// The deadline of the whole flow through the org.
const FLOW: Duration = Duration::from_secs(240);

/// The three agents, parent first: id, role, depth.
const AGENTS: [(&str, &str, i64); 3] = [
    ("ceo", "CEO", 0),
    ("vp", "VP Engineering", 1),
    ("worker", "Backend Developer", 2),
];

/// The metrics the flow must produce. `opc.sandbox.runs` because the worker runs Bash.
const METRICS: [&str; 6] = [
    "gen_ai.client.token.usage",
    "gen_ai.client.operation.duration",
    "opc.requests",
    "opc.agent.slots.in_use",
    "opc.store.commit.duration",
    "opc.sandbox.runs",
];

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{CALLER_SPAN}-01")
}

/// The example config's `framework.privacy` and `framework.sandbox`, checked for what this test is
/// about: if the example changes these, the test must be looked at again.
fn example_settings() -> (Value, Value) {
    let (privacy, sandbox) = example::settings();
    assert_eq!(privacy["enabled"], true, "{privacy}");
    assert_eq!(privacy["mode"], "mask", "{privacy}");
    (privacy, sandbox)
}

/// Every step with the fixed token counts.
fn counted(steps: Vec<Step>) -> Vec<Step> {
    steps
        .into_iter()
        .map(|s| s.with_usage(INPUT_TOKENS, OUTPUT_TOKENS))
        .collect()
}

/// ceo → vp → worker: each manager passes its task on and relays the answer; the worker runs `ls`.
fn script() -> Script {
    Script::new()
        .agent(
            marker("worker"),
            counted(vec![
                Step::tools([bash_call("ls")]),
                Step::text(WORKER_ANSWER),
            ]),
        )
        .agent(
            marker("vp"),
            counted(relay("worker", INPUT_PLACEHOLDER, "VP: ")),
        )
        .agent(
            marker("ceo"),
            counted(relay("vp", INPUT_PLACEHOLDER, "CEO: ")),
        )
}

/// The org on disk (config, database, workspaces) in a private dir.
struct Org {
    dir: tempfile::TempDir,
}

impl Org {
    fn write(llm: &ScriptedLlm) -> Org {
        let (privacy, sandbox) = example_settings();
        let org = Org { dir: private_dir() };
        let head = example::framework_yaml("Telemetry Org", &llm.url(), &privacy, &sandbox);
        let yaml = format!(
            r#"{head}  ceo:
    role: CEO
    level: 0
    tools: [delegate]
    children: [vp]
  vp:
    role: VP Engineering
    level: 1
    parent: ceo
    tools: [delegate, escalate]
    children: [worker]
  worker:
    role: Backend Developer
    level: 2
    parent: vp
    tools: [Bash, escalate]
    memory: {{ recall: false }}
    bash: {{ allow: ["ls"] }}
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#
        );
        std::fs::write(org.config(), yaml).unwrap();
        org
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("opc.config.yaml")
    }
}

/// One `opc run` of the org, exporting to `endpoint`, with the NER model loaded.
struct Run {
    llm: ScriptedLlm,
    opc: OpcRun,
    _org: Org,
}

impl Run {
    /// Start, with `env` on top of the test key, the models and the endpoint; `None` (the test
    /// skipped) without the NER model.
    async fn start(test: &str, endpoint: &str, env: &[(&str, &str)]) -> Option<Run> {
        let models = example::models_root(test)?;
        let llm = ScriptedLlm::start(script()).await.unwrap();
        let org = Org::write(&llm);
        let mut all = vec![
            (KEY_VAR, KEY),
            ("OPC_MODELS", models.to_str().unwrap()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_SERVICE_NAME", "opc-e2e"),
        ];
        all.extend_from_slice(env);
        let opc = OpcRun::start(&org.config(), &all);
        // The model loads after the ready line; the example's `nerWait` is what a call waits for
        // it, and this test is not about that wait, so it starts once the model is in.
        within(WAIT_LONG, "the NER model to load (/healthz)", async {
            loop {
                match opc.health().await["privacy"].as_str().unwrap_or_default() {
                    "ready" => break,
                    "failed" => panic!("the NER model failed to load; stderr:\n{}", opc.stderr()),
                    _ => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
        .await;
        Some(Run {
            llm,
            opc,
            _org: org,
        })
    }

    /// Send [`REQUEST`] in a new web conversation, with the caller's `traceparent`, and wait for
    /// the final answer, which must be [`ANSWER`].
    async fn converse(&self) {
        let (conversation, mut sse) = web_chat::open(&self.opc).await;
        let url = self
            .opc
            .url(&format!("/api/conversations/{conversation}/messages"));
        let response = opc_tests::http_client()
            .post(&url)
            .header("traceparent", traceparent())
            .json(&json!({ "text": REQUEST }))
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        assert_eq!(response.status(), 202, "sending the message");
        let text = final_text(&mut sse).await;
        assert_eq!(
            text,
            ANSWER,
            "the worker's answer, relayed; {} LLM calls; opc stderr:\n{}",
            self.llm.requests().len(),
            self.opc.stderr()
        );
        self.check_llm_saw_masked_data();
    }

    /// The requests the scripted LLM received: the scripted number, `ls` ran, and the personal
    /// data reached none of them as written — while the CEO's first request still carries an
    /// e-mail address (the gateway's substitute), so the test's data was personal data that the
    /// gateway masked, not text it let through or dropped.
    fn check_llm_saw_masked_data(&self) {
        let requests = self.llm.requests();
        for (agent, _, _) in AGENTS {
            assert_eq!(
                self.llm.requests_for(&marker(agent)).len(),
                2,
                "two LLM calls by {agent}"
            );
        }
        assert_eq!(requests.len(), 6, "no other LLM call");
        let ls = &step_results(&self.llm.requests_for(&marker("worker")), 0)[0];
        assert!(!ls.1, "`ls` failed in the sandbox: {}", ls.0);
        for request in &requests {
            let body = request.body.to_string();
            for real in PERSONAL {
                assert!(
                    !body.contains(real),
                    "{real:?} reached the LLM (agent {:?}): {body}",
                    request.agent_marker
                );
            }
        }
        let first = self.ceo_first_request();
        assert!(
            fake_email(&first).is_some(),
            "the CEO's request carries the e-mail's substitute: {}",
            first.session
        );
    }

    fn ceo_first_request(&self) -> RecordedRequest {
        self.llm.requests_for(&marker("ceo"))[0].clone()
    }
}

/// The e-mail address in the task as the model saw it (the gateway's substitute for the real one).
fn fake_email(request: &RecordedRequest) -> Option<String> {
    request
        .session
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .find(|w| w.contains('@'))
        .map(str::to_string)
}

/// The final message in the thread: the answer, or what went wrong (streamed edits before it end
/// with a typing marker).
async fn final_text(sse: &mut Sse) -> String {
    let last = sse
        .wait_for("message|edit", FLOW, |data| {
            data["text"].as_str().is_some_and(|t| {
                !t.ends_with('…')
                    && (t.starts_with("CEO: ") || t.starts_with("**This request failed.**"))
            })
        })
        .await;
    last["text"].as_str().unwrap().to_string()
}

/// The spans of the flow, found by name under their parents, all checked for shape and tree.
struct Tree {
    /// Per agent (parent first): its `invoke_agent`, its chats in start order.
    agents: Vec<(ReceivedSpan, Vec<ReceivedSpan>)>,
    /// Each chat's `opc.privacy`, keyed by the chat's span id.
    privacy: BTreeMap<String, ReceivedSpan>,
}

/// What differs from the contract, gathered over a whole tree and reported at once: one run of
/// the flow takes minutes, and the instrumentation's author needs every difference, not the
/// first.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn note(&mut self, finding: String) {
        self.0.push(finding);
    }

    fn check(&mut self, holds: bool, finding: impl FnOnce() -> String) {
        if !holds {
            self.note(finding());
        }
    }

    /// `key` of `span` is `value`.
    fn has(&mut self, span: &ReceivedSpan, key: &str, value: Value) {
        let got = span.attr(key);
        self.check(got == Some(&value), || {
            format!(
                "{:?}: {key} should be {value}, is {}",
                span.name,
                got.map_or("missing".to_string(), Value::to_string)
            )
        });
    }

    /// `span` has no `key`.
    fn lacks(&mut self, span: &ReceivedSpan, key: &str) {
        let got = span.attr(key);
        self.check(got.is_none(), || {
            format!("{:?}: should have no {key}, has {got:?}", span.name)
        });
    }

    /// `key` of `span` is a non-empty string.
    fn has_text(&mut self, span: &ReceivedSpan, key: &str) {
        let got = span.attr(key);
        self.check(
            got.and_then(Value::as_str).is_some_and(|v| !v.is_empty()),
            || {
                format!(
                    "{:?}: {key} should be a non-empty string, is {got:?}",
                    span.name
                )
            },
        );
    }

    /// The one span named `name` under `parent` (anywhere when `None`). When the tree is wrong
    /// but exactly one span has that name, that is noted and the span returned, so the checks
    /// under it still run.
    fn only(
        &mut self,
        spans: &[ReceivedSpan],
        name: &str,
        parent: Option<&ReceivedSpan>,
    ) -> Option<ReceivedSpan> {
        let under: Vec<&ReceivedSpan> = spans
            .iter()
            .filter(|s| s.name == name && parent.is_none_or(|p| s.is_child_of(p)))
            .collect();
        if let [one] = under.as_slice() {
            return Some((*one).clone());
        }
        let named: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
        let place = parent.map_or(String::new(), |p| {
            format!(" under {:?} ({})", p.name, p.span_id)
        });
        self.note(format!(
            "exactly one {name:?} span{place} expected, found {} there and {} in all",
            under.len(),
            named.len()
        ));
        match named.as_slice() {
            [one] => Some((*one).clone()),
            _ => None,
        }
    }

    /// Panic listing every finding, with the spans received, if there is any.
    fn report(self, spans: &[ReceivedSpan]) {
        if self.0.is_empty() {
            return;
        }
        let mut text = format!("{} differences from the contract:\n", self.0.len());
        for (i, finding) in self.0.iter().enumerate() {
            text.push_str(&format!("{:>3}. {finding}\n", i + 1));
        }
        for span in spans {
            text.push_str(&format!("\n{} {:?}", span.name, span.attributes));
        }
        panic!("{text}\n\n{}", span_names(spans));
    }
}

/// The spans named `name` that are children of `parent`, in start order.
fn children(spans: &[ReceivedSpan], name: &str, parent: &ReceivedSpan) -> Vec<ReceivedSpan> {
    let mut found: Vec<ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name == name && s.is_child_of(parent))
        .cloned()
        .collect();
    found.sort_by_key(|s| s.start_ns);
    found
}

/// Wait until the whole tree has been exported, then check every span's shape and place, and
/// panic listing every difference from the contract.
async fn tree(receiver: &OtlpReceiver) -> Tree {
    // Children end before their parents, so they are exported no later than the root; a batch may
    // still split them from it, so wait for every span of the tree to be in. The inbound span is
    // awaited last and only briefly when the rest is in: its absence is a finding like any other.
    let expected = [
        ("invoke_agent ceo", 1),
        ("invoke_agent vp", 1),
        ("invoke_agent worker", 1),
        ("execute_tool delegate", 2),
        ("execute_tool Bash", 1),
        ("chat test-model", 6),
    ];
    for (name, count) in expected {
        wait_until(WAIT, &format!("{count} {name:?} spans"), || {
            receiver.spans().iter().filter(|s| s.name == name).count() >= count
        })
        .await;
    }
    let inbound_in = |receiver: &OtlpReceiver| {
        receiver
            .spans()
            .iter()
            .any(|s| s.name.starts_with("opc.inbound"))
    };
    let waited = tokio::time::timeout(WAIT, async {
        while !inbound_in(receiver) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let spans = receiver.spans();
    let mut findings = Findings::default();
    findings.check(waited.is_ok(), || {
        format!("no opc.inbound span within {WAIT:?} of the rest of the tree")
    });
    findings.check(receiver.errors().is_empty(), || {
        format!("the receiver could not read: {:?}", receiver.errors())
    });

    // The engine's conversation, as the root agent's span names it: every span of the flow that
    // names a conversation names this one (the web chat's own id for the thread is another).
    let conversation = spans
        .iter()
        .find(|s| s.name == "invoke_agent ceo")
        .and_then(|s| s.str_attr("gen_ai.conversation.id"))
        .unwrap_or_default()
        .to_string();
    findings.check(!conversation.is_empty(), || {
        "invoke_agent ceo: gen_ai.conversation.id should be a non-empty string".to_string()
    });

    // The inbound message: the caller's child, in the caller's trace.
    let inbound = findings.only(&spans, "opc.inbound web", None);
    if let Some(inbound) = &inbound {
        findings.check(inbound.trace_id == TRACE_ID, || {
            format!(
                "opc.inbound web is in trace {}, not the traceparent's {TRACE_ID}",
                inbound.trace_id
            )
        });
        findings.check(
            inbound.parent_span_id.as_deref() == Some(CALLER_SPAN),
            || {
                format!(
                    "opc.inbound web's parent is {:?}, not the traceparent's span {CALLER_SPAN}",
                    inbound.parent_span_id
                )
            },
        );
        findings.check(inbound.kind == SpanKind::Server, || {
            format!("opc.inbound web is {:?}, not Server", inbound.kind)
        });
        findings.has(inbound, "opc.platform", json!("web"));
        findings.has(inbound, "gen_ai.conversation.id", json!(conversation));
        findings.check(
            inbound.resource.get("service.name") == Some(&json!("opc-e2e")),
            || format!("service.name of the resource: {:?}", inbound.resource),
        );
    }

    let mut agents = Vec::new();
    let mut privacy = BTreeMap::new();
    let mut parent = inbound;
    for (id, role, depth) in AGENTS {
        let name = format!("invoke_agent {id}");
        let Some(agent) = findings.only(&spans, &name, parent.as_ref()) else {
            break;
        };
        findings.check(agent.kind == SpanKind::Internal, || {
            format!("{name} is {:?}, not Internal", agent.kind)
        });
        findings.has(&agent, "gen_ai.operation.name", json!("invoke_agent"));
        findings.has(&agent, "gen_ai.agent.name", json!(id));
        findings.has(&agent, "gen_ai.agent.id", json!(id));
        findings.has(&agent, "opc.agent.role", json!(role));
        findings.has(&agent, "gen_ai.conversation.id", json!(conversation));
        findings.has(&agent, "opc.task.depth", json!(depth));
        findings.has(&agent, "opc.task.outcome", json!("completed"));
        findings.lacks(&agent, "error.type");
        let task = agent.int_attr("opc.task.id");
        findings.check(task.is_some(), || {
            format!(
                "{name}: opc.task.id should be an integer: {:?}",
                agent.attributes
            )
        });

        // Its model calls: two each (a tool call, then the answer), under it.
        let chats = children(&spans, &format!("chat {MODEL}"), &agent);
        findings.check(chats.len() == 2, || {
            format!("two chat spans under {name}, found {}", chats.len())
        });
        for chat in &chats {
            findings.check(chat.kind == SpanKind::Client, || {
                format!("{id}'s {} is {:?}, not Client", chat.name, chat.kind)
            });
            findings.has(chat, "gen_ai.operation.name", json!("chat"));
            findings.has(chat, "gen_ai.provider.name", json!("anthropic"));
            findings.has(chat, "gen_ai.request.model", json!(MODEL));
            findings.has_text(chat, "gen_ai.response.model");
            findings.has(chat, "gen_ai.usage.input_tokens", json!(INPUT_TOKENS));
            findings.has(chat, "gen_ai.usage.output_tokens", json!(OUTPUT_TOKENS));
            let reasons = chat.attr("gen_ai.response.finish_reasons");
            findings.check(
                reasons
                    .and_then(Value::as_array)
                    .is_some_and(|r| !r.is_empty() && r.iter().all(Value::is_string)),
                || format!("{id}'s chat: gen_ai.response.finish_reasons should be a non-empty string array, is {reasons:?}"),
            );
            findings.has(chat, "opc.agent", json!(id));
            findings.has(chat, "gen_ai.conversation.id", json!(conversation));
            if let Some(task) = task {
                findings.has(chat, "opc.task.id", json!(task));
            }
            findings.lacks(chat, "error.type");

            // The privacy gateway's work on this call, under it: counts only.
            let Some(shield) = findings.only(&spans, "opc.privacy", Some(chat)) else {
                continue;
            };
            findings.has(&shield, "opc.privacy.ner_ready", json!(true));
            let masked = shield.int_attr("opc.privacy.masked");
            let per_type: Option<i64> = shield
                .attributes
                .iter()
                .filter(|(k, _)| k.starts_with("opc.privacy.masked."))
                .map(|(_, v)| v.as_i64())
                .sum();
            findings.check(masked.is_some() && masked == per_type, || {
                format!(
                    "{id}'s opc.privacy: opc.privacy.masked should be an integer, the sum of the integers by type: {:?}",
                    shield.attributes
                )
            });
            privacy.insert(chat.span_id.clone(), shield);
        }

        // Recall, for the agents that have it (the CEO and the VP), before the first turn.
        let recalls = children(&spans, "search_memory recall", &agent);
        if id != "worker" {
            if let Some(recall) = findings.only(&spans, "search_memory recall", Some(&agent)) {
                findings.has(&recall, "gen_ai.operation.name", json!("search_memory"));
                findings.has(&recall, "opc.memory.store", json!("recall"));
                findings.check(
                    chats.first().is_none_or(|c| recall.start_ns <= c.start_ns),
                    || format!("{id}'s recall should start before its first model call"),
                );
            }
        } else {
            findings.check(recalls.is_empty(), || {
                "the worker has no recall, yet has a search_memory recall span".to_string()
            });
        }

        if depth < 2 {
            // A manager's delegation: under it, and the parent of the next agent's run.
            let delegate = findings.only(&spans, "execute_tool delegate", Some(&agent));
            if let Some(delegate) = &delegate {
                findings.has(delegate, "gen_ai.operation.name", json!("execute_tool"));
                findings.has(delegate, "gen_ai.tool.name", json!("delegate"));
                findings.has(delegate, "gen_ai.tool.type", json!("function"));
                findings.has(delegate, "opc.tool.outcome", json!("ok"));
                findings.has_text(delegate, "gen_ai.tool.call.id");
            }
            parent = delegate;
        } else if let Some(tool) = findings.only(&spans, "execute_tool Bash", Some(&agent)) {
            findings.has(&tool, "gen_ai.operation.name", json!("execute_tool"));
            findings.has(&tool, "gen_ai.tool.name", json!("Bash"));
            findings.has(&tool, "gen_ai.tool.type", json!("function"));
            findings.has(&tool, "opc.tool.outcome", json!("ok"));
            findings.has_text(&tool, "gen_ai.tool.call.id");
            findings.has_text(&tool, "opc.sandbox.outcome");
        }
        agents.push((agent, chats));
    }

    // One trace for everything the flow made, the caller's.
    let flow = [
        "opc.inbound",
        "invoke_agent",
        "chat",
        "opc.privacy",
        "execute_tool",
        "search_memory",
        "update_memory",
    ];
    for span in &spans {
        if flow.iter().any(|prefix| span.name.starts_with(prefix)) {
            findings.check(span.trace_id == TRACE_ID, || {
                format!(
                    "{} is in trace {}, not the traceparent's",
                    span.name, span.trace_id
                )
            });
        }
    }
    findings.check(agents.len() == AGENTS.len(), || {
        "the agents' tree is broken (see above)".to_string()
    });
    findings.report(&spans);
    Tree { agents, privacy }
}

/// The CEO's model calls had the name and the e-mail in their input: their privacy spans count an
/// e-mail and a person's name.
fn check_masked_counts(tree: &Tree) {
    let (ceo, chats) = &tree.agents[0];
    for chat in chats {
        let shield = &tree.privacy[&chat.span_id];
        for entity in ["EMAIL", "PERSON_NAME"] {
            let key = format!("opc.privacy.masked.{entity}");
            assert!(
                shield.int_attr(&key).is_some_and(|n| n >= 1),
                "{key} ≥ 1 on the privacy span of {}'s {}: {:?}",
                ceo.name,
                chat.name,
                shield.attributes
            );
        }
    }
}

/// No byte the receiver got holds any part of the personal data.
fn check_no_personal_data(receiver: &OtlpReceiver) {
    assert!(receiver.raw_len() > 0, "something was received");
    for real in PERSONAL {
        assert!(
            !receiver.raw_bytes_contain(real.as_bytes()),
            "{real:?} was exported"
        );
    }
}

/// Every string inside a JSON value, for searching captured content whatever its nesting.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_level_delegation_is_one_trace_with_every_span_and_no_personal_data() {
    let receiver = OtlpReceiver::start().await;
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", SHORT_INTERVAL),
        ("OTEL_METRIC_EXPORT_INTERVAL", SHORT_INTERVAL),
    ];
    let Some(run) = Run::start("telemetry_e2e", &receiver.endpoint(), &env).await else {
        return;
    };
    run.converse().await;

    let tree = tree(&receiver).await;
    check_masked_counts(&tree);

    // Without content capture, no span carries message content.
    for span in receiver.spans() {
        for key in ["gen_ai.input.messages", "gen_ai.output.messages"] {
            assert!(
                span.attr(key).is_none(),
                "{} carries {key} with capture off",
                span.name
            );
        }
    }

    receiver.wait_for_metrics(WAIT, &METRICS).await;
    let metrics = receiver.metrics();
    assert!(
        metrics
            .iter()
            .filter(|m| m.name == "opc.requests")
            .flat_map(|m| &m.points)
            .any(|p| p.attributes.values().any(|v| v == "completed")),
        "opc.requests counts a completed request: {metrics:?}"
    );
    for token_type in ["input", "output"] {
        assert!(
            metrics
                .iter()
                .filter(|m| m.name == "gen_ai.client.token.usage")
                .flat_map(|m| &m.points)
                .any(|p| p.attributes.get("gen_ai.token.type") == Some(&json!(token_type))),
            "gen_ai.client.token.usage has {token_type} tokens: {metrics:?}"
        );
    }
    // The default protocol is protobuf.
    let posts = receiver.posts();
    assert!(
        posts
            .iter()
            .all(|p| p.content_type == "application/x-protobuf"),
        "{posts:?}"
    );

    check_no_personal_data(&receiver);
    assert_eq!(run.opc.stop().0, Some(0));
    check_no_personal_data(&receiver);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_content_over_otlp_json_is_the_masked_text_the_model_saw() {
    let receiver = OtlpReceiver::start().await;
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", SHORT_INTERVAL),
        ("OTEL_METRIC_EXPORT_INTERVAL", SHORT_INTERVAL),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ];
    let Some(run) = Run::start("telemetry_e2e", &receiver.endpoint(), &env).await else {
        return;
    };
    run.converse().await;
    let tree = tree(&receiver).await;
    check_masked_counts(&tree);

    // The CEO's first call, as the model saw it: its substitute e-mail is in the captured input.
    let seen = run.ceo_first_request();
    let fake = fake_email(&seen).unwrap();
    let first_chat = &tree.agents[0].1[0];
    let input = first_chat
        .str_attr("gen_ai.input.messages")
        .unwrap_or_else(|| {
            panic!(
                "gen_ai.input.messages on {} with capture on: {:?}",
                first_chat.name, first_chat.attributes
            )
        });
    let input: Value = serde_json::from_str(input)
        .unwrap_or_else(|e| panic!("gen_ai.input.messages is JSON ({e}): {input}"));
    assert!(input.is_array(), "a list of messages: {input}");
    let mut texts = Vec::new();
    strings(&input, &mut texts);
    assert!(
        texts.iter().any(|t| t.contains(&fake)),
        "the captured input holds the text the model saw ({fake:?}): {input}"
    );
    for (_, chats) in &tree.agents {
        for chat in chats {
            for key in ["gen_ai.input.messages", "gen_ai.output.messages"] {
                let value = chat.str_attr(key).unwrap_or_else(|| {
                    panic!(
                        "{key} on {} with capture on: {:?}",
                        chat.name, chat.attributes
                    )
                });
                serde_json::from_str::<Value>(value)
                    .unwrap_or_else(|e| panic!("{key} is JSON ({e}): {value}"));
            }
        }
    }

    // The substitute is in the bytes received as the model saw it: a real value exported the same
    // way would have been found by the search below.
    assert!(
        receiver.raw_bytes_contain(fake.as_bytes()),
        "the substitute {fake:?} is in the bytes received"
    );

    // OTLP JSON was asked for, and that is what came.
    let posts = receiver.posts();
    assert!(
        posts.iter().all(|p| p.content_type == "application/json"),
        "{posts:?}"
    );
    check_no_personal_data(&receiver);
    assert_eq!(run.opc.stop().0, Some(0));
    check_no_personal_data(&receiver);
}

/// The stderr lines about telemetry (the exporter's warning, or any the SDK would print). The notice `opc run` prints once at start, saying where telemetry goes, is not one of them.
fn telemetry_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| !l.starts_with("opc: telemetry on:"))
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("telemetry") || l.contains("otlp")
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_one_warning_and_never_the_answer() {
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", SHORT_INTERVAL),
        ("OTEL_METRIC_EXPORT_INTERVAL", SHORT_INTERVAL),
    ];
    let Some(run) = Run::start("telemetry_e2e", &endpoint, &env).await else {
        return;
    };
    run.converse().await;
    wait_until(WAIT, "the telemetry warning on stderr", || {
        !telemetry_lines(&run.opc.stderr()).is_empty()
    })
    .await;
    // Let many more exports fail (ten intervals of each signal) before counting again.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let stderr = run.opc.stderr();
    let lines = telemetry_lines(&stderr);
    assert_eq!(lines.len(), 1, "one telemetry warning; stderr:\n{stderr}");
    assert!(
        lines[0].contains(&endpoint),
        "the warning names the endpoint: {}",
        lines[0]
    );
    assert_eq!(run.opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_refuses_every_export_is_one_warning_however_many_fail() {
    let receiver = OtlpReceiver::start().await;
    receiver.set_mode(Mode::Fail(503));
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", SHORT_INTERVAL),
        ("OTEL_METRIC_EXPORT_INTERVAL", SHORT_INTERVAL),
    ];
    let Some(run) = Run::start("telemetry_e2e", &receiver.endpoint(), &env).await else {
        return;
    };
    run.converse().await;
    // The flow's spans were refused, and then five more metric exports after the answer: every
    // one failed and was dropped, and each failure after the first is quiet.
    receiver.wait_for_posts(WAIT, Signal::Traces, 1).await;
    let metric_posts = receiver
        .posts()
        .iter()
        .filter(|p| p.signal == Signal::Metrics)
        .count();
    receiver
        .wait_for_posts(WAIT, Signal::Metrics, metric_posts + 5)
        .await;
    let stderr = run.opc.stderr();
    let lines = telemetry_lines(&stderr);
    assert_eq!(
        lines.len(),
        1,
        "one telemetry warning after {} refused exports; stderr:\n{stderr}",
        receiver.posts().len()
    );
    check_no_personal_data(&receiver);
    assert_eq!(run.opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_flushes_the_pending_spans_and_metrics() {
    let receiver = OtlpReceiver::start().await;
    // Longer than any test's deadline: nothing is exported on schedule while the test runs.
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "600000"),
    ];
    let Some(run) = Run::start("telemetry_e2e", &receiver.endpoint(), &env).await else {
        return;
    };
    run.converse().await;
    assert!(
        receiver.posts().is_empty(),
        "nothing exported before the stop: {:?}",
        receiver.posts()
    );
    let (code, _) = run.opc.stop();
    assert_eq!(code, Some(0));
    // The process has exited; the receiver records a body before it answers, so what the
    // shutdown flushed is here already.
    let spans = receiver.spans();
    assert!(
        spans.iter().any(|s| s.name == "invoke_agent ceo"),
        "the root's span was flushed at the stop; {}",
        span_names(&spans)
    );
    tree(&receiver).await;
    let names = receiver.metric_names();
    for metric in METRICS {
        assert!(
            names.contains(metric),
            "{metric} was flushed at the stop: {names:?}"
        );
    }
    check_no_personal_data(&receiver);
}
