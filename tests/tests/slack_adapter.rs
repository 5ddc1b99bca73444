//! The Slack adapter against the fake Slack over loopback: Socket Mode (acks, retries, reconnects),
//! the signed HTTP Events API, and the Web API calls behind posting, editing, cards and replies.
//!
//! The inbox is a plain `mpsc` channel: no gateway, no agents. "Delivered once" is checked without
//! timing: after the duplicate, a sentinel event is sent, and the next thing in the inbox must be the
//! sentinel (each transport hands events on in the order it reads them).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use opc_adapters::slack::{SlackAdapter, SlackConfig, SlackMode};
use opc_adapters::{
    Action, Adapter, AdapterError, Card, CardState, Command, Inbound, InboundKind, Place, Platform,
    Posted, ReplyHandle, User, Visibility,
};
use opc_tests::fake_slack::{
    self, BOT_USER_ID, FakeSlack, TEAM_ID, app_mention, block_actions, envelope, own_message,
    redelivery, slash_command, thread_message,
};
use opc_tests::wait::WAIT;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

fn config(fake: &FakeSlack, mode: SlackMode) -> SlackConfig {
    SlackConfig {
        mode,
        bot_token: fake.bot_token(),
        app_token: Some(fake.app_token()),
        signing_secret: Some(SECRET.to_string()),
        api_base_url: fake.api_url(),
    }
}

async fn socket_adapter(
    fake: &FakeSlack,
    capacity: usize,
) -> (
    Arc<SlackAdapter>,
    mpsc::Sender<Inbound>,
    mpsc::Receiver<Inbound>,
) {
    let (tx, rx) = mpsc::channel(capacity);
    let adapter = SlackAdapter::connect(config(fake, SlackMode::Socket), tx.clone())
        .await
        .expect("connect");
    assert!(fake.wait_for_connections(1, WAIT).await, "socket opened");
    (adapter, tx, rx)
}

async fn recv(rx: &mut mpsc::Receiver<Inbound>) -> Inbound {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("an inbound event in time")
        .expect("inbox open")
}

fn mention_text(inbound: &Inbound) -> &str {
    match &inbound.kind {
        InboundKind::Mention { text, .. } => text,
        other => panic!("expected a mention, got {other:?}"),
    }
}

/// Push a mention envelope and return the text it should arrive with.
async fn push_sentinel(fake: &FakeSlack, word: &str) -> String {
    let body = app_mention(
        "C1",
        "U1",
        &format!("<@{BOT_USER_ID}> {word}"),
        "1700000900.000001",
        None,
    );
    fake.push_envelope(envelope("events_api", body, 0)).await;
    word.to_string()
}

