//! Detection: recognisers for structured data, plus the NER tier for names and addresses.
//!
//! The pattern tier is a list of [`Recognizer`]s, one per file, Presidio-style: each finds candidates
//! with a regex compiled once, then *validates* them (Luhn, mod-97, libphonenumber, std's IP parser, the
//! SSA's SSN rules, the vendors' credential shapes) before reporting a span. [`context`] raises the score
//! of a match that has a telling word nearby ("call me at", "card", "IBAN") and leaves weak matches (a bare
//! 9-digit number, a bare domain) below the default threshold unless such a word is there.
//!
//! Scores and the threshold. `DetectOptions::threshold` (the config's `confidenceThreshold`, 0.85 by
//! default) applies to every span, pattern and NER alike: a span scoring below it is not reported. Pattern
//! scores are calibrated against that default:
//! - validated matches (checksum, libphonenumber, parsed IP, credential shape, e-mail) score 0.85 to 1.0,
//!   so they pass the default threshold without context;
//! - weak shapes (a 9-digit SSN without separators, a bare `example.com`, a bare digit run that happens
//!   to be a valid phone number, a UK postcode alone) score 0.5 to 0.6 and pass only with a context word
//!   (+0.35) or with a threshold lowered below 0.6;
//! - lowering the threshold therefore trades precision for recall in both tiers.
//!
//! Speed: every recogniser declares the bytes that must occur in a text for it to match
//! ([`Recognizer::trigger`]); the detector classifies the text's bytes once (a vectorised pass) and
//! skips recognisers whose trigger is absent. A recogniser that runs never scans the whole text with
//! its regex: it finds its anchors with `memchr` or a byte table, then searches only there, anchored
//! at a possible start (`captures_at_starts`) or within a span that must hold every match
//! (`find_in_spans`, `matches_in_digit_runs`). Both give exactly the matches of a whole-text
//! search (leftmost first, non-overlapping), since `\b` still sees the bytes around the span.

use std::sync::Arc;

pub mod address;
pub mod address_bounds;
pub mod address_lines;
pub mod address_piece;
pub mod address_words;
pub mod api_key;
pub mod code;
pub mod context;
pub mod credit_card;
pub mod email;
pub mod eval;
pub mod exclude;
pub mod iban;
pub mod ip;
pub mod military;
pub mod ner;
pub mod phone;
pub mod postal;
pub use opc_shapes::credentials as secrets;
pub mod ssn;
pub mod url;

pub use ner::{NerError, NerModel, NerSlot, Rampart};

use crate::{Entity, EntityType};

/// The bytes a recogniser needs in a text before it can match anything (a bit set over [`Trigger`]s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trigger(u8);

impl Trigger {
    /// No requirement: always run.
    pub const ALWAYS: Trigger = Trigger(0);
    /// An ASCII digit.
    pub const DIGIT: Trigger = Trigger(1);
    /// `@`.
    pub const AT: Trigger = Trigger(2);
    /// `:`.
    pub const COLON: Trigger = Trigger(4);
    /// `.`.
    pub const DOT: Trigger = Trigger(8);
    /// `=`.
    pub const EQUALS: Trigger = Trigger(16);
    /// `-` or `_`.
    pub const DASH: Trigger = Trigger(32);
    /// At least 7 digits in a run of digit groups joined by up to two separators (` `, `-`, `.`, `(`,
    /// `)`, `/`): what a phone, card, SSN or IBAN needs. Years, times and versions never have it.
    pub const LONG_DIGITS: Trigger = Trigger(64);

    /// Either trigger suffices.
    pub const fn or(self, other: Trigger) -> Trigger {
        Trigger(self.0 | other.0)
    }

    /// The triggers present in `text`: one pass over its bytes in 32-byte blocks (written so the
    /// compiler vectorises it), then, only when digits occur, a walk from digit to digit for
    /// [`Trigger::LONG_DIGITS`].
    pub fn of(text: &str) -> Trigger {
        let bytes = text.as_bytes();
        // A long text usually shows every class early: stop once all have been seen.
        const ALL: u8 = 63;
        let mut seen = 0u8;
        let mut blocks = bytes.chunks_exact(32);
        for block in &mut blocks {
            seen |= block_classes(block);
            if seen == ALL {
                break;
            }
        }
        seen |= block_classes(blocks.remainder());
        if seen & 1 != 0 && has_long_digits(bytes) {
            seen |= 64;
        }
        Trigger(seen)
    }

    /// Whether a recogniser with this trigger can match a text whose bytes are `present`.
    pub fn fires(self, present: Trigger) -> bool {
        self.0 == 0 || self.0 & present.0 != 0
    }
}

