//! Following the cluster's config (issue 36 §2): a config saved in any node's console is recorded in
//! the database's history ([`Cluster::save_config`]), and every node writes the newest saved config
//! to its own config file and reloads it, as if it had been saved there.
//!
//! When a node looks: at once on [`Wake::Config`] (sent with the saved row), and on a
//! [`Wake::Tick`] at most every [`CHECK_EVERY`] (a wake-up is a hint: one missed while the wake-up
//! connection was down is caught up then).
//!
//! What it pulls: only a config saved **after this node started** (an id greater than the newest
//! one when it started following), and each saved config at most once. A node started with a file
//! other than the newest saved config does not overwrite its file: the operator may have deployed a
//! newer file on purpose. It says so once, at start, and the console's Nodes table shows it as
//! running another config until a config is saved again (from any node's console).
//!
//! Invariants:
//! - a pulled config with validation errors is never written: the file and the running config
//!   stay as they were, and the refusal is said once (stderr, the console's banner, an event);
//! - a valid one is written atomically (a temporary file beside the config, fsync, rename, fsync of
//!   the directory; a leftover of a crash is the console save's and is removed at the next start),
//!   under the reloader's hold, and applied by the reloader: the same path as a console save, so
//!   the file watcher that sees the write finds nothing more to do;
//! - a config this node already runs (its own save coming back, or the same text saved elsewhere)
//!   is neither written nor reloaded;
//! - the database being unreachable delays following, never the node: every read is retried at
//!   the next tick.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opc_agents::store::cluster::SavedConfig;
use opc_agents::store::{Cluster, Wake};
use tokio::sync::broadcast::error::RecvError;

use super::outcome::{Report, Trigger};
use super::reloader::Reloader;
use crate::term::{eprint, print};

/// The longest a node goes without comparing its config with the newest saved one (when it missed
/// the wake-up).
const CHECK_EVERY: Duration = Duration::from_secs(3);

/// The following task; stops when dropped.
pub struct Follower {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the follower knows of the history.
struct Seen {
    /// The newest id when this node started following (`None` until it could be read): configs up
    /// to it are not pulled.
    baseline: Option<i64>,
    /// The newest id looked at (pulled, refused, or already running).
    tried: i64,
    /// When the history was last read.
    checked: Option<Instant>,
    /// Said that reading it fails (once until it succeeds again).
    failing: bool,
}

impl Reloader {
    /// Follow the configs saved in `cluster`'s history (see the module doc), and record the running
    /// config's digest in this node's row after every applied reload from now on.
    pub fn follow(self: &Arc<Self>, cluster: Arc<dyn Cluster>) -> Follower {
        let _ = self.cluster.set(cluster.clone());
        let this = self.clone();
        let task = tokio::spawn(async move {
            // Subscribed before the first read: a save committed after it is woken about.
            let mut wakes = cluster.wakes();
            let mut seen = Seen {
                baseline: None,
                tried: 0,
                checked: None,
                failing: false,
            };
            this.check(&*cluster, &mut seen).await;
            loop {
                let due = match wakes.recv().await {
                    Ok(Wake::Config(id)) => id > seen.tried,
                    Ok(Wake::Tick) | Err(RecvError::Lagged(_)) => {
                        seen.checked.is_none_or(|at| at.elapsed() >= CHECK_EVERY)
                    }
                    Ok(_) => false,
                    Err(RecvError::Closed) => {
                        // The listener is gone (the cluster is being dropped): look on our own.
                        tokio::time::sleep(CHECK_EVERY).await;
                        true
                    }
                };
                if due {
                    this.check(&*cluster, &mut seen).await;
                }
            }
        });
        Follower { task }
    }

    /// Read the newest saved config and pull it if it is due (see the module doc).
    async fn check(&self, cluster: &dyn Cluster, seen: &mut Seen) {
        seen.checked = Some(Instant::now());
        let latest = match cluster.latest_config().await {
            Ok(latest) => {
                if seen.failing {
                    tracing::info!("reading the cluster's config history works again");
                    seen.failing = false;
                }
                latest
            }
            Err(e) => {
                if !seen.failing {
                    tracing::warn!(
                        error = %e,
                        "cannot read the cluster's config history; configs saved on other nodes \
                         are applied here once it can be read"
                    );
                    seen.failing = true;
                }
                return;
            }
        };
        let Some(baseline) = seen.baseline else {
            // Start-up: what was saved before this node started is not pulled.
            let id = latest.as_ref().map_or(0, |c| c.id);
            seen.baseline = Some(id);
            seen.tried = id;
            if let Some(saved) = latest
                && digest_of(&saved) != self.digest()
            {
                eprint(&format!(
                    "opc: {} differs from the newest config saved in the cluster (#{}, {}); \
                     it is kept: only configs saved after this node started are applied here\n",
                    self.path.display(),
                    saved.id,
                    origin(&saved),
                ));
            }
            return;
        };
        let Some(saved) = latest else { return };
        if saved.id <= baseline.max(seen.tried) {
            return;
        }
        seen.tried = saved.id;
        if digest_of(&saved) == self.digest() {
            return;
        }
        self.pull(saved).await;
    }

