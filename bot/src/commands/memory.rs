//! `opc memory`: search recall memory from the command line, and measure it on LoCoMo.
//!
//! `search` opens the engine's database (`framework.memory.path`) on its own connections, loads the
//! embedding model when it is fetched (else searches by BM25 and says so), and searches the namespaces
//! the agent may read. `eval locomo` indexes each LoCoMo conversation into a fresh store through the
//! same append + catch-up path the engine uses and prints evidence recall@k (per question category
//! too with `--by-category`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use clap::{Subcommand, ValueEnum};
use opc_memory::embed::{EmbedSlot, MiniLm};
use opc_memory::recall::eval::{self, Config};
use opc_memory::recall::{Mode, Query, RecallStore, Tuning};

use crate::term::{eprint, print};

/// `opc memory …`
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Search recall memory as agent A would (its own namespace, its descendants', and siblings that
    /// share with it).
    Search {
        /// What to look for.
        query: String,
        /// The agent searching.
        #[arg(long)]
        agent: String,
        /// Which index.
        #[arg(long, value_enum, default_value_t = ModeArg::Hybrid)]
        mode: ModeArg,
        /// How many hits.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Measure recall on a benchmark.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// The stored core blocks, with sizes and versions: all, or the ones AGENT sees.
    Show(super::memory_blocks::ShowArgs),
    /// Every change to the blocks labelled LABEL, oldest first.
    History(super::memory_blocks::HistoryArgs),
    /// AGENT's long-term facts: current ones, those it believed at a time (`--at`), those true in
    /// the world at a time (`--valid-at`), or every version (`--history`).
    Facts(super::memory_facts::FactsArgs),
    /// AGENT's graph of entities and relations (on its facts): whole, or around `--entity` within
    /// `--depth` hops, now or as believed at `--at`, as text, JSON, Graphviz dot or Neo4j Cypher.
    Graph(super::memory_graph::GraphArgs),
}

/// `opc memory eval …`
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// LoCoMo evidence recall@k: index each conversation's turns, search each question in its
    /// conversation, report the share of evidence turns retrieved in the top k.
    Locomo {
        /// Turns, one JSON object a line ({sample_id, session, session_date_time, dia_id, speaker, text}).
        #[arg(long, value_name = "FILE")]
        turns: PathBuf,
        /// Questions, one JSON object a line ({sample_id, question, category, evidence: [dia_id]}).
        #[arg(long, value_name = "FILE")]
        qa: PathBuf,
        /// The cut-offs, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,5,10,25,50")]
        k: Vec<usize>,
        /// Which index.
        #[arg(long, value_enum, default_value_t = ModeArg::Hybrid)]
        mode: ModeArg,
        /// Output format.
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
        /// Add a row per question category (single-hop, multi-hop, temporal, …: its question count and
        /// recall@k) above the overall row (the JSON always has them).
        #[arg(long)]
        by_category: bool,
    },
}

/// Search mode on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// Keywords (tantivy BM25).
    Bm25,
    /// Meaning (MiniLM vectors).
    Vector,
    /// Both, fused.
    Hybrid,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Bm25 => Mode::Bm25,
            ModeArg::Vector => Mode::Vector,
            ModeArg::Hybrid => Mode::Hybrid,
        }
    }
}

/// Output format of `eval`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// A table ending with `recall@10 = NN.N`.
    Text,
    /// One JSON object.
    Json,
}

/// An embedder slot, filled now when the model is fetched and `wanted`; a note otherwise.
fn embedder(wanted: bool) -> EmbedSlot {
    let slot = EmbedSlot::new();
    if wanted {
        match MiniLm::load_shared() {
            Ok(m) => {
                slot.set(m);
            }
            Err(e) => eprint(&format!(
                "note: embedding model not loaded ({e}); searching by BM25 only\n"
            )),
        }
    }
    slot
}

/// Run `opc memory …`.
pub fn run(config: &Path, command: MemoryCommand) -> ExitCode {
    match command {
        MemoryCommand::Show(args) => super::memory_blocks::show(config, args),
        MemoryCommand::History(args) => super::memory_blocks::history(config, args),
        MemoryCommand::Facts(args) => super::memory_facts::facts(config, args),
        MemoryCommand::Graph(args) => super::memory_graph::graph(config, args),
        MemoryCommand::Search {
            query,
            agent,
            mode,
            limit,
        } => search(config, &query, &agent, mode.into(), limit),
        MemoryCommand::Eval(EvalCommand::Locomo {
            turns,
            qa,
            k,
            mode,
            format,
            by_category,
        }) => locomo(&turns, &qa, &k, mode.into(), format, by_category),
    }
}

