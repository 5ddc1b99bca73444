//! The parts a text is detected in ([`parts`]): most texts are one part, detected whole; a block
//! the engine composes of texts said earlier is cut into those texts, so each is answered from the
//! shared detection cache (`cache.rs`) instead of being read again by the NER model.
//!
//! Two such blocks. The first: the memory the Select step puts before a task (`Relevant memory:`, one
//! `- [when, who] text` line per recalled message or fact, a blank line, `Task:`). It is a different
//! dozen messages for every new task, so as one text it was new in every new conversation and the
//! NER read all of it (about 2.4 kB, most of what privacy cost a new conversation: issue 38). Cut
//! into its items, each recalled message is the text it was when it was said (detected then, in its
//! own request, from the same cache), and the scaffolding around it (`- [29 November 2026, user] `)
//! repeats. The second: the exchange memory work's extraction call reads after every task (the
//! task the agent was given, its tool results, its answer, then the facts already known): the task
//! is the text of the agent's own first request (or its parent's delegation), read before.
//!
//! Invariants:
//! - the parts are in order and cover the text exactly, with no overlap, so spans found in the parts
//!   and moved by the part's offset are spans of the text;
//! - a text that is not exactly such a block (for recalled memory: the header first, `Task:` last,
//!   every item starting a line with `- [` and closing its bracket on that line; for an exchange:
//!   its head first, then the answer's and the facts' labels) is one part: detected whole, as before;
//! - a recalled message (or an exchange's task, answer, tool results) is detected alone, as it was
//!   when it was said: an entity never spans two of them (they are different texts, often of
//!   different people).

use std::ops::Range;

/// The first line of the Select step's recalled memory (see `context::recall_prefix`).
const RECALL_HEAD: &str = "Relevant memory:\n";
/// Its end: a blank line after the last item, then the task's label.
const RECALL_TAIL: &str = "\n\nTask:\n";
/// How an item starts, at the start of a line: `- [when, who] `.
const ITEM: &str = "- [";

/// How memory work's extraction call starts its user message (`opc_memory::facts::prompt::
/// extract_user` around `memory_work::exchange::render`): the exchange, then the facts listed.
const EXCHANGE_HEAD: &str = "Exchange:\nTask given to `";
/// The label of the agent's answer in the exchange (after the agent's id).
const EXCHANGE_ANSWER: &str = "\n\nAnswer of `";
/// The label of the tool results in the exchange, when there are any.
const EXCHANGE_TOOLS: &str = "\n\nTool results:\n";
/// The label of the facts listed after the exchange.
const EXCHANGE_FACTS: &str = "\n\nFacts already known (";

/// The parts `text` is detected in (see the module doc).
pub(super) fn parts(text: &str) -> Vec<Range<usize>> {
    recall_items(text)
        .or_else(|| exchange(text))
        .unwrap_or_else(|| std::iter::once(0..text.len()).collect())
}

/// The cuts `cuts` (in order, within `text`) as the parts between them.
fn between(text: &str, mut cuts: Vec<usize>) -> Vec<Range<usize>> {
    cuts.insert(0, 0);
    cuts.push(text.len());
    cuts.dedup();
    cuts.windows(2).map(|w| w[0]..w[1]).collect()
}

/// `start..end` of `text` without the white space at its end, as cuts.
fn trimmed(text: &str, start: usize, end: usize) -> [usize; 2] {
    [start, start + text[start..end].trim_end().len()]
}

/// An extraction call's exchange cut into the task the agent was given (the text of a request
/// masked before, and of its delegating parent's tool call), its tool results, its answer, and the
/// facts listed; or `None` when `text` is not one.
fn exchange(text: &str) -> Option<Vec<Range<usize>>> {
    let rest = text.strip_prefix(EXCHANGE_HEAD)?;
    let task = EXCHANGE_HEAD.len() + rest.find("`:\n")? + 3;
    let facts = text.rfind(EXCHANGE_FACTS)?;
    let label = text[..facts].rfind(EXCHANGE_ANSWER)?;
    if label < task {
        return None;
    }
    let answer = label + text[label..facts].find("`:\n")? + 3;
    let tools = text[task..label].rfind(EXCHANGE_TOOLS).map(|i| task + i);
    let mut cuts = Vec::new();
    cuts.extend(trimmed(text, task, tools.unwrap_or(label)));
    if let Some(tools) = tools {
        cuts.extend(trimmed(text, tools + EXCHANGE_TOOLS.len(), label));
    }
    cuts.extend(trimmed(text, answer, facts));
    Some(between(text, cuts))
}

