//! Limits every node of a cluster counts together (issue 36 §2): a provider's
//! `maxConcurrentRequests` and `requestsPerMinute` ([`SharedLimits`], tables `provider_slots` and
//! `provider_rates`), and the gateway's per-user and per-channel rates ([`SharedRates`], rows
//! `user:…` / `channel:…` of `provider_rates`).
//!
//! How they hold:
//! - a provider admission is one transaction per try, under a transaction-scoped advisory lock
//!   whose key is a hash of the provider's name (one lock per provider, not one per row): two nodes
//!   admitting calls to one provider take turns, so the count they read and the slot they insert
//!   cannot interleave. A try that is refused commits at once (the lock is never held across a
//!   wait) and the caller sleeps before the next;
//! - every time is the database's clock ([`DB_NOW`]), as for leases: nodes whose clocks disagree
//!   still agree on the rate and on when a slot expired;
//! - concurrency: a call holds a row of `provider_slots` (its node's instance, an expiry one lease
//!   ahead) until its [`SharedSlot`] drops, which deletes the row in the background (a drop never
//!   blocks). The node's heartbeat renews its instance's slots ([`renew`]), so a call longer than
//!   a lease keeps its slot, and a dead node's slots free themselves within a lease;
//! - rates are GCRA (the generic cell rate algorithm, governor's): one row per key holding its
//!   theoretical arrival time (TAT). For `n` starts per period `P`, the emission interval is
//!   `T = P / n` (rounded up to whole ms: never more than the limit) and the burst `n`, i.e. a
//!   tolerance `τ = (n − 1)·T`. A start conforms when `max(tat, now) − now ≤ τ`, and then sets
//!   `tat = max(tat, now) + T`. A refused provider start sleeps exactly until it conforms;
//! - a gateway key is one statement (an upsert that only updates a conforming row, under the row's
//!   lock): its caller refuses the message rather than waiting. Rows of gateway keys whose TAT is a
//!   lease in the past (they would conform as if absent) are deleted by the heartbeat ([`renew`]),
//!   so the table holds about one row per recent sender and channel.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use opc_hierarchy::schema::Rate;

use super::super::super::StoreError;
use super::super::super::cluster::{RateScope, SharedRates};
use super::super::PgStore;
use super::super::sql::{Tx, exec, get, one, opt, pg};
use super::DB_NOW;
use crate::llm::layers::{SharedLimits, SharedSlot};

/// The first wait after a try found a provider's slots full; doubled per full try up to
/// [`FULL_WAIT_MAX`].
const FULL_WAIT_FIRST: Duration = Duration::from_millis(20);

/// The longest wait between tries while a provider's slots are full.
const FULL_WAIT_MAX: Duration = Duration::from_millis(500);

/// The provider limits of one node, counted in the shared tables.
struct PgLimits {
    /// The shared (unfenced) store.
    store: PgStore,
    /// This process's instance: its slots are renewed by its heartbeat.
    instance: i64,
    /// How long a slot lasts without renewal (the lease's length), in ms.
    ttl_ms: i64,
}

/// What one try at admitting a call found.
enum Try {
    /// Admitted: the slot row's id, when there is a concurrency limit.
    Admitted(Option<i64>),
    /// Every slot is taken: back off and try again.
    Full,
    /// The rate allows the next start this much later.
    Early(Duration),
}

/// GCRA's emission interval `T` and tolerance `τ`, in ms, for `n` starts per `per_ms`.
fn gcra(n: u32, per_ms: i64) -> (i64, i64) {
    let n = i64::from(n.max(1));
    // Rounded up: the limit is never exceeded, at worst undercut by under a ms per start.
    let interval = ((per_ms.max(1) + n - 1) / n).max(1);
    (interval, (n - 1).saturating_mul(interval))
}

