//! The Memory page's block editor on the real `opc run` (headless Chromium): an admin edits a core
//! block through the page; an edit from an older version is refused (409) with the current text and
//! version, and the page shows that text beside the user's, which stays in the editor until the user
//! chooses; the limit (400, by how much) and `readOnly` (403, change it in the config) are enforced;
//! the history shows each change by "admin". The same API on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::wait::WAIT;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n\
sharedBlocks:\n  policy: { description: Refund policy, value: \"Refunds up to $100.\", limit: 60 }\n  \
rules: { description: House rules, value: \"Be kind.\", readOnly: true }\n";

/// Where the org's provider points: no model is called here.
const NO_LLM: &str = "http://127.0.0.1:9";

/// The test org with core blocks: Support's own `notes` (limit 40) and the shared `policy` and
/// read-only `rules` it references; `framework` is added to the framework section.
fn org_with_blocks(framework: &str) -> TestOrg {
    let org = TestOrg::with_extras(
        NO_LLM,
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            framework,
            sections: WEB,
            ..Extras::default()
        },
    );
    let path = org.config_path();
    let text = std::fs::read_to_string(&path).unwrap();
    // Support is the org's last agent: its memory line is the last one.
    let at = text.rfind("    memory: { recall: false }\n").unwrap();
    let text = format!(
        "{}    memory: {{ recall: false, sharedBlocks: [policy, rules], blocks: [{{ label: notes, description: What Support keeps in mind, value: \"Order 7 is late.\", limit: 40 }}] }}\n{}",
        &text[..at],
        &text[at + "    memory: { recall: false }\n".len()..]
    );
    std::fs::write(&path, text).unwrap();
    opc_hierarchy::load(&path).unwrap_or_else(|e| panic!("the org with blocks: {e}"));
    org
}

/// `POST` an edit; status and answer.
async fn edit(
    opc: &OpcRun,
    namespace: &str,
    label: &str,
    value: &str,
    version: u64,
) -> (u16, Value) {
    opc_tests::post_json(
        &opc.url("/admin/api/memory/blocks/edit"),
        json!({"namespace": namespace, "label": label, "value": value, "version": version}),
    )
    .await
}

