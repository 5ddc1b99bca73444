//! The cluster seam ([`Cluster`]) on PostgreSQL: several `opc run` nodes serving one org from one
//! database. [`PgStore::cluster`] builds it; one file per concern below it:
//! - `nodes`: the nodes table (join, heartbeat row, leave, the console's list);
//! - `leases`: tree leases (claim, renew, release, hand back) and their fencing tokens;
//! - `fence`: the check every write of a fenced store makes first;
//! - `limits`: provider limits and gateway rates counted over every node (slots, GCRA rows);
//! - `config`: the config history every node follows, and each node's running config digest;
//! - `platforms`: platform deliveries seen once per cluster, and named singleton holds;
//! - `wakes`: the `LISTEN opc_cluster` connection and the ticker.
//!
//! Invariants (the seam's, and how they hold here):
//! - every lease time is the database's clock ([`DB_NOW`]), never a node's: nodes whose clocks
//!   disagree still agree on when a lease expired, so a fast clock cannot steal a tree;
//! - a claim's token comes from one sequence (`tree_lease_tokens`), drawn after the previous
//!   owner's lease was committed and locked: greater than any token the tree had;
//! - a fenced write commits before a takeover or fails `Fenced` with nothing written (`fence`);
//! - `heartbeat` renews, in one transaction with the node's row, exactly the leases of this
//!   instance's running trees, hands its other leases back, and returns the renewed ones (a takeover in flight holds the row: the renewal waits, then no longer matches it).

mod config;
mod fence;
mod leases;
mod limits;
mod nodes;
mod platforms;
mod wakes;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::super::cluster::{RELAY_LIMIT, SavedConfig};
use super::super::{
    Claimed, Cluster, DbFailure, DbFault, NodeIdentity, NodeRow, Store, StoreError, TaskId, Wake,
};
use super::PgStore;
use super::sql::{Tx, exec, pg};
pub(crate) use fence::Fence;
pub use wakes::WakeListener;
use wakes::Wakes;

/// The database's clock, in Unix ms: every lease time and heartbeat is written and compared in it.
/// `clock_timestamp()`, not `now()`: the time of the statement's evaluation, not of its
/// transaction's start (a transaction that waited on a lock must not write an old expiry).
pub(crate) const DB_NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT";

/// The longest interval between [`Wake::Tick`]s.
const MAX_POLL: Duration = Duration::from_secs(1);

impl PgStore {
    /// The cluster seam for node `node` on this database, with leases lasting `lease_ttl` without
    /// renewal. Starts the wake-up listener (its own connection, ticking every `min(1 s, ttl / 5)`),
    /// so it must be called inside a Tokio runtime; the listener stops when the last handle to the
    /// cluster is dropped.
    pub fn cluster(&self, node: NodeIdentity, lease_ttl: Duration) -> Arc<dyn Cluster> {
        let poll = MAX_POLL.min(lease_ttl / 5);
        let store = PgStore {
            fence: None,
            ..self.clone()
        };
        let wakes = Wakes::spawn(store.config.clone(), poll);
        Arc::new(PgCluster {
            name: Arc::from(node.id.as_str()),
            store,
            node,
            lease_ttl,
            wakes,
        })
    }
}

/// [`Cluster`] on a [`PgStore`] (see the module doc).
struct PgCluster {
    /// The shared (unfenced) store.
    store: PgStore,
    /// This node.
    node: NodeIdentity,
    /// `node.id`, shared with the fences of its trees.
    name: Arc<str>,
    /// How long a lease lasts without renewal.
    lease_ttl: Duration,
    /// The wake-up listener.
    wakes: Wakes,
}

impl std::fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The database by place only: the settings hold the password.
        f.debug_struct("PgCluster")
            .field("node", &self.node.id)
            .field("instance", &self.node.instance)
            .field("database", &self.store.place)
            .field("lease_ttl", &self.lease_ttl)
            .finish()
    }
}

impl PgCluster {
    /// The lease's length in ms (saturating: no TTL comes near `i64::MAX` ms).
    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.lease_ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

#[async_trait]
impl Cluster for PgCluster {
    fn node(&self) -> &NodeIdentity {
        &self.node
    }

    fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    fn limits(&self) -> Arc<dyn crate::llm::layers::SharedLimits> {
        limits::limits(&self.store, self.node.instance, self.ttl_ms())
    }

    fn rates(&self) -> Arc<dyn super::super::cluster::SharedRates> {
        limits::rates(&self.store)
    }

    async fn join(&self, slots_total: u32) -> Result<(), StoreError> {
        let c = self.store.client().await?;
        nodes::join(&c, &self.node, slots_total).await
    }

    async fn heartbeat(
        &self,
        slots_in_use: u32,
        running: &[(TaskId, i64)],
    ) -> Result<Vec<TaskId>, StoreError> {
        let mut c = self.store.client().await?;
        let tx = Tx::new(c.transaction().await.map_err(pg("starting a heartbeat"))?);
        nodes::beat(&tx, &self.node, slots_in_use).await?;
        leases::drop_ended(&tx).await?;
        platforms::forget_deliveries(tx.c()).await?;
        limits::renew(&tx, self.node.instance, self.ttl_ms()).await?;
        let held = leases::renew(&tx, self.node.instance, self.ttl_ms(), running).await?;
        tx.commit().await?;
        Ok(held)
    }

