//! Diagnostics on stderr: `tracing` events from the libraries (retries, failures), never message content
//! or keys; and, beside them, the OpenTelemetry export of the spans meant for it (issue 37).
//!
//! Two shapes. `opc chat` shows the delegation trace on stderr, so a retry there is one more trace line
//! (`  ↻ vp-eng: claude-sonnet-4-5 call failed (HTTP 529); retrying in 1.2s, attempt 2`), named by the
//! agent whose call it was, instead of a raw `WARN` log record between trace lines. Every other
//! command, and `opc chat` when `OPC_LOG` asks for more, gets the ordinary log lines filtered by
//! `OPC_LOG` (`warn` by default; e.g. `OPC_LOG=debug` or `OPC_LOG=warn,opc_agents=debug`).
//!
//! Telemetry: [`telemetry`] resolves the `OTEL_*` variables over the config's `framework.telemetry`
//! and builds the exporters before the logger exists, so the export layer is one more layer of the
//! same subscriber. Each layer filters for itself: the stderr logger never shows the spans of
//! [`opc_telemetry::TARGET`] (not even when `OPC_LOG` names that target), and the export layer
//! takes only those (so no log event is exported).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::process::ExitCode;

use opc_telemetry::Telemetry;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::filter::{Targets, filter_fn};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// The span the agents' call stack opens around every LLM call (see `opc_agents::llm::layers`).
const CALL_SPAN: &str = "llm_call";

/// The export layer [`init`] adds beside the stderr logger (from [`Telemetry::layer`]).
pub type ExportLayer = Box<dyn Layer<Registry> + Send + Sync + 'static>;

/// Install the stderr logger; `trace_style` for `opc chat`; `export`, when telemetry is on.
pub fn init(trace_style: bool, export: Option<ExportLayer>) {
    let spec = std::env::var("OPC_LOG")
        .ok()
        .and_then(|spec| spec.parse::<Targets>().ok());
    let logged = |meta: &Metadata<'_>| meta.target() != opc_telemetry::TARGET;
    if trace_style && spec.is_none() {
        let only_warnings_and_calls = filter_fn(move |meta| {
            logged(meta)
                && ((meta.is_span() && meta.name() == CALL_SPAN) || *meta.level() <= Level::WARN)
        });
        let _ = tracing_subscriber::registry()
            .with(export)
            .with(TraceStyle.with_filter(only_warnings_and_calls))
            .try_init();
        return;
    }
    let targets = spec.unwrap_or_else(|| Targets::new().with_default(Level::WARN));
    // The most verbose level any directive enables: with it, a `debug!` the filter refuses costs
    // one comparison, as it did when the filter was global.
    let most = targets
        .iter()
        .map(|(_, level)| level)
        .chain(targets.default_level())
        .max()
        .unwrap_or(LevelFilter::OFF);
    let filter =
        filter_fn(move |meta| logged(meta) && targets.would_enable(meta.target(), meta.level()))
            .with_max_level_hint(most);
    let _ = tracing_subscriber::registry()
        .with(export)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_target(false)
                .with_filter(filter),
        )
        .try_init();
}

/// `framework.telemetry` as the telemetry crate takes it.
pub fn from_config(
    section: &opc_hierarchy::schema::TelemetrySettings,
) -> opc_telemetry::FromConfig {
    opc_telemetry::FromConfig {
        endpoint: section.endpoint.clone(),
        protocol: section.protocol.map(|p| p.as_str().to_string()),
        headers_env: section.headers_env.as_ref().map(|v| v.name().to_string()),
        capture_content: section.capture_content,
    }
}

/// The telemetry settings of the config at `path` and this process's `OTEL_*` variables. A config
/// that does not load counts as having no `framework.telemetry` (the command reports it itself).
pub fn settings(path: &Path) -> Result<opc_telemetry::Settings, opc_telemetry::settings::Problems> {
    let section = opc_hierarchy::load(path)
        .map(|loaded| from_config(&loaded.config.framework.telemetry))
        .unwrap_or_default();
    opc_telemetry::settings::resolve(|name| std::env::var(name).ok(), &section)
}

