//! The egress guard's search, and the sweep that masks known values the detector missed.
//!
//! Invariants:
//! - one Aho-Corasick automaton (all overlapping matches) over every real value and every substitute,
//!   each also in its JSON-escaped forms (serde_json's escaping of quotes, backslashes and control
//!   characters; `\uXXXX` for non-ASCII in lower- and upper-case hex, as other wire clients write it;
//!   `\/` for slashes; escaped twice for JSON text inside a JSON string), so a real value is found in a
//!   serialised request body too;
//! - a real value counts only where it stands alone: not glued to letters (or digits) on either side,
//!   so the name `Ann` is not found in `Annual`; a JSON escape such as `\n` right before it is a
//!   boundary, so `"…\nAnn…"` is still found;
//! - a real value found inside an occurrence of a substitute is not a leak (a fake may contain a real
//!   value as a word, and a real value that equals an earlier fake is indistinguishable from it: the
//!   guard cannot protect such a value, the masking still replaces it);
//! - the sweep in `mask` and the guard use the same rules, so text masked by `mask` passes the guard
//!   unless the wire format itself carries a value the masking never saw;
//! - real values shorter than three characters are neither swept nor guarded (see `MIN_GUARDED_CHARS`);
//! - if the automaton cannot be built (aho-corasick's size limits), the guard reports a leak: it fails
//!   closed.

use std::collections::HashMap;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input};

use crate::entity::EntityType;
use crate::mapping::Entry;

/// Real values shorter than this (an initial, "Al") are masked where the detector found them but are
/// neither swept nor guarded: masking every standalone "Al" in a conversation would garble it, and the
/// guard would fail calls on ordinary words.
const MIN_GUARDED_CHARS: usize = 3;

/// How a pattern was derived from a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Raw,
    /// serde_json's string escaping, without the quotes.
    Json,
    /// JSON with every non-ASCII character as `\uxxxx` (lower-case hex, surrogate pairs).
    JsonAsciiLower,
    /// The same in upper-case hex.
    JsonAsciiUpper,
    /// JSON with `/` written `\/`.
    JsonSlash,
    /// JSON escaping applied twice: JSON text carried inside a JSON string (a tool result that is JSON).
    JsonTwice,
}

impl Variant {
    const ALL: [Variant; 6] = [
        Variant::Raw,
        Variant::Json,
        Variant::JsonAsciiLower,
        Variant::JsonAsciiUpper,
        Variant::JsonSlash,
        Variant::JsonTwice,
    ];

    /// `value` written this way.
    pub(crate) fn apply(self, value: &str) -> String {
        match self {
            Variant::Raw => value.to_string(),
            Variant::Json => json_escape(value),
            Variant::JsonAsciiLower => ascii_escape(&json_escape(value), false),
            Variant::JsonAsciiUpper => ascii_escape(&json_escape(value), true),
            Variant::JsonSlash => json_escape(value).replace('/', "\\/"),
            Variant::JsonTwice => json_escape(&json_escape(value)),
        }
    }
}

fn json_escape(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted
        .get(1..quoted.len().saturating_sub(1))
        .unwrap_or_default()
        .to_string()
}

fn ascii_escape(s: &str, upper: bool) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                if upper {
                    out.push_str(&format!("\\u{unit:04X}"));
                } else {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out
}

/// What one distinct pattern string stands for.
#[derive(Default)]
struct Pattern {
    /// It is this entry's real value, written as `.1`.
    real: Option<(usize, Variant)>,
    /// It is some entry's substitute (in some form).
    sub: bool,
}

/// The guard's index for one state of a vault.
pub(crate) struct GuardIndex {
    automaton: Option<AhoCorasick>,
    /// False when the vault holds values but no automaton could be built: then everything is a leak.
    usable: bool,
    patterns: Vec<Pattern>,
    kinds: Vec<EntityType>,
    subs: Vec<Arc<str>>,
}

/// One occurrence of a known real value found by the sweep.
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: EntityType,
    /// The substitute, written the way the real value was written.
    pub(crate) replacement: String,
}

