//! A task's lifecycle states and the transitions between them — the one definition of which states
//! are live and which have ended (the SQL in this module's siblings derives from it).

use std::sync::OnceLock;

use serde::Serialize;

/// A task id (SQLite rowid).
pub type TaskId = i64;

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    /// Recorded, not yet picked up.
    Created,
    /// Picked up by its agent's session.
    Assigned,
    /// Waiting for children it delegated to.
    Delegated,
    /// Its agent is thinking (an LLM call or a tool is running).
    Executing,
    /// Final answer produced; being summarised / handed to the parent.
    ResultPropagating,
    /// Done, with an output.
    Completed,
    /// Failed, with an error.
    Failed,
    /// Ended by an escalation to the parent.
    Escalated,
    /// Suspended until a human decides an approval.
    AwaitingApproval,
    /// Cancelled (by a human, or because an ancestor was).
    Cancelled,
}

impl TaskState {
    /// Every state, in lifecycle order.
    pub const ALL: [TaskState; 10] = [
        TaskState::Created,
        TaskState::Assigned,
        TaskState::Delegated,
        TaskState::Executing,
        TaskState::ResultPropagating,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Escalated,
        TaskState::AwaitingApproval,
        TaskState::Cancelled,
    ];

    /// The name stored in the database and shown to people.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Created => "CREATED",
            TaskState::Assigned => "ASSIGNED",
            TaskState::Delegated => "DELEGATED",
            TaskState::Executing => "EXECUTING",
            TaskState::ResultPropagating => "RESULT_PROPAGATING",
            TaskState::Completed => "COMPLETED",
            TaskState::Failed => "FAILED",
            TaskState::Escalated => "ESCALATED",
            TaskState::AwaitingApproval => "AWAITING_APPROVAL",
            TaskState::Cancelled => "CANCELLED",
        }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        TaskState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether the task has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Escalated | TaskState::Cancelled
        )
    }

    /// The terminal states as an SQL list, `('COMPLETED', …)`, derived from [`TaskState::is_terminal`]:
    /// the store's queries for live tasks use it (`state NOT IN …`), so there is one definition.
    pub(super) fn terminal_sql() -> &'static str {
        static LIST: OnceLock<String> = OnceLock::new();
        LIST.get_or_init(|| {
            let names: Vec<String> = TaskState::ALL
                .into_iter()
                .filter(|s| s.is_terminal())
                .map(|s| format!("'{}'", s.as_str()))
                .collect();
            format!("({})", names.join(", "))
        })
    }

    /// The allowed transitions. Any live state may fail or be cancelled; `ESCALATED` is reachable from
    /// any live state too, since a timeout escalates whatever the task was doing.
    pub fn may_become(self, next: TaskState) -> bool {
        use TaskState::*;
        if self.is_terminal() {
            return false;
        }
        match next {
            Failed | Cancelled | Escalated => true,
            Assigned => self == Created,
            Executing => matches!(self, Assigned | Delegated | AwaitingApproval | Executing),
            // A turn may delegate and ask for approval at once, so the two waits can alternate.
            Delegated => matches!(self, Executing | AwaitingApproval),
            AwaitingApproval => matches!(self, Executing | Delegated),
            ResultPropagating => self == Executing,
            Completed => self == ResultPropagating,
            Created => false,
        }
    }
}
