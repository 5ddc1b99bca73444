//! `opc run` end to end with Discord: the real binary against the fake Discord (REST + v10 gateway
//! websocket) and the scripted LLM server on loopback — a mention answered in its thread, an approval
//! button refused for a non-approver and accepted for a role approver, `/status` answered through a
//! deferred interaction (its loading message edited); a mention inside a thread a person started and
//! inside a forum post answered in that thread, which holds the conversation.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::fake_discord::{Author, CHANNEL_ID, FakeDiscord, GUILD_ID};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{TestOrg, marker, relay};
use opc_tests::scripted_llm::INPUT_PLACEHOLDER;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::WAIT;
use serde_json::json;

const BOSS_ROLE: &str = "1200000000000000009";

/// The scripted LLM on `script`, and `opc run` on a test org using it with the web chat and Discord (the
/// fake), plus `gateway` config lines.
async fn start_opc(
    discord: &FakeDiscord,
    script: Script,
    gateway: &str,
) -> (ScriptedLlm, TestOrg, OpcRun) {
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  discord:\n    botTokenEnv: OPC_TEST_DISCORD_BOT\n    apiBaseUrl: {}\n{gateway}",
        discord.api_url()
    );
    let (llm, org) = TestOrg::scripted(script).sections(sections).start().await;
    let opc = org.run(&[("OPC_TEST_DISCORD_BOT", &discord.bot_token())]);
    (llm, org, opc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_mention_is_answered_and_its_approval_decided_by_a_role_approver() {
    let discord = FakeDiscord::start().await;
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-ops", "refund", "CEO: "))
        .agent(marker("vp-ops"), relay("support", "refund order 7", "VP: "))
        .agent(
            marker("support"),
            vec![
                Step::tool(
                    "request_approval",
                    json!({"summary": "Refund $120 for order 7"}),
                )
                .with_delay_ms(200),
                Step::text("SUPPORT: done"),
            ],
        );
    let gateway = format!("gateway:\n  approvers: [\"discord:role:{BOSS_ROLE}\"]\n");
    let (_llm, _org, _opc) = start_opc(&discord, script, &gateway).await;

    let mention = format!("<@{}> Refund order 7", discord.bot_user_id());
    let thread = discord.dispatch_message_create(
        CHANNEL_ID,
        Some(GUILD_ID),
        &Author::user("1300000000000000001", "alice"),
        &mention,
        true,
    );

    // The approval card lands in the conversation's thread (started from the mention).
    let card = discord
        .wait_for_call(
            "POST",
            &format!("/api/v10/channels/{thread}/messages"),
            |c| {
                c.body["components"]
                    .as_array()
                    .is_some_and(|rows| !rows.is_empty())
            },
            WAIT,
        )
        .await
        .expect("an approval card in the thread");
    let text = card.body.to_string();
    assert!(
        text.contains("Refund $120 for order 7") && text.contains("vp-ops"),
        "{text}"
    );
    let approve = card.body["components"][0]["components"][0]["custom_id"]
        .as_str()
        .unwrap()
        .to_string();

    // A member without the approver role is refused (ephemeral follow-up).
    discord.dispatch_component(&thread, "1", &approve, "1300000000000000002", &[]);
    let refusal = discord
        .wait_for_call(
            "POST",
            "/api/v10/webhooks/*/*",
            |c| c.body.to_string().contains("Only approvers"),
            WAIT,
        )
        .await
        .expect("refusal");
    assert_eq!(refusal.body["flags"], 64, "ephemeral");

    // A member with the role decides; the card loses its buttons; the answer is posted.
    discord.dispatch_component(&thread, "1", &approve, "1300000000000000003", &[BOSS_ROLE]);
    discord
        .wait_for_call(
            "PATCH",
            "/api/v10/channels/*/messages/*",
            |c| c.body["components"].as_array().is_some_and(Vec::is_empty),
            WAIT,
        )
        .await
        .expect("the card redrawn without buttons");
    let deadline = std::time::Instant::now() + WAIT;
    while !discord
        .calls()
        .iter()
        .any(|c| c.body["content"] == "CEO: VP: SUPPORT: done")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no final answer; calls: {:#?}",
            discord.calls()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // /status through an interaction: deferred at once, answered by editing the loading message.
    let status = discord.dispatch_command("status", &[], &[]);
    let answered = discord
        .wait_for_call(
            "PATCH",
            "/api/v10/webhooks/*/*/messages/@original",
            |c| c.body.to_string().contains("Nothing is running"),
            WAIT,
        )
        .await
        .expect("/status answered");
    assert_eq!(answered.status, 200, "Discord had the deferral first");
    let deferred = discord
        .callbacks()
        .into_iter()
        .find(|c| c.interaction_id == status)
        .expect("a callback for /status");
    assert_eq!(deferred.body["type"], 5, "deferred first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_inside_an_existing_thread_is_answered_there_and_the_thread_continues() {
    let discord = FakeDiscord::start().await;
    let script = Script::new().agent(
        marker("ceo"),
        vec![
            Step::text(format!("Answer to: {INPUT_PLACEHOLDER}")),
            Step::text("Follow-up answered."),
        ],
    );
    let (llm, _org, _opc) = start_opc(&discord, script, "").await;
    let alice = Author::user("1300000000000000001", "alice");
    let bot = discord.bot_user_id();

    // A thread a person started: the answer lands in it.
    let thread = discord.start_thread(CHANNEL_ID, "runway");
    discord.dispatch_message_create(
        &thread,
        Some(GUILD_ID),
        &alice,
        &format!("<@{bot}> What is our runway?"),
        true,
    );
    assert!(
        discord
            .wait_for_message(&thread, "Answer to: What is our runway?", WAIT)
            .await,
        "no answer in the thread; calls: {:#?}",
        discord.calls()
    );
    // The thread is the conversation: a follow-up without a mention continues it.
    discord.dispatch_message_create(&thread, Some(GUILD_ID), &alice, "And next year?", false);
    assert!(
        discord
            .wait_for_message(&thread, "Follow-up answered.", WAIT)
            .await,
        "no follow-up answer; calls: {:#?}",
        discord.calls()
    );
    let ceo = llm.requests_for(&marker("ceo"));
    assert_eq!(ceo.len(), 2, "one LLM call per message");
    assert!(
        ceo[1]
            .user_texts()
            .iter()
            .any(|t| t.contains("What is our runway?")),
        "the follow-up carried the conversation's history"
    );

    // A forum post: the same.
    let post = discord.start_forum_post("refunds");
    discord.dispatch_message_create(
        &post,
        Some(GUILD_ID),
        &alice,
        &format!("<@{bot}> How do refunds work?"),
        true,
    );
    assert!(
        discord
            .wait_for_message(&post, "Answer to: How do refunds work?", WAIT)
            .await,
        "no answer in the forum post; calls: {:#?}",
        discord.calls()
    );
    assert!(
        discord
            .calls_matching("POST", "/api/v10/channels/*/messages/*/threads")
            .is_empty(),
        "no thread started inside a thread"
    );
    assert!(
        discord.calls().iter().all(|c| c.status < 400),
        "Discord refused nothing: {:#?}",
        discord.calls()
    );
}
