//! Evaluation on labelled cases: per-type precision, recall, F1 and F2, at token level (whitespace
//! tokens) and at span level (exact type and offsets), plus false positives on negative cases.
//! `opc privacy eval`, the shared-data tests and the benchmarks use it.
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

use std::collections::BTreeMap;
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

/// Our type for a type name in the data (ours or Presidio's).
pub fn map_type(name: &str) -> Option<EntityType> {
    Some(match name {
        "EMAIL_ADDRESS" => EntityType::Email,
        "PHONE_NUMBER" => EntityType::Phone,
        "IBAN_CODE" => EntityType::Iban,
        "US_SSN" => EntityType::Ssn,
        "PERSON" | "PER" => EntityType::PersonName,
        "STREET_ADDRESS" => EntityType::Address,
        other => return EntityType::parse(other),
    })
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
        let Some(kind) = map_type(name) else {
            return Ok(Err(Skip::Unsupported(name.to_string())));
        };
        let num = |k: &str| e.get(k).and_then(Value::as_u64).map(|n| n as usize);
        let (start, end) = match (num("start_byte"), num("end_byte")) {
            (Some(s), Some(e)) => (s, e),
            _ => {
                let s = num("start").ok_or("an entity without \"start\"")?;
                let e = num("end").ok_or("an entity without \"end\"")?;
                (byte_offset(&text, s), byte_offset(&text, e))
            }
        };
        gold.push(Entity {
            kind,
            start,
            end,
            score: 1.0,
        });
    }
    let negative = v.get("expected_count").and_then(Value::as_u64) == Some(0) || gold.is_empty();
    Ok(Ok(Case {
        text,
        gold,
        scope,
        negative,
        case_level: false,
        id,
    }))
}

/// True/false positives and false negatives.
#[derive(Clone, Copy, Debug, Default)]
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
    fn add(&mut self, o: Counts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }
}

/// The result of an evaluation.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Token-level counts by type.
    pub tokens: BTreeMap<EntityType, Counts>,
    /// Span-level counts by type.
    pub spans: BTreeMap<EntityType, Counts>,
    /// Case-level `API_KEY` counts (secrets shape).
    pub secrets: Counts,
    /// Negative cases, and those where something of the case's types was found.
    pub negatives: u64,
    /// Negative cases with a false positive, by type found.
    pub negative_hits: BTreeMap<EntityType, u64>,
    /// Cases scored.
    pub cases: u64,
    /// Lines skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
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

fn label(spans: &[Entity], (s, e): (usize, usize)) -> Option<EntityType> {
    spans
        .iter()
        .find(|x| x.start < e && s < x.end)
        .map(|x| x.kind)
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
            let mut kinds: Vec<EntityType> = found.iter().map(|e| e.kind).collect();
            kinds.sort();
            kinds.dedup();
            for k in kinds {
                *self.negative_hits.entry(k).or_default() += 1;
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
        for tok in token_ranges(&case.text) {
            let g = label(&case.gold, tok);
            let p = label(&found, tok);
            if let Some(g) = g {
                let c = self.tokens.entry(g).or_default();
                if p == Some(g) { c.tp += 1 } else { c.fn_ += 1 }
            }
            if let Some(p) = p
                && g != Some(p)
            {
                self.tokens.entry(p).or_default().fp += 1;
            }
        }
        for g in &case.gold {
            let c = self.spans.entry(g.kind).or_default();
            if found
                .iter()
                .any(|f| f.kind == g.kind && f.start == g.start && f.end == g.end)
            {
                c.tp += 1;
            } else {
                c.fn_ += 1;
            }
        }
        for f in &found {
            if !case
                .gold
                .iter()
                .any(|g| f.kind == g.kind && f.start == g.start && f.end == g.end)
            {
                self.spans.entry(f.kind).or_default().fp += 1;
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
            if let Some(x) = self.tokens.get(t) {
                c.add(*x);
            }
        }
        c
    }
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

fn row(f: &mut fmt::Formatter<'_>, name: &str, c: &Counts) -> fmt::Result {
    writeln!(
        f,
        "  {name:<13} {:>6} {:>6} {:>6}   {:.3}  {:.3}  {:.3}  {:.3}",
        c.tp,
        c.fp,
        c.fn_,
        c.precision(),
        c.recall(),
        c.f(1.0),
        c.f(2.0)
    )
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
            writeln!(f, "{what}:")?;
            writeln!(
                f,
                "  {:<13} {:>6} {:>6} {:>6}   {:<5}  {:<5}  {:<5}  {:<5}",
                "type", "tp", "fp", "fn", "P", "R", "F1", "F2"
            )?;
            let mut all = Counts::default();
            for (t, c) in map {
                row(f, t.as_str(), c)?;
                all.add(*c);
            }
            row(f, "all (micro)", &all)?;
        }
        if self.secrets.tp + self.secrets.fp + self.secrets.fn_ > 0 {
            writeln!(f, "secrets cases (per case, as API_KEY):")?;
            row(f, "API_KEY", &self.secrets)?;
        }
        let hits: u64 = self.negative_hits.values().sum();
        write!(
            f,
            "false positives on negatives: {hits} of {} negative cases",
            self.negatives
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
        let email = report.spans[&EntityType::Email];
        assert_eq!((email.tp, email.fp, email.fn_), (2, 0, 0));
        assert_eq!(report.tokens[&EntityType::Email].tp, 2);
        assert_eq!(report.negatives, 2);
        assert!(report.negative_hits.is_empty());
        assert_eq!(report.skipped.values().sum::<u64>(), 1);
        assert!(report.to_string().contains("EMAIL"));
    }
}
