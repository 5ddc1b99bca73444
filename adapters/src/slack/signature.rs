//! Slack request signatures: the v0 HMAC-SHA256 check every HTTP request from Slack passes before its
//! body is read.
//!
//! Invariants: the comparison is constant-time; the signature is checked before the timestamp, so a
//! forged request learns nothing about the clock; a timestamp more than 5 minutes from now is stale;
//! a signature already seen is a replay (Slack's own retries are signed anew); the secret is never
//! logged.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tracing::{debug, warn};

use super::Receiver;

/// How far a request's timestamp may be from now (Slack: 5 minutes).
const MAX_SIGNATURE_AGE_SECS: i64 = 5 * 60;

/// Why a request's Slack signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `X-Slack-Signature` or `X-Slack-Request-Timestamp` header.
    #[error("signature headers missing")]
    Missing,
    /// The timestamp is not a number or more than 5 minutes from now (a replay).
    #[error("timestamp stale or malformed")]
    Stale,
    /// The signature does not match the body.
    #[error("signature mismatch")]
    Mismatch,
    /// This exact signed request was already received (a replay; Slack's own retries are signed
    /// anew and carry `X-Slack-Retry-Num`).
    #[error("request replayed")]
    Replayed,
}

/// Check a Slack request signature: `signature` must be `"v0=" + hex(HMAC-SHA256(signing_secret,
/// "v0:{timestamp}:{body}"))`, compared in constant time, and `timestamp` within 5 minutes of
/// `now_unix`. The signature is checked first, so a forged request is told `Mismatch` whatever its
/// timestamp.
pub fn verify_signature(
    signing_secret: &str,
    timestamp: &str,
    body: &[u8],
    signature: &str,
    now_unix: i64,
) -> Result<(), SignatureError> {
    let hex_sig = signature
        .strip_prefix("v0=")
        .ok_or(SignatureError::Mismatch)?;
    let expected = hex::decode(hex_sig).map_err(|_| SignatureError::Mismatch)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes())
        .map_err(|_| SignatureError::Mismatch)?;
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)?;
    let ts: i64 = timestamp.parse().map_err(|_| SignatureError::Stale)?;
    if (now_unix - ts).abs() > MAX_SIGNATURE_AGE_SECS {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

/// Now, in Unix seconds.
pub(super) fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Receiver {
    /// Check an HTTP request's signature before anything in it is read.
    pub(super) fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), SignatureError> {
        let secret = self
            .signing_secret
            .as_deref()
            .ok_or(SignatureError::Missing)?;
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(timestamp), Some(signature)) = (
            header("x-slack-request-timestamp"),
            header("x-slack-signature"),
        ) else {
            return Err(SignatureError::Missing);
        };
        verify_signature(secret, timestamp, body, signature, now_unix())?;
        if self.signatures.first(signature) {
            Ok(())
        } else {
            Err(SignatureError::Replayed)
        }
    }

    /// Verify, or the 401 response.
    pub(super) fn check(
        &self,
        route: &'static str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Option<Response> {
        match self.verify(headers, body) {
            Ok(()) => {
                if let Some(retry) = headers
                    .get("x-slack-retry-num")
                    .and_then(|v| v.to_str().ok())
                {
                    debug!(route, retry, "slack request redelivered");
                }
                None
            }
            Err(why) => {
                warn!(route, reason = %why, "slack request refused");
                Some((StatusCode::UNAUTHORIZED, "invalid signature").into_response())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    // The official request-signing vector from slackapi/python-slack-sdk (MIT), as in
    // shared/data/slack/signature_test_vector.json.
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TIMESTAMP: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    #[test]
    fn the_official_vector_verifies() {
        let now = 1531420618 + 10;
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, BODY.as_bytes(), SIGNATURE, now),
            Ok(())
        );
    }

    #[test]
    fn tampering_and_staleness_are_refused() {
        let now = 1531420618;
        let tampered = format!("{BODY}------");
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, tampered.as_bytes(), SIGNATURE, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature("wrong", TIMESTAMP, BODY.as_bytes(), SIGNATURE, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, BODY.as_bytes(), "v0=zz", now),
            Err(SignatureError::Mismatch)
        );
        // 600 s old: stale even though the signature matches.
        assert_eq!(
            verify_signature(SECRET, TIMESTAMP, BODY.as_bytes(), SIGNATURE, now + 600),
            Err(SignatureError::Stale)
        );
    }
}
