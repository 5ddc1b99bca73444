//! `API_KEY`: credentials, by four rules.
//! - vendor shapes: any token with a well-known prefix (the one list in [`super::secrets`]);
//! - JSON Web Tokens: `eyJ…` header, payload and signature;
//! - private key blocks: `-----BEGIN … PRIVATE KEY-----` to the matching END line (the whole block);
//! - assignments: `key = value`, `token: value`, `password=value`, `Authorization: Bearer value`,
//!   command-line flags (`curl -u user:pass`, `--token value`), URLs with `user:password@`, and Slack
//!   webhook URLs (the whole URL). The value is reported (not the name) when it looks like a secret: for
//!   password-like names any non-placeholder value of 6+ characters, otherwise 12+ characters with
//!   enough entropy and a mix of character classes, so `key = value_name` or `token: $ENV_VAR` is left.
//!
//! What is never a credential, whatever the name before it says ([`not_secret_shape`],
//! [`name_holds_secret`]): digests (`sha256:…`, `sha512-…`, a hex value named `checksum`, `hash`,
//! `fingerprint`, `commit`), UUIDs after a name that is not plainly a secret's (`idempotency_key`,
//! `key`), values made of words and numbers (`app.kubernetes.io/name`, `PROJ-1234`, `1.4.2`, a date),
//! paths, port mappings (`docker run -p 8080:80`, `mkdir -p src/ui`), resource names (`arn:…`), and
//! the values of keys and tokens that are handles rather than credentials (`cache_key`, `page_token`,
//! `next_token`, `X-Amz-Signature`). A vendor prefix followed by words (`ASIA-PACIFIC-2024`) is no key.

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
                | "n/a"
        )
        || [
            "redacted",
            "hidden",
            "masked",
            "omitted",
            "removed",
            "sanitized",
            "sanitised",
        ]
        .iter()
        .any(|w| lower.contains(w))
        || v.bytes().all(|b| b == v.as_bytes()[0])
}

/// The lower-case words of a name: split at `_`, `.`, `-`, other punctuation and digits, and at
/// camel-case humps (`tokenExpiresAt` → `token`, `expires`, `at`; `X-Amz-Signature` → `x`, `amz`,
/// `signature`).
fn name_words(name: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphabetic() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Last words of a name that say its value describes or points at a secret, or is a digest or a
/// time, rather than being one (`token_endpoint`, `key_fingerprint`, `tokenExpiresAt`, `sha256`).
const NOT_SECRET_LAST: &[&str] = &[
    "endpoint",
    "hash",
    "hashes",
    "fingerprint",
    "checksum",
    "digest",
    "sha",
    "md",
    "crc",
    "at",
    "expiry",
    "expires",
    "expiration",
    "ttl",
    "timeout",
    "prefix",
    "suffix",
    "provider",
    "issuer",
    "audience",
    "scope",
    "scopes",
    "algorithm",
    "alg",
    "store",
    "dir",
    "host",
    "hint",
    "label",
    "description",
    "policy",
    "rotation",
    "created",
    "updated",
    "status",
    "index",
    "region",
    "arn",
    "column",
    "schema",
    "pattern",
    "template",
    "limit",
    "source",
    "usage",
    "used",
];

/// Words that, qualifying a `key`, a `token` or a `signature`, make it a handle rather than a
/// credential: a cache or idempotency key, a pagination or CSRF token, a digest, a commit.
const HANDLE_WORDS: &[&str] = &[
    "cache",
    "idempotency",
    "partition",
    "primary",
    "foreign",
    "sort",
    "row",
    "object",
    "dedup",
    "dedupe",
    "deduplication",
    "lock",
    "routing",
    "hash",
    "hashed",
    "fingerprint",
    "checksum",
    "digest",
    "commit",
    "revision",
    "etag",
    "page",
    "next",
    "continuation",
    "cursor",
    "sync",
    "pagination",
    "csrf",
    "xsrf",
    "public",
    "pub",
    "trace",
    "correlation",
    "build",
    "shard",
    "bucket",
    "sig",
    "signature",
    "signatures",
    "signed",
    "hot",
    "idempotent",
];

/// Whether a name's words say plainly that it holds a secret (`client_secret`, `auth_token`,
/// `db_password`, `api_key`, `access_key`, `credentials`): not merely a `key` or a `login`.
fn plainly_secret(words: &[String]) -> bool {
    words.iter().enumerate().any(|(i, w)| {
        let next = words.get(i + 1).map(String::as_str);
        w.starts_with("secret")
            || w.starts_with("token")
            || password_word(w)
            || (w.starts_with("auth") && !w.starts_with("author"))
            || w.starts_with("credential")
            || w == "apikey"
            || (matches!(
                w.as_str(),
                "api" | "access" | "private" | "secret" | "signing"
            ) && next == Some("key"))
    })
}

/// Whether a name like `api_key` can hold a secret, rather than naming one (`credentialsId`,
/// `LLM_SECRET_NAME`, `token_url`, `publicToken`, `csrf-token`, `cache_key`, `page_token`,
/// `token_endpoint`, `X-Amz-Signature`).
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
    let words = name_words(name);
    if words
        .last()
        .is_some_and(|w| NOT_SECRET_LAST.contains(&w.as_str()))
    {
        return false;
    }
    // A handle's qualifier wins over `key`, `token` and `signature`, not over a plain secret word
    // (`client_secret`, `db_password`): `page_token`, `cache_key`, `webhook_signature` are handles.
    let secret_word = |w: &String| {
        w.starts_with("secret")
            || password_word(w)
            || w.starts_with("credential")
            || (w.starts_with("auth") && !w.starts_with("author"))
    };
    if words.iter().any(|w| HANDLE_WORDS.contains(&w.as_str())) && !words.iter().any(secret_word) {
        return false;
    }
    // Word by word: `passenger`, `passport`, `consignee`, `designation` hold `pass` and `sig` but
    // name no secret. Matched through `key` alone: only a name that ends in it (`api_key`,
    // `HEROKU_KEY`, `hubspotKey`), not `keyword`, `pubkey_st`, `master-keying` or `turkey`.
    let strong = words.iter().any(|w| {
        w.contains("secret")
            || w.starts_with("token")
            || w.ends_with("token")
            || password_word(w)
            || (w.contains("auth") && !w.contains("author"))
            || w.contains("credential")
            || w.starts_with("signature")
            || w == "sig"
            || w == "login"
    });
    let key = n.ends_with("key")
        && !words.last().is_some_and(|w| {
            matches!(
                w.as_str(),
                "turkey"
                    | "monkey"
                    | "jockey"
                    | "hockey"
                    | "donkey"
                    | "whiskey"
                    | "hotkey"
                    | "turnkey"
            )
        });
    strong || key
}

