//! The Anthropic Messages API wire client: [`AnthropicClient`] turns an [`LlmRequest`] into
//! `POST {base_url}/v1/messages` and the answer (JSON or Server-Sent Events) back into an
//! [`LlmResponse`].
//!
//! Invariants:
//! - a missing API key fails with [`LlmError::MissingKey`] before any network I/O;
//! - the key travels only in the `x-api-key` header; nothing logged names a key, the request or the
//!   message text (tracing fields are provider, model and status);
//! - a streamed response is complete only at `message_stop`: a body that ends before it, cleanly or
//!   not, is [`LlmError::StreamCut`]; streamed text is sent to the request's sink as it arrives;
//! - tool-use input that is not valid JSON is kept as a JSON string (the engine reports it to the model
//!   as invalid arguments) rather than failing the call;
//! - `cost_usd` is 0 and `attempts` 1: the cost and retry layers fill them in.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::endpoint::{Endpoint, guarded_body};
use super::sse::{self, SseEvent, SseMachine};
use super::{
    Content, LlmError, LlmRequest, LlmResponse, LlmService, Role, StopReason, StreamDelta,
    TokenSink, ToolChoice, Usage,
};

/// The API version this client speaks.
const API_VERSION: &str = "2023-06-01";

/// An [`LlmService`] that calls one Anthropic Messages API endpoint.
pub struct AnthropicClient {
    client: reqwest::Client,
    endpoint: Endpoint,
    url: String,
}

impl AnthropicClient {
    /// A client for `endpoint` (base URL such as `https://api.anthropic.com`) over the shared `client`.
    pub fn new(client: reqwest::Client, endpoint: Endpoint) -> Self {
        let url = format!("{}/v1/messages", endpoint.base_url.trim_end_matches('/'));
        AnthropicClient {
            client,
            endpoint,
            url,
        }
    }
}

#[async_trait::async_trait]
impl LlmService for AnthropicClient {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        // The `chat` span of this call is the current span (`super::genai`).
        tracing::Span::current().record("gen_ai.provider.name", "anthropic");
        let key = self.endpoint.require_key()?;
        let provider = self.endpoint.provider.as_str();
        let body = guarded_body(&request_body(&request), &request, provider)?;
        let mut http = self
            .client
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = key {
            http = http.header("x-api-key", key.expose());
        }
        tracing::debug!(provider, model = %request.model, "calling Anthropic messages");
        let response = sse::send(http, provider, &request.model, &self.url).await?;
        match request.stream {
            Some(sink) => {
                sse::drive(response, provider, StreamState::new(provider, Some(sink))).await
            }
            None => {
                let wire: WireResponse = sse::read_json(response, provider).await?;
                wire.into_response(provider)
            }
        }
    }
}

/// The JSON body of a Messages API request.
fn request_body(request: &LlmRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            // The API rejects empty text blocks; drop them unless they are all the message has.
            let only_block = message.content.len() == 1;
            let content: Vec<Value> = message
                .content
                .iter()
                .filter(|block| {
                    only_block || !matches!(block, Content::Text { text } if text.is_empty())
                })
                .map(content_block)
                .collect();
            json!({ "role": role, "content": content })
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        match &request.tool_choice {
            Some(ToolChoice::Auto) => body["tool_choice"] = json!({ "type": "auto" }),
            Some(ToolChoice::Tool(name)) => {
                body["tool_choice"] = json!({ "type": "tool", "name": name })
            }
            None => {}
        }
    }
    if request.stream.is_some() {
        body["stream"] = json!(true);
    }
    body
}

/// One content block in the wire format.
fn content_block(block: &Content) -> Value {
    match block {
        Content::Text { text } => json!({ "type": "text", "text": text }),
        Content::ToolUse { id, name, input } => {
            json!({ "type": "tool_use", "id": id, "name": name, "input": input })
        }
        Content::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => json!({
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
            "is_error": is_error,
        }),
    }
}

/// A provider stop reason in our terms.
fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_string()),
    }
}

