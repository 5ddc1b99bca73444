//! `URL`: `scheme://host…` and `www.host…` (host checked: a dotted name with a letter TLD, or an IP),
//! plus bare domains with a well-known TLD (`example.com`), which are weak without a context word.

use super::{Pattern, Recognizer, Trigger, context};
use crate::{Entity, EntityType};

/// Finds URLs.
pub struct UrlRecognizer {
    full: Pattern,
    bare: Pattern,
    tlds: aho_corasick::AhoCorasick,
}

/// Bytes of a token: all but ASCII whitespace. Neither pattern matches whitespace, so every match
/// lies inside one token, and the searches look only at tokens holding a `://`, a `www.` or a `.tld`.
const TOKEN: [bool; 256] = {
    let mut t = [true; 256];
    let mut i = 0;
    let space = b" \t\n\x0B\x0C\r";
    while i < space.len() {
        t[space[i] as usize] = false;
        i += 1;
    }
    t
};

/// Top-level domains accepted for a bare `name.tld` (no scheme, no `www.`). Country codes that are also
/// common file extensions (`.py`, `.rs`, `.md`, `.sh`, `.pl`, `.so`) are left out on purpose.
const BARE_TLDS: &str = "com|org|net|edu|gov|mil|int|info|biz|io|ai|app|dev|co|me|tv|us|uk|ca|de|fr|it|es|nl|be|ch|at|se|no|dk|fi|ie|il|in|jp|cn|au|nz|br|mx|ru|eu|site|online|tech|cloud|store|shop|xyz|ly|gg";

const WORDS: &[&str] = &[
    "url", "link", "website", "web site", "site", "domain", "visit", "homepage", "page", "http",
];

impl UrlRecognizer {
    /// Compiles the patterns.
    pub fn new() -> Self {
        let full = super::pattern(
            r#"(?i-u)\b(?:(?:https?|ftps?|wss?|sftp)://|www\.)(?u:[^\s<>"'`{}|\\^])+"#,
        );
        let bare = super::pattern(&format!(
            r"(?i-u)\b[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.(?:{BARE_TLDS})\b(?:/(?u:[^\s<>\x22'`])*)?"
        ));
        // The bare-domain pattern runs only when some `.tld` occurs (case-insensitive), found in one
        // Aho-Corasick pass.
        let tlds = aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(BARE_TLDS.split('|').map(|t| format!(".{t}")))
            .expect("tld automaton builds");
        UrlRecognizer { full, bare, tlds }
    }
}

impl Default for UrlRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// Trailing punctuation that ends a sentence rather than a URL.
fn trim_end(url: &str) -> &str {
    let mut s = url;
    loop {
        let t = s.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '"']);
        let t = if t.ends_with(')') && t.matches('(').count() < t.matches(')').count()
            || t.ends_with(']') && t.matches('[').count() < t.matches(']').count()
        {
            &t[..t.len() - 1]
        } else {
            t
        };
        if t.len() == s.len() {
            return s;
        }
        s = t;
    }
}

/// Whether the host of a URL (after the scheme or `www.`) is a real host name or an IP literal.
fn host_ok(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    if host_port.starts_with('[') {
        return host_port
            .find(']')
            .is_some_and(|i| host_port[1..i].parse::<std::net::Ipv6Addr>().is_ok());
    }
    let host = host_port.split(':').next().unwrap_or("");
    if host.parse::<std::net::Ipv4Addr>().is_ok() || host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let mut labels = host.split('.');
    let Some(tld) = host.rsplit('.').next() else {
        return false;
    };
    host.contains('.')
        && labels
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        && (tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic())
            || tld.starts_with("xn--"))
}

