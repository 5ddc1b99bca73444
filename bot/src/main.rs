//! # opc — the OPC command line
//!
//! Role: the one binary users run. `opc init` writes a working example org, `opc validate` checks a
//! config and shows every problem with its position, `opc visualize` draws the org tree, `opc run`
//! starts the server, `opc chat` talks to the root agent, `opc tasks` shows the ledger. The library
//! crates do the work; this crate only wires them to the terminal and the network.
//!
//! Invariants: exit codes are stable and documented (`validate`: 0 valid, 1 invalid, 2 unreadable);
//! nothing here panics on user input; secrets are never printed.

mod admin;
mod commands;
mod gateway;
mod live;

/// jemalloc, with a background thread that returns freed pages to the OS after about a second
/// (`JEMALLOC_SYS_WITH_MALLOC_CONF` in `.cargo/config.toml`). Why: a burst of conversations (each
/// request in flight holds buffers on whichever worker thread ran it) left glibc's per-thread arenas
/// fragmented at their high-water mark: RSS stayed 50–130% above idle long after the load was gone.
/// With jemalloc's decay it comes back near idle (issue 9, the gateway benchmark's memory section).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
mod log;
mod reload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// OPC lets a team talk to an AI company: people write in Slack, Discord or a web chat to a CEO agent,
/// which delegates down an org tree of agents defined in `opc.config.yaml`.
///
/// Start with `opc init my-org`, check the result with `opc validate`, look at it with
/// `opc visualize`.
#[derive(Debug, Parser)]
#[command(name = "opc", version, about, long_about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a working example org (opc.config.yaml and its prompt files) into DIR.
    ///
    /// The example has a CEO, two VPs, three leads and three workers (four levels), a shared memory
    /// block and a shareWith pair. Existing files are never overwritten: if any would be, nothing is
    /// written.
    Init {
        /// Directory to write into; created if missing.
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Check a config file and report every problem with file:line:column, key path and a hint.
    ///
    /// Exit status: 0 valid (warnings are printed), 1 invalid, 2 unreadable.
    Validate {
        #[command(flatten)]
        config: ConfigArg,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Start the gateway: web chat on `channels.web.listen` (127.0.0.1:7420 by default), plus Slack and
    /// Discord when configured.
    ///
    /// The web chat is at `/`, the org chart at `/org` (JSON: `/api/org`), health at `/healthz`. A
    /// platform whose token variable is unset stops start-up with an error naming it; a missing LLM key
    /// only warns, and messages are answered with a notice naming the variable. An invalid config
    /// never starts. Ctrl-C or SIGTERM stops it cleanly.
    Run {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Send a message to the root agent and print its answer; without a message, chat interactively.
    ///
    /// The answer goes to stdout (streamed when it is a terminal), the delegation trace, approval
    /// prompts and the token/cost total to stderr. Ctrl-C cancels the running request and everything it
    /// delegated. Exit status: 0 answered, 1 failed, 2 not started, 3 escalated, 130 cancelled.
    Chat {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        args: commands::chat::ChatArgs,
    },
    /// List recent requests, or show one delegation tree with state, time, tokens and cost per task.
    Tasks {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        args: commands::tasks::TasksArgs,
    },
    /// Personal-data detection from the command line: `detect` (JSON lines in and out) and `eval`.
    ///
    /// Uses the config's `framework.privacy` detection settings when a config is found, else the
    /// defaults. Exit status: 0 done, 1 a bad input line (named by its number) or invalid config,
    /// 2 unreadable file.
    Privacy {
        #[command(flatten)]
        config: ConfigArg,
        #[command(subcommand)]
        command: commands::privacy::PrivacyCommand,
    },
    /// Local model files (the privacy gateway's NER model): fetch them ahead of time, list them.
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
    /// Memory: core blocks as stored (`show [AGENT]`, `history LABEL`), recall searched as an agent
    /// would (`search`), and recall measured on LoCoMo (`eval locomo`).
    Memory {
        #[command(flatten)]
        config: ConfigArg,
        #[command(subcommand)]
        command: commands::memory::MemoryCommand,
    },
    /// Draw the org tree: id, role, model, tools, memory and shareWith of every agent.
    ///
    /// Colours are used when stdout is a terminal (set NO_COLOR to turn them off).
    Visualize {
        #[command(flatten)]
        config: ConfigArg,
    },
}

/// Which config file to read.
#[derive(Debug, clap::Args)]
struct ConfigArg {
    /// Config file [default: $OPC_CONFIG, or ./opc.config.yaml]
    #[arg(long, short = 'c', value_name = "PATH")]
    config: Option<PathBuf>,
}

impl ConfigArg {
    fn path(&self) -> PathBuf {
        opc_hierarchy::config_path(self.config.as_deref())
    }
}

/// Output format of `opc validate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Human-readable, with source snippets.
    Text,
    /// One JSON object, for editors and CI.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    log::init(matches!(cli.command, Command::Chat { .. }));
    match cli.command {
        Command::Init { dir } => commands::init::run(&dir),
        Command::Validate { config, format } => commands::validate::run(&config.path(), format),
        Command::Visualize { config } => commands::visualize::run(&config.path()),
        Command::Run { config } => commands::run::run(&config.path()),
        Command::Chat { config, args } => commands::chat::run(&config.path(), args),
        Command::Tasks { config, args } => commands::tasks::run(&config.path(), args),
        Command::Privacy { config, command } => commands::privacy::run(&config.path(), command),
        Command::Models(command) => commands::models::run(command),
        Command::Memory { config, command } => commands::memory::run(&config.path(), command),
    }
}
