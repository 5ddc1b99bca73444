//! Values for the templates: people (names from the `fake` locales and the curated cultures), places,
//! postal addresses by country, phones by class, and the structured kinds (cards pass Luhn, IBANs pass
//! mod 97, SSNs follow the SSA's rules), plus identifiers that are *not* personal data.
//!
//! The split decides the pools: [`Gen`] draws only values whose stable hash ([`in_split`]) falls in
//! the split's half of a list, uses a different mix of `fake` locales and name cultures per split, and
//! takes phone, card, IBAN, e-mail and key shapes from per-split lists. So the held-out split shares no
//! name, street, city or company with the tuning split, though both cover every class of the issue.
//!
//! The `fresh` split draws from the held-out half of every list here, so it shares no value with the
//! tuning split either; its own kinds of value (new name cultures, countries, phone, card, IBAN,
//! e-mail, URL and key shapes) live in `fresh.rs`, which [`Gen`] defers to when the split is `Fresh`.

use fake::Fake;
use fake::rand::SeedableRng;
use fake::rand::rngs::StdRng;

use super::pools::{self, Country, Culture};

/// Which part of the corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// For tuning the detector.
    Tune,
    /// Never tuned on.
    Heldout,
    /// Written blind (without reading the other splits' templates), for the final numbers.
    Fresh,
    /// Written blind again, later and by another hand, with its own kinds and values (`unseen.rs`).
    Unseen,
}

impl Split {
    pub fn parse(s: &str) -> Option<Split> {
        match s {
            "tune" | "tuning" => Some(Split::Tune),
            "heldout" | "held-out" => Some(Split::Heldout),
            "fresh" => Some(Split::Fresh),
            "unseen" => Some(Split::Unseen),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Tune => "tune",
            Split::Heldout => "heldout",
            Split::Fresh => "fresh",
            Split::Unseen => "unseen",
        }
    }
}

/// FNV-1a: a stable hash (std's `DefaultHasher` may change between releases).
pub fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Whether `value` belongs to `split`'s half of any pool (`Fresh` takes the held-out half: both stay
/// clear of every value the detector was tuned on).
pub fn in_split(value: &str, split: Split) -> bool {
    (fnv(value) >> 7) % 2 == u64::from(split != Split::Tune)
}

/// A person: names as written in the text.
#[derive(Clone, Debug)]
pub struct Person {
    pub given: String,
    pub family: String,
    /// Family name first, no comma (Hungarian, Vietnamese, Chinese).
    pub family_first: bool,
    /// Written without a space between the parts (Chinese and Japanese in their own script).
    pub joined: bool,
    /// A middle initial or middle name, when the template asks for one.
    pub middle: Option<String>,
    /// Honorific for cue templates ("Mr.", "Ms.", "Dr.").
    pub honorific: &'static str,
}

impl Person {
    /// The full name as the culture writes it.
    pub fn full(&self) -> String {
        let (a, b) = if self.family_first {
            (&self.family, &self.given)
        } else {
            (&self.given, &self.family)
        };
        if self.joined {
            return format!("{a}{b}");
        }
        match &self.middle {
            Some(m) if !self.family_first => format!("{a} {m} {b}"),
            _ => format!("{a} {b}"),
        }
    }
    /// The name a colleague would use alone (given name; the family name for joined scripts).
    pub fn short(&self) -> String {
        if self.joined {
            self.full()
        } else {
            self.given.clone()
        }
    }
    /// A handle-like lowercase given name for chat lines (`ravi`).
    pub fn chat(&self) -> String {
        self.short().to_lowercase()
    }
    /// ASCII letters of the name, for e-mail local parts.
    pub fn ascii(s: &str) -> String {
        let mut out = String::new();
        for c in s.chars() {
            let mapped = match c {
                'á' | 'à' | 'â' | 'ä' | 'ã' | 'å' | 'ą' | 'ă' | 'Á' | 'Å' | 'Ä' => "a",
                'é' | 'è' | 'ê' | 'ë' | 'ę' | 'ě' | 'É' | 'ệ' | 'ễ' => "e",
                'í' | 'ì' | 'î' | 'ï' | 'ı' | 'İ' | 'Í' => "i",
                'ó' | 'ò' | 'ô' | 'ö' | 'õ' | 'ő' | 'ø' | 'Ø' | 'Ö' | 'ồ' | 'ố' | 'ọ' | 'ơ' => {
                    "o"
                }
                'ú' | 'ù' | 'û' | 'ü' | 'ű' | 'ů' | 'Ü' | 'ư' | 'ữ' => "u",
                'ç' | 'ć' | 'č' | 'Č' => "c",
                'ñ' | 'ń' | 'ň' => "n",
                'ś' | 'š' | 'ş' | 'Ş' | 'Š' => "s",
                'ź' | 'ż' | 'ž' | 'Ž' => "z",
                'ł' | 'Ł' => "l",
                'ř' => "r",
                'ý' => "y",
                'ğ' => "g",
                'đ' | 'Đ' | 'ð' => "d",
                'þ' => "th",
                'æ' => "ae",
                'ß' => "ss",
                c if c.is_ascii_alphabetic() => {
                    out.push(c.to_ascii_lowercase());
                    continue;
                }
                _ => "",
            };
            out.push_str(mapped);
        }
        out
    }
}

/// A postal address, line by line (street to country); joined by the template.
#[derive(Clone, Debug)]
pub struct Address {
    pub lines: Vec<String>,
    /// The city alone, for templates that also mention it elsewhere.
    pub city: String,
}

impl Address {
    pub fn multiline(&self) -> String {
        self.lines.join("\n")
    }
    pub fn inline(&self) -> String {
        self.lines.join(", ")
    }
}

