//! `archival_search` and `archival_insert`: an agent reads and writes its long-term facts
//! (`opc_memory::facts`) beyond what the Select step put before its task.
//!
//! Offered to every agent whose config has `memory.archival: true` (the facts are its memory; the
//! hierarchy's tool list has no entry for them).
//!
//! Invariants:
//! - the namespaces searched are decided by the block store's ACL — recall's — before the facts
//!   store is touched: the agent's own, or one named agent's when the ACL lets it read that agent (a
//!   superior reads every descendant; a sibling only through `shareWith`). A refusal is a tool error
//!   the model can act on;
//! - an insert goes to the caller's own namespace only, as one versioned ADD with source `agent` and
//!   the task and conversation it came from (an exact duplicate of a current fact is dropped);
//! - `at` (RFC 3339 or a date) searches what was believed then (`View::BelievedAt`), so a model can
//!   ask what it knew before a change.

use std::sync::Arc;

use async_trait::async_trait;
use opc_hierarchy::schema::Agent;
use opc_memory::blocks::{BlockStore, agent_namespace};
use opc_memory::facts::{FactQuery, FactStore, FactVersion, Provenance, Source, View};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SpecContext, ToolContext, ToolHandler, ToolRegistry, ToolResult, Validate, parse};
use crate::llm::ToolSpec;

/// Wire name of the search tool.
pub const ARCHIVAL_SEARCH: &str = "archival_search";
/// Wire name of the insert tool.
pub const ARCHIVAL_INSERT: &str = "archival_insert";

/// Most hits one search returns.
const MAX_LIMIT: usize = 20;
/// Hits when the model gives no `limit`.
const DEFAULT_LIMIT: usize = 5;
/// Longest fact an insert accepts, in characters (a fact is one statement).
const MAX_TEXT: usize = 2_000;

/// Register both tools over `facts`, with the ACL of `blocks`.
pub(super) fn register(registry: &mut ToolRegistry, blocks: BlockStore, facts: FactStore) {
    registry.register(Arc::new(ArchivalSearch {
        blocks: blocks.clone(),
        facts: facts.clone(),
    }));
    registry.register(Arc::new(ArchivalInsert { facts }));
}

struct ArchivalSearch {
    /// For its ACL (the tree's config, and the newest config's revocations).
    blocks: BlockStore,
    facts: FactStore,
}

struct ArchivalInsert {
    facts: FactStore,
}

/// `archival_search` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    at: Option<String>,
}

impl Validate for SearchArgs {
    fn validate(&self) -> Result<(), String> {
        if self.query.trim().is_empty() {
            return Err("`query` must not be empty".into());
        }
        if let Some(at) = &self.at {
            opc_memory::facts::time::parse_time(at).map_err(|e| format!("`at`: {e}"))?;
        }
        match self.limit {
            Some(n) if n == 0 || n > MAX_LIMIT => {
                Err(format!("`limit` must be between 1 and {MAX_LIMIT}"))
            }
            _ => Ok(()),
        }
    }
}

/// `archival_insert` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertArgs {
    text: String,
    #[serde(default)]
    subject: Option<String>,
}

impl Validate for InsertArgs {
    fn validate(&self) -> Result<(), String> {
        if self.text.trim().is_empty() {
            return Err("`text` must not be empty".into());
        }
        if self.text.chars().count() > MAX_TEXT {
            return Err(format!(
                "`text` is longer than {MAX_TEXT} characters: record one statement per fact"
            ));
        }
        match &self.subject {
            Some(s) if s.trim().is_empty() => Err("`subject` must not be empty when given".into()),
            _ => Ok(()),
        }
    }
}

/// `YYYY-MM-DD` of a time in Unix ms (UTC).
fn day(ms: i64) -> String {
    let text = opc_memory::facts::time::format_time(ms);
    text.get(..10).unwrap_or(&text).to_string()
}

/// One fact as a model reads it: its id, whose it is, when it holds, and the statement.
pub(crate) fn render_fact(v: &FactVersion) -> String {
    let when = match (v.valid_from, v.valid_to) {
        (Some(from), Some(to)) => format!("valid {} to {}", day(from), day(to)),
        (Some(from), None) => format!("valid from {}", day(from)),
        (None, Some(to)) => format!("valid until {}", day(to)),
        (None, None) => format!("recorded {}", day(v.recorded_at)),
    };
    let subject = v
        .subject
        .as_deref()
        .map(|s| format!(", about {s}"))
        .unwrap_or_default();
    format!(
        "[fact {} of {}, {when}{subject}] {}",
        v.id,
        v.agent,
        v.text.trim()
    )
}

