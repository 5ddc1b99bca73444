//! # A small OTLP/HTTP receiver — the collector the telemetry tests export to
//!
//! Role: a real HTTP server on 127.0.0.1 (an ephemeral port) that accepts what an OpenTelemetry
//! SDK sends over OTLP/HTTP: `POST /v1/traces` and `POST /v1/metrics`, each in protobuf
//! (`application/x-protobuf`) or JSON (`application/json`, the OTLP JSON encoding: hex trace and
//! span ids, 64-bit integers as strings), decoded with opentelemetry-proto's own types (prost for
//! protobuf, its `with-serde` derives for JSON). `opc run` points `OTEL_EXPORTER_OTLP_ENDPOINT` at
//! [`OtlpReceiver::endpoint`].
//!
//! What it keeps, for the tests to assert on:
//! - every body as received, byte for byte ([`OtlpReceiver::raw_bytes_contain`]), so a test can
//!   prove a real value of personal data never left the process in any form;
//! - the decoded spans ([`ReceivedSpan`]: name, ids as lower-case hex, kind, attributes as a map,
//!   events) and metrics ([`ReceivedMetric`]: name and each data point's attributes and value);
//! - every request ([`Post`]) and anything it could not read ([`OtlpReceiver::errors`]).
//!
//! How it answers is a [`Mode`] a test may switch at any time: accept (200 with the empty export
//! response in the request's encoding), fail (an error status, as a collector that is down behind a
//! proxy), or hang (never answer, as a collector that is stuck), for the collector-down cases.
//!
//! Invariants:
//! - only the loopback interface is bound;
//! - a request is recorded before it is answered (or left hanging), so once the exporter has its
//!   answer the receiver already holds what it sent; a test that sees the process exit after a
//!   flush therefore sees the flushed data;
//! - a hanging request ends when the receiver is dropped, never later: nothing outlives the test;
//! - a body it cannot decode is kept raw, recorded as an error and answered 400; a compressed body
//!   (`content-encoding` other than identity) is refused the same way, since its raw bytes could
//!   not show a leaked value.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
pub use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::wait;

/// Largest body accepted: an SDK's batch of a few thousand spans with captured content stays far
/// below this, and axum's default (2 MB) could refuse a legitimate batch.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// How often the waits look again.
const POLL: Duration = Duration::from_millis(20);

/// How the receiver answers exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// 200 with the empty export response.
    Accept,
    /// This status (e.g. 503), with an empty body: the collector refuses every export.
    Fail(u16),
    /// Never answer (until the receiver is dropped): the collector is stuck.
    Hang,
}

/// The two OTLP signals the receiver takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    /// `POST /v1/traces`.
    Traces,
    /// `POST /v1/metrics`.
    Metrics,
}

/// One request received, whatever became of it.
#[derive(Clone, Debug)]
pub struct Post {
    /// Which endpoint.
    pub signal: Signal,
    /// Its `content-type` (empty when it had none).
    pub content_type: String,
    /// How many bytes its body had.
    pub len: usize,
    /// The mode it was answered in.
    pub mode: Mode,
}

/// A span as received: ids as lower-case hex (as in a `traceparent`), attributes as JSON values
/// (strings, booleans, integers and doubles as themselves, arrays as arrays).
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    /// The span's name (`invoke_agent vp-eng`).
    pub name: String,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// 16 hex digits, or `None` for a root span.
    pub parent_span_id: Option<String>,
    /// Its kind (`Unspecified` when the number is unknown).
    pub kind: SpanKind,
    /// When it started, in Unix nanoseconds (to order sibling spans).
    pub start_ns: u64,
    /// When it ended, in Unix nanoseconds.
    pub end_ns: u64,
    /// Its attributes by key.
    pub attributes: BTreeMap<String, Value>,
    /// Its events, in order.
    pub events: Vec<ReceivedEvent>,
    /// The instrumentation scope that produced it.
    pub scope: String,
    /// Its resource's attributes (`service.name` …).
    pub resource: BTreeMap<String, Value>,
}

