//! `PHONE`: runs of digit groups shaped like a phone number, scored by their shape, by whether a
//! numbering plan accepts them (libphonenumber's metadata, the `phonenumber` crate) and by the words
//! around them. Validity raises the score; it does not gate it.
//!
//! Candidates. The anchors are runs of digits, `+`, parentheses and separators holding 7 or more
//! digits ([`super::digit_runs`]). A run is split into *segments*: digit groups (`(415)` counts as one)
//! joined by one separator each (a space, `-`, `.`, `/`, ` - `, or nothing next to a parenthesis),
//! with an optional leading `+`. A candidate is a stretch of a segment's groups that begins and ends at
//! the segment's edges or at a space (so `2024-03-15 415-555-0132` gives the phone, never a piece of
//! the date), holding 7 to 15 digits after an international prefix (`+`, `00`, `011`, as in `001-`),
//! plus an optional extension (`x123`, `ext. 45`, `ext 45`, `extension 45`, `#123`). In each segment
//! the best-scoring candidates that do not overlap are kept.
//!
//! Shapes ([`Shape`]):
//! - not a phone: dates (`2024-03-15`, `15.03.2024`, `20240315`), year and time ranges, IPv4
//!   addresses, versions and decimals (`1.2.3`, `3.14159`), the SSN's 3-2-4 grouping, ZIP+4, ISBNs, a
//!   last group of one digit, amounts (a currency sign or code next to the digits, `%` after),
//!   round numbers, and digits joined to letters or other tokens (`INV12345678`, `v1.2.1234567`);
//! - strong: `+country` or `00`/`011` with groups, the North American 3-3-4 with dashes, dots or an
//!   `(area)`, a leading `(area)`, a trunk `0` with an area group (`020 7946 0958`, `06 12 34 56 78`,
//!   `(0)30 1234 5678`, `030/1234567`), or an `ext` extension;
//! - medium: other groupings of 2 to 5 digits (`555-0132`, `1234 5678`, `12 34 56 78`, 3-3-4 with
//!   spaces);
//! - weak: one bare run of digits, thousands-style grouping (`612 345 678`), anything else.
//!
//! Scores (the default threshold is 0.85; see the module docs of `detect`):
//!
//! | shape | valid (`+`, US) | valid in a trunk region | no plan accepts it |
//! |---|---|---|---|
//! | strong | 0.95 | 0.9 | 0.85 |
//! | medium | 0.9 | 0.85 | 0.6 |
//! | weak | 0.6 | 0.6 | 0.5 |
//!
//! A cue ([`context::Cues`]: "call", "tel", "phone", "mobile", "cell", "fax", "office", "ph",
//! "whatsapp", "direct", `T:`/`M:`/`F:`/`P:` labels, …) adds 0.35, so any phone-shaped run next to one
//! is masked, valid or not. A nearer word against ("order", "invoice", "ticket", "ISBN", …) cancels
//! the cue, and right before the number (16 bytes) demotes it to 0.6 unless it is both valid and of a
//! strong shape (`Ticket 0369-3966` happens to be a valid local number somewhere).
//!
//! Regions: a number written with `+` (or `00`, `011`) is parsed as international. Otherwise it is tried
//! as a US number (the default region), then, when it starts with a national trunk `0`, in a few regions
//! whose local formats are common (GB, DE, FR, IL, JP, IN, IT, AU, NL, ES, BR), as a Chinese mobile
//! when it looks like one, and finally, with 11 or more digits, as an international number written
//! without its `+`.

use super::context::{self, Cues, Verdict};
use super::{Recognizer, Trigger};
use crate::{Entity, EntityType};
use phonenumber::country::Id;

/// Words that say a number nearby is a phone (whole words, any case; `tel` also covers `Tel.`, `tel:`).
const FOR: &[&str] = &[
    "phone",
    "phones",
    "phone#",
    "telephone",
    "tel",
    "tele",
    "telefon",
    "telefono",
    "teléfono",
    "telefone",
    "telefoon",
    "téléphone",
    "tél",
    "mobile",
    "mobil",
    "mobiel",
    "móvil",
    "movil",
    "mob",
    "cell",
    "cellphone",
    "cellular",
    "cellulare",
    "celular",
    "handy",
    "portable",
    "fax",
    "telefax",
    "office",
    "direct",
    "ph",
    "whatsapp",
    "signal",
    "call",
    "calls",
    "called",
    "calling",
    "callback",
    "dial",
    "reach me",
    "reach us",
    "text me",
    "ring me",
    "ring us",
    "sms",
    "hotline",
    "helpline",
    "landline",
    "switchboard",
    "voicemail",
    "電話",
    "携帯",
    "电话",
    "手机",
];

/// Words that say a number nearby is a phone unless a word against is near too ("order number").
const WEAK_FOR: &[&str] = &["contact", "number", "nummer", "numéro", "numero", "número"];

