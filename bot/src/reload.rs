//! Hot reload of `opc.config.yaml` in `opc run`: a save from the admin console, a change to the file
//! or to a prompt file on disk (watched, debounced), or `SIGHUP`.
//!
//! A reload reads the file, validates it exactly as `opc validate` does, and only then applies it:
//! the engine builds a new runtime for roots started from then on ([`opc_agents::Engine::reload`]),
//! the gateway picks up the new rate limits, and [`LiveConfig`] — which `/api/org`, approvers and
//! the console read — switches in one step.
//!
//! Invariants:
//! - an invalid config is never applied: the running one stays, and the errors go to stderr, the
//!   console's banner ([`Reloader::status`]) and an event ([`Event::ConfigRejected`]);
//! - reloads run one at a time, and a reload of the files already running does nothing (the console's
//!   own save is seen again by the watcher and ignored that way);
//! - trees in flight finish with the config they started with; no inbound message waits on a reload
//!   or is dropped by one (the gateway reads the config per message);
//! - settings that live in a running connection or file (the web listener, Slack, Discord, the
//!   database) are not swapped: a reload that changes them says a restart is needed for them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opc_agents::{Engine, Event};
use opc_hierarchy::schema::Prompt;
use opc_hierarchy::{ConfigError, Loaded};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::commands::eprint;
use crate::gateway::Gateway;
use crate::live::LiveConfig;

/// How long the watcher waits for a burst of writes to settle before reloading.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// What asked for a reload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// A save from the admin console.
    Console,
    /// The config or a prompt file changed on disk.
    File,
    /// `SIGHUP`.
    Signal,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::Console => "console",
            Trigger::File => "file",
            Trigger::Signal => "signal",
        }
    }
}

/// What one reload did.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Report {
    /// The new config runs.
    Applied {
        /// What asked for it.
        trigger: Trigger,
        /// When (RFC 3339).
        at: String,
        /// The config's generation now.
        generation: u64,
        /// Agents in the new org.
        agents: usize,
        /// Agents added and removed.
        added: Vec<String>,
        removed: Vec<String>,
        /// Removed agents that still have live tasks (they finish under the old config).
        removed_live: Vec<RemovedLive>,
        /// Changed settings that take effect only after a restart.
        restart_needed: Vec<String>,
    },
    /// The files are those already running.
    Unchanged {
        /// What asked for it.
        trigger: Trigger,
    },
    /// The config was refused; the running one stays.
    Rejected {
        /// What asked for it.
        trigger: Trigger,
        /// When (RFC 3339).
        at: String,
        /// Why, as `opc validate` prints it (plain text).
        message: String,
        /// The `opc validate --format json` object, when the file was readable.
        report: Option<Value>,
    },
}

/// A removed agent's live tasks.
#[derive(Clone, Debug, Serialize)]
pub struct RemovedLive {
    /// The agent.
    pub agent: String,
    /// Its live tasks.
    pub tasks: usize,
}

/// The reload state the console shows.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The running config's generation.
    pub generation: u64,
    /// The last reload that did something (applied or rejected), if any.
    pub last: Option<Report>,
    /// The running config is older than the file: the last change was rejected and not fixed yet.
    pub stale: bool,
}

/// Applies config changes to a running `opc run`.
pub struct Reloader {
    path: PathBuf,
    live: Arc<LiveConfig>,
    engine: Engine,
    gateway: Gateway,
    /// Fingerprint of the files running now; held while a reload runs, so reloads are serial.
    running: tokio::sync::Mutex<[u8; 32]>,
    /// Fingerprint of the last files refused, so the watcher does not report them twice.
    refused: Mutex<Option<[u8; 32]>>,
    last: Mutex<Option<Report>>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("path", &self.path)
            .finish()
    }
}

impl Reloader {
    /// A reloader for the config at `path`, which `live` holds loaded.
    pub fn new(
        path: PathBuf,
        live: Arc<LiveConfig>,
        engine: Engine,
        gateway: Gateway,
    ) -> Arc<Reloader> {
        let running = fingerprint(&path, &live.get()).unwrap_or_default();
        Arc::new(Reloader {
            path,
            live,
            engine,
            gateway,
            running: tokio::sync::Mutex::new(running),
            refused: Mutex::new(None),
            last: Mutex::new(None),
        })
    }

