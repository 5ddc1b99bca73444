//! From per-token labels to `PERSON_NAME`, `ADDRESS` and `LOCATION` spans.
//!
//! The model labels word pieces with fine types (given name, surname, building number, street, unit,
//! city, state, ZIP code) and does not keep B-/I- consistent inside a word, so decoding ignores the
//! B/I prefix and works on text gaps instead:
//! 1. a token is labelled when the model's entity probability (1 − P(O)) is at least [`ENTITY_MIN`];
//!    a capitalised word (any word in an all-lower-case text) with a person reading as faint as
//!    [`rules::CUE_MIN`] counts too right after a name cue ("by", "thanks,", "Dr.") or right after
//!    another person token, and such a span is kept whatever its mean (it scores at least
//!    [`calibration::RULE_SCORE`]);
//! 2. consecutive labelled tokens of one group (person or address) form a fragment when only
//!    whitespace (or nothing, inside a word) separates them;
//! 3. person fragments join across an initial's dot or a hyphen ("Richard M. Nixon", "marta k.
//!    lindqvist");
//! 4. address fragments join across short, address-like gaps: commas, and up to three capitalised
//!    words or numbers (the city the model missed in "Avenue NW, Washington, DC 20500");
//! 5. a span of only a city and/or a state is a place: a `LOCATION`, not an address; a span with
//!    neither a street name nor a place is a guessed number (a mention id, a ticket number), capped
//!    at [`NUMBER_SCORE`], below the default confidence threshold;
//! 6. the span's raw score, the mean of its tokens' entity probabilities, goes through its type's
//!    fitted curve ([`calibration`]) onto the threshold's scale;
//! 7. the [`rules`] add what the model cannot see (titles, chat speakers, names in Han, Hangul and
//!    Cyrillic script, countries after a place cue); a rule's span that overlaps a model span of the
//!    same type widens it, and one in a script the model never learned overrides a model span of
//!    another type; a single word the model reads as a person after "flies to", "lives in" is a
//!    place;
//! 8. a name found with confidence once in a text is a name at its other occurrences there too.

use super::calibration;
use super::fields;
use super::rules;
use crate::{Entity, EntityType};

/// The score cap for an "address" that is only numbers the model guessed at (no street, no place).
pub const NUMBER_SCORE: f32 = 0.5;

/// A token is part of an entity when P(O) is at most `1 - ENTITY_MIN`: O is not the most likely
/// outcome against all entity labels together.
pub const ENTITY_MIN: f32 = 0.5;

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
    /// The most likely entity piece, however unlikely the token is to be an entity at all
    /// ([`Piece::Other`] when the model gives no entity label any weight); decoding decides with
    /// `score` whether it counts.
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
    /// Held up by a name cue rather than by the model alone.
    cued: bool,
}

impl Fragment {
    fn absorb(&mut self, other: &Fragment) {
        self.end = other.end;
        self.score_sum += other.score_sum;
        self.tokens += other.tokens;
        self.pieces |= other.pieces;
        self.cued |= other.cued;
    }
}

/// A model span before calibration: the raw score (mean 1 − P(O)) and whether a cue held it up.
/// `opc`'s calibration fit reads these (`examples/ner_calibrate.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct RawSpan {
    /// The span, its score the raw mean.
    pub entity: Entity,
    /// A name cue made it count although the model alone would not have: kept at any threshold up
    /// to [`calibration::RULE_SCORE`].
    pub cued: bool,
}

