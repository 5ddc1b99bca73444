//! # Scripted LLM server — a test double for both LLM wire formats
//!
//! Role: a real HTTP server on the loopback interface that speaks the Anthropic Messages API
//! (`POST /v1/messages`) and the OpenAI Chat Completions API (`POST /v1/chat/completions`, also
//! `POST /chat/completions`), streamed (server-sent events) or not, and answers from a [`Script`].
//! End-to-end tests point a provider's base URL at a [`ScriptedLlm`]; the `scripted-llm` binary
//! serves a script file for offline demos. Every request is recorded ([`RecordedRequest`]) and the
//! recording is also served as JSON at `GET /_requests`.
//!
//! How a request is answered:
//! 1. the agent is the first [`AgentScript`] whose `marker` is a substring of the request's system
//!    prompt (Anthropic: the `system` field; OpenAI: the first message with role `system`); when
//!    none matches, the script's `fallback` steps answer;
//! 2. the session is the text of the request's first user message; each (marker, session) pair has
//!    its own cursor into the agent's steps, so concurrent independent sessions each walk the
//!    script from the start, deterministically;
//! 3. the request takes the step at the cursor and advances it; past the end, the last non-fault
//!    step answers again, and with none a 500 says `script exhausted for <marker>`;
//! 4. with `"per_conversation": true` in the script, a request whose history has no assistant turn
//!    starts a conversation, so it goes back to the first step — unless the pair's previous request
//!    also had none and got a fault, which makes this one its retry. So a demo run twice (same
//!    message, new conversation) is answered the same way both times, while retries and follow-ups
//!    still walk on through the script. Without it (the default, which tests that send bare requests
//!    rely on), every request advances the cursor.
//!
//! Memory work (issue 25) is answered apart: a request whose system prompt's FIRST line is
//! `OPC memory: extract` or `OPC memory: consolidate` ([`MemoryKind`]) takes the next step of that
//! kind's queue when the script has one ([`Script::memory`]) — one queue per kind, not per session,
//! because the engine's background worker is one caller. An empty queue holds the request (recorded,
//! unanswered) until the test pushes a step ([`ScriptedLlm::push_memory`]) or the server shuts down,
//! so a test can read what a memory request lists (a fact's id) and answer it from that, and can keep
//! memory work in flight for as long as it needs to show that conversations do not wait for it.
//! Without a queue for its kind, a memory request is routed like any other (markers, fallback).
//!
//! Invariants:
//! - only loopback addresses are ever bound ([`ScriptedLlm::start_on`] refuses others);
//! - cursors, memory queues and the recording sit behind one mutex, never held across an `.await`, so
//!   the order of the recording is the order in which steps were handed out (except memory requests
//!   that waited on an empty queue: they are recorded on arrival and get their step when it is pushed);
//! - no thread per request: every request is a tokio task under axum, delays and hangs are timers,
//!   and all of them end when the server shuts down, so shutdown never waits on a hung request;
//! - a request is recorded when it arrives, before any delay, hang or fault; when its answer starts
//!   (after any hold, queue wait and delay) the record gets `answered_at`, so tests can assert what
//!   happened before a request was answered.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The placeholder replaced by the text of the request's first user message.
pub const INPUT_PLACEHOLDER: &str = "{{input}}";

/// The placeholder replaced by the content of the request's last tool result (empty if none), so a
/// scripted manager can pass its subordinate's answer on.
pub const LAST_RESULT_PLACEHOLDER: &str = "{{last_result}}";

/// Request headers kept in a [`RecordedRequest`] (lower-case names).
pub const RECORDED_HEADERS: [&str; 3] = ["authorization", "x-api-key", "anthropic-version"];

/// How long the server waits between the last bytes of a cut reply and aborting the connection, so
/// that the partial reply is flushed to the client first.
const CUT_PAUSE: Duration = Duration::from_millis(30);

/// How long [`ScriptedLlm::shutdown`] waits for open connections before aborting the server task.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Largest request body accepted (agents with long histories send big bodies).
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// Listen backlog, so that 1,000+ clients connecting at once are not refused.
const BACKLOG: u32 = 4096;

/// Text sent before a `cut` fault aborts the connection.
const CUT_TEXT: &str = "This reply is cut off before it ends, because the script says so today.";

// ---------------------------------------------------------------------------------------------
// Script
// ---------------------------------------------------------------------------------------------

/// A script: which agent answers what. Deserialises from
/// `{"agents": [{"marker": …, "replies": [STEP, …]}, …], "fallback": [STEP, …]}`
/// (`fallback` optional); see [`Step`] for the forms of a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Agents, tried in order: the first whose marker is in the system prompt answers.
    #[serde(default)]
    pub agents: Vec<AgentScript>,
    /// Steps used when no agent's marker is in the system prompt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<Step>,
    /// Each new conversation walks the script from the start (see the module docs, step 4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_conversation: bool,
    /// Steps answering memory work, one queue per kind (`{"extract": [STEP, …], "consolidate": …}`);
    /// a kind present here (even with no steps) is answered only from its queue.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory: BTreeMap<MemoryKind, Vec<Step>>,
}

/// The kinds of memory work (issue 25), told apart by the first line of the system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    /// Fact extraction after a task (`OPC memory: extract`).
    Extract,
    /// A sleep-time consolidation run (`OPC memory: consolidate`).
    Consolidate,
}

impl MemoryKind {
    /// Both kinds.
    pub const ALL: [MemoryKind; 2] = [MemoryKind::Extract, MemoryKind::Consolidate];

    /// The first line of the system prompt of this kind of request.
    pub fn first_line(self) -> &'static str {
        match self {
            MemoryKind::Extract => "OPC memory: extract",
            MemoryKind::Consolidate => "OPC memory: consolidate",
        }
    }

    /// The kind of memory work a system prompt asks for: its first line, trailing whitespace aside,
    /// is exactly [`MemoryKind::first_line`]. Anywhere else in the prompt the words mean nothing.
    pub fn of_system(system: &str) -> Option<MemoryKind> {
        let first = system.lines().next()?.trim_end();
        MemoryKind::ALL
            .into_iter()
            .find(|kind| kind.first_line() == first)
    }
}

impl Script {
    /// An empty script (every request gets a 500 until agents are added).
    pub fn new() -> Script {
        Script::default()
    }

