//! `opc chat` and `opc tasks` as a user runs them, against the scripted LLM server on 127.0.0.1:
//! the answer on stdout exactly, the trace on stderr, approvals typed on stdin, the ledger afterwards,
//! and a clear refusal when the API key is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use opc_tests::org::{KEY, KEY_VAR, TestOrg, Wire, marker, relay};
use opc_tests::scripted_llm::{Script, Step};
use opc_tests::wait::{WAIT, output_within_async, wait_until};
use serde_json::json;

/// Run `opc` with `stdin` as input, waiting on a blocking thread so the test's server keeps serving.
async fn opc(config: &Path, args: &[&str], stdin: &str, key: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_opc"));
    command
        .args(args)
        .arg("--config")
        .arg(config)
        .env("NO_COLOR", "1")
        .env_remove(KEY_VAR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if key {
        command.env(KEY_VAR, KEY);
    }
    let mut child = command.spawn().expect("opc starts");
    let mut input = child.stdin.take().expect("stdin");
    let stdin = stdin.to_string();
    // Written on its own thread: a pipe's buffer is small, and `opc` may be blocked writing its output.
    std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    output_within_async(child, WAIT, &format!("`opc {}` to finish", args.join(" "))).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn chat_prints_the_answer_and_trace_and_tasks_shows_the_tree() {
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-ops", "refund order 7", "Done: "))
        .agent(marker("vp-ops"), vec![Step::text("refund issued")]);
    let (_llm, org) = TestOrg::scripted(script).start().await;
    let out = opc(
        &org.config_path(),
        &["chat", "please refund order 7"],
        "",
        true,
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = text(&out.stdout);
    assert_eq!(stdout, "Done: refund issued\n");
    assert!(stderr.contains("ceo → vp-ops (task 2)"), "{stderr}");
    assert!(stderr.contains("✓ vp-ops COMPLETED"), "{stderr}");
    assert!(stderr.contains("tokens in"), "{stderr}");
    assert!(
        !stderr.contains("not active in this build"),
        "everything this org turns on runs (consolidation, on by default, included): {stderr}"
    );
    assert!(
        !stderr.contains("privacy gateway"),
        "privacy runs: {stderr}"
    );

    let out = opc(&org.config_path(), &["tasks"], "", false).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list = text(&out.stdout);
    assert!(
        list.contains("COMPLETED") && list.contains("please refund order 7"),
        "{list}"
    );

    let out = opc(&org.config_path(), &["tasks", "--tree", "1"], "", false).await;
    let tree = text(&out.stdout);
    assert!(tree.starts_with("#1 ceo COMPLETED"), "{tree}");
    assert!(tree.contains("└─ #2 vp-ops COMPLETED"), "{tree}");
    assert!(tree.contains("2 tasks"), "{tree}");
    // The list shows the request's whole tree, as the chat's closing line does.
    assert_eq!(
        listed_tokens(&list, 1),
        tree_tokens(&tree),
        "{list}\n{tree}"
    );
}

/// The TOKENS column of task `id` in `opc tasks`.
fn listed_tokens(list: &str, id: i64) -> u64 {
    let row = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("no row for task {id} in {list}"));
    let columns: Vec<&str> = row.split_whitespace().collect();
    // ID STATE [*] AGENT TIME TOKENS COST MESSAGE…
    let at = if columns[2] == "*" { 5 } else { 4 };
    columns[at]
        .parse()
        .unwrap_or_else(|_| panic!("tokens in {row}"))
}

/// The token total on the last line of `opc tasks --tree`.
fn tree_tokens(tree: &str) -> u64 {
    let last = tree.lines().last().expect("a total line");
    last.split(" · ")
        .find_map(|part| part.strip_suffix(" tokens"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no total in {last}"))
}

#[tokio::test]
async fn approvals_are_typed_on_stdin_and_end_of_input_rejects() {
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-ops", "refund", "CEO: "))
        .agent(marker("vp-ops"), relay("support", "refund order 7", ""))
        .agent(
            marker("support"),
            vec![
                Step::tool(
                    "request_approval",
                    json!({"summary": "Refund $120 for order 7"}),
                ),
                Step::text("{{last_result}}"),
            ],
        );
    let (_llm, org) = TestOrg::scripted(script.clone())
        .wire(Wire::OpenAi)
        .start()
        .await;
    let out = opc(
        &org.config_path(),
        &["chat", "refund please"],
        "maybe\napprove\n",
        true,
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("approval 1 requested by ceo › vp-ops › support"),
        "{stderr}"
    );
    assert!(stderr.contains("Refund $120 for order 7"), "{stderr}");
    assert!(stderr.contains("`maybe` is not an option"), "{stderr}");
    assert!(
        stderr.contains("decide (1 approve / 2 reject, or y / n)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("waiting for you"),
        "waiting is shown apart: {stderr}"
    );
    assert!(
        text(&out.stdout).starts_with("CEO: approved by cli"),
        "{}",
        text(&out.stdout)
    );

    // No input at all: the approval is rejected, not left hanging.
    let (_llm, org) = TestOrg::scripted(script).wire(Wire::OpenAi).start().await;
    let out = opc(&org.config_path(), &["chat", "refund please"], "", true).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("CEO: rejected by cli"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test]
async fn a_missing_api_key_is_a_clear_startup_error() {
    let (llm, org) = TestOrg::scripted(Script::new()).start().await;
    let out = opc(&org.config_path(), &["chat", "hello"], "", false).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "the API key for provider `llm` is missing: set the environment variable {KEY_VAR}"
        )),
        "{stderr}"
    );
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn ctrl_c_cancels_the_running_tree() {
    use opc_tests::scripted_llm::Fault;
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-eng", "go", ""))
        .agent(marker("vp-eng"), vec![Step::fault(Fault::Hang)]);
    let (llm, org) = TestOrg::scripted(script).start().await;
    let child = Command::new(env!("CARGO_BIN_EXE_opc"))
        .args(["chat", "wait forever", "--config"])
        .arg(org.config_path())
        .env(KEY_VAR, KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("opc starts");
    // Wait until the VP's (hanging) call has reached the server, then press Ctrl-C.
    wait_until(WAIT, "the VP's call", || {
        !llm.requests_for(&marker("vp-eng")).is_empty()
    })
    .await;
    // While it runs, the list shows it as running, with the tree's totals so far (the CEO's turn).
    let out = opc(&org.config_path(), &["tasks"], "", false).await;
    let list = text(&out.stdout);
    assert!(list.contains("still running"), "{list}");
    let out = opc(&org.config_path(), &["tasks", "--tree", "1"], "", false).await;
    let tree = text(&out.stdout);
    let so_far = listed_tokens(&list, 1);
    assert!(so_far > 0, "the CEO's finished turn is counted: {list}");
    assert_eq!(so_far, tree_tokens(&tree), "{list}\n{tree}");

    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let out = output_within_async(child, WAIT, "`opc chat` to exit on SIGINT").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelling the request"), "{stderr}");

    let out = opc(&org.config_path(), &["tasks", "--tree", "1"], "", false).await;
    let tree = text(&out.stdout);
    assert!(tree.starts_with("#1 ceo CANCELLED"), "{tree}");
    assert!(tree.contains("└─ #2 vp-eng CANCELLED"), "{tree}");
}

/// A retried call reads like the trace (the agent, the model, why, when), not like a log record.
#[tokio::test]
async fn a_retry_is_a_trace_line() {
    let script = Script::new().agent(
        marker("ceo"),
        vec![Step::status(529, Some("0")), Step::text("fine now")],
    );
    let (_llm, org) = TestOrg::scripted(script).start().await;
    let out = opc(&org.config_path(), &["chat", "hello"], "", true).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "fine now\n");
    assert!(
        stderr.contains("  ↻ ceo: ") && stderr.contains("call failed (HTTP 529); retrying in"),
        "{stderr}"
    );
    assert!(!stderr.contains("WARN"), "no raw log records: {stderr}");
}
