//! `API_KEY`: credentials, by four rules.
//! - vendor shapes: any token with a well-known prefix (the one list in [`super::secrets`]);
//! - JSON Web Tokens: `eyJ…` header, payload and signature;
//! - private key blocks: `-----BEGIN … PRIVATE KEY-----` to the matching END line (the whole block);
//! - assignments: `key = value`, `token: value`, `password=value`, `Authorization: Bearer value`,
//!   command-line flags (`curl -u user:pass`, `--token value`), URLs with `user:password@`, and Slack
//!   webhook URLs (the whole URL). The value is reported (not the name) when it looks like a secret: for
//!   password-like names any non-placeholder value of 6+ characters, otherwise 12+ characters with
//!   enough entropy and a mix of character classes, so `key = value_name` or `token: $ENV_VAR` is left.

use regex::Regex;

use super::{Pattern, Recognizer, Trigger, secrets};
use crate::{Entity, EntityType};

/// Finds credentials.
pub struct ApiKeyRecognizer {
    token: Pattern,
    jwt: Regex,
    pem: Regex,
    assign: Pattern,
    bearer: Pattern,
    flag: Pattern,
    webhook: Regex,
    userinfo: Pattern,
    markers: aho_corasick::AhoCorasick,
    /// ` -` (a command-line flag may follow), `://` (a `user:password@` may follow).
    finders: [memchr::memmem::Finder<'static>; 2],
    discord: Pattern,
}

/// Bytes of a credential-shaped token (what the token pattern matches).
const TOKEN: [bool; 256] = class(b"_.+/~:=-");
/// Bytes of an assignment's name (`api_key`, `x.auth-token`).
const NAME: [bool; 256] = class(b"_.-");
/// Bytes of a URL scheme.
const SCHEME: [bool; 256] = class(b"+.-");

/// ASCII whitespace as the patterns' `\s` has it (with the vertical tab).
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r')
}

/// Whether a name holds one of the words an assignment's name needs (ASCII case-insensitive):
/// `key`, `secret`, `token`, `pass`, `pwd`, `auth`, `credential`, `sig`, `login`. Each position is
/// tried only against the words starting with its letter.
fn has_key_word(name: &[u8]) -> bool {
    (0..name.len()).any(|i| {
        let rest = &name[i..];
        let words: &[&[u8]] = match rest[0].to_ascii_lowercase() {
            b'k' => &[b"key"],
            b's' => &[b"secret", b"sig"],
            b't' => &[b"token"],
            b'p' => &[b"pass", b"pwd"],
            b'a' => &[b"auth"],
            b'c' => &[b"credential"],
            b'l' => &[b"login"],
            _ => &[],
        };
        words
            .iter()
            .any(|w| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w))
    })
}

/// ASCII letters and digits plus `extra`.
const fn class(extra: &[u8]) -> [bool; 256] {
    let mut t = super::digits_and(extra);
    let mut c = b'a';
    while c <= b'z' {
        t[c as usize] = true;
        t[(c - 32) as usize] = true;
        c += 1;
    }
    t
}

/// The start of the run of `class` bytes that ends at `at` (exclusive).
fn run_start(bytes: &[u8], at: usize, class: &[bool; 256]) -> usize {
    let mut s = at;
    while s > 0 && class[bytes[s - 1] as usize] {
        s -= 1;
    }
    s
}