/// Whether the text between two person fragments still belongs to one name.
fn person_gap(gap: &str) -> bool {
    // A middle initial the model left out: " M. " (" k. " in lower-case chat).
    let initial = gap
        .strip_prefix(' ')
        .and_then(|g| g.strip_suffix(". "))
        .is_some_and(|i| {
            let mut chars = i.chars();
            chars.next().is_some_and(char::is_alphabetic) && chars.next().is_none()
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
/// are context, never part of an address. In a line typed all in lower case (`its 5428 elm street,
/// flagstaff, az 62147`) the words between need no capital: up to two, or three with a comma,
/// none a word of chat (`and`, `then`, `see`).
fn address_gap(gap: &str, lower_line: bool) -> bool {
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
        let typed_lower = lower_line
            && first.is_lowercase()
            && !CHAT_WORDS.contains(&word)
            && (words <= 2 || gap.contains(','));
        if words > 3 || !(first.is_uppercase() || first.is_ascii_digit() || typed_lower) {
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

/// Words of chat that end an address typed in lower case rather than continue it.
const CHAT_WORDS: &[&str] = &[
    "and", "or", "then", "see", "at", "to", "the", "a", "pls", "please", "thx", "thanks", "ok",
    "im", "i", "we", "u", "you", "its", "is", "was", "ring", "text", "call", "come", "near", "by",
    "from", "for", "on", "in", "after", "before", "until", "till", "tomorrow", "today", "tonight",
];

/// Whether the line holding byte `at` has no upper-case letter (a chat typed in lower case).
fn lower_line_at(text: &str, at: usize) -> bool {
    let at = at.min(text.len());
    let Some((before, after)) = text.get(..at).zip(text.get(at..)) else {
        return false;
    };
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let end = after.find('\n').map_or(text.len(), |i| at + i);
    text.get(start..end)
        .is_some_and(|l| l.chars().any(char::is_alphabetic) && !l.chars().any(char::is_uppercase))
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

/// An identifier, not an address part: eight or more characters with a digit and a letter (a Slack
/// user id `U054KT67YX`, a ticket `INC5266315`, a hex conversation id), or eleven or more digits (a
/// Discord snowflake). Postcodes (`M5V`, `10115`, `90635-1683`, `SW1A`) are shorter.
fn id_like(word: &str) -> bool {
    let digits = word.chars().filter(char::is_ascii_digit).count();
    let letters = word.chars().filter(char::is_ascii_alphabetic).count();
    word.len() >= 8 && digits > 0 && (letters > 0 || digits >= 11)
}

/// The whitespace-delimited word around a token (a token may be a piece of one: `KQ`, `-`, `1339`).
fn whitespace_word(text: &str, start: usize, end: usize) -> &str {
    let (Some(before), Some(after)) = (text.get(..start), text.get(end..)) else {
        return "";
    };
    let s = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let e = after
        .find(char::is_whitespace)
        .map_or(text.len(), |i| end + i);
    text.get(s..e).unwrap_or("")
}

/// A code of capital letters, a hyphen and digits (`KQ-1339`, `INV-2024-7027`, `OPS-5190`): a SKU,
/// an invoice or a ticket, not a house number or a postcode (those start with a digit or hold one
/// letter: `12-14`, `45-820`, `B-12`).
fn code_like(word: &str) -> bool {
    let word = word.trim_matches(|c: char| !c.is_alphanumeric());
    let mut parts = word.split('-');
    let head = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    (2..=5).contains(&head.len())
        && head.chars().all(|c| c.is_ascii_uppercase())
        && !rest.is_empty()
        && rest
            .iter()
            .all(|p| p.len() >= 2 && p.chars().all(|c| c.is_ascii_digit()))
        && rest.iter().map(|p| p.len()).sum::<usize>() >= 3
}

/// Whether token `i` counts as labelled, and whether only a cue made it count.
fn labelled(text: &str, tokens: &[TokenPred], i: usize, prev_person: bool) -> Option<bool> {
    let t = &tokens[i];
    if t.piece == Piece::Other {
        return None;
    }
    let word = text.get(t.start..t.end).unwrap_or("");
    if id_like(word) || code_like(whitespace_word(text, t.start, t.end)) {
        return None;
    }
    // Names and places are words: a token with a digit or without a letter is not one of theirs.
    let named = matches!(
        t.piece,
        Piece::Given | Piece::Surname | Piece::City | Piece::State
    );
    if named && (word.chars().any(|c| c.is_ascii_digit()) || !word.chars().any(char::is_alphabetic))
    {
        return None;
    }
    if t.score >= ENTITY_MIN {
        return Some(false);
    }
    let person = matches!(t.piece, Piece::Given | Piece::Surname);
    // Capitalised, unless the whole text is lower case (chat): "owns" after "Priya Ramanathan" is not
    // a surname however the model hesitates.
    let first = word.chars().next();
    let shaped = first.is_some_and(char::is_uppercase)
        || first.is_some_and(char::is_alphabetic) && !text.chars().any(char::is_uppercase);
    (person
        && shaped
        && t.score >= rules::CUE_MIN
        && (prev_person || rules::cue_before(text, t.start) || sentence_subject(text, t.start)))
    .then_some(true)
}

/// Whether the word starting at byte `at` opens a sentence of mixed-case text and a lower-case word
/// follows it (`Olena has the spare badge.`, `… noon. Tomasz will bring the keys`): the place of a
/// sentence's subject, where a lone given name stands with no cue before it. A capitalised word
/// before another capitalised word (`Sales Team`, `Order 1234`) or a label's colon is left to the
/// model.
fn sentence_subject(text: &str, at: usize) -> bool {
    let Some(before) = text.get(..at) else {
        return false;
    };
    let before = before.trim_end_matches([' ', '\t']);
    let opens = before.is_empty() || before.ends_with(['.', '!', '?', '\n']);
    if !opens || !text.chars().any(char::is_lowercase) {
        return false;
    }
    let rest = &text[at..];
    let word_len = rest
        .find(|c: char| !(c.is_alphabetic() || matches!(c, '-' | '\'' | '’')))
        .unwrap_or(rest.len());
    let word = &rest[..word_len];
    let mut chars = word.chars();
    let shaped = chars.next().is_some_and(char::is_uppercase)
        && word.chars().count() >= 3
        && chars.all(|c| !c.is_uppercase());
    // One space, then a verb only a person does (`said`, `asked`, `signed`, `can`): not `Olena:`,
    // not `Rue de Rivoli` (a particle), not `Lisbon is lovely` (places are and have too).
    let next = &rest[word_len..];
    let verb: String = next
        .strip_prefix(' ')
        .unwrap_or("")
        .chars()
        .take_while(|c| c.is_alphabetic())
        .collect();
    shaped && PERSON_VERBS.contains(&verb.as_str())
}

/// Words that follow a person, not a place or a thing, at the start of a sentence.
const PERSON_VERBS: &[&str] = &[
    "said",
    "says",
    "asked",
    "asks",
    "told",
    "tells",
    "thinks",
    "thought",
    "wants",
    "wanted",
    "replied",
    "wrote",
    "writes",
    "emailed",
    "called",
    "texted",
    "phoned",
    "signed",
    "agreed",
    "confirmed",
    "approved",
    "mentioned",
    "noted",
    "promised",
    "offered",
    "volunteered",
    "booked",
    "can",
    "could",
    "should",
    "already",
    "just",
    "also",
    "still",
    "prefers",
    "needs",
    "needed",
    "feels",
    "felt",
    "knows",
    "knew",
    "met",
    "joined",
    "apologised",
    "apologized",
    "suggested",
    "recommended",
    "reported",
    "explained",
    "insisted",
    "decided",
    "forgot",
    "remembered",
];

/// The model's spans in `text` given its tokens' predictions (in text order), before calibration.
pub fn raw_spans(text: &str, tokens: &[TokenPred]) -> Vec<RawSpan> {
    let gap = |a: usize, b: usize| text.get(a..b).unwrap_or("\u{0}");
    // 1–2. Fragments: same group, separated by nothing or whitespace.
    let mut fragments: Vec<Fragment> = Vec::new();
    let mut prev_person_end = None;
    for (i, t) in tokens.iter().enumerate() {
        // A person token right after another one (a surname after a cued given name) may lean on it.
        let prev_person = prev_person_end.is_some_and(|end: usize| {
            end <= t.start
                && t.start - end <= 3
                && gap(end, t.start)
                    .chars()
                    .all(|c| c.is_whitespace() && c != '\n')
        });
        let Some(cued) = labelled(text, tokens, i, prev_person) else {
            continue;
        };
        let Some(kind) = t.piece.kind() else { continue };
        prev_person_end = (kind == EntityType::PersonName).then_some(t.end);
        let frag = Fragment {
            kind,
            start: t.start,
            end: t.end,
            score_sum: t.score,
            tokens: 1,
            pieces: t.piece.bit(),
            cued,
        };
        match fragments.last_mut() {
            // A name never runs onto the next line (`Bernd Schmidt` / `Acme Corp` on a label).
            Some(last)
                if last.kind == kind
                    && last.end <= t.start
                    && gap(last.end, t.start).chars().all(char::is_whitespace)
                    && t.start - last.end <= 3
                    && !(kind == EntityType::PersonName
                        && gap(last.end, t.start).contains('\n')) =>
            {
                last.absorb(&frag);
            }
            _ => fragments.push(frag),
        }
    }
    // 3–4. Join fragments across name and address gaps.
    let mut joined: Vec<Fragment> = Vec::new();
    for frag in fragments {
        if let Some(last) = joined.last_mut()
            && last.kind == frag.kind
            && last.end <= frag.start
        {
            let between = gap(last.end, frag.start);
            let ok = match frag.kind {
                EntityType::PersonName => person_gap(between),
                _ => address_gap(between, lower_line_at(text, frag.start)),
            };
            if ok {
                last.absorb(&frag);
                continue;
            }
        }
        joined.push(frag);
    }
    // Complete a state code the model left out.
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
            let mut kind = f.kind;
            if kind == EntityType::Address && f.pieces & !place == 0 {
                // 5. A city or a state alone is a place.
                kind = EntityType::Location;
            } else if kind == EntityType::Address && f.pieces & (Piece::Street.bit() | place) == 0 {
                // A lone building number, unit or postcode is a number the model guessed at (chat
                // text is full of them: Slack's `<@W11>` mention ids, "Request 17").
                score = score.min(NUMBER_SCORE);
            }
            Some(RawSpan {
                entity: Entity {
                    kind,
                    start,
                    end,
                    score,
                },
                cued: f.cued,
            })
        })
        .collect()
}

/// A raw span's score on the threshold's scale: its type's fitted curve, a cue's floor, and the cap
/// of guessed numbers kept below the default threshold.
pub fn calibrated(span: &RawSpan) -> f32 {
    let e = &span.entity;
    let mut score = calibration::curve(e.kind).apply(e.score);
    if span.cued {
        score = score.max(calibration::RULE_SCORE);
    }
    if e.score <= NUMBER_SCORE && e.kind == EntityType::Address {
        score = score.min(NUMBER_SCORE);
    }
    score
}

/// Region and business acronyms that the model, seeing a capitalised short word, may read as a
/// name or a place (`EMEA`, `APAC`, `DACH`, `QBR`): sales regions and jargon, never a person and
/// never where someone is.
const BUSINESS_ACRONYMS: &[&str] = &[
    "emea", "emeia", "apac", "apj", "apjc", "latam", "dach", "anz", "mena", "noram", "namer",
    "amer", "amers", "cee", "asean", "gcc", "uki", "smb", "smbs", "gtm", "qbr", "ebr", "arr",
    "mrr", "okr", "okrs", "kpi", "kpis", "crm", "erp", "b2b", "b2c", "saas", "sdr", "bdr", "cro",
    "ceo", "cfo", "cto", "coo", "cmo", "ciso", "vp", "svp", "evp", "hr", "pm", "eta", "fyi",
    "asap", "eod", "eow", "ooo", "wfh", "tbd", "tbc", "nda", "sla", "rfp", "rfq", "poc", "uat",
    "sre", "yoy", "qoq", "fy",
];

/// Whether the span is one business acronym written in capitals (`EMEA`, `QBR`, `B2B`). In title
/// case the same letters may be a name or a place (`Mena`, `Amer`, `Dach`).
fn business_acronym(word: &str) -> bool {
    let w = word.trim_matches(|c: char| !c.is_alphanumeric());
    w.len() <= 8
        && !w.chars().any(char::is_lowercase)
        && BUSINESS_ACRONYMS.contains(&w.to_lowercase().as_str())
}

/// Drops person and place spans that are a business acronym, and trims one off either end of a
/// longer person span (`EMEA Maria Lopez` → `Maria Lopez`).
pub fn drop_acronyms(text: &str, out: &mut Vec<Entity>) {
    out.retain_mut(|e| {
        if !matches!(e.kind, EntityType::PersonName | EntityType::Location) {
            return true;
        }
        let Some(span) = text.get(e.start..e.end) else {
            return true;
        };
        let words: Vec<(usize, &str)> = span
            .split_whitespace()
            .map(|w| (w.as_ptr() as usize - span.as_ptr() as usize, w))
            .collect();
        let (Some(&(first_at, first)), Some(&(last_at, last))) = (words.first(), words.last())
        else {
            return true;
        };
        if words.len() == 1 {
            return !business_acronym(first);
        }
        if e.kind == EntityType::PersonName {
            if business_acronym(last) {
                e.end = e.start + span[..last_at].trim_end().len();
            }
            if business_acronym(first) {
                let next = words[1].0;
                e.start += next.max(first_at);
            }
        }
        e.start < e.end
    });
}

/// Lower-case particles inside a name (`Paloma de la Cruz`): not trimmed off a name's edge.
const NAME_PARTICLES: &[&str] = &[
    "de", "da", "do", "dos", "das", "del", "della", "di", "du", "la", "le", "van", "von", "der",
    "den", "ter", "ten", "bin", "bint", "ibn", "al", "el",
];

/// In a line with capitals, a person span never starts or ends with a lower-case word: `Rhett
/// flies` is `Rhett`, `she Estella` is `Estella` (a verb or pronoun the model ran into the name).
fn trim_lower_words(text: &str, out: &mut Vec<Entity>) {
    out.retain_mut(|e| {
        if e.kind != EntityType::PersonName || lower_line_at(text, e.start) {
            return true;
        }
        let Some(span) = text.get(e.start..e.end) else {
            return true;
        };
        let lower_word = |w: &str| {
            w.chars().next().is_some_and(char::is_lowercase)
                && !NAME_PARTICLES.contains(&w)
                && w.chars().all(char::is_alphabetic)
        };
        let words: Vec<(usize, &str)> = span
            .split_whitespace()
            .map(|w| (w.as_ptr() as usize - span.as_ptr() as usize, w))
            .collect();
        let Some(first) = words.iter().position(|(_, w)| !lower_word(w)) else {
            return false;
        };
        let last = words
            .iter()
            .rposition(|(_, w)| !lower_word(w))
            .unwrap_or(first);
        let (s, w) = words[last];
        e.end = e.start + s + w.len();
        e.start += words[first].0;
        e.start < e.end
    });
}

/// Names that are also everyday English words (`Can you…`, `Will do`, `Mark the box`, `Park
/// Avenue`): a name's part is a name elsewhere only when it is not one of them.
const WORD_NAMES: &[&str] = &[
    "can", "will", "may", "june", "april", "august", "mark", "bill", "rose", "grace", "hope",
    "joy", "faith", "art", "sunny", "summer", "dawn", "eve", "ray", "drew", "guy", "pat", "sue",
    "chase", "max", "lane", "dean", "page", "wade", "ward", "young", "long", "king", "park",
    "bell", "hill", "brown", "white", "green", "black", "gray", "grey", "rich", "frank", "major",
    "new", "van", "more", "mercy", "sky", "river", "stone", "wood", "field", "price", "cash",
    "north", "south", "west", "east", "street", "road", "hall", "church", "ali", "sun",
];

/// A given name or surname of a name found with confidence is that person where it stands alone
/// elsewhere in the text, capitalised as there: `Comment (Ryo):` after `Assignee: Ryo Yamamoto`,
/// `while Estella is away` after `Estella Marsh flies to Hokkaido`. Words under three letters,
/// business acronyms and words in capitals are left.
fn name_parts_elsewhere(text: &str, out: &mut Vec<Entity>) {
    let mut parts: Vec<(&str, f32)> = Vec::new();
    for e in out
        .iter()
        .filter(|e| e.kind == EntityType::PersonName && e.score >= calibration::RULE_SCORE)
    {
        let Some(span) = text.get(e.start..e.end) else {
            continue;
        };
        let words: Vec<&str> = span.split_whitespace().collect();
        if words.len() < 2 {
            continue;
        }
        for w in words {
            let w = w.trim_end_matches([',', '.']);
            let mut chars = w.chars();
            let shaped = chars.next().is_some_and(char::is_uppercase)
                && w.chars().count() >= 3
                && chars.all(|c| c.is_lowercase() || matches!(c, '-' | '\'' | '’'));
            let common = WORD_NAMES.contains(&w.to_lowercase().as_str());
            if shaped && !common && !business_acronym(w) && !parts.iter().any(|(p, _)| *p == w) {
                parts.push((w, e.score));
            }
        }
    }
    let mut add = Vec::new();
    for (part, score) in parts {
        for (at, _) in text.match_indices(part) {
            let end = at + part.len();
            let bounded = text[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric())
                && text[end..].chars().next().is_none_or(|c| {
                    !(c.is_alphanumeric()
                        || c == '@'
                        || c == '.' && text[end + 1..].starts_with(|c: char| c.is_alphanumeric()))
                });
            if bounded
                && !out.iter().any(|e| e.start < end && at < e.end)
                && !add.iter().any(|e: &Entity| e.start < end && at < e.end)
                && !fields::company_after(text, end)
            {
                add.push(Entity {
                    kind: EntityType::PersonName,
                    start: at,
                    end,
                    score,
                });
            }
        }
    }
    out.extend(add);
}

/// The spans the rules find in `text`, given the tokens' predictions (a chat speaker needs the model
/// to read the word as at least faintly a person).
pub fn rule_spans(text: &str, tokens: &[TokenPred]) -> Vec<Entity> {
    let mut out = Vec::new();
    rules::title_names(text, &mut out);
    rules::script_names(text, &mut out);
    rules::countries(text, &mut out);
    fields::field_names(text, &mut out);
    fields::paren_names(text, &mut out);
    fields::column_names(text, &mut out);
    fields::mailbox_names(text, &mut out);
    let person = |start: usize, end: usize| {
        let inside: Vec<f32> = tokens
            .iter()
            .filter(|t| t.start >= start && t.end <= end)
            .map(|t| {
                if matches!(t.piece, Piece::Given | Piece::Surname) {
                    t.score
                } else {
                    0.0
                }
            })
            .collect();
        if inside.is_empty() {
            0.0
        } else {
            inside.iter().sum::<f32>() / inside.len() as f32
        }
    };
    rules::speaker_names(text, person, &mut out);
    out
}

/// The entities in `text` given its tokens' predictions (in text order): the model's spans,
/// calibrated, and the rules' spans; a rule span overlapping a model span of its type widens it.
pub fn spans(text: &str, tokens: &[TokenPred]) -> Vec<Entity> {
    let rules = rule_spans(text, tokens);
    let mut out: Vec<Entity> = raw_spans(text, tokens)
        .into_iter()
        .map(|raw| Entity {
            score: calibrated(&raw),
            ..raw.entity
        })
        // In a script the model never learned (a Cyrillic or Han name) the rule knows better than
        // the model, which reads such names as streets and cities.
        .filter(|e| {
            !rules.iter().any(|r| {
                r.kind == EntityType::PersonName
                    && r.start < e.end
                    && e.start < r.end
                    && e.kind != EntityType::PersonName
                    && !text[r.start..r.end].is_ascii()
            })
        })
        // In a field whose label says it holds no person or place (`Product:`, `Sprint:`), the model
        // must be very sure; a run right before a company or venue word (`Stark Supplies`,
        // `Everest Room`) is that company's or room's name.
        .filter(|e| {
            let unsure_field =
                fields::non_name_field(text, e.start) && e.score < fields::FIELD_SURE;
            let company = e.kind != EntityType::Address && fields::company_after(text, e.end);
            let unit = e.kind == EntityType::PersonName && fields::unit_word(text, e.start, e.end);
            !(unsure_field || company || unit)
        })
        .map(|mut e| {
            // One word after "flies to", "lives in" is a place, whatever the model read.
            if e.kind == EntityType::PersonName
                && !text[e.start..e.end].contains(char::is_whitespace)
                && rules::place_verb_before(&text[..e.start])
            {
                e.kind = EntityType::Location;
            }
            e
        })
        .collect();
    // A name a rule is sure of (a title's, a speaker's, a name field's) is no part of an address the
    // model ran into it (`Deliver to:` / `Ji-hoon Cho` / `Friedrichstraße 54`): the address starts
    // after it.
    for rule in rules
        .iter()
        .filter(|r| r.kind == EntityType::PersonName && text[r.start..r.end].is_ascii())
    {
        out.retain_mut(|e| {
            if e.kind != EntityType::Address || e.end <= rule.start || rule.end <= e.start {
                return true;
            }
            if e.start >= rule.start && e.end > rule.end {
                let rest = &text[rule.end..e.end];
                e.start = e.end
                    - rest
                        .trim_start_matches(|c: char| c.is_whitespace() || c == ',')
                        .len();
                return e.start < e.end;
            }
            // Inside the name, or the name inside the address: the address keeps what precedes it.
            if e.start < rule.start {
                e.end = rule.start - text[e.start..rule.start].len()
                    + text[e.start..rule.start]
                        .trim_end_matches(|c: char| c.is_whitespace() || c == ',')
                        .len();
                return e.start < e.end;
            }
            false
        });
    }
    for rule in rules {
        let mut merged = false;
        for e in out
            .iter_mut()
            .filter(|e| e.kind == rule.kind && e.start < rule.end && rule.start < e.end)
        {
            e.start = e.start.min(rule.start);
            e.end = e.end.max(rule.end);
            e.score = e.score.max(rule.score);
            merged = true;
        }
        if !merged {
            out.push(rule);
        }
    }
    drop_acronyms(text, &mut out);
    trim_lower_words(text, &mut out);
    name_parts_elsewhere(text, &mut out);
    // A name found once in a text is a name wherever else it occurs there ("ok reed will do" after
    // the speaker "reed:").
    let names: Vec<(String, f32)> = out
        .iter()
        .filter(|e| e.kind == EntityType::PersonName && e.score >= calibration::RULE_SCORE)
        .map(|e| (text[e.start..e.end].to_lowercase(), e.score))
        .filter(|(n, _)| n.chars().count() >= 2)
        .collect();
    // Lower-casing must keep byte offsets (it does unless a letter changes length, e.g. 'İ').
    let lower = text.to_lowercase();
    if !names.is_empty() && lower.len() == text.len() {
        for (name, score) in names {
            for (at, _) in lower.match_indices(name.as_str()) {
                let end = at + name.len();
                let bounded = lower[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric())
                    && lower[end..]
                        .chars()
                        .next()
                        .is_none_or(|c| !c.is_alphanumeric());
                if bounded
                    && !out.iter().any(|e| e.start < end && at < e.end)
                    && !fields::company_after(text, end)
                {
                    out.push(Entity {
                        kind: EntityType::PersonName,
                        start: at,
                        end,
                        score,
                    });
                }
            }
        }
    }
    out.sort_by_key(|e| (e.start, e.end));
    // Widening may make two spans of one type overlap: keep the first, widened over the second.
    let mut kept: Vec<Entity> = Vec::with_capacity(out.len());
    for e in out {
        match kept.last_mut() {
            Some(last) if last.kind == e.kind && e.start < last.end => {
                last.end = last.end.max(e.end);
                last.score = last.score.max(e.score);
            }
            _ => kept.push(e),
        }
    }
    kept
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
    fn business_acronyms_are_neither_people_nor_places() {
        let text = "EMEA grew and APAC fell; ask EMEA Maria Lopez";
        let mut out = vec![
            Entity {
                kind: EntityType::PersonName,
                start: 0,
                end: 4,
                score: 0.9,
            },
            Entity {
                kind: EntityType::Location,
                start: 14,
                end: 18,
                score: 0.9,
            },
            Entity {
                kind: EntityType::PersonName,
                start: 29,
                end: text.len(),
                score: 0.9,
            },
        ];
        drop_acronyms(text, &mut out);
        trim_lower_words(text, &mut out);
        name_parts_elsewhere(text, &mut out);
        assert_eq!(
            show(text, &out),
            vec![("PERSON_NAME".into(), "Maria Lopez".into())]
        );
    }

    #[test]
    fn a_sentence_subject_is_a_place_for_a_lone_name() {
        let text = "Olena said the badge. Sales Team met. Tomasz can bring it.\nOrder 12 left\n\
                    Rue de Rivoli 4. Lisbon is lovely";
        let at = |w: &str| text.find(w).unwrap_or(text.len());
        assert!(sentence_subject(text, at("Olena")));
        assert!(sentence_subject(text, at("Tomasz")));
        assert!(!sentence_subject(text, at("Sales")));
        assert!(!sentence_subject(text, at("Order")));
        assert!(!sentence_subject(text, at("badge")));
        assert!(!sentence_subject("olena said it", 0));
        assert!(!sentence_subject(text, at("Rue")));
        assert!(!sentence_subject(text, at("Lisbon")));
    }

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
    fn a_lone_city_is_a_location_not_an_address() {
        let text = "I moved to Berlin last year";
        let p = [Other, Other, Other, City, Other, Other];
        let e = spans(text, &tokens(text, &p));
        assert_eq!(show(text, &e), vec![("LOCATION".into(), "Berlin".into())]);
        assert!(e[0].score > 0.85, "{e:?}");
        let text = "she lives in Tromsø, Troms og Finnmark now";
        let p = [Other, Other, Other, City, Other, State, State, State, Other];
        let e = spans(text, &tokens(text, &p));
        assert_eq!(
            show(text, &e),
            vec![("LOCATION".into(), "Tromsø, Troms og Finnmark".into())]
        );
    }

    #[test]
    fn a_lone_number_stays_below_the_threshold() {
        let text = "see Request 17 today";
        let p = [Other, Other, Building, Other];
        let e = spans(text, &tokens(text, &p));
        assert_eq!(e.len(), 1);
        assert!(e[0].score <= NUMBER_SCORE, "{e:?}");
    }

    /// Tokens labelled by `pieces` with the given entity probabilities.
    fn scored(text: &str, pieces: &[(Piece, f32)]) -> Vec<TokenPred> {
        let p: Vec<Piece> = pieces.iter().map(|p| p.0).collect();
        tokens(text, &p)
            .into_iter()
            .zip(pieces)
            .map(|(t, &(_, score))| TokenPred { score, ..t })
            .collect()
    }

    #[test]
    fn a_name_is_a_name_everywhere_in_its_text() {
        let text = "reed: are you coming\ncamila: ok reed will do";
        let p = [Other; 9];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(
            got,
            vec![
                ("PERSON_NAME".into(), "reed".into()),
                ("PERSON_NAME".into(), "camila".into()),
                ("PERSON_NAME".into(), "reed".into())
            ]
        );
    }

    #[test]
    fn ids_digits_and_punctuation_are_not_names_or_places() {
        let text = "slack user U054KT67YX and ticket INC5266315 in 4471 , ok";
        let p = [
            Other, Other, Given, Other, Other, Street, Other, City, Surname, Other,
        ];
        assert!(spans(text, &tokens(text, &p)).is_empty());
        // A postcode is still an address part.
        let text = "at 5 Elm St 90635-1683";
        let p = [Other, Building, Street, Street, Zip];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(got, vec![("ADDRESS".into(), "5 Elm St 90635-1683".into())]);
    }

    #[test]
    fn a_faint_word_after_a_name_is_not_part_of_it() {
        let text = "Priya Ramanathan owns the release";
        let p = [
            (Given, 0.99),
            (Given, 0.99),
            (Surname, 0.25),
            (Surname, 0.0),
            (Surname, 0.0),
        ];
        let got = show(text, &spans(text, &scored(text, &p)));
        assert_eq!(got, vec![("PERSON_NAME".into(), "Priya Ramanathan".into())]);
        // In an all-lower-case chat line the shape says nothing: the cue decides.
        let text = "thanks, ravi";
        let p = [(Other, 0.0), (Other, 0.0), (Given, 0.3)];
        let got = show(text, &spans(text, &scored(text, &p)));
        assert_eq!(got, vec![("PERSON_NAME".into(), "ravi".into())]);
    }

    #[test]
    fn a_found_names_part_is_a_name_elsewhere() {
        let text = "Assignee: Ryo Yamamoto\nComment (Ryo): Can you check? Ryokan booked.";
        let mut out = vec![Entity {
            kind: EntityType::PersonName,
            start: 10,
            end: 22,
            score: calibration::RULE_SCORE,
        }];
        name_parts_elsewhere(text, &mut out);
        let got: Vec<&str> = out.iter().map(|e| &text[e.start..e.end]).collect();
        assert_eq!(got, vec!["Ryo Yamamoto", "Ryo"]);
    }

    #[test]
    fn a_lower_case_word_is_no_edge_of_a_name() {
        let text = "Next week Rhett flies to Salzburg";
        let mut out = vec![Entity {
            kind: EntityType::PersonName,
            start: 10,
            end: 21,
            score: 0.9,
        }];
        trim_lower_words(text, &mut out);
        assert_eq!(&text[out[0].start..out[0].end], "Rhett");
    }

    #[test]
    fn a_faint_name_counts_after_a_cue_only() {
        // "by Ravi": the model is unsure (0.3), the cue decides; "Mina" alone at 0.3 is not a name
        // (a part of the found name would be: see `a_found_names_part_is_a_name_elsewhere`).
        let text = "written by Ravi Shankar and Mina said";
        let p = [
            (Other, 0.01),
            (Other, 0.01),
            (Given, 0.3),
            (Surname, 0.2),
            (Other, 0.01),
            (Given, 0.3),
            (Other, 0.01),
        ];
        let e = spans(text, &scored(text, &p));
        assert_eq!(
            show(text, &e),
            vec![("PERSON_NAME".into(), "Ravi Shankar".into())]
        );
        assert!(e[0].score >= calibration::RULE_SCORE);
        // Below the cue's floor, nothing.
        let p = [
            (Other, 0.01),
            (Other, 0.01),
            (Given, 0.05),
            (Surname, 0.05),
            (Other, 0.01),
            (Given, 0.05),
            (Other, 0.01),
        ];
        assert!(spans(text, &scored(text, &p)).is_empty());
    }

    #[test]
    fn middle_initials_join_in_any_case() {
        for text in ["Marta K. Lindqvist", "marta k. lindqvist"] {
            let p = [Given, Other, Other, Surname];
            let got = show(text, &spans(text, &tokens(text, &p)));
            assert_eq!(got, vec![("PERSON_NAME".into(), text.into())]);
        }
    }

    #[test]
    fn rule_spans_widen_model_spans() {
        // The model found the surname; the title rule covers the whole name.
        let text = "Ask Dr. Amara Okafor today";
        let p = [Other, Other, Other, Other, Surname, Other];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert_eq!(got, vec![("PERSON_NAME".into(), "Amara Okafor".into())]);
        // A Han name the model never labels.
        let text = "Ping 王小明 now";
        let got = show(text, &spans(text, &tokens(text, &[Other, Other, Other])));
        assert_eq!(got, vec![("PERSON_NAME".into(), "王小明".into())]);
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
        // "Postcode" is a label between two pieces: the label in no span. (The NI number, an id, is
        // never an address piece.)
        let text = "NI QQ123456C\nPostcode SW1A 1AA";
        let p = [Other, Building, Other, Zip, Zip];
        let got = show(text, &spans(text, &tokens(text, &p)));
        assert!(
            got.contains(&("ADDRESS".into(), "SW1A 1AA".into())),
            "{got:?}"
        );
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
