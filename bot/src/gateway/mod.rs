//! The chat gateway: inbound events from every adapter → the agents engine → answers streamed back to
//! the thread they came from; approval cards out, button clicks in; slash commands.
//!
//! Shape: one task drains the inbox in order and does only quick work (thread lookup, rate limit, one
//! database transaction to start the root task), so ordering within a thread is kept and a message
//! flood never queues LLM work. Everything slow — streaming a reply, posting a card, answering a
//! command — runs in its own tracked task. A second task follows the engine's event bus to post and
//! update approval cards.
//!
//! Invariants:
//! - a message over a rate limit makes no LLM call and gets at most one notice per episode;
//! - a thread has one conversation (persisted in [`threads`]), so follow-ups — also after a restart —
//!   continue it; messages in threads that are not ours are ignored;
//! - a conversation answers one message at a time: a message that arrives while its conversation is
//!   busy waits in [`queue`] and is answered after the current one, in order; past the bound it is
//!   refused with a notice saying so (waiting messages live in memory: alone, a restart forgets
//!   them and a clean stop tells their senders; in a cluster they are also kept in the database,
//!   [`parked`], and another node answers them if this one stops or dies);
//! - only approvers decide approvals and cancel trees; an approval is decided once (the engine's
//!   transaction), and its cards are redrawn with who decided and when;
//! - notices the engine wrote while OPC was down (interrupted requests) are posted to their threads
//!   at start-up, once each ([`notices`]);
//! - a stop is not a failure: a request the engine stopped for gets no message at shutdown. A
//!   request that was running is told once, after the restart, that it was interrupted (the
//!   engine's notice — the same after SIGTERM as after kill -9); a request suspended on an approval
//!   is told once per restart, when OPC is back, that it is still waiting (see
//!   [`Gateway::resume_suspended`]);
//! - with an LLM key missing the gateway still runs and answers every message with a notice naming the
//!   variable, without calling the engine; adapters with a page show it as a banner before anyone
//!   chats ([`notices::missing_key_banner`]), kept current across reloads;
//! - a streamed answer that waited for an approval is posted below the approval card, not above it
//!   ([`opc_adapters::StreamingReply::seal`]);
//! - message text is never logged.
//!
//! Files, by concern: this one holds the gateway's state, start-up, reload and shutdown, and routes
//! each inbound event; [`messages`] starts and queues requests, [`streaming`] streams their answers,
//! [`resume`] picks up requests suspended across a restart, [`cards`] posts and redraws approval
//! cards, [`actions`] handles button clicks and slash commands (with the approver check),
//! [`commands`] renders the commands' answers, [`deliveries`] drops a platform delivery another
//! node of the cluster already handled, [`reply_duty`] lets another node of the cluster post an
//! answer when the node that streamed it stops, [`parked`] keeps waiting messages in the database
//! so another node answers them, [`discord_hold`] keeps the Discord gateway connection on
//! one node of a cluster, and [`queue`], [`limits`], [`threads`], [`channels`]
//! and [`notices`] are the parts they share.

mod actions;
mod cards;
pub mod channels;
pub mod commands;
mod deliveries;
pub mod discord_hold;
pub mod limits;
mod messages;
pub mod notices;
mod parked;
pub mod queue;
mod reply_duty;
mod resume;
mod streaming;
pub mod threads;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use opc_adapters::{Adapter, Inbound, InboundKind, Place, Platform, Visibility};
use opc_agents::Engine;
use opc_hierarchy::Loaded;

use crate::live::LiveConfig;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use limits::RateLimits;
use messages::Waiting;
use queue::Queues;
use threads::Threads;

/// How many messages may wait per conversation while it answers another.
const WAITING_MAX: usize = 3;
/// Everything the gateway is built from.
pub struct Parts {
    /// The running config (org, approvers, rate limits); a reload replaces it.
    pub live: Arc<LiveConfig>,
    /// The agents engine.
    pub engine: Engine,
    /// The provider and env var of an LLM key that is missing, if any: messages then get a notice.
    pub missing_key: Option<(String, String)>,
    /// The running adapters.
    pub adapters: Vec<Arc<dyn Adapter>>,
    /// The thread map.
    pub threads: Threads,
    /// The cluster this node serves in (PostgreSQL), if any: platform deliveries are then checked
    /// across it, so an event that reached two nodes is handled once ([`deliveries`]).
    pub cluster: Option<Arc<dyn opc_agents::store::Cluster>>,
}

/// The running gateway. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("platforms", &self.inner.adapters.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

