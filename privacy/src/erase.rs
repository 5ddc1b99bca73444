//! Erasure matching: which stored text is a copy of a value someone asked to erase, and what it
//! becomes (`[erased]`).
//!
//! Role: `opc privacy erase VALUE` rewrites every stored text that holds VALUE; this module decides,
//! for one stored text, whether and where it holds it, and returns the rewritten text. The stores walk
//! their own tables and call [`Matcher::erase`] on each text (see `opc_agents::store::erase`).
//!
//! What is matched (and why):
//! - the value itself, **ignoring case** (Unicode simple case folding): an e-mail address typed once as
//!   `Alice@Example.com` and once as `alice@example.com` is the same person's data;
//! - its **JSON-escaped** forms, because most stored columns are JSON (session histories, progress
//!   events, cards): a value with a quote, a backslash or a control character is stored escaped
//!   (`a\"b`); a value with non-ASCII is stored raw by OPC's encoder but `\u00e9`-escaped by others;
//!   and a JSON document inside a JSON string (tool-call arguments) escapes it twice. Each of those
//!   forms, once and twice escaped, is matched, so no stored encoding keeps a copy;
//! - only at **word boundaries**: a value that starts (ends) with a letter or digit does not match
//!   when the character before (after) it is one too, so erasing `Anna` leaves `Annabel` alone. A JSON
//!   escape such as `\n` right before the value counts as a boundary.
//!
//! What is refused:
//! - an empty value, or one shorter than [`MIN_CHARS`] characters (after trimming): erasing `a` would
//!   rewrite every word with an `a` in it, including the stored structure;
//! - a rewrite that would damage a JSON document: when a text is JSON (an object or an array) before,
//!   it must still be JSON after, with the same object keys. Otherwise the value is part of the
//!   structure (a key, or a fragment of an escape), and [`Matcher::erase`] answers
//!   [`Unsafe`] so that the whole erasure is refused before anything is written.
//!
//! Invariant: the replacement, [`ERASED`], needs no escaping in JSON, so putting it where an escaped
//! form was keeps a JSON document valid.

use std::collections::BTreeSet;

use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// What every match becomes.
pub const ERASED: &str = "[erased]";

/// The shortest value (in characters, after trimming) that may be erased.
pub const MIN_CHARS: usize = 4;

/// Why a value cannot be erased.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadValue {
    /// Nothing to look for.
    #[error(
        "the value to erase is empty: pass the exact text, e.g. `opc privacy erase \"alice@example.com\"`"
    )]
    Empty,
    /// Too short to erase safely.
    #[error(
        "the value to erase is {chars} character(s) long; at least {MIN_CHARS} are needed, because a value this \
         short matches inside unrelated words and inside the stored structure (erasing \"a\" would wreck the \
         database): pass the whole value, e.g. the full e-mail address or name"
    )]
    TooShort {
        /// Its length in characters.
        chars: usize,
    },
    /// The value is `[erased]` itself (or inside it).
    #[error("the value to erase is part of the replacement text `[erased]`: nothing to do")]
    Replacement,
}

/// A stored text where erasing would break a JSON document's structure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the value occurs in the structure of a stored JSON document (an object key, or inside an escape sequence), \
     not only in its text; erasing it would make the document unreadable. Pass a longer, more specific value"
)]
pub struct Unsafe;

/// Finds a value's stored copies and rewrites them.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// Every stored form of the value, longest first, case-insensitive.
    forms: Regex,
    /// Whether the value starts / ends with a letter or digit (then a boundary is required there).
    word_start: bool,
    word_end: bool,
    chars: usize,
}

/// The value as a JSON string's contents (serde_json's escaping: quotes, backslashes, control
/// characters; non-ASCII raw).
fn json_escaped(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted
        .get(1..quoted.len().saturating_sub(1))
        .unwrap_or_default()
        .to_string()
}

