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

use std::collections::HashMap;

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
        record.input.trim()
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
        record.output.as_deref().unwrap_or("").trim()
    ));
    out
}
