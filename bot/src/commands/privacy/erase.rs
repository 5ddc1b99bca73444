//! `opc privacy erase VALUE [--dry-run] [--workspaces]`: remove every stored copy of a personal value.
//!
//! OPC is local-first: tasks, session histories, recall rows, the web transcript and progress events
//! keep real values in plain text in one SQLite file (`framework.memory.path`) and its search index
//! (`<file>.index/`). This command is how a value leaves them:
//! 1. the value (trimmed) is checked: not empty, not too short, not a word OPC stores as structure,
//!    not part of an agent id, role, provider id, model name or the org's name, and not written in the
//!    config file or a prompt file, which would seed it again at the next start (see
//!    `opc_privacy::erase` for what is matched);
//! 2. the database lock (`<file>.lock`, held by `opc run` and `opc chat`) is taken, or the command
//!    refuses with "stop opc run first": the running engine writes the same file and index, and a
//!    rewrite under it could be undone by its next save of a session it holds in memory;
//! 3. the search index's writer lock is taken (refused when another process indexes);
//! 4. every table is rewritten in one transaction (`opc_agents::store::erase::rewrite`), recall's rows
//!    included (the one rewrite its append-only table allows, recorded in `recall_erasures`);
//! 5. the rewritten recall rows are re-indexed and re-embedded, the index merged into one segment and
//!    its old files deleted (`RecallStore::finish_erasures`);
//! 6. the file is rebuilt (`VACUUM`) and its WAL truncated (`scrub`), so no old bytes remain in free
//!    pages or the log;
//! 7. the agents' workspaces are searched for files the Write tool or Bash made with the value
//!    ([`workspaces`]): listed, or with `--workspaces` rewritten in place (still under the database
//!    lock, so no `opc run` starts agents writing there meanwhile);
//! 8. one audit line goes to `.opc/audit.jsonl` beside the config: when, the database, the value's
//!    length, the counts (workspace files and occurrences replaced included). Never the value, nor a
//!    hash of it, nor a path.
//!
//! `--dry-run` does 1, prints the counts of step 4 from a read-only connection and lists the
//! workspace files (with `--workspaces`, what would be replaced in them): nothing is locked or
//! written, so it also works beside a running `opc run`.
//!
//! On PostgreSQL (`framework.memory.storage: postgres`) steps 2 to 6 are [`postgres`]'s: one
//! transaction while the nodes keep running, their search indexes re-reading the rewritten rows.
//!
//! Exit status: 0 when everything asked was done — without `--workspaces`, workspace files that hold
//! the value are listed and the status is still 0; with it, 1 when a copy the command found (or could
//! not search) is left in a workspace: a binary or oversized file, a file with several names, a name,
//! an unreadable directory.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use opc_agents::store::erase::{self, Erasure};
use opc_memory::embed::{EmbedSlot, MiniLm};
use opc_memory::recall::{RecallError, RecallStore};
use opc_privacy::erase::{ERASED, Matcher};
use serde_json::json;

use crate::term::{eprint, print};

mod postgres;
mod workspaces;

use workspaces::{Mode, Workspaces};

/// Where the audit lines go, relative to the config file's directory (beside the console's
/// `config-history/`).
const AUDIT: &str = ".opc/audit.jsonl";

