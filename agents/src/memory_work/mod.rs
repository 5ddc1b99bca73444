//! Memory work in the background: fact extraction after each completed root, and sleep-time
//! consolidation — off the request path, through the engine's one call stack.
//!
//! Role: the engine starts one [`worker`] when its memory hooks have a facts store. It runs the
//! durable queue of `crate::store` (`memory_jobs`): an `extract` job per completed task of a root's
//! tree, queued in the transaction that completes the root, and `consolidate` jobs queued every
//! `frequency` completed roots of an agent or when it has been idle `idleAfter` after one.
//!
//! One concern per file:
//! - [`worker`]: the loop (wake, pick the next due job, run it, end or put it off), shutdown;
//! - [`extract`]: one task's exchange → one forced `record_facts` call → one batch;
//! - [`consolidate`]: one agent's current facts and editable blocks → a short tool loop;
//! - [`call`]: one memory-work model call and its ledger row (`work = 'memory'`);
//! - [`exchange`]: the text of a task's exchange as the extraction call reads it;
//! - [`cap`]: the daily token cap per agent (`consolidation.maxTokensPerDay`).
//!
//! Invariants:
//! - never on the request path: the worker holds no agent slot (the sessions' concurrency limiter),
//!   and a user's answer is published before its root's jobs can run (they are queued by the commit
//!   that completes it, and the worker is woken after the outcome is sent);
//! - every model call goes through the engine's call stack (privacy, retries, limits, tracing,
//!   cost) with [`crate::llm::Work::Memory`] in its meta, and is recorded in the ledger as memory
//!   work, never added to the task's totals;
//! - the model reads masked text and the engine gets restored text back (the privacy layer restores
//!   tool inputs in the answer), so facts are stored restored, like recall;
//! - a batch is applied in one transaction (with the exchange's "extracted" mark), so a stop at any
//!   point leaves the batch whole or absent; a job interrupted by a stop stays queued and the next
//!   start runs it (an exchange already applied is then skipped by its hash);
//! - a malformed answer writes nothing, is an event ([`crate::Event::FactsRejected`]) and is not
//!   retried; an unreachable model is retried with backoff, then given up with an event.

mod call;
mod cap;
mod consolidate;
mod exchange;
mod extract;
mod worker;

pub(crate) use worker::MemoryWorker;

use crate::state::EngineState;

/// What running one job came to.
#[derive(Debug)]
pub(crate) enum JobOutcome {
    /// It did its work (or there was none).
    Done,
    /// The model's answer was malformed: nothing written, not retried.
    Rejected(String),
    /// The model could not be reached (or a target went stale): try again later.
    Retry(String),
    /// The agent is over its daily cap: wait for the next UTC day.
    Capped {
        /// When the next day starts (Unix ms).
        until: i64,
    },
}

/// The facts namespace of an agent (recall's and the blocks' `agent/<id>`).
pub(crate) fn namespace(agent: &str) -> String {
    opc_memory::blocks::agent_namespace(agent)
}

/// `(provider, model)` of memory work: `consolidation.model`, else the fast model.
pub(crate) fn memory_model(rt: &EngineState) -> Result<(String, String), String> {
    let framework = &rt.config().framework;
    match framework.memory.consolidation.model.as_deref() {
        Some(model) => framework
            .resolve_model(model)
            .map(|(p, m)| (p.to_string(), m.to_string()))
            .map_err(|e| format!("consolidation.model `{model}`: {e}")),
        None => Ok(rt.fast_model()),
    }
}
