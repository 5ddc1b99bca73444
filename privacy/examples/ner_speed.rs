//! NER speed alone: the Rampart tier on the sentences of a JSON-lines file (`{"text": …}` per line),
//! one sentence per call (as a chat message arrives), after a warm-up, median of several runs. The
//! twin of `scripts/compare/ner_speed.py` (onnxruntime with the wheel's own decoding), so both read the
//! same file: `scripts/compare/run.sh` runs them side by side.
//!
//! `cargo run --release -p opc-privacy --example ner_speed -- FILE [--limit N] [--runs R]`
//! Threads: `opc-infer` runs on rayon's global pool, which reads `RAYON_NUM_THREADS` (default: the cores).

#![allow(clippy::unwrap_used, clippy::print_stdout, missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use opc_privacy::detect::{NerModel, Rampart};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1)?.parse::<usize>().ok())
    };
    let Some(path) = args.first().filter(|a| !a.starts_with("--")) else {
        eprintln!("usage: ner_speed FILE.jsonl [--limit N] [--runs R]");
        std::process::exit(2);
    };
    let limit = flag("--limit").unwrap_or(1000);
    let runs = flag("--runs").unwrap_or(3).max(1);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let sentences: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_owned))
        .take(limit)
        .collect();
    let model = Rampart::load_cached().unwrap_or_else(|e| panic!("{e} (run `opc models fetch`)"));
    for s in sentences.iter().take(20) {
        black_box(model.entities(s));
    }
    let mut rates: Vec<f64> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            for s in &sentences {
                black_box(model.entities(s));
            }
            sentences.len() as f64 / started.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into());
    println!(
        "{{\"engine\":\"opc-infer\",\"threads\":\"{threads}\",\"sentences\":{},\"runs\":{:?},\"median\":{:.1}}}",
        sentences.len(),
        rates
            .iter()
            .map(|r| (r * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        rates[rates.len() / 2]
    );
}
