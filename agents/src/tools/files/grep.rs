//! `Grep`: ripgrep's search (`grep-regex`, `grep-searcher`) over ripgrep's walk (see `glob`).
//!
//! Output follows Claude Code's Grep, which is `rg`'s: `files_with_matches` (the default) lists the
//! matching files newest first (by modification time, then path, as Claude Code sorts them);
//! `content` prints `path:line:text` (`-n`, on by default) with `-A/-B/-C` context lines as
//! `path-line-text` and `--` between groups, files in path order; `count` prints `path:count`
//! (matching lines) in path order with the total.
//!
//! Every file is opened beneath the handle of the directory the walk listed it in (`openat2`, no
//! symlinks, non-blocking; see `walk`), so a directory swapped for a symlink during the walk still
//! cannot lead the search out, and what is searched must still be a regular file on the open
//! handle (a FIFO swapped in is never read). Files with several hard links are skipped (and counted
//! in the answer), as Read refuses them; binary files (a NUL byte) are skipped, as `rg` does. Paths
//! are shown through `show`.
//!
//! Results are capped and the cut is said: `head_limit` first (entries or lines), then at most
//! [`MAX_FILES`] files and [`MAX_OUTPUT_CHARS`] characters; each shown line is cut at
//! [`MAX_LINE_CHARS`]. The matches held in memory are bounded too ([`MAX_COLLECTED_BYTES`]): past
//! it the walk stops and the answer says the search was incomplete.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;

use super::access::{Roots, open_error};
use super::glob::{mtime, search_path, walk};
use super::show;
use super::walk::{Entry, Flow};

/// Files listed at most.
pub const MAX_FILES: usize = 1000;
/// Characters of output at most.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Characters of one shown line.
pub const MAX_LINE_CHARS: usize = 500;
/// Bytes of matched text held while searching; past it the search stops.
pub const MAX_COLLECTED_BYTES: usize = 4 * 1024 * 1024;

/// What Grep prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines.
    Content,
    /// Matching files.
    #[default]
    FilesWithMatches,
    /// Matching lines per file.
    Count,
}

/// A Grep call's options (decoded from the model's arguments).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The regex.
    pub pattern: String,
    /// File or directory (default the workspace).
    pub path: Option<String>,
    /// Only files whose name matches this glob (`rg -g`).
    pub glob: Option<String>,
    /// The output mode.
    pub mode: OutputMode,
    /// Case-insensitive.
    pub case_insensitive: bool,
    /// Line numbers in content mode.
    pub line_numbers: bool,
    /// Context lines after / before each match.
    pub after: usize,
    /// Context lines before each match.
    pub before: usize,
    /// Only the first N entries (files, lines or counts).
    pub head_limit: Option<usize>,
}

/// One line of content output.
#[derive(Debug)]
struct Line {
    /// `true` for a match, `false` for context; `None` line number is a `--` break.
    matched: bool,
    number: Option<u64>,
    text: String,
}

/// What one file yielded.
#[derive(Debug)]
struct Hit {
    path: PathBuf,
    mtime: (i64, i64),
    count: u64,
    lines: Vec<Line>,
}

/// The sink of one file: counts matching lines, keeps content lines when asked.
struct Collect<'a> {
    content: bool,
    stop_at_first: bool,
    count: u64,
    lines: Vec<Line>,
    binary: bool,
    collected: &'a AtomicUsize,
}

