//! The SDK's pipelines, built from [`Settings`]: spans and metrics out over OTLP/HTTP.
//!
//! - spans: a batch span processor (the SDK's own thread; when its queue is full new spans are
//!   dropped, the recording thread never waits) and the OTLP/HTTP span exporter, behind the
//!   sampler; the `tracing` layer ([`Telemetry::layer`]) feeds it the spans of target
//!   [`crate::TARGET`] only;
//! - metrics: a periodic reader (its own thread) and the OTLP/HTTP metric exporter, cumulative;
//!   it becomes the global meter provider, which [`crate::metrics`] takes its instruments from;
//! - both carry one resource: `service.name` (`opc` unless `OTEL_SERVICE_NAME` or
//!   `OTEL_RESOURCE_ATTRIBUTES` say otherwise), `service.version`, the SDK's own attributes and
//!   [`crate::conventions::SCHEMA_URL`].
//!
//! Why the HTTP clients are built here, on a thread of their own: a `reqwest` blocking client
//! runs a small runtime of its own and panics when created or dropped on a tokio worker thread; the
//! binary may call [`install`] from anywhere, and [`Telemetry::shutdown`] (which drops the
//! clients) runs the same way. The process-wide rustls provider (ring) is installed first if
//! nothing has installed one yet, as every TLS client of OPC does.
//!
//! Invariant: nothing here blocks the engine: recording hands spans and measurements to the SDK's
//! threads, and [`Telemetry::shutdown`] returns within its timeout whatever the collector does.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

use crate::export::{Signal, Watch, Watched};
use crate::settings::{Export, Protocol, Sampler, Settings, shown_endpoint};

/// OPC's version, exported as `service.version` and the instrumentation scope's version.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Why the pipelines could not be built (a bad endpoint the settings did not catch, or no thread).
#[derive(Debug, thiserror::Error)]
#[error("cannot start the telemetry export: {0}")]
pub struct InstallError(String);

/// Why [`Telemetry::shutdown`] did not flush everything.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    /// The timeout passed first (the collector is slow or down); what was pending is dropped.
    #[error("what was pending was not sent within {}s: the collector is slow or down", .0.as_secs_f32())]
    TimedOut(Duration),
    /// The SDK reported a failure (usually the last export's: the collector refused or is down).
    #[error("what was pending may not all have been sent ({0})")]
    Failed(String),
}

/// The running pipelines. Keep it until the process stops cleanly, then call
/// [`Telemetry::shutdown`].
pub struct Telemetry {
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
    tracer: Option<SdkTracer>,
    description: String,
}

/// Build the pipelines `settings` ask for, make them the global providers and set content
/// capture. `Ok(None)` when telemetry is off: nothing is built and the instruments stay no-ops.
pub fn install(settings: &Settings) -> Result<Option<Telemetry>, InstallError> {
    crate::set_capture_content(settings.is_on() && settings.capture_content);
    if !settings.is_on() {
        return Ok(None);
    }
    let resource = resource(settings);
    let watch = Arc::new(Watch::default());

    let traces = settings.traces.as_ref().map(|export| {
        // The thread-based batch processor has no export timeout of its own: the request's is it.
        let timeout = export.timeout.min(settings.batch.export_timeout);
        (export, timeout)
    });
    let metrics = settings
        .metrics
        .as_ref()
        .map(|export| (export, export.timeout.min(settings.metric_timeout)));
    let (trace_client, metric_client) = clients(
        traces.map(|(_, timeout)| timeout),
        metrics.map(|(_, timeout)| timeout),
    )?;

    let tracer_provider = match (traces, trace_client) {
        (Some((export, timeout)), Some(client)) => {
            let exporter = http_builder(
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_http_client(client),
                export,
                timeout,
            )
            .build()
            .map_err(|e| InstallError(e.to_string()))?;
            let exporter = Watched::new(
                exporter,
                Signal::Traces,
                shown_endpoint(&export.endpoint),
                watch.clone(),
            );
            let batch = &settings.batch;
            let processor = BatchSpanProcessor::builder(exporter)
                .with_batch_config(
                    BatchConfigBuilder::default()
                        .with_max_queue_size(batch.max_queue_size)
                        .with_max_export_batch_size(batch.max_export_batch_size)
                        .with_scheduled_delay(batch.schedule_delay)
                        .build(),
                )
                .build();
            Some(
                SdkTracerProvider::builder()
                    .with_span_processor(processor)
                    .with_sampler(sampler(settings.sampler))
                    .with_resource(resource.clone())
                    .build(),
            )
        }
        _ => None,
    };
    let meter_provider = match (metrics, metric_client) {
        (Some((export, timeout)), Some(client)) => {
            let exporter = http_builder(
                opentelemetry_otlp::MetricExporter::builder()
                    .with_http()
                    .with_http_client(client),
                export,
                timeout,
            )
            .with_temporality(Temporality::Cumulative)
            .build()
            .map_err(|e| InstallError(e.to_string()))?;
            let exporter = Watched::new(
                exporter,
                Signal::Metrics,
                shown_endpoint(&export.endpoint),
                watch,
            );
            let reader = PeriodicReader::builder(exporter)
                .with_interval(settings.metric_interval)
                .build();
            Some(
                SdkMeterProvider::builder()
                    .with_reader(reader)
                    .with_resource(resource)
                    .build(),
            )
        }
        _ => None,
    };
    if let Some(provider) = &meter_provider {
        opentelemetry::global::set_meter_provider(provider.clone());
    }
    if let Some(provider) = &tracer_provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    Ok(Some(Telemetry::new(
        tracer_provider,
        meter_provider,
        describe(settings),
    )))
}

