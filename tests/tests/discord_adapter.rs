//! The Discord adapter against the fake Discord over loopback: gateway (READY, messages,
//! interactions), REST (posts, threads, edits, cards, follow-ups), the signed HTTP interactions
//! endpoint, and a refused token; the connection's life: one Discord closes for good is opened
//! again (a node alone), and an open abandoned or dropped while READY is awaited leaves no
//! websocket behind. The inbox is a plain channel; no gateway, no agents.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use opc_adapters::discord::{DiscordAdapter, DiscordConfig};
use opc_adapters::{
    Action, Adapter, AdapterError, Card, CardState, Command, Inbound, InboundKind, Place, Platform,
    Visibility,
};
use opc_tests::fake_discord::{Author, CHANNEL_ID, FakeDiscord, GUILD_ID, USER_ID};
use opc_tests::wait::{WAIT, wait_until};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const APPROVER_ROLE: &str = "1400000000000000001";

async fn connect(
    fake: &FakeDiscord,
    public_key: Option<String>,
) -> (Arc<DiscordAdapter>, mpsc::Receiver<Inbound>) {
    let (tx, rx) = mpsc::channel(64);
    let config = DiscordConfig {
        bot_token: fake.bot_token(),
        public_key,
        application_id: None,
        api_base_url: fake.api_url(),
    };
    let adapter = DiscordAdapter::connect(config, tx).await.expect("connect");
    (adapter, rx)
}

async fn next(rx: &mut mpsc::Receiver<Inbound>) -> Inbound {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("an inbound event in time")
        .expect("inbox open")
}

/// Nothing more arrives for a while (used after a sentinel event, to show earlier ones were dropped).
async fn nothing_more(rx: &mut mpsc::Receiver<Inbound>) {
    let extra = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await;
    assert!(extra.is_err(), "unexpected inbound: {extra:?}");
}

fn card(approval: i64) -> Card {
    Card {
        approval,
        agent: "cfo".into(),
        role: "CFO".into(),
        path: vec!["ceo".into(), "cfo".into()],
        summary: "Pay the invoice of @everyone?".into(),
        options: vec!["Approve".into(), "Reject".into(), "Ask later".into()],
        go_ahead: Some(0),
        state: CardState::Pending,
    }
}

fn mention_place(message: &str) -> Place {
    Place {
        platform: Platform::Discord,
        workspace: GUILD_ID.into(),
        channel: CHANNEL_ID.into(),
        thread: message.into(),
    }
}

