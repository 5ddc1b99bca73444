//! Benchmark: the pattern tier of `Detector::detect` on one core, in MB/s and sentences/s, median of
//! several runs, on
//! - ordinary prose (the repository's README: technical English with numbers, colons and URLs, and
//!   lorem-style sentences without personal data);
//! - the shared Presidio recogniser texts (`../shared/data/pii`, or `$OPC_SHARED/data/pii`), if present;
//! - the synthetic PII corpus (`examples/pii_corpus.rs`, seed 7), dense with personal data.
//!
//! The detector here has an empty NER slot: the pattern tier alone, no model, as the gateway runs before
//! the NER loads (and as `privacy.requireNer: false` runs always).
//!
//! Run: `cargo bench -p opc-privacy --bench detect`. Target (issue 22, guarded here): the pattern tier
//! alone keeps ≥ 150 MB/s on ordinary prose, one document; the line says PASS or MISS.
//! `DETECT_BENCH_EACH=1` adds a line per recogniser (prose, that recogniser alone);
//! `DETECT_BENCH_ONLY=<key>` runs one line: `paragraphs`, `document`, `presidio`, `synthetic`, or a
//! recogniser's name. `DETECT_BENCH_RUNS=<n>` sets the timed passes (7). Instructions per byte of a
//! line (steadier than wall time on a shared machine): one timed pass under callgrind, counting only
//! inside `time`, divided by the bytes the line prints:
//! `DETECT_BENCH_ONLY=document DETECT_BENCH_RUNS=1 valgrind --tool=callgrind
//! --toggle-collect=detect::time target/release/deps/detect-… --bench`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use opc_privacy::detect::{DetectOptions, Detector, NerSlot};

#[allow(dead_code)]
#[path = "../examples/pii_corpus.rs"]
mod corpus;

/// Timed passes per line (the median is reported); `DETECT_BENCH_RUNS` overrides it.
const RUNS: usize = 7;
/// Issue 22's floor for the pattern tier on ordinary prose.
const PROSE_TARGET_MBS: f64 = 150.0;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn runs() -> usize {
    std::env::var("DETECT_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(RUNS)
}

/// Detect a few texts once, untimed (regex caches fill; a profiler counting only inside [`time`]
/// leaves this out).
#[inline(never)]
fn warm_up(detector: &Detector, texts: &[String]) {
    for t in texts {
        black_box(detector.detect(black_box(t)));
    }
}

/// Median seconds to detect every text once.
#[inline(never)]
fn time(detector: &Detector, texts: &[String]) -> f64 {
    let runs = (0..runs())
        .map(|_| {
            let start = Instant::now();
            for t in texts {
                black_box(detector.detect(black_box(t)));
            }
            start.elapsed().as_secs_f64()
        })
        .collect();
    median(runs)
}

/// Print one line and return its MB/s.
fn report(name: &str, detector: &Detector, texts: &[String]) -> f64 {
    let bytes: usize = texts.iter().map(String::len).sum();
    // Warm up (and repeat small sets so one run takes a measurable time).
    let reps = (1_000_000 / bytes.max(1)).max(1);
    let texts: Vec<String> = texts
        .iter()
        .cycle()
        .take(texts.len() * reps)
        .cloned()
        .collect();
    let bytes = bytes * reps;
    warm_up(detector, &texts[..texts.len().min(100)]);
    let secs = time(detector, &texts);
    println!(
        "{name:<44} {:>9.1} MB/s {:>12.0} sentences/s  ({} texts, {} bytes, median of {})",
        bytes as f64 / secs / 1e6,
        texts.len() as f64 / secs,
        texts.len(),
        bytes,
        runs(),
    );
    bytes as f64 / secs / 1e6
}

fn prose() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .unwrap_or_default();
    let mut out: Vec<String> = readme
        .split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.starts_with("```") && !p.starts_with('|'))
        .map(str::to_owned)
        .collect();
    let filler = [
        "The team met on Tuesday to review the roadmap and agreed to ship the new onboarding flow first.",
        "Customers asked for clearer invoices, so finance will redesign the template before the next cycle.",
        "Latency improved after the cache change, although the nightly batch still runs longer than planned.",
        "Please summarise the discussion, list the open questions, and suggest who should own each one.",
        "Our support queue doubled in March; most tickets were about password resets and billing dates.",
    ];
    out.extend(filler.iter().map(|s| s.to_string()));
    out
}

fn presidio_texts() -> Option<Vec<String>> {
    let shared = std::env::var_os("OPC_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")));
    let text =
        std::fs::read_to_string(shared.join("data/pii/presidio_recognizer_cases_core.jsonl"))
            .ok()?;
    Some(
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["text"].as_str().map(str::to_owned))
            .collect(),
    )
}

fn synthetic() -> Vec<String> {
    corpus::generate(7, 2000)
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_owned))
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: keep that quick.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let only = std::env::var("DETECT_BENCH_ONLY").ok();
    let wants = |key: &str| only.as_deref().is_none_or(|o| o == key);
    let prose = prose();
    let each = std::env::var_os("DETECT_BENCH_EACH").is_some();
    for r in opc_privacy::detect::default_recognizers() {
        if !(each && only.is_none() || only.as_deref() == Some(r.name())) {
            continue;
        }
        let name = format!("  prose, {} alone", r.name());
        let one = Detector::with_recognizers(DetectOptions::default(), NerSlot::new(), vec![r]);
        report(&name, &one, &prose);
    }
    let detector = Detector::new(DetectOptions::default(), NerSlot::new());
    if wants("paragraphs") {
        report(
            "ordinary prose (README + filler), per paragraph",
            &detector,
            &prose,
        );
    }
    if wants("document") {
        let joined = vec![prose.join("\n\n")];
        let mbs = report(
            "ordinary prose, one document (pattern tier)",
            &detector,
            &joined,
        );
        println!(
            "  target: pattern tier alone >= {PROSE_TARGET_MBS} MB/s on prose: {mbs:.1} MB/s, {}",
            if mbs >= PROSE_TARGET_MBS {
                "PASS"
            } else {
                "MISS"
            }
        );
    }
    if wants("presidio") {
        match presidio_texts() {
            Some(texts) => {
                report("presidio recogniser texts", &detector, &texts);
            }
            None => println!("presidio recogniser texts: skipped (../shared/data/pii absent)"),
        }
    }
    if wants("synthetic") {
        report("synthetic PII corpus (seed 7)", &detector, &synthetic());
    }
}
