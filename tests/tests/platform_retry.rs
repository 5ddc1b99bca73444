//! Retry decisions at the platform seam, over real sockets: a Slack 429 with `Retry-After` is tried
//! again after exactly the wait Slack asked for, and a refusal (a 4xx that will repeat) is not tried
//! again — on Slack (a scripted Web API on 127.0.0.1) and on Discord (the fake Discord). The retry
//! loop is `opc_retry::retry`, the one the gateway's notice delivery runs, and it decides on the
//! adapter's typed error (status, code, retry-after), never on its text.
//!
//! Order and causality only: the retry's recorded wait is the policy's decision, and the second
//! request arrives after the first by at least that wait (a timer never fires early).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use opc_adapters::discord::{DiscordAdapter, DiscordConfig};
use opc_adapters::slack::{SlackAdapter, SlackConfig, SlackMode};
use opc_adapters::{Adapter, AdapterError, Place, Platform, Posted};
use opc_retry::{Jitter, RetryPolicy};
use opc_tests::fake_discord::FakeDiscord;
use serde_json::json;
use tokio::sync::mpsc;

/// Every wait in this file ends by this deadline.
const WAIT: Duration = Duration::from_secs(20);

/// A short policy: were `Retry-After` ignored, the retry would come after 10 ms, not after 1 s.
const POLICY: RetryPolicy = RetryPolicy {
    max_attempts: 3,
    base_delay: Duration::from_millis(10),
    factor: 2,
    max_delay: Duration::from_secs(5),
    jitter: Jitter::None,
};

/// What the scripted Slack answers to `chat.postMessage`, in order (then `ok`).
#[derive(Clone, Copy)]
enum Scripted {
    RateLimited { retry_after_secs: u64 },
    NotFound,
}

#[derive(Default)]
struct Script {
    answers: Mutex<Vec<Scripted>>,
    posts: Mutex<Vec<Instant>>,
}

/// A Slack Web API on 127.0.0.1: `auth.test` as Slack's fixture, `chat.postMessage` as scripted.
async fn scripted_slack(answers: Vec<Scripted>) -> (String, Arc<Script>) {
    let script = Arc::new(Script {
        answers: Mutex::new(answers.into_iter().rev().collect()),
        posts: Mutex::default(),
    });
    let app = axum::Router::new()
        .route("/api/{method}", any(web_api))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/api"), script)
}

async fn web_api(State(script): State<Arc<Script>>, Path(method): Path<String>) -> Response {
    match method.as_str() {
        "auth.test" => axum::Json(json!({
            "ok": true, "team_id": "T111", "user_id": "W11", "bot_id": "B111",
            "url": "https://xyz.slack.com/", "team": "T", "user": "bot",
        }))
        .into_response(),
        "chat.postMessage" => {
            script.posts.lock().unwrap().push(Instant::now());
            match script.answers.lock().unwrap().pop() {
                Some(Scripted::RateLimited { retry_after_secs }) => (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", retry_after_secs.to_string())],
                    axum::Json(json!({"ok": false, "error": "ratelimited"})),
                )
                    .into_response(),
                Some(Scripted::NotFound) => {
                    (StatusCode::NOT_FOUND, "no such method").into_response()
                }
                None => axum::Json(json!({
                    "ok": true, "channel": "C1", "ts": "1700000000.000001",
                    "message": {
                        "type": "message", "user": "W11", "bot_id": "B111",
                        "ts": "1700000000.000001", "text": "hello",
                    },
                }))
                .into_response(),
            }
        }
        _ => axum::Json(json!({"ok": false, "error": "unknown_method"})).into_response(),
    }
}

async fn slack(api_base_url: String) -> Arc<SlackAdapter> {
    let (tx, _rx) = mpsc::channel(4);
    let config = SlackConfig {
        mode: SlackMode::Http,
        bot_token: "xoxb-test".into(),
        app_token: None,
        signing_secret: Some("secret".into()),
        api_base_url,
    };
    tokio::time::timeout(WAIT, SlackAdapter::connect(config, tx))
        .await
        .expect("connect in time")
        .expect("connect")
}

