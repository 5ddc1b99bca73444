//! `opc chat`: talk to the root agent from the terminal.
//!
//! One message (`opc chat "…"`) or an interactive session (`opc chat`, one conversation across turns).
//! The answer goes to stdout — streamed live when stdout is a terminal, printed once and exactly when it
//! is piped — and a live delegation trace, approval prompts and the token/cost total go to stderr.
//! Ctrl-C cancels the running task tree (the whole subtree is recorded CANCELLED); at the prompt it
//! quits.
//!
//! Exit status: 0 answered, 1 failed, 2 not started (config, database or API key), 3 escalated to you,
//! 130 cancelled.
//!
//! Approvals take an option's name, its number, or `y` / `n` when there is an approving and a rejecting
//! option. Time spent waiting for that answer is shown apart from the agents' working time.
//!
//! Invariants: approvals are decided only by an explicit answer typed here; end of input rejects (fail
//! closed). Secrets are never printed: a missing key is reported by its variable name.

use std::collections::{HashMap, VecDeque};
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opc_agents::context::{BlockMemory, FACTS_BUDGET_TOKENS, RECALL_BUDGET_TOKENS};
use opc_agents::store::{ApprovalOption, OptionOutcome, resolve_options};
use opc_agents::{Engine, EngineOptions, Event, Outcome, TaskId, TaskState};
use tokio::sync::{broadcast, mpsc};

use crate::term::{eprint, print};

/// Options of `opc chat`.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// The message; without one, an interactive session starts.
    pub message: Option<String>,
    /// Continue this conversation (its id is printed at the end of every answer).
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// Ask models for whole responses instead of streams.
    #[arg(long)]
    pub no_stream: bool,
    /// No delegation trace on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn run(path: &Path, args: ChatArgs) -> ExitCode {
    let loaded = match crate::setup::load_config(path) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let database = match crate::setup::database(&loaded) {
        Ok(database) => database,
        Err(code) => return code,
    };
    let runtime = match crate::setup::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        match crate::setup::open(&database).await {
            Ok(opened) => {
                let cluster = chat_node(&loaded, &opened);
                chat(loaded, database, opened.store, cluster, args).await
            }
            Err(code) => code,
        }
    })
}

/// On PostgreSQL, `opc chat` is a node of its own (`<host>-<pid>-chat`, no address): its roots are
/// queued and leased like any node's, it runs only the roots it queued itself, and it never
/// recovers the trees of the `opc run` nodes serving the same database. `None` on SQLite.
fn chat_node(
    loaded: &opc_hierarchy::Loaded,
    opened: &crate::setup::Opened,
) -> Option<Arc<dyn opc_agents::store::Cluster>> {
    opened.postgres.as_ref()?;
    let name = crate::node::default_name(&crate::node::hostname(), std::process::id(), "-chat");
    let identity = crate::node::identity(name, None, loaded.report.source.as_bytes());
    opened.cluster(identity, loaded.config.framework.cluster.lease_ttl)
}

/// Build the engine for `opc chat`, refusing to start when a provider the org uses has no key.
pub async fn engine(
    loaded: &opc_hierarchy::Loaded,
    database: &crate::setup::Database,
    store: Arc<dyn opc_agents::Store>,
    options: EngineOptions,
) -> Result<(Engine, RecallParts), String> {
    if let Some((provider, var)) = crate::setup::missing_key(loaded) {
        return Err(format!(
            "error: the API key for provider `{provider}` is missing: set the environment variable {var}\n\
             hint: `export {var}=…`, or point the agents at a keyless OpenAI-compatible server \
             (`kind: openai-compatible`, `baseUrl: http://127.0.0.1:11434/v1`)\n"
        ));
    }
    let (engine, recall) = build_engine(loaded, database, store, options).await?;
    // A chat turn starts at once, so the NER model is loaded now (when cached), not in the background.
    let privacy = &loaded.config.framework.privacy;
    if opc_agents::llm::privacy::needs_ner(&loaded.config) {
        let meanwhile = if privacy.require_ner {
            "LLM calls that need it fail closed"
        } else {
            "names and addresses are found by patterns only (`requireNer: false`)"
        };
        if let Err(reason) = super::models::load_now(&engine.ner_slot(), meanwhile) {
            let fix = if privacy.require_ner {
                "Fetch it with `opc models fetch`, or set `framework.privacy.requireNer: false` to accept masking by patterns only"
            } else {
                "Fetch it with `opc models fetch`"
            };
            eprint(&format!(
                "note: the privacy NER model is not loaded ({reason}); {meanwhile}. {fix}\n"
            ));
        }
    }
    // Recall searches by keywords until the embedder is loaded; a chat does not wait for it.
    Ok((engine, recall))
}

