//! The console's Overview page (issue 40) on the real `opc run`, in headless Chromium: the cards render
//! with the right counts; while a request waits on an approval the page shows it (one approval
//! waiting, one active request, agents waiting) live, without a reload, and after the decision the
//! counts go back to 0; spend shows the ledger's total (the Costs page's); the last events are the
//! stored ones, with the live ones first.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::wait::WAIT;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

async fn get(opc: &OpcRun, path: &str) -> Value {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
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

/// The number a card shows for `selector` (its `data-count`).
fn count(card: &str, selector: &str) -> String {
    format!(
        "(document.querySelector('[data-overview-card={card}] {selector}') || {{dataset: {{}}}}).dataset.count"
    )
}

async fn wait(browser: &mut Browser, condition: &str) {
    browser.wait_for(condition, WAIT).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_follows_a_request_through_its_approval_live() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let llm = opc_tests::scripted_llm::ScriptedLlm::start(opc_tests::org::approval_chain())
        .await
        .unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let agents = org.loaded.config.agents.len();

    // The first page: nothing running, every agent idle, nothing spent.
    browser.navigate(&opc.url("/admin")).await.unwrap();
    let requests = count("requests", "[data-count]");
    let approvals = count("approvals", "[data-count]");
    let state = |s: &str| count("agents", &format!("[data-state={s}]"));
    wait(
        &mut browser,
        &format!(
            "!document.getElementById('page-overview').hidden && {requests} === '0' && {approvals} === '0' \
             && {} === '{agents}' && {} === '0' && {} === '0' && {} === '0'",
            state("idle"),
            state("working"),
            state("waiting"),
            state("failed")
        ),
    )
    .await;
    for card in [
        "requests",
        "agents",
        "approvals",
        "spend",
        "providers",
        "ner",
        "events",
    ] {
        let found = browser
            .eval(&format!("!!document.querySelector('[data-overview][id=page-overview] [data-overview-card={card}]')"))
            .await
            .unwrap();
        assert_eq!(found, true, "the {card} card");
    }
    let provider = browser
        .eval("document.querySelector('[data-overview-card=providers] [data-provider=llm]').dataset.health")
        .await
        .unwrap();
    assert_eq!(provider, "ok", "the key is set and no call failed");

    // A request that waits on an approval shows up without a reload.
    let (_, mut sse) = opc_tests::web_chat::start(&opc, "Refund order 7").await;
    let (approval, _) = opc_tests::web_chat::pending_approval(&mut sse).await;
    wait(
        &mut browser,
        &format!(
            "{requests} === '1' && {approvals} === '1' && {} === '3' \
             && !!document.querySelector('[data-overview-card=approvals] [data-approval=\"{approval}\"]') \
             && !!document.querySelector('#overview-events [data-kind=approval_requested]')",
            state("waiting")
        ),
    )
    .await;
    let overview = get(&opc, "/admin/api/overview").await;
    assert_eq!(overview["approvals"]["waiting"], 1, "{overview}");
    assert_eq!(overview["requests"]["active"], 1, "{overview}");
    assert_eq!(
        overview["agents"]["waiting"], 3,
        "ceo, vp-ops and support: {overview}"
    );
    assert!(overview["approvals"]["list"][0]["age_ms"].as_i64().unwrap() >= 0);
    screenshot(&mut browser, "overview", 1280, 800).await;

    // Decided: back to 0, live.
    let (status, body) = opc_tests::post_json(
        &opc.url(&format!("/admin/api/approvals/{approval}")),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    sse.wait_for("message|edit", WAIT, |e| {
        e["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("CEO: VP: SUPPORT:"))
    })
    .await;
    wait(
        &mut browser,
        &format!(
            "{requests} === '0' && {approvals} === '0' && {} === '{agents}' \
             && !!document.querySelector('#overview-events [data-kind=agent_finished][data-event]:not([data-event=\"\"])')",
            state("idle")
        ),
    )
    .await;

    // Spend: the ledger's total, as the Costs page has it.
    let costs = get(&opc, "/admin/api/costs").await;
    let today = costs["today"]["total"]["cost_usd"].as_f64().unwrap();
    let week = costs["week"]["total"]["cost_usd"].as_f64().unwrap();
    assert!(today > 0.0, "the scripted calls cost something: {costs}");
    wait(
        &mut browser,
        "document.querySelector('[data-overview-card=spend] [data-period=today]') !== null",
    )
    .await;
    let shown = browser
        .eval("[Number(document.querySelector('[data-overview-card=spend] [data-period=today]').dataset.count), \
               Number(document.querySelector('[data-overview-card=spend] [data-period=week]').dataset.count)]")
        .await
        .unwrap();
    let shown: Vec<f64> = shown
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!((shown[0] - today).abs() < 1e-9, "{shown:?} vs {today}");
    assert!((shown[1] - week).abs() < 1e-9, "{shown:?} vs {week}");
    // The last events: at most 20, the stored ones by id.
    let overview = get(&opc, "/admin/api/overview").await;
    let events = overview["events"].as_array().unwrap();
    assert!(!events.is_empty() && events.len() <= 20);
    // (Memory work after the request may record more events between the two reads.)
    let history = get(&opc, "/admin/api/events/history?limit=100").await;
    let stored = history["events"].as_array().unwrap();
    let first = stored.iter().position(|e| e == &events[0]).unwrap();
    assert_eq!(
        &stored[first..first + events.len()],
        events.as_slice(),
        "the newest stored events"
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
