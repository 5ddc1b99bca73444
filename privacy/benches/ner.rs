//! Benchmark: Rampart NER sentences/s, the int8 path (`opc-infer`, the product) beside the previous
//! f32 candle path, in one run: one sentence at a time (a chat message) and in chunks of 256 (`opc
//! privacy detect` reads ahead), on rayon pools of 1 and 2 threads. Rounds are interleaved (each
//! round runs every variant once) and the medians are reported with the ratio new / old, so a busy
//! machine slows both sides alike. It also counts the sentences whose entities differ between the
//! paths (type and span; scores within 0.02).
//!
//! Run: `cargo bench -p opc-privacy --features reference --bench ner` (needs the model in the cache:
//! `opc models fetch`). `NER_BENCH_ROUNDS` (default 5), `NER_BENCH_SENTENCES` (default 512).

use std::time::Instant;

use opc_privacy::detect::{NerModel, Rampart};

#[allow(dead_code)]
#[path = "../examples/pii_corpus.rs"]
mod corpus;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let Ok(root) = opc_models::cache_root() else {
        println!("skipped: no model cache");
        return;
    };
    let Ok(dir) = opc_models::RAMPART.locate(&root) else {
        println!("skipped: the NER model is not in the cache (`opc models fetch`)");
        return;
    };
    let rounds = env("NER_BENCH_ROUNDS", 5);
    let count = env("NER_BENCH_SENTENCES", 512);
    let texts: Vec<String> = corpus::generate(7, count)
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_owned))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    // One at a time on a quarter of the corpus (it is the slow mode).
    let alone = &refs[..refs.len() / 4];

    let base = rss_mb();
    let t = Instant::now();
    let new = Rampart::load(&dir).expect("model loads");
    let new_load = t.elapsed().as_secs_f64();
    let new_rss = rss_mb() - base;
    let base = rss_mb();
    let t = Instant::now();
    let old = Rampart::load_reference(&dir).expect("model loads");
    let old_load = t.elapsed().as_secs_f64();
    let old_rss = rss_mb() - base;
    println!(
        "{} sentences, {:.0} bytes each on average; load: int8 {new_load:.2}s (+{new_rss:.0} MB RSS, \
         {:.1} MB of weights), f32 candle {old_load:.2}s (+{old_rss:.0} MB RSS)",
        texts.len(),
        bytes as f64 / texts.len() as f64,
        new.weight_bytes() as f64 / 1e6,
    );

    // Agreement over the whole corpus, batched as `opc privacy detect` runs it.
    let a = old.entities_batch(&refs);
    let b = new.entities_batch(&refs);
    let mut differ = 0;
    let mut worst = 0f32;
    for (x, y) in a.iter().zip(&b) {
        let same = x.len() == y.len()
            && x.iter()
                .zip(y)
                .all(|(p, q)| (p.kind, p.start, p.end) == (q.kind, q.start, q.end));
        if same {
            for (p, q) in x.iter().zip(y) {
                worst = worst.max((p.score - q.score).abs());
            }
        } else {
            differ += 1;
        }
    }
    let entities: usize = a.iter().map(Vec::len).sum();
    println!(
        "agreement: {differ} of {} sentences differ in entities (type or span; {entities} entities \
         on the f32 path); largest score change where they agree {worst:.4}",
        texts.len()
    );

    let models: [(&str, &Rampart); 2] = [("f32 candle", &old), ("int8", &new)];
    // results[threads][mode][model] = sentences/s per round.
    let mut results = vec![vec![vec![Vec::new(); 2]; 2]; 2];
    for _ in 0..rounds {
        for (ti, threads) in [1usize, 2].into_iter().enumerate() {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("thread pool");
            pool.install(|| {
                for (mi, (_, model)) in models.iter().enumerate() {
                    let t = Instant::now();
                    for text in alone {
                        std::hint::black_box(model.entities(text));
                    }
                    results[ti][0][mi].push(alone.len() as f64 / t.elapsed().as_secs_f64());
                    let t = Instant::now();
                    for chunk in refs.chunks(256) {
                        std::hint::black_box(model.entities_batch(chunk));
                    }
                    results[ti][1][mi].push(refs.len() as f64 / t.elapsed().as_secs_f64());
                }
            });
        }
    }
    println!(
        "\nmedian of {rounds} interleaved rounds, sentences/s (MB/s):\n\
         | threads | mode | f32 candle | int8 | int8 / f32 |\n|---|---|---|---|---|"
    );
    let per = bytes as f64 / texts.len() as f64 / 1e6;
    for (ti, threads) in [1, 2].into_iter().enumerate() {
        for (mi, mode) in ["one at a time", "chunks of 256"].into_iter().enumerate() {
            let old = median(results[ti][mi][0].clone());
            let new = median(results[ti][mi][1].clone());
            println!(
                "| {threads} | {mode} | {old:.0} ({:.4}) | {new:.0} ({:.4}) | {:.2}× |",
                old * per,
                new * per,
                new / old
            );
        }
    }
}
