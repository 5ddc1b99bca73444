//! A positioned YAML tree: every key and value keeps the line and column it came from.
//!
//! Why a tree at all: serde stops at the first error and forgets where values were, but a config checker
//! must report *every* problem at once and point at `agents.vp-eng.children[1]` long after parsing. So the
//! text is parsed once into this tree, and both decoding and the semantic rules read positions from it.
//!
//! The tree is built from the event stream of `granit-parser`, the YAML parser underneath serde-saphyr.
//! serde-saphyr's `Spanned` gave the same positions, but its deserializer layer made a 1,000-agent org
//! take 26 ms to read; the events alone take 9 ms (see docs/config.md, "Why this YAML parser").
//!
//! Invariants:
//! - duplicate keys are kept, in document order, so the decoder can report them instead of silently
//!   keeping one;
//! - no input panics or exhausts the stack or memory: building is iterative, nesting is limited to
//!   [`MAX_DEPTH`], and alias expansion to [`MAX_NODES`] values in total (the "billion laughs" attack);
//! - plain scalars follow the YAML 1.2 core schema (`yes` is a string, not a boolean); quoted scalars are
//!   always strings.

use std::collections::HashMap;
use std::fmt;

use granit_parser::{Event, Parser, ScalarStyle};

/// Deepest nesting of lists and mappings accepted (a real config uses about 6).
pub const MAX_DEPTH: usize = 128;
/// Most values a document may contain once aliases are expanded; the 1,000-agent benchmark org has
/// fewer than 50,000.
pub const MAX_NODES: usize = 500_000;

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
    fn from_parser(span: &granit_parser::Span) -> Self {
        let start = span.start;
        let byte_start = start.byte_offset().unwrap_or(0);
        let byte_end = span.end.byte_offset().unwrap_or(byte_start);
        Span {
            line: u32::try_from(start.line()).unwrap_or(u32::MAX).max(1),
            column: u32::try_from(start.col() + 1).unwrap_or(u32::MAX),
            byte_start,
            byte_len: byte_end.saturating_sub(byte_start),
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

/// Parses YAML text into a positioned tree. An empty document is `Value::Null`; more than one document
/// is an error, since a config is one document.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut builder = Builder::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| SyntaxError {
            message: e.info(),
            span: Span::from_parser(&granit_parser::Span::empty(*e.marker())),
        })?;
        builder.event(event, Span::from_parser(&span))?;
    }
    Ok(builder.root.unwrap_or(Node {
        value: Value::Null,
        span: Span {
            line: 1,
            column: 1,
            ..Span::default()
        },
    }))
}

/// A collection whose end event has not arrived yet.
enum Open {
    Seq {
        items: Vec<Node>,
        span: Span,
        anchor: usize,
    },
    Map {
        entries: Vec<Entry>,
        /// The key waiting for its value.
        key: Option<(String, Span)>,
        /// Values of `<<` merge keys, applied when the mapping closes.
        merges: Vec<Node>,
        span: Span,
        anchor: usize,
    },
}

/// Turns the event stream into a tree with an explicit stack, so nesting depth costs heap, not stack.
#[derive(Default)]
struct Builder {
    open: Vec<Open>,
    root: Option<Node>,
    documents: usize,
    /// Anchored nodes by parser id, with their size for the expansion budget.
    anchors: HashMap<usize, (Node, usize)>,
    nodes: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), SyntaxError> {
        let error = |message: String| Err(SyntaxError { message, span });
        match event {
            Event::DocumentStart(..) => {
                self.documents += 1;
                if self.documents > 1 {
                    return error(
                        "a config is one YAML document, but a second one starts here".into(),
                    );
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value = if style == ScalarStyle::Plain
                    && tag
                        .as_ref()
                        .is_none_or(|t| !t.is_yaml_core_schema_tag("str"))
                {
                    resolve_plain(&text)
                } else {
                    Value::Str(text.into_owned())
                };
                let node = Node { value, span };
                self.count(1, span)?;
                if anchor != 0 {
                    self.anchors.insert(anchor, (node.clone(), 1));
                }
                self.complete(node);
            }
            Event::Alias(id) => {
                let Some(&(_, size)) = self.anchors.get(&id) else {
                    return error("this alias refers to no anchor".into());
                };
                // Budget first, copy second: a billion-laughs document fails before it allocates.
                self.count(size, span)?;
                let Some((node, _)) = self.anchors.get(&id) else {
                    return error("this alias refers to no anchor".into());
                };
                let mut node = node.clone();
                relocate(&mut node, span);
                self.complete(node);
            }
            Event::SequenceStart(_, anchor, _) => {
                self.enter(span)?;
                self.open.push(Open::Seq {
                    items: Vec::new(),
                    span,
                    anchor,
                });
            }
            Event::MappingStart(_, anchor, _) => {
                self.enter(span)?;
                self.open.push(Open::Map {
                    entries: Vec::new(),
                    key: None,
                    merges: Vec::new(),
                    span,
                    anchor,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.open.pop() {
                    Some(Open::Seq {
                        items,
                        span,
                        anchor,
                    }) => (
                        Node {
                            value: Value::Seq(items),
                            span,
                        },
                        anchor,
                    ),
                    Some(Open::Map {
                        mut entries,
                        merges,
                        span,
                        anchor,
                        ..
                    }) => {
                        merge(&mut entries, merges);
                        (
                            Node {
                                value: Value::Map(entries),
                                span,
                            },
                            anchor,
                        )
                    }
                    None => return error("a collection ends here that never started".into()),
                };
                if anchor != 0 {
                    let size = node_count(&node);
                    self.anchors.insert(anchor, (node.clone(), size));
                }
                self.complete(node);
            }
            _ => {}
        }
        Ok(())
    }

    fn enter(&mut self, span: Span) -> Result<(), SyntaxError> {
        self.count(1, span)?;
        if self.open.len() >= MAX_DEPTH {
            return Err(SyntaxError {
                message: format!("nesting is deeper than {MAX_DEPTH} levels"),
                span,
            });
        }
        Ok(())
    }

    fn count(&mut self, nodes: usize, span: Span) -> Result<(), SyntaxError> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                message: format!(
                    "the document expands to more than {MAX_NODES} values (through aliases?)"
                ),
                span,
            });
        }
        Ok(())
    }

    /// Places a finished node: as the document, a list item, a key, or the value of the pending key.
    fn complete(&mut self, node: Node) {
        match self.open.last_mut() {
            None => self.root = Some(node),
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map {
                entries,
                key,
                merges,
                ..
            }) => match key.take() {
                None => *key = Some((key_text(&node.value), node.span)),
                Some((k, _)) if k == "<<" => merges.push(node),
                Some((k, key_span)) => entries.push(Entry {
                    key: k,
                    key_span,
                    value: node,
                }),
            },
        }
    }
}

