//! What the NER tier adds to the model: names and places the model cannot see or sees too faintly.
//!
//! The model is an uncased English BERT. It reads "Dan Tailor" in an English sentence well, but:
//! - it is unsure of a lone given name or surname ("sent by Ravi", "thanks, Ingrid"), although the word
//!   before it says what it is: [`cue_before`] lets a faint person reading (see [`CUE_MIN`]) count
//!   after such a cue, and a title (`Mr.`, `Dr.`, `Prof.` …) makes the capitalised words after it a
//!   name whatever the model says ([`title_names`]);
//! - a chat transcript's speaker (`ravi: "are you coming?"`) sits at the start of a line before a
//!   colon ([`speaker_names`]), a shape rather than a context it was trained on;
//! - it has never seen Chinese, Japanese or Korean names written in their script, nor Cyrillic names:
//!   [`script_names`] finds a short run of Han or Hangul characters that starts with a common family
//!   name and stands apart from other such text (a name inside English or between punctuation, not a
//!   word inside Chinese prose), and a pair of capitalised Cyrillic words one of which ends like a
//!   Slavic surname;
//! - it has no country label: [`countries`] finds a country's name after a word that makes it where
//!   someone is or goes ("lives in", "moved to", "from").
//!
//! Each rule reports spans with a fixed score on the calibrated scale (see `calibration`): they are
//! decisions, not probabilities, and sit just above the default threshold so that a user who raises
//! it to demand more certainty drops them first.

use std::sync::LazyLock;

use fake::locales::{Data, EN, JA_JP, ZH_CN};
use regex::Regex;

use super::calibration::RULE_SCORE;
use crate::{Entity, EntityType};

/// A model reading of a person at least this likely (1 − P(O)) counts after a name cue.
pub const CUE_MIN: f32 = 0.12;

/// Words after which a capitalised word the model reads as a person, however faintly, is a name.
const NAME_CUES: &[&str] = &[
    "by",
    "from",
    "cc",
    "thanks",
    "thank",
    "thx",
    "cheers",
    "regards",
    "best",
    "dear",
    "hi",
    "hey",
    "hello",
    "ask",
    "ping",
    "tell",
    "with",
    "met",
    "meet",
    "call",
    "email",
    "text",
    "sincerely",
    "love",
    "yours",
    "@",
];

/// Titles: the capitalised words after one are a name.
const TITLES: &[&str] = &[
    "mr",
    "mrs",
    "ms",
    "mx",
    "miss",
    "dr",
    "prof",
    "professor",
    "sir",
    "dame",
    "madam",
    "mme",
    "mlle",
    "herr",
    "frau",
    "señor",
    "señora",
    "sr",
    "sra",
    "sig",
    "signora",
];

/// Whether the word ending right before byte `at` (skipping spaces and one comma or colon) is a
/// name cue.
pub fn cue_before(text: &str, at: usize) -> bool {
    let before = text[..at].trim_end_matches([' ', '\t']);
    let before = before
        .strip_suffix([',', ':'])
        .unwrap_or(before)
        .trim_end_matches([' ', '\t']);
    let word_start = before
        .rfind(|c: char| !(c.is_alphanumeric() || c == '.' || c == '@'))
        .map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
    let word = before[word_start..].trim_end_matches('.').to_lowercase();
    (!word.is_empty() && (NAME_CUES.contains(&word.as_str()) || TITLES.contains(&word.as_str())))
        || super::fields::weak_name_label(text, at)
}

/// Whether `word` starts with an upper-case letter.
fn capitalised(word: &str) -> bool {
    word.chars().next().is_some_and(char::is_uppercase)
}

static TITLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        (?:^|[^\p{L}\p{N}])
        (?i:mr|mrs|ms|mx|miss|dr|prof|professor|sir|dame|madam|mme|mlle|herr|frau)\.?
        [\ \t]+
        (?P<name>
            \p{Lu}[\p{L}'’-]+
            (?: [\ \t]+ (?: \p{Lu}\. | \p{Lu}[\p{L}'’-]+ ) ){0,3}
        )",
    )
    .expect("title pattern compiles")
});

/// Names after a title: `Dr. Amara Okafor`, `Mr. Nakamura`, `Prof. Marta K. Lindqvist`.
pub fn title_names(text: &str, out: &mut Vec<Entity>) {
    for caps in TITLE.captures_iter(text) {
        let Some(m) = caps.name("name") else { continue };
        let name = m.as_str();
        // A trailing word that is a sentence's next word ("Dr. Patel The") is not part of the name.
        let words: Vec<&str> = name.split_whitespace().collect();
        let keep = words
            .iter()
            .take_while(|w| !STOP_WORDS.contains(&w.to_lowercase().as_str()))
            .count();
        if keep == 0 {
            continue;
        }
        let end = m.start()
            + name
                .match_indices(words[keep - 1])
                .last()
                .map_or(name.len(), |(i, w)| i + w.len());
        let end = m.start()
            + text[m.start()..end]
                .trim_end_matches(['\'', '’', '-'])
                .len();
        out.push(Entity {
            kind: EntityType::PersonName,
            start: m.start(),
            end,
            score: RULE_SCORE,
        });
    }
}

/// Words that head a line as a label, not a speaker ("Note: …", "Subject: …").
const LABELS: &[&str] = &[
    "note",
    "notes",
    "nb",
    "ps",
    "pps",
    "subject",
    "re",
    "fwd",
    "fw",
    "summary",
    "update",
    "status",
    "action",
    "actions",
    "todo",
    "q",
    "a",
    "question",
    "answer",
    "reply",
    "date",
    "time",
    "when",
    "where",
    "who",
    "what",
    "why",
    "how",
    "location",
    "address",
    "phone",
    "tel",
    "email",
    "mail",
    "fax",
    "mobile",
    "cell",
    "web",
    "url",
    "link",
    "edit",
    "warning",
    "error",
    "info",
    "debug",
    "tip",
    "example",
    "input",
    "output",
    "result",
    "results",
    "total",
    "price",
    "cost",
    "step",
    "agenda",
    "topic",
    "title",
    "name",
    "from",
    "to",
    "cc",
    "bcc",
    "sent",
    "attachment",
    "postcode",
    "zip",
    "city",
    "country",
    "state",
    "user",
    "assistant",
    "system",
    "bot",
    "admin",
    "me",
    "you",
    "us",
    "everyone",
    "all",
    "team",
    "ok",
    "yes",
    "no",
    "hi",
    "hello",
    "thanks",
    "reminder",
    "important",
    "news",
    "fyi",
    "source",
    "ref",
    "id",
    "ticket",
    "order",
    "invoice",
    "account",
    "version",
    "release",
    "build",
    "deadline",
    "goal",
    "goals",
    "plan",
    "next",
    "done",
    "issue",
    "problem",
    "solution",
    "fix",
    "bug",
    "feature",
    "task",
    "tasks",
    "owner",
    "priority",
    "comment",
    "comments",
    "feedback",
    "response",
    "request",
    "conclusion",
    "context",
    "background",
    "recap",
    "tldr",
    "caveat",
    "rule",
    "policy",
    "objective",
    "outcome",
    "meeting",
    "call",
    "today",
    "tomorrow",
    "yesterday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "pros",
    "cons",
    "steps",
    "ingredients",
    "budget",
    "amount",
    "balance",
    "quantity",
    "size",
    "color",
    "colour",
    "type",
    "kind",
    "category",
    "tags",
    "tag",
    "project",
    "team",
    "role",
    "company",
    "organisation",
    "organization",
    "department",
    "dept",
    "office",
    "ext",
    "mob",
    "ph",
    "website",
    "site",
    "host",
    "server",
    "port",
    "path",
    "file",
    "line",
    "page",
    "chapter",
    "section",
    "part",
    "item",
    "items",
    "score",
    "rating",
    "review",
    "verdict",
    "hint",
    "answer",
    "quote",
    "source",
    "author",
    "editor",
    "speaker",
    "host",
    "guest",
    "customer",
    "client",
    "agent",
    "support",
    "sales",
    "hr",
    "it",
    "legal",
    "finance",
    "ceo",
    "cto",
    "cfo",
    "pm",
    "am",
    "eta",
    "aka",
    "vs",
    "via",
    "re",
    "attn",
    "attention",
    "regards",
    "best",
    "cheers",
    "sincerely",
    "signed",
    "approved",
    "rejected",
    "pending",
    "open",
    "closed",
    "resolved",
    "fixed",
    "new",
    "old",
    "current",
    "previous",
    "draft",
    "final",
    "confirmed",
    "correction",
    "clarification",
    "disclaimer",
    "important",
    "urgent",
    "warning",
    "alert",
    "notice",
    "psa",
    "announcement",
    "tl",
    "dr",
    "http",
    "https",
    "ftp",
    "mailto",
    "file",
];

/// Words that end a name run after a title (a sentence's next word).
const STOP_WORDS: &[&str] = &[
    "the", "a", "an", "and", "or", "but", "is", "was", "will", "has", "had", "said", "says", "i",
    "we", "you", "he", "she", "they", "it", "this", "that", "on", "in", "at", "of", "for", "to",
    "from", "by", "with", "as", "if", "then", "so", "please", "thanks",
];

static SPEAKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?mx)
        ^[\ \t]*
        (?: [\[(]? \d{1,2}:\d{2}(?::\d{2})? (?:\s?[ap]m)? [\])]? [\ \t]+ )?
        @?
        (?P<name> \p{L}[\p{L}'’-]{1,24} (?: [\ \t] \p{L}[\p{L}'’-]{1,24} )? )
        :[\ \t]+ \S"#,
    )
    .expect("speaker pattern compiles")
});

