//! No console open to the internet (issue 34, §7 and the `/admin`·`/api` enumeration of §6), on the
//! real `opc` binary over 127.0.0.1:
//!
//! - `publicUrl` without `accessTokenEnv` fails `opc validate` (exit 1, the key and its line named,
//!   with how to fix it), and `opc run` refuses to start on it;
//! - a request whose `Host` is not the listener's own is answered 421 on every page (chat, console,
//!   their APIs, the event stream), with or without a token, and `publicUrl`'s host is served;
//! - with a token, any path under `/admin` or `/api`, served or not, answers 401 without it, and an
//!   unknown one 404 only with it;
//! - `Forwarded` / `X-Forwarded-Host` count (and are checked) only with `publicUrl` set, from the
//!   loopback peer the proxy is; otherwise they change nothing;
//! - a browser asking for a page without the token is sent to the sign-in page (303), on the public
//!   name; the sign-in page answers only the listener's names, like every page.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::wait::{OutputWithin, WAIT};
use serde_json::Value;

const TOKEN_VAR: &str = "OPC_TEST_WEB_TOKEN";
const TOKEN: &str = "exposure-s3cret";
const PUBLIC_HOST: &str = "opc.example.com";

/// Loopback, no token, no proxy: the default setup.
const LOOPBACK: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";
/// Behind a proxy: `publicUrl` and the token it requires.
const PROXIED: &str = "channels:\n  web:\n    listen: \"127.0.0.1:0\"\n    publicUrl: https://opc.example.com\n    accessTokenEnv: OPC_TEST_WEB_TOKEN\n";

/// An org whose sections are `sections`; no test here reaches the model.
fn org(sections: &str) -> TestOrg {
    TestOrg::with_sections(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Execution::default(),
        sections,
    )
}

fn start(org: &TestOrg) -> OpcRun {
    OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY), (TOKEN_VAR, TOKEN)])
}

