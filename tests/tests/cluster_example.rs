//! Several nodes as users run them (issue 36): two real `opc run --node NAME` processes serving the
//! repository's example org (`opc.config.yaml` and its `prompts/`, what `cargo run --release -- run`
//! serves) switched to `framework.memory.storage: postgres` on one throw-away PostgreSQL, with the
//! example's privacy (on, every detect type, `requireNer`, the real NER model) and sandbox (enforced,
//! no network), OPC running as root and the org (config, workspaces, recall index) in a private 0700
//! directory. The model is the scripted LLM on 127.0.0.1; the person talks to node A's web chat.
//!
//! The example's chain CEO → VP Engineering → Backend Lead → Senior Backend Developer
//! (`dev-backend`, workspace `repos/api`) relays each request down; `dev-backend` runs two real Bash
//! commands in the sandbox, made of what the example lets it run without asking (`ls`, `cat`):
//! `cat contact.txt` (a person's name and e-mail address), then
//! `ls contact.txt >> runs.log; cat gate.<token>; cat contact.txt`, which leaves its side effect
//! first (a line in `runs.log`, how the test sees the command running and counts its runs), then
//! waits on a named pipe the test opens when it chooses (the "gate"), then prints the contact again.
//! `dev-backend` reports the second command's output; every manager's answer is its report's,
//! prefixed; the CEO's names the request.
//!
//! How a request sent to A runs on B: the example's `maxConcurrentAgents` is set to 1 (one tree a
//! node), and a first request (the "filler") is sent to A while A runs alone; once its command
//! waits at the gate, A has no room, B is started, and the request under test is sent to A: B
//! claims it (the cluster's own queue, as `cluster_e2e` makes a tree run on the other node).
//!
//! 1. The answer the person gets on A holds the real shell output with the name and the e-mail
//!    restored; no request the scripted LLM received holds them as written (the tool output was
//!    masked); the database and `opc tasks` name the node that ran each task.
//! 2. B is killed (`kill -9`) while the command of the tree it runs waits at the gate: A takes the
//!    tree over once the filler is done; the Bash call comes back to `dev-backend` as "interrupted;
//!    not known whether it completed" and is not run again (`runs.log` holds one line for it), and
//!    the first command's output, made on B, reaches the model from A masked again; the person gets
//!    exactly one answer on A, and no "failed".
//!
//! The request of scenario 2 holds no personal data itself, on purpose: the privacy vault is per
//! tree and in memory, seeded at random when a node starts running the tree, so after a takeover
//! the same person gets other substitutes. Each request is consistent in itself, but the scripted
//! LLM keys its sessions by the (masked) first user message, and would take a session whose task
//! names a person for a new one.
//!
//! Why a relay in front of the scripted LLM ([`Relay`]): the example's agents have recall on, so each
//! session's task message starts with "Relevant memory:" and what recall found in the other
//! conversation — which differs between a session's run on B and its run on A after the takeover
//! (each node has its own recall index, and the filler ends in between). The scripted LLM keys its
//! sessions by the first user message, so the relay strips that prefix from what it forwards, after
//! recording every request as the nodes sent it (the privacy checks read those).
//!
//! Gated like the other root, sandbox and PostgreSQL tests: without root, the sandbox's kernel
//! features, the NER model or PostgreSQL it skips with one line, and fails under CI. A failing test
//! prints every node's stderr and the cluster's tables.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::Response;
use opc_tests::cluster::{Db, LEASE_TTL, Root, Said, poll};
use opc_tests::example;
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, marker, relay};
use opc_tests::postgres::fresh_database;
use opc_tests::sandbox::{private_dir, running_with};
use opc_tests::scripted_llm::{INPUT_PLACEHOLDER, Script, ScriptedLlm, Step, bash_call};
use opc_tests::sse::Sse;
use opc_tests::wait::{WAIT, WAIT_LONG, within};
use opc_tests::web_chat;
use serde_json::{Value, json};

const A: &str = "node-a";
const B: &str = "node-b";

