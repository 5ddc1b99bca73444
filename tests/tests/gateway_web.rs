//! `opc run` end to end through the built-in web chat: the real binary, the scripted LLM server, the JSON
//! API and the SSE stream over loopback — delegation streamed into the conversation with the exact
//! final text, approvals decided from the chat (by index or label, the answer placed below the card),
//! slash commands (shown as typed, answered in the platform's terms), a missing LLM key answered with
//! a notice (and no LLM call) and shown beforehand as the chat's banner and on the console's Org page
//! (kept current across a reload), each provider's last call, a missing platform token refused at
//! start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{
    Execution, KEY, KEY_VAR, TestOrg, Wire, marker, relay, support_asks_approval,
};
use opc_tests::post_json as post;
use opc_tests::scripted_llm::{Reply, Script, Step, ToolCall};
use opc_tests::sse::Sse;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

use opc_tests::wait::WAIT;
use opc_tests::web_chat::{open as new_conversation, pending_approval, say, start};

/// GET `path` of `opc` as JSON (200 expected).
async fn get(opc: &OpcRun, path: &str) -> Value {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "GET {path}");
    response.json().await.unwrap()
}

/// The provider `id` in the console's provider list.
async fn provider(opc: &OpcRun, id: &str) -> Value {
    let list = get(opc, "/admin/api/providers").await;
    list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("no provider {id} in {list}"))
        .clone()
}

