//! Approval cards as Discord messages: an embed with the request, and rows of buttons while pending.
//!
//! Invariants: the embed is cut to Discord's limit (4096 characters), labels to 80, at most 25 buttons
//! in rows of 5; a decided card has no buttons; cards never ping anyone (`allowed_mentions`).

use serde_json::{Value, json};

use crate::{Card, CardState};

/// Embed description limit (an approval card is an embed).
pub(super) const EMBED_DESCRIPTION_MAX: usize = 4096;

/// The card's body: an embed with its markdown, and rows of buttons while it is pending (the
/// go-ahead's primary, the others secondary).
pub(super) fn card_body(card: &Card) -> Value {
    let description = crate::text::cut_with_ellipsis(
        &crate::markdown::discord(&card.to_markdown()),
        EMBED_DESCRIPTION_MAX,
    );
    let components: Vec<Value> = match card.state {
        CardState::Pending => card
            .options
            .iter()
            .enumerate()
            .take(25)
            .collect::<Vec<_>>()
            .chunks(5)
            .map(|row| {
                let buttons: Vec<Value> = row
                    .iter()
                    .map(|(i, option)| {
                        json!({
                            "type": 2,
                            "style": if card.is_primary(*i) { 1 } else { 2 },
                            "label": crate::text::cut_with_ellipsis(option, 80),
                            "custom_id": card.button_id(*i),
                        })
                    })
                    .collect();
                json!({"type": 1, "components": buttons})
            })
            .collect(),
        CardState::Decided { .. } => Vec::new(),
    };
    json!({
        "content": "",
        "embeds": [{"description": description, "color": 0x5865F2}],
        "components": components,
        "allowed_mentions": {"parse": []},
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn pending_cards_have_buttons_decided_cards_none() {
        let mut card = Card {
            approval: 7,
            agent: "cfo".into(),
            role: "CFO".into(),
            path: vec!["ceo".into(), "cfo".into()],
            summary: "Pay?".into(),
            options: vec!["Reject".into(), "Approve".into()],
            go_ahead: Some(1),
            state: CardState::Pending,
        };
        let body = card_body(&card);
        let buttons = &body["components"][0]["components"];
        assert_eq!(buttons[1]["custom_id"], card.button_id(1));
        // The go-ahead is primary (1) wherever it stands; the others are secondary (2).
        assert_eq!(buttons[0]["style"], 2);
        assert_eq!(buttons[1]["style"], 1);
        let description = body["embeds"][0]["description"].as_str().unwrap();
        assert!(
            description.starts_with("**Approval needed**, requested by **cfo** (CFO)"),
            "{description}"
        );
        card.state = CardState::Decided {
            option: "Approve".into(),
            by: "ann".into(),
            at: "2025-01-01T00:00:00Z".into(),
            approved: true,
        };
        assert_eq!(card_body(&card)["components"], json!([]));
    }
}