/// Run `opc privacy erase`; `workspaces` is `--workspaces` (rewrite the workspace files, not only
/// list them).
pub fn run(config: &Path, value: &str, dry_run: bool, workspaces: bool) -> ExitCode {
    let value = value.trim();
    let matcher = match Matcher::new(value) {
        Ok(m) => m,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::from(1);
        }
    };
    if let Err(e) = erase::check_value(value) {
        eprint(&format!("error: {e}\n"));
        return ExitCode::from(1);
    }
    let loaded = match crate::setup::load_config(config) {
        Ok(l) => l,
        Err(code) => return code,
    };
    // Agent ids, roles, provider ids and model names are stored as structure (task rows, namespaces,
    // authors, the ledger's model column): a value inside one would rename those records.
    let org_name = loaded.config.framework.name.clone();
    let providers = loaded
        .config
        .framework
        .providers
        .iter()
        .flat_map(|(id, p)| {
            std::iter::once(("provider", id.clone()))
                .chain(p.models.keys().map(|m| ("model", m.clone())))
        })
        .collect::<Vec<_>>();
    for (what, text) in loaded
        .config
        .agents
        .iter()
        .flat_map(|(id, a)| {
            [("agent id", id.clone()), ("role", a.role.clone())]
                .into_iter()
                .chain(a.model.clone().map(|m| ("model", m)))
        })
        .chain(std::iter::once(("org name", org_name)))
        .chain(providers)
    {
        if matcher.occurs_in(&text) {
            eprint(&format!(
                "error: refused: the value occurs in the {what} {text:?} ({}); erasing it would rename stored \
                 records of the org, not remove personal data. Pass the whole personal value\n",
                config.display()
            ));
            return ExitCode::from(1);
        }
    }
    // A value written in the config (a block's seeded value, a shared block) or a prompt file would be
    // put back at the next start — core blocks are re-seeded when the config's value differs from the
    // one applied — so the erase would be undone: the files must be edited first.
    if let Some(file) = written_in_files(config, &loaded, &matcher) {
        eprint(&format!(
            "error: refused: the value is written in {}; it would be stored again when `opc run` next \
             starts. Remove it from that file first (then restart or reload), and run the erase again. \
             Nothing was changed\n",
            file.display()
        ));
        return ExitCode::from(1);
    }
    let mode = match (workspaces, dry_run) {
        (false, _) => Mode::List,
        (true, true) => Mode::DryRun,
        (true, false) => Mode::Redact,
    };
    let db = match crate::setup::database(&loaded) {
        Ok(crate::setup::Database::Sqlite(db)) => db,
        Ok(crate::setup::Database::Postgres { url, .. }) => {
            return postgres::run(&loaded, &url, &matcher, dry_run, mode);
        }
        Err(code) => return code,
    };
    let spaces = Workspaces::of(&loaded);
    let no_database = || {
        format!(
            "nothing stored in the database: {} does not exist yet (it is created when `opc run` or `opc chat` \
             first starts)\n",
            db.display()
        )
    };
    if dry_run {
        if db.exists() {
            match erase::scan(&db, &matcher) {
                Ok(found) => print(&report(&db.display().to_string(), &found, true, false)),
                Err(e) => {
                    eprint(&format!("error: {e}\n"));
                    return ExitCode::from(1);
                }
            }
        } else {
            print(&no_database());
        }
        print(&spaces.scan(&matcher, mode).render(mode));
        print("dry run: nothing was changed\n");
        return ExitCode::SUCCESS;
    }
    // The database first, under its lock, which is kept while the workspaces are rewritten.
    let (_lock, mut out, database) = if db.exists() {
        match erase_now(&db, &matcher) {
            Ok((lock, out, done)) => (Some(lock), out, Some(done)),
            Err(code) => return code,
        }
    } else {
        (None, no_database(), None)
    };
    let found = spaces.scan(&matcher, mode);
    out.push_str(&found.render(mode));
    finish(
        &loaded,
        &db.display().to_string(),
        &matcher,
        database.as_ref(),
        &found,
        mode,
        out,
    )
}