#[tokio::test]
async fn connects_after_ready_and_registers_the_commands() {
    let fake = FakeDiscord::start().await;
    let (adapter, _rx) = connect(&fake, None).await;
    assert_eq!(adapter.bot_user_id(), Some(fake.bot_user_id()));
    assert_eq!(adapter.application_id(), Some(fake.application_id()));

    let identify = fake.identifies();
    assert_eq!(identify.len(), 1, "one IDENTIFY");
    // GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT
    assert_eq!(
        identify[0]["intents"],
        json!((1 << 9) | (1 << 12) | (1 << 15))
    );

    let put = fake
        .wait_for_call(
            "PUT",
            &format!("/api/v10/applications/{}/commands", fake.application_id()),
            |c| c.status == 200,
            WAIT,
        )
        .await
        .expect("commands registered");
    assert!(put.authorized);
    let commands = put.body.as_array().unwrap();
    assert_eq!(commands.len(), 5);
    let names: Vec<&str> = commands
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["status", "agents", "tasks", "cancel", "help"]);
    let cancel = &commands[3]["options"][0];
    assert_eq!(
        (&cancel["name"], &cancel["type"], &cancel["required"]),
        (&json!("task"), &json!(3), &json!(true))
    );
    assert!(
        fake.calls().iter().all(|c| c.authorized),
        "every call carries the bot token"
    );
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_mention_starts_a_conversation_and_thread_messages_follow_it() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    let bot = fake.bot_user_id();
    let alice = Author::user(USER_ID, "alice");

    let mention = fake.dispatch_message_create(
        CHANNEL_ID,
        Some(GUILD_ID),
        &alice,
        &format!("<@{bot}>  what is   our runway? <@!{bot}>"),
        true,
    );
    let event = next(&mut rx).await;
    assert_eq!(event.place, mention_place(&mention));
    assert_eq!(event.user.id, USER_ID);
    assert_eq!(
        event.kind,
        InboundKind::Mention {
            text: "what is our runway?".into(),
            continues: Some(CHANNEL_ID.into()),
        }
    );

    // A message in the conversation's thread (its channel id is the mention's id).
    fake.dispatch_message_create(&mention, Some(GUILD_ID), &alice, "and next year?", false);
    let event = next(&mut rx).await;
    assert_eq!(
        event.kind,
        InboundKind::Message {
            text: "and next year?".into(),
            continues: mention.clone(),
        }
    );

    // The bot's own messages and other bots' never arrive.
    fake.dispatch_message_create(
        &mention,
        Some(GUILD_ID),
        &Author::bot(&bot, "opc-bot"),
        "my own answer",
        false,
    );
    fake.dispatch_message_create(
        &mention,
        Some(GUILD_ID),
        &Author::bot("1500000000000000001", "other-bot"),
        &format!("<@{bot}> hi"),
        true,
    );
    // The gateway delivers dispatches in order: once the sentinel arrives, the two before it were seen.
    fake.dispatch_message_create(&mention, Some(GUILD_ID), &alice, "sentinel", false);
    let event = next(&mut rx).await;
    assert!(matches!(event.kind, InboundKind::Message { ref text, .. } if text == "sentinel"));
    nothing_more(&mut rx).await;
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_direct_message_lives_in_the_dm_channel() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    let dm = "1600000000000000001";
    fake.dispatch_message_create(dm, None, &Author::user(USER_ID, "alice"), "hello", false);
    let event = next(&mut rx).await;
    assert_eq!(event.place.workspace, "@me");
    assert_eq!(
        (event.place.channel.as_str(), event.place.thread.as_str()),
        (dm, dm)
    );
    assert_eq!(
        event.kind,
        InboundKind::Mention {
            text: "hello".into(),
            continues: Some(dm.into()),
        }
    );
    // Posting there starts no thread.
    let posted = adapter.post(&event.place, "hi").await.unwrap();
    assert_eq!(posted.channel, dm);
    assert!(
        fake.calls_matching("POST", "/api/v10/channels/*/messages/*/threads")
            .is_empty()
    );
    adapter.shutdown().await;
}

#[tokio::test]
async fn posting_in_a_mention_place_starts_its_thread_once() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    let mention = fake.dispatch_message_create(
        CHANNEL_ID,
        Some(GUILD_ID),
        &Author::user(USER_ID, "alice"),
        &format!("<@{}> plan the offsite", fake.bot_user_id()),
        true,
    );
    let place = next(&mut rx).await.place;

    let first = adapter.post(&place, "On it @everyone").await.unwrap();
    let second = adapter.post(&place, "Done.").await.unwrap();
    let card = adapter.post_card(&place, &card(1)).await.unwrap();
    for posted in [&first, &second, &card] {
        assert_eq!(posted.channel, mention, "posted into the thread");
    }
    let threads = fake.calls_matching(
        "POST",
        &format!("/api/v10/channels/{CHANNEL_ID}/messages/{mention}/threads"),
    );
    assert_eq!(threads.len(), 1, "thread started once");
    assert_eq!(threads[0].body["name"], "plan the offsite");
    let posts = fake.calls_matching("POST", &format!("/api/v10/channels/{mention}/messages"));
    assert_eq!(posts.len(), 3);
    for post in &posts {
        assert_eq!(post.body["allowed_mentions"], json!({"parse": []}));
    }

    // After a restart the adapter does not know the thread: Discord says 160004, it posts anyway.
    adapter.shutdown().await;
    let (again, _rx2) = connect(&fake, None).await;
    let third = again.post(&place, "Still here").await.unwrap();
    assert_eq!(third.channel, mention);
    let threads = fake.calls_matching("POST", "/api/v10/channels/*/messages/*/threads");
    assert_eq!(threads.len(), 2);
    assert_eq!(threads[1].status, 400);
    again.shutdown().await;
}

