//! What a conversation is told when `opc run` stops under it, end to end on the real binary through the
//! web chat (its transcript is replayed after a restart, so everything posted before the stop is seen
//! too).
//!
//! - A request waiting for an approval is not a failure: nothing is posted at the stop; after the
//!   restart one message says it still waits for the approval, and the approval then completes it.
//!   SIGTERM and kill -9 leave the same conversation.
//! - A request stopped mid-work gets exactly one message, after the restart ("… was interrupted …"),
//!   and the same one after SIGTERM as after kill -9.
//!
//! No wall-clock assertions: the "nothing else was posted" checks read the transcript up to an answer
//! that is caused by a later step (a decision, a follow-up), so everything before it is in.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, approval_chain, marker, relay};
use opc_tests::post_json as post;
use opc_tests::scripted_llm::{Fault, Script, ScriptedLlm, Step};
use opc_tests::sse::{Sse, SseEvent};
use opc_tests::wait::WAIT;
use opc_tests::web_chat::{open as new_conversation, pending_approval, say, start};
use serde_json::json;

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// How `opc run` goes down.
#[derive(Clone, Copy, Debug)]
enum Down {
    /// SIGTERM: a clean shutdown.
    Term,
    /// SIGKILL: a crash, nothing runs on the way out.
    Kill,
}

fn take_down(opc: OpcRun, down: Down) {
    match down {
        Down::Term => assert_eq!(opc.stop().0, Some(0), "exit after SIGTERM"),
        // Dropping the process handle kills it with SIGKILL.
        Down::Kill => drop(opc),
    }
}

/// The bot's messages in the conversation, in order, each with its final text (streamed answers
/// arrive as a message and its edits).
fn bot_messages(seen: &[SseEvent]) -> Vec<String> {
    let mut messages: Vec<(String, String)> = Vec::new();
    for event in seen {
        let id = event.data["id"].as_str().unwrap_or_default().to_string();
        let text = event.data["text"].as_str().unwrap_or_default().to_string();
        match event.name.as_str() {
            "message" if event.data["author"] == "bot" => messages.push((id, text)),
            "edit" => {
                if let Some(m) = messages.iter_mut().find(|(i, _)| *i == id) {
                    m.1 = text;
                }
            }
            _ => {}
        }
    }
    messages.into_iter().map(|(_, text)| text).collect()
}

/// Connect to `conversation`'s events after a restart (the transcript is replayed first).
async fn reconnect(opc: &OpcRun, conversation: &str) -> Sse {
    let events = opc.url(&format!("/api/conversations/{conversation}/events"));
    let mut sse = Sse::connect(&events, None).await;
    sse.wait_for("reset", WAIT, |_| true).await;
    sse
}

/// A request suspended on an approval, `opc run` taken down and started again: the bot's messages in
/// the conversation once the approval has completed the request.
async fn suspended_request_across_a_restart(down: Down) -> (i64, Vec<String>) {
    let script = approval_chain();
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (conversation, mut sse) = start(&opc, "Refund order 7").await;
    let (approval, approve) = pending_approval(&mut sse).await;
    drop(sse);
    take_down(opc, down);

    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let mut sse = reconnect(&opc, &conversation).await;
    let waiting = format!("OPC restarted; this request is still waiting for approval #{approval}.");
    sse.wait_for("message", WAIT, |m| m["text"] == waiting.as_str())
        .await;
    let (status, body) = post(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": approve }),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    sse.wait_for("message|edit", WAIT, |m| {
        m["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("CEO: VP: SUPPORT:") && t.contains("approve"))
    })
    .await;
    assert_eq!(opc.stop().0, Some(0));
    (approval, bot_messages(&sse.seen))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waiting_for_approval_is_not_failed_by_a_restart() {
    for down in [Down::Term, Down::Kill] {
        let (approval, messages) = suspended_request_across_a_restart(down).await;
        // Nothing at the stop (no "failed"), one notice at the restart, then the answer.
        assert_eq!(messages.len(), 2, "{down:?}: {messages:#?}");
        assert_eq!(
            messages[0],
            format!("OPC restarted; this request is still waiting for approval #{approval}."),
            "{down:?}"
        );
        assert!(
            messages[1].starts_with("CEO: VP: SUPPORT:"),
            "{down:?}: {messages:#?}"
        );
        assert!(
            !messages.iter().any(|m| m.contains("failed")),
            "{down:?}: {messages:#?}"
        );
    }
}

/// A request whose delegate's model call never answers, `opc run` taken down mid-request and started
/// again: the bot's messages in the conversation up to the answer of a follow-up sent after the
/// restart's notice.
async fn interrupted_request_across_a_restart(down: Down) -> Vec<String> {
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-eng", "plan the page", "CEO: "))
        .agent(marker("vp-eng"), vec![Step::fault(Fault::Hang)]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (conversation, sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "Plan a status page").await;
    opc_tests::wait::within(WAIT, "the CEO to delegate", async {
        while llm.requests_for(&marker("vp-eng")).is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    drop(sse);
    take_down(opc, down);

    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let mut sse = reconnect(&opc, &conversation).await;
    sse.wait_for("message", WAIT, |m| {
        m["text"]
            .as_str()
            .is_some_and(|t| t.contains("was interrupted"))
    })
    .await;
    // A follow-up: its answer comes after everything the restart posted.
    say(&opc, &conversation, "Try again").await;
    sse.wait_for("message|edit", WAIT, |m| {
        m["text"].as_str().is_some_and(|t| t.starts_with("CEO: "))
    })
    .await;
    assert_eq!(opc.stop().0, Some(0));
    bot_messages(&sse.seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_stopped_mid_work_gets_one_message_the_same_after_sigterm_and_kill_9() {
    let after_term = interrupted_request_across_a_restart(Down::Term).await;
    let after_kill = interrupted_request_across_a_restart(Down::Kill).await;
    for (down, messages) in [("SIGTERM", &after_term), ("kill -9", &after_kill)] {
        assert_eq!(
            messages.len(),
            2,
            "{down}: one message for the stop, then the follow-up's answer: {messages:#?}"
        );
        assert!(
            messages[0].contains("was interrupted"),
            "{down}: {messages:#?}"
        );
        assert!(messages[1].starts_with("CEO: "), "{down}: {messages:#?}");
        assert!(!messages[0].contains("failed"), "{down}: {messages:#?}");
    }
    assert_eq!(
        after_term[0], after_kill[0],
        "the same message after SIGTERM as after kill -9"
    );
}
