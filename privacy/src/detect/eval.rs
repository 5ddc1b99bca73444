//! Evaluation on labelled cases: per-type precision, recall, F1 and F2, at token level (whitespace
//! tokens) and at span level (exact type and offsets), plus false positives on negative cases, and the
//! same scores over a range of confidence thresholds ([`sweep`]). `opc privacy eval`, the shared-data
//! tests and the benchmarks use it.
//!
//! Scores are kept by type *name*, not by [`EntityType`]: a labelled type this build cannot detect
//! (`LOCATION` before the detector has it, see [`PLANNED_TYPES`]) is scored too, all misses, and named
//! as undetected in the report, rather than skipped or fatal.
//!
//! A sweep runs the detector once at the lowest threshold and filters by score for the others. That
//! equals running it at each threshold because the threshold is the last filter before overlap
//! resolution, and resolution keeps the higher-scoring span first: what survives at a higher threshold
//! is exactly what survived at the lowest one with a score at or above it (a test checks this).
//!
//! Case shapes (one JSON object per line):
//! - Presidio cases (`../shared/data/pii/presidio_recognizer_cases_core.jsonl`) and the synthetic
//!   corpus: `{text, entities:[{type,start,end}]}` with code-point offsets (`start_byte`/`end_byte` are
//!   used when present), optional `expected_count` (0 = negative), `spans_complete` (false = only a
//!   count was asserted: the case is skipped), `recognizer_types` (the types the case labels: only
//!   predictions of those types are scored, since other data in the text is not labelled). Presidio's
//!   type names are mapped (`EMAIL_ADDRESS` → `EMAIL`, `PHONE_NUMBER` → `PHONE`, `IBAN_CODE` → `IBAN`,
//!   `US_SSN` → `SSN`, `PERSON` → `PERSON_NAME`, `STREET_ADDRESS` → `ADDRESS`); cases of types we do not
//!   detect (`CRYPTO`, `MAC_ADDRESS`, `UK_NINO`, …) are skipped and counted.
//! - Secrets cases (`secrets_cases.jsonl`): `{text, label: positive|negative, rule}`. The labels say
//!   whether a credential is in the text, not where, so these are scored per case as `API_KEY`: a
//!   positive with any `API_KEY` span is a true positive, a negative with one a false positive.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::Detector;
use crate::{Entity, EntityType};

/// One labelled case.
#[derive(Clone, Debug)]
pub struct Case {
    /// The text.
    pub text: String,
    /// Gold spans, byte offsets.
    pub gold: Vec<Entity>,
    /// Gold spans of types this build does not detect (scored as misses), byte offsets.
    pub unknown: Vec<Unknown>,
    /// The types the case labels (predictions of other types are not scored); `None` = all.
    pub scope: Option<Vec<EntityType>>,
    /// A negative case (nothing of its types should be found).
    pub negative: bool,
    /// For secrets cases: scored per case as `API_KEY`, not by span.
    pub case_level: bool,
    /// The secrets rule or the case id, for reports.
    pub id: String,
}

/// Why a line is not a case.
#[derive(Debug)]
pub enum Skip {
    /// Only a count was asserted (`spans_complete: false`).
    Incomplete,
    /// A type we do not detect.
    Unsupported(String),
}

/// Type names of labelled data (our generated corpus) that this build's detector may not know yet:
/// gold spans of these are scored (as misses) and reported, not skipped.
pub const PLANNED_TYPES: &[&str] = &["LOCATION"];

/// Our type for a type name in the data (the config's names first, then Presidio's).
pub fn map_type(name: &str) -> Option<EntityType> {
    if let Some(t) = EntityType::parse(name) {
        return Some(t);
    }
    Some(match name {
        "EMAIL_ADDRESS" => EntityType::Email,
        "PHONE_NUMBER" => EntityType::Phone,
        "IBAN_CODE" => EntityType::Iban,
        "US_SSN" => EntityType::Ssn,
        "PERSON" | "PER" => EntityType::PersonName,
        "STREET_ADDRESS" => EntityType::Address,
        _ => return None,
    })
}

/// A gold span of a type this build does not detect (one of [`PLANNED_TYPES`]), byte offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    /// The type's name in the data.
    pub kind: String,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

/// Byte offset of code point `cp` in `text` (clamped to the end).
pub fn byte_offset(text: &str, cp: usize) -> usize {
    text.char_indices().nth(cp).map_or(text.len(), |(b, _)| b)
}

