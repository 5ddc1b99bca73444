//! End to end, over a real socket to the scripted LLM: recall memory.
//!
//! - A fact told to the CEO in conversation 1 is in the CEO's request in conversation 2 (the Select
//!   step puts recalled messages before the task), and `conversation_search` finds it.
//! - A subordinate's search of its manager's memory is a tool error that shows nothing of it.
//! - With the privacy gateway on, PII recalled from an earlier conversation is masked in the outbound
//!   request like any other text of the prompt, and restored in the answer: the two compose.
//! - The index is derived: rows the engine wrote while no indexer ran (a crash between the SQLite
//!   commit and the index update) are found once an indexer catches up from the sequence numbers.
//!
//! The embedding model is not loaded here, so recall runs on BM25 alone (what `opc run` does until the
//! model has loaded); the results do not depend on it.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use opc_agents::context::{BlockMemory, RECALL_BUDGET_TOKENS};
use opc_agents::{Engine, SqliteStore, Store, TaskState};
use opc_memory::embed::EmbedSlot;
use opc_memory::recall::{Mode, Query, RecallStore};
use opc_tests::org::{KEY, KEY_VAR, TestOrg, framework_yaml, marker};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, wait_until, within};
use serde_json::{Value, json};

const FACT: &str = "Remember this: the launch code word is PAPAYA-7731.";

fn config(llm_url: &str) -> (tempfile::TempDir, opc_hierarchy::Loaded) {
    config_with(llm_url, false)
}

