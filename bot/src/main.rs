//! # opc — the OPC command line
//!
//! Role: the one binary users run. `opc init` writes a working example org, `opc validate` checks a
//! config and shows every problem with its position, `opc visualize` draws the org tree, `opc run`
//! starts the server, `opc chat` talks to the root agent, `opc tasks` shows the ledger, `opc slack
//! manifest` prints the Slack app to create. The library crates do the work; this crate only wires
//! them to the terminal and the network.
//!
//! Invariants: exit codes are stable and documented (`validate`: 0 valid, 1 invalid, 2 unreadable);
//! nothing here panics on user input; secrets are never printed. `--config` is defined once, as a
//! global option, so every subcommand takes it in the same place users put it: before or after the
//! subcommand's name.

mod admin;
#[cfg(test)]
mod cli_doc;
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
mod node;
mod reload;
mod sessions;
mod setup;
mod term;
mod validation;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// OPC lets a team talk to an AI company: people write in Slack, Discord or a web chat to a CEO agent,
/// which delegates down an org tree of agents defined in `opc.config.yaml`.
///
/// Start with `opc init my-org`, check the result with `opc validate`, look at it with
/// `opc visualize`, serve it with `opc run` (web chat on http://127.0.0.1:7420/, admin console at
/// /admin).
///
/// `--config PATH` may be given before or after the subcommand (`opc memory show --config X`).
#[derive(Debug, Parser)]
#[command(name = "opc", version, about, long_about, propagate_version = true)]
struct Cli {
    /// Which config file to read; one definition for every subcommand (`global`), so it may come
    /// before or after the subcommand's name.
    #[command(flatten)]
    config: ConfigArg,
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
    ///
    /// Exit status: 0 written, 1 refused (a file exists) or failed.
    Init {
        /// Directory to write into; created if missing.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// `init` reads no config, so the global `--config` is hidden from its help: an arg of the
        /// same id here stops clap from propagating the global one. Given anyway, it is refused
        /// with a hint rather than ignored.
        #[arg(long, short = 'c', value_name = "PATH", hide = true)]
        config: Option<PathBuf>,
    },
    /// Check a config file and report every problem with file:line:column, key path and a hint.
    ///
    /// The telemetry settings (`OTEL_*` variables over `framework.telemetry`) are checked too.
    ///
    /// Exit status: 0 valid (warnings are printed), 1 invalid, 2 unreadable.
    Validate {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Start the gateway: web chat on `channels.web.listen` (127.0.0.1:7420 by default) with the admin
    /// console at `/admin`, plus Slack and Discord when configured.
    ///
    /// Pages: the web chat at `/`, the admin console at `/admin` (the org, tasks, approvals, memory,
    /// privacy, and the config with validation and hot reload), the org chart at `/org` (JSON:
    /// `/api/org`), health at `/healthz`. A platform whose token variable is unset stops start-up with
    /// an error naming it; a missing LLM key only warns, and messages are answered with a notice naming
    /// the variable. An invalid config never starts. Ctrl-C or SIGTERM stops it cleanly. A changed
    /// config (a save in the console, a file change, SIGHUP) is applied without a restart; an invalid
    /// one is refused and the running one stays.
    ///
    /// Exit status: 0 after a clean stop; 1 invalid config, a database error or an address that
    /// cannot be bound; 2 unreadable config, a bad `--listen`, `--node` (or `OPC_NODE`) or `publicUrl`, a
    /// platform token that is unset or refused, a bad telemetry setting (`OTEL_*`,
    /// `framework.telemetry`).
    Run {
        /// Serve on this address instead of `channels.web.listen` (e.g. 127.0.0.1:8080). As in the
        /// config, an address other machines can reach needs `channels.web.accessTokenEnv`.
        #[arg(long, value_name = "IP:PORT")]
        listen: Option<SocketAddr>,
        /// This node's name among the `opc run` processes sharing one PostgreSQL database
        /// (`framework.memory.storage: postgres`): 1–64 characters of letters, digits, `.`, `_`
        /// and `-`. Default: $OPC_NODE, else `<host>-<pid>`. Shown by `opc tasks nodes` and the
        /// console; on SQLite it is not used.
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
    },
    /// Send a message to the root agent and print its answer; without a message, chat interactively.
    ///
    /// The answer goes to stdout (streamed when it is a terminal), the delegation trace, approval
    /// prompts and the token/cost total to stderr. Ctrl-C cancels the running request and everything it
    /// delegated. Approvals are answered by typing an option, its number, or y / n; end of input
    /// rejects. Retries show as trace lines (`OPC_LOG` gives raw log lines instead).
    ///
    /// Exit status: 0 answered, 1 failed, 2 not started (config, database, missing API key, a bad
    /// telemetry setting), 3 escalated to you, 130 cancelled.
    Chat {
        #[command(flatten)]
        args: commands::chat::ChatArgs,
    },
    /// List recent requests, or show one delegation tree with state, time, tokens and cost per task;
    /// `nodes` lists the nodes serving the org on PostgreSQL.
    ///
    /// On PostgreSQL the list names the node that ran each request. Read-only: safe beside a
    /// running `opc run`. Exit status: 0, 1 invalid config or a database error, 2 unreadable config.
    #[command(args_conflicts_with_subcommands = true)]
    Tasks {
        #[command(flatten)]
        args: commands::tasks::TasksArgs,
    },
    /// Personal data from the command line: `detect` finds it, `mask` shows what a model would be
    /// sent, `eval` scores the detector, `erase` removes a value from everything OPC stores.
    ///
    /// Uses the config's `framework.privacy` detection settings when a config is found, else the
    /// defaults. Exit status: 0 done, 1 a bad input line (named by its number) or invalid config,
    /// 2 unreadable file.
    Privacy {
        #[command(subcommand)]
        command: commands::privacy::PrivacyCommand,
    },
    /// Local model files: the privacy gateway's NER model (`rampart`, names, addresses and places) with
    /// its place gazetteer (`geonames`, `subdivisions`), and recall's embedding model (`minilm`,
    /// all-MiniLM-L6-v2). Fetch them ahead of time, list them.
    ///
    /// `opc run` fetches a missing model in the background; `opc models fetch` does it ahead of time
    /// (for offline machines, or to see the download's progress). Exit status: 0, 1 a fetch failed,
    /// 2 unknown model.
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
    /// Memory: core blocks as stored (`show [AGENT]`, `history LABEL`), recall searched as an agent
    /// would (`search`), long-term facts (`facts AGENT`), and recall measured on LoCoMo (`eval
    /// locomo`).
    ///
    /// Exit status: 0; 1 invalid config, an unknown agent, a failed evaluation, or a database error
    /// in `show` / `history`; 2 unreadable config or input file, a bad TIME or conflicting flags of
    /// `facts`, or a database or index error in `search` / `facts`.
    Memory {
        #[command(subcommand)]
        command: commands::memory::MemoryCommand,
    },
    /// Where the org's state is kept: `copy --to postgres` moves an org from its SQLite file into an
    /// empty PostgreSQL database (every row, one transaction), to run several nodes on it.
    ///
    /// Exit status: 0 copied; 1 the target is not empty, the file is in use or a database error;
    /// 2 unreadable config, no SQLite file, or the URL variable is unset.
    #[command(subcommand)]
    Store(commands::store::StoreCommand),
    /// Draw the org tree: id, role, model, tools, memory and shareWith of every agent.
    ///
    /// Colours are used when stdout is a terminal (set NO_COLOR to turn them off). Exit status: 0,
    /// 1 invalid config, 2 unreadable config.
    Visualize,
    /// Slack: `manifest` prints the Slack app manifest for the configured org, to paste into
    /// "Create an app → From a manifest" at https://api.slack.com/apps.
    ///
    /// Exit status: 0 printed, 1 invalid config or no `channels.slack`, 2 unreadable config or a
    /// missing or bad public URL.
    #[command(subcommand)]
    Slack(commands::slack::SlackCommand),
}

/// Which config file to read.
#[derive(Debug, clap::Args)]
struct ConfigArg {
    /// Config file [default: $OPC_CONFIG, or ./opc.config.yaml]
    #[arg(long, short = 'c', value_name = "PATH", global = true)]
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
    /// One JSON object, for editors and CI: `{file, valid, unreadable, errors[], warnings[],
    /// inactive[]}`, each diagnostic `{severity, path, message, hint, line, column}`, each inactive
    /// feature `{path, feature, effect}`.
    Json,
}

fn main() -> ExitCode {
    // First, before any thread starts: a Bash sandbox launcher (`opc` re-executed with a private
    // marker) restricts itself here and becomes `bash -c`; it never returns then.
    opc_sandbox::enter_if_launcher();
    let cli = Cli::parse();
    let config = cli.config.path();
    // `OPC_KERNEL` (the NER's and the embedder's int8 kernel, for benches and bug reports): an
    // unknown value or a kernel this CPU cannot run stops here with its fix, not at the first model
    // call.
    if let Err(e) = opc_privacy::kernel::from_env() {
        term::eprint(&format!("error: {e}\n"));
        return ExitCode::from(2);
    }
    // Telemetry before the logger, for the commands that run agents: its layer is part of the
    // subscriber, and a bad `OTEL_*` value stops them here, with its fix (exit 2).
    let telemetry = if matches!(cli.command, Command::Run { .. } | Command::Chat { .. }) {
        match log::telemetry(&config) {
            Ok(telemetry) => telemetry,
            Err(code) => return code,
        }
    } else {
        None
    };
    log::init(
        matches!(cli.command, Command::Chat { .. }),
        telemetry.as_ref().and_then(|t| t.layer()),
    );
    let code = match cli.command {
        Command::Init { dir, config } => match config.or(cli.config.config) {
            None => commands::init::run(&dir),
            Some(path) => {
                term::eprint(&format!(
                    "error: `opc init` writes a new org and reads no config, so --config {} has no \
                     effect\nhint: `opc init DIR` writes DIR/opc.config.yaml; then pass \
                     --config DIR/opc.config.yaml to the other commands\n",
                    path.display()
                ));
                ExitCode::from(2)
            }
        },
        Command::Validate { format } => commands::validate::run(&config, format),
        Command::Visualize => commands::visualize::run(&config),
        Command::Run { listen, node } => {
            commands::run::run(&config, listen, node.as_deref(), telemetry.as_ref())
        }
        Command::Chat { args } => commands::chat::run(&config, args),
        Command::Tasks { args } => commands::tasks::run(&config, args),
        Command::Privacy { command } => commands::privacy::run(&config, command),
        Command::Models(command) => commands::models::run(command),
        Command::Memory { command } => commands::memory::run(&config, command),
        Command::Slack(command) => commands::slack::run(&config, command),
        Command::Store(command) => commands::store::run(&config, command),
    };
    // After the command's own clean stop (the engine has stopped): what is pending goes out,
    // within 5 s whatever the collector does.
    if let Some(telemetry) = telemetry
        && let Err(e) = telemetry.shutdown(std::time::Duration::from_secs(5))
    {
        term::eprint(&format!("warning: telemetry at stop: {e}\n"));
    }
    code
}
