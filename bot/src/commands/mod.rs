//! One module per subcommand.

pub mod chat;
pub mod init;
pub mod run;
pub mod tasks;
pub mod validate;
pub mod visualize;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use opc_hierarchy::{ConfigError, Loaded};

/// Load and validate the config for a command that needs a working org. Problems are printed (errors
/// with snippets and hints; warnings too) and turned into the exit code: 1 invalid, 2 unreadable.
pub fn load_config(path: &Path) -> Result<Loaded, ExitCode> {
    match opc_hierarchy::load(path) {
        Ok(loaded) => {
            if loaded.report.warnings().next().is_some() {
                eprint(&loaded.report.render(true));
            }
            Ok(loaded)
        }
        Err(ConfigError::Invalid(report)) => {
            eprint(&report.render(true));
            eprint(&format!("{}: invalid — not starting\n", path.display()));
            Err(ExitCode::from(1))
        }
        Err(error) => {
            eprint(&format!(
                "error: {error}\nhint: run `opc init` to create an example org, or pass --config PATH\n"
            ));
            Err(ExitCode::from(2))
        }
    }
}

/// A multi-threaded tokio runtime, or the printed error.
pub fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprint(&format!("error: cannot start the async runtime: {e}\n"));
            ExitCode::FAILURE
        })
}

/// The engine's database file: `framework.memory.path`, relative to the config's directory.
pub fn database_path(loaded: &Loaded) -> std::path::PathBuf {
    loaded.base_dir.join(&loaded.config.framework.memory.path)
}

/// Open the engine's database, or print why not.
pub fn open_store(loaded: &Loaded) -> Result<opc_agents::Store, ExitCode> {
    opc_agents::Store::open(&database_path(loaded)).map_err(|e| {
        eprint(&format!(
            "error: {e}\nhint: `framework.memory.path` must be a writable file path\n"
        ));
        ExitCode::FAILURE
    })
}

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
