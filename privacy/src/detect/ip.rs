//! `IP_ADDRESS`: IPv4 and IPv6 (with an optional zone and prefix length), parsed by std. A bare `::`
//! is left alone: it is as often C++ or Rust path syntax as an address.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Pattern, Recognizer, Trigger};
use crate::{Entity, EntityType};

/// Finds IP addresses.
pub struct IpRecognizer {
    v4: Pattern,
    v6: Pattern,
}

/// Bytes of an IPv4 match (with its prefix length).
const V4: [bool; 256] = super::digits_and(b"./");
/// Bytes of an IPv6 match (with a zone, an embedded IPv4 and a prefix length).
const V6: [bool; 256] = {
    let mut t = super::digits_and(b":.%/");
    let mut c = b'a';
    while c <= b'z' {
        t[c as usize] = true;
        t[(c - 32) as usize] = true;
        c += 1;
    }
    t
};

impl IpRecognizer {
    /// Compiles the patterns.
    pub fn new() -> Self {
        let v4 = super::pattern(r"(?-u)\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?:/\d{1,3})?");
        let v6 = super::pattern(
            r"(?i-u)(?:[0-9a-f]{0,4}:){2,7}(?:\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|[0-9a-f]{1,4})?(?:%[a-z0-9]+)?(?:/\d{1,4})?",
        );
        IpRecognizer { v4, v6 }
    }
}

impl Default for IpRecognizer {
    fn default() -> Self {
        Self::new()
    }
}

/// Split `addr/len` and keep the prefix only when it is a valid length for the family.
fn split_prefix(s: &str, max: u32) -> (&str, usize) {
    match s.split_once('/') {
        Some((addr, len)) if len.parse::<u32>().is_ok_and(|l| l <= max) => (addr, s.len()),
        Some((addr, _)) => (addr, addr.len()),
        None => (s, s.len()),
    }
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Recognizer for IpRecognizer {
    fn name(&self) -> &'static str {
        "ip"
    }

    fn types(&self) -> &'static [EntityType] {
        &[EntityType::IpAddress]
    }

    fn trigger(&self) -> Trigger {
        Trigger::DOT.or(Trigger::COLON)
    }

    fn find(&self, text: &str, out: &mut Vec<Entity>) {
        let push = |out: &mut Vec<Entity>, start: usize, end: usize| {
            out.push(Entity {
                kind: EntityType::IpAddress,
                start,
                end,
                score: 0.9,
            });
        };
        let bytes = text.as_bytes();
        let mut v6_spans: Vec<(usize, usize)> = Vec::new();
        // Every valid address but `::` holds a `:` between hex digits or colons; search only the runs
        // of address bytes around such colons.
        let hexish = |b: u8| b.is_ascii_hexdigit() || b == b':';
        let colons = memchr::memchr_iter(b':', bytes).filter(|&i| {
            i > 0 && i + 1 < bytes.len() && hexish(bytes[i - 1]) && hexish(bytes[i + 1])
        });
        let runs = super::runs_around(bytes, colons, &V6);
        {
            for (start, end) in super::find_in_spans(&self.v6, text, runs) {
                let s = &text[start..end];
                if super::before_is(text, start, |b| word(b) || b == b':' || b == b'.')
                    || super::after_is(text, end, |b| word(b) || b == b':')
                    || (super::after_is(text, end, |b| b == b'.')
                        && super::after_is(text, end + 1, |b| b.is_ascii_digit()))
                {
                    continue;
                }
                let (addr, len) = split_prefix(s, 128);
                let bare = addr.split('%').next().unwrap_or("");
                if bare == "::" || bare.parse::<Ipv6Addr>().is_err() {
                    continue;
                }
                v6_spans.push((start, start + len));
                push(out, start, start + len);
            }
        }
        // An IPv4 address holds a `.` between digits; search only the runs of digits, dots and
        // slashes around those.
        let dots = memchr::memchr_iter(b'.', bytes).filter(|&i| {
            i > 0
                && i + 1 < bytes.len()
                && bytes[i - 1].is_ascii_digit()
                && bytes[i + 1].is_ascii_digit()
        });
        // A match has three dots, so a run with fewer holds none.
        let runs = super::runs_around(bytes, dots, &V4)
            .into_iter()
            .filter(|&(s, e)| bytes[s..e].iter().filter(|&&b| b == b'.').count() >= 3);
        for (start, end) in super::find_in_spans(&self.v4, text, runs) {
            let s = &text[start..end];
            if v6_spans.iter().any(|&(s6, e6)| s6 <= start && start < e6)
                || super::before_is(text, start, |b| word(b) || b == b'.')
                || super::after_is(text, end, word)
            {
                continue;
            }
            let (addr, len) = split_prefix(s, 32);
            if addr.parse::<Ipv4Addr>().is_err() {
                continue;
            }
            push(out, start, start + len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        IpRecognizer::new().find(text, &mut out);
        let mut v: Vec<_> = out.iter().map(|e| e.text(text)).collect();
        v.sort();
        v
    }

    #[test]
    fn finds_v4_v6_zones_and_prefixes() {
        assert_eq!(
            spans("IPv4: 192.168.1.1, IPv6: 2001:db8::1"),
            vec!["192.168.1.1", "2001:db8::1"]
        );
        assert_eq!(spans("fe80::1%eth0"), vec!["fe80::1%eth0"]);
        assert_eq!(spans("[::ffff:192.168.1.1]:80"), vec!["::ffff:192.168.1.1"]);
        assert_eq!(spans("Route is 10.0.0.0/8."), vec!["10.0.0.0/8"]);
        assert_eq!(spans("10.0.0.0/123"), vec!["10.0.0.0"]);
        assert_eq!(spans("2001:db8::/9999"), vec!["2001:db8::"]);
        assert_eq!(spans("text::ffff:192.0.2.1"), vec!["192.0.2.1"]);
        assert_eq!(spans("192.168.1.1.1"), vec!["192.168.1.1"]);
        assert_eq!(spans("::1/128"), vec!["::1/128"]);
    }

    #[test]
    fn rejects_non_addresses() {
        for t in [
            "192.168.0",
            "256.256.256.256",
            "192.168.1.256",
            "IP192.168.1.1text",
            "text192.168.1.1",
            "aa:bb:cc:dd:ee:ff",
            "Time 12:34:56",
            "std::cout",
            "MyClass::toString",
            ":::",
            "fe80::1text",
            "text2001:db8::1",
            "gggg:hhhh::1234",
            "12345:db8::1",
            "2001::db8::1",
            "::ffff:192.168.1",
            "2001:db8::256.1.1.1",
            "Version 1.2.3",
            "Port 80:443",
        ] {
            assert!(spans(t).is_empty(), "{t}: {:?}", spans(t));
        }
    }
}
