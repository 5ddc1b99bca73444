//! The config history (`config_history`): every config saved in any node's console, newest last,
//! and the digest each node records of the config it runs (`cluster_nodes.config_digest`).
//!
//! Invariants:
//! - a saved row and its wake-up ([`Wake::Config`]) are one transaction: the notification is
//!   delivered at the commit, so a node woken by it always finds the row;
//! - ids come from the table's sequence, so a greater id is a later save whatever the nodes'
//!   clocks say; `saved_ms` is the database's clock ([`DB_NOW`]), for people to read;
//! - the history is append-only here: rows are never changed, so "the newest" is the greatest id;
//! - a node's digest is written only on its current instance's row (a restarted node's
//!   predecessor changes nothing of its successor's).

use deadpool_postgres::GenericClient;

use super::super::super::cluster::SavedConfig;
use super::super::super::{NodeIdentity, StoreError, Wake};
use super::super::sql::{Tx, exec, get, one, opt, rows};
use super::{DB_NOW, wakes};

/// Insert `text` as saved on `node` by `by`, and notify every node; the new row's id.
pub(super) async fn save(
    t: &Tx<'_>,
    node: &NodeIdentity,
    text: &str,
    digest: &str,
    by: Option<&str>,
) -> Result<i64, StoreError> {
    const DOING: &str = "recording the saved config in the cluster's history";
    let row = one(
        t.c(),
        DOING,
        &format!(
            "INSERT INTO config_history (saved_ms, node, by_whom, digest, text) \
             VALUES ({DB_NOW}, $1, $2, $3, $4) RETURNING id"
        ),
        &[&node.id, &by, &digest, &text],
    )
    .await?;
    let id: i64 = get(&row, 0, DOING)?;
    // Delivered at the commit, with the row.
    if let Some(payload) = wakes::payload(&Wake::Config(id)) {
        exec(
            t.c(),
            DOING,
            "SELECT pg_notify($1, $2)",
            &[&wakes::CHANNEL, &payload],
        )
        .await?;
    }
    Ok(id)
}

/// The newest saved config, with its text.
pub(super) async fn latest(c: &impl GenericClient) -> Result<Option<SavedConfig>, StoreError> {
    const DOING: &str = "reading the newest saved config";
    let Some(row) = opt(
        c,
        DOING,
        "SELECT id, saved_ms, node, by_whom, digest, text FROM config_history \
         ORDER BY id DESC LIMIT 1",
        &[],
    )
    .await?
    else {
        return Ok(None);
    };
    Ok(Some(SavedConfig {
        id: get(&row, 0, DOING)?,
        saved_ms: get(&row, 1, DOING)?,
        node: get(&row, 2, DOING)?,
        by: get(&row, 3, DOING)?,
        digest: get(&row, 4, DOING)?,
        text: get(&row, 5, DOING)?,
    }))
}

/// The newest `limit` saved configs, newest first, their text left empty.
pub(super) async fn history(
    c: &impl GenericClient,
    limit: u32,
) -> Result<Vec<SavedConfig>, StoreError> {
    const DOING: &str = "listing the cluster's config history";
    rows(
        c,
        DOING,
        "SELECT id, saved_ms, node, by_whom, digest FROM config_history \
         ORDER BY id DESC LIMIT $1",
        &[&i64::from(limit)],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(SavedConfig {
            id: get(row, 0, DOING)?,
            saved_ms: get(row, 1, DOING)?,
            node: get(row, 2, DOING)?,
            by: get(row, 3, DOING)?,
            digest: get(row, 4, DOING)?,
            text: String::new(),
        })
    })
    .collect()
}

/// Record `digest` as the config this instance of `node` runs.
pub(super) async fn set_digest(
    c: &impl GenericClient,
    node: &NodeIdentity,
    digest: &str,
) -> Result<(), StoreError> {
    exec(
        c,
        "recording the digest of the running config",
        "UPDATE cluster_nodes SET config_digest = $3 WHERE id = $1 AND instance = $2",
        &[&node.id, &node.instance, &digest],
    )
    .await?;
    Ok(())
}
