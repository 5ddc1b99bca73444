//! [`EngineState`]: what the running sessions share — the config and org, the call stack, the context
//! builder, the store, the event bus, the agent slots, the tool registry, and two small registries (the
//! cancellation tokens of running tasks and the in-process waiters of pending approvals).
//!
//! Why a module of its own: the engine (public API), the sessions (the tool-use loop) and the approval
//! flow all need this state, and none of them owns it. Its fields are private: callers ask for what
//! they need (an accessor, the model of an agent, an agent slot, a registration), so the state can
//! change shape (a store behind a trait, a second backend) without touching its users. Each registry
//! exposes only what its users do (register with a guard that unregisters on drop; cancel or wake by
//! id), never its map.
//!
//! An `EngineState` is immutable: a config reload builds a new one (sharing the store, the event bus,
//! the registries and, when their settings are unchanged, the call stack and the agent slots) and the
//! engine hands it to roots started from then on. A tree keeps the state its root started with, so
//! trees in flight finish with the config they started with.
//!
//! Named `EngineState`, not `Runtime`, so it is never confused with tokio's runtime.
//!
//! Dependency direction: this module uses `context`, `events`, `llm`, `store` and `tools` (the registry
//! it holds); `engine`, `session` and `approval` use it; none of the modules it uses uses it or them
//! (the tools reach the session through their own `ToolHost` trait). Checked, with the rest of the
//! crate's graph, by `cargo test -p opc-tests --test module_graph`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opc_hierarchy::{Config, OrgTree};
use tokio::sync::{Semaphore, SemaphorePermit, watch};
use tokio_util::sync::CancellationToken;

use crate::context::ContextBuilder;
use crate::events::EventBus;
use crate::llm::layers::RetryPolicy;
use crate::llm::stack::CallStack;
use crate::store::{Store, TaskId};
use crate::tools::ToolRegistry;

/// Shared state of the sessions of one engine (one config). Built by the engine from [`StateParts`].
pub(crate) struct EngineState {
    config: Arc<Config>,
    org: Arc<OrgTree>,
    /// The whole call stack (shared layers, router, provider stacks).
    llm: CallStack,
    context: ContextBuilder,
    store: Arc<dyn Store>,
    events: EventBus,
    /// `maxConcurrentAgents`: held while an agent is thinking (an LLM call), never while it waits for
    /// children or a human — otherwise a deep tree under load would deadlock with every slot held by a
    /// waiting parent. Shared with the state a reload replaces while the limit is unchanged.
    agent_slots: Arc<Semaphore>,
    options: EngineOptions,
    /// `(provider, model)` per agent, resolved once.
    models: HashMap<String, (String, String)>,
    /// `(provider, model)` of `fastModel`.
    fast_model: (String, String),
    /// In-process waiters for pending approvals.
    approvals: Arc<ApprovalWaiters>,
    /// Cancellation tokens of running tasks.
    tokens: Arc<TaskTokens>,
    /// The tools sessions offer and run.
    tools: ToolRegistry,
}

/// Everything an [`EngineState`] is made of, resolved by the engine (prompts read, models resolved).
pub(crate) struct StateParts {
    pub(crate) config: Arc<Config>,
    pub(crate) org: Arc<OrgTree>,
    pub(crate) llm: CallStack,
    pub(crate) context: ContextBuilder,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) events: EventBus,
    pub(crate) agent_slots: Arc<Semaphore>,
    pub(crate) options: EngineOptions,
    pub(crate) models: HashMap<String, (String, String)>,
    pub(crate) fast_model: (String, String),
    pub(crate) approvals: Arc<ApprovalWaiters>,
    pub(crate) tokens: Arc<TaskTokens>,
    pub(crate) tools: ToolRegistry,
}

impl EngineState {
    /// The state made of `parts`.
    pub(crate) fn new(parts: StateParts) -> EngineState {
        let StateParts {
            config,
            org,
            llm,
            context,
            store,
            events,
            agent_slots,
            options,
            models,
            fast_model,
            approvals,
            tokens,
            tools,
        } = parts;
        EngineState {
            config,
            org,
            llm,
            context,
            store,
            events,
            agent_slots,
            options,
            models,
            fast_model,
            approvals,
            tokens,
            tools,
        }
    }

