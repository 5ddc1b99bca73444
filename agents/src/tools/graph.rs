//! `graph_search`: an agent walks the graph of entities and relations kept on its long-term facts
//! (`opc_memory::facts::graph`) from one entity, up to three hops, now or as believed at a past time.
//!
//! Offered to every agent whose config has `memory.archival: true`, and registered only when the
//! engine's config has `framework.memory.graph.enabled` (the engine adds it per config state, so a
//! reload turns it on or off).
//!
//! Invariants:
//! - the namespaces walked are decided by the block store's ACL exactly as `archival_search` does
//!   (the agent's own and those it may read, or one named agent's when the ACL lets it read that
//!   agent) before the facts store is touched; a refusal is a tool error the model can act on;
//! - every argument the model can get wrong is a tool error saying what is allowed: an empty
//!   entity, a depth outside 1..=3, an `at` that is not a time, an entity the memory does not know;
//! - the answer is bounded ([`MAX_EDGES`] relations) and says when it was cut, so a hub entity
//!   cannot flood the context.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use opc_hierarchy::schema::Agent;
use opc_memory::blocks::{BlockStore, agent_namespace};
use opc_memory::facts::graph::{Graph, GraphEdge, GraphQuery};
use opc_memory::facts::{FactStore, View};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SpecContext, ToolContext, ToolHandler, ToolRegistry, ToolResult, Validate, parse};
use crate::llm::ToolSpec;

/// Wire name of the tool.
pub const GRAPH_SEARCH: &str = "graph_search";

/// Deepest walk a call may ask for (the store's limit too).
const MAX_DEPTH: i64 = 3;
/// Hops when the model gives no `depth`.
const DEFAULT_DEPTH: u8 = 1;
/// Most relations one answer lists: enough for a neighbourhood, short enough for a context window
/// (a relation line is ~30 tokens, so ~1,800 tokens at most).
const MAX_EDGES: usize = 60;

/// Register `graph_search` over `facts`, with the ACL of `blocks`.
pub(super) fn register(registry: &mut ToolRegistry, blocks: BlockStore, facts: FactStore) {
    registry.register(Arc::new(GraphSearch { blocks, facts }));
}

struct GraphSearch {
    /// For its ACL (the tree's config, and the newest config's revocations).
    blocks: BlockStore,
    facts: FactStore,
}

/// `graph_search` arguments. `depth` is decoded wide so that `0`, `-1` or `7` get the range
/// message rather than a decoder's type error.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphArgs {
    entity: String,
    #[serde(default)]
    depth: Option<i64>,
    #[serde(default)]
    at: Option<String>,
    #[serde(default)]
    agent: Option<String>,
}

impl Validate for GraphArgs {
    fn validate(&self) -> Result<(), String> {
        if self.entity.trim().is_empty() {
            return Err("`entity` must not be empty: name a person, project or thing".into());
        }
        if let Some(d) = self.depth
            && !(1..=MAX_DEPTH).contains(&d)
        {
            return Err(format!(
                "`depth` must be between 1 and {MAX_DEPTH} (hops from the entity), not {d}"
            ));
        }
        if let Some(at) = &self.at {
            opc_memory::facts::time::parse_time(at).map_err(|e| format!("`at`: {e}"))?;
        }
        match &self.agent {
            Some(a) if a.trim().is_empty() => Err("`agent` must not be empty when given".into()),
            _ => Ok(()),
        }
    }
}

/// The JSON Schema of the arguments (what [`GraphArgs`] and its `validate` accept).
fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "entity": {"type": "string", "minLength": 1, "description": "a name or alias, e.g. `Marco Diaz`"},
            "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "default": DEFAULT_DEPTH},
            "at": {"type": "string", "description": "RFC 3339 time or YYYY-MM-DD: the relations believed then"},
            "agent": {"type": "string", "minLength": 1, "description": "walk only this agent's memory"}
        },
        "required": ["entity"],
        "additionalProperties": false
    })
}

/// `YYYY-MM-DD` of a time in Unix ms (UTC).
fn day(ms: i64) -> String {
    let text = opc_memory::facts::time::format_time(ms);
    text.get(..10).unwrap_or(&text).to_string()
}

