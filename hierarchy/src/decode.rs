//! Decoding the positioned tree into typed config values, collecting every problem instead of stopping.
//!
//! Each schema type implements [`Decode`]: given a node and its key path it returns the typed value, or
//! `None` after recording why not. Mappings go through [`Decoder::fields`], which checks the keys against
//! the type's known keys once (unknown keys with a "did you mean", duplicates with the first position), so
//! a schema struct only lists its fields once.
//!
//! Invariant: a `None` is always accompanied by at least one error diagnostic, so an invalid config can
//! never decode silently into defaults.

use std::num::NonZeroU32;
use std::time::Duration;

use indexmap::IndexMap;

use crate::diagnostic::{Diagnostic, Path};
use crate::yaml::{Entry, Node, Value};

/// Collects diagnostics while decoding one document.
#[derive(Debug)]
pub struct Decoder<'d> {
    /// Everything found so far, in discovery order.
    pub diagnostics: Vec<Diagnostic>,
    /// The whole document, to locate keys that are reported only by path.
    doc: &'d Node,
}

/// A type that can be read from a config node.
pub trait Decode: Sized {
    /// Reads `node` (found at `path`), or records why it cannot and returns `None`.
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self>;
}

impl<'d> Decoder<'d> {
    /// A decoder for `doc`.
    pub fn new(doc: &'d Node) -> Self {
        Decoder {
            diagnostics: Vec::new(),
            doc,
        }
    }

    /// Where the key of the entry at `path` is (the mapping's own key, for "missing key" errors).
    pub fn key_span(&self, path: Path<'_>) -> crate::yaml::Span {
        crate::diagnostic::locate(
            self.doc,
            &path.to_key_path(),
            crate::diagnostic::Anchor::Key,
        )
    }

    /// Records a diagnostic.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// Records "expected X, found Y" at `node`, with a hint.
    pub fn type_error(&mut self, node: &Node, path: Path<'_>, expected: &str, hint: &str) {
        self.push(
            Diagnostic::error(
                path,
                node.span,
                format!("expected {expected}, found {}", node.value.kind()),
            )
            .with_hint(hint),
        );
    }

    /// Opens a mapping whose keys must all be in `known`. `null` counts as an empty mapping (so `memory:`
    /// with nothing under it means "all defaults"). Reports unknown and duplicate keys.
    pub fn fields<'n>(
        &mut self,
        node: &'n Node,
        path: Path<'_>,
        known: &[&str],
    ) -> Option<Fields<'n>> {
        let entries = self.unique_entries(node, path)?;
        for entry in &entries {
            if !known.contains(&entry.key.as_str()) {
                let key_path = path.key(&entry.key);
                let mut diagnostic = Diagnostic::error(
                    key_path,
                    entry.key_span,
                    format!("unknown key `{}`", entry.key),
                );
                diagnostic = match (synonym(&entry.key, known), suggest_key(&entry.key, known)) {
                    (Some((suggestion, meaning)), _) => {
                        diagnostic.with_hint(format!("did you mean `{suggestion}`? {meaning}"))
                    }
                    (None, Some(suggestion)) => {
                        diagnostic.with_hint(format!("did you mean `{suggestion}`?"))
                    }
                    (None, None) => {
                        diagnostic.with_hint(format!("known keys here: {}", known.join(", ")))
                    }
                };
                self.push(diagnostic);
            }
        }
        Some(Fields { entries })
    }

    /// The entries of a mapping node with duplicates reported and dropped (the first one counts).
    /// `null` is an empty mapping; anything else that is not a mapping is a type error.
    pub fn unique_entries<'n>(&mut self, node: &'n Node, path: Path<'_>) -> Option<Vec<&'n Entry>> {
        let entries = match &node.value {
            Value::Map(entries) => entries,
            Value::Null => return Some(Vec::new()),
            _ => {
                self.type_error(
                    node,
                    path,
                    "a mapping of `key: value` lines",
                    "indent the keys under this one",
                );
                return None;
            }
        };
        let mut unique: Vec<&Entry> = Vec::with_capacity(entries.len());
        let mut seen: std::collections::HashMap<&str, &Entry> =
            std::collections::HashMap::with_capacity(entries.len());
        for entry in entries {
            match seen.get(entry.key.as_str()) {
                Some(first) => self.push(
                    Diagnostic::error(
                        path.key(&entry.key),
                        entry.key_span,
                        format!(
                            "duplicate key `{}`: it is already defined at line {}",
                            entry.key, first.key_span.line
                        ),
                    )
                    .with_hint("YAML keys must be unique; merge the two entries or rename one"),
                ),
                None => {
                    seen.insert(&entry.key, entry);
                    unique.push(entry);
                }
            }
        }
        Some(unique)
    }

    /// Reads a string that must be one of `words`, with a "did you mean" when it is close to one.
    pub fn keyword<T: Copy>(
        &mut self,
        node: &Node,
        path: Path<'_>,
        words: &[(&'static str, T)],
    ) -> Option<T> {
        // Built only on the error paths: enum values are decoded for every tool of every agent.
        let allowed = || words.iter().map(|(w, _)| *w).collect::<Vec<_>>().join(", ");
        let Value::Str(text) = &node.value else {
            self.type_error(
                node,
                path,
                &format!("one of: {}", allowed()),
                "write one of the allowed words",
            );
            return None;
        };
        if let Some((_, value)) = words.iter().find(|(w, _)| w == text) {
            return Some(*value);
        }
        let hint = match did_you_mean(text, words.iter().map(|(w, _)| *w)) {
            Some(suggestion) => format!("did you mean `{suggestion}`? Allowed: {}", allowed()),
            None => format!("allowed: {}", allowed()),
        };
        self.push(
            Diagnostic::error(path, node.span, format!("unknown value `{text}`")).with_hint(hint),
        );
        None
    }
}

/// The keys of one mapping, already checked for unknown and duplicate keys.
#[derive(Debug)]
pub struct Fields<'n> {
    entries: Vec<&'n Entry>,
}

