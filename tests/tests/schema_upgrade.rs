//! One migration story for the one database file, end to end: a database made by an earlier `opc`
//! (main at commit 7aac739, before `schema_versions`) is opened by the `opc` built from this source,
//! which adopts every component's existing version without re-running or losing anything; a second
//! start changes nothing; and a database whose version for a component is newer than this build knows
//! is refused at start-up with an error naming the component, the file and the fix.
//!
//! The fixture, `tests/fixtures/opc-7aac739.sql`, is a SQL text dump of a real database: `opc run` at
//! 7aac739 driven through a scripted conversation over the web chat (a delegation, an approval decided
//! from the chat, recall and core blocks on). It was made with the ignored test below:
//!
//! ```text
//! git worktree add /tmp/opc-7aac739 7aac739 && cargo build --manifest-path /tmp/opc-7aac739/Cargo.toml -p opc-bot
//! OPC_FIXTURE_BINARY=/tmp/opc-7aac739/target/debug/opc OPC_FIXTURE_DB=/tmp/fixture.db \
//!   cargo test -p opc-tests --test schema_upgrade -- --ignored make_the_fixture
//! (sqlite3 /tmp/fixture.db .dump; echo "PRAGMA user_version = $(sqlite3 /tmp/fixture.db 'PRAGMA user_version');") \
//!   > tests/fixtures/opc-7aac739.sql
//! ```
//!
//! (`.dump` leaves out `PRAGMA user_version`, where the engine kept its version then: the last line adds
//! it.) The dump loads back with rusqlite's `execute_batch`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, KEY_VAR, framework_yaml, marker};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use rusqlite::Connection;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

/// The database a 7aac739 `opc run` left behind (see the module comment).
const FIXTURE: &str = include_str!("../fixtures/opc-7aac739.sql");

/// The org the fixture was made with, its LLM at `llm_url` and its database in the config's directory.
fn config(llm_url: &str) -> String {
    format!(
        r#"{framework}
agents:
  ceo:
    role: CEO
    level: 0
    prompt: "You run the company."
    tools: [delegate, escalate]
    children: [vp-ops]
    memory:
      blocks:
        - label: persona
          description: Your identity and decision-making style
          value: "Decisive, brief."
          limit: 2000
      recall: true
  vp-ops:
    role: VP Operations
    level: 1
    parent: ceo
    tools: [escalate, requestApproval]
    memory:
      blocks:
        - label: persona
          limit: 2000
      recall: true
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#,
        framework = framework_yaml(llm_url, false)
    )
}

/// The scripted conversation: the CEO delegates a refund to vp-ops, which asks for approval, and both
/// answer once it is approved.
fn script() -> Script {
    Script::new()
        .agent(
            marker("ceo"),
            vec![
                Step::tool(
                    "delegate",
                    json!({"agent": "vp-ops", "task": "refund order 7"}),
                ),
                Step::text("CEO: {{last_result}}"),
            ],
        )
        .agent(
            marker("vp-ops"),
            vec![
                Step::tool(
                    "request_approval",
                    json!({"summary": "Refund $120 for order 7"}),
                ),
                Step::text("VP: {{last_result}}"),
            ],
        )
}

/// Makes the fixture with the `opc` named by `OPC_FIXTURE_BINARY` (built at 7aac739), leaving the
/// database at `OPC_FIXTURE_DB`; the module comment shows the whole recipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "makes tests/fixtures/opc-7aac739.sql with an old build; see the module comment"]
async fn make_the_fixture() {
    let binary = std::env::var("OPC_FIXTURE_BINARY").expect("OPC_FIXTURE_BINARY: the old opc");
    let out = std::env::var("OPC_FIXTURE_DB").expect("OPC_FIXTURE_DB: where the database goes");
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("opc.config.yaml");
    std::fs::write(&config_path, config(&llm.url())).unwrap();
    let opc = OpcRun::try_start_binary(Path::new(&binary), &config_path, &[(KEY_VAR, KEY)])
        .unwrap_or_else(|(code, stderr)| panic!("old opc exited {code:?}: {stderr}"));
    let (conversation, mut sse) = opc_tests::web_chat::start(&opc, "Refund order 7").await;
    let card = sse.wait_for("card", WAIT, |_| true).await;
    let approval = card["card"]["approval"].as_i64().expect("an approval id");
    let (status, body) = opc_tests::post_json(
        &opc.url(&format!("/api/approvals/{approval}")),
        json!({ "option": "approve" }),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    sse.wait_for("message|edit", WAIT, |m| {
        m["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("CEO: VP:"))
    })
    .await;
    assert!(!conversation.is_empty());
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
    // One standalone file, whatever was still in the WAL.
    let db = Connection::open(dir.path().join(".opc/opc.db")).unwrap();
    let _ = std::fs::remove_file(&out);
    db.execute("VACUUM INTO ?1", [&out]).unwrap();
}

/// Every component of the file and the version this build brings it to.
const COMPONENTS: [(&str, i64); 5] = [
    ("agents", opc_agents::store::schema::VERSION),
    ("console", 1),
    ("gateway", 1),
    ("memory", opc_memory::schema::MIGRATIONS.len() as i64),
    (
        "web",
        opc_adapters::web::transcript::MIGRATIONS.len() as i64,
    ),
];

/// A config directory whose database is the fixture, loaded back from its dump.
fn restored(llm_url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("opc.config.yaml"), config(llm_url)).unwrap();
    std::fs::create_dir_all(dir.path().join(".opc")).unwrap();
    let db = Connection::open(database(dir.path())).unwrap();
    db.execute_batch(FIXTURE).unwrap();
    dir
}

fn database(dir: &Path) -> std::path::PathBuf {
    dir.join(".opc/opc.db")
}

/// Every row of every table (but `schema_versions`), each row as its columns' SQL literals, sorted;
/// with `columns_of`, only the columns that database's table has (a migration may add columns).
fn rows(db: &Connection, columns_of: Option<&Tables>) -> Tables {
    let mut stmt = db
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'schema_versions'",
        )
        .unwrap();
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = BTreeMap::new();
    for table in tables {
        let columns: Vec<String> = match columns_of.and_then(|c| c.get(&table)) {
            Some(known) => known.columns.clone(),
            None => db
                .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect(),
        };
        let select = columns
            .iter()
            .map(|c| format!("quote(\"{c}\")"))
            .collect::<Vec<_>>()
            .join(" || ',' || ");
        let mut rows: Vec<String> = db
            .prepare(&format!("SELECT {select} FROM \"{table}\""))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.insert(table, TableRows { columns, rows });
    }
    out
}

