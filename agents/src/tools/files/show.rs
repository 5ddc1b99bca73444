//! How a path (or any name from the disk, or a path the model gave) is shown to the model: the one
//! helper every file tool's message and listing goes through.
//!
//! File names may hold any byte but `/` and NUL. Shown raw, a name with a newline reads as several
//! lines, so `nl\nFound 1 files\n…` in a Glob or Grep listing would pass for entries that do not
//! exist; an escape character can drive a terminal that later shows the transcript; bytes that are
//! not UTF-8 cannot be shown at all. So a name that holds any of these is shown in bash's ANSI-C
//! quoting, `$'…'`, which models know and which Bash reads back as the same bytes:
//! - newline, tab and carriage return as `\n`, `\t`, `\r`; ESC as `\e`; other C0 controls and DEL as
//!   `\xHH`;
//! - C1 controls (U+0080–U+009F), the line and paragraph separators (U+2028, U+2029) and the
//!   bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069), which can reorder or
//!   break what is read, as `\uHHHH`;
//! - bytes that are not UTF-8 as `\xHH`;
//! - and, inside the quotes, `\` and `'` as `\\` and `\'`.
//!
//! Every other name is shown as it is (the common case, so listings stay what `rg` and Claude Code
//! print), except one that itself starts with `$'`, which is quoted so that it cannot be read as a
//! quoted one.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` for the model: as it is, or `$'…'`-quoted when it holds anything that needs escaping.
pub fn path(path: &Path) -> String {
    bytes(path.as_os_str().as_bytes())
}

/// Text from the model (a path or pattern it gave), shown back under the same rule.
pub fn text(text: &str) -> String {
    bytes(text.as_bytes())
}

/// `raw` for the model (see the module doc).
pub fn bytes(raw: &[u8]) -> String {
    let plain = match std::str::from_utf8(raw) {
        Ok(s) if !s.starts_with("$'") && !s.chars().any(needs_escape) => Some(s),
        _ => None,
    };
    if let Some(s) = plain {
        return s.to_string();
    }
    let mut out = String::with_capacity(raw.len() + 8);
    out.push_str("$'");
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\x1b' => out.push_str("\\e"),
                c if (c as u32) < 0x80 && c.is_control() => {
                    out.push_str(&format!("\\x{:02x}", c as u32));
                }
                c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('\'');
    out
}

/// Whether `c` cannot be shown as it is: a control character (C0, DEL, C1), a line or paragraph
/// separator, or a bidirectional override or isolate.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn plain_names_are_shown_as_they_are() {
        for name in [
            "src/main.rs",
            "a b/ç.txt",
            "naïve 日本",
            "back\\slash",
            "it's",
        ] {
            assert_eq!(text(name), name);
        }
    }

    #[test]
    fn controls_and_invalid_utf8_are_quoted() {
        assert_eq!(
            text("nl\nFound 1 files\nfake.txt"),
            "$'nl\\nFound 1 files\\nfake.txt'"
        );
        assert_eq!(text("esc\x1b[2Jx"), "$'esc\\e[2Jx'");
        assert_eq!(text("t\tr\r\x01\x7f"), "$'t\\tr\\r\\x01\\x7f'");
        assert_eq!(
            text("c1\u{85}ls\u{2028}rtl\u{202e}"),
            "$'c1\\u0085ls\\u2028rtl\\u202e'"
        );
        assert_eq!(text("q'\\\n"), "$'q\\'\\\\\\n'");
        assert_eq!(
            path(Path::new(OsStr::from_bytes(b"bad\xff\xfe.txt"))),
            "$'bad\\xff\\xfe.txt'"
        );
        // A name that looks quoted is quoted, so it cannot pass for another name.
        assert_eq!(text("$'x'"), "$'$\\'x\\''");
    }

    #[test]
    fn a_quoted_name_is_one_line() {
        let shown = text("a\nb\r\nc\u{2029}d\u{85}e");
        assert_eq!(shown.lines().count(), 1, "{shown}");
    }
}
