//! Streaming a reply into a chat thread: progressive edits at a bounded rate, split at the platform's
//! length limit, and a final edit that is exact.
//!
//! Why edits and not a message per token: chat platforms rate-limit writes (Slack ~1 `chat.update` per
//! second per channel, Discord 5 edits per 5 s), so the reply is one message edited at most once per
//! [`Adapter::edit_interval`]; text beyond [`Adapter::max_message_len`] continues in a new message.
//!
//! Invariants:
//! - after [`StreamingReply::finish`] the thread shows exactly the final answer, rendered for the
//!   platform, split the same way whatever was streamed before (a retried model call that restarted its
//!   stream leaves no trace);
//! - text shown before [`StreamingReply::seal`] (an approval card came next) stays as it was shown,
//!   and everything after it, the final answer included, goes in new messages: the thread reads in
//!   the order things happened, the answer below the card it waited for;
//! - no message is edited more often than the adapter allows, except by `finish`;
//! - splitting never cuts a character in two.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::{Adapter, AdapterError, Place, Posted};

/// Shown at the end of a message while more is coming.
const TYPING: &str = " …";

/// One reply being streamed into one thread.
pub struct StreamingReply {
    adapter: Arc<dyn Adapter>,
    place: Place,
    /// Markdown received so far.
    text: String,
    /// Messages posted, with the text each shows now.
    messages: Vec<(Posted, String)>,
    /// Text arrived since the last flush.
    dirty: bool,
    /// A turn ended since the last text: the next text starts a new paragraph.
    turn_ended: bool,
    last_flush: Option<Instant>,
}

impl StreamingReply {
    /// A reply that will be posted in `place`. Nothing is posted until there is text.
    pub fn new(adapter: Arc<dyn Adapter>, place: Place) -> StreamingReply {
        StreamingReply {
            adapter,
            place,
            text: String::new(),
            messages: Vec::new(),
            dirty: false,
            turn_ended: false,
            last_flush: None,
        }
    }

    /// Append streamed text.
    pub fn push(&mut self, piece: &str) {
        if !piece.is_empty() {
            if std::mem::take(&mut self.turn_ended) && !self.text.trim_end().is_empty() {
                // Text of a new model turn (after a tool call) starts a paragraph of its own, instead
                // of running on from the last sentence ("on this.Here is").
                let kept = self.text.trim_end().len();
                self.text.truncate(kept);
                self.text.push_str("\n\n");
            }
            self.text.push_str(piece);
            self.dirty = true;
        }
    }

    /// The model's turn ended (it called a tool); text that streams next belongs to a new turn.
    pub fn end_turn(&mut self) {
        self.turn_ended = true;
    }

    /// Forget the text streamed so far (the model call was retried and streams again from the start).
    pub fn restart(&mut self) {
        self.text.clear();
        self.turn_ended = false;
        self.dirty = true;
    }

    /// Something is about to be posted in the thread (an approval card): finish what is shown so far
    /// as it is (without the typing mark) and leave those messages alone from now on, so the text that
    /// comes next, and the final answer, are posted below it instead of overwriting it above.
    pub async fn seal(&mut self) -> Result<(), AdapterError> {
        if !self.text.trim().is_empty() {
            let shown = self.adapter.render(&self.text);
            self.show(&shown).await?;
        }
        self.messages.clear();
        self.text.clear();
        self.dirty = false;
        self.turn_ended = false;
        Ok(())
    }

    /// When the next flush may happen, if there is anything to flush.
    pub fn due(&self) -> Option<Instant> {
        if !self.dirty {
            return None;
        }
        Some(match self.last_flush {
            Some(at) => at + self.adapter.edit_interval(),
            None => Instant::now(),
        })
    }

