//! Code is not prose: the seed's "code block conservative strategy".
//!
//! Worker tools fill an agent's context with code: shell commands and their error lines, paths,
//! globs, file listings, stack traces, diffs, SQL, logs, configs and source files. The NER model was
//! trained on prose, and there it reads `md` in `'*.md'`, `cat` in `cat: x: Permission denied` or a
//! YAML key as a person. Masking such a word garbles the agent's own tool output (`*.py` became
//! `*.preston`) and can stop the agent (a two-letter "name" has no fresh fake).
//!
//! So, for the types the NER tier serves (`PERSON_NAME`, `LOCATION`, `ADDRESS`), a span needs much
//! stronger evidence where the text is code:
//! - **inside a code token** it is dropped: a path, a glob, a file name with its extension, a flag, an
//!   identifier (`snake_case`, `lowerCamel`, `a::b`, `obj.method(`), `key=value`, `$VAR`, an inline
//!   `` `code span` ``, a JSON key (`"key":`), or a key of a YAML document. A name is not spelled
//!   that way;
//! - **on a code line** it is kept only with the shape of a real name or place: two or more
//!   capitalised words (`Jane Doe` in `Author: Jane Doe`, `'Ana Lima'` in an SQL `VALUES` list), a
//!   name in a script without case (Han, Hangul …), an address with a number. A single word, a
//!   lower-case word or a word in capitals is not enough. Code lines: inside a fenced block; shell
//!   commands (a prompt, or a known command with code-shaped arguments); their error lines
//!   (`cat: x: Permission denied`, `bash: line 1: foo: command not found`); `ls -l` rows; stack frames
//!   and compiler diagnostics; diff headers and hunks; SQL statements; log lines with a level; source
//!   lines (keywords, `;`/`{`/`}` endings, comments). A tool's line prefixes (`Read`'s line numbers,
//!   `Grep`'s `path:line:`) are skipped before a line is judged.
//!
//! Prose is untouched, so is every other type: e-mails, keys, cards, IBANs, phones, IPs, URLs and SSNs
//! are found everywhere by their own validated patterns.
//!
//! Invariants: only spans of the NER-served types are ever removed; nothing is added or moved. The
//! work is done only for texts with such a span, and only for the lines that hold one (block state —
//! fences, diff hunks, tracebacks — is one pass of prefix tests over the text's lines).

use std::sync::LazyLock;

use regex::Regex;

use crate::{Entity, EntityType};

/// Remove the `PERSON_NAME`, `LOCATION` and `ADDRESS` spans of `found` that lie in code without the
/// evidence a real name, place or address has there (see the module doc).
pub fn drop_code_readings(text: &str, found: &mut Vec<Entity>) {
    if !found.iter().any(|e| conservative(e.kind)) {
        return;
    }
    let map = CodeMap::new(text);
    found.retain(|e| !conservative(e.kind) || map.keeps(text, e));
}

/// The types whose readings in code need more evidence: the NER tier's, which reads words, not shapes.
fn conservative(kind: EntityType) -> bool {
    matches!(
        kind,
        EntityType::PersonName | EntityType::Location | EntityType::Address
    )
}

/// What the code rules know of one text: where its lines are, which lines sit in a code block, and
/// the ranges of its document-level code tokens (inline code spans, JSON and YAML keys).
struct CodeMap {
    /// Start offset of every line.
    starts: Vec<usize>,
    /// Per line: a code line (see [`code_line`]), or in a fenced block, a diff hunk, a traceback,
    /// or a YAML document's key line; every line when most of the text's lines are code.
    code: Vec<bool>,
    /// Byte ranges that are code whatever the line: inline code spans, JSON keys, YAML keys.
    tokens: Vec<(usize, usize)>,
}

