//! Where the file tools may reach, and how a path is opened there without escaping.
//!
//! An agent reads and writes its own workspace and reads (never writes) its descendants'
//! workspaces; nothing else. A path from the model (relative to the workspace, or absolute) is
//! resolved physically — every existing component through `realpath`, so `..`, symlinks (of files
//! and directories) and magic links such as `/proc/self/root` are followed to where they really
//! lead — and the result must lie inside an allowed root; the most specific root decides, so a
//! descendant's workspace nested in the agent's own stays read-only.
//!
//! Checking a path and then opening it by name would race: a symlink swapped in between (by Bash
//! in the same workspace, or by another agent sharing it) could redirect the open. So nothing is
//! opened by its absolute name. The root is opened as a directory handle and the checked, canonical
//! relative path is opened beneath it with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`: the kernel itself refuses any symlink or `..` that appears after the
//! check. We chose `rustix::fs::openat2` over `cap-std` because the canonical path has no symlinks
//! at all, so "no symlinks, beneath this fd" is the exact rule, one syscall, with no emulation layer;
//! `rustix` is already in the dependency tree.
//!
//! Roots themselves are opened beneath the configured workspace root with the same flags, so a
//! workspace that an agent turned into a symlink (e.g. a nested workspace inside its own) is
//! refused rather than followed.
//!
//! A regular file with more than one hard link is refused for reading: a hard link made inside the
//! workspace can name a file outside it, and no path check can see that.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{CWD, FileType, Mode, OFlags, ResolveFlags};

/// Where one agent's file tools may reach (what `OrgTree::workspace_access` returns): absolute,
/// lexically normalised paths.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// The agent's own workspace (read-write).
    pub write: PathBuf,
    /// Its descendants' workspaces (read-only).
    pub read: Vec<PathBuf>,
}

/// What a call intends to do with a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Read or search.
    Read,
    /// Create or change.
    Write,
}

/// The kernel flags every open beneath a root uses.
fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// The allowed roots of one call, resolved (canonical, symlink-free).
#[derive(Debug)]
pub struct Roots {
    /// The agent's workspace.
    write: PathBuf,
    /// The descendants' workspaces that exist.
    read: Vec<PathBuf>,
}

impl Roots {
    /// Resolve `access` beneath the configured workspace root `base`: the agent's own workspace is
    /// created on first use (owned by `owner`, the sandbox's user, when set); descendants'
    /// workspaces that do not exist yet are skipped (there is nothing to read). A root reached
    /// through a symlink is refused.
    pub fn open(base: &Path, access: &Access, owner: Option<(u32, u32)>) -> Result<Roots, String> {
        std::fs::create_dir_all(base)
            .map_err(|e| format!("cannot create the workspace root `{}`: {e}", base.display()))?;
        // The configured paths are lexical; the root is opened by its real path (the config's
        // directory may itself sit behind a symlink, which is the admin's choice, not an agent's).
        let real = std::fs::canonicalize(base)
            .map_err(|e| format!("cannot open the workspace root `{}`: {e}", base.display()))?;
        let base = (lexical(base), real);
        let write = root_beneath(&base, &access.write, true, owner)?
            .ok_or_else(|| format!("cannot create your workspace `{}`", access.write.display()))?;
        let mut read = Vec::new();
        for root in &access.read {
            if let Some(r) = root_beneath(&base, root, false, None)?
                && r != write
                && !read.contains(&r)
            {
                read.push(r);
            }
        }
        Ok(Roots { write, read })
    }

    /// The agent's own workspace (canonical).
    #[cfg(test)]
    pub fn workspace(&self) -> &Path {
        &self.write
    }

