//! The names of the OpenTelemetry GenAI semantic conventions (`gen-ai` 1.42 schema) that OPC
//! uses, and OPC's own under `opc.`. Spans are named `{operation} {target}` as the conventions say
//! (`invoke_agent vp-eng`, `chat claude-sonnet-4-5`, `execute_tool delegate`).
//!
//! `tracing` needs field names at compile time, so the instrumented code spells the keys in its
//! span macros; these constants are the values of the operation attribute and the helpers that
//! map OPC's own words onto the conventions' (a provider's wire format onto
//! `gen_ai.provider.name`, a task's outcome onto `error.type`).

/// The schema URL the exported data follows.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.42.0";

/// `gen_ai.operation.name` of an agent's run.
pub const INVOKE_AGENT: &str = "invoke_agent";
/// `gen_ai.operation.name` of a model call.
pub const CHAT: &str = "chat";
/// `gen_ai.operation.name` of a tool call.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.operation.name` of a memory read (recall, facts, archival search).
pub const SEARCH_MEMORY: &str = "search_memory";
/// `gen_ai.operation.name` of a memory write (core blocks, archival inserts, facts).
pub const UPDATE_MEMORY: &str = "update_memory";
/// `gen_ai.operation.name` of an embedding call.
pub const EMBEDDINGS: &str = "embeddings";

/// OPC's span for waiting on a human's decision.
pub const APPROVAL_WAIT: &str = "opc.approval.wait";
/// OPC's span for the privacy gateway's work on one model call.
pub const PRIVACY: &str = "opc.privacy";
/// OPC's span for an inbound chat message (web request, Slack event, Discord interaction).
pub const INBOUND: &str = "opc.inbound";

/// `gen_ai.provider.name` for a provider's wire format: `anthropic`, `openai`, or the format's own
/// word for anything else.
pub fn provider_name(wire_format: &str) -> &str {
    match wire_format {
        "anthropic" => "anthropic",
        "openai" | "openai-compatible" | "openai_compatible" => "openai",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_compatible_servers_report_as_openai() {
        assert_eq!(provider_name("anthropic"), "anthropic");
        assert_eq!(provider_name("openai-compatible"), "openai");
        assert_eq!(provider_name("ollama"), "ollama");
    }
}
