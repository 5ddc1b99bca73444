//! Which Bash commands run without asking: the allow-prefix matcher.
//!
//! A command runs at once when every part of it (split on `;`, `&&`, `||`, `|`, `|&`, `&` and
//! newlines, outside quotes) starts with an allowed prefix at a word boundary: `cargo test` allows
//! `cargo test -p x`, never `cargo testing`. Matching compares *words* after quote removal, as bash
//! will see them, so `cargo "test"` is `cargo test`, and a `;` inside quotes separates nothing. The
//! prefix `*` allows every command.
//!
//! Why a small tokenizer instead of `shlex`: `shlex` splits words but does not know shell operators
//! (`a&&b` is one word to it), and the operators are exactly what must be found.
//!
//! Invariant (fail towards asking): anything this tokenizer cannot vouch for is *unlisted*, never
//! allowed — command or process substitution (`$(`, backticks, `<(`, `>(`), here-documents, an
//! unterminated quote, and a redirection whose target may lie outside the workspace (absolute, `~`,
//! `..`, or holding an expansion; `/dev/null` and fd duplications like `2>&1` are fine). Treating
//! something harmless as a separator or as code only makes the matcher ask more often; it can never
//! let an unlisted program through. The sandbox holds either way: this decides whether to *ask*.

/// What the matcher decided for one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Every part starts with an allowed prefix (or `*` is allowed).
    Allowed,
    /// Not auto-allowed; why, for the approval card and the policy error.
    Unlisted(String),
}

/// One token of a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// A word after quote removal; `expands` when it holds an unquoted or double-quoted `$`.
    Word { text: String, expands: bool },
    /// A separator between commands (`;`, `&&`, `||`, `|`, `|&`, `&`, newline).
    Separator,
    /// A redirection whose target must be checked (`>`, `>>`, `<`, `<>`, `&>`, `>|` …).
    Redirect,
    /// A redirection that duplicates or closes a descriptor (`>&` / `<&`), or a here-string (`<<<`):
    /// its target is a descriptor or data, never a file.
    RedirectData,
}

/// The command's tokens, or why it cannot be vouched for.
fn tokenize(command: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = command.chars().collect();
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut expands = false;
    let mut i = 0;
    let flush =
        |tokens: &mut Vec<Token>, word: &mut String, in_word: &mut bool, expands: &mut bool| {
            if *in_word {
                tokens.push(Token::Word {
                    text: std::mem::take(word),
                    expands: *expands,
                });
            }
            *in_word = false;
            *expands = false;
        };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\\' => {
                match next {
                    // Line continuation: nothing.
                    Some('\n') => {}
                    Some(n) => {
                        word.push(n);
                        in_word = true;
                    }
                    None => {
                        word.push('\\');
                        in_word = true;
                    }
                }
                i += 2;
                continue;
            }
            '\'' => {
                let Some(end) = chars[i + 1..].iter().position(|&c| c == '\'') else {
                    return Err("it has an unterminated single quote".into());
                };
                word.extend(&chars[i + 1..i + 1 + end]);
                in_word = true;
                i += end + 2;
                continue;
            }
            '"' => {
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("it has an unterminated double quote".into()),
                        Some('"') => break,
                        Some('\\') => {
                            // Inside double quotes a backslash escapes only these.
                            match chars.get(i + 1) {
                                Some(&n @ ('"' | '\\' | '$' | '`')) => {
                                    word.push(n);
                                    i += 2;
                                }
                                Some('\n') => i += 2,
                                _ => {
                                    word.push('\\');
                                    i += 1;
                                }
                            }
                        }
                        Some('`') => return Err(substitution()),
                        Some('$') => {
                            if chars.get(i + 1) == Some(&'(') {
                                return Err(substitution());
                            }
                            expands = true;
                            word.push('$');
                            i += 1;
                        }
                        Some(&other) => {
                            word.push(other);
                            i += 1;
                        }
                    }
                }
                in_word = true;
                i += 1;
                continue;
            }
            '`' => return Err(substitution()),
            '$' => {
                if next == Some('(') {
                    return Err(substitution());
                }
                expands = true;
                word.push('$');
                in_word = true;
            }
            ' ' | '\t' | '\r' => flush(&mut tokens, &mut word, &mut in_word, &mut expands),
            '\n' | ';' => {
                flush(&mut tokens, &mut word, &mut in_word, &mut expands);
                tokens.push(Token::Separator);
            }
            '|' => {
                flush(&mut tokens, &mut word, &mut in_word, &mut expands);
                tokens.push(Token::Separator);
                // `||` and `|&` are one operator.
                if matches!(next, Some('|' | '&')) {
                    i += 1;
                }
            }
            '&' => {
                if next == Some('>') {
                    // `&>` / `&>>`: stdout and stderr to a file.
                    flush(&mut tokens, &mut word, &mut in_word, &mut expands);
                    tokens.push(Token::Redirect);
                    i += if chars.get(i + 2) == Some(&'>') { 3 } else { 2 };
                    continue;
                }
                flush(&mut tokens, &mut word, &mut in_word, &mut expands);
                tokens.push(Token::Separator);
                if next == Some('&') {
                    i += 1;
                }
            }
            '<' | '>' => {
                if next == Some('(') {
                    return Err("it uses process substitution (`<(…)` or `>(…)`)".into());
                }
                // A word of digits right before the operator is its descriptor (`2>`), not an argument.
                if in_word
                    && !expands
                    && !word.is_empty()
                    && word.chars().all(|d| d.is_ascii_digit())
                {
                    word.clear();
                    in_word = false;
                }
                flush(&mut tokens, &mut word, &mut in_word, &mut expands);
                let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
                let (len, token) = if rest.starts_with("<<<") {
                    (3, Token::RedirectData)
                } else if rest.starts_with("<<") {
                    return Err("it uses a here-document (`<<`)".into());
                } else if rest.starts_with(">&") || rest.starts_with("<&") {
                    (2, Token::RedirectData)
                } else if rest.starts_with(">>") || rest.starts_with(">|") || rest.starts_with("<>")
                {
                    (2, Token::Redirect)
                } else {
                    (1, Token::Redirect)
                };
                tokens.push(token);
                i += len;
                continue;
            }
            other => {
                word.push(other);
                in_word = true;
            }
        }
        i += 1;
    }
    flush(&mut tokens, &mut word, &mut in_word, &mut expands);
    Ok(tokens)
}

