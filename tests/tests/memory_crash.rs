//! Recall memory survives a crash of the real `opc run` between the SQLite commit and the index
//! update: kill -9 there, start again, and the message is searchable.
//!
//! How the crash lands exactly "between" without timing luck: before `opc run` starts, this test takes
//! the BM25 index's writer lock itself (tantivy's lock file, as a second indexing process would). The
//! engine then commits the turn and its recall rows to SQLite, and its indexer cannot index them (it
//! retries). The test checks that the rows are stored and not indexed, kills the process with SIGKILL,
//! lets the lock go, and starts `opc run` again: its indexer catches up from the stored cursor, and
//! `opc memory search` finds the message.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;

use opc_memory::embed::EmbedSlot;
use opc_memory::recall::RecallStore;
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, KEY_VAR, marker, write_recall_org};
use opc_tests::post_json as post;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::sse::Sse;
use opc_tests::wait::{OutputWithin, WAIT, wait_until};
use serde_json::json;

const FACT: &str = "Remember this: the launch code word is PAPAYA-7731.";

/// `opc memory search QUERY --agent ceo --mode bm25` on `config`: its stdout.
fn cli_search(config: &Path, query: &str) -> String {
    let out = Command::new(opc_binary())
        .args(["memory", "--config"])
        .arg(config)
        .args(["search", query, "--agent", "ceo", "--mode", "bm25"])
        .env("OPC_MODELS_OFFLINE", "1")
        .output_within(WAIT)
        .unwrap();
    assert!(
        out.status.success(),
        "opc memory search: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (BM25 cursor, last stored seq), read through a store of the test's own.
fn cursors(db: &Path) -> (i64, i64) {
    let store = RecallStore::open(db, EmbedSlot::new()).unwrap();
    let (bm25, _, last) = store.cursors().unwrap();
    (bm25, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_committed_but_not_indexed_when_opc_is_killed_is_searchable_after_restart() {
    let script = Script::new().agent(marker("ceo"), vec![Step::text("Noted.")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_recall_org(dir.path(), &llm.url());
    let db = dir.path().join(".opc/opc.db");

    // Before anything is stored, a search says so.
    assert!(cli_search(&config, "anything").contains("does not exist yet"));
    // Create the database and its index (opening a store creates both and takes no lock), then
    // hold the index's writer lock as another indexing process would.
    std::fs::create_dir_all(dir.path().join(".opc")).unwrap();
    drop(RecallStore::open(&db, EmbedSlot::new()).unwrap());
    let index = tantivy::Index::open_in_dir(dir.path().join(".opc/opc.db.index")).unwrap();
    let lock: tantivy::IndexWriter = index.writer(15_000_000).unwrap();

    let opc = OpcRun::start(&config, &[(KEY_VAR, KEY)]);
    let (status, body) = post(&opc.url("/api/conversations"), json!({})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_string();
    let mut sse = Sse::connect(&opc.url(&format!("/api/conversations/{id}/events")), None).await;
    let (status, body) = post(
        &opc.url(&format!("/api/conversations/{id}/messages")),
        json!({ "text": FACT }),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    sse.wait_for("message|edit", WAIT, |d| d["text"] == "Noted.")
        .await;
    drop(sse);

    // The turn is committed (the task and its answer), and the index has none of it.
    let (bm25, last) = cursors(&db);
    assert!(
        last >= 2,
        "the task and its answer are stored: last seq {last}"
    );
    assert!(bm25 < last, "the index is behind the rows: {bm25} < {last}");
    assert!(
        cli_search(&config, "launch code word").contains("no matches"),
        "not searchable before the restart"
    );

    // kill -9 (dropping the handle sends SIGKILL), and the other indexer goes away.
    drop(opc);
    drop(lock);

    // The next start catches up from the stored cursor.
    let opc = OpcRun::start(&config, &[(KEY_VAR, KEY)]);
    wait_until(WAIT, "the restarted indexer to catch up", || {
        let (bm25, now) = cursors(&db);
        bm25 >= now && now >= last
    })
    .await;
    let found = cli_search(&config, "launch code word");
    assert!(
        found.contains("PAPAYA-7731"),
        "searchable after restart: {found}"
    );
    // With its provenance: written by the web chat's user (the web chat's user id is the
    // conversation), in the CEO's namespace.
    assert!(
        found.contains(&format!("web:{id} in ceo")),
        "with its provenance: {found}"
    );
    let stderr = opc.stderr();
    let (code, _) = opc.stop();
    assert_eq!(code, Some(0), "{stderr}");
}