impl CodeMap {
    fn new(text: &str) -> CodeMap {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let mut code = blocks(text, &starts);
        let mut tokens = Vec::new();
        inline_code(text, &mut tokens);
        json_keys(text, &mut tokens);
        let yaml_lines = yaml_keys(text, &starts, &mut tokens);
        tokens.sort_unstable();
        let (mut lines, mut coded) = (0, 0);
        for (i, is_code) in code.iter_mut().enumerate() {
            let line = line_at(text, &starts, i);
            if line.trim().is_empty() {
                continue;
            }
            lines += 1;
            *is_code = *is_code || yaml_lines.contains(&i) || code_line(strip_tool_prefix(line));
            coded += usize::from(*is_code);
        }
        // A text that is mostly code (a tool's output, a source file) is code throughout: its other
        // lines are table rows, plan nodes or messages of the same output, not a letter.
        if lines > 0 && 2 * coded >= lines {
            code.iter_mut().for_each(|c| *c = true);
        }
        CodeMap {
            starts,
            code,
            tokens,
        }
    }

    /// The index of the line that holds byte offset `at`.
    fn line(&self, at: usize) -> usize {
        self.starts.partition_point(|&s| s <= at).saturating_sub(1)
    }

    /// Whether `e` (a conservative type) survives the code rules.
    fn keeps(&self, text: &str, e: &Entity) -> bool {
        if self.tokens.iter().any(|&(s, t)| s < e.end && e.start < t) {
            return false;
        }
        if in_code_token(text, e.start, e.end) {
            return false;
        }
        if !self.code[self.line(e.start)] {
            return true;
        }
        // In code, a word before a colon is a key, a label or a program, not a speaker.
        let after = text[e.end..].trim_start_matches([' ', '\t']);
        !after.starts_with(':') && strong(e.kind, e.text(text))
    }
}

/// Line `i` of `text`, without its newline.
fn line_at<'t>(text: &'t str, starts: &[usize], i: usize) -> &'t str {
    let end = starts.get(i + 1).map_or(text.len(), |&n| n - 1);
    &text[starts[i]..end]
}

/// Per line, whether it lies in a fenced code block (fence lines included), a diff hunk or a Python
/// traceback.
fn blocks(text: &str, starts: &[usize]) -> Vec<bool> {
    #[derive(PartialEq)]
    enum State {
        Prose,
        Fence(&'static str),
        Diff,
        Traceback,
    }
    let mut state = State::Prose;
    let mut out = Vec::with_capacity(starts.len());
    for i in 0..starts.len() {
        let line = strip_tool_prefix(line_at(text, starts, i));
        let trimmed = line.trim_start();
        let fence = if trimmed.starts_with("```") {
            Some("```")
        } else if trimmed.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        let code = match state {
            State::Fence(open) => {
                if fence == Some(open) {
                    state = State::Prose;
                }
                true
            }
            _ if fence.is_some() => {
                state = State::Fence(fence.unwrap_or("```"));
                true
            }
            State::Diff if diff_body(line) => true,
            State::Traceback if line.starts_with([' ', '\t']) || trimmed.is_empty() => true,
            State::Traceback => {
                // The exception line that ends it (`ValueError: …`) is code too.
                state = State::Prose;
                true
            }
            _ => {
                state = State::Prose;
                if line.starts_with("diff --git ") || line.starts_with("@@ ") {
                    state = State::Diff;
                    true
                } else if line.starts_with("Traceback (most recent call last)") {
                    state = State::Traceback;
                    true
                } else {
                    false
                }
            }
        };
        out.push(code);
    }
    out
}

/// A line that continues a diff: a hunk line, a header, or a hunk marker.
fn diff_body(line: &str) -> bool {
    line.is_empty()
        || line.starts_with(['+', '-', ' ', '\\'])
        || line.starts_with("@@")
        || line.starts_with("diff ")
        || line.starts_with("index ")
        || line.starts_with("new file mode")
        || line.starts_with("deleted file mode")
        || line.starts_with("similarity index")
        || line.starts_with("rename ")
}

/// `line` without a tool's prefix: `Read`'s right-aligned line number and tab (`    12\t`), or a
/// `Grep` hit's `path:12:` / context line's `path-12-`.
fn strip_tool_prefix(line: &str) -> &str {
    static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:\s*\d+\t|\s*[\w./~-]*[/.][\w./-]*[:-]\d+[:-])").expect("prefix pattern")
    });
    PREFIX.find(line).map_or(line, |m| &line[m.end()..])
}