/// A message id of the web chat as a number: ids grow in the order things were posted.
fn number(event: &Value) -> i64 {
    event["id"].as_str().unwrap().parse().unwrap()
}

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
    let (llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = org.run(&[]);

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

/// The CEO says something, then delegates in the same turn; the request ends in an approval.
fn ceo_speaks_then_delegates() -> Vec<Step> {
    vec![
        Step::reply(Reply {
            text: Some("Let me check with operations.".into()),
            tool_calls: vec![ToolCall {
                name: "delegate".into(),
                input: json!({"agent": "vp-ops", "task": "refund"}),
            }],
            usage: None,
        }),
        Step::text("CEO: {{last_result}}"),
    ]
}

/// vp-ops relays to support, its first answer held back a moment: the CEO's words are on the page
/// well before the approval card, as they would be with a real model.
fn vp_ops_after_a_pause() -> Vec<Step> {
    let mut steps = relay("support", "refund order 7", "VP: ");
    steps[0] = steps[0].clone().with_delay_ms(300);
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_decided_from_the_web_chat_and_the_task_resumes() {
    let script = Script::new()
        .agent(marker("ceo"), ceo_speaks_then_delegates())
        .agent(marker("vp-ops"), vp_ops_after_a_pause())
        .agent(marker("support"), support_asks_approval());
    let (_llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = org.run(&[]);
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

    // A label that is not an option is refused, naming the options; the label itself is accepted in
    // any case.
    let (status, body) = post(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": "maybe" }),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("\"maybe\"") && error.contains(&format!("{approve}: \"approve\"")),
        "{error}"
    );
    let (status, body) = post(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": "Approve" }),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let updated = sse.wait_for("card_update", WAIT, |_| true).await;
    assert!(updated.to_string().contains("operator"), "{updated}");
    let answer = sse
        .wait_for("message|edit", WAIT, |data| {
            data["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("CEO: VP: SUPPORT:") && t.contains("approve"))
        })
        .await;
    // The answer is below the card it waited for, and what the CEO said before it stays.
    assert!(
        number(&answer) > number(&card),
        "the answer ({answer}) comes after the card ({card})"
    );
    let said = sse
        .seen
        .iter()
        .filter(|e| e.name == "message" || e.name == "edit")
        .rfind(|e| number(&e.data) < number(&card))
        .expect("the CEO's words before the approval");
    assert_eq!(said.data["text"], "Let me check with operations.");
    // A page opened now shows them in that order.
    let mut replay = Sse::connect(
        &opc.url(&format!("/api/conversations/{conversation}/events")),
        None,
    )
    .await;
    let last = replay
        .wait_for("message", WAIT, |m| {
            m["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("CEO: VP:"))
        })
        .await;
    let order: Vec<String> = replay
        .seen
        .iter()
        .filter(|e| e.name == "message" || e.name == "card")
        .map(|e| match e.name.as_str() {
            "card" => "card".to_string(),
            _ => e.data["text"].as_str().unwrap().to_string(),
        })
        .collect();
    assert_eq!(
        order,
        [
            "Refund order 7".to_string(),
            "Let me check with operations.".to_string(),
            "card".to_string(),
            last["text"].as_str().unwrap().to_string()
        ]
    );

    // The console shows the provider's key as set and its last call as ok.
    let llm_provider = provider(&opc, "llm").await;
    assert_eq!(llm_provider["state"], "key set", "{llm_provider}");
    assert_eq!(llm_provider["key"], json!({"var": KEY_VAR, "set": true}));
    assert_eq!(llm_provider["last_call"]["outcome"], "ok", "{llm_provider}");
    assert!(
        llm_provider["used_by"]
            .as_array()
            .unwrap()
            .contains(&json!("ceo"))
    );

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
    let (llm, org) = TestOrg::scripted(Script::new()).sections(WEB).start().await;
    let opc = org.run(&[]);
    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "/agents").await;
    sse.wait_for("notice", WAIT, |n| {
        n["text"]
            .as_str()
            .is_some_and(|t| t.contains("vp-eng") && t.contains("Backend Developer"))
    })
    .await;
    say(&opc, &conversation, "/status").await;
    let status = sse
        .wait_for("notice", WAIT, |n| {
            n["text"]
                .as_str()
                .is_some_and(|t| t.contains("Nothing is running"))
        })
        .await;
    let text = status["text"].as_str().unwrap();
    assert!(
        text.contains("message box") && !text.contains("Mention"),
        "web wording: {text}"
    );
    // The command as typed comes just before its answer.
    let at = sse
        .seen
        .iter()
        .position(|e| e.name == "notice" && e.data == status)
        .unwrap();
    let typed = &sse.seen[at - 1];
    assert_eq!(
        (
            typed.name.as_str(),
            &typed.data["author"],
            &typed.data["text"]
        ),
        ("message", &json!("user"), &json!("/status"))
    );
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
    let (llm, org) = TestOrg::scripted(Script::new()).sections(WEB).start().await;
    let opc = OpcRun::start(&org.config_path(), &[]);
    // Before anyone chats: the chat's banner names the variable and how to fix it …
    let banner = get(&opc, "/api/banner").await["banner"].clone();
    let banner = banner.as_str().expect("a banner");
    assert!(
        banner.contains(&format!("{KEY_VAR} is not set")) && banner.contains("restart"),
        "{banner}"
    );
    // … and the console's provider list says the same.
    let llm_provider = provider(&opc, "llm").await;
    assert_eq!(llm_provider["state"], "key missing", "{llm_provider}");
    assert_eq!(llm_provider["key"], json!({"var": KEY_VAR, "set": false}));
    assert_eq!(llm_provider["last_call"], Value::Null);
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
        let opc = org.run(&[]);
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
        .agent(marker("support"), support_asks_approval());
    let (llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = org.run(&[]);
    let (conversation, mut sse) = start(&opc, "Refund order 7").await;
    let (approval, approve) = pending_approval(&mut sse).await;
    drop(sse);
    match down {
        Down::Term => assert_eq!(opc.stop().0, Some(0)),
        // Dropping the process handle kills it with SIGKILL.
        Down::Kill => drop(opc),
    }

    let opc = org.run(&[]);
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
    let (llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = org.run(&[]);
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
    let sections =
        format!("{WEB}gateway:\n  rateLimit:\n    perUser: {{ messages: 1, per: 1h }}\n");
    let (_llm, org) =
        TestOrg::scripted(Script::new().agent(marker("ceo"), vec![Step::text("one")]))
            .sections(sections)
            .start()
            .await;
    let opc = org.run(&[]);
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

/// The request fails with the provider's 401: the console names the failure and when.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_providers_failed_last_call() {
    let script = Script::new().agent(marker("ceo"), vec![Step::status(401, None)]);
    let (_llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = org.run(&[]);
    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "Hello?").await;
    sse.wait_for("message|edit", WAIT, |m| {
        m["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("**This request failed.**"))
    })
    .await;
    let llm_provider = provider(&opc, "llm").await;
    let last = &llm_provider["last_call"];
    assert_eq!(last["outcome"], "error", "{llm_provider}");
    assert_eq!(
        last["kind"], "HTTP 401 (the key was refused)",
        "{llm_provider}"
    );
    assert!(last["at"].as_i64().unwrap() > 0);
    assert_eq!(llm_provider["state"], "key set");
}

/// A reload that makes the provider keyless clears the banner; the chat then answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_missing_key_banner_follows_a_reload() {
    let (_llm, org) =
        TestOrg::scripted(Script::new().agent(marker("ceo"), vec![Step::text("hello")]))
            .wire(Wire::OpenAi)
            .sections(WEB)
            .start()
            .await;
    let opc = OpcRun::start(&org.config_path(), &[]);
    assert!(get(&opc, "/api/banner").await["banner"].is_string());

    let text = std::fs::read_to_string(org.config_path()).unwrap();
    let keyless = text.replace(&format!("      apiKeyEnv: {KEY_VAR}\n"), "");
    assert_ne!(keyless, text);
    std::fs::write(org.config_path(), keyless).unwrap();
    tokio::time::timeout(WAIT, async {
        while get(&opc, "/admin/api/reload").await["generation"] != 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the edited config applied");
    assert_eq!(get(&opc, "/api/banner").await["banner"], Value::Null);
    let llm_provider = provider(&opc, "llm").await;
    assert_eq!(llm_provider["state"], "no key needed", "{llm_provider}");
    assert_eq!(llm_provider["key"], Value::Null);

    let (conversation, mut sse) = new_conversation(&opc).await;
    say(&opc, &conversation, "Hi").await;
    sse.wait_for("message|edit", WAIT, shows("hello")).await;
}

/// In the browser: the chat page shows the missing key before anyone chats, the console's Org page
/// shows the provider's state; with the key, the answer that waited for an approval shows below its
/// card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_show_the_banner_the_provider_and_the_answer_below_its_card() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let script = Script::new()
        .agent(marker("ceo"), ceo_speaks_then_delegates())
        .agent(marker("vp-ops"), vp_ops_after_a_pause())
        .agent(marker("support"), support_asks_approval());
    let (_llm, org) = TestOrg::scripted(script).sections(WEB).start().await;

    let keyless = OpcRun::start(&org.config_path(), &[]);
    browser.navigate(&keyless.url("/")).await.unwrap();
    browser
        .wait_for(
            &format!("!document.getElementById('banner').hidden && document.getElementById('banner').textContent.startsWith('{KEY_VAR} is not set')"),
            WAIT,
        )
        .await
        .unwrap();
    browser.navigate(&keyless.url("/admin#org")).await.unwrap();
    browser
        .wait_for(
            &format!("(document.querySelector('#provider-list tr[data-provider=llm]') || {{}}).textContent?.includes('{KEY_VAR} is not set')"),
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(keyless.stop().0, Some(0));

    let opc = org.run(&[]);
    browser.navigate(&opc.url("/")).await.unwrap();
    browser
        .wait_for(
            "document.activeElement && document.activeElement.id === 'input' && document.getElementById('banner').hidden",
            WAIT,
        )
        .await
        .unwrap();
    browser.type_text("Refund order 7").await.unwrap();
    browser.press_enter().await.unwrap();
    browser
        .wait_for(
            "document.querySelectorAll('.card button').length === 2",
            WAIT,
        )
        .await
        .unwrap();
    browser
        .eval("[...document.querySelectorAll('.card button')].find(b => b.textContent === 'approve').click()")
        .await
        .unwrap();
    // Read the log in DOM order: the answer is after the card; the CEO's first words are kept.
    let order = "[...document.querySelectorAll('#log > div')].map(d => d.classList.contains('card') ? 'card' : d.querySelector('.body').textContent)";
    browser
        .wait_for(
            &format!("{order}.some(t => t.startsWith('CEO: VP: SUPPORT:') && !t.endsWith('…'))"),
            WAIT,
        )
        .await
        .unwrap();
    let log: Vec<String> = serde_json::from_value(browser.eval(order).await.unwrap()).unwrap();
    let card = log.iter().position(|t| t == "card").unwrap();
    let answer = log
        .iter()
        .position(|t| t.starts_with("CEO: VP: SUPPORT:"))
        .unwrap();
    assert!(card < answer, "the answer is below the card: {log:?}");
    assert!(
        log.iter().any(|t| t == "Let me check with operations."),
        "the CEO's first words are kept: {log:?}"
    );
    assert_eq!(log[0], "Refund order 7");
    // The trace reads in words.
    browser
        .wait_for(
            "document.getElementById('trace-list').textContent.includes('ceo delegated to vp-ops')",
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(opc.stop().0, Some(0));
}