/// The recalled memory block cut into scaffolding and recalled texts, or `None` when `text` is not
/// exactly such a block.
fn recall_items(text: &str) -> Option<Vec<Range<usize>>> {
    if !text.starts_with(RECALL_HEAD) || !text.ends_with(RECALL_TAIL) {
        return None;
    }
    // Up to and including the last item's line break.
    let body_end = text.len() - RECALL_TAIL.len() + 1;
    let mut at = RECALL_HEAD.len();
    if !text[at..body_end].starts_with(ITEM) {
        return None;
    }
    let mut cuts = vec![0];
    while at < body_end {
        // `at` is the start of an item's line: `- [when, who] text…`.
        let line_end = text[at..body_end].find('\n').map_or(body_end, |i| at + i);
        let close = text[at..line_end].find("] ")?;
        let said = at + close + 2;
        // The item runs to the next line that starts an item (a recalled message may hold lines of
        // its own), or to the end of the block.
        let next = text[said..body_end]
            .match_indices("\n- [")
            .next()
            .map_or(body_end, |(i, _)| said + i + 1);
        // What was said, without the line break (and any white space) that ends the item: recall
        // trims the messages it quotes.
        let said_end = said + text[said..next].trim_end().len();
        if said_end > said {
            cuts.push(said);
            cuts.push(said_end);
        }
        at = next;
    }
    cuts.remove(0);
    Some(between(text, cuts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        parts(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn a_recalled_block_is_cut_into_what_was_said_and_its_scaffolding() {
        let block = "Relevant memory:\n- [29 November 2026, user] Hi, this is Ann.\n- [fact, valid from 2026-05-17] The launch is on May 17th\n\nTask:\n";
        assert_eq!(
            pieces(block),
            [
                "Relevant memory:\n- [29 November 2026, user] ",
                "Hi, this is Ann.",
                "\n- [fact, valid from 2026-05-17] ",
                "The launch is on May 17th",
                "\n\nTask:\n",
            ]
        );
        assert_eq!(pieces(block).concat(), block);
    }

    #[test]
    fn a_recalled_message_keeps_its_own_lines() {
        let block = "Relevant memory:\n- [1 May 2026, user] Send it to\n742 Evergreen Terrace\nSpringfield\n- [1 May 2026, ceo] Done.\n\nTask:\n";
        assert_eq!(
            pieces(block),
            [
                "Relevant memory:\n- [1 May 2026, user] ",
                "Send it to\n742 Evergreen Terrace\nSpringfield",
                "\n- [1 May 2026, ceo] ",
                "Done.",
                "\n\nTask:\n",
            ]
        );
    }

    #[test]
    fn an_exchange_is_cut_into_task_results_answer_and_facts() {
        let exchange = opc_memory::facts::prompt::extract_user(
            "Task given to `ceo`:\nWrite to Ann at ann@example.com\n\nTool results:\n- delegate: sent\n\nAnswer of `ceo`:\nDone, Ann has it.\n",
            &[],
        );
        let got = pieces(&exchange);
        assert_eq!(got.concat(), exchange);
        assert_eq!(got[0], "Exchange:\nTask given to `ceo`:\n");
        assert_eq!(got[1], "Write to Ann at ann@example.com");
        assert_eq!(got[3], "- delegate: sent");
        assert_eq!(got[5], "Done, Ann has it.");
        assert!(got[6].starts_with("\n\nFacts already known ("), "{got:?}");
        let plain = opc_memory::facts::prompt::extract_user(
            "Task given to `ceo`:\nHi\n\nAnswer of `ceo`:\nHello\n",
            &[],
        );
        let got = pieces(&plain);
        assert_eq!(got.concat(), plain);
        assert_eq!((got[1], got[3]), ("Hi", "Hello"), "{got:?}");
    }

    #[test]
    fn anything_else_is_one_part() {
        for text in [
            "",
            "Hi, this is Ann, call me at +1 415 555 0132.",
            // Not the whole block: a message that quotes a header.
            "Relevant memory:\n- [1 May 2026, user] hi\n\nTask:\nand more",
            // An item without its bracket closed on its line.
            "Relevant memory:\n- [1 May 2026, user hi\n\nTask:\n",
            // No item.
            "Relevant memory:\nnothing\n\nTask:\n",
        ] {
            assert_eq!(
                parts(text),
                std::iter::once(0..text.len()).collect::<Vec<_>>(),
                "{text:?}"
            );
        }
    }
}
