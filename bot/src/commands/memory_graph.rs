//! `opc memory graph AGENT`: the entities and relations kept on an agent's long-term facts, whole
//! or around one entity (`--entity`, `--depth` hops), as believed now or at a past time (`--at`),
//! printed for a person (`text`), a program (`json`), Graphviz (`dot`) or Neo4j (`cypher`).
//!
//! Read-only and safe beside a running `opc run`, like `opc memory facts`: the store is opened with
//! [`FactStore::open_read_only`] (SQLite: no migration, WAL readers beside the engine's writer;
//! PostgreSQL: a read-only session), and nothing is created when the database does not exist yet.
//! The graph is AGENT's own namespace (`agent/<id>`), as `opc memory facts` lists it; what its
//! tools may read beyond that is `graph_search`'s business.
//!
//! Errors say what and how to fix, with exit code 1 for what the user typed (an unknown agent or
//! entity; a bad time or depth is refused by the argument parser, exit 2) and 2 for the store.

use std::path::Path;
use std::process::ExitCode;

use opc_memory::embed::EmbedSlot;
use opc_memory::facts::graph::{Graph, GraphQuery};
use opc_memory::facts::time::{format_time as rfc3339, parse_time};
use opc_memory::facts::{FactStore, View};

use crate::term::{eprint, print};

/// Relations printed at most when no `--max-edges` is given: a whole org's graph stays readable and
/// a Graphviz layout stays quick; the output says when it was cut.
const DEFAULT_MAX_EDGES: usize = 2_000;

/// Options of `opc memory graph`.
#[derive(Debug, clap::Args)]
pub struct GraphArgs {
    /// The agent whose graph (the relations on its own facts, `agent/<id>`).
    pub agent: String,
    /// Only the neighbourhood of this entity (a name or alias, as the facts spell it).
    #[arg(long, value_name = "NAME")]
    pub entity: Option<String>,
    /// Hops from `--entity` (1 to 3).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=3), requires = "entity", allow_negative_numbers = true)]
    pub depth: u8,
    /// The graph as the agent believed it at TIME (relations recorded by then and not yet replaced).
    /// TIME is RFC 3339 (`2026-05-03T14:00:00Z`) or a date (`2026-05-03`, its start in UTC).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub at: Option<i64>,
    /// Most relations printed (the output says when there were more).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_EDGES, value_parser = max_edges)]
    pub max_edges: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = GraphFormat::Text)]
    pub format: GraphFormat,
}

/// Output format of `opc memory graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    /// One line per relation: `Marco Diaz —leads→ Orion project  [fact 12, valid from …]`.
    Text,
    /// `{"nodes":[{id,name,aliases}],"edges":[{from,to,predicate,fact_id,text,valid_from,valid_to}],
    /// "truncated","root"}`; `from`/`to` are node ids, times RFC 3339 or null.
    Json,
    /// A Graphviz digraph (`opc memory graph ceo --format dot | dot -Tsvg > graph.svg`).
    Dot,
    /// `MERGE` statements that load the graph into Neo4j (`| cypher-shell`).
    Cypher,
}

/// `--max-edges`: a count from 1 to 1,000,000.
fn max_edges(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!("{text:?} is not a count from 1 to 1000000")),
    }
}

impl GraphArgs {
    /// The view `--at` asks for.
    fn view(&self) -> View {
        self.at.map_or(View::Current, View::BelievedAt)
    }
}

