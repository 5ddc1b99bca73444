//! The effective telemetry settings: the standard `OTEL_*` variables over `framework.telemetry`.
//!
//! Why here, and why from a lookup function: the binary resolves the settings once, before its
//! logger exists, and `opc validate` resolves them again to show the same errors; tests pass a map
//! instead of touching the process environment. The crate stays a leaf: the config section comes
//! in as the plain [`FromConfig`], which the binary fills from `opc-hierarchy`.
//!
//! Rules (the OpenTelemetry SDK configuration and OTLP exporter specifications):
//! - a variable wins over the config; a signal's own variable (`…_TRACES_…`, `…_METRICS_…`) wins
//!   over the general one; an empty variable counts as unset;
//! - a signal endpoint is used as written; the base endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, or
//!   `framework.telemetry.endpoint`) gets `/v1/traces` and `/v1/metrics` appended;
//! - with no endpoint at all, or `OTEL_SDK_DISABLED=true`, telemetry is off ([`Settings::is_on`]);
//! - only OTLP over HTTP is built (`http/protobuf`, the default, or `http/json`): `grpc` is an error
//!   saying so;
//! - headers come only from the environment (`OTEL_EXPORTER_OTLP_HEADERS`, and the variable
//!   `headersEnv` names): they hold backends' API keys, so an error never shows a header's value.
//!
//! Invariant: every bad value is a [`Problem`] naming the variable or config key, the value as
//! written (except a header's), and the fix; all problems are collected, none stops the others.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// `framework.telemetry` as the config wrote it (already checked by the config's validation; a
/// value is checked again here, so a caller that skips validation still gets a clear error).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FromConfig {
    /// `endpoint`: the collector's base URL (`http://127.0.0.1:4318`).
    pub endpoint: Option<String>,
    /// `protocol`: `http/protobuf` or `http/json`.
    pub protocol: Option<String>,
    /// `headersEnv`: the name of the variable holding the headers (`k=v,k2=v2`).
    pub headers_env: Option<String>,
    /// `captureContent`: record the masked message content on model-call spans.
    pub capture_content: Option<bool>,
}

/// The OTLP/HTTP encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf` (the default).
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

impl Protocol {
    /// The word the variables and the config use.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        }
    }
}

/// Where and how one signal (traces or metrics) is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Export {
    /// The full URL requests are posted to (`…/v1/traces`).
    pub endpoint: String,
    /// The encoding.
    pub protocol: Protocol,
    /// Request headers (`x-honeycomb-team` …); values are secrets.
    pub headers: BTreeMap<String, String>,
    /// How long one export request may take (connect, send, answer).
    pub timeout: Duration,
}

impl fmt::Debug for Export {
    /// Header names only: their values are backends' API keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Export")
            .field("endpoint", &shown_endpoint(&self.endpoint))
            .field("protocol", &self.protocol)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Which traces are recorded (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampler {
    /// `always_on`.
    AlwaysOn,
    /// `always_off`.
    AlwaysOff,
    /// `traceidratio` with its ratio in 0..=1.
    TraceIdRatio(f64),
    /// `parentbased_always_on` (the default): a root is recorded, a child follows its parent.
    ParentBasedAlwaysOn,
    /// `parentbased_always_off`.
    ParentBasedAlwaysOff,
    /// `parentbased_traceidratio` with its ratio.
    ParentBasedTraceIdRatio(f64),
}

/// The batch span processor's limits (`OTEL_BSP_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Time between two exports (`OTEL_BSP_SCHEDULE_DELAY`, default 5 s).
    pub schedule_delay: Duration,
    /// Spans kept waiting at most; past it new spans are dropped (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048).
    pub max_queue_size: usize,
    /// Spans per export request at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512).
    pub max_export_batch_size: usize,
    /// The longest one export of spans may take (`OTEL_BSP_EXPORT_TIMEOUT`, 30 s); the request's
    /// own timeout is the shorter of this and the exporter's.
    pub export_timeout: Duration,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            schedule_delay: Duration::from_millis(5_000),
            max_queue_size: 2_048,
            max_export_batch_size: 512,
            export_timeout: Duration::from_millis(30_000),
        }
    }
}