/// The [`Trigger`] bits of a block of bytes, branch-free so that it vectorises.
#[inline]
fn block_classes(block: &[u8]) -> u8 {
    let (mut digit, mut at, mut colon, mut dot, mut eq, mut dash) =
        (false, false, false, false, false, false);
    for &b in block {
        digit |= b.wrapping_sub(b'0') < 10;
        at |= b == b'@';
        colon |= b == b':';
        dot |= b == b'.';
        eq |= b == b'=';
        dash |= (b == b'-') | (b == b'_');
    }
    u8::from(digit)
        | u8::from(at) << 1
        | u8::from(colon) << 2
        | u8::from(dot) << 3
        | u8::from(eq) << 4
        | u8::from(dash) << 5
}

/// The index of the first ASCII digit at or after `from`: the next eight bytes tested at once, then
/// 32-byte blocks (a test the compiler vectorises) up to the block that holds one, then that block's
/// words. A word is tested for digit bytes with carry-free arithmetic on its bytes.
#[inline]
pub(crate) fn next_digit(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    if i + 8 <= bytes.len() {
        if let Some(d) = digit_in_word(bytes, i) {
            return Some(d);
        }
        i += 8;
    }
    while i + 32 <= bytes.len() {
        let block = &bytes[i..i + 32];
        if block
            .iter()
            .fold(false, |a, b| a | (b.wrapping_sub(b'0') < 10))
        {
            break;
        }
        i += 32;
    }
    while i + 8 <= bytes.len() {
        if let Some(d) = digit_in_word(bytes, i) {
            return Some(d);
        }
        i += 8;
    }
    bytes[i.min(bytes.len())..]
        .iter()
        .position(u8::is_ascii_digit)
        .map(|p| i + p)
}

/// The first digit among the eight bytes at `at`, if there are eight bytes there and one is a digit.
#[inline]
fn digit_in_word(bytes: &[u8], at: usize) -> Option<usize> {
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    // Digits become 0..=9; a byte's high bit then says "not a digit" when it was set after the xor
    // or when its low seven bits are 10 or more (adding 0x76 reaches 0x80 exactly then).
    let x = u64::from_le_bytes(word) ^ 0x3030_3030_3030_3030;
    let not_digit = (((x & LOW) + 0x7676_7676_7676_7676) | x) & HIGH;
    let digits = !not_digit & HIGH;
    (digits != 0).then(|| at + (digits.trailing_zeros() / 8) as usize)
}

/// At least 7 digits in a run of digit groups joined by up to two separators (see
/// [`Trigger::LONG_DIGITS`]), walking from digit to digit.
fn has_long_digits(bytes: &[u8]) -> bool {
    let mut i = 0;
    while let Some(d) = next_digit(bytes, i) {
        let (mut digits, mut seps) = (0u32, 0u32);
        let mut j = d;
        while j < bytes.len() {
            let b = bytes[j];
            if b.is_ascii_digit() {
                digits += 1;
                seps = 0;
                if digits >= 7 {
                    return true;
                }
            } else if matches!(b, b' ' | b'-' | b'.' | b'(' | b')' | b'/') && seps < 2 {
                seps += 1;
            } else {
                break;
            }
            j += 1;
        }
        i = j + 1;
    }
    false
}

/// Maximal runs of bytes in `class` (a 256-entry table) that contain at least `min_digits` ASCII
/// digits (which `class` must include), found by walking from digit to digit: the places where a
/// pattern made only of such bytes (digit groups and separators) can match.
pub(crate) fn digit_runs(
    text: &str,
    class: &[bool; 256],
    min_digits: usize,
) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(d) = next_digit(bytes, i) {
        let mut start = d;
        while start > 0 && class[bytes[start - 1] as usize] {
            start -= 1;
        }
        let mut end = d;
        let mut digits = 0;
        while end < bytes.len() && class[bytes[end] as usize] {
            digits += usize::from(bytes[end].is_ascii_digit());
            end += 1;
        }
        if digits >= min_digits {
            out.push((start, end));
        }
        i = end + 1;
    }
    out
}