impl ReceivedSpan {
    /// The attribute `key`, or `None`.
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    /// The attribute `key` as a string, or `None` when it is missing or not a string.
    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(Value::as_str)
    }

    /// The attribute `key` as an integer, or `None` when it is missing or not an integer.
    pub fn int_attr(&self, key: &str) -> Option<i64> {
        self.attr(key).and_then(Value::as_i64)
    }

    /// Whether it is the child of `parent` (same trace, and `parent`'s span id as its parent).
    pub fn is_child_of(&self, parent: &ReceivedSpan) -> bool {
        self.trace_id == parent.trace_id
            && self.parent_span_id.as_deref() == Some(parent.span_id.as_str())
    }
}

/// A span event as received.
#[derive(Clone, Debug)]
pub struct ReceivedEvent {
    /// Its name (`retry`).
    pub name: String,
    /// Its attributes by key.
    pub attributes: BTreeMap<String, Value>,
}

/// A metric as received in one export: its name, kind and data points.
#[derive(Clone, Debug)]
pub struct ReceivedMetric {
    /// `gen_ai.client.token.usage` …
    pub name: String,
    /// Its unit (`{token}`, `s` …).
    pub unit: String,
    /// `gauge`, `sum`, `histogram`, `exponential_histogram`, `summary`, or `none`.
    pub kind: &'static str,
    /// Each data point's attributes and value.
    pub points: Vec<ReceivedPoint>,
}

/// One data point of a [`ReceivedMetric`].
#[derive(Clone, Debug)]
pub struct ReceivedPoint {
    /// Its attributes by key.
    pub attributes: BTreeMap<String, Value>,
    /// Gauges and sums: the number; histograms and summaries: `{"count": n, "sum": s}`.
    pub value: Value,
}

#[derive(Default)]
struct Recorded {
    raw: Vec<Vec<u8>>,
    posts: Vec<Post>,
    spans: Vec<ReceivedSpan>,
    metrics: Vec<ReceivedMetric>,
    errors: Vec<String>,
}

struct Shared {
    recorded: Mutex<Recorded>,
    mode: Mutex<Mode>,
    /// Turns true when the receiver is dropped, ending every hanging request.
    closed: watch::Receiver<bool>,
}