#[tokio::test]
async fn edits_replace_the_text() {
    let fake = FakeDiscord::start().await;
    let (adapter, _rx) = connect(&fake, None).await;
    let place = Place {
        platform: Platform::Discord,
        workspace: GUILD_ID.into(),
        channel: CHANNEL_ID.into(),
        thread: CHANNEL_ID.into(),
    };
    let posted = adapter.post(&place, "draft …").await.unwrap();
    adapter.edit(&posted, "final answer").await.unwrap();
    assert_eq!(fake.message(&posted.id).unwrap()["content"], "final answer");
    let edit = fake
        .calls_matching(
            "PATCH",
            &format!("/api/v10/channels/{CHANNEL_ID}/messages/{}", posted.id),
        )
        .pop()
        .unwrap();
    assert_eq!(edit.body["allowed_mentions"], json!({"parse": []}));
    assert_eq!(adapter.max_message_len(), 2000);
    assert!(adapter.edit_interval() >= Duration::from_secs(1));
    assert!(
        !adapter
            .render("hi @everyone and @here")
            .contains("@everyone")
    );

    // Editing something unknown is a clear API error.
    let mut missing = posted.clone();
    missing.id = "1999999999999999999".into();
    let error = adapter.edit(&missing, "x").await.unwrap_err();
    assert!(matches!(error, AdapterError::Api { .. }), "{error}");
    assert!(error.to_string().contains("10008"), "{error}");
    adapter.shutdown().await;
}

