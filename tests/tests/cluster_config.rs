//! A config saved in one node's console reaches every node (issue 36 §2, "Config"), end to end:
//! two real `opc run --node NAME` processes on one PostgreSQL database, each with its own copy of
//! the config directory (as two machines have), the console's save API on one, and the other's
//! file, running org (`/api/org`), reload status and row in the nodes table read back.
//! - a config saved through node A's console is written to node B's file and applied there, and
//!   both nodes' rows carry its digest;
//! - an invalid config put in the history directly is neither written nor applied by B (which keeps
//!   running the config it had, and says so once), and B follows the next valid save;
//! - a node started with a file other than the newest saved config keeps its file (the operator
//!   may have deployed it on purpose) and says it differs;
//! - the Config page lists the cluster's history (`GET /admin/api/config/cluster`, and in headless
//!   Chromium the rows' `data-config-version` hooks): newest first, the node each was saved on, its
//!   digest, and the live nodes running it; a digest no save has (the file B was started with) is
//!   listed apart. Alone (SQLite), the page shows no cluster history: the file's is the history.
//!
//! Without a PostgreSQL server the test skips with one line (`opc-testgate`), and fails under CI.
//! A failing test prints both nodes' stderr.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;

use opc_tests::browser::Browser;
use opc_tests::cluster::{Db, WEB, framework_yaml, poll};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::postgres::fresh_database;
use opc_tests::wait::WAIT;
use opc_tests::{http_client, post_json};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const A: &str = "node-a";
const B: &str = "node-b";

/// The digest a node shows of a config's text (the first 12 hex of its sha256).
fn digest(text: &str) -> String {
    let mut hex = format!("{:x}", Sha256::digest(text.as_bytes()));
    hex.truncate(12);
    hex
}

/// The test org's config text, in cluster mode with the web chat on a port of each node's own. No
/// model is called: the provider's address is never reached.
fn org_text() -> String {
    let framework = framework_yaml();
    let org = TestOrg::with_extras(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            framework: &framework,
            sections: WEB,
            ..Extras::default()
        },
    );
    std::fs::read_to_string(org.config_path()).unwrap()
}

/// The nodes of the test, each with its config directory; prints their stderr on a failure.
struct Nodes {
    url: String,
    runs: Vec<(String, OpcRun)>,
    dirs: Vec<(String, tempfile::TempDir)>,
}

impl Nodes {
    /// Node `name`'s config file (its directory made on first use).
    fn file(&mut self, name: &str) -> PathBuf {
        if !self.dirs.iter().any(|(n, _)| n == name) {
            self.dirs
                .push((name.to_string(), tempfile::tempdir().unwrap()));
        }
        let (_, dir) = self.dirs.iter().find(|(n, _)| n == name).unwrap();
        dir.path().join("opc.config.yaml")
    }

    /// Write `text` as node `name`'s config and start it.
    fn start(&mut self, name: &str, text: &str) {
        let file = self.file(name);
        std::fs::write(&file, text).unwrap();
        let run = OpcRun::start_with_args(
            &file,
            &["--node", name],
            &[(KEY_VAR, KEY), ("DATABASE_URL", self.url.as_str())],
        );
        self.runs.push((name.to_string(), run));
    }

    fn node(&self, name: &str) -> &OpcRun {
        &self.runs.iter().rfind(|(n, _)| n == name).unwrap().1
    }

    /// Stop node `name` with SIGTERM; it must exit 0.
    fn stop(&mut self, name: &str) {
        let at = self.runs.iter().rposition(|(n, _)| n == name).unwrap();
        let (_, run) = self.runs.remove(at);
        let stderr = run.stderr();
        let (code, _) = run.stop();
        assert_eq!(code, Some(0), "node {name} did not stop cleanly:\n{stderr}");
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (name, run) in &self.runs {
                eprintln!("--- stderr of node {name} ---\n{}", run.stderr());
            }
        }
    }
}

async fn get(opc: &OpcRun, path: &str) -> Value {
    let url = opc.url(path);
    let response = http_client().get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200, "GET {url}");
    response.json().await.unwrap()
}

/// The digest node `name`'s row in the nodes table carries.
async fn row_digest(db: &Db, name: &str) -> Option<String> {
    db.rows(
        "SELECT config_digest FROM cluster_nodes WHERE id = $1",
        &[&name],
    )
    .await
    .first()
    .map(|row| row.get(0))
}

