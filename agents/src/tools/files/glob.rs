//! `Glob`: files whose path matches a pattern, newest first; and the directory walk that Glob and
//! Grep share.
//!
//! The walk is ripgrep's (`ignore::WalkBuilder`, in parallel): `.gitignore`, `.ignore` and
//! `.rgignore` files are honoured even outside a git repository (`require_git(false)`), hidden files
//! and directories are skipped (as `rg` does; name a hidden directory as `path` to search it), and
//! symlinks are never followed (`follow_links(false)`): a symlink is not listed or searched, so a
//! link cannot lead a search out of the allowed roots.
//!
//! Ignore files above the search path are honoured only up to the allowed root it lies in, never
//! beyond: the workspace usually sits inside OPC's own directory, whose `.gitignore` (or the
//! user's global one) must not hide the agent's files or say anything about them.
//!
//! Patterns are `globset` globs matched against the path relative to `path`: `*` stays within one
//! directory, `**` crosses directories, `{a,b}` alternates. Results are capped at [`MAX_FILES`].

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use globset::GlobBuilder;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{WalkBuilder, WalkState};

use super::access::{Intent, Resolved, Roots};

/// Files listed at most.
pub const MAX_FILES: usize = 1000;

/// The walker over `search` (inside `root`) with the tools' rules; `threads` 0 lets `ignore` pick.
pub fn walker(root: &Path, search: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(search);
    builder
        .follow_links(false)
        .require_git(false)
        .parents(false)
        .git_global(false)
        .hidden(true)
        .threads(std::thread::available_parallelism().map_or(2, |n| n.get().min(8)));
    let ancestors = ancestor_ignores(root, search);
    if !ancestors.is_empty() {
        builder.filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            for gi in ancestors.iter().rev() {
                let m = gi.matched(entry.path(), is_dir);
                if m.is_ignore() {
                    return false;
                }
                if m.is_whitelist() {
                    return true;
                }
            }
            true
        });
    }
    builder
}

/// The ignore files in the directories from `root` down to `search`'s parent (the walk reads those
/// at and below `search` itself), outermost first.
fn ancestor_ignores(root: &Path, search: &Path) -> Vec<Gitignore> {
    let Ok(rel) = search.strip_prefix(root) else {
        return Vec::new();
    };
    let mut dirs = vec![root.to_path_buf()];
    let mut cur = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        cur.push(part);
        dirs.push(cur.clone());
    }
    if rel.as_os_str().is_empty() {
        dirs.clear();
    }
    dirs.into_iter()
        .filter_map(|dir| {
            let mut b = GitignoreBuilder::new(&dir);
            let mut any = false;
            for name in [".gitignore", ".ignore", ".rgignore"] {
                let file = dir.join(name);
                if file.is_file() {
                    any = true;
                    let _ = b.add(file);
                }
            }
            any.then(|| b.build().ok()).flatten()
        })
        .collect()
}

/// Resolve the `path` argument of Grep and Glob (default: the workspace).
pub fn search_path(roots: &Roots, path: Option<&str>) -> Result<Resolved, String> {
    let input = path.unwrap_or(".");
    let resolved = roots.resolve(input, Intent::Read)?;
    if !resolved.exists {
        return Err(format!("`{input}` does not exist"));
    }
    Ok(resolved)
}

/// A file's modification time, for newest-first order.
pub fn mtime(meta: &std::fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (meta.mtime(), meta.mtime_nsec())
}

