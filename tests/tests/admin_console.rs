//! The admin console (`/admin`) on the real `opc run`, in headless Chromium: the Org page shows the
//! tree, and the Config editor shows the file and validates edits as they are typed, with each error
//! inline at its line and in the list of problems. Also the validation endpoint's contract: the same
//! object as `opc validate --format json`, and a clear error for a bad body.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::post_json as post;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{OutputWithin, WAIT, wait_until};
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// Where the tests that call no model point the org's provider: nothing listens there.
const NO_LLM: &str = "http://127.0.0.1:9";

/// The test org, with the web chat, pointed at the model at `llm_url`.
fn org_at(llm_url: &str) -> TestOrg {
    TestOrg::with_sections(llm_url, Wire::Anthropic, Execution::default(), WEB)
}

/// The test org (no model is called: these tests only read and validate the config) under `opc run`.
fn start() -> (TestOrg, OpcRun) {
    let org = org_at(NO_LLM);
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
        .output_within(WAIT)
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_answers_what_opc_validate_prints() {
    let (org, opc) = start();
    let text = std::fs::read_to_string(org.config_path()).unwrap();
    let broken = text.replacen("vp-eng", "vp-engg", 1);
    for candidate in [text.as_str(), broken.as_str(), "framework: [", ""] {
        let (status, mut body) = post(
            &opc.url("/admin/api/config/validate"),
            json!({ "text": candidate }),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let mut expected = cli_validate(candidate);
        // The CLI names the file it read; the console names the running config's file.
        expected["file"] = body["file"].clone();
        // The console adds the hierarchy preview, which the CLI has no use for.
        assert!(body.as_object_mut().unwrap().remove("org").is_some());
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
    let (status, body) = admin_get_status(opc, path).await;
    assert!((200..300).contains(&status), "GET {path}: {status} {body}");
    body
}

/// `GET` `path` on the console: status and JSON answer (an error's body is `{"error": …}`).
async fn admin_get_status(opc: &OpcRun, path: &str) -> (u16, Value) {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The agent `id` in `/api/org`'s answer `org`, if it lists one.
fn agent<'a>(org: &'a Value, id: &str) -> Option<&'a Value> {
    org["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
}

/// The Config page's status once the editor's text validates.
const VALID: &str = "document.getElementById('config-status').textContent.startsWith('Valid')";

/// Wait until the page's JavaScript `condition` holds (or fail after [`WAIT`]).
async fn wait(browser: &mut Browser, condition: &str) {
    browser.wait_for(condition, WAIT).await.unwrap();
}

/// Run the JavaScript `js` on the page (its value unused).
async fn run(browser: &mut Browser, js: &str) {
    browser.eval(js).await.unwrap();
}

/// Click the page's element `element` (a JavaScript expression).
async fn click(browser: &mut Browser, element: &str) {
    run(browser, &format!("{element}.click(), true")).await;
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
    for bad in [
        "..%2Fopc.config.yaml",
        "audit.jsonl",
        ".hidden",
        "%00",
        &format!("{name}%00"),
        "no-such-version",
    ] {
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

/// One limit for every endpoint that takes a config text: over 4 MiB of text is 413 on each. And what
/// a save killed with -9 left behind is settled when `opc run` starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_config_is_413_on_every_endpoint_and_a_crashed_save_is_settled_at_start() {
    let org = org_at(NO_LLM);
    // What a save killed with -9 leaves: its temporary file (of a process that no longer runs: a pid
    // above Linux's largest), and a kept copy not yet recorded.
    let dir = org.config_path().parent().unwrap().to_path_buf();
    let temp = dir.join(".opc.config.yaml.saving-4194305");
    std::fs::write(&temp, "half a config").unwrap();
    let history = dir.join(".opc/config-history");
    std::fs::create_dir_all(&history).unwrap();
    let copy = "2026-01-02T00-00-00.000Z-opc.config.yaml";
    std::fs::write(
        history.join(format!(".{copy}.pending-4194305")),
        "an earlier version\n",
    )
    .unwrap();
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    assert!(!temp.exists(), "the temporary file is removed at start");
    let listed = admin_get(&opc, "/admin/api/config/history").await;
    assert_eq!(listed["versions"][0]["name"], copy, "{listed}");
    let audit = std::fs::read_to_string(history.join("audit.jsonl")).unwrap();
    assert!(audit.contains(copy), "the copy has its audit line: {audit}");
    assert!(opc.stderr().contains(".saving-4194305"), "{}", opc.stderr());

    let text = std::fs::read_to_string(org.config_path()).unwrap();
    let loaded = admin_get(&opc, "/admin/api/config").await;
    let big = format!("{text}#{}\n", "x".repeat(4 << 20));
    let action = json!({"kind": "remove_agent", "id": "qa"});
    for (path, body) in [
        ("/admin/api/config/validate", json!({"text": big})),
        (
            "/admin/api/config/edit",
            json!({"text": big, "action": action}),
        ),
        ("/admin/api/config/diff", json!({"text": big})),
        (
            "/admin/api/config/save",
            json!({"text": big, "etag": loaded["etag"]}),
        ),
        (
            "/admin/api/config/save",
            json!({"text": text, "etag": loaded["etag"], "base": big}),
        ),
    ] {
        let (status, answer) = admin_post(&opc, path, body).await;
        assert_eq!(status, 413, "{path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("4 MiB"),
            "{path}: {answer}"
        );
    }
    // Nothing was written.
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), text);
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
    wait(
        &mut browser,
        "document.querySelectorAll('#org-tree button[data-agent]').length > 3",
    )
    .await;
    let root = browser
        .eval("document.querySelector('#org-tree > li > button').dataset.agent")
        .await
        .unwrap();
    assert_eq!(root, "ceo");

    // The Config page shows the file.
    let text = std::fs::read_to_string(org.config_path()).unwrap();
    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    wait(
        &mut browser,
        "document.getElementById('config-text').value.length > 0 \
             && document.getElementById('config-status').textContent.startsWith('Valid')",
    )
    .await;
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
    run(
        &mut browser,
        &format!(
            "(() => {{ const t = document.getElementById('config-text'); t.focus(); \
             t.setSelectionRange({at}, {at}); return true; }})()"
        ),
    )
    .await;
    browser.type_text("x").await.unwrap();
    let line = line_no + 1;
    wait(&mut browser, &format!(
                "document.getElementById('config-status').textContent.includes('error') \
                 && [...document.querySelectorAll('#gutter .e')].some(e => e.textContent === '{line}') \
                 && document.querySelectorAll('#notes .note.e').length > 0"
            )).await;
    let listed = browser
        .eval("document.getElementById('problems').textContent")
        .await
        .unwrap();
    let listed = listed.as_str().unwrap();
    assert!(listed.contains(&format!("line {line},")), "{listed}");
    assert!(listed.contains(&format!("{child}x")), "{listed}");

    // Fixing it clears the problems.
    run(
        &mut browser,
        "(() => { const t = document.getElementById('config-text'); \
             t.setRangeText('', t.selectionStart - 1, t.selectionStart, 'end'); \
             t.dispatchEvent(new Event('input')); return true; })()",
    )
    .await;
    wait(
        &mut browser,
        "document.getElementById('config-status').textContent.startsWith('Valid') \
             && document.querySelectorAll('#gutter .e').length === 0",
    )
    .await;
    // Nothing was written: validation never touches the file.
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), text);

    // An edit, while someone changes the file on disk: Save shows the diff, then the conflict with
    // the change made on disk, and the file keeps that change.
    run(
        &mut browser,
        "(() => { const t = document.getElementById('config-text'); \
             t.value = '# from the console\\n' + t.value; \
             t.dispatchEvent(new Event('input')); return true; })()",
    )
    .await;
    wait(&mut browser, "!document.getElementById('save').disabled").await;
    let on_disk = format!("# from an editor\n{text}");
    std::fs::write(org.config_path(), &on_disk).unwrap();
    save_after_diff(&mut browser, "+# from the console").await;
    wait(
        &mut browser,
        "document.getElementById('dialog').open \
             && document.getElementById('dialog-title').textContent.includes('changed on disk') \
             && document.getElementById('dialog-diff').textContent.includes('+# from an editor')",
    )
    .await;
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), on_disk);
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// `opc run` of the test org against `llm`, with the web chat.
fn start_with(llm: &ScriptedLlm) -> (TestOrg, OpcRun) {
    let org = org_at(&llm.url());
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    (org, opc)
}

