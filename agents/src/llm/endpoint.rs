//! What the wire clients need to reach a provider: its [`Endpoint`] (base URL and key), the one
//! process-wide HTTP client, and the exact body they send, checked by the egress guard.
//!
//! Why a leaf of its own: the wire clients (`anthropic`, `openai`) use it, and `provider` builds
//! those clients from endpoints, so an endpoint living in `provider` would make the two depend on
//! each other.
//!
//! Invariants:
//! - a key is held in [`ApiKey`], whose `Debug` never prints the value, and is never logged;
//! - a wire client sends exactly the text [`guarded_body`] returned, so the guard checks the bytes
//!   that leave the process;
//! - one `reqwest::Client` (connection pool) is shared by every provider ([`http_client`]).

use std::fmt;

use super::{LlmError, LlmRequest};

/// A secret API key. Its `Debug` and `Display` are redacted so it cannot leak into logs or errors.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Where and how to reach one provider.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The provider's id in the config (`anthropic`, `local`).
    pub provider: String,
    /// Base URL without a trailing slash. Anthropic: `https://api.anthropic.com` (the client appends
    /// `/v1/messages`). OpenAI-compatible: up to and including the version, e.g.
    /// `http://127.0.0.1:11434/v1` (the client appends `/chat/completions`).
    pub base_url: String,
    /// The key, when one is configured and set.
    pub key: Option<ApiKey>,
    /// The variable the key comes from, when the config names one.
    pub key_var: Option<String>,
}

impl Endpoint {
    /// The key, or the error naming the variable to set. `Ok(None)` when the provider needs no key.
    pub fn require_key(&self) -> Result<Option<&ApiKey>, LlmError> {
        match (&self.key, &self.key_var) {
            (Some(key), _) => Ok(Some(key)),
            (None, Some(var)) => Err(LlmError::MissingKey {
                provider: self.provider.clone(),
                var: var.clone(),
            }),
            (None, None) => Ok(None),
        }
    }
}

/// The request body as the bytes that will be sent, after the egress guard (when the privacy layer set
/// one) found no real value in them. Both wire clients send exactly this text.
pub(crate) fn guarded_body(
    body: &serde_json::Value,
    request: &LlmRequest,
    provider: &str,
) -> Result<String, LlmError> {
    let text = serde_json::to_string(body).map_err(|e| LlmError::Malformed {
        provider: provider.to_string(),
        message: format!("cannot encode the request: {e}"),
    })?;
    if let Some(guard) = &request.guard {
        guard.check(provider, &text)?;
    }
    Ok(text)
}

/// The process-wide HTTP client. reqwest is built with `rustls-no-provider`, so the ring provider must be
/// installed before the first client exists; doing it here means no caller can forget.
pub fn http_client() -> reqwest::Client {
    // Err only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .user_agent(concat!("opc/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}