#[tokio::test]
async fn cards_have_buttons_until_decided() {
    let fake = FakeDiscord::start().await;
    let (adapter, _rx) = connect(&fake, None).await;
    let place = mention_place(CHANNEL_ID);
    let mut pending = card(42);
    let posted = adapter.post_card(&place, &pending).await.unwrap();
    let message = fake.message(&posted.id).unwrap();
    let buttons: Vec<&Value> = message["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row["components"].as_array().unwrap())
        .collect();
    assert_eq!(buttons.len(), 3);
    for (i, button) in buttons.iter().enumerate() {
        assert_eq!(button["type"], 2);
        assert_eq!(button["custom_id"], pending.button_id(i));
        assert_eq!(button["label"], pending.options[i]);
        assert_eq!(
            Action::decode(button["custom_id"].as_str().unwrap()),
            Some(Action::Decide {
                approval: 42,
                option: i
            })
        );
    }
    let text = message["embeds"][0]["description"].as_str().unwrap();
    assert!(text.contains("Pay the invoice"));
    assert!(!text.contains("@everyone"), "mentions neutralised");

    pending.state = CardState::Decided {
        option: "Approve".into(),
        by: "alice".into(),
        at: "2025-01-01T00:00:00Z".into(),
        approved: true,
    };
    adapter.update_card(&posted, &pending).await.unwrap();
    let message = fake.message(&posted.id).unwrap();
    assert_eq!(message["components"], json!([]));
    assert!(
        message["embeds"][0]["description"]
            .as_str()
            .unwrap()
            .contains("decided by alice")
    );
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_button_click_is_acknowledged_then_delivered_with_roles() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    let pending = card(7);
    let posted = adapter
        .post_card(&mention_place(CHANNEL_ID), &pending)
        .await
        .unwrap();
    let interaction = fake.dispatch_component(
        &posted.channel,
        &posted.id,
        &pending.button_id(1),
        USER_ID,
        &[APPROVER_ROLE],
    );
    let event = next(&mut rx).await;
    // The deferred update was sent before the event was handed on.
    let callbacks = fake.callbacks();
    let callback = callbacks
        .iter()
        .find(|c| c.interaction_id == interaction)
        .expect("acknowledged before delivery");
    assert_eq!(callback.body, json!({"type": 6}));
    assert_eq!(
        event.kind,
        InboundKind::Action {
            action: Action::Decide {
                approval: 7,
                option: 1
            },
            card: posted.clone(),
        }
    );
    assert_eq!(event.user.id, USER_ID);
    assert_eq!(event.user.roles, vec![APPROVER_ROLE.to_string()]);
    assert_eq!(event.place.workspace, GUILD_ID);
    // The key a cluster checks once more across its nodes: the interaction's id.
    assert_eq!(event.delivery, Some(format!("discord:i{interaction}")));

    // The clicker can be answered (ephemeral follow-up).
    adapter
        .respond(
            &event.reply,
            "Only approvers can decide.",
            Visibility::Ephemeral,
        )
        .await
        .unwrap();
    let followup = fake
        .wait_for_call("POST", "/api/v10/webhooks/*/*", |_| true, WAIT)
        .await
        .unwrap();
    assert_eq!(followup.body["flags"], 64);
    adapter.shutdown().await;
}

#[tokio::test]
async fn slash_commands_are_deferred_then_answered() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    let interaction = fake.dispatch_command("status", &[], &[]);
    let event = next(&mut rx).await;
    assert_eq!(event.kind, InboundKind::Command(Command::Status));
    let callback = fake
        .callbacks()
        .into_iter()
        .find(|c| c.interaction_id == interaction)
        .expect("deferred before delivery");
    assert_eq!(callback.body, json!({"type": 5, "data": {"flags": 64}}));

    // The first answer replaces the "thinking…" message the deferral showed (ephemeral, as deferred).
    adapter
        .respond(&event.reply, "No active tasks.", Visibility::Ephemeral)
        .await
        .unwrap();
    let edits = fake.calls_matching(
        "PATCH",
        &format!(
            "/api/v10/webhooks/{}/*/messages/@original",
            fake.application_id()
        ),
    );
    assert_eq!(edits.len(), 1, "one edit of @original");
    assert_eq!(edits[0].status, 200);
    assert_eq!(edits[0].body["content"], "No active tasks.");
    assert!(
        fake.calls_matching("POST", "/api/v10/webhooks/*/*")
            .is_empty(),
        "no follow-up relied on to replace the loading message"
    );
    // A later answer is a follow-up.
    adapter
        .respond(&event.reply, "One more thing.", Visibility::Ephemeral)
        .await
        .unwrap();
    let followups = fake.calls_matching("POST", "/api/v10/webhooks/*/*");
    assert_eq!(followups.len(), 1);
    assert_eq!(
        (followups[0].status, &followups[0].body["flags"]),
        (200, &json!(64))
    );

    fake.dispatch_command("cancel", &[("task", "t-17")], &[APPROVER_ROLE]);
    let event = next(&mut rx).await;
    assert_eq!(
        event.kind,
        InboundKind::Command(Command::Cancel("t-17".into()))
    );
    assert_eq!(event.user.roles, vec![APPROVER_ROLE.to_string()]);
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_plain_message_is_answered_in_its_channel() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    let id = fake.dispatch_message_create(
        CHANNEL_ID,
        Some(GUILD_ID),
        &Author::user(USER_ID, "alice"),
        &format!("<@{}> help", fake.bot_user_id()),
        true,
    );
    let event = next(&mut rx).await;
    adapter
        .respond(&event.reply, "Busy, try later.", Visibility::Ephemeral)
        .await
        .unwrap();
    let reply = fake
        .wait_for_call(
            "POST",
            &format!("/api/v10/channels/{CHANNEL_ID}/messages"),
            |_| true,
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(reply.body["message_reference"]["message_id"], json!(id));
    assert_eq!(reply.body["allowed_mentions"]["parse"], json!([]));
    adapter.shutdown().await;
}

async fn serve(adapter: &Arc<DiscordAdapter>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/discord/interactions",
        listener.local_addr().unwrap()
    );
    let router = adapter.routes();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    url
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

#[tokio::test]
async fn the_http_endpoint_accepts_only_signed_interactions() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, Some(fake.public_key_hex())).await;
    let url = serve(&adapter).await;
    let client = http();

    // Signed command: 200 with the deferred response, and delivered.
    let (_, body) = fake.command_interaction("agents", &[], &[]);
    let body = serde_json::to_vec(&body).unwrap();
    let (timestamp, signature) = fake.sign(&body);
    let answer = client
        .post(&url)
        .header("X-Signature-Ed25519", &signature)
        .header("X-Signature-Timestamp", &timestamp)
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer, json!({"type": 5, "data": {"flags": 64}}));
    let event = next(&mut rx).await;
    assert_eq!(event.kind, InboundKind::Command(Command::Agents));

    // Tampered body, missing signature: 401, nothing delivered.
    let (_, other) = fake.command_interaction("tasks", &[], &[]);
    let tampered = serde_json::to_vec(&other).unwrap();
    let answer = client
        .post(&url)
        .header("X-Signature-Ed25519", &signature)
        .header("X-Signature-Timestamp", &timestamp)
        .body(tampered.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    let answer = client.post(&url).body(tampered).send().await.unwrap();
    assert_eq!(answer.status(), 401);
    nothing_more(&mut rx).await;

    // PING → PONG.
    let ping = serde_json::to_vec(&fake.ping_interaction()).unwrap();
    let (timestamp, signature) = fake.sign(&ping);
    let answer = client
        .post(&url)
        .header("X-Signature-Ed25519", signature)
        .header("X-Signature-Timestamp", timestamp)
        .body(ping)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.json::<Value>().await.unwrap(), json!({"type": 1}));
    adapter.shutdown().await;
}