/// Programs whose name starts a shell command or its error lines.
const COMMANDS: &[&str] = &[
    "ag",
    "apt",
    "apt-get",
    "awk",
    "basename",
    "bash",
    "brew",
    "bun",
    "bundle",
    "bzip2",
    "cargo",
    "cat",
    "cc",
    "cd",
    "chmod",
    "chown",
    "clang",
    "cmake",
    "column",
    "comm",
    "cp",
    "curl",
    "cut",
    "date",
    "dd",
    "deno",
    "df",
    "diff",
    "dig",
    "dirname",
    "docker",
    "dotnet",
    "dpkg",
    "du",
    "echo",
    "ed",
    "env",
    "export",
    "fd",
    "file",
    "find",
    "g++",
    "gcc",
    "gem",
    "git",
    "go",
    "gradle",
    "grep",
    "gunzip",
    "gzip",
    "head",
    "helm",
    "install",
    "java",
    "javac",
    "journalctl",
    "jq",
    "kill",
    "kubectl",
    "less",
    "ln",
    "ls",
    "lsof",
    "make",
    "mkdir",
    "mktemp",
    "more",
    "mv",
    "mvn",
    "mysql",
    "nano",
    "nl",
    "node",
    "npm",
    "npx",
    "od",
    "patch",
    "perl",
    "php",
    "pip",
    "pip3",
    "pnpm",
    "printf",
    "ps",
    "psql",
    "pwd",
    "py",
    "pytest",
    "python",
    "python3",
    "readlink",
    "realpath",
    "rg",
    "rm",
    "rmdir",
    "rsync",
    "ruby",
    "rustc",
    "rustup",
    "scp",
    "sed",
    "seq",
    "sh",
    "sort",
    "sqlite3",
    "ssh",
    "stat",
    "strace",
    "sudo",
    "systemctl",
    "tail",
    "tar",
    "tee",
    "terraform",
    "test",
    "timeout",
    "touch",
    "tr",
    "tree",
    "tsc",
    "type",
    "uname",
    "uniq",
    "unzip",
    "vi",
    "vim",
    "wc",
    "wget",
    "which",
    "xargs",
    "xxd",
    "yarn",
    "yq",
    "zip",
    "zsh",
];

/// Words of an error message after `prog: ` that say the line is a program's complaint, not a chat
/// line (matched case-insensitively).
const ERROR_WORDS: &[&str] = &[
    "no such file",
    "permission denied",
    "not a directory",
    "is a directory",
    "cannot ",
    "can't ",
    "command not found",
    "not found",
    "invalid option",
    "illegal option",
    "unrecognized option",
    "unrecognised option",
    "operation not permitted",
    "missing operand",
    "file exists",
    "directory not empty",
    "read-only file system",
    "no space left",
    "too many",
    "broken pipe",
    "invalid argument",
    "syntax error",
    "unexpected",
    "unterminated",
    "usage:",
    "error",
    "warning",
    "fatal",
    "failed",
    "errno",
    "not permitted",
    "omitting directory",
    "are the same file",
    "unknown",
];

