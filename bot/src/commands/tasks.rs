//! `opc tasks`: the ledger — recent root tasks, or one delegation tree with state, timing, tokens and
//! cost per task, and each task's tool calls (tool, duration, outcome, a command's exit code). On
//! PostgreSQL, where several `opc run` nodes may serve the org, the list has a NODE column once nodes
//! ran requests (the node that ran each), the tree names the node of its tasks, and `opc tasks
//! nodes` lists the nodes themselves.
//!
//! Read-only: it opens the database without starting an engine (nor joining the cluster), so it is
//! safe to run next to `opc run` (SQLite WAL lets readers and the writer work at once).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use std::collections::HashMap;

use opc_agents::store::{NodeRow, TaskPrivacy, TaskRecord, ToolCallRecord, Totals};

use crate::term::{eprint, one_line, print};

/// Options of `opc tasks`.
#[derive(Debug, clap::Args)]
pub struct TasksArgs {
    #[command(subcommand)]
    pub command: Option<TasksCommand>,
    /// Show the delegation tree of this task (a root task, or any task in a tree).
    #[arg(long, value_name = "ID")]
    pub tree: Option<i64>,
    /// How many recent root tasks to list.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}

/// What `opc tasks` shows besides the requests.
#[derive(Debug, clap::Subcommand)]
pub enum TasksCommand {
    /// The nodes serving this org on PostgreSQL: name, address, start, last heartbeat, alive or
    /// not, trees held, agent slots in use, and config digest (marked when it differs from the
    /// newest live node's).
    Nodes,
}

/// The widest NODE column of the list; longer names are cut with an ellipsis.
const NODE_WIDTH: usize = 24;

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
    let opened = match runtime.block_on(crate::setup::open(&database)) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let now = opc_agents::store::now_ms();
    let result = match args.command {
        // Inside the runtime: the cluster seam starts its wake-up listener when it is made.
        Some(TasksCommand::Nodes) => match runtime.block_on(async {
            let cluster = nodes_reader(&loaded, &opened)?;
            Some(
                cluster
                    .nodes()
                    .await
                    .map(|rows| render_nodes(&rows, cluster.lease_ttl(), now)),
            )
        }) {
            Some(result) => result,
            None => Ok(
                "No nodes: this org keeps its state in its SQLite file, which one `opc run` owns. \
                 Several nodes need `framework.memory.storage: postgres`.\n"
                    .to_string(),
            ),
        },
        None => runtime.block_on(read(&*opened.store, &args, now)),
    };
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

/// The cluster seam, to read the nodes table (PostgreSQL only; made inside the runtime). It never
/// joins: `opc tasks` is not a node, and its name (`<host>-<pid>-tasks`) is recorded nowhere.
fn nodes_reader(
    loaded: &opc_hierarchy::Loaded,
    opened: &crate::setup::Opened,
) -> Option<std::sync::Arc<dyn opc_agents::store::Cluster>> {
    opened.postgres.as_ref()?;
    let name = crate::node::default_name(&crate::node::hostname(), std::process::id(), "-tasks");
    let identity = crate::node::identity(name, None, loaded.report.source.as_bytes());
    opened.cluster(identity, loaded.config.framework.cluster.lease_ttl)
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
/// shows what it has used so far. When a node ran any of them (several nodes on PostgreSQL), a NODE
/// column names the node that ran each (`-`: none has claimed it yet); rows without any node (SQLite,
/// or an org just copied from it) print as before.
pub fn render_list(roots: &[(TaskRecord, Totals)], now: i64) -> String {
    if roots.is_empty() {
        return "No tasks yet. Start one with `opc chat \"…\"`.\n".into();
    }
    let nodes = roots.iter().any(|(t, _)| t.node.is_some());
    let node_of = |task: &TaskRecord| one_line(task.node.as_deref().unwrap_or("-"), NODE_WIDTH);
    let width = roots
        .iter()
        .map(|(t, _)| node_of(t).chars().count())
        .max()
        .unwrap_or(0)
        .max("NODE".len());
    let node_cell = |text: &str| {
        if nodes {
            format!("{text:<width$}  ")
        } else {
            String::new()
        }
    };
    let mut out = format!(
        "{:>6}  {:<18}  {:<12}  {}{:>8}  {:>9}  {:>9}  {}\n",
        "ID",
        "STATE",
        "AGENT",
        node_cell("NODE"),
        "TIME",
        "TOKENS",
        "COST",
        "MESSAGE"
    );
    let mut running = false;
    for (task, totals) in roots {
        let live = !task.state.is_terminal();
        running |= live;
        let _ = writeln!(
            out,
            "{:>6}  {:<18}  {:<12}  {}{:>8}  {:>9}  {:>9}  {}",
            task.id,
            format!("{}{}", task.state.as_str(), if live { " *" } else { "" }),
            task.agent,
            node_cell(&node_of(task)),
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

/// Every node of the cluster, by name, as a table: address, start (UTC), last heartbeat as an age,
/// state (`alive`; `stopped` when it left cleanly; `lost` when its heartbeat is older than the
/// lease `ttl`, so its trees go to other nodes), trees held, slots in use of its total, and config
/// digest, marked `≠` when it differs from the newest live node's.
pub fn render_nodes(nodes: &[NodeRow], ttl: Duration, now: i64) -> String {
    if nodes.is_empty() {
        return "No nodes yet: none has joined this database. Start one with `opc run`.\n".into();
    }
    let newest = crate::node::newest_digest(nodes, now, ttl);
    let width = |column: &dyn Fn(&NodeRow) -> usize, title: &str| {
        nodes.iter().map(column).max().unwrap_or(0).max(title.len())
    };
    let id_width = width(&|n| n.id.chars().count(), "NODE");
    let address_width = width(
        &|n| n.address.as_deref().unwrap_or("-").chars().count(),
        "ADDRESS",
    );
    let mut out = format!(
        "{:<id_width$}  {:<address_width$}  {:<20}  {:>9}  {:<7}  {:>5}  {:>5}  {}\n",
        "NODE", "ADDRESS", "STARTED", "HEARTBEAT", "STATE", "TREES", "SLOTS", "CONFIG"
    );
    let mut differs = false;
    let mut lost = false;
    for node in nodes {
        let state = if node.alive(now, ttl) {
            "alive"
        } else if node.stopped {
            "stopped"
        } else {
            lost = true;
            "lost"
        };
        let marked = newest.is_some_and(|d| d != node.config_digest);
        differs |= marked;
        let started = u64::try_from(node.started_ms).map_or_else(
            |_| "-".to_string(),
            |ms| {
                humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(ms))
                    .to_string()
            },
        );
        let _ = writeln!(
            out,
            "{:<id_width$}  {:<address_width$}  {:<20}  {:>9}  {:<7}  {:>5}  {:>5}  {}{}",
            node.id,
            node.address.as_deref().unwrap_or("-"),
            started,
            format!("{} ago", crate::node::age(node.heartbeat_ms, now)),
            state,
            node.trees,
            format!("{}/{}", node.slots_in_use, node.slots_total),
            node.config_digest,
            if marked { " ≠" } else { "" }
        );
    }
    if lost {
        let _ = writeln!(
            out,
            "lost: no heartbeat for over the lease ({}); other nodes take its trees over.",
            humantime::format_duration(ttl)
        );
    }
    if let (true, Some(newest)) = (differs, newest) {
        let _ = writeln!(
            out,
            "≠: its config differs from the newest live node's ({newest}); restart it with the same opc.config.yaml."
        );
    }
    out
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
    let node_of: HashMap<i64, Option<&str>> =
        tree.iter().map(|t| (t.id, t.node.as_deref())).collect();
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
        // The node that ran it (PostgreSQL): said at the root, and again only where a task ran
        // elsewhere than its parent (a tree taken over by another node).
        let parent_node = task.parent_id.and_then(|p| node_of.get(&p).copied());
        if let Some(node) = task.node.as_deref()
            && parent_node != Some(Some(node))
        {
            let _ = write!(out, " · on {node}");
        }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use opc_agents::TaskState;

    fn task(id: i64, parent: Option<i64>, agent: &str, node: Option<&str>) -> TaskRecord {
        TaskRecord {
            id,
            parent_id: parent,
            root_id: 1,
            conversation_id: "c".into(),
            agent: agent.into(),
            depth: u32::from(parent.is_some()),
            tool_use_id: None,
            tool_index: 0,
            state: TaskState::Completed,
            input: "ship the launch plan".into(),
            output: Some("done".into()),
            summary: None,
            error: None,
            escalation: None,
            created_at: 1_000,
            updated_at: 3_500,
            finished_at: Some(3_500),
            tokens_in: 100,
            tokens_out: 20,
            cost_usd: 0.0012,
            llm_calls: 1,
            unknown_usage_calls: 0,
            node: node.map(str::to_string),
            trace: None,
        }
    }

    fn totals() -> Totals {
        Totals {
            tokens_in: 100,
            tokens_out: 20,
            cost_usd: 0.0012,
            unknown_usage_calls: 0,
        }
    }

    /// Once a node ran a request, the list has a NODE column: the node that ran each request, `-`
    /// for one no node has claimed. Without any node (SQLite, or rows just copied from it) the list
    /// prints as it always did.
    #[test]
    fn the_list_names_each_requests_node_once_nodes_ran_them() {
        let mut waiting = task(2, None, "ceo", None);
        waiting.id = 2;
        let rows = [
            (waiting, totals()),
            (task(1, None, "ceo", Some("node-b")), totals()),
        ];
        let out = render_list(&rows, 10_000);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "    ID  STATE               AGENT         NODE        TIME     TOKENS       COST  MESSAGE"
        );
        assert_eq!(
            lines[1],
            "     2  COMPLETED           ceo           -           2.5s        120    $0.0012  ship the launch plan"
        );
        assert_eq!(
            lines[2],
            "     1  COMPLETED           ceo           node-b      2.5s        120    $0.0012  ship the launch plan"
        );
        let sqlite = render_list(
            &[
                (task(2, None, "ceo", None), totals()),
                (task(1, None, "ceo", None), totals()),
            ],
            10_000,
        );
        assert!(!sqlite.contains("NODE"), "{sqlite}");
        assert!(
            sqlite.starts_with(
                "    ID  STATE               AGENT             TIME     TOKENS       COST  MESSAGE\n"
            ),
            "{sqlite}"
        );
    }

    #[test]
    fn a_long_node_name_is_cut_to_the_column() {
        let long = "x".repeat(64);
        let out = render_list(&[(task(1, None, "ceo", Some(&long)), totals())], 10_000);
        let cut = format!("{}…", "x".repeat(NODE_WIDTH - 1));
        assert!(
            out.lines().nth(1).unwrap().contains(&format!("{cut}  ")),
            "{out}"
        );
    }

    /// The tree says where the root ran, and again only where a task ran on another node.
    #[test]
    fn the_tree_names_the_node_where_it_changes() {
        let tree = [
            task(1, None, "ceo", Some("a")),
            task(2, Some(1), "cto", Some("a")),
            task(3, Some(1), "cfo", Some("b")),
        ];
        let out = render_tree(&tree, &HashMap::new(), &[], 10_000);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("#1 ceo COMPLETED"), "{out}");
        assert!(lines[0].ends_with(" · on a"), "{out}");
        assert!(!lines[1].contains(" · on "), "{out}");
        assert!(lines[2].ends_with(" · on b"), "{out}");
        // SQLite: no node anywhere.
        let plain = [task(1, None, "ceo", None)];
        assert!(!render_tree(&plain, &HashMap::new(), &[], 10_000).contains(" on "));
    }

    fn node(id: &str, started: i64, heartbeat: i64, stopped: bool, digest: &str) -> NodeRow {
        NodeRow {
            instance: 1,
            id: id.into(),
            address: (!stopped).then(|| "10.0.0.5:7421".to_string()),
            host: "box".into(),
            pid: 7,
            started_ms: started,
            heartbeat_ms: heartbeat,
            stopped,
            trees: 3,
            slots_total: 4,
            slots_in_use: 2,
            config_digest: digest.into(),
        }
    }

    #[test]
    fn nodes_are_listed_with_state_slots_and_a_differing_config_marked() {
        let ttl = Duration::from_secs(15);
        let now = 1_800_000_000_000;
        let nodes = [
            node("a", now - 3_600_000, now - 2_000, false, "3f2a9c1b0d4e"),
            node("b", now - 60_000, now - 1_000, false, "9e8d7c6b5a4f"),
            node("gone", now - 7_200_000, now - 40_000, false, "3f2a9c1b0d4e"),
            node("left", now - 7_200_000, now - 300_000, true, "9e8d7c6b5a4f"),
        ];
        let out = render_nodes(&nodes, ttl, now);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "NODE  ADDRESS        STARTED               HEARTBEAT  STATE    TREES  SLOTS  CONFIG",
                "a     10.0.0.5:7421  2027-01-15T07:00:00Z     2s ago  alive        3    2/4  3f2a9c1b0d4e ≠",
                "b     10.0.0.5:7421  2027-01-15T07:59:00Z     1s ago  alive        3    2/4  9e8d7c6b5a4f",
                "gone  10.0.0.5:7421  2027-01-15T06:00:00Z    40s ago  lost         3    2/4  3f2a9c1b0d4e ≠",
                "left  -              2027-01-15T06:00:00Z  5m00s ago  stopped      3    2/4  9e8d7c6b5a4f",
                "lost: no heartbeat for over the lease (15s); other nodes take its trees over.",
                "≠: its config differs from the newest live node's (9e8d7c6b5a4f); restart it with the same opc.config.yaml.",
            ]
        );
    }

