//! # opc-telemetry — OpenTelemetry for OPC
//!
//! Role: what leaves the process in a standard form. Traces and metrics go out over OTLP/HTTP to
//! whatever collector the operator runs (Jaeger, Tempo, Honeycomb, Datadog, Grafana), shaped as the
//! OpenTelemetry GenAI semantic conventions shape them: `invoke_agent {agent}`, `chat {model}`,
//! `execute_tool {tool}`, `search_memory`/`update_memory`, plus OPC's own approval-wait and privacy
//! spans.
//!
//! - [`conventions`]: the span names and attribute keys, in one place;
//! - [`carry`]: a span's W3C `traceparent`, stored with each task so a tree stays one trace across
//!   restarts and nodes, and the inbound `traceparent` header a web request may carry;
//! - [`metrics`]: the instruments (`gen_ai.client.*` and OPC's own);
//! - `settings`: the standard `OTEL_*` variables and `framework.telemetry`, checked with clear
//!   errors;
//! - `install`: the SDK's pipelines and the `tracing` layer the binary adds to its subscriber.
//!
//! The instrumented crates (`opc-agents`) create ordinary `tracing` spans with
//! [`TARGET`] as their target; `tracing-opentelemetry` turns exactly those into OpenTelemetry spans.
//!
//! Invariants:
//! - off by default: with no endpoint nothing is exported, no span of [`TARGET`] is enabled, and
//!   the instruments are the API's no-ops;
//! - never a real value: spans carry ids, names of agents, tools and models, counts and outcomes.
//!   Content (`gen_ai.input.messages` and the like) is recorded only when capture is on, and only
//!   the masked text the model saw, which the call stack's layer below the privacy gateway supplies;
//! - exporting never blocks the engine: spans and metrics are handed to the SDK's own threads, and
//!   a collector that is down or slow costs dropped batches and one warning.

pub mod carry;
pub mod conventions;
mod export;
mod install;
pub mod metrics;
pub mod settings;

pub use install::{InstallError, ShutdownError, Telemetry, install};
pub use settings::{FromConfig, Settings};

/// The OpenTelemetry API and the `tracing` bridge, re-exported so the instrumented crates use the
/// versions this crate was built with.
pub use {opentelemetry, tracing_opentelemetry};

use std::sync::atomic::{AtomicBool, Ordering};

/// The `tracing` target of every span meant for export. The binary's stderr logger leaves this
/// target out, and the OpenTelemetry layer takes only this target, so no log event (which may
/// name a command or a path) is ever exported.
pub const TARGET: &str = "opc_otel";

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether spans carry message content (`gen_ai.input.messages`, `gen_ai.output.messages`):
/// off unless `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` or `captureContent: true`.
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// Turn content capture on or off for this process (set once, at start, by `install`).
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}
