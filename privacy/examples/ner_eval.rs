//! Measure the NER tier: accuracy on a seeded synthetic corpus (names and street addresses in
//! realistic sentences, built with the `fake` crate) and on Presidio's PERSON cases, throughput, and
//! the process's memory once the model is loaded.
//!
//! `cargo run --release -p opc-privacy --example ner_eval -- [SENTENCES] [--show N] [--threshold T]
//! [--text "…" …]`
//! (`--features reference` and `--reference`: the same with the previous f32 candle path)
//!
//! Fetches the model into the cache first when it is missing (needs pip).

#![allow(clippy::unwrap_used, clippy::print_stdout, missing_docs)]

use std::collections::BTreeMap;
use std::time::Instant;

use fake::Fake;
use fake::faker::address::raw as addr;
use fake::faker::name::raw as name;
use fake::locales::{DE_DE, EN, FR_FR, IT_IT, NL_NL, PT_BR};
use fake::rand::SeedableRng;
use fake::rand::rngs::StdRng;
use fake::rand::{RngExt, seq::IndexedRandom};
use opc_privacy::detect::{NerModel, Rampart};
use opc_privacy::{Entity, EntityType};

/// A sentence with its gold spans (byte offsets).
struct Case {
    text: String,
    gold: Vec<(EntityType, usize, usize)>,
}

/// Builds a sentence piece by piece, recording where the gold spans land.
struct Builder {
    text: String,
    gold: Vec<(EntityType, usize, usize)>,
}

impl Builder {
    fn new() -> Self {
        Self {
            text: String::new(),
            gold: Vec::new(),
        }
    }
    fn lit(&mut self, s: &str) -> &mut Self {
        self.text.push_str(s);
        self
    }
    fn ent(&mut self, kind: EntityType, s: &str) -> &mut Self {
        let start = self.text.len();
        self.text.push_str(s);
        self.gold.push((kind, start, self.text.len()));
        self
    }
    fn done(&mut self) -> Case {
        Case {
            text: std::mem::take(&mut self.text),
            gold: std::mem::take(&mut self.gold),
        }
    }
}

fn person(rng: &mut StdRng, full: bool) -> String {
    let locale = rng.random_range(0..6);
    macro_rules! pick {
        ($l:expr) => {{
            let first: String = name::FirstName($l).fake_with_rng(rng);
            if full {
                let last: String = name::LastName($l).fake_with_rng(rng);
                format!("{first} {last}")
            } else {
                first
            }
        }};
    }
    match locale {
        0 | 1 => pick!(EN),
        2 => pick!(FR_FR),
        3 => pick!(DE_DE),
        4 => pick!(IT_IT),
        _ => pick!(PT_BR),
    }
}

fn surname(rng: &mut StdRng) -> String {
    match rng.random_range(0..3) {
        0 => name::LastName(EN).fake_with_rng(rng),
        1 => name::LastName(NL_NL).fake_with_rng(rng),
        _ => name::LastName(DE_DE).fake_with_rng(rng),
    }
}

/// A US-style street address, sometimes with a unit, city, state and ZIP.
fn address(rng: &mut StdRng) -> String {
    let number: String = addr::BuildingNumber(EN).fake_with_rng(rng);
    let street: String = addr::StreetName(EN).fake_with_rng(rng);
    let city: String = addr::CityName(EN).fake_with_rng(rng);
    let state: String = addr::StateAbbr(EN).fake_with_rng(rng);
    let zip: String = addr::ZipCode(EN).fake_with_rng(rng);
    let unit: String = addr::SecondaryAddress(EN).fake_with_rng(rng);
    match rng.random_range(0..5) {
        0 => format!("{number} {street}"),
        1 => format!("{number} {street}, {city}, {state} {zip}"),
        2 => format!("{number} {street} {unit}, {city}, {state} {zip}"),
        3 => format!("{number} {street}, {city}"),
        _ => format!("{number} {street}, {city} {state}"),
    }
}

