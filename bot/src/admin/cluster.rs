//! The Config page's cluster history (PostgreSQL): the configs saved in the database, which node
//! saved each, and which live node runs which — what `Cluster::config_history` and the nodes table
//! say together. Alone (SQLite) there is none: the file's history ([`super::save`]) is the history.
//!
//! Invariants: the history is listed without the configs' texts; a live node is shown beside the
//! newest saved version whose digest it runs (a text saved twice shows its nodes once), or among
//! the unlisted digests when no listed save has it; stopped and lost nodes run nothing.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::Admin;
use super::config::error;

/// How many of the cluster's saved configs the Config page lists, newest first.
pub(super) const CLUSTER_HISTORY: u32 = 20;

/// `GET /admin/api/config/cluster`: without a cluster `{"cluster": false, "history": dir}` (the
/// history is the file's earlier versions in `dir`, [`super::save::list`]). On a cluster
/// `{"cluster": true, "this", "versions": [{"id", "saved_ms", "saved_age", "node", "by", "digest",
/// "running": [node ids]}], "unlisted": [{"digest", "running"}]}`: the newest
/// [`CLUSTER_HISTORY`] saves, each with the live nodes running its digest, then the digests live
/// nodes run that no listed save has (a file deployed by hand, an older save).
pub async fn cluster_history(State(admin): State<Arc<Admin>>) -> Response {
    let Some(cluster) = admin.cluster.clone() else {
        return Json(json!({"cluster": false, "history": super::save::HISTORY_DIR}))
            .into_response();
    };
    let read = tokio::spawn(async move {
        let saved = cluster.config_history(CLUSTER_HISTORY).await?;
        let nodes = cluster.nodes().await?;
        Ok::<_, opc_agents::store::StoreError>((
            saved,
            nodes,
            cluster.node().id.clone(),
            cluster.lease_ttl(),
        ))
    })
    .await;
    match read {
        Ok(Ok((saved, nodes, me, ttl))) => Json(history_json(
            &saved,
            &nodes,
            &me,
            ttl,
            opc_agents::store::now_ms(),
        ))
        .into_response(),
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot read the cluster's config history: {e}; check the database answers"),
        ),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

/// The cluster's config history as the page shows it (see [`cluster_history`]), at `now`.
fn history_json(
    saved: &[opc_agents::store::SavedConfig],
    nodes: &[opc_agents::store::NodeRow],
    me: &str,
    ttl: std::time::Duration,
    now: i64,
) -> serde_json::Value {
    let live: Vec<&opc_agents::store::NodeRow> =
        nodes.iter().filter(|n| n.alive(now, ttl)).collect();
    let running = |digest: &str| -> Vec<&str> {
        let mut ids: Vec<&str> = live
            .iter()
            .filter(|n| n.config_digest == digest)
            .map(|n| n.id.as_str())
            .collect();
        ids.sort_unstable();
        ids
    };
    let mut shown = std::collections::HashSet::new();
    let versions: Vec<serde_json::Value> = saved
        .iter()
        .map(|v| {
            // Newest first: a digest saved again runs beside its newest save only.
            let first = shown.insert(v.digest.as_str());
            json!({
                "id": v.id,
                "saved_ms": v.saved_ms,
                "saved_age": crate::node::age(v.saved_ms, now),
                "node": v.node,
                "by": v.by,
                "digest": v.digest,
                "running": if first { running(&v.digest) } else { Vec::new() },
            })
        })
        .collect();
    let mut unlisted: Vec<serde_json::Value> = Vec::new();
    for node in &live {
        let digest = node.config_digest.as_str();
        if shown.insert(digest) {
            unlisted.push(json!({"digest": digest, "running": running(digest)}));
        }
    }
    json!({
        "cluster": true,
        "this": me,
        "versions": versions,
        "unlisted": unlisted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opc_agents::store::{NodeRow, SavedConfig};
    use std::time::Duration;

    fn saved(id: i64, digest: &str) -> SavedConfig {
        SavedConfig {
            id,
            saved_ms: 1_000 * id,
            node: "node-a".into(),
            by: Some("console".into()),
            digest: digest.into(),
            text: String::new(),
        }
    }

    fn node(id: &str, digest: &str, heartbeat_ms: i64) -> NodeRow {
        NodeRow {
            instance: 1,
            id: id.into(),
            address: None,
            host: "h".into(),
            pid: 1,
            started_ms: 0,
            heartbeat_ms,
            stopped: false,
            trees: 0,
            slots_total: 1,
            slots_in_use: 0,
            config_digest: digest.into(),
        }
    }

    #[test]
    fn live_nodes_run_beside_the_newest_save_of_their_digest_or_unlisted() {
        let now = 100_000;
        let ttl = Duration::from_secs(15);
        // Newest first, as the cluster lists them: `aaa` saved twice.
        let versions = [saved(3, "aaa"), saved(2, "bbb"), saved(1, "aaa")];
        let nodes = [
            node("node-a", "aaa", now),
            node("node-b", "bbb", now),
            node("node-c", "ccc", now),
            node("gone", "bbb", 0),
        ];
        let page = history_json(&versions, &nodes, "node-a", ttl, now);
        let running: Vec<&serde_json::Value> = page["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| &v["running"])
            .collect();
        assert_eq!(
            running,
            [&json!(["node-a"]), &json!(["node-b"]), &json!([])],
            "{page}"
        );
        assert_eq!(
            page["unlisted"],
            json!([{"digest": "ccc", "running": ["node-c"]}])
        );
        assert_eq!(page["this"], "node-a");
    }
}
