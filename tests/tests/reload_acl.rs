//! Memory permissions follow a hot reload, end to end on the real `opc run` (web chat, the scripted
//! LLM, the config rewritten on disk as an editor does and picked up by the watcher).
//!
//! The org: `vp-ops` shares its memory with its sibling `vp-eng` (`shareWith`). The reload takes the
//! share away and adds `qa` under `vp-eng`, with a core block of its own. One conversation before the
//! reload and one after run the same script: `vp-eng` reads `vp-ops`' block, delegates to `qa`, and
//! reads `qa`'s block. Before: the first read works, `qa` does not exist. After: the first read is a
//! tool error (the share was revoked), `qa` writes to its own block, and its manager reads the result.
//! The assertions are on what the model was shown (the recorded requests), not on timing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::opc_process::OpcRun;
use opc_tests::org::{KEY, KEY_VAR, framework_yaml, marker};
use opc_tests::reload::{generation, replace_file};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, within};
use serde_json::json;

/// The org before (`after == false`) or after the reload.
fn config(llm_url: &str, after: bool) -> String {
    let frame = framework_yaml(llm_url, false);
    let (share, eng_children, qa) = if after {
        (
            "",
            "[dev, qa]",
            r#"  qa:
    role: QA Lead
    level: 2
    parent: vp-eng
    tools: [memory_read, memory_insert]
    memory:
      recall: false
      blocks:
        - { label: checklist, description: what QA checks, value: "QA-CHECKLIST" }
"#,
        )
    } else {
        ("      shareWith: [vp-eng]\n", "[dev]", "")
    };
    format!(
        r#"{frame}channels:
  web: {{ listen: "127.0.0.1:0" }}
agents:
  ceo:
    role: CEO
    level: 0
    tools: [delegate]
    children: [vp-eng, vp-ops]
    memory: {{ recall: false }}
  vp-eng:
    role: VP Engineering
    level: 1
    parent: ceo
    tools: [delegate, memory_read]
    children: {eng_children}
    memory: {{ recall: false }}
  vp-ops:
    role: VP Operations
    level: 1
    parent: ceo
    memory:
      recall: false
{share}      blocks:
        - {{ label: runbook, description: the ops runbook, value: "OPS-RUNBOOK-SECRET" }}
  dev:
    role: Developer
    level: 2
    parent: vp-eng
    memory: {{ recall: false }}
{qa}"#
    )
}

/// Send `text` in a new web conversation and wait for the CEO's final answer.
async fn ask(opc: &OpcRun, text: &str) {
    let (_, mut sse) = opc_tests::web_chat::start(opc, text).await;
    sse.wait_for("message|edit", WAIT, |e| {
        e["text"].as_str().is_some_and(|t| t.starts_with("CEO: "))
    })
    .await;
}

/// The last request `vp-eng` made in the session of `text`: it carries the results of its three
/// tool calls.
fn vp_eng_results(llm: &ScriptedLlm, text: &str) -> Vec<(String, bool)> {
    let last = llm
        .requests_for(&marker("vp-eng"))
        .into_iter()
        .rfind(|r| r.session == text)
        .unwrap_or_else(|| panic!("vp-eng was never asked {text:?}"));
    let results = last.all_tool_results();
    assert_eq!(results.len(), 3, "{results:#?}");
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_revokes_a_share_and_gives_an_added_agent_its_blocks() {
    let script = Script::new()
        .agent(
            marker("ceo"),
            vec![
                Step::tool("delegate", json!({"agent": "vp-eng", "task": "{{input}}"})),
                Step::text("CEO: {{last_result}}"),
            ],
        )
        .agent(
            marker("vp-eng"),
            vec![
                Step::tool(
                    "memory_read",
                    json!({"agent": "vp-ops", "label": "runbook"}),
                ),
                Step::tool(
                    "delegate",
                    json!({"agent": "qa", "task": "note the release check"}),
                ),
                Step::tool("memory_read", json!({"agent": "qa", "label": "checklist"})),
                Step::text("ENG-DONE"),
            ],
        )
        .agent(
            marker("qa"),
            vec![
                Step::tool(
                    "memory_insert",
                    json!({"label": "checklist", "text": "QA-RELEASE-CHECK"}),
                ),
                Step::text("QA-DONE"),
            ],
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("opc.config.yaml");
    std::fs::write(&file, config(&llm.url(), false)).unwrap();
    let opc = OpcRun::start(&file, &[(KEY_VAR, KEY)]);
    assert_eq!(generation(&opc).await, 1);

    // Before the reload: the share holds, and there is no `qa`.
    let before = "audit the release (before the reload)";
    ask(&opc, before).await;
    let results = vp_eng_results(&llm, before);
    assert!(
        !results[0].1 && results[0].0.contains("OPS-RUNBOOK-SECRET"),
        "{results:#?}"
    );
    assert!(results[1].1, "no qa to delegate to yet: {results:#?}");
    assert!(results[2].1, "no qa to read yet: {results:#?}");
    assert!(llm.requests_for(&marker("qa")).is_empty());

    // The reload: the share removed, `qa` added. Awaited through the org's generation.
    replace_file(&file, &config(&llm.url(), true));
    within(WAIT, "the reload to go live", async {
        while generation(&opc).await < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    // After: the same script, in a new conversation.
    let after = "audit the release (after the reload)";
    ask(&opc, after).await;
    let results = vp_eng_results(&llm, after);
    // (a) The revoked share: a tool error that says why, and none of the block's text.
    let (read, is_error) = &results[0];
    assert!(*is_error, "the revoked read must be a tool error: {read}");
    assert!(
        read.contains("does not share its memory with you"),
        "{read}"
    );
    assert!(!read.contains("OPS-RUNBOOK-SECRET"), "{read}");
    // (b) The added agent: its block is in its prompt, it edits it, and its manager reads the edit.
    let qa = llm.requests_for(&marker("qa"));
    assert!(
        qa[0].system.contains("QA-CHECKLIST"),
        "qa's own block is in its prompt: {}",
        qa[0].system
    );
    let qa_results = qa.last().unwrap().all_tool_results();
    assert_eq!(qa_results.len(), 1, "{qa_results:#?}");
    assert!(!qa_results[0].1, "qa edits its own block: {qa_results:#?}");
    assert!(!results[1].1, "delegating to qa: {results:#?}");
    let (read, is_error) = &results[2];
    assert!(!is_error, "the manager reads qa's block: {read}");
    assert!(
        read.contains("QA-CHECKLIST") && read.contains("QA-RELEASE-CHECK"),
        "{read}"
    );

    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
