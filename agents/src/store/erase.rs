//! Erasure: every stored copy of a value, in every table of the engine's database file, rewritten as
//! `[erased]` (`opc privacy erase VALUE`).
//!
//! Why generic: the file holds the engine's tables (tasks and their session histories, the ledger,
//! approvals, notices), memory's (blocks and their history, recall rows), the gateway's (threads,
//! cards) and the web chat's (transcript, progress events), each created by its own crate. Listing
//! columns by hand would miss the next table someone adds, so the tables and columns are read from
//! the schema itself (`PRAGMA table_list`, `table_xinfo`), and every text value of every column is
//! matched (a column's declared type does not stop SQLite from storing text in it). The one special
//! table is recall's, which is append-only: memory's [`opc_memory::recall::erase`] lifts and restores
//! its guard and records the erasure, inside the same transaction.
//!
//! Invariants:
//! - one `BEGIN IMMEDIATE` transaction for the whole file: every table is rewritten, or none is (a
//!   value that sits in a JSON document's structure aborts it, see `opc_privacy::erase`);
//! - `secure_delete` is on for the rewrite, and [`scrub`] then checkpoints the WAL into the file,
//!   rebuilds the file (`VACUUM`: no free page or free space in a page keeps old bytes, including from
//!   rows deleted long before, e.g. trimmed progress events) and truncates the WAL to nothing;
//! - a dry run ([`scan`]) opens the file read-only and changes nothing;
//! - the caller holds the database lock ([`super::claim_database`]) around a rewrite, so no engine
//!   writes between the rewrite and the scrub.

use std::path::Path;
use std::time::Duration;

use opc_memory::recall::erase::{self as recall_erase, Record};
use opc_privacy::erase::Matcher;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::StoreError;

/// Recall's append-only table (the rows whose search index entries must be rebuilt).
const RECALL_TABLE: &str = "recall_messages";
/// Facts' versions: the text of two contentless FTS5 indexes and of derived vectors, which keep the
/// old words (tokens, embeddings) until rebuilt from the rewritten rows.
const FACT_VERSIONS: &str = "memory_fact_versions";
/// The facts' word indexes (every version; current versions only): contentless, so a scan reads
/// nothing from them; they are rebuilt from [`FACT_VERSIONS`] when a version is rewritten.
const FACTS_FTS: [&str; 2] = ["memory_facts_fts", "memory_facts_fts_current"];
/// The rebuild of [`FACTS_FTS`] from the versions: the same rows `opc_memory::facts` writes (the
/// namespace as its `ns…0` hex token, the text, the subject; the current index only current versions).
const FACTS_REINDEX: &str = "
INSERT INTO memory_facts_fts (memory_facts_fts) VALUES ('delete-all');
INSERT INTO memory_facts_fts (rowid, ns, text, subject)
    SELECT id, 'ns' || lower(hex(namespace)) || '0', text, subject FROM memory_fact_versions;
INSERT INTO memory_facts_fts_current (memory_facts_fts_current) VALUES ('delete-all');
INSERT INTO memory_facts_fts_current (rowid, ns, text, subject)
    SELECT id, 'ns' || lower(hex(namespace)) || '0', text, subject FROM memory_fact_versions
    WHERE invalidated_at IS NULL;";

/// Words OPC itself stores as structure (task states, message roles, content block types, authors):
/// erasing one would change what the stored rows mean rather than remove personal data.
const STRUCTURAL_WORDS: &[&str] = &[
    "user",
    "assistant",
    "system",
    "tool",
    "text",
    "tool_use",
    "tool_result",
    "content",
    "bot",
    "notice",
    "pending",
    "approved",
    "rejected",
    "expired",
    "decided",
];

