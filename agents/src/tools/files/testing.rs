//! Test support shared by the file tools' unit tests (test builds only).
//!
//! A workspace root `ws/` with the agent's own directory `me/` (read-write) and a team directory
//! `team/` (read-only), and a Read that records what the task saw — what Write and Edit check before
//! they overwrite a file. One copy, so that the tests of each tool set up the same reach.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use super::access::{Access, Intent, Roots, check_regular};
use super::read;
use super::tracking::ReadRecords;
use crate::store::TaskId;

/// A fresh workspace root; the temp dir must outlive the roots.
pub(super) fn setup() -> (tempfile::TempDir, PathBuf, Roots) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(base.join("team")).unwrap();
    let access = Access {
        write: base.join("me"),
        read: vec![base.join("team")],
    };
    let roots = Roots::open(&base, &access, None).unwrap();
    (dir, base, roots)
}

/// Read `path` as agent `dev` in `task`, recording the snapshot as the Read tool does.
pub(super) fn do_read(roots: &Roots, records: &ReadRecords, path: &str, task: TaskId) {
    let r = roots.resolve(path, Intent::Read).unwrap();
    let file = r.open_read().unwrap();
    let stat = check_regular(&file, path).unwrap();
    let out = read::read(file, &stat, path, 1, 10).unwrap();
    records.record("dev", task, &r.path, out.snapshot);
}
