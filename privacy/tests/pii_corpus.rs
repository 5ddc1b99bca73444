//! The generated corpus (`examples/pii_corpus.rs`) keeps its promises: offsets line up with the text,
//! each split is a pure function of its seed, the tuning split shares no template, no phrasing and no
//! person's name with the held-out split nor with the blind `fresh` and `unseen` splits, every split
//! covers every labelled type and document kind, and the structured values pass their checksums.

use std::collections::{BTreeMap, BTreeSet};

use opc_privacy::detect::eval;

#[allow(dead_code)]
#[path = "../examples/pii_corpus.rs"]
mod corpus;

use corpus::doc::Doc;
use corpus::values::Split;

const COUNT: usize = 2_000;

const SPLITS: [Split; 4] = [Split::Tune, Split::Heldout, Split::Fresh, Split::Unseen];

fn docs(split: Split, seed: u64) -> Vec<Doc> {
    corpus::documents(split, seed, COUNT)
}

#[test]
fn spans_line_up_with_the_text() {
    for split in SPLITS {
        for d in docs(split, 11) {
            let chars: Vec<char> = d.text.chars().collect();
            let mut last_end = 0;
            for s in &d.spans {
                assert!(
                    s.start < s.end && s.end <= chars.len(),
                    "{}: {s:?}",
                    d.template
                );
                assert!(s.start >= last_end, "{}: overlapping spans", d.template);
                last_end = s.end;
                let value: String = chars[s.start..s.end].iter().collect();
                assert_eq!(value.trim(), value, "{}: span with outer space", d.template);
                assert!(
                    !value.ends_with(',') && !value.ends_with(':'),
                    "{}: punctuation in {value:?}",
                    d.template
                );
            }
            // What `opc privacy eval` reads back: the same values, by byte offsets.
            let line = d.json();
            let case = eval::parse_case(&line)
                .expect("parses")
                .expect("a case of known shape");
            assert_eq!(case.text, d.text);
            // Types this build detects land in `gold`, the others (LOCATION until it is detected) in
            // `unknown`; together they are the document's spans.
            let mut read: Vec<(&str, usize, usize)> = case
                .gold
                .iter()
                .map(|g| (g.kind.as_str(), g.start, g.end))
                .chain(
                    case.unknown
                        .iter()
                        .map(|u| (u.kind.as_str(), u.start, u.end)),
                )
                .collect();
            read.sort_by_key(|r| r.1);
            assert_eq!(read.len(), d.spans.len(), "{line}");
            for ((kind, start, end), s) in read.iter().zip(&d.spans) {
                let value: String = chars[s.start..s.end].iter().collect();
                assert_eq!(&d.text[*start..*end], value);
                assert_eq!(*kind, s.kind);
            }
        }
    }
}

