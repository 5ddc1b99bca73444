//! Embeddings from an OpenAI-compatible endpoint ([`RemoteEmbedder`], `framework.memory.embedding:
//! { provider: openai-compatible, model, dimensions, baseUrl, apiKeyEnv }`), behind the privacy
//! gateway and through the same call stack as model calls. It implements opc-memory's
//! [`Embedder`], so the recall and facts stores use it as they use the local model: agent code knows
//! nothing of it.
//!
//! One call's way (texts batched by [`Embedder::batch_size`]):
//!
//! ```text
//!   store ─► mask (privacy detector, fakes stable per value) ─► egress check on the body bytes
//!         ─► retry (the model calls' policy) ─► limit (semaphore + governor) ─► timeout ─► POST /embeddings
//!         ─► price (the provider's table) ─► ledger (kind: embedding)
//! ```
//!
//! - **Masking** (`mask`): every text is masked before it leaves, by the privacy gateway's own
//!   detector, with fakes that depend on the value alone (so a person embeds the same way in every
//!   row and query). While a required NER model is not in, nothing is sent: the texts wait, as
//!   [`EmbedError::Unavailable`]. Keyword search runs on the real text, locally, in the stores.
//! - **Retries, limits, time**: [`opc_retry`] with the policy the model calls use; at most
//!   `maxConcurrentRequests` in flight and `requestsPerMinute` started (governor) when a configured
//!   provider has the same `baseUrl` (its price table prices the tokens too).
//! - **Ledger**: each HTTP call (texts, tokens, cost, attempts, masked counts, error) goes to an
//!   [`EmbedLedger`], which the bot writes to the store as its own kind (the console's Costs show
//!   it apart).
//! - **Failures**: an endpoint down, 5xx, 429 or a timeout after the retries is
//!   [`EmbedError::Unavailable`] (the stores keep the rows and try later), and for a short,
//!   growing while every call fails at once without a request, so a search never waits on an
//!   endpoint known to be down. A refusal (400, 401, 403, 404, a wrong dimension) is
//!   [`EmbedError::Run`] with what, where and the fix, logged once; but a 400, 413 or 422 of a
//!   batch is first narrowed down by halves, and one text refused while a probe passes gets a zero
//!   vector, so one text the server cannot take never holds back the rows after it.
//! - **Searches** ([`Embedder::embed_query`]) get one attempt of at most [`QUERY_TIMEOUT`], no
//!   retries: a search runs before the agent's task, so an endpoint that hangs costs a request
//!   seconds of keyword-only search, never minutes.
//! - **Reloads**: the masker is built at start. A [`RemoteOptions::guard`] holds every text back
//!   while the running config's privacy settings differ from those it was built with (until
//!   `opc run` restarts), so a reload that turns the gateway on never leaves unmasked sending
//!   behind.
//!
//! Why a worker thread: [`Embedder::embed`] is synchronous (the stores call it from their indexer
//! threads, and from searches), and the HTTP client is async. The embedder owns one thread running a
//! single-threaded Tokio runtime; a call hands its batch over and waits on a channel, which is safe
//! from any thread, inside a runtime or not. The thread ends when the embedder is dropped.
//!
//! Invariants: a text is never sent unmasked while the privacy gateway is on; the key is never
//! logged; nothing here logs a text, a value or a vector.

mod mask;
mod wire;

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use opc_hierarchy::Config;
use opc_hierarchy::schema::{EmbeddingProvider, ModelPrice};
use opc_memory::embed::{EmbedError, Embedder};
use opc_privacy::Style;
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc};

pub use mask::{EmbedMasker, NotReady};

use super::LlmError;
use super::layers::{RetryPolicy, price_of};
use super::privacy::{NerGate, TypeCounts};
use super::provider::{ApiKey, http_client};
use wire::{Reply, Wire};

