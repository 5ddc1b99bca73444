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
//!   database) are not swapped: a reload that changes them says a restart is needed for them. They are
//!   compared with the values the process started with ([`LiveConfig::started`]), so setting one back
//!   to the running value is not reported as a change;
//! - every reload says what it did, on stdout or stderr and in [`Reloader::status`]: applied (with the
//!   agents added, removed and changed and the sections changed), unchanged (said for `SIGHUP`, which
//!   a person sent and waits to see answered; the watcher's no-op rounds stay quiet), or refused with
//!   the errors. A file put back byte for byte to the running config withdraws a refusal: the banner
//!   goes away.

use std::collections::HashMap;
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
        /// Agents kept whose settings or prompt file changed, with what changed.
        changed: Vec<AgentChange>,
        /// Other settings that changed and apply now (`framework.privacy`, `gateway.rateLimit` …).
        sections: Vec<String>,
        /// Removed agents that still have live tasks (they finish under the old config).
        removed_live: Vec<RemovedLive>,
        /// Settings that now differ from the running ones and take effect only after a restart.
        restart_needed: Vec<String>,
        /// The line printed for it: what changed, in words.
        summary: String,
    },
    /// The files are those already running.
    Unchanged {
        /// What asked for it.
        trigger: Trigger,
        /// The running config's generation.
        generation: u64,
        /// The files were put back to the running config after a refused change: the refusal no
        /// longer stands.
        restored: bool,
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

/// An agent kept by a reload whose settings changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentChange {
    /// The agent.
    pub agent: String,
    /// Its keys that changed (`tools`, `model` …; `prompt file` when only the file's text did).
    pub what: Vec<&'static str>,
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
    /// The last reload that did something (applied, rejected, or a restore that withdrew a refusal),
    /// if any.
    pub last: Option<Report>,
    /// The running config is older than the file: the last change was rejected and not fixed yet.
    pub stale: bool,
    /// Reloads finished so far, whatever their outcome: a client that asked for one (`SIGHUP`, a
    /// save) sees it counted once it is done and printed.
    pub checked: u64,
}

/// The files running now: one digest of the config and its prompt files (to tell "unchanged"), and
/// each agent's prompt-file digest (to tell whose prompt file changed).
#[derive(Clone, Debug, Default)]
struct Snapshot {
    print: [u8; 32],
    prompts: HashMap<String, [u8; 32]>,
}