/// A duration in ms (saturating).
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl PgLimits {
    /// One try, in one transaction under the provider's advisory lock (see the module doc).
    async fn try_admit(
        &self,
        provider: &str,
        max_concurrent: Option<u32>,
        per_minute: Option<u32>,
    ) -> Result<Try, StoreError> {
        const DOING: &str = "admitting a call under the cluster's provider limits";
        let mut c = self.store.client().await?;
        let tx = Tx::new(c.transaction().await.map_err(pg(DOING))?);
        // One key per provider, hashed by the database so every node computes the same one. The
        // prefix keeps it apart from the keys of other users of advisory locks.
        let lock = format!("opc.provider_limits:{provider}");
        exec(
            tx.c(),
            DOING,
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&lock],
        )
        .await?;
        let now: i64 = get(
            &one(tx.c(), DOING, &format!("SELECT {DB_NOW}"), &[]).await?,
            0,
            DOING,
        )?;
        if let Some(max) = max_concurrent {
            exec(
                tx.c(),
                DOING,
                "DELETE FROM provider_slots WHERE provider = $1 AND expires_ms < $2",
                &[&provider, &now],
            )
            .await?;
            let taken: i64 = get(
                &one(
                    tx.c(),
                    DOING,
                    "SELECT count(*) FROM provider_slots WHERE provider = $1",
                    &[&provider],
                )
                .await?,
                0,
                DOING,
            )?;
            if taken >= i64::from(max.max(1)) {
                tx.commit().await?;
                return Ok(Try::Full);
            }
        }
        if let Some(per_minute) = per_minute {
            let key = format!("provider:{provider}");
            let (interval, tolerance) = gcra(per_minute, 60_000);
            let tat = match opt(
                tx.c(),
                DOING,
                "SELECT tat_ms FROM provider_rates WHERE key = $1",
                &[&key],
            )
            .await?
            {
                Some(row) => get::<i64>(&row, 0, DOING)?,
                None => now,
            };
            let base = tat.max(now);
            let early = base - now - tolerance;
            if early > 0 {
                tx.commit().await?;
                return Ok(Try::Early(Duration::from_millis(
                    u64::try_from(early).unwrap_or(u64::MAX),
                )));
            }
            exec(
                tx.c(),
                DOING,
                "INSERT INTO provider_rates (key, tat_ms) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET tat_ms = EXCLUDED.tat_ms",
                &[&key, &(base + interval)],
            )
            .await?;
        }
        let slot = match max_concurrent {
            Some(_) => Some(get::<i64>(
                &one(
                    tx.c(),
                    DOING,
                    "INSERT INTO provider_slots (provider, instance, expires_ms) \
                     VALUES ($1, $2, $3) RETURNING id",
                    &[&provider, &self.instance, &now.saturating_add(self.ttl_ms)],
                )
                .await?,
                0,
                DOING,
            )?),
            None => None,
        };
        tx.commit().await?;
        Ok(Try::Admitted(slot))
    }

    /// The slot of row `id`: dropping it deletes the row in the background. Without a runtime to
    /// run the delete on, the row expires with the lease instead.
    fn slot(&self, id: i64) -> SharedSlot {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return SharedSlot::none();
        };
        let store = self.store.clone();
        SharedSlot::new(move || {
            runtime.spawn(async move {
                if let Err(error) = release(&store, id).await {
                    // Not lost: the row expires within a lease, its heartbeat no longer renewing it
                    // once the call's node is gone; until then it counts against the limit.
                    tracing::debug!(%error, "could not free a provider slot; it expires with its lease");
                }
            });
        })
    }
}

