//! What a subcommand, the server and reload need before their own work: the config read and checked,
//! the async runtime, the engine's database, and which provider key is missing.
//!
//! Why a leaf: the subcommands, the admin console and reload all start from these, and this uses none
//! of them (only the terminal writer), so none of them reaches another through it.
//!
//! Invariants: a problem is printed here with its hint and returned as the exit code every command
//! documents (1 invalid config or database error, 2 unreadable config); secrets are never printed (a
//! missing key is named by its variable).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use opc_hierarchy::{ConfigError, DEFAULT_CONFIG_FILE, Loaded};

use crate::term::eprint;

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
            let (error, hint) = unreadable(
                path,
                &error,
                "run `opc init` to create an example org, or pass --config PATH",
            );
            eprint(&format!("error: {error}\nhint: {hint}\n"));
            Err(ExitCode::from(2))
        }
    }
}

/// Why the config at `path` could not be read, and what to do: `(error, hint)`. A directory given as
/// the config is said to be one, with the config file inside it to pass instead (and whether there is
/// one); anything else is `error` as read, with `hint`.
pub fn unreadable(path: &Path, error: &ConfigError, hint: &str) -> (String, String) {
    if !path.is_dir() {
        return (error.to_string(), hint.to_string());
    }
    let inside = path.join(DEFAULT_CONFIG_FILE);
    let error = format!("`{}` is a directory, not a config file", path.display());
    let hint = if inside.is_file() {
        format!(
            "`{}` is the config there: pass --config {}",
            inside.display(),
            inside.display()
        )
    } else {
        format!(
            "there is no `{}` either: write an example org there with `opc init {}`, or pass \
             --config with the path of a config file",
            inside.display(),
            path.display()
        )
    };
    (error, hint)
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
pub fn database_path(loaded: &Loaded) -> PathBuf {
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

/// The first provider the org uses whose key variable is unset: `(provider, variable)`.
pub fn missing_key(loaded: &Loaded) -> Option<(String, String)> {
    let used = used_providers(loaded);
    loaded
        .config
        .framework
        .providers
        .iter()
        .filter(|(name, _)| used.contains(name))
        .find_map(|(name, provider)| {
            let var = provider.api_key_env.as_ref()?;
            let set = std::env::var(var.name()).is_ok_and(|v| !v.trim().is_empty());
            (!set).then(|| (name.clone(), var.name().to_string()))
        })
}

/// Providers that some agent's model, or the fast model, resolves to.
fn used_providers(loaded: &Loaded) -> Vec<String> {
    let framework = &loaded.config.framework;
    let mut models: Vec<&str> = loaded
        .config
        .agents
        .values()
        .map(|a| a.model.as_deref().unwrap_or(&framework.default_model))
        .collect();
    models.push(framework.fast_model());
    let mut used: Vec<String> = models
        .into_iter()
        .filter_map(|m| framework.resolve_model(m).ok().map(|(p, _)| p.to_string()))
        .collect();
    used.sort();
    used.dedup();
    used
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
