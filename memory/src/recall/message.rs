//! What recall stores and returns: a message with its provenance, and a search hit.
//!
//! Invariant: provenance is immutable once appended (the table is append-only); the content hash is
//! sha256 of the text, so a reader can check a recalled snippet was not altered.
//!
//! The recall preamble ([`RECALL_HEAD`] … [`RECALL_TAIL`]) is defined here, beside what recall
//! stores, because it must never be stored: what the Select step put before a task is memory
//! already (recalled messages and facts), not something anyone said. The engine composes it with
//! these constants and cuts a copy of it out of any text it stores or extracts from
//! ([`without_recall`]), so old statements are not stored and extracted again every turn.

use sha2::{Digest, Sha256};

use super::date;

/// The first line of the recalled memory the Select step puts before a task.
pub const RECALL_HEAD: &str = "Relevant memory:\n";
/// Its end: a blank line after the last item, then the task's label; the task follows.
pub const RECALL_TAIL: &str = "\n\nTask:\n";

/// `text` without the recall preamble(s) at its start: what follows the first [`RECALL_TAIL`] after a
/// leading [`RECALL_HEAD`], repeatedly (a delegation that copied its manager's preamble may start with
/// two). A text that does not start with the head, or whose head has no tail, is returned whole:
/// only the exact shape the engine composes is cut, never words a person wrote.
pub fn without_recall(mut text: &str) -> &str {
    while let Some(rest) = text.strip_prefix(RECALL_HEAD) {
        match rest.find(RECALL_TAIL) {
            Some(end) => text = &rest[end + RECALL_TAIL.len()..],
            None => break,
        }
    }
    text
}

/// A message to append: the text and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// The agent namespace the message belongs to (the agent's id); the ACL filters on it.
    pub namespace: String,
    /// Who wrote it: a platform user id or an agent id.
    pub author: String,
    /// The conversation.
    pub conversation: String,
    /// The task, when the message belongs to one.
    pub task: Option<String>,
    /// The platform thread (or session), when known. Neighbours are taken within one thread.
    pub thread: Option<String>,
    /// The platform's id of the message (LoCoMo's `dia_id` in the eval), when known.
    pub source_id: Option<String>,
    /// When it was written, milliseconds since the Unix epoch (UTC).
    pub time_ms: i64,
    /// The text.
    pub text: String,
}

impl NewMessage {
    /// Lowercase hex sha256 of the text.
    pub fn content_hash(&self) -> String {
        hex::encode(Sha256::digest(self.text.as_bytes()))
    }
}

/// A stored message: its sequence number and everything appended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Message {
    /// Sequence number (unique, increasing in commit order).
    pub seq: i64,
    /// Namespace (agent id).
    pub namespace: String,
    /// Author.
    pub author: String,
    /// Conversation.
    pub conversation: String,
    /// Task.
    pub task: Option<String>,
    /// Thread.
    pub thread: Option<String>,
    /// Platform message id.
    pub source_id: Option<String>,
    /// Time, ms since the epoch.
    pub time_ms: i64,
    /// sha256 of the text.
    pub content_hash: String,
    /// The text.
    pub text: String,
}

impl Message {
    /// The text the indexers see: the date and the author before the words, so "when" and "who"
    /// questions match them (measured on LoCoMo: see docs/memory.md's recall table).
    pub fn indexed_text(&self) -> String {
        format!(
            "[{}] {}: {}",
            date::render_day(self.time_ms),
            self.author,
            self.text
        )
    }
}

/// One search result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Hit {
    /// The message, with provenance.
    pub message: Message,
    /// Fused score (higher is better; comparable only within one search).
    pub score: f32,
    /// Rank in the BM25 list (1-based), when it was there.
    pub bm25_rank: Option<usize>,
    /// Rank in the vector list (1-based), when it was there.
    pub vector_rank: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recall_preamble_is_cut_and_nothing_else() {
        let task = "What is the launch code word?";
        let preamble = format!(
            "{RECALL_HEAD}- [29 November 2026, user] the code word is PAPAYA-7731\n- [fact, valid from \
             2026-05-17] The launch is on May 17th\n{RECALL_TAIL}"
        );
        assert_eq!(without_recall(&format!("{preamble}{task}")), task);
        // A delegation that copied its manager's preamble under its own.
        assert_eq!(without_recall(&format!("{preamble}{preamble}{task}")), task);
        // Not the engine's shape: kept whole.
        assert_eq!(without_recall(task), task);
        let no_tail = format!("{RECALL_HEAD}- [1 May 2026, user] hi\n{task}");
        assert_eq!(without_recall(&no_tail), no_tail);
        let later = format!("{task}\n{preamble}");
        assert_eq!(
            without_recall(&later),
            later,
            "only a leading preamble is the engine's"
        );
        assert_eq!(without_recall(""), "");
    }
}
