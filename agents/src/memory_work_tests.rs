//! The memory worker end to end inside the crate: a real engine over a SQLite file, a real facts
//! store, and a scripted model that answers agents, extraction calls and consolidation calls by the
//! first line of their system prompt.
//!
//! A top-level test module (not inside `memory_work`): it drives the engine, which uses
//! `memory_work`, so inside it the module graph would have a cycle.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opc_memory::blocks::agent_namespace;
use opc_memory::facts::{FactStore, FactVersion, Source, View};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, broadcast};

use crate::context::{BlockMemory, MemoryHooks};
use crate::events::Event;
use crate::llm::provider::Providers;
use crate::llm::{
    Content, LlmError, LlmRequest, LlmResponse, LlmService, StopReason, ToolChoice, Usage, Work,
};
use crate::store::{SqliteStore, Store, TaskState};
use crate::{Engine, EngineOptions};

/// Every wait in these tests ends by this deadline.
const DEADLINE: Duration = Duration::from_secs(20);

type Script = Box<dyn Fn(&LlmRequest) -> Vec<Content> + Send>;

/// The scripted model: agents answer `Noted: <task>`; memory calls take the next script of their
/// kind (an extraction without one answers NOOP; a consolidation without one stops).
#[derive(Default)]
struct Scripted {
    requests: Mutex<Vec<LlmRequest>>,
    extract: Mutex<VecDeque<Script>>,
    consolidate: Mutex<VecDeque<Script>>,
    /// When set, an extraction call waits for a permit (released by the test) before answering.
    hold_extract: Option<Arc<Semaphore>>,
}

impl Scripted {
    fn extract(&self, script: impl Fn(&LlmRequest) -> Value + Send + 'static) {
        self.extract.lock().unwrap().push_back(Box::new(move |r| {
            vec![Content::ToolUse {
                id: "tu_facts".into(),
                name: "record_facts".into(),
                input: script(r),
            }]
        }));
    }

    fn consolidate(&self, script: impl Fn(&LlmRequest) -> Vec<Content> + Send + 'static) {
        self.consolidate.lock().unwrap().push_back(Box::new(script));
    }

    fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().unwrap().clone()
    }

    fn of_kind(&self, marker: &str) -> Vec<LlmRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.system.lines().next() == Some(marker))
            .collect()
    }
}

