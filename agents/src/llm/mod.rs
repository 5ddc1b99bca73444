//! The LLM call stack: one request/response model for every provider, and the [`LlmService`] /
//! [`Layer`] pair that composes cross-cutting behaviour around calls, tower-style.
//!
//! Why our own two small traits instead of `tower::Service`: an LLM call is one async request → one
//! response, shared by many concurrent sessions through `&self`. tower's `poll_ready` + `&mut self`
//! contract would force a clone per call and a boxed error type that erases the distinctions the retry
//! and escalation logic depend on (429 vs 500 vs timeout). The shape is the same: a [`Layer`] wraps an
//! inner service and returns a service, and [`Stack`] composes them in order.
//!
//! Invariants:
//! - a request is self-contained (system prompt, full message history, tool specs), so any layer may
//!   replay it (retry) or rewrite it (privacy) without knowing where it came from;
//! - errors keep their kind end to end ([`LlmError`]); only the retry layer decides what is retryable;
//! - streamed text goes to the request's [`TokenSink`]; a retried attempt first sends
//!   [`StreamDelta::Restart`] so a consumer can discard the partial text of the failed attempt. A
//!   layer that rewrites text (privacy) wraps the sink in its own, in place, with no extra task;
//! - a request names its provider ([`LlmRequest::provider`]): the engine calls one [`stack::CallStack`]
//!   whose router picks the provider's own stack, so what must happen once per call whatever the
//!   provider (privacy, tracing) sits above the router, once.

pub mod anthropic;
pub mod embed;
mod endpoint;
pub mod genai;
pub mod layers;
pub mod openai;
pub mod privacy;
pub mod provider;
mod seam;
mod sse;
pub mod stack;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

/// Who wrote a message in a conversation with a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The caller: the task, and tool results.
    User,
    /// The model: text and tool calls.
    Assistant,
}

/// One block of a message. Tool results are user-side blocks, as in the Anthropic format; the OpenAI
/// adapter turns them into `role: tool` messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool to run.
    ToolUse {
        /// Provider-assigned id; the result must quote it.
        id: String,
        /// Wire name of the tool.
        name: String,
        /// Arguments as the model wrote them (not yet validated).
        input: Value,
    },
    /// The answer to a [`Content::ToolUse`].
    ToolResult {
        /// The id of the tool use this answers.
        tool_use_id: String,
        /// The result (or error message) as text.
        content: String,
        /// Whether the tool failed; the model sees this as an error result.
        is_error: bool,
    },
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }
}

/// One message in a session's history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its blocks, in order.
    pub content: Vec<Content>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: vec![Content::text(text)],
        }
    }

    /// All text blocks joined, in order.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let Content::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool uses in this message, in order: `(id, name, input)`.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|block| match block {
            Content::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Wire name (`delegate`, `delegate_parallel`, …).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
}

/// Something streamed while a response is generated.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamDelta {
    /// More answer text.
    Text(String),
    /// The attempt failed and is being retried: drop the text received so far.
    Restart,
}

/// Something that takes streamed deltas. Called from the wire client's read loop, in order, so it must
/// not block: publish, buffer or forward, and return.
pub trait DeltaSink: Send + Sync {
    /// Take one delta. A consumer that has gone away ignores it: a gone consumer never fails a call.
    fn send(&self, delta: StreamDelta);
}

/// Where streamed text goes: a shared [`DeltaSink`]. A layer that must change the text on its way to
/// the consumer (the privacy layer restores masked values) wraps the request's sink in its own sink,
/// in place — no channel and no task in between.
///
/// Consumers are local (event bus, CLI) and must not stall the HTTP read; the whole response is
/// bounded by `max_tokens` anyway.
#[derive(Clone)]
pub struct TokenSink(Arc<dyn DeltaSink>);

impl TokenSink {
    /// A sink that hands deltas to `sink`.
    pub fn new(sink: impl DeltaSink + 'static) -> Self {
        TokenSink(Arc::new(sink))
    }

