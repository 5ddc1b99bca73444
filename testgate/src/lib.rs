//! Gates for tests that need something a machine may lack: a cached model, a kernel feature, a
//! CPU feature, a browser, a system program, a database server.
//!
//! Why a crate: such tests live in many crates (the sandbox's, privacy's NER, memory's embedder, the
//! end-to-end suite), and each used to decide for itself whether a missing part means "skip" or
//! "fail". A test that returns early and passes has checked nothing, so the rule is one function:
//! - on a developer's machine, [`skip`] prints one line saying what was skipped and why, and the test
//!   returns;
//! - under CI (`CI` set to anything but empty, `0` or `false`) or `OPC_REQUIRE_ALL=1`, the same call
//!   fails the test, naming what was missing.
//!
//! [`ran`] records that a gated test got past its gate, so `.ci/run` can say how many tests of each
//! group ([`Group`]) really ran: it sets `OPC_TEST_GROUPS` to a directory, and each gated test leaves
//! one file in `<dir>/<group>/`. Without the variable, nothing is written.
//!
//! Invariants: no dependency, no state; [`skip`] never returns under CI.

use std::path::PathBuf;

/// The groups of tests that depend on something outside the project, as `.ci/run` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The kernel sandbox: Landlock, user namespaces, seccomp.
    Sandbox,
    /// The cached NER model and gazetteer (`opc models fetch`).
    Ner,
    /// The cached embedding model (`opc models fetch`).
    Embedding,
    /// Headless Chromium.
    Browser,
    /// A system program a test drives (python3, git).
    Programs,
    /// Running as root (the sandbox's hardest case).
    Root,
    /// The shared test data beside the checkout (`../shared/data`: PII cases, Slack's spec), which
    /// CI always has and a clone elsewhere may not.
    SharedData,
    /// A PostgreSQL server: the Debian server binaries (`initdb`, `pg_ctl`) for a throw-away one, or
    /// `OPC_TEST_POSTGRES_URL` for one already running.
    Postgres,
    /// A CPU with AVX-512 VNNI or AVX-VNNI (the int8 kernels `opc-infer` checks bit for bit against
    /// its portable one).
    Vnni,
}

impl Group {
    /// The group's name in messages and in the `OPC_TEST_GROUPS` directory.
    pub fn name(self) -> &'static str {
        match self {
            Group::Sandbox => "sandbox",
            Group::Ner => "ner",
            Group::Embedding => "embedding",
            Group::Browser => "browser",
            Group::Programs => "programs",
            Group::Root => "root",
            Group::SharedData => "shared-data",
            Group::Postgres => "postgres",
            Group::Vnni => "vnni",
        }
    }
}

/// Whether a missing part fails the test: under CI, or when `OPC_REQUIRE_ALL=1`.
pub fn required() -> bool {
    let set =
        |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    set("CI") || set("OPC_REQUIRE_ALL")
}

/// `test` (of `group`) cannot run here because of `why`. Under [`required`] this panics, failing the
/// test; otherwise it prints one line and returns `false`, for `return` or `if !ok && !skip(…)`.
#[track_caller]
pub fn skip(group: Group, test: &str, why: &str) -> bool {
    assert!(
        !required(),
        "{test} ({} group): {why}; under CI (or OPC_REQUIRE_ALL=1) a missing part fails the test",
        group.name()
    );
    eprintln!("{test}: skipped ({} group), {why}", group.name());
    false
}

/// `Ok(value)` passes the gate (and is recorded by [`ran`]); `Err(why)` goes to [`skip`] and gives
/// `None`.
#[track_caller]
pub fn need<T, E: std::fmt::Display>(group: Group, test: &str, found: Result<T, E>) -> Option<T> {
    match found {
        Ok(value) => {
            ran(group, test);
            Some(value)
        }
        Err(why) => {
            skip(group, test, &why.to_string());
            None
        }
    }
}

/// Records that `test` of `group` got past its gate, when `.ci/run` asked for the count
/// (`OPC_TEST_GROUPS`). One file per test, named after it, so parallel tests and processes never
/// share a write, and a test that runs twice in a process counts once.
pub fn ran(group: Group, test: &str) {
    let Some(dir) = std::env::var_os("OPC_TEST_GROUPS") else {
        return;
    };
    let dir = PathBuf::from(dir).join(group.name());
    let name: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Counting is a report, not a check: a write that fails leaves the count low, and .ci/run's
    // figure shows it.
    let _ = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join(name), b""));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_a_distinct_name() {
        let all = [
            Group::Sandbox,
            Group::Ner,
            Group::Embedding,
            Group::Browser,
            Group::Programs,
            Group::Root,
            Group::SharedData,
            Group::Postgres,
            Group::Vnni,
        ];
        let mut names: Vec<&str> = all.iter().map(|g| g.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn need_passes_a_found_part_through() {
        assert_eq!(need::<u8, String>(Group::Ner, "t", Ok(7)), Some(7));
    }
}
