//! Address pieces outside the US street template, found at a digit (the caller's anchor):
//! - the house number after the street (`Hauptstraße 12`, `Keizersgracht 123`, `Calle de Alcalá 48`,
//!   `Via Roma 10`, `ul. Marszałkowska 10/12`, `Andrássy út 60`, `ул. Тверская, д. 7`);
//! - the French order (`12 rue de la Paix`, `8, avenue Foch`);
//! - the postcode before the city (`75008 Paris`, `10115 Berlin`, `1015 CJ Amsterdam`, `00-950
//!   Warszawa`, `114 55 Stockholm`, `D-10115 Berlin`, `125009, Москва`);
//! - the city before the postcode (`Springfield, IL 62704`, `Tokyo 131-0045`, `Москва 125009`,
//!   `〒131-0045`) and the Canadian `Toronto, ON M5V 2T6` (found at the postcode's first letter);
//! - Japanese block numbers (`1-1-2 Oshiage, Sumida-ku, Tokyo 131-0045`, `東京都墨田区押上1-1-2`);
//! - units (`Suite 1120`, `Apt. 4C`, `3rd Floor`, `PO Box 12`, `кв. 5`) and a line that is only a
//!   building number (`1200`), which count only next to a street (see `address_lines.rs`).
//!
//! Speed: each form is tried only when the bytes around the digit allow it (a capitalised or listed
//! word before it, a space and a capital after it, the right digit count), so a number in prose ("in
//! 2024", "version 12", "room 204") costs a few byte comparisons and at most one short look-up.

use super::address_piece::{Part, Piece, line_start};
use super::address_words::{self as words};
use super::{Pattern, context};
use rustc_hash::FxHashSet;
use std::sync::LazyLock;

/// The compiled forms that read forward from the digit.
pub struct Postal {
    postcode_city: Pattern,
    french: Pattern,
    japanese: Pattern,
    kanji_block: Pattern,
    floor: Pattern,
    canadian: Pattern,
}

/// A capitalised word of a street or city name (any script).
const W: &str = r"\p{Lu}[\p{L}\p{M}'’]*";

/// A city: one to three capitalised words, with connectors (`Frankfurt am Main`, `Aix-en-Provence`).
fn city() -> String {
    format!(
        r"{W}(?:(?:-|[ \t]+)(?:(?:am|an|der|im|bei|ob|sur|sous|en|de|del|la|le|di|upon|on)(?:-|[ \t]+))?{W}){{0,2}}"
    )
}

/// First words that are never a city after a number ("2024 March", "12 The").
const NOT_CITY: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "the",
    "a",
    "an",
    "i",
    "we",
    "you",
    "he",
    "she",
    "it",
    "they",
    "and",
    "or",
    "but",
    "if",
    "in",
    "on",
    "at",
    "to",
    "of",
    "for",
    "is",
    "was",
    "this",
    "that",
    "my",
    "our",
    "am",
    "pm",
    "utc",
    "gmt",
    "usd",
    "eur",
    "gbp",
    "mb",
    "gb",
    "kb",
    "ms",
];

/// Words before a number that make it an identifier, not a postcode ("Order 123456", "Ticket
/// 131-0045"): never a city.
/// Country prefixes written before a postcode (`D-10115`, `CH-8001`, `FI-00100`).
const COUNTRY_PREFIXES: &[&str] = &[
    "A", "AT", "B", "BE", "BG", "CH", "CY", "CZ", "D", "DE", "DK", "E", "EE", "ES", "EST", "F",
    "FI", "FIN", "FR", "GR", "H", "HR", "HU", "I", "IS", "IT", "L", "LI", "LT", "LU", "LV", "MC",
    "N", "NL", "NO", "P", "PL", "PT", "RO", "S", "SE", "SI", "SK", "SLO",
];

