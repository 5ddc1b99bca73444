//! `opc store copy --to postgres`: move an org kept in the SQLite file into an empty PostgreSQL
//! database, every row of every table, in one transaction. This is how a user who outgrows one
//! node moves to several.
//!
//! How: the SQLite file is brought up to date and claimed (its lock file, so no `opc run` writes
//! while it is read); PostgreSQL gets every component's tables (the same migrations `opc run`
//! applies); the target must be empty. Then each table is streamed with `COPY … FROM STDIN`, in an
//! order where a row's references are copied before it (PostgreSQL's foreign keys, sorted), its
//! identity sequences moved past the copied ids, and the row counts compared before the commit.
//!
//! Invariants:
//! - nothing is lost: a SQLite table or column with no place in PostgreSQL stops the copy before
//!   anything is written (only SQLite's own tables, FTS indexes and the version markers of older
//!   builds are left behind: PostgreSQL derives or keeps them its own way);
//! - all or nothing: one PostgreSQL transaction; a failure leaves the target as it was;
//! - a non-empty target is refused, naming a table that holds rows;
//! - the URL is never printed: the server is named as `host:port/name`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use rusqlite::types::ValueRef;

use crate::term::{eprint, print};

/// `opc store …`
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy every row of the org's SQLite file (`framework.memory.path`) into the empty PostgreSQL
    /// database that `framework.memory.postgres.urlEnv` (default DATABASE_URL) names, in one
    /// transaction. Stop `opc run` first. Afterwards set `framework.memory.storage: postgres`.
    ///
    /// Exit status: 0 copied; 1 the target is not empty, the file is in use, or a database error;
    /// 2 unreadable config, no SQLite file, or the URL variable is unset.
    Copy {
        /// Where to copy to.
        #[arg(long, value_enum)]
        to: Target,
    },
}

/// A backend to copy to.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Target {
    /// The PostgreSQL database of `framework.memory.postgres`.
    Postgres,
}

/// Tables of the SQLite file that stay behind: SQLite's own, the facts' FTS5 index (PostgreSQL's
/// full-text column is generated from the rows), the version markers of builds from before
/// `schema_versions`, and `schema_versions` (PostgreSQL's records its own story).
fn left_behind(table: &str) -> bool {
    table.starts_with("sqlite_")
        || table.starts_with("memory_facts_fts")
        || matches!(table, "schema_versions" | "memory_schema" | "web_schema")
}

pub fn run(path: &Path, command: StoreCommand) -> ExitCode {
    let StoreCommand::Copy {
        to: Target::Postgres,
    } = command;
    let loaded = match crate::setup::load_config(path) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let file = crate::setup::database_path(&loaded);
    if !file.exists() {
        eprint(&format!(
            "error: there is no SQLite file to copy at {} (`framework.memory.path`)\n",
            file.display()
        ));
        return ExitCode::from(2);
    }
    let memory = &loaded.config.framework.memory;
    let var = memory.postgres.url_env.name();
    let Some(url) = std::env::var(var).ok().filter(|u| !u.trim().is_empty()) else {
        eprint(&format!(
            "error: the PostgreSQL URL is read from the environment variable {var}, which is not set\n\
             hint: `export {var}=postgres://USER:PASSWORD@HOST:5432/DATABASE` (an empty database)\n"
        ));
        return ExitCode::from(2);
    };
    match copy(&file, &url) {
        Ok(report) => {
            print(&report);
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprint(&format!("error: {message}\n"));
            ExitCode::FAILURE
        }
    }
}

/// Stream `table`'s rows from SQLite into `writer` in `COPY`'s text format; how many.
fn stream(
    sqlite: &rusqlite::Connection,
    table: &str,
    names: &str,
    columns: &[Column],
    writer: &mut impl Write,
) -> Result<u64, String> {
    let failed = |e: rusqlite::Error| format!("cannot read table {table}: {e}");
    let mut stmt = sqlite
        .prepare(&format!("SELECT {names} FROM \"{table}\""))
        .map_err(failed)?;
    let mut rows = stmt.query([]).map_err(failed)?;
    let mut line = Vec::new();
    let mut count = 0u64;
    while let Some(row) = rows.next().map_err(failed)? {
        line.clear();
        for (i, column) in columns.iter().enumerate() {
            if i > 0 {
                line.push(b'\t');
            }
            let value = row.get_ref(i).map_err(failed)?;
            encode(&mut line, value, column)
                .map_err(|why| format!("table {table}, column {}: {why}", column.name))?;
        }
        line.push(b'\n');
        writer
            .write_all(&line)
            .map_err(|e| format!("cannot send table {table} to PostgreSQL: {e}"))?;
        count += 1;
    }
    Ok(count)
}

