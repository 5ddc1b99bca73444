//! `Read`: a file as `cat -n` numbered lines, streamed.
//!
//! The file is never loaded whole: it is read through a fixed buffer, lines outside
//! `offset..offset+limit` are only counted, and of each shown line at most [`MAX_LINE_CHARS`]
//! characters are kept (a 10 MB single-line file costs a few KB). The whole file still passes
//! through SHA-256, because the read-before-write record (see `tracking`) needs its hash.
//!
//! Binary files are refused: a NUL byte in the first 8 KB (as `git` and ripgrep judge), or more than
//! 10% of it (and at least 4 bytes) invalid UTF-8; other invalid UTF-8 is shown with U+FFFD. The output always ends with
//! what was left out: lines before `offset`, lines after the shown range, cut lines, and an output
//! cut at [`MAX_OUTPUT_CHARS`].

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};

use super::tracking::{Hasher, Snapshot};

/// Lines shown when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2000;
/// Characters of one line shown; the rest is cut with a note.
pub const MAX_LINE_CHARS: usize = 2000;
/// Characters of output; a longer window is cut with a note saying where to continue.
pub const MAX_OUTPUT_CHARS: usize = 100_000;
/// The head inspected for binary content.
const SNIFF_BYTES: usize = 8192;

/// A successful Read: the text for the model and the file as seen.
pub struct ReadOutput {
    /// Numbered lines and the closing note.
    pub text: String,
    /// The file's size, mtime and hash.
    pub snapshot: Snapshot,
}

/// Read `file` (already checked to be a regular file, `stat` its metadata), showing lines
/// `offset..offset+limit` (1-based). The error (binary, I/O) is for the model.
pub fn read(
    mut file: File,
    stat: &rustix::fs::Stat,
    shown: &str,
    offset: usize,
    limit: usize,
) -> Result<ReadOutput, String> {
    let io_err = |e: std::io::Error| format!("cannot read `{shown}`: {e}");
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(io_err)?;
    if let Some(why) = binary(&head) {
        return Err(format!(
            "`{shown}` looks like a binary file ({why}) and is not shown: Read shows text files only"
        ));
    }
    let mut reader = BufReader::with_capacity(64 * 1024, Cursor::new(head).chain(file));
    let mut hasher = Hasher::default();
    let mut lines = Lines::new(offset, limit);
    loop {
        let chunk = reader.fill_buf().map_err(io_err)?;
        if chunk.is_empty() {
            break;
        }
        hasher.update(chunk);
        lines.feed(chunk);
        let n = chunk.len();
        reader.consume(n);
    }
    let text = lines.finish(shown);
    Ok(ReadOutput {
        text,
        snapshot: Snapshot::of(stat, hasher.finish()),
    })
}

/// Why `head` looks binary, if it does.
pub fn binary(head: &[u8]) -> Option<String> {
    if head.contains(&0) {
        return Some("it contains NUL bytes".into());
    }
    // Invalid bytes, ignoring a character cut by the end of the sample.
    let mut invalid = 0usize;
    for chunk in head.utf8_chunks() {
        invalid += chunk.invalid().len();
    }
    let tail_cut = head.len() >= SNIFF_BYTES
        && std::str::from_utf8(head)
            .err()
            .is_some_and(|e| e.error_len().is_none());
    if tail_cut {
        invalid = invalid.saturating_sub(3);
    }
    if invalid >= 4 && invalid * 10 > head.len() {
        return Some(format!(
            "{}% of its first {} bytes are not UTF-8",
            invalid * 100 / head.len(),
            head.len()
        ));
    }
    None
}

/// The line splitter: counts every line, keeps the shown ones (bounded).
struct Lines {
    /// First shown line (1-based).
    first: usize,
    /// Last shown line (inclusive).
    last: usize,
    /// The line being read (1-based).
    line: usize,
    /// Bytes of the current line, while it is shown (at most 4 bytes per kept character).
    current: Vec<u8>,
    /// Bytes of the current line beyond `current`.
    dropped: u64,
    /// Whether the current line has any byte (a last line without newline still counts).
    open: bool,
    /// The output so far.
    out: String,
    /// Lines whose text was cut.
    cut_lines: usize,
    /// The line where the output was cut at `MAX_OUTPUT_CHARS`, if it was.
    output_cut_at: Option<usize>,
    /// The last line shown.
    last_shown: usize,
}

impl Lines {
    fn new(offset: usize, limit: usize) -> Lines {
        let first = offset.max(1);
        Lines {
            first,
            last: first.saturating_add(limit).saturating_sub(1),
            line: 1,
            current: Vec::new(),
            dropped: 0,
            open: false,
            out: String::new(),
            cut_lines: 0,
            output_cut_at: None,
            last_shown: 0,
        }
    }

    fn shown(&self) -> bool {
        self.line >= self.first && self.line <= self.last && self.output_cut_at.is_none()
    }

    fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let end = memchr::memchr(b'\n', chunk);
            let part = &chunk[..end.unwrap_or(chunk.len())];
            if !part.is_empty() {
                self.open = true;
                if self.shown() {
                    let room = (MAX_LINE_CHARS * 4 + 4).saturating_sub(self.current.len());
                    let keep = part.len().min(room);
                    self.current.extend_from_slice(&part[..keep]);
                    self.dropped += (part.len() - keep) as u64;
                }
            }
            match end {
                Some(i) => {
                    self.end_line();
                    chunk = &chunk[i + 1..];
                }
                None => break,
            }
        }
    }

    fn end_line(&mut self) {
        if self.shown() {
            let mut bytes = std::mem::take(&mut self.current);
            if bytes.last() == Some(&b'\r') && self.dropped == 0 {
                bytes.pop();
            }
            let text = String::from_utf8_lossy(&bytes);
            let mut shown: String = text.chars().take(MAX_LINE_CHARS).collect();
            let rest = (text.len() - shown.len()) as u64 + self.dropped;
            if rest > 0 {
                self.cut_lines += 1;
                shown.push_str(&format!(" … [line cut: {rest} more bytes]"));
            }
            let entry = format!("{:>6}\t{shown}\n", self.line);
            if self.out.len() + entry.len() > MAX_OUTPUT_CHARS && self.last_shown > 0 {
                self.output_cut_at = Some(self.line);
            } else {
                self.out.push_str(&entry);
                self.last_shown = self.line;
            }
        }
        self.current.clear();
        self.dropped = 0;
        self.open = false;
        self.line += 1;
    }

    fn finish(mut self, shown: &str) -> String {
        if self.open {
            self.end_line();
        }
        let total = self.line - 1;
        if total == 0 {
            return format!("(`{shown}` is empty)");
        }
        if self.first > total {
            return format!(
                "(`{shown}` has {total} lines; offset {} is past its end: use a smaller offset)",
                self.first
            );
        }
        let mut notes = Vec::new();
        if self.first > 1 {
            notes.push(format!("lines 1–{} not shown", self.first - 1));
        }
        if let Some(at) = self.output_cut_at {
            notes.push(format!(
                "output cut at {MAX_OUTPUT_CHARS} characters: continue with offset={at}"
            ));
        }
        if self.last_shown < total {
            notes.push(format!(
                "{} more lines after line {} (the file has {total}): use offset/limit to read them",
                total - self.last_shown,
                self.last_shown
            ));
        }
        if self.cut_lines > 0 {
            notes.push(format!(
                "{} line(s) longer than {MAX_LINE_CHARS} characters were cut",
                self.cut_lines
            ));
        }
        if notes.is_empty() {
            self.out
                .push_str(&format!("(end of `{shown}`: {total} lines, all shown)"));
        } else {
            self.out.push_str(&format!(
                "(`{shown}`: lines {}–{} of {total} shown; {})",
                self.first,
                self.last_shown,
                notes.join("; ")
            ));
        }
        self.out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    fn read_text(content: &[u8], offset: usize, limit: usize) -> Result<String, String> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(content).unwrap();
        std::io::Seek::rewind(&mut f).unwrap();
        let stat = rustix::fs::fstat(&f).unwrap();
        read(f, &stat, "t.txt", offset, limit).map(|o| o.text)
    }

    #[test]
    fn numbered_lines_and_the_closing_note() {
        let text = read_text(b"a\nb\r\nc", 1, DEFAULT_LIMIT).unwrap();
        assert_eq!(
            text,
            "     1\ta\n     2\tb\n     3\tc\n(end of `t.txt`: 3 lines, all shown)"
        );
    }

    #[test]
    fn offset_and_limit_say_what_was_left_out() {
        let content: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let text = read_text(content.as_bytes(), 4, 3).unwrap();
        assert!(
            text.starts_with("     4\tline 4\n     5\tline 5\n     6\tline 6\n"),
            "{text}"
        );
        assert!(text.contains("lines 4–6 of 10 shown"), "{text}");
        assert!(text.contains("lines 1–3 not shown"), "{text}");
        assert!(text.contains("4 more lines after line 6"), "{text}");
        let past = read_text(content.as_bytes(), 20, 3).unwrap();
        assert!(past.contains("offset 20 is past its end"), "{past}");
        assert_eq!(read_text(b"", 1, 5).unwrap(), "(`t.txt` is empty)");
    }

    #[test]
    fn long_lines_are_cut() {
        let mut content = "x".repeat(5000);
        content.push_str("\nshort\n");
        let text = read_text(content.as_bytes(), 1, 10).unwrap();
        let first = text.lines().next().unwrap();
        assert!(first.contains(&"x".repeat(MAX_LINE_CHARS)), "{first}");
        assert!(!first.contains(&"x".repeat(MAX_LINE_CHARS + 1)));
        assert!(first.ends_with("[line cut: 3000 more bytes]"), "{first}");
        assert!(text.contains("1 line(s) longer than 2000"), "{text}");
        // Multi-byte characters are cut on a character boundary.
        let wide = "é".repeat(3000);
        let text = read_text(wide.as_bytes(), 1, 1).unwrap();
        assert!(text.contains("[line cut: 2000 more bytes]"), "{text}");
    }

    #[test]
    fn the_output_is_capped() {
        let line = "y".repeat(1500);
        let content: String = (0..200).map(|_| format!("{line}\n")).collect();
        let text = read_text(content.as_bytes(), 1, 2000).unwrap();
        assert!(text.len() < MAX_OUTPUT_CHARS + 500);
        assert!(text.contains("output cut at 100000 characters: continue with offset="));
    }

    #[test]
    fn binary_files_are_refused() {
        let err = read_text(b"ELF\0\0\x01", 1, 10).unwrap_err();
        assert!(err.contains("binary") && err.contains("NUL"), "{err}");
        let latin: Vec<u8> = (0..4000).map(|i| 0x80 + (i % 100) as u8).collect();
        let err = read_text(&latin, 1, 10).unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
        // A stray invalid byte in text is shown, not refused.
        let text = read_text(b"caf\xe9 ok\n", 1, 10).unwrap();
        assert!(text.contains("caf\u{fffd} ok"), "{text}");
    }
}
