//! Form-like text: `Label: value` lines (intake and registration forms, HR records, tracker issues,
//! shipping labels, mail header blocks). The label says what its value is, which the model, trained
//! on prose, does not read:
//! - a field label is never a person, nor a chat speaker ([`is_field_label`]: "Reporter:",
//!   "Warranty Until:", "SERVICE:");
//! - the value of a field whose label says *name* (`Name:`, `Full Name:`, `Patient:`, `Assignee:`,
//!   `Ship to:`, `Emergency Contact:`) is a name when it is shaped like one, whatever the model reads
//!   ([`field_names`]); the value may stand on the next line when the label ends its own
//!   (`SHIP TO:` / `DIVYA MUKHERJEE`);
//! - after a label that merely *may* introduce a person (`From:`, `To:`, `Cc:`, `Contact:`,
//!   `Manager:`), a faint person reading counts, as after a name cue ([`weak_name_label`]);
//! - in the value of a field whose label says it is *not* about a person or a place (`Subject:`,
//!   `Product:`, `Department:`, `Model:`, `Sprint:`), a name, place or address the model found counts
//!   only when the model is very sure ([`non_name_field`], [`FIELD_SURE`]);
//! - a capitalised run right before a company or venue word (`Stark Supplies`, `Harborview
//!   Consulting`, `Everest Room`) is part of that company's or room's name, not a person or a place
//!   ([`company_after`]).
//!
//! Invariants: every function works on byte offsets into the text it was given and never panics on
//! any input; labels are matched case-insensitively, by whole words.

use std::sync::LazyLock;

use regex::Regex;

use crate::{Entity, EntityType};

use super::calibration::RULE_SCORE;

/// In a non-name field's value, a model span counts only at or above this calibrated score (raw
/// mean 1 − P(O) about 0.9 for names).
pub const FIELD_SURE: f32 = 0.97;

/// Labels whose value is a person's name.
const NAME_FIELDS: &[&str] = &[
    "name",
    "full name",
    "fullname",
    "first name",
    "last name",
    "given name",
    "given names",
    "family name",
    "surname",
    "middle name",
    "maiden name",
    "legal name",
    "preferred name",
    "display name",
    "patient",
    "employee",
    "student",
    "applicant",
    "candidate",
    "visitor",
    "passenger",
    "traveller",
    "traveler",
    "cardholder",
    "card holder",
    "name on card",
    "account holder",
    "policyholder",
    "policy holder",
    "insured",
    "beneficiary",
    "recipient",
    "addressee",
    "attn",
    "attention",
    "ship to",
    "deliver to",
    "consignee",
    "reporter",
    "reported by",
    "assignee",
    "assigned to",
    "requester",
    "requestor",
    "requested by",
    "submitted by",
    "created by",
    "opened by",
    "raised by",
    "approved by",
    "signed by",
    "checked by",
    "prepared by",
    "reviewed by",
    "authorised by",
    "authorized by",
    "emergency contact",
    "next of kin",
    "spouse",
    "guardian",
    "parent/guardian",
    "physician",
    "referring physician",
    "attending physician",
    "doctor",
    "host",
    "interviewer",
    "witness",
    "tenant",
    "landlord",
    "caller",
];

/// First words that make a `… name` label something else's name (`Company Name:`, `File name:`).
const OTHER_NAMES: &[&str] = &[
    "company",
    "product",
    "file",
    "user",
    "host",
    "team",
    "project",
    "brand",
    "business",
    "trading",
    "domain",
    "server",
    "device",
    "item",
    "bank",
    "branch",
    "street",
    "city",
    "country",
    "event",
    "course",
    "plan",
    "model",
    "app",
    "database",
    "table",
    "field",
    "column",
    "org",
    "organisation",
    "organization",
    "department",
    "store",
    "shop",
    "hotel",
    "vessel",
    "ship",
    "venue",
    "school",
    "university",
    "institution",
    "employer",
    "account",
    "network",
    "printer",
    "queue",
    "service",
    "package",
    "campaign",
];