impl<'n> Fields<'n> {
    /// The node under `key`, treating an explicit `null` as absent.
    pub fn node(&self, key: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| &e.value)
            .filter(|n| n.value != Value::Null)
    }

    /// The entry under `key` (with its key position), `null` included.
    pub fn entry(&self, key: &str) -> Option<&'n Entry> {
        self.entries.iter().copied().find(|e| e.key == key)
    }

    /// An optional value: `None` when absent or invalid (invalid is recorded).
    pub fn optional<T: Decode>(&self, cx: &mut Decoder, path: Path<'_>, key: &str) -> Option<T> {
        let node = self.node(key)?;
        T::decode(node, path.key(key), cx)
    }

    /// A value with a default for when it is absent. When present but invalid the error is recorded and
    /// the default stands in, so later rules can still run.
    pub fn or<T: Decode>(&self, cx: &mut Decoder, path: Path<'_>, key: &str, default: T) -> T {
        self.optional(cx, path, key).unwrap_or(default)
    }

    /// A value with the type's default.
    pub fn or_default<T: Decode + Default>(
        &self,
        cx: &mut Decoder,
        path: Path<'_>,
        key: &str,
    ) -> T {
        self.or(cx, path, key, T::default())
    }

    /// A required value: missing is an error pointing at the mapping (`at`), with `hint`.
    pub fn required<T: Decode>(
        &self,
        cx: &mut Decoder,
        path: Path<'_>,
        at: &Node,
        key: &str,
        hint: &str,
    ) -> Option<T> {
        match self.node(key) {
            Some(node) => T::decode(node, path.key(key), cx),
            None => {
                let span = match self.entry(key) {
                    Some(entry) => entry.key_span,
                    None if matches!(path, Path::Root) => at.span,
                    None => cx.key_span(path),
                };
                cx.push(
                    Diagnostic::error(path, span, format!("missing required key `{key}`"))
                        .with_hint(hint.to_string()),
                );
                None
            }
        }
    }
}