    /// How a path is shown to the model: relative to the workspace when inside it, else absolute.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.write) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Resolve the model's `input` path and check it against the roots for `intent`. The error
    /// names the rule, for the model.
    pub fn resolve(&self, input: &str, intent: Intent) -> Result<Resolved, String> {
        if input.trim().is_empty() {
            return Err("the path is empty: give a path relative to your workspace".into());
        }
        if input.as_bytes().contains(&0) {
            return Err("the path contains a NUL byte".into());
        }
        let given = Path::new(input);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.write.join(given)
        };
        let (path, exists) =
            physical(&joined).map_err(|e| format!("cannot resolve `{input}`: {e}"))?;
        let root = std::iter::once(&self.write)
            .chain(&self.read)
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.components().count())
            .cloned();
        let Some(root) = root else {
            let shown = if path.as_path() == given {
                String::new()
            } else {
                format!(" (it resolves to `{}`)", path.display())
            };
            return Err(format!(
                "`{input}`{shown} is outside your workspace and your team's: the file tools reach \
                 only your workspace `{}` (read-write) and your descendants' workspaces (read-only)",
                self.write.display()
            ));
        };
        let writable = root == self.write;
        if intent == Intent::Write && !writable {
            return Err(format!(
                "`{input}` is in a descendant's workspace (`{}`), which you may read but not \
                 change: you write only in your own workspace `{}`",
                root.display(),
                self.write.display()
            ));
        }
        let rel = path
            .strip_prefix(&root)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(Resolved {
            path,
            root,
            rel,
            exists,
        })
    }
}

/// Open (optionally create) `root`, which must lie beneath `base` (its lexical and real path),
/// with no symlink on the way; returns its canonical path, or None when it is absent and not
/// created.
fn root_beneath(
    (base, real_base): &(PathBuf, PathBuf),
    root: &Path,
    create: bool,
    owner: Option<(u32, u32)>,
) -> Result<Option<PathBuf>, String> {
    let rel = lexical(root)
        .strip_prefix(base)
        .map(Path::to_path_buf)
        .map_err(|_| {
            format!(
                "the workspace `{}` is outside the workspace root `{}`",
                root.display(),
                base.display()
            )
        })?;
    let refused = |e: io::Error| {
        if e.raw_os_error() == Some(rustix::io::Errno::NOSYS.raw_os_error()) {
            NO_OPENAT2.to_string()
        } else if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            format!(
                "the workspace `{}` is reached through a symbolic link, which is refused",
                root.display()
            )
        } else {
            format!("cannot open the workspace `{}`: {e}", root.display())
        }
    };
    let mut dir = open_dir(CWD, real_base).map_err(refused)?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            continue;
        };
        dir = match open_dir(&dir, Path::new(name)) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(refused(e.into())),
                }
                let d = open_dir(&dir, Path::new(name)).map_err(refused)?;
                chown(&d, owner).map_err(refused)?;
                d
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(refused(e)),
        };
    }
    Ok(Some(real_base.join(rel)))
}

/// A directory handle beneath `dir` (for `*at` calls and `fsync`).
fn open_dir<Fd: std::os::fd::AsFd>(dir: Fd, path: &Path) -> io::Result<OwnedFd> {
    let flags = if path.is_absolute() {
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
    } else {
        beneath()
    };
    Ok(rustix::fs::openat2(
        dir,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        flags,
    )?)
}

