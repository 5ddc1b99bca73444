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
//!   refused with a notice saying so (waiting messages live in memory: a restart forgets them);
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
//!   ([`StreamingReply::seal`]);
//! - message text is never logged.

pub mod channels;
pub mod commands;
pub mod limits;
pub mod notices;
pub mod queue;
pub mod threads;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use opc_adapters::{
    Action, Adapter, Card, CardState, Command, Inbound, InboundKind, Place, Platform, Posted,
    StreamingReply, User, Visibility,
};
use opc_agents::store::{Decided, StoreError, TaskId};
use opc_agents::{Engine, EngineError, Event, Outcome, TaskState};
use opc_hierarchy::Loaded;

use crate::live::LiveConfig;
use opc_hierarchy::schema::Approver;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use limits::{RateLimits, Verdict};
use queue::{Admit, Queues};
use threads::Threads;

/// How many messages may wait per conversation while it answers another.
const WAITING_MAX: usize = 3;

/// A message waiting for its conversation.
struct Waiting {
    adapter: Arc<dyn Adapter>,
    inbound: Inbound,
    text: String,
    place: Place,
}

impl Waiting {
    /// The message's author as recall memory records it: `platform:user id`.
    fn author(&self) -> String {
        format!("{}:{}", self.inbound.place.platform, self.inbound.user.id)
    }
}

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
    /// Replaced when a reload changes `gateway.rateLimit` (the new limits apply at once; counts
    /// start again).
    limits: RwLock<Arc<RateLimits>>,
    queues: Queues<Waiting>,
    /// What each platform has been doing (the console's Channels page).
    channels: channels::Channels,
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Gateway {
    /// Assemble the gateway; nothing runs until [`Gateway::start`].
    pub fn new(parts: Parts) -> Gateway {
        let limits = RateLimits::new(&parts.live.get().config.gateway.rate_limit);
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
                limits: RwLock::new(Arc::new(limits)),
                queues: Queues::new(WAITING_MAX),
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
            *self.inner.limits.write().unwrap_or_else(|p| p.into_inner()) =
                Arc::new(RateLimits::new(&new.config.gateway.rate_limit));
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
        let dropped = self.inner.queues.drain();
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

    /// A message: continue its thread's conversation, or start one if the bot was mentioned.
    async fn on_message(
        &self,
        adapter: Arc<dyn Adapter>,
        inbound: &Inbound,
        text: &str,
        continues: Option<&str>,
        mentioned: bool,
    ) {
        let inner = &self.inner;
        let platform = inbound.place.platform;
        let existing = match continues {
            Some(thread) => {
                match inner
                    .threads
                    .conversation(platform, &inbound.place.workspace, thread)
                {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::error!(error = %e, "thread lookup failed");
                        self.respond(
                            &adapter,
                            inbound,
                            "OPC could not read its database; please try again.".into(),
                        );
                        return;
                    }
                }
            }
            None => None,
        };
        let (conversation, place) = match existing {
            Some((conversation, place)) => (Some(conversation), place),
            None if mentioned => (None, inbound.place.clone()),
            // A message in a thread that is not one of ours.
            None => return,
        };
        let user_key = format!("{platform}:{}:{}", inbound.place.workspace, inbound.user.id);
        let channel_key = format!(
            "{platform}:{}:{}",
            inbound.place.workspace, inbound.place.channel
        );
        match self.limits().check(&user_key, &channel_key) {
            Verdict::Allowed => {}
            Verdict::Notify(notice) => {
                tracing::info!(%platform, "rate limit reached; message skipped");
                self.respond(&adapter, inbound, notice);
                return;
            }
            Verdict::Silent => return,
        }
        if text.trim().is_empty() {
            self.respond(&adapter, inbound, commands::help(platform, None));
            return;
        }
        let missing_key = inner
            .missing_key
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some((provider, var)) = &missing_key {
            self.post_notice(
                &adapter,
                &place,
                format!(
                    "I can't answer yet: the API key for the `{provider}` model provider is missing. \
                     Set the environment variable `{var}` where `opc run` runs, then restart it."
                ),
            );
            // Nothing was started, so a new thread stays unbound; the next mention tries again.
            return;
        }
        let waiting = Waiting {
            adapter,
            inbound: inbound.clone(),
            text: text.to_string(),
            place,
        };
        let Some(conversation) = conversation else {
            self.start_new(waiting).await;
            return;
        };
        match inner.queues.admit(&conversation, waiting) {
            Admit::Start(waiting) => self.start_in(conversation, waiting).await,
            Admit::Queued { position } => {
                tracing::info!(%platform, position, "conversation busy; message queued");
            }
            Admit::Full(waiting) => {
                tracing::info!(%platform, "conversation busy and its queue full; message refused");
                self.respond(
                    &waiting.adapter,
                    &waiting.inbound,
                    format!(
                        "I'm still working on this conversation and {} more messages are already \
                         waiting, so I did not keep this one. Send it again once I've answered.",
                        inner.queues.bound()
                    ),
                );
            }
        }
    }

    /// Start a new conversation with `waiting` and bind it to its thread.
    async fn start_new(&self, waiting: Waiting) {
        let inner = &self.inner;
        // Subscribe before sending, so the first streamed tokens are not missed.
        let events = inner.engine.events().subscribe();
        match inner
            .engine
            .send_from(None, &waiting.text, Some(&waiting.author()))
            .await
        {
            Ok(run) => {
                if let Err(e) = inner.threads.bind(&waiting.place, &run.conversation) {
                    tracing::error!(error = %e, "could not record the thread of a new conversation");
                }
                // Busy from now on: a quick second message in the new thread waits for this one.
                inner.queues.mark_busy(&run.conversation);
                self.answer(waiting, run, events);
            }
            Err(e) => self.refuse_start(&waiting, &e),
        }
    }

    /// Start `waiting` in `conversation`, which the queue has made busy with it.
    async fn start_in(&self, conversation: String, waiting: Waiting) {
        let inner = &self.inner;
        let events = inner.engine.events().subscribe();
        match inner
            .engine
            .send_from(Some(&conversation), &waiting.text, Some(&waiting.author()))
            .await
        {
            Ok(run) => self.answer(waiting, run, events),
            // Running a request the gateway did not start (one resumed after a restart, say): wait
            // for it, first in line.
            Err(EngineError::Store(StoreError::Busy { task, .. })) => {
                inner.queues.push_front(&conversation, waiting);
                let this = self.clone();
                inner.tracker.spawn(async move {
                    // Followed only if the request has really ended: a root that is neither running
                    // here nor finished in the database would otherwise be waited for, found busy
                    // again, and waited for in a loop.
                    let ended = match this.inner.engine.root_outcome(task).await {
                        Ok(Some(_)) => this
                            .inner
                            .engine
                            .store()
                            .task(task).await
                            .is_ok_and(|record| record.state.is_terminal()),
                        // OPC is stopping: the stop tells the waiting messages (`shutdown`).
                        Ok(None) => return,
                        Err(e) => {
                            tracing::warn!(error = %e, task, "could not wait for a conversation's request");
                            false
                        }
                    };
                    if !ended {
                        // Cannot follow that request: refuse the message rather than spin on it.
                        if let Some(waiting) = this.inner.queues.next(&conversation) {
                            this.respond(
                                &waiting.adapter,
                                &waiting.inbound,
                                format!(
                                    "I'm still working on the previous message in this thread \
                                     (task `#{task}`). Send this again once I've answered, or cancel \
                                     it with `/cancel {task}`."
                                ),
                            );
                        }
                    }
                    this.next_in(&conversation).await;
                });
            }
            Err(e) => {
                self.refuse_start(&waiting, &e);
                self.next_in(&conversation).await;
            }
        }
    }

    fn refuse_start(&self, waiting: &Waiting, e: &EngineError) {
        tracing::error!(error = %e, "could not start a request");
        self.respond(
            &waiting.adapter,
            &waiting.inbound,
            format!("I couldn't start on that: {e}"),
        );
    }

    /// Stream `run`'s answer; then answer the next message waiting in its conversation.
    fn answer(
        &self,
        waiting: Waiting,
        run: opc_agents::RootRun,
        events: broadcast::Receiver<Event>,
    ) {
        tracing::info!(platform = %waiting.place.platform, task = run.task, "request started");
        let this = self.clone();
        let root = run.task;
        let conversation = run.conversation.clone();
        self.inner.tracker.spawn(async move {
            // `None` when OPC stops first: the request did not fail, so nothing is posted now (the
            // restart says what became of it).
            let outcome = run.outcome();
            this.stream_reply(waiting.adapter, waiting.place, root, events, outcome)
                .await;
            this.next_in(&conversation).await;
        });
    }

    /// The request in `conversation` ended: start the next message waiting there, if any.
    ///
    /// Boxed: it starts the next request, whose refusal comes back here.
    fn next_in<'a>(
        &'a self,
        conversation: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if self.inner.stop.is_cancelled() {
                return;
            }
            if let Some(waiting) = self.inner.queues.next(conversation) {
                self.start_in(conversation.to_string(), waiting).await;
            }
        })
    }

    /// Stream root task `root`'s answer into `place`, then show its outcome exactly. Progress events of
    /// the tree go to the adapter (the web chat shows them as a trace).
    async fn stream_reply(
        &self,
        adapter: Arc<dyn Adapter>,
        place: Place,
        root: TaskId,
        mut events: broadcast::Receiver<Event>,
        outcome: impl Future<Output = Option<Outcome>>,
    ) {
        let mut reply = StreamingReply::new(adapter.clone(), place.clone());
        let mut tree: HashSet<TaskId> = HashSet::from([root]);
        let mut events_open = true;
        tokio::pin!(outcome);
        let outcome = loop {
            let due = reply.due();
            tokio::select! {
                outcome = &mut outcome => break outcome,
                event = events.recv(), if events_open => match event {
                    Ok(event) => follow(&adapter, &place, root, &mut tree, &mut reply, event).await,
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => events_open = false,
                },
                () = sleep_until(due), if due.is_some() => {
                    if let Err(e) = reply.flush_if_due().await {
                        tracing::warn!(platform = %adapter.platform(), error = %e, "could not update a streaming reply");
                self.inner.channels.error(adapter.platform(), "updating a streaming reply", &e);
                    }
                }
            }
        };
        // The tree's events were all published before its outcome, but `select!` may have taken the
        // outcome first: show what is still buffered, so the trace is complete before the answer.
        loop {
            match events.try_recv() {
                Ok(event) => follow(&adapter, &place, root, &mut tree, &mut reply, event).await,
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
        let Some(outcome) = outcome else { return };
        if let Err(e) = reply.finish(&final_text(&outcome)).await {
            tracing::warn!(platform = %adapter.platform(), error = %e, "could not post an answer");
            self.inner
                .channels
                .error(adapter.platform(), "posting an answer", &e);
        }
    }

    /// Trees that were suspended on an approval when OPC stopped: each one's answer goes to its
    /// thread, and each thread whose request still waits for a person is told so, once, now:
    /// "OPC restarted; this request is still waiting for approval #N."
    ///
    /// Why at restart and not at shutdown: only now is it true (a stop may be for good), it is the
    /// same after a crash or kill -9 (where no shutdown code runs), and it tells the approvers that
    /// the card they saw before still works. Nothing is said at shutdown, because a suspended tree
    /// has not failed. Each restart says it once per waiting request; a request whose approval was
    /// decided (or expired) by now gets nothing, its answer follows.
    ///
    /// The notices are posted one after another, at most one per channel per
    /// [`Adapter::edit_interval`] (a restart with many waiting requests does not flood a channel),
    /// and each request's answer is followed only after its notice, so the notice never comes after
    /// the answer. Events are subscribed before any of it, so none of a tree's progress is missed.
    async fn resume_suspended(&self) {
        let inner = &self.inner;
        let mut resumed = Vec::new();
        for &root in &inner.engine.recovery().suspended_roots {
            let conversation = match inner.engine.store().task(root).await {
                Ok(task) => task.conversation_id,
                Err(_) => continue,
            };
            let Ok(Some(place)) = inner.threads.place_of(&conversation) else {
                continue;
            };
            let Some(adapter) = self.adapter(place.platform) else {
                continue;
            };
            let events = inner.engine.events().subscribe();
            // Busy from now on: a message in the thread waits for the resumed request.
            inner.queues.mark_busy(&conversation);
            resumed.push((root, conversation, place, adapter, events));
        }
        if resumed.is_empty() {
            return;
        }
        let this = self.clone();
        inner.tracker.spawn(async move {
            let mut last_post: HashMap<(Platform, String), tokio::time::Instant> = HashMap::new();
            for (root, conversation, place, adapter, events) in resumed {
                if this.inner.stop.is_cancelled() {
                    break;
                }
                if let Some(text) = this.still_waiting(root).await {
                    let channel = (place.platform, place.channel.clone());
                    if let Some(at) = last_post.get(&channel) {
                        let due = *at + adapter.edit_interval();
                        tokio::select! {
                            () = tokio::time::sleep_until(due) => {}
                            () = this.inner.stop.cancelled() => break,
                        }
                    }
                    let rendered = adapter.render(&text);
                    if let Err(e) = adapter.post(&place, &rendered).await {
                        tracing::warn!(platform = %adapter.platform(), task = root, error = %e, "could not say a request still waits for its approval");
                        this.inner.channels.error(
                            adapter.platform(),
                            "posting a restart notice",
                            &e,
                        );
                    }
                    last_post.insert(channel, tokio::time::Instant::now());
                }
                let follow = this.clone();
                this.inner.tracker.spawn(async move {
                    let engine = follow.inner.engine.clone();
                    let outcome = async move { engine.root_outcome(root).await.ok().flatten() };
                    follow
                        .stream_reply(adapter, place, root, events, outcome)
                        .await;
                    follow.next_in(&conversation).await;
                });
            }
        });
    }

    /// "OPC restarted; this request is still waiting for approval #N." when root `root` has
    /// approvals pending now, else `None`.
    async fn still_waiting(&self, root: TaskId) -> Option<String> {
        let pending: Vec<String> = self
            .inner
            .engine
            .pending_approvals()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.root_id == root)
            .map(|a| format!("#{}", a.id))
            .collect();
        match pending.as_slice() {
            [] => None,
            [one] => Some(format!(
                "OPC restarted; this request is still waiting for approval {one}."
            )),
            many => Some(format!(
                "OPC restarted; this request is still waiting for approvals {}.",
                many.join(", ")
            )),
        }
    }

    /// Post a card for every approval request, redraw cards when approvals are decided.
    async fn follow_approvals(self, mut events: broadcast::Receiver<Event>) {
        self.post_missing_cards().await;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = self.inner.stop.cancelled() => break,
            };
            match event {
                Ok(Event::ApprovalRequested { approval, .. }) => {
                    self.post_cards(approval).await;
                }
                Ok(Event::ApprovalResolved {
                    approval,
                    decision,
                    by,
                    ..
                }) => self.redraw_cards(approval, decision, by).await,
                Ok(_) => {}
                // Missed some: catch up from the database.
                Err(broadcast::error::RecvError::Lagged(_)) => self.post_missing_cards().await,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }

    async fn post_missing_cards(&self) {
        let pending = self
            .inner
            .engine
            .pending_approvals()
            .await
            .unwrap_or_default();
        for approval in pending {
            self.post_cards(approval.id).await;
        }
    }

    fn card(&self, approval: &opc_agents::store::Approval) -> Card {
        let org = self.inner.engine.org();
        let mut path: Vec<String> = org
            .ancestors(&approval.agent)
            .into_iter()
            .rev()
            .map(str::to_string)
            .collect();
        path.push(approval.agent.clone());
        Card {
            approval: approval.id,
            agent: approval.agent.clone(),
            role: org.role(&approval.agent).unwrap_or_default().to_string(),
            path,
            summary: approval.summary.clone(),
            options: approval.options.clone(),
            state: CardState::Pending,
        }
    }

    /// Post approval `id`'s card where its conversation lives (or the platform's approvals channel),
    /// once.
    async fn post_cards(&self, id: i64) {
        let inner = &self.inner;
        if inner.threads.cards(id).is_ok_and(|cards| !cards.is_empty()) {
            return;
        }
        let Ok(Some(approval)) = inner.engine.store().approval(id).await else {
            return;
        };
        if approval.state != opc_agents::store::ApprovalState::Pending {
            return;
        }
        // Conversations started from `opc chat` have no thread: they are decided there.
        let Ok(Some(place)) = inner.threads.place_of(&approval.conversation_id) else {
            return;
        };
        let Some(adapter) = self.adapter(place.platform) else {
            return;
        };
        let loaded = inner.live.get();
        let channels = &loaded.config.gateway.approvals_channel;
        let dedicated = match place.platform {
            Platform::Slack => channels.slack.clone(),
            Platform::Discord => channels.discord.clone(),
            Platform::Web => None,
        };
        let target = match dedicated {
            Some(channel) => Place {
                platform: place.platform,
                workspace: place.workspace.clone(),
                thread: channel.clone(),
                channel,
            },
            None => place,
        };
        let card = self.card(&approval);
        match adapter.post_card(&target, &card).await {
            Ok(posted) => {
                if let Err(e) = inner.threads.add_card(&posted, &card) {
                    tracing::error!(error = %e, approval = id, "could not record an approval card");
                }
            }
            Err(e) => {
                tracing::warn!(platform = %adapter.platform(), approval = id, error = %e, "could not post an approval card");
                self.inner
                    .channels
                    .error(adapter.platform(), "posting an approval card", &e);
            }
        }
    }

    async fn redraw_cards(&self, id: i64, decision: String, by: String) {
        let cards = self.inner.threads.cards(id).unwrap_or_default();
        let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        for (posted, mut card) in cards {
            card.state = CardState::Decided {
                option: decision.clone(),
                by: by.clone(),
                at: at.clone(),
            };
            let Some(adapter) = self.adapter(posted.platform) else {
                continue;
            };
            if let Err(e) = adapter.update_card(&posted, &card).await {
                tracing::warn!(platform = %adapter.platform(), approval = id, error = %e, "could not update an approval card");
                self.inner
                    .channels
                    .error(adapter.platform(), "updating an approval card", &e);
            } else if let Err(e) = self.inner.threads.add_card(&posted, &card) {
                tracing::error!(error = %e, approval = id, "could not record an approval card");
            }
        }
    }

    /// Whether `user` may decide for `agent` (or, for the root agent, cancel its trees): the global
    /// approvers plus the agent's own. On the web chat the operator decides: it is bound to loopback
    /// or guarded by an access token, like the terminal `opc chat` is.
    fn is_approver(&self, user: &User, platform: Platform, agent: &str) -> bool {
        if platform == Platform::Web {
            return true;
        }
        let loaded = self.inner.live.get();
        let config = &loaded.config;
        let own = config
            .agents
            .get(agent)
            .map(|a| a.approvers.as_slice())
            .unwrap_or_default();
        config
            .gateway
            .approvers
            .iter()
            .chain(own)
            .any(|approver| approver_matches(approver, platform, user))
    }

    fn approvers_of(&self, agent: &str) -> Vec<String> {
        let loaded = self.inner.live.get();
        let config = &loaded.config;
        let own = config
            .agents
            .get(agent)
            .map(|a| a.approvers.as_slice())
            .unwrap_or_default();
        config
            .gateway
            .approvers
            .iter()
            .chain(own)
            .map(|a| {
                format!(
                    "{}:{}{}",
                    a.platform.as_str(),
                    if a.is_role { "role:" } else { "" },
                    a.id
                )
            })
            .collect()
    }

    async fn on_action(
        &self,
        adapter: Arc<dyn Adapter>,
        inbound: Inbound,
        action: Action,
        _card: Posted,
    ) {
        let Action::Decide { approval, option } = action;
        let engine = &self.inner.engine;
        let record = match engine.store().approval(approval).await {
            Ok(Some(record)) => record,
            Ok(None) => {
                self.respond(
                    &adapter,
                    &inbound,
                    format!("Approval #{approval} does not exist."),
                );
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "approval lookup failed");
                self.respond(
                    &adapter,
                    &inbound,
                    "OPC could not read its database; please try again.".into(),
                );
                return;
            }
        };
        let platform = inbound.place.platform;
        if !self.is_approver(&inbound.user, platform, &record.agent) {
            tracing::info!(%platform, approval, "approval refused: not an approver");
            let approvers = self.approvers_of(&record.agent);
            let who = if approvers.is_empty() {
                "No approvers are configured for this agent; an admin can add them under \
                 `gateway.approvers` or the agent's `approvers` in opc.config.yaml."
                    .to_string()
            } else {
                format!("Approvers: {}.", approvers.join(", "))
            };
            self.respond(
                &adapter,
                &inbound,
                format!(
                    "Only approvers can decide approval #{approval} for **{}**. {who}",
                    record.agent
                ),
            );
            return;
        }
        let Some(choice) = record.options.get(option).cloned() else {
            self.respond(
                &adapter,
                &inbound,
                format!("That button is not an option of approval #{approval}."),
            );
            return;
        };
        let by = format!("{} ({platform}:{})", inbound.user.name, inbound.user.id);
        let answer = match engine.decide(approval, &choice, &by).await {
            Ok(Decided::Recorded(_)) => {
                tracing::info!(%platform, approval, "approval decided");
                format!("Recorded **{choice}** for approval #{approval}.")
            }
            Ok(Decided::AlreadyDecided(done)) | Ok(Decided::Expired(done)) => format!(
                "Approval #{approval} was already decided: **{}** by {}.",
                done.decision.unwrap_or_default(),
                done.decided_by.unwrap_or_default()
            ),
            Ok(Decided::NotFound) => format!("Approval #{approval} does not exist."),
            Err(e) => format!("Could not record that: {e}"),
        };
        self.respond(&adapter, &inbound, answer);
    }

    async fn on_command(&self, adapter: Arc<dyn Adapter>, inbound: Inbound, command: Command) {
        let engine = &self.inner.engine;
        let text = match command {
            Command::Status => commands::status(engine.store(), inbound.place.platform).await,
            Command::Agents => commands::agents(&engine.org()),
            Command::Tasks => commands::tasks(engine.store()).await,
            Command::Help => commands::help(inbound.place.platform, None),
            Command::Unknown(what) => commands::help(inbound.place.platform, Some(&what)),
            Command::Cancel(arg) => self.cancel(&inbound, &arg).await,
        };
        self.respond(&adapter, &inbound, text);
    }

    async fn cancel(&self, inbound: &Inbound, arg: &str) -> String {
        let engine = &self.inner.engine;
        let root = engine.org().root().to_string();
        if !self.is_approver(&inbound.user, inbound.place.platform, &root) {
            return "Only approvers can cancel tasks.".into();
        }
        let Ok(task) = arg.trim().trim_start_matches('#').parse::<TaskId>() else {
            return format!(
                "`/cancel` needs a task id, e.g. `/cancel 12` (see `/status`); `{}` is not one.",
                arg.trim()
            );
        };
        match engine.store().task(task).await {
            Ok(record) if record.state.is_terminal() => {
                format!(
                    "Task #{task} has already ended ({}).",
                    record.state.as_str()
                )
            }
            Ok(_) => match engine.cancel(task).await {
                Ok(cancelled) => format!(
                    "Cancelled task #{task} ({} task{} in its tree).",
                    cancelled.len(),
                    if cancelled.len() == 1 { "" } else { "s" }
                ),
                Err(e) => format!("Could not cancel task #{task}: {e}"),
            },
            Err(_) => format!("There is no task #{task}; `/status` lists the running ones."),
        }
    }
}

