//! One module per subcommand.

pub mod chat;
pub mod init;
pub mod memory;
pub mod memory_blocks;
pub mod memory_facts;
pub mod models;
pub mod privacy;
pub mod run;
pub mod slack;
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

/// What the config turns on that this build does not run yet (the list is decided by
/// `opc_hierarchy::inactive`), as a note for stderr; empty when everything configured is active.
/// `opc validate`, `opc run` and `opc chat` print it, so no setting silently does nothing.
pub fn inactive_note(config: &opc_hierarchy::Config) -> String {
    let inactive = opc_hierarchy::inactive(config);
    if inactive.is_empty() {
        return String::new();
    }
    let mut note = String::from("note: configured, but not active in this build:\n");
    for item in inactive {
        note.push_str(&format!(
            "  - {}: {} [{}]\n",
            item.feature, item.effect, item.path
        ));
    }
    note
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
pub fn open_store(loaded: &Loaded) -> Result<opc_agents::SqliteStore, ExitCode> {
    opc_agents::SqliteStore::open(&database_path(loaded)).map_err(|e| {
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

#[cfg(test)]
mod tests {
    /// The inactive list names exactly the tools the engine does not execute, so the note never
    /// disagrees with what agents are offered.
    #[test]
    fn inactive_tools_agree_with_the_engine() {
        let mut active = opc_hierarchy::ACTIVE_TOOLS.to_vec();
        let mut executed = opc_agents::tools::EXECUTED.to_vec();
        active.sort_by_key(|t| t.as_str());
        executed.sort_by_key(|t| t.as_str());
        assert_eq!(active, executed);
    }
}