impl GuardIndex {
    /// `fast`: build a DFA (about 4× slower to build, about 6× faster to search) rather than an NFA.
    pub(crate) fn build(entries: &[Entry], fast: bool) -> GuardIndex {
        let mut ids: HashMap<String, usize> = HashMap::new();
        let mut patterns: Vec<Pattern> = Vec::new();
        let mut strings: Vec<String> = Vec::new();
        let mut slot = |s: String, patterns: &mut Vec<Pattern>| -> usize {
            *ids.entry(s).or_insert_with_key(|s| {
                strings.push(s.clone());
                patterns.push(Pattern::default());
                patterns.len() - 1
            })
        };
        for (i, e) in entries.iter().enumerate() {
            let guarded = e.real.chars().count() >= MIN_GUARDED_CHARS;
            for variant in Variant::ALL {
                let real = variant.apply(&e.real);
                if guarded && !real.is_empty() {
                    let id = slot(real, &mut patterns);
                    // The first form registered for a string wins (Raw before the escaped ones).
                    if patterns[id].real.is_none() {
                        patterns[id].real = Some((i, variant));
                    }
                }
                let sub = variant.apply(&e.sub);
                if !sub.is_empty() {
                    let id = slot(sub, &mut patterns);
                    patterns[id].sub = true;
                }
            }
        }
        let automaton = if strings.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .kind(Some(if fast {
                    AhoCorasickKind::DFA
                } else {
                    AhoCorasickKind::ContiguousNFA
                }))
                .build(&strings)
                .ok()
        };
        GuardIndex {
            usable: entries.is_empty() || automaton.is_some(),
            automaton,
            patterns,
            kinds: entries.iter().map(|e| e.kind).collect(),
            subs: entries.iter().map(|e| e.sub.clone()).collect(),
        }
    }

    /// The type of the first real value that occurs, standing alone and outside any substitute, in
    /// `payload`, leaving out the entries `skip` names.
    pub(crate) fn leak_in(&self, payload: &str, skip: &Held) -> Option<EntityType> {
        if !self.usable {
            return self.kinds.first().copied();
        }
        let ac = self.automaton.as_ref()?;
        let mut subs: Vec<(usize, usize)> = Vec::new();
        let mut reals: Vec<(usize, usize, EntityType)> = Vec::new();
        for m in ac.find_overlapping_iter(payload) {
            let p = &self.patterns[m.pattern().as_usize()];
            if p.sub {
                subs.push((m.start(), m.end()));
            }
            if let Some((entry, _)) = p.real
                && !skip.0.contains(&entry)
                && standalone(payload, m.start(), m.end())
            {
                reals.push((m.start(), m.end(), self.kinds[entry]));
            }
        }
        if reals.is_empty() {
            return None;
        }
        // For each real occurrence: is it inside some substitute occurrence?
        subs.sort_unstable();
        let mut reach = Vec::with_capacity(subs.len()); // the furthest end among subs[..=i]
        let mut furthest = 0;
        for &(_, end) in &subs {
            furthest = furthest.max(end);
            reach.push(furthest);
        }
        reals.sort_unstable_by_key(|&(start, end, _)| (start, end));
        reals.into_iter().find_map(|(start, end, kind)| {
            let k = subs.partition_point(|&(s, _)| s <= start);
            let covered = k > 0 && reach[k - 1] >= end;
            (!covered).then_some(kind)
        })
    }

    /// The entries whose real value stands alone somewhere in `text` (every occurrence, overlapping
    /// ones too).
    pub(crate) fn entries_in(&self, text: &str) -> Vec<usize> {
        let Some(ac) = &self.automaton else {
            return Vec::new();
        };
        ac.find_overlapping_iter(text)
            .filter_map(|m| {
                let (entry, _) = self.patterns[m.pattern().as_usize()].real?;
                standalone(text, m.start(), m.end()).then_some(entry)
            })
            .collect()
    }

    /// Known real values standing alone in `text[range]`, leftmost first, longest at a position,
    /// non-overlapping.
    pub(crate) fn sweep(&self, text: &str, range: std::ops::Range<usize>) -> Vec<Found> {
        let Some(ac) = &self.automaton else {
            return Vec::new();
        };
        if range.is_empty() {
            return Vec::new();
        }
        let mut hits: Vec<(usize, usize, usize, Variant)> = Vec::new();
        for m in ac.find_overlapping_iter(Input::new(text).range(range)) {
            if let Some((entry, variant)) = self.patterns[m.pattern().as_usize()].real
                && standalone(text, m.start(), m.end())
            {
                hits.push((m.start(), m.end(), entry, variant));
            }
        }
        hits.sort_unstable_by_key(|&(start, end, _, _)| (start, std::cmp::Reverse(end)));
        let mut found = Vec::new();
        let mut next_free = 0;
        for (start, end, entry, variant) in hits {
            if start >= next_free {
                found.push(Found {
                    start,
                    end,
                    kind: self.kinds[entry],
                    replacement: variant.apply(&self.subs[entry]),
                });
                next_free = end;
            }
        }
        found
    }
}

/// Letters next to letters, or digits next to digits, glue two words into one.
pub(crate) fn glued(a: char, b: char) -> bool {
    (a.is_alphabetic() && b.is_alphabetic()) || (a.is_numeric() && b.is_numeric())
}

