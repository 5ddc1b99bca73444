//! The engine's public face: start conversations, send messages, cancel tasks, decide approvals, and
//! wait for answers. The work itself happens in `session`, over the state the sessions share
//! ([`EngineState`]); the engine keeps only its own bookkeeping of root runs.
//!
//! Lifecycle of a message:
//! 1. [`Engine::send`] records a root task (with the conversation's history) and spawns its session;
//! 2. the session delegates down the org tree, each child an independent session awaited by its parent;
//! 3. the root's outcome is published on the event bus and returned by [`RootRun::wait`].
//!
//! Invariants:
//! - every root run is tracked, so shutdown and cancellation reach it;
//! - a suspended tree (pending approval) is resumed from the database, in this process or a new one, by
//!   re-entering the root session: completed tool calls are answered from their stored results, so
//!   nothing runs twice;
//! - startup recovery runs before the engine accepts work;
//! - when memory keeps facts, the memory worker (`memory_work`) runs beside the roots, tracked and
//!   stopped like them; it is woken after a completed root's outcome is sent, so the answer never
//!   waits for the root's fact extraction;
//! - [`Engine::reload`] swaps in a new config for roots started from then on; a tree keeps the config
//!   its root started with (its [`EngineState`]), so trees in flight finish as they began — with one
//!   exception, memory permissions taken away: a revocation reaches trees in flight at once (see
//!   [`Engine::reload`]);
//! - in a cluster ([`EngineOptions::cluster`]) a new root is queued in the database and runs on
//!   whichever node claims it (this one first, when it has room), under a lease whose token fences
//!   every write of its sessions; a caller waits for the root's outcome wherever it runs (the
//!   database says when it ended); a tree whose node stopped or lost its lease is taken over by
//!   another node from its last checkpoint (`crate::node`), and a clean shutdown hands this node's
//!   trees over at once; no startup recovery runs, since other nodes are running;
//! - a root the engine stopped for (shutdown) has no outcome: [`RootRun::outcome`] says so, and the
//!   tree stays in the database as it was — suspended on an approval (resumed at the next start) or
//!   running (marked interrupted at the next start, with one notice to its conversation).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use opc_hierarchy::{Config, Loaded, OrgTree};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::{ContextBuilder, MemoryHooks, PromptError};
use crate::ending::{Escalation, render_escalation};
use crate::events::{Event, EventBus};
use crate::llm::layers::{StackOptions, standard_stack};
use crate::llm::privacy::PrivacyLayer;
use crate::llm::provider::Providers;
use crate::llm::stack::{CallStack, Seam};
use crate::llm::{Content, Message, Role};
use crate::memory_work::MemoryWorker;
pub use crate::state::EngineOptions;
use crate::state::{EngineState, StateParts};
use crate::store::{
    Approval, Claimed, Cluster, Decided, NewTask, Recovery, Store, StoreError, SystemDecider,
    TaskId, TaskRecord, TaskState,
};
use opc_privacy::detect::NerSlot;

/// Why the engine refused something.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A prompt file is unreadable.
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An agent's model does not resolve (the config was not validated).
    #[error("agent `{agent}`: model `{model}`: {message}")]
    Model {
        /// The agent.
        agent: String,
        /// The model reference.
        model: String,
        /// Why.
        message: String,
    },
    /// Memory could not take the new config (seeding its blocks failed).
    #[error("memory blocks: {0}")]
    Memory(#[from] opc_memory::blocks::BlockError),
    /// Unknown approval id.
    #[error("there is no approval {0}")]
    NoApproval(i64),
    /// The decision is not one of the approval's options.
    #[error("`{given}` is not an option of approval {approval}; choose one of: {}", .options.join(", "))]
    BadDecision {
        /// The approval.
        approval: i64,
        /// What was given.
        given: String,
        /// What is allowed.
        options: Vec<String>,
    },
}

/// How a root task ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The root task.
    pub task: TaskId,
    /// The conversation.
    pub conversation: String,
    /// Final state.
    pub state: TaskState,
    /// The answer (completed), the error (failed / cancelled) or the escalation, rendered for a human.
    pub text: String,
    /// The escalation, when the root escalated.
    pub escalation: Option<Escalation>,
    /// Prompt tokens over the whole tree.
    pub tokens_in: u64,
    /// Generated tokens over the whole tree.
    pub tokens_out: u64,
    /// USD over the whole tree.
    pub cost_usd: f64,
    /// Calls in the tree whose token usage the provider did not report: the totals above are then
    /// lower bounds (see [`crate::store::tokens_text`]).
    pub unknown_usage_calls: u32,
}

/// A root task that is running.
pub struct RootRun {
    /// The conversation.
    pub conversation: String,
    /// The root task.
    pub task: TaskId,
    done: watch::Receiver<Option<Outcome>>,
}

impl RootRun {
    /// Wait for the outcome; a root the engine stopped for first (shutdown) is reported FAILED
    /// ("The engine stopped before the task finished."). For callers that outlive the engine only
    /// in tests and the terminal; the gateway uses [`RootRun::outcome`], which does not call a
    /// stop a failure.
    pub async fn wait(mut self) -> Outcome {
        wait_outcome(&mut self.done)
            .await
            .unwrap_or_else(|| lost(self.task, &self.conversation))
    }

    /// Wait for the outcome, or `None` when the engine stopped before the root ended: the tree is
    /// then left in the database as it was (suspended on an approval, or running — the next start
    /// marks it interrupted and tells its conversation), so nothing has failed yet.
    pub async fn outcome(mut self) -> Option<Outcome> {
        wait_outcome(&mut self.done).await
    }
}

