//! Approval cards: one is posted for every approval request where its conversation lives (or the
//! platform's approvals channel), and every card of an approval is redrawn once it is decided.
//!
//! Invariants: an approval gets its cards once (recorded in [`super::threads`]), also when events
//! were missed (caught up from the database); conversations started from `opc chat` have no thread
//! and get no card (they are decided there). A decided card shows the option chosen and whether it
//! approved, as the database recorded them ("Approved: Yes, ship it — decided by ana …"): an
//! option's label need not say its outcome.

use opc_adapters::{Card, CardState, Place, Platform};
use opc_agents::Event;
use opc_agents::store::{Approval, ApprovalState, SystemDecider};
use tokio::sync::broadcast;

use super::Gateway;

impl Gateway {
    /// Post a card for every approval request, redraw cards when approvals are decided.
    pub(super) async fn follow_approvals(self, mut events: broadcast::Receiver<Event>) {
        self.post_missing_cards().await;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = self.inner.stop.cancelled() => break,
            };
            match event {
                Ok(Event::ApprovalRequested { approval, .. }) => {
                    self.post_cards(approval).await;
                }
                Ok(Event::ApprovalResolved { approval, .. }) => self.redraw_cards(approval).await,
                Ok(_) => {}
                // Missed some: catch up from the database.
                Err(broadcast::error::RecvError::Lagged(_)) => self.post_missing_cards().await,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }

    async fn post_missing_cards(&self) {
        let pending = self
            .inner
            .engine
            .pending_approvals()
            .await
            .unwrap_or_default();
        for approval in pending {
            self.post_cards(approval.id).await;
        }
    }

    fn card(&self, approval: &Approval) -> Card {
        let org = self.inner.engine.org();
        let mut path: Vec<String> = org
            .ancestors(&approval.agent)
            .into_iter()
            .rev()
            .map(str::to_string)
            .collect();
        path.push(approval.agent.clone());
        Card {
            approval: approval.id,
            agent: approval.agent.clone(),
            role: org.role(&approval.agent).unwrap_or_default().to_string(),
            path,
            summary: approval.summary.clone(),
            options: approval.labels(),
            go_ahead: approval
                .options
                .iter()
                .position(|o| o.outcome == opc_agents::store::OptionOutcome::Approve),
            state: CardState::Pending,
        }
    }

    /// Post approval `id`'s card where its conversation lives (or the platform's approvals channel),
    /// once.
    async fn post_cards(&self, id: i64) {
        let inner = &self.inner;
        if inner.threads.cards(id).is_ok_and(|cards| !cards.is_empty()) {
            return;
        }
        let Ok(Some(approval)) = inner.engine.store().approval(id).await else {
            return;
        };
        if approval.state != opc_agents::store::ApprovalState::Pending {
            return;
        }
        // Conversations started from `opc chat` have no thread: they are decided there.
        let Ok(Some(place)) = inner.threads.place_of(&approval.conversation_id) else {
            return;
        };
        let Some(adapter) = self.adapter(place.platform) else {
            return;
        };
        let loaded = inner.live.get();
        let channels = &loaded.config.gateway.approvals_channel;
        let dedicated = match place.platform {
            Platform::Slack => channels.slack.clone(),
            Platform::Discord => channels.discord.clone(),
            Platform::Web => None,
        };
        let target = match dedicated {
            Some(channel) => Place {
                platform: place.platform,
                workspace: place.workspace.clone(),
                thread: channel.clone(),
                channel,
            },
            None => place,
        };
        let card = self.card(&approval);
        match adapter.post_card(&target, &card).await {
            Ok(posted) => {
                if let Err(e) = inner.threads.add_card(&posted, &card) {
                    tracing::error!(error = %e, approval = id, "could not record an approval card");
                }
            }
            Err(e) => {
                tracing::warn!(platform = %adapter.platform(), approval = id, error = %e, "could not post an approval card");
                self.inner
                    .channels
                    .error(adapter.platform(), "posting an approval card", &e);
            }
        }
    }

    /// Redraw approval `id`'s cards as decided: the option chosen and whether it approves, who and
    /// when, as the database recorded them (the event only says something was decided). If the
    /// database cannot be read the cards are left as they are: a click then answers who decided,
    /// whereas guessing could show an approval as rejected.
    async fn redraw_cards(&self, id: i64) {
        let approval = match self.inner.engine.store().approval(id).await {
            Ok(Some(approval)) => approval,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(error = %e, approval = id, "could not read a decided approval; its cards are not redrawn");
                return;
            }
        };
        let Some(state) = decided_state(&approval) else {
            return;
        };
        let cards = self.inner.threads.cards(id).unwrap_or_default();
        for (posted, mut card) in cards {
            card.state = state.clone();
            let Some(adapter) = self.adapter(posted.platform) else {
                continue;
            };
            if let Err(e) = adapter.update_card(&posted, &card).await {
                tracing::warn!(platform = %adapter.platform(), approval = id, error = %e, "could not update an approval card");
                self.inner
                    .channels
                    .error(adapter.platform(), "updating an approval card", &e);
            } else if let Err(e) = self.inner.threads.add_card(&posted, &card) {
                tracing::error!(error = %e, approval = id, "could not record an approval card");
            }
        }
    }
}

/// A decided approval as its cards show it: the label chosen by a person, or why OPC rejected it
/// (no decision in time, the request cancelled, an error); `None` while it is pending.
fn decided_state(approval: &Approval) -> Option<CardState> {
    if approval.state == ApprovalState::Pending {
        return None;
    }
    let (option, by) = match approval.system_decider() {
        Some(SystemDecider::Timeout) => ("no decision in time".to_string(), "OPC".to_string()),
        Some(SystemDecider::Cancelled) => {
            ("the request was cancelled".to_string(), "OPC".to_string())
        }
        Some(SystemDecider::Error) => (
            "the approval could not be processed".to_string(),
            "OPC".to_string(),
        ),
        None => (
            approval.decision.clone().unwrap_or_default(),
            approval.decided_by.clone().unwrap_or_default(),
        ),
    };
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_millis(approval.decided_at.unwrap_or_default().max(0) as u64);
    Some(CardState::Decided {
        option,
        by,
        at: humantime::format_rfc3339_seconds(at).to_string(),
        approved: approval.state == ApprovalState::Approved,
    })
}
