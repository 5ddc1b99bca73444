//! `opc privacy erase` on PostgreSQL (`framework.memory.storage: postgres`): the database's part
//! (steps 2 to 6 of [`super`]'s doc) when the org's state is shared by `opc run` nodes.
//!
//! What differs from SQLite, and why:
//! - nothing is refused because nodes run: several nodes share the database, and the rewrite is one
//!   transaction that conflicts with theirs only row by row (a node's change to a row the erasure
//!   read makes it start again; [`opc_agents::store::postgres::erase`]);
//! - no index is rebuilt here: each node keeps its own recall search index and in-memory vectors,
//!   which tail the tables in commit order; the rewrite moves the rewritten rows into its own
//!   transaction, so every node reads them again (replacing their documents, dropping and
//!   recomputing their vectors) at its next catch-up, and a node started later reads them as they
//!   are now;
//! - what a node holds in memory that is not an index: the sessions of tasks in flight. The report
//!   names those tasks (and their node) when they held the value, since saving a session writes it
//!   again: let them end, then run the same erase again. Core blocks are read from the database at
//!   every turn, so they need nothing;
//! - the files: `VACUUM` on the rewritten tables (the old row versions gone); the server's free
//!   space, write-ahead log, archives, replicas and backups still hold old bytes until reused or
//!   expired, which the report says (SQLite's rebuild of the file has no equivalent a client can
//!   force on a shared server without locking every node out: `VACUUM FULL`).
//!
//! The workspaces (step 7) and the audit line (step 8) are as on SQLite; nothing is locked while
//! the workspaces are rewritten (nodes may be writing there: the listing says what was left).

use opc_agents::store::erase::Erasure;
use opc_agents::store::postgres::erase as pg_erase;
use opc_privacy::erase::Matcher;
use std::process::ExitCode;

use super::workspaces::{Mode, Workspaces};
use super::{DatabaseErased, finish, report};
use crate::term::{eprint, print};

/// Erase on PostgreSQL at `url` (never printed), then the workspaces as `mode` says.
pub(super) fn run(
    loaded: &opc_hierarchy::Loaded,
    url: &str,
    matcher: &Matcher,
    dry_run: bool,
    mode: Mode,
) -> ExitCode {
    let runtime = match crate::setup::runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let spaces = Workspaces::of(loaded);
    let fail = |e: &dyn std::fmt::Display| {
        eprint(&format!("error: {e}\n"));
        ExitCode::from(1)
    };
    if dry_run {
        let found = runtime.block_on(async {
            let (mut client, place) = pg_erase::connect(url).await?;
            let found = pg_erase::scan(&mut client, &place, matcher).await?;
            Ok::<_, opc_agents::store::erase::EraseError>((place, found))
        });
        let (place, found) = match found {
            Ok(f) => f,
            Err(e) => return fail(&e),
        };
        let mut out = report(&format!("PostgreSQL at {place}"), &found, true, true);
        out.push_str(&running(&found, true));
        print(&out);
        print(&spaces.scan(matcher, mode).render(mode));
        print("dry run: nothing was changed\n");
        return ExitCode::SUCCESS;
    }
    let done = runtime.block_on(async {
        // Opening the store brings the tables up to date first (the record's table among them), as
        // the SQLite erasure migrates the file.
        let store = opc_agents::PgStore::connect(url, 2)
            .await
            .map_err(|e| format!("{e}. Nothing was changed"))?;
        let place = store.place().to_string();
        drop(store);
        let (mut client, _) = pg_erase::connect(url).await.map_err(|e| e.to_string())?;
        let done = pg_erase::rewrite(&mut client, &place, matcher)
            .await
            .map_err(|e| e.to_string())?;
        let unvacuumed = pg_erase::vacuum(&client, &done).await;
        Ok::<_, String>((place, done, unvacuumed))
    });
    let (place, done, unvacuumed) = match done {
        Ok(d) => d,
        Err(e) => return fail(&e),
    };
    let place = format!("PostgreSQL at {place}");
    let mut out = report(&place, &done, false, true);
    out.push_str(&running(&done, false));
    for (table, why) in &unvacuumed {
        out.push_str(&format!(
            "note: {table} could not be vacuumed ({why}); its old row versions stay until PostgreSQL's \
             autovacuum reaches it\n"
        ));
    }
    if done.rows() > 0 {
        out.push_str(
            "rewritten tables vacuumed; PostgreSQL may keep old bytes in free space until it is reused, and in \
             its write-ahead log, archives, replicas and backups: expire those as your retention allows \
             (`VACUUM FULL` on the tables rewrites their files, locking each while it runs)\n",
        );
    }
    out.push_str(&format!(
        "recorded as erasure #{} in recall_erasures\n",
        done.record.unwrap_or(0)
    ));
    let found = spaces.scan(matcher, mode);
    out.push_str(&found.render(mode));
    let database = DatabaseErased { reindexed: 0, done };
    finish(loaded, &place, matcher, Some(&database), &found, mode, out)
}

/// The note on tasks in flight that held the value (empty when none did).
fn running(found: &Erasure, dry_run: bool) -> String {
    if found.running.is_empty() {
        return String::new();
    }
    let tasks = found
        .running
        .iter()
        .map(|(id, node)| match node {
            Some(node) => format!("#{id} on {node}"),
            None => format!("#{id}"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "note: {} task(s) that {} the value had not ended ({tasks}): the node running each holds its session \
         in memory and may save the value again. Let them end (or cancel them), then run the same erase again\n",
        found.running.len(),
        if dry_run { "hold" } else { "held" },
    )
}
