//! The private root: a mount namespace that holds only what the policy allows.
//!
//! What the command's `/` is: a small read-only tmpfs with the system directories bound in
//! read-only, the `/etc` entries of [`super::rules::ETC_FILES`], five devices, the workspace at
//! [`WORKSPACE`] (read-write), the shared trees read-only (see [`crate::layout`]), and two fresh
//! tmpfs mounts: `/tmp` and `/home` (HOME is `/home/agent`). Nothing else of the host exists for it:
//! not a Unix socket elsewhere on the host (Landlock does not cover `connect()` on pathname
//! sockets), not the host path of its workspace, not `/proc`. This is what bubblewrap builds.
//!
//! How, as bubblewrap does it: a new mount namespace made private (no propagation either way), a
//! tmpfs mounted over `/tmp` as the new root, `pivot_root` into it with the old root at `/oldroot`,
//! then every bind taken from `/oldroot/<host path>`, then the old root detached and `/` made
//! read-only. When OPC runs as root this runs as root, before the uid drop: the binds resolve host
//! paths with root's rights, so a workspace under a directory others cannot traverse (`/root`, a
//! `mktemp -d` directory) works, and the command never needs to traverse it. Run by an ordinary
//! user it runs inside the user namespace the outer stage made; a read-only remount there keeps
//! the flags the kernel locked on the host's mount (`nosuid`, `nodev`, `noexec`, atime).
//!
//! Invariant: every step is checked; a failure ends the run before anything of the command runs.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use rustix::fs::StatVfsMountFlags;

use super::protocol::{Failure, Spec};
use super::rules::{DEVICES, ETC_FILES, SYSTEM_DIRS};
use crate::layout::{HOME, TMP, WORKSPACE};

/// Where the host's root is while the new one is built.
const OLD: &str = "/oldroot";

/// Build the private root and move into it; the cwd is [`WORKSPACE`] afterwards. `owner` is the
/// (uid, gid) that gets HOME (the sandbox user when OPC runs as root).
pub(crate) fn enter(
    spec: &Spec,
    owner: Option<(u32, u32)>,
    tmpfs_bytes: u64,
) -> Result<(), Failure> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| fail("making the mount namespace private", e))?;
    mount(
        Some("tmpfs"),
        TMP,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=4m"),
    )
    .map_err(|e| fail("mounting the new root", e))?;
    mkdir(&Path::new(TMP).join("oldroot"))?;
    nix::unistd::pivot_root(TMP, &Path::new(TMP).join("oldroot"))
        .map_err(|e| fail("pivot_root", e))?;
    nix::unistd::chdir("/").map_err(|e| fail("chdir /", e))?;

    for dir in SYSTEM_DIRS {
        bind_system(dir, true)?;
    }
    for entry in ETC_FILES {
        bind_system(entry, true)?;
    }
    for dev in DEVICES {
        bind_system(dev, false)?;
    }
    mkdir(Path::new(WORKSPACE))?;
    bind(&old(&spec.workdir), Path::new(WORKSPACE), false)?;
    for tree in &spec.shared {
        let source = old(&tree.host);
        if !source.is_dir() {
            // A workspace nobody has written to yet: nothing to read.
            continue;
        }
        if !tree.inside.starts_with(WORKSPACE) {
            mkdir(&tree.inside)?;
        } else if !tree.inside.is_dir() {
            continue;
        }
        bind(&source, &tree.inside, true)?;
    }
    let size = format!("size={tmpfs_bytes}");
    mkdir(Path::new(TMP))?;
    mount(
        Some("tmpfs"),
        TMP,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("mode=1777,{size}").as_str()),
    )
    .map_err(|e| fail("mounting /tmp", e))?;
    let home_root = Path::new(HOME).parent().unwrap_or(Path::new("/home"));
    mkdir(home_root)?;
    mount(
        Some("tmpfs"),
        home_root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("mode=0755,{size}").as_str()),
    )
    .map_err(|e| fail("mounting /home", e))?;
    mkdir(Path::new(HOME))?;
    std::fs::set_permissions(HOME, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .map_err(|e| fail("chmod HOME", e))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(HOME, Some(uid), Some(gid)).map_err(|e| fail("chown HOME", e))?;
    }

    umount2(OLD, MntFlags::MNT_DETACH).map_err(|e| fail("detaching the old root", e))?;
    std::fs::remove_dir(OLD).map_err(|e| fail("removing /oldroot", e))?;
    mount(
        none,
        "/",
        none,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        none,
    )
    .map_err(|e| fail("making / read-only", e))?;
    nix::unistd::chdir(WORKSPACE).map_err(|e| fail("chdir /workspace", e))?;
    Ok(())
}

/// The host path `path` as seen while the new root is built.
fn old(path: &Path) -> PathBuf {
    Path::new(OLD).join(path.strip_prefix("/").unwrap_or(path))
}

/// Bind a host system path at the same place: a symlink is recreated as the same symlink (it
/// resolves inside the new root), a missing one is skipped.
fn bind_system(path: &str, read_only: bool) -> Result<(), Failure> {
    let target = Path::new(path);
    let source = old(target);
    let Ok(meta) = std::fs::symlink_metadata(&source) else {
        return Ok(());
    };
    if let Some(parent) = target.parent() {
        mkdir(parent)?;
    }
    if meta.file_type().is_symlink() {
        let link = std::fs::read_link(&source).map_err(|e| fail(&format!("readlink {path}"), e))?;
        return std::os::unix::fs::symlink(&link, target)
            .map_err(|e| fail(&format!("symlink {path}"), e));
    }
    if meta.is_dir() {
        mkdir(target)?;
    } else {
        std::fs::File::create(target).map_err(|e| fail(&format!("creating {path}"), e))?;
    }
    bind(&source, target, read_only)
}

/// Bind `source` (recursively) at `target`, then, when `read_only`, remount it read-only, nosuid
/// and nodev, keeping the flags the host mount has (the kernel refuses to drop locked ones).
fn bind(source: &Path, target: &Path, read_only: bool) -> Result<(), Failure> {
    let none: Option<&str> = None;
    mount(
        Some(source),
        target,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(|e| fail(&format!("binding {}", target.display()), e))?;
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | kept(target);
    if read_only {
        flags |= MsFlags::MS_RDONLY | MsFlags::MS_NODEV;
    }
    mount(none, target, none, flags, none)
        .map_err(|e| fail(&format!("restricting {}", target.display()), e))
}

/// The flags of the mount at `path` that a bind remount must keep.
fn kept(path: &Path) -> MsFlags {
    let Ok(stat) = rustix::fs::statvfs(path) else {
        return MsFlags::empty();
    };
    let have = stat.f_flag;
    let mut flags = MsFlags::empty();
    for (statvfs, ms) in [
        (StatVfsMountFlags::RDONLY, MsFlags::MS_RDONLY),
        (StatVfsMountFlags::NODEV, MsFlags::MS_NODEV),
        (StatVfsMountFlags::NOEXEC, MsFlags::MS_NOEXEC),
        (StatVfsMountFlags::NOATIME, MsFlags::MS_NOATIME),
        (StatVfsMountFlags::NODIRATIME, MsFlags::MS_NODIRATIME),
        (StatVfsMountFlags::RELATIME, MsFlags::MS_RELATIME),
    ] {
        if have.contains(statvfs) {
            flags |= ms;
        }
    }
    flags
}

fn mkdir(path: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(path).map_err(|e| fail(&format!("mkdir {}", path.display()), e))
}

fn fail(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::setup(format!("building the private root: {what}: {e}"))
}