impl Telemetry {
    /// A handle on pipelines built elsewhere (the unit tests' in-memory exporters).
    pub(crate) fn new(
        tracer_provider: Option<SdkTracerProvider>,
        meter_provider: Option<SdkMeterProvider>,
        description: String,
    ) -> Telemetry {
        let tracer = tracer_provider.as_ref().map(|provider| {
            provider.tracer_with_scope(
                InstrumentationScope::builder("opc")
                    .with_version(VERSION)
                    .with_schema_url(crate::conventions::SCHEMA_URL)
                    .build(),
            )
        });
        Telemetry {
            tracer_provider,
            meter_provider,
            tracer,
            description,
        }
    }

    /// The `tracing` layer that turns spans of target [`crate::TARGET`] into OpenTelemetry spans,
    /// or `None` when traces are off. Its own filter takes that target only, so no log event
    /// (which may name a command or a path) is ever exported; an event of that target (the
    /// instrumentation's own, e.g. `retry`) becomes a span event.
    pub fn layer<S>(&self) -> Option<Box<dyn Layer<S> + Send + Sync + 'static>>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.tracer.clone()?;
        Some(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                // The spans carry the conventions' attributes; the source line, thread, target
                // and busy/idle times would be noise in every span, and cost on every enter.
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_tracked_inactivity(false)
                // Parents come from `tracing`'s own span stack (and `carry` for stored ones), so
                // the OpenTelemetry context need not be attached on every enter: an instrumented
                // future enters its whole chain of spans at each poll, and attaching there cost
                // more engine CPU than building the spans (the engine bench's telemetry section).
                .with_context_activation(false)
                .with_filter(filter_fn(|meta| meta.target() == crate::TARGET))
                .boxed(),
        )
    }

    /// One line for the start-up log: where each signal goes (no credentials, no query), the
    /// encoding, the service name and whether content is captured.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Flush what is pending and stop the pipelines; returns within `timeout` (plus a thread's
    /// start) whatever the collector does. Runs on a thread of its own: the exporters' HTTP
    /// clients must not be dropped on an async runtime's thread.
    pub fn shutdown(self, timeout: Duration) -> Result<(), ShutdownError> {
        let (done, finished) = mpsc::channel();
        let Telemetry {
            tracer_provider,
            meter_provider,
            tracer,
            ..
        } = self;
        let spawned = std::thread::Builder::new()
            .name("telemetry-shutdown".into())
            .spawn(move || {
                drop(tracer);
                let mut errors = Vec::new();
                if let Some(provider) = tracer_provider
                    && let Err(e) = provider.shutdown_with_timeout(timeout)
                {
                    errors.push(e.to_string());
                }
                if let Some(provider) = meter_provider
                    && let Err(e) = provider.shutdown_with_timeout(timeout)
                {
                    errors.push(e.to_string());
                }
                let _ = done.send(errors);
            });
        if let Err(e) = spawned {
            return Err(ShutdownError::Failed(format!("no thread to flush on: {e}")));
        }
        match finished.recv_timeout(timeout) {
            Ok(errors) if errors.is_empty() => Ok(()),
            Ok(errors) => Err(ShutdownError::Failed(errors.join("; "))),
            Err(_) => Err(ShutdownError::TimedOut(timeout)),
        }
    }
}

