//! Typed fake values: a real value's stand-in that keeps its type and shape, so the model reads the
//! masked text as it would read the real one.
//!
//! Invariants:
//! - every generator is a pure function of the real value, the vault's seeded RNG and the attempt number
//!   (a vault seeded the same way makes the same fakes in the same order);
//! - the shape survives: word count of names, separators and length of numbers, the country code of a
//!   phone, the country and length of an IBAN, the prefix of an API key;
//! - checksums hold: cards pass Luhn, IBANs pass mod-97; IPs come from the documentation ranges, emails
//!   and URLs use the reserved `example.*` domains, US phones use the fictional 555-01xx lines;
//! - nothing here checks uniqueness: the vault rejects a candidate that equals a real value or another
//!   fake and asks again with a higher `attempt`, which widens the space where it is small (IPv4, names
//!   of one word).
//!
//! Decision on API keys: the fake keeps the vendor prefix (`sk-ant-api03-`, `ghp_`, `AKIA`, `xoxb-`) so the
//! model still knows what kind of secret it is, and the body is random with the same length and character
//! classes. It is shaped like a vendor key but was never issued, and vendor checksums (GitHub's CRC32
//! suffix) do not hold, so secret scanners that verify keys do not take it for a live one.

use std::net::{Ipv4Addr, Ipv6Addr};

use fake::Fake;
use fake::faker::address::raw::{CityPrefix, CitySuffix, StateAbbr};
use fake::faker::lorem::raw::Word;
use fake::faker::name::raw::{FirstName, LastName};
use fake::locales::EN;
use rand::RngExt;
use rand::rngs::ChaCha12Rng;

use crate::detect::secrets;
use crate::entity::EntityType;

mod script;

use script::{PlaceKind, Script, invented_town, place, place_kind, script_of, unspaced};

/// The vault's random source: ChaCha12, a fixed algorithm, so a seed gives the same fakes everywhere.
pub(crate) type FakeRng = ChaCha12Rng;

/// A fake for `real` of type `kind`. `attempt` counts the vault's earlier rejected candidates for this
/// value; from 8 on, generators with a small space widen it.
pub(crate) fn fake_value(kind: EntityType, real: &str, rng: &mut FakeRng, attempt: u32) -> String {
    match kind {
        EntityType::PersonName => person_name(real, rng, attempt),
        EntityType::Email => email(real, rng, attempt),
        EntityType::Phone => phone(real, rng),
        EntityType::CreditCard => credit_card(real, rng),
        EntityType::ApiKey => api_key(real, rng),
        EntityType::Address => address(real, rng),
        EntityType::Location => location(real, rng, attempt),
        EntityType::Ssn => ssn(real, rng),
        EntityType::IpAddress => ip_address(real, rng, attempt),
        EntityType::Iban => iban(real, rng),
        EntityType::Url => url(real, rng),
    }
}

/// The placeholder of mode `redact`: `[PERSON_NAME_1]`.
pub(crate) fn placeholder(kind: EntityType, n: u32) -> String {
    format!("[{}_{n}]", kind.as_str())
}

// ---------------------------------------------------------------------------------------------------
// Small helpers

/// First names in the `fake` crate's list that read as ordinary words ("Will", "May", "General"): a
/// fake should read as a name, so these are drawn again.
const WORDLIKE_FIRST_NAMES: &[&str] = &[
    "General", "Baby", "Christ", "Brain", "America", "Florida", "Easter", "Golden", "Green",
    "Brown", "Delta", "Will", "May", "June", "April", "Hope", "Grant", "Bill", "Mark", "Art",
    "Guy", "Chase", "Major", "Summer", "Autumn", "Dawn", "Dock", "Bud", "Buck", "Coy", "Gay",
    "Santa", "Princess", "Queen", "King", "Prince", "River", "Rocky", "Stone", "Sunny", "Precious",
    "Destiny", "Trinity", "Genesis", "Heaven", "Angel", "Arch", "Berry", "Bell", "Diamond", "Else",
    "Era", "Fern", "Ford", "Forest", "Hardy", "Holly", "Ivory", "Jade", "Jewel", "Joy", "Justice",
    "Kitty", "Lily", "Misty", "Noble", "Pearl", "Pink", "Rose", "Ruby", "Rusty", "Sage", "Sister",
    "Sterling", "Unique", "Walker", "Royal", "Reed",
];

fn first_name(rng: &mut FakeRng) -> String {
    let mut name: String = FirstName(EN).fake_with_rng::<String, _>(rng);
    for _ in 0..16 {
        if !WORDLIKE_FIRST_NAMES.contains(&name.as_str()) {
            break;
        }
        name = FirstName(EN).fake_with_rng::<String, _>(rng);
    }
    name
}

fn last_name(rng: &mut FakeRng) -> String {
    // Keep names one word ("O'Keefe" stays, a space would not).
    let name: String = LastName(EN).fake_with_rng::<String, _>(rng);
    name.chars()
        .filter(|c| c.is_alphabetic() || *c == '\'')
        .collect()
}

/// A name part for an e-mail's local part: letters only.
fn mail_part(name: String) -> String {
    name.chars()
        .filter(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_lowercase()
}

fn digit(rng: &mut FakeRng) -> u8 {
    rng.random_range(0..10u8)
}

/// Apply the real word's letter case to `fake`: ALL CAPS, all lower, or as generated.
fn match_case(real: &str, fake: String) -> String {
    let letters: Vec<char> = real.chars().filter(|c| c.is_alphabetic()).collect();
    if letters.len() > 1 && letters.iter().all(|c| c.is_uppercase()) {
        fake.to_uppercase()
    } else if !letters.is_empty() && letters.iter().all(|c| c.is_lowercase()) {
        fake.to_lowercase()
    } else {
        fake
    }
}

/// Replace every ASCII letter and digit of `s` by a random one of the same class (hex stays hex),
/// keeping everything else.
fn scramble(s: &str, rng: &mut FakeRng) -> String {
    let alnum: Vec<char> = s.chars().filter(char::is_ascii_alphanumeric).collect();
    // Hex only for long tokens (keys, hashes): "221B" or "5B" are a house number and a flat.
    let has_digit = alnum.len() >= 16 && alnum.iter().any(char::is_ascii_digit);
    let lower_hex = has_digit
        && alnum.iter().any(|c| ('a'..='f').contains(c))
        && alnum
            .iter()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(c));
    let upper_hex = has_digit
        && alnum.iter().any(|c| ('A'..='F').contains(c))
        && alnum
            .iter()
            .all(|c| c.is_ascii_digit() || ('A'..='F').contains(c));
    s.chars()
        .map(|c| {
            if lower_hex && c.is_ascii_alphanumeric() {
                char::from(b"0123456789abcdef"[rng.random_range(0..16usize)])
            } else if upper_hex && c.is_ascii_alphanumeric() {
                char::from(b"0123456789ABCDEF"[rng.random_range(0..16usize)])
            } else if c.is_ascii_digit() {
                char::from(b'0' + digit(rng))
            } else if c.is_ascii_lowercase() {
                char::from(b'a' + rng.random_range(0..26u8))
            } else if c.is_ascii_uppercase() {
                char::from(b'A' + rng.random_range(0..26u8))
            } else {
                c
            }
        })
        .collect()
}

