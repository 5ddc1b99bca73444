//! Issue 33, end to end: a worker with the privacy gateway on, as the example config sets it, works
//! on code. The real `opc` binary (`opc run` with its web chat over 127.0.0.1), the scripted LLM, the
//! real sandbox and the real NER model.
//!
//! The org is ceo → lead → worker. Its `framework.privacy` and `framework.sandbox` are read from the
//! repository's example `opc.config.yaml` at test time (so the test follows the example when it
//! changes): every detect type, the whitelist, `confidenceThreshold: 0.85`, `mode: mask`,
//! `nerWait: 30s`, `requireNer` left at its default (on); the sandbox enforced, no network.
//!
//! The worker's workspace holds a small Rust project (Cargo.toml, Cargo.lock, src/main.rs,
//! src/lib.rs, README.md, docs/guide.md, CHANGELOG.md) and a `secret.txt` of mode 000. The worker
//! runs `Glob **/*.md`, then two failing `cat`s in one turn (`cat secret.txt`: Permission denied,
//! for the sandbox drops Bash from root to uid 61000; `cat missing.txt`: No such file or directory),
//! then `ls -l`, and answers; the lead and the CEO relay it to the web chat.
//!
//! What it proves:
//! - the request completes, and the worker's answer is relayed to the web chat (no "This request
//!   failed", no privacy error: the vault does not run out of substitutes and the egress guard does
//!   not refuse a call);
//! - code reaches the model as code: in the requests the scripted LLM received, the Glob result
//!   lists `README.md` and `docs/guide.md` with their extension, the `tool_use` input `**/*.md` is
//!   intact, the `cat` error lines are verbatim, and the `ls -l` listing names `Cargo.toml` and `src`
//!   (the NER model must not read `md`, `cat` or `ls` as people);
//! - masking still works around the code: the person's name and e-mail in the user's message never
//!   reach the LLM as written;
//! - exactly the scripted number of LLM calls is made (no re-delegation or retry loop).
//!
//! Needs the NER model (`requireNer` holds calls until it loads): the test finds it in the cache
//! (`OPC_MODELS`, else the user's cache dir, where `opc models fetch` puts it) and, when it is absent,
//! skips with one line on a developer machine and fails under CI (`CI` set).
//!
//! The org dir is private (0700, as `mktemp -d` makes it) although the tests run as root and the
//! sandbox drops commands to uid 61000: the launcher builds the command's private root as root, so
//! the command never traverses the host path (issue 34).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use opc_tests::example;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{KEY, KEY_VAR, manager_chain_yaml, marker, relay};
use opc_tests::sandbox::private_dir;
use opc_tests::scripted_llm::{
    INPUT_PLACEHOLDER, RecordedRequest, Script, ScriptedLlm, Step, bash_call, step_results,
};
use opc_tests::wait::{WAIT_LONG, within};
use opc_tests::web_chat;
use serde_json::{Value, json};

/// The user's request: prose with a person's name and e-mail, which must never reach the LLM.
const REQUEST: &str = "Please check the docs of the Rust project in the workspace, then ask Priya Raman <priya.raman@example.com> to review them.";
/// Parts of the personal data in [`REQUEST`], none of which may reach the LLM as written.
const PERSONAL: [&str; 4] = ["Priya", "Raman", "priya.raman", "priya.raman@example.com"];
/// The worker's answer, as relayed by the lead and the CEO.
const ANSWER: &str =
    "CEO: LEAD: WORKER: the docs are README.md and docs/guide.md; the review is asked for.";
/// The deadline of the whole flow through the org.
const FLOW: Duration = Duration::from_secs(240);

/// The example config's `framework.privacy` and `framework.sandbox`, checked for what this test is
/// about: if the example changes these, the test must be looked at again.
fn example_settings() -> (Value, Value) {
    let (privacy, sandbox) = example::settings();
    assert_eq!(privacy["enabled"], true, "{privacy}");
    assert_eq!(privacy["mode"], "mask", "{privacy}");
    assert!(
        privacy.get("requireNer").is_none_or(|v| v == true),
        "{privacy}"
    );
    (privacy, sandbox)
}

/// The org on disk: config, database and workspaces in one dir.
struct Org {
    dir: tempfile::TempDir,
}

