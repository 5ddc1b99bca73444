//! One memory-work model call: through the engine's call stack (privacy, retries, limits, tracing,
//! cost), marked [`Work::Memory`], with no agent slot, and recorded in the ledger as memory work
//! (`llm_calls.work = 'memory'`, not added to the task's totals) — a failed call too, so the console
//! shows what memory work cost and why it stopped.

use std::time::Instant;

use crate::llm::{Content, LlmError, LlmRequest, LlmResponse, Work};
use crate::state::EngineState;
use crate::store::{CallPrivacy, CallRecord, StoreError, TaskId};

/// A call's answer and where the ledger put it.
pub(super) struct Answer {
    /// The response (tool inputs restored by the privacy layer).
    pub(super) response: LlmResponse,
    /// `llm_calls.id` of the call (the facts' provenance names it).
    pub(super) ledger_id: i64,
    /// `provider/model` that answered.
    pub(super) model: String,
}

/// Make `request` (its meta is marked memory work here) for `task` and record it. The outer
/// `Result` is the database; the inner one the call.
pub(super) async fn call(
    rt: &EngineState,
    mut request: LlmRequest,
    task: TaskId,
) -> Result<Result<Answer, LlmError>, StoreError> {
    request.meta.work = Work::Memory;
    request.stream = None;
    let agent = request.meta.agent.clone();
    let mut model = format!("{}/{}", request.provider, request.model);
    let started = Instant::now();
    let result = rt.llm().call(request).await;
    let duration_ms = started.elapsed().as_millis() as u64;
    let privacy = CallPrivacy::of(&result);
    if let Some(routed) = privacy.as_ref().and_then(|p| p.routed_to.clone()) {
        model = routed;
    }
    let record = match &result {
        Ok(r) => CallRecord {
            task_id: task,
            agent: agent.clone(),
            model: model.clone(),
            tokens_in: r.usage.map_or(0, |u| u.input_tokens),
            tokens_out: r.usage.map_or(0, |u| u.output_tokens),
            cost_usd: r.cost_usd,
            usage_unknown: r.usage.is_none(),
            duration_ms,
            attempts: r.attempts,
            tool_calls: r
                .content
                .iter()
                .filter_map(|c| match c {
                    Content::ToolUse { name, .. } => Some(name.clone()),
                    _ => None,
                })
                .collect(),
            error: None,
            privacy,
        },
        Err(e) => CallRecord {
            task_id: task,
            agent: agent.clone(),
            model: model.clone(),
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: 0.0,
            usage_unknown: false,
            duration_ms,
            attempts: match e {
                LlmError::Exhausted { attempts, .. } => *attempts,
                _ => 1,
            },
            tool_calls: Vec::new(),
            error: Some(e.to_string()),
            privacy,
        },
    };
    let ledger_id = rt.store().record_memory_call(&record).await?;
    Ok(result.map(|response| Answer {
        response,
        ledger_id,
        model,
    }))
}
