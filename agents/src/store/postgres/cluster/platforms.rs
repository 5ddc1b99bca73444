//! What the chat platforms need of the cluster (issue 36 §2 "Platforms"): deliveries seen
//! (`cluster_deliveries`: a Slack event that reached two nodes, or one node twice, is handled once)
//! and named singleton holds (`cluster_holds`: one node holds the Discord gateway connection).
//!
//! Invariants:
//! - a delivery key is inserted by exactly one call, whichever node makes it (the primary key, `ON
//!   CONFLICT DO NOTHING`: no lock waits beyond the racing insert's commit);
//! - deliveries are kept for [`DELIVERIES_KEPT_MS`] (longer than Slack retries an event), then
//!   dropped by any node's heartbeat ([`forget_deliveries`]);
//! - a hold is one statement: taken when free or expired, renewed when this instance holds it, else
//!   left to its holder; every time is the database's clock ([`DB_NOW`]), so nodes whose clocks
//!   disagree still agree on when a hold expired.

use deadpool_postgres::GenericClient;

use super::super::super::{NodeIdentity, StoreError};
use super::super::sql::{exec, opt};
use super::DB_NOW;

/// How long a delivery key is remembered: two hours, past Slack's retry schedule (about an hour).
pub(super) const DELIVERIES_KEPT_MS: i64 = 2 * 3600 * 1000;

/// Record delivery `key`; `true` when this call recorded it (the first delivery anywhere).
pub(super) async fn first_delivery(c: &impl GenericClient, key: &str) -> Result<bool, StoreError> {
    let sql = format!(
        "INSERT INTO cluster_deliveries (key, seen_ms) VALUES ($1, {DB_NOW}) \
         ON CONFLICT (key) DO NOTHING"
    );
    let inserted = exec(c, "recording a platform delivery", &sql, &[&key]).await?;
    Ok(inserted == 1)
}

/// Drop the deliveries older than [`DELIVERIES_KEPT_MS`] (one statement of the heartbeat).
pub(super) async fn forget_deliveries(c: &impl GenericClient) -> Result<(), StoreError> {
    let sql = format!("DELETE FROM cluster_deliveries WHERE seen_ms < {DB_NOW} - $1");
    exec(
        c,
        "forgetting old platform deliveries",
        &sql,
        &[&DELIVERIES_KEPT_MS],
    )
    .await?;
    Ok(())
}

/// Take or renew hold `name` for this instance until `ttl_ms` from now; `true` when held after it
/// ran. A hold another instance holds and that has not expired is left alone.
pub(super) async fn hold(
    c: &impl GenericClient,
    node: &NodeIdentity,
    ttl_ms: i64,
    name: &str,
) -> Result<bool, StoreError> {
    let sql = format!(
        "INSERT INTO cluster_holds AS h (name, node, instance, expires_ms) \
         VALUES ($1, $2, $3, {DB_NOW} + $4) \
         ON CONFLICT (name) DO UPDATE SET node = EXCLUDED.node, instance = EXCLUDED.instance, \
         expires_ms = EXCLUDED.expires_ms \
         WHERE h.instance = EXCLUDED.instance OR h.expires_ms < {DB_NOW} \
         RETURNING h.instance"
    );
    let held = opt(
        c,
        "taking a cluster hold",
        &sql,
        &[&name, &node.id, &node.instance, &ttl_ms],
    )
    .await?;
    Ok(held.is_some())
}

/// Expire hold `name` now if this instance holds it (another node may take it at once).
pub(super) async fn let_go(
    c: &impl GenericClient,
    node: &NodeIdentity,
    name: &str,
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE cluster_holds SET expires_ms = {DB_NOW} - 1 WHERE name = $1 AND instance = $2"
    );
    exec(
        c,
        "letting a cluster hold go",
        &sql,
        &[&name, &node.instance],
    )
    .await?;
    Ok(())
}
