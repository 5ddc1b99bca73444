//! The file watcher: reload when the config file or one of its prompt files changes on disk,
//! debounced so an editor's burst of writes is one reload.
//!
//! Invariants: directories are watched, not files (editors replace a file by renaming another over it,
//! which would end a watch on the file itself); after an applied reload the watched set follows the
//! new prompt files; a platform that cannot watch only warns, and the console and `SIGHUP` still
//! reload.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::files::{same_file, watched_files};
use super::outcome::{Report, Trigger};
use super::reloader::Reloader;
use crate::term::eprint;

/// How long the watcher waits for a burst of writes to settle before reloading.
const DEBOUNCE: Duration = Duration::from_millis(250);

impl Reloader {
    /// Watch the config file and its prompt files; reload (debounced) when one of them changes.
    /// Returns the watcher, which stops when dropped; `None` (with a warning) when the platform
    /// cannot watch, in which case the console and `SIGHUP` still reload.
    pub fn watch(self: &Arc<Self>) -> Option<Watcher> {
        let (tx, mut rx) = mpsc::channel::<()>(1);
        let watched = Arc::new(Mutex::new(watched_files(&self.path, &self.live.get())));
        let filter = watched.clone();
        let debouncer = notify_debouncer_mini::new_debouncer(
            DEBOUNCE,
            move |events: notify_debouncer_mini::DebounceEventResult| {
                let Ok(events) = events else { return };
                let files = filter.lock().unwrap_or_else(|p| p.into_inner());
                if events
                    .iter()
                    .any(|e| files.iter().any(|f| same_file(&e.path, f)))
                {
                    // A full channel already has a reload queued, which will read the latest files.
                    let _ = tx.try_send(());
                }
            },
        );
        let debouncer = match debouncer {
            Ok(d) => Arc::new(Mutex::new(d)),
            Err(e) => {
                eprint(&format!(
                    "warning: cannot watch {} for changes ({e}); reload from the admin console or with SIGHUP\n",
                    self.path.display()
                ));
                return None;
            }
        };
        let mut dirs = Vec::new();
        watch_dirs(&debouncer, &watched, &mut dirs);
        let this = self.clone();
        let watching = debouncer.clone();
        let task = tokio::spawn(async move {
            while rx.recv().await.is_some() {
                if let Report::Applied { .. } = this.reload(Trigger::File).await {
                    // Prompt files may have moved: follow the new set.
                    *watched.lock().unwrap_or_else(|p| p.into_inner()) =
                        watched_files(&this.path, &this.live.get());
                    watch_dirs(&watching, &watched, &mut dirs);
                }
            }
        });
        Some(Watcher {
            _debouncer: debouncer,
            task,
        })
    }
}

type Debouncer = notify_debouncer_mini::Debouncer<notify::RecommendedWatcher>;

/// Watch the directories of `files` not watched yet (a directory, not the file: editors replace a
/// file by renaming another over it, which would end a watch on the file itself).
fn watch_dirs(debouncer: &Mutex<Debouncer>, files: &Mutex<Vec<PathBuf>>, dirs: &mut Vec<PathBuf>) {
    let wanted: Vec<PathBuf> = files
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    let mut debouncer = debouncer.lock().unwrap_or_else(|p| p.into_inner());
    for dir in wanted {
        if dirs.contains(&dir) {
            continue;
        }
        match debouncer
            .watcher()
            .watch(&dir, notify::RecursiveMode::NonRecursive)
        {
            Ok(()) => dirs.push(dir),
            Err(e) => eprint(&format!(
                "warning: cannot watch {} for changes ({e}); reload from the admin console or with SIGHUP\n",
                dir.display()
            )),
        }
    }
}

/// The file watcher; stops when dropped.
pub struct Watcher {
    _debouncer: Arc<Mutex<Debouncer>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}