/// Words that say a nearby number is something else.
const AGAINST: &[&str] = &[
    "order",
    "orders",
    "invoice",
    "inv",
    "ticket",
    "tracking",
    "ref",
    "reference",
    "account",
    "acct",
    "iban",
    "case",
    "claim",
    "policy",
    "booking",
    "confirmation",
    "reservation",
    "serial",
    "part",
    "model",
    "sku",
    "isbn",
    "issn",
    "id",
    "po",
    "zip",
    "postcode",
    "postal",
    "amount",
    "total",
    "price",
    "balance",
    "usd",
    "eur",
    "gbp",
    "version",
    "build",
    "release",
    "patent",
    "vin",
    "imei",
    "passport",
    "license",
    "licence",
    "ssn",
    "tax",
    "tin",
    "ein",
    "nhs",
    "routing",
    "swift",
    "card",
    "transaction",
    "txn",
    "receipt",
    "shipment",
    "parcel",
    "employee",
    "member",
    "badge",
    "item",
    "product",
    "batch",
    "page",
    "pages",
    "vat",
    "pin",
    "otp",
    "population",
];

/// Labels of a signature block or a form, counted only right before the number (`T: …`, `Tel. …`).
const LABELS: &[&str] = &[
    "t", "m", "f", "p", "o", "c", "h", "w", "d", "tel", "mob", "ph", "home", "work", "main",
];

const TRUNK_REGIONS: &[Id] = &[
    Id::GB,
    Id::DE,
    Id::FR,
    Id::IL,
    Id::JP,
    Id::IN,
    Id::IT,
    Id::AU,
    Id::NL,
    Id::ES,
    Id::BR,
];

/// The bytes of a run: digits, `+`, parentheses, separators and whitespace.
const BYTES: [bool; 256] = super::digits_and(b"+()./ -\t\n\x0B\x0C\r");

/// Validations tried per segment at most (libphonenumber is the costly part of a candidate).
const VALIDATIONS: usize = 16;

/// Finds phone numbers.
pub struct PhoneRecognizer {
    cues: Cues,
}

impl PhoneRecognizer {
    /// Builds the cue automaton.
    pub fn new() -> Self {
        PhoneRecognizer {
            cues: Cues::new(FOR, WEAK_FOR, AGAINST, LABELS),
        }
    }
}

impl Default for PhoneRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// How many compiled metadata patterns libphonenumber's port keeps. Its default, 100, is fewer than
/// one validation across the regions tried here touches, so the cache thrashed and nearly every
/// candidate recompiled a dozen patterns (95% of the time on PII-dense text).
const REGEX_CACHE: usize = 2048;

/// Raise the `phonenumber` database's pattern cache to [`REGEX_CACHE`] (once per process, at the first
/// validation, which loads the database anyway: constructing a detector stays cheap).
fn enlarge_regex_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cache = phonenumber::metadata::DATABASE.cache();
        let mut cache = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *cache = regex_cache::RegexCache::new(REGEX_CACHE);
    });
}

fn valid_in(region: Option<Id>, s: &str) -> bool {
    enlarge_regex_cache();
    phonenumber::parse(region, s).is_ok_and(|n| phonenumber::is_valid(&n))
}

/// How a candidate validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// Written with `+country` (or `00`/`011`), or valid in the default region (US).
    Strong,
    /// Valid only in another region's local format, or as an international number missing its `+`.
    Local,
}

/// `s` after its first `n` digits, without the separators that follow them.
fn after_digits(s: &str, n: usize) -> &str {
    let mut seen = 0;
    for (i, b) in s.bytes().enumerate() {
        if seen == n {
            return s[i..].trim_start_matches([' ', '-', '.', '(', ')', '/']);
        }
        seen += usize::from(b.is_ascii_digit());
    }
    ""
}

/// Whether `s` is a valid phone number in one of the regions tried (see the module docs).
pub fn validate(s: &str) -> Option<Validity> {
    let s = s.trim();
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_digit).collect();
    if !(7..=18).contains(&digits.len()) {
        return None;
    }
    if s.starts_with('+') {
        return (digits.len() <= 15 && valid_in(None, s)).then_some(Validity::Strong);
    }
    // International prefixes: `00` (most of the world), `011` (North America).
    for exit in ["011", "00"] {
        let rest = digits.len() - exit.len().min(digits.len());
        if digits.starts_with(exit.as_bytes())
            && digits.get(exit.len()) != Some(&b'0')
            && (8..=15).contains(&rest)
            && valid_in(None, &format!("+{}", after_digits(s, exit.len())))
        {
            return Some(Validity::Strong);
        }
    }
    // `00` is only ever an international prefix; `011` is also Delhi's area code.
    if digits.len() > 15 || digits.starts_with(b"00") {
        return None;
    }
    // NANP numbers have 10 digits (11 with the leading 1), the area code and exchange start with 2-9.
    let nanp = match digits.len() {
        10 => Some(&digits[..]),
        11 if digits[0] == b'1' => Some(&digits[1..]),
        _ => None,
    };
    if nanp.is_some_and(|d| d[0] >= b'2' && d[3] >= b'2') && valid_in(Some(Id::US), s) {
        return Some(Validity::Strong);
    }
    if digits[0] == b'0'
        && (8..=12).contains(&digits.len())
        && TRUNK_REGIONS.iter().any(|r| valid_in(Some(*r), s))
    {
        return Some(Validity::Local);
    }
    if digits.len() == 11 && digits[0] == b'1' && valid_in(Some(Id::CN), s) {
        return Some(Validity::Local);
    }
    (digits.len() >= 11 && digits[0] != b'0' && valid_in(None, &format!("+{s}")))
        .then_some(Validity::Local)
}

