//! `PHONE`: candidates are runs of digit groups (an optional `+country`, an optional `(area)`, single
//! separators), validated by libphonenumber's metadata (the `phonenumber` crate), never by shape alone.
//!
//! Regions: a number written with `+` is parsed as international. Otherwise it is tried as a US
//! number (the default region), then, when it starts with a national trunk `0`, in a few regions
//! whose local formats are common (GB, DE, FR, IL, JP, IN, IT, AU, NL, ES, BR), as a Chinese mobile
//! when it looks like one, and finally, with 11 or more digits, as an international number written
//! without its `+`. A run of groups that fails is retried without its last group.
//!
//! Scores: a formatted number (`+`, parentheses or separators) is strong (0.9), or 0.85 when it is valid
//! only in a non-default region's local format (so a US SSN `078-05-1123`, which is also a valid German
//! number, stays an SSN); a bare digit run that happens to be valid is weak (0.6) and needs a context
//! word ("phone", "call me at", "mobile").

use super::{Pattern, Recognizer, Trigger, context};
use crate::{Entity, EntityType};
use phonenumber::country::Id;

const WORDS: &[&str] = &[
    "phone",
    "call",
    "tel",
    "telephone",
    "mobile",
    "cell",
    "fax",
    "number",
    "whatsapp",
    "reach me",
    "contact",
    "dial",
    "text me",
    "sms",
    "ring",
];

const TRUNK_REGIONS: &[Id] = &[
    Id::GB,
    Id::DE,
    Id::FR,
    Id::IL,
    Id::JP,
    Id::IN,
    Id::IT,
    Id::AU,
    Id::NL,
    Id::ES,
    Id::BR,
];

/// The bytes of a match before its extension: digits, `+`, parentheses, separators and whitespace.
const BYTES: [bool; 256] = super::digits_and(b"+(). -\t\n\x0B\x0C\r");

/// Finds phone numbers.
pub struct PhoneRecognizer {
    re: Pattern,
}

impl PhoneRecognizer {
    /// Compiles the candidate pattern.
    pub fn new() -> Self {
        let re = super::pattern(
            r"(?-u)(?:\+\d{1,3}|\(\d{1,5}\)|\d{1,5})(?:(?:[ .-]|\s?)(?:\(\d{1,5}\)|\d{1,5})){1,6}(?:\s?(?:ext\.?|x)\s?\d{1,5})?",
        );
        PhoneRecognizer { re }
    }
}

impl Default for PhoneRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// How many compiled metadata patterns libphonenumber's port keeps. Its default, 100, is fewer than
/// one validation across the regions tried here touches, so the cache thrashed and nearly every
/// candidate recompiled a dozen patterns (95% of the time on PII-dense text).
const REGEX_CACHE: usize = 2048;

/// Raise the `phonenumber` database's pattern cache to [`REGEX_CACHE`] (once per process, at the first
/// validation, which loads the database anyway: constructing a detector stays cheap).
fn enlarge_regex_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cache = phonenumber::metadata::DATABASE.cache();
        let mut cache = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *cache = regex_cache::RegexCache::new(REGEX_CACHE);
    });
}

fn valid_in(region: Option<Id>, s: &str) -> bool {
    enlarge_regex_cache();
    phonenumber::parse(region, s).is_ok_and(|n| phonenumber::is_valid(&n))
}

/// How a candidate validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// Written with `+country`, or valid in the default region (US).
    Strong,
    /// Valid only in another region's local format, or as an international number missing its `+`.
    Local,
}

/// Whether `s` is a valid phone number in one of the regions tried (see the module docs).
pub fn validate(s: &str) -> Option<Validity> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_digit).collect();
    if !(7..=15).contains(&digits.len()) {
        return None;
    }
    if s.starts_with('+') {
        return valid_in(None, s).then_some(Validity::Strong);
    }
    // NANP numbers have 10 digits (11 with the leading 1), the area code and exchange start with 2-9.
    let nanp = match digits.len() {
        10 => Some(&digits[..]),
        11 if digits[0] == b'1' => Some(&digits[1..]),
        _ => None,
    };
    if nanp.is_some_and(|d| d[0] >= b'2' && d[3] >= b'2') && valid_in(Some(Id::US), s) {
        return Some(Validity::Strong);
    }
    let first = s.trim_start_matches('(').as_bytes().first().copied();
    if first == Some(b'0')
        && (8..=12).contains(&digits.len())
        && TRUNK_REGIONS.iter().any(|r| valid_in(Some(*r), s))
    {
        return Some(Validity::Local);
    }
    if digits.len() == 11 && digits[0] == b'1' && valid_in(Some(Id::CN), s) {
        return Some(Validity::Local);
    }
    (digits.len() >= 11 && first != Some(b'0') && valid_in(None, &format!("+{s}")))
        .then_some(Validity::Local)
}