#[tokio::test]
async fn socket_mention_is_acked_before_the_inbox_is_drained() {
    let fake = FakeSlack::start().await;
    let (adapter, _tx, mut rx) = socket_adapter(&fake, 8).await;

    let body = app_mention(
        "C1",
        "U1",
        &format!("<@{BOT_USER_ID}> what is the status?"),
        "1700000001.000100",
        None,
    );
    let id = fake.push_envelope(envelope("events_api", body, 0)).await;
    // Nothing has read the inbox yet: the ack cannot depend on the consumer.
    let ack = fake.wait_for_ack(&id, WAIT).await.expect("acked");
    assert_eq!(ack.frame, json!({"envelope_id": id}));

    let inbound = recv(&mut rx).await;
    assert_eq!(
        inbound.place,
        Place {
            platform: Platform::Slack,
            workspace: TEAM_ID.into(),
            channel: "C1".into(),
            thread: "1700000001.000100".into(),
        }
    );
    assert_eq!(inbound.user.id, "U1");
    assert_eq!(
        inbound.kind,
        InboundKind::Mention {
            text: "what is the status?".into(),
            continues: None
        }
    );

    // Inside a thread: continues that thread, and the place is the thread.
    let body = app_mention(
        "C1",
        "U1",
        &format!("<@{BOT_USER_ID}> and now?"),
        "1700000002.000200",
        Some("1700000001.000100"),
    );
    fake.push_envelope(envelope("events_api", body, 0)).await;
    let inbound = recv(&mut rx).await;
    assert_eq!(inbound.place.thread, "1700000001.000100");
    assert_eq!(
        inbound.kind,
        InboundKind::Mention {
            text: "and now?".into(),
            continues: Some("1700000001.000100".into())
        }
    );
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_full_inbox_still_acks_at_once() {
    let fake = FakeSlack::start().await;
    let (adapter, tx, mut rx) = socket_adapter(&fake, 1).await;
    let filler = Inbound {
        place: Place {
            platform: Platform::Slack,
            workspace: TEAM_ID.into(),
            channel: "C0".into(),
            thread: "0".into(),
        },
        user: User {
            id: "U0".into(),
            name: "U0".into(),
            roles: vec![],
        },
        reply: ReplyHandle(Value::Null),
        kind: InboundKind::Message {
            text: "filler".into(),
            continues: "0".into(),
        },
        delivery: None,
        traceparent: None,
    };
    tx.send(filler.clone()).await.unwrap();

    let body = app_mention("C1", "U1", "<@W11> flood", "1700000003.000100", None);
    let id = fake.push_envelope(envelope("events_api", body, 0)).await;
    assert!(fake.wait_for_ack(&id, WAIT).await.is_some(), "acked");
    // The socket loop is not stuck on the full inbox: the event was dropped, later ones flow.
    assert_eq!(recv(&mut rx).await, filler);
    let word = push_sentinel(&fake, "after-flood").await;
    assert_eq!(mention_text(&recv(&mut rx).await), word);
    adapter.shutdown().await;
}

#[tokio::test]
async fn a_redelivered_event_reaches_the_inbox_once() {
    let fake = FakeSlack::start().await;
    let (adapter, _tx, mut rx) = socket_adapter(&fake, 8).await;

    let body = app_mention("C1", "U1", "<@W11> once", "1700000004.000100", None);
    let first = envelope("events_api", body, 0);
    let first_id = fake.push_envelope(first.clone()).await;
    // Slack's redelivery: same event_id, a new envelope, retry_attempt 1.
    let mut again = redelivery(&first, 1);
    again["envelope_id"] = json!("retry-envelope-1");
    let again_id = fake.push_envelope(again).await;
    assert!(fake.wait_for_ack(&first_id, WAIT).await.is_some());
    assert!(
        fake.wait_for_ack(&again_id, WAIT).await.is_some(),
        "a redelivery is acked too"
    );

    let event = recv(&mut rx).await;
    assert_eq!(mention_text(&event), "once");
    // The key a cluster checks once more across its nodes: the event's id.
    let event_id = first["payload"]["event_id"].as_str().unwrap();
    assert_eq!(event.delivery, Some(format!("slack:event:{event_id}")));
    let word = push_sentinel(&fake, "sentinel").await;
    assert_eq!(
        mention_text(&recv(&mut rx).await),
        word,
        "the redelivery was not handed on"
    );
    adapter.shutdown().await;
}

#[tokio::test]
async fn thread_messages_arrive_and_the_bots_own_do_not() {
    let fake = FakeSlack::start().await;
    let (adapter, _tx, mut rx) = socket_adapter(&fake, 8).await;
    let thread = "1700000010.000100";

    // Ignored: our own reply, a reply that mentions us (app_mention covers it), a top-level message,
    // an edit.
    for body in [
        own_message("C1", "my own answer", "1700000011.000100", thread),
        thread_message(
            "C1",
            "U1",
            "<@W11> with mention",
            "1700000012.000100",
            thread,
        ),
        {
            let mut top = thread_message("C1", "U1", "top level", "1700000013.000100", thread);
            top["event"].as_object_mut().unwrap().remove("thread_ts");
            top
        },
        {
            let mut edit = thread_message("C1", "U1", "edited", "1700000014.000100", thread);
            edit["event"]["subtype"] = json!("message_changed");
            edit
        },
    ] {
        fake.push_envelope(envelope("events_api", body, 0)).await;
    }
    let body = thread_message("C1", "U2", "a follow-up", "1700000015.000100", thread);
    fake.push_envelope(envelope("events_api", body, 0)).await;

    let inbound = recv(&mut rx).await;
    assert_eq!(
        inbound.kind,
        InboundKind::Message {
            text: "a follow-up".into(),
            continues: thread.into()
        }
    );
    assert_eq!(inbound.place.thread, thread);
    assert_eq!(inbound.user.id, "U2");
    adapter.shutdown().await;
}

#[tokio::test]
async fn block_actions_become_actions_and_respond_uses_the_response_url() {
    let fake = FakeSlack::start().await;
    let (adapter, _tx, mut rx) = socket_adapter(&fake, 8).await;
    let action_id = Action::Decide {
        approval: 42,
        option: 1,
    }
    .encode();
    let url = fake.response_url("action-1");
    let payload = block_actions(
        "C1",
        "U2",
        "1700000020.000100",
        Some("1700000019.000100"),
        &action_id,
        &url,
    );
    let id = fake
        .push_envelope(envelope("interactive", payload, 0))
        .await;
    assert!(fake.wait_for_ack(&id, WAIT).await.is_some());

    let inbound = recv(&mut rx).await;
    assert_eq!(
        inbound.kind,
        InboundKind::Action {
            action: Action::Decide {
                approval: 42,
                option: 1
            },
            card: Posted {
                platform: Platform::Slack,
                channel: "C1".into(),
                id: "1700000020.000100".into(),
            },
        }
    );
    assert_eq!(inbound.place.thread, "1700000019.000100");
    assert_eq!(inbound.user.id, "U2");
    assert_eq!(inbound.user.name, "U2-name");

    adapter
        .respond(
            &inbound.reply,
            "Only approvers can decide.",
            Visibility::Ephemeral,
        )
        .await
        .unwrap();
    let call = fake
        .wait_for_call("response_url", |_| true, WAIT)
        .await
        .expect("response_url called");
    assert_eq!(call.path, "/hooks/commands/T111/action-1/secret");
    assert_eq!(call.params["response_type"], "ephemeral");
    assert_eq!(call.params["text"], "Only approvers can decide.");
    adapter.shutdown().await;
}

#[tokio::test]
async fn slash_commands_become_commands() {
    let fake = FakeSlack::start().await;
    let (adapter, _tx, mut rx) = socket_adapter(&fake, 8).await;
    let url = fake.response_url("cmd-1");
    for (command, text) in [("/opc", "status"), ("/status", ""), ("/opc", "cancel 17")] {
        let payload = slash_command("C1", "U1", command, text, &url);
        let id = fake
            .push_envelope(envelope("slash_commands", payload, 0))
            .await;
        assert!(fake.wait_for_ack(&id, WAIT).await.is_some());
    }
    let first = recv(&mut rx).await;
    assert_eq!(first.kind, InboundKind::Command(Command::Status));
    assert_eq!(first.place.channel, "C1");
    assert_eq!(first.user.name, "U1-name");
    assert_eq!(
        recv(&mut rx).await.kind,
        InboundKind::Command(Command::Status)
    );
    assert_eq!(
        recv(&mut rx).await.kind,
        InboundKind::Command(Command::Cancel("17".into()))
    );

    adapter
        .respond(&first.reply, "*2 tasks* running", Visibility::Public)
        .await
        .unwrap();
    let call = fake
        .wait_for_call("response_url", |_| true, WAIT)
        .await
        .expect("response_url called");
    assert_eq!(call.params["response_type"], "in_channel");
    assert_eq!(call.params["text"], "*2 tasks* running");
    adapter.shutdown().await;
}

fn card(state: CardState) -> Card {
    Card {
        approval: 7,
        agent: "ops".into(),
        role: "VP Operations".into(),
        path: vec!["ceo".into(), "ops".into()],
        summary: "Spend **$5,000** on ads?".into(),
        options: vec!["Approve".into(), "Reject".into()],
        go_ahead: Some(0),
        state,
    }
}

#[tokio::test]
async fn outbound_operations_make_the_right_web_api_calls() {
    let fake = FakeSlack::start().await;
    let (tx, _rx) = mpsc::channel(8);
    let adapter = SlackAdapter::connect(config(&fake, SlackMode::Http), tx)
        .await
        .unwrap();
    assert_eq!(adapter.max_message_len(), 3000);
    assert_eq!(adapter.render("**hi** <x>"), "*hi* &lt;x&gt;");
    let place = Place {
        platform: Platform::Slack,
        workspace: TEAM_ID.into(),
        channel: "C1".into(),
        thread: "1700000030.000100".into(),
    };

    let posted = adapter.post(&place, "working on it …").await.unwrap();
    let call = fake
        .wait_for_call("chat.postMessage", |_| true, WAIT)
        .await
        .unwrap();
    assert_eq!(call.token.as_deref(), Some(fake.bot_token().as_str()));
    assert_eq!(call.params["channel"], "C1");
    assert_eq!(call.params["thread_ts"], "1700000030.000100");
    assert_eq!(call.params["text"], "working on it …");
    assert_eq!(posted.channel, "C1");
    assert!(!posted.id.is_empty());

    adapter.edit(&posted, "done").await.unwrap();
    let call = fake
        .wait_for_call("chat.update", |_| true, WAIT)
        .await
        .unwrap();
    assert_eq!(call.params["channel"], "C1");
    assert_eq!(call.params["ts"], posted.id.as_str());
    assert_eq!(call.params["text"], "done");

    let pending = card(CardState::Pending);
    let card_msg = adapter.post_card(&place, &pending).await.unwrap();
    let call = fake
        .wait_for_call("chat.postMessage", |p| p.get("blocks").is_some(), WAIT)
        .await
        .unwrap();
    assert_eq!(call.params["thread_ts"], "1700000030.000100");
    let blocks = call.params["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "section");
    assert_eq!(blocks[0]["text"]["type"], "mrkdwn");
    assert!(
        blocks[0]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("*$5,000*")
    );
    assert_eq!(blocks[1]["type"], "actions");
    let buttons = blocks[1]["elements"].as_array().unwrap();
    assert_eq!(buttons.len(), 2);
    for (i, button) in buttons.iter().enumerate() {
        assert_eq!(button["type"], "button");
        assert_eq!(button["action_id"], pending.button_id(i));
        assert_eq!(
            Action::decode(button["action_id"].as_str().unwrap()),
            Some(Action::Decide {
                approval: 7,
                option: i
            })
        );
    }
    assert_eq!(buttons[0]["text"]["text"], "Approve");
    assert_eq!(buttons[0]["style"], "primary");
    assert!(buttons[1].get("style").is_none());
    assert!(
        call.params["text"]
            .as_str()
            .unwrap()
            .contains("Approval needed")
    );

    let decided = card(CardState::Decided {
        option: "Approve".into(),
        by: "alice".into(),
        at: "2026-01-02T03:04:05Z".into(),
        approved: true,
    });
    adapter.update_card(&card_msg, &decided).await.unwrap();
    let call = fake
        .wait_for_call("chat.update", |p| p.get("blocks").is_some(), WAIT)
        .await
        .unwrap();
    assert_eq!(call.params["ts"], card_msg.id.as_str());
    let blocks = call.params["blocks"].as_array().unwrap();
    assert!(blocks.iter().all(|b| b["type"] != "actions"), "no buttons");
    let context = blocks.iter().find(|b| b["type"] == "context").unwrap();
    let line = context["elements"][0]["text"].as_str().unwrap();
    assert!(
        line.contains("decided by alice at 2026-01-02T03:04:05Z"),
        "{line}"
    );

    // A message's reply handle: ephemeral → chat.postEphemeral; public → in the thread.
    let reply =
        ReplyHandle(json!({"channel": "C1", "user": "U9", "thread_ts": "1700000030.000100"}));
    adapter
        .respond(&reply, "only you", Visibility::Ephemeral)
        .await
        .unwrap();
    let call = fake
        .wait_for_call("chat.postEphemeral", |_| true, WAIT)
        .await
        .unwrap();
    assert_eq!(call.params["channel"], "C1");
    assert_eq!(call.params["user"], "U9");
    assert_eq!(call.params["thread_ts"], "1700000030.000100");
    assert_eq!(call.params["text"], "only you");
    adapter
        .respond(&reply, "everyone", Visibility::Public)
        .await
        .unwrap();
    assert!(
        fake.wait_for_call("chat.postMessage", |p| p["text"] == "everyone", WAIT)
            .await
            .is_some()
    );
    assert!(matches!(
        adapter
            .respond(&ReplyHandle(json!({})), "x", Visibility::Public)
            .await,
        Err(AdapterError::Invalid(_))
    ));
}

#[tokio::test]
async fn a_disconnect_envelope_reconnects_and_shutdown_closes() {
    let fake = FakeSlack::start().await;
    let (adapter, _tx, mut rx) = socket_adapter(&fake, 8).await;
    fake.send_disconnect().await;
    assert!(fake.wait_for_connections(2, WAIT).await, "reconnected");
    assert_eq!(fake.calls_of("apps.connections.open").len(), 2);
    let word = push_sentinel(&fake, "after-reconnect").await;
    assert_eq!(mention_text(&recv(&mut rx).await), word);

    adapter.shutdown().await;
    assert!(fake.wait_for_no_socket(WAIT).await, "socket closed");
}

#[tokio::test]
async fn bad_tokens_and_modes_fail_connect_clearly() {
    let fake = FakeSlack::start().await;
    let (tx, _rx) = mpsc::channel(8);

    let mut bad_bot = config(&fake, SlackMode::Socket);
    bad_bot.bot_token = "xoxb-not-the-right-one".into();
    let error = SlackAdapter::connect(bad_bot, tx.clone())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, AdapterError::Invalid(_)), "{message}");
    assert!(
        message.contains("invalid_auth") && message.contains("bot token"),
        "{message}"
    );
    assert!(!message.contains("xoxb-not-the-right-one"));

    let mut bad_app = config(&fake, SlackMode::Socket);
    bad_app.app_token = Some("xapp-wrong".into());
    let message = SlackAdapter::connect(bad_app, tx.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("app-level token") && !message.contains("xapp-wrong"),
        "{message}"
    );

    let mut no_app = config(&fake, SlackMode::Socket);
    no_app.app_token = None;
    let error = SlackAdapter::connect(no_app, tx.clone()).await.unwrap_err();
    assert!(matches!(&error, AdapterError::Invalid(m) if m.contains("app-level token")));

    let mut no_secret = config(&fake, SlackMode::Http);
    no_secret.signing_secret = None;
    let error = SlackAdapter::connect(no_secret, tx.clone())
        .await
        .unwrap_err();
    assert!(matches!(&error, AdapterError::Invalid(m) if m.contains("signing secret")));
}