const ID_WORDS: &[&str] = &[
    "order",
    "ticket",
    "invoice",
    "ref",
    "reference",
    "id",
    "case",
    "account",
    "acct",
    "no",
    "number",
    "room",
    "page",
    "pages",
    "version",
    "chapter",
    "flight",
    "item",
    "step",
    "pin",
    "code",
    "issue",
    "pr",
    "build",
    "release",
    "batch",
    "lot",
    "serial",
    "tracking",
    "booking",
    "confirmation",
    "customer",
    "member",
    "policy",
    "claim",
    "patient",
    "employee",
    "badge",
    "user",
    "job",
    "task",
    "table",
    "figure",
    "section",
    "line",
    "row",
    "gate",
    "seat",
    "platform",
    "bus",
    "train",
    "route",
];

/// A set of lowercase words with a filter on (length, first byte, last byte) in front: most words
/// next to a number in prose ("in 2024", "2 cores") are rejected by one bit test, without hashing.
struct WordSet {
    words: FxHashSet<&'static str>,
    shapes: Vec<u64>,
}

fn shape(w: &[u8]) -> usize {
    (w.len().min(15) << 12) | ((w[0] as usize & 63) << 6) | (w[w.len() - 1] as usize & 63)
}

impl WordSet {
    fn new(lists: &[&[&'static str]]) -> WordSet {
        let words: FxHashSet<&'static str> = lists.concat().into_iter().collect();
        let mut shapes = vec![0u64; 1 << 10];
        for w in &words {
            let s = shape(w.as_bytes());
            shapes[s >> 6] |= 1 << (s & 63);
        }
        WordSet { words, shapes }
    }

    /// Whether `word` (any case) is in the set.
    fn contains(&self, word: &str) -> bool {
        if word.is_empty() {
            return false;
        }
        if word.bytes().any(|b| b.is_ascii_uppercase()) || !word.is_ascii() {
            return self.words.contains(word.to_lowercase().as_str());
        }
        let s = shape(word.as_bytes());
        self.shapes[s >> 6] & (1 << (s & 63)) != 0 && self.words.contains(word)
    }
}

/// The words that make a number after them worth a closer look even when not capitalised.
static LISTED: LazyLock<WordSet> = LazyLock::new(|| {
    WordSet::new(&[
        words::NUMBER_MARKERS,
        words::UNIT_WORDS,
        words::AFTER_NAME_TYPES,
        words::PREFIX_TYPES,
    ])
});

/// [`words::FRENCH_TYPES`], to test the word after a number before trying the pattern.
static FRENCH: LazyLock<WordSet> = LazyLock::new(|| WordSet::new(&[words::FRENCH_TYPES]));

/// Whether a word that does not start with a capital is a listed street, unit or number word.
fn listed_before(word: &str) -> bool {
    LISTED.contains(word)
}

/// Whether an ordinal (`3rd`, `2.`, `1er`) at `after` is followed by a floor word.
fn floor_word_after(text: &str, after: usize) -> bool {
    let rest = &text[after..];
    let suffix = rest
        .char_indices()
        .take_while(|&(i, c)| i < 3 && (c.is_ascii_alphabetic() || matches!(c, '.' | 'º' | '°')))
        .last()
        .map_or(0, |(i, c)| i + c.len_utf8());
    if suffix == 0 {
        return false;
    }
    let rest = rest[suffix..].trim_start_matches([' ', '\t']);
    let word = &rest[..rest
        .find(|c: char| !(c.is_alphabetic() || c == '.'))
        .unwrap_or(rest.len())];
    if word.is_empty() {
        return false;
    }
    // An ASCII word equals a listed one in lowercase exactly when the two are equal ignoring ASCII
    // case; only other words need `to_lowercase` (`ÉTAGE`).
    let lower = (!word.is_ascii()).then(|| word.to_lowercase());
    [
        "floor", "fl", "fl.", "level", "etage", "stock", "étage", "piso", "planta", "piano",
    ]
    .iter()
    .any(|w| w.eq_ignore_ascii_case(word) || lower.as_deref() == Some(*w))
}

/// Whether the digit groups from `at` (`-1-2`) are followed by a space and a capital: the shape of
/// `1-1-2 Oshiage`, not of a date or a range.
fn block_then_name(b: &[u8], at: usize) -> bool {
    let mut i = at;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'-') {
        i += 1;
    }
    b.get(i) == Some(&b' ') && b.get(i + 1).is_some_and(u8::is_ascii_uppercase)
}

/// Whether the word after a house number at `after` (past a `bis`/letter, a comma and spaces) is a
/// French street type.
fn french_type_after(text: &str, after: usize) -> bool {
    let mut rest = text[after..].trim_start_matches(|c: char| c.is_ascii_alphabetic());
    for _ in 0..2 {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        let word_len = rest
            .find(|c: char| !(c.is_alphabetic() || c == '.' || c == '-'))
            .unwrap_or(rest.len());
        let word = &rest[..word_len];
        if word.is_empty() || word.len() > 12 {
            return false;
        }
        if matches!(word, "bis" | "ter" | "quater") {
            rest = &rest[word_len..];
            continue;
        }
        return FRENCH.contains(word);
    }
    false
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '\'' | '’' | '.' | '-' | '/')
}