/// Why an erasure did not happen. Nothing was changed in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum EraseError {
    /// SQLite failed.
    #[error("erasing in {path} while {doing}: {source}")]
    Sql {
        /// The database.
        path: String,
        /// What was being done.
        doing: String,
        /// Why.
        source: rusqlite::Error,
    },
    /// PostgreSQL failed (`framework.memory.storage: postgres`; the database named as
    /// `host:port/name`, never by its URL). Nothing was changed unless the rewrite's commit said so.
    #[error("erasing in PostgreSQL at {place} while {doing}: {source}")]
    Postgres {
        /// The database, as `host:port/name`.
        place: String,
        /// What was being done.
        doing: String,
        /// Why.
        source: super::DbFailure,
        /// Whether it was a conflict with a concurrent writer (a serialization failure, a deadlock)
        /// that a new attempt may get past.
        retry: bool,
    },
    /// The schema could not be brought up to date first.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The value is part of stored structure.
    #[error("refused: {reason} (found in {table}.{column}); nothing was changed")]
    Structure {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// Why it is refused.
        reason: String,
    },
    /// A word OPC uses as structure.
    #[error(
        "refused: {0:?} is a word OPC stores as structure (a task state, a message role or type); erasing it \
         would change what stored rows mean. Pass the whole personal value (e.g. a full name or address)"
    )]
    StructuralWord(String),
    /// A checkpoint could not finish because another connection is reading.
    #[error(
        "the rewrite is committed, but the write-ahead log {path}-wal could not be emptied: another process is \
         reading the database (`opc tasks`, `opc memory`, the console?). Stop it and run the same erase again: \
         it finds nothing more to rewrite and empties the log"
    )]
    Busy {
        /// The database.
        path: String,
    },
}

/// One table's part of an erasure.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableCount {
    /// The table.
    pub table: String,
    /// Rows that held the value.
    pub rows: usize,
    /// Occurrences replaced (a row may hold several).
    pub occurrences: usize,
}

/// What an erasure found (a dry run) or rewrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Erasure {
    /// Every table scanned, in name order, with its counts (zero included, so the report shows what
    /// was looked at).
    pub tables: Vec<TableCount>,
    /// Recall rows rewritten (their sequence numbers): their index entries and vectors are rebuilt.
    pub recall_seqs: Vec<i64>,
    /// The erasure's record in `recall_erasures` (a rewrite only).
    pub record: Option<i64>,
    /// PostgreSQL: the tasks that held the value and had not ended, with the node running them
    /// (`tasks.node`): that node holds their session in memory and may save the value again.
    /// Always empty on SQLite, where the erasure refuses to run beside `opc run`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<(i64, Option<String>)>,
}

impl Erasure {
    /// Rows that held the value, over all tables.
    pub fn rows(&self) -> usize {
        self.tables.iter().map(|t| t.rows).sum()
    }
}

/// Refuse a value that is a word of OPC's stored structure (see [`STRUCTURAL_WORDS`] and the task
/// states).
pub fn check_value(value: &str) -> Result<(), EraseError> {
    let v = value.trim().to_lowercase();
    let state = super::TaskState::ALL
        .iter()
        .any(|s| s.as_str().eq_ignore_ascii_case(&v));
    if state || STRUCTURAL_WORDS.contains(&v.as_str()) {
        return Err(EraseError::StructuralWord(value.trim().to_string()));
    }
    Ok(())
}

