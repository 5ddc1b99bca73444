//! Approval cards as Block Kit: a section with the request, then one button per option while the card
//! is pending, or a context line with the decision once it is decided.
//!
//! Invariants: every text is cut to Slack's limits (3000 characters per section, 75 per button label,
//! 25 buttons), so a long request never makes Slack refuse the card; the blocks are valid Block Kit
//! for slack-morphism (checked by the tests).

use serde_json::{Value, json};
use slack_morphism::prelude::*;

use crate::{AdapterError, Card, CardState, markdown};

use super::MAX_MESSAGE_LEN;

/// Slack's limit for a button label.
const MAX_BUTTON_LABEL: usize = 75;
/// Slack's limit of elements in one actions block.
const MAX_BUTTONS: usize = 25;

/// The Block Kit blocks of an approval card: the request as mrkdwn, then one button per option (the
/// go-ahead's primary) while pending, or a context line with the decision.
pub fn card_blocks(card: &Card) -> Value {
    let header = card.request_markdown();
    let mut blocks = vec![json!({
        "type": "section",
        "block_id": format!("opc-approval-{}", card.approval),
        "text": {"type": "mrkdwn", "text": crate::text::cut_with_ellipsis(&markdown::slack_mrkdwn(&header), MAX_MESSAGE_LEN)},
    })];
    match &card.state {
        CardState::Pending => {
            let buttons: Vec<Value> = card
                .options
                .iter()
                .enumerate()
                .take(MAX_BUTTONS)
                .map(|(index, option)| {
                    let mut button = json!({
                        "type": "button",
                        "action_id": card.button_id(index),
                        "text": {"type": "plain_text", "text": crate::text::cut_with_ellipsis(option, MAX_BUTTON_LABEL)},
                        "value": index.to_string(),
                    });
                    if card.is_primary(index) {
                        button["style"] = json!("primary");
                    }
                    button
                })
                .collect();
            if !buttons.is_empty() {
                blocks.push(json!({
                    "type": "actions",
                    "block_id": format!("opc-approval-{}-options", card.approval),
                    "elements": buttons,
                }));
            }
        }
        CardState::Decided { option, by, at, .. } => {
            let line = format!(
                "*{}: {}* — decided by {} at {}",
                card.state.verdict().unwrap_or_default(),
                markdown::slack_escape(option),
                markdown::slack_escape(by),
                markdown::slack_escape(at)
            );
            blocks.push(json!({
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": crate::text::cut_with_ellipsis(&line, MAX_MESSAGE_LEN)}],
            }));
        }
    }
    Value::Array(blocks)
}

/// A card as message content: blocks plus the plain fallback text notifications show.
pub(super) fn card_content(card: &Card) -> Result<SlackMessageContent, AdapterError> {
    let blocks: Vec<SlackBlock> = serde_json::from_value(card_blocks(card))
        .map_err(|e| AdapterError::Invalid(format!("approval card blocks: {e}")))?;
    let fallback = crate::text::cut_with_ellipsis(
        &markdown::slack_mrkdwn(&card.to_markdown()),
        MAX_MESSAGE_LEN,
    );
    Ok(SlackMessageContent::new()
        .with_text(fallback)
        .with_blocks(blocks))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn card_blocks_have_buttons_until_decided() {
        let mut card = Card {
            approval: 7,
            agent: "ops".into(),
            role: "VP Operations".into(),
            path: vec!["ceo".into(), "ops".into()],
            summary: "Spend **$5k** on <ads>?".into(),
            options: vec!["Approve".into(), "Reject".into()],
            go_ahead: Some(0),
            state: CardState::Pending,
        };
        let blocks = card_blocks(&card);
        assert_eq!(blocks[0]["type"], "section");
        let text = blocks[0]["text"]["text"].as_str().unwrap();
        assert!(
            text.contains("*$5k*") && text.contains("&lt;ads&gt;"),
            "{text}"
        );
        assert!(
            text.starts_with("*Approval needed*, requested by *ops* (VP Operations)"),
            "{text}"
        );
        let buttons = blocks[1]["elements"].as_array().unwrap();
        assert_eq!(buttons.len(), 2);
        assert_eq!(buttons[0]["action_id"], card.button_id(0));
        assert_eq!(buttons[0]["style"], "primary");
        assert!(buttons[1].get("style").is_none());
        // The blocks are valid Block Kit for slack-morphism.
        card_content(&card).unwrap();

        card.state = CardState::Decided {
            option: "Approve".into(),
            by: "alice".into(),
            at: "2026-01-01T00:00:00Z".into(),
            approved: true,
        };
        let blocks = card_blocks(&card);
        assert_eq!(blocks.as_array().unwrap().len(), 2);
        assert_eq!(blocks[1]["type"], "context");
        assert!(
            blocks[1]["elements"][0]["text"]
                .as_str()
                .unwrap()
                .contains("*Approved: Approve* — decided by alice at 2026-01-01T00:00:00Z")
        );
        card_content(&card).unwrap();
    }

    #[test]
    fn the_go_ahead_is_the_primary_button_wherever_it_stands() {
        let mut card = Card {
            approval: 8,
            agent: "ops".into(),
            role: "VP Operations".into(),
            path: vec!["ceo".into(), "ops".into()],
            summary: "Ship?".into(),
            options: vec!["Not now".into(), "Approve".into(), "Ship Friday".into()],
            go_ahead: Some(1),
            state: CardState::Pending,
        };
        let styles = |card: &Card| -> Vec<Option<String>> {
            card_blocks(card)[1]["elements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.get("style").and_then(Value::as_str).map(str::to_string))
                .collect()
        };
        assert_eq!(styles(&card), [None, Some("primary".into()), None]);
        // Not known (a card recorded before the go-ahead was): no button is primary.
        card.go_ahead = None;
        assert_eq!(styles(&card), [None, None, None]);
    }
}