/// Recall memory's moving parts, owned by whoever runs the engine: dropping this stops the indexer.
pub struct RecallParts {
    /// Receives the embedding model when it loads (`opc run` loads it in the background).
    pub embed: opc_memory::embed::EmbedSlot,
    /// The recall store (the admin console searches it).
    pub store: opc_memory::recall::RecallStore,
    /// The background indexer (BM25 and vectors catch up from SQLite's sequence numbers).
    _indexer: opc_memory::recall::Indexer,
}

/// Build the engine (keys or not) and note what the config turns on that this build does not run yet
/// (`opc run` builds its engine here too).
pub async fn build_engine(
    loaded: &opc_hierarchy::Loaded,
    database: &crate::setup::Database,
    store: Arc<dyn opc_agents::Store>,
    options: EngineOptions,
) -> Result<(Engine, RecallParts), String> {
    // Recall memory: the engine appends every task and answer in the turn's own transaction; the
    // indexer (woken after each of those commits) keeps BM25 and the vectors caught up. Long-term
    // facts use the same embedder slot; the engine runs its memory worker (extraction,
    // consolidation) over them and offers the archival tools. Core memory blocks live beside them.
    // Each part keeps its own connection: the SQLite file's, or one to PostgreSQL (opc-pg).
    let embed = opc_memory::embed::EmbedSlot::new();
    let org = Arc::new(loaded.org.clone());
    let failed = |e: &dyn std::fmt::Display| format!("error: {e}\n");
    let (recall, facts, blocks) = match database {
        crate::setup::Database::Sqlite(db) => (
            opc_memory::recall::RecallStore::open(db, embed.clone()).map_err(|e| failed(&e))?,
            opc_memory::facts::FactStore::open(db, embed.clone()).map_err(|e| failed(&e))?,
            opc_memory::blocks::BlockStore::open(db, &loaded.config, org)
                .map_err(|e| failed(&e))?,
        ),
        crate::setup::Database::Postgres { url, .. } => {
            let connect = |what: &str| opc_pg::Blocking::connect(url, what).map_err(|e| failed(&e));
            // A node named by hand (`--node`, `OPC_NODE`) keeps its own index, so several nodes
            // can run from one directory; one named by default shares the directory's.
            let named = options
                .cluster
                .as_ref()
                .map(|c| c.node().id.clone())
                .filter(|id| !crate::node::is_default_name(id, std::process::id()));
            let index = crate::setup::recall_index_dir(loaded, named.as_deref());
            (
                opc_memory::recall::RecallStore::open_postgres(
                    connect("recall")?,
                    &index,
                    embed.clone(),
                )
                .map_err(|e| failed(&e))?,
                opc_memory::facts::FactStore::open_postgres(connect("facts")?, embed.clone())
                    .map_err(|e| failed(&e))?,
                opc_memory::blocks::BlockStore::open_postgres(
                    connect("blocks")?,
                    &loaded.config,
                    org,
                )
                .map_err(|e| failed(&e))?,
            )
        }
    };
    let indexer = recall.spawn_indexer().map_err(|e| failed(&e))?;
    {
        let recall = recall.clone();
        store.on_recall_append(Box::new(move || recall.notify()));
    }
    let memory = BlockMemory::over(blocks)
        .with_recall(recall.clone(), &loaded.config, RECALL_BUDGET_TOKENS)
        .with_facts(facts, &loaded.config, FACTS_BUDGET_TOKENS);
    // Bash runs under the kernel sandbox, whose launcher is this executable re-entered
    // (`opc_sandbox::enter_if_launcher` at the top of `main`).
    let options = match (&options.sandbox, std::env::current_exe()) {
        (Some(_), _) => options,
        (None, Ok(exe)) => EngineOptions {
            sandbox: Some(Arc::new(opc_sandbox::Sandbox::new(exe))),
            ..options
        },
        (None, Err(e)) => {
            eprint(&format!(
                "warning: cannot find OPC's own executable to launch the Bash sandbox ({e}); Bash is not offered to any agent\n"
            ));
            options
        }
    };
    let engine = Engine::from_config(loaded, store, Arc::new(memory), options, |var| {
        std::env::var(var).ok()
    })
    .await
    .map_err(|e| format!("error: {e}\n"))?;
    eprint(&crate::setup::inactive_note(&loaded.config));
    Ok((
        engine,
        RecallParts {
            embed,
            store: recall,
            _indexer: indexer,
        },
    ))
}

