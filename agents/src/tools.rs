//! The engine's built-in tools: their wire names, JSON Schemas, and the validation of a model's
//! arguments against them.
//!
//! Why validation is typed decoding rather than a JSON Schema engine: the four schemas are small and
//! fixed, and decoding into the structs below with `deny_unknown_fields` plus the checks in `validate`
//! accepts exactly what the schemas describe (a unit test holds them together). It also yields
//! precise, model-readable error messages, which go back to the model as a tool error — an invalid call
//! never fails the task.
//!
//! Invariant: every tool an agent is offered is one the engine executes. Config tools with no executor
//! in this build (memory tools until the memory system lands; file and shell tools) are reported once at
//! startup ([`unavailable_tools`]) and not offered, so a model can never call a tool that does nothing.

use opc_hierarchy::schema::Tool;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::ToolSpec;

/// The tools this engine executes.
pub const EXECUTED: [Tool; 4] = [
    Tool::Delegate,
    Tool::DelegateParallel,
    Tool::Escalate,
    Tool::RequestApproval,
];

/// `(agent, tool)` for every configured tool this engine cannot execute, in config order.
pub fn unavailable_tools(config: &opc_hierarchy::Config) -> Vec<(String, Tool)> {
    config
        .agents
        .iter()
        .flat_map(|(id, agent)| {
            agent
                .tools
                .iter()
                .filter(|tool| !EXECUTED.contains(tool))
                .map(move |tool| (id.clone(), *tool))
        })
        .collect()
}

/// The spec offered to the model for an executed tool. `children` lists `(id, role)` of the agent's
/// direct children, named in the delegate tools' descriptions so the model knows whom it can ask.
pub fn spec(tool: Tool, children: &[(String, String)]) -> Option<ToolSpec> {
    let team = children
        .iter()
        .map(|(id, role)| format!("`{id}` ({role})"))
        .collect::<Vec<_>>()
        .join(", ");
    let child_ids: Vec<&str> = children.iter().map(|(id, _)| id.as_str()).collect();
    let (description, schema) = match tool {
        Tool::Delegate => (
            format!(
                "Hand a task to one of your direct subordinates and wait for their answer. \
                 Your subordinates: {team}."
            ),
            json!({
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "enum": child_ids, "description": "id of a direct subordinate"},
                    "task": {"type": "string", "minLength": 1, "description": "complete, self-contained instructions"}
                },
                "required": ["agent", "task"],
                "additionalProperties": false
            }),
        ),
        Tool::DelegateParallel => (
            format!(
                "Hand tasks to several direct subordinates at once; they work concurrently and you get \
                 every answer. Your subordinates: {team}."
            ),
            json!({
                "type": "object",
                "properties": {
                    "tasks": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "agent": {"type": "string", "enum": child_ids},
                                "task": {"type": "string", "minLength": 1}
                            },
                            "required": ["agent", "task"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["tasks"],
                "additionalProperties": false
            }),
        ),
        Tool::Escalate => (
            "Stop and pass a problem up to your superior: an error you cannot fix, a timeout, \
             uncertainty you cannot resolve, or a decision that needs approval. Include any partial result."
                .to_string(),
            json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": EscalationKind::NAMES},
                    "reason": {"type": "string", "minLength": 1},
                    "partial_result": {"type": "string"}
                },
                "required": ["type", "reason"],
                "additionalProperties": false
            }),
        ),
        Tool::RequestApproval => (
            "Ask a human to approve or reject before you act. You wait until they decide; no decision \
             in time counts as a rejection."
                .to_string(),
            json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "minLength": 1, "description": "what you want to do and why"},
                    "options": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 2,
                                "default": ["approve", "reject"]}
                },
                "required": ["summary"],
                "additionalProperties": false
            }),
        ),
        _ => return None,
    };
    Some(ToolSpec {
        name: tool.wire_name().to_string(),
        description,
        input_schema: schema,
    })
}

/// The tool a wire name refers to, among the agent's tools.
pub fn by_wire_name(tools: &[Tool], name: &str) -> Option<Tool> {
    tools
        .iter()
        .copied()
        .find(|t| EXECUTED.contains(t) && t.wire_name() == name)
}

/// `delegate` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DelegateArgs {
    /// The child.
    pub agent: String,
    /// The instructions.
    pub task: String,
}

/// `delegate_parallel` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DelegateParallelArgs {
    /// The tasks.
    pub tasks: Vec<DelegateArgs>,
}

/// The kinds of escalation.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EscalationKind {
    /// Something failed.
    Error,
    /// It took too long.
    Timeout,
    /// The agent is unsure.
    Uncertainty,
    /// A human must decide.
    ApprovalNeeded,
}

impl EscalationKind {
    /// Wire spellings.
    pub const NAMES: [&'static str; 4] = ["error", "timeout", "uncertainty", "approval_needed"];

    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationKind::Error => "error",
            EscalationKind::Timeout => "timeout",
            EscalationKind::Uncertainty => "uncertainty",
            EscalationKind::ApprovalNeeded => "approval_needed",
        }
    }
}

