//! How a task ends, as its parent (or the human, for a root) sees it: [`TaskEnd`], the structured
//! [`Escalation`] an agent raises, and how an escalation reads to people ([`render_escalation`]).
//!
//! Why a leaf module: the session produces these, the delegation tools hand them to the parent, the
//! engine turns a root's into an outcome and the store writes escalations to recall memory. A module
//! that depends on nothing else in the crate lets all of them share the types without depending on
//! each other (before, the store imported the session and the tools for this).
//!
//! Invariant: this module depends on no other module of the crate (the `module_graph` test checks
//! that the crate's modules form no cycle).

use serde::{Deserialize, Serialize};

/// How a task ended, as its parent (or the human, for a root) sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskEnd {
    /// The answer the parent gets (a summary when the output was compressed).
    Completed(String),
    /// A structured escalation.
    Escalated(Escalation),
    /// An error message.
    Failed(String),
    /// Cancelled, with the reason.
    Cancelled(String),
}

/// The kinds of escalation.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EscalationKind {
    /// Something failed.
    Error,
    /// It took too long.
    Timeout,
    /// The agent is unsure.
    Uncertainty,
    /// A human must decide.
    ApprovalNeeded,
}

impl EscalationKind {
    /// Wire spellings.
    pub const NAMES: [&'static str; 4] = ["error", "timeout", "uncertainty", "approval_needed"];

    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationKind::Error => "error",
            EscalationKind::Timeout => "timeout",
            EscalationKind::Uncertainty => "uncertainty",
            EscalationKind::ApprovalNeeded => "approval_needed",
        }
    }
}

/// `escalate` arguments, and the structured escalation a parent receives.
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Escalation {
    /// What kind of problem.
    #[serde(rename = "type")]
    pub kind: EscalationKind,
    /// Why.
    pub reason: String,
    /// Work done so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_result: Option<String>,
}

/// An escalation as a human reads it.
pub fn render_escalation(agent: &str, e: &Escalation) -> String {
    let mut text = format!("Escalated by {agent} ({}): {}", e.kind.as_str(), e.reason);
    if let Some(partial) = e.partial_result.as_deref().filter(|p| !p.is_empty()) {
        text.push_str("\nPartial result: ");
        text.push_str(partial);
    }
    text
}