/// Write `digits` into the digit positions of `template`, keeping every other character.
fn refill_digits(template: &str, digits: &[u8]) -> String {
    let mut next = digits.iter();
    template
        .chars()
        .map(|c| {
            if c.is_ascii_digit() {
                next.next().map_or(c, |d| char::from(b'0' + d))
            } else {
                c
            }
        })
        .collect()
}

fn ascii_digits(s: &str) -> Vec<u8> {
    s.bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect()
}

// ---------------------------------------------------------------------------------------------------
// Names

const TITLES: &[&str] = &[
    "mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "dame", "jr", "sr", "ii", "iii", "iv",
    "phd", "md",
];

fn person_name(real: &str, rng: &mut FakeRng, attempt: u32) -> String {
    let script = script_of(real);
    let words: Vec<&str> = real.split_whitespace().collect();
    let is_title = |w: &str| {
        TITLES.contains(
            &w.trim_end_matches('.')
                .trim_end_matches(',')
                .to_lowercase()
                .as_str(),
        )
    };
    let is_initial = |w: &str| {
        let letters: Vec<char> = w.chars().filter(|c| c.is_alphabetic()).collect();
        letters.len() == 1 && w.chars().count() <= 2 && !unspaced(script) && script != Script::Han
    };
    let name_words: Vec<usize> = (0..words.len())
        .filter(|&i| !is_title(words[i]) && !is_initial(words[i]))
        .collect();
    if words.is_empty() {
        return first_name(rng);
    }
    // Family name first in Vietnamese, Chinese, Japanese and Korean; last elsewhere.
    let family_first = matches!(
        script,
        Script::Vietnamese | Script::Han | Script::Japanese | Script::Hangul
    );
    let family_slot = if name_words.len() > 1 {
        if family_first {
            name_words.first().copied()
        } else {
            name_words.last().copied()
        }
    } else {
        None
    };
    let mut out = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        if is_title(word) {
            out.push((*word).to_string());
        } else if is_initial(word) {
            let letter = char::from(b'A' + rng.random_range(0..26u8));
            let rest: String = word.chars().filter(|c| !c.is_alphabetic()).collect();
            out.push(match_case(word, format!("{letter}{rest}")));
        } else if matches!(script, Script::Han | Script::Hangul) && script_of(word) == script {
            // Written without spaces (`王小明`): a family name and given-name characters, as long.
            let core_end = word.trim_end_matches(|c: char| !c.is_alphanumeric()).len();
            let (core, tail) = word.split_at(core_end);
            let fake = if name_words.len() > 1 {
                if Some(i) == family_slot {
                    script::family(script, rng)
                } else {
                    script::given(script, rng)
                }
            } else {
                script::unspaced_name(script, core.chars().count(), rng)
            };
            out.push(format!("{fake}{tail}"));
        } else {
            // Hyphenated names keep their parts; a possessive or trailing punctuation stays.
            let core_end = word.trim_end_matches(|c: char| !c.is_alphanumeric()).len();
            let (core, tail) = word.split_at(core_end);
            let parts = core.split('-').count().max(1);
            let fake_part = |rng: &mut FakeRng| -> String {
                if Some(i) == family_slot {
                    family_name(script, rng)
                } else if name_words.len() == 1 && attempt >= 32 {
                    // One-word names: ~3,500 first and last names run out in a huge conversation;
                    // past that a double-barrelled name is still one word.
                    format!("{}-{}", given_name(script, rng), family_name(script, rng))
                } else if name_words.len() == 1 && attempt >= 8 && rng.random_bool(0.5) {
                    // Past the first attempts, draw from last names too (a wider space).
                    family_name(script, rng)
                } else {
                    given_name(script, rng)
                }
            };
            let fake: Vec<String> = (0..parts).map(|_| fake_part(rng)).collect();
            out.push(format!("{}{tail}", match_case(core, fake.join("-"))));
        }
    }
    out.join(" ")
}

/// A given name in the script of the real one (English names, word-like ones left out, for ASCII).
fn given_name(script: Script, rng: &mut FakeRng) -> String {
    match script {
        Script::Ascii => first_name(rng),
        other => one_word(script::given(other, rng)),
    }
}

/// A family name in the script of the real one.
fn family_name(script: Script, rng: &mut FakeRng) -> String {
    match script {
        Script::Ascii => last_name(rng),
        other => one_word(script::family(other, rng)),
    }
}

/// A name part kept to one word (a locale's "de la Cruz" would change the word count).
fn one_word(name: String) -> String {
    name.chars().filter(|c| !c.is_whitespace()).collect()
}

// ---------------------------------------------------------------------------------------------------
// Places

/// A real place of the same kind (city, region, country) in the same script and letter case. Past
/// the first attempts of a crowded vault, an invented town of the same script widens the space.
fn location(real: &str, rng: &mut FakeRng, attempt: u32) -> String {
    let core = real.trim_end_matches(['.', ',', ';', ':']);
    let tail = &real[core.len()..];
    let script = script_of(core);
    let kind = place_kind(core);
    let words = core.split_whitespace().count();
    let fake = if attempt >= 8 && kind == PlaceKind::City {
        invented_town(script, rng)
    } else {
        // As many words as the real one when the list has such ("Norway" → "Chile", not "Saint
        // Kitts and Nevis"); a few draws, then whatever came.
        let mut fake = place(kind, script, rng);
        for _ in 0..8 {
            if fake.split_whitespace().count() == words {
                break;
            }
            fake = place(kind, script, rng);
        }
        fake
    };
    format!("{}{tail}", match_case(core, fake))
}