/// Texts per request when nothing else is said: large enough to amortise the round trip (see the
/// `embed_remote` bench), small enough that one request stays well under servers' input limits.
pub const PREFERRED_BATCH: usize = 64;
/// Time limit of one attempt. Embedding a batch takes a server well under a second; a model call's
/// limit (minutes, for long generations) would hold a search for as long.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// After a failed episode, calls fail at once for this long, doubling per failure up to [`COOL_MAX`].
const COOL_BASE: Duration = Duration::from_secs(1);
const COOL_MAX: Duration = Duration::from_secs(30);
/// After a refusal (a config error), the same error is returned without a request for this long.
const REFUSED_FOR: Duration = Duration::from_secs(60);
/// Time limit of a search query's one attempt: a search runs before the agent's task, so a query
/// gets one short try, no retries (background indexing has the retries), then keywords.
const QUERY_TIMEOUT: Duration = Duration::from_secs(3);
/// Statuses that may be about one input of a batch (too long, malformed for this server), not the
/// config: such a refusal is narrowed down by halves before it is taken for a config error.
const PER_INPUT: [u16; 3] = [400, 413, 422];

/// One HTTP call to the embeddings endpoint, for the ledger: counts and money, never text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EmbedCall {
    /// `provider/model` (`embeddings/<model>` when no configured provider has the endpoint's URL).
    pub model: String,
    /// Texts embedded by the call.
    pub texts: u32,
    /// Prompt tokens the endpoint counted (0 when unknown).
    pub tokens: u64,
    /// USD, from the provider's price table (0 when unpriced or unknown).
    pub cost_usd: f64,
    /// The endpoint sent no usage: tokens and cost are unknown.
    pub usage_unknown: bool,
    /// Wall time, retries included.
    pub duration_ms: u64,
    /// Attempts made.
    pub attempts: u32,
    /// The error, for a failed call.
    pub error: Option<String>,
    /// Personal data masked in the texts, by type (never values); `None` without the gateway.
    pub masked: Option<TypeCounts>,
}

/// Where embedding calls are recorded (the bot writes them to the store's ledger).
pub trait EmbedLedger: Send + Sync {
    /// Record one call. Called on the embedder's worker runtime, after the call and before its
    /// answer is handed back, so an implementation may `tokio::spawn` its async write there; it
    /// must not block. Failing to record never fails the embedding: the ledger logs it.
    fn record(&self, call: EmbedCall);
}

/// What a [`RemoteEmbedder`] is built from.
pub struct RemoteOptions {
    /// The model name the endpoint knows.
    pub model: String,
    /// Components per vector (sent as `dimensions`, and checked on every vector returned).
    pub dimensions: usize,
    /// Base URL (OPC posts to `{base_url}/embeddings`).
    pub base_url: String,
    /// The variable the key came from (recorded in the generation's descriptor; never the key).
    pub api_key_env: Option<String>,
    /// The key.
    pub key: Option<ApiKey>,
    /// Texts per request.
    pub batch_size: usize,
    /// The retry policy (the model calls').
    pub retry: RetryPolicy,
    /// Time limit of one attempt.
    pub attempt_timeout: Duration,
    /// At most this many requests in flight.
    pub max_concurrent: Option<usize>,
    /// At most this many requests started per minute.
    pub requests_per_minute: Option<NonZeroU32>,
    /// USD per million prompt tokens (`input`).
    pub price: Option<ModelPrice>,
    /// `provider/model` for the ledger.
    pub ledger_model: String,
    /// The masker (`None` when the privacy gateway is off: texts leave as they are, like the
    /// model calls' requests then).
    pub masker: Option<Arc<EmbedMasker>>,
    /// Where calls are recorded.
    pub ledger: Option<Arc<dyn EmbedLedger>>,
    /// Asked before every call: `Some(why)` stops the call (nothing is sent; the stores keep the rows
    /// and try later). The bot uses it to hold sending while the running config's privacy settings
    /// differ from those the masker was built with (a reload that turns the gateway on must never
    /// leave earlier-built, unmasked sending behind).
    pub guard: Option<Guard>,
}

/// See [`RemoteOptions::guard`].
pub type Guard = Arc<dyn Fn() -> Option<String> + Send + Sync>;