/// The start-up line's text.
fn describe(settings: &Settings) -> String {
    let part = |what: &str, export: &Option<Export>| {
        export.as_ref().map(|e| {
            format!(
                "{what} to {} ({})",
                shown_endpoint(&e.endpoint),
                e.protocol.as_str()
            )
        })
    };
    let parts: Vec<String> = [
        part("traces", &settings.traces),
        part("metrics", &settings.metrics),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!(
        "telemetry on: {}; service.name {}; message content capture {}",
        parts.join(", "),
        settings.service_name,
        if settings.capture_content {
            "on (masked text only)"
        } else {
            "off"
        }
    )
}

/// The resource both signals carry.
fn resource(settings: &Settings) -> Resource {
    Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attribute(KeyValue::new("service.version", VERSION))
        .with_attributes(
            settings
                .resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(settings.service_name.clone())
        .with_schema_url(Vec::<KeyValue>::new(), crate::conventions::SCHEMA_URL)
        .build()
}

fn sampler(sampler: Sampler) -> opentelemetry_sdk::trace::Sampler {
    use opentelemetry_sdk::trace::Sampler as Sdk;
    match sampler {
        Sampler::AlwaysOn => Sdk::AlwaysOn,
        Sampler::AlwaysOff => Sdk::AlwaysOff,
        Sampler::TraceIdRatio(ratio) => Sdk::TraceIdRatioBased(ratio),
        Sampler::ParentBasedAlwaysOn => Sdk::ParentBased(Box::new(Sdk::AlwaysOn)),
        Sampler::ParentBasedAlwaysOff => Sdk::ParentBased(Box::new(Sdk::AlwaysOff)),
        Sampler::ParentBasedTraceIdRatio(ratio) => {
            Sdk::ParentBased(Box::new(Sdk::TraceIdRatioBased(ratio)))
        }
    }
}

/// Endpoint, encoding, timeout and headers on an OTLP/HTTP exporter builder. These override the
/// exporter's own reading of the variables, so what runs is what [`Settings`] says.
fn http_builder<B: WithExportConfig + WithHttpConfig>(
    builder: B,
    export: &Export,
    timeout: Duration,
) -> B {
    let protocol = match export.protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::Protocol::HttpBinary,
        Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
    };
    // The builder percent-decodes header values again; ours are decoded already, so a `%` in
    // one is escaped to survive that.
    let headers = export
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.replace('%', "%25")))
        .collect();
    builder
        .with_endpoint(export.endpoint.clone())
        .with_protocol(protocol)
        .with_timeout(timeout)
        .with_headers(headers)
}

type Client = reqwest::blocking::Client;

