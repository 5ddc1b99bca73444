//! Sleep-time consolidation of one agent: its current facts (and its own editable core blocks)
//! tidied by a short tool loop, off the request path.
//!
//! The run: system `prompt::consolidate_system` (first line `OPC memory: consolidate`), the agent's
//! current facts listed one JSON object per line (`prompt::consolidate_user`, the newest
//! [`MAX_LISTED`]), then its own non-`readOnly` blocks; tools `record_facts` and the block-edit
//! tools (`memory_write`, `memory_replace`, `memory_insert`: the registry's own handlers, run under
//! the agent's ACL). At most [`MAX_TURNS`] model turns, until the model stops calling tools.
//!
//! Every change is a normal versioned edit with source `consolidation`: each `record_facts` call is
//! one batch (one transaction, provenance source `consolidation`), each block edit one versioned
//! edit whose history author is `consolidation`. A malformed call, a stale target, a block the run
//! may not edit are tool errors the model sees; nothing of them is written. The run's calls share a
//! privacy vault of their own (the same real value has the same substitute in every turn).
//!
//! The daily cap is checked before every turn: over it, the run ends there (what it changed so far
//! stands, each change whole) with [`Event::MemoryWorkCapped`].

use std::collections::HashSet;
use std::sync::Arc;

use opc_hierarchy::OrgTree;
use opc_hierarchy::schema::Tool;
use opc_memory::blocks::{Block, agent_namespace};
use opc_memory::facts::{FactStore, Provenance, Source, View, ops, prompt};
use serde_json::Value;

use super::extract::{MAX_TOKENS, blocking, record_facts_spec_for};
use super::{JobOutcome, call, cap, memory_model, namespace};
use crate::context::render_blocks;
use crate::ending::TaskEnd;
use crate::events::Event;
use crate::llm::{CallMeta, Content, LlmRequest, Message, Role, ToolChoice, Work};
use crate::state::EngineState;
use crate::store::{Approval, MemoryJob, OfferedOption, StoreError, TaskId, now_ms};
use crate::tools::{
    ApprovalArgs, DelegateArgs, SeenVersions, SpecContext, ToolContext, ToolHandler, ToolHost,
    ToolResult,
};

/// Model turns one run may take.
pub(super) const MAX_TURNS: u32 = 4;
/// Most facts listed in one run (the newest).
const MAX_LISTED: usize = 200;
/// The block-edit tools a run is offered.
const BLOCK_TOOLS: [Tool; 3] = [Tool::MemoryWrite, Tool::MemoryReplace, Tool::MemoryInsert];
/// The history author of a run's block edits.
const AUTHOR: &str = "consolidation";