/// [`json_escaped`], and every non-ASCII character as `\uXXXX` (UTF-16, surrogate pairs above the
/// BMP), as ASCII-only JSON encoders write it.
fn json_escaped_ascii(value: &str) -> String {
    let mut out = String::new();
    for c in json_escaped(value).chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

impl Matcher {
    /// A matcher for `value`, or why it cannot be erased. The value is trimmed first: a value pasted
    /// with a trailing space or newline would otherwise match only the copies followed by one.
    pub fn new(value: &str) -> Result<Matcher, BadValue> {
        let value = value.trim();
        let trimmed = value;
        if trimmed.is_empty() {
            return Err(BadValue::Empty);
        }
        let chars = trimmed.chars().count();
        if chars < MIN_CHARS {
            return Err(BadValue::TooShort { chars });
        }
        if ERASED.to_lowercase().contains(&value.to_lowercase()) {
            return Err(BadValue::Replacement);
        }
        let mut forms: BTreeSet<String> = BTreeSet::new();
        forms.insert(value.to_string());
        let once = json_escaped(value);
        forms.insert(json_escaped(&once));
        forms.insert(once);
        let ascii = json_escaped_ascii(value);
        forms.insert(json_escaped(&ascii));
        forms.insert(ascii);
        // Longest first: at one position the regex takes the first alternative that matches.
        let mut forms: Vec<String> = forms.into_iter().collect();
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        let pattern = forms
            .iter()
            .map(|f| regex::escape(f))
            .collect::<Vec<_>>()
            .join("|");
        let forms = RegexBuilder::new(&pattern)
            .case_insensitive(true)
            // The pattern is a few escaped literals; a value of a few kB is still far below this.
            .size_limit(64 << 20)
            .build()
            .map_err(|_| BadValue::TooShort { chars })?;
        let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        Ok(Matcher {
            forms,
            word_start: word(value.chars().next()),
            word_end: word(value.chars().next_back()),
            chars,
        })
    }

    /// The value's length in characters (trimmed): what the audit line records instead of the value.
    pub fn chars(&self) -> usize {
        self.chars
    }

    /// Whether the match `start..end` of `text` stands at word boundaries (see the module doc).
    fn at_boundaries(&self, text: &str, start: usize, end: usize) -> bool {
        let before_ok = !self.word_start || {
            let before = &text[..start];
            let mut back = before.chars().rev();
            match back.next() {
                Some(c) if c.is_alphanumeric() => {
                    // `\n`, `\t`… (or `\\n` twice escaped): an escape, so a boundary in the text.
                    let escape =
                        matches!(c, 'n' | 't' | 'r' | 'b' | 'f') && back.next() == Some('\\');
                    // `\u00e9` and the like: the end of an escaped character.
                    let unicode = before.len() >= 6
                        && before.is_char_boundary(before.len() - 6)
                        && before[before.len() - 6..].starts_with("\\u")
                        && before[before.len() - 4..]
                            .chars()
                            .all(|h| h.is_ascii_hexdigit());
                    escape || unicode
                }
                _ => true,
            }
        };
        let after_ok = !self.word_end
            || !text[end..]
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric);
        before_ok && after_ok
    }

    /// How many times `text` holds the value, and `text` with each occurrence replaced by
    /// [`ERASED`]; `None` when it holds none.
    fn replace(&self, text: &str) -> Option<(String, usize)> {
        let mut out = String::new();
        let mut copied = 0;
        let mut from = 0;
        let mut count = 0;
        while from <= text.len() {
            let Some(m) = self.forms.find_at(text, from) else {
                break;
            };
            if self.at_boundaries(text, m.start(), m.end()) {
                out.push_str(&text[copied..m.start()]);
                out.push_str(ERASED);
                copied = m.end();
                from = m.end();
                count += 1;
            } else {
                // Try again one character further: a later start may be at a boundary.
                from = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8);
            }
        }
        if count == 0 {
            return None;
        }
        out.push_str(&text[copied..]);
        Some((out, count))
    }

    /// Whether `text` holds the value (the same test as [`Matcher::erase`], without rewriting).
    pub fn occurs_in(&self, text: &str) -> bool {
        self.replace(text).is_some()
    }

    /// `text` with every stored form of the value replaced by [`ERASED`], and how many were replaced;
    /// `Ok(None)` when it holds none; [`Unsafe`] when `text` is a JSON document the rewrite would
    /// break (see the module doc).
    pub fn erase(&self, text: &str) -> Result<Option<(String, usize)>, Unsafe> {
        let Some((new, count)) = self.replace(text) else {
            return Ok(None);
        };
        let trimmed = text.trim_start();
        if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && let Ok(before) = serde_json::from_str::<Value>(text)
        {
            let after = serde_json::from_str::<Value>(&new).map_err(|_| Unsafe)?;
            if keys(&before) != keys(&after) {
                return Err(Unsafe);
            }
        }
        Ok(Some((new, count)))
    }
}