/// Fake locales used for names (each split has its own mix).
#[derive(Clone, Copy, Debug)]
enum Locale {
    En,
    DeDe,
    FrFr,
    ItIt,
    NlNl,
    PtBr,
    PtPt,
    TrTr,
    JaJp,
    ZhCn,
    ZhTw,
    CyGb,
    ArSa,
}

/// Where a name comes from.
#[derive(Clone, Copy)]
enum Source {
    Fake(Locale),
    Curated(&'static Culture),
}

const TUNE_NAMES: &[(Source, u32)] = &[
    (Source::Fake(Locale::En), 26),
    (Source::Fake(Locale::DeDe), 5),
    (Source::Fake(Locale::FrFr), 5),
    (Source::Fake(Locale::TrTr), 4),
    (Source::Fake(Locale::PtBr), 3),
    (Source::Fake(Locale::ZhCn), 2),
    (Source::Fake(Locale::JaJp), 1),
    (Source::Curated(&pools::NORDIC), 6),
    (Source::Curated(&pools::SLAVIC), 5),
    (Source::Curated(&pools::HUNGARIAN), 3),
    (Source::Curated(&pools::INDIAN), 6),
    (Source::Curated(&pools::VIETNAMESE), 3),
    (Source::Curated(&pools::JAPANESE_LATIN), 3),
    (Source::Curated(&pools::CHINESE_LATIN), 4),
    (Source::Curated(&pools::ARABIC_LATIN), 4),
    (Source::Curated(&pools::HISPANIC), 4),
    (Source::Curated(&pools::AFRICAN), 3),
    (Source::Curated(&pools::KOREAN), 2),
    (Source::Curated(&pools::RUSSIAN_CYRILLIC), 2),
];

const HELDOUT_NAMES: &[(Source, u32)] = &[
    (Source::Fake(Locale::En), 22),
    (Source::Fake(Locale::ItIt), 5),
    (Source::Fake(Locale::NlNl), 5),
    (Source::Fake(Locale::PtPt), 3),
    (Source::Fake(Locale::CyGb), 3),
    (Source::Fake(Locale::ZhTw), 2),
    (Source::Fake(Locale::ArSa), 1),
    (Source::Fake(Locale::JaJp), 1),
    (Source::Fake(Locale::DeDe), 2),
    (Source::Curated(&pools::NORDIC), 5),
    (Source::Curated(&pools::SLAVIC), 6),
    (Source::Curated(&pools::HUNGARIAN), 4),
    (Source::Curated(&pools::INDIAN), 7),
    (Source::Curated(&pools::VIETNAMESE), 4),
    (Source::Curated(&pools::JAPANESE_LATIN), 4),
    (Source::Curated(&pools::CHINESE_LATIN), 4),
    (Source::Curated(&pools::ARABIC_LATIN), 5),
    (Source::Curated(&pools::HISPANIC), 3),
    (Source::Curated(&pools::AFRICAN), 4),
    (Source::Curated(&pools::KOREAN), 3),
    (Source::Curated(&pools::RUSSIAN_CYRILLIC), 2),
];

macro_rules! fake_names {
    ($rng:expr, $m:ident) => {{
        use fake::faker::name::$m::{FirstName, LastName};
        // Some locales' lists carry stray whitespace (`it_it` has trailing tabs).
        let g: String = FirstName().fake_with_rng($rng);
        let f: String = LastName().fake_with_rng($rng);
        (g.trim().to_string(), f.trim().to_string())
    }};
}

/// Countries for addresses, by split (both have the formats the issue names: multi-line US, military,
/// German, French, Spanish, Dutch, Canadian, Japanese and Russian; each adds a few of its own).
const TUNE_COUNTRIES: &[(&Country, u32)] = &[
    (&pools::US, 22),
    (&pools::UK, 8),
    (&pools::DE, 7),
    (&pools::FR, 6),
    (&pools::ES, 3),
    (&pools::NL, 3),
    (&pools::CA, 5),
    (&pools::JP, 3),
    (&pools::RU, 3),
    (&pools::IN, 4),
    (&pools::AU, 4),
    (&pools::NORDICS, 4),
    (&pools::PL, 2),
];

const HELDOUT_COUNTRIES: &[(&Country, u32)] = &[
    (&pools::US, 18),
    (&pools::UK, 6),
    (&pools::IE, 2),
    (&pools::DE, 5),
    (&pools::AT_CH, 3),
    (&pools::FR, 5),
    (&pools::ES, 3),
    (&pools::IT, 4),
    (&pools::NL, 3),
    (&pools::CA, 5),
    (&pools::JP, 3),
    (&pools::RU, 3),
    (&pools::IN, 3),
    (&pools::BR, 3),
    (&pools::TR, 3),
    (&pools::HU, 2),
    (&pools::NORDICS, 3),
];

/// Phone shapes: `N` a digit 2–9, `#` any digit, everything else literal. Grouped by the issue's
/// classes; the two splits' lists are written separately and share no shape.
pub struct PhoneShapes {
    pub national: &'static [&'static str],
    pub invalid_plan: &'static [&'static str],
    pub intl_prefix: &'static [&'static str],
    pub extension: &'static [&'static str],
    pub local: &'static [&'static str],
    pub grouped: &'static [&'static str],
}

