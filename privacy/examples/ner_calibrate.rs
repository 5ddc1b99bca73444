//! Fit and check the NER tier's score calibration (`detect::ner::calibration`), and look at what the
//! model reads in a text.
//!
//! ```text
//! cargo run --release -p opc-privacy --example ner_calibrate -- fit   <tune.jsonl>
//! cargo run --release -p opc-privacy --example ner_calibrate -- sweep <file.jsonl>
//! cargo run --release -p opc-privacy --example ner_calibrate -- probe "text" ["text" …]
//! ```
//!
//! - `fit` sweeps each NER type's raw threshold (the mean of 1 − P(O) over a span) on the cases and
//!   prints the one with the best token F2 per type (ties to the lower, for recall): the knees to
//!   write into `calibration.rs`. Run it on the **tuning** split only.
//! - `sweep` runs the whole detector (patterns and NER, calibrated) at thresholds 0.3 to 0.95 and
//!   prints token precision, recall and F2 over all types: the curve in the README.
//! - `probe` prints each word's best piece and entity probability, the raw spans and the final ones.
//!
//! Cases are `opc privacy eval`'s JSON lines (`{text, entities:[{type,start,end}]}`).

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::expect_used,
    missing_docs
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opc_privacy::detect::eval::{self, Case, Counts, Report};
use opc_privacy::detect::ner::calibration;
use opc_privacy::detect::ner::decode;
use opc_privacy::detect::{DetectOptions, Detector, NerModel, NerSlot, Rampart, resolve_overlaps};
use opc_privacy::{Entity, EntityType};

const NER_TYPES: [EntityType; 3] = [
    EntityType::PersonName,
    EntityType::Address,
    EntityType::Location,
];

fn cases(path: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| eval::parse_case(l).ok()?.ok())
        .collect()
}

/// The model's spans for each text, computed once (every threshold reuses them).
struct Cached {
    model: Rampart,
    seen: Mutex<HashMap<String, Vec<Entity>>>,
}

impl NerModel for Cached {
    fn entities(&self, text: &str) -> Vec<Entity> {
        if let Some(e) = self.seen.lock().unwrap().get(text) {
            return e.clone();
        }
        let e = self.model.entities(text);
        self.seen
            .lock()
            .unwrap()
            .insert(text.to_string(), e.clone());
        e
    }
}

fn fit(path: &str) {
    let model = Rampart::load_cached().expect("model");
    let cases = cases(path);
    eprintln!("{} cases", cases.len());
    // Raw model spans and rule spans per case, once.
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    let mut per_case = Vec::with_capacity(cases.len());
    for chunk in texts.chunks(64) {
        for (text, tokens) in chunk
            .iter()
            .zip(model.batch_predictions(chunk).expect("runs"))
        {
            per_case.push((
                decode::raw_spans(text, &tokens),
                decode::rule_spans(text, &tokens),
            ));
        }
    }
    for kind in NER_TYPES {
        println!("{kind}: raw threshold sweep (token level, this type only)");
        println!("  raw    P      R      F2");
        let mut best = (0.0f64, 0.5f32);
        for step in 1..=19 {
            let t = step as f32 * 0.05;
            let mut report = Report::default();
            for (case, (raw, rules)) in cases.iter().zip(&per_case) {
                let mut found: Vec<Entity> = raw
                    .iter()
                    .filter(|r| {
                        if r.entity.kind == kind {
                            (r.entity.score >= t || r.cued)
                                && !(kind == EntityType::Address
                                    && r.entity.score <= decode::NUMBER_SCORE
                                    && !r.cued)
                        } else {
                            decode::calibrated(r) >= calibration::DEFAULT_THRESHOLD
                        }
                    })
                    .map(|r| r.entity.clone())
                    .collect();
                found.extend(rules.iter().cloned());
                let found = resolve_overlaps(found);
                report.add(case, &found);
            }
            let c: Counts = report.tokens_total(&[kind]);
            let f2 = c.f(2.0);
            println!(
                "  {t:.2}  {:.3}  {:.3}  {:.3}",
                c.precision(),
                c.recall(),
                f2
            );
            if f2 > best.0 + 1e-9 {
                best = (f2, t);
            }
        }
        println!("  best: knee {:.2} (F2 {:.3})", best.1, best.0);
        let name = match kind {
            EntityType::PersonName => "PERSON_NAME",
            EntityType::Address => "ADDRESS",
            _ => "LOCATION",
        };
        println!(
            "  pub const {name}: Curve = Curve {{ knee: {:.2} }};",
            best.1
        );
    }
}

fn sweep(path: &str) {
    let cases = cases(path);
    let cached = Arc::new(Cached {
        model: Rampart::load_cached().expect("model"),
        seen: Mutex::new(HashMap::new()),
    });
    // Fill the cache in batches (one forward pass for many texts), then sweep over cached spans.
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    for chunk in texts.chunks(64) {
        let found = cached.model.entities_batch(chunk);
        let mut seen = cached.seen.lock().unwrap();
        for (text, e) in chunk.iter().zip(found) {
            seen.insert((*text).to_string(), e);
        }
    }
    let model: Arc<dyn NerModel> = cached;
    println!("threshold   P      R      F2   (token level, all types, micro)");
    for t in [0.3f32, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95] {
        let slot = NerSlot::new();
        slot.set(model.clone());
        let detector = Detector::new(
            DetectOptions {
                threshold: t,
                ..DetectOptions::default()
            },
            slot,
        );
        let report = eval::evaluate(&detector, &cases);
        let all: Counts = report.tokens_total(&EntityType::ALL);
        let mark = if (t - calibration::DEFAULT_THRESHOLD).abs() < 1e-6 {
            "  ← default"
        } else {
            ""
        };
        println!(
            "  {t:.2}     {:.3}  {:.3}  {:.3}{mark}",
            all.precision(),
            all.recall(),
            all.f(2.0)
        );
        if (t - calibration::DEFAULT_THRESHOLD).abs() < 1e-6 {
            print!("{report}");
        }
    }
}

fn probe(texts: &[String]) {
    let model = Rampart::load_cached().expect("model");
    for text in texts {
        println!("{text:?}");
        let tokens = model.token_predictions(text).expect("runs");
        for t in &tokens {
            println!(
                "  {:<20} {:<10} {:.3}",
                &text[t.start..t.end],
                format!("{:?}", t.piece),
                t.score
            );
        }
        for r in decode::raw_spans(text, &tokens) {
            println!(
                "  raw  {} {:?} {:.3}{}",
                r.entity.kind,
                &text[r.entity.start..r.entity.end],
                r.entity.score,
                if r.cued { " (cued)" } else { "" }
            );
        }
        for e in decode::spans(text, &tokens) {
            println!(
                "  span {} {:?} {:.3}",
                e.kind,
                &text[e.start..e.end],
                e.score
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("fit") => fit(args.get(1).expect("a JSONL file")),
        Some("sweep") => sweep(args.get(1).expect("a JSONL file")),
        Some("probe") => probe(&args[1..]),
        _ => eprintln!("usage: ner_calibrate fit|sweep <file.jsonl> | probe \"text\" …"),
    }
}
