//! Messages in: a mention starts a conversation, a message in one of our threads continues it; the
//! rate limits and the missing-key notice are applied first, and a busy conversation queues the
//! message ([`super::queue`]) and answers it after the current one.
//!
//! Invariants:
//! - the inbox task only does quick work here (thread lookup, rate limit, one transaction to start
//!   the root task); streaming the answer runs in its own tracked task ([`super::streaming`]);
//! - a conversation answers one message at a time: whoever ends a request calls `next_in`, so the
//!   next waiting message starts exactly once;
//! - a message over a rate limit makes no LLM call; a message in a thread that is not ours is ignored;
//! - message text is never logged.

use std::sync::Arc;
use tracing::Instrument;

use opc_adapters::{Adapter, Inbound, Place};
use opc_agents::store::StoreError;
use opc_agents::{EngineError, Event};
use tokio::sync::broadcast;

use super::Gateway;
use super::commands;
use super::limits::Verdict;
use super::queue::Admit;

/// A message waiting for its conversation.
pub(super) struct Waiting {
    pub(super) adapter: Arc<dyn Adapter>,
    pub(super) inbound: Inbound,
    pub(super) text: String,
    pub(super) place: Place,
    /// Its row in the database while it waits in a cluster (see `parked.rs`).
    pub(super) parked: Option<i64>,
    /// Its `opc.inbound {platform}` span (see [`inbound_span`]), open from its arrival until its
    /// request is started; the root task's trace context is taken inside it.
    pub(super) span: tracing::Span,
}

/// The span of an inbound message (OpenTelemetry; disabled unless telemetry exports it): the
/// parent of its request's root `invoke_agent` span, and itself a child of the trace context the
/// platform's request carried (a web request's `traceparent` header), so a caller that traces its
/// own request sees OPC's work inside it. Ids and the platform only, never the text or the user.
pub(super) fn inbound_span(inbound: &Inbound, conversation: Option<&str>) -> tracing::Span {
    let platform = inbound.place.platform;
    // The web chat is an HTTP server; Slack's and Discord's events are consumed from a platform.
    let kind = match platform {
        opc_adapters::Platform::Web => "server",
        _ => "consumer",
    };
    let span = tracing::info_span!(
        target: opc_telemetry::TARGET,
        "inbound",
        otel.name = %format_args!("{} {platform}", opc_telemetry::conventions::INBOUND),
        otel.kind = kind,
        opc.platform = %platform,
        gen_ai.conversation.id = tracing::field::Empty,
    );
    // A new conversation's id is known once its request starts (`start_new` records it).
    if let Some(conversation) = conversation {
        span.record("gen_ai.conversation.id", conversation);
    }
    opc_telemetry::carry::adopt(&span, inbound.traceparent.as_deref());
    span
}

impl Waiting {
    /// The message's author as recall memory records it: `platform:user id`.
    fn author(&self) -> String {
        format!("{}:{}", self.inbound.place.platform, self.inbound.user.id)
    }
}

impl Gateway {
    /// A message: continue its thread's conversation, or start one if the bot was mentioned.
    pub(super) async fn on_message(
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
        match self.limits().admit(&user_key, &channel_key).await {
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
            span: inbound_span(inbound, conversation.as_deref()),
            adapter,
            inbound: inbound.clone(),
            text: text.to_string(),
            place,
            parked: None,
        };
        let Some(conversation) = conversation else {
            self.start_new(waiting).await;
            return;
        };
        self.admit_waiting(conversation, waiting).await;
    }

    /// Start `waiting` in `conversation`, or queue it behind the request running there (kept in
    /// the database in a cluster), or refuse it when too many already wait.
    pub(super) async fn admit_waiting(&self, conversation: String, mut waiting: Waiting) {
        let inner = &self.inner;
        let platform = waiting.place.platform;
        if inner.queues.is_busy(&conversation) {
            // Kept before it waits: if this node dies, another answers it.
            self.park(&conversation, &mut waiting);
        }
        match inner.queues.admit(&conversation, waiting) {
            Admit::Start(waiting) => {
                if self.unpark(&waiting) {
                    self.start_in(conversation, waiting).await;
                } else {
                    self.next_in(&conversation).await;
                }
            }
            Admit::Queued { position } => {
                tracing::info!(%platform, position, "conversation busy; message queued");
            }
            Admit::Full(waiting) => {
                self.unpark(&waiting);
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
            .instrument(waiting.span.clone())
            .await
        {
            Ok(run) => {
                waiting
                    .span
                    .record("gen_ai.conversation.id", run.conversation.as_str());
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
            .instrument(waiting.span.clone())
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
                            .task(task)
                            .await.is_ok_and(|record| record.state.is_terminal()),
                        // OPC is stopping: the stop tells the waiting messages (`shutdown`).
                        Ok(None) => return,
                        Err(e) => {
                            tracing::warn!(error = %e, task, "could not wait for a conversation's request");
                            false
                        }
                    };
                    if !ended {
                        // Cannot follow that request: refuse the message rather than spin on it.
                        if let Some(waiting) = this.next_waiting(&conversation) {
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
            // In a cluster, recorded first: if this node dies, another posts the answer.
            let duty = this.take_duty(root).await;
            this.stream_reply(waiting.adapter, waiting.place, root, events, outcome, duty)
                .await;
            this.next_in(&conversation).await;
        });
    }

    /// The request in `conversation` ended: start the next message waiting there, if any.
    ///
    /// Boxed: it starts the next request, whose refusal comes back here.
    pub(super) fn next_in<'a>(
        &'a self,
        conversation: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if self.inner.stop.is_cancelled() {
                return;
            }
            if let Some(waiting) = self.next_waiting(conversation) {
                self.start_in(conversation.to_string(), waiting).await;
            }
        })
    }
}