#[tokio::test]
async fn without_a_public_key_there_is_no_http_endpoint() {
    let fake = FakeDiscord::start().await;
    let (adapter, _rx) = connect(&fake, None).await;
    let url = serve(&adapter).await;
    let answer = http().post(&url).body("{}").send().await.unwrap();
    assert_eq!(answer.status(), 404);
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_bad_token_is_refused_clearly() {
    let fake = FakeDiscord::start().await;
    let (tx, _rx) = mpsc::channel(4);
    let config = DiscordConfig {
        bot_token: "wrong-secret-token".into(),
        public_key: None,
        application_id: None,
        api_base_url: fake.api_url(),
    };
    let error = match DiscordAdapter::connect(config, tx).await {
        Ok(_) => panic!("a bad token must not connect"),
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(matches!(error, AdapterError::Api { .. }), "{text}");
    assert!(text.contains("401"), "{text}");
    assert!(!text.contains("wrong-secret-token"), "token leaked: {text}");
    assert!(
        fake.identifies().is_empty(),
        "no gateway session with a bad token"
    );
}

#[tokio::test]
async fn a_mention_inside_a_thread_a_person_started_lives_in_that_thread() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    let alice = Author::user(USER_ID, "alice");
    for thread in [
        fake.start_thread(CHANNEL_ID, "budget questions"),
        fake.start_forum_post("how do I get a refund?"),
    ] {
        fake.dispatch_message_create(
            &thread,
            Some(GUILD_ID),
            &alice,
            &format!("<@{}> what is our runway?", fake.bot_user_id()),
            true,
        );
        let event = next(&mut rx).await;
        assert_eq!(
            (event.place.channel.as_str(), event.place.thread.as_str()),
            (thread.as_str(), thread.as_str()),
            "the thread is the conversation's place"
        );
        assert_eq!(
            event.kind,
            InboundKind::Mention {
                text: "what is our runway?".into(),
                continues: Some(thread.clone()),
            }
        );
        let answer = adapter.post(&event.place, "18 months.").await.unwrap();
        let card = adapter.post_card(&event.place, &card(3)).await.unwrap();
        assert_eq!(
            (answer.channel.as_str(), card.channel.as_str()),
            (thread.as_str(), thread.as_str())
        );
        assert_eq!(fake.message(&answer.id).unwrap()["content"], "18 months.");
    }
    assert!(
        fake.calls_matching("POST", "/api/v10/channels/*/messages/*/threads")
            .is_empty(),
        "no thread started inside a thread"
    );
    // The channel's type was asked once per channel.
    assert_eq!(fake.calls_matching("GET", "/api/v10/channels/*").len(), 2);
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_refused_thread_falls_back_to_answering_where_the_mention_was() {
    let fake = FakeDiscord::start().await;
    let (adapter, _rx) = connect(&fake, None).await;
    // A place as an adapter that could not learn the channel's type makes it: the mention's id as
    // the thread, inside a thread a person started. Discord refuses the thread (50024).
    let thread = fake.start_thread(CHANNEL_ID, "ops");
    let mention = "1300000000000000999";
    let place = Place {
        platform: Platform::Discord,
        workspace: GUILD_ID.into(),
        channel: thread.clone(),
        thread: mention.into(),
    };
    let answer = adapter.post(&place, "Here is the plan.").await.unwrap();
    let card = adapter.post_card(&place, &card(5)).await.unwrap();
    let refused = fake.calls_matching("POST", "/api/v10/channels/*/messages/*/threads");
    assert_eq!(refused.len(), 1, "tried once, then remembered");
    assert_eq!(refused[0].status, 400);
    for posted in [&answer, &card] {
        assert_eq!(posted.channel, thread, "answered where the mention was");
        assert_eq!(
            fake.message(&posted.id).unwrap()["message_reference"]["message_id"],
            json!(mention),
            "as a reply to the mention"
        );
    }
    // Streaming edits of the fallback answer work as usual.
    adapter
        .edit(&answer, "Here is the final plan.")
        .await
        .unwrap();
    assert_eq!(
        fake.message(&answer.id).unwrap()["content"],
        "Here is the final plan."
    );
    adapter.shutdown().await;
}

#[tokio::test]
async fn replies_to_http_interactions_find_their_webhook() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, Some(fake.public_key_hex())).await;
    let url = serve(&adapter).await;

    // A slash command: its reply (an edit of @original) is accepted, so Discord had the deferral.
    let (_, command) = fake.command_interaction("status", &[], &[]);
    let (answer, (event, replied)) =
        tokio::join!(fake.deliver_interaction(&url, &command), async {
            let event = next(&mut rx).await;
            let replied = adapter
                .respond(&event.reply, "Nothing is running.", Visibility::Ephemeral)
                .await;
            (event, replied)
        });
    assert_eq!(answer, (200, json!({"type": 5, "data": {"flags": 64}})));
    assert_eq!(event.kind, InboundKind::Command(Command::Status));
    replied.expect("the reply found the interaction's webhook");

    // A button: its follow-up is accepted too.
    let posted = adapter
        .post_card(&mention_place(CHANNEL_ID), &card(9))
        .await
        .unwrap();
    let (_, click) =
        fake.component_interaction(CHANNEL_ID, &posted.id, &card(9).button_id(0), USER_ID, &[]);
    let (answer, (event, replied)) = tokio::join!(fake.deliver_interaction(&url, &click), async {
        let event = next(&mut rx).await;
        let replied = adapter
            .respond(
                &event.reply,
                "Only approvers can decide.",
                Visibility::Ephemeral,
            )
            .await;
        (event, replied)
    });
    assert_eq!(answer, (200, json!({"type": 6})));
    assert!(matches!(event.kind, InboundKind::Action { .. }));
    replied.expect("the follow-up found the interaction's webhook");
    let followup = fake.calls_matching("POST", "/api/v10/webhooks/*/*");
    assert_eq!((followup.len(), followup[0].status), (1, 200));
    adapter.shutdown().await;
}

