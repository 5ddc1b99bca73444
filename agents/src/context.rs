//! The context builder: what each agent session is given, following the design's four steps.
//!
//! - **Write**: the agent's prompt file, its position in the org ("You are {role}. Your superior is …
//!   Your subordinates are …"), and its core memory blocks (from [`MemoryHooks`]), re-rendered on EVERY
//!   turn so an edit made mid-session is in the very next request.
//! - **Select**: the task text from the direct parent only, never the ancestor chain; plus the current
//!   facts and whatever the memory hooks recall for that task, asked once by the session before its
//!   first turn and prepended to the task message of each request — never stored in the task's
//!   history, so the persisted conversation holds only what was said. With graph memory
//!   (`framework.memory.graph.enabled`) the facts are multi-hop: those about the entities the task
//!   names (matched by alias, no model call) and their neighbours one hop away join the search's
//!   hits within the same token budget.
//! - **Compress**: done by the orchestrator on child results above `resultCompressionThreshold`
//!   ([`estimate_tokens`], [`summary_request`]).
//! - **Isolate**: each session is built from scratch here, from the agent's own config and its own task;
//!   nothing from siblings or ancestors' sessions is ever passed in.
//!
//! Invariants: the system prompt contains the line `Agent id: {id}`, so logs, tests and the scripted
//! LLM server can tell sessions apart without parsing prose. The memory hooks are async and called from
//! the sessions only (never from `Engine::send`, which the gateway's drain loop calls).

use opc_telemetry::conventions::SEARCH_MEMORY;
use std::collections::HashMap;
use std::sync::Arc;
use tracing::Instrument;

use opc_hierarchy::{Config, OrgTree};
use opc_memory::blocks::{Block, BlockStore};

use crate::llm::{CallMeta, Content, LlmRequest, Message};

/// The memory system's entry points into the context. [`NoMemory`] returns nothing (sessions are
/// built without memory sections); [`BlockMemory`] serves core blocks from `opc_memory`.
#[async_trait::async_trait]
pub trait MemoryHooks: Send + Sync + 'static {
    /// Core memory blocks `agent` sees, in prompt order; rendered into every turn's system prompt.
    async fn core_blocks(&self, agent: &str) -> Vec<Block>;
    /// Memories relevant to `task`, selected for `agent`; prepended to the task message of each
    /// request (never stored).
    /// `conversation` is the task's own: its messages are in the session already, and leaving them
    /// out keeps what is recalled the same when a suspended session resumes.
    async fn recall(&self, agent: &str, task: &str, conversation: &str) -> Vec<String>;
    /// The block store behind the memory tools, when this memory has one.
    fn blocks(&self) -> Option<BlockStore> {
        None
    }
    /// The recall store behind `conversation_search`, when this memory has one.
    fn recall_store(&self) -> Option<opc_memory::recall::RecallStore> {
        None
    }
    /// The facts store behind `archival_search` / `archival_insert` and the memory worker (fact
    /// extraction, consolidation), when this memory keeps long-term facts. The engine runs its
    /// memory worker only when it has one.
    fn fact_store(&self) -> Option<opc_memory::facts::FactStore> {
        None
    }
    /// Select, facts: the current facts most relevant to `task` that `agent` may read, rendered with
    /// their dates (`[fact, valid from 2026-05-17] The launch is on May 17th`), within the facts'
    /// share of the memory budget; prepended to the task message of each request (never stored).
    async fn facts(&self, _agent: &str, _task: &str) -> Vec<String> {
        Vec::new()
    }
    /// The hooks for a reloaded `config`, for the engine state the reload builds: the same storage, with
    /// the new config's blocks, permissions and recall settings. Nothing is stored and no permission
    /// changes until [`MemoryHooks::apply`]. `None`: these hooks serve any config unchanged.
    fn for_config(&self, _config: &Config, _org: Arc<OrgTree>) -> Option<Arc<dyn MemoryHooks>> {
        None
    }
    /// Commit these hooks' config (the reload's last fallible step): seed the blocks it adds in one
    /// transaction, then make its permissions the newest — those that trees already running are
    /// checked against too. On error nothing changed.
    fn apply(&self) -> Result<(), opc_memory::blocks::BlockError> {
        Ok(())
    }
}

/// No memory: the hooks return nothing.
pub struct NoMemory;

#[async_trait::async_trait]
impl MemoryHooks for NoMemory {
    async fn core_blocks(&self, _agent: &str) -> Vec<Block> {
        Vec::new()
    }
    async fn recall(&self, _agent: &str, _task: &str, _conversation: &str) -> Vec<String> {
        Vec::new()
    }
}

