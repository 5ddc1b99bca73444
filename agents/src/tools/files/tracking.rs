//! What each task has read: the read-before-write rule.
//!
//! Two agents (or an agent and its own Bash) can share a workspace, so a model overwriting a file
//! from memory could silently undo someone else's change. Write of an existing file and Edit are
//! therefore allowed only for a file this task (of this agent) has Read, and only while the file is
//! as it was then. A record is the file's size, modification time and SHA-256 of its content, taken
//! while streaming it; "unchanged" is decided by size and content hash (a `touch` that changed only
//! the mtime is not a change). A successful Write or Edit records what it wrote, so consecutive
//! edits work without re-reading.
//!
//! Records are kept in memory, keyed by (agent, task, canonical path), and bounded (the oldest are
//! dropped first): a task resumed after a restart simply Reads again.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use indexmap::IndexMap;
use sha2::{Digest, Sha256};

use crate::store::TaskId;

/// How many records are kept across all tasks.
const CAPACITY: usize = 8192;

/// A file as one task saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Size in bytes.
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, i64),
    /// SHA-256 of the content.
    pub hash: [u8; 32],
}

impl Snapshot {
    /// The snapshot of `content`, with the size and mtime from `stat`.
    pub fn of(stat: &rustix::fs::Stat, hash: [u8; 32]) -> Snapshot {
        Snapshot {
            size: stat.st_size as u64,
            mtime: (stat.st_mtime, stat.st_mtime_nsec as i64),
            hash,
        }
    }
}

/// A streaming SHA-256.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    /// Feed bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    /// The digest.
    pub fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

/// SHA-256 of a byte slice.
pub fn hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

type Key = (String, TaskId, PathBuf);

/// The read records of all running tasks.
#[derive(Debug, Default)]
pub struct ReadRecords(Mutex<IndexMap<Key, Snapshot>>, Mutex<()>);

impl ReadRecords {
    /// Held by a Write or Edit from its check to its record, so two calls of one turn (which may
    /// run concurrently) cannot both pass the check on the same old content and lose one change.
    pub fn writing(&self) -> MutexGuard<'_, ()> {
        self.1.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record that `agent`'s task `task` has seen `path` as `snapshot`.
    pub fn record(&self, agent: &str, task: TaskId, path: &Path, snapshot: Snapshot) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let key = (agent.to_string(), task, path.to_path_buf());
        map.shift_remove(&key);
        map.insert(key, snapshot);
        while map.len() > CAPACITY {
            map.shift_remove_index(0);
        }
    }

    /// Whether the file, now `current`, may be overwritten by this task; the error says to Read.
    pub fn check(
        &self,
        agent: &str,
        task: TaskId,
        path: &Path,
        current: &Snapshot,
        shown: &str,
    ) -> Result<(), String> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&(agent.to_string(), task, path.to_path_buf())) {
            None => Err(format!(
                "`{shown}` already exists and you have not Read it in this task: Read it first, \
                 then change it (someone else may have written it)"
            )),
            Some(seen) if seen.size != current.size || seen.hash != current.hash => Err(format!(
                "`{shown}` changed on disk since you Read it ({} bytes then, {} now): Read it \
                 again before changing it, so you do not overwrite someone else's change",
                seen.size, current.size
            )),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn snap(size: u64, content: &[u8]) -> Snapshot {
        Snapshot {
            size,
            mtime: (1, 0),
            hash: hash(content),
        }
    }

    #[test]
    fn unread_changed_and_unchanged() {
        let r = ReadRecords::default();
        let p = Path::new("/w/a");
        let err = r.check("dev", 1, p, &snap(1, b"a"), "a").unwrap_err();
        assert!(err.contains("Read it first"), "{err}");
        r.record("dev", 1, p, snap(1, b"a"));
        r.check("dev", 1, p, &snap(1, b"a"), "a").unwrap();
        // Only the mtime moved: still the same file.
        let touched = Snapshot {
            mtime: (2, 0),
            ..snap(1, b"a")
        };
        r.check("dev", 1, p, &touched, "a").unwrap();
        let err = r.check("dev", 1, p, &snap(1, b"b"), "a").unwrap_err();
        assert!(err.contains("changed on disk"), "{err}");
        // Another task, or another agent on the same task id, has not read it.
        assert!(r.check("dev", 2, p, &snap(1, b"a"), "a").is_err());
        assert!(r.check("qa", 1, p, &snap(1, b"a"), "a").is_err());
    }

    #[test]
    fn records_are_bounded() {
        let r = ReadRecords::default();
        for i in 0..(CAPACITY + 10) {
            r.record("dev", i as TaskId, Path::new("/w/a"), snap(0, b""));
        }
        assert_eq!(r.0.lock().unwrap().len(), CAPACITY);
        assert!(
            r.check("dev", 0, Path::new("/w/a"), &snap(0, b""), "a")
                .is_err()
        );
    }
}