pub const TUNE_PHONES: PhoneShapes = PhoneShapes {
    national: &[
        "(N##) N##-####",
        "N##-N##-####",
        "+1 N## N## ####",
        "N##.N##.####",
        "+1 (N##) N##-####",
    ],
    invalid_plan: &["(N##) 1##-####", "N##-0##-####", "+1 N## 1## ####"],
    intl_prefix: &[
        "011 44 20 N### ####",
        "00 49 30 N#######",
        "001-N##-N##-####",
        "0033 6 ## ## ## ##",
        "011 91 9#### #####",
    ],
    extension: &[
        "(N##) N##-#### x###",
        "+1 N## N##-#### ext. ##",
        "+44 20 N### #### ext. ###",
        "N##-N##-#### x#",
    ],
    local: &["N##-####", "N### ####", "N##-##-##", "N######"],
    grouped: &[
        "+33 6 ## ## ## ##",
        "06.##.##.##.##",
        "+49 30 N## ####",
        "0176 N#######",
        "+44 7### ######",
        "07### ### ###",
        "+46 70-### ## ##",
        "+81 3-####-####",
        "+91 9#### #####",
        "+7 495 N##-##-##",
        "+61 4## ### ###",
        "+90 5## ### ## ##",
        "+48 6## ### ###",
        "+47 4## ## ###",
    ],
};

pub const HELDOUT_PHONES: PhoneShapes = PhoneShapes {
    national: &[
        "N## N## ####",
        "+1-N##-N##-####",
        "1 (N##) N##-####",
        "(N##)N##-####",
        "1.N##.N##.####",
    ],
    invalid_plan: &["+1 (N##) 0##-####", "(N##) 1## ####", "N##.1##.####"],
    intl_prefix: &[
        "011-33-1-##-##-##-##",
        "00 44 7### ######",
        "001 N## N## ####",
        "0061 2 #### ####",
        "00 31 6 ########",
    ],
    extension: &[
        "N##.N##.#### ext ####",
        "(N##) N##-#### extension ##",
        "+1 N## N## #### x##",
        "+49 89 N###### -##",
    ],
    local: &["N## ####", "N#######", "N## ## ##", "N###-####"],
    grouped: &[
        "+31 6 ########",
        "+31 (0)20 ### ####",
        "+39 3## ### ####",
        "+34 6## ## ## ##",
        "+36 30 ### ####",
        "+45 ## ## ## ##",
        "+358 40 ### ####",
        "+55 11 9####-####",
        "+353 8# ### ####",
        "+82 10-####-####",
        "+86 138 #### ####",
        "+84 9# ### ## ##",
        "+971 50 ### ####",
        "+27 82 ### ####",
        "+254 7## ######",
        "020 7### ####",
    ],
};

/// E-mail domains (each split gets its half).
const DOMAINS: &[&str] = &[
    "gmail.com",
    "yahoo.com",
    "hotmail.com",
    "outlook.com",
    "icloud.com",
    "gmx.de",
    "orange.fr",
    "northwind.com",
    "acme-corp.com",
    "globex.co.uk",
    "lumenlabs.io",
    "kestrel.law",
    "tidewater.org",
    "mail.ru",
    "qq.com",
    "rediffmail.com",
    "proton.me",
    "web.de",
    "yandex.ru",
    "naver.com",
    "libero.it",
    "telenet.be",
    "fastmail.fm",
    "zoho.com",
    "seznam.cz",
    "wp.pl",
];

/// Small deterministic choices on top of a seeded rng, and the split's pools.
pub struct Gen {
    rng: StdRng,
    pub split: Split,
}

impl Gen {
    pub fn new(split: Split, seed: u64) -> Gen {
        // The splits' streams differ even for one seed.
        let salt = match split {
            Split::Tune => 0x7475_6e65,
            Split::Heldout => 0x6865_6c64,
            Split::Fresh => 0x6672_6573_6821,
            Split::Unseen => 0x756e_7365_656e,
        };
        Gen {
            rng: StdRng::seed_from_u64(seed ^ salt),
            split,
        }
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        (0..n).fake_with_rng(&mut self.rng)
    }

    /// True with probability `pct`%.
    pub fn chance(&mut self, pct: usize) -> bool {
        self.below(100) < pct
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// A value from `items` in this split's half (falls back to any value if the half is empty).
    pub fn own(&mut self, items: &[&'static str]) -> &'static str {
        let split = self.split;
        let mine: Vec<&'static str> = items
            .iter()
            .copied()
            .filter(|v| in_split(v, split))
            .collect();
        if mine.is_empty() {
            self.pick(items)
        } else {
            self.pick(&mine)
        }
    }

    /// Draw with `f` until the value is in this split's half (bounded: fake's lists are large).
    fn own_fake(&mut self, mut f: impl FnMut(&mut StdRng) -> (String, String)) -> (String, String) {
        let mut last = f(&mut self.rng);
        for _ in 0..64 {
            if in_split(&last.0, self.split) && in_split(&last.1, self.split) {
                break;
            }
            last = f(&mut self.rng);
        }
        last
    }

    fn weighted<T: Copy>(&mut self, items: &[(T, u32)]) -> T {
        let total: u32 = items.iter().map(|(_, w)| w).sum();
        let mut at = self.below(total as usize) as u32;
        for (item, w) in items {
            if at < *w {
                return *item;
            }
            at -= w;
        }
        items[0].0
    }

    pub fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b'0' + self.below(10) as u8))
            .collect()
    }

    /// Fill a shape: `N` a digit 2–9, `#` a digit, `A` an upper-case letter, others literal.
    pub fn shape(&mut self, shape: &str) -> String {
        shape
            .chars()
            .map(|c| match c {
                '#' => char::from(b'0' + self.below(10) as u8),
                'N' => char::from(b'2' + self.below(8) as u8),
                'A' => char::from(b'A' + self.below(26) as u8),
                other => other,
            })
            .collect()
    }

