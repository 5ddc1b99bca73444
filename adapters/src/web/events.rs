//! A conversation's server-sent event stream: its replay from the transcript, then its live events,
//! each encoded as one SSE event the page understands.
//!
//! Why here, apart from the handlers: the stream's lifetime is what costs memory. A subscription is
//! the only thing that keeps a conversation's live channel, and it is let go when the client goes
//! away, the subscriber falls behind, or the server stops.
//!
//! Invariants:
//! - the replay is read and the subscription opened under one lock: nothing recorded in between is
//!   missed or sent twice;
//! - every stream starts with `reset` (which also sets the client's reconnect delay), so a reconnect
//!   replaces what the page shows instead of adding to it;
//! - a subscriber more than [`SUBSCRIBER_BUFFER`] events behind is disconnected, not waited for; its
//!   `EventSource` reconnects and gets a full replay;
//! - an idle stream carries a keep-alive comment every [`KEEP_ALIVE`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::broadcast;

use super::SUBSCRIBER_BUFFER;
use super::state::{Shared, WebEvent};
use super::transcript::{Author, Entry, TranscriptError};

/// How often an idle event stream carries a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

impl WebEvent {
    fn to_sse(&self) -> Event {
        let (name, data) = match self {
            WebEvent::Reset => ("reset", json!({})),
            WebEvent::Message {
                id,
                author: Author::Notice,
                text,
            } => ("notice", json!({"id": id.to_string(), "text": text})),
            WebEvent::Message { id, author, text } => (
                "message",
                json!({"id": id.to_string(), "author": author.as_str(), "text": text}),
            ),
            WebEvent::Edit { id, text } => ("edit", json!({"id": id.to_string(), "text": text})),
            WebEvent::Card { id, card, update } => (
                if *update { "card_update" } else { "card" },
                json!({"id": id.to_string(), "card": card, "text": card.to_markdown()}),
            ),
            WebEvent::Progress(event) => ("progress", event.clone()),
        };
        let event = Event::default().event(name).data(data.to_string());
        if matches!(self, WebEvent::Reset) {
            event.retry(Duration::from_secs(2))
        } else {
            event
        }
    }

    fn from_entry(entry: Entry) -> WebEvent {
        match entry {
            Entry::Message {
                number,
                author,
                text,
            } => WebEvent::Message {
                id: number,
                author,
                text,
            },
            Entry::Card { number, card } => WebEvent::Card {
                id: number,
                card: Box::new(card),
                update: false,
            },
            Entry::Progress(event) => WebEvent::Progress(event),
        }
    }
}

/// An open event stream's hold on its conversation's channel: dropping it (the client went away, or
/// the server stops) forgets the channel once no other stream is open.
struct Subscription {
    receiver: Option<broadcast::Receiver<WebEvent>>,
    shared: Arc<Shared>,
    conversation: String,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.receiver.take());
        let mut state = self.shared.lock();
        if state
            .live
            .get(&self.conversation)
            .is_some_and(|live| live.receiver_count() == 0)
        {
            state.live.remove(&self.conversation);
        }
    }
}

/// The event stream of conversation `id` (a valid id) as an SSE response; `Ok(None)` for an unknown
/// conversation.
pub(super) fn open(shared: &Arc<Shared>, id: String) -> Result<Option<Response>, TranscriptError> {
    let (replay, live) = {
        let mut state = shared.lock();
        // Replay and subscription under one lock: nothing is missed, nothing doubled.
        let Some(replay) = state.transcript.replay(&id)? else {
            return Ok(None);
        };
        let live = state
            .live
            .entry(id.clone())
            .or_insert_with(|| broadcast::channel(SUBSCRIBER_BUFFER).0)
            .subscribe();
        (replay, live)
    };
    let subscription = Subscription {
        receiver: Some(live),
        shared: shared.clone(),
        conversation: id,
    };
    let replay = futures_util::stream::iter(
        std::iter::once(WebEvent::Reset).chain(replay.into_iter().map(WebEvent::from_entry)),
    );
    let live = futures_util::stream::unfold(subscription, |mut subscription| async move {
        let receiver = subscription.receiver.as_mut()?;
        match receiver.recv().await {
            Ok(event) => Some((event, subscription)),
            // Too slow: end the stream; the client reconnects and gets a full replay.
            Err(broadcast::error::RecvError::Lagged(_))
            | Err(broadcast::error::RecvError::Closed) => None,
        }
    });
    let stream = replay
        .chain(live)
        .take_until(shared.closing.clone().cancelled_owned())
        .map(|event| Ok::<Event, Infallible>(event.to_sse()));
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(Some(response))
}
