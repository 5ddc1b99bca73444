//! Tool output is code, not people (issue 33): the whole detector (patterns, the Rampart NER model and
//! the place gazetteer), with the example config's privacy options, over a corpus of realistic tool
//! inputs and outputs that holds no personal data: shell commands and their error lines, listings,
//! tracebacks and compiler errors, diffs, logs, SQL, configs, and source files in several languages
//! (`tool_output/{tune,heldout,blind}/`, one sample a file).
//!
//! - Not one name, place or address is read in it. Other types (an URL, an IP) may be found: those
//!   are masked everywhere by design, and none is in the corpus on purpose.
//! - Not one call is refused: every sample masks through a conversation's vault, the masked text
//!   restores to the original, and the egress guard finds no real value in it, raw or inside JSON.
//!
//! `tune/` was written to develop the code rules against and must read no name at all. `heldout/`
//! and `blind/` were each written blind by another hand (other tools and ecosystems; an agent's
//! session in a made-up monorepo), never tuned on: their figures are reported in `docs/privacy.md`
//! and held to a regression bound. The test prints all three.
//!
//! Needs the NER model: skips with one line on a developer machine without it (`opc models fetch`),
//! fails under CI or `OPC_REQUIRE_ALL=1` (`opc-testgate`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opc_privacy::detect::{DetectOptions, Detector, NerSlot, Rampart};
use opc_privacy::{Conversation, EntityType, Style};
use opc_testgate::Group;

/// The example config's `framework.privacy` detection options, through `test`'s gate (`None`:
/// skipped).
fn detector(test: &str) -> Option<Detector> {
    let model = opc_testgate::need(
        Group::Ner,
        test,
        Rampart::load_cached().map_err(|e| format!("NER model not available ({e})")),
    )?;
    let slot = NerSlot::default();
    slot.set(Arc::new(model));
    Some(Detector::new(
        DetectOptions {
            types: EntityType::ALL.to_vec(),
            whitelist: vec!["Anthropic".into(), "Claude".into(), "OPC".into()],
            threshold: 0.85,
        },
        slot,
    ))
}

fn samples(split: &str) -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tool_output")
        .join(split);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "{}: only {} samples",
        dir.display(),
        files.len()
    );
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// What one split gave: samples, readings of names, places and addresses (`file: TYPE "text"`),
/// other spans, and refused masks.
struct Outcome {
    samples: usize,
    readings: Vec<String>,
    others: Vec<String>,
    refused: Vec<String>,
}

fn run(detector: &Detector, split: &str) -> Outcome {
    let samples = samples(split);
    let mut out = Outcome {
        samples: samples.len(),
        readings: Vec::new(),
        others: Vec::new(),
        refused: Vec::new(),
    };
    // One conversation for the whole split, as one worker's session accumulates its tool output.
    let mut conversation = Conversation::new(33, Style::Fake, 10_000);
    for (path, text) in &samples {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let found = detector.detect(text);
        for e in &found {
            let line = format!("{name}: {} {:?}", e.kind, e.text(text));
            if matches!(
                e.kind,
                EntityType::PersonName | EntityType::Location | EntityType::Address
            ) {
                out.readings.push(line);
            } else {
                out.others.push(line);
            }
        }
        // The sample as a tool result, and as a Bash command's input.
        let detect = |t: &str| detector.detect(t);
        match conversation.mask_texts(&detect, &[text.as_str()]) {
            Ok(masked) => {
                let masked = &masked[0].text;
                let vault = conversation.vault();
                assert_eq!(vault.restore(masked), *text, "{name}: restore");
                let body = serde_json::json!({
                    "messages": [{"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": masked},
                    ]}, {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": masked}},
                    ]}]
                })
                .to_string();
                if let Some(kind) = vault.leak_in(&body) {
                    out.refused
                        .push(format!("{name}: the guard found a real {kind}"));
                }
            }
            Err(e) => out.refused.push(format!("{name}: {e}")),
        }
    }
    out
}

fn report(split: &str, o: &Outcome) {
    eprintln!(
        "tool output, {split}: {} samples, {} name/place/address readings, {} other spans, {} refused",
        o.samples,
        o.readings.len(),
        o.others.len(),
        o.refused.len()
    );
    for line in o.readings.iter().chain(&o.others).chain(&o.refused) {
        eprintln!("  {line}");
    }
}

#[test]
fn tool_output_holds_no_people_and_no_call_is_refused() {
    let Some(detector) = detector("tool_output_holds_no_people_and_no_call_is_refused") else {
        return;
    };
    let tune = run(&detector, "tune");
    let heldout = run(&detector, "heldout");
    let blind = run(&detector, "blind");
    report("tune", &tune);
    report("heldout", &heldout);
    report("blind", &blind);
    for (split, o) in [("tune", &tune), ("heldout", &heldout), ("blind", &blind)] {
        assert!(
            o.refused.is_empty(),
            "{split}: calls refused: {:?}",
            o.refused
        );
    }
    assert!(
        tune.readings.is_empty(),
        "tune: names, places or addresses read in tool output: {:?}",
        tune.readings
    );
    // The held-out splits are never tuned on, so they are not held to zero: their figures are
    // reported (docs/privacy.md). A reading in more than one sample in ten is a regression.
    for (split, o) in [("heldout", &heldout), ("blind", &blind)] {
        assert!(
            10 * o.readings.len() <= o.samples,
            "{split}: {} readings in {} samples: {:?}",
            o.readings.len(),
            o.samples,
            o.readings
        );
    }
}
