//! Context words (Presidio's idea): a telling word shortly before a match ("call me at", "card",
//! "IBAN", "social security") raises its score; weak shapes start below the threshold and need one.
//!
//! The window is the [`BEFORE`] bytes before the match and the [`AFTER`] bytes after it, compared
//! case-insensitively (ASCII); a word must start at a word boundary, so "scar" does not count as "car".

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
    for w in words {
        let w = w.as_bytes();
        if w.is_empty() || hay.len() < w.len() {
            continue;
        }
        for i in 0..=hay.len() - w.len() {
            if hay[i..i + w.len()].eq_ignore_ascii_case(w)
                && (i == 0 || !hay[i - 1].is_ascii_alphabetic())
            {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

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
