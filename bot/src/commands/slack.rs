//! `opc slack manifest`: the Slack app manifest for the configured org, so creating the app is one
//! paste ("Create New App → From a manifest" at https://api.slack.com/apps).
//!
//! The manifest itself (scopes, events, slash command, routes) comes from the adapter's own lists
//! (`opc_adapters::slack::manifest`), where tests keep it equal to what the adapter calls and serves;
//! this command adds what only the config knows: the app's name (`framework.name`), and Socket Mode or
//! request URLs (`channels.slack.mode`; in HTTP mode the public base URL comes from `--url`, else from
//! `channels.web.publicUrl`).
//!
//! Output: the manifest as JSON on stdout (nothing else, so it can be piped or saved), and the steps
//! after the paste — which tokens to create and which variables the config reads them from — on
//! stderr. No secret is read or printed.

use std::path::Path;
use std::process::ExitCode;

use opc_adapters::slack::manifest::{self, Delivery};
use opc_hierarchy::schema::SlackMode;

use crate::term::{eprint, print};

/// `opc slack …`
#[derive(Debug, clap::Subcommand)]
pub enum SlackCommand {
    /// Print the Slack app manifest (JSON) for the configured org: app and bot name from
    /// `framework.name`, the bot scopes the adapter needs, its events, the `/opc` slash command,
    /// interactivity, and Socket Mode or request URLs per `channels.slack.mode`.
    ///
    /// Paste it at https://api.slack.com/apps → Create New App → From a manifest. What to do next (the
    /// tokens to create and the variables to export) is printed on stderr. Exit status: 0 printed,
    /// 1 invalid config or no `channels.slack`, 2 unreadable config or a missing or bad `--url`.
    Manifest {
        /// HTTP mode: the public HTTPS base URL Slack posts to (e.g. https://opc.example.com); the
        /// request URLs are its /slack/events, /slack/interactions and /slack/commands. Default:
        /// `channels.web.publicUrl`.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
}

/// Run `opc slack …` with the config at `config`.
pub fn run(config: &Path, command: SlackCommand) -> ExitCode {
    match command {
        SlackCommand::Manifest { url } => print_manifest(config, url.as_deref()),
    }
}

fn print_manifest(path: &Path, url: Option<&str>) -> ExitCode {
    let loaded = match crate::setup::load_config(path) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let Some(slack) = &loaded.config.channels.slack else {
        eprint(&format!(
            "error: {} has no `channels.slack` section, so there is no Slack app to describe\n\
             hint: add one under `channels:` (Socket Mode needs no public URL), then run this again:\n\
             \x20 channels:\n\
             \x20   slack: {{ mode: socket, botTokenEnv: SLACK_BOT_TOKEN, appTokenEnv: SLACK_APP_TOKEN }}\n",
            path.display()
        ));
        return ExitCode::FAILURE;
    };
    let delivery = match slack.mode {
        SlackMode::Socket => {
            if url.is_some() {
                eprint("note: --url is not used in Socket Mode (Slack needs no request URLs)\n");
            }
            Delivery::Socket
        }
        // `--url` wins; else the address people already open (`channels.web.publicUrl`), where the
        // proxy in front of `opc run` already forwards to the listener.
        SlackMode::Http => match url
            .or(loaded.config.channels.web.public_url.as_deref())
            .map(base_url)
        {
            Some(Ok(base_url)) => Delivery::Http { base_url },
            Some(Err(why)) => {
                eprint(&format!(
                    "error: the public URL {why}\nhint: pass the HTTPS address `opc run` is reachable at, e.g. --url https://opc.example.com\n"
                ));
                return ExitCode::from(2);
            }
            None => {
                eprint(
                    "error: `channels.slack.mode` is `http`, so Slack needs the public URL it posts to\n\
                     hint: set `channels.web.publicUrl: https://<your host>` (the address of `opc run` behind \
                     your TLS proxy) or pass --url, or use `mode: socket`, which needs no public URL\n",
                );
                return ExitCode::from(2);
            }
        },
    };
    let manifest = manifest::manifest(&loaded.config.framework.name, &delivery);
    match serde_json::to_string_pretty(&manifest) {
        Ok(text) => print(&format!("{text}\n")),
        Err(e) => {
            eprint(&format!("error: cannot write the manifest: {e}\n"));
            return ExitCode::FAILURE;
        }
    }
    let mut steps = String::from(
        "\nnext: at https://api.slack.com/apps choose Create New App → From a manifest, pick the workspace,\n\
         \x20     and paste the JSON above. Then:\n",
    );
    let bot = slack.bot_token_env.name();
    match &delivery {
        Delivery::Socket => {
            let app = slack
                .app_token_env
                .as_ref()
                .map_or("SLACK_APP_TOKEN", |v| v.name());
            steps.push_str(&format!(
                "  1. Basic Information → App-Level Tokens → Generate, with scope connections:write;\n\
                 \x20    export {app}=xapp-…\n"
            ));
        }
        Delivery::Http { base_url } => {
            let secret = slack
                .signing_secret_env
                .as_ref()
                .map_or("SLACK_SIGNING_SECRET", |v| v.name());
            steps.push_str(&format!(
                "  1. Basic Information → Signing Secret; export {secret}=…\n\
                 \x20    (Slack checks {base_url}/slack/events when the app is saved: `opc run` must answer there)\n"
            ));
        }
    }
    steps.push_str(&format!(
        "  2. Install App → Install to Workspace; export {bot}=xoxb-… (the Bot User OAuth Token)\n\
         \x20 3. opc run; in a channel, /invite the bot ({name}) and mention it with a request; `/opc help`\n\
         \x20    lists the commands. Put approvers' Slack ids in `gateway.approvers` (slack:U…).\n",
        name = loaded.config.framework.name.trim(),
    ));
    eprint(&steps);
    ExitCode::SUCCESS
}

/// Check a public base URL: HTTPS (Slack posts only to HTTPS), a host, no query or fragment; returned
/// without a trailing slash.
fn base_url(url: &str) -> Result<String, String> {
    let trimmed = url.trim().trim_end_matches('/');
    let Some(rest) = trimmed.strip_prefix("https://") else {
        return Err(format!(
            "`{url}` must start with https:// (Slack posts only to HTTPS)"
        ));
    };
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("`{url}` has no host"));
    }
    if rest.contains(['?', '#']) {
        return Err(format!("`{url}` must not have a query or fragment"));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::base_url;

    #[test]
    fn base_urls_are_checked() {
        assert_eq!(
            base_url("https://opc.example.com/").as_deref(),
            Ok("https://opc.example.com")
        );
        assert_eq!(
            base_url("https://example.com/opc").as_deref(),
            Ok("https://example.com/opc")
        );
        assert!(base_url("http://opc.example.com").is_err());
        assert!(base_url("https://").is_err());
        assert!(base_url("https://x.com/?a=b").is_err());
    }
}