    /// A person from the split's mix of locales and cultures.
    pub fn person(&mut self) -> Person {
        let table = match self.split {
            Split::Tune => TUNE_NAMES,
            Split::Heldout | Split::Unseen => HELDOUT_NAMES,
            Split::Fresh => return super::fresh::person(self),
        };
        let source = self.weighted(table);
        let honorific = self.pick(&["Mr.", "Ms.", "Dr.", "Mrs.", "Prof."]);
        match source {
            Source::Fake(locale) => {
                let (given, family) = self.own_fake(|rng| match locale {
                    Locale::En => fake_names!(rng, en),
                    Locale::DeDe => fake_names!(rng, de_de),
                    Locale::FrFr => fake_names!(rng, fr_fr),
                    Locale::ItIt => fake_names!(rng, it_it),
                    Locale::NlNl => fake_names!(rng, nl_nl),
                    Locale::PtBr => fake_names!(rng, pt_br),
                    Locale::PtPt => fake_names!(rng, pt_pt),
                    Locale::TrTr => fake_names!(rng, tr_tr),
                    Locale::JaJp => fake_names!(rng, ja_jp),
                    Locale::ZhCn => fake_names!(rng, zh_cn),
                    Locale::ZhTw => fake_names!(rng, zh_tw),
                    Locale::CyGb => fake_names!(rng, cy_gb),
                    Locale::ArSa => fake_names!(rng, ar_sa),
                });
                let cjk = matches!(locale, Locale::JaJp | Locale::ZhCn | Locale::ZhTw);
                Person {
                    given,
                    family,
                    family_first: cjk,
                    joined: cjk,
                    middle: None,
                    honorific,
                }
            }
            Source::Curated(c) => Person {
                given: self.own(c.given).to_string(),
                family: self.own(c.family).to_string(),
                family_first: c.family_first,
                joined: false,
                middle: None,
                honorific,
            },
        }
    }

    /// A person written with a middle initial (`Marta K. Lindqvist`), when the culture allows.
    pub fn person_with_initial(&mut self) -> Person {
        let mut p = self.person();
        if !p.joined && !p.family_first {
            p.middle = Some(self.own(pools::INITIALS).to_string());
        }
        p
    }