impl RemoteOptions {
    /// The options `config`'s `framework.memory.embedding` asks for, the key read with `env`: the
    /// endpoint's limits and prices are those of the configured provider with the same `baseUrl`,
    /// if any. `Err` says what is wrong, where, and how to fix it (for start-up).
    pub fn from_config(
        config: &Config,
        env: impl Fn(&str) -> Option<String>,
        retry: RetryPolicy,
    ) -> Result<RemoteOptions, String> {
        let e = &config.framework.memory.embedding;
        if e.provider != EmbeddingProvider::OpenAiCompatible {
            return Err("`framework.memory.embedding.provider` is not `openai-compatible`".into());
        }
        let base_url = e
            .base_url
            .as_deref()
            .ok_or("`framework.memory.embedding.baseUrl` is missing. Fix: set it to the API's URL, e.g. `https://api.openai.com/v1`")?;
        let api_key_env = e.api_key_env.as_ref().map(|v| v.name());
        Self::build(
            config,
            &e.model,
            e.dimensions.get() as usize,
            base_url,
            api_key_env,
            env,
            retry,
        )
    }

    /// The options that rebuild the embedder a generation's `descriptor` describes (`{"provider":
    /// "openai-compatible", "model", "dimensions", "baseUrl", "apiKeyEnv"}`, as
    /// [`Embedder::descriptor`] wrote it), its key read with `env`. `Err` says why not.
    pub fn from_descriptor(
        descriptor: &serde_json::Value,
        config: &Config,
        env: impl Fn(&str) -> Option<String>,
        retry: RetryPolicy,
    ) -> Result<RemoteOptions, String> {
        let field = |name: &str| descriptor.get(name).and_then(serde_json::Value::as_str);
        if field("provider") != Some("openai-compatible") {
            return Err("the generation was not embedded by an openai-compatible endpoint".into());
        }
        let (Some(model), Some(base_url), Some(dimensions)) = (
            field("model"),
            field("baseUrl"),
            descriptor
                .get("dimensions")
                .and_then(serde_json::Value::as_u64),
        ) else {
            return Err(
                "the generation's descriptor lacks its model, baseUrl or dimensions".into(),
            );
        };
        Self::build(
            config,
            model,
            dimensions as usize,
            base_url,
            field("apiKeyEnv"),
            env,
            retry,
        )
    }

    fn build(
        config: &Config,
        model: &str,
        dimensions: usize,
        base_url: &str,
        api_key_env: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
        retry: RetryPolicy,
    ) -> Result<RemoteOptions, String> {
        let base_url = base_url.trim_end_matches('/').to_string();
        let api_key_env = api_key_env.map(str::to_string);
        let key = match &api_key_env {
            Some(var) => Some(
                env(var)
                    .filter(|k| !k.trim().is_empty())
                    .map(ApiKey::new)
                    .ok_or_else(|| {
                        format!(
                            "the embeddings API key is missing: `framework.memory.embedding.apiKeyEnv` names {var}, which is not set. Fix: set {var}, or remove `apiKeyEnv` for a keyless server"
                        )
                    })?,
            ),
            None => None,
        };
        let provider = config
            .framework
            .providers
            .iter()
            .find(|(_, p)| p.base_url.trim_end_matches('/') == base_url);
        Ok(RemoteOptions {
            model: model.to_string(),
            dimensions,
            base_url,
            api_key_env,
            key,
            batch_size: PREFERRED_BATCH,
            retry,
            attempt_timeout: ATTEMPT_TIMEOUT,
            max_concurrent: provider
                .and_then(|(_, p)| p.max_concurrent_requests)
                .map(|n| n.get() as usize),
            requests_per_minute: provider.and_then(|(_, p)| p.requests_per_minute),
            price: provider.and_then(|(_, p)| p.models.get(model).copied()),
            ledger_model: format!(
                "{}/{model}",
                provider.map_or("embeddings", |(id, _)| id.as_str()),
            ),
            masker: None,
            ledger: None,
            guard: None,
        })
    }
}

/// The masker for `config`'s privacy gateway (`None` when it is off), on the gateway's NER slot,
/// with fakes keyed by `key` (a secret kept beside the database, the same for every process using
/// it, so fakes and thus vectors stay comparable).
pub fn masker_for(
    config: &Config,
    ner: opc_privacy::detect::NerSlot,
    key: [u8; 32],
) -> Option<Arc<EmbedMasker>> {
    if !config.framework.privacy.enabled {
        return None;
    }
    let gate = NerGate::for_config(config, ner.clone());
    let detector = Arc::new(super::privacy::detector(config, ner));
    let (style, mode) = match config.framework.privacy.mode {
        opc_hierarchy::schema::PrivacyMode::Redact => (Style::Placeholder, "redact"),
        // `route` has no trusted embedder to route to: its texts are masked like `mask`'s.
        _ => (Style::Fake, "mask"),
    };
    Some(Arc::new(EmbedMasker::new(detector, gate, style, mode, key)))
}

