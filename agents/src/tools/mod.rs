//! The tool registry, and the engine's built-in tools: their wire names, JSON Schemas, and the
//! validation of a model's arguments against them.
//!
//! Every tool an agent can call is a [`ToolHandler`]: it gives its spec (name, description, JSON
//! Schema), says whether an agent's config offers it, and runs a call with a [`ToolContext`] (agent,
//! task, conversation, org). The session knows no tool by name except `escalate`, which ends the
//! session; it asks the [`ToolRegistry`] what to offer and whom to run. Built-in tools live in
//! `builtin` (delegation, approval, escalation) and `memory` (the core-block tools, an adapter over
//! `opc_memory`, whose ACL decides every call) and `files` (Read, Write, Edit, Grep, Glob in the
//! agent's workspaces). The org tools ask the session that runs them for the
//! work only it can do (a child task, an approval) through `ToolHost`, a trait this module owns and
//! the session implements: `tools` depends on neither the session nor the approval flow.
//!
//! `conversation_search` (`search`) runs over the recall store and `archival_search` /
//! `archival_insert` (`archival`) over the facts store, both under the block store's ACL;
//! `graph_search` (`graph`) walks the facts' entities and relations under the same ACL, added by
//! [`ToolRegistry::add_graph`] only for a config with `framework.memory.graph.enabled`.
//!
//! Why validation is typed decoding rather than a JSON Schema engine: the schemas are small and
//! fixed, and decoding into the structs below with `deny_unknown_fields` plus the checks in `validate`
//! accepts exactly what the schemas describe (a unit test holds them together). It also yields
//! precise, model-readable error messages, which go back to the model as a tool error — an invalid call
//! never fails the task.
//!
//! Invariant: every tool an agent is offered is one the engine executes. A config tool with no
//! executor in this build is reported once at startup ([`unavailable_tools`]) and not offered, so a
//! model can never call a tool that does nothing. Bash is offered only to an engine given a sandbox
//! launcher (`opc` always gives one, and warns at startup when it cannot).

mod archival;
pub mod bash;
mod builtin;
pub mod files;
mod graph;
pub mod memory;
mod search;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use opc_hierarchy::OrgTree;
use opc_hierarchy::schema::Agent;

use crate::ending::TaskEnd;
pub use crate::ending::{Escalation, EscalationKind};
use crate::store::{Approval, OfferedOption, StoreError, TaskId};

use opc_hierarchy::schema::Tool;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::ToolSpec;

/// The config tools this engine executes (the memory tools when the engine has memory, which `opc`
/// always gives it).
pub const EXECUTED: [Tool; 15] = [
    Tool::Delegate,
    Tool::DelegateParallel,
    Tool::Escalate,
    Tool::RequestApproval,
    Tool::MemoryRead,
    Tool::MemoryWrite,
    Tool::MemoryReplace,
    Tool::MemoryInsert,
    Tool::ConversationSearch,
    Tool::Read,
    Tool::Write,
    Tool::Edit,
    Tool::Grep,
    Tool::Glob,
    Tool::Bash,
];

/// A tool call's result for the model: `(content, is_error)`. `Err` is reserved for failures of the
/// engine's own store, which fail the task; everything the model can fix is `Ok((message, true))`.
pub type ToolResult = Result<(String, bool), StoreError>;

/// One tool: its spec, whether an agent is offered it, and how a call runs.
#[async_trait]
pub trait ToolHandler: Send + Sync + 'static {
    /// The wire name models call it by.
    fn name(&self) -> &'static str;
    /// Whether `agent` (its config) is offered this tool.
    fn offered_to(&self, agent: &Agent) -> bool;
    /// The spec offered to `agent`'s model (descriptions may name its subordinates).
    fn spec(&self, cx: &SpecContext<'_>) -> ToolSpec;
    /// Run one call. Invalid arguments and refusals are tool errors (`Ok((message, true))`).
    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult;
}

/// What a spec may depend on: the agent and its place in the org.
pub struct SpecContext<'a> {
    /// The agent offered the tool.
    pub agent: &'a str,
    /// `(id, role)` of its direct children.
    pub children: &'a [(String, String)],
}

/// The versions of memory blocks a session has shown its model (in the system prompt or through
/// `memory_read`), by `(namespace, label)`: an edit names the version the model saw, so an edit based
/// on an outdated view is refused instead of overwriting someone else's change.
#[derive(Debug, Default)]
pub struct SeenVersions(Mutex<HashMap<(String, String), u64>>);

impl SeenVersions {
    /// Record that the model was shown `version` of a block.
    pub fn saw(&self, namespace: &str, label: &str, version: u64) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((namespace.to_string(), label.to_string()), version);
    }

    /// The version the model last saw, if any.
    pub fn get(&self, namespace: &str, label: &str) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(namespace.to_string(), label.to_string()))
            .copied()
    }
}

