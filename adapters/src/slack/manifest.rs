//! The Slack app this adapter needs, as a Slack app manifest (`opc slack manifest` prints it).
//!
//! Role: one place, next to the adapter's code, that says what the adapter asks of Slack — the Web API
//! methods it calls and the scope each needs ([`WEB_API_METHODS`]), the events it handles
//! ([`BOT_EVENTS`]), its slash command ([`SLASH_COMMAND`]) and its HTTP routes ([`ROUTES`]) — and builds
//! the manifest from those lists, so creating the app is one paste and grants nothing more.
//!
//! Invariants (held by the tests below, which read the adapter's own source and feed its receiver):
//! - every Web API method the adapter (`slack/`) calls is listed, and every listed one is called;
//! - the manifest's bot scopes are exactly the scopes of the listed methods and events, plus `commands`;
//! - every subscribed event reaches the gateway, and the slash command reaches every gateway command;
//! - the manifest has the shape of slack-morphism's model of Slack's schema.
//!
//! JSON, not YAML: Slack's "From a manifest" dialog takes either, but JSON is also what the
//! `apps.manifest.create` API takes, it has no quoting traps for an org's name (`Yes`, `#1`, `a: b`), and
//! `jq` reads it.

use serde_json::{Value, json};

use crate::Command;

/// Who calls a Web API method: the bot token (`xoxb-…`, scopes granted by the manifest) or the
/// app-level token (`xapp-…`, created by hand under "Basic Information → App-Level Tokens").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Token {
    /// The bot token.
    Bot,
    /// The app-level token (Socket Mode only).
    App,
}

/// A Web API method the adapter calls, and the scope it needs (`None`: any token may call it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Method {
    /// Slack's name, as in `https://slack.com/api/{name}`.
    pub name: &'static str,
    /// Which token calls it.
    pub token: Token,
    /// The scope Slack requires for it.
    pub scope: Option<&'static str>,
}

/// Every Web API method the adapter (`slack/`) calls. Keep in step with the adapter (a test checks the source).
pub const WEB_API_METHODS: &[Method] = &[
    Method {
        name: "auth.test",
        token: Token::Bot,
        scope: None,
    },
    Method {
        name: "chat.postMessage",
        token: Token::Bot,
        scope: Some("chat:write"),
    },
    Method {
        name: "chat.update",
        token: Token::Bot,
        scope: Some("chat:write"),
    },
    Method {
        name: "chat.postEphemeral",
        token: Token::Bot,
        scope: Some("chat:write"),
    },
    Method {
        name: "apps.connections.open",
        token: Token::App,
        scope: Some("connections:write"),
    },
];

/// The bot events the adapter handles, with the scope each needs: mentions anywhere, replies in OPC's
/// threads in public and private channels and group DMs, and direct messages.
pub const BOT_EVENTS: &[(&str, &str)] = &[
    ("app_mention", "app_mentions:read"),
    ("message.channels", "channels:history"),
    ("message.groups", "groups:history"),
    ("message.im", "im:history"),
    ("message.mpim", "mpim:history"),
];

/// The one slash command: `/opc status`, `/opc agents` … (see [`Command::parse`]). One command rather
/// than one per gateway command, because Slack's own `/status` takes that name and a workspace's other
/// apps may hold `/tasks` or `/help`.
pub const SLASH_COMMAND: &str = "/opc";

/// The scope slash commands need.
const COMMANDS_SCOPE: &str = "commands";

/// The HTTP routes Slack posts to in HTTP mode (served by [`super::SlackAdapter`]'s `routes`).
pub const ROUTES: Routes = Routes {
    events: "/slack/events",
    interactions: "/slack/interactions",
    commands: "/slack/commands",
};

/// The paths of the HTTP-mode routes.
#[derive(Clone, Copy, Debug)]
pub struct Routes {
    /// Event Subscriptions.
    pub events: &'static str,
    /// Interactivity (button clicks on approval cards).
    pub interactions: &'static str,
    /// The slash command.
    pub commands: &'static str,
}

/// How Slack reaches the app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Socket Mode: no request URLs.
    Socket,
    /// HTTP: Slack posts to these routes under this public base URL (`https://host[/prefix]`, no
    /// trailing slash).
    Http {
        /// The base URL.
        base_url: String,
    },
}

/// Slack's length limits for the app's name and the bot's display name.
const MAX_APP_NAME: usize = 35;
const MAX_BOT_NAME: usize = 80;

fn truncate(text: &str, max: usize) -> String {
    text.trim()
        .chars()
        .take(max)
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// The bot scopes: those of the bot-token methods and the events, and `commands`; sorted, no
/// duplicates.
pub fn bot_scopes() -> Vec<&'static str> {
    let mut scopes: Vec<&'static str> = WEB_API_METHODS
        .iter()
        .filter(|m| m.token == Token::Bot)
        .filter_map(|m| m.scope)
        .chain(BOT_EVENTS.iter().map(|(_, scope)| *scope))
        .chain([COMMANDS_SCOPE])
        .collect();
    scopes.sort_unstable();
    scopes.dedup();
    scopes
}

