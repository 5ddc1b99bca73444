//! The metric instruments: the GenAI conventions' client metrics and OPC's own.
//!
//! Instruments come from the global meter provider the first time [`instruments`] is called, so
//! `install` (which sets the provider) runs before any engine work. Without a provider they are
//! the API's no-ops: recording costs a virtual call and nothing else.
//!
//! Attribute values are ids, names of agents, models and providers, and outcomes — never content.

use std::sync::OnceLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};

/// Bucket boundaries of `gen_ai.client.operation.duration`, in seconds (the conventions' advice).
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// Bucket boundaries of `gen_ai.client.token.usage` (the conventions' advice).
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// Bucket boundaries of the store's commit latency, in seconds.
const COMMIT_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// Every instrument OPC records.
pub struct Instruments {
    /// `gen_ai.client.token.usage` (`{token}`), by `gen_ai.token.type` (`input`, `output`).
    pub token_usage: Histogram<u64>,
    /// `gen_ai.client.operation.duration` (s), with `error.type` when the call failed.
    pub operation_duration: Histogram<f64>,
    /// `opc.requests` (`{request}`): root requests ended, by `opc.outcome`.
    pub requests: Counter<u64>,
    /// `opc.approval.wait.duration` (s): from asking to the decision, by `opc.approval.option`.
    pub approval_wait: Histogram<f64>,
    /// `opc.agent.slots.in_use` (`{slot}`): agent sessions running now.
    pub slots_in_use: UpDownCounter<i64>,
    /// `opc.store.commit.duration` (s): one write transaction, by `opc.store.backend`.
    pub store_commit: Histogram<f64>,
    /// `opc.sandbox.runs` (`{run}`): Bash commands run, by `opc.sandbox.outcome`.
    pub sandbox_runs: Counter<u64>,
}

impl Instruments {
    /// Create the instruments on `meter`.
    pub fn new(meter: &Meter) -> Self {
        Instruments {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            requests: meter
                .u64_counter("opc.requests")
                .with_unit("{request}")
                .with_description("Root requests ended, by outcome")
                .build(),
            approval_wait: meter
                .f64_histogram("opc.approval.wait.duration")
                .with_unit("s")
                .with_description("Time from asking for an approval to its decision")
                .with_boundaries(vec![
                    1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0,
                ])
                .build(),
            slots_in_use: meter
                .i64_up_down_counter("opc.agent.slots.in_use")
                .with_unit("{slot}")
                .with_description("Agent sessions running")
                .build(),
            store_commit: meter
                .f64_histogram("opc.store.commit.duration")
                .with_unit("s")
                .with_description("Duration of one write transaction of the task store")
                .with_boundaries(COMMIT_BUCKETS.to_vec())
                .build(),
            sandbox_runs: meter
                .u64_counter("opc.sandbox.runs")
                .with_unit("{run}")
                .with_description("Bash commands run, by sandbox outcome")
                .build(),
        }
    }
}

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// The process's instruments, on the global meter provider.
pub fn instruments() -> &'static Instruments {
    INSTRUMENTS.get_or_init(|| Instruments::new(&opentelemetry::global::meter("opc")))
}

/// Register the queue gauges: `opc.ner.queue` and `opc.embedding.queue` (`{item}`), read when
/// the metrics are collected. Call once, after `install`.
///
/// `embedding` returns `None` when the depth cannot be read now (the database failed): nothing is
/// observed then, rather than a made-up zero. Without recall, pass `None` and no gauge is made.
pub fn observe_queues(
    ner: impl Fn() -> u64 + Send + Sync + 'static,
    embedding: Option<Box<dyn Fn() -> Option<u64> + Send + Sync + 'static>>,
) {
    let meter = opentelemetry::global::meter("opc");
    let _ner = meter
        .u64_observable_gauge("opc.ner.queue")
        .with_unit("{item}")
        .with_description("Texts waiting for the NER model")
        .with_callback(move |gauge| gauge.observe(ner(), &[]))
        .build();
    if let Some(embedding) = embedding {
        let _embedding = meter
            .u64_observable_gauge("opc.embedding.queue")
            .with_unit("{item}")
            .with_description("Recall rows waiting for their embedding")
            .with_callback(move |gauge| {
                if let Some(depth) = embedding() {
                    gauge.observe(depth, &[]);
                }
            })
            .build();
    }
}

/// A `KeyValue` of a string attribute (shorthand for the recording sites).
pub fn kv(key: &'static str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(key, value)
}