impl Collect<'_> {
    fn push(&mut self, matched: bool, number: Option<u64>, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let text = String::from_utf8_lossy(bytes);
        let mut text: String = if text.chars().count() > MAX_LINE_CHARS {
            let mut t: String = text.chars().take(MAX_LINE_CHARS).collect();
            t.push_str(" … [line cut]");
            t
        } else {
            text.into_owned()
        };
        text.shrink_to_fit();
        self.collected.fetch_add(text.len() + 16, Ordering::Relaxed);
        self.lines.push(Line {
            matched,
            number,
            text,
        });
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        let first = mat.line_number();
        for (i, line) in mat.lines().enumerate() {
            self.count += 1;
            if self.content {
                self.push(true, first.map(|n| n + i as u64), line);
            }
        }
        Ok(!self.stop_at_first)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        if self.content {
            self.push(false, ctx.line_number(), ctx.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        if self.content && !self.lines.is_empty() {
            self.lines.push(Line {
                matched: false,
                number: None,
                text: String::new(),
            });
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, std::io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// `Grep`; the text is for the model.
pub fn grep(roots: &Roots, opts: &Options) -> Result<String, String> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(opts.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&opts.pattern)
        .map_err(|e| format!("invalid regex `{}`: {e}", show::text(&opts.pattern)))?;
    let search = search_path(roots, opts.path.as_deref())?;
    let mut walk = walk(roots, &search)?;
    if let Some(glob) = &opts.glob {
        let invalid = |e: ignore::Error| format!("invalid `glob` `{}`: {e}", show::text(glob));
        let mut ov = OverrideBuilder::new(&search.path);
        for part in split_glob(glob) {
            ov.add(&part).map_err(invalid)?;
        }
        walk.overrides(ov.build().map_err(invalid)?);
    }
    let content = opts.mode == OutputMode::Content;
    let hits: Mutex<Vec<Hit>> = Mutex::new(Vec::new());
    let collected = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    let hard_linked = AtomicUsize::new(0);
    walk.run(|| {
        let mut searcher = SearcherBuilder::new()
            .line_number(opts.line_numbers || content)
            .before_context(if content { opts.before } else { 0 })
            .after_context(if content { opts.after } else { 0 })
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        let (matcher, hits, collected, stopped) = (&matcher, &hits, &collected, &stopped);
        let hard_linked = &hard_linked;
        move |entry: Entry<'_>| {
            let Ok((file, stat)) = entry.open() else {
                return Flow::Continue;
            };
            if stat.st_nlink > 1 {
                hard_linked.fetch_add(1, Ordering::Relaxed);
                return Flow::Continue;
            }
            let mut sink = Collect {
                content,
                stop_at_first: opts.mode == OutputMode::FilesWithMatches,
                count: 0,
                lines: Vec::new(),
                binary: false,
                collected,
            };
            if searcher.search_file(matcher, &file, &mut sink).is_err() || sink.binary {
                return Flow::Continue;
            }
            if sink.count > 0 {
                hits.lock().unwrap_or_else(|p| p.into_inner()).push(Hit {
                    path: entry.into_path(),
                    mtime: mtime(&stat),
                    count: sink.count,
                    lines: sink.lines,
                });
            }
            if collected.load(Ordering::Relaxed) > MAX_COLLECTED_BYTES {
                stopped.store(true, Ordering::Relaxed);
                return Flow::Quit;
            }
            Flow::Continue
        }
    })
    .map_err(|e| open_error(&e, &roots.display(&search.path)))?;
    let mut hits = hits.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut notes = Vec::new();
    if stopped.load(Ordering::Relaxed) {
        notes.push(format!(
            "the search stopped early after {} MB of matching lines; the results are incomplete: \
             narrow the pattern, `path` or `glob`",
            MAX_COLLECTED_BYTES / (1024 * 1024)
        ));
    }
    let skipped = hard_linked.load(Ordering::Relaxed);
    if skipped > 0 {
        notes.push(format!(
            "{skipped} file(s) with several hard links were not searched (a hard link can point \
             outside your workspace)"
        ));
    }
    let out = match opts.mode {
        OutputMode::FilesWithMatches => {
            hits.sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));
            let rows: Vec<String> = hits.iter().map(|h| roots.display(&h.path)).collect();
            if rows.is_empty() {
                "No files found".to_string()
            } else {
                let total = rows.len();
                let (body, cut) = cap(rows, opts.head_limit, MAX_FILES, &mut notes, "files");
                format!(
                    "Found {total} file{}{}\n{body}",
                    if total == 1 { "" } else { "s" },
                    if cut { " (list cut, see the end)" } else { "" }
                )
            }
        }
        OutputMode::Count => {
            hits.sort_by(|a, b| a.path.cmp(&b.path));
            let total: u64 = hits.iter().map(|h| h.count).sum();
            let files = hits.len();
            let rows: Vec<String> = hits
                .iter()
                .map(|h| format!("{}:{}", roots.display(&h.path), h.count))
                .collect();
            if rows.is_empty() {
                "No matches found".to_string()
            } else {
                let (body, _) = cap(rows, opts.head_limit, MAX_FILES, &mut notes, "files");
                format!(
                    "{body}\n\nFound {total} matching line{} across {files} file{}.",
                    if total == 1 { "" } else { "s" },
                    if files == 1 { "" } else { "s" }
                )
            }
        }
        OutputMode::Content => {
            hits.sort_by(|a, b| a.path.cmp(&b.path));
            let mut rows = Vec::new();
            for (i, hit) in hits.iter().enumerate() {
                let shown = roots.display(&hit.path);
                if i > 0 && (opts.before > 0 || opts.after > 0) {
                    rows.push("--".to_string());
                }
                for line in &hit.lines {
                    rows.push(match (line.number, opts.line_numbers) {
                        (None, _) => "--".to_string(),
                        (Some(n), true) => {
                            let sep = if line.matched { ':' } else { '-' };
                            format!("{shown}{sep}{n}{sep}{}", line.text)
                        }
                        (Some(_), false) => {
                            let sep = if line.matched { ':' } else { '-' };
                            format!("{shown}{sep}{}", line.text)
                        }
                    });
                }
            }
            if rows.is_empty() {
                "No matches found".to_string()
            } else {
                cap(rows, opts.head_limit, usize::MAX, &mut notes, "lines").0
            }
        }
    };
    Ok(if notes.is_empty() {
        out
    } else {
        format!("{out}\n({})", notes.join("; "))
    })
}

