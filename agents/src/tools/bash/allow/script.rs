//! Reading a command line with bash's grammar (`brush-parser`), and finding what in it is not plain.
//!
//! The walk collects every simple command it meets (inside compound commands and function bodies
//! too, for the ledger's summary) and, in source order, every form that is not plain. A command line
//! is plain when that list is empty: simple commands joined by `;`, `&`, `&&`, `||`, `|`, `|&` and
//! newlines, each with plain words ([`words`]) and simple redirections to workspace paths, and none
//! an eval-like builtin ([`builtins`]).
//!
//! The parser runs on a thread of its own with a large stack: it is recursive, and a deeply nested
//! command (`{ { { …`) would otherwise overflow the caller's stack and abort the whole gateway. A
//! command longer than [`MAX_CHARS`], or with more than [`MAX_NESTING`] brackets and compound
//! keywords, is not parsed at all; a panic in the parser is caught there too. All of these are
//! unlisted. The parser's own debug logging (the command's tokens) is silenced on that thread.

use brush_parser::ast::{
    self, CommandPrefixOrSuffixItem as Item, IoFileRedirectTarget, IoRedirect,
};
use brush_parser::{Parser, ParserOptions};

use super::builtins;
use super::words::{self, Word, short};

/// The longest command the matcher parses, in characters.
pub(super) const MAX_CHARS: usize = 100_000;
/// The most brackets (`(`, `{`, `[`, backticks) and compound keywords a parsed command may hold. Each
/// may nest, and the parser's stack grows with the nesting.
pub(super) const MAX_NESTING: usize = 256;
/// The parser thread's stack: room for [`MAX_NESTING`] levels with a wide margin, in debug builds too
/// (a level takes up to ~20 KiB there). Only the pages used are ever touched.
const STACK: usize = 64 << 20;

const KEYWORDS: [&str; 12] = [
    "if", "then", "elif", "else", "while", "until", "for", "do", "case", "select", "function",
    "coproc",
];

/// One simple command: its words (the program first), redirections left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Part {
    pub words: Vec<Word>,
    /// Whether it has a redirection.
    pub redirected: bool,
}

/// A command line, read.
#[derive(Clone, Debug, Default)]
pub(super) struct Script {
    /// Every simple command found, in source order.
    pub parts: Vec<Part>,
    /// Why the command is not plain, one entry per form found, in source order; empty when plain.
    pub problems: Vec<String>,
}

/// The command line and the allow prefixes, read on the parser's thread.
pub(super) struct Reading {
    /// The command, or why it could not be read at all.
    pub script: Result<Script, String>,
    /// Each prefix's words, for the prefixes that are one plain simple command of literal words
    /// without redirections; the others allow nothing.
    pub prefixes: Vec<Vec<String>>,
}

/// Read `command` and the `allow` prefixes.
pub(super) fn read(command: &str, allow: &[String]) -> Reading {
    let (command, allow) = (command.to_string(), allow.to_vec());
    let thread = std::thread::Builder::new()
        .name("opc-bash-allow".into())
        .stack_size(STACK)
        .spawn(move || {
            // The parser logs the tokens and the tree at debug level: the command's text, which may
            // hold personal data, must not reach OPC's log.
            let silent = tracing::subscriber::NoSubscriber::default();
            tracing::subscriber::with_default(silent, || Reading {
                script: read_one(&command),
                prefixes: allow.iter().filter_map(|p| prefix_words(p)).collect(),
            })
        });
    let failed = |why: &str| Reading {
        script: Err(why.to_string()),
        prefixes: Vec::new(),
    };
    match thread {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| failed("the shell parser failed on it")),
        Err(_) => failed("the matcher could not start its parser"),
    }
}

/// A prefix's words; `None` for a prefix that is empty, not plain, or more than one simple command.
fn prefix_words(prefix: &str) -> Option<Vec<String>> {
    let script = read_one(prefix).ok()?;
    let [part] = script.parts.as_slice() else {
        return None;
    };
    (script.problems.is_empty() && !part.redirected && part.words.iter().all(|w| w.literal))
        .then(|| part.words.iter().map(|w| w.text.clone()).collect())
}

