//! The model call as OpenTelemetry sees it: the `chat {model}` span of the GenAI semantic
//! conventions, its outcome and metrics, and (when content capture is on) the messages as the
//! model saw them.
//!
//! Why two places in the stack: the span is opened by the outermost `trace` layer, so it covers
//! the privacy work and every attempt; the content is captured by [`CaptureLayer`], which sits
//! **below** the privacy layer (just above the router), where the request is already masked and
//! the response not yet restored. So the only content a span can ever carry is what the model
//! saw; a real value the gateway masked never reaches it.
//!
//! Invariants:
//! - attributes are ids, names, models, counts and outcomes; content only under capture, masked;
//! - with telemetry off the span is disabled and nothing here allocates beyond a few checks;
//! - the layers below record onto this span through `tracing::Span::current()` (the wire client
//!   its `gen_ai.provider.name`, retry its `retry` events): nothing else opens a span between
//!   here and the wire, so the current span is this one.

use std::sync::Arc;
use std::time::Duration;

use opc_telemetry::conventions::CHAT;
use opc_telemetry::metrics::{instruments, kv};
use opc_telemetry::opentelemetry;
use opc_telemetry::tracing_opentelemetry::OpenTelemetrySpanExt;
use serde_json::{Value, json};

use super::{
    Content, Layer, LlmError, LlmRequest, LlmResponse, LlmService, Message, Role, SharedLlm,
    StopReason,
};

/// Open the `chat {model}` span of one call (disabled unless telemetry exports it).
pub(crate) fn chat_span(request: &LlmRequest) -> tracing::Span {
    tracing::info_span!(
        target: opc_telemetry::TARGET,
        "chat",
        otel.name = %format_args!("{CHAT} {}", request.model),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = CHAT,
        gen_ai.provider.name = tracing::field::Empty,
        gen_ai.request.model = request.model.as_str(),
        gen_ai.request.max_tokens = i64::from(request.max_tokens),
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.conversation.id = request.meta.conversation.as_deref(),
        error.type = tracing::field::Empty,
        opc.agent = request.meta.agent.as_str(),
        opc.task.id = request.meta.task_id,
        opc.work = request.meta.work.as_str(),
        opc.provider = request.provider.as_str(),
        opc.attempts = tracing::field::Empty,
        opc.cost_usd = tracing::field::Empty,
        gen_ai.system_instructions = tracing::field::Empty,
        gen_ai.input.messages = tracing::field::Empty,
        gen_ai.output.messages = tracing::field::Empty,
    )
}

/// Record a call's outcome on its span, and the conventions' client metrics.
pub(crate) fn record_outcome(
    span: &tracing::Span,
    request_model: &str,
    provider: &str,
    result: &Result<LlmResponse, LlmError>,
    elapsed: Duration,
) {
    let instruments = instruments();
    let response_model = match result {
        // A call `route` sent elsewhere was answered by that model.
        Ok(response) => response
            .privacy
            .as_ref()
            .and_then(|p| p.routed_to.as_deref())
            .and_then(|to| to.split_once('/').map(|(_, model)| model))
            .unwrap_or(request_model),
        Err(_) => request_model,
    };
    let mut attributes = vec![
        kv("gen_ai.operation.name", CHAT),
        kv("gen_ai.request.model", request_model.to_string()),
        kv("opc.provider", provider.to_string()),
    ];
    match result {
        Ok(response) => {
            attributes.push(kv("gen_ai.response.model", response_model.to_string()));
            if !span.is_disabled() {
                span.record("gen_ai.response.model", response_model);
                span.record("opc.attempts", i64::from(response.attempts));
                span.record("opc.cost_usd", response.cost_usd);
                span.set_attribute(
                    "gen_ai.response.finish_reasons",
                    opentelemetry::Value::Array(opentelemetry::Array::String(vec![
                        finish_reason(&response.stop_reason).to_string().into(),
                    ])),
                );
            }
            if let Some(usage) = response.usage {
                span.record("gen_ai.usage.input_tokens", as_i64(usage.input_tokens));
                span.record("gen_ai.usage.output_tokens", as_i64(usage.output_tokens));
                let mut input = attributes.clone();
                input.push(kv("gen_ai.token.type", "input"));
                instruments.token_usage.record(usage.input_tokens, &input);
                let mut output = attributes.clone();
                output.push(kv("gen_ai.token.type", "output"));
                instruments.token_usage.record(usage.output_tokens, &output);
            }
        }
        Err(error) => {
            span.record("error.type", error.kind());
            span.record("otel.status_code", "error");
            attributes.push(kv("error.type", error.kind()));
        }
    }
    instruments
        .operation_duration
        .record(elapsed.as_secs_f64(), &attributes);
}

