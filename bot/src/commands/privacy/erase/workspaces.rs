//! The agents' workspaces in `opc privacy erase`: the files the Write tool and Bash made there.
//!
//! Role: find every workspace file that holds the value and, with `--workspaces`, replace each
//! occurrence with [`ERASED`] in place. Without the flag the files are only listed (paths relative to
//! `framework.workspace.root`, with counts): a workspace is the agents' working tree, often a
//! repository someone cares about, so its files are edited only when asked.
//!
//! What is searched: the workspace of every agent in the config (`OrgTree::workspace`), each once (two
//! agents may share one; one nested in another, which validation refuses, would be walked with the
//! outer one). `.gitignore` and the like are not read: erasure must find every copy, ignored or not. Matching is the database's
//! ([`Matcher`]: any letter case, JSON-escaped forms, whole words), so a JSON file the agent wrote is
//! matched as its rows are.
//!
//! Invariants (the walk runs as whoever runs `opc`, often root, over trees agents wrote; an agent's
//! Bash command may even still be running after a crash):
//! - **Nothing outside a workspace is read or written.** The walk never goes by path: the root is
//!   opened once, each workspace beneath it one component at a time, and every directory and file
//!   relative to its parent's handle, all with `O_NOFOLLOW`, so a symlink — or a directory swapped for
//!   one mid-walk — is never followed. Symlinks are counted and skipped (a target inside a workspace
//!   is searched where it lies). The temporary file and the rename that replaces a file are made
//!   relative to the same directory handle the file was read from. (This is why the walk is not
//!   `walkdir`'s or `ignore`'s: they hand out paths, and opening or renaming by path follows a
//!   directory an agent swapped for a symlink after it was listed.)
//! - **Only regular files with one name are read.** FIFOs, sockets and devices are skipped from their
//!   type and opened with `O_NONBLOCK` in any case (one swapped in cannot block). A file with more
//!   than one hard link is not read and is reported: its other name may be outside the workspace (a
//!   hard link can name any file), and replacing one name would leave the other holding the value.
//! - **Each file is replaced whole or not at all.** The new text goes to a temporary file beside it,
//!   which gets the original's owner and mode and is synced, and is then renamed over it; the rename
//!   happens only if the name still names the file that was read and the file did not change since.
//! - **Binary files are found, never edited.** A file with a NUL byte or that is not UTF-8 is searched
//!   in its UTF-8 parts (so a value in a SQLite file, a PDF's text or a log with a stray byte is
//!   found) and listed, but not rewritten: replacing text changes lengths, and offsets, checksums or
//!   compression in a binary format would turn it into a corrupt file that still holds copies
//!   elsewhere (a compressed copy is not found at all). Delete or regenerate such a file.
//! - **Bounded memory.** A file larger than [`MAX_EDIT_BYTES`] is searched in overlapping windows
//!   (every occurrence lies wholly inside one window) and listed, not edited.
//! - **The value is never printed.** Paths are shown with control characters escaped, and a path
//!   whose name holds the value is shown with `[erased]` in its place (and listed for renaming).

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{Read, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use opc_privacy::erase::{ERASED, Matcher};
use rustix::fs::{AtFlags, Dir, FileType, Mode as FsMode, OFlags};
use rustix::io::Errno;

/// The largest file rewritten in place (and read whole): 32 MiB. Larger files are searched in
/// windows and listed. Up to [`WORKERS`] files are held at once, each with its rewritten copy.
pub const MAX_EDIT_BYTES: u64 = 32 << 20;

/// How many files are read and matched at once. Reading dominates on a cold cache, matching on a warm
/// one; both scale with threads up to the disk's or the cores' limit.
const WORKERS: usize = 8;

/// Directories deeper than this below a workspace are reported, not walked (each level holds one open
/// handle while its subdirectories wait).
const MAX_DEPTH: usize = 256;

/// The window for files larger than [`MAX_EDIT_BYTES`].
const WINDOW: usize = 8 << 20;

/// What to do with the files found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// List them (no `--workspaces`).
    List,
    /// Say what `--workspaces` would change (`--workspaces --dry-run`).
    DryRun,
    /// Replace the occurrences (`--workspaces`).
    Redact,
}