/// The outcome sent on `done`, or `None` when its sender dropped without one (shutdown).
async fn wait_outcome(done: &mut watch::Receiver<Option<Outcome>>) -> Option<Outcome> {
    match done.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone(),
        Err(_) => None,
    }
}

fn lost(task: TaskId, conversation: &str) -> Outcome {
    Outcome {
        task,
        conversation: conversation.to_string(),
        state: TaskState::Failed,
        text: "The engine stopped before the task finished.".into(),
        escalation: None,
        tokens_in: 0,
        tokens_out: 0,
        cost_usd: 0.0,
        unknown_usage_calls: 0,
    }
}

/// The engine's own bookkeeping of root runs (the sessions never see it).
struct Runs {
    /// Running roots and their outcome channels.
    roots: Mutex<HashMap<TaskId, watch::Receiver<Option<Outcome>>>>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// The memory worker, when memory keeps facts: woken when a root completes.
    memory: std::sync::OnceLock<MemoryWorker>,
    /// Cluster mode: the trees this node runs under a lease, by root.
    leased: Mutex<HashMap<TaskId, Leased>>,
    /// Cluster mode: held across a claim and its entry in `leased`, and across a heartbeat (see
    /// `crate::node::NodeHost::claims`).
    claiming: Arc<tokio::sync::Mutex<()>>,
    /// Cluster mode: callers here waiting for roots that may run on any node, by root. An entry
    /// lives until the root's outcome is sent (or the engine stops).
    waiters: Mutex<HashMap<TaskId, watch::Sender<Option<Outcome>>>>,
}

/// A tree this node runs under a lease.
struct Leased {
    /// The lease's fencing token.
    token: i64,
    /// Cancelled when the lease moved to another node: the run stops here, writing nothing.
    lost: CancellationToken,
}