    /// What the console shows: the generation, the last reload, and whether a refused change is
    /// pending.
    pub fn status(&self) -> Status {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Status {
            generation: self.live.generation(),
            stale: matches!(last, Some(Report::Rejected { .. })),
            last,
        }
    }

    /// Read the files and apply them if they are valid and changed.
    pub async fn reload(&self, trigger: Trigger) -> Report {
        let held = self.hold().await;
        self.reload_held(held, trigger).await
    }

    /// Hold off every other reload until [`Reloader::reload_held`]: a console save takes this before
    /// it writes the file, so the watcher, seeing the write, finds the save's reload done (and does
    /// nothing) instead of applying the file first and leaving the save to report "unchanged".
    pub async fn hold(&self) -> Held<'_> {
        Held(self.running.lock().await)
    }

    /// [`Reloader::reload`] under a hold already taken.
    pub async fn reload_held(&self, held: Held<'_>, trigger: Trigger) -> Report {
        let mut running = held.0;
        let path = self.path.clone();
        let read = tokio::task::spawn_blocking(move || {
            let loaded = opc_hierarchy::load(&path);
            let text = std::fs::read_to_string(&path).ok();
            (loaded, text)
        })
        .await;
        let (loaded, text) = match read {
            Ok(read) => read,
            Err(_) => {
                return self.rejected(trigger, "the config could not be read".into(), None, 1);
            }
        };
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(error) => {
                let (message, errors) = match &error {
                    ConfigError::Invalid(report) => (report.render(false), report.errors().count()),
                    other => (format!("error: {other}\n"), 1),
                };
                let report = text.map(|text| {
                    crate::commands::validate::validate_text(
                        &self.path.display().to_string(),
                        text,
                        &self.live.get().base_dir,
                    )
                });
                let print = match fingerprint_text(report.as_ref(), &message) {
                    print if trigger == Trigger::File => {
                        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
                        let again = *refused == Some(print);
                        *refused = Some(print);
                        !again
                    }
                    _ => true,
                };
                if !print {
                    return Report::Unchanged { trigger };
                }
                return self.rejected(trigger, message, report, errors);
            }
        };
        let print = fingerprint(&self.path, &loaded).unwrap_or_default();
        if print == *running {
            return Report::Unchanged { trigger };
        }
        let old = self.live.get();
        let engine = self.engine.clone();
        let new = Arc::new(loaded);
        let applying = new.clone();
        let applied = tokio::task::spawn_blocking(move || {
            engine.reload(&applying, |var| std::env::var(var).ok())
        })
        .await;
        let reloaded = match applied {
            Ok(Ok(reloaded)) => reloaded,
            Ok(Err(e)) => {
                return self.rejected(trigger, format!("error: {e}\n"), None, 1);
            }
            Err(_) => {
                return self.rejected(
                    trigger,
                    "error: the reload did not finish\n".into(),
                    None,
                    1,
                );
            }
        };
        self.gateway
            .apply_config(&old, &new, crate::commands::chat::missing_key(&new));
        if new.report.warnings().next().is_some() {
            eprint(&new.report.render(true));
        }
        let generation = self.live.set(new.clone());
        *running = print;
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = None;

        let added: Vec<String> = new
            .config
            .agents
            .keys()
            .filter(|a| !old.config.agents.contains_key(*a))
            .cloned()
            .collect();
        let removed: Vec<String> = old
            .config
            .agents
            .keys()
            .filter(|a| !new.config.agents.contains_key(*a))
            .cloned()
            .collect();
        let restart_needed = restart_needed(&old, &new);
        let removed_live: Vec<RemovedLive> = reloaded
            .removed_live
            .into_iter()
            .map(|(agent, tasks)| RemovedLive { agent, tasks })
            .collect();
        let mut line = format!(
            "opc: config reloaded ({}) — generation {generation}, {} agents",
            trigger.as_str(),
            new.org.len()
        );
        if !added.is_empty() {
            line.push_str(&format!("; added {}", added.join(", ")));
        }
        if !removed.is_empty() {
            line.push_str(&format!("; removed {}", removed.join(", ")));
        }
        line.push('\n');
        for r in &removed_live {
            line.push_str(&format!(
                "opc: `{}` was removed but has {} live task{}: {} under the config {} started with\n",
                r.agent,
                r.tasks,
                if r.tasks == 1 { "" } else { "s" },
                if r.tasks == 1 { "it finishes" } else { "they finish" },
                if r.tasks == 1 { "it" } else { "they" },
            ));
        }
        for setting in &restart_needed {
            line.push_str(&format!(
                "opc: `{setting}` changed: it applies when `opc run` restarts (the running one is kept until then)\n"
            ));
        }
        crate::commands::print(&line);
        self.engine.events().publish(Event::ConfigReloaded {
            generation,
            trigger: trigger.as_str().into(),
            agents: new.org.len(),
        });
        let report = Report::Applied {
            trigger,
            at: now(),
            generation,
            agents: new.org.len(),
            added,
            removed,
            removed_live,
            restart_needed,
        };
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(report.clone());
        report
    }

    fn rejected(
        &self,
        trigger: Trigger,
        message: String,
        report: Option<Value>,
        errors: usize,
    ) -> Report {
        eprint(&message);
        eprint(&format!(
            "{}: reload ({}) refused — the running config stays\n",
            self.path.display(),
            trigger.as_str()
        ));
        tracing::warn!(
            trigger = trigger.as_str(),
            errors,
            "config reload refused; the running config stays"
        );
        self.engine.events().publish(Event::ConfigRejected {
            trigger: trigger.as_str().into(),
            errors,
        });
        let report = Report::Rejected {
            trigger,
            at: now(),
            message,
            report,
        };
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(report.clone());
        report
    }

    /// Reload on `SIGHUP` until the process stops.
    pub fn on_sighup(self: &Arc<Self>) {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::hangup()) {
                Ok(mut hangup) => {
                    let this = self.clone();
                    tokio::spawn(async move {
                        while hangup.recv().await.is_some() {
                            this.reload(Trigger::Signal).await;
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not listen for SIGHUP; reload from the console or by saving the file");
                }
            }
        }
    }

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

/// Other reloads wait while this is held (see [`Reloader::hold`]).
pub struct Held<'a>(tokio::sync::MutexGuard<'a, [u8; 32]>);

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