/// Code-point offset of byte `b` in `text`.
pub fn cp_offset(text: &str, b: usize) -> usize {
    text[..b.min(text.len())].chars().count()
}

/// Parse one JSON line into a case.
pub fn parse_case(line: &str) -> Result<Result<Case, Skip>, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let text = v
        .get("text")
        .and_then(Value::as_str)
        .ok_or("no \"text\" string")?
        .to_string();
    let id = v
        .get("rule")
        .or_else(|| v.get("id"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(label) = v.get("label").and_then(Value::as_str) {
        return Ok(Ok(Case {
            negative: label != "positive",
            gold: Vec::new(),
            unknown: Vec::new(),
            scope: Some(vec![EntityType::ApiKey]),
            case_level: true,
            text,
            id,
        }));
    }
    if v.get("spans_complete").and_then(Value::as_bool) == Some(false) {
        return Ok(Err(Skip::Incomplete));
    }
    let mut scope = None;
    if let Some(types) = v.get("recognizer_types").and_then(Value::as_array) {
        let mut mapped = Vec::new();
        for t in types.iter().filter_map(Value::as_str) {
            match map_type(t) {
                Some(m) => mapped.push(m),
                None => return Ok(Err(Skip::Unsupported(t.to_string()))),
            }
        }
        scope = Some(mapped);
    }
    let mut gold = Vec::new();
    let mut unknown = Vec::new();
    for e in v
        .get("entities")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = e
            .get("type")
            .and_then(Value::as_str)
            .ok_or("an entity without \"type\"")?;
        let kind = map_type(name);
        if kind.is_none() && !PLANNED_TYPES.contains(&name) {
            return Ok(Err(Skip::Unsupported(name.to_string())));
        }
        let num = |k: &str| e.get(k).and_then(Value::as_u64).map(|n| n as usize);
        let (start, end) = match (num("start_byte"), num("end_byte")) {
            (Some(s), Some(e)) => (s, e),
            _ => {
                let s = num("start").ok_or("an entity without \"start\"")?;
                let e = num("end").ok_or("an entity without \"end\"")?;
                let chars = text.chars().count();
                if s > e || e > chars {
                    return Err(format!(
                        "entity {name} {s}..{e} does not fit the text ({chars} code points)"
                    ));
                }
                (byte_offset(&text, s), byte_offset(&text, e))
            }
        };
        if start > end
            || end > text.len()
            || !text.is_char_boundary(start)
            || !text.is_char_boundary(end)
        {
            return Err(format!(
                "entity {name} bytes {start}..{end} do not fit the text ({} bytes)",
                text.len()
            ));
        }
        match kind {
            Some(kind) => gold.push(Entity {
                kind,
                start,
                end,
                score: 1.0,
            }),
            None => unknown.push(Unknown {
                kind: name.to_string(),
                start,
                end,
            }),
        }
    }
    let negative = v.get("expected_count").and_then(Value::as_u64) == Some(0)
        || (gold.is_empty() && unknown.is_empty());
    Ok(Ok(Case {
        text,
        gold,
        unknown,
        scope,
        negative,
        case_level: false,
        id,
    }))
}

/// True/false positives and false negatives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// True positives.
    pub tp: u64,
    /// False positives.
    pub fp: u64,
    /// False negatives.
    pub fn_: u64,
}

impl Counts {
    /// Precision (1 when nothing was predicted).
    pub fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fp) as f64
        }
    }
    /// Recall (1 when nothing was expected).
    pub fn recall(&self) -> f64 {
        if self.tp + self.fn_ == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fn_) as f64
        }
    }
    /// F-beta.
    pub fn f(&self, beta: f64) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        let b2 = beta * beta;
        if p + r == 0.0 {
            0.0
        } else {
            (1.0 + b2) * p * r / (b2 * p + r)
        }
    }
    /// Add another count.
    pub fn add(&mut self, o: Counts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }
    /// Gold items (true positives and misses).
    pub fn gold(&self) -> u64 {
        self.tp + self.fn_
    }
}

/// The result of an evaluation. Counts are keyed by type name (the config's, plus [`PLANNED_TYPES`]).
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Token-level counts by type.
    pub tokens: BTreeMap<String, Counts>,
    /// Span-level counts by type.
    pub spans: BTreeMap<String, Counts>,
    /// Case-level `API_KEY` counts (secrets shape).
    pub secrets: Counts,
    /// Negative cases.
    pub negatives: u64,
    /// Negative cases where something of the case's types was found, by type found.
    pub negative_hits: BTreeMap<String, u64>,
    /// Negative cases with any false positive.
    pub negatives_hit: u64,
    /// Cases scored.
    pub cases: u64,
    /// Lines skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Labelled types this build does not detect (all their tokens count as misses).
    pub undetected: BTreeSet<String>,
}