impl Runs {
    fn leased(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, Leased>> {
        self.leased.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiters(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<TaskId, watch::Sender<Option<Outcome>>>> {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The agents engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    /// The state new roots start with; replaced whole by [`Engine::reload`].
    current: Arc<RwLock<Arc<EngineState>>>,
    /// What every state shares, kept here so a reload can build the next one.
    store: Arc<dyn Store>,
    events: EventBus,
    runs: Arc<Runs>,
    /// Held for the whole of a reload: two reloads never interleave their memory commit and swap.
    reloading: Arc<Mutex<()>>,
    recovery: Arc<Recovery>,
    /// The privacy detector's NER slot (an unused empty one when the engine was built without
    /// privacy).
    ner: Arc<Mutex<NerSlot>>,
    /// The cluster this engine is a node of ([`EngineOptions::cluster`]).
    cluster: Option<Arc<dyn Cluster>>,
}

/// The privacy layer for `config`, at the privacy position, when `framework.privacy.enabled`.
pub fn privacy_seam(config: &Config, ner: NerSlot) -> Result<Option<Seam>, EngineError> {
    if !config.framework.privacy.enabled {
        return Ok(None);
    }
    let mode = crate::llm::privacy::mode(config).map_err(|message| EngineError::Model {
        agent: "privacy".into(),
        model: config
            .framework
            .privacy
            .route_model
            .clone()
            .unwrap_or_default(),
        message,
    })?;
    let gate = crate::llm::privacy::NerGate::for_config(config, ner.clone());
    let detector = Arc::new(crate::llm::privacy::detector(config, ner));
    Ok(Some(PrivacyLayer::new(mode, detector, gate).into_seam()))
}

impl Engine {
    /// Build the engine: claim the database (one engine per database), read prompts, resolve models,
    /// run startup recovery, and resume trees suspended on approvals (they wait for a decision or their
    /// deadline again). Must be called inside a Tokio runtime.
    ///
    /// `llm` is the call stack every model call goes through: [`Providers`] alone gets the standard
    /// shared stack without privacy ([`CallStack::new`]).
    pub async fn new(
        config: Arc<Config>,
        org: Arc<OrgTree>,
        base_dir: &Path,
        llm: impl Into<CallStack>,
        store: Arc<dyn Store>,
        memory: Arc<dyn MemoryHooks>,
        options: EngineOptions,
    ) -> Result<Engine, EngineError> {
        let events = EventBus::default();
        let cluster = options.cluster.clone();
        let slots_total = config.framework.execution.max_concurrent_agents.get();
        let rt = build_state(
            config,
            org,
            base_dir,
            llm.into(),
            Shared {
                store: store.clone(),
                events: events.clone(),
                memory,
                options,
                approvals: Arc::default(),
                tokens: Arc::default(),
                agent_slots: None,
            },
        )?;
        // One process alone on its database claims it and recovers what the last one left. A
        // cluster node does neither: other nodes are running, and a tree whose node stopped is
        // taken over through its lease instead (see `crate::node`).
        let recovery = match &cluster {
            None => {
                store.lock_exclusive().await?;
                store.recover().await?
            }
            Some(_) => Recovery::default(),
        };
        let engine = Engine {
            current: Arc::new(RwLock::new(Arc::new(rt))),
            store,
            events,
            reloading: Arc::default(),
            runs: Arc::new(Runs {
                roots: Mutex::default(),
                tracker: TaskTracker::new(),
                shutdown: CancellationToken::new(),
                memory: std::sync::OnceLock::new(),
                leased: Mutex::default(),
                claiming: Arc::default(),
                waiters: Mutex::default(),
            }),
            recovery: Arc::new(recovery),
            ner: Arc::default(),
            cluster,
        };
        // Memory work (fact extraction, consolidation) when memory keeps facts: the worker starts
        // with the jobs a stopped process left queued, and stops with the engine.
        if engine.rt().context().memory().fact_store().is_some() {
            let current = engine.current.clone();
            let worker = MemoryWorker::spawn(
                Arc::new(move || current.read().unwrap_or_else(|p| p.into_inner()).clone()),
                &engine.runs.tracker,
                engine.runs.shutdown.clone(),
            );
            let _ = engine.runs.memory.set(worker);
        }
        if let Some(cluster) = &engine.cluster {
            crate::node::start(
                cluster.clone(),
                Arc::new(engine.clone()),
                slots_total,
                engine.events.clone(),
                &engine.runs.tracker,
                engine.runs.shutdown.clone(),
            )
            .await?;
        } else if engine.rt().options().resume_suspended {
            for root in engine.recovery.suspended_roots.clone() {
                engine.spawn_root(root);
            }
        }
        Ok(engine)
    }

    /// Build providers from the config, each in the standard provider stack (keys read with `env`), the
    /// shared stack above their router (with the privacy layer when `framework.privacy.enabled`),
    /// then the engine. The privacy detector's NER tier starts empty: fill [`Engine::ner_slot`]
    /// when the model has loaded (until then detection runs its pattern tier).
    pub async fn from_config(
        loaded: &opc_hierarchy::Loaded,
        store: Arc<dyn Store>,
        memory: Arc<dyn MemoryHooks>,
        options: EngineOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Engine, EngineError> {
        let ner = NerSlot::default();
        let llm = call_stack(&loaded.config, &options, env, ner.clone())?;
        let engine = Engine::new(
            Arc::new(loaded.config.clone()),
            Arc::new(loaded.org.clone()),
            &loaded.base_dir,
            llm,
            store,
            memory,
            options,
        )
        .await?;
        *engine.ner.lock().unwrap_or_else(|p| p.into_inner()) = ner;
        Ok(engine)
    }

    /// The slot the privacy detector's NER model goes into once loaded (in the background: loading
    /// takes longer than start-up may). Empty until filled; filling it again is refused.
    pub fn ner_slot(&self) -> NerSlot {
        self.ner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What startup recovery found and did.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The event bus (the same across reloads).
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// The database (the same across reloads).
    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// The configured providers (to check for missing keys), as of the current config.
    pub fn providers(&self) -> Providers {
        self.rt().llm().providers().clone()
    }

    /// The call stack new roots' model calls go through.
    pub fn call_stack(&self) -> CallStack {
        self.rt().llm().clone()
    }

    /// The org new roots start in.
    pub fn org(&self) -> Arc<OrgTree> {
        self.rt().org().clone()
    }

    /// The config new roots start with.
    pub fn config(&self) -> Arc<Config> {
        self.rt().config().clone()
    }

    /// The state new roots start with.
    fn rt(&self) -> Arc<EngineState> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Apply a new, validated config to roots started from now on: conversations, follow-ups and
    /// resumed trees use its org, prompts (read again), models, limits and memory (the blocks and
    /// permissions of the new org: an agent the reload adds has its blocks, and its manager reads
    /// them); trees already running finish with the config they started with. The call stack
    /// (providers, their rate limits and the privacy layer) is rebuilt only when
    /// `framework.providers` or `framework.privacy` changed, and the agent slots only when
    /// `maxConcurrentAgents` did, so unchanged limits keep their state.
    ///
    /// Memory permissions the new config takes away (a `shareWith`, a `sharedBlocks` reference, an
    /// agent removed) are taken away from trees in flight too, at once: a reload that revokes is how
    /// an operator closes a leak, and a tree suspended on an approval may run for days. Grants are
    /// not: a tree in flight only knows its own org. (An agent keeps its own blocks while its tree
    /// runs, so a removed agent's task still finishes.)
    ///
    /// Atomic: every step that can fail (prompts, models, the call stack, the new memory view) runs
    /// before anything is committed; the last is memory's, which seeds the new config's blocks in one
    /// transaction and only then makes its permissions the newest. Nothing changes when it fails (an
    /// unreadable prompt, a model that does not resolve, a block that cannot be written): the old
    /// state and the old permissions stay.
    ///
    /// The reload lock is held across one store read (`live_tasks`): reloads are serialised on
    /// purpose, and the gateway runs them on a blocking thread (`block_on`), never on a runtime worker.
    #[allow(clippy::await_holding_lock)]
    pub async fn reload(
        &self,
        loaded: &Loaded,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Reloaded, EngineError> {
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.rt();
        let new = &loaded.config;
        let rebuild_stack = old.config().framework.providers != new.framework.providers
            || old.config().framework.privacy != new.framework.privacy;
        let llm = if rebuild_stack {
            call_stack(new, old.options(), env, self.ner_slot())?
        } else {
            old.llm().clone()
        };
        let same_slots = old.config().framework.execution.max_concurrent_agents
            == new.framework.execution.max_concurrent_agents;
        let org = Arc::new(loaded.org.clone());
        let memory = old.context().memory();
        let memory = memory
            .for_config(new, org.clone())
            .unwrap_or_else(|| memory.clone());
        let rt = build_state(
            Arc::new(new.clone()),
            org,
            &loaded.base_dir,
            llm,
            Shared {
                store: self.store.clone(),
                events: self.events.clone(),
                memory: memory.clone(),
                options: old.options().clone(),
                approvals: old.approvals().clone(),
                tokens: old.tokens().clone(),
                agent_slots: same_slots.then(|| old.agent_slots().clone()),
            },
        )?;
        // Tasks still running for agents the new config no longer has: they finish (their trees keep
        // the old state), and the caller says so.
        let mut removed_live: Vec<(String, usize)> = Vec::new();
        for task in self.store.live_tasks().await? {
            if !new.agents.contains_key(&task.agent) {
                match removed_live.iter_mut().find(|(a, _)| *a == task.agent) {
                    Some((_, n)) => *n += 1,
                    None => removed_live.push((task.agent.clone(), 1)),
                }
            }
        }
        // The commit: memory first (its failure leaves everything as it was), then the state. A
        // root starting between the two runs the old state under the new permissions — never the
        // new org under the old ones.
        memory.apply()?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rt);
        Ok(Reloaded {
            call_stack_rebuilt: rebuild_stack,
            removed_live,
        })
    }

    /// Send `text` to the root agent: in a new conversation (`None`) or as a follow-up in an existing
    /// one, which continues the root agent's session history.
    pub async fn send(
        &self,
        conversation: Option<&str>,
        text: &str,
    ) -> Result<RootRun, EngineError> {
        self.send_from(conversation, text, None).await
    }

    /// [`Engine::send`], recording `author` (`platform:user id`) as the message's author in recall
    /// memory (`None`: `user`).
    pub async fn send_from(
        &self,
        conversation: Option<&str>,
        text: &str,
        author: Option<&str>,
    ) -> Result<RootRun, EngineError> {
        let rt = &self.rt();
        let root_agent = rt.org().root().to_string();
        // The conversation row is written with the root task (one transaction).
        let (conversation, mut history) = match conversation {
            Some(id) => {
                let history = match rt.store().last_root_task(id).await? {
                    Some(prev) if !prev.state.is_terminal() => {
                        return Err(StoreError::Busy {
                            conversation: id.to_string(),
                            task: prev.id,
                        }
                        .into());
                    }
                    Some(prev) => {
                        let mut messages = rt.store().messages(prev.id).await?;
                        close_history(&mut messages, &prev);
                        messages
                    }
                    None => Vec::new(),
                };
                (id.to_string(), history)
            }
            None => (new_conversation_id(), Vec::new()),
        };
        // The message as the human wrote it: memory (recall) is added by the session, per request,
        // so `send` never waits on memory and the stored history holds only what was said.
        history.push(Message::user(text));
        let task = rt
            .store()
            .create_task(&NewTask {
                parent_id: None,
                conversation_id: &conversation,
                agent: &root_agent,
                depth: 0,
                tool_use_id: None,
                tool_index: 0,
                input: text,
                messages: &history,
                author,
                // The inbound message's span (the gateway sends from inside it), so the tree joins
                // the trace of the request that started it.
                trace: opc_telemetry::carry::current().as_deref(),
            })
            .await?;
        rt.events().publish(Event::TaskCreated {
            task,
            parent: None,
            root: task,
            conversation: conversation.clone(),
            agent: root_agent,
        });
        let done = self.start_root(task).await;
        Ok(RootRun {
            conversation,
            task,
            done,
        })
    }

    /// Run a new root: here, in the background; in a cluster, it is queued in the database, and
    /// this node claims it at once when it has room (another node with room may be quicker; with
    /// none here, any node with room claims it).
    async fn start_root(&self, task: TaskId) -> watch::Receiver<Option<Outcome>> {
        let Some(cluster) = &self.cluster else {
            return self.spawn_root(task);
        };
        let done = self.waiter(task);
        if !self.serves() || crate::node::NodeHost::room(self) > 0 {
            let _no_heartbeat = self.runs.claiming.clone().lock_owned().await;
            match cluster.claim_root(task).await {
                Ok(Some(claimed)) => self.run_leased(claimed),
                // Another node claimed it first.
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(root = task, error = %e, "cannot claim a new root here; it stays queued for any node")
                }
            }
        }
        done
    }

    /// The outcome channel of root `task` for a caller on this node (cluster mode).
    fn waiter(&self, task: TaskId) -> watch::Receiver<Option<Outcome>> {
        let mut waiters = self.runs.waiters();
        match waiters.get(&task) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(None);
                waiters.insert(task, tx);
                rx
            }
        }
    }

    /// Answer this node's waiters of root `task` if the database says it ended (cluster mode).
    async fn resolve(&self, task: TaskId) {
        if !self.runs.waiters().contains_key(&task) {
            return;
        }
        let record = match self.store.task(task).await {
            Ok(record) if record.state.is_terminal() => record,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(root = task, error = %e, "cannot read a root's outcome; retrying on the next tick");
                return;
            }
        };
        let outcome = outcome_of(&*self.store, &record)
            .await
            .unwrap_or_else(|e| failed_outcome(task, &e));
        if let Some(tx) = self.runs.waiters().remove(&task) {
            let _ = tx.send(Some(outcome));
        }
    }

    /// Run a tree this node holds the lease of (cluster mode), once: its sessions write through a
    /// store fenced by the lease's token. When it ends, the database says how: ended → the lease
    /// is released and the waiters answered; still live (a write failed: the database was
    /// unreachable, or the lease moved on) → the lease is handed back, and whichever node claims
    /// the tree resumes it from its checkpoint.
    fn run_leased(&self, claim: Claimed) {
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        let lost = CancellationToken::new();
        {
            let mut leased = self.runs.leased();
            if leased.contains_key(&claim.root) {
                return;
            }
            leased.insert(
                claim.root,
                Leased {
                    token: claim.token,
                    lost: lost.clone(),
                },
            );
        }
        let task = claim.root;
        let rt = Arc::new(self.rt().with_store(cluster.fenced(task, claim.token)));
        let engine = self.clone();
        let shutdown = self.runs.shutdown.clone();
        self.runs.tracker.spawn(async move {
            let run = async {
                let _scope = RootScope::open(&rt, task).await;
                crate::session::run_root(rt.clone(), task, claim.takeover).await;
            };
            let finished = tokio::select! {
                _ = run => true,
                // Shutdown leaves the lease to `leave`, which hands every tree over at once.
                _ = shutdown.cancelled() => false,
                // Another node holds the tree now.
                _ = lost.cancelled() => false,
            };
            engine.runs.leased().remove(&task);
            if !finished {
                return;
            }
            let ended = matches!(engine.store.task(task).await, Ok(r) if r.state.is_terminal());
            if let Err(e) = cluster.release(task, claim.token).await {
                tracing::warn!(root = task, error = %e, "cannot release a tree's lease; it expires on its own");
            }
            if ended {
                engine.resolve(task).await;
                if let Some(memory) = engine.runs.memory.get() {
                    memory.wake();
                }
            }
        });
    }

    /// Whether this node claims work it did not queue ([`EngineOptions::resume_suspended`]: `opc
    /// run` does, a one-off `opc chat` runs only its own roots).
    fn serves(&self) -> bool {
        self.rt().options().resume_suspended
    }

    /// Start (or resume) the session of root task `task` in the background, once.
    fn spawn_root(&self, task: TaskId) -> watch::Receiver<Option<Outcome>> {
        let mut roots = self.runs.roots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = roots.get(&task) {
            return done.clone();
        }
        let (tx, rx) = watch::channel(None);
        roots.insert(task, rx.clone());
        drop(roots);
        let rt = self.rt();
        let runs = self.runs.clone();
        let shutdown = runs.shutdown.clone();
        self.runs.tracker.spawn(async move {
            let run = async {
                {
                    // The conversation's per-root state (the privacy vault) lives while the tree
                    // runs here, and is dropped however the run ends (finished, suspended, shut
                    // down), before the outcome is sent.
                    let _scope = RootScope::open(&rt, task).await;
                    crate::session::run_root(rt.clone(), task, false).await;
                }
                match rt.store().task(task).await {
                    Ok(record) => outcome_of(&**rt.store(), &record)
                        .await
                        .unwrap_or_else(|e| failed_outcome(task, &e)),
                    Err(e) => failed_outcome(task, &EngineError::Store(e)),
                }
            };
            let outcome = tokio::select! {
                outcome = run => Some(outcome),
                // Shutdown leaves the tree in the database as it is (suspended or interrupted).
                _ = shutdown.cancelled() => None,
            };
            if let Some(outcome) = outcome {
                let completed = outcome.state == TaskState::Completed;
                let _ = tx.send(Some(outcome));
                // The answer is out; the root's extraction jobs (committed with its completion)
                // can run now.
                if completed && let Some(memory) = runs.memory.get() {
                    memory.wake();
                }
            }
            runs.roots
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&task);
        });
        rx
    }

    /// Wait for root task `task`: its outcome if it is running here, else what the database says.
    pub async fn wait_root(&self, task: TaskId) -> Result<Outcome, EngineError> {
        if self.cluster.is_some() {
            let record = self.store.task(task).await?;
            return Ok(self
                .root_outcome(task)
                .await?
                .unwrap_or_else(|| lost(task, &record.conversation_id)));
        }
        let running = self
            .runs
            .roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&task)
            .cloned();
        let record = self.store.task(task).await?;
        match running {
            Some(mut done) => Ok(wait_outcome(&mut done)
                .await
                .unwrap_or_else(|| lost(task, &record.conversation_id))),
            None => outcome_of(&*self.store, &record).await,
        }
    }

