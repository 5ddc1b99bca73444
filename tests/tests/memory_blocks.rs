//! End to end, over a real socket to the scripted LLM: core memory blocks edited through the memory
//! tools reach the next turn's system prompt, survive an engine restart on the same database, and the
//! namespace ACL holds for tool calls (a manager reads a subordinate's block; a subordinate reading its
//! manager's gets a tool error).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use opc_agents::context::BlockMemory;
use opc_agents::{Engine, SqliteStore, TaskState};
use opc_memory::blocks::{Actor, BlockStore, Edit};
use opc_tests::org::{KEY, KEY_VAR, TestOrg, framework_yaml, marker};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, wait_until, within};
use serde_json::json;

fn config(llm_url: &str) -> (tempfile::TempDir, opc_hierarchy::Loaded) {
    let frame = framework_yaml(llm_url, false);
    let yaml = format!(
        r#"{frame}sharedBlocks:
  plan: {{ description: the shared plan, value: "PLAN-V1" }}
agents:
  ceo:
    role: CEO
    tools: [delegate, memory_read, memory_write, memory_replace, memory_insert]
    children: [mgr]
    memory:
      recall: false
      sharedBlocks: [plan]
      blocks:
        - {{ label: persona, description: who you are, value: "I am the CEO.", limit: 200 }}
  mgr:
    role: Manager
    parent: ceo
    tools: [delegate, memory_read]
    children: [worker]
    memory:
      recall: false
      sharedBlocks: [plan]
      blocks:
        - {{ label: notes, description: manager notes, value: "MGR-PRIVATE-NOTE" }}
  worker:
    role: Worker
    parent: mgr
    tools: [memory_read]
    memory:
      recall: false
      blocks:
        - {{ label: todo, description: open work, value: "WORKER-TODO-ITEM" }}
"#
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("opc.config.yaml");
    std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("write config: {e}"));
    let loaded = opc_hierarchy::load(&path).unwrap_or_else(|e| panic!("config: {e}"));
    (dir, loaded)
}

