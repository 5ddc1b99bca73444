//! The CLI reference (`docs/cli.md`), generated from the clap definitions, and the test that fails
//! when the file is stale.
//!
//! Role: the reference users read is exactly what `opc <command> --help` prints, so it cannot drift
//! from the code. Every visible command and subcommand gets a heading and its long help, rendered by
//! clap itself at a fixed width of 100 columns with no styling, in declaration order (the order of
//! `opc --help`); clap's own `help` subcommand and hidden commands are left out.
//!
//! Regenerate with `OPC_BLESS=1 cargo test -p opc-bot --bin opc cli_reference`. Why a test with an env
//! var rather than a hidden `opc` subcommand: the check has to run in `cargo test` anyway, so putting
//! the writer next to it means the two can never render differently, and the shipped binary carries
//! no generator code and no undocumented command (the same pattern as `insta`'s or `expect-test`'s
//! blessing). This module is compiled for tests only.

use clap::CommandFactory;

/// Width the help is wrapped to: fixed, so the file does not depend on the terminal that ran the test.
const WIDTH: usize = 100;

/// Where the reference lives, from the crate's manifest directory.
const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md");

/// The whole reference as Markdown.
pub fn render() -> String {
    let mut root = crate::Cli::command().term_width(WIDTH);
    root.build();
    let mut commands = Vec::new();
    collect(&root, &mut Vec::new(), &mut commands);

    let mut out = String::new();
    out.push_str("# `opc` command-line reference\n\n");
    out.push_str(
        "<!-- Generated from the clap definitions in bot/src by the test `cli_doc::tests::cli_reference_is_current`.\n     \
         Do not edit by hand: change the doc comments, then run\n     \
         OPC_BLESS=1 cargo test -p opc-bot --bin opc cli_reference -->\n\n",
    );
    out.push_str(
        "Every section is what `opc <command> --help` prints. `--config PATH` (or `-c`) is accepted by \
         every command, before or after the command's name; without it the config is `$OPC_CONFIG`, \
         else `./opc.config.yaml`. Relative paths inside the config resolve against its directory.\n\n",
    );
    for (path, cmd) in &commands {
        // The root's `about` is the package description; its own section says what it is.
        let about = match path.as_str() {
            "opc" => String::new(),
            _ => cmd.get_about().map(|a| a.to_string()).unwrap_or_default(),
        };
        // One sentence per line of the index: the first, without its full stop.
        let first = about.split(". ").next().unwrap_or("").trim_end_matches('.');
        out.push_str(&format!(
            "- [`{}`](#{}){}{}\n",
            path,
            anchor(path),
            if first.is_empty() { "" } else { ": " },
            first
        ));
    }
    for (path, cmd) in commands {
        let mut cmd = cmd.clone();
        let help = cmd.render_long_help().to_string();
        out.push_str(&format!("\n## `{path}`\n\n```text\n"));
        for line in help.trim_end().lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push_str("```\n");
    }
    out
}

/// Every visible command under `cmd`, depth first in declaration order, with its full name.
fn collect<'a>(
    cmd: &'a clap::Command,
    names: &mut Vec<String>,
    out: &mut Vec<(String, &'a clap::Command)>,
) {
    names.push(cmd.get_name().to_string());
    out.push((names.join(" "), cmd));
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        collect(sub, names, out);
    }
    names.pop();
}

/// GitHub's heading anchor for "`opc privacy detect`": lower case, spaces to dashes, backticks gone.
fn anchor(path: &str) -> String {
    path.to_lowercase().replace(' ', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/cli.md` is exactly what the clap definitions render today.
    #[test]
    fn cli_reference_is_current() {
        let fresh = render();
        if std::env::var_os("OPC_BLESS").is_some_and(|v| v != "0") {
            std::fs::write(PATH, &fresh).expect("write docs/cli.md");
            return;
        }
        let stored = std::fs::read_to_string(PATH).unwrap_or_default();
        if stored != fresh {
            let first = stored
                .lines()
                .zip(fresh.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| stored.lines().count().min(fresh.lines().count()));
            panic!(
                "docs/cli.md is stale: it differs from the CLI's help from line {} on \
                 (stored: {:?}, now: {:?}).\nRegenerate it with:\n    \
                 OPC_BLESS=1 cargo test -p opc-bot --bin opc cli_reference\nand commit the result.",
                first + 1,
                stored.lines().nth(first).unwrap_or("<end of file>"),
                fresh.lines().nth(first).unwrap_or("<end of file>"),
            );
        }
    }

    /// Every visible subcommand is in the reference, nested ones included, and clap's `help` is not.
    #[test]
    fn cli_reference_covers_every_command() {
        let text = render();
        for name in [
            "opc init",
            "opc validate",
            "opc run",
            "opc chat",
            "opc tasks",
            "opc privacy erase",
            "opc models fetch",
            "opc memory eval locomo",
            "opc slack manifest",
        ] {
            assert!(text.contains(&format!("\n## `{name}`\n")), "{name} missing");
        }
        assert!(!text.contains("## `opc help`"));
        assert!(!text.contains('\x1b'), "no terminal styling in the file");
    }
}
