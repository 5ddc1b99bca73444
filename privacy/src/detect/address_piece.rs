//! What the address recognisers report and the line arithmetic they share: a [`Piece`] of an address
//! (its span, its [`Part`], its score alone) and the bounds of the line that holds a byte.
//!
//! Why a module of its own: the recognisers (`address.rs`, `postal.rs`, `military.rs`) produce pieces
//! and `address_lines.rs` joins them, while the joiner also asks `military.rs` whether a line is a
//! ship. What they all speak sits below all of them, so none of them depends back on another.
//!
//! Invariant: offsets are byte offsets into the text the pieces were found in; a line ends before its
//! `\n` or `\r\n`.

/// What a piece of an address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A street with its house number (`1600 Pennsylvania Avenue NW`, `Hauptstraße 12`).
    Street,
    /// A military or diplomatic line (`PSC 1234, Box 5678`, `APO AE 09123`).
    Military,
    /// A city with a postcode or region code (`Springfield, IL 62704`, `10115 Berlin`).
    Locality,
    /// A postcode alone (`SW1A 1AA`, `M5V 2T6`).
    Postcode,
    /// A unit (`Suite 1120`, `Apt. 4C`, `Floor 3`, `PO Box 12`).
    Unit,
    /// A line that is only a building number (`1200`), kept only before a street line.
    Building,
    /// A ship (`USNS Comfort`, `USS Nimitz (CVN 68)`), kept only with a military line.
    Ship,
    /// A country line.
    Country,
    /// A `City, Region` line without a postcode.
    Region,
    /// A line of one to three capitalised words (a city), kept only between two address lines.
    Place,
}

impl Part {
    /// The part's bit in a set of parts (a run's `parts`).
    pub(super) fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A candidate piece of an address: byte span and the score it would have alone (0 when it is never
/// reported alone).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Piece {
    /// Start byte.
    pub start: usize,
    /// End byte.
    pub end: usize,
    /// What it is.
    pub part: Part,
    /// Score when reported alone.
    pub score: f32,
}

/// The start of the line holding `pos`.
pub fn line_start(text: &str, pos: usize) -> usize {
    memchr::memrchr(b'\n', &text.as_bytes()[..pos]).map_or(0, |i| i + 1)
}

/// The end of the line holding `pos` (before its `\n` or `\r\n`).
pub fn line_end(text: &str, pos: usize) -> usize {
    let end = memchr::memchr(b'\n', &text.as_bytes()[pos..]).map_or(text.len(), |i| pos + i);
    if end > pos && text.as_bytes()[end - 1] == b'\r' {
        end - 1
    } else {
        end
    }
}
