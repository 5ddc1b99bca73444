//! Where `unsafe` may live: one module of the workspace, `infer/src/kernel/x86.rs` (the VNNI kernels,
//! issue 38), and nowhere else. See `docs/development.md`, "Where `unsafe` may live".
//!
//! Checked here, on the sources (comments and string literals stripped, so prose about `unsafe`
//! does not count):
//! - no `unsafe` block, fn, impl, trait or extern, and no `allow(unsafe_code)`, in any `.rs` file of
//!   the workspace but that one;
//! - in that one, every `unsafe` block is directly preceded by a `// SAFETY:` comment, and it denies
//!   `unsafe_op_in_unsafe_fn`;
//! - every crate's `Cargo.toml` takes the workspace's lints (`unsafe_code = "forbid"`), except
//!   `infer`'s, whose own list is the workspace's with `unsafe_code = "deny"` (so only the module
//!   that says `#![allow(unsafe_code)]` can use it).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

/// The one file allowed `unsafe`, relative to the workspace root.
const THE_MODULE: &str = "infer/src/kernel/x86.rs";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, skipping build output and hidden directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The source with comments and the contents of string and char literals blanked (newlines kept,
/// so line numbers still match).
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        match c[i] {
            '/' if next == Some('/') => {
                while i < c.len() && c[i] != '\n' {
                    out.push(' ');
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        out.push_str("  ");
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        out.push_str("  ");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        out.push(blank(c[i]));
                        i += 1;
                    }
                }
            }
            'r' if (next == Some('"') || next == Some('#'))
                && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_')) =>
            {
                // A raw string: r"…" or r#…#"…"#…#.
                let mut j = i + 1;
                let mut hashes = 0;
                while c.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if c.get(j) != Some(&'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let body_start = j + 1;
                let rest: String = c[body_start..].iter().collect();
                let end = rest.find(&close).map_or(c.len(), |at| {
                    body_start + rest[..at].chars().count() + close.len()
                });
                for &ch in &c[i..end] {
                    out.push(blank(ch));
                }
                i = end;
            }
            '"' => {
                out.push(' ');
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' {
                        out.push(' ');
                        i += 1;
                    }
                    if i < c.len() {
                        out.push(blank(c[i]));
                        i += 1;
                    }
                }
                out.push(' ');
                i += 1;
            }
            '\'' if next == Some('\\') => {
                // An escaped char literal: '\n', '\'', '\u{…}'.
                out.push(' ');
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    out.push(' ');
                    i += 1;
                }
                out.push_str("  ");
                i += 1;
            }
            '\'' if c.get(i + 2) == Some(&'\'') => {
                out.push_str("   ");
                i += 3;
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    out
}

/// Lines (1-based) where code uses `unsafe` as a keyword or allows `unsafe_code`.
fn unsafe_uses(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.contains("allow(unsafe_code)") {
            found.push((n + 1, "allow(unsafe_code)".to_owned()));
        }
        let bytes = line.as_bytes();
        for (at, _) in line.match_indices("unsafe") {
            let before = at.checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(at + 6).copied();
            let ident = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ident(before) && !ident(after) {
                found.push((n + 1, line.trim().to_owned()));
            }
        }
    }
    found
}

#[test]
fn unsafe_lives_only_in_the_kernel_module() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 100, "found only {} .rs files", files.len());
    let mut outside = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == THE_MODULE {
            continue;
        }
        let src = std::fs::read_to_string(path).unwrap();
        for (line, what) in unsafe_uses(&code_only(&src)) {
            outside.push(format!("{rel}:{line}: {what}"));
        }
    }
    assert!(
        outside.is_empty(),
        "`unsafe` outside {THE_MODULE} (the one module allowed it; see docs/development.md, \
         \"Where `unsafe` may live\"):\n{}",
        outside.join("\n")
    );
}

