//! The engine's event bus: everything that happens to a task, as it happens, for live consumers
//! (`opc chat`'s trace, the chat gateway, the dashboard).
//!
//! Why `tokio::sync::broadcast`: many independent consumers, none of which may slow the engine down. A
//! consumer that falls behind loses the oldest events (it sees `Lagged`) rather than stalling agents;
//! the durable record is the database, not the bus.
//!
//! Invariant: events carry ids, agent ids, states and numbers, plus the text that consumers display
//! (streamed tokens, final answers, approval summaries). They are for display, never for logs.

use opc_privacy::EntityType;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::llm::privacy::{PrivacyEvents, PrivacyReport};
use crate::store::TaskId;

/// One thing that happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A task was recorded.
    TaskCreated {
        /// The task.
        task: TaskId,
        /// Its parent, for delegated tasks.
        parent: Option<TaskId>,
        /// Its root.
        root: TaskId,
        /// The conversation.
        conversation: String,
        /// The agent that will run it.
        agent: String,
    },
    /// An agent's session started (or resumed) on a task.
    AgentStarted {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
    },
    /// An agent called a tool.
    ToolCalled {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
        /// The tool's wire name.
        tool: String,
    },
    /// A tool call finished (the ledger has a row for it too).
    ToolFinished {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
        /// The tool's wire name.
        tool: String,
        /// Wall time of the call (an approval's wait and a delegation's subtree included).
        duration_ms: u64,
        /// `ok` or `error` (the result was a tool error).
        outcome: String,
        /// A command's exit code (Bash).
        exit_code: Option<i32>,
        /// What the tool noted as safe to show (Bash: the command without its arguments).
        detail: Option<String>,
    },
    /// A task was handed to a child agent.
    Delegated {
        /// The delegating task.
        task: TaskId,
        /// The new child task.
        child: TaskId,
        /// The delegating agent.
        from: String,
        /// The child agent.
        to: String,
    },
    /// Answer text streamed from a model.
    Token {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
        /// The text piece.
        text: String,
    },
    /// A retry discarded the text streamed so far for this task's current call.
    StreamRestarted {
        /// The task.
        task: TaskId,
    },
    /// The privacy gateway found personal data in a model call's request and masked it (or routed
    /// the request to the trusted model). Counts by type only, never values.
    PrivacyMasked {
        /// The task.
        task: TaskId,
        /// The agent (or `summarizer`).
        agent: String,
        /// `mask`, `redact` or `route`.
        mode: String,
        /// Occurrences by type (`{"PERSON_NAME": 2, "EMAIL": 1}`).
        counts: crate::llm::privacy::TypeCounts,
        /// All occurrences.
        total: u32,
        /// `provider/model` the request was routed to, in `route` mode.
        routed_to: Option<String>,
    },
    /// The privacy gateway's egress guard stopped a model call: the outbound request still carried a
    /// real value (its type only, never the value). Nothing was sent.
    PrivacyBlocked {
        /// The task.
        task: TaskId,
        /// The agent (or `summarizer`).
        agent: String,
        /// The type of the value found.
        kind: String,
    },
    /// An agent finished its task.
    AgentFinished {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
        /// Final state name (`COMPLETED`, `FAILED`, `ESCALATED`, `CANCELLED`).
        state: String,
        /// The answer (completed), error (failed/cancelled) or escalation reason.
        text: String,
        /// Prompt tokens used by the task itself.
        tokens_in: u64,
        /// Generated tokens.
        tokens_out: u64,
        /// USD.
        cost_usd: f64,
        /// Wall time.
        duration_ms: u64,
    },
    /// An agent escalated to its parent (or, at the root, to the human).
    Escalated {
        /// The task.
        task: TaskId,
        /// The agent.
        agent: String,
        /// `error`, `timeout`, `uncertainty` or `approval_needed`.
        kind: String,
        /// Why.
        reason: String,
    },
    /// An agent asked a human to decide.
    ApprovalRequested {
        /// The approval.
        approval: i64,
        /// The task waiting.
        task: TaskId,
        /// The conversation.
        conversation: String,
        /// The agent asking.
        agent: String,
        /// Its delegation path from the root (`ceo › vp-ops › support-agent`).
        path: Vec<String>,
        /// What to decide.
        summary: String,
        /// The choices.
        options: Vec<String>,
    },
    /// An approval was decided (by a human, a timeout or a cancellation).
    ApprovalResolved {
        /// The approval.
        approval: i64,
        /// The task it belongs to.
        task: TaskId,
        /// The option chosen.
        decision: String,
        /// Who decided.
        by: String,
    },
    /// `opc run` applied a changed config: roots started from now on use it (trees already
    /// running finish with the config they started with).
    ConfigReloaded {
        /// The config's generation (1 at start-up, +1 per applied reload).
        generation: u64,
        /// What triggered it: `console`, `file` or `signal`.
        trigger: String,
        /// Agents in the new org.
        agents: usize,
    },
    /// Fact extraction recorded a batch in an agent's long-term facts (one transaction).
    FactsRecorded {
        /// Whose facts.
        agent: String,
        /// The task the facts were extracted from (or that triggered a consolidation).
        task: Option<TaskId>,
        /// Versions opened by ADD.
        added: usize,
        /// Facts given a new version by UPDATE.
        updated: usize,
        /// Versions closed by INVALIDATE.
        invalidated: usize,
        /// ADDs dropped as exact duplicates of a current fact.
        duplicates: usize,
    },
    /// A `record_facts` answer was malformed (or named a fact that was not listed): nothing was
    /// written, and the job is not retried.
    FactsRejected {
        /// Whose facts.
        agent: String,
        /// The task.
        task: Option<TaskId>,
        /// What was wrong, and where (`facts[2].target: 17 was not listed`).
        reason: String,
    },
    /// An agent's memory work reached `consolidation.maxTokensPerDay`: its jobs wait for the next
    /// UTC day (a consolidation run in progress ends).
    MemoryWorkCapped {
        /// The agent.
        agent: String,
        /// Memory-work tokens it used today.
        used: u64,
        /// The cap.
        cap: u64,
    },
    /// A memory job gave up: its model could not be reached after several attempts.
    MemoryWorkFailed {
        /// The agent.
        agent: String,
        /// The task.
        task: Option<TaskId>,
        /// `extract` or `consolidate`.
        kind: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        error: String,
    },
    /// A consolidation run ended: what it changed (each change its own versioned edit, with source
    /// `consolidation`).
    Consolidated {
        /// The agent.
        agent: String,
        /// Model turns the run took.
        turns: u32,
        /// Fact versions opened by ADD.
        added: usize,
        /// Facts given a new version by UPDATE.
        updated: usize,
        /// Versions closed by INVALIDATE (merged duplicates among them).
        invalidated: usize,
        /// Core block edits.
        block_edits: usize,
        /// Tool calls refused (malformed, stale, over a limit): nothing of those was written.
        refused: usize,
    },
    /// A changed config was refused (it is invalid, or could not be applied); the running one stays.
    ConfigRejected {
        /// What triggered it: `console`, `file` or `signal`.
        trigger: String,
        /// How many errors it has.
        errors: usize,
    },
}

