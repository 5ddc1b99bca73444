//! The cluster seam: what several `opc run` nodes serving one org need of their shared database —
//! who is alive (heartbeats), who runs which tree (leases with fencing tokens), work that any node
//! may claim, and cross-node wake-ups. `agents` owns it; the PostgreSQL store implements it
//! ([`PgStore::cluster`](super::PgStore::cluster)); SQLite has no cluster (one process owns its file).
//!
//! The model (issue 36 §2):
//! - a **tree** (a root task and everything below it) runs on one node at a time, under a **lease**
//!   on its root: owner (node id and process instance), token, expiry. The owner renews every lease
//!   it holds with each heartbeat; a lease not renewed within `leaseTtl` expires;
//! - **queued work** is a live root without a lease; a tree whose lease expired (its node died, or
//!   was paused past the lease, or stopped cleanly and handed it back) is claimable the same way.
//!   A node claims one with [`Cluster::claim`] when it has a free agent slot: `FOR UPDATE SKIP
//!   LOCKED`, so two nodes never claim one tree and neither waits for the other;
//! - **fencing**: every write a tree's sessions make goes through [`Cluster::fenced`], a store that
//!   checks the lease's token in the same transaction (row-locked against a concurrent takeover),
//!   so a node that lost its lease writes nothing into the tree's new owner's state;
//! - **wake-ups** ([`Wake`]) are hints, never the record: a node that missed one catches up from
//!   the tables on the next [`Wake::Tick`].
//!
//! Invariants every implementation keeps:
//! - a claim returns a new token, greater than any token the tree's lease had before;
//! - a fenced write either commits before a takeover of its tree, or fails with
//!   [`StoreError::Fenced`] and changes nothing;
//! - `heartbeat` returns exactly the roots whose leases this instance holds after it ran;
//! - a claim of a tree that had a lease before (whoever held it) is a takeover.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use opc_hierarchy::schema::Rate;

use super::{Store, StoreError, TaskId};
use crate::llm::layers::SharedLimits;

/// The largest payload [`Cluster::relay`] takes (PostgreSQL's NOTIFY allows just under 8000
/// bytes).
pub const RELAY_LIMIT: usize = 7900;

/// Who this node is (issue 36: `--node NAME`, else `OPC_NODE`, else host and pid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node's name, stable across restarts when set by hand.
    pub id: String,
    /// This process's instance, random per start: a restarted node with the same name never renews
    /// the leases of the process before it.
    pub instance: i64,
    /// Where the node serves (`host:port`), for the console.
    pub address: Option<String>,
    /// The host name.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// When the process started (Unix ms).
    pub started_ms: i64,
    /// A digest of the running config, so the console can show nodes whose config differs.
    pub config_digest: String,
}

/// A node as the cluster's table records it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRow {
    /// The node's name.
    pub id: String,
    /// The running process's instance (a restart under the same name is a new one).
    pub instance: i64,
    /// Where it serves.
    pub address: Option<String>,
    /// Host and pid.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// When it started (Unix ms).
    pub started_ms: i64,
    /// Its last heartbeat (Unix ms).
    pub heartbeat_ms: i64,
    /// Whether it left cleanly (`opc run` stopped).
    pub stopped: bool,
    /// Trees it holds leases on.
    pub trees: u32,
    /// Its agent slots (`maxConcurrentAgents`).
    pub slots_total: u32,
    /// Slots in use at its last heartbeat.
    pub slots_in_use: u32,
    /// The digest of its running config.
    pub config_digest: String,
}

impl NodeRow {
    /// Whether the node heartbeat within `ttl` of `now_ms` and has not left.
    pub fn alive(&self, now_ms: i64, ttl: Duration) -> bool {
        !self.stopped && now_ms - self.heartbeat_ms <= ttl.as_millis() as i64
    }
}

/// A tree this node now holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claimed {
    /// The root task.
    pub root: TaskId,
    /// The lease's fencing token.
    pub token: i64,
    /// The tree had a lease before (its node died, was paused past the lease, stopped, or gave the
    /// tree up after a failed write): tool calls that were in flight there are answered
    /// "interrupted", never run again.
    pub takeover: bool,
}