/// What `contact.txt` holds (and the command prints): a person's name and e-mail address.
const CONTACT: &str = "Priya Raman <priya.raman@example.com>";
/// Parts of the personal data, none of which may reach the LLM as written.
const PERSONAL: [&str; 4] = ["Priya", "Raman", "priya.raman", "priya.raman@example.com"];
/// What the engine tells a taken-over agent about a tool call that was in flight on the dead node
/// (`opc_agents::session::INTERRUPTED`).
const INTERRUPTED: &str = "interrupted; not known whether it completed (the node running this task stopped while the tool ran; check its effects before running it again)";
/// The deadline of one request through the example's four levels (each model call masked with the
/// NER model on a busy machine), or of a failover (a lease to lapse, the filler to end, the tree to
/// be claimed and walked again).
const FLOW: Duration = Duration::from_secs(240);

/// One cluster at a time: two nodes with the NER model each, on two busy cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Digits no other process's command line holds, for the gate's name (so the test can find the
/// commands waiting at it).
fn token() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}{nanos:09}", std::process::id())
}

/// `dev-backend`'s second command (see the module doc): a side effect, the gate, the contact.
fn command(gate: &str) -> String {
    format!("ls contact.txt >> runs.log; cat {gate}; cat contact.txt")
}

/// The example's engineering chain, each manager relaying its report's answer; `dev-backend` runs
/// its two commands and reports the second's output. Memory work (fact extraction, consolidation: no agent's
/// marker) records nothing.
fn script(gate: &str) -> Script {
    Script::new()
        .agent(
            marker("ceo"),
            relay("vp-eng", INPUT_PLACEHOLDER, "CEO, on {{input}}: "),
        )
        .agent(
            marker("vp-eng"),
            relay("lead-backend", INPUT_PLACEHOLDER, "VP: "),
        )
        .agent(
            marker("lead-backend"),
            relay("dev-backend", INPUT_PLACEHOLDER, "LEAD: "),
        )
        .agent(
            marker("dev-backend"),
            vec![
                Step::tools([bash_call("cat contact.txt")]),
                Step::tools([bash_call(&command(gate))]),
                Step::text("DEV: {{last_result}}"),
            ],
        )
        .fallback(vec![Step::record_facts(json!([]))])
}

/// The answer the person gets to `text` when `dev-backend`'s command reported `report`.
fn answer(text: &str, report: &str) -> String {
    format!("CEO, on {text}: VP: LEAD: DEV: {report}")
}

/// A command's report when it printed the contact and ended.
fn contact_report() -> String {
    format!("{CONTACT}\nexit code 0")
}

// ---------------------------------------------------------------------------------------------
// The relay in front of the scripted LLM
// ---------------------------------------------------------------------------------------------

/// The head of the recall prefix a session puts before its task (`opc_agents::context`).
const RECALL_HEAD: &str = "Relevant memory:\n";
/// Where the recall prefix ends and the task begins.
const TASK_HEAD: &str = "\nTask:\n";

/// Every request body as a node sent it, and how many carried a recall prefix.
#[derive(Default)]
struct Received {
    bodies: Vec<String>,
    recalled: usize,
}

struct RelayState {
    upstream: String,
    client: reqwest::Client,
    received: Mutex<Received>,
}