/// The org, with the privacy gateway on (its pattern tier: no model is loaded here) or off.
fn config_with(llm_url: &str, privacy: bool) -> (tempfile::TempDir, opc_hierarchy::Loaded) {
    let frame = framework_yaml(llm_url, privacy);
    let yaml = format!(
        r#"{frame}agents:
  ceo:
    role: CEO
    tools: [delegate, conversation_search]
    children: [worker]
  worker:
    role: Worker
    parent: ceo
    tools: [conversation_search]
    memory:
      recall: false
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opc.config.yaml");
    std::fs::write(&path, yaml).unwrap();
    let loaded = opc_hierarchy::load(&path).unwrap_or_else(|e| panic!("config: {e}"));
    (dir, loaded)
}

/// An engine with block and recall memory on `db`; with `indexer`, a running recall indexer woken
/// after each commit (as `opc run` has), else none (the index stays behind the rows).
async fn engine(
    db: &Path,
    loaded: &opc_hierarchy::Loaded,
    indexer: bool,
) -> (Engine, RecallStore, Option<opc_memory::recall::Indexer>) {
    let store = SqliteStore::open(db).unwrap_or_else(|e| panic!("store: {e}"));
    let recall = RecallStore::open(db, EmbedSlot::new()).unwrap_or_else(|e| panic!("recall: {e}"));
    let running = indexer.then(|| {
        let wake = recall.clone();
        store.on_recall_append(Box::new(move || wake.notify()));
        recall.spawn_indexer().unwrap()
    });
    let memory = BlockMemory::open(db, &loaded.config, Arc::new(loaded.org.clone()))
        .unwrap_or_else(|e| panic!("memory: {e}"))
        .with_recall(recall.clone(), &loaded.config, RECALL_BUDGET_TOKENS);
    let engine = Engine::from_config(
        loaded,
        Arc::new(store),
        Arc::new(memory),
        TestOrg::options(false),
        |var| (var == KEY_VAR).then(|| KEY.to_string()),
    )
    .await
    .unwrap_or_else(|e| panic!("engine: {e}"));
    (engine, recall, running)
}

/// Whether BM25 has indexed every row written so far.
fn caught_up(recall: &RecallStore) -> bool {
    recall
        .cursors()
        .is_ok_and(|(bm25, _, last)| last > 0 && bm25 >= last)
}

fn tool_result_texts(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let content = match &block["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push((content, block["is_error"].as_bool().unwrap_or(false)));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_from_one_conversation_is_recalled_in_the_next_and_searchable() {
    // The scripted CEO follows its script per conversation: search, delegate, relay.
    let script = Script::new()
        .agent(
            marker("ceo"),
            vec![
                Step::tool("conversation_search", json!({"query": "launch code word"})),
                Step::tool(
                    "delegate",
                    json!({"agent": "worker", "task": "find the code"}),
                ),
                Step::text("CEO: {{last_result}}"),
            ],
        )
        .agent(
            marker("worker"),
            vec![
                Step::tool(
                    "conversation_search",
                    json!({"query": "launch code word", "agent": "ceo"}),
                ),
                Step::text("WORKER-DONE"),
            ],
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let (dir, loaded) = config(&llm.url());
    let db = dir.path().join("opc.db");
    let (engine, recall, _indexer) = engine(&db, &loaded, true).await;

    let run = engine.send(None, FACT).await.unwrap();
    let first = within(WAIT, "conversation 1", run.wait()).await;
    assert_eq!(first.state, TaskState::Completed, "{}", first.text);
    wait_until(WAIT, "the recall index to catch up", || caught_up(&recall)).await;

    // Conversation 2, a new one: the Select step brings the fact before the task.
    let run = engine
        .send(None, "What is the launch code word?")
        .await
        .unwrap();
    let second = within(WAIT, "conversation 2", run.wait()).await;
    assert_eq!(second.state, TaskState::Completed, "{}", second.text);
    assert_ne!(first.conversation, second.conversation);
    let ceo = llm.requests_for(&marker("ceo"));
    assert_eq!(ceo.len(), 6, "3 requests per conversation");
    let asked = ceo[3].user_texts().join("\n");
    assert!(asked.contains("PAPAYA-7731"), "recalled: {asked}");
    assert!(asked.contains("What is the launch code word?"), "{asked}");
    // Conversation 1 had nothing to recall.
    assert!(!ceo[0].user_texts().join("\n").contains("Relevant memory"));

    // conversation_search finds it too (the CEO's own namespace).
    let found = &tool_result_texts(&ceo[4].body)[0];
    assert!(!found.1, "{}", found.0);
    assert!(found.0.contains("PAPAYA-7731"), "{}", found.0);

    // The worker may not search its manager's memory: a tool error that shows nothing of it.
    let worker = llm.requests_for(&marker("worker"));
    let refused = &tool_result_texts(&worker[1].body)[0];
    assert!(refused.1, "expected a tool error: {}", refused.0);
    assert!(!refused.0.contains("PAPAYA"), "{}", refused.0);
    within(WAIT, "shutdown", engine.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_while_no_indexer_ran_are_found_after_catch_up() {
    let script = Script::new().agent(marker("ceo"), vec![Step::text("Noted.")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let (dir, loaded) = config(&llm.url());
    let db = dir.path().join("opc.db");

    // The engine commits the turn (and its recall rows); no index update ever happens, as when the
    // process dies between the SQLite commit and the indexer.
    let (engine, recall, none) = engine(&db, &loaded, false).await;
    assert!(none.is_none());
    let run = engine.send(None, FACT).await.unwrap();
    let outcome = within(WAIT, "the turn", run.wait()).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    within(WAIT, "shutdown", engine.shutdown()).await;
    drop(engine);
    let (bm25, _, last) = recall.cursors().unwrap();
    assert!(
        last >= 2,
        "the task and its answer are stored: {bm25} {last}"
    );
    assert!(bm25 < last, "the index is behind");
    let query = Query::new("launch code word", vec!["ceo".into()], Mode::Bm25, 5);
    assert!(recall.search(&query).unwrap().is_empty(), "not indexed yet");
    drop(recall);

    // The next start: its indexer catches up from the stored cursor, and the fact is found.
    let recall = RecallStore::open(&db, EmbedSlot::new()).unwrap();
    let _indexer = recall.spawn_indexer().unwrap();
    wait_until(WAIT, "the recall index to catch up", || caught_up(&recall)).await;
    let hits = recall.search(&query).unwrap();
    assert!(
        hits.iter().any(|h| h.message.text.contains("PAPAYA-7731")),
        "found after catch-up"
    );
    let fact = hits
        .iter()
        .find(|h| h.message.text.contains("PAPAYA-7731"))
        .unwrap();
    assert_eq!(fact.message.author, "user");
    assert_eq!(fact.message.namespace, "ceo");
    assert_eq!(fact.message.conversation, outcome.conversation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recalled_pii_is_masked_in_the_outbound_request_and_restored_in_the_answer() {
    const EMAIL: &str = "jane.roe@example.org";
    // The scripted CEO repeats the first user message it was sent (the recalled memory and the task).
    let script = Script::new().agent(marker("ceo"), vec![Step::text("CEO heard: {{input}}")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let (dir, loaded) = config_with(&llm.url(), true);
    let db = dir.path().join("opc.db");
    let (engine, recall, _indexer) = engine(&db, &loaded, true).await;

    let run = engine
        .send(
            None,
            &format!("Remember that the billing contact email is {EMAIL}."),
        )
        .await
        .unwrap();
    let first = within(WAIT, "conversation 1", run.wait()).await;
    assert_eq!(first.state, TaskState::Completed, "{}", first.text);
    wait_until(WAIT, "the recall index to catch up", || caught_up(&recall)).await;

    let run = engine
        .send(None, "Who is the billing contact email?")
        .await
        .unwrap();
    let second = within(WAIT, "conversation 2", run.wait()).await;
    assert_eq!(second.state, TaskState::Completed, "{}", second.text);

    // Nothing real left the process: not in conversation 1, not in the recalled memory of 2.
    let requests = llm.requests_for(&marker("ceo"));
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(
            !request.body.to_string().contains(EMAIL),
            "the real email reached the provider: {}",
            request.body
        );
    }
    let asked = requests[1].user_texts().join("\n");
    assert!(asked.contains("Relevant memory"), "recalled: {asked}");
    assert!(asked.contains("billing contact email is "), "{asked}");
    assert!(asked.contains('@'), "the fake stands in its place: {asked}");
    // The answer quotes the masked prompt; the privacy layer put the real value back.
    assert!(second.text.contains(EMAIL), "restored: {}", second.text);
    within(WAIT, "shutdown", engine.shutdown()).await;
}
