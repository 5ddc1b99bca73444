//! The live events of a cluster node's trees, relayed to every other node (issue 36: a web chat page
//! on node A shows the trace and the streamed answer of a tree running on node B).
//!
//! Out: what happens in this process ([`EventBus::subscribe_local`]) is batched for a few
//! milliseconds and sent through [`Cluster::relay`] (PostgreSQL NOTIFY), each payload under
//! [`RELAY_LIMIT`]. In: a payload from another node is published on this node's bus as remote
//! ([`EventBus::publish_remote`]), so it is shown here and never relayed back.
//!
//! Invariants:
//! - relaying is for display: the durable record (tasks, transcript, ledger) is the database's, so
//!   a relay that fails or a node that misses a payload loses live detail, never an answer;
//! - config events stay on their node (each node reloads its own config);
//! - an event too large for one payload has its long text cut, and says so.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::events::{Event, EventBus};
use crate::store::{Cluster, RELAY_LIMIT};

/// How long a batch gathers events before it is sent: short enough that streamed tokens still read
/// as streaming, long enough that a burst of tokens is one NOTIFY, not dozens.
const BATCH: Duration = Duration::from_millis(25);

/// One payload on the wire.
#[derive(Serialize, Deserialize)]
struct Batch {
    /// The sending process's instance (a node ignores its own payloads).
    from: i64,
    events: Vec<Event>,
}

/// Relay this process's events to the other nodes until `shutdown`.
pub(crate) async fn relay_out(
    cluster: std::sync::Arc<dyn Cluster>,
    bus: EventBus,
    shutdown: CancellationToken,
) {
    let from = cluster.node().instance;
    let mut rx = bus.subscribe_local();
    let mut failing = false;
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = rx.recv() => event,
        };
        let mut events = match first {
            Ok(event) if relayed(&event) => vec![event],
            Ok(_) | Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let deadline = tokio::time::Instant::now() + BATCH;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                event = rx.recv() => match event {
                    Ok(event) if relayed(&event) => events.push(event),
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                },
            }
        }
        for payload in payloads(from, events) {
            match cluster.relay(&payload).await {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "cannot relay live events to the other nodes; their pages miss this node's trace until it works again");
                }
                Err(_) => {}
            }
        }
    }
}

/// Publish the events of a payload another node relayed (this node's own are ignored).
pub(crate) fn relay_in(bus: &EventBus, own_instance: i64, payload: &str) {
    match serde_json::from_str::<Batch>(payload) {
        Ok(batch) if batch.from != own_instance => {
            for event in batch.events {
                bus.publish_remote(event);
            }
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "ignoring a relayed payload this node cannot read"),
    }
}

/// Whether `event` is relayed (everything about tasks and memory work; not config reloads, which
/// each node does for itself).
fn relayed(event: &Event) -> bool {
    !matches!(
        event,
        Event::ConfigReloaded { .. } | Event::ConfigRejected { .. }
    )
}

/// `events` as payloads of at most [`RELAY_LIMIT`] bytes, in order.
fn payloads(from: i64, events: Vec<Event>) -> Vec<String> {
    let mut out = Vec::new();
    let mut batch: Vec<Event> = Vec::new();
    for event in events {
        let event = fit(from, event);
        batch.push(event);
        if encode(from, &batch).len() > RELAY_LIMIT {
            let last = batch.pop();
            if !batch.is_empty() {
                out.push(encode(from, &batch));
            }
            batch = last.into_iter().collect();
        }
    }
    if !batch.is_empty() {
        out.push(encode(from, &batch));
    }
    out
}

fn encode(from: i64, events: &[Event]) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        from: i64,
        events: &'a [Event],
    }
    serde_json::to_string(&Out { from, events }).unwrap_or_default()
}

/// `event`, its long text cut so that it fits one payload alone.
fn fit(from: i64, mut event: Event) -> Event {
    let size = encode(from, std::slice::from_ref(&event)).len();
    if size <= RELAY_LIMIT {
        return event;
    }
    let text = match &mut event {
        Event::AgentFinished { text, .. } | Event::Token { text, .. } => Some(text),
        Event::ApprovalRequested { summary, .. } => Some(summary),
        Event::Escalated { reason, .. } => Some(reason),
        Event::FactsRejected { reason, .. } => Some(reason),
        Event::MemoryWorkFailed { error, .. } => Some(error),
        _ => None,
    };
    if let Some(text) = text {
        let note = " … (cut: the whole text is on the node that ran it, and in the task's record)";
        // What the text may take in JSON: the payload's room, less everything around the text.
        let escaped = |t: &str| serde_json::to_string(t).map_or(t.len(), |j| j.len() - 2);
        let around = size - escaped(text);
        let mut room = RELAY_LIMIT.saturating_sub(around + escaped(note));
        let mut cut = 0;
        for c in text.chars() {
            let cost = escaped(c.encode_utf8(&mut [0; 4]));
            if cost > room {
                break;
            }
            room -= cost;
            cut += c.len_utf8();
        }
        text.truncate(cut);
        text.push_str(note);
    }
    event
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn token(text: &str) -> Event {
        Event::Token {
            task: 7,
            agent: "ceo".into(),
            text: text.into(),
        }
    }

    #[test]
    fn batches_stay_under_the_limit_and_keep_their_order() {
        let events: Vec<Event> = (0..2000).map(|i| token(&format!("piece {i} "))).collect();
        let out = payloads(1, events.clone());
        assert!(out.len() > 1, "2000 tokens do not fit one payload");
        let mut back = Vec::new();
        for payload in &out {
            assert!(payload.len() <= RELAY_LIMIT, "{} bytes", payload.len());
            let batch: Batch = serde_json::from_str(payload).unwrap();
            assert_eq!(batch.from, 1);
            back.extend(batch.events);
        }
        assert_eq!(back, events);
    }

    #[test]
    fn an_event_too_large_alone_is_cut_and_says_so() {
        let long = "é\"".repeat(10_000);
        let out = payloads(1, vec![token("a"), token(&long), token("b")]);
        let mut back = Vec::new();
        for payload in &out {
            assert!(payload.len() <= RELAY_LIMIT, "{} bytes", payload.len());
            back.extend(serde_json::from_str::<Batch>(payload).unwrap().events);
        }
        assert_eq!(back.len(), 3);
        assert_eq!(back[0], token("a"));
        assert_eq!(back[2], token("b"));
        let Event::Token { text, .. } = &back[1] else {
            panic!("{:?}", back[1]);
        };
        assert!(text.starts_with("é\"é\""), "{text}");
        assert!(text.ends_with("in the task's record)"), "{text}");
    }

    #[tokio::test]
    async fn a_node_publishes_what_others_relayed_never_its_own_and_never_relays_it_back() {
        let bus = EventBus::default();
        let mut all = bus.subscribe();
        let mut local = bus.subscribe_local();
        let theirs = encode(2, &[token("from b")]);
        let ours = encode(1, &[token("from a")]);
        relay_in(&bus, 1, &ours);
        relay_in(&bus, 1, "not json");
        relay_in(&bus, 1, &theirs);
        assert_eq!(all.recv().await.unwrap(), token("from b"));
        assert!(
            all.try_recv().is_err(),
            "its own payload is not published again"
        );
        assert!(
            local.try_recv().is_err(),
            "a relayed event is not this node's to relay"
        );
    }
}
