//! `conversation_search`: the agent digs into recall memory (every message of past sessions) beyond
//! what the Select step put before its task.
//!
//! Invariant: the namespaces searched are decided by memory's ACL before the store is touched — an
//! agent's own, or one named agent's when the ACL lets it read that agent (a superior reads every
//! descendant; a sibling only through `shareWith`). A refusal is a tool error the model can act on.

use std::sync::Arc;

use async_trait::async_trait;
use opc_hierarchy::schema::{Agent, Tool};
use opc_memory::blocks::BlockStore;
use opc_memory::recall::{Mode, Query, RecallStore};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SpecContext, ToolContext, ToolHandler, ToolRegistry, ToolResult, Validate, parse};
use crate::llm::ToolSpec;

/// Most hits one search returns.
const MAX_LIMIT: usize = 20;
/// Hits when the model gives no `limit`.
const DEFAULT_LIMIT: usize = 5;
/// Characters of one hit's text shown to the model.
const HIT_CHARS: usize = 600;

/// The namespaces a memory search by `me` covers: `only`'s, when `me` may read it (else the ACL's
/// refusal, as the tool's error), or every namespace `me` may read. Recall and facts share it, so
/// both tools answer the same question the same way.
pub(super) fn searched(
    blocks: &BlockStore,
    me: &str,
    only: Option<&str>,
) -> Result<Vec<String>, String> {
    match only {
        Some(owner) => blocks
            .check_read(me, owner)
            .map(|()| vec![owner.to_string()])
            .map_err(|e| e.to_string()),
        None => Ok(blocks.readable(me)),
    }
}

/// Register `conversation_search` over `recall`, with the ACL of `blocks`.
pub(super) fn register(registry: &mut ToolRegistry, blocks: BlockStore, recall: RecallStore) {
    registry.register(Arc::new(ConversationSearch { blocks, recall }));
}

struct ConversationSearch {
    /// For its ACL (the tree's config, and the newest config's revocations).
    blocks: BlockStore,
    recall: RecallStore,
}

/// `conversation_search` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    agent: Option<String>,
}

impl Validate for SearchArgs {
    fn validate(&self) -> Result<(), String> {
        if self.query.trim().is_empty() {
            return Err("`query` must not be empty".into());
        }
        match self.limit {
            Some(0) => Err(format!("`limit` must be between 1 and {MAX_LIMIT}")),
            Some(n) if n > MAX_LIMIT => Err(format!("`limit` must be between 1 and {MAX_LIMIT}")),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl ToolHandler for ConversationSearch {
    fn name(&self) -> &'static str {
        Tool::ConversationSearch.wire_name()
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.tools.contains(&Tool::ConversationSearch)
    }

    fn spec(&self, _cx: &SpecContext<'_>) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description:
                "Search past conversations (yours, and those of agents whose memory you may \
                          read) for messages about `query`. Each hit shows its date, who wrote it, \
                          and the text."
                    .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                    "agent": {"type": "string", "minLength": 1, "description": "search only this agent's memory"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult {
        let args: SearchArgs = match parse(self.name(), input) {
            Ok(a) => a,
            Err(e) => return Ok((e, true)),
        };
        let me = cx.agent();
        let namespaces = match searched(&self.blocks, me, args.agent.as_deref()) {
            Ok(namespaces) => namespaces,
            Err(e) => return Ok((e, true)),
        };
        let query = Query::new(
            args.query,
            namespaces,
            Mode::Hybrid,
            args.limit.unwrap_or(DEFAULT_LIMIT),
        );
        let recall = self.recall.clone();
        let hits = match tokio::task::spawn_blocking(move || recall.search(&query)).await {
            Ok(Ok(hits)) => hits,
            Ok(Err(e)) => return Ok((format!("the search failed: {e}"), true)),
            Err(e) => return Ok((format!("the search did not finish: {e}"), true)),
        };
        if hits.is_empty() {
            return Ok(("No messages found.".to_string(), false));
        }
        let mut out = String::new();
        for (i, hit) in hits.iter().enumerate() {
            let m = &hit.message;
            let day = opc_memory::recall::date::render_day(m.time_ms);
            let text: String = m.text.trim().chars().take(HIT_CHARS).collect();
            let more = if m.text.trim().chars().count() > HIT_CHARS {
                " …"
            } else {
                ""
            };
            out.push_str(&format!(
                "{}. [{day}, {} in {}'s memory, conversation {}] {text}{more}\n",
                i + 1,
                m.author,
                m.namespace,
                m.conversation
            ));
        }
        Ok((out, false))
    }
}