impl Recognizer for UrlRecognizer {
    fn name(&self) -> &'static str {
        "url"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::Url]
    }

    fn trigger(&self) -> Trigger {
        Trigger::DOT
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        let bytes = text.as_bytes();
        let mut covered: Vec<(usize, usize)> = Vec::new();
        // Full URLs: the tokens holding a `://` or a `www.` (any case). As before the search was
        // windowed, the pattern runs only when the text holds `://`, `www.` or `WWW.`.
        let mut full = false;
        let marks = memchr::memchr2_iter(b':', b'.', bytes).filter(|&p| {
            if bytes[p] == b':' {
                let scheme = bytes.get(p + 1..p + 3) == Some(&b"//"[..]);
                full |= scheme;
                scheme
            } else {
                let www = p >= 3 && bytes[p - 3..p].eq_ignore_ascii_case(b"www");
                full |= www && matches!(&bytes[p - 3..p], b"www" | b"WWW");
                www
            }
        });
        let spans = super::runs_around(bytes, marks, &TOKEN);
        let found = if full {
            super::find_in_spans(&self.full, text, spans)
        } else {
            Vec::new()
        };
        for (ms, me) in found {
            let s = trim_end(&text[ms..me]);
            let rest = match s.find("://") {
                Some(i) => &s[i + 3..],
                None => &s[4..], // `www.`: the rest must be a dotted name of its own
            };
            if !host_ok(rest) {
                continue;
            }
            let end = ms + s.len();
            covered.push((ms, end));
            out.push(Entity {
                kind: EntityType::Url,
                start: ms,
                end,
                score: 0.95,
            });
        }
        // Bare domains: the tokens holding a `.tld` that ends a word (the one a match ends its name
        // with: the longest listed `.tld` at that dot, since the byte after the match's is no letter).
        let tlds = self
            .tlds
            .find_iter(text)
            .filter(|m| !super::after_is(text, m.end(), |b| b.is_ascii_alphanumeric()))
            .map(|m| m.start());
        let spans = super::runs_around(bytes, tlds, &TOKEN);
        let bare = !spans.is_empty();
        let found = if bare {
            super::find_in_spans(&self.bare, text, spans)
        } else {
            Vec::new()
        };
        for (ms, me) in found {
            let (start, end) = (ms, ms + trim_end(&text[ms..me]).len());
            if covered.iter().any(|&(s, e)| start < e && s < end)
                || super::before_is(text, start, |b| {
                    matches!(b, b'@' | b'.' | b'/' | b'-') || b >= 0x80
                })
                || super::after_is(text, end, |b| b == b'@' || b >= 0x80)
            {
                continue;
            }
            out.push(Entity {
                kind: EntityType::Url,
                start,
                end,
                score: context::score(text, start, end, 0.6, WORDS),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<(&str, f32)> {
        let mut out = Vec::new();
        UrlRecognizer::new().find(text, &mut out);
        out.iter().map(|e| (e.text(text), e.score)).collect()
    }

    proptest::proptest! {
        /// The token-limited searches find exactly what a search over the whole text finds.
        #[test]
        fn token_searches_match_whole_text_searches(
            parts in proptest::collection::vec(
                "(https?://|www\\.|WWW\\.|Www\\.|ws://|\\.com|\\.co|\\.io|\\.info|a|b9|-|/|\\.| |\n|\"|é|_)",
                0..24,
            ),
        ) {
            let text: String = parts.concat();
            let r = UrlRecognizer::new();
            let b = text.as_bytes();
            let marks = (0..b.len()).filter(|&p| {
                (b[p] == b':' && b.get(p + 1..p + 3) == Some(&b"//"[..]))
                    || (b[p] == b'.' && p >= 3 && b[p - 3..p].eq_ignore_ascii_case(b"www"))
            });
            let spans = super::super::runs_around(b, marks, &TOKEN);
            let whole = |re: &Pattern| super::super::find_in_spans(re, &text, [(0, text.len())]);
            proptest::prop_assert_eq!(
                super::super::find_in_spans(&r.full, &text, spans),
                whole(&r.full)
            );
            let tlds = r
                .tlds
                .find_iter(&text)
                .filter(|m| !super::super::after_is(&text, m.end(), |c| c.is_ascii_alphanumeric()))
                .map(|m| m.start());
            let spans = super::super::runs_around(b, tlds, &TOKEN);
            proptest::prop_assert_eq!(
                super::super::find_in_spans(&r.bare, &text, spans),
                whole(&r.bare)
            );
        }
    }

    #[test]
    fn full_urls_are_strong_and_trimmed() {
        assert_eq!(
            spans(
                "see https://webhook.site/a8ee?q=1&b=2. Or (http://www.microsoft.com/store/abc/)"
            ),
            vec![
                ("https://webhook.site/a8ee?q=1&b=2", 0.95),
                ("http://www.microsoft.com/store/abc/", 0.95)
            ]
        );
        assert_eq!(spans("'https://presidio.dataprivacystack.org/'").len(), 1);
        assert_eq!(spans("go to www.example.org now")[0].0, "www.example.org");
        assert_eq!(
            spans("http://[2001:db8::1]/path")[0].0,
            "http://[2001:db8::1]/path"
        );
    }

    #[test]
    fn hosts_without_tld_are_rejected() {
        assert!(spans("www.microsoft").is_empty());
        assert!(spans("http://microsoft").is_empty());
        assert!(spans("'www.microsoft'").is_empty());
    }

    #[test]
    fn bare_domains_need_context() {
        assert_eq!(spans("microsoft.com"), vec![("microsoft.com", 0.6)]);
        let found = spans("my domains: microsoft.com google.co.il");
        assert_eq!(found.len(), 2);
        assert!(found.iter().all(|f| f.1 >= 0.85));
        assert!(spans("edit main.rs and setup.py, e.g. this").is_empty());
        assert!(spans("write to a@example.com").is_empty());
    }
}
