//! The approval a Bash command raises when its policy says `ask`: the card's text and its three
//! options, and what the decision means for the command.
//!
//! The options carry their outcome (`{label, outcome}`), so every surface (Slack, Discord, the web
//! chat, `opc chat`) shows three buttons and the engine reads the decision without guessing from the
//! wording: "Approve once" and "Approve `<command>` for this conversation" approve, "Reject" rejects.
//! Which approval it was is told by the label chosen, which the store records as the decision.
//!
//! Invariant (fail closed): anything but one of the two approving labels — a rejection, a timeout, a
//! cancellation, an error — is a rejection, and the command does not run.

use std::path::Path;

use crate::store::{
    Approval, ApprovalOption, ApprovalState, OfferedOption, OptionOutcome, SystemDecider,
};

/// The "approve once" label.
pub const ONCE: &str = "Approve once";
/// The "reject" label.
pub const REJECT: &str = "Reject";

/// How much of the command the "for this conversation" button shows (buttons are short: Slack cuts
/// a button's text at 75 characters).
const LABEL_COMMAND_CHARS: usize = 40;

/// The "approve for this conversation" label for `command` (shortened to fit a button).
pub fn for_conversation(command: &str) -> String {
    let one_line = command.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown: String = if one_line.chars().count() > LABEL_COMMAND_CHARS {
        let mut s: String = one_line.chars().take(LABEL_COMMAND_CHARS - 1).collect();
        s.push('…');
        s
    } else {
        one_line
    };
    format!("Approve `{shown}` for this conversation")
}

/// The three options, in button order.
pub fn options(command: &str) -> Vec<OfferedOption> {
    [
        (ONCE.to_string(), OptionOutcome::Approve),
        (for_conversation(command), OptionOutcome::Approve),
        (REJECT.to_string(), OptionOutcome::Reject),
    ]
    .into_iter()
    .map(|(label, outcome)| OfferedOption::With(ApprovalOption { label, outcome }))
    .collect()
}

/// The card's text: the agent, the command, the working directory and the agent's description.
pub(super) fn summary(
    agent: &str,
    command: &str,
    workdir: &Path,
    description: Option<&str>,
    why: &str,
) -> String {
    let mut text = format!(
        "{agent} wants to run a shell command (not in its allowed list: {why}).\nCommand: {command}\nIn: {}",
        workdir.display()
    );
    if let Some(d) = description.map(str::trim).filter(|d| !d.is_empty()) {
        text.push_str(&format!("\nWhy: {d}"));
    }
    text
}

/// What a decided approval means for the command.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Run it this time.
    Once,
    /// Run it, and do not ask again for it in this conversation.
    ForConversation,
    /// Do not run it; the tool result, saying why.
    Rejected(String),
}

/// Read a decided approval (see the module's invariant).
pub(super) fn verdict(approval: &Approval, command: &str) -> Verdict {
    let not_run = |why: &str| Verdict::Rejected(format!("not run: {why}; the command did not run"));
    match approval.system_decider() {
        Some(SystemDecider::Timeout) => {
            return not_run(
                "no decision was made before the approval timed out, which counts as a rejection",
            );
        }
        Some(SystemDecider::Cancelled) => return not_run("the approval was cancelled"),
        Some(SystemDecider::Error) => return not_run("the approval could not be processed"),
        None => {}
    }
    let decision = approval.decision.as_deref().unwrap_or_default();
    if approval.state == ApprovalState::Approved {
        if decision == ONCE {
            return Verdict::Once;
        }
        if decision == for_conversation(command) {
            return Verdict::ForConversation;
        }
    }
    let by = approval.decided_by.as_deref().unwrap_or("unknown");
    not_run(&format!("rejected by {by}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::resolve_options;

    fn decided(decision: &str, state: ApprovalState, by: &str) -> Approval {
        Approval {
            id: 1,
            task_id: 1,
            root_id: 1,
            conversation_id: "c".into(),
            agent: "dev".into(),
            tool_use_id: "t".into(),
            summary: "s".into(),
            options: resolve_options(&options("cargo build")),
            state,
            decision: Some(decision.into()),
            decided_by: Some(by.into()),
            created_at: 0,
            expires_at: 0,
            decided_at: Some(0),
        }
    }

    #[test]
    fn three_options_two_approve_one_rejects() {
        let resolved = resolve_options(&options("cargo build --release"));
        let got: Vec<(&str, OptionOutcome)> = resolved
            .iter()
            .map(|o| (o.label.as_str(), o.outcome))
            .collect();
        assert_eq!(
            got,
            [
                ("Approve once", OptionOutcome::Approve),
                (
                    "Approve `cargo build --release` for this conversation",
                    OptionOutcome::Approve
                ),
                ("Reject", OptionOutcome::Reject),
            ]
        );
        crate::store::check_options(&options("x")).unwrap();
    }

    #[test]
    fn a_long_command_is_shortened_on_its_button() {
        let long = format!("echo {}\n  && ls", "a".repeat(100));
        let label = for_conversation(&long);
        assert!(label.chars().count() <= 75, "{label}");
        assert!(label.contains('…') && !label.contains('\n'), "{label}");
        // Deterministic: the decision is matched against it again.
        assert_eq!(label, for_conversation(&long));
    }

    #[test]
    fn the_decision_says_what_to_do() {
        let cmd = "cargo build";
        assert_eq!(
            verdict(&decided(ONCE, ApprovalState::Approved, "alice"), cmd),
            Verdict::Once
        );
        assert_eq!(
            verdict(
                &decided(&for_conversation(cmd), ApprovalState::Approved, "alice"),
                cmd
            ),
            Verdict::ForConversation
        );
        let Verdict::Rejected(text) =
            verdict(&decided(REJECT, ApprovalState::Rejected, "bob"), cmd)
        else {
            panic!("rejected")
        };
        assert!(
            text.contains("rejected by bob") && text.contains("did not run"),
            "{text}"
        );
        let Verdict::Rejected(text) =
            verdict(&decided("reject", ApprovalState::Rejected, "timeout"), cmd)
        else {
            panic!("rejected")
        };
        assert!(text.contains("timed out"), "{text}");
        let Verdict::Rejected(text) = verdict(
            &decided("reject", ApprovalState::Rejected, "cancelled"),
            cmd,
        ) else {
            panic!("rejected")
        };
        assert!(text.contains("cancelled"), "{text}");
        // Another command's "for this conversation" label does not approve this one.
        assert!(matches!(
            verdict(
                &decided(&for_conversation("ls"), ApprovalState::Approved, "alice"),
                cmd
            ),
            Verdict::Rejected(_)
        ));
    }

    #[test]
    fn the_card_shows_agent_command_directory_and_description() {
        let text = summary(
            "dev",
            "make deploy",
            Path::new("/w/dev"),
            Some("ship it"),
            "`make…` starts with no allowed prefix",
        );
        for needle in [
            "dev",
            "make deploy",
            "/w/dev",
            "Why: ship it",
            "no allowed prefix",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(!summary("dev", "ls", Path::new("/w"), Some("  "), "x").contains("Why"));
    }
}
