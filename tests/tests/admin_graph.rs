//! The console's graph view (Memory page) on the real `opc run`, in headless Chromium: an agent's
//! entities and relations around a searched entity, by their `data-` hooks; a click (or Enter on a
//! focused node) lists the entity's facts with their versions; the time control shows the graph as
//! it was believed before a relation changed; a store of 2,000 edges draws only a capped
//! neighbourhood and says how many relations were left out. Also the graph API's contract and its
//! clear 400/404 answers. The facts are written by a store of the test's own (as the Memory page's
//! facts test does) while `opc run` holds the database.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_memory::facts::{FactStore, Op, Provenance, View};
use opc_tests::browser::Browser;
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::wait::WAIT;
use serde_json::{Value, json};

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";

/// Nothing listens there: these tests call no model.
const NO_LLM: &str = "http://127.0.0.1:9";

/// The test org with the web chat (and so the console) under `opc run`.
fn start() -> (TestOrg, OpcRun) {
    let org = TestOrg::with_sections(NO_LLM, Wire::Anthropic, Execution::default(), WEB);
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    (org, opc)
}

/// The database `opc run` of `org` uses (`framework.memory.path`, resolved as `opc` resolves it).
fn database(org: &TestOrg) -> std::path::PathBuf {
    let loaded = opc_hierarchy::load(&org.config_path()).unwrap();
    loaded.base_dir.join(&loaded.config.framework.memory.path)
}