    /// Parses a script from JSON text.
    pub fn from_json(text: &str) -> Result<Script, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Reads and parses a script file; the error names the file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Script, String> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
        Script::from_json(&text).map_err(|e| format!("invalid script {}: {e}", path.display()))
    }

    /// Adds an agent answering requests whose system prompt contains `marker`.
    pub fn agent(mut self, marker: impl Into<String>, replies: Vec<Step>) -> Script {
        self.agents.push(AgentScript {
            marker: marker.into(),
            replies,
        });
        self
    }

    /// Sets the steps used when no agent's marker matches.
    pub fn fallback(mut self, replies: Vec<Step>) -> Script {
        self.fallback = replies;
        self
    }

    /// Makes every new conversation start the script over (see the module docs, step 4).
    pub fn per_conversation(mut self) -> Script {
        self.per_conversation = true;
        self
    }

    /// Answers memory work of `kind` from its own queue, starting with `steps` (which may be empty:
    /// the test then pushes each answer with [`ScriptedLlm::push_memory`] once it has seen the
    /// request). Called twice for a kind, the steps are appended.
    pub fn memory(mut self, kind: MemoryKind, steps: Vec<Step>) -> Script {
        self.memory.entry(kind).or_default().extend(steps);
        self
    }
}

/// One scripted agent: its marker and its replies in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentScript {
    /// Substring of the system prompt that selects this agent (e.g. `"Agent id: ceo"`).
    pub marker: String,
    /// The steps, taken one per request and per session.
    pub replies: Vec<Step>,
}

/// One scripted answer. JSON forms:
/// - `{"text": "…"}` — a final text answer (stop reason `end_turn` / `stop`);
/// - `{"tool": NAME, "input": {…}}` or `{"tools": [{"name": …, "input": {…}}, …]}` — tool calls
///   (stop reason `tool_use` / `tool_calls`); `text` may be given too, sent before the calls;
/// - `{"fault": "status", "status": 429, "retry_after": 1}` — an error status in the endpoint's
///   error format, with a `retry-after` header (written exactly as given) only when given;
/// - `{"fault": "malformed"}` — 200, `content-type: application/json`, invalid JSON body;
/// - `{"fault": "cut"}` — part of a reply, then the connection is aborted;
/// - `{"fault": "hang"}` — never answered (until the server shuts down).
///
/// Any step may have `"delay_ms": N` (wait before answering; for streams, before the first byte).
/// Replies may have `"usage": {"input": N, "output": M}` overriding the token counts (defaults:
/// request body length / 4 and reply text + tool JSON length / 4, each at least 1). Text and
/// string values inside tool inputs may contain `{{input}}`, replaced by the text of the request's
/// first user message, and `{{last_result}}`, replaced by the content of its last tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawStep", into = "RawStep")]
pub struct Step {
    /// What the step answers.
    pub kind: StepKind,
    /// Milliseconds to wait before answering.
    pub delay_ms: u64,
}

/// What a [`Step`] answers.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// A successful reply: text and/or tool calls.
    Reply(Reply),
    /// A fault.
    Fault(Fault),
}

/// A successful scripted reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    /// Text of the reply, if any.
    pub text: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token-count overrides.
    pub usage: Option<UsageOverride>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Tool name.
    pub name: String,
    /// Tool input (a JSON object); `{{input}}` is substituted inside string values.
    #[serde(default = "empty_object")]
    pub input: Value,
}

/// Token counts reported instead of the computed defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageOverride {
    /// Input (prompt) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<u64>,
    /// Output (completion) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
}

/// A scripted fault; each consumes one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// An error status with a body in the endpoint's error format.
    Status {
        /// HTTP status, 400–599.
        status: u16,
        /// Value of the `retry-after` header, exactly as scripted (e.g. `"1"`, `"0.05"`).
        retry_after: Option<String>,
    },
    /// 200 with `content-type: application/json` and a body that is not valid JSON.
    Malformed,
    /// The start of a reply, then the connection is aborted mid-body.
    Cut,
    /// No answer at all until the server shuts down.
    Hang,
}

impl Step {
    /// A final text answer.
    pub fn text(text: impl Into<String>) -> Step {
        Step::reply(Reply {
            text: Some(text.into()),
            ..Reply::default()
        })
    }

    /// One tool call.
    pub fn tool(name: impl Into<String>, input: Value) -> Step {
        Step::tools([(name, input)])
    }

    /// Several tool calls in one reply.
    pub fn tools<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Step {
        Step::reply(Reply {
            tool_calls: calls
                .into_iter()
                .map(|(name, input)| ToolCall {
                    name: name.into(),
                    input,
                })
                .collect(),
            ..Reply::default()
        })
    }

    /// A `record_facts` call (memory work's one tool) with `{"facts": facts}` as its input.
    pub fn record_facts(facts: Value) -> Step {
        Step::tool("record_facts", json!({ "facts": facts }))
    }

    /// A reply step.
    pub fn reply(reply: Reply) -> Step {
        Step {
            kind: StepKind::Reply(reply),
            delay_ms: 0,
        }
    }

    /// A fault step.
    pub fn fault(fault: Fault) -> Step {
        Step {
            kind: StepKind::Fault(fault),
            delay_ms: 0,
        }
    }

    /// An error status, with a `retry-after` header when `retry_after` is given.
    pub fn status(status: u16, retry_after: Option<&str>) -> Step {
        Step::fault(Fault::Status {
            status,
            retry_after: retry_after.map(str::to_string),
        })
    }

    /// Waits `delay_ms` milliseconds before answering.
    pub fn with_delay_ms(mut self, delay_ms: u64) -> Step {
        self.delay_ms = delay_ms;
        self
    }

    /// Overrides the reported token counts (no effect on faults).
    pub fn with_usage(mut self, input: u64, output: u64) -> Step {
        if let StepKind::Reply(reply) = &mut self.kind {
            reply.usage = Some(UsageOverride {
                input: Some(input),
                output: Some(output),
            });
        }
        self
    }

    /// Whether this step is a fault.
    pub fn is_fault(&self) -> bool {
        matches!(self.kind, StepKind::Fault(_))
    }
}

/// A `Bash` tool call for [`Step::tools`]: `command` with a fixed `description`, so a test scripting
/// a worker's shell commands writes only the command (the tests check what it did, not how it was
/// described).
pub fn bash_call(command: &str) -> (&'static str, Value) {
    ("Bash", json!({"command": command, "description": "check"}))
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The JSON shape of a step, validated into a [`Step`].
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fault: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_after: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<UsageOverride>,
}

impl TryFrom<RawStep> for Step {
    type Error = String;

