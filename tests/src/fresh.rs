//! Is a built `opc` binary the one the current sources make? The end-to-end tests run the binary at
//! `target/<profile>/opc`, which `cargo test -p opc-tests` does not build (opc-tests cannot depend on a
//! binary), so without this check a test could pass against an old build and say nothing.
//!
//! The check reads the dep-info file cargo writes next to the binary (`target/<profile>/opc.d`): the
//! binary's path, then every local source file that went into it — every `.rs` of opc-bot and of the
//! workspace crates it links, and the files they `include_str!` (the web chat's page, script and
//! style). The binary is stale when
//! - it or its dep-info is missing;
//! - the dep-info names a source outside this checkout (a target directory copied from, or shared with,
//!   another checkout: the binary was built from other sources);
//! - a source it names is gone, or was modified after the binary was written.
//!
//! Why mtimes and dep-info: they are exactly what cargo itself uses to decide that a binary needs
//! rebuilding, so "fresh" here means "`cargo build -p opc-bot` would not recompile it". A new module
//! file is covered too, since adding one edits the file that declares it. What cargo tracks by other
//! means (Cargo.toml features, dependency versions, the toolchain) is left to the rebuild that the
//! process launcher (`opc_process`, which uses this module) runs whenever this check fails.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Why a binary is not the build of the current sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// The binary does not exist.
    Missing(PathBuf),
    /// Its dep-info file (the list of what it was built from) is missing or unreadable.
    NoDepInfo(PathBuf, String),
    /// The dep-info describes another file: the target directory came from elsewhere.
    OtherTarget {
        /// The binary checked.
        binary: PathBuf,
        /// What the dep-info says it describes.
        described: PathBuf,
    },
    /// A source it was built from is outside this checkout.
    ForeignSource(PathBuf),
    /// A source it was built from no longer exists.
    SourceGone(PathBuf),
    /// A source was modified after the binary was built.
    NewerSource(PathBuf),
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stale::Missing(binary) => write!(f, "{} does not exist", binary.display()),
            Stale::NoDepInfo(path, why) => write!(
                f,
                "{} cannot be read ({why}), so what the binary was built from is unknown",
                path.display()
            ),
            Stale::OtherTarget { binary, described } => write!(
                f,
                "the dep-info next to {} describes {} (a target directory from another checkout)",
                binary.display(),
                described.display()
            ),
            Stale::ForeignSource(source) => write!(
                f,
                "it was built from {}, which is outside this checkout",
                source.display()
            ),
            Stale::SourceGone(source) => write!(
                f,
                "it was built from {}, which no longer exists",
                source.display()
            ),
            Stale::NewerSource(source) => write!(
                f,
                "{} was modified after the binary was built",
                source.display()
            ),
        }
    }
}

