//! Recognising credentials pasted into the config by mistake.
//!
//! Secrets may only come from environment variables named in the config (`botTokenEnv: SLACK_BOT_TOKEN`).
//! A token written inline would end up in version control and, through memory blocks or prompts, in LLM
//! requests, so the validator rejects any value that has the shape of a well-known credential.
//!
//! The list of credential shapes lives in one place, the dependency-free `opc-shapes` crate
//! ([`opc_shapes::credentials`]), which the privacy detector also uses to mask them in LLM requests;
//! this module re-exports it so the validator and the diagnostics keep their paths.

pub use opc_shapes::credentials::{find_secret, looks_like_secret, mask};

/// "a" or "an" before `word`, by its first letter (good enough for the names of credential kinds).
pub(crate) fn article(word: &str) -> &'static str {
    if word.starts_with(['A', 'E', 'I', 'O', 'U', 'a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opc_shapes::credentials::credential_kind;

    #[test]
    fn the_validator_sees_the_shared_list() {
        assert_eq!(
            credential_kind("xoxb-1234567890-abcdefghijkl"),
            Some("Slack bot token")
        );
        assert!(looks_like_secret(
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
        ));
        assert_eq!(find_secret("SLACK_BOT_TOKEN"), None);
        assert_eq!(mask("no secrets here"), "no secrets here");
    }
}