fn place(platform: Platform, channel: &str) -> Place {
    Place {
        platform,
        workspace: "T111".into(),
        channel: channel.into(),
        thread: channel.into(),
    }
}

/// Post under [`POLICY`], returning the result and the waits the retry loop chose.
async fn post_with_retry(
    adapter: &dyn Adapter,
    place: &Place,
) -> (
    Result<Posted, opc_retry::Failed<AdapterError>>,
    Vec<Duration>,
) {
    let mut waits = Vec::new();
    let result = tokio::time::timeout(
        WAIT,
        opc_retry::retry(
            &POLICY,
            || adapter.post(place, "hello"),
            std::future::pending(),
            |_, delay, _| waits.push(delay),
        ),
    )
    .await
    .expect("the retries end in time");
    (result, waits)
}

#[tokio::test]
async fn a_slack_429_is_retried_after_its_retry_after() {
    let (url, script) = scripted_slack(vec![Scripted::RateLimited {
        retry_after_secs: 1,
    }])
    .await;
    let adapter = slack(url).await;
    let (result, waits) = post_with_retry(adapter.as_ref(), &place(Platform::Slack, "C1")).await;
    result.expect("posted on the second try");
    // The wait was Slack's Retry-After, not the policy's 10 ms.
    assert_eq!(waits, [Duration::from_secs(1)]);
    let posts = script.posts.lock().unwrap().clone();
    assert_eq!(posts.len(), 2, "one retry");
    assert!(posts[1] - posts[0] >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_slack_429_error_is_typed() {
    let (url, _script) = scripted_slack(vec![Scripted::RateLimited {
        retry_after_secs: 7,
    }])
    .await;
    let adapter = slack(url).await;
    let error = adapter
        .post(&place(Platform::Slack, "C1"), "hello")
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(429), "{error}");
    assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_slack_4xx_is_not_retried() {
    let (url, script) = scripted_slack(vec![Scripted::NotFound]).await;
    let adapter = slack(url).await;
    let (result, waits) = post_with_retry(adapter.as_ref(), &place(Platform::Slack, "C1")).await;
    let failed = result.unwrap_err();
    assert_eq!(failed.attempts, 1);
    assert_eq!(failed.error.status(), Some(404), "{}", failed.error);
    assert!(!failed.error.is_retryable());
    assert!(waits.is_empty());
    assert_eq!(script.posts.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_discord_refusal_is_typed_and_not_retried() {
    let fake = FakeDiscord::start().await;
    let (tx, _rx) = mpsc::channel(4);
    let config = DiscordConfig {
        bot_token: fake.bot_token(),
        public_key: None,
        application_id: None,
        api_base_url: fake.api_url(),
    };
    let adapter = tokio::time::timeout(WAIT, DiscordAdapter::connect(config, tx))
        .await
        .expect("connect in time")
        .expect("connect");
    // A channel the fake does not know: 404, Discord code 10003 (Unknown Channel).
    let missing = place(Platform::Discord, "1999999999999999999");
    let before = fake.calls().len();
    let (result, waits) = post_with_retry(adapter.as_ref(), &missing).await;
    let failed = result.unwrap_err();
    assert_eq!(failed.attempts, 1);
    assert!(waits.is_empty());
    assert_eq!(failed.error.status(), Some(404), "{}", failed.error);
    assert_eq!(failed.error.code(), Some(10003), "{}", failed.error);
    assert!(!failed.error.is_retryable());
    let posts = fake.calls()[before..]
        .iter()
        .filter(|c| c.method == "POST")
        .count();
    assert_eq!(posts, 1, "no retry of a refusal");
    adapter.shutdown().await;
}