    async fn claim(&self) -> Result<Option<Claimed>, StoreError> {
        let c = self.store.client().await?;
        leases::claim(&c, &self.node, self.ttl_ms(), None).await
    }

    async fn claim_root(&self, root: TaskId) -> Result<Option<Claimed>, StoreError> {
        let c = self.store.client().await?;
        leases::claim(&c, &self.node, self.ttl_ms(), Some(root)).await
    }

    fn fenced(&self, root: TaskId, token: i64) -> Arc<dyn Store> {
        Arc::new(PgStore {
            fence: Some(Fence {
                root,
                token,
                node: self.name.clone(),
            }),
            ..self.store.clone()
        })
    }

    async fn release(&self, root: TaskId, token: i64) -> Result<(), StoreError> {
        let c = self.store.client().await?;
        leases::release(&c, root, token).await
    }

    async fn leave(&self) -> Result<(), StoreError> {
        let mut c = self.store.client().await?;
        let tx = Tx::new(c.transaction().await.map_err(pg("starting to leave"))?);
        leases::hand_back(&tx, self.node.instance).await?;
        nodes::stop(&tx, &self.node).await?;
        // Delivered at the commit: the other nodes claim the handed-back trees at once.
        if let Some(work) = wakes::payload(&Wake::Work) {
            exec(
                tx.c(),
                "leaving the cluster",
                "SELECT pg_notify($1, $2)",
                &[&wakes::CHANNEL, &work],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn nodes(&self) -> Result<Vec<NodeRow>, StoreError> {
        let c = self.store.client().await?;
        nodes::list(&c).await
    }

    async fn owners(&self, roots: &[TaskId]) -> Result<HashMap<TaskId, String>, StoreError> {
        let c = self.store.client().await?;
        leases::owners(&c, roots).await
    }

    async fn relay(&self, payload: &str) -> Result<(), StoreError> {
        const DOING: &str = "relaying live events to the other nodes";
        if payload.len() > RELAY_LIMIT {
            return Err(StoreError::Database {
                doing: DOING,
                source: DbFailure {
                    fault: DbFault::Other,
                    message: format!(
                        "{} bytes of events, over the {RELAY_LIMIT} bytes one relay takes; \
                         send them in smaller parts",
                        payload.len()
                    ),
                },
            });
        }
        let Some(text) = wakes::payload(&Wake::Events(payload.to_string())) else {
            return Ok(());
        };
        let c = self.store.client().await?;
        // Outside a transaction: delivered now (a NOTIFY in a transaction waits for its commit).
        exec(
            &c,
            DOING,
            "SELECT pg_notify($1, $2)",
            &[&wakes::CHANNEL, &text],
        )
        .await?;
        Ok(())
    }

    fn wakes(&self) -> broadcast::Receiver<Wake> {
        self.wakes.subscribe()
    }

    async fn save_config(
        &self,
        text: &str,
        digest: &str,
        by: Option<&str>,
    ) -> Result<i64, StoreError> {
        let mut c = self.store.client().await?;
        let tx = Tx::new(
            c.transaction()
                .await
                .map_err(pg("starting to save a config"))?,
        );
        let id = config::save(&tx, &self.node, text, digest, by).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn latest_config(&self) -> Result<Option<SavedConfig>, StoreError> {
        let c = self.store.client().await?;
        config::latest(&c).await
    }

    async fn config_history(&self, limit: u32) -> Result<Vec<SavedConfig>, StoreError> {
        let c = self.store.client().await?;
        config::history(&c, limit).await
    }

    async fn set_config_digest(&self, digest: &str) -> Result<(), StoreError> {
        let c = self.store.client().await?;
        config::set_digest(&c, &self.node, digest).await
    }

    async fn first_delivery(&self, key: &str) -> Result<bool, StoreError> {
        let c = self.store.client().await?;
        platforms::first_delivery(&c, key).await
    }

    async fn hold(&self, name: &str) -> Result<bool, StoreError> {
        let c = self.store.client().await?;
        platforms::hold(&c, &self.node, self.ttl_ms(), name).await
    }

    async fn let_go(&self, name: &str) -> Result<(), StoreError> {
        let c = self.store.client().await?;
        platforms::let_go(&c, &self.node, name).await
    }

    async fn hold_done(&self, name: &str) -> Result<(), StoreError> {
        let c = self.store.client().await?;
        platforms::hold_done(&c, &self.node, name).await
    }

    async fn renew_hold(&self, name: &str) -> Result<bool, StoreError> {
        let c = self.store.client().await?;
        platforms::renew_hold(&c, &self.node, self.ttl_ms(), name).await
    }

    async fn lapsed_holds(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let c = self.store.client().await?;
        platforms::lapsed_holds(&c, prefix, limit).await
    }

    async fn take_lapsed(&self, name: &str) -> Result<bool, StoreError> {
        let c = self.store.client().await?;
        platforms::take_lapsed(&c, &self.node, self.ttl_ms(), name).await
    }
}
