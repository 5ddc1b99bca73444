//! Fact extraction: ONE model call per completed task of an agent with `memory.archival`, doing
//! extraction and reconciliation together.
//!
//! Steps, for the job's task:
//! 1. the exchange ([`super::exchange`]); an exchange whose hash was already extracted for the
//!    agent's namespace is skipped (no call);
//! 2. the top 10 current facts of the agent's namespace most similar to it (hybrid search), listed
//!    one JSON object per line in the user message (`prompt::extract_user`);
//! 3. the call: system `prompt::extract_system_for` (first line `OPC memory: extract`), one tool,
//!    `record_facts`, forced (`tool_choice`), model `consolidation.model` or the fast model; with
//!    `framework.memory.graph.enabled` the prompt asks for relations and the tool's operations take
//!    `predicate`/`object` (still one call per task);
//! 4. `ops::parse_for` against the listed ids: malformed → [`Event::FactsRejected`], nothing written;
//! 5. `apply_marking`: the batch and the exchange's "extracted" mark in one transaction, with
//!    provenance (agent, task, conversation, recall seqs, model, ledger id, source `agent`) →
//!    [`Event::FactsRecorded`].
//!
//! The `record_facts` input is the engine's: the privacy layer restored it (the model saw masked
//! text), so the facts are stored with real values, like recall.

use std::collections::HashSet;

use opc_memory::facts::{
    FactError, FactQuery, FactStore, FactVersion, Provenance, Source, View, ops, prompt,
};

use super::{JobOutcome, call, cap, exchange, memory_model, namespace};
use crate::events::Event;
use crate::llm::{CallMeta, Content, LlmRequest, Message, ToolChoice, ToolSpec, Work};
use crate::state::EngineState;
use crate::store::{MemoryJob, StoreError, TaskState, now_ms};

/// Facts listed in the call (the seed's conflict detection: top 10).
const LISTED: usize = 10;
/// Characters of the exchange used as the similarity query.
const QUERY_CHARS: usize = 2_000;
/// Upper bound on the answer's tokens (a batch of short statements).
pub(super) const MAX_TOKENS: u32 = 2_048;

/// The `record_facts` tool as offered; with graph memory (`graph`) its operations also take
/// `predicate` and `object`.
pub(super) fn record_facts_spec_for(graph: bool) -> ToolSpec {
    ToolSpec {
        name: ops::RECORD_FACTS.to_string(),
        description: ops::record_facts_description().to_string(),
        input_schema: ops::record_facts_schema_for(graph),
    }
}

/// Whether the engine's current config has graph memory on (`framework.memory.graph.enabled`):
/// read per job, so a reload that turns it on or off applies to the next extraction.
pub(super) fn graph_on(rt: &EngineState) -> bool {
    rt.config().framework.memory.graph_enabled
}

/// Run a blocking facts call on the blocking pool (it runs to its end even if the job is dropped,
/// so a batch is never cut in half).
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FactError> + Send + 'static,
) -> Result<T, FactError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(FactError::Invalid(format!(
            "the facts call did not finish: {e}"
        )))
    })
}