    /// This state with `store` in place of the shared one: the state of one leased tree, whose
    /// sessions write through a fenced store (see [`crate::store::Cluster::fenced`]). Everything else
    /// (registries, slots, the call stack) stays shared.
    pub(crate) fn with_store(&self, store: Arc<dyn Store>) -> EngineState {
        EngineState {
            config: self.config.clone(),
            org: self.org.clone(),
            llm: self.llm.clone(),
            context: self.context.clone(),
            store,
            events: self.events.clone(),
            agent_slots: self.agent_slots.clone(),
            options: self.options.clone(),
            models: self.models.clone(),
            fast_model: self.fast_model.clone(),
            approvals: self.approvals.clone(),
            tokens: self.tokens.clone(),
            tools: self.tools.clone(),
        }
    }

    /// The config this state was built from.
    pub(crate) fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The org of that config.
    pub(crate) fn org(&self) -> &Arc<OrgTree> {
        &self.org
    }

    /// The call stack every model call goes through.
    pub(crate) fn llm(&self) -> &CallStack {
        &self.llm
    }

    /// System prompts and the memory hooks.
    pub(crate) fn context(&self) -> &ContextBuilder {
        &self.context
    }

    /// The database (the same for every state of one engine).
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The event bus (the same for every state of one engine).
    pub(crate) fn events(&self) -> &EventBus {
        &self.events
    }

    /// The engine's settings outside the config.
    pub(crate) fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The tools sessions offer and run.
    pub(crate) fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// `(provider, model)` an agent thinks with (`fastModel` for an agent this config lacks, such as
    /// one a reload removed while its task still runs).
    pub(crate) fn model_of(&self, agent: &str) -> (String, String) {
        self.models
            .get(agent)
            .cloned()
            .unwrap_or_else(|| self.fast_model.clone())
    }

    /// `(provider, model)` of `fastModel` (summaries).
    pub(crate) fn fast_model(&self) -> (String, String) {
        self.fast_model.clone()
    }

    /// Wait for an agent slot (`maxConcurrentAgents`), held until the permit drops. `None` only if
    /// the semaphore were closed, which it never is.
    pub(crate) async fn agent_slot(&self) -> Option<AgentSlot<'_>> {
        let permit = self.agent_slots.acquire().await.ok()?;
        opc_telemetry::metrics::instruments()
            .slots_in_use
            .add(1, &[]);
        Some(AgentSlot { _permit: permit })
    }

    /// The agent slots, for the state a reload builds while `maxConcurrentAgents` is unchanged.
    pub(crate) fn agent_slots(&self) -> &Arc<Semaphore> {
        &self.agent_slots
    }

    /// The in-process waiters of pending approvals (shared by every state of one engine).
    pub(crate) fn approvals(&self) -> &Arc<ApprovalWaiters> {
        &self.approvals
    }

    /// The cancellation tokens of running tasks (shared by every state of one engine).
    pub(crate) fn tokens(&self) -> &Arc<TaskTokens> {
        &self.tokens
    }

    /// The delegation path from the root to `agent` (`["ceo", "vp-ops", "support-agent"]`).
    pub(crate) fn path_of(&self, agent: &str) -> Vec<String> {
        let mut path: Vec<String> = self
            .org
            .ancestors(agent)
            .into_iter()
            .rev()
            .map(str::to_string)
            .collect();
        path.push(agent.to_string());
        path
    }
}

/// The cancellation tokens of running tasks, by task id, so [`crate::Engine::cancel`] reaches a task
/// that runs in this process. Only registration: a child's token is always derived from its parent's
/// token, handed down by the parent's session, never looked up here.
#[derive(Default)]
pub(crate) struct TaskTokens(Mutex<HashMap<TaskId, CancellationToken>>);

impl TaskTokens {
    /// Register a running task's token until the guard drops (however its run ends).
    pub(crate) fn register(self: &Arc<Self>, task: TaskId, token: CancellationToken) -> TokenGuard {
        self.lock().insert(task, token);
        TokenGuard {
            tokens: self.clone(),
            task,
        }
    }