/// The effective settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Where spans go; `None`: no traces.
    pub traces: Option<Export>,
    /// Where metrics go; `None`: no metrics.
    pub metrics: Option<Export>,
    /// `service.name` (default `opc`).
    pub service_name: String,
    /// Other resource attributes (`OTEL_RESOURCE_ATTRIBUTES`), in the order written.
    pub resource: Vec<(String, String)>,
    /// The sampler.
    pub sampler: Sampler,
    /// The span batch limits.
    pub batch: Batch,
    /// Time between two metric exports (`OTEL_METRIC_EXPORT_INTERVAL`, default 60 s).
    pub metric_interval: Duration,
    /// The longest one metric export may take (`OTEL_METRIC_EXPORT_TIMEOUT`, default 30 s).
    pub metric_timeout: Duration,
    /// Whether model-call spans carry the (masked) message content.
    pub capture_content: bool,
}

impl Settings {
    /// Nothing exported.
    pub fn off() -> Settings {
        Settings {
            traces: None,
            metrics: None,
            service_name: DEFAULT_SERVICE_NAME.to_string(),
            resource: Vec::new(),
            sampler: Sampler::ParentBasedAlwaysOn,
            batch: Batch::default(),
            metric_interval: Duration::from_millis(60_000),
            metric_timeout: Duration::from_millis(30_000),
            capture_content: false,
        }
    }

    /// Whether anything is exported.
    pub fn is_on(&self) -> bool {
        self.traces.is_some() || self.metrics.is_some()
    }
}

/// `service.name` unless the variables say otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "opc";

const DEFAULT_TIMEOUT: Duration = Duration::from_millis(10_000);
/// The config section's keys, as problems name them.
const CONFIG: &str = "framework.telemetry";

/// One bad value: which variable or key, what is wrong, how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The variable (`OTEL_TRACES_SAMPLER`) or config key (`framework.telemetry.protocol`).
    pub source: String,
    /// What is wrong, naming the value as written (never a header's value).
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.message)
    }
}

/// Every problem found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    /// One `error: …` and `hint: …` pair per problem, as the binary prints its start-up errors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for problem in &self.0 {
            writeln!(f, "error: {problem}")?;
            writeln!(f, "hint: {}", problem.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// The effective settings from the variables (`env`) and the config section. `Err` lists every
/// bad value.
pub fn resolve(
    env: impl Fn(&str) -> Option<String>,
    config: &FromConfig,
) -> Result<Settings, Problems> {
    let mut r = Resolver {
        env: &env,
        problems: Vec::new(),
    };
    let settings = r.settings(config);
    if r.problems.is_empty() {
        Ok(settings)
    } else {
        Err(Problems(r.problems))
    }
}

/// The endpoint as shown in logs: scheme, host, port and path; never credentials or a query.
pub fn shown_endpoint(endpoint: &str) -> String {
    match reqwest::Url::parse(endpoint) {
        Ok(url) => {
            let mut shown = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
            if let Some(port) = url.port() {
                shown.push_str(&format!(":{port}"));
            }
            shown.push_str(url.path());
            shown
        }
        Err(_) => "(an invalid URL)".to_string(),
    }
}

/// Which signal a variable belongs to.
#[derive(Clone, Copy)]
enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    /// The infix of its variables (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    fn infix(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES_",
            Signal::Metrics => "METRICS_",
        }
    }

    /// The path appended to a base endpoint.
    fn path(self) -> &'static str {
        match self {
            Signal::Traces => "v1/traces",
            Signal::Metrics => "v1/metrics",
        }
    }
}

struct Resolver<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    problems: Vec<Problem>,
}