/// Whether a word of a name makes it a password's (`password`, `db_pass` → `pass`, `dbpass`,
/// `passphrase`, `PWD`), not a word that merely holds `pass` (`passenger`, `passport`, `bypass`).
fn password_word(w: &str) -> bool {
    matches!(
        w,
        "pw" | "pwd" | "passw" | "passwd" | "passcode" | "passkey" | "passwords"
    ) || w.ends_with("password")
        || w.ends_with("passwd")
        || w.ends_with("passphrase")
        || (w.ends_with("pass")
            && !matches!(
                w,
                "bypass" | "compass" | "overpass" | "underpass" | "trespass" | "surpass"
            ))
}

/// Words before a name that make it something other than a secret's: `Boarding Pass:`, `Room
/// Key:`, `Answer key:`, `Gate pass:` (a form's label of two words, of which the run before the
/// operator is only the last).
const LABEL_QUALIFIERS: &[&str] = &[
    "boarding",
    "room",
    "answer",
    "gate",
    "bus",
    "season",
    "guest",
    "visitor",
    "ski",
    "hall",
    "door",
    "locker",
    "car",
    "house",
    "map",
    "music",
    "piano",
    "hotel",
    "day",
    "press",
    "sort",
    "primary",
    "foreign",
    "public",
    "cache",
    "partition",
    "row",
];

