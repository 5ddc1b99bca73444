//! # Directories and processes — for tests whose agents run commands in the real sandbox
//!
//! Role: the temporary directory such tests put their org (config, database, workspaces) in, and
//! a way to find a run's processes from outside.
//!
//! The directory is private (0700, as `mktemp -d` makes it), like root's home in a container: the
//! tests run as root, so the sandbox drops commands to uid 61000, which could not traverse it. It
//! does not need to: the launcher builds the command's private root as root, and the command sees
//! its workspace at `/workspace` only. Every test over this directory checks that on the way.
//!
//! PIDs a command prints (`$$`, `$!`) are its PID namespace's, not the host's: find its processes by
//! a token in their command lines instead ([`running_with`]).

use std::os::unix::fs::PermissionsExt;

/// A fresh temporary directory of mode 0700 (see the module doc); removed when dropped.
pub fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .unwrap_or_else(|e| panic!("make {} 0700: {e}", dir.path().display()));
    dir
}

/// Host PIDs of the running (not zombie) processes whose command line contains `token`.
pub fn running_with(token: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let running = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let (_, rest) = stat.rsplit_once(") ")?;
                Some(!rest.starts_with('Z') && !rest.starts_with('X'))
            })
            .unwrap_or(false);
        if running && String::from_utf8_lossy(&cmdline).contains(token) {
            pids.push(pid);
        }
    }
    pids
}
