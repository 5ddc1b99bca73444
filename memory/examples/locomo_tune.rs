//! Tune recall on the LoCoMo dev split: every configuration below measured on one set of stores (the
//! turns are embedded once). Prints recall@5/10/25/50 per configuration.
//!
//! `cargo run -p opc-memory --example locomo_tune [-- TURNS QA]` (defaults: ../shared/data/locomo).

use std::path::PathBuf;

use clap::Parser;
use opc_memory::embed::{EmbedSlot, MiniLm};
use opc_memory::recall::eval::{self, Config};
use opc_memory::recall::{Fusion, Mode, Tuning};

/// Recall@k of every configuration on the LoCoMo dev split.
#[derive(Parser)]
struct Args {
    /// LoCoMo dev turns.
    #[arg(default_value = "../shared/data/locomo/locomo_dev_turns.jsonl")]
    turns: PathBuf,
    /// LoCoMo dev questions with their evidence.
    #[arg(default_value = "../shared/data/locomo/locomo_dev_qa_evidence.jsonl")]
    qa: PathBuf,
}

fn main() {
    let Args { turns, qa } = Args::parse();
    if !turns.exists() {
        eprintln!("skipping: {} not found", turns.display());
        return;
    }
    let slot = EmbedSlot::new();
    match MiniLm::load_shared() {
        Ok(m) => {
            slot.set(m);
        }
        Err(e) => {
            eprintln!("embedding model not loaded ({e}); vector configurations fall back to BM25")
        }
    }
    let plain = Tuning {
        fusion: Fusion::Rrf { k: 60.0 },
        pool: 100,
        neighbour: 0.0,
        drop_stop_words: false,
    };
    let mut configs = vec![
        Config {
            name: "bm25 plain".into(),
            mode: Mode::Bm25,
            tuning: plain,
        },
        Config {
            name: "bm25 -stop".into(),
            mode: Mode::Bm25,
            tuning: Tuning {
                drop_stop_words: true,
                ..plain
            },
        },
        Config {
            name: "vector".into(),
            mode: Mode::Vector,
            tuning: plain,
        },
        Config {
            name: "rrf plain".into(),
            mode: Mode::Hybrid,
            tuning: plain,
        },
        Config {
            name: "rrf -stop".into(),
            mode: Mode::Hybrid,
            tuning: Tuning {
                drop_stop_words: true,
                ..plain
            },
        },
    ];
    for w in [0.3f32, 0.5, 0.7] {
        configs.push(Config {
            name: format!("weighted {w} -stop"),
            mode: Mode::Hybrid,
            tuning: Tuning {
                fusion: Fusion::Weighted { vector: w },
                drop_stop_words: true,
                ..plain
            },
        });
    }
    for (fusion, label) in [
        (Fusion::Rrf { k: 60.0 }, "rrf"),
        (Fusion::Weighted { vector: 0.5 }, "w0.5"),
        (Fusion::Weighted { vector: 0.7 }, "w0.7"),
    ] {
        for beta in [0.2f32, 0.35, 0.5] {
            configs.push(Config {
                name: format!("{label} -stop nb{beta}"),
                mode: Mode::Hybrid,
                tuning: Tuning {
                    fusion,
                    drop_stop_words: true,
                    neighbour: beta,
                    pool: 100,
                },
            });
        }
    }
    configs.push(Config {
        name: "bm25 -stop nb0.35".into(),
        mode: Mode::Bm25,
        tuning: Tuning {
            drop_stop_words: true,
            neighbour: 0.35,
            ..plain
        },
    });
    configs.push(Config {
        name: "vector nb0.35".into(),
        mode: Mode::Vector,
        tuning: Tuning {
            neighbour: 0.35,
            ..plain
        },
    });
    configs.push(Config {
        name: "default".into(),
        mode: Mode::Hybrid,
        tuning: Tuning::default(),
    });
    let started = std::time::Instant::now();
    match eval::run(&turns, &qa, &[5, 10, 25, 50], &configs, &slot) {
        Ok(reports) => {
            println!(
                "{:<24} {:>6} {:>6} {:>6} {:>6}",
                "config", "R@5", "R@10", "R@25", "R@50"
            );
            for r in reports {
                println!(
                    "{:<24} {:>6.1} {:>6.1} {:>6.1} {:>6.1}",
                    r.config.name, r.overall[0], r.overall[1], r.overall[2], r.overall[3]
                );
            }
            println!("({:.1} s)", started.elapsed().as_secs_f64());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