/// An HTTP relay on 127.0.0.1 between the nodes and the scripted LLM (see the module doc): records
/// each request, strips the recall prefix from its user messages, forwards it, and returns the
/// answer as it came.
struct Relay {
    url: String,
    state: Arc<RelayState>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(upstream: &str) -> Relay {
        let state = Arc::new(RelayState {
            upstream: upstream.to_string(),
            client: opc_tests::http_client(),
            received: Mutex::new(Received::default()),
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Relay { url, state, task }
    }

    /// Every request body the nodes sent, as sent.
    fn bodies(&self) -> Vec<String> {
        self.state.received.lock().unwrap().bodies.clone()
    }

    /// How many requests carried a recall prefix.
    fn recalled(&self) -> usize {
        self.state.received.lock().unwrap().recalled
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    State(state): State<Arc<RelayState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let sent = String::from_utf8_lossy(&body).into_owned();
    let mut json: Option<Value> = serde_json::from_slice(&body).ok();
    let stripped = json.as_mut().is_some_and(strip_recall);
    {
        let mut received = state.received.lock().unwrap();
        received.bodies.push(sent);
        received.recalled += usize::from(stripped);
    }
    let body = match &json {
        Some(json) if stripped => Bytes::from(serde_json::to_vec(json).unwrap()),
        _ => body,
    };
    let mut request = state
        .client
        .post(format!("{}{}", state.upstream, uri))
        .body(body);
    for (name, value) in &headers {
        if name != header::HOST && name != header::CONTENT_LENGTH {
            request = request.header(name, value);
        }
    }
    let failed = |e: String| {
        Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::from(format!("relay: {e}")))
            .unwrap()
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => return failed(e.to_string()),
    };
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = match response.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return failed(e.to_string()),
    };
    let mut out = Response::builder().status(status.as_u16());
    if let Some(content_type) = content_type {
        out = out.header(header::CONTENT_TYPE, content_type);
    }
    out.body(Body::from(bytes)).unwrap()
}

/// Remove the recall prefix from the user messages of an LLM request (a text block of its own, or
/// the head of the task's text); whether there was one.
fn strip_recall(body: &mut Value) -> bool {
    let mut stripped = false;
    let cut = |text: &str| -> Option<String> {
        let rest = text.strip_prefix(RECALL_HEAD)?;
        let at = rest.find(TASK_HEAD)?;
        Some(rest[at + TASK_HEAD.len()..].to_string())
    };
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return false;
    };
    for message in messages.iter_mut().filter(|m| m["role"] == "user") {
        match &mut message["content"] {
            Value::String(text) => {
                if let Some(task) = cut(text) {
                    *text = task;
                    stripped = true;
                }
            }
            Value::Array(blocks) => {
                for block in blocks.iter_mut() {
                    if let Some(task) = block["text"].as_str().and_then(cut) {
                        block["text"] = Value::String(task);
                        stripped = true;
                    }
                }
                // A prefix in a block of its own leaves an empty block: dropped.
                blocks.retain(|b| b["type"] != "text" || b["text"].as_str() != Some(""));
            }
            _ => {}
        }
    }
    stripped
}

// ---------------------------------------------------------------------------------------------
// The example org on two nodes
// ---------------------------------------------------------------------------------------------

/// The example org in a private directory, on PostgreSQL, and the nodes serving it.
struct ExampleCluster {
    /// Declared first, so killed before the directory goes.
    nodes: Vec<(String, OpcRun)>,
    dir: tempfile::TempDir,
    config: PathBuf,
    url: String,
    models: PathBuf,
    db: Db,
    /// The FIFO `dev-backend`'s command waits at (its name in the workspace).
    gate: String,
}

impl ExampleCluster {
    /// A copy of the example org in a fresh 0700 directory: its model at `llm`, on the database
    /// `url` (see [`edit`]), and `dev-backend`'s workspace made as an admin would (owned by root)
    /// with `contact.txt` and the gate.
    fn write(llm: &str, url: &str, models: PathBuf, gate: &str) -> ExampleCluster {
        let dir = private_dir();
        assert_eq!(std::fs::metadata(dir.path()).unwrap().mode() & 0o777, 0o700);
        let config = example::copy_org(dir.path(), |original| edit(&original, llm));
        let cluster = ExampleCluster {
            nodes: Vec::new(),
            dir,
            config,
            url: url.to_string(),
            models,
            db: Db::new(url),
            gate: gate.to_string(),
        };
        let workspace = cluster.workspace();
        std::fs::create_dir_all(&workspace).unwrap();
        let mut up = workspace.as_path();
        while up != cluster.dir.path() {
            std::fs::set_permissions(up, std::fs::Permissions::from_mode(0o755)).unwrap();
            up = up.parent().unwrap();
        }
        let contact = workspace.join("contact.txt");
        std::fs::write(&contact, format!("{CONTACT}\n")).unwrap();
        std::fs::set_permissions(&contact, std::fs::Permissions::from_mode(0o644)).unwrap();
        let made = Command::new("mkfifo")
            .args(["-m", "0644"])
            .arg(workspace.join(gate))
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {gate}");
        cluster
    }

