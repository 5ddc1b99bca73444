//! Approval options a model words itself, end to end through the web chat: the real `opc` binary, the
//! scripted LLM and the chat's JSON API and SSE stream over loopback. The model offers
//! `["Yes, ship it", "No"]`; the human picks the first; the task continues as approved, and the card,
//! `/status` and the console show the label chosen with its outcome.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, marker, relay};
use opc_tests::post_json as post;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::wait_until;
use opc_tests::web_chat::{open, say};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);
const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worded_go_ahead_picked_by_a_human_approves_and_shows_its_label() {
    // The org's support agent is the one with `request_approval`: the CEO relays to it via the VP.
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-ops", "ship v2", "CEO: "))
        .agent(marker("vp-ops"), relay("support", "ship v2", "VP: "))
        .agent(
            marker("support"),
            vec![
                Step::tool(
                    "request_approval",
                    json!({"summary": "Ship v2 to everyone", "options": ["Yes, ship it", "No"]}),
                ),
                Step::text("SUPPORT: {{last_result}}"),
            ],
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (conversation, mut sse) = open(&opc).await;
    say(&opc, &conversation, "Ship v2?").await;

    let card = sse.wait_for("card", WAIT, |_| true).await;
    let approval = card["card"]["approval"].as_i64().expect("approval id");
    assert_eq!(card["card"]["options"], json!(["Yes, ship it", "No"]));

    // Hold the model's next turn, so the task is still running when its status is asked for.
    llm.hold();
    let (status, body) = post(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": 0 }),
    )
    .await;
    assert_eq!(status, 202, "{body}");

    // The card shows the label chosen, as an approval.
    let updated = sse.wait_for("card_update", WAIT, |_| true).await;
    let decided = &updated["card"]["state"]["Decided"];
    assert_eq!(decided["option"], "Yes, ship it", "{updated}");
    assert_eq!(decided["approved"], true, "{updated}");

    // The task continued: its next model call is in flight (held) …
    wait_until(WAIT, "support's turn after the approval", || {
        llm.requests_for(&marker("support")).len() == 2
    })
    .await;
    // … and `/status` shows it running, with what was chosen.
    say(&opc, &conversation, "/status").await;
    let status = sse
        .wait_for("notice", WAIT, |n| {
            n["text"]
                .as_str()
                .is_some_and(|t| t.contains("active task"))
        })
        .await;
    let text = status["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "approval #{approval}: Approved: Yes, ship it — by "
        )),
        "{text}"
    );

    // The console's approvals: the chosen label, approved, each option with its outcome.
    let list: Value = opc_tests::http_client()
        .get(opc.url("/admin/api/approvals"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let record = list["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == approval)
        .unwrap_or_else(|| panic!("approval {approval} in {list}"))
        .clone();
    assert_eq!(
        (&record["state"], &record["decision"]),
        (&json!("approved"), &json!("Yes, ship it")),
        "{record}"
    );
    assert_eq!(
        record["options"],
        json!([
            {"label": "Yes, ship it", "outcome": "approve"},
            {"label": "No", "outcome": "reject"}
        ])
    );

    // The model is told it was approved, and which option was chosen.
    llm.release();
    // (The streamed answer is edited in place: wait for its final text.)
    sse.wait_for("message|edit", WAIT, |m| {
        m["text"].as_str().is_some_and(|t| {
            t.starts_with("CEO: VP: SUPPORT: approved by ")
                && t.ends_with("(chose \"Yes, ship it\")")
        })
    })
    .await;
    assert_eq!(opc.stop().0, Some(0));
}