/// Whether `s` is a valid phone number (see [`validate`]).
pub fn is_phone(s: &str) -> bool {
    validate(s).is_some()
}

/// How much a candidate looks like a phone number by its digits and separators alone (see the module
/// docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// Some other kind of number: never reported.
    NotPhone,
    /// A run of digits that could be anything.
    Weak,
    /// A grouping phones share with other numbers.
    Medium,
    /// A grouping few other numbers have.
    Strong,
}

/// What joins two digit groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sep {
    /// Nothing: a parenthesis on one side (`(415)555`, `(0)30`).
    Joined,
    Space,
    Dash,
    Dot,
    Slash,
}

/// A group of digits, `(415)` or `415`.
#[derive(Clone, Copy, Debug)]
struct Group {
    /// Bytes of the group, parentheses included.
    start: usize,
    end: usize,
    /// Bytes of its digits.
    digits: (usize, usize),
    paren: bool,
}

impl Group {
    fn len(&self) -> usize {
        self.digits.1 - self.digits.0
    }
}

/// Digit groups joined by one separator each, with an optional leading `+`.
#[derive(Debug, Default)]
struct Segment {
    plus: Option<usize>,
    groups: Vec<Group>,
    /// `seps[i]` joins `groups[i]` and `groups[i + 1]`.
    seps: Vec<Sep>,
}

/// The group starting at `i`, if one does (`(` 1 to 5 digits `)`, or digits).
fn group_at(b: &[u8], i: usize, end: usize) -> Option<Group> {
    if i >= end {
        return None;
    }
    if b[i] == b'(' {
        let mut k = i + 1;
        while k < end && b[k].is_ascii_digit() {
            k += 1;
        }
        return ((1..=5).contains(&(k - i - 1)) && k < end && b[k] == b')').then_some(Group {
            start: i,
            end: k + 1,
            digits: (i + 1, k),
            paren: true,
        });
    }
    if !b[i].is_ascii_digit() {
        return None;
    }
    let mut k = i;
    while k < end && b[k].is_ascii_digit() {
        k += 1;
    }
    Some(Group {
        start: i,
        end: k,
        digits: (i, k),
        paren: false,
    })
}

/// The separator at `i` after `prev` and where the next group starts, if one follows.
fn sep_at(b: &[u8], i: usize, end: usize, prev: &Group) -> Option<(Sep, usize)> {
    let next = |j: usize| group_at(b, j, end).map(|_| j);
    if i >= end {
        return None;
    }
    match b[i] {
        b'(' => next(i).map(|j| (Sep::Joined, j)),
        d if d.is_ascii_digit() && prev.paren => Some((Sep::Joined, i)),
        b' ' => match b.get(i + 1..i + 3) {
            // ` - ` joins groups; ` / ` separates two numbers (`Phone/Fax: 415-555-0100 / 415-555-0101`).
            Some(b"- ") => next(i + 3).map(|j| (Sep::Dash, j)),
            Some(b"/ ") => None,
            _ => next(i + 1).map(|j| (Sep::Space, j)),
        },
        b'-' => next(i + 1).map(|j| (Sep::Dash, j)),
        b'.' => next(i + 1).map(|j| (Sep::Dot, j)),
        b'/' => next(i + 1).map(|j| (Sep::Slash, j)),
        _ => None,
    }
}

/// The segments of the run `b[start..end]`.
fn segments(b: &[u8], start: usize, end: usize) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut i = start;
    while i < end {
        let mut seg = Segment::default();
        let mut j = i;
        if b[j] == b'+' {
            seg.plus = Some(j);
            j += 1;
        }
        let Some(first) = group_at(b, j, end).filter(|g| !(seg.plus.is_some() && g.paren)) else {
            i += 1;
            continue;
        };
        seg.groups.push(first);
        let mut last = first;
        while let Some((sep, at)) = sep_at(b, last.end, end, &last) {
            let Some(g) = group_at(b, at, end) else {
                break;
            };
            seg.seps.push(sep);
            seg.groups.push(g);
            last = g;
        }
        i = last.end;
        out.push(seg);
    }
    out
}

/// `digits` as a number (at most 4 digits used by callers).
fn value(digits: &[u8]) -> u32 {
    digits
        .iter()
        .fold(0, |v, d| v * 10 + u32::from(d.wrapping_sub(b'0')))
}

fn is_year(d: &[u8]) -> bool {
    d.len() == 4 && (1900..=2099).contains(&value(d))
}

/// Day and month in either order.
fn day_month(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (value(a), value(b));
    (1..=31).contains(&a) && (1..=31).contains(&b) && (a <= 12 || b <= 12)
}