    /// A sink that calls `f` with each delta.
    pub fn from_fn(f: impl Fn(StreamDelta) + Send + Sync + 'static) -> Self {
        struct FnSink<F>(F);
        impl<F: Fn(StreamDelta) + Send + Sync> DeltaSink for FnSink<F> {
            fn send(&self, delta: StreamDelta) {
                (self.0)(delta)
            }
        }
        TokenSink::new(FnSink(f))
    }

    /// A sink feeding an unbounded channel, and the channel's receiver.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<StreamDelta>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (TokenSink::from(tx), rx)
    }

    /// Hand on one delta.
    pub fn send(&self, delta: StreamDelta) {
        self.0.send(delta)
    }
}

impl DeltaSink for mpsc::UnboundedSender<StreamDelta> {
    fn send(&self, delta: StreamDelta) {
        // A closed receiver means the consumer is gone, which must not fail the call.
        let _ = mpsc::UnboundedSender::send(self, delta);
    }
}

impl From<mpsc::UnboundedSender<StreamDelta>> for TokenSink {
    fn from(tx: mpsc::UnboundedSender<StreamDelta>) -> Self {
        TokenSink::new(tx)
    }
}

impl std::fmt::Debug for TokenSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSink")
    }
}

/// Who is calling: carried for tracing, ledgers and privacy, never sent to the provider.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallMeta {
    /// The agent id (`vp-eng`), or a framework role such as `summarizer`.
    pub agent: String,
    /// The task the call belongs to, when there is one.
    pub task_id: Option<i64>,
    /// The root task of the task's tree: the scope of per-conversation state such as the privacy
    /// vault ([`stack::RootStates`]). `None` for a call outside any task tree.
    pub root_id: Option<i64>,
    /// The conversation, as the engine keys it (`c-…`), when the call belongs to one.
    pub conversation: Option<String>,
    /// What the call is for: a task's own work, or memory work about it (extraction,
    /// consolidation), which the ledger keeps apart and never adds to the task's totals.
    pub work: Work,
}

/// What a call is for (the ledger's `llm_calls.work`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Work {
    /// A task's own work (its sessions, the summariser).
    #[default]
    Task,
    /// Memory work in the background: fact extraction and consolidation.
    Memory,
}

impl Work {
    /// The ledger's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Work::Task => "task",
            Work::Memory => "memory",
        }
    }
}

/// Which tool the model must call, when the caller says (the providers' `tool_choice`). `None` in a
/// request is the provider's default (the model may call any offered tool, or none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (the default, said explicitly).
    Auto,
    /// The model must call this tool (it must be offered).
    Tool(String),
}

/// A chat completion request, independent of the provider's wire format.
#[derive(Clone, Debug)]
pub struct LlmRequest {
    /// The provider id from the config: the router ([`provider::Providers::router`]) sends the
    /// request to that provider's stack. Below the router it is informational.
    pub provider: String,
    /// The model name as the provider knows it (no `provider/` prefix).
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation so far; never empty, starts with a user message.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Whether a tool call is forced (`None`: the provider's default; ignored without tools).
    pub tool_choice: Option<ToolChoice>,
    /// Upper bound on generated tokens.
    pub max_tokens: u32,
    /// When set, the response is streamed and text deltas are sent here as they arrive.
    pub stream: Option<TokenSink>,
    /// Caller identity, for layers.
    pub meta: CallMeta,
    /// The egress guard the privacy layer set: the wire client checks the serialised body with it just
    /// before sending, and fails the call closed on a hit ([`LlmError::Leak`]).
    pub guard: Option<EgressGuard>,
}

/// Finds a real value that must not leave the process in an outbound payload.
pub trait LeakCheck: Send + Sync {
    /// The type of the first real value found in `payload` (raw or JSON-escaped), if any.
    fn leak_in(&self, payload: &str) -> Option<opc_privacy::EntityType>;
}

/// The egress guard: the last check on the exact bytes a wire client is about to send.
///
/// Why in the wire client rather than as a layer: only the wire client holds the final payload (the
/// provider's JSON, with every part of the request in the form it is sent), so nothing a layer or the
/// wire format adds after the privacy layer can slip past it.
#[derive(Clone)]
pub struct EgressGuard(Arc<dyn LeakCheck>);

impl EgressGuard {
    /// A guard running `check`.
    pub fn new(check: impl LeakCheck + 'static) -> Self {
        EgressGuard(Arc::new(check))
    }