struct Inner {
    live: Arc<LiveConfig>,
    engine: Engine,
    missing_key: RwLock<Option<(String, String)>>,
    adapters: HashMap<Platform, Arc<dyn Adapter>>,
    threads: Threads,
    /// The cluster, if this node serves in one.
    cluster: Option<Arc<dyn opc_agents::store::Cluster>>,
    /// Replaced when a reload changes `gateway.rateLimit` (the new limits apply at once; counts
    /// start again).
    limits: RwLock<Arc<RateLimits>>,
    queues: Queues<Waiting>,
    /// The reply duties this node holds in its cluster ([`reply_duty`]).
    duties: reply_duty::Duties,
    /// What each platform has been doing (the console's Channels page).
    channels: channels::Channels,
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Gateway {
    /// Assemble the gateway; nothing runs until [`Gateway::start`].
    pub fn new(parts: Parts) -> Gateway {
        // In a cluster the counts are the cluster's (`gateway.rateLimit` holds over every node).
        let limits = RateLimits::new(&parts.live.get().config.gateway.rate_limit)
            .with_shared(parts.cluster.as_ref().map(|c| c.rates()));
        let gateway = Gateway {
            inner: Arc::new(Inner {
                adapters: parts
                    .adapters
                    .into_iter()
                    .map(|a| (a.platform(), a))
                    .collect(),
                live: parts.live,
                engine: parts.engine,
                missing_key: RwLock::new(parts.missing_key),
                threads: parts.threads,
                cluster: parts.cluster,
                limits: RwLock::new(Arc::new(limits)),
                queues: Queues::new(WAITING_MAX),
                duties: reply_duty::Duties::default(),
                channels: channels::Channels::default(),
                tracker: TaskTracker::new(),
                stop: CancellationToken::new(),
            }),
        };
        gateway.show_banner();
        gateway
    }

    /// Give every adapter the missing-key banner (or clear it), as of the current providers.
    fn show_banner(&self) {
        let missing = self
            .inner
            .missing_key
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let text = missing.map(|(provider, var)| notices::missing_key_banner(&provider, &var));
        for adapter in self.inner.adapters.values() {
            adapter.set_banner(text.as_deref().map(|t| adapter.render(t)).as_deref());
        }
    }

    /// Start draining `inbox`, following the engine's events, and answering trees that were suspended
    /// on approvals when OPC last stopped.
    pub async fn start(&self, inbox: mpsc::Receiver<Inbound>) {
        // Subscribe before anything can publish, so no approval request is missed.
        let events = self.inner.engine.events().subscribe();
        let this = self.clone();
        self.inner
            .tracker
            .spawn(async move { this.follow_approvals(events).await });
        self.resume_suspended().await;
        // Notices written while OPC was down (interrupted requests) go to their threads, paced.
        let this = self.clone();
        self.inner.tracker.spawn(async move {
            let inner = &this.inner;
            let done = notices::deliver(
                inner.engine.store(),
                &inner.threads,
                &inner.adapters,
                &inner.stop,
            )
            .await;
            if done != notices::Delivered::default() {
                tracing::info!(
                    posted = done.posted,
                    failed = done.failed,
                    skipped = done.skipped,
                    "notices delivered"
                );
            }
        });
        let this = self.clone();
        self.inner
            .tracker
            .spawn(async move { this.drain(inbox).await });
        if let Some(cluster) = self.inner.cluster.clone() {
            let this = self.clone();
            self.inner
                .tracker
                .spawn(async move { this.keep_duties(cluster).await });
        }
        let this = self.clone();
        self.inner.tracker.spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
            loop {
                tokio::select! {
                    _ = tick.tick() => this.limits().tidy(),
                    () = this.inner.stop.cancelled() => break,
                }
            }
        });
    }

    /// Apply a reloaded config: `live` already holds it (approvers, the approvals channel and the org
    /// are read from there per message); rate limits are rebuilt when `gateway.rateLimit` changed,
    /// and the missing-key notice follows the new providers.
    pub fn apply_config(&self, old: &Loaded, new: &Loaded, missing_key: Option<(String, String)>) {
        if old.config.gateway.rate_limit != new.config.gateway.rate_limit {
            *self.inner.limits.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(
                RateLimits::new(&new.config.gateway.rate_limit)
                    .with_shared(self.inner.cluster.as_ref().map(|c| c.rates())),
            );
        }
        *self
            .inner
            .missing_key
            .write()
            .unwrap_or_else(|p| p.into_inner()) = missing_key;
        self.show_banner();
    }

    /// The engine the gateway feeds.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Each running platform with its activity since start.
    pub fn channels(&self) -> Vec<(Platform, channels::ChannelStats)> {
        let mut stats = self.inner.channels.snapshot();
        let mut out: Vec<(Platform, channels::ChannelStats)> = self
            .inner
            .adapters
            .keys()
            .map(|p| (*p, stats.remove(p).unwrap_or_default()))
            .collect();
        out.sort_by_key(|(p, _)| p.as_str());
        out
    }

    /// The platform of every conversation that came from a chat platform.
    pub fn platforms(&self) -> HashMap<String, String> {
        self.inner.threads.platforms().unwrap_or_default()
    }

    fn limits(&self) -> Arc<RateLimits> {
        self.inner
            .limits
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stop: no new events are taken; running trees stay in the database as they are (the engine
    /// persists every turn) and replies in flight end. Adapters are shut down by the caller.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        // Messages still waiting for their conversation are not kept across a restart: tell each
        // sender, so none is lost without a word.
        // In a cluster, the ones kept in the database are left to the other nodes (`parked`).
        let (handed_on, dropped): (Vec<_>, Vec<_>) = self
            .inner
            .queues
            .drain()
            .into_iter()
            .partition(|w| w.parked.is_some());
        if !handed_on.is_empty() {
            tracing::info!(
                messages = handed_on.len(),
                "stopping: messages waiting for their conversation are left to the other nodes"
            );
        }
        if !dropped.is_empty() {
            tracing::warn!(
                messages = dropped.len(),
                "stopping: messages waiting for their conversation were not answered"
            );
        }
        for waiting in dropped {
            self.respond(
                &waiting.adapter,
                &waiting.inbound,
                "OPC is restarting, so this message was not answered. Send it again in a moment."
                    .into(),
            );
        }
        self.inner.engine.shutdown().await;
        self.inner.tracker.close();
        // Reply tasks end once the engine's runs have ended; a platform call stuck past this is dropped.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.inner.tracker.wait())
            .await;
    }

    async fn drain(self, mut inbox: mpsc::Receiver<Inbound>) {
        loop {
            let inbound = tokio::select! {
                inbound = inbox.recv() => inbound,
                () = self.inner.stop.cancelled() => None,
            };
            let Some(inbound) = inbound else { break };
            self.handle(inbound).await;
        }
    }

    fn adapter(&self, platform: Platform) -> Option<Arc<dyn Adapter>> {
        self.inner.adapters.get(&platform).cloned()
    }

    /// Route one event. Quick: anything slow is spawned.
    async fn handle(&self, inbound: Inbound) {
        if !deliveries::first(self.inner.cluster.as_deref(), &inbound).await {
            return;
        }
        self.inner.channels.event(inbound.place.platform);
        let Some(adapter) = self.adapter(inbound.place.platform) else {
            tracing::warn!(platform = %inbound.place.platform, "event from a platform that is not running");
            return;
        };
        match inbound.kind.clone() {
            InboundKind::Mention { text, continues } => {
                self.on_message(adapter, &inbound, &text, continues.as_deref(), true)
                    .await;
            }
            InboundKind::Message { text, continues } => {
                self.on_message(adapter, &inbound, &text, Some(&continues), false)
                    .await;
            }
            InboundKind::Action { action, card } => {
                let this = self.clone();
                self.inner.tracker.spawn(async move {
                    this.on_action(adapter, inbound, action, card).await;
                });
            }
            InboundKind::Command(command) => {
                let this = self.clone();
                self.inner.tracker.spawn(async move {
                    this.on_command(adapter, inbound, command).await;
                });
            }
        }
    }

    fn respond(&self, adapter: &Arc<dyn Adapter>, inbound: &Inbound, text: String) {
        let adapter = adapter.clone();
        let reply = inbound.reply.clone();
        let this = self.clone();
        self.inner.tracker.spawn(async move {
            let rendered = adapter.render(&text);
            if let Err(e) = adapter.respond(&reply, &rendered, Visibility::Ephemeral).await {
                tracing::warn!(platform = %adapter.platform(), error = %e, "could not answer a user");
                this.inner.channels.error(adapter.platform(), "answering a user", &e);
            }
        });
    }

    fn post_notice(&self, adapter: &Arc<dyn Adapter>, place: &Place, text: String) {
        let adapter = adapter.clone();
        let place = place.clone();
        let this = self.clone();
        self.inner.tracker.spawn(async move {
            let rendered = adapter.render(&text);
            if let Err(e) = adapter.post(&place, &rendered).await {
                tracing::warn!(platform = %adapter.platform(), error = %e, "could not post a notice");
                this.inner.channels.error(adapter.platform(), "posting a notice", &e);
            }
        });
    }
}