/// A retry, as an event on the current `chat` span (the retry layer runs inside it).
pub(crate) fn retry_event(attempt: u32, error: &LlmError, delay: Duration) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    let mut attributes = vec![
        kv("opc.retry.attempt", i64::from(attempt)),
        kv("error.type", error.kind()),
        kv("opc.retry.delay_ms", delay.as_millis() as i64),
    ];
    if let Some(status) = error.status() {
        attributes.push(kv("http.response.status_code", i64::from(status)));
    }
    span.add_event("retry", attributes);
}

/// A count as an OpenTelemetry integer attribute. Why not `u64`: the `tracing` bridge has no
/// unsigned integers and would export a `u64` field as its text.
fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The conventions' finish reason for a stop reason.
fn finish_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_call",
        StopReason::MaxTokens => "length",
        StopReason::Other(other) => other,
    }
}

/// Captures the request and response content on the current `chat` span when content capture is
/// on. It sits directly above the router, below the privacy layer: see the module doc.
pub struct CaptureLayer {
    /// A privacy layer is above: capture only requests it masked (they carry its egress guard).
    /// A request `route` sent to the trusted model as written carries none, and its real values
    /// must not be exported either.
    pub masked_only: bool,
}

struct Capture {
    inner: SharedLlm,
    masked_only: bool,
}

impl Layer for CaptureLayer {
    fn name(&self) -> &'static str {
        "capture"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Capture {
            inner,
            masked_only: self.masked_only,
        })
    }
}

#[async_trait::async_trait]
impl LlmService for Capture {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let span = tracing::Span::current();
        let capture = opc_telemetry::capture_content()
            && !span.is_disabled()
            && (!self.masked_only || request.guard.is_some());
        if capture {
            if !request.system.is_empty() {
                let system = json!([{ "type": "text", "content": request.system }]);
                span.record("gen_ai.system_instructions", system.to_string());
            }
            span.record(
                "gen_ai.input.messages",
                input_messages(&request.messages).to_string(),
            );
        }
        let result = self.inner.call(request).await;
        if capture && let Ok(response) = &result {
            span.record(
                "gen_ai.output.messages",
                output_message(response).to_string(),
            );
        }
        result
    }
}

/// `gen_ai.input.messages`: the conventions' chat history (roles `user`, `assistant`, `tool`;
/// parts `text`, `tool_call`, `tool_call_response`).
fn input_messages(messages: &[Message]) -> Value {
    let mut out = Vec::new();
    for message in messages {
        let (calls, results): (Vec<&Content>, Vec<&Content>) = message
            .content
            .iter()
            .partition(|c| !matches!(c, Content::ToolResult { .. }));
        if !calls.is_empty() {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            out.push(
                json!({ "role": role, "parts": calls.iter().map(|c| part(c)).collect::<Vec<_>>() }),
            );
        }
        if !results.is_empty() {
            out.push(json!({ "role": "tool", "parts": results.iter().map(|c| part(c)).collect::<Vec<_>>() }));
        }
    }
    Value::Array(out)
}

/// `gen_ai.output.messages`: the model's one message, with its finish reason.
fn output_message(response: &LlmResponse) -> Value {
    json!([{
        "role": "assistant",
        "parts": response.content.iter().map(part).collect::<Vec<_>>(),
        "finish_reason": finish_reason(&response.stop_reason),
    }])
}