/// `escalate` arguments, and the structured escalation a parent receives.
#[derive(Clone, Debug, Deserialize, PartialEq, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Escalation {
    /// What kind of problem.
    #[serde(rename = "type")]
    pub kind: EscalationKind,
    /// Why.
    pub reason: String,
    /// Work done so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_result: Option<String>,
}

/// `request_approval` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApprovalArgs {
    /// What to decide.
    pub summary: String,
    /// The choices (default approve / reject).
    #[serde(default = "default_options")]
    pub options: Vec<String>,
}

fn default_options() -> Vec<String> {
    vec!["approve".into(), "reject".into()]
}

/// Decode and check a tool's arguments; the error is written for the model.
pub fn parse<T: serde::de::DeserializeOwned + Validate>(
    tool: &str,
    input: &Value,
) -> Result<T, String> {
    if !input.is_object() {
        return Err(format!(
            "invalid arguments for `{tool}`: expected a JSON object, got {}",
            match input {
                Value::String(_) => "a string (arguments must be a JSON object, not JSON text)",
                Value::Array(_) => "an array",
                Value::Null => "null",
                _ => "a scalar",
            }
        ));
    }
    let value: T = serde_json::from_value(input.clone())
        .map_err(|e| format!("invalid arguments for `{tool}`: {e}"))?;
    value
        .validate()
        .map_err(|e| format!("invalid arguments for `{tool}`: {e}"))?;
    Ok(value)
}

/// Checks beyond the types (the schemas' `minLength` / `minItems`).
pub trait Validate {
    /// `Err` says what is wrong.
    fn validate(&self) -> Result<(), String>;
}

fn non_empty(field: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        Err(format!("`{field}` must not be empty"))
    } else {
        Ok(())
    }
}

impl Validate for DelegateArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("agent", &self.agent)?;
        non_empty("task", &self.task)
    }
}

impl Validate for DelegateParallelArgs {
    fn validate(&self) -> Result<(), String> {
        if self.tasks.is_empty() {
            return Err("`tasks` must list at least one task".into());
        }
        self.tasks.iter().try_for_each(Validate::validate)
    }
}

impl Validate for Escalation {
    fn validate(&self) -> Result<(), String> {
        non_empty("reason", &self.reason)
    }
}

impl Validate for ApprovalArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("summary", &self.summary)?;
        if self.options.len() < 2 {
            return Err("`options` must offer at least two choices".into());
        }
        self.options
            .iter()
            .try_for_each(|o| non_empty("options[]", o))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_follow_the_issue() {
        let children = [("vp".to_string(), "VP".to_string())];
        let names: Vec<String> = EXECUTED
            .iter()
            .map(|t| spec(*t, &children).unwrap().name)
            .collect();
        assert_eq!(
            names,
            [
                "delegate",
                "delegate_parallel",
                "escalate",
                "request_approval"
            ]
        );
        assert_eq!(
            by_wire_name(&[Tool::DelegateParallel], "delegate_parallel"),
            Some(Tool::DelegateParallel)
        );
        assert_eq!(by_wire_name(&[Tool::Delegate], "delegate_parallel"), None);
        assert_eq!(by_wire_name(&[Tool::MemoryRead], "memory_read"), None);
    }

    #[test]
    fn schema_and_decoder_agree() {
        // Accepted by both.
        assert!(parse::<DelegateArgs>("delegate", &json!({"agent": "vp", "task": "x"})).is_ok());
        assert!(
            parse::<Escalation>("escalate", &json!({"type": "timeout", "reason": "slow"})).is_ok()
        );
        let a: ApprovalArgs = parse("request_approval", &json!({"summary": "ship"})).unwrap();
        assert_eq!(a.options, ["approve", "reject"]);
        // Rejected by both: missing required, extra property, wrong enum, empty string, empty array.
        for (input, needle) in [
            (json!({"agent": "vp"}), "missing field `task`"),
            (
                json!({"agent": "vp", "task": "x", "extra": 1}),
                "unknown field `extra`",
            ),
            (
                json!({"agent": "vp", "task": " "}),
                "`task` must not be empty",
            ),
            (json!("{\"agent\": \"vp\"}"), "expected a JSON object"),
        ] {
            let err = parse::<DelegateArgs>("delegate", &input).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
        let err =
            parse::<Escalation>("escalate", &json!({"type": "panic", "reason": "x"})).unwrap_err();
        assert!(err.contains("unknown variant `panic`"), "{err}");
        let err =
            parse::<DelegateParallelArgs>("delegate_parallel", &json!({"tasks": []})).unwrap_err();
        assert!(err.contains("at least one"), "{err}");
        let schema = spec(Tool::Escalate, &[]).unwrap().input_schema;
        assert_eq!(
            schema["properties"]["type"]["enum"],
            json!(EscalationKind::NAMES)
        );
    }
}
