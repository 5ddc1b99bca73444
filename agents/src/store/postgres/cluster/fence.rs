//! The fence of a tree's store: the lease (root and token) every write of the tree's sessions is
//! checked against, first thing in the write's own transaction.
//!
//! Why `FOR SHARE` on the lease row: a takeover changes the row's token with an `UPDATE`, which
//! waits for every transaction holding the row `FOR SHARE` to end, and a check that starts while
//! the takeover's `UPDATE` is in flight waits for it, then reads the new token. So a fenced write
//! either commits before the takeover (the takeover waits for it) or reads the new token and fails
//! with [`StoreError::Fenced`], having written nothing (the check is its first statement). Fenced
//! writers of one tree do not block each other (shared locks); a claim never waits on them (it
//! skips a locked lease row, `leases.rs`).
//!
//! The check does not look at the lease's expiry: a lease that expired but that no other node took
//! over is still this node's (its heartbeat renews it), and its writes are still the tree's only
//! ones.

use std::sync::Arc;

use super::super::super::{StoreError, TaskId};
use super::super::sql::{LEASE_CHECK, Tx, opt};

/// The lease a fenced store writes under, and the node it stamps on the tasks it creates.
#[derive(Clone, Debug)]
pub(crate) struct Fence {
    /// The tree's root task.
    pub(crate) root: TaskId,
    /// The lease's token when this node claimed the tree.
    pub(crate) token: i64,
    /// This node's name (`tasks.node` of the tasks it creates).
    pub(crate) node: Arc<str>,
}

impl Fence {
    /// Check, in write transaction `t` and before anything else in it, that the tree's lease still
    /// has this fence's token; the lease row stays share-locked to the commit.
    pub(crate) async fn check(&self, t: &Tx<'_>) -> Result<(), StoreError> {
        let held = opt(
            t.c(),
            "checking the tree's lease",
            LEASE_CHECK,
            &[&self.root, &self.token],
        )
        .await?;
        match held {
            Some(_) => Ok(()),
            None => Err(StoreError::Fenced { root: self.root }),
        }
    }
}
