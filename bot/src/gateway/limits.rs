//! Rate limits on chat messages, per user and per channel (`gateway.rateLimit`), checked before any
//! LLM work so that a flood costs nothing.
//!
//! Why governor's keyed GCRA limiters: constant memory per key, no background timer, and a burst of
//! `messages` followed by an even refill — what "10 messages a minute" means to a person.
//!
//! Why tokio's clock (not governor's default): time then follows tokio's paused clock in tests
//! (`start_paused`, as agents/src/clock.rs does), so refills and episodes are tested without sleeping.
//!
//! Invariants:
//! - the user's limit is checked first and the channel's only for messages the user's limit let through,
//!   so one person's flood does not use up the channel's allowance for everyone else;
//! - one notice per episode, per sender AND per channel: a refusal is announced only if neither its
//!   sender nor its channel has been told since their last accepted message. A flood from one user
//!   gets that user one notice; a flood from many users in one channel gets the channel one notice (not
//!   one per refused user: hundreds of notices in a burst would hit the platform's own limits);
//! - an episode ends when a message of that sender (or in that channel) is accepted again, or when it
//!   has been quiet for a whole period of its limit (the limiter is full again by then);
//! - memory is bounded: keys idle long enough to be full again are dropped by [`RateLimits::tidy`];
//! - in a cluster (PostgreSQL, [`RateLimits::with_shared`]) the counts are the cluster's: the same
//!   GCRA, kept in the database ([`SharedRates`]), so a sender or channel gets the configured rate
//!   over all nodes together, not per node. Episodes (who was told) stay per node: a flood spread
//!   over several nodes gets at most one notice from each. While the database cannot be reached,
//!   each node counts on its own (warned about once per outage), so a message is never refused for
//!   want of a database.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use opc_agents::store::cluster::{RateScope, SharedRates};
use opc_hierarchy::schema::{Rate, RateLimit};
use tokio::time::Instant;

/// What the limiter says about one message.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Allowed,
    /// Over the limit; tell the sender (first refusal of an episode in this channel and for this
    /// sender).
    Notify(String),
    /// Over the limit; the sender or the channel has been told already.
    Silent,
}

/// governor's clock, read from tokio's (which is the monotonic clock unless a test pauses it).
#[derive(Clone, Copy, Debug, Default)]
struct TokioClock;

impl Clock for TokioClock {
    type Instant = std::time::Instant;

    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }
}

type Limiter =
    RateLimiter<String, DashMapStateStore<String>, TokioClock, NoOpMiddleware<std::time::Instant>>;

/// Open episodes: who was told, and when they were last refused.
#[derive(Default)]
struct Episodes {
    users: HashMap<String, Instant>,
    channels: HashMap<String, Instant>,
}

/// The per-user and per-channel limiters.
pub struct RateLimits {
    users: Limiter,
    channels: Limiter,
    config: RateLimit,
    episodes: Mutex<Episodes>,
    /// The cluster's counts, when this node is one of several ([`RateLimits::with_shared`]).
    shared: Option<Arc<dyn SharedRates>>,
    /// Set while the cluster's counts fail, so the fallback is warned about once per outage.
    failing: AtomicBool,
}

fn quota(rate: Rate) -> Quota {
    let per_message = rate.per / rate.messages.get();
    Quota::with_period(per_message.max(Duration::from_nanos(1)))
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(rate.messages)
}

fn describe(rate: Rate) -> String {
    format!(
        "{} message{} per {}",
        rate.messages,
        if rate.messages.get() == 1 { "" } else { "s" },
        humantime::format_duration(rate.per)
    )
}

impl RateLimits {
    /// Limiters for the configured rates.
    pub fn new(config: &RateLimit) -> RateLimits {
        RateLimits {
            users: RateLimiter::dashmap_with_clock(quota(config.per_user), TokioClock),
            channels: RateLimiter::dashmap_with_clock(quota(config.per_channel), TokioClock),
            config: config.clone(),
            episodes: Mutex::new(Episodes::default()),
            shared: None,
            failing: AtomicBool::new(false),
        }
    }

    /// Check (and count) one message from `user` in `channel` in this process's limiters; keys are
    /// platform-qualified by the caller.
    pub fn check(&self, user: &str, channel: &str) -> Verdict {
        let refused = self.refused_here(user, channel);
        self.verdict(user, channel, refused)
    }

