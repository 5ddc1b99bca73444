//! The engine's whole call stack: one shared stack around the provider router.
//!
//! ```text
//!   engine ─► trace ─► [privacy] ─► capture ─► router ─► provider's stack (cost ─► retry ─► limit ─► timeout ─► wire)
//! ```
//!
//! (Why that order: [`super::layers`].) The layer at the privacy position and the per-root state it
//! keeps come in a [`Seam`] (see `seam`, re-exported here); the engine drives that state's lifecycle
//! through the stack (`CallStack::root_started`, `CallStack::root_ended`).
//!
//! Who hears what the privacy layer does in a call (the engine's event bus) belongs to the handle the
//! call is made through, not to the layers: the stack is built before the engine's bus exists, and a
//! reload hands it to the engine's next state. [`CallStack::call`] hands the handle's listener to the
//! call's task (`privacy::heard_by`), where the privacy layer finds it.
//!
//! Invariant: the shared layers run once per call, whatever the provider and however many attempts it
//! takes.

use std::sync::Arc;

use super::genai::CaptureLayer;
use super::layers::TraceLayer;
use super::privacy::{PrivacyEvents, heard_by};
use super::provider::Providers;
pub use super::seam::{RootLifecycle, RootStates, Seam};
use super::{LlmError, LlmRequest, LlmResponse, SharedLlm, Stack};

/// What the engine calls: the shared stack (trace, privacy) around the router of `providers`.
#[derive(Clone)]
pub struct CallStack {
    providers: Providers,
    service: SharedLlm,
    roots: Arc<Vec<Arc<dyn RootLifecycle>>>,
    order: Arc<Vec<&'static str>>,
    /// Told what the privacy layer does in calls made through this handle (`None`: nobody).
    listener: Option<Arc<dyn PrivacyEvents>>,
}

impl CallStack {
    /// `trace ─► capture ─► router`: no privacy.
    pub fn new(providers: Providers) -> Self {
        CallStack::with_privacy(providers, None)
    }

    /// `trace ─► privacy ─► capture ─► router`, with the privacy seam when given.
    pub fn with_privacy(providers: Providers, privacy: Option<Seam>) -> Self {
        let mut stack = Stack::new().layer(TraceLayer);
        let mut roots = Vec::new();
        let masked_only = privacy.is_some();
        if let Some(seam) = privacy {
            stack = stack.boxed_layer(seam.layer);
            roots = seam.roots;
        }
        // Below privacy: the only content a span may carry is the masked text (`genai`).
        stack = stack.layer(CaptureLayer { masked_only });
        let mut order = stack.names();
        order.push("router");
        CallStack {
            service: stack.service(providers.router()),
            providers,
            roots: Arc::new(roots),
            order: Arc::new(order),
            listener: None,
        }
    }

    /// This stack, its privacy layer telling `listener` what it does in every call made through the
    /// returned handle (the engine's event bus). The layers are shared with `self`.
    pub(crate) fn heard_by(self, listener: Arc<dyn PrivacyEvents>) -> Self {
        CallStack {
            listener: Some(listener),
            ..self
        }
    }

    /// Run one call through the whole stack.
    pub async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        match &self.listener {
            Some(listener) => heard_by(listener.clone(), self.service.call(request)).await,
            None => self.service.call(request).await,
        }
    }

    /// The providers below the router.
    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    /// The shared stack's layer names, outermost first, ending with `router`.
    pub fn order(&self) -> &[&'static str] {
        &self.order
    }

    /// Root `root` of `conversation` starts running: open its state in every registry.
    pub(crate) fn root_started(&self, root: i64, conversation: &str) {
        for registry in self.roots.iter() {
            registry.root_started(root, conversation);
        }
    }

    /// Root `root`'s tree has no live task: drop its state.
    pub(crate) fn root_ended(&self, root: i64) {
        for registry in self.roots.iter() {
            registry.root_ended(root);
        }
    }
}