/// Labels after which a faint person reading is a name (they often, not always, introduce one).
const WEAK_NAME_FIELDS: &[&str] = &[
    "from",
    "to",
    "cc",
    "bcc",
    "contact",
    "customer",
    "client",
    "owner",
    "manager",
    "agent",
    "sender",
    "author",
    "lead",
    "organizer",
    "organiser",
    "attendee",
    "attendees",
    "participants",
    "speaker",
    "chair",
    "presenter",
    "mentor",
    "supervisor",
    "approver",
    "reviewer",
    "coordinator",
    "nurse",
    "therapist",
    "teacher",
    "tutor",
    "instructor",
    "coach",
    "advisor",
    "adviser",
    "rep",
    "representative",
    "reports to",
    "on call",
    "comment",
];

/// Labels (or a label's last word) whose value is not a person, a place or an address.
const NON_NAME_FIELDS: &[&str] = &[
    "subject",
    "re",
    "fwd",
    "product",
    "products",
    "model",
    "item",
    "items",
    "sku",
    "description",
    "department",
    "dept",
    "team",
    "division",
    "component",
    "components",
    "sprint",
    "epic",
    "milestone",
    "status",
    "priority",
    "severity",
    "category",
    "type",
    "plan",
    "tier",
    "version",
    "release",
    "service",
    "queue",
    "brand",
    "manufacturer",
    "make",
    "course",
    "programme",
    "program",
    "title",
    "role",
    "position",
    "occupation",
    "labels",
    "tags",
    "project",
    "summary",
    "resolution",
    "environment",
    "browser",
    "platform",
    "os",
    "carrier",
    "method",
    "currency",
    "reason",
    "diagnosis",
    "medication",
    "medications",
    "allergies",
    "insurance",
    "company",
    "employer",
    "organisation",
    "organization",
    "account",
    "vendor",
    "supplier",
    "warehouse",
    "room",
    "building",
    "floor",
    "desk",
    "centre",
    "center",
];

/// Words that make a line head a field label, never a speaker.
const FIELD_WORDS: &[&str] = &[
    "reporter",
    "assignee",
    "requester",
    "sprint",
    "epic",
    "component",
    "components",
    "labels",
    "milestone",
    "severity",
    "resolution",
    "environment",
    "model",
    "serial",
    "warranty",
    "asset",
    "e-mail",
    "programme",
    "program",
    "course",
    "start",
    "end",
    "sponsor",
    "service",
    "weight",
    "dimensions",
    "tracking",
    "carrier",
    "shipper",
    "consignee",
    "recipient",
    "sender",
    "deliver",
    "ship",
    "bill",
    "sold",
    "badge",
    "parking",
    "physician",
    "doctor",
    "insurance",
    "provider",
    "emergency",
    "contact",
    "relationship",
    "kin",
    "patient",
    "visitor",
    "employee",
    "host",
    "dob",
    "birth",
    "born",
    "gender",
    "sex",
    "age",
    "nationality",
    "occupation",
    "marital",
    "signature",
    "room",
    "floor",
    "building",
    "desk",
    "shift",
    "plan",
    "tier",
    "class",
    "grade",
    "level",
    "reference",
    "po",
    "qty",
    "sku",
    "description",
    "product",
    "products",
    "manager",
    "supervisor",
    "reason",
    "visit",
    "appointment",
    "allergies",
    "medications",
    "diagnosis",
    "symptoms",
    "mrn",
    "policy",
    "member",
    "subscriber",
    "group",
    "division",
    "unit",
    "cost",
    "centre",
    "center",
    "currency",
    "terms",
    "due",
    "subtotal",
    "tax",
    "vat",
    "method",
    "bank",
    "routing",
    "swift",
    "region",
    "county",
    "province",
    "district",
    "street",
    "apartment",
    "apt",
    "suite",
    "postal",
    "home",
    "work",
    "personal",
    "primary",
    "secondary",
    "first",
    "last",
    "middle",
    "surname",
    "given",
    "family",
    "full",
    "legal",
    "preferred",
    "display",
    "username",
    "login",
    "password",
    "status",
    "severity",
    "category",
    "checked",
    "packed",
    "prepared",
    "reviewed",
    "submitted",
    "requested",
    "created",
    "opened",
    "raised",
    "assigned",
    "reported",
    "sent",
    "received",
    "signed",
    "issued",
    "expires",
    "expiry",
    "valid",
    "until",
    "since",
    "duration",
    "quantity",
    "sponsor",
    "brand",
    "vendor",
    "supplier",
    "warehouse",
    "stock",
    "fix",
    "affects",
    "browser",
    "platform",
    "os",
    "device",
    "ip",
    "hostname",
    "workstation",
];

