//! Restoring a streamed answer delta by delta, without ever showing half a substitute.
//!
//! Invariants:
//! - `push` emits everything that can no longer be the start of a substitute, restored, and holds back
//!   only a tail that is a prefix of some substitute or a whole one (the next character decides
//!   whether it stands alone), so what is held is no longer than the longest substitute;
//! - for any split of a text into deltas, the concatenation of everything `push` and `finish` return
//!   equals `Vault::restore` of the whole text, and each emitted piece extends what came before (nothing
//!   is taken back);
//! - `finish` flushes the held tail (restoring it if it is a complete substitute); `reset` drops it, for
//!   a retried attempt whose partial text the consumer discards (`Restart`);
//! - the restorer holds no vault: each call takes the conversation's vault, so values masked by another
//!   agent of the conversation while the stream runs are restored too.

use std::fmt;

use crate::vault::Vault;

/// Restores one stream. Cheap to create; one per streamed call.
#[derive(Default)]
pub struct StreamRestorer {
    held: String,
    /// The last character of the text consumed so far: whether a substitute at the start of the held
    /// text stands alone depends on it.
    prev: Option<char>,
}

impl fmt::Debug for StreamRestorer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamRestorer")
            .field("held_bytes", &self.held.len())
            .finish()
    }
}

impl StreamRestorer {
    /// A restorer with nothing held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take the next delta; returns the text that is safe to emit now (possibly empty).
    pub fn push(&mut self, vault: &Vault, delta: &str) -> String {
        if vault.is_empty() {
            // Nothing to restore: pass through (and flush anything held from before).
            let mut out = std::mem::take(&mut self.held);
            out.push_str(delta);
            return out;
        }
        self.held.push_str(delta);
        let index = vault.restore_index();
        let (out, cut) = index.emit_safe(&self.held, self.prev);
        if let Some(c) = self.held[..cut].chars().next_back() {
            self.prev = Some(c);
        }
        self.held.drain(..cut);
        out
    }

    /// The end of the stream: everything held, restored.
    pub fn finish(&mut self, vault: &Vault) -> String {
        let held = std::mem::take(&mut self.held);
        let prev = self.prev.take();
        if vault.is_empty() {
            return held;
        }
        vault.restore_index().restore(&held, prev).into_owned()
    }

    /// Drop the held text (a retried attempt restarts the stream).
    pub fn reset(&mut self) {
        self.held.clear();
        self.prev = None;
    }

    /// Bytes currently held back.
    pub fn held_len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;

    use crate::entity::EntityType;
    use crate::vault::Style;

    use super::*;

    fn vault() -> (Vault, Vec<String>) {
        let mut v = Vault::new(21, Style::Fake, 100);
        let reals = [
            ("Alice Jones", EntityType::PersonName),
            ("Alice", EntityType::PersonName),
            ("alice@corp.io", EntityType::Email),
            ("+44 20 7946 0958", EntityType::Phone),
            ("4111 1111 1111 1111", EntityType::CreditCard),
            ("José Müller", EntityType::PersonName),
        ];
        let subs = reals
            .iter()
            .map(|(r, k)| v.substitute(r, *k).unwrap())
            .collect();
        (v, subs)
    }

    #[test]
    fn holds_only_a_possible_prefix() {
        let (v, subs) = vault();
        let mut s = StreamRestorer::new();
        let name = &subs[0];
        let (head, tail) = name.split_at(3);
        assert_eq!(s.push(&v, "Hello "), "Hello ");
        assert_eq!(s.push(&v, head), "");
        assert_eq!(s.held_len(), 3);
        let out = s.push(&v, tail);
        let out2 = s.push(&v, ", bye");
        assert_eq!(format!("{out}{out2}{}", s.finish(&v)), "Alice Jones, bye");
    }

    #[test]
    fn finish_flushes_and_reset_drops() {
        let (v, subs) = vault();
        let mut s = StreamRestorer::new();
        // A complete substitute at the end waits for the next character (is it glued to a word?).
        assert_eq!(s.push(&v, &subs[2]), "");
        assert_eq!(s.push(&v, ", thanks "), "alice@corp.io, thanks ");
        assert_eq!(s.push(&v, &subs[2]), "");
        assert_eq!(s.finish(&v), "alice@corp.io");
        // Glued to the word before it (the previous delta's), it is not a substitute.
        assert_eq!(s.push(&v, "x"), "x");
        assert_eq!(s.push(&v, &subs[2]), "");
        assert_eq!(s.finish(&v), subs[2]);
        let partial = &subs[3][..4];
        assert_eq!(s.push(&v, partial), "");
        s.reset();
        assert_eq!(s.finish(&v), "");
        // A dangling prefix at the end of the stream is emitted as it is.
        assert_eq!(s.push(&v, partial), "");
        assert_eq!(s.finish(&v), partial);
    }