/// The workspaces to search: the configured root and the agents' workspaces relative to it.
#[derive(Debug)]
pub struct Workspaces {
    /// `framework.workspace.root`, absolute.
    root: PathBuf,
    /// The agents' workspaces relative to `root`, none inside another, sorted.
    dirs: Vec<PathBuf>,
}

impl Workspaces {
    /// Every agent's workspace in `loaded`, each once; a workspace inside another is walked with it.
    pub fn of(loaded: &opc_hierarchy::Loaded) -> Workspaces {
        let root = loaded.org.workspace_root().to_path_buf();
        let mut dirs: Vec<PathBuf> = loaded
            .org
            .agent_ids()
            .filter_map(|id| loaded.org.workspace(id))
            .filter_map(|w| w.strip_prefix(&root).ok().map(Path::to_path_buf))
            // Validation keeps workspaces strictly inside the root, as plain names.
            .filter(|rel| {
                rel.components().next().is_some()
                    && rel.components().all(|c| matches!(c, Component::Normal(_)))
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        let mut outer: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            if !outer.iter().any(|o| dir.starts_with(o)) {
                outer.push(dir);
            }
        }
        Workspaces { root, dirs: outer }
    }

    /// Search (and in [`Mode::Redact`], rewrite) every workspace file for `matcher`'s value.
    pub fn scan(&self, matcher: &Matcher, mode: Mode) -> Found {
        let mut found = Found::new(&self.root);
        let root = match open_root(&self.root) {
            Ok(Some(fd)) => fd,
            Ok(None) => return found,
            Err(e) => {
                found.unreadable.push((
                    self.root.display().to_string(),
                    format!("cannot open the workspace root: {e}"),
                ));
                return found;
            }
        };
        let (jobs, queue) = mpsc::sync_channel::<Job>(256);
        let queue = Mutex::new(queue);
        let outcomes = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..WORKERS)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        loop {
                            let job = match queue.lock() {
                                Ok(q) => q.recv(),
                                Err(_) => break,
                            };
                            let Ok(job) = job else { break };
                            if let Some(o) = search_file(&job, matcher, mode) {
                                out.push((job.shown, o));
                            }
                        }
                        out
                    })
                })
                .collect();
            let mut walker = Walker {
                matcher,
                jobs: &jobs,
                found: &mut found,
                stack: Vec::new(),
                temp: temp_prefix(),
            };
            for dir in &self.dirs {
                walker.workspace(&root, dir);
            }
            drop(jobs);
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_default())
                .collect::<Vec<_>>()
        });
        for (shown, outcome) in outcomes {
            found.add(shown, outcome);
        }
        found.sort();
        found
    }
}

/// One file for a worker: its directory's handle, its name there, and its path as shown.
struct Job {
    dir: Arc<OwnedFd>,
    name: CString,
    shown: String,
}

/// What one file turned out to be.
enum Outcome {
    /// A text file holding the value this many times (listed, or would be / was replaced).
    Text { occurrences: usize, replaced: bool },
    /// It holds the value (this many times, when counted) and is not edited, for this reason.
    Kept {
        occurrences: Option<usize>,
        reason: Kept,
    },
    /// Not read: it has this many names.
    HardLinks(u64),
    /// Not read: a symlink swapped in after the directory was listed, or a special file.
    Skipped,
    /// Could not be read (the error).
    Unreadable(String),
}

/// Why a file that holds the value is not edited.
#[derive(Debug)]
pub enum Kept {
    /// A NUL byte or not UTF-8.
    Binary,
    /// Larger than [`MAX_EDIT_BYTES`].
    TooLarge,
    /// The value is in the JSON document's structure (a key, or inside an escape).
    JsonStructure,
    /// It changed (or its name was replaced) between the read and the rename.
    Changed,
    /// The rewrite failed (the error).
    Failed(String),
}

