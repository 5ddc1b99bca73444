//! The engine's spans for OpenTelemetry (GenAI semantic conventions): `invoke_agent {agent}` per
//! task run, `execute_tool {tool}` per tool call, `search_memory {store}` / `update_memory {store}`
//! per memory operation, and OPC's `opc.approval.wait`. The model call's `chat` span belongs to the
//! call stack (`llm::genai`), which agent code never sees.
//!
//! Why a module of its own: the attribute keys of each span are spelled once, here, and the
//! sessions and tools only say *when* (open a span, record an outcome).
//!
//! Invariants:
//! - every span has target [`opc_telemetry::TARGET`]: disabled (and nearly free) unless telemetry
//!   exports it, and never printed by the stderr logger;
//! - attributes are ids, agent and tool names, counts and outcomes — never a message, a command,
//!   a path or a tool's output (those may hold real personal data, restored after the model call);
//! - an `invoke_agent` span's parent is the context stored with its task (the inbound message's
//!   span for a root, the delegating `execute_tool` span for a child), so a tree resumed in another
//!   process is still one trace.

use opc_telemetry::conventions::{EXECUTE_TOOL, INVOKE_AGENT};
use opc_telemetry::metrics::{instruments, kv};
use opc_telemetry::opentelemetry::trace::{Span as _, TraceContextExt, Tracer};
use opc_telemetry::opentelemetry::{self, KeyValue};
use opc_telemetry::tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing::field::Empty;

use crate::ending::TaskEnd;
use crate::store::TaskRecord;

/// The `invoke_agent {agent}` span of one run of `record`'s task, under its stored parent.
pub(crate) fn agent_span(record: &TaskRecord, role: &str) -> tracing::Span {
    let span = tracing::info_span!(
        target: opc_telemetry::TARGET,
        "invoke_agent",
        otel.name = %format_args!("{INVOKE_AGENT} {}", record.agent),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = INVOKE_AGENT,
        gen_ai.agent.name = record.agent.as_str(),
        gen_ai.agent.id = record.agent.as_str(),
        gen_ai.conversation.id = record.conversation_id.as_str(),
        opc.agent.role = role,
        opc.task.id = record.id,
        opc.task.root_id = record.root_id,
        opc.task.depth = i64::from(record.depth),
        opc.task.outcome = Empty,
        error.type = Empty,
    );
    opc_telemetry::carry::adopt(&span, record.trace.as_deref());
    span
}

/// Record how a task run ended on its `invoke_agent` span; a root's end also counts in
/// `opc.requests`.
pub(crate) fn agent_end(span: &tracing::Span, end: &TaskEnd, root: bool) {
    let outcome = match end {
        TaskEnd::Completed(_) => "completed",
        TaskEnd::Escalated(_) => "escalated",
        TaskEnd::Failed(_) => "failed",
        TaskEnd::Cancelled(_) => "cancelled",
    };
    span.record("opc.task.outcome", outcome);
    if !matches!(end, TaskEnd::Completed(_)) {
        span.record("error.type", outcome);
        if matches!(end, TaskEnd::Failed(_)) {
            span.record("otel.status_code", "error");
        }
    }
    if root {
        instruments().requests.add(1, &[kv("opc.outcome", outcome)]);
    }
}