    /// [`Engine::wait_root`], or `None` when the engine stopped before the root ended (see
    /// [`RootRun::outcome`]).
    pub async fn root_outcome(&self, task: TaskId) -> Result<Option<Outcome>, EngineError> {
        if self.cluster.is_some() {
            // Whichever node runs it: registered first, so an end landing meanwhile is not missed.
            let mut done = self.waiter(task);
            self.store.task(task).await?;
            self.resolve(task).await;
            return Ok(wait_outcome(&mut done).await);
        }
        let running = self
            .runs
            .roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&task)
            .cloned();
        let record = self.store.task(task).await?;
        match running {
            Some(mut done) => Ok(wait_outcome(&mut done).await),
            None => outcome_of(&*self.store, &record).await.map(Some),
        }
    }

    /// Cancel a task and its whole subtree. Returns the ids cancelled. Approvals pending in the subtree
    /// are rejected, and each rejection is published (so approval cards can be updated).
    pub async fn cancel(&self, task: TaskId) -> Result<Vec<TaskId>, EngineError> {
        let pending = self.store.pending_approvals().await?;
        let cancelled = self
            .store
            .cancel_subtree(task, "cancelled by a human")
            .await?;
        for approval in pending.iter().filter(|a| cancelled.contains(&a.task_id)) {
            self.events.publish(Event::ApprovalResolved {
                approval: approval.id,
                task: approval.task_id,
                decision: "reject".into(),
                by: SystemDecider::Cancelled.as_str().into(),
            });
        }
        self.rt().tokens().cancel(&cancelled);
        Ok(cancelled)
    }

    /// Decide a pending approval. Only one decision counts: later ones get
    /// [`Decided::AlreadyDecided`]. A decision for a tree suspended by an earlier process resumes it here.
    pub async fn decide(
        &self,
        approval: i64,
        decision: &str,
        by: &str,
    ) -> Result<Decided, EngineError> {
        let rt = &self.rt();
        let Some(current) = rt.store().approval(approval).await? else {
            return Err(EngineError::NoApproval(approval));
        };
        if current.option(decision).is_none() {
            return Err(EngineError::BadDecision {
                approval,
                given: decision.to_string(),
                options: current.labels(),
            });
        }
        let decided = rt.store().decide(approval, decision, by).await?;
        if let Decided::Recorded(a) | Decided::Expired(a) = &decided {
            self.resolved(a);
        }
        Ok(decided)
    }

    fn resolved(&self, approval: &Approval) {
        let rt = &self.rt();
        rt.events().publish(Event::ApprovalResolved {
            approval: approval.id,
            task: approval.task_id,
            decision: approval.decision.clone().unwrap_or_default(),
            by: approval.decided_by.clone().unwrap_or_default(),
        });
        // A tree suspended with no session waiting here resumes: in a cluster its owner is woken by
        // the database (or, if it has none, the next node with room claims it).
        if !rt.approvals().wake(approval.id) && self.cluster.is_none() {
            self.spawn_root(approval.root_id);
        }
    }

    /// Approvals waiting for a human.
    pub async fn pending_approvals(&self) -> Result<Vec<Approval>, EngineError> {
        Ok(self.store.pending_approvals().await?)
    }

    /// Stop: running trees stay in the database as they are (a restart marks running ones interrupted
    /// and resumes suspended ones). Waits for the background runs to drop, and for the memory worker:
    /// a memory job in progress gets a short grace (3 s) to finish its call and apply its batch, else
    /// it stays queued for the next start.
    pub async fn shutdown(&self) {
        self.runs.shutdown.cancel();
        self.runs.tracker.close();
        self.runs.tracker.wait().await;
        // A cluster node hands its trees over at once rather than after a lease.
        if let Some(cluster) = &self.cluster
            && let Err(e) = cluster.leave().await
        {
            tracing::warn!(error = %e, "cannot hand this node's trees over; they move when their leases expire");
        }
    }
}

