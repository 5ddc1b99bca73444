//! Agent sessions: the tool-use loop of one task, and the session's side of the tools' seam
//! ([`ToolHost`], owned by `tools`): running a child task for a delegation, and asking for approval.
//! The tools call back into the session only through that trait, so `tools` never depends on this
//! module.
//!
//! A session is a loop over its own message history (saved after every turn):
//! - if the last message is the model's and asks for tools, run them (through the tool registry, which
//!   offers each agent the tools its config lists) and append their results;
//! - otherwise ask the model (one LLM call through the provider's layer stack), with a system prompt
//!   rebuilt for that turn (core memory blocks as they are now) and recalled memory before the task
//!   (asked once, before the first turn; never stored);
//! - a reply without tool calls is the final answer.
//!
//! Because the loop is driven only by the saved history, re-entering it after a restart continues where
//! it stopped. Tools are idempotent per tool call: a `delegate` finds the child task its call already
//! created (finished → its stored result; suspended → resumed), and `request_approval` finds its stored
//! approval. That is how a decision taken in a new process resumes a whole suspended tree.
//!
//! Invariants:
//! - delegation only to the agent's direct children; anything else is a tool error and creates no task;
//! - invalid tool arguments are a tool error returned to the model, never a task failure;
//! - a child sees only its own task text (Select), and its result reaches the parent summarised when it
//!   exceeds `resultCompressionThreshold` (Compress); the original stays in the task record;
//! - cancelling a task drops its future, which drops its children's futures; the database marks the
//!   whole subtree CANCELLED in one transaction.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::{BoxFuture, FutureExt, join_all};
use opc_hierarchy::schema::Tool;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::Clock;
use crate::context::{estimate_tokens, summary_request, with_recall};
use crate::ending::{Escalation, EscalationKind, TaskEnd};
use crate::events::Event;
use crate::llm::{CallMeta, Content, LlmError, LlmRequest, Message, Role, StreamDelta, TokenSink};
use crate::spans;
use crate::state::EngineState;
use crate::store::{
    Approval, CallPrivacy, CallRecord, Ending, NewTask, OfferedOption, StoreError, TaskId,
    TaskRecord, TaskState, ToolCallRecord, ToolOutcome,
};
use crate::tools::{
    self, ApprovalArgs, CallNote, DelegateArgs, SeenVersions, SpecContext, ToolContext,
    ToolHandler, ToolHost, ToolResult,
};

/// What a task hands down to the tasks it delegates to.
///
/// Invariant: a child's cancellation token is always derived from the token its parent's session
/// holds, handed down through this scope — never looked up — so cancelling a task always reaches its
/// whole subtree (there is no token a child could fall back to).
#[derive(Clone)]
pub(crate) struct Scope {
    /// The task's own token (children derive theirs from it).
    token: CancellationToken,
    /// The chain of deadlines from the root down to the task: an approval pauses them all.
    clocks: Arc<Vec<Clock>>,
    /// The tree was taken over from another process (a cluster node that died or lost its lease):
    /// a resumed session answers the tool calls that were in flight there "interrupted", never runs
    /// them again.
    takeover: bool,
}

/// Run (or resume) a root task to its end; the outcome is then read from the store. `takeover`:
/// the tree was running in another process, which stopped (see [`Scope`]).
pub(crate) async fn run_root(rt: Arc<EngineState>, task: TaskId, takeover: bool) -> TaskEnd {
    let scope = Scope {
        token: CancellationToken::new(),
        clocks: Arc::new(Vec::new()),
        takeover,
    };
    run_task(rt, task, scope).await
}

/// Run one task under a cancellation token derived from its parent's and its own deadline, and record
/// how it ended.
fn run_task(rt: Arc<EngineState>, task: TaskId, parent: Scope) -> BoxFuture<'static, TaskEnd> {
    async move {
        let (record, messages) = match rt.store().begin(task).await {
            Ok(started) => started,
            Err(e) => return TaskEnd::Failed(e.to_string()),
        };
        if record.state.is_terminal() {
            return stored_end(&record);
        }
        let role = rt.org().role(&record.agent).unwrap_or_default().to_string();
        let span = spans::agent_span(&record, &role);
        let root = record.parent_id.is_none();
        let end = run_started(rt, record, messages, parent)
            .instrument(span.clone())
            .await;
        spans::agent_end(&span, &end, root);
        end
    }
    .boxed()
}

