//! Hot reload under traffic: `opc run` with the web chat and Slack (the fake, Socket Mode) answers
//! messages that arrive throughout ten config reloads (each written to disk as an editor does and
//! picked up by the watcher), and every message is answered exactly once: one model call, one
//! answer in its thread or conversation, none lost and none doubled.
//!
//! Reloads alternate two valid configs: the test org, and the test org with one more agent and other
//! rate limits, so every reload swaps the org, the runtime and the gateway's limits. Each reload is
//! awaited through `/api/org`'s generation, so the test asserts what happened, not how long it took.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opc_tests::fake_slack::{FakeSlack, app_mention, envelope};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::reload::{generation, replace_file};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, within};

const BOT_VAR: &str = "OPC_TEST_SLACK_BOT";
const APP_VAR: &str = "OPC_TEST_SLACK_APP";
const RELOADS: u64 = 10;

fn sections(slack: &FakeSlack) -> String {
    format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: socket\n    botTokenEnv: {BOT_VAR}\n    appTokenEnv: {APP_VAR}\n    apiBaseUrl: {}\n\
         gateway:\n  rateLimit:\n    perUser: {{ messages: 1000, per: 1m }}\n    perChannel: {{ messages: 1000, per: 1m }}\n",
        slack.api_url()
    )
}

/// The other config: one more agent under `vp-ops`, and other rate limits.
fn variant(text: &str) -> String {
    let changed = text
        .replacen(
            "    children: [support]\n",
            "    children: [support, qa]\n",
            1,
        )
        .replacen(
            "agents:\n",
            "agents:\n  qa:\n    role: QA Lead\n    level: 2\n    parent: vp-ops\n    tools: [escalate]\n    memory: { recall: false }\n",
            1,
        )
        .replace("messages: 1000, per: 1m", "messages: 900, per: 1m");
    assert_ne!(changed, text);
    changed
}

/// The final text of every reply in Slack thread `thread` of channel `C1`: each message OPC posted
/// there, as its last edit left it.
fn slack_replies(slack: &FakeSlack, thread: &str) -> Vec<String> {
    let calls = slack.calls();
    let mut replies: Vec<(String, String)> = Vec::new();
    for c in &calls {
        if c.method == "chat.postMessage" && c.params["thread_ts"] == thread {
            if let Some(ts) = c.response_ts() {
                replies.push((ts, c.params["text"].as_str().unwrap_or("").to_string()));
            }
        } else if c.method == "chat.update"
            && let Some(r) = replies
                .iter_mut()
                .find(|(ts, _)| c.params["ts"] == ts.as_str())
        {
            r.1 = c.params["text"].as_str().unwrap_or("").to_string();
        }
    }
    replies.into_iter().map(|(_, text)| text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_is_answered_once_while_the_config_reloads_ten_times() {
    let slack = Arc::new(FakeSlack::start().await);
    let llm = ScriptedLlm::start(
        Script::new().agent(marker("ceo"), vec![Step::text("answer to {{input}}")]),
    )
    .await
    .unwrap();
    let org = TestOrg::with_sections(
        &llm.url(),
        Wire::Anthropic,
        Execution::default(),
        &sections(&slack),
    );
    let opc = Arc::new(OpcRun::start(
        &org.config_path(),
        &[
            (KEY_VAR, KEY),
            (BOT_VAR, &slack.bot_token()),
            (APP_VAR, &slack.app_token()),
        ],
    ));
    assert!(slack.wait_for_connections(1, WAIT).await, "no socket");
    let file = org.config_path();
    let original = std::fs::read_to_string(&file).unwrap();
    let other = variant(&original);

    // Messages arrive throughout: one web conversation and one Slack thread per round, sent while
    // the reloads run, until the last reload is live.
    let reloading = Arc::new(AtomicBool::new(true));
    let sender = {
        let opc = opc.clone();
        let reloading = reloading.clone();
        let slack = slack.clone();
        tokio::spawn(async move {
            let mut web = Vec::new();
            let mut threads = Vec::new();
            let mut round = 0u32;
            while reloading.load(Ordering::SeqCst) || round < 3 {
                round += 1;
                let text = format!("web message {round}");
                let (_, sse) = opc_tests::web_chat::start(&opc, &text).await;
                web.push((text, sse));
                let ts = format!("7000.{round:04}");
                let text = format!("slack message {round}");
                slack
                    .push_envelope(envelope(
                        "events_api",
                        app_mention("C1", "U1", &format!("<@W11> {text}"), &ts, None),
                        0,
                    ))
                    .await;
                threads.push((text, ts));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (web, threads)
        })
    };

    for reload in 1..=RELOADS {
        let text = if reload % 2 == 1 { &other } else { &original };
        replace_file(&file, text);
        within(WAIT, "the reload to go live", async {
            while generation(&opc).await < reload + 1 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }
    reloading.store(false, Ordering::SeqCst);
    let (web, threads) = within(WAIT, "the sender", sender).await.unwrap();
    assert_eq!(
        generation(&opc).await,
        RELOADS + 1,
        "one generation per reload"
    );

    // Every web message: its answer, in its own conversation, once.
    let sent = web.len() + threads.len();
    for (text, mut sse) in web {
        let answer = format!("answer to {text}");
        sse.wait_for("message|edit", WAIT, |e| {
            e["text"].as_str() == Some(answer.as_str())
        })
        .await;
        let messages: HashSet<String> = sse
            .seen
            .iter()
            .filter(|e| e.name == "message" && e.data["author"] == "bot")
            .filter_map(|e| e.data["id"].as_str().map(str::to_string))
            .collect();
        assert_eq!(messages.len(), 1, "one answer for {text:?}: {:?}", sse.seen);
    }
    // Every Slack mention: one reply in its thread, with its answer.
    for (text, ts) in &threads {
        let answer = format!("answer to {text}");
        within(WAIT, "the Slack answer", async {
            while !slack_replies(&slack, ts).contains(&answer) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert_eq!(slack_replies(&slack, ts), vec![answer], "thread {ts}");
    }
    // And one model call per message: nothing ran twice.
    let ceo = llm.requests_for(&marker("ceo"));
    let mut asked: Vec<String> = ceo
        .iter()
        .flat_map(|r| r.user_texts())
        .filter(|t| t.contains(" message "))
        .collect();
    asked.sort();
    let before = asked.len();
    asked.dedup();
    assert_eq!(before, asked.len(), "a message reached the model twice");
    assert_eq!(ceo.len(), sent, "one model call per message");

    let opc = Arc::try_unwrap(opc).unwrap_or_else(|_| panic!("the sender still holds opc"));
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
