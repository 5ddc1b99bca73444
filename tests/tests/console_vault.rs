//! The Privacy page's vault status on the real `opc run` (privacy on, mode `mask`), in headless
//! Chromium: while a request that carried an e-mail address and a phone number is in flight (the
//! scripted model holds its answer), `GET /admin/api/privacy/vault` counts them by type in one vault,
//! with the oldest time set, and lists the fake scheme; no byte of the real values, nor of the fakes
//! the model saw, is in the answer or in the page. Once the request has ended, its vault is gone.
//! Names need the NER model (not loaded under test: `requireNer: false`), so the pattern tier's types
//! stand in for them.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{KEY, KEY_VAR, TestOrg, marker};
use opc_tests::scripted_llm::{Script, Step};
use opc_tests::wait::{WAIT, wait_for, within};
use opc_tests::web_chat::start as chat;
use serde_json::Value;

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

const EMAIL: &str = "jane.roe@corp-mail.io";
const PHONE: &str = "+1 415 867 5309";

/// `GET` the vault endpoint: its status and body text.
async fn vault(opc: &OpcRun, query: &str) -> (u16, String) {
    let response = opc_tests::http_client()
        .get(opc.url(&format!("/admin/api/privacy/vault{query}")))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Save a PNG of the page to `$OPC_SCREENSHOTS/<name>.png` when that variable names a directory;
/// always check the browser produced one.
async fn screenshot(browser: &mut Browser, name: &str, width: u32, height: u32) {
    let png = browser.screenshot(width, height, false).await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG of {name}");
    if let Some(dir) = std::env::var_os("OPC_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// The substitutes the model saw for the e-mail and the phone, read from its request: the words of
/// the masked question where the real ones were.
fn fakes(masked: &str) -> Vec<String> {
    let email = masked
        .split_whitespace()
        .find(|w| w.contains('@'))
        .unwrap_or_else(|| panic!("a fake e-mail in {masked:?}"))
        .to_string();
    let phone = masked
        .split_once(" or call ")
        .and_then(|(_, rest)| rest.split_once(" about"))
        .map(|(phone, _)| phone.to_string())
        .unwrap_or_else(|| panic!("a fake phone in {masked:?}"));
    vec![email, phone]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vault_counts_what_a_request_holds_and_never_shows_a_value() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let script = Script::new().agent(marker("ceo"), vec![Step::text("Noted.")]);
    let (llm, org) = TestOrg::scripted(script).sections(WEB).start().await;
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);

    // Nothing held before any request; the scheme is there.
    let (status, text) = vault(&opc, "").await;
    assert_eq!(status, 200, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (&body["enabled"], &body["mode"]),
        (&true.into(), &"mask".into())
    );
    assert_eq!(body["values"], 0);
    let scheme = body["scheme"].as_array().unwrap();
    let how = |kind: &str| {
        scheme
            .iter()
            .find(|s| s["type"] == kind)
            .unwrap_or_else(|| panic!("{kind} in {scheme:?}"))["how"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(how("EMAIL").contains("example"));
    assert!(how("PHONE").contains("555-01xx"));
    assert!(how("PERSON_NAME").contains("name"));

    // A request carrying an e-mail and a phone, its model call held.
    llm.hold();
    let question = format!("Write to {EMAIL} or call {PHONE} about the offer.");
    let (_, mut sse) = chat(&opc, &question).await;
    let requests = wait_for(WAIT, "the CEO's model call", || {
        let requests = llm.requests_for(&marker("ceo"));
        (!requests.is_empty()).then_some(requests)
    })
    .await;
    let masked = requests[0]
        .user_texts()
        .into_iter()
        .find(|t| t.contains("about the offer"))
        .expect("the question, masked");
    assert!(
        !masked.contains(EMAIL) && !masked.contains(PHONE),
        "{masked}"
    );
    let fakes = fakes(&masked);

    let (status, text) = vault(&opc, "?limit=10").await;
    assert_eq!(status, 200, "{text}");
    for value in [EMAIL, PHONE, "jane", "corp-mail", "867"]
        .into_iter()
        .chain(fakes.iter().map(String::as_str))
    {
        assert!(
            !text.contains(value),
            "{value:?} in the vault's answer: {text}"
        );
    }
    let body: Value = serde_json::from_str(&text).unwrap();
    let rows = body["conversations"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["by_type"]["EMAIL"] == 1 && r["by_type"]["PHONE"] == 1)
        .unwrap_or_else(|| panic!("a vault holding the request's two values: {body}"));
    assert!(row["values"].as_u64().unwrap() >= 2);
    let oldest = row["oldest_ms"].as_u64().expect("the oldest time is set");
    assert!(oldest <= row["newest_ms"].as_u64().unwrap());
    assert!(body["oldest_age_ms"].is_u64());
    // The vault names the request's engine conversation, as the Tasks page lists it (the web
    // chat's id is the thread's: the gateway maps it to the engine's).
    let tasks: Value = opc_tests::http_client()
        .get(opc.url("/admin/api/tasks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let engine = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["input"].as_str().is_some_and(|i| i.contains(&question)))
        .unwrap_or_else(|| panic!("the request in the tasks list: {tasks}"));
    assert_ne!(engine["conversation"], Value::Null, "{engine}");
    assert_eq!(row["conversation"], engine["conversation"], "{row}");
    let (status, text) = vault(&opc, "?limit=0").await;
    assert_eq!(status, 400);
    assert!(text.contains("from 1 to"), "{text}");

    // The page: totals, the scheme and the row; no value in the DOM.
    browser.navigate(&opc.url("/admin#privacy")).await.unwrap();
    browser
        .wait_for(
            "[...document.querySelectorAll('#vault tr[data-vault-conversation]')].some(r => r.textContent.includes('1 EMAIL, 1 PHONE')) \
             && !!document.querySelector('#vault [data-vault-type=EMAIL]')",
            WAIT,
        )
        .await
        .unwrap();
    let dom = browser
        .eval("document.documentElement.outerHTML")
        .await
        .unwrap();
    let dom = dom.as_str().unwrap();
    for value in [EMAIL, PHONE, "corp-mail"]
        .into_iter()
        .chain(fakes.iter().map(String::as_str))
    {
        assert!(!dom.contains(value), "{value:?} in the page");
    }
    screenshot(&mut browser, "privacy", 1280, 800).await;

    // The request ends: its vault with it.
    llm.release();
    sse.wait_for("message|edit", WAIT, |d| {
        d["text"].as_str().is_some_and(|t| t.contains("Noted."))
    })
    .await;
    within(WAIT, "the ended request's vault to go", async {
        loop {
            let (_, text) = vault(&opc, "").await;
            let body: Value = serde_json::from_str(&text).unwrap();
            if body["values"] == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
