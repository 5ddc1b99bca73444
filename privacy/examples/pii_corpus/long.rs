//! The skeleton the long-document templates share (the tuning split's updates, the held-out split's
//! stories): a run of sentences, most of them fillers, with the personal data kept out of the first
//! part of a long text so that the detector's windowing over long inputs is exercised. Each split
//! keeps its own sentences and fillers; only the loop is shared.
//!
//! Invariant: the draws from [`Gen`] come in a fixed order: per sentence, the roll (none while the
//! sentence is quiet), then what the sentence or its filler draws. A template's output for a seed
//! depends on that order, so it must not change.

use super::doc::Doc;
use super::values::Gen;

/// How a long text is laid out.
pub struct Layout<'a> {
    /// How many sentences.
    pub sentences: usize,
    /// `brk` goes before every `every`-th sentence, a space before the others.
    pub every: usize,
    pub brk: &'static str,
    /// The first `quiet` sentences are fillers, without a roll.
    pub quiet: usize,
    /// Each other sentence rolls a number below this.
    pub rolls: usize,
    /// What a sentence without personal data says.
    pub fillers: &'a [&'a str],
}

/// Writes the sentences: sentence `i` is `sentence(g, d, i, roll)`, or a filler while quiet or when
/// `sentence` writes nothing for its roll (returns `false`).
pub fn write(
    g: &mut Gen,
    d: &mut Doc,
    layout: &Layout,
    mut sentence: impl FnMut(&mut Gen, &mut Doc, usize, usize) -> bool,
) {
    for i in 0..layout.sentences {
        if i > 0 {
            d.lit(if i % layout.every == 0 {
                layout.brk
            } else {
                " "
            });
        }
        let wrote = i >= layout.quiet && {
            let roll = g.below(layout.rolls);
            sentence(g, d, i, roll)
        };
        if !wrote {
            d.lit(g.pick(layout.fillers));
        }
    }
}
