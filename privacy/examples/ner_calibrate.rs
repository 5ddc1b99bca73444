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
//!   prints token precision, recall and F2 over all types: the curve in docs/privacy.md.
//! - `probe` prints each word's best piece and entity probability, the raw spans and the final ones.
//! - `gen --seed N --count N` writes varied labelled lines of our own (names of many cultures, cues,
//!   chat speakers, lower case, places, street addresses, negatives), for fitting before the shared
//!   generated corpus exists.
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
        // Below `ENTITY_MIN` no token counts without a cue, so every span's mean is at least that:
        // the sweep starts there.
        for step in 10..=19 {
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

/// The NER types' false positives and misses (span level) on the first `n` cases.
fn errors(path: &str, n: usize) {
    let model = Rampart::load_cached().expect("model");
    let cases = cases(path);
    let cases = &cases[..n.min(cases.len())];
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    let slot = NerSlot::new();
    slot.set(model.shared());
    let detector = Detector::new(DetectOptions::default(), slot);
    for (case, found) in cases.iter().zip(detector.detect_batch(&texts)) {
        let text = &case.text;
        for f in found.iter().filter(|f| NER_TYPES.contains(&f.kind)) {
            if !case
                .gold
                .iter()
                .any(|g| g.kind == f.kind && g.start < f.end && f.start < g.end)
            {
                println!(
                    "FP {} {:?} {:.2} | {:?}",
                    f.kind,
                    &text[f.start..f.end],
                    f.score,
                    text.replace('\n', " / ")
                );
            }
        }
        for g in case.gold.iter().filter(|g| NER_TYPES.contains(&g.kind)) {
            if !found
                .iter()
                .any(|f| g.kind == f.kind && g.start < f.end && f.start < g.end)
            {
                println!(
                    "FN {} {:?} | {:?}",
                    g.kind,
                    &text[g.start..g.end],
                    text.replace('\n', " / ")
                );
            } else if let Some(f) = found.iter().find(|f| {
                g.kind == f.kind
                    && g.start < f.end
                    && f.start < g.end
                    && (g.start, g.end) != (f.start, f.end)
            }) {
                // Found, but with other bounds: the tokens on either side are misses or extras.
                println!(
                    "BOUND {} gold {:?} found {:?}",
                    g.kind,
                    &text[g.start..g.end],
                    &text[f.start..f.end]
                );
            }
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
        for e in model.decode(text, &tokens) {
            println!(
                "  span {} {:?} {:.3}",
                e.kind,
                &text[e.start..e.end],
                e.score
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// A small varied generator for fitting before the shared corpus lands (`gen --seed N --count N`).

use fake::Fake;
use fake::faker::address::raw as addr;
use fake::faker::name::raw as name;
use fake::locales::{DE_DE, EN, FR_FR, IT_IT, NL_NL, PT_BR, TR_TR};
use fake::rand::rngs::StdRng;
use fake::rand::{RngExt, SeedableRng, seq::IndexedRandom};

const NORDIC: &[&str] = &[
    "Søren Jørgensen",
    "Ingrid Lindqvist",
    "Åsa Björklund",
    "Bjørn Haugen",
    "Sigrún Guðmundsdóttir",
    "Eero Mäkelä",
    "Kirsi Hämäläinen",
    "Magnus Strand",
];
const SLAVIC: &[&str] = &[
    "Tomáš Dvořák",
    "Agnieszka Wójcik",
    "Paweł Nowak",
    "Milena Petrović",
    "Dmitri Ivanov",
    "Olga Smirnova",
    "Jiří Novák",
    "Katarzyna Zielińska",
];
const HUNGARIAN: &[&str] = &[
    "Zoltán Kovács",
    "Erzsébet Szabó",
    "Gábor Tóth",
    "Ágnes Horváth",
];
const JAPANESE: &[&str] = &[
    "Hiroshi Tanaka",
    "Yuki Sato",
    "Kenji Watanabe",
    "Aiko Nakamura",
    "Takeshi Yamamoto",
];
const ARABIC: &[&str] = &[
    "Ahmed Al-Farsi",
    "Fatima Haddad",
    "Omar Khalil",
    "Layla Mansour",
    "Youssef El Amrani",
];
const INDIAN: &[&str] = &[
    "Priya Ramanathan",
    "Arjun Mehta",
    "Sunita Iyer",
    "Vikram Chatterjee",
    "Ananya Reddy",
    "Rahul Deshpande",
];
const VIETNAMESE: &[&str] = &[
    "Nguyễn Thị Minh Khai",
    "Trần Văn Nam",
    "Lê Thu Hà",
    "Phạm Đức Anh",
];
const CHINESE: &[&str] = &[
    "Wang Xiaoming",
    "Li Na",
    "Zhang Wei",
    "Chen Jing",
    "王小明",
    "李娜",
    "张伟",
];
const CITIES: &[&str] = &[
    "Tromsø",
    "Reykjavík",
    "Bergen",
    "Porto",
    "Kraków",
    "Leeds",
    "Austin",
    "Osaka",
    "Pune",
    "Ghent",
    "Graz",
    "Halifax",
    "Tampere",
    "Malmö",
    "Lyon",
    "Denver",
];
const COUNTRIES: &[&str] = &[
    "Norway", "Iceland", "Portugal", "Japan", "Canada", "Kenya", "Chile", "Poland", "Vietnam",
    "Turkey",
];

fn person(rng: &mut StdRng) -> String {
    match rng.random_range(0..14) {
        0..=2 => format!(
            "{} {}",
            name::FirstName(EN).fake_with_rng::<String, _>(rng),
            name::LastName(EN).fake_with_rng::<String, _>(rng)
        ),
        3 => format!(
            "{} {}",
            name::FirstName(DE_DE).fake_with_rng::<String, _>(rng),
            name::LastName(DE_DE).fake_with_rng::<String, _>(rng)
        ),
        4 => format!(
            "{} {}",
            name::FirstName(FR_FR).fake_with_rng::<String, _>(rng),
            name::LastName(FR_FR).fake_with_rng::<String, _>(rng)
        ),
        5 => format!(
            "{} {}",
            name::FirstName(TR_TR).fake_with_rng::<String, _>(rng),
            name::LastName(TR_TR).fake_with_rng::<String, _>(rng)
        ),
        6 => NORDIC.choose(rng).unwrap().to_string(),
        7 => SLAVIC.choose(rng).unwrap().to_string(),
        8 => HUNGARIAN.choose(rng).unwrap().to_string(),
        9 => JAPANESE.choose(rng).unwrap().to_string(),
        10 => ARABIC.choose(rng).unwrap().to_string(),
        11 => INDIAN.choose(rng).unwrap().to_string(),
        12 => VIETNAMESE.choose(rng).unwrap().to_string(),
        _ => match rng.random_range(0..3) {
            0 => CHINESE.choose(rng).unwrap().to_string(),
            1 => format!(
                "{} {}",
                name::FirstName(IT_IT).fake_with_rng::<String, _>(rng),
                name::LastName(IT_IT).fake_with_rng::<String, _>(rng)
            ),
            _ => format!(
                "{} {}",
                name::FirstName(NL_NL).fake_with_rng::<String, _>(rng),
                name::LastName(PT_BR).fake_with_rng::<String, _>(rng)
            ),
        },
    }
}

struct Line {
    text: String,
    ents: Vec<(&'static str, usize, usize)>,
}

impl Line {
    fn lit(&mut self, s: &str) -> &mut Self {
        self.text.push_str(s);
        self
    }
    fn ent(&mut self, kind: &'static str, s: &str) -> &mut Self {
        let start = self.text.len();
        self.text.push_str(s);
        self.ents.push((kind, start, self.text.len()));
        self
    }
}

fn gen_line(rng: &mut StdRng) -> Line {
    let mut l = Line {
        text: String::new(),
        ents: Vec::new(),
    };
    let full = person(rng);
    let first = full.split_whitespace().next().unwrap_or("Ann").to_string();
    let last = full.split_whitespace().last().unwrap_or("Lee").to_string();
    let city = CITIES.choose(rng).unwrap().to_string();
    let country = COUNTRIES.choose(rng).unwrap().to_string();
    let street = format!(
        "{} {}",
        addr::BuildingNumber(EN).fake_with_rng::<String, _>(rng),
        addr::StreetName(EN).fake_with_rng::<String, _>(rng)
    );
    match rng.random_range(0..22) {
        0 => {
            l.lit("Please forward the contract to ")
                .ent("PERSON_NAME", &full)
                .lit(" before Friday.");
        }
        1 => {
            l.ent("PERSON_NAME", &full)
                .lit(" will present the results at the offsite.");
        }
        2 => {
            l.lit("The draft was reviewed by ")
                .ent("PERSON_NAME", &last)
                .lit(" yesterday.");
        }
        3 => {
            l.lit("thanks, ").ent("PERSON_NAME", &first);
        }
        4 => {
            l.ent("PERSON_NAME", &first.to_lowercase())
                .lit(": \"are you coming tonight?\"");
        }
        5 => {
            l.lit("hey ")
                .ent("PERSON_NAME", &full.to_lowercase())
                .lit(", can you call me back");
        }
        6 => {
            l.lit("Dr. ")
                .ent("PERSON_NAME", &last)
                .lit(" confirmed the appointment.");
        }
        7 => {
            let initial = char::from(b'A' + rng.random_range(0..26u8));
            let mid = format!("{first} {initial}. {last}");
            l.lit("Signed: ")
                .ent("PERSON_NAME", &mid)
                .lit(", Head of Sales");
        }
        8 => {
            l.lit("She lives in ")
                .ent("LOCATION", &city)
                .lit(" with her partner.");
        }
        9 => {
            l.lit("He moved to ")
                .ent("LOCATION", &country)
                .lit(" last spring.");
        }
        10 => {
            l.ent("PERSON_NAME", &full)
                .lit(" moved from ")
                .ent("LOCATION", &city)
                .lit(" to ")
                .ent("LOCATION", &country)
                .lit(".");
        }
        11 => {
            l.lit("Ship it to ").ent("ADDRESS", &street).lit(" please.");
        }
        12 => {
            l.lit("My new address is ")
                .ent("ADDRESS", &street)
                .lit(" and I start Monday.");
        }
        13 => {
            l.lit("cc ")
                .ent("PERSON_NAME", &first)
                .lit(" for visibility");
        }
        14 => {
            l.lit("I met ")
                .ent("PERSON_NAME", &full)
                .lit(" and ")
                .ent("PERSON_NAME", &person(rng))
                .lit(" at the conference.");
        }
        15 => {
            l.lit("Mr. ")
                .ent("PERSON_NAME", &last)
                .lit(" asked about the refund.");
        }
        // Negatives: capitalised words that are not personal data.
        16 => {
            l.lit("The Monday release of Chrome broke the Safari build on the Mac runners.");
        }
        17 => {
            l.lit("Our Q3 roadmap covers Kubernetes, Terraform and the new Billing API.");
        }
        18 => {
            l.lit("Order 4471 shipped on March 3 for 129.99 EUR, version 2.4.1.");
        }
        19 => {
            l.lit("The Premier League match ended late, so the Finance team met on Tuesday.");
        }
        20 => {
            l.lit("Notes: the budget review is moved to next week.");
        }
        _ => {
            l.lit("Meeting notes from ")
                .ent("PERSON_NAME", &full)
                .lit(": the vendor in ")
                .ent("LOCATION", &city)
                .lit(" is late.");
        }
    }
    l
}

fn generate(seed: u64, count: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..count {
        let l = gen_line(&mut rng);
        let ents: Vec<serde_json::Value> = l
            .ents
            .iter()
            .map(|&(t, s, e)| {
                serde_json::json!({
                    "type": t,
                    "start": l.text[..s].chars().count(),
                    "end": l.text[..e].chars().count(),
                    "start_byte": s,
                    "end_byte": e,
                })
            })
            .collect();
        println!("{}", serde_json::json!({"text": l.text, "entities": ents}));
    }
}

/// What to do.
#[derive(clap::Parser)]
enum Command {
    /// The best raw threshold per NER type on the cases: the knees for `calibration.rs` (tuning
    /// split only).
    Fit {
        /// Labelled cases, one JSON line each.
        file: String,
    },
    /// Token precision, recall and F2 of the whole detector at thresholds 0.3 to 0.95.
    Sweep {
        /// Labelled cases, one JSON line each.
        file: String,
    },
    /// Each word's best piece and entity probability, the raw spans and the final ones.
    Probe {
        /// The texts to read.
        texts: Vec<String>,
    },
    /// The NER spans the whole detector gets wrong in the first cases of a file.
    Errors {
        /// Labelled cases, one JSON line each.
        file: String,
        /// How many cases to check, from the first.
        #[arg(default_value_t = 300)]
        n: usize,
    },
    /// Varied labelled lines of our own, as JSON lines.
    Gen {
        /// The generator's seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many lines.
        #[arg(long, default_value_t = 1000)]
        count: usize,
    },
}

fn main() {
    match <Command as clap::Parser>::parse() {
        Command::Fit { file } => fit(&file),
        Command::Sweep { file } => sweep(&file),
        Command::Probe { texts } => probe(&texts),
        Command::Errors { file, n } => errors(&file, n),
        Command::Gen { seed, count } => generate(seed, count),
    }
}
