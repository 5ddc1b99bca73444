//! The memory tools — `memory_read`, `memory_write`, `memory_replace`, `memory_insert` — as an adapter
//! from the registry to `opc_memory`'s block store.
//!
//! Why an adapter here: the agents crate owns the [`ToolHandler`] trait and memory must not depend on
//! agents, so memory exposes a plain API and this module turns calls into it. The ACL is NOT checked
//! here: `opc_memory` checks every call itself, before storage is touched, so no caller can skip it.
//!
//! Optimistic concurrency: every edit names the version the model last saw — the one rendered in
//! this turn's system prompt, or returned by `memory_read` — kept per session in [`SeenVersions`].
//! A stale edit fails with the block's current value, and that value is then what the model has seen,
//! so a deliberate retry goes through while a blind overwrite never does.
//!
//! The store is synchronous SQLite; calls run on the blocking pool so a slow disk never stalls the
//! async workers.

use std::sync::Arc;

use async_trait::async_trait;
use opc_hierarchy::schema::{Agent, Tool};
use opc_memory::blocks::{Actor, Block, BlockError, BlockStore, Edit};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    SeenVersions, SpecContext, ToolContext, ToolHandler, ToolRegistry, ToolResult, Validate,
    non_empty, parse,
};
use crate::llm::ToolSpec;

/// Register the four memory tools over `blocks`.
pub(super) fn register(registry: &mut ToolRegistry, blocks: BlockStore) {
    for tool in [
        Tool::MemoryRead,
        Tool::MemoryWrite,
        Tool::MemoryReplace,
        Tool::MemoryInsert,
    ] {
        registry.register(Arc::new(MemoryTool {
            tool,
            blocks: blocks.clone(),
        }));
    }
}

struct MemoryTool {
    tool: Tool,
    blocks: BlockStore,
}

/// `memory_read` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    label: String,
    #[serde(default)]
    agent: Option<String>,
}

/// `memory_write` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    label: String,
    value: String,
}

/// `memory_replace` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceArgs {
    label: String,
    old: String,
    new: String,
}

/// `memory_insert` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertArgs {
    label: String,
    text: String,
    #[serde(default)]
    line: Option<usize>,
}

impl Validate for ReadArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("label", &self.label)?;
        match &self.agent {
            Some(agent) => non_empty("agent", agent),
            None => Ok(()),
        }
    }
}
impl Validate for WriteArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("label", &self.label)
    }
}
impl Validate for ReplaceArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("label", &self.label)?;
        if self.old.is_empty() {
            return Err("`old` must not be empty".into());
        }
        Ok(())
    }
}
impl Validate for InsertArgs {
    fn validate(&self) -> Result<(), String> {
        non_empty("label", &self.label)
    }
}

/// A block as a tool result: what the model needs to edit it next.
fn describe(block: &Block) -> String {
    format!(
        "memory block `{}` (version {}, used {} of {} characters{}):\n{}",
        block.label,
        block.version,
        block.size(),
        block.limit,
        if block.read_only { ", read-only" } else { "" },
        block.value
    )
}

/// The spec of a memory tool.
fn tool_spec(tool: Tool) -> ToolSpec {
    let (description, schema) = match tool {
        Tool::MemoryRead => (
            "Read a core memory block: one of yours by `label`, or a block of another agent whose \
             memory you may read (your subordinates, or a sibling who shares with you) with `agent`.",
            json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "minLength": 1},
                    "agent": {"type": "string", "minLength": 1, "description": "whose block; omit for your own"}
                },
                "required": ["label"],
                "additionalProperties": false
            }),
        ),
        Tool::MemoryWrite => (
            "Replace the whole value of one of your core memory blocks (shown in your system prompt). \
             Stay within its character limit.",
            json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "minLength": 1},
                    "value": {"type": "string"}
                },
                "required": ["label", "value"],
                "additionalProperties": false
            }),
        ),
        Tool::MemoryReplace => (
            "Replace text in one of your core memory blocks: `old` must occur exactly once in it.",
            json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "minLength": 1},
                    "old": {"type": "string", "minLength": 1},
                    "new": {"type": "string"}
                },
                "required": ["label", "old", "new"],
                "additionalProperties": false
            }),
        ),
        _ => (
            "Insert a line into one of your core memory blocks: before 0-based line `line`, or at the \
             end when `line` is omitted.",
            json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "minLength": 1},
                    "text": {"type": "string"},
                    "line": {"type": "integer", "minimum": 0}
                },
                "required": ["label", "text"],
                "additionalProperties": false
            }),
        ),
    };
    ToolSpec {
        name: tool.wire_name().to_string(),
        description: description.to_string(),
        input_schema: schema,
    }
}

