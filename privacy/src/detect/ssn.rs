//! `SSN`: US social security numbers, `AAA-GG-SSSS` (dashes, dots or spaces, used consistently) or nine
//! bare digits. The SSA's rules reject area 000, 666 and 900–999, group 00 and serial 0000. Nine bare
//! digits are weak (order numbers, phone fragments) and need a context word; a few numbers published
//! in advertisements (`078051120`) are rejected bare, but in the SSN's own 3-2-4 format
//! (`078-05-1120`) they are SSNs like any other (the phone recogniser never claims that grouping).

use super::{Pattern, Recognizer, Trigger, context};
use crate::{Entity, EntityType};

const WORDS: &[&str] = &[
    "ssn",
    "social security",
    "social",
    "security number",
    "ss#",
    "ssa",
    "taxpayer",
    "tin",
];

/// Numbers that pass the rules but were published (Woolworth's wallet card, a 1940s advert, samples).
const PUBLISHED: &[&str] = &["078051120", "219099999", "123456789", "457555462"];

/// The bytes of a match: digits and separators (searched only in runs of them with 9+ digits).
const BYTES: [bool; 256] = super::digits_and(b" .-");

/// Finds US social security numbers.
pub struct SsnRecognizer {
    re: Pattern,
}

impl SsnRecognizer {
    /// Compiles the pattern.
    pub fn new() -> Self {
        let re = super::pattern(
            r"(?-u)\b(?:\d{3}-\d{2}-\d{4}|\d{3}\.\d{2}\.\d{4}|\d{3} \d{2} \d{4}|\d{9})\b",
        );
        SsnRecognizer { re }
    }
}

impl Default for SsnRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether the nine digits follow the SSA's rules and are not a published number.
pub fn is_ssn(digits: &[u8]) -> bool {
    follows_rules(digits) && !PUBLISHED.iter().any(|p| p.as_bytes() == digits)
}

/// Whether the nine digits follow the SSA's rules (published numbers included: written in the SSN's
/// own format, `078-05-1120` is an SSN to mask, whoever first printed it).
fn follows_rules(digits: &[u8]) -> bool {
    if digits.len() != 9 {
        return false;
    }
    let area = &digits[..3];
    let group = &digits[3..5];
    let serial = &digits[5..];
    !(area == b"000" || area == b"666" || area[0] == b'9')
        && group != b"00"
        && serial != b"0000"
        && digits.iter().any(|&d| d != digits[0])
}

impl Recognizer for SsnRecognizer {
    fn name(&self) -> &'static str {
        "ssn"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::Ssn]
    }

    fn trigger(&self) -> Trigger {
        Trigger::LONG_DIGITS
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        for m in super::matches_in_digit_runs(&self.re, text, &BYTES, 9, 0, |_| false) {
            // Part of a longer number or a version string (`1.078-05-1123`, `078-05-1123-4`).
            if super::before_is(text, m.start(), |b| matches!(b, b'-' | b'.' | b'+' | b'/'))
                || super::after_is(text, m.end(), |b| b == b'-' || b == b'/')
                || (super::after_is(text, m.end(), |b| b == b'.')
                    && super::after_is(text, m.end() + 1, |b| b.is_ascii_digit()))
            {
                continue;
            }
            let digits: Vec<u8> = m.as_str().bytes().filter(u8::is_ascii_digit).collect();
            // A published number without separators is as often a sample or an unrelated number.
            let formatted = m.len() == 11;
            if !(if formatted {
                follows_rules(&digits)
            } else {
                is_ssn(&digits)
            }) {
                continue;
            }
            // 3-2-4 with dashes is the SSN's own format; dots or spaces are a little less telling.
            let base = match m.as_str().as_bytes()[3] {
                b'-' => 0.95,
                b'.' | b' ' => 0.9,
                _ => 0.5,
            };
            out.push(Entity {
                kind: EntityType::Ssn,
                start: m.start(),
                end: m.end(),
                score: context::score(text, m.start(), m.end(), base, WORDS),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<(&str, f32)> {
        let mut out = Vec::new();
        SsnRecognizer::new().find(text, &mut out);
        out.iter().map(|e| (e.text(text), e.score)).collect()
    }

    #[test]
    fn formatted_numbers_are_found() {
        assert_eq!(spans("078-05-1123"), vec![("078-05-1123", 0.95)]);
        for t in ["078.05.1123", "078 05 1123"] {
            assert_eq!(spans(t), vec![(t, 0.9)]);
        }
        assert_eq!(spans("abc 078 05 1123 abc")[0].0, "078 05 1123");
        assert_eq!(spans("my ssn is 078-05-1123")[0].1, 1.0);
    }

    #[test]
    fn published_numbers_count_only_in_the_ssn_format() {
        assert_eq!(spans("SSN 078-05-1120"), vec![("078-05-1120", 1.0)]);
        assert_eq!(spans("078 05 1120"), vec![("078 05 1120", 0.9)]);
        assert!(spans("ssn 078051120").is_empty());
    }

    #[test]
    fn bare_digits_need_context() {
        assert_eq!(spans("078051121"), vec![("078051121", 0.5)]);
        assert_eq!(spans("SSN: 078051121")[0].1, 0.85);
    }

    #[test]
    fn invalid_areas_groups_serials_and_formats_are_rejected() {
        for t in [
            "0780511201",
            "078051120",
            "123456789",
            "000000000",
            "666000000",
            "078-05-0000",
            "078 00 1123",
            "693-09.4444",
            "900-12-3456",
            "666-12-3456",
            "000-12-3456",
        ] {
            assert!(spans(t).is_empty(), "{t}");
        }
    }
}