    /// `dev-backend`'s workspace (the example's `workspace: repos/api` under `.opc/workspaces`).
    fn workspace(&self) -> PathBuf {
        self.dir.path().join(".opc/workspaces/repos/api")
    }

    /// The lines `dev-backend`'s commands wrote to `runs.log`: one per run.
    fn runs(&self) -> usize {
        std::fs::read_to_string(self.workspace().join("runs.log"))
            .map(|text| text.lines().count())
            .unwrap_or(0)
    }

    /// The commands waiting at the gate now: their `cat <gate>` processes (exactly that command
    /// line, so neither the shell around it nor the sandbox's launcher counts).
    fn at_the_gate(&self) -> usize {
        let wanted = format!("cat\0{}\0", self.gate);
        running_with(&self.gate)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes())
            })
            .count()
    }

    /// Open the gate once: every command waiting at it reads an empty pipe and goes on. Opening a
    /// FIFO for reading and writing never blocks on Linux; closing it leaves no writer, so a reader
    /// whose `open` it woke reads end-of-file.
    fn pulse(&self) {
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.workspace().join(&self.gate));
    }

    /// Start `opc run --node NAME` and wait until its NER model is in (privacy holds every model
    /// call until then; this test is not about that wait).
    async fn start(&mut self, name: &str) {
        let log = std::env::var("OPC_TEST_NODE_LOG").unwrap_or_else(|_| "warn".to_string());
        let run = OpcRun::start_with_args(
            &self.config,
            &["--node", name],
            &[
                ("ANTHROPIC_API_KEY", KEY),
                ("DATABASE_URL", self.url.as_str()),
                ("OPC_MODELS", self.models.to_str().unwrap()),
                ("OPC_LOG", log.as_str()),
            ],
        );
        self.nodes.push((name.to_string(), run));
        let node = self.node(name);
        within(
            WAIT_LONG,
            &format!("{name}'s NER model (/healthz)"),
            async {
                loop {
                    match node.health().await["privacy"].as_str().unwrap_or_default() {
                        "ready" => break,
                        "failed" => panic!("{name}'s NER model failed to load"),
                        _ => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            },
        )
        .await;
    }

    fn node(&self, name: &str) -> &OpcRun {
        &self
            .nodes
            .iter()
            .rfind(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no node {name}"))
            .1
    }

    /// `kill -9` node `name`, and wait until it is dead (a zombie: its stderr stays readable).
    fn kill9(&self, name: &str) -> SystemTime {
        let pid = self.node(name).pid();
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -9 {pid} ({name})");
        let deadline = std::time::Instant::now() + WAIT;
        while !dead(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "{name} still runs after kill -9"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        SystemTime::now()
    }

    /// SIGTERM every node still running; each must exit 0.
    fn stop_all(&mut self) {
        for (name, run) in std::mem::take(&mut self.nodes) {
            if dead(run.pid()) {
                continue;
            }
            let stderr = run.stderr();
            let (code, _) = run.stop();
            assert_eq!(code, Some(0), "{name} did not stop cleanly:\n{stderr}");
        }
    }

    fn stderr(&self) -> String {
        self.nodes
            .iter()
            .map(|(name, run)| format!("--- stderr of {name} ---\n{}\n", run.stderr()))
            .collect()
    }

    /// `opc ARGS --config <the org's config>` on the database: exit code, stdout, stderr.
    async fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let mut command = Command::new(opc_binary());
        command
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("DATABASE_URL", &self.url)
            .env("NO_COLOR", "1");
        let out = opc_tests::wait::output_of(command, WAIT).await;
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The root whose input is `text`, once a node runs it.
    async fn running(&self, text: &str) -> Root {
        poll(WAIT_LONG, &format!("a node running {text:?}"), || async {
            self.db
                .roots()
                .await
                .into_iter()
                .find(|r| r.input == text && r.node.is_some())
        })
        .await
    }

    /// `(agent, node)` of every task of the tree under `root`, in order.
    async fn tree_nodes(&self, root: i64) -> Vec<(String, Option<String>)> {
        self.db
            .rows(
                "SELECT agent, node FROM tasks WHERE root_id = $1 ORDER BY id",
                &[&root],
            )
            .await
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    }
}

impl Drop for ExampleCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.stderr());
            eprintln!("{}", self.db.dump_blocking());
        }
    }
}

