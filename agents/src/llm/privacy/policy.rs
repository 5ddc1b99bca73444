//! The privacy policy a config asks for: the [`Mode`] (what is done with personal data) and the
//! [`Detector`] (which types are looked for, and what is never personal data).
//!
//! Invariant: pure functions of the config; a `route` mode is only ever built with a model the config
//! resolves ([`mode`] says why not otherwise).

use opc_hierarchy::Config;
use opc_hierarchy::schema::PrivacyMode;
use opc_privacy::EntityType;
use opc_privacy::detect::{DetectOptions, Detector, NerSlot};

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