const NEUTRAL: &[&str] = &[
    "The quarterly report is due on Friday, please review the numbers before the board meeting.",
    "Can you summarise the pull request for the billing service and list the risky changes?",
    "We need a plan to migrate the database to the new cluster without downtime.",
    "Draft a polite reply saying the shipment will be two days late.",
    "What are the main differences between the premium and the standard plan?",
    "Schedule the retrospective for next Tuesday after lunch.",
    "The build failed again because the integration tests timed out.",
    "Translate the onboarding guide into French and Spanish.",
    "Please check whether the new pricing page renders correctly on mobile.",
    "Our marketing budget for the spring campaign is almost spent.",
];

fn corpus(n: usize, seed: u64) -> Vec<Case> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    use EntityType::{Address as A, PersonName as P};
    for i in 0..n {
        let mut b = Builder::new();
        let case = match i % 14 {
            0 => b
                .lit("Hi, I'm ")
                .ent(P, &person(&mut rng, true))
                .lit(" and I can't log into my account.")
                .done(),
            1 => b
                .lit("Please send the invoice to ")
                .ent(P, &person(&mut rng, true))
                .lit(" at ")
                .ent(A, &address(&mut rng))
                .lit(".")
                .done(),
            2 => b
                .ent(P, &person(&mut rng, true))
                .lit(" moved to ")
                .ent(A, &address(&mut rng))
                .lit(" last month.")
                .done(),
            3 => b
                .lit("My neighbour ")
                .ent(P, &person(&mut rng, false))
                .lit(" said the parcel was left at ")
                .ent(A, &address(&mut rng))
                .lit(" by mistake.")
                .done(),
            4 => b
                .lit("Can you ask ")
                .ent(P, &person(&mut rng, true))
                .lit(" whether the meeting is still on?")
                .done(),
            5 => b
                .lit("Ship the replacement to ")
                .ent(A, &address(&mut rng))
                .lit(", it's urgent.")
                .done(),
            6 => {
                let title = ["Mr.", "Ms.", "Dr.", "Mrs."]
                    .choose(&mut rng)
                    .copied()
                    .unwrap_or("Mr.");
                b.lit("Dear ")
                    .lit(title)
                    .lit(" ")
                    .ent(P, &surname(&mut rng))
                    .lit(", thank you for your letter of complaint.")
                    .done()
            }
            7 => b
                .lit("I spoke with ")
                .ent(P, &person(&mut rng, false))
                .lit(" yesterday about the contract renewal.")
                .done(),
            8 => b
                .lit("Customer: ")
                .ent(P, &person(&mut rng, true))
                .lit("\nAddress: ")
                .ent(A, &address(&mut rng))
                .lit("\nIssue: the router keeps rebooting.")
                .done(),
            9 => b
                .lit("Our office is at ")
                .ent(A, &address(&mut rng))
                .lit(", next to the train station.")
                .done(),
            10 => b
                .lit("Forward this to ")
                .ent(P, &person(&mut rng, true))
                .lit(" and ")
                .ent(P, &person(&mut rng, true))
                .lit(" before noon.")
                .done(),
            11 => b
                .lit("According to ")
                .ent(P, &person(&mut rng, true))
                .lit(", the budget was approved on Monday.")
                .done(),
            _ => b
                .lit(NEUTRAL.choose(&mut rng).copied().unwrap_or(""))
                .done(),
        };
        out.push(case);
    }
    out
}

