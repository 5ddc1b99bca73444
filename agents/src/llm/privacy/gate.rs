//! The NER gate ([`NerGate`]): what a call needs from the NER tier before its request is masked, and
//! where the gateway stands with the model ([`readiness`], for `/healthz` and the admin console).
//!
//! Why: names and addresses need the NER model, which loads after start (and may fail to). When a
//! wanted type needs it and `requireNer` is on (the default), a call waits for the model, up to
//! `nerWait`, before anything is masked; past that, or when loading failed, the call fails closed
//! ([`LlmError::Privacy`], saying why and how to fix it) and nothing is sent. A request masked by
//! patterns alone would carry every name in it. Waiting also starts the load, or retries a failed
//! one when due (see [`opc_privacy::detect::ner`]), so a model fetched beside a running gateway is
//! picked up by the next call.
//!
//! Invariant: reasons name files and causes, never content.

use std::time::Duration;

use opc_hierarchy::Config;
use opc_privacy::EntityType;
use opc_privacy::detect::NerSlot;
use opc_privacy::detect::ner::{NerState, served_by_ner};
use serde::Serialize;

use crate::llm::LlmError;

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

    /// `Ok` when masking may run now without waiting: the model is in, or it is not required (the
    /// load is kicked either way). Else why not. For callers that must not wait and can try again
    /// later (remote embeddings: rows wait for the model rather than leave masked by patterns only).
    pub fn ready_now(&self) -> Result<(), String> {
        self.kick();
        if !self.wanted || self.wait.is_none() || self.slot.get().is_some() {
            return Ok(());
        }
        Err(format!(
            "the privacy NER model that finds names is not loaded yet ({}); nothing is sent until it is",
            self.slot.state().as_str()
        ))
    }

    /// `Ok` once the call may be masked: the model is in, or it is not required. Else why not, for
    /// people: what is missing, that nothing was sent, and how to fix it.
    pub(super) async fn pass(&self) -> Result<(), LlmError> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    /// A stand-in for a loaded NER model (what it finds does not matter here).
    struct NoNames;

    impl opc_privacy::detect::NerModel for NoNames {
        fn entities(&self, _: &str) -> Vec<opc_privacy::Entity> {
            Vec::new()
        }
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
        ready.set(Arc::new(NoNames));
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
}