/// Run a blocking store call on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BlockError> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the memory call did not finish: {e}")),
    }
}

/// Record what a (failed) edit showed the model: a stale error carries the current value.
fn note_error(seen: &SeenVersions, namespace: &str, error: &BlockError) {
    if let BlockError::Stale { label, current, .. } = error {
        seen.saw(namespace, label, *current);
    }
}

#[async_trait]
impl ToolHandler for MemoryTool {
    fn name(&self) -> &'static str {
        self.tool.wire_name()
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.tools.contains(&self.tool)
    }

    fn spec(&self, _cx: &SpecContext<'_>) -> ToolSpec {
        tool_spec(self.tool)
    }

    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult {
        let name = self.name();
        let agent = cx.agent().to_string();
        let task = cx.task();
        let store = self.blocks.clone();
        if self.tool == Tool::MemoryRead {
            let args: ReadArgs = match parse(name, input) {
                Ok(a) => a,
                Err(e) => return Ok((e, true)),
            };
            let result = blocking(move || match args.agent {
                Some(owner) => store.read_of(&agent, &owner, &args.label),
                None => store.read(&agent, &args.label),
            })
            .await;
            return Ok(match result {
                Ok(block) => {
                    cx.seen.saw(&block.namespace, &block.label, block.version);
                    (describe(&block), false)
                }
                Err(e) => (e, true),
            });
        }
        let (label, edit) = match self.tool {
            Tool::MemoryWrite => match parse::<WriteArgs>(name, input) {
                Ok(a) => (a.label, Edit::Write(a.value)),
                Err(e) => return Ok((e, true)),
            },
            Tool::MemoryReplace => match parse::<ReplaceArgs>(name, input) {
                Ok(a) => (
                    a.label,
                    Edit::Replace {
                        old: a.old,
                        new: a.new,
                    },
                ),
                Err(e) => return Ok((e, true)),
            },
            _ => match parse::<InsertArgs>(name, input) {
                Ok(a) => (
                    a.label,
                    Edit::Insert {
                        text: a.text,
                        line: a.line,
                    },
                ),
                Err(e) => return Ok((e, true)),
            },
        };
        let namespace = self.blocks.namespace_of(&agent, &label);
        let read = namespace.as_deref().and_then(|ns| cx.seen.get(ns, &label));
        let author = cx.edit_author().to_string();
        let outcome = tokio::task::spawn_blocking(move || {
            store.edit_by(
                Actor {
                    agent: &agent,
                    task: Some(task),
                },
                &author,
                &label,
                &edit,
                read,
            )
        })
        .await;
        Ok(match outcome {
            Ok(Ok(block)) => {
                cx.seen.saw(&block.namespace, &block.label, block.version);
                (format!("saved; {}", describe(&block)), false)
            }
            Ok(Err(error)) => {
                if let Some(ns) = &namespace {
                    note_error(cx.seen, ns, &error);
                }
                (error.to_string(), true)
            }
            Err(e) => (format!("the memory call did not finish: {e}"), true),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn schemas_and_decoders_agree() {
        for tool in [
            Tool::MemoryRead,
            Tool::MemoryWrite,
            Tool::MemoryReplace,
            Tool::MemoryInsert,
        ] {
            assert_eq!(tool_spec(tool).name, tool.wire_name());
        }
        assert!(parse::<ReadArgs>("memory_read", &json!({"label": "a", "agent": "b"})).is_ok());
        assert!(
            parse::<InsertArgs>(
                "memory_insert",
                &json!({"label": "a", "text": "t", "line": 2})
            )
            .is_ok()
        );
        let err = parse::<ReplaceArgs>(
            "memory_replace",
            &json!({"label": "a", "old": "", "new": "x"}),
        )
        .unwrap_err();
        assert!(err.contains("`old` must not be empty"), "{err}");
        let err = parse::<WriteArgs>("memory_write", &json!({"label": "a"})).unwrap_err();
        assert!(err.contains("missing field `value`"), "{err}");
        let err = parse::<InsertArgs>(
            "memory_insert",
            &json!({"label": "a", "text": "t", "line": -1}),
        )
        .unwrap_err();
        assert!(err.contains("invalid"), "{err}");
        let schema = tool_spec(Tool::MemoryInsert).input_schema;
        assert_eq!(schema["required"], json!(["label", "text"]));
    }
}
