//! HTTP plumbing shared by the provider wire clients: sending a request and mapping failures to
//! [`LlmError`] kinds, reading a JSON body, and turning a streamed body into Server-Sent Events that a
//! provider-specific [`SseMachine`] folds into an [`LlmResponse`].
//!
//! Invariants:
//! - error messages never contain the request body or an API key: connection errors are described
//!   from reqwest's error chain with the URL stripped (it is reported separately), and status errors
//!   quote only the provider's own error message, or at most [`ERROR_BODY_CHARS`] of its body;
//! - a failure to send (no response yet) is [`LlmError::Connect`]; a non-2xx status is
//!   [`LlmError::Status`] with the `retry-after` the provider asked for; a body that breaks off is
//!   [`LlmError::StreamCut`]; a 2xx body that is not the documented format is [`LlmError::Malformed`];
//! - the SSE state machines are pure (no I/O): [`drive`] owns the reading, so every accumulation rule
//!   is testable by feeding [`SseEvent`]s by hand.

use std::pin::pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use reqwest::header::{HeaderMap, RETRY_AFTER};

use super::{LlmError, LlmResponse};

/// At most this many characters of a non-JSON error body are quoted in [`LlmError::Status`].
pub(crate) const ERROR_BODY_CHARS: usize = 300;

/// At most this many characters of anything taken from a 2xx body are quoted in
/// [`LlmError::Malformed`].
pub(crate) const MALFORMED_CHARS: usize = 200;

/// One Server-Sent Event: its name (`message` when the stream gave none) and its data lines joined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub(crate) event: String,
    /// The `data:` lines, joined by `\n`.
    pub(crate) data: String,
}

impl SseEvent {
    /// An event named `event` carrying `data` (for tests and callers that build events by hand).
    #[cfg(test)]
    pub(crate) fn new(event: &str, data: &str) -> Self {
        SseEvent {
            event: event.to_string(),
            data: data.to_string(),
        }
    }
}

/// Why reading an event stream failed. Callers turn it into an [`LlmError`] with [`SseError::into_llm`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SseError {
    /// The connection broke while the body was being read.
    Transport(String),
    /// The bytes were not a valid event stream (not UTF-8, or unparseable lines).
    Invalid(String),
}

impl SseError {
    /// The call error for `provider`: a broken connection is a cut stream, a bad stream is malformed.
    pub(crate) fn into_llm(self, provider: &str) -> LlmError {
        match self {
            SseError::Transport(message) => stream_cut(provider, message),
            SseError::Invalid(message) => malformed(provider, message),
        }
    }
}

/// The body of `response` as a stream of [`SseEvent`]s.
pub(crate) fn events(
    response: reqwest::Response,
) -> impl Stream<Item = Result<SseEvent, SseError>> {
    response
        .bytes_stream()
        .eventsource()
        .map(|item| match item {
            Ok(event) => Ok(SseEvent {
                event: event.event,
                data: event.data,
            }),
            Err(eventsource_stream::EventStreamError::Transport(err)) => {
                Err(SseError::Transport(describe(err)))
            }
            Err(eventsource_stream::EventStreamError::Utf8(err)) => Err(SseError::Invalid(
                format!("event stream is not UTF-8: {err}"),
            )),
            Err(eventsource_stream::EventStreamError::Parser(err)) => Err(SseError::Invalid(
                format!("unparseable event stream line ({:?})", err.code),
            )),
        })
}

/// A provider's streaming format, folded event by event into a response. Implementations do no I/O.
pub(crate) trait SseMachine {
    /// Take one event. `Ok(Some(response))` when the stream's terminating event arrived; `Ok(None)` to
    /// keep reading; `Err` when the provider reported an error or sent something malformed.
    fn feed(&mut self, event: &SseEvent) -> Result<Option<LlmResponse>, LlmError>;

    /// The body ended without the terminating event: a complete response if the format allows it,
    /// otherwise [`LlmError::StreamCut`].
    fn finish(self) -> Result<LlmResponse, LlmError>;
}