// ---------------------------------------------------------------------------------------------------
// Emails

const EXAMPLE_DOMAINS: &[&str] = &["example.com", "example.org", "example.net"];

fn email(real: &str, rng: &mut FakeRng, attempt: u32) -> String {
    let local = real.rsplit_once('@').map_or(real, |(local, _)| local);
    let sep = ['.', '_', '-'].into_iter().find(|&c| local.contains(c));
    let first = mail_part(first_name(rng));
    let last = mail_part(last_name(rng));
    let mut fake_local = match sep {
        Some(sep) => format!("{first}{sep}{last}"),
        None if local.chars().count() <= 6 => first,
        None => format!("{first}{last}"),
    };
    // Keep trailing digits ("jane.doe84" → "ann.lee27").
    // Past the first attempts (a crowded vault), two more digits widen the space.
    let trailing = local.chars().rev().take_while(char::is_ascii_digit).count()
        + if attempt >= 16 { 2 } else { 0 };
    for _ in 0..trailing {
        fake_local.push(char::from(b'0' + digit(rng)));
    }
    let domain = EXAMPLE_DOMAINS[rng.random_range(0..EXAMPLE_DOMAINS.len())];
    format!("{}@{domain}", match_case(local, fake_local))
}

// ---------------------------------------------------------------------------------------------------
// Phones

/// Length of the ITU country calling code at the start of `digits` (1, 2 or 3 digits).
fn country_code_len(digits: &[u8]) -> usize {
    let two = |a: u8, b: u8| a * 10 + b;
    match digits {
        [1, ..] | [7, ..] => 1,
        [a, b, ..] => {
            let cc = two(*a, *b);
            let two_digit = matches!(cc,
                20 | 27 | 30..=34 | 36 | 39 | 40 | 41 | 43..=49 | 51..=58 | 60..=66 | 81 | 82 | 84 | 86
                | 90..=95 | 98);
            if two_digit { 2 } else { 3 }
        }
        _ => 1,
    }
}

/// Fill a North American number (10 digits from `at`): a plausible area code, the fictional 555 exchange
/// and a 01xx line, as film and test numbers do.
fn fill_nanp(digits: &mut [u8], at: usize, rng: &mut FakeRng) {
    loop {
        digits[at] = rng.random_range(2..10u8);
        digits[at + 1] = digit(rng);
        digits[at + 2] = digit(rng);
        // Skip N11 service codes and the 555 area itself.
        let n11 = digits[at + 1] == 1 && digits[at + 2] == 1;
        let all5 = digits[at] == 5 && digits[at + 1] == 5 && digits[at + 2] == 5;
        if !n11 && !all5 {
            break;
        }
    }
    digits[at + 3..at + 6].copy_from_slice(&[5, 5, 5]);
    digits[at + 6] = 0;
    digits[at + 7] = 1;
    digits[at + 8] = digit(rng);
    digits[at + 9] = digit(rng);
    for d in digits.iter_mut().skip(at + 10) {
        *d = digit(rng);
    }
}

fn phone(real: &str, rng: &mut FakeRng) -> String {
    let mut digits = ascii_digits(real);
    let trimmed = real.trim_start();
    let plus = trimmed.starts_with('+');
    let intl_00 = !plus && trimmed.starts_with("00");
    let n = digits.len();
    // `keep`: leading digits kept as they are (country code, trunk prefix, first national digit).
    let mut nanp_at = None;
    let keep = if plus || intl_00 {
        let off = if intl_00 { 2 } else { 0 };
        if n > off && digits[off] == 1 && n >= off + 11 {
            nanp_at = Some(off + 1);
            off + 1
        } else {
            (off + country_code_len(&digits[off.min(n)..]) + 1).min(n)
        }
    } else if n == 10 && digits[0] >= 2 {
        nanp_at = Some(0);
        0
    } else if n == 11 && digits[0] == 1 {
        nanp_at = Some(1);
        1
    } else if n > 0 && digits[0] == 0 {
        2.min(n)
    } else {
        1.min(n)
    };
    let original = digits.clone();
    // The line (the last four digits) never stays the real one: a real 555-01xx number would
    // otherwise come back with its own line one time in a hundred, and the fake would carry the
    // real number's tail (`974.555.0199` for `415.555.0199`).
    let tail = n.saturating_sub(4);
    for _ in 0..64 {
        match nanp_at {
            Some(at) => fill_nanp(&mut digits, at, rng),
            None => {
                for d in digits.iter_mut().skip(keep) {
                    *d = digit(rng);
                }
            }
        }
        if n <= keep || digits[tail..] != original[tail..] {
            break;
        }
    }
    refill_digits(real, &digits)
}

// ---------------------------------------------------------------------------------------------------
// Cards, IBANs, SSNs

/// The Luhn check digit for `payload` (the number without its last digit).
pub(crate) fn luhn_check_digit(payload: &[u8]) -> u8 {
    let sum: u32 = payload
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    ((10 - sum % 10) % 10) as u8
}

fn credit_card(real: &str, rng: &mut FakeRng) -> String {
    let mut digits = ascii_digits(real);
    let n = digits.len();
    if n < 2 {
        return scramble(real, rng);
    }
    // Keep the first two digits (the network: 4 Visa, 51–55 Mastercard, 34/37 Amex), draw the rest.
    for d in digits.iter_mut().take(n - 1).skip(2) {
        *d = digit(rng);
    }
    digits[n - 1] = luhn_check_digit(&digits[..n - 1]);
    refill_digits(real, &digits)
}

