//! `opc run` end to end over Slack (the fake, Socket Mode): messages sent to a conversation while it is
//! answering wait for it and are answered after it, in the order they were sent — none is refused
//! and lost. The first answer is slow (the scripted LLM delays it), so the later messages arrive while
//! it runs; the assertions are on order and content, never on time.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::fake_slack::{FakeSlack, app_mention, envelope, thread_message};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};

const WAIT: Duration = Duration::from_secs(30);
const BOT_VAR: &str = "OPC_TEST_SLACK_BOT";
const APP_VAR: &str = "OPC_TEST_SLACK_APP";

/// The index of the first Slack call that shows `text` in thread `thread` (posted, or an update of a
/// message posted there), waiting for it.
async fn shown_at(slack: &FakeSlack, thread: &str, text: &str) -> usize {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let calls = slack.calls();
        let in_thread: Vec<String> = calls
            .iter()
            .filter(|c| c.method == "chat.postMessage" && c.params["thread_ts"] == thread)
            .filter_map(|c| c.response_ts())
            .collect();
        let found = calls.iter().position(|c| {
            c.params["text"] == text
                && ((c.method == "chat.postMessage" && c.params["thread_ts"] == thread)
                    || (c.method == "chat.update"
                        && c.params["ts"]
                            .as_str()
                            .is_some_and(|ts| in_thread.iter().any(|t| t == ts))))
        });
        if let Some(index) = found {
            return index;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {text:?} in thread {thread}; calls: {:#?}",
            calls
                .iter()
                .map(|c| (c.method.clone(), c.params.clone()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_while_a_conversation_is_busy_are_answered_after_it_in_order() {
    let slack = FakeSlack::start().await;
    let script = Script::new().agent(
        marker("ceo"),
        vec![
            Step::text("First answer.").with_delay_ms(2000),
            Step::text("Second answer."),
            Step::text("Third answer."),
        ],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: socket\n    botTokenEnv: {BOT_VAR}\n    appTokenEnv: {APP_VAR}\n    apiBaseUrl: {}\n",
        slack.api_url()
    );
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), &sections);
    let _opc = OpcRun::start(
        &org.config_path(),
        &[
            (KEY_VAR, KEY),
            (BOT_VAR, &slack.bot_token()),
            (APP_VAR, &slack.app_token()),
        ],
    );
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");

    let events = [
        app_mention("C1", "U1", "<@W11> First question", "1000.0001", None),
        thread_message("C1", "U1", "Second question", "1000.0002", "1000.0001"),
        thread_message("C1", "U1", "Third question", "1000.0003", "1000.0001"),
    ];
    for event in events {
        let id = slack.push_envelope(envelope("events_api", event, 0)).await;
        slack.wait_for_ack(&id, WAIT).await.expect("acked");
    }

    let first = shown_at(&slack, "1000.0001", "First answer.").await;
    let second = shown_at(&slack, "1000.0001", "Second answer.").await;
    let third = shown_at(&slack, "1000.0001", "Third answer.").await;
    assert!(
        first < second && second < third,
        "answered in order: {first}, {second}, {third}"
    );

    // Each message ran once, after the one before it, in one conversation.
    let requests = llm.requests_for(&marker("ceo"));
    assert_eq!(requests.len(), 3, "one LLM call per message");
    let last = requests[2].user_texts().join("\n");
    let positions: Vec<Option<usize>> = ["First question", "Second question", "Third question"]
        .iter()
        .map(|q| last.find(q))
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0].is_some() && w[0] < w[1]),
        "the third call carries the conversation in order: {last}"
    );
    assert!(
        slack
            .calls()
            .iter()
            .all(|c| !c.params.to_string().contains("Send this again")),
        "no message was refused"
    );
}