async fn chat(
    loaded: opc_hierarchy::Loaded,
    database: crate::setup::Database,
    store: Arc<dyn opc_agents::Store>,
    cluster: Option<Arc<dyn opc_agents::store::Cluster>>,
    args: ChatArgs,
) -> ExitCode {
    let options = EngineOptions {
        streaming: !args.no_stream,
        // Trees of other conversations suspended on approvals are left for `opc run` (in a
        // cluster, this also keeps the node to the roots it queued itself).
        resume_suspended: false,
        cluster,
        ..EngineOptions::default()
    };
    let (engine, _recall) = match engine(&loaded, &database, store, options).await {
        Ok(parts) => parts,
        Err(message) => {
            eprint(&message);
            return ExitCode::from(2);
        }
    };
    let interrupted = engine.recovery().interrupted.len();
    if interrupted > 0 {
        eprint(&format!(
            "note: {interrupted} task(s) were interrupted when OPC last stopped; they are marked FAILED\n"
        ));
    }
    let mut lines = stdin_lines();
    let trace = Trace {
        quiet: args.quiet,
        live: std::io::stdout().is_terminal(),
        typed_input: std::io::stdin().is_terminal(),
    };
    let code = match args.message {
        Some(message) => {
            let outcome = turn(
                &engine,
                args.conversation.as_deref(),
                &message,
                &mut lines,
                &trace,
            )
            .await;
            match outcome {
                Ok(outcome) => exit_code(&outcome),
                Err(code) => code,
            }
        }
        None => repl(&engine, args.conversation, &mut lines, &trace).await,
    };
    engine.shutdown().await;
    code
}

fn exit_code(outcome: &Outcome) -> ExitCode {
    match outcome.state {
        TaskState::Completed => ExitCode::SUCCESS,
        TaskState::Escalated => ExitCode::from(3),
        TaskState::Cancelled => ExitCode::from(130),
        _ => ExitCode::FAILURE,
    }
}