/// A table to scan: its name, how a row is addressed, and its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The table's name.
    pub name: String,
    /// The columns addressing a row: `rowid`, or the primary key of a `WITHOUT ROWID` table.
    pub key: Vec<String>,
    /// Every ordinary column (generated and hidden ones cannot be written).
    pub columns: Vec<String>,
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Every table an erasure scans: all of `main` but SQLite's own (`sqlite_*`) and virtual tables'
/// shadow tables (a virtual table is scanned itself, which keeps its shadows in step).
pub fn tables(conn: &Connection) -> rusqlite::Result<Vec<Table>> {
    let mut list = conn.prepare(
        "SELECT name, type, wr FROM pragma_table_list WHERE schema = 'main'
         AND type IN ('table', 'virtual') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    )?;
    let found: Vec<(String, bool)> = list
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(2)? != 0)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::new();
    for (name, without_rowid) in found {
        let mut info = conn.prepare("SELECT name, pk, hidden FROM pragma_table_xinfo(?1)")?;
        let cols: Vec<(String, i64, i64)> = info
            .query_map([&name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let key = if without_rowid {
            let mut pk: Vec<&(String, i64, i64)> = cols.iter().filter(|c| c.1 > 0).collect();
            pk.sort_by_key(|c| c.1);
            pk.into_iter().map(|c| c.0.clone()).collect()
        } else {
            vec!["rowid".to_string()]
        };
        let columns = cols.into_iter().filter(|c| c.2 == 0).map(|c| c.0).collect();
        out.push(Table { name, key, columns });
    }
    Ok(out)
}

/// One row to rewrite: its key values and its new texts by column index.
struct Change {
    key: Vec<Value>,
    texts: Vec<(usize, String)>,
}

/// Why a table's scan stopped.
enum ScanError {
    Sql(rusqlite::Error),
    /// The value is in the structure of a JSON document in `column`.
    Structure {
        column: String,
        reason: String,
    },
}

/// Scan `table` for the value; the rows to rewrite and the table's counts.
fn scan_table(
    conn: &Connection,
    table: &Table,
    matcher: &Matcher,
) -> Result<(Vec<Change>, TableCount), ScanError> {
    let select = format!(
        "SELECT {}, {} FROM {}",
        table
            .key
            .iter()
            .map(|k| if k == "rowid" { k.clone() } else { quote(k) })
            .collect::<Vec<_>>()
            .join(", "),
        table
            .columns
            .iter()
            .map(|c| quote(c))
            .collect::<Vec<_>>()
            .join(", "),
        quote(&table.name)
    );
    let sql_err = ScanError::Sql;
    let mut stmt = conn.prepare(&select).map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let mut changes = Vec::new();
    let mut count = TableCount {
        table: table.name.clone(),
        rows: 0,
        occurrences: 0,
    };
    let keys = table.key.len();
    while let Some(row) = rows.next().map_err(sql_err)? {
        let mut texts = Vec::new();
        for (i, column) in table.columns.iter().enumerate() {
            let ValueRef::Text(bytes) = row.get_ref(keys + i).map_err(sql_err)? else {
                continue;
            };
            let text = String::from_utf8_lossy(bytes);
            match matcher.erase(&text) {
                Ok(Some((new, n))) => {
                    count.occurrences += n;
                    texts.push((i, new));
                }
                Ok(None) => {}
                Err(unsafe_) => {
                    return Err(ScanError::Structure {
                        column: column.clone(),
                        reason: unsafe_.to_string(),
                    });
                }
            }
        }
        if !texts.is_empty() {
            count.rows += 1;
            let key = (0..keys)
                .map(|k| row.get::<_, Value>(k))
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sql_err)?;
            changes.push(Change { key, texts });
        }
    }
    Ok((changes, count))
}