/// Words people write for a key this schema spells differently (`reportsTo:` for `parent:`), as the
/// key meant and what that key says. Compared without case, `_` or `-`; offered only where the key
/// meant is one of the known keys.
const SYNONYMS: &[(&str, &str, &str)] = &[
    (
        "reportsto",
        "parent",
        "An agent names the agent it reports to with `parent:`",
    ),
    (
        "reportto",
        "parent",
        "An agent names the agent it reports to with `parent:`",
    ),
    (
        "manager",
        "parent",
        "An agent names the agent it reports to with `parent:`",
    ),
    (
        "managedby",
        "parent",
        "An agent names the agent it reports to with `parent:`",
    ),
    (
        "boss",
        "parent",
        "An agent names the agent it reports to with `parent:`",
    ),
    (
        "supervisor",
        "parent",
        "An agent names the agent it reports to with `parent:`",
    ),
    (
        "superior",
        "parent",
        "An agent names the agent it reports to with `parent:`",
    ),
    (
        "subordinates",
        "children",
        "A manager lists the agents that report to it with `children:`",
    ),
    (
        "reports",
        "children",
        "A manager lists the agents that report to it with `children:`",
    ),
    (
        "directreports",
        "children",
        "A manager lists the agents that report to it with `children:`",
    ),
    (
        "team",
        "children",
        "A manager lists the agents that report to it with `children:`",
    ),
];

/// The known key `key` is a synonym of, with what that key says (see [`SYNONYMS`]).
fn synonym<'k>(key: &str, known: &[&'k str]) -> Option<(&'k str, &'static str)> {
    let folded: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect();
    SYNONYMS
        .iter()
        .filter(|(word, _, _)| *word == folded)
        .find_map(|(_, meant, meaning)| known.iter().find(|k| *k == meant).map(|k| (*k, *meaning)))
}

/// The known key an unknown `key` most likely stands for: the key it is a synonym of, else the closest
/// one by spelling. The unknown-key diagnostic offers it, and validation uses it to tell which of its
/// own findings that one mistake explains.
pub fn suggest_key<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    synonym(key, known)
        .map(|(meant, _)| meant)
        .or_else(|| did_you_mean(key, known.iter().copied()))
}

/// The closest candidate to `word`, if any is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = word.to_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            let score = if c.to_lowercase() == lower {
                1.0
            } else {
                strsim::jaro_winkler(&lower, &c.to_lowercase())
            };
            (score, c)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

fn scalar_hint(node: &Node) -> &'static str {
    match node.value {
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => "put it in quotes to make it a string",
        Value::Seq(_) => "write a single value, not a list",
        Value::Map(_) => "write a single value, not a mapping",
        _ => "write a value here",
    }
}

impl Decode for String {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            _ => {
                cx.type_error(node, path, "a string", scalar_hint(node));
                None
            }
        }
    }
}

impl Decode for bool {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                cx.type_error(
                    node,
                    path,
                    "true or false",
                    "write true or false without quotes",
                );
                None
            }
        }
    }
}

impl Decode for u32 {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        match node.value {
            Value::Int(i) if i < 0 => {
                cx.push(
                    Diagnostic::error(path, node.span, format!("must not be negative, found {i}"))
                        .with_hint("use a whole number of 0 or more"),
                );
                None
            }
            Value::Int(i) => match u32::try_from(i) {
                Ok(v) => Some(v),
                Err(_) => {
                    cx.push(
                        Diagnostic::error(path, node.span, format!("{i} is too large"))
                            .with_hint(format!("use a whole number up to {}", u32::MAX)),
                    );
                    None
                }
            },
            _ => {
                cx.type_error(
                    node,
                    path,
                    "a whole number",
                    "write digits without quotes, e.g. 10",
                );
                None
            }
        }
    }
}

impl Decode for NonZeroU32 {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        if let Value::Int(i) = node.value
            && i <= 0
        {
            cx.push(
                Diagnostic::error(path, node.span, format!("must be at least 1, found {i}"))
                    .with_hint("a limit of zero or less would block everything; use a positive whole number"),
            );
            return None;
        }
        u32::decode(node, path, cx).and_then(NonZeroU32::new)
    }
}

impl Decode for f64 {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        match node.value {
            Value::Int(i) => Some(i as f64),
            Value::Float(f) if f.is_finite() => Some(f),
            Value::Float(_) => {
                cx.push(
                    Diagnostic::error(path, node.span, "must be a finite number")
                        .with_hint("write a plain number such as 0.85"),
                );
                None
            }
            _ => {
                cx.type_error(
                    node,
                    path,
                    "a number",
                    "write a number without quotes, e.g. 0.85",
                );
                None
            }
        }
    }
}