    fn try_from(raw: RawStep) -> Result<Step, String> {
        let delay_ms = raw.delay_ms.unwrap_or(0);
        if let Some(fault) = raw.fault {
            if raw.text.is_some()
                || raw.tool.is_some()
                || raw.input.is_some()
                || raw.tools.is_some()
                || raw.usage.is_some()
            {
                return Err(format!(
                    "fault step {fault:?} cannot also have text, tool, tools, input or usage"
                ));
            }
            let fault = match fault.as_str() {
                "status" => {
                    let status = raw
                        .status
                        .ok_or("fault \"status\" needs a \"status\" (400-599)")?;
                    if !(400..=599).contains(&status) {
                        return Err(format!("fault status {status} is not in 400-599"));
                    }
                    let retry_after = match raw.retry_after {
                        None => None,
                        Some(Value::Number(n)) => Some(n.to_string()),
                        Some(Value::String(s)) => Some(s),
                        Some(other) => {
                            return Err(format!(
                                "retry_after must be a number or a string, not {other}"
                            ));
                        }
                    };
                    Fault::Status {
                        status,
                        retry_after,
                    }
                }
                other => {
                    if raw.status.is_some() || raw.retry_after.is_some() {
                        return Err(format!(
                            "status and retry_after belong to fault \"status\", not {other:?}"
                        ));
                    }
                    match other {
                        "malformed" => Fault::Malformed,
                        "cut" => Fault::Cut,
                        "hang" => Fault::Hang,
                        _ => {
                            return Err(format!(
                                "unknown fault {other:?} (expected status, malformed, cut or hang)"
                            ));
                        }
                    }
                }
            };
            return Ok(Step {
                kind: StepKind::Fault(fault),
                delay_ms,
            });
        }
        if raw.status.is_some() || raw.retry_after.is_some() {
            return Err("status and retry_after need \"fault\": \"status\"".to_string());
        }
        let mut tool_calls = Vec::new();
        match (raw.tool, raw.input, raw.tools) {
            (Some(_), _, Some(_)) => return Err("a step has either \"tool\" or \"tools\"".into()),
            (None, Some(_), _) => return Err("\"input\" needs \"tool\"".into()),
            (Some(name), input, None) => tool_calls.push(ToolCall {
                name,
                input: input.unwrap_or_else(empty_object),
            }),
            (None, None, Some(calls)) => tool_calls = calls,
            (None, None, None) => {}
        }
        if tool_calls.iter().any(|c| c.name.is_empty()) {
            return Err("a tool call needs a non-empty name".into());
        }
        if raw.text.is_none() && tool_calls.is_empty() {
            return Err(
                "a step needs \"text\", \"tool\", a non-empty \"tools\" or \"fault\"".to_string(),
            );
        }
        Ok(Step {
            kind: StepKind::Reply(Reply {
                text: raw.text,
                tool_calls,
                usage: raw.usage,
            }),
            delay_ms,
        })
    }
}

impl From<Step> for RawStep {
    fn from(step: Step) -> RawStep {
        let mut raw = RawStep {
            delay_ms: (step.delay_ms > 0).then_some(step.delay_ms),
            ..RawStep::default()
        };
        match step.kind {
            StepKind::Reply(reply) => {
                raw.text = reply.text;
                raw.usage = reply.usage;
                let mut calls = reply.tool_calls;
                if calls.len() == 1 {
                    let call = calls.remove(0);
                    raw.tool = Some(call.name);
                    raw.input = Some(call.input);
                } else if !calls.is_empty() {
                    raw.tools = Some(calls);
                }
            }
            StepKind::Fault(fault) => {
                let name = match fault {
                    Fault::Status {
                        status,
                        retry_after,
                    } => {
                        raw.status = Some(status);
                        raw.retry_after = retry_after.map(|r| {
                            serde_json::from_str::<serde_json::Number>(&r)
                                .map_or(Value::String(r), Value::Number)
                        });
                        "status"
                    }
                    Fault::Malformed => "malformed",
                    Fault::Cut => "cut",
                    Fault::Hang => "hang",
                };
                raw.fault = Some(name.to_string());
            }
        }
        raw
    }
}

// ---------------------------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------------------------

/// One request the server received, recorded on arrival.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Request path, e.g. `/v1/messages`.
    pub path: String,
    /// Marker of the agent that answered; `None` for the fallback or no agent at all.
    pub agent_marker: Option<String>,
    /// The system prompt as extracted for marker matching.
    pub system: String,
    /// The session: text of the first user message (what `{{input}}` is replaced with).
    pub session: String,
    /// Index of the step that answered within the agent's (or fallback's) list; `None` when no
    /// step could answer (no agent, exhausted script, not an LLM endpoint).
    pub step_index: Option<usize>,
    /// The request body as JSON (a JSON string holding the raw text when it was not JSON).
    pub body: Value,
    /// The recorded headers ([`RECORDED_HEADERS`]) that were present, lower-case names.
    pub headers: BTreeMap<String, String>,
    /// When the request arrived.
    pub received_at: SystemTime,
    /// The memory work it is, by the first line of its system prompt (`None`: an agent's turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryKind>,
    /// When its answer started (after any hold, queue wait and delay); `None` while it is still
    /// unanswered, and for hangs and requests that were not answered by a step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<SystemTime>,
}

