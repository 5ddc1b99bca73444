//! `opc run` end to end with Slack: the real binary against the fake Slack (Socket Mode websocket and
//! Web API, or signed HTTP Events API requests) and the scripted LLM server, all on loopback.
//!
//! Covers: a mention acked while its LLM call is still running; a mention delegated, streamed into its
//! thread and finished with the exact text; follow-ups in the thread continuing the conversation, also
//! after a restart; approval cards decided by an approver only, once; the Events API refusing forged,
//! stale, unsigned and replayed requests and running a retried event once; floods capped — one user's
//! without starving another, many users' in one channel — with one notice per episode, not per message
//! or per user.
//!
//! Every assertion is about order and causality, never about how long something took: the gateway
//! handles its inbox in order, so once a later message is answered, every earlier one has been decided.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::fake_slack::{
    self, FakeSlack, app_mention, block_actions, envelope, thread_message,
};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{TestOrg, marker, relay};
use opc_tests::scripted_llm::{Fault, Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, wait_until};
use serde_json::{Value, json};

const BOT_VAR: &str = "OPC_TEST_SLACK_BOT";
const APP_VAR: &str = "OPC_TEST_SLACK_APP";
const SECRET_VAR: &str = "OPC_TEST_SLACK_SECRET";
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

fn socket_sections(slack: &FakeSlack, gateway: &str) -> String {
    format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: socket\n    botTokenEnv: {BOT_VAR}\n    appTokenEnv: {APP_VAR}\n    apiBaseUrl: {}\n{gateway}",
        slack.api_url()
    )
}

fn start(org: &TestOrg, slack: &FakeSlack) -> OpcRun {
    org.run(&[
        (BOT_VAR, &slack.bot_token()),
        (APP_VAR, &slack.app_token()),
        (SECRET_VAR, SECRET),
    ])
}

/// The scripted LLM on `script`, and `opc run` on a test org using it and the fake Slack in Socket Mode
/// (with `gateway` YAML), connected.
async fn socket_opc(
    slack: &FakeSlack,
    script: Script,
    gateway: &str,
) -> (ScriptedLlm, TestOrg, OpcRun) {
    let (llm, org) = TestOrg::scripted(script)
        .sections(socket_sections(slack, gateway))
        .start()
        .await;
    let opc = start(&org, slack);
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");
    (llm, org, opc)
}

