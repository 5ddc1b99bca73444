//! The web chat adapter end to end over loopback: its JSON API and event stream (reqwest), and its page
//! in headless Chromium. A small echo consumer of the inbox plays the gateway: a mention is answered by
//! a streamed reply, a progress event and an approval card; a decision updates the card and is answered
//! with a notice; a command is answered with a notice; the message `trace words` is answered with a
//! progress event of every kind the engine sends, for the page's trace wording.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use futures_util::StreamExt;
use opc_adapters::web::{WebChat, WebConfig};
use opc_adapters::{Action, Adapter, Card, CardState, Command, Inbound, InboundKind, Platform};
use opc_tests::browser::Browser;
use opc_tests::wait::{Deadline, WAIT};
use serde_json::{Value, json};
use tokio::sync::mpsc;

struct Chat {
    base: String,
    adapter: Arc<WebChat>,
    http: reqwest::Client,
    /// Every inbound event the echo consumer received, in order.
    seen: mpsc::UnboundedReceiver<Inbound>,
}

/// Serve a web chat on 127.0.0.1 with an echo consumer behind its inbox.
async fn start(token: Option<&str>) -> Chat {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (inbox, rx) = mpsc::channel(64);
    let adapter = WebChat::new(
        WebConfig {
            title: "OPC <test>".to_string(),
            database: opc_adapters::web::WebDatabase::Memory,
        },
        inbox,
    )
    .unwrap();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(echo(adapter.clone(), rx, seen_tx));
    let adapter = adapter.clone();
    let base = serve(&adapter, token).await;
    Chat {
        base,
        adapter,
        http: reqwest::Client::new(),
        seen,
    }
}

/// Serve the adapter's pages as the gateway does: behind the access token when there is one.
async fn serve(adapter: &Arc<WebChat>, token: Option<&str>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bound = listener.local_addr().unwrap();
    let base = format!("http://{bound}");
    let names = opc_adapters::pages::Names::new(bound, None).unwrap();
    let routes = opc_adapters::pages::protect(adapter.pages(), token.map(str::to_string), names);
    tokio::spawn(async move { axum::serve(listener, routes).await.unwrap() });
    base
}

/// The gateway stand-in.
async fn echo(
    adapter: Arc<WebChat>,
    mut inbox: mpsc::Receiver<Inbound>,
    seen: mpsc::UnboundedSender<Inbound>,
) {
    let mut next_approval = 100;
    let mut cards = std::collections::HashMap::new();
    while let Some(inbound) = inbox.recv().await {
        let _ = seen.send(inbound.clone());
        match &inbound.kind {
            InboundKind::Mention { text, .. } if text == "trace words" => {
                for event in every_trace_kind() {
                    adapter.progress(&inbound.place, &event).await;
                }
            }
            InboundKind::Mention { text, .. } => {
                let place = &inbound.place;
                let answer = format!("echo: {text}");
                let posted = adapter.post(place, "…").await.unwrap();
                let chars: Vec<char> = answer.chars().collect();
                for cut in [chars.len() / 3, 2 * chars.len() / 3] {
                    let partial: String = chars[..cut].iter().collect();
                    adapter
                        .edit(&posted, &format!("{partial} …"))
                        .await
                        .unwrap();
                }
                adapter.edit(&posted, &answer).await.unwrap();
                // Streamed tokens are not kept for the trace; delegation is.
                adapter
                    .progress(
                        place,
                        &json!({"event": "token", "task": 1, "agent": "ceo", "text": "x"}),
                    )
                    .await;
                adapter
                    .progress(
                        place,
                        &json!({"event": "delegated", "task": 1, "child": 2, "from": "ceo", "to": "vp-eng"}),
                    )
                    .await;
                next_approval += 1;
                let card = Card {
                    approval: next_approval,
                    agent: "vp-eng".to_string(),
                    role: "VP Engineering".to_string(),
                    path: vec!["ceo".to_string(), "vp-eng".to_string()],
                    summary: "Deploy to **production**?".to_string(),
                    options: vec!["Approve".to_string(), "Reject".to_string()],
                    go_ahead: Some(0),
                    state: CardState::Pending,
                };
                adapter.post_card(place, &card).await.unwrap();
                cards.insert(next_approval, card);
            }
            InboundKind::Action {
                action: Action::Decide { approval, option },
                card: posted,
            } => {
                let mut card = cards[approval].clone();
                card.state = CardState::Decided {
                    option: card.options[*option].clone(),
                    by: inbound.user.name.clone(),
                    at: "2026-01-01T00:00:00Z".to_string(),
                    approved: *option == 0,
                };
                adapter.update_card(posted, &card).await.unwrap();
                adapter
                    .respond(
                        &inbound.reply,
                        "decision recorded",
                        opc_adapters::Visibility::Ephemeral,
                    )
                    .await
                    .unwrap();
            }
            InboundKind::Command(command) => {
                adapter
                    .respond(
                        &inbound.reply,
                        &format!("command {command:?}"),
                        opc_adapters::Visibility::Ephemeral,
                    )
                    .await
                    .unwrap();
            }
            InboundKind::Message { .. } => {}
        }
    }
}

