//! Joining address pieces into `ADDRESS` spans, on one line and across lines (letters, e-mail
//! signatures, shipping labels).
//!
//! The recognisers (`address.rs`, `postal.rs`, `military.rs`) report [`Piece`]s (`address_piece.rs`): a street line, a
//! locality (`Springfield, IL 62704`, `75008 Paris`), a postcode, a unit (`Suite 1120`), a bare building
//! number line, a military line. This module
//! 1. merges pieces on one line separated only by commas, spaces or a `|`/`·`/`–` into a run;
//! 2. links runs on consecutive lines (no blank line between) when the first ends its line and the
//!    second starts its line (after indentation or a label such as `Postcode`);
//! 3. probes the line next to a run that has no piece of its own, as a whole, for a country
//!    (`France`), a unit without digits (`Suite B`), a `City, Region` line (`Austin, Texas`), a ship
//!    (`USS Nimitz`) or a bare place (`London`, kept only between two address lines);
//! 4. reports a chain of linked runs that holds an anchor (a street, a military line, or a locality
//!    or postcode with another line) as one strong span, split only where a label sits between two
//!    pieces: labels ("Address:", "Postcode", "ZIP") are context, never part of a span.
//!
//! Invariants: lines join only next to an anchor, never on their own, so a country, a room number or a
//! capitalised line in prose is never masked by this module; a piece that is weak alone (a postcode, a
//! `75008 Paris`) keeps its own score unless it sits in an anchored chain.

use super::address_piece::{Part, Piece, line_end, line_start};
use super::address_words::{self as words, COUNTRIES, LABELS, REGIONS, UNIT_WORDS};
use crate::{Entity, EntityType};

const ANCHORS: u16 = 1 << Part::Street as u16 | 1 << Part::Military as u16;
const LOCAL: u16 = 1 << Part::Locality as u16 | 1 << Part::Postcode as u16;

/// Pieces merged on one line.
#[derive(Clone, Debug)]
struct Run {
    start: usize,
    end: usize,
    parts: u16,
    score: f32,
    /// Piece boundaries, to split at labels.
    pieces: Vec<(usize, usize)>,
}

impl Run {
    fn only(&self, part: Part) -> bool {
        self.parts == part.bit()
    }
}

/// Whether `s` is empty, or a field label (`Address:`, `Postcode`, `ZIP -`), ignoring bullets.
fn label_or_blank(s: &str) -> bool {
    let s = s
        .trim()
        .trim_start_matches(['-', '*', '•', '>'])
        .trim_end_matches([':', '-', '–', '#'])
        .trim();
    s.is_empty() || words::is_in(LABELS, s)
}

/// Whether a run starting at `start` starts its line (after indentation or a label).
fn starts_line(text: &str, start: usize) -> bool {
    label_or_blank(&text[line_start(text, start)..start])
}

/// Whether a run ending at `end` ends its line (before trailing punctuation).
fn ends_line(text: &str, end: usize) -> bool {
    let le = line_end(text, end);
    le >= end
        && text[end..le]
            .trim()
            .trim_start_matches([',', '.', ';'])
            .trim()
            .is_empty()
}

/// Whether the bytes between two pieces on one line join them.
fn same_line_gap(gap: &str) -> bool {
    gap.len() <= 4
        && gap
            .chars()
            .all(|c| matches!(c, ' ' | '\t' | ',' | ';' | '|' | '·' | '•' | '–' | '-'))
}