// ---------------------------------------------------------------------------------------------
// HTTP mode.

struct HttpSetup {
    _fake: FakeSlack,
    adapter: Arc<SlackAdapter>,
    rx: mpsc::Receiver<Inbound>,
    base: String,
    client: reqwest::Client,
    _server: tokio::task::JoinHandle<()>,
}

async fn http_setup() -> HttpSetup {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeSlack::start().await;
    let (tx, rx) = mpsc::channel(16);
    let adapter = SlackAdapter::connect(config(&fake, SlackMode::Http), tx)
        .await
        .unwrap();
    assert_eq!(fake.connections(), 0, "no socket in HTTP mode");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = adapter.routes();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    HttpSetup {
        _fake: fake,
        adapter,
        rx,
        base,
        client: reqwest::Client::new(),
        _server: server,
    }
}

impl HttpSetup {
    async fn post(
        &self,
        route: &str,
        content_type: &str,
        body: &str,
        headers: Vec<(String, String)>,
    ) -> reqwest::Response {
        let mut request = self
            .client
            .post(format!("{}{route}", self.base))
            .header("content-type", content_type)
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send().await.unwrap()
    }

    async fn event(&self, body: &str, headers: Vec<(String, String)>) -> reqwest::Response {
        self.post("/slack/events", "application/json", body, headers)
            .await
    }
}