/// Delete slot row `id`.
async fn release(store: &PgStore, id: i64) -> Result<(), StoreError> {
    let c = store.client().await?;
    exec(
        &c,
        "freeing a provider slot",
        "DELETE FROM provider_slots WHERE id = $1",
        &[&id],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl SharedLimits for PgLimits {
    async fn admit(
        &self,
        provider: &str,
        max_concurrent: Option<u32>,
        per_minute: Option<u32>,
    ) -> Result<SharedSlot, String> {
        let mut full_wait = FULL_WAIT_FIRST;
        loop {
            match self
                .try_admit(provider, max_concurrent, per_minute)
                .await
                .map_err(|e| e.to_string())?
            {
                Try::Admitted(Some(id)) => return Ok(self.slot(id)),
                Try::Admitted(None) => return Ok(SharedSlot::none()),
                Try::Full => {
                    tokio::time::sleep(full_wait).await;
                    full_wait = (full_wait * 2).min(FULL_WAIT_MAX);
                }
                Try::Early(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}

/// The gateway's rates of one node, counted in the shared table.
struct PgRates {
    /// The shared (unfenced) store.
    store: PgStore,
}

#[async_trait]
impl SharedRates for PgRates {
    async fn take(&self, scope: RateScope, key: &str, rate: Rate) -> Result<bool, StoreError> {
        const DOING: &str = "counting a message against the cluster's rate limits";
        let key = format!("{}:{key}", scope.prefix());
        let (interval, tolerance) = gcra(rate.messages.get(), ms(rate.per));
        let c = self.store.client().await?;
        // The inserted TAT is `now + T`, so `EXCLUDED.tat_ms - T` is the statement's one `now`. The
        // update (under the row's lock, re-checked against the latest row) happens only when the
        // message conforms; a row comes back exactly then.
        let counted = opt(
            &c,
            DOING,
            &format!(
                "WITH now AS MATERIALIZED (SELECT {DB_NOW} AS ms) \
                 INSERT INTO provider_rates AS r (key, tat_ms) SELECT $1, ms + $2 FROM now \
                 ON CONFLICT (key) DO UPDATE \
                 SET tat_ms = GREATEST(r.tat_ms, EXCLUDED.tat_ms - $2) + $2 \
                 WHERE GREATEST(r.tat_ms, EXCLUDED.tat_ms - $2) - (EXCLUDED.tat_ms - $2) <= $3 \
                 RETURNING 1"
            ),
            &[&key, &interval, &tolerance],
        )
        .await?;
        Ok(counted.is_some())
    }
}

/// In the heartbeat's transaction: renew this instance's provider slots for another lease, and
/// delete gateway rate rows a lease in the past (they conform as if absent).
pub(super) async fn renew(t: &Tx<'_>, instance: i64, ttl_ms: i64) -> Result<(), StoreError> {
    exec(
        t.c(),
        "renewing provider slots",
        &format!("UPDATE provider_slots SET expires_ms = {DB_NOW} + $2 WHERE instance = $1"),
        &[&instance, &ttl_ms],
    )
    .await?;
    exec(
        t.c(),
        "deleting old rate limit counts",
        &format!(
            "DELETE FROM provider_rates \
             WHERE (key LIKE 'user:%' OR key LIKE 'channel:%') AND tat_ms < {DB_NOW} - $1"
        ),
        &[&ttl_ms],
    )
    .await?;
    Ok(())
}

/// The shared limits of `store` for process instance `instance`, with slots lasting `ttl_ms`.
pub(super) fn limits(store: &PgStore, instance: i64, ttl_ms: i64) -> Arc<dyn SharedLimits> {
    Arc::new(PgLimits {
        store: store.clone(),
        instance,
        ttl_ms,
    })
}

/// The shared gateway rates of `store`.
pub(super) fn rates(store: &PgStore) -> Arc<dyn SharedRates> {
    Arc::new(PgRates {
        store: store.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::gcra;

    #[test]
    fn gcra_spaces_starts_evenly_with_a_burst_of_the_limit() {
        assert_eq!(gcra(60, 60_000), (1_000, 59_000));
        assert_eq!(gcra(1, 60_000), (60_000, 0));
        // Rounded up: 7 a minute never becomes 8.
        assert_eq!(gcra(7, 60_000), (8_572, 51_432));
        // Degenerate input still yields a positive interval.
        assert_eq!(gcra(0, 0), (1, 0));
    }
}
