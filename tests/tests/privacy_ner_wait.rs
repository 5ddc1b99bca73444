//! The privacy gateway holds LLM calls until its NER model is ready, over real sockets against the
//! real `opc` binary and a recording scripted LLM:
//!
//! - the first message, sent the moment `opc run` is ready (the model still loading), reaches the
//!   LLM with the name masked: the call waited for the model;
//! - with an empty models dir, the call fails closed: nothing reaches the LLM, and the thread says
//!   why and to run `opc models fetch`; `/healthz` and the console say `failed`. Once the model files
//!   appear, the next message loads them (no restart) and is served masked;
//! - `requireNer: false` is warned about, once, by `opc validate` and by `opc run`, and serves
//!   pattern-only masking: the e-mail masked, the name as written.
//!
//! The tests that need the model find it in the cache (`OPC_MODELS`, else the user's cache dir, as
//! `opc models fetch` puts it); when it is absent they skip with one line, or fail under CI
//! (`example::models_root`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use opc_tests::example;
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{OutputWithin, WAIT_LONG};
use opc_tests::web_chat;
use serde_json::Value;

const NAME: &str = "Johanna Whitfield";
const MESSAGE: &str = "Please email Johanna Whitfield about the renewal.";
const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// The cached NER model's directory, or `None` when the test is skipped
/// ([`example::models_root`]).
fn cached_model(test: &str) -> Option<PathBuf> {
    let root = example::models_root(test)?;
    Some(opc_models::RAMPART.locate(&root).unwrap())
}

/// The CEO answers every message by quoting it (as the model saw it; the gateway restores it).
fn script() -> Script {
    Script::new()
        .agent(marker("ceo"), vec![Step::text("Noted: {{input}}")])
        .fallback(vec![Step::text("Noted.")])
}

/// The test org with `privacy` (keys under `framework.privacy`, indented 4) and the web chat.
fn org(llm: &ScriptedLlm, privacy: &str) -> TestOrg {
    let framework = format!("  privacy:\n{privacy}");
    TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            framework: &framework,
            sections: WEB,
            ..Extras::default()
        },
    )
}

fn start(org: &TestOrg, models: &Path) -> OpcRun {
    OpcRun::start(
        &org.config_path(),
        &[(KEY_VAR, KEY), ("OPC_MODELS", models.to_str().unwrap())],
    )
}

/// `/healthz` asked for JSON: the privacy gateway's NER state.
async fn health(opc: &OpcRun) -> String {
    let body = opc.health().await;
    assert_eq!(body["status"], "ok", "{body}");
    body["privacy"].as_str().unwrap().to_string()
}