    /// `Ok` when `payload` carries no real value; else the non-retryable [`LlmError::Leak`].
    pub fn check(&self, provider: &str, payload: &str) -> Result<(), LlmError> {
        match self.0.leak_in(payload) {
            None => Ok(()),
            Some(kind) => Err(LlmError::Leak {
                provider: provider.to_string(),
                kind,
            }),
        }
    }
}

impl std::fmt::Debug for EgressGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EgressGuard")
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// It wants tools run.
    ToolUse,
    /// It ran out of `max_tokens`.
    MaxTokens,
    /// Anything else the provider reported.
    Other(String),
}

/// Token counts for one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Usage from the counts a provider reported: `None` when it reported neither, so the call's
    /// tokens are recorded as unknown rather than as zero. A count missing beside a reported one is 0.
    pub fn reported(input_tokens: Option<u64>, output_tokens: Option<u64>) -> Option<Usage> {
        (input_tokens.is_some() || output_tokens.is_some()).then(|| Usage {
            input_tokens: input_tokens.unwrap_or(0),
            output_tokens: output_tokens.unwrap_or(0),
        })
    }
}

/// A completed model response.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmResponse {
    /// Text and tool-use blocks, in order.
    pub content: Vec<Content>,
    /// Why generation stopped.
    pub stop_reason: StopReason,
    /// Tokens used; `None` when the provider sent no usage (some OpenAI-compatible servers omit it
    /// from streams), which the ledger records as unknown, never as 0.
    pub usage: Option<Usage>,
    /// USD cost, filled in by the cost layer from the config's price table (0 when unpriced).
    pub cost_usd: f64,
    /// How many attempts the call took (1 = no retry), filled in by the retry layer.
    pub attempts: u32,
    /// What the privacy layer did to the request (counts by type, never values); `None` without it.
    pub privacy: Option<privacy::PrivacyReport>,
}

/// Why a call failed. The kind is kept through every layer so retry and reporting can tell them apart.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum LlmError {
    /// The provider answered with an HTTP error status.
    #[error("{provider} returned HTTP {status}: {message}")]
    Status {
        /// Provider id from the config.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The provider's error message (never contains the request).
        message: String,
        /// The `retry-after` the provider asked for, if any.
        retry_after: Option<Duration>,
    },
    /// The connection could not be made or broke before a response began.
    #[error("could not reach {provider} at {url}: {message}")]
    Connect {
        /// Provider id.
        provider: String,
        /// The endpoint URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The response started but was cut off before it completed.
    #[error("{provider}'s response stream was cut off: {message}")]
    StreamCut {
        /// Provider id.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// The provider sent something that is not the documented format.
    #[error("{provider} sent a malformed response: {message}")]
    Malformed {
        /// Provider id.
        provider: String,
        /// What was wrong with it.
        message: String,
    },
    /// One attempt took longer than the layer's limit.
    #[error("{provider} did not answer within {}", humantime::format_duration(*.after))]
    Timeout {
        /// Provider id.
        provider: String,
        /// The limit that was hit.
        after: Duration,
    },
    /// The provider's API key variable is not set.
    #[error("the API key for provider `{provider}` is missing: set the environment variable {var}")]
    MissingKey {
        /// Provider id.
        provider: String,
        /// The variable to set.
        var: String,
    },
    /// The model named no configured provider (a config/engine mismatch).
    #[error("no provider is configured for model `{0}`")]
    UnknownModel(String),
    /// The egress guard found a real value in the outbound payload: nothing was sent.
    #[error(
        "the privacy egress guard stopped a request to {provider}: it still carried a real {kind} value; nothing was sent"
    )]
    Leak {
        /// Provider id.
        provider: String,
        /// The type of the value found (never the value).
        kind: opc_privacy::EntityType,
    },
    /// The privacy layer could not mask the request (e.g. the conversation's vault is full), so the
    /// call was not made.
    #[error("the privacy gateway could not mask the request, so it was not sent: {0}")]
    Privacy(String),
    /// Retries were exhausted; the last error is inside.
    #[error("{last} (gave up after {attempts} attempts)")]
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: Box<LlmError>,
    },
}