/// Consolidate `job.agent`'s facts and blocks.
pub(super) async fn run(
    rt: &EngineState,
    facts: &FactStore,
    job: &MemoryJob,
) -> Result<JobOutcome, StoreError> {
    let Some(task) = job.task else {
        // The ledger needs a task to record the calls against; a consolidation is always queued
        // with one.
        return Ok(JobOutcome::Done);
    };
    let agent = job.agent.as_str();
    let ns = namespace(agent);
    let current = {
        let (facts, ns) = (facts.clone(), ns.clone());
        match blocking(move || facts.list(&ns, View::Current)).await {
            Ok(mut list) => {
                list.truncate(MAX_LISTED);
                list
            }
            Err(e) => return Ok(JobOutcome::Retry(format!("reading facts: {e}"))),
        }
    };
    let editable = editable_blocks(rt, agent).await;
    if current.is_empty() && editable.is_empty() {
        return Ok(JobOutcome::Done);
    }
    if let Some(until) = cap::over(rt, agent, now_ms()).await? {
        return Ok(JobOutcome::Capped { until });
    }
    let (provider, model) = match memory_model(rt) {
        Ok(m) => m,
        Err(e) => return Ok(JobOutcome::Retry(e)),
    };
    let mut listed: HashSet<i64> = current.iter().map(|v| v.id).collect();
    let handlers: Vec<Arc<dyn ToolHandler>> = if editable.is_empty() {
        Vec::new()
    } else {
        BLOCK_TOOLS
            .iter()
            .filter_map(|t| rt.tools().get(t.wire_name()))
            .collect()
    };
    let graph = super::extract::graph_on(rt);
    let mut tools = vec![record_facts_spec_for(graph)];
    let children: Vec<(String, String)> = Vec::new();
    for handler in &handlers {
        tools.push(handler.spec(&SpecContext {
            agent,
            children: &children,
        }));
    }
    let seen = SeenVersions::default();
    for b in &editable {
        seen.saw(&b.namespace, &b.label, b.version);
    }
    let mut user = prompt::consolidate_user(&current);
    if !editable.is_empty() {
        user.push_str("\n\nCore memory blocks you may edit (yours, not read-only):");
        user.push_str(&render_blocks(&editable));
    }
    let conversation = job.conversation.clone().unwrap_or_default();
    // The run's own privacy vault, for all its turns (a negative id: never a task's).
    let _vault = Vault::open(rt, -job.id, &conversation);
    let host = Host {
        agent,
        task,
        conversation: &conversation,
        org: rt.org(),
    };
    let editable_labels: HashSet<&str> = editable.iter().map(|b| b.label.as_str()).collect();
    let mut messages = vec![Message::user(user)];
    let mut summary = Summary::default();
    for turn in 1..=MAX_TURNS {
        if turn > 1 && cap::over(rt, agent, now_ms()).await?.is_some() {
            break;
        }
        let request = LlmRequest {
            provider: provider.clone(),
            model: model.clone(),
            system: prompt::consolidate_system_for(agent, graph),
            messages: messages.clone(),
            tools: tools.clone(),
            tool_choice: Some(ToolChoice::Auto),
            max_tokens: MAX_TOKENS,
            stream: None,
            meta: CallMeta {
                agent: agent.to_string(),
                task_id: Some(task),
                root_id: Some(-job.id),
                conversation: job.conversation.clone(),
                work: Work::Memory,
            },
            guard: None,
        };
        let answer = match call::call(rt, request, task).await? {
            Ok(answer) => answer,
            // Nothing changed yet: try the run again later. Changes made in earlier turns
            // stand (each was whole); the run ends there.
            Err(e) if turn == 1 => return Ok(JobOutcome::Retry(e.to_string())),
            Err(_) => break,
        };
        summary.turns = turn;
        let content = answer.response.content.clone();
        let uses: Vec<(String, String, Value)> = content
            .iter()
            .filter_map(|c| match c {
                Content::ToolUse { id, name, input } => {
                    Some((id.clone(), name.clone(), input.clone()))
                }
                _ => None,
            })
            .collect();
        if uses.is_empty() {
            break;
        }
        let mut results = Vec::new();
        for (id, name, input) in uses {
            let (text, is_error) = if name == ops::RECORD_FACTS {
                let result = record(
                    graph,
                    facts,
                    &ns,
                    &input,
                    &listed,
                    Provenance {
                        agent: agent.to_string(),
                        task: Some(task),
                        conversation: job.conversation.clone(),
                        source_messages: Vec::new(),
                        model: Some(answer.model.clone()),
                        ledger_id: Some(answer.ledger_id),
                        source: Source::Consolidation,
                    },
                    &mut summary,
                )
                .await;
                // What is current now is what the next call may name.
                let (facts, ns) = (facts.clone(), ns.clone());
                if let Ok(now) = blocking(move || facts.list(&ns, View::Current)).await {
                    listed = now.iter().map(|v| v.id).collect();
                }
                result
            } else if let Some(handler) = handlers.iter().find(|h| h.name() == name) {
                let label = input.get("label").and_then(Value::as_str).unwrap_or("");
                if editable_labels.contains(label) {
                    let cx = ToolContext::new(&host, &id, &seen);
                    let (text, is_error) = handler.run(&cx, &input).await?;
                    if !is_error {
                        summary.block_edits += 1;
                    }
                    (text, is_error)
                } else {
                    (
                        format!(
                            "`{label}` is not one of the blocks this run may edit: {}",
                            editable_labels
                                .iter()
                                .copied()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        true,
                    )
                }
            } else {
                (format!("unknown tool `{name}`"), true)
            };
            if is_error {
                summary.refused += 1;
            }
            results.push(Content::ToolResult {
                tool_use_id: id,
                content: text,
                is_error,
            });
        }
        messages.push(Message {
            role: Role::Assistant,
            content,
        });
        messages.push(Message {
            role: Role::User,
            content: results,
        });
    }
    rt.events().publish(Event::Consolidated {
        agent: agent.to_string(),
        turns: summary.turns,
        added: summary.added,
        updated: summary.updated,
        invalidated: summary.invalidated,
        block_edits: summary.block_edits,
        refused: summary.refused,
    });
    Ok(JobOutcome::Done)
}

/// What a run changed.
#[derive(Default)]
struct Summary {
    turns: u32,
    added: usize,
    updated: usize,
    invalidated: usize,
    block_edits: usize,
    refused: usize,
}

/// One `record_facts` call of the run: one batch, or a tool error and nothing written.
#[allow(clippy::too_many_arguments)]
async fn record(
    graph: bool,
    facts: &FactStore,
    ns: &str,
    input: &Value,
    listed: &HashSet<i64>,
    provenance: Provenance,
    summary: &mut Summary,
) -> (String, bool) {
    let ops = match ops::parse_for(input, listed, graph) {
        Ok(ops) => ops,
        Err(e) => return (format!("rejected, nothing written: {}", e.0), true),
    };
    let (facts, ns) = (facts.clone(), ns.to_string());
    match blocking(move || facts.apply(&ns, &ops, &provenance, now_ms())).await {
        Ok(applied) => {
            summary.added += applied.added.len();
            summary.updated += applied.updated.len();
            summary.invalidated += applied.invalidated.len();
            (
                format!(
                    "applied: {} added, {} updated, {} invalidated, {} duplicates dropped",
                    applied.added.len(),
                    applied.updated.len(),
                    applied.invalidated.len(),
                    applied.duplicates
                ),
                false,
            )
        }
        Err(e) => (format!("not applied, nothing written: {e}"), true),
    }
}

/// `agent`'s own blocks that are not read-only (shared ones are left to the agents that share them).
async fn editable_blocks(rt: &EngineState, agent: &str) -> Vec<Block> {
    let own = agent_namespace(agent);
    rt.context()
        .memory()
        .core_blocks(agent)
        .await
        .into_iter()
        .filter(|b| b.namespace == own && !b.read_only)
        .collect()
}

/// The run's privacy vault, open until dropped.
struct Vault<'a> {
    rt: &'a EngineState,
    root: i64,
}

