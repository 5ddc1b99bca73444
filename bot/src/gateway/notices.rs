//! Delivering the engine's notices (e.g. "task 12 was interrupted because OPC stopped") to the chat
//! thread of their conversation: the Slack thread, Discord thread or web chat the conversation lives
//! in. The engine writes them (at recovery, in the same transaction that fails the interrupted
//! tasks); the gateway posts them at start-up and marks each one delivered.
//!
//! Invariants:
//! - a notice is marked delivered only after its post succeeded, so a restart never repeats a posted
//!   notice except one posted in the instant before a crash (at least once, never zero times);
//! - a post that fails for a passing reason (unreachable, rate-limited, a server error: the adapter's
//!   typed [`AdapterError::is_retryable`], never its text) is tried again ([`ATTEMPTS`] times, backing
//!   off, or after the platform's `Retry-After`); a notice still not posted stays
//!   undelivered and is tried again at the next start; a notice whose conversation has no chat thread
//!   (one started from `opc chat`) is left for the terminal;
//! - no flooding: notices are posted one at a time, oldest first, and two posts in one channel are at
//!   least the adapter's [`Adapter::edit_interval`] apart (the platform's write rate), however many
//!   notices a crash under load left behind.
//!
//! Also the one standing notice, the missing-key banner ([`missing_key_banner`]): an LLM key that is
//! not set is shown before anyone chats (the web chat's banner, via [`Adapter::set_banner`]), not only
//! in answer to the first message. The gateway sets it at start and after every reload, from the
//! providers the running config uses: a key set in the environment does not change while OPC runs,
//! but a reload can change which providers (and so which variables) are needed.

use std::collections::HashMap;
use std::sync::Arc;

use std::time::Duration;

use opc_adapters::{Adapter, AdapterError, Place, Platform, Posted};
use opc_agents::Store;
use opc_retry::{Failed, Jitter, RetryPolicy};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::threads::Threads;

/// The banner for a missing LLM key: which variable, what it stops, and how to fix it.
pub fn missing_key_banner(provider: &str, var: &str) -> String {
    format!(
        "**{var} is not set**: OPC cannot call the `{provider}` model provider, so messages get no \
         answer yet. Set it where `opc run` runs (`export {var}=…`) and restart `opc run`, or point \
         the agents at a provider that needs no key (a local `openai-compatible` server) in \
         `opc.config.yaml`."
    )
}

/// Tries per notice in one pass.
pub const ATTEMPTS: u32 = 4;

/// The retries of one notice's post: [`ATTEMPTS`] tries, 0.5 s doubling (to at most 30 s), or the
/// wait the platform asked for (a 429's `Retry-After`); only failures the adapter calls passing
/// ([`AdapterError::is_retryable`]: unreachable, rate-limited, a server error) are tried again.
const RETRY: RetryPolicy = RetryPolicy {
    max_attempts: ATTEMPTS,
    base_delay: Duration::from_millis(500),
    factor: 2,
    max_delay: Duration::from_secs(30),
    jitter: Jitter::None,
};

/// What one delivery pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Notices posted and marked delivered.
    pub posted: usize,
    /// Notices whose post failed (left undelivered, tried again at the next start).
    pub failed: usize,
    /// Notices for conversations without a chat thread, or on a platform that is not running.
    pub skipped: usize,
}

/// Post every undelivered notice to its conversation's thread, paced per channel; stops early when
/// `stop` is cancelled (the rest stay undelivered).
pub async fn deliver(
    store: &dyn Store,
    threads: &Threads,
    adapters: &HashMap<Platform, Arc<dyn Adapter>>,
    stop: &CancellationToken,
) -> Delivered {
    let mut done = Delivered::default();
    let notices = match store.undelivered_notices().await {
        Ok(notices) => notices,
        Err(e) => {
            tracing::error!(error = %e, "could not read undelivered notices");
            return done;
        }
    };
    let mut last_post: HashMap<(Platform, String), Instant> = HashMap::new();
    for notice in notices {
        if stop.is_cancelled() {
            break;
        }
        let place = match threads.place_of(&notice.conversation_id) {
            Ok(Some(place)) => place,
            Ok(None) => {
                done.skipped += 1;
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, "could not look up a notice's thread");
                done.failed += 1;
                continue;
            }
        };
        let Some(adapter) = adapters.get(&place.platform) else {
            done.skipped += 1;
            continue;
        };
        let channel = (place.platform, place.channel.clone());
        if let Some(at) = last_post.get(&channel) {
            let due = *at + adapter.edit_interval();
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = stop.cancelled() => break,
            }
        }
        let text = adapter.render(&notice.text);
        let posted = post_with_retry(adapter.as_ref(), &place, &text, stop, notice.id).await;
        last_post.insert(channel, Instant::now());
        match posted {
            Ok(_) => {
                if let Err(e) = store.mark_notice_delivered(notice.id).await {
                    tracing::error!(error = %e, notice = notice.id, "could not mark a notice delivered");
                }
                done.posted += 1;
            }
            Err(Failed { error: e, .. }) => {
                tracing::warn!(platform = %place.platform, notice = notice.id, error = %e, "could not post a notice; it stays undelivered");
                done.failed += 1;
            }
        }
    }
    done
}

/// Post one notice under [`RETRY`], giving up early when `stop` is cancelled between tries.
async fn post_with_retry(
    adapter: &dyn Adapter,
    place: &Place,
    text: &str,
    stop: &CancellationToken,
    notice: i64,
) -> Result<Posted, Failed<AdapterError>> {
    opc_retry::retry(
        &RETRY,
        || adapter.post(place, text),
        stop.cancelled(),
        |attempt, delay, error| {
            tracing::warn!(platform = %place.platform, notice, attempt, delay_ms = delay.as_millis() as u64, %error, "could not post a notice; retrying");
        },
    )
    .await
}