/// Parse and walk one command line (on the parser's thread).
fn read_one(command: &str) -> Result<Script, String> {
    if command.chars().count() > MAX_CHARS {
        return Err(format!(
            "it is longer than the matcher reads ({MAX_CHARS} characters)"
        ));
    }
    let nesting = command
        .chars()
        .filter(|c| matches!(c, '(' | '{' | '[' | '`'))
        .count()
        + command
            .split(|c: char| c.is_whitespace() || ";|&()<>".contains(c))
            .filter(|w| KEYWORDS.contains(w))
            .count();
    if nesting > MAX_NESTING {
        return Err(format!(
            "it holds more brackets and keywords than the matcher reads ({MAX_NESTING})"
        ));
    }
    // As `bash -c` reads it: not interactive, so no `extglob` and no aliases.
    let options = ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion_at_word_start: true,
        tilde_expansion_after_colon: false,
        ..ParserOptions::default()
    };
    let program = Parser::new(std::io::Cursor::new(command.as_bytes()), &options)
        .parse_program()
        .map_err(|e| format!("bash's grammar does not parse it ({e})"))?;
    let mut walk = Walk {
        options,
        source: command.chars().collect(),
        script: Script::default(),
        changes_directory: false,
        redirects_to_file: false,
    };
    for list in &program.complete_commands {
        walk.list(list);
    }
    if walk.changes_directory && walk.redirects_to_file {
        walk.problem(
            "it changes directory (`cd`) and redirects to a file, which may then lie outside the \
             workspace"
                .into(),
        );
    }
    Ok(walk.script)
}

struct Walk {
    options: ParserOptions,
    /// The command line's characters (the parser's positions count characters).
    source: Vec<char>,
    script: Script,
    changes_directory: bool,
    redirects_to_file: bool,
}

impl Walk {
    fn problem(&mut self, why: String) {
        self.script.problems.push(why);
    }

