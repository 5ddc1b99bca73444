//! Writing to the terminal, and fitting a text on one line.
//!
//! Why a module of its own: every part of `opc` prints (the subcommands, the log layer, reload's
//! report lines), so this must depend on no other part of the binary, or printing would tie the
//! parts in a circle.
//!
//! Invariants: colour is stripped when the stream is not a terminal (anstream); a closed stdout or
//! stderr is never worth crashing over, so write errors are ignored.

use std::io::Write;

/// Writes to stderr, stripping colour when stderr is not a terminal.
pub fn eprint(text: &str) {
    let mut err = anstream::stderr();
    let _ = err.write_all(text.as_bytes());
}

/// Writes to stdout, stripping colour when stdout is not a terminal.
pub fn print(text: &str) {
    let mut out = anstream::stdout();
    let _ = out.write_all(text.as_bytes());
}

/// `text` with its white space folded to single spaces, cut to `max` characters (the last one an
/// ellipsis when cut): a request's text as one line of `opc tasks` or of the console's list.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}