#[async_trait::async_trait]
impl LlmService for Scripted {
    async fn call(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        self.requests.lock().unwrap().push(LlmRequest {
            stream: None,
            ..request.clone()
        });
        let first = request.system.lines().next().unwrap_or("");
        let content = if first == "OPC memory: extract" {
            if let Some(hold) = &self.hold_extract {
                hold.acquire().await.unwrap().forget();
            }
            let script = self.extract.lock().unwrap().pop_front();
            match script {
                Some(script) => script(&request),
                None => vec![Content::ToolUse {
                    id: "tu_noop".into(),
                    name: "record_facts".into(),
                    input: json!({"facts": [{"op": "NOOP"}]}),
                }],
            }
        } else if first == "OPC memory: consolidate" {
            let script = self.consolidate.lock().unwrap().pop_front();
            match script {
                Some(script) => script(&request),
                None => vec![Content::text("done")],
            }
        } else {
            let task = request
                .messages
                .last()
                .map(|m| m.text())
                .unwrap_or_default();
            vec![Content::text(format!("Noted: {task}"))]
        };
        let stop_reason = if content.iter().any(|c| matches!(c, Content::ToolUse { .. })) {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        Ok(LlmResponse {
            content,
            stop_reason,
            usage: Some(Usage {
                input_tokens: 100,
                output_tokens: 20,
            }),
            cost_usd: 0.0,
            attempts: 1,
            privacy: None,
        })
    }
}

/// The org: one CEO keeping facts, with one block of its own.
fn config(dir: &Path, consolidation: &str) -> opc_hierarchy::Loaded {
    config_with(dir, consolidation, "{ enabled: false }")
}

/// [`config`] with `framework.privacy` set to `privacy`.
fn config_with(dir: &Path, consolidation: &str, privacy: &str) -> opc_hierarchy::Loaded {
    let text = format!(
        "framework:\n  defaultProvider: p\n  defaultModel: m\n  fastModel: p/fast\n  providers: {{ p: {{ kind: anthropic, apiKeyEnv: OPC_NO_SUCH_KEY, models: {{ m: {{ input: 1, output: 1 }}, fast: {{ input: 1, output: 1 }} }} }} }}\n  privacy: {privacy}\n  memory: {{ consolidation: {{ {consolidation} }} }}\nagents:\n  ceo: {{ role: CEO, level: 0, memory: {{ recall: false, archival: true, blocks: [{{ label: notes, description: n, value: NOTES }}] }} }}\n"
    );
    let path = dir.join("opc.config.yaml");
    std::fs::write(&path, text).unwrap();
    opc_hierarchy::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

struct Setup {
    engine: Engine,
    store: Arc<dyn Store>,
    facts: FactStore,
    blocks: opc_memory::blocks::BlockStore,
    events: broadcast::Receiver<Event>,
}

/// An engine over `dir/opc.db` answered by `llm`; with `facts`, memory keeps facts (and the
/// worker runs).
async fn engine(
    dir: &Path,
    loaded: &opc_hierarchy::Loaded,
    llm: Arc<Scripted>,
    with_facts: bool,
) -> Setup {
    let db = dir.join("opc.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
    let facts = FactStore::open(&db, opc_memory::embed::EmbedSlot::new()).unwrap();
    let mut memory = BlockMemory::open(&db, &loaded.config, Arc::new(loaded.org.clone())).unwrap();
    if with_facts {
        memory = memory.with_facts(facts.clone(), &loaded.config, 300);
    }
    let blocks = memory.blocks().unwrap();
    let memory: Arc<dyn MemoryHooks> = Arc::new(memory);
    let service: crate::llm::SharedLlm = llm;
    let providers = Providers::from_services([("p".to_string(), service)]);
    let seam = crate::engine::privacy_seam(&loaded.config, Default::default()).unwrap();
    let engine = Engine::new(
        Arc::new(loaded.config.clone()),
        Arc::new(loaded.org.clone()),
        &loaded.base_dir,
        crate::llm::stack::CallStack::with_privacy(providers, seam),
        store.clone(),
        memory,
        EngineOptions::default(),
    )
    .await
    .unwrap();
    let events = engine.events().subscribe();
    Setup {
        engine,
        store,
        facts,
        blocks,
        events,
    }
}

/// The next event `pick` accepts, within the deadline.
async fn next<T>(
    events: &mut broadcast::Receiver<Event>,
    mut pick: impl FnMut(&Event) -> Option<T>,
) -> T {
    tokio::time::timeout(DEADLINE, async {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let Some(found) = pick(&event) {
                        return found;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("the event bus closed: {e}"),
            }
        }
    })
    .await
    .expect("the event did not come before the deadline")
}

/// The memory jobs once `done` accepts them (a job's end is recorded just after its event),
/// within the deadline.
async fn jobs_when(
    store: &Arc<dyn Store>,
    done: impl Fn(&[crate::store::MemoryJob]) -> bool,
) -> Vec<crate::store::MemoryJob> {
    tokio::time::timeout(DEADLINE, async {
        loop {
            let jobs = store.memory_jobs(50).await.unwrap();
            if done(&jobs) {
                return jobs;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the memory jobs did not reach the expected state before the deadline")
}

/// The ids listed in a memory call's user message (one JSON object per line).
fn listed(request: &LlmRequest) -> Vec<i64> {
    request.messages[0]
        .text()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|v| v.get("id").and_then(Value::as_i64))
        .collect()
}

fn current(facts: &FactStore) -> Vec<FactVersion> {
    facts.list(&agent_namespace("ceo"), View::Current).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_root_is_extracted_updated_and_its_fact_selected_for_the_next_task() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = config(dir.path(), "enabled: false");
    let llm = Arc::new(Scripted::default());
    llm.extract(|_| {
        json!({"facts": [{"op": "ADD", "text": "The launch is on May 3rd", "subject": "launch",
                          "valid_from": "2026-05-03"}]})
    });
    llm.extract(|r| {
        json!({"facts": [{"op": "UPDATE", "target": listed(r)[0], "text": "The launch is on May 17th",
                          "subject": "launch", "valid_from": "2026-05-17", "reason": "moved"}]})
    });
    let Setup {
        engine,
        store,
        facts,
        mut events,
        ..
    } = engine(dir.path(), &loaded, llm.clone(), true).await;

    let first = engine.send(None, "The launch is on May 3rd").await.unwrap();
    let first_conversation = first.conversation.clone();
    let outcome = first.wait().await;
    assert_eq!(outcome.state, TaskState::Completed);
    let recorded = next(&mut events, |e| match e {
        Event::FactsRecorded { task, added, .. } => Some((*task, *added)),
        _ => None,
    })
    .await;
    assert_eq!(recorded, (Some(outcome.task), 1));
    let now = current(&facts);
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].text, "The launch is on May 3rd");
    assert_eq!(now[0].source, Source::Agent);
    assert_eq!(now[0].task, Some(outcome.task));
    assert_eq!(
        now[0].conversation.as_deref(),
        Some(first_conversation.as_str())
    );
    assert_eq!(now[0].model.as_deref(), Some("p/fast"));

    // The extraction call: the contract, the fast model, marked memory work, no agent slot needed.
    let extraction = llm.of_kind("OPC memory: extract").remove(0);
    assert_eq!(extraction.model, "fast");
    assert_eq!(extraction.meta.work, Work::Memory);
    assert_eq!(
        extraction
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["record_facts"]
    );
    assert_eq!(
        extraction.tool_choice,
        Some(ToolChoice::Tool("record_facts".into()))
    );
    assert!(
        extraction.messages[0]
            .text()
            .contains("The launch is on May 3rd"),
        "the exchange is in the request"
    );
    // In the ledger as memory work, with its id in the fact's provenance, not in the task's totals.
    let memory_calls = store.memory_calls(outcome.task).await.unwrap();
    assert_eq!(memory_calls.len(), 1);
    assert_eq!(now[0].ledger_id, Some(memory_calls[0].0));
    assert_eq!(memory_calls[0].1.tool_calls, ["record_facts"]);
    let task = store.task(outcome.task).await.unwrap();
    assert_eq!((task.llm_calls, task.tokens_in), (1, 100));
    assert_eq!(store.calls(outcome.task).await.unwrap().len(), 1);
    assert_eq!(
        outcome.tokens_in, 100,
        "the answer's totals hold its own call only"
    );

    // Another conversation moves the launch: the fact gets a new version, the old one is closed.
    let second = engine
        .send(None, "The launch moved to May 17th")
        .await
        .unwrap()
        .wait()
        .await;
    let updated = next(&mut events, |e| match e {
        Event::FactsRecorded { task, updated, .. } => Some((*task, *updated)),
        _ => None,
    })
    .await;
    assert_eq!(updated, (Some(second.task), 1));
    let now = current(&facts);
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].text, "The launch is on May 17th");
    let history = facts.history(now[0].fact_id).unwrap();
    assert_eq!(history.len(), 2);
    assert!(
        history[0].invalidated_at.is_some(),
        "the old version is closed"
    );

    // A third conversation's request carries the current fact, marked as a fact with its date.
    engine
        .send(None, "When is the launch?")
        .await
        .unwrap()
        .wait()
        .await;
    let asked = llm
        .requests()
        .into_iter()
        .rfind(|r| r.meta.work == Work::Task)
        .unwrap();
    let text = asked.messages.last().unwrap().text();
    assert!(
        text.contains("[fact, valid from 2026-05-17] The launch is on May 17th"),
        "{text}"
    );
    assert!(!text.contains("May 3rd"), "only the current fact: {text}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_answer_changes_nothing_and_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = config(dir.path(), "enabled: false");
    let llm = Arc::new(Scripted::default());
    llm.extract(|_| json!({"facts": [{"op": "UPDATE", "target": 999, "text": "x"}]}));
    llm.extract(|_| json!({"facts": "not a list"}));
    let Setup {
        engine,
        store,
        facts,
        mut events,
        ..
    } = engine(dir.path(), &loaded, llm.clone(), true).await;
    for text in ["one", "two"] {
        engine.send(None, text).await.unwrap().wait().await;
        let reason = next(&mut events, |e| match e {
            Event::FactsRejected { reason, .. } => Some(reason.clone()),
            Event::FactsRecorded { .. } => panic!("garbage was recorded"),
            _ => None,
        })
        .await;
        assert!(!reason.is_empty());
    }
    assert!(
        facts
            .list(&agent_namespace("ceo"), View::History)
            .unwrap()
            .is_empty()
    );
    let jobs = jobs_when(&store, |jobs| jobs.iter().all(|j| j.state != "queued")).await;
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.state == "rejected"), "{jobs:?}");
    assert!(
        jobs.iter()
            .any(|j| j.error.as_deref().unwrap_or("").contains("999")),
        "the reason names the unlisted id: {jobs:?}"
    );
    assert_eq!(llm.of_kind("OPC memory: extract").len(), 2, "no retry");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_daily_cap_memory_work_waits_for_the_next_day() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = config(dir.path(), "enabled: false, maxTokensPerDay: 100");
    let llm = Arc::new(Scripted::default());
    let Setup {
        engine,
        store,
        mut events,
        ..
    } = engine(dir.path(), &loaded, llm.clone(), true).await;
    // The first extraction runs (nothing used yet) and uses 120 tokens.
    engine.send(None, "one").await.unwrap().wait().await;
    let first = next(&mut events, |e| match e {
        Event::FactsRecorded { task, .. } => Some(*task),
        _ => None,
    })
    .await;
    assert!(first.is_some());
    // The second waits for tomorrow.
    let second = engine.send(None, "two").await.unwrap().wait().await;
    let capped = next(&mut events, |e| match e {
        Event::MemoryWorkCapped { agent, used, cap } => Some((agent.clone(), *used, *cap)),
        _ => None,
    })
    .await;
    assert_eq!(capped, ("ceo".to_string(), 120, 100));
    let job = jobs_when(&store, |jobs| {
        jobs.iter()
            .any(|j| j.task == Some(second.task) && j.error.is_some())
    })
    .await
    .into_iter()
    .find(|j| j.task == Some(second.task))
    .unwrap();
    assert_eq!(job.state, "queued");
    assert_eq!(job.attempts, 0, "a cap is not a failure");
    let tomorrow = crate::store::now_ms().div_euclid(86_400_000) * 86_400_000 + 86_400_000;
    assert_eq!(job.not_before, tomorrow);
    assert_eq!(llm.of_kind("OPC memory: extract").len(), 1);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_a_stopped_process_left_run_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = config(dir.path(), "enabled: false");
    // First process: the extraction call hangs; shutdown stops it after the grace.
    let hold = Arc::new(Semaphore::new(0));
    let slow = Arc::new(Scripted {
        hold_extract: Some(hold.clone()),
        ..Scripted::default()
    });
    let task = {
        let Setup { engine, store, .. } = engine(dir.path(), &loaded, slow.clone(), true).await;
        let outcome = engine.send(None, "The launch is on May 3rd").await.unwrap();
        let outcome = outcome.wait().await;
        assert_eq!(
            outcome.state,
            TaskState::Completed,
            "the answer did not wait"
        );
        // The extraction call is in flight (and holds no agent slot: nothing waits for it).
        tokio::time::timeout(DEADLINE, async {
            while slow.of_kind("OPC memory: extract").is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap();
        engine.shutdown().await;
        let jobs = store.memory_jobs(10).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].state, "queued", "an interrupted job stays queued");
        assert!(store.memory_calls(outcome.task).await.unwrap().is_empty());
        outcome.task
    };
    // Second process: the queued job runs first thing.
    let llm = Arc::new(Scripted::default());
    llm.extract(|_| json!({"facts": [{"op": "ADD", "text": "The launch is on May 3rd"}]}));
    let Setup {
        engine,
        store,
        facts,
        mut events,
        ..
    } = engine(dir.path(), &loaded, llm.clone(), true).await;
    let recorded = next(&mut events, |e| match e {
        Event::FactsRecorded { task, added, .. } => Some((*task, *added)),
        _ => None,
    })
    .await;
    assert_eq!(recorded, (Some(task), 1));
    assert_eq!(current(&facts).len(), 1);
    let jobs = jobs_when(&store, |jobs| jobs[0].state != "queued").await;
    assert_eq!(jobs[0].state, "done");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_work_holds_no_agent_slot() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = {
        let l = config(dir.path(), "enabled: false");
        let mut config = l.config.clone();
        config.framework.execution.max_concurrent_agents = std::num::NonZeroU32::new(1).unwrap();
        opc_hierarchy::Loaded { config, ..l }
    };
    let hold = Arc::new(Semaphore::new(0));
    let llm = Arc::new(Scripted {
        hold_extract: Some(hold.clone()),
        ..Scripted::default()
    });
    let Setup { engine, .. } = engine(dir.path(), &loaded, llm.clone(), true).await;
    engine.send(None, "one").await.unwrap().wait().await;
    tokio::time::timeout(DEADLINE, async {
        while llm.of_kind("OPC memory: extract").is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    // The extraction call hangs; with one agent slot, another conversation is still answered.
    let second = tokio::time::timeout(DEADLINE, async {
        engine.send(None, "two").await.unwrap().wait().await
    })
    .await
    .expect("a conversation waited on memory work");
    assert_eq!(second.state, TaskState::Completed);
    hold.add_permits(10);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidation_merges_duplicates_and_edits_blocks_as_consolidation() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = config(dir.path(), "enabled: true, frequency: 2");
    let llm = Arc::new(Scripted::default());
    llm.extract(|_| json!({"facts": [{"op": "ADD", "text": "The launch is on May 17th"}]}));
    llm.extract(|_| json!({"facts": [{"op": "ADD", "text": "Launch date: 17 May"}]}));
    llm.consolidate(|r| {
        let ids = listed(r);
        assert_eq!(ids.len(), 2, "both facts are listed");
        let (keep, drop) = (ids.iter().min().unwrap(), ids.iter().max().unwrap());
        vec![
            Content::ToolUse {
                id: "c1".into(),
                name: "record_facts".into(),
                input: json!({"facts": [{"op": "INVALIDATE", "target": drop,
                                         "reason": format!("duplicate of {keep}")}]}),
            },
            Content::ToolUse {
                id: "c2".into(),
                name: "memory_insert".into(),
                input: json!({"label": "notes", "text": "Launch: May 17th"}),
            },
        ]
    });
    let Setup {
        engine,
        store,
        facts,
        blocks,
        mut events,
        ..
    } = engine(dir.path(), &loaded, llm.clone(), true).await;
    for text in ["The launch is on May 17th", "Launch date is 17 May"] {
        engine.send(None, text).await.unwrap().wait().await;
        next(&mut events, |e| match e {
            Event::FactsRecorded { .. } => Some(()),
            _ => None,
        })
        .await;
    }
    let consolidated = next(&mut events, |e| match e {
        Event::Consolidated {
            invalidated,
            block_edits,
            refused,
            turns,
            ..
        } => Some((*invalidated, *block_edits, *refused, *turns)),
        _ => None,
    })
    .await;
    assert_eq!(consolidated, (1, 1, 0, 2));
    let now = current(&facts);
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].text, "The launch is on May 17th");
    let all = facts.list(&agent_namespace("ceo"), View::History).unwrap();
    let closed = all.iter().find(|v| v.invalidated_at.is_some()).unwrap();
    assert_eq!(
        closed.reason.as_deref(),
        Some(format!("duplicate of {}", now[0].id).as_str())
    );
    // The closing is the consolidation's: its provenance says so.
    let closed_source: String = rusqlite::Connection::open(dir.path().join("opc.db"))
        .unwrap()
        .query_row(
            "SELECT closed_source FROM memory_fact_versions WHERE id = ?1",
            [closed.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(closed_source, "consolidation");
    // The block edit is a versioned edit whose author is `consolidation`.
    let history = blocks.history("notes", None).unwrap();
    let last = history.last().unwrap();
    assert_eq!(last.author, "consolidation");
    assert!(last.new_value.contains("Launch: May 17th"));
    // The consolidation's calls are memory work too.
    let consolidation = llm.of_kind("OPC memory: consolidate");
    assert_eq!(consolidation.len(), 2);
    assert!(consolidation.iter().all(|r| r.meta.work == Work::Memory));
    assert_eq!(
        consolidation[0]
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        [
            "record_facts",
            "memory_write",
            "memory_replace",
            "memory_insert"
        ]
    );
    let job = jobs_when(&store, |jobs| {
        jobs.iter()
            .any(|j| j.kind == crate::store::JobKind::Consolidate && j.state != "queued")
    })
    .await
    .into_iter()
    .find(|j| j.kind == crate::store::JobKind::Consolidate)
    .unwrap();
    assert_eq!(job.state, "done");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_are_extracted_from_masked_text_and_stored_restored() {
    const EMAIL: &str = "carol.jones@example.org";
    let dir = tempfile::tempdir().unwrap();
    let loaded = config_with(dir.path(), "enabled: false", "{ requireNer: false }");
    let llm = Arc::new(Scripted::default());
    llm.extract(|r| {
        let text = r.messages[0].text();
        assert!(!text.contains(EMAIL), "the model sees masked text: {text}");
        // The model copies the address as it saw it (the substitute).
        let seen = text
            .split_whitespace()
            .find(|w| w.contains('@'))
            .unwrap()
            .trim_end_matches(|c: char| !c.is_alphanumeric())
            .to_string();
        json!({"facts": [{"op": "ADD", "text": format!("Carol's address is {seen}")}]})
    });
    let Setup {
        engine,
        facts,
        mut events,
        ..
    } = engine(dir.path(), &loaded, llm.clone(), true).await;
    engine
        .send(None, &format!("Carol's address is {EMAIL}"))
        .await
        .unwrap()
        .wait()
        .await;
    next(&mut events, |e| match e {
        Event::FactsRecorded { added, .. } => Some(*added),
        _ => None,
    })
    .await;
    let now = current(&facts);
    assert_eq!(
        now[0].text,
        format!("Carol's address is {EMAIL}"),
        "stored restored"
    );
    let extraction = llm.of_kind("OPC memory: extract").remove(0);
    assert!(!extraction.messages[0].text().contains(EMAIL));
    engine.shutdown().await;
}