impl ApiKeyRecognizer {
    /// Compiles the patterns.
    pub fn new() -> Self {
        let c = |p: &str| Regex::new(p).expect("api key pattern compiles");
        let w = super::pattern;
        ApiKeyRecognizer {
            token: w(r"(?-u)[A-Za-z0-9_~][A-Za-z0-9_.+/~:-]{14,}[A-Za-z0-9_]=*"),
            jwt: c(r"(?-u)\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?"),
            pem: c(
                r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-*|\z)",
            ),
            assign: w(
                r#"(?i-u)([a-z0-9_.-]*(?:api[_.-]?key|apikey|secret|token|passw(?:or)?d|passwd|pwd|pass|auth|credential|access[_.-]?key|private[_.-]?key|client[_.-]?secret|signature|sig|key|login)[a-z0-9_.-]*)["']?[ \t]*(?::::=|:::=|::=|:=|\?=|=>|==|=|:)[ \t]*(?:[a-z]+\.\w+\{(?u:[^'"])*)?["'`]?((?u:[^\s"'`,;<>]){6,})"#,
            ),
            bearer: w(r"(?i-u)\b(?:bearer|basic|token)\s+([A-Za-z0-9_.+/~-]{8,}=*)"),
            flag: w(
                r#"(?-u)(?:\s-u|--user|--password|--token|--api-key|-p)\s+["']?(?:(?u:[^\s"':]){1,64}["']?:["']?)?((?u:[^\s"']){6,})"#,
            ),
            webhook: c(r"(?i-u)https?://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+"),
            markers: aho_corasick::AhoCorasick::new(secrets::markers())
                .expect("marker automaton builds"),
            discord: w(r"(?-u)\b[MNO][A-Za-z0-9_-]{23,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{27,}"),
            finders: [
                memchr::memmem::Finder::new(b" -"),
                memchr::memmem::Finder::new(b"://"),
            ],
            userinfo: w(r"(?i-u)\b[a-z][a-z0-9+.-]*://(?u:[^\s:/@]){1,64}:((?u:[^\s@/]){3,128})@"),
        }
    }
}

impl Default for ApiKeyRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// Shannon entropy in bits per character.
pub fn entropy(s: &str) -> f32 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f32;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f32 / n;
            -p * p.log2()
        })
        .sum()
}

fn placeholder(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    v.starts_with('$')
        || v.starts_with('%')
        || v.starts_with('{')
        || v.starts_with('<')
        || v.contains("${")
        || v.contains("{{")
        || lower.contains("xxxx")
        || lower.contains("****")
        || lower.contains("example")
        || lower.contains("placeholder")
        || lower.contains("changeme")
        || lower.contains("your_")
        || lower.contains("your-")
        || lower.starts_with("env")
        || lower.starts_with("process.")
        || lower.starts_with("os.")
        || matches!(
            lower.as_str(),
            "true"
                | "false"
                | "null"
                | "none"
                | "required"
                | "optional"
                | "string"
                | "password"
                | "secret"
                | "token"
        )
        || v.bytes().all(|b| b == v.as_bytes()[0])
}

/// Whether a name like `api_key` can hold a secret, rather than naming one (`credentialsId`,
/// `LLM_SECRET_NAME`, `token_url`, `publicToken`, `csrf-token`).
pub fn name_holds_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    const ENDS: &[&str] = &[
        "id", "ids", "name", "names", "url", "uri", "path", "file", "type", "length", "size",
        "count", "results", "header", "field", "format", "version", "mode", "enabled", "required",
        "len", "env", "var", "ref",
    ];
    if ENDS.iter().any(|e| n.ends_with(e))
        || n.starts_with("public")
        || n.contains("csrf")
        || n.contains("author")
    {
        return false;
    }
    // Matched through `key` alone: only a name that ends in it (`api_key`, `HEROKU_KEY`, `hubspotKey`),
    // not `keyword`, `pubkey_st` or `master-keying`.
    const STRONG: &[&str] = &[
        "secret",
        "token",
        "pass",
        "pwd",
        "auth",
        "credential",
        "signature",
        "login",
        "sig",
    ];
    STRONG.iter().any(|w| n.contains(w)) || n.ends_with("key")
}