/// Memory with core blocks (and, once wired, recall). Build it with [`BlockMemory::open`] on the
/// engine's database file, then hand it to the engine as its [`MemoryHooks`]; the engine offers the
/// memory tools over the same store.
pub struct BlockMemory {
    blocks: BlockStore,
    recall: Option<Recall>,
    facts: Option<Facts>,
}

/// The Select step's facts settings and store.
struct Facts {
    store: opc_memory::facts::FactStore,
    /// Agents whose config has `memory.archival` on.
    agents: std::collections::HashSet<String>,
    /// Token budget of the facts in one request.
    budget: usize,
    /// `framework.memory.graph.enabled`: the multi-hop Select (facts of the entities the task names
    /// and of their neighbours join the search's).
    graph: bool,
}

/// How many facts the Select step asks for before the budget trims them.
const FACT_HITS: usize = 8;
/// Default token budget of the facts put before a task (beside recall's [`RECALL_BUDGET_TOKENS`]):
/// facts are short statements, so a third of the memory section.
pub const FACTS_BUDGET_TOKENS: usize = 300;

/// The Select step's settings and store.
struct Recall {
    store: opc_memory::recall::RecallStore,
    /// Agents whose config has `memory.recall` on.
    agents: std::collections::HashSet<String>,
    /// Token budget of the recalled text in one request.
    budget: usize,
}

/// How many hits the Select step asks for before the budget trims them.
const RECALL_HITS: usize = 16;
/// Default token budget of recalled memory per request.
pub const RECALL_BUDGET_TOKENS: usize = 600;

impl BlockMemory {
    /// Open the core blocks in the database at `path` (memory's own connection and migrations) and
    /// bring them in line with the config.
    pub fn open(
        path: &std::path::Path,
        config: &Config,
        org: Arc<OrgTree>,
    ) -> Result<BlockMemory, opc_memory::blocks::OpenError> {
        Ok(BlockMemory::over(BlockStore::open(path, config, org)?))
    }

    /// Memory over core blocks opened elsewhere (on PostgreSQL: `BlockStore::open_postgres`).
    pub fn over(blocks: BlockStore) -> BlockMemory {
        BlockMemory {
            blocks,
            recall: None,
            facts: None,
        }
    }

    /// Add the Select step: for agents with `memory.recall` on, the best hits of `store` for each
    /// task, from the namespaces the agent may read, within `budget` tokens.
    pub fn with_recall(
        mut self,
        store: opc_memory::recall::RecallStore,
        config: &Config,
        budget: usize,
    ) -> Self {
        self.recall = Some(Recall {
            store,
            agents: recall_agents(config),
            budget,
        });
        self
    }
}

impl BlockMemory {
    /// Add long-term facts: the tools and the memory worker over `store`, and the Select step for
    /// agents with `memory.archival` on: the best current facts for each task, from the namespaces
    /// the agent may read, within `budget` tokens. With `framework.memory.graph.enabled` the Select
    /// is multi-hop: the facts of the entities the task names and of their neighbours join them.
    pub fn with_facts(
        mut self,
        store: opc_memory::facts::FactStore,
        config: &Config,
        budget: usize,
    ) -> Self {
        self.facts = Some(Facts {
            store,
            agents: archival_agents(config),
            budget,
            graph: config.framework.memory.graph_enabled,
        });
        self
    }
}

/// Agents whose config has `memory.archival` on.
fn archival_agents(config: &Config) -> std::collections::HashSet<String> {
    config
        .agents
        .iter()
        .filter(|(_, a)| a.memory.archival)
        .map(|(id, _)| id.clone())
        .collect()
}

/// One fact as the Select step shows it: marked as a fact, with when it holds.
pub fn fact_line(v: &opc_memory::facts::FactVersion) -> String {
    let day = |ms: i64| {
        let text = opc_memory::facts::time::format_time(ms);
        text.get(..10).unwrap_or(&text).to_string()
    };
    let when = match (v.valid_from, v.valid_to) {
        (Some(from), Some(to)) => format!("valid {} to {}", day(from), day(to)),
        (Some(from), None) => format!("valid from {}", day(from)),
        (None, Some(to)) => format!("valid until {}", day(to)),
        (None, None) => format!("recorded {}", day(v.recorded_at)),
    };
    format!("[fact, {when}] {}", v.text.trim())
}

