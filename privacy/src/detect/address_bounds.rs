//! Where a merged `ADDRESS` starts and ends. Both tiers find the core of an address (the street, the
//! city and postcode) well; its edges less so, and on a label, a form or a letter every token at the
//! edge counts:
//! - the country that ends it (`…, ON R1V 9Y2, Canada`, `Newcastle NSW 2678` / `Australia`,
//!   `U.S.A.` with its last dot) belongs to it;
//! - so does a leading unit or building line, or a unit word the span started just after (`Flat 541,
//!   Green Park Towers`, `CMR 716` / `Box 600`, `Building 6` / `29 Elm Street`);
//! - a company line above the street (`Pinecrest Realty` / `74 Chestnut Street`) does not;
//! - nor does anything after a blank line (the date under a letter's address, the first letter of a
//!   phone label).
//!
//! A `LOCATION` inside the settled address, overlapping it or right next to it is part of it. Invariants: spans only move
//! to char boundaries inside the text; an address is never left empty (it is dropped instead).

use std::sync::LazyLock;

use regex::Regex;

use super::address_words::{self as words, COUNTRIES, UNIT_WORDS};
use super::ner::fields;
use crate::{Entity, EntityType};

/// A line that is only a unit, a building or a military unit (`Flat 3`, `Building 6`, `CMR 716`,
/// `PSC 1234`, `Bât. B, 2e étage`).
static UNIT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^[\ \t]*(?:cmr|psc|unit|building|bldg\.?|flat|suite|ste\.?|apt\.?|apartment|floor|block|tower|bât\.|bâtiment)[\ \t]+[\p{L}\p{N}-]{1,8}(?:,[\ \t]*[\p{L}\p{N}\ .-]{1,20})?[\ \t]*$",
    )
    .expect("unit line pattern compiles")
});

/// Settle the edges of every `ADDRESS` in `found` (see the module doc).
pub fn settle(text: &str, found: &mut Vec<Entity>) {
    for e in found.iter_mut().filter(|e| e.kind == EntityType::Address) {
        cut_at_blank_line(text, e);
        drop_company_line(text, e);
        take_unit_before(text, e);
        take_country_after(text, e);
    }
    found.retain(|e| e.start < e.end);
    join_adjacent_places(text, found);
}

/// A `LOCATION` inside an address, overlapping it, or right next to it (only `,`, `;` and spaces
/// between, at most one line break: `Lindenstraße 8;Hamburg`, `Flat 2` / `Oxford`) is that address's
/// city, region or country: the address takes it in. The place tier and the address tiers read the
/// same words independently, so without this an address would lose its city to a `LOCATION`.
fn join_adjacent_places(text: &str, found: &mut Vec<Entity>) {
    let touches = |a: usize, b: usize| {
        a <= b && {
            let gap = &text[a..b];
            gap.len() <= 4
                && gap.matches('\n').count() <= 1
                && gap
                    .chars()
                    .all(|c| c == ',' || c == ';' || c.is_whitespace())
        }
    };
    let mut k = 0;
    while k < found.len() {
        if found[k].kind != EntityType::Location {
            k += 1;
            continue;
        }
        let (s, e) = (found[k].start, found[k].end);
        let mut joined = false;
        for a in found.iter_mut().filter(|a| {
            a.kind == EntityType::Address
                && ((a.start < e && s < a.end) || touches(a.end, s) || touches(e, a.start))
        }) {
            a.start = a.start.min(s);
            a.end = a.end.max(e);
            joined = true;
        }
        if joined {
            found.remove(k);
        } else {
            k += 1;
        }
    }
}

/// Keep what comes before the first blank line.
fn cut_at_blank_line(text: &str, e: &mut Entity) {
    let span = &text[e.start..e.end];
    let mut at = 0;
    for line in span.split_inclusive('\n') {
        if at > 0 && line.trim().is_empty() {
            let kept = span[..at].trim_end();
            e.end = e.start + kept.len();
            return;
        }
        at += line.len();
    }
}