    /// Validate `saved`, write it over the config file, and reload.
    async fn pull(&self, saved: SavedConfig) {
        let file = self.path.display().to_string();
        let base_dir = self.live.get().base_dir.clone();
        let id = saved.id;
        let from = origin(&saved);
        let text = saved.text;
        let check = {
            let (file, text) = (file.clone(), text.clone());
            tokio::task::spawn_blocking(move || {
                let refusal = match opc_hierarchy::parse(&file, text.clone(), Some(&base_dir)) {
                    Ok(_) => return None,
                    Err(opc_hierarchy::ConfigError::Invalid(report)) => {
                        (report.render(false), report.errors().count())
                    }
                    Err(other) => (format!("error: {other}\n"), 1),
                };
                let report = crate::validation::validate_text(&file, text, &base_dir);
                Some((refusal, report))
            })
            .await
        };
        match check {
            Ok(None) => {}
            Ok(Some(((message, errors), report))) => {
                self.rejected(
                    Trigger::Cluster,
                    format!(
                        "{message}opc: config #{id} ({from}) has {errors} error{}: it is not \
                         written to {file}\n",
                        if errors == 1 { "" } else { "s" }
                    ),
                    Some(report),
                    errors,
                );
                return;
            }
            Err(_) => {
                tracing::warn!(id, "checking a config saved in the cluster did not finish");
                return;
            }
        }
        let held = self.hold().await;
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || write_atomically(&path, &text)).await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprint(&format!(
                    "opc: cannot apply config #{id} ({from}) here: {e}; {file} is unchanged and \
                     the running config stays\n"
                ));
                return;
            }
            Err(_) => {
                eprint(&format!(
                    "opc: writing config #{id} ({from}) did not finish; {file} is unchanged or \
                     whole, and the running config stays\n"
                ));
                return;
            }
        }
        print(&format!(
            "opc: config #{id} ({from}) written to {file}; reloading\n"
        ));
        if let Report::Rejected { .. } = self.reload_held(held, Trigger::Cluster).await {
            tracing::warn!(
                id,
                "a config saved in the cluster was written here but not applied"
            );
        }
    }
}

/// The digest of `saved`'s text, computed here (a row written by hand may carry any digest).
fn digest_of(saved: &SavedConfig) -> String {
    crate::node::config_digest(saved.text.as_bytes())
}

/// Where `saved` comes from, for a log line: `saved on node a by console (loopback)`.
fn origin(saved: &SavedConfig) -> String {
    match &saved.by {
        Some(by) => format!("saved on node {} by {by}", saved.node),
        None => format!("saved on node {}", saved.node),
    }
}

/// Write `text` over `path` atomically: a temporary file in the same directory (named as a console
/// save's, so a crash's leftover is settled the same way at the next start), fsync, rename, fsync
/// of the directory.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or("config.yaml".into(), |n| n.to_string_lossy().into_owned());
    let temp = dir.join(format!(".{name}.saving-{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(std::io::Error::new(
            e.kind(),
            format!("cannot write {}: {e}", path.display()),
        ));
    }
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opc.config.yaml");
        std::fs::write(&path, "old\n").unwrap();
        write_atomically(&path, "new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["opc.config.yaml"]);
    }

    #[test]
    fn a_write_that_fails_leaves_the_file_and_says_which() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file would go: the rename fails.
        let path = dir.path().join("opc.config.yaml");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), "x").unwrap();
        let e = write_atomically(&path, "new\n").unwrap_err();
        assert!(e.to_string().contains("opc.config.yaml"), "{e}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["opc.config.yaml"], "the temporary file is removed");
    }

    #[test]
    fn origins_name_the_node_and_who_when_known() {
        let mut saved = SavedConfig {
            id: 3,
            saved_ms: 0,
            node: "a".into(),
            by: Some("console (loopback)".into()),
            digest: "x".into(),
            text: "t".into(),
        };
        assert_eq!(origin(&saved), "saved on node a by console (loopback)");
        saved.by = None;
        assert_eq!(origin(&saved), "saved on node a");
        assert_eq!(digest_of(&saved), crate::node::config_digest(b"t"));
    }
}
