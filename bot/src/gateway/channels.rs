//! What each chat platform has been doing, for the admin console's Channels page: events received,
//! the last one's time, and recent errors posting to it.
//!
//! Why in the gateway: it is where every inbound event passes and every post to a platform is
//! answered, so counting here covers all adapters without each one keeping books. Nothing of a
//! message's text is kept: an error is what failed and the platform's error, never content.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use opc_adapters::Platform;
use serde::Serialize;

/// Errors kept per platform.
const RECENT_ERRORS: usize = 10;

/// One platform's activity.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChannelStats {
    /// Inbound events (messages, mentions, clicks, commands) since start.
    pub events: u64,
    /// When the last one arrived (Unix ms).
    pub last_event_at: Option<i64>,
    /// Failed posts since start.
    pub errors: u64,
    /// The latest failures, newest last.
    pub recent_errors: VecDeque<ChannelError>,
}

/// A failed post to a platform.
#[derive(Clone, Debug, Serialize)]
pub struct ChannelError {
    /// When (Unix ms).
    pub at: i64,
    /// What was being done ("posting an answer").
    pub doing: &'static str,
    /// The platform's error.
    pub error: String,
}

/// Activity by platform.
#[derive(Default)]
pub struct Channels(Mutex<HashMap<Platform, ChannelStats>>);

impl Channels {
    fn with(&self, platform: Platform, f: impl FnOnce(&mut ChannelStats)) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(map.entry(platform).or_default());
    }

    /// An inbound event from `platform`.
    pub fn event(&self, platform: Platform) {
        self.with(platform, |s| {
            s.events += 1;
            s.last_event_at = Some(opc_agents::store::now_ms());
        });
    }

    /// A post to `platform` failed while `doing`.
    pub fn error(&self, platform: Platform, doing: &'static str, error: &dyn std::fmt::Display) {
        self.with(platform, |s| {
            s.errors += 1;
            if s.recent_errors.len() == RECENT_ERRORS {
                s.recent_errors.pop_front();
            }
            s.recent_errors.push_back(ChannelError {
                at: opc_agents::store::now_ms(),
                doing,
                error: error.to_string(),
            });
        });
    }

    /// A copy of every platform's activity.
    pub fn snapshot(&self) -> HashMap<Platform, ChannelStats> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
