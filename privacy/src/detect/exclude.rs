//! OPC's own identifiers, which are never personal data: a span that lies inside one, whichever tier
//! found it, is dropped, and a span that overlaps one is cut back to what lies outside it.
//!
//! They reach the detector because agents see them: recall memory records a message's author as
//! `platform:user id` and shows it in recalled lines (`[2024-03-15, web:82bcfadd9458164b] …`), gateway
//! replies name tasks and approvals, and Slack and Discord keep mentions in message text. Masking them
//! breaks nothing visible but wastes vault entries and, worse, teaches the model fake names: the NER
//! model reads `web:82bcfadd9458164b` as a `PERSON_NAME`.
//!
//! The forms, and where each is made (keep this list in step with them):
//!
//! | form | example | made by |
//! |---|---|---|
//! | web conversation, as author or user | `web:82bcfadd9458164b` | `adapters/src/web/api.rs` (`create_conversation`: 16 hex digits), `bot/src/gateway/messages.rs` (`Waiting::author`: `platform:user id`) |
//! | Slack user, channel, team, bot ids, `:`-joined | `slack:U024BE7LH`, `slack:T0001:C024BE7LR` | `bot/src/gateway/messages.rs` (author, rate-limit keys), `gateway.approvers` in the config |
//! | Discord snowflakes (15 to 20 digits), `:`-joined | `discord:81384788765712384` | the same, for Discord |
//! | mentions in message text (the id part only: a `\|name` after it is a display name) | `<@U024BE7LH>`, `<@!81384788765712384>`, `<#C024BE7LR\|general>`, `<@&165511591545143296>` | Slack and Discord, passed through by `adapters/src/slack/events.rs` and `adapters/src/discord/events.rs` |
//! | engine conversation ids | `c-1f3a9b7c2d4e5f60` | `agents/src/engine.rs` (`new_conversation_id`: `c-` and 16 hex digits) |
//! | task and approval numbers | `task #42`, `approval #7` (the `#42`) | `bot/src/gateway/` (`/status`, `/cancel`, approval notices), `agents/src/store` (row ids) |
//! | LLM tool-call ids, as the ledger and transcripts keep them | `toolu_01A09q90qw90lq917835lq9`, `call_Ab12Cd34Ef56Gh78`, with `_t3_1` when renamed | the providers; `agents/src/session.rs` renames duplicates `{id}_t{turn}_{n}` |
//!
//! [`drop_non_personal`] also drops a `PERSON_NAME` without a letter (the model's reading of an order
//! number).
//!
//! Cost: nothing when no span was found; otherwise a scan of a few hundred bytes around each span for
//! the anchor bytes (`:`, `<`, `-`, `#`, `_`).

use crate::{Entity, EntityType};

/// How far around a span an identifier overlapping it can begin or end (longer than any form).
const MARGIN: usize = 128;

/// [`drop_own_ids`], and drop `PERSON_NAME` spans without a letter: the model reads order and account
/// numbers (`Order #54143864`) as names, and no name is written in digits alone.
pub fn drop_non_personal(text: &str, found: &mut Vec<Entity>) {
    found.retain(|e| {
        e.kind != EntityType::PersonName || text[e.start..e.end].chars().any(char::is_alphabetic)
    });
    drop_own_ids(text, found);
}

/// Drop the spans in `found` that lie inside one of OPC's own identifiers in `text`; cut a span that
/// overlaps one back to its longest part outside them (dropped if that part has fewer than two
/// letters or digits).
pub fn drop_own_ids(text: &str, found: &mut Vec<Entity>) {
    if found.is_empty() {
        return;
    }
    let bytes = text.as_bytes();
    found.retain_mut(|e| {
        let from = e.start.saturating_sub(MARGIN);
        let to = (e.end + MARGIN).min(bytes.len());
        let ids: Vec<(usize, usize)> = own_ids(bytes, from, to)
            .into_iter()
            .filter(|&(s, t)| s < e.end && e.start < t)
            .collect();
        if ids.is_empty() {
            return true;
        }
        match longest_outside(bytes, e.start, e.end, &ids) {
            Some((s, t)) => {
                e.start = s;
                e.end = t;
                true
            }
            None => false,
        }
    });
}

