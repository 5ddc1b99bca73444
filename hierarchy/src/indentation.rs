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
//! Three mistakes are noticed by the parser only on the line *after* the one that is wrong, and are
//! moved back to it here:
//! - the first key of a block indented differently from the keys after it (`vp:` then `      role:`
//!   then `    parent:`): the first key sets the block's indentation, so the parser objects to the
//!   second one. When the second one sits one ordinary step under the block's key, the first is
//!   the odd one out, and it is named;
//! - a key indented less than its block (`vp:`, then `  role: VP` level with `vp:`, then
//!   `    parent: ceo`): the short line ends the block, so the parser objects to the deeper line
//!   after it, which lines up with the block. The short line is named, since indenting the deeper
//!   one to match it would take that out of the block as well;
//! - a key written without its colon (`role VP Operations`): as the first line of a block it reads as
//!   the start of a multi-line value, and the parser objects to the colon of the next line. Wherever
//!   it is, the message says the colon is missing and shows the line with one.
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
    if let Some(diagnostic) = missing_colon(&lines, error_index, previous, &syntax.message) {
        return Some(diagnostic);
    }
    if let Some(diagnostic) = first_key_misindented(&lines, error_index, previous, &syntax.message)
    {
        return Some(diagnostic);
    }
    if let Some(diagnostic) = dedented_key(&lines, error_index, previous, &syntax.message) {
        return Some(diagnostic);
    }
    let candidates = [Some(error_index), previous];
    for index in candidates.into_iter().flatten() {
        if let Some(diagnostic) = check_line(&lines, index, &syntax.message) {
            return Some(diagnostic);
        }
    }
    None
}

/// Whether `text` (a line's content after its indentation and `- ` markers) is a bare word sequence
/// that was meant as `key: value`: no colon, and nothing that makes a line a value on its own (a
/// quote, a flow collection, a block scalar, an alias, a comment).
fn lacks_colon(text: &str) -> bool {
    let code = strip_comment(text).trim();
    !code.is_empty()
        && !code.contains(':')
        && !code.starts_with([
            '"', '\'', '[', '{', '|', '>', '*', '&', '!', '#', '-', '%', '@', '`',
        ])
}

