//! Dumps every span the pattern tier reports (empty NER slot), so that a speed change can be shown to
//! leave detection exactly as it was: run it before and after, and compare the outputs byte for byte.
//!
//! ```text
//! cargo run --release -p opc-privacy --example detect_dump -- FILE... > spans.txt
//! ```
//!
//! Each `FILE` ending in `.jsonl` gives one text per line (its `"text"` field); any other file gives
//! the whole file as one document, and then each of its paragraphs (split at blank lines). For every
//! text it prints the text's byte length and then one line per span for each detector configuration:
//! - `all@0`: every recogniser, threshold 0 (everything a recogniser reports, after the detector's
//!   exclusions, address merging and overlap resolution);
//! - `all@def`: every recogniser, the default threshold (merging and overlaps see fewer spans);
//! - `<name>@0`: each recogniser alone at threshold 0 (what it finds before others can hide it).
//!
//! A span is `kind start end score`, the score as its exact bit pattern. Texts are numbered per file.

use std::fmt::Write as _;
use std::io::Write as _;

use clap::Parser;
use opc_privacy::detect::{DetectOptions, Detector, NerSlot, default_recognizers};

/// Dumps every span the pattern tier reports, per detector configuration, to compare two builds.
#[derive(Parser)]
struct Args {
    /// Texts: a `.jsonl` file gives one text per line (its `"text"`); any other file gives the
    /// whole file and then each of its paragraphs.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
}

fn main() {
    let files = Args::parse().files;
    let zero = DetectOptions {
        threshold: 0.0,
        ..DetectOptions::default()
    };
    let mut detectors = vec![
        (
            "all@0".to_string(),
            Detector::new(zero.clone(), NerSlot::new()),
        ),
        (
            "all@def".to_string(),
            Detector::new(DetectOptions::default(), NerSlot::new()),
        ),
    ];
    for r in default_recognizers() {
        let name = format!("{}@0", r.name());
        detectors.push((
            name,
            Detector::with_recognizers(zero.clone(), NerSlot::new(), vec![r]),
        ));
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for file in &files {
        let content = match std::fs::read_to_string(file) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: cannot read {file}: {e}");
                std::process::exit(1);
            }
        };
        let texts: Vec<String> = if file.ends_with(".jsonl") {
            content
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|v| v["text"].as_str().map(str::to_owned))
                .collect()
        } else {
            std::iter::once(content.clone())
                .chain(
                    content
                        .split("\n\n")
                        .filter(|p| !p.trim().is_empty())
                        .map(str::to_owned),
                )
                .collect()
        };
        for (i, text) in texts.iter().enumerate() {
            let mut block = format!("## {file} #{i} len {}\n", text.len());
            for (name, d) in &detectors {
                for e in d.detect(text) {
                    let _ = writeln!(
                        block,
                        "{name} {:?} {} {} {:08x}",
                        e.kind,
                        e.start,
                        e.end,
                        e.score.to_bits()
                    );
                }
            }
            if out.write_all(block.as_bytes()).is_err() {
                std::process::exit(1);
            }
        }
    }
}