/// Company and venue words: a capitalised run right before one is that company's or room's name.
/// (`Hall` is left out: it is a common family name.)
const COMPANY_WORDS: &[&str] = &[
    "corp",
    "corporation",
    "inc",
    "ltd",
    "llc",
    "llp",
    "plc",
    "gmbh",
    "ag",
    "sa",
    "srl",
    "spa",
    "bv",
    "nv",
    "ab",
    "oy",
    "kk",
    "co",
    "company",
    "group",
    "holdings",
    "partners",
    "associates",
    "consulting",
    "consultants",
    "solutions",
    "systems",
    "software",
    "technologies",
    "labs",
    "analytics",
    "logistics",
    "freight",
    "supplies",
    "supply",
    "traders",
    "trading",
    "industries",
    "enterprises",
    "ventures",
    "capital",
    "insurance",
    "health",
    "healthcare",
    "pharma",
    "pharmaceuticals",
    "energy",
    "media",
    "studio",
    "studios",
    "realty",
    "foods",
    "dental",
    "legal",
    "robotics",
    "electronics",
    "motors",
    "airlines",
    "hotel",
    "hotels",
    "foundation",
    "institute",
    "agency",
    "services",
    "room",
    "boardroom",
    "lounge",
    "auditorium",
];

/// Values a name field holds when it names nobody.
const NOT_A_NAME: &[&str] = &[
    "unassigned",
    "none",
    "n/a",
    "na",
    "tbd",
    "tba",
    "unknown",
    "anonymous",
    "null",
    "pending",
    "same",
    "self",
    "team",
    "support",
    "desk",
    "department",
    "office",
    "reception",
    "front",
    "services",
    "service",
    "operations",
    "admin",
    "administrator",
    "everyone",
    "all",
    "nobody",
    "yes",
    "no",
    "notifications",
    "notification",
    "alerts",
    "noreply",
    "no-reply",
    "helpdesk",
    "info",
    "sales",
    "billing",
    "accounts",
    "payroll",
    "newsletter",
    "updates",
    "news",
    "bot",
    "hr",
    "it",
    "distribution",
    "list",
];

/// Lower-case particles inside a name (`Paloma de la Cruz`, `Khalid bin Rashid`).
const PARTICLES: &[&str] = &[
    "de", "da", "do", "dos", "das", "del", "della", "di", "du", "la", "le", "van", "von", "der",
    "den", "ter", "ten", "bin", "bint", "ibn", "al", "el", "y", "e",
];

