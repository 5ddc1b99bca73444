//! Reading an agent's prompt file (`prompt: file:prompts/ceo.md`): the one function every reader uses.
//!
//! Why one function: a prompt file is read by `opc validate`, by the admin console's validation and
//! save, by every hot reload (to validate it and to fingerprint it) and by the engine when it builds
//! an agent's system prompt. A config is user input — and whoever can edit it (a console user, a
//! teammate with write access to the file) is not necessarily allowed to read every file the server
//! can. A prompt file's text is sent to the model provider with every request, so `prompt:
//! file:/etc/shadow` or `file:/proc/self/environ` (the provider key is in the environment) would ship
//! those files out; `file:/dev/zero`, a FIFO, a directory or a multi-gigabyte log must not make any
//! reader read without end or block. So every reader goes through [`read_prompt_file`], which applies
//! the same rules everywhere.
//!
//! Invariants:
//! - **Inside the config's directory.** The path, as written and joined to the config file's directory,
//!   must lie inside that directory before anything on disk is looked at (an absolute path elsewhere
//!   or one climbing out with `..` is refused without a single `stat`, so the error is no oracle on
//!   which outside files exist). Then both are resolved (`canonicalize`: symlinks and `..` followed to
//!   where they really lead) and the file must still lie inside: a symlink inside the directory that
//!   points outside (an agent can make one in its workspace, which by default lies under the config's
//!   directory) is refused without naming its target. After opening, on Linux, what was opened is
//!   judged again (`/proc/self/fd`): a directory swapped for a symlink between the check and the open
//!   is caught.
//! - **A regular file with one name.** Devices, FIFOs, sockets and directories are refused from their
//!   metadata before opening (opening some devices has effects), and again from the opened handle.
//!   A file with more than one hard link is refused: a hard link made inside the directory can name a
//!   file outside it, and no path check can see that.
//! - **Never blocks, never reads without end.** It is opened with `O_NONBLOCK | O_NOFOLLOW | O_NOCTTY`
//!   (a FIFO swapped in after the check cannot block the open; a final symlink swapped in fails), and
//!   never read past [`MAX_PROMPT_FILE_BYTES`] + 1 bytes, even if it grows while being read.
//! - The text is UTF-8.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::workspace;

/// The largest prompt file accepted: 256 KiB. A prompt is sent with every request the agent makes, so
/// a file near this size already costs tens of thousands of tokens per call; anything larger is a
/// mistake (a log, a data dump, a device), not instructions.
pub const MAX_PROMPT_FILE_BYTES: u64 = 256 * 1024;

/// Why a prompt file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PromptFileError {
    /// It could not be opened or read (missing, no permission …).
    #[error("cannot read prompt file `{}`: {source}", path.display())]
    Io {
        /// The path as joined to the config's directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It lies outside the config file's directory, as written or once symlinks are followed.
    #[error(
        "prompt file `{}` {} the config file's directory `{}`",
        written.display(),
        if *through_link { "leads through a symbolic link to a file outside" } else { "is outside" },
        dir.display()
    )]
    Outside {
        /// The path as written after `file:`.
        written: PathBuf,
        /// The config file's directory (absolute, as written: the link's target is never named).
        dir: PathBuf,
        /// Whether the path is inside as written and leaves only through a symlink.
        through_link: bool,
    },
    /// It is a directory, a device, a FIFO or a socket.
    #[error("prompt file `{}` is {kind}, not a regular file", path.display())]
    NotAFile {
        /// The path as joined to the config's directory.
        path: PathBuf,
        /// What it is instead ("a directory", "a character device" …).
        kind: &'static str,
    },
    /// It is a regular file with more than one name.
    #[error(
        "prompt file `{}` has {links} hard links; a prompt file must have exactly one name",
        path.display()
    )]
    HardLinks {
        /// The path as joined to the config's directory.
        path: PathBuf,
        /// How many names the file has.
        links: u64,
    },
    /// It is larger than [`MAX_PROMPT_FILE_BYTES`].
    #[error(
        "prompt file `{}` is {}, larger than the {} a prompt file may be",
        path.display(),
        size_text(*size),
        size_text(MAX_PROMPT_FILE_BYTES)
    )]
    TooLarge {
        /// The path as joined to the config's directory.
        path: PathBuf,
        /// Its size in bytes (at least as many as were found).
        size: u64,
    },
    /// It is not UTF-8 text.
    #[error("prompt file `{}` is not UTF-8 text", path.display())]
    NotUtf8 {
        /// The path as joined to the config's directory.
        path: PathBuf,
    },
}

