//! A Server-Sent Events client for tests: connect to a URL, then await events by name and predicate.
//!
//! Why not a crate: tests need "wait until an event like this arrives, with a timeout, remembering what
//! came before" more than a general client; the framing (`event:` / `data:` lines, blank line ends an
//! event, comments start with `:`) is read with `eventsource-stream`'s rules in mind but kept tiny.

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

/// One event: its name (`message` when unnamed) and its data parsed as JSON (a string if not JSON).
#[derive(Clone, Debug)]
pub struct SseEvent {
    /// The `event:` field.
    pub name: String,
    /// The `data:` field, parsed.
    pub data: Value,
    /// When the client read it off the stream (for order assertions against other clocks of the
    /// same process, e.g. when the scripted LLM answered a request).
    pub received_at: SystemTime,
}

/// A connected SSE stream.
pub struct Sse {
    events: mpsc::UnboundedReceiver<SseEvent>,
    /// Every event received so far, in order.
    pub seen: Vec<SseEvent>,
}

impl Sse {
    /// Connect to `url` (optionally with a bearer token) and start reading in the background.
    pub async fn connect(url: &str, token: Option<&str>) -> Sse {
        let client = crate::http_client();
        let mut request = client.get(url).header("accept", "text/event-stream");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = crate::wait::within(
            Duration::from_secs(20),
            &format!("the SSE response headers of {url}"),
            request.send(),
        )
        .await
        .unwrap_or_else(|e| panic!("SSE connect {url}: {e}"));
        assert!(
            response.status().is_success(),
            "SSE {url}: status {}",
            response.status()
        );
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut body = response.bytes_stream();
            let mut buffer = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let block: String = buffer.drain(..end + 2).collect();
                    let (mut name, mut data) = (String::from("message"), Vec::new());
                    for line in block.lines() {
                        if let Some(v) = line.strip_prefix("event:") {
                            name = v.trim().to_string();
                        } else if let Some(v) = line.strip_prefix("data:") {
                            data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                        }
                    }
                    if data.is_empty() {
                        continue;
                    }
                    let data = data.join("\n");
                    let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                    let event = SseEvent {
                        name,
                        data,
                        received_at: SystemTime::now(),
                    };
                    if tx.send(event).is_err() {
                        return;
                    }
                }
            }
        });
        Sse {
            events,
            seen: Vec::new(),
        }
    }

    /// Wait for the next event named `name` (or any of `a|b`) whose data satisfies `matches` (already-seen events are not
    /// searched). Panics with what was seen after `timeout`.
    pub async fn wait_for(
        &mut self,
        name: &str,
        timeout: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(event)) => {
                    self.seen.push(event.clone());
                    if name.split('|').any(|n| n == event.name) && matches(&event.data) {
                        return event.data;
                    }
                }
                Ok(None) => panic!("SSE stream closed; seen: {:#?}", self.seen),
                Err(_) => panic!(
                    "no `{name}` event matching within {timeout:?}; seen: {:#?}",
                    self.seen
                ),
            }
        }
    }
}
