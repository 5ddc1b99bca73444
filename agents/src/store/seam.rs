//! The store seam: every operation the engine (and the gateway, the admin console, `opc tasks`)
//! performs on its durable state, as one async trait that `agents` owns.
//!
//! Why a trait: a second backend (PostgreSQL, so several gateways share one org) implements these
//! operations and nothing in the engine changes; the engine holds an `Arc<dyn Store>`.
//! Why async: a backend's round trip (a network hop, or a wait for a group commit) must suspend the
//! calling task, never block a runtime thread.
//!
//! What every implementation promises (the engine relies on it):
//! - an operation that changes state is atomic, and is durable when its future resolves Ok; an Err
//!   means it changed nothing;
//! - a task's state only moves along [`TaskState::may_become`], checked atomically with the change
//!   ([`StoreError::BadTransition`] otherwise), so two writers cannot both win;
//! - a read issued after a write resolved sees that write (and every earlier one);
//! - a failed operation never fails or undoes another caller's;
//! - a failure of the database itself is reported in backend-neutral terms ([`StoreError::Database`],
//!   whose [`DbFailure`](super::DbFailure) says what it means), never as a driver's own error type;
//! - recall rows (instructions, answers, approvals, escalations) are written in the same transaction
//!   as the change they describe, and the hook of [`Store::on_recall_append`] runs after they commit.

use std::collections::HashMap;
use std::time::Duration;

use super::{
    Approval, CallRecord, Decided, Ending, JobEnd, LatestCall, MemoryJob, NewTask, Notice,
    OfferedOption, PrivacyDay, Recovery, Spend, StoreError, TaskId, TaskPrivacy, TaskRecord,
    TaskState, TimedCall, ToolCallRecord, Totals,
};
use crate::llm::Message;

