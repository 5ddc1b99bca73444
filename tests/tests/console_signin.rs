//! Sign-in by session cookie and the viewer token (issue 40 §2), on the real `opc run` over 127.0.0.1:
//!
//! - a browser opening a page without credentials is sent (303) to the sign-in page, an API call
//!   still gets its 401 JSON; a wrong token is refused (401, no cookie), the right one gives an
//!   `HttpOnly`, `SameSite=Strict` cookie (`Secure` behind an `https` public URL) that alone opens the
//!   console's API, still does after a restart of `opc run` on the same database, and no longer does
//!   after sign-out; `?token=` and the bearer header still work; attempts are limited per peer;
//! - the viewer token reads everything and changes nothing: a config save, an approval decision, a
//!   cancel and a chat message are refused 403 with the read-only message, and nothing changed;
//! - `opc run` refuses a viewer token that is missing or the same as the access token, without
//!   printing either;
//! - in Chromium: sign in through the form, the cookie invisible to the page's script, sign out,
//!   redirected again; a viewer's console shows no `[data-admin-only]` element; `?token=` leaves the
//!   address at once. `OPC_SCREENSHOTS=<dir>` saves `signin.png` there.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, approval_chain, marker};
use opc_tests::scripted_llm::{ScriptedLlm, Step};
use opc_tests::sse::Sse;
use opc_tests::wait::{WAIT, wait_until};
use serde_json::{Value, json};

const ADMIN_VAR: &str = "OPC_TEST_ADMIN_TOKEN";
const VIEWER_VAR: &str = "OPC_TEST_VIEWER_TOKEN";
const ADMIN: &str = "admin-s3cret-token";
const VIEWER: &str = "viewer-s3cret-token";

/// Loopback, with both tokens.
const TOKENS: &str = "channels:\n  web:\n    listen: \"127.0.0.1:0\"\n    accessTokenEnv: OPC_TEST_ADMIN_TOKEN\n    viewerTokenEnv: OPC_TEST_VIEWER_TOKEN\n";
/// Behind an HTTPS proxy.
const HTTPS: &str = "channels:\n  web:\n    listen: \"127.0.0.1:0\"\n    publicUrl: https://opc.example.com\n    accessTokenEnv: OPC_TEST_ADMIN_TOKEN\n";

/// Where the tests that call no model point the org's provider: nothing listens there.
const NO_LLM: &str = "http://127.0.0.1:9";

fn org(llm_url: &str, sections: &str) -> TestOrg {
    TestOrg::with_sections(llm_url, Wire::Anthropic, Execution::default(), sections)
}

fn start(org: &TestOrg) -> OpcRun {
    OpcRun::start(
        &org.config_path(),
        &[(KEY_VAR, KEY), (ADMIN_VAR, ADMIN), (VIEWER_VAR, VIEWER)],
    )
}

/// A client that does not follow redirects (the tests read them) and keeps no cookies (the tests
/// send them).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap()
}

/// An answer: status, headers, and the body as JSON (`Null` when it is not).
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
    text: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    }

    /// The `name=value` part of the `Set-Cookie` header, to send back as `Cookie`.
    fn cookie(&self) -> String {
        let set = self
            .header("set-cookie")
            .unwrap_or_else(|| panic!("a Set-Cookie in {:?}", self.headers));
        set.split(';').next().unwrap().to_string()
    }
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = tokio::time::timeout(WAIT, request.send())
        .await
        .expect("an answer in time")
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
        text,
    }
}

