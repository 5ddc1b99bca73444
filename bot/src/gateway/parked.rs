//! Messages waiting for a busy conversation, kept in the database in a cluster (issue 36 §2: a
//! request accepted at any node is written as queued work, and a node's death loses nothing).
//!
//! A follow-up that arrives while its conversation answers another waits in the receiving node's
//! memory ([`super::queue`]), in order. In a cluster it is also kept in `gateway_waiting` under the
//! node's instance ([`super::threads::Threads::park`]). Whoever deletes the row answers the
//! message: the node itself when its turn comes ([`Gateway::next_waiting`]), or, when that
//! instance died or stopped, another node, which takes the rows over every `leaseTtl / 3`
//! ([`Gateway::adopt_waiting`]) and queues them behind whatever its conversation runs (the request
//! of the dead node, whose answer that node's reply duty posts).
//!
//! Invariants:
//! - a message is answered by one node: the row's deletion decides, and a node whose kept message
//!   was taken by another drops it from its memory without a word;
//! - a node stopping cleanly leaves its kept messages to the others (they are not refused with
//!   "send it again"); the last node of a cluster answers them when it starts again;
//! - when the database cannot keep a message, it waits in memory as on one node (a warning says it
//!   would be lost with this node);
//! - with SQLite (one node) nothing is kept: a stop tells each sender to send again, as before.

use std::sync::Arc;

use opc_adapters::{Inbound, InboundKind, Place, ReplyHandle, User};
use opc_agents::store::Cluster;
use serde::{Deserialize, Serialize};

use super::Gateway;
use super::messages::Waiting;

/// How many kept messages one pass takes over at most (the next pass takes the rest).
const ADOPT_LIMIT: i64 = 16;

/// A waiting message as kept in the database: what [`Waiting`] needs, without its adapter (the
/// node answering it uses its own, of the same platform).
#[derive(Serialize, Deserialize)]
struct Kept {
    /// Where the answer goes (the conversation's thread).
    place: Place,
    /// Where the message was written.
    written_in: Place,
    user_id: String,
    user_name: String,
    user_roles: Vec<String>,
    /// How to answer its sender alone (a refusal).
    reply: ReplyHandle,
    text: String,
    /// The thread it continued.
    thread: String,
    /// Its inbound span's trace context (telemetry), so the node that answers it continues the
    /// same trace. Absent in rows kept by an older OPC.
    #[serde(default)]
    trace: Option<String>,
}

impl Gateway {
    /// In a cluster, keep `waiting` (about to wait for busy `conversation`) in the database, so
    /// another node answers it if this one dies; its row id is remembered in `waiting`.
    pub(super) fn park(&self, conversation: &str, waiting: &mut Waiting) {
        let Some(cluster) = &self.inner.cluster else {
            return;
        };
        let (thread, text) = match &waiting.inbound.kind {
            InboundKind::Message { continues, .. } => (continues.clone(), waiting.text.clone()),
            InboundKind::Mention {
                continues: Some(continues),
                ..
            } => (continues.clone(), waiting.text.clone()),
            // Only a message in a thread can wait for a conversation.
            _ => return,
        };
        let kept = Kept {
            place: waiting.place.clone(),
            written_in: waiting.inbound.place.clone(),
            user_id: waiting.inbound.user.id.clone(),
            user_name: waiting.inbound.user.name.clone(),
            user_roles: waiting.inbound.user.roles.clone(),
            reply: waiting.inbound.reply.clone(),
            text,
            thread,
            trace: opc_telemetry::carry::of(&waiting.span),
        };
        let Ok(json) = serde_json::to_string(&kept) else {
            return;
        };
        match self.inner.threads.park(
            conversation,
            cluster.node().instance,
            waiting.place.platform,
            json,
        ) {
            Ok(id) => waiting.parked = id,
            Err(error) => tracing::warn!(
                %error,
                "could not keep a waiting message in the database; it waits in this node's memory \
                 only (lost if this node dies)"
            ),
        }
    }

    /// `waiting` leaves the line (it starts, or is refused): its kept row goes. `false` when
    /// another node took it over first (it answers it; this node forgets it).
    pub(super) fn unpark(&self, waiting: &Waiting) -> bool {
        let Some(id) = waiting.parked else {
            return true;
        };
        match self.inner.threads.unpark(id) {
            Ok(mine) => mine,
            Err(error) => {
                tracing::warn!(%error, "could not take a waiting message out of the database; answering it here (another node may answer it too)");
                true
            }
        }
    }

    /// The next message waiting for `conversation` that this node still answers (see
    /// [`super::queue::Queues::next`]).
    pub(super) fn next_waiting(&self, conversation: &str) -> Option<Waiting> {
        loop {
            let waiting = self.inner.queues.next(conversation)?;
            if self.unpark(&waiting) {
                return Some(waiting);
            }
            tracing::info!("a waiting message was taken over by another node; it answers it");
        }
    }

    /// Take over the messages kept by node instances that are gone (dead, or stopped and handed
    /// them on) and queue each behind whatever its conversation runs; `false` when the database
    /// failed.
    pub(super) async fn adopt_waiting(&self, cluster: &Arc<dyn Cluster>) -> bool {
        let Some(live) = self.live_instances(cluster).await else {
            return false;
        };
        let platforms: Vec<String> = self
            .inner
            .adapters
            .keys()
            .map(|p| p.as_str().to_string())
            .collect();
        let orphans = match self.inner.threads.orphans(live, platforms, ADOPT_LIMIT) {
            Ok(orphans) => orphans,
            Err(_) => return false,
        };
        for (conversation, json) in orphans {
            let Some(waiting) = self.revive(&json) else {
                tracing::warn!(
                    "a waiting message kept by a node that stopped could not be read; it is dropped"
                );
                continue;
            };
            tracing::info!(platform = %waiting.place.platform, "took over a message waiting on a node that stopped");
            self.admit_waiting(conversation, waiting).await;
        }
        true
    }

    /// A kept message as this node answers it: `None` when it cannot be read or its platform does
    /// not run here (the query only hands out this node's platforms).
    fn revive(&self, json: &str) -> Option<Waiting> {
        let kept: Kept = serde_json::from_str(json).ok()?;
        let adapter = self.adapter(kept.place.platform)?;
        let inbound = Inbound {
            place: kept.written_in,
            user: User {
                id: kept.user_id,
                name: kept.user_name,
                roles: kept.user_roles,
            },
            reply: kept.reply,
            kind: InboundKind::Message {
                text: kept.text.clone(),
                continues: kept.thread,
            },
            delivery: None,
            // The node that kept it continues its trace.
            traceparent: kept.trace,
        };
        Some(Waiting {
            span: super::messages::inbound_span(&inbound, None),
            adapter,
            inbound,
            text: kept.text,
            place: kept.place,
            parked: None,
        })
    }
}