    /// `a; b & c` and newlines: every item's and-or list. Backgrounding (`&`) is plain: the sandbox
    /// kills what is left of the command's process group when bash exits.
    fn list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, _separator) in &list.0 {
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                let (ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline)) = next;
                self.pipeline(pipeline);
            }
        }
    }

    /// `a | b |& c`, maybe with `!` or `time`, which only negate or time it.
    fn pipeline(&mut self, pipeline: &ast::Pipeline) {
        for command in &pipeline.seq {
            self.command(command);
        }
    }

    fn command(&mut self, command: &ast::Command) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.problem(format!("it uses {}", compound_form(compound)));
                self.compound(compound);
                for redirect in redirects.iter().flat_map(|r| &r.0) {
                    self.redirect(redirect);
                }
            }
            ast::Command::Function(function) => {
                self.problem(format!(
                    "it defines a function (`{} ()`), which may shadow an allowed command",
                    short(&function.fname.value)
                ));
                self.compound(&function.body.0);
            }
            ast::Command::ExtendedTest(..) => self.problem(
                "it uses a `[[ … ]]` test, which evaluates arithmetic and subscripts".into(),
            ),
        }
    }

    /// The commands inside a compound command, for the summary (the compound is already a problem).
    fn compound(&mut self, compound: &ast::CompoundCommand) {
        use ast::CompoundCommand as C;
        match compound {
            C::BraceGroup(group) => self.list(&group.list),
            C::Subshell(subshell) => self.list(&subshell.list),
            C::ForClause(clause) => self.list(&clause.body.list),
            C::ArithmeticForClause(clause) => self.list(&clause.body.list),
            C::CaseClause(clause) => {
                for list in clause.cases.iter().filter_map(|c| c.cmd.as_ref()) {
                    self.list(list);
                }
            }
            C::IfClause(clause) => {
                self.list(&clause.condition);
                self.list(&clause.then);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition);
                    }
                    self.list(&other.body);
                }
            }
            C::WhileClause(clause) | C::UntilClause(clause) => {
                self.list(&clause.0);
                self.list(&clause.1.list);
            }
            C::Coprocess(coprocess) => self.command(&coprocess.body),
            C::Arithmetic(_) => {}
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) {
        let mut words = Vec::new();
        let redirected = simple
            .prefix
            .iter()
            .flat_map(|p| &p.0)
            .chain(simple.suffix.iter().flat_map(|s| &s.0))
            .any(|item| matches!(item, Item::IoRedirect(_)));
        for item in simple.prefix.iter().flat_map(|p| &p.0) {
            match item {
                Item::AssignmentWord(_, word) => {
                    self.problem(format!("it assigns a variable (`{}`)", short(&word.value)))
                }
                _ => self.item(item, &mut words),
            }
        }
        if let Some(name) = &simple.word_or_name {
            words.push(self.word(name));
        }
        for item in simple.suffix.iter().flat_map(|s| &s.0) {
            // After the program, `a=b` is an argument (`make CC=gcc`); the builtins that would take
            // it as an assignment are never plain.
            self.item(item, &mut words);
        }
        if words.is_empty() {
            self.problem("it has a redirection without a command".into());
            return;
        }
        if let Some(why) = builtins::why_not_plain(&words) {
            self.problem(why);
        }
        self.changes_directory |= builtins::changes_directory(&words);
        self.script.parts.push(Part { words, redirected });
    }

    fn item(&mut self, item: &Item, words: &mut Vec<Word>) {
        match item {
            Item::Word(word) | Item::AssignmentWord(_, word) => words.push(self.word(word)),
            Item::IoRedirect(redirect) => self.redirect(redirect),
            Item::ProcessSubstitution(..) => {
                self.problem("it uses process substitution (`<(…)` or `>(…)`)".into());
            }
        }
    }

    /// A word after quote removal; one that is not plain is a problem, and kept as written.
    fn word(&mut self, word: &ast::Word) -> Word {
        // `{name}>file` makes bash assign a new descriptor's number to `name`, evaluating a
        // subscript in it (`{a['$(…)']}>f` runs the substitution). The parser does not know this
        // form, and reads a word and a redirection.
        let braced = word.value.starts_with('{') && word.value.ends_with('}');
        let before_redirection = word
            .loc
            .as_ref()
            .is_none_or(|loc| matches!(self.source.get(loc.end.index), Some('<' | '>')));
        if braced && before_redirection {
            self.problem(format!(
                "it names a descriptor variable (`{}>`)",
                short(&word.value)
            ));
            return Word::opaque(&word.value);
        }
        match words::read(word, &self.options) {
            Ok(word) => word,
            Err(why) => {
                self.problem(why);
                Word::opaque(&word.value)
            }
        }
    }

    fn redirect(&mut self, redirect: &IoRedirect) {
        match redirect {
            IoRedirect::File(_, _, target) => match target {
                IoFileRedirectTarget::Filename(word) => self.target(word, false),
                IoFileRedirectTarget::Fd(_) => {}
                // `>& word` with a word that is not a descriptor writes stdout and stderr to the file
                // `word`, as `&> word` does.
                IoFileRedirectTarget::Duplicate(word) => self.target(word, true),
                IoFileRedirectTarget::ProcessSubstitution(..) => {
                    self.problem("it uses process substitution (`<(…)` or `>(…)`)".into());
                }
            },
            IoRedirect::HereDocument(..) => self.problem("it uses a here-document (`<<`)".into()),
            // `<<< word`: the word is data; `word` finds any expansion in it.
            IoRedirect::HereString(_, word) => {
                self.word(word);
            }
            IoRedirect::OutputAndError(word, _) => self.target(word, false),
        }
    }

    /// A redirection's target: a descriptor (where `descriptor` allows one: `>&2`, `>&-`), or a file
    /// that must stay inside the workspace.
    fn target(&mut self, word: &ast::Word, descriptor: bool) {
        let problems = self.script.problems.len();
        let target = self.word(word);
        if self.script.problems.len() > problems || (descriptor && target.is_descriptor()) {
            return;
        }
        if !target.stays_inside() {
            self.problem(format!(
                "it redirects to `{}`, which may be outside the workspace",
                short(&target.text)
            ));
        } else if target.text != "/dev/null" {
            self.redirects_to_file = true;
        }
    }
}

/// What a compound command is, for a reason.
fn compound_form(compound: &ast::CompoundCommand) -> &'static str {
    use ast::CompoundCommand as C;
    match compound {
        C::BraceGroup(_) => "a brace group (`{ …; }`)",
        C::Subshell(_) => "a subshell (`( … )`)",
        C::ForClause(_) | C::ArithmeticForClause(_) => "a `for` loop",
        C::WhileClause(_) | C::UntilClause(_) => "a `while` or `until` loop",
        C::CaseClause(_) => "a `case` statement",
        C::IfClause(_) => "an `if` statement",
        C::Arithmetic(_) => "an arithmetic command (`(( … ))`)",
        C::Coprocess(_) => "a coprocess (`coproc`)",
    }
}
