//! Where the file tools may reach, and how a path is opened there without escaping.
//!
//! An agent reads and writes its own workspace and reads (never writes) its descendants'
//! workspaces; nothing else. A path from the model is relative to the workspace, or starts with
//! `/workspace` (the workspace as the agent's Bash sees it, in its own mount namespace), or is a host
//! path inside an allowed root. It is resolved physically, one component at a time, as the kernel
//! would (`..` after a symlink goes to the link target's parent), and the result must lie inside an
//! allowed root; the most specific root decides, so a descendant's workspace nested in the agent's
//! own stays read-only.
//!
//! The resolution never looks outside the roots. It only descends through the roots' own ancestors
//! (which exist, as directories, on the way to a root) and through the roots; the first step that
//! would leave them ends it with one answer, "outside your workspace", whatever lies there: a file,
//! a directory, a symlink, nothing, or a path OPC (often root) could read and the sandbox could not.
//! So no answer says whether an outside path exists or where a symlink points (a probe found the
//! old answers — "it resolves to `/…`", "a symbolic link to a missing target" — to be oracles on
//! paths the sandbox cannot see). Messages show paths relative to the workspace, through
//! [`show`](super::show), and call the workspace "your workspace" (`/workspace`), never its host path.
//!
//! Checking a path and then opening it by name would race: a symlink swapped in between (by Bash
//! in the same workspace, or by another agent sharing it) could redirect the open. So nothing is
//! opened by its absolute name. The root is opened as a directory handle and the checked, canonical
//! relative path is opened beneath it with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`: the kernel itself refuses any symlink or `..` that appears after the
//! check. We chose `rustix::fs::openat2` over `cap-std` because the canonical path has no symlinks
//! at all, so "no symlinks, beneath this fd" is the exact rule, one syscall, with no emulation layer;
//! `rustix` is already in the dependency tree. Every open for reading is also `O_NONBLOCK` and
//! `O_NOCTTY`, so a FIFO or a terminal cannot hang or adopt the call, and what is read must be a
//! regular file (checked on the open handle).
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
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, ResolveFlags};

use super::show;

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

/// Where the agent's Bash sees its own workspace (its private mount namespace); the file tools
/// accept paths under it as paths in the workspace.
pub const SANDBOX_WORKSPACE: &str = "/workspace";

/// Symbolic links followed in one resolution at most (the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// The kernel flags every open beneath a root uses.
fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// The flags of every open for reading: a FIFO opens without waiting for a writer (and is then
/// refused as not a regular file), and a terminal never becomes OPC's controlling one.
fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK
}

/// The allowed roots of one call, resolved (canonical, symlink-free).
#[derive(Debug)]
pub struct Roots {
    /// The agent's workspace.
    write: PathBuf,
    /// The descendants' workspaces that exist.
    read: Vec<PathBuf>,
    /// The configured (lexical) paths of the roots that differ from their canonical ones (the
    /// workspace root behind an admin's symlink), and those canonical paths: a host path the model
    /// got from the config is still understood.
    aliases: Vec<(PathBuf, PathBuf)>,
    /// Where the agent's Bash sees each descendant's workspace (`/team/<name>`, or its place under
    /// `/workspace` when nested): the same names, from the same function, as the sandbox mounts.
    team: Vec<opc_sandbox::layout::Shared>,
}

/// Where a path stands relative to the roots, during a resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    /// In a root.
    Inside,
    /// On the way to a root (one of its ancestors).
    Above,
    /// Anywhere else.
    Outside,
}

/// Why a resolution stopped.
enum Stop {
    /// It would leave the roots: nothing more may be said.
    Outside,
    /// It failed inside a root (that much may be said).
    Failed(io::Error),
}