/// The usage hint of the slash command: every gateway command.
fn usage_hint() -> String {
    Command::ALL
        .iter()
        .map(|(name, _)| match *name {
            "cancel" => "cancel <task id>".to_string(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The manifest for an app named `name` (the org's `framework.name`), delivered as `delivery` says.
pub fn manifest(name: &str, delivery: &Delivery) -> Value {
    let app_name = match truncate(name, MAX_APP_NAME) {
        n if n.is_empty() => "OPC".to_string(),
        n => n,
    };
    let bot_name = match truncate(name, MAX_BOT_NAME) {
        n if n.is_empty() => "OPC".to_string(),
        n => n,
    };
    let url = |path: &str| match delivery {
        Delivery::Socket => None,
        Delivery::Http { base_url } => Some(format!("{}{path}", base_url.trim_end_matches('/'))),
    };
    let mut command = json!({
        "command": SLASH_COMMAND,
        "description": "Ask the org: running tasks, the org tree, recent requests, cancel, help",
        "usage_hint": usage_hint(),
        "should_escape": false,
    });
    let mut events = json!({
        "bot_events": BOT_EVENTS.iter().map(|(event, _)| *event).collect::<Vec<_>>(),
    });
    let mut interactivity = json!({ "is_enabled": true });
    if let Some(commands) = url(ROUTES.commands) {
        command["url"] = json!(commands);
        events["request_url"] = json!(url(ROUTES.events));
        interactivity["request_url"] = json!(url(ROUTES.interactions));
    }
    json!({
        "_metadata": { "major_version": 1, "minor_version": 1 },
        "display_information": {
            "name": app_name,
            "description": "An AI org: mention it with a request; its CEO agent delegates down the org.",
        },
        "features": {
            "app_home": {
                "home_tab_enabled": false,
                "messages_tab_enabled": true,
                "messages_tab_read_only_enabled": false,
            },
            "bot_user": { "display_name": bot_name, "always_online": true },
            "slash_commands": [command],
        },
        "oauth_config": { "scopes": { "bot": bot_scopes() } },
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "org_deploy_enabled": false,
            "socket_mode_enabled": *delivery == Delivery::Socket,
            "token_rotation_enabled": false,
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{Dedup, InboundKind};
    use std::time::Duration;

    /// The adapter's source, read as text: the lists above must match what it really calls and serves.
    const SOURCE: &str = concat!(
        include_str!("mod.rs"),
        include_str!("cards.rs"),
        include_str!("events.rs"),
        include_str!("routes.rs"),
        include_str!("signature.rs"),
        include_str!("socket.rs"),
        include_str!("web_api.rs"),
    );

    /// Slack method names in the adapter's source: the names its error messages and docs give each
    /// call (`api_error("chat.update", …)`), which every call site passes.
    fn methods_in_source() -> Vec<String> {
        let mut found: Vec<String> = SOURCE
            .split("api_error(\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_string)
            .collect();
        found.sort();
        found.dedup();
        found
    }

    #[test]
    fn every_called_method_is_listed_and_every_listed_one_is_called() {
        let mut listed: Vec<String> = WEB_API_METHODS.iter().map(|m| m.name.to_string()).collect();
        listed.sort();
        assert_eq!(methods_in_source(), listed);
        // And each slack-morphism call names its method in that error (one `api_error` per call).
        for (call, method) in [
            (".auth_test()", "auth.test"),
            (".chat_post_message(", "chat.postMessage"),
            (".chat_update(", "chat.update"),
            (".chat_post_ephemeral(", "chat.postEphemeral"),
            (".apps_connections_open(", "apps.connections.open"),
        ] {
            assert!(SOURCE.contains(call), "{call}");
            assert!(listed.iter().any(|m| m == method), "{method}");
        }
        // Every Web API call opens a session (`self.session()`, or `open_session` directly; one
        // `open_session` is `session()` itself) and names its method in one `api_error`.
        let calls =
            SOURCE.matches(".session()").count() + SOURCE.matches(".open_session(").count() - 1;
        assert_eq!(
            calls,
            WEB_API_METHODS.len(),
            "a new Web API call in slack/: add it to WEB_API_METHODS with its scope"
        );
        assert_eq!(SOURCE.matches("api_error(\"").count(), calls);
    }

    #[test]
    fn the_manifest_grants_what_the_adapter_needs_and_nothing_more() {
        let manifest = manifest("Example AI Org", &Delivery::Socket);
        let scopes: Vec<&str> = manifest["oauth_config"]["scopes"]["bot"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        for method in WEB_API_METHODS.iter().filter(|m| m.token == Token::Bot) {
            if let Some(scope) = method.scope {
                assert!(scopes.contains(&scope), "{} needs {scope}", method.name);
            }
        }
        for (event, scope) in BOT_EVENTS {
            assert!(scopes.contains(scope), "{event} needs {scope}");
        }
        assert!(scopes.contains(&"commands"));
        assert_eq!(
            scopes,
            [
                "app_mentions:read",
                "channels:history",
                "chat:write",
                "commands",
                "groups:history",
                "im:history",
                "mpim:history"
            ]
        );
        // The app-level token's scope is not a bot scope: it is granted when that token is created.
        assert!(!scopes.contains(&"connections:write"));
    }

    #[test]
    fn socket_mode_has_no_urls_and_http_mode_points_at_the_adapters_routes() {
        let socket = manifest("Org", &Delivery::Socket);
        assert_eq!(socket["settings"]["socket_mode_enabled"], true);
        let text = socket.to_string();
        assert!(
            !text.contains("request_url") && !text.contains("\"url\""),
            "{text}"
        );

        let http = manifest(
            "Org",
            &Delivery::Http {
                base_url: "https://opc.example.com/".into(),
            },
        );
        assert_eq!(http["settings"]["socket_mode_enabled"], false);
        assert_eq!(
            http["settings"]["event_subscriptions"]["request_url"],
            "https://opc.example.com/slack/events"
        );
        assert_eq!(
            http["settings"]["interactivity"]["request_url"],
            "https://opc.example.com/slack/interactions"
        );
        assert_eq!(
            http["features"]["slash_commands"][0]["url"],
            "https://opc.example.com/slack/commands"
        );
        for path in [ROUTES.events, ROUTES.interactions, ROUTES.commands] {
            assert!(
                SOURCE.contains(&format!(".route(\"{path}\"")),
                "the adapter serves {path}"
            );
        }
    }

    /// Both manifests have the shape of slack-morphism's model of Slack's manifest schema (field
    /// names, types, URLs that parse); names are cut to Slack's limits.
    #[test]
    fn the_manifest_matches_slack_morphisms_schema() {
        let long = "A very long organisation name that Slack would refuse whole";
        for delivery in [
            Delivery::Socket,
            Delivery::Http {
                base_url: "https://opc.example.com/prefix".into(),
            },
        ] {
            let value = manifest(long, &delivery);
            let typed: slack_morphism::prelude::SlackAppManifest =
                serde_json::from_value(value.clone()).expect("slack-morphism reads it");
            assert!(typed.display_information.name.chars().count() <= MAX_APP_NAME);
            let bot = typed.features.unwrap().bot_user.unwrap();
            assert!(bot.always_online);
            assert_eq!(bot.display_name, long);
        }
        assert_eq!(
            manifest("  ", &Delivery::Socket)["display_information"]["name"],
            "OPC"
        );
    }

    /// Every subscribed event, as Slack sends it, reaches the gateway; the slash command reaches every
    /// gateway command.
    #[tokio::test]
    async fn subscribed_events_and_the_command_reach_the_gateway() {
        let (inbox, mut inbound) = tokio::sync::mpsc::channel(16);
        let receiver = super::super::Receiver {
            inbox,
            dedup: Dedup::default(),
            signatures: Dedup::new(Duration::from_secs(60), 10),
            bot_user: "UBOT".into(),
            bot_id: None,
            team: "T1".into(),
            signing_secret: None,
        };
        for (n, (event, _)) in BOT_EVENTS.iter().enumerate() {
            let payload = match *event {
                "app_mention" => json!({"type": "app_mention", "text": "<@UBOT> hi"}),
                other => {
                    let channel_type = match other.trim_start_matches("message.") {
                        "channels" => "channel",
                        "groups" => "group",
                        "im" => "im",
                        _ => "mpim",
                    };
                    json!({"type": "message", "channel_type": channel_type, "text": "more",
                           "thread_ts": "1.0"})
                }
            };
            let mut payload = payload;
            payload["user"] = json!("U1");
            payload["channel"] = json!("C1");
            payload["ts"] = json!(format!("2.{n}"));
            receiver.event_callback(
                &json!({"type": "event_callback", "event_id": format!("E{n}"), "event": payload}),
                None,
            );
            let got = inbound
                .try_recv()
                .unwrap_or_else(|_| panic!("{event} delivered"));
            assert!(
                matches!(
                    got.kind,
                    InboundKind::Mention { .. } | InboundKind::Message { .. }
                ),
                "{event}"
            );
        }
        for (n, (name, _)) in Command::ALL.iter().enumerate() {
            receiver.slash_command(
                &json!({"command": SLASH_COMMAND, "text": format!("{name} 7"), "user_id": "U1",
                        "channel_id": "C1", "trigger_id": format!("t{n}")}),
                None,
            );
            let got = inbound.try_recv().expect("command delivered");
            let InboundKind::Command(command) = got.kind else {
                panic!("{name}: not a command");
            };
            assert!(!matches!(command, Command::Unknown(_)), "{name}");
            assert!(usage_hint().contains(name), "{name} in the usage hint");
        }
    }
}
