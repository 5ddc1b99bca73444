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

use super::{Store, StoreError, TaskId};

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
    /// Events another node relayed (its live trace and streamed tokens, see [`Cluster::relay`]): the
    /// payload as sent.
    Events(String),
    /// Nothing in particular: re-read the tables (sent at least every poll interval, and after the
    /// wake-up connection was lost and came back).
    Tick,
}

/// The cluster operations of a shared database (see the module doc).
#[async_trait::async_trait]
pub trait Cluster: Send + Sync + std::fmt::Debug {
    /// This node.
    fn node(&self) -> &NodeIdentity;

    /// How long a lease lasts without renewal (`framework.cluster.leaseTtl`).
    fn lease_ttl(&self) -> Duration;

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

    /// Wake-ups from every node (LISTEN/NOTIFY), with a [`Wake::Tick`] at least every `poll`.
    fn wakes(&self) -> tokio::sync::broadcast::Receiver<Wake>;
}