/// The blocking HTTP clients for traces and metrics, each with its signal's timeout, built on a
/// plain thread (see the module doc).
fn clients(
    traces: Option<Duration>,
    metrics: Option<Duration>,
) -> Result<(Option<Client>, Option<Client>), InstallError> {
    let build = move || -> Result<(Option<Client>, Option<Client>), String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = |timeout: Option<Duration>| {
            timeout
                .map(|timeout| {
                    Client::builder()
                        .timeout(timeout)
                        .build()
                        .map_err(|e| format!("cannot build the HTTP client: {e}"))
                })
                .transpose()
        };
        Ok((client(traces)?, client(metrics)?))
    };
    std::thread::Builder::new()
        .name("telemetry-client".into())
        .spawn(build)
        .map_err(|e| InstallError(format!("no thread to build the HTTP client on: {e}")))?
        .join()
        .map_err(|_| InstallError("building the HTTP client panicked".into()))?
        .map_err(InstallError)
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanId, TraceId};
    use opentelemetry_sdk::trace::InMemorySpanExporter;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// A handle whose spans land in memory, as they end.
    fn in_memory() -> (Telemetry, InMemorySpanExporter) {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        (
            Telemetry::new(Some(provider), None, String::new()),
            exporter,
        )
    }

    #[test]
    fn only_spans_of_the_export_target_are_exported_and_log_events_never() {
        let (telemetry, exporter) = in_memory();
        let subscriber = tracing_subscriber::registry().with(telemetry.layer());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                target: crate::TARGET,
                "invoke_agent",
                otel.name = "invoke_agent vp-eng",
                gen_ai.agent.name = "vp-eng",
            );
            let _entered = span.enter();
            tracing::warn!(path = "/home/someone/secret.txt", "a log event");
            tracing::info!(target: crate::TARGET, "retry");
            tracing::info_span!("internal_work").in_scope(|| {
                tracing::info_span!(target: crate::TARGET, "execute_tool", otel.name = "execute_tool Bash")
                    .in_scope(|| {});
            });
        });
        let spans = exporter.get_finished_spans().expect("spans");
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names, ["execute_tool Bash", "invoke_agent vp-eng"]);
        let agent = &spans[1];
        assert!(
            agent
                .attributes
                .iter()
                .any(|kv| kv.key.as_str() == "gen_ai.agent.name" && kv.value.as_str() == "vp-eng")
        );
        let events: Vec<&str> = agent.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(events, ["retry"], "a log event must not be exported");
        let exported = format!("{spans:?}");
        assert!(!exported.contains("secret.txt") && !exported.contains("a log event"));
        // The tool's span skips the unexported span between them: its parent is the agent's.
        assert_eq!(spans[0].parent_span_id, agent.span_context.span_id());
        assert_eq!(
            spans[0].instrumentation_scope.schema_url(),
            Some(crate::conventions::SCHEMA_URL)
        );
    }

    #[test]
    fn a_carried_traceparent_keeps_the_trace_and_the_parent() {
        let (telemetry, exporter) = in_memory();
        let subscriber = tracing_subscriber::registry().with(telemetry.layer());
        let carried = tracing::subscriber::with_default(subscriber, || {
            let parent = tracing::info_span!(target: crate::TARGET, "delegate", otel.name = "execute_tool delegate");
            let carried = crate::carry::of(&parent).expect("an exported span is carried");
            drop(parent);
            // Later (another task, another process): the child adopts the stored context.
            let child = tracing::info_span!(target: crate::TARGET, "invoke_agent", otel.name = "invoke_agent vp-eng");
            crate::carry::adopt(&child, Some(&carried));
            child.in_scope(|| {});
            carried
        });
        let spans = exporter.get_finished_spans().expect("spans");
        let parent = spans
            .iter()
            .find(|s| s.name == "execute_tool delegate")
            .expect("parent");
        let child = spans
            .iter()
            .find(|s| s.name == "invoke_agent vp-eng")
            .expect("child");
        assert_ne!(parent.span_context.trace_id(), TraceId::INVALID);
        assert_eq!(
            child.span_context.trace_id(),
            parent.span_context.trace_id()
        );
        assert_eq!(child.parent_span_id, parent.span_context.span_id());
        assert_ne!(child.parent_span_id, SpanId::INVALID);
        assert!(carried.contains(&parent.span_context.trace_id().to_string()));
    }

    #[test]
    fn off_builds_nothing_and_the_description_hides_credentials() {
        assert!(install(&Settings::off()).expect("off").is_none());
        assert!(!crate::capture_content());
        let mut settings = Settings::off();
        settings.traces = Some(Export {
            endpoint: "https://user:pw@api.example.com/v1/traces?key=k".into(),
            protocol: Protocol::HttpJson,
            headers: [("x-api-key".to_string(), "k".to_string())].into(),
            timeout: Duration::from_secs(1),
        });
        let line = describe(&settings);
        assert_eq!(
            line,
            "telemetry on: traces to https://api.example.com/v1/traces (http/json); service.name opc; message content capture off"
        );
    }
}
