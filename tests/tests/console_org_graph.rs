//! The org graph (issue 40) on the real `opc run`, in headless Chromium: the console's Org page draws
//! the org as an SVG tree whose nodes follow a delegation live (who waits, who works, which edge
//! carries it) and open the agent's panel on a click or on Enter, with arrow keys moving along the
//! tree; a 60-agent org is drawn with no two nodes overlapping; `/org` draws the same graph read-only
//! under its CSP. Also the panel's endpoint, `GET /admin/api/agents/{id}`: its contract and its 404.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;

use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{KEY, KEY_VAR, approval_chain, marker, provider_yaml};
use opc_tests::scripted_llm::ScriptedLlm;
use opc_tests::wait::{WAIT, wait_until};
use serde_json::{Value, json};

/// The env var holding the access token of the 60-agent org, and its value.
const TOKEN_VAR: &str = "OPC_TEST_GRAPH_TOKEN";
const TOKEN: &str = "graph-s3cret";

/// A config written to a temporary directory (kept for the test's length).
struct Org {
    dir: tempfile::TempDir,
}

impl Org {
    /// `framework:` at the scripted server `llm_url`, then `agents` (the `agents:` entries, indented 2)
    /// and `web` (the `channels.web` mapping).
    fn write(llm_url: &str, agents: &str, web: &str) -> Org {
        let providers = provider_yaml(llm_url, false);
        let yaml = format!(
            "framework:\n  name: Graph Org\n{providers}\n  privacy: {{ requireNer: false }}\n  \
             execution:\n    approvalTimeout: 1h\nagents:\n{agents}channels:\n  web: {web}\n"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("opc.config.yaml"), yaml).unwrap();
        Org { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("opc.config.yaml")
    }
}

/// The approval chain's org ([`approval_chain`]: the CEO relays to VP Ops, who relays to Support, who
/// asks a human), with VP Engineering beside VP Ops, and Support given Bash rules and a block.
const CHAIN: &str = "  ceo:
    role: CEO
    tools: [delegate, escalate]
    memory: { recall: false }
    children: [vp-eng, vp-ops]
  vp-eng:
    role: VP Engineering
    parent: ceo
    tools: [escalate]
    memory: { recall: false }
  vp-ops:
    role: VP Operations
    parent: ceo
    tools: [delegate, escalate, requestApproval]
    memory: { recall: false }
    children: [support]
  support:
    role: Support Agent
    parent: vp-ops
    tools: [escalate, requestApproval, Bash]
    memory:
      recall: false
      blocks:
        - { label: playbook, description: how refunds go, value: \"ask first\", limit: 300, readOnly: true }
    bash: { allow: [\"git status\", \"ls\"], unlisted: deny }
";

/// Where the tests that call no model point the org's provider: nothing listens there.
const NO_LLM: &str = "http://127.0.0.1:9";

/// Wait until the page's JavaScript `condition` holds (or fail after [`WAIT`]).
async fn wait(browser: &mut Browser, condition: &str) {
    browser.wait_for(condition, WAIT).await.unwrap();
}

/// The value of the JavaScript `js` on the page.
async fn eval(browser: &mut Browser, js: &str) -> Value {
    browser.eval(js).await.unwrap()
}

/// Press `key` (a DOM key name with its virtual key code) on the focused element.
async fn press(browser: &mut Browser, key: &str, code: u32) {
    for kind in ["keyDown", "keyUp"] {
        let mut event = json!({"type": kind, "key": key, "code": key,
            "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code});
        if key == "Enter" && kind == "keyDown" {
            event["text"] = json!("\r");
        }
        browser.call("Input.dispatchKeyEvent", event).await.unwrap();
    }
}

/// The `data-agent` of the focused element.
async fn focused(browser: &mut Browser) -> Value {
    eval(
        browser,
        "document.activeElement && document.activeElement.getAttribute('data-agent')",
    )
    .await
}

/// Save a PNG of the page to `$OPC_SCREENSHOTS/<name>.png` when that variable names a directory
/// (how docs/admin.md's screenshots are made); always check the browser produced one.
async fn shot(browser: &mut Browser, name: &str, width: u32, height: u32) {
    let png = browser.screenshot(width, height, false).await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG of {name}");
    if let Some(dir) = std::env::var_os("OPC_SCREENSHOTS") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// `GET` `path` (with the bearer `token` when given): status and JSON answer.
async fn get(opc: &OpcRun, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = opc_tests::http_client().get(opc.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A check that every node of the graph in the page has `state` and no edge is lit but `active`.
fn states(expected: &[(&str, &str)], active: &[&str]) -> String {
    let nodes: Vec<String> = expected
        .iter()
        .map(|(id, s)| {
            format!(
                "document.querySelector('#org-graph [data-agent=\"{id}\"]').dataset.state === '{s}'"
            )
        })
        .collect();
    format!(
        "{} && JSON.stringify([...document.querySelectorAll('#org-graph [data-edge][data-active=true]')].map(e => e.dataset.edge).sort()) === '{}'",
        nodes.join(" && "),
        serde_json::to_string(&{
            let mut a = active.to_vec();
            a.sort_unstable();
            a
        })
        .unwrap()
    )
}

/// The text of the agent panel.
const PANEL: &str = "document.querySelector('#org-graph [data-agent-panel]').textContent";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_follows_a_delegation_and_opens_an_agents_panel() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let llm = ScriptedLlm::start(approval_chain()).await.unwrap();
    let org = Org::write(&llm.url(), CHAIN, "{ listen: \"127.0.0.1:0\" }");
    let opc = OpcRun::start(&org.path(), &[(KEY_VAR, KEY)]);

    browser.navigate(&opc.url("/admin#org")).await.unwrap();
    wait(
        &mut browser,
        "document.querySelectorAll('#org-graph svg [data-agent]').length === 4 \
         && document.querySelector('#org-graph [data-agent=ceo] .og-state').textContent === 'idle'",
    )
    .await;
    // Every state's colour reads against its node's fill (WCAG AA, 4.5:1), on a copy of a node.
    let ratios = eval(
        &mut browser,
        "(() => {
          const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
          const lum = (c) => { const [r, g, b] = rgb(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
          const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
          const node = document.querySelector('#org-graph [data-agent=ceo]');
          const out = {};
          for (const s of ['idle', 'working', 'waiting', 'failed']) {
            const copy = node.cloneNode(true);
            copy.removeAttribute('data-agent');
            copy.setAttribute('data-state', s);
            node.parentNode.append(copy);
            const fill = getComputedStyle(copy.querySelector('rect')).fill;
            out[s] = Math.min(...['.og-state', '.og-role', '.og-id'].map((t) => ratio(getComputedStyle(copy.querySelector(t)).fill, fill)));
            copy.remove();
          }
          return out;
        })()",
    )
    .await;
    for state in ["idle", "working", "waiting", "failed"] {
        assert!(ratios[state].as_f64().unwrap() >= 4.5, "{state}: {ratios}");
    }

    // A request that waits on an approval two levels down: the chain waits, its two edges are lit.
    let (_, mut sse) =
        opc_tests::web_chat::start(&opc, "Refund order 7 for jane.doe@example.com").await;
    let (approval, _) = opc_tests::web_chat::pending_approval(&mut sse).await;
    wait(
        &mut browser,
        &states(
            &[
                ("ceo", "waiting"),
                ("vp-ops", "waiting"),
                ("support", "waiting"),
                ("vp-eng", "idle"),
            ],
            &["ceo->vp-ops", "vp-ops->support"],
        ),
    )
    .await;
    assert_eq!(
        eval(
            &mut browser,
            "document.querySelector('#org-graph [data-agent=support] .og-state').textContent"
        )
        .await,
        "waiting on approval"
    );
    assert_eq!(
        eval(
            &mut browser,
            "document.querySelector('#org-graph [data-agent=vp-ops]').getAttribute('aria-label')"
        )
        .await,
        "VP Operations (vp-ops): waiting on children"
    );

    // A click opens Support's panel: role, model, tools, memory, Bash rules, the task in flight.
    eval(
        &mut browser,
        "document.querySelector('#org-graph [data-agent=support]').dispatchEvent(new MouseEvent('click', {bubbles: true})), true",
    )
    .await;
    wait(
        &mut browser,
        &format!(
            "{PANEL}.includes('Support Agent') && {PANEL}.includes('test-model') \
             && {PANEL}.includes('requestApproval') && {PANEL}.includes('Bash') \
             && document.querySelector('#org-graph [data-bash=allow]').textContent.includes('git status, ls') \
             && !!document.querySelector('#org-graph [data-bash=deny]') \
             && !!document.querySelector('#org-graph [data-block-label=playbook]') \
             && document.querySelector('#org-graph [data-agent-panel] li[data-task]').textContent.includes('awaiting approval')"
        ),
    )
    .await;
    assert_eq!(
        eval(
            &mut browser,
            "document.querySelector('#org-graph [data-agent=support]').getAttribute('aria-selected')"
        )
        .await,
        "true"
    );
    shot(&mut browser, "org", 1280, 800).await;

    // Approved while the model's answers are held: Support is working again, still under VP Ops.
    llm.hold();
    let (status, body) = opc_tests::post_json(
        &opc.url(&format!("/admin/api/approvals/{approval}")),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    wait_until(WAIT, "Support's next model call", || {
        llm.requests_for(&marker("support")).len() == 2
    })
    .await;
    wait(
        &mut browser,
        &states(
            &[
                ("ceo", "waiting"),
                ("vp-ops", "waiting"),
                ("support", "working"),
                ("vp-eng", "idle"),
            ],
            &["ceo->vp-ops", "vp-ops->support"],
        ),
    )
    .await;

    // The request finishes: everyone idle, no edge lit.
    llm.release();
    sse.wait_for("message|edit", WAIT, |e| {
        e["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("CEO: VP: SUPPORT:"))
    })
    .await;
    wait(
        &mut browser,
        &states(
            &[
                ("ceo", "idle"),
                ("vp-ops", "idle"),
                ("support", "idle"),
                ("vp-eng", "idle"),
            ],
            &[],
        ),
    )
    .await;

    // The keyboard: one tab stop; arrows go down to the first child, across to a sibling, up to the
    // parent; Enter opens the focused agent's panel.
    eval(
        &mut browser,
        "document.querySelector('#org-graph [data-agent=vp-eng]').dispatchEvent(new MouseEvent('click', {bubbles: true})), true",
    )
    .await;
    wait(&mut browser, &format!("{PANEL}.includes('VP Engineering')")).await;
    assert_eq!(
        eval(
            &mut browser,
            "[...document.querySelectorAll('#org-graph [data-agent]')].filter(n => n.getAttribute('tabindex') === '0').length"
        )
        .await,
        1
    );
    browser.focus("#org-graph [data-agent=ceo]").await.unwrap();
    for (key, code, expected) in [
        ("ArrowDown", 40, "vp-eng"),
        ("ArrowRight", 39, "vp-ops"),
        ("ArrowDown", 40, "support"),
        ("ArrowUp", 38, "vp-ops"),
        ("ArrowLeft", 37, "vp-eng"),
        ("ArrowLeft", 37, "vp-eng"),
        ("ArrowUp", 38, "ceo"),
        ("ArrowDown", 40, "vp-eng"),
        ("ArrowRight", 39, "vp-ops"),
        ("ArrowDown", 40, "support"),
    ] {
        press(&mut browser, key, code).await;
        assert_eq!(focused(&mut browser).await, expected, "after {key}");
    }
    press(&mut browser, "Enter", 13).await;
    wait(
        &mut browser,
        &format!(
            "{PANEL}.includes('Support Agent') \
             && document.querySelector('#org-graph [data-agent-panel] li[data-task]').textContent.includes('completed')"
        ),
    )
    .await;

    // /org: the same graph, read-only, under the page's CSP (nothing styled inline), and the text list.
    browser.navigate(&opc.url("/org")).await.unwrap();
    wait(
        &mut browser,
        "document.querySelectorAll('#org-graph svg [data-agent]').length === 4 \
         && document.querySelector('#org-graph [data-agent=support] .og-state').textContent === 'idle'",
    )
    .await;
    assert_eq!(
        eval(&mut browser, "document.querySelectorAll('[style]').length").await,
        0
    );
    assert_eq!(
        eval(
            &mut browser,
            "[...document.querySelectorAll('#org-graph [data-agent]')].map(n => n.dataset.agent).sort().join(' ')"
        )
        .await,
        "ceo support vp-eng vp-ops"
    );
    eval(
        &mut browser,
        "document.querySelector('#org-graph [data-agent=vp-ops]').dispatchEvent(new MouseEvent('click', {bubbles: true})), true",
    )
    .await;
    wait(
        &mut browser,
        &format!("{PANEL}.includes('VP Operations') && {PANEL}.includes('support')"),
    )
    .await;
    shot(&mut browser, "org-public", 1280, 800).await;

    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_endpoint_answers_the_panel_and_404_for_an_unknown_agent() {
    let org = Org::write(NO_LLM, CHAIN, "{ listen: \"127.0.0.1:0\" }");
    let opc = OpcRun::start(&org.path(), &[(KEY_VAR, KEY)]);
    let (status, support) = get(&opc, "/admin/api/agents/support", None).await;
    assert_eq!(status, 200, "{support}");
    assert_eq!(support["id"], "support");
    assert_eq!(support["role"], "Support Agent");
    assert_eq!(support["level"], 2);
    assert_eq!(support["parent"], "vp-ops");
    assert_eq!(support["children"], json!([]));
    assert_eq!(support["model"], "test-model");
    assert_eq!(
        support["tools"],
        json!(["escalate", "requestApproval", "Bash"])
    );
    assert_eq!(
        support["memory"]["blocks"],
        json!([{"label": "playbook", "description": "how refunds go", "limit": 300, "read_only": true}])
    );
    assert_eq!(support["memory"]["recall"], false);
    assert_eq!(
        support["bash"],
        json!({"tool": true, "configured": true, "allow": ["git status", "ls"],
            "written": ["git status", "ls"], "unlisted": "deny"})
    );
    assert!(
        support["workspace"].as_str().unwrap().ends_with("/support"),
        "{support}"
    );
    assert_eq!(support["state"], "idle");
    assert_eq!(support["tasks"], json!([]));
    assert_eq!(support["recent"], json!([]));
    // No block text is answered (it can hold what conversations taught the agent).
    assert!(!support.to_string().contains("ask first"), "{support}");

    let (status, ceo) = get(&opc, "/admin/api/agents/ceo", None).await;
    assert_eq!(status, 200, "{ceo}");
    assert_eq!(ceo["parent"], Value::Null);
    assert_eq!(ceo["children"], json!(["vp-eng", "vp-ops"]));
    assert_eq!(
        ceo["bash"],
        json!({"tool": false, "configured": false, "allow": [], "written": [], "unlisted": "ask"})
    );

    for unknown in ["nobody", "CEO", "%3Cb%3E"] {
        let (status, body) = get(&opc, &format!("/admin/api/agents/{unknown}"), None).await;
        assert_eq!(status, 404, "{unknown}: {body}");
        let message = body["error"].as_str().unwrap();
        assert!(
            message.contains("there is no agent") && message.contains("agents:"),
            "{message}"
        );
    }
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// A generated org of 60 agents: a CEO, 4 VPs, 3 leads under each, and 43 engineers spread over the
/// leads (3 or 4 each).
fn sixty() -> String {
    let mut yaml = String::new();
    let mut agent =
        |id: &str, role: &str, parent: Option<&str>, children: &[String]| {
            yaml.push_str(&format!(
            "  {id}:\n    role: {role}\n    tools: [{}escalate]\n    memory: {{ recall: false }}\n",
            if children.is_empty() { "" } else { "delegate, " }
        ));
            if let Some(parent) = parent {
                yaml.push_str(&format!("    parent: {parent}\n"));
            }
            if !children.is_empty() {
                yaml.push_str(&format!("    children: [{}]\n", children.join(", ")));
            }
        };
    let vps: Vec<String> = (1..=4).map(|v| format!("vp-{v}")).collect();
    agent("ceo", "Chief Executive Officer", None, &vps);
    let mut engineers = 0;
    for (v, vp) in vps.iter().enumerate() {
        let leads: Vec<String> = (1..=3).map(|l| format!("lead-{}-{l}", v + 1)).collect();
        agent(
            vp,
            &format!("VP of Division {}", v + 1),
            Some("ceo"),
            &leads,
        );
        for (l, lead) in leads.iter().enumerate() {
            let count = if v * 3 + l < 7 { 4 } else { 3 };
            let team: Vec<String> = (1..=count)
                .map(|e| format!("eng-{}-{}-{e}", v + 1, l + 1))
                .collect();
            agent(
                lead,
                &format!("Team Lead, Platform Reliability {}", l + 1),
                Some(vp),
                &team,
            );
            for eng in &team {
                agent(eng, "Senior Software Engineer", Some(lead), &[]);
                engineers += 1;
            }
        }
    }
    assert_eq!(1 + 4 + 12 + engineers, 60);
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_agents_are_drawn_without_overlap_here_and_on_the_org_page() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    let org = Org::write(
        NO_LLM,
        &sixty(),
        &format!("{{ listen: \"127.0.0.1:0\", accessTokenEnv: {TOKEN_VAR} }}"),
    );
    let opc = OpcRun::start(&org.path(), &[(KEY_VAR, KEY), (TOKEN_VAR, TOKEN)]);
    let (status, _) = get(&opc, "/admin/api/agents/ceo", None).await;
    assert_eq!(
        status, 401,
        "the panel's endpoint is behind the access check"
    );
    let (status, panel) = get(&opc, "/admin/api/agents/ceo", Some(TOKEN)).await;
    assert_eq!(status, 200, "{panel}");
    assert_eq!(panel["children"].as_array().unwrap().len(), 4);

    // Every node drawn, none overlapping another (their boxes on the page, as drawn and scaled), and
    // the drawing no smaller than its floor: beyond it the canvas scrolls.
    let no_overlap = "(() => {
        const boxes = [...document.querySelectorAll('#org-graph svg [data-agent] rect')].map((r) => r.getBoundingClientRect());
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
          const a = boxes[i], b = boxes[j];
          if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) return `${i} overlaps ${j}`;
        }
        return boxes.length;
      })()";
    browser
        .navigate(&opc.url(&format!("/admin?token={TOKEN}#org")))
        .await
        .unwrap();
    wait(
        &mut browser,
        "document.querySelectorAll('#org-graph svg [data-agent]').length === 60 \
         && !!document.querySelector('#org-graph [data-agent=ceo] .og-state').textContent",
    )
    .await;
    assert_eq!(eval(&mut browser, no_overlap).await, 60);
    let scale = eval(
        &mut browser,
        "Number(document.querySelector('#org-graph svg').dataset.scale)",
    )
    .await;
    assert!(scale.as_f64().unwrap() >= 0.7, "{scale}");
    // Labels too long for a node are cut, with the whole text in the node's title.
    let title = eval(
        &mut browser,
        "(() => { const n = document.querySelector('#org-graph [data-agent=\"lead-1-1\"]'); \
         return [n.querySelector('.og-role').textContent, n.querySelector('title').textContent]; })()",
    )
    .await;
    assert!(title[0].as_str().unwrap().ends_with('…'), "{title}");
    assert!(
        title[1]
            .as_str()
            .unwrap()
            .starts_with("Team Lead, Platform Reliability 1"),
        "{title}"
    );
    // Every node has its place in the tree for a screen reader.
    assert_eq!(
        eval(
            &mut browser,
            "[...document.querySelectorAll('#org-graph [data-agent]')].every(n => n.getAttribute('role') === 'treeitem' \
             && n.getAttribute('aria-level') && n.getAttribute('aria-label'))"
        )
        .await,
        true
    );

    // /org with the token in its address: the token leaves the address bar, the chat link keeps it,
    // and the graph is the same 60 nodes, none overlapping, nothing styled inline.
    browser
        .navigate(&opc.url(&format!("/org?token={TOKEN}")))
        .await
        .unwrap();
    wait(
        &mut browser,
        "document.querySelectorAll('#org-graph svg [data-agent]').length === 60",
    )
    .await;
    assert_eq!(eval(&mut browser, no_overlap).await, 60);
    assert_eq!(
        eval(&mut browser, "document.querySelectorAll('[style]').length").await,
        0
    );
    assert_eq!(
        eval(&mut browser, "location.search").await,
        "",
        "the token is out of the address bar"
    );
    assert_eq!(
        eval(
            &mut browser,
            "document.getElementById('chat-link').getAttribute('href')"
        )
        .await,
        format!("/?token={TOKEN}")
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_whose_task_failed_shows_failed_until_it_starts_again() {
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    // VP Engineering's model refuses the request (400: not retried), so its task fails; the CEO
    // answers with what it was told.
    let script = opc_tests::scripted_llm::Script::new()
        .agent(
            marker("ceo"),
            opc_tests::org::relay("vp-eng", "plan the release", "CEO: "),
        )
        .agent(
            marker("vp-eng"),
            vec![opc_tests::scripted_llm::Step::status(400, None)],
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = Org::write(&llm.url(), CHAIN, "{ listen: \"127.0.0.1:0\" }");
    let opc = OpcRun::start(&org.path(), &[(KEY_VAR, KEY)]);
    browser.navigate(&opc.url("/admin#org")).await.unwrap();
    wait(
        &mut browser,
        "document.querySelectorAll('#org-graph svg [data-agent]').length === 4 \
         && document.querySelector('#org-graph [data-agent=ceo] .og-state').textContent === 'idle'",
    )
    .await;
    let (_, mut sse) = opc_tests::web_chat::start(&opc, "Plan the release").await;
    sse.wait_for("message|edit", WAIT, |e| {
        e["text"].as_str().is_some_and(|t| t.starts_with("CEO: "))
    })
    .await;
    wait(
        &mut browser,
        &states(
            &[
                ("ceo", "idle"),
                ("vp-eng", "failed"),
                ("vp-ops", "idle"),
                ("support", "idle"),
            ],
            &[],
        ),
    )
    .await;
    // It stays so through the refreshes that read the (idle) truth.
    let reads = "performance.getEntriesByType('resource').filter(r => r.name.endsWith('/admin/api/agents')).length";
    eval(
        &mut browser,
        "performance.setResourceTimingBufferSize(100000), true",
    )
    .await;
    let before = eval(&mut browser, reads).await.as_u64().unwrap();
    wait(&mut browser, &format!("{reads} >= {}", before + 2)).await;
    assert_eq!(
        eval(
            &mut browser,
            "document.querySelector('#org-graph [data-agent=vp-eng] .og-state').textContent"
        )
        .await,
        "failed"
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