/// The engine's durable state (see the module doc for the promises every backend keeps).
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    // ------------------------------------------------------------------ process

    /// Claim the database for this process: the engine runs startup recovery and resumes suspended
    /// trees, which must never happen twice over one database. Readers (`opc tasks`) do not lock.
    async fn lock_exclusive(&self) -> Result<(), StoreError>;

    /// Call `notify` after every commit that appended to recall memory (`opc run` wakes the recall
    /// indexer with it; without it the indexer finds the rows on its next poll). Set once.
    fn on_recall_append(&self, notify: Box<dyn Fn() + Send + Sync>);

    /// Startup recovery, in one transaction: expired approvals rejected, tasks a stopped process left
    /// running failed with a notice to their conversation, trees suspended on an approval kept.
    async fn recover(&self) -> Result<Recovery, StoreError>;

    // ------------------------------------------------------------------ conversations and tasks

    /// Record a new conversation with `root_agent`, under `id` (no-op if it exists).
    async fn create_conversation(&self, id: &str, root_agent: &str) -> Result<(), StoreError>;

    /// The latest root task of a conversation, if any.
    async fn last_root_task(&self, conversation_id: &str)
    -> Result<Option<TaskRecord>, StoreError>;

    /// Record a new task (state CREATED). A root task is refused while its conversation has a live
    /// root ([`StoreError::Busy`]).
    async fn create_task(&self, task: &NewTask<'_>) -> Result<TaskId, StoreError>;

    /// One task.
    async fn task(&self, id: TaskId) -> Result<TaskRecord, StoreError>;

    /// The child a parent's tool call created, if it exists (makes delegation idempotent on resume).
    async fn child_for(
        &self,
        parent: TaskId,
        tool_use_id: &str,
        index: u32,
    ) -> Result<Option<TaskRecord>, StoreError>;

    /// A task's saved session history.
    async fn messages(&self, id: TaskId) -> Result<Vec<Message>, StoreError>;

    /// Save a task's session history (after every turn).
    async fn save_messages(&self, id: TaskId, messages: &[Message]) -> Result<(), StoreError>;

    /// Move a task to `next` (as [`Store::transition`]) and save its session history, atomically:
    /// the history is saved only if the transition is allowed. The previous state.
    ///
    /// Why one operation: a session back from its tool calls does both at once, and every store
    /// round trip is on a model turn's critical path. The default makes the two calls the session
    /// made before this operation existed (not atomic together: a task left EXECUTING without the
    /// tool results re-runs its tools on resume, and delegation finds its children again); a backend
    /// should do both in one transaction.
    async fn transition_and_save(
        &self,
        id: TaskId,
        next: TaskState,
        messages: &[Message],
    ) -> Result<TaskState, StoreError> {
        let previous = self.transition(id, next).await?;
        self.save_messages(id, messages).await?;
        Ok(previous)
    }

    /// Every task of a tree, in creation order (parents before children).
    async fn tree(&self, root_id: TaskId) -> Result<Vec<TaskRecord>, StoreError>;

    /// The most recent root tasks, newest first.
    async fn recent_roots(&self, limit: u32) -> Result<Vec<TaskRecord>, StoreError>;

    /// Tasks that have not ended, oldest first.
    async fn live_tasks(&self) -> Result<Vec<TaskRecord>, StoreError>;

    // ------------------------------------------------------------------ lifecycle

    /// Start (or resume) a task's session atomically: its record (CREATED becomes ASSIGNED, or
    /// EXECUTING when a model turn is next) and its saved history.
    async fn begin(&self, id: TaskId) -> Result<(TaskRecord, Vec<Message>), StoreError>;

    /// Move a task to `next` if the lifecycle allows it; the previous state. Same-state is a no-op.
    async fn transition(&self, id: TaskId, next: TaskState) -> Result<TaskState, StoreError>;

    /// End a task; `false` if it had already ended (it keeps its first ending).
    async fn finish(&self, id: TaskId, ending: Ending<'_>) -> Result<bool, StoreError>;

    /// Cancel a task and every live task below it, rejecting their pending approvals; the ids
    /// cancelled.
    async fn cancel_subtree(&self, id: TaskId, reason: &str) -> Result<Vec<TaskId>, StoreError>;

    /// Cancel every live task below `id` (not `id` itself), as [`Store::cancel_subtree`] does.
    async fn cancel_descendants(&self, id: TaskId, reason: &str)
    -> Result<Vec<TaskId>, StoreError>;

    // ------------------------------------------------------------------ ledger

    /// Record one LLM call and add it to its task's totals, atomically.
    async fn record_call(&self, call: &CallRecord) -> Result<(), StoreError>;

    /// Record one LLM call, its totals and the session history that includes its answer, atomically;
    /// with `completed`, the task is completed with that output too. Whether it was completed.
    async fn record_turn(
        &self,
        call: &CallRecord,
        messages: Option<&[Message]>,
        completed: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// The LLM calls made for a task, in order.
    async fn calls(&self, task_id: TaskId) -> Result<Vec<CallRecord>, StoreError>;

    /// Every task call (memory work apart) of a tree, in the order recorded, each with the time it
    /// ended (the ledger's row is written when the call returns): the request timeline.
    async fn tree_calls(&self, root_id: TaskId) -> Result<Vec<TimedCall>, StoreError>;

    /// What the privacy gateway did per task of a tree.
    async fn privacy_by_task(
        &self,
        root_id: TaskId,
    ) -> Result<HashMap<TaskId, TaskPrivacy>, StoreError>;

    /// A tree's tokens in, tokens out and cost.
    async fn tree_totals(&self, root_id: TaskId) -> Result<(u64, u64, f64), StoreError>;

    /// A tree's totals.
    async fn totals(&self, root_id: TaskId) -> Result<Totals, StoreError>;

    /// What the privacy gateway did per UTC day since `since_ms`.
    async fn privacy_by_day(&self, since_ms: i64) -> Result<Vec<PrivacyDay>, StoreError>;

    /// Spend since `since_ms`, by agent, model and conversation.
    async fn spend_since(&self, since_ms: i64) -> Result<Vec<Spend>, StoreError>;

    /// Record one remote embedding call (issue 39): no task, no text; shown apart in Costs.
    async fn record_embedding_call(
        &self,
        call: &crate::llm::embed::EmbedCall,
    ) -> Result<(), StoreError>;

    /// Embedding spend since `since_ms`, by model: [`Spend`] rows with `work = "embedding"`, no
    /// agent and no conversation.
    async fn embedding_spend_since(&self, since_ms: i64) -> Result<Vec<Spend>, StoreError>;

    /// The latest call per model within the last `window` calls.
    async fn latest_calls(&self, window: u32) -> Result<Vec<LatestCall>, StoreError>;

    /// Record one tool call (its duration and outcome; never its input).
    async fn record_tool_call(&self, call: &ToolCallRecord) -> Result<(), StoreError>;

    /// Every tool call of a tree's tasks, in the order they finished.
    async fn tool_calls(&self, root_id: TaskId) -> Result<Vec<ToolCallRecord>, StoreError>;

    // ------------------------------------------------------------------ approvals

    /// Record a pending approval for a task's tool call, or return the existing one for that call;
    /// whether it was created now.
    async fn request_approval(
        &self,
        task: &TaskRecord,
        tool_use_id: &str,
        summary: &str,
        options: &[OfferedOption],
        timeout: Duration,
    ) -> Result<(Approval, bool), StoreError>;

    /// One approval.
    async fn approval(&self, id: i64) -> Result<Option<Approval>, StoreError>;

    /// Approvals still waiting for a human, oldest first.
    async fn pending_approvals(&self) -> Result<Vec<Approval>, StoreError>;

    /// The latest approvals, newest first.
    async fn recent_approvals(&self, limit: u32) -> Result<Vec<Approval>, StoreError>;

    /// Every approval of a tree, pending or decided, oldest first.
    async fn tree_approvals(&self, root_id: TaskId) -> Result<Vec<Approval>, StoreError>;

    /// Decide an approval, at most once.
    async fn decide(&self, id: i64, decision: &str, by: &str) -> Result<Decided, StoreError>;

    /// Whether `agent` had this exact Bash `command` approved for the rest of `conversation_id`.
    async fn command_approved(
        &self,
        conversation_id: &str,
        agent: &str,
        command: &str,
    ) -> Result<bool, StoreError>;

    /// Remember that approval `approval` approved `command` for `agent` for the rest of
    /// `conversation_id`.
    async fn approve_command(
        &self,
        conversation_id: &str,
        agent: &str,
        command: &str,
        approval: i64,
    ) -> Result<(), StoreError>;

    // ------------------------------------------------------------------ notices

    /// Tell a conversation something (e.g. that its task was interrupted).
    async fn add_notice(
        &self,
        conversation_id: &str,
        task_id: Option<TaskId>,
        text: &str,
    ) -> Result<(), StoreError>;

    /// A conversation's notices, delivered or not, oldest first.
    async fn notices(&self, conversation_id: &str) -> Result<Vec<String>, StoreError>;

    /// Notices not yet delivered, oldest first.
    async fn undelivered_notices(&self) -> Result<Vec<Notice>, StoreError>;

    /// Mark a notice delivered; whether it was undelivered.
    async fn mark_notice_delivered(&self, id: i64) -> Result<bool, StoreError>;

    // ------------------------------------------------------------------ memory work

    /// The next queued memory job due at `now` (Unix ms), oldest first. A completed root's
    /// `extract` jobs are queued by the operation that completes it ([`Store::finish`],
    /// [`Store::record_turn`]), atomically with it. On a backend several nodes share (PostgreSQL),
    /// the job is claimed: it is not handed out again until the worker ends it or puts it off, or
    /// until a claim window (10 minutes) has passed, so a second call returns the next job.
    async fn next_memory_job(&self, now: i64) -> Result<Option<MemoryJob>, StoreError>;

    /// When the next queued memory job is due, if any is queued.
    async fn next_memory_job_at(&self) -> Result<Option<i64>, StoreError>;

    /// The latest `limit` memory jobs, newest first.
    async fn memory_jobs(&self, limit: u32) -> Result<Vec<MemoryJob>, StoreError>;

    /// End a queued memory job; `false` when it had ended already.
    async fn end_memory_job(
        &self,
        id: i64,
        end: JobEnd,
        error: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Drop a queued memory job that needs no work.
    async fn drop_memory_job(&self, id: i64) -> Result<(), StoreError>;

    /// Put a queued memory job off until `not_before`; `failed_attempt` counts a failed attempt.
    async fn defer_memory_job(
        &self,
        id: i64,
        not_before: i64,
        failed_attempt: bool,
        why: &str,
    ) -> Result<(), StoreError>;

    /// Record a memory-work LLM call (`work = 'memory'`) against its task, NOT added to the task's
    /// totals; the ledger row's id.
    async fn record_memory_call(&self, call: &CallRecord) -> Result<i64, StoreError>;

    /// The memory-work calls about a task, with their ledger ids, in order.
    async fn memory_calls(&self, task_id: TaskId) -> Result<Vec<(i64, CallRecord)>, StoreError>;

    /// Tokens (in + out) of `agent`'s memory work since `since_ms`.
    async fn memory_tokens_since(&self, agent: &str, since_ms: i64) -> Result<u64, StoreError>;

    /// Count root `root` toward `agent`'s next consolidation (once per root); at `frequency` roots,
    /// queue a `consolidate` job about `task` and start again. The job's id, when queued.
    async fn memory_root_seen(
        &self,
        agent: &str,
        root: TaskId,
        task: TaskId,
        conversation: Option<&str>,
        frequency: u32,
    ) -> Result<Option<i64>, StoreError>;

    /// Queue a `consolidate` job for every agent idle since `idle_before` with roots consolidation
    /// has not seen (and none queued); `(agent, job)` pairs.
    async fn idle_consolidations(&self, idle_before: i64)
    -> Result<Vec<(String, i64)>, StoreError>;

    /// The `seq`s of the recall rows written for task `task` of `conversation`.
    async fn recall_seqs(&self, task: TaskId, conversation: &str) -> Result<Vec<i64>, StoreError>;
}
