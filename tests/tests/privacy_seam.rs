//! The privacy seam in a running engine: a recording layer at the privacy position (between trace and
//! the provider router) sees every model call of a conversation's tree once, with the conversation
//! and root it belongs to and that root's state open; what it sends down is what every attempt
//! replays; what it restores is what the engine stores, delegates and streams; and the root's state
//! is gone when the tree ends.
//!
//! The layer here is a stand-in for the privacy layer: it masks one address (`alice@example.com` →
//! `MASKED`) everywhere in the request and restores it in answers, tool calls and streamed deltas.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use opc_agents::context::NoMemory;
use opc_agents::llm::layers::{StackOptions, standard_stack};
use opc_agents::llm::provider::Providers;
use opc_agents::llm::stack::{CallStack, RootStates, Seam};
use opc_agents::llm::{
    CallMeta, Content, Layer, LlmError, LlmRequest, LlmResponse, LlmService, SharedLlm, StopReason,
    StreamDelta, TokenSink, Usage,
};
use opc_agents::{Engine, Event, SqliteStore, TaskState};
use opc_tests::org::{Execution, TestOrg, Wire};
use opc_tests::wait::{WAIT, within};
use serde_json::{Value, json};

const REAL: &str = "alice@example.com";
const FAKE: &str = "MASKED";

type Future1<'a> = Pin<Box<dyn Future<Output = Result<LlmResponse, LlmError>> + Send + 'a>>;

/// What the probe keeps per root: which root and conversation it was opened for.
struct RootState {
    root: i64,
    conversation: String,
}

/// One call as the probe saw it.
#[derive(Clone, Debug)]
struct Seen {
    meta: CallMeta,
    /// `(root, conversation)` of the state open for the call's root, if any.
    state: Option<(i64, String)>,
}

struct Probe {
    roots: Arc<RootStates<RootState>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

struct ProbeService {
    inner: SharedLlm,
    roots: Arc<RootStates<RootState>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Layer for Probe {
    fn name(&self) -> &'static str {
        "privacy-probe"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(ProbeService {
            inner,
            roots: self.roots.clone(),
            seen: self.seen.clone(),
        })
    }
}

fn swap_value(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(s) => *s = s.replace(from, to),
        Value::Array(items) => items.iter_mut().for_each(|v| swap_value(v, from, to)),
        Value::Object(map) => map.values_mut().for_each(|v| swap_value(v, from, to)),
        _ => {}
    }
}

fn swap_blocks(blocks: &mut [Content], from: &str, to: &str) {
    for block in blocks {
        match block {
            Content::Text { text } => *text = text.replace(from, to),
            Content::ToolUse { input, .. } => swap_value(input, from, to),
            Content::ToolResult { content, .. } => *content = content.replace(from, to),
        }
    }
}

impl LlmService for ProbeService {
    fn call<'a, 'b>(&'a self, mut request: LlmRequest) -> Future1<'b>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            let state = request
                .meta
                .root_id
                .and_then(|root| self.roots.get(root))
                .map(|s| (s.root, s.conversation.clone()));
            self.seen.lock().unwrap().push(Seen {
                meta: request.meta.clone(),
                state,
            });
            request.system = request.system.replace(REAL, FAKE);
            for message in &mut request.messages {
                swap_blocks(&mut message.content, REAL, FAKE);
            }
            if let Some(consumer) = request.stream.take() {
                request.stream = Some(TokenSink::from_fn(move |delta| {
                    consumer.send(match delta {
                        StreamDelta::Text(text) => StreamDelta::Text(text.replace(FAKE, REAL)),
                        StreamDelta::Restart => StreamDelta::Restart,
                    })
                }));
            }
            let mut response = self.inner.call(request).await?;
            swap_blocks(&mut response.content, FAKE, REAL);
            Ok(response)
        })
    }
}

/// The model: the CEO delegates the refund to VP Operations and reports its answer; VP Operations
/// fails its first attempt (so the call is retried), then answers, streamed.
#[derive(Default)]
struct Model {
    attempts: Mutex<Vec<LlmRequest>>,
    vp_failed: AtomicU32,
}

impl LlmService for Model {
    fn call<'a, 'b>(&'a self, request: LlmRequest) -> Future1<'b>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            self.attempts.lock().unwrap().push(LlmRequest {
                stream: None,
                ..request.clone()
            });
            let first = request.messages[0].text();
            let result = request.messages.iter().find_map(|m| {
                m.content.iter().find_map(|c| match c {
                    Content::ToolResult { content, .. } => Some(content.clone()),
                    _ => None,
                })
            });
            let content = match (request.meta.agent.as_str(), result) {
                ("ceo", None) => vec![Content::ToolUse {
                    id: "toolu_1".into(),
                    name: "delegate".into(),
                    input: json!({"agent": "vp-ops", "task": format!("Refund: {first}")}),
                }],
                ("ceo", Some(result)) => vec![Content::text(format!("Done. {result}"))],
                ("vp-ops", _) => {
                    if let Some(sink) = &request.stream {
                        sink.send(StreamDelta::Text("Refunded ".into()));
                    }
                    if self.vp_failed.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(LlmError::Status {
                            provider: "llm".into(),
                            status: 503,
                            message: "busy".into(),
                            retry_after: None,
                        });
                    }
                    if let Some(sink) = &request.stream {
                        sink.send(StreamDelta::Text(FAKE.into()));
                    }
                    vec![Content::text(format!("Refunded {FAKE}"))]
                }
                (other, _) => vec![Content::text(format!("no script for {other}"))],
            };
            let stop_reason = if matches!(content[0], Content::ToolUse { .. }) {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            };
            Ok(LlmResponse {
                content,
                stop_reason,
                usage: Some(Usage {
                    input_tokens: 10,
                    output_tokens: 5,
                }),
                cost_usd: 0.0,
                attempts: 1,
                privacy: None,
            })
        })
    }
}

