//! The admin console (`/admin`) on the real `opc run`, in headless Chromium: the Org page shows the
//! tree, and the Config editor shows the file and validates edits as they are typed, with each error
//! inline at its line and in the list of problems. Also the validation endpoint's contract: the same
//! object as `opc validate --format json`, and a clear error for a bad body.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::post_json as post;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);
const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// The test org (no model is called: these tests only read and validate the config) under `opc run`.
fn start() -> (TestOrg, OpcRun) {
    let org = TestOrg::with_sections(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Execution::default(),
        WEB,
    );
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    (org, opc)
}

/// `opc validate --format json --config FILE` on `text`, as printed.
fn cli_validate(text: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("opc.config.yaml");
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new(opc_tests::opc_process::opc_binary())
        .args(["validate", "--format", "json", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_answers_what_opc_validate_prints() {
    let (org, opc) = start();
    let text = std::fs::read_to_string(org.config_path()).unwrap();
    let broken = text.replacen("vp-eng", "vp-engg", 1);
    for candidate in [text.as_str(), broken.as_str(), "framework: [", ""] {
        let (status, body) = post(
            &opc.url("/admin/api/config/validate"),
            json!({ "text": candidate }),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let mut expected = cli_validate(candidate);
        // The CLI names the file it read; the console names the running config's file.
        expected["file"] = body["file"].clone();
        assert_eq!(body, expected, "for {candidate:?}");
    }
    assert_eq!(
        post(&opc.url("/admin/api/config/validate"), json!({"txt": 1}))
            .await
            .0,
        422
    );
    // The file as it is on disk, with its ETag.
    let client = opc_tests::http_client();
    let response = client
        .get(opc.url("/admin/api/config"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let etag = response.headers()["etag"].to_str().unwrap().to_string();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["text"], text);
    assert_eq!(body["etag"], etag);
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_in_a_childs_name_is_shown_inline_at_its_line() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let (org, opc) = start();

    // The Org page: the tree, every agent a button.
    browser.navigate(&opc.url("/admin#org")).await.unwrap();
    browser
        .wait_for(
            "document.querySelectorAll('#org-tree button[data-agent]').length > 3",
            WAIT,
        )
        .await
        .unwrap();
    let root = browser
        .eval("document.querySelector('#org-tree > li > button').dataset.agent")
        .await
        .unwrap();
    assert_eq!(root, "ceo");

    // The Config page shows the file.
    let text = std::fs::read_to_string(org.config_path()).unwrap();
    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    browser
        .wait_for(
            "document.getElementById('config-text').value.length > 0 \
             && document.getElementById('config-status').textContent.startsWith('Valid')",
            WAIT,
        )
        .await
        .unwrap();
    let shown = browser
        .eval("document.getElementById('config-text').value")
        .await
        .unwrap();
    assert_eq!(shown, text.as_str());

    // Misspell the first child named in a `children:` list, as a person would: typing into the
    // editor fires its input handler.
    let (line_no, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with("children:"))
        .expect("the test org lists children");
    let child = line
        .split(['[', ']', ','])
        .nth(1)
        .map(str::trim)
        .expect("a child in the list")
        .to_string();
    let at = text
        .lines()
        .take(line_no)
        .map(|l| l.len() + 1)
        .sum::<usize>()
        + line.find(child.as_str()).unwrap()
        + child.len();
    browser
        .eval(&format!(
            "(() => {{ const t = document.getElementById('config-text'); t.focus(); \
             t.setSelectionRange({at}, {at}); return true; }})()"
        ))
        .await
        .unwrap();
    browser.type_text("x").await.unwrap();
    let line = line_no + 1;
    browser
        .wait_for(
            &format!(
                "document.getElementById('config-status').textContent.includes('error') \
                 && [...document.querySelectorAll('#gutter .e')].some(e => e.textContent === '{line}') \
                 && document.querySelectorAll('#notes .note.e').length > 0"
            ),
            WAIT,
        )
        .await
        .unwrap();
    let listed = browser
        .eval("document.getElementById('problems').textContent")
        .await
        .unwrap();
    let listed = listed.as_str().unwrap();
    assert!(listed.contains(&format!("line {line},")), "{listed}");
    assert!(listed.contains(&format!("{child}x")), "{listed}");

    // Fixing it clears the problems.
    browser
        .eval(
            "(() => { const t = document.getElementById('config-text'); \
             t.setRangeText('', t.selectionStart - 1, t.selectionStart, 'end'); \
             t.dispatchEvent(new Event('input')); return true; })()",
        )
        .await
        .unwrap();
    browser
        .wait_for(
            "document.getElementById('config-status').textContent.startsWith('Valid') \
             && document.querySelectorAll('#gutter .e').length === 0",
            WAIT,
        )
        .await
        .unwrap();
    // Nothing was written: validation never touches the file.
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), text);
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