/// `Glob {pattern, path}`; the text is for the model.
pub fn glob(roots: &Roots, pattern: &str, path: Option<&str>) -> Result<String, String> {
    if Path::new(pattern).is_absolute() {
        return Err(format!(
            "the pattern `{pattern}` is absolute: patterns are matched relative to `path` (default \
             your workspace); give the directory as `path` and a relative pattern such as `**/*.rs`"
        ));
    }
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("invalid glob pattern `{pattern}`: {e}"))?
        .compile_matcher();
    let search = search_path(roots, path)?;
    let found: Mutex<Vec<(PathBuf, (i64, i64))>> = Mutex::new(Vec::new());
    walker(&search.root, &search.path).build_parallel().run(|| {
        let (found, matcher, base) = (&found, &matcher, &search.path);
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let rel = entry.path().strip_prefix(base).unwrap_or(entry.path());
            if matcher.is_match(rel) {
                let time = entry.metadata().map(|m| mtime(&m)).unwrap_or((0, 0));
                found
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((entry.into_path(), time));
            }
            WalkState::Continue
        })
    });
    let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
    if found.is_empty() {
        return Ok(format!(
            "No files found matching `{pattern}` in `{}`",
            roots.display(&search.path)
        ));
    }
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total = found.len();
    let mut out: String = found
        .iter()
        .take(MAX_FILES)
        .map(|(p, _)| format!("{}\n", roots.display(p)))
        .collect();
    if total > MAX_FILES {
        out.push_str(&format!(
            "({} more files not shown: {total} match; the newest {MAX_FILES} are listed. Use a \
             narrower pattern or path.)",
            total - MAX_FILES
        ));
    } else {
        out.pop();
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::access::Access;
    use super::*;
    use std::time::{Duration, SystemTime};

    fn setup() -> (tempfile::TempDir, PathBuf, Roots) {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap().join("ws");
        std::fs::create_dir_all(base.join("team")).unwrap();
        let access = Access {
            write: base.join("me"),
            read: vec![base.join("team")],
        };
        let roots = Roots::open(&base, &access, None).unwrap();
        (dir, base, roots)
    }

    fn touch(path: &Path, age_secs: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
        let t = SystemTime::now() - Duration::from_secs(age_secs);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn patterns_newest_first_and_gitignore() {
        let (_d, base, roots) = setup();
        let me = base.join("me");
        touch(&me.join("a.rs"), 30);
        touch(&me.join("src/b.rs"), 10);
        touch(&me.join("src/deep/c.rs"), 20);
        touch(&me.join("src/d.txt"), 5);
        touch(&me.join("target/e.rs"), 1);
        touch(&me.join(".hidden/f.rs"), 1);
        std::fs::write(me.join(".gitignore"), "target/\n").unwrap();
        assert_eq!(
            glob(&roots, "**/*.rs", None).unwrap(),
            "src/b.rs\nsrc/deep/c.rs\na.rs"
        );
        assert_eq!(glob(&roots, "*.rs", None).unwrap(), "a.rs");
        assert_eq!(glob(&roots, "*.rs", Some("src")).unwrap(), "src/b.rs");
        assert_eq!(
            glob(&roots, "**/*.{rs,txt}", Some("src")).unwrap(),
            "src/d.txt\nsrc/b.rs\nsrc/deep/c.rs"
        );
        // The workspace's .gitignore holds when searching below it.
        std::fs::write(me.join("src/target.rs"), "x").unwrap();
        std::fs::write(me.join(".gitignore"), "target/\nsrc/deep/\n").unwrap();
        assert!(
            !glob(&roots, "**/*.rs", Some("src"))
                .unwrap()
                .contains("deep")
        );
        assert!(
            glob(&roots, "*.zig", None)
                .unwrap()
                .starts_with("No files found")
        );
        let err = glob(&roots, "a[", None).unwrap_err();
        assert!(err.contains("invalid glob"), "{err}");
    }

    #[test]
    fn ignore_files_above_the_root_do_not_apply() {
        let (_d, base, roots) = setup();
        std::fs::write(base.join(".gitignore"), "*\n").unwrap();
        std::fs::write(base.parent().unwrap().join(".gitignore"), "*\n").unwrap();
        touch(&base.join("me/src/x.rs"), 1);
        assert_eq!(glob(&roots, "**/*.rs", None).unwrap(), "src/x.rs");
        assert_eq!(glob(&roots, "*.rs", Some("src")).unwrap(), "src/x.rs");
    }

    #[test]
    fn outside_paths_are_refused_and_links_not_followed() {
        let (_d, base, roots) = setup();
        touch(&base.join("team/report.md"), 1);
        touch(&base.join("sibling/secret.md"), 1);
        let team = base.join("team");
        assert_eq!(
            glob(&roots, "*.md", Some(team.to_str().unwrap())).unwrap(),
            team.join("report.md").display().to_string()
        );
        let err = glob(&roots, "*.md", Some("../sibling")).unwrap_err();
        assert!(err.contains("outside"), "{err}");
        std::os::unix::fs::symlink(base.join("sibling"), base.join("me/link")).unwrap();
        assert!(
            glob(&roots, "**/*.md", None)
                .unwrap()
                .starts_with("No files found")
        );
        let err = glob(&roots, "/etc/*", None).unwrap_err();
        assert!(err.contains("absolute"), "{err}");
    }

    #[test]
    fn results_are_capped() {
        let (_d, base, roots) = setup();
        for i in 0..(MAX_FILES + 5) {
            std::fs::create_dir_all(base.join("me/many")).unwrap();
            std::fs::write(base.join(format!("me/many/{i}.log")), "").unwrap();
        }
        let out = glob(&roots, "many/*.log", None).unwrap();
        assert_eq!(out.lines().count(), MAX_FILES + 1);
        assert!(out.ends_with("(5 more files not shown: 1005 match; the newest 1000 are listed. Use a narrower pattern or path.)"), "{}", out.lines().last().unwrap());
    }
}