impl Kept {
    fn why(&self) -> String {
        match self {
            Kept::Binary => "binary or not UTF-8 text: not edited, since replacing text inside a binary \
                             format corrupts it; delete or regenerate the file"
                .into(),
            Kept::TooLarge => format!(
                "larger than {} MiB: found, not edited in place; edit or delete it by hand",
                MAX_EDIT_BYTES >> 20
            ),
            Kept::JsonStructure => "the value is part of this JSON document's structure (an object key, \
                                    or inside an escape): not edited, since the rewrite would change the \
                                    document's shape; edit it by hand"
                .into(),
            Kept::Changed => "changed while it was being erased (is an agent's command still running?): \
                              not edited; run the erase again"
                .into(),
            Kept::Failed(e) => format!("could not be rewritten: {e}"),
        }
    }
}

/// What the workspaces hold, and what was done.
#[derive(Debug)]
pub struct Found {
    root: PathBuf,
    /// Text files with the value: path, occurrences, whether they were replaced.
    pub text: Vec<(String, usize, bool)>,
    /// Files with the value that are not (to be) edited.
    pub kept: Vec<(String, Option<usize>, Kept)>,
    /// Paths whose own name holds the value (shown masked).
    pub names: Vec<String>,
    /// Files not read because they have more than one name.
    pub hard_links: Vec<(String, u64)>,
    /// Paths that could not be read, and why.
    pub unreadable: Vec<(String, String)>,
    /// Directories deeper than [`MAX_DEPTH`], not walked.
    pub too_deep: Vec<String>,
    /// Workspaces that do not exist (yet).
    pub missing: usize,
    /// Workspaces walked.
    pub walked: usize,
    /// Regular files searched.
    pub files: usize,
    /// Symlinks, FIFOs, sockets and devices skipped.
    pub skipped: usize,
}

impl Found {
    fn new(root: &Path) -> Found {
        Found {
            root: root.to_path_buf(),
            text: Vec::new(),
            kept: Vec::new(),
            names: Vec::new(),
            hard_links: Vec::new(),
            unreadable: Vec::new(),
            too_deep: Vec::new(),
            missing: 0,
            walked: 0,
            files: 0,
            skipped: 0,
        }
    }

    fn add(&mut self, shown: String, outcome: Outcome) {
        match outcome {
            Outcome::Text {
                occurrences,
                replaced,
            } => self.text.push((shown, occurrences, replaced)),
            Outcome::Kept {
                occurrences,
                reason,
            } => self.kept.push((shown, occurrences, reason)),
            Outcome::HardLinks(n) => self.hard_links.push((shown, n)),
            Outcome::Skipped => self.skipped += 1,
            Outcome::Unreadable(e) => self.unreadable.push((shown, e)),
        }
    }

    fn sort(&mut self) {
        self.text.sort_by(|a, b| a.0.cmp(&b.0));
        self.kept.sort_by(|a, b| a.0.cmp(&b.0));
        self.names.sort();
        self.hard_links.sort();
        self.unreadable.sort();
        self.too_deep.sort();
    }

    /// Files replaced, and occurrences replaced in them.
    pub fn replaced(&self) -> (usize, usize) {
        self.text
            .iter()
            .filter(|t| t.2)
            .fold((0, 0), |(f, o), t| (f + 1, o + t.1))
    }

    /// Whether, after this run, a copy may remain that the command did not (or would not) remove:
    /// text files left for `--workspaces`, files not edited, names, files not read.
    pub fn left_over(&self) -> bool {
        self.text.iter().any(|t| !t.2)
            || !self.kept.is_empty()
            || !self.names.is_empty()
            || !self.hard_links.is_empty()
            || !self.unreadable.is_empty()
            || !self.too_deep.is_empty()
    }