/// A key written without its colon: the line the parser stopped at (`simple key expected ':'`), or —
/// when the parser objects to the colon of a line (`mapping values are not allowed`) — the line just
/// above it, when that one opened its block and has no colon (it was read as a multi-line value).
fn missing_colon(
    lines: &[Line<'_>],
    error_index: usize,
    previous: Option<usize>,
    parser_says: &str,
) -> Option<Diagnostic> {
    let culprit = if parser_says.contains("expected ':'") {
        error_index
    } else if parser_says.contains("mapping values are not allowed") {
        let previous = previous?;
        let line = &lines[error_index];
        let above = (0..previous).rev().find(|&i| lines[i].significant())?;
        let opens = lines[above].opens_block() && lines[above].indent() < lines[previous].indent();
        if !opens || lines[previous].indent() != line.indent() {
            return None;
        }
        previous
    } else {
        return None;
    };
    let line = &lines[culprit];
    let indent = line.content_indent();
    let content = line.text.get(indent..)?;
    if !line.significant() || !lacks_colon(content) {
        return None;
    }
    let content = strip_comment(content).trim_end();
    let (key, value) = content.split_once(' ').unwrap_or((content, ""));
    let value = value.trim_start();
    let fixed = if value.is_empty() {
        format!("{key}:")
    } else {
        format!("{key}: {value}")
    };
    let number = culprit + 1;
    let span = Span {
        line: u32::try_from(number).unwrap_or(u32::MAX),
        column: u32::try_from(indent + 1).unwrap_or(u32::MAX),
        byte_start: line.start + indent,
        byte_len: content.len().max(1),
    };
    Some(
        Diagnostic::error(
            "",
            span,
            format!(
                "invalid YAML: line {number} has no `:` after its key: `{content}` (the parser says: {parser_says})"
            ),
        )
        .with_hint(format!(
            "write `{fixed}`: the key, a colon and a space, then the value"
        )),
    )
}

/// The indentation step the file uses: the most common distance between a line that opens a block
/// and the first line of that block (2 when there is none to judge by).
fn indent_step(lines: &[Line<'_>], before: usize) -> usize {
    let mut counts: Vec<(usize, usize)> = Vec::new();
    let significant: Vec<&Line<'_>> = lines[..before].iter().filter(|l| l.significant()).collect();
    for pair in significant.windows(2) {
        let (opener, first) = (pair[0], pair[1]);
        if !opener.opens_block() || first.indent() <= opener.indent() {
            continue;
        }
        let step = first.indent() - opener.indent();
        match counts.iter_mut().find(|(s, _)| *s == step) {
            Some((_, n)) => *n += 1,
            None => counts.push((step, 1)),
        }
    }
    counts
        .into_iter()
        .max_by_key(|&(step, n)| (n, std::cmp::Reverse(step)))
        .map_or(2, |(step, _)| step)
}

/// The first key of a block indented differently from the key after it, when the key after it is
/// where the file's usual step puts a block's keys: the first key is then the one to fix, though the
/// parser stops at the second.
fn first_key_misindented(
    lines: &[Line<'_>],
    error_index: usize,
    previous: Option<usize>,
    parser_says: &str,
) -> Option<Diagnostic> {
    let previous = previous?;
    let opener_index = (0..previous).rev().find(|&i| lines[i].significant())?;
    let (opener, first, next) = (&lines[opener_index], &lines[previous], &lines[error_index]);
    if !next.significant() || !opener.opens_block() || first.indent() <= opener.indent() {
        return None;
    }
    let expected = opener.indent() + indent_step(lines, opener_index + 1);
    if next.indent() != expected || first.indent() == expected {
        return None;
    }
    let number = previous + 1;
    let key = strip_comment(opener.text).trim();
    Some(located(
        first,
        number,
        first.indent(),
        format!(
            "invalid YAML: bad indentation: line {number}, the first key under `{key}`, is indented {} spaces, but the next key of the block (line {}) is indented {expected} (the parser says: {parser_says})",
            first.indent(),
            error_index + 1
        ),
        format!(
            "indent line {number} by {expected} spaces: the first key of a block sets its indentation, and the keys after it must line up with it"
        ),
    ))
}

/// A key indented less than the block it belongs to (`vp:`, then `  role: VP` at the indentation of
/// `vp:`, then `    parent: ceo`): the short line ends the block, which is valid YAML, so the parser
/// objects only to the deeper line after it. That line lines up with the block, though (with the key
/// before the short one, or where the file's step puts the first key under the line that opened the
/// block), so the short line is the one to move, and moving the deeper one instead would take it out
/// of the block too.
fn dedented_key(
    lines: &[Line<'_>],
    error_index: usize,
    previous: Option<usize>,
    parser_says: &str,
) -> Option<Diagnostic> {
    let previous = previous?;
    let (short, next) = (&lines[previous], &lines[error_index]);
    let target = next.indent();
    if !next.significant()
        || short.opens_block()
        || short.indent() >= target
        || short.content_indent() != short.indent()
    {
        return None;
    }
    let before_index = (0..previous).rev().find(|&i| lines[i].significant())?;
    let before = &lines[before_index];
    let lines_up = if before.opens_block() {
        short.indent() <= before.indent()
            && before.indent() + indent_step(lines, before_index + 1) == target
    } else {
        before.indent() == target
    };
    if !lines_up {
        return None;
    }
    // The block it belongs to: the nearest line above that opens one, shallower than its keys.
    let block = (0..previous)
        .rev()
        .map(|i| &lines[i])
        .find(|l| l.significant() && l.opens_block() && l.indent() < target)
        .map_or_else(String::new, |l| {
            format!(" `{}`", strip_comment(l.text).trim())
        });
    let number = previous + 1;
    let content = strip_comment(short.text).trim();
    Some(located(
        short,
        number,
        short.indent(),
        format!(
            "invalid YAML: bad indentation: line {number} (`{content}`) is indented {} spaces, less than the keys of its block{block} (line {} is indented {target}), so it ends that block (the parser says: {parser_says})",
            short.indent(),
            error_index + 1,
        ),
        format!(
            "indent line {number} by {target} spaces, like line {}, so that it belongs to the block{block} again",
            error_index + 1
        ),
    ))
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
    fn a_first_key_indented_unlike_the_rest_of_its_block_is_named() {
        // Deeper than the keys after it, and shallower: both blamed on the first key, where the fix is.
        for (first, spaces) in [("      role: VP", 6), ("   role: VP", 3)] {
            let source = format!("agents:\n  vp:\n{first}\n    parent: ceo\n    level: 1\n");
            let d = diagnose(&source);
            assert_eq!((d.line(), d.column()), (3, 1), "{d}");
            assert!(
                d.message.contains(&format!(
                    "line 3, the first key under `vp:`, is indented {spaces}"
                )),
                "{d}"
            );
            assert!(
                d.hint.as_deref().unwrap_or("").contains("by 4 spaces"),
                "{d}"
            );
        }
    }

    #[test]
    fn a_dedented_key_is_named_not_the_line_after_it() {
        // Right after the block's key, at its indentation; and between two keys of the block.
        for (source, line) in [
            ("agents:\n  vp:\n  role: VP\n    parent: ceo\n", 3),
            (
                "agents:\n  vp:\n    parent: ceo\n  role: VP\n    level: 1\n",
                4,
            ),
        ] {
            let d = diagnose(source);
            assert_eq!((d.line(), d.column()), (line, 1), "{d}");
            assert!(
                d.message
                    .contains(&format!("line {line} (`role: VP`) is indented 2 spaces")),
                "{d}"
            );
            let hint = d.hint.as_deref().unwrap_or("");
            assert!(
                hint.contains(&format!("indent line {line} by 4 spaces")) && hint.contains("`vp:`"),
                "{d}"
            );
        }
    }

    #[test]
    fn a_key_without_its_colon_is_named_on_its_own_line() {
        // The first key of a block: the parser objects to the next line's colon.
        let d = diagnose("agents:\n  vp:\n    role VP Operations\n    parent: ceo\n");
        assert_eq!((d.line(), d.column()), (3, 5), "{d}");
        assert!(d.message.contains("line 3 has no `:`"), "{d}");
        assert!(
            d.hint
                .as_deref()
                .unwrap_or("")
                .contains("`role: VP Operations`"),
            "{d}"
        );
        // Later in a block: the parser stops on the line itself.
        let d = diagnose("agents:\n  vp:\n    parent: ceo\n    role VP Operations\n    level: 1\n");
        assert_eq!((d.line(), d.column()), (4, 5), "{d}");
        assert!(d.message.contains("line 4 has no `:`"), "{d}");
    }

    #[test]
    fn other_syntax_errors_keep_the_parsers_words() {
        let d = diagnose("agents: [a, b\n");
        assert!(!d.message.contains("indentation"), "{d}");
        assert!(d.message.starts_with("invalid YAML: "), "{d}");
    }
}
