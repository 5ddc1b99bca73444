//! `opc tasks`: the ledger — recent root tasks, or one delegation tree with state, timing, tokens and
//! cost per node, and each node's tool calls (tool, duration, outcome, a command's exit code).
//!
//! Read-only: it opens the database without starting an engine, so it is safe to run next to `opc run`
//! (SQLite WAL lets readers and the writer work at once).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use std::collections::HashMap;

use opc_agents::store::{TaskPrivacy, TaskRecord, ToolCallRecord, Totals};

use crate::term::{eprint, one_line, print};

/// Options of `opc tasks`.
#[derive(Debug, clap::Args)]
pub struct TasksArgs {
    /// Show the delegation tree of this task (a root task, or any task in a tree).
    #[arg(long, value_name = "ID")]
    pub tree: Option<i64>,
    /// How many recent root tasks to list.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}

pub fn run(path: &Path, args: TasksArgs) -> ExitCode {
    let loaded = match crate::setup::load_config(path) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let database = match crate::setup::database(&loaded) {
        Ok(database) => database,
        Err(code) => return code,
    };
    if let crate::setup::Database::Sqlite(path) = &database
        && !path.exists()
    {
        print(&format!(
            "No tasks yet ({} does not exist). Start one with `opc chat \"…\"`.\n",
            path.display()
        ));
        return ExitCode::SUCCESS;
    }
    let runtime = match crate::setup::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let store = match runtime.block_on(crate::setup::open_store(&database)) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let now = opc_agents::store::now_ms();
    let result = runtime.block_on(read(&*store, &args, now));
    match result {
        Ok(text) => {
            print(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            ExitCode::FAILURE
        }
    }
}

/// How long the task took, or, while it runs, how long it has been running until `now`.
fn duration(task: &TaskRecord, now: i64) -> String {
    let end = match task.finished_at {
        Some(finished) => finished,
        None if task.state.is_terminal() => task.updated_at,
        None => now,
    };
    let ms = (end - task.created_at).max(0);
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

/// Recent requests, newest first, each with the totals of its whole tree `(tokens_in, tokens_out,
/// cost)`: what the request cost, delegations included, as the chat's closing line shows it. The
/// totals are summed from the ledger, which is written after every model turn, so a running request
/// shows what it has used so far.
pub fn render_list(roots: &[(TaskRecord, Totals)], now: i64) -> String {
    if roots.is_empty() {
        return "No tasks yet. Start one with `opc chat \"…\"`.\n".into();
    }
    let mut out = format!(
        "{:>6}  {:<18}  {:<12}  {:>8}  {:>9}  {:>9}  {}\n",
        "ID", "STATE", "AGENT", "TIME", "TOKENS", "COST", "MESSAGE"
    );
    let mut running = false;
    for (task, totals) in roots {
        let live = !task.state.is_terminal();
        running |= live;
        let _ = writeln!(
            out,
            "{:>6}  {:<18}  {:<12}  {:>8}  {:>9}  {:>9}  {}",
            task.id,
            format!("{}{}", task.state.as_str(), if live { " *" } else { "" }),
            task.agent,
            duration(task, now),
            // `≥`: some calls' usage is unknown, so the count is a lower bound.
            match totals.unknown_usage_calls {
                0 => (totals.tokens_in + totals.tokens_out).to_string(),
                _ => format!("≥{}", totals.tokens_in + totals.tokens_out),
            },
            format!("${:.4}", totals.cost_usd),
            one_line(&task.input, 50)
        );
    }
    out.push_str(
        "Totals cover each request's whole tree; `opc tasks --tree ID` shows who did what.\n",
    );
    if running {
        out.push_str("* still running: time and totals so far.\n");
    }
    if roots.iter().any(|(_, t)| t.unknown_usage_calls > 0) {
        out.push_str(
            "≥: the provider did not report token usage for some calls; the count is a lower bound.\n",
        );
    }
    out
}

/// What `opc tasks` prints: one tree, or the recent roots with their totals.
async fn read(
    store: &dyn opc_agents::Store,
    args: &TasksArgs,
    now: i64,
) -> Result<String, opc_agents::store::StoreError> {
    match args.tree {
        Some(id) => {
            let task = store.task(id).await?;
            let tree = store.tree(task.root_id).await?;
            let privacy = store.privacy_by_task(task.root_id).await?;
            let tools = store.tool_calls(task.root_id).await?;
            Ok(render_tree(&tree, &privacy, &tools, now))
        }
        None => {
            let roots = store.recent_roots(args.limit).await?;
            let mut rows = Vec::with_capacity(roots.len());
            for root in roots {
                let totals = store.totals(root.id).await?;
                rows.push((root, totals));
            }
            Ok(render_list(&rows, now))
        }
    }
}

/// One tree, parents before children, with box-drawing indentation. `privacy` is what the privacy
/// gateway did per task: `masked 3 (PERSON_NAME 2, EMAIL 1)` counts, per type, the most any one of the
/// task's requests carried; calls routed to the trusted model and calls the egress guard stopped are
/// counted apart. Under each task, its tool calls in the order they finished: tool, duration,
/// outcome (a command's exit code), and what the tool noted as safe to show (Bash: the command
/// without its arguments).
pub fn render_tree(
    tree: &[TaskRecord],
    privacy: &HashMap<i64, TaskPrivacy>,
    tools: &[ToolCallRecord],
    now: i64,
) -> String {
    let Some(root) = tree.first() else {
        return String::new();
    };
    let mut out = String::new();
    let (mut tokens, mut cost, mut unknown) = (0u64, 0f64, 0u32);
    // Depth-first from the root, children in creation order.
    let mut stack: Vec<(&TaskRecord, String, bool)> = vec![(root, String::new(), true)];
    while let Some((task, prefix, last)) = stack.pop() {
        tokens += task.tokens_in + task.tokens_out;
        cost += task.cost_usd;
        unknown += task.unknown_usage_calls;
        let branch = if task.parent_id.is_none() {
            ""
        } else if last {
            "└─ "
        } else {
            "├─ "
        };
        let _ = write!(
            out,
            "{prefix}{branch}#{} {} {} · {} · {} in / {} out · ${:.4} · {} call{}",
            task.id,
            task.agent,
            task.state.as_str(),
            duration(task, now),
            task.tokens_in,
            task.tokens_out,
            task.cost_usd,
            task.llm_calls,
            if task.llm_calls == 1 { "" } else { "s" }
        );
        if task.unknown_usage_calls > 0 {
            let _ = write!(out, " · usage unknown for {}", task.unknown_usage_calls);
        }
        if let Some(p) = privacy.get(&task.id) {
            if let Some(masked) = p.masked.summary() {
                let _ = write!(out, " · {masked}");
            }
            let plural = |n: u32| if n == 1 { "" } else { "s" };
            if p.routed > 0 {
                let _ = write!(
                    out,
                    " · routed {} call{} to the trusted model",
                    p.routed,
                    plural(p.routed)
                );
            }
            if p.blocked > 0 {
                let _ = write!(
                    out,
                    " · privacy guard stopped {} call{}",
                    p.blocked,
                    plural(p.blocked)
                );
            }
        }
        if let Some(error) = &task.error {
            let _ = write!(out, " · {}", one_line(error, 60));
        }
        out.push('\n');
        let child_prefix = if task.parent_id.is_none() {
            String::new()
        } else {
            format!("{prefix}{}", if last { "   " } else { "│  " })
        };
        let children: Vec<&TaskRecord> = tree
            .iter()
            .filter(|t| t.parent_id == Some(task.id))
            .collect();
        // The task's tool calls, under it and beside its children's branches.
        let rail = if children.is_empty() { "   " } else { "│  " };
        for call in tools.iter().filter(|c| c.task_id == task.id) {
            let _ = write!(
                out,
                "{child_prefix}{rail}· {} {} {}",
                call.tool,
                humantime::format_duration(std::time::Duration::from_millis(call.duration_ms)),
                call.outcome.as_str()
            );
            if let Some(code) = call.exit_code {
                let _ = write!(out, " (exit {code})");
            }
            if let Some(detail) = &call.detail {
                let _ = write!(out, " · {}", one_line(detail, 60));
            }
            out.push('\n');
        }
        for (i, child) in children.iter().enumerate().rev() {
            stack.push((child, child_prefix.clone(), i + 1 == children.len()));
        }
    }
    let _ = writeln!(
        out,
        "{} task{} · {} tokens · ${cost:.4}",
        tree.len(),
        if tree.len() == 1 { "" } else { "s" },
        opc_agents::store::tokens_text(tokens, unknown)
    );
    out
}