struct TableRows {
    columns: Vec<String>,
    rows: Vec<String>,
}

type Tables = BTreeMap<String, TableRows>;

/// `schema_versions` as (component, version, updated_ms), by component.
fn versions(db: &Connection) -> Vec<(String, i64, i64)> {
    db.prepare("SELECT component, version, updated_ms FROM schema_versions ORDER BY component")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Start the `opc` built from this source on `dir`'s config, wait for its ready line, stop it cleanly.
fn start_and_stop(dir: &Path) {
    let opc = OpcRun::try_start_binary(
        &opc_binary(),
        &dir.join("opc.config.yaml"),
        &[(KEY_VAR, KEY)],
    )
    .unwrap_or_else(|(code, stderr)| panic!("opc run exited {code:?} before ready:\n{stderr}"));
    let (code, rest) = opc.stop();
    assert_eq!(code, Some(0), "{rest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_schema_versions_is_adopted_with_every_row() {
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    let dir = restored(&llm.url());
    let before = rows(&Connection::open(database(dir.path())).unwrap(), None);
    // The fixture holds rows of every component, so "intact" means something for each.
    for table in [
        "tasks",
        "llm_calls",
        "approvals",
        "memory_blocks",
        "recall_messages",
        "web_messages",
        "gateway_threads",
        "gateway_cards",
    ] {
        assert!(
            !before[table].rows.is_empty(),
            "the fixture has {table} rows"
        );
    }

    start_and_stop(dir.path());
    let db = Connection::open(database(dir.path())).unwrap();
    let after = rows(&db, Some(&before));
    for (table, old) in &before {
        // Memory's and the web transcript's legacy version tables are markers, not data: each is
        // kept in step with its component's `schema_versions` row, so its one row changes by design.
        if table == "memory_schema" || table == "web_schema" {
            continue;
        }
        let new = &after[table];
        for row in &old.rows {
            assert!(
                new.rows.contains(row),
                "{table} lost a row in the upgrade: {row}"
            );
        }
    }
    let legacy: i64 = db
        .query_row("SELECT version FROM memory_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        legacy,
        opc_memory::schema::MIGRATIONS.len() as i64,
        "memory's legacy marker is kept in step"
    );
    let recorded = versions(&db);
    let components: Vec<(&str, i64)> = recorded.iter().map(|(c, v, _)| (c.as_str(), *v)).collect();
    assert_eq!(components, COMPONENTS, "one row per component");
    let user_version: i64 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        user_version,
        opc_agents::store::schema::VERSION,
        "the engine's old marker is kept in step (> 4: the build that made the fixture refuses it now)"
    );
    let everything = rows(&db, None);
    drop(db);

    // A second start adopts nothing, migrates nothing, writes no version.
    start_and_stop(dir.path());
    let db = Connection::open(database(dir.path())).unwrap();
    assert_eq!(versions(&db), recorded, "schema_versions unchanged");
    let again = rows(&db, None);
    assert_eq!(
        again.keys().collect::<Vec<_>>(),
        everything.keys().collect::<Vec<_>>(),
        "no table added or dropped"
    );
    for (table, then) in &everything {
        assert_eq!(again[table].columns, then.columns, "{table}'s columns");
        assert_eq!(again[table].rows.len(), then.rows.len(), "{table}'s rows");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_a_newer_build_is_refused_at_start_up() {
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    for (component, known) in [
        ("agents", opc_agents::store::schema::VERSION),
        ("gateway", 1),
    ] {
        let dir = restored(&llm.url());
        start_and_stop(dir.path());
        let db = Connection::open(database(dir.path())).unwrap();
        db.execute(
            "UPDATE schema_versions SET version = ?2 WHERE component = ?1",
            rusqlite::params![component, known + 1],
        )
        .unwrap();
        let before = rows(&db, None);
        drop(db);
        let Err((code, stderr)) = OpcRun::try_start_binary(
            &opc_binary(),
            &dir.path().join("opc.config.yaml"),
            &[(KEY_VAR, KEY)],
        ) else {
            panic!("opc run started on a database with a newer {component} schema");
        };
        assert_eq!(code, Some(1), "{stderr}");
        let newer = format!("schema version {}", known + 1);
        for needle in [newer.as_str(), "opc.db", "framework.memory.path"] {
            assert!(
                stderr.contains(needle),
                "{component}: {needle:?} in {stderr}"
            );
        }
        if component == "gateway" {
            assert!(stderr.contains("gateway tables"), "{stderr}");
        }
        // Refused before writing anything.
        let after = rows(&Connection::open(database(dir.path())).unwrap(), None);
        for (table, then) in &before {
            assert_eq!(after[table].rows, then.rows, "{table} unchanged");
        }
    }
}