/// Read `response` as an event stream through `machine` until it completes, fails or the body ends.
pub(crate) async fn drive<M: SseMachine>(
    response: reqwest::Response,
    provider: &str,
    mut machine: M,
) -> Result<LlmResponse, LlmError> {
    let mut stream = pin!(events(response));
    while let Some(item) = stream.next().await {
        let event = item.map_err(|err| err.into_llm(provider))?;
        if let Some(done) = machine.feed(&event)? {
            return Ok(done);
        }
    }
    machine.finish()
}

/// Send `request` to `url` (the endpoint, for the error) and return the response if its status is
/// 2xx; otherwise read the body and return [`LlmError::Status`].
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    provider: &str,
    model: &str,
    url: &str,
) -> Result<reqwest::Response, LlmError> {
    let response = request.send().await.map_err(|err| LlmError::Connect {
        provider: provider.to_string(),
        url: url.to_string(),
        message: describe(err),
    })?;
    let status = response.status();
    if status.is_success() {
        tracing::debug!(
            provider,
            model,
            status = status.as_u16(),
            "provider answered"
        );
        return Ok(response);
    }
    tracing::warn!(
        provider,
        model,
        status = status.as_u16(),
        "provider returned an error status"
    );
    let retry_after = retry_after(response.headers());
    // A body that cannot be read still leaves the status, which is what matters.
    let body = response.text().await.unwrap_or_default();
    let mut message = error_message(&body);
    if message.is_empty() {
        message = status
            .canonical_reason()
            .unwrap_or("no error message")
            .to_string();
    }
    Err(LlmError::Status {
        provider: provider.to_string(),
        status: status.as_u16(),
        message,
        retry_after,
    })
}

/// Read a whole 2xx body and parse it as JSON into `T`.
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
    provider: &str,
) -> Result<T, LlmError> {
    let bytes = response
        .bytes()
        .await
        .map_err(|err| stream_cut(provider, describe(err)))?;
    parse_json(&bytes, provider, "response body")
}

/// Parse `bytes` (a `what`, for the message) as JSON into `T`, or [`LlmError::Malformed`].
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    provider: &str,
    what: &str,
) -> Result<T, LlmError> {
    // serde_json's messages name a position or field, never the input, so they are safe to quote.
    serde_json::from_slice(bytes).map_err(|err| malformed(provider, format!("{what}: {err}")))
}

/// The delay a `retry-after` header asks for: integer or fractional seconds. HTTP dates, negative,
/// non-finite or absurd values are ignored.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    parse_retry_after(headers.get(RETRY_AFTER)?.to_str().ok()?)
}

/// [`retry_after`] on the header's text.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(seconds).ok()
}

/// The human part of an error body: `error.message` (Anthropic, OpenAI), `error` when it is a string
/// (Ollama), a top-level `message` (vLLM), else the body's first [`ERROR_BODY_CHARS`] characters.
pub(crate) fn error_message(body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        let found = value
            .pointer("/error/message")
            .and_then(|m| m.as_str())
            .or_else(|| value.get("error").and_then(|m| m.as_str()))
            .or_else(|| value.get("message").and_then(|m| m.as_str()));
        if let Some(message) = found {
            return truncate(message.trim(), ERROR_BODY_CHARS);
        }
    }
    truncate(body.trim(), ERROR_BODY_CHARS)
}

/// The first `max` characters of `text`, with `…` when something was cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// An [`LlmError::Malformed`] for `provider`.
pub(crate) fn malformed(provider: &str, message: impl Into<String>) -> LlmError {
    LlmError::Malformed {
        provider: provider.to_string(),
        message: truncate(&message.into(), MALFORMED_CHARS),
    }
}

/// An [`LlmError::StreamCut`] for `provider`.
pub(crate) fn stream_cut(provider: &str, message: impl Into<String>) -> LlmError {
    LlmError::StreamCut {
        provider: provider.to_string(),
        message: message.into(),
    }
}