#[async_trait::async_trait]
impl crate::node::NodeHost for Engine {
    fn room(&self) -> usize {
        let total = self
            .rt()
            .config()
            .framework
            .execution
            .max_concurrent_agents
            .get() as usize;
        // A tree suspended on a human holds no slot: it does not count against the room.
        let busy = self
            .runs
            .leased()
            .len()
            .saturating_sub(self.rt().approvals().len());
        total.saturating_sub(busy)
    }

    fn load(&self) -> (u32, Vec<(TaskId, i64)>) {
        let rt = self.rt();
        let total = rt.config().framework.execution.max_concurrent_agents.get();
        let free = u32::try_from(rt.agent_slots().available_permits()).unwrap_or(u32::MAX);
        let held = self
            .runs
            .leased()
            .iter()
            .map(|(root, l)| (*root, l.token))
            .collect();
        (total.saturating_sub(free), held)
    }

    fn run(&self, claim: Claimed) {
        self.run_leased(claim);
    }

    fn lost(&self, root: TaskId) {
        if let Some(leased) = self.runs.leased().get(&root) {
            leased.lost.cancel();
        }
    }

    async fn ended(&self, root: TaskId) {
        self.resolve(root).await;
    }

    async fn catch_up(&self) {
        let waiting: Vec<TaskId> = self.runs.waiters().keys().copied().collect();
        for root in &waiting {
            self.resolve(*root).await;
        }
        self.rt().approvals().wake_all();
        // A node that claims only its own roots retries those still queued (their first claim
        // failed, or their node stopped).
        if !self.serves()
            && let Some(cluster) = &self.cluster
        {
            for root in waiting {
                let _no_heartbeat = self.runs.claiming.clone().lock_owned().await;
                if self.runs.waiters().contains_key(&root)
                    && !self.runs.leased().contains_key(&root)
                    && let Ok(Some(claimed)) = cluster.claim_root(root).await
                {
                    self.run_leased(claimed);
                }
            }
        }
    }

