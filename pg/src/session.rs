//! What every OPC session with PostgreSQL carries, whoever opens it (the pool, the blocking
//! connections, the listener).
//!
//! Why: a node paused (SIGSTOP, a frozen VM) or cut off in the middle of a transaction keeps its
//! row locks for as long as its socket looks alive, and the server cannot tell a paused client
//! from a slow one. The node that takes its trees over would then wait on those locks forever.
//! `idle_in_transaction_session_timeout` has the server end such a session after
//! [`IDLE_IN_TRANSACTION`], so its locks go with it: a takeover waits at most that long, inside the
//! issue's failover bound of `leaseTtl + 5 s`. OPC never waits on anything but the database inside a
//! transaction, so a healthy node never comes near it.
//!
//! Invariant: a setting the URL's own `options` already makes wins (the operator's choice).

use std::time::Duration;

/// How long a session may sit idle inside an open transaction before the server ends it.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(5);

/// The startup `options` of a session: `existing` (from the URL), plus OPC's settings it does not
/// make itself.
pub fn session_options(existing: Option<&str>) -> String {
    let existing = existing.unwrap_or("").trim();
    if existing.contains("idle_in_transaction_session_timeout") {
        return existing.to_string();
    }
    let ours = format!(
        "-c idle_in_transaction_session_timeout={}ms",
        IDLE_IN_TRANSACTION.as_millis()
    );
    if existing.is_empty() {
        ours
    } else {
        format!("{existing} {ours}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_timeout_and_keeps_the_urls_options() {
        assert_eq!(
            session_options(None),
            "-c idle_in_transaction_session_timeout=5000ms"
        );
        assert_eq!(
            session_options(Some("-c search_path=opc")),
            "-c search_path=opc -c idle_in_transaction_session_timeout=5000ms"
        );
        assert_eq!(
            session_options(Some("-c idle_in_transaction_session_timeout=0")),
            "-c idle_in_transaction_session_timeout=0"
        );
    }
}