/// A 256-entry byte class: ASCII digits plus `extra`.
pub(crate) const fn digits_and(extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut d = b'0';
    while d <= b'9' {
        t[d as usize] = true;
        d += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
}

/// Maximal runs of bytes in `class` at least `min_len` long. Skips ahead `min_len` bytes at a time
/// while the byte it lands on is outside the class; when it lands in a run, tests the byte
/// `min_len - 1` after the run's start before walking to the run's end. Prose of short words costs a
/// fraction of a pass.
pub(crate) fn long_runs(bytes: &[u8], class: &[bool; 256], min_len: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let min_len = min_len.max(1);
    let mut i = 0; // no run of interest starts before i; the byte before i is outside the class
    while i + min_len <= bytes.len() {
        let probe = i + min_len - 1;
        if !class[bytes[probe] as usize] {
            i = probe + 1;
            continue;
        }
        let mut start = probe;
        while start > i && class[bytes[start - 1] as usize] {
            start -= 1;
        }
        // A long enough run holds `last`. When `last` is outside the class, this run is short, and
        // so is any run starting before `last` (it ends before it).
        let last = start + min_len - 1;
        if last < bytes.len() && !class[bytes[last] as usize] {
            i = last + 1;
            continue;
        }
        let mut end = probe + 1;
        while end < bytes.len() && class[bytes[end] as usize] {
            end += 1;
        }
        if end - start >= min_len {
            // A run that began before `i` is impossible: `i` follows a byte outside the class.
            out.push((start, end));
        }
        i = end + 1;
    }
    out
}

/// The maximal run of `class` bytes around `at`.
pub(crate) fn run_around(bytes: &[u8], at: usize, class: &[bool; 256]) -> (usize, usize) {
    let (mut s, mut e) = (at, at);
    while s > 0 && class[bytes[s - 1] as usize] {
        s -= 1;
    }
    while e < bytes.len() && class[bytes[e] as usize] {
        e += 1;
    }
    (s, e)
}

/// The runs of `class` bytes around each position in `at` (sorted), each run once: the spans for
/// [`find_in_spans`] when every match is made of `class` bytes and holds one of the positions.
pub(crate) fn runs_around(
    bytes: &[u8],
    at: impl Iterator<Item = usize>,
    class: &[bool; 256],
) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for p in at {
        if out.last().is_some_and(|&(_, e)| p < e) {
            continue;
        }
        out.push(run_around(bytes, p, class));
    }
    out
}

/// A compiled pattern for windowed searches (regex-automata's meta engine: a search can be limited
/// to a span of the text while `\b` still sees the bytes around it).
pub(crate) type Pattern = regex_automata::meta::Regex;

/// Compiles a [`Pattern`].
pub(crate) fn pattern(p: &str) -> Pattern {
    Pattern::new(p).expect("pattern compiles")
}

/// The spans of a match's groups (0 is the whole match).
pub(crate) type Groups = Vec<Option<(usize, usize)>>;

/// The matches of `re` in `text`, exactly as a search over the whole text gives them (leftmost
/// first, non-overlapping), given `spans`, sorted by start, such that every match lies wholly inside
/// one of them. Text outside the spans is never scanned.
pub(crate) fn find_in_spans(
    re: &Pattern,
    text: &str,
    spans: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<(usize, usize)> {
    search(re, text, spans, false)
        .into_iter()
        .filter_map(|g| g[0])
        .collect()
}

/// A match found by [`matches_in_spans`], with the accessors of `regex::Match`.
#[derive(Clone, Copy)]
pub(crate) struct Found<'t> {
    text: &'t str,
    start: usize,
    end: usize,
}

impl<'t> Found<'t> {
    pub(crate) fn start(&self) -> usize {
        self.start
    }
    pub(crate) fn end(&self) -> usize {
        self.end
    }
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }
    pub(crate) fn as_str(&self) -> &'t str {
        &self.text[self.start..self.end]
    }
}

/// The matches of `re` (as a search over the whole text finds them) when every match lies in one of
/// the [`digit_runs`] of `class` holding at least `min_digits` digits, except for up to `tail` more
/// bytes after the run (a phone's extension, searched only when `tail_starts` returns true for
/// the bytes after the run). A match must start inside its run.
pub(crate) fn matches_in_digit_runs<'t>(
    re: &Pattern,
    text: &'t str,
    class: &[bool; 256],
    min_digits: usize,
    tail: usize,
    tail_starts: impl Fn(&[u8]) -> bool,
) -> Vec<Found<'t>> {
    let mut out = Vec::new();
    let mut pos = 0;
    for (start, end) in digit_runs(text, class, min_digits) {
        let limit = if tail > 0 && tail_starts(&text.as_bytes()[end..]) {
            (end + tail).min(text.len())
        } else {
            end
        };
        let mut from = start.max(pos);
        while from < end {
            let input = regex_automata::Input::new(text).span(from..limit);
            let Some(m) = re.search(&input) else {
                break;
            };
            if m.start() >= end {
                break;
            }
            out.push(Found {
                text,
                start: m.start(),
                end: m.end(),
            });
            pos = m.end().max(m.start() + 1);
            from = pos;
        }
    }
    out
}