fn lower_words(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '/' || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A label as written, normalised: lower case, a parenthesised remark and `#` dropped, spaces
/// collapsed (`Name (as on ID)` → `name`, `TRACKING #` → `tracking`).
fn normalise(label: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in label.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ if depth > 0 => {}
            '#' | '*' | '_' => out.push(' '),
            c => out.extend(c.to_lowercase()),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a line head (the words before a colon) is a field label rather than a speaker.
pub fn is_field_label(head: &str) -> bool {
    lower_words(head)
        .iter()
        .any(|w| FIELD_WORDS.contains(&w.as_str()))
}

/// Whether `label` (normalised) says its value is a person's name.
fn names_a_person(label: &str) -> bool {
    if NAME_FIELDS.contains(&label) {
        return true;
    }
    let words: Vec<&str> = label.split(' ').collect();
    // "Patient Name", "Employee Full Name"; not "Company Name" or "File name".
    words.len() <= 3
        && words.last().is_some_and(|w| *w == "name" || *w == "names")
        && !words.iter().any(|w| OTHER_NAMES.contains(w))
}

/// The field a byte offset sits in on its line: the label (normalised) of the nearest `Label:`
/// before it in the same cell (cells split by a tab, `|`, `;` or a run of two or more spaces).
pub fn field_label_before(text: &str, at: usize) -> Option<String> {
    let at = floor_boundary(text, at);
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let prefix = text[line_start..at].trim_end();
    let cell_start = [
        prefix.rfind('\t').map(|i| i + 1),
        prefix.rfind('|').map(|i| i + 1),
        prefix.rfind(';').map(|i| i + 1),
        prefix.rfind("  ").map(|i| i + 2),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0);
    let cell = &prefix[cell_start..];
    let colon = cell.find(':')?;
    let label = &cell[..colon];
    // A label is a few words of letters, not a sentence ("He said: …") or a time ("10:42").
    if label.trim().is_empty()
        || label.split_whitespace().count() > 4
        || !label.chars().any(char::is_alphabetic)
        || label
            .chars()
            .any(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '!' | '?' | '"' | '@'))
    {
        return None;
    }
    Some(normalise(label))
}

/// Whether the label right before byte `at` (`Contact: `, `To: `) may introduce a person: a faint
/// person reading after it counts as after a name cue.
pub fn weak_name_label(text: &str, at: usize) -> bool {
    let at = floor_boundary(text, at);
    if !text[..at].trim_end_matches([' ', '\t']).ends_with(':') {
        return false;
    }
    field_label_before(text, at)
        .is_some_and(|l| WEAK_NAME_FIELDS.contains(&l.as_str()) || names_a_person(&l))
}

/// Whether a model span starting at `at` lies in the value of a field that is not about a person,
/// a place or an address (`Product:`, `Department:`, `Subject:`).
pub fn non_name_field(text: &str, at: usize) -> bool {
    let Some(label) = field_label_before(text, at) else {
        return false;
    };
    if names_a_person(&label) || WEAK_NAME_FIELDS.contains(&label.as_str()) {
        return false;
    }
    let last = label.rsplit(' ').next().unwrap_or("");
    NON_NAME_FIELDS.contains(&label.as_str()) || NON_NAME_FIELDS.contains(&last)
}

/// Whether the word right after byte `end` (one space or tab away, capitalised or in a capitals-only
/// run) is a company or venue word: `Stark| Supplies`, `Everest| Room`.
pub fn company_after(text: &str, end: usize) -> bool {
    let mut rest = &text[floor_boundary(text, end)..];
    // The company word may come after one or two more capitalised words (`Nimbus Cloud AB`).
    for _ in 0..3 {
        let Some(r) = rest.strip_prefix([' ', '\t']) else {
            return false;
        };
        let word: String = r
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '.' || *c == '&')
            .collect();
        if !word
            .chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c == '&')
        {
            return false;
        }
        let bare = word.trim_end_matches('.').to_lowercase().replace('.', "");
        if COMPANY_WORDS.contains(&bare.as_str()) || bare == "&" {
            return true;
        }
        rest = &r[word.len()..];
    }
    false
}

/// Whether `word` (any case, a trailing dot ignored) is a company or venue word (`Ltd`, `Realty`,
/// `Consulting`, `Room`).
pub fn is_company_word(word: &str) -> bool {
    let bare = word.trim_end_matches('.').to_lowercase().replace('.', "");
    COMPANY_WORDS.contains(&bare.as_str())
}

/// Whether a one-word span is an address unit word before its number (`Flat 541`, `Suite 12`).
pub fn unit_word(text: &str, start: usize, end: usize) -> bool {
    let word = text[start..end].to_lowercase();
    UNIT_WORDS.contains(&word.as_str())
        && text[end..]
            .trim_start_matches([' ', '\t', '.'])
            .starts_with(|c: char| c.is_ascii_digit())
}

/// Words that name a unit of a building.
const UNIT_WORDS: &[&str] = &[
    "flat",
    "suite",
    "apt",
    "apartment",
    "unit",
    "building",
    "floor",
    "room",
    "block",
    "house",
    "tower",
    "ste",
];

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Whether `word` may be part of a name written in a field: starts with a letter that is not lower
/// case (capitalised, capitals, or a script without case), and holds only letters, an initial's
/// dot, hyphens and apostrophes.
fn name_word(word: &str) -> bool {
    let mut chars = word.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !first.is_alphabetic() || first.is_lowercase() {
        return false;
    }
    if word.chars().count() < 2 {
        return false;
    }
    if word.contains('.') {
        // Only an initial: `K.`.
        return word.chars().count() == 2 && word.ends_with('.');
    }
    chars.all(|c| c.is_alphabetic() || matches!(c, '-' | '\'' | '’'))
}

