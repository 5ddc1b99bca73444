//! `Edit`: replace an exact string in a file this task has Read.
//!
//! `old_string` must occur exactly once (or `replace_all`), so the model's edit lands where it
//! meant; a miss or an ambiguous match is a tool error that says how many times it occurs. The
//! file is loaded (Edit needs it whole), up to [`MAX_EDIT_BYTES`], and written back atomically with
//! its permissions and owner (see `write`). The answer shows the edited lines, numbered, so the
//! model can check the result without another Read.

use std::io::Read;

use super::access::{Intent, Roots, open_error};
use super::tracking::{Snapshot, hash};
use super::write::{Writer, existing, replace};

/// The largest file Edit loads.
pub const MAX_EDIT_BYTES: u64 = 32 * 1024 * 1024;

/// `Edit {file_path, old_string, new_string, replace_all}`; the text is for the model.
pub fn edit(
    roots: &Roots,
    who: &Writer<'_>,
    file_path: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<String, String> {
    if old.is_empty() {
        return Err(
            "`old_string` is empty: give the exact text to replace (use Write to create a file)"
                .into(),
        );
    }
    if old == new {
        return Err("`old_string` and `new_string` are the same: nothing would change".into());
    }
    let resolved = roots.resolve(file_path, Intent::Write)?;
    let shown = roots.display(&resolved.path);
    let _writing = who.records.writing();
    let Some((file, stat)) = existing(&resolved, &shown)? else {
        return Err(format!(
            "`{shown}` does not exist: Edit changes existing files; use Write to create it"
        ));
    };
    if stat.st_size as u64 > MAX_EDIT_BYTES {
        return Err(format!(
            "`{shown}` is {} bytes, more than Edit loads ({MAX_EDIT_BYTES}); change it with Bash",
            stat.st_size
        ));
    }
    let mut bytes = Vec::with_capacity(stat.st_size as usize);
    file.take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(format!(
            "`{shown}` grew past {MAX_EDIT_BYTES} bytes while being read"
        ));
    }
    let current = Snapshot::of(&stat, hash(&bytes));
    who.records
        .check(who.agent, who.task, &resolved.path, &current, &shown)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("`{shown}` is not UTF-8 text; Edit changes text files only"))?;
    let count = text.matches(old).count();
    if count == 0 {
        return Err(format!(
            "`old_string` was not found in `{shown}`: it must match the file exactly, including \
             whitespace and indentation (Read the file to copy it)"
        ));
    }
    if count > 1 && !replace_all {
        return Err(format!(
            "`old_string` occurs {count} times in `{shown}`: include more surrounding lines to make \
             it unique, or set `replace_all` to change every occurrence"
        ));
    }
    let first = text.find(old).unwrap_or(0);
    let updated = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    let (dir, name) = resolved
        .parent_dir(false, who.owner)
        .map_err(|e| open_error(&e, &shown))?;
    let mode = stat.st_mode & 0o7777;
    let stat = replace(
        &dir,
        &name,
        updated.as_bytes(),
        mode,
        Some((stat.st_uid, stat.st_gid)),
    )
    .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    who.records.record(
        who.agent,
        who.task,
        &resolved.path,
        Snapshot::of(&stat, hash(updated.as_bytes())),
    );
    Ok(format!(
        "Edited `{shown}`: replaced {count} occurrence{}. The first edit, with context:\n{}",
        if count == 1 { "" } else { "s" },
        snippet(&updated, first, new)
    ))
}

/// Lines around the replacement that starts at byte `at`, `cat -n` style (a few lines of context,
/// at most 40 lines of the new text).
fn snippet(text: &str, at: usize, new: &str) -> String {
    let start_line = text[..at.min(text.len())].matches('\n').count();
    let new_lines = new.matches('\n').count() + 1;
    let from = start_line.saturating_sub(3);
    let to = start_line + new_lines.min(40) + 3;
    text.lines()
        .enumerate()
        .skip(from)
        .take(to - from)
        .map(|(i, line)| {
            let line: String = line.chars().take(super::read::MAX_LINE_CHARS).collect();
            format!("{:>6}\t{line}\n", i + 1)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::{do_read, setup};
    use super::super::tracking::ReadRecords;
    use super::*;

    #[test]
    fn uniqueness_replace_all_and_consecutive_edits() {
        let (_d, base, roots) = setup();
        let records = ReadRecords::default();
        let who = Writer {
            agent: "dev",
            task: 1,
            records: &records,
            owner: None,
        };
        let path = base.join("me/lib.rs");
        std::fs::write(&path, "fn a() {}\nfn b() {}\nlet x = 1;\nlet x = 1;\n").unwrap();
        let err = edit(&roots, &who, "lib.rs", "fn a", "fn z", false).unwrap_err();
        assert!(err.contains("Read it first"), "{err}");
        do_read(&roots, &records, "lib.rs", 1);
        let err = edit(&roots, &who, "lib.rs", "let x = 1;", "let y = 2;", false).unwrap_err();
        assert!(err.contains("occurs 2 times"), "{err}");
        let err = edit(&roots, &who, "lib.rs", "fn c", "fn d", false).unwrap_err();
        assert!(err.contains("not found"), "{err}");
        let err = edit(&roots, &who, "lib.rs", "fn a", "fn a", false).unwrap_err();
        assert!(err.contains("the same"), "{err}");
        let out = edit(&roots, &who, "lib.rs", "fn a()", "fn alpha()", false).unwrap();
        assert!(out.contains("replaced 1 occurrence."), "{out}");
        assert!(out.contains("     1\tfn alpha() {}"), "{out}");
        // A second edit needs no new Read: the first one was recorded.
        let out = edit(&roots, &who, "lib.rs", "let x = 1;", "let y = 2;", true).unwrap();
        assert!(out.contains("replaced 2 occurrences"), "{out}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "fn alpha() {}\nfn b() {}\nlet y = 2;\nlet y = 2;\n"
        );
        // Someone else changes it: Read again.
        std::fs::write(&path, "fn b() {}\n").unwrap();
        let err = edit(&roots, &who, "lib.rs", "fn b", "fn c", false).unwrap_err();
        assert!(err.contains("changed on disk"), "{err}");
        let err = edit(&roots, &who, "nope.rs", "a", "b", false).unwrap_err();
        assert!(err.contains("use Write"), "{err}");
    }

    #[test]
    fn hard_links_are_refused() {
        let (_d, base, roots) = setup();
        let records = ReadRecords::default();
        let who = Writer {
            agent: "dev",
            task: 1,
            records: &records,
            owner: None,
        };
        std::fs::write(base.join("outside"), "secret").unwrap();
        std::fs::hard_link(base.join("outside"), base.join("me/hl")).unwrap();
        let err = edit(&roots, &who, "hl", "secret", "public", false).unwrap_err();
        assert!(err.contains("hard links"), "{err}");
        assert_eq!(
            std::fs::read_to_string(base.join("outside")).unwrap(),
            "secret"
        );
    }
}