    /// The report printed after the database's.
    pub fn render(&self, mode: Mode) -> String {
        let mut out = format!(
            "workspaces under {}: {} file(s) searched in {} workspace(s){}{}\n",
            self.root.display(),
            self.files,
            self.walked,
            if self.missing > 0 {
                format!(" ({} not created yet)", self.missing)
            } else {
                String::new()
            },
            if self.skipped > 0 {
                format!(
                    "; {} symbolic link(s) and special file(s) skipped (links are never followed)",
                    self.skipped
                )
            } else {
                String::new()
            }
        );
        if self.text.is_empty() && self.kept.is_empty() {
            out.push_str("  no file holds the value\n");
        } else {
            let occurrences: usize = self.text.iter().map(|t| t.1).sum();
            out.push_str(&match mode {
                Mode::List => format!(
                    "  {} file(s) hold the value:\n",
                    self.text.len() + self.kept.len()
                ),
                Mode::DryRun => format!(
                    "  would replace {occurrences} occurrence(s) in {} file(s) with {ERASED}:\n",
                    self.text.len()
                ),
                Mode::Redact => {
                    let (files, occurrences) = self.replaced();
                    format!(
                        "  replaced {occurrences} occurrence(s) in {files} file(s) with {ERASED}:\n"
                    )
                }
            });
            let width = self
                .text
                .iter()
                .map(|t| t.0.chars().count())
                .max()
                .unwrap_or(0);
            for (shown, n, _) in &self.text {
                out.push_str(&format!("    {shown:width$}  {n} occurrence(s)\n"));
            }
            if !self.kept.is_empty() {
                out.push_str(match mode {
                    Mode::List => "  also holding it, and not edited by --workspaces:\n",
                    Mode::DryRun => "  would not be edited (remove the value by hand):\n",
                    Mode::Redact => "  not edited (remove the value by hand):\n",
                });
                for (shown, n, why) in &self.kept {
                    let n = n.map_or_else(String::new, |n| format!("{n} occurrence(s); "));
                    out.push_str(&format!("    {shown}: {n}{}\n", why.why()));
                }
            }
        }
        if !self.names.is_empty() {
            out.push_str(&format!(
                "  {} path(s) hold the value in their name (shown as {ERASED}); names are never \
                 changed by erase: rename or delete them by hand:\n",
                self.names.len()
            ));
            for shown in &self.names {
                out.push_str(&format!("    {shown}\n"));
            }
        }
        if !self.hard_links.is_empty() {
            out.push_str(
                "  not searched: files with more than one name (a hard link can name a file outside \
                 the workspace, and editing one name leaves the others); check them by hand:\n",
            );
            for (shown, n) in &self.hard_links {
                out.push_str(&format!("    {shown}: {n} hard links\n"));
            }
        }
        if !self.too_deep.is_empty() {
            out.push_str(&format!(
                "  not searched: directories deeper than {MAX_DEPTH} levels; check them by hand:\n"
            ));
            for shown in &self.too_deep {
                out.push_str(&format!("    {shown}\n"));
            }
        }
        if !self.unreadable.is_empty() {
            out.push_str("  could not be searched:\n");
            for (shown, e) in &self.unreadable {
                out.push_str(&format!("    {shown}: {e}\n"));
            }
        }
        if mode == Mode::List && !self.text.is_empty() {
            out.push_str(&format!(
                "  workspace files were not changed: run the same command with --workspaces to replace \
                 the value with {ERASED} in the files listed above (--workspaces --dry-run shows what \
                 it would change)\n"
            ));
        }
        out
    }
}

/// Open the workspace root by its real path (the admin's config may reach it through a symlink);
/// `None` when it does not exist yet.
fn open_root(root: &Path) -> std::io::Result<Option<OwnedFd>> {
    let real = match std::fs::canonicalize(root) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    rustix::fs::open(&real, dir_flags(), FsMode::empty())
        .map(Some)
        .map_err(std::io::Error::from)
}