/// The name a value holds, as a byte range inside `value`: every word name-shaped (particles
/// allowed inside), one to five words, none of them a word that names nobody or a company.
fn name_in(value: &str) -> Option<(usize, usize)> {
    let trimmed_start = value.len() - value.trim_start().len();
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.len() > 5 {
        return None;
    }
    for (i, w) in words.iter().enumerate() {
        let lower = w.to_lowercase();
        let particle = i > 0 && i + 1 < words.len() && PARTICLES.contains(&lower.as_str());
        if !(particle || name_word(w)) {
            return None;
        }
        if NOT_A_NAME.contains(&lower.as_str())
            || COMPANY_WORDS.contains(&lower.trim_end_matches('.'))
        {
            return None;
        }
    }
    Some((trimmed_start, trimmed_start + v.len()))
}

/// Names in the values of fields whose label says name: `Full Name: Marta K. Lindqvist`,
/// `Assignee: Li Jun`, `SHIP TO:` / `DIVYA MUKHERJEE` (the next line, when the label ends its own).
pub fn field_names(text: &str, out: &mut Vec<Entity>) {
    let mut line_start = 0;
    let lines: Vec<(usize, &str)> = text
        .split('\n')
        .map(|l| {
            let at = line_start;
            line_start += l.len() + 1;
            (at, l)
        })
        .collect();
    for (n, &(start, line)) in lines.iter().enumerate() {
        // Cells: a line may hold several fields ("Type: Bug    Priority: Minor").
        let mut cells: Vec<(usize, &str)> = Vec::new();
        let mut cell_start = 0;
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let split = match bytes[i] {
                b'\t' | b'|' | b';' => Some(1),
                b' ' if bytes.get(i + 1) == Some(&b' ') => {
                    let run = bytes[i..].iter().take_while(|&&b| b == b' ').count();
                    Some(run)
                }
                _ => None,
            };
            if let Some(len) = split {
                cells.push((cell_start, &line[cell_start..i]));
                i += len;
                cell_start = i;
            } else {
                i += 1;
            }
        }
        cells.push((cell_start, &line[cell_start..]));
        // `Employee Name<TAB>Eduarda Lozano`: a two-cell line is a label and its value.
        if let [(_, label), (value_at, value)] = cells.as_slice()
            && line.contains('\t')
            && !label.contains(':')
            && label.split_whitespace().count() <= 3
            && names_a_person(&normalise(label))
        {
            if let Some((s, e)) = name_in(value) {
                out.push(person(start + value_at + s, start + value_at + e));
            }
            continue;
        }
        for (cell_at, cell) in cells {
            let Some(colon) = cell.find(':') else {
                continue;
            };
            let label = &cell[..colon];
            if label.trim().is_empty()
                || label.split_whitespace().count() > 4
                || label.chars().any(|c| c.is_ascii_digit() || c == '@')
            {
                continue;
            }
            if !names_a_person(&normalise(label)) {
                continue;
            }
            // The value ends at a mailbox, a remark or a list separator.
            let after = &cell[colon + 1..];
            let value_end = after.find(['<', '(', ',', '[']).unwrap_or(after.len());
            let value = &after[..value_end];
            let base = start + cell_at + colon + 1;
            if !value.trim().is_empty() {
                if let Some((s, e)) = name_in(value) {
                    out.push(person(base + s, base + e));
                }
                continue;
            }
            // `SHIP TO:` alone on its line: the name is the next line, two words or more.
            if after.trim().is_empty()
                && let Some(&(next_start, next)) = lines.get(n + 1)
                && next.split_whitespace().count() >= 2
                && let Some((s, e)) = name_in(next)
            {
                out.push(person(next_start + s, next_start + e));
            }
        }
    }
}