/// Scan every table of `conn`; with `write`, rewrite as it goes (the caller's transaction).
fn run(
    conn: &Connection,
    path: &Path,
    matcher: &Matcher,
    write: bool,
) -> Result<Erasure, EraseError> {
    let sql = |doing: String| {
        let path = path.display().to_string();
        move |source| EraseError::Sql {
            path,
            doing,
            source,
        }
    };
    let mut out = Erasure::default();
    let mut facts_rewritten: Vec<i64> = Vec::new();
    for table in tables(conn).map_err(sql("listing the tables".into()))? {
        if FACTS_FTS.contains(&table.name.as_str()) {
            continue;
        }
        let (changes, count) = match scan_table(conn, &table, matcher) {
            Ok(found) => found,
            Err(ScanError::Structure { column, reason }) => {
                return Err(EraseError::Structure {
                    table: table.name.clone(),
                    column,
                    reason,
                });
            }
            Err(ScanError::Sql(source)) => {
                return Err(sql(format!("reading {}", table.name))(source));
            }
        };
        if table.name == RECALL_TABLE && table.key == ["rowid"] {
            out.recall_seqs
                .extend(changes.iter().filter_map(|c| match c.key.first() {
                    Some(Value::Integer(seq)) => Some(*seq),
                    _ => None,
                }));
        }
        if table.name == FACT_VERSIONS && table.key == ["rowid"] {
            facts_rewritten.extend(changes.iter().filter_map(|c| match c.key.first() {
                Some(Value::Integer(id)) => Some(*id),
                _ => None,
            }));
        }
        if write {
            for change in &changes {
                let set = change
                    .texts
                    .iter()
                    .enumerate()
                    .map(|(n, (i, _))| format!("{} = ?{}", quote(&table.columns[*i]), n + 1))
                    .collect::<Vec<_>>()
                    .join(", ");
                let offset = change.texts.len();
                let filter = table
                    .key
                    .iter()
                    .enumerate()
                    .map(|(n, k)| {
                        let k = if k == "rowid" { k.clone() } else { quote(k) };
                        format!("{k} IS ?{}", offset + n + 1)
                    })
                    .collect::<Vec<_>>()
                    .join(" AND ");
                let mut params: Vec<Value> = change
                    .texts
                    .iter()
                    .map(|(_, t)| Value::Text(t.clone()))
                    .collect();
                params.extend(change.key.iter().cloned());
                conn.execute(
                    &format!("UPDATE {} SET {set} WHERE {filter}", quote(&table.name)),
                    rusqlite::params_from_iter(params),
                )
                .map_err(sql(format!("rewriting {}", table.name)))?;
            }
        }
        out.tables.push(count);
    }
    if write && !facts_rewritten.is_empty() {
        // The facts' word indexes hold the versions' words: rebuilt from the rewritten rows, they
        // no longer hold the value's tokens. The vectors of the rewritten versions are dropped (the
        // facts store embeds current versions without one again).
        conn.execute_batch(FACTS_REINDEX)
            .map_err(sql("rebuilding the facts' word indexes".into()))?;
        for id in &facts_rewritten {
            conn.execute(
                "DELETE FROM memory_fact_vectors WHERE version_id = ?1",
                [id],
            )
            .map_err(sql("dropping rewritten facts' vectors".into()))?;
        }
    }
    out.recall_seqs.sort_unstable();
    Ok(out)
}

fn open(path: &Path, flags: OpenFlags) -> Result<Connection, EraseError> {
    let failed = |source| EraseError::Sql {
        path: path.display().to_string(),
        doing: "opening the database".into(),
        source,
    };
    let conn = Connection::open_with_flags(path, flags).map_err(failed)?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(failed)?;
    Ok(conn)
}

/// A dry run: what [`rewrite`] would change in the database at `path`, changing nothing (the file is
/// opened read-only, in one read transaction so the counts are of one moment).
pub fn scan(path: &Path, matcher: &Matcher) -> Result<Erasure, EraseError> {
    let mut conn = open(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Deferred)
        .map_err(|source| EraseError::Sql {
            path: path.display().to_string(),
            doing: "starting a read".into(),
            source,
        })?;
    run(&tx, path, matcher, false)
}

/// Rewrite every stored copy of the value in the database at `path`, in one transaction, and record
/// the erasure (`recall_erasures`). The caller holds the database lock, finishes recall's indexes
/// (`RecallStore::finish_erasures`) and then calls [`scrub`].
pub fn rewrite(path: &Path, matcher: &Matcher) -> Result<Erasure, EraseError> {
    let display = path.display().to_string();
    let sql = |doing: &str| {
        let path = display.clone();
        let doing = doing.to_string();
        move |source| EraseError::Sql {
            path,
            doing,
            source,
        }
    };
    let mut conn = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sql("setting WAL mode"))?;
    // Freed space (a shorter text, an overflow page let go) is overwritten with zeros.
    conn.pragma_update(None, "secure_delete", "ON")
        .map_err(sql("turning secure_delete on"))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(sql("turning foreign keys on"))?;
    // The tables an older build left behind are brought up to date first (the record's table).
    super::schema::migrate(&mut conn, &display)?;
    opc_memory::schema::migrate(&mut conn).map_err(|e| StoreError::Memory {
        path: display.clone(),
        source: super::memory_failure(&e),
    })?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the rewrite"))?;
    // A key rewritten in a parent and its children alike is checked at the commit, not per row.
    tx.pragma_update(None, "defer_foreign_keys", "ON")
        .map_err(sql("deferring foreign keys"))?;
    let guard =
        recall_erase::allow_rewrite(&tx).map_err(sql("lifting recall's append-only guard"))?;
    let mut out = run(&tx, path, matcher, true)?;
    let record = Record {
        value_chars: matcher.chars(),
        counts: serde_json::to_value(&out.tables).unwrap_or_default(),
    };
    out.record = Some(
        recall_erase::finish_rewrite(&tx, guard, &out.recall_seqs, &record)
            .map_err(sql("recording the erasure"))?,
    );
    tx.commit().map_err(sql("committing the rewrite"))?;
    Ok(out)
}

