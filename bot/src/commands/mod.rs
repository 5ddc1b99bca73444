//! One module per subcommand.

pub mod init;
pub mod run;
pub mod validate;
pub mod visualize;

use std::io::Write;

/// Writes to stderr, stripping colour when stderr is not a terminal. A closed stderr is not worth
/// crashing over, so write errors are ignored.
pub fn eprint(text: &str) {
    let mut err = anstream::stderr();
    let _ = err.write_all(text.as_bytes());
}

/// Writes to stdout, stripping colour when stdout is not a terminal.
pub fn print(text: &str) {
    let mut out = anstream::stdout();
    let _ = out.write_all(text.as_bytes());
}