/// The ISO 13616 remainder of an IBAN (rearranged: BBAN, country, check digits) modulo 97.
pub(crate) fn iban_mod97(compact: &str) -> Option<u32> {
    if compact.len() < 5 || !compact.is_ascii() {
        return None;
    }
    let rearranged = compact[4..].chars().chain(compact[..4].chars());
    let mut rem = 0u32;
    for c in rearranged {
        let v = c.to_ascii_uppercase().to_digit(36)?;
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    Some(rem)
}

fn iban(real: &str, rng: &mut FakeRng) -> String {
    let compact: String = real.chars().filter(char::is_ascii_alphanumeric).collect();
    let country_ok = compact.len() >= 5 && compact[..2].chars().all(|c| c.is_ascii_alphabetic());
    if !country_ok {
        return scramble(real, rng);
    }
    let country = compact[..2].to_ascii_uppercase();
    let bban = scramble(&compact[4..], rng);
    let rem = iban_mod97(&format!("{country}00{bban}")).unwrap_or(0);
    let check = 98 - rem;
    let fake_compact = format!("{}{check:02}{bban}", &compact[..2]);
    let mut next = fake_compact.chars();
    real.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                next.next().unwrap_or(c)
            } else {
                c
            }
        })
        .collect()
}

fn ssn(real: &str, rng: &mut FakeRng) -> String {
    let area = loop {
        let a = rng.random_range(1..900u16);
        if a != 666 {
            break a;
        }
    };
    let group = rng.random_range(1..100u16);
    let serial = rng.random_range(1..10000u16);
    let text = format!("{area:03}{group:02}{serial:04}");
    let digits = ascii_digits(&text);
    if ascii_digits(real).len() == 9 {
        refill_digits(real, &digits)
    } else {
        format!("{area:03}-{group:02}-{serial:04}")
    }
}

// ---------------------------------------------------------------------------------------------------
// IPs and URLs

const DOC_V4: [[u8; 3]; 3] = [[192, 0, 2], [198, 51, 100], [203, 0, 113]];

fn ip_address(real: &str, rng: &mut FakeRng, attempt: u32) -> String {
    // Keep a CIDR suffix, a v6 zone (`%eth0`) or a v4 port.
    let (addr, suffix) = match real.find(['/', '%']) {
        Some(i) => real.split_at(i),
        None => match real.rfind(':') {
            Some(i) if real.matches(':').count() == 1 => real.split_at(i),
            _ => (real, ""),
        },
    };
    let v6 = addr.contains(':') || addr.parse::<Ipv6Addr>().is_ok();
    let fake = if v6 {
        let mut groups = [0u16; 8];
        groups[0] = 0x2001;
        groups[1] = 0x0db8;
        for g in groups.iter_mut().skip(2) {
            *g = if rng.random_bool(0.5) {
                rng.random::<u16>()
            } else {
                0
            };
        }
        groups[7] = rng.random_range(1..=u16::MAX);
        Ipv6Addr::from(groups).to_string()
    } else if attempt < 16 {
        let net = DOC_V4[rng.random_range(0..3usize)];
        Ipv4Addr::new(net[0], net[1], net[2], rng.random_range(1..255u8)).to_string()
    } else {
        // The three /24 documentation blocks hold 762 hosts; past them use the benchmarking block
        // 198.18.0.0/15 (RFC 2544), also never routed on the internet.
        Ipv4Addr::new(
            198,
            rng.random_range(18..20u8),
            rng.random::<u8>(),
            rng.random_range(1..255u8),
        )
        .to_string()
    };
    format!("{fake}{suffix}")
}

fn word(rng: &mut FakeRng) -> String {
    Word(EN).fake_with_rng::<String, _>(rng)
}

fn url(real: &str, rng: &mut FakeRng) -> String {
    let (scheme, rest) = match real.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), real),
    };
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, tail) = rest.split_at(host_end);
    let port = host.rfind(':').map_or("", |i| &host[i..]);
    let www = if host.starts_with("www.") { "www." } else { "" };
    let tld = ["com", "org", "net"][rng.random_range(0..3usize)];
    let mut out = format!("{scheme}{www}{}.example.{tld}{port}", word(rng));
    // Path segments become words (an extension stays); query values and the fragment are scrambled.
    let (path, query_fragment) = tail.split_at(tail.find(['?', '#']).unwrap_or(tail.len()));
    let segments: Vec<String> = path
        .split('/')
        .map(|seg| {
            if seg.is_empty() {
                String::new()
            } else {
                let ext = seg.rfind('.').map_or("", |i| &seg[i..]);
                format!("{}{ext}", word(rng))
            }
        })
        .collect();
    out.push_str(&segments.join("/"));
    if !query_fragment.is_empty() {
        let mut q = String::new();
        for (i, part) in query_fragment.split('&').enumerate() {
            if i > 0 {
                q.push('&');
            }
            match part.split_once('=') {
                Some((key, value)) => {
                    q.push_str(key);
                    q.push('=');
                    q.push_str(&scramble(value, rng));
                }
                None => q.push_str(&scramble(part, rng)),
            }
        }
        out.push_str(&q);
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// API keys

/// How many leading bytes of a key to keep: a known vendor prefix (the one list of credential shapes,
/// [`secrets::vendor_prefix`], which the detector and the config validator read too), else up to three
/// short leading segments that end in `-` or `_` and start with a letter (`abc-live-…`, `pk_live_…`).
fn key_prefix_len(key: &str) -> usize {
    if let Some(p) = secrets::vendor_prefix(key) {
        return p.len();
    }
    let mut end = 0;
    for _ in 0..3 {
        let rest = &key[end..];
        let Some(sep) = rest.find(['-', '_']) else {
            break;
        };
        let seg = &rest[..sep];
        let short_word = (1..=6).contains(&seg.len())
            && seg.starts_with(|c: char| c.is_ascii_alphabetic())
            && seg.chars().all(|c| c.is_ascii_alphanumeric());
        if !short_word {
            break;
        }
        end += sep + 1;
    }
    // Never keep the whole key.
    if end >= key.len() { 0 } else { end }
}

fn api_key(real: &str, rng: &mut FakeRng) -> String {
    // PEM blocks: keep the BEGIN/END lines, scramble the body.
    if real.contains("-----BEGIN") {
        let mut out = String::with_capacity(real.len());
        for line in real.split_inclusive('\n') {
            if line.trim_start().starts_with("-----") {
                out.push_str(line);
            } else {
                out.push_str(&scramble(line, rng));
            }
        }
        return out;
    }
    // `key = value` / `token: value`: keep the name and the separator, fake the value.
    if let Some(pos) = real.find(['=', ':']) {
        let (name, rest) = real.split_at(pos);
        let name_like = !name.trim().is_empty()
            && !rest.starts_with("://")
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || " _-.\"'".contains(c));
        if name_like {
            let value_start = rest
                .char_indices()
                .skip(1)
                .find(|(_, c)| !c.is_whitespace() && *c != '"' && *c != '\'')
                .map_or(rest.len(), |(i, _)| i);
            let (sep, value) = rest.split_at(value_start);
            return format!("{name}{sep}{}", api_key(value, rng));
        }
    }
    let keep = key_prefix_len(real);
    format!("{}{}", &real[..keep], scramble(&real[keep..], rng))
}

