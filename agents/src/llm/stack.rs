//! The engine's whole call stack: one shared stack around the provider router, and the per-root state
//! its layers keep for a conversation.
//!
//! ```text
//!   engine ─► trace ─► [privacy] ─► router ─► provider's stack (cost ─► retry ─► limit ─► timeout ─► wire)
//! ```
//!
//! (Why that order: [`super::layers`].)
//!
//! Per-root state: a layer that keeps state for a conversation (the privacy layer's vault) keeps it in a
//! [`RootStates`] registry, keyed by the root task id that every call carries ([`super::CallMeta`]). The
//! engine owns the registries' lifecycle through [`RootLifecycle`]: it opens a root's state when the
//! root's tree starts running in this process and closes it when the tree has no live task, so the
//! state lives exactly as long as the conversation's tree and never outlives it.
//!
//! Invariants:
//! - the shared layers run once per call, whatever the provider and however many attempts it takes;
//! - a registry never creates state on a lookup: a call whose root is not open gets `None`, and the
//!   layer decides what that means (the privacy layer then uses a vault for that call alone).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::layers::TraceLayer;
use super::provider::Providers;
use super::{Layer, LlmError, LlmRequest, LlmResponse, SharedLlm, Stack};

/// Told when a root task's tree starts and stops running in this process.
pub trait RootLifecycle: Send + Sync {
    /// Root task `root` of `conversation` starts (or resumes) running here.
    fn root_started(&self, root: i64, conversation: &str);
    /// Root task `root`'s tree has no live task left here (finished, suspended to disk, or shut down).
    fn root_ended(&self, root: i64);
}

/// Makes a root's state from its id and conversation.
type MakeState<S> = Box<dyn Fn(i64, &str) -> S + Send + Sync>;

/// State of type `S` per running root task, made by a factory when the root starts and dropped when it
/// ends. Lookups by root id are cheap and never create state.
pub struct RootStates<S> {
    make: MakeState<S>,
    live: Mutex<HashMap<i64, Arc<S>>>,
}

impl<S: Send + Sync + 'static> RootStates<S> {
    /// A registry whose state for a root is `make(root, conversation)`.
    pub fn new(make: impl Fn(i64, &str) -> S + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(RootStates {
            make: Box::new(make),
            live: Mutex::default(),
        })
    }

    /// The state of root `root`, while it runs.
    pub fn get(&self, root: i64) -> Option<Arc<S>> {
        self.lock().get(&root).cloned()
    }

    /// How many roots have state now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no root has state now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<S>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<S: Send + Sync + 'static> RootLifecycle for RootStates<S> {
    fn root_started(&self, root: i64, conversation: &str) {
        self.lock()
            .entry(root)
            .or_insert_with(|| Arc::new((self.make)(root, conversation)));
    }

    fn root_ended(&self, root: i64) {
        // Dropped outside the lock (a state may be large); a call still holding its Arc finishes with it.
        let gone = self.lock().remove(&root);
        drop(gone);
    }
}

/// A layer for the privacy position (between trace and the router), and the per-root registries it
/// reads, whose lifecycle the engine drives.
pub struct Seam {
    /// The layer.
    pub layer: Box<dyn Layer>,
    /// Registries the layer keeps per-root state in.
    pub roots: Vec<Arc<dyn RootLifecycle>>,
}

/// What the engine calls: the shared stack (trace, privacy) around the router of `providers`.
#[derive(Clone)]
pub struct CallStack {
    providers: Providers,
    service: SharedLlm,
    roots: Arc<Vec<Arc<dyn RootLifecycle>>>,
    order: Arc<Vec<&'static str>>,
}

impl CallStack {
    /// `trace ─► router`: no privacy.
    pub fn new(providers: Providers) -> Self {
        CallStack::with_privacy(providers, None)
    }

    /// `trace ─► privacy ─► router`, with the privacy seam when given.
    pub fn with_privacy(providers: Providers, privacy: Option<Seam>) -> Self {
        let mut stack = Stack::new().layer(TraceLayer);
        let mut roots = Vec::new();
        if let Some(seam) = privacy {
            stack = stack.boxed_layer(seam.layer);
            roots = seam.roots;
        }
        let mut order = stack.names();
        order.push("router");
        CallStack {
            service: stack.service(providers.router()),
            providers,
            roots: Arc::new(roots),
            order: Arc::new(order),
        }
    }

    /// Run one call through the whole stack.
    pub async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        self.service.call(request).await
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
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use indexmap::IndexMap;
    use opc_hierarchy::schema::ModelPrice;

    use super::*;
    use crate::llm::layers::{RetryPolicy, StackOptions, standard_stack};
    use crate::llm::{
        CallMeta, Content, LlmService, Message, StopReason, StreamDelta, TokenSink, Usage,
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
        assert_eq!(stack.order(), ["trace", "probe", "router"]);

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
        assert_eq!(plain.order(), ["trace", "router"]);
    }

    #[test]
    fn root_states_live_from_start_to_end_and_lookups_never_create() {
        let made = Arc::new(AtomicU32::new(0));
        let counter = made.clone();
        let states = RootStates::new(move |root, conversation: &str| {
            counter.fetch_add(1, Ordering::SeqCst);
            format!("{root}:{conversation}")
        });
        assert!(states.get(7).is_none());
        states.root_started(7, "c-7");
        states.root_started(7, "c-7");
        assert_eq!(made.load(Ordering::SeqCst), 1);
        let held = states.get(7).unwrap();
        assert_eq!(held.as_str(), "7:c-7");
        states.root_ended(7);
        assert!(states.get(7).is_none());
        assert!(states.is_empty());
        // A call still holding the state finishes with it.
        assert_eq!(held.as_str(), "7:c-7");
    }
}
