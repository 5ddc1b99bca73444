//! Socket Mode: our own websocket loop (`apps.connections.open`, then the `wss://` URL it returns).
//!
//! Invariants: every envelope is acknowledged the moment it is read, before it is handed on; a
//! `disconnect` envelope reconnects at once, a lost socket after the shared backoff policy's wait
//! (`opc_retry`, honouring Slack's `Retry-After`; reset once connected);
//! the loop stops on the adapter's stop token and never outlives the adapter.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use opc_retry::{Jitter, RetryPolicy};
use serde_json::{Value, json};
use slack_morphism::prelude::*;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::AdapterError;

use super::Receiver;
use super::events::str_at;
use super::web_api::{WebClient, api_error};

/// Ask Slack for a fresh websocket URL (each is single-use).
pub(super) async fn open_socket_url(
    client: &WebClient,
    app_token: &SlackApiToken,
) -> Result<String, AdapterError> {
    let response = client
        .open_session(app_token)
        .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
        .await
        .map_err(|e| api_error("apps.connections.open", e))?;
    Ok(response.url.0.to_string())
}

/// Why a socket session ended.
pub(super) enum SocketEnd {
    /// Shutdown was asked for.
    Stopped,
    /// Slack asked us to reconnect (`disconnect` envelope).
    Disconnect,
    /// The socket failed or closed.
    Lost,
}

/// Keep a Socket Mode connection until `stop`: connect, read, reconnect with backoff.
pub(super) async fn socket_loop(
    receiver: Arc<Receiver>,
    client: WebClient,
    app_token: SlackApiToken,
    mut next_url: Option<String>,
    stop: CancellationToken,
) {
    // Without end (Socket Mode is how events arrive), 0.5 s doubling to 30 s, or what Slack asks
    // for when it rate-limits `apps.connections.open`; unjittered, as one process holds one socket.
    let policy = RetryPolicy {
        max_attempts: u32::MAX,
        base_delay: Duration::from_millis(500),
        factor: 2,
        max_delay: Duration::from_secs(30),
        jitter: Jitter::None,
    };
    // Failed attempts since the last connection, and the wait the last failure asked for.
    let mut failures: u32 = 0;
    let mut retry_after = None;
    loop {
        if stop.is_cancelled() {
            return;
        }
        let url = match next_url.take() {
            Some(url) => Ok(url),
            None => open_socket_url(&client, &app_token).await,
        };
        let end = match url {
            Err(e) => {
                warn!(error = %e, "slack socket url refused");
                retry_after = e.retry_after();
                SocketEnd::Lost
            }
            Ok(url) => {
                let connected = tokio::select! {
                    _ = stop.cancelled() => return,
                    connected = tokio_tungstenite::connect_async(url.as_str()) => connected,
                };
                match connected {
                    Ok((socket, _)) => {
                        // Connected: a later loss starts its backoff afresh.
                        failures = 0;
                        run_socket(&receiver, socket, &stop).await
                    }
                    Err(e) => {
                        warn!(error = %e, "slack socket connect failed");
                        SocketEnd::Lost
                    }
                }
            }
        };
        match end {
            SocketEnd::Stopped => return,
            SocketEnd::Disconnect => info!("slack asked to reconnect"),
            SocketEnd::Lost => {
                failures = failures.saturating_add(1);
                let delay = policy.delay(failures, retry_after.take());
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Read one websocket session: ack every envelope the moment it is read, then hand it on.
pub(super) async fn run_socket<S>(
    receiver: &Receiver,
    socket: tokio_tungstenite::WebSocketStream<S>,
    stop: &CancellationToken,
) -> SocketEnd
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = socket.split();
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => {
                let _ = sink.send(WsMessage::Close(None)).await;
                return SocketEnd::Stopped;
            }
            next = stream.next() => next,
        };
        let text = match next {
            None => return SocketEnd::Lost,
            Some(Err(e)) => {
                warn!(error = %e, "slack socket failed");
                return SocketEnd::Lost;
            }
            Some(Ok(WsMessage::Text(text))) => text,
            Some(Ok(WsMessage::Close(_))) => return SocketEnd::Lost,
            // Pings are answered by tungstenite itself.
            Some(Ok(_)) => continue,
        };
        let Ok(envelope) = serde_json::from_str::<Value>(text.as_str()) else {
            warn!("malformed slack socket frame dropped");
            continue;
        };
        match str_at(&envelope, &["type"]) {
            Some("hello") => debug!("slack socket hello"),
            Some("disconnect") => {
                debug!(
                    reason = str_at(&envelope, &["reason"]).unwrap_or("-"),
                    "slack socket disconnect"
                );
                let _ = sink.send(WsMessage::Close(None)).await;
                return SocketEnd::Disconnect;
            }
            _ => {
                if let Some(id) = str_at(&envelope, &["envelope_id"]) {
                    let ack = json!({ "envelope_id": id }).to_string();
                    if let Err(e) = sink.send(WsMessage::Text(ack.into())).await {
                        warn!(error = %e, "slack ack failed");
                        return SocketEnd::Lost;
                    }
                }
                receiver.envelope(&envelope);
            }
        }
    }
}
