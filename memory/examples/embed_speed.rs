//! Embedding throughput: sentences/s of all-MiniLM-L6-v2 over LoCoMo turns (real chat lengths).
//!
//! `cargo run --release -p opc-memory --example embed_speed -- TURNS.jsonl [N]`

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use opc_memory::embed::{Embedder, MiniLm};

/// Sentences/s of the embedder over LoCoMo turns.
#[derive(Parser)]
struct Args {
    /// LoCoMo turns, one JSON object with a `text` a line.
    turns: PathBuf,
    /// How many turns to embed.
    #[arg(default_value_t = 512)]
    n: usize,
}

fn main() {
    let Args { turns, n } = Args::parse();
    let text = std::fs::read_to_string(turns).unwrap_or_default();
    let texts: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(String::from))
        .take(n)
        .collect();
    let t = Instant::now();
    let model = match MiniLm::load_cached() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("model not available: {e}");
            return;
        }
    };
    println!("load: {:.2} s", t.elapsed().as_secs_f64());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    let out = model.embed(&refs);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{} sentences in {:.2} s = {:.0} sentences/s ({})",
        refs.len(),
        secs,
        refs.len() as f64 / secs,
        if out.is_ok() { "ok" } else { "error" }
    );
    let t = Instant::now();
    for q in refs.iter().take(50) {
        let _ = model.embed(&[q]);
    }
    println!(
        "single query: {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0 / 50.0
    );
}