/// The run of a task that `run_task` found live, inside its `invoke_agent` span.
async fn run_started(
    rt: Arc<EngineState>,
    record: TaskRecord,
    messages: Vec<Message>,
    parent: Scope,
) -> TaskEnd {
    let task = record.id;
    let token = parent.token.child_token();
    // Registered for `Engine::cancel`, and removed however this future ends — also when an
    // ancestor's cancellation drops it.
    let _registered = rt.tokens().register(task, token.clone());
    let clock = Clock::start(rt.config().framework.execution.task_timeout);
    let mut chain = (*parent.clocks).clone();
    chain.push(clock.clone());
    let scope = Scope {
        token: token.clone(),
        clocks: Arc::new(chain),
        takeover: parent.takeover,
    };
    let started = Instant::now();

    let end = tokio::select! {
        end = session(rt.clone(), record.clone(), messages, scope) => end,
        _ = token.cancelled() => {
            // Usually already recorded (`Engine::cancel` writes before it cancels tokens); this
            // records an ancestor's cancellation reaching this task. If the write fails the task
            // stays live in the database and startup recovery marks it interrupted: log it, and
            // report the cancellation that did happen here.
            if let Err(e) = rt.store().cancel_subtree(task, "cancelled").await {
                tracing::error!(task, error = %e, "cannot record a task's cancellation");
            }
            TaskEnd::Cancelled(rt.store().task(task).await.ok().and_then(|t| t.error).unwrap_or_else(|| "cancelled".into()))
        }
        _ = clock.expired() => {
            let escalation = Escalation {
                kind: EscalationKind::Timeout,
                reason: format!(
                    "{} did not finish within the task timeout of {}",
                    record.agent,
                    humantime::format_duration(clock.budget())
                ),
                partial_result: None,
            };
            // The subtree below is abandoned: cancel it, then record the escalation on this task.
            // Its futures are dropped with this session's either way; if the write fails they
            // stay live in the database until startup recovery marks them interrupted.
            match rt.store().cancel_descendants(task, "cancelled: the task above it timed out").await {
                Ok(ids) => rt.tokens().cancel(&ids),
                Err(e) => tracing::error!(task, error = %e, "cannot cancel the subtree of a timed-out task"),
            }
            let json = serde_json::to_string(&escalation).unwrap_or_default();
            match rt.store().finish(task, Ending::Escalated(&json)).await {
                Ok(true) => TaskEnd::Escalated(escalation),
                // Ended meanwhile (cancelled): its first ending stands.
                Ok(false) => match rt.store().task(task).await {
                    Ok(current) => stored_end(&current),
                    Err(_) => TaskEnd::Escalated(escalation),
                },
                // The parent must not act on an escalation the database does not hold: it gets a
                // failure that says why (the task stays live until startup recovery ends it).
                Err(e) => {
                    tracing::error!(task, error = %e, "cannot record a timed-out task's escalation");
                    TaskEnd::Failed(format!("{}; recording the escalation failed: {e}", escalation.reason))
                }
            }
        }
    };
    finish(&rt, &record, &end, started).await;
    end
}

/// Publish the end of a task (the database already records it).
async fn finish(rt: &EngineState, record: &TaskRecord, end: &TaskEnd, started: Instant) {
    let stored = rt.store().task(record.id).await.ok();
    let (state, text) = match end {
        TaskEnd::Completed(text) => (TaskState::Completed, text.clone()),
        TaskEnd::Escalated(e) => {
            rt.events().publish(Event::Escalated {
                task: record.id,
                agent: record.agent.clone(),
                kind: e.kind.as_str().to_string(),
                reason: e.reason.clone(),
            });
            (TaskState::Escalated, e.reason.clone())
        }
        TaskEnd::Failed(error) => (TaskState::Failed, error.clone()),
        TaskEnd::Cancelled(reason) => (TaskState::Cancelled, reason.clone()),
    };
    rt.events().publish(Event::AgentFinished {
        task: record.id,
        agent: record.agent.clone(),
        state: state.as_str().to_string(),
        text,
        tokens_in: stored.as_ref().map_or(0, |t| t.tokens_in),
        tokens_out: stored.as_ref().map_or(0, |t| t.tokens_out),
        cost_usd: stored.as_ref().map_or(0.0, |t| t.cost_usd),
        duration_ms: started.elapsed().as_millis() as u64,
    });
}

