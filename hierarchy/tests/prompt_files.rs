//! Prompt files are read with a size cap, only when they are regular files with one name, and only
//! inside the config file's directory once symlinks are followed: `prompt: file:/dev/zero`,
//! `/etc/shadow`, `/proc/self/environ`, `../outside.md`, a symlink pointing outside, a hard link, a
//! directory, a FIFO or an oversized file is an error at the `prompt:` line (what, where, how to fix),
//! found without reading the file to its end (or at all, for a device, a FIFO or a path outside).
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
fn paths_outside_the_config_directory_are_refused_before_they_are_looked_at() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("org");
    std::fs::create_dir(&config_dir).unwrap();
    // A real file just outside: refused for where it is, not for what it holds.
    std::fs::write(dir.path().join("outside.md"), "Be brief.").unwrap();
    let shown = std::path::absolute(&config_dir).unwrap();
    for written in [
        "/etc/shadow",
        "/proc/self/environ",
        "/dev/zero",
        "../outside.md",
        "prompts/../../outside.md",
        "/nonexistent/secret.md",
    ] {
        let errors = errors(&config_dir, written);
        assert_one_at_prompt(
            &errors,
            &format!(
                "prompt file `{written}` is outside the config file's directory `{}`",
                shown.display()
            ),
            "copy the file there and write its path relative to it",
        );
        // Nothing about the file itself (existence, type) is told.
        let message = &errors[0].message;
        assert!(
            !message.contains("No such file") && !message.contains("not a regular file"),
            "{message}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_symlink_inside_that_leads_outside_is_refused_without_naming_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("org");
    std::fs::create_dir_all(config_dir.join("prompts")).unwrap();
    std::fs::write(dir.path().join("secret.md"), "the provider key").unwrap();
    // A file link, a directory link, and a link to a device, as an agent could plant them in its
    // workspace under the config's directory.
    std::os::unix::fs::symlink(
        dir.path().join("secret.md"),
        config_dir.join("prompts/ceo.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.path(), config_dir.join("up")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", config_dir.join("zero.md")).unwrap();
    for written in ["prompts/ceo.md", "up/secret.md", "zero.md"] {
        let errors = errors(&config_dir, written);
        assert_one_at_prompt(
            &errors,
            &format!(
                "prompt file `{written}` leads through a symbolic link to a file outside the config file's directory"
            ),
            "replace the link with a copy of the file",
        );
        // The target is never named.
        let target = dir.path().join("secret.md");
        let target = target.to_str().unwrap();
        assert!(!errors[0].message.contains(target), "{}", errors[0]);
        assert!(!errors[0].message.contains("/dev/zero"), "{}", errors[0]);
    }
}

#[cfg(unix)]
#[test]
fn a_file_with_a_second_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ceo.md"), "Be brief.").unwrap();
    std::fs::hard_link(dir.path().join("ceo.md"), dir.path().join("again.md")).unwrap();
    let errors = errors(dir.path(), "ceo.md");
    assert_one_at_prompt(
        &errors,
        "has 2 hard links; a prompt file must have exactly one name",
        "replace the file with a copy that has one name",
    );
}

#[cfg(unix)]
#[test]
fn files_inside_are_read_through_links_that_stay_inside() {
    let dir = tempfile::tempdir().unwrap();
    // The config's directory itself behind a symlink (the admin's choice) changes nothing.
    let real = dir.path().join("real");
    std::fs::create_dir_all(real.join("prompts")).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("org")).unwrap();
    let config_dir = dir.path().join("org");
    std::fs::write(real.join("prompts/ceo.md"), "Be brief.").unwrap();
    std::os::unix::fs::symlink("prompts/ceo.md", real.join("current.md")).unwrap();
    let absolute = config_dir.join("prompts/ceo.md");
    for written in [
        "prompts/ceo.md",
        "./prompts/../prompts/ceo.md",
        "current.md",
        absolute.to_str().unwrap(),
    ] {
        let config = config_dir.join("opc.config.yaml");
        std::fs::write(&config, ORG.replace("PROMPT", written)).unwrap();
        opc_hierarchy::load(&config).unwrap_or_else(|e| panic!("`{written}`: {e}"));
        assert_eq!(
            opc_hierarchy::read_prompt_file(&config_dir, Path::new(written)).unwrap(),
            "Be brief."
        );
    }
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