/// How every directory is opened: never through a symlink.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// The walk of the workspaces, on the calling thread: directories are listed here, regular files are
/// sent to the workers.
struct Walker<'a> {
    matcher: &'a Matcher,
    jobs: &'a mpsc::SyncSender<Job>,
    found: &'a mut Found,
    /// Directories still to list, depth first: the parent's handle, the path, the depth. Pending
    /// siblings share their parent's handle, so at most one handle per level is open.
    stack: Vec<(Arc<OwnedFd>, PathBuf, usize)>,
    /// How this process's temporary files' names start (skipped: a listing may see one).
    temp: String,
}

impl Walker<'_> {
    /// Note that `path` could not be searched, and why.
    fn unreadable(&mut self, path: &Path, why: String) {
        let shown = shown(self.matcher, path);
        self.found.unreadable.push((shown, why));
    }

    /// Walk the workspace `rel` (beneath `root`).
    fn workspace(&mut self, root: &OwnedFd, rel: &Path) {
        // The workspace itself, one component at a time beneath the root: a workspace an agent
        // replaced with a symlink is refused, not followed.
        let mut fd: Option<OwnedFd> = None;
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return;
            };
            let parent = fd.as_ref().map_or(root.as_fd(), AsFd::as_fd);
            match rustix::fs::openat(parent, name, dir_flags(), FsMode::empty()) {
                Ok(next) => fd = Some(next),
                Err(Errno::NOENT) => {
                    self.found.missing += 1;
                    return;
                }
                Err(e) if e == Errno::LOOP || e == Errno::NOTDIR => {
                    self.unreadable(
                        rel,
                        "a symbolic link or not a directory: not followed".into(),
                    );
                    return;
                }
                Err(e) => {
                    self.unreadable(rel, std::io::Error::from(e).to_string());
                    return;
                }
            }
        }
        let Some(fd) = fd else { return };
        self.found.walked += 1;
        self.list(Arc::new(fd), rel, 0);
        while let Some((parent, path, depth)) = self.stack.pop() {
            let Some(name) = path.file_name() else {
                continue;
            };
            match rustix::fs::openat(&*parent, name, dir_flags(), FsMode::empty()) {
                Ok(dir) => {
                    drop(parent);
                    self.list(Arc::new(dir), &path, depth);
                }
                // Replaced by a symlink (or removed) since it was listed.
                Err(Errno::LOOP | Errno::NOTDIR | Errno::NOENT) => self.found.skipped += 1,
                Err(e) => self.unreadable(&path, std::io::Error::from(e).to_string()),
            }
        }
    }

    /// List one directory: files to the workers, subdirectories onto the stack.
    fn list(&mut self, dir: Arc<OwnedFd>, rel: &Path, depth: usize) {
        let entries = match Dir::read_from(&*dir) {
            Ok(d) => d,
            Err(e) => return self.unreadable(rel, std::io::Error::from(e).to_string()),
        };
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => return self.unreadable(rel, std::io::Error::from(e).to_string()),
            };
            let name = entry.file_name();
            if matches!(name.to_bytes(), b"." | b"..")
                || name.to_bytes().starts_with(self.temp.as_bytes())
            {
                continue;
            }
            let mut kind = entry.file_type();
            if kind == FileType::Unknown {
                // Some file systems do not say in the listing; ask without following a link.
                kind = match rustix::fs::statat(&*dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(_) => FileType::Unknown,
                };
            }
            let path = rel.join(OsStr::from_bytes(name.to_bytes()));
            let display = shown(self.matcher, &path);
            if name_holds(self.matcher, name) {
                self.found.names.push(display.clone());
            }
            match kind {
                FileType::Directory if depth + 1 > MAX_DEPTH => self.found.too_deep.push(display),
                FileType::Directory => self.stack.push((dir.clone(), path, depth + 1)),
                FileType::RegularFile => {
                    self.found.files += 1;
                    let job = Job {
                        dir: dir.clone(),
                        name: name.to_owned(),
                        shown: display,
                    };
                    if self.jobs.send(job).is_err() {
                        return;
                    }
                }
                _ => self.found.skipped += 1,
            }
        }
    }
}

/// Whether the name itself (not its directories) holds the value.
fn name_holds(matcher: &Matcher, name: &CStr) -> bool {
    matcher.occurs_in(&String::from_utf8_lossy(name.to_bytes()))
}