impl<'a> Vault<'a> {
    fn open(rt: &'a EngineState, root: i64, conversation: &str) -> Vault<'a> {
        rt.llm().root_started(root, conversation);
        Vault { rt, root }
    }
}

impl Drop for Vault<'_> {
    fn drop(&mut self) {
        self.rt.llm().root_ended(self.root);
    }
}

/// The run as the block tools see it: the agent (its ACL), its task, and an edit author of
/// `consolidation`. It runs no org tool.
struct Host<'a> {
    agent: &'a str,
    task: TaskId,
    conversation: &'a str,
    org: &'a OrgTree,
}

#[async_trait::async_trait]
impl ToolHost for Host<'_> {
    fn agent(&self) -> &str {
        self.agent
    }
    fn task(&self) -> TaskId {
        self.task
    }
    fn conversation(&self) -> &str {
        self.conversation
    }
    fn org(&self) -> &OrgTree {
        self.org
    }
    fn check_delegation(&self, _to: &str) -> Result<(), String> {
        Err("a consolidation run cannot delegate".into())
    }
    async fn delegate(
        &self,
        _tool_use_id: &str,
        _index: u32,
        _args: &DelegateArgs,
    ) -> Result<TaskEnd, StoreError> {
        Ok(TaskEnd::Failed(
            "a consolidation run cannot delegate".into(),
        ))
    }
    async fn request_approval(&self, _tool_use_id: &str, _args: &ApprovalArgs) -> ToolResult {
        Ok(("a consolidation run cannot ask for approval".into(), true))
    }
    async fn ask(
        &self,
        _tool_use_id: &str,
        _summary: &str,
        _options: &[OfferedOption],
    ) -> Result<Approval, StoreError> {
        Err(StoreError::Writer(
            "a consolidation run cannot ask for approval".into(),
        ))
    }
    async fn command_approved(&self, _command: &str) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn approve_command(&self, _command: &str, _approval: i64) -> Result<(), StoreError> {
        Ok(())
    }
    fn edit_author(&self) -> Option<&str> {
        Some(AUTHOR)
    }
}
