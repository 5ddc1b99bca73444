//! # Tests of the scripted LLM server over real HTTP
//!
//! Role: drive [`opc_tests::scripted_llm::ScriptedLlm`] (and the `scripted-llm` binary) with a
//! plain HTTP client on 127.0.0.1, checking both wire formats streamed and not, marker routing,
//! per-session cursors, memory-work queues, faults, placeholder substitution and the recording.
//!
//! Invariants: every test starts its own server on an ephemeral loopback port; no test talks to any
//! other host; every wait has a deadline ([`opc_tests::wait`], the test client's timeouts), and no
//! test asserts how fast anything is (the benchmarks do).

#![allow(clippy::unwrap_used)]

use std::io::BufRead;
use std::time::{Duration, Instant};

use opc_tests::scripted_llm::{Fault, MemoryKind, Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, blocking_within, wait_until, within};
use serde_json::{Value, json};

/// Stop `server`, within [`WAIT`].
async fn stop(server: ScriptedLlm) {
    within(WAIT, "the scripted server to stop", server.shutdown()).await;
}

/// The tests' HTTP client: connecting and each read have deadlines.
fn client() -> reqwest::Client {
    opc_tests::http_client()
}

fn anthropic_body(system: &str, user: &str, stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 256,
        "system": system,
        "messages": [{"role": "user", "content": user}],
        "tools": [
            {"name": "delegate", "description": "d", "input_schema": {"type": "object"}},
            {"name": "read_file", "description": "r", "input_schema": {"type": "object"}},
        ],
        "stream": stream,
    })
}

fn openai_body(system: &str, user: &str, stream: bool) -> Value {
    json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
        "tools": [{"type": "function", "function": {"name": "delegate", "parameters": {}}}],
        "stream": stream,
    })
}

async fn post(client: &reqwest::Client, url: String, body: &Value) -> reqwest::Response {
    client
        .post(url)
        .header("x-api-key", "test-key")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn anthropic(server: &ScriptedLlm, system: &str, user: &str) -> Value {
    let body = anthropic_body(system, user, false);
    let response = post(&client(), format!("{}/v1/messages", server.url()), &body).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// First text block of an Anthropic reply.
fn text_of(reply: &Value) -> String {
    reply["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// Parses an SSE body into (event name, data) pairs.
fn parse_sse(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, data)
        })
        .collect()
}

/// The input of the (single) tool call of a streamed Anthropic reply.
fn streamed_tool_input(sse: &str) -> Value {
    let json: String = parse_sse(sse)
        .iter()
        .filter_map(|(_, data)| {
            let data: Value = serde_json::from_str(data).unwrap();
            data["delta"]["partial_json"].as_str().map(str::to_string)
        })
        .collect();
    serde_json::from_str(&json).unwrap()
}

#[tokio::test]
async fn routes_by_marker_with_fallback() {
    let script = Script::new()
        .agent("Agent id: ceo", vec![Step::text("I am the CEO")])
        .agent("Agent id: dev", vec![Step::text("I am a developer")])
        .fallback(vec![Step::text("who am I?")]);
    let server = ScriptedLlm::start(script).await.unwrap();
    let ceo = anthropic(&server, "You are... Agent id: ceo. Be brief.", "hi").await;
    let dev = anthropic(&server, "Agent id: dev", "hi").await;
    let other = anthropic(&server, "Agent id: nobody", "hi").await;
    assert_eq!(text_of(&ceo), "I am the CEO");
    assert_eq!(text_of(&dev), "I am a developer");
    assert_eq!(text_of(&other), "who am I?");
    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.requests_for("Agent id: ceo").len(), 1);
    assert_eq!(server.requests_for("Agent id: dev").len(), 1);
    assert_eq!(server.requests()[2].agent_marker, None);
    stop(server).await;
}

#[tokio::test]
async fn no_agent_and_no_fallback_is_a_500() {
    let server = ScriptedLlm::start(Script::new().agent("X", vec![Step::text("x")]))
        .await
        .unwrap();
    let body = anthropic_body("nothing matches", "hi", false);
    let response = post(&client(), format!("{}/v1/messages", server.url()), &body).await;
    assert_eq!(response.status(), 500);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("fallback")
    );
    stop(server).await;
}

