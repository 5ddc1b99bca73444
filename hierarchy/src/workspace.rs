//! Workspaces and Bash allow-lists: the path and prefix rules that validation and [`crate::OrgTree`]
//! share, so that what `opc validate` accepts is exactly what the tools are given.
//!
//! Paths here are *lexical*: `..` and `.` are folded without touching the file system (a workspace
//! usually does not exist yet when the config is checked). The file tools and the sandbox resolve
//! symlinks themselves at use time; this module only guarantees that, as written, every workspace lies
//! strictly inside the workspace root.
//!
//! Prefix rules: an ancestor prefix *covers* a child prefix when it is `"*"`, equal to it, or a
//! word-wise start of it (`cargo` covers `cargo test` but not `cargox`). Word-wise is the stricter
//! reading, so narrowing never lets through a command the ancestor's list would not.

use std::path::{Component, Path, PathBuf};

/// Folds `.` and `..` without the file system. `..` at the top of an absolute path stays at `/`; at the
/// top of a relative one it is kept (so a caller can tell that the path climbs out).
pub(crate) fn normalise(path: &Path) -> PathBuf {
    let mut out: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(component),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// `path` made absolute against `base` (itself made absolute against the current directory), then
/// normalised.
pub(crate) fn absolute(base: &Path, path: &Path) -> PathBuf {
    let joined = base.join(path);
    let absolute = std::path::absolute(&joined).unwrap_or_else(|_| Path::new("/").join(&joined));
    normalise(&absolute)
}

/// Why a written `agents.<id>.workspace` is not a directory strictly inside the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outside {
    /// An absolute path: workspaces are written relative to the root.
    Absolute,
    /// `..` climbs out of the root.
    Climbs,
    /// It folds to the root itself, which holds every other agent's workspace.
    IsRoot,
}

/// The workspace `written` (relative to `root`), or why it is not inside the root.
pub(crate) fn agent_dir(root: &Path, written: &Path) -> Result<PathBuf, Outside> {
    if written.has_root() || written.is_absolute() {
        return Err(Outside::Absolute);
    }
    let folded = normalise(written);
    match folded.components().next() {
        Some(Component::ParentDir) => Err(Outside::Climbs),
        Some(Component::CurDir) | None => Err(Outside::IsRoot),
        _ => Ok(normalise(&root.join(folded))),
    }
}

/// Whether the ancestor prefix `outer` covers the child prefix `inner` (see the module docs).
pub(crate) fn covers(outer: &str, inner: &str) -> bool {
    let (outer, inner) = (outer.trim(), inner.trim());
    if outer == "*" || outer == inner {
        return true;
    }
    inner
        .strip_prefix(outer)
        .is_some_and(|rest| rest.starts_with(char::is_whitespace))
}

/// The intersection of a child's prefixes with its manager's effective ones: each child prefix the
/// manager covers survives as is; a child prefix that covers a narrower manager prefix (`cargo` under
/// `cargo test`, or `"*"`) survives as the manager's. Trimmed, without duplicates, in the child's order.
pub(crate) fn narrow(child: &[String], manager: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |prefix: &str| {
        if !out.iter().any(|p| p == prefix) {
            out.push(prefix.to_string());
        }
    };
    for c in child {
        let c = c.trim();
        if manager.iter().any(|m| covers(m, c)) {
            push(c);
            continue;
        }
        for m in manager.iter().filter(|m| covers(c, m)) {
            push(m.trim());
        }
    }
    out
}

/// A list written by an agent with no managing `bash` section: trimmed and deduplicated.
pub(crate) fn own(allow: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for prefix in allow.iter().map(|p| p.trim()) {
        if !out.iter().any(|p| p == prefix) {
            out.push(prefix.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn normalise_folds_dots_lexically() {
        assert_eq!(normalise(Path::new("a/./b/../c")), PathBuf::from("a/c"));
        assert_eq!(normalise(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normalise(Path::new("/../etc")), PathBuf::from("/etc"));
        assert_eq!(normalise(Path::new("a/..")), PathBuf::from("."));
        assert_eq!(
            absolute(Path::new("/srv/opc"), Path::new("../x/./y")),
            PathBuf::from("/srv/x/y")
        );
        assert_eq!(
            absolute(Path::new("/srv/opc"), Path::new("/abs")),
            PathBuf::from("/abs")
        );
        assert!(absolute(Path::new("rel"), Path::new("x")).is_absolute());
    }

    #[test]
    fn agent_dirs_stay_strictly_inside_the_root() {
        let root = Path::new("/r");
        assert_eq!(
            agent_dir(root, Path::new("repos/api")),
            Ok(PathBuf::from("/r/repos/api"))
        );
        assert_eq!(
            agent_dir(root, Path::new("a/../b")),
            Ok(PathBuf::from("/r/b"))
        );
        assert_eq!(agent_dir(root, Path::new("/etc")), Err(Outside::Absolute));
        assert_eq!(agent_dir(root, Path::new("../x")), Err(Outside::Climbs));
        assert_eq!(
            agent_dir(root, Path::new("a/../../x")),
            Err(Outside::Climbs)
        );
        assert_eq!(agent_dir(root, Path::new(".")), Err(Outside::IsRoot));
        assert_eq!(agent_dir(root, Path::new("a/..")), Err(Outside::IsRoot));
    }

    #[test]
    fn coverage_is_word_wise() {
        assert!(covers("*", "rm -rf x"));
        assert!(covers("cargo", "cargo test"));
        assert!(covers("cargo test", "cargo test"));
        assert!(covers(" cargo ", "cargo test --lib"));
        assert!(!covers("cargo", "cargox"));
        assert!(!covers("cargo test", "cargo"));
        assert!(!covers("ls", "*"));
    }

    #[test]
    fn narrowing_is_the_intersection() {
        let manager = strings(&["cargo test", "git", "ls"]);
        assert_eq!(
            narrow(
                &strings(&["git status", "cargo", "rm", "ls", "ls"]),
                &manager
            ),
            strings(&["git status", "cargo test", "ls"])
        );
        assert_eq!(
            narrow(&strings(&["*"]), &manager),
            strings(&["cargo test", "git", "ls"])
        );
        assert_eq!(
            narrow(&strings(&["rm -rf", "ls"]), &strings(&["*"])),
            strings(&["rm -rf", "ls"])
        );
        assert!(narrow(&strings(&["ls"]), &[]).is_empty());
        assert_eq!(
            own(&strings(&[" ls ", "ls", "cat"])),
            strings(&["ls", "cat"])
        );
    }
}