impl Org {
    /// ceo → lead → worker at `llm`, with the example config's privacy and sandbox settings.
    fn write(llm: &ScriptedLlm) -> Org {
        let (privacy, sandbox) = example_settings();
        let org = Org { dir: private_dir() };
        let head = example::framework_yaml("Worker Privacy Org", &llm.url(), &privacy, &sandbox);
        let managers = manager_chain_yaml(&[("ceo", "CEO"), ("lead", "Backend Lead")], "worker");
        let yaml = format!(
            r#"{head}{managers}  worker:
    role: Backend Developer
    level: 2
    parent: lead
    tools: [Read, Grep, Glob, Bash, escalate]
    memory: {{ recall: false }}
    bash: {{ allow: ["ls", "cat"] }}
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#
        );
        std::fs::write(org.config(), yaml).unwrap();
        org
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("opc.config.yaml")
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join(".opc/workspaces/worker")
    }

    /// The worker's workspace made beforehand (as an admin would: owned by root, readable by the
    /// sandbox's uid), holding a small Rust project and a file only root may read.
    fn plant_project(&self) {
        let workspace = self.workspace();
        std::fs::create_dir_all(workspace.join("src")).unwrap();
        std::fs::create_dir_all(workspace.join("docs")).unwrap();
        for dir in [
            self.dir.path().join(".opc"),
            self.dir.path().join(".opc/workspaces"),
            workspace.clone(),
            workspace.join("src"),
            workspace.join("docs"),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let files = [
            (
                "Cargo.toml",
                "[package]\nname = \"tally\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
            ),
            (
                "Cargo.lock",
                "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"tally\"\nversion = \"0.1.0\"\n",
            ),
            (
                "src/main.rs",
                "fn main() {\n    println!(\"{}\", tally::sum(&[1, 2, 3]));\n}\n",
            ),
            (
                "src/lib.rs",
                "//! Sums numbers.\n\n/// The sum of `values`.\npub fn sum(values: &[i64]) -> i64 {\n    values.iter().sum()\n}\n",
            ),
            (
                "README.md",
                "# tally\n\nA tiny crate that sums numbers. See [the guide](docs/guide.md).\n",
            ),
            (
                "docs/guide.md",
                "# Guide\n\nRun `cargo run` to print the sum of 1, 2 and 3.\n",
            ),
            (
                "CHANGELOG.md",
                "# Changelog\n\n## 0.1.0\n\n- First release.\n",
            ),
        ];
        for (path, content) in files {
            let path = workspace.join(path);
            std::fs::write(&path, content).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        // Mode 000: the tools hand the workspace tree to the sandbox's uid, so an owner-only mode would
        // not keep it out; no mode bit does.
        let secret = workspace.join("secret.txt");
        std::fs::write(&secret, "not for the sandbox\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
}

/// The worker's steps: Glob, two failing `cat`s, `ls -l`, the answer. One LLM call each.
fn worker_steps() -> Vec<Step> {
    vec![
        Step::tool("Glob", json!({"pattern": "**/*.md"})),
        Step::tools([bash_call("cat secret.txt"), bash_call("cat missing.txt")]),
        Step::tools([bash_call("ls -l")]),
        Step::text("WORKER: the docs are README.md and docs/guide.md; the review is asked for."),
    ]
}

/// ceo → lead → worker: each manager passes its task on and relays its report's answer.
fn script() -> Script {
    Script::new()
        .agent(marker("worker"), worker_steps())
        .agent(marker("lead"), relay("worker", INPUT_PLACEHOLDER, "LEAD: "))
        .agent(marker("ceo"), relay("lead", INPUT_PLACEHOLDER, "CEO: "))
}

/// The inputs of the `tool_use` blocks named `tool` in the assistant turns of a request.
fn tool_inputs(request: &RecordedRequest, tool: &str) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use" && b["name"] == tool)
        .map(|b| b["input"].clone())
        .collect()
}

#[track_caller]
fn contains_all(what: &str, result: &(String, bool), needles: &[&str]) {
    for needle in needles {
        assert!(
            result.0.contains(needle),
            "{what}: {needle:?} not in what the LLM received:\n{}",
            result.0
        );
    }
}

/// `/healthz` asked for JSON: the privacy gateway's NER state (empty while it names none).
async fn ner_state(opc: &OpcRun) -> String {
    opc.health().await["privacy"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_the_example_privacy_settings_globs_cats_and_lists_code_and_its_answer_is_relayed()
 {
    let Some(models) = example::models_root("worker_privacy") else {
        return;
    };
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = Org::write(&llm);
    org.plant_project();
    let opc = OpcRun::start(
        &org.config(),
        &[(KEY_VAR, KEY), ("OPC_MODELS", models.to_str().unwrap())],
    );

    // The model loads after the ready line; the example's `nerWait` is what a call waits for it, and
    // this test is not about that wait, so it starts once the model is in.
    within(WAIT_LONG, "the NER model to load (/healthz)", async {
        loop {
            match ner_state(&opc).await.as_str() {
                "ready" => break,
                "failed" => panic!("the NER model failed to load; stderr:\n{}", opc.stderr()),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await;

    // The final message in the thread: the answer, or what went wrong (streamed edits before it end
    // with a typing marker).
    let (_conversation, mut sse) = web_chat::start(&opc, REQUEST).await;
    let last = sse
        .wait_for("message|edit", FLOW, |data| {
            data["text"].as_str().is_some_and(|t| {
                !t.ends_with('…')
                    && (t.starts_with("CEO: ") || t.starts_with("**This request failed.**"))
            })
        })
        .await;
    let text = last["text"].as_str().unwrap();
    let requests = llm.requests();
    let worker = llm.requests_for(&marker("worker"));
    let report = || {
        format!(
            "{} LLM calls (worker: {}); opc stderr:\n{}",
            requests.len(),
            worker.len(),
            opc.stderr()
        )
    };
    assert_eq!(
        text,
        ANSWER,
        "the worker's answer, relayed to the web chat; {}",
        report()
    );

    // Code arrives as code.
    assert_eq!(worker.len(), 4, "one worker call per step; {}", report());
    let glob = &step_results(&worker, 0)[0];
    assert!(!glob.1, "Glob failed: {}", glob.0);
    contains_all(
        "the Glob result",
        glob,
        &["README.md", "docs/guide.md", "CHANGELOG.md"],
    );
    for request in &worker[1..] {
        assert_eq!(
            tool_inputs(request, "Glob"),
            [json!({"pattern": "**/*.md"})],
            "the Glob call as the LLM saw it again"
        );
    }
    let cats = step_results(&worker, 1);
    assert_eq!(cats.len(), 2, "{cats:?}");
    assert!(cats[0].1 && cats[1].1, "both cats fail: {cats:?}");
    contains_all(
        "`cat secret.txt`",
        &cats[0],
        &[
            "cat: ",
            "Permission denied",
            "cat: secret.txt: Permission denied",
        ],
    );
    contains_all(
        "`cat missing.txt`",
        &cats[1],
        &[
            "cat: ",
            "No such file or directory",
            "cat: missing.txt: No such file or directory",
        ],
    );
    let commands: Vec<Value> = tool_inputs(&worker[3], "Bash")
        .iter()
        .map(|input| input["command"].clone())
        .collect();
    assert_eq!(
        commands,
        [
            json!("cat secret.txt"),
            json!("cat missing.txt"),
            json!("ls -l")
        ],
        "the Bash calls as the LLM saw them again"
    );
    let ls = &step_results(&worker, 2)[0];
    assert!(!ls.1, "ls -l failed: {}", ls.0);
    contains_all(
        "`ls -l`",
        ls,
        &[
            "Cargo.toml",
            "Cargo.lock",
            "src",
            "docs",
            "README.md",
            "exit code 0",
        ],
    );

    // Masking still works around the code: the person never reaches the LLM as written.
    for request in &requests {
        let body = request.body.to_string();
        for real in PERSONAL {
            assert!(
                !body.contains(real),
                "{real:?} reached the LLM (agent {:?}): {body}",
                request.agent_marker
            );
        }
    }

    // Exactly the scripted calls: ceo 2, lead 2, worker 4.
    assert_eq!(llm.requests_for(&marker("ceo")).len(), 2, "{}", report());
    assert_eq!(llm.requests_for(&marker("lead")).len(), 2, "{}", report());
    assert_eq!(requests.len(), 8, "no other LLM call; {}", report());
    assert_eq!(opc.stop().0, Some(0));
}