    /// The nodes as a real cluster on PostgreSQL records them, read the way `opc tasks nodes`
    /// reads them (a reader that never joins): two joined nodes, then one left.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn opc_tasks_nodes_reads_the_clusters_table() {
        let Some(url) = opc_tests::postgres::fresh_database("bot_tasks_nodes").await else {
            return;
        };
        let text = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n  memory: { storage: postgres }\nagents:\n  ceo: { role: CEO }\n";
        let loaded = opc_hierarchy::parse("t.yaml", text.to_string(), None).unwrap();
        let database = crate::setup::Database::Postgres {
            url,
            place: "test".into(),
            url_env: "DATABASE_URL".into(),
            max_connections: 4,
        };
        let opened = crate::setup::open(&database).await.ok().unwrap();
        let ttl = Duration::from_secs(15);
        let now = opc_agents::store::now_ms();
        let join = |id: &str, started: i64, config: &[u8]| {
            let identity = opc_agents::store::NodeIdentity {
                id: id.into(),
                instance: crate::node::instance(),
                address: Some(format!("127.0.0.1:{}", 7400 + id.len())),
                host: "box".into(),
                pid: 7,
                started_ms: started,
                config_digest: crate::node::config_digest(config),
            };
            opened.cluster(identity, ttl).unwrap()
        };
        let a = join("a", now - 60_000, b"old config");
        let bee = join("bee", now - 1_000, b"new config");
        a.join(4).await.unwrap();
        bee.join(4).await.unwrap();
        a.heartbeat(1, &[]).await.unwrap();