/// The multi-hop candidates of the Select step: the current facts about the entities `task` names
/// (matched by alias, no model call) and about their neighbours one hop away, newest first.
fn neighbour_facts(
    store: &opc_memory::facts::FactStore,
    namespaces: &[String],
    task: &str,
) -> Result<Vec<opc_memory::facts::FactVersion>, opc_memory::facts::FactError> {
    let named: Vec<i64> = store
        .entities_in(namespaces, task)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    if named.is_empty() {
        return Ok(Vec::new());
    }
    store.neighbour_facts(
        namespaces,
        &named,
        opc_memory::facts::View::Current,
        FACT_HITS,
    )
}

/// The order in which the Select step offers facts to the budget: the search's hits and the
/// graph's neighbours interleaved, the search's best first, each version once.
///
/// Why interleave rather than append the neighbours: the search always fills its `FACT_HITS`
/// (its vector half ranks every fact, however weakly related), so appended neighbours would be the
/// first cut by the budget — and they are exactly the facts a multi-hop question needs ("what is
/// Marco Diaz's deadline?" shares no word with "the Orion project ships on June 30th"). Why not
/// neighbours first: they are ordered by recency, not relevance, and a hub entity has many; the
/// search's best hit stays the first line. Alternating gives both halves the same share of the
/// budget when it is tight and changes nothing when it is not.
fn select_order(
    searched: Vec<opc_memory::facts::FactVersion>,
    neighbours: Vec<opc_memory::facts::FactVersion>,
) -> Vec<opc_memory::facts::FactVersion> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(searched.len() + neighbours.len());
    let (mut a, mut b) = (searched.into_iter(), neighbours.into_iter());
    loop {
        let (x, y) = (a.next(), b.next());
        if x.is_none() && y.is_none() {
            return out;
        }
        for v in [x, y].into_iter().flatten() {
            if seen.insert(v.id) {
                out.push(v);
            }
        }
    }
}

/// Agents whose config has `memory.recall` on.
fn recall_agents(config: &Config) -> std::collections::HashSet<String> {
    config
        .agents
        .iter()
        .filter(|(_, a)| a.memory.recall)
        .map(|(id, _)| id.clone())
        .collect()
}

/// One recalled message as the model sees it: date, author, where it was said, and the text.
fn recalled_line(message: &opc_memory::recall::Message) -> String {
    let day = opc_memory::recall::date::render_day(message.time_ms);
    let whom = if message.author == message.namespace {
        message.author.clone()
    } else {
        format!("{} to {}", message.author, message.namespace)
    };
    format!("[{day}, {whom}] {}", message.text.trim())
}

