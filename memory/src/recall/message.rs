//! What recall stores and returns: a message with its provenance, and a search hit.
//!
//! Invariant: provenance is immutable once appended (the table is append-only); the content hash is
//! sha256 of the text, so a reader can check a recalled snippet was not altered.

use sha2::{Digest, Sha256};

use super::date;

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
