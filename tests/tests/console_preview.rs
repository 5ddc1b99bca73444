//! The Config page's hierarchy preview on the real `opc run`, in headless Chromium: an agent typed
//! into the editor shows in the preview marked added before anything is saved (while the text still
//! has errors); an agent whose parent changes shows under its new parent marked moved; a deleted one
//! stays struck through, marked removed; a YAML syntax error keeps the last readable preview and says
//! why; a 1,000-agent org is drawn capped, with a note. Also the validation answer's `org`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::post_json as post;
use opc_tests::wait::WAIT;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// Nothing listens there: these tests call no model.
const NO_LLM: &str = "http://127.0.0.1:9";

fn start() -> (TestOrg, OpcRun) {
    let org = TestOrg::with_sections(NO_LLM, Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    (org, opc)
}

/// Wait until the page's JavaScript `condition` holds (or fail after [`WAIT`], naming it).
async fn wait(browser: &mut Browser, condition: &str) {
    if let Err(e) = browser.wait_for(condition, WAIT).await {
        let preview = browser
            .eval("document.getElementById('config-preview').innerText")
            .await;
        panic!("{e}: {condition}\nthe preview: {preview:?}");
    }
}

/// Put `text` in the editor as an edit would (its input handler validates it).
async fn set_text(browser: &mut Browser, text: &str) {
    let value = serde_json::to_string(text).unwrap();
    browser
        .eval(&format!(
            "(() => {{ const t = document.getElementById('config-text'); t.value = {value}; \
             t.dispatchEvent(new Event('input')); return true; }})()"
        ))
        .await
        .unwrap();
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

/// The new agent the tests type: under vp-ops, which does not list it yet (an error elsewhere).
const QA: &str =
    "  qa:\n    role: QA Lead\n    level: 2\n    parent: vp-ops\n    tools: [escalate]\n";

/// A config of `n` agents: a root and its managers, each with nine reports.
fn big_org(text: &str, n: usize) -> String {
    let start = text.find("agents:\n").unwrap();
    let end = text.find("channels:").unwrap();
    let mut agents = String::from("agents:\n");
    let managers = n / 10;
    let ids: Vec<String> = (0..managers).map(|m| format!("m{m}")).collect();
    agents += &format!(
        "  boss:\n    role: Boss\n    level: 0\n    tools: [delegate]\n    children: [{}]\n",
        ids.join(", ")
    );
    for m in 0..managers {
        let reports: Vec<String> = (0..9).map(|r| format!("w{m}-{r}")).collect();
        agents += &format!(
            "  m{m}:\n    role: Manager {m}\n    level: 1\n    parent: boss\n    tools: [delegate]\n    children: [{}]\n",
            reports.join(", ")
        );
        for r in &reports {
            agents += &format!("  {r}:\n    role: Worker\n    level: 2\n    parent: m{m}\n");
        }
    }
    format!("{}{agents}{}", &text[..start], &text[end..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_marks_added_moved_and_removed_agents_as_you_type() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let (org, opc) = start();
    let text = std::fs::read_to_string(org.config_path()).unwrap();

    // The answer behind it: the org as the text describes it, compared with the running one.
    let with_qa = text.replacen("  support:\n", &format!("{QA}  support:\n"), 1);
    let (status, body) = post(
        &opc.url("/admin/api/config/validate"),
        json!({ "text": with_qa }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let preview = &body["org"];
    assert_eq!(preview["readable"], true, "{preview}");
    assert_eq!(preview["root"], "ceo");
    assert_eq!(preview["compared"], true);
    assert_eq!(preview["total"], 8);
    let qa = preview["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "qa")
        .unwrap();
    assert_eq!(
        (&qa["change"], &qa["parent"], &qa["role"]),
        (&json!("added"), &json!("vp-ops"), &json!("QA Lead"))
    );
    let (_, body) = post(
        &opc.url("/admin/api/config/validate"),
        json!({ "text": "agents: [\n" }),
    )
    .await;
    assert_eq!(body["org"]["readable"], false);
    assert!(
        body["org"]["reason"]
            .as_str()
            .unwrap()
            .contains("not YAML at line"),
        "{body}"
    );

    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    wait(
        &mut browser,
        "document.getElementById('config-status').textContent.startsWith('Valid') \
         && !!document.querySelector('#config-preview [data-preview-agent=ceo] [data-preview-agent=support]')",
    )
    .await;
    assert_eq!(
        browser
            .eval("document.querySelectorAll('#config-preview [data-change]').length")
            .await
            .unwrap(),
        json!(0),
        "the file as running: nothing changed"
    );

    // Type a new agent into the editor, as a person would.
    let at = text.find("  support:\n").unwrap();
    browser
        .eval(&format!(
            "(() => {{ const t = document.getElementById('config-text'); t.focus(); \
             t.setSelectionRange({at}, {at}); return true; }})()"
        ))
        .await
        .unwrap();
    browser.type_text(QA).await.unwrap();
    wait(
        &mut browser,
        "!!document.querySelector('#config-preview [data-preview-agent=vp-ops] > ul > [data-preview-agent=qa][data-change=added]')",
    )
    .await;
    let badge = browser
        .eval("document.querySelector('[data-preview-agent=qa] .change').textContent")
        .await
        .unwrap();
    assert_eq!(badge, "added");
    // Not saved: the file is as it was.
    assert_eq!(std::fs::read_to_string(org.config_path()).unwrap(), text);

    // Move support under vp-eng (its parent only: vp-ops still lists it, an error the problems name).
    let moved = browser
        .eval("document.getElementById('config-text').value")
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .replacen(
            "    parent: vp-ops\n    tools: [escalate, requestApproval]",
            "    parent: vp-eng\n    tools: [escalate, requestApproval]",
            1,
        );
    // And remove dev-data.
    let removed = moved.replacen(
        "  dev-data:\n    role: Data Engineer\n    level: 3\n    parent: lead-backend\n    tools: [escalate]\n    memory: { recall: false }\n",
        "",
        1,
    );
    assert_ne!(removed, moved, "the test org has dev-data as expected");
    set_text(&mut browser, &removed).await;
    wait(
        &mut browser,
        "!!document.querySelector('#config-preview [data-preview-agent=vp-eng] > ul > [data-preview-agent=support][data-change=moved]') \
         && !!document.querySelector('#config-preview [data-preview-agent=lead-backend] [data-preview-agent=dev-data][data-change=removed] del')",
    )
    .await;
    assert_eq!(
        browser
            .eval("document.querySelector('[data-preview-agent=support] .change').textContent")
            .await
            .unwrap(),
        "moved from vp-ops"
    );
    assert_eq!(
        browser
            .eval("document.querySelector('[data-preview-agent=dev-data] .change').textContent")
            .await
            .unwrap(),
        "removed"
    );
    wait(
        &mut browser,
        "document.querySelector('#config-preview [role=status]').textContent.includes('1 added, 1 moved, 1 removed')",
    )
    .await;
    // The legend says what the marks mean, in words.
    let legend = browser
        .eval("document.querySelector('#config-preview .preview-legend').textContent")
        .await
        .unwrap();
    for word in ["added", "moved", "removed", "struck through"] {
        assert!(legend.as_str().unwrap().contains(word), "{legend}");
    }
    browser
        .eval("document.activeElement.blur(); window.scrollTo(0, 0); true")
        .await
        .unwrap();
    screenshot(&mut browser, "config", 1280, 800).await;

    // A syntax error elsewhere: the last readable preview stays, marked stale, and the page says why.
    let broken = removed.replacen("channels:\n", "channels: [\n", 1);
    set_text(&mut browser, &broken).await;
    wait(
        &mut browser,
        "document.getElementById('config-preview').classList.contains('stale') \
         && document.querySelector('#config-preview [role=status]').textContent.includes('not YAML at line') \
         && document.querySelector('#config-preview [role=status]').textContent.includes('last readable') \
         && !!document.querySelector('#config-preview [data-preview-agent=qa][data-change=added]')",
    )
    .await;
    // Fixed again: a fresh preview.
    set_text(&mut browser, &text).await;
    wait(
        &mut browser,
        "!document.getElementById('config-preview').classList.contains('stale') \
         && !document.querySelector('#config-preview [data-preview-agent=qa]') \
         && document.querySelectorAll('#config-preview [data-change]').length === 0",
    )
    .await;

    // A 1,000-agent org: drawn capped, with a note, the page still answering.
    let big = big_org(&text, 1000);
    let (_, body) = post(
        &opc.url("/admin/api/config/validate"),
        json!({ "text": big }),
    )
    .await;
    assert_eq!(body["org"]["total"], 1001, "{}", body["org"]["reason"]);
    set_text(&mut browser, &big).await;
    wait(
        &mut browser,
        "document.querySelector('#config-preview [role=status]').textContent.startsWith('1001 agents') \
         && document.querySelector('#config-preview [role=status]').textContent.includes('not shown')",
    )
    .await;
    let drawn = browser
        .eval("document.querySelectorAll('#config-preview [data-preview-agent]').length")
        .await
        .unwrap()
        .as_u64()
        .unwrap();
    // Every agent of the running org is removed in that text, and all 1,001 are new: 400 drawn.
    assert!((1..=400).contains(&drawn), "{drawn} drawn");
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// The validation answer's `org` when the agents are there but not a mapping, and when there are none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_says_why_agents_cannot_be_read() {
    let (_org, opc) = start();
    for (text, reason) in [
        ("framework: {}\n", "no `agents:`"),
        ("agents: [ceo]\n", "not a mapping"),
    ] {
        let (status, body) = post(
            &opc.url("/admin/api/config/validate"),
            json!({ "text": text }),
        )
        .await;
        assert_eq!(status, 200);
        let org: &Value = &body["org"];
        assert_eq!(org["readable"], false, "{org}");
        assert!(org["reason"].as_str().unwrap().contains(reason), "{org}");
    }
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