/// `opc memory graph AGENT …`.
pub fn graph(config: &Path, args: GraphArgs) -> ExitCode {
    let loaded = match crate::setup::load_config(config) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let Some(agent) = loaded.config.agents.get(&args.agent) else {
        eprint(&format!(
            "error: there is no agent `{}` in {}; agents: {}\n",
            args.agent,
            config.display(),
            loaded.org.agent_ids().collect::<Vec<_>>().join(", ")
        ));
        return ExitCode::from(1);
    };
    if !loaded.config.framework.memory.graph_enabled {
        eprint(
            "note: graph memory is off (`framework.memory.graph.enabled`): no new relations are recorded; printing what is stored\n",
        );
    } else if !agent.memory.archival {
        eprint(&format!(
            "note: `{}` has archival memory off (`agents.{}.memory.archival`): no new relations are recorded; printing what is stored\n",
            args.agent, args.agent
        ));
    }
    let view = args.view();
    let database = match crate::setup::database(&loaded) {
        Ok(database) => database,
        Err(code) => return code,
    };
    let graph = match &database {
        crate::setup::Database::Sqlite(path) if !path.exists() => {
            // Nothing was ever stored: say so rather than create a database the engine did not ask for.
            eprint(&format!(
                "note: {} does not exist yet (it is created when `opc run` or `opc chat` first starts)\n",
                path.display()
            ));
            if let Some(entity) = &args.entity {
                return unknown_entity(&args.agent, entity, view);
            }
            Graph {
                nodes: Vec::new(),
                edges: Vec::new(),
                truncated: false,
                root: None,
            }
        }
        database => {
            let opened = match database {
                crate::setup::Database::Sqlite(path) => {
                    FactStore::open_read_only(path, EmbedSlot::new())
                }
                crate::setup::Database::Postgres { url, .. } => {
                    opc_pg::Blocking::connect(url, "facts")
                        .map_err(opc_memory::facts::FactError::from)
                        .and_then(|conn| FactStore::open_postgres_read_only(conn, EmbedSlot::new()))
                }
            };
            let store = match opened {
                Ok(store) => store,
                Err(e) => {
                    eprint(&format!("error: {e}\n"));
                    return ExitCode::from(2);
                }
            };
            let query = GraphQuery {
                namespaces: vec![opc_memory::blocks::agent_namespace(&args.agent)],
                entity: args.entity.clone(),
                depth: args.depth,
                view,
                max_edges: args.max_edges,
            };
            match store.graph(&query) {
                Ok(graph) => graph,
                Err(e) => {
                    eprint(&format!("error: {e}\n"));
                    return ExitCode::from(2);
                }
            }
        }
    };
    if let Some(entity) = &args.entity
        && graph.root.is_none()
    {
        return unknown_entity(&args.agent, entity, view);
    }
    if graph.truncated {
        eprint(&format!(
            "note: cut at {} relations (--max-edges); narrow it with --entity and --depth, or raise --max-edges\n",
            graph.edges.len()
        ));
    }
    print(&render(&graph, args.format));
    ExitCode::SUCCESS
}

/// The error for an entity the agent's graph does not know (at that time).
fn unknown_entity(agent: &str, entity: &str, view: View) -> ExitCode {
    let when = match view {
        View::BelievedAt(t) => format!(" as believed at {}", rfc3339(t)),
        _ => String::new(),
    };
    eprint(&format!(
        "error: no entity named {entity:?} in `{agent}`'s facts{when}; entities are the subjects and objects of its facts (see `opc memory facts {agent}`), matched by name or alias\n"
    ));
    ExitCode::from(1)
}

/// The graph in `format`, ending with a newline.
pub fn render(graph: &Graph, format: GraphFormat) -> String {
    let mut out = match format {
        GraphFormat::Text => graph.to_text(),
        GraphFormat::Json => graph.to_json().to_string(),
        GraphFormat::Dot => graph.to_dot(),
        GraphFormat::Cypher => graph.to_cypher(),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GraphArgs,
    }

    fn parse(argv: &[&str]) -> Result<GraphArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("graph").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn the_flags_pick_the_query_and_refuse_what_cannot_be_asked() {
        let a = parse(&["ceo"]).unwrap();
        assert_eq!(
            (a.depth, a.view(), a.format),
            (1, View::Current, GraphFormat::Text)
        );
        assert_eq!(a.max_edges, DEFAULT_MAX_EDGES);
        let a = parse(&[
            "ceo",
            "--entity",
            "Marco Diaz",
            "--depth",
            "3",
            "--at",
            "1970-01-02",
            "--format",
            "cypher",
        ])
        .unwrap();
        assert_eq!(a.entity.as_deref(), Some("Marco Diaz"));
        assert_eq!(a.depth, 3);
        assert_eq!(a.view(), View::BelievedAt(86_400_000));
        assert_eq!(a.format, GraphFormat::Cypher);
        for depth in ["0", "4", "-1", "two"] {
            let e = parse(&["ceo", "--entity", "x", "--depth", depth])
                .err()
                .unwrap();
            assert!(e.to_string().contains("--depth"), "{depth}: {e}");
        }
        let e = parse(&["ceo", "--depth", "2"]).err().unwrap();
        assert_eq!(
            e.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{e}"
        );
        let e = parse(&["ceo", "--at", "soon"]).err().unwrap();
        assert!(e.to_string().contains("is not a time"), "{e}");
        let e = parse(&["ceo", "--format", "svg"]).err().unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue, "{e}");
    }

    #[test]
    fn an_empty_graph_says_so_in_text_and_is_well_formed_in_every_format() {
        let empty = Graph {
            nodes: Vec::new(),
            edges: Vec::new(),
            truncated: false,
            root: None,
        };
        assert!(render(&empty, GraphFormat::Text).contains("no relations"));
        let json: serde_json::Value =
            serde_json::from_str(&render(&empty, GraphFormat::Json)).unwrap();
        assert_eq!(json["nodes"], serde_json::json!([]));
        assert_eq!(json["edges"], serde_json::json!([]));
        assert!(render(&empty, GraphFormat::Dot).contains("digraph"));
        assert!(render(&empty, GraphFormat::Cypher).ends_with('\n'));
    }
}