/// Steps 7 and 8 of the module doc, after the database: the audit line (when anything was erased),
/// the report printed, and the exit status (1 when `--workspaces` left copies).
fn finish(
    loaded: &opc_hierarchy::Loaded,
    place: &str,
    matcher: &Matcher,
    database: Option<&DatabaseErased>,
    found: &workspaces::Found,
    mode: Mode,
    mut out: String,
) -> ExitCode {
    let replaced = found.replaced();
    if database.is_some() || replaced.0 > 0 {
        let audit = loaded.base_dir.join(AUDIT);
        match write_audit(&audit, place, matcher, database, replaced) {
            Ok(()) => out.push_str(&format!("audit: one line in {}\n", audit.display())),
            Err(e) => {
                print(&out);
                eprint(&format!(
                    "error: erased, but the audit line could not be written to {}: {e}\n",
                    audit.display()
                ));
                return ExitCode::from(1);
            }
        }
    }
    print(&out);
    if mode == Mode::Redact && found.left_over() {
        eprint(
            "error: copies are left in the workspaces (listed above, with what to do for each); \
             the rest was erased\n",
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// What the database's erasure did, for the audit line.
struct DatabaseErased {
    done: Erasure,
    reindexed: usize,
}

/// The config file or prompt file that holds a copy of the value, if any. Files that cannot be read
/// were already reported by loading the config; they are skipped here.
fn written_in_files(
    config: &Path,
    loaded: &opc_hierarchy::Loaded,
    matcher: &Matcher,
) -> Option<std::path::PathBuf> {
    if std::fs::read_to_string(config).is_ok_and(|text| matcher.occurs_in(&text)) {
        return Some(config.to_path_buf());
    }
    loaded.config.agents.values().find_map(|agent| {
        let Some(opc_hierarchy::schema::Prompt::File(file)) = &agent.prompt else {
            return None;
        };
        let text = opc_hierarchy::read_prompt_file(&loaded.base_dir, file).ok()?;
        matcher.occurs_in(&text).then(|| loaded.base_dir.join(file))
    })
}

/// Steps 2 to 6 of the module doc: the database lock (held by the caller until it is done), the
/// report so far, and what the audit line records.
fn erase_now(
    db: &Path,
    matcher: &Matcher,
) -> Result<(std::fs::File, String, DatabaseErased), ExitCode> {
    let fail = |e: &dyn std::fmt::Display| {
        eprint(&format!("error: {e}\n"));
        Err(ExitCode::from(1))
    };
    let lock = match opc_agents::store::claim_database(db) {
        Ok(lock) => lock,
        Err(opc_agents::store::StoreError::Locked { lock, .. }) => {
            return fail(&format!(
                "stop opc run first: another OPC process (`opc run` or `opc chat`) is using {} (lock file {lock}). \
                 Erasure rewrites the database and its search index, which the running engine writes to (and it \
                 would save the value again from the sessions it holds in memory); stop it, run the erase, then \
                 start it again. Nothing was changed",
                db.display()
            ));
        }
        Err(e) => return fail(&format!("{e}. Nothing was changed")),
    };
    let slot = EmbedSlot::new();
    let recall = match RecallStore::open(db, slot.clone()) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    match recall.claim_index() {
        Ok(()) => {}
        Err(RecallError::IndexBusy) => {
            return fail(
                &"another process is indexing this database's recall memory (`opc memory search`?); \
                  run the erase again when it is done. Nothing was changed",
            );
        }
        Err(e) => return fail(&format!("{e}. Nothing was changed")),
    }
    let done = match erase::rewrite(db, matcher) {
        Ok(d) => d,
        Err(e) => return fail(&e),
    };
    // The embedding model is needed only when rewritten rows had vectors.
    if !done.recall_seqs.is_empty()
        && let Ok(model) = MiniLm::load_shared()
    {
        slot.set(model);
    }
    let finished = match recall.finish_erasures() {
        Ok(f) => f,
        Err(e) => {
            return fail(&format!(
                "the database is rewritten (erasure #{}), but its search index could not be updated: {e}. \
                 Run the same erase again: it finishes the index first",
                done.record.unwrap_or(0)
            ));
        }
    };
    drop(recall);
    if let Err(e) = erase::scrub(db) {
        return fail(&e);
    }
    let mut out = report(&db.display().to_string(), &done, false, false);
    let mut index_dir = db.as_os_str().to_owned();
    index_dir.push(".index");
    out.push_str(&format!(
        "search index {}: {} document(s) re-indexed, merged into one segment, old files deleted\n",
        Path::new(&index_dir).display(),
        finished.reindexed
    ));
    if finished.reembedded > 0 {
        out.push_str(&format!("vectors: {} re-embedded\n", finished.reembedded));
    }
    if finished.vectors_dropped > 0 {
        out.push_str(&format!(
            "vectors: {} deleted and not recomputed (the embedding model is not fetched: `opc models fetch`); \
             those rows are found by keywords only\n",
            finished.vectors_dropped
        ));
    }
    if finished.erasures > 1 {
        out.push_str(&format!(
            "finished {} earlier erasure(s) whose index update had been interrupted\n",
            finished.erasures - 1
        ));
    }
    out.push_str(&format!(
        "database rebuilt (VACUUM) and its write-ahead log emptied; recorded as erasure #{} in recall_erasures\n",
        done.record.unwrap_or(0)
    ));
    Ok((
        lock,
        out,
        DatabaseErased {
            done,
            reindexed: finished.reindexed,
        },
    ))
}

/// The per-table report; `place` is the database (a file, or PostgreSQL's `host:port/name`), and
/// `postgres` says how recall's indexes follow the rewrite.
fn report(place: &str, found: &Erasure, dry_run: bool, postgres: bool) -> String {
    let occurrences: usize = found.tables.iter().map(|t| t.occurrences).sum();
    let mut out = format!(
        "{} {occurrences} occurrence(s) in {} row(s) of {}{}\n",
        if dry_run { "would replace" } else { "replaced" },
        found.rows(),
        place,
        if occurrences > 0 {
            format!(" with {ERASED}:")
        } else {
            String::new()
        }
    );
    let width = found
        .tables
        .iter()
        .map(|t| t.table.len())
        .max()
        .unwrap_or(0);
    for t in found.tables.iter().filter(|t| t.rows > 0) {
        out.push_str(&format!(
            "  {:width$}  {} row(s), {} occurrence(s)\n",
            t.table, t.rows, t.occurrences
        ));
    }
    let clean: Vec<&str> = found
        .tables
        .iter()
        .filter(|t| t.rows == 0)
        .map(|t| t.table.as_str())
        .collect();
    if !clean.is_empty() {
        out.push_str(&format!("  not found in: {}\n", clean.join(", ")));
    }
    if !found.recall_seqs.is_empty() {
        out.push_str(&format!(
            "recall rows {}: {} ({})\n",
            if dry_run { "to rewrite" } else { "rewritten" },
            found.recall_seqs.len(),
            if postgres {
                "every node's search index reads them again and replaces their documents; their vectors \
                 are deleted and computed again by the nodes"
            } else {
                "their search index documents and vectors are rebuilt"
            }
        ));
    }
    out
}

/// Append the audit line: counts and the value's length, never the value (nor the workspace files'
/// paths, whose names may hold it). `database` is `None` when there was none to erase;
/// `workspace` is (files, occurrences) replaced there.
fn write_audit(
    audit: &Path,
    place: &str,
    matcher: &Matcher,
    database: Option<&DatabaseErased>,
    (workspace_files, workspace_occurrences): (usize, usize),
) -> std::io::Result<()> {
    if let Some(dir) = audit.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tables: serde_json::Map<String, serde_json::Value> = database
        .iter()
        .flat_map(|d| d.done.tables.iter())
        .filter(|t| t.rows > 0)
        .map(|t| (t.table.clone(), json!(t.rows)))
        .collect();
    let line = json!({
        "at": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        "event": "privacy.erase",
        "by": std::env::var("USER").unwrap_or_default(),
        "database": database.map(|_| place.to_string()),
        "value_chars": matcher.chars(),
        "rows": database.map_or(0, |d| d.done.rows()),
        "tables": tables,
        "index_documents": database.map_or(0, |d| d.reindexed),
        "erasure": database.and_then(|d| d.done.record),
        "workspace_files": workspace_files,
        "workspace_occurrences": workspace_occurrences,
    });
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(audit)?;
    writeln!(log, "{line}")?;
    log.sync_all()
}