/// The example config as this test serves it: the provider at `llm`, on PostgreSQL with the
/// shortest lease, one tree a node, the web chat on a free port. Everything else — privacy,
/// sandbox, memory, the org — is the example's.
fn edit(original: &str, llm: &str) -> String {
    let edits = [
        ("storage: sqlite", "storage: postgres".to_string()),
        (
            "apiKeyEnv: ANTHROPIC_API_KEY",
            format!("baseUrl: {llm}\n      apiKeyEnv: ANTHROPIC_API_KEY"),
        ),
        (
            "\n  memory:\n",
            format!("\n  cluster:\n    leaseTtl: {LEASE_TTL}\n\n  memory:\n"),
        ),
        (
            "maxConcurrentAgents: 10",
            "maxConcurrentAgents: 1".to_string(),
        ),
        (
            "listen: 127.0.0.1:7420",
            "listen: \"127.0.0.1:0\"".to_string(),
        ),
    ];
    let mut config = original.to_string();
    for (from, to) in edits {
        assert_eq!(
            config.matches(from).count(),
            1,
            "the example config changed shape ({from:?}): update this test's edits"
        );
        config = config.replace(from, &to);
    }
    config
}

/// Whether process `pid` (a child of this one) has died: gone, or a zombie.
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// What the test needs of the machine, each through its gate (a skip with one line, a failure
/// under CI): root, the kernel features of the example's sandbox, the NER model, PostgreSQL. The
/// models' root and the database's URL.
async fn gates(test: &str) -> Option<(PathBuf, String)> {
    if !example::root(test) {
        return None;
    }
    let (privacy, sandbox) = example::settings();
    assert_eq!(privacy["enabled"], true, "{privacy}");
    assert_eq!(privacy["mode"], "mask", "{privacy}");
    assert_eq!(sandbox["mode"], "enforce", "{sandbox}");
    let mut policy = opc_sandbox::Policy::new(std::env::temp_dir());
    policy.network = sandbox["network"].as_bool().unwrap_or(false);
    let missing = opc_sandbox::Probe::detect().missing(&policy);
    let features = if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("this kernel lacks {}", missing.join(", ")))
    };
    opc_testgate::need(opc_testgate::Group::Sandbox, test, features)?;
    let models = example::models_root(test)?;
    let url = fresh_database(test).await?;
    Some((models, url))
}

/// The final answer (or failure) shown on `sse` for a request: its text.
async fn final_answer(sse: &mut Sse, limit: Duration) -> String {
    let shown = sse
        .wait_for("message|edit", limit, |data| {
            data["text"].as_str().is_some_and(|t| {
                !t.ends_with('…') && (t.starts_with("CEO, on ") || t.contains("request failed"))
            })
        })
        .await;
    shown["text"].as_str().unwrap_or_default().to_string()
}

/// The transcript of `conversation` holds exactly one answer, `expected`, and nothing (answer or
/// notice) says the request failed.
async fn answered_once(db: &Db, conversation: &str, expected: &str) {
    let said = db.transcript(conversation).await;
    let bot: Vec<&Said> = said
        .iter()
        .filter(|s| s.author == "bot" && !s.card)
        .collect();
    assert!(
        bot.len() == 1 && bot[0].text == expected,
        "conversation {conversation}: expected one answer {expected:?}; the transcript is {said:#?}"
    );
    let alarming: Vec<&Said> = said
        .iter()
        .filter(|s| s.author == "notice" || s.text.to_lowercase().contains("fail"))
        .collect();
    assert!(
        alarming.is_empty(),
        "conversation {conversation} was told something went wrong: {alarming:#?}"
    );
}