/// How a path is shown: control characters and bytes that are not UTF-8 escaped (a name with a
/// newline cannot forge a line of the report), and the value replaced by [`ERASED`] so the report
/// never prints it.
fn shown(matcher: &Matcher, path: &Path) -> String {
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    match matcher.erase(&out) {
        Ok(Some((text, _))) => text,
        Ok(None) => out,
        // A path that reads as JSON with the value in its structure: shown whole as erased.
        Err(_) => ERASED.to_string(),
    }
}

/// Search one file, and in [`Mode::Redact`] rewrite it; `None` when it does not hold the value.
fn search_file(job: &Job, matcher: &Matcher, mode: Mode) -> Option<Outcome> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(&*job.dir, &*job.name, flags, FsMode::empty()) {
        Ok(fd) => fd,
        // Replaced by a symlink (or removed) since the directory was listed.
        Err(Errno::LOOP | Errno::NOENT) => return Some(Outcome::Skipped),
        Err(e) => return Some(Outcome::Unreadable(std::io::Error::from(e).to_string())),
    };
    let mut file = File::from(fd);
    let before = match file.metadata() {
        Ok(m) => m,
        Err(e) => return Some(Outcome::Unreadable(e.to_string())),
    };
    if !before.file_type().is_file() {
        return Some(Outcome::Skipped);
    }
    if before.nlink() > 1 {
        return Some(Outcome::HardLinks(before.nlink()));
    }
    if before.len() > MAX_EDIT_BYTES {
        return match holds_in_windows(&mut file, matcher) {
            Ok(false) => None,
            Ok(true) => Some(Outcome::Kept {
                occurrences: None,
                reason: Kept::TooLarge,
            }),
            Err(e) => Some(Outcome::Unreadable(e.to_string())),
        };
    }
    let mut bytes = Vec::with_capacity(usize::try_from(before.len()).unwrap_or(0));
    if let Err(e) = (&mut file).take(MAX_EDIT_BYTES + 1).read_to_end(&mut bytes) {
        return Some(Outcome::Unreadable(e.to_string()));
    }
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_EDIT_BYTES {
        // It grew past the cap while being read.
        return Some(Outcome::Kept {
            occurrences: None,
            reason: Kept::Changed,
        });
    }
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) if !bytes.contains(&0) => text,
        _ => {
            let lossy = String::from_utf8_lossy(&bytes);
            return match matcher.erase(&lossy) {
                Ok(None) => None,
                Ok(Some((_, n))) => Some(Outcome::Kept {
                    occurrences: Some(n),
                    reason: Kept::Binary,
                }),
                Err(_) => Some(Outcome::Kept {
                    occurrences: None,
                    reason: Kept::Binary,
                }),
            };
        }
    };
    let (new, occurrences) = match matcher.erase(text) {
        Ok(None) => return None,
        Ok(Some(found)) => found,
        Err(_) => {
            return Some(Outcome::Kept {
                occurrences: None,
                reason: Kept::JsonStructure,
            });
        }
    };
    if mode != Mode::Redact {
        return Some(Outcome::Text {
            occurrences,
            replaced: false,
        });
    }
    Some(match replace(job, &file, &before, new.as_bytes()) {
        Ok(()) => Outcome::Text {
            occurrences,
            replaced: true,
        },
        Err(reason) => Outcome::Kept {
            occurrences: Some(occurrences),
            reason,
        },
    })
}