/// Whether `event` belongs to root `root`'s tree; learns the tree's tasks from `TaskCreated`.
fn in_tree(event: &Event, root: TaskId, tree: &mut HashSet<TaskId>) -> bool {
    match event {
        Event::TaskCreated { task, root: of, .. } => {
            if *of == root {
                tree.insert(*task);
                true
            } else {
                false
            }
        }
        Event::AgentStarted { task, .. }
        | Event::ToolCalled { task, .. }
        | Event::Token { task, .. }
        | Event::StreamRestarted { task }
        | Event::PrivacyMasked { task, .. }
        | Event::PrivacyBlocked { task, .. }
        | Event::AgentFinished { task, .. }
        | Event::Escalated { task, .. }
        | Event::ApprovalRequested { task, .. }
        | Event::ApprovalResolved { task, .. } => tree.contains(task),
        Event::ConfigReloaded { .. } | Event::ConfigRejected { .. } => false,
        Event::Delegated { task, child, .. } => {
            if tree.contains(task) {
                tree.insert(*child);
                true
            } else {
                false
            }
        }
    }
}

/// One engine event while streaming root `root`'s reply: its tokens go into the reply, the rest of its
/// tree's events to the adapter as progress.
async fn follow(
    adapter: &Arc<dyn Adapter>,
    place: &Place,
    root: TaskId,
    tree: &mut HashSet<TaskId>,
    reply: &mut StreamingReply,
    event: Event,
) {
    if !in_tree(&event, root, tree) {
        return;
    }
    if matches!(event, Event::ApprovalRequested { .. })
        && let Err(e) = reply.seal().await
    {
        // The answer still comes; it may then show above the card.
        tracing::warn!(platform = %adapter.platform(), error = %e, "could not finish a streamed reply before an approval card");
    }
    match &event {
        Event::Token { task, text, .. } if *task == root => reply.push(text),
        Event::Token { .. } => {}
        Event::StreamRestarted { task } if *task == root => reply.restart(),
        _ => {
            if matches!(&event, Event::ToolCalled { task, .. } if *task == root) {
                reply.end_turn();
            }
            if let Ok(json) = serde_json::to_value(&event) {
                adapter.progress(place, &json).await;
            }
        }
    }
}

/// The text shown for an outcome: the answer, or what went wrong.
fn final_text(outcome: &Outcome) -> String {
    match outcome.state {
        TaskState::Completed => outcome.text.clone(),
        TaskState::Cancelled => format!("**Cancelled.** {}", outcome.text),
        TaskState::Escalated => outcome.text.clone(),
        _ => format!("**This request failed.** {}", outcome.text),
    }
}

fn approver_matches(approver: &Approver, platform: Platform, user: &User) -> bool {
    approver.platform.as_str() == platform.as_str()
        && if approver.is_role {
            user.roles.contains(&approver.id)
        } else {
            user.id == approver.id
        }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
