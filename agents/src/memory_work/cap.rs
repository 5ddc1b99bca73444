//! The daily cap of memory work per agent (`consolidation.maxTokensPerDay`).
//!
//! What counts: every memory-work call of the agent recorded since the current UTC day began
//! (`llm_calls.work = 'memory'`, tokens in + out) — extraction and consolidation alike, since they
//! spend the same budget. The ledger is the only counter, so the cap holds across restarts.
//!
//! Invariant: a job is checked before each model call; over the cap, it is put off (not failed)
//! until the next UTC midnight, with one [`Event::MemoryWorkCapped`] per job put off.

use crate::events::Event;
use crate::state::EngineState;
use crate::store::StoreError;

/// One day in milliseconds.
const DAY_MS: i64 = 86_400_000;

/// The start of the UTC day holding `now_ms`.
pub(super) fn day_start(now_ms: i64) -> i64 {
    now_ms.div_euclid(DAY_MS) * DAY_MS
}

/// The start of the next UTC day after `now_ms`.
pub(super) fn next_day(now_ms: i64) -> i64 {
    day_start(now_ms) + DAY_MS
}

/// `Some(until)` when `agent` has used its memory-work tokens for today: the event is published and
/// the caller puts its work off until `until`. `None`: it may go on.
pub(super) async fn over(
    rt: &EngineState,
    agent: &str,
    now_ms: i64,
) -> Result<Option<i64>, StoreError> {
    let cap = u64::from(
        rt.config()
            .framework
            .memory
            .consolidation
            .max_tokens_per_day
            .get(),
    );
    let used = rt
        .store()
        .memory_tokens_since(agent, day_start(now_ms))
        .await?;
    if used < cap {
        return Ok(None);
    }
    tracing::info!(
        agent,
        used,
        cap,
        "memory work is over its daily cap; it waits for the next UTC day"
    );
    rt.events().publish(Event::MemoryWorkCapped {
        agent: agent.to_string(),
        used,
        cap,
    });
    Ok(Some(next_day(now_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc() {
        let noon = 20_000 * DAY_MS + DAY_MS / 2;
        assert_eq!(day_start(noon), 20_000 * DAY_MS);
        assert_eq!(next_day(noon), 20_001 * DAY_MS);
        assert_eq!(next_day(20_000 * DAY_MS), 20_001 * DAY_MS);
    }
}