/// Whether `line` (a tool's prefix already stripped) is a line of code (see the module doc).
fn code_line(line: &str) -> bool {
    static LINE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(concat!(
            r"^(?:",
            // ls -l rows and their total.
            r"[-dlcbps][rwxsStT-]{9}[.+@]?\s+\d+\s|total \d+\s*$",
            // Stack frames and diagnostics.
            r#"|\s*at \S+ ?\(\S*:\d+(?::\d+)?\)\s*$|\s*at \S+:\d+:\d+\s*$|\s*File ".*", line \d+"#,
            r"|\s*\d+: +(?:0x[0-9a-f]+ - )?[\w<>$]*(?:::|_)[\w:<>$.]*|\s+at \S+:\d+|\s*--> \S+:\d+",
            r"|\s*\d* +\| |goroutine \d+ \[|thread '.*' panicked|panic: |Traceback ",
            r"|(?:error|warning)(?:\[\w+\])?: |Exception in thread ",
            r"|\s*[\w.$]+(?:Error|Exception)(?::|$)|\s*Caused by: ",
            // Diff headers.
            r"|diff --git |index [0-9a-f]{6,}\.\.|(?:---|\+\+\+) (?:a/|b/|/dev/null)|@@ -\d",
            // Log lines with a level.
            r"|\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?\S*\]?\s+\[?(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL|trace|debug|info|warn|error)\b",
            r"|\s*(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\s*[:\]|-]|.*\blevel=\w+",
            // A shell prompt.
            r"|\s*(?:\$|PS>|>>>) ",
            // Source lines: comments, keywords that start declarations, and block endings.
            r"|\s*(?://|/\*|\*/|#!|#include|<\?php|-- )",
            r"|\s*(?:pub(?:\([\w:]+\))? )?(?:async )?(?:unsafe )?fn \w+\s*[<(]",
            r"|\s*(?:let(?: mut)?|const|var|val) [\w{}\[\], :<>]+ = |\s*(?:async )?def \w+\(",
            r"|\s*class \w+\s*(?:[:({<]|extends |implements )|\s*func (?:\(.*\) )?\w+\(",
            r#"|\s*import (?:\w+(?:\.\w+)+;?\s*$|[{*"']|static |type |\w+ from |\w+;?\s*$|\w+ as )"#,
            r"|\s*from [\w.]+ import |\s*use [\w:]+(?:::|;)|\s*package [\w.]+;?\s*$|\s*#include [<\x22]",
            r"|\s*(?:public|private|protected|internal) .*[({;=]",
            r"|\s*(?:if|for|while|switch|catch) \(|\s*\} ?else|\s*try \{|.*\brequire\(",
            r"|\s*export (?:default|const|function|class|interface|type|async|\{)",
            r"|.*[;{}]\s*$",
            // SQL.
            r"|\s*(?:SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|EXPLAIN|WITH)\s.*\b(?:FROM|INTO|SET|TABLE|INDEX|WHERE|VALUES|AS|VIEW)\b|\s*select \*",
            r")"
        ))
        .expect("code line pattern")
    });
    if LINE.is_match(line) {
        return true;
    }
    shell_line(line) || dense(line)
}

/// A row of numbers and code tokens: at least three words, half of them numbers (`169084`, `0.0`,
/// `10:01`, `9kB`) or code tokens, or two code tokens. A `ps`, `df` or `du` row, a query plan's
/// node, a CSV of counts, a line of arguments.
fn dense(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 3 {
        return false;
    }
    let numeric = |w: &str| {
        let w = w.trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | ',' | ';'));
        w.starts_with(|c: char| c.is_ascii_digit())
            && 2 * w.chars().filter(char::is_ascii_digit).count() >= w.chars().count()
    };
    let code = words.iter().filter(|w| token_is_code(w)).count();
    let n = code + words.iter().filter(|w| numeric(w)).count();
    // Two code tokens make a line code whatever else it holds: prose rarely has one. Numbers make a
    // row only when they are most of a line that is not a sentence: a chat line's timestamp, or an
    // IBAN in "Salary account: FR03 0492 … Manager: Mrs. Zieliński.", does not.
    let sentence = line.trim_end().ends_with(['.', '!', '?']);
    code >= 2 || (!sentence && n >= 3 && 2 * n > words.len())
}

