//! Which Bash commands run without asking: the allow-prefix matcher.
//!
//! Role: decide whether a command runs at once or goes to `bash.unlisted` (ask or deny). The
//! sandbox holds either way; this decides whether to *ask*.
//!
//! A command runs at once only when it is **plain** and every simple command in it starts with an
//! allowed prefix at a word boundary: `cargo test` allows `cargo test -p x`, never `cargo testing`.
//! Matching compares *words* after quote removal, as bash will see them, so `cargo "test"` is
//! `cargo test`, and a `;` inside quotes separates nothing. The prefix `*` allows every command.
//!
//! Plain ([`script`], [`words`], [`builtins`]): simple commands joined by `;`, `&`, `&&`, `||`, `|`,
//! `|&` and newlines (maybe under `!` or `time`), whose words are unquoted text, quoted strings
//! without expansions, globs, tildes and bare parameter references (`$HOME`, never matching a prefix
//! word), and whose redirections are descriptor duplications (`2>&1`), `/dev/null`, or relative
//! paths without `..`. Everything else is unlisted, with the form named: function definitions,
//! compound commands (subshells, brace groups, `if`, `for`, `while`, `case`, `[[ ]]`, `(( ))`),
//! assignments, command, process and arithmetic substitution, parameter expansions with operators,
//! subscripts, here-documents, file redirections that may leave the workspace (`>& /x` included:
//! bash reads it as `&> /x`), and eval-like builtins (`eval`, `source`, `declare`, `printf -v` …).
//!
//! Invariants (fail towards asking):
//! - anything the matcher cannot vouch for is *unlisted*, never allowed: a parse error, a form not
//!   in the list above, a command too long or too deeply nested to parse safely, a parser panic;
//! - a command's words are compared only where they are literal: an expansion (`$x`, `~`) never
//!   matches a prefix word, so what the program is cannot depend on the environment;
//! - no prefix can allow an eval-like builtin: those are never plain ([`builtins`]);
//! - [`safe_summary`] holds no argument, so no personal data.
//!
//! Why `brush-parser`: the issue (#34) asked for a real shell grammar instead of a hand-written
//! tokenizer, which read `ls () ( touch p9 ); ls` as two `ls` commands and missed the code hidden in
//! `${x@P}`, `$[x]` and `${a[i]}`. `brush-parser` is the parser of the brush shell, whose tests
//! compare it with bash itself: pure Rust (no C toolchain, unlike tree-sitter-bash), MIT, maintained,
//! and it knows bash rather than POSIX sh alone (functions, `${x@P}`, `$[…]`, arrays and subscripts,
//! `>&`, `|&`, `[[ ]]`, `coproc`). It reads a word into typed pieces (quotes, each expansion), which
//! is what the plain-word rules need. `yash-syntax` is GPL and POSIX-only.

mod builtins;
mod script;
mod words;

#[cfg(test)]
mod tests;

use script::Part;

/// What the matcher decided for one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Plain, and every part starts with an allowed prefix (or `*` is allowed).
    Allowed,
    /// Not auto-allowed; why, for the approval card and the policy error.
    Unlisted(String),
}

/// Whether `part` starts with `prefix`, word for word; only literal words match.
fn starts_with(part: &Part, prefix: &[String]) -> bool {
    part.words.len() >= prefix.len()
        && part
            .words
            .iter()
            .zip(prefix)
            .all(|(w, p)| w.literal && w.text == *p)
}

/// Whether `allow` lets `command` run without asking.
pub(crate) fn decide(command: &str, allow: &[String]) -> Decision {
    if allow.iter().any(|p| p.trim() == "*") {
        return Decision::Allowed;
    }
    let reading = script::read(command, allow);
    let script = match reading.script {
        Ok(script) => script,
        Err(why) => return Decision::Unlisted(why),
    };
    if let Some(why) = script.problems.into_iter().next() {
        return Decision::Unlisted(why);
    }
    if script.parts.is_empty() {
        return Decision::Unlisted("it runs no command".into());
    }
    if reading.prefixes.is_empty() {
        return Decision::Unlisted("no command prefix is allowed".into());
    }
    for part in &script.parts {
        if !reading.prefixes.iter().any(|p| starts_with(part, p)) {
            let program = part.words.first().map(|w| w.text.as_str());
            return Decision::Unlisted(format!(
                "`{}…` starts with no allowed prefix",
                words::short(program.unwrap_or_default())
            ));
        }
    }
    Decision::Allowed
}

/// A short description of `command` that holds no personal data, for the tool-call ledger and
/// `opc tasks --tree`: per simple command, the allowed prefix it matched (the org's own config text)
/// or else its program's name alone (a path's last component), `(computed)` for a program name
/// that is an expansion, with `…` where arguments were left out. Arguments (file names, messages,
/// addresses) are never included.
pub(crate) fn safe_summary(command: &str, allow: &[String]) -> String {
    let reading = script::read(command, allow);
    let Ok(script) = reading.script else {
        // Not parsed: the first word, when it is a plain name.
        return command
            .split_whitespace()
            .next()
            .filter(|w| {
                w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
            })
            .map(|w| format!("{} …", w.rsplit('/').next().unwrap_or(w)))
            .unwrap_or_else(|| "(a command the matcher cannot parse)".into());
    };
    let shown: Vec<String> = script
        .parts
        .iter()
        .map(|part| {
            let matched = reading
                .prefixes
                .iter()
                .filter(|p| starts_with(part, p))
                .max_by_key(|p| p.len());
            let head: Vec<&str> = match (matched, part.words.first()) {
                (Some(p), _) => p.iter().map(String::as_str).collect(),
                // The program's name only (a path's last component: a path may name a person).
                (None, Some(w)) if w.literal => vec![w.text.rsplit('/').next().unwrap_or(&w.text)],
                (None, _) => vec!["(computed)"],
            };
            let mut text: String = head.join(" ").chars().take(40).collect();
            if part.words.len() > head.len() {
                text.push_str(" …");
            }
            text
        })
        .collect();
    let mut text = shown.join(" ; ");
    if text.is_empty() {
        text = "(empty)".into();
    }
    text
}