/// [`find_in_spans`] with capture groups.
pub(crate) fn captures_in_spans(
    re: &Pattern,
    text: &str,
    spans: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<Groups> {
    search(re, text, spans, false)
}

/// The matches of `re` in `text`, exactly as a search over the whole text gives them, given the
/// sorted positions where a match can start (every match starts at one of them): an anchored search
/// at each, skipping those inside an earlier match.
pub(crate) fn find_at_starts(
    re: &Pattern,
    text: &str,
    starts: impl IntoIterator<Item = usize>,
) -> Vec<(usize, usize)> {
    captures_at_starts(re, text, starts)
        .into_iter()
        .filter_map(|g| g[0])
        .collect()
}

/// [`find_at_starts`] with capture groups.
pub(crate) fn captures_at_starts(
    re: &Pattern,
    text: &str,
    starts: impl IntoIterator<Item = usize>,
) -> Vec<Groups> {
    search(re, text, starts.into_iter().map(|s| (s, text.len())), true)
}

fn search(
    re: &Pattern,
    text: &str,
    windows: impl IntoIterator<Item = (usize, usize)>,
    anchored: bool,
) -> Vec<Groups> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut caps: Option<regex_automata::util::captures::Captures> = None;
    for (start, end) in windows {
        let end = end.min(text.len());
        if anchored && start < pos {
            continue;
        }
        let caps = caps.get_or_insert_with(|| re.create_captures());
        let mut from = start.max(pos);
        while from < end {
            let mut input = regex_automata::Input::new(text).span(from..end);
            if anchored {
                input = input.anchored(regex_automata::Anchored::Yes);
            }
            re.search_captures(&input, caps);
            let Some(m) = caps.get_match() else {
                break;
            };
            out.push(
                (0..caps.group_len())
                    .map(|g| caps.get_group(g).map(|sp| (sp.start, sp.end)))
                    .collect(),
            );
            pos = m.end().max(m.start() + 1);
            from = pos;
            if anchored {
                break;
            }
        }
    }
    out
}

/// One kind of pattern, Presidio-style: find candidates, validate them, score them.
pub trait Recognizer: Send + Sync {
    /// A short name, for diagnostics and benchmarks.
    fn name(&self) -> &'static str;
    /// Append every validated span in `text` (byte offsets, scores after context words) to `out`.
    fn find(&self, text: &str, out: &mut Vec<Entity>);
    /// The types this recogniser reports (a detector skips it when none is wanted).
    fn types(&self) -> &'static [EntityType] {
        &EntityType::ALL
    }
    /// The bytes that must occur in a text for this recogniser to match (checked once per text).
    fn trigger(&self) -> Trigger {
        Trigger::ALWAYS
    }
}

/// What to detect and what to leave alone (the config's `framework.privacy` detection keys).
#[derive(Clone, Debug)]
pub struct DetectOptions {
    /// The types to report (`detectTypes`); others are dropped.
    pub types: Vec<EntityType>,
    /// Terms never masked (`whitelist`): a span equal to one, or inside one, is dropped (case-insensitive).
    pub whitelist: Vec<String>,
    /// The minimum score of a reported span (`confidenceThreshold`); see the module docs for how pattern
    /// scores relate to it.
    pub threshold: f32,
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions {
            types: EntityType::ALL.to_vec(),
            whitelist: Vec::new(),
            threshold: 0.85,
        }
    }
}

/// Add the model's spans to the pattern tier's. A structured match (a card, an SSN, a phone, an IBAN …,
/// validated or merely shaped) explains its characters better than the model, which reads digit
/// groups as building numbers and postcodes: a model span overlapping one that passes `threshold` is
/// dropped, whatever its score. A pattern candidate below the threshold (a weak phone shape such as
/// `ref 3367-9331-16`, or the postcode in `Tokyo 131-0045`) still hides a model span inside it (the
/// model read the digits alone), but not one reaching beyond it. Street addresses found by both tiers
/// are left to the usual overlap resolution.
fn add_model_spans(found: &mut Vec<Entity>, model: Vec<Entity>, threshold: f32) {
    let structured: Vec<(usize, usize, bool)> = found
        .iter()
        .filter(|e| e.kind != EntityType::Address && e.kind != EntityType::PersonName)
        .map(|e| (e.start, e.end, e.score >= threshold))
        .collect();
    found.extend(model.into_iter().filter(|m| {
        !structured.iter().any(|&(start, end, reported)| {
            (reported && m.start < end && start < m.end) || (start <= m.start && m.end <= end)
        })
    }));
}

/// The pattern recognisers, in a fixed order (ties in overlap resolution keep the earlier one).
pub fn default_recognizers() -> Vec<Box<dyn Recognizer>> {
    vec![
        Box::new(email::EmailRecognizer::new()),
        Box::new(url::UrlRecognizer::new()),
        Box::new(credit_card::CreditCardRecognizer::new()),
        Box::new(iban::IbanRecognizer::new()),
        Box::new(ssn::SsnRecognizer::new()),
        Box::new(ip::IpRecognizer::new()),
        Box::new(phone::PhoneRecognizer::new()),
        Box::new(api_key::ApiKeyRecognizer::new()),
        Box::new(address::AddressRecognizer::new()),
    ]
}