/// Drop a first line that names a company (no digit, ends with a company word).
fn drop_company_line(text: &str, e: &mut Entity) {
    let span = &text[e.start..e.end];
    let Some(nl) = span.find('\n') else { return };
    let first = span[..nl].trim();
    if first.chars().any(|c| c.is_ascii_digit()) {
        return;
    }
    let last = first
        .rsplit(|c: char| c.is_whitespace() || c == ',')
        .next()
        .unwrap_or("");
    if fields::is_company_word(last) {
        let rest = &span[nl + 1..];
        e.start = e.end - rest.trim_start().len();
    }
}

/// Take a unit word right before the start (`Flat |541`) or a unit line right above it.
fn take_unit_before(text: &str, e: &mut Entity) {
    let before = &text[..e.start];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let head = before[line_start..].trim_end_matches([' ', '\t']);
    let word_start = head.rfind(|c: char| c.is_whitespace()).map_or(0, |i| i + 1);
    let word = &head[word_start..];
    if !word.is_empty()
        && head.len() < before[line_start..].len()
        && words::is_in(UNIT_WORDS, word)
        && head[..word_start].trim().is_empty()
    {
        e.start = line_start + word_start;
        return;
    }
    // The line above, when the span starts a line and that line is a unit line.
    if !head.is_empty() || line_start == 0 {
        return;
    }
    let above_end = line_start - 1;
    let above_start = text[..above_end].rfind('\n').map_or(0, |i| i + 1);
    let above = &text[above_start..above_end];
    if UNIT_LINE.is_match(above) {
        e.start = above_start + (above.len() - above.trim_start().len());
    }
}