#[tokio::test]
async fn cursor_is_per_session_and_repeats_last_reply() {
    let script = Script::new().agent(
        "M",
        vec![
            Step::text("first"),
            Step::text("second"),
            Step::status(500, None),
        ],
    );
    let server = ScriptedLlm::start(script).await.unwrap();
    assert_eq!(
        text_of(&anthropic(&server, "M", "session a").await),
        "first"
    );
    assert_eq!(
        text_of(&anthropic(&server, "M", "session b").await),
        "first"
    );
    assert_eq!(
        text_of(&anthropic(&server, "M", "session a").await),
        "second"
    );
    // Step 3 is a fault, consumed once; then the last non-fault step repeats.
    let body = anthropic_body("M", "session a", false);
    let response = post(&client(), format!("{}/v1/messages", server.url()), &body).await;
    assert_eq!(response.status(), 500);
    assert_eq!(
        text_of(&anthropic(&server, "M", "session a").await),
        "second"
    );
    assert_eq!(
        text_of(&anthropic(&server, "M", "session a").await),
        "second"
    );
    assert_eq!(
        text_of(&anthropic(&server, "M", "session b").await),
        "second"
    );
    let steps: Vec<Option<usize>> = server.requests().iter().map(|r| r.step_index).collect();
    assert_eq!(
        steps,
        [
            Some(0),
            Some(0),
            Some(1),
            Some(2),
            Some(1),
            Some(1),
            Some(1)
        ]
    );
    stop(server).await;
}

#[tokio::test]
async fn exhausted_script_with_only_faults_says_so() {
    let server = ScriptedLlm::start(Script::new().agent("M", vec![Step::status(503, None)]))
        .await
        .unwrap();
    let client = client();
    let url = format!("{}/v1/chat/completions", server.url());
    let body = openai_body("M", "x", false);
    assert_eq!(post(&client, url.clone(), &body).await.status(), 503);
    let response = post(&client, url, &body).await;
    assert_eq!(response.status(), 500);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["message"], "script exhausted for M");
    stop(server).await;
}

