//! Tune recall on the LoCoMo dev split: every configuration below measured on one set of stores (the
//! turns are embedded once), each reported on the tuned part, the held-out part and the whole.
//!
//! `cargo run --release -p opc-memory --example locomo_tune [-- TURNS QA] [--held-out conv-42,conv-43]
//! [--cache FILE]` (defaults: ../shared/data/locomo, the held-out part conv-42 and conv-43).
//!
//! The held-out conversations are never tuned on: a change is kept only when it does not hurt them.
//! Vectors are cached by sha256 of the embedded text in `--cache` (default
//! `target/tmp/locomo-embeddings.bin`), so a second run costs seconds; the cache holds vectors of
//! benchmark text only, and a changed embedded text simply misses it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clap::Parser;
use opc_memory::embed::{DIM, EmbedError, EmbedSlot, Embedder, MiniLm};
use opc_memory::recall::eval::{self, Config, Report};
use opc_memory::recall::{Fusion, Mode, Tuning};
use sha2::{Digest, Sha256};

/// Recall@k of every configuration on the LoCoMo dev split.
#[derive(Parser)]
struct Args {
    /// LoCoMo dev turns.
    #[arg(default_value = "../shared/data/locomo/locomo_dev_turns.jsonl")]
    turns: PathBuf,
    /// LoCoMo dev questions with their evidence.
    #[arg(default_value = "../shared/data/locomo/locomo_dev_qa_evidence.jsonl")]
    qa: PathBuf,
    /// Conversations held out from tuning, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "conv-42,conv-43")]
    held_out: Vec<String>,
    /// The vector cache.
    #[arg(long, default_value = "target/tmp/locomo-embeddings.bin")]
    cache: PathBuf,
    /// Write the questions of the tuned part whose evidence a configuration missed in its top 10, with
    /// each evidence's rank, to `FILE` (JSON lines; the first configuration).
    #[arg(long)]
    misses: Option<PathBuf>,
    /// Measure with each turn's text preceded by the previous turn of its session ("(Speaker: text)
    /// text"), as if the indexers saw the previous message as context: the experiment behind the
    /// proposal in docs/memory.md (the product does not index context yet).
    #[arg(long)]
    context: bool,
    /// Print the per-category table of these configurations (by name; "all" for every one).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    tables: Vec<String>,
}

/// MiniLM behind a cache keyed by sha256 of the text.
struct Cached {
    model: Arc<dyn Embedder>,
    seen: Mutex<HashMap<[u8; 32], Vec<f32>>>,
}

impl Cached {
    fn load(model: Arc<dyn Embedder>, path: &Path) -> Self {
        let mut seen = HashMap::new();
        let mut bytes = Vec::new();
        if std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .is_ok()
        {
            for rec in bytes.chunks_exact(32 + 4 * DIM) {
                let mut key = [0u8; 32];
                key.copy_from_slice(&rec[..32]);
                let v = rec[32..]
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                seen.insert(key, v);
            }
        }
        Self {
            model,
            seen: Mutex::new(seen),
        }
    }

    fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for (k, v) in seen.iter() {
            out.write_all(k)?;
            for x in v {
                out.write_all(&x.to_le_bytes())?;
            }
        }
        out.flush()
    }
}

fn key(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl Embedder for Cached {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let missing: Vec<&str> = {
            let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            texts
                .iter()
                .copied()
                .filter(|t| !seen.contains_key(&key(t)))
                .collect()
        };
        if !missing.is_empty() {
            let vecs = self.model.embed(&missing)?;
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            for (t, v) in missing.iter().zip(vecs) {
                seen.insert(key(t), v);
            }
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        Ok(texts
            .iter()
            .map(|t| seen.get(&key(t)).cloned().unwrap_or_default())
            .collect())
    }

    fn model_id(&self) -> &str {
        self.model.model_id()
    }

    fn dimensions(&self) -> usize {
        self.model.dimensions()
    }
}

/// The turns file with each turn's text preceded by the previous turn of its session, written
/// beside the cache (`target/tmp/locomo-turns-context.jsonl`).
fn with_context(path: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = String::new();
    let mut prev: Option<(String, String, String)> = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: {e}", path.display()))?;
        let field = |k: &str| match &v[k] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let thread = (field("sample_id"), field("session"));
        let said = format!("{}: {}", field("speaker"), field("text"));
        if let Some((sample, session, before)) = &prev
            && (sample, session) == (&thread.0, &thread.1)
        {
            v["text"] = format!("({before}) {}", field("text")).into();
        }
        prev = Some((thread.0, thread.1, said));
        out.push_str(&v.to_string());
        out.push('\n');
    }
    let to = PathBuf::from("target/tmp/locomo-turns-context.jsonl");
    std::fs::create_dir_all("target/tmp").map_err(|e| e.to_string())?;
    std::fs::write(&to, out).map_err(|e| format!("{}: {e}", to.display()))?;
    Ok(to)
}