/// The words of the line before `pos`, last first, with their start offsets (at most `max`). A word
/// keeps a comma that follows it (`Тверская,`), so callers can tell a list from a name.
fn words_before(text: &str, pos: usize, max: usize) -> Vec<(usize, &str)> {
    let mut ls = line_start(text, pos).max(pos.saturating_sub(120));
    while !text.is_char_boundary(ls) {
        ls += 1;
    }
    let line = &text[ls..pos];
    let mut out = Vec::new();
    let mut idx = line.len();
    while out.len() < max {
        let trimmed = line[..idx].trim_end_matches([' ', '\t']);
        let core = trimmed.strip_suffix(',').unwrap_or(trimmed);
        let word_start = core
            .char_indices()
            .rev()
            .take_while(|&(_, c)| is_word_char(c))
            .last()
            .map_or(core.len(), |(i, _)| i);
        if word_start == core.len() {
            break;
        }
        out.push((ls + word_start, &trimmed[word_start..]));
        idx = word_start;
    }
    out
}

fn capitalised(w: &str) -> bool {
    let mut chars = w.chars();
    chars.next().is_some_and(char::is_uppercase)
        && w.chars().any(char::is_lowercase)
        && w.chars()
            .all(|c| c.is_alphabetic() || matches!(c, '\'' | '’' | '-' | '.'))
}

/// A house number at `d`: `12`, `12a`, `10/12`, `7-9`, `12 bis`; its end when it ends a word.
fn house_number(text: &str, d: usize) -> Option<usize> {
    let b = text.as_bytes();
    let digits = |i: usize| {
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() && j - i < 6 {
            j += 1;
        }
        j
    };
    let mut e = digits(d);
    if e - d > 5 {
        return None;
    }
    if e < b.len()
        && b[e].is_ascii_alphabetic()
        && !b.get(e + 1).is_some_and(u8::is_ascii_alphanumeric)
    {
        e += 1;
    }
    if e + 1 < b.len() && matches!(b[e], b'/' | b'-') && b[e + 1].is_ascii_digit() {
        let f = digits(e + 1);
        if f - e - 1 <= 5 {
            e = f;
            if e < b.len()
                && b[e].is_ascii_alphabetic()
                && !b.get(e + 1).is_some_and(u8::is_ascii_alphanumeric)
            {
                e += 1;
            }
        }
    }
    let next = text[e..].chars().next();
    if next.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '/') {
        return None;
    }
    // `12.5` is a quantity, not a house number.
    if text[e..].starts_with('.') && b.get(e + 1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some(e)
}

