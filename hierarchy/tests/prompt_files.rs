//! Prompt files are read with a size cap and only when they are regular files: `prompt: file:/dev/zero`,
//! a directory, a FIFO or an oversized file is an error at the `prompt:` line, found without reading
//! the file to its end (or at all, for a device or a FIFO, whose open could block).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use opc_hierarchy::{ConfigError, Diagnostic, MAX_PROMPT_FILE_BYTES};

const ORG: &str = "framework:
  defaultModel: claude-sonnet-4-5
  providers:
    anthropic: { kind: anthropic, models: { claude-sonnet-4-5: { input: 3, output: 15 } } }
agents:
  ceo:
    role: CEO
    prompt: file:PROMPT
";

/// The errors of the org whose CEO's prompt is `file:{prompt}`, loaded from `dir` on another thread
/// (a read that blocks or runs away fails the test at the deadline instead of hanging it).
fn errors(dir: &Path, prompt: &str) -> Vec<Diagnostic> {
    let config = dir.join("opc.config.yaml");
    std::fs::write(&config, ORG.replace("PROMPT", prompt)).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(opc_hierarchy::load(&config));
    });
    let loaded = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("loading with prompt `{prompt}` did not finish"));
    match loaded {
        Err(ConfigError::Invalid(report)) => report.errors().cloned().collect(),
        Ok(_) => panic!("prompt `{prompt}` was accepted"),
        Err(e) => panic!("{e}"),
    }
}

fn assert_one_at_prompt(errors: &[Diagnostic], message: &str, hint: &str) {
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = &errors[0];
    assert_eq!(
        (e.line(), e.column(), e.path.as_str()),
        (8, 13, "agents.ceo.prompt"),
        "{e}"
    );
    assert!(e.message.contains(message), "{e}");
    assert!(e.hint.as_deref().unwrap_or("").contains(hint), "{e}");
}

#[test]
fn dev_zero_is_refused_as_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let errors = errors(dir.path(), "/dev/zero");
    assert_one_at_prompt(
        &errors,
        "`/dev/zero` is a character device, not a regular file",
        "text file",
    );
}

#[test]
fn a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    let errors = errors(dir.path(), "prompts");
    assert_one_at_prompt(&errors, "is a directory, not a regular file", "text file");
}

#[test]
fn a_file_over_the_cap_is_refused_and_one_at_the_cap_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let cap = usize::try_from(MAX_PROMPT_FILE_BYTES).unwrap();
    std::fs::write(dir.path().join("big.md"), "a".repeat(cap + 1)).unwrap();
    let errors = errors(dir.path(), "big.md");
    assert_one_at_prompt(
        &errors,
        "larger than the 256 KiB a prompt file may be",
        "keep the file under 256 KiB",
    );
    std::fs::write(dir.path().join("max.md"), "a".repeat(cap)).unwrap();
    let config = dir.path().join("opc.config.yaml");
    std::fs::write(&config, ORG.replace("PROMPT", "max.md")).unwrap();
    opc_hierarchy::load(&config).unwrap_or_else(|e| panic!("{e}"));
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_opening_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.md");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let errors = errors(dir.path(), "pipe.md");
    assert_one_at_prompt(
        &errors,
        "is a named pipe (FIFO), not a regular file",
        "text file",
    );
}
