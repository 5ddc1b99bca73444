//! The wire of an OpenAI-compatible embeddings API: `POST {baseUrl}/embeddings` with
//! `{"model", "input": [...], "dimensions"}`, answered by `{"data": [{"embedding", "index"}],
//! "usage": {"prompt_tokens"}}`.
//!
//! Invariants:
//! - the body is sent exactly as the caller built it (the caller checked those bytes for real
//!   values first);
//! - the key goes in the `Authorization` header only, is held in an [`ApiKey`] and never logged;
//! - a response is accepted only with one vector per input, each of the configured dimensions;
//!   vectors come back in input order (by `index` when the server gives it) and unit length;
//! - errors keep the call stack's kinds ([`LlmError`]), so retry decides as for model calls; the
//!   provider's error text is quoted, never the request.

use serde::Deserialize;

use crate::llm::LlmError;
use crate::llm::provider::ApiKey;
use crate::llm::sse;

/// The endpoint's label in errors and spans.
pub(super) const LABEL: &str = "embeddings endpoint";

/// Where and how to post.
pub(super) struct Wire {
    pub client: reqwest::Client,
    /// `{baseUrl}/embeddings`.
    pub url: String,
    pub key: Option<ApiKey>,
    pub model: String,
    pub dimensions: usize,
}

/// What one successful call returned.
#[derive(Debug)]
pub(super) struct Reply {
    /// One unit vector per input, in order.
    pub vectors: Vec<Vec<f32>>,
    /// Prompt tokens the server counted (`None` when it sent no usage).
    pub tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireResponse {
    data: Vec<WireItem>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
}

impl Wire {
    /// Post `body` (holding `inputs` texts) once.
    pub(super) async fn post(&self, body: String, inputs: usize) -> Result<Reply, LlmError> {
        let mut request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key.expose());
        }
        let response = sse::send(request, LABEL, &self.model, &self.url).await?;
        let parsed: WireResponse = sse::read_json(response, LABEL).await?;
        self.vectors(parsed, inputs)
    }

    /// The reply's vectors in input order, checked and normalised.
    fn vectors(&self, parsed: WireResponse, inputs: usize) -> Result<Reply, LlmError> {
        if parsed.data.len() != inputs {
            return Err(sse::malformed(
                LABEL,
                format!(
                    "{} vectors for {inputs} texts (model `{}`)",
                    parsed.data.len(),
                    self.model
                ),
            ));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; inputs];
        for (position, item) in parsed.data.into_iter().enumerate() {
            let at = item.index.unwrap_or(position);
            let Some(slot) = slots.get_mut(at).filter(|s| s.is_none()) else {
                return Err(sse::malformed(
                    LABEL,
                    format!("vector index {at} is out of range or repeated"),
                ));
            };
            if item.embedding.len() != self.dimensions {
                return Err(LlmError::Malformed {
                    provider: LABEL.into(),
                    message: format!(
                        "model `{}` returned vectors of {} components, but `framework.memory.embedding.dimensions` is {}. Fix: set `dimensions: {}`, or use a model that accepts `dimensions` (text-embedding-3-*)",
                        self.model,
                        item.embedding.len(),
                        self.dimensions,
                        item.embedding.len()
                    ),
                });
            }
            *slot = Some(normalise(item.embedding));
        }
        let vectors = slots
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| sse::malformed(LABEL, "a vector is missing"))?;
        let tokens = parsed
            .usage
            .and_then(|u| u.prompt_tokens.or(u.total_tokens));
        Ok(Reply { vectors, tokens })
    }
}

/// Scale to unit length (a zero vector stays zero: it then matches nothing). Servers usually
/// normalise already; the stores compare by dot product, so this is not left to them.
pub(super) fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    } else if !norm.is_finite() {
        v.iter_mut().for_each(|x| *x = 0.0);
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn wire(dimensions: usize) -> Wire {
        Wire {
            client: reqwest::Client::new(),
            url: "http://127.0.0.1:9/embeddings".into(),
            key: None,
            model: "m".into(),
            dimensions,
        }
    }

    #[test]
    fn vectors_come_back_in_input_order_unit_length_with_usage() {
        let parsed: WireResponse = serde_json::from_str(
            r#"{"data":[{"embedding":[0,2],"index":1},{"embedding":[3,4],"index":0}],"usage":{"prompt_tokens":7,"total_tokens":7}}"#,
        )
        .unwrap();
        let reply = wire(2).vectors(parsed, 2).unwrap();
        assert_eq!(reply.vectors, [vec![0.6, 0.8], vec![0.0, 1.0]]);
        assert_eq!(reply.tokens, Some(7));
    }

    #[test]
    fn a_wrong_dimension_or_count_is_a_clear_error_that_is_not_retried() {
        let parsed: WireResponse =
            serde_json::from_str(r#"{"data":[{"embedding":[1,2,3]}]}"#).unwrap();
        let error = wire(2).vectors(parsed, 1).unwrap_err();
        assert!(!error.is_retryable());
        assert!(
            error.to_string().contains("3 components")
                && error.to_string().contains("dimensions: 3"),
            "{error}"
        );
        let parsed: WireResponse = serde_json::from_str(r#"{"data":[]}"#).unwrap();
        assert!(wire(2).vectors(parsed, 1).is_err());
    }
}