/// `path` with `.` and `..` applied lexically (for configured roots, which are trusted).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Resolve `path` physically: every existing prefix through `realpath` (symlinks, `..` after a
/// symlink, magic links), then the part that does not exist yet appended (its `..` applied to the
/// names being created). Returns the path and whether it exists. A dangling symlink is refused: what
/// it would create could not be checked.
fn physical(path: &Path) -> io::Result<(PathBuf, bool)> {
    let mut cur = PathBuf::from("/");
    let mut exists = true;
    for c in path.components() {
        match c {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                cur.pop();
            }
            Component::Normal(name) => {
                cur.push(name);
                if exists {
                    match std::fs::canonicalize(&cur) {
                        Ok(real) => cur = real,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            if std::fs::symlink_metadata(&cur).is_ok() {
                                return Err(io::Error::other(format!(
                                    "`{}` is a symbolic link to a missing target",
                                    cur.display()
                                )));
                            }
                            exists = false;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
    Ok((cur, exists))
}

/// A checked path: canonical, inside `root`.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The canonical absolute path.
    pub path: PathBuf,
    /// The allowed root it lies in.
    pub root: PathBuf,
    /// The path relative to `root` (empty for the root itself).
    pub rel: PathBuf,
    /// Whether it existed when resolved.
    pub exists: bool,
}

impl Resolved {
    /// `rel`, or `.` for the root itself.
    fn rel_or_dot(&self) -> &Path {
        if self.rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.rel
        }
    }

    /// The root's directory handle.
    pub fn root_dir(&self) -> io::Result<OwnedFd> {
        open_dir(CWD, &self.root)
    }

    /// Open the path for reading beneath its root. Non-blocking, so a FIFO cannot hang the call
    /// (its type is refused after the open).
    pub fn open_read(&self) -> io::Result<File> {
        let fd = rustix::fs::openat2(
            self.root_dir()?,
            self.rel_or_dot(),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
            Mode::empty(),
            beneath(),
        )?;
        Ok(File::from(fd))
    }

    /// The file name and a handle on its directory, for an atomic replace. With `create`, missing
    /// directories are made (owned by `owner`).
    pub fn parent_dir(
        &self,
        create: bool,
        owner: Option<(u32, u32)>,
    ) -> io::Result<(OwnedFd, OsString)> {
        let name = self
            .rel
            .file_name()
            .ok_or_else(|| io::Error::other("the path names a directory, not a file"))?
            .to_os_string();
        let mut dir = self.root_dir()?;
        if let Some(parent) = self.rel.parent() {
            for part in parent.components() {
                let Component::Normal(part) = part else {
                    continue;
                };
                dir = match open_dir(&dir, Path::new(part)) {
                    Ok(d) => d,
                    Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                        match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o755)) {
                            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                            Err(e) => return Err(e.into()),
                        }
                        let d = open_dir(&dir, Path::new(part))?;
                        chown(&d, owner)?;
                        d
                    }
                    Err(e) => return Err(e),
                };
            }
        }
        Ok((dir, name))
    }
}

/// Open `rel` (relative to the root whose handle is `root`) for reading, beneath it (Grep).
pub fn open_beneath(root: &OwnedFd, rel: &Path) -> io::Result<File> {
    let fd = rustix::fs::openat2(
        root,
        rel,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
        beneath(),
    )?;
    Ok(File::from(fd))
}

/// Open a root directory by its canonical path (Grep's walk opens files beneath it).
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    open_dir(CWD, root)
}

/// Hand a created file or directory to the sandbox's user, so Bash can change it.
pub fn chown<Fd: std::os::fd::AsFd>(fd: Fd, owner: Option<(u32, u32)>) -> io::Result<()> {
    if let Some((uid, gid)) = owner {
        rustix::fs::fchown(
            fd,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        )?;
    }
    Ok(())
}

/// Why a file may not be read, if it may not: not a regular file, or hard-linked.
pub fn check_regular(file: &File, shown: &str) -> Result<rustix::fs::Stat, String> {
    let stat = rustix::fs::fstat(file).map_err(|e| format!("cannot stat `{shown}`: {e}"))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => {
            return Err(format!(
                "`{shown}` is a directory: use Glob to list it, or Read a file in it"
            ));
        }
        _ => return Err(format!("`{shown}` is not a regular file")),
    }
    if stat.st_nlink > 1 {
        return Err(format!(
            "`{shown}` has {} hard links and is refused: a hard link can point to a file outside \
             your workspace, which the file tools never read or change",
            stat.st_nlink
        ));
    }
    Ok(stat)
}

/// Why every open fails on a kernel without `openat2`.
const NO_OPENAT2: &str = "the file tools need the openat2 system call (Linux 5.6 or later), which \
                          this kernel (or a seccomp filter around OPC) does not offer";