/// Speakers at the start of a chat line: `ravi: "are you coming?"`, `[10:42] Ana Souza: ok`. A
/// label ("Note:", "Subject:", a form's "Reporter:" or "Warranty Until:", see
/// [`fields::is_field_label`](super::fields::is_field_label)) is not a speaker, and neither is, on a
/// line of its own, a word the model reads as plainly not a person (below [`SPEAKER_MIN`]). A
/// transcript says by its shape what its line heads are: there every head that is not a label is a
/// speaker. A transcript is two or more such lines where a head speaks again or most heads are
/// lower-case handles; a form's `Label: value` lines are neither (each label once, capitalised).
pub fn speaker_names(text: &str, person: impl Fn(usize, usize) -> f32, out: &mut Vec<Entity>) {
    let label = |head: &str| {
        head.split_whitespace()
            .any(|w| LABELS.contains(&w.to_lowercase().as_str()))
            || super::fields::is_field_label(head)
    };
    let heads: Vec<&str> = SPEAKER
        .captures_iter(text)
        .filter_map(|c| c.name("name"))
        .filter(|m| !label(m.as_str()) && !config_value_after(text, m.end()))
        .map(|m| m.as_str())
        .collect();
    let lower: Vec<String> = heads.iter().map(|h| h.to_lowercase()).collect();
    let repeats = lower
        .iter()
        .enumerate()
        .any(|(i, h)| lower[i + 1..].contains(h));
    let handles = heads
        .iter()
        .filter(|h| !h.chars().any(char::is_uppercase))
        .count();
    let transcript = heads.len() >= 2 && (repeats || 2 * handles > heads.len());
    for caps in SPEAKER.captures_iter(text) {
        let Some(m) = caps.name("name") else { continue };
        if label(m.as_str()) || config_value_after(text, m.end()) {
            continue;
        }
        if !transcript && person(m.start(), m.end()) < SPEAKER_MIN {
            continue;
        }
        out.push(Entity {
            kind: EntityType::PersonName,
            start: m.start(),
            end: m.end(),
            score: RULE_SCORE,
        });
    }
}

/// Whether the rest of the line after a line head's colon at `head_end` is one value of a config
/// or a log rather than something said: a single token of twelve or more characters holding a
/// digit (`etag: "9f86d0…"`, `cache-key: node-modules-linux-4b1f…`, `request_id: 550e8400-…`).
/// A phone number typed alone (`+44 7700 900123`, `+14155552671`) is still something said.
fn config_value_after(text: &str, head_end: usize) -> bool {
    let Some(rest) = text.get(head_end..) else {
        return false;
    };
    let line = rest.strip_prefix(':').unwrap_or(rest);
    let line = line[..line.find('\n').unwrap_or(line.len())].trim();
    !line.contains(char::is_whitespace)
        && line.chars().count() >= 12
        && line.chars().any(|c| c.is_ascii_digit())
        && !line.starts_with('+')
}

/// The least model reading of a person (1 − P(O), mean over the words) for a line-start speaker.
pub const SPEAKER_MIN: f32 = 0.02;