/// A reqwest error and its causes on one line, without the URL (reported separately, and it is the
/// only request-specific text reqwest puts in its errors).
fn describe(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut out = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// A one-shot HTTP server on 127.0.0.1 for the wire clients' tests: answers the first request with a
/// canned response and hands back the request it received.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod test_server {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::sync::oneshot;

    /// A request as the server saw it.
    pub(crate) struct Seen {
        /// Request line and headers, as text.
        pub(crate) head: String,
        /// The body.
        pub(crate) body: serde_json::Value,
    }

    /// Serve `response` (raw HTTP/1.1 bytes, written as-is, then the connection is closed) once.
    /// Returns the base URL and a receiver for the request.
    pub(crate) async fn serve(response: String) -> (String, oneshot::Receiver<Seen>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head_end, length) = loop {
                let n = socket.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
                if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..pos]).to_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map(|v| v.trim().parse::<usize>().unwrap())
                        .unwrap_or(0);
                    break (pos + 4, length);
                }
            };
            while buf.len() < head_end + length {
                let n = socket.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let body = serde_json::from_slice(&buf[head_end..]).unwrap_or_default();
            let _ = tx.send(Seen { head, body });
            socket.write_all(response.as_bytes()).await.unwrap();
            socket.shutdown().await.unwrap();
        });
        (format!("http://{addr}"), rx)
    }

    /// A complete response with `status`, extra header lines and a body (sent with a length).
    pub(crate) fn response(
        status: &str,
        headers: &[&str],
        content_type: &str,
        body: &str,
    ) -> String {
        let mut out = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
            body.len()
        );
        for header in headers {
            out.push_str(header);
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        out.push_str(body);
        out
    }

    /// An event-stream response without a length: the body ends when the connection closes.
    pub(crate) fn event_stream(body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_integer_and_fractional_seconds() {
        assert_eq!(parse_retry_after("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("0"), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_ignores_dates_and_nonsense() {
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("NaN"), None);
        assert_eq!(parse_retry_after("inf"), None);
        assert_eq!(parse_retry_after("1e300"), None);
        assert_eq!(parse_retry_after(""), None);
    }

    #[test]
    fn retry_after_reads_the_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
    }

    #[test]
    fn error_message_prefers_the_providers_message() {
        let anthropic =
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#;
        assert_eq!(error_message(anthropic), "Slow down");
        let openai = r#"{"error":{"message":"Bad key","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai), "Bad key");
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message(r#"{"object":"error","message":"vllm says no"}"#),
            "vllm says no"
        );
        assert_eq!(
            error_message("  upstream timed out \n"),
            "upstream timed out"
        );
        let long = "x".repeat(1000);
        assert_eq!(error_message(&long).chars().count(), ERROR_BODY_CHARS + 1);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn malformed_messages_are_short() {
        let err = malformed("p", "y".repeat(1000));
        match err {
            LlmError::Malformed { message, .. } => {
                assert!(message.chars().count() <= MALFORMED_CHARS + 1)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn connection_refused_is_a_connect_error() {
        // Bind then drop a listener so the port is (very likely) closed.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let url = format!("http://127.0.0.1:{port}/x");
        let client = crate::llm::endpoint::http_client();
        let err = send(client.post(&url), "p", "m", &url).await.unwrap_err();
        match err {
            LlmError::Connect {
                provider,
                url: u,
                message,
            } => {
                assert_eq!(provider, "p");
                assert_eq!(u, url);
                assert!(!message.contains("127.0.0.1"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn error_status_carries_message_and_retry_after() {
        let (base, _seen) = test_server::serve(test_server::response(
            "429 Too Many Requests",
            &["retry-after: 3"],
            "application/json",
            r#"{"error":{"message":"rate limited"}}"#,
        ))
        .await;
        let client = crate::llm::endpoint::http_client();
        let err = send(client.post(&base), "p", "m", &base).await.unwrap_err();
        assert_eq!(
            err,
            LlmError::Status {
                provider: "p".into(),
                status: 429,
                message: "rate limited".into(),
                retry_after: Some(Duration::from_secs(3)),
            }
        );
    }

    #[tokio::test]
    async fn empty_error_body_falls_back_to_the_reason() {
        let (base, _seen) = test_server::serve(test_server::response(
            "503 Service Unavailable",
            &[],
            "text/plain",
            "",
        ))
        .await;
        let client = crate::llm::endpoint::http_client();
        let err = send(client.post(&base), "p", "m", &base).await.unwrap_err();
        match err {
            LlmError::Status {
                status,
                message,
                retry_after,
                ..
            } => {
                assert_eq!(status, 503);
                assert_eq!(message, "Service Unavailable");
                assert_eq!(retry_after, None);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