// ---------------------------------------------------------------------------------------------------
// Addresses

const STREET_SUFFIXES: &[&str] = &[
    "street",
    "st",
    "avenue",
    "ave",
    "av",
    "road",
    "rd",
    "boulevard",
    "blvd",
    "drive",
    "dr",
    "lane",
    "ln",
    "way",
    "court",
    "ct",
    "place",
    "pl",
    "square",
    "sq",
    "terrace",
    "ter",
    "parkway",
    "pkwy",
    "highway",
    "hwy",
    "circle",
    "cir",
    "trail",
    "trl",
    "alley",
    "row",
    "close",
    "crescent",
    "cres",
    "gardens",
    "grove",
    "hill",
    "park",
    "walk",
    "strasse",
    "straße",
    "str",
    "rue",
    "via",
    "calle",
];
const ADDRESS_KEEP: &[&str] = &[
    "apt",
    "apartment",
    "suite",
    "ste",
    "unit",
    "floor",
    "fl",
    "room",
    "rm",
    "building",
    "bldg",
    "po",
    "box",
    "p.o.",
    "n",
    "s",
    "e",
    "w",
    "ne",
    "nw",
    "se",
    "sw",
    "north",
    "south",
    "east",
    "west",
    "usa",
    "us",
    "uk",
    "united",
    "states",
    "kingdom",
    "of",
    "the",
    "and",
    "canada",
    "germany",
    "france",
    // Cyrillic address words: street, avenue, lane, house, building, flat, city, region.
    "ул",
    "улица",
    "пр",
    "просп",
    "проспект",
    "пер",
    "переулок",
    "д",
    "дом",
    "корп",
    "стр",
    "кв",
    "г",
    "город",
    "обл",
    "область",
];