/// What a finished task gives its parent, from its record.
fn stored_end(record: &TaskRecord) -> TaskEnd {
    match record.state {
        TaskState::Completed => TaskEnd::Completed(
            record
                .summary
                .clone()
                .or_else(|| record.output.clone())
                .unwrap_or_default(),
        ),
        TaskState::Escalated => match record
            .escalation
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok())
        {
            Some(e) => TaskEnd::Escalated(e),
            None => TaskEnd::Failed("escalated without details".into()),
        },
        TaskState::Cancelled => {
            TaskEnd::Cancelled(record.error.clone().unwrap_or_else(|| "cancelled".into()))
        }
        _ => TaskEnd::Failed(record.error.clone().unwrap_or_else(|| "failed".into())),
    }
}

/// The tool-use loop.
async fn session(
    rt: Arc<EngineState>,
    record: TaskRecord,
    messages: Vec<Message>,
    scope: Scope,
) -> TaskEnd {
    match session_inner(&rt, &record, messages, &scope).await {
        Ok(end) => end,
        Err(error) => {
            // A task ended elsewhere (cancelled) refuses further transitions: report how it ended.
            if let Ok(current) = rt.store().task(record.id).await
                && current.state.is_terminal()
            {
                return stored_end(&current);
            }
            let message = error.to_string();
            if let Err(e) = rt.store().finish(record.id, Ending::Failed(&message)).await {
                tracing::error!(task = record.id, error = %e, "cannot record a task failure");
            }
            TaskEnd::Failed(message)
        }
    }
}

async fn session_inner(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    mut messages: Vec<Message>,
    scope: &Scope,
) -> Result<TaskEnd, StoreError> {
    let store = rt.store();
    let id = record.id;
    rt.events().publish(Event::AgentStarted {
        task: id,
        agent: record.agent.clone(),
    });
    let agent = rt.config().agents.get(&record.agent);
    let agent_tools: Vec<Tool> = agent.map(|a| a.tools.clone()).unwrap_or_default();
    let children: Vec<(String, String)> = rt
        .org()
        .children(&record.agent)
        .into_iter()
        .map(|c| (c.to_string(), rt.org().role(c).unwrap_or(c).to_string()))
        .collect();
    let offered = rt.tools().offered(agent);
    let specs: Vec<_> = offered
        .iter()
        .map(|t| {
            t.spec(&SpecContext {
                agent: &record.agent,
                children: &children,
            })
        })
        .collect();
    // Select, once per session run and before its first turn: recalled memory goes before the task
    // message of every request, and never into the stored history.
    let recall = rt
        .context()
        .recall_prefix(&record.agent, &record.input, &record.conversation_id)
        .await;
    let task_index = messages
        .iter()
        .rposition(|m| m.role == Role::User && m.text() == record.input);
    let seen = SeenVersions::default();
    let (provider, model) = rt.model_of(&record.agent);
    let mut turns = 0u32;
    // Tracked here so each model turn does not need its own state write.
    let mut executing = record.state == TaskState::Executing;
    // A taken-over session's first tool calls may have run (or be running) in the process that
    // lost the tree: those not known to be safe to repeat are answered "interrupted".
    let mut interrupted = if scope.takeover {
        in_flight(rt, record, messages.last()).await?
    } else {
        std::collections::HashSet::new()
    };

    loop {
        let pending_tools = messages
            .last()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.tool_uses().count() > 0);
        match pending_tools {
            Some(true) => {
                let last = messages
                    .last()
                    .cloned()
                    .unwrap_or_else(|| Message::user(""));
                // An escalation ends the session; other tools in the same turn are not run.
                if let Some(end) = escalation_in(&last, &agent_tools) {
                    let json = serde_json::to_string(&end).unwrap_or_default();
                    store.finish(id, Ending::Escalated(&json)).await?;
                    return Ok(TaskEnd::Escalated(end));
                }
                let (results, waited) =
                    run_tools(rt, record, &last, &offered, scope, &seen, &interrupted).await?;
                interrupted.clear();
                messages.push(Message {
                    role: Role::User,
                    content: results,
                });
                if waited {
                    // Back from waiting on children or a human (a resumed task may still be
                    // AWAITING_APPROVAL): EXECUTING again, with the results saved, in one store
                    // operation. Fails for a task cancelled meanwhile; the session then reports
                    // how it ended.
                    store
                        .transition_and_save(id, TaskState::Executing, &messages)
                        .await?;
                } else {
                    store.save_messages(id, &messages).await?;
                }
                // run_tools leaves the task EXECUTING (or it moved there just above).
                executing = true;
            }
            Some(false) => {
                let answer = messages.last().map(Message::text).unwrap_or_default();
                return complete(rt, record, answer).await;
            }
            None => {
                turns += 1;
                if turns > rt.options().max_turns {
                    let error = format!(
                        "{} reached the limit of {} model turns without a final answer",
                        record.agent,
                        rt.options().max_turns
                    );
                    store.finish(id, Ending::Failed(&error)).await?;
                    return Ok(TaskEnd::Failed(error));
                }
                if !executing {
                    store.transition(id, TaskState::Executing).await?;
                    executing = true;
                }
                // Write, every turn: the core blocks as they are now (an edit made by a tool in the
                // previous turn is in this request), and the versions the model is shown.
                let (system, blocks) = rt.context().system_prompt(&record.agent).await;
                for b in &blocks {
                    seen.saw(&b.namespace, &b.label, b.version);
                }
                let request = LlmRequest {
                    provider: provider.clone(),
                    model: model.clone(),
                    system,
                    messages: with_recall(&messages, task_index, recall.as_deref()),
                    tools: specs.clone(),
                    tool_choice: None,
                    max_tokens: rt.options().max_tokens,
                    stream: None,
                    meta: call_meta(record, &record.agent),
                    guard: None,
                };
                match call_model(rt, request, &mut messages, record).await? {
                    Ok(false) => {}
                    Ok(true) => {
                        let answer = messages.last().map(Message::text).unwrap_or_default();
                        return Ok(TaskEnd::Completed(answer));
                    }
                    Err(error) => {
                        store.finish(id, Ending::Failed(&error)).await?;
                        return Ok(TaskEnd::Failed(error));
                    }
                }
            }
        }
    }
}

