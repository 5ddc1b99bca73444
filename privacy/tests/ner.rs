//! The NER tier with the real model. Skips (one line) when the model is not in the cache; CI fetches it
//! (`opc models fetch`) so these run there.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::OnceLock;

use opc_privacy::detect::{NerModel, Rampart};
use opc_privacy::{Entity, EntityType};

fn model() -> Option<&'static Rampart> {
    static MODEL: OnceLock<Option<Rampart>> = OnceLock::new();
    MODEL
        .get_or_init(|| match Rampart::load_cached() {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("skipped: NER model not available ({e})");
                None
            }
        })
        .as_ref()
}

fn found<'a>(text: &'a str, entities: &[Entity], kind: EntityType) -> Vec<&'a str> {
    entities
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| &text[e.start..e.end])
        .collect()
}

#[test]
fn finds_names_and_addresses_in_sentences() {
    let Some(model) = model() else { return };
    let text =
        "My name is Dan Tailor and I live at 1600 Pennsylvania Avenue NW, Washington, DC 20500.";
    let e = model.entities(text);
    assert_eq!(
        found(text, &e, EntityType::PersonName),
        vec!["Dan Tailor"],
        "{e:?}"
    );
    let addresses = found(text, &e, EntityType::Address);
    assert_eq!(addresses.len(), 1, "{e:?}");
    assert!(
        addresses[0].starts_with("1600 Pennsylvania Avenue"),
        "{addresses:?}"
    );
    assert!(addresses[0].ends_with("20500"), "{addresses:?}");
    for entity in &e {
        assert!((0.0..=1.0).contains(&entity.score));
        assert!(entity.score > 0.85, "{entity:?}");
    }

    let text = "Please forward the contract to Maria Gonzalez before Friday.";
    assert_eq!(
        found(text, &model.entities(text), EntityType::PersonName),
        vec!["Maria Gonzalez"]
    );

    let text = "The quarterly report is due on Friday; please review the numbers.";
    assert!(
        model.entities(text).iter().all(|e| e.score < 0.85),
        "{:?}",
        model.entities(text)
    );
}

#[test]
fn offsets_are_bytes_of_the_input_on_non_ascii_text() {
    let Some(model) = model() else { return };
    let text = "Привет! Zoë Müller-Lüdenscheidt 🙂 wohnt in der Hauptstraße 5, 10115 Berlin.";
    let e = model.entities(text);
    for entity in &e {
        assert!(
            text.is_char_boundary(entity.start) && text.is_char_boundary(entity.end),
            "{entity:?}"
        );
    }
    let names = found(text, &e, EntityType::PersonName);
    assert_eq!(names, vec!["Zoë Müller-Lüdenscheidt"], "{e:?}");
    let addresses = found(text, &e, EntityType::Address);
    assert!(
        addresses.iter().any(|a| a.contains("Hauptstraße 5")),
        "{addresses:?}"
    );
}

#[test]
fn long_texts_are_read_in_windows_without_losing_entities() {
    let Some(model) = model() else { return };
    let filler = "The team reviewed the roadmap, discussed the budget and agreed on next steps. ";
    let mut text = String::new();
    let mut names = Vec::new();
    for (i, name) in [
        "John Oliver",
        "Maria Gonzalez",
        "Dan Tailor",
        "Sarah Connor",
        "Peter Parker",
    ]
    .iter()
    .enumerate()
    {
        for _ in 0..12 {
            text.push_str(filler);
        }
        text.push_str(&format!("Meeting {i} was led by {name}. "));
        names.push(*name);
    }
    assert!(text.len() > 4_000, "{} bytes", text.len());
    let e = model.entities(&text);
    let got = found(&text, &e, EntityType::PersonName);
    assert_eq!(got, names, "{e:?}");
    // Sorted, non-overlapping, inside the text.
    for pair in e.windows(2) {
        assert!(pair[0].end <= pair[1].start, "{e:?}");
    }
}

#[test]
fn empty_and_whitespace_texts_find_nothing() {
    let Some(model) = model() else { return };
    assert!(model.entities("").is_empty());
    assert!(model.entities("   \n\t ").is_empty());
}

/// Texts run through the model together (`opc privacy detect` and `eval` do) get the same spans as
/// one at a time: padding is masked, each text's windows are put back in order, and a text longer
/// than one window is still cut and joined as alone.
#[test]
fn a_batch_finds_what_each_text_finds_alone() {
    let Some(model) = model() else { return };
    let long = "The quarterly numbers are in and the board wants a summary soon. ".repeat(40)
        + "Send it to Ingeborg Larsen at 42 Harbour Road, Portland, ME 04101 when ready.";
    let texts = [
        "Please forward the contract to Maria Gonzalez before Friday.",
        "",
        "ok",
        long.as_str(),
        "My name is Dan Tailor and I live at 1600 Pennsylvania Avenue NW, Washington, DC 20500.",
        "Ping Zoë Müller 🎉 about the offsite, she is at 17 Rue de la Paix.",
        "Nothing personal here at all.",
    ];
    let batch = model.entities_batch(&texts);
    assert_eq!(batch.len(), texts.len());
    for (text, together) in texts.iter().zip(&batch) {
        let alone = model.entities(text);
        let key = |e: &[Entity]| -> Vec<(EntityType, usize, usize)> {
            e.iter().map(|e| (e.kind, e.start, e.end)).collect()
        };
        assert_eq!(key(together), key(&alone), "{text:?}");
        for (a, b) in together.iter().zip(&alone) {
            assert!((a.score - b.score).abs() < 1e-3, "{a:?} {b:?}");
        }
    }
    // The long text's name, past its first window, is found in the batch too.
    assert!(
        found(&long, &batch[3], EntityType::PersonName).contains(&"Ingeborg Larsen"),
        "{:?}",
        batch[3]
    );
}