/// The shape of the groups `gs` (joined by `seps`; `digits` all their digits), written after a `+`
/// when `plus` (see the module docs).
fn shape(gs: &[(usize, bool)], seps: &[Sep], digits: &[u8], plus: bool) -> Shape {
    use Shape::*;
    let k = gs.len();
    let n = digits.len();
    let lens: Vec<usize> = gs.iter().map(|g| g.0).collect();
    let paren = |i: usize| gs[i].1;
    if plus {
        return match (n, k) {
            (8..=15, 1) => Medium,
            (8..=15, _) => Strong,
            _ => NotPhone,
        };
    }
    // An international prefix: `00` then a country code (`0044 …`, `00 44 …`, `001-…`), or `011 …`.
    let exit = if digits.starts_with(b"011") && lens[0] == 3 && k >= 2 {
        3
    } else if digits.starts_with(b"00") && digits.get(2) != Some(&b'0') && (lens[0] >= 2) {
        2
    } else {
        0
    };
    if exit > 0 && (8..=15).contains(&(n - exit)) {
        return if k >= 2 { Strong } else { Weak };
    }
    if !(7..=15).contains(&n) {
        return NotPhone;
    }
    let all = |s: Sep| seps.iter().all(|x| *x == s);
    let same = seps.windows(2).all(|w| w[0] == w[1]);
    let group = |i: usize| {
        let at: usize = lens[..i].iter().sum();
        &digits[at..at + lens[i]]
    };
    // Dates, year and time ranges.
    match lens[..] {
        [8] => {
            let ymd = is_year(&digits[..4])
                && (1..=12).contains(&value(&digits[4..6]))
                && (1..=31).contains(&value(&digits[6..]));
            if ymd || (is_year(&digits[4..]) && day_month(&digits[..2], &digits[2..4])) {
                return NotPhone;
            }
        }
        [4, 2, 2]
            if same
                && is_year(group(0))
                && value(group(1)) <= 12
                && day_month(group(2), group(1)) =>
        {
            return NotPhone;
        }
        [1 | 2, 1 | 2, 4] if same && is_year(group(2)) && day_month(group(0), group(1)) => {
            return NotPhone;
        }
        [4, 4] if is_year(group(0)) && is_year(group(1)) => return NotPhone,
        [4, 4]
            if value(&group(0)[..2]) < 24
                && value(&group(0)[2..]) < 60
                && value(&group(1)[..2]) < 24
                && value(&group(1)[2..]) < 60 =>
        {
            return NotPhone;
        }
        // The SSN's grouping, ZIP+4.
        [3, 2, 4] if same && !paren(0) => return NotPhone,
        [5, 4] if all(Sep::Dash) && digits[0] != b'0' => return NotPhone,
        _ => {}
    }
    // ISBNs, IPv4 addresses.
    if n == 13 && k >= 3 && (digits.starts_with(b"978") || digits.starts_with(b"979")) {
        return NotPhone;
    }
    if k == 4
        && all(Sep::Dot)
        && lens.iter().all(|&l| l <= 3)
        && (0..4).all(|i| value(group(i)) <= 255)
    {
        return NotPhone;
    }
    // North American 3-3-4, optionally after a 1.
    // (An area starting with 0 is a trunk prefix: `020 123 4567` is Dutch.)
    let nanp = match lens[..] {
        [3, 3, 4] if digits[0] != b'0' => Some(0),
        [1, 3, 3, 4] if digits[0] == b'1' && digits[1] != b'0' => Some(1),
        _ => None,
    };
    if let Some(area) = nanp {
        let spaces_only = seps[area..].iter().all(|s| *s == Sep::Space);
        return if paren(area) || !spaces_only {
            Strong
        } else {
            Medium
        };
    }
    // Versions and decimals; a trailing single digit (an ISBN's check digit, a list).
    if k >= 2 && all(Sep::Dot) && (k == 2 || lens.contains(&1)) {
        return NotPhone;
    }
    if k >= 2 && lens[k - 1] == 1 {
        return NotPhone;
    }
    let trunk = digits[0] == b'0';
    if seps.contains(&Sep::Slash) {
        // `030/1234567`, as German numbers are often written.
        return if k == 2 && trunk && (3..=5).contains(&lens[0]) && lens[1] >= 4 {
            Strong
        } else {
            NotPhone
        };
    }
    let round = digits.ends_with(b"000");
    if k == 1 {
        return if round { NotPhone } else { Weak };
    }
    if paren(0) && lens[0] >= 2 {
        return Strong;
    }
    let rest_ok = lens[1..].iter().all(|&l| l >= 2);
    if trunk && rest_ok {
        let area = (2..=5).contains(&lens[0]) || (paren(0) && lens[0] == 1);
        return if area && (9..=12).contains(&n) {
            Strong
        } else {
            Medium
        };
    }
    // Thousands: 1 to 3 digits, then groups of 3 (an amount, or a Spanish `612 345 678`).
    if same && lens[0] <= 3 && lens[1..].iter().all(|&l| l == 3) {
        return if round { NotPhone } else { Weak };
    }
    if lens.iter().all(|&l| (2..=5).contains(&l)) {
        return Medium;
    }
    Weak
}