/// Presidio's PERSON cases from ../shared/data/pii, when present.
fn presidio_person() -> Vec<Case> {
    // ../shared beside the repository (a worktree one level deeper also finds it).
    let dir = env!("CARGO_MANIFEST_DIR");
    let text = ["/../../shared", "/../../../shared"].iter().find_map(|up| {
        std::fs::read_to_string(format!(
            "{dir}{up}/data/pii/presidio_recognizer_cases_core.jsonl"
        ))
        .ok()
    });
    let Some(text) = text else {
        println!("(presidio cases: ../shared/data absent, skipped)");
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let types = v["recognizer_types"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !types.iter().any(|t| t == "PERSON") {
            continue;
        }
        let gold = v["entities"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "PERSON")
            .map(|e| {
                (
                    EntityType::PersonName,
                    e["start_byte"].as_u64().unwrap() as usize,
                    e["end_byte"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        out.push(Case {
            text: v["text"].as_str().unwrap().to_string(),
            gold,
        });
    }
    out
}

#[derive(Default, Clone, Copy)]
struct Counts {
    tp: usize,
    fp: usize,
    fn_: usize,
}

impl Counts {
    fn report(&self, label: &str) -> String {
        let p = self.tp as f64 / (self.tp + self.fp).max(1) as f64;
        let r = self.tp as f64 / (self.tp + self.fn_).max(1) as f64;
        let f = |b2: f64| {
            if p + r == 0.0 {
                0.0
            } else {
                (1.0 + b2) * p * r / (b2 * p + r)
            }
        };
        format!(
            "{label:<28} P {p:.3}  R {r:.3}  F1 {:.3}  F2 {:.3}  (tp {} fp {} fn {})",
            f(1.0),
            f(4.0),
            self.tp,
            self.fp,
            self.fn_
        )
    }
}

/// Token-level (whitespace tokens) and exact-span counts per type.
fn score(
    cases: &[Case],
    predicted: &[Vec<Entity>],
    threshold: f32,
) -> (
    BTreeMap<&'static str, Counts>,
    BTreeMap<&'static str, Counts>,
) {
    let mut tokens: BTreeMap<&'static str, Counts> = BTreeMap::new();
    let mut spans: BTreeMap<&'static str, Counts> = BTreeMap::new();
    for (case, pred) in cases.iter().zip(predicted) {
        let pred: Vec<&Entity> = pred.iter().filter(|e| e.score >= threshold).collect();
        let mut pos = 0;
        for word in case.text.split_whitespace() {
            let start = pos + case.text[pos..].find(word).unwrap_or(0);
            let end = start + word.len();
            pos = end;
            let overlaps = |s: usize, e: usize| s < end && start < e;
            let gold = case.gold.iter().find(|g| overlaps(g.1, g.2)).map(|g| g.0);
            let got = pred
                .iter()
                .find(|p| overlaps(p.start, p.end))
                .map(|p| p.kind);
            for kind in [EntityType::PersonName, EntityType::Address] {
                let c = tokens.entry(kind.as_str()).or_default();
                match (gold == Some(kind), got == Some(kind)) {
                    (true, true) => c.tp += 1,
                    (false, true) => c.fp += 1,
                    (true, false) => c.fn_ += 1,
                    _ => {}
                }
            }
        }
        for kind in [EntityType::PersonName, EntityType::Address] {
            let c = spans.entry(kind.as_str()).or_default();
            let g: Vec<(usize, usize)> = case
                .gold
                .iter()
                .filter(|g| g.0 == kind)
                .map(|g| (g.1, g.2))
                .collect();
            let p: Vec<(usize, usize)> = pred
                .iter()
                .filter(|p| p.kind == kind)
                .map(|p| (p.start, p.end))
                .collect();
            let hit = p.iter().filter(|x| g.contains(x)).count();
            c.tp += hit;
            c.fp += p.len() - hit;
            c.fn_ += g.len() - hit;
        }
    }
    (tokens, spans)
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Accuracy, speed and memory of the NER tier.
#[derive(clap::Parser)]
struct Args {
    /// Synthetic sentences to score.
    #[arg(default_value_t = 700)]
    sentences: usize,
    /// Print the first N sentences whose spans differ from the gold ones.
    #[arg(long, value_name = "N", default_value_t = 0)]
    show: usize,
    /// The confidence threshold to score at.
    #[arg(long, default_value_t = 0.85)]
    threshold: f32,
    /// Only print what the model finds in these texts.
    #[arg(long, num_args = 0.., allow_hyphen_values = true)]
    text: Option<Vec<String>>,
    /// The previous f32 candle path, to compare (needs `--features reference`).
    #[arg(long)]
    reference: bool,
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    let root = opc_models::cache_root().unwrap();
    if opc_models::RAMPART.locate(&root).is_err() {
        println!("fetching the model into {} …", root.display());
        opc_models::RAMPART.fetch(&root).unwrap();
    }
    let before = rss_mb();
    let started = Instant::now();
    // `--reference` (built with `--features reference`): the previous f32 candle path, to compare.
    #[cfg(feature = "reference")]
    let model = if args.reference {
        Rampart::load_reference(&opc_models::RAMPART.locate(&root).unwrap()).unwrap()
    } else {
        Rampart::load_cached().unwrap()
    };
    #[cfg(not(feature = "reference"))]
    let model = {
        assert!(
            !args.reference,
            "--reference needs the example built with `--features reference`"
        );
        Rampart::load_cached().unwrap()
    };
    println!(
        "loaded in {:.2}s; RSS {:.0} MB (before load {:.0} MB)",
        started.elapsed().as_secs_f64(),
        rss_mb(),
        before
    );

    if let Some(texts) = &args.text {
        for text in texts {
            for e in model.entities(text) {
                println!(
                    "{:<12} {:.3} {:?}",
                    e.kind.as_str(),
                    e.score,
                    &text[e.start..e.end]
                );
            }
        }
        return;
    }
    let (n, show, threshold) = (args.sentences, args.show, args.threshold);

    for (label, cases) in [
        ("synthetic (fake, seed 7)", corpus(n, 7)),
        ("presidio PERSON cases", presidio_person()),
    ] {
        if cases.is_empty() {
            continue;
        }
        let bytes: usize = cases.iter().map(|c| c.text.len()).sum();
        // One sentence at a time (a chat message), then in chunks of 256 (`opc privacy detect`).
        let started = Instant::now();
        let alone: Vec<Vec<Entity>> = cases.iter().map(|c| model.entities(&c.text)).collect();
        let secs = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let mut predicted: Vec<Vec<Entity>> = Vec::with_capacity(cases.len());
        for chunk in cases.chunks(256) {
            let texts: Vec<&str> = chunk.iter().map(|c| c.text.as_str()).collect();
            predicted.extend(model.entities_batch(&texts));
        }
        let batched_secs = started.elapsed().as_secs_f64();
        let differ = alone
            .iter()
            .zip(&predicted)
            .filter(|(a, b)| {
                a.len() != b.len()
                    || a.iter().zip(b.iter()).any(|(x, y)| {
                        (x.kind, x.start, x.end) != (y.kind, y.start, y.end)
                            || (x.score - y.score).abs() > 1e-3
                    })
            })
            .count();
        println!(
            "\n== {label}: {} sentences, {} bytes; RSS {:.0} MB\n  NER one at a time {:.1} sentences/s, \
             {:.3} MB/s; in chunks of 256 {:.1} sentences/s, {:.3} MB/s; {differ} sentences differ",
            cases.len(),
            bytes,
            rss_mb(),
            cases.len() as f64 / secs,
            bytes as f64 / secs / 1e6,
            cases.len() as f64 / batched_secs,
            bytes as f64 / batched_secs / 1e6,
        );
        let (tokens, spans) = score(&cases, &predicted, threshold);
        let mut all = Counts::default();
        for (kind, c) in &tokens {
            println!("{}", c.report(&format!("token {kind}")));
            all.tp += c.tp;
            all.fp += c.fp;
            all.fn_ += c.fn_;
        }
        println!("{}", all.report("token PERSON+ADDRESS"));
        for (kind, c) in &spans {
            println!("{}", c.report(&format!("span  {kind}")));
        }
        let mut shown = 0;
        for (case, pred) in cases.iter().zip(&predicted) {
            if shown >= show {
                break;
            }
            let mut g: Vec<(EntityType, &str)> = case
                .gold
                .iter()
                .map(|g| (g.0, &case.text[g.1..g.2]))
                .collect();
            let mut p: Vec<(EntityType, &str)> = pred
                .iter()
                .filter(|e| e.score >= threshold)
                .map(|e| (e.kind, &case.text[e.start..e.end]))
                .collect();
            g.sort();
            p.sort();
            if g != p {
                shown += 1;
                println!(
                    "- {:?}\n  gold {:?}\n  got  {:?}",
                    case.text,
                    g,
                    pred.iter()
                        .map(|e| (e.kind, &case.text[e.start..e.end], e.score))
                        .collect::<Vec<_>>()
                );
            }
        }
    }
}
