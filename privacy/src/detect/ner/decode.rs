//! From per-token labels to `PERSON_NAME` and `ADDRESS` spans.
//!
//! The model labels word pieces with fine types (given name, surname, building number, street, unit,
//! city, state, ZIP code) and does not keep B-/I- consistent inside a word, so decoding ignores the
//! B/I prefix and works on text gaps instead:
//! 1. consecutive labelled tokens of one group (person or address) form a fragment when only
//!    whitespace (or nothing, inside a word) separates them;
//! 2. person fragments join across an initial's dot or a hyphen ("Richard M. Nixon");
//! 3. address fragments join across short, address-like gaps: commas, and up to three capitalised
//!    words or numbers (the city the model missed in "Avenue NW, Washington, DC 20500");
//! 4. a span of only a city and/or a state is a place, not an address, and a span without a street name
//!    is a guessed number (a mention id, a ticket number), not an address: its score is capped at
//!    [`PLACE_SCORE`], below the default confidence threshold.
//!
//! Scores are the mean of the tokens' entity probabilities (1 − P(O)).

use crate::{Entity, EntityType};

/// The score cap for an "address" that is only a city or a state.
pub const PLACE_SCORE: f32 = 0.5;

/// The fine type a token is labelled with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Given name.
    Given,
    /// Surname.
    Surname,
    /// House number.
    Building,
    /// Street name (with its suffix).
    Street,
    /// Apartment, suite, unit.
    Secondary,
    /// City.
    City,
    /// State or region.
    State,
    /// Postcode.
    Zip,
    /// Anything else (outside, or a type handled by the pattern tier).
    Other,
}

impl Piece {
    /// The piece named by a label such as `B-GIVEN_NAME`.
    pub fn from_label(label: &str) -> Piece {
        let bare = label
            .strip_prefix("B-")
            .or_else(|| label.strip_prefix("I-"))
            .unwrap_or(label);
        match bare {
            "GIVEN_NAME" => Piece::Given,
            "SURNAME" => Piece::Surname,
            "BUILDING_NUMBER" => Piece::Building,
            "STREET_NAME" => Piece::Street,
            "SECONDARY_ADDRESS" => Piece::Secondary,
            "CITY" => Piece::City,
            "STATE" => Piece::State,
            "ZIP_CODE" => Piece::Zip,
            _ => Piece::Other,
        }
    }