/// The end of an extension (`x204`, ` ext. 45`, `, ext 45`, ` #123`) starting at `i`, if one does.
fn extension(b: &[u8], i: usize) -> Option<(usize, bool)> {
    let mut k = i;
    while k < b.len() && k < i + 2 && matches!(b[k], b' ' | b',') {
        k += 1;
    }
    let rest = &b[k..];
    let starts = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    let (len, named) = if starts(b"extension") {
        (9, true)
    } else if starts(b"ext") {
        (3, true)
    } else if starts(b"x") || starts(b"#") {
        (1, false)
    } else {
        return None;
    };
    k += len;
    let mut skipped = 0;
    while k < b.len() && skipped < 2 && matches!(b[k], b'.' | b':' | b' ') {
        k += 1;
        skipped += 1;
    }
    let d = k;
    while k < b.len() && k < d + 6 && b[k].is_ascii_digit() {
        k += 1;
    }
    (k > d && !(k < b.len() && b[k].is_ascii_alphanumeric())).then_some((k, named))
}

/// A currency sign or code right before `start` or after `end` (one space allowed).
fn money_near(b: &[u8], start: usize, end: usize) -> bool {
    const SIGNS: &[&[u8]] = &[
        b"$",
        "€".as_bytes(),
        "£".as_bytes(),
        "¥".as_bytes(),
        "₹".as_bytes(),
        b"USD",
        b"EUR",
        b"GBP",
        b"CHF",
        b"JPY",
        b"INR",
        b"AUD",
        b"CAD",
        b"euros",
        b"dollars",
    ];
    let before = &b[..start];
    let before = before.strip_suffix(b" ").unwrap_or(before);
    let after = &b[end..];
    let after = after.strip_prefix(b" ").unwrap_or(after);
    SIGNS.iter().any(|s| {
        let word = s[0].is_ascii_alphabetic();
        (before.len() >= s.len()
            && before[before.len() - s.len()..].eq_ignore_ascii_case(s)
            && !(word
                && before.len() > s.len()
                && before[before.len() - s.len() - 1].is_ascii_alphabetic()))
            || (after.len() >= s.len()
                && after[..s.len()].eq_ignore_ascii_case(s)
                && !(word && after.get(s.len()).is_some_and(u8::is_ascii_alphabetic)))
    })
}

/// Whether the byte before a candidate joins it to another token (`INV12345678`, `v1.2.3456789`,
/// `#12345678`). A label's `.` or `:` right after a letter (`Tel.0301234567`) does not.
fn joined_before(b: &[u8], start: usize) -> bool {
    if start == 0 {
        return false;
    }
    match b[start - 1] {
        b':' | b'.' => start >= 2 && !b[start - 2].is_ascii_alphabetic(),
        x => {
            x.is_ascii_alphanumeric()
                || matches!(
                    x,
                    b'_' | b'+' | b'-' | b'/' | b'$' | b'#' | b'@' | b'&' | b'=' | b'\\'
                )
        }
    }
}

/// Whether the byte after a candidate joins it to another token (`12345678abc`, `1234567/8`,
/// `1234567.89`, `1234567%`, `0-306-40615-X`).
fn joined_after(b: &[u8], end: usize) -> bool {
    let Some(&x) = b.get(end) else {
        return false;
    };
    let next = b.get(end + 1).copied().unwrap_or(b' ');
    x.is_ascii_alphanumeric()
        || matches!(x, b'_' | b'%' | b'/' | b'@' | b'+')
        || (matches!(x, b'.' | b'-' | b',' | b':') && next.is_ascii_digit())
        || (x == b'-' && next.is_ascii_alphanumeric())
}

/// A scored candidate.
struct Candidate {
    start: usize,
    end: usize,
    score: f32,
}