#[tokio::test]
async fn anthropic_non_streamed_tool_call_and_usage() {
    let script = Script::new().agent(
        "M",
        vec![
            Step::tools([
                ("delegate", json!({"to": "dev", "task": "build"})),
                ("read_file", json!({"path": "a.txt"})),
            ])
            .with_usage(123, 45),
            Step::text("done"),
        ],
    );
    let server = ScriptedLlm::start(script).await.unwrap();
    let reply = anthropic(&server, "M", "go").await;
    assert_eq!(reply["type"], "message");
    assert_eq!(reply["role"], "assistant");
    assert_eq!(reply["model"], "claude-test");
    assert!(reply["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(reply["stop_reason"], "tool_use");
    assert_eq!(
        reply["usage"],
        json!({"input_tokens": 123, "output_tokens": 45})
    );
    let content = reply["content"].as_array().unwrap();
    assert_eq!(content.len(), 2);
    assert_eq!(content[0]["type"], "tool_use");
    assert_eq!(content[0]["name"], "delegate");
    assert_eq!(content[0]["input"], json!({"to": "dev", "task": "build"}));
    assert!(content[0]["id"].as_str().unwrap().starts_with("toolu_"));
    assert_ne!(content[0]["id"], content[1]["id"]);
    assert_eq!(content[1]["name"], "read_file");

    let reply = anthropic(&server, "M", "go").await;
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["content"], json!([{"type": "text", "text": "done"}]));
    let usage = &reply["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() >= 1);
    assert_eq!(usage["output_tokens"], 1);
    stop(server).await;
}

#[tokio::test]
async fn anthropic_streamed_text_and_tool() {
    let text = "Here is a longer answer that spans several streamed chunks of text.";
    let script = Script::new().agent(
        "M",
        vec![Step::reply(opc_tests::scripted_llm::Reply {
            text: Some(text.to_string()),
            tool_calls: vec![opc_tests::scripted_llm::ToolCall {
                name: "delegate".into(),
                input: json!({"to": "dev", "task": "a task with \"quotes\""}),
            }],
            usage: None,
        })],
    );
    let server = ScriptedLlm::start(script).await.unwrap();
    let body = anthropic_body("M", "go", true);
    let response = post(&client(), format!("{}/v1/messages", server.url()), &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let events = parse_sse(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert_eq!(names[names.len() - 2], "message_delta");
    let mut streamed_text = String::new();
    let mut partial_json = String::new();
    let mut text_deltas = 0;
    let mut json_deltas = 0;
    let mut tool_start = None;
    for (name, data) in &events {
        let data: Value = serde_json::from_str(data).unwrap();
        assert_eq!(data["type"], name.as_deref().unwrap());
        match name.as_deref().unwrap() {
            "message_start" => {
                assert_eq!(data["message"]["content"], json!([]));
                assert_eq!(data["message"]["model"], "claude-test");
                assert_eq!(data["message"]["usage"]["output_tokens"], 0);
                assert!(data["message"]["usage"]["input_tokens"].as_u64().unwrap() > 0);
            }
            "content_block_start" if data["content_block"]["type"] == "tool_use" => {
                assert_eq!(data["index"], 1);
                tool_start = Some(data["content_block"].clone());
            }
            "content_block_delta" => match data["delta"]["type"].as_str().unwrap() {
                "text_delta" => {
                    text_deltas += 1;
                    streamed_text.push_str(data["delta"]["text"].as_str().unwrap());
                }
                "input_json_delta" => {
                    json_deltas += 1;
                    partial_json.push_str(data["delta"]["partial_json"].as_str().unwrap());
                }
                other => panic!("unexpected delta {other}"),
            },
            "message_delta" => {
                assert_eq!(data["delta"]["stop_reason"], "tool_use");
                assert!(data["usage"]["output_tokens"].as_u64().unwrap() > 1);
            }
            _ => {}
        }
    }
    assert_eq!(streamed_text, text);
    assert!(text_deltas >= 3, "{text_deltas} text deltas");
    assert!(json_deltas >= 2, "{json_deltas} json deltas");
    let tool_start = tool_start.unwrap();
    assert_eq!(tool_start["name"], "delegate");
    assert_eq!(tool_start["input"], json!({}));
    let input: Value = serde_json::from_str(&partial_json).unwrap();
    assert_eq!(
        input,
        json!({"to": "dev", "task": "a task with \"quotes\""})
    );
    stop(server).await;
}

#[tokio::test]
async fn openai_non_streamed_both_paths() {
    let script = Script::new().agent(
        "M",
        vec![
            Step::tool("delegate", json!({"to": "dev"})),
            Step::text("all done"),
        ],
    );
    let server = ScriptedLlm::start(script).await.unwrap();
    let client = client();
    let body = openai_body("system says M", "go", false);
    let reply: Value = post(
        &client,
        format!("{}/v1/chat/completions", server.url()),
        &body,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(reply["model"], "gpt-test");
    assert!(reply["id"].as_str().unwrap().starts_with("chatcmpl-"));
    let choice = &reply["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["function"]["name"], "delegate");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"to": "dev"}));
    let usage = &reply["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );

    let reply: Value = post(&client, format!("{}/chat/completions", server.url()), &body)
        .await
        .json()
        .await
        .unwrap();
    let choice = &reply["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(choice["message"]["content"], "all done");
    assert!(choice["message"].get("tool_calls").is_none());
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/v1/chat/completions", "/chat/completions"]);
    stop(server).await;
}

#[tokio::test]
async fn openai_streamed_with_usage() {
    let text = "one two three four five six seven eight";
    let script = Script::new().agent(
        "M",
        vec![
            Step::text(text).with_usage(10, 20),
            Step::tools([("a", json!({"x": 1})), ("b", json!({"y": [1, 2]}))]),
        ],
    );
    let server = ScriptedLlm::start(script).await.unwrap();
    let client = client();
    let mut body = openai_body("M", "go", true);
    body["stream_options"] = json!({"include_usage": true});
    let response = post(
        &client,
        format!("{}/v1/chat/completions", server.url()),
        &body,
    )
    .await;
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let events = parse_sse(&response.text().await.unwrap());
    assert!(events.iter().all(|(name, _)| name.is_none()));
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, text);
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(
        usage_chunk["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30})
    );
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "stop"
    );

    // Second step: two tool calls, no usage chunk requested.
    body.as_object_mut().unwrap().remove("stream_options");
    let response = post(
        &client,
        format!("{}/v1/chat/completions", server.url()),
        &body,
    )
    .await;
    let events = parse_sse(&response.text().await.unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
    let mut names = [String::new(), String::new()];
    let mut args = [String::new(), String::new()];
    let mut fragments = [0, 0];
    for chunk in &chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = call["index"].as_u64().unwrap() as usize;
            if let Some(name) = call["function"]["name"].as_str() {
                assert!(call["id"].as_str().unwrap().starts_with("call_"));
                assert_eq!(call["function"]["arguments"], "");
                names[i] = name.to_string();
            } else {
                fragments[i] += 1;
                args[i].push_str(call["function"]["arguments"].as_str().unwrap());
            }
        }
    }
    assert_eq!(names, ["a", "b"]);
    assert!(fragments.iter().all(|f| *f >= 2));
    assert_eq!(
        serde_json::from_str::<Value>(&args[0]).unwrap(),
        json!({"x": 1})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&args[1]).unwrap(),
        json!({"y": [1, 2]})
    );
    stop(server).await;
}

#[tokio::test]
async fn rate_limit_fault_in_both_formats() {
    let script = Script::from_json(
        r#"{"agents": [{"marker": "M", "replies": [
            {"fault": "status", "status": 429, "retry_after": 0.05},
            {"fault": "status", "status": 429, "retry_after": 1},
            {"fault": "status", "status": 500},
            {"text": "ok"}
        ]}]}"#,
    )
    .unwrap();
    let server = ScriptedLlm::start(script).await.unwrap();
    let client = client();

    let response = post(
        &client,
        format!("{}/v1/messages", server.url()),
        &anthropic_body("M", "s", false),
    )
    .await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "0.05");
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "rate_limit_error");
    assert!(error["error"]["message"].is_string());

    let url = format!("{}/v1/chat/completions", server.url());
    let body = openai_body("M", "s", false);
    let response = post(&client, url.clone(), &body).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    let error: Value = response.json().await.unwrap();
    assert!(error["error"]["message"].is_string());
    assert!(error["error"]["type"].is_string());

    let response = post(&client, url.clone(), &body).await;
    assert_eq!(response.status(), 500);
    assert!(response.headers().get("retry-after").is_none());
    let response = post(&client, url, &body).await;
    assert_eq!(response.status(), 200);
    stop(server).await;
}

