//! The exporters, watched: a collector that is down or slow is reported once, not once per batch.
//!
//! Why: the SDK exports from its own threads every few seconds; with its internal logs off (no
//! `internal-logs` feature) a failure would be silent, and with them on it would be one line per
//! batch. [`Watched`] wraps the OTLP span and metric exporters and tells a shared [`Watch`] how each
//! export went: the first failure logs one warning in the ordinary logger, later failures are
//! quiet until exports succeed again, which logs one info line.
//!
//! Invariants: the wrapper changes no result (a failed batch is still dropped by the SDK, after
//! the request's timeout); messages name the endpoint without credentials or query, and the
//! error as the exporter gives it (which never holds a header or a response body).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// Which exporter reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    fn bit(self) -> u8 {
        match self {
            Signal::Traces => 1,
            Signal::Metrics => 2,
        }
    }
}

/// Whether exports are failing, shared by the exporters of one process: a collector that is down
/// fails both, and is still one warning.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// One bit per signal whose last export failed.
    failing: Mutex<u8>,
}

impl Watch {
    /// Note how an export to `endpoint` (as shown) went; logs on the transitions only.
    pub(crate) fn record(&self, signal: Signal, endpoint: &str, result: &OTelSdkResult) {
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        let before = *failing;
        match result {
            Err(error) => {
                *failing |= signal.bit();
                if before == 0 {
                    tracing::warn!(
                        "telemetry export to {endpoint} failed: {error}; further failures are not logged until an export succeeds"
                    );
                }
            }
            Ok(()) => {
                *failing &= !signal.bit();
                if before != 0 && *failing == 0 {
                    tracing::info!("telemetry export to {endpoint} works again");
                }
            }
        }
    }
}

/// An exporter whose results are reported to a [`Watch`].
#[derive(Debug)]
pub(crate) struct Watched<E> {
    inner: E,
    signal: Signal,
    /// The endpoint as shown in logs (no credentials, no query).
    endpoint: String,
    watch: Arc<Watch>,
}

impl<E> Watched<E> {
    pub(crate) fn new(inner: E, signal: Signal, endpoint: String, watch: Arc<Watch>) -> Self {
        Watched {
            inner,
            signal,
            endpoint,
            watch,
        }
    }
}

impl<E: SpanExporter> SpanExporter for Watched<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.watch.record(self.signal, &self.endpoint, &result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: PushMetricExporter> PushMetricExporter for Watched<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        self.watch.record(self.signal, &self.endpoint, &result);
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use opentelemetry::trace::{Tracer, TracerProvider};
    use opentelemetry_sdk::error::OTelSdkError;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing::Level;
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

    use super::*;

    /// Counts the warnings and infos logged.
    #[derive(Clone, Default)]
    struct Count {
        warnings: Arc<AtomicUsize>,
        infos: Arc<AtomicUsize>,
    }

    impl<S: tracing::Subscriber> Layer<S> for Count {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            match *event.metadata().level() {
                Level::WARN => self.warnings.fetch_add(1, Ordering::SeqCst),
                Level::INFO => self.infos.fetch_add(1, Ordering::SeqCst),
                _ => 0,
            };
        }
    }

    /// A span exporter that fails while `down` is set.
    #[derive(Debug, Clone, Default)]
    struct Collector {
        down: Arc<AtomicBool>,
        exports: Arc<AtomicUsize>,
    }

    impl SpanExporter for Collector {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            self.exports.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                Err(OTelSdkError::InternalFailure(
                    "HTTP export failed: network error".into(),
                ))
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn a_failing_collector_is_one_warning_and_its_recovery_one_info() {
        let count = Count::default();
        let subscriber = tracing_subscriber::registry().with(count.clone());
        tracing::subscriber::with_default(subscriber, || {
            let collector = Collector::default();
            collector.down.store(true, Ordering::SeqCst);
            let watch = Arc::new(Watch::default());
            let exporter = Watched::new(
                collector.clone(),
                Signal::Traces,
                "http://127.0.0.1:4318/v1/traces".into(),
                watch.clone(),
            );
            // The simple processor exports each span as it ends: one export per span.
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter)
                .build();
            let tracer = provider.tracer("test");
            for _ in 0..5 {
                tracer.in_span("op", |_| {});
            }
            assert_eq!(collector.exports.load(Ordering::SeqCst), 5);
            assert_eq!(count.warnings.load(Ordering::SeqCst), 1);
            assert_eq!(count.infos.load(Ordering::SeqCst), 0);

            collector.down.store(false, Ordering::SeqCst);
            tracer.in_span("op", |_| {});
            tracer.in_span("op", |_| {});
            assert_eq!(count.infos.load(Ordering::SeqCst), 1);

            // A new outage is worth a new warning.
            collector.down.store(true, Ordering::SeqCst);
            tracer.in_span("op", |_| {});
            tracer.in_span("op", |_| {});
            assert_eq!(count.warnings.load(Ordering::SeqCst), 2);

            // Metrics failing too, while traces already fail: still quiet; recovery needs both.
            let failed: OTelSdkResult = Err(OTelSdkError::InternalFailure("down".into()));
            watch.record(Signal::Metrics, "http://x/v1/metrics", &failed);
            assert_eq!(count.warnings.load(Ordering::SeqCst), 2);
            watch.record(Signal::Traces, "http://x/v1/traces", &Ok(()));
            assert_eq!(count.infos.load(Ordering::SeqCst), 1);
            watch.record(Signal::Metrics, "http://x/v1/metrics", &Ok(()));
            assert_eq!(count.infos.load(Ordering::SeqCst), 2);
        });
    }
}
