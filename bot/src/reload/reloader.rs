//! The reload itself: read the files, validate them as `opc validate` does, and only then apply them
//! to the engine, the gateway and the live config, saying what changed.
//!
//! Invariants: reloads run one at a time (the running snapshot's lock is held for a whole reload, and
//! a console save takes it before it writes); the files already running are never applied again;
//! an invalid config is never applied, and the same refused files are reported once to the watcher;
//! on a cluster, every applied reload (whatever asked for it) records the running config's digest in
//! the node's row, so the console's Nodes table shows which nodes run another config.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use opc_agents::{Engine, Event};
use opc_hierarchy::ConfigError;
use opc_hierarchy::changes::Changes;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::files::{Snapshot, snapshot};
use super::outcome::{RemovedLive, Report, Status, Trigger};
use crate::gateway::Gateway;
use crate::live::LiveConfig;
use crate::term::{eprint, print};

/// Applies config changes to a running `opc run`.
pub struct Reloader {
    pub(super) path: PathBuf,
    pub(super) live: Arc<LiveConfig>,
    engine: Engine,
    gateway: Gateway,
    /// The files running now; held while a reload runs, so reloads are serial.
    running: tokio::sync::Mutex<Snapshot>,
    /// Fingerprint of the last files refused, so the watcher does not report them twice.
    refused: Mutex<Option<[u8; 32]>>,
    last: Mutex<Option<Report>>,
    checked: std::sync::atomic::AtomicU64,
    /// The digest of the running config's text ([`crate::node::config_digest`]).
    digest: Mutex<String>,
    /// The cluster this process is a node of, once [`Reloader::follow`] started.
    pub(super) cluster: std::sync::OnceLock<Arc<dyn opc_agents::store::Cluster>>,
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
        let digest = crate::node::config_digest(live.get().report.source.as_bytes());
        Arc::new(Reloader {
            path,
            live,
            engine,
            gateway,
            running: tokio::sync::Mutex::new(running),
            refused: Mutex::new(None),
            last: Mutex::new(None),
            checked: std::sync::atomic::AtomicU64::new(0),
            digest: Mutex::new(digest),
            cluster: std::sync::OnceLock::new(),
        })
    }

    /// The digest of the running config's text (as the nodes table shows it).
    pub fn digest(&self) -> String {
        self.digest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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
        if let (Report::Applied { .. }, Some(cluster)) = (&report, self.cluster.get()) {
            self.publish_digest(&**cluster).await;
        }
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
                    crate::validation::validate_text(
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
            .apply_config(&old, &new, crate::setup::missing_key(&new));
        if new.report.warnings().next().is_some() {
            eprint(&new.report.render(true));
        }
        let generation = self.live.set(new.clone());
        *self.digest.lock().unwrap_or_else(|p| p.into_inner()) =
            crate::node::config_digest(new.report.source.as_bytes());
        let changes = Changes::between(
            (&old.config, &running.prompts),
            (&new.config, &snapshot.prompts),
            &self.live.started().config,
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
        print(&line);
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

    /// Record the running config's digest in this node's row (bounded: a database that does not
    /// answer delays nothing but this; the row is corrected by the next applied reload).
    async fn publish_digest(&self, cluster: &dyn opc_agents::store::Cluster) {
        const WAIT: std::time::Duration = std::time::Duration::from_secs(10);
        let digest = self.digest();
        match tokio::time::timeout(WAIT, cluster.set_config_digest(&digest)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(
                error = %e,
                "the config reloaded, but its digest is not recorded in the nodes table; the \
                 console shows this node's earlier config until the next reload"
            ),
            Err(_) => tracing::warn!(
                "the config reloaded, but recording its digest in the nodes table took over {}s; \
                 the console may show this node's earlier config until the next reload",
                WAIT.as_secs()
            ),
        }
    }

    /// The files are the running ones. After a refusal of the files that means they were put back:
    /// the refusal is withdrawn (the console's banner clears) and that is said whatever the trigger.
    /// Otherwise it is said only to `SIGHUP`, whose sender is waiting for an answer.
    ///
    /// A refusal of a config saved in the cluster is not about the files (it was never written to
    /// them), so the files matching the running config withdraw nothing: it stands until a config
    /// is applied. (The watcher's debounced look after the previous cluster write used to land just
    /// after such a refusal and clear it.)
    fn unchanged(&self, trigger: Trigger) -> Report {
        let generation = self.live.generation();
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let restored = matches!(
            *last,
            Some(Report::Rejected { trigger: refused_by, .. }) if refused_by != Trigger::Cluster
        );
        let report = Report::Unchanged {
            trigger,
            generation,
            restored,
        };
        if restored {
            print(&format!(
                "opc: config reload ({}): {} matches the running config again (generation {generation}); the refused change is withdrawn\n",
                trigger.as_str(),
                self.path.display()
            ));
            *last = Some(report.clone());
        } else if trigger == Trigger::Signal {
            print(&format!(
                "opc: config reload (signal): {} is unchanged — generation {generation} keeps running\n",
                self.path.display()
            ));
        }
        report
    }

    pub(super) fn rejected(
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
}

/// Other reloads wait while this is held (see [`Reloader::hold`]).
pub struct Held<'a>(tokio::sync::MutexGuard<'a, Snapshot>);

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
