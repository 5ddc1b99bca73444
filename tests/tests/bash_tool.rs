//! The Bash tool at the engine level, against the scripted LLM over real HTTP on 127.0.0.1 and the
//! real sandbox (launched through the `opc` binary): an unlisted command raises an approval with three
//! options; a rejection leaves no trace (the command did not run); "for this conversation" is not
//! asked twice; an allowed command runs at once; `deny` refuses without asking; every tool call is an
//! event and a ledger row; cancelling the tree kills a running command's process tree.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opc_agents::context::NoMemory;
use opc_agents::store::{ApprovalState, ToolOutcome};
use opc_agents::{Engine, Event, Outcome, RootRun, SqliteStore, TaskState};
use opc_tests::opc_process::opc_binary;
use opc_tests::org::{KEY, KEY_VAR, TestOrg, marker, provider_yaml};
use opc_tests::sandbox::{private_dir, running_with};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, next_event, wait_until, within};
use serde_json::json;

/// A two-agent org whose worker has Bash, pointed at `llm`: `dev`'s policy is `bash` (YAML).
struct BashOrg {
    dir: tempfile::TempDir,
    loaded: opc_hierarchy::Loaded,
}

impl BashOrg {
    fn new(llm: &ScriptedLlm, bash: &str) -> BashOrg {
        // 0700, as `mktemp -d` makes it: the sandbox's user (uid 61000 when the tests run as root)
        // cannot traverse it, and need not: the command sees its workspace at `/workspace`.
        let dir = private_dir();
        let providers = provider_yaml(&llm.url(), false);
        let yaml = format!(
            r#"
framework:
  name: Bash Org
{providers}
  privacy: {{ requireNer: false }}
  execution:
    approvalTimeout: 1h
agents:
  ceo:
    role: CEO
    level: 0
    tools: [delegate, escalate]
    memory: {{ recall: false }}
    children: [dev]
  dev:
    role: Developer
    level: 1
    parent: ceo
    tools: [Bash, escalate]
    memory: {{ recall: false }}
    bash: {bash}
"#
        );
        let path = dir.path().join("opc.config.yaml");
        std::fs::write(&path, yaml).unwrap();
        let loaded = match opc_hierarchy::load(&path) {
            Ok(loaded) => loaded,
            Err(opc_hierarchy::ConfigError::Invalid(report)) => {
                panic!("bash org invalid:\n{}", report.render(false))
            }
            Err(e) => panic!("bash org: {e}"),
        };
        BashOrg { dir, loaded }
    }

    /// The worker's workspace.
    fn workspace(&self) -> PathBuf {
        self.loaded.org.workspace("dev").unwrap()
    }

    async fn engine(&self) -> Engine {
        let store = SqliteStore::open(&self.dir.path().join("opc.db")).unwrap();
        let mut options = TestOrg::options(false);
        options.sandbox = Some(Arc::new(opc_sandbox::Sandbox::new(opc_binary())));
        Engine::from_config(
            &self.loaded,
            Arc::new(store),
            Arc::new(NoMemory),
            options,
            |var| (var == KEY_VAR).then(|| KEY.to_string()),
        )
        .await
        .unwrap()
    }
}

async fn finish(run: RootRun) -> Outcome {
    within(WAIT, "the request to finish", run.wait()).await
}

/// The CEO hands `task` to dev and relays its answer.
fn ceo() -> Vec<Step> {
    vec![
        Step::tool("delegate", json!({"agent": "dev", "task": "work"})),
        Step::text("CEO: {{last_result}}"),
    ]
}

fn bash(command: &str) -> Step {
    Step::tool(
        "Bash",
        json!({"command": command, "description": "make a marker file"}),
    )
}

async fn next_approval(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
) -> (i64, String, Vec<String>) {
    next_event(events, WAIT, "an approval request", |event| match event {
        Event::ApprovalRequested {
            approval,
            summary,
            options,
            ..
        } => Some((approval, summary, options)),
        _ => None,
    })
    .await
}

