//! `opc init [DIR]`: write the example org.
//!
//! The files are the repository's own `opc.config.yaml` and `prompts/`, compiled in, so the example a
//! user gets is exactly the one the tests validate. Nothing is overwritten: existing files are listed and
//! the command writes nothing at all, and the hint names a directory that is free (never the one that
//! was just refused).
//!
//! The closing "Next:" walks a newcomer to a running org: check and draw it, set the key the example's
//! models need, `opc run`, then the web chat and the admin console in a browser. A test keeps its
//! variable and address equal to the example config's.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::term::{eprint, print};

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
            "error: refusing to overwrite existing files; nothing was written:\n  {}\nhint: choose another directory, e.g. `opc init {}`, or keep these files and check them with `opc validate`\n",
            existing.join("\n  "),
            free_directory(dir).display()
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
    print(&format!(
        "Wrote an example org to {}: opc.config.yaml and {} prompt files.\n\n{}",
        dir.display(),
        FILES.len() - 1,
        next_steps(dir)
    ));
    ExitCode::SUCCESS
}

/// The environment variable holding the key of the example's models (its `anthropic` provider), and
/// the address its web chat listens on (the default `channels.web.listen`).
const KEY_VAR: &str = "ANTHROPIC_API_KEY";
const WEB_ADDRESS: &str = "127.0.0.1:7420";

/// What to do after `opc init`, from checking the files to chatting in a browser.
fn next_steps(dir: &Path) -> String {
    let cd = if dir == Path::new(".") || dir.as_os_str().is_empty() {
        String::new()
    } else {
        format!("  cd {}\n", dir.display())
    };
    format!(
        "Next:\n{cd}  opc validate     # check it\n  opc visualize    # see the org tree\n  export {KEY_VAR}=sk-ant-…   # a key from https://console.anthropic.com/\n  opc run          # serve it (Ctrl-C stops)\n\nThen open http://{WEB_ADDRESS}/ to chat with the CEO, and http://{WEB_ADDRESS}/admin for the admin\nconsole (the org, tasks, approvals, the config). Without a key, `opc run` still starts and says which\nvariable is missing. No key? In a clone of the repository, `examples/offline/run.sh --serve` runs\nan offline org in the same web chat.\n"
    )
}

/// A directory `opc init` would not refuse, next to `dir`: `my-org` inside `.`, else `dir-2`,
/// `dir-3` … — the first that holds none of the example's files.
fn free_directory(dir: &Path) -> std::path::PathBuf {
    let taken = |candidate: &Path| FILES.iter().any(|(name, _)| candidate.join(name).exists());
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && *n != "." && *n != "..");
    let (parent, stem) = match name {
        Some(name) => (
            dir.parent().unwrap_or(Path::new("")).to_path_buf(),
            name.to_string(),
        ),
        None => (dir.to_path_buf(), "my-org".to_string()),
    };
    let first = parent.join(&stem);
    if name.is_none() && !taken(&first) {
        return first;
    }
    (2..1000)
        .map(|n| parent.join(format!("{stem}-{n}")))
        .find(|candidate| !taken(candidate))
        .unwrap_or_else(|| parent.join(format!("{stem}-new")))
}

/// Creates the file (and its directory); fails rather than replace a file that appeared meanwhile.
fn write_new(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(contents.as_bytes())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// "Next:" names the variable and the address the example config really uses.
    #[test]
    fn next_steps_match_the_example_config() {
        let dir = std::env::temp_dir().join(format!("opc-init-next-{}", std::process::id()));
        for (name, contents) in FILES {
            write_new(&dir.join(name), contents).unwrap();
        }
        let loaded = opc_hierarchy::load(&dir.join("opc.config.yaml")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(loaded.config.channels.web.listen.to_string(), WEB_ADDRESS);
        let framework = &loaded.config.framework;
        let default = &framework.providers[framework.default_provider.as_deref().unwrap()];
        assert_eq!(
            default.api_key_env.as_ref().map(|v| v.name()),
            Some(KEY_VAR)
        );
        assert!(next_steps(Path::new("org")).contains(&format!("export {KEY_VAR}=")));
    }

    /// The suggested directory is never the refused one, and is free.
    #[test]
    fn the_refusal_suggests_another_directory() {
        let dir = std::env::temp_dir().join(format!("opc-init-free-{}", std::process::id()));
        let org = dir.join("my-org");
        std::fs::create_dir_all(org.join("prompts")).unwrap();
        std::fs::write(org.join("opc.config.yaml"), "x").unwrap();
        assert_eq!(free_directory(&org), dir.join("my-org-2"));
        std::fs::create_dir_all(dir.join("my-org-2")).unwrap();
        std::fs::write(dir.join("my-org-2/opc.config.yaml"), "x").unwrap();
        assert_eq!(free_directory(&org), dir.join("my-org-3"));
        // Inside an org directory (`opc init .`): a new subdirectory.
        assert_eq!(free_directory(Path::new(".")), Path::new("./my-org"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