/// A PostgreSQL column of a copied table.
struct Column {
    name: String,
    /// `bigint`, `double precision`, `text`, `boolean`, `bytea`.
    pg_type: String,
}

/// Copy the SQLite file at `file` into the database `url` names; a summary, or why not.
fn copy(file: &Path, url: &str) -> Result<String, String> {
    // Bring every SQLite component up to date (a file from an older build copies as this one
    // reads it), then hold the file's lock: no `opc run` writes while it is read.
    drop(opc_agents::SqliteStore::open(file).map_err(|e| e.to_string())?);
    drop(crate::gateway::threads::Threads::open(file).map_err(|e| e.to_string())?);
    drop(opc_adapters::web::transcript::Transcript::open(Some(file)).map_err(|e| e.to_string())?);
    drop(crate::admin::EventStore::open_sqlite(file).map_err(|e| e.to_string())?);
    drop(crate::sessions::Sessions::open(file).map_err(|e| e.to_string())?);
    let _claim = opc_agents::store::claim_database(file).map_err(|e| e.to_string())?;
    let sqlite = rusqlite::Connection::open_with_flags(
        file,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("cannot read {}: {e}", file.display()))?;

    let pg = opc_pg::Blocking::connect(url, "copy").map_err(|e| e.to_string())?;
    let place = pg.place().to_string();
    for component in [
        &opc_agents::store::postgres::schema::COMPONENT,
        &opc_memory::schema::postgres::COMPONENT,
        &opc_adapters::web::transcript::POSTGRES_COMPONENT,
        &crate::gateway::threads::POSTGRES_COMPONENT,
        &crate::admin::EVENTS_POSTGRES_COMPONENT,
        &crate::sessions::POSTGRES_COMPONENT,
    ] {
        pg.migrate(component).map_err(|e| e.to_string())?;
    }
    let plan = plan(&sqlite, &pg)?;
    let identities = identities(&pg)?;
    // The SQLite connection moves to the copying thread: each table is read and streamed into its
    // `COPY` row by row, never held whole in memory.
    let summary = pg
        .run("copying the org", move |client| {
            let mut tx = client.transaction()?;
            // A copy of a large org may pause between tables longer than a node's sessions may sit
            // idle in a transaction (opc_pg::IDLE_IN_TRANSACTION): this one is a person's, not a
            // node's. The one row migrations seed (the facts' generation counter) is replaced by
            // the copy.
            tx.batch_execute(
                "SET LOCAL idle_in_transaction_session_timeout = 0; DELETE FROM memory_facts_meta",
            )?;
            let mut summary = Vec::with_capacity(plan.len());
            for (table, columns) in &plan {
                let names: Vec<String> =
                    columns.iter().map(|c| format!("\"{}\"", c.name)).collect();
                let names = names.join(", ");
                let mut writer = tx.copy_in(&format!("COPY \"{table}\" ({names}) FROM STDIN"))?;
                let copied = match stream(&sqlite, table, &names, columns, &mut writer) {
                    Ok(n) => n,
                    // Dropping the writer unfinished aborts the COPY; the transaction rolls back.
                    Err(why) => return Ok(Err(why)),
                };
                writer.finish()?;
                let stored: i64 = tx
                    .query_one(&format!("SELECT COUNT(*) FROM \"{table}\""), &[])?
                    .try_get(0)?;
                if u64::try_from(stored).ok() != Some(copied) {
                    return Ok(Err(format!(
                        "table {table}: {copied} rows read but {stored} stored; nothing was copied"
                    )));
                }
                summary.push((table.clone(), copied));
            }
            for (table, column) in &identities {
                tx.execute(
                    &format!(
                        "SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), \
                         GREATEST((SELECT MAX(\"{column}\") FROM \"{table}\"), 1))"
                    ),
                    &[],
                )?;
            }
            tx.commit()?;
            Ok(Ok(summary))
        })
        .map_err(|e| e.to_string())??;

    let total: u64 = summary.iter().map(|(_, n)| n).sum();
    let mut out = format!(
        "Copied {total} rows in {} tables from {} into PostgreSQL at {place}:\n",
        summary.len(),
        file.display()
    );
    for (table, n) in summary.iter().filter(|(_, n)| *n > 0) {
        out.push_str(&format!("  {table:<28} {n}\n"));
    }
    out.push_str(
        "Next: set `framework.memory.storage: postgres` in the config and start `opc run` (each node \
         rebuilds its search index from the database on its first start).\n",
    );
    Ok(out)
}

