//! US military and diplomatic addresses (USPS Publication 28, section 225): a unit line
//! `PSC 1234, Box 5678`, `Unit 1234 Box 5678` or `CMR 450 Box 123`, a locality line
//! `APO|FPO|DPO AA|AE|AP 12345(-6789)`, and, on the line before or beside them, a ship
//! (`USNS Comfort`, `USS Nimitz (CVN 68)`, `USCGC Healy`).
//!
//! Found at a digit (the caller's anchor): the word before it must be `PSC`, `CMR`, `Unit`, or an
//! `AA`/`AE`/`AP` code after `APO`/`FPO`/`DPO`, so prose numbers cost one word comparison. A ship name
//! alone is not an address ("the USS Enterprise" in a film review); it is reported only next to a
//! military line (see `address_lines.rs`).

use super::address_piece::{Part, Piece, line_end, line_start};
use super::address_words as words;
use super::{Pattern, context};

/// The military forms.
pub struct Military {
    unit: Pattern,
    locality: Pattern,
    ship: Pattern,
}

const SHIP: &str = r"(?-u:\b)(?:USNS|USS|USCGC|HMS|HMCS|HMAS|HMNZS)[ \t]+(?:[A-Z][A-Za-z.'’-]*[ \t]+){0,3}[A-Z][A-Za-z.'’-]*(?:[ \t]*\([A-Z]{1,4}(?:-[A-Z]{1,4})?[- ]?\d{1,4}\))?";

/// Whether a whole line is a ship's name.
pub fn is_ship(line: &str) -> bool {
    static SHIP_LINE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(&format!("^{SHIP}$")).expect("compiles"));
    (line.starts_with("US") || line.starts_with("HM")) && SHIP_LINE.is_match(line)
}

impl Military {
    /// Compiles the patterns.
    pub fn new() -> Military {
        Military {
            unit: super::pattern(
                r"(?:PSC|CMR|UNIT|Unit)[ \t]+[0-9]{1,6},?[ \t]+(?:Box|BOX)[ \t]+[0-9]{1,5}(?-u:\b)",
            ),
            locality: super::pattern(
                r"(?:APO|FPO|DPO),?[ \t]+(?:AA|AE|AP)[ \t]+[0-9]{5}(?:-[0-9]{4})?(?-u:\b)",
            ),
            ship: super::pattern(SHIP),
        }
    }

    /// The military pieces that start with the word before the digit at `d`, and the ships beside
    /// them.
    pub fn at_digit(&self, text: &str, d: usize, out: &mut Vec<Piece>) {
        let before = text[..d].trim_end_matches([' ', '\t']);
        let word_start = before.len()
            - before
                .bytes()
                .rev()
                .take_while(u8::is_ascii_alphabetic)
                .count();
        let word = &before[word_start..];
        let found = match word {
            "PSC" | "CMR" | "UNIT" | "Unit" => self.anchored(&self.unit, text, word_start),
            "AA" | "AE" | "AP" => {
                let b2 = before[..word_start].trim_end_matches([' ', '\t', ',']);
                let s = b2.len().saturating_sub(3);
                if b2.ends_with("APO") || b2.ends_with("FPO") || b2.ends_with("DPO") {
                    self.anchored(&self.locality, text, s)
                        .map(|(s, e, _)| (s, e, 0.95))
                } else {
                    None
                }
            }
            _ => None,
        };
        let Some((s, e, base)) = found else {
            return;
        };
        out.push(Piece {
            start: s,
            end: e,
            part: Part::Military,
            score: context::score(text, s, e, base, words::CONTEXT_WORDS),
        });
        // Ships on this line and the lines around it.
        let from = line_start(text, line_start(text, s).saturating_sub(1));
        let le = line_end(text, e);
        let to = if le < text.len() {
            line_end(text, le + 1)
        } else {
            le
        };
        for (ss, se) in super::find_in_spans(&self.ship, text, [(from, to)]) {
            out.push(Piece {
                start: ss,
                end: se,
                part: Part::Ship,
                score: 0.0,
            });
        }
    }

    fn anchored(&self, re: &Pattern, text: &str, at: usize) -> Option<(usize, usize, f32)> {
        let input = regex_automata::Input::new(text)
            .span(at..text.len())
            .anchored(regex_automata::Anchored::Yes);
        re.search(&input).map(|m| (m.start(), m.end(), 0.85))
    }
}

impl Default for Military {
    fn default() -> Self {
        Self::new()
    }
}