/// A non-streamed Messages API response.
#[derive(Deserialize)]
struct WireResponse {
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

impl WireResponse {
    fn into_response(self, provider: &str) -> Result<LlmResponse, LlmError> {
        let reason = self
            .stop_reason
            .ok_or_else(|| sse::malformed(provider, "response has no stop_reason"))?;
        let content = self
            .content
            .into_iter()
            .filter_map(|block| match block {
                WireBlock::Text { text } => Some(Content::Text { text }),
                WireBlock::ToolUse { id, name, input } => {
                    Some(Content::ToolUse { id, name, input })
                }
                WireBlock::Other => None,
            })
            .collect();
        Ok(LlmResponse {
            content,
            stop_reason: stop_reason(&reason),
            usage: Usage::reported(self.usage.input_tokens, self.usage.output_tokens),
            cost_usd: 0.0,
            attempts: 1,
            privacy: None,
        })
    }
}

/// A content block as the API sends it; kinds we do not use (thinking, server tools) are skipped.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

/// Token counts as the API sends them (either may be absent in a streamed event).
#[derive(Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

/// One streamed event's data, by its `type`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A content block while it streams in.
enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The `input` from `content_block_start`, used when no JSON deltas follow.
        start_input: Value,
        json: String,
        /// Whether any `input_json_delta` arrived.
        streamed: bool,
    },
    /// A block kind we do not use; its deltas are ignored.
    Skipped,
    /// A finished block.
    Done(Option<Content>),
}

impl Partial {
    fn finish(self) -> Option<Content> {
        match self {
            Partial::Text(text) if text.is_empty() => None,
            Partial::Text(text) => Some(Content::Text { text }),
            Partial::ToolUse {
                id,
                name,
                start_input,
                json,
                streamed,
            } => {
                let input = if !streamed {
                    match start_input {
                        Value::Null => json!({}),
                        input => input,
                    }
                } else if json.trim().is_empty() {
                    json!({})
                } else {
                    // Invalid JSON is kept verbatim for the engine to report to the model.
                    serde_json::from_str(&json).unwrap_or(Value::String(json))
                };
                Some(Content::ToolUse { id, name, input })
            }
            Partial::Skipped => None,
            Partial::Done(content) => content,
        }
    }
}

/// The streaming accumulator: Messages API events in, one [`LlmResponse`] out at `message_stop`.
struct StreamState {
    provider: String,
    sink: Option<TokenSink>,
    blocks: BTreeMap<u64, Partial>,
    stop_reason: Option<String>,
    usage: Option<Usage>,
    started: bool,
}

impl StreamState {
    fn new(provider: &str, sink: Option<TokenSink>) -> Self {
        StreamState {
            provider: provider.to_string(),
            sink,
            blocks: BTreeMap::new(),
            stop_reason: None,
            usage: None,
            started: false,
        }
    }

    fn malformed(&self, message: impl Into<String>) -> LlmError {
        sse::malformed(&self.provider, message)
    }

    fn block(&mut self, index: u64) -> Result<&mut Partial, LlmError> {
        let provider = &self.provider;
        self.blocks.get_mut(&index).ok_or_else(|| {
            sse::malformed(
                provider,
                format!("event for content block {index}, which never started"),
            )
        })
    }

    fn complete(&mut self) -> Result<LlmResponse, LlmError> {
        let reason = self
            .stop_reason
            .take()
            .ok_or_else(|| self.malformed("message_stop without a stop_reason"))?;
        let content = std::mem::take(&mut self.blocks)
            .into_values()
            .filter_map(Partial::finish)
            .collect();
        Ok(LlmResponse {
            content,
            stop_reason: stop_reason(&reason),
            usage: self.usage,
            cost_usd: 0.0,
            attempts: 1,
            privacy: None,
        })
    }
}

