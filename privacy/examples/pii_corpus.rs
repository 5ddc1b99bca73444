//! A synthetic PII corpus for `opc privacy eval`: sentences with names, street addresses, phones,
//! cards, e-mails, IBANs, SSNs, IPs, URLs and API keys in realistic context, plus sentences with
//! numbers that are *not* personal data (dates, amounts, versions, order numbers, room numbers).
//!
//! ```text
//! cargo run -p opc-privacy --example pii_corpus -- [--seed N] [--count N] > corpus.jsonl
//! opc privacy eval corpus.jsonl
//! ```
//!
//! Output: one `{"text", "entities":[{"type","start","end"}]}` per line (code-point offsets, the
//! config's type names), the shape `opc privacy eval` reads. Values come from the `fake` crate (names,
//! streets, cities, e-mails) seeded by `--seed`, and from small generators for the checked kinds so
//! every card passes Luhn, every IBAN mod-97 and every phone libphonenumber.

use fake::Fake;
use fake::faker::address::en::{BuildingNumber, CityName, StateAbbr, StreetName};
use fake::faker::internet::en::{DomainSuffix, FreeEmailProvider};
use fake::faker::lorem::en::Word;
use fake::faker::name::en::{FirstName, LastName};
use fake::rand::SeedableRng;
use fake::rand::rngs::StdRng;

