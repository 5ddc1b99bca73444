//! # opc-agents — the agents engine
//!
//! Role: the LLM call stack (timeout, retry, rate limit, privacy, tracing, cost as composable layers),
//! agent sessions and their tools, the context builder (write / select / compress / isolate), the
//! orchestrator that runs delegation down the [`opc_hierarchy::OrgTree`], the event bus and the ledger.
//!
//! Map:
//! - [`llm`]: provider-neutral request/response, the [`llm::LlmService`] / [`llm::Layer`] traits, the
//!   standard layers ([`llm::layers`]) and the two wire clients (Anthropic, OpenAI-compatible);
//! - [`engine`]: the public API ([`Engine`]): send, cancel, decide, wait;
//! - `session`: the tool-use loop, and the session's side of the tools' seam (running a child task,
//!   asking for approval); `approval`: the `request_approval` flow; `state`: `EngineState`, the state
//!   they share (private fields, read through methods);
//! - [`context`]: system prompts (core memory re-rendered every turn) and the async memory hooks;
//!   [`tools`]: the tool registry (org tools, memory tools), schemas and argument validation, and the
//!   `ToolHost` trait the tools ask the session through (tools own it; the session implements it);
//! - `memory_work`: the background memory worker (fact extraction after each completed root,
//!   sleep-time consolidation), over a durable queue, through the same call stack, never holding an
//!   agent slot;
//! - `node`: a cluster node's background work (`storage: postgres` under `opc run`): the heartbeat
//!   that renews its tree leases, and the dispatcher that claims queued or orphaned trees while the
//!   node has room; it reaches the engine only through its own `NodeHost` trait;
//! - `ending`: how a task ends ([`render_escalation`], the escalation types), a leaf;
//! - [`store`]: SQLite (tasks, ledger, approvals); [`events`]: the live event bus; [`clock`]: deadlines.
//!
//! Module dependencies point one way (an arrow is "uses"). In order:
//! `engine` → `node` (uses `store`), `engine` → `memory_work` → `session` → `approval` → `state` → `tools` → `store` → `llm` (`memory_work`
//! uses `state` and below, not `session`); beside them `context` (uses
//! `llm`), `events` (uses `store`, `llm`), and the leaves `ending`, `clock` and `llm`, each used only
//! from above. No module uses one above it: the tools reach the session only through `ToolHost`, which
//! they own. A test reads every `use crate::…` / `super::…` path and fails on a cycle, naming it:
//! `cargo test -p opc-tests --test module_graph`.
//!
//! Invariants:
//! - an agent can only delegate to its direct children, whatever the model asks;
//! - each task is an independent session that sees only its direct parent's instructions;
//! - every task state change is a database transaction;
//! - no agent code knows about retries, limits, costs or privacy: those are layers of the call stack
//!   ([`llm::stack::CallStack`]).
//!
//! Dependency direction: `opc-hierarchy` ← `opc-memory` ← `opc-agents` → `opc-privacy`.

mod approval;
pub mod clock;
pub mod context;
mod ending;
pub mod engine;
pub mod events;
pub mod llm;
mod memory_work;
#[cfg(test)]
mod memory_work_tests;
mod node;
mod session;
mod spans;
mod state;
pub mod store;
pub mod tools;

pub use ending::render_escalation;
pub use engine::{Engine, EngineError, EngineOptions, Outcome, Reloaded, RootRun};
pub use events::{Event, EventBus};
pub use store::{PgStore, SqliteStore, Store, TaskId, TaskState};
