//! Rate limits on chat messages, per user and per channel (`gateway.rateLimit`), checked before any
//! LLM work so that a flood costs nothing.
//!
//! Why governor's keyed GCRA limiters: constant memory per key, no background timer, and a burst of
//! `messages` followed by an even refill — what "10 messages a minute" means to a person.
//!
//! Invariants:
//! - the user's limit is checked first and the channel's only for messages the user's limit let through,
//!   so one person's flood does not use up the channel's allowance for everyone else;
//! - a limited sender gets one notice per episode: the next refusals stay silent until one of their
//!   messages is accepted again (no notice storm in reply to a message storm);
//! - memory is bounded: keys idle long enough to be full again are dropped by [`RateLimits::tidy`].

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use opc_hierarchy::schema::{Rate, RateLimit};

/// What the limiter says about one message.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Allowed,
    /// Over the limit; tell the sender (first refusal of an episode).
    Notify(String),
    /// Over the limit; the sender has been told already.
    Silent,
}

/// The per-user and per-channel limiters.
pub struct RateLimits {
    users: DefaultKeyedRateLimiter<String>,
    channels: DefaultKeyedRateLimiter<String>,
    config: RateLimit,
    told: Mutex<HashSet<String>>,
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
            users: RateLimiter::keyed(quota(config.per_user)),
            channels: RateLimiter::keyed(quota(config.per_channel)),
            config: config.clone(),
            told: Mutex::new(HashSet::new()),
        }
    }

    /// Check (and count) one message from `user` in `channel`; keys are platform-qualified by the caller.
    pub fn check(&self, user: &str, channel: &str) -> Verdict {
        let refused = if self.users.check_key(&user.to_string()).is_err() {
            Some(format!(
                "You're sending messages faster than this workspace allows ({}). \
                 I've skipped the extra ones — please wait a little and send again.",
                describe(self.config.per_user)
            ))
        } else if self.channels.check_key(&channel.to_string()).is_err() {
            Some(format!(
                "This channel is sending messages faster than this workspace allows ({}). \
                 I've skipped yours — please wait a little and send it again.",
                describe(self.config.per_channel)
            ))
        } else {
            None
        };
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        match refused {
            None => {
                told.remove(user);
                Verdict::Allowed
            }
            Some(notice) if told.insert(user.to_string()) => Verdict::Notify(notice),
            Some(_) => Verdict::Silent,
        }
    }

    /// Forget keys whose limiters are full again (bounded memory under many distinct senders).
    pub fn tidy(&self) {
        self.users.retain_recent();
        self.channels.retain_recent();
        self.users.shrink_to_fit();
        self.channels.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(user: u32, channel: u32) -> RateLimits {
        let rate = |n| Rate {
            messages: NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN),
            per: Duration::from_secs(60),
        };
        RateLimits::new(&RateLimit {
            per_user: rate(user),
            per_channel: rate(channel),
        })
    }

    #[test]
    fn a_flood_is_cut_at_the_burst_with_one_notice_and_others_still_pass() {
        let limits = limits(3, 10);
        let verdicts: Vec<Verdict> = (0..100)
            .map(|_| limits.check("slack:U1", "slack:C1"))
            .collect();
        assert_eq!(
            verdicts.iter().filter(|v| **v == Verdict::Allowed).count(),
            3
        );
        assert_eq!(
            verdicts
                .iter()
                .filter(|v| matches!(v, Verdict::Notify(_)))
                .count(),
            1
        );
        assert!(
            matches!(&verdicts[3], Verdict::Notify(text) if text.contains("3 messages per 1m"))
        );
        // The flood did not use up the channel: another user is still let through.
        assert_eq!(limits.check("slack:U2", "slack:C1"), Verdict::Allowed);
    }

    #[test]
    fn the_channel_limit_applies_to_everyone_together() {
        let limits = limits(5, 2);
        assert_eq!(limits.check("u1", "c"), Verdict::Allowed);
        assert_eq!(limits.check("u2", "c"), Verdict::Allowed);
        assert!(
            matches!(limits.check("u3", "c"), Verdict::Notify(text) if text.contains("channel"))
        );
        assert_eq!(limits.check("u3", "other"), Verdict::Allowed);
    }
}