/// The test org's text with a new agent `qa` under `vp-ops`, listed as `child` in its children.
fn with_qa(text: &str, child: &str) -> String {
    text.replacen(
        "    children: [support]\n",
        &format!("    children: [support, {child}]\n"),
        1,
    )
    .replacen(
        "agents:\n",
        "agents:\n  qa:\n    role: QA Lead\n    level: 2\n    parent: vp-ops\n    tools: [escalate]\n    memory: { recall: false }\n",
        1,
    )
}

/// Click Save, check its diff shows `line`, and confirm.
async fn save_after_diff(browser: &mut Browser, line: &str) {
    click(browser, "document.getElementById('save')").await;
    wait(
        browser,
        &format!(
            "document.getElementById('dialog').open \
                 && document.getElementById('dialog-diff').textContent.includes({})",
            serde_json::to_string(line).unwrap()
        ),
    )
    .await;
    click(browser, "document.getElementById('dialog-ok')").await;
}

/// Replace `file` as editors do (a new file renamed over it), so the watcher never reads half of it.
fn replace_file(file: &std::path::Path, text: &str) {
    let temp = file.with_extension("yaml.tmp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, file).unwrap();
}

/// Replace the editor's text as a paste would (its input handler runs).
async fn set_editor(browser: &mut Browser, text: &str) {
    let js = format!(
        "(() => {{ const t = document.getElementById('config-text'); t.value = {}; \
         t.dispatchEvent(new Event('input')); return true; }})()",
        serde_json::to_string(text).unwrap()
    );
    run(browser, &js).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_save_is_applied_live_while_a_conversation_runs() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let llm = ScriptedLlm::start(Script::new().agent(
        marker("ceo"),
        vec![Step::text("answered across the reload")],
    ))
    .await
    .unwrap();
    let (org, opc) = start_with(&llm);
    let text = std::fs::read_to_string(org.config_path()).unwrap();

    // A conversation is in flight: its model call has arrived and is held.
    llm.hold();
    let (_, mut sse) = opc_tests::web_chat::start(&opc, "Status report, please").await;
    wait_until(WAIT, "the CEO's model call arrives", || {
        !llm.requests_for(&marker("ceo")).is_empty()
    })
    .await;

    // Add an agent with a typo in its parent's children: the error shows inline …
    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    wait(&mut browser, VALID).await;
    set_editor(&mut browser, &with_qa(&text, "qx")).await;
    let typo_line = with_qa(&text, "qx")
        .lines()
        .position(|l| l.contains("[support, qx]"))
        .unwrap()
        + 1;
    wait(&mut browser, &format!(
                "[...document.querySelectorAll('#gutter .e')].some(e => e.textContent === '{typo_line}')"
            )).await;
    // … fixed, it validates, and Save (after its diff) applies it to the running process.
    let fixed = with_qa(&text, "qa");
    set_editor(&mut browser, &fixed).await;
    wait(
        &mut browser,
        "document.getElementById('config-status').textContent.startsWith('Valid') \
             && !document.getElementById('save').disabled",
    )
    .await;
    save_after_diff(&mut browser, "+  qa:").await;
    wait(
        &mut browser,
        "document.getElementById('config-status').textContent.includes('Applied') \
             && document.getElementById('config-status').textContent.includes('added qa')",
    )
    .await;
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), fixed);

    // The Org page shows the new agent, from the same process.
    browser.navigate(&opc.url("/admin#org")).await.unwrap();
    wait(
        &mut browser,
        "!!document.querySelector('#org-tree button[data-agent=qa]')",
    )
    .await;
    let org_now = admin_get(&opc, "/api/org").await;
    assert_eq!(org_now["generation"], 2);
    assert!(agent(&org_now, "qa").is_some_and(|a| a["parent"] == "vp-ops"));

    // The conversation that was running during the save completes, once.
    llm.release();
    sse.wait_for("message|edit", WAIT, |e| {
        e["text"].as_str() == Some("answered across the reload")
    })
    .await;
    assert_eq!(llm.requests_for(&marker("ceo")).len(), 1);
    let (code, stdout) = opc.stop();
    assert_eq!(code, Some(0), "{stdout}");
}

