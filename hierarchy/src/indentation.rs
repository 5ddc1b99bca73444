//! Turning a YAML syntax error caused by indentation into one that says so.
//!
//! The parser reports where it gave up ("mapping values are not allowed in this context" at a column in
//! the middle of a line), which is correct but does not tell a person that a line is indented wrongly,
//! nor which line. Indentation is the most common way to break a hand-edited YAML file, so when the
//! parser stops, the line it stopped at (and the line before) are checked against the blocks that are
//! open there: a line deeper than a line that opens no block, a line that lines up with no open block,
//! or a tab in the indentation. If one is found, the diagnostic names indentation and points at that
//! line; otherwise the parser's own message is kept.
//!
//! Invariant: this only rewords and relocates a syntax error that already happened; it never turns a
//! valid document into an error.

use crate::diagnostic::Diagnostic;
use crate::yaml::{Span, SyntaxError};

const SYNTAX_HINT: &str =
    "fix the YAML syntax here; the rest of the file is checked once it parses";

/// The diagnostic for a YAML syntax error in `source`.
pub(crate) fn syntax_error(source: &str, syntax: &SyntaxError) -> Diagnostic {
    if let Some(diagnostic) = indentation_error(source, syntax) {
        return diagnostic;
    }
    Diagnostic::error("", syntax.span, format!("invalid YAML: {}", syntax.message))
        .with_hint(SYNTAX_HINT)
}

/// One line of the source: where it starts and its text without the line break.
struct Line<'a> {
    start: usize,
    text: &'a str,
}

impl Line<'_> {
    fn indent(&self) -> usize {
        self.text.len() - self.text.trim_start_matches(' ').len()
    }

    /// Blank lines and comments do not take part in indentation.
    fn significant(&self) -> bool {
        let content = self.text.trim_start();
        !content.is_empty() && !content.starts_with('#')
    }

    /// The column where the line's content starts after any `- ` item markers (`- name: x` → 2).
    fn content_indent(&self) -> usize {
        let mut indent = self.indent();
        let mut rest = &self.text[indent..];
        while let Some(after) = rest.strip_prefix("- ") {
            let spaces = after.len() - after.trim_start_matches(' ').len();
            indent += 2 + spaces;
            rest = &after[spaces..];
        }
        indent
    }

    /// Whether the next line may be deeper: the line ends with `:` (a key whose value is the block
    /// below), a block-scalar indicator, or is a bare `-`.
    fn opens_block(&self) -> bool {
        let code = strip_comment(self.text).trim_end();
        code.ends_with(':')
            || code == "-"
            || code.ends_with(" -")
            || code.ends_with(['|', '>'])
            || code.ends_with("|-")
            || code.ends_with(">-")
            || code.ends_with("|+")
            || code.ends_with(">+")
    }
}

/// The text before a ` #` comment (quotes are not tracked: good enough for the end-of-line checks here).
fn strip_comment(text: &str) -> &str {
    match text.find(" #") {
        Some(at) => &text[..at],
        None => text,
    }
}

fn indentation_error(source: &str, syntax: &SyntaxError) -> Option<Diagnostic> {
    let mut lines = Vec::new();
    let mut start = 0;
    for text in source.split_inclusive('\n') {
        lines.push(Line {
            start,
            text: text.trim_end_matches(['\n', '\r']),
        });
        start += text.len();
    }
    let error_index = usize::try_from(syntax.span.line).ok()?.checked_sub(1)?;
    if error_index >= lines.len() {
        return None;
    }
    // The line the parser stopped at, then the significant line before it (an over-indented line is
    // sometimes only noticed on the next one).
    let previous = (0..error_index).rev().find(|&i| lines[i].significant());
    let candidates = [Some(error_index), previous];
    for index in candidates.into_iter().flatten() {
        if let Some(diagnostic) = check_line(&lines, index, &syntax.message) {
            return Some(diagnostic);
        }
    }
    None
}

