//! The Tasks page's request timeline on the real `opc run` (scripted LLM, headless Chromium): a
//! three-level request (CEO → VP Ops → Support) that waits on a human's approval. While it waits,
//! the API reports every task and the approval as still running (`end: null`) and the page's bars
//! grow; once approved, every child's bar lies within its parent's, every segment within its bar,
//! and the approval spans from its request to its decision. Keyboard and hover show a bar's tokens
//! and cost. Order and containment only: never an absolute duration.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::scripted_llm::ScriptedLlm;
use opc_tests::wait::WAIT;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// `GET` `path` on the console: status and JSON answer.
async fn get(opc: &OpcRun, path: &str) -> (u16, Value) {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Poll `GET path` until `done` holds of its answer (or fail after [`WAIT`]).
async fn poll(opc: &OpcRun, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = get(opc, path).await;
        if status == 200 && done(&body) {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: GET {path} answered {status} {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Wait until the page's JavaScript `condition` holds (or fail after [`WAIT`]).
async fn wait(browser: &mut Browser, condition: &str) {
    browser.wait_for(condition, WAIT).await.unwrap();
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

/// The timeline's task of agent `agent`.
fn task<'a>(timeline: &'a Value, agent: &str) -> &'a Value {
    timeline["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["agent"] == agent)
        .unwrap_or_else(|| panic!("no task of {agent} in {timeline}"))
}

fn ms(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("a time, not {v}"))
}

/// The segments of `task` of one kind.
fn segments<'a>(task: &'a Value, kind: &str) -> Vec<&'a Value> {
    task["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_nests_a_three_level_request_and_its_approval_live_then_done() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let llm = ScriptedLlm::start(opc_tests::org::approval_chain())
        .await
        .unwrap();
    let org = TestOrg::with_sections(&llm.url(), Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);

    let (_, mut sse) = opc_tests::web_chat::start(&opc, "Refund order 7").await;
    let (approval, _) = opc_tests::web_chat::pending_approval(&mut sse).await;
    let tasks = poll(&opc, "/admin/api/tasks", "the request", |b| {
        b["tasks"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    let root = tasks["tasks"][0]["id"].as_i64().unwrap();
    let path = format!("/admin/api/tasks/{root}/timeline");

    // While the approval waits: the request, every task and the approval have no end yet.
    let live = poll(&opc, &path, "three tasks with the approval", |b| {
        b["tasks"].as_array().is_some_and(|t| t.len() == 3)
            && !segments(task(b, "support"), "approval").is_empty()
    })
    .await;
    assert_eq!(live["root"], root);
    assert_eq!(live["end"], Value::Null, "{live}");
    assert!(ms(&live["now"]) >= ms(&live["start"]));
    let agents: Vec<_> = live["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["agent"].as_str().unwrap(), t["depth"].as_i64().unwrap()))
        .collect();
    assert_eq!(agents, [("ceo", 0), ("vp-ops", 1), ("support", 2)]);
    for t in live["tasks"].as_array().unwrap() {
        assert_eq!(t["end"], Value::Null, "{t}");
    }
    let waiting = segments(task(&live, "support"), "approval")[0];
    assert_eq!(waiting["end"], Value::Null, "{waiting}");
    assert_eq!(waiting["approval"], approval);

    // The page: one bar per task, live, and the waiting bars grow.
    browser.navigate(&opc.url("/admin#tasks")).await.unwrap();
    wait(
        &mut browser,
        &format!("!!document.querySelector('#task-list tr[data-task=\"{root}\"]')"),
    )
    .await;
    browser
        .eval(&format!(
            "document.querySelector('#task-list tr[data-task=\"{root}\"]').click(), true"
        ))
        .await
        .unwrap();
    wait(&mut browser, "document.querySelectorAll('#task-timeline .tl-row[data-task][data-live]').length === 3 \
         && !!document.querySelector('#task-timeline .tl-row[data-state=awaiting_approval] [data-segment=approval]')").await;
    let first_end = browser
        .eval("Number(document.querySelector('#task-timeline .tl-row[data-state=awaiting_approval]').dataset.end)")
        .await
        .unwrap();
    wait(&mut browser, &format!("Number(document.querySelector('#task-timeline .tl-row[data-state=awaiting_approval]').dataset.end) > {first_end}")).await;

    // Approved from the console: the request completes.
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
    let done = poll(&opc, &path, "the request's end", |b| {
        !b["end"].is_null()
            && b["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| !t["end"].is_null())
    })
    .await;

    // Containment: every child within its parent; every segment within its task.
    let by_id = |id: &Value| {
        done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == *id)
            .unwrap()
            .clone()
    };
    for t in done["tasks"].as_array().unwrap() {
        let (start, end) = (ms(&t["start"]), ms(&t["end"]));
        assert!(start <= end, "{t}");
        if !t["parent"].is_null() {
            let p = by_id(&t["parent"]);
            assert!(
                ms(&p["start"]) <= start && end <= ms(&p["end"]),
                "{t} not within {p}"
            );
            assert_eq!(
                t["depth"].as_i64().unwrap(),
                p["depth"].as_i64().unwrap() + 1
            );
        }
        let models = segments(t, "model");
        assert!(!models.is_empty(), "{t}");
        for s in t["segments"].as_array().unwrap() {
            assert!(
                start <= ms(&s["start"])
                    && ms(&s["start"]) <= ms(&s["end"])
                    && ms(&s["end"]) <= end,
                "segment {s} not within task {t}"
            );
        }
        for m in models {
            assert!(
                m["tokens_in"].as_u64().unwrap() > 0 && m["cost_usd"].as_f64().unwrap() > 0.0,
                "{m}"
            );
        }
    }
    // The approval spans its request to its decision, as the approvals list has them; the tool
    // call that asked for it ends after the decision.
    let support = task(&done, "support");
    let span = segments(support, "approval")[0];
    let (_, approvals) = get(&opc, "/admin/api/approvals").await;
    let decided = approvals["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == approval)
        .unwrap();
    assert_eq!(
        (span["start"].clone(), span["end"].clone()),
        (decided["created_at"].clone(), decided["decided_at"].clone())
    );
    assert_eq!(span["state"], "approved");
    let asked = segments(support, "tool")
        .into_iter()
        .find(|s| s["tool"] == "request_approval")
        .unwrap_or_else(|| panic!("the request_approval tool call in {support}"));
    assert!(
        ms(&span["end"]) <= ms(&asked["end"]),
        "{asked} ends after {span}"
    );
    // Delegations are tool calls of their parents, ending after the child they waited for.
    let vp = task(&done, "vp-ops");
    let delegation = segments(vp, "tool")
        .into_iter()
        .find(|s| s["tool"] == "delegate")
        .unwrap_or_else(|| panic!("the delegate call in {vp}"));
    assert!(
        ms(&support["end"]) <= ms(&delegation["end"]),
        "{delegation} ends after {support}"
    );

    // The page follows: no bar runs, and the drawing keeps the same nesting.
    wait(&mut browser, "document.querySelectorAll('#task-timeline .tl-row[data-task]').length === 3 \
         && !document.querySelector('#task-timeline .tl-row[data-live]') \
         && !!document.querySelector('#task-timeline .tl-row[data-state=completed] [data-segment=approval]')").await;
    let drawn = browser
        .eval(
            "(() => { const rows = [...document.querySelectorAll('#task-timeline .tl-row[data-task]')]; \
             const box = (e) => { const r = e.getBBox(); return [r.x, r.x + r.width]; }; \
             return rows.map((r) => ({ task: Number(r.dataset.task), depth: Number(r.dataset.depth), \
               bar: box(r.querySelector('.tl-bar')), segs: [...r.querySelectorAll('[data-segment]')].map(box) })); })()",
        )
        .await
        .unwrap();
    let drawn = drawn.as_array().unwrap();
    let order: Vec<_> = drawn.iter().map(|r| r["depth"].as_i64().unwrap()).collect();
    assert_eq!(order, [0, 1, 2]);
    let edge = |r: &Value, i: usize| r["bar"][i].as_f64().unwrap();
    for pair in drawn.windows(2) {
        let (parent, child) = (&pair[0], &pair[1]);
        assert!(
            edge(parent, 0) <= edge(child, 0) + 0.01 && edge(child, 1) <= edge(parent, 1) + 2.0,
            "{child} within {parent}"
        );
    }
    for r in drawn {
        for s in r["segs"].as_array().unwrap() {
            assert!(
                edge(r, 0) <= s[0].as_f64().unwrap() + 0.01
                    && s[1].as_f64().unwrap() <= edge(r, 1) + 2.0,
                "{s} within {r}"
            );
        }
    }

    // Keyboard: the first bar is the tab stop; Down moves to the next; focus shows tokens and cost.
    browser
        .focus("#task-timeline .tl-row[tabindex='0']")
        .await
        .unwrap();
    wait(
        &mut browser,
        "!document.getElementById('tl-tip').hidden \
         && /tokens/.test(document.getElementById('tl-tip').textContent) \
         && /\\$\\d/.test(document.getElementById('tl-tip').textContent) \
         && document.activeElement.getAttribute('aria-describedby') === 'tl-tip'",
    )
    .await;
    browser
        .eval("document.activeElement.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowDown', bubbles: true })), true")
        .await
        .unwrap();
    wait(
        &mut browser,
        "document.activeElement.dataset.depth === '1' \
         && document.getElementById('tl-tip').textContent.startsWith('vp-ops')",
    )
    .await;
    browser
        .eval("document.activeElement.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowDown', bubbles: true })), \
               document.activeElement.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true })), true")
        .await
        .unwrap();
    wait(
        &mut browser,
        "!!document.activeElement.dataset.segment \
         && document.activeElement.closest('.tl-row').dataset.depth === '2'",
    )
    .await;
    // Hover on a model call: its tokens, cost and duration.
    browser
        .eval("document.querySelector('#task-timeline .tl-row[data-depth=\"0\"] [data-segment=model]').dispatchEvent(new MouseEvent('mouseenter')), true")
        .await
        .unwrap();
    wait(&mut browser, "/^Model call .*: .*\\d+ in \\/ \\d+ out tokens, \\$/.test(document.getElementById('tl-tip').textContent)").await;
    // The picture: the request's tree beside the list, its waterfall below.
    wait(
        &mut browser,
        "document.getElementById('task-detail').textContent.includes('completed') \
         && !document.getElementById('task-detail').textContent.includes('pending')",
    )
    .await;
    browser
        .eval("document.getElementById('task-timeline').scrollIntoView(false), document.querySelector('#task-timeline .tl-row[data-depth=\"2\"]').focus(), true")
        .await
        .unwrap();
    screenshot(&mut browser, "timeline", 1280, 800).await;

    // Only a request's root has a timeline; an unknown id is 404 too, and a bad one 400.
    let support_id = support["id"].as_i64().unwrap();
    let (status, body) = get(&opc, &format!("/admin/api/tasks/{support_id}/timeline")).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains(&format!("/admin/api/tasks/{root}/timeline")),
        "{body}"
    );
    let (status, body) = get(&opc, "/admin/api/tasks/999999/timeline").await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("no task 999999"),
        "{body}"
    );
    let (status, body) = get(&opc, "/admin/api/tasks/abc/timeline").await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].is_string(), "{body}");

    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
