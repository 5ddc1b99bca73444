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
//! - `session`: the tool-use loop and the delegation tools; `approval`: `request_approval`;
//!   `runtime`: the state they share (engine → session → approval → runtime, no cycle);
//! - [`context`]: system prompts (core memory re-rendered every turn) and the async memory hooks;
//!   [`tools`]: the tool registry (org tools, memory tools), schemas and argument validation;
//! - [`store`]: SQLite (tasks, ledger, approvals); [`events`]: the live event bus; [`clock`]: deadlines.
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
pub mod engine;
pub mod events;
pub mod llm;
mod runtime;
mod session;
pub mod store;
pub mod tools;

pub use engine::{Engine, EngineError, EngineOptions, Outcome, Reloaded, RootRun};
pub use events::{Event, EventBus};
pub use session::render_escalation;
pub use store::{SqliteStore, Store, TaskId, TaskState};