/// Common Chinese family names beyond the `fake` crate's list (which holds the first hundred).
const MORE_HAN_FAMILY: &[&str] = &[
    "欧阳", "司马", "诸葛", "上官", "东方", "皇甫", "尉迟", "公孙", "慕容", "令狐",
];

/// Korean family names (the most common forty cover nine in ten Koreans).
const HANGUL_FAMILY: &[&str] = &[
    "김", "이", "박", "최", "정", "강", "조", "윤", "장", "임", "한", "오", "서", "신", "권", "황",
    "안", "송", "류", "전", "홍", "고", "문", "양", "손", "배", "백", "허", "유", "남", "심", "노",
    "하", "곽", "성", "차", "주", "우", "구", "민",
];

/// Chinese and Japanese cities written alone; some start with a family-name character (成, 武, 高).
const HAN_CITIES: &[&str] = &[
    "北京",
    "上海",
    "广州",
    "深圳",
    "成都",
    "杭州",
    "南京",
    "武汉",
    "西安",
    "重庆",
    "天津",
    "苏州",
    "长沙",
    "郑州",
    "沈阳",
    "青岛",
    "宁波",
    "东莞",
    "无锡",
    "厦门",
    "福州",
    "济南",
    "大连",
    "昆明",
    "台北",
    "台中",
    "高雄",
    "香港",
    "澳门",
    "东京",
    "東京",
    "大阪",
    "京都",
    "横浜",
    "名古屋",
    "札幌",
    "福岡",
    "神戸",
];

/// Short words that start with a family-name character but are not names.
const HAN_WORDS: &[&str] = &[
    "谢谢", "高兴", "马上", "周末", "黄金", "金额", "王者", "张开", "周一", "周二", "周三", "周四",
    "周五", "周六", "周日", "朱红", "林业", "高级", "方法", "方面", "石油", "江湖", "何时", "许多",
];

fn is_han(c: char) -> bool {
    matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}')
}

fn is_hangul(c: char) -> bool {
    matches!(c, '\u{AC00}'..='\u{D7AF}')
}

fn is_cyrillic(c: char) -> bool {
    matches!(c, '\u{0400}'..='\u{04FF}')
}

/// Slavic surname endings (Russian, Ukrainian, Belarusian, Bulgarian, Serbian).
const SLAVIC_SURNAME_ENDINGS: &[&str] = &[
    "ов", "ова", "ев", "ева", "ёв", "ёва", "ин", "ина", "ын", "ына", "ский", "ская", "цкий",
    "цкая", "енко", "ук", "юк", "чук", "вич", "ич", "ян",
];

/// Names written in a script the model never learned: Han and Hangul runs that start with a family
/// name and stand apart, and Cyrillic given name + surname pairs.
pub fn script_names(text: &str, out: &mut Vec<Entity>) {
    // Han / Hangul: maximal runs of the script.
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let han = is_han(c);
        if !(han || is_hangul(c)) {
            continue;
        }
        let same = |c: char| if han { is_han(c) } else { is_hangul(c) };
        let mut end = start + c.len_utf8();
        let mut count = 1;
        while let Some(&(i, next)) = chars.peek() {
            if !same(next) {
                break;
            }
            end = i + next.len_utf8();
            count += 1;
            chars.next();
        }
        // Apart: the run is not glued to other CJK text (kana, more Han across a space is fine).
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let glued = |c: Option<char>| {
            c.is_some_and(|c| matches!(c, '\u{3040}'..='\u{30FF}') || is_han(c) || is_hangul(c))
        };
        if glued(before) || glued(after) {
            continue;
        }
        let run = &text[start..end];
        let family = if han {
            ZH_CN::NAME_LAST_NAME
                .iter()
                .chain(MORE_HAN_FAMILY)
                .chain(
                    JA_JP::NAME_LAST_NAME
                        .iter()
                        .filter(|n| n.chars().all(is_han)),
                )
                .any(|f| run.starts_with(f) && run.len() > f.len())
        } else {
            HANGUL_FAMILY.iter().any(|f| run.starts_with(f))
        };
        if han && HAN_CITIES.contains(&run) {
            // A city that starts like a family name (成都, 武汉) is a place.
            out.push(Entity {
                kind: EntityType::Location,
                start,
                end,
                score: RULE_SCORE,
            });
            continue;
        }
        // Two to four characters: a family name and a given name (欧阳娜娜 is four).
        if family && (2..=4).contains(&count) && !HAN_WORDS.contains(&run) {
            out.push(Entity {
                kind: EntityType::PersonName,
                start,
                end,
                score: RULE_SCORE,
            });
        }
    }
    // Cyrillic: two or three capitalised words, one with a surname ending.
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut at = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        if is_cyrillic(c) || (at.is_some() && (c == '-' || c == '\'')) {
            at.get_or_insert(i);
        } else if let Some(s) = at.take() {
            words.push((s, i));
        }
    }
    let mut i = 0;
    while i < words.len() {
        let mut j = i;
        let lower_text = !text.chars().any(char::is_uppercase);
        while j + 1 < words.len()
            && j + 1 - i < 3
            && text[words[j].1..words[j + 1].0] == *" "
            && (lower_text || capitalised(&text[words[j + 1].0..words[j + 1].1]))
        {
            j += 1;
        }
        let run = &words[i..=j];
        let surname = run.iter().any(|&(s, e)| {
            let w = text[s..e].to_lowercase();
            w.chars().count() > 3 && SLAVIC_SURNAME_ENDINGS.iter().any(|x| w.ends_with(x))
        });
        // Capitalised, or any case in a text with no capital at all (chat).
        let shaped =
            capitalised(&text[run[0].0..run[0].1]) || !text.chars().any(char::is_uppercase);
        if run.len() >= 2 && shaped && surname {
            out.push(Entity {
                kind: EntityType::PersonName,
                start: run[0].0,
                end: run[run.len() - 1].1,
                score: RULE_SCORE,
            });
        }
        i = j + 1;
    }
}