/// Who a call of `record`'s task is for, as the layers see it: the agent (or a framework role), the
/// task, its root (the scope of the state the layers keep for the conversation) and the conversation.
fn call_meta(record: &TaskRecord, agent: &str) -> CallMeta {
    CallMeta {
        agent: agent.to_string(),
        task_id: Some(record.id),
        root_id: Some(record.root_id),
        conversation: Some(record.conversation_id.clone()),
        work: crate::llm::Work::Task,
    }
}

/// A sink publishing a task's streamed deltas on the event bus as they arrive (in the wire client's
/// read loop: publishing never blocks, and the deltas are on the bus before the call returns).
fn token_sink(rt: &EngineState, task: TaskId, agent: &str) -> TokenSink {
    let events = rt.events().clone();
    let agent = agent.to_string();
    TokenSink::from_fn(move |delta| {
        events.publish(match delta {
            StreamDelta::Text(text) => Event::Token {
                task,
                agent: agent.clone(),
                text,
            },
            StreamDelta::Restart => Event::StreamRestarted { task },
        })
    })
}

/// One LLM call with an agent slot held, streamed to the bus when enabled. On success the answer is
/// appended to `messages`; the call and the new history are saved in one transaction — which also
/// completes the task when the answer is final and short enough to need no summary (`Ok(Ok(true))`).
/// The outer `Result` is the database; the rt one the call (its error rendered for people).
async fn call_model(
    rt: &Arc<EngineState>,
    mut request: LlmRequest,
    messages: &mut Vec<Message>,
    finishing: &TaskRecord,
) -> Result<Result<bool, String>, StoreError> {
    let task = finishing.id;
    let agent = finishing.agent.as_str();
    if rt.options().streaming {
        request.stream = Some(token_sink(rt, task, agent));
    }
    let model_ref = format!("{}/{}", request.provider, request.model);
    let started = Instant::now();
    let result = {
        let _slot = rt.agent_slot().await;
        rt.llm().call(request).await
    };
    // The slot is free: let the session it wakes start its model call before this one records its
    // turn. The store work after a call is synchronous (one connection behind a mutex), so without
    // this a wave of 200 finishing calls delays the next wave's requests by all of it.
    tokio::task::yield_now().await;
    let duration_ms = started.elapsed().as_millis() as u64;
    let privacy = CallPrivacy::of(&result);
    // The model that answered: the ledger's record says when the call went to another one.
    let model_ref = privacy
        .as_ref()
        .and_then(|p| p.routed_to.clone())
        .unwrap_or(model_ref);
    match result {
        Ok(response) => {
            let tool_calls: Vec<String> = response
                .content
                .iter()
                .filter_map(|c| match c {
                    Content::ToolUse { name, .. } => Some(name.clone()),
                    _ => None,
                })
                .collect();
            let mut content = response.content;
            if content.is_empty() {
                content.push(Content::text(""));
            }
            unique_tool_ids(&mut content, messages);
            messages.push(Message {
                role: Role::Assistant,
                content,
            });
            let call = CallRecord {
                task_id: task,
                agent: agent.to_string(),
                model: model_ref,
                tokens_in: response.usage.map_or(0, |u| u.input_tokens),
                tokens_out: response.usage.map_or(0, |u| u.output_tokens),
                cost_usd: response.cost_usd,
                usage_unknown: response.usage.is_none(),
                duration_ms,
                attempts: response.attempts,
                tool_calls,
                error: None,
                privacy,
            };
            // A final answer that needs no summary completes the task in the same transaction.
            let last = messages.last();
            let final_answer = last
                .filter(|m| m.tool_uses().next().is_none())
                .map(Message::text)
                .filter(|text| completes_without_summary(rt, finishing, text));
            let completed = rt
                .store()
                .record_turn(&call, Some(messages), final_answer.as_deref())
                .await?;
            Ok(Ok(completed))
        }
        Err(error) => {
            let message = format!("{agent}: the model call failed: {error}");
            rt.store()
                .record_call(&CallRecord {
                    task_id: task,
                    agent: agent.to_string(),
                    model: model_ref,
                    tokens_in: 0,
                    tokens_out: 0,
                    cost_usd: 0.0,
                    usage_unknown: false,
                    duration_ms,
                    attempts: match &error {
                        LlmError::Exhausted { attempts, .. } => *attempts,
                        _ => 1,
                    },
                    tool_calls: Vec::new(),
                    error: Some(error.to_string()),
                    privacy,
                })
                .await?;
            Ok(Err(message))
        }
    }
}