/// A config saved in the cluster's history (any node's console): what every node follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedConfig {
    /// Its id: ids grow with every save, so a greater id is a later save.
    pub id: i64,
    /// When it was saved (Unix ms, the database's clock).
    pub saved_ms: i64,
    /// The node whose console saved it.
    pub node: String,
    /// Who saved it there, when known (`console (access token)`, …).
    pub by: Option<String>,
    /// The digest of its text (as [`NodeIdentity::config_digest`]).
    pub digest: String,
    /// The config file's text (empty in [`Cluster::config_history`], which lists without it).
    pub text: String,
}

/// A cross-node wake-up. A hint: the tables hold the truth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A root was queued (or a lease was handed back): claim if a slot is free.
    Work,
    /// A root task ended (any node): its waiters read the outcome.
    RootEnded(TaskId),
    /// An approval was decided (any node): the session waiting for it re-reads it.
    Approval(i64),
    /// A task was cancelled (any node): its owner cancels it and its subtree.
    Cancelled(TaskId),
    /// A config was saved (any node): its id in the config history. Every node compares the newest
    /// saved config with the one it runs.
    Config(i64),
    /// Events another node relayed (its live trace and streamed tokens, see [`Cluster::relay`]): the
    /// payload as sent.
    Events(String),
    /// Nothing in particular: re-read the tables (sent at least every poll interval, and after the
    /// wake-up connection was lost and came back).
    Tick,
}

/// Which of the gateway's rate limits (`gateway.rateLimit`) a [`SharedRates`] count is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateScope {
    /// `perUser`: one sender's messages.
    User,
    /// `perChannel`: every message in one channel.
    Channel,
}

impl RateScope {
    /// The prefix of its keys in the shared table (`user:<key>`, `channel:<key>`).
    pub fn prefix(self) -> &'static str {
        match self {
            RateScope::User => "user",
            RateScope::Channel => "channel",
        }
    }
}

/// The gateway's per-user and per-channel rate limits counted over every node of a cluster (issue
/// 36 §2), so a sender who writes to several nodes gets the configured rate in all, not per node.
/// The gateway (in `opc-bot`) uses it through [`Cluster::rates`]; without a cluster it counts in its
/// own process.
#[async_trait::async_trait]
pub trait SharedRates: Send + Sync {
    /// Count one message against `key`'s limit of `rate` in `scope` (GCRA: a burst of
    /// `rate.messages`, then one every `rate.per / rate.messages`): `true` when it conforms (and
    /// was counted), `false` when it is over the limit (and nothing was counted).
    async fn take(&self, scope: RateScope, key: &str, rate: Rate) -> Result<bool, StoreError>;
}

/// The cluster operations of a shared database (see the module doc).
#[async_trait::async_trait]
pub trait Cluster: Send + Sync + std::fmt::Debug {
    /// This node.
    fn node(&self) -> &NodeIdentity;

    /// How long a lease lasts without renewal (`framework.cluster.leaseTtl`).
    fn lease_ttl(&self) -> Duration;

    /// The providers' `maxConcurrentRequests` and `requestsPerMinute`, counted over every node: the
    /// engine's call stack admits each LLM call through it. A slot a node holds is renewed by its
    /// heartbeat and freed when the call ends, or a lease after the node died.
    fn limits(&self) -> Arc<dyn SharedLimits>;

    /// The gateway's rate limits (`gateway.rateLimit`), counted over every node.
    fn rates(&self) -> Arc<dyn SharedRates>;

    /// Record this node in the nodes table (replacing a stopped or dead row of the same name).
    async fn join(&self, slots_total: u32) -> Result<(), StoreError>;

    /// Heartbeat: refresh this node's row and renew the leases this instance runs trees under
    /// (`running`: root and token), in one transaction; any other lease of this instance (a tree it
    /// stopped running: it lost its way to the database, say) is handed back, so another claim
    /// resumes that tree. The roots whose leases were renewed: a running root missing from them
    /// moved to another node.
    async fn heartbeat(
        &self,
        slots_in_use: u32,
        running: &[(TaskId, i64)],
    ) -> Result<Vec<TaskId>, StoreError>;

    /// Claim the oldest tree that needs an owner (a live root without a lease, or whose lease
    /// expired), skipping rows another node is claiming.
    async fn claim(&self) -> Result<Option<Claimed>, StoreError>;

    /// Claim root `root` if it needs an owner (a node runs the roots it queued itself first).
    async fn claim_root(&self, root: TaskId) -> Result<Option<Claimed>, StoreError>;