fn config_for(fake: &FakeDiscord) -> DiscordConfig {
    DiscordConfig {
        bot_token: fake.bot_token(),
        public_key: None,
        application_id: None,
        api_base_url: fake.api_url(),
    }
}

/// Wait until the adapter says its gateway connection is open.
async fn until_open(adapter: &DiscordAdapter) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !adapter.gateway_open().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway connection is not open after {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_gateway_discord_closes_for_good_is_opened_again() {
    let fake = FakeDiscord::start().await;
    let (adapter, mut rx) = connect(&fake, None).await;
    // 4014 (disallowed intents): serenity's client does not reconnect after it, and stops.
    assert_eq!(fake.close_sessions(4014), 1, "one ready session to close");
    wait_until(WAIT, "a second IDENTIFY after the close", || {
        fake.identifies().len() >= 2
    })
    .await;
    until_open(&adapter).await;
    let dm = "1600000000000000009";
    fake.dispatch_message_create(dm, None, &Author::user(USER_ID, "alice"), "again", false);
    let event = next(&mut rx).await;
    assert!(
        matches!(event.kind, InboundKind::Mention { ref text, .. } if text == "again"),
        "{event:?}"
    );
    assert_eq!(fake.identifies().len(), 2, "opened again once");
    // Shut down, it stays closed: the connection goes and nothing opens it again.
    adapter.shutdown().await;
    wait_until(WAIT, "no gateway websocket left after shutdown", || {
        fake.open_sockets() == 0
    })
    .await;
    assert!(!adapter.gateway_open().await);
    assert_eq!(fake.identifies().len(), 2);
}

#[tokio::test]
async fn an_open_abandoned_or_dropped_before_ready_leaves_no_connection() {
    let fake = FakeDiscord::start().await;
    let (tx, _rx) = mpsc::channel(64);
    let adapter = DiscordAdapter::standby(config_for(&fake), tx)
        .await
        .expect("standby");
    fake.withhold_ready();

    // Abandoned (the cluster's hold is lost) once IDENTIFY is in: an error, and no websocket left.
    let identified = |n: usize| {
        let fake = &fake;
        async move {
            wait_until(WAIT, "an IDENTIFY", || fake.identifies().len() >= n).await;
        }
    };
    let opened = tokio::time::timeout(WAIT, adapter.open_gateway_unless(identified(1)))
        .await
        .expect("the open ends once abandoned");
    let error = opened.expect_err("an abandoned open is an error");
    assert!(error.to_string().contains("abandoned"), "{error}");
    assert!(!adapter.gateway_open().await);
    wait_until(WAIT, "the abandoned websocket closed", || {
        fake.open_sockets() == 0
    })
    .await;

    // Dropped (its caller went away) once IDENTIFY is in: no websocket left either.
    tokio::select! {
        opened = adapter.open_gateway() => panic!("READY is withheld, yet the open ended: {opened:?}"),
        () = identified(2) => {}
    }
    wait_until(WAIT, "the dropped open's websocket closed", || {
        fake.open_sockets() == 0
    })
    .await;
    assert!(!adapter.gateway_open().await);

    // With READY sent again, an open works.
    fake.release_ready();
    adapter.open_gateway().await.expect("open");
    assert!(adapter.gateway_open().await);
    assert_eq!(fake.identifies().len(), 3);
    assert_eq!(fake.open_sockets(), 1);
    adapter.shutdown().await;
}