    async fn claims(&self) -> tokio::sync::OwnedMutexGuard<()> {
        self.runs.claiming.clone().lock_owned().await
    }

    fn decided(&self, approval: i64) {
        self.rt().approvals().wake(approval);
    }

    fn cancelled(&self, task: TaskId) {
        self.rt().tokens().cancel(&[task]);
    }

    fn serves(&self) -> bool {
        Engine::serves(self)
    }
}

/// What [`Engine::reload`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reloaded {
    /// The providers and the privacy layer were built again (their settings changed).
    pub call_stack_rebuilt: bool,
    /// Agents the new config removed that still have live tasks, with how many: those tasks finish
    /// under the config they started with.
    pub removed_live: Vec<(String, usize)>,
}

/// What every state of one engine shares.
struct Shared {
    store: Arc<dyn Store>,
    events: EventBus,
    memory: Arc<dyn MemoryHooks>,
    options: EngineOptions,
    approvals: Arc<crate::state::ApprovalWaiters>,
    tokens: Arc<crate::state::TaskTokens>,
    /// The previous state's slots, to keep (`None`: new ones for the config's limit).
    agent_slots: Option<Arc<Semaphore>>,
}

/// The state for `config`: prompts read, every agent's model resolved.
fn build_state(
    config: Arc<Config>,
    org: Arc<OrgTree>,
    base_dir: &Path,
    llm: CallStack,
    shared: Shared,
) -> Result<EngineState, EngineError> {
    let memory = shared.memory;
    let mut tools = crate::tools::ToolRegistry::standard(
        memory.blocks(),
        memory.recall_store(),
        memory.fact_store(),
        shared.options.sandbox.clone(),
    );
    // Graph memory is a framework switch: `graph_search` exists in this state only when it is on.
    if config.framework.memory.graph_enabled
        && let (Some(blocks), Some(facts)) = (memory.blocks(), memory.fact_store())
    {
        tools.add_graph(blocks, facts);
    }
    let context = ContextBuilder::new(&config, &org, base_dir, memory)?;
    let resolve = |agent: &str, model: &str| {
        config
            .framework
            .resolve_model(model)
            .map(|(p, m)| (p.to_string(), m.to_string()))
            .map_err(|e| EngineError::Model {
                agent: agent.to_string(),
                model: model.to_string(),
                message: e.to_string(),
            })
    };
    let mut models = HashMap::new();
    for (id, agent) in &config.agents {
        let model = agent
            .model
            .as_deref()
            .unwrap_or(&config.framework.default_model);
        models.insert(id.clone(), resolve(id, model)?);
    }
    let fast_model = resolve("fastModel", config.framework.fast_model())?;
    let agent_slots = shared.agent_slots.unwrap_or_else(|| {
        Arc::new(Semaphore::new(
            config.framework.execution.max_concurrent_agents.get() as usize,
        ))
    });
    Ok(EngineState::new(StateParts {
        agent_slots,
        config,
        org,
        llm: llm.heard_by(Arc::new(shared.events.clone())),
        context,
        store: shared.store,
        events: shared.events,
        options: shared.options,
        models,
        fast_model,
        approvals: shared.approvals,
        tokens: shared.tokens,
        tools,
    }))
}

