//! # Sandbox-reachable directories — for tests whose agents run commands in the real sandbox
//!
//! Role: the temporary directories such tests put their org (config, database, workspaces) and
//! their other files in. The tests run as root, so the sandbox drops a command to its own uid
//! (61000), which must traverse every directory above the workspace; a fresh temporary directory is
//! owner-only (0700) and would stop it there.

use std::os::unix::fs::PermissionsExt;

/// A fresh temporary directory of mode 0755, so the sandbox's uid can traverse it (see the module
/// doc); removed when dropped.
pub fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("make {} 0755: {e}", dir.path().display()));
    dir
}
