//! Restoring: every substitute in a text back to its real value, longest match first.
//!
//! Invariants:
//! - one Aho-Corasick automaton (leftmost-longest) over the vault's substitutes, built once per change of
//!   the vault (the vault keeps it); `John Smithson` is restored before `John Smith`;
//! - a substitute is restored only where it stands alone, by the egress guard's rule (not glued to
//!   letters, or digits to digits, on either side): a short lower-case fake such as `clara` is not
//!   restored inside `declarations`;
//! - a text with no substitute comes back borrowed, without a copy;
//! - the same index answers the streaming restorer's question "could this tail still become a
//!   substitute?" ([`RestoreIndex::hold_point`]) from a sorted list of the substitutes.

use std::borrow::Cow;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use crate::guard::glued;
use crate::mapping::Entry;

/// Substitutes → real values, for one state of a vault.
pub(crate) struct RestoreIndex {
    /// `None` when the vault is empty (or the automaton could not be built, which only happens past
    /// aho-corasick's size limits; restoring then leaves the text as it is).
    automaton: Option<AhoCorasick>,
    /// Pattern id → real value.
    reals: Vec<Arc<str>>,
    /// The substitutes, sorted bytewise, for prefix queries.
    sorted: Vec<Arc<str>>,
    /// The longest substitute, in bytes.
    max_len: usize,
    /// Whether some substitute starts with this byte.
    first_bytes: [bool; 256],
}

impl RestoreIndex {
    pub(crate) fn build(entries: &[Entry]) -> RestoreIndex {
        let mut sorted: Vec<Arc<str>> = entries.iter().map(|e| e.sub.clone()).collect();
        sorted.sort_unstable();
        let mut first_bytes = [false; 256];
        for s in &sorted {
            if let Some(&b) = s.as_bytes().first() {
                first_bytes[usize::from(b)] = true;
            }
        }
        let automaton = if entries.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(entries.iter().map(|e| e.sub.as_bytes()))
                .ok()
        };
        RestoreIndex {
            automaton,
            reals: entries.iter().map(|e| e.real.clone()).collect(),
            max_len: sorted.iter().map(|s| s.len()).max().unwrap_or(0),
            sorted,
            first_bytes,
        }
    }

    /// `text` with every substitute that stands alone replaced by its real value; `prev` is the
    /// character before `text` (a stream's text emitted earlier), if any.
    pub(crate) fn restore<'a>(&self, text: &'a str, prev: Option<char>) -> Cow<'a, str> {
        let Some(ac) = &self.automaton else {
            return Cow::Borrowed(text);
        };
        let mut matches = ac
            .find_iter(text)
            .filter(|m| alone(text, m.start(), m.end(), prev))
            .peekable();
        if matches.peek().is_none() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len() + 16);
        let mut last = 0;
        for m in matches {
            out.push_str(&text[last..m.start()]);
            out.push_str(&self.reals[m.pattern().as_usize()]);
            last = m.end();
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// The smallest `i` such that `buf[i..]` is a non-empty prefix of some substitute, or the whole of
    /// one (it could still become one, or the next character decides whether it stands alone), else
    /// `buf.len()`.
    pub(crate) fn hold_point(&self, buf: &str) -> usize {
        if self.max_len == 0 {
            return buf.len();
        }
        let mut i = buf.len().saturating_sub(self.max_len);
        while !buf.is_char_boundary(i) {
            i += 1;
        }
        let bytes = buf.as_bytes();
        while i < buf.len() {
            if self.first_bytes[usize::from(bytes[i])] && self.is_prefix(&bytes[i..]) {
                return i;
            }
            i += 1;
            while !buf.is_char_boundary(i) {
                i += 1;
            }
        }
        buf.len()
    }

    /// Whether some substitute starts with `tail` (or is `tail`).
    fn is_prefix(&self, tail: &[u8]) -> bool {
        // Every substitute starting with `tail` sorts at or after it, the smallest one first.
        let k = self.sorted.partition_point(|s| s.as_bytes() < tail);
        self.sorted
            .get(k)
            .is_some_and(|s| s.as_bytes().starts_with(tail))
    }

    /// For the streaming restorer: restore what is safe to emit from `buf` (`prev` being the character
    /// before it) and return it with the byte offset up to which `buf` was consumed. What follows the
    /// offset is no longer than the longest substitute and must be held until more text (or the end
    /// of the stream) decides it.
    pub(crate) fn emit_safe(&self, buf: &str, prev: Option<char>) -> (String, usize) {
        let hold = self.hold_point(buf);
        let mut out = String::with_capacity(hold + 16);
        let mut last = 0;
        if let Some(ac) = &self.automaton {
            // Matches that start before `hold` lie wholly within `buf`, with a character after them,
            // whatever comes next (a match reaching the end would make its start a hold point), so
            // they are final. One that does not stand alone is passed through as written.
            for m in ac.find_iter(buf) {
                if m.start() >= hold {
                    break;
                }
                out.push_str(&buf[last..m.start()]);
                if alone(buf, m.start(), m.end(), prev) {
                    out.push_str(&self.reals[m.pattern().as_usize()]);
                } else {
                    out.push_str(&buf[m.start()..m.end()]);
                }
                last = m.end();
            }
        }
        let cut = hold.max(last);
        out.push_str(&buf[last..cut]);
        (out, cut)
    }
}