    fn user_notice(&self) -> String {
        format!(
            "You're sending messages faster than this workspace allows ({}). \
             I've skipped the extra ones — please wait a little and send again.",
            describe(self.config.per_user)
        )
    }

    fn channel_notice(&self) -> String {
        format!(
            "This channel is sending messages faster than this workspace allows ({}). \
             I've skipped yours — please wait a little and send it again.",
            describe(self.config.per_channel)
        )
    }

    /// The notice for a message over this process's limits (user first, see the module doc).
    fn refused_here(&self, user: &str, channel: &str) -> Option<String> {
        if self.users.check_key(&user.to_string()).is_err() {
            Some(self.user_notice())
        } else if self.channels.check_key(&channel.to_string()).is_err() {
            Some(self.channel_notice())
        } else {
            None
        }
    }

    /// The verdict on a message refused with `refused` (or let through), keeping the episodes.
    fn verdict(&self, user: &str, channel: &str, refused: Option<String>) -> Verdict {
        let mut episodes = self.episodes.lock().unwrap_or_else(|p| p.into_inner());
        let Some(notice) = refused else {
            episodes.users.remove(user);
            episodes.channels.remove(channel);
            return Verdict::Allowed;
        };
        let now = Instant::now();
        let user_told = episodes.users.contains_key(user);
        let channel_told = episodes.channels.contains_key(channel);
        if user_told || channel_told {
            // Keep the episodes that exist alive; a sender silenced only because their channel was
            // already told is not marked as told, so their own next refusal is announced to them.
            if let Some(at) = episodes.users.get_mut(user) {
                *at = now;
            }
            if let Some(at) = episodes.channels.get_mut(channel) {
                *at = now;
            }
            Verdict::Silent
        } else {
            episodes.users.insert(user.to_string(), now);
            episodes.channels.insert(channel.to_string(), now);
            Verdict::Notify(notice)
        }
    }

    /// Forget keys whose limiters are full again, and episodes quiet for a whole period (bounded
    /// memory under many distinct senders).
    pub fn tidy(&self) {
        self.users.retain_recent();
        self.channels.retain_recent();
        self.users.shrink_to_fit();
        self.channels.shrink_to_fit();
        let now = Instant::now();
        let mut episodes = self.episodes.lock().unwrap_or_else(|p| p.into_inner());
        let (user_period, channel_period) = (self.config.per_user.per, self.config.per_channel.per);
        episodes
            .users
            .retain(|_, refused| now.duration_since(*refused) < user_period);
        episodes
            .channels
            .retain(|_, refused| now.duration_since(*refused) < channel_period);
        episodes.users.shrink_to_fit();
        episodes.channels.shrink_to_fit();
    }
}

impl RateLimits {
    /// Count in the cluster's database through `shared` (when given) rather than in this process:
    /// [`RateLimits::admit`] then holds the limits over every node.
    pub fn with_shared(mut self, shared: Option<Arc<dyn SharedRates>>) -> RateLimits {
        self.shared = shared;
        self
    }