/// Make the model's tool-call ids unique within the session. Children and approvals are keyed by
/// `(task, tool call id)`, and some OpenAI-compatible servers number calls per turn (`call_0`), so a
/// repeated id would answer a new call with an old result (an old approval, an old child).
fn unique_tool_ids(content: &mut [Content], history: &[Message]) {
    let mut seen: std::collections::HashSet<String> = history
        .iter()
        .flat_map(|m| m.tool_uses().map(|(id, _, _)| id.to_string()))
        .collect();
    let turn = history.len();
    for block in content.iter_mut() {
        if let Content::ToolUse { id, .. } = block {
            let mut candidate = id.clone();
            let mut n = 0;
            while seen.contains(&candidate) || candidate.is_empty() {
                n += 1;
                candidate = format!("{id}_t{turn}_{n}");
            }
            seen.insert(candidate.clone());
            *id = candidate;
        }
    }
}

/// A valid `escalate` call in the message, if the agent has the tool.
fn escalation_in(message: &Message, agent_tools: &[Tool]) -> Option<Escalation> {
    if !agent_tools.contains(&Tool::Escalate) {
        return None;
    }
    message
        .tool_uses()
        .filter(|(_, name, _)| *name == Tool::Escalate.wire_name())
        .find_map(|(_, name, input)| tools::parse::<Escalation>(name, input).ok())
}

/// Run every tool call of the model's last turn, concurrently, and return their results in order,
/// and whether the task waited on children or a human (it is then not EXECUTING: the caller moves
/// it back).
async fn run_tools(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    message: &Message,
    offered: &[Arc<dyn ToolHandler>],
    scope: &Scope,
    seen: &SeenVersions,
    interrupted: &std::collections::HashSet<String>,
) -> Result<(Vec<Content>, bool), StoreError> {
    let calls: Vec<(String, String, serde_json::Value)> = message
        .tool_uses()
        .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
        .collect();
    let called = |tool: Tool| calls.iter().any(|(_, name, _)| name == tool.wire_name());
    let delegates = called(Tool::Delegate) || called(Tool::DelegateParallel);
    let waits = delegates || called(Tool::RequestApproval);
    // While its children work, a task's own deadline is paused: `taskTimeout` bounds each agent's
    // own work, so a hung child times out (and escalates to this task) before this task does.
    let _paused = if delegates {
        rt.store()
            .transition(record.id, TaskState::Delegated)
            .await?;
        scope.clocks.last().map(Clock::pause)
    } else {
        None
    };
    let futures = calls.into_iter().map(|(id, name, input)| async move {
        rt.events().publish(Event::ToolCalled {
            task: record.id,
            agent: record.agent.clone(),
            tool: name.clone(),
        });
        let started = Instant::now();
        let span = spans::tool_span(&name, &id);
        let (content, is_error, note) = if interrupted.contains(&id) {
            (INTERRUPTED.to_string(), true, CallNote::default())
        } else {
            run_tool(rt, record, &id, &name, &input, offered, scope, seen)
                .instrument(span.clone())
                .await?
        };
        spans::tool_end(&span, is_error);
        // Every call is an event and a ledger row (a call dropped by a cancellation has neither:
        // its task's record says it was cancelled).
        let outcome = if is_error {
            ToolOutcome::Error
        } else {
            ToolOutcome::Ok
        };
        let call = ToolCallRecord {
            task_id: record.id,
            agent: record.agent.clone(),
            tool: name.clone(),
            tool_use_id: id.clone(),
            outcome,
            exit_code: note.exit_code,
            detail: note.detail,
            duration_ms: started.elapsed().as_millis() as u64,
            created_at: 0,
        };
        rt.store().record_tool_call(&call).await?;
        rt.events().publish(Event::ToolFinished {
            task: record.id,
            agent: call.agent,
            tool: call.tool,
            duration_ms: call.duration_ms,
            outcome: outcome.as_str().to_string(),
            exit_code: call.exit_code,
            detail: call.detail,
        });
        Ok(Content::ToolResult {
            tool_use_id: id,
            content,
            is_error,
        })
    });
    let results = join_all(futures).await;
    // Whether the task waited (on children or a human): the caller moves it back to EXECUTING
    // together with saving the results.
    let results: Result<Vec<Content>, StoreError> = results.into_iter().collect();
    Ok((results?, waits))
}

