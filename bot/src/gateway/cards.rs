//! Approval cards: one is posted for every approval request where its conversation lives (or the
//! platform's approvals channel), and every card of an approval is redrawn once it is decided.
//!
//! Invariants: an approval gets its cards once (recorded in [`super::threads`]), also when events
//! were missed (caught up from the database); conversations started from `opc chat` have no thread
//! and get no card (they are decided there).

use opc_adapters::{Card, CardState, Place, Platform};
use opc_agents::Event;
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
                Ok(Event::ApprovalResolved {
                    approval,
                    decision,
                    by,
                    ..
                }) => self.redraw_cards(approval, decision, by).await,
                Ok(_) => {}
                // Missed some: catch up from the database.
                Err(broadcast::error::RecvError::Lagged(_)) => self.post_missing_cards().await,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }

    async fn post_missing_cards(&self) {
        let pending = self.inner.engine.pending_approvals().unwrap_or_default();
        for approval in pending {
            self.post_cards(approval.id).await;
        }
    }

    fn card(&self, approval: &opc_agents::store::Approval) -> Card {
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
            options: approval.options.clone(),
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
        let Ok(Some(approval)) = inner.engine.store().approval(id) else {
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

    async fn redraw_cards(&self, id: i64, decision: String, by: String) {
        let cards = self.inner.threads.cards(id).unwrap_or_default();
        let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        for (posted, mut card) in cards {
            card.state = CardState::Decided {
                option: decision.clone(),
                by: by.clone(),
                at: at.clone(),
            };
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
