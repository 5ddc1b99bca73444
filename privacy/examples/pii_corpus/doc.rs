//! A labelled document under construction: the text, its gold spans (code points, the config's type
//! names) and the literal fragments the template wrote.
//!
//! Invariants: a span is added only through [`Doc::ent`] (or [`Doc::push`] of a fragment built the same
//! way), so its offsets always cover exactly the value that was appended; spans never overlap and are in
//! text order; the literal fragments are recorded so the tests can check that the tuning and held-out
//! templates share no phrasing.

/// The type names the templates label with: the config's vocabulary, plus `LOCATION`. Every split
/// takes them from here, so a label cannot be misspelt in one split only.
pub mod kind {
    pub const PERSON_NAME: &str = "PERSON_NAME";
    pub const ADDRESS: &str = "ADDRESS";
    pub const LOCATION: &str = "LOCATION";
    pub const PHONE: &str = "PHONE";
    pub const EMAIL: &str = "EMAIL";
    pub const URL: &str = "URL";
    pub const IP_ADDRESS: &str = "IP_ADDRESS";
    pub const CREDIT_CARD: &str = "CREDIT_CARD";
    pub const IBAN: &str = "IBAN";
    pub const SSN: &str = "SSN";
    pub const API_KEY: &str = "API_KEY";
}

/// A gold span: type name and code-point offsets, end exclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub kind: &'static str,
    pub start: usize,
    pub end: usize,
}

/// A document: text, spans, where it came from.
#[derive(Clone, Debug, Default)]
pub struct Doc {
    pub text: String,
    pub spans: Vec<Span>,
    /// Length of `text` in code points (kept so appending stays linear).
    len: usize,
    /// The template, e.g. `tune/email-signature/2`.
    pub template: String,
    /// The literal text the template wrote (everything that is not a value).
    pub literals: Vec<String>,
}

impl Doc {
    pub fn new(template: impl Into<String>) -> Doc {
        Doc {
            template: template.into(),
            ..Doc::default()
        }
    }

    /// Append template text (no personal data in it).
    pub fn lit(&mut self, s: &str) -> &mut Doc {
        if s.is_empty() {
            return self;
        }
        self.text.push_str(s);
        self.len += s.chars().count();
        self.literals.push(s.to_string());
        self
    }

    /// Append a value that is not personal data (an order number, a date, a company): written, not
    /// labelled, and not recorded as template phrasing.
    pub fn val(&mut self, s: &str) -> &mut Doc {
        self.text.push_str(s);
        self.len += s.chars().count();
        self
    }

    /// Append a labelled value of type `kind` (a config type name).
    pub fn ent(&mut self, kind: &'static str, s: &str) -> &mut Doc {
        let start = self.len;
        self.val(s);
        if !s.is_empty() {
            self.spans.push(Span {
                kind,
                start,
                end: self.len,
            });
        }
        self
    }

    /// Append another document (a fragment built the same way), shifting its spans.
    pub fn push(&mut self, other: &Doc) -> &mut Doc {
        let base = self.len;
        self.text.push_str(&other.text);
        self.len += other.len;
        self.spans.extend(other.spans.iter().map(|s| Span {
            kind: s.kind,
            start: s.start + base,
            end: s.end + base,
        }));
        self.literals.extend(other.literals.iter().cloned());
        self
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The JSON line `opc privacy eval` reads.
    pub fn json(&self) -> String {
        let entities: Vec<serde_json::Value> = self
            .spans
            .iter()
            .map(|s| serde_json::json!({"type": s.kind, "start": s.start, "end": s.end}))
            .collect();
        serde_json::json!({"text": self.text, "entities": entities, "id": self.template})
            .to_string()
    }
}