impl PhoneRecognizer {
    /// The candidates of one segment, best first (see the module docs).
    fn segment(&self, text: &str, seg: &Segment, out: &mut Vec<Candidate>) {
        let b = text.as_bytes();
        let n = seg.groups.len();
        let total: usize = seg.groups.iter().map(Group::len).sum();
        // One long number in equal groups or spaced groups (a card, an account, a parcel): no phone
        // inside it.
        let first = seg.seps.first().copied().unwrap_or(Sep::Space);
        if total > 15
            && seg.seps.iter().all(|s| *s == first)
            && (first == Sep::Space || seg.groups.iter().all(|g| g.len() == seg.groups[0].len()))
        {
            return;
        }
        // A segment joined to a token (`DE89 3704 0044 …`, `INV-2024-001234`) is part of that token.
        // Only a valid number of a strong shape may follow a letter directly (`is415-555-0132`, a
        // typo Presidio's cases keep).
        let seg_start = seg.plus.unwrap_or(seg.groups[0].start);
        let glued = seg_start > 0 && b[seg_start - 1].is_ascii_alphabetic();
        if joined_before(b, seg_start) && !glued {
            return;
        }
        let mut validations = 0;
        let mut found = Vec::new();
        for s in (0..n).filter(|&s| s == 0 || seg.seps[s - 1] == Sep::Space) {
            let plus = s == 0 && seg.plus.is_some();
            let start = if plus {
                seg.plus.unwrap_or_default()
            } else {
                seg.groups[s].start
            };
            let mut digits: Vec<u8> = Vec::new();
            for e in s..n.min(s + 8) {
                let g = seg.groups[e];
                digits.extend_from_slice(&b[g.digits.0..g.digits.1]);
                if digits.len() > 18 {
                    break;
                }
                if digits.len() < 7 || !(e == n - 1 || seg.seps[e] == Sep::Space) {
                    continue;
                }
                let number_end = g.end;
                let ext = if e == n - 1 {
                    extension(b, number_end)
                } else {
                    None
                };
                let end = ext.map_or(number_end, |(end, _)| end);
                if e == n - 1 && joined_after(b, end) {
                    // The segment runs into a token (`1234 5678 9012abc`): no part of it is a phone.
                    return;
                }
                let gs: Vec<(usize, bool)> = seg.groups[s..=e]
                    .iter()
                    .map(|g| (g.len(), g.paren))
                    .collect();
                let mut shape = shape(&gs, &seg.seps[s..e], &digits, plus);
                if shape == Shape::NotPhone || (!plus && money_near(b, start, end)) {
                    continue;
                }
                shape = match (ext, shape) {
                    (Some((_, true)), _) => Shape::Strong,
                    (Some(_), Shape::Medium) => Shape::Strong,
                    (Some(_), Shape::Weak) => Shape::Medium,
                    _ => shape,
                };
                let validity = if validations < VALIDATIONS {
                    validations += 1;
                    validate(&text[start..number_end])
                } else {
                    None
                };
                if glued && !(shape == Shape::Strong && validity.is_some()) {
                    continue;
                }
                let base = match (shape, validity) {
                    (Shape::Strong, Some(Validity::Strong)) => 0.95,
                    (Shape::Strong, Some(Validity::Local)) => 0.9,
                    (Shape::Strong, None) => 0.85,
                    (Shape::Medium, Some(Validity::Strong)) => 0.9,
                    (Shape::Medium, Some(Validity::Local)) => 0.85,
                    (Shape::Medium, None) => 0.6,
                    (_, Some(_)) => 0.6,
                    (_, None) => 0.5,
                };
                let score = match self.cues.verdict(text, start, end) {
                    Verdict::For => base + context::BOOST,
                    Verdict::Against { gap }
                        if gap <= context::AFTER
                            && (validity.is_none() || shape != Shape::Strong) =>
                    {
                        base.min(0.6)
                    }
                    _ => base,
                };
                found.push(Candidate { start, end, score });
            }
        }
        // Best first: score, then the longer span, then the earlier one.
        found.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then((b.end - b.start).cmp(&(a.end - a.start)))
                .then(a.start.cmp(&b.start))
        });
        let first = out.len();
        for c in found {
            if out[first..]
                .iter()
                .all(|k| c.end <= k.start || k.end <= c.start)
            {
                out.push(c);
            }
        }
    }
}

