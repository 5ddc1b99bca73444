//! The layers every LLM call passes through, and the order they are stacked in.
//!
//! ```text
//!                 shared, once per call                       one stack per provider
//!   engine ─► trace ─► [privacy] ─► capture ─► router ─┬─► cost ─► retry ─► limit ─► timeout ─► wire client (HTTP)
//!                                                      └─► cost ─► retry ─► …          (picked by request.provider)
//! ```
//!
//! Why this order:
//! - `trace` is outermost so its span covers every attempt (and the privacy work) and the total duration;
//! - `capture` (in `genai`) sits directly above the router, below privacy: with content capture on,
//!   it records the request and response on the `chat` span as the model saw them (masked);
//! - `privacy` (the privacy gateway) sits **above the router and above retry**, once per call whatever
//!   the provider: the whole request is masked once, the answer restored once, retries replay the
//!   already-masked request, one vault serves every provider, and its `route` mode can send a request
//!   to another provider (which only a layer above the router can do). It plugs in at the call
//!   stack's privacy position (`CallStack::with_privacy`, in `stack`), so no agent code changes
//!   with it;
//! - the `router` sends the request to the stack of the provider it names ([`LlmRequest::provider`]);
//! - `cost` is at the top of the provider's stack: it prices the final usage once, with the price table
//!   of the provider that actually answered (which `route` may have changed);
//! - `retry` is above `limit` so a request waiting out a backoff does not hold a concurrency slot;
//! - `limit` (per-provider semaphore + governor rate limit) is above `timeout`, so waiting for a slot is
//!   not counted against the attempt's time limit.
//!
//! Invariant: layers never log message content or keys — only provider, model, agent, task id, status,
//! attempt numbers, token counts and durations.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use indexmap::IndexMap;
use opc_hierarchy::schema::ModelPrice;
use tokio::sync::Semaphore;
use tracing::Instrument;

use super::{Layer, LlmError, LlmRequest, LlmResponse, LlmService, SharedLlm, Stack, StreamDelta};

/// Knobs for the standard stack of one provider.
pub struct StackOptions {
    /// Provider id, for errors and spans.
    pub provider: String,
    /// Time limit for one attempt (connect to last byte).
    pub attempt_timeout: Duration,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// At most this many calls in flight to the provider; `None` = unbounded.
    pub max_concurrent: Option<usize>,
    /// At most this many calls started per minute; `None` = unlimited.
    pub requests_per_minute: Option<NonZeroU32>,
    /// Price table for the cost layer: model → USD per million tokens.
    pub prices: IndexMap<String, ModelPrice>,
    /// Count `max_concurrent` and `requests_per_minute` across a cluster of nodes rather than in
    /// this process ([`SharedLimits`]); `None`: this process alone.
    pub shared: Option<Arc<dyn SharedLimits>>,
}

/// Build the standard stack of one provider (below the router) in the documented order:
/// cost ─► retry ─► limit ─► timeout.
pub fn standard_stack(options: StackOptions) -> Stack {
    let StackOptions {
        provider,
        attempt_timeout,
        retry,
        max_concurrent,
        requests_per_minute,
        prices,
        shared,
    } = options;
    Stack::new()
        .layer(CostLayer {
            provider: provider.clone(),
            prices: Arc::new(prices),
        })
        .layer(RetryLayer(retry))
        .layer(LimitLayer::new(max_concurrent, requests_per_minute).shared(
            shared,
            &provider,
            max_concurrent,
            requests_per_minute,
        ))
        .layer(TimeoutLayer {
            provider,
            after: attempt_timeout,
        })
}

impl Stack {
    /// Add an already-boxed layer (the privacy seam takes one).
    pub fn boxed_layer(mut self, layer: Box<dyn Layer>) -> Self {
        self.push(layer);
        self
    }
}

// ---------------------------------------------------------------------------------------------------
// timeout

