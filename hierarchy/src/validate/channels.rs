//! Channels: a web listener that other people can reach (through a `publicUrl`) needs an access
//! token.
//!
//! Invariant: one missing token is one error; what the decoder already said about `listen` or
//! `accessTokenEnv` is not said again here.

use super::checker::Checker;
use crate::diagnostic::{Anchor, KeyPath};

impl<'a> Checker<'a> {
    /// `channels.web`: a listener other people can reach needs `accessTokenEnv`. Its two cases:
    /// a non-loopback `listen` (reported when `listen` is decoded, at its value), and a `publicUrl`,
    /// reported here: a reverse proxy makes a loopback listener public, and without the token anyone
    /// who finds the URL has the admin console, whose config editor can allow every Bash command.
    /// One missing token is one error: with a non-loopback `listen` the decoder has said it already,
    /// and so it has for an `accessTokenEnv` that is written but is not a variable name.
    pub(super) fn web_exposure(&mut self) {
        let web = &self.config.channels.web;
        let token_written = self
            .node_at(&KeyPath::of(["channels", "web", "accessTokenEnv"]))
            .is_some();
        if web.public_url.is_none() || token_written || !web.listen.ip().is_loopback() {
            return;
        }
        self.error(
            KeyPath::of(["channels", "web", "publicUrl"]),
            Anchor::Value,
            "with `publicUrl` set, the web chat and the admin console are reachable through the proxy, so they need an access token".into(),
            "add `accessTokenEnv: OPC_WEB_TOKEN` under `channels.web` and export OPC_WEB_TOKEN (e.g. `openssl rand -hex 32`) where `opc run` starts; or remove `publicUrl` to serve on loopback only",
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use crate::{ConfigError, Severity, parse};

    const ORG: &str = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nagents:\n  ceo: { role: CEO }\n";

    /// The errors of `ORG` with `web` as its `channels.web` section: `(line, column, path, message,
    /// hint)` each.
    fn web_errors(web: &str) -> Vec<(u32, u32, String, String, String)> {
        match parse("test.yaml", format!("{ORG}channels:\n  web:\n{web}"), None) {
            Ok(_) => Vec::new(),
            Err(ConfigError::Invalid(report)) => report
                .diagnostics
                .into_iter()
                .filter(|d| d.severity == Severity::Error)
                .map(|d| {
                    (
                        d.line(),
                        d.column(),
                        d.path.clone(),
                        d.message.clone(),
                        d.hint.clone().unwrap_or_default(),
                    )
                })
                .collect(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_public_url_needs_an_access_token() {
        let errors = web_errors("    publicUrl: https://opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (line, column, path, message, hint) = &errors[0];
        assert_eq!(
            (*line, *column, path.as_str()),
            (8, 16, "channels.web.publicUrl")
        );
        assert!(message.contains("access token"), "{message}");
        assert!(
            hint.contains("accessTokenEnv: OPC_WEB_TOKEN") && hint.contains("remove `publicUrl`"),
            "{hint}"
        );
        // With the token: valid.
        assert_eq!(
            web_errors(
                "    publicUrl: https://opc.example.com\n    accessTokenEnv: OPC_WEB_TOKEN\n"
            ),
            Vec::new()
        );
    }

    #[test]
    fn one_missing_token_is_one_error() {
        // A reachable `listen` already says the token is missing; `publicUrl` does not repeat it.
        let errors =
            web_errors("    listen: 0.0.0.0:7420\n    publicUrl: https://opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].2, "channels.web.listen");
        // A token that is written but not a variable name is reported as such, and only as such.
        let errors =
            web_errors("    accessTokenEnv: web-token\n    publicUrl: https://opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].2, "channels.web.accessTokenEnv");
        // An invalid `publicUrl` is reported as invalid, not as also needing a token.
        let errors = web_errors("    publicUrl: opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].3.contains("not a public URL"), "{errors:?}");
        // Loopback without `publicUrl` needs none.
        assert_eq!(web_errors("    listen: 127.0.0.1:7420\n"), Vec::new());
    }
}