impl PromptFileError {
    /// How to fix it, in one sentence.
    pub fn hint(&self) -> String {
        match self {
            PromptFileError::Io { .. } => "create the file or fix the path; paths are relative to the config file's directory".into(),
            PromptFileError::Outside { through_link: false, .. } => "prompt files must lie inside the config file's directory, so that editing the config cannot send other files of this machine (keys, `/etc/shadow`, `/proc/…`) to the model: copy the file there and write its path relative to it, e.g. `file:prompts/ceo.md`".into(),
            PromptFileError::Outside { through_link: true, .. } => "prompt files must lie inside the config file's directory once symbolic links are followed, so that editing the config (or planting a link in a workspace) cannot send other files of this machine to the model: replace the link with a copy of the file".into(),
            PromptFileError::NotAFile { .. } => "point `prompt: file:` at a text file with the agent's instructions (e.g. `file:prompts/ceo.md`), relative to the config file's directory".into(),
            PromptFileError::HardLinks { .. } => "a hard link can name a file outside the config file's directory, which no path check can see: replace the file with a copy that has one name (`cp FILE FILE.new && mv FILE.new FILE`)".into(),
            PromptFileError::TooLarge { .. } => format!(
                "a prompt is sent with every request the agent makes: keep the file under {}, and put reference material in memory blocks instead",
                size_text(MAX_PROMPT_FILE_BYTES)
            ),
            PromptFileError::NotUtf8 { .. } => "save the file as UTF-8 text".into(),
        }
    }
}