impl Postal {
    /// Compiles the forward forms.
    pub fn new() -> Postal {
        let city = city();
        let french_types = words::FRENCH_TYPES
            .iter()
            .map(|t| regex::escape(t))
            .collect::<Vec<_>>()
            .join("|");
        let connector = r"(?:(?:de|du|des|la|le|les|aux|au|en|sur|sous|et)[ \t]+|[lLdD]['’])";
        Postal {
            postcode_city: super::pattern(&format!(
                r"(?:[0-9]{{5}}|[0-9]{{4}}[ \t]?[A-Z]{{2}}|[0-9]{{2}}-[0-9]{{3}}|[0-9]{{4}}-[0-9]{{3}}|[0-9]{{3}}[ \t][0-9]{{2}}|[0-9]{{4}}|[0-9]{{6}},?)[ \t]+(?:г\.[ \t]*)?({city})(?:[ \t]+(?i:cedex))?(?:[ \t]+[0-9]{{1,2}}(?-u:\b))?"
            )),
            french: super::pattern(&format!(
                r"[0-9]{{1,4}}(?:[ \t]?(?:bis|ter|quater)|[A-Da-d])?,?[ \t]+(?i:{french_types})[ \t]+{connector}*{W}(?:(?:[ \t]+|-){connector}*{W}){{0,4}}"
            )),
            japanese: super::pattern(
                r"[0-9]{1,4}(?:-[0-9]{1,4}){1,2}[ \t]+[A-Z][a-z]+(?:-[a-z]+)?(?:,[ \t]*[A-Z][a-z]+-(?:ku|shi|cho|machi|gun|mura))+(?:,[ \t]*[A-Z][a-z]+(?:-(?:to|fu|ken|shi))?)?(?:,?[ \t]+〒?[0-9]{3}-[0-9]{4})?",
            ),
            kanji_block: super::pattern(
                r"[0-9]{1,4}(?:丁目|[-−ー])[0-9]{1,4}(?:(?:番地?|[-−ー])[0-9]{1,4}号?|番地?)?",
            ),
            floor: super::pattern(
                r"(?i)[0-9]{1,3}(?:st|nd|rd|th|\.|º|°|er|e)[ \t]+(?:floor|fl\.?|level|etage|stock|étage|piso|planta|piano)(?-u:\b)",
            ),
            canadian: super::pattern(
                r"[ABCEGHJ-NPRSTVXY][0-9][ABCEGHJ-NPRSTV-Z][ \t]?[0-9][ABCEGHJ-NPRSTV-Z][0-9](?-u:\b)",
            ),
        }
    }