/// Applies `<<: *defaults` (or a list of them): keys written explicitly win, then earlier merge sources.
fn merge(entries: &mut Vec<Entry>, merges: Vec<Node>) {
    for source in merges {
        let maps: Vec<Node> = match source.value {
            Value::Seq(items) => items,
            _ => vec![source],
        };
        for map in maps {
            if let Value::Map(merged) = map.value {
                for entry in merged {
                    if !entries.iter().any(|e| e.key == entry.key) {
                        entries.push(entry);
                    }
                }
            }
        }
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

/// Gives every node of an alias's copy the alias's position: a problem found in the copy is reported
/// where the alias is used (inside the agent that uses it), not at the anchor in some other agent.
fn relocate(node: &mut Node, span: Span) {
    let mut stack = vec![node];
    while let Some(node) = stack.pop() {
        node.span = span;
        match &mut node.value {
            Value::Seq(items) => stack.extend(items.iter_mut()),
            Value::Map(entries) => {
                for entry in entries.iter_mut() {
                    entry.key_span = span;
                    stack.push(&mut entry.value);
                }
            }
            _ => {}
        }
    }
}

fn node_count(node: &Node) -> usize {
    let mut count = 0;
    let mut stack = vec![node];
    while let Some(node) = stack.pop() {
        count += 1;
        match &node.value {
            Value::Seq(items) => stack.extend(items),
            Value::Map(entries) => stack.extend(entries.iter().map(|e| &e.value)),
            _ => {}
        }
    }
    count
}

/// YAML 1.2 core schema for plain scalars: null, booleans, integers (decimal, 0o, 0x) and floats;
/// everything else is a string. Integers too large for i64 become floats so that the decoder can say
/// "too large" with a position.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let (negative, digits) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let radix = |prefix: &str, radix: u32| {
        let body = text.strip_prefix(prefix)?;
        (!body.is_empty()).then(|| {
            i64::from_str_radix(body, radix).map_or(Value::Str(text.to_string()), Value::Int)
        })
    };
    if let Some(value) = radix("0x", 16).or_else(|| radix("0o", 8)) {
        return value;
    }
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Float(if negative { -1.0 } else { 1.0 } * f64::MAX),
        };
    }
    let float_shaped = digits.bytes().any(|b| b.is_ascii_digit())
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
    match text.parse::<f64>() {
        Ok(f) if float_shaped => Value::Float(f),
        _ => Value::Str(text.to_string()),
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

    #[test]
    fn alias_bombs_stop_at_the_budget_before_allocating() {
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            doc.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let err = parse(&doc).expect_err("expands to 10^12 values");
        assert!(err.message.contains("more than"), "{}", err.message);
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let doc = format!("a: {}", "[".repeat(100_000));
        assert!(parse(&doc).is_err());
        let doc = format!(
            "a: {}1{}",
            "[".repeat(MAX_DEPTH + 5),
            "]".repeat(MAX_DEPTH + 5)
        );
        let err = parse(&doc).expect_err("too deep");
        assert!(err.span.line >= 1);
    }

    #[test]
    fn aliases_merge_keys_and_yaml_1_2_scalars() {
        let doc = parse("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\nflags: [yes, true, 0x1F, 1.5, ~, '7']\n")
            .expect("valid yaml");
        let merged = doc.get("use").expect("use");
        assert_eq!(merged.get("x").map(|n| &n.value), Some(&Value::Int(1)));
        assert_eq!(
            merged.get("y").map(|n| &n.value),
            Some(&Value::Int(3)),
            "explicit keys win"
        );
        assert_eq!(
            merged.get("x").map(|n| n.span.line),
            Some(3),
            "copies point at the alias"
        );
        let flags: Vec<&Value> = (0..6)
            .filter_map(|i| doc.get("flags")?.element(i))
            .map(|n| &n.value)
            .collect();
        assert_eq!(
            flags,
            [
                &Value::Str("yes".into()),
                &Value::Bool(true),
                &Value::Int(31),
                &Value::Float(1.5),
                &Value::Null,
                &Value::Str("7".into())
            ]
        );
    }

    #[test]
    fn a_second_document_is_rejected() {
        let err = parse("a: 1\n---\nb: 2\n").expect_err("two documents");
        assert_eq!(err.span.line, 2);
    }
}