/// The longest part of `start..end` outside every span of `ids` (sorted), trimmed of ASCII
/// punctuation and spaces, if it holds two letters or digits.
fn longest_outside(
    bytes: &[u8],
    start: usize,
    end: usize,
    ids: &[(usize, usize)],
) -> Option<(usize, usize)> {
    let mut pieces = Vec::new();
    let mut at = start;
    for &(s, t) in ids {
        if s > at {
            pieces.push((at, s.min(end)));
        }
        at = at.max(t);
    }
    if at < end {
        pieces.push((at, end));
    }
    pieces
        .into_iter()
        .map(|(mut s, mut t)| {
            let edge = |b: u8| b.is_ascii_punctuation() || b.is_ascii_whitespace();
            while s < t && edge(bytes[s]) {
                s += 1;
            }
            while t > s && edge(bytes[t - 1]) {
                t -= 1;
            }
            (s, t)
        })
        .filter(|&(s, t)| {
            bytes[s..t]
                .iter()
                .filter(|b| b.is_ascii_alphanumeric() || **b >= 0xC0)
                .count()
                >= 2
        })
        .max_by_key(|&(s, t)| (t - s, std::cmp::Reverse(s)))
}

/// Every identifier (see the module docs) that has an anchor byte in `bytes[from..to]`, as byte spans.
pub fn own_ids(bytes: &[u8], from: usize, to: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let window = &bytes[from..to];
    for p in memchr::memchr3_iter(b':', b'<', b'#', window).map(|p| from + p) {
        let found = match bytes[p] {
            b':' => platform_id(bytes, p),
            b'<' => mention(bytes, p),
            _ => numbered(bytes, p),
        };
        out.extend(found);
    }
    for p in memchr::memchr2_iter(b'-', b'_', window).map(|p| from + p) {
        out.extend(if bytes[p] == b'-' {
            conversation(bytes, p)
        } else {
            tool_call(bytes, p)
        });
    }
    out.sort_unstable();
    out
}