fn part(content: &Content) -> Value {
    match content {
        Content::Text { text } => json!({ "type": "text", "content": text }),
        Content::ToolUse { id, name, input } => {
            json!({ "type": "tool_call", "id": id, "name": name, "arguments": input })
        }
        Content::ToolResult {
            tool_use_id,
            content,
            ..
        } => json!({ "type": "tool_call_response", "id": tool_use_id, "response": content }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;

    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::*;
    use crate::llm::{CallMeta, EgressGuard, LeakCheck};

    /// Collects the names of the fields recorded on spans after their creation.
    #[derive(Clone, Default)]
    struct Recorded(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorded {
        fn on_record(
            &self,
            _: &tracing::span::Id,
            values: &tracing::span::Record<'_>,
            _: Context<'_, S>,
        ) {
            struct Names<'a>(&'a mut Vec<String>);
            impl tracing::field::Visit for Names<'_> {
                fn record_debug(&mut self, field: &tracing::field::Field, _: &dyn std::fmt::Debug) {
                    self.0.push(field.name().to_string());
                }
            }
            values.record(&mut Names(&mut self.0.lock().unwrap()));
        }
    }

    struct Answers;

    #[async_trait::async_trait]
    impl LlmService for Answers {
        async fn call(&self, _: LlmRequest) -> Result<LlmResponse, LlmError> {
            Ok(LlmResponse {
                content: vec![Content::text("done")],
                stop_reason: StopReason::EndTurn,
                usage: None,
                cost_usd: 0.0,
                attempts: 1,
                privacy: None,
            })
        }
    }

    struct NoLeak;

    impl LeakCheck for NoLeak {
        fn leak_in(&self, _: &str) -> Option<opc_privacy::EntityType> {
            None
        }
    }

    fn request(guarded: bool) -> LlmRequest {
        LlmRequest {
            provider: "p".into(),
            model: "m".into(),
            system: "You are the CEO.".into(),
            messages: vec![Message::user("hello")],
            tools: vec![],
            tool_choice: None,
            max_tokens: 100,
            stream: None,
            meta: CallMeta {
                agent: "ceo".into(),
                task_id: Some(1),
                root_id: Some(1),
                conversation: Some("c-1".into()),
                work: Default::default(),
            },
            guard: guarded.then(|| EgressGuard::new(NoLeak)),
        }
    }

    /// What the capture layer records on the `chat` span for one call.
    fn captured(masked_only: bool, guarded: bool) -> Vec<String> {
        let recorded = Recorded::default();
        let subscriber = tracing_subscriber::registry().with(recorded.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let service = CaptureLayer { masked_only }.layer(Arc::new(Answers));
        let request = request(guarded);
        let span = chat_span(&request);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime
            .block_on(tracing::Instrument::instrument(service.call(request), span))
            .unwrap();
        recorded.0.lock().unwrap().clone()
    }

    #[test]
    fn content_is_captured_only_when_asked_and_only_as_the_privacy_layer_masked_it() {
        opc_telemetry::set_capture_content(true);
        let masked = captured(true, true);
        assert!(
            masked.contains(&"gen_ai.input.messages".to_string()),
            "{masked:?}"
        );
        assert!(
            masked.contains(&"gen_ai.output.messages".to_string()),
            "{masked:?}"
        );
        // `route` sent this request to the trusted model as written: no guard, no capture.
        assert_eq!(captured(true, false), Vec::<String>::new());
        // No privacy layer in the stack: what is sent is what is captured.
        assert!(captured(false, false).contains(&"gen_ai.input.messages".to_string()));
        opc_telemetry::set_capture_content(false);
        assert_eq!(captured(false, true), Vec::<String>::new());
    }

    #[test]
    fn a_history_reads_as_the_conventions_messages() {
        let messages = vec![
            Message::user("Write to <PERSON_1>"),
            Message {
                role: Role::Assistant,
                content: vec![Content::ToolUse {
                    id: "t1".into(),
                    name: "Bash".into(),
                    input: json!({"command": "ls"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![Content::ToolResult {
                    tool_use_id: "t1".into(),
                    content: "a.txt".into(),
                    is_error: false,
                }],
            },
        ];
        assert_eq!(
            input_messages(&messages),
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "Write to <PERSON_1>"}]},
                {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "Bash", "arguments": {"command": "ls"}}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": "a.txt"}]},
            ])
        );
    }
}
