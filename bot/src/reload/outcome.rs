//! What a reload did and what the console shows of it: the trigger, the report of one reload, and the
//! status (generation, last report, whether a refused change is pending).
//!
//! Why apart from the reloader: these are the serialised shapes the console reads
//! (`/admin/api/reload`, a save's answer), so their field names are a contract kept in one place.
//!
//! Invariants: a report is one of applied, unchanged or rejected, and names what asked for it; a
//! rejected report keeps the `opc validate --format json` object when the file was readable.

use opc_hierarchy::changes::AgentChange;
use serde::Serialize;
use serde_json::Value;

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
    /// A config saved on another node of the cluster, written here from the database.
    Cluster,
}

impl Trigger {
    /// Its name in report lines and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Console => "console",
            Trigger::File => "file",
            Trigger::Signal => "signal",
            Trigger::Cluster => "cluster",
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
