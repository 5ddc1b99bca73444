//! Who sandboxed commands run as, and making a workspace theirs.
//!
//! When OPC runs as root, commands never do: the launcher drops to [`SANDBOX_UID`]/[`SANDBOX_GID`]
//! before anything else. A fixed id rather than `nobody` (65534), because `nobody` is shared with
//! other daemons (NFS squashing, some services) and files a command leaves behind would belong to
//! all of them. 61000 sits between systemd's ranges for homed users (60001–60513) and for
//! `DynamicUser=` services (61184–65519), below the regular users' 1000–60000 on most systems and
//! below the subordinate ranges (100000+) given to containers.
//!
//! The trade-off of [`make_writable`]: the workspace's files then belong to that uid, which every
//! sandboxed command of every agent runs as. Plain file permissions no longer separate one agent's
//! workspace from another's; Landlock does (each run reaches only its own workspace and its
//! descendants'). OPC itself, as root, still reads and writes everything.

use std::io;
use std::os::unix::fs::{MetadataExt, lchown};
use std::path::Path;

/// The uid commands run as when OPC runs as root (see the module docs for why this number).
pub const SANDBOX_UID: u32 = 61_000;
/// The gid commands run as when OPC runs as root.
pub const SANDBOX_GID: u32 = 61_000;

/// When OPC runs as root, the (uid, gid) sandboxed commands run as; files the file tools create in
/// a workspace are chowned to it so Bash can change them. None when not root (commands run as
/// OPC's own user then, and own what they create).
pub fn sandbox_owner() -> Option<(u32, u32)> {
    nix::unistd::geteuid()
        .is_root()
        .then_some((SANDBOX_UID, SANDBOX_GID))
}

/// Make `dir` (created if missing) writable by sandboxed commands: when OPC runs as root, chown it
/// and everything under it to [`sandbox_owner`], without following symlinks (and leaving files
/// with more than one hard link as they are). Cheap when already
/// done: a `dir` that the sandbox user owns is taken as done and not walked. Does nothing when not
/// root. Note the trade-off in the module docs.
pub fn make_writable(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let Some((uid, gid)) = sandbox_owner() else {
        return Ok(());
    };
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.uid() == uid && meta.gid() == gid {
        return Ok(());
    }
    chown_tree(dir, uid, gid)
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    // A file with more than one link may be a hard link to a file outside the workspace (placed
    // there by someone outside the sandbox): chowning it would hand that outside file to the
    // sandbox's user, and Landlock (which follows names) would then let commands write it through
    // the name inside. Such a file keeps its owner.
    if !meta.is_dir() && meta.nlink() > 1 {
        return Ok(());
    }
    lchown(path, Some(uid), Some(gid))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A hard link in the workspace to a file outside it: the walk leaves the outside file's owner
    /// alone (as root; otherwise nothing is chowned at all).
    #[test]
    fn a_hard_link_out_of_the_workspace_keeps_its_owner() {
        let Some((uid, _)) = sandbox_owner() else {
            return;
        };
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside.txt");
        std::fs::write(&outside, "outside").unwrap();
        let workspace = root.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(workspace.join("own.txt"), "own").unwrap();
        std::fs::hard_link(&outside, workspace.join("link")).unwrap();
        make_writable(&workspace).unwrap();
        assert_eq!(std::fs::metadata(&workspace).unwrap().uid(), uid);
        assert_eq!(
            std::fs::metadata(workspace.join("own.txt")).unwrap().uid(),
            uid
        );
        assert_eq!(std::fs::metadata(&outside).unwrap().uid(), 0);
    }
}
