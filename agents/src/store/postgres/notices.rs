//! Notices to conversations on PostgreSQL: the SQL of `store/notices.rs`, in PostgreSQL's dialect.
//! The engine writes them; a gateway (on any node) posts each one and marks it delivered.
//!
//! Invariant: a notice is undelivered (`delivered_at IS NULL`) until [`mark_notice_delivered`], which
//! is one conditional `UPDATE … WHERE delivered_at IS NULL` locking the notice's row: of two nodes
//! marking the same notice, the second waits for the first's commit, then changes nothing, so
//! exactly one is told it was the first. [`insert`] and [`add_notice`] lock nothing but the new row.

use deadpool_postgres::GenericClient;

use super::super::{Notice, StoreError, TaskId, now_ms};
use super::sql::{Tx, exec, get, rows};

/// Insert a notice inside the caller's transaction (recovery writes them in its own).
pub(super) async fn insert(
    t: &Tx<'_>,
    conversation_id: &str,
    task_id: Option<TaskId>,
    text: &str,
    now: i64,
) -> Result<(), StoreError> {
    exec(
        t.c(),
        "adding a notice",
        "INSERT INTO notices (conversation_id, task_id, text, created_at) VALUES ($1, $2, $3, $4)",
        &[&conversation_id, &task_id, &text, &now],
    )
    .await?;
    Ok(())
}

/// Tell a conversation something (e.g. that its task was interrupted).
pub(super) async fn add_notice(
    t: &Tx<'_>,
    conversation_id: &str,
    task_id: Option<TaskId>,
    text: &str,
) -> Result<(), StoreError> {
    insert(t, conversation_id, task_id, text, now_ms()).await
}

/// A conversation's notices, delivered or not, oldest first.
pub(super) async fn notices(
    c: &impl GenericClient,
    conversation_id: &str,
) -> Result<Vec<String>, StoreError> {
    const DOING: &str = "reading notices";
    rows(
        c,
        DOING,
        "SELECT text FROM notices WHERE conversation_id = $1 ORDER BY id",
        &[&conversation_id],
    )
    .await?
    .iter()
    .map(|r| get(r, 0, DOING))
    .collect()
}

/// Every notice not yet delivered, oldest first (a gateway posts them, then marks each one).
pub(super) async fn undelivered_notices(c: &impl GenericClient) -> Result<Vec<Notice>, StoreError> {
    const DOING: &str = "reading undelivered notices";
    rows(
        c,
        DOING,
        "SELECT id, conversation_id, text, created_at FROM notices \
         WHERE delivered_at IS NULL ORDER BY id",
        &[],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(Notice {
            id: get(r, 0, DOING)?,
            conversation_id: get(r, 1, DOING)?,
            text: get(r, 2, DOING)?,
            created_at: get(r, 3, DOING)?,
        })
    })
    .collect()
}

/// Record that notice `id` was posted. Whether it was undelivered until now (`false` for a notice
/// already marked, by this node or another, or no such notice), so marking twice is harmless.
pub(super) async fn mark_notice_delivered(t: &Tx<'_>, id: i64) -> Result<bool, StoreError> {
    let changed = exec(
        t.c(),
        "marking a notice delivered",
        "UPDATE notices SET delivered_at = $2 WHERE id = $1 AND delivered_at IS NULL",
        &[&id, &now_ms()],
    )
    .await?;
    Ok(changed == 1)
}