/// Reads the prompt file `file` (relative paths resolve against `base_dir`, the config's directory)
/// under the rules in the module docs.
pub fn read_prompt_file(base_dir: &Path, file: &Path) -> Result<String, PromptFileError> {
    let path = base_dir.join(file);
    let io = |source| PromptFileError::Io {
        path: path.clone(),
        source,
    };
    // As written, before the file system is asked anything.
    let dir = workspace::absolute(base_dir, Path::new(""));
    let outside = |through_link| PromptFileError::Outside {
        written: file.to_path_buf(),
        dir: dir.clone(),
        through_link,
    };
    if !workspace::absolute(base_dir, file).starts_with(&dir) {
        return Err(outside(false));
    }
    // Where it really leads. The directory itself was read (the config is in it), so failing to
    // resolve it is reported like any unreadable path.
    let real_dir = std::fs::canonicalize(base_dir).map_err(io)?;
    let real = std::fs::canonicalize(&path).map_err(io)?;
    if !real.starts_with(&real_dir) {
        return Err(outside(true));
    }
    // Metadata first: some devices act when opened, and a FIFO is refused here by its type.
    let metadata = std::fs::metadata(&real).map_err(io)?;
    judge(&path, &metadata)?;
    if metadata.len() > MAX_PROMPT_FILE_BYTES {
        return Err(PromptFileError::TooLarge {
            path,
            size: metadata.len(),
        });
    }
    let handle = open_nonblocking(&real).map_err(io)?;
    // The path may have been replaced between the looks and the open; judge what was opened.
    let opened = handle.metadata().map_err(io)?;
    judge(&path, &opened)?;
    if !same_file(&metadata, &opened) || !opened_inside(&handle, &real_dir) {
        return Err(outside(true));
    }
    // Never reserve more than the cap: the file opened may have grown since it was looked at.
    let capacity = opened.len().min(MAX_PROMPT_FILE_BYTES + 1);
    let mut bytes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    handle
        .take(MAX_PROMPT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > MAX_PROMPT_FILE_BYTES {
        return Err(PromptFileError::TooLarge { path, size: read });
    }
    String::from_utf8(bytes).map_err(|_| PromptFileError::NotUtf8 { path })
}

/// A regular file with one name, or why not.
fn judge(path: &Path, metadata: &std::fs::Metadata) -> Result<(), PromptFileError> {
    if let Some(kind) = not_a_file(metadata) {
        return Err(PromptFileError::NotAFile {
            path: path.to_path_buf(),
            kind,
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if metadata.nlink() > 1 {
            return Err(PromptFileError::HardLinks {
                path: path.to_path_buf(),
                links: metadata.nlink(),
            });
        }
    }
    Ok(())
}

/// Open `path` for reading without blocking (a FIFO swapped in after the type check opens at once
/// and reads nothing), without following a final symlink, and without taking a terminal.
#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// Whether two looks saw the same file (device and inode on Unix).
#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}

/// Whether the file behind `handle` lies inside `real_dir`, as the kernel names it
/// (`/proc/self/fd/N`). Without `/proc` (other systems, or none mounted) the device-and-inode check
/// against the resolved path stands alone.
#[cfg(target_os = "linux")]
fn opened_inside(handle: &std::fs::File, real_dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    match std::fs::read_link(format!("/proc/self/fd/{}", handle.as_raw_fd())) {
        Ok(target) => target.starts_with(real_dir),
        Err(_) => true,
    }
}

#[cfg(not(target_os = "linux"))]
fn opened_inside(_: &std::fs::File, _: &Path) -> bool {
    true
}

/// What `metadata` describes when it is not a regular file.
fn not_a_file(metadata: &std::fs::Metadata) -> Option<&'static str> {
    let kind = metadata.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() {
            return Some("a character device");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_fifo() {
            return Some("a named pipe (FIFO)");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// `262144` → `256 KiB`, `1572864` → `1.5 MiB`, `12` → `12 bytes`.
fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= KIB {
        if bytes.is_multiple_of(KIB) {
            format!("{} KiB", bytes / KIB)
        } else {
            format!("{:.1} KiB", bytes as f64 / KIB as f64)
        }
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_small_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("p.md"), "Be brief.").expect("write");
        assert_eq!(
            read_prompt_file(dir.path(), Path::new("p.md")).expect("readable"),
            "Be brief."
        );
    }

    #[test]
    fn refuses_a_directory_a_device_and_an_oversized_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let err = read_prompt_file(dir.path(), Path::new(".")).expect_err("a directory");
        assert!(
            matches!(
                err,
                PromptFileError::NotAFile {
                    kind: "a directory",
                    ..
                }
            ),
            "{err}"
        );
        #[cfg(unix)]
        {
            // Outside the directory, so refused before it is even looked at; a link to it too.
            let err = read_prompt_file(dir.path(), Path::new("/dev/zero")).expect_err("a device");
            assert!(
                matches!(
                    err,
                    PromptFileError::Outside {
                        through_link: false,
                        ..
                    }
                ),
                "{err}"
            );
            std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.md")).expect("link");
            let err = read_prompt_file(dir.path(), Path::new("zero.md")).expect_err("a link");
            assert!(
                matches!(
                    err,
                    PromptFileError::Outside {
                        through_link: true,
                        ..
                    }
                ),
                "{err}"
            );
        }
        let big = usize::try_from(MAX_PROMPT_FILE_BYTES).expect("fits") + 1;
        std::fs::write(dir.path().join("big.md"), "x".repeat(big)).expect("write");
        let err = read_prompt_file(dir.path(), Path::new("big.md")).expect_err("too large");
        assert!(err.to_string().contains("larger than the 256 KiB"), "{err}");
        let exact = usize::try_from(MAX_PROMPT_FILE_BYTES).expect("fits");
        std::fs::write(dir.path().join("max.md"), "x".repeat(exact)).expect("write");
        assert!(read_prompt_file(dir.path(), Path::new("max.md")).is_ok());
    }

    #[test]
    fn refuses_non_utf8_and_names_a_missing_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("bin.md"), [0xff, 0xfe, 0x00]).expect("write");
        let err = read_prompt_file(dir.path(), Path::new("bin.md")).expect_err("binary");
        assert!(matches!(err, PromptFileError::NotUtf8 { .. }), "{err}");
        let err = read_prompt_file(dir.path(), Path::new("nope.md")).expect_err("missing");
        assert!(matches!(err, PromptFileError::Io { .. }), "{err}");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(MAX_PROMPT_FILE_BYTES), "256 KiB");
        assert_eq!(size_text(1_572_864), "1.5 MiB");
        assert_eq!(size_text(12), "12 bytes");
    }
}
