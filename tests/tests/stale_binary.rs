//! The end-to-end tests run the `opc` built from the current sources, never an old build: the binary
//! `opc_binary()` hands out passes the freshness check, and the check rejects that same build once a
//! source it was made from is newer than it, or when its dep-info comes from another checkout. The
//! stale copies are made beside the real binary's dep-info in a temporary directory, so no source and
//! no build artefact of the checkout is touched.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use opc_tests::fresh::{self, Stale};
use opc_tests::opc_process::{opc_binary, workspace_root};

fn set_modified(path: &Path, time: SystemTime) {
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(time))
        .unwrap();
}

/// The real binary's sources, as its dep-info lists them.
fn sources_of(binary: &Path) -> String {
    let dep_info = std::fs::read_to_string(binary.with_extension("d")).unwrap();
    let (_, sources) = dep_info.split_once(": ").unwrap();
    sources.trim().to_string()
}

#[test]
fn the_binary_the_tests_run_is_the_current_build() {
    let binary = opc_binary();
    assert_eq!(fresh::check(&binary, &workspace_root()), Ok(()));
    let sources = sources_of(&binary);
    // The dep-info covers the workspace crates the binary links, not only opc-bot.
    for krate in ["bot/src/", "agents/src/", "adapters/src/", "privacy/src/"] {
        let dir = workspace_root().join(krate);
        assert!(
            sources.contains(dir.to_str().unwrap()),
            "{krate} missing from {sources}"
        );
    }
}

#[test]
fn the_check_rejects_a_build_older_than_a_source() {
    let real = opc_binary();
    let dir = tempfile::tempdir().unwrap();
    let copy: PathBuf = dir.path().join("opc");
    std::fs::write(&copy, "an old build").unwrap();
    std::fs::write(
        copy.with_extension("d"),
        format!("{}: {}\n", copy.display(), sources_of(&real)),
    )
    .unwrap();
    // Built now: after every source, so fresh.
    assert_eq!(fresh::check(&copy, &workspace_root()), Ok(()));
    // Built long ago: every source is newer, and the first one listed is named.
    set_modified(&copy, SystemTime::UNIX_EPOCH + Duration::from_secs(1));
    match fresh::check(&copy, &workspace_root()) {
        Err(Stale::NewerSource(source)) => {
            assert!(source.starts_with(workspace_root()), "{}", source.display())
        }
        other => panic!("expected a newer source, got {other:?}"),
    }
}

#[test]
fn the_check_rejects_a_build_from_another_checkout() {
    let real = opc_binary();
    let dir = tempfile::tempdir().unwrap();
    // The real target dir's binary and dep-info, seen from a checkout at `dir`: its sources are not
    // this checkout's.
    let copy = dir.path().join("target/debug/opc");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::write(&copy, "a build of another checkout").unwrap();
    std::fs::write(
        copy.with_extension("d"),
        format!("{}: {}\n", copy.display(), sources_of(&real)),
    )
    .unwrap();
    assert!(
        matches!(
            fresh::check(&copy, dir.path()),
            Err(Stale::ForeignSource(_))
        ),
        "{:?}",
        fresh::check(&copy, dir.path())
    );
    // And the real dep-info, naming the real binary, next to the copy.
    std::fs::copy(real.with_extension("d"), copy.with_extension("d")).unwrap();
    assert!(matches!(
        fresh::check(&copy, &workspace_root()),
        Err(Stale::OtherTarget { .. })
    ));
}