/// Settings a reload cannot swap in a running process, when they changed.
fn restart_needed(old: &Loaded, new: &Loaded) -> Vec<String> {
    let (o, n) = (&old.config, &new.config);
    let mut changed = Vec::new();
    if o.channels.web != n.channels.web {
        changed.push("channels.web".to_string());
    }
    if o.channels.slack != n.channels.slack {
        changed.push("channels.slack".to_string());
    }
    if o.channels.discord != n.channels.discord {
        changed.push("channels.discord".to_string());
    }
    if o.framework.memory.path != n.framework.memory.path {
        changed.push("framework.memory.path".to_string());
    }
    changed
}

/// The config file and every prompt file it names, as absolute paths.
fn watched_files(path: &Path, loaded: &Loaded) -> Vec<PathBuf> {
    let mut files = vec![absolute(path)];
    for agent in loaded.config.agents.values() {
        if let Some(Prompt::File(file)) = &agent.prompt {
            files.push(absolute(&loaded.base_dir.join(file)));
        }
    }
    files
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn same_file(event: &Path, watched: &Path) -> bool {
    event == watched
        || (event.file_name() == watched.file_name()
            && event.parent().map(absolute) == watched.parent().map(absolute))
}

/// A digest of the config file and its prompt files as they are on disk now (`None` when the config
/// cannot be read).
fn fingerprint(path: &Path, loaded: &Loaded) -> Option<[u8; 32]> {
    let mut hash = Sha256::new();
    hash.update(std::fs::read(path).ok()?);
    for file in watched_files(path, loaded).iter().skip(1) {
        hash.update(file.as_os_str().as_encoded_bytes());
        match std::fs::read(file) {
            Ok(bytes) => {
                hash.update([1]);
                hash.update(bytes);
            }
            Err(_) => hash.update([0]),
        }
    }
    Some(hash.finalize().into())
}

fn fingerprint_text(report: Option<&Value>, message: &str) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(message.as_bytes());
    if let Some(report) = report {
        hash.update(report.to_string().as_bytes());
    }
    hash.finalize().into()
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}