/// A progress event of each kind the engine publishes (tokens aside, which the trace does not keep),
/// with the line the page shows for it.
fn every_trace_kind() -> Vec<Value> {
    vec![
        json!({"event": "task_created", "task": 1, "parent": null, "root": 1, "conversation": "c", "agent": "ceo"}),
        json!({"event": "agent_started", "task": 1, "agent": "ceo"}),
        json!({"event": "privacy_masked", "task": 1, "agent": "ceo", "mode": "mask", "counts": {"EMAIL": 1, "PERSON_NAME": 1}, "total": 2, "routed_to": null}),
        json!({"event": "delegated", "task": 1, "child": 2, "from": "ceo", "to": "vp-eng"}),
        json!({"event": "task_created", "task": 2, "parent": 1, "root": 1, "conversation": "c", "agent": "vp-eng"}),
        json!({"event": "tool_called", "task": 2, "agent": "vp-eng", "tool": "memory_read"}),
        json!({"event": "tool_finished", "task": 2, "agent": "vp-eng", "tool": "bash", "duration_ms": 2500, "outcome": "error", "exit_code": 2, "detail": "cargo"}),
        json!({"event": "privacy_masked", "task": 2, "agent": "vp-eng", "mode": "route", "counts": {"IBAN": 1}, "total": 1, "routed_to": "local/llama"}),
        json!({"event": "privacy_blocked", "task": 2, "agent": "vp-eng", "kind": "CREDIT_CARD"}),
        json!({"event": "escalated", "task": 2, "agent": "vp-eng", "kind": "timeout", "reason": "no answer in 5m"}),
        json!({"event": "approval_requested", "approval": 7, "task": 2, "conversation": "c", "agent": "vp-eng", "path": ["ceo", "vp-eng"], "summary": "Deploy?", "options": ["approve", "reject"]}),
        json!({"event": "approval_resolved", "approval": 7, "task": 2, "decision": "approve", "by": "operator"}),
        json!({"event": "agent_finished", "task": 2, "agent": "vp-eng", "state": "COMPLETED", "text": "done", "tokens_in": 1, "tokens_out": 1, "cost_usd": 0.5, "duration_ms": 1500}),
        json!({"event": "config_reloaded", "generation": 2, "trigger": "file", "agents": 7}),
        json!({"event": "config_rejected", "trigger": "file", "errors": 1}),
        json!({"event": "some_future_kind", "task": 1}),
    ]
}