/// One batch handed to the worker thread.
struct Job {
    body: String,
    inputs: usize,
    /// A search query's: one attempt within [`QUERY_TIMEOUT`], no retries.
    quick: bool,
    masked: Option<TypeCounts>,
    done: std::sync::mpsc::Sender<(Result<Reply, LlmError>, u32)>,
}

/// What the worker shares with its jobs.
struct Worker {
    wire: Wire,
    retry: RetryPolicy,
    attempt_timeout: Duration,
    slots: Option<Semaphore>,
    rate: Option<DefaultDirectRateLimiter>,
    price: Option<ModelPrice>,
    ledger_model: String,
    ledger: Option<Arc<dyn EmbedLedger>>,
}

/// A retryable view of a call-stack error, for [`opc_retry::retry`].
struct Attempt(LlmError);

impl opc_retry::Retryable for Attempt {
    fn is_retryable(&self) -> bool {
        self.0.is_retryable()
    }

    fn retry_after(&self) -> Option<Duration> {
        self.0.retry_after()
    }
}

impl Worker {
    /// One attempt: limit (slot, then rate), then the time limit around the post.
    async fn attempt(&self, body: &str, inputs: usize, quick: bool) -> Result<Reply, Attempt> {
        let limit = if quick {
            self.attempt_timeout.min(QUERY_TIMEOUT)
        } else {
            self.attempt_timeout
        };
        let _slot = match &self.slots {
            Some(slots) => slots.acquire().await.ok(),
            None => None,
        };
        if let Some(rate) = &self.rate {
            rate.until_ready().await;
        }
        match tokio::time::timeout(limit, self.wire.post(body.to_string(), inputs)).await {
            Ok(result) => result.map_err(Attempt),
            Err(_) => Err(Attempt(LlmError::Timeout {
                provider: wire::LABEL.into(),
                after: limit,
            })),
        }
    }

    /// A job through retry (a query's: one short attempt), then priced and recorded.
    async fn run(self: Arc<Self>, job: Job) {
        let started = Instant::now();
        let tries = std::sync::atomic::AtomicU32::new(0);
        let quick = RetryPolicy {
            max_attempts: 1,
            ..self.retry
        };
        let result = opc_retry::retry(
            if job.quick { &quick } else { &self.retry },
            || {
                tries.fetch_add(1, Ordering::Relaxed);
                self.attempt(&job.body, job.inputs, job.quick)
            },
            std::future::pending::<()>(),
            |attempt, delay, error: &Attempt| {
                tracing::debug!(
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    kind = error.0.kind(),
                    status = error.0.status(),
                    "embeddings call failed; retrying"
                );
            },
        )
        .await;
        let attempts = tries.load(Ordering::Relaxed).max(1);
        let result = result.map_err(|failed| {
            if failed.attempts > 1 {
                LlmError::Exhausted {
                    attempts: failed.attempts,
                    last: Box::new(failed.error.0),
                }
            } else {
                failed.error.0
            }
        });
        if let Some(ledger) = &self.ledger {
            let tokens = result.as_ref().ok().and_then(|r| r.tokens);
            let call = EmbedCall {
                model: self.ledger_model.clone(),
                texts: job.inputs as u32,
                tokens: tokens.unwrap_or(0),
                cost_usd: match (tokens, self.price) {
                    (Some(t), Some(p)) => price_of(
                        &p,
                        super::Usage {
                            input_tokens: t,
                            output_tokens: 0,
                        },
                    ),
                    _ => 0.0,
                },
                usage_unknown: result.is_ok() && tokens.is_none(),
                duration_ms: started.elapsed().as_millis() as u64,
                attempts,
                error: result.as_ref().err().map(|e| e.to_string()),
                masked: job.masked,
            };
            ledger.record(call);
        }
        // The caller may have given up waiting; then nobody needs the answer.
        let _ = job.done.send((result, attempts));
    }
}