impl Recognizer for PhoneRecognizer {
    fn name(&self) -> &'static str {
        "phone"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::Phone]
    }

    fn trigger(&self) -> Trigger {
        Trigger::LONG_DIGITS
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        let b = text.as_bytes();
        let mut found = Vec::new();
        // Past the end of the last candidate (an extension reaches beyond its run).
        let mut pos = 0;
        for (start, end) in super::digit_runs(text, &BYTES, 7) {
            if end <= pos {
                continue;
            }
            for seg in segments(b, start.max(pos), end) {
                let before = found.len();
                self.segment(text, &seg, &mut found);
                if let Some(last) = found[before..].iter().map(|c| c.end).max() {
                    pos = pos.max(last);
                }
            }
        }
        out.extend(found.into_iter().map(|c| Entity {
            kind: EntityType::Phone,
            start: c.start,
            end: c.end,
            score: c.score.min(1.0),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        PhoneRecognizer::new().find(text, &mut out);
        out.iter().map(|e| e.text(text)).collect()
    }

    /// Spans at or above the default threshold.
    fn masked(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        PhoneRecognizer::new().find(text, &mut out);
        out.iter()
            .filter(|e| e.score >= 0.85)
            .map(|e| e.text(text))
            .collect()
    }

    fn score(text: &str, number: &str) -> f32 {
        let mut out = Vec::new();
        PhoneRecognizer::new().find(text, &mut out);
        out.iter()
            .find(|e| e.text(text) == number)
            .unwrap_or_else(|| panic!("{number} not found in {text:?}: {out:?}"))
            .score
    }

    #[test]
    fn finds_us_and_international_formats() {
        assert_eq!(
            spans("My US number is (415) 555-0132, and my international one is +1 415 555 0132"),
            vec!["(415) 555-0132", "+1 415 555 0132"]
        );
        assert_eq!(
            spans("call +44 20 7946 0958 today"),
            vec!["+44 20 7946 0958"]
        );
        assert_eq!(spans("(212) 555-0199"), vec!["(212) 555-0199"]);
        assert_eq!(spans("+44 (20) 7123 4567"), vec!["+44 (20) 7123 4567"]);
        assert_eq!(spans("My Israeli number is 09-7625400"), vec!["09-7625400"]);
        assert_eq!(
            spans("My Japanese number is 090-1234-5678"),
            vec!["090-1234-5678"]
        );
        assert_eq!(spans("My CN number is 13812345678"), vec!["13812345678"]);
        assert_eq!(spans("+33 1 42 68 53 00"), vec!["+33 1 42 68 53 00"]);
    }

    #[test]
    fn bare_runs_are_weak_and_dates_are_not_phones() {
        let mut out = Vec::new();
        PhoneRecognizer::new().find("id 4155550132", &mut out);
        assert_eq!(out[0].score, 0.6);
        for t in [
            "on 2024-01-15",
            "version 1.2.3",
            "total 12345",
            "4012-8888-8888-1882",
            "3.14159265",
        ] {
            assert!(spans(t).is_empty(), "{t}: {:?}", spans(t));
        }
    }

    /// Each text holds one phone, written between `[` and `]`; it must be masked at the default
    /// threshold, exactly that span.
    fn assert_masked(cases: &[&str]) {
        for case in cases {
            let (before, rest) = case.split_once('[').expect("a [phone]");
            let (phone, after) = rest.split_once(']').expect("a [phone]");
            let text = format!("{before}{phone}{after}");
            assert_eq!(masked(&text), vec![phone], "{text:?}");
        }
    }

    #[test]
    fn numbers_no_plan_accepts_are_masked_by_shape_or_cue() {
        assert_masked(&[
            // A US exchange starting with 1: phone-shaped, never valid.
            "Call me at [(415) 155-0132] after lunch",
            "my cell is [415-155-0132]",
            "[415.155.0132] is the front desk",
            "[555.123.4567]",
            "[1-415-155-0132]",
            "[+1 415 155 0132]",
            // Old London codes, retired but still written.
            "[0171 234 5678]",
            // A cue lifts even a bare run.
            "Tel: [1234567]",
            "ph. [98765432]",
            "WhatsApp [0044 7700 900 123]",
        ]);
        // Without a cue, a bare run or a loose grouping is only a candidate.
        for t in ["1234567", "see 98765432", "12 34 56 78", "612 345 678"] {
            assert!(masked(t).is_empty(), "{t}: {:?}", masked(t));
            assert!(!spans(t).is_empty(), "{t}: still a weak candidate");
        }
        assert!(
            score("my 415-155-0132", "415-155-0132") < score("my 415-555-0132", "415-555-0132")
        );
    }

    #[test]
    fn international_prefixes_and_extensions() {
        assert_masked(&[
            "[001-415-155-0132x123]",
            "dial [00 44 20 7946 0958] from abroad",
            "dial [0044 20 7946 0958]",
            "from the US: [011 44 20 7946 0958]",
            "[011-52-55-1234-5678]",
            "[+1-415-555-0132 x123]",
            "[(415) 555-0100 ext. 45] for billing",
            "[415-555-0100 ext 45]",
            "[415-555-0100 extension 45]",
            "[415-555-0100 #123]",
            "[(415)555-0100x204].",
            "[415.555.0100 X 12]",
            "[+44 20 7946 0958, ext. 204]",
        ]);
    }

    #[test]
    fn local_numbers_of_many_countries() {
        assert_masked(&[
            // US / CA
            "[(212) 555-0199]",
            "[212 555 0199]",
            "call [555-0132]",
            "phone [555 0132]",
            // UK
            "[+44 20 7946 0958]",
            "[020 7946 0958]",
            "[07700 900123]",
            "[+44 (0)20 7946 0958]",
            // DE
            "[030 1234 5678]",
            "[(0)30 1234 5678]",
            "[+49 (0)30 1234 5678]",
            "[030/1234567]",
            "Tel. [089 12345678]",
            "[0151 23456789]",
            "Handy: [0171 2345678]",
            // FR
            "[06 12 34 56 78]",
            "[01.42.68.53.00]",
            "[+33 6 12 34 56 78]",
            "Tél : [01 42 68 53 00]",
            // NL
            "[06-12345678]",
            "[020 123 4567]",
            "[+31 20 123 4567]",
            // ES
            "Móvil: [612 345 678]",
            "[+34 912 345 678]",
            "Tel [91 123 45 67]",
            // IT
            "[+39 06 6982 1234]",
            "cell [347 123 4567]",
            "[06 6982 1234]",
            // IN
            "[+91 98765 43210]",
            "Office: [011 2345 6789]",
            "mobile [98765 43210]",
            // JP
            "[03-1234-5678]",
            "[090-1234-5678]",
            "[+81 3-1234-5678]",
            "電話：[03-1234-5678]",
            // AU
            "[(02) 9876 5432]",
            "[0412 345 678]",
            "[+61 412 345 678]",
            // BR
            "[(11) 98456-5666]",
            "[+55 11 98456 5666]",
            "celular [11 98456-5666]",
            // 8-digit local numbers (DK, NO, SG, HK)
            "Telefon [12 34 56 78]",
            "call [9123 4567]",
            "[+45 12 34 56 78]",
        ]);
    }

    #[test]
    fn signature_blocks() {
        let line = "T: +1 415 555 0132 | M: 415.555.0199 | F: (415) 555-0100 x204";
        assert_eq!(
            masked(line),
            vec!["+1 415 555 0132", "415.555.0199", "(415) 555-0100 x204"]
        );
        let block = "Marta K. Lindqvist\nHead of Operations, Nordlys AB\np. 212.555.0147\n\
                     m. 917 155 0123\nf: 212-555-0148\no: 08 123 456 78\nWhatsApp +46 70 123 45 67";
        assert_eq!(
            masked(block),
            vec![
                "212.555.0147",
                "917 155 0123",
                "212-555-0148",
                "08 123 456 78",
                "+46 70 123 45 67"
            ]
        );
        let form =
            "Name: Ravi Iyer\nPhone: 98450 12345\nAlt. phone: 080-2345 6789\nFax: 080 2345 6790";
        assert_eq!(
            masked(form),
            vec!["98450 12345", "080-2345 6789", "080 2345 6790"]
        );
    }

    #[test]
    fn numbers_of_other_kinds_stay_unmasked() {
        for t in [
            // orders, invoices, tickets, references
            "Order #12345678 shipped",
            "order 12345678 shipped today",
            "invoice INV-2024-001234 is due",
            "Ticket 4521-8890 was closed",
            "Ticket 0369-3966 was closed",
            "ref 2175-4896-78",
            "ref 1234-5678-90",
            "call about order 12345678",
            "Your order number is 12345678",
            "the booking number: 4521 8890",
            "Phone support? See order 123-4567.",
            // dates and times
            "on 2024-03-15 at 10:30",
            "on 15.03.2024",
            "due 03/15/2024",
            "2024/03/15",
            "20240315",
            "15 03 2024",
            "open 0900-1700",
            "from 2019-2024",
            "from 1999 - 2024",
            // versions, IPs, decimals
            "v10.4.1",
            "version 2.14.1234567",
            "release 10.4.12.3",
            "192.168.100.200",
            "pi is 3.14159265",
            // amounts and counts
            "$1,234.56",
            "1 234,56 €",
            "€ 1 234 567",
            "USD 1234567",
            "1 234 567 EUR",
            "price: 1.234.567,00",
            "a city of 1 500 000 people",
            "2500000 users",
            "up 1234567%",
            // ZIP codes, years, ISBNs, tracking and card numbers
            "San Francisco, CA 94107-1234",
            "in 1999 and 2024",
            "ISBN 978-3-16-148410-0",
            "ISBN 0-306-40615-2",
            "0-306-40615-X",
            "1Z999AA10123456784",
            "9400 1000 0000 0000 0000 00",
            "tracking 940011189922385412",
            "4111 1111 1111 1111",
            "DE89 3704 0044 0532 0130 00",
            // the SSN's grouping
            "078-05-1120",
            "536 90 4399",
            // ids joined to letters or signs
            "INV12345678",
            "INV415-155-0132",
            "build#12345678",
            "user_12345678",
            "sha 1234567abcdef",
        ] {
            assert!(masked(t).is_empty(), "{t}: {:?}", masked(t));
        }
    }

    #[test]
    fn a_word_against_beats_a_farther_cue() {
        // Phone-shaped but invalid, right after "order": demoted.
        assert!(masked("Call us about order 415-155-0132").is_empty());
        // A valid number keeps its score whatever the words.
        assert_eq!(
            masked("account manager: (415) 555-0132"),
            vec!["(415) 555-0132"]
        );
        assert_eq!(masked("Order questions? Call 555-0132"), vec!["555-0132"]);
    }

    #[test]
    fn a_valid_number_may_follow_a_word_directly() {
        assert_eq!(masked("my other one is415-555-0132"), vec!["415-555-0132"]);
    }

    #[test]
    fn runs_holding_several_numbers_are_split_at_spaces() {
        assert_eq!(
            masked("on 2024-03-15 415-555-0132 called"),
            vec!["415-555-0132"]
        );
        assert_eq!(masked("call 415 555 0132 24/7"), vec!["415 555 0132"]);
        assert_eq!(
            masked("Phone/Fax: 415-555-0100 / 415-555-0101"),
            vec!["415-555-0100", "415-555-0101"]
        );
        assert_eq!(masked("NY 10001 (212) 555-0199"), vec!["(212) 555-0199"]);
    }

    proptest::proptest! {
        #[test]
        fn any_input_is_safe(text in "[0-9 ()+.x#/:a-z-]{0,60}") {
            let mut out = Vec::new();
            PhoneRecognizer::new().find(&text, &mut out);
            for e in out {
                proptest::prop_assert!(e.start < e.end && e.end <= text.len());
                proptest::prop_assert!(text[e.start..e.end].bytes().filter(u8::is_ascii_digit).count() >= 7);
            }
        }
    }

    #[test]
    fn an_ssn_is_typed_ssn_never_phone() {
        use crate::detect::{DetectOptions, Detector, NerSlot};
        let detector = Detector::new(DetectOptions::default(), NerSlot::new());
        for text in [
            "SSN 078-05-1120",
            "078-05-1120",
            "my social is 536-90-4399, call (415) 555-0132",
        ] {
            let found = detector.detect(text);
            let ssn = found
                .iter()
                .find(|e| e.text(text).starts_with("078") || e.text(text).starts_with("536"))
                .unwrap_or_else(|| panic!("{text}: {found:?}"));
            assert_eq!(ssn.kind, EntityType::Ssn, "{text}");
        }
    }
}