#[tokio::test]
async fn http_events_are_verified_before_anything_is_delivered() {
    let mut setup = http_setup().await;
    let now = fake_slack::now_unix();

    // url_verification is answered with the challenge.
    let challenge = json!({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        "type": "url_verification"})
    .to_string();
    let response = setup
        .event(
            &challenge,
            fake_slack::signed_headers(SECRET, now, &challenge),
        )
        .await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );

    // A correctly signed event: 200 and delivered.
    let body = app_mention("C1", "U1", "<@W11> over http", "1700000040.000100", None).to_string();
    let signed = fake_slack::signed_headers(SECRET, now, &body);
    let response = setup.event(&body, signed.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(mention_text(&recv(&mut setup.rx).await), "over http");

    // Forged, stale and unsigned requests: 401, not delivered.
    let forged = app_mention("C1", "U1", "<@W11> forged", "1700000041.000100", None).to_string();
    let response = setup
        .event(
            &forged,
            fake_slack::signed_headers("not-the-secret", now, &forged),
        )
        .await;
    assert_eq!(response.status(), 401);
    let stale = app_mention("C1", "U1", "<@W11> stale", "1700000042.000100", None).to_string();
    let response = setup
        .event(
            &stale,
            fake_slack::signed_headers(SECRET, now - 600, &stale),
        )
        .await;
    assert_eq!(response.status(), 401);
    let unsigned =
        app_mention("C1", "U1", "<@W11> unsigned", "1700000043.000100", None).to_string();
    assert_eq!(setup.event(&unsigned, vec![]).await.status(), 401);
    // A body swapped under valid headers.
    assert_eq!(setup.event(&forged, signed.clone()).await.status(), 401);

    // The same signed request captured and sent again: a replay, refused.
    assert_eq!(setup.event(&body, signed.clone()).await.status(), 401);
    // Slack's retry of the valid request is signed anew: 200, not delivered again.
    let mut retry = fake_slack::signed_headers(SECRET, now + 1, &body);
    retry.push(("x-slack-retry-num".into(), "1".into()));
    retry.push(("x-slack-retry-reason".into(), "http_timeout".into()));
    assert_eq!(setup.event(&body, retry).await.status(), 200);

    let sentinel =
        app_mention("C1", "U1", "<@W11> sentinel", "1700000044.000100", None).to_string();
    let response = setup
        .event(
            &sentinel,
            fake_slack::signed_headers(SECRET, now, &sentinel),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        mention_text(&recv(&mut setup.rx).await),
        "sentinel",
        "nothing refused or retried was delivered"
    );
    setup.adapter.shutdown().await;
}