fn search(config: &Path, text: &str, agent: &str, mode: Mode, limit: usize) -> ExitCode {
    let loaded = match crate::setup::load_config(config) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let org = &loaded.org;
    if !org.contains(agent) {
        let known: Vec<&str> = org.agent_ids().collect();
        eprint(&format!(
            "error: no agent {agent:?} in {}; agents: {}\n",
            config.display(),
            known.join(", ")
        ));
        return ExitCode::from(1);
    }
    // What the agent may read: itself, its descendants, siblings that share with it.
    // The namespaces this agent may read, from memory's ACL (the same check its tools go through).
    let namespaces =
        opc_memory::acl::Acl::new(&loaded.config, std::sync::Arc::new(loaded.org.clone()))
            .readable(agent);
    let database = match crate::setup::database(&loaded) {
        Ok(database) => database,
        Err(code) => return code,
    };
    // The stored vectors are the configured embedder's. Only the local model can be loaded here (a
    // remote one needs the engine's privacy gateway and ledger), and loading MiniLM beside remote
    // vectors would make this read-only command start re-embedding the store into a MiniLM
    // generation. So with a remote embedder this searches by keywords, and says so.
    let local = loaded.config.framework.memory.embedding.provider
        == opc_hierarchy::schema::EmbeddingProvider::Local;
    if !local && mode != Mode::Bm25 {
        eprint(
            "note: `framework.memory.embedding` is an OpenAI-compatible endpoint, which only `opc run` calls \
             (through the privacy gateway); searching by keywords here. The console's Memory search uses the vectors\n",
        );
    }
    let wanted = local && mode != Mode::Bm25;
    let opened = match &database {
        crate::setup::Database::Sqlite(db) => {
            if !db.exists() {
                // Nothing was ever stored: say so rather than create an empty database the engine did not ask for.
                print(&format!(
                    "no matches: {} does not exist yet (it is created when `opc run` or `opc chat` first starts)\n",
                    db.display()
                ));
                return ExitCode::SUCCESS;
            }
            RecallStore::open(db, embedder(wanted))
        }
        // This node's index beside the config (shared with a running `opc run` here, as the
        // SQLite file's is).
        crate::setup::Database::Postgres { url, .. } => opc_pg::Blocking::connect(url, "recall")
            .map_err(opc_memory::recall::RecallError::from)
            .and_then(|conn| {
                RecallStore::open_postgres(
                    conn,
                    &crate::setup::recall_index_dir(&loaded, None),
                    embedder(wanted),
                )
            }),
    };
    let store = match opened {
        Ok(s) => s,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::from(2);
        }
    };
    // Index whatever the engine wrote since the last run (the engine's indexer may be stopped). When
    // a running `opc run` holds the index, it is the one indexing: search what it has indexed.
    match store.catch_up(&AtomicBool::new(false)) {
        Ok(_) => {}
        Err(opc_memory::recall::RecallError::IndexBusy) => eprint(
            "note: another process (`opc run`?) is indexing this database; searching what it has indexed\n",
        ),
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::from(2);
        }
    }
    match store.search(&Query::new(text, namespaces, mode, limit)) {
        Ok(hits) if hits.is_empty() => {
            print("no matches\n");
            ExitCode::SUCCESS
        }
        Ok(hits) => {
            for (i, h) in hits.iter().enumerate() {
                let m = &h.message;
                print(&format!(
                    "{}. [{}] {} in {} (conversation {}{}) score {:.3}\n   {}\n",
                    i + 1,
                    opc_memory::recall::date::render_day(m.time_ms),
                    m.author,
                    m.namespace,
                    m.conversation,
                    m.task
                        .as_deref()
                        .map(|t| format!(", task {t}"))
                        .unwrap_or_default(),
                    h.score,
                    m.text.replace('\n', "\n   ")
                ));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            ExitCode::from(2)
        }
    }
}

fn locomo(
    turns: &Path,
    qa: &Path,
    ks: &[usize],
    mode: Mode,
    format: FormatArg,
    by_category: bool,
) -> ExitCode {
    for f in [turns, qa] {
        if !f.is_file() {
            eprint(&format!("error: {} is not a readable file\n", f.display()));
            return ExitCode::from(2);
        }
    }
    let config = Config {
        name: "default tuning".into(),
        mode,
        tuning: Tuning::default(),
    };
    let slot = embedder(mode != Mode::Bm25);
    match eval::run(turns, qa, ks, &[config], &slot) {
        Ok(reports) => {
            for r in &reports {
                match format {
                    FormatArg::Text => print(&r.text(by_category)),
                    FormatArg::Json => print(&format!(
                        "{}\n",
                        serde_json::to_string(r)
                            .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
                    )),
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            ExitCode::from(1)
        }
    }
}
