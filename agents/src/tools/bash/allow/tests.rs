use super::*;

fn allow(prefixes: &[&str]) -> Vec<String> {
    prefixes.iter().map(|p| p.to_string()).collect()
}

/// What a command must get: allowed, or unlisted with a reason holding this text.
#[derive(Clone, Copy, Debug)]
enum Verdict {
    Allowed,
    Unlisted(&'static str),
}
use Verdict::{Allowed, Unlisted};

/// The allow list (#34 §2), under which the four walk-arounds ran.
const GS: &[&str] = &["git status", "ls"];
const DEV: &[&str] = &["cargo test", "git status", "ls", "echo", "wc", "cat"];

/// Each command, the allow list it is decided under, and its verdict.
const TABLE: &[(&str, &[&str], Verdict)] = &[
    // The walk-arounds: deferred expansion (`@P`, arithmetic, subscripts), a function
    // shadowing an allowed name, and `>&` to a file outside.
    (
        "ls ${x:='$(touch p7)'} ${x@P}",
        GS,
        Unlisted(
            "a parameter expansion with an operator (`${x:=…}`, `${x@P}`, `${#x}` …) (in `${x:='$(touch p7)'}`)",
        ),
    ),
    (
        "ls ${x:='a[$(touch p8)]'} $[x]",
        GS,
        Unlisted("a parameter expansion with an operator"),
    ),
    (
        "ls () ( touch p9 ); ls",
        GS,
        Unlisted("it defines a function (`ls ()`)"),
    ),
    (
        "ls ${i:='b[$(touch p10)]'} ${a[i]}",
        GS,
        Unlisted("a parameter expansion with an operator"),
    ),
    (
        "ls >& /outside/file",
        GS,
        Unlisted("it redirects to `/outside/file`, which may be outside the workspace"),
    ),
    // Each of their forms alone.
    ("ls ${x@P}", GS, Unlisted("with an operator")),
    ("ls $[x]", GS, Unlisted("arithmetic expansion")),
    ("ls ${a[i]}", GS, Unlisted("a subscript")),
    ("ls ${!x}", GS, Unlisted("an indirect expansion")),
    ("ls ${#x}", GS, Unlisted("with an operator")),
    (
        "function ls { touch p; }; ls",
        GS,
        Unlisted("defines a function"),
    ),
    (
        "ls {a['$(touch t)']}>f",
        GS,
        Unlisted("a descriptor variable"),
    ),
    (
        "ls é 日 {a['$(touch t)']}>f",
        GS,
        Unlisted("a descriptor variable"),
    ),
    ("ls {a} > f", GS, Allowed),
    // Prefixes match whole words.
    ("ls", GS, Allowed),
    ("ls -la src", GS, Allowed),
    ("git status --short", GS, Allowed),
    ("  git   status\t-s  ", GS, Allowed),
    (
        "git statusx",
        GS,
        Unlisted("`git…` starts with no allowed prefix"),
    ),
    ("git", GS, Unlisted("`git…` starts with no allowed prefix")),
    (
        "lsblk",
        GS,
        Unlisted("`lsblk…` starts with no allowed prefix"),
    ),
    (
        "rm -rf /",
        GS,
        Unlisted("`rm…` starts with no allowed prefix"),
    ),
    ("cargo test -p opc-agents", DEV, Allowed),
    ("cargo testing", DEV, Unlisted("no allowed prefix")),
    ("cargo build", DEV, Unlisted("no allowed prefix")),
    // Quote removal: bash runs `cargo test` here, `cargo testing` and `cargo "test x"` there.
    ("cargo \"test\" -p x", DEV, Allowed),
    ("'cargo' test", DEV, Allowed),
    ("c\\argo te\"\"st", DEV, Allowed),
    ("cargo 'test'ing", DEV, Unlisted("no allowed prefix")),
    ("cargo \"test x\"", DEV, Unlisted("no allowed prefix")),
    // Separators inside quotes separate nothing.
    ("echo 'a; rm -rf x'", DEV, Allowed),
    ("echo \"a && rm x | sh\"", DEV, Allowed),
    ("echo a\\;rm", DEV, Allowed),
    ("echo '$(rm -rf x)' '`x`' \"\\$(rm x)\"", DEV, Allowed),
    // Lists, pipelines and newlines: every part must match.
    ("ls; git status", GS, Allowed),
    ("ls && git status || ls", GS, Allowed),
    ("ls&&wc", DEV, Allowed),
    ("ls | wc -l", DEV, Allowed),
    ("ls |& wc", DEV, Allowed),
    ("ls\ngit status\n", GS, Allowed),
    ("ls \\\n  -la", GS, Allowed),
    ("ls & wc", DEV, Allowed),
    ("time ls", GS, Allowed),
    ("! ls", GS, Allowed),
    (
        "ls; rm -rf x",
        GS,
        Unlisted("`rm…` starts with no allowed prefix"),
    ),
    ("ls && curl x", GS, Unlisted("`curl…`")),
    ("ls || rm x", GS, Unlisted("`rm…`")),
    ("ls | sh", DEV, Unlisted("`sh…`")),
    ("ls |& sh", DEV, Unlisted("`sh…`")),
    ("ls\nrm x", GS, Unlisted("`rm…`")),
    ("ls & rm x", DEV, Unlisted("`rm…`")),
    ("ls;;wc", DEV, Unlisted("does not parse")),
    // Redirections: descriptors, /dev/null and workspace paths only.
    ("echo hi > out.txt", DEV, Allowed),
    ("echo hi >> logs/out.txt", DEV, Allowed),
    ("ls > 'my file.txt'", DEV, Allowed),
    ("ls 2>&1", DEV, Allowed),
    ("ls 2>/dev/null", DEV, Allowed),
    ("ls >/dev/null 2>&1", DEV, Allowed),
    ("ls >& /dev/null", DEV, Allowed),
    ("ls &> all.log", DEV, Allowed),
    ("ls >& all.log", DEV, Allowed),
    ("ls >&2; ls >&-; ls 2>&1-", DEV, Allowed),
    ("cargo test 2>&1 | wc", DEV, Allowed),
    ("cat < in.txt; echo x >| f; ls <> f", DEV, Allowed),
    ("cat <<< word", DEV, Allowed),
    ("ls 2>x", &["ls"], Allowed),
    (
        "echo hi > /etc/passwd",
        DEV,
        Unlisted("`/etc/passwd`, which may be outside"),
    ),
    ("echo hi >/tmp/x", DEV, Unlisted("`/tmp/x`")),
    ("echo hi > ../x", DEV, Unlisted("`../x`")),
    ("echo hi > a/../../x", DEV, Unlisted("`a/../../x`")),
    ("echo hi > ~/x", DEV, Unlisted("`~/x`")),
    ("echo hi > \"$HOME\"/x", DEV, Unlisted("`${HOME}/x`")),
    ("echo hi > *", DEV, Unlisted("`*`, which may be outside")),
    ("ls &> /tmp/all", DEV, Unlisted("`/tmp/all`")),
    ("ls 2> /tmp/err", DEV, Unlisted("`/tmp/err`")),
    ("ls 3</etc/shadow", DEV, Unlisted("`/etc/shadow`")),
    ("cat < /etc/shadow", DEV, Unlisted("`/etc/shadow`")),
    ("echo hi >", DEV, Unlisted("does not parse")),
    (
        "> out.txt",
        DEV,
        Unlisted("a redirection without a command"),
    ),
    (
        "cd sub && ls > out",
        &["cd", "ls"],
        Unlisted("changes directory (`cd`) and redirects to a file"),
    ),
    ("cd sub && cargo test 2>&1", &["cd", "cargo test"], Allowed),
    // Substitutions and here-documents.
    ("echo $(rm -rf x)", DEV, Unlisted("command substitution")),
    (
        "echo \"$(rm -rf x)\"",
        DEV,
        Unlisted("command substitution"),
    ),
    ("echo `rm -rf x`", DEV, Unlisted("command substitution")),
    ("echo $((1+1))", DEV, Unlisted("arithmetic expansion")),
    ("cat <(rm x)", DEV, Unlisted("process substitution")),
    ("ls > >(sh)", DEV, Unlisted("process substitution")),
    ("cat <<EOF\nrm x\nEOF", DEV, Unlisted("here-document")),
    ("ls $'\\x41'", GS, Unlisted("ANSI-C quoting")),
    ("ls $\"msg\"", GS, Unlisted("a translated string")),
    // Bare parameter references are plain as arguments, but never the program.
    ("echo $HOME \"$USER\" $1 \"$@\"", DEV, Allowed),
    (
        "$HOME/bin/ls",
        GS,
        Unlisted("`${HOME}/bin/ls…` starts with no allowed prefix"),
    ),
    ("~/bin/ls", GS, Unlisted("starts with no allowed prefix")),
    (
        "sleep 300 & echo $! > sleep.pid; echo $$ > bash.pid; wait",
        &["sleep", "echo", "wait"],
        Allowed,
    ),
    // Globs, braces, tildes and `a=b` after the program are words.
    ("ls *.rs src/**/x? [ab]*", GS, Allowed),
    ("ls {a,b} ~ ~/x", GS, Allowed),
    ("make CC=gcc -j2", &["make"], Allowed),
    // Assignments, compound commands.
    ("x=1 ls", GS, Unlisted("it assigns a variable (`x=1`)")),
    ("x=1", GS, Unlisted("assigns a variable")),
    ("PATH=. ls", GS, Unlisted("assigns a variable")),
    ("(ls)", GS, Unlisted("a subshell")),
    ("{ ls; }", GS, Unlisted("a brace group")),
    ("ls; (rm x)", GS, Unlisted("a subshell")),
    ("if ls; then ls; fi", GS, Unlisted("an `if` statement")),
    ("for f in a b; do ls $f; done", GS, Unlisted("a `for` loop")),
    (
        "while ls; do ls; done",
        GS,
        Unlisted("a `while` or `until` loop"),
    ),
    ("case x in x) ls;; esac", GS, Unlisted("a `case` statement")),
    ("[[ -v x ]]", &["[["], Unlisted("`[[ … ]]` test")),
    ("((x))", GS, Unlisted("an arithmetic command")),
    ("coproc ls", GS, Unlisted("a coprocess")),
    // Eval-like builtins are never plain, even when listed.
    ("eval ls", &["eval", "ls"], Unlisted("the builtin `eval`")),
    ("source x.sh", &["source"], Unlisted("the builtin `source`")),
    (". x.sh", &["."], Unlisted("the builtin `.`")),
    ("exec ls", &["exec", "ls"], Unlisted("the builtin `exec`")),
    (
        "command ls",
        &["command", "ls"],
        Unlisted("the builtin `command`"),
    ),
    (
        "builtin echo x",
        &["builtin"],
        Unlisted("the builtin `builtin`"),
    ),
    ("'ev'al ls", &["eval", "ls"], Unlisted("the builtin `eval`")),
    (
        "declare -n r=x",
        &["declare"],
        Unlisted("the builtin `declare`"),
    ),
    ("export A=1", &["export"], Unlisted("the builtin `export`")),
    ("read x", &["read"], Unlisted("the builtin `read`")),
    (
        "mapfile x < f",
        &["mapfile"],
        Unlisted("the builtin `mapfile`"),
    ),
    ("let x=1", &["let"], Unlisted("the builtin `let`")),
    (
        "trap 'rm x' EXIT",
        &["trap"],
        Unlisted("the builtin `trap`"),
    ),
    (
        "alias ls='rm -rf x'",
        &["alias"],
        Unlisted("the builtin `alias`"),
    ),
    (
        "enable -f ./x.so x",
        &["enable"],
        Unlisted("the builtin `enable`"),
    ),
    (
        "hash -p ./evil ls; ls",
        &["hash", "ls"],
        Unlisted("the builtin `hash`"),
    ),
    ("set -e; ls", &["set", "ls"], Unlisted("the builtin `set`")),
    (
        "printf -v 'a[$(touch x)]' y",
        &["printf"],
        Unlisted("the builtin `printf`"),
    ),
    ("printf '%s\\n' -v", &["printf"], Allowed),
    (
        "test -v 'a[$(touch x)]'",
        &["test"],
        Unlisted("the builtin `test`"),
    ),
    (
        "ls -v; test $_ 'a[$(touch x)]'",
        &["ls", "test"],
        Unlisted("the builtin `test`"),
    ),
    ("[ -f Cargo.toml ]", &["["], Allowed),
    (
        "wait -n -p 'a[$(touch x)]'",
        &["wait"],
        Unlisted("the builtin `wait`"),
    ),
    ("jobs -x rm x", &["jobs"], Unlisted("the builtin `jobs`")),
    // Comments, blanks, unicode, unterminated quotes.
    ("ls # ; rm -rf x", GS, Allowed),
    ("ls a#b", GS, Allowed),
    ("# only a comment", GS, Unlisted("it runs no command")),
    ("", GS, Unlisted("it runs no command")),
    ("  \n\t ", GS, Unlisted("it runs no command")),
    ("ls é 日本語 'ünï'", GS, Allowed),
    ("echo 'unterminated", DEV, Unlisted("does not parse")),
    ("echo \"unterminated", DEV, Unlisted("does not parse")),
    // `*` allows everything; no prefix allows nothing.
    ("rm -rf / ; curl x | sh", &["*"], Allowed),
    ("echo $(id)", &["ls", " * "], Allowed),
    ("ls", &[], Unlisted("no command prefix is allowed")),
    ("ls", &["", "  "], Unlisted("no command prefix is allowed")),
    // A prefix that is not one plain command of literal words allows nothing.
    (
        "ls",
        &["ls > x", "ls; rm", "$X", "eval"],
        Unlisted("no command prefix is allowed"),
    ),
    // A descriptor number is not an argument; a word that ends in digits is.
    ("ls x2>y", &["ls x2"], Allowed),
    ("ls x2>y", &["ls x"], Unlisted("no allowed prefix")),
];

#[test]
fn the_table() {
    assert!(TABLE.len() >= 60, "{} rows", TABLE.len());
    let mut wrong = Vec::new();
    for &(command, prefixes, verdict) in TABLE {
        let decided = decide(command, &allow(prefixes));
        let right = match (verdict, &decided) {
            (Allowed, Decision::Allowed) => true,
            (Unlisted(part), Decision::Unlisted(why)) => why.contains(part),
            _ => false,
        };
        if !right {
            wrong.push(format!(
                "{command:?} under {prefixes:?}: expected {verdict:?}, got {decided:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn a_deep_or_long_command_is_unlisted_without_crashing() {
    let p = allow(GS);
    // Nested past the limit: not parsed at all.
    let deep = format!("{}ls; {}", "{ ".repeat(5_000), "}; ".repeat(5_000));
    assert!(matches!(decide(&deep, &p), Decision::Unlisted(why) if why.contains("brackets")));
    let deep = format!("ls {}x{}", "$(".repeat(5_000), ")".repeat(5_000));
    assert!(matches!(decide(&deep, &p), Decision::Unlisted(why) if why.contains("brackets")));
    // Nested just under it: parsed on the parser's own stack, and found out.
    let nested = super::script::MAX_NESTING - 1;
    let deep = format!("{}ls; {}", "{ ".repeat(nested), "}; ".repeat(nested));
    assert_eq!(
        decide(&deep, &p),
        Decision::Unlisted("it uses a brace group (`{ …; }`)".into())
    );
    // (`if` and `then` both count.)
    let ifs = super::script::MAX_NESTING / 2;
    let deep = format!("{}true{}", "if ".repeat(ifs), "; then :; fi".repeat(ifs));
    assert!(matches!(decide(&deep, &p), Decision::Unlisted(why) if why.contains("`if`")));
    // Long but flat: parsed; longer than the limit: not.
    let long = format!("ls{}", " a".repeat(10_000));
    assert_eq!(decide(&long, &p), Decision::Allowed);
    let long = format!("ls{}", " a".repeat(super::script::MAX_CHARS));
    assert!(matches!(decide(&long, &p), Decision::Unlisted(why) if why.contains("longer")));
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
    assert_eq!(safe_summary("$(cat alice.txt)", &p), "(computed)");
    assert_eq!(safe_summary("~alice/bin/x --to bob", &p), "(computed) …");
    // What is not plain is still summarised, by its commands.
    assert_eq!(
        safe_summary("ls () ( touch alice.txt ); ls", &p),
        "touch … ; ls"
    );
    assert_eq!(
        safe_summary("if cargo test; then git push alice; fi", &p),
        "cargo test ; git …"
    );
    // Not parsed: the first word, when it is a plain name; else nothing of it.
    assert_eq!(safe_summary("echo 'alice", &p), "echo …");
    assert_eq!(
        safe_summary("'alice", &p),
        "(a command the matcher cannot parse)"
    );
    assert_eq!(safe_summary("", &p), "(empty)");
}

/// Quote removal agrees with bash: the words the matcher compares are the arguments bash passes.
#[test]
fn quote_removal_agrees_with_bash() {
    let words = [
        "plain",
        "'a b'",
        "\"a\\\"b\"",
        "a\\ b",
        "\"a\\b\"",
        "\"\\$x\"",
        "'\\'",
        "\"\\\\\"",
        "a\\\\b",
        "\"\"",
        "''",
        "é\"日\"'本'",
        "c\\argo",
        "\"a\\`b\"",
        "a\\\nb",
        "\"a\\\nb\"",
        "x#y",
        "--opt=val",
        "a=b",
        "'a;b|c&d'",
        "\"(x)\"",
        "a'\n'b",
    ];
    let command = format!("printf '%s\\0' {}", words.join(" "));
    let dir = std::env::temp_dir();
    let output = match std::process::Command::new("bash")
        .arg("-c")
        .arg(&command)
        .current_dir(&dir)
        .env_clear()
        .output()
    {
        Ok(output) => output,
        Err(e) => {
            eprintln!("no bash here ({e}): quote removal not compared");
            return;
        }
    };
    assert!(output.status.success(), "{output:?}");
    let from_bash: Vec<String> = String::from_utf8(output.stdout)
        .expect("bash printed UTF-8")
        .split_terminator('\0')
        .map(str::to_string)
        .collect();
    let read = super::script::read(&command, &[])
        .script
        .expect("the matcher reads it");
    assert!(read.problems.is_empty(), "{:?}", read.problems);
    let [part] = read.parts.as_slice() else {
        panic!("{:?}", read.parts)
    };
    assert!(part.words.iter().all(|w| w.literal), "{:?}", part.words);
    let ours: Vec<&str> = part.words[2..].iter().map(|w| w.text.as_str()).collect();
    assert_eq!(ours, from_bash);
}