/// The configured providers, each in the standard provider stack (keys read with `env`), under the
/// shared stack with the privacy layer when `framework.privacy.enabled`.
fn call_stack(
    config: &Config,
    options: &EngineOptions,
    env: impl Fn(&str) -> Option<String>,
    ner: NerSlot,
) -> Result<CallStack, EngineError> {
    let providers = Providers::build(&config.framework.providers, env, |id, p| {
        standard_stack(StackOptions {
            provider: id.to_string(),
            attempt_timeout: options.attempt_timeout,
            retry: options.retry,
            max_concurrent: p.max_concurrent_requests.map(|n| n.get() as usize),
            requests_per_minute: p.requests_per_minute,
            prices: p.models.clone(),
            shared: options.cluster.as_ref().map(|c| c.limits()),
        })
    });
    let seam = privacy_seam(config, ner)?;
    Ok(CallStack::with_privacy(providers, seam))
}

/// A root's per-conversation state in the call stack's registries, open until dropped.
struct RootScope {
    rt: Arc<EngineState>,
    root: TaskId,
}

impl RootScope {
    async fn open(rt: &Arc<EngineState>, root: TaskId) -> RootScope {
        // A root that cannot be read fails in its session right after; its state is then unused.
        let conversation = rt
            .store()
            .task(root)
            .await
            .map(|record| record.conversation_id)
            .unwrap_or_default();
        rt.llm().root_started(root, &conversation);
        RootScope {
            rt: rt.clone(),
            root,
        }
    }
}

impl Drop for RootScope {
    fn drop(&mut self) {
        self.rt.llm().root_ended(self.root);
    }
}

/// The outcome of a root that could not be read back.
fn failed_outcome(task: TaskId, error: &EngineError) -> Outcome {
    Outcome {
        task,
        conversation: String::new(),
        state: TaskState::Failed,
        text: error.to_string(),
        escalation: None,
        tokens_in: 0,
        tokens_out: 0,
        cost_usd: 0.0,
        unknown_usage_calls: 0,
    }
}

/// A root task's outcome from its record (and its tree's totals).
async fn outcome_of(store: &dyn Store, record: &TaskRecord) -> Result<Outcome, EngineError> {
    let totals = store.totals(record.root_id).await?;
    let escalation: Option<Escalation> = record
        .escalation
        .as_deref()
        .and_then(|json| serde_json::from_str(json).ok());
    let text = match (record.state, &escalation) {
        (TaskState::Completed, _) => record.output.clone().unwrap_or_default(),
        (TaskState::Escalated, Some(e)) => render_escalation(&record.agent, e),
        _ => record
            .error
            .clone()
            .unwrap_or_else(|| format!("task is {}", record.state.as_str())),
    };
    Ok(Outcome {
        task: record.id,
        conversation: record.conversation_id.clone(),
        state: record.state,
        text,
        escalation,
        tokens_in: totals.tokens_in,
        tokens_out: totals.tokens_out,
        cost_usd: totals.cost_usd,
        unknown_usage_calls: totals.unknown_usage_calls,
    })
}

