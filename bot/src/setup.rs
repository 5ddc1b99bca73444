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
use std::sync::Arc;

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

/// Where this node keeps its recall search index when the state is in PostgreSQL: beside the
/// config's `framework.memory.path` (`<path>.pg-index`). The index is derived from the database and
/// per node; a missing one is rebuilt from the table at start.
pub fn recall_index_dir(loaded: &Loaded, node: Option<&str>) -> PathBuf {
    let mut dir = database_path(loaded).into_os_string();
    dir.push(".pg-index");
    if let Some(node) = node {
        dir.push("-");
        dir.push(node);
    }
    PathBuf::from(dir)
}

/// Where the org's state lives (`framework.memory.storage`).
#[derive(Clone, Debug)]
pub enum Database {
    /// The SQLite file at `framework.memory.path` (the embedded default).
    Sqlite(PathBuf),
    /// A PostgreSQL server, several nodes sharing it.
    Postgres {
        /// The URL, from the variable `framework.memory.postgres.urlEnv` names. Never printed.
        url: String,
        /// The server as `host:port/name`, for messages.
        place: String,
        /// The variable the URL came from, for hints.
        url_env: String,
        /// `framework.memory.postgres.maxConnections`.
        max_connections: u32,
    },
}

/// Where the org's state lives, or print why it cannot be reached (see [`database_choice`]).
pub fn database(loaded: &Loaded) -> Result<Database, ExitCode> {
    database_choice(loaded).map_err(|message| {
        eprint(&format!("error: {message}\n"));
        ExitCode::FAILURE
    })
}

/// Where the org's state lives, or why it cannot be reached: with `storage: postgres`, the URL
/// comes from the environment only (a missing or unreadable one is named by its variable, never
/// shown).
pub fn database_choice(loaded: &Loaded) -> Result<Database, String> {
    let memory = &loaded.config.framework.memory;
    if memory.storage != opc_hierarchy::schema::Storage::Postgres {
        return Ok(Database::Sqlite(database_path(loaded)));
    }
    let var = memory.postgres.url_env.name();
    let url = match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => {
            return Err(format!(
                "`framework.memory.storage: postgres` takes the PostgreSQL URL from the environment variable {var}, which is not set\n\
                 hint: `export {var}=postgres://USER:PASSWORD@HOST:5432/DATABASE` (or name another variable in `framework.memory.postgres.urlEnv`)"
            ));
        }
    };
    let place = opc_pg::parse(&url)
        .map(|config| opc_pg::place(&config))
        .map_err(|e| format!("{var}: {}", e.message))?;
    Ok(Database::Postgres {
        url,
        place,
        url_env: var.to_string(),
        max_connections: memory.postgres.max_connections.get(),
    })
}

/// The engine's store as opened: the seam every command uses, and on PostgreSQL the store itself,
/// for what only it has (the cluster of several nodes, [`Opened::cluster`]).
pub struct Opened {
    /// The store behind the seam.
    pub store: Arc<dyn opc_agents::Store>,
    /// The same store (sharing its pool) when it is PostgreSQL's.
    pub postgres: Option<opc_agents::PgStore>,
}

impl Opened {
    /// The cluster seam on this database for node `node` with leases of `lease_ttl`; `None` on
    /// SQLite, where one process owns the file.
    pub fn cluster(
        &self,
        node: opc_agents::store::NodeIdentity,
        lease_ttl: std::time::Duration,
    ) -> Option<Arc<dyn opc_agents::store::Cluster>> {
        self.postgres.as_ref().map(|pg| pg.cluster(node, lease_ttl))
    }
}

/// Open the engine's store on `database`, or print why not. On PostgreSQL this gives up within
/// about 10 s when the server does not answer, naming it by host, never by password.
pub async fn open(database: &Database) -> Result<Opened, ExitCode> {
    match database {
        Database::Sqlite(path) => match opc_agents::SqliteStore::open(path) {
            Ok(store) => Ok(Opened {
                store: Arc::new(store),
                postgres: None,
            }),
            Err(e) => {
                eprint(&format!(
                    "error: {e}\nhint: `framework.memory.path` must be a writable file path\n"
                ));
                Err(ExitCode::FAILURE)
            }
        },
        Database::Postgres {
            url,
            place,
            url_env,
            max_connections,
        } => match opc_agents::PgStore::connect(url, *max_connections).await {
            Ok(store) => Ok(Opened {
                store: Arc::new(store.clone()),
                postgres: Some(store),
            }),
            Err(e) => {
                eprint(&format!(
                    "error: {e}\nhint: check that PostgreSQL is running and reachable at {place}, and that the URL in ${url_env} names a database OPC may write\n"
                ));
                Err(ExitCode::FAILURE)
            }
        },
    }
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