/// Check that `binary` was built from the sources now in `workspace` (see the module doc). `Ok` means
/// cargo would not rebuild it.
pub fn check(binary: &Path, workspace: &Path) -> Result<(), Stale> {
    let built = modified(binary).ok_or_else(|| Stale::Missing(binary.to_path_buf()))?;
    let dep_info = binary.with_extension("d");
    let text = std::fs::read_to_string(&dep_info)
        .map_err(|e| Stale::NoDepInfo(dep_info.clone(), e.to_string()))?;
    let (described, sources) = parse_dep_info(&text)
        .ok_or_else(|| Stale::NoDepInfo(dep_info.clone(), "no `target: sources` line".into()))?;
    let workspace = canonical(workspace);
    // Relative paths are relative to the workspace (cargo's `build.dep-info-basedir`).
    let absolute = |path: PathBuf| {
        if path.is_absolute() {
            path
        } else {
            workspace.join(path)
        }
    };
    let described = absolute(described);
    if canonical(&described) != canonical(binary) {
        return Err(Stale::OtherTarget {
            binary: binary.to_path_buf(),
            described,
        });
    }
    // Generated sources (a build script's OUT_DIR) live in the target directory, which may be outside
    // the workspace (`CARGO_TARGET_DIR`).
    let target_dir = binary
        .parent()
        .and_then(Path::parent)
        .map(canonical)
        .unwrap_or_else(|| workspace.clone());
    for source in sources.into_iter().map(absolute) {
        let Some(changed) = modified(&source) else {
            return Err(Stale::SourceGone(source));
        };
        let source = canonical(&source);
        if !source.starts_with(&workspace) && !source.starts_with(&target_dir) {
            return Err(Stale::ForeignSource(source));
        }
        if changed > built {
            return Err(Stale::NewerSource(source));
        }
    }
    Ok(())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The first rule of a Makefile-style dep-info file: its target and its prerequisites. Spaces inside
/// a path are escaped with a backslash.
fn parse_dep_info(text: &str) -> Option<(PathBuf, Vec<PathBuf>)> {
    let line = text.lines().find(|line| !line.trim().is_empty())?;
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            ' ' => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            _ => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut words = words.into_iter();
    let target = words.next()?.strip_suffix(':')?.to_string();
    Some((PathBuf::from(target), words.map(PathBuf::from).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::time::Duration;

    /// A fake checkout: `src/main.rs`, and a "binary" with its dep-info listing that source.
    fn checkout() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let root = canonical(dir.path());
        std::fs::create_dir_all(root.join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join("target/debug")).unwrap_or_else(|e| panic!("{e}"));
        let source = root.join("src/main.rs");
        let binary = root.join("target/debug/opc");
        std::fs::write(&source, "fn main() {}").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&binary, "built").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            binary.with_extension("d"),
            format!("{}: {}\n", binary.display(), source.display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (dir, binary, source)
    }

    fn set_modified(path: &Path, time: SystemTime) {
        File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(time))
            .unwrap_or_else(|e| panic!("set mtime of {}: {e}", path.display()));
    }

    #[test]
    fn a_binary_built_after_its_sources_is_fresh() {
        let (dir, binary, source) = checkout();
        set_modified(&source, SystemTime::now() - Duration::from_secs(60));
        assert_eq!(check(&binary, dir.path()), Ok(()));
    }

    #[test]
    fn a_source_edited_after_the_build_makes_it_stale() {
        let (dir, binary, source) = checkout();
        set_modified(&binary, SystemTime::now() - Duration::from_secs(60));
        assert_eq!(check(&binary, dir.path()), Err(Stale::NewerSource(source)));
    }

    #[test]
    fn a_deleted_source_makes_it_stale() {
        let (dir, binary, source) = checkout();
        std::fs::remove_file(&source).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check(&binary, dir.path()), Err(Stale::SourceGone(source)));
    }

    #[test]
    fn a_missing_binary_or_dep_info_is_stale() {
        let (dir, binary, _) = checkout();
        std::fs::remove_file(binary.with_extension("d")).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            check(&binary, dir.path()),
            Err(Stale::NoDepInfo(..))
        ));
        std::fs::remove_file(&binary).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check(&binary, dir.path()), Err(Stale::Missing(binary)));
    }

    #[test]
    fn a_target_dir_from_another_checkout_is_stale() {
        let (dir, binary, _) = checkout();
        let (_other, other_binary, other_source) = checkout();
        set_modified(&other_source, SystemTime::now() - Duration::from_secs(60));
        // The other checkout's binary and dep-info copied into this one's target dir.
        std::fs::copy(other_binary.with_extension("d"), binary.with_extension("d"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            check(&binary, dir.path()),
            Err(Stale::OtherTarget { .. })
        ));
        // The same, with the dep-info naming this binary but the other checkout's sources.
        std::fs::write(
            binary.with_extension("d"),
            format!("{}: {}\n", binary.display(), other_source.display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            check(&binary, dir.path()),
            Err(Stale::ForeignSource(other_source))
        );
    }

    #[test]
    fn escaped_spaces_in_paths_are_read() {
        let (target, sources) =
            parse_dep_info("/t/opc: /a\\ b/x.rs /c.rs\n").unwrap_or_else(|| panic!("parses"));
        assert_eq!(target, PathBuf::from("/t/opc"));
        assert_eq!(
            sources,
            vec![PathBuf::from("/a b/x.rs"), PathBuf::from("/c.rs")]
        );
    }
}