/// Whether `text[start..end]` stands alone: not glued to the character before it (`prev` when it
/// starts `text`) nor to the one after it.
fn alone(text: &str, start: usize, end: usize, prev: Option<char>) -> bool {
    let (Some(first), Some(last)) = (
        text[start..end].chars().next(),
        text[start..end].chars().next_back(),
    ) else {
        return false;
    };
    let before = text[..start].chars().next_back().or(prev);
    let after = text[end..].chars().next();
    !before.is_some_and(|b| glued(b, first)) && !after.is_some_and(|a| glued(last, a))
}

#[cfg(test)]
impl RestoreIndex {
    /// The spans of the substitutes `restore` replaces in `text`.
    pub(crate) fn matches(&self, text: &str) -> Vec<(usize, usize)> {
        self.automaton.as_ref().map_or_else(Vec::new, |ac| {
            ac.find_iter(text).map(|m| (m.start(), m.end())).collect()
        })
    }
}

#[allow(clippy::unwrap_used)]
#[cfg(test)]
mod tests {
    use crate::entity::EntityType;
    use crate::vault::{Style, Vault};

    use super::*;

    #[test]
    fn restores_longest_first_and_borrows_when_nothing_matches() {
        let mut v = Vault::new(3, Style::Placeholder, 100);
        let one = v.substitute("Alice", EntityType::PersonName).unwrap();
        for i in 0..9 {
            v.substitute(&format!("p{i}"), EntityType::PersonName)
                .unwrap();
        }
        let ten = v.substitute("Bob", EntityType::PersonName).unwrap();
        assert_eq!(one, "[PERSON_NAME_1]");
        assert_eq!(ten, "[PERSON_NAME_11]");
        assert_eq!(
            v.restore("[PERSON_NAME_11] and [PERSON_NAME_1]."),
            "Bob and Alice."
        );
        assert!(matches!(v.restore("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn overlapping_fakes_restore_the_longer_one() {
        let entry = |real: &str, sub: &str| Entry {
            real: real.into(),
            sub: sub.into(),
            kind: EntityType::PersonName,
        };
        let index = RestoreIndex::build(&[
            entry("Zhang San", "Ann Lee"),
            entry("Zhang Sanfeng", "Ann Leeds"),
        ]);
        assert_eq!(
            index.restore("Ann Leeds, Ann Lee.", None),
            "Zhang Sanfeng, Zhang San."
        );
        // In a stream, "Ann Lee" is held until the next char says whether it is "Ann Leeds".
        assert_eq!(index.emit_safe("to Ann Lee", None), ("to ".to_string(), 3));
        assert_eq!(
            index.emit_safe("Ann Lee,", None),
            ("Zhang San,".to_string(), 8)
        );
    }

    #[test]
    fn a_fake_inside_a_word_is_not_restored() {
        let index = RestoreIndex::build(&[Entry {
            real: "ravi".into(),
            sub: "clara".into(),
            kind: EntityType::PersonName,
        }]);
        assert_eq!(
            index.restore("declarations for clara, clara's and (clara)", None),
            "declarations for ravi, ravi's and (ravi)"
        );
        // The character before a stream's held text decides too.
        assert_eq!(index.restore("clara", Some('e')), "clara");
        assert_eq!(index.restore("clara", Some(' ')), "ravi");
        assert_eq!(
            index.emit_safe("clara is", Some('x')),
            ("clara is".into(), 8)
        );
    }

    #[test]
    fn hold_point_finds_the_longest_possible_start() {
        let mut v = Vault::new(3, Style::Placeholder, 100);
        v.substitute("Alice", EntityType::PersonName).unwrap();
        let index = v.restore_index();
        assert_eq!(index.hold_point("hello [PERS"), 6);
        assert_eq!(index.hold_point("hello ["), 6);
        assert_eq!(index.hold_point("hello"), 5);
        // A complete substitute at the end is held: the next character says whether it stands alone.
        assert_eq!(index.hold_point("x [PERSON_NAME_1]"), 2);
        assert_eq!(index.hold_point("é["), "é".len());
    }
}