/// Whether `v`, assigned to a name like `name`, looks like a secret rather than a reference or prose.
pub fn secret_value(name: &str, v: &str) -> bool {
    let v = v.trim_end_matches(['.', ')', ']', '}', '>']);
    if placeholder(v) || v.len() < 6 {
        return false;
    }
    let lname = name.to_ascii_lowercase();
    let classes = [
        v.bytes().any(|b| b.is_ascii_lowercase()),
        v.bytes().any(|b| b.is_ascii_uppercase()),
        v.bytes().any(|b| b.is_ascii_digit()),
        v.bytes().any(|b| !b.is_ascii_alphanumeric()),
    ]
    .iter()
    .filter(|c| **c)
    .count();
    let identifier = v
        .bytes()
        .all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'.' || b == b'-')
        && (v.contains('_')
            || v.contains('.')
            || v.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'));
    let dotted_path = v.contains('.')
        && v.split('.').all(|p| {
            p.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
        && v.split('.').skip(1).all(|p| {
            p.bytes()
                .all(|b| !b.is_ascii_uppercase() || b == p.as_bytes()[0])
        });
    if identifier || dotted_path {
        // `secret_length = X25519.secret_length`, `token: access-token`
        return false;
    }
    if lname.contains("pass") || lname.contains("pwd") {
        return classes >= 2 || v.len() >= 10;
    }
    v.len() >= 12 && classes >= 2 && entropy(v) >= 3.0
}

impl Recognizer for ApiKeyRecognizer {
    fn name(&self) -> &'static str {
        "api_key"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::ApiKey]
    }

    fn trigger(&self) -> Trigger {
        Trigger::DIGIT
            .or(Trigger::COLON)
            .or(Trigger::EQUALS)
            .or(Trigger::DASH)
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        let mut push = |start: usize, end: usize, score: f32| {
            out.push(Entity {
                kind: EntityType::ApiKey,
                start,
                end,
                score,
            });
        };
        let bytes = text.as_bytes();
        // Two passes of `memchr3` serve three gates and one rule: whether `PRIVATE KEY`, `eyJ` and
        // `hooks.slack.com` occur (each has its `V`, `J` or first `k` at a fixed offset, checked in
        // place), and where `bearer`, `basic` and `token` start (they hold a `b` or a `k`, rare
        // letters in prose).
        let word_at = |at: usize, w: &[u8]| {
            bytes
                .get(at..at + w.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(w))
        };
        let at = |p: usize, back: usize, s: &[u8]| p >= back && bytes[p - back..].starts_with(s);
        let (mut pem, mut jwt, mut webhook) = (false, false, false);
        let mut auth_starts: Vec<usize> = Vec::new();
        for p in memchr::memchr3_iter(b'b', b'B', b'k', bytes) {
            if matches!(bytes[p], b'b' | b'B') {
                if word_at(p, b"bearer") || word_at(p, b"basic") {
                    auth_starts.push(p);
                }
                continue;
            }
            if p >= 2 && word_at(p - 2, b"token") {
                auth_starts.push(p - 2);
            }
            webhook |= at(p, 3, b"hooks.slack.com");
        }
        for p in memchr::memchr3_iter(b'V', b'J', b'K', bytes) {
            match bytes[p] {
                b'V' => pem |= at(p, 3, b"PRIVATE KEY"),
                b'J' => jwt |= at(p, 2, b"eyJ"),
                _ => {
                    if p >= 2 && word_at(p - 2, b"token") {
                        auth_starts.push(p - 2);
                    }
                }
            }
        }
        auth_starts.sort_unstable();
        if pem {
            for m in self.pem.find_iter(text) {
                // A real block has a body (`-----BEGIN PRIVATE KEY-----\nanything\n…` is a doc example).
                let body = m
                    .as_str()
                    .lines()
                    .filter(|l| !l.starts_with("-----") && !l.contains(": "));
                let chars: usize = body
                    .map(|l| l.bytes().filter(u8::is_ascii_alphanumeric).count())
                    .sum();
                if chars >= 24 {
                    push(m.start(), m.end(), 1.0);
                }
            }
        }
        // Tokens: only runs of token bytes long enough to hold one (prose words are short), checked
        // against the credential shapes only when some shape's fixed part occurs in the text.
        let runs = super::long_runs(bytes, &TOKEN, 16);
        if !runs.is_empty() {
            // Every shape but Discord's holds one of the markers (the discord pattern finds those).
            let marked = runs
                .iter()
                .filter(|&&(s, e)| self.markers.is_match(&bytes[s..e]));
            let tokens = super::find_in_spans(&self.token, text, marked.copied());
            // Discord tokens (no fixed part) need 59 bytes: 24, `.`, 6, `.`, 27.
            let discord = super::find_in_spans(
                &self.discord,
                text,
                runs.iter().copied().filter(|(s, e)| e - s >= 59),
            );
            for (start, end) in tokens.into_iter().chain(discord) {
                let m = &text[start..end];
                if super::before_is(text, start, |b| b.is_ascii_alphanumeric()) {
                    continue;
                }
                if secrets::credential_kind(m).is_some() {
                    push(start, end, 0.99);
                }
            }
        }
        if jwt {
            for m in self.jwt.find_iter(text) {
                push(m.start(), m.end(), 0.97);
            }
        }
        if memchr::memchr2(b'=', b':', bytes).is_some() {
            // An assignment starts where a run of name bytes holding a key word starts, and the run is
            // followed by an optional quote, blanks and an operator (which holds `:` or `=`).
            let mut starts: Vec<usize> = Vec::new();
            for o in memchr::memchr2_iter(b'=', b':', bytes) {
                let mut at = if o > 0 && bytes[o - 1] == b'?' {
                    o - 1
                } else {
                    o
                };
                while at > 0 && matches!(bytes[at - 1], b' ' | b'\t') {
                    at -= 1;
                }
                if at > 0 && matches!(bytes[at - 1], b'"' | b'\'') {
                    at -= 1;
                }
                let start = run_start(bytes, at, &NAME);
                if start < at && has_key_word(&bytes[start..at]) && starts.last() != Some(&start) {
                    starts.push(start);
                }
            }
            for g in super::captures_at_starts(&self.assign, text, starts) {
                let (Some((ns, ne)), Some((vs, ve))) = (g[1], g[2]) else {
                    continue;
                };
                let name = &text[ns..ne];
                let value = text[vs..ve].trim_end_matches(['.', ')', ']', '}']);
                // `http://…` after `token:` is a URL, not a secret; leave it to the other rules.
                if value.contains("://")
                    || value.contains('@')
                    || !name_holds_secret(name)
                    || !secret_value(name, value)
                {
                    continue;
                }
                push(vs, vs + value.len(), 0.9);
            }
            // `scheme://user:password@`: from the scheme before each `://`, within the longest span
            // the pattern allows.
            let spans = self.finders[1].find_iter(bytes).map(|p| {
                (
                    run_start(bytes, p, &SCHEME),
                    p + 3 + 64 * 4 + 1 + 128 * 4 + 1,
                )
            });
            for g in super::captures_in_spans(&self.userinfo, text, spans) {
                if let Some((ps, pe)) = g[1]
                    && !placeholder(&text[ps..pe])
                {
                    push(ps, pe, 0.9);
                }
            }
        }
        if webhook {
            for m in self.webhook.find_iter(text) {
                push(m.start(), m.end(), 0.99);
            }
        }
        if self.finders[0].find(bytes).is_some() {
            // A flag match starts at the `-` (or the whitespace before `-u`), and its flag is followed
            // by whitespace: `\s-u `, `--user `, `--password `, `--token `, `--api-key `, `-p `.
            let spaced = |at: usize| bytes.get(at).is_some_and(|&b| space(b));
            let mut starts = Vec::new();
            for p in memchr::memchr_iter(b'-', bytes) {
                let rest = &bytes[p + 1..];
                if rest.first() == Some(&b'u') && p > 0 && space(bytes[p - 1]) && spaced(p + 2) {
                    starts.push(p - 1);
                }
                let flag = match rest.first() {
                    Some(b'p') => 1,
                    Some(b'-') => ["-user", "-password", "-token", "-api-key"]
                        .iter()
                        .find(|f| rest.starts_with(f.as_bytes()))
                        .map_or(0, |f| f.len()),
                    _ => 0,
                };
                if flag > 0 && spaced(p + 1 + flag) {
                    starts.push(p);
                }
            }
            for g in super::captures_at_starts(&self.flag, text, starts) {
                if let Some((vs, ve)) = g[1] {
                    let v = &text[vs..ve];
                    if !v.starts_with('-')
                        && !v.starts_with('[')
                        && !v.contains("://")
                        && secret_value("password", v)
                    {
                        push(vs, ve, 0.9);
                    }
                }
            }
        }
        // `Bearer`, `Basic`, `token`: at the starts found above.
        for g in super::captures_at_starts(&self.bearer, text, auth_starts) {
            if let Some((vs, ve)) = g[1] {
                let v = &text[vs..ve];
                if !placeholder(v) && v.bytes().any(|b| b.is_ascii_digit() || b == b'=') {
                    push(vs, ve, 0.9);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        ApiKeyRecognizer::new().find(text, &mut out);
        let mut v: Vec<&str> = out.iter().map(|e| e.text(text)).collect();
        v.sort();
        v.dedup();
        v
    }

    #[test]
    fn vendor_shapes_jwts_and_pem_blocks() {
        assert_eq!(
            spans("export GITHUB_TOKEN=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").len(),
            1
        );
        assert_eq!(
            spans("use sk-ant-api03-abcdefghijklmnop1234 here"),
            vec!["sk-ant-api03-abcdefghijklmnop1234"]
        );
        let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(spans(&format!("Bearer {jwt}")), vec![jwt]);
        let pem = "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\n-----END RSA PRIVATE KEY-----\ny";
        assert_eq!(spans(pem), vec![&pem[2..pem.len() - 2]]);
    }

    #[test]
    fn key_words_found_at_any_position_and_case() {
        let reference = |name: &[u8]| {
            [
                &b"key"[..],
                b"secret",
                b"token",
                b"pass",
                b"pwd",
                b"auth",
                b"credential",
                b"sig",
                b"login",
            ]
            .iter()
            .any(|w| name.windows(w.len()).any(|s| s.eq_ignore_ascii_case(w)))
        };
        for name in [
            "api_key",
            "API-KEY",
            "xToKeN",
            "db.Password",
            "PWD",
            "oauth2",
            "CREDENTIALS",
            "signature",
            "login_id",
            "ke",
            "sec",
            "tok",
            "note",
            "",
            "k",
            "monkey",
        ] {
            assert_eq!(
                has_key_word(name.as_bytes()),
                reference(name.as_bytes()),
                "{name}"
            );
        }
    }

    #[test]
    fn gated_rules_still_run_where_their_marker_is() {
        let hook = "post to https://hooks.slack.com/services/T000/B000/XXXXabcd1234 now";
        assert_eq!(
            spans(hook),
            vec!["https://hooks.slack.com/services/T000/B000/XXXXabcd1234"]
        );
        assert!(spans("HOOKS.SLACK.COM and eyj and private key").is_empty());
        assert_eq!(
            spans("auth: Basic dXNlcjpwYXNzd29yZA== ok"),
            vec!["dXNlcjpwYXNzd29yZA=="]
        );
        assert_eq!(
            spans("TOKEN 9f8e7d6c5b4a3210ff"),
            vec!["9f8e7d6c5b4a3210ff"]
        );
        assert_eq!(spans("curl -u admin:s3cr3t-Pass9 x"), vec!["s3cr3t-Pass9"]);
        assert!(spans("cargo test -p opc-privacy --release").is_empty());
    }

    #[test]
    fn assignments_report_the_value() {
        assert_eq!(
            spans(r#"api_key = "Zx81Kq0pLmN3vB7tR2yW""#),
            vec!["Zx81Kq0pLmN3vB7tR2yW"]
        );
        assert_eq!(spans("password=hunter2!"), vec!["hunter2!"]);
        assert_eq!(
            spans("curl -H 'Authorization: Bearer abc123def456ghi789'"),
            vec!["abc123def456ghi789"]
        );
        assert_eq!(
            spans("https://admin:s3cr3tpw@db.example.com/x"),
            vec!["s3cr3tpw"]
        );
    }

    #[test]
    fn references_and_prose_are_not_secrets() {
        for t in [
            "token: $GITHUB_TOKEN",
            "secret_length = X25519.secret_length",
            "password = ${DB_PASSWORD}",
            "the api key is stored in the vault",
            "SLACK_BOT_TOKEN",
            "api_key = \"xxxxxxxxxxxxxxxxxxxx\"",
            "token: access-token-name",
        ] {
            assert!(spans(t).is_empty(), "{t}: {:?}", spans(t));
        }
    }
}
