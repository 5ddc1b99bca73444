//! `ADDRESS` rules (the NER tier finds the rest). This file holds the US street template and UK
//! postcodes, and drives the others:
//! - US-style street addresses: a house number, a street name of one to four words, a suffix (St,
//!   Street, Ave, Rd, Blvd, Lane, …), an optional unit (Apt 4B, Suite 200, #12), and an optional
//!   `, City, ST 12345` or `, City ST 12345-6789`;
//! - UK postcodes (`SW1A 1AA`), which alone are weak and need a context word ("postcode", "address");
//! - international forms and units (`postal.rs`), military and diplomatic addresses (`military.rs`);
//! - all of them as pieces that `address_lines.rs` joins into one span per address, across the lines
//!   of a letter or a signature block.
//!
//! Every form is found at a digit (a house number, a postcode, a unit number), so the recogniser
//! runs only on texts with a digit, and looks only around digits that start a word.

use super::address_lines;
use super::address_piece::{Part, Piece};
use super::address_words::CONTEXT_WORDS;
use super::military::Military;
use super::postal::Postal;
use super::{Pattern, Recognizer, Trigger};
use crate::{Entity, EntityType};

/// USPS street suffixes (Publication 28, C1) and their common abbreviations; a few that are mostly
/// ordinary words after a number ("Union", "Rest", "Well") are left out.
const SUFFIXES: &str = "Expressway|Extensions|Throughway|Trafficway|Boulevard|Crossroad|Extension|Junctions|Mountains|Stravenue|Underpass|Causeway|Crescent|Crossing|Junction|Motorway|Mountain|Overpass|Parkways|Turnpike|Villages|Centers|Circles|Corners|Estates|Freeway|Gardens|Gateway|Harbors|Heights|Highway|Islands|Landing|Meadows|Mission|Orchard|Parkway|Passage|Prairie|Springs|Squares|Station|Streets|Terrace|Valleys|Viaduct|Village|Avenue|Branch|Bridge|Brooks|Bypass|Canyon|Center|Circle|Cliffs|Common|Corner|Course|Courts|Divide|Drives|Estate|Fields|Forest|Forges|Garden|Greens|Groves|Harbor|Hollow|Island|Knolls|Lights|Manors|Meadow|Plains|Points|Radial|Rapids|Ridges|Shoals|Shores|Skyway|Spring|Square|Stream|Street|Summit|Tunnel|Valley|Alley|Brook|Burgs|Cliff|Close|Court|Coves|Creek|Crest|Curve|Drive|Falls|Ferry|Field|Flats|Fords|Forge|Forks|Glens|Green|Grove|Haven|Hills|Inlet|Knoll|Lakes|Light|Locks|Lodge|Manor|Mills|Mount|Parks|Pines|Place|Plain|Plaza|Point|Ports|Ranch|Rapid|Ridge|River|Roads|Route|Shoal|Shore|Spurs|Trace|Track|Trail|Views|Ville|Vista|Walks|Blvd|Burg|Camp|Cape|Club|Cove|Cres|Dale|Expy|Fall|Flat|Ford|Fork|Fort|Glen|Hill|Isle|Keys|Lake|Land|Lane|Loaf|Lock|Loop|Mall|Mews|Mill|Neck|Oval|Park|Pass|Path|Pike|Pine|Pkwy|Port|Ramp|Road|Spur|Tpke|View|Walk|Wall|Ways|Ave|Cir|Dam|Fwy|Hwy|Key|Row|Rue|Run|Ter|Trl|Via|Way|Av|Ct|Dr|Ln|Pl|Rd|Sq|St";

/// US state and territory codes, for the `, City, ST 12345` tail.
const STATES: &str = "AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY|PR|GU|VI";

/// Words that start a phrase, not a street name ("chapter 3 The Way Forward", "5 Of The Best Road Trips").
const STOP: &[&str] = &[
    "The", "A", "An", "Of", "In", "On", "At", "And", "For", "To", "By", "Our", "My", "Your",
    "Their", "This", "That", "These", "Those", "Best", "Top", "More", "Easy", "Ways", "Days",
    "Years", "Steps",
];