/// A shell command (a known program, after `sudo` or variable assignments, with code-shaped arguments
/// or a pipe or redirect) or its error line (`prog: …: Permission denied`, `/bin/sh: 1: x: not found`).
fn shell_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    // `prog: message` / `prog: arg: message` / `/bin/sh: 1: …`.
    if let Some((head, rest)) = trimmed.split_once(": ") {
        let head = head.strip_suffix(|c: char| c == ']').map_or(head, |h| {
            h.rsplit_once('[').map_or(h, |(name, pid)| {
                if pid.chars().all(|c| c.is_ascii_digit()) {
                    name
                } else {
                    h
                }
            })
        });
        let program = head.rsplit('/').next().unwrap_or(head);
        let shaped = !head.is_empty()
            && !head.contains(' ')
            && (COMMANDS.contains(&program)
                || (head.starts_with('/') && program.chars().all(|c| c.is_ascii_lowercase())));
        let lower = rest.to_lowercase();
        // Many programs are English words (`date`, `file`, `test`, `more`): their name before a
        // colon is a program only with the error it reports, or with the operand it names
        // (`grep: assets/logo.png: binary file matches`).
        if shaped && (ERROR_WORDS.iter().any(|w| lower.contains(w)) || rest.contains(": ")) {
            return true;
        }
        if !head.contains(' ')
            && head
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
            && rest.contains(": ")
            && ERROR_WORDS.iter().any(|w| lower.contains(w))
        {
            // `myscript: line 3: foo: command not found`: two fields and an error.
            return true;
        }
    }
    let mut words = trimmed.split_whitespace().peekable();
    while let Some(w) = words.peek() {
        if *w == "sudo" || (w.contains('=') && !w.starts_with('=')) {
            words.next();
        } else {
            break;
        }
    }
    let Some(program) = words.next() else {
        return false;
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    if !COMMANDS.contains(&program) {
        return false;
    }
    let args: Vec<&str> = words.collect();
    args.is_empty()
        || args.iter().any(|a| {
            a.starts_with(['-', '.', '/', '~', '\'', '"', '$', '|', '>', '<', '*', '&'])
                || a.contains(['/', '*', '=', '|', '>'])
                || token_is_code(a)
        })
}

/// File extensions a name is written with (lower case).
const EXTENSIONS: &[&str] = &[
    "adoc", "bak", "bat", "bin", "c", "cc", "cfg", "cjs", "conf", "cpp", "cs", "css", "csv", "cxx",
    "d", "db", "dll", "env", "erl", "ex", "exe", "exs", "go", "gradle", "gz", "h", "hpp", "hs",
    "htm", "html", "ini", "ipynb", "jar", "java", "jpeg", "jpg", "js", "json", "jsx", "kt", "kts",
    "lock", "log", "lua", "md", "mdx", "mjs", "mk", "ml", "o", "patch", "pdf", "php", "pl", "png",
    "proto", "ps1", "py", "pyc", "pyi", "r", "rb", "rs", "rst", "sass", "scala", "scss", "sh",
    "so", "sql", "sqlite", "svg", "swift", "tar", "tex", "tf", "tgz", "toml", "ts", "tsx", "tsv",
    "txt", "vue", "wasm", "xml", "yaml", "yml", "zip", "zsh",
];

/// Whether the whitespace-delimited word around `start..end` is a code token.
fn in_code_token(text: &str, start: usize, end: usize) -> bool {
    let bytes = text.as_bytes();
    let mut s = start;
    while s > 0 && !bytes[s - 1].is_ascii_whitespace() {
        s -= 1;
    }
    let mut t = end;
    while t < bytes.len() && !bytes[t].is_ascii_whitespace() {
        t += 1;
    }
    // Only a one-word span is judged by its word: a span of several words (`Jane Doe` before a
    // path) is a name's shape, left to the line rules.
    let word = &text[s..t];
    if text[start..end].contains(char::is_whitespace) {
        return false;
    }
    token_is_code(word)
}

