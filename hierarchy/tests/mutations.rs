//! Property test: random damage to a valid config never panics, and always yields either a valid config
//! or errors that carry positions inside the document.
//!
//! Mutations model what really happens to config files: keys deleted (with their nested block), values
//! replaced by values of another type, random bytes pasted in, files truncated, lines duplicated or
//! re-indented. Each case applies one to three of them to the example org, then loads, validates and
//! renders the result. The seed is fixed so CI is reproducible; set PROPTEST_RNG_SEED to explore others.

use std::path::Path;

use opc_hierarchy::ConfigError;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed};

const EXAMPLE: &str = include_str!("../../opc.config.yaml");

/// Values of every YAML type, to swap in for whatever a key had.
const REPLACEMENTS: &[&str] = &[
    "[1, 2]",
    "{a: 1}",
    "true",
    "-3",
    "0",
    "\"text\"",
    "~",
    "1.5",
    "5m",
    "ceo",
    "\"\"",
    "[]",
    "{}",
    "*missing",
    "&a x",
    "!!binary aGk=",
    "99999999999999999999",
    "- item",
    "|\n  block",
    "'quoted: yes'",
];

#[derive(Clone, Debug)]
enum Mutation {
    /// Remove a line and every more-indented line after it (a key with its nested block).
    DeleteKey(Index),
    /// Replace the value after `key:` on a line.
    SwapType(Index, Index),
    /// Insert arbitrary bytes at a position.
    InsertBytes(Index, Vec<u8>),
    /// Cut the text at a position.
    Truncate(Index),
    /// Repeat a line (duplicate keys, duplicate list items).
    DuplicateLine(Index),
    /// Shift a line's indentation.
    Reindent(Index, i8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::DeleteKey),
        (any::<Index>(), any::<Index>()).prop_map(|(l, r)| Mutation::SwapType(l, r)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(p, b)| Mutation::InsertBytes(p, b)),
        any::<Index>().prop_map(Mutation::Truncate),
        any::<Index>().prop_map(Mutation::DuplicateLine),
        (any::<Index>(), -4i8..=4).prop_map(|(l, d)| Mutation::Reindent(l, d)),
    ]
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &str, mutation: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    match mutation {
        Mutation::DeleteKey(at) => {
            let start = at.index(lines.len());
            let depth = indent(&lines[start]);
            let end = (start + 1..lines.len())
                .find(|&i| !lines[i].trim().is_empty() && indent(&lines[i]) <= depth)
                .unwrap_or(lines.len());
            lines.drain(start..end);
        }
        Mutation::SwapType(at, replacement) => {
            let i = at.index(lines.len());
            let replacement = REPLACEMENTS[replacement.index(REPLACEMENTS.len())];
            if let Some(colon) = lines[i].find(": ") {
                lines[i].truncate(colon + 2);
                lines[i].push_str(replacement);
            } else {
                lines[i].push_str(replacement);
            }
        }
        Mutation::InsertBytes(at, bytes) => {
            let mut raw = text.as_bytes().to_vec();
            let position = at.index(raw.len() + 1);
            raw.splice(position..position, bytes.iter().copied());
            return String::from_utf8_lossy(&raw).into_owned();
        }
        Mutation::Truncate(at) => {
            let cut = floor_boundary(text, at.index(text.len() + 1));
            return text[..cut].to_string();
        }
        Mutation::DuplicateLine(at) => {
            let i = at.index(lines.len());
            let copy = lines[i].clone();
            lines.insert(i + 1, copy);
        }
        Mutation::Reindent(at, delta) => {
            let i = at.index(lines.len());
            let line = &lines[i];
            let spaces = (indent(line) as i64 + i64::from(*delta)).max(0) as usize;
            lines[i] = format!("{}{}", " ".repeat(spaces), line.trim_start());
        }
    }
    lines.join("\n") + "\n"
}

fn check(text: String) -> Result<(), TestCaseError> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let line_count = text.lines().count().max(1) as u32 + 1;
    match opc_hierarchy::parse("mutated.yaml", text, Some(&base)) {
        Ok(loaded) => {
            // A config that passed must give a usable org.
            let root = loaded.org.root().to_string();
            prop_assert!(loaded.org.contains(&root));
            prop_assert_eq!(loaded.org.level(&root), Some(0));
            for id in loaded.org.agent_ids() {
                prop_assert!(
                    loaded
                        .org
                        .ancestors(id)
                        .last()
                        .is_none_or(|top| *top == root)
                );
            }
            let _ = loaded.report.render(false);
        }
        Err(ConfigError::Invalid(report)) => {
            prop_assert!(
                report.has_errors(),
                "invalid without an error: {:?}",
                report.diagnostics
            );
            for d in &report.diagnostics {
                prop_assert!(
                    d.line() >= 1 && d.line() <= line_count,
                    "line out of range: {d}"
                );
                prop_assert!(d.column() >= 1, "column out of range: {d}");
            }
            // Rendering snippets must cope with every position the checker produces.
            let rendered = report.render(false);
            prop_assert!(!rendered.is_empty());
        }
        Err(other) => prop_assert!(false, "text input cannot be unreadable: {other}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config {
        cases: 10_000,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x0DC_C0DE),
        ..Config::default()
    })]

    #[test]
    fn mutated_configs_never_panic_and_always_explain_themselves(
        mutations in prop::collection::vec(mutation(), 1..=3)
    ) {
        let text = mutations.iter().fold(EXAMPLE.to_string(), |text, m| apply(&text, m));
        check(text)?;
    }
}

#[test]
fn the_unmutated_example_passes_the_same_check() {
    check(EXAMPLE.to_string()).expect("example is valid");
}
