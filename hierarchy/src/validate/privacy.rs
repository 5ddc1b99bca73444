//! Privacy: the route model of mode `route` is chosen on purpose and configured, and what lets
//! personal data reach a model unmasked (`detectTypes` leaving a type out, `requireNer: false`) is
//! said out loud.
//!
//! Invariant: the detector's own list of types (`opc_shapes`) is the reference, so a warning names
//! exactly the types that would leak.

use super::checker::{Checker, provider_hint};
use crate::diagnostic::{Anchor, KeyPath};
use crate::schema::PrivacyMode;

impl<'a> Checker<'a> {
    /// `privacy.routeModel`: required in mode `route`, written `provider/model`, naming a configured
    /// provider and one of the models it lists (the trusted model personal data is sent to must be
    /// chosen on purpose, never resolved by a default); ignored, with a warning, in other modes.
    pub(super) fn privacy(&mut self) {
        self.detect_types();
        self.require_ner();
        let framework = &self.config.framework;
        let privacy = &framework.privacy;
        let path = KeyPath::of(["framework", "privacy", "routeModel"]);
        let providers = || framework.providers.keys().map(String::as_str);
        match (privacy.mode, privacy.route_model.as_deref()) {
            (PrivacyMode::Route, None) if privacy.enabled => self.error(
                KeyPath::of(["framework", "privacy", "mode"]),
                Anchor::Value,
                "mode `route` needs `routeModel`: the model that requests carrying personal data are sent to".into(),
                "add `routeModel: <provider>/<model>`, a model on a provider you trust (for example a local OpenAI-compatible server)",
            ),
            (PrivacyMode::Route, Some(reference)) => {
                let Some((provider, id)) = reference.split_once('/') else {
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{reference}` names no provider: the route model is written `provider/model`"),
                        provider_hint(providers(), reference),
                    );
                    return;
                };
                match framework.providers.get(provider) {
                    None => {
                        let hint = provider_hint(providers(), provider);
                        self.error(
                            path,
                            Anchor::Value,
                            format!("`{provider}` is not a configured provider"),
                            hint,
                        );
                    }
                    Some(p) if !p.models.contains_key(id) => self.error(
                        path,
                        Anchor::Value,
                        format!("provider `{provider}` lists no model `{id}`"),
                        format!(
                            "add `{id}: {{ input: 0, output: 0 }}` (or its prices) to `framework.providers.{provider}.models`: the model personal data goes to must be configured"
                        ),
                    ),
                    Some(_) => {}
                }
            }
            (mode, Some(_)) if mode != PrivacyMode::Route => self.warning(
                path,
                Anchor::Key,
                format!("`routeModel` is used only in mode `route`; the mode is `{}`", mode.as_str()),
                "remove it, or set `mode: route`",
            ),
            _ => {}
        }
    }

    /// An enabled privacy gateway whose `detectTypes` leaves out a type the detector supports lets that
    /// kind of personal data reach the model unmasked (an IBAN, say). That may be deliberate, but the
    /// shipped example once did it by accident, so it is worth a warning that names each type left out.
    /// The detector's own list ([`opc_shapes::EntityType::ALL`]) is the reference: what it can find
    /// and is not asked to find is what leaks.
    fn detect_types(&mut self) {
        let privacy = &self.config.framework.privacy;
        let path = KeyPath::of(["framework", "privacy", "detectTypes"]);
        // Left out, the key defaults to every type; written, it is what the user chose.
        if !privacy.enabled || self.node_at(&path).is_none() {
            return;
        }
        let missing: Vec<&str> = opc_shapes::EntityType::ALL
            .iter()
            .map(|t| t.as_str())
            .filter(|name| !privacy.detect_types.iter().any(|t| t.as_str() == *name))
            .collect();
        if missing.is_empty() {
            return;
        }
        let (list, them) = match missing.as_slice() {
            [one] => (format!("`{one}`"), "it"),
            [init @ .., last] => (
                format!(
                    "{} and `{last}`",
                    init.iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "them",
            ),
            [] => return,
        };
        self.warning(
            path,
            Anchor::Value,
            format!(
                "`detectTypes` leaves out {list}, which the detector supports: such personal data reaches the model unmasked"
            ),
            format!(
                "add {} to the list, or remove `detectTypes` so that every type is detected; keep {them} out only if that data may leave this machine",
                missing.join(", ")
            ),
        );
    }

    /// `requireNer: false` lets LLM calls go out masked by patterns alone while the NER model loads
    /// (and for good when it cannot load): the types only the model finds well (names, addresses)
    /// then reach the model unmasked. Allowed, on purpose, so said once, naming those types.
    fn require_ner(&mut self) {
        let privacy = &self.config.framework.privacy;
        if !privacy.enabled || privacy.require_ner {
            return;
        }
        let served: Vec<&str> = privacy
            .detect_types
            .iter()
            .map(|t| t.as_str())
            .filter(|name| {
                opc_shapes::EntityType::parse(name).is_some_and(opc_shapes::served_by_ner)
            })
            .collect();
        let list = match served.as_slice() {
            [] => return,
            [one] => format!("`{one}`"),
            [init @ .., last] => format!(
                "{} and `{last}`",
                init.iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.warning(
            KeyPath::of(["framework", "privacy", "requireNer"]),
            Anchor::Value,
            format!(
                "`requireNer: false`: {list} are found by the NER model, so until it has loaded (or for good, if it cannot load) they reach the LLM unmasked"
            ),
            "remove `requireNer: false` so LLM calls wait for the model (up to `nerWait`) and fail closed without it; fetch it ahead with `opc models fetch`",
        );
    }
}
