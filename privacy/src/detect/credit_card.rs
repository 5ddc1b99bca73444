//! `CREDIT_CARD`: 13 to 19 digits, plain or grouped by one kind of separator (space or dash), starting
//! with a card network's digit (1 to 6), and passing the Luhn check.

use super::{Pattern, Recognizer, Trigger, context};
use crate::{Entity, EntityType};

const WORDS: &[&str] = &[
    "card",
    "credit",
    "debit",
    "visa",
    "mastercard",
    "amex",
    "cc",
    "pan",
    "payment",
];

/// The bytes of a match: digits and separators (searched only in runs of them with 13+ digits).
const BYTES: [bool; 256] = super::digits_and(b" -");

/// Finds payment card numbers.
pub struct CreditCardRecognizer {
    re: Pattern,
}

impl CreditCardRecognizer {
    /// Compiles the pattern.
    pub fn new() -> Self {
        let re = super::pattern(r"(?-u)\b\d+(?:[ -]\d+)*\b");
        CreditCardRecognizer { re }
    }
}

impl Default for CreditCardRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// The Luhn checksum over ASCII digits.
pub fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// Whether `s` (digits with optional spaces or dashes) is a card number.
pub fn is_card(s: &str) -> bool {
    let seps: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_digit()).collect();
    if seps.windows(2).any(|w| w[0] != w[1]) {
        return false;
    }
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_digit).collect();
    (13..=19).contains(&digits.len())
        && (b'1'..=b'6').contains(&digits[0])
        // 13 digits starting with 1 is a Unix time in milliseconds (2001 to 2286), not a card.
        && !(digits.len() == 13 && digits[0] == b'1')
        && digits.iter().any(|&d| d != digits[0])
        && luhn(&digits)
}

impl Recognizer for CreditCardRecognizer {
    fn name(&self) -> &'static str {
        "credit_card"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::CreditCard]
    }

    fn trigger(&self) -> Trigger {
        Trigger::LONG_DIGITS
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        for m in super::matches_in_digit_runs(&self.re, text, &BYTES, 13, 0, |_| false) {
            if super::before_is(text, m.start(), |b| b == b'.' || b == b'+')
                || super::after_is(text, m.end(), |b| b == b'.')
                    && super::after_is(text, m.end() + 1, |b| b.is_ascii_digit())
            {
                continue;
            }
            let s = m.as_str();
            if s.len() < 13 {
                continue;
            }
            // Digit groups; a card is a run of consecutive groups. Take the longest valid run from
            // each group, left to right.
            let mut groups: Vec<(usize, usize)> = Vec::new();
            let mut at = 0;
            for part in s.split([' ', '-']) {
                groups.push((at, at + part.len()));
                at += part.len() + 1;
            }
            let mut i = 0;
            while i < groups.len() {
                let mut next = i + 1;
                for j in (i..groups.len()).rev() {
                    let (a, b) = (groups[i].0, groups[j].1);
                    if b - a > 23 {
                        continue;
                    }
                    if is_card(&s[a..b]) {
                        let (start, end) = (m.start() + a, m.start() + b);
                        out.push(Entity {
                            kind: EntityType::CreditCard,
                            start,
                            end,
                            score: context::score(text, start, end, 0.95, WORDS),
                        });
                        next = j + 1;
                        break;
                    }
                }
                i = next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        CreditCardRecognizer::new().find(text, &mut out);
        out.iter().map(|e| e.text(text)).collect()
    }

    #[test]
    fn finds_luhn_valid_numbers_with_separators() {
        assert_eq!(
            spans("4012888888881881 4012-8888-8888-1881 4012 8888 8888 1881"),
            vec![
                "4012888888881881",
                "4012-8888-8888-1881",
                "4012 8888 8888 1881"
            ]
        );
        assert_eq!(
            spans("amex 3714 496353 98431 ok"),
            vec!["3714 496353 98431"]
        );
        assert_eq!(
            spans("my credit card: 122000000000003"),
            vec!["122000000000003"]
        );
    }

    #[test]
    fn rejects_bad_luhn_mixed_separators_and_short_runs() {
        assert!(spans("4012-8888-8888-1882").is_empty());
        assert!(spans("36168002586008").is_empty());
        assert!(spans("1748503543012").is_empty());
        assert!(spans("4012-8888 8888-1881").is_empty());
        assert!(spans("order 4111111 shipped").is_empty());
        assert!(spans("0000000000000000").is_empty());
    }
}