/// Finds street addresses and postcodes.
pub struct AddressRecognizer {
    street: Pattern,
    postcode: Pattern,
    postal: Postal,
    military: Military,
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether the street pattern can match at the digit `d`: its house number (`\d{1,6}`, a letter, a
/// `-` and digits) must be followed by whitespace and a word the street name can start with (a
/// capital or a digit, or one of the lowercase words it allows: `of`, `the`, `de`, `la`). Most numbers
/// in prose ("3 times", "in 2024.") fail this at once, so the pattern runs at few digits.
fn street_can_start(b: &[u8], d: usize) -> bool {
    let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r');
    let digits = |i: usize| b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    let n = digits(d);
    if n > 6 {
        return false;
    }
    let mut i = d + n;
    if b.get(i).is_some_and(u8::is_ascii_alphabetic) {
        i += 1;
    }
    if b.get(i) == Some(&b'-') && i + 1 < b.len() {
        let k = digits(i + 1);
        if (1..=5).contains(&k) {
            i += 1 + k;
        }
    }
    if !b.get(i).is_some_and(|&c| space(c)) {
        return false;
    }
    while b.get(i).is_some_and(|&c| space(c)) {
        i += 1;
    }
    let rest = &b[i..];
    match rest.first() {
        Some(c) if c.is_ascii_uppercase() || c.is_ascii_digit() => true,
        Some(b'o' | b't' | b'd' | b'l') => [&b"of"[..], b"the", b"de", b"la"]
            .iter()
            .any(|w| rest.starts_with(w) && rest.get(w.len()).is_some_and(|&c| space(c))),
        _ => false,
    }
}

impl AddressRecognizer {
    /// Compiles the patterns.
    pub fn new() -> Self {
        let street = format!(
            r"(?-u)\b\d{{1,6}}[A-Za-z]?(?:-\d{{1,5}})?\s+(?:(?:N|S|E|W|NE|NW|SE|SW|North|South|East|West)\.?\s+)?(?:(?:[A-Z][a-z]*(?:'?[A-Z][a-z]+)+|[A-Z][a-z]+|[A-Z]{{2,}}|\d{{1,3}}(?:st|nd|rd|th)|[Oo]f|[Tt]he|de|la|St\.?)\s+){{1,4}}(?:{SUFFIXES})\b\.?(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\b\.?)?(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Floor|Fl|Room|Rm|Bldg|Building)\.?\s*#?\s*[A-Za-z0-9-]{{1,6}}|,?\s+#\s?[A-Za-z0-9-]{{1,6}})?(?:,\s*[A-Z][a-z]+(?:[ -][A-Z][a-z]+){{0,3}}(?:,\s*|\s+)(?:{STATES})\b(?:\s+\d{{5}}(?:-\d{{4}})?)?|,\s*[A-Z][a-z]+(?:[ -][A-Z][a-z]+){{0,2}}(?:,?\s+[A-Z]{{1,2}}\d[A-Z\d]?\s*\d[A-Z]{{2}}\b|\s+\d{{5}}\b))?"
        );
        let street = super::pattern(&street);
        let postcode =
            super::pattern(r"(?-u)\b(?:[A-Z]{1,2}\d[A-Z\d]?\s?\d[ABD-HJLNP-UW-Z]{2}|GIR ?0AA)\b");
        AddressRecognizer {
            street,
            postcode,
            postal: Postal::new(),
            military: Military::new(),
        }
    }
}

impl Default for AddressRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Recognizer for AddressRecognizer {
    fn name(&self) -> &'static str {
        "address"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::Address]
    }