/// Extract the facts of `job`'s task.
pub(super) async fn run(
    rt: &EngineState,
    facts: &FactStore,
    job: &MemoryJob,
) -> Result<JobOutcome, StoreError> {
    let Some(task) = job.task else {
        return Ok(JobOutcome::Done);
    };
    let record = rt.store().task(task).await?;
    if record.state != TaskState::Completed {
        return Ok(JobOutcome::Done);
    }
    let messages = rt.store().messages(task).await?;
    let exchange = exchange::render(&record, &messages);
    let ns = namespace(&job.agent);
    let hash = prompt::content_hash(&exchange);
    let listed: Vec<FactVersion> = {
        let (facts, ns, hash) = (facts.clone(), ns.clone(), hash.clone());
        let query = FactQuery {
            text: exchange.chars().take(QUERY_CHARS).collect(),
            namespaces: vec![ns.clone()],
            view: View::Current,
            limit: LISTED,
        };
        match blocking(move || {
            if facts.extracted(&ns, &hash)? {
                return Ok(None);
            }
            facts
                .search(&query)
                .map(|hits| Some(hits.into_iter().map(|h| h.version).collect()))
        })
        .await
        {
            Ok(Some(listed)) => listed,
            Ok(None) => return Ok(JobOutcome::Done),
            Err(e) => return Ok(JobOutcome::Retry(format!("reading facts: {e}"))),
        }
    };
    if let Some(until) = cap::over(rt, &job.agent, now_ms()).await? {
        return Ok(JobOutcome::Capped { until });
    }
    let (provider, model) = match memory_model(rt) {
        Ok(m) => m,
        Err(e) => return Ok(JobOutcome::Retry(e)),
    };
    // One config read for the whole job: the prompt, the schema and the parser agree.
    let graph = graph_on(rt);
    let request = LlmRequest {
        provider,
        model,
        system: prompt::extract_system_for(&job.agent, graph),
        messages: vec![Message::user(prompt::extract_user(&exchange, &listed))],
        tools: vec![record_facts_spec_for(graph)],
        tool_choice: Some(ToolChoice::Tool(ops::RECORD_FACTS.to_string())),
        max_tokens: MAX_TOKENS,
        stream: None,
        meta: CallMeta {
            agent: job.agent.clone(),
            task_id: Some(task),
            // Outside the tree: the call gets a privacy vault of its own, which masks it and
            // restores its answer.
            root_id: None,
            conversation: Some(record.conversation_id.clone()),
            work: Work::Memory,
        },
        guard: None,
    };
    let answer = match call::call(rt, request, task).await? {
        Ok(answer) => answer,
        Err(e) => return Ok(JobOutcome::Retry(e.to_string())),
    };
    let input = answer.response.content.iter().find_map(|c| match c {
        Content::ToolUse { name, input, .. } if name == ops::RECORD_FACTS => Some(input.clone()),
        _ => None,
    });
    let ids: HashSet<i64> = listed.iter().map(|v| v.id).collect();
    let parsed = match input {
        Some(input) => ops::parse_for(&input, &ids, graph).map_err(|e| e.0),
        None => Err("the answer did not call record_facts".to_string()),
    };
    let ops = match parsed {
        Ok(ops) => ops,
        Err(reason) => return Ok(rejected(rt, job, reason)),
    };
    let provenance = Provenance {
        agent: job.agent.clone(),
        task: Some(task),
        conversation: Some(record.conversation_id.clone()),
        source_messages: rt
            .store()
            .recall_seqs(task, &record.conversation_id)
            .await?,
        model: Some(answer.model.clone()),
        ledger_id: Some(answer.ledger_id),
        source: Source::Agent,
    };
    let applied = {
        let facts = facts.clone();
        blocking(move || facts.apply_marking(&ns, &ops, &provenance, now_ms(), Some(&hash))).await
    };
    match applied {
        Ok(applied) => {
            rt.events().publish(Event::FactsRecorded {
                agent: job.agent.clone(),
                task: Some(task),
                added: applied.added.len(),
                updated: applied.updated.len(),
                invalidated: applied.invalidated.len(),
                duplicates: applied.duplicates,
            });
            Ok(JobOutcome::Done)
        }
        // The model named something the store refuses (a bad time range, a fact of another
        // namespace): the answer is at fault, and it is not retried.
        Err(FactError::Invalid(reason)) => Ok(rejected(rt, job, reason)),
        // A listed fact was changed meanwhile (a consolidation): list again and call again.
        Err(e) => Ok(JobOutcome::Retry(e.to_string())),
    }
}

/// A rejected answer: the event, and the outcome that ends the job.
fn rejected(rt: &EngineState, job: &MemoryJob, reason: String) -> JobOutcome {
    tracing::warn!(agent = %job.agent, task = job.task, "a record_facts answer was rejected; nothing was written");
    rt.events().publish(Event::FactsRejected {
        agent: job.agent.clone(),
        task: job.task,
        reason: reason.clone(),
    });
    JobOutcome::Rejected(reason)
}