/// The `execute_tool {tool}` span of one tool call.
pub(crate) fn tool_span(tool: &str, call_id: &str) -> tracing::Span {
    tracing::info_span!(
        target: opc_telemetry::TARGET,
        "execute_tool",
        otel.name = %format_args!("{EXECUTE_TOOL} {tool}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = EXECUTE_TOOL,
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        opc.tool.outcome = Empty,
        error.type = Empty,
        opc.sandbox.outcome = Empty,
        opc.sandbox.exit_code = Empty,
    )
}

/// Record a tool call's outcome on its span.
pub(crate) fn tool_end(span: &tracing::Span, is_error: bool) {
    span.record("opc.tool.outcome", if is_error { "error" } else { "ok" });
    if is_error {
        span.record("error.type", "tool_error");
    }
}

/// A memory operation's span: `search_memory {store}` or `update_memory {store}`, `store` being
/// `recall`, `facts`, `archival` or `core`. Record the result count with [`memory_results`].
pub(crate) fn memory_span(operation: &'static str, store: &'static str) -> tracing::Span {
    tracing::info_span!(
        target: opc_telemetry::TARGET,
        "memory",
        otel.name = %format_args!("{operation} {store}"),
        otel.kind = "internal",
        gen_ai.operation.name = operation,
        opc.memory.store = store,
        opc.memory.results = Empty,
    )
}

/// The memory operation a memory tool performs, `(operation, store)`, or `None` for other tools.
pub(crate) fn memory_operation(tool: &str) -> Option<(&'static str, &'static str)> {
    use opc_telemetry::conventions::{SEARCH_MEMORY, UPDATE_MEMORY};
    Some(match tool {
        "memory_read" => (SEARCH_MEMORY, "core"),
        "memory_write" | "memory_replace" | "memory_insert" => (UPDATE_MEMORY, "core"),
        "conversation_search" => (SEARCH_MEMORY, "recall"),
        "archival_search" => (SEARCH_MEMORY, "archival"),
        "archival_insert" => (UPDATE_MEMORY, "archival"),
        "graph_search" => (SEARCH_MEMORY, "graph"),
        _ => return None,
    })
}

/// Record how many items a memory operation found or wrote.
pub(crate) fn memory_results(span: &tracing::Span, n: usize) {
    span.record("opc.memory.results", i64::try_from(n).unwrap_or(i64::MAX));
}

/// What a decided approval was, for its wait span and metric.
pub(crate) struct ApprovalWait<'a> {
    /// The approval's id.
    pub id: i64,
    /// The option chosen (its label as offered).
    pub option: &'a str,
    /// Who decided: the platform's user id (`slack:U…`), `console`, or the system.
    pub decided_by: &'a str,
    /// When it was asked and decided, in Unix milliseconds (from the store).
    pub asked_ms: i64,
    /// See `asked_ms`.
    pub decided_ms: i64,
}

/// The `opc.approval.wait` span, from asking to the decision, under the current span (the tool
/// call that asked), and the `opc.approval.wait.duration` metric.
///
/// Why an OpenTelemetry span made after the fact rather than a `tracing` span held open: a wait
/// may outlive the process (a suspended tree resumes in a new one, or on another node), so the
/// span is built when the decision is seen, from the times the store recorded.
pub(crate) fn approval_waited(wait: &ApprovalWait<'_>) {
    let waited_ms = (wait.decided_ms - wait.asked_ms).max(0);
    instruments().approval_wait.record(
        waited_ms as f64 / 1000.0,
        &[kv("opc.approval.option", wait.option.to_string())],
    );
    let parent = tracing::Span::current();
    if parent.is_disabled() {
        return;
    }
    let parent = parent.context();
    if !parent.span().span_context().is_valid() {
        return;
    }
    let at = |ms: i64| {
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    };
    let tracer = opentelemetry::global::tracer("opc");
    let mut span = tracer
        .span_builder(opc_telemetry::conventions::APPROVAL_WAIT)
        .with_start_time(at(wait.asked_ms))
        .with_attributes([
            KeyValue::new("opc.approval.id", wait.id),
            KeyValue::new("opc.approval.option", wait.option.to_string()),
            KeyValue::new("opc.approval.decided_by", decider(wait.decided_by)),
            KeyValue::new("opc.approval.wait_ms", waited_ms),
        ])
        .start_with_context(&tracer, &parent);
    span.end_with_timestamp(at(wait.decided_ms.max(wait.asked_ms)));
}

/// Who decided, as exported: the platform's user id (`slack:U123`), `console`, or a system
/// decider (`timeout`, `cancelled`, `error`) — never a person's name. The store keeps
/// `Name (platform:id)` for the cards; only the part in the parentheses leaves the process.
fn decider(decided_by: &str) -> String {
    if crate::store::SystemDecider::ALL
        .iter()
        .any(|system| system.as_str() == decided_by)
    {
        return decided_by.to_string();
    }
    if decided_by.starts_with("console") {
        return "console".to_string();
    }
    decided_by
        .strip_suffix(')')
        .and_then(|rest| rest.rsplit_once(" ("))
        .map(|(_, id)| id)
        .filter(|id| id.contains(':') && !id.contains(char::is_whitespace))
        .unwrap_or("person")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::decider;

    #[test]
    fn a_decider_is_exported_by_id_never_by_name() {
        assert_eq!(
            decider("Dana Whitfield (slack:U024BE7LH)"),
            "slack:U024BE7LH"
        );
        assert_eq!(
            decider("operator (web:c8dd3a7cbabfb7c0)"),
            "web:c8dd3a7cbabfb7c0"
        );
        assert_eq!(decider("console (access token)"), "console");
        assert_eq!(decider("timeout"), "timeout");
        // Anything else is a person whose id is not known: their words are not exported.
        assert_eq!(decider("Dana Whitfield"), "person");
        assert_eq!(decider("Dana (has a note)"), "person");
    }
}