#[test]
fn each_split_is_a_function_of_its_seed() {
    for split in SPLITS {
        let a: Vec<String> = docs(split, 3).iter().map(Doc::json).collect();
        let b: Vec<String> = docs(split, 3).iter().map(Doc::json).collect();
        let c: Vec<String> = docs(split, 4).iter().map(Doc::json).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
    // The same seed gives unrelated splits.
    let texts =
        |split| -> BTreeSet<String> { docs(split, 3).iter().map(|d| d.text.clone()).collect() };
    let (t, h, f, u) = (
        texts(Split::Tune),
        texts(Split::Heldout),
        texts(Split::Fresh),
        texts(Split::Unseen),
    );
    assert!(t.is_disjoint(&h));
    assert!(t.is_disjoint(&f));
    assert!(h.is_disjoint(&f));
    assert!(u.is_disjoint(&t));
    assert!(u.is_disjoint(&h));
    assert!(u.is_disjoint(&f));
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Every run of four words inside one literal fragment of the split's templates.
fn shingles(split: Split) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for d in docs(split, 5) {
        for lit in &d.literals {
            let w = words(lit);
            for run in w.windows(4) {
                out.insert(run.join(" "), d.template.clone());
            }
        }
    }
    out
}

#[test]
fn splits_share_no_template_or_phrasing() {
    let ids = |split| -> BTreeSet<String> {
        corpus::templates(split)
            .iter()
            .map(|(id, _, _)| id.to_string())
            .collect()
    };
    let all: Vec<(Split, BTreeSet<String>, BTreeMap<String, String>)> =
        SPLITS.iter().map(|&s| (s, ids(s), shingles(s))).collect();
    for (split, _, sh) in &all {
        assert!(sh.len() > 120, "{split:?}: {}", sh.len());
    }
    // Every pair: the fresh and unseen splits were written without reading the others, so each must
    // differ from all of them, and above all from the tuning split the detector was fitted to.
    // Every pair is checked before failing, so one message names every clash.
    let mut shared: Vec<String> = Vec::new();
    for (i, (a, a_ids, a_sh)) in all.iter().enumerate() {
        for (b, b_ids, b_sh) in &all[i + 1..] {
            assert!(
                a_ids.is_disjoint(b_ids),
                "{a:?} / {b:?}: shared template id"
            );
            shared.extend(
                a_sh.iter()
                    .filter(|(k, _)| b_sh.contains_key(*k))
                    .map(|(k, tpl)| format!("{a:?} / {b:?}: {k:?} ({tpl} / {})", b_sh[k])),
            );
        }
    }
    assert!(shared.is_empty(), "shared phrasing: {shared:#?}");
}

/// No name (given, family, or the two together) appears in both splits.
#[test]
fn splits_share_no_name() {
    let names = |split| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for d in docs(split, 9) {
            let chars: Vec<char> = d.text.chars().collect();
            for s in d.spans.iter().filter(|s| s.kind == "PERSON_NAME") {
                let v: String = chars[s.start..s.end].iter().collect();
                // Whole names: single words are shared by design (particles such as `de`, words of
                // Vietnamese given names).
                out.insert(v.to_lowercase());
            }
        }
        out
    };
    let t = names(Split::Tune);
    assert!(t.len() > 300, "{}", t.len());
    for other in [Split::Heldout, Split::Fresh, Split::Unseen] {
        let h = names(other);
        assert!(h.len() > 300, "{other:?}: {}", h.len());
        let shared: Vec<&String> = t.intersection(&h).collect();
        assert!(shared.is_empty(), "names in tune and {other:?}: {shared:?}");
    }
}

/// The blind splits draw from their own lists and the held-out half of the shared ones: no name,
/// place, e-mail, URL or address of the tuning split shows up in them.
#[test]
fn blind_splits_share_no_value_with_tune() {
    let values = |split| -> BTreeSet<(&'static str, String)> {
        let mut out = BTreeSet::new();
        for d in docs(split, 21) {
            let chars: Vec<char> = d.text.chars().collect();
            for s in &d.spans {
                if matches!(
                    s.kind,
                    "PERSON_NAME" | "LOCATION" | "EMAIL" | "URL" | "ADDRESS"
                ) {
                    let v: String = chars[s.start..s.end].iter().collect();
                    out.insert((s.kind, v.to_lowercase()));
                }
            }
        }
        out
    };
    let t = values(Split::Tune);
    for blind in [Split::Fresh, Split::Unseen] {
        let f = values(blind);
        assert!(f.len() > 1_000, "{blind:?}: {}", f.len());
        let shared: Vec<_> = t.intersection(&f).collect();
        assert!(
            shared.is_empty(),
            "values in tune and {blind:?}: {shared:?}"
        );
    }
}