#[test]
fn every_unsafe_block_in_the_module_says_why_it_is_sound() {
    let src = std::fs::read_to_string(workspace_root().join(THE_MODULE)).unwrap();
    let code = code_only(&src);
    assert!(
        code.contains("#![deny(unsafe_op_in_unsafe_fn)]"),
        "{THE_MODULE} must deny unsafe_op_in_unsafe_fn"
    );
    let lines: Vec<&str> = src.lines().collect();
    let mut blocks = 0;
    for (n, what) in unsafe_uses(&code) {
        if what == "allow(unsafe_code)" {
            continue;
        }
        let line = code.lines().nth(n - 1).unwrap_or("");
        assert!(
            !line.contains("unsafe fn") && !line.contains("unsafe impl"),
            "{THE_MODULE}:{n}: only `unsafe` blocks calling the target-feature functions belong here"
        );
        blocks += 1;
        // The comment lines directly above the block (or above its statement).
        let comment: Vec<&str> = lines[..n - 1]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("//"))
            .collect();
        assert!(
            comment.iter().any(|l| l.starts_with("// SAFETY:")),
            "{THE_MODULE}:{n}: an `unsafe` block without a `// SAFETY:` comment right above it \
             (name the feature check and the bounds that make it sound)"
        );
    }
    assert!(
        blocks > 0,
        "no unsafe block found in {THE_MODULE}: is the scan broken?"
    );
}

/// The `key = value` lines of a `[section]` of a TOML file (comments and blank lines dropped).
fn section(toml: &str, name: &str) -> Option<Vec<String>> {
    let mut lines = toml.lines().skip_while(|l| l.trim() != format!("[{name}]"));
    lines.next()?;
    Some(
        lines
            .take_while(|l| !l.trim_start().starts_with('['))
            .map(|l| l.split('#').next().unwrap_or("").trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect(),
    )
}

#[test]
fn every_crate_forbids_unsafe_code_but_infer_denies_it() {
    let root = workspace_root();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rust = section(&workspace, "workspace.lints.rust").expect("[workspace.lints.rust]");
    let clippy = section(&workspace, "workspace.lints.clippy").expect("[workspace.lints.clippy]");
    assert!(
        rust.iter().any(|l| l == "unsafe_code = \"forbid\""),
        "the workspace must forbid unsafe_code: {rust:?}"
    );
    let members = workspace
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members list");
    let members: Vec<&str> = members.split('"').skip(1).step_by(2).collect();
    assert!(members.contains(&"infer"), "{members:?}");
    for member in members {
        let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        if member == "infer" {
            let own = section(&manifest, "lints.rust").expect("infer's [lints.rust]");
            let want: Vec<String> = rust
                .iter()
                .map(|l| {
                    if l.starts_with("unsafe_code") {
                        "unsafe_code = \"deny\"".to_owned()
                    } else {
                        l.clone()
                    }
                })
                .collect();
            assert_eq!(
                own, want,
                "infer's [lints.rust]: the workspace's, unsafe_code denied"
            );
            assert_eq!(
                section(&manifest, "lints.clippy"),
                Some(clippy.clone()),
                "infer's [lints.clippy] must be the workspace's"
            );
        } else {
            assert_eq!(
                section(&manifest, "lints"),
                Some(vec!["workspace = true".to_owned()]),
                "{member}/Cargo.toml must take the workspace's lints (`[lints] workspace = true`), \
                 which forbid unsafe_code"
            );
        }
    }
}

#[test]
fn the_scan_sees_through_comments_and_strings() {
    let src = "// unsafe { x }\nlet s = \"unsafe {\";\nlet r = r#\"unsafe fn\"#;\nlet c = '\"';\n\
               let unsafe_ = 1;\nunsafe { y }\n#[allow( unsafe_code )]\n/* unsafe */";
    let uses = unsafe_uses(&code_only(src));
    assert_eq!(
        uses.iter().map(|u| u.0).collect::<Vec<_>>(),
        vec![6, 7],
        "{uses:?}"
    );
}