/// A table line's cells (byte offset in the line, text): split by tabs, pipes or commas (outside
/// double quotes), whichever the line uses.
fn cells(line: &str) -> Option<(char, Vec<(usize, &str)>)> {
    let sep = if line.contains('\t') {
        '\t'
    } else if line.matches('|').count() >= 2 {
        '|'
    } else if line.matches(',').count() >= 2 {
        ','
    } else {
        return None;
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == sep && !(quoted && sep == ',') {
            out.push((start, &line[start..i]));
            start = i + 1;
        }
    }
    out.push((start, &line[start..]));
    Some((sep, out))
}

/// Names in a table's name column: a header line (tab, pipe or comma separated) with a cell such as
/// `Name`, `full_name`, `Employee Name`, and the rows below it with as many cells, up to a blank line
/// or a row of another shape. A Markdown rule line (`|---|---|`) is skipped.
pub fn column_names(text: &str, out: &mut Vec<Entity>) {
    let mut at = 0;
    let lines: Vec<(usize, &str)> = text
        .split('\n')
        .map(|l| {
            let start = at;
            at += l.len() + 1;
            (start, l)
        })
        .collect();
    let mut i = 0;
    while i < lines.len() {
        let Some((sep, header)) = cells(lines[i].1) else {
            i += 1;
            continue;
        };
        let columns: Vec<usize> = header
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| {
                let label = normalise(c.trim().trim_matches('"'));
                !label.is_empty() && label.split(' ').count() <= 3 && names_a_person(&label)
            })
            .map(|(n, _)| n)
            .collect();
        i += 1;
        // Three columns at least: two cells are a label and its value (see `field_names`).
        let filled = header.iter().filter(|(_, c)| !c.trim().is_empty()).count();
        if filled < 3 || columns.is_empty() {
            continue;
        }
        while let Some(&(line_at, line)) = lines.get(i) {
            if line.trim().is_empty() {
                break;
            }
            if line
                .chars()
                .all(|c| matches!(c, '|' | '-' | ':' | '+' | ' ' | '\t' | '='))
            {
                i += 1;
                continue;
            }
            let Some((row_sep, row)) = cells(line) else {
                break;
            };
            if row_sep != sep || row.len() != header.len() {
                break;
            }
            for &n in &columns {
                let (off, cell) = row[n];
                let lead = cell.len() - cell.trim_start().len();
                let inner = cell.trim();
                let (q, inner) = match inner.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                    Some(v) => (1, v),
                    None => (0, inner),
                };
                if let Some((s, e)) = name_in(inner) {
                    let base = line_at + off + lead + q;
                    out.push(person(base + s, base + e));
                }
            }
            i += 1;
        }
    }
}

static MAILBOX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:"(?P<quoted>[^"\n]{2,60})"|(?P<plain>\p{L}[^<>\n:;,"]{1,60}?))[\ \t]*<(?P<local>[^>@\s]+)@[^>\s]+>"#)
        .expect("mailbox pattern compiles")
});

/// Display names of mailboxes (`"Lindqvist, Marta" <m@x.org>`, `Marta Lindqvist <marta.l@x.org>`):
/// a quoted `Family, Given` whose parts are name-shaped, or a name-shaped display name one of whose
/// words (three letters or more) is in the address's local part. A team's mailbox (`Billing
/// Notifications <billing@…>`) names nobody.
pub fn mailbox_names(text: &str, out: &mut Vec<Entity>) {
    if !text.contains('<') {
        return;
    }
    for caps in MAILBOX.captures_iter(text) {
        let local = caps.name("local").map_or("", |m| m.as_str()).to_lowercase();
        if let Some(m) = caps.name("quoted") {
            let inner = m.as_str();
            let parts: Vec<&str> = inner.split(", ").collect();
            let named = match parts.as_slice() {
                [family, given] => name_in(family).is_some() && name_in(given).is_some(),
                _ => name_in(inner).is_some() && shares_word(inner, &local),
            };
            if named {
                out.push(person(m.start(), m.end()));
            }
        } else if let Some(m) = caps.name("plain") {
            // The plain form starts at the line's or the list's last separator.
            let name = m.as_str().trim();
            let start = m.start() + (m.as_str().len() - m.as_str().trim_start().len());
            if (2..=4).contains(&name.split_whitespace().count())
                && name_in(name).is_some()
                && shares_word(name, &local)
            {
                out.push(person(start, start + name.len()));
            }
        }
    }
}