/// Whether `s` is a valid phone number (see [`validate`]).
pub fn is_phone(s: &str) -> bool {
    validate(s).is_some()
}

impl Recognizer for PhoneRecognizer {
    fn name(&self) -> &'static str {
        "phone"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::Phone]
    }

    fn trigger(&self) -> Trigger {
        Trigger::LONG_DIGITS
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        // 2+ digits in the run: with an extension (`ext. 12345`, up to 11 bytes after the run, which
        // holds the whitespace before it) a candidate needs 7.
        for m in super::matches_in_digit_runs(&self.re, text, &BYTES, 2, 11, |b| {
            b.starts_with(b"ext") || b.starts_with(b"x")
        }) {
            let start = m.start();
            if super::before_is(text, start, |b| {
                b.is_ascii_digit() || matches!(b, b'+' | b'.' | b'/' | b'-' | b'_' | b'$' | b'#')
            }) || super::after_is(text, m.end(), |b| {
                b.is_ascii_digit() || b == b'/' || b == b'%'
            }) {
                continue;
            }
            let mut s = m.as_str();
            for _ in 0..3 {
                let digits = s.bytes().filter(u8::is_ascii_digit).count();
                if digits < 7 {
                    break;
                }
                // A trailing `.` or `-` followed by a digit means a longer token (a date, a version).
                let end = start + s.len();
                let validity = validate(s);
                if validity.is_some()
                    && !(s.len() == m.len()
                        && super::after_is(text, end, |b| b == b'.' || b == b'-')
                        && super::after_is(text, end + 1, |b| b.is_ascii_digit()))
                {
                    let formatted = s.starts_with('+')
                        || s.contains('(')
                        || s.bytes().any(|b| matches!(b, b' ' | b'-' | b'.'));
                    let base = match (formatted, validity) {
                        (false, _) => 0.6,
                        (true, Some(Validity::Strong)) => 0.9,
                        (true, _) => 0.85,
                    };
                    out.push(Entity {
                        kind: EntityType::Phone,
                        start,
                        end,
                        score: context::score(text, start, end, base, WORDS),
                    });
                    break;
                }
                // Retry without the last group.
                match s.rfind(|c: char| !c.is_ascii_digit() && c != ')') {
                    Some(i) if i > 0 => s = s[..i].trim_end_matches([' ', '.', '-', '(']),
                    _ => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        PhoneRecognizer::new().find(text, &mut out);
        out.iter().map(|e| e.text(text)).collect()
    }

    #[test]
    fn finds_us_and_international_formats() {
        assert_eq!(
            spans("My US number is (415) 555-0132, and my international one is +1 415 555 0132"),
            vec!["(415) 555-0132", "+1 415 555 0132"]
        );
        assert_eq!(
            spans("call +44 20 7946 0958 today"),
            vec!["+44 20 7946 0958"]
        );
        assert_eq!(spans("(212) 555-0199"), vec!["(212) 555-0199"]);
        assert_eq!(spans("+44 (20) 7123 4567"), vec!["+44 (20) 7123 4567"]);
        assert_eq!(spans("My Israeli number is 09-7625400"), vec!["09-7625400"]);
        assert_eq!(
            spans("My Japanese number is 090-1234-5678"),
            vec!["090-1234-5678"]
        );
        assert_eq!(spans("My CN number is 13812345678"), vec!["13812345678"]);
        assert_eq!(spans("+33 1 42 68 53 00"), vec!["+33 1 42 68 53 00"]);
    }

    #[test]
    fn bare_runs_are_weak_and_dates_are_not_phones() {
        let mut out = Vec::new();
        PhoneRecognizer::new().find("id 4155550132", &mut out);
        assert_eq!(out[0].score, 0.6);
        for t in [
            "on 2024-01-15",
            "version 1.2.3",
            "total 12345",
            "4012-8888-8888-1882",
            "3.14159265",
        ] {
            assert!(spans(t).is_empty(), "{t}: {:?}", spans(t));
        }
    }
}