    /// Show the text so far if the rate allows; a no-op otherwise.
    pub async fn flush_if_due(&mut self) -> Result<(), AdapterError> {
        match self.due() {
            Some(at) if at <= Instant::now() => {
                let shown = format!("{}{TYPING}", self.adapter.render(&self.text));
                self.show(&shown).await?;
                self.dirty = false;
                self.last_flush = Some(Instant::now());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Replace everything with the final answer and return the messages that hold it.
    pub async fn finish(mut self, final_markdown: &str) -> Result<Vec<Posted>, AdapterError> {
        let rendered = self.adapter.render(final_markdown);
        let rendered = if rendered.trim().is_empty() {
            "(no answer)".to_string()
        } else {
            rendered
        };
        self.show(&rendered).await?;
        Ok(self
            .messages
            .into_iter()
            .map(|(posted, _)| posted)
            .collect())
    }

    /// Make the thread show `text`, split into messages, editing only what changed.
    async fn show(&mut self, text: &str) -> Result<(), AdapterError> {
        let chunks = split_message(text, self.adapter.max_message_len());
        for (index, chunk) in chunks.iter().enumerate() {
            match self.messages.get_mut(index) {
                Some((posted, shown)) => {
                    if shown != chunk {
                        self.adapter.edit(posted, chunk).await?;
                        *shown = chunk.clone();
                    }
                }
                None => {
                    let posted = self.adapter.post(&self.place, chunk).await?;
                    self.messages.push((posted, chunk.clone()));
                }
            }
        }
        // Shorter than before (a restarted stream): blank the messages no longer needed.
        for (posted, shown) in self.messages.iter_mut().skip(chunks.len()) {
            if shown != "…" {
                self.adapter.edit(posted, "…").await?;
                *shown = "…".to_string();
            }
        }
        Ok(())
    }
}

/// Split `text` into pieces of at most `max` characters, preferring to cut after a newline, then after
/// a space; never inside a character. Empty text gives one empty piece.
pub fn split_message(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.chars().count() > max {
        // Byte index just past the `max`-th character.
        let limit = rest
            .char_indices()
            .nth(max)
            .map_or(rest.len(), |(index, _)| index);
        let window = &rest[..limit];
        let cut = window
            .rfind('\n')
            .map(|i| i + 1)
            .filter(|&i| i > limit / 2)
            .or_else(|| window.rfind(' ').map(|i| i + 1).filter(|&i| i > limit / 2))
            .unwrap_or(limit);
        pieces.push(rest[..cut].to_string());
        rest = &rest[cut..];
    }
    pieces.push(rest.to_string());
    pieces
}

/// Default least time between edits of one message, for adapters without a stricter rule.
pub const DEFAULT_EDIT_INTERVAL: Duration = Duration::from_millis(1000);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_of_a_new_turn_starts_a_paragraph() {
        let (inbox, _inbound) = tokio::sync::mpsc::channel(1);
        let config = crate::web::WebConfig {
            title: "t".into(),
            database: crate::web::WebDatabase::Memory,
        };
        let adapter = crate::web::WebChat::new(config, inbox).unwrap_or_else(|e| panic!("{e}"));
        let place = Place {
            platform: crate::Platform::Web,
            workspace: "web".into(),
            channel: "c".into(),
            thread: "c".into(),
        };
        let mut reply = StreamingReply::new(adapter, place);
        reply.end_turn(); // nothing streamed yet: no leading break
        reply.push("I'll check on this.");
        reply.end_turn();
        reply.end_turn();
        reply.push("Here is");
        reply.push(" the plan.");
        assert_eq!(reply.text, "I'll check on this.\n\nHere is the plan.");
        reply.restart();
        reply.push("again");
        assert_eq!(reply.text, "again");
    }

    #[tokio::test]
    async fn after_a_seal_the_answer_goes_below_what_came_between() {
        let (inbox, _inbound) = tokio::sync::mpsc::channel(1);
        let config = crate::web::WebConfig {
            title: "t".into(),
            database: crate::web::WebDatabase::Memory,
        };
        let adapter = crate::web::WebChat::new(config, inbox).unwrap_or_else(|e| panic!("{e}"));
        let place = Place {
            platform: crate::Platform::Web,
            workspace: "web".into(),
            channel: "c".into(),
            thread: "c".into(),
        };
        let mut reply = StreamingReply::new(adapter.clone(), place.clone());
        reply.push("Let me ask first.");
        reply.flush_if_due().await.unwrap_or_else(|e| panic!("{e}"));
        reply.end_turn();
        reply.seal().await.unwrap_or_else(|e| panic!("{e}"));
        let card = crate::Card {
            approval: 1,
            agent: "ceo".into(),
            role: "CEO".into(),
            path: vec!["ceo".into()],
            summary: "Go?".into(),
            options: vec!["approve".into()],
            go_ahead: Some(0),
            state: crate::CardState::Pending,
        };
        let card = adapter
            .post_card(&place, &card)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        reply.push("Done.");
        let answer = reply
            .finish("Done.")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.len(), 1);
        let number = |p: &Posted| p.id.parse::<i64>().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            number(&answer[0]) > number(&card),
            "the answer ({:?}) is posted after the card ({card:?})",
            answer[0]
        );
    }

    #[test]
    fn splits_prefer_newlines_then_spaces_and_keep_every_character() {
        let text = "first line\nsecond line is longer\nthird";
        let pieces = split_message(text, 16);
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| p.chars().count() <= 16));
        assert_eq!(pieces[0], "first line\n");

        let words = "alpha beta gamma delta";
        let pieces = split_message(words, 12);
        assert_eq!(pieces, ["alpha beta ", "gamma delta"]);

        let wide = "ééééé";
        let pieces = split_message(wide, 2);
        assert_eq!(pieces, ["éé", "éé", "é"]);
        assert_eq!(split_message("", 5), [""]);
    }
}