/// The trace lines the page shows for [`every_trace_kind`], in order.
const TRACE_WORDS: [&str; 16] = [
    "request #1 started with ceo",
    "ceo started on task #1",
    "masked 2 personal values (1 email, 1 person name) before ceo's model call",
    "ceo delegated to vp-eng (task #2)",
    "task #2 created for vp-eng",
    "vp-eng used the tool memory_read",
    "vp-eng's bash (cargo) finished: error, exit 2, 2.5 s",
    "sent vp-eng's model call to local/llama: it carried 1 personal value (1 iban)",
    "stopped vp-eng's model call: it still carried a real credit card value, so nothing was sent",
    "vp-eng escalated after a timeout: no answer in 5m",
    "vp-eng asks for approval #7",
    "approval #7 decided: approve, by operator",
    "vp-eng finished (completed, 1.5 s, $0.5000)",
    "the config was reloaded (generation 2)",
    "a config change was refused (1 error)",
    "some future kind",
];

/// Server-sent events read off a streaming response body.
struct Events {
    body: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>,
    >,
    buffer: String,
}

impl Events {
    async fn open(chat: &Chat, id: &str) -> Events {
        let response = chat
            .http
            .get(format!("{}/api/conversations/{id}/events", chat.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Events {
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    /// The next event: its name and JSON data. Comments (keep-alives) are skipped.
    async fn next(&mut self) -> (String, Value) {
        self.next_by(&Deadline::after(WAIT, "the next event")).await
    }

    /// [`Events::next`] by `deadline`: one deadline for the whole read, so the keep-alives the server
    /// sends every 15 s cannot extend it.
    async fn next_by(&mut self, deadline: &Deadline) -> (String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let mut name = "message".to_string();
                let mut data = String::new();
                for line in frame.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim().to_string();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.strip_prefix(' ').unwrap_or(value));
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return (name, serde_json::from_str(&data).unwrap());
            }
            let chunk = deadline
                .run(self.body.next())
                .await
                .expect("event stream ended")
                .unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Skip events until one named `name`.
    async fn skip_to(&mut self, name: &str) -> Value {
        let deadline = Deadline::after(WAIT, format!("a `{name}` event"));
        loop {
            let (got, data) = self.next_by(&deadline).await;
            if got == name {
                return data;
            }
        }
    }

    async fn expect(&mut self, name: &str) -> Value {
        let (got, data) = self.next().await;
        assert_eq!(got, name, "expected a `{name}` event, got `{got}`: {data}");
        data
    }
}

impl Chat {
    async fn create(&self, body: Option<Value>) -> String {
        // `{}` when there is nothing to say: a change is always JSON (the listener refuses others).
        let response = self
            .http
            .post(format!("{}/api/conversations", self.base))
            .json(&body.unwrap_or_else(|| json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.unwrap();
        let id = body["id"].as_str().unwrap().to_string();
        assert_eq!(id.len(), 16);
        id
    }

    async fn send(&self, id: &str, text: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/api/conversations/{id}/messages", self.base))
            .json(&json!({ "text": text }))
            .send()
            .await
            .unwrap()
    }

    async fn decide(&self, approval: i64, option: usize) -> reqwest::Response {
        self.decide_with(approval, json!(option)).await
    }

    /// Decide with `option` as given: an index or a label.
    async fn decide_with(&self, approval: i64, option: Value) -> reqwest::Response {
        self.http
            .post(format!("{}/api/approvals/{approval}", self.base))
            .json(&json!({ "option": option }))
            .send()
            .await
            .unwrap()
    }

    async fn banner(&self) -> Value {
        let response = self
            .http
            .get(format!("{}/api/banner", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.json::<Value>().await.unwrap()["banner"].clone()
    }

    async fn next_seen(&mut self) -> Inbound {
        tokio::time::timeout(WAIT, self.seen.recv())
            .await
            .expect("no inbound in time")
            .unwrap()
    }
}

/// Read the events of one echoed exchange: the user message, the streamed answer, trace, card.
async fn expect_exchange(events: &mut Events, text: &str) -> Value {
    let question = events.expect("message").await;
    assert_eq!(question["author"], "user");
    assert_eq!(question["text"], text);
    let answer = events.expect("message").await;
    assert_eq!(answer["author"], "bot");
    assert_eq!(answer["text"], "…");
    let mut last = String::new();
    for _ in 0..3 {
        let edit = events.expect("edit").await;
        assert_eq!(edit["id"], answer["id"]);
        last = edit["text"].as_str().unwrap().to_string();
    }
    assert_eq!(last, format!("echo: {text}"));
    let progress = events.expect("progress").await;
    assert_eq!(
        progress["event"], "delegated",
        "tokens are not in the trace"
    );
    assert_eq!(progress["to"], "vp-eng");
    let card = events.expect("card").await;
    assert_eq!(card["card"]["state"], "Pending");
    assert_eq!(card["card"]["options"], json!(["Approve", "Reject"]));
    card
}

#[tokio::test]
async fn a_conversation_streams_answers_cards_and_decisions_in_order() {
    let mut chat = start(None).await;
    let id = chat.create(None).await;
    let mut events = Events::open(&chat, &id).await;
    events.expect("reset").await;

    let response = chat.send(&id, "hello *web*").await;
    assert_eq!(response.status(), 202);
    let inbound = chat.next_seen().await;
    assert_eq!(
        inbound.kind,
        InboundKind::Mention {
            text: "hello *web*".to_string(),
            continues: Some(id.clone())
        }
    );
    assert_eq!(inbound.place.platform, Platform::Web);
    assert_eq!(inbound.place.workspace, "web");
    assert_eq!(inbound.place.channel, id);
    assert_eq!(inbound.place.thread, id);
    assert_eq!(inbound.user.id, id, "each conversation is its own user");
    assert_eq!(inbound.user.name, "operator");

    let card = expect_exchange(&mut events, "hello *web*").await;
    let approval = card["card"]["approval"].as_i64().unwrap();

    let response = chat.decide(approval, 1).await;
    assert_eq!(response.status(), 202);
    let inbound = chat.next_seen().await;
    match inbound.kind {
        InboundKind::Action {
            action,
            card: posted,
        } => {
            assert_eq!(
                action,
                Action::Decide {
                    approval,
                    option: 1
                }
            );
            assert_eq!(posted.channel, id);
            assert_eq!(posted.id, card["id"].as_str().unwrap());
        }
        other => panic!("expected an action, got {other:?}"),
    }
    let update = events.expect("card_update").await;
    assert_eq!(update["id"], card["id"]);
    assert_eq!(update["card"]["state"]["Decided"]["option"], "Reject");
    assert_eq!(update["card"]["state"]["Decided"]["by"], "operator");
    let notice = events.expect("notice").await;
    assert_eq!(notice["text"], "decision recorded");

    // An option the card does not have is refused, naming the options.
    let response = chat.decide(approval, 5).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("0: \"Approve\", 1: \"Reject\""),
        "{body}"
    );
}

#[tokio::test]
async fn an_approval_is_decided_by_its_label_in_any_case() {
    let mut chat = start(None).await;
    let id = chat.create(Some(json!({"text": "deploy"}))).await;
    chat.next_seen().await;
    let mut events = Events::open(&chat, &id).await;
    let card = events.skip_to("card").await;
    let approval = card["card"]["approval"].as_i64().unwrap();

    for (bad, names) in [
        (json!("maybe"), "\"maybe\""),
        (json!(""), "label"),
        (json!(-1), "label"),
        (json!(true), "label"),
    ] {
        let response = chat.decide_with(approval, bad.clone()).await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.unwrap();
        let error = body["error"].as_str().unwrap();
        assert!(
            error.contains(names) && error.contains("0-based"),
            "{bad}: {error}"
        );
    }
    let unknown: Value = chat
        .decide_with(approval, json!("maybe"))
        .await
        .json()
        .await
        .unwrap();
    assert!(
        unknown["error"]
            .as_str()
            .unwrap()
            .contains("0: \"Approve\", 1: \"Reject\""),
        "the options are listed: {unknown}"
    );

    assert_eq!(
        chat.decide_with(approval, json!("rEJECT")).await.status(),
        202
    );
    match chat.next_seen().await.kind {
        InboundKind::Action { action, .. } => assert_eq!(
            action,
            Action::Decide {
                approval,
                option: 1
            }
        ),
        other => panic!("expected an action, got {other:?}"),
    }
    let update = events.skip_to("card_update").await;
    assert_eq!(update["card"]["state"]["Decided"]["option"], "Reject");
}

#[tokio::test]
async fn the_banner_is_what_the_gateway_set_last() {
    let chat = start(Some("banner-token")).await;
    let refused = chat
        .http
        .get(format!("{}/api/banner", chat.base))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401, "behind the access token");
    let chat = start(None).await;
    assert_eq!(chat.banner().await, Value::Null);
    chat.adapter
        .set_banner(Some("**`KEY` is not set**: set it"));
    assert_eq!(chat.banner().await, "**`KEY` is not set**: set it");
    chat.adapter.set_banner(None);
    assert_eq!(chat.banner().await, Value::Null);
}

#[tokio::test]
async fn a_late_subscriber_gets_the_current_state_replayed() {
    let chat = start(None).await;
    // The first message comes with the creation request.
    let id = chat.create(Some(json!({"text": "first"}))).await;
    let mut live = Events::open(&chat, &id).await;
    live.expect("reset").await;
    // Whatever was already delivered is replayed, the rest arrives live; wait for the card.
    let card = live.skip_to("card").await;
    let approval = card["card"]["approval"].as_i64().unwrap();
    assert_eq!(chat.decide(approval, 0).await.status(), 202);
    live.skip_to("card_update").await;
    live.expect("notice").await;

    // A reload: the messages with their latest text, the card as it is now, the trace.
    let mut replay = Events::open(&chat, &id).await;
    replay.expect("reset").await;
    let question = replay.expect("message").await;
    assert_eq!(
        (question["author"].as_str(), question["text"].as_str()),
        (Some("user"), Some("first"))
    );
    let answer = replay.expect("message").await;
    assert_eq!(answer["text"], "echo: first");
    let card = replay.expect("card").await;
    assert_eq!(card["card"]["state"]["Decided"]["option"], "Approve");
    // Notices are part of the transcript.
    let notice = replay.expect("notice").await;
    assert_eq!(notice["text"], "decision recorded");
    let progress = replay.expect("progress").await;
    assert_eq!(progress["from"], "ceo");

    // And it continues live.
    assert_eq!(chat.send(&id, "second").await.status(), 202);
    expect_exchange(&mut replay, "second").await;
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let chat = start(None).await;
    let response = chat.send("0123456789abcdef", "hello").await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no such conversation")
    );
    let response = chat
        .http
        .get(format!("{}/api/conversations/nope/events", chat.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);

    let id = chat.create(None).await;
    for empty in ["", "   \n"] {
        let response = chat.send(&id, empty).await;
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("empty"), "{body}");
    }
    let response = chat
        .http
        .post(format!("{}/api/conversations/{id}/messages", chat.base))
        .header("content-type", "application/json")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    // The same without the JSON content type is refused before the page reads it.
    let response = chat
        .http
        .post(format!("{}/api/conversations/{id}/messages", chat.base))
        .body("{\"text\": \"hi\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    let response = chat.send(&id, &"x".repeat(40 * 1024)).await;
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("larger than"));

    assert_eq!(chat.decide(4242, 0).await.status(), 404);
}

#[tokio::test]
async fn the_access_token_is_required_on_every_route() {
    let chat = start(Some("s3cret/+token")).await;
    let response = chat
        .http
        .get(format!("{}/", chat.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("Authorization: Bearer") && error.contains("?token="));

    let wrong = chat
        .http
        .post(format!("{}/api/conversations", chat.base))
        .bearer_auth("s3cret/+tokem")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let none = chat
        .http
        .post(format!("{}/api/conversations", chat.base))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 401);

    let response = chat
        .http
        .get(format!("{}/", chat.base))
        .bearer_auth("s3cret/+token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = chat
        .http
        .get(format!("{}/?token=s3cret%2F%2Btoken", chat.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let page = response.text().await.unwrap();
    assert!(page.contains("<title>OPC &lt;test&gt;</title>"));
    assert!(
        page.contains("id=\"org-link\" href=\"/org\""),
        "the page links to the org chart"
    );

    let created = chat
        .http
        .post(format!("{}/api/conversations", chat.base))
        .bearer_auth("s3cret/+token")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // The scheme in any case (RFC 7235: schemes are case-insensitive).
    for scheme in ["bearer", "BEARER"] {
        let response = chat
            .http
            .post(format!("{}/api/conversations", chat.base))
            .header("authorization", format!("{scheme} s3cret/+token"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "{scheme}");
    }
    let id: Value = created.json().await.unwrap();
    let id = id["id"].as_str().unwrap();
    let events = chat
        .http
        .get(format!("{}/api/conversations/{id}/events", chat.base))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 401);
    let events = chat
        .http
        .get(format!(
            "{}/api/conversations/{id}/events?token=s3cret%2F%2Btoken",
            chat.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
}

#[tokio::test]
async fn slash_commands_arrive_as_commands_and_are_answered_with_notices() {
    let mut chat = start(None).await;
    let id = chat.create(None).await;
    let mut events = Events::open(&chat, &id).await;
    events.expect("reset").await;

    assert_eq!(chat.send(&id, "/status").await.status(), 202);
    assert_eq!(
        chat.next_seen().await.kind,
        InboundKind::Command(Command::Status)
    );
    // The command as typed, then its answer.
    let typed = events.expect("message").await;
    assert_eq!(
        (typed["author"].as_str(), typed["text"].as_str()),
        (Some("user"), Some("/status"))
    );
    let notice = events.expect("notice").await;
    assert_eq!(notice["text"], "command Status");

    assert_eq!(chat.send(&id, " /cancel  42 \n").await.status(), 202);
    assert_eq!(
        chat.next_seen().await.kind,
        InboundKind::Command(Command::Cancel("42".to_string()))
    );
    let typed = events.expect("message").await;
    assert_eq!(typed["text"], "/cancel  42", "shown trimmed");
    events.expect("notice").await;

    // A reload replays both in order.
    let mut replay = Events::open(&chat, &id).await;
    replay.expect("reset").await;
    let order: Vec<String> = [
        replay.next().await,
        replay.next().await,
        replay.next().await,
        replay.next().await,
    ]
    .into_iter()
    .map(|(name, data)| format!("{name}: {}", data["text"].as_str().unwrap()))
    .collect();
    assert_eq!(
        order,
        [
            "message: /status",
            "notice: command Status",
            "message: /cancel  42",
            "notice: command Cancel(\"42\")"
        ]
    );
}

#[tokio::test]
async fn a_full_inbox_is_answered_503_with_retry_after() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (inbox, _rx) = mpsc::channel(1);
    let adapter = WebChat::new(
        WebConfig {
            title: "OPC".to_string(),
            database: opc_adapters::web::WebDatabase::Memory,
        },
        inbox,
    )
    .unwrap();
    let base = serve(&adapter, None).await;
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{base}/api/conversations"))
        .json(&json!({"text": "one"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let id: Value = created.json().await.unwrap();
    let response = http
        .post(format!(
            "{base}/api/conversations/{}/messages",
            id["id"].as_str().unwrap()
        ))
        .json(&json!({"text": "two"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
}

#[tokio::test]
async fn the_page_chats_streams_and_decides_in_headless_chromium() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let chat = start(Some("page-token")).await;
    browser
        .navigate(&format!("{}/?token=page-token", chat.base))
        .await
        .unwrap();
    browser
        .wait_for(
            "document.activeElement && document.activeElement.id === 'input'",
            WAIT,
        )
        .await
        .unwrap();

    // Keyboard only: type, Enter.
    browser
        .type_text("hello **browser** <img src=x>")
        .await
        .unwrap();
    browser.press_enter().await.unwrap();
    browser
        .wait_for(
            "[...document.querySelectorAll('.msg.bot .body')].some(e => e.textContent === 'echo: hello browser <img src=x>')",
            WAIT,
        )
        .await
        .unwrap();
    // Markdown rendered, HTML escaped.
    let rendered = browser
        .eval("[document.querySelectorAll('#log strong').length > 0, document.querySelectorAll('#log img').length]")
        .await
        .unwrap();
    assert_eq!(rendered, json!([true, 0]));
    assert_eq!(
        browser
            .eval("document.getElementById('input').value")
            .await
            .unwrap(),
        json!("")
    );
    // The trace shows the delegation; the card its buttons.
    browser
        .wait_for(
            "document.getElementById('trace-list').textContent.includes('ceo delegated to vp-eng (task #2)')",
            WAIT,
        )
        .await
        .unwrap();
    browser
        .wait_for(
            "document.querySelectorAll('.card button').length === 2",
            WAIT,
        )
        .await
        .unwrap();

    // Approve with the keyboard: focus the first button, Enter.
    browser.focus(".card button").await.unwrap();
    browser.press_enter().await.unwrap();
    browser
        .wait_for(
            "(document.querySelector('.card .decision') || {}).textContent === 'Approved: Approve — decided by operator at 2026-01-01T00:00:00Z'",
            WAIT,
        )
        .await
        .unwrap();
    browser
        .wait_for(
            "[...document.querySelectorAll('.notice')].some(e => e.textContent.includes('decision recorded'))",
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(
        browser
            .eval("document.querySelectorAll('.card button').length")
            .await
            .unwrap(),
        json!(0)
    );

    // The page took the token out of the address bar at once (it is not kept in history).
    assert_eq!(
        browser.eval("location.search").await.unwrap(),
        json!(""),
        "?token= stripped"
    );
    // Opened again by the same link (the adapter alone keeps no sign-in session: under `opc run` a
    // reload rides on the session cookie the ?token= page set), the conversation is replayed from
    // the id in the URL's fragment.
    let hash = browser.eval("location.hash").await.unwrap();
    browser
        .navigate(&format!(
            "{}/?token=page-token{}",
            chat.base,
            hash.as_str().unwrap()
        ))
        .await
        .unwrap();
    browser
        .wait_for(
            "location.hash.startsWith('#c=') && document.querySelectorAll('.msg.user').length === 1 && !!document.querySelector('.card .decision')",
            WAIT,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn the_page_shows_the_banner_typed_commands_and_the_trace_in_words() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let chat = start(None).await;
    chat.adapter
        .set_banner(Some("**OPC_KEY is not set**: set it and `restart`"));
    browser.navigate(&format!("{}/", chat.base)).await.unwrap();
    browser
        .wait_for(
            "!document.getElementById('banner').hidden && document.querySelector('#banner strong').textContent === 'OPC_KEY is not set' && document.getElementById('banner').textContent === 'OPC_KEY is not set: set it and restart'",
            WAIT,
        )
        .await
        .unwrap();
    // The gateway clears it (a reload fixed the provider): the next send reads it again.
    chat.adapter.set_banner(None);

    browser.type_text("/status").await.unwrap();
    browser.press_enter().await.unwrap();
    browser
        .wait_for(
            "(() => { const log = [...document.querySelectorAll('#log > div')]; \
               return log.length === 2 && log[0].matches('.msg.user.command') && log[0].textContent === 'You/status' \
               && log[1].matches('.notice') && log[1].textContent.includes('command Status'); })()",
            WAIT,
        )
        .await
        .unwrap();
    browser
        .wait_for("document.getElementById('banner').hidden", WAIT)
        .await
        .unwrap();

    browser.type_text("trace words").await.unwrap();
    browser.press_enter().await.unwrap();
    browser
        .wait_for(
            &format!(
                "document.querySelectorAll('#trace-list li').length === {}",
                TRACE_WORDS.len()
            ),
            WAIT,
        )
        .await
        .unwrap();
    let lines = browser
        .eval("[...document.querySelectorAll('#trace-list li')].map(li => li.textContent)")
        .await
        .unwrap();
    assert_eq!(lines, json!(TRACE_WORDS));
}