impl RecordedRequest {
    /// All user-side texts of the conversation in order, for both wire formats: user message
    /// texts (string content or text blocks/parts) and tool results (Anthropic `tool_result`
    /// blocks, OpenAI `tool` messages).
    pub fn user_texts(&self) -> Vec<String> {
        let mut out = Vec::new();
        for message in messages(&self.body) {
            let content = message.get("content").unwrap_or(&Value::Null);
            match message.get("role").and_then(Value::as_str) {
                Some("user") => match content {
                    Value::Array(blocks) => {
                        for block in blocks {
                            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                                out.push(content_text(
                                    block.get("content").unwrap_or(&Value::Null),
                                ));
                            } else if let Some(text) = block.get("text").and_then(Value::as_str) {
                                out.push(text.to_string());
                            } else if let Value::String(text) = block {
                                out.push(text.clone());
                            }
                        }
                    }
                    other => out.push(content_text(other)),
                },
                Some("tool" | "function") => out.push(content_text(content)),
                _ => {}
            }
        }
        out
    }

    /// Names of the tools offered in the request (Anthropic `tools[].name`, OpenAI
    /// `tools[].function.name`).
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| {
                        t.pointer("/function/name")
                            .or_else(|| t.get("name"))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The tool results in the request's last message, which must be the user's: (the result's
    /// text, its `is_error`), in call order (Anthropic `tool_result` blocks). The engine sends a
    /// scripted tool call's results in the request that follows it, so this is what a test checks a
    /// tool's outcome by. Panics when the request has no messages or the last one is not the user's.
    pub fn tool_results(&self) -> Vec<(String, bool)> {
        let last = messages(&self.body)
            .last()
            .unwrap_or_else(|| panic!("no messages in {}", self.body));
        assert_eq!(last["role"], "user", "{last}");
        last["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_result")
                    .map(|b| {
                        (
                            tool_result_text(&b["content"]),
                            b["is_error"].as_bool().unwrap_or(false),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every tool result in the request, in the order of its messages: (the result's content as
    /// sent — a string's text, anything else as its JSON — and its `is_error`). Unlike
    /// [`RecordedRequest::tool_results`] it looks past the last message, for a test that checks what
    /// the model had been shown over a whole turn.
    pub fn all_tool_results(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        for message in messages(&self.body) {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    let content = match &block["content"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    out.push((content, block["is_error"].as_bool().unwrap_or(false)));
                }
            }
        }
        out
    }

    /// The lines of the user-side texts that are JSON objects (how memory work lists facts: one
    /// object per line), parsed, in order.
    pub fn json_lines(&self) -> Vec<Value> {
        self.user_texts()
            .iter()
            .flat_map(|text| text.lines())
            .filter(|line| line.trim_start().starts_with('{'))
            .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
            .filter(Value::is_object)
            .collect()
    }

    /// The tool the request forces, if any (Anthropic `tool_choice: {type: "tool", name}`, OpenAI
    /// `tool_choice: {type: "function", function: {name}}`).
    pub fn forced_tool(&self) -> Option<String> {
        let choice = self.body.get("tool_choice")?;
        choice
            .pointer("/function/name")
            .or_else(|| {
                (choice.get("type").and_then(Value::as_str) == Some("tool"))
                    .then(|| choice.get("name"))
                    .flatten()
            })
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// Whether the request asked for a streamed reply.
    pub fn is_stream(&self) -> bool {
        self.body
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// A recorded header by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// The results of an agent's step `step` (counted from 0), as sent in the request that followed it:
/// `requests` are the agent's requests in order ([`ScriptedLlm::requests_for`]), one per scripted
/// step. Panics, showing that request's body, when it carries no tool result: the step was not
/// answered as a tool call, and the test's count of steps is off.
pub fn step_results(requests: &[RecordedRequest], step: usize) -> Vec<(String, bool)> {
    let next = &requests[step + 1];
    let found = next.tool_results();
    assert!(
        !found.is_empty(),
        "no tool results after step {step}: {}",
        next.body
    );
    found
}

fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Text of a content value: a string, or the text parts of an array joined by newlines.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of a `tool_result` block's content as the tool produced it: a string as is, the text
/// parts of an array joined with nothing between them (unlike [`content_text`], which joins them by
/// lines for marker matching: a test looks for substrings of the tool's output), anything else as its
/// JSON (so a failing assertion shows it).
fn tool_result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

/// The two wire formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Anthropic,
    OpenAi,
}

impl Wire {
    fn system_prompt(self, body: &Value) -> String {
        match self {
            Wire::Anthropic => content_text(body.get("system").unwrap_or(&Value::Null)),
            Wire::OpenAi => messages(body)
                .iter()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("system"))
                .map(|m| content_text(m.get("content").unwrap_or(&Value::Null)))
                .unwrap_or_default(),
        }
    }
}

/// Text of the first user message (text parts only).
fn first_user_text(body: &Value) -> String {
    messages(body)
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| content_text(m.get("content").unwrap_or(&Value::Null)))
        .unwrap_or_default()
}

/// Cursors, memory queues and recording, under one lock.
#[derive(Default)]
struct Book {
    cursors: HashMap<(Option<String>, String), Cursor>,
    records: Vec<RecordedRequest>,
    /// The memory queues: steps not handed out yet, and how many were.
    memory: HashMap<MemoryKind, (VecDeque<Step>, usize)>,
}

/// Where a (marker, session) pair is in its agent's steps.
#[derive(Default)]
struct Cursor {
    /// The next step to hand out.
    next: usize,
    /// Whether the last request had no assistant turn, and whether it got a fault.
    last: Option<(bool, bool)>,
}

impl Cursor {
    /// The step index for a request; `fresh` when its history has no assistant turn, and a fresh
    /// request `restarts` the script unless it retries a fault.
    fn take(&mut self, fresh: bool, restarts: bool, is_fault: impl Fn(usize) -> bool) -> usize {
        let retry_of_fresh = self.last == Some((true, true));
        if restarts && fresh && self.last.is_some() && !retry_of_fresh {
            self.next = 0;
        }
        let index = self.next;
        self.next += 1;
        self.last = Some((fresh, is_fault(index)));
        index
    }
}

/// Whether the request starts a conversation: no assistant turn in its history.
fn starts_conversation(body: &Value) -> bool {
    !messages(body)
        .iter()
        .any(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
}

struct Inner {
    script: Script,
    book: Mutex<Book>,
    ids: AtomicU64,
    log: AtomicBool,
    shutdown: watch::Receiver<bool>,
    /// While `true`, answers wait (after the request is recorded): see [`ScriptedLlm::hold`].
    held: watch::Sender<bool>,
    /// Bumped on every [`ScriptedLlm::push_memory`], waking memory requests waiting on a queue.
    memory_pushed: watch::Sender<u64>,
}

/// What a request gets.
enum Choice {
    Step(Step),
    Error(String),
}

impl Inner {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Picks the step for (marker, session), advances the cursor and records the request (the
    /// record's index is returned with the choice).
    fn choose_and_record(&self, mut record: RecordedRequest) -> (Choice, usize) {
        let marker = record.agent_marker.clone();
        let steps: Option<&[Step]> = match &marker {
            Some(m) => self
                .script
                .agents
                .iter()
                .find(|a| &a.marker == m)
                .map(|a| a.replies.as_slice()),
            None if self.script.fallback.is_empty() => None,
            None => Some(self.script.fallback.as_slice()),
        };
        let mut book = self.book();
        let choice = match steps {
            None => Choice::Error(
                "no scripted agent's marker is in the system prompt and the script has no fallback"
                    .to_string(),
            ),
            Some(steps) => {
                let fresh = starts_conversation(&record.body);
                let index = book
                    .cursors
                    .entry((marker.clone(), record.session.clone()))
                    .or_default()
                    .take(fresh, self.script.per_conversation, |i| {
                        steps.get(i).is_some_and(Step::is_fault)
                    });
                let chosen = if index < steps.len() {
                    Some(index)
                } else {
                    steps.iter().rposition(|s| !s.is_fault())
                };
                record.step_index = chosen;
                match chosen {
                    Some(i) => Choice::Step(steps[i].clone()),
                    None => Choice::Error(format!(
                        "script exhausted for {}",
                        marker.as_deref().unwrap_or("fallback")
                    )),
                }
            }
        };
        if self.log.load(Ordering::Relaxed) {
            let what = match &choice {
                Choice::Step(step) => describe(step),
                Choice::Error(e) => format!("error: {e}"),
            };
            eprintln!(
                "scripted-llm: {} agent={} session={:?} step={} -> {what}",
                record.path,
                marker.as_deref().unwrap_or("-"),
                truncate(&record.session, 40),
                record
                    .step_index
                    .map_or_else(|| "-".to_string(), |i| i.to_string()),
            );
        }
        book.records.push(record);
        (choice, book.records.len() - 1)
    }

    /// Records a memory request of a kind that has a queue (no agent answers it), giving its index;
    /// the record back when the kind has none (the request is then routed like any other).
    fn record_memory(
        &self,
        kind: MemoryKind,
        mut record: Box<RecordedRequest>,
    ) -> Result<usize, Box<RecordedRequest>> {
        let mut book = self.book();
        if !book.memory.contains_key(&kind) {
            return Err(record);
        }
        record.agent_marker = None;
        if self.log.load(Ordering::Relaxed) {
            eprintln!("scripted-llm: {} memory={kind:?} (queued)", record.path);
        }
        book.records.push(*record);
        Ok(book.records.len() - 1)
    }

    /// The next step of `kind`'s queue for the request recorded at `index`, if one is there.
    fn take_memory(&self, kind: MemoryKind, index: usize) -> Option<Step> {
        let mut book = self.book();
        let (queue, taken) = book.memory.get_mut(&kind)?;
        let step = queue.pop_front()?;
        let number = *taken;
        *taken += 1;
        if let Some(record) = book.records.get_mut(index) {
            record.step_index = Some(number);
        }
        if self.log.load(Ordering::Relaxed) {
            eprintln!(
                "scripted-llm: memory={kind:?} step={number} -> {}",
                describe(&step)
            );
        }
        Some(step)
    }

    /// Waits for a step of `kind`'s queue; `None` if the server shuts down first.
    async fn next_memory_step(&self, kind: MemoryKind, index: usize) -> Option<Step> {
        let mut shutdown = self.shutdown.clone();
        loop {
            // Subscribed before looking, so a push between the look and the wait still wakes us.
            let mut pushed = self.memory_pushed.subscribe();
            if let Some(step) = self.take_memory(kind, index) {
                return Some(step);
            }
            tokio::select! {
                changed = pushed.changed() => changed.ok()?,
                _ = shutdown.wait_for(|down| *down) => return None,
            }
        }
    }

    /// Notes that the request recorded at `index` is being answered now.
    fn answered(&self, index: usize) {
        if let Some(record) = self.book().records.get_mut(index) {
            record.answered_at = Some(SystemTime::now());
        }
    }

    fn record_only(&self, record: RecordedRequest) {
        if self.log.load(Ordering::Relaxed) {
            eprintln!("scripted-llm: {} (not an LLM endpoint)", record.path);
        }
        self.book().records.push(record);
    }

    /// Waits `delay`, or less if the server shuts down; false when it shut down.
    /// Wait while answers are held; `false` if the server shuts down meanwhile.
    async fn held(&self) -> bool {
        let mut held = self.held.subscribe();
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            released = held.wait_for(|h| !*h) => released.is_ok(),
            _ = shutdown.wait_for(|down| *down) => false,
        }
    }

    async fn pause(&self, delay: Duration) -> bool {
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            () = tokio::time::sleep(delay) => true,
            _ = shutdown.wait_for(|down| *down) => false,
        }
    }
}

fn describe(step: &Step) -> String {
    match &step.kind {
        StepKind::Reply(r) => {
            let mut parts = Vec::new();
            if let Some(t) = &r.text {
                parts.push(format!("text {:?}", truncate(t, 40)));
            }
            for c in &r.tool_calls {
                parts.push(format!("tool {}", c.name));
            }
            parts.join(", ")
        }
        StepKind::Fault(f) => format!("fault {f:?}"),
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A running scripted LLM server. Dropping it stops the server too (without waiting);
/// [`ScriptedLlm::shutdown`] stops it and waits.
pub struct ScriptedLlm {
    addr: SocketAddr,
    inner: Arc<Inner>,
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedLlm {
    /// Starts a server for `script` on 127.0.0.1 with an ephemeral port.
    pub async fn start(script: Script) -> std::io::Result<ScriptedLlm> {
        ScriptedLlm::start_on(script, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts a server for `script` on `addr`, which must be a loopback address (port 0 picks a
    /// free port).
    pub async fn start_on(script: Script, addr: SocketAddr) -> std::io::Result<ScriptedLlm> {
        if !addr.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the scripted LLM binds loopback addresses only, not {addr}"),
            ));
        }
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(BACKLOG)?;
        let addr = listener.local_addr()?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let book = Book {
            memory: script
                .memory
                .iter()
                .map(|(kind, steps)| (*kind, (steps.iter().cloned().collect(), 0)))
                .collect(),
            ..Book::default()
        };
        let inner = Arc::new(Inner {
            script,
            book: Mutex::new(book),
            ids: AtomicU64::new(0),
            log: AtomicBool::new(false),
            shutdown: shutdown_rx.clone(),
            held: watch::Sender::new(false),
            memory_pushed: watch::Sender::new(0),
        });
        let app = router(inner.clone());
        let listener = listener.tap_io(|tcp| {
            // Small SSE frames must not wait for ACKs (Nagle + delayed ACK adds ~40 ms each).
            let _ = tcp.set_nodelay(true);
        });
        let mut signal = shutdown_rx;
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = signal.wait_for(|down| *down).await;
                })
                .await
        });
        Ok(ScriptedLlm {
            addr,
            inner,
            shutdown,
            task: Some(task),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Hold every answer from now on until [`ScriptedLlm::release`]: requests are still recorded on
    /// arrival, so a test can see that a call is in flight and do something while it is, without
    /// guessing a delay.
    pub fn hold(&self) {
        self.inner.held.send_replace(true);
    }

    /// Answer the held requests (and the next ones) again.
    pub fn release(&self) {
        self.inner.held.send_replace(false);
    }

    /// Logs one line per request to stderr (off by default).
    pub fn log_requests(&self, on: bool) {
        self.inner.log.store(on, Ordering::Relaxed);
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner.book().records.clone()
    }

    /// The requests answered by the agent with this marker.
    pub fn requests_for(&self, marker: &str) -> Vec<RecordedRequest> {
        self.inner
            .book()
            .records
            .iter()
            .filter(|r| r.agent_marker.as_deref() == Some(marker))
            .cloned()
            .collect()
    }

    /// The memory requests of `kind` received so far, in arrival order (whatever answered them).
    pub fn memory_requests(&self, kind: MemoryKind) -> Vec<RecordedRequest> {
        self.inner
            .book()
            .records
            .iter()
            .filter(|r| r.memory == Some(kind))
            .cloned()
            .collect()
    }

    /// Appends `step` to `kind`'s memory queue, answering the oldest request waiting on it (or the
    /// next to come). From now on memory work of this kind is answered only from its queue.
    pub fn push_memory(&self, kind: MemoryKind, step: Step) {
        self.inner
            .book()
            .memory
            .entry(kind)
            .or_default()
            .0
            .push_back(step);
        self.inner.memory_pushed.send_modify(|n| *n += 1);
    }

    /// Stops accepting, ends delays and hangs, waits for open connections to finish (for at most
    /// a few seconds), then returns.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

fn router(inner: Arc<Inner>) -> Router {
    Router::new()
        .route("/v1/messages", post(anthropic))
        .route("/v1/chat/completions", post(openai))
        .route("/chat/completions", post(openai))
        .route("/_requests", get(recording))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(inner)
}

async fn anthropic(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&inner, Wire::Anthropic, uri.path(), &headers, &body).await
}

async fn openai(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&inner, Wire::OpenAi, uri.path(), &headers, &body).await
}

async fn recording(State(inner): State<Arc<Inner>>) -> Response {
    let records = inner.book().records.clone();
    axum::Json(records).into_response()
}

async fn not_found(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    inner.record_only(RecordedRequest {
        path: uri.path().to_string(),
        agent_marker: None,
        system: String::new(),
        session: String::new(),
        step_index: None,
        body: parse_body(&body).unwrap_or_else(|raw| raw),
        headers: recorded_headers(&headers),
        received_at: SystemTime::now(),
        memory: None,
        answered_at: None,
    });
    let message = format!(
        "the scripted LLM serves POST /v1/messages, POST /v1/chat/completions and POST \
         /chat/completions, not {method} {}",
        uri.path()
    );
    // Readable by both kinds of client: both look at error.message.
    let body = json!({"type": "error", "error": {"type": "not_found_error", "message": message}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// The body as JSON, or (as the error) a JSON string of the raw text / null when empty.
fn parse_body(raw: &Bytes) -> Result<Value, Value> {
    if raw.is_empty() {
        return Err(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|_| Value::String(String::from_utf8_lossy(raw).into()))
}

fn recorded_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    RECORDED_HEADERS
        .iter()
        .filter_map(|name| {
            headers.get(*name).map(|v| {
                (
                    name.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into(),
                )
            })
        })
        .collect()
}

async fn answer(
    inner: &Inner,
    wire: Wire,
    path: &str,
    headers: &HeaderMap,
    raw: &Bytes,
) -> Response {
    let received_at = SystemTime::now();
    let body = match parse_body(raw) {
        Ok(body) => body,
        Err(raw_value) => {
            inner.record_only(RecordedRequest {
                path: path.to_string(),
                agent_marker: None,
                system: String::new(),
                session: String::new(),
                step_index: None,
                body: raw_value,
                headers: recorded_headers(headers),
                received_at,
                memory: None,
                answered_at: None,
            });
            return error_response(
                wire,
                StatusCode::BAD_REQUEST,
                "request body is not a JSON object",
                None,
            );
        }
    };
    let system = wire.system_prompt(&body);
    let session = first_user_text(&body);
    let last_result = last_tool_result(&body);
    let agent_marker = inner
        .script
        .agents
        .iter()
        .find(|a| system.contains(&a.marker))
        .map(|a| a.marker.clone());
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted-llm")
        .to_string();
    let memory = MemoryKind::of_system(&system);
    let record = Box::new(RecordedRequest {
        path: path.to_string(),
        agent_marker,
        system,
        session: session.clone(),
        step_index: None,
        body,
        headers: recorded_headers(headers),
        received_at,
        memory,
        answered_at: None,
    });
    // Memory work of a kind with a queue is answered from it (it is no agent's turn).
    let routed = match memory {
        Some(kind) => inner.record_memory(kind, record).map(|index| (kind, index)),
        None => Err(record),
    };
    let (step, index) = match routed {
        Ok((kind, index)) => match inner.next_memory_step(kind, index).await {
            Some(step) => (step, index),
            None => return shutting_down(wire),
        },
        Err(record) => match inner.choose_and_record(*record) {
            (Choice::Step(step), index) => (step, index),
            (Choice::Error(message), _) => {
                return error_response(wire, StatusCode::INTERNAL_SERVER_ERROR, &message, None);
            }
        },
    };
    if !inner.held().await {
        return shutting_down(wire);
    }
    if step.delay_ms > 0 && !inner.pause(Duration::from_millis(step.delay_ms)).await {
        return shutting_down(wire);
    }
    if !matches!(step.kind, StepKind::Fault(Fault::Hang)) {
        inner.answered(index);
    }
    let ctx = Ctx {
        wire,
        model,
        stream,
        include_usage,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    match step.kind {
        StepKind::Reply(reply) => {
            let rendered = render(inner, &reply, (&session, &last_result), raw.len());
            ctx.reply(inner, &rendered)
        }
        StepKind::Fault(Fault::Status {
            status,
            retry_after,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let message = format!("scripted fault: status {}", status.as_u16());
            error_response(wire, status, &message, retry_after.as_deref())
        }
        StepKind::Fault(Fault::Malformed) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"id\": \"scripted-malformed\", \"content\": [{\"type\": \"text\", \"text\": \"unterminated",
        )
            .into_response(),
        StepKind::Fault(Fault::Cut) => ctx.cut(inner, raw.len()),
        StepKind::Fault(Fault::Hang) => {
            let mut shutdown = inner.shutdown.clone();
            let _ = shutdown.wait_for(|down| *down).await;
            shutting_down(wire)
        }
    }
}

fn shutting_down(wire: Wire) -> Response {
    error_response(
        wire,
        StatusCode::SERVICE_UNAVAILABLE,
        "the scripted LLM is shutting down",
        None,
    )
}

fn error_response(
    wire: Wire,
    status: StatusCode,
    message: &str,
    retry_after: Option<&str>,
) -> Response {
    let body = match wire {
        Wire::Anthropic => {
            let kind = match status.as_u16() {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Wire::OpenAi => {
            let (kind, code) = match status.as_u16() {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                429 => ("rate_limit_error", json!("rate_limit_exceeded")),
                400..=499 => ("invalid_request_error", Value::Null),
                _ => ("server_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    };
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(value) = retry_after.and_then(|r| HeaderValue::from_str(r).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

// ---------------------------------------------------------------------------------------------
// Rendering replies
// ---------------------------------------------------------------------------------------------

/// A reply with placeholders substituted, ids assigned and token counts computed.
struct Rendered {
    text: Option<String>,
    calls: Vec<RenderedCall>,
    input_tokens: u64,
    output_tokens: u64,
}

struct RenderedCall {
    id_number: u64,
    name: String,
    input: Value,
    json: String,
}

impl Rendered {
    fn stopped_for_tools(&self) -> bool {
        !self.calls.is_empty()
    }

    /// Whether a text block/content is sent: text given, and non-empty unless it is all there is.
    fn sends_text(&self) -> Option<&str> {
        self.text
            .as_deref()
            .filter(|t| !t.is_empty() || self.calls.is_empty())
    }
}

/// `(first user text, last tool result)`, the values of the two placeholders.
type Placeholders<'a> = (&'a str, &'a str);

fn fill(text: &str, (session, last_result): Placeholders<'_>) -> String {
    text.replace(INPUT_PLACEHOLDER, session)
        .replace(LAST_RESULT_PLACEHOLDER, last_result)
}

/// Content of the last tool result in the request (Anthropic `tool_result` blocks, OpenAI `tool`
/// messages).
fn last_tool_result(body: &Value) -> String {
    let mut last = String::new();
    for message in messages(body) {
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str) {
            Some("user") => {
                if let Value::Array(blocks) = content {
                    for block in blocks {
                        if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                            last = content_text(block.get("content").unwrap_or(&Value::Null));
                        }
                    }
                }
            }
            Some("tool" | "function") => last = content_text(content),
            _ => {}
        }
    }
    last
}

fn render(inner: &Inner, reply: &Reply, values: Placeholders<'_>, request_len: usize) -> Rendered {
    let text = reply.text.as_ref().map(|t| fill(t, values));
    let calls: Vec<RenderedCall> = reply
        .tool_calls
        .iter()
        .map(|call| {
            let input = substitute(&call.input, values);
            RenderedCall {
                id_number: inner.next_id(),
                name: call.name.clone(),
                json: input.to_string(),
                input,
            }
        })
        .collect();
    let output_len =
        text.as_ref().map_or(0, String::len) + calls.iter().map(|c| c.json.len()).sum::<usize>();
    let usage = reply.usage.unwrap_or_default();
    Rendered {
        input_tokens: usage
            .input
            .unwrap_or_else(|| (request_len as u64 / 4).max(1)),
        output_tokens: usage
            .output
            .unwrap_or_else(|| (output_len as u64 / 4).max(1)),
        text,
        calls,
    }
}

/// Replaces the placeholder inside string values only, so the result stays valid JSON whatever
/// the session text holds.
fn substitute(value: &Value, values: Placeholders<'_>) -> Value {
    match value {
        Value::String(s) => Value::String(fill(s, values)),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, values)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, values)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Splits text into chunks of three words (whitespace kept with the word before it).
fn text_chunks(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut words = 0;
    for piece in text.split_inclusive(char::is_whitespace) {
        current.push_str(piece);
        if !piece.trim().is_empty() {
            words += 1;
        }
        if words >= 3 && piece.ends_with(char::is_whitespace) {
            chunks.push(std::mem::take(&mut current));
            words = 0;
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Splits serialised JSON into up to three pieces at char boundaries (two or more when it has at
/// least two chars).
fn json_pieces(json: &str) -> Vec<String> {
    let chars: Vec<char> = json.chars().collect();
    let n = chars.len();
    let k = n.clamp(1, 3);
    (0..k)
        .map(|i| chars[i * n / k..(i + 1) * n / k].iter().collect())
        .collect()
}

/// Per-request reply context.
struct Ctx {
    wire: Wire,
    model: String,
    stream: bool,
    include_usage: bool,
    created: u64,
}

impl Ctx {
    fn reply(&self, inner: &Inner, r: &Rendered) -> Response {
        let id = inner.next_id();
        match (self.wire, self.stream) {
            (Wire::Anthropic, false) => axum::Json(self.anthropic_json(id, r)).into_response(),
            (Wire::OpenAi, false) => axum::Json(self.openai_json(id, r)).into_response(),
            (Wire::Anthropic, true) => sse_response(frames(self.anthropic_events(id, r), false)),
            (Wire::OpenAi, true) => sse_response(frames(self.openai_events(id, r), false)),
        }
    }

    /// The start of a canned reply, then an aborted connection.
    fn cut(&self, inner: &Inner, request_len: usize) -> Response {
        let reply = Reply {
            text: Some(CUT_TEXT.to_string()),
            ..Reply::default()
        };
        let r = render(inner, &reply, ("", ""), request_len);
        let id = inner.next_id();
        if self.stream {
            // Anthropic: message_start, ping, content_block_start, two deltas.
            // OpenAI: the role chunk and two content chunks.
            let (events, keep) = match self.wire {
                Wire::Anthropic => (self.anthropic_events(id, &r), 5),
                Wire::OpenAi => (self.openai_events(id, &r), 3),
            };
            sse_response(frames(events.into_iter().take(keep).collect(), true))
        } else {
            let full = match self.wire {
                Wire::Anthropic => self.anthropic_json(id, &r),
                Wire::OpenAi => self.openai_json(id, &r),
            }
            .to_string();
            let half = full.len() / 2;
            let mut cut_at = half;
            while !full.is_char_boundary(cut_at) {
                cut_at -= 1;
            }
            let frames = vec![
                Frame::Data(Bytes::from(full[..cut_at].to_string())),
                Frame::Pause(CUT_PAUSE),
                Frame::Abort,
            ];
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(frames_body(frames))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
    }

    fn anthropic_message(&self, id: u64, content: Value, stop: Value, usage: Value) -> Value {
        json!({
            "id": format!("msg_scripted{id:012}"),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": usage,
        })
    }

    fn anthropic_stop(r: &Rendered) -> &'static str {
        if r.stopped_for_tools() {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn anthropic_json(&self, id: u64, r: &Rendered) -> Value {
        let mut content = Vec::new();
        if let Some(text) = r.sends_text() {
            content.push(json!({"type": "text", "text": text}));
        }
        for call in &r.calls {
            content.push(json!({
                "type": "tool_use",
                "id": format!("toolu_scripted{:012}", call.id_number),
                "name": call.name,
                "input": call.input,
            }));
        }
        self.anthropic_message(
            id,
            Value::Array(content),
            json!(Ctx::anthropic_stop(r)),
            json!({"input_tokens": r.input_tokens, "output_tokens": r.output_tokens}),
        )
    }

    fn anthropic_events(&self, id: u64, r: &Rendered) -> Vec<String> {
        fn event(name: &str, data: Value) -> String {
            format!("event: {name}\ndata: {data}\n\n")
        }
        let mut events = vec![
            event(
                "message_start",
                json!({"type": "message_start", "message": self.anthropic_message(
                    id,
                    json!([]),
                    Value::Null,
                    json!({"input_tokens": r.input_tokens, "output_tokens": 0}),
                )}),
            ),
            event("ping", json!({"type": "ping"})),
        ];
        let mut index = 0;
        if let Some(text) = r.sends_text() {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}),
            ));
            for chunk in text_chunks(text) {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": chunk}}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        for call in &r.calls {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use",
                    "id": format!("toolu_scripted{:012}", call.id_number),
                    "name": call.name,
                    "input": {},
                }}),
            ));
            for piece in json_pieces(&call.json) {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        events.push(event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": Ctx::anthropic_stop(r), "stop_sequence": null},
                   "usage": {"output_tokens": r.output_tokens}}),
        ));
        events.push(event("message_stop", json!({"type": "message_stop"})));
        events
    }

    fn openai_finish(r: &Rendered) -> &'static str {
        if r.stopped_for_tools() {
            "tool_calls"
        } else {
            "stop"
        }
    }

    fn openai_usage(r: &Rendered) -> Value {
        json!({
            "prompt_tokens": r.input_tokens,
            "completion_tokens": r.output_tokens,
            "total_tokens": r.input_tokens + r.output_tokens,
        })
    }

    fn openai_json(&self, id: u64, r: &Rendered) -> Value {
        let mut message = json!({"role": "assistant", "content": r.sends_text()});
        if !r.calls.is_empty() {
            let calls: Vec<Value> = r
                .calls
                .iter()
                .map(|call| {
                    json!({
                        "id": format!("call_scripted{:012}", call.id_number),
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.json},
                    })
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        json!({
            "id": format!("chatcmpl-scripted{id:012}"),
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": Ctx::openai_finish(r)}],
            "usage": Ctx::openai_usage(r),
        })
    }

    fn openai_events(&self, id: u64, r: &Rendered) -> Vec<String> {
        let chunk_id = format!("chatcmpl-scripted{id:012}");
        let chunk = |choices: Value| {
            format!(
                "data: {}\n\n",
                json!({
                    "id": chunk_id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "choices": choices,
                })
            )
        };
        let delta =
            |delta: Value| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]));
        let first_content = if r.sends_text().is_some() {
            json!("")
        } else {
            Value::Null
        };
        let mut events = vec![delta(
            json!({"role": "assistant", "content": first_content}),
        )];
        if let Some(text) = r.sends_text() {
            for piece in text_chunks(text) {
                events.push(delta(json!({"content": piece})));
            }
        }
        for (index, call) in r.calls.iter().enumerate() {
            events.push(delta(json!({"tool_calls": [{
                "index": index,
                "id": format!("call_scripted{:012}", call.id_number),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]})));
            for piece in json_pieces(&call.json) {
                events.push(delta(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                ));
            }
        }
        events.push(chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": Ctx::openai_finish(r)}]),
        ));
        if self.include_usage {
            let mut usage_chunk = json!({
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
            });
            usage_chunk["usage"] = Ctx::openai_usage(r);
            events.push(format!("data: {usage_chunk}\n\n"));
        }
        events.push("data: [DONE]\n\n".to_string());
        events
    }
}

// ---------------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------------

/// One step of a streamed body.
enum Frame {
    /// Bytes to send.
    Data(Bytes),
    /// Let the connection flush (the body reports "not ready" once).
    Flush,
    /// Wait, then go on.
    Pause(Duration),
    /// Fail the body: the server aborts the connection without finishing the response.
    Abort,
}

/// Frames for SSE events: one write per event with a flush between, the first event split in
/// two so clients must reassemble events across reads; `cut` ends with an abort instead.
fn frames(events: Vec<String>, cut: bool) -> Vec<Frame> {
    let mut frames = Vec::new();
    for (i, event) in events.into_iter().enumerate() {
        if i == 0 {
            let mut mid = event.len() / 2;
            while !event.is_char_boundary(mid) {
                mid -= 1;
            }
            frames.push(Frame::Data(Bytes::from(event[..mid].to_string())));
            frames.push(Frame::Flush);
            frames.push(Frame::Data(Bytes::from(event[mid..].to_string())));
        } else {
            frames.push(Frame::Data(Bytes::from(event)));
        }
        frames.push(Frame::Flush);
    }
    if cut {
        frames.push(Frame::Pause(CUT_PAUSE));
        frames.push(Frame::Abort);
    }
    frames
}

fn frames_body(frames: Vec<Frame>) -> Body {
    let stream = futures_util::stream::unfold(VecDeque::from(frames), |mut queue| async move {
        loop {
            match queue.pop_front()? {
                Frame::Data(bytes) => return Some((Ok(bytes), queue)),
                Frame::Flush => tokio::task::yield_now().await,
                Frame::Pause(delay) => tokio::time::sleep(delay).await,
                Frame::Abort => {
                    let error = std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "scripted fault: reply cut",
                    );
                    return Some((Err::<Bytes, _>(error), queue));
                }
            }
        }
    });
    Body::from_stream(stream)
}

fn sse_response(frames: Vec<Frame>) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(frames_body(frames))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn text_chunks_keep_all_text() {
        let text = "one two three four five six seven";
        let chunks = text_chunks(text);
        assert_eq!(chunks.concat(), text);
        assert_eq!(chunks, ["one two three ", "four five six ", "seven"]);
        assert!(text_chunks("").is_empty());
    }

    #[test]
    fn json_pieces_split_in_two_or_more() {
        assert_eq!(json_pieces("{}"), ["{", "}"]);
        let json = r#"{"a":"é"}"#;
        let pieces = json_pieces(json);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), json);
    }

    #[test]
    fn substitution_only_touches_strings() {
        let input = json!({"task": "do {{input}}", "n": 3, "list": ["{{input}}"], "{{input}}": 1});
        let out = substitute(&input, ("say \"hi\"", ""));
        assert_eq!(
            out,
            json!({"task": "do say \"hi\"", "n": 3, "list": ["say \"hi\""], "{{input}}": 1})
        );
    }

    #[test]
    fn a_fresh_conversation_restarts_but_a_retry_of_a_fault_walks_on() {
        // Steps: 0 fault, 1 tool call, 2 text.
        let fault = |i: usize| i == 0;
        let mut cursor = Cursor::default();
        assert_eq!(
            cursor.take(true, true, fault),
            0,
            "first request: the fault"
        );
        assert_eq!(cursor.take(true, true, fault), 1, "its retry walks on");
        assert_eq!(cursor.take(false, true, fault), 2, "the follow-up turn");
        assert_eq!(
            cursor.take(true, true, fault),
            0,
            "a new conversation starts over"
        );
        let mut legacy = Cursor::default();
        assert_eq!(legacy.take(false, false, fault), 0);
        assert_eq!(
            legacy.take(true, false, fault),
            1,
            "without per_conversation, every request advances"
        );
    }
}
