//! `opc run` end to end through the built-in web chat: the real binary, the scripted LLM server, the JSON
//! API and the SSE stream over loopback — delegation streamed into the conversation with the exact
//! final text, approvals decided from the chat, slash commands, a missing LLM key answered with a
//! notice (and no LLM call), a missing platform token refused at start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, marker, relay};
use opc_tests::post_json as post;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::sse::Sse;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);
const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

use opc_tests::web_chat::{open as new_conversation, say};

/// The text of a `message` or `edit` event equal to `text`.
fn shows(text: &str) -> impl Fn(&Value) -> bool + '_ {
    move |data| data["text"].as_str() == Some(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_message_is_delegated_and_streamed_back_with_the_exact_final_text() {
    let mut ceo = relay("vp-eng", "plan the page", "CEO: ");
    ceo.push(Step::text("Budget: 10k"));
    let script = Script::new().agent(marker("ceo"), ceo).agent(
        marker("vp-eng"),
        vec![Step::text("a status page in two sprints")],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);

    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "Plan a public status page").await;

    // The delegation is traced live …
    sse.wait_for("progress", WAIT, |e| {
        e["event"] == "delegated" && e["from"] == "ceo" && e["to"] == "vp-eng"
    })
    .await;
    // … and the answer ends exactly as the CEO wrote it.
    let expected = "CEO: a status page in two sprints";
    sse.wait_for("message|edit", WAIT, shows(expected)).await;
    let ceo = llm.requests_for(&marker("ceo"));
    assert!(
        ceo[0]
            .user_texts()
            .iter()
            .any(|t| t.contains("Plan a public status page"))
    );

    // A follow-up in the same conversation continues the CEO's session.
    say(&opc, &conversation, "And the budget?").await;
    sse.wait_for("message|edit", WAIT, shows("Budget: 10k"))
        .await;
    let ceo = llm.requests_for(&marker("ceo"));
    let last = ceo.last().unwrap().user_texts();
    assert!(
        last.iter().any(|t| t.contains("Plan a public status page")),
        "the follow-up carries the earlier turn: {last:?}"
    );

    let (code, rest) = opc.stop();
    assert_eq!(code, Some(0));
    assert!(rest.contains("opc: stopped"), "{rest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_decided_from_the_web_chat_and_the_task_resumes() {
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-ops", "refund", "CEO: "))
        .agent(marker("vp-ops"), relay("support", "refund order 7", "VP: "))
        .agent(
            marker("support"),
            vec![
                Step::tool(
                    "request_approval",
                    json!({"summary": "Refund $120 for order 7"}),
                ),
                Step::text("SUPPORT: {{last_result}}"),
            ],
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "Refund order 7").await;

    let card = sse.wait_for("card", WAIT, |_| true).await;
    let text = card.to_string();
    assert!(text.contains("Refund $120 for order 7"), "{text}");
    assert!(text.contains("support"), "{text}");
    let approval = card["card"]["approval"]
        .as_i64()
        .expect("approval id in the card");
    let options = card["card"]["options"].as_array().unwrap().clone();
    let approve = options.iter().position(|o| o == "approve").unwrap();

    let (status, body) = post(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": approve }),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let updated = sse.wait_for("card_update", WAIT, |_| true).await;
    assert!(updated.to_string().contains("operator"), "{updated}");
    sse.wait_for("message|edit", WAIT, |data| {
        data["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("CEO: VP: SUPPORT:") && t.contains("approve"))
    })
    .await;

    // A second click is refused: decided once.
    let (status, _) = post(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": approve }),
    )
    .await;
    assert_eq!(status, 202);
    sse.wait_for("notice", WAIT, |n| {
        n["text"]
            .as_str()
            .is_some_and(|t| t.contains("already decided"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_answer_in_the_web_chat() {
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "/agents").await;
    sse.wait_for("notice", WAIT, |n| {
        n["text"]
            .as_str()
            .is_some_and(|t| t.contains("vp-eng") && t.contains("Backend Developer"))
    })
    .await;
    say(&opc, &conversation, "/status").await;
    sse.wait_for("notice", WAIT, |n| {
        n["text"]
            .as_str()
            .is_some_and(|t| t.contains("Nothing is running"))
    })
    .await;
    say(&opc, &conversation, "/frobnicate").await;
    sse.wait_for("notice", WAIT, |n| {
        n["text"]
            .as_str()
            .is_some_and(|t| t.contains("/frobnicate") && t.contains("/status"))
    })
    .await;
    assert!(llm.requests().is_empty(), "commands make no LLM call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_llm_key_opc_run_starts_and_answers_with_a_notice() {
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[]);
    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "Hello?").await;
    sse.wait_for("message", WAIT, |m| {
        m["text"].as_str().is_some_and(|t| t.contains(KEY_VAR))
    })
    .await;
    assert!(llm.requests().is_empty(), "no LLM call without a key");
    assert_eq!(
        opc.stderr().matches(KEY_VAR).count(),
        1,
        "warned once at start-up: {}",
        opc.stderr()
    );
}

#[test]
fn a_missing_platform_token_stops_start_up_naming_the_variable() {
    let org = TestOrg::with_sections(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Execution::default(),
        "channels:\n  web: { listen: \"127.0.0.1:0\" }\n  slack:\n    mode: socket\n    botTokenEnv: OPC_TEST_UNSET_SLACK_BOT\n    appTokenEnv: OPC_TEST_UNSET_SLACK_APP\n",
    );
    let Err((code, stderr)) = OpcRun::try_start(&org.config_path(), &[(KEY_VAR, KEY)]) else {
        panic!("opc run started without its Slack token");
    };
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("OPC_TEST_UNSET_SLACK_BOT"), "{stderr}");
    assert!(stderr.contains("channels.slack.botTokenEnv"), "{stderr}");
}

/// SIGTERM the moment the ready line appears: the signal handlers are in place before "ready" is
/// printed, so it is a clean stop (exit 0, "stopped"), not death by the signal's default action.
#[test]
fn sigterm_right_after_the_ready_line_stops_cleanly() {
    let org = TestOrg::with_sections(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Execution::default(),
        WEB,
    );
    for _ in 0..3 {
        let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
        let stderr = opc.stderr();
        let (code, stdout) = opc.stop();
        assert_eq!(code, Some(0), "exit after SIGTERM; stderr:\n{stderr}");
        assert!(stdout.contains("opc: stopped"), "{stdout:?}");
    }
}

/// How `opc run` goes down between the two halves of a restart test.
#[derive(Clone, Copy, Debug)]
enum Down {
    /// SIGTERM: a clean shutdown.
    Term,
    /// SIGKILL: a crash, nothing flushed on the way out.
    Kill,
}

/// A web conversation with an approval pending, `opc run` restarted: the conversation's history is
/// replayed (question, card), the approval is decided after the restart (the card redrawn, the task
/// resumed and answered in the conversation), and a follow-up continues the conversation.
async fn a_web_conversation_and_its_pending_approval_survive_a_restart(down: Down) {
    let mut ceo = relay("vp-ops", "refund", "CEO: ");
    ceo.push(Step::text("Budget: 10k"));
    let script = Script::new()
        .agent(marker("ceo"), ceo)
        .agent(marker("vp-ops"), relay("support", "refund order 7", "VP: "))
        .agent(
            marker("support"),
            vec![
                Step::tool(
                    "request_approval",
                    json!({"summary": "Refund $120 for order 7"}),
                ),
                Step::text("SUPPORT: {{last_result}}"),
            ],
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "Refund order 7").await;
    let card = sse.wait_for("card", WAIT, |_| true).await;
    let approval = card["card"]["approval"].as_i64().expect("approval id");
    let approve = card["card"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .position(|o| o == "approve")
        .unwrap();
    drop(sse);
    match down {
        Down::Term => assert_eq!(opc.stop().0, Some(0)),
        // Dropping the process handle kills it with SIGKILL.
        Down::Kill => drop(opc),
    }

    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let events = opc.url(&format!("/api/conversations/{conversation}/events"));
    let mut sse = Sse::connect(&events, None).await;
    sse.wait_for("reset", WAIT, |_| true).await;
    let question = sse.wait_for("message", WAIT, |_| true).await;
    assert_eq!(
        (question["author"].as_str(), question["text"].as_str()),
        (Some("user"), Some("Refund order 7")),
        "the history is replayed after the restart"
    );
    let replayed = sse.wait_for("card", WAIT, |_| true).await;
    assert_eq!(replayed["card"]["approval"], approval);
    assert_eq!(replayed["card"]["state"], "Pending", "{replayed}");

    let (status, body) = post(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": approve }),
    )
    .await;
    assert_eq!(
        status, 202,
        "the approval is decidable after the restart: {body}"
    );
    let updated = sse.wait_for("card_update", WAIT, |_| true).await;
    assert_eq!(updated["card"]["state"]["Decided"]["option"], "approve");
    sse.wait_for("message|edit", WAIT, |data| {
        data["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("CEO: VP: SUPPORT:") && t.contains("approve"))
    })
    .await;

    // A follow-up continues the conversation (the CEO's next scripted step, with the earlier turn).
    say(&opc, &conversation, "And the budget?").await;
    sse.wait_for("message|edit", WAIT, shows("Budget: 10k"))
        .await;
    let last = llm
        .requests_for(&marker("ceo"))
        .last()
        .unwrap()
        .user_texts();
    assert!(
        last.iter().any(|t| t.contains("Refund order 7")),
        "the follow-up carries the earlier turn: {last:?}"
    );
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_conversation_and_its_pending_approval_survive_sigterm() {
    a_web_conversation_and_its_pending_approval_survive_a_restart(Down::Term).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_conversation_and_its_pending_approval_survive_kill_9() {
    a_web_conversation_and_its_pending_approval_survive_a_restart(Down::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifteen_concurrent_web_conversations_are_all_answered() {
    let script = Script::new().agent(marker("ceo"), vec![Step::text("answered")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let mut conversations = Vec::new();
    for _ in 0..15 {
        conversations.push(new_conversation(&opc).await);
    }
    // One message each, all at once: more than the per-user allowance (10 a minute) in total.
    let texts: Vec<String> = (0..15).map(|i| format!("question {i}")).collect();
    let sends = conversations
        .iter()
        .zip(&texts)
        .map(|((id, _), text)| say(&opc, id, text));
    futures_util::future::join_all(sends).await;
    for (id, sse) in &mut conversations {
        sse.wait_for("message|edit", WAIT, shows("answered")).await;
        assert!(
            !sse.seen.iter().any(|e| e.name == "notice"),
            "conversation {id} got a notice: {:?}",
            sse.seen
        );
    }
    assert_eq!(llm.requests_for(&marker("ceo")).len(), 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_notice_is_kept_in_the_conversation() {
    let llm = ScriptedLlm::start(Script::new().agent(marker("ceo"), vec![Step::text("one")]))
        .await
        .unwrap();
    let sections =
        format!("{WEB}gateway:\n  rateLimit:\n    perUser: {{ messages: 1, per: 1h }}\n");
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), &sections);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "first").await;
    sse.wait_for("message|edit", WAIT, shows("one")).await;
    say(&opc, &conversation, "second").await;
    sse.wait_for("notice", WAIT, |n| {
        n["text"].as_str().is_some_and(|t| t.contains("faster"))
    })
    .await;
    // A page opened later still shows it: the notice is in the transcript.
    let events = opc.url(&format!("/api/conversations/{conversation}/events"));
    let mut later = Sse::connect(&events, None).await;
    later
        .wait_for("notice", WAIT, |n| {
            n["text"].as_str().is_some_and(|t| t.contains("faster"))
        })
        .await;
    // Another conversation has its own allowance.
    let (other, mut other_sse) = new_conversation(&opc).await;
    say(&opc, &other, "first").await;
    other_sse.wait_for("message|edit", WAIT, shows("one")).await;
}