/// Fails an attempt that takes longer than `after` with [`LlmError::Timeout`] (retryable).
pub struct TimeoutLayer {
    /// Provider id for the error.
    pub provider: String,
    /// The limit.
    pub after: Duration,
}

struct Timeout {
    inner: SharedLlm,
    provider: String,
    after: Duration,
}

impl Layer for TimeoutLayer {
    fn name(&self) -> &'static str {
        "timeout"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Timeout {
            inner,
            provider: self.provider.clone(),
            after: self.after,
        })
    }
}

#[async_trait::async_trait]
impl LlmService for Timeout {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        match tokio::time::timeout(self.after, self.inner.call(request)).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout {
                provider: self.provider.clone(),
                after: self.after,
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// retry

/// Exponential backoff with equal jitter, honouring the provider's `retry-after`: the one policy type
/// every retry loop in OPC shares (see `opc-retry`). Its default is this layer's: 4 attempts, 0.5 s
/// doubling to at most 30 s, a random delay in `[backoff/2, backoff]`.
pub use opc_retry::RetryPolicy;

/// Retries retryable failures ([`LlmError::is_retryable`]) up to the policy's attempt count.
pub struct RetryLayer(pub RetryPolicy);

struct Retry {
    inner: SharedLlm,
    policy: RetryPolicy,
}

impl Layer for RetryLayer {
    fn name(&self) -> &'static str {
        "retry"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Retry {
            inner,
            policy: self.0,
        })
    }
}