/// The console's privacy summary.
async fn console_privacy(opc: &OpcRun) -> Value {
    let response = opc_tests::http_client()
        .get(opc.url("/admin/api/privacy"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

/// Send `text` in a new web conversation; the first message (or edit) of the thread that satisfies
/// `done`.
async fn ask(opc: &OpcRun, text: &str, done: impl Fn(&str) -> bool) -> String {
    let (_, mut sse) = web_chat::start(opc, text).await;
    let data = sse
        .wait_for("message|edit", WAIT_LONG, |data| {
            data["text"].as_str().is_some_and(&done)
        })
        .await;
    data["text"].as_str().unwrap().to_string()
}

/// Nothing the LLM received holds the name, or any part of it.
fn assert_name_never_sent(llm: &ScriptedLlm) {
    for request in llm.requests() {
        let body = request.body.to_string();
        assert!(
            !body.contains("Johanna") && !body.contains("Whitfield"),
            "the name reached the LLM: {body}"
        );
    }
}

/// Copy the model directory `from` into `models`, whole or not at all: copied beside, then renamed
/// into place, so `opc run` never sees half the files.
fn put_model(from: &Path, models: &Path) {
    let name = from.file_name().unwrap();
    let staging = models.join(".staging");
    std::fs::create_dir_all(&staging).unwrap();
    let dir = staging.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    std::fs::rename(&dir, models.join(name)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_message_after_start_waits_for_the_model_and_no_name_reaches_the_llm() {
    let Some(model) = cached_model("privacy_ner_wait::first_message") else {
        return;
    };
    let models = model.parent().unwrap().to_path_buf();
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = org(&llm, "    nerWait: 60s\n");
    let opc = start(&org, &models);
    // At once: the model loads after the ready line, on its own thread.
    // The final answer, restored for the user (streamed edits before it end with a typing marker).
    let expected = format!("Noted: {MESSAGE}");
    ask(&opc, MESSAGE, |t| t == expected).await;
    assert!(!llm.requests().is_empty());
    assert_name_never_sent(&llm);
    assert_eq!(health(&opc).await, "ready");
    let console = console_privacy(&opc).await;
    assert_eq!(console["ner"]["state"], "ready", "{console}");
    assert_eq!(console["requireNer"], true, "{console}");
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_model_calls_fail_closed_until_it_is_fetched_then_the_next_is_served_masked() {
    let Some(model) = cached_model("privacy_ner_wait::fail_closed") else {
        return;
    };
    let models = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = org(&llm, "    nerWait: 60s\n");
    let opc = start(&org, models.path());

    let failed = ask(&opc, MESSAGE, |t| t.contains("This request failed")).await;
    assert!(failed.contains("This request failed"), "{failed}");
    assert!(failed.contains("NER model"), "why: {failed}");
    assert!(
        failed.contains("`opc models fetch`"),
        "how to fix it: {failed}"
    );
    assert!(
        failed.contains("requireNer: false"),
        "the other way: {failed}"
    );
    assert!(llm.requests().is_empty(), "nothing reached the LLM");
    assert_eq!(health(&opc).await, "failed");
    let console = console_privacy(&opc).await;
    assert_eq!(console["ner"]["state"], "failed", "{console}");
    assert!(
        console["ner"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("not fetched")),
        "{console}"
    );

    // `opc models fetch` beside the running gateway: the files appear, and the next message loads
    // them (no restart) before its request is masked.
    put_model(&model, models.path());
    // It puts the place gazetteer (part of the NER tier) beside the model.
    let cache = model.parent().unwrap();
    for spec in [&opc_models::GEONAMES, &opc_models::SUBDIVISIONS] {
        let dir = spec
            .locate(cache)
            .unwrap_or_else(|e| panic!("the place gazetteer is not cached beside the model: {e}"));
        put_model(&dir, models.path());
    }
    let expected = format!("Noted: {MESSAGE}");
    ask(&opc, MESSAGE, |t| t == expected).await;
    assert_eq!(llm.requests().len(), 1);
    assert_name_never_sent(&llm);
    assert_eq!(health(&opc).await, "ready");
    assert_eq!(opc.stop().0, Some(0));
}

/// What `requireNer: false` is warned with (message and hint).
const WARNING: &str = "`requireNer: false`: `PERSON_NAME` and `ADDRESS`";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_ner_false_is_warned_about_at_validate_and_start_and_serves_pattern_only() {
    let models = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = org(
        &llm,
        "    detectTypes: [PERSON_NAME, EMAIL, ADDRESS]\n    requireNer: false\n",
    );
    let out = Command::new(opc_binary())
        .args(["validate", "--config"])
        .arg(org.config_path())
        .env("NO_COLOR", "1")
        .output_within(WAIT_LONG)
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning, not an error: {stderr}"
    );
    assert_eq!(stderr.matches(WARNING).count(), 1, "once: {stderr}");
    assert!(
        stderr.contains("framework.privacy.requireNer") && stderr.contains("unmasked"),
        "{stderr}"
    );
    assert!(stderr.contains("opc models fetch"), "{stderr}");

    let opc = start(&org, models.path());
    // Printed before the ready line: it is all there once the process is ready.
    opc_tests::wait::wait_until(WAIT_LONG, "the warning on stderr", || {
        opc.stderr().contains(WARNING)
    })
    .await;
    assert_eq!(opc.stderr().matches(WARNING).count(), 1, "{}", opc.stderr());

    let email = "johanna.whitfield@example.com";
    let text = format!("Please email {NAME} at {email} about the renewal.");
    let expected = format!("Noted: {text}");
    ask(&opc, &text, |t| t == expected).await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].body.to_string();
    assert!(!body.contains(email), "patterns mask the e-mail: {body}");
    // Pattern-only, as configured: the name went as written. This is what the warning is about.
    assert!(body.contains(NAME), "{body}");
    // The load at start failed (an empty models dir) or is failing: pattern-only from then on.
    let deadline = tokio::time::Instant::now() + WAIT_LONG;
    while health(&opc).await != "pattern_only" {
        assert!(tokio::time::Instant::now() < deadline, "never pattern_only");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let console = console_privacy(&opc).await;
    assert_eq!(console["ner"]["state"], "pattern_only", "{console}");
    assert_eq!(opc.stop().0, Some(0));
}
