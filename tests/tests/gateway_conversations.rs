//! `opc run` end to end over Slack (the fake, Socket Mode) and the scripted LLM server: what happens
//! to a conversation's messages when it is busy, and to its request when OPC is killed.
//!
//! - Messages sent to a conversation while it is answering wait for it and are answered after it, in
//!   the order they were sent — none is refused and lost. The first answer is slow (the scripted LLM
//!   delays it), so the later messages arrive while it runs; the assertions are on order and
//!   content, never on time.
//! - A request interrupted by kill -9 in the middle of a delegation gets its "interrupted" notice
//!   posted in its thread after the restart — exactly once: the notice is marked delivered, and a
//!   further restart posts nothing again; with 200 requests interrupted at once, all 200 notices are
//!   posted.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_agents::{SqliteStore, Store};
use opc_tests::fake_slack::{FakeSlack, app_mention, envelope, thread_message};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, marker, relay};
use opc_tests::scripted_llm::{Fault, INPUT_PLACEHOLDER, Script, ScriptedLlm, Step};
use opc_tests::wait::WAIT;

const BOT_VAR: &str = "OPC_TEST_SLACK_BOT";
const APP_VAR: &str = "OPC_TEST_SLACK_APP";
const THREAD: &str = "1000.0001";

/// A test org answering from `llm`, with the web chat and Slack (the fake, Socket Mode).
fn slack_org(slack: &FakeSlack, llm: &ScriptedLlm, execution: Execution) -> TestOrg {
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: socket\n    botTokenEnv: {BOT_VAR}\n    appTokenEnv: {APP_VAR}\n    apiBaseUrl: {}\n",
        slack.api_url()
    );
    TestOrg::with_sections(&llm.url(), Wire::Anthropic, execution, &sections)
}

/// Wait until `opc` serves HTTP, so a stop right after comes once start-up work (notices) has begun.
async fn serving(opc: &OpcRun) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = opc.url("/healthz");
    let deadline = tokio::time::Instant::now() + WAIT;
    while reqwest::get(&url).await.map(|r| r.status().as_u16()).ok() != Some(200) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{url} never answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn start(org: &TestOrg, slack: &FakeSlack) -> OpcRun {
    OpcRun::start(
        &org.config_path(),
        &[
            (KEY_VAR, KEY),
            (BOT_VAR, &slack.bot_token()),
            (APP_VAR, &slack.app_token()),
        ],
    )
}

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
    let org = slack_org(&slack, &llm, Execution::default());
    let _opc = start(&org, &slack);
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");

    let events = [
        app_mention("C1", "U1", "<@W11> First question", THREAD, None),
        thread_message("C1", "U1", "Second question", "1000.0002", THREAD),
        thread_message("C1", "U1", "Third question", "1000.0003", THREAD),
    ];
    for event in events {
        let id = slack.push_envelope(envelope("events_api", event, 0)).await;
        slack.wait_for_ack(&id, WAIT).await.expect("acked");
    }

    let first = shown_at(&slack, THREAD, "First answer.").await;
    let second = shown_at(&slack, THREAD, "Second answer.").await;
    let third = shown_at(&slack, THREAD, "Third answer.").await;
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

/// Whether a `chat.postMessage` is the engine's "interrupted" notice.
fn tells_of_an_interruption(params: &serde_json::Value) -> bool {
    params["text"]
        .as_str()
        .is_some_and(|t| t.contains("was interrupted"))
}