#[async_trait::async_trait]
impl LlmService for Retry {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let mut attempt = 1;
        // The sink the layers above handed down (the privacy layer's restoring sink, when enabled): a
        // Restart reaches them too, so they drop what they hold of the failed attempt.
        let sink = request.stream.clone();
        loop {
            let last_attempt = attempt >= self.policy.max_attempts;
            // Each attempt gets a copy; the original is kept for the replay. (A copy is a few
            // allocations per message — noise next to an HTTP round trip.)
            let result = self.inner.call(request.clone()).await;
            match result {
                Ok(mut response) => {
                    response.attempts = attempt;
                    return Ok(response);
                }
                Err(error) if !error.is_retryable() => return Err(error),
                Err(error) if last_attempt => {
                    return Err(if attempt == 1 {
                        error
                    } else {
                        LlmError::Exhausted {
                            attempts: attempt,
                            last: Box::new(error),
                        }
                    });
                }
                Err(error) => {
                    let delay = self.policy.delay(attempt, error.retry_after());
                    tracing::warn!(
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        kind = error.kind(),
                        status = error.status(),
                        "LLM call failed; retrying"
                    );
                    super::genai::retry_event(attempt, &error, delay);
                    if let Some(sink) = &sink {
                        sink.send(StreamDelta::Restart);
                    }
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// per-provider concurrency and rate limit

/// Limits that hold for a whole cluster of nodes (issue 36: a provider's `maxConcurrentRequests`
/// and `requestsPerMinute` are the provider's, not each node's). Owned here, where the limit layer
/// uses it; the PostgreSQL store implements it over rows every node shares.
#[async_trait::async_trait]
pub trait SharedLimits: Send + Sync {
    /// Wait until a call to `provider` may start with at most `max_concurrent` calls in flight and
    /// `per_minute` starts per minute, counted over every node; the call's slot is held until the
    /// returned [`SharedSlot`] drops. An error (the database is unreachable) says why.
    async fn admit(
        &self,
        provider: &str,
        max_concurrent: Option<u32>,
        per_minute: Option<u32>,
    ) -> Result<SharedSlot, String>;
}

/// A call's place under [`SharedLimits`], given back when dropped.
pub struct SharedSlot(Option<Box<dyn FnOnce() + Send>>);

impl SharedSlot {
    /// A slot that runs `release` when dropped (once).
    pub fn new(release: impl FnOnce() + Send + 'static) -> SharedSlot {
        SharedSlot(Some(Box::new(release)))
    }

    /// A slot with nothing to give back (no concurrency limit).
    pub fn none() -> SharedSlot {
        SharedSlot(None)
    }
}

impl Drop for SharedSlot {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

/// Bounds calls in flight (a semaphore) and calls started per minute (governor) for one provider;
/// in a cluster, through [`SharedLimits`] instead, falling back to this process's limits (with a
/// warning) while the shared ones cannot be reached.
pub struct LimitLayer {
    slots: Option<Arc<Semaphore>>,
    rate: Option<Arc<DefaultDirectRateLimiter>>,
    shared: Option<Arc<Shared>>,
}

/// The cluster-wide form of one provider's limits.
struct Shared {
    limits: Arc<dyn SharedLimits>,
    provider: String,
    max_concurrent: Option<u32>,
    per_minute: Option<u32>,
    /// Set while the shared limits fail, so the fallback is warned about once per outage.
    failing: AtomicBool,
}

impl LimitLayer {
    /// A limit of `max_concurrent` in-flight calls and `per_minute` starts; `None` means unbounded.
    pub fn new(max_concurrent: Option<usize>, per_minute: Option<NonZeroU32>) -> Self {
        LimitLayer {
            slots: max_concurrent.map(|n| Arc::new(Semaphore::new(n.max(1)))),
            rate: per_minute.map(|n| Arc::new(RateLimiter::direct(Quota::per_minute(n)))),
            shared: None,
        }
    }

    /// Count the limits across the cluster through `limits` (when given and there is a limit).
    pub fn shared(
        mut self,
        limits: Option<Arc<dyn SharedLimits>>,
        provider: &str,
        max_concurrent: Option<usize>,
        per_minute: Option<NonZeroU32>,
    ) -> Self {
        if max_concurrent.is_none() && per_minute.is_none() {
            return self;
        }
        self.shared = limits.map(|limits| {
            Arc::new(Shared {
                limits,
                provider: provider.to_string(),
                max_concurrent: max_concurrent.map(|n| u32::try_from(n.max(1)).unwrap_or(u32::MAX)),
                per_minute: per_minute.map(NonZeroU32::get),
                failing: AtomicBool::new(false),
            })
        });
        self
    }
}

struct Limit {
    inner: SharedLlm,
    slots: Option<Arc<Semaphore>>,
    rate: Option<Arc<DefaultDirectRateLimiter>>,
    shared: Option<Arc<Shared>>,
}

impl Layer for LimitLayer {
    fn name(&self) -> &'static str {
        "limit"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Limit {
            inner,
            slots: self.slots.clone(),
            rate: self.rate.clone(),
            shared: self.shared.clone(),
        })
    }
}

#[async_trait::async_trait]
impl LlmService for Limit {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        if let Some(shared) = &self.shared {
            match shared
                .limits
                .admit(&shared.provider, shared.max_concurrent, shared.per_minute)
                .await
            {
                Ok(_slot) => {
                    if shared.failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(provider = %shared.provider, "cluster-wide provider limits apply again");
                    }
                    return self.inner.call(request).await;
                }
                Err(error) => {
                    if !shared.failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(provider = %shared.provider, %error, "cannot reach the cluster-wide provider limits; this node applies them on its own until they answer again");
                    }
                }
            }
        }
        // The semaphore is never closed, so acquire cannot fail; treat a failure as "no limit".
        let _slot = match &self.slots {
            Some(slots) => slots.acquire().await.ok(),
            None => None,
        };
        if let Some(rate) = &self.rate {
            rate.until_ready().await;
        }
        self.inner.call(request).await
    }
}

// ---------------------------------------------------------------------------------------------------
// tracing

/// Opens a span per call (provider, model, agent, task, root) and logs the outcome with its duration.
/// Outermost in the shared stack, so the span covers the privacy work and every attempt.
pub struct TraceLayer;

struct Trace {
    inner: SharedLlm,
}

impl Layer for TraceLayer {
    fn name(&self) -> &'static str {
        "trace"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Trace { inner })
    }
}