/// A readable message for an open that failed beneath a root.
pub fn open_error(e: &io::Error, shown: &str) -> String {
    match e.raw_os_error() {
        Some(code) if code == rustix::io::Errno::NOSYS.raw_os_error() => NO_OPENAT2.to_string(),
        Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => format!(
            "`{shown}` is reached through a symbolic link that appeared after it was checked; \
             refused"
        ),
        Some(code) if code == rustix::io::Errno::XDEV.raw_os_error() => {
            format!("`{shown}` leads outside its root; refused")
        }
        _ if e.kind() == io::ErrorKind::NotFound => format!("`{shown}` does not exist"),
        _ => format!("cannot open `{shown}`: {e}"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        base: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let base = top.join("ws");
        let outside = top.join("outside");
        std::fs::create_dir_all(base.join("team")).unwrap();
        std::fs::create_dir_all(base.join("sibling")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s3cret").unwrap();
        std::fs::write(base.join("team/report.txt"), "team").unwrap();
        std::fs::write(base.join("sibling/notes"), "x").unwrap();
        Fixture {
            _dir: dir,
            base,
            outside,
        }
    }

    fn roots(f: &Fixture) -> Roots {
        let access = Access {
            write: f.base.join("me"),
            read: vec![f.base.join("team"), f.base.join("missing")],
        };
        Roots::open(&f.base, &access, None).unwrap()
    }

    #[test]
    fn the_workspace_is_created_on_first_use() {
        let f = fixture();
        let r = roots(&f);
        assert!(f.base.join("me").is_dir());
        assert_eq!(r.workspace(), f.base.join("me"));
        assert_eq!(r.read, [f.base.join("team")]);
    }

    #[test]
    fn relative_and_absolute_paths_inside_resolve() {
        let f = fixture();
        let r = roots(&f);
        let a = r.resolve("src/lib.rs", Intent::Write).unwrap();
        assert_eq!(a.path, f.base.join("me/src/lib.rs"));
        assert!(!a.exists);
        let abs = f.base.join("me/x.txt");
        let b = r.resolve(abs.to_str().unwrap(), Intent::Write).unwrap();
        assert_eq!(b.rel, Path::new("x.txt"));
        assert_eq!(r.display(&b.path), "x.txt");
        // `..` that stays inside is fine.
        let c = r.resolve("src/../y", Intent::Write).unwrap();
        assert_eq!(c.path, f.base.join("me/y"));
    }

    #[test]
    fn dot_dot_and_absolute_paths_outside_are_refused() {
        let f = fixture();
        let r = roots(&f);
        for input in [
            "../sibling/notes".to_string(),
            "../../outside/secret".to_string(),
            "/etc/passwd".to_string(),
            f.outside.join("secret").display().to_string(),
            "/proc/self/root/etc/passwd".to_string(),
            format!("/proc/self/root{}", f.outside.join("secret").display()),
        ] {
            let err = r.resolve(&input, Intent::Read).unwrap_err();
            assert!(
                err.contains("outside your workspace and your team's"),
                "{err}"
            );
        }
    }

    #[test]
    fn symlinks_out_are_refused_and_symlinks_in_are_followed() {
        let f = fixture();
        let r = roots(&f);
        let me = f.base.join("me");
        symlink(f.outside.join("secret"), me.join("file-out")).unwrap();
        symlink(&f.outside, me.join("dir-out")).unwrap();
        symlink("/proc/self/root", me.join("magic")).unwrap();
        symlink(f.outside.join("nothing"), me.join("dangling")).unwrap();
        for input in [
            "file-out",
            "dir-out/secret",
            "dir-out/new-file",
            "magic/etc/passwd",
        ] {
            let err = r.resolve(input, Intent::Read).unwrap_err();
            assert!(err.contains("outside"), "{input}: {err}");
        }
        let err = r.resolve("dangling", Intent::Write).unwrap_err();
        assert!(err.contains("missing target"), "{err}");
        std::fs::write(me.join("real"), "in").unwrap();
        symlink("real", me.join("alias")).unwrap();
        let ok = r.resolve("alias", Intent::Read).unwrap();
        assert_eq!(ok.path, me.join("real"));
    }

    #[test]
    fn descendants_are_read_only_and_siblings_unreachable() {
        let f = fixture();
        let r = roots(&f);
        let report = f.base.join("team/report.txt");
        let ok = r.resolve(report.to_str().unwrap(), Intent::Read).unwrap();
        assert_eq!(ok.root, f.base.join("team"));
        let err = r
            .resolve(report.to_str().unwrap(), Intent::Write)
            .unwrap_err();
        assert!(err.contains("may read but not change"), "{err}");
        let err = r.resolve("../team/new", Intent::Write).unwrap_err();
        assert!(err.contains("descendant"), "{err}");
        let err = r.resolve("../sibling/notes", Intent::Read).unwrap_err();
        assert!(err.contains("outside"), "{err}");
    }

    #[test]
    fn a_descendant_nested_in_the_workspace_stays_read_only() {
        let f = fixture();
        std::fs::create_dir_all(f.base.join("me/sub")).unwrap();
        let access = Access {
            write: f.base.join("me"),
            read: vec![f.base.join("me/sub")],
        };
        let r = Roots::open(&f.base, &access, None).unwrap();
        let err = r.resolve("sub/x", Intent::Write).unwrap_err();
        assert!(err.contains("descendant"), "{err}");
        assert!(r.resolve("sub/x", Intent::Read).is_ok());
        assert!(r.resolve("other/x", Intent::Write).is_ok());
    }

    #[test]
    fn a_workspace_root_behind_a_symlink_is_the_admins_choice() {
        let f = fixture();
        let alias = f.base.parent().unwrap().join("alias");
        symlink(&f.base, &alias).unwrap();
        let access = Access {
            write: alias.join("me"),
            read: vec![alias.join("team")],
        };
        let r = Roots::open(&alias, &access, None).unwrap();
        assert_eq!(r.workspace(), f.base.join("me"));
        let ok = r.resolve(
            alias.join("team/report.txt").to_str().unwrap(),
            Intent::Read,
        );
        assert_eq!(ok.unwrap().path, f.base.join("team/report.txt"));
    }

    #[test]
    fn a_workspace_that_is_a_symlink_is_refused() {
        let f = fixture();
        symlink(&f.outside, f.base.join("me")).unwrap();
        let access = Access {
            write: f.base.join("me"),
            read: vec![],
        };
        let err = Roots::open(&f.base, &access, None).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
    }

    #[test]
    fn a_symlink_swapped_in_after_the_check_is_refused_by_the_kernel() {
        let f = fixture();
        let r = roots(&f);
        let me = f.base.join("me");
        std::fs::create_dir(me.join("d")).unwrap();
        std::fs::write(me.join("d/file"), "in").unwrap();
        let checked = r.resolve("d/file", Intent::Read).unwrap();
        // Swap the directory for a symlink out between check and open.
        std::fs::remove_dir_all(me.join("d")).unwrap();
        symlink(&f.outside, me.join("d")).unwrap();
        std::fs::write(f.outside.join("file"), "out").unwrap();
        let err = checked.open_read().unwrap_err();
        assert!(
            open_error(&err, "d/file").contains("symbolic link"),
            "{err}"
        );
    }

    #[test]
    fn hard_links_are_refused() {
        let f = fixture();
        let r = roots(&f);
        let me = f.base.join("me");
        std::fs::hard_link(f.outside.join("secret"), me.join("linked")).unwrap();
        let resolved = r.resolve("linked", Intent::Read).unwrap();
        let file = resolved.open_read().unwrap();
        let err = check_regular(&file, "linked").unwrap_err();
        assert!(err.contains("hard links"), "{err}");
    }
}