/// What the model is told about a tool call that was in flight in a process that stopped.
pub(crate) const INTERRUPTED: &str = "interrupted; not known whether it completed (the node running this task stopped while the tool ran; check its effects before running it again)";

/// The tool calls of `last` (a taken-over session's pending turn) that may have run in the process
/// that lost the tree, and so must not run again. Safe to repeat, because they find what their first
/// run recorded: delegations (their children), `request_approval` (its approval) and `escalate`; and a
/// tool still waiting for a pending approval (it had not started: it waits again). Everything else —
/// a command whose approval was decided, any other tool — is answered [`INTERRUPTED`].
async fn in_flight(
    rt: &EngineState,
    record: &TaskRecord,
    last: Option<&Message>,
) -> Result<std::collections::HashSet<String>, StoreError> {
    let Some(last) = last.filter(|m| m.role == Role::Assistant) else {
        return Ok(std::collections::HashSet::new());
    };
    let repeatable = [
        Tool::Delegate,
        Tool::DelegateParallel,
        Tool::RequestApproval,
        Tool::Escalate,
    ];
    let candidates: Vec<&str> = last
        .tool_uses()
        .filter(|(_, name, _)| !repeatable.iter().any(|t| t.wire_name() == *name))
        .map(|(id, _, _)| id)
        .collect();
    if candidates.is_empty() {
        return Ok(std::collections::HashSet::new());
    }
    let waiting: std::collections::HashSet<String> = rt
        .store()
        .pending_approvals()
        .await?
        .into_iter()
        .filter(|a| a.task_id == record.id)
        .map(|a| a.tool_use_id)
        .collect();
    Ok(candidates
        .into_iter()
        .filter(|id| !waiting.contains(*id))
        .map(str::to_string)
        .collect())
}

/// One tool call → `(content, is_error, what the tool noted for the ledger)`, through the registry.
#[allow(clippy::too_many_arguments)]
async fn run_tool(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    tool_use_id: &str,
    name: &str,
    input: &serde_json::Value,
    offered: &[Arc<dyn ToolHandler>],
    scope: &Scope,
    seen: &SeenVersions,
) -> Result<(String, bool, CallNote), StoreError> {
    let Some(tool) = offered.iter().find(|t| t.name() == name) else {
        let names: Vec<&str> = offered.iter().map(|t| t.name()).collect();
        return Ok((
            format!(
                "unknown tool `{name}`; your tools are: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
            true,
            CallNote::default(),
        ));
    };
    let host = Host { rt, record, scope };
    let cx = ToolContext::new(&host, tool_use_id, seen);
    let (content, is_error) = match spans::memory_operation(name) {
        // A memory tool is also a memory operation of the conventions, inside its tool span.
        Some((operation, store)) => {
            tool.run(&cx, input)
                .instrument(spans::memory_span(operation, store))
                .await?
        }
        None => tool.run(&cx, input).await?,
    };
    Ok((content, is_error, cx.take_note()))
}

/// The session of one task as its tools see it ([`ToolHost`]): the tools own that seam, and this is
/// its only implementation, so the tools never depend on the session.
struct Host<'a> {
    rt: &'a Arc<EngineState>,
    record: &'a TaskRecord,
    scope: &'a Scope,
}