/// Keep the first `head_limit` rows, then at most `max_rows` and [`MAX_OUTPUT_CHARS`]; say what was
/// cut. Returns the text and whether anything was cut.
fn cap(
    rows: Vec<String>,
    head_limit: Option<usize>,
    max_rows: usize,
    notes: &mut Vec<String>,
    what: &str,
) -> (String, bool) {
    let total = rows.len();
    let mut limit = total;
    let mut cut_by = None;
    if let Some(h) = head_limit.filter(|h| *h < limit) {
        limit = h;
        cut_by = Some(format!("head_limit={h}"));
    }
    if max_rows < limit {
        limit = max_rows;
        cut_by = Some(format!("the cap of {max_rows} {what}"));
    }
    let mut out = String::new();
    let mut shown = 0;
    for row in rows.into_iter().take(limit) {
        if out.len() + row.len() + 1 > MAX_OUTPUT_CHARS && shown > 0 {
            cut_by = Some(format!("the cap of {MAX_OUTPUT_CHARS} characters"));
            break;
        }
        out.push_str(&row);
        out.push('\n');
        shown += 1;
    }
    out.pop();
    let cut = shown < total;
    if let Some(by) = cut_by.filter(|_| cut) {
        notes.push(format!(
            "showing the first {shown} of {total} {what}, cut by {by}"
        ));
    }
    (out, cut)
}