/// When a relation holds, as a model reads it: world validity, and when it stopped being believed
/// (only a past view shows closed ones).
fn validity(e: &GraphEdge) -> String {
    let mut when = match (e.valid_from, e.valid_to) {
        (Some(from), Some(to)) => format!("valid {} to {}", day(from), day(to)),
        (Some(from), None) => format!("valid from {}", day(from)),
        (None, Some(to)) => format!("valid until {}", day(to)),
        (None, None) => format!("recorded {}", day(e.recorded_at)),
    };
    if let Some(closed) = e.invalidated_at {
        when.push_str(&format!(", replaced {}", day(closed)));
    }
    when
}

/// The answer: the entity asked for, one line per relation (`A -[predicate]-> B`, the fact's id,
/// validity and statement), then the entities met with their aliases. Plain lines rather than JSON:
/// a model reads `A -[leads]-> B` at a glance, with no ids to join by hand.
fn render(graph: &Graph, asked: &str, depth: u8, view: View) -> String {
    let names: HashMap<i64, &opc_memory::facts::graph::GraphNode> =
        graph.nodes.iter().map(|n| (n.id, n)).collect();
    let name = |id: i64| {
        names
            .get(&id)
            .map_or_else(|| format!("entity {id}"), |n| n.name.clone())
    };
    let root = graph.root.map_or_else(|| asked.to_string(), name);
    let when = match view {
        View::BelievedAt(t) => {
            format!("as believed at {}", opc_memory::facts::time::format_time(t))
        }
        _ => "current".to_string(),
    };
    let mut out = format!(
        "Relations within {depth} hop{} of {root} ({when}):\n",
        if depth == 1 { "" } else { "s" }
    );
    if graph.edges.is_empty() {
        out.push_str("(none: the entity is known, but no fact relates it to another)\n");
    }
    for (i, e) in graph.edges.iter().enumerate() {
        out.push_str(&format!(
            "{}. {} -[{}]-> {}  [fact {}, {}] {}\n",
            i + 1,
            name(e.from),
            e.predicate,
            name(e.to),
            e.fact_id,
            validity(e),
            e.text.trim()
        ));
    }
    if graph.truncated {
        out.push_str(&format!(
            "(cut at {} relations: ask with a smaller depth or about a nearer entity)\n",
            graph.edges.len()
        ));
    }
    let mut nodes: Vec<&opc_memory::facts::graph::GraphNode> = graph.nodes.iter().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let listed: Vec<String> = nodes
        .iter()
        .map(|n| {
            let aliases: Vec<&str> = n
                .aliases
                .iter()
                .map(String::as_str)
                .filter(|a| *a != n.name)
                .collect();
            if aliases.is_empty() {
                n.name.clone()
            } else {
                format!("{} (also: {})", n.name, aliases.join(", "))
            }
        })
        .collect();
    if !listed.is_empty() {
        out.push_str(&format!("Entities: {}\n", listed.join("; ")));
    }
    out
}