/// Whether `hay[pos..]` is preceded by a complete JSON escape (`\n`, `\"`, `\u00e9`, …), which makes
/// the escape's last character a boundary rather than part of a word.
fn after_escape(hay: &[u8], pos: usize) -> bool {
    let odd_backslashes =
        |at: usize| hay[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1;
    if pos >= 2 && b"nrtbf/\"\\".contains(&hay[pos - 1]) && odd_backslashes(pos - 1) {
        return true;
    }
    pos >= 6
        && hay[pos - 5] == b'u'
        && hay[pos - 4..pos].iter().all(u8::is_ascii_hexdigit)
        && odd_backslashes(pos - 5)
}

/// Whether `hay[start..end]` stands alone: not glued to the text before or after it.
pub(crate) fn standalone(hay: &str, start: usize, end: usize) -> bool {
    let (Some(first), Some(last)) = (
        hay[start..end].chars().next(),
        hay[start..end].chars().next_back(),
    ) else {
        return false;
    };
    if let Some(before) = hay[..start].chars().next_back()
        && glued(before, first)
        && !after_escape(hay.as_bytes(), start)
    {
        return false;
    }
    if let Some(after) = hay[end..].chars().next()
        && glued(last, after)
    {
        return false;
    }
    true
}

/// Values of a vault that a request carries where masking cannot reach: tool names, ids and JSON keys,
/// the request's structure rather than its content (the vault's `held_in` finds them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Held(Vec<usize>);

impl Held {
    /// The entries numbered in `entries` (in any order, repeats allowed), as a set.
    pub(crate) fn of(mut entries: Vec<usize>) -> Held {
        entries.sort_unstable();
        entries.dedup();
        Held(entries)
    }

    /// Whether no value is held there.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[allow(clippy::unwrap_used)]
#[cfg(test)]
mod tests {
    use crate::vault::{Style, Vault};

    use super::*;

    fn vault_with(values: &[(&str, EntityType)]) -> Vault {
        let mut v = Vault::new(11, Style::Fake, 1000);
        for (real, kind) in values {
            v.substitute(real, *kind).unwrap();
        }
        v
    }

    #[test]
    fn escapes() {
        assert_eq!(Variant::Json.apply("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(Variant::JsonAsciiLower.apply("José"), "Jos\\u00e9");
        assert_eq!(Variant::JsonAsciiUpper.apply("José"), "Jos\\u00E9");
        assert_eq!(Variant::JsonAsciiLower.apply("😀"), "\\ud83d\\ude00");
        assert_eq!(
            Variant::JsonSlash.apply("https://x.io/a"),
            "https:\\/\\/x.io\\/a"
        );
        assert_eq!(Variant::JsonTwice.apply("a\"b\nc"), r#"a\\\"b\\nc"#);
    }

    #[test]
    fn finds_raw_and_escaped_values_in_a_json_body() {
        let v = vault_with(&[
            ("José Müller", EntityType::PersonName),
            ("jose@corp.io", EntityType::Email),
            ("He said \"hi\"", EntityType::Address),
            ("https://intranet.corp.io/p/42", EntityType::Url),
        ]);
        let body =
            |s: &str| serde_json::json!({"messages": [{"role": "user", "content": s}]}).to_string();
        assert_eq!(v.leak_in(&body("nothing to see")), None);
        assert_eq!(
            v.leak_in(&body("mail jose@corp.io now")),
            Some(EntityType::Email)
        );
        assert_eq!(
            v.leak_in(&body("quote: He said \"hi\" ok")),
            Some(EntityType::Address)
        );
        assert_eq!(
            v.leak_in(&body("line\nJosé Müller")),
            Some(EntityType::PersonName)
        );
        // A client that escapes non-ASCII (Python's json.dumps) or slashes (PHP).
        assert_eq!(
            v.leak_in(r#"{"content":"Jos\u00e9 M\u00fcller"}"#),
            Some(EntityType::PersonName)
        );
        assert_eq!(
            v.leak_in(r#"{"content":"Jos\u00E9 M\u00FCller"}"#),
            Some(EntityType::PersonName)
        );
        assert_eq!(
            v.leak_in(r#"{"u":"https:\/\/intranet.corp.io\/p\/42"}"#),
            Some(EntityType::Url)
        );
    }

    #[test]
    fn catches_a_value_injected_into_each_part_of_a_request() {
        let mut v = Vault::new(11, Style::Fake, 100);
        let text = "Write to Zoë O'Brien <zoe@corp.io>, card 4111 1111 1111 1111.";
        let ents: Vec<crate::Entity> = [
            ("Zoë O'Brien", EntityType::PersonName),
            ("zoe@corp.io", EntityType::Email),
            ("4111 1111 1111 1111", EntityType::CreditCard),
        ]
        .iter()
        .map(|(value, kind)| {
            let start = text.find(value).unwrap();
            crate::Entity {
                kind: *kind,
                start,
                end: start + value.len(),
                score: 1.0,
            }
        })
        .collect();
        let masked = v.mask(text, &ents).unwrap().text;
        // An Anthropic-shaped body built from masked parts passes; the same body with one real value
        // put back into any part is caught.
        let body = |system: &str, message: &str, tool_input: &str, tool_result: &str| {
            serde_json::json!({
                "system": system,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": message}]},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "delegate",
                        "input": {"task": tool_input}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                        "content": tool_result}]},
                ]
            })
            .to_string()
        };
        assert_eq!(v.leak_in(&body(&masked, &masked, &masked, &masked)), None);
        for real in ["Zoë O'Brien", "zoe@corp.io", "4111 1111 1111 1111"] {
            let leaky = format!("{masked} (really {real})");
            assert!(
                v.leak_in(&body(&leaky, &masked, &masked, &masked))
                    .is_some(),
                "system: {real}"
            );
            assert!(
                v.leak_in(&body(&masked, &leaky, &masked, &masked))
                    .is_some(),
                "message: {real}"
            );
            assert!(
                v.leak_in(&body(&masked, &masked, &leaky, &masked))
                    .is_some(),
                "tool_use: {real}"
            );
            assert!(
                v.leak_in(&body(&masked, &masked, &masked, &leaky))
                    .is_some(),
                "tool_result: {real}"
            );
        }
        // A tool result that is itself JSON text carries the value escaped twice over the wire.
        let nested = serde_json::json!({"user": "Zoë O'Brien"}).to_string();
        assert_eq!(
            v.leak_in(&body(&masked, &masked, &masked, &nested)),
            Some(EntityType::PersonName)
        );
        // A value that needs escaping, inside JSON text inside the JSON body: escaped twice.
        let mut v = vault_with(&[("line one\nline \"two\"", EntityType::ApiKey)]);
        let nested = serde_json::json!({"key": "line one\nline \"two\""}).to_string();
        assert_eq!(
            v.leak_in(&body("", "", "", &nested)),
            Some(EntityType::ApiKey)
        );
        let masked = v.mask(&nested, &[]).unwrap().text;
        assert_eq!(
            v.leak_in(&body("", "", "", &masked)),
            None,
            "the sweep masks the escaped form too"
        );
    }

    #[test]
    fn very_short_values_are_masked_in_place_only() {
        let mut v = Vault::new(11, Style::Placeholder, 100);
        let text = "Al and Alan";
        let al = crate::Entity {
            kind: EntityType::PersonName,
            start: 0,
            end: 2,
            score: 1.0,
        };
        let alan = crate::Entity {
            kind: EntityType::PersonName,
            start: 7,
            end: 11,
            score: 1.0,
        };
        assert_eq!(
            v.mask(text, &[al, alan]).unwrap().text,
            "[PERSON_NAME_1] and [PERSON_NAME_2]"
        );
        assert_eq!(
            v.mask("Al met Alan", &[]).unwrap().text,
            "Al met [PERSON_NAME_2]"
        );
        assert_eq!(v.leak_in("Al met"), None);
        assert_eq!(v.leak_in("met Alan"), Some(EntityType::PersonName));
    }

    #[test]
    fn words_that_merely_contain_a_value_are_not_leaks() {
        let v = vault_with(&[
            ("Ann", EntityType::PersonName),
            ("4155550123", EntityType::Phone),
        ]);
        assert_eq!(v.leak_in("Annual report"), None);
        assert_eq!(v.leak_in("call 94155550123"), None);
        assert_eq!(v.leak_in("Ann's report"), Some(EntityType::PersonName));
        assert_eq!(v.leak_in("(Ann)"), Some(EntityType::PersonName));
        assert_eq!(v.leak_in(r#""x\nAnn""#), Some(EntityType::PersonName));
        // `\\n` is an escaped backslash followed by a plain `n`: `nAnn` is one word.
        assert_eq!(v.leak_in(r#""x\\nAnn""#), None);
    }

    #[test]
    fn a_real_value_inside_a_substitute_is_not_a_leak() {
        let mut v = Vault::new(11, Style::Fake, 100);
        let fake = v.substitute("Alice Jones", EntityType::PersonName).unwrap();
        let first_word = fake.split(' ').next().unwrap_or_default().to_string();
        // Someone whose real name is the fake's first word, and someone whose real name is the fake.
        v.substitute(&first_word, EntityType::PersonName).unwrap();
        v.substitute(&fake, EntityType::PersonName).unwrap();
        assert_eq!(v.leak_in(&format!("Dear {fake},")), None);
        assert_eq!(
            v.leak_in(&format!("Dear {first_word},")),
            Some(EntityType::PersonName)
        );
        assert_eq!(v.leak_in("Dear Alice Jones,"), Some(EntityType::PersonName));
    }
}
