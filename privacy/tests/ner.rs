//! The NER tier with the real model. Without the model in the cache each test skips with one line on
//! a developer's machine and fails under CI (`opc-testgate`); CI fetches it (`opc models fetch`).

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::OnceLock;

use opc_privacy::detect::{NerModel, Rampart};
use opc_privacy::{Entity, EntityType};
use opc_testgate::Group;

/// The cached model, loaded once for every test, through `test`'s gate (`None`: skipped).
fn model(test: &str) -> Option<&'static Rampart> {
    static MODEL: OnceLock<Result<Rampart, String>> = OnceLock::new();
    let loaded = MODEL.get_or_init(|| {
        Rampart::load_cached().map_err(|e| format!("NER model not available ({e})"))
    });
    opc_testgate::need(Group::Ner, test, loaded.as_ref())
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
    let Some(model) = model("finds_names_and_addresses_in_sentences") else {
        return;
    };
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
    let Some(model) = model("offsets_are_bytes_of_the_input_on_non_ascii_text") else {
        return;
    };
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
    let Some(model) = model("long_texts_are_read_in_windows_without_losing_entities") else {
        return;
    };
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
    let Some(model) = model("empty_and_whitespace_texts_find_nothing") else {
        return;
    };
    assert!(model.entities("").is_empty());
    assert!(model.entities("   \n\t ").is_empty());
}

/// Texts run through the model together (`opc privacy detect` and `eval` do) get the same spans as
/// one at a time: padding is masked, each text's windows are put back in order, and a text longer
/// than one window is still cut and joined as alone.
#[test]
fn a_batch_finds_what_each_text_finds_alone() {
    let Some(model) = model("a_batch_finds_what_each_text_finds_alone") else {
        return;
    };
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

/// A name found in a short text is found, with the same span, deep inside a ~3,000-word text of many
/// sentences: windowing and batching keep what a text alone finds, wherever the window edges fall.
#[test]
fn a_name_deep_in_a_long_text_is_found_as_in_a_short_one() {
    let Some(model) = model("a_name_deep_in_a_long_text_is_found_as_in_a_short_one") else {
        return;
    };
    let sentence = "Please send the signed contract to Marta K. Lindqvist before the board meets.";
    let alone = model.entities(sentence);
    let name = found(sentence, &alone, EntityType::PersonName);
    assert_eq!(name, vec!["Marta K. Lindqvist"], "{alone:?}");
    let fillers = [
        "The quarterly numbers came in slightly above the forecast for the second time this year. ",
        "We agreed to revisit the hiring plan once the budget for the next quarter is approved. ",
        "Several customers asked for better export options, so the roadmap now includes them. ",
        "The migration to the new build system took longer than planned but is finally done. ",
    ];
    // Put the sentence at many depths, so that it lands on window edges and in overlaps.
    for depth in [40, 255, 301, 777] {
        let mut text = String::new();
        let mut words = 0;
        let mut i = 0;
        while words < depth {
            let f = fillers[i % fillers.len()];
            text.push_str(f);
            words += f.split_whitespace().count();
            i += 1;
        }
        let at = text.len();
        text.push_str(sentence);
        text.push(' ');
        while words < 3_000 {
            let f = fillers[i % fillers.len()];
            text.push_str(f);
            words += f.split_whitespace().count();
            i += 1;
        }
        let e = model.entities(&text);
        let names: Vec<(usize, usize)> = e
            .iter()
            .filter(|e| e.kind == EntityType::PersonName)
            .map(|e| (e.start, e.end))
            .collect();
        let want: Vec<(usize, usize)> = alone
            .iter()
            .filter(|e| e.kind == EntityType::PersonName)
            .map(|e| (e.start + at, e.end + at))
            .collect();
        assert_eq!(names, want, "depth {depth}: {e:?}");
        // The same text in a batch with short ones.
        let batch = model.entities_batch(&[sentence, text.as_str(), "ok"]);
        assert_eq!(batch[1], e, "depth {depth}");
    }
}

/// Names the model reads faintly or not at all: after a cue, after a title, heading a chat line, in
/// lower case, from many cultures and scripts.
#[test]
fn names_of_many_shapes_and_cultures() {
    let Some(model) = model("names_of_many_shapes_and_cultures") else {
        return;
    };
    let cases: &[(&str, &[&str])] = &[
        (
            "Prof. Marta K. Lindqvist will chair.",
            &["Marta K. Lindqvist"],
        ),
        ("The draft was reviewed by Okonkwo yesterday.", &["Okonkwo"]),
        ("Mr. Nakamura called twice.", &["Nakamura"]),
        ("thanks, Ingrid", &["Ingrid"]),
        ("ravi: \"are you coming?\"", &["ravi"]),
        ("hey john smith, can you call me back", &["john smith"]),
        (
            "Meet Nguyễn Thị Minh Khai at noon.",
            &["Nguyễn Thị Minh Khai"],
        ),
        (
            "Søren Kierkegaard Jørgensen joined the call.",
            &["Søren Kierkegaard Jørgensen"],
        ),
        ("Please ask 王小明 about the invoice.", &["王小明"]),
        ("Иван Петров will send it.", &["Иван Петров"]),
        (
            "I spoke with Ayşe Yılmaz and Dmitri Ivanov.",
            &["Ayşe Yılmaz", "Dmitri Ivanov"],
        ),
        ("Priya Ramanathan owns the release.", &["Priya Ramanathan"]),
        ("cc Mehmet", &["Mehmet"]),
    ];
    let mut missed = Vec::new();
    for (text, want) in cases {
        let e = model.entities(text);
        let got: Vec<&str> = e
            .iter()
            .filter(|e| e.kind == EntityType::PersonName && e.score >= 0.85)
            .map(|e| &text[e.start..e.end])
            .collect();
        if got != *want {
            missed.push(format!("{text:?}: {got:?} (want {want:?})"));
        }
    }
    assert!(missed.is_empty(), "{missed:#?}");
}

/// Cities, regions and countries named as where someone is are `LOCATION`s at the default threshold;
/// a street address stays one `ADDRESS`.
#[test]
fn places_are_locations() {
    let Some(model) = model("places_are_locations") else {
        return;
    };
    for (text, want) in [
        ("She lives in Tromsø now.", "Tromsø"),
        ("He moved to Reykjavík last year.", "Reykjavík"),
        ("They relocated to Norway in May.", "Norway"),
    ] {
        let e = model.entities(text);
        let got: Vec<&str> = e
            .iter()
            .filter(|e| e.kind == EntityType::Location && e.score >= 0.85)
            .map(|e| &text[e.start..e.end])
            .collect();
        assert_eq!(got, vec![want], "{text}: {e:?}");
    }
    let text = "Send it to 1600 Pennsylvania Avenue NW, Washington, DC 20500.";
    let e = model.entities(text);
    assert!(found(text, &e, EntityType::Location).is_empty(), "{e:?}");
    assert_eq!(found(text, &e, EntityType::Address).len(), 1, "{e:?}");
}
