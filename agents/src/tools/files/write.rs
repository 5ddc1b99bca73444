//! `Write`, and the atomic replace that Write and Edit share.
//!
//! A file is never changed in place: the new content goes to a temporary file created (`O_EXCL`,
//! no-follow) in the same directory handle, is given the original's permissions (and owner), is
//! `fsync`ed, and is renamed over the name; then the directory is `fsync`ed. A reader — another
//! agent, Bash, a crash — sees the old file or the new one, never half of either, and a failed write
//! leaves no temporary file behind. The rename replaces the directory entry, so it can never write
//! through a symlink or a hard link to a file elsewhere.
//!
//! Overwriting an existing file needs a fresh Read by this task (see `tracking`); a new file does
//! not. Missing parent directories are created (beneath the workspace, no symlinks).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::access::{Intent, Resolved, Roots, check_regular, chown, open_error};
use super::tracking::{Hasher, ReadRecords, Snapshot, hash};
use crate::store::TaskId;

/// Who is writing: the read-before-write key and the owner of created files.
pub struct Writer<'a> {
    /// The calling agent.
    pub agent: &'a str,
    /// The calling task.
    pub task: TaskId,
    /// Its read records.
    pub records: &'a ReadRecords,
    /// The sandbox's user, who must be able to change what the tools create.
    pub owner: Option<(u32, u32)>,
}