/// What a tool may ask of the session that runs it: who calls, the org, and the two things only the
/// session can do — run a child task, and suspend for a human's decision. Owned here and implemented
/// by the session (as grep-searcher owns `Sink` and its callers implement it), so the tools depend on
/// this narrow seam and never on the session, the approval flow or the engine's state.
///
/// The methods that touch the store or wait on children are `async`: a store behind an asynchronous
/// seam (or a child's whole subtree) may take a while, and a tool call must not block a worker.
#[async_trait]
pub(crate) trait ToolHost: Send + Sync {
    /// The calling agent.
    fn agent(&self) -> &str;
    /// The calling task.
    fn task(&self) -> TaskId;
    /// The calling task's conversation.
    fn conversation(&self) -> &str;
    /// The org the calling task's tree runs in.
    fn org(&self) -> &OrgTree;
    /// Whether the caller may delegate to `to` (direct children only, within `maxHierarchyDepth`);
    /// the error names the relation, for the model.
    fn check_delegation(&self, to: &str) -> Result<(), String>;
    /// Run the child task of tool call `tool_use_id` (its `index`-th, for a parallel delegation) to its
    /// end: the existing one if this call already created it, so a resumed tree runs nothing twice.
    async fn delegate(
        &self,
        tool_use_id: &str,
        index: u32,
        args: &DelegateArgs,
    ) -> Result<TaskEnd, StoreError>;
    /// Ask a human (tool call `tool_use_id`), wait for the decision, and answer the call with it.
    async fn request_approval(&self, tool_use_id: &str, args: &ApprovalArgs) -> ToolResult;
    /// Ask a human as `request_approval` does (same card, approvers, timeout; a timeout or a
    /// cancellation is a rejection) and return the decided approval, for a tool that acts on the
    /// option chosen (Bash).
    async fn ask(
        &self,
        tool_use_id: &str,
        summary: &str,
        options: &[OfferedOption],
    ) -> Result<Approval, StoreError>;
    /// Whether this exact Bash `command` was approved for the calling agent for the rest of this
    /// conversation.
    async fn command_approved(&self, command: &str) -> Result<bool, StoreError>;
    /// Remember that approval `approval` approved `command` for the calling agent for the rest of
    /// this conversation.
    async fn approve_command(&self, command: &str, approval: i64) -> Result<(), StoreError>;
    /// Who a memory edit is recorded as, when not the calling agent (a consolidation run edits an
    /// agent's blocks under its permissions, recorded as `consolidation`).
    fn edit_author(&self) -> Option<&str> {
        None
    }
}

/// What a tool tells the ledger about one call beyond its result: a description safe to store
/// (never personal data) and, for a command, its exit code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallNote {
    /// A short description for `opc tasks --tree` (e.g. Bash's command, without its arguments).
    pub detail: Option<String>,
    /// The exit code of a command that ran.
    pub exit_code: Option<i32>,
}

/// Everything a tool call runs with: who calls (agent, task, conversation), the org, and the
/// session's state.
pub struct ToolContext<'a> {
    /// The session running the call.
    host: &'a dyn ToolHost,
    /// The model's id of this call (idempotency key of delegations and approvals).
    pub tool_use_id: &'a str,
    /// The block versions this session has shown its model.
    pub seen: &'a SeenVersions,
    /// What the tool tells the ledger (see [`ToolContext::note`]).
    note: Mutex<CallNote>,
}

impl<'a> ToolContext<'a> {
    /// The context of tool call `tool_use_id`, run by `host`.
    pub(crate) fn new(
        host: &'a dyn ToolHost,
        tool_use_id: &'a str,
        seen: &'a SeenVersions,
    ) -> ToolContext<'a> {
        ToolContext {
            host,
            tool_use_id,
            seen,
            note: Mutex::default(),
        }
    }

    /// Tell the ledger a safe description of this call and/or a command's exit code (a `None`
    /// leaves what was noted before).
    pub fn note(&self, detail: Option<String>, exit_code: Option<i32>) {
        let mut note = self.note.lock().unwrap_or_else(|p| p.into_inner());
        if detail.is_some() {
            note.detail = detail;
        }
        if exit_code.is_some() {
            note.exit_code = exit_code;
        }
    }

    /// What the tool noted.
    pub(crate) fn take_note(&self) -> CallNote {
        std::mem::take(&mut *self.note.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The session running the call (for the org tools).
    pub(crate) fn host(&self) -> &'a dyn ToolHost {
        self.host
    }

    /// The calling agent.
    pub fn agent(&self) -> &str {
        self.host.agent()
    }
    /// The calling task.
    pub fn task(&self) -> TaskId {
        self.host.task()
    }
    /// The conversation.
    pub fn conversation(&self) -> &str {
        self.host.conversation()
    }
    /// The org.
    pub fn org(&self) -> &OrgTree {
        self.host.org()
    }
    /// Who a memory edit is recorded as (the calling agent unless the host says otherwise).
    pub fn edit_author(&self) -> &str {
        self.host.edit_author().unwrap_or_else(|| self.host.agent())
    }
}

