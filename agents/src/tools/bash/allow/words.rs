//! Words: quote removal, and whether a word is plain.
//!
//! A word is plain when bash turns it into text without running anything: unquoted text, single
//! quotes, double quotes holding only text, backslash escapes, a tilde, and a bare parameter
//! reference (`$name`, `${name}`, `$1`, `$$`, `$!`, `$@` …). A bare reference is plain because bash
//! never evaluates the value it substitutes (it only splits and globs it), but such a word is not
//! *literal*: it never matches a prefix word and is never a vouched-for redirection target.
//!
//! Not plain, whatever the allowlist says: command substitution, arithmetic expansion (`$((…))`,
//! `$[…]`), a parameter expansion with an operator (`${x:=…}`, `${x@P}`, `${#x}` …), a subscript
//! (`${a[i]}`, evaluated as arithmetic), an indirect reference (`${!x}`), ANSI-C quoting (`$'…'`) and
//! translated strings (`$"…"`). Each reason names the form and the word it was found in.

use brush_parser::ParserOptions;
use brush_parser::ast;
use brush_parser::word::{Parameter, ParameterExpr, TildeExpr, WordPiece};

/// A word after quote removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Word {
    /// The text bash passes on, quotes removed. An expansion is kept as written (`$HOME`, `~`), and
    /// a word that is not plain keeps its source text: both are for display only.
    pub text: String,
    /// Holds no expansion: `text` is exactly what bash passes on (globbing aside, see `pattern`).
    pub literal: bool,
    /// Holds an unquoted character that bash may expand into other names: a glob (`*`, `?`, `[`), a
    /// brace (`{`) or a tilde (`~`).
    pub pattern: bool,
}

impl Word {
    /// A word that is not plain, shown as written.
    pub(super) fn opaque(raw: &str) -> Self {
        Word {
            text: raw.to_string(),
            literal: false,
            pattern: false,
        }
    }

    /// A descriptor for `>&`/`<&`: `-` (close), `N` or `N-` (move). Anything else after `>&` is a
    /// file name: bash reads `>& word` as `&> word`.
    pub(super) fn is_descriptor(&self) -> bool {
        let digits = self.text.strip_suffix('-').unwrap_or(&self.text);
        self.literal
            && !self.pattern
            && (self.text == "-"
                || (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())))
    }

    /// Whether this redirection target surely names a path inside the workspace: a literal relative
    /// path without a `..` component and without glob, brace or tilde characters, or `/dev/null`.
    /// This is lexical: a symbolic link inside the workspace may still lead out, and there the
    /// sandbox, not the matcher, is the boundary.
    pub(super) fn stays_inside(&self) -> bool {
        if !self.literal || self.pattern {
            return false;
        }
        self.text == "/dev/null"
            || (!self.text.is_empty()
                && !self.text.starts_with('/')
                && !self.text.starts_with('~')
                && !self.text.split('/').any(|c| c == ".."))
    }
}

/// `word` after quote removal, or why it is not plain.
pub(super) fn read(word: &ast::Word, options: &ParserOptions) -> Result<Word, String> {
    let pieces = brush_parser::word::parse(&word.value, options).map_err(|_| {
        format!(
            "it has a word the shell parser cannot read (`{}`)",
            short(&word.value)
        )
    })?;
    let mut out = Word {
        text: String::new(),
        literal: true,
        pattern: false,
    };
    for piece in &pieces {
        add(&piece.piece, false, &mut out)
            .map_err(|what| format!("it uses {what} (in `{}`)", short(&word.value)))?;
    }
    Ok(out)
}

/// Append one piece of a word to `out`; `Err(what)` names a form that is not plain.
fn add(piece: &WordPiece, quoted: bool, out: &mut Word) -> Result<(), &'static str> {
    match piece {
        WordPiece::Text(text) => {
            // The parser hands every expansion over as its own piece; a `$`, a backtick, or (outside
            // quotes) an operator character left in text means it read something differently from
            // bash, and then nothing is vouched for.
            let suspicious: &[char] = if quoted {
                &['$', '`']
            } else {
                &['$', '`', '(', ')', '<', '>', ';', '&', '|']
            };
            if text.contains(suspicious) {
                return Err(
                    "a character the matcher does not vouch for here (`$`, a backtick or an operator)",
                );
            }
            if !quoted && text.contains(['*', '?', '[', ']', '{', '}', '~']) {
                out.pattern = true;
            }
            out.text.push_str(text);
        }
        WordPiece::SingleQuotedText(text) => out.text.push_str(text),
        WordPiece::DoubleQuotedSequence(inner) => {
            for piece in inner {
                add(&piece.piece, true, out)?;
            }
        }
        WordPiece::EscapeSequence(escape) => {
            let mut chars = escape.chars();
            let (Some('\\'), Some(escaped)) = (chars.next(), chars.next()) else {
                return Err("an escape the matcher does not vouch for");
            };
            match escaped {
                // Line continuation: nothing.
                '\n' => {}
                // Inside double quotes a backslash escapes only these; before anything else it stays.
                '$' | '`' | '"' | '\\' => out.text.push(escaped),
                _ if quoted => out.text.push_str(escape),
                _ => out.text.push(escaped),
            }
        }
        WordPiece::TildeExpansion(tilde) => {
            out.literal = false;
            out.pattern = true;
            match tilde {
                TildeExpr::UserHome(user) => {
                    out.text.push('~');
                    out.text.push_str(user);
                }
                _ => out.text.push('~'),
            }
        }
        WordPiece::ParameterExpansion(expr) => {
            let ParameterExpr::Parameter {
                parameter,
                indirect,
            } = expr
            else {
                return Err(
                    "a parameter expansion with an operator (`${x:=…}`, `${x@P}`, `${#x}` …)",
                );
            };
            if *indirect {
                return Err("an indirect expansion (`${!x}`)");
            }
            if matches!(
                parameter,
                Parameter::NamedWithIndex { .. } | Parameter::NamedWithAllIndices { .. }
            ) {
                return Err("a subscript (`${a[i]}`), which bash evaluates as arithmetic");
            }
            out.literal = false;
            out.text.push_str(&parameter.to_string());
        }
        WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
            return Err("command substitution (`$(…)` or backticks)");
        }
        WordPiece::ArithmeticExpression(_) => {
            return Err("arithmetic expansion (`$((…))` or `$[…]`)");
        }
        WordPiece::AnsiCQuotedText(_) => return Err("ANSI-C quoting (`$'…'`)"),
        WordPiece::GettextDoubleQuotedSequence(_) => return Err("a translated string (`$\"…\"`)"),
    }
    Ok(())
}

/// `text` cut to 40 characters for a reason (the approval card shows the whole command anyway).
pub(super) fn short(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(40).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}
