//! The context builder: what each agent session is given, following the design's four steps.
//!
//! - **Write**: the agent's prompt file, its position in the org ("You are {role}. Your superior is …
//!   Your subordinates are …"), and its core memory blocks (from [`MemoryHooks`]).
//! - **Select**: the task text from the direct parent only, never the ancestor chain; plus whatever the
//!   memory hook retrieves for that task.
//! - **Compress**: done by the orchestrator on child results above `resultCompressionThreshold`
//!   ([`estimate_tokens`], [`summary_request`]).
//! - **Isolate**: each session is built from scratch here, from the agent's own config and its own task;
//!   nothing from siblings or ancestors' sessions is ever passed in.
//!
//! Invariant: the system prompt contains the line `Agent id: {id}`, so logs, tests and the scripted LLM
//! server can tell sessions apart without parsing prose.

use std::collections::HashMap;
use std::sync::Arc;

use opc_hierarchy::{Config, OrgTree};

use crate::llm::{CallMeta, LlmRequest, Message};

/// The memory system's entry points into the context. The memory issue implements these; until then
/// [`NoMemory`] returns nothing, and the sessions are built without memory sections.
pub trait MemoryHooks: Send + Sync + 'static {
    /// Core memory blocks for `agent`, rendered as `(label, value)`; always in the system prompt.
    fn core_blocks(&self, agent: &str) -> Vec<(String, String)>;
    /// Memories relevant to `task`, selected for `agent`; prepended to the task message.
    fn recall(&self, agent: &str, task: &str) -> Vec<String>;
}

/// No memory: the hooks return nothing.
pub struct NoMemory;

impl MemoryHooks for NoMemory {
    fn core_blocks(&self, _agent: &str) -> Vec<(String, String)> {
        Vec::new()
    }
    fn recall(&self, _agent: &str, _task: &str) -> Vec<String> {
        Vec::new()
    }
}

/// Builds system prompts and first messages. Prompt files are read once, when the engine starts.
pub struct ContextBuilder {
    /// Static part of each agent's system prompt (prompt + org position), by agent id.
    static_prompts: HashMap<String, String>,
    memory: Arc<dyn MemoryHooks>,
}

/// A prompt file could not be read at startup.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the prompt file {path} of agent `{agent}`: {source}")]
pub struct PromptError {
    /// The agent.
    pub agent: String,
    /// The file.
    pub path: String,
    /// Why.
    pub source: std::io::Error,
}

impl ContextBuilder {
    /// Read every agent's prompt (file paths are relative to `base_dir`, the config's directory).
    pub fn new(
        config: &Config,
        org: &OrgTree,
        base_dir: &std::path::Path,
        memory: Arc<dyn MemoryHooks>,
    ) -> Result<Self, PromptError> {
        let mut static_prompts = HashMap::new();
        for (id, agent) in &config.agents {
            let prompt = match &agent.prompt {
                Some(opc_hierarchy::schema::Prompt::Inline(text)) => text.clone(),
                Some(opc_hierarchy::schema::Prompt::File(path)) => {
                    let full = base_dir.join(path);
                    std::fs::read_to_string(&full).map_err(|source| PromptError {
                        agent: id.clone(),
                        path: full.display().to_string(),
                        source,
                    })?
                }
                None => String::new(),
            };
            static_prompts.insert(id.clone(), Self::write(id, &prompt, config, org));
        }
        Ok(ContextBuilder {
            static_prompts,
            memory,
        })
    }

    /// Write: the static part of the system prompt.
    fn write(id: &str, prompt: &str, config: &Config, org: &OrgTree) -> String {
        fn role<'a>(config: &'a Config, agent: &'a str) -> &'a str {
            config.agents.get(agent).map_or(agent, |a| a.role.as_str())
        }
        let role = |agent| role(config, agent);
        let mut out = String::new();
        if !prompt.trim().is_empty() {
            out.push_str(prompt.trim_end());
            out.push_str("\n\n");
        }
        out.push_str("## Your position\n");
        out.push_str(&format!("You are {}. ", role(id)));
        match org.parent(id) {
            Some(parent) => out.push_str(&format!(
                "Your superior is {} (`{parent}`), who gave you your task. ",
                role(parent)
            )),
            None => out.push_str("You report to the humans who write to you. "),
        }
        let children = org.children(id);
        if children.is_empty() {
            out.push_str("You have no subordinates: do the work yourself.\n");
        } else {
            let list: Vec<String> = children
                .iter()
                .map(|c| format!("{} (`{c}`)", role(c)))
                .collect();
            out.push_str(&format!(
                "Your subordinates are {}. You may delegate only to them.\n",
                list.join(", ")
            ));
        }
        out.push_str(&format!("Agent id: {id}\n"));
        out
    }

    /// The full system prompt for `agent`: the static part plus its core memory blocks.
    pub fn system_prompt(&self, agent: &str) -> String {
        let mut out = self.static_prompts.get(agent).cloned().unwrap_or_default();
        let blocks = self.memory.core_blocks(agent);
        if !blocks.is_empty() {
            out.push_str("\n## Core memory\n");
            for (label, value) in blocks {
                out.push_str(&format!("<{label}>\n{value}\n</{label}>\n"));
            }
        }
        out
    }

    /// Select: the first message of a session — the direct parent's task, preceded by recalled memory.
    pub fn task_message(&self, agent: &str, task: &str) -> Message {
        let recalled = self.memory.recall(agent, task);
        if recalled.is_empty() {
            return Message::user(task);
        }
        let mut text = String::from("Relevant memory:\n");
        for item in recalled {
            text.push_str("- ");
            text.push_str(&item);
            text.push('\n');
        }
        text.push_str("\nTask:\n");
        text.push_str(task);
        Message::user(text)
    }
}

/// Token estimate used for the compression threshold: ⌈characters / 4⌉, the usual rule of thumb for
/// English with BPE tokenizers. The threshold is a budget, not a bill, so an estimate is enough.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The marker line of the summariser's system prompt.
pub const SUMMARIZER_MARKER: &str = "Agent id: opc-summarizer";

/// The request that compresses a child's long result for its parent (sent to `fastModel`, which is
/// `model` at `provider`).
pub fn summary_request(
    provider: &str,
    model: &str,
    child_role: &str,
    result: &str,
    budget_tokens: usize,
    meta: CallMeta,
) -> LlmRequest {
    LlmRequest {
        provider: provider.to_string(),
        model: model.to_string(),
        system: format!(
            "You compress reports for a manager. Keep every decision, number, name, file, error and open \
             question; drop repetition and narration. Answer with the summary only, at most about \
             {budget_tokens} tokens.\n{SUMMARIZER_MARKER}\n"
        ),
        messages: vec![Message::user(format!(
            "Summarise this report from the {child_role}:\n\n{result}"
        ))],
        tools: Vec::new(),
        max_tokens: (budget_tokens as u32).clamp(256, 4096),
        stream: None,
        meta,
        guard: None,
    }
}