/// Finds personal data in text: the pattern tier always, the NER tier once its slot is filled.
pub struct Detector {
    recognizers: Vec<Box<dyn Recognizer>>,
    wanted: [bool; EntityType::ALL.len()],
    whitelist: Vec<String>,
    threshold: f32,
    ner: NerSlot,
}

fn index(kind: EntityType) -> usize {
    EntityType::ALL
        .iter()
        .position(|t| *t == kind)
        .unwrap_or_default()
}

impl Detector {
    /// A detector with the default recognisers. Regexes are compiled here, once.
    pub fn new(options: DetectOptions, ner: NerSlot) -> Detector {
        Detector::with_recognizers(options, ner, default_recognizers())
    }

    /// A detector with a chosen list of recognisers (tests, benchmarks).
    pub fn with_recognizers(
        options: DetectOptions,
        ner: NerSlot,
        recognizers: Vec<Box<dyn Recognizer>>,
    ) -> Detector {
        let mut wanted = [false; EntityType::ALL.len()];
        for t in &options.types {
            wanted[index(*t)] = true;
        }
        let recognizers = recognizers
            .into_iter()
            .filter(|r| r.types().iter().any(|t| wanted[index(*t)]))
            .collect();
        let whitelist = options
            .whitelist
            .iter()
            .map(|w| w.trim().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        Detector {
            recognizers,
            wanted,
            whitelist,
            threshold: options.threshold,
            ner,
        }
    }

    /// Whether the NER model has landed in the slot: detection then costs milliseconds per message, not
    /// microseconds, so async callers move it off their executor's threads.
    pub fn uses_model(&self) -> bool {
        self.ner.get().is_some()
    }

    /// Sorted by start, non-overlapping, score >= threshold, whitelisted terms and types not in
    /// `types` removed. Runs the NER tier only when the slot is filled.
    pub fn detect(&self, text: &str) -> Vec<Entity> {
        let mut found = self.detect_patterns(text);
        if let Some(model) = self.ner.get() {
            add_model_spans(&mut found, model.entities(text), self.threshold);
        }
        self.finish(text, found)
    }

    /// [`Detector::detect`] of each text, in order. With the model loaded, the texts go through it
    /// together, which costs far less per text than one at a time (`opc privacy detect` and `eval`
    /// read their input in chunks for this).
    pub fn detect_batch(&self, texts: &[&str]) -> Vec<Vec<Entity>> {
        let mut found: Vec<Vec<Entity>> = texts.iter().map(|t| self.detect_patterns(t)).collect();
        if let Some(model) = self.ner.get() {
            for (found, spans) in found.iter_mut().zip(model.entities_batch(texts)) {
                add_model_spans(found, spans, self.threshold);
            }
        }
        texts
            .iter()
            .zip(found)
            .map(|(text, found)| self.finish(text, found))
            .collect()
    }

    /// The pattern tier alone, before filtering: every recogniser whose trigger bytes occur in `text`.
    fn detect_patterns(&self, text: &str) -> Vec<Entity> {
        let mut found = Vec::new();
        if text.is_empty() {
            return found;
        }
        let present = Trigger::of(text);
        for r in &self.recognizers {
            if r.trigger().fires(present) {
                r.find(text, &mut found);
            }
        }
        found
    }

    fn finish(&self, text: &str, mut found: Vec<Entity>) -> Vec<Entity> {
        found.retain(|e| {
            e.start < e.end
                && e.end <= text.len()
                && text.is_char_boundary(e.start)
                && text.is_char_boundary(e.end)
                && self.wanted[index(e.kind)]
                && e.score >= self.threshold
                && !self.whitelisted(text, e)
        });
        // OPC's own ids (`web:82bcfadd9458164b`, `slack:U024BE7LH`, …) and names without a letter.
        exclude::drop_non_personal(text, &mut found);
        // Names, places and addresses read in code (paths, globs, shell errors, stack frames …).
        code::drop_code_readings(text, &mut found);
        merge_addresses(&mut found);
        address_bounds::settle(text, &mut found);
        resolve_overlaps(found)
    }

    /// A span equal to a whitelisted term, or inside an occurrence of one, case-insensitively.
    fn whitelisted(&self, text: &str, e: &Entity) -> bool {
        if self.whitelist.is_empty() {
            return false;
        }
        let span = e.text(text).to_lowercase();
        self.whitelist.iter().any(|w| {
            if *w == span {
                return true;
            }
            if !w.contains(span.as_str()) {
                return false;
            }
            // The span is part of the term; is it part of an occurrence of the term around the span?
            let lower_start = e.start.saturating_sub(w.len());
            let mut from = lower_start;
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            let mut to = (e.end + w.len()).min(text.len());
            while !text.is_char_boundary(to) {
                to += 1;
            }
            let window = text[from..to].to_lowercase();
            // Lowercasing may change byte lengths for non-ASCII text; fall back to "contains".
            if window.len() != to - from {
                return window.contains(w.as_str());
            }
            let mut at = 0;
            while let Some(i) = window[at..].find(w.as_str()) {
                let s = from + at + i;
                if s <= e.start && e.end <= s + w.len() {
                    return true;
                }
                at += i + 1;
                while at < window.len() && !window.is_char_boundary(at) {
                    at += 1;
                }
            }
            false
        })
    }
}

/// Overlapping `ADDRESS` spans become their union, with the higher score: when both tiers read part
/// of one address (the model the street, the pattern tier the street and the city lines below it),
/// the address is the whole of what either found, not the part with the higher score.
fn merge_addresses(found: &mut Vec<Entity>) {
    let (mut addresses, others): (Vec<Entity>, Vec<Entity>) = std::mem::take(found)
        .into_iter()
        .partition(|e| e.kind == EntityType::Address);
    *found = others;
    addresses.sort_by_key(|e| e.start);
    let mut merged: Vec<Entity> = Vec::with_capacity(addresses.len());
    for e in addresses {
        match merged.last_mut() {
            Some(last) if e.start < last.end => {
                last.end = last.end.max(e.end);
                last.score = last.score.max(e.score);
            }
            _ => merged.push(e),
        }
    }
    found.extend(merged);
}

/// Keep a non-overlapping subset: higher score first, then the longer span, then the earlier one;
/// returned sorted by start.
pub fn resolve_overlaps(mut found: Vec<Entity>) -> Vec<Entity> {
    if found.len() <= 1 {
        return found;
    }
    found.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then((b.end - b.start).cmp(&(a.end - a.start)))
            .then(a.start.cmp(&b.start))
    });
    let mut kept: Vec<Entity> = Vec::with_capacity(found.len());
    for e in found {
        if kept.iter().all(|k| e.end <= k.start || k.end <= e.start) {
            kept.push(e);
        }
    }
    kept.sort_by_key(|e| e.start);
    kept
}