#[async_trait::async_trait]
impl LlmService for Trace {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let span = tracing::debug_span!(
            "llm_call",
            provider = %request.provider,
            model = %request.model,
            agent = %request.meta.agent,
            task = request.meta.task_id,
            root = request.meta.root_id,
            work = request.meta.work.as_str(),
        );
        // The exported `chat {model}` span (GenAI conventions): entered innermost, so the layers
        // below find it as the current span (see `genai`).
        let chat = super::genai::chat_span(&request);
        let (model, provider) = (request.model.clone(), request.provider.clone());
        let started = Instant::now();
        let result = self
            .inner
            .call(request)
            .instrument(chat.clone())
            .instrument(span.clone())
            .await;
        let elapsed = started.elapsed();
        super::genai::record_outcome(&chat, &model, &provider, &result, elapsed);
        let _enter = span.enter();
        let ms = elapsed.as_millis() as u64;
        match &result {
            Ok(r) => tracing::debug!(
                ms,
                input_tokens = r.usage.map(|u| u.input_tokens),
                output_tokens = r.usage.map(|u| u.output_tokens),
                attempts = r.attempts,
                "LLM call finished"
            ),
            Err(error) => tracing::warn!(
                ms,
                kind = error.kind(),
                status = error.status(),
                "LLM call failed"
            ),
        }
        result
    }
}

// ---------------------------------------------------------------------------------------------------
// cost

/// Prices each response from the provider's price table (USD per million tokens). Unpriced models cost 0
/// (`opc validate` already warns about them). A response without usage costs an unknown amount: its
/// cost stays 0, the ledger marks it unknown, and the first one per provider is logged as a warning
/// (once, so a server that never reports usage does not flood the log; no message content).
pub struct CostLayer {
    /// The provider id, for the warning.
    pub provider: String,
    /// model → price.
    pub prices: Arc<IndexMap<String, ModelPrice>>,
}

struct Cost {
    inner: SharedLlm,
    provider: String,
    prices: Arc<IndexMap<String, ModelPrice>>,
    warned_unknown_usage: AtomicBool,
}

impl Layer for CostLayer {
    fn name(&self) -> &'static str {
        "cost"
    }

    fn layer(&self, inner: SharedLlm) -> SharedLlm {
        Arc::new(Cost {
            inner,
            provider: self.provider.clone(),
            prices: self.prices.clone(),
            warned_unknown_usage: AtomicBool::new(false),
        })
    }
}

/// USD for `usage` at `price`.
pub fn price_of(price: &ModelPrice, usage: super::Usage) -> f64 {
    (usage.input_tokens as f64 * price.input + usage.output_tokens as f64 * price.output) / 1e6
}