/// The tools an engine runs, by wire name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn ToolHandler>>,
}

impl ToolRegistry {
    /// The built-in tools, plus the memory tools over `blocks` when the engine has memory, plus
    /// `Bash` when the engine has a sandbox to run commands in.
    pub fn standard(
        blocks: Option<opc_memory::blocks::BlockStore>,
        recall: Option<opc_memory::recall::RecallStore>,
        facts: Option<opc_memory::facts::FactStore>,
        sandbox: Option<Arc<opc_sandbox::Sandbox>>,
    ) -> ToolRegistry {
        let mut registry = ToolRegistry::default();
        builtin::register(&mut registry);
        files::register(&mut registry);
        if let Some(sandbox) = sandbox {
            bash::register(&mut registry, sandbox);
        }
        if let Some(blocks) = blocks {
            if let Some(recall) = recall {
                search::register(&mut registry, blocks.clone(), recall);
            }
            if let Some(facts) = facts {
                archival::register(&mut registry, blocks.clone(), facts);
            }
            memory::register(&mut registry, blocks);
        }
        registry
    }

    /// Add `graph_search` over `facts` (with the ACL of `blocks`): the engine does so for a config
    /// with `framework.memory.graph.enabled`, per config state, so a reload turns it on or off.
    pub fn add_graph(
        &mut self,
        blocks: opc_memory::blocks::BlockStore,
        facts: opc_memory::facts::FactStore,
    ) {
        graph::register(self, blocks, facts);
    }

    /// The tool called `name`, if this registry runs it.
    pub fn get(&self, name: &str) -> Option<Arc<dyn ToolHandler>> {
        self.tools.iter().find(|t| t.name() == name).cloned()
    }

    /// Add a tool (a later tool with the same name replaces the earlier one).
    pub fn register(&mut self, tool: Arc<dyn ToolHandler>) {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
    }

    /// The tools `agent` is offered, in registration order.
    pub fn offered(&self, agent: Option<&Agent>) -> Vec<Arc<dyn ToolHandler>> {
        match agent {
            Some(agent) => self
                .tools
                .iter()
                .filter(|t| t.offered_to(agent))
                .cloned()
                .collect(),
            None => Vec::new(),
        }
    }
}

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

/// The spec offered to the model for a built-in delegation, escalation or approval tool. `children` lists `(id, role)` of the agent's
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
             in time counts as a rejection. Options are the buttons shown; each one either approves \
             (you go ahead) or rejects. A plain string option: `approve` and `reject` mean what they \
             say; otherwise the first plain option is the go-ahead (unless another option approves) \
             and the others reject, so [\"Yes, ship it\", \"No\"] approves on \"Yes, ship it\". To say \
             it yourself, give {\"label\": \"Ship Friday\", \"outcome\": \"approve\"}. Offer at least one \
             go-ahead and one rejection. The answer names the option chosen and whether it approved."
                .to_string(),
            json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "minLength": 1, "description": "what you want to do and why"},
                    "options": {"type": "array", "minItems": 2, "default": ["approve", "reject"],
                                "description": "the choices, in button order: plain labels (the first is the go-ahead, the rest reject; `approve`/`reject` mean themselves) or {label, outcome}",
                                "items": {"anyOf": [
                                    {"type": "string", "minLength": 1},
                                    {"type": "object",
                                     "properties": {
                                         "label": {"type": "string", "minLength": 1},
                                         "outcome": {"type": "string", "enum": ["approve", "reject"]}
                                     },
                                     "required": ["label", "outcome"],
                                     "additionalProperties": false}
                                ]}}
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

/// `request_approval` arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApprovalArgs {
    /// What to decide.
    pub summary: String,
    /// The choices (default approve / reject), plain or with their outcome
    /// ([`crate::store::resolve_options`] says what plain ones mean).
    #[serde(default = "default_options")]
    pub options: Vec<OfferedOption>,
}

fn default_options() -> Vec<OfferedOption> {
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
        crate::store::check_options(&self.options)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_follow_the_issue() {
        let children = [("vp".to_string(), "VP".to_string())];
        let names: Vec<String> = EXECUTED[..4]
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
        let registry = ToolRegistry::standard(None, None, None, None);
        let names: Vec<&str> = registry.tools.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "delegate",
                "delegate_parallel",
                "escalate",
                "request_approval",
                "Read",
                "Write",
                "Edit",
                "Grep",
                "Glob"
            ]
        );
    }

    #[test]
    fn schema_and_decoder_agree() {
        // Accepted by both.
        assert!(parse::<DelegateArgs>("delegate", &json!({"agent": "vp", "task": "x"})).is_ok());
        assert!(
            parse::<Escalation>("escalate", &json!({"type": "timeout", "reason": "slow"})).is_ok()
        );
        let a: ApprovalArgs = parse("request_approval", &json!({"summary": "ship"})).unwrap();
        assert_eq!(
            a.options,
            [
                OfferedOption::from("approve"),
                OfferedOption::from("reject")
            ]
        );
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
