//! The nodes table (`cluster_nodes`): one row per node name, written by the node itself (join,
//! heartbeat, leave) and read by every node's console.
//!
//! A row belongs to the process instance that joined last under its name: a restarted node
//! replaces its predecessor's row, and the heartbeat and leave of an older instance (still running
//! by mistake, or paused) change nothing of its successor's. Times are the database's clock
//! ([`DB_NOW`]), the one the leases use, so a console compares a heartbeat with the same clock.

use deadpool_postgres::GenericClient;

use super::super::super::{NodeIdentity, NodeRow, StoreError};
use super::super::sql::{Tx, exec, get, rows, u32_of};
use super::DB_NOW;

/// Record `node` with `slots_total` agent slots, replacing any row of the same name (a new
/// instance, not stopped, no slot in use).
pub(super) async fn join(
    c: &impl GenericClient,
    node: &NodeIdentity,
    slots_total: u32,
) -> Result<(), StoreError> {
    exec(
        c,
        "joining the cluster",
        &format!(
            "INSERT INTO cluster_nodes (id, instance, address, host, pid, started_ms, heartbeat_ms, \
             stopped, slots_total, slots_in_use, config_digest) \
             VALUES ($1, $2, $3, $4, $5, $6, {DB_NOW}, FALSE, $7, 0, $8) \
             ON CONFLICT (id) DO UPDATE SET instance = excluded.instance, address = excluded.address, \
             host = excluded.host, pid = excluded.pid, started_ms = excluded.started_ms, \
             heartbeat_ms = excluded.heartbeat_ms, stopped = FALSE, \
             slots_total = excluded.slots_total, slots_in_use = 0, \
             config_digest = excluded.config_digest"
        ),
        &[
            &node.id,
            &node.instance,
            &node.address,
            &node.host,
            &i64::from(node.pid),
            &node.started_ms,
            &i64::from(slots_total),
            &node.config_digest,
        ],
    )
    .await?;
    Ok(())
}

/// This instance's heartbeat on its row (none if another instance of the name replaced it).
pub(super) async fn beat(
    t: &Tx<'_>,
    node: &NodeIdentity,
    slots_in_use: u32,
) -> Result<(), StoreError> {
    exec(
        t.c(),
        "recording a heartbeat",
        &format!(
            "UPDATE cluster_nodes SET heartbeat_ms = {DB_NOW}, slots_in_use = $3 \
             WHERE id = $1 AND instance = $2"
        ),
        &[&node.id, &node.instance, &i64::from(slots_in_use)],
    )
    .await?;
    Ok(())
}

/// Mark this instance's row stopped (it left cleanly; its slots are free).
pub(super) async fn stop(t: &Tx<'_>, node: &NodeIdentity) -> Result<(), StoreError> {
    exec(
        t.c(),
        "leaving the cluster",
        "UPDATE cluster_nodes SET stopped = TRUE, slots_in_use = 0 WHERE id = $1 AND instance = $2",
        &[&node.id, &node.instance],
    )
    .await?;
    Ok(())
}

/// Every node row, by name, each with the count of unexpired leases its current instance holds.
pub(super) async fn list(c: &impl GenericClient) -> Result<Vec<NodeRow>, StoreError> {
    const DOING: &str = "listing the cluster's nodes";
    rows(
        c,
        DOING,
        &format!(
            "SELECT n.id, n.address, n.host, n.pid, n.started_ms, n.heartbeat_ms, n.stopped, \
             (SELECT count(*) FROM tree_leases l WHERE l.instance = n.instance AND l.node = n.id \
              AND l.expires_ms >= {DB_NOW}), \
             n.slots_total, n.slots_in_use, n.config_digest, n.instance \
             FROM cluster_nodes n ORDER BY n.id"
        ),
        &[],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(NodeRow {
            id: get(row, 0, DOING)?,
            address: get(row, 1, DOING)?,
            host: get(row, 2, DOING)?,
            pid: u32_of(get(row, 3, DOING)?),
            started_ms: get(row, 4, DOING)?,
            heartbeat_ms: get(row, 5, DOING)?,
            stopped: get(row, 6, DOING)?,
            trees: u32_of(get(row, 7, DOING)?),
            slots_total: u32_of(get(row, 8, DOING)?),
            slots_in_use: u32_of(get(row, 9, DOING)?),
            config_digest: get(row, 10, DOING)?,
            instance: get(row, 11, DOING)?,
        })
    })
    .collect()
}
