//! The OpenAI-compatible Chat Completions wire client: [`OpenAiClient`] turns an [`LlmRequest`] into
//! `POST {base_url}/chat/completions` and the answer (JSON or Server-Sent Events) back into an
//! [`LlmResponse`]. It serves OpenAI itself and the local servers that copy its API (Ollama, vLLM,
//! llama.cpp server), so parsing is lenient where they differ and strict only where meaning is lost.
//!
//! Invariants:
//! - a missing API key fails with [`LlmError::MissingKey`] before any network I/O; a provider without
//!   a key variable sends no `Authorization` header; nothing logged names a key, the request or the
//!   message text (tracing fields are provider, model and status);
//! - our user-side tool results become one `role: tool` message each, placed before any text of the
//!   same user message, so every tool call is answered right after the assistant message that made it;
//! - a streamed response is complete at `data: [DONE]`, or at the end of the body when a
//!   `finish_reason` was seen; anything else is [`LlmError::StreamCut`]; streamed text is sent to the
//!   request's sink as it arrives;
//! - tool-call arguments that are not valid JSON are kept as a JSON string (the engine reports them to
//!   the model as invalid arguments) rather than failing the call; missing usage is `None` (recorded as unknown, never as zero);
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

/// An [`LlmService`] that calls one OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiClient {
    client: reqwest::Client,
    endpoint: Endpoint,
    url: String,
}

impl OpenAiClient {
    /// A client for `endpoint` (base URL up to the version, such as `http://127.0.0.1:11434/v1`) over
    /// the shared `client`.
    pub fn new(client: reqwest::Client, endpoint: Endpoint) -> Self {
        let url = format!(
            "{}/chat/completions",
            endpoint.base_url.trim_end_matches('/')
        );
        OpenAiClient {
            client,
            endpoint,
            url,
        }
    }
}

#[async_trait::async_trait]
impl LlmService for OpenAiClient {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        // The `chat` span of this call is the current span (`super::genai`).
        tracing::Span::current().record("gen_ai.provider.name", "openai");
        let key = self.endpoint.require_key()?;
        let provider = self.endpoint.provider.as_str();
        let body = guarded_body(&request_body(&request), &request, provider)?;
        let mut http = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = key {
            http = http.bearer_auth(key.expose());
        }
        tracing::debug!(provider, model = %request.model, "calling chat completions");
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

/// The JSON body of a Chat Completions request.
fn request_body(request: &LlmRequest) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({ "role": "system", "content": request.system }));
    }
    for message in &request.messages {
        match message.role {
            Role::User => {
                let mut has_text = false;
                for block in &message.content {
                    match block {
                        Content::ToolResult {
                            tool_use_id,
                            content,
                            is_error,
                        } => {
                            let content = if *is_error {
                                format!("Error: {content}")
                            } else {
                                content.clone()
                            };
                            messages.push(json!({
                                "role": "tool",
                                "tool_call_id": tool_use_id,
                                "content": content,
                            }));
                        }
                        Content::Text { .. } => has_text = true,
                        // A tool use on the user side has no Chat Completions form; it cannot occur.
                        Content::ToolUse { .. } => {}
                    }
                }
                // Text goes after the tool results, or alone; a message of nothing stays a message.
                if has_text || message.content.is_empty() {
                    messages.push(json!({ "role": "user", "content": message.text() }));
                }
            }
            Role::Assistant => {
                let tool_calls: Vec<Value> = message
                    .tool_uses()
                    .map(|(id, name, input)| {
                        json!({
                            "id": id,
                            "type": "function",
                            "function": { "name": name, "arguments": arguments_text(input) },
                        })
                    })
                    .collect();
                let text = message.text();
                let mut out = json!({ "role": "assistant" });
                if tool_calls.is_empty() {
                    out["content"] = json!(text);
                } else {
                    out["content"] = if text.is_empty() {
                        Value::Null
                    } else {
                        json!(text)
                    };
                    out["tool_calls"] = Value::Array(tool_calls);
                }
                messages.push(out);
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        match &request.tool_choice {
            Some(ToolChoice::Auto) => body["tool_choice"] = json!("auto"),
            Some(ToolChoice::Tool(name)) => {
                body["tool_choice"] = json!({ "type": "function", "function": { "name": name } })
            }
            None => {}
        }
    }
    if request.stream.is_some() {
        body["stream"] = json!(true);
        body["stream_options"] = json!({ "include_usage": true });
    }
    body
}

/// Tool input as the `arguments` string: JSON text, or the raw text when the model's arguments were
/// kept verbatim because they were not JSON.
fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Arguments text as tool input: `{}` when empty, the parsed JSON, or the raw text as a string.
fn parse_arguments(raw: String) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(&raw).unwrap_or(Value::String(raw))
}

