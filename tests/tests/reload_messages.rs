//! What a hot reload says, on the real `opc run` (changes written to disk as an editor does, picked up
//! by the watcher, or `SIGHUP`), read from `GET /admin/api/reload` and from what `opc run` printed:
//!
//! - a refused file put back byte for byte to the running config withdraws the refusal: the console's
//!   "not applied" state (`stale`) clears;
//! - an applied reload names what changed: the agent and its key, and the section;
//! - setting `channels.web.listen` back to the running value after changing it says nothing about it
//!   (the first change says it applies at restart; the revert is compared with what runs);
//! - `SIGHUP` with nothing changed says so.
//!
//! Every wait polls the reload status, whose `checked` count moves only after the outcome is printed
//! and recorded, with a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::reload::replace_file;
use opc_tests::wait::WAIT;
use serde_json::Value;

const SECTIONS: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n\
    gateway:\n  rateLimit:\n    perUser: { messages: 10, per: 1m }\n    perChannel: { messages: 60, per: 1m }\n";

fn start() -> (TestOrg, OpcRun) {
    let org = TestOrg::with_sections(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Execution::default(),
        SECTIONS,
    );
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    (org, opc)
}

async fn status(opc: &OpcRun) -> Value {
    opc_tests::http_client()
        .get(opc.url("/admin/api/reload"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls the reload status until `done` holds; panics with the last status at the deadline.
async fn wait_for(opc: &OpcRun, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = status(opc).await;
        if done(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; reload status: {s}\nstderr:\n{}",
            opc.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_file_put_back_byte_for_byte_clears_the_not_applied_state() {
    let (org, opc) = start();
    let file = org.config_path();
    let original = std::fs::read(&file).unwrap();
    let text = String::from_utf8(original.clone()).unwrap();

    replace_file(&file, &text.replacen("parent: ceo", "parent: nobody", 1));
    let refused = wait_for(&opc, "the refusal", |s| s["stale"] == true).await;
    assert_eq!(refused["last"]["outcome"], "rejected", "{refused}");
    assert_eq!(refused["generation"], 1);

    std::fs::write(&file, &original).unwrap();
    let restored = wait_for(&opc, "the refusal withdrawn", |s| s["stale"] == false).await;
    assert_eq!(restored["last"]["outcome"], "unchanged", "{restored}");
    assert_eq!(restored["last"]["restored"], true, "{restored}");
    assert_eq!(restored["generation"], 1, "nothing was applied: {restored}");

    let (code, stdout) = opc.stop();
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains(
            "matches the running config again (generation 1); the refused change is withdrawn"
        ),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applied_reload_names_the_agents_and_sections_that_changed() {
    let (org, opc) = start();
    let file = org.config_path();
    let text = std::fs::read_to_string(&file).unwrap();
    let changed = text
        .replacen("role: VP Engineering", "role: VP of Engineering", 1)
        .replacen(
            "perUser: { messages: 10, per: 1m }",
            "perUser: { messages: 5, per: 1m }",
            1,
        );
    assert_ne!(changed, text);
    replace_file(&file, &changed);
    let applied = wait_for(&opc, "generation 2", |s| s["generation"] == 2).await;
    let last = &applied["last"];
    assert_eq!(last["outcome"], "applied", "{applied}");
    assert_eq!(
        last["changed"],
        serde_json::json!([{"agent": "vp-eng", "what": ["role"]}]),
        "{applied}"
    );
    assert_eq!(
        last["sections"],
        serde_json::json!(["gateway.rateLimit"]),
        "{applied}"
    );
    let summary = last["summary"].as_str().unwrap();
    assert!(
        summary.contains("changed vp-eng (role); changed gateway.rateLimit"),
        "{summary}"
    );

    let (code, stdout) = opc.stop();
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains(&format!("opc: {summary}\n")),
        "the printed line is the summary: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setting_listen_back_to_the_running_value_says_nothing_about_it() {
    let (org, opc) = start();
    let file = org.config_path();
    let text = std::fs::read_to_string(&file).unwrap();
    let moved = text.replacen("listen: \"127.0.0.1:0\"", "listen: \"127.0.0.1:1\"", 1);
    assert_ne!(moved, text);

    replace_file(&file, &moved);
    let second = wait_for(&opc, "generation 2", |s| s["generation"] == 2).await;
    assert_eq!(
        second["last"]["restart_needed"],
        serde_json::json!(["channels.web"]),
        "{second}"
    );

    replace_file(&file, &text);
    let third = wait_for(&opc, "generation 3", |s| s["generation"] == 3).await;
    let last = &third["last"];
    assert_eq!(last["restart_needed"], serde_json::json!([]), "{third}");
    assert_eq!(last["sections"], serde_json::json!([]), "{third}");
    let summary = last["summary"].as_str().unwrap();
    assert!(!summary.contains("channels.web"), "{summary}");
    assert!(summary.contains("no setting changed"), "{summary}");

    let (code, stdout) = opc.stop();
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout.matches("channels.web").count(),
        2,
        "only the first change mentions it (in its summary and its restart line): {stdout}"
    );
    assert!(
        stdout.contains("`channels.web` changed: it applies when `opc run` restarts"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_says_what_it_did_even_when_nothing_changed() {
    let (org, opc) = start();
    let before = status(&opc).await["checked"].as_u64().unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &opc.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    wait_for(&opc, "the SIGHUP reload", |s| {
        s["checked"].as_u64().unwrap() > before
    })
    .await;

    // A change, then SIGHUP: applied and named (the watcher may get there first; either way, the
    // reload that applies it names it).
    let file = org.config_path();
    let text = std::fs::read_to_string(&file).unwrap();
    replace_file(
        &file,
        &text.replacen("role: VP Engineering", "role: VP of Engineering", 1),
    );
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &opc.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    wait_for(&opc, "generation 2", |s| s["generation"] == 2).await;

    let (code, stdout) = opc.stop();
    assert_eq!(code, Some(0));
    let file = file.display().to_string();
    assert!(
        stdout.contains(&format!(
            "opc: config reload (signal): {file} is unchanged — generation 1 keeps running"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("generation 2") && stdout.contains("changed vp-eng (role)"),
        "{stdout}"
    );
}