    /// The pieces that involve the digit at `d` (a word start).
    pub fn at_digit(&self, text: &str, d: usize, out: &mut Vec<Piece>) {
        let b = text.as_bytes();
        let run = b[d..].iter().take_while(|c| c.is_ascii_digit()).count();
        let after = d + run;
        let next = b.get(after).copied().unwrap_or(b'\n');
        // Japanese: `〒131-0045`, and block numbers after kanji (`押上1-1-2`).
        if text[..d].trim_end_matches([' ', '\t']).ends_with('〒') {
            if run == 3
                && next == b'-'
                && b[after + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count()
                    == 4
            {
                let start = text[..d].trim_end_matches([' ', '\t']).len() - '〒'.len_utf8();
                out.push(piece(start, after + 5, Part::Locality, 0.95));
            }
            return;
        }
        if d > 0 && b[d - 1] >= 0x80 {
            self.kanji(text, d, out);
        }
        if run == 0 || run > 6 {
            return;
        }
        // Forward forms need a space (or a comma, or a dash for `NN-NNN`) after the digits.
        if next >= 0x80
            || matches!(next, b' ' | b'\t' | b',' | b'-' | b'a'..=b'd' | b'A'..=b'D' | b's' | b'n' | b'r' | b't' | b'e' | b'.')
        {
            self.forward(text, d, run, out);
        }
        self.backward(text, d, run, out);
    }

    fn forward(&self, text: &str, d: usize, run: usize, out: &mut Vec<Piece>) {
        let b = text.as_bytes();
        let after = d + run;
        // `3rd Floor`, `2. Stock`.
        if run <= 3
            && floor_word_after(text, after)
            && let Some((s, e)) = anchored(&self.floor, text, d)
        {
            out.push(piece(s, e, Part::Unit, 0.0));
        }
        // Japanese block numbers: `1-1-2 Oshiage, Sumida-ku, …`.
        if run <= 4
            && b.get(after) == Some(&b'-')
            && block_then_name(b, after)
            && let Some((s, e)) = anchored(&self.japanese, text, d)
        {
            out.push(piece(s, e, Part::Street, 0.9));
            return;
        }
        // The French order: `12 rue de la Paix`.
        if run <= 4
            && french_type_after(text, after)
            && let Some((s, e)) = anchored(&self.french, text, d)
        {
            out.push(piece(
                s,
                e,
                Part::Street,
                context::score(text, s, e, 0.85, words::CONTEXT_WORDS),
            ));
            return;
        }
        // The postcode before the city.
        if (4..=6).contains(&run) || run == 2 && b.get(after) == Some(&b'-') || run == 3 {
            // Most numbers here are years or counts followed by a lowercase word: test the byte
            // after the space before running the pattern.
            let city_next = text[after..]
                .trim_start_matches(|c: char| {
                    c.is_ascii_digit() || matches!(c, ' ' | '\t' | '-' | ',')
                })
                .chars()
                .next()
                .is_some_and(|c| c.is_uppercase() || c == 'г');
            if !city_next {
                return;
            }
            let Some(caps) = captures(&self.postcode_city, text, d) else {
                return;
            };
            let (s, e) = caps[0];
            let (cs, ce) = caps[1];
            let first = text[cs..ce].split([' ', '\t', '-']).next().unwrap_or("");
            if words::is_in(NOT_CITY, first) || words::is_in(ID_WORDS, first) {
                return;
            }
            let code = &text[s..cs];
            let digits = code.bytes().filter(u8::is_ascii_digit).count();
            let letters = code.bytes().any(|c| c.is_ascii_uppercase());
            // A country prefix `D-`, `CH-`, `F-` before the digits.
            let mut start = s;
            let mut base = match (digits, letters) {
                (4, true) => 0.6,
                (5, _) | (7, _) => 0.5,
                (6, _) => 0.5,
                (4, false) => 0.4,
                _ => 0.45,
            };
            if d >= 2 && b[d - 1] == b'-' {
                let letters = b[..d - 1]
                    .iter()
                    .rev()
                    .take_while(|c| c.is_ascii_uppercase())
                    .count();
                let p = d - 1 - letters;
                let glued = p > 0 && b[p - 1].is_ascii_alphanumeric();
                if letters > 0 && !glued {
                    // Only a country's prefix; other capitals glued to the digits make a code (a SKU
                    // `TG-6356`, a ticket `OPS-5190`), not a postcode.
                    if !COUNTRY_PREFIXES.contains(&&text[p..d - 1]) {
                        return;
                    }
                    start = p;
                    base = 0.8;
                }
            }
            out.push(piece(
                start,
                e,
                Part::Locality,
                context::score(text, start, e, base, words::CONTEXT_WORDS),
            ));
        }
    }

    fn backward(&self, text: &str, d: usize, run: usize, out: &mut Vec<Piece>) {
        let b = text.as_bytes();
        // Quick rejection: a house number, unit or postcode follows a word on its line, or a `#`.
        let before = text[..d].trim_end_matches([' ', '\t']);
        if before.ends_with('#') {
            let hs = before.len() - 1;
            if let Some(e) = unit_value(text, d)
                && (hs == 0 || !b[hs - 1].is_ascii_alphanumeric())
            {
                out.push(piece(hs, e, Part::Unit, 0.0));
            }
            return;
        }
        let Some(last) = before.chars().last() else {
            self.building_line(text, d, out);
            return;
        };
        if last == '\n' {
            self.building_line(text, d, out);
            return;
        }
        if !(last.is_alphabetic() || last == '.' || last == ',') {
            return;
        }
        // The word before the number decides whether to look further: a capitalised word, or a
        // listed one (`ul.`, `д.`, `suite`).
        let core = before.strip_suffix(',').unwrap_or(before);
        let w0_start = core
            .char_indices()
            .rev()
            .take_while(|&(_, c)| is_word_char(c))
            .last()
            .map_or(core.len(), |(i, _)| i);
        let w0_clean = &core[w0_start..];
        let cap0 = w0_clean.chars().next().is_some_and(char::is_uppercase);
        if w0_clean.is_empty() || !cap0 && !listed_before(w0_clean) {
            return;
        }
        let ws = words_before(text, d, 7);
        let Some(&(w0s, _)) = ws.first() else {
            return;
        };
        // A unit: `Suite 1120`, `Apt. 4C`, `PO Box 12`, `кв. 5`.
        if words::is_in(words::UNIT_WORDS, w0_clean)
            && let Some(e) = unit_value(text, d)
        {
            let mut s = w0s;
            if w0_clean.eq_ignore_ascii_case("box")
                && let Some(&(w1s, w1)) = ws.get(1)
                && matches!(
                    w1.to_ascii_lowercase().as_str(),
                    "po" | "p.o." | "o." | "p.o"
                )
            {
                s = w1s;
                if w1.eq_ignore_ascii_case("o.")
                    && let Some(&(w2s, w2)) = ws.get(2)
                    && w2.eq_ignore_ascii_case("p.")
                {
                    s = w2s;
                }
            }
            out.push(piece(s, e, Part::Unit, 0.0));
            return;
        }
        // The city before a postcode: `Springfield, IL 62704`, `Tokyo 131-0045`, `Москва 125009`.
        if self.locality(text, d, run, &ws, out) {
            return;
        }
        // The street before its house number.
        // A year after a name ("Via Rail 2024") is not a house number.
        let year = run == 4 && (text[d..].starts_with("19") || text[d..].starts_with("20"));
        if run <= 5
            && !year
            && let Some(e) = house_number(text, d)
            && let Some(s) = street_before(&ws)
        {
            out.push(piece(
                s,
                e,
                Part::Street,
                context::score(text, s, e, 0.85, words::CONTEXT_WORDS),
            ));
        }
    }

    fn locality(
        &self,
        text: &str,
        d: usize,
        run: usize,
        ws: &[(usize, &str)],
        out: &mut Vec<Piece>,
    ) -> bool {
        let b = text.as_bytes();
        let after = d + run;
        let ends = |e: usize| !text[e..].chars().next().is_some_and(char::is_alphanumeric);
        let (w0s, w0) = ws[0];
        // US: `City, ST 12345(-6789)`.
        if run == 5
            && w0.len() == 2
            && words::is_in(words::US_STATES, w0)
            && w0.bytes().all(|c| c.is_ascii_uppercase())
        {
            let mut e = after;
            if b.get(e) == Some(&b'-')
                && b[e + 1..].iter().take_while(|c| c.is_ascii_digit()).count() == 4
            {
                e += 5;
            }
            if ends(e) {
                let s = city_start(text, &ws[1..]).unwrap_or(w0s);
                let base = if s < w0s { 0.85 } else { 0.5 };
                out.push(piece(
                    s,
                    e,
                    Part::Locality,
                    context::score(text, s, e, base, words::CONTEXT_WORDS),
                ));
                return true;
            }
        }
        // Australia: `Sydney NSW 2000`.
        if run == 4
            && w0.len() <= 3
            && words::AU_STATES.contains(&w0)
            && ends(after)
            && let Some(s) = city_start(text, &ws[1..])
        {
            out.push(piece(
                s,
                after,
                Part::Locality,
                context::score(text, s, after, 0.6, words::CONTEXT_WORDS),
            ));
            return true;
        }
        // Japan: `Tokyo 131-0045`; six digits: `Москва 125009`, `Singapore 018956`.
        let jp = run == 3
            && b.get(after) == Some(&b'-')
            && b[after + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count()
                == 4;
        if (jp || run == 6)
            && capitalised(w0.trim_end_matches(','))
            && !words::is_in(ID_WORDS, w0.trim_end_matches(','))
        {
            let e = if jp { after + 5 } else { after };
            if ends(e)
                && let Some(s) = city_start(text, ws)
            {
                let base = if jp { 0.6 } else { 0.5 };
                out.push(piece(
                    s,
                    e,
                    Part::Locality,
                    context::score(text, s, e, base, words::CONTEXT_WORDS),
                ));
                return true;
            }
        }
        false
    }

    /// A line that is only a house number (`1200`), which may lead a street line.
    fn building_line(&self, text: &str, d: usize, out: &mut Vec<Piece>) {
        if let Some(e) = house_number(text, d)
            && text[e..super::address_piece::line_end(text, e)]
                .trim()
                .is_empty()
        {
            out.push(piece(d, e, Part::Building, 0.0));
        }
    }

    /// Block numbers after a kanji place name: `東京都墨田区押上1-1-2`, `押上1丁目1番2号`.
    fn kanji(&self, text: &str, d: usize, out: &mut Vec<Piece>) {
        let mut start = d;
        let mut admin = false;
        for (i, c) in text[..d].char_indices().rev().take(24) {
            if is_cjk(c) {
                admin |= matches!(
                    c,
                    '都' | '道' | '府' | '県' | '市' | '区' | '町' | '村' | '郡'
                );
                start = i;
            } else {
                break;
            }
        }
        if admin
            && start < d
            && let Some((_, e)) = anchored(&self.kanji_block, text, d)
        {
            out.push(piece(start, e, Part::Street, 0.9));
        }
    }

    /// Canadian postcodes at a capital letter `c` (`M5V 2T6`), with a province code and city before
    /// them when there are (`Toronto, ON M5V 2T6`).
    pub fn at_capital(&self, text: &str, c: usize, out: &mut Vec<Piece>) {
        let Some((s, e)) = anchored(&self.canadian, text, c) else {
            return;
        };
        let ws = words_before(text, s, 5);
        if let Some(&(ps, prov)) = ws.first()
            && prov.len() == 2
            && words::is_in(words::CA_PROVINCES, prov)
            && prov.bytes().all(|b| b.is_ascii_uppercase())
        {
            let start = city_start(text, &ws[1..]).unwrap_or(ps);
            out.push(piece(
                start,
                e,
                Part::Locality,
                context::score(text, start, e, 0.9, words::CONTEXT_WORDS),
            ));
        } else {
            out.push(piece(
                s,
                e,
                Part::Postcode,
                context::score(text, s, e, 0.5, words::CONTEXT_WORDS),
            ));
        }
    }
}

impl Default for Postal {
    fn default() -> Self {
        Self::new()
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}')
}

fn piece(start: usize, end: usize, part: Part, score: f32) -> Piece {
    Piece {
        start,
        end,
        part,
        score,
    }
}

/// The start of a city name right before `pos` on its line (`Manchester` in `Manchester M14 5TX`),
/// unless that name is a label (`Postcode`) or a unit word.
pub fn city_before(text: &str, pos: usize) -> Option<usize> {
    let ws = words_before(text, pos, 4);
    let &(_, w0) = ws.first()?;
    if words::is_in(words::LABELS, w0.trim_end_matches([',', ':'])) || w0.ends_with(':') {
        return None;
    }
    city_start(text, &ws)
}

/// The first word of a city name that ends at `ws[0]` (words given last first): one to three
/// capitalised words with connectors between them, none ending in a comma but the last.
fn city_start(text: &str, ws: &[(usize, &str)]) -> Option<usize> {
    let _ = text;
    let mut start = None;
    for (i, &(s, w)) in ws.iter().enumerate().take(4) {
        let clean = w.trim_end_matches(',');
        if i > 0 && clean.len() != w.len()
            || words::is_in(words::LABELS, clean)
            || clean.eq_ignore_ascii_case("code")
        {
            break;
        }
        if capitalised(clean) && !words::is_in(words::UNIT_WORDS, clean) {
            start = Some(s);
        } else if i == 0 || !words::is_in(words::CONNECTORS, clean) {
            break;
        }
    }
    start
}

/// The street name before a house number, given the words before it (last first): a compound
/// (`Hauptstraße`), a name then a type word (`Berliner Straße`, `Andrássy út`), or a type word then a
/// name (`Calle de Alcalá`, `ul. Marszałkowska`, `ул. Тверская, д.`). Its start.
fn street_before(ws: &[(usize, &str)]) -> Option<usize> {
    let mut i = 0;
    // `д. 7`, `Nr. 5`: a house-number marker.
    if ws
        .first()
        .is_some_and(|(_, w)| words::is_in(words::NUMBER_MARKERS, w.trim_end_matches(',')))
    {
        i = 1;
    }
    let &(s0, w0) = ws.get(i)?;
    // Only the word next to the number may carry a comma (`Calle Mayor, 5`).
    let w0 = w0.trim_end_matches(',');
    if w0.is_empty() || w0.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    // A compound: `Hauptstraße`, `Keizersgracht`, `Drottninggatan`.
    if capitalised(w0) && words::ending_in(words::COMPOUND_ENDINGS, w0).is_some() {
        return Some(s0);
    }
    // A name, then a type word: `Berliner Straße`, `Andrássy út`.
    if words::is_in(words::AFTER_NAME_TYPES, w0) {
        let mut start = None;
        for &(s, w) in ws[i + 1..].iter().take(3) {
            if w.ends_with(',') || !capitalised(w) {
                break;
            }
            start = Some(s);
        }
        return start;
    }
    // A type word, then a name: `Calle de Alcalá`, `Via Roma`, `ul. Marszałkowska`.
    let mut names = 0;
    for (k, &(s, w)) in ws[i..].iter().enumerate().take(6) {
        let clean = if k == 0 { w0 } else { w };
        if k > 0 && w.ends_with(',') {
            return None;
        }
        if words::is_in(words::PREFIX_TYPES, clean) {
            let needs_capital = words::is_in(words::CAPITALISED_PREFIXES, clean);
            if names == 0 || needs_capital && !clean.chars().next().is_some_and(char::is_uppercase)
            {
                return None;
            }
            return Some(s);
        }
        if capitalised(clean) {
            names += 1;
        } else if !words::is_in(words::CONNECTORS, clean) {
            return None;
        }
    }
    None
}

/// A unit's value at `d`: up to six letters, digits and dashes (`4C`, `1120`, `12-B`), ending a word.
fn unit_value(text: &str, d: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut e = d;
    while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'-') && e - d < 7 {
        e += 1;
    }
    while e > d && b[e - 1] == b'-' {
        e -= 1;
    }
    (e > d && e - d <= 6 && !text[e..].chars().next().is_some_and(char::is_alphanumeric))
        .then_some(e)
}

/// An anchored search at `at`: the match's span.
fn anchored(re: &Pattern, text: &str, at: usize) -> Option<(usize, usize)> {
    let input = regex_automata::Input::new(text)
        .span(at..text.len())
        .anchored(regex_automata::Anchored::Yes);
    re.search(&input).map(|m| (m.start(), m.end()))
}

/// An anchored search at `at` with the spans of every group (a group that did not take part is
/// reported as the empty span at the match's end).
fn captures(re: &Pattern, text: &str, at: usize) -> Option<Vec<(usize, usize)>> {
    let mut caps = re.create_captures();
    let input = regex_automata::Input::new(text)
        .span(at..text.len())
        .anchored(regex_automata::Anchored::Yes);
    re.search_captures(&input, &mut caps);
    let m = caps.get_match()?;
    Some(
        (0..caps.group_len())
            .map(|g| {
                caps.get_group(g)
                    .map_or((m.end(), m.end()), |s| (s.start, s.end))
            })
            .collect(),
    )
}