#[async_trait::async_trait]
impl MemoryHooks for BlockMemory {
    async fn core_blocks(&self, agent: &str) -> Vec<Block> {
        let store = self.blocks.clone();
        let agent_id = agent.to_string();
        match tokio::task::spawn_blocking(move || store.blocks_of(&agent_id)).await {
            Ok(Ok(blocks)) => blocks,
            // A prompt without memory is better than no answer; the failure is logged loudly.
            Ok(Err(e)) => {
                tracing::error!(agent, error = %e, "cannot read core memory blocks");
                Vec::new()
            }
            Err(e) => {
                tracing::error!(agent, error = %e, "reading core memory blocks did not finish");
                Vec::new()
            }
        }
    }
    async fn recall(&self, agent: &str, task: &str, conversation: &str) -> Vec<String> {
        let Some(recall) = &self.recall else {
            return Vec::new();
        };
        if !recall.agents.contains(agent) || task.trim().is_empty() {
            return Vec::new();
        }
        let namespaces = self.blocks.readable(agent);
        let query = opc_memory::recall::Query::new(
            task,
            namespaces,
            opc_memory::recall::Mode::Hybrid,
            RECALL_HITS,
        );
        let store = recall.store.clone();
        let span = crate::spans::memory_span(SEARCH_MEMORY, "recall");
        let hits = match tokio::task::spawn_blocking(move || store.search(&query))
            .instrument(span.clone())
            .await
        {
            Ok(Ok(hits)) => hits,
            Ok(Err(e)) => {
                tracing::error!(agent, error = %e, "recall search failed; the task runs without it");
                return Vec::new();
            }
            Err(e) => {
                tracing::error!(agent, error = %e, "recall search did not finish");
                return Vec::new();
            }
        };
        // The task itself was recorded when it was created: it is not a memory of it.
        let mut out = Vec::new();
        let mut used = 0;
        for hit in hits {
            // This conversation's messages are in the session already (and the task itself was
            // recorded when it was created); recall brings what this conversation does not have.
            if hit.message.conversation == conversation || hit.message.text.trim() == task.trim() {
                continue;
            }
            let line = recalled_line(&hit.message);
            let cost = estimate_tokens(&line);
            if used + cost > recall.budget {
                break;
            }
            used += cost;
            out.push(line);
        }
        crate::spans::memory_results(&span, out.len());
        out
    }
    fn blocks(&self) -> Option<BlockStore> {
        Some(self.blocks.clone())
    }
    fn recall_store(&self) -> Option<opc_memory::recall::RecallStore> {
        self.recall.as_ref().map(|r| r.store.clone())
    }
    fn fact_store(&self) -> Option<opc_memory::facts::FactStore> {
        self.facts.as_ref().map(|f| f.store.clone())
    }
    async fn facts(&self, agent: &str, task: &str) -> Vec<String> {
        let Some(facts) = &self.facts else {
            return Vec::new();
        };
        if !facts.agents.contains(agent) || task.trim().is_empty() {
            return Vec::new();
        }
        let namespaces: Vec<String> = self
            .blocks
            .readable(agent)
            .iter()
            .map(|owner| opc_memory::blocks::agent_namespace(owner))
            .collect();
        let query = opc_memory::facts::FactQuery {
            text: task.to_string(),
            namespaces: namespaces.clone(),
            view: opc_memory::facts::View::Current,
            limit: FACT_HITS,
        };
        let store = facts.store.clone();
        let (graph, text) = (facts.graph, task.to_string());
        let span = crate::spans::memory_span(SEARCH_MEMORY, "facts");
        let found = tokio::task::spawn_blocking(move || {
            let hits = store.search(&query)?;
            // Multi-hop: a failure here costs the neighbours only, never the search's hits.
            let neighbours = if graph {
                neighbour_facts(&store, &namespaces, &text)
            } else {
                Ok(Vec::new())
            };
            Ok::<_, opc_memory::facts::FactError>((hits, neighbours))
        })
        .instrument(span.clone())
        .await;
        let (hits, neighbours) = match found {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => {
                tracing::error!(agent, error = %e, "facts search failed; the task runs without facts");
                return Vec::new();
            }
            Err(e) => {
                tracing::error!(agent, error = %e, "facts search did not finish");
                return Vec::new();
            }
        };
        let neighbours = neighbours.unwrap_or_else(|e| {
            tracing::error!(agent, error = %e, "graph neighbours failed; the task gets the searched facts only");
            Vec::new()
        });
        let mut out = Vec::new();
        let mut used = 0;
        for version in select_order(hits.into_iter().map(|h| h.version).collect(), neighbours) {
            let line = fact_line(&version);
            let cost = estimate_tokens(&line);
            if used + cost > facts.budget {
                break;
            }
            used += cost;
            out.push(line);
        }
        crate::spans::memory_results(&span, out.len());
        out
    }
    fn for_config(&self, config: &Config, org: Arc<OrgTree>) -> Option<Arc<dyn MemoryHooks>> {
        Some(Arc::new(BlockMemory {
            blocks: self.blocks.for_config(config, org),
            recall: self.recall.as_ref().map(|r| Recall {
                store: r.store.clone(),
                agents: recall_agents(config),
                budget: r.budget,
            }),
            facts: self.facts.as_ref().map(|f| Facts {
                store: f.store.clone(),
                agents: archival_agents(config),
                budget: f.budget,
                graph: config.framework.memory.graph_enabled,
            }),
        }))
    }
    fn apply(&self) -> Result<(), opc_memory::blocks::BlockError> {
        self.blocks.apply()
    }
}