/// Node `name`'s file reads `text`, it runs it (its row carries the digest, its org shows `role`
/// for `support`), within the deadline.
async fn runs(nodes: &Nodes, db: &Db, name: &str, text: &str, role: &str) {
    let file = nodes.dirs.iter().find(|(n, _)| n == name).unwrap();
    let file = file.1.path().join("opc.config.yaml");
    poll(
        WAIT,
        &format!("{name}'s file to be the saved config"),
        || {
            let file = file.clone();
            async move { (std::fs::read_to_string(&file).ok()? == text).then_some(()) }
        },
    )
    .await;
    let want = digest(text);
    poll(WAIT, &format!("{name}'s row to carry {want}"), || async {
        (row_digest(db, name).await.as_deref() == Some(want.as_str())).then_some(())
    })
    .await;
    let org = get(nodes.node(name), "/api/org").await;
    let support = org["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "support")
        .cloned()
        .unwrap();
    assert_eq!(support["role"], role, "{name} runs {org}");
}

/// Save `text` through `node`'s console, over the file whose ETag is `etag`: the answer.
async fn save(node: &OpcRun, text: &str, etag: &str) -> Value {
    let (status, saved) = post_json(
        &node.url("/admin/api/config/save"),
        json!({"text": text, "etag": etag}),
    )
    .await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["applied"], true, "{saved}");
    assert_eq!(saved["cluster"]["shared"], true, "{saved}");
    saved
}