/// `GET path` with `headers`.
async fn get(opc: &OpcRun, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = client().get(opc.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(request).await
}

/// `POST path` with the JSON `body` and `headers`, from the listener's own page (its `Origin`).
async fn post(opc: &OpcRun, path: &str, body: Value, headers: &[(&str, &str)]) -> Answer {
    let mut request = client()
        .post(opc.url(path))
        .header("content-type", "application/json")
        .header("origin", format!("http://{}", opc.address))
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(request).await
}

/// What a browser sends when it opens a page.
const PAGE: (&str, &str) = ("accept", "text/html,application/xhtml+xml,*/*;q=0.8");

async fn sign_in(opc: &OpcRun, token: &str) -> Answer {
    post(opc, "/signin", json!({"token": token}), &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cookie_opens_the_console_survives_a_restart_and_ends_at_sign_out() {
    let org = org(NO_LLM, TOKENS);
    let opc = start(&org);

    // Without credentials: a page goes to the sign-in page, an API call gets 401 JSON.
    for (path, next) in [
        ("/admin", "%2Fadmin"),
        ("/", "%2F"),
        ("/org", "%2Forg"),
        ("/admin?x=1&token=wrong", "%2Fadmin%3Fx%3D1"),
    ] {
        let answer = get(&opc, path, &[PAGE]).await;
        assert_eq!(answer.status, 303, "GET {path} as a page");
        assert_eq!(
            answer.header("location").unwrap(),
            format!("/signin?next={next}"),
            "{path}"
        );
    }
    let answer = get(&opc, "/admin/api/tasks", &[]).await;
    assert_eq!(answer.status, 401);
    assert!(
        answer.body["error"]
            .as_str()
            .unwrap()
            .contains("sign in at /signin"),
        "{}",
        answer.body
    );
    let answer = get(&opc, "/signin?next=/admin%23config", &[PAGE]).await;
    assert_eq!(answer.status, 200);
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        answer
            .header("content-security-policy")
            .unwrap()
            .contains("default-src 'none'")
    );
    for hook in [
        "data-signin",
        "data-signin-error",
        "type=\"password\"",
        "value=\"/admin#config\"",
    ] {
        assert!(answer.text.contains(hook), "{hook} in the sign-in page");
    }

    // A wrong token: 401, no cookie, the token not repeated; a body that is not the form: 400.
    let wrong = sign_in(&opc, "not-the-token").await;
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert!(wrong.header("set-cookie").is_none());
    assert!(!wrong.text.contains("not-the-token"));
    assert!(
        wrong.body["error"]
            .as_str()
            .unwrap()
            .contains("wrong token")
    );
    let bad = post(&opc, "/signin", json!({"tok": ADMIN}), &[]).await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(!bad.text.contains(ADMIN));
    // From another site: refused before the token is looked at.
    let foreign = send(
        client()
            .post(opc.url("/signin"))
            .header("content-type", "application/json")
            .header("origin", "https://attacker.example")
            .body(json!({"token": ADMIN}).to_string()),
    )
    .await;
    assert_eq!(foreign.status, 403);
    assert!(foreign.header("set-cookie").is_none());

    // The right token: a session cookie, HttpOnly, SameSite=Strict, not Secure over plain http; and
    // `next` followed only to a local path.
    let signed_in = post(
        &opc,
        "/signin",
        json!({"token": ADMIN, "next": "//evil.example/admin"}),
        &[],
    )
    .await;
    assert_eq!(signed_in.status, 200, "{}", signed_in.body);
    assert_eq!(signed_in.body["next"], "/admin");
    assert_eq!(signed_in.body["role"], "admin");
    let set = signed_in.header("set-cookie").unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=604800"] {
        assert!(set.contains(attribute), "{attribute} in {set}");
    }
    assert!(!set.contains("Secure"), "{set}");
    assert!(!set.contains(ADMIN), "the cookie is not the token");
    let cookie = signed_in.cookie();
    let with_cookie = [("cookie", cookie.as_str())];

    // The cookie alone opens the console's API and pages; /api/session says who.
    let tasks = get(&opc, "/admin/api/tasks", &with_cookie).await;
    assert_eq!(tasks.status, 200, "{}", tasks.body);
    let page = get(&opc, "/admin", &[PAGE, with_cookie[0]]).await;
    assert_eq!(page.status, 200);
    let who = get(&opc, "/api/session", &with_cookie).await.body;
    assert_eq!(who["role"], "admin", "{who}");
    assert_eq!(who["via"], "session", "{who}");
    let expires = who["expires_at"].as_i64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let week = 7 * 24 * 3600 * 1000;
    assert!(
        expires > now + week - 600_000 && expires <= now + week,
        "{who}"
    );
    // Signed in, the sign-in page goes straight on.
    let again = get(&opc, "/signin?next=/org", &[PAGE, with_cookie[0]]).await;
    assert_eq!(again.status, 303);
    assert_eq!(again.header("location").unwrap(), "/org");

    // The bearer header and `?token=` still work; a page opened with `?token=` gets a cookie too.
    let bearer = format!("Bearer {ADMIN}");
    let answer = get(&opc, "/admin/api/tasks", &[("authorization", &bearer)]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        get(&opc, "/api/session", &[("authorization", &bearer)])
            .await
            .body["via"],
        "bearer"
    );
    let answer = get(&opc, &format!("/admin/api/tasks?token={ADMIN}"), &[]).await;
    assert_eq!(answer.status, 200);
    assert!(
        answer.header("set-cookie").is_none(),
        "no session for a script"
    );
    let answer = get(&opc, &format!("/admin?token={ADMIN}"), &[PAGE]).await;
    assert_eq!(answer.status, 200);
    let from_query = answer.cookie();
    assert!(from_query.starts_with("opc_session="));
    assert_eq!(
        get(&opc, "/admin/api/tasks", &[("cookie", &from_query)])
            .await
            .status,
        200
    );

    // A restart of `opc run` on the same database: the same cookie still works.
    assert_eq!(opc.stop().0, Some(0));
    let opc = start(&org);
    let tasks = get(&opc, "/admin/api/tasks", &with_cookie).await;
    assert_eq!(tasks.status, 200, "after a restart: {}", tasks.body);

    // Sign-out: the session is gone server-side (the old cookie, sent again, is refused), and the
    // cookie cleared.
    let out = post(&opc, "/signout", json!({}), &with_cookie).await;
    assert_eq!(out.status, 200, "{}", out.body);
    let cleared = out.header("set-cookie").unwrap();
    assert!(
        cleared.starts_with("opc_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert_eq!(
        get(&opc, "/admin/api/tasks", &with_cookie).await.status,
        401
    );
    assert_eq!(
        get(&opc, "/admin", &[PAGE, with_cookie[0]]).await.status,
        303
    );
    // The other session (from `?token=`) is still on.
    assert_eq!(
        get(&opc, "/admin/api/tasks", &[("cookie", &from_query)])
            .await
            .status,
        200
    );

    // Guessing: after a burst of attempts from one address, every attempt waits, the right one too.
    let mut limited = None;
    for attempt in 0..30 {
        let answer = sign_in(&opc, &format!("guess-{attempt}")).await;
        if answer.status == 429 {
            limited = Some(answer);
            break;
        }
        assert_eq!(answer.status, 401, "attempt {attempt}: {}", answer.body);
    }
    let limited = limited.expect("sign-in attempts are limited");
    let wait: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert!(
        limited.body["error"]
            .as_str()
            .unwrap()
            .contains("too many sign-in attempts")
    );
    assert_eq!(sign_in(&opc, ADMIN).await.status, 429);
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_is_secure_behind_an_https_public_url() {
    let org = org(NO_LLM, HTTPS);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY), (ADMIN_VAR, ADMIN)]);
    // As the proxy passes the browser's request on: the public name and origin.
    let answer = send(
        client()
            .post(opc.url("/signin"))
            .header("host", "opc.example.com")
            .header("origin", "https://opc.example.com")
            .header("content-type", "application/json")
            .body(json!({"token": ADMIN}).to_string()),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let set = answer.header("set-cookie").unwrap();
    for attribute in ["Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(set.contains(attribute), "{attribute} in {set}");
    }
    // No viewer token configured: the access token's session is an admin's.
    let who = get(&opc, "/api/session", &[("cookie", &answer.cookie())]).await;
    assert_eq!(who.body["role"], "admin", "{}", who.body);
    assert_eq!(opc.stop().0, Some(0));
}

#[test]
fn opc_run_refuses_a_missing_or_shared_viewer_token() {
    let org = org(NO_LLM, TOKENS);
    // The viewer's variable not set.
    match OpcRun::try_start(&org.config_path(), &[(KEY_VAR, KEY), (ADMIN_VAR, ADMIN)]) {
        Ok(opc) => panic!("opc run served {} without the viewer token", opc.address),
        Err((code, stderr)) => {
            assert_eq!(code, Some(2), "{stderr}");
            assert!(
                stderr.contains("channels.web.viewerTokenEnv") && stderr.contains(VIEWER_VAR),
                "{stderr}"
            );
            assert!(!stderr.contains(ADMIN), "{stderr}");
        }
    }
    // The same value for both.
    match OpcRun::try_start(
        &org.config_path(),
        &[(KEY_VAR, KEY), (ADMIN_VAR, ADMIN), (VIEWER_VAR, ADMIN)],
    ) {
        Ok(opc) => panic!(
            "opc run served {} with the same token for both",
            opc.address
        ),
        Err((code, stderr)) => {
            assert_eq!(code, Some(2), "{stderr}");
            assert!(stderr.contains("same token"), "{stderr}");
            assert!(!stderr.contains(ADMIN), "never the token: {stderr}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_everything_and_changes_nothing() {
    let script = approval_chain().fallback(vec![Step::text("answered")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = org(&llm.url(), TOKENS);
    let opc = start(&org);
    let admin = format!("Bearer {ADMIN}");
    let admin = [("authorization", admin.as_str())];
    let viewer = format!("Bearer {VIEWER}");
    let viewer = [("authorization", viewer.as_str())];

    // An admin's request that waits for an approval.
    let opened = post(&opc, "/api/conversations", json!({}), &admin).await;
    assert_eq!(opened.status, 201, "{}", opened.body);
    let conversation = opened.body["id"].as_str().unwrap().to_string();
    let mut sse = Sse::connect(
        &opc.url(&format!("/api/conversations/{conversation}/events")),
        Some(ADMIN),
    )
    .await;
    let messages = format!("/api/conversations/{conversation}/messages");
    let said = post(&opc, &messages, json!({"text": "Refund order 7"}), &admin).await;
    assert_eq!(said.status, 202, "{}", said.body);
    let card = sse.wait_for("card", WAIT, |_| true).await;
    let approval = card["card"]["approval"].as_i64().expect("approval id");
    let tasks = get(&opc, "/admin/api/tasks", &viewer).await;
    assert_eq!(tasks.status, 200, "a viewer reads: {}", tasks.body);
    let root = tasks.body["tasks"][0]["id"].as_i64().unwrap();

    // A viewer signed in by the form, and one by the bearer header: both read, neither changes.
    let signed_in = sign_in(&opc, VIEWER).await;
    assert_eq!(signed_in.body["role"], "viewer", "{}", signed_in.body);
    let cookie = signed_in.cookie();
    let session = [("cookie", cookie.as_str())];
    let config = std::fs::read_to_string(org.config_path()).unwrap();
    let calls_before = llm.requests_for(&marker("ceo")).len();
    for credentials in [viewer, session] {
        for path in [
            "/admin/api/config",
            "/admin/api/approvals",
            "/api/org",
            "/admin/api/tasks",
        ] {
            let answer = get(&opc, path, &credentials).await;
            assert_eq!(answer.status, 200, "GET {path}: {}", answer.body);
        }
        let who = get(&opc, "/api/session", &credentials).await.body;
        assert_eq!(who["role"], "viewer", "{who}");
        let changed = config.replace("vp-eng", "vp-engineering");
        for (path, body) in [
            (
                "/admin/api/config/save".to_string(),
                json!({"text": changed, "base": config}),
            ),
            (
                format!("/admin/api/approvals/{approval}"),
                json!({"decision": "approve"}),
            ),
            (format!("/api/approvals/{approval}"), json!({"option": 0})),
            (format!("/admin/api/tasks/{root}/cancel"), json!({})),
            (messages.clone(), json!({"text": "Refund order 8"})),
            ("/api/conversations".to_string(), json!({})),
        ] {
            let answer = post(&opc, &path, body, &credentials).await;
            assert_eq!(answer.status, 403, "POST {path}: {}", answer.body);
            assert!(
                answer.body["error"]
                    .as_str()
                    .unwrap()
                    .contains("read-only (viewer token)"),
                "POST {path}: {}",
                answer.body
            );
        }
    }
    // Nothing changed: the file, the approval (pending), the request (not cancelled), no new call.
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), config);
    let approvals = get(&opc, "/admin/api/approvals", &admin).await.body;
    let record = approvals["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == approval)
        .cloned()
        .unwrap_or_else(|| panic!("approval {approval} in {approvals}"));
    assert!(record["decision"].is_null(), "still pending: {record}");
    let tree = get(&opc, &format!("/admin/api/tasks/{root}"), &admin)
        .await
        .body;
    assert_ne!(
        tree["tasks"][0]["state"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase(),
        "cancelled",
        "{tree}"
    );
    assert_eq!(llm.requests_for(&marker("ceo")).len(), calls_before);
    // A viewer may sign out.
    let out = post(&opc, "/signout", json!({}), &session).await;
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(get(&opc, "/admin/api/tasks", &session).await.status, 401);
    // The admin still decides.
    let decided = post(
        &opc,
        &format!("/admin/api/approvals/{approval}"),
        json!({"decision": "approve"}),
        &admin,
    )
    .await;
    assert!(
        (200..300).contains(&decided.status),
        "the admin decides: {}",
        decided.body
    );
    wait_until(WAIT, "the approved request to go on", || {
        llm.requests_for(&marker("ceo")).len() > calls_before
            || !llm.requests_for(&marker("support")).is_empty()
    })
    .await;
    assert_eq!(opc.stop().0, Some(0));
}

/// Save a PNG of the page to `$OPC_SCREENSHOTS/<name>.png` when that variable names a directory
/// (how docs/admin.md's screenshots are made); always check the browser produced one.
async fn screenshot(browser: &mut Browser, name: &str, width: u32, height: u32) {
    let png = browser.screenshot(width, height, false).await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG of {name}");
    if let Some(dir) = std::env::var_os("OPC_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

async fn wait(browser: &mut Browser, condition: &str) {
    browser.wait_for(condition, WAIT).await.unwrap();
}

/// Type `token` into the sign-in form and send it with Enter.
async fn type_token(browser: &mut Browser, token: &str) {
    browser
        .eval("document.querySelector('[data-signin-token]').value = ''")
        .await
        .unwrap();
    browser.focus("[data-signin-token]").await.unwrap();
    browser.type_text(token).await.unwrap();
    browser.press_enter().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_and_out_in_the_browser() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let org = org(NO_LLM, TOKENS);
    let opc = start(&org);

    // The console sends a browser without a session to the sign-in page.
    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    wait(&mut browser, "location.pathname === '/signin'").await;
    wait(
        &mut browser,
        "document.querySelector('[data-signin-next]').value === '/admin'",
    )
    .await;
    browser
        .call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await
        .unwrap();
    screenshot(&mut browser, "signin", 1280, 800).await;

    // A wrong token: the error line says so, and the page stays.
    type_token(&mut browser, "not-the-token").await;
    wait(
        &mut browser,
        "!document.querySelector('[data-signin-error]').hidden && \
         document.querySelector('[data-signin-error]').textContent.includes('wrong token')",
    )
    .await;
    assert_eq!(browser.eval("location.pathname").await.unwrap(), "/signin");

    // The right one: the console, with "Sign out"; the session cookie is invisible to scripts.
    type_token(&mut browser, ADMIN).await;
    wait(&mut browser, "location.pathname === '/admin'").await;
    wait(&mut browser, "!!document.querySelector('[data-signout]')").await;
    wait(&mut browser, "document.body.dataset.role === 'admin'").await;
    assert_eq!(
        browser
            .eval("document.cookie.includes('opc_session')")
            .await
            .unwrap(),
        false
    );
    browser.reload().await.unwrap();
    wait(&mut browser, "!!document.querySelector('[data-signout]')").await;
    assert_eq!(browser.eval("location.pathname").await.unwrap(), "/admin");

    // Sign out: back to the sign-in page, and the console sends there again.
    browser
        .eval("document.querySelector('[data-signout]').click(), true")
        .await
        .unwrap();
    wait(&mut browser, "location.pathname === '/signin'").await;
    browser.navigate(&opc.url("/admin")).await.unwrap();
    wait(&mut browser, "location.pathname === '/signin'").await;

    // A viewer: signed in, no `[data-admin-only]` element shows (the config page's Save among them).
    type_token(&mut browser, VIEWER).await;
    wait(&mut browser, "location.pathname === '/admin'").await;
    wait(&mut browser, "document.body.dataset.role === 'viewer'").await;
    wait(
        &mut browser,
        "!!document.querySelector('[data-role-badge]')",
    )
    .await;
    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    wait(&mut browser, "document.body.dataset.role === 'viewer'").await;
    wait(
        &mut browser,
        "document.getElementById('config-file').textContent.length > 0",
    )
    .await;
    let hidden = browser
        .eval(
            "(() => { const all = [...document.querySelectorAll('[data-admin-only]')]; \
             return all.length > 0 && all.some((e) => e.id === 'save') && \
             all.every((e) => e.getClientRects().length === 0); })()",
        )
        .await
        .unwrap();
    assert_eq!(hidden, true, "a viewer sees no admin-only control");
    browser
        .eval("document.querySelector('[data-signout]').click(), true")
        .await
        .unwrap();
    wait(&mut browser, "location.pathname === '/signin'").await;

    // `?token=` (a script's link): the page works, the token leaves the address at once, and a
    // reload still works (the cookie the listener set with the page).
    browser
        .navigate(&opc.url(&format!("/admin?token={ADMIN}#org")))
        .await
        .unwrap();
    wait(&mut browser, "!location.href.includes('token=')").await;
    wait(&mut browser, "document.body.dataset.role === 'admin'").await;
    browser.reload().await.unwrap();
    wait(&mut browser, "document.body.dataset.role === 'admin'").await;
    assert_eq!(browser.eval("location.pathname").await.unwrap(), "/admin");
    assert_eq!(opc.stop().0, Some(0));
}