/// Posts in the conversation's thread that tell of an interruption.
fn interrupted_notices(slack: &FakeSlack) -> usize {
    slack
        .calls_of("chat.postMessage")
        .iter()
        .filter(|c| c.params["thread_ts"] == THREAD)
        .filter(|c| tells_of_an_interruption(&c.params))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_killed_mid_delegation_gets_its_interrupted_notice_in_its_thread_once() {
    let slack = FakeSlack::start().await;
    // The CEO delegates; the VP's model call never answers, so the tree is mid-delegation.
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-eng", "plan the page", "CEO: "))
        .agent(marker("vp-eng"), vec![Step::fault(Fault::Hang)]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = slack_org(&slack, &llm, Execution::default());

    let opc = start(&org, &slack);
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");
    let id = slack
        .push_envelope(envelope(
            "events_api",
            app_mention("C1", "U1", "<@W11> Plan a status page", THREAD, None),
            0,
        ))
        .await;
    slack.wait_for_ack(&id, WAIT).await.expect("acked");
    let deadline = tokio::time::Instant::now() + WAIT;
    while llm.requests_for(&marker("vp-eng")).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CEO never delegated"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(interrupted_notices(&slack), 0);

    // kill -9 (dropping the handle kills the process), then start again.
    drop(opc);
    let opc = start(&org, &slack);
    let notice = slack
        .wait_for_call(
            "chat.postMessage",
            |params| params["thread_ts"] == THREAD && tells_of_an_interruption(params),
            WAIT,
        )
        .await
        .expect("the interrupted notice posted in the conversation's thread");
    assert_eq!(notice.params["channel"], "C1");

    // A clean stop: the notice is recorded as delivered.
    serving(&opc).await;
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
    let store = SqliteStore::open(&org.database()).expect("open the database");
    assert_eq!(
        store.undelivered_notices().await.unwrap(),
        Vec::new(),
        "every notice marked delivered"
    );
    drop(store);

    // Another restart posts nothing again.
    let opc = start(&org, &slack);
    assert!(
        slack.wait_for_connections(3, WAIT).await,
        "no socket after the second restart"
    );
    serving(&opc).await;
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
    assert_eq!(interrupted_notices(&slack), 1, "posted exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_one_of_200_interrupted_requests_gets_its_notice() {
    const N: usize = 200;
    let slack = FakeSlack::start().await;
    let script = Script::new()
        .agent(
            marker("ceo"),
            relay("vp-eng", &format!("plan for {INPUT_PLACEHOLDER}"), "CEO: "),
        )
        .agent(marker("vp-eng"), vec![Step::fault(Fault::Hang)]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    // Room for every tree's two agents at once.
    let execution = Execution {
        max_concurrent_agents: 2 * N as u32 + 10,
        ..Execution::default()
    };
    let org = slack_org(&slack, &llm, execution);
    let opc = start(&org, &slack);
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");
    // One person per channel, so no rate limit applies.
    for i in 0..N {
        slack
            .push_envelope(envelope(
                "events_api",
                app_mention(
                    &format!("C{i}"),
                    &format!("U{i}"),
                    &format!("<@W11> Request {i}"),
                    &format!("1000.{i:04}"),
                    None,
                ),
                0,
            ))
            .await;
    }
    // Every request is mid-delegation (counted by distinct request, not by model call: a timed-out
    // call is retried).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let delegated: std::collections::HashSet<String> = llm
            .requests_for(&marker("vp-eng"))
            .iter()
            .filter_map(|r| r.user_texts().into_iter().next())
            .collect();
        if delegated.len() == N {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {N} requests reached the delegation",
            delegated.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    drop(opc);
    let opc = start(&org, &slack);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let posted: std::collections::HashSet<String> = slack
            .calls_of("chat.postMessage")
            .iter()
            .filter(|c| tells_of_an_interruption(&c.params))
            .filter_map(|c| c.params["channel"].as_str().map(str::to_string))
            .collect();
        if posted.len() == N {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {N} notices posted; opc's stderr:\n{}",
            posted.len(),
            opc.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A message waiting for its busy conversation when OPC is stopped is not kept across the restart, so
/// its sender is told — never left with a question that is silently dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_still_waiting_at_a_stop_is_told_it_was_not_answered() {
    let slack = FakeSlack::start().await;
    // The CEO's call never answers: the conversation stays busy until the stop.
    let script = Script::new().agent(marker("ceo"), vec![Step::fault(Fault::Hang)]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = slack_org(&slack, &llm, Execution::default());
    let opc = start(&org, &slack);
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");

    let events = [
        app_mention("C1", "U1", "<@W11> First question", THREAD, None),
        thread_message("C1", "U1", "Second question", "1000.0002", THREAD),
        // An empty mention elsewhere is answered with the help text: once that shows, the gateway
        // (which handles its inbox in order) has queued the second question.
        app_mention("C1", "U2", "<@W11>", "2000.0001", None),
    ];
    for event in events {
        let id = slack.push_envelope(envelope("events_api", event, 0)).await;
        slack.wait_for_ack(&id, WAIT).await.expect("acked");
    }
    slack
        .wait_for_call("chat.postEphemeral", |p| p["user"] == "U2", WAIT)
        .await
        .expect("the help text for the empty mention");
    serving(&opc).await;
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));

    let told: Vec<_> = slack
        .calls()
        .into_iter()
        .filter(|c| c.params.to_string().contains("was not answered"))
        .collect();
    assert_eq!(told.len(), 1, "the waiting message's sender is told once");
    assert_eq!(told[0].params["user"], "U1");
    assert_eq!(
        llm.requests_for(&marker("ceo")).len(),
        1,
        "the waiting message never reached the model"
    );
}