/// Names in parentheses right after a label that introduces a person: `Owner (Maria Lopez)`,
/// `Reviewer (Goran W. Marković): pending`, `Backup owner (Li Jun)`. The label is the one to three
/// words before ` (`; its last word (or the whole) must be a name label (`owner`, `reviewer`,
/// `contact`, `patient`). The parentheses must hold two to five name-shaped words and nothing else,
/// so `Status (internal)` or `Host (Zoom)` are left; `to` and `from` are not labels here (`moved to
/// (Berlin)`).
pub fn paren_names(text: &str, out: &mut Vec<Entity>) {
    for (open, _) in text.match_indices(" (") {
        let inner_start = open + 2;
        let Some(len) = text[inner_start..].find([')', '\n']) else {
            continue;
        };
        if !text[inner_start + len..].starts_with(')') {
            continue;
        }
        let inner = &text[inner_start..inner_start + len];
        if inner.split_whitespace().count() < 2 {
            continue;
        }
        let Some((s, e)) = name_in(inner) else {
            continue;
        };
        // The label: the words before ` (` on the same line, after any `:` or separator.
        let line_start = text[..open]
            .rfind(['\n', ':', '|', '\t', ';', ',', '.'])
            .map_or(0, |i| i + 1);
        let words: Vec<String> = text[line_start..open]
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() {
            continue;
        }
        let last = words[words.len() - 1].as_str();
        if matches!(last, "to" | "from" | "cc" | "bcc") {
            continue;
        }
        let labelled = (1..=words.len().min(3)).any(|n| {
            let label = words[words.len() - n..].join(" ");
            names_a_person(&label) || WEAK_NAME_FIELDS.contains(&label.as_str())
        });
        if labelled {
            out.push(person(inner_start + s, inner_start + e));
        }
    }
}

/// Whether a word of `name` (three letters or more) is in the mailbox's local part.
fn shares_word(name: &str, local: &str) -> bool {
    name.split(|c: char| !c.is_alphabetic())
        .filter(|w| w.chars().count() >= 3)
        .any(|w| local.contains(&w.to_lowercase()))
}