/// Builds system prompts and first messages. Prompt files are read once, when the engine starts.
#[derive(Clone)]
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
                // Through the one reader that refuses devices, directories and oversized files.
                Some(opc_hierarchy::schema::Prompt::File(path)) => {
                    opc_hierarchy::read_prompt_file(base_dir, path).map_err(|e| PromptError {
                        agent: id.clone(),
                        path: base_dir.join(path).display().to_string(),
                        source: match e {
                            opc_hierarchy::PromptFileError::Io { source, .. } => source,
                            other => std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                other.to_string(),
                            ),
                        },
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

    /// The memory hooks (the engine builds its tool registry over their block store).
    pub fn memory(&self) -> &Arc<dyn MemoryHooks> {
        &self.memory
    }

    /// The full system prompt for `agent`, as of now: the static part plus its core memory blocks
    /// (read fresh on every call). Also returns the blocks rendered, so the session knows which
    /// versions its model has seen.
    pub async fn system_prompt(&self, agent: &str) -> (String, Vec<Block>) {
        let mut out = self.static_prompts.get(agent).cloned().unwrap_or_default();
        let blocks = self.memory.core_blocks(agent).await;
        out.push_str(&render_blocks(&blocks));
        (out, blocks)
    }

    /// Select: the current facts memory holds for `agent`'s `task` and what it recalls of other
    /// conversations, as the text to put before the task in each request, or `None` when there is
    /// nothing.
    pub async fn recall_prefix(
        &self,
        agent: &str,
        task: &str,
        conversation: &str,
    ) -> Option<String> {
        // Facts first (what is believed now), then what was said in other conversations.
        let mut recalled = self.memory.facts(agent, task).await;
        recalled.extend(self.memory.recall(agent, task, conversation).await);
        if recalled.is_empty() {
            return None;
        }
        // The shape is recall's (`RECALL_HEAD` … `RECALL_TAIL`): what stores a task's text or
        // extracts from it cuts a copy of this block out by it, so it is never stored again.
        let mut text = String::from(opc_memory::recall::message::RECALL_HEAD);
        for item in recalled {
            text.push_str("- ");
            text.push_str(&item);
            text.push('\n');
        }
        // The last item's line end is the tail's first.
        text.pop();
        text.push_str(opc_memory::recall::message::RECALL_TAIL);
        Some(text)
    }
}

/// The core memory section of a system prompt: each block with its label, description, size against
/// its limit, and value. Empty when there are no blocks.
pub fn render_blocks(blocks: &[Block]) -> String {
    if blocks.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n## Core memory\nThese blocks are your memory across conversations; keep them current with \
         the memory tools when you have them.\n",
    );
    for b in blocks {
        out.push_str(&format!(
            "\n### {} ({}{}; used {} of {} characters; version {})\n{}\n<{}>\n{}\n</{}>\n",
            b.label,
            if b.is_shared() { "shared" } else { "yours" },
            if b.read_only { ", read-only" } else { "" },
            b.size(),
            b.limit,
            b.version,
            b.description,
            b.label,
            b.value,
            b.label
        ));
    }
    out
}