/// The bus: clone it freely; every clone publishes to the same subscribers.
///
/// Two streams: everything ([`EventBus::subscribe`]: what consumers display), and what happened in
/// this process only ([`EventBus::subscribe_local`]: what a cluster node relays to the others, so a
/// relayed event never travels back).
#[derive(Clone, Debug)]
pub struct EventBus {
    sender: broadcast::Sender<Event>,
    local: broadcast::Sender<Event>,
}

impl EventBus {
    /// A bus that buffers `capacity` events per slow subscriber.
    pub fn new(capacity: usize) -> Self {
        EventBus {
            sender: broadcast::channel(capacity.max(16)).0,
            local: broadcast::channel(capacity.max(16)).0,
        }
    }

    /// Publish something that happened here; having no subscriber is fine.
    pub fn publish(&self, event: Event) {
        if self.local.receiver_count() > 0 {
            let _ = self.local.send(event.clone());
        }
        let _ = self.sender.send(event);
    }

    /// Publish something that happened on another node of the cluster (relayed to this one).
    pub fn publish_remote(&self, event: Event) {
        let _ = self.sender.send(event);
    }

    /// Subscribe to every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }

    /// Subscribe to the events that happen in this process from now on.
    pub fn subscribe_local(&self) -> broadcast::Receiver<Event> {
        self.local.subscribe()
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(4096)
    }
}

/// The privacy layer's announcements, published as the events of the task they happened in (the
/// engine makes the bus the listener of its call stack).
impl PrivacyEvents for EventBus {
    fn masked(&self, task: TaskId, agent: &str, report: &PrivacyReport) {
        self.publish(Event::PrivacyMasked {
            task,
            agent: agent.to_string(),
            mode: report.mode.to_string(),
            counts: report.counts.clone(),
            total: report.counts.total(),
            routed_to: report.routed_to.clone(),
        });
    }

    fn blocked(&self, task: TaskId, agent: &str, kind: EntityType) {
        self.publish(Event::PrivacyBlocked {
            task,
            agent: agent.to_string(),
            kind: kind.as_str().to_string(),
        });
    }
}