/// Whether one whitespace-free word is code: a path, glob, file name, flag, identifier, key=value,
/// variable or call (see the module doc).
fn token_is_code(word: &str) -> bool {
    let word = word.trim_matches(|c: char| {
        matches!(
            c,
            '\'' | '"'
                | '`'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | ','
                | ';'
                | '!'
                | '?'
        )
    });
    let word = word.strip_suffix([':', '.']).unwrap_or(word);
    // URLs and e-mail addresses have recognisers of their own, which find them in code and prose.
    if word.is_empty() || word.contains("://") || word.contains('@') {
        return false;
    }
    let letters = |s: &str| s.chars().any(char::is_alphabetic);
    // Paths and globs.
    if (word.contains('/') || word.contains('\\')) && letters(word) && !word.contains("//") {
        return true;
    }
    if word.contains('*') && (word.contains('.') || word.contains('/')) {
        return true;
    }
    if word.starts_with('-') && word.len() > 1 && letters(word) {
        return true;
    }
    if word.starts_with(['$', '%', '~']) && word.len() > 1 {
        return true;
    }
    if word.contains("::") || word.contains("->") || word.contains("=>") || word.contains("()") {
        return true;
    }
    // A call: an identifier right before `(` (`parseLine("a`, `fmt.Println(x)`).
    if let Some((callee, _)) = word.split_once('(')
        && callee.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && callee
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
    {
        return true;
    }
    if let Some((key, value)) = word.split_once('=')
        && !key.is_empty()
        && !value.is_empty()
    {
        return true;
    }
    // snake_case and SCREAMING_CASE identifiers.
    if let Some(i) = word.find('_')
        && i > 0
        && i + 1 < word.len()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    {
        return true;
    }
    // lowerCamelCase: a lower-case start, then a capital inside (`getUser`, `parseMd`).
    let mut chars = word.chars();
    if chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && chars.any(|c| c.is_ascii_uppercase())
    {
        return true;
    }
    // A file name with its extension, or an extension alone (`.md`, `README.md`, `a.test.ts`), and
    // dotted identifiers with a call or three parts (`os.path.join`, `fmt.Println(`).
    if let Some((head, ext)) = word.rsplit_once('.') {
        let ext_known = EXTENSIONS.contains(&ext);
        if ext_known
            && (head.is_empty()
                || head
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '.' | '-' | '_' | '*' | '+')))
        {
            return true;
        }
        // Identifiers, not a version (`v0.2.3`): every part starts with a letter.
        if word.split('.').count() >= 3
            && word.split('.').all(|p| {
                p.starts_with(|c: char| c.is_alphabetic() || c == '_')
                    && p.chars().all(|c| c.is_alphanumeric() || c == '_')
            })
            && word.chars().next().is_some_and(char::is_lowercase)
        {
            return true;
        }
    }
    false
}

/// Inline code spans: text between single backticks on one line.
fn inline_code(text: &str, out: &mut Vec<(usize, usize)>) {
    let mut open: Option<usize> = None;
    for (i, c) in text.char_indices() {
        match c {
            '`' => match open {
                Some(s) => {
                    if i > s + 1 {
                        out.push((s + 1, i));
                    }
                    open = None;
                }
                None => open = Some(i),
            },
            '\n' => open = None,
            _ => {}
        }
    }
}

/// The keys of JSON objects: `"key":`.
fn json_keys(text: &str, out: &mut Vec<(usize, usize)>) {
    static KEY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#""([^"\n\\]{1,64})"\s*:"#).expect("json key pattern"));
    if !text.contains("\":") && !text.contains("\" :") {
        return;
    }
    for caps in KEY.captures_iter(text) {
        if let Some(key) = caps.get(1) {
            out.push((key.start(), key.end()));
        }
    }
}

/// The keys of a YAML document: `key:` at a line's start (after indentation or `- `), counted only
/// when the text reads as YAML rather than a chat transcript or a form: a `---` line, or nested keys
/// (an indented key line below a key line with no value), or several keys whose values are scalars a
/// config holds (numbers, booleans, quoted strings, paths, flow collections).
/// Returns the indexes of the key lines when it counts them.
fn yaml_keys(text: &str, starts: &[usize], out: &mut Vec<(usize, usize)>) -> Vec<usize> {
    static KEY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(\s*)(?:- )?([A-Za-z_][\w.-]{0,63})\s*:(?:\s+(.*?))?\s*$")
            .expect("yaml key pattern")
    });
    if !text.contains(':') {
        return Vec::new();
    }
    let mut keys = Vec::new();
    let mut lines = Vec::new();
    let (mut nested, mut scalars, mut document) = (0, 0, false);
    let mut open_parent = false;
    for (i, &start) in starts.iter().enumerate() {
        let line = line_at(text, starts, i);
        if line.trim_end() == "---" {
            document = true;
            continue;
        }
        let Some(caps) = KEY.captures(line) else {
            open_parent = false;
            continue;
        };
        let (Some(indent), Some(key)) = (caps.get(1), caps.get(2)) else {
            continue;
        };
        let value = caps.get(3).map_or("", |v| v.as_str());
        if !indent.as_str().is_empty() && open_parent {
            nested += 1;
        }
        open_parent = value.is_empty();
        if yaml_scalar(value) {
            scalars += 1;
        }
        keys.push((start + key.start(), start + key.end()));
        lines.push(i);
    }
    // A chat transcript has the same shape (`kai: yes` / `mo: 12` / `kai: im in lisbon till
    // friday`), but its heads repeat (a speaker speaks again; a mapping holds each key once), no
    // line is a list item, and at least half of what follows the heads is said: a sentence of
    // plain words. A tool's records repeat their keys too (`stat`'s `Modify:`, ansible's
    // `changed:`), but hold no sentence. Without a `---` or nesting, a transcript is not YAML.
    let transcript = {
        let mut heads: Vec<&str> = Vec::new();
        let (mut repeated, mut listed, mut said) = (false, false, 0);
        for &i in &lines {
            let line = line_at(text, starts, i);
            let Some(caps) = KEY.captures(line) else {
                continue;
            };
            let (Some(indent), Some(key)) = (caps.get(1), caps.get(2)) else {
                continue;
            };
            listed |= line.trim_start().starts_with("- ");
            let value = caps.get(3).map_or("", |v| v.as_str());
            if indent.as_str().is_empty() {
                repeated |= heads.contains(&key.as_str());
                heads.push(key.as_str());
            }
            said += usize::from(sentence(value));
        }
        repeated && !listed && said >= 1 && 2 * said >= lines.len()
    };
    if keys.len() >= 2 && (document || nested >= 1 || (scalars >= 2 && !transcript)) {
        out.extend(keys);
        lines
    } else {
        Vec::new()
    }
}