#[async_trait]
impl ToolHandler for GraphSearch {
    fn name(&self) -> &'static str {
        GRAPH_SEARCH
    }

    fn offered_to(&self, agent: &Agent) -> bool {
        agent.memory.archival
    }

    fn spec(&self, _cx: &SpecContext<'_>) -> ToolSpec {
        ToolSpec {
            name: GRAPH_SEARCH.to_string(),
            description: "Walk the relations between people, projects and things in long-term \
                          memory (yours, and that of agents whose memory you may read), starting \
                          from `entity` (a name or alias), up to `depth` hops (1 to 3, default 1). \
                          Each relation shows `A -[predicate]-> B`, the fact it comes from, and when \
                          it holds. Use it for questions that need a hop, such as a person's \
                          project's deadline. With `at` (RFC 3339 or a date), the relations believed \
                          at that time instead of now."
                .to_string(),
            input_schema: input_schema(),
        }
    }

    async fn run(&self, cx: &ToolContext<'_>, input: &Value) -> ToolResult {
        let args: GraphArgs = match parse(self.name(), input) {
            Ok(a) => a,
            Err(e) => return Ok((e, true)),
        };
        let owners = match super::search::searched(&self.blocks, cx.agent(), args.agent.as_deref())
        {
            Ok(owners) => owners,
            Err(e) => return Ok((e, true)),
        };
        let view = match args.at.as_deref().map(opc_memory::facts::time::parse_time) {
            Some(Ok(t)) => View::BelievedAt(t),
            // Checked by `validate`.
            Some(Err(e)) => return Ok((format!("`at`: {e}"), true)),
            None => View::Current,
        };
        // In 1..=3 (checked by `validate`).
        let depth = args
            .depth
            .and_then(|d| u8::try_from(d).ok())
            .unwrap_or(DEFAULT_DEPTH);
        let entity = args.entity.trim().to_string();
        let query = GraphQuery {
            namespaces: owners.iter().map(|o| agent_namespace(o)).collect(),
            entity: Some(entity.clone()),
            depth,
            view,
            max_edges: MAX_EDGES,
        };
        let facts = self.facts.clone();
        let graph = match tokio::task::spawn_blocking(move || facts.graph(&query)).await {
            Ok(Ok(graph)) => graph,
            Ok(Err(e)) => return Ok((format!("the graph search failed: {e}"), true)),
            Err(e) => return Ok((format!("the graph search did not finish: {e}"), true)),
        };
        if graph.root.is_none() {
            let whose = match args.agent.as_deref() {
                Some(a) => format!("`{a}`'s memory"),
                None => "the memory you may read".to_string(),
            };
            let when = match view {
                View::BelievedAt(_) => " at that time",
                _ => "",
            };
            return Ok((
                format!(
                    "no entity named `{entity}` in {whose}{when}: entities are the subjects and \
                     objects of recorded facts, matched by name or alias; try `archival_search` \
                     to find how it is spelled"
                ),
                true,
            ));
        }
        Ok((render(&graph, &entity, depth, view), false))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use opc_memory::facts::graph::GraphNode;

    #[test]
    fn schema_and_decoder_agree() {
        let ok: GraphArgs = parse(
            GRAPH_SEARCH,
            &json!({"entity": "Marco Diaz", "depth": 2, "at": "2026-05-04", "agent": "vp"}),
        )
        .unwrap();
        assert_eq!(ok.depth, Some(2));
        for (input, needle) in [
            (json!({"entity": " "}), "`entity` must not be empty"),
            (
                json!({"entity": "x", "depth": 0}),
                "`depth` must be between 1 and 3",
            ),
            (
                json!({"entity": "x", "depth": 4}),
                "`depth` must be between 1 and 3",
            ),
            (
                json!({"entity": "x", "depth": -1}),
                "`depth` must be between 1 and 3",
            ),
            (json!({"entity": "x", "at": "tuesday"}), "RFC 3339"),
            (json!({"entity": "x", "extra": 1}), "unknown field `extra`"),
            (json!({"depth": 1}), "missing field `entity`"),
        ] {
            let err = parse::<GraphArgs>(GRAPH_SEARCH, &input).unwrap_err();
            assert!(err.contains(needle), "{input}: {err}");
        }
        let schema = input_schema();
        assert_eq!(schema["properties"]["depth"]["maximum"], json!(MAX_DEPTH));
        assert_eq!(schema["required"], json!(["entity"]));
        assert_eq!(schema["additionalProperties"], json!(false));
    }

    #[test]
    fn a_graph_renders_one_line_per_relation_with_its_fact_and_validity() {
        let node = |id: i64, name: &str, aliases: &[&str]| GraphNode {
            id,
            name: name.into(),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            namespace: "agent/ceo".into(),
        };
        let graph = Graph {
            nodes: vec![
                node(1, "Marco Diaz", &["Marco Diaz", "Marco"]),
                node(2, "Orion project", &[]),
            ],
            edges: vec![GraphEdge {
                from: 1,
                to: 2,
                predicate: "leads".into(),
                fact_id: 12,
                version_id: 30,
                text: "Marco Diaz leads the Orion project".into(),
                valid_from: Some(opc_memory::facts::time::parse_time("2026-01-01").unwrap()),
                valid_to: None,
                recorded_at: 0,
                invalidated_at: None,
            }],
            truncated: true,
            root: Some(1),
        };
        let text = render(&graph, "marco", 1, View::Current);
        assert_eq!(
            text,
            "Relations within 1 hop of Marco Diaz (current):\n\
             1. Marco Diaz -[leads]-> Orion project  [fact 12, valid from 2026-01-01] Marco Diaz leads the Orion project\n\
             (cut at 1 relations: ask with a smaller depth or about a nearer entity)\n\
             Entities: Marco Diaz (also: Marco); Orion project\n"
        );
    }
}
