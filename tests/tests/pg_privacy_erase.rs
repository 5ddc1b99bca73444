//! `opc privacy erase` on PostgreSQL (`framework.memory.storage: postgres`), on the real binary:
//! - an org's database (made by `opc run`) with an e-mail address in the engine's rows (a
//!   conversation id and its task, whose key is rewritten in parent and child alike), the web
//!   transcript, a gateway thread, a core block and its history, recall rows and a fact: after the
//!   erase no text column of any table holds it (in any case), `[erased]` is in its place, recall's
//!   content hashes match the new text and the rows stay append-only;
//! - a "running node" (a recall store with its own BM25 index and in-memory vectors, opened and
//!   caught up before the erase) no longer finds the rows by keyword or by meaning once it caught up
//!   again, and holds each rewritten row once; the facts' keyword search finds nothing;
//! - a dry run counts and changes nothing; the refusals (a value in a JSON document's structure,
//!   a structural word) change nothing.
//!
//! Without a PostgreSQL server these skip with one line (`opc-testgate`), and fail under CI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use opc_memory::embed::{EmbedError, EmbedSlot, Embedder};
use opc_memory::facts::{FactQuery, FactStore, Provenance, View};
use opc_memory::recall::{Mode, NewMessage, Query, RecallStore};
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{Extras, KEY, KEY_VAR, TestOrg, Wire};
use opc_tests::postgres::fresh_database;
use opc_tests::wait::{OutputWithin, WAIT};
use opc_tests::word_vectors::words;

const VALUE: &str = "zebulon.quartz@example.org";
const WEB: &str = "channels:\n  web: { listen: \"127.0.0.1:0\" }\n";
const ON_POSTGRES: &str = "  memory:\n    storage: postgres\n";
static NEVER: AtomicBool = AtomicBool::new(false);

/// A bag-of-words embedder: texts sharing words are near.
struct Words;

impl Embedder for Words {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| words(t)).collect())
    }
    fn model_id(&self) -> &'static str {
        "test-words"
    }
    fn dimensions(&self) -> usize {
        opc_memory::embed::DIM
    }
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// `opc privacy --config CONFIG erase VALUE [--dry-run]` with the database's URL.
fn erase(org: &TestOrg, url: &str, value: &str, dry_run: bool) -> Output {
    let config = org.config_path();
    let mut args = vec![
        "privacy",
        "--config",
        config.to_str().unwrap(),
        "erase",
        value,
    ];
    if dry_run {
        args.push("--dry-run");
    }
    Command::new(opc_binary())
        .args(&args)
        .env("DATABASE_URL", url)
        .env("OPC_MODELS_OFFLINE", "1")
        .output_within(WAIT)
        .unwrap()
}

async fn client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Every `table.column` (text columns of the schema) holding `needle`, in any case.
async fn holders(c: &tokio_postgres::Client, needle: &str) -> Vec<String> {
    let cols = c
        .query(
            "SELECT c.relname::text, a.attname::text FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid \
             JOIN pg_type t ON t.oid = a.atttypid WHERE c.relnamespace = current_schema()::regnamespace \
             AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped AND t.typcategory = 'S'",
            &[],
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    for r in cols {
        let (t, col): (String, String) = (r.get(0), r.get(1));
        let n: i64 = c
            .query_one(
                &format!("SELECT count(*) FROM \"{t}\" WHERE strpos(lower(\"{col}\"::text), lower($1)) > 0"),
                &[&needle],
            )
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            out.push(format!("{t}.{col}"));
        }
    }
    out.sort();
    out
}