    /// Check (and count) one message from `user` in `channel`: over the cluster when this node is
    /// one ([`RateLimits::with_shared`]), else as [`RateLimits::check`].
    pub async fn admit(&self, user: &str, channel: &str) -> Verdict {
        let Some(shared) = &self.shared else {
            return self.check(user, channel);
        };
        let refused = match self.refused_shared(shared.as_ref(), user, channel).await {
            Ok(refused) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("cluster-wide message rate limits apply again");
                }
                refused
            }
            Err(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%error, "cannot reach the cluster-wide message rate limits; this node applies them on its own until they answer again");
                }
                self.refused_here(user, channel)
            }
        };
        self.verdict(user, channel, refused)
    }

    /// The notice for a message over the cluster's limits (user first, as here).
    async fn refused_shared(
        &self,
        shared: &dyn SharedRates,
        user: &str,
        channel: &str,
    ) -> Result<Option<String>, opc_agents::store::StoreError> {
        if !shared
            .take(RateScope::User, user, self.config.per_user)
            .await?
        {
            Ok(Some(self.user_notice()))
        } else if !shared
            .take(RateScope::Channel, channel, self.config.per_channel)
            .await?
        {
            Ok(Some(self.channel_notice()))
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn limits(user: u32, channel: u32) -> RateLimits {
        let rate = |n| Rate {
            messages: NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN),
            per: MINUTE,
        };
        RateLimits::new(&RateLimit {
            per_user: rate(user),
            per_channel: rate(channel),
        })
    }

    fn notices(verdicts: &[Verdict]) -> usize {
        verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Notify(_)))
            .count()
    }

    fn allowed(verdicts: &[Verdict]) -> usize {
        verdicts.iter().filter(|v| **v == Verdict::Allowed).count()
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_is_cut_at_the_burst_with_one_notice_and_others_still_pass() {
        let limits = limits(3, 10);
        let verdicts: Vec<Verdict> = (0..100)
            .map(|_| limits.check("slack:U1", "slack:C1"))
            .collect();
        assert_eq!(allowed(&verdicts), 3);
        assert_eq!(notices(&verdicts), 1);
        assert!(
            matches!(&verdicts[3], Verdict::Notify(text) if text.contains("3 messages per 1m")),
            "{:?}",
            verdicts[3]
        );
        // The flood did not use up the channel: another user is still let through.
        assert_eq!(limits.check("slack:U2", "slack:C1"), Verdict::Allowed);
    }

    #[tokio::test(start_paused = true)]
    async fn the_channel_limit_applies_to_everyone_together() {
        let limits = limits(5, 2);
        assert_eq!(limits.check("u1", "c"), Verdict::Allowed);
        assert_eq!(limits.check("u2", "c"), Verdict::Allowed);
        assert!(
            matches!(limits.check("u3", "c"), Verdict::Notify(text) if text.contains("channel"))
        );
        assert_eq!(limits.check("u3", "other"), Verdict::Allowed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_from_many_users_in_one_channel_gets_one_notice_per_episode() {
        let limits = limits(5, 3);
        let flood = |from: usize| -> Vec<Verdict> {
            (from..from + 440)
                .map(|i| limits.check(&format!("slack:U{i}"), "slack:C1"))
                .collect()
        };
        let first = flood(0);
        assert_eq!(allowed(&first), 3);
        assert_eq!(notices(&first), 1, "one notice for the whole channel");
        assert!(matches!(&first[3], Verdict::Notify(text) if text.contains("channel")));
        // Another channel is its own episode.
        assert_eq!(limits.check("slack:U0", "slack:C2"), Verdict::Allowed);

        // Still within the period: the flood goes on, and stays silent.
        tokio::time::advance(Duration::from_secs(5)).await;
        let more = flood(1000);
        assert_eq!((allowed(&more), notices(&more)), (0, 0));

        // One message's worth refills (60 s / 3): one is accepted, which ends the episode; the next
        // refusal starts a new one and is announced, once.
        tokio::time::advance(Duration::from_secs(20)).await;
        let next = flood(2000);
        assert_eq!(next[0], Verdict::Allowed);
        assert_eq!(allowed(&next), 1);
        assert_eq!(notices(&next), 1);
        assert!(matches!(next[1], Verdict::Notify(_)), "{:?}", next[1]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sender_told_in_one_channel_is_not_told_again_while_the_channel_is_quiet() {
        let limits = limits(1, 10);
        assert_eq!(limits.check("u1", "c1"), Verdict::Allowed);
        assert!(matches!(limits.check("u1", "c1"), Verdict::Notify(_)));
        // Elsewhere, the same sender's episode is still open: silent.
        assert_eq!(limits.check("u1", "c2"), Verdict::Silent);
        // Another sender over their own limit in c1 during c1's episode: silent too.
        assert_eq!(limits.check("u2", "c3"), Verdict::Allowed);
        assert_eq!(limits.check("u2", "c1"), Verdict::Silent);
        // An accepted message in c1 ends c1's episode, not u1's.
        assert_eq!(limits.check("u3", "c1"), Verdict::Allowed);
        assert_eq!(limits.check("u1", "c1"), Verdict::Silent);
        // u1's own limit refills: accepted, so their episode ends; the next refusal is announced.
        tokio::time::advance(MINUTE).await;
        assert_eq!(limits.check("u1", "c1"), Verdict::Allowed);
        assert!(matches!(limits.check("u1", "c1"), Verdict::Notify(_)));
    }

    /// The cluster's counts in memory: a burst of `rate.messages` per key and no refill, or an
    /// unreachable database.
    #[derive(Default)]
    struct Counts {
        taken: Mutex<HashMap<String, u32>>,
        down: AtomicBool,
    }

    impl Counts {
        fn count(
            &self,
            scope: RateScope,
            key: &str,
            rate: Rate,
        ) -> Result<bool, opc_agents::store::StoreError> {
            if self.down.load(Ordering::Relaxed) {
                return Err(opc_agents::store::StoreError::Database {
                    doing: "counting a message",
                    source: opc_agents::store::DbFailure {
                        fault: opc_agents::store::DbFault::Unavailable,
                        message: "connection refused".into(),
                    },
                });
            }
            let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
            let count = taken
                .entry(format!("{}:{key}", scope.prefix()))
                .or_default();
            if *count >= rate.messages.get() {
                return Ok(false);
            }
            *count += 1;
            Ok(true)
        }
    }

    // The trait's `#[async_trait]` signature written out (this crate does not use the macro).
    impl SharedRates for Counts {
        fn take<'life0, 'life1, 'async_trait>(
            &'life0 self,
            scope: RateScope,
            key: &'life1 str,
            rate: Rate,
        ) -> std::pin::Pin<
            Box<
                dyn std::future::Future<Output = Result<bool, opc_agents::store::StoreError>>
                    + Send
                    + 'async_trait,
            >,
        >
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(std::future::ready(self.count(scope, key, rate)))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn two_nodes_sharing_the_counts_hold_one_limit_together() {
        let counts = Arc::new(Counts::default());
        let shared = || Some(counts.clone() as Arc<dyn SharedRates>);
        let (a, b) = (
            limits(3, 10).with_shared(shared()),
            limits(3, 10).with_shared(shared()),
        );
        let mut verdicts = Vec::new();
        for i in 0..10 {
            let node = if i % 2 == 0 { &a } else { &b };
            verdicts.push(node.admit("slack:U1", "slack:C1").await);
        }
        assert_eq!(allowed(&verdicts), 3, "{verdicts:?}");
        // Episodes are per node: each node tells the sender once.
        assert_eq!(notices(&verdicts), 2, "{verdicts:?}");
        // The channel's count is shared too: 3 of U1's and 7 more reach its 10.
        for i in 0..7 {
            let user = format!("slack:U{}", i + 2);
            assert_eq!(a.admit(&user, "slack:C1").await, Verdict::Allowed);
        }
        assert!(
            matches!(a.admit("slack:U9", "slack:C1").await, Verdict::Notify(text) if text.contains("channel"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_the_cluster_counts_a_node_limits_on_its_own() {
        let counts = Arc::new(Counts::default());
        counts.down.store(true, Ordering::Relaxed);
        let a = limits(2, 10).with_shared(Some(counts.clone() as Arc<dyn SharedRates>));
        let verdicts = [
            a.admit("u", "c").await,
            a.admit("u", "c").await,
            a.admit("u", "c").await,
        ];
        assert_eq!(allowed(&verdicts), 2, "{verdicts:?}");
        assert!(matches!(verdicts[2], Verdict::Notify(_)));
        // Back: the cluster's counts apply again (they start from nothing here).
        counts.down.store(false, Ordering::Relaxed);
        assert_eq!(a.admit("u", "c").await, Verdict::Allowed);
    }

    #[tokio::test(start_paused = true)]
    async fn tidy_forgets_episodes_quiet_for_a_whole_period() {
        let limits = limits(1, 1000);
        for i in 0..50 {
            let user = format!("u{i}");
            assert_eq!(limits.check(&user, &format!("c{i}")), Verdict::Allowed);
            assert!(matches!(
                limits.check(&user, &format!("c{i}")),
                Verdict::Notify(_)
            ));
        }
        let open = |limits: &RateLimits| {
            let episodes = limits.episodes.lock().unwrap_or_else(|p| p.into_inner());
            (episodes.users.len(), episodes.channels.len())
        };
        limits.tidy();
        assert_eq!(open(&limits), (50, 50), "episodes within the period stay");
        tokio::time::advance(MINUTE).await;
        limits.tidy();
        assert_eq!(open(&limits), (0, 0), "quiet episodes are forgotten");
    }
}
