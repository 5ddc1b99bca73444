//! Markdown as agents write it (CommonMark + strikethrough) → each chat platform's own dialect.
//!
//! Why a parser and not regexes: agents write nested emphasis, links with brackets in their labels, code
//! that contains `*` or `<`; a regex rewrite breaks on exactly those. pulldown-cmark gives the structure,
//! and each construct is written in the target syntax.
//!
//! Invariants:
//! - Slack: every `&`, `<`, `>` in prose is escaped (`&amp;`, `&lt;`, `&gt;`), so agent text can never
//!   form a Slack control sequence (`<!channel>`, `<@U…>`, `<url|…>`); the only `<…>` sequences in the
//!   output are the links this module writes. Code spans and blocks are kept verbatim.
//! - Discord: the text is kept as written (Discord speaks markdown), but `@everyone` / `@here` are
//!   neutralised with a zero-width space so an agent can never ping a whole server.
//! - Rendering never panics and never drops the text of a construct it does not know: it is written as
//!   plain (escaped) text.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// A zero-width space: breaks `@everyone` / `@here` so Discord does not treat them as mentions.
const ZWSP: char = '\u{200B}';

/// Markdown → Discord markdown: unchanged except that mass mentions (`@everyone`, `@here`) are
/// neutralised.
pub fn discord(md: &str) -> String {
    md.replace("@everyone", &format!("@{ZWSP}everyone"))
        .replace("@here", &format!("@{ZWSP}here"))
}

/// Markdown → Slack `mrkdwn`: headings become bold lines, `**b**` → `*b*`, `_i_`/`*i*` → `_i_`,
/// `~~s~~` → `~s~`, `[t](u)` → `<u|t>`, lists keep their markers (`•`, `1.`), code is verbatim and
/// `&`, `<`, `>` are escaped in text.
pub fn slack_mrkdwn(md: &str) -> String {
    let mut writer = SlackWriter::default();
    for event in Parser::new_ext(md, Options::ENABLE_STRIKETHROUGH) {
        writer.event(event);
    }
    writer.finish()
}

/// Escape the three characters Slack reserves for its control sequences.
pub fn slack_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            other => out.push(other),
        }
    }
    out
}

/// What an open buffer collects; closed into the parent when its end tag arrives.
enum Frame {
    /// The document itself.
    Root,
    /// A link or image: its label, written as `<url|label>` at the end.
    Link(String),
    /// A heading: its text, written as one bold line.
    Heading,
    /// A block quote: each of its lines gets `> `.
    Quote,
}

/// One list being written: the next number for ordered lists, `None` for bullets.
struct List {
    next: Option<u64>,
}

#[derive(Default)]
struct SlackWriter {
    /// Open buffers, innermost last; the root is pushed lazily.
    stack: Vec<(Frame, String)>,
    lists: Vec<List>,
    /// Just wrote a list item's marker: the item's first paragraph goes on the same line.
    at_item_start: bool,
    /// Inside a heading, emphasis markers are dropped (the whole line is already bold).
    in_heading: bool,
    /// Inside a code block, text is verbatim.
    in_code: bool,
}

impl SlackWriter {
    fn buf(&mut self) -> &mut String {
        if self.stack.is_empty() {
            self.stack.push((Frame::Root, String::new()));
        }
        let last = self.stack.len() - 1;
        &mut self.stack[last].1
    }

    fn push(&mut self, text: &str) {
        self.at_item_start = false;
        self.buf().push_str(text);
    }

    /// Separate a new block from what came before: a blank line between top-level blocks, a line
    /// break inside list items.
    fn block_start(&mut self) {
        if self.at_item_start {
            self.at_item_start = false;
            return;
        }
        let in_list = !self.lists.is_empty();
        let buf = self.buf();
        if buf.is_empty() {
            return;
        }
        let want = if in_list { 1 } else { 2 };
        let have = buf.len() - buf.trim_end_matches('\n').len();
        for _ in have..want {
            buf.push('\n');
        }
    }

    fn open(&mut self, frame: Frame) {
        self.buf();
        self.stack.push((frame, String::new()));
    }