    pub fn company(&mut self) -> &'static str {
        self.own(pools::COMPANIES)
    }

    pub fn job_title(&mut self) -> &'static str {
        self.own(pools::TITLES)
    }

    /// A city, region or country named alone (a LOCATION).
    pub fn place(&mut self) -> String {
        match self.below(10) {
            0..=5 => self.own(pools::CITIES).to_string(),
            6 | 7 => self.own(pools::REGIONS).to_string(),
            _ => self.own(pools::COUNTRIES).to_string(),
        }
    }

    /// A city and its country as one mention (`Lyon, France`).
    pub fn city_country(&mut self) -> String {
        let country = self.country();
        let (city, region) = self.pick(country.cities);
        let name = self.pick(country.names);
        match country.code {
            "NORDIC" => format!("{city}, {region}"),
            "US" | "CA" | "AU" => format!("{city}, {region}"),
            _ => format!("{city}, {name}"),
        }
    }

    fn country(&mut self) -> &'static Country {
        let table = match self.split {
            Split::Tune => TUNE_COUNTRIES,
            // `Fresh` writes its own addresses (`address` defers); this serves `city_country` only.
            Split::Heldout | Split::Fresh | Split::Unseen => HELDOUT_COUNTRIES,
        };
        self.weighted(table)
    }

    fn house(&mut self) -> String {
        match self.below(4) {
            0 => format!("{}", self.below(9) + 1),
            1 => format!("{}", self.below(90) + 10),
            2 => format!("{}", self.below(900) + 100),
            _ => format!("{}", self.below(9000) + 1000),
        }
    }

    fn us_unit(&mut self) -> String {
        let n = self.below(1900) + 100;
        let letter = self.pick(&["A", "B", "C", "D", "F"]);
        match self.below(6) {
            0 => format!("Suite {n}"),
            1 => format!("Apt. {}{letter}", self.below(20) + 1),
            2 => format!("Apt {}", self.below(40) + 1),
            3 => format!("Unit {}", self.below(300) + 1),
            4 => format!("#{}", self.below(900) + 100),
            _ => format!("Ste {n}"),
        }
    }

    fn uk_postcode(&mut self) -> String {
        let area = self.pick(&[
            "SW", "NW", "E", "N", "M", "LS", "BS", "EH", "G", "CF", "BN", "OX", "YO",
        ]);
        let letters = b"ABDEFGHJLNPQRSTUWXYZ";
        let l1 = letters[self.below(letters.len())] as char;
        let l2 = letters[self.below(letters.len())] as char;
        format!("{area}{} {}{l1}{l2}", self.below(20) + 1, self.below(10))
    }

    fn ca_postcode(&mut self) -> String {
        let l = b"ABCEGHJKLMNPRSTVXY";
        let mut c = || l[self.below(l.len())] as char;
        let (a, b, d) = (c(), c(), c());
        format!(
            "{a}{}{b} {}{d}{}",
            self.below(10),
            self.below(10),
            self.below(10)
        )
    }

    /// A postal address in the split's mix of countries.
    pub fn address(&mut self) -> Address {
        if self.split == Split::Fresh {
            return super::fresh::address(self);
        }
        if self.chance(7) {
            return self.military();
        }
        let country = self.country();
        self.address_in(country)
    }

    /// A US address (the most common kind in the templates that need one).
    pub fn us_address(&mut self) -> Address {
        self.address_in(&pools::US)
    }

    /// An address of `country`, in that country's order and format.
    pub fn address_in(&mut self, country: &'static Country) -> Address {
        let (city, region) = self.pick(country.cities);
        let street = self.own(country.streets);
        let house = self.house();
        let country_name = self.pick(country.names);
        let with_country = self.chance(45);
        let mut lines: Vec<String> = Vec::new();
        match country.code {
            "US" => {
                if self.chance(8) {
                    lines.push(format!("Building {}", self.below(12) + 1));
                }
                let unit = self.chance(35).then(|| self.us_unit());
                match (unit, self.chance(50)) {
                    (Some(u), true) => lines.push(format!("{house} {street}, {u}")),
                    (Some(u), false) => {
                        lines.push(format!("{house} {street}"));
                        lines.push(u);
                    }
                    (None, _) => lines.push(format!("{house} {street}")),
                }
                let zip = if self.chance(20) {
                    format!("{:05}-{:04}", self.below(99_000) + 1000, self.below(10_000))
                } else {
                    format!("{:05}", self.below(99_000) + 1000)
                };
                lines.push(format!("{city}, {region} {zip}"));
            }
            "CA" => {
                let unit = self
                    .chance(40)
                    .then(|| format!("Suite {}", self.below(2000) + 100));
                match unit {
                    Some(u) => lines.push(format!("{house} {street}, {u}")),
                    None => lines.push(format!("{house} {street}")),
                }
                let pc = self.ca_postcode();
                lines.push(format!("{city}, {region} {pc}"));
            }
            "UK" | "IE" => {
                if self.chance(35) {
                    lines.push(format!("Flat {}", self.below(30) + 1));
                }
                lines.push(format!("{} {street}", self.below(200) + 1));
                lines.push(city.to_string());
                if country.code == "UK" {
                    lines.push(self.uk_postcode());
                } else {
                    let pc = format!("D{:02} {}", self.below(24) + 1, self.shape("A###"));
                    lines.push(pc);
                }
            }
            "DE" | "AT" => {
                let n = self.below(120) + 1;
                let suffix = if self.chance(15) { "a" } else { "" };
                lines.push(format!("{street} {n}{suffix}"));
                let pc = if country.code == "DE" {
                    format!("{:05}", self.below(89_000) + 10_000)
                } else {
                    format!("{}", self.below(8900) + 1010)
                };
                lines.push(format!("{pc} {city}"));
            }
            "FR" => {
                if self.chance(20) {
                    lines.push(format!(
                        "Bât. {}, {}e étage",
                        self.pick(&["A", "B", "C"]),
                        self.below(6) + 1
                    ));
                }
                let bis = if self.chance(15) { " bis" } else { "" };
                lines.push(format!("{}{bis} {street}", self.below(150) + 1));
                lines.push(format!("{:05} {city}", self.below(90_000) + 1000));
            }
            "ES" => {
                let floor = if self.chance(50) {
                    format!(
                        ", {}º {}",
                        self.below(8) + 1,
                        self.pick(&["izda.", "dcha.", "B"])
                    )
                } else {
                    String::new()
                };
                lines.push(format!("{street} {}{floor}", self.below(200) + 1));
                lines.push(format!("{:05} {city}", self.below(50_000) + 1000));
            }
            "IT" => {
                lines.push(format!("{street} {}", self.below(200) + 1));
                lines.push(format!("{:05} {city} {region}", self.below(90_000) + 100));
            }
            "NL" => {
                let add = if self.chance(30) {
                    format!("-{}", self.pick(&["1", "2", "3", "H", "A"]))
                } else {
                    String::new()
                };
                lines.push(format!("{street} {}{add}", self.below(400) + 1));
                let pc = self.shape("N### AA");
                lines.push(format!("{pc} {city}"));
            }
            "NORDIC" => {
                lines.push(format!("{street} {}", self.below(90) + 1));
                let pc = match region {
                    "Sweden" => self.shape("1## ##"),
                    "Finland" => self.shape("00##0"),
                    "Iceland" => self.shape("1#1"),
                    _ => self.shape("####"),
                };
                let suffix = if city == "København" { " K" } else { "" };
                lines.push(format!("{pc} {city}{suffix}"));
            }
            "PL" => {
                lines.push(format!(
                    "ul. {street} {}/{}",
                    self.below(120) + 1,
                    self.below(40) + 1
                ));
                lines.push(format!("{} {city}", self.shape("##-###")));
            }
            "HU" => {
                lines.push(format!("{street} {}.", self.below(90) + 1));
                lines.push(format!("{} {city}", self.shape("1###")));
            }
            "RU" => {
                let pc = self.shape("1#####");
                let (d, kv) = (self.below(60) + 1, self.below(200) + 1);
                if self.chance(50) {
                    lines.push(format!("{street}, д. {d}, кв. {kv}"));
                    lines.push(format!("{city} {pc}"));
                } else {
                    lines.push(format!("{pc}, {city}"));
                    lines.push(format!("{street}, д. {d}"));
                }
            }
            "JP" => {
                if self.chance(35) {
                    let (pref, district) = self.pick(pools::JP_NATIVE);
                    let pc = self.shape("###-####");
                    lines.push(format!(
                        "〒{pc} {pref}{district}{}-{}-{}",
                        self.below(5) + 1,
                        self.below(20) + 1,
                        self.below(30) + 1
                    ));
                } else {
                    lines.push(format!(
                        "{}-{}-{} {street}, {region}",
                        self.below(5) + 1,
                        self.below(20) + 1,
                        self.below(30) + 1
                    ));
                    lines.push(format!("{city} {}", self.shape("###-####")));
                }
            }
            "IN" => {
                if self.chance(50) {
                    lines.push(format!(
                        "Flat {}, {} {}",
                        self.below(900) + 101,
                        self.pick(&["Lotus", "Green Park", "Sai Krupa", "Prestige", "Shanti"]),
                        self.pick(&["Residency", "Apartments", "Towers", "Enclave"])
                    ));
                }
                lines.push(format!("{} {street}", self.below(200) + 1));
                lines.push(format!("{city}, {region} {}", self.shape("N#####")));
            }
            "AU" => {
                if self.chance(40) {
                    lines.push(format!("Unit {}, {house} {street}", self.below(40) + 1));
                } else {
                    lines.push(format!("{house} {street}"));
                }
                lines.push(format!("{city} {region} {}", self.shape("N###")));
            }
            "BR" => {
                lines.push(format!(
                    "{street}, {} - apto {}",
                    self.below(3000) + 1,
                    self.below(200) + 11
                ));
                lines.push(format!("{city} - {region}, {}", self.shape("#####-###")));
            }
            "TR" => {
                lines.push(format!(
                    "{street} No: {} D: {}",
                    self.below(150) + 1,
                    self.below(30) + 1
                ));
                lines.push(format!("{} {region}/{city}", self.shape("34###")));
            }
            _ => {
                lines.push(format!("{house} {street}"));
                lines.push(city.to_string());
            }
        }
        if with_country && country.code != "NORDIC" {
            lines.push(country_name.to_string());
        } else if with_country {
            lines.push(region.to_string());
        }
        Address {
            lines,
            city: city.to_string(),
        }
    }

    /// A US military or diplomatic address, or a ship's.
    pub fn military(&mut self) -> Address {
        let code = self.pick(&["AA", "AE", "AP"]);
        let zip = match code {
            "AA" => format!("340{:02}", self.below(99)),
            "AE" => format!("09{:03}", self.below(999)),
            _ => format!("96{:03}", self.below(999)),
        };
        let post = self.pick(&["APO", "FPO", "DPO"]);
        let mut lines = Vec::new();
        match self.below(4) {
            0 => lines.push(format!(
                "PSC {}, Box {}",
                self.below(9000) + 1000,
                self.below(9000) + 100
            )),
            1 => lines.push(format!(
                "Unit {} Box {}",
                self.below(9000) + 1000,
                self.below(9000) + 100
            )),
            2 => {
                lines.push(format!("CMR {}", self.below(900) + 400));
                lines.push(format!("Box {}", self.below(9000) + 100));
            }
            _ => {
                let ship = self.own(&[
                    "USS Nimitz (CVN 68)",
                    "USS Mason (DDG 87)",
                    "USS Bataan (LHD 5)",
                    "USS Gerald R. Ford (CVN 78)",
                    "USNS Mercy (T-AH 19)",
                    "USNS Comfort (T-AH 20)",
                    "USCGC Healy (WAGB 20)",
                    "USCGC Bertholf (WMSL 750)",
                    "USS Arleigh Burke (DDG 51)",
                    "USNS Big Horn (T-AO 198)",
                ]);
                lines.push(ship.to_string());
                let post = "FPO";
                lines.push(format!("{post} {code} {zip}"));
                return Address {
                    lines,
                    city: String::new(),
                };
            }
        }
        lines.push(format!("{post} {code} {zip}"));
        Address {
            lines,
            city: String::new(),
        }
    }

    /// A phone of a random class.
    pub fn phone(&mut self) -> String {
        let shapes = match self.split {
            Split::Tune => &TUNE_PHONES,
            Split::Heldout | Split::Unseen => &HELDOUT_PHONES,
            Split::Fresh => &super::fresh::PHONES,
        };
        let list = match self.below(12) {
            0..=2 => shapes.national,
            3 => shapes.invalid_plan,
            4 => shapes.intl_prefix,
            5 => shapes.extension,
            6 => shapes.local,
            _ => shapes.grouped,
        };
        let s = self.pick(list);
        self.shape(s)
    }

    /// A phone without an extension, for signature lines that put the extension elsewhere or none.
    pub fn phone_plain(&mut self) -> String {
        loop {
            let p = self.phone();
            if !p.contains('x') && !p.contains("ext") && !p.contains(" -") {
                return p;
            }
        }
    }

    /// A 7- or 8-digit local number.
    pub fn phone_local(&mut self) -> String {
        let shapes = match self.split {
            Split::Tune => &TUNE_PHONES,
            Split::Heldout | Split::Unseen => &HELDOUT_PHONES,
            Split::Fresh => &super::fresh::PHONES,
        };
        let s = self.pick(shapes.local);
        self.shape(s)
    }

    pub fn email(&mut self, p: &Person) -> String {
        if self.split == Split::Fresh {
            return super::fresh::email(self, p);
        }
        let given = Person::ascii(&p.given);
        let family = Person::ascii(&p.family);
        let (given, family) = match (given.is_empty(), family.is_empty()) {
            (true, _) | (_, true) => ("contact".to_string(), format!("{}", self.below(900) + 100)),
            _ => (given, family),
        };
        let domain = self.own(DOMAINS);
        let first = given.chars().next().unwrap_or('x');
        match self.below(5) {
            0 => format!("{given}.{family}@{domain}"),
            1 => format!("{first}{family}@{domain}"),
            2 => format!("{given}_{family}{}@{domain}", self.below(99)),
            3 => format!("{given}@{domain}"),
            _ => format!("{family}.{first}@{domain}"),
        }
    }

    pub fn card(&mut self) -> String {
        if self.split == Split::Fresh {
            return super::fresh::card(self);
        }
        let (prefix, len) = match (self.split, self.below(4)) {
            (_, 0) | (_, 1) => (format!("4{}", self.digits(1)), 16),
            (_, 2) => (format!("5{}", self.below(5) + 1), 16),
            (Split::Tune, _) => (self.pick(&["34", "37"]).to_string(), 15),
            (Split::Heldout | Split::Fresh | Split::Unseen, _) => {
                (self.pick(&["6011", "35"]).to_string(), 16)
            }
        };
        let mut digits: Vec<u8> = prefix.bytes().map(|b| b - b'0').collect();
        while digits.len() < len - 1 {
            digits.push(self.below(10) as u8);
        }
        let check = (0..10u8)
            .find(|c| {
                let mut all = digits.clone();
                all.push(*c);
                luhn(&all)
            })
            .unwrap_or(0);
        digits.push(check);
        let s: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sep = match self.split {
            Split::Tune => self.pick(&[" ", "-", ""]),
            Split::Heldout | Split::Fresh | Split::Unseen => self.pick(&[" ", "-", " ", ""]),
        };
        if len == 15 {
            format!("{}{sep}{}{sep}{}", &s[..4], &s[4..10], &s[10..])
        } else {
            format!(
                "{}{sep}{}{sep}{}{sep}{}",
                &s[..4],
                &s[4..8],
                &s[8..12],
                &s[12..]
            )
        }
    }

    pub fn iban(&mut self) -> String {
        if self.split == Split::Fresh {
            return super::fresh::iban(self);
        }
        let (cc, bban_shape) = match self.split {
            Split::Tune => self.pick(&[
                ("DE", "##################"),
                ("GB", "AAAA##############"),
                ("FR", "#######################"),
                ("NL", "AAAA##########"),
                ("ES", "####################"),
            ]),
            Split::Heldout | Split::Fresh | Split::Unseen => self.pick(&[
                ("IT", "A######################"),
                ("BE", "############"),
                ("CH", "#################"),
                ("AT", "################"),
                ("PL", "########################"),
                ("SE", "####################"),
                ("NO", "###########"),
            ]),
        };
        let bban = self.shape(bban_shape);
        let compact = iban_from(cc, &bban);
        if self.chance(50) {
            compact
        } else {
            compact
                .as_bytes()
                .chunks(4)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        }
    }

    pub fn ssn(&mut self) -> String {
        if self.split == Split::Fresh {
            return super::fresh::ssn(self);
        }
        let mut area = self.below(899) + 1;
        if area == 666 {
            area = 667;
        }
        let group = self.below(99) + 1;
        let serial = self.below(9999) + 1;
        match (self.split, self.below(4)) {
            (Split::Heldout, 0) => format!("{area:03} {group:02} {serial:04}"),
            _ => format!("{area:03}-{group:02}-{serial:04}"),
        }
    }

    pub fn ip(&mut self) -> String {
        if self.chance(match self.split {
            Split::Tune => 15,
            Split::Heldout | Split::Unseen => 25,
            Split::Fresh => return super::fresh::ip(self),
        }) {
            return format!(
                "2a0{}:{:x}:{:x}:{:x}::{:x}",
                self.below(9) + 1,
                self.below(0xffff),
                self.below(0xffff),
                self.below(0xffff),
                self.below(0xfff) + 1
            );
        }
        format!(
            "{}.{}.{}.{}",
            self.pick(&[
                "23", "45", "81", "104", "151", "172", "185", "203", "91", "62", "37"
            ]),
            self.below(256),
            self.below(256),
            self.below(254) + 1
        )
    }

    pub fn url(&mut self, p: &Person) -> String {
        if self.split == Split::Fresh {
            return super::fresh::url(self, p);
        }
        let slug = format!("{}-{}", Person::ascii(&p.given), Person::ascii(&p.family));
        match (self.split, self.below(3)) {
            (Split::Tune, 0) => format!("https://www.linkedin.com/in/{slug}"),
            (Split::Tune, 1) => format!("https://{}.github.io/", Person::ascii(&p.given)),
            (Split::Tune, _) => format!(
                "https://portal.example-clinic.com/patients/{}?view=full",
                self.digits(6)
            ),
            (Split::Heldout, 0) => format!("http://facebook.com/{slug}.{}", self.below(99)),
            (Split::Heldout, 1) => format!(
                "https://twitter.com/{}{}",
                Person::ascii(&p.family),
                self.below(999)
            ),
            (Split::Heldout | Split::Fresh | Split::Unseen, _) => format!(
                "https://crm.northwind.com/contacts/{}/profile",
                self.digits(7)
            ),
        }
    }

    pub fn api_key(&mut self) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut body = String::new();
        for _ in 0..36 {
            body.push(char::from(alphabet[self.below(alphabet.len())]));
        }
        // A digit in the body, as real keys have.
        body.replace_range(3..4, &format!("{}", self.below(10)));
        let prefix = match self.split {
            Split::Tune => self.pick(&["ghp_", "sk-proj-", "xoxb-1234-", "sk_live_"]),
            Split::Heldout | Split::Unseen => {
                self.pick(&["glpat-", "xoxp-", "AKIA", "sk-ant-api03-"])
            }
            Split::Fresh => return super::fresh::api_key(self),
        };
        if prefix == "AKIA" {
            let upper: String = body
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_uppercase())
                .take(16)
                .collect();
            return format!("AKIA{upper}");
        }
        format!("{prefix}{body}")
    }

    /// One of OPC's own ids: a web conversation, a Slack or Discord user or channel, an engine
    /// conversation. Never personal data.
    pub fn opc_id(&mut self) -> String {
        let hex16 = format!("{:016x}", self.below(usize::MAX));
        match self.below(5) {
            0 | 1 => format!("web:{hex16}"),
            2 => format!(
                "slack:{}{}",
                self.pick(&["U", "C", "W"]),
                self.shape("0##AAN#AA")
            ),
            3 => format!("discord:{}", self.shape("1#################")),
            _ => format!("c-{hex16}"),
        }
    }

    /// A date in one of the usual spellings.
    pub fn date(&mut self) -> String {
        let (y, m, d) = (2019 + self.below(7), self.below(12) + 1, self.below(28) + 1);
        let month = [
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ][m - 1];
        match self.below(5) {
            0 => format!("{y}-{m:02}-{d:02}"),
            1 => format!("{d:02}/{m:02}/{y}"),
            2 => format!("{month} {d}, {y}"),
            3 => format!("{d} {} {y}", &month[..3]),
            _ => format!("{m}/{d}/{}", y % 100),
        }
    }

    pub fn time(&mut self) -> String {
        match self.below(3) {
            0 => format!("{:02}:{:02}", self.below(24), self.below(60)),
            1 => format!(
                "{}:{:02} {}",
                self.below(12) + 1,
                self.below(60),
                self.pick(&["am", "pm", "AM", "PM"])
            ),
            _ => format!("{:02}:{:02} UTC", self.below(24), self.below(60)),
        }
    }

    pub fn amount(&mut self) -> String {
        match self.below(5) {
            0 => format!(
                "${},{:03}.{:02}",
                self.below(90) + 1,
                self.below(1000),
                self.below(100)
            ),
            1 => format!("€{}.{:02}", self.below(900) + 10, self.below(100)),
            2 => format!("£{}", self.below(5000) + 5),
            3 => format!("{} EUR", self.below(90_000) + 100),
            _ => format!("USD {}.{:02}", self.below(9000) + 1, self.below(100)),
        }
    }

    pub fn version(&mut self) -> String {
        match self.below(3) {
            0 => format!("v{}.{}.{}", self.below(5), self.below(30), self.below(20)),
            1 => format!(
                "{}.{}.{}",
                self.below(3) + 1,
                self.below(90),
                self.below(200)
            ),
            _ => format!("{}.{}", self.below(20) + 1, self.below(10)),
        }
    }

    /// An order, invoice, purchase-order or tracking number.
    pub fn order_no(&mut self) -> String {
        match self.below(6) {
            0 => format!("#{}", self.below(90_000) + 10_000),
            1 => format!("PO-{}-{:04}", 2020 + self.below(6), self.below(9999)),
            2 => format!("INV-{}-{:04}", 2020 + self.below(6), self.below(9999)),
            3 => format!("1Z{}", self.shape("###AA##########")),
            4 => format!("SO{}", self.digits(8)),
            _ => format!("{}-{}", self.shape("AA"), self.digits(6)),
        }
    }

    /// A ticket or incident id.
    pub fn ticket_id(&mut self) -> String {
        match self.below(3) {
            0 => format!("INC{:07}", self.below(9_999_999)),
            1 => format!(
                "{}-{}",
                self.pick(&["OPS", "CRM", "BILL", "INFRA", "HR", "SEC"]),
                self.below(9000) + 100
            ),
            _ => format!("#{}", self.below(900_000) + 100_000),
        }
    }

    /// Something that is not personal data: an OPC id, an order or ticket number, a date, a time, a
    /// version, an amount, a tracking or invoice number, a SKU, a size, a percentage.
    pub fn non_pii(&mut self) -> String {
        match self.below(12) {
            0 | 1 => self.opc_id(),
            2 => self.order_no(),
            3 => self.date(),
            4 => self.time(),
            5 => self.version(),
            6 => self.amount(),
            7 => self.ticket_id(),
            8 => format!("{} GB", self.below(500) + 1),
            9 => format!(
                "SKU {}-{}",
                self.shape("####"),
                self.pick(&["BLK", "RED", "M", "XL"])
            ),
            10 => format!("{}%", self.below(100)),
            _ => format!("room {}", self.below(900) + 100),
        }
    }
}

