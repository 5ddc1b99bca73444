//! The exchange of one task as the extraction call reads it: the instructions the agent was given,
//! the results of its tool calls when they are small, and its answer.
//!
//! Why small tool results only: they often carry the facts (a child's report, a file's line), but a
//! large one (a whole file, a long report) would make the one cheap call expensive; the answer that
//! used it is in the exchange anyway. Each result is cut at [`RESULT_CHARS`] and all of them at
//! [`RESULTS_CHARS`]; failed tool calls are left out.
//!
//! The text is deterministic for a task, so its hash identifies the exchange (an exchange already
//! extracted is not sent twice).
//!
//! Hygiene: the exchange is what the agent was given and what it answered, never the recalled
//! memory the Select step put before the task (memory already: read as new, its statements would be
//! extracted again every turn, in new words a real model finds, which exact-text dedup cannot
//! catch). The task is the record's input, which never holds it (the session puts it in the request
//! only); a copy quoted at its start (a delegation that repeated its manager's request) is cut
//! (`without_recall`). The shape (`Task given to`, `Tool results:`, `Answer of`) is what the privacy
//! layer cuts into parts (`llm/privacy/parts.rs`): it does not change.

use std::collections::HashMap;

use opc_memory::recall::message::without_recall;

use crate::llm::{Content, Message};
use crate::store::TaskRecord;

/// Longest tool result included, in characters.
const RESULT_CHARS: usize = 1_500;
/// Most characters of tool results in one exchange.
const RESULTS_CHARS: usize = 4_000;

/// The exchange of `record` (a completed task) with its saved `messages`.
pub(super) fn render(record: &TaskRecord, messages: &[Message]) -> String {
    let mut out = format!(
        "Task given to `{}`:\n{}\n",
        record.agent,
        without_recall(&record.input).trim()
    );
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut results = String::new();
    for message in messages {
        for block in &message.content {
            match block {
                Content::ToolUse { id, name, .. } => {
                    names.insert(id, name);
                }
                Content::ToolResult {
                    tool_use_id,
                    content,
                    is_error: false,
                } => {
                    let content = content.trim();
                    if content.is_empty() || content.chars().count() > RESULT_CHARS {
                        continue;
                    }
                    let name = names.get(tool_use_id.as_str()).copied().unwrap_or("tool");
                    let line = format!("- {name}: {content}\n");
                    if results.chars().count() + line.chars().count() > RESULTS_CHARS {
                        continue;
                    }
                    results.push_str(&line);
                }
                _ => {}
            }
        }
    }
    if !results.is_empty() {
        out.push_str("\nTool results:\n");
        out.push_str(&results);
    }
    out.push_str(&format!(
        "\nAnswer of `{}`:\n{}\n",
        record.agent,
        without_recall(record.output.as_deref().unwrap_or("")).trim()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TaskState;
    use opc_memory::recall::message::{RECALL_HEAD, RECALL_TAIL};

    fn record(input: &str, output: &str) -> TaskRecord {
        TaskRecord {
            id: 7,
            parent_id: None,
            root_id: 7,
            conversation_id: "c".into(),
            agent: "ceo".into(),
            depth: 0,
            tool_use_id: None,
            tool_index: 0,
            state: TaskState::Completed,
            input: input.into(),
            output: Some(output.into()),
            summary: None,
            error: None,
            escalation: None,
            created_at: 0,
            updated_at: 0,
            finished_at: Some(0),
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: 0.0,
            llm_calls: 1,
            unknown_usage_calls: 0,
            node: None,
            trace: None,
        }
    }

    #[test]
    fn the_exchange_is_what_was_written_never_the_recalled_memory() {
        let recalled = "- [28 November 2026, user] the code word is PAPAYA-7731";
        let preamble = format!("{RECALL_HEAD}{recalled}{RECALL_TAIL}");
        let task = "Who leads the Orion project?";
        // The saved history holds the task as written; a delegation may have quoted the preamble
        // into the input itself: both render the same exchange.
        let answer = Message {
            role: crate::llm::Role::Assistant,
            content: vec![Content::text("Marco Diaz.")],
        };
        let messages = vec![Message::user(task), answer];
        for input in [task.to_string(), format!("{preamble}{task}")] {
            let text = render(&record(&input, "Marco Diaz."), &messages);
            assert_eq!(
                text,
                format!("Task given to `ceo`:\n{task}\n\nAnswer of `ceo`:\nMarco Diaz.\n"),
                "the shape the privacy layer cuts into parts"
            );
            assert!(!text.contains("Relevant memory"), "{text}");
            assert!(!text.contains("PAPAYA"), "{text}");
        }
    }
}
