//! The console's stored events (issue 40, Logs) on the real `opc run` with the scripted LLM:
//! - a request with two delegations and an approval is recorded, in order, with its request, task and
//!   agent; the history filters by request, task, agent, kind and time (and their combinations),
//!   pages with `before` completely and without duplicates, exports the same events as JSON lines,
//!   and answers 400 to bad parameters, saying which;
//! - no answer text is stored;
//! - what was pending at a clean stop is written, and the history outlives a restart;
//! - events older than `framework.console.eventRetention` are purged at start;
//! - on PostgreSQL each event is tagged with the node that recorded it;
//! - the Events page's history in Chromium: filter form, rows, export link, older pages.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire, marker, relay};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::WAIT;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

fn org_at(llm_url: &str) -> TestOrg {
    TestOrg::with_sections(llm_url, Wire::Anthropic, Execution::default(), WEB)
}

/// `GET` `path`: status and JSON answer.
async fn get(opc: &OpcRun, path: &str) -> (u16, Value) {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The history's events for `query` (one page).
async fn history(opc: &OpcRun, query: &str) -> Vec<Value> {
    let (status, body) = get(opc, &format!("/admin/api/events/history?{query}")).await;
    assert_eq!(status, 200, "{query}: {body}");
    body["events"].as_array().unwrap().clone()
}

fn ids(events: &[Value]) -> Vec<i64> {
    events.iter().map(|e| e["id"].as_i64().unwrap()).collect()
}

/// Poll the history for `query` until `done` holds of its events (or fail after WAIT).
async fn poll(
    opc: &OpcRun,
    query: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let events = history(opc, query).await;
        if done(&events) {
            return events;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {WAIT:?}; last: {events:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Run the approval chain's request to its answer, approving from the console; its root task id.
async fn refund(opc: &OpcRun, text: &str) -> i64 {
    let (_, mut sse) = opc_tests::web_chat::start(opc, text).await;
    let (approval, _) = opc_tests::web_chat::pending_approval(&mut sse).await;
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
    let (_, tasks) = get(opc, "/admin/api/tasks").await;
    tasks["tasks"][0]["id"].as_i64().unwrap()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_events_are_filtered_paged_exported_and_outlive_a_restart() {
    // Each request walks the script from its start.
    let llm = ScriptedLlm::start(opc_tests::org::approval_chain().per_conversation())
        .await
        .unwrap();
    let org = org_at(&llm.url());
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let root = refund(&opc, "Refund order 7 for jane.doe@example.com").await;

    // The whole request, in order (the history is newest first).
    let all = poll(
        &opc,
        &format!("request={root}&limit=1000"),
        "the root's finish",
        |e| {
            e.iter()
                .any(|e| e["kind"] == "agent_finished" && e["agent"] == "ceo")
        },
    )
    .await;
    let mut chronological = all.clone();
    chronological.reverse();
    let order = kinds(&chronological);
    assert_eq!(order.first(), Some(&"task_created"), "{order:?}");
    assert_eq!(order.last(), Some(&"agent_finished"), "{order:?}");
    assert_eq!(
        order.iter().filter(|k| **k == "delegated").count(),
        2,
        "{order:?}"
    );
    let at = |kind: &str| order.iter().position(|k| *k == kind).unwrap();
    assert!(
        at("approval_requested") < at("approval_resolved"),
        "{order:?}"
    );
    assert!(ids(&all).windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(
        all.windows(2)
            .all(|w| w[0]["at"].as_i64() >= w[1]["at"].as_i64()),
        "times follow the ids"
    );
    for e in &all {
        assert_eq!(e["request"], root, "{e}");
        assert_eq!(e["node"], Value::Null, "no node on SQLite: {e}");
        assert_eq!(e["data"]["event"], e["kind"], "{e}");
    }
    // No answer text, no value of the request's text.
    let text = serde_json::to_string(&all).unwrap();
    assert!(!text.contains("jane.doe"), "{text}");
    assert!(!text.contains("CEO: VP: SUPPORT"), "{text}");

    // Filters: task, agent, kind (comma-separated and repeated), time, and combined.
    let support_task = all
        .iter()
        .find(|e| e["kind"] == "delegated" && e["data"]["to"] == "support")
        .unwrap()["data"]["child"]
        .as_i64()
        .unwrap();
    let by_task = history(&opc, &format!("task={support_task}")).await;
    assert!(!by_task.is_empty());
    assert!(by_task.iter().all(|e| e["task"] == support_task));
    assert!(kinds(&by_task).contains(&"approval_requested"));
    let by_agent = history(&opc, "agent=support").await;
    assert!(by_agent.iter().all(|e| e["agent"] == "support"));
    assert_eq!(
        ids(&by_agent),
        ids(&all
            .iter()
            .filter(|e| e["agent"] == "support")
            .cloned()
            .collect::<Vec<_>>())
    );
    let two = history(&opc, "kind=delegated,approval_requested").await;
    let same = history(&opc, "kind=delegated&kind=approval_requested").await;
    assert_eq!(ids(&two), ids(&same));
    assert_eq!(two.len(), 3, "{two:?}");
    let asked = all
        .iter()
        .find(|e| e["kind"] == "approval_requested")
        .unwrap();
    let asked_at = asked["at"].as_i64().unwrap();
    let after = history(&opc, &format!("request={root}&from={asked_at}&limit=1000")).await;
    assert!(!after.is_empty() && after.iter().all(|e| e["at"].as_i64().unwrap() >= asked_at));
    let before = history(&opc, &format!("request={root}&to={asked_at}&limit=1000")).await;
    assert!(before.iter().all(|e| e["at"].as_i64().unwrap() <= asked_at));
    assert_eq!(
        after.len() + before.len() - all.iter().filter(|e| e["at"] == asked_at).count(),
        all.len(),
        "from and to split the request at one time"
    );
    // RFC 3339 is a time too.
    let rfc = opc_memory::facts::time::format_time(asked_at);
    let rfc_after = history(&opc, &format!("request={root}&from={rfc}&limit=1000")).await;
    assert_eq!(ids(&rfc_after), ids(&after));
    let combined = history(
        &opc,
        &format!("request={root}&agent=ceo&kind=agent_finished"),
    )
    .await;
    assert_eq!(combined.len(), 1, "{combined:?}");

    // Paging: complete, without duplicates, `more` false only at the end.
    let mut paged = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, body) = get(
            &opc,
            &format!("/admin/api/events/history?request={root}&limit=3{cursor}"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let page = body["events"].as_array().unwrap();
        paged.extend(ids(page));
        if body["more"] == false {
            break;
        }
        cursor = format!("&before={}", page.last().unwrap()["id"]);
    }
    assert_eq!(paged, ids(&all));

    // The export: JSON lines, the same events, as a download.
    let response = opc_tests::http_client()
        .get(opc.url(&format!(
            "/admin/api/events/history?request={root}&format=jsonl"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"opc-events.jsonl\""
    );
    assert_eq!(response.headers()["x-opc-export-capped"], "false");
    let body = response.text().await.unwrap();
    assert!(body.ends_with('\n'));
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    assert_eq!(lines, all, "the same events, one a line");

    // Bad parameters: 400, saying which.
    for (query, needle) in [
        ("request=abc", "`request`"),
        ("limit=5000", "`limit`"),
        ("from=yesterday", "`from`"),
        ("agnet=support", "`agnet`"),
        ("format=csv", "`format`"),
        ("from=2026-05-04&to=2026-05-03", "after `to`"),
    ] {
        let (status, body) = get(&opc, &format!("/admin/api/events/history?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(needle),
            "{query}: {body}"
        );
    }

    // A second request, then a stop at once: what was pending is written, and kept.
    let second = refund(&opc, "Refund order 8").await;
    let (code, stderr) = opc.stop();
    assert_eq!(code, Some(0), "{stderr}");

    // Old rows beside them: one past the 7-day retention, one within it.
    let db = rusqlite::Connection::open(database(&org)).unwrap();
    let now = opc_agents::store::now_ms();
    let day = 86_400_000;
    for (age, agent) in [(8 * day, "too-old"), (day, "recent")] {
        db.execute(
            "INSERT INTO console_events (at, kind, agent, data) VALUES (?1, 'agent_started', ?2, '{}')",
            rusqlite::params![now - age, agent],
        )
        .unwrap();
    }
    drop(db);

    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let kept = history(&opc, &format!("request={root}&limit=1000")).await;
    assert_eq!(kept, all, "the first request's events outlive the restart");
    let last = history(
        &opc,
        &format!("request={second}&agent=ceo&kind=agent_finished"),
    )
    .await;
    assert_eq!(
        last.len(),
        1,
        "the second request's last event was written at the stop"
    );
    poll(
        &opc,
        "agent=too-old",
        "the purge at start",
        <[Value]>::is_empty,
    )
    .await;
    assert_eq!(
        history(&opc, "agent=recent").await.len(),
        1,
        "within the retention"
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

fn database(org: &TestOrg) -> std::path::PathBuf {
    let loaded = opc_hierarchy::load(&org.config_path()).unwrap();
    loaded.base_dir.join(&loaded.config.framework.memory.path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_each_event_is_tagged_with_its_node_and_kept() {
    let Some(url) = opc_tests::postgres::fresh_database("console_logs_postgres").await else {
        return;
    };
    let llm = ScriptedLlm::start(
        Script::new()
            .agent(marker("ceo"), relay("vp-eng", "plan the page", "CEO: "))
            .agent(marker("vp-eng"), vec![Step::text("two sprints")]),
    )
    .await
    .unwrap();
    let org = TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Default::default(),
        &Extras {
            framework: "  memory:\n    storage: postgres\n",
            sections: WEB,
            ..Extras::default()
        },
    );
    let env = [(KEY_VAR, KEY), ("DATABASE_URL", url.as_str())];
    let opc = OpcRun::start_with_args(&org.config_path(), &["--node", "alpha"], &env);
    let (_, mut sse) = opc_tests::web_chat::start(&opc, "Plan a status page").await;
    sse.wait_for("message|edit", WAIT, |e| {
        e["text"].as_str() == Some("CEO: two sprints")
    })
    .await;
    let all = poll(&opc, "limit=1000", "the root's finish", |e| {
        e.iter()
            .any(|e| e["kind"] == "agent_finished" && e["agent"] == "ceo")
    })
    .await;
    assert!(all.iter().all(|e| e["node"] == "alpha"), "{all:?}");
    let delegated = history(&opc, "kind=delegated&agent=ceo").await;
    assert_eq!(delegated.len(), 1, "{delegated:?}");
    let root = delegated[0]["request"].as_i64().unwrap();
    let tree = history(&opc, &format!("request={root}&limit=1000")).await;
    assert_eq!(ids(&tree), ids(&all), "every event is the one request's");
    let (code, stderr) = opc.stop();
    assert_eq!(code, Some(0), "{stderr}");
    let opc = OpcRun::start_with_args(&org.config_path(), &["--node", "alpha"], &env);
    assert_eq!(
        history(&opc, "limit=1000").await,
        all,
        "kept across a restart"
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_page_filters_the_history_and_exports_it() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let llm = ScriptedLlm::start(opc_tests::org::approval_chain())
        .await
        .unwrap();
    let org = org_at(&llm.url());
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let root = refund(&opc, "Refund order 7").await;
    poll(
        &opc,
        &format!("request={root}&agent=ceo&kind=agent_finished"),
        "the root's finish",
        |e| !e.is_empty(),
    )
    .await;
    let stored = history(&opc, "limit=1000").await;

    browser.navigate(&opc.url("/admin#events")).await.unwrap();
    let rows = "document.querySelectorAll('#logs-table tbody tr[data-event]')";
    browser
        .wait_for(&format!("{rows}.length === {}", stored.len()), WAIT)
        .await
        .unwrap();
    // Filter by agent and kind through the form.
    browser
        .eval(
            "(() => { document.querySelector('[data-logs-form] input[name=agent]').value = 'support'; \
               document.querySelector('[data-logs-form] input[name=kind]').value = 'approval_requested,approval_resolved'; \
               document.querySelector('[data-logs-form] button[type=submit]').click(); return true; })()",
        )
        .await
        .unwrap();
    browser
        .wait_for(
            &format!(
                "{rows}.length === 2 && [...{rows}].every(r => r.cells[4].textContent === 'support')"
            ),
            WAIT,
        )
        .await
        .unwrap();
    let href = browser
        .eval("document.querySelector('[data-logs-export]').href")
        .await
        .unwrap();
    let href = href.as_str().unwrap();
    assert!(
        href.contains("agent=support") && href.contains("format=jsonl"),
        "{href}"
    );
    // The link downloads the same two events (the browser's session is loopback's: no token).
    let body = opc_tests::http_client()
        .get(href)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body.lines().count(), 2, "{body}");
    // Paging through the form: one event a page, "Older events" until none is left.
    browser
        .eval(
            "(() => { const f = document.querySelector('[data-logs-form]'); f.querySelector('input[name=agent]').value = ''; \
               f.querySelector('input[name=kind]').value = 'delegated'; document.getElementById('logs-older').hidden = true; \
               f.querySelector('button[type=submit]').click(); return true; })()",
        )
        .await
        .unwrap();
    browser
        .wait_for(&format!("{rows}.length === 2"), WAIT)
        .await
        .unwrap();
    screenshot(&mut browser, "logs", 1280, 800).await;
    // A bad time is said in the status line, not thrown away.
    browser
        .eval(
            "(() => { const f = document.querySelector('[data-logs-form]'); f.querySelector('input[name=from]').value = 'yesterday'; \
               f.querySelector('button[type=submit]').click(); return true; })()",
        )
        .await
        .unwrap();
    browser
        .wait_for(
            "document.querySelector('[data-logs-status]').textContent.includes('`from`')",
            WAIT,
        )
        .await
        .unwrap();
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
