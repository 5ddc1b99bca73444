//! The lock file that keeps a second engine process off the same database.

use std::path::Path;

use super::{Db, StoreError};

/// Claim `<database>.lock` for this process (an advisory OS lock, released when the file is closed,
/// including when the process dies). Held by the engine (`opc run`, `opc chat`) for its lifetime, and
/// by `opc privacy erase` while it rewrites the database, so the two never overlap.
pub fn claim(path: &Path) -> Result<std::fs::File, StoreError> {
    let mut lock_path = path.to_path_buf().into_os_string();
    lock_path.push(".lock");
    let lock_path = std::path::PathBuf::from(lock_path);
    let locked = |reason: String| StoreError::Locked {
        path: path.display().to_string(),
        lock: format!("{}: {reason}", lock_path.display()),
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| locked(e.to_string()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(locked("held by another process".into())),
        Err(std::fs::TryLockError::Error(e)) => Err(locked(e.to_string())),
    }
}

impl Db {
    /// Claim the database for this process: the engine runs startup recovery and resumes suspended
    /// trees, which must never happen twice over one database. Readers (`opc tasks`) do not lock.
    pub fn lock_exclusive(&self) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = claim(path)?;
        *self.lock.lock().unwrap_or_else(|p| p.into_inner()) = Some(file);
        Ok(())
    }
}
