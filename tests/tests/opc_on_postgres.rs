//! `opc run` with `framework.memory.storage: postgres`, end to end: the real binary, the scripted
//! LLM, the web chat over loopback and a throw-away PostgreSQL.
//! - a delegated request is answered, everything it kept is in PostgreSQL (no SQLite file is
//!   made), and after a restart the conversation replays and `opc tasks` lists its tree;
//! - a server that cannot be reached stops `opc run` within 10 s with exit 1, naming PostgreSQL and
//!   the host, never the password;
//! - `opc store copy --to postgres` moves an org that ran on SQLite, every row, into an empty
//!   database, refuses a second copy, and the org then runs on PostgreSQL with its history.
//!
//! Without a PostgreSQL server these skip with one line (`opc-testgate`), and fail under CI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::time::Duration;

use opc_tests::opc_process::opc_binary;
use opc_tests::org::{Extras, KEY, KEY_VAR, TestOrg, Wire, marker, relay};
use opc_tests::postgres::fresh_database;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::sse::Sse;
use opc_tests::wait::{OutputWithin, WAIT};
use opc_tests::web_chat::start;
use serde_json::Value;

const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";
const ON_POSTGRES: &str = "  memory:\n    storage: postgres\n";
const ANSWER: &str = "CEO: a status page in two sprints";

fn script() -> Script {
    Script::new()
        .agent(marker("ceo"), relay("vp-eng", "plan the page", "CEO: "))
        .agent(
            marker("vp-eng"),
            vec![Step::text("a status page in two sprints")],
        )
}

async fn org(llm: &ScriptedLlm, framework: &str) -> TestOrg {
    TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Default::default(),
        &Extras {
            framework,
            sections: WEB,
            ..Extras::default()
        },
    )
}

fn shows(text: &str) -> impl Fn(&Value) -> bool + '_ {
    move |data| data["text"].as_str() == Some(text)
}

/// `opc ARGS --config CONFIG` with `env`, its exit code, stdout and stderr.
fn cli(args: &[&str], org: &TestOrg, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    cli_within(WAIT, args, org, env)
}

/// [`cli`], killed (and failing the test) at `deadline`.
fn cli_within(
    deadline: Duration,
    args: &[&str],
    org: &TestOrg,
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let out = Command::new(opc_binary())
        .args(args)
        .arg("--config")
        .arg(org.config_path())
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .output_within(deadline)
        .unwrap_or_else(|e| panic!("opc {args:?}: {e}"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn rows(url: &str, table: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0)
}

/// Replay `conversation` on `opc` and wait for `text` in it.
async fn replays(opc: &opc_tests::opc_process::OpcRun, conversation: &str, text: &str) {
    let mut sse = Sse::connect(
        &opc.url(&format!("/api/conversations/{conversation}/events")),
        None,
    )
    .await;
    sse.wait_for("message|edit", WAIT, shows(text)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_runs_on_postgres_and_its_conversation_outlives_a_restart() {
    let Some(url) = fresh_database("opc_run_postgres").await else {
        return;
    };
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = org(&llm, ON_POSTGRES).await;
    let env = [(KEY_VAR, KEY), ("DATABASE_URL", url.as_str())];
    let opc = opc_tests::opc_process::OpcRun::start(&org.config_path(), &env);

    let (conversation, mut sse) = start(&opc, "Plan a public status page").await;
    sse.wait_for("progress", WAIT, |e| {
        e["event"] == "delegated" && e["to"] == "vp-eng"
    })
    .await;
    sse.wait_for("message|edit", WAIT, shows(ANSWER)).await;
    let (code, stderr) = opc.stop();
    assert_eq!(code, Some(0), "{stderr}");

    // Everything it kept is in PostgreSQL: the tree, the ledger, recall, the transcript, and no
    // SQLite file beside the config.
    assert!(rows(&url, "tasks").await >= 2);
    assert!(rows(&url, "llm_calls").await >= 3);
    assert!(rows(&url, "recall_messages").await >= 2);
    assert!(rows(&url, "web_messages").await >= 2);
    let dir = org.config_path().parent().unwrap().to_path_buf();
    assert!(
        !dir.join(".opc/opc.db").exists(),
        "a SQLite file was made beside the config"
    );
    assert!(!stderr.contains(&url), "the URL was printed: {stderr}");

    // A restart finds the conversation and the tree in the database.
    let opc = opc_tests::opc_process::OpcRun::start(&org.config_path(), &env);
    replays(&opc, &conversation, ANSWER).await;
    let (code, tasks, err) = cli(&["tasks"], &org, &env);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        tasks.contains("ceo") && tasks.contains("COMPLETED"),
        "{tasks}"
    );
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_postgres_stops_opc_run_naming_the_host_never_the_password() {
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let org = org(&llm, ON_POSTGRES).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://opc:s3cret-Pa55@127.0.0.1:{port}/opc");
    // Built (when stale) by a first command, so the deadline below is the start's alone.
    let (code, _, stderr) = cli(&["validate"], &org, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    // The bound: exit within 10 s (the deadline kills it and fails the test).
    let (code, _, stderr) = cli_within(
        Duration::from_secs(10),
        &["run"],
        &org,
        &[(KEY_VAR, KEY), ("DATABASE_URL", url.as_str())],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("PostgreSQL"), "{stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{port}/opc")),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "the password leaked: {stderr}");

    // No URL at all: the variable is named, with the line to set it.
    let (code, _, stderr) = cli(&["run"], &org, &[(KEY_VAR, KEY)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("DATABASE_URL"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_copy_moves_an_org_from_sqlite_to_an_empty_postgres() {
    let Some(url) = fresh_database("store_copy").await else {
        return;
    };
    let llm = ScriptedLlm::start(script()).await.unwrap();
    // The org runs on SQLite first.
    let org = org(&llm, "").await;
    let sqlite_env = [(KEY_VAR, KEY)];
    let opc = opc_tests::opc_process::OpcRun::start(&org.config_path(), &sqlite_env);
    let (conversation, mut sse) = start(&opc, "Plan a public status page").await;
    sse.wait_for("message|edit", WAIT, shows(ANSWER)).await;
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
    let (_, sqlite_tasks, _) = cli(&["tasks"], &org, &sqlite_env);

    let env = [(KEY_VAR, KEY), ("DATABASE_URL", url.as_str())];
    let (code, out, err) = cli(&["store", "copy", "--to", "postgres"], &org, &env);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("Copied") && out.contains("tasks"), "{out}");
    assert!(
        !out.contains(&url) && !err.contains(&url),
        "the URL was printed"
    );
    assert!(rows(&url, "tasks").await >= 2);

    // A second copy into the now non-empty database is refused, and changes nothing.
    let before = rows(&url, "recall_messages").await;
    let (code, _, err) = cli(&["store", "copy", "--to", "postgres"], &org, &env);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(rows(&url, "recall_messages").await, before);

    // The org, switched to PostgreSQL, has its history: the conversation replays, the same tasks.
    let config = std::fs::read_to_string(org.config_path()).unwrap();
    let switched = config.replacen("\nframework:\n", &format!("\nframework:\n{ON_POSTGRES}"), 1);
    assert_ne!(switched, config);
    std::fs::write(org.config_path(), switched).unwrap();
    let (code, pg_tasks, err) = cli(&["tasks"], &org, &env);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(pg_tasks, sqlite_tasks);
    let opc = opc_tests::opc_process::OpcRun::start(&org.config_path(), &env);
    replays(&opc, &conversation, ANSWER).await;
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0));
}