/// Take the country that ends the address: after a comma or on the next line.
fn take_country_after(text: &str, e: &mut Entity) {
    // `U.S.A` found without its last dot.
    if text[e.end..].starts_with('.') {
        let last = text[e.start..e.end]
            .rsplit([' ', '\n', ','])
            .next()
            .unwrap_or("");
        if words::is_in(COUNTRIES, &format!("{last}.")) {
            e.end += 1;
            return;
        }
    }
    let rest = &text[e.end..];
    let skipped = rest.trim_start_matches([' ', '\t']);
    let skipped = match skipped.strip_prefix(',') {
        Some(s) => s.trim_start_matches([' ', '\t']),
        None => match skipped.strip_prefix('\n') {
            Some(s) if !s.starts_with('\n') => s.trim_start_matches([' ', '\t']),
            _ => return,
        },
    };
    let at = e.end + (rest.len() - skipped.len());
    // The longest country name the text continues with, ending at a word boundary.
    let mut best = 0;
    for country in COUNTRIES {
        let n = country.len();
        if n <= best || skipped.len() < n || !skipped.is_char_boundary(n) {
            continue;
        }
        let candidate = &skipped[..n];
        let bounded = skipped[n..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric())
            || country.ends_with('.');
        if bounded && words::is_in(&[country], candidate) {
            best = n;
        }
    }
    // A two-letter country (`US`, `UK`) right after a comma could be a state: only at a line's end.
    if best > 0 && best <= 2 {
        let after = skipped[best..].trim_start_matches([' ', '\t']);
        if !(after.is_empty() || after.starts_with(['\n', '.', ';'])) {
            return;
        }
    }
    if best > 0 {
        e.end = at + best;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settled(text: &str, span: &str) -> String {
        let start = text.find(span).expect("span in text");
        let mut found = vec![Entity {
            kind: EntityType::Address,
            start,
            end: start + span.len(),
            score: 0.9,
        }];
        settle(text, &mut found);
        found
            .iter()
            .map(|e| text[e.start..e.end].to_string())
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn the_country_ends_the_address() {
        let text = "moved to 12 Birch Rd, Kingston, ON K7L 3N6, Canada last month";
        assert_eq!(
            settled(text, "12 Birch Rd, Kingston, ON K7L 3N6"),
            "12 Birch Rd, Kingston, ON K7L 3N6, Canada"
        );
        let text = "Ship to:\n4 Ocean Pde\nManly NSW 2095\nAustralia\nTel 555";
        assert_eq!(
            settled(text, "4 Ocean Pde\nManly NSW 2095"),
            "4 Ocean Pde\nManly NSW 2095\nAustralia"
        );
        let text = "at 9 Hill St, Boise, ID 83702, U.S.A. Thanks";
        assert_eq!(
            settled(text, "9 Hill St, Boise, ID 83702, U.S.A"),
            "9 Hill St, Boise, ID 83702, U.S.A."
        );
        // Not a country, and not across a blank line.
        let text = "at 9 Hill St, Boise, ID 83702, Francesca said\n\nFrance";
        assert_eq!(
            settled(text, "9 Hill St, Boise, ID 83702"),
            "9 Hill St, Boise, ID 83702"
        );
    }

    #[test]
    fn units_and_military_lines_start_the_address() {
        let text = "Mr. Rao\nFlat 541, Green Park Towers\n167 Anna Salai";
        assert_eq!(
            settled(text, "541, Green Park Towers\n167 Anna Salai"),
            "Flat 541, Green Park Towers\n167 Anna Salai"
        );
        let text = "SGT Ko\nCMR 716\nBox 600\nDPO AE 09976";
        assert_eq!(
            settled(text, "Box 600\nDPO AE 09976"),
            "CMR 716\nBox 600\nDPO AE 09976"
        );
        let text = "Ana Lima\nThanks for the order 66\n5 Elm St";
        assert_eq!(settled(text, "5 Elm St"), "5 Elm St");
    }

    #[test]
    fn company_lines_and_what_follows_a_blank_line_are_not_the_address() {
        let text = "Pinecrest Realty\n74 Chestnut Street\nPasadena, CA 91101\n\n2/14/21";
        assert_eq!(
            settled(text, text),
            "74 Chestnut Street\nPasadena, CA 91101"
        );
        let text = "Smith Street Bakery\n5 Elm St";
        assert_eq!(settled(text, text), "Smith Street Bakery\n5 Elm St");
    }

    #[test]
    fn a_location_inside_an_address_is_part_of_it() {
        let text = "at 5 Elm St, Boise, ID 83702";
        let mut found = vec![
            Entity {
                kind: EntityType::Address,
                start: 3,
                end: text.len(),
                score: 0.9,
            },
            Entity {
                kind: EntityType::Location,
                start: 14,
                end: 19,
                score: 0.9,
            },
        ];
        settle(text, &mut found);
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn a_location_next_to_an_address_joins_it_and_one_apart_does_not() {
        let entity = |kind, start: usize, end: usize| Entity {
            kind,
            start,
            end,
            score: 0.9,
        };
        let text = "ADR:;;Lindenstraße 8;Hamburg;;20095";
        let street = text.find("Linden").expect("in the text");
        let city = text.find("Hamburg").expect("in the text");
        let mut found = vec![
            entity(EntityType::Address, street, city - 1),
            entity(EntityType::Location, city, city + "Hamburg".len()),
        ];
        settle(text, &mut found);
        assert_eq!(found.len(), 1);
        assert_eq!(
            &text[found[0].start..found[0].end],
            "Lindenstraße 8;Hamburg"
        );

        let text = "Drop it at 5 Elm St, then fly to Boise tomorrow.";
        let street = text.find("5 Elm").expect("in the text");
        let city = text.find("Boise").expect("in the text");
        let mut found = vec![
            entity(EntityType::Address, street, street + "5 Elm St".len()),
            entity(EntityType::Location, city, city + "Boise".len()),
        ];
        settle(text, &mut found);
        assert_eq!(found.len(), 2, "a place after other words stays a place");
    }
}