/// The text of the thread's latest message with exactly `text`, from `chat.postMessage` or
/// `chat.update` in thread `thread` (updates are matched by the ts of a message posted in the thread).
async fn wait_for_text_in_thread(slack: &FakeSlack, channel: &str, thread: &str, text: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let calls = slack.calls();
        let in_thread: Vec<String> = calls
            .iter()
            .filter(|c| c.method == "chat.postMessage")
            .filter(|c| c.params["channel"] == channel && c.params["thread_ts"] == thread)
            .filter_map(|c| c.response_ts())
            .collect();
        let found = calls.iter().any(|c| {
            (c.method == "chat.postMessage"
                && c.params["channel"] == channel
                && c.params["thread_ts"] == thread
                && c.params["text"] == text)
                || (c.method == "chat.update"
                    && c.params["ts"]
                        .as_str()
                        .is_some_and(|ts| in_thread.iter().any(|t| t == ts))
                    && c.params["text"] == text)
        });
        if found {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let shown: Vec<(String, Value)> = calls
                .iter()
                .map(|c| (c.method.clone(), c.params.clone()))
                .collect();
            panic!("no message {text:?} in thread {thread}; calls: {shown:#?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_mode_mention_is_acked_delegated_streamed_and_continued_across_a_restart() {
    let slack = FakeSlack::start().await;
    let mut ceo = relay("vp-eng", "plan the page", "CEO: ");
    ceo.push(Step::text("Budget: 10k"));
    ceo.push(Step::text("Still here, same plan."));
    let script = Script::new().agent(marker("ceo"), ceo).agent(
        marker("vp-eng"),
        vec![Step::text("a status page in two sprints")],
    );
    let (llm, org, opc) = socket_opc(&slack, script, "").await;

    let id = slack
        .push_envelope(envelope(
            "events_api",
            app_mention(
                "C1",
                "U1",
                "<@W11> Plan a public status page",
                "1000.0001",
                None,
            ),
            0,
        ))
        .await;
    slack.wait_for_ack(&id, WAIT).await.expect("acked");
    wait_for_text_in_thread(
        &slack,
        "C1",
        "1000.0001",
        "CEO: a status page in two sprints",
    )
    .await;
    assert_eq!(
        llm.requests_for(&marker("vp-eng")).len(),
        1,
        "the CEO delegated"
    );
    // The reply was streamed: posted first, then edited to the exact final text (or posted whole).
    let posts = slack.calls_of("chat.postMessage");
    assert!(posts.iter().any(|c| c.params["thread_ts"] == "1000.0001"));

    // A message in a thread that is not ours is ignored; then a follow-up in ours continues the same
    // conversation (answered after the first was handled, since the inbox is handled in order).
    slack
        .push_envelope(envelope(
            "events_api",
            thread_message("C1", "U1", "unrelated", "2000.0002", "2000.0001"),
            0,
        ))
        .await;
    slack
        .push_envelope(envelope(
            "events_api",
            thread_message("C1", "U1", "And the budget?", "1000.0005", "1000.0001"),
            0,
        ))
        .await;
    wait_for_text_in_thread(&slack, "C1", "1000.0001", "Budget: 10k").await;
    assert!(
        llm.requests()
            .iter()
            .all(|r| !r.user_texts().iter().any(|t| t.contains("unrelated"))),
        "the unrelated thread ran nothing"
    );
    let last = llm
        .requests_for(&marker("ceo"))
        .last()
        .unwrap()
        .user_texts();
    assert!(
        last.iter().any(|t| t.contains("Plan a public status page")),
        "{last:?}"
    );

    // After a restart the thread still continues its conversation.
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
    let _opc = start(&org, &slack);
    assert!(
        slack.wait_for_connections(2, WAIT).await,
        "no socket after restart"
    );
    slack
        .push_envelope(envelope(
            "events_api",
            thread_message("C1", "U1", "Still there?", "1000.0009", "1000.0001"),
            0,
        ))
        .await;
    wait_for_text_in_thread(&slack, "C1", "1000.0001", "Still here, same plan.").await;
    let last = llm
        .requests_for(&marker("ceo"))
        .last()
        .unwrap()
        .user_texts();
    assert!(
        last.iter().any(|t| t.contains("And the budget?")),
        "the restarted gateway continued the conversation: {last:?}"
    );
}

/// Action ids of the buttons in a Block Kit message.
fn button_ids(blocks: &Value) -> Vec<String> {
    blocks
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["action_id"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_card_is_decided_by_an_approver_only_and_once() {
    let slack = FakeSlack::start().await;
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
                Step::text("SUPPORT: done"),
            ],
        );
    let (_llm, _org, _opc) =
        socket_opc(&slack, script, "gateway:\n  approvers: [slack:UBOSS]\n").await;
    slack
        .push_envelope(envelope(
            "events_api",
            app_mention("C1", "U1", "<@W11> Refund order 7", "3000.0001", None),
            0,
        ))
        .await;

    let card = slack
        .wait_for_call(
            "chat.postMessage",
            |p| !button_ids(&p["blocks"]).is_empty(),
            WAIT,
        )
        .await
        .expect("an approval card");
    assert_eq!(
        card.params["thread_ts"], "3000.0001",
        "posted in the conversation's thread"
    );
    let text = card.params["blocks"].to_string();
    assert!(
        text.contains("Refund $120 for order 7") && text.contains("support"),
        "{text}"
    );
    assert!(
        text.contains("vp-ops"),
        "the card shows the agent's position: {text}"
    );
    let approve = button_ids(&card.params["blocks"])[0].clone();
    let card_ts = card.response_ts().expect("card ts");

    // A non-approver is refused, ephemerally; nothing is decided.
    slack
        .push_envelope(envelope(
            "interactive",
            block_actions(
                "C1",
                "U2",
                &card_ts,
                Some("3000.0001"),
                &approve,
                &slack.response_url("r1"),
            ),
            0,
        ))
        .await;
    let refusal = slack
        .wait_for_call(
            "response_url",
            |p| {
                p["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Only approvers"))
            },
            WAIT,
        )
        .await
        .expect("refusal");
    assert_eq!(refusal.params["response_type"], "ephemeral");

    // The approver decides: the card is redrawn without buttons, the task resumes.
    slack
        .push_envelope(envelope(
            "interactive",
            block_actions(
                "C1",
                "UBOSS",
                &card_ts,
                Some("3000.0001"),
                &approve,
                &slack.response_url("r2"),
            ),
            0,
        ))
        .await;
    let updated = slack
        .wait_for_call(
            "chat.update",
            |p| p["ts"] == card_ts.as_str() && p["blocks"].to_string().contains("UBOSS"),
            WAIT,
        )
        .await
        .expect("card redrawn");
    assert!(
        button_ids(&updated.params["blocks"]).is_empty(),
        "no buttons once decided"
    );
    wait_for_text_in_thread(&slack, "C1", "3000.0001", "CEO: VP: SUPPORT: done").await;

    // A second click is refused: decided once.
    slack
        .push_envelope(envelope(
            "interactive",
            block_actions(
                "C1",
                "UBOSS",
                &card_ts,
                Some("3000.0001"),
                &approve,
                &slack.response_url("r3"),
            ),
            0,
        ))
        .await;
    slack
        .wait_for_call(
            "response_url",
            |p| {
                p["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("already decided"))
            },
            WAIT,
        )
        .await
        .expect("second click refused");
}

/// Acking never waits for LLM work: the CEO's model call hangs for ever, and the envelope is acked
/// all the same (Slack redelivers an envelope not acked within 3 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_is_acked_while_its_llm_call_is_still_running() {
    let slack = FakeSlack::start().await;
    let script = Script::new().agent(marker("ceo"), vec![Step::fault(Fault::Hang)]);
    let (llm, _org, _opc) = socket_opc(&slack, script, "").await;
    let id = slack
        .push_envelope(envelope(
            "events_api",
            app_mention("C1", "U1", "<@W11> take your time", "6000.0001", None),
            0,
        ))
        .await;
    wait_until(WAIT, "the CEO's model call to start", || {
        !llm.requests_for(&marker("ceo")).is_empty()
    })
    .await;
    slack
        .wait_for_ack(&id, WAIT)
        .await
        .expect("the envelope acked while its LLM call hangs");
}

/// The `chat.postEphemeral` notices sent in `channel`.
fn ephemerals_in(slack: &FakeSlack, channel: &str) -> Vec<Value> {
    slack
        .calls_of("chat.postEphemeral")
        .into_iter()
        .filter(|c| c.params["channel"] == channel)
        .map(|c| c.params)
        .collect()
}

/// LLM calls whose request text contains `needle`.
fn llm_calls_with(llm: &ScriptedLlm, needle: &str) -> usize {
    llm.requests()
        .iter()
        .filter(|r| r.session.contains(needle))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_are_capped_with_one_notice_per_episode_and_others_are_still_answered() {
    let slack = FakeSlack::start().await;
    let script = Script::new().agent(marker("ceo"), vec![Step::text("on it")]);
    // Per hour, so that nothing refills while the test runs, however slow the machine.
    let rates = "gateway:\n  rateLimit:\n    perUser: { messages: 3, per: 1h }\n    perChannel: { messages: 5, per: 1h }\n";
    let (llm, _org, _opc) = socket_opc(&slack, script, rates).await;
    // One user floods C1 ...
    for i in 0..100 {
        let ts = format!("4000.{i:04}");
        slack
            .push_envelope(envelope(
                "events_api",
                app_mention("C1", "U1", &format!("<@W11> request {i}"), &ts, None),
                0,
            ))
            .await;
    }
    // ... and 40 users flood C9, one message each.
    for i in 0..40 {
        let ts = format!("4100.{i:04}");
        slack
            .push_envelope(envelope(
                "events_api",
                app_mention(
                    "C9",
                    &format!("U{}", 200 + i),
                    &format!("<@W11> crowd {i}"),
                    &ts,
                    None,
                ),
                0,
            ))
            .await;
    }
    // Someone else in C1 is still answered (U1's flood stopped at U1's limit, not C1's). The inbox is
    // handled in order, so once this is answered every message above has been let through or refused.
    slack
        .push_envelope(envelope(
            "events_api",
            app_mention("C1", "U2", "<@W11> from someone else", "4001.0001", None),
            0,
        ))
        .await;
    wait_for_text_in_thread(&slack, "C1", "4001.0001", "on it").await;

    // U1: the first 3 answered, the other 97 skipped with one notice.
    for i in 0..3 {
        wait_for_text_in_thread(&slack, "C1", &format!("4000.{i:04}"), "on it").await;
    }
    assert_eq!(llm_calls_with(&llm, "request "), 3, "U1's allowance is 3");
    slack
        .wait_for_call(
            "chat.postEphemeral",
            |p| p["channel"] == "C1" && p["user"] == "U1",
            WAIT,
        )
        .await
        .expect("a polite notice to U1");
    let notices = ephemerals_in(&slack, "C1");
    assert_eq!(notices.len(), 1, "one notice per episode: {notices:#?}");
    let text = notices[0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("3 messages per 1h"), "{text}");

    // C9: the channel's 5 answered, the other 35 users skipped with ONE notice for the channel.
    for i in 0..5 {
        wait_for_text_in_thread(&slack, "C9", &format!("4100.{i:04}"), "on it").await;
    }
    assert_eq!(llm_calls_with(&llm, "crowd "), 5, "C9's allowance is 5");
    slack
        .wait_for_call("chat.postEphemeral", |p| p["channel"] == "C9", WAIT)
        .await
        .expect("a notice in C9");
    let notices = ephemerals_in(&slack, "C9");
    assert_eq!(
        notices.len(),
        1,
        "one notice per channel per episode, not one per refused user: {notices:#?}"
    );
    assert_eq!(notices[0]["user"], "U205", "the first user refused is told");
    let text = notices[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("channel") && text.contains("5 messages per 1h"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_api_refuses_forged_stale_unsigned_and_replayed_requests_and_runs_a_retry_once()
{
    let slack = FakeSlack::start().await;
    let script = Script::new().agent(marker("ceo"), vec![Step::text("answered")]);
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: http\n    botTokenEnv: {BOT_VAR}\n    signingSecretEnv: {SECRET_VAR}\n    apiBaseUrl: {}\n",
        slack.api_url()
    );
    let (llm, org) = TestOrg::scripted(script).sections(sections).start().await;
    let opc = start(&org, &slack);
    let client = opc_tests::http_client();
    let url = opc.url("/slack/events");
    let send = |body: String, headers: Vec<(String, String)>| {
        let mut request = client.post(&url).body(body);
        request = request.header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let now = fake_slack::now_unix();

    // url_verification is answered.
    let challenge =
        json!({"token": "x", "challenge": "c-123", "type": "url_verification"}).to_string();
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .headers(to_header_map(fake_slack::signed_headers(
            SECRET, now, &challenge,
        )))
        .body(challenge.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("c-123"));

    let forged = app_mention("C1", "U1", "<@W11> forged", "5000.0001", None).to_string();
    assert_eq!(
        send(
            forged.clone(),
            fake_slack::signed_headers("wrong-secret", now, &forged)
        )
        .await,
        401
    );
    let stale = app_mention("C1", "U1", "<@W11> stale", "5000.0002", None).to_string();
    assert_eq!(
        send(
            stale.clone(),
            fake_slack::signed_headers(SECRET, now - 600, &stale)
        )
        .await,
        401
    );
    let unsigned = app_mention("C1", "U1", "<@W11> unsigned", "5000.0003", None).to_string();
    assert_eq!(send(unsigned, vec![]).await, 401);

    let good = app_mention("C1", "U1", "<@W11> real request", "5000.0004", None).to_string();
    let headers = fake_slack::signed_headers(SECRET, now, &good);
    assert_eq!(send(good.clone(), headers.clone()).await, 200);
    // The identical request again is a replay: refused.
    assert_eq!(send(good.clone(), headers).await, 401);
    // Slack's retry (signed anew, X-Slack-Retry-Num) is accepted but not run again.
    let mut retry = fake_slack::signed_headers(SECRET, now + 1, &good);
    retry.push(("x-slack-retry-num".into(), "1".into()));
    assert_eq!(send(good.clone(), retry).await, 200);

    wait_for_text_in_thread(&slack, "C1", "5000.0004", "answered").await;
    // A later request, answered: events are handled in order, so a second run of the retried event
    // would have started before this one.
    let later = app_mention("C1", "U1", "<@W11> later request", "5000.0005", None).to_string();
    let headers = fake_slack::signed_headers(SECRET, now + 2, &later);
    assert_eq!(send(later, headers).await, 200);
    wait_for_text_in_thread(&slack, "C1", "5000.0005", "answered").await;
    let sessions: Vec<String> = llm.requests().iter().map(|r| r.session.clone()).collect();
    assert_eq!(
        sessions.len(),
        2,
        "only the real request ran, once, then the later one: {sessions:?}"
    );
    assert!(sessions[0].contains("real request"), "{sessions:?}");
    assert!(sessions[1].contains("later request"), "{sessions:?}");
}

fn to_header_map(headers: Vec<(String, String)>) -> reqwest::header::HeaderMap {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        map.insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    map
}