#[tokio::test]
async fn malformed_fault_is_invalid_json() {
    let server = ScriptedLlm::start(
        Script::new().agent("M", vec![Step::fault(Fault::Malformed), Step::text("ok")]),
    )
    .await
    .unwrap();
    let body = anthropic_body("M", "s", false);
    let response = post(&client(), format!("{}/v1/messages", server.url()), &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let text = response.text().await.unwrap();
    let error = serde_json::from_str::<Value>(&text).unwrap_err();
    assert!(error.is_syntax() || error.is_eof(), "{error}");
    stop(server).await;
}

#[tokio::test]
async fn cut_fault_truncates_the_body() {
    let script = Script::new().agent("M", vec![Step::fault(Fault::Cut), Step::text("recovered")]);
    let server = ScriptedLlm::start(script).await.unwrap();
    let client = client();

    // Streamed: the start event and some text arrive, then the body fails.
    let body = anthropic_body("M", "streamed", true);
    let mut response = post(&client, format!("{}/v1/messages", server.url()), &body).await;
    assert_eq!(response.status(), 200);
    let mut received = Vec::new();
    let error = loop {
        match within(WAIT, "the cut stream's next chunk", response.chunk()).await {
            Ok(Some(bytes)) => received.extend_from_slice(&bytes),
            Ok(None) => panic!("the cut stream ended cleanly"),
            Err(e) => break e,
        }
    };
    assert!(error.is_body() || error.is_decode(), "{error:?}");
    let received = String::from_utf8(received).unwrap();
    assert!(received.contains("event: message_start"), "{received}");
    assert!(received.contains("text_delta"), "{received}");
    assert!(!received.contains("message_stop"));

    // OpenAI streamed.
    let body = openai_body("M", "openai streamed", true);
    let response = post(
        &client,
        format!("{}/v1/chat/completions", server.url()),
        &body,
    )
    .await;
    let error = response.text().await.unwrap_err();
    assert!(error.is_body() || error.is_decode(), "{error:?}");

    // Not streamed: the JSON body is cut short.
    let body = anthropic_body("M", "plain", false);
    let response = post(&client, format!("{}/v1/messages", server.url()), &body).await;
    assert_eq!(response.status(), 200);
    let error = response.text().await.unwrap_err();
    assert!(error.is_body() || error.is_decode(), "{error:?}");

    // The next request of a session goes on with the script.
    let reply = anthropic(&server, "M", "plain").await;
    assert_eq!(text_of(&reply), "recovered");
    stop(server).await;
}

#[tokio::test]
async fn hang_and_delay() {
    let script = Script::new().agent(
        "M",
        vec![
            Step::text("slow").with_delay_ms(150),
            Step::fault(Fault::Hang),
        ],
    );
    let server = ScriptedLlm::start(script).await.unwrap();
    let client = client();
    let started = Instant::now();
    assert_eq!(text_of(&anthropic(&server, "M", "s").await), "slow");
    assert!(started.elapsed() >= Duration::from_millis(150));

    let result = client
        .post(format!("{}/v1/messages", server.url()))
        .timeout(Duration::from_millis(150))
        .json(&anthropic_body("M", "s", false))
        .send()
        .await;
    assert!(result.unwrap_err().is_timeout());
    // A request hanging on the server does not hold up shutdown.
    let hanging = tokio::spawn({
        let client = client.clone();
        let url = format!("{}/v1/messages", server.url());
        async move {
            client
                .post(url)
                .json(&anthropic_body("M", "s", false))
                .send()
                .await
        }
    });
    wait_until(WAIT, "the third request to reach the server", || {
        server.requests().len() == 3
    })
    .await;
    within(WAIT, "shutdown while a request hangs", server.shutdown()).await;
    let response = within(WAIT, "the hanging request's answer", hanging)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 503);
}

