//! Inbound payloads → [`Inbound`] events, shared by Socket Mode and the HTTP routes: Events API
//! callbacks (mentions, thread messages, direct messages), `block_actions` and slash commands.
//!
//! Invariants: a redelivered event reaches the inbox once (deduplicated by `event_id`, `trigger_id`
//! or the envelope id); the bot's own messages never do; handing on never waits (`try_send`: a full
//! inbox drops the event with a warning); message text is never logged.

use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::{Action, Command, Inbound, InboundKind, Place, Platform, Posted, ReplyHandle, User};

use super::Receiver;

pub(super) fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut current = value;
    for key in path {
        current = current.get(key)?;
    }
    current.as_str().filter(|s| !s.is_empty())
}

/// Remove the bot's own mention (`<@U123>` or `<@U123|name>`) from a message.
pub(super) fn strip_mention(text: &str, bot_user: &str) -> String {
    let open = format!("<@{bot_user}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        // Only a whole id: `<@U12>` must not match `<@U123>`.
        if (after.starts_with('>') || after.starts_with('|'))
            && let Some(end) = after.find('>')
        {
            out.push_str(&rest[..start]);
            rest = &after[end + 1..];
            continue;
        }
        out.push_str(&rest[..start + open.len()]);
        rest = after;
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Receiver {
    /// Hand an event on without waiting.
    pub(super) fn deliver(&self, inbound: Inbound, kind: &'static str) {
        match self.inbox.try_send(inbound) {
            Ok(()) => debug!(kind, "slack event delivered"),
            Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                warn!(kind, "inbox full: slack event dropped");
            }
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                warn!(kind, "inbox closed: slack event dropped");
            }
        }
    }

    /// `true` the first time this delivery is seen.
    pub(super) fn first(&self, key: &str) -> bool {
        if self.dedup.first(key) {
            true
        } else {
            debug!(key, "slack redelivery dropped");
            false
        }
    }

    pub(super) fn is_own(&self, event: &Value) -> bool {
        str_at(event, &["user"]) == Some(self.bot_user.as_str())
            || (self.bot_id.is_some() && str_at(event, &["bot_id"]) == self.bot_id.as_deref())
    }

    /// A Socket Mode envelope (already acknowledged).
    pub(super) fn envelope(&self, envelope: &Value) {
        let envelope_id = str_at(envelope, &["envelope_id"]);
        let payload = envelope.get("payload").unwrap_or(&Value::Null);
        if let Some(retry) = envelope.get("retry_attempt").and_then(Value::as_u64)
            && retry > 0
        {
            debug!(retry, "slack envelope redelivered");
        }
        match str_at(envelope, &["type"]) {
            Some("events_api") => self.event_callback(payload, envelope_id),
            Some("interactive") => self.interactive(payload, envelope_id),
            Some("slash_commands") => self.slash_command(payload, envelope_id),
            other => debug!(kind = other.unwrap_or("-"), "slack envelope ignored"),
        }
    }

    /// An Events API `event_callback` body.
    pub(super) fn event_callback(&self, body: &Value, fallback_id: Option<&str>) {
        if str_at(body, &["type"]) != Some("event_callback") {
            debug!(
                kind = str_at(body, &["type"]).unwrap_or("-"),
                "slack payload ignored"
            );
            return;
        }
        let Some(id) = str_at(body, &["event_id"]).or(fallback_id) else {
            warn!("slack event without event_id dropped");
            return;
        };
        if !self.first(&format!("event:{id}")) {
            return;
        }
        let delivery = format!("slack:event:{id}");
        let event = body.get("event").unwrap_or(&Value::Null);
        let team = str_at(body, &["team_id"])
            .or_else(|| str_at(event, &["team"]))
            .unwrap_or(&self.team)
            .to_string();
        match str_at(event, &["type"]) {
            Some("app_mention") => self.mention(event, team, delivery),
            Some("message") => self.message(event, team, delivery),
            other => debug!(kind = other.unwrap_or("-"), "slack event ignored"),
        }
    }

    /// The parts every message-like event needs, or `None` (logged) when malformed.
    pub(super) fn message_parts<'a>(
        &self,
        event: &'a Value,
    ) -> Option<(&'a str, &'a str, &'a str, Option<&'a str>, &'a str)> {
        let parts = (
            str_at(event, &["user"]),
            str_at(event, &["channel"]),
            str_at(event, &["ts"]),
        );
        let (Some(user), Some(channel), Some(ts)) = parts else {
            warn!(
                kind = str_at(event, &["type"]).unwrap_or("-"),
                "malformed slack message event dropped"
            );
            return None;
        };
        let thread_ts = str_at(event, &["thread_ts"]);
        let text = str_at(event, &["text"]).unwrap_or("");
        Some((user, channel, ts, thread_ts, text))
    }

    pub(super) fn mention(&self, event: &Value, team: String, delivery: String) {
        if self.is_own(event) {
            return;
        }
        let Some((user, channel, ts, thread_ts, text)) = self.message_parts(event) else {
            return;
        };
        self.deliver_mention(team, user, channel, ts, thread_ts, text, delivery);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn deliver_mention(
        &self,
        team: String,
        user: &str,
        channel: &str,
        ts: &str,
        thread_ts: Option<&str>,
        text: &str,
        delivery: String,
    ) {
        let thread = thread_ts.unwrap_or(ts);
        self.deliver(
            Inbound {
                place: Place {
                    platform: Platform::Slack,
                    workspace: team,
                    channel: channel.to_string(),
                    thread: thread.to_string(),
                },
                user: User {
                    id: user.to_string(),
                    name: user.to_string(),
                    roles: Vec::new(),
                },
                reply: ReplyHandle(json!({
                    "channel": channel, "user": user, "thread_ts": thread,
                })),
                kind: InboundKind::Mention {
                    text: strip_mention(text, &self.bot_user),
                    continues: thread_ts.map(str::to_string),
                },
                delivery: Some(delivery),
                traceparent: None,
            },
            "mention",
        );
    }

    pub(super) fn message(&self, event: &Value, team: String, delivery: String) {
        // Edits, deletions, joins, bot messages …: only what a person wrote counts.
        if let Some(subtype) = str_at(event, &["subtype"])
            && !matches!(subtype, "thread_broadcast" | "file_share" | "me_message")
        {
            debug!(subtype, "slack message subtype ignored");
            return;
        }
        if self.is_own(event) {
            return;
        }
        let Some((user, channel, ts, thread_ts, text)) = self.message_parts(event) else {
            return;
        };
        // Direct messages carry no app_mention: every one is addressed to the bot.
        if str_at(event, &["channel_type"]) == Some("im") {
            self.deliver_mention(team, user, channel, ts, thread_ts, text, delivery);
            return;
        }
        if text.contains(&format!("<@{}>", self.bot_user))
            || text.contains(&format!("<@{}|", self.bot_user))
        {
            // The app_mention event for the same message is the one delivered.
            return;
        }
        let Some(thread_ts) = thread_ts else {
            return;
        };
        self.deliver(
            Inbound {
                place: Place {
                    platform: Platform::Slack,
                    workspace: team,
                    channel: channel.to_string(),
                    thread: thread_ts.to_string(),
                },
                user: User {
                    id: user.to_string(),
                    name: user.to_string(),
                    roles: Vec::new(),
                },
                reply: ReplyHandle(json!({
                    "channel": channel, "user": user, "thread_ts": thread_ts,
                })),
                kind: InboundKind::Message {
                    text: text.to_string(),
                    continues: thread_ts.to_string(),
                },
                delivery: Some(delivery),
                traceparent: None,
            },
            "message",
        );
    }

    /// An interactive payload (`block_actions` from approval card buttons).
    pub(super) fn interactive(&self, payload: &Value, fallback_id: Option<&str>) {
        if str_at(payload, &["type"]) != Some("block_actions") {
            debug!(
                kind = str_at(payload, &["type"]).unwrap_or("-"),
                "slack interaction ignored"
            );
            return;
        }
        let Some(id) = str_at(payload, &["trigger_id"]).or(fallback_id) else {
            warn!("slack interaction without trigger_id dropped");
            return;
        };
        if !self.first(&format!("interactive:{id}")) {
            return;
        }
        let user_id = str_at(payload, &["user", "id"]);
        let channel = str_at(payload, &["channel", "id"])
            .or_else(|| str_at(payload, &["container", "channel_id"]));
        let message_ts = str_at(payload, &["container", "message_ts"])
            .or_else(|| str_at(payload, &["message", "ts"]));
        let (Some(user_id), Some(channel), Some(message_ts)) = (user_id, channel, message_ts)
        else {
            warn!("malformed slack block_actions dropped");
            return;
        };
        let name = str_at(payload, &["user", "username"])
            .or_else(|| str_at(payload, &["user", "name"]))
            .unwrap_or(user_id);
        let team = str_at(payload, &["team", "id"])
            .or_else(|| str_at(payload, &["user", "team_id"]))
            .unwrap_or(&self.team);
        let thread = str_at(payload, &["message", "thread_ts"])
            .or_else(|| str_at(payload, &["container", "thread_ts"]))
            .unwrap_or(message_ts);
        let mut reply = json!({"channel": channel, "user": user_id, "thread_ts": thread});
        if let Some(url) = str_at(payload, &["response_url"]) {
            reply["response_url"] = json!(url);
        }
        let actions = payload
            .get("actions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for action in actions {
            let action_id = str_at(action, &["action_id"]);
            let Some(decoded) = action_id.and_then(Action::decode) else {
                debug!("slack action not ours ignored");
                continue;
            };
            self.deliver(
                Inbound {
                    place: Place {
                        platform: Platform::Slack,
                        workspace: team.to_string(),
                        channel: channel.to_string(),
                        thread: thread.to_string(),
                    },
                    user: User {
                        id: user_id.to_string(),
                        name: name.to_string(),
                        roles: Vec::new(),
                    },
                    reply: ReplyHandle(reply.clone()),
                    kind: InboundKind::Action {
                        action: decoded,
                        card: Posted {
                            platform: Platform::Slack,
                            channel: channel.to_string(),
                            id: message_ts.to_string(),
                        },
                    },
                    // One key per button of the payload (Slack sends one; each is its own event).
                    delivery: Some(format!(
                        "slack:interactive:{id}/{}",
                        action_id.unwrap_or_default()
                    )),
                    traceparent: None,
                },
                "action",
            );
        }
    }

    /// A slash command (Socket Mode payload or the HTTP form as a JSON object).
    ///
    /// Commands belong to no thread: `place.thread` is empty, and posting to such a place posts at
    /// the channel's top level.
    pub(super) fn slash_command(&self, payload: &Value, fallback_id: Option<&str>) {
        let Some(id) = str_at(payload, &["trigger_id"]).or(fallback_id) else {
            warn!("slack command without trigger_id dropped");
            return;
        };
        if !self.first(&format!("command:{id}")) {
            return;
        }
        let parts = (
            str_at(payload, &["command"]),
            str_at(payload, &["user_id"]),
            str_at(payload, &["channel_id"]),
        );
        let (Some(command), Some(user_id), Some(channel)) = parts else {
            warn!("malformed slack command dropped");
            return;
        };
        let text = str_at(payload, &["text"]).unwrap_or("");
        let mut reply = json!({"channel": channel, "user": user_id});
        if let Some(url) = str_at(payload, &["response_url"]) {
            reply["response_url"] = json!(url);
        }
        self.deliver(
            Inbound {
                place: Place {
                    platform: Platform::Slack,
                    workspace: str_at(payload, &["team_id"])
                        .unwrap_or(&self.team)
                        .to_string(),
                    channel: channel.to_string(),
                    thread: String::new(),
                },
                user: User {
                    id: user_id.to_string(),
                    name: str_at(payload, &["user_name"])
                        .unwrap_or(user_id)
                        .to_string(),
                    roles: Vec::new(),
                },
                reply: ReplyHandle(reply),
                kind: InboundKind::Command(Command::parse(command, text)),
                delivery: Some(format!("slack:command:{id}")),
                traceparent: None,
            },
            "command",
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn mentions_are_stripped_whole() {
        assert_eq!(strip_mention("<@W11> hello there", "W11"), "hello there");
        assert_eq!(strip_mention("hi <@W11|bot>, go", "W11"), "hi , go");
        assert_eq!(strip_mention("<@W111> not me", "W11"), "<@W111> not me");
    }
}