fn address(real: &str, rng: &mut FakeRng) -> String {
    // Tokens are runs of letters/digits/`'.-#`; everything else (spaces, commas, newlines) is kept.
    let mut out = String::with_capacity(real.len() + 8);
    let mut seen_suffix = false;
    let mut token = String::new();
    let mut tokens: Vec<(String, bool)> = Vec::new(); // (text, is_word_token)
    for c in real.chars() {
        if c.is_alphanumeric() || "'.-#/".contains(c) {
            token.push(c);
        } else {
            if !token.is_empty() {
                tokens.push((std::mem::take(&mut token), true));
            }
            tokens.push((c.to_string(), false));
        }
    }
    if !token.is_empty() {
        tokens.push((token, true));
    }
    // A free word: a name-like word that is neither a street suffix, a kept keyword nor a state code.
    let free = |t: &str| {
        let lower = t.trim_end_matches(['.', ',']).to_lowercase();
        let state_code = t.len() == 2 && t.chars().all(|c| c.is_ascii_uppercase());
        let keyword =
            ADDRESS_KEEP.contains(&lower.as_str()) || STREET_SUFFIXES.contains(&lower.as_str());
        t.chars().any(char::is_alphabetic)
            && !t.chars().any(|c| c.is_ascii_digit())
            && !keyword
            && !state_code
    };
    for i in 0..tokens.len() {
        let (t, is_word) = (&tokens[i].0, tokens[i].1);
        if !is_word {
            out.push_str(t);
            continue;
        }
        let lower = t.trim_end_matches(['.', ',']).to_lowercase();
        if t.chars().any(|c| c.is_ascii_digit()) {
            // House numbers, units, postcodes: same length and classes, no leading zero added.
            let mut s = scramble(t, rng);
            if t.starts_with(|c: char| c.is_ascii_digit() && c != '0') && s.starts_with('0') {
                s.replace_range(
                    0..1,
                    &char::from(b'1' + rng.random_range(0..9u8)).to_string(),
                );
            }
            out.push_str(&s);
        } else if STREET_SUFFIXES.contains(&lower.as_str()) {
            seen_suffix = true;
            out.push_str(t);
        } else if ADDRESS_KEEP.contains(&lower.as_str()) {
            out.push_str(t);
        } else if t.len() == 2 && t.chars().all(|c| c.is_ascii_uppercase()) {
            out.push_str(&StateAbbr(EN).fake_with_rng::<String, _>(rng));
        } else if free(t) {
            let trailing_punct = &t[t.trim_end_matches(['.', ',']).len()..];
            let core = &t[..t.len() - trailing_punct.len()];
            let word_script = script_of(core);
            let fake = if !matches!(word_script, Script::Ascii | Script::LatinMarked) {
                // Another script keeps its script: a name-like word, or a city once past the street.
                if seen_suffix {
                    place(PlaceKind::City, word_script, rng)
                } else {
                    family_name(word_script, rng)
                }
            } else if seen_suffix {
                // A city word: the last word of a run takes a city suffix, earlier ones a prefix.
                let next_word = tokens[i + 1..]
                    .iter()
                    .find(|(s, w)| *w || s == "," || s == "\n");
                let run_continues = matches!(next_word, Some((s, true)) if free(s));
                if run_continues {
                    CityPrefix(EN).fake_with_rng::<String, _>(rng)
                } else {
                    format!(
                        "{}{}",
                        last_name(rng),
                        CitySuffix(EN).fake_with_rng::<String, _>(rng)
                    )
                }
            } else {
                last_name(rng)
            };
            out.push_str(&match_case(core, fake));
            out.push_str(trailing_punct);
        } else {
            out.push_str(&scramble(t, rng));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use fake::locales::Data;
    use rand::SeedableRng;

    use super::*;

    fn rng() -> FakeRng {
        FakeRng::seed_from_u64(7)
    }

    #[test]
    fn luhn_digit_matches_a_known_card() {
        // 4111 1111 1111 1111 is the classic Visa test number.
        assert_eq!(
            luhn_check_digit(&[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
            1
        );
    }

    #[test]
    fn iban_mod97_of_a_valid_iban_is_one() {
        assert_eq!(iban_mod97("GB82WEST12345698765432"), Some(1));
        assert_eq!(iban_mod97("DE89370400440532013000"), Some(1));
        assert_ne!(iban_mod97("GB82WEST12345698765431"), Some(1));
    }

    #[test]
    fn country_codes() {
        assert_eq!(country_code_len(&[4, 4, 2, 0]), 2);
        assert_eq!(country_code_len(&[1, 4, 1, 5]), 1);
        assert_eq!(country_code_len(&[3, 5, 3, 1]), 3);
        assert_eq!(country_code_len(&[4, 9, 3, 0]), 2);
    }

    #[test]
    fn key_prefixes() {
        assert_eq!(key_prefix_len("sk-ant-api03-abcdef"), "sk-ant-api03-".len());
        assert_eq!(key_prefix_len("ghp_abcdef"), 4);
        assert_eq!(key_prefix_len("abc-live-XYZ123"), "abc-live-".len());
        assert_eq!(key_prefix_len("a1b2c3d4e5f6a7b8"), 0);
    }

    #[test]
    fn address_keeps_its_shape() {
        let mut r = rng();
        let real = "1600 Pennsylvania Avenue NW, Washington, DC 20500";
        let fake = address(real, &mut r);
        assert_ne!(fake, real);
        assert!(fake.contains(" Avenue NW, "), "{fake}");
        assert_eq!(fake.matches(',').count(), 2, "{fake}");
        let last = fake.rsplit(' ').next().unwrap_or_default();
        assert_eq!(last.len(), 5, "{fake}");
        assert!(last.chars().all(|c| c.is_ascii_digit()), "{fake}");
        assert!(
            !fake.contains("Pennsylvania") && !fake.contains("Washington"),
            "{fake}"
        );
    }

    /// The positions and characters of everything that is not an ASCII letter or digit.
    fn separators(s: &str) -> Vec<(usize, char)> {
        s.char_indices()
            .filter(|(_, c)| !c.is_ascii_alphanumeric())
            .collect()
    }

    fn fakes(kind: EntityType, real: &str, n: usize) -> Vec<String> {
        let mut r = rng();
        (0..n).map(|_| fake_value(kind, real, &mut r, 0)).collect()
    }

    fn luhn_valid(s: &str) -> bool {
        let d = ascii_digits(s);
        d.len() >= 2 && luhn_check_digit(&d[..d.len() - 1]) == d[d.len() - 1]
    }

    #[test]
    fn names_keep_their_word_count_and_titles() {
        for fake in fakes(EntityType::PersonName, "Alice Jones", 50) {
            let words: Vec<&str> = fake.split(' ').collect();
            assert_eq!(words.len(), 2, "{fake}");
            assert!(
                words
                    .iter()
                    .all(|w| w.starts_with(|c: char| c.is_uppercase())),
                "{fake}"
            );
        }
        for fake in fakes(EntityType::PersonName, "Alice", 50) {
            assert!(
                !fake.contains(' ') && fake.chars().all(char::is_alphabetic),
                "{fake}"
            );
        }
        for fake in fakes(EntityType::PersonName, "Dr. Mary J. Smith-Jones", 20) {
            let words: Vec<&str> = fake.split(' ').collect();
            assert_eq!(words.len(), 4, "{fake}");
            assert_eq!(words[0], "Dr.");
            assert!(words[2].len() == 2 && words[2].ends_with('.'), "{fake}");
            assert_eq!(words[3].matches('-').count(), 1, "{fake}");
        }
        assert!(
            fakes(EntityType::PersonName, "JOHN SMITH", 5)
                .iter()
                .all(|f| f == &f.to_uppercase())
        );
        // No first name that reads as a word ("Will", "General").
        for fake in fakes(EntityType::PersonName, "Alice", 3000) {
            assert!(!WORDLIKE_FIRST_NAMES.contains(&fake.as_str()), "{fake}");
        }
    }

    #[test]
    fn names_keep_their_script_and_case() {
        for (real, script) in [
            ("Иван Петров", Script::Cyrillic),
            ("Nguyễn Thị Minh Khai", Script::Vietnamese),
            ("Søren Kierkegaard Jørgensen", Script::LatinMarked),
            ("김민준", Script::Hangul),
            ("Γιώργος Παπαδόπουλος", Script::Greek),
            ("अमित शर्मा", Script::Devanagari),
        ] {
            // (A fake equal to the real value is possible from a small list; the vault draws again.)
            for fake in fakes(EntityType::PersonName, real, 40) {
                assert_eq!(
                    fake.split(' ').count(),
                    real.split(' ').count(),
                    "{real} → {fake}"
                );
                match script {
                    // Vietnamese parts are Latin; most carry Vietnamese marks.
                    Script::Vietnamese => assert!(
                        matches!(
                            script_of(&fake),
                            Script::Vietnamese | Script::LatinMarked | Script::Ascii
                        ),
                        "{real} → {fake}"
                    ),
                    Script::LatinMarked => assert!(
                        matches!(script_of(&fake), Script::LatinMarked | Script::Ascii),
                        "{real} → {fake}"
                    ),
                    _ => assert_eq!(script_of(&fake), script, "{real} → {fake}"),
                }
            }
        }
        // Vietnamese keeps its family-name-first shape and its marks across most fakes.
        let marked = fakes(EntityType::PersonName, "Nguyễn Thị Minh Khai", 40)
            .iter()
            .filter(|f| script_of(f) == Script::Vietnamese)
            .count();
        assert!(marked >= 20, "{marked} of 40");
        // Chinese: as many Han characters, no spaces.
        for fake in fakes(EntityType::PersonName, "王小明", 40) {
            assert_eq!(fake.chars().count(), 3, "{fake}");
            assert!(
                fake.chars().all(|c| ('\u{4E00}'..='\u{9FFF}').contains(&c)),
                "{fake}"
            );
        }
        // Lower case stays lower case, in every script with case.
        for real in ["john smith", "ravi", "иван петров", "søren jørgensen"] {
            for fake in fakes(EntityType::PersonName, real, 20) {
                assert_eq!(fake, fake.to_lowercase(), "{real} → {fake}");
                assert_eq!(
                    script_of(&fake) == Script::Cyrillic,
                    script_of(real) == Script::Cyrillic
                );
            }
        }
    }

    #[test]
    fn locations_keep_their_kind_script_and_case() {
        let countries: Vec<String> = EN::ADDRESS_COUNTRY.iter().map(|c| c.to_string()).collect();
        for fake in fakes(EntityType::Location, "Norway", 30) {
            assert!(countries.contains(&fake), "a country for a country: {fake}");
            assert!(!fake.contains(' '), "one word for one word: {fake}");
        }
        for fake in fakes(EntityType::Location, "Tromsø", 30) {
            assert_eq!(place_kind(&fake), PlaceKind::City, "{fake}");
            assert_eq!(script_of(&fake), Script::LatinMarked, "{fake}");
        }
        for fake in fakes(EntityType::Location, "Москва", 30) {
            assert_eq!(script_of(&fake), Script::Cyrillic, "{fake}");
        }
        for fake in fakes(EntityType::Location, "Россия", 30) {
            assert_eq!(script_of(&fake), Script::Cyrillic, "{fake}");
            assert_eq!(place_kind(&fake), PlaceKind::Country, "{fake}");
        }
        for fake in fakes(EntityType::Location, "成都", 30) {
            assert_eq!(script_of(&fake), Script::Han, "{fake}");
        }
        for fake in fakes(EntityType::Location, "Ontario", 30) {
            assert_eq!(place_kind(&fake), PlaceKind::Region, "{fake}");
        }
        for fake in fakes(EntityType::Location, "berlin", 20) {
            assert_eq!(fake, fake.to_lowercase(), "{fake}");
        }
        // A crowded vault gets invented towns of the same script.
        let mut r = rng();
        let wide = fake_value(EntityType::Location, "Bergen", &mut r, 20);
        assert_eq!(script_of(&wide), Script::Ascii, "{wide}");
    }

    #[test]
    fn a_cyrillic_address_gets_a_cyrillic_fake() {
        let real = "ул. Тверская, д. 7, Москва 125009";
        for fake in fakes(EntityType::Address, real, 20) {
            assert!(fake.starts_with("ул. "), "{fake}");
            assert!(fake.contains(", д. "), "{fake}");
            assert!(
                !fake.contains("Тверская") && !fake.contains("Москва"),
                "{fake}"
            );
            assert!(
                !fake.chars().any(|c| c.is_ascii_alphabetic()),
                "no Latin word in a Cyrillic address: {fake}"
            );
        }
    }

    #[test]
    fn emails_parse_and_use_reserved_domains() {
        for real in [
            "jane.doe@corp.io",
            "jdoe@corp.io",
            "jane_doe84@mail.corp.io",
            "x@y.z",
        ] {
            for fake in fakes(EntityType::Email, real, 50) {
                let (local, domain) = fake.split_once('@').unwrap();
                assert!(
                    !local.is_empty() && !fake[local.len() + 1..].contains('@'),
                    "{fake}"
                );
                assert!(
                    local
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                    "{fake}"
                );
                assert!(!local.starts_with('.') && !local.ends_with('.'), "{fake}");
                assert!(EXAMPLE_DOMAINS.contains(&domain), "{fake}");
                if real.contains('.') && real.split('@').next().unwrap().contains('.') {
                    assert!(local.contains('.'), "{fake}");
                }
                if real.starts_with("jane_doe84") {
                    assert!(
                        local.contains('_') && local.ends_with(|c: char| c.is_ascii_digit()),
                        "{fake}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_fake_phone_never_keeps_the_real_line() {
        // A fictional 555-01xx number: its fake is 555-01xx too, and only the line can coincide.
        for seed in 0..2_000u64 {
            let mut rng = FakeRng::seed_from_u64(seed);
            let fake = phone("415.555.0199", &mut rng);
            assert!(!fake.ends_with("0199"), "seed {seed}: {fake}");
            let fake = phone("+46 70 123 45 67", &mut rng);
            assert!(!fake.ends_with("45 67"), "seed {seed}: {fake}");
        }
    }

    #[test]
    fn phones_keep_the_country_format() {
        for fake in fakes(EntityType::Phone, "+44 20 7946 0958", 50) {
            assert!(fake.starts_with("+44 2"), "{fake}");
            assert_eq!(separators(&fake), separators("+44 20 7946 0958"));
        }
        for fake in fakes(EntityType::Phone, "+49 (0)30 1234567", 50) {
            assert!(
                fake.starts_with("+49 (0)3") || fake.starts_with("+49 ("),
                "{fake}"
            );
            assert_eq!(separators(&fake), separators("+49 (0)30 1234567"));
        }
        for real in [
            "+1 (415) 555-2671",
            "(415) 555-2671",
            "415.555.2671",
            "1-415-555-2671",
            "+14155552671",
        ] {
            for fake in fakes(EntityType::Phone, real, 50) {
                assert_eq!(separators(&fake), separators(real), "{real} → {fake}");
                let d = ascii_digits(&fake);
                let national = &d[d.len() - 10..];
                assert!(national[0] >= 2, "{fake}");
                assert_eq!(
                    &national[3..8],
                    &[5, 5, 5, 0, 1],
                    "{fake}: a fictional 555-01xx line"
                );
                if real.starts_with("+1") {
                    assert!(fake.starts_with("+1"), "{fake}");
                }
            }
        }
        for fake in fakes(EntityType::Phone, "020 7946 0958", 20) {
            assert!(
                fake.starts_with("02") && fake.len() == 13,
                "{fake}: trunk prefix and first digit kept"
            );
        }
    }

    #[test]
    fn cards_keep_length_and_separators_and_pass_luhn() {
        for real in [
            "4111 1111 1111 1111",
            "5555-5555-5555-4444",
            "378282246310005",
            "6011 0009 9013 9424",
        ] {
            assert!(luhn_valid(real), "{real}");
            for fake in fakes(EntityType::CreditCard, real, 100) {
                assert!(luhn_valid(&fake), "{real} → {fake}");
                assert_eq!(fake.len(), real.len());
                assert_eq!(separators(&fake), separators(real));
                assert_eq!(fake[..2], real[..2], "the network prefix stays");
            }
        }
    }

    #[test]
    fn ibans_keep_country_and_length_and_pass_mod97() {
        for real in [
            "GB82 WEST 1234 5698 7654 32",
            "DE89370400440532013000",
            "FR14 2004 1010 0505 0001 3M02 606",
        ] {
            assert_eq!(iban_mod97(&real.replace(' ', "")), Some(1), "{real}");
            for fake in fakes(EntityType::Iban, real, 100) {
                assert_eq!(
                    iban_mod97(&fake.replace(' ', "")),
                    Some(1),
                    "{real} → {fake}"
                );
                assert_eq!(fake.len(), real.len());
                assert_eq!(fake[..2], real[..2]);
                assert_eq!(separators(&fake), separators(real));
            }
        }
    }

    #[test]
    fn ips_come_from_the_documentation_ranges() {
        for real in ["10.1.2.3", "8.8.8.8", "172.16.0.1/12", "192.168.1.10:8080"] {
            for fake in fakes(EntityType::IpAddress, real, 100) {
                let (addr, suffix) = fake.split_at(fake.find(['/', ':']).unwrap_or(fake.len()));
                let ip: Ipv4Addr = addr.parse().unwrap();
                let o = ip.octets();
                assert!(
                    DOC_V4.contains(&[o[0], o[1], o[2]]) && o[3] != 0 && o[3] != 255,
                    "{fake}"
                );
                assert_eq!(suffix, &real[real.find(['/', ':']).unwrap_or(real.len())..]);
            }
        }
        // Past the three /24 blocks: the benchmarking block.
        let mut r = rng();
        let wide: Ipv4Addr = fake_value(EntityType::IpAddress, "10.0.0.1", &mut r, 20)
            .parse()
            .unwrap();
        assert!(
            wide.octets()[0] == 198 && (18..20).contains(&wide.octets()[1]),
            "{wide}"
        );
        for fake in fakes(EntityType::IpAddress, "2a00:1450:4001:81b::200e", 100) {
            let ip: Ipv6Addr = fake.parse().unwrap();
            assert_eq!(&ip.segments()[..2], &[0x2001, 0x0db8], "{fake}");
        }
    }

    #[test]
    fn ssns_are_valid_looking() {
        for real in ["078-05-1120", "078 05 1120", "078051120"] {
            for fake in fakes(EntityType::Ssn, real, 300) {
                assert_eq!(separators(&fake), separators(real));
                let d = ascii_digits(&fake);
                let area = u32::from(d[0]) * 100 + u32::from(d[1]) * 10 + u32::from(d[2]);
                assert!(area != 0 && area != 666 && area < 900, "{fake}");
                assert!(d[3..5] != [0, 0] && d[5..] != [0, 0, 0, 0], "{fake}");
            }
        }
    }

    #[test]
    fn urls_use_example_domains_and_keep_the_shape() {
        for fake in fakes(
            EntityType::Url,
            "https://www.acme-corp.com/users/jdoe/profile.html?id=123#top",
            20,
        ) {
            assert!(fake.starts_with("https://www."), "{fake}");
            let host = fake["https://".len()..].split('/').next().unwrap();
            assert!(host.contains(".example."), "{fake}");
            assert_eq!(fake.matches('/').count(), 5, "{fake}");
            assert!(fake.contains(".html?id=") && fake.contains('#'), "{fake}");
        }
        let plain = fakes(EntityType::Url, "http://intranet.corp:8080", 1).remove(0);
        assert!(
            plain.starts_with("http://") && plain.ends_with(":8080"),
            "{plain}"
        );
    }

    /// Every vendor prefix in the one list survives into the fake, so the model still reads which
    /// vendor's key it was (and the list the fakes use cannot drift from the detector's again).
    #[test]
    fn every_listed_vendor_prefix_is_kept() {
        let body = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3kL5mN7pQ9rS1tU3vW5xY7z";
        let mut checked = 0;
        for prefix in secrets::prefixes() {
            let real = format!("{prefix}{body}");
            for fake in fakes(EntityType::ApiKey, &real, 3) {
                assert!(fake.starts_with(prefix), "{prefix}: {fake}");
                assert_eq!(fake.len(), real.len(), "{prefix}: {fake}");
                assert_ne!(fake, real);
            }
            checked += 1;
        }
        assert!(checked > 80, "the list has {checked} prefixes");
        for prefix in ["ABSK", "sk-or-", "sk-ant-api03-", "eyJ"] {
            let real = format!("{prefix}{body}");
            let fake = fakes(EntityType::ApiKey, &real, 1).remove(0);
            assert!(fake.starts_with(prefix), "{prefix}: {fake}");
        }
    }

    #[test]
    fn api_keys_keep_the_prefix_length_and_classes() {
        let real = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEf";
        for fake in fakes(EntityType::ApiKey, real, 20) {
            assert!(fake.starts_with("sk-ant-api03-"), "{fake}");
            assert_eq!(fake.len(), real.len());
            assert_ne!(fake, real);
            assert_eq!(separators(&fake), separators(real));
        }
        let aws = fakes(EntityType::ApiKey, "AKIAIOSFODNN7EXAMPLE", 1).remove(0);
        assert!(
            aws.starts_with("AKIA")
                && aws.len() == 20
                && aws.chars().all(|c| c.is_ascii_alphanumeric()),
            "{aws}"
        );
        assert_eq!(scramble("221B", &mut rng()).len(), 4);
        assert!(scramble("221B", &mut rng()).ends_with(|c: char| c.is_ascii_uppercase()));
        let hex = fakes(EntityType::ApiKey, "0123456789abcdef0123456789abcdef", 1).remove(0);
        assert!(
            hex.chars().all(|c| c.is_ascii_hexdigit()) && hex.len() == 32,
            "{hex}"
        );
        let pair = fakes(EntityType::ApiKey, "password = \"hunter2hunter2\"", 1).remove(0);
        assert!(
            pair.starts_with("password = \"") && pair.ends_with('"') && !pair.contains("hunter2"),
            "{pair}"
        );
        let pem =
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA75\n-----END RSA PRIVATE KEY-----";
        let fake = fakes(EntityType::ApiKey, pem, 1).remove(0);
        assert!(
            fake.starts_with("-----BEGIN RSA PRIVATE KEY-----\n")
                && fake.ends_with("-----END RSA PRIVATE KEY-----")
        );
        assert!(!fake.contains("MIIEpAIBAAKCAQEA75"));
    }
}
