//! The directory walk that Glob and Grep share: ripgrep's rules, over directory handles.
//!
//! Why not `ignore::WalkBuilder`, which this replaced: it opens `.gitignore` and `.ignore` files by
//! name, as OPC (often root), so an agent could plant one as a symlink to `/dev/zero` (read to the
//! end: OPC was OOM-killed with every conversation), as a FIFO (the call hung, and its thread
//! leaked), or as a symlink to a file only root may read (which entries it hid told the agent the
//! file's lines). And it lists each directory by its absolute path, so a directory swapped for a
//! symlink during the walk would be listed wherever the link points.
//!
//! Here nothing is opened by name from `/`. The search path is opened beneath its root's handle,
//! each directory beneath its parent's handle, and listed through its own handle; every file the
//! walk reads (an ignore file) or hands out ([`Entry::open`]) is opened beneath the handle of the
//! directory it was listed in — all with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`, non-blocking, and checked to be a regular file on the open handle. A
//! directory swapped for a symlink mid-walk is refused by the kernel, not followed.
//!
//! The rules are ripgrep's defaults, as `ignore` applies them with `require_git(false)`:
//! - `.gitignore`, `.ignore` and `.rgignore` in every directory from the root the search path lies
//!   in down to each entry's, and `.git/info/exclude` of a directory holding `.git`, apply with
//!   gitignore semantics: in each kind of file the deepest directory with a matching line decides,
//!   its last matching line wins, and `!` re-includes; between kinds `.rgignore` beats `.ignore`,
//!   which beats `.gitignore`, which beats `exclude`. `.gitignore` and `exclude` files above the
//!   nearest directory holding `.git` do not apply (git's repository boundary). Ignore files above
//!   the root never apply: the workspace usually sits inside OPC's own directory, whose
//!   `.gitignore` (or the user's global one) must not hide the agent's files or say anything about
//!   them.
//! - An ignore file is read only when it is a regular file with one link and at most
//!   [`MAX_IGNORE_FILE_BYTES`]; a larger one is not applied at all (not truncated: half a file's
//!   rules would hide half of what it meant to). Lines that are not UTF-8 or not valid globs are
//!   skipped, as `ignore` does.
//! - Hidden entries (a name starting with `.`) are skipped unless a rule re-includes them (name a
//!   hidden directory as the search path to search it).
//! - Symlinks are never followed, listed or searched; nor are FIFOs, sockets and devices. Only
//!   directories are entered and only regular files are handed to the visitor.
//! - Overrides (Grep's `glob`) come first, as in `ignore`: a matching glob includes a file whatever
//!   the ignore files say; a file that matches none is skipped.
//!
//! The walk is parallel (a shared stack of directories and batches of files, LIFO so the open
//! handles stay few: a pending entry holds its parent's handle, shared). The search path itself is never
//! filtered: naming an ignored or hidden directory searches it.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use rustix::fs::{AtFlags, FileType};

use super::access::{Resolved, open_dir_beneath, open_file_beneath};

/// The largest ignore file applied; a larger one is not read.
pub const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;

/// What the visitor tells the walk after a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop the whole walk.
    Quit,
}

/// A regular file the walk found, with the handle of the directory it was listed in.
pub struct Entry<'a> {
    dir: BorrowedFd<'a>,
    name: &'a OsStr,
    path: PathBuf,
}