/// `GET` `path`: status and answer.
async fn get(opc: &OpcRun, path: &str) -> (u16, Value) {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The authors and versions of a block's history, newest first.
async fn history(opc: &OpcRun, namespace: &str, label: &str) -> Vec<(String, u64)> {
    let query = format!("namespace={}&label={label}", namespace.replace('/', "%2F"));
    let (status, body) = get(opc, &format!("/admin/api/memory/blocks/history?{query}")).await;
    assert_eq!(status, 200, "{body}");
    body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["author"].as_str().unwrap().to_string(),
                h["version"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The refusals every backend gives: stale (409 with the current text), over the limit (400, by
/// how much), read-only (403, pointing at the config), unknown (404), a bad body (400). `current`
/// is notes' text at `version`.
async fn refusals(opc: &OpcRun, current: &str, version: u64) {
    let (status, body) = edit(opc, "agent/support", "notes", "an old idea", version - 1).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["current"],
        json!({"value": current, "version": version}),
        "{body}"
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("changed since you opened it"),
        "{body}"
    );

    let (status, body) = edit(opc, "agent/support", "notes", &"x".repeat(43), version).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        (
            body["limit"].clone(),
            body["chars"].clone(),
            body["over"].clone()
        ),
        (json!(40), json!(43), json!(3)),
        "{body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("3 too many"),
        "{body}"
    );
    // The limit counts characters, not bytes: 61 accented letters are 61.
    let (status, body) = edit(opc, "shared", "policy", &"é".repeat(61), 1).await;
    assert_eq!((status, body["chars"].clone()), (400, json!(61)), "{body}");

    let (status, body) = edit(opc, "shared", "rules", "Be rude.", 1).await;
    assert_eq!(status, 403, "{body}");
    let why = body["error"].as_str().unwrap();
    assert!(
        why.contains("read-only") && why.contains("sharedBlocks.rules"),
        "{body}"
    );

    let (status, body) = edit(opc, "agent/ceo", "notes", "x", 1).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = edit(opc, "elsewhere", "notes", "x", 1).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = opc_tests::post_json(
        &opc.url("/admin/api/memory/blocks/edit"),
        json!({"namespace": "shared", "label": "policy"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("\"version\""),
        "{body}"
    );
    // Nothing refused was written.
    let (_, blocks) = get(opc, "/admin/api/memory/blocks").await;
    let notes = blocks["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["namespace"] == "agent/support" && b["label"] == "notes")
        .unwrap();
    assert_eq!(
        (
            notes["value"].as_str().unwrap(),
            notes["version"].as_u64().unwrap()
        ),
        (current, version)
    );
}

/// Wait until the page's JavaScript `condition` holds (or fail after [`WAIT`]).
async fn wait(browser: &mut Browser, condition: &str) {
    browser.wait_for(condition, WAIT).await.unwrap();
}

/// Run `js` on the page.
async fn run(browser: &mut Browser, js: &str) {
    browser.eval(&format!("{js}, true")).await.unwrap();
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

const NOTES: &str = "document.querySelector('[data-block=\"support/notes\"]')";

/// Set the open editor's text as typing would (an input event follows).
async fn type_into(browser: &mut Browser, text: &str) {
    run(
        browser,
        &format!(
            "(() => {{ const t = {NOTES}.querySelector('[data-block-input]'); t.value = {}; t.dispatchEvent(new Event('input')); }})()",
            json!(text)
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_block_edit_is_refused_with_the_current_text_and_the_page_keeps_the_users() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let org = org_with_blocks("");
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);

    browser.navigate(&opc.url("/admin#memory")).await.unwrap();
    wait(&mut browser, &format!("document.getElementById('blocks').hasAttribute('data-loaded') && !!{NOTES} \
         && !!document.querySelector('[data-block=\"shared/policy\"] [data-block-action=edit]') \
         && !document.querySelector('[data-block=\"shared/rules\"] [data-block-action=edit]') \
         && document.querySelector('[data-block=\"shared/rules\"]').textContent.includes('read-only')")).await;

    // An edit through the page: the count follows the text, over the limit Save is off.
    run(
        &mut browser,
        &format!("{NOTES}.querySelector('[data-block-action=edit]').click()"),
    )
    .await;
    wait(
        &mut browser,
        &format!(
            "document.activeElement === {NOTES}.querySelector('[data-block-input]') \
         && {NOTES}.querySelector('[data-block-count]').textContent === '16 / 40 characters'"
        ),
    )
    .await;
    type_into(&mut browser, &"y".repeat(42)).await;
    wait(
        &mut browser,
        &format!(
            "{NOTES}.querySelector('[data-block-count]').textContent.includes('2 over the limit') \
         && {NOTES}.querySelector('[data-block-action=save]').disabled"
        ),
    )
    .await;
    type_into(&mut browser, "Order 7: refund approved.").await;
    run(
        &mut browser,
        &format!("{NOTES}.querySelector('[data-block-action=save]').click()"),
    )
    .await;
    wait(
        &mut browser,
        &format!(
            "{NOTES}.dataset.version === '2' && !{NOTES}.querySelector('[data-block-input]') \
         && {NOTES}.querySelector('[data-block-value]').textContent === 'Order 7: refund approved.'"
        ),
    )
    .await;

    // A second edit from the version before it (as a second tab would make): refused, with the text
    // the page saved.
    refusals(&opc, "Order 7: refund approved.", 2).await;

    // The page's editor opens at version 2; meanwhile someone saves version 3: the page's save is
    // refused, shows version 3's text, and keeps what the user typed.
    run(
        &mut browser,
        &format!("{NOTES}.querySelector('[data-block-action=edit]').click()"),
    )
    .await;
    type_into(&mut browser, "Mine: call the customer.").await;
    let (status, body) = edit(&opc, "agent/support", "notes", "Theirs: order shipped.", 2).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["block"]["version"], 3);
    run(
        &mut browser,
        &format!("{NOTES}.querySelector('[data-block-action=save]').click()"),
    )
    .await;
    wait(&mut browser, &format!("!{NOTES}.querySelector('[data-block-conflict]').hidden \
         && {NOTES}.querySelector('[data-block-current]').textContent === 'Theirs: order shipped.' \
         && {NOTES}.querySelector('[data-block-conflict]').textContent.includes('version 3') \
         && {NOTES}.querySelector('[data-block-input]').value === 'Mine: call the customer.' \
         && {NOTES}.querySelector('[data-block-error]').textContent.includes('changed since you opened it')")).await;
    run(
        &mut browser,
        "document.getElementById('blocks').previousElementSibling.scrollIntoView()",
    )
    .await;
    screenshot(&mut browser, "memory", 1280, 800).await;
    // The user keeps theirs, on top of version 3.
    run(
        &mut browser,
        &format!("{NOTES}.querySelector('[data-block-action=use-mine]').click()"),
    )
    .await;
    run(
        &mut browser,
        &format!("{NOTES}.querySelector('[data-block-action=save]').click()"),
    )
    .await;
    wait(
        &mut browser,
        &format!(
            "{NOTES}.dataset.version === '4' \
         && {NOTES}.querySelector('[data-block-value]').textContent === 'Mine: call the customer.'"
        ),
    )
    .await;

    // The history: every change by admin, newest first, after the config's seed.
    assert_eq!(
        history(&opc, "agent/support", "notes").await,
        [
            ("admin".into(), 4),
            ("admin".into(), 3),
            ("admin".into(), 2),
            ("config".into(), 1)
        ]
    );
    run(
        &mut browser,
        &format!("{NOTES}.querySelector('[data-block-action=history]').click()"),
    )
    .await;
    wait(
        &mut browser,
        &format!(
            "{NOTES}.querySelectorAll('[data-block-history] li[data-author=admin]').length === 3 \
         && {NOTES}.querySelector('[data-block-history] li').dataset.version === '4' \
         && {NOTES}.querySelector('[data-block-history]').textContent.includes('edited by admin')"
        ),
    )
    .await;
    let (status, body) = get(
        &opc,
        "/admin/api/memory/blocks/history?namespace=shared&label=nope",
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = get(&opc, "/admin/api/memory/blocks/history?label=notes").await;
    assert_eq!(status, 400, "{body}");

    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_edits_on_postgres_check_version_limit_and_read_only_and_keep_history() {
    let Some(url) = opc_tests::postgres::fresh_database("console_blocks_pg").await else {
        return;
    };
    let org = org_with_blocks("  memory:\n    storage: postgres\n");
    let opc = OpcRun::start(
        &org.config_path(),
        &[(KEY_VAR, KEY), ("DATABASE_URL", url.as_str())],
    );
    let (status, body) = edit(
        &opc,
        "agent/support",
        "notes",
        "Order 7: refund approved.",
        1,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["block"]["version"], 2);
    refusals(&opc, "Order 7: refund approved.", 2).await;
    let (status, body) = edit(&opc, "shared", "policy", "Refunds up to $150.", 1).await;
    assert_eq!(
        (status, body["block"]["version"].clone()),
        (200, json!(2)),
        "{body}"
    );
    assert_eq!(
        history(&opc, "agent/support", "notes").await,
        [("admin".into(), 2), ("config".into(), 1)]
    );
    assert_eq!(
        history(&opc, "shared", "policy").await,
        [("admin".into(), 2), ("config".into(), 1)]
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