/// Every object key in a JSON document, sorted (a multiset).
fn keys(v: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    out.push(k.clone());
                    walk(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out.sort();
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn erased(value: &str, text: &str) -> String {
        Matcher::new(value)
            .unwrap()
            .erase(text)
            .unwrap()
            .map_or_else(|| text.to_string(), |(t, _)| t)
    }

    #[test]
    fn empty_and_short_values_are_refused() {
        assert_eq!(Matcher::new("").unwrap_err(), BadValue::Empty);
        assert_eq!(Matcher::new("   ").unwrap_err(), BadValue::Empty);
        assert_eq!(
            Matcher::new(" a ").unwrap_err(),
            BadValue::TooShort { chars: 1 }
        );
        assert!(
            Matcher::new("abc")
                .unwrap_err()
                .to_string()
                .contains("at least 4")
        );
        assert_eq!(Matcher::new("rase").unwrap_err(), BadValue::Replacement);
        assert!(Matcher::new("Anna").is_ok());
    }

    #[test]
    fn a_value_pasted_with_spaces_around_it_matches_every_copy() {
        let text = "alice@example.com. Mail alice@example.com\nor \"alice@example.com\"";
        assert_eq!(
            erased(" alice@example.com \n", text),
            "[erased]. Mail [erased]\nor \"[erased]\""
        );
    }

    #[test]
    fn every_case_variant_is_erased() {
        let text = "mail Alice@Example.COM or alice@example.com, ALICE@EXAMPLE.COM.";
        assert_eq!(
            erased("alice@example.com", text),
            "mail [erased] or [erased], [erased]."
        );
    }

    #[test]
    fn json_escaped_forms_are_erased_and_the_json_stays_valid() {
        let value = "Zoë \"Z\" O'Brien";
        let once =
            serde_json::to_string(&serde_json::json!({"text": format!("hi {value}!")})).unwrap();
        let out = erased(value, &once);
        assert_eq!(out, r#"{"text":"hi [erased]!"}"#);
        // Twice: a JSON document inside a JSON string.
        let twice = serde_json::to_string(&serde_json::json!({"args": once})).unwrap();
        let out = erased(value, &twice);
        assert!(!out.to_lowercase().contains("brien"), "{out}");
        serde_json::from_str::<Value>(&out).unwrap();
        // ASCII-only escaping of the non-ASCII letter.
        let ascii = r#"{"t":"Zo\u00EB \"Z\" O'Brien"}"#;
        assert_eq!(erased(value, ascii), r#"{"t":"[erased]"}"#);
        // After a newline escape the value is still at a boundary.
        assert_eq!(
            erased("alice@example.com", r#"{"t":"a\nalice@example.com"}"#),
            r#"{"t":"a\n[erased]"}"#
        );
    }

    #[test]
    fn only_whole_words_match() {
        assert_eq!(
            erased("Anna", "Anna and Annabel, hannah; anna's"),
            "[erased] and Annabel, hannah; [erased]'s"
        );
        // A value with punctuation at its ends needs no boundary there.
        assert_eq!(erased("@acme.io", "bob@acme.io"), "bob[erased]");
    }

    #[test]
    fn a_value_in_the_json_structure_is_refused() {
        let m = Matcher::new("content").unwrap();
        assert_eq!(m.erase(r#"{"content":"x"}"#), Err(Unsafe));
        // In a value of the same document it is fine.
        assert!(m.erase(r#"{"text":"the content"}"#).unwrap().is_some());
        // Plain text that merely looks like JSON is rewritten as text.
        assert!(m.erase("[content is here").unwrap().is_some());
    }
}