impl Roots {
    /// Resolve `access` beneath the configured workspace root `base`: the agent's own workspace is
    /// created on first use (owned by `owner`, the sandbox's user, when set); descendants'
    /// workspaces that do not exist yet are skipped (there is nothing to read). A root reached
    /// through a symlink is refused. Errors name the workspace by its place under `base`, not its
    /// host path (they reach the model); the host path goes to the log.
    pub fn open(base: &Path, access: &Access, owner: Option<(u32, u32)>) -> Result<Roots, String> {
        let host = |what: &str, e: &dyn std::fmt::Display| {
            tracing::warn!(path = %base.display(), error = %e, "file tools: cannot {what} the workspace root");
            format!("cannot {what} the root of the org's workspaces: {e}")
        };
        std::fs::create_dir_all(base).map_err(|e| host("create", &e))?;
        // The configured paths are lexical; the root is opened by its real path (the config's
        // directory may itself sit behind a symlink, which is the admin's choice, not an agent's).
        let real = std::fs::canonicalize(base).map_err(|e| host("open", &e))?;
        let base = (lexical(base), real);
        let write = root_beneath(&base, &access.write, true, owner)?
            .ok_or_else(|| "cannot create your workspace".to_string())?;
        let mut aliases = Vec::new();
        if lexical(&access.write) != write {
            aliases.push((lexical(&access.write), write.clone()));
        }
        let mut read = Vec::new();
        for root in &access.read {
            if let Some(r) = root_beneath(&base, root, false, None)?
                && r != write
                && !read.contains(&r)
            {
                if lexical(root) != r {
                    aliases.push((lexical(root), r.clone()));
                }
                read.push(r);
            }
        }
        let team = opc_sandbox::layout::shared(&write, &read);
        Ok(Roots {
            write,
            read,
            aliases,
            team,
        })
    }

    /// The agent's own workspace (canonical).
    #[cfg(test)]
    pub fn workspace(&self) -> &Path {
        &self.write
    }