fn token_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    out
}

fn label(spans: &[Entity], (s, e): (usize, usize)) -> Option<&'static str> {
    spans
        .iter()
        .find(|x| x.start < e && s < x.end)
        .map(|x| x.kind.as_str())
}

/// The gold label of a token: a detected type's, else a planned type's.
fn gold_label(case: &Case, tok: (usize, usize)) -> Option<&str> {
    label(&case.gold, tok).or_else(|| {
        case.unknown
            .iter()
            .find(|u| u.start < tok.1 && tok.0 < u.end)
            .map(|u| u.kind.as_str())
    })
}

/// Rows in the config's order of types, then other names alphabetically.
fn row_order(name: &str) -> (usize, &str) {
    let at = EntityType::ALL
        .iter()
        .position(|t| t.as_str() == name)
        .unwrap_or(EntityType::ALL.len());
    (at, name)
}

impl Report {
    /// Score one case given the detector's output for it.
    pub fn add(&mut self, case: &Case, found: &[Entity]) {
        self.cases += 1;
        let found: Vec<Entity> = found
            .iter()
            .filter(|e| case.scope.as_ref().is_none_or(|s| s.contains(&e.kind)))
            .cloned()
            .collect();
        if case.negative {
            self.negatives += 1;
            let mut kinds: Vec<&str> = found.iter().map(|e| e.kind.as_str()).collect();
            kinds.sort();
            kinds.dedup();
            if !kinds.is_empty() {
                self.negatives_hit += 1;
            }
            for k in kinds {
                *self.negative_hits.entry(k.to_string()).or_default() += 1;
            }
        }
        if case.case_level {
            let hit = !found.is_empty();
            match (case.negative, hit) {
                (false, true) => self.secrets.tp += 1,
                (false, false) => self.secrets.fn_ += 1,
                (true, true) => self.secrets.fp += 1,
                (true, false) => {}
            }
            return;
        }
        for u in &case.unknown {
            self.undetected.insert(u.kind.clone());
        }
        for tok in token_ranges(&case.text) {
            let g = gold_label(case, tok);
            let p = label(&found, tok);
            if let Some(g) = g {
                let c = self.tokens.entry(g.to_string()).or_default();
                if p == Some(g) { c.tp += 1 } else { c.fn_ += 1 }
            }
            if let Some(p) = p
                && g != Some(p)
            {
                self.tokens.entry(p.to_string()).or_default().fp += 1;
            }
        }
        for g in &case.gold {
            let c = self.spans.entry(g.kind.as_str().to_string()).or_default();
            if found
                .iter()
                .any(|f| f.kind == g.kind && f.start == g.start && f.end == g.end)
            {
                c.tp += 1;
            } else {
                c.fn_ += 1;
            }
        }
        for u in &case.unknown {
            self.spans.entry(u.kind.clone()).or_default().fn_ += 1;
        }
        for f in &found {
            if !case
                .gold
                .iter()
                .any(|g| f.kind == g.kind && f.start == g.start && f.end == g.end)
            {
                self.spans
                    .entry(f.kind.as_str().to_string())
                    .or_default()
                    .fp += 1;
            }
        }
    }

    /// Count a skipped line.
    pub fn skip(&mut self, why: &Skip) {
        let key = match why {
            Skip::Incomplete => "spans not complete".to_string(),
            Skip::Unsupported(t) => format!("type {t} not detected"),
        };
        *self.skipped.entry(key).or_default() += 1;
    }

    /// Token-level counts over the given types together (micro average).
    pub fn tokens_total(&self, types: &[EntityType]) -> Counts {
        let mut c = Counts::default();
        for t in types {
            if let Some(x) = self.tokens.get(t.as_str()) {
                c.add(*x);
            }
        }
        c
    }

    /// Token-level counts over every type (micro average).
    pub fn micro(&self) -> Counts {
        let mut c = Counts::default();
        for x in self.tokens.values() {
            c.add(*x);
        }
        c
    }

