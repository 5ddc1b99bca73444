//! The Slack app manifest (`opc slack manifest`) against what the adapter really does on the wire:
//! every outbound operation of the Slack adapter, run against the fake Slack, calls only Web API
//! methods listed in `opc_adapters::slack::manifest::WEB_API_METHODS`, each with the token the list
//! names, and the manifest grants the scope each bot-token call needs. When `../shared/data/slack` is
//! present, the scope listed for each method is also checked against Slack's own Web API spec.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_adapters::slack::manifest::{self, Delivery, Token, WEB_API_METHODS};
use opc_adapters::slack::{SlackAdapter, SlackConfig, SlackMode};
use opc_adapters::{Adapter, Card, CardState, Place, Platform, ReplyHandle, Visibility};
use opc_tests::fake_slack::{FakeSlack, TEAM_ID};
use opc_tests::wait::WAIT;
use serde_json::json;
use tokio::sync::mpsc;

fn card(state: CardState) -> Card {
    Card {
        approval: 3,
        agent: "vp-eng".into(),
        role: "VP Engineering".into(),
        path: vec!["ceo".into(), "vp-eng".into()],
        summary: "Commit two engineers?".into(),
        options: vec!["approve".into(), "reject".into()],
        go_ahead: Some(0),
        state,
    }
}

#[tokio::test]
async fn every_call_the_adapter_makes_is_listed_and_granted_by_the_manifest() {
    let fake = FakeSlack::start().await;
    let (tx, _rx) = mpsc::channel(8);
    let adapter = SlackAdapter::connect(
        SlackConfig {
            mode: SlackMode::Socket,
            bot_token: fake.bot_token(),
            app_token: Some(fake.app_token()),
            signing_secret: None,
            api_base_url: fake.api_url(),
        },
        tx,
    )
    .await
    .expect("connect");
    let place = Place {
        platform: Platform::Slack,
        workspace: TEAM_ID.into(),
        channel: "C1".into(),
        thread: "1700000030.000100".into(),
    };
    // Everything the gateway asks of the adapter: post and stream an answer, post and redraw an
    // approval card, reply to a person (ephemeral and public, by message and by response URL).
    let posted = adapter.post(&place, "working on it").await.unwrap();
    adapter.edit(&posted, "done").await.unwrap();
    let pending = adapter
        .post_card(&place, &card(CardState::Pending))
        .await
        .unwrap();
    adapter
        .update_card(
            &pending,
            &card(CardState::Decided {
                option: "approve".into(),
                by: "alice".into(),
                at: "2026-01-02T03:04:05Z".into(),
                approved: true,
            }),
        )
        .await
        .unwrap();
    let reply =
        ReplyHandle(json!({"channel": "C1", "user": "U9", "thread_ts": "1700000030.000100"}));
    adapter
        .respond(&reply, "only you", Visibility::Ephemeral)
        .await
        .unwrap();
    adapter
        .respond(&reply, "everyone", Visibility::Public)
        .await
        .unwrap();
    let hooked = ReplyHandle(json!({"channel": "C1", "user": "U9",
        "response_url": fake.response_url("r1")}));
    adapter
        .respond(&hooked, "via the hook", Visibility::Ephemeral)
        .await
        .unwrap();
    assert!(
        fake.wait_for_call("response_url", |_| true, WAIT)
            .await
            .is_some()
    );
    adapter.shutdown().await;

    let granted = manifest::bot_scopes();
    let mut seen: Vec<&str> = Vec::new();
    for call in fake.calls() {
        if call.method == "response_url" {
            continue; // a webhook Slack hands out with the event: no token, no scope
        }
        let listed = WEB_API_METHODS
            .iter()
            .find(|m| m.name == call.method)
            .unwrap_or_else(|| {
                panic!(
                    "the adapter called {}, which WEB_API_METHODS does not list",
                    call.method
                )
            });
        let expected = match listed.token {
            Token::Bot => fake.bot_token(),
            Token::App => fake.app_token(),
        };
        assert_eq!(
            call.token.as_deref(),
            Some(expected.as_str()),
            "{}",
            call.method
        );
        if listed.token == Token::Bot
            && let Some(scope) = listed.scope
        {
            assert!(granted.contains(&scope), "{} needs {scope}", call.method);
        }
        seen.push(listed.name);
    }
    for method in WEB_API_METHODS {
        assert!(
            seen.contains(&method.name),
            "{} is listed but never called: remove it, or cover it here",
            method.name
        );
    }
    // The manifest printed for Socket Mode carries exactly these scopes.
    let printed = manifest::manifest("Org", &Delivery::Socket);
    assert_eq!(printed["oauth_config"]["scopes"]["bot"], json!(granted));
}

/// Each listed scope is the one Slack's Web API spec names for the method (the spec excerpt in
/// `../shared/data/slack`; skipped with a note when it is absent, a failure under CI).
#[test]
fn listed_scopes_agree_with_slacks_spec() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/slack/openapi_web_api_excerpt.json");
    let read = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()));
    let Some(text) = opc_testgate::need(
        opc_testgate::Group::SharedData,
        "listed_scopes_agree_with_slacks_spec",
        read,
    ) else {
        return;
    };
    let spec: serde_json::Value = serde_json::from_str(&text).expect("spec parses");
    let mut checked = 0;
    for method in WEB_API_METHODS {
        let Some(operation) = spec["paths"][format!("/{}", method.name)]
            .as_object()
            .and_then(|ops| ops.values().next())
        else {
            continue;
        };
        let required = operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["description"].as_str())
            .find_map(|d| d.split("Requires scope: `").nth(1))
            .and_then(|rest| rest.split('`').next())
            .filter(|scope| *scope != "none");
        assert_eq!(required, method.scope, "{}", method.name);
        checked += 1;
    }
    assert!(
        checked >= 3,
        "the spec covers chat.postMessage, chat.update, …"
    );
}