    /// How a path inside the roots is shown to the model: relative to the workspace (`.` for the
    /// workspace itself), or, in a descendant's workspace beside it, where Bash sees it
    /// (`/team/<name>/…`, which the file tools take back), escaped by [`show::path`]. Never a
    /// workspace's host path.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.write) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => show::path(rel),
            Err(_) => match self.team.iter().find_map(|t| {
                let rel = path.strip_prefix(&t.host).ok()?;
                Some(if rel.as_os_str().is_empty() {
                    t.inside.clone()
                } else {
                    t.inside.join(rel)
                })
            }) {
                Some(inside) => show::path(&inside),
                None => show::path(&relative(&self.write, path)),
            },
        }
    }

    /// Where `path` stands relative to the roots.
    fn position(&self, path: &Path) -> Position {
        let roots = || std::iter::once(&self.write).chain(&self.read);
        if roots().any(|r| path.starts_with(r)) {
            Position::Inside
        } else if roots().any(|r| r.starts_with(path)) {
            Position::Above
        } else {
            Position::Outside
        }
    }

    /// The model's `input` as an absolute path to resolve: relative to the workspace; under
    /// `/workspace`, in the workspace; a configured root's host path (canonical or as configured),
    /// as it is.
    fn absolute(&self, input: &str) -> PathBuf {
        let given = Path::new(input);
        if !given.is_absolute() {
            return self.write.join(given);
        }
        let mut roots = std::iter::once(&self.write).chain(&self.read);
        if roots.any(|r| given.starts_with(r)) {
            return given.to_path_buf();
        }
        for (alias, real) in &self.aliases {
            if let Ok(rest) = given.strip_prefix(alias) {
                return real.join(rest);
            }
        }
        for t in &self.team {
            if !t.inside.starts_with(SANDBOX_WORKSPACE)
                && let Ok(rest) = given.strip_prefix(&t.inside)
            {
                return t.host.join(rest);
            }
        }
        match given.strip_prefix(SANDBOX_WORKSPACE) {
            Ok(rest) => self.write.join(rest),
            Err(_) => given.to_path_buf(),
        }
    }

    /// The message for a path outside every root: the same for every such path, whether it
    /// exists or not.
    fn outside(input: &str) -> String {
        format!(
            "`{}` is outside your workspace and your team's: the file tools reach only your \
             workspace (`{SANDBOX_WORKSPACE}`; relative paths start there), read-write, and your \
             descendants' workspaces, read-only",
            show::text(input)
        )
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
        let (path, exists) = match self.physical(&self.absolute(input)) {
            Ok(found) => found,
            Err(Stop::Outside) => return Err(Roots::outside(input)),
            Err(Stop::Failed(e)) => {
                return Err(format!("cannot resolve `{}`: {e}", show::text(input)));
            }
        };
        let root = std::iter::once(&self.write)
            .chain(&self.read)
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.components().count())
            .cloned();
        let Some(root) = root else {
            return Err(Roots::outside(input));
        };
        let writable = root == self.write;
        if intent == Intent::Write && !writable {
            return Err(format!(
                "`{}` is in a descendant's workspace (`{}`), which you may read but not change: \
                 you write only in your own workspace (`{SANDBOX_WORKSPACE}`)",
                show::text(input),
                self.display(&root)
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

    /// Resolve the absolute `path` physically, as the kernel would: each existing component
    /// through `lstat`, symlinks followed (their targets resolved the same way, at most
    /// [`MAX_LINKS`]), `..` after a symlink taken from the target; the part that does not exist yet
    /// appended (its `..` applied to the names being created). Returns the path and whether it
    /// exists.
    ///
    /// It never steps outside the roots and their ancestors: the step that would is the end, as
    /// [`Stop::Outside`], before anything there is looked at, and a failure anywhere but inside a
    /// root is [`Stop::Outside`] too. What lies outside can therefore not change the answer.
    ///
    /// Each component is looked at through the handle of the directory it is in (`O_PATH`, opened
    /// one component at a time with no symlinks), not by its absolute name: a directory already
    /// passed that is swapped for a symlink cannot turn a later `lstat` or `readlink` into a look
    /// outside.
    fn physical(&self, path: &Path) -> Result<(PathBuf, bool), Stop> {
        // The components still to walk, the next one last.
        let mut pending: Vec<OsString> = Vec::new();
        let push = |pending: &mut Vec<OsString>, path: &Path| {
            for c in path.components().rev() {
                pending.push(c.as_os_str().to_os_string());
            }
        };
        push(&mut pending, path);
        let slash = || {
            rustix::fs::open(
                "/",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|_| Stop::Outside)
        };
        let mut cur = PathBuf::from("/");
        // The handles of `/` and of each existing directory of `cur` below it.
        let mut dirs: Vec<OwnedFd> = vec![slash()?];
        // Components of `cur` that do not exist (all after the first missing one).
        let mut missing = 0usize;
        let mut links = 0;
        let fail = |cur: &Path, e: io::Error| {
            if self.position(cur) == Position::Inside {
                Stop::Failed(e)
            } else {
                Stop::Outside
            }
        };
        while let Some(part) = pending.pop() {
            match part.to_str() {
                Some("/") => {
                    cur = PathBuf::from("/");
                    dirs.truncate(1);
                    missing = 0;
                }
                Some(".") => {}
                Some("..") => {
                    if missing > 0 {
                        missing -= 1;
                    } else if dirs.len() > 1 {
                        dirs.pop();
                    }
                    cur.pop();
                }
                _ => {
                    let next = cur.join(&part);
                    if self.position(&next) == Position::Outside {
                        return Err(Stop::Outside);
                    }
                    if missing > 0 {
                        cur = next;
                        missing += 1;
                        continue;
                    }
                    let Some(dir) = dirs.last() else {
                        return Err(Stop::Outside);
                    };
                    let kind = rustix::fs::statat(dir, part.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .map(|s| FileType::from_raw_mode(s.st_mode));
                    match kind {
                        Ok(FileType::Symlink) => {
                            links += 1;
                            if links > MAX_LINKS {
                                return Err(fail(
                                    &cur,
                                    io::Error::other("too many levels of symbolic links"),
                                ));
                            }
                            let target = rustix::fs::readlinkat(dir, part.as_os_str(), Vec::new())
                                .map_err(|e| fail(&cur, e.into()))?;
                            push(
                                &mut pending,
                                Path::new(std::ffi::OsStr::from_bytes(target.as_bytes())),
                            );
                        }
                        Ok(FileType::Directory) => {
                            let handle = rustix::fs::openat2(
                                dir,
                                part.as_os_str(),
                                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                                Mode::empty(),
                                beneath(),
                            )
                            .map_err(|e| fail(&next, e.into()))?;
                            dirs.push(handle);
                            cur = next;
                        }
                        Ok(_) => {
                            if !pending.is_empty() {
                                return Err(fail(
                                    &next,
                                    io::Error::other(format!(
                                        "`{}` is not a directory",
                                        self.display(&next)
                                    )),
                                ));
                            }
                            cur = next;
                        }
                        Err(rustix::io::Errno::NOENT) => {
                            missing = 1;
                            cur = next;
                        }
                        Err(e) => return Err(fail(&next, e.into())),
                    }
                }
            }
        }
        Ok((cur, missing == 0))
    }
}

/// `to` relative to `from` (both absolute, lexical): `..` for each component of `from` past their
/// common prefix, then the rest of `to`.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for c in &to[common..] {
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Open (optionally create) `root`, which must lie beneath `base` (its lexical and real path),
/// with no symlink on the way; returns its canonical path, or None when it is absent and not
/// created. Errors name the workspace by its path under `base` (they reach the model).
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
            tracing::warn!(workspace = %root.display(), root = %base.display(), "file tools: a workspace outside the workspace root");
            "a workspace is configured outside the root of the org's workspaces".to_string()
        })?;
    let name = show::path(&rel);
    let refused = |e: io::Error| {
        if e.raw_os_error() == Some(rustix::io::Errno::NOSYS.raw_os_error()) {
            NO_OPENAT2.to_string()
        } else if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            format!("the workspace `{name}` is reached through a symbolic link, which is refused")
        } else {
            format!("cannot open the workspace `{name}`: {e}")
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
            read_flags(),
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

/// Open the directory `rel` beneath the directory handle `dir` (no symlinks, no `..` out): how the
/// walk of Glob and Grep descends.
pub fn open_dir_beneath<Fd: AsFd>(dir: Fd, rel: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat2(
        dir,
        rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        beneath(),
    )?)
}

/// Open `rel` beneath the directory handle `dir` for reading — no symlinks, no `..` out,
/// non-blocking, no controlling terminal — and require a regular file: anything else (a FIFO, a
/// device, a socket, a directory) is an error of kind `InvalidInput`, and nothing was read from
/// it. The link count is the caller's to judge (from the returned metadata).
pub fn open_file_beneath<Fd: AsFd>(dir: Fd, rel: &Path) -> io::Result<(File, rustix::fs::Stat)> {
    let fd = rustix::fs::openat2(dir, rel, read_flags(), Mode::empty(), beneath())?;
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((File::from(fd), stat))
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
        assert!(err.contains("outside your workspace"), "{err}");
        std::fs::write(me.join("real"), "in").unwrap();
        symlink("real", me.join("alias")).unwrap();
        let ok = r.resolve("alias", Intent::Read).unwrap();
        assert_eq!(ok.path, me.join("real"));
        // A dangling link inside names what it would create, inside.
        symlink("sub/new", me.join("inside-dangling")).unwrap();
        let ok = r.resolve("inside-dangling", Intent::Write).unwrap();
        assert_eq!((ok.path, ok.exists), (me.join("sub/new"), false));
        // `..` after a link is taken from the link's target, as the kernel does.
        std::fs::create_dir_all(me.join("deep/er")).unwrap();
        symlink("deep/er", me.join("to-er")).unwrap();
        let ok = r.resolve("to-er/../x", Intent::Write).unwrap();
        assert_eq!(ok.path, me.join("deep/x"));
    }

    #[test]
    fn nothing_is_said_about_what_lies_outside() {
        let f = fixture();
        let r = roots(&f);
        let me = f.base.join("me");
        let top = f.outside.parent().unwrap();
        std::fs::create_dir(f.outside.join("dir")).unwrap();
        // The same answer for an outside target that exists (file or directory), that does not,
        // and for a path through an outside file or directory that comes back in.
        let cases = [
            ("exists", f.outside.join("secret")),
            ("dir", f.outside.join("dir")),
            ("missing", f.outside.join("nothing")),
            ("missing-dir", f.outside.join("nothing/deeper")),
            ("root-only", PathBuf::from("/root/.bash_history")),
        ];
        let mut answers = Vec::new();
        for (name, target) in &cases {
            symlink(target, me.join(name)).unwrap();
            let err = r.resolve(name, Intent::Read).unwrap_err();
            answers.push(err.replace(name, "NAME"));
        }
        for back in [
            "secret/../../ws/me/x",
            "dir/../../ws/me/x",
            "nothing/../../ws/me/x",
        ] {
            let input = f.outside.join(back).display().to_string();
            let err = r.resolve(&input, Intent::Read).unwrap_err();
            answers.push(err.replace(&input, "NAME"));
        }
        for answer in &answers {
            assert_eq!(answer, &answers[0]);
            assert!(answer.contains("outside your workspace"), "{answer}");
            assert!(!answer.contains(&top.display().to_string()), "{answer}");
            assert!(
                !answer.contains("resolves") && !answer.contains("missing"),
                "{answer}"
            );
        }
    }

    #[test]
    fn sandbox_paths_name_the_workspace_and_messages_never_its_host_path() {
        let f = fixture();
        let r = roots(&f);
        let me = f.base.join("me");
        std::fs::create_dir_all(me.join("src")).unwrap();
        std::fs::write(me.join("src/a.rs"), "fn a() {}").unwrap();
        let ok = r.resolve("/workspace/src/a.rs", Intent::Write).unwrap();
        assert_eq!(
            (ok.path.as_path(), ok.exists),
            (me.join("src/a.rs").as_path(), true)
        );
        assert_eq!(r.display(&ok.path), "src/a.rs");
        assert_eq!(r.resolve("/workspace", Intent::Read).unwrap().path, me);
        let err = r
            .resolve("/workspace/../etc/passwd", Intent::Read)
            .unwrap_err();
        assert!(err.contains("outside your workspace"), "{err}");
        // A descendant's file is shown where Bash sees it, and that path resolves back.
        let team = f.base.join("team/report.txt");
        let shown = r.display(&team);
        assert_eq!(shown, "/team/team/report.txt");
        assert_eq!(r.resolve(&shown, Intent::Read).unwrap().path, team);
        let err = r
            .resolve(team.to_str().unwrap(), Intent::Write)
            .unwrap_err();
        assert!(err.contains("(`/team/team`)"), "{err}");
        // No message names the host path.
        let host = f.base.display().to_string();
        for input in ["/etc/passwd", "../sibling/notes", "/workspace/../x"] {
            let err = r.resolve(input, Intent::Read).unwrap_err();
            assert!(!err.contains(&host), "{err}");
        }
        std::fs::write(me.join("file"), "x").unwrap();
        let err = r.resolve("file/x", Intent::Read).unwrap_err();
        assert!(
            err.contains("not a directory") && !err.contains(&host),
            "{err}"
        );
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

    /// A descendant's workspace is where the agent's Bash sees it, `/team/<name>`, both ways.
    #[test]
    fn team_paths_are_the_sandbox_s() {
        let f = fixture();
        let r = roots(&f);
        let ok = r.resolve("/team/team/report.txt", Intent::Read).unwrap();
        assert_eq!(ok.path, f.base.join("team/report.txt"));
        assert_eq!(r.display(&ok.path), "/team/team/report.txt");
        let err = r
            .resolve("/team/team/report.txt", Intent::Write)
            .unwrap_err();
        assert!(err.contains("may read but not change"), "{err}");
        let err = r.resolve("/team/sibling/notes", Intent::Read).unwrap_err();
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