/// Shared by the recognisers: is there a byte before `start`, and is it of `pred`'s class?
pub(crate) fn before_is(text: &str, start: usize, pred: impl Fn(u8) -> bool) -> bool {
    start > 0 && pred(text.as_bytes()[start - 1])
}

/// Shared by the recognisers: is there a byte at `end`, and is it of `pred`'s class?
pub(crate) fn after_is(text: &str, end: usize, pred: impl Fn(u8) -> bool) -> bool {
    end < text.len() && pred(text.as_bytes()[end])
}

/// Shared detector type for callers that keep one per process.
pub type SharedDetector = Arc<Detector>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that reads every digit run as an address (as a real one does with card and SSN groups)
    /// and one known name as a person.
    struct DigitsAreAddresses;

    impl NerModel for DigitsAreAddresses {
        fn entities(&self, text: &str) -> Vec<Entity> {
            let mut out = Vec::new();
            if let Some(start) = text.find("Maria Gonzalez") {
                out.push(Entity {
                    kind: EntityType::PersonName,
                    start,
                    end: start + "Maria Gonzalez".len(),
                    score: 0.99,
                });
            }
            let bytes = text.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i].is_ascii_digit() {
                    let start = i;
                    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'-') {
                        i += 1;
                    }
                    out.push(Entity {
                        kind: EntityType::Address,
                        start,
                        end: i,
                        score: 0.999,
                    });
                }
                i += 1;
            }
            out
        }
    }

    #[test]
    fn a_model_span_never_overrides_a_structured_match() {
        let slot = NerSlot::new();
        assert!(slot.set(Arc::new(DigitsAreAddresses)));
        let text = "Maria Gonzalez, card 4111-1111-1111-1111, SSN 536-90-4399, unit 42";
        let found: Vec<(EntityType, &str)> = Detector::new(DetectOptions::default(), slot)
            .detect(text)
            .into_iter()
            .map(|e| (e.kind, &text[e.start..e.end]))
            .collect();
        assert_eq!(
            found,
            vec![
                (EntityType::PersonName, "Maria Gonzalez"),
                (EntityType::CreditCard, "4111-1111-1111-1111"),
                (EntityType::Ssn, "536-90-4399"),
                (EntityType::Address, "42"),
            ]
        );
    }

    fn detect(text: &str) -> Vec<(EntityType, &str)> {
        Detector::new(DetectOptions::default(), NerSlot::new())
            .detect(text)
            .into_iter()
            .map(|e| (e.kind, &text[e.start..e.end]))
            .collect()
    }

    #[test]
    fn finds_each_kind_in_prose() {
        let text = "Mail jane.doe@example.com or call me at (212) 555-0199; card 4111 1111 1111 1111, \
                    IBAN GB82 WEST 1234 5698 7654 32, ssn 078-05-1123, from 192.168.1.10, \
                    see https://example.com/a?b=1 and key ghp_abcdefghijklmnopqrstuvwxyz0123456789.";
        let found = detect(text);
        let kinds: Vec<EntityType> = found.iter().map(|f| f.0).collect();
        assert_eq!(
            kinds,
            vec![
                EntityType::Email,
                EntityType::Phone,
                EntityType::CreditCard,
                EntityType::Iban,
                EntityType::Ssn,
                EntityType::IpAddress,
                EntityType::Url,
                EntityType::ApiKey
            ],
            "{found:?}"
        );
    }

    #[test]
    fn types_whitelist_and_threshold_filter() {
        let text = "write to ceo@acme.example.com or ops@acme.example.com";
        let only_phone = Detector::new(
            DetectOptions {
                types: vec![EntityType::Phone],
                ..DetectOptions::default()
            },
            NerSlot::new(),
        );
        assert!(only_phone.detect(text).is_empty());
        let wl = Detector::new(
            DetectOptions {
                whitelist: vec!["CEO@acme.example.com".into()],
                ..DetectOptions::default()
            },
            NerSlot::new(),
        );
        let found = wl.detect(text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].text(text), "ops@acme.example.com");
        let strict = Detector::new(
            DetectOptions {
                threshold: 1.01,
                ..DetectOptions::default()
            },
            NerSlot::new(),
        );
        assert!(strict.detect(text).is_empty());
    }

    #[test]
    fn a_span_inside_a_whitelisted_term_is_kept_out() {
        let text = "our office: 1 Infinite Loop Road, open daily";
        let wl = Detector::new(
            DetectOptions {
                whitelist: vec!["our office: 1 infinite loop road".into()],
                ..DetectOptions::default()
            },
            NerSlot::new(),
        );
        assert!(wl.detect(text).is_empty(), "{:?}", wl.detect(text));
        assert!(!detect(text).is_empty());
    }

    #[test]
    fn overlaps_prefer_score_then_length() {
        let e = |s, end, score| Entity {
            kind: EntityType::Phone,
            start: s,
            end,
            score,
        };
        let kept = resolve_overlaps(vec![
            e(0, 10, 0.9),
            e(5, 20, 0.9),
            e(8, 12, 1.0),
            e(30, 31, 0.5),
        ]);
        assert_eq!(kept, vec![e(8, 12, 1.0), e(30, 31, 0.5)]);
        let kept = resolve_overlaps(vec![e(0, 10, 0.9), e(5, 20, 0.9)]);
        assert_eq!(kept, vec![e(5, 20, 0.9)]);
    }

    #[test]
    fn ner_spans_join_when_the_slot_is_filled() {
        struct Names;
        impl NerModel for Names {
            fn entities(&self, text: &str) -> Vec<Entity> {
                text.find("Ada Lovelace")
                    .map(|s| Entity {
                        kind: EntityType::PersonName,
                        start: s,
                        end: s + 12,
                        score: 0.97,
                    })
                    .into_iter()
                    .collect()
            }
        }
        let slot = NerSlot::new();
        let d = Detector::new(DetectOptions::default(), slot.clone());
        let text = "Ada Lovelace wrote to ada@example.com";
        assert_eq!(d.detect(text).len(), 1);
        assert!(slot.set(Arc::new(Names)));
        let found = d.detect(text);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].kind, EntityType::PersonName);
    }

    #[test]
    fn overlapping_addresses_from_both_tiers_become_one() {
        // The model reads the street line with more confidence than the pattern tier's whole block:
        // the block must not lose its city lines to the model's shorter span.
        struct Street;
        impl NerModel for Street {
            fn entities(&self, text: &str) -> Vec<Entity> {
                let s = text.find("1200 Market").unwrap_or(0);
                vec![Entity {
                    kind: EntityType::Address,
                    start: s,
                    end: s + "1200 Market Street".len(),
                    score: 0.99,
                }]
            }
        }
        let slot = NerSlot::new();
        assert!(slot.set(Arc::new(Street)));
        let text = "Acme\n1200 Market Street\nSuite 5\nSan Francisco, CA 94103\nThanks";
        let found = Detector::new(DetectOptions::default(), slot).detect(text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].text(text),
            "1200 Market Street\nSuite 5\nSan Francisco, CA 94103"
        );
        assert_eq!(found[0].score, 0.99);
    }

    #[test]
    fn a_detector_is_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Detector>();
    }

    /// The byte pass as it was first written: one byte at a time.
    fn trigger_reference(text: &str) -> u8 {
        let mut seen = 0u8;
        let (mut digits, mut seps) = (0u32, 0u32);
        for &b in text.as_bytes() {
            let class = match b {
                b'0'..=b'9' => 1,
                b'@' => 2,
                b':' => 4,
                b'.' => 8,
                b'=' => 16,
                b'-' | b'_' => 32,
                _ => 0,
            };
            seen |= class;
            if class & 1 != 0 {
                digits += 1;
                seps = 0;
                if digits >= 7 {
                    seen |= 64;
                }
            } else if matches!(b, b' ' | b'-' | b'.' | b'(' | b')' | b'/') && seps < 2 {
                seps += 1;
            } else {
                digits = 0;
                seps = 0;
            }
        }
        seen
    }

    proptest::proptest! {
        #[test]
        fn the_vectorised_byte_pass_matches_the_reference(
            text in "[a-z0-9 @:.=_()/-]{0,80}",
            long in "[ a-zA-Z0-9.:=@_-]{0,200}",
        ) {
            proptest::prop_assert_eq!(Trigger::of(&text).0, trigger_reference(&text));
            proptest::prop_assert_eq!(Trigger::of(&long).0, trigger_reference(&long));
        }

        #[test]
        fn windowed_searches_match_whole_text_searches(text in "[a-z0-9 .:-]{0,120}") {
            // Runs of digits and separators; a pattern made of those bytes.
            let class = digits_and(b" .-");
            let re = pattern(r"(?-u)\b\d{2,}(?:[ .-]\d+)*\b");
            let whole: Vec<(usize, usize)> =
                find_in_spans(&re, &text, [(0, text.len())]);
            let runs: Vec<(usize, usize)> = matches_in_digit_runs(&re, &text, &class, 2, 0, |_| false)
                .iter()
                .map(|m| (m.start(), m.end()))
                .collect();
            proptest::prop_assert_eq!(&whole, &runs);
            // Anchored at every digit that starts a word.
            let b = text.as_bytes();
            let starts = (0..b.len()).filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()));
            proptest::prop_assert_eq!(&whole, &find_at_starts(&re, &text, starts));
            // Long runs of letters and digits, against a naive scan.
            let mut alnum = digits_and(b"");
            for c in b'a'..=b'z' {
                alnum[c as usize] = true;
            }
            let mut naive = Vec::new();
            let mut i = 0;
            while i < b.len() {
                let s = i;
                while i < b.len() && alnum[b[i] as usize] {
                    i += 1;
                }
                if i - s >= 5 {
                    naive.push((s, i));
                }
                i += 1;
            }
            proptest::prop_assert_eq!(naive, long_runs(b, &alnum, 5));
        }
    }

    proptest::proptest! {
        #[test]
        fn next_digit_finds_the_first_digit_from_any_start(
            text in "[a-z 0-9é.-]{0,90}",
            from in 0usize..100,
        ) {
            let b = text.as_bytes();
            let from = from.min(b.len());
            let naive = b[from..].iter().position(u8::is_ascii_digit).map(|p| from + p);
            proptest::prop_assert_eq!(next_digit(b, from), naive);
        }

        #[test]
        fn long_runs_match_a_naive_scan(text in "[a-z/:._ -]{0,160}", min in 1usize..20) {
            let b = text.as_bytes();
            let mut class = [false; 256];
            for c in b"abcdefghijklmnopqrstuvwxyz/:._-" {
                class[*c as usize] = true;
            }
            let mut naive = Vec::new();
            let mut i = 0;
            while i < b.len() {
                let s = i;
                while i < b.len() && class[b[i] as usize] {
                    i += 1;
                }
                if i - s >= min {
                    naive.push((s, i));
                }
                i += 1;
            }
            proptest::prop_assert_eq!(naive, long_runs(b, &class, min));
        }
    }

    #[test]
    fn next_digit_across_blocks() {
        let mut text = "x".repeat(200);
        text.push('7');
        text.push_str(&"y".repeat(50));
        let b = text.as_bytes();
        for from in [0, 1, 7, 8, 31, 32, 150, 199, 200] {
            assert_eq!(next_digit(b, from), Some(200), "from {from}");
        }
        assert_eq!(next_digit(b, 201), None);
        assert_eq!(next_digit(b, b.len()), None);
    }

    #[test]
    fn triggers_classify_bytes() {
        let t = Trigger::of("plain words only");
        assert!(!Trigger::DIGIT.fires(t));
        assert!(Trigger::ALWAYS.fires(t));
        assert!(Trigger::DIGIT.or(Trigger::AT).fires(Trigger::of("a@b")));
        assert!(!Trigger::LONG_DIGITS.fires(Trigger::of("in 2024, at 12:30, v1.2.3, 40 items")));
        for t in [
            "(415) 555-0132",
            "4111 1111 1111 1111",
            "078-05-1123",
            "GB82 WEST 1234 5698 7654 32",
        ] {
            assert!(Trigger::LONG_DIGITS.fires(Trigger::of(t)), "{t}");
        }
    }
}