/// `arguments` as some servers send it: normally a JSON string, sometimes an already-parsed object.
fn arguments_fragment(arguments: Option<Value>) -> String {
    match arguments {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text,
        Some(other) => other.to_string(),
    }
}

/// The stop reason for `finish_reason`, given whether the response holds tool calls. Some servers
/// (older Ollama and vLLM) report `stop` even when the model called tools, or no reason at all; the
/// tool calls are what the engine must act on, so they win.
fn stop_reason(finish_reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    let reason = match finish_reason {
        Some("stop") | None => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_string()),
    };
    if has_tool_calls && reason == StopReason::EndTurn {
        StopReason::ToolUse
    } else {
        reason
    }
}

/// Token counts as the API sends them.
#[derive(Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl WireUsage {
    fn usage(&self) -> Option<Usage> {
        Usage::reported(self.prompt_tokens, self.completion_tokens)
    }
}

/// A non-streamed Chat Completions response.
#[derive(Deserialize)]
struct WireResponse {
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    /// A string, null, or (some servers) an array of `{type: text, text}` parts.
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

impl WireResponse {
    fn into_response(self, provider: &str) -> Result<LlmResponse, LlmError> {
        let usage = self.usage.as_ref().and_then(WireUsage::usage);
        let choice = self
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| sse::malformed(provider, "response has no choices"))?;
        let mut content = Vec::new();
        let text = match choice.message.content {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text,
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect(),
            Some(_) => return Err(sse::malformed(provider, "message content is not text")),
        };
        if !text.is_empty() {
            content.push(Content::Text { text });
        }
        for (index, call) in choice
            .message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let name = call
                .function
                .name
                .filter(|name| !name.is_empty())
                .ok_or_else(|| {
                    sse::malformed(provider, format!("tool call {index} has no name"))
                })?;
            content.push(Content::ToolUse {
                id: call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| fallback_id(index)),
                name,
                input: parse_arguments(arguments_fragment(call.function.arguments)),
            });
        }
        let has_tool_calls = content.iter().any(|c| matches!(c, Content::ToolUse { .. }));
        Ok(LlmResponse {
            content,
            stop_reason: stop_reason(choice.finish_reason.as_deref(), has_tool_calls),
            usage,
            cost_usd: 0.0,
            attempts: 1,
            privacy: None,
        })
    }
}

/// An id for a tool call the server sent without one (some local servers do), unique in the response.
fn fallback_id(index: usize) -> String {
    format!("call_{index}")
}

/// One streamed chunk.
#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Option<Vec<ChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// Some servers report a failure mid-stream as a chunk holding only an error.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<ChunkDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

