//! What the privacy layer tells the engine about a task's call as it happens: that personal data in
//! the request was masked (or the request routed), or that the egress guard stopped the call. The
//! engine's event bus is the listener ([`PrivacyEvents`]); agent code takes no part in it.
//!
//! Why the listener travels with the call (a task-local that the call stack sets around each call,
//! [`heard_by`]) instead of being given to the layer: the layer is built, inside the call stack,
//! before the engine and its bus exist, and one stack serves every state a reload gives the engine.
//! The listener belongs to the engine the call is made for. The privacy layer runs in the caller's
//! task (nothing between the call stack and it spawns), so it finds the listener there.
//!
//! Invariants:
//! - only a task's own calls are announced (`Work::Task`, with a task id): memory work is recorded
//!   in the ledger, not announced;
//! - each call is announced at most once, with the layer's result, before the caller sees it;
//! - an announcement carries counts by type, the mode, where a request was routed, or the type of
//!   the value the guard found, never a value.

use std::future::Future;
use std::sync::Arc;

use opc_privacy::EntityType;

use super::report::PrivacyReport;
use crate::llm::{CallMeta, LlmError, LlmResponse, Work};

/// Hears what the privacy layer did in a task's call.
pub trait PrivacyEvents: Send + Sync {
    /// Personal data was found in the request of `task`'s call for `agent` (or `summarizer`), and
    /// masked or routed as `report` says (its counts are never empty).
    fn masked(&self, task: i64, agent: &str, report: &PrivacyReport);

    /// The egress guard stopped `task`'s call for `agent`: the request still carried a real value
    /// of type `kind`. Nothing was sent.
    fn blocked(&self, task: i64, agent: &str, kind: EntityType);
}

tokio::task_local! {
    /// The listener of the call running in this task.
    static LISTENER: Arc<dyn PrivacyEvents>;
}

/// Runs `call` with `listener` hearing what the privacy layer does in it.
pub(crate) async fn heard_by<F: Future>(listener: Arc<dyn PrivacyEvents>, call: F) -> F::Output {
    LISTENER.scope(listener, call).await
}

/// Tells the call's listener, if it has one, what the layer did in the call `meta` describes, whose
/// result is `result`.
pub(super) fn announce(meta: &CallMeta, result: &Result<LlmResponse, LlmError>) {
    let (Work::Task, Some(task)) = (meta.work, meta.task_id) else {
        return;
    };
    let Ok(listener) = LISTENER.try_with(Arc::clone) else {
        return;
    };
    let agent = meta.agent.as_str();
    match result {
        Ok(response) => {
            if let Some(report) = &response.privacy
                && !report.counts.is_empty()
            {
                listener.masked(task, agent, report);
            }
        }
        Err(LlmError::Leak { kind, .. }) => {
            tracing::error!(
                task,
                agent,
                kind = kind.as_str(),
                "the privacy egress guard stopped a model call: a real value was still in the request"
            );
            listener.blocked(task, agent, *kind);
        }
        Err(_) => {}
    }
}