impl Resolver<'_> {
    /// A variable's value; empty counts as unset (the specification's rule).
    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.trim().is_empty())
    }

    /// The signal's own variable, else the general one: `(name, value)`.
    fn signal_var(&self, signal: Signal, suffix: &str) -> Option<(String, String)> {
        let own = format!("OTEL_EXPORTER_OTLP_{}{suffix}", signal.infix());
        let general = format!("OTEL_EXPORTER_OTLP_{suffix}");
        self.var(&own)
            .map(|v| (own, v))
            .or_else(|| self.var(&general).map(|v| (general, v)))
    }

    /// Records a problem once: a general variable is read for each signal, but reported once.
    fn problem(&mut self, source: impl Into<String>, message: String, hint: impl Into<String>) {
        let problem = Problem {
            source: source.into(),
            message,
            hint: hint.into(),
        };
        if !self.problems.contains(&problem) {
            self.problems.push(problem);
        }
    }

    fn settings(&mut self, config: &FromConfig) -> Settings {
        let disabled = self.boolean("OTEL_SDK_DISABLED").unwrap_or(false);
        let config_endpoint = config
            .endpoint
            .as_deref()
            .filter(|e| !e.trim().is_empty())
            .and_then(|e| self.url(&format!("{CONFIG}.endpoint"), e, "endpoint: "));
        let base = match self.var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Some(value) => self.url(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                &value,
                "OTEL_EXPORTER_OTLP_ENDPOINT=",
            ),
            None => config_endpoint,
        };
        let config_protocol = config
            .protocol
            .as_deref()
            .and_then(|p| self.protocol(&format!("{CONFIG}.protocol"), p, "protocol: "));
        let config_headers = self.config_headers(config);
        let mut traces = self.export(
            Signal::Traces,
            base.as_deref(),
            config_protocol,
            &config_headers,
        );
        let mut metrics = self.export(
            Signal::Metrics,
            base.as_deref(),
            config_protocol,
            &config_headers,
        );
        self.compression();

        let resource = self
            .var("OTEL_RESOURCE_ATTRIBUTES")
            .map(|v| self.resource(&v))
            .unwrap_or_default();
        let service_name = match self.var("OTEL_SERVICE_NAME") {
            Some(name) => name.trim().to_string(),
            None => resource
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string()),
        };
        let sampler = self.sampler();
        let batch = self.batch();
        let metric_interval = self
            .millis("OTEL_METRIC_EXPORT_INTERVAL")
            .unwrap_or(Duration::from_millis(60_000));
        let metric_timeout = self
            .millis("OTEL_METRIC_EXPORT_TIMEOUT")
            .unwrap_or(Duration::from_millis(30_000));
        let capture_content = self
            .boolean("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .or(config.capture_content)
            .unwrap_or(false);
        if disabled {
            traces = None;
            metrics = None;
        }
        Settings {
            traces,
            metrics,
            service_name,
            resource,
            sampler,
            batch,
            metric_interval,
            metric_timeout,
            capture_content,
        }
    }

    /// One signal's export, or `None` when no endpoint applies to it.
    fn export(
        &mut self,
        signal: Signal,
        base: Option<&str>,
        config_protocol: Option<Protocol>,
        config_headers: &BTreeMap<String, String>,
    ) -> Option<Export> {
        let endpoint = match self.signal_var_exact(signal, "ENDPOINT") {
            Some((name, value)) => {
                let example = format!("{name}=");
                self.url(&name, &value, &example)
            }
            None => base.map(|base| join(base, signal.path())),
        };
        let protocol = match self.signal_var(signal, "PROTOCOL") {
            Some((name, value)) => {
                let example = format!("{name}=");
                self.protocol(&name, &value, &example)
            }
            None => config_protocol,
        }
        .unwrap_or(Protocol::HttpProtobuf);
        let mut headers = config_headers.clone();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS".to_string(),
            format!("OTEL_EXPORTER_OTLP_{}HEADERS", signal.infix()),
        ] {
            if let Some(value) = self.var(&name) {
                headers.extend(self.headers(&name, &value));
            }
        }
        let timeout = match self.signal_var(signal, "TIMEOUT") {
            Some((name, value)) => self.parse_millis(&name, &value),
            None => None,
        }
        .unwrap_or(DEFAULT_TIMEOUT);
        Some(Export {
            endpoint: endpoint?,
            protocol,
            headers,
            timeout,
        })
    }

    /// Only the signal's own variable (the general endpoint is a base, handled by the caller).
    fn signal_var_exact(&self, signal: Signal, suffix: &str) -> Option<(String, String)> {
        let own = format!("OTEL_EXPORTER_OTLP_{}{suffix}", signal.infix());
        self.var(&own).map(|v| (own, v))
    }

    /// An http(s) URL with a host, or a problem. The value is shown without credentials.
    fn url(&mut self, source: &str, value: &str, example: &str) -> Option<String> {
        let value = value.trim();
        match reqwest::Url::parse(value) {
            Ok(url)
                if matches!(url.scheme(), "http" | "https")
                    && url.host_str().is_some_and(|h| !h.is_empty()) =>
            {
                Some(value.to_string())
            }
            _ => {
                let shown = if value.contains('@') {
                    "(a value with credentials, not shown)".to_string()
                } else {
                    format!("`{value}`")
                };
                self.problem(
                    source,
                    format!("{shown} is not an http(s) URL"),
                    format!(
                        "write the collector's OTLP/HTTP address, e.g. `{example}http://127.0.0.1:4318` (a local collector or Jaeger)"
                    ),
                );
                None
            }
        }
    }

    fn protocol(&mut self, source: &str, value: &str, example: &str) -> Option<Protocol> {
        match value.trim() {
            "http/protobuf" => Some(Protocol::HttpProtobuf),
            "http/json" => Some(Protocol::HttpJson),
            "grpc" => {
                self.problem(
                    source,
                    "`grpc` is not supported: this build exports OTLP over HTTP only".to_string(),
                    format!(
                        "use `{example}http/protobuf` and the collector's OTLP/HTTP port (4318, not gRPC's 4317)"
                    ),
                );
                None
            }
            other => {
                self.problem(
                    source,
                    format!("unknown protocol `{other}`"),
                    format!("write `{example}http/protobuf` (the default) or `{example}http/json`"),
                );
                None
            }
        }
    }

    /// `OTEL_EXPORTER_OTLP_COMPRESSION` (and the signals' own): none is built, so only `none`.
    fn compression(&mut self) {
        for name in [
            "OTEL_EXPORTER_OTLP_COMPRESSION",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
        ] {
            if let Some(value) = self.var(name)
                && value.trim() != "none"
            {
                self.problem(
                    name,
                    format!(
                        "compression `{}` is not supported by this build",
                        value.trim()
                    ),
                    format!("unset {name} (or set it to `none`): exports are sent uncompressed"),
                );
            }
        }
    }

    /// The headers named by `headersEnv`, if any.
    fn config_headers(&mut self, config: &FromConfig) -> BTreeMap<String, String> {
        let Some(name) = config.headers_env.as_deref() else {
            return BTreeMap::new();
        };
        let key = format!("{CONFIG}.headersEnv");
        if !is_env_name(name) {
            self.problem(
                key,
                format!("`{name}` is not an environment variable name"),
                "use capital letters, digits and `_`, e.g. `headersEnv: OTEL_HEADERS`",
            );
            return BTreeMap::new();
        }
        match self.var(name) {
            Some(value) => self.headers(name, &value).into_iter().collect(),
            None => {
                self.problem(
                    key,
                    format!("`headersEnv` names the environment variable {name}, which is not set"),
                    format!(
                        "`export {name}='x-api-key=…'` (headers as `name=value,name2=value2`), or remove `headersEnv`"
                    ),
                );
                BTreeMap::new()
            }
        }
    }

    /// `k=v,k2=v2`, percent-decoded. Problems never show a value.
    fn headers(&mut self, source: &str, value: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (i, item) in value.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let n = i + 1;
            let Some((key, val)) = item.split_once('=') else {
                self.problem(
                    source,
                    format!("header {n} has no `=` (value not shown)"),
                    "write headers as `name=value,name2=value2` (values percent-encoded where needed)",
                );
                continue;
            };
            let key = key.trim();
            let Some(key) = decode(key).filter(|k| is_header_name(k)) else {
                self.problem(
                    source,
                    format!("header {n}'s name is not a valid HTTP header name (value not shown)"),
                    "write headers as `name=value,name2=value2`, e.g. `x-honeycomb-team=…`",
                );
                continue;
            };
            let Some(val) = decode(val.trim()).filter(|v| is_header_value(v)) else {
                self.problem(
                    source,
                    format!("the value of header `{key}` is not valid (not shown): a bad `%` escape or a control character"),
                    "percent-encode special characters (`%2C` for a comma, `%3D` for `=`); values may not hold control characters",
                );
                continue;
            };
            out.push((key.to_ascii_lowercase(), val));
        }
        out
    }

    /// `OTEL_RESOURCE_ATTRIBUTES`: `k=v,k2=v2`, percent-decoded.
    fn resource(&mut self, value: &str) -> Vec<(String, String)> {
        const NAME: &str = "OTEL_RESOURCE_ATTRIBUTES";
        let mut out: Vec<(String, String)> = Vec::new();
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let parsed = item
                .split_once('=')
                .and_then(|(k, v)| Some((decode(k.trim())?, decode(v.trim())?)))
                .filter(|(k, _)| !k.is_empty());
            match parsed {
                Some((key, val)) => {
                    out.retain(|(k, _)| *k != key);
                    out.push((key, val));
                }
                None => self.problem(
                    NAME,
                    format!("`{item}` is not `key=value`"),
                    "write attributes as `key=value,key2=value2`, e.g. `deployment.environment=prod,service.namespace=acme` (percent-encode `,` and `=` in values)",
                ),
            }
        }
        out
    }

    fn sampler(&mut self) -> Sampler {
        const NAME: &str = "OTEL_TRACES_SAMPLER";
        let ratio = |r: &mut Self| -> f64 {
            let Some(arg) = r.var("OTEL_TRACES_SAMPLER_ARG") else {
                return 1.0;
            };
            match arg.trim().parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => x,
                _ => {
                    r.problem(
                        "OTEL_TRACES_SAMPLER_ARG",
                        format!("`{}` is not a ratio between 0 and 1", arg.trim()),
                        "write the share of traces to keep, e.g. `OTEL_TRACES_SAMPLER_ARG=0.25`",
                    );
                    1.0
                }
            }
        };
        let Some(value) = self.var(NAME) else {
            return Sampler::ParentBasedAlwaysOn;
        };
        match value.trim() {
            "always_on" => Sampler::AlwaysOn,
            "always_off" => Sampler::AlwaysOff,
            "traceidratio" => Sampler::TraceIdRatio(ratio(self)),
            "parentbased_always_on" => Sampler::ParentBasedAlwaysOn,
            "parentbased_always_off" => Sampler::ParentBasedAlwaysOff,
            "parentbased_traceidratio" => Sampler::ParentBasedTraceIdRatio(ratio(self)),
            other => {
                self.problem(
                    NAME,
                    format!("unknown sampler `{other}`"),
                    "use one of always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off, parentbased_traceidratio",
                );
                Sampler::ParentBasedAlwaysOn
            }
        }
    }

    fn batch(&mut self) -> Batch {
        let d = Batch::default();
        let batch = Batch {
            schedule_delay: self
                .millis("OTEL_BSP_SCHEDULE_DELAY")
                .unwrap_or(d.schedule_delay),
            max_queue_size: self
                .count("OTEL_BSP_MAX_QUEUE_SIZE")
                .unwrap_or(d.max_queue_size),
            max_export_batch_size: self
                .count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
                .unwrap_or(d.max_export_batch_size),
            export_timeout: self
                .millis("OTEL_BSP_EXPORT_TIMEOUT")
                .unwrap_or(d.export_timeout),
        };
        if batch.max_export_batch_size > batch.max_queue_size {
            self.problem(
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
                format!(
                    "a batch of {} spans is larger than the queue ({}, OTEL_BSP_MAX_QUEUE_SIZE)",
                    batch.max_export_batch_size, batch.max_queue_size
                ),
                "make OTEL_BSP_MAX_EXPORT_BATCH_SIZE at most OTEL_BSP_MAX_QUEUE_SIZE (defaults 512 and 2048)",
            );
        }
        batch
    }

    /// A duration in milliseconds, at least 1.
    fn millis(&mut self, name: &str) -> Option<Duration> {
        let value = self.var(name)?;
        self.parse_millis(name, &value)
    }

    fn parse_millis(&mut self, name: &str, value: &str) -> Option<Duration> {
        match value.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Some(Duration::from_millis(ms)),
            _ => {
                self.problem(
                    name,
                    format!(
                        "`{}` is not a number of milliseconds (at least 1)",
                        value.trim()
                    ),
                    format!(
                        "write whole milliseconds without a unit, e.g. `{name}=10000` for 10 s"
                    ),
                );
                None
            }
        }
    }

    /// A count of at least 1.
    fn count(&mut self, name: &str) -> Option<usize> {
        let value = self.var(name)?;
        match value.trim().parse::<usize>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                self.problem(
                    name,
                    format!("`{}` is not a whole number of at least 1", value.trim()),
                    format!("write a count, e.g. `{name}=512`"),
                );
                None
            }
        }
    }

    /// `true` or `false` (any case).
    fn boolean(&mut self, name: &str) -> Option<bool> {
        let value = self.var(name)?;
        match value.trim().to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            other => {
                self.problem(
                    name,
                    format!("`{other}` is not `true` or `false`"),
                    format!("write `{name}=true` or `{name}=false`"),
                );
                None
            }
        }
    }
}

