//! The files users are pointed at stay valid: the offline demo's config and its script.
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
    let opc = opc_tests::opc_process::opc_binary();

    let mut answers = Vec::new();
    for run in 1..=2 {
        let opc = opc.clone();
        let config_path = config_path.clone();
        let out = tokio::task::spawn_blocking(move || {
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
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(b"y\n").expect("answer the approval");
            drop(stdin);
            child.wait_with_output().expect("opc chat finishes")
        });
        let out = tokio::time::timeout(std::time::Duration::from_secs(120), out)
            .await
            .expect("the demo chat finishes within 2 minutes")
            .expect("join");
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