    fn close(&mut self) -> Option<(Frame, String)> {
        if self.stack.len() <= 1 {
            return None;
        }
        self.stack.pop()
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.in_code => self.push(&text),
            Event::Text(text) => {
                let escaped = slack_escape(&text);
                self.push(&escaped);
            }
            Event::Code(code) => {
                let code = format!("`{code}`");
                self.push(&code);
            }
            Event::InlineMath(math) | Event::DisplayMath(math) => {
                let math = format!("`{math}`");
                self.push(&math);
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                let escaped = slack_escape(&html);
                self.push(&escaped);
            }
            Event::FootnoteReference(name) => {
                let escaped = format!("[{}]", slack_escape(&name));
                self.push(&escaped);
            }
            Event::SoftBreak | Event::HardBreak => self.push("\n"),
            Event::Rule => {
                self.block_start();
                self.push("──────────");
            }
            Event::TaskListMarker(done) => self.push(if done { "☑ " } else { "☐ " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.block_start(),
            Tag::Heading { .. } => {
                self.block_start();
                self.in_heading = true;
                self.open(Frame::Heading);
            }
            Tag::BlockQuote(_) => {
                self.block_start();
                self.open(Frame::Quote);
            }
            Tag::CodeBlock(_) => {
                // The language tag is dropped: Slack does not highlight.
                self.block_start();
                self.push("```\n");
                self.in_code = true;
            }
            Tag::List(first) => {
                if self.lists.is_empty() {
                    self.block_start();
                }
                self.lists.push(List { next: first });
            }
            Tag::Item => {
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(List { next: Some(n) }) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => "• ".to_string(),
                };
                let buf = self.buf();
                if !buf.is_empty() && !buf.ends_with('\n') {
                    buf.push('\n');
                }
                let line = format!("{}{marker}", "    ".repeat(depth));
                self.push(&line);
                self.at_item_start = true;
            }
            Tag::Emphasis if !self.in_heading => self.push("_"),
            Tag::Strong if !self.in_heading => self.push("*"),
            Tag::Strikethrough => self.push("~"),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.open(Frame::Link(dest_url.to_string()));
            }
            // Tables, footnote definitions, metadata …: not enabled; their text flows through.
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                self.in_heading = false;
                if let Some((_, text)) = self.close() {
                    let text = text.trim();
                    let line = if text.is_empty() {
                        String::new()
                    } else {
                        format!("*{text}*")
                    };
                    self.push(&line);
                }
            }
            TagEnd::BlockQuote(_) => {
                if let Some((_, text)) = self.close() {
                    let quoted = text
                        .trim_end_matches('\n')
                        .lines()
                        .map(|line| format!("> {line}"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    self.push(&quoted);
                }
            }
            TagEnd::CodeBlock => {
                self.in_code = false;
                let buf = self.buf();
                if !buf.ends_with('\n') {
                    buf.push('\n');
                }
                self.push("```");
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Emphasis if !self.in_heading => self.push("_"),
            TagEnd::Strong if !self.in_heading => self.push("*"),
            TagEnd::Strikethrough => self.push("~"),
            TagEnd::Link | TagEnd::Image => {
                if let Some((Frame::Link(url), label)) = self.close() {
                    // `|` and `>` end a Slack link early; the label is already escaped.
                    let label = label.replace('|', "¦");
                    let url = url
                        .replace('|', "%7C")
                        .replace('>', "%3E")
                        .replace('<', "%3C");
                    let link = if label.is_empty() || label == url {
                        format!("<{url}>")
                    } else {
                        format!("<{url}|{label}>")
                    };
                    self.push(&link);
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> String {
        // Close anything left open (malformed nesting cannot happen with pulldown-cmark, but a
        // truncated stream must still keep its text).
        while self.stack.len() > 1 {
            if let Some((_, text)) = self.stack.pop() {
                self.push(&text);
            }
        }
        let out = self.stack.pop().map(|(_, text)| text).unwrap_or_default();
        out.trim_end_matches('\n').to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn inline_styles() {
        assert_eq!(
            slack_mrkdwn("**bold** and _it_ and *it2*"),
            "*bold* and _it_ and _it2_"
        );
        assert_eq!(slack_mrkdwn("~~gone~~"), "~gone~");
        assert_eq!(
            slack_mrkdwn("see [the docs](https://example.com/a?b=1&c=2)"),
            "see <https://example.com/a?b=1&c=2|the docs>"
        );
        assert_eq!(slack_mrkdwn("<https://x.org>"), "<https://x.org>");
    }

    #[test]
    fn headings_become_bold_lines_and_blocks_are_separated() {
        assert_eq!(
            slack_mrkdwn("# Title **x**\n\nBody text.\n\n## Next"),
            "*Title x*\n\nBody text.\n\n*Next*"
        );
    }

    #[test]
    fn escapes_control_characters_in_text_only() {
        assert_eq!(
            slack_mrkdwn("a < b & c > d <!channel>"),
            "a &lt; b &amp; c &gt; d &lt;!channel&gt;"
        );
        assert_eq!(slack_mrkdwn("`a<b && *c*`"), "`a<b && *c*`");
        assert_eq!(
            slack_mrkdwn("```rust\nlet x = a < b && **c**;\n```"),
            "```\nlet x = a < b && **c**;\n```"
        );
    }

    #[test]
    fn lists_are_kept() {
        assert_eq!(slack_mrkdwn("- one\n- two **b**"), "• one\n• two *b*");
        assert_eq!(slack_mrkdwn("1. one\n2. two"), "1. one\n2. two");
        assert_eq!(
            slack_mrkdwn("Intro\n\n- a\n  - nested\n- b\n\nAfter"),
            "Intro\n\n• a\n    • nested\n• b\n\nAfter"
        );
    }

    #[test]
    fn quotes_are_prefixed() {
        assert_eq!(slack_mrkdwn("> quoted\n> more"), "> quoted\n> more");
    }

    #[test]
    fn discord_neutralises_mass_mentions() {
        let out = discord("hi @everyone and @here, **bold** [l](https://x)");
        assert!(!out.contains("@everyone"));
        assert!(!out.contains("@here"));
        assert!(out.contains("**bold** [l](https://x)"));
    }
}
