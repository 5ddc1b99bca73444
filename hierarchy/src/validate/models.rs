//! Models and prices: every model reference (defaults, consolidation, agents) resolves to a configured
//! provider, a model of another vendor's family is not sent to Anthropic's API, and a model without
//! a price is said once per provider and model.
//!
//! Invariant: only Anthropic's own API is judged by family; an OpenAI-compatible server or a custom
//! `baseUrl` may serve any name.

use std::collections::HashSet;

use super::checker::{Checker, provider_hint};
use crate::decode::did_you_mean;
use crate::diagnostic::{Anchor, KeyPath};
use crate::schema::ProviderKind;

impl<'a> Checker<'a> {
    /// Every model reference names a configured provider; models without a price get a warning.
    pub(super) fn models(&mut self) {
        let framework = &self.config.framework;
        if let Some(default) = &framework.default_provider
            && !framework.providers.contains_key(default)
        {
            let hint = provider_hint(framework.providers.keys().map(String::as_str), default);
            self.error(
                KeyPath::of(["framework", "defaultProvider"]),
                Anchor::Value,
                format!("`{default}` is not a configured provider"),
                hint,
            );
        }
        let mut references: Vec<(KeyPath, &str)> = vec![(
            KeyPath::of(["framework", "defaultModel"]),
            framework.default_model.as_str(),
        )];
        if let Some(fast) = &framework.fast_model {
            references.push((KeyPath::of(["framework", "fastModel"]), fast));
        }
        if let Some(model) = &framework.memory.consolidation.model {
            references.push((
                KeyPath::of(["framework", "memory", "consolidation", "model"]),
                model,
            ));
        }
        for (id, agent) in &self.config.agents {
            if let Some(model) = &agent.model {
                references.push((Self::agent_path(id).key("model"), model));
            }
        }
        let mut unpriced_warned = HashSet::new();
        for (path, model) in references {
            match framework.resolve_model(model) {
                Ok((provider, id)) => {
                    let priced = framework
                        .providers
                        .get(provider)
                        .is_some_and(|p| p.models.contains_key(id));
                    if priced {
                        continue;
                    }
                    if !model.contains('/')
                        && let Some(family) = foreign_family(framework, provider, id)
                    {
                        self.error(
                            path,
                            Anchor::Value,
                            format!("`{id}` looks like {family} model, but it resolves to provider `{provider}`, which serves Anthropic models"),
                            format!(
                                "add a provider for it (`kind: openai-compatible` with its `baseUrl`) and write `<provider>/{id}`, or use a Claude model; configured providers: {}",
                                framework.providers.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                            ),
                        );
                        continue;
                    }
                    if !unpriced_warned.insert((provider, id)) {
                        continue;
                    }
                    let priced_ids = framework
                        .providers
                        .values()
                        .flat_map(|p| p.models.keys().map(String::as_str));
                    match did_you_mean(id, priced_ids).filter(|s| *s != id) {
                        Some(near) => self.warning(
                            path,
                            Anchor::Value,
                            format!("provider `{provider}` has no price for `{id}`: did you mean `{near}`?"),
                            format!("write `{near}` if that is the model you meant; otherwise add `{id}: {{ input: …, output: … }}` (USD per million tokens) to `framework.providers.{provider}.models`, or its cost counts as 0"),
                        ),
                        None => self.warning(
                            path,
                            Anchor::Value,
                            format!("provider `{provider}` has no price for `{id}`, so its cost will be counted as 0"),
                            format!("add `{id}: {{ input: …, output: … }}` (USD per million tokens) to `framework.providers.{provider}.models`"),
                        ),
                    }
                }
                Err(e) => {
                    let wanted = model.split_once('/').map_or(model, |(p, _)| p);
                    let hint =
                        provider_hint(framework.providers.keys().map(String::as_str), wanted);
                    self.error(
                        path,
                        Anchor::Value,
                        format!("model `{model}` names no configured provider: {e}"),
                        hint,
                    );
                }
            }
        }
    }
}

/// The model family `id` belongs to when it cannot be served by `provider`: a bare id of a known
/// other vendor's family (OpenAI, Google, Meta, Mistral …) resolved to Anthropic's own API. Names of
/// no known family are left to the unpriced-model warning.
/// OpenAI-compatible servers serve any name, and a proxy behind a custom `baseUrl` may too, so only
/// Anthropic's API is judged.
fn foreign_family(
    framework: &crate::schema::Framework,
    provider: &str,
    id: &str,
) -> Option<&'static str> {
    let p = framework.providers.get(provider)?;
    if p.kind != ProviderKind::Anthropic
        || p.base_url.trim_end_matches('/') != "https://api.anthropic.com"
    {
        return None;
    }
    let lower = id.to_ascii_lowercase();
    if lower.starts_with("claude") {
        return None;
    }
    const FAMILIES: &[(&str, &str)] = &[
        ("gpt-", "an OpenAI"),
        ("chatgpt", "an OpenAI"),
        ("o1", "an OpenAI"),
        ("o3", "an OpenAI"),
        ("o4", "an OpenAI"),
        ("text-embedding", "an OpenAI"),
        ("gemini", "a Google"),
        ("gemma", "a Google"),
        ("llama", "a Meta Llama"),
        ("mistral", "a Mistral"),
        ("mixtral", "a Mistral"),
        ("codestral", "a Mistral"),
        ("qwen", "a Qwen"),
        ("deepseek", "a DeepSeek"),
        ("phi", "a Microsoft Phi"),
        ("grok", "an xAI"),
        ("command", "a Cohere"),
    ];
    FAMILIES
        .iter()
        .find(|(prefix, _)| lower.starts_with(prefix))
        .map(|(_, family)| *family)
}