#[async_trait::async_trait]
impl ToolHost for Host<'_> {
    fn agent(&self) -> &str {
        &self.record.agent
    }

    fn task(&self) -> TaskId {
        self.record.id
    }

    fn conversation(&self) -> &str {
        &self.record.conversation_id
    }

    fn org(&self) -> &opc_hierarchy::OrgTree {
        self.rt.org()
    }

    fn check_delegation(&self, to: &str) -> Result<(), String> {
        check_delegation(self.rt, self.record, to)
    }

    async fn delegate(
        &self,
        tool_use_id: &str,
        index: u32,
        args: &DelegateArgs,
    ) -> Result<TaskEnd, StoreError> {
        delegate(self.rt, self.record, tool_use_id, index, args, self.scope).await
    }

    async fn request_approval(&self, tool_use_id: &str, args: &ApprovalArgs) -> ToolResult {
        crate::approval::request(
            self.rt,
            self.record,
            tool_use_id,
            &args.summary,
            &args.options,
            self.scope.clocks.as_slice(),
        )
        .await
    }

    async fn ask(
        &self,
        tool_use_id: &str,
        summary: &str,
        options: &[OfferedOption],
    ) -> Result<Approval, StoreError> {
        crate::approval::ask(
            self.rt,
            self.record,
            tool_use_id,
            summary,
            options,
            self.scope.clocks.as_slice(),
        )
        .await
    }

    async fn command_approved(&self, command: &str) -> Result<bool, StoreError> {
        self.rt
            .store()
            .command_approved(&self.record.conversation_id, &self.record.agent, command)
            .await
    }

    async fn approve_command(&self, command: &str, approval: i64) -> Result<(), StoreError> {
        self.rt
            .store()
            .approve_command(
                &self.record.conversation_id,
                &self.record.agent,
                command,
                approval,
            )
            .await
    }
}

/// Whether `from`'s task may delegate to `to`: direct children only. The error names the relation.
fn check_delegation(rt: &EngineState, record: &TaskRecord, to: &str) -> Result<(), String> {
    let org = rt.org();
    let from = record.agent.as_str();
    if org.may_delegate(from, to) {
        let max = rt.config().framework.execution.max_hierarchy_depth.get();
        if record.depth + 1 >= max {
            return Err(format!(
                "cannot delegate to `{to}`: the delegation would exceed maxHierarchyDepth ({max})"
            ));
        }
        return Ok(());
    }
    let relation = if !org.contains(to) {
        "there is no agent with that id"
    } else if to == from {
        "that is you"
    } else if org.is_ancestor(from, to) {
        "that agent is below your direct subordinates; delegate to the subordinate who leads them"
    } else if org.is_ancestor(to, from) {
        "that agent is above you; use `escalate` to raise problems with your superior"
    } else {
        "that agent is not in your team"
    };
    let children = org.children(from);
    Err(format!(
        "cannot delegate to `{to}`: {relation}. You can delegate to: {}",
        if children.is_empty() {
            "nobody".to_string()
        } else {
            children.join(", ")
        }
    ))
}

/// Run a child task for a parent's tool call: the existing one if this call already created it.
async fn delegate(
    rt: &Arc<EngineState>,
    parent: &TaskRecord,
    tool_use_id: &str,
    index: u32,
    args: &DelegateArgs,
    scope: &Scope,
) -> Result<TaskEnd, StoreError> {
    let store = rt.store();
    let child = match store.child_for(parent.id, tool_use_id, index).await? {
        Some(existing) => existing.id,
        None => {
            // The task as the parent wrote it; recall is added per request by the child's session.
            let first = Message::user(&args.task);
            let id = store
                .create_task(&NewTask {
                    parent_id: Some(parent.id),
                    conversation_id: &parent.conversation_id,
                    agent: &args.agent,
                    depth: parent.depth + 1,
                    tool_use_id: Some(tool_use_id),
                    tool_index: index,
                    input: &args.task,
                    messages: std::slice::from_ref(&first),
                    author: None,
                    // This delegation's `execute_tool` span: the child's `invoke_agent` is its child,
                    // wherever and whenever the child runs.
                    trace: opc_telemetry::carry::current().as_deref(),
                })
                .await?;
            rt.events().publish(Event::TaskCreated {
                task: id,
                parent: Some(parent.id),
                root: parent.root_id,
                conversation: parent.conversation_id.clone(),
                agent: args.agent.clone(),
            });
            rt.events().publish(Event::Delegated {
                task: parent.id,
                child: id,
                from: parent.agent.clone(),
                to: args.agent.clone(),
            });
            id
        }
    };
    Ok(run_task(rt.clone(), child, scope.clone()).await)
}