    fn trigger(&self) -> Trigger {
        Trigger::DIGIT
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        let bytes = text.as_bytes();
        // A street line starts with a digit at a word start; a postcode with a capital at a word
        // start and a digit within its next four bytes. Search only there.
        let (mut streets, mut postcodes) = (Vec::new(), Vec::new());
        let mut pieces: Vec<Piece> = Vec::new();
        let mut at = 0;
        while let Some(d) = super::next_digit(bytes, at) {
            if d == 0 || !word(bytes[d - 1]) {
                if street_can_start(bytes, d) {
                    streets.push(d);
                }
                self.postal.at_digit(text, d, &mut pieces);
                self.military.at_digit(text, d, &mut pieces);
            }
            for c in d.saturating_sub(4)..d {
                if bytes[c].is_ascii_uppercase()
                    && (c == 0 || !word(bytes[c - 1]))
                    && postcodes.last().is_none_or(|&l| l < c)
                {
                    postcodes.push(c);
                }
            }
            // The rest of this digit run starts no word, and the postcode windows of its digits
            // add only digits to this one's: go on after the run.
            at = d + 1;
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                at += 1;
            }
        }
        for (ms, me) in super::find_at_starts(&self.street, text, streets) {
            let m = &text[ms..me];
            if super::before_is(text, ms, |b| matches!(b, b'.' | b'-' | b'/' | b'$' | b':')) {
                continue;
            }
            let first = m.split_whitespace().nth(1).unwrap_or("");
            if STOP.contains(&first) {
                continue;
            }
            let end = ms + m.trim_end_matches('.').len();
            // A full street line with a suffix is strong; "3 Main Street" in "3 Main Street-level
            // shops" still counts, as a person would read it as a place.
            pieces.push(Piece {
                start: ms,
                end,
                part: Part::Street,
                score: super::context::score(text, ms, end, 0.85, CONTEXT_WORDS),
            });
        }
        for &c in &postcodes {
            self.postal.at_capital(text, c, &mut pieces);
        }
        for (ms, me) in super::find_at_starts(&self.postcode, text, postcodes) {
            // A city before it makes a locality (`Manchester M14 5TX`); a label before it
            // ("Postcode") is context, never part of the span.
            let (start, part, base) = match super::postal::city_before(text, ms) {
                Some(c) => (c, Part::Locality, 0.6),
                None => (ms, Part::Postcode, 0.55),
            };
            pieces.push(Piece {
                start,
                end: me,
                part,
                score: super::context::score(text, start, me, base, CONTEXT_WORDS),
            });
        }
        address_lines::join(text, pieces, out);
    }
}

#[cfg(test)]
mod cases;

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<(&str, f32)> {
        let mut out = Vec::new();
        AddressRecognizer::new().find(text, &mut out);
        out.iter().map(|e| (e.text(text), e.score)).collect()
    }

    #[test]
    fn street_lines_with_units_and_city_tails() {
        assert_eq!(
            spans("I live at 1600 Pennsylvania Avenue NW, Washington, DC 20500.")[0].0,
            "1600 Pennsylvania Avenue NW, Washington, DC 20500"
        );
        assert_eq!(
            spans("Ship to 42 Elm St, Apt 4B, Springfield, IL 62704 please")[0].0,
            "42 Elm St, Apt 4B, Springfield, IL 62704"
        );
        assert_eq!(
            spans("office at 350 5th Ave Suite 200 since May")[0].0,
            "350 5th Ave Suite 200"
        );
        assert_eq!(
            spans("10 Downing Street, London SW1A 2AA")[0].0,
            "10 Downing Street, London SW1A 2AA"
        );
        assert_eq!(spans("meet at 221B Baker Street")[0].0, "221B Baker Street");
        assert_eq!(spans("to 282 McCullough Rd.")[0].0, "282 McCullough Rd");
        assert_eq!(
            spans("at 959 D'Amore Gardens, now")[0].0,
            "959 D'Amore Gardens"
        );
    }

    proptest::proptest! {
        /// The pre-check never turns away a digit where the street pattern matches.
        #[test]
        fn the_street_precheck_keeps_every_match(
            text in "([0-9]{1,7}|[A-Za-z]|-|[ \t\n]|Main|St|of|the|de|la|lo|2nd|Ave|\\.){0,14}",
        ) {
            let r = AddressRecognizer::new();
            let b = text.as_bytes();
            for d in 0..b.len() {
                if !b[d].is_ascii_digit() {
                    continue;
                }
                let input = regex_automata::Input::new(&text)
                    .span(d..text.len())
                    .anchored(regex_automata::Anchored::Yes);
                if r.street.search(&input).is_some() {
                    proptest::prop_assert!(street_can_start(b, d), "{text:?} at {d}");
                }
            }
        }
    }

    #[test]
    fn postcodes_alone_need_context() {
        assert_eq!(spans("code EC1A 1BB"), vec![("EC1A 1BB", 0.55)]);
        assert_eq!(spans("postcode EC1A 1BB")[0].1, 0.9);
    }

    #[test]
    fn numbers_before_ordinary_words_are_not_addresses() {
        for t in [
            "We sold 300 Apples and 20 Pears",
            "chapter 3 The Way Forward",
            "it took 5 days",
            "2 Street",
        ] {
            assert!(spans(t).is_empty(), "{t}: {:?}", spans(t));
        }
    }
}