/// The `unseen` split's shapes are its own: no e-mail domain, API-key prefix, IBAN country or card
/// brand prefix of the tuning split shows up in it (phones are left out: a random area code can
/// match by chance, and a shared country code is not a shared shape).
#[test]
fn unseen_shares_no_shape_with_tune() {
    fn key_prefix(v: &str) -> String {
        match v.find(['_', '-', '.']) {
            Some(i) if i <= 10 => v[..=i].to_string(),
            _ => v.chars().take(4).collect(),
        }
    }
    let shapes = |split| -> BTreeSet<(&'static str, String)> {
        let mut out = BTreeSet::new();
        for d in docs(split, 23) {
            let chars: Vec<char> = d.text.chars().collect();
            for s in &d.spans {
                let v: String = chars[s.start..s.end].iter().collect();
                let shape = match s.kind {
                    "EMAIL" => v.rsplit('@').next().unwrap_or("").to_lowercase(),
                    "API_KEY" => key_prefix(&v),
                    "IBAN" => v.chars().take(2).collect(),
                    "CREDIT_CARD" => v.chars().filter(char::is_ascii_digit).take(2).collect(),
                    _ => continue,
                };
                out.insert((s.kind, shape));
            }
        }
        out
    };
    let (t, u) = (shapes(Split::Tune), shapes(Split::Unseen));
    for kind in ["EMAIL", "API_KEY", "IBAN", "CREDIT_CARD"] {
        assert!(u.iter().any(|(k, _)| *k == kind), "unseen has no {kind}");
    }
    let shared: Vec<_> = t.intersection(&u).collect();
    assert!(shared.is_empty(), "shapes in tune and unseen: {shared:?}");
}

#[test]
fn every_split_covers_every_type_and_kind() {
    let types = [
        "PERSON_NAME",
        "ADDRESS",
        "LOCATION",
        "PHONE",
        "EMAIL",
        "CREDIT_CARD",
        "IBAN",
        "SSN",
        "IP_ADDRESS",
        "URL",
        "API_KEY",
    ];
    for split in SPLITS {
        let all = docs(split, 13);
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for d in &all {
            for s in &d.spans {
                *count.entry(s.kind).or_default() += 1;
            }
        }
        for t in types {
            assert!(
                count.get(t).copied().unwrap_or(0) >= 20,
                "{split:?}: {t} {count:?}"
            );
        }
        let negatives = all.iter().filter(|d| d.spans.is_empty()).count();
        assert!(negatives >= COUNT / 20, "{split:?}: {negatives} negatives");
        let multiline_addresses = all
            .iter()
            .filter(|d| {
                let chars: Vec<char> = d.text.chars().collect();
                d.spans
                    .iter()
                    .any(|s| s.kind == "ADDRESS" && chars[s.start..s.end].contains(&'\n'))
            })
            .count();
        assert!(
            multiline_addresses >= 50,
            "{split:?}: {multiline_addresses}"
        );
        let text: String = all.iter().map(|d| d.text.as_str()).collect();
        for needle in ["APO", "FPO", "ул.", "〒", "web:", "slack:U", "ext", "011"] {
            assert!(text.contains(needle), "{split:?} has no {needle:?}");
        }
        let used: BTreeSet<&str> = all.iter().map(|d| d.template.as_str()).collect();
        assert_eq!(
            used.len(),
            corpus::templates(split).len(),
            "{split:?}: a template never used"
        );
    }
}

fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match (i % 2, d * 2) {
            (1, x) if x > 9 => x - 9,
            (1, x) => x,
            _ => d,
        })
        .sum();
    sum.is_multiple_of(10)
}

fn mod97(iban: &str) -> bool {
    let s: String = iban.chars().filter(|c| !c.is_whitespace()).collect();
    let rotated = format!("{}{}", &s[4..], &s[..4]);
    let mut rem = 0u32;
    for c in rotated.chars() {
        rem = match c.to_digit(36) {
            Some(v) if v >= 10 => (rem * 100 + v) % 97,
            Some(v) => (rem * 10 + v) % 97,
            None => return false,
        };
    }
    rem == 1
}

#[test]
fn structured_values_are_valid() {
    for split in SPLITS {
        for d in docs(split, 17) {
            let chars: Vec<char> = d.text.chars().collect();
            for s in &d.spans {
                let v: String = chars[s.start..s.end].iter().collect();
                match s.kind {
                    "CREDIT_CARD" => {
                        let digits: Vec<u32> = v.chars().filter_map(|c| c.to_digit(10)).collect();
                        assert!(luhn(&digits), "{v}");
                    }
                    "IBAN" => assert!(mod97(&v), "{v}"),
                    "SSN" => {
                        let area: u32 = v[..3].parse().expect("digits");
                        assert!(area != 0 && area != 666 && area < 900, "{v}");
                    }
                    _ => {}
                }
            }
        }
    }
}
