//! Providers: turning `framework.providers` into HTTP-backed [`LlmService`]s, each in its own stack, and
//! the router that sends a request to the stack of the provider it names ([`LlmRequest::provider`]).
//!
//! The endpoint, key and HTTP client the wire clients share live in `endpoint` (a leaf both this
//! module and the wire clients use), and are re-exported here.
//!
//! Invariants:
//! - API keys are read from the environment variable the config names, once, at construction; they are
//!   held in [`ApiKey`], whose `Debug` never prints the value, and they are never logged;
//! - a provider whose key variable is unset still builds (so `opc run` can start and explain), but every
//!   call fails with [`LlmError::MissingKey`] naming the variable; `opc chat` checks up front instead
//!   ([`Providers::missing_keys`]);
//! - one `reqwest::Client` (connection pool) is shared by every provider.

use std::sync::Arc;

use indexmap::IndexMap;
use opc_hierarchy::schema::{Provider, ProviderKind};

use super::anthropic::AnthropicClient;
pub use super::endpoint::{ApiKey, Endpoint, http_client};
use super::openai::OpenAiClient;
use super::{LlmError, LlmRequest, LlmResponse, LlmService, SharedLlm, Stack};

/// Every configured provider, each wrapped in the call stack, by provider id.
#[derive(Clone)]
pub struct Providers {
    services: Arc<IndexMap<String, SharedLlm>>,
    endpoints: Arc<IndexMap<String, Endpoint>>,
}

impl Providers {
    /// Build one service per provider: the wire client for its `kind`, wrapped by `stack(provider_id)`.
    /// Keys are looked up with `env` (the process environment in production).
    pub fn build(
        providers: &IndexMap<String, Provider>,
        env: impl Fn(&str) -> Option<String>,
        mut stack: impl FnMut(&str, &Provider) -> Stack,
    ) -> Self {
        let client = http_client();
        let mut services = IndexMap::new();
        let mut endpoints = IndexMap::new();
        for (id, provider) in providers {
            let key_var = provider.api_key_env.as_ref().map(|var| var.0.clone());
            let endpoint = Endpoint {
                provider: id.clone(),
                base_url: provider.base_url.trim_end_matches('/').to_string(),
                key: key_var
                    .as_deref()
                    .and_then(&env)
                    .filter(|key| !key.trim().is_empty())
                    .map(ApiKey::new),
                key_var,
            };
            let wire: SharedLlm = match provider.kind {
                ProviderKind::Anthropic => {
                    Arc::new(AnthropicClient::new(client.clone(), endpoint.clone()))
                }
                ProviderKind::OpenAiCompatible => {
                    Arc::new(OpenAiClient::new(client.clone(), endpoint.clone()))
                }
            };
            services.insert(id.clone(), stack(id, provider).service(wire));
            endpoints.insert(id.clone(), endpoint);
        }
        Providers {
            services: Arc::new(services),
            endpoints: Arc::new(endpoints),
        }
    }

    /// Providers from ready-made services (already wrapped in whatever layers they need), for embedding
    /// the engine with a custom transport. They need no keys.
    pub fn from_services(services: impl IntoIterator<Item = (String, SharedLlm)>) -> Self {
        let services: IndexMap<String, SharedLlm> = services.into_iter().collect();
        let endpoints = services
            .keys()
            .map(|id| {
                let endpoint = Endpoint {
                    provider: id.clone(),
                    base_url: String::new(),
                    key: None,
                    key_var: None,
                };
                (id.clone(), endpoint)
            })
            .collect();
        Providers {
            services: Arc::new(services),
            endpoints: Arc::new(endpoints),
        }
    }

    /// The stacked service for a provider id.
    pub fn get(&self, provider: &str) -> Option<&SharedLlm> {
        self.services.get(provider)
    }

    /// `(provider, variable)` for every provider whose key variable is named but unset, in config order.
    pub fn missing_keys(&self) -> Vec<(String, String)> {
        self.endpoints
            .values()
            .filter(|e| e.key.is_none())
            .filter_map(|e| e.key_var.clone().map(|var| (e.provider.clone(), var)))
            .collect()
    }

    /// The provider ids, in config order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.services.keys().map(String::as_str)
    }

    /// The router: a service that sends each request to its provider's stack.
    pub fn router(&self) -> SharedLlm {
        Arc::new(Router {
            services: self.services.clone(),
        })
    }
}

/// Sends a request to the stack of [`LlmRequest::provider`]; an unknown provider is
/// [`LlmError::UnknownModel`] (a config/engine mismatch, not retryable).
struct Router {
    services: Arc<IndexMap<String, SharedLlm>>,
}

#[async_trait::async_trait]
impl LlmService for Router {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        match self.services.get(&request.provider) {
            Some(service) => service.call(request).await,
            None => Err(LlmError::UnknownModel(format!(
                "{}/{}",
                request.provider, request.model
            ))),
        }
    }
}