#[async_trait]
impl ToolHandler for ArchivalSearch {
    fn name(&self) -> &'static str {
        ARCHIVAL_SEARCH
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.memory.archival
    }

    fn spec(&self, _cx: &SpecContext<'_>) -> ToolSpec {
        ToolSpec {
            name: ARCHIVAL_SEARCH.to_string(),
            description: "Search long-term facts (yours, and those of agents whose memory you may \
                          read) about `query`. Each hit shows the fact's id, whose it is, when it \
                          holds, and the statement. With `at` (RFC 3339 or a date), search what was \
                          believed at that time instead of now."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                    "agent": {"type": "string", "minLength": 1, "description": "search only this agent's facts"},
                    "at": {"type": "string", "description": "RFC 3339 time or YYYY-MM-DD: the facts believed then"}
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
        let owners = match super::search::searched(&self.blocks, me, args.agent.as_deref()) {
            Ok(owners) => owners,
            Err(e) => return Ok((e, true)),
        };
        let view = match args.at.as_deref().map(opc_memory::facts::time::parse_time) {
            Some(Ok(t)) => View::BelievedAt(t),
            // Checked by `validate`.
            Some(Err(e)) => return Ok((format!("`at`: {e}"), true)),
            None => View::Current,
        };
        let query = FactQuery {
            text: args.query,
            namespaces: owners.iter().map(|o| agent_namespace(o)).collect(),
            view,
            limit: args.limit.unwrap_or(DEFAULT_LIMIT),
        };
        let facts = self.facts.clone();
        let hits = match tokio::task::spawn_blocking(move || facts.search(&query)).await {
            Ok(Ok(hits)) => hits,
            Ok(Err(e)) => return Ok((format!("the search failed: {e}"), true)),
            Err(e) => return Ok((format!("the search did not finish: {e}"), true)),
        };
        if hits.is_empty() {
            return Ok(("No facts found.".to_string(), false));
        }
        let mut out = String::new();
        for (i, hit) in hits.iter().enumerate() {
            out.push_str(&format!("{}. {}\n", i + 1, render_fact(&hit.version)));
        }
        Ok((out, false))
    }
}

#[async_trait]
impl ToolHandler for ArchivalInsert {
    fn name(&self) -> &'static str {
        ARCHIVAL_INSERT
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.memory.archival
    }

    fn spec(&self, _cx: &SpecContext<'_>) -> ToolSpec {
        ToolSpec {
            name: ARCHIVAL_INSERT.to_string(),
            description: "Record one long-term fact in your memory: a self-contained statement with \
                          names and absolute dates (\"The Orion launch is on 2026-05-17\"). `subject` \
                          names what it is about, spelled the same way every time."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
                    "subject": {"type": "string", "minLength": 1}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult {
        let args: InsertArgs = match parse(self.name(), input) {
            Ok(a) => a,
            Err(e) => return Ok((e, true)),
        };
        let agent = cx.agent().to_string();
        let provenance = Provenance {
            agent: agent.clone(),
            task: Some(cx.task()),
            conversation: Some(cx.conversation().to_string()),
            source: Source::Agent,
            ..Provenance::default()
        };
        let facts = self.facts.clone();
        let now = crate::store::now_ms();
        let outcome = tokio::task::spawn_blocking(move || {
            facts.insert(
                &agent_namespace(&agent),
                args.text.trim(),
                args.subject.as_deref().map(str::trim),
                &provenance,
                now,
            )
        })
        .await;
        Ok(match outcome {
            Ok(Ok(applied)) => match applied.added.first() {
                Some(id) => (format!("recorded as fact version {id}"), false),
                None => (
                    "already known: a current fact says exactly this; nothing was added".into(),
                    false,
                ),
            },
            Ok(Err(e)) => (format!("not recorded: {e}"), true),
            Err(e) => (format!("the insert did not finish: {e}"), true),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn schemas_and_decoders_agree() {
        assert!(
            parse::<SearchArgs>(
                ARCHIVAL_SEARCH,
                &json!({"query": "launch", "limit": 3, "agent": "vp", "at": "2026-05-04"})
            )
            .is_ok()
        );
        let err = parse::<SearchArgs>(ARCHIVAL_SEARCH, &json!({"query": "x", "at": "tuesday"}))
            .unwrap_err();
        assert!(err.contains("`at`") && err.contains("RFC 3339"), "{err}");
        let err =
            parse::<SearchArgs>(ARCHIVAL_SEARCH, &json!({"query": "x", "limit": 0})).unwrap_err();
        assert!(err.contains("between 1 and"), "{err}");
        let err = parse::<InsertArgs>(ARCHIVAL_INSERT, &json!({"text": " "})).unwrap_err();
        assert!(err.contains("`text` must not be empty"), "{err}");
        let err =
            parse::<InsertArgs>(ARCHIVAL_INSERT, &json!({"text": "a", "extra": 1})).unwrap_err();
        assert!(err.contains("unknown field `extra`"), "{err}");
    }

    #[test]
    fn a_fact_renders_with_its_id_owner_and_dates() {
        let v = FactVersion {
            id: 7,
            fact_id: 3,
            namespace: "agent/ceo".into(),
            text: "The launch is on May 17th".into(),
            subject: Some("launch".into()),
            predicate: None,
            object: None,
            valid_from: Some(opc_memory::facts::time::parse_time("2026-05-17").unwrap()),
            valid_to: None,
            recorded_at: 0,
            invalidated_at: None,
            reason: None,
            source: Source::Agent,
            agent: "ceo".into(),
            task: None,
            conversation: None,
            source_messages: Vec::new(),
            model: None,
            ledger_id: None,
        };
        assert_eq!(
            render_fact(&v),
            "[fact 7 of ceo, valid from 2026-05-17, about launch] The launch is on May 17th"
        );
    }
}