/// Whether a final answer goes to the parent as it is: a root's always does; a child's when it is
/// within `resultCompressionThreshold`.
fn completes_without_summary(rt: &EngineState, record: &TaskRecord, answer: &str) -> bool {
    record.parent_id.is_none() || estimate_tokens(answer) <= compression_threshold(rt)
}

/// `resultCompressionThreshold`, in (estimated) tokens.
fn compression_threshold(rt: &EngineState) -> usize {
    rt.config()
        .framework
        .execution
        .result_compression_threshold
        .get() as usize
}

/// The final answer: summarise it for the parent when it is long, then complete the task.
async fn complete(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    answer: String,
) -> Result<TaskEnd, StoreError> {
    let threshold = compression_threshold(rt);
    // Summarising takes a model call, so the state shows it; otherwise the task passes through
    // RESULT_PROPAGATING inside the completing transaction.
    let summary = if !completes_without_summary(rt, record, &answer) {
        rt.store()
            .transition(record.id, TaskState::ResultPropagating)
            .await?;
        Some(summarise(rt, record, &answer, threshold).await?)
    } else {
        None
    };
    let finished = rt
        .store()
        .finish(
            record.id,
            Ending::Completed {
                output: &answer,
                summary: summary.as_deref(),
            },
        )
        .await?;
    if !finished {
        // Ended meanwhile (cancelled): its first ending stands.
        return Ok(stored_end(&rt.store().task(record.id).await?));
    }
    Ok(TaskEnd::Completed(summary.unwrap_or(answer)))
}

async fn summarise(
    rt: &Arc<EngineState>,
    record: &TaskRecord,
    answer: &str,
    threshold: usize,
) -> Result<String, StoreError> {
    let (provider, model) = rt.fast_model();
    let role = rt
        .org()
        .role(&record.agent)
        .unwrap_or(&record.agent)
        .to_string();
    let request = summary_request(
        &provider,
        &model,
        &role,
        answer,
        threshold,
        call_meta(record, "summarizer"),
    );
    let result = {
        let _slot = rt.agent_slot().await;
        let started = Instant::now();
        let result = rt.llm().call(request).await;
        let privacy = CallPrivacy::of(&result);
        // A failed call used no tokens we know of; a response without usage is unknown.
        let (usage, cost, attempts, error) = match &result {
            Ok(r) => (r.usage, r.cost_usd, r.attempts, None),
            Err(e) => (Some(Default::default()), 0.0, 1, Some(e.to_string())),
        };
        rt.store()
            .record_call(&CallRecord {
                task_id: record.id,
                agent: "summarizer".into(),
                model: format!("{provider}/{model}"),
                tokens_in: usage.map_or(0, |u| u.input_tokens),
                tokens_out: usage.map_or(0, |u| u.output_tokens),
                cost_usd: cost,
                usage_unknown: usage.is_none(),
                duration_ms: started.elapsed().as_millis() as u64,
                attempts,
                tool_calls: Vec::new(),
                error,
                privacy,
            })
            .await?;
        result
    };
    Ok(match result {
        Ok(response) => {
            let text = Message {
                role: Role::Assistant,
                content: response.content,
            }
            .text();
            format!(
                "[summary of a {}-token report]\n{text}",
                estimate_tokens(answer)
            )
        }
        // Summarising is an optimisation: if it fails, the parent gets a clearly marked cut instead.
        Err(error) => {
            let keep: String = answer.chars().take(threshold * 4).collect();
            format!(
                "[report truncated to {threshold} tokens: the summariser failed: {error}]\n{keep}"
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeated_tool_ids_are_made_unique_within_a_session() {
        let call = |id: &str| Content::ToolUse {
            id: id.into(),
            name: "request_approval".into(),
            input: json!({}),
        };
        let history = vec![
            Message::user("go"),
            Message {
                role: Role::Assistant,
                content: vec![call("call_0")],
            },
        ];
        let mut content = vec![call("call_0"), call("call_0"), call("")];
        unique_tool_ids(&mut content, &history);
        let ids: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                Content::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["call_0_t2_1", "call_0_t2_2", "_t2_1"]);
    }
}
