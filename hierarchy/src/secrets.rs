//! Recognising credentials pasted into the config by mistake.
//!
//! Secrets may only come from environment variables named in the config (`botTokenEnv: SLACK_BOT_TOKEN`).
//! A token written inline would end up in version control and, through memory blocks or prompts, in LLM
//! requests, so the validator rejects any value that has the shape of a well-known credential. The
//! shapes are the vendors' documented prefixes; nothing here tries to be a general entropy detector
//! (that is the privacy crate's job), so ordinary prose never trips it.

/// The kind of credential `word` looks like, if any. `word` is one whitespace-free token.
pub fn credential_kind(word: &str) -> Option<&'static str> {
    const PREFIXES: &[(&str, &str, usize)] = &[
        // (prefix, kind, minimum total length)
        ("xoxb-", "Slack bot token", 20),
        ("xoxp-", "Slack user token", 20),
        ("xoxa-", "Slack token", 20),
        ("xoxe", "Slack token", 20),
        ("xoxs-", "Slack token", 20),
        ("xapp-", "Slack app-level token", 20),
        ("sk-ant-", "Anthropic API key", 24),
        ("sk-proj-", "OpenAI API key", 24),
        ("sk-", "API secret key", 24),
        ("sk_live_", "Stripe secret key", 20),
        ("rk_live_", "Stripe restricted key", 20),
        ("ghp_", "GitHub token", 30),
        ("gho_", "GitHub token", 30),
        ("ghu_", "GitHub token", 30),
        ("ghs_", "GitHub token", 30),
        ("github_pat_", "GitHub token", 30),
        ("glpat-", "GitLab token", 20),
        ("AIza", "Google API key", 35),
        ("AKIA", "AWS access key id", 20),
        ("ASIA", "AWS access key id", 20),
    ];
    let word = word.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | ',' | ';' | '(' | ')'));
    let token_chars = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+' | '='));
    if !token_chars {
        return None;
    }
    for (prefix, kind, min_len) in PREFIXES {
        if word.starts_with(prefix)
            && word.len() >= *min_len
            && word[prefix.len()..].bytes().any(|b| b.is_ascii_digit())
        {
            return Some(kind);
        }
    }
    if word.starts_with("eyJ") && word.matches('.').count() == 2 && word.len() >= 30 {
        return Some("JSON Web Token");
    }
    if is_discord_token(word) {
        return Some("Discord bot token");
    }
    None
}

/// Discord bot tokens are three base64url parts: the bot's id, a timestamp and an HMAC.
fn is_discord_token(word: &str) -> bool {
    let parts: Vec<&str> = word.split('.').collect();
    parts.len() == 3
        && parts[0].len() >= 23
        && parts[1].len() >= 6
        && parts[2].len() >= 27
        && parts[0].starts_with(['M', 'N', 'O'])
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Whether `text` is a credential as a whole (used for `…Env` values, which must be variable names).
pub fn looks_like_secret(text: &str) -> bool {
    credential_kind(text.trim()).is_some()
}

/// The first credential-shaped word inside `text`, with its kind.
pub fn find_secret(text: &str) -> Option<&'static str> {
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY") {
        return Some("private key");
    }
    text.split_whitespace().find_map(credential_kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_vendor_tokens() {
        assert_eq!(
            credential_kind("xoxb-1234567890-abcdefghijkl"),
            Some("Slack bot token")
        );
        assert_eq!(
            credential_kind("sk-ant-api03-abcdefghijklmnop1234"),
            Some("Anthropic API key")
        );
        assert_eq!(
            credential_kind("AKIAIOSFODNN7EXAMPLE"),
            Some("AWS access key id")
        );
        assert_eq!(
            credential_kind("MTA1234567890123456789012.GaBcDe.abcdefghijklmnopqrstuvwxyz12345"),
            Some("Discord bot token")
        );
    }

    #[test]
    fn ignores_env_names_and_prose() {
        for text in [
            "SLACK_BOT_TOKEN",
            "sk-learn",
            "skills",
            "the xoxb prefix",
            "AKIA",
        ] {
            assert_eq!(find_secret(text), None, "{text}");
        }
    }
}
