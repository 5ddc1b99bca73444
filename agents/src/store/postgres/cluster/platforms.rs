//! What the chat platforms need of the cluster (issue 36 §2 "Platforms"): deliveries seen
//! (`cluster_deliveries`: a Slack event that reached two nodes, or one node twice, is handled once)
//! and named holds (`cluster_holds`: one node holds the Discord gateway connection; one node
//! posts each request's reply, `reply:<root>`).
//!
//! Invariants:
//! - a delivery key is inserted by exactly one call, whichever node makes it (the primary key, `ON
//!   CONFLICT DO NOTHING`: no lock waits beyond the racing insert's commit);
//! - deliveries are kept for [`DELIVERIES_KEPT_MS`] (longer than Slack retries an event), then
//!   dropped by any node's heartbeat ([`forget_deliveries`]);
//! - a hold is one statement: taken when free or expired, renewed when this instance holds it, else
//!   left to its holder; every time is the database's clock ([`DB_NOW`]), so nodes whose clocks
//!   disagree still agree on when a hold expired;
//! - a hold whose duty is done is deleted ([`hold_done`]); one let go or left to expire stays until
//!   another node takes it ([`lapsed_holds`] finds it, [`take_lapsed`] takes it), so a duty
//!   outlives the node that had it; [`renew_hold`] and [`take_lapsed`] never insert, so a duty done
//!   by one node is never taken up again by another.

use deadpool_postgres::GenericClient;

use super::super::super::{NodeIdentity, StoreError};
use super::super::sql::{exec, get, opt, rows};
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

/// Forget hold `name` if this instance holds it: its duty is done, nobody takes it over.
pub(super) async fn hold_done(
    c: &impl GenericClient,
    node: &NodeIdentity,
    name: &str,
) -> Result<(), StoreError> {
    exec(
        c,
        "ending a cluster hold",
        "DELETE FROM cluster_holds WHERE name = $1 AND instance = $2",
        &[&name, &node.instance],
    )
    .await?;
    Ok(())
}

/// Up to `limit` expired holds whose name starts with `prefix`, oldest expiry first (the duty
/// longest without a holder is taken over first).
pub(super) async fn lapsed_holds(
    c: &impl GenericClient,
    prefix: &str,
    limit: u32,
) -> Result<Vec<(String, i64)>, StoreError> {
    const DOING: &str = "listing lapsed cluster holds";
    // `starts_with`, not LIKE: a prefix holding `%` or `_` means itself.
    let sql = format!(
        "SELECT name, instance FROM cluster_holds WHERE starts_with(name, $1) \
         AND expires_ms < {DB_NOW} ORDER BY expires_ms LIMIT $2"
    );
    let limit = i64::from(limit);
    rows(c, DOING, &sql, &[&prefix, &limit])
        .await?
        .iter()
        .map(|row| Ok((get(row, 0, DOING)?, get(row, 1, DOING)?)))
        .collect()
}

/// Renew hold `name` until `ttl_ms` from now only if this instance holds it (expired or not);
/// `true` when renewed.
pub(super) async fn renew_hold(
    c: &impl GenericClient,
    node: &NodeIdentity,
    ttl_ms: i64,
    name: &str,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE cluster_holds SET expires_ms = {DB_NOW} + $3 WHERE name = $1 AND instance = $2"
    );
    let renewed = exec(
        c,
        "renewing a cluster hold",
        &sql,
        &[&name, &node.instance, &ttl_ms],
    )
    .await?;
    Ok(renewed == 1)
}

/// Take hold `name` over for this instance until `ttl_ms` from now only if it exists and expired;
/// `true` when taken.
pub(super) async fn take_lapsed(
    c: &impl GenericClient,
    node: &NodeIdentity,
    ttl_ms: i64,
    name: &str,
) -> Result<bool, StoreError> {
    let sql = format!(
        "UPDATE cluster_holds SET node = $2, instance = $3, expires_ms = {DB_NOW} + $4 \
         WHERE name = $1 AND expires_ms < {DB_NOW}"
    );
    let taken = exec(
        c,
        "taking over a lapsed cluster hold",
        &sql,
        &[&name, &node.id, &node.instance, &ttl_ms],
    )
    .await?;
    Ok(taken == 1)
}