/// `glob` may list several patterns separated by spaces or commas outside braces
/// (`"*.ts *.tsx"`, `"*.{ts,tsx}"`), as Claude Code's Grep accepts.
fn split_glob(glob: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in glob.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if (c == ' ' || c == ',') && depth <= 0 {
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::access::Access;
    use super::super::testing::{WOULD_HIDE, plant_ignore_traps};
    use super::*;
    use std::path::Path;
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

    fn put(path: &Path, content: &str, age_secs: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        let t = SystemTime::now() - Duration::from_secs(age_secs);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    fn opts(pattern: &str) -> Options {
        Options {
            pattern: pattern.into(),
            line_numbers: true,
            ..Options::default()
        }
    }

    fn tree(base: &Path) {
        let me = base.join("me");
        put(&me.join("old.rs"), "fn main() {}\n// TODO old\n", 30);
        put(
            &me.join("src/new.rs"),
            "a\nb\nlet todo = 1;\nc\nd\ne\nf\nTODO new\n",
            1,
        );
        put(&me.join("target/gen.rs"), "TODO generated\n", 1);
        put(&me.join("bin.dat"), "TODO\0binary", 1);
        std::fs::write(me.join(".gitignore"), "target/\n").unwrap();
    }

    #[test]
    fn files_with_matches_newest_first() {
        let (_d, base, roots) = setup();
        tree(&base);
        assert_eq!(
            grep(&roots, &opts("TODO")).unwrap(),
            "Found 2 files\nsrc/new.rs\nold.rs"
        );
        let mut o = opts("todo");
        o.case_insensitive = true;
        o.glob = Some("*.rs".into());
        assert_eq!(
            grep(&roots, &o).unwrap(),
            "Found 2 files\nsrc/new.rs\nold.rs"
        );
        o.glob = Some("src/**".into());
        assert_eq!(grep(&roots, &o).unwrap(), "Found 1 file\nsrc/new.rs");
        assert_eq!(
            grep(&roots, &opts("nothing here")).unwrap(),
            "No files found"
        );
    }

    #[test]
    fn content_with_line_numbers_and_context() {
        let (_d, base, roots) = setup();
        tree(&base);
        let mut o = opts("TODO");
        o.mode = OutputMode::Content;
        assert_eq!(
            grep(&roots, &o).unwrap(),
            "old.rs:2:// TODO old\nsrc/new.rs:8:TODO new"
        );
        o.line_numbers = false;
        assert_eq!(
            grep(&roots, &o).unwrap(),
            "old.rs:// TODO old\nsrc/new.rs:TODO new"
        );
        let mut o = opts("(?i)todo");
        o.mode = OutputMode::Content;
        o.path = Some("src".into());
        o.before = 1;
        o.after = 1;
        assert_eq!(
            grep(&roots, &o).unwrap(),
            "src/new.rs-2-b\nsrc/new.rs:3:let todo = 1;\nsrc/new.rs-4-c\n--\nsrc/new.rs-7-f\nsrc/new.rs:8:TODO new"
        );
    }

    #[test]
    fn count_mode_and_head_limit() {
        let (_d, base, roots) = setup();
        tree(&base);
        let mut o = opts("(?i)todo");
        o.mode = OutputMode::Count;
        assert_eq!(
            grep(&roots, &o).unwrap(),
            "old.rs:1\nsrc/new.rs:2\n\nFound 3 matching lines across 2 files."
        );
        o.head_limit = Some(1);
        let out = grep(&roots, &o).unwrap();
        assert!(out.starts_with("old.rs:1\n\nFound 3"), "{out}");
        assert!(
            out.contains("showing the first 1 of 2 files, cut by head_limit=1"),
            "{out}"
        );
        let mut o = opts("(?i)todo");
        o.head_limit = Some(1);
        let out = grep(&roots, &o).unwrap();
        assert!(
            out.starts_with("Found 2 files (list cut, see the end)\nsrc/new.rs\n("),
            "{out}"
        );
    }

    #[test]
    fn caps_say_what_was_cut() {
        let (_d, base, roots) = setup();
        let line = "match ".repeat(20);
        let content: String = (0..2000).map(|_| format!("{line}\n")).collect();
        put(&base.join("me/big.txt"), &content, 1);
        let mut o = opts("match");
        o.mode = OutputMode::Content;
        let out = grep(&roots, &o).unwrap();
        assert!(out.len() <= MAX_OUTPUT_CHARS + 200, "{}", out.len());
        assert!(
            out.contains("of 2000 lines, cut by the cap of 30000 characters"),
            "{out}"
        );
        for i in 0..(MAX_FILES + 3) {
            put(&base.join(format!("me/many/{i}.txt")), "match\n", 1);
        }
        let out = grep(&roots, &opts("match")).unwrap();
        assert!(out.starts_with("Found 1004 files"));
        assert!(out.contains("showing the first 1000 of 1004 files, cut by the cap of 1000 files"));
    }

    #[test]
    fn regex_errors_outside_paths_and_hard_links() {
        let (_d, base, roots) = setup();
        tree(&base);
        let err = grep(&roots, &opts("(unclosed")).unwrap_err();
        assert!(err.contains("invalid regex"), "{err}");
        let mut o = opts("x");
        o.path = Some("../..".into());
        assert!(grep(&roots, &o).unwrap_err().contains("outside"));
        put(&base.join("secret"), "TODO secret\n", 1);
        std::fs::hard_link(base.join("secret"), base.join("me/hl.txt")).unwrap();
        std::os::unix::fs::symlink(base.join("secret"), base.join("me/sl.txt")).unwrap();
        let out = grep(&roots, &opts("secret")).unwrap();
        assert!(out.starts_with("No files found"), "{out}");
        assert!(
            out.contains("1 file(s) with several hard links were not searched"),
            "{out}"
        );
        // A descendant's workspace is searchable.
        put(&base.join("team/r.md"), "TODO team\n", 1);
        let mut o = opts("team");
        o.path = Some(base.join("team").display().to_string());
        assert_eq!(grep(&roots, &o).unwrap(), "Found 1 file\n/team/team/r.md");
    }

    #[test]
    fn planted_ignore_files_and_fifos_are_never_read() {
        let (_d, base, roots) = setup();
        plant_ignore_traps(&base);
        // It returns, and every file holding the needle is found: nothing was hidden by an ignore
        // file outside, and the FIFO `pipe.txt` was not opened.
        let out = grep(&roots, &opts("needle")).unwrap();
        let mut listed: Vec<&str> = out.lines().skip(1).collect();
        listed.sort();
        let mut expected: Vec<&str> = WOULD_HIDE.iter().copied().chain(["plain.txt"]).collect();
        expected.sort();
        assert_eq!(out.lines().next(), Some("Found 5 files"), "{out}");
        assert_eq!(listed, expected, "{out}");
        let mut o = opts("needle");
        o.mode = OutputMode::Content;
        o.path = Some("oracle".into());
        assert_eq!(grep(&roots, &o).unwrap(), "oracle/secret-line.txt:1:needle");
        // A FIFO named as the path is not opened either.
        let mut o = opts("needle");
        o.path = Some("pipe.txt".into());
        assert_eq!(grep(&roots, &o).unwrap(), "No files found");
        o.path = Some("fifo".into());
        assert_eq!(grep(&roots, &o).unwrap(), "No files found");
    }

    #[test]
    fn names_with_control_characters_are_escaped() {
        let (_d, base, roots) = setup();
        let me = base.join("me");
        let names = super::super::testing::control_names();
        for (name, _) in &names {
            std::fs::write(me.join(name), "needle\n").unwrap();
        }
        let out = grep(&roots, &opts("needle")).unwrap();
        assert_eq!(out.lines().count(), names.len() + 1, "{out}");
        assert!(out.starts_with("Found 4 files\n"), "{out}");
        let mut o = opts("needle");
        o.mode = OutputMode::Content;
        let content = grep(&roots, &o).unwrap();
        let mut o = opts("needle");
        o.mode = OutputMode::Count;
        let count = grep(&roots, &o).unwrap();
        for (_, shown) in &names {
            assert!(out.lines().any(|l| l == *shown), "{shown} not in {out}");
            assert!(
                content.lines().any(|l| l == format!("{shown}:1:needle")),
                "{content}"
            );
            assert!(count.lines().any(|l| l == format!("{shown}:1")), "{count}");
        }
    }

    #[test]
    fn globs_split_outside_braces() {
        assert_eq!(split_glob("*.ts *.tsx"), ["*.ts", "*.tsx"]);
        assert_eq!(split_glob("*.{ts,tsx}"), ["*.{ts,tsx}"]);
    }
}