#[tokio::test]
async fn http_interactions_and_commands_are_verified_and_delivered() {
    let mut setup = http_setup().await;
    let now = fake_slack::now_unix();
    let form = "application/x-www-form-urlencoded";

    let action_id = Action::Decide {
        approval: 5,
        option: 0,
    }
    .encode();
    let payload = block_actions(
        "C2",
        "U3",
        "1700000050.000100",
        None,
        &action_id,
        "http://127.0.0.1:9/hooks/x",
    );
    let body = fake_slack::interaction_form(&payload);
    let response = setup.post("/slack/interactions", form, &body, vec![]).await;
    assert_eq!(response.status(), 401, "unsigned interaction refused");
    let response = setup
        .post(
            "/slack/interactions",
            form,
            &body,
            fake_slack::signed_headers(SECRET, now, &body),
        )
        .await;
    assert_eq!(response.status(), 200);
    let inbound = recv(&mut setup.rx).await;
    assert_eq!(
        inbound.kind,
        InboundKind::Action {
            action: Action::Decide {
                approval: 5,
                option: 0
            },
            card: Posted {
                platform: Platform::Slack,
                channel: "C2".into(),
                id: "1700000050.000100".into()
            },
        }
    );
    assert_eq!(inbound.place.thread, "1700000050.000100");

    let command = slash_command("C2", "U3", "/opc", "agents", "http://127.0.0.1:9/hooks/y");
    let body = fake_slack::form_body(&command);
    let response = setup
        .post(
            "/slack/commands",
            form,
            &body,
            fake_slack::signed_headers("wrong", now, &body),
        )
        .await;
    assert_eq!(response.status(), 401, "forged command refused");
    let response = setup
        .post(
            "/slack/commands",
            form,
            &body,
            fake_slack::signed_headers(SECRET, now, &body),
        )
        .await;
    assert_eq!(response.status(), 200);
    let inbound = recv(&mut setup.rx).await;
    assert_eq!(inbound.kind, InboundKind::Command(Command::Agents));
    assert_eq!(inbound.place.channel, "C2");
    assert_eq!(
        inbound.reply.0["response_url"],
        "http://127.0.0.1:9/hooks/y"
    );
    setup.adapter.shutdown().await;
}