fn row(name: &str, r: &Report) -> String {
    let cells: Vec<String> = r.overall.iter().map(|x| format!("{x:>5.1}")).collect();
    format!("{name:<10} {:>4} {}", r.questions, cells.join(" "))
}

fn main() {
    let args = Args::parse();
    if !args.turns.exists() {
        eprintln!("skipping: {} not found", args.turns.display());
        return;
    }
    let slot = EmbedSlot::new();
    let mut cached = None;
    match MiniLm::load_shared() {
        Ok(m) => {
            let c = Arc::new(Cached::load(m, &args.cache));
            slot.set(c.clone());
            cached = Some(c);
        }
        Err(e) => {
            eprintln!("embedding model not loaded ({e}); vector configurations fall back to BM25")
        }
    }
    let base = Tuning::default();
    // Before issue 39: 0.5 / 0.5, 100 candidates a list, no author boost.
    let before = Tuning {
        fusion: Fusion::Weighted { vector: 0.5 },
        pool: 100,
        author: 0.0,
        ..base
    };
    let mut configs = vec![
        Config {
            name: "default".into(),
            mode: Mode::Hybrid,
            tuning: base,
        },
        Config {
            name: "before".into(),
            mode: Mode::Hybrid,
            tuning: before,
        },
        Config {
            name: "bm25".into(),
            mode: Mode::Bm25,
            tuning: base,
        },
        Config {
            name: "vector".into(),
            mode: Mode::Vector,
            tuning: base,
        },
    ];
    // The grid the default was chosen from (on the tuned part: the best mean of R@5, R@10, R@25).
    for w in [0.3f32, 0.35, 0.4, 0.5] {
        for author in [0.0f32, 0.15, 0.2] {
            for pool in [100usize, 200] {
                configs.push(Config {
                    name: format!("w{w} a{author} p{pool}"),
                    mode: Mode::Hybrid,
                    tuning: Tuning {
                        fusion: Fusion::Weighted { vector: w },
                        author,
                        pool,
                        ..base
                    },
                });
            }
        }
    }
    let turns = match args.context {
        false => args.turns.clone(),
        true => match with_context(&args.turns) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: writing the turns with context: {e}");
                std::process::exit(1);
            }
        },
    };
    let started = std::time::Instant::now();
    let ks = [5, 10, 25, 50];
    let reports = match eval::run(&turns, &args.qa, &ks, &configs, &slot) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    if let Some(c) = &cached
        && let Err(e) = c.save(&args.cache)
    {
        eprintln!("note: the vector cache was not saved ({e})");
    }
    let held: Vec<&str> = args.held_out.iter().map(String::as_str).collect();
    let mut tuned: Vec<&str> = reports
        .first()
        .map(|r| r.by_sample.keys().map(String::as_str).collect())
        .unwrap_or_default();
    tuned.retain(|s| !held.contains(s));
    println!(
        "tuned part: {}; held-out part: {}",
        tuned.join(","),
        held.join(",")
    );
    println!(
        "{:<28} {:<10} {:>4} {:>5} {:>5} {:>5} {:>5}",
        "config", "part", "n", "R@5", "R@10", "R@25", "R@50"
    );
    for r in &reports {
        for (part, rep) in [
            ("tuned", r.part(&tuned)),
            ("held-out", r.part(&held)),
            ("total", r.clone()),
        ] {
            println!("{:<28} {}", r.config.name, row(part, &rep));
        }
    }
    if let (Some(path), Some(r)) = (&args.misses, reports.first()) {
        let lines: Vec<String> = r
            .part(&tuned)
            .scored
            .iter()
            .filter(|q| q.ranks.iter().any(|(_, rank)| rank.is_none_or(|k| k > 10)))
            .map(|q| {
                serde_json::json!({
                    "sample": q.sample, "category": q.category, "question": q.question,
                    "ranks": q.ranks,
                })
                .to_string()
            })
            .collect();
        if let Err(e) = std::fs::write(path, lines.join("\n")) {
            eprintln!("note: {} not written ({e})", path.display());
        }
    }
    for r in &reports {
        if args
            .tables
            .iter()
            .any(|t| t == "all" || *t == r.config.name)
        {
            for (part, rep) in [
                ("tuned part", r.part(&tuned)),
                ("held-out part", r.part(&held)),
                ("dev total", r.clone()),
            ] {
                println!("\n[{}] {part}", r.config.name);
                print!("{}", rep.text(true));
            }
        }
    }
    println!("({:.1} s)", started.elapsed().as_secs_f64());
}