/// Catch `store` up until its BM25 index and vectors hold every committed row (a transaction open
/// elsewhere on the server holds the horizon back for a moment).
fn settle(store: &RecallStore) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        store.catch_up(&NEVER).unwrap();
        let (bm25, vectors, last) = store.cursors().unwrap();
        if bm25 == last && vectors == last {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not caught up: {bm25} {vectors} {last}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The seqs `store` finds for `query` in `mode` (vector: the query's own embedding), best first.
fn found(store: &RecallStore, query: &str, mode: Mode) -> Vec<i64> {
    let mut q = Query::new(query, vec!["agent/ceo".into()], mode, 10);
    if mode == Mode::Vector {
        q.vector = Some(words(query));
    }
    store
        .search(&q)
        .unwrap()
        .into_iter()
        .map(|h| h.message.seq)
        .collect()
}

fn msg(text: &str, time_ms: i64) -> NewMessage {
    NewMessage {
        namespace: "agent/ceo".into(),
        author: "user".into(),
        conversation: "c1".into(),
        task: None,
        thread: None,
        source_id: None,
        time_ms,
        text: text.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_address_leaves_every_table_and_every_running_nodes_index() {
    let Some(url) = fresh_database("pg_privacy_erase").await else {
        return;
    };
    let org = TestOrg::with_extras(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Default::default(),
        &Extras {
            framework: ON_POSTGRES,
            sections: WEB,
            ..Extras::default()
        },
    );
    // `opc run` makes every table it keeps (engine, cluster, memory, gateway, web chat).
    let env = [
        (KEY_VAR, KEY),
        ("DATABASE_URL", url.as_str()),
        ("OPC_MODELS_OFFLINE", "1"),
    ];
    let (code, stderr) = OpcRun::start(&org.config_path(), &env).stop();
    assert_eq!(code, Some(0), "{stderr}");

    let c = client(&url).await;
    // The address as typed and as written back in another case, in the engine's rows (a
    // conversation id its task refers to), the transcript, a gateway thread, a block and its history.
    let shouted = VALUE.to_uppercase();
    let conversation = format!("web:{VALUE}");
    c.batch_execute(&format!(
        "INSERT INTO conversations (id, root_agent, created_at) VALUES ('{conversation}', 'ceo', 1);
         INSERT INTO tasks (root_id, conversation_id, agent, depth, state, input, messages, created_at, updated_at)
             VALUES (1, '{conversation}', 'ceo', 0, 'COMPLETED', 'Write to {shouted}',
                     '[{{\"role\":\"user\",\"content\":\"mail {VALUE} today\"}}]', 1, 1);
         INSERT INTO web_conversations (id, created_at) VALUES ('w1', 1);
         INSERT INTO web_messages (conversation, number, author, text) VALUES ('w1', 1, 'user', 'mail {VALUE}');
         INSERT INTO web_progress (conversation, seq, event) VALUES ('w1', 1, '{{\"text\":\"to {VALUE}\"}}');
         INSERT INTO gateway_threads (platform, workspace, thread, conversation, place, created_at)
             VALUES ('slack', 'T1', 'th1', '{conversation}', 'C1', 1);
         INSERT INTO memory_blocks (namespace, label, description, value, char_limit, read_only, version, config_value, updated_ms)
             VALUES ('agent/ceo', 'contacts', 'who', 'Zebulon: {VALUE}', 500, FALSE, 2, '', 1);
         INSERT INTO memory_block_history (namespace, label, version, operation, author, at_ms, old_value, new_value)
             VALUES ('agent/ceo', 'contacts', 2, 'append', 'ceo', 1, '', 'Zebulon: {VALUE}');"
    ))
    .await
    .unwrap();

    // A running node: its recall store (own BM25 index, in-memory vectors), caught up before the
    // erase; and the facts.
    let dir = tempfile::tempdir().unwrap();
    let slot = EmbedSlot::with(Arc::new(Words));
    let node = {
        let url = url.clone();
        let index = dir.path().join("node-a");
        let slot = slot.clone();
        tokio::task::spawn_blocking(move || {
            let conn = opc_pg::Blocking::connect(&url, "erase-test").unwrap();
            RecallStore::open_postgres(conn, &index, slot).unwrap()
        })
        .await
        .unwrap()
    };
    let facts = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let conn = opc_pg::Blocking::connect(&url, "erase-test-facts").unwrap();
            FactStore::open_postgres(conn, EmbedSlot::new()).unwrap()
        })
        .await
        .unwrap()
    };
    let written_back = shouted.clone();
    let (node, facts, seqs) = tokio::task::spawn_blocking(move || {
        let seqs = node
            .append_all(&[
                msg(&format!("Please email {VALUE} about the invoice"), 1),
                msg(&format!("{written_back} confirmed the meeting"), 2),
                msg("Ask example org support about the invoice", 3),
            ])
            .unwrap();
        settle(&node);
        let provenance = Provenance {
            agent: "ceo".into(),
            ..Provenance::default()
        };
        facts
            .insert(
                "agent/ceo",
                &format!("Zebulon writes from {VALUE}"),
                None,
                &provenance,
                1,
            )
            .unwrap();
        (node, facts, seqs)
    })
    .await
    .unwrap();
    let erased = [seqs[0], seqs[1]];
    let control = seqs[2];
    let query = "zebulon quartz example org";
    {
        let node = node.clone();
        tokio::task::spawn_blocking(move || {
            let bm25 = found(&node, "zebulon", Mode::Bm25);
            assert_eq!(bm25.len(), 2, "{bm25:?}");
            let vector = found(&node, query, Mode::Vector);
            assert!(erased.contains(&vector[0]), "{vector:?}");
        })
        .await
        .unwrap();
    }

    // A dry run counts and changes nothing.
    let before = holders(&c, VALUE).await;
    assert!(before.len() >= 10, "{before:?}");
    let dry = erase(&org, &url, VALUE, true);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    let out = text(&dry.stdout);
    assert!(
        out.contains("would replace") && out.contains("recall_messages"),
        "{out}"
    );
    assert!(out.contains("dry run: nothing was changed"), "{out}");
    assert_eq!(holders(&c, VALUE).await, before);

    // The erase.
    let done = erase(&org, &url, &shouted, false);
    let out = text(&done.stdout);
    assert!(done.status.success(), "{}\n{out}", text(&done.stderr));
    assert!(
        out.contains("replaced") && out.contains("recorded as erasure #"),
        "{out}"
    );
    assert!(!out.contains(&url), "the URL was printed: {out}");
    assert_eq!(holders(&c, VALUE).await, Vec::<String>::new(), "{out}");
    for (table, column) in [
        ("tasks", "messages"),
        ("tasks", "conversation_id"),
        ("conversations", "id"),
        ("gateway_threads", "conversation"),
        ("web_messages", "text"),
        ("web_progress", "event"),
        ("memory_blocks", "value"),
        ("memory_block_history", "new_value"),
        ("recall_messages", "text"),
        ("memory_fact_versions", "text"),
    ] {
        let n: i64 = c
            .query_one(
                &format!("SELECT count(*) FROM {table} WHERE strpos({column}, '[erased]') > 0"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert!(n > 0, "{table}.{column} has no [erased]");
    }
    // The task still points at its conversation (the key was rewritten in both), recall's hashes
    // match the new text, its guard is back, and its rewritten rows' vectors were dropped.
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM tasks t JOIN conversations c ON c.id = t.conversation_id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    let bad: i64 = c
        .query_one(
            "SELECT count(*) FROM recall_messages \
             WHERE content_hash <> encode(sha256(convert_to(text, 'UTF8')), 'hex')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(bad, 0);
    let err = c
        .execute("UPDATE recall_messages SET text = 'x'", &[])
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("append-only"), "{err:?}");
    let deferrable: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND condeferrable",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(deferrable, 0, "the foreign keys are as they were");

    // The running node catches up: the rows are read again, found neither by keyword nor by meaning,
    // each once; the facts' keyword search finds nothing.
    tokio::task::spawn_blocking(move || {
        settle(&node);
        assert_eq!(found(&node, "zebulon", Mode::Bm25), Vec::<i64>::new());
        assert_eq!(found(&node, "quartz", Mode::Bm25), Vec::<i64>::new());
        let vector = found(&node, query, Mode::Vector);
        assert_eq!(vector.first(), Some(&control), "{vector:?}");
        let erased_text = found(&node, "erased", Mode::Bm25);
        assert_eq!(
            erased_text.len(),
            2,
            "each rewritten row once: {erased_text:?}"
        );
        let vector = found(&node, "Please email erased about the invoice", Mode::Vector);
        assert_eq!(
            vector.first(),
            Some(&erased[0]),
            "re-embedded from its new text: {vector:?}"
        );
        assert_eq!(
            vector.iter().filter(|s| **s == erased[0]).count(),
            1,
            "one vector per row: {vector:?}"
        );
        let hits = facts
            .search(&FactQuery {
                text: "zebulon quartz".into(),
                namespaces: vec!["agent/ceo".into()],
                view: View::Current,
                limit: 10,
            })
            .unwrap();
        assert!(
            hits.iter()
                .all(|h| !h.version.text.to_lowercase().contains("quartz")),
            "{:?}",
            hits.iter().map(|h| &h.version.text).collect::<Vec<_>>()
        );
    })
    .await
    .unwrap();

    // Once erased, nothing is left: a second erase finds nothing.
    let again = erase(&org, &url, VALUE, false);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("replaced 0 occurrence(s)"),
        "{}",
        text(&again.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_change_nothing_on_postgres() {
    let Some(url) = fresh_database("pg_privacy_erase_refusals").await else {
        return;
    };
    let org = TestOrg::with_extras(
        "http://127.0.0.1:9",
        Wire::Anthropic,
        Default::default(),
        &Extras {
            framework: ON_POSTGRES,
            ..Extras::default()
        },
    );
    // The tables, by opening the store.
    drop(opc_agents::PgStore::connect(&url, 2).await.unwrap());
    let c = client(&url).await;
    c.batch_execute(
        "INSERT INTO conversations (id, root_agent, created_at) VALUES ('c1', 'ceo', 1);
         INSERT INTO memory_block_history (namespace, label, version, operation, author, at_ms, new_value)
             VALUES ('agent/ceo', 'notes', 1, 'append', 'ceo', 1, '{\"note\":\"Carol Jones called\"}');
         INSERT INTO tasks (root_id, conversation_id, agent, depth, state, input, created_at, updated_at, node)
             VALUES (1, 'c1', 'ceo', 0, 'EXECUTING', 'Call Carol Jones back', 1, 1, 'node-a');
         INSERT INTO cluster_nodes (id, instance, host, pid, started_ms, heartbeat_ms)
             VALUES ('zed.quill-7', 1, 'h', 7, 1, 1);",
    )
    .await
    .unwrap();
    // A value that is a key of a stored JSON document: refused, nothing changed.
    let out = erase(&org, &url, "note", false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("structure"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        holders(&c, "Carol Jones").await,
        ["memory_block_history.new_value", "tasks.input"]
    );
    // A value in a node's name: refused, nothing changed.
    let out = erase(&org, &url, "zed.quill", false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("node"), "{}", text(&out.stderr));
    assert_eq!(holders(&c, "zed.quill").await, ["cluster_nodes.id"]);
    // A structural word, an empty or short value: refused before connecting.
    for (value, says) in [
        ("assistant", "structure"),
        ("", "empty"),
        ("ab", "at least 4"),
    ] {
        let out = erase(&org, &url, value, false);
        assert_eq!(out.status.code(), Some(1), "{value:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{value:?}: {}",
            text(&out.stderr)
        );
    }
    // No URL: the variable is named, nothing is done.
    let out = Command::new(opc_binary())
        .args([
            "privacy",
            "--config",
            org.config_path().to_str().unwrap(),
            "erase",
            "Carol Jones",
        ])
        .env_remove("DATABASE_URL")
        .output_within(WAIT)
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("DATABASE_URL"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(holders(&c, "Carol Jones").await.len(), 2);
    // The value itself is erased; the task still running that held it is named with its node.
    let out = erase(&org, &url, "carol jones", false);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("had not ended (#") && said.contains("on node-a"),
        "{said}"
    );
    assert_eq!(holders(&c, "Carol Jones").await, Vec::<String>::new());
}