impl Shared {
    fn recorded(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn mode(&self) -> Mode {
        *self.mode.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running receiver; it stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    close: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.close.send(true);
        self.task.abort();
    }
}

impl OtlpReceiver {
    /// Start on 127.0.0.1 with an ephemeral port, accepting every export.
    pub async fn start() -> OtlpReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("OTLP receiver: bind 127.0.0.1:0: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("OTLP receiver: local address: {e}"));
        let (close, closed) = watch::channel(false);
        let shared = Arc::new(Shared {
            recorded: Mutex::new(Recorded::default()),
            mode: Mutex::new(Mode::Accept),
            closed,
        });
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OtlpReceiver {
            addr,
            shared,
            close,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT` (the SDK appends
    /// `/v1/traces` and `/v1/metrics`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answer from now on as `mode` says.
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap_or_else(|p| p.into_inner()) = mode;
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.shared.recorded().spans.clone()
    }

    /// Every metric export received so far (one entry per metric per export), in arrival order.
    pub fn metrics(&self) -> Vec<ReceivedMetric> {
        self.shared.recorded().metrics.clone()
    }

    /// The names of the metrics received so far.
    pub fn metric_names(&self) -> BTreeSet<String> {
        self.shared
            .recorded()
            .metrics
            .iter()
            .map(|m| m.name.clone())
            .collect()
    }

    /// Every request received so far.
    pub fn posts(&self) -> Vec<Post> {
        self.shared.recorded().posts.clone()
    }

    /// What the receiver could not read (empty when every body decoded).
    pub fn errors(&self) -> Vec<String> {
        self.shared.recorded().errors.clone()
    }

    /// Whether `needle` occurs in any body received, as sent (protobuf or JSON).
    pub fn raw_bytes_contain(&self, needle: &[u8]) -> bool {
        if needle.is_empty() {
            return true;
        }
        self.shared
            .recorded()
            .raw
            .iter()
            .any(|body| body.windows(needle.len()).any(|w| w == needle))
    }

    /// How many bytes have been received in all.
    pub fn raw_len(&self) -> usize {
        self.shared.recorded().raw.iter().map(Vec::len).sum()
    }

    /// The first span received that `found` accepts, waiting up to `limit` for it; panics naming
    /// `what` and listing the spans received when none comes.
    pub async fn wait_for_span(
        &self,
        limit: Duration,
        what: &str,
        found: impl Fn(&ReceivedSpan) -> bool,
    ) -> ReceivedSpan {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(span) = self.shared.recorded().spans.iter().find(|s| found(s)) {
                return span.clone();
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "timed out after {limit:?} waiting for {what}; received {}",
                    span_names(&self.spans())
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Wait up to `limit` until every metric in `names` has been received; panics naming those
    /// still missing.
    pub async fn wait_for_metrics(&self, limit: Duration, names: &[&str]) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let have = self.metric_names();
            let missing: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !have.contains(*n))
                .collect();
            if missing.is_empty() {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "timed out after {limit:?} waiting for the metrics {missing:?}; received: {have:?}"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Wait up to `limit` until at least `count` requests have come to `signal`'s endpoint; panics
    /// saying how many came.
    pub async fn wait_for_posts(&self, limit: Duration, signal: Signal, count: usize) {
        let what = format!("{count} exports to {signal:?}");
        wait::wait_until(limit, &what, || {
            self.shared
                .recorded()
                .posts
                .iter()
                .filter(|p| p.signal == signal)
                .count()
                >= count
        })
        .await;
    }
}

/// The names of `spans`, one per line with their ids, for failure messages.
pub fn span_names(spans: &[ReceivedSpan]) -> String {
    let mut out = format!("{} spans", spans.len());
    for s in spans {
        out.push_str(&format!(
            "\n  {} [{:?}] trace {} span {} parent {}",
            s.name,
            s.kind,
            s.trace_id,
            s.span_id,
            s.parent_span_id.as_deref().unwrap_or("-")
        ));
    }
    out
}

/// The body's encoding, from its `content-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

fn encoding(headers: &HeaderMap) -> Result<Encoding, String> {
    let content_type = content_type(headers);
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        other => Err(format!("unsupported content-type {other:?}")),
    }
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Record the request and its raw body; decide how to answer. `Err` says why the body cannot be
/// read (answered 415).
fn receive(
    shared: &Shared,
    signal: Signal,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Mode, Encoding), String> {
    let mode = shared.mode();
    let mut recorded = shared.recorded();
    recorded.raw.push(body.to_vec());
    recorded.posts.push(Post {
        signal,
        content_type: content_type(headers),
        len: body.len(),
        mode,
    });
    let coding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity");
    if !coding.eq_ignore_ascii_case("identity") {
        let error = format!(
            "{signal:?}: content-encoding {coding:?} refused (the raw bytes must be searchable)"
        );
        recorded.errors.push(error.clone());
        return Err(error);
    }
    match encoding(headers) {
        Ok(encoding) => Ok((mode, encoding)),
        Err(error) => {
            let error = format!("{signal:?}: {error}");
            recorded.errors.push(error.clone());
            Err(error)
        }
    }
}

/// The answer in `mode`, after the body was recorded: `ok` is the empty export response.
async fn answer(shared: &Shared, mode: Mode, encoding: Encoding, ok: Vec<u8>) -> Response {
    match mode {
        Mode::Accept => {
            let content_type = match encoding {
                Encoding::Protobuf => "application/x-protobuf",
                Encoding::Json => "application/json",
            };
            (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], ok).into_response()
        }
        Mode::Fail(status) => StatusCode::from_u16(status)
            .unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            .into_response(),
        Mode::Hang => {
            let mut closed = shared.closed.clone();
            let _ = closed.wait_for(|closed| *closed).await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    }
}

fn decode<T: Message + Default + serde::de::DeserializeOwned>(
    encoding: Encoding,
    body: &[u8],
) -> Result<T, String> {
    match encoding {
        Encoding::Protobuf => T::decode(body).map_err(|e| format!("protobuf: {e}")),
        Encoding::Json => serde_json::from_slice(body).map_err(|e| format!("OTLP JSON: {e}")),
    }
}

async fn traces(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let (mode, encoding) = match receive(&shared, Signal::Traces, &headers, &body) {
        Ok(received) => received,
        Err(refusal) => return (StatusCode::UNSUPPORTED_MEDIA_TYPE, refusal).into_response(),
    };
    match decode::<ExportTraceServiceRequest>(encoding, &body) {
        Ok(request) => shared.recorded().spans.extend(spans_of(request)),
        Err(error) => {
            let error = format!("traces: {error}");
            shared.recorded().errors.push(error.clone());
            return (StatusCode::BAD_REQUEST, error).into_response();
        }
    }
    let ok = match encoding {
        Encoding::Protobuf => ExportTraceServiceResponse::default().encode_to_vec(),
        Encoding::Json => b"{}".to_vec(),
    };
    answer(&shared, mode, encoding, ok).await
}

async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let (mode, encoding) = match receive(&shared, Signal::Metrics, &headers, &body) {
        Ok(received) => received,
        Err(refusal) => return (StatusCode::UNSUPPORTED_MEDIA_TYPE, refusal).into_response(),
    };
    match decode::<ExportMetricsServiceRequest>(encoding, &body) {
        Ok(request) => shared.recorded().metrics.extend(metrics_of(request)),
        Err(error) => {
            let error = format!("metrics: {error}");
            shared.recorded().errors.push(error.clone());
            return (StatusCode::BAD_REQUEST, error).into_response();
        }
    }
    let ok = match encoding {
        Encoding::Protobuf => ExportMetricsServiceResponse::default().encode_to_vec(),
        Encoding::Json => b"{}".to_vec(),
    };
    answer(&shared, mode, encoding, ok).await
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn any_value(value: Option<&AnyValue>) -> Value {
    let Some(value) = value.and_then(|v| v.value.as_ref()) else {
        return Value::Null;
    };
    match value {
        any_value::Value::StringValue(s) => json!(s),
        any_value::Value::BoolValue(b) => json!(b),
        any_value::Value::IntValue(i) => json!(i),
        any_value::Value::DoubleValue(d) => json!(d),
        any_value::Value::ArrayValue(array) => {
            Value::Array(array.values.iter().map(|v| any_value(Some(v))).collect())
        }
        any_value::Value::KvlistValue(list) => Value::Object(
            list.values
                .iter()
                .map(|kv| (kv.key.clone(), any_value(kv.value.as_ref())))
                .collect(),
        ),
        any_value::Value::BytesValue(bytes) => json!({ "bytes": hex(bytes) }),
        any_value::Value::StringValueStrindex(i) => json!({ "string_index": i }),
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, Value> {
    list.iter()
        .map(|kv| (kv.key.clone(), any_value(kv.value.as_ref())))
        .collect()
}

fn spans_of(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            let scope = scope_spans.scope.map(|s| s.name).unwrap_or_default();
            for span in scope_spans.spans {
                out.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    kind: SpanKind::try_from(span.kind).unwrap_or(SpanKind::Unspecified),
                    start_ns: span.start_time_unix_nano,
                    end_ns: span.end_time_unix_nano,
                    attributes: attributes(&span.attributes),
                    events: span
                        .events
                        .iter()
                        .map(|e| ReceivedEvent {
                            name: e.name.clone(),
                            attributes: attributes(&e.attributes),
                        })
                        .collect(),
                    scope: scope.clone(),
                    resource: resource.clone(),
                });
            }
        }
    }
    out
}

fn number(value: Option<&number_data_point::Value>) -> Value {
    match value {
        Some(number_data_point::Value::AsInt(i)) => json!(i),
        Some(number_data_point::Value::AsDouble(d)) => json!(d),
        None => Value::Null,
    }
}

fn metrics_of(request: ExportMetricsServiceRequest) -> Vec<ReceivedMetric> {
    let mut out = Vec::new();
    for resource_metrics in request.resource_metrics {
        for scope_metrics in resource_metrics.scope_metrics {
            for m in scope_metrics.metrics {
                let (kind, points) = match &m.data {
                    Some(metric::Data::Gauge(g)) => (
                        "gauge",
                        g.data_points
                            .iter()
                            .map(|p| ReceivedPoint {
                                attributes: attributes(&p.attributes),
                                value: number(p.value.as_ref()),
                            })
                            .collect(),
                    ),
                    Some(metric::Data::Sum(s)) => (
                        "sum",
                        s.data_points
                            .iter()
                            .map(|p| ReceivedPoint {
                                attributes: attributes(&p.attributes),
                                value: number(p.value.as_ref()),
                            })
                            .collect(),
                    ),
                    Some(metric::Data::Histogram(h)) => (
                        "histogram",
                        h.data_points
                            .iter()
                            .map(|p| ReceivedPoint {
                                attributes: attributes(&p.attributes),
                                value: json!({ "count": p.count, "sum": p.sum }),
                            })
                            .collect(),
                    ),
                    Some(metric::Data::ExponentialHistogram(h)) => (
                        "exponential_histogram",
                        h.data_points
                            .iter()
                            .map(|p| ReceivedPoint {
                                attributes: attributes(&p.attributes),
                                value: json!({ "count": p.count, "sum": p.sum }),
                            })
                            .collect(),
                    ),
                    Some(metric::Data::Summary(s)) => (
                        "summary",
                        s.data_points
                            .iter()
                            .map(|p| ReceivedPoint {
                                attributes: attributes(&p.attributes),
                                value: json!({ "count": p.count, "sum": p.sum }),
                            })
                            .collect(),
                    ),
                    None => ("none", Vec::new()),
                };
                out.push(ReceivedMetric {
                    name: m.name,
                    unit: m.unit,
                    kind,
                    points,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! The receiver itself, over HTTP on 127.0.0.1: exports built from opentelemetry-proto's types,
    //! sent in protobuf and in JSON, come back as the spans and metrics they carry; the OTLP JSON of
    //! the specification's example (hex ids, integers as strings, kinds as numbers) decodes too; the
    //! fail and hang modes answer as they say.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, InstrumentationScope};
    use opentelemetry_proto::tonic::metrics::v1::{
        Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::span::Event;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    use super::*;

    const TRACE: [u8; 16] = [
        0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47,
        0x36,
    ];
    const SPAN: [u8; 8] = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];
    const PARENT: [u8; 8] = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];

    fn kv(key: &str, value: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.to_string(),
            value: Some(AnyValue { value: Some(value) }),
            ..Default::default()
        }
    }

    fn string(s: &str) -> any_value::Value {
        any_value::Value::StringValue(s.to_string())
    }

    fn trace_export() -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", string("opc"))],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "opc".to_string(),
                        ..Default::default()
                    }),
                    spans: vec![Span {
                        trace_id: TRACE.to_vec(),
                        span_id: SPAN.to_vec(),
                        parent_span_id: PARENT.to_vec(),
                        name: "chat test-model".to_string(),
                        kind: SpanKind::Client as i32,
                        start_time_unix_nano: 1_700_000_000_000_000_000,
                        end_time_unix_nano: 1_700_000_000_500_000_000,
                        attributes: vec![
                            kv("gen_ai.provider.name", string("anthropic")),
                            kv("gen_ai.usage.input_tokens", any_value::Value::IntValue(42)),
                            kv("opc.privacy.ner_ready", any_value::Value::BoolValue(true)),
                            kv("ratio", any_value::Value::DoubleValue(0.5)),
                            kv(
                                "gen_ai.response.finish_reasons",
                                any_value::Value::ArrayValue(ArrayValue {
                                    values: vec![AnyValue {
                                        value: Some(string("stop")),
                                    }],
                                }),
                            ),
                        ],
                        events: vec![Event {
                            name: "retry".to_string(),
                            attributes: vec![kv("attempt", any_value::Value::IntValue(2))],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn metrics_export() -> ExportMetricsServiceRequest {
        let point = |value| NumberDataPoint {
            attributes: vec![kv("outcome", string("completed"))],
            time_unix_nano: 1_700_000_000_000_000_000,
            value: Some(number_data_point::Value::AsInt(value)),
            ..Default::default()
        };
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![
                        Metric {
                            name: "opc.requests".to_string(),
                            unit: "{request}".to_string(),
                            data: Some(metric::Data::Sum(Sum {
                                data_points: vec![point(3)],
                                aggregation_temporality: 2,
                                is_monotonic: true,
                            })),
                            ..Default::default()
                        },
                        Metric {
                            name: "gen_ai.client.token.usage".to_string(),
                            unit: "{token}".to_string(),
                            data: Some(metric::Data::Histogram(Histogram {
                                data_points: vec![HistogramDataPoint {
                                    attributes: vec![kv("gen_ai.token.type", string("input"))],
                                    time_unix_nano: 1_700_000_000_000_000_000,
                                    count: 2,
                                    sum: Some(84.0),
                                    ..Default::default()
                                }],
                                aggregation_temporality: 2,
                            })),
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    async fn send(receiver: &OtlpReceiver, path: &str, content_type: &str, body: Vec<u8>) -> u16 {
        crate::http_client()
            .post(format!("{}{path}", receiver.endpoint()))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    fn check_span(span: &ReceivedSpan) {
        assert_eq!(span.name, "chat test-model");
        assert_eq!(span.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span.span_id, "00f067aa0ba902b7");
        assert_eq!(span.parent_span_id.as_deref(), Some("1122334455667788"));
        assert_eq!(span.kind, SpanKind::Client);
        assert_eq!(span.str_attr("gen_ai.provider.name"), Some("anthropic"));
        assert_eq!(span.int_attr("gen_ai.usage.input_tokens"), Some(42));
        assert_eq!(span.attr("opc.privacy.ner_ready"), Some(&json!(true)));
        assert_eq!(span.attr("ratio"), Some(&json!(0.5)));
        assert_eq!(
            span.attr("gen_ai.response.finish_reasons"),
            Some(&json!(["stop"]))
        );
        assert_eq!(span.events.len(), 1);
        assert_eq!(span.events[0].name, "retry");
        assert_eq!(span.events[0].attributes["attempt"], json!(2));
        assert_eq!(span.scope, "opc");
        assert_eq!(span.resource["service.name"], json!("opc"));
    }

    fn check_metrics(receiver: &OtlpReceiver) {
        let names: Vec<String> = receiver.metric_names().into_iter().collect();
        assert_eq!(names, ["gen_ai.client.token.usage", "opc.requests"]);
        let metrics = receiver.metrics();
        let requests = metrics.iter().find(|m| m.name == "opc.requests").unwrap();
        assert_eq!(requests.kind, "sum");
        assert_eq!(requests.points[0].attributes["outcome"], json!("completed"));
        assert_eq!(requests.points[0].value, json!(3));
        let usage = metrics
            .iter()
            .find(|m| m.name == "gen_ai.client.token.usage")
            .unwrap();
        assert_eq!(usage.kind, "histogram");
        assert_eq!(usage.unit, "{token}");
        assert_eq!(usage.points[0].value, json!({"count": 2, "sum": 84.0}));
    }

    #[tokio::test]
    async fn a_protobuf_export_is_decoded_and_kept_raw() {
        let receiver = OtlpReceiver::start().await;
        let status = send(
            &receiver,
            "/v1/traces",
            "application/x-protobuf",
            trace_export().encode_to_vec(),
        )
        .await;
        assert_eq!(status, 200);
        let span = receiver
            .wait_for_span(wait::WAIT, "the chat span", |s| s.name.starts_with("chat"))
            .await;
        check_span(&span);
        assert!(receiver.raw_bytes_contain(b"anthropic"));
        assert!(!receiver.raw_bytes_contain(b"openai"));

        let status = send(
            &receiver,
            "/v1/metrics",
            "application/x-protobuf",
            metrics_export().encode_to_vec(),
        )
        .await;
        assert_eq!(status, 200);
        check_metrics(&receiver);
        assert_eq!(receiver.posts().len(), 2);
        assert!(receiver.errors().is_empty(), "{:?}", receiver.errors());
    }

    #[tokio::test]
    async fn a_json_export_is_decoded_with_hex_ids() {
        let receiver = OtlpReceiver::start().await;
        let body = serde_json::to_vec(&trace_export()).unwrap();
        // The OTLP JSON encoding, as the SDK's serializer writes it: hex ids, integers as strings.
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(
            text.contains("\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\""),
            "{text}"
        );
        assert!(text.contains("\"intValue\":\"42\""), "{text}");
        let status = send(&receiver, "/v1/traces", "application/json", body).await;
        assert_eq!(status, 200);
        check_span(&receiver.spans()[0]);

        let body = serde_json::to_vec(&metrics_export()).unwrap();
        let status = send(&receiver, "/v1/metrics", "application/json", body).await;
        assert_eq!(status, 200);
        check_metrics(&receiver);
        assert!(receiver.errors().is_empty(), "{:?}", receiver.errors());
    }

    /// The trace example of opentelemetry-proto (`examples/trace.json`), cut down: written by hand
    /// to the OTLP JSON rules, so the decoding is checked against the encoding, not only against
    /// its own serializer.
    #[tokio::test]
    async fn the_specifications_json_example_decodes() {
        let receiver = OtlpReceiver::start().await;
        let body = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"my.service"}}]},
          "scopeSpans":[{"scope":{"name":"my.library","version":"1.0.0"},"spans":[{
            "traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","parentSpanId":"EEE19B7EC3C1B173",
            "name":"I'm a server span","startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",
            "kind":2,"attributes":[{"key":"my.span.attr","value":{"stringValue":"some value"}},
            {"key":"n","value":{"intValue":"7"}},{"key":"m","value":{"intValue":8}}]}]}]}]}"#;
        let status = send(&receiver, "/v1/traces", "application/json", body.into()).await;
        assert_eq!(status, 200, "{:?}", receiver.errors());
        let span = &receiver.spans()[0];
        assert_eq!(span.trace_id, "5b8efff798038103d269b633813fc60c");
        assert_eq!(span.span_id, "eee19b7ec3c1b174");
        assert_eq!(span.parent_span_id.as_deref(), Some("eee19b7ec3c1b173"));
        assert_eq!(span.kind, SpanKind::Server);
        assert_eq!(span.str_attr("my.span.attr"), Some("some value"));
        assert_eq!(span.int_attr("n"), Some(7));
        assert_eq!(span.int_attr("m"), Some(8));
        assert_eq!(span.resource["service.name"], json!("my.service"));
    }

    #[tokio::test]
    async fn bad_bodies_are_refused_and_recorded() {
        let receiver = OtlpReceiver::start().await;
        let status = send(
            &receiver,
            "/v1/traces",
            "application/json",
            b"{nope".to_vec(),
        )
        .await;
        assert_eq!(status, 400);
        let status = send(&receiver, "/v1/traces", "text/plain", b"x".to_vec()).await;
        assert_eq!(status, 415);
        assert_eq!(receiver.errors().len(), 2, "{:?}", receiver.errors());
        assert!(receiver.raw_bytes_contain(b"{nope"));
        assert!(receiver.spans().is_empty());
    }

    #[tokio::test]
    async fn fail_and_hang_modes_answer_as_they_say() {
        let receiver = OtlpReceiver::start().await;
        receiver.set_mode(Mode::Fail(503));
        let body = trace_export().encode_to_vec();
        let status = send(
            &receiver,
            "/v1/traces",
            "application/x-protobuf",
            body.clone(),
        )
        .await;
        assert_eq!(status, 503);
        // Refused, but recorded: what was sent is still searchable.
        assert!(receiver.raw_bytes_contain(b"anthropic"));

        receiver.set_mode(Mode::Hang);
        let request = crate::http_client()
            .post(format!("{}/v1/traces", receiver.endpoint()))
            .header("content-type", "application/x-protobuf")
            .body(body)
            .timeout(Duration::from_millis(300))
            .send();
        let hung = request.await;
        assert!(hung.is_err_and(|e| e.is_timeout()));
        receiver.wait_for_posts(wait::WAIT, Signal::Traces, 2).await;
        let modes: Vec<Mode> = receiver.posts().iter().map(|p| p.mode).collect();
        assert_eq!(modes, [Mode::Fail(503), Mode::Hang]);
    }
}
