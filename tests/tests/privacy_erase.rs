//! `opc privacy erase` end to end, on the real binaries: a web conversation through `opc run` (scripted
//! LLM, recall on) mentions an e-mail address; the address is then in the tasks, the session history,
//! the recall rows and their index, the web transcript and its progress events.
//!
//! - Beside the running `opc run`: a dry run works and counts; the erase itself refuses with "stop opc
//!   run first" and changes nothing.
//! - After `opc run` stopped: a dry run reports non-zero counts and leaves every file byte for byte as
//!   it was; the erase then leaves no copy of the address (in any case) in the raw bytes of the
//!   database, its WAL and shared-memory files, or any file of the index directory; `opc memory search`
//!   finds nothing; the audit line does not hold it; and a restarted `opc run` replays the
//!   conversation with `[erased]` in its place.
//! - Every table of a database made by `opc run` (engine, memory, gateway, web chat), filled with the
//!   value in each text column, is left without it: a table the erasure missed fails here.
//! - Empty and very short values are refused.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use opc_memory::embed::EmbedSlot;
use opc_memory::recall::RecallStore;
use opc_tests::opc_process::{OpcRun, opc_binary};
use opc_tests::org::{KEY, KEY_VAR, marker, write_recall_org};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::sse::Sse;
use opc_tests::wait::{OutputWithin, WAIT, wait_until};
use opc_tests::web_chat::{open as new_conversation, say};

/// The address as the person typed it, and as the CEO wrote it back (another case).
const EMAIL: &str = "alice.smith@mailhost.test";
const EMAIL_SHOUTED: &str = "Alice.Smith@MAILHOST.test";
const ENV: [(&str, &str); 2] = [(KEY_VAR, KEY), ("OPC_MODELS_OFFLINE", "1")];