/// Whether `word` (lowercase ASCII) ends at `end`, as a whole word.
fn word_before(bytes: &[u8], end: usize, word: &[u8]) -> Option<usize> {
    let start = end.checked_sub(word.len())?;
    (bytes[start..end].eq_ignore_ascii_case(word)
        && !(start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_')))
        .then_some(start)
}

/// The length of the run of bytes of `class` at `at`, at most `max`.
fn run(bytes: &[u8], at: usize, max: usize, class: impl Fn(u8) -> bool) -> usize {
    bytes[at.min(bytes.len())..]
        .iter()
        .take(max + 1)
        .take_while(|b| class(**b))
        .count()
}

/// Whether the byte at `at` (if any) would continue an identifier.
fn continues(bytes: &[u8], at: usize) -> bool {
    bytes
        .get(at)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// A Slack id at `at`: an uppercase letter, then 6 to 14 uppercase letters and digits, one a digit.
fn slack_id(bytes: &[u8], at: usize) -> Option<usize> {
    if !bytes.get(at)?.is_ascii_uppercase() {
        return None;
    }
    let n = run(bytes, at + 1, 14, |b| {
        b.is_ascii_uppercase() || b.is_ascii_digit()
    });
    ((6..=14).contains(&n) && bytes[at + 1..at + 1 + n].iter().any(u8::is_ascii_digit))
        .then_some(at + 1 + n)
}

/// A Discord snowflake at `at`: 15 to 20 digits.
fn snowflake(bytes: &[u8], at: usize) -> Option<usize> {
    let n = run(bytes, at, 20, |b| b.is_ascii_digit());
    (15..=20).contains(&n).then_some(at + n)
}

/// `web:…`, `slack:…`, `discord:…` with the `:` at `colon`.
fn platform_id(bytes: &[u8], colon: usize) -> Option<(usize, usize)> {
    if let Some(start) = word_before(bytes, colon, b"web") {
        let n = run(bytes, colon + 1, 16, is_hex);
        return (n == 16 && !continues(bytes, colon + 17)).then_some((start, colon + 17));
    }
    type IdAt = fn(&[u8], usize) -> Option<usize>;
    let (start, id): (usize, IdAt) = if let Some(s) = word_before(bytes, colon, b"slack") {
        (s, slack_id)
    } else {
        (word_before(bytes, colon, b"discord")?, snowflake)
    };
    // One id, or up to four joined by `:` (workspace, channel, user).
    let mut end = id(bytes, colon + 1)?;
    for _ in 0..3 {
        match bytes.get(end) {
            Some(b':') => match id(bytes, end + 1) {
                Some(e) => end = e,
                None => break,
            },
            _ => break,
        }
    }
    (!continues(bytes, end)).then_some((start, end))
}

/// `<@U024BE7LH>`, `<@!8138…>`, `<@&1655…>`, `<#C024BE7LR|general>` with the `<` at `open`: the
/// span ends after the id, or after its `>` when one follows.
fn mention(bytes: &[u8], open: usize) -> Option<(usize, usize)> {
    let mut at = open + 1;
    if !matches!(bytes.get(at), Some(b'@' | b'#')) {
        return None;
    }
    at += 1;
    if matches!(bytes.get(at), Some(b'!' | b'&')) {
        at += 1;
    }
    let end = slack_id(bytes, at).or_else(|| snowflake(bytes, at))?;
    match bytes.get(end) {
        Some(b'>') => Some((open, end + 1)),
        Some(b'|') => Some((open, end)),
        _ => None,
    }
}

/// `task #42`, `approval #7` with the `#` at `hash`: the `#42`.
fn numbered(bytes: &[u8], hash: usize) -> Option<(usize, usize)> {
    let word_end = if hash > 0 && bytes[hash - 1] == b' ' {
        hash - 1
    } else {
        hash
    };
    word_before(bytes, word_end, b"task").or_else(|| word_before(bytes, word_end, b"approval"))?;
    let n = run(bytes, hash + 1, 19, |b| b.is_ascii_digit());
    ((1..=19).contains(&n) && !continues(bytes, hash + 1 + n)).then_some((hash, hash + 1 + n))
}

/// `c-` and 16 hex digits, with the `-` at `dash`.
fn conversation(bytes: &[u8], dash: usize) -> Option<(usize, usize)> {
    let start = word_before(bytes, dash, b"c")?;
    let n = run(bytes, dash + 1, 16, is_hex);
    (n == 16 && !continues(bytes, dash + 17)).then_some((start, dash + 17))
}

/// `toolu_…` / `call_…` (8 to 64 letters and digits), with an optional `_t3_1`, the `_` at `under`.
fn tool_call(bytes: &[u8], under: usize) -> Option<(usize, usize)> {
    let start =
        word_before(bytes, under, b"toolu").or_else(|| word_before(bytes, under, b"call"))?;
    let n = run(bytes, under + 1, 64, |b| b.is_ascii_alphanumeric());
    if !(8..=64).contains(&n)
        || !bytes[under + 1..under + 1 + n]
            .iter()
            .any(u8::is_ascii_digit)
    {
        return None;
    }
    let mut end = under + 1 + n;
    // The session's renaming: `_t{turn}_{n}`.
    if bytes.get(end..end + 2) == Some(&b"_t"[..]) {
        let turn = run(bytes, end + 2, 9, |b| b.is_ascii_digit());
        let at = end + 2 + turn;
        let k = if bytes.get(at) == Some(&b'_') {
            run(bytes, at + 1, 9, |b| b.is_ascii_digit())
        } else {
            0
        };
        if turn > 0 && k > 0 {
            end = at + 1 + k;
        }
    }
    (!continues(bytes, end)).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(text: &str) -> Vec<&str> {
        own_ids(text.as_bytes(), 0, text.len())
            .into_iter()
            .map(|(s, e)| &text[s..e])
            .collect()
    }

    #[test]
    fn each_form_is_found() {
        assert_eq!(
            ids("[2024-03-15, web:82bcfadd9458164b] hi"),
            ["web:82bcfadd9458164b"]
        );
        assert_eq!(
            ids("by slack:U024BE7LH in slack:T0001ABCD:C024BE7LR."),
            ["slack:U024BE7LH", "slack:T0001ABCD:C024BE7LR"]
        );
        assert_eq!(
            ids("discord:81384788765712384 and discord:175928847299117063:175928847299117064"),
            [
                "discord:81384788765712384",
                "discord:175928847299117063:175928847299117064"
            ]
        );
        assert_eq!(
            ids(
                "ask <@U024BE7LH> in <#C024BE7LR|general> or <@!81384788765712384>, <@&165511591545143296>"
            ),
            [
                "<@U024BE7LH>",
                "<#C024BE7LR",
                "<@!81384788765712384>",
                "<@&165511591545143296>"
            ]
        );
        assert_eq!(
            ids("conversation c-1f3a9b7c2d4e5f60."),
            ["c-1f3a9b7c2d4e5f60"]
        );
        assert_eq!(
            ids("Could not cancel task #4521; approval #7 and Approval #12 remain"),
            ["#4521", "#7", "#12"]
        );
        assert_eq!(
            ids("toolu_01A09q90qw90lq917835lq9 then call_Ab12Cd34Ef56Gh78_t3_1 done"),
            [
                "toolu_01A09q90qw90lq917835lq9",
                "call_Ab12Cd34Ef56Gh78_t3_1"
            ]
        );
    }

    #[test]
    fn look_alikes_are_not_ids() {
        for t in [
            "web:82bcfadd9458164", // 15 hex digits
            "web:82bcfadd9458164bb",
            "cobweb:82bcfadd9458164b",
            "web:Johanna",
            "slack:johanna",
            "slack:U12",
            "discord:12345",
            "abc-1f3a9b7c2d4e5f60",
            "room #12",
            "task#",
            "<@johanna>",
            "call_me_maybe",
            "the c-suite",
            "web: 82bcfadd9458164b",
        ] {
            assert!(ids(t).is_empty(), "{t}: {:?}", ids(t));
        }
    }

    fn entity(kind: EntityType, text: &str, part: &str) -> Entity {
        let start = text.find(part).expect("part of the text");
        Entity {
            kind,
            start,
            end: start + part.len(),
            score: 0.9,
        }
    }

    #[test]
    fn spans_inside_ids_are_dropped_and_overlapping_ones_cut() {
        let text =
            "[2024-03-15, web:82bcfadd9458164b] Johanna Whitfield asked; see <@U024BE7LH|marta>";
        let mut found = vec![
            entity(EntityType::PersonName, text, "web:82bcfadd9458164b"),
            entity(EntityType::PersonName, text, "82bcfadd"),
            entity(EntityType::PersonName, text, "web"),
            entity(EntityType::PersonName, text, "9458164b] Johanna Whitfield"),
            entity(EntityType::PersonName, text, "U024BE7LH|marta"),
            entity(EntityType::Phone, text, "2024-03-15"),
        ];
        drop_own_ids(text, &mut found);
        let kept: Vec<&str> = found.iter().map(|e| e.text(text)).collect();
        assert_eq!(kept, ["Johanna Whitfield", "marta", "2024-03-15"]);
    }

    /// A model that reads every `web:…` id, and one name, as people (as Rampart does with the id).
    struct IdsAreNames;

    impl crate::detect::NerModel for IdsAreNames {
        fn entities(&self, text: &str) -> Vec<Entity> {
            let mut out = Vec::new();
            for part in [
                "web:82bcfadd9458164b",
                "82bcfadd9458164b",
                "Johanna Whitfield",
            ] {
                if let Some(start) = text.find(part) {
                    out.push(Entity {
                        kind: EntityType::PersonName,
                        start,
                        end: start + part.len(),
                        score: 0.97,
                    });
                }
            }
            out
        }
    }

    #[test]
    fn the_detector_never_reports_own_ids() {
        use crate::detect::{DetectOptions, Detector, NerSlot};
        let slot = NerSlot::new();
        assert!(slot.set(std::sync::Arc::new(IdsAreNames)));
        let detector = Detector::new(DetectOptions::default(), slot);
        let text = "[2024-03-15, web:82bcfadd9458164b] Johanna Whitfield: call me on discord:81384788765712384 \
                    or <@175928847299117063>, re task #4521 and order #54143864";
        let found: Vec<(EntityType, &str)> = detector
            .detect(text)
            .into_iter()
            .map(|e| (e.kind, e.text(text)))
            .collect();
        assert_eq!(found, [(EntityType::PersonName, "Johanna Whitfield")]);
    }
}
