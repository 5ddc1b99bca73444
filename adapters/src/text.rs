//! Plain-text helpers shared by the platform adapters.
//!
//! Invariant: lengths are counted in characters (Unicode scalar values), as Slack and Discord count
//! their limits, so a cut never splits a character.

/// `text` cut to at most `max` characters, the cut marked with `…` (which counts toward `max`);
/// unchanged when it fits. For fields with a hard platform limit (button labels, card text).
pub(crate) fn cut_with_ellipsis(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_by_characters_and_marks_the_cut() {
        assert_eq!(cut_with_ellipsis("short", 5), "short");
        assert_eq!(cut_with_ellipsis("héllo wörld", 6), "héllo…");
        assert_eq!(cut_with_ellipsis("héllo wörld", 6).chars().count(), 6);
        assert_eq!(cut_with_ellipsis("abc", 0), "…");
    }
}
