//! A positioned YAML tree: every key and value keeps the line and column it came from.
//!
//! Why a tree at all: serde stops at the first error and forgets where values were, but a config checker
//! must report *every* problem at once and point at `agents.vp-eng.children[1]` long after parsing. So the
//! text is parsed once by `serde-saphyr` into this tree (through its `Spanned` wrapper, which carries
//! exact locations, also through anchors and aliases), and both decoding and the semantic rules read
//! positions from it.
//!
//! Invariants: duplicate keys are kept (in document order) so that the decoder can report them instead of
//! silently keeping one; parsing never panics on any input (serde-saphyr is fuzzed for that, and budgets
//! bound nesting and size).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{Location, Spanned};

/// Where something is in the source text. Lines and columns are 1-based and count characters, as an
/// editor does; the byte range is what snippet rendering underlines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// 1-based line number.
    pub line: u32,
    /// 1-based column number, in characters.
    pub column: u32,
    /// Byte offset of the first byte in the source.
    pub byte_start: usize,
    /// Length in bytes (0 for an empty or implicit value).
    pub byte_len: usize,
}

impl Span {
    fn from_location(location: &Location) -> Self {
        let span = location.span();
        Span {
            line: u32::try_from(location.line()).unwrap_or(u32::MAX).max(1),
            column: u32::try_from(location.column()).unwrap_or(u32::MAX).max(1),
            byte_start: span
                .byte_offset()
                .and_then(|b| usize::try_from(b).ok())
                .unwrap_or(0),
            byte_len: span
                .byte_len()
                .and_then(|b| usize::try_from(b).ok())
                .unwrap_or(0),
        }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A YAML value with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Where the value starts (for an alias: where the alias is used).
    pub span: Span,
}

/// One `key: value` pair of a mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The key as text (non-string scalar keys are kept as their text form).
    pub key: String,
    /// Where the key is.
    pub key_span: Span,
    /// The value.
    pub value: Node,
}

/// The kinds of YAML value the config can contain.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `~`, `null` or an empty value.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence, in order.
    Seq(Vec<Node>),
    /// A mapping, in document order, duplicates kept.
    Map(Vec<Entry>),
}

impl Value {
    /// The kind of value, as a user would name it in an error message ("found a list").
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "a whole number",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl Node {
    /// The entries of a mapping, or `None` for any other kind of value.
    pub fn entries(&self) -> Option<&[Entry]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The first entry with this key, if this is a mapping that has it.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries()?.iter().find(|e| e.key == key)
    }

    /// The value under `key`, if this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }

    /// The `index`-th element, if this is a sequence that long.
    pub fn element(&self, index: usize) -> Option<&Node> {
        match &self.value {
            Value::Seq(items) => items.get(index),
            _ => None,
        }
    }
}

/// A YAML syntax error: the document could not be read as YAML at all.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntaxError {
    /// What the parser says is wrong, without position or snippet.
    pub message: String,
    /// Where the parser stopped.
    pub span: Span,
}

/// Parses YAML text into a positioned tree. An empty document is `Value::Null`.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::PassThrough,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options::<Node>(text, options).map_err(|error| {
        let span = error
            .location()
            .map(|l| Span::from_location(&l))
            .unwrap_or(Span {
                line: 1,
                column: 1,
                ..Span::default()
            });
        SyntaxError {
            message: bare_message(&error.to_string()),
            span,
        }
    })
}

/// serde-saphyr's message with its own "error: line N column M:" prefix removed: we print positions
/// ourselves, in the same `file:line:column` form as every other diagnostic.
fn bare_message(rendered: &str) -> String {
    let first_line = rendered.lines().next().unwrap_or(rendered).trim();
    let without_error = first_line
        .strip_prefix("error:")
        .unwrap_or(first_line)
        .trim_start();
    match without_error.strip_prefix("line ") {
        Some(rest) => match rest.split_once(": ") {
            Some((position, message)) if position.contains("column") => message.to_string(),
            _ => without_error.to_string(),
        },
        None => without_error.to_string(),
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        Ok(Node {
            value: spanned.value,
            span: Span::from_location(&spanned.referenced),
        })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        // Beyond i64 nothing in the config makes sense; keep it as a float so the decoder reports
        // "out of range" with the position instead of the parser failing without one.
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_bytes<E>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::Str(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(key) = map.next_key::<Node>()? {
            let value = map.next_value::<Node>()?;
            entries.push(Entry {
                key: key_text(&key.value),
                key_span: key.span,
                value,
            });
        }
        Ok(Value::Map(entries))
    }
}

/// Mapping keys are compared as text; a non-string key (`1: x`, `true: y`) keeps its text form so that
/// the decoder can still name it in "unknown key" errors.
fn key_text(value: &Value) -> String {
    match value {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "~".to_string(),
        Value::Seq(_) | Value::Map(_) => format!("<{}>", value.kind()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_positions_of_keys_values_and_duplicates() {
        let doc = parse("a: 1\nb:\n  - x\n  - 5m\na: again\n").expect("valid yaml");
        let entries = doc.entries().expect("mapping");
        assert_eq!(entries.len(), 3, "duplicate key kept");
        assert_eq!(entries[2].key, "a");
        assert_eq!(
            (entries[2].key_span.line, entries[2].key_span.column),
            (5, 1)
        );
        let second = doc.get("b").and_then(|b| b.element(1)).expect("b[1]");
        assert_eq!(second.value, Value::Str("5m".into()));
        assert_eq!((second.span.line, second.span.column), (4, 5));
    }

    #[test]
    fn syntax_error_has_position_and_bare_message() {
        let err = parse("a: [1, 2\nb: 3").expect_err("unclosed flow list");
        assert_eq!(err.span.line, 2);
        assert!(!err.message.contains("line 2"), "{}", err.message);
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse("").expect("empty is fine").value, Value::Null);
    }
}
