//! `opc privacy eval` on the real binary, pattern tier only (an empty model cache, `OPC_MODELS`, and
//! `OPC_MODELS_OFFLINE=1`), from a directory without a config (the defaults apply):
//!
//! - `--threshold` and `--sweep` change what is scored: a bare domain (a weak shape, scored between 0.5
//!   and 0.6) counts as a found URL at 0.3 and as a miss at 0.7 and at the default 0.85;
//! - `--format json` gives one object with every file's report and sweep; the text output has the
//!   Markdown tables and the micro F2;
//! - a labelled `LOCATION` (a type the pattern tier never reports) is scored as misses, not skipped and
//!   not fatal;
//! - bad arguments and bad lines are errors that say what is wrong and where, with exit codes 2 and 1.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::{Command, Output};

use opc_tests::opc_process::opc_binary;
use opc_tests::wait::{OutputWithin, WAIT_LONG};
use serde_json::Value;

const CASES: &str = r#"{"text":"mail ann@example.com today","entities":[{"type":"EMAIL","start":5,"end":20}]}
{"text":"see example.com for details","entities":[{"type":"URL","start":4,"end":15}]}
{"text":"she lives in Tromsø now","entities":[{"type":"LOCATION","start":13,"end":19}]}
{"text":"Order #48213 shipped on 2024-03-15 for $129.99","entities":[]}
"#;

fn opc(dir: &Path, args: &[&str]) -> Output {
    Command::new(opc_binary())
        .args(args)
        .current_dir(dir)
        .env("OPC_MODELS_OFFLINE", "1")
        .env("OPC_MODELS", dir.join("no-models"))
        .env_remove("OPC_CONFIG")
        .output_within(WAIT_LONG)
        .unwrap()
}

fn json_report(dir: &Path, args: &[&str]) -> Value {
    let out = opc(dir, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn threshold_sweep_and_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cases.jsonl"), CASES).unwrap();

    let v = json_report(
        dir.path(),
        &[
            "privacy",
            "eval",
            "cases.jsonl",
            "--threshold",
            "0.3",
            "--sweep",
            "0.3,0.7",
            "--format",
            "json",
        ],
    );
    assert_eq!(v["threshold"], 0.3);
    let file = &v["files"][0];
    assert_eq!(file["file"], "cases.jsonl");
    let report = &file["report"];
    assert_eq!(report["cases"], 4);
    assert_eq!(report["tokens"]["EMAIL"]["tp"], 1);
    assert_eq!(report["tokens"]["URL"]["tp"], 1, "{report}");
    assert_eq!(report["tokens"]["LOCATION"]["fn"], 1);
    assert_eq!(report["negatives"], 1);
    let sweep = file["sweep"].as_array().expect("a sweep");
    assert_eq!(sweep.len(), 2);
    assert_eq!(sweep[0]["threshold"], 0.3);
    assert_eq!(sweep[0]["report"]["tokens"]["URL"]["tp"], 1);
    assert_eq!(sweep[1]["threshold"], 0.7);
    assert_eq!(sweep[1]["report"]["tokens"]["URL"]["fn"], 1);
    assert_eq!(sweep[1]["report"]["tokens"]["EMAIL"]["tp"], 1);

    // The default threshold (0.85 without a config) drops the bare domain; no sweep was asked for.
    let v = json_report(
        dir.path(),
        &["privacy", "eval", "cases.jsonl", "--format", "json"],
    );
    assert_eq!(v["files"][0]["report"]["tokens"]["URL"]["fn"], 1);
    assert_eq!(v["files"][0]["report"]["negatives_with_false_positive"], 0);
    assert!(v["files"][0]["sweep"].is_null());

    // Text: the per-type table, the micro F2 and the sweep table, default sweep range.
    let out = opc(dir.path(), &["privacy", "eval", "cases.jsonl", "--sweep"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("| type | gold | tp | fp | fn | P | R | F1 | F2 |"),
        "{text}"
    );
    assert!(text.contains("| EMAIL | 1 | 1 | 0 | 0 |"), "{text}");
    assert!(text.contains("| LOCATION"), "{text}");
    assert!(text.contains("micro token F2"), "{text}");
    assert!(text.contains("| threshold | P | R | F2 |"), "{text}");
    assert!(
        text.contains("| 0.30 |") && text.contains("| 0.95 |"),
        "{text}"
    );
}

#[test]
fn bad_arguments_and_lines_say_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cases.jsonl"), CASES).unwrap();
    let out = opc(
        dir.path(),
        &["privacy", "eval", "cases.jsonl", "--threshold", "1.5"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threshold 1.5 is outside 0..1"));

    let out = opc(
        dir.path(),
        &["privacy", "eval", "cases.jsonl", "--sweep", "0.9:0.3:0.1"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sweep"));

    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"text\":\"abc\",\"entities\":[]}\n{\"text\":\"abc\",\"entities\":[{\"type\":\"EMAIL\",\"start\":1,\"end\":9}]}\n",
    )
    .unwrap();
    let out = opc(dir.path(), &["privacy", "eval", "bad.jsonl"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.jsonl:2") && err.contains("does not fit"),
        "{err}"
    );
}
