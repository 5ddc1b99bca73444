//! The web chat as an [`Adapter`]: the gateway's outbound calls (post, edit, cards, notices, trace)
//! write to the transcript and publish to the conversation's open streams, and its pages are the
//! chat page and the JSON API.
//!
//! Invariants:
//! - an outbound call names its conversation by a valid id, else it fails with
//!   [`AdapterError::Invalid`]; `post` and `post_card` record the conversation if it is missing, the
//!   other calls fail on one that does not exist;
//! - an outbound write is recorded and published under one lock, so streams see it once, in order;
//! - streamed tokens are not kept: the answer arrives as edits.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use axum::http::Method;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::state::{ChatState, Shared, WebEvent, valid_id};
use super::transcript::{Author, Transcript, TranscriptError};
use super::{MAX_BODY, WebConfig, WebDatabase, api, page};
use crate::{
    Adapter, AdapterError, Card, Inbox, Page, Place, Platform, Posted, ReplyHandle, Visibility,
};

/// The web chat adapter. Cheap to share: pages and outbound calls use the same state.
pub struct WebChat {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for WebChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebChat")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl WebChat {
    /// The web chat; inbound events go to `inbox`. Serve [`Adapter::pages`] on the gateway's server.
    /// Fails when the transcript's database cannot be opened.
    pub fn new(config: WebConfig, inbox: Inbox) -> Result<Arc<WebChat>, AdapterError> {
        let transcript = match &config.database {
            WebDatabase::Memory => Transcript::open(None),
            WebDatabase::Sqlite(path) => Transcript::open(Some(path)),
            WebDatabase::Postgres(conn) => Transcript::open_postgres(conn.clone()),
        }
        .map_err(|e| AdapterError::Invalid(e.to_string()))?;
        let page = page::render(&config.title);
        Ok(Arc::new(WebChat {
            shared: Arc::new(Shared {
                config,
                inbox,
                page,
                state: Mutex::new(ChatState {
                    transcript,
                    live: Default::default(),
                }),
                banner: RwLock::new(None),
                closing: CancellationToken::new(),
            }),
        }))
    }

    /// How many conversations have an open event stream (and so hold memory).
    pub fn live_conversations(&self) -> usize {
        self.shared.lock().live.len()
    }

    /// Record the bot's message (or card, with `text` its markdown) in the conversation `place`
    /// names, recording the conversation if it is missing, and publish it.
    fn post_bot(
        &self,
        place: &Place,
        text: &str,
        card: Option<&Card>,
    ) -> Result<Posted, AdapterError> {
        if !valid_id(&place.channel) {
            return Err(not_a_conversation());
        }
        let number = self
            .shared
            .lock()
            .push(&place.channel, Author::Bot, text, card, true)
            .map_err(database)?
            .ok_or_else(not_a_conversation)?;
        Ok(Posted {
            platform: Platform::Web,
            channel: place.channel.clone(),
            id: number.to_string(),
        })
    }
}

fn message_number(message: &Posted) -> Result<i64, AdapterError> {
    message
        .id
        .parse()
        .map_err(|_| AdapterError::Invalid("not a web chat message id".to_string()))
}

fn database(e: TranscriptError) -> AdapterError {
    AdapterError::Invalid(e.to_string())
}

fn not_a_conversation() -> AdapterError {
    AdapterError::Invalid("not a web chat conversation".to_string())
}

#[async_trait]
impl Adapter for WebChat {
    fn platform(&self) -> Platform {
        Platform::Web
    }

    async fn shutdown(&self) {
        self.shared.closing.cancel();
    }

    fn max_message_len(&self) -> usize {
        100_000
    }

    fn edit_interval(&self) -> Duration {
        Duration::from_millis(100)
    }

    /// The page renders markdown itself (escaped first), so the text goes out as written.
    fn render(&self, markdown: &str) -> String {
        markdown.to_string()
    }

    fn set_banner(&self, text: Option<&str>) {
        *self
            .shared
            .banner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = text.map(str::to_string);
    }

    async fn post(&self, place: &Place, text: &str) -> Result<Posted, AdapterError> {
        self.post_bot(place, text, None)
    }

    async fn edit(&self, message: &Posted, text: &str) -> Result<(), AdapterError> {
        let number = message_number(message)?;
        let mut state = self.shared.lock();
        if !state
            .transcript
            .edit(&message.channel, number, text)
            .map_err(database)?
        {
            return Err(AdapterError::Invalid(
                "no such web chat message".to_string(),
            ));
        }
        state.publish(
            &message.channel,
            WebEvent::Edit {
                id: number,
                text: text.to_string(),
            },
        );
        Ok(())
    }

    async fn post_card(&self, place: &Place, card: &Card) -> Result<Posted, AdapterError> {
        self.post_bot(place, &card.to_markdown(), Some(card))
    }

    async fn update_card(&self, message: &Posted, card: &Card) -> Result<(), AdapterError> {
        let number = message_number(message)?;
        let mut state = self.shared.lock();
        if !state
            .transcript
            .update_card(&message.channel, number, card)
            .map_err(database)?
        {
            return Err(AdapterError::Invalid("no such web chat card".to_string()));
        }
        state.publish(
            &message.channel,
            WebEvent::Card {
                id: number,
                card: Box::new(card.clone()),
                update: true,
            },
        );
        Ok(())
    }

    /// A `notice` in the conversation, recorded in its transcript (so a page that reconnects still
    /// shows it); the web chat's user is the conversation, so both visibilities look the same.
    async fn respond(
        &self,
        reply: &ReplyHandle,
        text: &str,
        _visibility: Visibility,
    ) -> Result<(), AdapterError> {
        let conversation = reply
            .0
            .get("conversation")
            .and_then(Value::as_str)
            .filter(|id| valid_id(id))
            .ok_or_else(|| AdapterError::Invalid("not a web chat reply handle".to_string()))?;
        self.shared
            .lock()
            .push(conversation, Author::Notice, text, None, false)
            .map_err(database)?
            .ok_or_else(not_a_conversation)?;
        Ok(())
    }

    /// Kept for the page's trace. Streamed tokens are skipped: the answer arrives by edits.
    async fn progress(&self, place: &Place, event: &Value) {
        let kind = event.get("event").and_then(Value::as_str).unwrap_or("");
        if matches!(kind, "token" | "stream_restarted") || !valid_id(&place.channel) {
            return;
        }
        let mut state = self.shared.lock();
        match state.transcript.progress(&place.channel, event) {
            Ok(true) => state.publish(&place.channel, WebEvent::Progress(event.clone())),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(platform = "web", error = %e, "could not record a trace event")
            }
        }
    }

    fn pages(&self) -> Vec<Page> {
        let shared = self.shared.clone();
        vec![
            Page::new(Method::GET, "/", page::page, shared.clone()),
            Page::new(
                Method::POST,
                "/api/conversations",
                api::create_conversation,
                shared.clone(),
            )
            .body_limit(MAX_BODY),
            Page::new(
                Method::GET,
                "/api/conversations",
                api::list_conversations,
                shared.clone(),
            ),
            Page::new(
                Method::POST,
                "/api/conversations/{id}/messages",
                api::send_message,
                shared.clone(),
            )
            .body_limit(MAX_BODY),
            Page::new(
                Method::GET,
                "/api/conversations/{id}/events",
                api::event_stream,
                shared.clone(),
            ),
            Page::new(
                Method::POST,
                "/api/approvals/{approval}",
                api::decide,
                shared.clone(),
            )
            .body_limit(MAX_BODY),
            Page::new(Method::GET, "/api/banner", api::banner, shared),
        ]
    }
}