    fn kind(self) -> Option<EntityType> {
        match self {
            Piece::Given | Piece::Surname => Some(EntityType::PersonName),
            Piece::Other => None,
            _ => Some(EntityType::Address),
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// One token's prediction: byte span in the text, best entity piece, and its probability.
#[derive(Clone, Copy, Debug)]
pub struct TokenPred {
    /// Start byte.
    pub start: usize,
    /// End byte.
    pub end: usize,
    /// Best piece (or [`Piece::Other`]).
    pub piece: Piece,
    /// Probability that the token is part of an entity at all.
    pub score: f32,
}

struct Fragment {
    kind: EntityType,
    start: usize,
    end: usize,
    score_sum: f32,
    tokens: u32,
    pieces: u16,
}

impl Fragment {
    fn absorb(&mut self, other: &Fragment) {
        self.end = other.end;
        self.score_sum += other.score_sum;
        self.tokens += other.tokens;
        self.pieces |= other.pieces;
    }
}

/// Whether the text between two person fragments still belongs to one name.
fn person_gap(gap: &str) -> bool {
    // A middle initial the model left out: " M. ".
    let initial = gap
        .strip_prefix(' ')
        .and_then(|g| g.strip_suffix(". "))
        .is_some_and(|i| {
            let mut chars = i.chars();
            chars.next().is_some_and(char::is_uppercase) && chars.next().is_none()
        });
    initial
        || gap.len() <= 3
            && gap
                .chars()
                .all(|c| c == ' ' || c == '.' || c == '-' || c == '\'')
}

/// Whether the text between two address fragments still belongs to one address. A line break joins
/// (the next line of a letter or a signature: `…Street\n  Springfield, IL`), however deep the indent;
/// a whole line between them (a name, a phone) or a field label (`Postcode`, `ZIP`) does not: labels
/// are context, never part of an address.
fn address_gap(gap: &str) -> bool {
    let breaks = gap.matches('\n').count();
    if breaks > 1 {
        return false;
    }
    if breaks == 1
        && gap
            .chars()
            .all(|c| c.is_whitespace() || c == ',' || c == ';')
    {
        return gap.len() <= 80;
    }
    if gap.len() > 40 {
        return false;
    }
    let mut words = 0;
    for word in gap.split(|c: char| c.is_whitespace() || c == ',') {
        let word = word.trim_matches(|c| c == '.' || c == '#' || c == '-' || c == ':');
        if word.is_empty() {
            continue;
        }
        if crate::detect::address_words::is_in(crate::detect::address_words::LABELS, word) {
            return false;
        }
        words += 1;
        let first = word.chars().next().unwrap_or(' ');
        if words > 3 || !(first.is_uppercase() || first.is_ascii_digit()) {
            return false;
        }
        if word
            .chars()
            .any(|c| !(c.is_alphanumeric() || c == '\'' || c == '-' || c == '.'))
        {
            return false;
        }
    }
    // A sentence end (". " before a capital) between two fragments separates two mentions;
    // an abbreviation's dot ("Apt. 82") does not.
    !gap.match_indices(". ")
        .any(|(i, _)| gap[i + 2..].chars().next().is_some_and(char::is_uppercase))
}

/// A US state code right after an address that the model left out ("…, Harristown ID"): its length
/// in bytes, with a following ZIP code when there is one.
fn trailing_state(rest: &str) -> usize {
    let Some(after) = rest.strip_prefix(' ').or_else(|| rest.strip_prefix(", ")) else {
        return 0;
    };
    let lead = rest.len() - after.len();
    let code = after.as_bytes();
    if code.len() < 2 || !code[0].is_ascii_uppercase() || !code[1].is_ascii_uppercase() {
        return 0;
    }
    if code.get(2).is_some_and(|c| c.is_ascii_alphanumeric()) {
        return 0;
    }
    let mut len = lead + 2;
    let zip = &after[2..];
    if let Some(digits) = zip.strip_prefix(' ') {
        let n = digits.bytes().take_while(u8::is_ascii_digit).count();
        if n == 5 && !digits[5..].starts_with(|c: char| c.is_alphanumeric()) {
            len += 6;
        }
    }
    len
}

/// The entities in `text` given its tokens' predictions (in text order).
pub fn spans(text: &str, tokens: &[TokenPred]) -> Vec<Entity> {
    let gap = |a: usize, b: usize| text.get(a..b).unwrap_or("\u{0}");
    // 1. Fragments: same group, separated by nothing or whitespace.
    let mut fragments: Vec<Fragment> = Vec::new();
    for t in tokens {
        let Some(kind) = t.piece.kind() else { continue };
        let frag = Fragment {
            kind,
            start: t.start,
            end: t.end,
            score_sum: t.score,
            tokens: 1,
            pieces: t.piece.bit(),
        };
        match fragments.last_mut() {
            Some(last)
                if last.kind == kind
                    && last.end <= t.start
                    && gap(last.end, t.start).chars().all(char::is_whitespace)
                    && t.start - last.end <= 3 =>
            {
                last.absorb(&frag);
            }
            _ => fragments.push(frag),
        }
    }
    // 2–3. Join fragments across name and address gaps.
    let mut joined: Vec<Fragment> = Vec::new();
    for frag in fragments {
        if let Some(last) = joined.last_mut()
            && last.kind == frag.kind
            && last.end <= frag.start
        {
            let between = gap(last.end, frag.start);
            let ok = match frag.kind {
                EntityType::PersonName => person_gap(between),
                _ => address_gap(between),
            };
            if ok {
                last.absorb(&frag);
                continue;
            }
        }
        joined.push(frag);
    }
    // 4. Complete a state code the model left out, score, trim, cap places.
    let place = Piece::City.bit() | Piece::State.bit();
    let street = Piece::Building.bit() | Piece::Street.bit();
    for f in &mut joined {
        if f.kind == EntityType::Address
            && f.pieces & street != 0
            && f.pieces & Piece::Zip.bit() == 0
        {
            f.end += text.get(f.end..).map_or(0, trailing_state);
        }
    }
    joined
        .into_iter()
        .filter_map(|f| {
            let span = text.get(f.start..f.end)?;
            let trimmed = span.trim_end_matches(|c: char| c.is_whitespace() || ",;:".contains(c));
            let trimmed_start = trimmed.len()
                - trimmed
                    .trim_start_matches(|c: char| c.is_whitespace() || ",;:".contains(c))
                    .len();
            let (start, end) = (f.start + trimmed_start, f.start + trimmed.len());
            if start >= end {
                return None;
            }
            let mut score = (f.score_sum / f.tokens as f32).clamp(0.0, 1.0);
            // No street name, no address: a city or state alone is a place, and a lone building number,
            // unit or postcode is a number the model guessed at (chat text is full of them: Slack's
            // `<@W11>` mention ids, "Request 17").
            if f.kind == EntityType::Address
                && (f.pieces & !place == 0 || f.pieces & Piece::Street.bit() == 0)
            {
                score = score.min(PLACE_SCORE);
            }
            Some(Entity {
                kind: f.kind,
                start,
                end,
                score,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens for `text` split on spaces and before `,`/`.`, labelled in order by `pieces`.
    fn tokens(text: &str, pieces: &[Piece]) -> Vec<TokenPred> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
            let punct = c == ',' || c == '.';
            if c.is_whitespace() || punct {
                if let Some(s) = start.take() {
                    out.push((s, i));
                }
                if punct {
                    out.push((i, i + 1));
                }
            } else if start.is_none() {
                start = Some(i);
            }
        }
        assert_eq!(out.len(), pieces.len(), "{out:?}");
        out.into_iter()
            .zip(pieces)
            .map(|((start, end), &piece)| TokenPred {
                start,
                end,
                piece,
                score: if piece == Piece::Other { 0.01 } else { 0.9 },
            })
            .collect()
    }

    fn show(text: &str, e: &[Entity]) -> Vec<(String, String)> {
        e.iter()
            .map(|e| {
                (
                    e.kind.as_str().to_string(),
                    text[e.start..e.end].to_string(),
                )
            })
            .collect()
    }

    use Piece::*;

    #[test]
    fn given_name_and_surname_make_one_person() {
        let text = "Ask Dan Tailor or Richard M. Nixon or Richard M. Nixon";
        let p = [
            Other, Given, Surname, Other, Given, Given, Other, Surname, Other, Given, Other, Other,
            Surname,
        ];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(
            got,
            vec![
                ("PERSON_NAME".into(), "Dan Tailor".into()),
                ("PERSON_NAME".into(), "Richard M. Nixon".into()),
                ("PERSON_NAME".into(), "Richard M. Nixon".into())
            ]
        );
    }

    #[test]
    fn address_pieces_join_across_commas_and_a_missed_city() {
        let text = "at 1600 Pennsylvania Avenue NW, Washington, DC 20500. Thanks";
        let p = [
            Other, Building, Street, Street, Street, Other, Other, Other, State, Zip, Other, Other,
        ];
        let e = spans(text, &tokens(text, &p));
        assert_eq!(
            show(text, &e),
            vec![(
                "ADDRESS".into(),
                "1600 Pennsylvania Avenue NW, Washington, DC 20500".into()
            )]
        );
        assert!(e[0].score > 0.85);
    }

    #[test]
    fn a_unit_and_a_missed_state_code_stay_in_the_address() {
        let text = "at 93 Hunter Way Apt. 82, Batzberg CT. Then";
        let p = [
            Other, Building, Street, Street, Other, Other, Secondary, Other, City, Other, Other,
            Other,
        ];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(
            got,
            vec![(
                "ADDRESS".into(),
                "93 Hunter Way Apt. 82, Batzberg CT".into()
            )]
        );
    }

    #[test]
    fn a_lone_city_is_a_place_not_an_address() {
        let text = "I moved to Berlin last year";
        let p = [Other, Other, Other, City, Other, Other];
        let e = spans(text, &tokens(text, &p));
        assert_eq!(e.len(), 1);
        assert!(e[0].score <= PLACE_SCORE);
    }

    #[test]
    fn address_lines_join_across_a_line_break_but_not_a_label() {
        // The street on one line, the city, state and ZIP on the next, indented.
        let text = "at 93 Hunter Way\n      Batzberg CT 06511\nThanks";
        let p = [Other, Building, Street, Street, City, State, Zip, Other];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(
            got,
            vec![(
                "ADDRESS".into(),
                "93 Hunter Way\n      Batzberg CT 06511".into()
            )]
        );
        // "Postcode" is a label between two pieces: two spans, the label in neither.
        let text = "NI QQ123456C\nPostcode SW1A 1AA";
        let p = [Other, Building, Other, Zip, Zip];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|(_, t)| !t.contains("Postcode")), "{got:?}");
        // A whole line between two pieces (a name) keeps them apart.
        let text = "5 Elm St\nJohn Smith\nSpringfield";
        let p = [Building, Street, Street, Other, Other, City];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[test]
    fn separate_mentions_stay_separate() {
        let text = "Anna and Bob live at 5 Elm St. and 7 Oak Rd";
        let p = [
            Given, Other, Given, Other, Other, Building, Street, Street, Other, Other, Building,
            Street, Street,
        ];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[2].1, "5 Elm St");
        assert_eq!(got[3].1, "7 Oak Rd");
    }
}