#[tokio::test]
async fn placeholder_substitution() {
    let script = Script::from_json(
        r#"{"agents": [{"marker": "M", "replies": [
            {"tool": "delegate", "input": {"task": "Handle: {{input}}", "n": 2, "tags": ["{{input}}"]}},
            {"text": "You asked: {{input}}"}
        ]}]}"#,
    )
    .unwrap();
    let server = ScriptedLlm::start(script).await.unwrap();
    let user = "build a \"quoted\" thing\nnow";
    let reply = anthropic(&server, "M", user).await;
    assert_eq!(
        reply["content"][0]["input"],
        json!({"task": format!("Handle: {user}"), "n": 2, "tags": [user]})
    );
    // The first user message stays the session even as the conversation grows.
    let mut body = anthropic_body("M", user, false);
    body["messages"]
        .as_array_mut()
        .unwrap()
        .extend([
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "delegate", "input": {}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]}),
        ]);
    let reply: Value = post(&client(), format!("{}/v1/messages", server.url()), &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(text_of(&reply), format!("You asked: {user}"));
    stop(server).await;
}

#[tokio::test]
async fn recording_and_accessors() {
    let server = ScriptedLlm::start(Script::new().agent("M", vec![Step::text("ok")]))
        .await
        .unwrap();
    let client = client();
    let body = json!({
        "model": "claude-test",
        "system": [{"type": "text", "text": "You are M."}],
        "messages": [
            {"role": "user", "content": "task one"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "file body"}]},
                {"type": "text", "text": "and more"},
            ]},
        ],
        "tools": [{"name": "read_file", "input_schema": {}}, {"name": "delegate", "input_schema": {}}],
    });
    client
        .post(format!("{}/v1/messages", server.url()))
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .header("x-other", "not recorded")
        .json(&body)
        .send()
        .await
        .unwrap();
    let body = json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are M."},
            {"role": "user", "content": [{"type": "text", "text": "task two"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "delegate", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "delegated"},
        ],
        "tools": [{"type": "function", "function": {"name": "delegate", "parameters": {}}}],
    });
    client
        .post(format!("{}/v1/chat/completions", server.url()))
        .bearer_auth("sk-openai-test")
        .json(&body)
        .send()
        .await
        .unwrap();
    let not_found = client
        .post(format!("{}/v1/nothing", server.url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_found.status(), 404);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let a = &requests[0];
    assert_eq!(a.path, "/v1/messages");
    assert_eq!(a.agent_marker.as_deref(), Some("M"));
    assert_eq!(a.system, "You are M.");
    assert_eq!(a.session, "task one");
    assert_eq!(a.user_texts(), ["task one", "file body", "and more"]);
    assert_eq!(a.tool_names(), ["read_file", "delegate"]);
    assert_eq!(a.header("X-API-Key"), Some("sk-ant-test"));
    assert_eq!(a.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(a.headers.len(), 2);
    assert!(!a.is_stream());
    let o = &requests[1];
    assert_eq!(o.session, "task two");
    assert_eq!(o.user_texts(), ["task two", "delegated"]);
    assert_eq!(o.tool_names(), ["delegate"]);
    assert_eq!(o.header("authorization"), Some("Bearer sk-openai-test"));
    assert!(o.received_at >= a.received_at);
    assert_eq!(requests[2].path, "/v1/nothing");
    assert_eq!(requests[2].body, json!("not json"));

    // The recording over HTTP matches.
    let over_http: Value = client
        .get(format!("{}/_requests", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let over_http: Vec<opc_tests::scripted_llm::RecordedRequest> =
        serde_json::from_value(over_http).unwrap();
    assert_eq!(over_http, requests);
    stop(server).await;
}

#[tokio::test]
async fn many_concurrent_sessions_are_deterministic() {
    const SESSIONS: usize = 1000;
    let script = Script::new().agent(
        "Agent id: root",
        vec![
            Step::tool("delegate", json!({"task": "{{input}}"})).with_delay_ms(50),
            Step::text("finished {{input}}").with_delay_ms(50),
        ],
    );
    let server = ScriptedLlm::start(script).await.unwrap();
    let client = client();
    let url = format!("{}/v1/messages", server.url());
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|i| {
            let client = client.clone();
            let url = url.clone();
            tokio::spawn(async move {
                let task = format!("task {i}");
                let first = client
                    .post(&url)
                    .json(&anthropic_body("Agent id: root", &task, i % 2 == 0))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                let input = if i % 2 == 0 {
                    streamed_tool_input(&first)
                } else {
                    serde_json::from_str::<Value>(&first).unwrap()["content"][0]["input"].clone()
                };
                assert_eq!(input, json!({"task": task}));
                let second: Value = client
                    .post(&url)
                    .json(&anthropic_body("Agent id: root", &task, false))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(text_of(&second), format!("finished {task}"));
            })
        })
        .collect();
    // Sequentially this would take 100 s (two 50 ms rounds per session); the deadline only stops a
    // hang — how fast the server is belongs to the benchmarks.
    within(
        Duration::from_secs(90),
        "1,000 sessions of two rounds",
        async {
            for task in tasks {
                task.await.unwrap();
            }
        },
    )
    .await;
    assert_eq!(server.requests().len(), 2 * SESSIONS);
    stop(server).await;
}

#[tokio::test]
async fn refuses_non_loopback_addresses() {
    let error = ScriptedLlm::start_on(Script::new(), "0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn memory_work_is_answered_from_its_own_queue_and_waits_for_a_push() {
    let extract = "OPC memory: extract\nYou extract facts. Agent id: ceo\n";
    let consolidate = "OPC memory: consolidate\nAgent id: ceo\n";
    let script = Script::new()
        .agent("Agent id: ceo", vec![Step::text("the CEO's turn")])
        .memory(
            MemoryKind::Extract,
            vec![Step::record_facts(json!([{"op": "ADD", "text": "A"}])).with_delay_ms(50)],
        )
        .memory(MemoryKind::Consolidate, vec![]);
    assert_eq!(MemoryKind::of_system(extract), Some(MemoryKind::Extract));
    assert_eq!(
        MemoryKind::of_system("OPC memory: consolidate  \r\nx"),
        Some(MemoryKind::Consolidate)
    );
    assert_eq!(
        MemoryKind::of_system("Agent id: ceo\nOPC memory: extract"),
        None
    );
    let server = ScriptedLlm::start(script).await.unwrap();

    // The first line decides, not the marker further down: the queued step answers, after its delay.
    let mut body = anthropic_body(
        extract,
        "exchange\n{\"id\": 7, \"text\": \"old\"}\nnot json {",
        false,
    );
    body["tool_choice"] = json!({"type": "tool", "name": "record_facts"});
    let reply: Value = post(&client(), format!("{}/v1/messages", server.url()), &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(reply["content"][0]["name"], "record_facts");
    assert_eq!(
        reply["content"][0]["input"],
        json!({"facts": [{"op": "ADD", "text": "A"}]})
    );
    let recorded = server.memory_requests(MemoryKind::Extract);
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].agent_marker, None);
    assert_eq!(recorded[0].step_index, Some(0));
    assert_eq!(recorded[0].forced_tool().as_deref(), Some("record_facts"));
    assert_eq!(recorded[0].json_lines(), [json!({"id": 7, "text": "old"})]);
    let answered = recorded[0].answered_at.unwrap();
    assert!(answered.duration_since(recorded[0].received_at).unwrap() >= Duration::from_millis(50));
    assert!(
        server.requests_for("Agent id: ceo").is_empty(),
        "no agent turn taken"
    );

    // An empty queue holds the request, recorded and unanswered, until the test pushes a step.
    let url = format!("{}/v1/messages", server.url());
    let waiting = tokio::spawn(async move {
        post(&client(), url, &anthropic_body(consolidate, "facts", false))
            .await
            .json::<Value>()
            .await
    });
    wait_until(WAIT, "the consolidation request to arrive", || {
        server.memory_requests(MemoryKind::Consolidate).len() == 1
    })
    .await;
    // An agent's turn is not held up by it.
    assert_eq!(
        text_of(&anthropic(&server, "Agent id: ceo", "hi").await),
        "the CEO's turn"
    );
    let held = &server.memory_requests(MemoryKind::Consolidate)[0];
    assert_eq!((held.step_index, held.answered_at), (None, None));
    server.push_memory(
        MemoryKind::Consolidate,
        Step::record_facts(json!([{"op": "NOOP"}])),
    );
    let reply = within(WAIT, "the pushed answer", waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        reply["content"][0]["input"],
        json!({"facts": [{"op": "NOOP"}]})
    );
    let done = &server.memory_requests(MemoryKind::Consolidate)[0];
    assert_eq!(done.step_index, Some(0));
    assert!(done.answered_at.is_some());

    // A queued request still waiting ends at shutdown.
    let url = format!("{}/v1/messages", server.url());
    let waiting = tokio::spawn(async move {
        post(&client(), url, &anthropic_body(extract, "again", false))
            .await
            .status()
    });
    wait_until(WAIT, "the second extraction request", || {
        server.memory_requests(MemoryKind::Extract).len() == 2
    })
    .await;
    within(WAIT, "shutdown while memory work waits", server.shutdown()).await;
    assert_eq!(within(WAIT, "its answer", waiting).await.unwrap(), 503);
}

#[tokio::test]
async fn memory_work_without_a_queue_is_routed_like_any_request() {
    let server = ScriptedLlm::start(Script::new().fallback(vec![Step::text("fallback")]))
        .await
        .unwrap();
    let reply = anthropic(&server, "OPC memory: extract\nx", "exchange").await;
    assert_eq!(text_of(&reply), "fallback");
    let recorded = server.memory_requests(MemoryKind::Extract);
    assert_eq!(recorded.len(), 1, "still recorded as memory work");
    assert_eq!(recorded[0].step_index, Some(0));
    stop(server).await;
}

#[test]
fn script_parsing_and_validation() {
    let text = r#"{
        "agents": [{"marker": "Agent id: ceo", "replies": [
            {"text": "hi", "delay_ms": 5, "usage": {"input": 1, "output": 2}},
            {"tool": "delegate", "input": {"to": "x"}},
            {"tools": [{"name": "a", "input": {}}, {"name": "b"}]},
            {"fault": "status", "status": 429, "retry_after": 0.05},
            {"fault": "status", "status": 500},
            {"fault": "malformed"},
            {"fault": "cut"},
            {"fault": "hang", "delay_ms": 1}
        ]}],
        "fallback": [{"text": "?"}],
        "memory": {"extract": [{"tool": "record_facts", "input": {"facts": []}, "delay_ms": 2000}], "consolidate": []}
    }"#;
    let script = Script::from_json(text).unwrap();
    assert_eq!(script.memory[&MemoryKind::Extract][0].delay_ms, 2000);
    assert!(script.memory[&MemoryKind::Consolidate].is_empty());
    assert_eq!(script.agents[0].replies.len(), 8);
    assert_eq!(script.agents[0].replies[0].delay_ms, 5);
    assert_eq!(
        script.agents[0].replies[3].kind,
        opc_tests::scripted_llm::StepKind::Fault(Fault::Status {
            status: 429,
            retry_after: Some("0.05".into())
        })
    );
    // Round trip.
    let again = Script::from_json(&serde_json::to_string(&script).unwrap()).unwrap();
    assert_eq!(again, script);

    for (bad, says) in [
        (
            r#"{"agents": [{"marker": "m", "replies": [{}]}]}"#,
            r#"a step needs "text", "tool", a non-empty "tools" or "fault""#,
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"fault": "boom"}]}]}"#,
            r#"unknown fault "boom""#,
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"fault": "status"}]}]}"#,
            r#"fault "status" needs a "status" (400-599)"#,
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"fault": "status", "status": 200}]}]}"#,
            "fault status 200 is not in 400-599",
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"fault": "cut", "text": "x"}]}]}"#,
            r#"fault step "cut" cannot also have text"#,
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"text": "x", "status": 429}]}]}"#,
            r#"status and retry_after need "fault": "status""#,
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"input": {}}]}]}"#,
            r#""input" needs "tool""#,
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"tool": "a", "tools": []}]}]}"#,
            r#"a step has either "tool" or "tools""#,
        ),
        (
            r#"{"agents": [{"marker": "m", "replies": [{"txt": "typo"}]}]}"#,
            "unknown field `txt`",
        ),
        (
            r#"{"agents": [], "fallbacks": []}"#,
            "unknown field `fallbacks`",
        ),
    ] {
        let error = Script::from_json(bad).expect_err(bad);
        assert_eq!(error.classify(), serde_json::error::Category::Data, "{bad}");
        assert!(error.to_string().contains(says), "{bad}: {error}");
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(&path, text).unwrap();
    assert_eq!(Script::from_file(&path).unwrap(), script);
    let error = Script::from_file(dir.path().join("missing.json")).unwrap_err();
    assert!(error.contains("missing.json"), "{error}");
}

#[tokio::test]
async fn binary_serves_a_script_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(
        &path,
        r#"{"agents": [{"marker": "M", "replies": [{"text": "from the binary"}]}]}"#,
    )
    .unwrap();
    let mut child = Reaped(
        std::process::Command::new(env!("CARGO_BIN_EXE_scripted-llm"))
            .arg("--script")
            .arg(&path)
            .arg("--quiet")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let line = blocking_within(WAIT, "the scripted server's address line", move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map(|_| line)
    })
    .expect("the scripted server printed its address")
    .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    let client = client();
    let reply: Value = post(
        &client,
        format!("{url}/v1/messages"),
        &anthropic_body("M", "x", false),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(text_of(&reply), "from the binary");
    let recorded: Value = client
        .get(format!("{url}/_requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(recorded.as_array().unwrap().len(), 1);
    // Stop it the way a user would (SIGTERM) and check it exits cleanly.
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.0.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + WAIT;
    let exit = loop {
        if let Some(exit) = child.0.try_wait().unwrap() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "the scripted server did not exit within {WAIT:?} of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(exit.success(), "{exit:?}");
}

/// A child process that is killed if the test ends early (a failed assertion), so none outlives it.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