impl Decode for Duration {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const HINT: &str = "write a number with a unit, e.g. 30s, 5m, 1h30m or 500ms";
        let text = match &node.value {
            Value::Str(s) => s,
            Value::Int(_) | Value::Float(_) => {
                cx.push(
                    Diagnostic::error(path, node.span, "a duration needs a unit").with_hint(HINT),
                );
                return None;
            }
            _ => {
                cx.type_error(node, path, "a duration", HINT);
                return None;
            }
        };
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d.is_zero() => {
                cx.push(
                    Diagnostic::error(path, node.span, "must be longer than zero").with_hint(HINT),
                );
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                cx.push(
                    Diagnostic::error(path, node.span, format!("`{text}` is not a duration ({e})"))
                        .with_hint(HINT),
                );
                None
            }
        }
    }
}

impl<T: Decode> Decode for Vec<T> {
    /// Invalid items are reported and left out; the list itself stays usable.
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        match &node.value {
            Value::Seq(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| T::decode(item, path.index(i), cx))
                    .collect(),
            ),
            Value::Null => Some(Vec::new()),
            _ => {
                cx.type_error(
                    node,
                    path,
                    "a list",
                    "write `[a, b]`, or one `- item` per line",
                );
                None
            }
        }
    }
}

impl<T: Decode> Decode for IndexMap<String, T> {
    /// A mapping with free-form keys (names chosen by the user), in document order.
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let entries = cx.unique_entries(node, path)?;
        let mut map = IndexMap::with_capacity(entries.len());
        for entry in entries {
            if let Some(value) = T::decode(&entry.value, path.key(&entry.key), cx) {
                map.insert(entry.key.clone(), value);
            }
        }
        Some(map)
    }
}

/// Defines a closed set of config words as a Rust enum that decodes with "did you mean" errors.
macro_rules! keywords {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $word:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word that spells this value in `opc.config.yaml`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::decode::Decode for $name {
            fn decode(
                node: &$crate::yaml::Node,
                path: $crate::diagnostic::Path<'_>,
                cx: &mut $crate::decode::Decoder,
            ) -> Option<Self> {
                cx.keyword(node, path, &[$(($word, $name::$variant)),+])
            }
        }
    };
}
pub(crate) use keywords;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse;

    fn decode_field<T: Decode>(yaml: &str) -> (Option<T>, Vec<Diagnostic>) {
        let doc = parse(yaml).expect("valid yaml");
        let mut cx = Decoder::new(&doc);
        let value = doc
            .get("v")
            .and_then(|node| T::decode(node, Path::Root.key("v"), &mut cx));
        (value, cx.diagnostics)
    }

    #[test]
    fn durations_need_units_and_must_be_positive() {
        assert_eq!(
            decode_field::<Duration>("v: 5m").0,
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            decode_field::<Duration>("v: 1h30m").0,
            Some(Duration::from_secs(5400))
        );
        let (value, diags) = decode_field::<Duration>("v: 300");
        assert!(value.is_none());
        assert!(diags[0].message.contains("needs a unit"), "{diags:?}");
        let (_, diags) = decode_field::<Duration>("v: 0s");
        assert!(diags[0].message.contains("longer than zero"), "{diags:?}");
        let (_, diags) = decode_field::<Duration>("v: five minutes");
        assert!(diags[0].message.contains("not a duration"), "{diags:?}");
    }

    #[test]
    fn limits_reject_zero_and_negative() {
        let (_, diags) = decode_field::<NonZeroU32>("v: 0");
        assert!(diags[0].message.contains("at least 1"), "{diags:?}");
        let (_, diags) = decode_field::<NonZeroU32>("v: -4");
        assert!(
            diags[0].message.contains("at least 1, found -4"),
            "{diags:?}"
        );
        let (_, diags) = decode_field::<u32>("v: 99999999999");
        assert!(diags[0].message.contains("too large"), "{diags:?}");
    }

    #[test]
    fn lists_keep_valid_items_and_report_bad_ones() {
        let (value, diags) = decode_field::<Vec<String>>("v: [a, 3, b]");
        assert_eq!(value, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].path, "v[1]");
    }

    #[test]
    fn typos_get_suggestions() {
        assert_eq!(
            did_you_mean("chidren", ["children", "parent"]),
            Some("children")
        );
        assert_eq!(did_you_mean("xyz", ["children", "parent"]), None);
    }
}