/// Applies config changes to a running `opc run`.
pub struct Reloader {
    path: PathBuf,
    live: Arc<LiveConfig>,
    engine: Engine,
    gateway: Gateway,
    /// The files running now; held while a reload runs, so reloads are serial.
    running: tokio::sync::Mutex<Snapshot>,
    /// Fingerprint of the last files refused, so the watcher does not report them twice.
    refused: Mutex<Option<[u8; 32]>>,
    last: Mutex<Option<Report>>,
    checked: std::sync::atomic::AtomicU64,
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
        let running = snapshot(&path, &live.get()).unwrap_or_default();
        Arc::new(Reloader {
            path,
            live,
            engine,
            gateway,
            running: tokio::sync::Mutex::new(running),
            refused: Mutex::new(None),
            last: Mutex::new(None),
            checked: std::sync::atomic::AtomicU64::new(0),
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
            checked: self.checked.load(std::sync::atomic::Ordering::SeqCst),
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
        let report = self.reload_inner(held, trigger).await;
        // Counted after the outcome is printed and recorded, so a client that waits for the count
        // finds both.
        self.checked
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        report
    }

    async fn reload_inner(&self, held: Held<'_>, trigger: Trigger) -> Report {
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
                    return Report::Unchanged {
                        trigger,
                        generation: self.live.generation(),
                        restored: false,
                    };
                }
                return self.rejected(trigger, message, report, errors);
            }
        };
        let snapshot = snapshot(&self.path, &loaded).unwrap_or_default();
        if snapshot.print == running.print {
            return self.unchanged(trigger);
        }
        let old = self.live.get();
        let engine = self.engine.clone();
        let new = Arc::new(loaded);
        let applying = new.clone();
        // A reload reads prompt files and rewrites memory: off the runtime's threads.
        let handle = tokio::runtime::Handle::current();
        let applied = tokio::task::spawn_blocking(move || {
            handle.block_on(engine.reload(&applying, |var| std::env::var(var).ok()))
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
        let changes = Changes::between(
            (&old, &running.prompts),
            (&new, &snapshot.prompts),
            &self.live.started(),
        );
        *running = snapshot;
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = None;

        let removed_live: Vec<RemovedLive> = reloaded
            .removed_live
            .into_iter()
            .map(|(agent, tasks)| RemovedLive { agent, tasks })
            .collect();
        let summary = format!(
            "config reloaded ({}) — generation {generation}, {} agents; {}",
            trigger.as_str(),
            new.org.len(),
            changes.describe()
        );
        let mut line = format!("opc: {summary}\n");
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
        for setting in &changes.restart_needed {
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
        let Changes {
            added,
            removed,
            changed,
            sections,
            restart_needed,
        } = changes;
        let report = Report::Applied {
            trigger,
            at: now(),
            generation,
            agents: new.org.len(),
            added,
            removed,
            changed,
            sections,
            removed_live,
            restart_needed,
            summary,
        };
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(report.clone());
        report
    }

    /// The files are the running ones. After a refusal that means they were put back: the refusal
    /// is withdrawn (the console's banner clears) and that is said whatever the trigger. Otherwise it
    /// is said only to `SIGHUP`, whose sender is waiting for an answer.
    fn unchanged(&self, trigger: Trigger) -> Report {
        let generation = self.live.generation();
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let restored = matches!(*last, Some(Report::Rejected { .. }));
        let report = Report::Unchanged {
            trigger,
            generation,
            restored,
        };
        if restored {
            crate::commands::print(&format!(
                "opc: config reload ({}): {} matches the running config again (generation {generation}); the refused change is withdrawn\n",
                trigger.as_str(),
                self.path.display()
            ));
            *last = Some(report.clone());
        } else if trigger == Trigger::Signal {
            crate::commands::print(&format!(
                "opc: config reload (signal): {} is unchanged — generation {generation} keeps running\n",
                self.path.display()
            ));
        }
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
pub struct Held<'a>(tokio::sync::MutexGuard<'a, Snapshot>);

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

/// What a reload changed, compared with the config that ran before it.
#[derive(Clone, Debug, Default, PartialEq)]
struct Changes {
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<AgentChange>,
    sections: Vec<String>,
    restart_needed: Vec<String>,
}

impl Changes {
    /// From `old` (with its prompt-file digests) to `new`. Settings a reload cannot swap in are judged
    /// against `started`, the values actually running: one counts only when this reload changed it
    /// and it now differs from what runs, so putting `listen` back is not reported as a change.
    fn between(
        (old, old_prompts): (&Loaded, &HashMap<String, [u8; 32]>),
        (new, new_prompts): (&Loaded, &HashMap<String, [u8; 32]>),
        started: &Loaded,
    ) -> Changes {
        let (o, n, s) = (&old.config, &new.config, &started.config);
        let mut changes = Changes {
            added: n
                .agents
                .keys()
                .filter(|a| !o.agents.contains_key(*a))
                .cloned()
                .collect(),
            removed: o
                .agents
                .keys()
                .filter(|a| !n.agents.contains_key(*a))
                .cloned()
                .collect(),
            ..Changes::default()
        };
        for (id, after) in &n.agents {
            let Some(before) = o.agents.get(id) else {
                continue;
            };
            let mut what = Vec::new();
            let mut differs = |key: &'static str, changed: bool| {
                if changed {
                    what.push(key);
                }
            };
            differs("role", before.role != after.role);
            differs("level", before.level != after.level);
            differs("parent", before.parent != after.parent);
            differs("children", before.children != after.children);
            differs("prompt", before.prompt != after.prompt);
            differs(
                "prompt file",
                before.prompt == after.prompt && old_prompts.get(id) != new_prompts.get(id),
            );
            differs("model", before.model != after.model);
            differs("tools", before.tools != after.tools);
            differs("memory", before.memory != after.memory);
            differs("approvers", before.approvers != after.approvers);
            if !what.is_empty() {
                changes.changed.push(AgentChange {
                    agent: id.clone(),
                    what,
                });
            }
        }

        let (of, nf) = (&o.framework, &n.framework);
        let mut section = |name: String, changed: bool| {
            if changed {
                changes.sections.push(name);
            }
        };
        section("framework.name".into(), of.name != nf.name);
        section(
            "framework.defaultModel".into(),
            of.default_model != nf.default_model,
        );
        section("framework.fastModel".into(), of.fast_model != nf.fast_model);
        section(
            "framework.defaultProvider".into(),
            of.default_provider != nf.default_provider,
        );
        for name in keys_of_either(of.providers.keys(), nf.providers.keys()) {
            section(
                format!("framework.providers.{name}"),
                of.providers.get(name) != nf.providers.get(name),
            );
        }
        let (om, nm) = (&of.memory, &nf.memory);
        section("framework.memory.storage".into(), om.storage != nm.storage);
        section(
            "framework.memory.embedding".into(),
            om.embedding != nm.embedding,
        );
        section(
            "framework.memory.graph".into(),
            om.graph_enabled != nm.graph_enabled,
        );
        section(
            "framework.memory.consolidation".into(),
            om.consolidation != nm.consolidation,
        );
        section("framework.execution".into(), of.execution != nf.execution);
        section("framework.privacy".into(), of.privacy != nf.privacy);
        let (og, ng) = (&o.gateway, &n.gateway);
        section("gateway.rateLimit".into(), og.rate_limit != ng.rate_limit);
        section("gateway.approvers".into(), og.approvers != ng.approvers);
        section(
            "gateway.approvalsChannel".into(),
            og.approvals_channel != ng.approvals_channel,
        );
        for label in keys_of_either(o.shared_blocks.keys(), n.shared_blocks.keys()) {
            section(
                format!("sharedBlocks.{label}"),
                o.shared_blocks.get(label) != n.shared_blocks.get(label),
            );
        }

        let mut restart = |name: &str, changed: bool, running: bool| {
            if changed && !running {
                changes.restart_needed.push(name.to_string());
            }
        };
        restart(
            "channels.web",
            o.channels.web != n.channels.web,
            n.channels.web == s.channels.web,
        );
        restart(
            "channels.slack",
            o.channels.slack != n.channels.slack,
            n.channels.slack == s.channels.slack,
        );
        restart(
            "channels.discord",
            o.channels.discord != n.channels.discord,
            n.channels.discord == s.channels.discord,
        );
        restart(
            "framework.memory.path",
            om.path != nm.path,
            nm.path == s.framework.memory.path,
        );
        changes
    }

    /// The changes in words: `added qa; changed vp-ops (tools, prompt file); changed gateway.rateLimit`.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            parts.push(format!("added {}", self.added.join(", ")));
        }
        if !self.removed.is_empty() {
            parts.push(format!("removed {}", self.removed.join(", ")));
        }
        if !self.changed.is_empty() {
            let agents: Vec<String> = self
                .changed
                .iter()
                .map(|c| format!("{} ({})", c.agent, c.what.join(", ")))
                .collect();
            parts.push(format!("changed {}", agents.join(", ")));
        }
        if !self.sections.is_empty() {
            parts.push(format!("changed {}", self.sections.join(", ")));
        }
        if !self.restart_needed.is_empty() {
            parts.push(format!(
                "changed {} (applies at restart)",
                self.restart_needed.join(", ")
            ));
        }
        if parts.is_empty() {
            "no setting changed (comments or layout only, or values set back to the running ones)"
                .to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// The keys of `a`, then those only in `b`: every entry either side has, in file order.
fn keys_of_either<'a>(
    a: impl Iterator<Item = &'a String>,
    b: impl Iterator<Item = &'a String>,
) -> Vec<&'a String> {
    let mut keys: Vec<&String> = a.collect();
    for key in b {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
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

/// The config file and its prompt files as they are on disk now (`None` when the config cannot be
/// read). Prompt files are read through [`opc_hierarchy::read_prompt_file`], so a device or a huge file
/// named as a prompt is never read without a limit here either.
fn snapshot(path: &Path, loaded: &Loaded) -> Option<Snapshot> {
    let mut hash = Sha256::new();
    hash.update(std::fs::read(path).ok()?);
    let mut prompts = HashMap::new();
    for (id, agent) in &loaded.config.agents {
        let Some(Prompt::File(file)) = &agent.prompt else {
            continue;
        };
        let digest: [u8; 32] = match opc_hierarchy::read_prompt_file(&loaded.base_dir, file) {
            Ok(text) => Sha256::new()
                .chain_update([1])
                .chain_update(text)
                .finalize()
                .into(),
            Err(e) => Sha256::new()
                .chain_update([0])
                .chain_update(e.to_string())
                .finalize()
                .into(),
        };
        hash.update(
            absolute(&loaded.base_dir.join(file))
                .as_os_str()
                .as_encoded_bytes(),
        );
        hash.update(digest);
        prompts.insert(id.clone(), digest);
    }
    Some(Snapshot {
        print: hash.finalize().into(),
        prompts,
    })
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