impl SseMachine for StreamState {
    fn feed(&mut self, event: &SseEvent) -> Result<Option<LlmResponse>, LlmError> {
        let wire: WireEvent =
            sse::parse_json(event.data.as_bytes(), &self.provider, "stream event")?;
        match wire {
            WireEvent::MessageStart { message } => {
                self.started = true;
                self.usage =
                    Usage::reported(message.usage.input_tokens, message.usage.output_tokens);
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let partial = match content_block {
                    WireBlock::Text { text } => Partial::Text(text),
                    WireBlock::ToolUse { id, name, input } => Partial::ToolUse {
                        id,
                        name,
                        start_input: input,
                        json: String::new(),
                        streamed: false,
                    },
                    WireBlock::Other => Partial::Skipped,
                };
                if self.blocks.insert(index, partial).is_some() {
                    return Err(self.malformed(format!("content block {index} started twice")));
                }
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                let sink = self.sink.clone();
                let block = self.block(index)?;
                match (block, delta) {
                    (Partial::Text(text), WireDelta::TextDelta { text: more }) => {
                        if let Some(sink) = sink {
                            // A gone consumer must not fail the call.
                            sink.send(StreamDelta::Text(more.clone()));
                        }
                        text.push_str(&more);
                    }
                    (
                        Partial::ToolUse { json, streamed, .. },
                        WireDelta::InputJsonDelta { partial_json },
                    ) => {
                        json.push_str(&partial_json);
                        *streamed = true;
                    }
                    (Partial::Skipped, _) | (_, WireDelta::Other) => {}
                    (Partial::Done(_), _) => {
                        return Err(self
                            .malformed(format!("delta for content block {index} after its stop")));
                    }
                    _ => {
                        return Err(self.malformed(format!(
                            "delta of the wrong kind for content block {index}"
                        )));
                    }
                }
            }
            WireEvent::ContentBlockStop { index } => {
                let block = self.block(index)?;
                let done = std::mem::replace(block, Partial::Done(None));
                *block = Partial::Done(done.finish());
            }
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(reason);
                }
                if let Some(output) = usage.output_tokens {
                    self.usage.get_or_insert_default().output_tokens = output;
                }
                // Newer API versions repeat the (cumulative) input count here.
                if let Some(input) = usage.input_tokens.filter(|n| *n > 0) {
                    self.usage.get_or_insert_default().input_tokens = input;
                }
            }
            WireEvent::MessageStop => {
                if !self.started {
                    return Err(self.malformed("message_stop before message_start"));
                }
                return self.complete().map(Some);
            }
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => {
                let status = if error.kind == "overloaded_error" {
                    529
                } else {
                    500
                };
                let message = if error.message.is_empty() {
                    error.kind
                } else {
                    error.message
                };
                return Err(LlmError::Status {
                    provider: self.provider.clone(),
                    status,
                    message: sse::truncate(&message, sse::ERROR_BODY_CHARS),
                    retry_after: None,
                });
            }
        }
        Ok(None)
    }

    fn finish(self) -> Result<LlmResponse, LlmError> {
        Err(sse::stream_cut(
            &self.provider,
            "the stream ended before message_stop",
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::llm::endpoint::{ApiKey, http_client};
    use crate::llm::sse::test_server;
    use crate::llm::{CallMeta, Message, ToolSpec};

    fn request(messages: Vec<Message>) -> LlmRequest {
        LlmRequest {
            provider: "anthropic".into(),
            model: "claude-x".into(),
            system: String::new(),
            messages,
            tools: vec![],
            tool_choice: None,
            max_tokens: 100,
            stream: None,
            meta: CallMeta::default(),
            guard: None,
        }
    }

    fn endpoint(base_url: &str, key: Option<&str>, key_var: Option<&str>) -> Endpoint {
        Endpoint {
            provider: "anthropic".into(),
            base_url: base_url.into(),
            key: key.map(ApiKey::new),
            key_var: key_var.map(String::from),
        }
    }

    fn feed_all(state: &mut StreamState, events: &[(&str, Value)]) -> Option<LlmResponse> {
        let mut done = None;
        for (name, data) in events {
            let out = state.feed(&SseEvent::new(name, &data.to_string())).unwrap();
            if out.is_some() {
                done = out;
            }
        }
        done
    }

    #[test]
    fn tool_choice_forces_a_tool_only_when_asked() {
        let mut req = request(vec![Message::user("go")]);
        assert!(request_body(&req).get("tool_choice").is_none());
        req.tool_choice = Some(ToolChoice::Tool("record_facts".into()));
        // Without tools there is nothing to force.
        assert!(request_body(&req).get("tool_choice").is_none());
        req.tools = vec![ToolSpec {
            name: "record_facts".into(),
            description: "facts".into(),
            input_schema: json!({"type": "object"}),
        }];
        assert_eq!(
            request_body(&req)["tool_choice"],
            json!({"type": "tool", "name": "record_facts"})
        );
        req.tool_choice = Some(ToolChoice::Auto);
        assert_eq!(request_body(&req)["tool_choice"], json!({"type": "auto"}));
    }

    #[test]
    fn body_has_model_tokens_and_messages_and_omits_empty_parts() {
        let body = request_body(&request(vec![Message::user("hi")]));
        assert_eq!(
            body,
            json!({
                "model": "claude-x",
                "max_tokens": 100,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            })
        );
    }

    #[test]
    fn body_carries_system_tools_stream_and_tool_round_trip() {
        let (tx, _rx) = TokenSink::channel();
        let mut req = request(vec![
            Message::user("do it"),
            Message {
                role: Role::Assistant,
                content: vec![
                    Content::text(""),
                    Content::ToolUse {
                        id: "tu_1".into(),
                        name: "delegate".into(),
                        input: json!({"to": "cto"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![Content::ToolResult {
                    tool_use_id: "tu_1".into(),
                    content: "boom".into(),
                    is_error: true,
                }],
            },
        ]);
        req.system = "be brief".into();
        req.stream = Some(tx);
        req.tools = vec![ToolSpec {
            name: "delegate".into(),
            description: "hand off".into(),
            input_schema: json!({"type": "object"}),
        }];
        let body = request_body(&req);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["stream"], true);
        assert_eq!(
            body["tools"],
            json!([{"name": "delegate", "description": "hand off", "input_schema": {"type": "object"}}])
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "tu_1", "name": "delegate", "input": {"to": "cto"}}
            ]})
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "boom", "is_error": true}
            ]})
        );
    }

    #[test]
    fn parses_a_non_streamed_response() {
        let wire: WireResponse = serde_json::from_value(json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Sure."},
                {"type": "tool_use", "id": "tu_9", "name": "delegate", "input": {"to": "cfo"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 12, "output_tokens": 34}
        }))
        .unwrap();
        let response = wire.into_response("anthropic").unwrap();
        assert_eq!(
            response,
            LlmResponse {
                content: vec![
                    Content::text("Sure."),
                    Content::ToolUse {
                        id: "tu_9".into(),
                        name: "delegate".into(),
                        input: json!({"to": "cfo"}),
                    },
                ],
                stop_reason: StopReason::ToolUse,
                usage: Some(Usage {
                    input_tokens: 12,
                    output_tokens: 34
                }),
                cost_usd: 0.0,
                attempts: 1,
                privacy: None,
            }
        );
    }

    #[test]
    fn non_streamed_response_without_content_is_malformed() {
        let err = sse::parse_json::<WireResponse>(
            br#"{"stop_reason":"end_turn"}"#,
            "anthropic",
            "response body",
        )
        .err()
        .unwrap();
        assert!(matches!(err, LlmError::Malformed { .. }), "{err:?}");
        let err = sse::parse_json::<WireResponse>(b"<html>", "anthropic", "response body")
            .err()
            .unwrap();
        assert!(matches!(err, LlmError::Malformed { .. }), "{err:?}");
        let wire: WireResponse = serde_json::from_value(json!({"content": []})).unwrap();
        assert!(matches!(
            wire.into_response("a"),
            Err(LlmError::Malformed { .. })
        ));
    }

    #[test]
    fn stop_reasons_map() {
        assert_eq!(stop_reason("end_turn"), StopReason::EndTurn);
        assert_eq!(stop_reason("stop_sequence"), StopReason::EndTurn);
        assert_eq!(stop_reason("tool_use"), StopReason::ToolUse);
        assert_eq!(stop_reason("max_tokens"), StopReason::MaxTokens);
        assert_eq!(stop_reason("refusal"), StopReason::Other("refusal".into()));
    }

    fn full_stream() -> Vec<(&'static str, Value)> {
        vec![
            (
                "message_start",
                json!({"type": "message_start", "message": {
                "id": "m", "content": [], "usage": {"input_tokens": 25, "output_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
            ("ping", json!({"type": "ping"})),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "Hel"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "lo"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "tu_1", "name": "delegate", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"to\": \"c"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "to\"}"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 2,
                "content_block": {"type": "tool_use", "id": "tu_2", "name": "noop", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": ""}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 2}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"output_tokens": 42}}),
            ),
        ]
    }

    #[test]
    fn stream_accumulates_text_and_tool_input_and_streams_text() {
        let (tx, mut rx) = TokenSink::channel();
        let mut state = StreamState::new("anthropic", Some(tx));
        assert!(feed_all(&mut state, &full_stream()).is_none());
        let done = state
            .feed(&SseEvent::new("message_stop", r#"{"type":"message_stop"}"#))
            .unwrap()
            .unwrap();
        assert_eq!(
            done.content,
            vec![
                Content::text("Hello"),
                Content::ToolUse {
                    id: "tu_1".into(),
                    name: "delegate".into(),
                    input: json!({"to": "cto"}),
                },
                Content::ToolUse {
                    id: "tu_2".into(),
                    name: "noop".into(),
                    input: json!({}),
                },
            ]
        );
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        assert_eq!(
            done.usage,
            Some(Usage {
                input_tokens: 25,
                output_tokens: 42
            })
        );
        assert_eq!(rx.try_recv().unwrap(), StreamDelta::Text("Hel".into()));
        assert_eq!(rx.try_recv().unwrap(), StreamDelta::Text("lo".into()));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn stream_keeps_invalid_tool_json_as_a_string() {
        let mut state = StreamState::new("anthropic", None);
        feed_all(
            &mut state,
            &[
                (
                    "message_start",
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
                ),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {}}}),
                ),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
                ),
                (
                    "message_delta",
                    json!({"type": "message_delta",
                    "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 5}}),
                ),
            ],
        );
        let done = state
            .feed(&SseEvent::new("message_stop", r#"{"type":"message_stop"}"#))
            .unwrap()
            .unwrap();
        assert_eq!(
            done.content,
            vec![Content::ToolUse {
                id: "t".into(),
                name: "n".into(),
                input: Value::String("{\"a\": ".into()),
            }]
        );
        assert_eq!(done.stop_reason, StopReason::MaxTokens);
    }

    #[test]
    fn stream_ending_before_message_stop_is_cut() {
        let mut state = StreamState::new("anthropic", None);
        feed_all(&mut state, &full_stream());
        assert!(matches!(state.finish(), Err(LlmError::StreamCut { .. })));
    }

    #[test]
    fn stream_error_event_maps_to_status() {
        let mut state = StreamState::new("anthropic", None);
        let err = state
            .feed(&SseEvent::new(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ))
            .unwrap_err();
        assert_eq!(
            err,
            LlmError::Status {
                provider: "anthropic".into(),
                status: 529,
                message: "Overloaded".into(),
                retry_after: None,
            }
        );
        let err = state
            .feed(&SseEvent::new(
                "error",
                r#"{"type":"error","error":{"type":"api_error","message":"Internal"}}"#,
            ))
            .unwrap_err();
        assert!(
            matches!(err, LlmError::Status { status: 500, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn stream_rejects_garbage_and_orphan_deltas() {
        let mut state = StreamState::new("anthropic", None);
        assert!(matches!(
            state.feed(&SseEvent::new("message", "not json")),
            Err(LlmError::Malformed { .. })
        ));
        let orphan = json!({"type": "content_block_delta", "index": 3,
            "delta": {"type": "text_delta", "text": "x"}});
        assert!(matches!(
            state.feed(&SseEvent::new("content_block_delta", &orphan.to_string())),
            Err(LlmError::Malformed { .. })
        ));
    }

    #[tokio::test]
    async fn missing_key_fails_before_any_request() {
        // Loopback port 9 (discard, not served here): a request would fail with Connect instead.
        let client = AnthropicClient::new(
            http_client(),
            endpoint("http://127.0.0.1:9", None, Some("ANTHROPIC_API_KEY")),
        );
        let err = client
            .call(request(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            LlmError::MissingKey {
                provider: "anthropic".into(),
                var: "ANTHROPIC_API_KEY".into(),
            }
        );
    }

    #[tokio::test]
    async fn non_streamed_call_over_http() {
        let (base, seen) = test_server::serve(test_server::response(
            "200 OK",
            &[],
            "application/json",
            r#"{"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}"#,
        ))
        .await;
        let client =
            AnthropicClient::new(http_client(), endpoint(&base, Some("sk-secret"), Some("K")));
        let response = client
            .call(request(vec![Message::user("hi")]))
            .await
            .unwrap();
        assert_eq!(response.content, vec![Content::text("ok")]);
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        let seen = seen.await.unwrap();
        let head = seen.head.to_lowercase();
        assert!(head.starts_with("post /v1/messages "), "{head}");
        assert!(head.contains("x-api-key: sk-secret"));
        assert!(head.contains("anthropic-version: 2023-06-01"));
        assert!(head.contains("content-type: application/json"));
        assert_eq!(seen.body["model"], "claude-x");
    }

    #[tokio::test]
    async fn streamed_call_over_http_and_cut_stream() {
        let events = full_stream()
            .into_iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
            .collect::<String>();
        let complete =
            format!("{events}event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n");
        let (base, seen) = test_server::serve(test_server::event_stream(&complete)).await;
        let client = AnthropicClient::new(http_client(), endpoint(&base, None, None));
        let (tx, mut rx) = TokenSink::channel();
        let mut req = request(vec![Message::user("hi")]);
        req.stream = Some(tx);
        let response = client.call(req).await.unwrap();
        assert_eq!(
            response.usage,
            Some(Usage {
                input_tokens: 25,
                output_tokens: 42
            })
        );
        assert_eq!(rx.try_recv().unwrap(), StreamDelta::Text("Hel".into()));
        let seen = seen.await.unwrap();
        assert!(!seen.head.to_lowercase().contains("x-api-key"));
        assert_eq!(seen.body["stream"], true);

        let (base, _seen) = test_server::serve(test_server::event_stream(&events)).await;
        let client = AnthropicClient::new(http_client(), endpoint(&base, None, None));
        let (tx, _rx) = TokenSink::channel();
        let mut req = request(vec![Message::user("hi")]);
        req.stream = Some(tx);
        let err = client.call(req).await.unwrap_err();
        assert!(matches!(err, LlmError::StreamCut { .. }), "{err:?}");
    }
}
