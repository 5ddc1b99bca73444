//! Context words (Presidio's idea): a telling word shortly before a match ("call me at", "card",
//! "IBAN", "social security") raises its score; weak shapes start below the threshold and need one.
//!
//! The window is the [`BEFORE`] bytes before the match and the [`AFTER`] bytes after it, compared
//! case-insensitively (ASCII); a word must start at a word boundary, so "scar" does not count as "car".
//!
//! [`Cues`] is the finer tool for shapes that many kinds of numbers share (a phone's digit groups are
//! also an order number's): words that speak *for* the type ("call", "tel", "mobile"), words that speak
//! *against* it ("order", "invoice", "ISBN"), and labels that count only right before the match
//! (`T:`, `M.` in a signature block). Whole words only, and the nearest word before the match decides:
//! "call about order 12345678" is an order number, "order questions? call 555-0132" a phone.

/// Bytes searched before a match.
pub const BEFORE: usize = 48;
/// Bytes searched after a match.
pub const AFTER: usize = 16;
/// What a context word adds to a score (capped at 1.0).
pub const BOOST: f32 = 0.35;

/// Whether one of `words` (lowercase ASCII) occurs near `start..end` in `text`.
pub fn near(text: &str, start: usize, end: usize, words: &[&str]) -> bool {
    let bytes = text.as_bytes();
    let from = start.saturating_sub(BEFORE);
    let to = (end + AFTER).min(bytes.len());
    contains_word(&bytes[from..start], words) || contains_word(&bytes[end..to], words)
}

/// `score`, raised by [`BOOST`] when a context word is near the match.
pub fn score(text: &str, start: usize, end: usize, base: f32, words: &[&str]) -> f32 {
    if near(text, start, end, words) {
        (base + BOOST).min(1.0)
    } else {
        base
    }
}

fn contains_word(hay: &[u8], words: &[&str]) -> bool {
    // Word starts first, then the words: the same test as trying each word at each position, with
    // one boundary check per position and one byte compare per word before the full compare.
    (0..hay.len())
        .filter(|&i| i == 0 || !hay[i - 1].is_ascii_alphabetic())
        .any(|i| {
            let rest = &hay[i..];
            words.iter().any(|w| {
                let w = w.as_bytes();
                !w.is_empty()
                    && rest.len() >= w.len()
                    && rest[0].eq_ignore_ascii_case(&w[0])
                    && rest[..w.len()].eq_ignore_ascii_case(w)
            })
        })
}

/// What the words around a match say about it (see [`Cues`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A word for the type is nearer than any word against it (or follows the match).
    For,
    /// A word against the type is the nearest, `gap` bytes before the match.
    Against {
        /// Bytes between the word's end and the match.
        gap: usize,
    },
    /// Neither.
    Neither,
}

/// Words for and against a type, and labels (see the module docs). Built once per recogniser: one
/// Aho-Corasick automaton over all of them, run only over the window around a candidate.
pub struct Cues {
    words: aho_corasick::AhoCorasick,
    /// Patterns `0..for_end` speak for the type, `for_end..weak_end` for it unless any word against
    /// it is in the window, `weak_end..against_end` against it; the rest are labels.
    for_end: usize,
    weak_end: usize,
    against_end: usize,
}

/// How far a label may be from the match: its `:`/`.` and at most this many spaces.
const LABEL_GAP: usize = 3;

impl Cues {
    /// `for_words` and `against_words` count anywhere in the window, as whole words, the nearer one
    /// deciding; `weak_for` (`number`, which "order number" and "phone number" share) count only when no
    /// word against is in the window; `labels` only when followed by `:` or `.` and at most
    /// [`LABEL_GAP`] spaces before the match (`T: +1 415 …`). All lowercase; ASCII is compared
    /// case-insensitively, other bytes exactly.
    pub fn new(
        for_words: &[&str],
        weak_for: &[&str],
        against_words: &[&str],
        labels: &[&str],
    ) -> Cues {
        let all: Vec<&str> = for_words
            .iter()
            .chain(weak_for)
            .chain(against_words)
            .chain(labels)
            .copied()
            .collect();
        let words = aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&all)
            .expect("cue words compile");
        let weak_end = for_words.len() + weak_for.len();
        Cues {
            words,
            for_end: for_words.len(),
            weak_end,
            against_end: weak_end + against_words.len(),
        }
    }

    /// What the words within [`BEFORE`] bytes before `start` and [`AFTER`] bytes after `end` say.
    pub fn verdict(&self, text: &str, start: usize, end: usize) -> Verdict {
        let bytes = text.as_bytes();
        let from = start.saturating_sub(BEFORE);
        // The gaps of the nearest word for (or label), weak word for, and word against.
        let (mut strong, mut weak, mut against) = (None, None, None);
        let nearer = |slot: &mut Option<usize>, gap: usize| {
            if slot.is_none_or(|g| gap < g) {
                *slot = Some(gap);
            }
        };
        for m in self.words.find_overlapping_iter(&bytes[from..start]) {
            let (ws, we) = (from + m.start(), from + m.end());
            if !whole_word(bytes, ws, we) {
                continue;
            }
            let id = m.pattern().as_usize();
            let gap = start - we;
            if id >= self.against_end {
                // A label: `T:` / `Tel.` then at most a few spaces.
                let punct = bytes.get(we).is_some_and(|b| matches!(b, b':' | b'.'));
                let spaces = bytes[(we + 1).min(start)..start]
                    .iter()
                    .all(|b| *b == b' ' || *b == b'\t');
                if punct && gap <= 1 + LABEL_GAP && spaces {
                    nearer(&mut strong, gap);
                }
            } else if id < self.for_end {
                nearer(&mut strong, gap);
            } else if id < self.weak_end {
                nearer(&mut weak, gap);
            } else {
                nearer(&mut against, gap);
            }
        }
        match (strong, weak, against) {
            (Some(f), _, Some(a)) if f <= a => return Verdict::For,
            (Some(_), _, None) | (None, Some(_), None) => return Verdict::For,
            (_, _, Some(gap)) if gap <= AFTER => return Verdict::Against { gap },
            _ => {}
        }
        let to = (end + AFTER).min(bytes.len());
        let after = self.words.find_overlapping_iter(&bytes[end..to]).any(|m| {
            m.pattern().as_usize() < self.for_end
                && whole_word(bytes, end + m.start(), end + m.end())
        });
        match (after, against) {
            (true, _) => Verdict::For,
            (false, Some(gap)) => Verdict::Against { gap },
            _ => Verdict::Neither,
        }
    }
}

