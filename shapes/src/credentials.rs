//! Credential shapes: the one list of well-known API keys and tokens.
//!
//! Three users: the config validator (the hierarchy crate re-exports this module) rejects any inline value
//! that has the shape of a credential, because secrets may only come from environment variables; the
//! detector's `API_KEY` recogniser masks them in LLM requests (`opc_privacy::detect::secrets` is this
//! module); and the privacy crate's fakes keep the real key's vendor prefix ([`vendor_prefix`]), so the
//! model still knows what kind of secret it is. The shapes are the vendors' documented
//! prefixes plus a minimum length and a digit after the prefix, so ordinary prose (`sk-learn`, `skills`,
//! `SLACK_BOT_TOKEN`) never trips them. The entropy rule for `key = value` pairs lives in `api_key.rs`.

/// The kind of credential `word` looks like, if any. `word` is one whitespace-free token.
pub fn credential_kind(word: &str) -> Option<&'static str> {
    let word = word.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | ',' | ';' | '(' | ')'));
    let token_chars = word.chars().all(|c| {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+' | '=' | '~' | ':')
    });
    if !token_chars {
        return None;
    }
    for (prefix, kind, min_len) in PREFIXES {
        if word.starts_with(prefix)
            && word.len() >= *min_len
            && random_looking(&word[prefix.len()..])
        {
            return Some(kind);
        }
    }
    shaped(word)
}

/// Literals at least one of which occurs in any text holding a credential `credential_kind` knows:
/// the vendor prefixes and the fixed parts of the prefix-less shapes (a cheap gate for scanners).
/// Discord tokens have no fixed part; scanners look for them separately.
pub fn markers() -> impl Iterator<Item = &'static str> {
    PREFIXES
        .iter()
        .map(|p| p.0)
        .chain([JWT_PREFIX, "-us", "Q~", ":AA"])
}

/// Every vendor prefix in the list, in list order (a prefix may extend another: `sk-ant-api03-`,
/// `sk-ant-`, `sk-`).
pub fn prefixes() -> impl Iterator<Item = &'static str> {
    PREFIXES.iter().map(|p| p.0)
}

/// The longest vendor prefix `key` starts with, or `eyJ` for a JSON Web Token (its fixed start, the
/// base64 of `{"`). Fakes keep it verbatim, so a masked `sk-ant-api03-…` still reads as an Anthropic
/// key; the lengths and digit rules of [`credential_kind`] do not apply, since the detector already
/// decided `key` is one.
pub fn vendor_prefix(key: &str) -> Option<&'static str> {
    prefixes()
        .chain([JWT_PREFIX])
        .filter(|p| key.starts_with(*p))
        .max_by_key(|p| p.len())
}

/// A JSON Web Token's first three characters: the base64 of `{"`.
const JWT_PREFIX: &str = "eyJ";

/// (prefix, kind, minimum total length).
///
/// The one list: the config validator, the detector and the fakes all read it. Where one prefix
/// extends another, the longer comes first, so [`credential_kind`] names the most specific kind.
const PREFIXES: &[(&str, &str, usize)] = &[
    ("xoxb-", "Slack bot token", 20),
    ("xoxp-", "Slack user token", 20),
    ("xoxa-", "Slack token", 20),
    ("xoxe", "Slack token", 20),
    ("xoxs-", "Slack token", 20),
    ("xoxr-", "Slack token", 20),
    ("xoxo-", "Slack token", 20),
    ("xapp-", "Slack app-level token", 20),
    ("sk-ant-api03-", "Anthropic API key", 30),
    ("sk-ant-admin01-", "Anthropic admin key", 30),
    ("sk-ant-", "Anthropic API key", 24),
    ("sk-proj-", "OpenAI API key", 24),
    ("sk-svcacct-", "OpenAI API key", 30),
    ("sk_live_", "Stripe secret key", 20),
    ("rk_live_", "Stripe restricted key", 20),
    ("rk_prod_", "Stripe restricted key", 20),
    ("sk_prod_", "Stripe secret key", 20),
    ("ghp_", "GitHub token", 30),
    ("gho_", "GitHub token", 30),
    ("ghu_", "GitHub token", 30),
    ("ghs_", "GitHub token", 30),
    ("github_pat_", "GitHub token", 30),
    ("glpat-", "GitLab token", 20),
    ("AIza", "Google API key", 35),
    ("AKIA", "AWS access key id", 20),
    ("ASIA", "AWS access key id", 20),
    ("ABSK", "Amazon Bedrock API key", 60),
    ("sk_test_", "Stripe test key", 20),
    ("rk_test_", "Stripe restricted key", 20),
    ("whsec_", "Stripe webhook secret", 30),
    ("sk-or-", "OpenRouter API key", 30),
    ("ghr_", "GitHub token", 30),
    ("glptt-", "GitLab token", 20),
    ("gldt-", "GitLab token", 20),
    ("glrt-", "GitLab runner token", 20),
    ("glcbt-", "GitLab token", 20),
    ("glft-", "GitLab token", 20),
    ("glimt-", "GitLab token", 20),
    ("glsoat-", "GitLab token", 20),
    ("glagent-", "GitLab token", 40),
    ("GR1348941", "GitLab runner token", 20),
    ("hf_", "Hugging Face token", 30),
    ("api_org_", "Hugging Face token", 30),
    ("npm_", "npm token", 36),
    ("pypi-AgE", "PyPI token", 50),
    ("dop_v1_", "DigitalOcean token", 40),
    ("doo_v1_", "DigitalOcean token", 40),
    ("shpat_", "Shopify token", 30),
    ("shpss_", "Shopify token", 30),
    ("shpca_", "Shopify token", 30),
    ("hvs.", "Vault token", 24),
    ("hvb.", "Vault token", 24),
    ("ops_eyJ", "1Password token", 50),
    ("sntrys_", "Sentry token", 40),
    ("sntryu_", "Sentry token", 40),
    ("sgp_", "Sourcegraph token", 40),
    ("fo1_", "Fly.io token", 40),
    ("pplx-", "Perplexity API key", 40),
    ("lin_api_", "Linear API key", 40),
    ("ntn_", "Notion token", 40),
    ("secret_", "Notion token", 43),
    ("ATATT3", "Atlassian token", 60),
    ("SG.", "SendGrid API key", 60),
    ("pnu_", "Prefect token", 36),
    ("dapi", "Databricks token", 36),
    ("glc_", "Grafana token", 40),
    ("glsa_", "Grafana token", 40),
    ("sq0atp-", "Square token", 20),
    ("sq0csp-", "Square secret", 40),
    ("EAAA", "Square token", 60),
    ("EAA", "Facebook token", 60),
    ("ya29.", "Google OAuth token", 30),
    ("AKCp", "Artifactory API key", 60),
    ("pul-", "Pulumi token", 40),
    ("rdme_", "ReadMe token", 60),
    ("PMAK-", "Postman API key", 50),
    ("xkeysib-", "Brevo API key", 60),
    ("tk-us-", "Scalingo token", 40),
    ("dp.pt.", "Doppler token", 40),
    ("HRKU-", "Heroku API key", 40),
    ("fm1r_", "Fly.io token", 40),
    ("fm1a_", "Fly.io token", 40),
    ("fm2_", "Fly.io token", 40),
    ("s-s4t2ud-", "42 client secret", 40),
    ("s-s4t2af-", "42 client secret", 40),
    ("A3-", "1Password secret key", 33),
    ("gloas-", "GitLab token", 20),
    ("sqp_", "SonarQube token", 40),
    ("squ_", "SonarQube token", 40),
    ("snyk_", "Snyk token", 30),
    ("sk-", "API secret key", 24),
];

