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

/// `text` with every credential in it masked in place: a few characters at each end stay, so a person
/// can tell which credential it was (and rotate it), and the middle becomes `*`. The length in bytes is
/// unchanged, so positions into the text stay valid. Diagnostics, their snippets and their JSON all go
/// through this, so a pasted secret is never printed in full.
pub fn mask(text: &str) -> std::borrow::Cow<'_, str> {
    let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
    let mut offset = 0;
    for word in text.split_inclusive(char::is_whitespace) {
        let start = offset;
        offset += word.len();
        let token = word.trim_end_matches(char::is_whitespace);
        let trimmed = token.trim_start_matches(['"', '\'', '`', ',', ';', '(']);
        let lead = token.len() - trimmed.len();
        let trimmed = trimmed.trim_end_matches(['"', '\'', '`', ',', ';', ')']);
        if credential_kind(trimmed).is_some() {
            ranges.push(start + lead..start + lead + trimmed.len());
        }
    }
    ranges.extend(private_key_bodies(text));
    if ranges.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut bytes = text.as_bytes().to_vec();
    for range in ranges {
        let len = range.len();
        let keep_start = (len / 4).min(8);
        let keep_end = (len / 8).min(4);
        for b in &mut bytes[range.start + keep_start..range.end - keep_end] {
            // Credentials are ASCII (checked by `credential_kind`), as are base64 key bodies, so
            // overwriting bytes keeps the text valid UTF-8; anything else is left alone.
            if b.is_ascii_graphic() {
                *b = b'*';
            }
        }
    }
    std::borrow::Cow::Owned(String::from_utf8(bytes).unwrap_or_else(|_| text.to_string()))
}

/// The base64 bodies of PEM private keys in `text` (between the BEGIN and END lines).
fn private_key_bodies(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut bodies = Vec::new();
    let mut from = 0;
    while let Some(begin) = text[from..].find("-----BEGIN") {
        let begin = from + begin;
        let Some(header_end) = text[begin + 10..].find("-----").map(|i| begin + 10 + i + 5) else {
            break;
        };
        let end = text[header_end..]
            .find("-----END")
            .map_or(text.len(), |i| header_end + i);
        if text[begin..header_end].contains("PRIVATE KEY") && end > header_end {
            bodies.push(header_end..end);
        }
        from = end.max(header_end);
    }
    bodies
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

    #[test]
    fn masks_keep_the_ends_and_the_length() {
        let text =
            "key: \"sk-ant-api03-abcdefghijklmnop1234\" and xoxb-1234567890-abcdefghijkl, fine";
        let masked = mask(text);
        assert_eq!(masked.len(), text.len());
        assert!(!masked.contains("abcdefghijklmnop"), "{masked}");
        assert!(masked.contains("sk-ant-a"), "{masked}");
        assert!(masked.contains("1234\""), "{masked}");
        assert!(masked.contains("xoxb-12"), "{masked}");
        assert!(masked.ends_with("jkl, fine"), "{masked}");
        assert_eq!(mask("no secrets here"), "no secrets here");
        let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";
        let masked = mask(pem);
        assert!(
            !masked.contains("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
            "{masked}"
        );
        assert!(masked.contains("-----END PRIVATE KEY-----"), "{masked}");
    }
}
