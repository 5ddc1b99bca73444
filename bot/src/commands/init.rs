//! `opc init [DIR]`: write the example org.
//!
//! The files are the repository's own `opc.config.yaml` and `prompts/`, compiled in, so the example a
//! user gets is exactly the one the tests validate. Nothing is overwritten: existing files are listed and
//! the command writes nothing at all.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::{eprint, print};

/// (path relative to DIR, contents)
const FILES: &[(&str, &str)] = &[
    ("opc.config.yaml", include_str!("../../../opc.config.yaml")),
    ("prompts/ceo.md", include_str!("../../../prompts/ceo.md")),
    (
        "prompts/vp-eng.md",
        include_str!("../../../prompts/vp-eng.md"),
    ),
    (
        "prompts/vp-ops.md",
        include_str!("../../../prompts/vp-ops.md"),
    ),
    (
        "prompts/lead-backend.md",
        include_str!("../../../prompts/lead-backend.md"),
    ),
    (
        "prompts/lead-frontend.md",
        include_str!("../../../prompts/lead-frontend.md"),
    ),
    (
        "prompts/lead-support.md",
        include_str!("../../../prompts/lead-support.md"),
    ),
    (
        "prompts/dev-backend.md",
        include_str!("../../../prompts/dev-backend.md"),
    ),
    (
        "prompts/dev-frontend.md",
        include_str!("../../../prompts/dev-frontend.md"),
    ),
    (
        "prompts/support-agent.md",
        include_str!("../../../prompts/support-agent.md"),
    ),
];

pub fn run(dir: &Path) -> ExitCode {
    let existing: Vec<String> = FILES
        .iter()
        .map(|(name, _)| dir.join(name))
        .filter(|path| path.exists())
        .map(|path| path.display().to_string())
        .collect();
    if !existing.is_empty() {
        eprint(&format!(
            "error: refusing to overwrite existing files; nothing was written:\n  {}\nhint: choose an empty directory, e.g. `opc init my-org`\n",
            existing.join("\n  ")
        ));
        return ExitCode::FAILURE;
    }
    for (name, contents) in FILES {
        let path = dir.join(name);
        if let Err(e) = write_new(&path, contents) {
            eprint(&format!("error: cannot write {}: {e}\n", path.display()));
            return ExitCode::FAILURE;
        }
    }
    let shown = dir.display();
    print(&format!(
        "Wrote an example org to {shown}: opc.config.yaml and {} prompt files.\n\nNext:\n  cd {shown}\n  opc validate     # check it\n  opc visualize    # see the org tree\n",
        FILES.len() - 1
    ));
    ExitCode::SUCCESS
}

/// Creates the file (and its directory); fails rather than replace a file that appeared meanwhile.
fn write_new(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(contents.as_bytes())
}