/// The tables to copy, in an order where every referenced table comes first, each with the
/// PostgreSQL columns to fill from SQLite. Refuses what would lose data, and a non-empty target.
fn plan(
    sqlite: &rusqlite::Connection,
    pg: &opc_pg::Blocking,
) -> Result<Vec<(String, Vec<Column>)>, String> {
    let sqlite_tables: BTreeSet<String> = sqlite
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<_, _>>()
        })
        .map_err(|e| format!("cannot list the SQLite tables: {e}"))?;
    let (pg_columns, references, nonempty) = pg
        .run("reading the target's tables", |client| {
            let mut columns: BTreeMap<String, Vec<Column>> = BTreeMap::new();
            for row in client.query(
                "SELECT c.table_name::text, c.column_name::text, c.data_type::text, \
                 c.is_generated = 'ALWAYS', c.column_default LIKE 'pg_current_xact_id%' \
                 FROM information_schema.columns c JOIN information_schema.tables t \
                 ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
                 WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' \
                 AND c.table_name <> 'schema_versions' ORDER BY c.table_name, c.ordinal_position",
                &[],
            )? {
                let table: String = row.try_get(0)?;
                let generated: bool = row.try_get(3)?;
                let commit_order: Option<bool> = row.try_get(4)?;
                let entry = columns.entry(table).or_default();
                // Generated columns (the facts' tsvector) and commit-order columns (filled by
                // the copying transaction) are not copied.
                if !generated && commit_order != Some(true) {
                    entry.push(Column {
                        name: row.try_get(1)?,
                        pg_type: row.try_get(2)?,
                    });
                }
            }
            let mut references: Vec<(String, String)> = Vec::new();
            for row in client.query(
                "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint \
                 WHERE contype = 'f' AND connamespace = current_schema()::regnamespace",
                &[],
            )? {
                references.push((row.try_get(0)?, row.try_get(1)?));
            }
            let mut nonempty = None;
            for table in columns.keys() {
                let any: bool = client
                    .query_one(&format!("SELECT EXISTS (SELECT 1 FROM \"{table}\")"), &[])?
                    .try_get(0)?;
                if any && table != "memory_facts_meta" {
                    nonempty = Some(table.clone());
                    break;
                }
            }
            Ok((columns, references, nonempty))
        })
        .map_err(|e| e.to_string())?;
    if let Some(table) = nonempty {
        return Err(format!(
            "the PostgreSQL database at {} is not empty (table {table} holds rows): copy into an empty database",
            pg.place()
        ));
    }
    for table in &sqlite_tables {
        if !left_behind(table) && !pg_columns.contains_key(table) {
            return Err(format!(
                "the SQLite table {table} has no place in PostgreSQL, so its rows would be lost; \
                 nothing was copied (a newer OPC may know it)"
            ));
        }
    }
    let mut plan = Vec::new();
    for (table, columns) in pg_columns {
        if !sqlite_tables.contains(&table) {
            continue;
        }
        let sqlite_columns: BTreeSet<String> = sqlite
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .and_then(|mut s| {
                s.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| format!("cannot read the columns of {table}: {e}"))?;
        let pg_names: BTreeSet<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        if let Some(lost) = sqlite_columns
            .iter()
            .find(|c| !pg_names.contains(c.as_str()))
        {
            return Err(format!(
                "the SQLite column {table}.{lost} has no place in PostgreSQL, so it would be lost; nothing was copied"
            ));
        }
        let columns: Vec<Column> = columns
            .into_iter()
            .filter(|c| sqlite_columns.contains(&c.name))
            .collect();
        plan.push((table, columns));
    }
    Ok(order(plan, &references))
}

/// `plan` sorted so every table comes after the tables it references (a self-reference, a parent
/// task, needs nothing: rows are copied in id order, parents first).
fn order(
    plan: Vec<(String, Vec<Column>)>,
    references: &[(String, String)],
) -> Vec<(String, Vec<Column>)> {
    let mut needs: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for (from, to) in references {
        if from != to {
            needs.entry(from.as_str()).or_default().insert(to.as_str());
        }
    }
    let names: Vec<String> = plan.iter().map(|(t, _)| t.clone()).collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut sorted: Vec<String> = Vec::new();
    while sorted.len() < names.len() {
        let before = sorted.len();
        for name in &names {
            if done.contains(name) {
                continue;
            }
            let ready = needs.get(name.as_str()).is_none_or(|n| {
                n.iter()
                    .all(|t| done.contains(*t) || !names.iter().any(|x| x == t))
            });
            if ready {
                done.insert(name.clone());
                sorted.push(name.clone());
            }
        }
        if sorted.len() == before {
            // A cycle of references (none in OPC's schema): the rest in name order.
            sorted.extend(names.iter().filter(|n| !done.contains(*n)).cloned());
            break;
        }
    }
    let mut by_name: HashMap<String, Vec<Column>> = plan.into_iter().collect();
    sorted
        .into_iter()
        .filter_map(|t| by_name.remove(&t).map(|c| (t, c)))
        .collect()
}