    /// A store for the sessions of tree `root` under lease `token`: every write checks the token
    /// first ([`StoreError::Fenced`] when the lease moved on); reads are the shared store's.
    fn fenced(&self, root: TaskId, token: i64) -> Arc<dyn Store>;

    /// Give up the lease on `root` (its tree ended here, or stopped here without ending: any node
    /// may then claim it, as a takeover). A lease that moved on is left alone.
    async fn release(&self, root: TaskId, token: i64) -> Result<(), StoreError>;

    /// Leave the cluster: expire every lease this instance holds (another node takes its trees over
    /// at once) and mark the node stopped.
    async fn leave(&self) -> Result<(), StoreError>;

    /// Every node the table knows, alive or not, by name.
    async fn nodes(&self) -> Result<Vec<NodeRow>, StoreError>;

    /// The node holding the lease of each of `roots` that has one.
    async fn owners(&self, roots: &[TaskId]) -> Result<HashMap<TaskId, String>, StoreError>;

    /// Send `payload` (at most [`RELAY_LIMIT`] bytes) to every node as [`Wake::Events`]: the live
    /// events of the trees this node runs, for pages served by other nodes. Ephemeral: a node that
    /// misses them still has the durable record (tasks, transcript).
    async fn relay(&self, payload: &str) -> Result<(), StoreError>;

    /// Record `text` (whose digest is `digest`), saved on this node by `by`, as the newest config of
    /// the cluster, and wake every node with [`Wake::Config`] (sent when the row is committed).
    /// Returns its id.
    async fn save_config(
        &self,
        text: &str,
        digest: &str,
        by: Option<&str>,
    ) -> Result<i64, StoreError>;

    /// The newest saved config, text included; `None` before the first save.
    async fn latest_config(&self) -> Result<Option<SavedConfig>, StoreError>;

    /// The newest `limit` saved configs, newest first, without their text (for the console).
    async fn config_history(&self, limit: u32) -> Result<Vec<SavedConfig>, StoreError>;

    /// Record in this node's row the digest of the config it runs now (after a reload applied).
    async fn set_config_digest(&self, digest: &str) -> Result<(), StoreError>;

    /// Wake-ups from every node (LISTEN/NOTIFY), with a [`Wake::Tick`] at least every `poll`.
    fn wakes(&self) -> tokio::sync::broadcast::Receiver<Wake>;

    /// Record that a platform delivered `key` (`slack:<event_id>`, …): `true` for the first
    /// delivery anywhere in the cluster, `false` for a repeat (whichever node saw it first). Keys are
    /// remembered for two hours, longer than the platforms retry.
    async fn first_delivery(&self, key: &str) -> Result<bool, StoreError>;

    /// Take, or renew, the named singleton `name` (`discord-gateway`) for this instance for
    /// [`lease_ttl`](Cluster::lease_ttl): `true` when this instance holds it afterwards. Held by
    /// another instance and not expired: `false`, and nothing changes.
    async fn hold(&self, name: &str) -> Result<bool, StoreError>;

    /// Give up `name` now if this instance holds it, so another node may take it at once.
    async fn let_go(&self, name: &str) -> Result<(), StoreError>;

    /// The duty `name` stands for is done: forget it if this instance holds it, so no node takes
    /// it over (unlike [`let_go`](Cluster::let_go), which hands it on).
    async fn hold_done(&self, name: &str) -> Result<(), StoreError>;

    /// Renew `name` only if this instance holds it still: `false` when another instance took it
    /// over or its duty was done ([`hold_done`](Cluster::hold_done)). Unlike
    /// [`hold`](Cluster::hold), it never takes a hold that is not there.
    async fn renew_hold(&self, name: &str) -> Result<bool, StoreError>;

    /// Up to `limit` holds whose name starts with `prefix` and whose holder let them go or stopped
    /// renewing them (expired on the database's clock), each with its holder's instance: duties
    /// another node may take over with [`take_lapsed`](Cluster::take_lapsed).
    async fn lapsed_holds(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<(String, i64)>, StoreError>;

    /// Take hold `name` over for this instance only if it is there and lapsed: `false` when
    /// another instance holds it or it was done meanwhile (never recreated, so a duty done by one
    /// node is not taken up again by another).
    async fn take_lapsed(&self, name: &str) -> Result<bool, StoreError>;
}