/// A sentence under construction: text plus gold spans (code points).
struct Sentence {
    text: String,
    spans: Vec<(&'static str, usize, usize)>,
}

impl Sentence {
    fn new() -> Self {
        Sentence {
            text: String::new(),
            spans: Vec::new(),
        }
    }
    fn lit(&mut self, s: &str) -> &mut Self {
        self.text.push_str(s);
        self
    }
    fn ent(&mut self, kind: &'static str, s: &str) -> &mut Self {
        let start = self.text.chars().count();
        self.text.push_str(s);
        self.spans.push((kind, start, start + s.chars().count()));
        self
    }
    fn json(&self) -> String {
        let entities: Vec<serde_json::Value> = self
            .spans
            .iter()
            .map(|(t, s, e)| serde_json::json!({"type": t, "start": s, "end": e}))
            .collect();
        serde_json::json!({"text": self.text, "entities": entities}).to_string()
    }
}

/// Small deterministic choices on top of the seeded rng.
struct Gen {
    rng: StdRng,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        (0..n).fake_with_rng(&mut self.rng)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b'0' + self.below(10) as u8))
            .collect()
    }
    fn first(&mut self) -> String {
        FirstName().fake_with_rng(&mut self.rng)
    }
    fn last(&mut self) -> String {
        LastName().fake_with_rng(&mut self.rng)
    }
    fn name(&mut self) -> String {
        format!("{} {}", self.first(), self.last())
    }
    fn email(&mut self, first: &str, last: &str) -> String {
        let clean = |s: &str| {
            s.chars()
                .filter(char::is_ascii_alphabetic)
                .collect::<String>()
                .to_lowercase()
        };
        let domain: String = if self.below(2) == 0 {
            FreeEmailProvider().fake_with_rng(&mut self.rng)
        } else {
            let w: String = Word().fake_with_rng(&mut self.rng);
            let suffix: String = DomainSuffix().fake_with_rng(&mut self.rng);
            format!("{w}{}.{suffix}", self.below(90) + 10)
        };
        match self.below(3) {
            0 => format!("{}.{}@{domain}", clean(first), clean(last)),
            1 => format!("{}{}@{domain}", &clean(first)[..1], clean(last)),
            _ => format!(
                "{}_{}{}@{domain}",
                clean(first),
                clean(last),
                self.below(99)
            ),
        }
    }
    fn street(&mut self) -> String {
        let number: String = BuildingNumber().fake_with_rng(&mut self.rng);
        // Half from fake's street names (a name and any USPS suffix), half with the everyday ones and
        // their abbreviations, which fake does not produce.
        let street: String = if self.below(2) == 0 {
            StreetName().fake_with_rng(&mut self.rng)
        } else {
            let name = if self.below(2) == 0 {
                self.last()
            } else {
                self.first()
            };
            let suffix = self.pick(&[
                "Street",
                "St",
                "Avenue",
                "Ave",
                "Road",
                "Rd",
                "Boulevard",
                "Blvd",
                "Lane",
                "Drive",
                "Court",
                "Way",
            ]);
            format!("{name} {suffix}")
        };
        let mut s = format!("{number} {street}");
        if self.below(3) == 0 {
            // fake's secondary addresses say "Suit." for Suite; write the usual forms.
            let kind = self.pick(&["Apt", "Apt.", "Suite", "Unit", "#"]);
            let sep = if kind == "#" { "" } else { " " };
            let letter = if self.below(3) == 0 {
                self.pick(&["A", "B", "C"])
            } else {
                ""
            };
            s.push_str(&format!(", {kind}{sep}{}{letter}", self.below(400) + 1));
        }
        s
    }
    fn full_address(&mut self) -> String {
        let street = self.street();
        let city: String = CityName().fake_with_rng(&mut self.rng);
        let state: String = StateAbbr().fake_with_rng(&mut self.rng);
        let zip = format!("{:05}", self.below(99_000) + 1_000);
        match self.below(3) {
            0 => street,
            1 => format!("{street}, {city}, {state} {zip}"),
            _ => format!("{street}, {city}, {state}"),
        }
    }
    fn phone(&mut self) -> String {
        let area = self.pick(&[
            "212", "415", "312", "646", "617", "206", "303", "512", "713", "305", "404", "702",
        ]);
        let exchange = format!("{}{}", self.below(8) + 2, self.digits(2));
        let line = self.digits(4);
        match self.below(7) {
            0 => format!("({area}) {exchange}-{line}"),
            1 => format!("{area}-{exchange}-{line}"),
            2 => format!("+1 {area} {exchange} {line}"),
            3 => format!("{area}.{exchange}.{line}"),
            4 => format!("+44 20 7946 0{}", self.digits(3)),
            5 => format!("+49 30 {}", self.digits(7).replacen('0', "1", 1)),
            _ => format!(
                "+33 1 {} {} {} {}",
                self.digits(2),
                self.digits(2),
                self.digits(2),
                self.digits(2)
            ),
        }
    }
    fn card(&mut self) -> String {
        let (prefix, len) = match self.below(3) {
            0 => ("4".to_string(), 16),
            1 => (format!("5{}", self.below(5) + 1), 16),
            _ => (self.pick(&["34", "37"]).to_string(), 15),
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
        let sep = self.pick(&[" ", "-", ""]);
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
    fn iban(&mut self) -> String {
        let (cc, bban) = match self.below(4) {
            0 => ("DE", self.digits(18)),
            1 => (
                "GB",
                format!(
                    "{}{}",
                    self.pick(&["NWBK", "BARC", "LOYD", "HBUK"]),
                    self.digits(14)
                ),
            ),
            2 => ("FR", self.digits(23)),
            _ => (
                "NL",
                format!(
                    "{}{}",
                    self.pick(&["ABNA", "INGB", "RABO"]),
                    self.digits(10)
                ),
            ),
        };
        let mut rem = 0u32;
        for b in format!("{bban}{cc}00").bytes() {
            rem = if b.is_ascii_digit() {
                (rem * 10 + u32::from(b - b'0')) % 97
            } else {
                (rem * 100 + u32::from(b - b'A' + 10)) % 97
            };
        }
        let check = 98 - rem;
        let compact = format!("{cc}{check:02}{bban}");
        if self.below(2) == 0 {
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
    fn ssn(&mut self) -> String {
        let mut area = self.below(899) + 1;
        if area == 666 {
            area = 667;
        }
        format!(
            "{area:03}-{:02}-{:04}",
            self.below(99) + 1,
            self.below(9999) + 1
        )
    }
    fn ip(&mut self) -> String {
        format!(
            "{}.{}.{}.{}",
            self.pick(&["23", "45", "81", "104", "151", "172", "185", "203"]),
            self.below(256),
            self.below(256),
            self.below(254) + 1
        )
    }
    fn url(&mut self) -> String {
        let w: String = Word().fake_with_rng(&mut self.rng);
        let suffix: String = DomainSuffix().fake_with_rng(&mut self.rng);
        let page: String = Word().fake_with_rng(&mut self.rng);
        format!(
            "https://www.{w}{}.{suffix}/{page}?id={}",
            self.below(90) + 10,
            self.digits(5)
        )
    }
    fn api_key(&mut self) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut body = String::new();
        for _ in 0..36 {
            body.push(char::from(alphabet[self.below(alphabet.len())]));
        }
        format!(
            "{}{body}",
            self.pick(&["ghp_", "sk-proj-", "xoxb-1234-", "sk_live_"])
        )
    }
}

fn luhn(digits: &[u8]) -> bool {
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

/// One sentence, from one of the templates.
fn sentence(g: &mut Gen) -> Sentence {
    let mut s = Sentence::new();
    let (first, last) = (g.first(), g.last());
    let full = format!("{first} {last}");
    match g.below(22) {
        0 => {
            s.lit("Hi, I'm ")
                .ent("PERSON_NAME", &full)
                .lit(". You can reach me at ");
            let p = g.phone();
            s.ent("PHONE", &p).lit(" or ");
            let e = g.email(&first, &last);
            s.ent("EMAIL", &e).lit(".");
        }
        1 => {
            s.lit("Please ship the order to ")
                .ent("PERSON_NAME", &full)
                .lit(", ");
            let a = g.full_address();
            s.ent("ADDRESS", &a).lit(".");
        }
        2 => {
            s.lit("My card number is ");
            let c = g.card();
            s.ent("CREDIT_CARD", &c)
                .lit(", expiry 09/27, name on card ")
                .ent("PERSON_NAME", &full)
                .lit(".");
        }
        3 => {
            s.lit("Wire the refund to IBAN ");
            let i = g.iban();
            s.ent("IBAN", &i)
                .lit(" (account holder: ")
                .ent("PERSON_NAME", &full)
                .lit(").");
        }
        4 => {
            s.ent("PERSON_NAME", &full).lit("'s SSN is ");
            let n = g.ssn();
            s.ent("SSN", &n).lit(", please update the HR record.");
        }
        5 => {
            s.lit("We saw logins for ")
                .ent("PERSON_NAME", &first)
                .lit(" from ");
            let ip = g.ip();
            s.ent("IP_ADDRESS", &ip).lit(" at 03:14 UTC.");
        }
        6 => {
            s.lit("Call ").ent("PERSON_NAME", &full).lit(" on ");
            let p = g.phone();
            s.ent("PHONE", &p).lit(" before Friday about the invoice.");
        }
        7 => {
            s.lit("The new office is at ");
            let a = g.full_address();
            s.ent("ADDRESS", &a)
                .lit("; parking is behind the building.");
        }
        8 => {
            s.lit("Forward the contract to ");
            let e = g.email(&first, &last);
            s.ent("EMAIL", &e).lit(" and cc legal.");
        }
        9 => {
            s.lit("Her profile is at ");
            let u = g.url();
            s.ent("URL", &u).lit(" if you need the photo.");
        }
        10 => {
            s.lit("Use the token ");
            let k = g.api_key();
            s.ent("API_KEY", &k)
                .lit(" for the staging deploy, then rotate it.");
        }
        11 => {
            s.lit("Charge ");
            let c = g.card();
            s.ent("CREDIT_CARD", &c)
                .lit(" for the $240.00 renewal and email the receipt to ");
            let e = g.email(&first, &last);
            s.ent("EMAIL", &e).lit(".");
        }
        12 => {
            s.ent("PERSON_NAME", &full).lit(" moved to ");
            let a = g.full_address();
            s.ent("ADDRESS", &a).lit(" last month; new number ");
            let p = g.phone();
            s.ent("PHONE", &p).lit(".");
        }
        13 => {
            s.lit("Meeting with ")
                .ent("PERSON_NAME", &full)
                .lit(" and ");
            let other = g.name();
            s.ent("PERSON_NAME", &other)
                .lit(" moved to 3pm on March 14, room 204.");
        }
        14 => {
            let n = g.below(90000) + 10000;
            s.lit(&format!(
                "Order #{n} shipped on 2024-03-15 for $129.99; tracking updates in 2 days."
            ));
        }
        15 => {
            s.lit(&format!(
                "Release 1.{}.{} fixes 37 bugs and cuts p99 latency from 840 ms to 210 ms.",
                g.below(9),
                g.below(20)
            ));
        }
        16 => {
            s.lit("The quarterly report shows revenue up 12% to $4.2 million across 18 regions.");
        }
        17 => {
            s.lit("Dear ")
                .ent("PERSON_NAME", &first)
                .lit(", your appointment is confirmed. Questions? Text ");
            let p = g.phone();
            s.ent("PHONE", &p).lit(".");
        }
        18 => {
            s.lit("Bank details for ")
                .ent("PERSON_NAME", &full)
                .lit(": ");
            let i = g.iban();
            s.ent("IBAN", &i).lit(", reference INV-2024-0032.");
        }
        19 => {
            s.lit("Server ");
            let ip = g.ip();
            s.ent("IP_ADDRESS", &ip)
                .lit(" returned 503 for 12 minutes; see ");
            let u = g.url();
            s.ent("URL", &u).lit(".");
        }
        20 => {
            s.lit("Send the keys to ")
                .ent("PERSON_NAME", &full)
                .lit(" at ");
            let a = g.street();
            s.ent("ADDRESS", &a).lit(", she is home after 6.");
        }
        _ => {
            s.lit("Thanks ")
                .ent("PERSON_NAME", &first)
                .lit(", the team will follow up within 3 business days.");
        }
    }
    s
}

/// `count` sentences from `seed`, as JSON lines.
pub fn generate(seed: u64, count: usize) -> Vec<String> {
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
    };
    (0..count).map(|_| sentence(&mut g).json()).collect()
}

#[allow(dead_code)]
fn main() {
    let mut seed = 7u64;
    let mut count = 1000usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (a.as_str(), value) {
            ("--seed", Some(v)) => seed = v,
            ("--count", Some(v)) => count = v as usize,
            _ => {
                eprintln!("usage: pii_corpus [--seed N] [--count N]");
                std::process::exit(2);
            }
        }
    }
    for line in generate(seed, count) {
        println!("{line}");
    }
}