/// The request's messages: `messages` with `prefix` (recalled memory) put before the text of the
/// message at `index` (the task). The stored history is not changed.
pub fn with_recall(
    messages: &[Message],
    index: Option<usize>,
    prefix: Option<&str>,
) -> Vec<Message> {
    let mut out = messages.to_vec();
    if let (Some(i), Some(prefix)) = (index, prefix)
        && let Some(message) = out.get_mut(i)
    {
        message.content.insert(0, Content::text(prefix));
    }
    out
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
        tool_choice: None,
        max_tokens: (budget_tokens as u32).clamp(256, 4096),
        stream: None,
        meta,
        guard: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_render_with_size_limit_and_version() {
        let block = Block {
            namespace: "shared".into(),
            label: "plan".into(),
            description: "the plan".into(),
            value: "ship it".into(),
            limit: 50,
            read_only: true,
            version: 4,
        };
        let text = render_blocks(&[block]);
        assert!(
            text.contains(
                "### plan (shared, read-only; used 7 of 50 characters; version 4)\nthe plan\n<plan>\nship it\n</plan>\n"
            ),
            "{text}"
        );
        assert_eq!(render_blocks(&[]), "");
    }

    /// The org of the multi-hop test: one CEO keeping facts, graph memory `graph`.
    #[allow(clippy::unwrap_used)]
    fn graph_org(dir: &std::path::Path, graph: bool) -> opc_hierarchy::Loaded {
        let text = format!(
            "framework:\n  defaultModel: m\n  providers: {{ p: {{ kind: anthropic, apiKeyEnv: OPC_NO_SUCH_KEY, models: {{ m: {{ input: 1, output: 1 }} }} }} }}\n  privacy: {{ enabled: false }}\n  memory: {{ consolidation: {{ enabled: false }}, graph: {{ enabled: {graph} }} }}\nagents:\n  ceo: {{ role: CEO, memory: {{ recall: false, archival: true }} }}\n"
        );
        let path = dir.join(format!("graph-{graph}.yaml"));
        std::fs::write(&path, text).unwrap();
        opc_hierarchy::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// "What is Marco Diaz's deadline?" shares no word with "The Orion project ships on June
    /// 30th"; with graph memory the Select step still brings it, through Marco Diaz —leads→ Orion
    /// project; without, it does not.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_question_about_a_person_selects_the_fact_of_the_project_they_lead() {
        use opc_memory::facts::{Op, Provenance};
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opc.db");
        let facts =
            opc_memory::facts::FactStore::open(&db, opc_memory::embed::EmbedSlot::new()).unwrap();
        let add = |text: &str, subject: &str, relation: Option<(&str, &str)>| Op::Add {
            text: text.into(),
            subject: Some(subject.into()),
            predicate: relation.map(|(p, _)| p.to_string()),
            object: relation.map(|(_, o)| o.to_string()),
            valid_from: None,
            valid_to: None,
        };
        let ops = [
            add(
                "Marco Diaz leads the Orion project",
                "Marco Diaz",
                Some(("leads", "Orion project")),
            ),
            add(
                "The Orion project ships on June 30th",
                "Orion project",
                None,
            ),
            add(
                "The cafeteria closes at three on Fridays",
                "cafeteria",
                None,
            ),
        ];
        let provenance = Provenance {
            agent: "ceo".into(),
            ..Provenance::default()
        };
        facts
            .apply(
                &opc_memory::blocks::agent_namespace("ceo"),
                &ops,
                &provenance,
                1_000,
            )
            .unwrap();
        let question = "What is Marco Diaz's deadline?";
        let mut selected = Vec::new();
        for graph in [false, true] {
            let loaded = graph_org(dir.path(), graph);
            let memory = BlockMemory::open(&db, &loaded.config, Arc::new(loaded.org.clone()))
                .unwrap()
                .with_facts(facts.clone(), &loaded.config, FACTS_BUDGET_TOKENS);
            selected.push(memory.facts("ceo", question).await);
        }
        let has = |lines: &[String], text: &str| lines.iter().any(|l| l.ends_with(text));
        let (without, with) = (&selected[0], &selected[1]);
        assert!(
            has(without, "Marco Diaz leads the Orion project"),
            "{without:?}"
        );
        assert!(
            !has(without, "The Orion project ships on June 30th"),
            "no word in common, no graph: {without:?}"
        );
        assert!(has(with, "Marco Diaz leads the Orion project"), "{with:?}");
        assert!(
            has(with, "The Orion project ships on June 30th"),
            "{with:?}"
        );
        assert!(
            !has(with, "The cafeteria closes at three on Fridays"),
            "{with:?}"
        );
        assert_eq!(
            with.iter()
                .filter(|l| l.ends_with("Marco Diaz leads the Orion project"))
                .count(),
            1,
            "a fact both searched and a neighbour is listed once: {with:?}"
        );
    }

    #[test]
    fn the_select_order_alternates_and_lists_each_version_once() {
        let v = |id: i64| opc_memory::facts::FactVersion {
            id,
            fact_id: id,
            namespace: "agent/ceo".into(),
            text: format!("fact {id}"),
            subject: None,
            predicate: None,
            object: None,
            valid_from: None,
            valid_to: None,
            recorded_at: 0,
            invalidated_at: None,
            reason: None,
            source: opc_memory::facts::Source::Agent,
            agent: "ceo".into(),
            task: None,
            conversation: None,
            source_messages: Vec::new(),
            model: None,
            ledger_id: None,
        };
        let ids =
            |vs: Vec<opc_memory::facts::FactVersion>| vs.iter().map(|v| v.id).collect::<Vec<_>>();
        assert_eq!(
            ids(select_order(vec![v(1), v(2), v(3)], vec![v(2), v(9)])),
            [1, 2, 9, 3]
        );
        assert_eq!(ids(select_order(vec![], vec![v(5)])), [5]);
        assert_eq!(ids(select_order(vec![v(4)], vec![])), [4]);
    }

    #[test]
    fn recall_goes_into_the_request_not_the_history() {
        let history = vec![Message::user("earlier"), Message::user("the task")];
        let request = with_recall(&history, Some(1), Some("Relevant memory:\n- x\n\nTask:\n"));
        assert_eq!(
            request[1].text(),
            "Relevant memory:\n- x\n\nTask:\nthe task"
        );
        assert_eq!(request[0].text(), "earlier");
        assert_eq!(history[1].text(), "the task");
        assert_eq!(with_recall(&history, Some(1), None), history);
    }
}