fn file_of(nodes: &mut Nodes, name: &str) -> String {
    std::fs::read_to_string(nodes.file(name)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_saved_on_one_node_runs_on_every_node_and_an_invalid_one_nowhere() {
    let Some(url) = fresh_database("cluster_config").await else {
        return;
    };
    let db = Db::new(&url);
    let original = org_text();
    let mut nodes = Nodes {
        url: url.clone(),
        runs: Vec::new(),
        dirs: Vec::new(),
    };
    nodes.start(A, &original);
    nodes.start(B, &original);

    // Saved through A's console: B's file changes and B runs it.
    let loaded = get(nodes.node(A), "/admin/api/config").await;
    assert_eq!(loaded["text"], original.as_str());
    let first_role = "Support Agent, edited in the console";
    let first = original.replacen("role: Support Agent", &format!("role: {first_role}"), 1);
    assert_ne!(first, original);
    let saved = save(nodes.node(A), &first, loaded["etag"].as_str().unwrap()).await;
    runs(&nodes, &db, A, &first, first_role).await;
    runs(&nodes, &db, B, &first, first_role).await;
    let status = get(nodes.node(B), "/admin/api/reload").await;
    assert_eq!(
        (&status["last"]["outcome"], &status["last"]["trigger"]),
        (&json!("applied"), &json!("cluster")),
        "{status}"
    );

    // An invalid config put in the history directly (a bad hand edit, a newer build's config):
    // B neither writes nor applies it, keeps running, and says why.
    let broken = first.replacen("vp-eng", "vp-engg", 1);
    db.rows(
        "WITH saved AS (INSERT INTO config_history (saved_ms, node, by_whom, digest, text) \
         VALUES (0, 'by-hand', NULL, $1, $2) RETURNING id) \
         SELECT pg_notify('opc_cluster', 'config:' || id) FROM saved",
        &[&digest(&broken), &broken],
    )
    .await;
    let refused = poll(WAIT, "B to refuse the invalid config", || async {
        let status = get(nodes.node(B), "/admin/api/reload").await;
        (status["last"]["outcome"] == "rejected").then_some(status)
    })
    .await;
    assert_eq!(refused["last"]["trigger"], "cluster", "{refused}");
    // The file was never touched, so a look at the file (the watcher's, here forced by writing the
    // same text again) finds it running and withdraws nothing: the refusal stands.
    let looked = refused["checked"].as_u64().unwrap();
    std::fs::write(nodes.file(B), &first).unwrap();
    let after = poll(
        WAIT,
        "B's watcher to look at its unchanged file",
        || async {
            let status = get(nodes.node(B), "/admin/api/reload").await;
            (status["checked"].as_u64() > Some(looked)).then_some(status)
        },
    )
    .await;
    assert_eq!(
        (&after["last"]["outcome"], &after["stale"]),
        (&json!("rejected"), &json!(true)),
        "{after}"
    );
    assert_eq!(file_of(&mut nodes, B), first, "B's file is left as it was");
    assert_eq!(row_digest(&db, B).await, Some(digest(&first)));
    assert_eq!(nodes.node(B).health().await["status"], "ok");
    runs(&nodes, &db, B, &first, first_role).await;

    // The next valid save reaches B again; the refusal was said once, not at every look.
    let second_role = "Support Agent, edited twice";
    let second = first.replacen(first_role, second_role, 1);
    save(nodes.node(A), &second, saved["etag"].as_str().unwrap()).await;
    runs(&nodes, &db, B, &second, second_role).await;
    let said = nodes.node(B).stderr().matches("is not written to").count();
    assert_eq!(said, 1, "{}", nodes.node(B).stderr());

    // B's Config page lists the cluster's history, though B saved none of it: newest first, the
    // node each was saved on and its digest; both nodes run the newest, none the others.
    let history = poll(WAIT, "both nodes beside the newest save", || async {
        let history = get(nodes.node(B), "/admin/api/config/cluster").await;
        (history["versions"][0]["running"] == json!([A, B])).then_some(history)
    })
    .await;
    let listed: Vec<(Value, Value, Value)> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["node"].clone(), v["digest"].clone(), v["running"].clone()))
        .collect();
    assert_eq!(
        listed,
        [
            (json!(A), json!(digest(&second)), json!([A, B])),
            (json!("by-hand"), json!(digest(&broken)), json!([])),
            (json!(A), json!(digest(&first)), json!([])),
        ],
        "{history}"
    );
    let ids: Vec<i64> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    assert_eq!(
        (&history["this"], &history["unlisted"]),
        (&json!(B), &json!([])),
        "{history}"
    );
    // The page shows those rows, with their hooks.
    if let Some(mut browser) = Browser::for_test().await {
        browser
            .navigate(&nodes.node(B).url("/admin#config"))
            .await
            .unwrap();
        browser
            .wait_for(
                "document.querySelector('[data-config-history]').dataset.cluster === 'true' \
                 && document.querySelectorAll('tr[data-config-version]').length === 3",
                WAIT,
            )
            .await
            .unwrap();
        let rows = browser
            .eval(
                "!document.querySelector('[data-config-history]').hidden \
                 && JSON.stringify([...document.querySelectorAll('tr[data-config-version]')] \
                 .map((r) => [r.dataset.configVersion, r.dataset.savedOn, r.dataset.digest, r.dataset.running]))",
            )
            .await
            .unwrap();
        let want: Vec<Value> = history["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let running: Vec<&str> = v["running"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap())
                    .collect();
                json!([
                    v["id"].to_string(),
                    v["node"],
                    v["digest"],
                    running.join(" ")
                ])
            })
            .collect();
        let shown: Value = serde_json::from_str(rows.as_str().unwrap_or("null")).unwrap();
        assert_eq!(shown, Value::Array(want), "the page's rows");
    }

    // A node started with another file keeps it: only configs saved after its start are pulled.
    nodes.stop(B);
    nodes.start(B, &original);
    poll(
        WAIT,
        "B to say its file differs from the newest saved config",
        || {
            let stderr = nodes.node(B).stderr();
            async move {
                stderr
                    .contains("differs from the newest config saved in the cluster")
                    .then_some(())
            }
        },
    )
    .await;
    assert_eq!(file_of(&mut nodes, B), original, "B's file is kept");
    runs(&nodes, &db, B, &original, "Support Agent").await;
    // No save has B's digest: the history lists it apart, and B no longer beside the newest.
    poll(WAIT, "B's digest listed apart", || async {
        let history = get(nodes.node(A), "/admin/api/config/cluster").await;
        (history["unlisted"] == json!([{"digest": digest(&original), "running": [B]}])
            && history["versions"][0]["running"] == json!([A]))
        .then_some(())
    })
    .await;
    let saved_path = nodes.file(A);
    assert_eq!(std::fs::read_to_string(saved_path).unwrap(), second);
    nodes.stop(A);
    nodes.stop(B);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alone_the_config_history_is_the_files() {
    let org = TestOrg::with_sections(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Execution::default(),
        WEB,
    );
    let opc = OpcRun::start(&org.config_path(), &[(KEY_VAR, KEY)]);
    let history = get(&opc, "/admin/api/config/cluster").await;
    assert_eq!(
        history,
        json!({"cluster": false, "history": ".opc/config-history"})
    );
    // The page says where the history is, and shows no cluster history (not an empty table).
    let Some(mut browser) = Browser::for_test().await else {
        return;
    };
    browser.navigate(&opc.url("/admin#config")).await.unwrap();
    browser
        .wait_for(
            "document.querySelector('[data-config-history]').dataset.cluster === 'false'",
            WAIT,
        )
        .await
        .unwrap();
    let shown = browser
        .eval(
            "[document.querySelector('[data-config-history]').hidden, \
              document.querySelectorAll('tr[data-config-version]').length, \
              document.getElementById('page-config').textContent.includes('.opc/config-history/')]",
        )
        .await
        .unwrap();
    assert_eq!(shown, json!([true, 0, true]));
}