/// The shapes without a vendor prefix: JWTs, Telegram, Mailchimp, Azure AD and Discord tokens.
fn shaped(word: &str) -> Option<&'static str> {
    if word.starts_with(JWT_PREFIX) && word.matches('.').count() == 2 && word.len() >= 30 {
        return Some("JSON Web Token");
    }
    if is_telegram_token(word) {
        return Some("Telegram bot token");
    }
    if is_mailchimp_key(word) {
        return Some("Mailchimp API key");
    }
    if is_azure_client_secret(word) {
        return Some("Azure AD client secret");
    }
    if is_discord_token(word) {
        return Some("Discord bot token");
    }
    None
}

/// The part after a vendor prefix: a digit in it, or long and mixed-case (Hugging Face tokens are
/// letters only), so words like `sk-learn` or `hf_hub_download` never count.
fn random_looking(rest: &str) -> bool {
    if rest.to_ascii_lowercase().contains("xxxxx") {
        return false;
    }
    rest.bytes().any(|b| b.is_ascii_digit())
        || (rest.len() >= 30
            && rest.bytes().any(|b| b.is_ascii_uppercase())
            && rest.bytes().any(|b| b.is_ascii_lowercase()))
}

/// Telegram bot tokens: the bot's numeric id, `:`, 35 characters of base64url.
fn is_telegram_token(word: &str) -> bool {
    let Some((id, key)) = word.split_once(':') else {
        return false;
    };
    (8..=10).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_digit())
        && key.len() == 35
        && key.starts_with("AA")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Mailchimp keys: 32 hex digits, `-us`, the datacentre number.
fn is_mailchimp_key(word: &str) -> bool {
    let Some((hex, dc)) = word.split_once("-us") else {
        return false;
    };
    hex.len() == 32
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && (1..=2).contains(&dc.len())
        && dc.bytes().all(|b| b.is_ascii_digit())
}

/// Azure AD client secrets: three characters, a digit, `Q~`, then 31 to 34 more.
fn is_azure_client_secret(word: &str) -> bool {
    let b = word.as_bytes();
    (37..=40).contains(&b.len())
        && b[3].is_ascii_digit()
        && &b[4..6] == b"Q~"
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'~' | b'.' | b'-'))
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

    #[test]
    fn vendor_prefix_is_the_longest_listed() {
        assert_eq!(vendor_prefix("sk-ant-api03-abc"), Some("sk-ant-api03-"));
        assert_eq!(vendor_prefix("sk-ant-xyz"), Some("sk-ant-"));
        assert_eq!(vendor_prefix("sk-or-v1-abc"), Some("sk-or-"));
        assert_eq!(vendor_prefix("ABSKQmVkcm9jaw"), Some("ABSK"));
        assert_eq!(vendor_prefix("EAAAbc"), Some("EAAA"));
        assert_eq!(vendor_prefix("eyJhbGciOi.x.y"), Some("eyJ"));
        assert_eq!(vendor_prefix("a1b2c3d4"), None);
    }

    #[test]
    fn longer_prefixes_come_first() {
        // `credential_kind` takes the first match, so a prefix listed after one it extends would
        // never be named.
        let list: Vec<&str> = prefixes().collect();
        for (i, later) in list.iter().enumerate() {
            for earlier in &list[..i] {
                assert!(
                    !later.starts_with(earlier),
                    "`{later}` extends `{earlier}` but is listed after it"
                );
            }
        }
    }
}