/// GET `path` until `done` holds for its JSON, or panic after [`WAIT`] naming `what`.
async fn poll(opc: &OpcRun, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    opc_tests::wait::within(WAIT, what, async {
        loop {
            let body = admin_get(opc, path).await;
            if done(&body) {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_change_on_disk_is_refused_and_the_running_config_stays() {
    let (org, opc) = start();
    let file = org.config_path();
    let text = std::fs::read_to_string(&file).unwrap();

    // A valid change on disk is applied (the watcher); then SIGHUP with nothing changed does nothing.
    replace_file(&file, &with_qa(&text, "qa"));
    let applied = poll(&opc, "/api/org", "the watcher applies the change", |org| {
        org["generation"] == 2
    })
    .await;
    assert!(agent(&applied, "qa").is_some());

    // An invalid one is refused: the org stays, the console's status says why.
    replace_file(&file, &with_qa(&text, "qx"));
    let status = poll(
        &opc,
        "/admin/api/reload",
        "the watcher refuses the change",
        |s| s["stale"] == true,
    )
    .await;
    assert_eq!(status["generation"], 2);
    assert_eq!(status["last"]["outcome"], "rejected");
    assert_eq!(status["last"]["trigger"], "file");
    assert!(
        status["last"]["message"]
            .as_str()
            .unwrap()
            .contains("`qx` is not an agent"),
        "{status}"
    );
    let org_now = admin_get(&opc, "/api/org").await;
    assert_eq!(org_now["generation"], 2);
    assert!(agent(&org_now, "qa").is_some());

    // Back to the original file, by SIGHUP this time (the watcher may see it first: either applies
    // it once).
    replace_file(&file, &text);
    let pid = opc.pid().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let back = poll(&opc, "/api/org", "the original org is back", |org| {
        org["generation"] == 3
    })
    .await;
    assert!(agent(&back, "qa").is_none());
    let status = admin_get(&opc, "/admin/api/reload").await;
    assert_eq!(status["stale"], false, "{status}");
    let stderr = opc.stderr();
    assert!(
        stderr.contains("reload (file) refused — the running config stays"),
        "{stderr}"
    );
    assert!(stderr.contains("`qx` is not an agent"), "{stderr}");
    let (code, stdout) = opc.stop();
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("config reloaded (file) — generation 2, 8 agents; added qa"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_add_agent_action_changes_only_the_lines_it_must() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let (org, opc) = start();
    let file = org.config_path();
    let before = std::fs::read_to_string(&file).unwrap();

    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    wait(&mut browser, VALID).await;
    // The form, filled in as a person would, applied to the editor.
    click(&mut browser, "document.getElementById('org-action')").await;
    wait(&mut browser, "document.getElementById('edit-dialog').open").await;
    run(
        &mut browser,
        "(() => { \
             const set = (id, v) => { const e = document.getElementById(id); e.value = v; \
               e.dispatchEvent(new Event('change')); }; \
             set('edit-kind', 'add_agent'); set('edit-id', 'qa'); set('edit-parent', 'vp-ops'); \
             set('edit-role', 'QA Lead'); set('edit-value', 'escalate'); \
             document.getElementById('edit-ok').click(); return true; })()",
    )
    .await;
    wait(
        &mut browser,
        "!document.getElementById('edit-dialog').open \
             && document.getElementById('config-text').value.includes('  qa:\\n') \
             && document.getElementById('config-status').textContent.startsWith('Valid') \
             && !document.getElementById('save').disabled",
    )
    .await;
    save_after_diff(&mut browser, "+  qa:").await;
    wait(
        &mut browser,
        "document.getElementById('config-status').textContent.includes('added qa')",
    )
    .await;

    // On disk: every line of the file as it was, byte for byte, except the parent's `children:`
    // line, which gained `qa`; and the new agent's lines.
    let after = std::fs::read_to_string(&file).unwrap();
    let diff = similar::TextDiff::from_lines(&before, &after);
    let removed: Vec<&str> = diff
        .iter_all_changes()
        .filter(|c| c.tag() == similar::ChangeTag::Delete)
        .map(|c| c.value())
        .collect();
    let added: Vec<&str> = diff
        .iter_all_changes()
        .filter(|c| c.tag() == similar::ChangeTag::Insert)
        .map(|c| c.value())
        .collect();
    assert_eq!(removed, vec!["    children: [support]\n"], "{after}");
    assert_eq!(
        added,
        vec![
            "    children: [support, qa]\n",
            "  qa:\n",
            "    role: QA Lead\n",
            "    level: 2\n",
            "    parent: vp-ops\n",
            "    tools: [escalate]\n",
        ],
        "{after}"
    );
    // And the running org has it.
    let org_now = admin_get(&opc, "/api/org").await;
    assert!(agent(&org_now, "qa").is_some_and(|a| a["parent"] == "vp-ops"));
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
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

/// Show `page` and wait until `ready` holds.
async fn open_page(browser: &mut Browser, opc: &OpcRun, page: &str, ready: &str) {
    browser
        .navigate(&opc.url(&format!("/admin#{page}")))
        .await
        .unwrap();
    wait(browser, ready).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_pages_follow_a_request_through_an_approval_and_a_cancel() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let llm = ScriptedLlm::start(opc_tests::org::approval_chain())
        .await
        .unwrap();
    let (_org, opc) = start_with(&llm);

    // The event stream is open before anything happens.
    open_page(
        &mut browser,
        &opc,
        "events",
        "document.getElementById('event-state').textContent.startsWith('Live')",
    )
    .await;
    let (_, mut sse) =
        opc_tests::web_chat::start(&opc, "Refund order 7 for jane.doe@example.com").await;
    wait(&mut browser, "[...document.querySelectorAll('#event-list tr[data-kind=approval_requested]')].length === 1 \
             && [...document.querySelectorAll('#event-list tr[data-kind=delegated]')].length === 2").await;
    // Filtered by agent: only support's events.
    run(
        &mut browser,
        "(() => { const a = document.getElementById('event-agent'); a.value = 'support'; \
             a.dispatchEvent(new Event('input')); return true; })()",
    )
    .await;
    let shown = browser
        .eval(
            "[...document.querySelectorAll('#event-list tbody tr')].filter(r => !r.hidden).map(r => r.dataset.agent)",
        )
        .await
        .unwrap();
    assert!(
        shown.as_array().unwrap().iter().all(|a| a == "support")
            && !shown.as_array().unwrap().is_empty(),
        "{shown}"
    );
    screenshot(&mut browser, "events", 1280, 800).await;

    // The Org page: who waits on whom.
    open_page(
        &mut browser,
        &opc,
        "org",
        "document.querySelector('#org-tree button[data-agent=support] .state').textContent === 'waiting on approval' \
         && document.querySelector('#org-tree button[data-agent=vp-ops] .state').textContent === 'waiting on children'",
    )
    .await;
    click(
        &mut browser,
        "document.querySelector('#org-tree button[data-agent=support]')",
    )
    .await;
    wait(
        &mut browser,
        "document.getElementById('agent').textContent.includes('Tasks in flight')",
    )
    .await;
    screenshot(&mut browser, "org-phone", 390, 844).await;

    // The Approvals page decides it, once.
    open_page(
        &mut browser,
        &opc,
        "approvals",
        "!!document.querySelector('#approval-list button[data-decide=approve]')",
    )
    .await;
    screenshot(&mut browser, "approvals", 1280, 800).await;
    click(
        &mut browser,
        "document.querySelector('#approval-list button[data-decide=approve]')",
    )
    .await;
    sse.wait_for("message|edit", WAIT, |e| {
        e["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("CEO: VP: SUPPORT:"))
    })
    .await;
    wait(&mut browser, "!document.querySelector('#approval-list button[data-decide]') \
             && document.getElementById('approval-list').textContent.includes('console (loopback)')").await;

    // The Tasks page: the request, completed, and its tree with every agent and its calls.
    open_page(
        &mut browser,
        &opc,
        "tasks",
        "!!document.querySelector('#task-list tbody tr[data-task]')",
    )
    .await;
    click(
        &mut browser,
        "document.querySelector('#task-list tbody tr[data-task]')",
    )
    .await;
    wait(&mut browser, "['ceo', 'vp-ops', 'support'].every(a => [...document.querySelectorAll('#task-detail .node .head strong')].some(s => s.textContent === a)) \
             && document.getElementById('task-detail').textContent.includes('approval #') \
             && document.getElementById('task-detail').textContent.includes('completed')").await;
    screenshot(&mut browser, "tasks", 1280, 800).await;

    // Costs by agent, model and platform; the Channels page counts the web chat's events.
    open_page(
        &mut browser,
        &opc,
        "costs",
        "document.getElementById('costs').textContent.includes('most expensive agent') \
         && document.querySelector('#costs table[aria-label=Platform]').textContent.includes('web') \
         && document.querySelector('#costs table[aria-label=Work]').textContent.includes('tasks')",
    )
    .await;
    screenshot(&mut browser, "costs", 1280, 800).await;
    open_page(
        &mut browser,
        &opc,
        "channels",
        "!!document.querySelector('#channel-list [data-platform=web]') \
         && /[1-9]\\d* events? received/.test(document.getElementById('channel-list').textContent)",
    )
    .await;
    screenshot(&mut browser, "channels", 1280, 800).await;
    // Memory: the core blocks (this org defines none: the page says so), and a search of recall
    // memory as the root sees it.
    open_page(
        &mut browser,
        &opc,
        "memory",
        "document.getElementById('blocks').hasAttribute('data-loaded') \
         && !!document.querySelector('#blocks [data-blocks-empty]') \
         && !document.querySelector('#blocks [data-block]')",
    )
    .await;
    run(&mut browser, "(() => { document.getElementById('memory-q').value = 'refund order'; \
             document.querySelector('#memory-search button[type=submit]').click(); return true; })()").await;
    wait(&mut browser, "[...document.querySelectorAll('#memory-hits li')].some(li => li.textContent.includes('Refund order 7'))").await;
    // Privacy: the e-mail address in the request was masked in the CEO's calls; the page counts it
    // by type and never shows it.
    open_page(
        &mut browser,
        &opc,
        "privacy",
        "document.getElementById('privacy-summary').textContent.includes('privacy gateway is on') \
         && document.querySelector('#privacy-days thead').textContent.includes('EMAIL')",
    )
    .await;
    let page = browser.eval("document.body.innerText").await.unwrap();
    assert!(
        !page.as_str().unwrap().contains("jane.doe"),
        "no value on the Privacy page"
    );
    open_page(&mut browser, &opc, "config", VALID).await;

    // A request in flight is cancelled from the Tasks page, with its tree.
    llm.hold();
    let (_, mut second) = opc_tests::web_chat::start(&opc, "Refund order 8").await;
    wait_until(WAIT, "the second request's model call", || {
        llm.requests_for(&marker("ceo")).len() == 3
    })
    .await;
    let row = "[...document.querySelectorAll('#task-list tbody tr[data-task]')].find(r => r.textContent.includes('Refund order 8'))";
    open_page(&mut browser, &opc, "tasks", &format!("!!{row}")).await;
    run(&mut browser, &format!("{row}.click(), true")).await;
    wait(&mut browser, "!!document.getElementById('cancel-task')").await;
    click(&mut browser, "document.getElementById('cancel-task')").await;
    wait(&mut browser, "document.getElementById('dialog').open").await;
    click(&mut browser, "document.getElementById('dialog-ok')").await;
    wait(&mut browser, "document.getElementById('task-status').textContent.startsWith('Cancelled request') \
             && document.getElementById('task-detail').textContent.includes('cancelled by a human')").await;
    second
        .wait_for("message|edit|notice", WAIT, |e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.to_lowercase().contains("cancel"))
        })
        .await;
    llm.release();
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// The database `opc run` of `org` uses (`framework.memory.path`, resolved as `opc` resolves it).
fn database(org: &TestOrg) -> std::path::PathBuf {
    let loaded = opc_hierarchy::load(&org.config_path()).unwrap();
    loaded.base_dir.join(&loaded.config.framework.memory.path)
}

/// The Memory page's facts API on the real `opc run`: an agent's facts current, as believed at a
/// time, as true in the world at a time, and every version, and one fact's versions — the same
/// objects as `opc memory facts --format json` — with clear 400/404 answers for bad input. The facts
/// are written by a store of the test's own while `opc run` holds the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_page_lists_facts_in_every_view_with_a_facts_history() {
    use opc_memory::facts::{FactStore, Op, Provenance};
    let (org, opc) = start();
    let ms = |t: &str| opc_memory::facts::time::parse_time(t).unwrap();
    // Before any fact: an empty list; the test org's agents keep no facts (archival off).
    let empty = admin_get(&opc, "/admin/api/memory/facts?agent=ceo").await;
    assert_eq!(empty["facts"], json!([]), "{empty}");
    assert_eq!(empty["archival"], false);
    assert_eq!(empty["view"], "current");

    let store = FactStore::open(&database(&org), opc_memory::embed::EmbedSlot::new()).unwrap();
    let provenance = |conversation: &str| Provenance {
        agent: "ceo".into(),
        conversation: Some(conversation.into()),
        ..Provenance::default()
    };
    let old = store
        .apply(
            "agent/ceo",
            &[Op::Add {
                text: "The launch is on May 3rd".into(),
                subject: Some("launch".into()),
                predicate: None,
                object: None,
                valid_from: Some(ms("2026-05-03")),
                valid_to: None,
            }],
            &provenance("web:first"),
            ms("2026-04-01T10:00:00Z"),
        )
        .unwrap()
        .added[0];
    let (_, new) = store
        .apply(
            "agent/ceo",
            &[Op::Update {
                target: old,
                text: "The launch moved to May 17th".into(),
                subject: Some("launch".into()),
                predicate: None,
                object: None,
                valid_from: Some(ms("2026-05-17")),
                valid_to: None,
                reason: Some("moved".into()),
            }],
            &provenance("web:second"),
            ms("2026-04-02T10:00:00Z"),
        )
        .unwrap()
        .updated[0];

    let texts = |answer: &Value| -> Vec<String> {
        answer["facts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["text"].as_str().unwrap().to_string())
            .collect()
    };
    // The root by default.
    let current = admin_get(&opc, "/admin/api/memory/facts").await;
    assert_eq!(current["agent"], "ceo");
    assert_eq!(texts(&current), ["The launch moved to May 17th"]);
    assert_eq!(current["facts"][0]["id"], new);
    assert_eq!(current["facts"][0]["conversation"], "web:second");
    let before = admin_get(
        &opc,
        "/admin/api/memory/facts?agent=ceo&at=2026-04-01T12:00:00Z",
    )
    .await;
    assert_eq!(texts(&before), ["The launch is on May 3rd"]);
    assert_eq!(before["view"], "at");
    assert_eq!(before["time"], "2026-04-01T12:00:00Z");
    let world = admin_get(
        &opc,
        "/admin/api/memory/facts?agent=ceo&valid_at=2026-05-10",
    )
    .await;
    assert_eq!(texts(&world), Vec::<String>::new(), "{world}");
    let history = admin_get(&opc, "/admin/api/memory/facts?agent=ceo&history=true").await;
    assert_eq!(history["facts"].as_array().unwrap().len(), 2, "{history}");

    // One fact's versions, oldest first: the old one closed, with its own conversation.
    let fact = current["facts"][0]["fact_id"].as_i64().unwrap();
    let versions = admin_get(&opc, &format!("/admin/api/memory/facts/{fact}")).await;
    assert_eq!(versions["fact_id"], fact);
    let list = versions["versions"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{versions}");
    assert_eq!(list[0]["id"], old);
    assert_eq!(list[0]["invalidated_at"], "2026-04-02T10:00:00Z");
    assert_eq!(list[0]["valid_to"], "2026-05-17T00:00:00Z");
    assert_eq!(list[0]["conversation"], "web:first");
    assert_eq!(list[1]["id"], new);
    assert_eq!(list[1]["invalidated_at"], Value::Null);
    assert_eq!(list[1]["reason"], "moved");

    // Bad input says what was wrong.
    for (path, status, says) in [
        (
            "/admin/api/memory/facts?agent=ceo&at=2026-05-03&history=true",
            400,
            "at most one",
        ),
        (
            "/admin/api/memory/facts?agent=ceo&at=2026-05-03&valid_at=2026-05-03",
            400,
            "at most one",
        ),
        ("/admin/api/memory/facts?at=soon", 400, "is not a time"),
        ("/admin/api/memory/facts?history=maybe", 400, "history=true"),
        (
            "/admin/api/memory/facts?agent=nobody",
            404,
            "no agent `nobody`",
        ),
        ("/admin/api/memory/facts/987654", 404, "no fact 987654"),
        ("/admin/api/memory/facts/seven", 400, "is a number"),
    ] {
        let (code, answer) = admin_get_status(&opc, path).await;
        assert_eq!(code, status, "{path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap_or("").contains(says),
            "{path}: {answer}"
        );
    }

    // The page: the current fact on load; every version; a row opens the fact's versions.
    if let Some(mut browser) = Browser::for_test().await {
        open_page(
            &mut browser,
            &opc,
            "memory",
            "document.querySelectorAll('#fact-list tbody tr[data-fact]').length === 1 \
             && document.getElementById('fact-list').textContent.includes('May 17th') \
             && document.getElementById('facts-status').textContent.includes('Archival memory is off for ceo')",
        )
        .await;
        run(&mut browser, "(() => { const v = document.getElementById('facts-view'); v.value = 'history'; \
                 v.dispatchEvent(new Event('change')); \
                 document.querySelector('#facts-form button[type=submit]').click(); return true; })()").await;
        wait(
            &mut browser,
            "document.querySelectorAll('#fact-list tbody tr[data-fact]').length === 2",
        )
        .await;
        click(
            &mut browser,
            "document.querySelector('#fact-list tbody tr[data-fact]')",
        )
        .await;
        wait(&mut browser, "[...document.querySelectorAll('#fact-versions li')].map(li => li.dataset.state).join() === 'closed,current' \
                 && document.getElementById('fact-history').textContent.includes('reason: moved')").await;
        screenshot(&mut browser, "memory-facts", 1280, 800).await;
    }
    drop(store);
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// The Costs API shows memory work apart: a memory-work call recorded against a completed request
/// (as the memory worker records it) is in the totals, under `by_work.memory` and in
/// `memory_by_agent`, while the request's own calls are `by_work.task`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_show_memory_work_apart_from_task_work() {
    use opc_agents::Store;
    let script = Script::new().agent(marker("ceo"), vec![Step::text("Noted.")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let (org, opc) = start_with(&llm);
    let (_, mut sse) = opc_tests::web_chat::start(&opc, "Remember the launch").await;
    sse.wait_for("message|edit", WAIT, |e| e["text"] == "Noted.")
        .await;
    let tasks = poll(&opc, "/admin/api/tasks", "the completed request", |t| {
        t["tasks"][0]["state"] == "COMPLETED"
    })
    .await;
    let root = tasks["tasks"][0]["id"].as_i64().unwrap();
    let before = admin_get(&opc, "/admin/api/costs").await;
    let keys = |period: &Value, group: &str| -> Vec<String> {
        period[group]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys(&before["today"], "by_work"), ["task"], "{before}");
    assert_eq!(before["today"]["memory_by_agent"], json!([]));

    let store = opc_agents::SqliteStore::open(&database(&org)).unwrap();
    store
        .record_memory_call(&opc_agents::store::CallRecord {
            task_id: root,
            agent: "ceo".into(),
            model: "llm/test-model".into(),
            tokens_in: 1_000_000,
            tokens_out: 0,
            cost_usd: 1.0,
            usage_unknown: false,
            duration_ms: 5,
            attempts: 1,
            tool_calls: vec!["record_facts".into()],
            error: None,
            privacy: None,
        })
        .await
        .unwrap();
    let after = admin_get(&opc, "/admin/api/costs").await;
    for period in ["today", "week", "month"] {
        let p = &after[period];
        assert_eq!(keys(p, "by_work"), ["memory", "task"], "{period}: {after}");
        assert_eq!(p["by_work"][0]["calls"], 1);
        assert_eq!(p["by_work"][0]["tokens_in"], 1_000_000);
        assert_eq!(
            p["memory_by_agent"],
            json!([{"key": "ceo", "calls": 1, "tokens_in": 1_000_000, "tokens_out": 0, "cost_usd": 1.0}])
        );
        assert_eq!(
            p["total"]["calls"].as_u64().unwrap(),
            before[period]["total"]["calls"].as_u64().unwrap() + 1,
            "the totals hold both"
        );
    }
    // The request's own cost is not changed by memory work about it.
    let task = admin_get(&opc, &format!("/admin/api/tasks/{root}")).await;
    let own = task["totals"]["cost_usd"].as_f64().unwrap();
    assert!(own < 1.0, "{task}");
    let listed = admin_get(&opc, "/admin/api/tasks").await;
    assert_eq!(
        listed["tasks"][0]["cost_usd"].as_f64().unwrap(),
        own,
        "{listed}"
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
