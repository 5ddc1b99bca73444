//! `opc memory show [AGENT]` and `opc memory history LABEL`: the core memory blocks as stored, and
//! every change to one (who, which task, when, old → new).
//!
//! Read-only: both open the database on a plain SQLite connection without starting an engine or
//! applying the config, so they are safe next to `opc run` (WAL lets readers and the writer work at
//! once). What they show is the stored truth; the config's values are only seeds (see
//! `opc_memory::blocks`).

use std::path::Path;
use std::process::ExitCode;

use opc_memory::blocks::{self, Block, HistoryEntry, SHARED, agent_namespace};

use crate::term::{eprint, print};

/// Options of `opc memory show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Only the blocks this agent sees (its own and the shared blocks it references).
    pub agent: Option<String>,
}

/// Options of `opc memory history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The block's label.
    pub label: String,
    /// Only this agent's block of that label (`shared` for a shared block).
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
}

/// Where the stored blocks are read from.
enum Source {
    /// The SQLite file, read-only.
    Sqlite(rusqlite::Connection),
    /// The org's PostgreSQL database.
    Postgres(opc_pg::Blocking),
}

impl Source {
    fn read_all(&self) -> Result<Vec<Block>, blocks::BlockError> {
        match self {
            Source::Sqlite(conn) => blocks::read_all(conn),
            Source::Postgres(conn) => blocks::read_all_postgres(conn),
        }
    }

    fn read_history(
        &self,
        label: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<blocks::HistoryEntry>, blocks::BlockError> {
        match self {
            Source::Sqlite(conn) => blocks::read_history(conn, label, namespace),
            Source::Postgres(conn) => blocks::read_history_postgres(conn, label, namespace),
        }
    }
}

/// Open the org's database read-only; `Ok(None)` when it or the memory tables do not exist yet.
fn open(path: &Path) -> Result<Option<(opc_hierarchy::Loaded, Source)>, ExitCode> {
    let loaded = crate::setup::load_config(path)?;
    let database = match crate::setup::database(&loaded)? {
        crate::setup::Database::Sqlite(database) => database,
        crate::setup::Database::Postgres { url, .. } => {
            let failed = |e: opc_pg::PgError| {
                eprint(&format!("error: {e}\n"));
                ExitCode::FAILURE
            };
            let conn = opc_pg::Blocking::connect(&url, "blocks").map_err(failed)?;
            let has_tables = conn
                .run("looking for the memory tables", |c| {
                    c.query_one("SELECT to_regclass('memory_blocks') IS NOT NULL", &[])?
                        .try_get::<_, bool>(0)
                })
                .map_err(failed)?;
            return Ok(has_tables.then_some((loaded, Source::Postgres(conn))));
        }
    };
    if !database.exists() {
        return Ok(None);
    }
    let conn = rusqlite::Connection::open_with_flags(
        &database,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .map_err(|e| {
        eprint(&format!("error: cannot open {}: {e}\n", database.display()));
        ExitCode::FAILURE
    })?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    let has_tables: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'memory_blocks'",
            [],
            |r| r.get(0),
        )
        .unwrap_or(false);
    Ok(has_tables.then_some((loaded, Source::Sqlite(conn))))
}

const EMPTY: &str = "No memory blocks yet: they are created from the config when `opc run` or `opc chat` first starts.\n";

/// `opc memory show [AGENT]`.
pub fn show(path: &Path, args: ShowArgs) -> ExitCode {
    let (loaded, conn) = match open(path) {
        Ok(Some(opened)) => opened,
        Ok(None) => {
            print(EMPTY);
            return ExitCode::SUCCESS;
        }
        Err(code) => return code,
    };
    let all = match conn.read_all() {
        Ok(all) => all,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::FAILURE;
        }
    };
    let shown: Vec<Block> = match &args.agent {
        None => all,
        Some(agent) => {
            let Some(config) = loaded.config.agents.get(agent) else {
                eprint(&format!(
                    "error: there is no agent `{agent}`; agents: {}\n",
                    loaded.org.agent_ids().collect::<Vec<_>>().join(", ")
                ));
                return ExitCode::from(1);
            };
            let own = agent_namespace(agent);
            all.into_iter()
                .filter(|b| {
                    b.namespace == own
                        || (b.namespace == SHARED && config.memory.shared_blocks.contains(&b.label))
                })
                .collect()
        }
    };
    print(&render_show(&shown));
    ExitCode::SUCCESS
}

/// `opc memory history LABEL`.
pub fn history(path: &Path, args: HistoryArgs) -> ExitCode {
    let conn = match open(path) {
        Ok(Some((_, conn))) => conn,
        Ok(None) => {
            print(EMPTY);
            return ExitCode::SUCCESS;
        }
        Err(code) => return code,
    };
    let namespace = args.agent.as_deref().map(|a| {
        if a == SHARED {
            SHARED.to_string()
        } else {
            agent_namespace(a)
        }
    });
    match conn.read_history(&args.label, namespace.as_deref()) {
        Ok(entries) if entries.is_empty() => {
            print(&format!(
                "No memory block `{}` has any history.\n",
                args.label
            ));
            ExitCode::SUCCESS
        }
        Ok(entries) => {
            print(&render_history(&entries));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            ExitCode::FAILURE
        }
    }
}

/// The blocks, one section each: namespace/label, version, size against limit, flags, then the value.
pub fn render_show(blocks: &[Block]) -> String {
    if blocks.is_empty() {
        return "No memory blocks.\n".to_string();
    }
    let mut out = String::new();
    for b in blocks {
        out.push_str(&format!(
            "{}/{}  v{}  {}/{} chars{}\n  {}\n",
            b.namespace,
            b.label,
            b.version,
            b.size(),
            b.limit,
            if b.read_only { "  read-only" } else { "" },
            b.description
        ));
        for line in b.value.lines() {
            out.push_str("  | ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// The history, oldest first: version, time, who (and task), operation, then old → new.
pub fn render_history(entries: &[HistoryEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms.max(0) as u64);
        out.push_str(&format!(
            "{}/{} v{}  {}  {} by {}{}\n",
            e.namespace,
            e.label,
            e.version,
            humantime::format_rfc3339_seconds(when),
            e.operation,
            e.author,
            e.task.map(|t| format!(" (task {t})")).unwrap_or_default()
        ));
        if let Some(old) = &e.old_value {
            for line in old.lines() {
                out.push_str(&format!("  - {line}\n"));
            }
        }
        for line in e.new_value.lines() {
            out.push_str(&format!("  + {line}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_and_history_render_sizes_versions_and_changes() {
        let block = Block {
            namespace: "agent/ceo".into(),
            label: "persona".into(),
            description: "who I am".into(),
            value: "I like tea\nand cake".into(),
            limit: 100,
            read_only: false,
            version: 3,
        };
        let text = render_show(&[block]);
        assert!(
            text.starts_with(
                "agent/ceo/persona  v3  19/100 chars\n  who I am\n  | I like tea\n  | and cake\n"
            ),
            "{text}"
        );
        let entry = HistoryEntry {
            namespace: "agent/ceo".into(),
            label: "persona".into(),
            version: 2,
            operation: "write".into(),
            author: "ceo".into(),
            task: Some(5),
            at_ms: 0,
            old_value: Some("old".into()),
            new_value: "new".into(),
        };
        assert_eq!(
            render_history(&[entry]),
            "agent/ceo/persona v2  1970-01-01T00:00:00Z  write by ceo (task 5)\n  - old\n  + new\n"
        );
    }
}
