//! # Recall hygiene end to end (issue 39 §5), on the real `opc run`
//!
//! Role: the recall preamble is not new information. The Select step puts "Relevant memory: …"
//! (messages recalled from other conversations, facts) before a task in the request; what recall
//! stores and what the extraction call reads must be what the person wrote and what the agent
//! answered, never that block. Otherwise every turn stores and extracts old statements again, and
//! with a real model they come back in new words that exact-text dedup cannot catch.
//!
//! What is checked, over the web chat with the scripted LLM answering the CEO and its memory work
//! (recall and archival on): conversation 1 says a code word; conversation 2 asks two questions. Both
//! of conversation 2's requests carry the preamble with the recalled code word (so the test can fail),
//! and yet conversation 2's recall rows and its two extraction calls hold no "Relevant memory" and no
//! recalled line: only the questions and the answers.
//!
//! Invariants: every wait has a deadline ([`WAIT`]); order is asserted, never speed.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, KEY_VAR, marker, provider_yaml};
use opc_tests::scripted_llm::{MemoryKind, Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, output_of, wait_for};
use opc_tests::web_chat;
use serde_json::json;

const ANSWER: &str = "NOTED.";
const SAID: &str = "Remember this: the launch code word is PAPAYA-7731.";
const CODE: &str = "PAPAYA-7731";
const FIRST: &str = "What is the launch code word?";
const SECOND: &str = "And who chose the launch code word?";

struct Org {
    dir: tempfile::TempDir,
}

impl Org {
    fn write(llm: &ScriptedLlm) -> Org {
        let dir = tempfile::tempdir().unwrap();
        let providers = provider_yaml(&llm.url(), true);
        let yaml = format!(
            r#"
framework:
  name: Hygiene Org
{providers}
  privacy: {{ enabled: false }}
  memory:
    consolidation: {{ enabled: true, frequency: 10000, idleAfter: 1h }}
agents:
  ceo:
    role: CEO
    prompt: "You run the company."
    tools: [escalate]
    memory: {{ recall: true, archival: true }}
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#
        );
        std::fs::write(dir.path().join("opc.config.yaml"), yaml).unwrap();
        Org { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("opc.config.yaml")
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.dir.path().join(".opc/opc.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap()
    }

    /// The engine's conversation behind a web conversation (the gateway's thread map), once it has one.
    fn conversation_of(&self, web: &str) -> Option<String> {
        self.db()
            .query_row(
                "SELECT conversation FROM gateway_threads WHERE thread = ?1",
                [web],
                |r| r.get(0),
            )
            .ok()
    }

    /// Completed root tasks of `conversation`.
    fn completed_roots(&self, conversation: &str) -> i64 {
        self.db()
            .query_row(
                "SELECT COUNT(*) FROM tasks WHERE conversation_id = ?1 AND parent_id IS NULL \
                 AND state = 'COMPLETED'",
                [conversation],
                |r| r.get(0),
            )
            .unwrap_or(0)
    }

    /// The texts of `conversation`'s recall rows, in order.
    fn recall_rows(&self, conversation: &str) -> Vec<String> {
        let db = self.db();
        let mut stmt = db
            .prepare("SELECT text FROM recall_messages WHERE conversation = ?1 ORDER BY seq")
            .unwrap();
        stmt.query_map([conversation], |r| r.get(0))
            .unwrap()
            .collect::<Result<Vec<String>, _>>()
            .unwrap()
    }

    /// Whether `opc memory search` (BM25; the model may not have loaded) finds the code word as the
    /// CEO, beside the running gateway: the recall index has caught up with conversation 1.
    async fn recall_finds_the_code(&self) -> bool {
        let mut command = Command::new(opc_binary());
        command
            .args(["memory", "search", "launch code word", "--agent", "ceo"])
            .args(["--mode", "bm25", "--config"])
            .arg(self.config())
            .env("NO_COLOR", "1")
            .env("OPC_LOG", "warn")
            .env("OPC_MODELS_OFFLINE", "1");
        let out = output_of(command, WAIT).await;
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains(CODE)
    }
}

/// Wait (within [`WAIT`]) until `conversation` of `org` has `n` completed root tasks.
async fn completed(org: &Org, web: &str, n: i64) -> String {
    wait_for(WAIT, &format!("{n} answered messages in {web}"), || {
        org.conversation_of(web)
            .filter(|c| org.completed_roots(c) >= n)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recall_preamble_is_never_stored_nor_extracted_again() {
    let noop = || Step::record_facts(json!([{"op": "NOOP"}]));
    let script = Script::new()
        .agent(marker("ceo"), vec![Step::text(ANSWER)])
        .memory(MemoryKind::Extract, vec![noop(), noop(), noop()])
        .memory(MemoryKind::Consolidate, vec![]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let org = Org::write(&llm);
    let opc = OpcRun::start(&org.config(), &[(KEY_VAR, KEY)]);

    // Conversation 1 says the code word; recall indexes it.
    let (one, _sse) = web_chat::start(&opc, SAID).await;
    completed(&org, &one, 1).await;
    wait_for(WAIT, "the memory request of conversation 1", || {
        llm.memory_requests(MemoryKind::Extract).into_iter().next()
    })
    .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !org.recall_finds_the_code().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for recall to index conversation 1"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Conversation 2: two requests, one after the other.
    let (two, _sse) = web_chat::start(&opc, FIRST).await;
    let conversation = completed(&org, &two, 1).await;
    web_chat::say(&opc, &two, SECOND).await;
    completed(&org, &two, 2).await;

    // Both requests carried the recalled code word before the task: the block exists.
    let ceo = llm.requests_for(&marker("ceo"));
    for question in [FIRST, SECOND] {
        let asked = ceo
            .iter()
            .map(|r| r.user_texts().join("\n"))
            .find(|t| t.ends_with(question))
            .unwrap_or_else(|| panic!("a CEO request ending with {question:?}"));
        assert!(asked.contains("Relevant memory:"), "{asked}");
        assert!(asked.contains(CODE), "recalled: {asked}");
    }

    // Conversation 2's recall rows: the questions and the answers, nothing recalled.
    let rows = org.recall_rows(&conversation);
    assert_eq!(rows, [FIRST, ANSWER, SECOND, ANSWER], "{rows:#?}");

    // The extraction calls of conversation 2 read its exchanges only.
    let extracts = wait_for(WAIT, "the memory requests of conversation 2", || {
        let all = llm.memory_requests(MemoryKind::Extract);
        (all.len() >= 3).then_some(all)
    })
    .await;
    for question in [FIRST, SECOND] {
        let text = extracts
            .iter()
            .map(|r| r.user_texts().join("\n"))
            .find(|t| t.contains(question))
            .unwrap_or_else(|| panic!("an extraction of {question:?}"));
        assert!(!text.contains("Relevant memory"), "the preamble: {text}");
        assert!(!text.contains(CODE), "a recalled line: {text}");
    }
}