/// An engine with core-block memory on the database in `dir`.
async fn engine(dir: &tempfile::TempDir, loaded: &opc_hierarchy::Loaded) -> Engine {
    let db = dir.path().join("opc.db");
    let store = SqliteStore::open(&db).unwrap_or_else(|e| panic!("store: {e}"));
    let memory = BlockMemory::open(&db, &loaded.config, Arc::new(loaded.org.clone()))
        .unwrap_or_else(|e| panic!("memory: {e}"));
    Engine::from_config(
        loaded,
        Arc::new(store),
        Arc::new(memory),
        TestOrg::options(false),
        |var| (var == KEY_VAR).then(|| KEY.to_string()),
    )
    .await
    .unwrap_or_else(|e| panic!("engine: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_edits_reach_the_next_turn_survive_a_restart_and_obey_the_acl() {
    let script = Script::new()
        .agent(
            marker("ceo"),
            vec![
                // Conversation 1: edit, then answer.
                Step::tool(
                    "memory_replace",
                    json!({"label": "persona", "old": "I am the CEO.", "new": "I am the CEO. FAVOURITE-COLOUR-TEAL"}),
                ),
                Step::text("noted"),
                // The follow-up (after the restart): delegate, then relay.
                Step::tool("delegate", json!({"agent": "mgr", "task": "check the team"})),
                Step::text("CEO: {{last_result}}"),
            ],
        )
        .agent(
            marker("mgr"),
            vec![
                Step::tool("memory_read", json!({"agent": "worker", "label": "todo"})),
                Step::tool("delegate", json!({"agent": "worker", "task": "peek upward"})),
                Step::text("MGR-DONE"),
            ],
        )
        .agent(
            marker("worker"),
            vec![
                Step::tool("memory_read", json!({"agent": "mgr", "label": "notes"})),
                Step::text("WORKER-DONE"),
            ],
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let (dir, loaded) = config(&llm.url());

    // Conversation 1: the model edits its block; the next request's system prompt shows the edit.
    let first = engine(&dir, &loaded).await;
    let run = first
        .send(None, "remember my favourite colour")
        .await
        .unwrap();
    let outcome = within(WAIT, "conversation 1", run.wait()).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    let ceo = llm.requests_for(&marker("ceo"));
    assert_eq!(ceo.len(), 2);
    assert!(ceo[0].tool_names().contains(&"memory_replace".to_string()));
    assert!(ceo[0].system.contains("I am the CEO."), "{}", ceo[0].system);
    assert!(!ceo[0].system.contains("TEAL"));
    assert!(
        ceo[0].system.contains("used 13 of 200 characters"),
        "{}",
        ceo[0].system
    );
    let results = ceo[1].all_tool_results();
    assert_eq!(results.len(), 1);
    assert!(!results[0].1, "the edit failed: {}", results[0].0);
    assert!(
        ceo[1]
            .system
            .contains("I am the CEO. FAVOURITE-COLOUR-TEAL"),
        "{}",
        ceo[1].system
    );
    assert!(ceo[1].system.contains("version 2"), "{}", ceo[1].system);
    // Recall is never baked into the stored first message.
    assert_eq!(ceo[0].user_texts(), ["remember my favourite colour"]);
    within(WAIT, "shutdown", first.shutdown()).await;
    drop(first);

    // Restart on the same database: the edit is still the truth (not the config's seed). A follow-up
    // in the same conversation (the scripted server keys the CEO's cursor by its first message).
    let second = engine(&dir, &loaded).await;
    let run = second
        .send(Some(&outcome.conversation), "how is the team")
        .await
        .unwrap();
    let outcome = within(WAIT, "conversation 2", run.wait()).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    assert_eq!(outcome.text, "CEO: MGR-DONE");
    let ceo = llm.requests_for(&marker("ceo"));
    assert!(
        ceo[2].system.contains("FAVOURITE-COLOUR-TEAL"),
        "{}",
        ceo[2].system
    );

    // The manager reads its subordinate's block.
    let mgr = llm.requests_for(&marker("mgr"));
    let read = &mgr[1].all_tool_results()[0];
    assert!(!read.1, "{}", read.0);
    assert!(read.0.contains("WORKER-TODO-ITEM"), "{}", read.0);
    // The subordinate's read of its manager's block is a tool error that leaks nothing.
    let worker = llm.requests_for(&marker("worker"));
    let refused = &worker[1].all_tool_results()[0];
    assert!(refused.1, "expected a tool error: {}", refused.0);
    assert!(refused.0.contains("is above you"), "{}", refused.0);
    assert!(!refused.0.contains("MGR-PRIVATE-NOTE"), "{}", refused.0);
    // Only the configured memory tools are offered: the worker has memory_read, not memory_write.
    assert_eq!(worker[0].tool_names(), ["memory_read"]);
    within(WAIT, "shutdown", second.shutdown()).await;
    llm.shutdown().await;
}

/// Two agents edit one shared block at once: the CEO's model has been shown version 1 when the
/// manager's edit lands; the CEO's edit, naming version 1, is refused with the manager's value, and
/// the manager's edit is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_shared_block_edit_is_refused_with_the_current_value() {
    // The CEO's reply is held back until the manager's edit is in (the test makes it as soon as the
    // CEO's request, rendered with version 1, has arrived).
    let script = Script::new().agent(
        marker("ceo"),
        vec![
            Step::tool(
                "memory_write",
                json!({"label": "plan", "value": "CEO-PLAN"}),
            )
            .with_delay_ms(1500),
            Step::text("{{last_result}}"),
        ],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let (dir, loaded) = config(&llm.url());
    let engine = engine(&dir, &loaded).await;
    let run = engine.send(None, "update the plan").await.unwrap();
    wait_until(WAIT, "the CEO's first request", || {
        !llm.requests_for(&marker("ceo")).is_empty()
    })
    .await;
    let ceo = llm.requests_for(&marker("ceo"));
    assert!(ceo[0].system.contains("PLAN-V1"), "{}", ceo[0].system);
    // The manager edits the same block on its own connection, having read version 1.
    let manager = BlockStore::open(
        &dir.path().join("opc.db"),
        &loaded.config,
        Arc::new(loaded.org.clone()),
    )
    .unwrap();
    let edited = manager
        .edit(
            Actor {
                agent: "mgr",
                task: None,
            },
            "plan",
            &Edit::Write("MGR-PLAN".into()),
            Some(1),
        )
        .unwrap();
    assert_eq!(edited.version, 2);
    let outcome = within(WAIT, "the CEO's answer", run.wait()).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    // The CEO's model got a tool error carrying the current value …
    let ceo = llm.requests_for(&marker("ceo"));
    let result = &ceo[1].all_tool_results()[0];
    assert!(result.1, "expected a stale error: {}", result.0);
    assert!(
        result.0.contains("changed since you read it"),
        "{}",
        result.0
    );
    assert!(result.0.contains("MGR-PLAN"), "{}", result.0);
    // … its next prompt shows the manager's value, and nothing was lost or overwritten.
    assert!(ceo[1].system.contains("MGR-PLAN"), "{}", ceo[1].system);
    let stored = manager.read("ceo", "plan").unwrap();
    assert_eq!((stored.value.as_str(), stored.version), ("MGR-PLAN", 2));
    within(WAIT, "shutdown", engine.shutdown()).await;
    llm.shutdown().await;
}