static PLACE_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:lives?|living|moved?|moving|fl(?:y|ies|ew|ying)|travel(?:l?(?:ing|ed))?|travels|relocat(?:ed|ing|es?)|based|born|grew\s+up|settled|headed|heading|driving|drove)\s+(?:in|to|at|from)\s+$",
    )
    .expect("place verb pattern compiles")
});

/// Whether `before` ends with a verb of where someone lives or goes and its preposition ("flies to
/// ", "lives in "): a single word after it is a place, even when the model reads a person.
pub fn place_verb_before(before: &str) -> bool {
    let mut from = before.len().saturating_sub(40);
    while !before.is_char_boundary(from) {
        from += 1;
    }
    PLACE_VERB.is_match(&before[from..])
}

/// Words after which a country is where someone is, lives, goes or comes from.
const PLACE_CUES: &[&str] = &[
    "in", "to", "from", "near", "at", "visiting", "visit", "leaving", "left", "reach", "reached",
];

/// Whether `before` ends with a place cue, possibly followed by "the" ("to the Faroe Islands").
fn place_cue_before(before: &str) -> bool {
    let mut words = before
        .trim_end()
        .rsplit(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase);
    match words.next() {
        Some(w) if w == "the" => words
            .next()
            .is_some_and(|w| PLACE_CUES.contains(&w.as_str())),
        Some(w) => PLACE_CUES.contains(&w.as_str()),
        None => false,
    }
}