/// Identity columns of the target, whose sequences must move past the copied ids.
fn identities(pg: &opc_pg::Blocking) -> Result<Vec<(String, String)>, String> {
    pg.run("reading the identity columns", |client| {
        client
            .query(
                "SELECT table_name::text, column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND is_identity = 'YES'",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    })
    .map_err(|e| e.to_string())
}

/// Append `value` in `COPY`'s text format for `column`'s PostgreSQL type.
fn encode(out: &mut Vec<u8>, value: ValueRef<'_>, column: &Column) -> Result<(), String> {
    match (value, column.pg_type.as_str()) {
        (ValueRef::Null, _) => out.extend_from_slice(b"\\N"),
        (ValueRef::Integer(i), "boolean") => {
            out.extend_from_slice(if i != 0 { b"t" } else { b"f" })
        }
        (ValueRef::Integer(i), "bigint" | "integer" | "double precision" | "text") => {
            out.extend_from_slice(i.to_string().as_bytes())
        }
        (ValueRef::Real(f), "double precision" | "text") => {
            out.extend_from_slice(format!("{f:?}").as_bytes())
        }
        (ValueRef::Text(t), "text") => escape(out, t),
        (ValueRef::Text(t), "bigint" | "double precision") => {
            let text = String::from_utf8_lossy(t);
            text.trim()
                .parse::<f64>()
                .map_err(|_| format!("`{text}` is not a number"))?;
            escape(out, t)
        }
        (ValueRef::Blob(b) | ValueRef::Text(b), "bytea") => {
            out.extend_from_slice(b"\\\\x");
            for byte in b {
                out.extend_from_slice(format!("{byte:02x}").as_bytes());
            }
        }
        (other, pg) => {
            return Err(format!(
                "a stored {:?} value cannot go into a {pg} column",
                other.data_type()
            ));
        }
    }
    Ok(())
}

/// `COPY` text format: backslash, tab, newline and carriage return escaped.
fn escape(out: &mut Vec<u8>, text: &[u8]) {
    for &b in text {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn column(pg_type: &str) -> Column {
        Column {
            name: "c".into(),
            pg_type: pg_type.into(),
        }
    }

    fn encoded(value: ValueRef<'_>, pg_type: &str) -> Result<String, String> {
        let mut out = Vec::new();
        encode(&mut out, value, &column(pg_type))?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    #[test]
    fn values_are_written_in_copy_text_format() {
        assert_eq!(encoded(ValueRef::Null, "text").unwrap(), "\\N");
        assert_eq!(encoded(ValueRef::Integer(0), "boolean").unwrap(), "f");
        assert_eq!(encoded(ValueRef::Integer(7), "boolean").unwrap(), "t");
        assert_eq!(encoded(ValueRef::Integer(-3), "bigint").unwrap(), "-3");
        assert_eq!(
            encoded(ValueRef::Real(0.5), "double precision").unwrap(),
            "0.5"
        );
        assert_eq!(
            encoded(ValueRef::Text(b"a\tb\nc\\d\re"), "text").unwrap(),
            "a\\tb\\nc\\\\d\\re"
        );
        assert_eq!(
            encoded(ValueRef::Blob(&[0, 255]), "bytea").unwrap(),
            "\\\\x00ff"
        );
        assert!(encoded(ValueRef::Text(b"abc"), "bigint").is_err());
        assert!(encoded(ValueRef::Blob(&[1]), "bigint").is_err());
    }

    #[test]
    fn referenced_tables_come_first() {
        let plan = vec![
            ("b".to_string(), vec![]),
            ("a".to_string(), vec![]),
            ("c".to_string(), vec![]),
        ];
        let refs = vec![
            ("a".to_string(), "c".to_string()),
            ("b".to_string(), "a".to_string()),
            ("b".to_string(), "b".to_string()),
        ];
        let names: Vec<String> = order(plan, &refs).into_iter().map(|(t, _)| t).collect();
        assert_eq!(names, ["c", "a", "b"]);
    }
}