/// Whether `bytes[start..end]` is a whole word: no letter or digit joined to it on either side. A word
/// that begins or ends with a non-ASCII byte (`電話`) needs no boundary on that side, since scripts
/// without spaces join their words.
fn whole_word(bytes: &[u8], start: usize, end: usize) -> bool {
    let joined = |b: u8| b.is_ascii_alphanumeric() || b >= 0x80;
    let open = bytes[start] >= 0x80 || start == 0 || !joined(bytes[start - 1]);
    let close = bytes[end - 1] >= 0x80 || end == bytes.len() || !joined(bytes[end]);
    open && close
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word test as first written: each word at each position.
    fn contains_word_reference(hay: &[u8], words: &[&str]) -> bool {
        words.iter().any(|w| {
            let w = w.as_bytes();
            !w.is_empty()
                && hay.len() >= w.len()
                && (0..=hay.len() - w.len()).any(|i| {
                    hay[i..i + w.len()].eq_ignore_ascii_case(w)
                        && (i == 0 || !hay[i - 1].is_ascii_alphabetic())
                })
        })
    }

    proptest::proptest! {
        #[test]
        fn word_starts_first_gives_the_same_answer(hay in "[a-cA-C ,é]{0,40}") {
            let words = ["ab", "b", "cab", "", "a c", "é"];
            proptest::prop_assert_eq!(
                contains_word(hay.as_bytes(), &words),
                contains_word_reference(hay.as_bytes(), &words)
            );
        }
    }

    #[test]
    fn words_before_and_after_count_at_word_starts() {
        let text = "Call me at 5551234 please";
        assert!(near(text, 11, 18, &["call"]));
        assert!(near(text, 11, 18, &["please"]));
        assert!(!near(text, 11, 18, &["all"]));
        assert_eq!(score(text, 11, 18, 0.5, &["call me"]), 0.85);
        assert_eq!(score(text, 11, 18, 0.9, &["call me"]), 1.0);
        assert_eq!(score(text, 11, 18, 0.5, &["iban"]), 0.5);
    }
}

#[cfg(test)]
mod cue_tests {
    use super::*;

    fn cues() -> Cues {
        Cues::new(
            &["call", "phone", "电话"],
            &["number"],
            &["order", "invoice"],
            &["t", "m"],
        )
    }

    fn verdict(text: &str, number: &str) -> Verdict {
        let start = text.find(number).expect("number in the text");
        cues().verdict(text, start, start + number.len())
    }

    #[test]
    fn the_nearest_word_decides() {
        assert_eq!(verdict("Call me at 555-0132", "555-0132"), Verdict::For);
        assert_eq!(
            verdict("call about order 12345678", "12345678"),
            Verdict::Against { gap: 1 }
        );
        assert_eq!(
            verdict("Order questions? Call 555-0132", "555-0132"),
            Verdict::For
        );
        assert_eq!(verdict("see 12345678 (phone)", "12345678"), Verdict::For);
        assert_eq!(verdict("recall 12345678", "12345678"), Verdict::Neither);
        assert_eq!(verdict("PHONE: 12345678", "12345678"), Verdict::For);
        assert_eq!(verdict("电话：13812345678", "13812345678"), Verdict::For);
        assert_eq!(verdict("my number is 12345678", "12345678"), Verdict::For);
        assert_eq!(
            verdict("your order number is 12345678", "12345678"),
            Verdict::Against { gap: 11 }
        );
    }

    #[test]
    fn labels_count_only_right_before_the_match() {
        assert_eq!(
            verdict("T: +1 415 555 0132 | M. 415.555.0199", "+1 415 555 0132"),
            Verdict::For
        );
        assert_eq!(
            verdict("T: +1 415 555 0132 | M. 415.555.0199", "415.555.0199"),
            Verdict::For
        );
        assert_eq!(verdict("part m 12345678", "12345678"), Verdict::Neither);
        assert_eq!(verdict("t: then 12345678", "12345678"), Verdict::Neither);
        assert_eq!(verdict("Item M:12345678", "12345678"), Verdict::For);
    }
}