/// The existing file at `resolved`, if any: an open handle and its metadata, checked to be a
/// regular file with one link.
pub fn existing(
    resolved: &Resolved,
    shown: &str,
) -> Result<Option<(File, rustix::fs::Stat)>, String> {
    match resolved.open_read() {
        Ok(file) => {
            let stat = check_regular(&file, shown)?;
            Ok(Some((file, stat)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(open_error(&e, shown)),
    }
}

/// The snapshot of an open file, hashing it as a stream.
pub fn snapshot_of(
    mut file: &File,
    stat: &rustix::fs::Stat,
    shown: &str,
) -> Result<Snapshot, String> {
    let mut hasher = Hasher::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(Snapshot::of(stat, hasher.finish()))
}

/// `Write {file_path, content}`: create or replace the file; the text is for the model.
pub fn write(
    roots: &Roots,
    who: &Writer<'_>,
    file_path: &str,
    content: &str,
) -> Result<String, String> {
    let resolved = roots.resolve(file_path, Intent::Write)?;
    let shown = roots.display(&resolved.path);
    let _writing = who.records.writing();
    let mut mode = 0o644;
    let mut keep_owner = who.owner;
    let created = match existing(&resolved, &shown)? {
        Some((file, stat)) => {
            let current = snapshot_of(&file, &stat, &shown)?;
            who.records
                .check(who.agent, who.task, &resolved.path, &current, &shown)?;
            mode = stat.st_mode & 0o7777;
            keep_owner = Some((stat.st_uid, stat.st_gid));
            false
        }
        None => true,
    };
    let (dir, name) = resolved
        .parent_dir(true, who.owner)
        .map_err(|e| open_error(&e, &shown))?;
    let stat = replace(&dir, &name, content.as_bytes(), mode, keep_owner)
        .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    who.records.record(
        who.agent,
        who.task,
        &resolved.path,
        Snapshot::of(&stat, hash(content.as_bytes())),
    );
    let lines = content.lines().count();
    Ok(format!(
        "{} `{shown}` ({lines} lines, {} bytes)",
        if created { "Created" } else { "Wrote" },
        content.len()
    ))
}

/// Atomically replace `name` in `dir` by `content` with permissions `mode`, owned by `owner` (when
/// this process may give files away). Returns the new file's metadata.
pub fn replace(
    dir: &OwnedFd,
    name: &OsStr,
    content: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<rustix::fs::Stat> {
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(
        ".opc-{}-{:08x}.tmp",
        std::process::id(),
        fastrand::u32(..)
    ));
    let tmp = OsString::from_vec(tmp.into_vec());
    let fd = rustix::fs::openat(
        dir,
        &tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let result = (|| {
        let mut file = File::from(fd);
        file.write_all(content)?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        give(&file, owner)?;
        file.sync_all()?;
        rustix::fs::renameat(dir, &tmp, dir, name)?;
        let stat = rustix::fs::fstat(&file)?;
        Ok(stat)
    })();
    match result {
        Ok(stat) => {
            // The rename is durable once the directory is synced.
            rustix::fs::fsync(dir)?;
            Ok(stat)
        }
        Err(e) => {
            let _ = rustix::fs::unlinkat(dir, &tmp, AtFlags::empty());
            Err(e)
        }
    }
}

/// `chown` to `owner` when it differs; a process that is not root may not give files away, and
/// then the file stays its own (which is what a non-root OPC wants).
fn give(file: &File, owner: Option<(u32, u32)>) -> io::Result<()> {
    let Some((uid, gid)) = owner else {
        return Ok(());
    };
    let stat = rustix::fs::fstat(file)?;
    if (stat.st_uid, stat.st_gid) == (uid, gid) {
        return Ok(());
    }
    match chown(file, owner) {
        Err(e) if !rustix::process::geteuid().is_root() => {
            tracing::debug!(error = %e, "file tools: cannot chown as a non-root user; keeping the owner");
            Ok(())
        }
        other => other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::{do_read, setup};
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_files_need_no_read_and_existing_ones_do() {
        let (_d, base, roots) = setup();
        let records = ReadRecords::default();
        let who = Writer {
            agent: "dev",
            task: 7,
            records: &records,
            owner: None,
        };
        let out = write(&roots, &who, "src/new.txt", "one\ntwo\n").unwrap();
        assert_eq!(out, "Created `src/new.txt` (2 lines, 8 bytes)");
        assert_eq!(
            std::fs::read_to_string(base.join("me/src/new.txt")).unwrap(),
            "one\ntwo\n"
        );
        // The write counts as seen: writing again works.
        write(&roots, &who, "src/new.txt", "three\n").unwrap();
        // A file this task did not read.
        std::fs::write(base.join("me/theirs.txt"), "theirs").unwrap();
        let err = write(&roots, &who, "theirs.txt", "mine").unwrap_err();
        assert!(err.contains("Read it first"), "{err}");
        do_read(&roots, &records, "theirs.txt", 7);
        // Changed on disk after the read.
        std::fs::write(base.join("me/theirs.txt"), "theirs, changed").unwrap();
        let err = write(&roots, &who, "theirs.txt", "mine").unwrap_err();
        assert!(err.contains("changed on disk"), "{err}");
        do_read(&roots, &records, "theirs.txt", 7);
        write(&roots, &who, "theirs.txt", "mine").unwrap();
        assert_eq!(
            std::fs::read_to_string(base.join("me/theirs.txt")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn atomic_write_keeps_permissions_and_leaves_no_temp_file() {
        let (_d, base, roots) = setup();
        let records = ReadRecords::default();
        let who = Writer {
            agent: "dev",
            task: 7,
            records: &records,
            owner: None,
        };
        let path = base.join("me/run.sh");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
        do_read(&roots, &records, "run.sh", 7);
        write(&roots, &who, "run.sh", "#!/bin/sh\necho hi\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o750);
        let names: Vec<String> = std::fs::read_dir(base.join("me"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["run.sh"]);
        // A failed replace (the name is a directory) removes its temp file.
        std::fs::create_dir(base.join("me/adir")).unwrap();
        let dir = roots
            .resolve("x", Intent::Write)
            .unwrap()
            .root_dir()
            .unwrap();
        assert!(replace(&dir, OsStr::new("adir"), b"x", 0o644, None).is_err());
        let count = std::fs::read_dir(base.join("me")).unwrap().count();
        assert_eq!(count, 2);
    }

    #[test]
    fn writes_outside_or_into_a_descendant_are_refused() {
        let (_d, base, roots) = setup();
        let records = ReadRecords::default();
        let who = Writer {
            agent: "dev",
            task: 7,
            records: &records,
            owner: None,
        };
        let err = write(&roots, &who, "../escaped.txt", "x").unwrap_err();
        assert!(err.contains("outside"), "{err}");
        let team = base.join("team/new.txt");
        let err = write(&roots, &who, team.to_str().unwrap(), "x").unwrap_err();
        assert!(err.contains("may read but not change"), "{err}");
        assert!(!team.exists());
        assert!(!base.join("escaped.txt").exists());
        // Writing through a symlink to a directory outside.
        std::os::unix::fs::symlink(base.join("team"), base.join("me/link")).unwrap();
        let err = write(&roots, &who, "link/x", "x").unwrap_err();
        assert!(err.contains("descendant"), "{err}");
    }

    #[test]
    fn a_hard_linked_file_is_not_overwritten() {
        let (_d, base, roots) = setup();
        let records = ReadRecords::default();
        let who = Writer {
            agent: "dev",
            task: 7,
            records: &records,
            owner: None,
        };
        std::fs::write(base.join("outside"), "keep").unwrap();
        std::fs::hard_link(base.join("outside"), base.join("me/hl")).unwrap();
        let err = write(&roots, &who, "hl", "x").unwrap_err();
        assert!(err.contains("hard links"), "{err}");
        assert_eq!(
            std::fs::read_to_string(base.join("outside")).unwrap(),
            "keep"
        );
    }
}