/// An IBAN of country `cc` with its check digits computed (mod 97) for `bban` (digits and capitals).
pub fn iban_from(cc: &str, bban: &str) -> String {
    let mut rem = 0u32;
    for b in format!("{bban}{cc}00").bytes() {
        rem = if b.is_ascii_digit() {
            (rem * 10 + u32::from(b - b'0')) % 97
        } else {
            (rem * 100 + u32::from(b - b'A' + 10)) % 97
        };
    }
    format!("{cc}{:02}{bban}", 98 - rem)
}

/// Whether `digits` pass the Luhn check (the last digit is the check digit).
pub fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                if d * 2 > 9 { d * 2 - 9 } else { d * 2 }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Credential-shaped values that are not credentials (digests, ids, commits) and generic secrets
/// with no vendor prefix, for the tuning split's API-key templates. Added for issue 38; the other
/// splits do not call these.
impl Gen {
    /// `n` lower-case hex digits (a digest or a commit id).
    pub fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16)]))
            .collect()
    }

    /// A random UUID (version 4 layout).
    pub fn uuid(&mut self) -> String {
        let variant = self.pick(&["8", "9", "a", "b"]);
        format!(
            "{}-{}-4{}-{variant}{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(3),
            self.hex(12)
        )
    }

    /// `n` characters of base64 (`+`, `/` included), as in a digest or an integrity hash.
    pub fn base64(&mut self, n: usize) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        (0..n)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }

    /// A generic secret with no vendor prefix: `n` letters of both cases and digits, at least one
    /// of each.
    pub fn secret_body(&mut self, n: usize) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut s: Vec<u8> = (0..n.max(3))
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect();
        s[0] = b'A' + self.below(26) as u8;
        s[1] = b'a' + self.below(26) as u8;
        s[2] = b'0' + self.below(10) as u8;
        String::from_utf8(s).unwrap_or_default()
    }

    /// An AWS access key id: `AKIA` and 16 capitals and digits.
    pub fn aws_key_id(&mut self) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let body: String = (0..16)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect();
        format!("AKIA{body}")
    }
}
