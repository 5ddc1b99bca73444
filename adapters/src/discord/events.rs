//! Gateway messages and interactions → [`Inbound`] events: mentions (and the conversation thread a
//! mention starts), thread messages, slash commands, approval-card buttons.
//!
//! Invariants: the bot's own and other bots' messages never reach the inbox; a redelivered message or
//! interaction reaches it once ([`crate::Dedup`]); every interaction is acknowledged before its event
//! is handed on; message text is never logged.

use serde_json::{Value, json};
use serenity::all::{
    ApplicationId, ChannelId, CommandDataOptionValue, CommandInteraction, ComponentInteraction,
    Interaction, LightMethod, Message, MessageType, Route,
};

use crate::{Action, Command, Inbound, InboundKind, Place, Platform, Posted, ReplyHandle, User};

use super::{
    DEFERRED_CHANNEL_MESSAGE, DEFERRED_UPDATE_MESSAGE, EPHEMERAL, Shared, THREAD_TYPES, remember,
};

impl Shared {
    /// Whether `channel` is a thread (a person's thread, a forum post, a conversation thread), asked
    /// once per channel. When Discord cannot be asked, `false`: posting then tries to start a thread
    /// and, refused, answers in the channel.
    pub(super) async fn is_thread(&self, channel: ChannelId) -> bool {
        let known = self
            .is_thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&channel)
            .copied();
        if let Some(known) = known {
            return known;
        }
        let answer = self
            .call(
                "GET /channels/{id}",
                Route::Channel {
                    channel_id: channel,
                },
                LightMethod::Get,
                None,
            )
            .await;
        match answer {
            Ok(found) => {
                let is_thread = found
                    .get("type")
                    .and_then(Value::as_u64)
                    .is_some_and(|kind| THREAD_TYPES.contains(&kind));
                let mut known = self.is_thread.lock().unwrap_or_else(|p| p.into_inner());
                remember(&mut known, channel, is_thread);
                is_thread
            }
            Err(error) => {
                tracing::warn!(%error, "could not learn a discord channel's type");
                false
            }
        }
    }

    /// A message from the gateway → an inbound event, or `None` when it is not for us.
    pub(super) async fn message_inbound(&self, message: &Message) -> Option<Inbound> {
        let bot = *self.bot_id.get()?;
        if message.author.bot || message.author.id == bot {
            return None;
        }
        if !matches!(
            message.kind,
            MessageType::Regular | MessageType::InlineReply
        ) {
            return None;
        }
        if !self.dedup.first(&format!("m{}", message.id)) {
            return None;
        }
        let channel = message.channel_id.to_string();
        let mention_forms = [format!("<@{bot}>"), format!("<@!{bot}>")];
        let mentioned = message.mentions.iter().any(|u| u.id == bot)
            || mention_forms
                .iter()
                .any(|m| message.content.contains(m.as_str()));
        let in_thread =
            mentioned && message.guild_id.is_some() && self.is_thread(message.channel_id).await;
        let (workspace, thread) = match message.guild_id {
            // Inside a thread the conversation is that thread; elsewhere a thread started from the
            // mention.
            Some(guild) if in_thread => (guild.to_string(), channel.clone()),
            Some(guild) => (guild.to_string(), message.id.to_string()),
            None => ("@me".to_string(), channel.clone()),
        };
        let user = User {
            id: message.author.id.to_string(),
            name: display_name(&message.author),
            roles: message
                .member
                .as_ref()
                .map(|m| m.roles.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
        };
        let reply = ReplyHandle(json!({
            "kind": "message",
            "channel": channel,
            "message": message.id.to_string(),
        }));
        // In a DM the bot is always the one addressed: every message there is a mention.
        let kind = if mentioned || message.guild_id.is_none() {
            let mut text = message.content.clone();
            for form in &mention_forms {
                text = text.replace(form.as_str(), "");
            }
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if message.guild_id.is_some() && !in_thread {
                self.remember_thread_name(&thread, &text);
            }
            InboundKind::Mention {
                text,
                continues: Some(channel.clone()),
            }
        } else {
            if message.content.trim().is_empty() {
                return None;
            }
            InboundKind::Message {
                text: message.content.clone(),
                continues: channel.clone(),
            }
        };
        let thread = match kind {
            InboundKind::Message { .. } => channel.clone(),
            _ => thread,
        };
        Some(Inbound {
            place: Place {
                platform: Platform::Discord,
                workspace,
                channel,
                thread,
            },
            user,
            reply,
            kind,
            delivery: Some(format!("discord:m{}", message.id)),
            traceparent: None,
        })
    }

    pub(super) fn remember_thread_name(&self, thread: &str, text: &str) {
        let mut name = String::new();
        for word in text.split_whitespace() {
            if name.chars().count() + word.chars().count() + 1 > 80 {
                break;
            }
            if !name.is_empty() {
                name.push(' ');
            }
            name.push_str(word);
        }
        if name.is_empty() {
            name = "OPC".into();
        }
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        remember(&mut names, thread.to_string(), name);
    }

    /// An interaction → its inbound event and the deferred response that acknowledges it, or `None`
    /// for interactions OPC does not handle (and repeats).
    pub(super) fn interaction_inbound(
        &self,
        interaction: &Interaction,
    ) -> Option<(Inbound, Value)> {
        match interaction {
            Interaction::Command(command) => {
                if !self.dedup.first(&format!("i{}", command.id)) {
                    return None;
                }
                Some((
                    command_inbound(command),
                    json!({"type": DEFERRED_CHANNEL_MESSAGE, "data": {"flags": EPHEMERAL}}),
                ))
            }
            Interaction::Component(component) => {
                let Some(action) = Action::decode(&component.data.custom_id) else {
                    tracing::warn!(kind = "component", "unknown discord button id dropped");
                    return None;
                };
                if !self.dedup.first(&format!("i{}", component.id)) {
                    return None;
                }
                Some((
                    component_inbound(component, action),
                    json!({"type": DEFERRED_UPDATE_MESSAGE}),
                ))
            }
            _ => None,
        }
    }

    /// Gateway path: acknowledge within Discord's 3 s, then hand on.
    pub(super) async fn handle_interaction(&self, interaction: Interaction) {
        let (id, token) = match &interaction {
            Interaction::Command(c) => (c.id, c.token.clone()),
            Interaction::Component(c) => (c.id, c.token.clone()),
            _ => return,
        };
        let Some((inbound, deferred)) = self.interaction_inbound(&interaction) else {
            return;
        };
        if let Err(error) = self.acknowledge(id, &token, deferred).await {
            tracing::warn!(interaction = %id, %error, "discord interaction not acknowledged");
            return;
        }
        if self.inbox.send(inbound).await.is_err() {
            tracing::warn!("discord inbox closed; interaction dropped");
        }
    }
}

