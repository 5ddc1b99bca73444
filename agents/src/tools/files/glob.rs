//! `Glob`: files whose path matches a pattern, newest first.
//!
//! The walk is the one Glob and Grep share (see `walk`): ripgrep's rules (`.gitignore`, `.ignore`
//! and `.rgignore` honoured even outside a git repository, hidden files skipped, symlinks never
//! followed), every directory and ignore file opened beneath the root's handle.
//!
//! Patterns are `globset` globs matched against the path relative to `path`: `*` stays within one
//! directory, `**` crosses directories, `{a,b}` alternates. Results are capped at [`MAX_FILES`];
//! each is shown through `show` (a name with a newline cannot pass for two entries).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use globset::GlobBuilder;

use super::access::{Intent, Resolved, Roots, open_error};
use super::show;
use super::walk::{Entry, Flow, Walk};

/// Files listed at most.
pub const MAX_FILES: usize = 1000;

/// Resolve the `path` argument of Grep and Glob (default: the workspace).
pub fn search_path(roots: &Roots, path: Option<&str>) -> Result<Resolved, String> {
    let input = path.unwrap_or(".");
    let resolved = roots.resolve(input, Intent::Read)?;
    if !resolved.exists {
        return Err(format!("`{}` does not exist", show::text(input)));
    }
    Ok(resolved)
}

/// The walk over a resolved search path; the error is for the model.
pub fn walk(roots: &Roots, search: &Resolved) -> Result<Walk, String> {
    Walk::new(search).map_err(|e| open_error(&e, &roots.display(&search.path)))
}

/// A file's modification time, for newest-first order.
pub fn mtime(stat: &rustix::fs::Stat) -> (i64, i64) {
    (stat.st_mtime, stat.st_mtime_nsec as i64)
}

/// `Glob {pattern, path}`; the text is for the model.
pub fn glob(roots: &Roots, pattern: &str, path: Option<&str>) -> Result<String, String> {
    if Path::new(pattern).is_absolute() {
        return Err(format!(
            "the pattern `{}` is absolute: patterns are matched relative to `path` (default \
             your workspace); give the directory as `path` and a relative pattern such as `**/*.rs`",
            show::text(pattern)
        ));
    }
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("invalid glob pattern `{}`: {e}", show::text(pattern)))?
        .compile_matcher();
    let search = search_path(roots, path)?;
    let found: Mutex<Vec<(PathBuf, (i64, i64))>> = Mutex::new(Vec::new());
    let base = &search.path;
    walk(roots, &search)?
        .run(|| {
            |entry: Entry<'_>| {
                let rel = entry.path().strip_prefix(base).unwrap_or(entry.path());
                if matcher.is_match(rel) {
                    let time = entry.stat().map(|s| mtime(&s)).unwrap_or((0, 0));
                    found
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((entry.into_path(), time));
                }
                Flow::Continue
            }
        })
        .map_err(|e| open_error(&e, &roots.display(base)))?;
    let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
    if found.is_empty() {
        return Ok(format!(
            "No files found matching `{}` in `{}`",
            show::text(pattern),
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
    use super::super::testing::{WOULD_HIDE, control_names, plant_ignore_traps};
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
        // A descendant's file is shown where Bash sees it (`/team/<name>`), not by its host path.
        assert_eq!(
            glob(&roots, "*.md", Some(team.to_str().unwrap())).unwrap(),
            "/team/team/report.md"
        );
        assert_eq!(
            glob(&roots, "*.md", Some("../team")).unwrap(),
            "/team/team/report.md"
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
    fn planted_ignore_files_are_never_read() {
        let (_d, base, roots) = setup();
        plant_ignore_traps(&base);
        // It returns (no /dev/zero read to the end, no FIFO waited on), and hides nothing that a
        // planted link or hard link to an outside file names.
        let out = glob(&roots, "**/*.txt", None).unwrap();
        let mut listed: Vec<&str> = out.lines().collect();
        listed.sort();
        let mut expected: Vec<&str> = WOULD_HIDE.iter().copied().chain(["plain.txt"]).collect();
        expected.sort();
        assert_eq!(listed, expected, "{out}");
        // Searching below them, too (their rules are then the ancestors').
        for dir in ["oracle", "linked", "repo", "info", "fifo"] {
            let out = glob(&roots, "*", Some(dir)).unwrap();
            assert!(!out.contains("outside") && !out.contains("rules"), "{out}");
        }
        assert_eq!(
            glob(&roots, "*", Some("oracle")).unwrap(),
            "oracle/secret-line.txt"
        );
        // The FIFO itself is not listed, and naming it as the path finds nothing.
        assert!(
            glob(&roots, "*", Some("pipe.txt"))
                .unwrap()
                .starts_with("No files found")
        );
    }

    #[test]
    fn names_with_control_characters_are_escaped() {
        let (_d, base, roots) = setup();
        let me = base.join("me");
        let names = control_names();
        for (name, _) in &names {
            std::fs::write(me.join(name), "x").unwrap();
        }
        let out = glob(&roots, "*", None).unwrap();
        assert_eq!(out.lines().count(), names.len(), "{out}");
        for (_, shown) in &names {
            assert!(out.lines().any(|l| l == *shown), "{shown} not in {out}");
        }
        assert!(!out.contains('\x1b') && !out.contains('\u{85}'), "{out:?}");
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