fn exists(dir: &Path, name: &str) -> bool {
    dir.join(name).exists()
}

#[tokio::test]
async fn a_rejected_command_never_runs_and_the_model_is_told() {
    let script = Script::new().agent(marker("ceo"), ceo()).agent(
        marker("dev"),
        vec![bash("touch marker"), Step::text("DEV: {{last_result}}")],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = BashOrg::new(&llm, r#"{ allow: ["echo", "ls"], unlisted: ask }"#);
    let engine = org.engine().await;
    let mut events = engine.events().subscribe();
    let run = engine.send(None, "go").await.unwrap();
    let root = run.task;

    let (approval, summary, options) = next_approval(&mut events).await;
    let workspace = org.workspace();
    for needle in [
        "dev",
        "touch marker",
        &workspace.display().to_string(),
        "make a marker file",
    ] {
        assert!(summary.contains(needle), "{needle} in {summary}");
    }
    assert_eq!(
        options,
        [
            "Approve once",
            "Approve `touch marker` for this conversation",
            "Reject"
        ]
    );
    engine.decide(approval, "Reject", "U-bob").await.unwrap();
    let outcome = finish(run).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    assert!(
        outcome.text.contains("not run: rejected by U-bob"),
        "{}",
        outcome.text
    );
    // No trace: the command did not run.
    assert!(!exists(&workspace, "marker"));
    let record = engine.store().approval(approval).await.unwrap().unwrap();
    assert_eq!(record.state, ApprovalState::Rejected);

    // The ledger: the delegation and the Bash call, each with its outcome; the command's arguments
    // are not stored.
    let calls = engine.store().tool_calls(root).await.unwrap();
    let bash: Vec<_> = calls.iter().filter(|c| c.tool == "Bash").collect();
    assert_eq!(bash.len(), 1, "{calls:?}");
    assert_eq!(bash[0].outcome, ToolOutcome::Error);
    assert_eq!(bash[0].exit_code, None);
    assert_eq!(bash[0].detail.as_deref(), Some("touch …"));
    assert!(
        calls
            .iter()
            .any(|c| c.tool == "delegate" && c.outcome == ToolOutcome::Ok)
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn approved_for_the_conversation_is_not_asked_twice_and_allowed_commands_run_at_once() {
    let script = Script::new().agent(marker("ceo"), ceo()).agent(
        marker("dev"),
        vec![
            bash("touch one && echo made one"),
            bash("touch one && echo made one"),
            bash("echo $((6*7)) > answer.txt; ls"),
            Step::tool("Bash", json!({"command": "echo out && false"})),
            Step::text("DEV: {{last_result}}"),
        ],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = BashOrg::new(&llm, r#"{ allow: ["echo", "ls", "false"] }"#);
    let engine = org.engine().await;
    let mut events = engine.events().subscribe();
    let mut all = engine.events().subscribe();
    let run = engine.send(None, "go").await.unwrap();
    let root = run.task;

    let (first, _, options) = next_approval(&mut events).await;
    engine.decide(first, &options[1], "U-alice").await.unwrap();
    // The second, identical command runs without a card; `$((…))` is a substitution the matcher
    // does not vouch for, so the third asks.
    let (second, summary, _) = next_approval(&mut events).await;
    assert!(summary.contains("echo $((6*7))"), "{summary}");
    engine
        .decide(second, "Approve once", "U-alice")
        .await
        .unwrap();
    let outcome = finish(run).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    // The last, allowed command ran at once: its output, then its exit code (an error).
    assert!(
        outcome.text.contains("out\nexit code 1"),
        "{}",
        outcome.text
    );
    let approvals: Vec<_> = engine
        .store()
        .recent_approvals(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.root_id == root)
        .collect();
    assert_eq!(approvals.len(), 2, "asked once per command: {approvals:?}");
    let workspace = org.workspace();
    assert!(exists(&workspace, "one"));
    assert_eq!(
        std::fs::read_to_string(workspace.join("answer.txt")).unwrap(),
        "42\n"
    );

    // Every call is an event and a ledger row, with its exit code.
    let mut finished = Vec::new();
    while let Ok(event) = all.try_recv() {
        if let Event::ToolFinished {
            tool, exit_code, ..
        } = event
            && tool == "Bash"
        {
            finished.push(exit_code);
        }
    }
    assert_eq!(finished, [Some(0), Some(0), Some(0), Some(1)]);
    let ledger: Vec<_> = engine
        .store()
        .tool_calls(root)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.tool == "Bash")
        .map(|c| (c.outcome, c.exit_code, c.detail.unwrap_or_default()))
        .collect();
    assert_eq!(
        ledger,
        [
            (ToolOutcome::Ok, Some(0), "touch … ; echo …".to_string()),
            (ToolOutcome::Ok, Some(0), "touch … ; echo …".to_string()),
            // Per simple command (issue 34 §2's parsed allowlist): `echo $((6*7)) > answer.txt; ls`.
            (ToolOutcome::Ok, Some(0), "echo … ; ls".to_string()),
            (ToolOutcome::Error, Some(1), "echo … ; false".to_string()),
        ]
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn deny_refuses_without_asking() {
    let script = Script::new().agent(marker("ceo"), ceo()).agent(
        marker("dev"),
        vec![bash("touch marker"), Step::text("DEV: {{last_result}}")],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = BashOrg::new(&llm, r#"{ allow: ["echo"], unlisted: deny }"#);
    let engine = org.engine().await;
    let run = engine.send(None, "go").await.unwrap();
    let root = run.task;
    let outcome = finish(run).await;
    assert!(
        outcome
            .text
            .contains("`agents.dev.bash.unlisted` is `deny`"),
        "{}",
        outcome.text
    );
    assert!(!exists(&org.workspace(), "marker"));
    let asked = engine.store().recent_approvals(100).await.unwrap();
    assert!(asked.iter().all(|a| a.root_id != root), "{asked:?}");
    engine.shutdown().await;
}

/// A string no other process's command line holds: digits, so that it can also be the fraction of a
/// `sleep` argument (`sleep 300.<token>`), and the `sleep` carries it too.
fn token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}{nanos:09}", std::process::id())
}

#[tokio::test]
async fn cancelling_the_tree_kills_the_running_command() {
    // The command's PIDs (`$$`, `$!`) are its PID namespace's, not the host's: its processes are
    // found by a token in their command lines. `: TOKEN` after each `sleep` keeps bash from
    // exec'ing it, so bash, the subshell and the sleep all carry the token.
    let token = token();
    let command =
        format!("(sleep 300.{token}; : {token}) & echo started > started; wait; : {token}");
    let script = Script::new().agent(marker("ceo"), ceo()).agent(
        marker("dev"),
        vec![
            Step::tool("Bash", json!({"command": command})),
            Step::text("DEV: {{last_result}}"),
        ],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    // `*`: a subshell is not a plain command, and this test is not about the allowlist.
    let org = BashOrg::new(&llm, r#"{ allow: ["*"] }"#);
    let engine = org.engine().await;
    let run = engine.send(None, "go").await.unwrap();
    let root = run.task;
    let workspace = org.workspace();
    // bash, the subshell and the sleep.
    wait_until(WAIT, "the command and its background sleep to run", || {
        exists(&workspace, "started") && running_with(&token).len() >= 3
    })
    .await;
    engine.cancel(root).await.unwrap();
    let outcome = finish(run).await;
    assert_eq!(outcome.state, TaskState::Cancelled, "{}", outcome.text);
    // Dropping the tool's future killed the command's whole process tree.
    wait_until(WAIT, "every process of the command to be killed", || {
        running_with(&token).is_empty()
    })
    .await;
    engine.shutdown().await;
}