/// Whether line `index` is indented wrongly, judged by the lines above it.
fn check_line(lines: &[Line<'_>], index: usize, parser_says: &str) -> Option<Diagnostic> {
    let line = &lines[index];
    if !line.significant() && !line.text.trim().is_empty() {
        return None;
    }
    let number = index + 1;
    let leading = &line.text[..line.text.len() - line.text.trim_start().len()];
    if leading.contains('\t') {
        return Some(located(
            line,
            number,
            leading.len(),
            format!(
                "invalid YAML: line {number} is indented with a tab; YAML indentation must be spaces"
            ),
            "replace the tab with spaces, lined up with the other keys of the same block".into(),
        ));
    }
    if !line.significant() {
        return None;
    }
    // The blocks open just above this line: the indentation of each enclosing line.
    let mut open: Vec<usize> = Vec::new();
    let mut above: Option<&Line<'_>> = None;
    for earlier in lines[..index].iter().filter(|l| l.significant()) {
        let indent = earlier.indent();
        while open.last().is_some_and(|&top| top > indent) {
            open.pop();
        }
        if open.last() != Some(&indent) {
            open.push(indent);
        }
        let content = earlier.content_indent();
        if content > indent {
            open.push(content);
        }
        above = Some(earlier);
    }
    let above = above?;
    let indent = line.indent();
    let above_indent = above.indent();
    let above_number = lines
        .iter()
        .position(|l| std::ptr::eq(l, above))
        .map_or(0, |i| i + 1);
    if indent > above_indent && indent != above.content_indent() && !above.opens_block() {
        let expected = above.content_indent();
        return Some(located(
            line,
            number,
            indent,
            format!(
                "invalid YAML: bad indentation: line {number} is indented {indent} spaces, deeper than line {above_number} ({expected}), which does not open a block (the parser says: {parser_says})"
            ),
            format!(
                "indent line {number} by {expected} spaces, like the line above, if it belongs to the same block"
            ),
        ));
    }
    if indent < above_indent && !open.contains(&indent) {
        let levels: Vec<String> = open.iter().map(usize::to_string).collect();
        let nearest = open
            .iter()
            .copied()
            .min_by_key(|&level| (level.abs_diff(indent), std::cmp::Reverse(level)))
            .unwrap_or(0);
        return Some(located(
            line,
            number,
            indent,
            format!(
                "invalid YAML: bad indentation: line {number} is indented {indent} spaces, which lines up with no enclosing block (those start at {}) (the parser says: {parser_says})",
                levels.join(", ")
            ),
            format!(
                "indent line {number} by {nearest} spaces to line it up with the keys of the block it belongs to"
            ),
        ));
    }
    None
}

/// A diagnostic that underlines the indentation of `line`.
fn located(
    line: &Line<'_>,
    number: usize,
    width: usize,
    message: String,
    hint: String,
) -> Diagnostic {
    let span = Span {
        line: u32::try_from(number).unwrap_or(u32::MAX),
        column: 1,
        byte_start: line.start,
        byte_len: width.max(1),
    };
    Diagnostic::error("", span, message).with_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnose(source: &str) -> Diagnostic {
        let error = crate::yaml::parse(source).expect_err("the text is invalid YAML");
        syntax_error(source, &error)
    }

    #[test]
    fn a_line_deeper_than_its_block_is_named() {
        let d = diagnose("agents:\n  vp:\n    role: VP\n     parent: ceo\n");
        assert!(d.message.contains("bad indentation: line 4"), "{d}");
        assert_eq!((d.line(), d.column()), (4, 1), "{d}");
    }

    #[test]
    fn a_line_between_levels_is_named() {
        let d = diagnose("agents:\n  vp:\n    role: VP\n   parent: ceo\n");
        assert!(d.message.contains("bad indentation: line 4"), "{d}");
        assert!(
            d.hint.as_deref().unwrap_or("").contains("by 4 spaces"),
            "{d}"
        );
    }

    #[test]
    fn a_tab_in_the_indentation_is_named() {
        let d = diagnose("agents:\n  vp:\n\trole: VP\n");
        assert!(d.message.contains("line 3 is indented with a tab"), "{d}");
        assert_eq!((d.line(), d.column()), (3, 1), "{d}");
    }

    #[test]
    fn other_syntax_errors_keep_the_parsers_words() {
        let d = diagnose("agents: [a, b\n");
        assert!(!d.message.contains("indentation"), "{d}");
        assert!(d.message.starts_with("invalid YAML: "), "{d}");
    }
}