    /// Cancel the tokens of those of `tasks` that run here.
    pub(crate) fn cancel(&self, tasks: &[TaskId]) {
        let tokens = self.lock();
        for id in tasks {
            if let Some(token) = tokens.get(id) {
                token.cancel();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, CancellationToken>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Unregisters a task's cancellation token when its run ends or is dropped.
pub(crate) struct TokenGuard {
    tokens: Arc<TaskTokens>,
    task: TaskId,
}

impl Drop for TokenGuard {
    fn drop(&mut self) {
        self.tokens.lock().remove(&self.task);
    }
}

/// Sessions waiting in this process for a human's decision, by approval id.
#[derive(Default)]
pub(crate) struct ApprovalWaiters(Mutex<HashMap<i64, watch::Sender<bool>>>);

impl ApprovalWaiters {
    /// Wait for approval `id`: the receiver changes when [`ApprovalWaiters::wake`] is called, until
    /// the guard drops.
    pub(crate) fn register(self: &Arc<Self>, id: i64) -> (watch::Receiver<bool>, WaiterGuard) {
        let (tx, rx) = watch::channel(false);
        self.lock().insert(id, tx);
        (
            rx,
            WaiterGuard {
                waiters: self.clone(),
                approval: id,
            },
        )
    }

    /// Wake the session waiting for approval `id`. `false` when none waits here (e.g. the process
    /// restarted since it was requested).
    pub(crate) fn wake(&self, id: i64) -> bool {
        match self.lock().get(&id) {
            Some(waiter) => {
                let _ = waiter.send(true);
                true
            }
            None => false,
        }
    }

    /// How many sessions wait here for a human.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Wake every session waiting here, so each re-reads its approval (a cluster node that may
    /// have missed a decision taken on another node).
    pub(crate) fn wake_all(&self) {
        for waiter in self.lock().values() {
            let _ = waiter.send(true);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, watch::Sender<bool>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes an approval's waiter however the wait ends.
pub(crate) struct WaiterGuard {
    waiters: Arc<ApprovalWaiters>,
    approval: i64,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        self.waiters.lock().remove(&self.approval);
    }
}

/// Engine settings that are not in `opc.config.yaml`.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Stream every LLM call (tokens reach the event bus as they are generated).
    pub streaming: bool,
    /// LLM turns one session may take before it fails with a clear error.
    pub max_turns: u32,
    /// `max_tokens` for each call.
    pub max_tokens: u32,
    /// Time limit for one LLM attempt.
    pub attempt_timeout: std::time::Duration,
    /// Retry policy for LLM calls.
    pub retry: RetryPolicy,
    /// Re-enter trees suspended on approvals at startup (the gateway does; a one-off `opc chat` leaves
    /// them for the gateway instead of running other conversations' work in the background).
    pub resume_suspended: bool,
    /// What runs `Bash` commands (`opc` gives every engine one, over its own executable). `None`:
    /// the engine offers no `Bash` tool.
    pub sandbox: Option<std::sync::Arc<opc_sandbox::Sandbox>>,
    /// The cluster this engine is a node of (`storage: postgres` under `opc run`): roots are queued
    /// in the database and run by whichever node claims them, under a lease (see
    /// [`crate::store::cluster`]). `None`: this process owns its database alone (SQLite, or a one-off
    /// command), and runs the roots it starts.
    pub cluster: Option<std::sync::Arc<dyn crate::store::Cluster>>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            streaming: true,
            max_turns: 25,
            max_tokens: 4096,
            attempt_timeout: std::time::Duration::from_secs(300),
            retry: RetryPolicy::default(),
            resume_suspended: true,
            sandbox: None,
            cluster: None,
        }
    }
}

/// A held agent slot; counted in `opc.agent.slots.in_use` while it lives.
pub(crate) struct AgentSlot<'a> {
    _permit: SemaphorePermit<'a>,
}

impl Drop for AgentSlot<'_> {
    fn drop(&mut self) {
        opc_telemetry::metrics::instruments()
            .slots_in_use
            .add(-1, &[]);
    }
}