/// Telemetry for a command that runs agents (`opc run`, `opc chat`): `None` when off; a bad value
/// or an exporter that cannot be built is printed with its fix, and is exit status 2 (like every
/// start-up error).
pub fn telemetry(path: &Path) -> Result<Option<Telemetry>, ExitCode> {
    let settings = match settings(path) {
        Ok(settings) => settings,
        Err(problems) => {
            crate::term::eprint(&problems.to_string());
            return Err(ExitCode::from(2));
        }
    };
    opc_telemetry::install(&settings).map_err(|e| {
        crate::term::eprint(&format!(
            "error: {e}\nhint: check OTEL_EXPORTER_OTLP_ENDPOINT (or `framework.telemetry.endpoint`), or unset it to run without telemetry\n"
        ));
        ExitCode::from(2)
    })
}

/// Fields of a span or event, as text.
#[derive(Clone, Debug, Default)]
struct Fields(BTreeMap<&'static str, String>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

/// Prints warnings as trace lines, naming the agent and model of the call they happened in.
struct TraceStyle;

impl<S> Layer<S> for TraceStyle
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != CALL_SPAN {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let call = ctx.event_scope(event).and_then(|scope| {
            scope
                .from_root()
                .find_map(|span| span.extensions().get::<Fields>().cloned())
        });
        if let Some(line) = trace_line(&fields, call.as_ref()) {
            crate::term::eprint(&line);
        }
    }
}

/// The trace line for one warning, or `None` for one another line already covers.
fn trace_line(event: &Fields, call: Option<&Fields>) -> Option<String> {
    let message = event.get("message").unwrap_or("");
    let who = match call {
        Some(call) => format!(
            "{}: {} call",
            call.get("agent").unwrap_or("an agent"),
            call.get("model").unwrap_or("LLM")
        ),
        None => "LLM call".to_string(),
    };
    let why = || match (event.get("status"), event.get("kind")) {
        (Some(status), _) if status != "None" => {
            format!(
                "HTTP {}",
                status.trim_start_matches("Some(").trim_end_matches(')')
            )
        }
        (_, Some(kind)) => kind.replace('_', " "),
        _ => "error".to_string(),
    };
    match message {
        "LLM call failed; retrying" => {
            let delay = event
                .get("delay_ms")
                .and_then(|ms| ms.parse::<u64>().ok())
                .map_or(String::new(), |ms| {
                    format!(" in {:.1}s", ms as f64 / 1000.0)
                });
            let attempt = event
                .get("attempt")
                .and_then(|a| a.parse::<u32>().ok())
                .map_or(String::new(), |a| format!(", attempt {}", a + 1));
            Some(format!(
                "  ↻ {who} failed ({}); retrying{delay}{attempt}\n",
                why()
            ))
        }
        "LLM call failed" => Some(format!("  ✗ {who} failed ({})\n", why())),
        // The retry or failure line that follows names the status.
        "provider returned an error status" => None,
        _ => {
            let rest: Vec<String> = event
                .0
                .iter()
                .filter(|(name, _)| **name != "message")
                .map(|(name, value)| format!("{name}: {value}"))
                .collect();
            let rest = if rest.is_empty() {
                String::new()
            } else {
                format!(" ({})", rest.join(", "))
            };
            Some(format!("  ⚠ {message}{rest}\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&'static str, &str)]) -> Fields {
        Fields(pairs.iter().map(|(k, v)| (*k, v.to_string())).collect())
    }

    #[test]
    fn a_retry_reads_like_the_trace() {
        let call = fields(&[("agent", "vp-eng"), ("model", "claude-sonnet-4-5")]);
        let event = fields(&[
            ("message", "LLM call failed; retrying"),
            ("attempt", "1"),
            ("delay_ms", "1200"),
            ("kind", "http_status"),
            ("status", "Some(529)"),
        ]);
        assert_eq!(
            trace_line(&event, Some(&call)).as_deref(),
            Some(
                "  ↻ vp-eng: claude-sonnet-4-5 call failed (HTTP 529); retrying in 1.2s, attempt 2\n"
            )
        );
        let cut = fields(&[
            ("message", "LLM call failed; retrying"),
            ("kind", "stream_cut"),
            ("status", "None"),
        ]);
        assert_eq!(
            trace_line(&cut, None).as_deref(),
            Some("  ↻ LLM call failed (stream cut); retrying\n")
        );
        let status = fields(&[("message", "provider returned an error status")]);
        assert_eq!(trace_line(&status, Some(&call)), None);
    }
}
