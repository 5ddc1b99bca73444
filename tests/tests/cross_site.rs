//! Cross-site requests against the real `opc run` in its default setup (loopback, no access token):
//! a web page the operator visits must not be able to start agent work, decide an approval or cancel a
//! request, and a page on another name (DNS rebinding) must not read the config: a `Host` that is not
//! one of the listener's names is answered 421 before routing.
//!
//! Each refused request is checked for having had no effect: no conversation started (no model call
//! carries its text), the approval still pending, the task not cancelled. The same requests as JSON,
//! from a script (no `Origin`, no `Sec-Fetch-Site`) or the listener's own page, are served.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, approval_chain, marker};
use opc_tests::scripted_llm::{ScriptedLlm, Step};
use opc_tests::wait::{WAIT, wait_until};
use serde_json::Value;

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// The content types a cross-site page can send without asking the server first (a "simple
/// request"), plus none at all: every one is refused on a change.
const NOT_JSON: [Option<&str>; 4] = [
    Some("text/plain"),
    Some("application/x-www-form-urlencoded"),
    Some("multipart/form-data; boundary=x"),
    None,
];

/// A POST of `body` to `path` with `content_type` (none when `None`) and `extra` headers: the status
/// and the JSON answer.
async fn post(
    opc: &OpcRun,
    path: &str,
    content_type: Option<&str>,
    body: &str,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = opc_tests::http_client()
        .post(opc.url(path))
        .body(body.to_string());
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = tokio::time::timeout(WAIT, request.send())
        .await
        .expect("an answer in time")
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(opc: &OpcRun, path: &str, extra: &[(&str, &str)]) -> (u16, Value) {
    let mut request = opc_tests::http_client().get(opc.url(path));
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The listener's own origin, as its pages send it.
fn own_origin(opc: &OpcRun) -> String {
    opc.url("").trim_end_matches('/').to_string()
}

/// The `Host` the listener's address gives (`127.0.0.1:<port>`).
fn own_host(opc: &OpcRun) -> String {
    own_origin(opc).trim_start_matches("http://").to_string()
}

/// A 403 whose reason mentions `what`.
fn refused(status: u16, body: &Value, what: &str, case: &str) {
    assert_eq!(status, 403, "{case}: {body}");
    let reason = body["error"].as_str().unwrap_or_default();
    assert!(
        reason.contains(what),
        "{case}: the reason names {what}: {reason}"
    );
}

/// A 421 (Misdirected Request) whose reason names the refused `host`.
fn misdirected(status: u16, body: &Value, host: &str, case: &str) {
    assert_eq!(status, 421, "{case}: {body}");
    let reason = body["error"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("`{host}`")),
        "{case}: the reason names the host {host}: {reason}"
    );
}

/// An org whose support agent asks for approval (so a request waits on it).
async fn approval_org(sections: &str) -> (ScriptedLlm, TestOrg) {
    let script = approval_chain().fallback(vec![Step::text("answered")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), sections);
    (llm, org)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_starts_only_from_same_origin_json() {
    let (llm, org) = approval_org(WEB).await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let origin = own_origin(&opc);
    let path = "/api/conversations";

    // Every content type but JSON, with no Origin (as a script would send it): refused.
    for (i, content_type) in NOT_JSON.into_iter().enumerate() {
        let body = format!("{{\"text\": \"cross-site {i}\"}}");
        let (status, answer) = post(&opc, path, content_type, &body, &[]).await;
        refused(
            status,
            &answer,
            "Content-Type: application/json",
            &format!("{content_type:?}"),
        );
    }
    // The same with the page's own Origin: still refused (the content type is the rule).
    let (status, answer) = post(
        &opc,
        path,
        Some("text/plain"),
        "{\"text\": \"cross-site own origin\"}",
        &[("origin", &origin)],
    )
    .await;
    refused(
        status,
        &answer,
        "application/json",
        "text/plain from the own origin",
    );
    // JSON from a foreign page: by its Origin, or (no Origin) by Sec-Fetch-Site.
    for extra in [
        [("origin", "https://attacker.example")],
        [("origin", "null")],
        [("sec-fetch-site", "cross-site")],
        [("sec-fetch-site", "same-site")],
    ] {
        let (status, answer) = post(
            &opc,
            path,
            Some("application/json"),
            "{\"text\": \"cross-site json\"}",
            &extra,
        )
        .await;
        refused(status, &answer, "cross-site", &format!("{extra:?}"));
    }
    // A foreign Host (DNS rebinding) cannot post either.
    let (status, answer) = post(
        &opc,
        path,
        Some("application/json"),
        "{\"text\": \"cross-site host\"}",
        &[("host", "attacker.example")],
    )
    .await;
    misdirected(status, &answer, "attacker.example", "a foreign Host");

    // Served: JSON from a script (neither header), from the page itself (its Origin, or
    // Sec-Fetch-Site same-origin), with a charset.
    let served = [
        (Some("application/json"), vec![]),
        (
            Some("application/json; charset=utf-8"),
            vec![("origin", origin.as_str())],
        ),
        (
            Some("application/json"),
            vec![("sec-fetch-site", "same-origin")],
        ),
    ];
    for (i, (content_type, extra)) in served.iter().enumerate() {
        let body = format!("{{\"text\": \"served {i}\"}}");
        let (status, answer) = post(&opc, path, *content_type, &body, extra).await;
        assert_eq!(status, 201, "{content_type:?} {extra:?}: {answer}");
    }
    // Each served one reached the CEO; by then no refused one had, and none ever will: the
    // refused requests were never delivered (the gateway takes messages in order).
    wait_until(WAIT, "the served conversations' model calls", || {
        let texts: Vec<String> = llm
            .requests_for(&marker("ceo"))
            .iter()
            .flat_map(|r| r.user_texts())
            .collect();
        (0..3).all(|i| texts.iter().any(|t| t.contains(&format!("served {i}"))))
    })
    .await;
    for request in llm.requests() {
        for text in request.user_texts() {
            assert!(
                !text.contains("cross-site"),
                "a refused request reached the model: {text}"
            );
        }
    }
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_decided_only_by_same_origin_json() {
    let (_llm, org) = approval_org(WEB).await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let (_conversation, mut sse) = opc_tests::web_chat::start(&opc, "Refund order 7").await;
    let card = sse.wait_for("card", WAIT, |_| true).await;
    let approval = card["card"]["approval"].as_i64().expect("approval id");

    let chat = format!("/api/approvals/{approval}");
    let console = format!("/admin/api/approvals/{approval}");
    for content_type in NOT_JSON {
        let (status, answer) = post(&opc, &chat, content_type, "{\"option\": 0}", &[]).await;
        refused(
            status,
            &answer,
            "application/json",
            &format!("chat {content_type:?}"),
        );
        let (status, answer) = post(
            &opc,
            &console,
            content_type,
            "{\"decision\": \"approve\"}",
            &[],
        )
        .await;
        refused(
            status,
            &answer,
            "application/json",
            &format!("console {content_type:?}"),
        );
    }
    for extra in [
        [("origin", "https://attacker.example")],
        [("sec-fetch-site", "cross-site")],
    ] {
        let (status, answer) = post(
            &opc,
            &chat,
            Some("application/json"),
            "{\"option\": 0}",
            &extra,
        )
        .await;
        refused(status, &answer, "cross-site", &format!("chat {extra:?}"));
        let (status, answer) = post(
            &opc,
            &console,
            Some("application/json"),
            "{\"decision\": \"approve\"}",
            &extra,
        )
        .await;
        refused(status, &answer, "cross-site", &format!("console {extra:?}"));
    }
    // Still pending.
    let (status, list) = get(&opc, "/admin/api/approvals", &[]).await;
    assert_eq!(status, 200);
    let record = list["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == approval)
        .cloned()
        .unwrap_or_else(|| panic!("approval {approval} in {list}"));
    assert!(record["decision"].is_null(), "still pending: {record}");

    // From the listener's own page, as JSON: decided.
    let origin = own_origin(&opc);
    let (status, answer) = post(
        &opc,
        &chat,
        Some("application/json"),
        "{\"option\": 0}",
        &[("origin", &origin), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    sse.wait_for("card_update", WAIT, |_| true).await;
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_cancelled_only_by_same_origin_json() {
    let (llm, org) = approval_org(WEB).await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    // The request waits on its model call while the cancels arrive.
    llm.hold();
    let (_conversation, _sse) = opc_tests::web_chat::start(&opc, "Refund order 7").await;
    wait_until(WAIT, "the CEO's model call", || {
        !llm.requests_for(&marker("ceo")).is_empty()
    })
    .await;
    let (_, tasks) = get(&opc, "/admin/api/tasks", &[]).await;
    let root = tasks["tasks"][0]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("a task in {tasks}"));
    let path = format!("/admin/api/tasks/{root}/cancel");
    let state = |tree: &Value| {
        tree["tasks"][0]["state"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
    };

    // A form post (the attack: a hidden form on any page), the other simple types, none, an empty
    // body: refused.
    for content_type in NOT_JSON {
        for body in ["", "x=1"] {
            let (status, answer) = post(&opc, &path, content_type, body, &[]).await;
            refused(
                status,
                &answer,
                "application/json",
                &format!("{content_type:?} {body:?}"),
            );
        }
    }
    for extra in [
        [("origin", "https://attacker.example")],
        [("sec-fetch-site", "cross-site")],
    ] {
        let (status, answer) = post(&opc, &path, Some("application/json"), "{}", &extra).await;
        refused(status, &answer, "cross-site", &format!("{extra:?}"));
    }
    let (_, tree) = get(&opc, &format!("/admin/api/tasks/{root}"), &[]).await;
    assert_ne!(state(&tree), "cancelled", "not cancelled: {tree}");
    assert!(!state(&tree).is_empty(), "{tree}");

    // As the console sends it: `{}` as JSON from its own page.
    let origin = own_origin(&opc);
    let (status, answer) = post(
        &opc,
        &path,
        Some("application/json"),
        "{}",
        &[("origin", &origin)],
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["root"], root);
    let (_, tree) = get(&opc, &format!("/admin/api/tasks/{root}"), &[]).await;
    assert_eq!(state(&tree), "cancelled", "{tree}");
    llm.release();
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_listeners_own_names_are_answered() {
    let (_llm, org) = approval_org(WEB).await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let port = own_host(&opc).rsplit_once(':').unwrap().1.to_string();

    // DNS rebinding: the attacker's name resolved to 127.0.0.1, the Host still the attacker's.
    for host in [
        "attacker.example".to_string(),
        format!("attacker.example:{port}"),
        format!("127.0.0.1.attacker.example:{port}"),
        "127.0.0.1".to_string(),
    ] {
        let (status, answer) = get(&opc, "/admin/api/config", &[("host", &host)]).await;
        misdirected(status, &answer, &host, &host);
        assert!(answer.get("text").is_none(), "no config text for {host}");
        let (status, answer) = get(&opc, "/", &[("host", &host)]).await;
        misdirected(status, &answer, &host, &format!("the chat page for {host}"));
    }
    // The loopback names with the listener's port.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let (status, answer) = get(&opc, "/admin/api/config", &[("host", &host)]).await;
        assert_eq!(status, 200, "{host}: {answer}");
        assert!(answer["text"].as_str().is_some_and(|t| t.contains("ceo")));
    }
    // A read may come from anywhere (the browser does not let a foreign page see the answer), but
    // outside the check: /healthz answers any Host.
    let (status, _) = get(&opc, "/api/org", &[("origin", "https://attacker.example")]).await;
    assert_eq!(status, 200);
    let health = opc_tests::http_client()
        .get(opc.url("/healthz"))
        .header("host", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(opc.stop().0, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_url_adds_its_name_and_origin() {
    // A public URL needs an access token; every request below to /admin or /api carries it.
    const TOKEN_VAR: &str = "OPC_TEST_WEB_TOKEN";
    const TOKEN: &str = "cross-site-test-token";
    let (_llm, org) = approval_org(&format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\", publicUrl: \"https://opc.example.com/\", \
         accessTokenEnv: {TOKEN_VAR} }}\n"
    ))
    .await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY), (TOKEN_VAR, TOKEN)]);
    let bearer = format!("Bearer {TOKEN}");
    let auth = ("authorization", bearer.as_str());
    // Behind a proxy that passes the public name on (no port: https's default).
    for host in ["opc.example.com", "opc.example.com:443"] {
        let (status, answer) = get(&opc, "/admin/api/config", &[("host", host), auth]).await;
        assert_eq!(status, 200, "{host}: {answer}");
    }
    let (status, answer) = get(
        &opc,
        "/admin/api/config",
        &[("host", "opc.example.com:8443"), auth],
    )
    .await;
    misdirected(status, &answer, "opc.example.com:8443", "another port");
    // A change from the public page, through a proxy that rewrote Host to the loopback address.
    let (status, answer) = post(
        &opc,
        "/api/conversations",
        Some("application/json"),
        "{}",
        &[("origin", "https://opc.example.com"), auth],
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = post(
        &opc,
        "/api/conversations",
        Some("application/json"),
        "{}",
        &[("origin", "https://other.example.com"), auth],
    )
    .await;
    refused(status, &answer, "cross-site", "another origin");
    assert_eq!(opc.stop().0, Some(0));
}