/// `GET` `path` on the console: status and JSON answer (an error's body is `{"error": …}`).
async fn get(opc: &OpcRun, path: &str) -> (u16, Value) {
    let response = opc_tests::http_client()
        .get(opc.url(path))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET` a console endpoint that must answer 2xx.
async fn get_ok(opc: &OpcRun, path: &str) -> Value {
    let (status, body) = get(opc, path).await;
    assert!((200..300).contains(&status), "GET {path}: {status} {body}");
    body
}

fn ms(t: &str) -> i64 {
    opc_memory::facts::time::parse_time(t).unwrap()
}

/// A relation fact: `subject predicate object`.
fn relation(subject: &str, predicate: &str, object: &str) -> Op {
    Op::Add {
        text: format!("{subject} {predicate} {object}"),
        subject: Some(subject.into()),
        predicate: Some(predicate.into()),
        object: Some(object.into()),
        valid_from: None,
        valid_to: None,
    }
}

/// A fact about `subject` that is no relation.
fn about(subject: &str, text: &str) -> Op {
    Op::Add {
        text: text.into(),
        subject: Some(subject.into()),
        predicate: None,
        object: None,
        valid_from: None,
        valid_to: None,
    }
}

fn by_person() -> Provenance {
    Provenance {
        agent: "ceo".into(),
        conversation: Some("web:graph".into()),
        ..Provenance::default()
    }
}

/// The node named `name` in a graph answer.
fn node<'a>(graph: &'a Value, name: &str) -> &'a Value {
    graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {graph}"))
}

/// The `(from name, predicate, to name)` of every edge of a graph answer, sorted.
fn triples(graph: &Value) -> Vec<(String, String, String)> {
    let name = |id: &Value| -> String {
        graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| &n["id"] == id)
            .map(|n| n["name"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("edge to a node not listed: {graph}"))
    };
    let mut all: Vec<_> = graph["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                name(&e["from"]),
                e["predicate"].as_str().unwrap().to_string(),
                name(&e["to"]),
            )
        })
        .collect();
    all.sort();
    all
}

fn triple(from: &str, predicate: &str, to: &str) -> (String, String, String) {
    (from.into(), predicate.into(), to.into())
}

/// The JavaScript of "the drawn node named `name`" (its `aria-label` starts with the name).
fn drawn(name: &str) -> String {
    format!(
        "[...document.querySelectorAll('#graph [data-entity]')].find(g => g.getAttribute('aria-label').startsWith({}))",
        json!(format!("{name}:"))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graph_view_draws_a_neighbourhood_opens_facts_and_goes_back_in_time() {
    let (org, opc) = start();
    // Before any fact: an empty graph, started from nothing.
    let empty = get_ok(&opc, "/admin/api/memory/graph?agent=ceo").await;
    assert_eq!(empty["nodes"], json!([]), "{empty}");
    assert_eq!(empty["start"], "empty");

    let store = FactStore::open(&database(&org), opc_memory::embed::EmbedSlot::new()).unwrap();
    // April 1st: Marco Diaz leads the Orion project, which is for Acme Corp and ships June 1st;
    // Priya Shah reports to Marco Diaz.
    store
        .apply(
            "agent/ceo",
            &[
                relation("Marco Diaz", "leads", "Orion project"),
                relation("Orion project", "is for", "Acme Corp"),
                relation("Priya Shah", "reports to", "Marco Diaz"),
                about("Orion project", "The Orion project ships on June 1st"),
            ],
            &by_person(),
            ms("2026-04-01T10:00:00Z"),
        )
        .unwrap();
    let leads = store
        .list("agent/ceo", View::Current)
        .unwrap()
        .into_iter()
        .find(|f| f.text == "Marco Diaz leads Orion project")
        .unwrap();
    // April 5th: Dana Lee leads it now (the same fact, a new version: the old edge closes).
    store
        .apply(
            "agent/ceo",
            &[Op::Update {
                target: leads.id,
                text: "Dana Lee leads Orion project".into(),
                subject: Some("Dana Lee".into()),
                predicate: Some("leads".into()),
                object: Some("Orion project".into()),
                valid_from: None,
                valid_to: None,
                reason: Some("Marco moved to Atlas".into()),
            }],
            &by_person(),
            ms("2026-04-05T10:00:00Z"),
        )
        .unwrap();

    // The API: the neighbourhood now, and as believed on April 2nd.
    let now = get_ok(
        &opc,
        "/admin/api/memory/graph?agent=ceo&entity=orion%20project",
    )
    .await;
    assert_eq!(now["root"], node(&now, "Orion project")["id"], "{now}");
    assert_eq!(now["start"], "entity");
    assert_eq!(now["depth"], 1);
    assert_eq!(now["left_out"], 0);
    assert_eq!(now["truncated"], false);
    assert_eq!(
        triples(&now),
        [
            triple("Dana Lee", "leads", "Orion project"),
            triple("Orion project", "is for", "Acme Corp"),
        ]
    );
    let then = get_ok(
        &opc,
        "/admin/api/memory/graph?agent=ceo&entity=Orion%20project&depth=2&at=2026-04-02",
    )
    .await;
    assert_eq!(then["at"], "2026-04-02T00:00:00Z");
    assert_eq!(
        triples(&then),
        [
            triple("Marco Diaz", "leads", "Orion project"),
            triple("Orion project", "is for", "Acme Corp"),
            triple("Priya Shah", "reports to", "Marco Diaz"),
        ],
        "two hops, as believed then: {then}"
    );
    let edge = then["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["predicate"] == "leads")
        .unwrap();
    assert_eq!(edge["fact_id"], leads.fact_id);
    // No entity: the most connected one (Orion project and Marco Diaz have two relations each as
    // believed then; ties go by name), with the list the search offers.
    let most = get_ok(&opc, "/admin/api/memory/graph?agent=ceo&at=2026-04-02").await;
    assert_eq!(most["start"], "most_connected", "{most}");
    assert_eq!(most["root"], node(&most, "Marco Diaz")["id"], "{most}");
    assert_eq!(most["entities"][0]["name"], "Marco Diaz");
    assert_eq!(most["entities"][0]["edges"], 2);
    // An unknown entity is an empty graph, not an error.
    let unknown = get_ok(&opc, "/admin/api/memory/graph?agent=ceo&entity=Nobody").await;
    assert_eq!(unknown["root"], Value::Null);
    assert_eq!(unknown["nodes"], json!([]));
    // Bad input says what was wrong.
    for (path, status, says) in [
        (
            "/admin/api/memory/graph?depth=4",
            400,
            "`depth` is 1, 2 or 3",
        ),
        (
            "/admin/api/memory/graph?depth=two",
            400,
            "`depth` is 1, 2 or 3",
        ),
        ("/admin/api/memory/graph?max=0", 400, "`max` is a number"),
        ("/admin/api/memory/graph?max=5000", 400, "from 1 to 1000"),
        ("/admin/api/memory/graph?at=soon", 400, "is not a time"),
        (
            "/admin/api/memory/graph?agent=nobody",
            404,
            "no agent `nobody`",
        ),
    ] {
        let (code, answer) = get(&opc, path).await;
        assert_eq!(code, status, "{path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap_or("").contains(says),
            "{path}: {answer}"
        );
    }

    // The page (without Chromium, skipped here as the browser group says; the big store's API
    // checks below run either way).
    let mut chromium = Browser::for_test().await;
    if let Some(browser) = chromium.as_mut() {
        small_graph_in_the_page(browser, &opc, &now, &then, leads.fact_id).await;
    }

    // 2,000 edges in another agent's memory: 250 people work on each of 4 projects and report to
    // one of 50 managers. A project's neighbourhood is capped, nearest first, and says so.
    let mut many = Vec::new();
    for i in 0..1000 {
        many.push(relation(
            &format!("Person {i}"),
            "works on",
            &format!("Project {}", i % 4),
        ));
        many.push(relation(
            &format!("Person {i}"),
            "reports to",
            &format!("Manager {}", i % 50),
        ));
    }
    store
        .apply(
            "agent/vp-eng",
            &many,
            &by_person(),
            ms("2026-04-01T10:00:00Z"),
        )
        .unwrap();
    let capped = get_ok(
        &opc,
        "/admin/api/memory/graph?agent=vp-eng&entity=Project%200&depth=2&max=300",
    )
    .await;
    assert_eq!(capped["edges"].as_array().unwrap().len(), 300, "the cap");
    assert_eq!(capped["truncated"], true);
    // Two hops: the 250 people and their 250 reporting lines.
    assert_eq!(capped["left_out"], 200, "{}", capped["left_out"]);
    assert_eq!(capped["left_out_exact"], true);
    // Nearest first: all of the project's 250 people before anything two hops away.
    let root = capped["root"].clone();
    let touching_root = capped["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["from"] == root || e["to"] == root)
        .count();
    assert_eq!(touching_root, 250);
    // Every drawn edge joins drawn nodes.
    let listed: std::collections::HashSet<String> = capped["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].to_string())
        .collect();
    assert!(capped["edges"].as_array().unwrap().iter().all(|e| {
        listed.contains(&e["from"].to_string()) && listed.contains(&e["to"].to_string())
    }));

    if let Some(browser) = chromium.as_mut() {
        // The 2,000-edge store: the page draws the capped neighbourhood and says how much is left out.
        browser
            .eval(
                "(() => { document.getElementById('graph-agent').value = 'vp-eng'; \
                 document.getElementById('graph-at').value = ''; \
                 document.getElementById('graph-depth').value = '1'; \
                 document.getElementById('graph-entity').value = 'Project 0'; \
                 document.querySelector('#graph-form button[type=submit]').click(); return true; })()",
            )
            .await
            .unwrap();
        browser
            .wait_for(
                "document.querySelectorAll('#graph [data-edge]').length === 150 \
                 && document.getElementById('graph-status').textContent.includes('100 more relations not drawn (at most 150 are)')",
                WAIT,
            )
            .await
            .unwrap();
    }
    drop(store);
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

/// The Memory page's graph view on the small graph: the search, the hooks, a click and Enter on a
/// node, the time control and the depth.
async fn small_graph_in_the_page(
    browser: &mut Browser,
    opc: &OpcRun,
    now: &Value,
    then: &Value,
    leads: i64,
) {
    browser.navigate(&opc.url("/admin#memory")).await.unwrap();
    // On load: the root agent's most connected entity, drawn; the search lists the entities.
    browser
        .wait_for(
            "document.querySelectorAll('#graph svg [data-entity]').length > 0 \
             && document.getElementById('graph-status').textContent.includes('the most connected entity') \
             && document.querySelectorAll('#graph-entities option').length > 0",
            WAIT,
        )
        .await
        .unwrap();
    // Search the Orion project: its entities and relations, by their hooks.
    browser
        .eval(
            "(() => { document.getElementById('graph-entity').value = 'Orion project'; \
             document.querySelector('#graph-form button[type=submit]').click(); return true; })()",
        )
        .await
        .unwrap();
    let ids = |graph: &Value, names: &[&str]| -> String {
        let mut ids: Vec<String> = names
            .iter()
            .map(|n| node(graph, n)["id"].to_string())
            .collect();
        ids.sort();
        json!(ids.join(",")).to_string()
    };
    let current_edges = json!(
        now["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["fact_id"].to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    browser
        .wait_for(
            &format!(
                "[...document.querySelectorAll('#graph [data-entity]')].map(g => g.dataset.entity).sort().join() === {} \
                 && [...document.querySelectorAll('#graph [data-edge]')].map(g => g.dataset.edge).join() === {current_edges}",
                ids(now, &["Orion project", "Dana Lee", "Acme Corp"])
            ),
            WAIT,
        )
        .await
        .unwrap();
    // Edges are labelled with their predicate and say who does what to whom.
    let said = browser
        .eval(&format!(
            "document.querySelector('#graph [data-edge=\"{}\"]').getAttribute('aria-label') + '|' + \
             document.querySelector('#graph [data-edge=\"{}\"] text').textContent",
            leads, leads
        ))
        .await
        .unwrap();
    assert_eq!(
        said,
        json!(format!(
            "Dana Lee leads Orion project (fact {})|leads",
            leads
        ))
    );
    // A click on the project lists its facts, each with its versions. (The page's requests are
    // logged from here, so a timeout says which one never answered.)
    browser
        .eval(
            "(() => { window.requests = []; const fetch = window.fetch; \
             window.fetch = (...args) => { const r = { url: String(args[0]), at: Date.now() }; requests.push(r); \
             return fetch(...args).then((a) => { r.status = a.status; r.ms = Date.now() - r.at; return a; }, \
             (e) => { r.error = String(e); throw e; }); }; return true; })()",
        )
        .await
        .unwrap();
    browser
        .eval(&format!(
            "{}.dispatchEvent(new MouseEvent('click', {{bubbles: true}})), true",
            drawn("Orion project")
        ))
        .await
        .unwrap();
    let opened = browser
        .wait_for(
            &format!(
                "(() => {{ const facts = document.querySelectorAll('#graph-entity-facts > li[data-fact]'); \
                 const text = document.getElementById('graph-facts').textContent; \
                 return facts.length === 3 && text.includes('The Orion project ships on June 1st') \
                   && document.querySelectorAll('#graph-entity-facts li[data-fact=\"{}\"] li[data-version]').length === 2 \
                   && text.includes('reason: Marco moved to Atlas'); }})()",
                leads
            ),
            WAIT,
        )
        .await;
    if let Err(e) = opened {
        let requests = browser.eval("JSON.stringify(window.requests)").await;
        panic!("{e}\nthe page's requests since the click: {requests:?}");
    }
    // The keyboard: Tab reaches a node, Enter opens its facts.
    let dana = node(now, "Dana Lee")["id"].clone();
    browser
        .focus(&format!("#graph [data-entity=\"{dana}\"]"))
        .await
        .unwrap();
    browser.press_enter().await.unwrap();
    browser
        .wait_for(
            &format!(
                "document.querySelector('#graph-facts h4').textContent === 'Dana Lee' \
                 && document.querySelector('#graph [data-entity=\"{dana}\"]').getAttribute('aria-pressed') === 'true' \
                 && document.querySelectorAll('#graph-entity-facts > li[data-fact]').length === 1"
            ),
            WAIT,
        )
        .await
        .unwrap();
    // The time control, before the change: Marco Diaz led it; the same fact, the old edge.
    browser
        .eval(
            "(() => { const at = document.querySelector('[data-graph-at]'); at.value = '2026-04-02T12:00'; \
             at.dispatchEvent(new Event('change')); return true; })()",
        )
        .await
        .unwrap();
    let marco = node(then, "Marco Diaz")["id"].clone();
    browser
        .wait_for(
            &format!(
                "document.querySelector('#graph [data-edge=\"{}\"]')?.dataset.from === '{marco}' \
                 && !!document.querySelector('#graph [data-entity=\"{marco}\"]') \
                 && !document.querySelector('#graph [data-entity=\"{dana}\"]') \
                 && document.getElementById('graph-status').textContent.includes('believed at 2026-04-02 12:00:00 UTC')",
                leads
            ),
            WAIT,
        )
        .await
        .unwrap();
    // Two hops reach Priya Shah through Marco Diaz.
    browser
        .eval(
            "(() => { const d = document.getElementById('graph-depth'); d.value = '2'; \
             d.dispatchEvent(new Event('change')); return true; })()",
        )
        .await
        .unwrap();
    browser
        .wait_for(
            &format!(
                "!!{} && document.querySelectorAll('#graph [data-edge]').length === 3",
                drawn("Priya Shah")
            ),
            WAIT,
        )
        .await
        .unwrap();
}