/// `results` (tool results as the model saw them) are `n` runs of a command that printed the
/// contact and ended, the contact masked.
#[track_caller]
fn masked_contacts(results: &[(String, bool)], n: usize) {
    assert_eq!(results.len(), n, "{results:#?}");
    for (text, is_error) in results {
        assert!(
            !is_error && text.ends_with("\nexit code 0"),
            "a command's result as the model saw it: {results:#?}"
        );
        assert_ne!(*text, contact_report(), "the output went unmasked");
    }
}

/// No request the nodes sent the model holds the person's name or e-mail as written.
fn nothing_personal_sent(relay: &Relay) {
    let bodies = relay.bodies();
    assert!(!bodies.is_empty());
    for body in &bodies {
        for real in PERSONAL {
            assert!(
                !body.contains(real),
                "{real:?} reached the LLM as written: {body}"
            );
        }
    }
}

/// Up to the point both scenarios share: A alone runs the filler, whose command waits at the gate;
/// B joins; `text` is sent to A's web chat and B runs it, its command at the gate too. The page
/// following `text`, and its root.
async fn tree_on_b_at_the_gate(
    cluster: &mut ExampleCluster,
    filler: &str,
    text: &str,
) -> ((String, Sse), (String, Sse), Root) {
    cluster.start(A).await;
    let filler_chat = web_chat::start(cluster.node(A), filler).await;
    let root = cluster.running(filler).await;
    assert_eq!(root.node.as_deref(), Some(A), "{root:?}");
    within(FLOW, "the filler's command at the gate", async {
        while cluster.runs() < 1 || cluster.at_the_gate() < 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    cluster.start(B).await;
    let chat = web_chat::start(cluster.node(A), text).await;
    let root = cluster.running(text).await;
    assert_eq!(
        root.node.as_deref(),
        Some(B),
        "sent to A while A's one slot runs the filler: {root:?}"
    );
    within(FLOW, "the request's command at the gate", async {
        while cluster.runs() < 2 || cluster.at_the_gate() < 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    (filler_chat, chat, root)
}

/// Open the gate every 50 ms until `done` resolves (commands reach it at their own pace).
async fn with_the_gate_open<T>(cluster: &ExampleCluster, done: impl Future<Output = T>) -> T {
    tokio::pin!(done);
    loop {
        cluster.pulse();
        tokio::select! {
            out = &mut done => return out,
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_a_runs_on_b_and_its_answer_holds_the_real_shell_output_restored() {
    let Some((models, url)) = gates("cluster_example_answer").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let gate = format!("gate.{}", token());
    let llm = ScriptedLlm::start(script(&gate)).await.unwrap();
    llm.log_requests(true);
    let relay = Relay::start(&llm.url()).await;
    let mut cluster = ExampleCluster::write(&relay.url, &url, models, &gate);

    let filler = "Run the contact lookup for the morning report";
    let text = "Run the contact lookup for the support rota";
    let ((filler_conversation, mut filler_page), (conversation, mut page), root) =
        tree_on_b_at_the_gate(&mut cluster, filler, text).await;

    let (shown, filler_shown) = with_the_gate_open(&cluster, async {
        let shown = final_answer(&mut page, FLOW).await;
        let filler_shown = final_answer(&mut filler_page, FLOW).await;
        (shown, filler_shown)
    })
    .await;
    // The person sees the shell's output as the command printed it, the person restored.
    let expected = answer(text, &contact_report());
    assert_eq!(shown, expected, "{}", cluster.stderr());
    assert_eq!(filler_shown, answer(filler, &contact_report()));
    answered_once(&cluster.db, &conversation, &expected).await;
    answered_once(
        &cluster.db,
        &filler_conversation,
        &answer(filler, &contact_report()),
    )
    .await;

    // The model saw the real shell output masked: the commands' results reached it (their exit
    // codes), the person never did.
    nothing_personal_sent(&relay);
    let dev: Vec<_> = llm
        .requests_for(&marker("dev-backend"))
        .into_iter()
        .filter(|q| q.session.contains("support rota"))
        .collect();
    assert_eq!(dev.len(), 3, "one request per step: {dev:#?}");
    masked_contacts(&dev[2].all_tool_results(), 2);
    eprintln!(
        "{} of {} model requests carried recalled memory",
        relay.recalled(),
        relay.bodies().len()
    );

    // Which node ran each task: the database, and `opc tasks`.
    let ran = cluster.tree_nodes(root.id).await;
    assert_eq!(ran.len(), 4, "the example's chain: {ran:?}");
    assert!(
        ran.iter().all(|(_, node)| node.as_deref() == Some(B)),
        "{ran:?}"
    );
    let filler_root = cluster.running(filler).await;
    let filler_ran = cluster.tree_nodes(filler_root.id).await;
    assert!(
        filler_ran
            .iter()
            .all(|(_, node)| node.as_deref() == Some(A)),
        "{filler_ran:?}"
    );
    let (code, list, err) = cluster.cli(&["tasks"]).await;
    assert_eq!(code, Some(0), "{err}");
    let line_of = |id: i64| {
        list.lines()
            .find(|line| line.split_whitespace().next() == Some(&id.to_string()))
            .unwrap_or_else(|| panic!("no line for task {id} in `opc tasks`:\n{list}"))
            .to_string()
    };
    assert!(line_of(root.id).contains(B), "{list}");
    assert!(line_of(filler_root.id).contains(A), "{list}");
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_running_the_tree_killed_in_mid_command_leaves_one_answer_and_no_second_run() {
    let Some((models, url)) = gates("cluster_example_kill").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let gate = format!("gate.{}", token());
    let llm = ScriptedLlm::start(script(&gate)).await.unwrap();
    llm.log_requests(true);
    let relay = Relay::start(&llm.url()).await;
    let mut cluster = ExampleCluster::write(&relay.url, &url, models, &gate);

    let filler = "Run the contact lookup for the morning report";
    let text = "Run the contact lookup for the support rota";
    let ((filler_conversation, mut filler_page), (conversation, mut page), root) =
        tree_on_b_at_the_gate(&mut cluster, filler, text).await;
    let dev = marker("dev-backend");
    let asked = |llm: &ScriptedLlm| {
        llm.requests_for(&dev)
            .into_iter()
            .filter(|q| q.session.contains("support rota"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        asked(&llm).len(),
        2,
        "dev-backend asked for its two commands"
    );

    // B dies while its command waits at the gate; the command dies with it.
    let killed_at = cluster.kill9(B);
    within(WAIT, "B's command to die with B", async {
        while cluster.at_the_gate() > 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    // The filler goes on (A's one slot frees), and A takes B's tree over.
    let (shown, filler_shown) = with_the_gate_open(&cluster, async {
        let filler_shown = final_answer(&mut filler_page, FLOW).await;
        let shown = final_answer(&mut page, FLOW).await;
        (shown, filler_shown)
    })
    .await;
    assert_eq!(filler_shown, answer(filler, &contact_report()));
    let expected = answer(text, INTERRUPTED);
    assert_eq!(shown, expected, "{}", cluster.stderr());
    answered_once(&cluster.db, &conversation, &expected).await;
    answered_once(
        &cluster.db,
        &filler_conversation,
        &answer(filler, &contact_report()),
    )
    .await;

    // The tree ended on A; the command ran once for each request (the filler's, and the one B
    // started), never again; dev-backend was told its call was interrupted, after the kill.
    let now = cluster.running(text).await;
    assert_eq!(
        (now.state.as_str(), now.node.as_deref()),
        ("COMPLETED", Some(A)),
        "{now:?}"
    );
    assert_eq!(now.id, root.id);
    assert_eq!(cluster.runs(), 2, "runs.log: the command ran again");
    let asked = asked(&llm);
    assert_eq!(asked.len(), 3, "{asked:#?}");
    assert!(asked[2].received_at > killed_at, "{asked:#?}");
    assert_eq!(
        asked[2].tool_results(),
        vec![(INTERRUPTED.to_string(), true)],
        "what dev-backend was told of its second Bash call"
    );
    // The first command's output, recorded on B, reached the model from A masked again.
    masked_contacts(&asked[2].all_tool_results()[..1], 1);
    nothing_personal_sent(&relay);
    cluster.stop_all();
}