    #[test]
    fn redact_mode_round_trips_through_a_stream() {
        let mut v = Vault::new(1, Style::Placeholder, 100);
        let text = "Alice Jones (alice@corp.io) and Bob";
        let ents = [
            crate::Entity {
                kind: EntityType::PersonName,
                start: 0,
                end: 11,
                score: 1.0,
            },
            crate::Entity {
                kind: EntityType::Email,
                start: 13,
                end: 26,
                score: 1.0,
            },
            crate::Entity {
                kind: EntityType::PersonName,
                start: 32,
                end: 35,
                score: 1.0,
            },
        ];
        let masked = v.mask(text, &ents).unwrap();
        assert_eq!(
            masked.text,
            "[PERSON_NAME_1] ([EMAIL_1]) and [PERSON_NAME_2]"
        );
        let answer = "Sure, [PERSON_NAME_2] will email [EMAIL_1] today. [PERSON_NAME_";
        let mut s = StreamRestorer::new();
        let mut out = String::new();
        for chunk in answer.as_bytes().chunks(3) {
            out.push_str(&s.push(&v, std::str::from_utf8(chunk).unwrap()));
            assert!(
                !out.contains('['),
                "a placeholder escaped half-restored: {out}"
            );
        }
        out.push_str(&s.finish(&v));
        assert_eq!(
            out,
            "Sure, Bob will email alice@corp.io today. [PERSON_NAME_"
        );
    }

    #[test]
    fn empty_vault_passes_through() {
        let v = Vault::new(1, Style::Fake, 10);
        let mut s = StreamRestorer::new();
        assert_eq!(s.push(&v, "abc"), "abc");
        assert_eq!(s.finish(&v), "");
    }

    /// Split `text` at the given (char-boundary-adjusted) points.
    fn split(text: &str, cuts: &[usize]) -> Vec<String> {
        let mut points: Vec<usize> = cuts
            .iter()
            .map(|&c| {
                let mut c = c % (text.len() + 1);
                while !text.is_char_boundary(c) {
                    c -= 1;
                }
                c
            })
            .collect();
        points.push(0);
        points.push(text.len());
        points.sort_unstable();
        points.dedup();
        points
            .windows(2)
            .map(|w| text[w[0]..w[1]].to_string())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn any_split_restores_like_the_whole(
            parts in prop::collection::vec((0usize..8, "[ a-zé,.]{0,6}"), 0..12),
            cuts in prop::collection::vec(0usize..400, 0..30),
        ) {
            let (v, subs) = vault();
            // Text: fillers, whole substitutes, and substitute prefixes (which must come out as is).
            let mut text = String::new();
            for (pick, filler) in &parts {
                text.push_str(filler);
                match pick {
                    0..=5 => text.push_str(&subs[*pick]),
                    6 => text.push_str(&subs[0][..subs[0].len() / 2]),
                    _ => text.push_str(&subs[3][..5]),
                }
            }
            let expected = v.restore(&text).into_owned();
            let max_sub = subs.iter().map(String::len).max().unwrap_or(0);
            let whole: Vec<(usize, usize)> = v.restore_index().matches(&text);
            let mut s = StreamRestorer::new();
            let mut out = String::new();
            let mut pushed = 0;
            for delta in split(&text, &cuts) {
                let chunk = s.push(&v, &delta);
                pushed += delta.len();
                out.push_str(&chunk);
                // Nothing emitted is ever taken back: the output so far is a prefix of the result.
                prop_assert!(expected.starts_with(&out), "emitted {out:?}, expected {expected:?}");
                // Only a possible substitute is held, so less than the longest one.
                prop_assert!(s.held_len() <= max_sub);
                // No emitted chunk ends inside a substitute of the whole text.
                let consumed = pushed - s.held_len();
                prop_assert!(whole.iter().all(|&(a, b)| !(a < consumed && consumed < b)));
            }
            out.push_str(&s.finish(&v));
            prop_assert_eq!(out, expected);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Substitutes that overlap and extend each other (which seeded fakes rarely do), over a small
        /// alphabet so that partial and complete matches are everywhere.
        #[test]
        fn any_split_restores_like_the_whole_with_overlapping_substitutes(
            text in "[abcdeé ]{0,40}",
            cuts in prop::collection::vec(0usize..64, 0..20),
        ) {
            let mut v = Vault::new(1, Style::Fake, 100);
            for (i, sub) in ["ab", "abc", "bcd", "abcde", "c", "é", "éa", "dd d"].iter().enumerate() {
                v.entries.push(crate::mapping::Entry {
                    real: format!("<{i}>").into(),
                    sub: (*sub).into(),
                    kind: EntityType::PersonName,
                });
            }
            let expected = v.restore(&text).into_owned();
            let whole = v.restore_index().matches(&text);
            let mut s = StreamRestorer::new();
            let mut out = String::new();
            let mut pushed = 0;
            for delta in split(&text, &cuts) {
                out.push_str(&s.push(&v, &delta));
                pushed += delta.len();
                prop_assert!(expected.starts_with(&out), "emitted {out:?}, expected {expected:?}");
                prop_assert!(s.held_len() <= 5);
                let consumed = pushed - s.held_len();
                prop_assert!(whole.iter().all(|&(a, b)| !(a < consumed && consumed < b)));
            }
            out.push_str(&s.finish(&v));
            prop_assert_eq!(out, expected);
        }
    }
}