impl Entry<'_> {
    /// Its path: the root's canonical path joined with the names the walk listed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its path, owned.
    pub fn into_path(self) -> PathBuf {
        self.path
    }

    /// Open it for reading beneath its directory's handle (see the module doc); it must still be a
    /// regular file. The link count is the caller's to judge.
    pub fn open(&self) -> io::Result<(File, rustix::fs::Stat)> {
        open_file_beneath(self.dir, Path::new(self.name))
    }

    /// Its metadata (of the entry itself, never a link's target).
    pub fn stat(&self) -> io::Result<rustix::fs::Stat> {
        Ok(rustix::fs::statat(
            self.dir,
            self.name,
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }
}

/// A walk over a search path inside one root.
pub struct Walk {
    /// The root's handle, opened by its canonical path (no symlinks on the way).
    root_fd: OwnedFd,
    /// The root's canonical path (every entry's path starts with it).
    root: PathBuf,
    /// The search path relative to the root (empty for the root).
    start: PathBuf,
    /// Grep's `glob`, matched before the ignore files.
    overrides: Option<Override>,
    /// Worker threads.
    threads: usize,
}

impl Walk {
    /// The walk over `search` (resolved, inside its root); the error is about opening the root.
    pub fn new(search: &Resolved) -> io::Result<Walk> {
        Ok(Walk {
            root_fd: search.root_dir()?,
            root: search.root.clone(),
            start: search.rel.clone(),
            overrides: None,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
        })
    }

    /// Apply `overrides` (Grep's `glob`; its root is the search path).
    pub fn overrides(&mut self, overrides: Override) {
        self.overrides = Some(overrides);
    }

    /// Walk, calling a visitor on every regular file that the rules keep; each worker thread makes
    /// its own visitor with `make` (Grep's searcher is per thread). The error is about opening the
    /// search path itself; everything below it that cannot be opened is passed over.
    pub fn run<M, V>(&self, make: M) -> io::Result<()>
    where
        M: Fn() -> V + Sync,
        V: FnMut(Entry<'_>) -> Flow,
    {
        // Down to the search path's parent, collecting the ancestors' rules.
        let mut rules: Option<Arc<Rules>> = None;
        let mut dir = open_dir_beneath(&self.root_fd, Path::new("."))?;
        let mut path = self.root.clone();
        let names: Vec<&OsStr> = self
            .start
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        let Some((last, parents)) = names.split_last() else {
            self.walk(Work::Start { dir, path, rules }, make);
            return Ok(());
        };
        for name in parents {
            rules = Rules::load(rules, &dir, &path, &Present::probe(&dir));
            dir = open_dir_beneath(&dir, Path::new(name))?;
            path.push(name);
        }
        // The search path: a directory is walked, a regular file is visited as it is (a FIFO,
        // a socket or a device is not even opened).
        let handle = match open_dir_beneath(&dir, Path::new(last)) {
            Ok(handle) => handle,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => {
                let entry = Entry {
                    dir: dir.as_fd(),
                    name: last,
                    path: path.join(last),
                };
                let regular = entry
                    .stat()
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::RegularFile);
                if regular {
                    make()(entry);
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        rules = Rules::load(rules, &dir, &path, &Present::probe(&dir));
        path.push(last);
        self.walk(
            Work::Start {
                dir: handle,
                path,
                rules,
            },
            make,
        );
        Ok(())
    }

    /// Run the workers from `start` until the stack is empty or a visitor quits.
    fn walk<M, V>(&self, start: Work, make: M)
    where
        M: Fn() -> V + Sync,
        V: FnMut(Entry<'_>) -> Flow,
    {
        let queue = Queue::new(start);
        std::thread::scope(|scope| {
            for _ in 0..self.threads.max(1) {
                let (queue, make) = (&queue, &make);
                scope.spawn(move || {
                    let mut visit = make();
                    while let Some(work) = queue.next() {
                        let (more, flow) = self.process(work, &mut visit);
                        if flow == Flow::Quit {
                            queue.quit();
                            return;
                        }
                        queue.done(more);
                    }
                });
            }
        });
    }

    /// One item of work: a file is visited; a directory is opened, its ignore files read, and its
    /// entries that the rules keep become new work.
    fn process<V>(&self, work: Work, visit: &mut V) -> (Vec<Work>, Flow)
    where
        V: FnMut(Entry<'_>) -> Flow,
    {
        let (dir, path, parent_rules) = match work {
            Work::Files { parent, files } => {
                for (name, path) in files {
                    let entry = Entry {
                        dir: parent.as_fd(),
                        name: &name,
                        path,
                    };
                    if visit(entry) == Flow::Quit {
                        return (Vec::new(), Flow::Quit);
                    }
                }
                return (Vec::new(), Flow::Continue);
            }
            Work::Dir {
                parent,
                name,
                path,
                rules,
            } => match open_dir_beneath(&*parent, Path::new(&name)) {
                Ok(dir) => (dir, path, rules),
                // Gone, or swapped for a symlink or a file since it was listed.
                Err(_) => return (Vec::new(), Flow::Continue),
            },
            Work::Start { dir, path, rules } => (dir, path, rules),
        };
        let entries = list(&dir);
        let present = Present::of(&entries);
        let rules = Rules::load(parent_rules, &dir, &path, &present);
        let dir = Arc::new(dir);
        let mut more = Vec::new();
        let mut files = Vec::new();
        for (name, kind) in entries {
            let is_dir = match kind {
                FileType::Directory => true,
                FileType::RegularFile => false,
                _ => continue,
            };
            let child = path.join(&name);
            if !self.keep(rules.as_deref(), &child, &name, is_dir) {
                continue;
            }
            if is_dir {
                more.push(Work::Dir {
                    parent: dir.clone(),
                    name,
                    path: child,
                    rules: rules.clone(),
                });
            } else {
                files.push((name, child));
                if files.len() == FILES_PER_ITEM {
                    more.push(Work::Files {
                        parent: dir.clone(),
                        files: std::mem::take(&mut files),
                    });
                }
            }
        }
        if !files.is_empty() {
            more.push(Work::Files { parent: dir, files });
        }
        // LIFO: the first entries are taken first.
        more.reverse();
        (more, Flow::Continue)
    }

    /// Whether the rules keep the entry `path` (named `name`) below the search path.
    fn keep(&self, rules: Option<&Rules>, path: &Path, name: &OsStr, is_dir: bool) -> bool {
        if let Some(overrides) = &self.overrides {
            let m = overrides.matched(path, is_dir);
            if m.is_ignore() {
                return false;
            }
            if m.is_whitelist() {
                return true;
            }
        }
        let m = rules.map_or(Match::None, |r| r.matched(path, is_dir));
        if m.is_ignore() {
            return false;
        }
        m.is_whitelist() || !name.as_bytes().starts_with(b".")
    }
}

/// The entries of the directory `dir` (without `.` and `..`) with their types; on an error the
/// entries read so far.
fn list(dir: &OwnedFd) -> Vec<(OsString, FileType)> {
    let mut out = Vec::new();
    let Ok(handle) = dir.try_clone() else {
        return out;
    };
    let Ok(mut reader) = rustix::fs::Dir::new(handle) else {
        return out;
    };
    while let Some(entry) = reader.read() {
        let Ok(entry) = entry else { break };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let mut kind = entry.file_type();
        if kind == FileType::Unknown {
            // Some filesystems do not say; ask about the entry itself.
            kind = rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                .map_or(FileType::Unknown, |s| FileType::from_raw_mode(s.st_mode));
        }
        out.push((OsString::from_vec(name.to_vec()), kind));
    }
    out
}

/// Which ignore files a directory holds (as regular files, by their listed type), and whether it
/// holds `.git`.
#[derive(Debug, Default)]
struct Present {
    rgignore: bool,
    ignore: bool,
    gitignore: bool,
    /// `.git` is a directory (so `.git/info/exclude` may exist).
    git_dir: bool,
    /// `.git` exists (a directory, or a worktree's file): the repository boundary.
    has_git: bool,
}

impl Present {
    /// From a listing.
    fn of(entries: &[(OsString, FileType)]) -> Present {
        let mut p = Present::default();
        for (name, kind) in entries {
            let regular = *kind == FileType::RegularFile;
            match name.as_bytes() {
                b".rgignore" => p.rgignore = regular,
                b".ignore" => p.ignore = regular,
                b".gitignore" => p.gitignore = regular,
                b".git" => {
                    p.has_git = true;
                    p.git_dir = *kind == FileType::Directory;
                }
                _ => {}
            }
        }
        p
    }

    /// By asking about each name (for the directories above the search path, which are not
    /// listed).
    fn probe(dir: &OwnedFd) -> Present {
        let kind = |name: &str| {
            rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|s| FileType::from_raw_mode(s.st_mode))
        };
        let regular = |name: &str| kind(name) == Some(FileType::RegularFile);
        let git = kind(".git");
        Present {
            rgignore: regular(".rgignore"),
            ignore: regular(".ignore"),
            gitignore: regular(".gitignore"),
            git_dir: git == Some(FileType::Directory),
            has_git: git.is_some(),
        }
    }
}

/// The ignore rules of one directory, and its parent's.
#[derive(Debug)]
struct Rules {
    parent: Option<Arc<Rules>>,
    rgignore: Option<Gitignore>,
    ignore: Option<Gitignore>,
    gitignore: Option<Gitignore>,
    exclude: Option<Gitignore>,
    /// The directory holds `.git`: `.gitignore` and `exclude` files above it do not apply.
    has_git: bool,
}

impl Rules {
    /// The rules of the directory `dir` at `path` (what `present` says it holds) on top of
    /// `parent`'s; the parent's own when it adds none.
    fn load(
        parent: Option<Arc<Rules>>,
        dir: &OwnedFd,
        path: &Path,
        present: &Present,
    ) -> Option<Arc<Rules>> {
        let read = |on: bool, name: &str| on.then(|| rules_file(dir, path, name)).flatten();
        let exclude = if present.git_dir {
            open_dir_beneath(dir, Path::new(".git/info"))
                .ok()
                .and_then(|info| rules_file(&info, path, "exclude"))
        } else {
            None
        };
        let rules = Rules {
            parent: parent.clone(),
            rgignore: read(present.rgignore, ".rgignore"),
            ignore: read(present.ignore, ".ignore"),
            gitignore: read(present.gitignore, ".gitignore"),
            exclude,
            has_git: present.has_git,
        };
        let adds = rules.rgignore.is_some()
            || rules.ignore.is_some()
            || rules.gitignore.is_some()
            || rules.exclude.is_some()
            || (rules.has_git && parent.is_some());
        if adds { Some(Arc::new(rules)) } else { parent }
    }

    /// How the rules of this directory and those above judge `path` (see the module doc).
    fn matched(&self, path: &Path, is_dir: bool) -> Match<()> {
        let (mut rg, mut ig, mut gi, mut ex) = (Match::None, Match::None, Match::None, Match::None);
        let mut saw_git = false;
        let mut level = Some(self);
        let judge = |m: &mut Match<()>, g: &Option<Gitignore>| {
            if m.is_none()
                && let Some(g) = g
            {
                *m = g.matched(path, is_dir).map(|_| ());
            }
        };
        while let Some(r) = level {
            judge(&mut rg, &r.rgignore);
            judge(&mut ig, &r.ignore);
            if !saw_git {
                judge(&mut gi, &r.gitignore);
                judge(&mut ex, &r.exclude);
            }
            saw_git |= r.has_git;
            level = r.parent.as_deref();
        }
        rg.or(ig).or(gi).or(ex)
    }
}

/// The rules of the ignore file `name` in the directory `dir` (at `path`): opened beneath `dir`,
/// a regular file with one link, at most [`MAX_IGNORE_FILE_BYTES`]; `None` when it is anything else
/// or has no rule.
fn rules_file(dir: &OwnedFd, path: &Path, name: &str) -> Option<Gitignore> {
    let (file, stat) = open_file_beneath(dir, Path::new(name)).ok()?;
    if stat.st_nlink > 1 || stat.st_size as u64 > MAX_IGNORE_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_IGNORE_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_IGNORE_FILE_BYTES {
        return None;
    }
    let from = path.join(name);
    let mut builder = GitignoreBuilder::new(path);
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(mut line) = std::str::from_utf8(line) else {
            continue;
        };
        if i == 0 {
            line = line.trim_start_matches('\u{feff}');
        }
        let _ = builder.add_line(Some(from.clone()), line);
    }
    builder.build().ok().filter(|g| !g.is_empty())
}

/// An item of the walk.
enum Work {
    /// The search path, opened.
    Start {
        dir: OwnedFd,
        path: PathBuf,
        rules: Option<Arc<Rules>>,
    },
    /// A directory to open beneath its parent.
    Dir {
        parent: Arc<OwnedFd>,
        name: OsString,
        path: PathBuf,
        rules: Option<Arc<Rules>>,
    },
    /// Regular files of one directory to visit (names and paths), at most [`FILES_PER_ITEM`].
    Files {
        parent: Arc<OwnedFd>,
        files: Vec<(OsString, PathBuf)>,
    },
}

/// Files handed out as one item of work: enough that the shared stack is not taken once per file
/// (Glob's work per file is tiny), few enough that a large directory is still searched by every
/// worker.
const FILES_PER_ITEM: usize = 16;

/// The workers' shared stack.
struct Queue {
    state: Mutex<State>,
    ready: Condvar,
}

struct State {
    work: Vec<Work>,
    /// Workers processing an item (which may add more).
    busy: usize,
    /// Workers waiting for an item.
    idle: usize,
    quit: bool,
}

impl Queue {
    fn new(start: Work) -> Queue {
        Queue {
            state: Mutex::new(State {
                work: vec![start],
                busy: 0,
                idle: 0,
                quit: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next item; `None` when the walk is over (nothing left and nobody busy, or quit).
    fn next(&self) -> Option<Work> {
        let mut state = self.lock();
        loop {
            if state.quit {
                return None;
            }
            if let Some(work) = state.work.pop() {
                state.busy += 1;
                return Some(work);
            }
            if state.busy == 0 {
                self.ready.notify_all();
                return None;
            }
            state.idle += 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.idle -= 1;
        }
    }

    /// An item is done; `more` is what it found.
    fn done(&self, more: Vec<Work>) {
        let mut state = self.lock();
        state.busy -= 1;
        let added = more.len();
        state.work.extend(more);
        if state.idle == 0 {
            return;
        }
        if state.busy == 0 || added >= state.idle {
            self.ready.notify_all();
        } else {
            for _ in 0..added {
                self.ready.notify_one();
            }
        }
    }

    /// Stop every worker.
    fn quit(&self) {
        self.lock().quit = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::access::Intent;
    use super::super::testing::setup;
    use super::*;

    fn found(walk: &Walk) -> Vec<String> {
        let all = Mutex::new(Vec::new());
        walk.run(|| {
            |e: Entry<'_>| {
                all.lock().unwrap().push(e.into_path());
                Flow::Continue
            }
        })
        .unwrap();
        let mut all: Vec<String> = all
            .into_inner()
            .unwrap()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        all.sort();
        all
    }

    #[test]
    fn gitignore_semantics_by_depth_kind_and_repository() {
        let (_d, base, roots) = setup();
        let me = base.join("me");
        for f in [
            "a.log",
            "keep.log",
            "sub/b.log",
            "sub/c.txt",
            "sub/d.tmp",
            "repo/e.txt",
            "repo/f.txt",
            ".hidden",
            "shown/.env",
        ] {
            std::fs::create_dir_all(me.join(f).parent().unwrap()).unwrap();
            std::fs::write(me.join(f), "x").unwrap();
        }
        std::fs::write(me.join(".gitignore"), "*.log\n!keep.log\n*.tmp\ne.txt\n").unwrap();
        // A deeper file overrides; `.ignore` beats `.gitignore`.
        std::fs::write(me.join("sub/.gitignore"), "!b.log\n").unwrap();
        std::fs::write(me.join("sub/.ignore"), "c.txt\n").unwrap();
        std::fs::write(me.join("sub/.gitignore"), "!b.log\n!c.txt\n").unwrap();
        // A repository boundary: the outer .gitignore does not reach into it; its exclude does.
        std::fs::create_dir_all(me.join("repo/.git/info")).unwrap();
        std::fs::write(me.join("repo/.git/info/exclude"), "f.txt\n").unwrap();
        // A rule can re-include a hidden file.
        std::fs::write(me.join("shown/.gitignore"), "!.env\n").unwrap();
        let search = roots.resolve(".", Intent::Read).unwrap();
        let rel: Vec<String> = found(&Walk::new(&search).unwrap())
            .into_iter()
            .map(|p| {
                p.strip_prefix(&format!("{}/", me.display()))
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            rel,
            ["keep.log", "repo/e.txt", "shown/.env", "sub/b.log"],
            "{rel:?}"
        );
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_after_it_was_listed_is_not_entered() {
        let (_d, base, roots) = setup();
        let me = base.join("me");
        std::fs::create_dir_all(me.join("d")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("outside/secret.txt"), "x").unwrap();
        let search = roots.resolve(".", Intent::Read).unwrap();
        let walk = Walk::new(&search).unwrap();
        // The walk listed `d` as a directory; then it becomes a link out.
        let parent = Arc::new(open_dir_beneath(&walk.root_fd, Path::new(".")).unwrap());
        std::fs::remove_dir(me.join("d")).unwrap();
        std::os::unix::fs::symlink(base.join("outside"), me.join("d")).unwrap();
        let work = Work::Dir {
            parent,
            name: OsString::from("d"),
            path: me.join("d"),
            rules: None,
        };
        let (more, flow) = walk.process(work, &mut |_: Entry<'_>| Flow::Continue);
        assert!(more.is_empty() && flow == Flow::Continue);
        assert!(found(&walk).is_empty());
    }

    #[test]
    fn a_visitor_can_stop_the_walk() {
        let (_d, base, roots) = setup();
        for i in 0..100 {
            std::fs::write(base.join(format!("me/{i}.txt")), "x").unwrap();
        }
        let search = roots.resolve(".", Intent::Read).unwrap();
        let seen = std::sync::atomic::AtomicUsize::new(0);
        Walk::new(&search)
            .unwrap()
            .run(|| {
                |_: Entry<'_>| {
                    seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Flow::Quit
                }
            })
            .unwrap();
        // Each worker stops at its first file.
        assert!(seen.into_inner() <= 8);
    }

    #[test]
    fn an_ignore_file_past_the_cap_is_not_applied() {
        let (_d, base, roots) = setup();
        let me = base.join("me");
        std::fs::write(me.join("x.txt"), "x").unwrap();
        let mut big = "x.txt\n".to_string();
        big.push_str(&"#".repeat(MAX_IGNORE_FILE_BYTES as usize));
        std::fs::write(me.join(".gitignore"), big).unwrap();
        let search = roots.resolve(".", Intent::Read).unwrap();
        assert_eq!(found(&Walk::new(&search).unwrap()).len(), 1);
    }
}