        let reader = nodes_reader(&loaded, &opened).unwrap();
        let rows = reader.nodes().await.unwrap();
        let out = render_nodes(&rows, reader.lease_ttl(), opc_agents::store::now_ms());
        let line = |id: &str| {
            out.lines()
                .find(|l| l.starts_with(&format!("{id} ")))
                .unwrap_or_else(|| panic!("no {id} in\n{out}"))
                .to_string()
        };
        assert!(line("a").contains("127.0.0.1:7401"), "{out}");
        assert!(line("a").contains(" alive "), "{out}");
        assert!(line("a").contains(" 1/4 "), "{out}");
        // The newest live node runs the new config: `a` is marked, `bee` is not.
        let new = crate::node::config_digest(b"new config");
        assert!(line("a").ends_with(" ≠"), "{out}");
        assert!(line("bee").ends_with(&new), "{out}");
        // The reader itself is no node.
        assert_eq!(rows.len(), 2, "{out}");

        bee.leave().await.unwrap();
        let rows = reader.nodes().await.unwrap();
        let out = render_nodes(&rows, ttl, opc_agents::store::now_ms());
        let bee_line = out.lines().find(|l| l.starts_with("bee ")).unwrap();
        assert!(bee_line.contains(" stopped "), "{out}");
        // Now `a` is the newest live node: its config is the one the others are judged by.
        assert!(bee_line.ends_with(" ≠"), "{out}");
        assert!(
            !out.lines()
                .find(|l| l.starts_with("a "))
                .unwrap()
                .ends_with(" ≠"),
            "{out}"
        );
    }

    #[test]
    fn no_nodes_says_how_to_start_one() {
        assert!(render_nodes(&[], Duration::from_secs(15), 0).contains("opc run"));
    }
}
