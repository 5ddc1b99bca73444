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

/// `GET` a console endpoint's JSON.
async fn admin_get(opc: &OpcRun, path: &str) -> Value {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "GET {path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// `POST` `body` as JSON to the console; status and JSON answer.
async fn admin_post(opc: &OpcRun, path: &str, body: Value) -> (u16, Value) {
    post(&opc.url(path), body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_is_checked_atomic_kept_in_history_and_audited() {
    let (org, opc) = start();
    let file = org.config_path();
    let original = std::fs::read_to_string(&file).unwrap();
    let client = opc_tests::http_client();
    let loaded = admin_get(&opc, "/admin/api/config").await;
    let etag = loaded["etag"].as_str().unwrap().to_string();

    // Invalid text is refused with the report; so is a save without the ETag.
    let broken = original.replacen("vp-eng", "vp-engg", 1);
    let (status, body) = admin_post(
        &opc,
        "/admin/api/config/save",
        json!({"text": broken, "etag": etag}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["report"]["errors"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    );
    let (status, _) = admin_post(&opc, "/admin/api/config/save", json!({"text": original})).await;
    assert_eq!(status, 400);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);

    // The diff first, then the save.
    let edited = format!("# reviewed by the admin console test\n{original}");
    let (status, preview) =
        admin_post(&opc, "/admin/api/config/diff", json!({"text": edited})).await;
    assert_eq!(status, 200);
    assert_eq!(
        (preview["added"].as_u64(), preview["removed"].as_u64()),
        (Some(1), Some(0))
    );
    assert!(
        preview["diff"]
            .as_str()
            .unwrap()
            .contains("+# reviewed by the admin console test")
    );
    let (status, saved) = admin_post(
        &opc,
        "/admin/api/config/save",
        json!({"text": edited, "etag": etag, "base": original}),
    )
    .await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), edited);
    let dir = file.parent().unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".saving-"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file is left behind");

    // The replaced version is kept and listed; the save is audited.
    let history = admin_get(&opc, "/admin/api/config/history").await;
    let name = history["versions"][0]["name"].as_str().unwrap().to_string();
    assert_eq!(name, saved["previous"].as_str().unwrap());
    let kept = admin_get(&opc, &format!("/admin/api/config/history/{name}")).await;
    assert_eq!(kept["text"], original);
    let audit = std::fs::read_to_string(dir.join(".opc/config-history/audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(
        (line["added"].as_u64(), line["removed"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(line["previous"], name.as_str());
    assert!(line["by"].as_str().unwrap().starts_with("console"));
    for bad in ["..%2Fopc.config.yaml", "audit.jsonl", ".hidden"] {
        let status = client
            .get(opc.url(&format!("/admin/api/config/history/{bad}")))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 404, "{bad}");
    }

    // A change on disk since the console loaded the file blocks the save, with that change shown.
    let on_disk = edited.replace(
        "# reviewed by the admin console test",
        "# changed in an editor",
    );
    std::fs::write(&file, &on_disk).unwrap();
    let stale = saved["etag"].as_str().unwrap();
    let (status, conflict) = admin_post(
        &opc,
        "/admin/api/config/save",
        json!({"text": format!("{edited}# more\n"), "etag": stale, "base": edited}),
    )
    .await;
    assert_eq!(status, 409, "{conflict}");
    let diff = conflict["diff"].as_str().unwrap();
    assert!(
        diff.contains("-# reviewed by the admin console test"),
        "{diff}"
    );
    assert!(diff.contains("+# changed in an editor"), "{diff}");
    assert_eq!(conflict["text"], on_disk.as_str());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), on_disk);
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

    // An edit, while someone changes the file on disk: Save shows the diff, then the conflict with
    // the change made on disk, and the file keeps that change.
    browser
        .eval(
            "(() => { const t = document.getElementById('config-text'); \
             t.value = '# from the console\\n' + t.value; \
             t.dispatchEvent(new Event('input')); return true; })()",
        )
        .await
        .unwrap();
    browser
        .wait_for("!document.getElementById('save').disabled", WAIT)
        .await
        .unwrap();
    let on_disk = format!("# from an editor\n{text}");
    std::fs::write(org.config_path(), &on_disk).unwrap();
    browser
        .eval("document.getElementById('save').click(), true")
        .await
        .unwrap();
    browser
        .wait_for(
            "document.getElementById('dialog').open \
             && document.getElementById('dialog-diff').textContent.includes('+# from the console')",
            WAIT,
        )
        .await
        .unwrap();
    browser
        .eval("document.getElementById('dialog-ok').click(), true")
        .await
        .unwrap();
    browser
        .wait_for(
            "document.getElementById('dialog').open \
             && document.getElementById('dialog-title').textContent.includes('changed on disk') \
             && document.getElementById('dialog-diff').textContent.includes('+# from an editor')",
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), on_disk);
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
