//! Builtins that make a simple command not plain, whatever the allowlist says.
//!
//! Some bash builtins run code that is not in the command's words, or read a *variable name* from
//! them, and bash evaluates a subscript in a variable name as arithmetic, which runs command
//! substitutions even from a single-quoted word: `test -v 'a[$(touch x)]'` and
//! `printf -v 'a[$(touch x)]' y` both run `touch`. So an allowlist entry for one of these names
//! would allow any code; they always go to `unlisted` (only `*` lets them through).

use super::words::Word;

/// Why the simple command `words` is not plain because of the builtin it runs, if it is one of these.
/// A name that is not literal (`$x`) never matches a prefix, so it is not looked at here.
pub(super) fn why_not_plain(words: &[Word]) -> Option<String> {
    let (name, args) = words.split_first()?;
    if !name.literal {
        return None;
    }
    let name = name.text.as_str();
    let why = match name {
        "eval" | "source" | "." => "runs its arguments as shell code",
        "exec" | "command" | "builtin" => "runs another command past the matcher",
        "trap" => "sets code to run later",
        "alias" => "defines an alias",
        "enable" => "turns builtins on or off, or loads them from a file",
        "hash" => "changes which program a command name runs",
        "bind" | "complete" | "compgen" | "fc" => "can run code given in its arguments",
        "set" | "shopt" => "changes shell options, and with them how bash reads the rest",
        "declare" | "typeset" | "local" | "export" | "readonly" | "unset" | "let" | "read"
        | "mapfile" | "readarray" | "getopts" => {
            "sets or evaluates variables by name, and a name's subscript runs as arithmetic"
        }
        // These read a variable name or a command only behind a flag. An argument that is not
        // literal (`$_`) might expand to that flag.
        "test" | "["
            if args
                .iter()
                .any(|a| !a.literal || a.text == "-v" || a.text == "-R") =>
        {
            "tests a variable by name (`-v`, `-R`), and a name's subscript runs as arithmetic"
        }
        "printf" if leading_option(args, 'v') => {
            "may assign a variable by name (`-v`), and a name's subscript runs as arithmetic"
        }
        "wait" if leading_option(args, 'p') => {
            "may assign a variable by name (`-p`), and a name's subscript runs as arithmetic"
        }
        "jobs" if leading_option(args, 'x') => "may run a command (`-x`)",
        _ => return None,
    };
    Some(format!("it uses the builtin `{name}`, which {why}"))
}

/// Whether the options before the first operand (where bash's builtins stop reading options) may
/// hold `letter` (`-p`, `-np`): one of them holds it, or one is not literal and might.
fn leading_option(args: &[Word], letter: char) -> bool {
    for arg in args {
        if !arg.literal {
            return true;
        }
        if arg.text == "--" || !arg.text.starts_with('-') || arg.text == "-" {
            return false;
        }
        if arg.text.contains(letter) {
            return true;
        }
    }
    false
}

/// Whether the simple command `words` changes the working directory, after which a relative
/// redirection target may lie outside the workspace.
pub(super) fn changes_directory(words: &[Word]) -> bool {
    words
        .first()
        .is_some_and(|name| matches!(name.text.as_str(), "cd" | "pushd" | "popd"))
}