fn person(start: usize, end: usize) -> Entity {
    Entity {
        kind: EntityType::PersonName,
        start,
        end,
        score: RULE_SCORE,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        field_names(text, &mut out);
        out.iter().map(|e| &text[e.start..e.end]).collect()
    }

    #[test]
    fn names_in_a_labels_parentheses() {
        let text = "Owner (Maria Lopez)\nStatus (internal): ok\nReviewer (Goran W. Marković): pending\n\
                    Host (Zoom)\nmoved to (New Town)\nBudget (EUR): 3\nPoint of contact (Li Jun)";
        let mut out = Vec::new();
        paren_names(text, &mut out);
        let got: Vec<&str> = out.iter().map(|e| &text[e.start..e.end]).collect();
        assert_eq!(got, vec!["Maria Lopez", "Goran W. Marković", "Li Jun"]);
    }

    #[test]
    fn name_fields_hold_names() {
        let text = "Full Name: Tomasz W. Kowalczyk\nDate of Birth: 1 May 1990\n\
                    Assignee: Li Jun    Sprint: Heron 7\nReporter: Unassigned\n\
                    Name (as on ID): Oyelaran Adebayo\nEmergency Contact: Ines Duarte (Sister) 0612\n\
                    Company Name: Bright Harbour\nFile name: Report.pdf\n\
                    Last Name: de la Vega\nPatient: 王小明";
        assert_eq!(
            found(text),
            vec![
                "Tomasz W. Kowalczyk",
                "Li Jun",
                "Oyelaran Adebayo",
                "Ines Duarte",
                "王小明"
            ]
        );
    }

    #[test]
    fn a_label_alone_on_its_line_names_the_next() {
        let text = "SHIP TO:\nGRETA HOLMQVIST\n12 BIRCH ROAD\n\nDeliver to:\nFront Desk\nAttn:\nFacilities";
        assert_eq!(found(text), vec!["GRETA HOLMQVIST"]);
        // A tab between a label and its value works like a colon.
        let text = "Employee Name\tIlse Vos\nJob Title\tAnalyst\nReports To\tBram Peeters";
        assert_eq!(found(text), vec!["Ilse Vos"]);
    }

    #[test]
    fn values_that_name_nobody_are_not_names() {
        for text in [
            "Contact Name: Support Team",
            "Host: web-01",
            "Name: quarterly report 2024",
            "Assignee: N/A",
            "Customer Name: Bluewater Logistics",
            "He said: Maria Lopez was late",
        ] {
            assert!(found(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn field_labels_are_not_speakers() {
        for head in [
            "Reporter",
            "Warranty Until",
            "SERVICE",
            "Referring Physician",
            "E-mail",
        ] {
            assert!(is_field_label(head), "{head}");
        }
        for head in ["ravi", "Ana Souza", "Björn"] {
            assert!(!is_field_label(head), "{head}");
        }
    }

    #[test]
    fn non_name_fields_are_known_by_their_label() {
        let text = "Subject: RE: Lunch with Orla\nProduct: Willow Kettle\nSprint: Kestrel 3   \
                    Owner: Orla Byrne\nJob Title: Senior Analyst\nHe wrote: Heron Ridge";
        let at = |w: &str| text.find(w).unwrap();
        assert!(non_name_field(text, at("Orla")));
        assert!(non_name_field(text, at("Willow")));
        assert!(non_name_field(text, at("Kestrel")));
        assert!(!non_name_field(text, at("Orla Byrne")));
        assert!(non_name_field(text, at("Senior")));
        assert!(!non_name_field(text, at("Heron Ridge")));
    }

    #[test]
    fn weak_labels_make_a_cue() {
        let text = "To: Li Jun\nCc: Bo Chen\nStatus: Open\nManager: Ewa";
        let at = |w: &str| text.find(w).unwrap();
        assert!(weak_name_label(text, at("Li Jun")));
        assert!(weak_name_label(text, at("Bo Chen")));
        assert!(!weak_name_label(text, at("Open")));
        assert!(weak_name_label(text, at("Ewa")));
        assert!(!weak_name_label("went to Berlin", 8));
    }

    #[test]
    fn table_name_columns_hold_names() {
        let text = "id,full_name,email,team\n7,Oskar Lindgren,o@x.io,Data Science\n\
                    8,\"Amaka Obi\",a@x.io,Legal\n\n\
                    | Name | Role | Ext |\n|---|---|---|\n| Sven Ek | Paralegal | 12 |\n\
                    | Support Desk | Ops | 14 |\n\n\
                    Product\tOwner\tQty\nWillow Kettle\tHome\t3\n\n\
                    Employee Name\tIlse Vos\nJob Title\tAnalyst";
        let mut out = Vec::new();
        column_names(text, &mut out);
        let got: Vec<&str> = out.iter().map(|e| &text[e.start..e.end]).collect();
        assert_eq!(got, vec!["Oskar Lindgren", "Amaka Obi", "Sven Ek"]);
    }

    #[test]
    fn mailbox_display_names() {
        let text = "From: \"Lindqvist, Marta\" <marta@x.org>\nTo: Oskar Berg <oskar.berg@y.se>; \
                    Billing Notifications <billing@y.se>\nCc: \"Team, Ops\" <ops@y.se>, \
                    Ada Obi <a.o@z.io>";
        let mut out = Vec::new();
        mailbox_names(text, &mut out);
        let got: Vec<&str> = out.iter().map(|e| &text[e.start..e.end]).collect();
        assert_eq!(got, vec!["Lindqvist, Marta", "Oskar Berg"]);
    }

    #[test]
    fn company_and_venue_words_follow_a_name() {
        let text = "Stark Supplies, Everest Room, Marta Lindqvist said, Harborview Consulting GmbH";
        let end = |w: &str| text.find(w).unwrap() + w.len();
        assert!(company_after(text, end("Stark")));
        assert!(company_after(text, end("Everest")));
        assert!(!company_after(text, end("Marta Lindqvist")));
        assert!(company_after(text, end("Harborview")));
    }
}
