//! Config fixtures: one file per validation rule under `tests/fixtures/invalid/`, plus accepted configs
//! under `tests/fixtures/valid/`.
//!
//! Each fixture states what it expects in comment lines at its top:
//!
//! ```text
//! # expect: 12:7 agents.vp-eng.children[1] :: child `lead-x` is not an agent
//! # expect-warning: 3:5 agents.ceo.tools :: neither `delegate`
//! ```
//!
//! `LINE:COLUMN` and the key path must match exactly; the text after `::` must occur in the message,
//! and the text after a second `::`, if any, in the hint.
//! The set of errors must match the `expect` lines exactly (no missing, no extra), so a cascade of
//! follow-on errors fails the test too. Warnings are checked when a fixture lists any.

use std::path::{Path, PathBuf};

use opc_hierarchy::{ConfigError, Diagnostic, Severity};

#[derive(Debug)]
struct Expectation {
    severity: Severity,
    line: u32,
    column: u32,
    path: String,
    message: String,
    hint: Option<String>,
}

impl Expectation {
    fn matches(&self, d: &Diagnostic) -> bool {
        d.severity == self.severity
            && d.line() == self.line
            && d.column() == self.column
            && d.path == self.path
            && d.message.contains(&self.message)
            && self
                .hint
                .as_ref()
                .is_none_or(|h| d.hint.as_deref().unwrap_or("").contains(h.as_str()))
    }
}

fn expectations(source: &str, file: &Path) -> Vec<Expectation> {
    source
        .lines()
        .filter_map(|line| {
            let (severity, rest) = if let Some(rest) = line.strip_prefix("# expect-warning:") {
                (Severity::Warning, rest)
            } else {
                (Severity::Error, line.strip_prefix("# expect:")?)
            };
            let bad = || -> ! { panic!("{}: malformed expectation `{line}`", file.display()) };
            let (position, rest) = rest.trim().split_once(' ').unwrap_or_else(|| bad());
            let (line_no, column) = position.split_once(':').unwrap_or_else(|| bad());
            let (path, message) = rest.split_once("::").unwrap_or_else(|| bad());
            let (message, hint) = match message.split_once("::") {
                Some((message, hint)) => (message, Some(hint.trim().to_string())),
                None => (message, None),
            };
            Some(Expectation {
                severity,
                line: line_no.parse().unwrap_or_else(|_| bad()),
                column: column.parse().unwrap_or_else(|_| bad()),
                path: path.trim().to_string(),
                message: message.trim().to_string(),
                hint,
            })
        })
        .collect()
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Checks diagnostics against expectations; returns a description of every mismatch.
fn compare(expected: &[Expectation], actual: &[Diagnostic], check_warnings: bool) -> Vec<String> {
    let mut problems = Vec::new();
    for e in expected {
        if !actual.iter().any(|d| e.matches(d)) {
            problems.push(format!("missing: {e:?}"));
        }
    }
    for d in actual {
        let checked = d.is_error() || check_warnings;
        if checked && !expected.iter().any(|e| e.matches(d)) {
            problems.push(format!("unexpected: {d}"));
        }
    }
    problems
}

#[test]
fn every_invalid_fixture_reports_exactly_its_expected_errors() {
    let files = fixtures("invalid");
    assert!(
        files.len() >= 30,
        "expected a fixture per rule, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("fixture is readable");
        let expected = expectations(&source, file);
        assert!(
            expected.iter().any(|e| e.severity == Severity::Error),
            "{}: an invalid fixture must expect at least one error",
            file.display()
        );
        let check_warnings = expected.iter().any(|e| e.severity == Severity::Warning);
        match opc_hierarchy::load(file) {
            Ok(_) => failures.push(format!(
                "{}: accepted, but should be invalid",
                file.display()
            )),
            Err(ConfigError::Invalid(report)) => {
                let problems = compare(&expected, &report.diagnostics, check_warnings);
                if !problems.is_empty() {
                    failures.push(format!(
                        "{}:\n  {}\n  all diagnostics:\n    {}",
                        file.display(),
                        problems.join("\n  "),
                        report.lines().join("\n    ")
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", file.display())),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn every_valid_fixture_is_accepted_with_its_expected_warnings() {
    let mut failures = Vec::new();
    for file in fixtures("valid") {
        let source = std::fs::read_to_string(&file).expect("fixture is readable");
        let expected = expectations(&source, &file);
        match opc_hierarchy::load(&file) {
            Ok(loaded) => {
                let problems = compare(&expected, &loaded.report.diagnostics, true);
                if !problems.is_empty() {
                    failures.push(format!("{}:\n  {}", file.display(), problems.join("\n  ")));
                }
            }
            Err(e) => failures.push(format!("{}: rejected: {e}", file.display())),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn the_example_config_validates_clean() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../opc.config.yaml");
    let loaded = opc_hierarchy::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded.report.diagnostics,
        Vec::<Diagnostic>::new(),
        "the example must have no warnings either"
    );
    let org = &loaded.org;
    assert_eq!(org.root(), "ceo");
    assert_eq!(org.depth(), 3, "CEO → VP → lead → worker");
    assert!(org.shares_with("vp-eng", "vp-ops"));
    assert!(!loaded.config.shared_blocks.is_empty());
}

/// A credential pasted into the file is never printed in full: not in a message, not in the rendered
/// snippet, not in the JSON. Each `secret-*` fixture names its secret in a `# secret:` line.
#[test]
fn pasted_secrets_are_never_printed_in_full() {
    let mut checked = 0;
    for file in fixtures("invalid") {
        let source = std::fs::read_to_string(&file).expect("fixture is readable");
        let Some(secret) = source
            .lines()
            .find_map(|l| l.strip_prefix("# secret: ").map(str::trim))
        else {
            continue;
        };
        let Err(ConfigError::Invalid(report)) = opc_hierarchy::load(&file) else {
            panic!("{}: should be invalid", file.display());
        };
        let rendered = report.render(false);
        let json = serde_json::to_string(&report.diagnostics).expect("diagnostics serialise");
        let lines = report.lines().join("\n");
        for (what, text) in [("rendered", &rendered), ("json", &json), ("lines", &lines)] {
            assert!(
                !text.contains(secret),
                "{}: the {what} output contains the secret:\n{text}",
                file.display()
            );
        }
        assert!(
            rendered.contains(&secret[..5]) && rendered.contains("rotate"),
            "{}: the output should show the secret's start and advise rotating it:\n{rendered}",
            file.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 3,
        "only {checked} secret fixtures name their secret"
    );
}

#[test]
fn an_unreadable_file_is_not_an_invalid_one() {
    let err =
        opc_hierarchy::load(Path::new("/nonexistent/opc.config.yaml")).expect_err("no such file");
    assert!(matches!(err, ConfigError::Unreadable { .. }), "{err}");
}