/// Why calls fail at once for now.
enum Blocked {
    /// The endpoint is down: until then, [`EmbedError::Unavailable`].
    Down { until: Instant, failures: u32 },
    /// The endpoint refused the config: until then, this [`EmbedError::Run`].
    Refused { until: Instant, why: String },
}

/// Embeddings from an OpenAI-compatible endpoint (see the module doc).
pub struct RemoteEmbedder {
    jobs: mpsc::UnboundedSender<Job>,
    model_id: String,
    model: String,
    dimensions: usize,
    batch: usize,
    base_url: String,
    api_key_env: Option<String>,
    masker: Option<Arc<EmbedMasker>>,
    /// The longest a call may wait for the worker: every attempt timing out, every backoff.
    deadline: Duration,
    blocked: Mutex<Option<Blocked>>,
    /// Whether a refusal was logged already (it is said once).
    refusal_said: AtomicBool,
    /// [`RemoteOptions::guard`].
    guard: Option<Guard>,
    /// Whether the guard's stop was logged already (it is said once per stop).
    guard_said: AtomicBool,
}

impl std::fmt::Debug for RemoteEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEmbedder")
            .field("model_id", &self.model_id)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl RemoteEmbedder {
    /// Start the embedder (its worker thread) from `options`.
    pub fn start(options: RemoteOptions) -> Result<RemoteEmbedder, String> {
        let RemoteOptions {
            model,
            dimensions,
            base_url,
            api_key_env,
            key,
            batch_size,
            retry,
            attempt_timeout,
            max_concurrent,
            requests_per_minute,
            price,
            ledger_model,
            masker,
            ledger,
            guard,
        } = options;
        let worker = Arc::new(Worker {
            wire: Wire {
                client: http_client(),
                url: format!("{base_url}/embeddings"),
                key,
                model: model.clone(),
                dimensions,
            },
            retry,
            attempt_timeout,
            slots: max_concurrent.map(|n| Semaphore::new(n.max(1))),
            rate: requests_per_minute.map(|n| RateLimiter::direct(Quota::per_minute(n))),
            price,
            ledger_model,
            ledger,
        });
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the embeddings worker: {e}"))?;
        std::thread::Builder::new()
            .name("embed-remote".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let mut running = tokio::task::JoinSet::new();
                    while let Some(job) = queue.recv().await {
                        running.spawn(worker.clone().run(job));
                        // Reap finished jobs so the set does not grow with the process's age.
                        while running.try_join_next().is_some() {}
                    }
                    while running.join_next().await.is_some() {}
                });
            })
            .map_err(|e| format!("cannot start the embeddings worker thread: {e}"))?;
        let per_attempt = attempt_timeout + retry.max_delay;
        let deadline = per_attempt.saturating_mul(retry.max_attempts.min(64)) + COOL_MAX;
        Ok(RemoteEmbedder {
            jobs,
            model_id: format!("openai-compatible:{model}:{dimensions}"),
            model,
            dimensions,
            batch: batch_size.max(1),
            base_url,
            api_key_env,
            masker,
            deadline,
            blocked: Mutex::new(None),
            refusal_said: AtomicBool::new(false),
            guard,
            guard_said: AtomicBool::new(false),
        })
    }

    fn blocked(&self) -> std::sync::MutexGuard<'_, Option<Blocked>> {
        self.blocked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The error to return at once while the endpoint is known down or refusing, if so.
    fn fail_fast(&self) -> Option<EmbedError> {
        let now = Instant::now();
        match &*self.blocked() {
            Some(Blocked::Down { until, .. }) if now < *until => {
                Some(EmbedError::Unavailable(format!(
                    "the embeddings endpoint {} failed a moment ago; trying again in {}",
                    self.base_url,
                    humantime::format_duration(Duration::from_secs(
                        until.saturating_duration_since(now).as_secs().max(1)
                    ))
                )))
            }
            Some(Blocked::Refused { until, why }) if now < *until => {
                Some(EmbedError::Run(why.clone()))
            }
            _ => None,
        }
    }

    /// Note how a call ended, for [`RemoteEmbedder::fail_fast`] and the once-said messages.
    fn outcome(&self, error: Option<&EmbedError>) {
        let mut blocked = self.blocked();
        match error {
            None => {
                if matches!(*blocked, Some(Blocked::Down { .. })) {
                    tracing::info!(url = %self.base_url, "the embeddings endpoint answers again");
                }
                *blocked = None;
            }
            Some(EmbedError::Unavailable(why)) => {
                let failures = match &*blocked {
                    Some(Blocked::Down { failures, .. }) => failures + 1,
                    _ => {
                        tracing::warn!(url = %self.base_url, "{why}; rows wait and are embedded once it answers (keyword search goes on)");
                        1
                    }
                };
                let cool = COOL_BASE
                    .saturating_mul(1 << failures.saturating_sub(1).min(8))
                    .min(COOL_MAX);
                *blocked = Some(Blocked::Down {
                    until: Instant::now() + cool,
                    failures,
                });
            }
            Some(EmbedError::Run(why)) => {
                if !self.refusal_said.swap(true, Ordering::Relaxed) {
                    tracing::error!("{why}");
                }
                *blocked = Some(Blocked::Refused {
                    until: Instant::now() + REFUSED_FOR,
                    why: why.clone(),
                });
            }
            Some(_) => {}
        }
    }

    /// `Some(error)` while the guard holds sending back (said once per stop).
    fn held(&self) -> Option<EmbedError> {
        let guard = self.guard.as_ref()?;
        match guard() {
            Some(why) => {
                if !self.guard_said.swap(true, Ordering::Relaxed) {
                    tracing::warn!("remote embeddings wait: {why}");
                }
                Some(EmbedError::Unavailable(why))
            }
            None => {
                self.guard_said.store(false, Ordering::Relaxed);
                None
            }
        }
    }

    /// One batch: mask, check the bytes, hand to the worker, wait. A failed call's HTTP status
    /// comes with its error (a refusal of one input is narrowed down by the caller).
    fn embed_batch(
        &self,
        texts: &[&str],
        quick: bool,
    ) -> Result<Vec<Vec<f32>>, (EmbedError, Option<u16>)> {
        if let Some(held) = self.held() {
            return Err((held, None));
        }
        let (sent, masked) = match &self.masker {
            Some(masker) => {
                let masked = masker
                    .mask(texts)
                    .map_err(|NotReady(why)| (EmbedError::Unavailable(why), None))?;
                (masked.texts.clone(), Some(masked))
            }
            None => (texts.iter().map(|t| t.to_string()).collect(), None),
        };
        let body = serde_json::json!({
            "model": self.model,
            "input": sent,
            "dimensions": self.dimensions,
        })
        .to_string();
        if let Some(masked) = &masked
            && masked.leaks(&body)
        {
            // The masker and this check agree by construction; a hit means a bug, and nothing is sent.
            return Err((EmbedError::Run(
                "the privacy egress guard stopped an embeddings request: it still carried a real value; nothing was sent".into(),
            ), None));
        }
        let (done, answer) = std::sync::mpsc::channel();
        self.jobs
            .send(Job {
                body,
                inputs: texts.len(),
                quick,
                masked: masked.as_ref().map(|m| TypeCounts::from(&m.counts)),
                done,
            })
            .map_err(|_| {
                (
                    EmbedError::Unavailable("the embeddings worker has stopped".into()),
                    None,
                )
            })?;
        // A query's one attempt, plus the limiter's wait; a batch's every attempt and backoff.
        let deadline = if quick {
            QUERY_TIMEOUT * 2
        } else {
            self.deadline
        };
        let (result, _attempts) = answer.recv_timeout(deadline).map_err(|_| {
            (
                EmbedError::Unavailable(format!(
                    "the embeddings endpoint {} did not answer within {}",
                    self.base_url,
                    humantime::format_duration(deadline)
                )),
                None,
            )
        })?;
        result.map(|reply| reply.vectors).map_err(|error| {
            let status = error.status().or_else(|| match &error {
                LlmError::Exhausted { last, .. } => last.status(),
                _ => None,
            });
            (self.embed_error(error), status)
        })
    }

    /// The texts of `chunk` (indexes into `texts`). A refusal that may be about one input
    /// ([`PER_INPUT`]) is narrowed down by halves; a single text still refused while a probe text
    /// passes gets a zero vector (it matches nothing; keyword search still finds its row), so one
    /// text the endpoint cannot take never holds back every row after it. When the probe is refused
    /// too, the refusal is the config's and is returned.
    fn embed_split(&self, texts: &[&str], chunk: &[usize]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
        match self.embed_batch(&batch, false) {
            Ok(vectors) => Ok(vectors),
            Err((_, Some(status))) if PER_INPUT.contains(&status) && chunk.len() > 1 => {
                let (first, second) = chunk.split_at(chunk.len() / 2);
                let mut vectors = self.embed_split(texts, first)?;
                vectors.extend(self.embed_split(texts, second)?);
                Ok(vectors)
            }
            Err((error, Some(status))) if PER_INPUT.contains(&status) => {
                match self.embed_batch(&["probe"], false) {
                    Ok(_) => {
                        tracing::warn!(
                            status,
                            "the embeddings endpoint refused one text (too long or malformed for it); its row is kept without a vector, and keyword search still finds it"
                        );
                        Ok(vec![vec![0.0; self.dimensions]])
                    }
                    Err(_) => Err(error),
                }
            }
            Err((error, _)) => Err(error),
        }
    }

    /// A call-stack error as the stores need it: try later, or a refusal said with its fix.
    fn embed_error(&self, error: LlmError) -> EmbedError {
        if error.is_retryable()
            || matches!(&error, LlmError::Exhausted { last, .. } if last.is_retryable())
        {
            return EmbedError::Unavailable(format!("embeddings endpoint: {error}"));
        }
        let fix = match error.status() {
            Some(401 | 403) => match &self.api_key_env {
                Some(var) => format!("check the key in {var} (`framework.memory.embedding.apiKeyEnv`)"),
                None => "the endpoint wants a key: set `framework.memory.embedding.apiKeyEnv` to the variable holding it".into(),
            },
            Some(404) => format!(
                "check `framework.memory.embedding.baseUrl` ({}: OPC posts to `{{baseUrl}}/embeddings`) and `model` (`{}`)",
                self.base_url, self.model
            ),
            Some(_) => format!(
                "check `framework.memory.embedding.model` (`{}`) and `dimensions` ({}): the endpoint may not serve them",
                self.model, self.dimensions
            ),
            None => "see the message above; fix `framework.memory.embedding`".into(),
        };
        EmbedError::Run(format!(
            "remote embeddings ({}) failed: {error}. Fix: {fix}. Until then recall and facts search by keywords only",
            self.base_url
        ))
    }
}