/// A tool call while its fragments stream in.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The streaming accumulator: chunks in, one [`LlmResponse`] out at `[DONE]` (or at the end of the
/// body once a `finish_reason` was seen).
struct StreamState {
    provider: String,
    sink: Option<TokenSink>,
    text: String,
    calls: BTreeMap<usize, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl StreamState {
    fn new(provider: &str, sink: Option<TokenSink>) -> Self {
        StreamState {
            provider: provider.to_string(),
            sink,
            text: String::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
        }
    }

    /// The slot a fragment belongs to: its `index`, or for servers that omit it, a new slot when the
    /// fragment brings an id not seen yet, else the latest slot.
    fn slot(&mut self, delta: &ToolCallDelta) -> &mut PartialCall {
        let index = delta.index.unwrap_or_else(|| {
            let last = self.calls.keys().next_back().copied();
            match (&delta.id, last) {
                (Some(id), Some(last))
                    if !id.is_empty() && !self.calls.values().any(|c| &c.id == id) =>
                {
                    last + 1
                }
                (_, Some(last)) => last,
                (_, None) => 0,
            }
        });
        self.calls.entry(index).or_default()
    }

    fn response(&mut self) -> Result<LlmResponse, LlmError> {
        let mut content = Vec::new();
        let text = std::mem::take(&mut self.text);
        if !text.is_empty() {
            content.push(Content::Text { text });
        }
        for (position, (index, call)) in std::mem::take(&mut self.calls).into_iter().enumerate() {
            if call.name.is_empty() {
                return Err(sse::malformed(
                    &self.provider,
                    format!("streamed tool call {index} has no name"),
                ));
            }
            content.push(Content::ToolUse {
                id: if call.id.is_empty() {
                    fallback_id(position)
                } else {
                    call.id
                },
                name: call.name,
                input: parse_arguments(call.arguments),
            });
        }
        let has_tool_calls = content.iter().any(|c| matches!(c, Content::ToolUse { .. }));
        Ok(LlmResponse {
            content,
            stop_reason: stop_reason(self.finish_reason.as_deref(), has_tool_calls),
            usage: self.usage,
            cost_usd: 0.0,
            attempts: 1,
            privacy: None,
        })
    }
}

impl SseMachine for StreamState {
    fn feed(&mut self, event: &SseEvent) -> Result<Option<LlmResponse>, LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return self.response().map(Some);
        }
        if data.is_empty() {
            return Ok(None);
        }
        let chunk: WireChunk = sse::parse_json(data.as_bytes(), &self.provider, "stream chunk")?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let status = error
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|code| u16::try_from(code).ok())
                .filter(|code| (400..=599).contains(code))
                .unwrap_or(500);
            let message = sse::error_message(&json!({ "error": error }).to_string());
            return Err(LlmError::Status {
                provider: self.provider.clone(),
                status,
                message,
                retry_after: None,
            });
        }
        if let Some(usage) = chunk.usage.as_ref().and_then(WireUsage::usage) {
            self.usage = Some(usage);
        }
        // One completion is requested (n = 1); other choice indexes are not ours.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    if let Some(sink) = &self.sink {
                        // A gone consumer must not fail the call.
                        sink.send(StreamDelta::Text(text.clone()));
                    }
                    self.text.push_str(&text);
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    let slot = self.slot(&fragment);
                    if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
                        slot.id = id;
                    }
                    if let Some(function) = fragment.function {
                        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                            // Most servers send the name once; tolerate repeats and split names.
                            if slot.name.is_empty() {
                                slot.name = name;
                            } else if slot.name != name {
                                slot.name.push_str(&name);
                            }
                        }
                        slot.arguments
                            .push_str(&arguments_fragment(function.arguments));
                    }
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(None)
    }

    fn finish(mut self) -> Result<LlmResponse, LlmError> {
        if self.finish_reason.is_some() {
            // Some servers close the stream without `[DONE]`; a finish reason means the answer is whole.
            return self.response();
        }
        Err(sse::stream_cut(
            &self.provider,
            "the stream ended before [DONE]",
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
            provider: "local".into(),
            model: "llama3".into(),
            system: String::new(),
            messages,
            tools: vec![],
            tool_choice: None,
            max_tokens: 64,
            stream: None,
            meta: CallMeta::default(),
            guard: None,
        }
    }

    fn endpoint(base_url: &str, key: Option<&str>, key_var: Option<&str>) -> Endpoint {
        Endpoint {
            provider: "local".into(),
            base_url: base_url.into(),
            key: key.map(ApiKey::new),
            key_var: key_var.map(String::from),
        }
    }

    fn chunk(value: Value) -> SseEvent {
        SseEvent::new("message", &value.to_string())
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
            json!({"type": "function", "function": {"name": "record_facts"}})
        );
        req.tool_choice = Some(ToolChoice::Auto);
        assert_eq!(request_body(&req)["tool_choice"], json!("auto"));
    }

    #[test]
    fn body_for_a_plain_prompt() {
        let body = request_body(&request(vec![Message::user("hi")]));
        assert_eq!(
            body,
            json!({
                "model": "llama3",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "hi"}],
            })
        );
    }

    #[test]
    fn body_maps_system_tools_stream_calls_and_results() {
        let (tx, _rx) = TokenSink::channel();
        let mut req = request(vec![
            Message::user("go"),
            Message {
                role: Role::Assistant,
                content: vec![
                    Content::ToolUse {
                        id: "c1".into(),
                        name: "delegate".into(),
                        input: json!({"to": "cto"}),
                    },
                    Content::ToolUse {
                        id: "c2".into(),
                        name: "delegate".into(),
                        input: Value::String("{broken".into()),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    Content::text("also this"),
                    Content::ToolResult {
                        tool_use_id: "c1".into(),
                        content: "done".into(),
                        is_error: false,
                    },
                    Content::ToolResult {
                        tool_use_id: "c2".into(),
                        content: "invalid arguments".into(),
                        is_error: true,
                    },
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![Content::text("All set.")],
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
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {
                "name": "delegate", "description": "hand off", "parameters": {"type": "object"}}}])
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "delegate", "arguments": "{\"to\":\"cto\"}"}},
                    {"id": "c2", "type": "function",
                     "function": {"name": "delegate", "arguments": "{broken"}},
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "done"},
                {"role": "tool", "tool_call_id": "c2", "content": "Error: invalid arguments"},
                {"role": "user", "content": "also this"},
                {"role": "assistant", "content": "All set."},
            ])
        );
    }

    #[test]
    fn tool_calls_round_trip_through_a_response() {
        let wire: WireResponse = serde_json::from_value(json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "delegate", "arguments": "{\"to\":\"cto\"}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }))
        .unwrap();
        let response = wire.into_response("local").unwrap();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Some(Usage {
                input_tokens: 10,
                output_tokens: 5
            })
        );
        let message = Message {
            role: Role::Assistant,
            content: response.content,
        };
        let body = request_body(&request(vec![Message::user("x"), message]));
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"],
            json!({"name": "delegate", "arguments": "{\"to\":\"cto\"}"})
        );
    }

    #[test]
    fn parses_text_responses_and_lenient_fields() {
        let wire: WireResponse = serde_json::from_value(json!({
            "choices": [{"message": {"content": "Hello"}, "finish_reason": "length"}]
        }))
        .unwrap();
        let response = wire.into_response("local").unwrap();
        assert_eq!(response.content, vec![Content::text("Hello")]);
        assert_eq!(response.stop_reason, StopReason::MaxTokens);
        assert_eq!(response.usage, None, "no usage is unknown, not zero");

        // Ollama-style: object arguments, no id, `stop` despite a tool call; bad JSON kept raw.
        let wire: WireResponse = serde_json::from_value(json!({
            "choices": [{"message": {"content": "", "tool_calls": [
                {"function": {"name": "a", "arguments": {"x": 1}}},
                {"id": "c9", "function": {"name": "b", "arguments": "{not json"}},
                {"id": "c10", "function": {"name": "c", "arguments": ""}}
            ]}, "finish_reason": "stop"}]
        }))
        .unwrap();
        let response = wire.into_response("local").unwrap();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.content,
            vec![
                Content::ToolUse {
                    id: "call_0".into(),
                    name: "a".into(),
                    input: json!({"x": 1})
                },
                Content::ToolUse {
                    id: "c9".into(),
                    name: "b".into(),
                    input: Value::String("{not json".into()),
                },
                Content::ToolUse {
                    id: "c10".into(),
                    name: "c".into(),
                    input: json!({})
                },
            ]
        );
    }

    #[test]
    fn responses_without_choices_are_malformed() {
        let wire: WireResponse = serde_json::from_value(json!({"choices": []})).unwrap();
        assert!(matches!(
            wire.into_response("local"),
            Err(LlmError::Malformed { .. })
        ));
        let err = sse::parse_json::<WireResponse>(br#"{"id":"x"}"#, "local", "response body")
            .err()
            .unwrap();
        assert!(matches!(err, LlmError::Malformed { .. }));
    }

    #[test]
    fn finish_reasons_map() {
        assert_eq!(stop_reason(Some("stop"), false), StopReason::EndTurn);
        assert_eq!(stop_reason(Some("tool_calls"), true), StopReason::ToolUse);
        assert_eq!(
            stop_reason(Some("function_call"), true),
            StopReason::ToolUse
        );
        assert_eq!(stop_reason(Some("length"), false), StopReason::MaxTokens);
        assert_eq!(stop_reason(Some("length"), true), StopReason::MaxTokens);
        assert_eq!(
            stop_reason(Some("content_filter"), false),
            StopReason::Other("content_filter".into())
        );
    }

    fn streamed_chunks() -> Vec<SseEvent> {
        vec![
            chunk(
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            ),
            chunk(json!({"choices": [{"index": 0, "delta": {"content": "Let me "}}]})),
            chunk(json!({"choices": [{"index": 0, "delta": {"content": "ask."}}]})),
            chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "c1", "type": "function",
                 "function": {"name": "delegate", "arguments": ""}}]}}]})),
            chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": "{\"to\":"}}]}}]})),
            chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 1, "id": "c2", "function": {"name": "noop", "arguments": ""}},
                {"index": 0, "function": {"arguments": "\"cto\"}"}}]}}]})),
            chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            chunk(json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9}})),
        ]
    }

    #[test]
    fn stream_accumulates_text_and_tool_fragments() {
        let (tx, mut rx) = TokenSink::channel();
        let mut state = StreamState::new("local", Some(tx));
        for event in streamed_chunks() {
            assert!(state.feed(&event).unwrap().is_none());
        }
        let done = state
            .feed(&SseEvent::new("message", "[DONE]"))
            .unwrap()
            .unwrap();
        assert_eq!(
            done.content,
            vec![
                Content::text("Let me ask."),
                Content::ToolUse {
                    id: "c1".into(),
                    name: "delegate".into(),
                    input: json!({"to": "cto"}),
                },
                Content::ToolUse {
                    id: "c2".into(),
                    name: "noop".into(),
                    input: json!({})
                },
            ]
        );
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        assert_eq!(
            done.usage,
            Some(Usage {
                input_tokens: 7,
                output_tokens: 9
            })
        );
        assert_eq!(rx.try_recv().unwrap(), StreamDelta::Text("Let me ".into()));
        assert_eq!(rx.try_recv().unwrap(), StreamDelta::Text("ask.".into()));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn stream_keeps_invalid_arguments_raw_and_tolerates_missing_indexes() {
        let mut state = StreamState::new("local", None);
        for event in [
            chunk(json!({"choices": [{"delta": {"tool_calls": [
                {"id": "a", "function": {"name": "f", "arguments": "{oops"}}]}}]})),
            chunk(json!({"choices": [{"delta": {"tool_calls": [
                {"id": "b", "function": {"name": "g", "arguments": "{\"k\":"}}]}}]})),
            chunk(json!({"choices": [{"delta": {"tool_calls": [
                {"function": {"arguments": "1}"}}]}}], "finish_reason": null})),
            chunk(json!({"choices": [{"delta": {}, "finish_reason": "stop"}]})),
        ] {
            state.feed(&event).unwrap();
        }
        // No [DONE], but a finish reason was seen: complete; usage missing: unknown.
        let done = state.finish().unwrap();
        assert_eq!(
            done.content,
            vec![
                Content::ToolUse {
                    id: "a".into(),
                    name: "f".into(),
                    input: Value::String("{oops".into()),
                },
                Content::ToolUse {
                    id: "b".into(),
                    name: "g".into(),
                    input: json!({"k": 1})
                },
            ]
        );
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        assert_eq!(done.usage, None);
    }

    #[test]
    fn stream_without_finish_reason_or_done_is_cut() {
        let mut state = StreamState::new("local", None);
        state
            .feed(&chunk(
                json!({"choices": [{"index": 0, "delta": {"content": "Hal"}}]}),
            ))
            .unwrap();
        assert!(matches!(state.finish(), Err(LlmError::StreamCut { .. })));
    }

    #[test]
    fn stream_error_chunks_and_garbage() {
        let mut state = StreamState::new("local", None);
        let err = state
            .feed(&chunk(
                json!({"error": {"message": "model crashed", "code": 503}}),
            ))
            .unwrap_err();
        assert_eq!(
            err,
            LlmError::Status {
                provider: "local".into(),
                status: 503,
                message: "model crashed".into(),
                retry_after: None,
            }
        );
        assert!(matches!(
            state.feed(&SseEvent::new("message", "{nope")),
            Err(LlmError::Malformed { .. })
        ));
    }

    #[tokio::test]
    async fn missing_key_fails_before_any_request() {
        let client = OpenAiClient::new(
            http_client(),
            endpoint("http://127.0.0.1:9/v1", None, Some("OPENAI_API_KEY")),
        );
        let err = client
            .call(request(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            LlmError::MissingKey {
                provider: "local".into(),
                var: "OPENAI_API_KEY".into(),
            }
        );
    }

    #[tokio::test]
    async fn non_streamed_call_over_http_sends_bearer_key() {
        let (base, seen) = test_server::serve(test_server::response(
            "200 OK",
            &[],
            "application/json",
            r#"{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}"#,
        ))
        .await;
        let client = OpenAiClient::new(
            http_client(),
            endpoint(&format!("{base}/v1"), Some("sk-1"), Some("K")),
        );
        let response = client
            .call(request(vec![Message::user("hi")]))
            .await
            .unwrap();
        assert_eq!(response.content, vec![Content::text("ok")]);
        let seen = seen.await.unwrap();
        let head = seen.head.to_lowercase();
        assert!(head.starts_with("post /v1/chat/completions "), "{head}");
        assert!(head.contains("authorization: bearer sk-1"));
        assert_eq!(seen.body["model"], "llama3");
    }

    #[tokio::test]
    async fn streamed_call_over_http_without_key() {
        let body = streamed_chunks()
            .into_iter()
            .map(|event| format!("data: {}\n\n", event.data))
            .collect::<String>()
            + "data: [DONE]\n\n";
        let (base, seen) = test_server::serve(test_server::event_stream(&body)).await;
        let client = OpenAiClient::new(http_client(), endpoint(&base, None, None));
        let (tx, mut rx) = TokenSink::channel();
        let mut req = request(vec![Message::user("hi")]);
        req.stream = Some(tx);
        let response = client.call(req).await.unwrap();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Some(Usage {
                input_tokens: 7,
                output_tokens: 9
            })
        );
        assert_eq!(rx.try_recv().unwrap(), StreamDelta::Text("Let me ".into()));
        let seen = seen.await.unwrap();
        assert!(!seen.head.to_lowercase().contains("authorization"));
        assert_eq!(seen.body["stream_options"]["include_usage"], true);
    }

    #[tokio::test]
    async fn error_status_over_http() {
        let (base, _seen) = test_server::serve(test_server::response(
            "401 Unauthorized",
            &[],
            "application/json",
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
        ))
        .await;
        let client = OpenAiClient::new(http_client(), endpoint(&base, Some("bad"), Some("K")));
        let err = client
            .call(request(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LlmError::Status { status: 401, message, .. } if message == "Incorrect API key provided"),
            "{err:?}"
        );
    }
}