/// `opc ARGS…` with the test's environment.
fn opc(args: &[&str]) -> Output {
    Command::new(opc_binary())
        .args(args)
        .env("OPC_MODELS_OFFLINE", "1")
        .output_within(WAIT)
        .unwrap()
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// `opc privacy --config CONFIG erase VALUE [--dry-run]`.
fn erase(config: &Path, value: &str, dry_run: bool) -> Output {
    let config = config.to_str().unwrap();
    let mut args = vec!["privacy", "--config", config, "erase", value];
    if dry_run {
        args.push("--dry-run");
    }
    opc(&args)
}

/// `opc memory search QUERY --agent ceo --mode MODE`: its stdout.
fn search(config: &Path, query: &str, mode: &str) -> String {
    let out = opc(&[
        "memory",
        "--config",
        config.to_str().unwrap(),
        "search",
        query,
        "--agent",
        "ceo",
        "--mode",
        mode,
    ]);
    assert!(
        out.status.success(),
        "opc memory search: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Every file OPC keeps for the database `db`: the file, its WAL and shared memory, the lock, and every
/// file of the index directory.
fn files(db: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        if p.exists() {
            out.push(p);
        }
    }
    let mut index = db.as_os_str().to_owned();
    index.push(".index");
    for entry in std::fs::read_dir(PathBuf::from(index)).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Each file's bytes, to compare before and after: all but the shared-memory file (SQLite's index of
/// the WAL, which any reader creates), with an empty WAL counted as none (a reader creates it too).
fn snapshot(db: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files(db)
        .into_iter()
        .filter(|p| !p.to_string_lossy().ends_with("-shm"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .filter(|(p, bytes)| !(p.to_string_lossy().ends_with("-wal") && bytes.is_empty()))
        .collect()
}

/// The files whose raw bytes hold `needle`, compared without case (ASCII).
fn holders(db: &Path, needle: &str) -> Vec<PathBuf> {
    let needle = needle.to_ascii_lowercase().into_bytes();
    files(db)
        .into_iter()
        .filter(|p| {
            let bytes = std::fs::read(p).unwrap().to_ascii_lowercase();
            bytes.windows(needle.len()).any(|w| w == needle.as_slice())
        })
        .collect()
}

/// Whether the recall index has caught up with every stored row.
fn indexed(db: &Path) -> bool {
    let Ok(store) = RecallStore::open(db, EmbedSlot::new()) else {
        return false;
    };
    store
        .cursors()
        .is_ok_and(|(bm25, _, last)| last > 0 && bm25 >= last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_address_leaves_no_copy_in_the_database_its_log_or_the_index() {
    let script = Script::new().agent(
        marker("ceo"),
        vec![Step::text(format!(
            "Noted: I will write to {EMAIL_SHOUTED} about the invoice."
        ))],
    );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_recall_org(dir.path(), &llm.url());
    let db = dir.path().join(".opc/opc.db");

    let run = OpcRun::start(&config, &ENV);
    let (conversation, mut sse) = new_conversation(&run).await;
    say(
        &run,
        &conversation,
        &format!("Please send the invoice to {EMAIL} today"),
    )
    .await;
    sse.wait_for("message|edit", WAIT, |d| {
        d["text"]
            .as_str()
            .is_some_and(|t| t.contains(EMAIL_SHOUTED))
    })
    .await;
    drop(sse);
    wait_until(WAIT, "the recall index to catch up", || indexed(&db)).await;
    let found = search(&config, EMAIL, "bm25");
    assert!(
        found.to_lowercase().contains(EMAIL),
        "recall finds it: {found}"
    );

    // Beside the running `opc run`: a dry run counts, the erase refuses and changes nothing.
    let dry = erase(&config, EMAIL, true);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(text(&dry.stdout).contains("dry run: nothing was changed"));
    let refused = erase(&config, EMAIL, false);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    let why = text(&refused.stderr);
    assert!(why.contains("stop opc run first"), "{why}");
    assert!(why.contains("Nothing was changed"), "{why}");
    assert!(
        search(&config, EMAIL, "bm25")
            .to_lowercase()
            .contains(EMAIL),
        "still there after the refusal"
    );

    let (code, _) = run.stop();
    assert_eq!(code, Some(0));
    assert!(
        !holders(&db, EMAIL).is_empty(),
        "the address is in the stored bytes before the erase"
    );

    // A dry run: non-zero counts per table, and every file byte for byte as it was.
    let before = snapshot(&db);
    let dry = erase(&config, EMAIL, true);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    let report = text(&dry.stdout);
    assert!(!report.contains("would replace 0 "), "{report}");
    for table in ["tasks", "recall_messages", "web_messages", "web_progress"] {
        assert!(
            report.contains(&format!("  {table} ")),
            "{table} counted: {report}"
        );
    }
    assert!(report.contains("dry run: nothing was changed"), "{report}");
    let after = snapshot(&db);
    assert_eq!(
        before.iter().map(|f| &f.0).collect::<Vec<_>>(),
        after.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for ((path, a), (_, b)) in before.iter().zip(&after) {
        assert!(a == b, "the dry run changed {}", path.display());
    }

    // The erase.
    let done = erase(&config, EMAIL, false);
    let report = text(&done.stdout);
    assert!(done.status.success(), "{}\n{report}", text(&done.stderr));
    assert!(report.contains("replaced "), "{report}");
    assert!(report.contains("re-indexed"), "{report}");
    assert!(report.contains("recorded as erasure #"), "{report}");

    // No copy in any case, in any file.
    for needle in [EMAIL, "alice.smith", "smith@mailhost"] {
        assert_eq!(holders(&db, needle), Vec::<PathBuf>::new(), "{needle}");
    }
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    assert!(
        !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
        "the WAL is emptied"
    );
    assert!(
        search(&config, EMAIL, "bm25").contains("no matches"),
        "recall finds nothing by the address"
    );
    assert!(search(&config, "alice", "bm25").contains("no matches"));
    let hybrid = search(&config, EMAIL, "hybrid");
    assert!(!hybrid.to_lowercase().contains("alice"), "{hybrid}");
    // The rows are still there, rewritten.
    let rewritten = search(&config, "invoice", "bm25");
    assert!(rewritten.contains("[erased]"), "{rewritten}");

    // The audit line: counts and length, never the value.
    let audit = std::fs::read_to_string(dir.path().join(".opc/audit.jsonl")).unwrap();
    assert!(audit.contains("\"event\":\"privacy.erase\""), "{audit}");
    assert!(audit.contains("\"value_chars\":25"), "{audit}");
    assert!(!audit.to_lowercase().contains("alice"), "{audit}");

    // A second erase finds nothing; the org starts again on the rewritten database, and the web
    // chat replays the conversation with the address erased.
    let again = erase(&config, EMAIL, true);
    assert!(
        text(&again.stdout).contains("would replace 0 "),
        "{}",
        text(&again.stdout)
    );
    let run = OpcRun::start(&config, &ENV);
    let mut sse = Sse::connect(
        &run.url(&format!("/api/conversations/{conversation}/events")),
        None,
    )
    .await;
    sse.wait_for("message|edit", WAIT, |d| {
        d["text"]
            .as_str()
            .is_some_and(|t| t == "Please send the invoice to [erased] today")
    })
    .await;
    drop(sse);
    let (code, _) = run.stop();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_opc_creates_is_covered() {
    let script = Script::new().agent(marker("ceo"), vec![Step::text("Noted.")]);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_recall_org(dir.path(), &llm.url());
    let db = dir.path().join(".opc/opc.db");
    // `opc run` creates every table it keeps (engine, memory, gateway, web chat).
    let (code, _) = OpcRun::start(&config, &ENV).stop();
    assert_eq!(code, Some(0));

    // One row in every table, the value (inside a JSON document, as most columns hold) in each of
    // its text columns.
    let value = "Bob.Jones@mailhost.test";
    let conn = rusqlite::Connection::open(&db).unwrap();
    // One row per table, each on its own: its references point nowhere.
    conn.pragma_update(None, "foreign_keys", "OFF").unwrap();
    let tables: Vec<String> = conn
        // FTS5 indexes' shadow tables are their index (rebuilt by the erasure), never a place for
        // a row of data: filled by hand, they would be a corrupt index.
        .prepare(
            "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type IN ('table', 'virtual') \
             AND name NOT LIKE 'sqlite%'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for name in [
        "tasks",
        "recall_messages",
        "gateway_threads",
        "web_messages",
        "web_progress",
    ] {
        assert!(tables.iter().any(|t| t == name), "{name} in {tables:?}");
    }
    let mut text_columns = 0;
    for table in &tables {
        let cols: Vec<(String, String)> = conn
            .prepare("SELECT name, type FROM pragma_table_xinfo(?1) WHERE hidden = 0")
            .unwrap()
            .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let is_text = |ty: &str| {
            let ty = ty.to_uppercase();
            !ty.contains("INT") && !ty.contains("REAL") && !ty.contains("BLOB")
        };
        if !cols.iter().any(|(_, ty)| is_text(ty)) {
            continue;
        }
        let values: Vec<rusqlite::types::Value> = cols
            .iter()
            .map(|(name, ty)| {
                let ty = ty.to_uppercase();
                if table == "memory_fact_versions" && name == "source" {
                    // A CHECKed enumeration (OPC's structure, never personal data).
                    rusqlite::types::Value::Text("agent".into())
                } else if ty.contains("INT") {
                    rusqlite::types::Value::Integer(7)
                } else if ty.contains("REAL") {
                    rusqlite::types::Value::Real(1.0)
                } else if ty.contains("BLOB") {
                    rusqlite::types::Value::Blob(vec![0])
                } else {
                    text_columns += 1;
                    rusqlite::types::Value::Text(format!("{{\"note\":\"write to {value}\"}}"))
                }
            })
            .collect();
        let names: Vec<String> = cols.iter().map(|c| format!("\"{}\"", c.0)).collect();
        let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
        conn.execute(
            &format!(
                "INSERT INTO \"{table}\" ({}) VALUES ({})",
                names.join(", "),
                marks.join(", ")
            ),
            rusqlite::params_from_iter(values),
        )
        .unwrap_or_else(|e| panic!("{table}: {e}"));
    }
    drop(conn);
    assert!(text_columns > 20, "{text_columns}");

    let done = erase(
        &dir.path().join("opc.config.yaml"),
        &value.to_uppercase(),
        false,
    );
    assert!(done.status.success(), "{}", text(&done.stderr));
    // No text column of any table holds it any more, nor does any file.
    let conn = rusqlite::Connection::open(&db).unwrap();
    for table in &tables {
        let cols: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_xinfo(?1) WHERE hidden = 0")
            .unwrap()
            .query_map([table], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for col in cols {
            let n: i64 = conn
                .query_row(
                    &format!(
                        "SELECT count(*) FROM \"{table}\" WHERE instr(lower(\"{col}\"), lower(?1)) > 0"
                    ),
                    [value],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(n, 0, "{table}.{col} still holds the value");
        }
    }
    drop(conn);
    assert_eq!(holders(&db, value), Vec::<PathBuf>::new());
}

#[test]
fn empty_and_very_short_values_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("opc.config.yaml");
    for (value, says) in [
        ("", "empty"),
        ("  ", "empty"),
        ("a", "at least 4"),
        ("ab", "at least 4"),
    ] {
        let out = erase(&config, value, false);
        assert_eq!(out.status.code(), Some(1), "{value:?}");
        let why = text(&out.stderr);
        assert!(why.contains(says), "{value:?}: {why}");
    }
    let out = erase(&config, "assistant", true);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("structure"));
}

/// A value the config or a prompt file holds would be seeded again at the next start (core blocks are
/// re-applied when the config's value differs from the stored one), and a model name is a record of
/// the ledger, not personal data: each is refused before anything is opened.
#[test]
fn values_written_in_the_config_its_prompt_files_or_naming_a_model_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_recall_org(dir.path(), "http://127.0.0.1:9");
    let yaml = std::fs::read_to_string(&config).unwrap().replace(
        "    tools: [conversation_search]\n",
        "    tools: [conversation_search]\n    prompt: file:ceo.md\n    memory:\n      blocks:\n        - { label: contacts, description: who to call, value: \"Escalate to carol@example.org\" }\n",
    );
    std::fs::write(&config, yaml).unwrap();
    std::fs::write(dir.path().join("ceo.md"), "Report to Dana Whitcombe.\n").unwrap();
    assert_eq!(
        opc(&["validate", "--config", config.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    for (value, file) in [
        ("carol@example.org", "opc.config.yaml"),
        ("dana whitcombe", "ceo.md"),
    ] {
        let out = erase(&config, value, false);
        assert_eq!(out.status.code(), Some(1), "{value}: {}", text(&out.stdout));
        let why = text(&out.stderr);
        assert!(
            why.contains("is written in") && why.contains(file),
            "{value}: {why}"
        );
        assert!(why.contains("Nothing was changed"), "{why}");
    }
    let out = erase(&config, "test-model", false);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("the model \"test-model\""),
        "{}",
        text(&out.stderr)
    );
    let db = dir.path().join(".opc");
    assert!(!db.exists(), "a refusal creates nothing");
}