/// Whether a value is a sentence of plain words: three or more, at least two in three of them
/// lower-case letters only (`im in lisbon till friday`), not a record's fields.
fn sentence(value: &str) -> bool {
    let words: Vec<&str> = value.split_whitespace().collect();
    let plain = words
        .iter()
        .filter(|w| {
            w.trim_end_matches([',', '.', '!', '?'])
                .chars()
                .all(|c| c.is_lowercase() || c == '\'')
        })
        .count();
    words.len() >= 3 && 3 * plain >= 2 * words.len()
}

/// A value a config holds rather than a sentence: a number, a boolean or null, a quoted string, a
/// flow collection, a block scalar indicator, an anchor or alias, or a code token.
fn yaml_scalar(value: &str) -> bool {
    let v = value.trim();
    !v.is_empty()
        && (v.parse::<f64>().is_ok()
            || matches!(
                v,
                "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~"
            )
            || v.starts_with(['"', '\'', '[', '{', '|', '>', '&', '*'])
            || (!v.contains(' ') && token_is_code(v)))
}

/// The evidence a name, place or address needs on a code line.
fn strong(kind: EntityType, span: &str) -> bool {
    let words: Vec<&str> = span
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let cased = |w: &str| {
        let mut chars = w.chars();
        chars.next().is_some_and(char::is_uppercase)
            && (w.chars().count() <= 2 || chars.any(char::is_lowercase))
    };
    // Scripts without case (Han, Hangul, Arabic, Devanagari …): the model and the script rules only
    // report runs that look like names, and code is written in ASCII.
    let caseless = span
        .chars()
        .any(|c| c.is_alphabetic() && !c.is_lowercase() && !c.is_uppercase());
    match kind {
        EntityType::Address => {
            span.chars().any(|c| c.is_ascii_digit())
                && words.iter().filter(|w| cased(w)).count() >= 2
        }
        _ => caseless || (words.len() >= 2 && words.iter().all(|w| cased(w))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn person(text: &str, value: &str) -> Entity {
        let start = text.find(value).unwrap();
        Entity {
            kind: EntityType::PersonName,
            start,
            end: start + value.len(),
            score: 0.99,
        }
    }

    fn kept(text: &str, value: &str) -> bool {
        let mut found = vec![person(text, value)];
        drop_code_readings(text, &mut found);
        !found.is_empty()
    }

    #[test]
    fn a_chat_answering_yes_and_numbers_is_not_yaml() {
        let place = |text: &str, value: &str| {
            let mut found = vec![Entity {
                kind: EntityType::Location,
                ..person(text, value)
            }];
            drop_code_readings(text, &mut found);
            !found.is_empty()
        };
        let chat = "kai: anyone on tonight\nmo: yes\nkai: 12\nmo: im in lisbon till friday";
        let play = "changed: [web1]\nok: [web2]\nchanged: [web3]";
        assert!(!kept(play, "changed"));
        assert!(place(chat, "lisbon"));
        assert!(kept(chat, "kai"));
        let config = "host: db.internal\nport: 5432\nssl: true\nregion: lisbon";
        assert!(!place(config, "lisbon"));
    }

    #[test]
    fn globs_paths_and_extensions_are_not_names() {
        assert!(!kept("find . -name '*.md'", "md"));
        assert!(!kept("Found 2 files\nREADME.md\ndocs/guide.md", "guide"));
        assert!(!kept("edit `handle_ravi` please", "ravi"));
        assert!(!kept("TZ=Europe/Berlin", "Berlin"));
    }

    #[test]
    fn shell_errors_are_not_a_transcript() {
        let text = "cat: x: Permission denied\nls: cannot access 'y': No such file or directory\nhead: cannot open 'z' for reading";
        assert!(!kept(text, "cat"));
        assert!(!kept(text, "ls"));
        assert!(!kept(text, "head"));
        assert!(!kept("bash: line 1: foo: command not found", "foo"));
    }

    #[test]
    fn a_real_name_in_code_keeps_its_shape() {
        assert!(kept("// Author: Jane Doe", "Jane Doe"));
        assert!(!kept("// TODO(jane): fix", "jane"));
        assert!(kept(
            "INSERT INTO users (name) VALUES ('Ana Lima');",
            "Ana Lima"
        ));
    }

    #[test]
    fn prose_is_untouched() {
        assert!(kept("ravi: are you coming", "ravi"));
        assert!(kept("ravi: ok\nana: yes", "ana"));
        assert!(kept("Please ask Ravi about the report.", "Ravi"));
        assert!(kept("name: Jane Doe\nphone: unknown", "Jane Doe"));
        // Chat exports, IRC, forms and plans: timestamps and numbers do not make code.
        assert!(kept("[2024-03-12 10:42] ravi: ok", "ravi"));
        assert!(kept("[10:42] <ravi> see you at 10:30", "ravi"));
        assert!(kept("meet at ravi's place at 7:30", "ravi"));
        assert!(kept("date: 12 March, with jane", "jane"));
        assert!(kept(
            "Salary account: FR03 0492 0416 9565 4016 6637 684. Manager: Mrs. Zieliński.",
            "Zieliński"
        ));
        assert!(kept(
            "Server returned 503 after Bjørn pushed v0.2.3; see https://x.example.com/a?view=full.",
            "Bjørn"
        ));
    }

    #[test]
    fn rows_of_figures_and_plans_are_code() {
        let ps = "USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND\nrunner 812 0.0 0.1 169084 11788 ? Ss 10:01 0:02 /sbin/init";
        assert!(!kept(ps, "runner"));
        let plan = "Hash Join  (cost=412.35..1623.10 rows=14680 width=46)\n  Hash Cond: (oi.product_id = p.id)\n  ->  Hash  (cost=22.00..22.00 rows=1000 width=40)\n        Buckets: 1024  Batches: 1\n        ->  Seq Scan on products p  (cost=0.00..22.00 rows=1000 width=40)";
        assert!(!kept(plan, "Buckets"));
        assert!(!kept(
            "    main_test.go:41: parseLine(\"a b\") = {}, want error",
            "parseLine"
        ));
    }

    #[test]
    fn yaml_and_json_keys_are_code() {
        let yaml = "services:\n  web:\n    image: nginx\n    restart: always\n";
        assert!(!kept(yaml, "image"));
        assert!(!kept(r#"{"ravi": 1, "b": 2}"#, "ravi"));
        assert!(kept(r#"{"name": "Jane Doe"}"#, "Jane Doe"));
    }

    #[test]
    fn other_types_are_never_touched() {
        let text = "cat: x: Permission denied";
        let mut found = vec![Entity {
            kind: EntityType::Email,
            start: 0,
            end: 3,
            score: 1.0,
        }];
        drop_code_readings(text, &mut found);
        assert_eq!(found.len(), 1);
    }
}