/// A country named after a place cue ("she lives in Norway", "moved to Iceland", "flew home from
/// Japan"); the model has no country label. Countries are matched by their English names in the
/// `fake` crate's list plus a few common short forms.
pub fn countries(text: &str, out: &mut Vec<Entity>) {
    static NAMES: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut v: Vec<String> = EN::ADDRESS_COUNTRY
            .iter()
            .map(|c| c.to_string())
            .chain(
                ["USA", "UK", "South Korea", "Czechia"]
                    .iter()
                    .map(|c| c.to_string()),
            )
            .collect();
        // Longest first so "Guinea-Bissau" wins over "Guinea".
        v.sort_by_key(|c| std::cmp::Reverse(c.len()));
        v
    });
    // Countries start with a capital; in a text with none at all (chat), any word may start one.
    let lower_text = !text.chars().any(char::is_uppercase);
    let lower = lower_text.then(|| text.to_lowercase());
    let hay = lower.as_deref().unwrap_or(text);
    let starts: Vec<usize> = if lower_text {
        hay.char_indices()
            .filter(|&(i, c)| {
                c.is_alphabetic()
                    && hay[..i]
                        .chars()
                        .next_back()
                        .is_none_or(|p| !p.is_alphanumeric())
            })
            .map(|(i, _)| i)
            .collect()
    } else {
        text.match_indices(|c: char| c.is_uppercase())
            .map(|(i, _)| i)
            .collect()
    };
    for i in starts {
        let before_ok = text[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        if !before_ok {
            continue;
        }
        let Some(name) = NAMES.iter().find(|n| {
            let n = if lower_text {
                n.to_lowercase()
            } else {
                (*n).clone()
            };
            text[i..].starts_with(n.as_str())
                && text[i + n.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric())
        }) else {
            continue;
        };
        if place_cue_before(&text[..i]) {
            out.push(Entity {
                kind: EntityType::Location,
                start: i,
                end: i + name.len(),
                score: RULE_SCORE,
            });
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn texts(text: &str, e: &[Entity]) -> Vec<String> {
        e.iter().map(|e| text[e.start..e.end].to_string()).collect()
    }

    #[test]
    fn titles_make_names() {
        let mut out = Vec::new();
        let text = "Ask Dr. Amara Okafor, then Mr. Nakamura; Prof. Marta K. Lindqvist agreed. \
                    mr smith and Dr. The";
        title_names(text, &mut out);
        assert_eq!(
            texts(text, &out),
            vec!["Amara Okafor", "Nakamura", "Marta K. Lindqvist"]
        );
    }

    #[test]
    fn cues_are_the_word_before() {
        let text = "sent by Ravi; thanks, Ingrid; cc: Bo; Dr. Who; the report on Ravi";
        for (name, cue) in [
            ("Ravi;", true),
            ("Ingrid", true),
            ("Bo", true),
            ("Who", true),
        ] {
            let at = text.find(name).unwrap();
            assert_eq!(cue_before(text, at), cue, "{name}");
        }
        assert!(!cue_before(text, text.rfind("Ravi").unwrap()));
        assert!(!cue_before("Ravi", 0));
    }

    #[test]
    fn speakers_head_chat_lines() {
        let text = "ravi: \"are you coming?\"\n[10:42] Ana Souza: on my way\nNote: bring cake\n\
                    Subject: dinner\n  mei: ok\nweb:82bcfadd9458164b says hi";
        let mut out = Vec::new();
        speaker_names(text, |_, _| 0.5, &mut out);
        assert_eq!(texts(text, &out), vec!["ravi", "Ana Souza", "mei"]);
        // A transcript's heads are speakers whatever the model reads; a single line needs the model.
        let mut transcript = Vec::new();
        speaker_names(text, |_, _| 0.0, &mut transcript);
        assert_eq!(texts(text, &transcript), vec!["ravi", "Ana Souza", "mei"]);
        let mut none = Vec::new();
        speaker_names("Budget: $4,000 for the offsite", |_, _| 0.0, &mut none);
        speaker_names("maja: ok", |_, _| 0.0, &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn names_in_other_scripts() {
        let text = "Please ask 王小明 (or 欧阳娜娜) and 김민준 — Иван Петров and Ольга Ковальчук agreed. \
                    我们明天在北京开会。 Москва большая.";
        let mut out = Vec::new();
        script_names(text, &mut out);
        assert_eq!(
            texts(text, &out),
            vec![
                "王小明",
                "欧阳娜娜",
                "김민준",
                "Иван Петров",
                "Ольга Ковальчук"
            ]
        );
    }

    #[test]
    fn place_verbs() {
        assert!(place_verb_before("Next week Ryo flies to "));
        assert!(place_verb_before("she lives in "));
        assert!(place_verb_before("Isabel is travelling to "));
        assert!(!place_verb_before("I wrote to "));
        assert!(!place_verb_before("flies to the "));
        assert!(place_verb_before("Сергей и Ольга живут, she moved to "));
    }

    #[test]
    fn countries_after_a_place_cue() {
        let text = "She lives in Norway and moved to the UK from Guinea-Bissau. Norway won; \
                    Japan is big; flew in from Japan, then to the Faroe Islands.";
        let mut out = Vec::new();
        countries(text, &mut out);
        out.sort_by_key(|e| e.start);
        assert_eq!(
            texts(text, &out),
            vec!["Norway", "UK", "Guinea-Bissau", "Japan", "Faroe Islands"]
        );
    }
}
