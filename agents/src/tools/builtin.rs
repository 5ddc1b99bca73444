//! The built-in org tools behind the registry: `delegate`, `delegate_parallel`, `request_approval`
//! and `escalate`. Their specs and argument types are in the parent module; the work (child
//! sessions, approvals) is the session's, asked for through [`super::ToolHost`] — these handlers
//! never name the session or the approval flow.
//!
//! `escalate` ends the session before any tool of its turn runs (the session checks for it first);
//! its handler only answers a call whose arguments were invalid, so the model can correct it.

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::future::join_all;
use opc_hierarchy::schema::{Agent, Tool};
use serde_json::{Value, json};

use super::{
    ApprovalArgs, DelegateArgs, DelegateParallelArgs, Escalation, SpecContext, ToolContext,
    ToolHandler, ToolRegistry, ToolResult, parse, spec,
};
use crate::ending::TaskEnd;
use crate::llm::ToolSpec;
use crate::store::StoreError;

/// Register the four org tools.
pub(super) fn register(registry: &mut ToolRegistry) {
    for tool in [
        Tool::Delegate,
        Tool::DelegateParallel,
        Tool::Escalate,
        Tool::RequestApproval,
    ] {
        registry.register(Arc::new(OrgTool(tool)));
    }
}

/// One of the org tools, named by its config keyword.
struct OrgTool(Tool);

#[async_trait]
impl ToolHandler for OrgTool {
    fn name(&self) -> &'static str {
        self.0.wire_name()
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.tools.contains(&self.0)
    }

    fn spec(&self, cx: &SpecContext<'_>) -> ToolSpec {
        // `spec` covers every org tool; the fallback is unreachable but keeps this free of panics.
        spec(self.0, cx.children).unwrap_or_else(|| ToolSpec {
            name: self.name().to_string(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
    }

    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult {
        let (host, name) = (cx.host(), self.name());
        match self.0 {
            Tool::Delegate => {
                let args: DelegateArgs = match parse(name, input) {
                    Ok(a) => a,
                    Err(e) => return Ok((e, true)),
                };
                if let Err(e) = host.check_delegation(&args.agent) {
                    return Ok((e, true));
                }
                let end = host.delegate(cx.tool_use_id, 0, &args).await?;
                Ok(tool_result_of(&args.agent, end))
            }
            Tool::DelegateParallel => {
                let args: DelegateParallelArgs = match parse(name, input) {
                    Ok(a) => a,
                    Err(e) => return Ok((e, true)),
                };
                // All or nothing: one bad target creates no task at all.
                let errors: Vec<String> = args
                    .tasks
                    .iter()
                    .filter_map(|t| host.check_delegation(&t.agent).err())
                    .collect();
                if !errors.is_empty() {
                    return Ok((
                        format!("no task was delegated: {}", errors.join("; ")),
                        true,
                    ));
                }
                let runs = args.tasks.iter().enumerate().map(|(i, t)| async move {
                    let end = host.delegate(cx.tool_use_id, i as u32, t).await?;
                    Ok::<_, StoreError>((t.agent.clone(), end))
                });
                let mut items = Vec::new();
                for result in join_all(runs).await {
                    let (agent, end) = result?;
                    items.push(match end {
                        TaskEnd::Completed(text) => {
                            json!({"agent": agent, "status": "completed", "result": text})
                        }
                        TaskEnd::Escalated(e) => {
                            json!({"agent": agent, "status": "escalated", "escalation": e})
                        }
                        TaskEnd::Failed(error) => {
                            json!({"agent": agent, "status": "failed", "error": error})
                        }
                        TaskEnd::Cancelled(reason) => {
                            json!({"agent": agent, "status": "cancelled", "error": reason})
                        }
                    });
                }
                Ok((Value::Array(items).to_string(), false))
            }
            Tool::RequestApproval => {
                let args: ApprovalArgs = match parse(name, input) {
                    Ok(a) => a,
                    Err(e) => return Ok((e, true)),
                };
                host.request_approval(cx.tool_use_id, &args).await
            }
            // Escalations end the session before tools run; reaching here means its arguments
            // were invalid.
            _ => match parse::<Escalation>(name, input) {
                Err(e) => Ok((e, true)),
                Ok(_) => Ok(("escalation recorded".into(), false)),
            },
        }
    }
}

/// The delegate tool's result for the parent: `(content, is_error)`.
fn tool_result_of(agent: &str, end: TaskEnd) -> (String, bool) {
    match end {
        TaskEnd::Completed(text) => (text, false),
        TaskEnd::Escalated(e) => (
            json!({"escalated_by": agent, "type": e.kind, "reason": e.reason, "partial_result": e.partial_result})
                .to_string(),
            false,
        ),
        TaskEnd::Failed(error) => (format!("{agent} failed: {error}"), true),
        TaskEnd::Cancelled(reason) => (format!("{agent}'s task was cancelled: {reason}"), true),
    }
}