/// Whether a file too large to edit holds the value: windows of [`WINDOW`] bytes that overlap by far
/// more than the longest stored form of the value (at most 12 bytes per character, twice
/// JSON-escaped), so every occurrence lies wholly inside one window. An edge of a window can only
/// make a partial word look whole, never hide an occurrence: a false "holds" in a file listed for
/// checking by hand, never a missed one.
fn holds_in_windows(file: &mut File, matcher: &Matcher) -> std::io::Result<bool> {
    let overlap = 64 * 1024 + 64 * matcher.chars();
    let mut buf: Vec<u8> = Vec::with_capacity(WINDOW + overlap);
    loop {
        let want = WINDOW + overlap - buf.len();
        let read = Read::by_ref(file)
            .take(u64::try_from(want).unwrap_or(u64::MAX))
            .read_to_end(&mut buf)?;
        if matcher.occurs_in(&String::from_utf8_lossy(&buf)) {
            return Ok(true);
        }
        if read < want {
            return Ok(false);
        }
        let keep = buf.len().saturating_sub(overlap);
        buf.drain(..keep);
    }
}

/// A process-wide counter for temporary names (with the pid: unique among concurrent erases).
static TEMP: AtomicU64 = AtomicU64::new(0);

/// How this process's temporary files' names start.
fn temp_prefix() -> String {
    format!(".opc-erase-{}-", std::process::id())
}

/// Replace the file `job` names with `new`: a temporary file beside it (same directory handle), the
/// original's owner and mode, synced, then renamed over it — only if the name still names the file
/// read, unchanged.
fn replace(job: &Job, original: &File, before: &std::fs::Metadata, new: &[u8]) -> Result<(), Kept> {
    let failed = |what: &str, e: std::io::Error| Kept::Failed(format!("{what}: {e}"));
    let temp = CString::new(format!(
        "{}{}.tmp",
        temp_prefix(),
        TEMP.fetch_add(1, Ordering::Relaxed)
    ))
    .map_err(|e| Kept::Failed(e.to_string()))?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&*job.dir, &*temp, flags, FsMode::from_raw_mode(0o600))
        .map_err(|e| failed("cannot create a temporary file beside it", e.into()))?;
    let mut out = File::from(fd);
    let remove = || {
        let _ = rustix::fs::unlinkat(&*job.dir, &*temp, AtFlags::empty());
    };
    let written = (|| {
        out.write_all(new)
            .map_err(|e| failed("cannot write the temporary file", e))?;
        // Owner before mode: changing the owner clears set-user-id and set-group-id bits. Only what
        // differs is changed, so an erase run by the files' owner needs no privilege.
        let made = out
            .metadata()
            .map_err(|e| failed("cannot look at the temporary file", e))?;
        let uid = (made.uid() != before.uid()).then_some(before.uid());
        let gid = (made.gid() != before.gid()).then_some(before.gid());
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::fchown(&out, uid, gid).map_err(|e| {
                failed(
                    "cannot give the rewritten file the original's owner (run the erase as that user or as root)",
                    e,
                )
            })?;
        }
        out.set_permissions(std::fs::Permissions::from_mode(before.mode() & 0o7777))
            .map_err(|e| failed("cannot give the rewritten file the original's mode", e))?;
        out.sync_all()
            .map_err(|e| failed("cannot sync the temporary file", e))?;
        // The name must still be the file that was read, and that file unchanged since.
        let now = original
            .metadata()
            .map_err(|e| failed("cannot look at the file again", e))?;
        let named = rustix::fs::statat(&*job.dir, &*job.name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| failed("cannot look at the name again", e.into()))?;
        // `st_dev` and `st_ino` are narrower than `u64` on some 32-bit targets.
        #[allow(clippy::useless_conversion)]
        let named = (u64::from(named.st_dev), u64::from(named.st_ino));
        let unchanged = named == (before.dev(), before.ino())
            && now.len() == before.len()
            && (now.mtime(), now.mtime_nsec()) == (before.mtime(), before.mtime_nsec())
            && now.nlink() == 1;
        if !unchanged {
            return Err(Kept::Changed);
        }
        rustix::fs::renameat(&*job.dir, &*temp, &*job.dir, &*job.name)
            .map_err(|e| failed("cannot rename the rewritten file over it", e.into()))
    })();
    if let Err(kept) = written {
        remove();
        return Err(kept);
    }
    // The rename itself made durable; a failure here leaves the new file in place anyway.
    let _ = rustix::fs::fsync(&*job.dir);
    Ok(())
}