/// Make a finished root's history safe to continue: every tool call answered, ending with the model's
/// turn, so the next user message alternates correctly in both wire formats.
fn close_history(messages: &mut Vec<Message>, prev: &TaskRecord) {
    let note = match prev.state {
        TaskState::Completed => return,
        TaskState::Escalated => "(escalated to the human; see the escalation above)".to_string(),
        _ => format!(
            "(this request ended without an answer: {})",
            prev.error.as_deref().unwrap_or("it did not finish")
        ),
    };
    if let Some(last) = messages.last()
        && last.role == Role::Assistant
    {
        let pending: Vec<Content> = last
            .tool_uses()
            .map(|(id, _, _)| Content::ToolResult {
                tool_use_id: id.to_string(),
                content: "not run: the request ended".into(),
                is_error: true,
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        messages.push(Message {
            role: Role::User,
            content: pending,
        });
    }
    messages.push(Message {
        role: Role::Assistant,
        content: vec![Content::text(note)],
    });
}

fn new_conversation_id() -> String {
    format!("c-{:016x}", fastrand::u64(..))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::context::BlockMemory;
    use opc_memory::blocks::BlockStore;

    /// `ceo → (a, b)`, `a` sharing with `b`; after the reload `a` shares with nobody and `c` (with a
    /// block, and a prompt file) joins.
    fn org(dir: &Path, after: bool) -> Loaded {
        let (share, c, children) = if after {
            (
                "",
                "  c: { role: C, level: 1, parent: ceo, prompt: file:c.md, memory: { recall: false, blocks: [{ label: cnotes, description: n, value: C-NOTES }] } }\n",
                "[a, b, c]",
            )
        } else {
            ("shareWith: [b], ", "", "[a, b]")
        };
        let text = format!(
            "framework:\n  defaultProvider: p\n  defaultModel: m\n  providers: {{ p: {{ kind: anthropic, apiKeyEnv: OPC_NO_SUCH_KEY, models: {{ m: {{ input: 1, output: 1 }} }} }} }}\n  privacy: {{ enabled: false }}\n  memory: {{ consolidation: {{ enabled: false }} }}\nagents:\n  ceo: {{ role: CEO, level: 0, children: {children}, memory: {{ recall: false }} }}\n  a: {{ role: A, level: 1, parent: ceo, memory: {{ recall: false, {share}blocks: [{{ label: notes, description: n, value: A-NOTES }}] }} }}\n  b: {{ role: B, level: 1, parent: ceo, memory: {{ recall: false }} }}\n{c}"
        );
        std::fs::write(dir.join("c.md"), "You are C.").unwrap();
        let path = dir.join(if after { "after.yaml" } else { "before.yaml" });
        std::fs::write(&path, text).unwrap();
        opc_hierarchy::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// An engine with block memory on a database in `dir`, and the block store it started with (the
    /// store a tree started now would hold).
    async fn engine(dir: &Path) -> (Engine, BlockStore) {
        let loaded = org(dir, false);
        let db = dir.join("opc.db");
        let memory = BlockMemory::open(&db, &loaded.config, Arc::new(loaded.org.clone())).unwrap();
        let blocks = memory.blocks().unwrap();
        let engine = Engine::from_config(
            &loaded,
            Arc::new(crate::store::SqliteStore::open(&db).unwrap()),
            Arc::new(memory),
            EngineOptions::default(),
            |_| None,
        )
        .await
        .unwrap();
        (engine, blocks)
    }

    /// The block store of the state new roots start with.
    fn current_blocks(engine: &Engine) -> BlockStore {
        engine.rt().context().memory().blocks().unwrap()
    }

    #[tokio::test]
    async fn a_reload_gives_new_roots_the_new_memory_and_revokes_for_running_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, started_before) = engine(dir.path()).await;
        assert_eq!(started_before.readable("b"), ["b", "a"]);

        engine
            .reload(&org(dir.path(), true), |_| None)
            .await
            .unwrap();
        let now = current_blocks(&engine);
        // New roots: the added agent has its block, its manager reads it, the tools see it too.
        assert_eq!(now.read("c", "cnotes").unwrap().value, "C-NOTES");
        assert_eq!(now.read_of("ceo", "c", "cnotes").unwrap().value, "C-NOTES");
        assert_eq!(now.readable("b"), ["b"]);
        // A root started before the reload: the revocation reaches it too.
        assert!(started_before.read_of("b", "a", "notes").is_err());
        assert_eq!(started_before.readable("b"), ["b"]);
        engine.shutdown().await;
    }

    #[tokio::test]
    async fn a_failed_reload_keeps_the_old_memory_and_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, started_before) = engine(dir.path()).await;
        let after = org(dir.path(), true);

        // A step before memory's commit fails (the prompt file went away after validation).
        std::fs::remove_file(dir.path().join("c.md")).unwrap();
        let err = engine.reload(&after, |_| None).await.unwrap_err();
        assert!(matches!(err, EngineError::Prompt(_)), "{err}");
        // Memory's own commit fails (a trigger stands in for a full disk).
        std::fs::write(dir.path().join("c.md"), "You are C.").unwrap();
        rusqlite::Connection::open(dir.path().join("opc.db"))
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON memory_blocks WHEN NEW.label = 'cnotes' \
                 BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
            )
            .unwrap();
        let err = engine.reload(&after, |_| None).await.unwrap_err();
        assert!(
            matches!(&err, EngineError::Memory(_)) && err.to_string().contains("disk full"),
            "{err}"
        );

        // Either way: the old org, the old permissions, nothing seeded.
        assert!(!engine.config().agents.contains_key("c"));
        for store in [&started_before, &current_blocks(&engine)] {
            assert_eq!(store.readable("b"), ["b", "a"]);
            assert_eq!(store.read_of("b", "a", "notes").unwrap().value, "A-NOTES");
        }
        assert!(
            !started_before
                .all()
                .unwrap()
                .iter()
                .any(|b| b.label == "cnotes")
        );
        engine.shutdown().await;
    }
}