/// A UUID (`550e8400-e29b-41d4-a716-446655440000`, any case, braces allowed).
fn uuid(v: &str) -> bool {
    let v = v.trim_start_matches('{').trim_end_matches('}');
    let parts: Vec<&str> = v.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Words and numbers joined by punctuation, each part all letters in one case shape (`lower`,
/// `UPPER`, `Title`) or all digits: `app.kubernetes.io/name`, `PROJ-1234`, `1.4.2`, `8080:80`,
/// `src/components/ui`, `ORD-2024-00123`. A random credential mixes letters and digits, or cases,
/// inside its parts.
fn wordy(v: &str) -> bool {
    let mut any = false;
    let all = v
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .all(|p| {
            any = true;
            let b = p.as_bytes();
            // A part of up to three characters (`Q3`, `v2`, `x86`) is a word too.
            b.len() <= 3
                || b.iter().all(u8::is_ascii_digit)
                || b.iter().all(u8::is_ascii_lowercase)
                || b.iter().all(u8::is_ascii_uppercase)
                || (b[0].is_ascii_uppercase() && b[1..].iter().all(u8::is_ascii_lowercase))
        });
    any && all && v.is_ascii()
}

/// A digest named by its algorithm (`sha256:9f86…`, `sha512-z4Ph…`, `md5=…`), a date or time
/// (`2024-11-05T10:00:00Z`), a resource name (`arn:aws:kms:…`) or a path (`/var/run/secrets/x`,
/// `./certs/key.pem`, `~/.ssh/id_ed25519`).
fn descriptor(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    let algo = [
        "sha1", "sha224", "sha256", "sha384", "sha512", "md5", "blake2b", "blake3", "crc32",
    ]
    .iter()
    .any(|a| {
        lower
            .strip_prefix(a)
            .is_some_and(|r| r.starts_with([':', '=', '-']))
    });
    let date = v.len() >= 8
        && v.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && v.bytes()
            .all(|b| b.is_ascii_digit() || b"-:./+TZ ".contains(&b));
    let path =
        (v.starts_with('/') || v.starts_with("./") || v.starts_with("../") || v.starts_with("~/"))
            && !v.contains(['+', '='])
            && v.split('/').all(|p| p.len() <= 32);
    algo || date || path || lower.starts_with("arn:")
}

/// An AWS access key id is exactly `AKIA` or `ASIA` and 16 capitals and digits; a longer token with
/// that start (`ASIA-PACIFIC-2026-Q3`, `AKIA_ROTATION_2024`) is something else. Other tokens pass.
fn aws_shaped(token: &str) -> bool {
    if !(token.starts_with("AKIA") || token.starts_with("ASIA")) {
        return true;
    }
    let t = token.trim_end_matches('=');
    t.len() == 20
        && t.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// Whether a value has a shape no credential has, assigned to `name`: see the module's notes. A
/// password may be made of words (`correct-horse-battery`), so for password names only digests,
/// dates, paths and resource names are left.
pub fn not_secret_shape(name: &str, v: &str) -> bool {
    if descriptor(v) {
        return true;
    }
    let words = name_words(name);
    let password = words.iter().any(|w| password_word(w));
    if password {
        return false;
    }
    // A UUID is a vendor's key after a name that says whose (`HEROKU_KEY`, `hubspotKey`,
    // `SNYK_TOKEN`), an id after a bare `key` or `sig` (handles like `idempotency_key` are
    // left by their name).
    wordy(v) || (uuid(v) && words.len() <= 1 && !plainly_secret(&words))
}

/// Whether `v`, assigned to a name like `name`, looks like a secret rather than a reference or prose.
pub fn secret_value(name: &str, v: &str) -> bool {
    let v = v.trim_end_matches(['.', ')', ']', '}', '>']);
    if placeholder(v) || v.len() < 6 || not_secret_shape(name, v) {
        return false;
    }
    let words = name_words(name);
    let password = words.iter().any(|w| password_word(w));
    // A login is a user's name (`login: maria.lopez1987`), a secret only when it looks random.
    if !password
        && words.iter().any(|w| w == "login")
        && !plainly_secret(&words)
        && v.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
    {
        return false;
    }
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
    if password {
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
                // A vendor prefix followed by words and numbers is a slug (`ASIA-PACIFIC-2024`,
                // `sk-2024-release-notes`), not a key.
                // Only short prefixes collide with words (`sk-`, `hf_`, `SG.`, `pul-`); a test
                // token after `gloas-` spelt as words is still meant as one.
                let slug = secrets::vendor_prefix(m)
                    .is_some_and(|p| p.len() <= 4 && wordy(&m[p.len()..]))
                    || !aws_shaped(m);
                if !slug && secrets::credential_kind(m).is_some() {
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
                // `Boarding Pass: …`, `Room Key: …`: the word before the name qualifies it.
                let before = text[..ns].strip_suffix(' ').unwrap_or("");
                let qualifier = before
                    .rsplit(|c: char| !c.is_ascii_alphabetic())
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                // A query parameter (`/reset?token=…`, `&sig=…`): a URL's or a request line's, which
                // the URL recogniser masks whole; a one-time value, not a credential to rotate.
                let query = text[..ns].ends_with(['?', '&']);
                if query || LABEL_QUALIFIERS.contains(&qualifier.as_str()) {
                    continue;
                }
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
                if let (Some((fs, _)), Some((vs, ve))) = (g[0], g[1]) {
                    let v = &text[vs..ve];
                    // `-p` and `-u` are a password and a user only to some commands: to `mkdir`,
                    // `docker run`, `ssh` and `git push` they take a path, a port mapping, a port
                    // or a remote, all made of words and numbers.
                    let short = !text[fs..vs].contains("--");
                    let not_a_value = v.starts_with('-')
                        || v.starts_with('[')
                        || v.contains("://")
                        || (short && wordy(v));
                    if !not_a_value && secret_value("password", v) {
                        push(vs, ve, 0.9);
                    }
                }
            }
        }
        // `Bearer`, `Basic`, `token`: at the starts found above.
        for g in super::captures_at_starts(&self.bearer, text, auth_starts) {
            if let Some((vs, ve)) = g[1] {
                let v = &text[vs..ve];
                // `token 2024-11-05T10`, `token PROJ-1234`, `token 550e8400-…`: a date, a code, an id.
                if !placeholder(v)
                    && v.bytes().any(|b| b.is_ascii_digit() || b == b'=')
                    && !not_secret_shape("token", v)
                {
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

    #[test]
    fn digests_ids_handles_and_commands_are_not_secrets() {
        for t in [
            "checksum: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "cache_key: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
            "idempotency_key: 550e8400-e29b-41d4-a716-446655440000",
            r#"{"key": "PROJ-1234", "self": "x"}"#,
            r#"{"next_page_token": "eyJvZmZzZXQiOjEwMCwibGltaXQiOjUwfQ"}"#,
            "key: app.kubernetes.io/managed-by",
            "X-Amz-Signature=7c1b8e5a4f0d2e9b3a6c8d1f2e4a7b9c0d3e5f6a8b1c2d4e6f7a9b0c1d2e3f4a5",
            "token_endpoint: /oauth2/v1/token",
            "tokenExpiresAt: 2026-11-29T14:00:00Z",
            "kms_key: arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "docker run -p 8080:80 nginx",
            "mkdir -p src/components/ui",
            "password: [REDACTED]",
            "the reset token 2026-11-29T14 expired",
            "region ASIA-PACIFIC-2026-Q3 and sk-2026-11-release-notes-final",
            "integrity sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
        ] {
            assert!(spans(t).is_empty(), "{t}: {:?}", spans(t));
        }
    }

    #[test]
    fn words_that_hold_pass_sig_or_login_name_no_secret() {
        for t in [
            "Passenger: NOWAK/TOMASZ MR",
            "passport_number: X12345678",
            "Consignee: KOWALSKA/ANNA",
            "Boarding Pass: BP-9Q77-ZX81",
            "login: maria.lopez1987",
            "GET /account/reset?token=9f86d081884c7d659a2feaa0c55ad015 HTTP/2",
        ] {
            assert!(spans(t).is_empty(), "{t}: {:?}", spans(t));
        }
        assert_eq!(spans("db_pass: Hx7qP2vLm9"), vec!["Hx7qP2vLm9"]);
        assert_eq!(spans("PASSWORD=s3cr3t!x"), vec!["s3cr3t!x"]);
    }

    #[test]
    fn real_keys_next_to_handles_are_still_found() {
        assert_eq!(
            spans("client_secret: Zx81Kq0pLmN3vB7tR2yW"),
            vec!["Zx81Kq0pLmN3vB7tR2yW"]
        );
        assert_eq!(
            spans("HEROKU_API_KEY=550e8400-e29b-41d4-a716-446655440000"),
            vec!["550e8400-e29b-41d4-a716-446655440000"]
        );
        assert_eq!(
            spans("GITHUB_TOKEN=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"),
            vec!["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"]
        );
        assert_eq!(spans("mysql -u root -p Hx7qP2vLm9 db"), vec!["Hx7qP2vLm9"]);
        assert_eq!(
            spans("db_password: Correct-Horse-Battery"),
            vec!["Correct-Horse-Battery"]
        );
        assert_eq!(
            spans("aws key AKIAZ3MQ7XK2V9PLT4RB in the log"),
            vec!["AKIAZ3MQ7XK2V9PLT4RB"]
        );
    }

    #[test]
    fn name_words_split_at_humps_and_punctuation() {
        assert_eq!(name_words("tokenExpiresAt"), vec!["token", "expires", "at"]);
        assert_eq!(name_words("X-Amz-Signature"), vec!["x", "amz", "signature"]);
        assert_eq!(name_words("md5_hash"), vec!["md", "hash"]);
        assert_eq!(name_words("API_KEY"), vec!["api", "key"]);
    }
}
