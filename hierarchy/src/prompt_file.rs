//! Reading an agent's prompt file (`prompt: file:prompts/ceo.md`): the one function every reader uses.
//!
//! Why one function: a prompt file is read by `opc validate`, by the admin console's validation and
//! save, by every hot reload (to validate it and to fingerprint it) and by the engine when it builds
//! an agent's system prompt. A config is user input, and `prompt: file:/dev/zero` (or a FIFO, a
//! directory, a multi-gigabyte log) must not make any of them read without end or block. So every
//! reader goes through [`read_prompt_file`], which applies the same rules everywhere.
//!
//! Invariants: the path must name a regular file (after following symlinks); it is never read past
//! [`MAX_PROMPT_FILE_BYTES`] + 1 bytes, even if it grows while being read; the text is UTF-8. A device,
//! FIFO or socket is refused from its metadata, before it is opened, so opening cannot block.

use std::io::Read;
use std::path::{Path, PathBuf};

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
        /// The resolved path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is a directory, a device, a FIFO or a socket.
    #[error("prompt file `{}` is {kind}, not a regular file", path.display())]
    NotAFile {
        /// The resolved path.
        path: PathBuf,
        /// What it is instead ("a directory", "a character device" …).
        kind: &'static str,
    },
    /// It is larger than [`MAX_PROMPT_FILE_BYTES`].
    #[error(
        "prompt file `{}` is {}, larger than the {} a prompt file may be",
        path.display(),
        size_text(*size),
        size_text(MAX_PROMPT_FILE_BYTES)
    )]
    TooLarge {
        /// The resolved path.
        path: PathBuf,
        /// Its size in bytes (at least as many as were found).
        size: u64,
    },
    /// It is not UTF-8 text.
    #[error("prompt file `{}` is not UTF-8 text", path.display())]
    NotUtf8 {
        /// The resolved path.
        path: PathBuf,
    },
}

impl PromptFileError {
    /// How to fix it, in one sentence.
    pub fn hint(&self) -> String {
        match self {
            PromptFileError::Io { .. } => "create the file or fix the path; paths are relative to the config file's directory".into(),
            PromptFileError::NotAFile { .. } => "point `prompt: file:` at a text file with the agent's instructions (e.g. `file:prompts/ceo.md`), relative to the config file's directory".into(),
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
    // Metadata first: opening a FIFO for reading would block until a writer comes.
    let metadata = std::fs::metadata(&path).map_err(io)?;
    if let Some(kind) = not_a_file(&metadata) {
        return Err(PromptFileError::NotAFile { path, kind });
    }
    if metadata.len() > MAX_PROMPT_FILE_BYTES {
        return Err(PromptFileError::TooLarge {
            path,
            size: metadata.len(),
        });
    }
    let handle = std::fs::File::open(&path).map_err(io)?;
    // The path may have been replaced between the two looks; judge what was opened.
    let opened = handle.metadata().map_err(io)?;
    if let Some(kind) = not_a_file(&opened) {
        return Err(PromptFileError::NotAFile { path, kind });
    }
    // Never reserve more than the cap: the file opened may be another (and huge) one than the one
    // looked at.
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
            let err = read_prompt_file(dir.path(), Path::new("/dev/zero")).expect_err("a device");
            assert!(err.to_string().contains("a character device"), "{err}");
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
