//! `IBAN`: country code, two check digits, the BBAN (optionally grouped by spaces or dashes), checked
//! against the country's length (the SWIFT registry) and the mod-97 checksum (ISO 13616).

use super::{Pattern, Recognizer, Trigger, context};
use crate::{Entity, EntityType};

const WORDS: &[&str] = &[
    "iban", "bank", "account", "transfer", "wire", "sepa", "bic", "swift",
];

/// IBAN lengths by country (SWIFT IBAN registry, plus the experimental ones libraries commonly accept).
const LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BI", 27),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DJ", 27),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FK", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("LY", 25),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MN", 20),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NI", 28),
    ("NL", 18),
    ("NO", 15),
    ("OM", 23),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("RU", 33),
    ("SA", 24),
    ("SC", 31),
    ("SD", 18),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("SO", 23),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
    ("YE", 30),
];

/// Finds IBANs.
pub struct IbanRecognizer {
    re: Pattern,
}

impl IbanRecognizer {
    /// Compiles the pattern.
    pub fn new() -> Self {
        let re = super::pattern(r"(?-u)\b[A-Z]{2}\d{2}(?:[ -]?[A-Za-z0-9]{1,4}){3,8}\b");
        IbanRecognizer { re }
    }
}

impl Default for IbanRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `s` (compact, or grouped by spaces or dashes) is a valid IBAN.
pub fn is_iban(s: &str) -> bool {
    let compact: Vec<u8> = s.bytes().filter(|b| *b != b' ' && *b != b'-').collect();
    if compact.len() < 15 || !compact.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    // Letters in the BBAN are upper case in every registry format.
    if compact.iter().any(u8::is_ascii_lowercase) {
        return false;
    }
    let country = std::str::from_utf8(&compact[..2]).unwrap_or("");
    let Some(&(_, len)) = LENGTHS.iter().find(|(c, _)| *c == country) else {
        return false;
    };
    if compact.len() != len {
        return false;
    }
    let mut rem = 0u32;
    for &b in compact[4..].iter().chain(&compact[..4]) {
        if b.is_ascii_digit() {
            rem = (rem * 10 + u32::from(b - b'0')) % 97;
        } else {
            rem = (rem * 100 + u32::from(b - b'A' + 10)) % 97;
        }
    }
    rem == 1
}

impl Recognizer for IbanRecognizer {
    fn name(&self) -> &'static str {
        "iban"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::Iban]
    }

    fn trigger(&self) -> Trigger {
        Trigger::LONG_DIGITS
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        // A match starts at two capitals that start a word, followed by two digits: look only where
        // a run of digits follows two capitals, and search anchored there.
        let b = text.as_bytes();
        let mut starts = Vec::new();
        let mut i = 0;
        while let Some(d) = super::next_digit(b, i) {
            if d >= 2
                && b[d - 1].is_ascii_uppercase()
                && b[d - 2].is_ascii_uppercase()
                && b.get(d + 1).is_some_and(u8::is_ascii_digit)
                && !(d >= 3 && (b[d - 3].is_ascii_alphanumeric() || b[d - 3] == b'_'))
            {
                starts.push(d - 2);
            }
            // The rest of this digit run cannot follow two capitals.
            i = d + 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
        for (ms, me) in super::find_at_starts(&self.re, text, starts) {
            let s = &text[ms..me];
            // Grouped IBANs may be followed by ordinary words; shrink to the longest valid prefix
            // ending at a group boundary.
            let mut end = s.len();
            loop {
                let cand = &s[..end];
                if is_iban(cand) {
                    let (start, end) = (ms, ms + end);
                    out.push(Entity {
                        kind: EntityType::Iban,
                        start,
                        end,
                        score: context::score(text, start, end, 0.95, WORDS),
                    });
                    break;
                }
                match cand.rfind([' ', '-']) {
                    Some(i) if i >= 14 => end = i,
                    _ => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The anchored searches find every match a search over the whole text finds.
        #[test]
        fn anchored_searches_match_a_whole_text_search(
            text in "(GB82 WEST 1234 5698 7654 32|DE89370400440532013000|[A-Z]{1,3}[0-9]{1,5}|[a-z_]|[ -]){0,12}",
        ) {
            let r = IbanRecognizer::new();
            let whole = super::super::find_in_spans(&r.re, &text, [(0, text.len())]);
            let all = super::super::find_at_starts(&r.re, &text, 0..text.len());
            proptest::prop_assert_eq!(&whole, &all);
            let mut out = Vec::new();
            r.find(&text, &mut out);
            let mut reference = Vec::new();
            for (ms, me) in whole {
                let s = &text[ms..me];
                let mut end = s.len();
                loop {
                    if is_iban(&s[..end]) {
                        reference.push((ms, ms + end));
                        break;
                    }
                    match s[..end].rfind([' ', '-']) {
                        Some(i) if i >= 14 => end = i,
                        _ => break,
                    }
                }
            }
            let found: Vec<(usize, usize)> = out.iter().map(|e| (e.start, e.end)).collect();
            proptest::prop_assert_eq!(found, reference);
        }
    }

    fn spans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        IbanRecognizer::new().find(text, &mut out);
        out.iter().map(|e| e.text(text)).collect()
    }

    #[test]
    fn finds_grouped_and_compact_ibans() {
        assert_eq!(
            spans("IBAN: GB82 WEST 1234 5698 7654 32."),
            vec!["GB82 WEST 1234 5698 7654 32"]
        );
        assert_eq!(
            spans("PT50000201231234567890154"),
            vec!["PT50000201231234567890154"]
        );
        assert_eq!(
            spans("SC18 SSCB 1101 0000 0000 0000 1497 USD"),
            vec!["SC18 SSCB 1101 0000 0000 0000 1497 USD"]
        );
        assert_eq!(
            spans("to AT61 1904 3002 3457 3201 today"),
            vec!["AT61 1904 3002 3457 3201"]
        );
    }

    #[test]
    fn rejects_bad_checksums_lengths_and_case() {
        assert!(spans("AT61 1904 3002 3457 3202").is_empty());
        assert!(spans("AT61 1904 3002 3457 320").is_empty());
        assert!(spans("LV80 bANK 0000 4351 9500 1").is_empty());
        assert!(spans("XX82 WEST 1234 5698 7654 32").is_empty());
    }
}
