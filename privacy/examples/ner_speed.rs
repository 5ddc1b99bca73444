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

use clap::Parser;
use opc_privacy::detect::{NerModel, Rampart};

/// NER sentences/s on a JSON-lines file, one sentence per call, median of several runs.
#[derive(Parser)]
struct Args {
    /// The sentences, `{"text": …}` per line.
    #[arg(value_name = "FILE.jsonl")]
    path: String,
    /// Sentences to read from the file, at most.
    #[arg(long, default_value_t = 1000)]
    limit: usize,
    /// Timed runs (at least one).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

fn main() {
    let args = Args::parse();
    let (path, limit, runs) = (&args.path, args.limit, args.runs.max(1));
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