impl From<Providers> for CallStack {
    fn from(providers: Providers) -> Self {
        CallStack::new(providers)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use indexmap::IndexMap;
    use opc_hierarchy::schema::ModelPrice;

    use super::*;
    use crate::llm::layers::{RetryPolicy, StackOptions, standard_stack};
    use crate::llm::{
        CallMeta, Content, Layer, LlmService, Message, StopReason, StreamDelta, TokenSink, Usage,
    };

    type Log = Arc<Mutex<Vec<String>>>;

    fn push(log: &Log, line: impl Into<String>) {
        log.lock().unwrap().push(line.into());
    }

    /// A stand-in for the privacy layer: rewrites the request once (`alice@example.com` → `MASKED`),
    /// wraps the sink (tags every text delta, records what it sees), and logs its entry and exit.
    struct Probe {
        log: Log,
        calls: Arc<AtomicU32>,
    }

    struct ProbeService {
        inner: SharedLlm,
        log: Log,
        calls: Arc<AtomicU32>,
    }

    impl Layer for Probe {
        fn name(&self) -> &'static str {
            "probe"
        }

        fn layer(&self, inner: SharedLlm) -> SharedLlm {
            Arc::new(ProbeService {
                inner,
                log: self.log.clone(),
                calls: self.calls.clone(),
            })
        }
    }

    fn mask(text: &str) -> String {
        text.replace("alice@example.com", "MASKED")
    }