    /// The report as JSON: per type `{tp, fp, fn, precision, recall, f1, f2}` at token and span level,
    /// the micro average, negatives and skips.
    pub fn to_json(&self) -> Value {
        let table = |map: &BTreeMap<String, Counts>| -> Value {
            map.iter()
                .map(|(k, c)| (k.clone(), counts_json(c)))
                .collect::<serde_json::Map<String, Value>>()
                .into()
        };
        serde_json::json!({
            "cases": self.cases,
            "tokens": table(&self.tokens),
            "spans": table(&self.spans),
            "micro": counts_json(&self.micro()),
            "secrets": counts_json(&self.secrets),
            "negatives": self.negatives,
            "negatives_with_false_positive": self.negatives_hit,
            "negative_hits": self.negative_hits,
            "skipped": self.skipped,
            "undetected": self.undetected,
        })
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn counts_json(c: &Counts) -> Value {
    serde_json::json!({
        "tp": c.tp, "fp": c.fp, "fn": c.fn_,
        "precision": round3(c.precision()), "recall": round3(c.recall()),
        "f1": round3(c.f(1.0)), "f2": round3(c.f(2.0)),
    })
}

/// Score `cases` given the detector's output for each (`found[i]` for `cases[i]`), keeping only spans
/// scoring at least `threshold` (see the module docs for why this equals detecting at `threshold`).
pub fn score(cases: &[Case], found: &[Vec<Entity>], threshold: f32) -> Report {
    let mut report = Report::default();
    for (case, found) in cases.iter().zip(found) {
        let kept: Vec<Entity> = found
            .iter()
            .filter(|e| e.score >= threshold)
            .cloned()
            .collect();
        report.add(case, &kept);
    }
    report
}

/// Run `detector` over `cases` and score them.
pub fn evaluate<'a>(detector: &Detector, cases: impl IntoIterator<Item = &'a Case>) -> Report {
    let mut report = Report::default();
    for case in cases {
        let found = detector.detect(&case.text);
        report.add(case, &found);
    }
    report
}

/// One point of a threshold sweep.
#[derive(Clone, Debug)]
pub struct SweepPoint {
    /// The confidence threshold.
    pub threshold: f32,
    /// The scores at it.
    pub report: Report,
}

/// The default sweep: 0.30 to 0.95 in steps of 0.05.
pub fn default_thresholds() -> Vec<f32> {
    (0..14).map(|i| 0.30 + 0.05 * i as f32).collect()
}

/// Parse a list of thresholds: `0.3,0.5,0.7` or `FROM:TO:STEP` (`0.3:0.95:0.05`); each in 0..=1.
pub fn parse_thresholds(spec: &str) -> Result<Vec<f32>, String> {
    let num = |s: &str| -> Result<f32, String> {
        let v: f32 = s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a number"))?;
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(format!("threshold {v} is outside 0..1"))
        }
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let mut out = match parts.as_slice() {
        [from, to, step] => {
            let (from, to, step) = (num(from)?, num(to)?, num(step)?);
            if step <= 0.0 || to < from {
                return Err(format!(
                    "`{spec}`: expected FROM:TO:STEP with FROM <= TO and STEP > 0"
                ));
            }
            let n = ((to - from) / step + 1e-4).floor() as usize;
            (0..=n).map(|i| from + step * i as f32).collect()
        }
        [list] => list
            .split(',')
            .map(num)
            .collect::<Result<Vec<f32>, String>>()?,
        _ => return Err(format!("`{spec}`: expected a comma list or FROM:TO:STEP")),
    };
    out.sort_by(f32::total_cmp);
    out.dedup();
    if out.is_empty() {
        return Err("no thresholds given".into());
    }
    Ok(out)
}

/// Score `cases` at each threshold, from one detection run at or below the lowest of them.
pub fn sweep(cases: &[Case], found: &[Vec<Entity>], thresholds: &[f32]) -> Vec<SweepPoint> {
    thresholds
        .iter()
        .map(|&threshold| SweepPoint {
            threshold,
            report: score(cases, found, threshold),
        })
        .collect()
}

/// A sweep as a Markdown table: token-level micro precision, recall and F2, then F2 per type; the
/// row with the best micro F2 is marked.
pub fn sweep_table(points: &[SweepPoint]) -> String {
    let mut types: Vec<String> = points
        .iter()
        .flat_map(|p| p.report.tokens.iter())
        .filter(|(_, c)| c.gold() > 0)
        .map(|(k, _)| k.clone())
        .collect();
    types.sort_by(|a, b| row_order(a).cmp(&row_order(b)));
    types.dedup();
    let best = points
        .iter()
        .map(|p| p.report.micro().f(2.0))
        .fold(f64::MIN, f64::max);
    let mut out = String::from("| threshold | P | R | F2 |");
    for t in &types {
        out.push_str(&format!(" {t} |"));
    }
    out.push_str("\n|---:|---:|---:|---:|");
    for _ in &types {
        out.push_str("---:|");
    }
    for p in points {
        let m = p.report.micro();
        let f2 = m.f(2.0);
        let mark = if f2 == best { " ←" } else { "" };
        out.push_str(&format!(
            "\n| {:.2} | {:.3} | {:.3} | {:.3}{mark} |",
            p.threshold,
            m.precision(),
            m.recall(),
            f2
        ));
        for t in &types {
            let c = p.report.tokens.get(t).copied().unwrap_or_default();
            out.push_str(&format!(" {:.3} |", c.f(2.0)));
        }
    }
    out.push('\n');
    out
}

fn table(
    f: &mut fmt::Formatter<'_>,
    map: &BTreeMap<String, Counts>,
    undetected: &BTreeSet<String>,
) -> fmt::Result {
    writeln!(f, "| type | gold | tp | fp | fn | P | R | F1 | F2 |")?;
    writeln!(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    let mut rows: Vec<(&String, &Counts)> = map.iter().collect();
    rows.sort_by(|a, b| row_order(a.0).cmp(&row_order(b.0)));
    let mut all = Counts::default();
    let row = |f: &mut fmt::Formatter<'_>, name: &str, c: &Counts| {
        writeln!(
            f,
            "| {name} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            c.gold(),
            c.tp,
            c.fp,
            c.fn_,
            c.precision(),
            c.recall(),
            c.f(1.0),
            c.f(2.0)
        )
    };
    for (t, c) in rows {
        let name = if undetected.contains(t) {
            format!("{t} (not detected by this build)")
        } else {
            t.clone()
        };
        row(f, &name, c)?;
        all.add(*c);
    }
    row(f, "all (micro)", &all)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} cases scored", self.cases)?;
        for (what, map) in [
            ("token level (whitespace tokens)", &self.tokens),
            ("span level (exact type and offsets)", &self.spans),
        ] {
            if map.is_empty() {
                continue;
            }
            writeln!(f, "\n{what}:\n")?;
            table(f, map, &self.undetected)?;
        }
        if !self.tokens.is_empty() {
            let m = self.micro();
            writeln!(
                f,
                "\nmicro token F2 {:.3} (P {:.3}, R {:.3})",
                m.f(2.0),
                m.precision(),
                m.recall()
            )?;
        }
        if self.secrets.tp + self.secrets.fp + self.secrets.fn_ > 0 {
            let c = &self.secrets;
            writeln!(
                f,
                "secrets cases (per case, as API_KEY): tp {} fp {} fn {}  P {:.3} R {:.3} F2 {:.3}",
                c.tp,
                c.fp,
                c.fn_,
                c.precision(),
                c.recall(),
                c.f(2.0)
            )?;
        }
        write!(
            f,
            "false positives on negatives: {} of {} negative cases",
            self.negatives_hit, self.negatives
        )?;
        if !self.negative_hits.is_empty() {
            let by: Vec<String> = self
                .negative_hits
                .iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect();
            write!(f, " ({})", by.join(", "))?;
        }
        writeln!(f)?;
        for (why, n) in &self.skipped {
            writeln!(f, "skipped: {n} ({why})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{DetectOptions, NerSlot};

    #[test]
    fn scores_tokens_spans_and_negatives() {
        let d = Detector::new(DetectOptions::default(), NerSlot::new());
        let lines = [
            r#"{"text":"mail ann@example.com now","entities":[{"type":"EMAIL_ADDRESS","start":5,"end":20}]}"#,
            r#"{"text":"card 4012-8888-8888-1882","entities":[],"expected_count":0,"recognizer_types":["CREDIT_CARD"]}"#,
            r#"{"text":"ß ann@example.com","entities":[{"type":"EMAIL","start":2,"end":17}]}"#,
            r#"{"text":"x","label":"negative","rule":"r"}"#,
            r#"{"text":"0x12","entities":[],"expected_count":0,"recognizer_types":["CRYPTO"]}"#,
        ];
        let mut report = Report::default();
        for l in lines {
            match parse_case(l).expect("parses") {
                Ok(case) => report.add(&case, &d.detect(&case.text)),
                Err(skip) => report.skip(&skip),
            }
        }
        let email = report.spans["EMAIL"];
        assert_eq!((email.tp, email.fp, email.fn_), (2, 0, 0));
        assert_eq!(report.tokens["EMAIL"].tp, 2);
        assert_eq!(report.negatives, 2);
        assert!(report.negative_hits.is_empty());
        assert_eq!(report.skipped.values().sum::<u64>(), 1);
        assert!(report.to_string().contains("EMAIL"));
    }

    #[test]
    fn a_type_the_detector_does_not_know_is_scored_as_misses() {
        // `LOCATION` may or may not be a detected type in this build; either way it is scored.
        let line = r#"{"text":"she lives in Tromsø now","entities":[{"type":"LOCATION","start":13,"end":19}]}"#;
        let case = parse_case(line).expect("parses").expect("not skipped");
        assert!(!case.negative);
        let mut report = Report::default();
        report.add(&case, &[]);
        assert_eq!(report.tokens["LOCATION"].fn_, 1);
        assert_eq!(report.spans["LOCATION"].fn_, 1);
        if EntityType::parse("LOCATION").is_none() {
            assert!(report.undetected.contains("LOCATION"));
            assert!(
                report
                    .to_string()
                    .contains("LOCATION (not detected by this build)")
            );
        }
        // Offsets past the text are an error naming the entity, not a panic.
        let bad = r#"{"text":"abc","entities":[{"type":"LOCATION","start":1,"end":9}]}"#;
        let err = parse_case(bad).expect_err("does not fit");
        assert!(err.contains("LOCATION"), "{err}");
        // Types that are neither ours nor planned are skipped, as before.
        let other = r#"{"text":"0x12","entities":[{"type":"CRYPTO","start":0,"end":4}]}"#;
        assert!(matches!(parse_case(other), Ok(Err(Skip::Unsupported(_)))));
    }

    #[test]
    fn thresholds_parse_as_lists_and_ranges() {
        assert_eq!(parse_thresholds("0.5,0.3").expect("list"), vec![0.3, 0.5]);
        let r = parse_thresholds("0.3:0.95:0.05").expect("range");
        assert_eq!(r.len(), 14);
        assert!((r[13] - 0.95).abs() < 1e-4);
        assert_eq!(default_thresholds().len(), 14);
        for bad in ["", "x", "1.5", "0.9:0.3:0.1", "0.1:0.2:0", "0.1:0.2"] {
            assert!(parse_thresholds(bad).is_err(), "{bad}");
        }
    }

    /// Filtering one low-threshold run by score gives what a detector built at each threshold finds:
    /// the premise of [`sweep`]. Weak shapes (a bare 9-digit number, a bare domain, a UK postcode)
    /// score between 0.5 and 0.6, context words add to that, validated ones score higher.
    #[test]
    fn a_sweep_equals_detecting_at_each_threshold() {
        let texts = [
            "ssn 078051120 and call 212-555-0143 or visit example.com",
            "Postcode SW1A 1AA, card 4111 1111 1111 1111, ip 10.0.0.1",
            "123456789 was the order; mail ann@example.com",
            "Ship to 1600 Pennsylvania Ave NW, Washington, DC 20500 today",
        ];
        let cases: Vec<Case> = texts
            .iter()
            .map(|t| {
                let line = serde_json::json!({"text": t, "entities": []}).to_string();
                parse_case(&line).expect("parses").expect("a case")
            })
            .collect();
        let thresholds = default_thresholds();
        let low = Detector::new(
            DetectOptions {
                threshold: thresholds[0],
                ..DetectOptions::default()
            },
            NerSlot::new(),
        );
        let found: Vec<Vec<Entity>> = texts.iter().map(|t| low.detect(t)).collect();
        let points = sweep(&cases, &found, &thresholds);
        let mut distinct = BTreeSet::new();
        for p in &points {
            let at = Detector::new(
                DetectOptions {
                    threshold: p.threshold,
                    ..DetectOptions::default()
                },
                NerSlot::new(),
            );
            let direct = evaluate(&at, &cases);
            assert_eq!(direct.tokens, p.report.tokens, "at {}", p.threshold);
            assert_eq!(direct.spans, p.report.spans, "at {}", p.threshold);
            distinct.insert(p.report.tokens.values().map(|c| c.fp).sum::<u64>());
        }
        // The texts do separate the thresholds (otherwise the check above proves little).
        assert!(distinct.len() >= 2, "{distinct:?}");
        let table = sweep_table(&points);
        assert!(table.starts_with("| threshold | P | R | F2 |"), "{table}");
        assert_eq!(table.lines().count(), 2 + thresholds.len());
        assert!(table.contains('←'), "{table}");
    }
}