impl LlmError {
    /// Whether another attempt may succeed: 429, 5xx (and 408/409/529), connection failures, cut
    /// streams and timeouts. Malformed bodies, 4xx and missing keys are the caller's problem.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => {
                matches!(status, 408 | 409 | 429) || (500..=599).contains(status)
            }
            LlmError::Connect { .. } | LlmError::StreamCut { .. } | LlmError::Timeout { .. } => {
                true
            }
            LlmError::Malformed { .. }
            | LlmError::MissingKey { .. }
            | LlmError::UnknownModel(_)
            | LlmError::Leak { .. }
            | LlmError::Privacy(_)
            | LlmError::Exhausted { .. } => false,
        }
    }

    /// The kind of failure, for logs: no provider text, no URL (either could carry content or keys).
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Status { .. } => "http_status",
            LlmError::Connect { .. } => "connect",
            LlmError::StreamCut { .. } => "stream_cut",
            LlmError::Malformed { .. } => "malformed",
            LlmError::Timeout { .. } => "timeout",
            LlmError::MissingKey { .. } => "missing_key",
            LlmError::UnknownModel(_) => "unknown_model",
            LlmError::Leak { .. } => "privacy_leak",
            LlmError::Privacy(_) => "privacy",
            LlmError::Exhausted { last, .. } => last.kind(),
        }
    }

    /// The HTTP status, when the provider answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Status { status, .. } => Some(*status),
            LlmError::Exhausted { last, .. } => last.status(),
            _ => None,
        }
    }

    /// The delay the provider asked for before the next attempt.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Anything that answers an [`LlmRequest`]: a provider at the bottom of the stack, or a layer around one.
#[async_trait::async_trait]
pub trait LlmService: Send + Sync + 'static {
    /// Run one chat completion.
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError>;
}

/// A shared, type-erased service: what layers wrap and what the engine holds.
pub type SharedLlm = Arc<dyn LlmService>;

/// Wraps a service with one behaviour (timeout, retry, rate limit, privacy, tracing, cost, …).
pub trait Layer: Send + Sync {
    /// Return `inner` wrapped in this layer's behaviour.
    fn layer(&self, inner: SharedLlm) -> SharedLlm;

    /// A short name for the stack's description (`trace`, `retry`, …); the type name by default.
    fn name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
}

/// An ordered list of layers; the first added is the outermost (sees the request first).
#[derive(Default)]
pub struct Stack {
    layers: Vec<Box<dyn Layer>>,
}

impl Stack {
    /// An empty stack.
    pub fn new() -> Self {
        Stack::default()
    }

    /// Add a layer inside the ones already added.
    pub fn layer(mut self, layer: impl Layer + 'static) -> Self {
        self.push(Box::new(layer));
        self
    }

    fn push(&mut self, layer: Box<dyn Layer>) {
        self.layers.push(layer);
    }

    /// Add a layer when `layer` is `Some` (for optional behaviour such as privacy).
    pub fn option_layer(self, layer: Option<impl Layer + 'static>) -> Self {
        match layer {
            Some(layer) => self.layer(layer),
            None => self,
        }
    }

    /// The layers' names, outermost first.
    pub fn names(&self) -> Vec<&'static str> {
        self.layers.iter().map(|layer| layer.name()).collect()
    }

    /// Wrap `service` in every layer, the last added innermost.
    pub fn service(self, service: SharedLlm) -> SharedLlm {
        self.layers
            .iter()
            .rev()
            .fold(service, |inner, layer| layer.layer(inner))
    }
}