#[async_trait::async_trait]
impl LlmService for Cost {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        let price = self.prices.get(&request.model).copied();
        let model = request.model.clone();
        let mut response = self.inner.call(request).await?;
        match response.usage {
            Some(usage) => response.cost_usd = price.map_or(0.0, |p| price_of(&p, usage)),
            None => {
                response.cost_usd = 0.0;
                if !self.warned_unknown_usage.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        provider = %self.provider,
                        %model,
                        "the provider sent no token usage for a response; its tokens and cost are \
                         recorded as unknown (warned once per provider)"
                    );
                }
            }
        }
        Ok(response)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::llm::{CallMeta, Content, Message, StopReason, Usage};

    /// Fails with `errors` in order, then succeeds.
    struct Flaky {
        errors: std::sync::Mutex<Vec<LlmError>>,
        calls: AtomicU32,
    }

    #[async_trait::async_trait]
    impl LlmService for Flaky {
        async fn call(&self, _request: LlmRequest) -> Result<LlmResponse, LlmError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let next = self.errors.lock().unwrap().pop();
            match next {
                Some(error) => Err(error),
                None => Ok(LlmResponse {
                    content: vec![Content::text("ok")],
                    stop_reason: StopReason::EndTurn,
                    usage: Some(Usage {
                        input_tokens: 1_000_000,
                        output_tokens: 2_000_000,
                    }),
                    cost_usd: 0.0,
                    attempts: 1,
                    privacy: None,
                }),
            }
        }
    }

    fn request() -> LlmRequest {
        LlmRequest {
            provider: "p".into(),
            model: "m".into(),
            system: String::new(),
            messages: vec![Message::user("hi")],
            tools: vec![],
            tool_choice: None,
            max_tokens: 10,
            stream: None,
            meta: CallMeta::default(),
            guard: None,
        }
    }

    fn status(status: u16, retry_after: Option<Duration>) -> LlmError {
        LlmError::Status {
            provider: "p".into(),
            status,
            message: "x".into(),
            retry_after,
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            ..RetryPolicy::default()
        }
    }

    #[tokio::test]
    async fn retries_retryable_errors_then_succeeds() {
        let flaky = Arc::new(Flaky {
            errors: std::sync::Mutex::new(vec![status(500, None), status(429, None)]),
            calls: AtomicU32::new(0),
        });
        let service = Stack::new()
            .layer(RetryLayer(policy()))
            .service(flaky.clone());
        let response = service.call(request()).await.unwrap();
        assert_eq!(response.attempts, 3);
        assert_eq!(flaky.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn gives_up_with_the_last_error_and_does_not_retry_client_errors() {
        let flaky = Arc::new(Flaky {
            errors: std::sync::Mutex::new(vec![status(500, None); 5]),
            calls: AtomicU32::new(0),
        });
        let service = Stack::new()
            .layer(RetryLayer(policy()))
            .service(flaky.clone());
        let error = service.call(request()).await.unwrap_err();
        assert!(
            matches!(error, LlmError::Exhausted { attempts: 3, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("HTTP 500"), "{error}");

        let flaky = Arc::new(Flaky {
            errors: std::sync::Mutex::new(vec![status(400, None)]),
            calls: AtomicU32::new(0),
        });
        let service = Stack::new()
            .layer(RetryLayer(policy()))
            .service(flaky.clone());
        assert!(service.call(request()).await.is_err());
        assert_eq!(flaky.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn delay_honours_retry_after_and_caps_it() {
        let p = policy();
        let asked = status(429, Some(Duration::from_millis(3)));
        assert_eq!(p.delay(1, asked.retry_after()), Duration::from_millis(3));
        let asked = status(429, Some(Duration::from_secs(60)));
        assert_eq!(p.delay(1, asked.retry_after()), p.max_delay);
        for attempt in 1..10 {
            let d = p.delay(attempt, status(500, None).retry_after());
            assert!(d <= p.max_delay, "{d:?}");
        }
    }

    #[tokio::test]
    async fn cost_uses_the_price_table() {
        let flaky = Arc::new(Flaky {
            errors: std::sync::Mutex::new(vec![]),
            calls: AtomicU32::new(0),
        });
        let prices = IndexMap::from([(
            "m".to_string(),
            ModelPrice {
                input: 3.0,
                output: 15.0,
            },
        )]);
        let service = Stack::new()
            .layer(CostLayer {
                provider: "p".into(),
                prices: Arc::new(prices),
            })
            .service(flaky);
        let response = service.call(request()).await.unwrap();
        assert!((response.cost_usd - 33.0).abs() < 1e-9);
    }

    #[tokio::test]
    async fn timeout_turns_a_hung_attempt_into_a_retryable_error() {
        struct Hang;
        #[async_trait::async_trait]
        impl LlmService for Hang {
            async fn call(&self, _request: LlmRequest) -> Result<LlmResponse, LlmError> {
                std::future::pending().await
            }
        }
        let service = Stack::new()
            .layer(TimeoutLayer {
                provider: "p".into(),
                after: Duration::from_millis(10),
            })
            .service(Arc::new(Hang));
        let error = service.call(request()).await.unwrap_err();
        assert!(error.is_retryable());
        assert_eq!(error.to_string(), "p did not answer within 10ms");
    }
}