async fn repl(
    engine: &Engine,
    mut conversation: Option<String>,
    lines: &mut mpsc::UnboundedReceiver<String>,
    trace: &Trace,
) -> ExitCode {
    eprint(&format!(
        "Chatting with {} ({}). Type /exit or press Ctrl-D to quit; Ctrl-C cancels a running request.\n",
        engine.org().role(engine.org().root()).unwrap_or_default(),
        engine.org().root()
    ));
    loop {
        eprint("you › ");
        let line = tokio::select! {
            line = lines.recv() => line,
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(line) = line else {
            eprint("\n");
            return ExitCode::SUCCESS;
        };
        let text = line.trim();
        match text {
            "" => continue,
            "/exit" | "/quit" => return ExitCode::SUCCESS,
            _ => {}
        }
        match turn(engine, conversation.as_deref(), text, lines, trace).await {
            Ok(outcome) => conversation = Some(outcome.conversation),
            Err(code) => return code,
        }
    }
}

/// Lines of stdin, read on a thread (stdin reads block).
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

struct Trace {
    quiet: bool,
    /// Stream the answer to stdout as it is generated (stdout is a terminal).
    live: bool,
    /// A person types the input (stdin is a terminal).
    typed_input: bool,
}

/// A task of the running tree, for the trace's indentation.
struct Node {
    depth: usize,
}

/// Send one message and follow its tree until the answer.
async fn turn(
    engine: &Engine,
    conversation: Option<&str>,
    text: &str,
    lines: &mut mpsc::UnboundedReceiver<String>,
    trace: &Trace,
) -> Result<Outcome, ExitCode> {
    // Subscribe before sending, so no event of this tree is missed.
    let mut events = engine.events().subscribe();
    let run = match engine.send(conversation, text).await {
        Ok(run) => run,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return Err(ExitCode::FAILURE);
        }
    };
    let root = run.task;
    let started = Instant::now();
    let mut nodes: HashMap<TaskId, Node> = HashMap::from([(root, Node { depth: 0 })]);
    let mut streamed = String::new();
    // Approvals waiting for an answer typed here, oldest first.
    let mut pending: VecDeque<(i64, Vec<ApprovalOption>)> = VecDeque::new();
    // Time spent waiting for a person to decide, shown apart from the time the agents worked.
    let mut waiting_since: Option<Instant> = None;
    let mut waited = Duration::ZERO;
    let wait = run.wait();
    tokio::pin!(wait);
    let outcome = loop {
        tokio::select! {
            outcome = &mut wait => break outcome,
            event = events.recv() => match event {
                Ok(event) => {
                    if let Some(asked) = show(&event, root, &mut nodes, &mut streamed, trace) {
                        // The card is printed once the options' outcomes are known (for `y` / `n`).
                        let options = outcomes(engine, asked.approval, &asked.labels).await;
                        eprint(&card(asked.approval, &asked.requested_by, &asked.summary, &options));
                        let approval = (asked.approval, options);
                        // On a terminal, lines typed before the card appeared are not answers to it.
                        // (Piped input is a script that knows what it approves.)
                        if trace.typed_input {
                            while lines.try_recv().is_ok() {}
                        }
                        if pending.is_empty() {
                            waiting_since = Some(Instant::now());
                        }
                        pending.push_back(approval);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    if !trace.quiet {
                        eprint(&format!("  … {n} trace events skipped\n"));
                    }
                    // A skipped approval card would leave its task waiting: ask the database.
                    for approval in engine.pending_approvals().await.unwrap_or_default() {
                        if approval.root_id == root && !pending.iter().any(|(id, _)| *id == approval.id) {
                            eprint(&card(approval.id, &approval.agent, &approval.summary, &approval.options));
                            if pending.is_empty() {
                                waiting_since = Some(Instant::now());
                            }
                            pending.push_back((approval.id, approval.options.clone()));
                        }
                    }
                }
                Err(broadcast::error::RecvError::Closed) => {}
            },
            line = lines.recv(), if !pending.is_empty() => {
                let Some((approval, options)) = pending.pop_front() else { continue };
                let decision = match line.as_deref().map(str::trim) {
                    Some(typed) => match choose(typed, &options) {
                        Some(option) => option,
                        None => {
                            eprint(&format!("`{typed}` is not an option; type {}\n  decide › ", choices(&options)));
                            pending.push_front((approval, options));
                            continue;
                        }
                    },
                    // End of input: fail closed, with the option that rejects (whatever its label).
                    None => options
                        .iter()
                        .find(|o| o.outcome == OptionOutcome::Reject)
                        .map_or_else(|| "reject".to_string(), |o| o.label.clone()),
                };
                let by = std::env::var("USER").map(|u| format!("cli:{u}")).unwrap_or_else(|_| "cli".into());
                if let Err(e) = engine.decide(approval, &decision, &by).await {
                    eprint(&format!("error: {e}\n"));
                }
                if let Some((next, options)) = pending.front() {
                    eprint(&format!("decide approval {next} ({}) › ", choices(options)));
                } else if let Some(since) = waiting_since.take() {
                    waited += since.elapsed();
                }
            }
            _ = tokio::signal::ctrl_c() => {
                eprint("\ncancelling the request and everything it delegated…\n");
                if let Err(e) = engine.cancel(root).await {
                    eprint(&format!("error: {e}\n"));
                }
            }
        }
    };
    if let Some(since) = waiting_since {
        waited += since.elapsed();
    }
    finish(&outcome, &streamed, trace, started.elapsed(), waited);
    Ok(outcome)
}

/// An approval an event asked for.
struct Asked {
    approval: i64,
    requested_by: String,
    summary: String,
    labels: Vec<String>,
}

/// Show one event; returns an approval to ask about (its card is the caller's to print).
fn show(
    event: &Event,
    root: TaskId,
    nodes: &mut HashMap<TaskId, Node>,
    streamed: &mut String,
    trace: &Trace,
) -> Option<Asked> {
    let indent = |task: &TaskId, nodes: &HashMap<TaskId, Node>| {
        "  ".repeat(nodes.get(task).map_or(0, |n| n.depth) + 1)
    };
    match event {
        Event::TaskCreated {
            task,
            parent: Some(parent),
            root: r,
            ..
        } if *r == root => {
            let depth = nodes.get(parent).map_or(0, |n| n.depth) + 1;
            nodes.insert(*task, Node { depth });
        }
        Event::Delegated {
            child, from, to, ..
        } if nodes.contains_key(child) && !trace.quiet => {
            eprint(&format!(
                "{}{from} → {to} (task {child})\n",
                indent(child, nodes)
            ));
        }
        Event::Token { task, text, .. } if *task == root => {
            streamed.push_str(text);
            if trace.live {
                print(text);
            }
        }
        Event::StreamRestarted { task } if *task == root => {
            streamed.clear();
            if trace.live {
                print("\n");
                eprint("  (the model's answer was interrupted; retrying)\n");
            }
        }
        Event::ToolCalled { task, .. } if *task == root => {
            // That turn was not the final answer; only the last turn's text is the answer.
            streamed.clear();
            if trace.live {
                print("\n");
            }
        }
        Event::ToolFinished {
            task,
            tool,
            duration_ms,
            outcome,
            exit_code,
            detail,
            ..
        } if !trace.quiet && nodes.contains_key(task) && tool == "Bash" => {
            let exit = exit_code
                .map(|c| format!(" (exit {c})"))
                .unwrap_or_default();
            let detail = detail
                .as_deref()
                .map(|d| format!(" · {d}"))
                .unwrap_or_default();
            eprint(&format!(
                "{}$ {tool} {:.1}s {outcome}{exit}{detail}\n",
                indent(task, nodes),
                *duration_ms as f64 / 1000.0
            ));
        }
        Event::AgentFinished {
            task,
            agent,
            state,
            tokens_in,
            tokens_out,
            cost_usd,
            duration_ms,
            ..
        } if nodes.contains_key(task) && *task != root && !trace.quiet => {
            let mark = if state == "COMPLETED" { "✓" } else { "✗" };
            eprint(&format!(
                "{}{mark} {agent} {state} in {:.1}s · {} tokens · ${cost_usd:.4}\n",
                indent(task, nodes),
                *duration_ms as f64 / 1000.0,
                tokens_in + tokens_out
            ));
        }
        Event::Escalated {
            task,
            agent,
            kind,
            reason,
        } if nodes.contains_key(task) && !trace.quiet => {
            eprint(&format!(
                "{}⚠ {agent} escalated ({kind}): {reason}\n",
                indent(task, nodes)
            ));
        }
        Event::ApprovalRequested {
            approval,
            task,
            path,
            summary,
            options,
            ..
        } if nodes.contains_key(task) => {
            return Some(Asked {
                approval: *approval,
                requested_by: path.join(" › "),
                summary: summary.clone(),
                labels: options.clone(),
            });
        }
        Event::ApprovalResolved {
            approval,
            decision,
            by,
            ..
        } if !trace.quiet => {
            eprint(&format!("  approval {approval}: {decision} (by {by})\n"));
        }
        _ => {}
    }
    None
}

/// An approval as shown on the terminal, ending with the prompt.
fn card(approval: i64, requested_by: &str, summary: &str, options: &[ApprovalOption]) -> String {
    // A multi-line summary (a Bash command's card) keeps the card's rail on every line.
    let summary = summary.lines().collect::<Vec<_>>().join("\n│ ");
    format!(
        "\n┌ approval {approval} requested by {requested_by}\n│ {summary}\n└ decide ({}) › ",
        choices(options)
    )
}

/// An approval's options with their outcomes, as stored (the event carries the labels only); if the
/// read fails, the labels resolved by the store's own rule for plain labels.
async fn outcomes(engine: &Engine, approval: i64, labels: &[String]) -> Vec<ApprovalOption> {
    match engine.store().approval(approval).await {
        Ok(Some(stored)) => stored.options,
        _ => resolve_options(&labels.iter().map(|l| l.as_str().into()).collect::<Vec<_>>()),
    }
}

/// The accepted answers: `1 approve / 2 reject, or y / n`.
fn choices(options: &[ApprovalOption]) -> String {
    let numbered: Vec<String> = options
        .iter()
        .enumerate()
        .map(|(i, o)| format!("{} {}", i + 1, o.label))
        .collect();
    let mut text = numbered.join(" / ");
    if yes_no(options).is_some() {
        text.push_str(", or y / n");
    }
    text
}

/// The options `y` and `n` stand for: `y` the first approving option (for a Bash command, "Approve
/// once": the narrower go-ahead), `n` the rejecting one, when exactly one option rejects (with two,
/// `n` would have to guess which).
fn yes_no(options: &[ApprovalOption]) -> Option<(&str, &str)> {
    let yes = options
        .iter()
        .find(|o| o.outcome == OptionOutcome::Approve)?;
    let mut rejecting = options
        .iter()
        .filter(|o| o.outcome == OptionOutcome::Reject);
    let no = rejecting.next()?;
    if rejecting.next().is_some() {
        return None;
    }
    Some((&yes.label, &no.label))
}

/// The option a typed answer picks: the option itself (any case), its number, or `y` / `n`.
fn choose(typed: &str, options: &[ApprovalOption]) -> Option<String> {
    if let Some(option) = options.iter().find(|o| o.label.eq_ignore_ascii_case(typed)) {
        return Some(option.label.clone());
    }
    if let Ok(n) = typed.parse::<usize>() {
        return n
            .checked_sub(1)
            .and_then(|i| options.get(i))
            .map(|o| o.label.clone());
    }
    let (yes, no) = yes_no(options)?;
    match typed.to_lowercase().as_str() {
        "y" | "yes" => Some(yes.to_string()),
        "n" | "no" => Some(no.to_string()),
        _ => None,
    }
}

fn finish(outcome: &Outcome, streamed: &str, trace: &Trace, took: Duration, waited: Duration) {
    match outcome.state {
        TaskState::Completed => {
            if trace.live && streamed == outcome.text {
                print("\n");
            } else {
                if trace.live && !streamed.is_empty() {
                    print("\n");
                }
                print(&outcome.text);
                print("\n");
            }
        }
        TaskState::Escalated => eprint(&format!("\n{}\n", outcome.text)),
        TaskState::Cancelled => eprint(&format!("cancelled: {}\n", outcome.text)),
        _ => eprint(&format!("error: {}\n", outcome.text)),
    }
    // Waiting for a person is not the agents' working time: shown apart, so neither hides the other.
    let time = if waited.is_zero() {
        format!("{:.1}s", took.as_secs_f64())
    } else {
        format!(
            "{:.1}s working + {:.1}s waiting for you",
            took.saturating_sub(waited).as_secs_f64(),
            waited.as_secs_f64()
        )
    };
    eprint(&format!(
        "— task {} · conversation {} · {} tokens in / {} out · ${:.4} · {time}\n",
        outcome.task, outcome.conversation, outcome.tokens_in, outcome.tokens_out, outcome.cost_usd,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(list: &[&str]) -> Vec<ApprovalOption> {
        resolve_options(&list.iter().map(|o| (*o).into()).collect::<Vec<_>>())
    }

    #[test]
    fn approvals_accept_names_numbers_and_yes_no() {
        let o = options(&["approve", "reject"]);
        for (typed, picked) in [
            ("approve", "approve"),
            ("Reject", "reject"),
            ("1", "approve"),
            ("2", "reject"),
            ("y", "approve"),
            ("YES", "approve"),
            ("n", "reject"),
        ] {
            assert_eq!(choose(typed, &o).as_deref(), Some(picked), "{typed}");
        }
        for typed in ["0", "3", "maybe", ""] {
            assert_eq!(choose(typed, &o), None, "{typed}");
        }
        assert_eq!(choices(&o), "1 approve / 2 reject, or y / n");
    }

    #[test]
    fn yes_no_needs_an_approving_and_a_rejecting_option() {
        let o = options(&["ship", "wait", "drop"]);
        assert_eq!(choose("y", &o), None);
        assert_eq!(choose("3", &o).as_deref(), Some("drop"));
        assert_eq!(choices(&o), "1 ship / 2 wait / 3 drop");
    }

    #[test]
    fn a_bash_approval_offers_its_three_options_and_y_is_approve_once() {
        let o = resolve_options(&opc_agents::tools::bash::approval_options("make deploy"));
        assert_eq!(
            choices(&o),
            "1 Approve once / 2 Approve `make deploy` for this conversation / 3 Reject, or y / n"
        );
        assert_eq!(choose("y", &o).as_deref(), Some("Approve once"));
        assert_eq!(
            choose("2", &o).as_deref(),
            Some("Approve `make deploy` for this conversation")
        );
        assert_eq!(choose("n", &o).as_deref(), Some("Reject"));
        assert_eq!(choose("reject", &o).as_deref(), Some("Reject"));
    }
}