impl Embedder for RemoteEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Empty texts are not sent (servers refuse them); they get a zero vector, as locally.
        let send: Vec<usize> = (0..texts.len())
            .filter(|&i| !texts[i].trim().is_empty())
            .collect();
        let mut out = vec![vec![0.0; self.dimensions]; texts.len()];
        if send.is_empty() {
            return Ok(out);
        }
        if let Some(error) = self.fail_fast() {
            return Err(error);
        }
        for chunk in send.chunks(self.batch) {
            let result = self.embed_split(texts, chunk);
            self.outcome(result.as_ref().err());
            for (&i, v) in chunk.iter().zip(result?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        if text.trim().is_empty() {
            return Ok(vec![0.0; self.dimensions]);
        }
        if let Some(error) = self.fail_fast() {
            return Err(error);
        }
        let result = self.embed_batch(&[text], true).map_err(|(error, _)| error);
        // A query that fails marks the endpoint down like a batch does (searches then skip it at
        // once), but a refusal of the query alone does not stop the indexing.
        match &result {
            Ok(_) | Err(EmbedError::Unavailable(_)) => self.outcome(result.as_ref().err()),
            Err(_) => {}
        }
        result?
            .pop()
            .ok_or_else(|| EmbedError::Run("the embeddings endpoint returned no vector".into()))
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn batch_size(&self) -> usize {
        self.batch
    }

    fn descriptor(&self) -> serde_json::Value {
        serde_json::json!({
            "provider": "openai-compatible",
            "model": self.model,
            "dimensions": self.dimensions,
            "baseUrl": self.base_url,
            "apiKeyEnv": self.api_key_env,
        })
    }
}

#[cfg(test)]
mod tests;