    #[async_trait::async_trait]
    impl LlmService for ProbeService {
        async fn call(&self, mut request: LlmRequest) -> Result<LlmResponse, LlmError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            push(&self.log, "probe: in");
            request.system = mask(&request.system);
            for message in &mut request.messages {
                for block in &mut message.content {
                    if let Content::Text { text } = block {
                        *text = mask(text);
                    }
                }
            }
            if request.meta.agent == "route-me" {
                request.provider = "trusted".into();
            }
            if let Some(consumer) = request.stream.take() {
                let log = self.log.clone();
                request.stream = Some(TokenSink::from_fn(move |delta| {
                    push(&log, format!("probe sink: {delta:?}"));
                    consumer.send(match delta {
                        StreamDelta::Text(text) => StreamDelta::Text(format!("<{text}>")),
                        StreamDelta::Restart => StreamDelta::Restart,
                    });
                }));
            }
            let result = self.inner.call(request).await;
            push(&self.log, "probe: out");
            result
        }
    }

    /// The wire client's stand-in: records each attempt's request, streams a partial answer, and
    /// fails the first `failures` attempts with a 500.
    struct Wire {
        name: &'static str,
        log: Log,
        failures: AtomicU32,
        seen: Mutex<Vec<LlmRequest>>,
    }

    #[async_trait::async_trait]
    impl LlmService for Wire {
        async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
            push(&self.log, format!("{}: attempt", self.name));
            let sink = request.stream.clone();
            self.seen.lock().unwrap().push(request);
            if let Some(sink) = &sink {
                sink.send(StreamDelta::Text("Hel".into()));
            }
            let fail = self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fail {
                return Err(LlmError::Status {
                    provider: self.name.into(),
                    status: 500,
                    message: "boom".into(),
                    retry_after: None,
                });
            }
            if let Some(sink) = &sink {
                sink.send(StreamDelta::Text("lo".into()));
            }
            Ok(LlmResponse {
                content: vec![Content::text("Hello")],
                stop_reason: StopReason::EndTurn,
                usage: Some(Usage {
                    input_tokens: 1_000_000,
                    output_tokens: 1_000_000,
                }),
                cost_usd: 0.0,
                attempts: 1,
                privacy: None,
            })
        }
    }

    fn wire(name: &'static str, log: &Log, failures: u32) -> Arc<Wire> {
        Arc::new(Wire {
            name,
            log: log.clone(),
            failures: AtomicU32::new(failures),
            seen: Mutex::default(),
        })
    }

    fn provider_stack(provider: &str, price: f64) -> Stack {
        standard_stack(StackOptions {
            provider: provider.into(),
            attempt_timeout: Duration::from_secs(5),
            retry: RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                ..RetryPolicy::default()
            },
            max_concurrent: Some(1),
            requests_per_minute: None,
            prices: IndexMap::from([(
                "m".to_string(),
                ModelPrice {
                    input: price,
                    output: 0.0,
                },
            )]),
            shared: None,
        })
    }

    fn request(agent: &str, stream: Option<TokenSink>) -> LlmRequest {
        LlmRequest {
            provider: "p".into(),
            model: "m".into(),
            system: "Mail alice@example.com".into(),
            messages: vec![Message::user("Write to alice@example.com")],
            tools: vec![],
            tool_choice: None,
            max_tokens: 10,
            stream,
            meta: CallMeta {
                agent: agent.into(),
                task_id: Some(2),
                root_id: Some(1),
                conversation: Some("c-1".into()),
                work: Default::default(),
            },
            guard: None,
        }
    }

    #[tokio::test]
    async fn privacy_runs_once_above_retry_and_retries_replay_its_request() {
        let log: Log = Arc::default();
        let calls = Arc::new(AtomicU32::new(0));
        let p = wire("p", &log, 2);
        let providers = Providers::from_services([(
            "p".to_string(),
            provider_stack("p", 3.0).service(p.clone()),
        )]);
        let probe = Probe {
            log: log.clone(),
            calls: calls.clone(),
        };
        let stack = CallStack::with_privacy(
            providers,
            Some(Seam {
                layer: Box::new(probe),
                roots: Vec::new(),
            }),
        );
        assert_eq!(stack.order(), ["trace", "probe", "capture", "router"]);

        let (sink, mut consumer) = TokenSink::channel();
        let response = stack.call(request("ceo", Some(sink))).await.unwrap();

        // One call at the privacy position, three attempts below it, in that order.
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(response.attempts, 3);
        let lines = log.lock().unwrap().clone();
        let flow: Vec<&str> = lines
            .iter()
            .filter(|l| !l.starts_with("probe sink"))
            .map(String::as_str)
            .collect();
        assert_eq!(
            flow,
            [
                "probe: in",
                "p: attempt",
                "p: attempt",
                "p: attempt",
                "probe: out"
            ]
        );
        // Every attempt carried exactly the request the privacy position produced.
        let seen = p.seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        for attempt in seen.iter() {
            assert_eq!(attempt.system, "Mail MASKED");
            assert_eq!(attempt.messages, [Message::user("Write to MASKED")]);
            assert_eq!(attempt.meta, seen[0].meta);
            assert_eq!(attempt.meta.root_id, Some(1));
            assert_eq!(attempt.meta.conversation.as_deref(), Some("c-1"));
        }
        // The wrapped sink saw every delta, restarts included, and the consumer got its output.
        let probe_saw: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("probe sink: "))
            .collect();
        assert_eq!(
            probe_saw,
            [
                "Text(\"Hel\")",
                "Restart",
                "Text(\"Hel\")",
                "Restart",
                "Text(\"Hel\")",
                "Text(\"lo\")"
            ]
        );
        let mut got = Vec::new();
        while let Ok(delta) = consumer.try_recv() {
            got.push(delta);
        }
        assert_eq!(got.len(), 6);
        assert_eq!(got[0], StreamDelta::Text("<Hel>".into()));
        assert_eq!(got[1], StreamDelta::Restart);
        assert_eq!(got[5], StreamDelta::Text("<lo>".into()));
        // Cost (top of the provider's stack) priced the final usage once.
        assert!(
            (response.cost_usd - 3.0).abs() < 1e-9,
            "{}",
            response.cost_usd
        );
    }

    #[tokio::test]
    async fn the_privacy_position_can_route_to_another_provider_priced_by_its_own_table() {
        let log: Log = Arc::default();
        let p = wire("p", &log, 0);
        let trusted = wire("trusted", &log, 0);
        let providers = Providers::from_services([
            ("p".to_string(), provider_stack("p", 3.0).service(p.clone())),
            (
                "trusted".to_string(),
                provider_stack("trusted", 7.0).service(trusted.clone()),
            ),
        ]);
        let stack = CallStack::with_privacy(
            providers,
            Some(Seam {
                layer: Box::new(Probe {
                    log: log.clone(),
                    calls: Arc::default(),
                }),
                roots: Vec::new(),
            }),
        );
        let response = stack.call(request("route-me", None)).await.unwrap();
        assert!(p.seen.lock().unwrap().is_empty());
        assert_eq!(trusted.seen.lock().unwrap().len(), 1);
        assert!((response.cost_usd - 7.0).abs() < 1e-9);

        let mut unknown = request("ceo", None);
        unknown.provider = "nowhere".into();
        let error = stack.call(unknown).await.unwrap_err();
        assert_eq!(error, LlmError::UnknownModel("nowhere/m".into()));
        assert!(!error.is_retryable());
    }

    #[test]
    fn the_standard_stacks_are_in_the_documented_order() {
        assert_eq!(
            provider_stack("p", 1.0).names(),
            ["cost", "retry", "limit", "timeout"]
        );
        let plain = CallStack::new(Providers::from_services([]));
        assert_eq!(plain.order(), ["trace", "capture", "router"]);
    }
}
