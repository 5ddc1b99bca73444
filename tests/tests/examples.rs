//! The files users are pointed at stay valid and work: the offline demo's config, its script, and `run.sh`
//! in both modes (`opc chat`, and `--serve`: `opc run` with the web chat).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use opc_tests::scripted_llm::Script;

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/offline"))
}

#[test]
fn offline_demo_config_validates_without_warnings() {
    let loaded =
        opc_hierarchy::load(&examples().join("opc.config.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.report.warnings().count(), 0);
    assert_eq!(loaded.org.depth(), 3);
}

#[test]
fn offline_demo_script_parses_and_names_every_agent() {
    let script = Script::from_file(examples().join("script.json")).unwrap();
    let text = serde_json::to_string(&script).unwrap();
    for agent in ["ceo", "vp-eng", "lead-backend", "dev-backend"] {
        assert!(text.contains(&format!("Agent id: {agent}\\n")), "{agent}");
    }
}

/// The demo, run twice as a user would (same message, two conversations), is answered the same way:
/// the scripted server follows its script per conversation, not once for the whole server.
#[tokio::test]
async fn the_offline_demo_answers_the_same_way_twice() {
    use opc_tests::scripted_llm::ScriptedLlm;
    let script = Script::from_file(examples().join("script.json")).unwrap();
    let llm = ScriptedLlm::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(examples().join("opc.config.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:7431/v1", &format!("{}/v1", llm.url()));
    let config_path = dir.path().join("opc.config.yaml");
    std::fs::write(&config_path, config).unwrap();
    use opc_tests::wait::{WAIT_LONG, output_within_async};
    let opc = opc_tests::opc_process::opc_binary();

    let mut answers = Vec::new();
    for run in 1..=2 {
        let opc = opc.clone();
        let config_path = config_path.clone();
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut child = Command::new(opc)
            .args(["chat", "Launch a public status page", "--config"])
            .arg(&config_path)
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("opc chat starts");
        // Two bytes: the pipe takes them without blocking, whatever `opc` is doing.
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"y\n").expect("answer the approval");
        drop(stdin);
        // On the deadline the child is killed, so a hung demo ends the test (a timeout around a
        // blocking wait would leave it running).
        let out = output_within_async(child, WAIT_LONG, "the demo chat to finish").await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "run {run}: {stderr}");
        assert!(
            stderr.contains("approval") && stderr.contains("approve (by cli"),
            "run {run}: the approval was asked and decided by `y`: {stderr}"
        );
        answers.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    assert!(
        answers[0].starts_with("Here is the plan from engineering:"),
        "{}",
        answers[0]
    );
    assert!(
        answers[0].contains("API endpoint first (2 days)"),
        "{}",
        answers[0]
    );
    assert_eq!(
        answers[0], answers[1],
        "the second demo is answered like the first"
    );
    llm.shutdown().await;
}

/// Kills a process group on drop, so a failing test leaves no demo running.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0)])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Whether any process of group `pgid` is alive.
fn group_alive(pgid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", "--", &format!("-{pgid}")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `run.sh --serve` as a user runs it: the scripted server and `opc run` on the offline config; the
/// offline org answers in the web chat (delegation, an approval decided there, the final answer); Ctrl-C
/// (SIGINT to the terminal's process group) stops `opc run` cleanly and the server with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_mode_runs_the_offline_org_in_the_web_chat_and_ctrl_c_stops_both() {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    use opc_tests::post_json;
    use opc_tests::sse::Sse;
    use opc_tests::wait::{WAIT_LONG as WAIT, blocking_within, exit_within, wait_until};
    use serde_json::json;

    let opc = opc_tests::opc_process::opc_binary();
    let bin_dir = opc.parent().expect("target dir").to_path_buf();
    let llm = std::path::PathBuf::from(env!("CARGO_BIN_EXE_scripted-llm"));
    assert_eq!(
        llm.parent(),
        Some(bin_dir.as_path()),
        "both binaries side by side"
    );

    let mut child = Command::new("bash")
        .arg(examples().join("run.sh"))
        .args(["--serve", "--listen", "127.0.0.1:0"])
        // Free ports for both servers (the script then points a copy of the config at its server), and
        // the binaries just built.
        .env("OPC_BIN_DIR", &bin_dir)
        .env("OPC_OFFLINE_LLM_LISTEN", "127.0.0.1:0")
        .env("OPC_MODELS_OFFLINE", "1")
        .env("OPC_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("OPC_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, as a terminal's foreground job: Ctrl-C signals the whole group.
        .process_group(0)
        .spawn()
        .expect("run.sh starts");
    let pgid = child.id();
    let _group = Group(pgid);
    let mut stderr = child.stderr.take().expect("stderr");
    let stderr_text = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (mut stdout, banner) = blocking_within(WAIT, "opc run's ready line", move || {
        let mut stdout = stdout;
        let mut line = String::new();
        while stdout.read_line(&mut line).unwrap_or(0) > 0 {
            if line.contains("web chat on http://") {
                break;
            }
            line.clear();
        }
        (stdout, line)
    })
    .expect("the ready line within a minute");
    let address = banner
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {banner:?}"))
        .to_string();
    assert!(banner.contains("4 agents"), "the offline org: {banner}");
    let url = |path: &str| format!("http://{address}{path}");

    let (status, body) = post_json(&url("/api/conversations"), json!({})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("conversation id").to_string();
    let mut sse = Sse::connect(&url(&format!("/api/conversations/{id}/events")), None).await;
    let (status, body) = post_json(
        &url(&format!("/api/conversations/{id}/messages")),
        json!({ "text": "Launch a public status page" }),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    sse.wait_for("progress", WAIT, |e| {
        e["event"] == "delegated" && e["to"] == "dev-backend"
    })
    .await;
    let card = sse.wait_for("card", WAIT, |_| true).await;
    let approval = card["card"]["approval"].as_i64().expect("approval id");
    let options = card["card"]["options"].as_array().expect("options").clone();
    let approve = options
        .iter()
        .position(|o| o == "approve")
        .unwrap_or_else(|| panic!("an approve option in {card}"));
    let (status, body) = post_json(
        &url(&format!("/api/approvals/{approval}")),
        json!({ "option": approve }),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    sse.wait_for("message|edit", WAIT, |m| {
        m["text"].as_str().is_some_and(|t| {
            t.starts_with("Here is the plan from engineering:")
                && t.contains("API endpoint first (2 days)")
        })
    })
    .await;

    // Ctrl-C: SIGINT to the group.
    let sent = Command::new("kill")
        .args(["-INT", "--", &format!("-{pgid}")])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let status = exit_within(&mut child, WAIT).expect("run.sh exits within the deadline of Ctrl-C");
    // Nothing of the demo is left: the scripted server stopped too. Then no process holds the pipes,
    // so reading them to the end cannot block.
    wait_until(WAIT, "every process of the demo to exit", || {
        !group_alive(pgid)
    })
    .await;
    let mut rest = String::new();
    let _ = stdout.read_to_string(&mut rest);
    let stderr = stderr_text.join().unwrap_or_default();
    assert_eq!(status.code(), Some(0), "stdout: {rest}\nstderr: {stderr}");
    assert!(
        rest.contains("opc: stopped"),
        "opc run stopped cleanly: {rest}\n{stderr}"
    );
}
