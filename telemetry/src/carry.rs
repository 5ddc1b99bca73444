//! A span's place in a trace, carried as a W3C `traceparent` string.
//!
//! Why a string: a task is stored and may be resumed by another process (after a restart, or on
//! another cluster node), and a tree must stay one trace. The delegating span's `traceparent` is
//! written with the child task; whoever runs the child makes its `invoke_agent` span a child of
//! that context. The same string is what a web client sends in its `traceparent` header.
//!
//! Invariant: with telemetry off, [`current`] and [`of`] return `None` (no span is exported, so
//! there is nothing to carry) and [`adopt`] does nothing.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const HEADER: &str = "traceparent";

/// The `traceparent` of the current `tracing` span, if it is exported.
pub fn current() -> Option<String> {
    of(&tracing::Span::current())
}

/// The `traceparent` of `span`, if it is exported (and so has a valid OpenTelemetry context).
pub fn of(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(HEADER)
}

/// Make `span` a child of the span `traceparent` names. Call it before the span is first
/// entered. A missing, malformed or unsupported `traceparent` leaves `span` where it was (the
/// W3C rule: an invalid header is ignored, the request is not refused).
pub fn adopt(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(parent) = traceparent.and_then(parse) else {
        return;
    };
    // `Err` only when the span is disabled or already started: nothing to join then.
    let _ = span.set_parent(parent);
}

/// The OpenTelemetry context a valid `traceparent` names, or `None`.
pub fn parse(traceparent: &str) -> Option<opentelemetry::Context> {
    let mut carrier = HashMap::new();
    carrier.insert(HEADER.to_string(), traceparent.trim().to_string());
    let context = TraceContextPropagator::new().extract(&carrier);
    context.span().span_context().is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_parses_and_a_bad_one_is_ignored() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse(good).expect("valid");
        assert_eq!(
            context.span().span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        for bad in [
            "",
            "junk",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?} must be ignored");
        }
    }

    #[test]
    fn without_an_exporting_subscriber_nothing_is_carried() {
        let span = tracing::info_span!(target: crate::TARGET, "invoke_agent");
        assert_eq!(of(&span), None);
        adopt(
            &span,
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
    }
}