pub(super) fn display_name(user: &serenity::all::User) -> String {
    user.global_name
        .clone()
        .unwrap_or_else(|| user.name.clone())
}

pub(super) fn interaction_user(
    user: &serenity::all::User,
    member: Option<&serenity::all::Member>,
) -> User {
    User {
        id: user.id.to_string(),
        name: member
            .and_then(|m| m.nick.clone())
            .unwrap_or_else(|| display_name(user)),
        roles: member
            .map(|m| m.roles.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
    }
}

pub(super) fn interaction_place(
    guild: Option<serenity::all::GuildId>,
    channel: ChannelId,
    thread: String,
) -> Place {
    Place {
        platform: Platform::Discord,
        workspace: guild.map_or_else(|| "@me".to_string(), |g| g.to_string()),
        channel: channel.to_string(),
        thread,
    }
}

/// How to answer an interaction. `deferred_message`: it was acknowledged with a deferred message
/// (type 5), whose loading message the first answer replaces.
pub(super) fn interaction_reply(
    application: ApplicationId,
    token: &str,
    deferred_message: bool,
) -> ReplyHandle {
    ReplyHandle(json!({
        "kind": "interaction",
        "application_id": application.to_string(),
        "token": token,
        "deferred_message": deferred_message,
    }))
}

pub(super) fn command_inbound(command: &CommandInteraction) -> Inbound {
    let args = command
        .data
        .options
        .iter()
        .filter_map(|option| match &option.value {
            CommandDataOptionValue::String(s) => Some(s.clone()),
            CommandDataOptionValue::Integer(i) => Some(i.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let channel = command.channel_id.to_string();
    Inbound {
        place: interaction_place(command.guild_id, command.channel_id, channel),
        user: interaction_user(&command.user, command.member.as_deref()),
        reply: interaction_reply(command.application_id, &command.token, true),
        kind: InboundKind::Command(Command::parse(&command.data.name, &args)),
        delivery: Some(format!("discord:i{}", command.id)),
        traceparent: None,
    }
}

pub(super) fn component_inbound(component: &ComponentInteraction, action: Action) -> Inbound {
    let channel = component.channel_id.to_string();
    Inbound {
        place: interaction_place(component.guild_id, component.channel_id, channel.clone()),
        user: interaction_user(&component.user, component.member.as_ref()),
        reply: interaction_reply(component.application_id, &component.token, false),
        kind: InboundKind::Action {
            action,
            card: Posted {
                platform: Platform::Discord,
                channel,
                id: component.message.id.to_string(),
            },
        },
        delivery: Some(format!("discord:i{}", component.id)),
        traceparent: None,
    }
}