/// Leave no old bytes in the database's files: checkpoint the WAL into the file, rebuild the file
/// (`VACUUM`), and truncate the WAL to nothing. Fails with [`EraseError::Busy`] when another
/// connection keeps the log in use.
pub fn scrub(path: &Path) -> Result<(), EraseError> {
    let display = path.display().to_string();
    let sql = |doing: &'static str| {
        let path = display.clone();
        move |source| EraseError::Sql {
            path,
            doing: doing.into(),
            source,
        }
    };
    let conn = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    conn.pragma_update(None, "secure_delete", "ON")
        .map_err(sql("turning secure_delete on"))?;
    let checkpoint = || -> Result<(), EraseError> {
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(sql("checkpointing the WAL"))?;
        if busy != 0 {
            return Err(EraseError::Busy {
                path: display.clone(),
            });
        }
        Ok(())
    };
    checkpoint()?;
    conn.execute_batch("VACUUM")
        .map_err(sql("rebuilding the file (VACUUM)"))?;
    checkpoint()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    /// A database with every table the engine and memory create, and one row per table holding
    /// `value` in each of its text columns (typed by their declared affinity).
    fn fill_every_table(path: &Path, value: &str) -> Vec<Table> {
        drop(SqliteStore::open(path).unwrap());
        let conn = Connection::open(path).unwrap();
        // One row per table, each on its own: its references point nowhere.
        conn.pragma_update(None, "foreign_keys", "OFF").unwrap();
        let tables = tables(&conn).unwrap();
        for t in &tables {
            let mut info = conn
                .prepare("SELECT name, type FROM pragma_table_xinfo(?1) WHERE hidden = 0")
                .unwrap();
            let cols: Vec<(String, String)> = info
                .query_map([&t.name], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let text = |ty: &String| {
                let ty = ty.to_uppercase();
                !ty.contains("INT") && !ty.contains("REAL") && !ty.contains("BLOB")
            };
            if !cols.iter().any(|c| text(&c.1)) {
                continue;
            }
            let values: Vec<Value> = cols
                .iter()
                .map(|(name, ty)| {
                    let ty = ty.to_uppercase();
                    if t.name == FACT_VERSIONS && name == "source" {
                        // A CHECKed enumeration (OPC's structure, never personal data).
                        Value::Text("agent".into())
                    } else if ty.contains("INT") {
                        Value::Integer(1)
                    } else if ty.contains("REAL") {
                        Value::Real(1.0)
                    } else if ty.contains("BLOB") {
                        Value::Blob(vec![0])
                    } else {
                        Value::Text(format!("{{\"note\":\"mail {value} now\"}}"))
                    }
                })
                .collect();
            let names = cols.iter().map(|c| quote(&c.0)).collect::<Vec<_>>();
            let marks = (1..=cols.len())
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>();
            conn.execute(
                &format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    quote(&t.name),
                    names.join(", "),
                    marks.join(", ")
                ),
                rusqlite::params_from_iter(values),
            )
            .unwrap();
        }
        tables
    }

    /// Every text value anywhere in the file that still holds the value (any case).
    fn leftovers(path: &Path, value: &str) -> Vec<String> {
        let conn = Connection::open(path).unwrap();
        let needle = value.to_lowercase();
        let mut out = Vec::new();
        for t in tables(&conn).unwrap() {
            for c in &t.columns {
                let n: i64 = conn
                    .query_row(
                        &format!(
                            "SELECT count(*) FROM {} WHERE instr(lower({}), ?1) > 0",
                            quote(&t.name),
                            quote(c)
                        ),
                        [&needle],
                        |r| r.get(0),
                    )
                    .unwrap();
                if n > 0 {
                    out.push(format!("{}.{c}", t.name));
                }
            }
        }
        out
    }

    #[test]
    fn every_table_with_a_text_column_is_covered() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opc.db");
        let value = "Carol.Jones@Example.org";
        let tables = fill_every_table(&db, value);
        // The engine's and memory's tables are all there (the gateway's and the web chat's are
        // covered end to end, tests/tests/privacy_erase.rs).
        for name in [
            "tasks",
            "llm_calls",
            "approvals",
            "notices",
            "conversations",
        ] {
            assert!(tables.iter().any(|t| t.name == name), "{name}");
        }
        for name in [
            "memory_blocks",
            "memory_block_history",
            RECALL_TABLE,
            "recall_erasures",
        ] {
            assert!(tables.iter().any(|t| t.name == name), "{name}");
        }
        let matcher = Matcher::new(&value.to_lowercase()).unwrap();
        let dry = scan(&db, &matcher).unwrap();
        let with_text: Vec<&TableCount> = dry.tables.iter().filter(|t| t.rows > 0).collect();
        assert!(dry.rows() > 0);
        assert!(
            !leftovers(&db, value).is_empty(),
            "a dry run changes nothing"
        );

        let done = rewrite(&db, &matcher).unwrap();
        assert_eq!(done.rows(), dry.rows());
        assert_eq!(done.recall_seqs.len(), 1);
        assert!(done.record.is_some());
        assert_eq!(
            leftovers(&db, value),
            Vec::<String>::new(),
            "tables scanned: {with_text:?}"
        );
        // Recall stays append-only after its one rewrite.
        let conn = Connection::open(&db).unwrap();
        let err = conn
            .execute("UPDATE recall_messages SET text = 'x'", [])
            .unwrap_err();
        assert!(err.to_string().contains("append-only"), "{err}");
        scrub(&db).unwrap();
        let bytes = std::fs::read(&db).unwrap().to_ascii_lowercase();
        let needle = value.to_lowercase().into_bytes();
        assert!(!bytes.windows(needle.len()).any(|w| w == needle.as_slice()));
    }

    #[test]
    fn a_value_in_the_structure_is_refused_and_nothing_changes() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opc.db");
        fill_every_table(&db, "someone");
        // `note` is a key of every stored JSON document above.
        let err = rewrite(&db, &Matcher::new("note").unwrap()).unwrap_err();
        assert!(matches!(err, EraseError::Structure { .. }), "{err}");
        assert!(err.to_string().contains("nothing was changed"), "{err}");
        assert!(!leftovers(&db, "someone").is_empty());
        assert!(check_value("Completed").is_err());
        assert!(check_value("assistant").is_err());
        assert!(check_value("alice@example.com").is_ok());
    }

    #[test]
    fn an_erased_fact_leaves_no_word_in_the_facts_indexes() {
        use opc_memory::facts::{FactQuery, FactStore, Provenance, View};
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opc.db");
        drop(SqliteStore::open(&db).unwrap());
        let facts = FactStore::open(&db, opc_memory::embed::EmbedSlot::new()).unwrap();
        let provenance = Provenance {
            agent: "ceo".into(),
            ..Provenance::default()
        };
        facts
            .insert(
                "agent/ceo",
                "Zebulon writes from zebulon@example.org",
                None,
                &provenance,
                1,
            )
            .unwrap();
        facts
            .insert("agent/ceo", "The launch is in May", None, &provenance, 2)
            .unwrap();
        let search = |text: &str| {
            facts
                .search(&FactQuery {
                    text: text.into(),
                    namespaces: vec!["agent/ceo".into()],
                    view: View::Current,
                    limit: 10,
                })
                .unwrap()
                .into_iter()
                .map(|h| h.version.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(search("zebulon").len(), 1);
        let matcher = Matcher::new("zebulon").unwrap();
        rewrite(&db, &matcher).unwrap();
        assert!(
            search("zebulon").is_empty(),
            "the word is gone from the index"
        );
        assert_eq!(
            search("launch"),
            ["The launch is in May"],
            "the rest is indexed"
        );
        let conn = Connection::open(&db).unwrap();
        for table in FACTS_FTS {
            let n: i64 = conn
                .query_row(
                    &format!("SELECT count(*) FROM {table} WHERE {table} MATCH 'zebulon'"),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(n, 0, "{table}");
        }
    }
}