/// `base` + `/` + `path`, with exactly one slash between them (the OTLP/HTTP rule).
fn join(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// `[A-Z_][A-Z0-9_]*`, the config's rule for variable names.
pub fn is_env_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// An HTTP token (RFC 9110): what a header name may be.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Visible characters, spaces and tabs: what a header value may hold.
fn is_header_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// Percent-decoding (the W3C baggage format the variables use); `None` on a bad escape or bytes
/// that are not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)], config: &FromConfig) -> Result<Settings, Problems> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        resolve(|name| vars.get(name).cloned(), config)
    }

    fn ok(vars: &[(&str, &str)]) -> Settings {
        with(vars, &FromConfig::default()).expect("valid settings")
    }

    /// The single problem `vars` give.
    fn problem(vars: &[(&str, &str)]) -> Problem {
        let problems = with(vars, &FromConfig::default()).expect_err("a problem");
        assert_eq!(problems.0.len(), 1, "{problems}");
        problems.0[0].clone()
    }

    const BASE: (&str, &str) = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");

    #[test]
    fn without_an_endpoint_nothing_is_exported() {
        let settings = ok(&[("OTEL_SERVICE_NAME", "x")]);
        assert!(!settings.is_on());
        assert_eq!(ok(&[]), Settings::off());
        assert_eq!(
            ok(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]),
            Settings::off()
        );
    }

    #[test]
    fn the_base_endpoint_gets_the_signal_paths_and_signal_endpoints_are_used_as_written() {
        let settings = ok(&[BASE]);
        assert_eq!(
            settings.traces.expect("traces").endpoint,
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            settings.metrics.expect("metrics").endpoint,
            "http://127.0.0.1:4318/v1/metrics"
        );
        let settings = ok(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://otel.example.com/otlp/",
        )]);
        assert_eq!(
            settings.traces.expect("traces").endpoint,
            "https://otel.example.com/otlp/v1/traces"
        );
        let settings = ok(&[
            BASE,
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://tempo:4318/custom",
            ),
        ]);
        assert_eq!(
            settings.traces.expect("traces").endpoint,
            "http://tempo:4318/custom"
        );
        assert_eq!(
            settings.metrics.expect("metrics").endpoint,
            "http://127.0.0.1:4318/v1/metrics"
        );
        // A signal endpoint alone turns on that signal only.
        let settings = ok(&[(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "http://m:4318/v1/metrics",
        )]);
        assert!(settings.traces.is_none());
        assert_eq!(
            settings.metrics.expect("metrics").endpoint,
            "http://m:4318/v1/metrics"
        );
    }

    #[test]
    fn variables_win_over_the_config() {
        let config = FromConfig {
            endpoint: Some("http://config:4318".into()),
            protocol: Some("http/json".into()),
            headers_env: None,
            capture_content: Some(true),
        };
        let settings = with(&[], &config).expect("valid");
        let traces = settings.traces.expect("traces");
        assert_eq!(traces.endpoint, "http://config:4318/v1/traces");
        assert_eq!(traces.protocol, Protocol::HttpJson);
        assert!(settings.capture_content);
        let settings = with(
            &[
                BASE,
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                (
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                    "false",
                ),
            ],
            &config,
        )
        .expect("valid");
        let traces = settings.traces.expect("traces");
        assert_eq!(traces.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(traces.protocol, Protocol::HttpProtobuf);
        assert!(!settings.capture_content);
    }

    #[test]
    fn the_protocol_defaults_to_protobuf_a_signal_may_differ_and_grpc_is_refused() {
        let settings = ok(&[BASE]);
        assert_eq!(
            settings.traces.expect("traces").protocol,
            Protocol::HttpProtobuf
        );
        let settings = ok(&[
            BASE,
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf"),
        ]);
        assert_eq!(settings.traces.expect("t").protocol, Protocol::HttpJson);
        assert_eq!(
            settings.metrics.expect("m").protocol,
            Protocol::HttpProtobuf
        );
        let grpc = problem(&[BASE, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(grpc.source, "OTEL_EXPORTER_OTLP_PROTOCOL");
        assert!(grpc.message.contains("HTTP only"), "{grpc:?}");
        assert!(grpc.hint.contains("http/protobuf") && grpc.hint.contains("4318"));
        let bad = problem(&[BASE, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http")]);
        assert!(bad.message.contains("`http`"), "{bad:?}");
        let config = FromConfig {
            protocol: Some("grpc".into()),
            ..FromConfig::default()
        };
        let problems = with(&[BASE], &config).expect_err("grpc");
        assert_eq!(problems.0[0].source, "framework.telemetry.protocol");
    }

    #[test]
    fn a_bad_endpoint_is_named_without_its_credentials() {
        let bad = problem(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318")]);
        assert_eq!(bad.source, "OTEL_EXPORTER_OTLP_ENDPOINT");
        assert!(bad.message.contains("`127.0.0.1:4318`"), "{bad:?}");
        assert!(bad.hint.contains("http://127.0.0.1:4318"));
        let bad = problem(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://user:hunter2@x")]);
        assert!(!bad.message.contains("hunter2"), "{bad:?}");
        let config = FromConfig {
            endpoint: Some("localhost".into()),
            ..FromConfig::default()
        };
        let problems = with(&[], &config).expect_err("bad");
        assert_eq!(problems.0[0].source, "framework.telemetry.endpoint");
        assert_eq!(
            shown_endpoint("https://user:secret@api.example.com:443/v1/traces?key=secret"),
            "https://api.example.com/v1/traces"
        );
        assert_eq!(
            shown_endpoint("http://127.0.0.1:4318/v1/traces"),
            "http://127.0.0.1:4318/v1/traces"
        );
    }

    #[test]
    fn headers_are_percent_decoded_merged_and_never_shown() {
        let settings = ok(&[
            BASE,
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-honeycomb-team=abc%3D%3D, X-Dataset = opc",
            ),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-dataset=traces"),
        ]);
        let traces = settings.traces.expect("traces");
        assert_eq!(traces.headers["x-honeycomb-team"], "abc==");
        assert_eq!(traces.headers["x-dataset"], "traces");
        assert_eq!(settings.metrics.expect("m").headers["x-dataset"], "opc");
        assert!(!format!("{traces:?}").contains("abc=="));

        let bad = problem(&[BASE, ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,secretvalue")]);
        assert_eq!(bad.source, "OTEL_EXPORTER_OTLP_HEADERS");
        assert!(bad.message.contains("header 2"), "{bad:?}");
        assert!(!bad.message.contains("secretvalue"));
        let bad = problem(&[BASE, ("OTEL_EXPORTER_OTLP_HEADERS", "key=sec%zzret")]);
        assert!(
            bad.message.contains("`key`") && !bad.message.contains("sec"),
            "{bad:?}"
        );
        let bad = problem(&[BASE, ("OTEL_EXPORTER_OTLP_HEADERS", "bad name=x")]);
        assert!(bad.message.contains("header 1"), "{bad:?}");
    }

    #[test]
    fn headers_env_names_a_variable_and_the_standard_variables_win() {
        let config = FromConfig {
            endpoint: Some("https://api.honeycomb.io".into()),
            headers_env: Some("HONEYCOMB_HEADERS".into()),
            ..FromConfig::default()
        };
        let settings = with(
            &[
                ("HONEYCOMB_HEADERS", "x-honeycomb-team=key1,x-extra=1"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-honeycomb-team=key2"),
            ],
            &config,
        )
        .expect("valid");
        let headers = settings.traces.expect("traces").headers;
        assert_eq!(headers["x-honeycomb-team"], "key2");
        assert_eq!(headers["x-extra"], "1");

        let problems = with(&[], &config).expect_err("unset");
        assert_eq!(problems.0[0].source, "framework.telemetry.headersEnv");
        assert!(problems.0[0].message.contains("HONEYCOMB_HEADERS"));
        let bad = FromConfig {
            headers_env: Some("x-honeycomb-team=abc".into()),
            ..config
        };
        let problems = with(&[], &bad).expect_err("not a name");
        assert!(
            problems.0[0]
                .message
                .contains("not an environment variable name")
        );
    }

    #[test]
    fn timeouts_batches_and_intervals_are_whole_milliseconds_or_counts() {
        let settings = ok(&[
            BASE,
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "700"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "64"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "32"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "1000"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1500"),
            ("OTEL_METRIC_EXPORT_TIMEOUT", "900"),
        ]);
        assert_eq!(
            settings.traces.expect("t").timeout,
            Duration::from_millis(2500)
        );
        assert_eq!(
            settings.metrics.expect("m").timeout,
            Duration::from_millis(700)
        );
        assert_eq!(
            settings.batch,
            Batch {
                schedule_delay: Duration::from_millis(100),
                max_queue_size: 64,
                max_export_batch_size: 32,
                export_timeout: Duration::from_millis(1000),
            }
        );
        assert_eq!(settings.metric_interval, Duration::from_millis(1500));
        assert_eq!(settings.metric_timeout, Duration::from_millis(900));
        assert_eq!(ok(&[BASE]).traces.expect("t").timeout, DEFAULT_TIMEOUT);

        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"),
            ("OTEL_BSP_SCHEDULE_DELAY", "-5"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "1.5"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1m"),
            ("OTEL_METRIC_EXPORT_TIMEOUT", "x"),
        ] {
            let bad = problem(&[BASE, (name, value)]);
            assert_eq!(bad.source, name);
            assert!(bad.message.contains(&format!("`{value}`")), "{bad:?}");
        }
        let bad = problem(&[
            ("OTEL_BSP_MAX_QUEUE_SIZE", "10"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "20"),
        ]);
        assert_eq!(bad.source, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE");
    }

    #[test]
    fn the_service_name_defaults_to_opc_and_resource_attributes_are_parsed() {
        assert_eq!(ok(&[]).service_name, "opc");
        let settings = ok(&[(
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=gateway,deployment.environment=prod%2Ceu",
        )]);
        assert_eq!(settings.service_name, "gateway");
        assert_eq!(
            settings.resource,
            vec![
                ("service.name".to_string(), "gateway".to_string()),
                ("deployment.environment".to_string(), "prod,eu".to_string()),
            ]
        );
        let settings = ok(&[
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=gateway"),
            ("OTEL_SERVICE_NAME", "opc-eu"),
        ]);
        assert_eq!(settings.service_name, "opc-eu");
        let bad = problem(&[("OTEL_RESOURCE_ATTRIBUTES", "a=1,novalue")]);
        assert_eq!(bad.source, "OTEL_RESOURCE_ATTRIBUTES");
        assert!(bad.message.contains("`novalue`"));
    }

    #[test]
    fn samplers_take_the_specification_names() {
        assert_eq!(ok(&[]).sampler, Sampler::ParentBasedAlwaysOn);
        for (name, sampler) in [
            ("always_on", Sampler::AlwaysOn),
            ("always_off", Sampler::AlwaysOff),
            ("traceidratio", Sampler::TraceIdRatio(1.0)),
            ("parentbased_always_on", Sampler::ParentBasedAlwaysOn),
            ("parentbased_always_off", Sampler::ParentBasedAlwaysOff),
            (
                "parentbased_traceidratio",
                Sampler::ParentBasedTraceIdRatio(1.0),
            ),
        ] {
            assert_eq!(ok(&[("OTEL_TRACES_SAMPLER", name)]).sampler, sampler);
        }
        let settings = ok(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ]);
        assert_eq!(settings.sampler, Sampler::TraceIdRatio(0.25));
        let bad = problem(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]);
        assert_eq!(bad.source, "OTEL_TRACES_SAMPLER");
        assert!(bad.hint.contains("parentbased_always_on"));
        let bad = problem(&[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
        ]);
        assert_eq!(bad.source, "OTEL_TRACES_SAMPLER_ARG");
    }

    #[test]
    fn the_sdk_can_be_disabled_and_booleans_are_strict() {
        let settings = ok(&[BASE, ("OTEL_SDK_DISABLED", "TRUE")]);
        assert!(!settings.is_on());
        assert!(ok(&[BASE, ("OTEL_SDK_DISABLED", "false")]).is_on());
        let bad = problem(&[BASE, ("OTEL_SDK_DISABLED", "yes")]);
        assert_eq!(bad.source, "OTEL_SDK_DISABLED");
        let bad = problem(&[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "1")]);
        assert_eq!(
            bad.source,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
        );
        assert!(
            ok(&[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")]).capture_content
        );
        assert!(!ok(&[]).capture_content);
    }

    #[test]
    fn compression_is_refused_and_every_problem_is_listed() {
        let bad = problem(&[BASE, ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")]);
        assert_eq!(bad.source, "OTEL_EXPORTER_OTLP_COMPRESSION");
        assert!(ok(&[BASE, ("OTEL_EXPORTER_OTLP_COMPRESSION", "none")]).is_on());
        let problems = with(
            &[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_TRACES_SAMPLER", "sometimes"),
                ("OTEL_BSP_MAX_QUEUE_SIZE", "many"),
            ],
            &FromConfig::default(),
        )
        .expect_err("three problems");
        let sources: Vec<&str> = problems.0.iter().map(|p| p.source.as_str()).collect();
        assert!(sources.contains(&"OTEL_TRACES_SAMPLER"), "{sources:?}");
        assert!(sources.contains(&"OTEL_BSP_MAX_QUEUE_SIZE"), "{sources:?}");
        assert!(
            sources.contains(&"OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{sources:?}"
        );
        let text = problems.to_string();
        assert!(
            text.starts_with("error: ") && text.contains("\nhint: "),
            "{text}"
        );
    }
}
