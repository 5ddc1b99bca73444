//! A platform's delivery handled once per cluster: an inbound event that carries a delivery key
//! ([`Inbound::delivery`], the Slack event or interaction id, the Discord message or interaction
//! id) is checked against the cluster's record before the gateway acts on it, so a Slack event
//! retried to another node, or sent to two nodes, is answered by one (issue 36 §2 "Platforms").
//!
//! Invariants:
//! - without a cluster (SQLite, one process) nothing is checked: the adapters' in-process
//!   [`opc_adapters::Dedup`] already drops redeliveries;
//! - a duplicate is dropped with a debug line, never answered;
//! - when the check fails (the database is unreachable) the event is handled, with a warning: a
//!   duplicate answer beats a lost one.

use opc_adapters::Inbound;
use opc_agents::store::Cluster;

/// Whether the gateway should act on `inbound`: `false` only when the cluster has seen its delivery
/// key before (on this node or another).
pub(super) async fn first(cluster: Option<&dyn Cluster>, inbound: &Inbound) -> bool {
    let (Some(cluster), Some(key)) = (cluster, inbound.delivery.as_deref()) else {
        return true;
    };
    match cluster.first_delivery(key).await {
        Ok(true) => true,
        Ok(false) => {
            tracing::debug!(
                platform = %inbound.place.platform,
                delivery = key,
                "delivery already handled in the cluster: dropped"
            );
            false
        }
        Err(error) => {
            tracing::warn!(
                platform = %inbound.place.platform,
                delivery = key,
                %error,
                "could not check the delivery across the cluster; handling it (it may be \
                 answered twice if another node also got it)"
            );
            true
        }
    }
}