/// A whole line tested as a country, a unit without digits, a `City, Region` line, a ship or a bare
/// place (the caller keeps each kind only where it belongs).
fn probe(line: &str) -> Option<Part> {
    let content = line.trim().trim_end_matches(['.', ',', ';']).trim_end();
    if content.is_empty() || content.len() > 60 || content.contains(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if words::is_in(COUNTRIES, content) {
        return Some(Part::Country);
    }
    if super::military::is_ship(content) {
        return Some(Part::Ship);
    }
    let mut tokens = content.split_whitespace();
    let first = tokens.next().unwrap_or("");
    let rest: Vec<&str> = tokens.collect();
    if rest.len() == 1
        && words::is_in(UNIT_WORDS, first)
        && rest[0].len() <= 3
        && rest[0].chars().all(|c| c.is_ascii_uppercase())
    {
        return Some(Part::Unit);
    }
    if let Some((city, region)) = content.rsplit_once(',') {
        let region = region.trim();
        let code = region.len() == 2
            && (words::is_in(words::US_STATES, region)
                || words::is_in(words::CA_PROVINCES, region))
            && region.chars().all(|c| c.is_ascii_uppercase());
        if (code || words::is_in(REGIONS, region) || words::is_in(COUNTRIES, region))
            && place_words(city)
        {
            return Some(Part::Region);
        }
    }
    if place_words(content) {
        return Some(Part::Place);
    }
    None
}

/// One to three capitalised words (with connectors such as `am`, `sur`, `de`): a city's name.
pub fn place_words(s: &str) -> bool {
    let s = s.trim();
    if s.is_empty() || s.len() > 40 {
        return false;
    }
    let mut capitalised = 0;
    for (i, w) in s.split([' ', '-']).enumerate() {
        if i >= 4 || w.is_empty() {
            return false;
        }
        if w.chars().next().is_some_and(char::is_uppercase)
            && w.chars().skip(1).any(char::is_lowercase)
            && w.chars()
                .all(|c| c.is_alphabetic() || c == '\'' || c == '’' || c == '.')
        {
            capitalised += 1;
        } else if !words::is_in(words::CONNECTORS, w) {
            return false;
        }
    }
    capitalised > 0
}

/// Pieces (any order, may overlap) to `ADDRESS` entities.
pub fn join(text: &str, mut pieces: Vec<Piece>, out: &mut Vec<Entity>) {
    if pieces.is_empty() {
        return;
    }
    // Longest first at each start; a piece overlapping one kept before it keeps only what extends
    // past it (a city the street pattern also read), or nothing.
    pieces.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut kept: Vec<Piece> = Vec::with_capacity(pieces.len());
    for mut p in pieces {
        if let Some(k) = kept.last() {
            if p.end <= k.end {
                continue;
            }
            if p.start < k.end {
                p.start = k.end;
                // Only a whole word is kept: the rest of a word the earlier piece cut is dropped.
                let rest = &text[p.start..p.end];
                let skip =
                    rest.len() - rest.trim_start_matches(|c: char| c.is_alphanumeric()).len();
                if skip > 0
                    && p.start > 0
                    && text[..p.start].ends_with(|c: char| c.is_alphanumeric())
                {
                    p.start += skip;
                }
                let rest = &text[p.start..p.end];
                p.start += rest.len() - rest.trim_start_matches([' ', ',', '\t']).len();
                if p.start >= p.end {
                    continue;
                }
            }
        }
        kept.push(p);
    }
    // 1. Runs on one line.
    let mut runs: Vec<Run> = Vec::new();
    for p in kept {
        if let Some(last) = runs.last_mut()
            && same_line_gap(&text[last.end..p.start])
        {
            last.end = p.end;
            last.parts |= p.part.bit();
            last.score = last.score.max(p.score);
            last.pieces.push((p.start, p.end));
            continue;
        }
        runs.push(Run {
            start: p.start,
            end: p.end,
            parts: p.part.bit(),
            score: p.score,
            pieces: vec![(p.start, p.end)],
        });
    }
    // A city that ends a street's line (`10 Downing Street, London`) belongs to it.
    for run in &mut runs {
        if run.parts & ANCHORS == 0 {
            continue;
        }
        let le = line_end(text, run.end);
        let rest = &text[run.end..le];
        if let Some(city) = rest.strip_prefix(", ") {
            let city = city.trim_end().trim_end_matches(['.', ',', ';']);
            if !city.is_empty() && (place_words(city) || probe(city) == Some(Part::Region)) {
                let end = run.end + 2 + city.len();
                run.pieces.push((run.end + 2, end));
                run.end = end;
                run.parts |= Part::Place.bit();
            }
        }
    }
    // 3. Probe the lines next to runs (forward, then backward), so chains can grow through them.
    let mut i = 0;
    while i < runs.len() {
        let end = runs[i].end;
        let le = line_end(text, end);
        if le < text.len() && ends_line(text, end) {
            let next_start = le + if text[le..].starts_with("\r\n") { 2 } else { 1 };
            let next_end = line_end(text, next_start);
            let free = runs.get(i + 1).is_none_or(|r| r.start > next_end);
            if free && let Some(run) = probed(text, next_start, next_end) {
                runs.insert(i + 1, run);
            }
        }
        i += 1;
    }
    let mut i = runs.len();
    while i > 0 {
        i -= 1;
        let start = runs[i].start;
        let ls = line_start(text, start);
        if ls > 0 && starts_line(text, start) {
            let prev_start = line_start(text, ls - 1);
            let prev_end = line_end(text, prev_start);
            let free = i == 0 || runs[i - 1].end < prev_start;
            if free
                && let Some(run) = probed(text, prev_start, prev_end)
                && matches!(run.parts, p if p == Part::Unit.bit() || p == Part::Ship.bit())
            {
                runs.insert(i, run);
                i += 1;
            }
        }
    }
    // 2. Chains of linked runs.
    let mut chain: Vec<Run> = Vec::new();
    for run in runs {
        if let Some(last) = chain.last()
            && !linked(text, last, &run)
        {
            emit(text, std::mem::take(&mut chain), out);
        }
        chain.push(run);
    }
    emit(text, chain, out);
}

fn probed(text: &str, start: usize, end: usize) -> Option<Run> {
    let line = &text[start..end];
    let part = probe(line)?;
    let lead = line.len() - line.trim_start().len();
    let content = line.trim().trim_end_matches(['.', ',', ';']).trim_end();
    let (s, e) = (start + lead, start + lead + content.len());
    Some(Run {
        start: s,
        end: e,
        parts: part.bit(),
        score: 0.0,
        pieces: vec![(s, e)],
    })
}

/// Whether run `b` continues run `a` on the next line.
fn linked(text: &str, a: &Run, b: &Run) -> bool {
    let le = line_end(text, a.end);
    if le >= b.start || !ends_line(text, a.end) || !starts_line(text, b.start) {
        return false;
    }
    // Exactly one line break between them.
    let between = &text[le..line_start(text, b.start)];
    if between.trim_start_matches('\r') != "\n" {
        return false;
    }
    let strong = ANCHORS | LOCAL;
    (a.parts & strong != 0 || starts_line(text, a.start))
        && (b.parts & strong != 0 || ends_line(text, b.end))
}

/// Report a chain: trim members that only belong inside one, then one span per label-free stretch.
fn emit(text: &str, mut chain: Vec<Run>, out: &mut Vec<Entity>) {
    let military = chain.iter().any(|r| r.parts & Part::Military.bit() != 0);
    let edge_only = |r: &Run| r.only(Part::Place) || (r.only(Part::Ship) && !military);
    while chain.first().is_some_and(|r| {
        edge_only(r) || r.only(Part::Building) && !chain.get(1).is_some_and(street)
    }) {
        chain.remove(0);
    }
    while chain
        .last()
        .is_some_and(|r| edge_only(r) || r.only(Part::Building))
    {
        chain.pop();
    }
    if chain.is_empty() {
        return;
    }
    let parts = chain.iter().fold(0, |a, r| a | r.parts);
    let anchored = parts & ANCHORS != 0 || parts & LOCAL != 0 && chain.len() > 1;
    if !anchored {
        // Weak pieces alone, each with its own score; units, countries and places never.
        for r in chain {
            if r.parts & (ANCHORS | LOCAL) != 0 && r.score > 0.0 {
                push(out, r.start, r.end, r.score);
            }
        }
        return;
    }
    let multi = chain.len() > 1 || chain[0].pieces.len() > 1;
    let best = chain.iter().fold(0.0f32, |a, r| a.max(r.score));
    let score = if multi { best.max(0.9) } else { best };
    let mut start = chain[0].start;
    let mut end = chain[0].start;
    for (s, e) in chain.iter().flat_map(|r| r.pieces.iter().copied()) {
        if text[end..s].chars().any(char::is_alphanumeric) {
            push(out, start, end, score);
            start = s;
        }
        end = e;
    }
    push(out, start, end, score);
}

fn street(r: &Run) -> bool {
    r.parts & Part::Street.bit() != 0
}

fn push(out: &mut Vec<Entity>, start: usize, end: usize, score: f32) {
    if start < end {
        out.push(Entity {
            kind: EntityType::Address,
            start,
            end,
            score,
        });
    }
}