fn substitution() -> String {
    "it uses command substitution (`$(…)` or backticks)".into()
}

/// Whether a redirection target surely stays inside the workspace: a relative path without `..`
/// and without expansions, or `/dev/null`.
fn target_inside(target: &str, expands: bool) -> bool {
    if target == "/dev/null" {
        return true;
    }
    !expands
        && !target.is_empty()
        && !target.starts_with('/')
        && !target.starts_with('~')
        && !target.split('/').any(|c| c == "..")
}

/// The command's parts (words of each command, redirections removed), or why it is not vouched for.
fn parts(command: &str) -> Result<Vec<Vec<String>>, String> {
    let tokens = tokenize(command)?;
    let mut parts = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut iter = tokens.into_iter();
    while let Some(token) = iter.next() {
        match token {
            Token::Word { text, .. } => current.push(text),
            Token::Separator => {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
            }
            Token::Redirect => match iter.next() {
                Some(Token::Word { text, expands }) => {
                    if !target_inside(&text, expands) {
                        return Err(format!(
                            "it redirects to `{text}`, which may be outside the workspace"
                        ));
                    }
                }
                _ => return Err("it has a redirection without a target".into()),
            },
            Token::RedirectData => match iter.next() {
                Some(Token::Word { .. }) => {}
                _ => return Err("it has a redirection without a target".into()),
            },
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    Ok(parts)
}

/// A prefix's words (quote removal as for commands); `None` for an empty or unparsable prefix, which
/// allows nothing.
fn prefix_words(prefix: &str) -> Option<Vec<String>> {
    let tokens = tokenize(prefix).ok()?;
    let words: Vec<String> = tokens
        .into_iter()
        .map(|t| match t {
            Token::Word { text, .. } => Some(text),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (!words.is_empty()).then_some(words)
}

/// Whether `words` (one part) starts with `prefix`, word for word.
fn starts_with(words: &[String], prefix: &[String]) -> bool {
    words.len() >= prefix.len() && words.iter().zip(prefix).all(|(w, p)| w == p)
}

/// Whether `allow` lets `command` run without asking.
pub(crate) fn decide(command: &str, allow: &[String]) -> Decision {
    if allow.iter().any(|p| p.trim() == "*") {
        return Decision::Allowed;
    }
    let parts = match parts(command) {
        Ok(parts) => parts,
        Err(why) => return Decision::Unlisted(why),
    };
    if parts.is_empty() {
        return Decision::Unlisted("it runs no command".into());
    }
    let prefixes: Vec<Vec<String>> = allow.iter().filter_map(|p| prefix_words(p)).collect();
    for part in &parts {
        if !prefixes.iter().any(|p| starts_with(part, p)) {
            let program = part.first().map(String::as_str).unwrap_or_default();
            return Decision::Unlisted(if prefixes.is_empty() {
                "no command prefix is allowed".to_string()
            } else {
                format!("`{program}…` starts with no allowed prefix")
            });
        }
    }
    Decision::Allowed
}

/// A short description of `command` that holds no personal data, for the tool-call ledger and
/// `opc tasks --tree`: per part, the allowed prefix it matched (the org's own config text) or else
/// its program's name alone, with `…` where arguments were left out. Arguments (file names, messages,
/// addresses) are never included.
pub(crate) fn safe_summary(command: &str, allow: &[String]) -> String {
    let Ok(parts) = parts(command) else {
        // Not split (a substitution, a here-document): the first word, when it is a plain name.
        return command
            .split_whitespace()
            .next()
            .filter(|w| {
                w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
            })
            .map(|w| format!("{} …", w.rsplit('/').next().unwrap_or(w)))
            .unwrap_or_else(|| "(a command the matcher cannot split)".into());
    };
    let prefixes: Vec<Vec<String>> = allow.iter().filter_map(|p| prefix_words(p)).collect();
    let shown: Vec<String> = parts
        .iter()
        .map(|part| {
            let matched = prefixes
                .iter()
                .filter(|p| starts_with(part, p))
                .max_by_key(|p| p.len());
            let head: Vec<&str> = match matched {
                Some(p) => p.iter().map(String::as_str).collect(),
                // The program's name only (a path's last component: a path may name a person).
                None => part
                    .first()
                    .map(|w| vec![w.rsplit('/').next().unwrap_or(w)])
                    .unwrap_or_default(),
            };
            let mut text: String = head.join(" ").chars().take(40).collect();
            if part.len() > head.len() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(prefixes: &[&str]) -> Vec<String> {
        prefixes.iter().map(|p| p.to_string()).collect()
    }

    fn allowed(command: &str, prefixes: &[&str]) -> bool {
        decide(command, &allow(prefixes)) == Decision::Allowed
    }

    fn why(command: &str, prefixes: &[&str]) -> String {
        match decide(command, &allow(prefixes)) {
            Decision::Unlisted(why) => why,
            Decision::Allowed => panic!("`{command}` was allowed"),
        }
    }

    #[test]
    fn a_prefix_matches_at_a_word_boundary() {
        let p = ["cargo test", "git status", "ls"];
        assert!(allowed("cargo test", &p));
        assert!(allowed("cargo test -p opc-agents", &p));
        assert!(allowed("  cargo   test\t-p x  ", &p));
        assert!(allowed("ls", &p));
        assert!(allowed("ls -la src", &p));
        assert!(!allowed("cargo testing", &p));
        assert!(!allowed("cargo", &p));
        assert!(!allowed("lsblk", &p));
        assert!(!allowed("cargo build", &p));
        assert!(!allowed("git statusx", &p));
        assert!(!allowed("rm -rf /", &p));
    }

    #[test]
    fn every_part_must_be_allowed() {
        let p = ["cargo test", "git status", "ls", "wc"];
        for ok in [
            "cargo test; git status",
            "cargo test && git status",
            "cargo test || ls",
            "ls | wc -l",
            "ls |& wc",
            "ls\ngit status\n",
            "ls & wc",
            "ls;;wc",
            "ls&&wc",
        ] {
            assert!(allowed(ok, &p), "{ok}");
        }
        for bad in [
            "cargo test; rm -rf x",
            "cargo test && curl x",
            "ls || rm x",
            "ls | sh",
            "ls |& sh",
            "ls\nrm x",
            "ls & rm x",
            "ls&&rm x",
            "ls;rm x",
        ] {
            assert!(!allowed(bad, &p), "{bad}");
        }
    }

    #[test]
    fn quotes_are_respected() {
        let p = ["echo", "cargo test"];
        // Separators inside quotes separate nothing.
        assert!(allowed("echo 'a; rm -rf x'", &p));
        assert!(allowed("echo \"a && rm x | sh\"", &p));
        assert!(allowed("echo a\\;rm", &p));
        // Quote removal: bash runs `cargo test` here.
        assert!(allowed("cargo \"test\" -p x", &p));
        assert!(allowed("'cargo' test", &p));
        // …and `cargo testing` here.
        assert!(!allowed("cargo 'test'ing", &p));
        // A quoted word is one word: `cargo "test x"` is not `cargo test x`.
        assert!(!allowed("cargo \"test x\"", &p));
        assert!(why("echo 'unterminated", &p).contains("unterminated single quote"));
        assert!(why("echo \"unterminated", &p).contains("unterminated double quote"));
    }

    #[test]
    fn substitutions_and_here_documents_are_never_auto_allowed() {
        let p = ["echo", "cat", "ls"];
        for bad in [
            "echo $(rm -rf x)",
            "echo \"$(rm -rf x)\"",
            "echo `rm -rf x`",
            "echo \"`rm x`\"",
            "cat <(rm x)",
            "ls >(sh)",
            "echo $((1+1))",
        ] {
            assert!(why(bad, &p).contains("substitution"), "{bad}");
        }
        assert!(why("cat <<EOF\nrm x\nEOF", &p).contains("here-document"));
        // Single quotes keep them literal.
        assert!(allowed("echo '$(rm -rf x)' '`x`'", &p));
        // Plain expansions run nothing.
        assert!(allowed("echo $HOME \"$USER\"", &p));
    }

    #[test]
    fn redirections_must_stay_inside() {
        let p = ["echo", "ls", "cargo test"];
        for ok in [
            "echo hi > out.txt",
            "echo hi >> logs/out.txt",
            "ls 2>&1",
            "ls 2>/dev/null",
            "ls >/dev/null 2>&1",
            "ls &> all.log",
            "cargo test 2>&1 | ls",
            "ls < in.txt; echo",
            "echo x >| f",
            "ls <<< word",
            "ls >&-",
        ] {
            assert!(allowed(ok, &p), "{ok}");
        }
        for bad in [
            "echo hi > /etc/passwd",
            "echo hi >/tmp/x",
            "echo hi > ../x",
            "echo hi > a/../../x",
            "echo hi > ~/x",
            "echo hi > $HOME/x",
            "echo hi > \"$X\"",
            "ls &> /tmp/all",
            "ls 2> /tmp/err",
            "echo hi >",
        ] {
            assert!(!allowed(bad, &p), "{bad}");
        }
        assert!(why("echo hi > /etc/x", &p).contains("/etc/x"));
        // A descriptor number is not an argument: `ls 2>x` is `ls` with a redirection.
        assert!(allowed("ls 2>x", &["ls"]));
        // …but a word that merely ends in digits is an argument.
        assert!(allowed("ls x2>y", &["ls x2"]));
        assert!(!allowed("ls x2>y", &["ls x"]));
    }

    #[test]
    fn star_allows_everything_and_nothing_allows_nothing() {
        assert!(allowed("rm -rf / ; curl x | sh", &["*"]));
        assert!(allowed("echo $(id)", &["ls", " * "]));
        assert!(why("ls", &[]).contains("no command prefix"));
        assert!(!allowed("ls", &["", "  "]));
        assert!(why(" ; ", &["ls"]).contains("no command"));
    }

    #[test]
    fn env_assignments_and_subshells_are_not_the_allowed_program() {
        let p = ["cargo test", "ls"];
        assert!(!allowed("FOO=1 cargo test", &p));
        assert!(!allowed("(rm x)", &p));
        assert!(!allowed("{ rm x; }", &p));
        assert!(!allowed("ls; (rm x)", &p));
    }

    #[test]
    fn the_safe_summary_holds_no_arguments() {
        let p = allow(&["cargo test", "git"]);
        assert_eq!(
            safe_summary("cargo test -p x && git log alice@example.com", &p),
            "cargo test … ; git …"
        );
        assert_eq!(
            safe_summary("/home/alice/bin/send 'Dear Alice'", &p),
            "send …"
        );
        assert_eq!(safe_summary("ls", &p), "ls");
        assert!(!safe_summary("cat 'secret $(x)'", &p).contains("secret"));
        assert_eq!(safe_summary("echo $(cat alice.txt) > x", &p), "echo …");
        assert_eq!(
            safe_summary("$(cat alice.txt)", &p),
            "(a command the matcher cannot split)"
        );
    }
}
