//! Fakes made for the real values of Microsoft Presidio's recognizer cases
//! (`../shared/data/pii/presidio_recognizer_cases_core.jsonl`, or `$OPC_SHARED_DATA/pii/…`) keep their
//! type: cards pass Luhn, IBANs pass mod-97 with the same country and length, IPs are in the
//! documentation ranges, phones keep their separators and country code, SSNs are valid-looking, e-mails
//! and URLs use reserved domains, names keep their word count. Skips with one line when the data is
//! absent (a fresh clone has no ../shared).
#![allow(clippy::unwrap_used)]

use std::net::IpAddr;
use std::path::PathBuf;

use opc_privacy::{EntityType, Style, Vault};

fn data_path() -> PathBuf {
    let shared = std::env::var_os("OPC_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data"))
        });
    shared.join("pii/presidio_recognizer_cases_core.jsonl")
}

fn shape(s: &str) -> Vec<(usize, char)> {
    s.char_indices()
        .filter(|(_, c)| !c.is_ascii_alphanumeric())
        .collect()
}

fn digits(s: &str) -> Vec<u32> {
    s.chars().filter_map(|c| c.to_digit(10)).collect()
}

fn luhn(s: &str) -> bool {
    let d = digits(s);
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &x)| {
            if i % 2 == 1 {
                if x * 2 > 9 { x * 2 - 9 } else { x * 2 }
            } else {
                x
            }
        })
        .sum();
    d.len() > 1 && sum.is_multiple_of(10)
}

fn mod97(iban: &str) -> u32 {
    let compact: String = iban.chars().filter(char::is_ascii_alphanumeric).collect();
    let rearranged = format!("{}{}", &compact[4..], &compact[..4]);
    rearranged.chars().fold(0, |rem, c| {
        let v = c.to_digit(36).unwrap();
        if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        }
    })
}

#[test]
fn fakes_for_presidio_values_keep_their_type() {
    let path = data_path();
    let read = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (set OPC_SHARED_DATA to the shared data dir)",
            path.display()
        )
    });
    let Some(data) = opc_testgate::need(
        opc_testgate::Group::SharedData,
        "fakes_for_presidio_values_keep_their_type",
        read,
    ) else {
        return;
    };
    let mut vault = Vault::new(2026, Style::Fake, 10_000);
    let mut checked = 0;
    for line in data.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        for e in record["entities"].as_array().into_iter().flatten() {
            let Some(real) = e["value"].as_str() else {
                continue;
            };
            let kind = match e["type"].as_str().unwrap_or_default() {
                "CREDIT_CARD" if luhn(real) => EntityType::CreditCard,
                "IBAN_CODE" if mod97(real) == 1 => EntityType::Iban,
                "IP_ADDRESS" => EntityType::IpAddress,
                "PHONE_NUMBER" => EntityType::Phone,
                "US_SSN" => EntityType::Ssn,
                "URL" => EntityType::Url,
                "EMAIL_ADDRESS" => EntityType::Email,
                "PERSON" => EntityType::PersonName,
                _ => continue,
            };
            let fake = vault.substitute(real, kind).unwrap();
            assert_ne!(fake, real);
            let ctx = format!("{kind}: {real:?} → {fake:?}");
            match kind {
                EntityType::CreditCard => {
                    assert!(luhn(&fake), "{ctx}");
                    assert_eq!(shape(&fake), shape(real), "{ctx}");
                }
                EntityType::Iban => {
                    assert_eq!(mod97(&fake), 1, "{ctx}");
                    assert_eq!(fake.len(), real.len(), "{ctx}");
                    assert_eq!(fake[..2], real[..2], "{ctx}");
                    assert_eq!(shape(&fake), shape(real), "{ctx}");
                }
                EntityType::IpAddress => {
                    match fake[..fake.find(['/', '%']).unwrap_or(fake.len())]
                        .parse::<IpAddr>()
                        .unwrap()
                    {
                        IpAddr::V4(ip) => {
                            let o = ip.octets();
                            let doc = [[192, 0, 2], [198, 51, 100], [203, 0, 113]];
                            assert!(doc.contains(&[o[0], o[1], o[2]]), "{ctx}");
                        }
                        IpAddr::V6(ip) => {
                            assert_eq!(&ip.segments()[..2], &[0x2001, 0x0db8], "{ctx}")
                        }
                    }
                    if let Some(i) = real.find(['/', '%']) {
                        assert!(fake.ends_with(&real[i..]), "{ctx}");
                    }
                }
                EntityType::Phone => {
                    assert_eq!(shape(&fake), shape(real), "{ctx}");
                    if let Some(rest) = real.strip_prefix('+') {
                        assert_eq!(fake[..2], format!("+{}", &rest[..1]), "{ctx}");
                    }
                }
                EntityType::Ssn => {
                    assert_eq!(shape(&fake), shape(real), "{ctx}");
                    let d = digits(&fake);
                    let area = d[0] * 100 + d[1] * 10 + d[2];
                    assert!(area != 0 && area != 666 && area < 900, "{ctx}");
                }
                EntityType::Url => {
                    assert!(fake.contains(".example."), "{ctx}");
                    if let Some((scheme, _)) = real.split_once("://") {
                        assert!(fake.starts_with(&format!("{scheme}://")), "{ctx}");
                    }
                }
                EntityType::Email => {
                    let (local, domain) = fake.split_once('@').unwrap();
                    assert!(!local.is_empty() && domain.starts_with("example."), "{ctx}");
                }
                _ => assert_eq!(fake.split(' ').count(), real.split(' ').count(), "{ctx}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 250, "only {checked} values checked");
    println!("{checked} fakes checked");
}

/// Places and names in other scripts through the vault: one fake per real value for the whole
/// conversation, never two reals on one fake, the script kept, and the reply restored.
#[test]
fn locations_and_scripts_are_consistent_and_restore() {
    let mut vault = Vault::new(7, Style::Fake, 1_000);
    let reals = [
        ("Tromsø", EntityType::Location),
        ("Reykjavík", EntityType::Location),
        ("Norway", EntityType::Location),
        ("Москва", EntityType::Location),
        ("Иван Петров", EntityType::PersonName),
        ("王小明", EntityType::PersonName),
        ("Nguyễn Thị Minh Khai", EntityType::PersonName),
        ("john smith", EntityType::PersonName),
    ];
    let fakes: Vec<String> = reals
        .iter()
        .map(|(real, kind)| vault.substitute(real, *kind).unwrap())
        .collect();
    for ((real, kind), fake) in reals.iter().zip(&fakes) {
        assert_ne!(fake, real);
        assert_eq!(&vault.substitute(real, *kind).unwrap(), fake, "stable");
        let cyrillic = |s: &str| s.chars().any(|c| ('\u{0400}'..='\u{04FF}').contains(&c));
        assert_eq!(cyrillic(fake), cyrillic(real), "{real} → {fake}");
        let han = |s: &str| s.chars().any(|c| ('\u{4E00}'..='\u{9FFF}').contains(&c));
        assert_eq!(han(fake), han(real), "{real} → {fake}");
    }
    let mut unique = fakes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), fakes.len(), "{fakes:?}");
    assert_eq!(fakes[7], fakes[7].to_lowercase());
    let reply = format!("{} will fly from {} to {}.", fakes[4], fakes[0], fakes[2]);
    assert_eq!(
        vault.restore(&reply),
        "Иван Петров will fly from Tromsø to Norway."
    );
}