/// A request with `headers` (a `host` among them replaces the listener's own): the status and the
/// JSON answer (`Null` when it is none, e.g. a page or an event stream).
async fn call(
    opc: &OpcRun,
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = opc_tests::http_client().request(method.clone(), opc.url(path));
    if method == reqwest::Method::POST {
        request = request
            .header("content-type", "application/json")
            .body("{}");
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = tokio::time::timeout(WAIT, request.send())
        .await
        .unwrap_or_else(|_| panic!("{method} {path} {headers:?}: no answer within {WAIT:?}"))
        .unwrap();
    let status = response.status().as_u16();
    let is_json = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or_default().contains("json"));
    let body = if is_json {
        response.json().await.unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    (status, body)
}

async fn get(opc: &OpcRun, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    call(opc, reqwest::Method::GET, path, headers).await
}

/// A new conversation (as a script opens one: JSON, the listener's own `Host`), with `headers`.
async fn conversation(opc: &OpcRun, headers: &[(&str, &str)]) -> String {
    let (status, body) = call(opc, reqwest::Method::POST, "/api/conversations", headers).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_string()
}

/// A 421 whose reason names `host`.
fn misdirected(status: u16, body: &Value, host: &str, case: &str) {
    assert_eq!(status, 421, "{case}: {body}");
    let reason = body["error"].as_str().unwrap_or_default();
    assert!(
        reason.contains(host) && reason.contains("publicUrl"),
        "{case}: the reason names the host and how to fix it: {reason}"
    );
}

#[test]
fn a_public_url_without_a_token_is_refused_by_validate_and_run() {
    // The test org is checked when it is written, so it is written with the token, then loses it.
    let org = org(PROXIED);
    let config = org.config_path();
    let with_token = std::fs::read_to_string(&config).unwrap();
    let text = with_token.replace("    accessTokenEnv: OPC_TEST_WEB_TOKEN\n", "");
    assert_ne!(text, with_token);
    std::fs::write(&config, &text).unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l.trim_start().starts_with("publicUrl:"))
        .unwrap();

    let out = Command::new(opc_binary())
        .args(["validate", "--config"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .output_within(WAIT)
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "invalid: {stderr}");
    let at = format!("{}:{line}:", config.display());
    for expected in [
        "channels.web.publicUrl",
        "need an access token",
        at.as_str(),
        "accessTokenEnv: OPC_WEB_TOKEN",
        "invalid — 1 error",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }

    match OpcRun::try_start(&config, &[(KEY_VAR, KEY), (TOKEN_VAR, TOKEN)]) {
        Ok(opc) => panic!("opc run served {} without an access token", opc.address),
        Err((code, stderr)) => {
            assert_eq!(code, Some(1), "{stderr}");
            assert!(
                stderr.contains("channels.web.publicUrl") && stderr.contains("not starting"),
                "{stderr}"
            );
        }
    }

    // With the token named, the same config is valid.
    std::fs::write(&config, &with_token).unwrap();
    let out = Command::new(opc_binary())
        .args(["validate", "--config"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .output_within(WAIT)
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_misdirected_without_a_token() {
    let org = org(LOOPBACK);
    let opc = start(&org);
    let port = opc.address.rsplit_once(':').unwrap().1.to_string();
    let id = conversation(&opc, &[]).await;
    let events = format!("/api/conversations/{id}/events");
    let foreign = [
        "attacker.example".to_string(),
        format!("attacker.example:{port}"),
        // A name the listener would answer to only with `publicUrl` set.
        PUBLIC_HOST.to_string(),
    ];
    for host in &foreign {
        for path in [
            "/",
            "/admin",
            "/admin/api/config",
            "/api/org",
            events.as_str(),
        ] {
            let (status, body) = get(&opc, path, &[("host", host)]).await;
            misdirected(status, &body, host, &format!("GET {path} as {host}"));
        }
        let (status, body) = call(
            &opc,
            reqwest::Method::POST,
            "/api/conversations",
            &[("host", host)],
        )
        .await;
        misdirected(status, &body, host, &format!("POST as {host}"));
    }
    // The listener's own names are served.
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let (status, body) = get(&opc, "/admin/api/config", &[("host", &host)]).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_proxy_only_the_public_name_is_served_and_only_with_the_token() {
    let org = org(PROXIED);
    let opc = start(&org);
    let bearer = format!("Bearer {TOKEN}");
    let token = ("authorization", bearer.as_str());
    let id = conversation(&opc, &[token]).await;
    let events = format!("/api/conversations/{id}/events");
    let pages = [
        "/",
        "/admin",
        "/admin/api/config",
        "/api/org",
        events.as_str(),
    ];

    // A foreign name: 421, with the token or without (before the token is even looked at).
    for host in [
        "attacker.example",
        "opc.example.com:8443",
        "opc.example.org",
    ] {
        for path in pages {
            let (status, body) = get(&opc, path, &[("host", host)]).await;
            misdirected(status, &body, host, &format!("GET {path} as {host}"));
            let (status, body) = get(&opc, path, &[("host", host), token]).await;
            misdirected(status, &body, host, &format!("GET {path} as {host}, token"));
        }
    }
    // The public name, as the proxy passes it on: served with the token, 401 without.
    for host in [PUBLIC_HOST, "opc.example.com:443"] {
        for path in pages {
            let (status, body) = get(&opc, path, &[("host", host), token]).await;
            assert_eq!(status, 200, "GET {path} as {host}, token: {body}");
            let (status, body) = get(&opc, path, &[("host", host)]).await;
            assert_eq!(status, 401, "GET {path} as {host}: {body}");
        }
    }
    // A change from the public page.
    let (status, body) = call(
        &opc,
        reqwest::Method::POST,
        "/api/conversations",
        &[
            ("host", PUBLIC_HOST),
            ("origin", "https://opc.example.com"),
            token,
        ],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_console_and_api_paths_need_the_token_first() {
    let org = org(PROXIED);
    let opc = start(&org);
    let bearer = format!("Bearer {TOKEN}");
    let token = ("authorization", bearer.as_str());
    for path in [
        "/admin/nonexistent",
        "/api/nonexistent",
        "/admin/api/nonexistent",
        "/api/conversations/x/nonexistent",
    ] {
        for method in [reqwest::Method::GET, reqwest::Method::POST] {
            let (status, body) = call(&opc, method.clone(), path, &[]).await;
            assert_eq!(status, 401, "{method} {path} without the token: {body}");
            assert!(
                body["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("Authorization: Bearer")),
                "{method} {path}: {body}"
            );
        }
        let (status, body) = get(&opc, path, &[token]).await;
        assert_eq!(status, 404, "GET {path} with the token: {body}");
        let (status, _) = get(&opc, &format!("{path}?token={TOKEN}"), &[]).await;
        assert_eq!(status, 404, "GET {path}?token=");
    }
    // A known one answers the same 401 without the token, and is served with it.
    let (status, _) = get(&opc, "/admin/api/config", &[]).await;
    assert_eq!(status, 401);
    let (status, body) = get(&opc, "/admin/api/config", &[token]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_hosts_count_only_from_a_loopback_proxy_with_a_public_url() {
    // With publicUrl, from loopback (this test is the proxy): each forwarded host must be ours.
    let org_proxied = org(PROXIED);
    let opc = start(&org_proxied);
    let bearer = format!("Bearer {TOKEN}");
    let token = ("authorization", bearer.as_str());
    for forwarded in [
        ("x-forwarded-host", "attacker.example"),
        (
            "forwarded",
            "for=192.0.2.7;host=attacker.example;proto=https",
        ),
        ("x-forwarded-host", "opc.example.com, attacker.example"),
    ] {
        let (status, body) = get(&opc, "/admin/api/config", &[token, forwarded]).await;
        misdirected(status, &body, "attacker.example", &format!("{forwarded:?}"));
    }
    for forwarded in [
        ("x-forwarded-host", PUBLIC_HOST),
        (
            "forwarded",
            "for=192.0.2.7;host=opc.example.com;proto=https",
        ),
    ] {
        let (status, body) = get(&opc, "/admin/api/config", &[token, forwarded]).await;
        assert_eq!(status, 200, "{forwarded:?}: {body}");
    }
    assert_eq!(opc.stop().0, Some(0));

    // Without publicUrl there is no proxy to trust: the headers change nothing.
    let org_loopback = org(LOOPBACK);
    let opc = start(&org_loopback);
    for forwarded in [
        ("x-forwarded-host", "attacker.example"),
        ("forwarded", "host=attacker.example"),
    ] {
        let (status, body) = get(&opc, "/admin/api/config", &[forwarded]).await;
        assert_eq!(status, 200, "{forwarded:?}: {body}");
    }
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_without_the_token_is_sent_to_sign_in_on_the_public_name() {
    let org = org(PROXIED);
    let opc = start(&org);
    // Redirects are read here, not followed. (The crypto provider is installed first, as
    // `opc_tests::http_client` does: this test may run before any other in the process.)
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap();
    let page = |path: &str, host: &str| {
        client
            .get(opc.url(path))
            .header("host", host)
            .header("accept", "text/html,*/*;q=0.8")
            .send()
    };
    for (path, next) in [("/admin", "%2Fadmin"), ("/", "%2F"), ("/org", "%2Forg")] {
        let response = page(path, PUBLIC_HOST).await.unwrap();
        assert_eq!(response.status(), 303, "GET {path} as a page");
        assert_eq!(
            response.headers()["location"],
            format!("/signin?next={next}").as_str(),
            "{path}"
        );
        // A foreign name is misdirected first, page or not.
        let response = page(path, "attacker.example").await.unwrap();
        assert_eq!(response.status(), 421, "GET {path} as attacker.example");
    }
    let response = page("/signin?next=/admin", PUBLIC_HOST).await.unwrap();
    assert_eq!(response.status(), 200);
    let response = page("/signin", "attacker.example").await.unwrap();
    assert_eq!(response.status(), 421);
    // An API call still gets its 401 JSON, page or not.
    let (status, body) = get(&opc, "/admin/api/config", &[("host", PUBLIC_HOST)]).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(opc.stop().0, Some(0));
}