#[tokio::test]
async fn a_layer_at_the_privacy_position_sees_each_call_once_scoped_to_its_root() {
    let org = TestOrg::new("http://127.0.0.1:9", Wire::Anthropic, Execution::default());
    let loaded = &org.loaded;
    let options = TestOrg::options(true);
    let model = Arc::new(Model::default());
    let provider = standard_stack(StackOptions {
        provider: "llm".into(),
        attempt_timeout: options.attempt_timeout,
        retry: options.retry,
        max_concurrent: None,
        requests_per_minute: None,
        prices: loaded.config.framework.providers["llm"].models.clone(),
        shared: None,
    })
    .service(model.clone());
    let roots = RootStates::new(|root, conversation: &str| RootState {
        root,
        conversation: conversation.to_string(),
    });
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let stack = CallStack::with_privacy(
        Providers::from_services([("llm".to_string(), provider)]),
        Some(Seam {
            layer: Box::new(Probe {
                roots: roots.clone(),
                seen: seen.clone(),
            }),
            roots: vec![roots.clone()],
        }),
    );
    assert_eq!(
        stack.order(),
        ["trace", "privacy-probe", "capture", "router"]
    );
    let engine = Engine::new(
        Arc::new(loaded.config.clone()),
        Arc::new(loaded.org.clone()),
        &loaded.base_dir,
        stack,
        Arc::new(SqliteStore::open(&org.database()).unwrap()),
        Arc::new(NoMemory),
        options,
    )
    .await
    .unwrap();
    let mut events = engine.events().subscribe();

    let run = engine
        .send(None, &format!("Please refund {REAL} today"))
        .await
        .unwrap();
    let (conversation, root) = (run.conversation.clone(), run.task);
    let outcome = within(WAIT, "the request to finish", run.wait()).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    // The answer is restored on the way in.
    assert_eq!(
        outcome.text,
        format!("Done. Refunded {REAL}"),
        "{}",
        outcome.text
    );

    // One call at the privacy position per engine call: ceo, vp-ops, ceo; each with its conversation
    // and root, and the root's state open while it ran.
    let seen = seen.lock().unwrap().clone();
    let agents: Vec<&str> = seen.iter().map(|s| s.meta.agent.as_str()).collect();
    assert_eq!(agents, ["ceo", "vp-ops", "ceo"]);
    for call in &seen {
        assert_eq!(call.meta.root_id, Some(root), "{call:?}");
        assert_eq!(
            call.meta.conversation.as_deref(),
            Some(conversation.as_str())
        );
        assert_eq!(call.state, Some((root, conversation.clone())), "{call:?}");
    }
    assert_ne!(seen[1].meta.task_id, Some(root));
    // The tree has ended: its state is dropped.
    assert!(roots.is_empty());

    // Below the privacy position: four attempts (vp-ops retried once), none with the real value, and
    // the retry replayed exactly the request the privacy position produced.
    let attempts = model.attempts.lock().unwrap().clone();
    let attempt_agents: Vec<&str> = attempts.iter().map(|r| r.meta.agent.as_str()).collect();
    assert_eq!(attempt_agents, ["ceo", "vp-ops", "vp-ops", "ceo"]);
    for attempt in &attempts {
        let body = format!("{} {:?}", attempt.system, attempt.messages);
        assert!(!body.contains(REAL), "{body}");
    }
    assert_eq!(attempts[1].messages, attempts[2].messages);
    assert_eq!(attempts[1].system, attempts[2].system);
    assert!(attempts[1].messages[0].text().contains(FAKE));

    // The delegate carried the real value into the engine (the child's task), and the child's request
    // was masked again.
    let tree = engine.store().tree(root).await.unwrap();
    let child = tree.iter().find(|t| t.agent == "vp-ops").unwrap();
    assert_eq!(child.input, format!("Refund: Please refund {REAL} today"));
    assert_eq!(
        child.output.as_deref(),
        Some(format!("Refunded {REAL}").as_str())
    );

    // Streamed deltas went through the layer's sink: restored, with the failed attempt's restart.
    let mut streamed = Vec::new();
    while let Ok(event) = events.try_recv() {
        match event {
            Event::Token { task, text, .. } if task == child.id => streamed.push(text),
            Event::StreamRestarted { task } if task == child.id => {
                streamed.push("<restart>".into())
            }
            _ => {}
        }
    }
    assert_eq!(streamed, ["Refunded ", "<restart>", "Refunded ", REAL]);
}
