//! Diagnostics: what is wrong, where (file:line:column and the key path), and how to fix it.
//!
//! Every problem the loader finds becomes one [`Diagnostic`]; none stops the others from being found. A
//! diagnostic always has a position: problems found on the typed config are located by walking the
//! positioned tree along their key path (see [`KeyPath`]).

use std::fmt;

use serde::Serialize;

use crate::yaml::{Node, Span, Value};

/// How serious a diagnostic is: errors make the config invalid, warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The config cannot be used.
    Error,
    /// The config works, but probably not as intended.
    Warning,
}

/// One problem in a config file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The key path of the offending value, e.g. `agents.vp-eng.children[1]` (empty for the document).
    pub path: String,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
    /// Where it is.
    #[serde(flatten)]
    pub span: SpanJson,
}

/// The position fields of a diagnostic as they appear in JSON output.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SpanJson {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    #[serde(skip)]
    pub(crate) byte_start: usize,
    #[serde(skip)]
    pub(crate) byte_len: usize,
}

impl From<Span> for SpanJson {
    fn from(span: Span) -> Self {
        SpanJson {
            line: span.line,
            column: span.column,
            byte_start: span.byte_start,
            byte_len: span.byte_len,
        }
    }
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(path: impl fmt::Display, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            path: path.to_string(),
            message: message.into(),
            hint: None,
            span: span.into(),
        }
    }

    /// A warning at `span`.
    pub fn warning(path: impl fmt::Display, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(path, span, message)
        }
    }

    /// Adds how to fix it.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Masks any credential in the message, hint or path (see `secrets::mask`), so that printing a
    /// diagnostic, in any format, never prints a pasted secret in full.
    pub(crate) fn mask_secrets(&mut self) {
        for text in [&mut self.message, &mut self.path]
            .into_iter()
            .chain(self.hint.as_mut())
        {
            if let std::borrow::Cow::Owned(masked) = crate::secrets::mask(text) {
                *text = masked;
            }
        }
    }

    /// 1-based line.
    pub fn line(&self) -> u32 {
        self.span.line
    }

    /// 1-based column.
    pub fn column(&self) -> u32 {
        self.span.column
    }

    /// Whether this is an error (not a warning).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// `line:column: error: path: message (hint: …)` — the file name is the caller's to prepend.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{}:{}: {severity}: ", self.span.line, self.span.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// An owned key path such as `agents.vp-eng.children[1]`, used to locate problems found after decoding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Segment>);

impl KeyPath {
    /// The path with one more key.
    pub fn key(&self, key: impl Into<String>) -> KeyPath {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.into()));
        KeyPath(segments)
    }

    /// The path with one more index.
    pub fn index(&self, index: usize) -> KeyPath {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        KeyPath(segments)
    }

    /// Builds a path from keys, e.g. `KeyPath::of(["agents", "ceo", "tools"])`.
    pub fn of<'a>(keys: impl IntoIterator<Item = &'a str>) -> KeyPath {
        KeyPath(
            keys.into_iter()
                .map(|k| Segment::Key(k.to_string()))
                .collect(),
        )
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) => write_key(f, key, i == 0)?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// Which part of a `key: value` entry a position refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// The key (`vp-eng:`) — for problems with the entry as a whole, such as a missing key inside it.
    Key,
    /// The value — for problems with what was written.
    Value,
}

/// The position of `path` in `doc`: the deepest part of the path that exists. An empty value has no
/// text of its own, so it is located at its key.
pub fn locate(doc: &Node, path: &KeyPath, anchor: Anchor) -> Span {
    let mut node = doc;
    let mut span = doc.span;
    for (i, segment) in path.0.iter().enumerate() {
        let last = i + 1 == path.0.len();
        match segment {
            Segment::Key(key) => match node.entry(key) {
                Some(entry) => {
                    span = if last && anchor == Anchor::Key {
                        entry.key_span
                    } else {
                        entry.value.span
                    };
                    if entry.value.value == Value::Null && span.byte_len == 0 {
                        span = entry.key_span;
                    }
                    node = &entry.value;
                }
                None => break,
            },
            Segment::Index(index) => match node.element(*index) {
                Some(element) => {
                    span = element.span;
                    node = element;
                }
                None => break,
            },
        }
    }
    span
}

/// A borrowed key path built on the stack while decoding: no allocation unless a diagnostic needs it.
#[derive(Clone, Copy, Debug)]
pub enum Path<'a> {
    /// The document root.
    Root,
    /// `parent.key`
    Key(&'a Path<'a>, &'a str),
    /// `parent[index]`
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    /// The path one key deeper.
    pub fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }

    /// The path one index deeper.
    pub fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }

    /// The owned form, root first.
    pub fn to_key_path(&self) -> KeyPath {
        let mut segments = Vec::new();
        let mut current = self;
        loop {
            match current {
                Path::Root => break,
                Path::Key(parent, key) => {
                    segments.push(Segment::Key((*key).to_string()));
                    current = parent;
                }
                Path::Index(parent, index) => {
                    segments.push(Segment::Index(*index));
                    current = parent;
                }
            }
        }
        segments.reverse();
        KeyPath(segments)
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(parent, key) => {
                parent.fmt(f)?;
                write_key(f, key, matches!(parent, Path::Root))
            }
            Path::Index(parent, index) => {
                parent.fmt(f)?;
                write!(f, "[{index}]")
            }
        }
    }
}

/// Plain keys print as `a.b`; a key with dots, spaces or other punctuation prints quoted, `a["b.c"]`, so
/// the path stays unambiguous.
fn write_key(f: &mut fmt::Formatter<'_>, key: &str, first: bool) -> fmt::Result {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    match (plain, first) {
        (true, true) => f.write_str(key),
        (true, false) => write!(f, ".{key}"),
        (false, _) => write!(f, "[{key:?}]"),
    }
}

/// Renders diagnostics for a terminal: the one-line form followed by the source line with the offending
/// span underlined, as compilers do. `origin` is the file name shown to the user.
pub fn render(origin: &str, source: &str, diagnostics: &[Diagnostic], color: bool) -> String {
    use annotate_snippets::{AnnotationKind, Level, Renderer, Snippet};

    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let mut out = String::new();
    for diagnostic in diagnostics {
        let title = if diagnostic.path.is_empty() {
            diagnostic.message.clone()
        } else {
            format!("{}: {}", diagnostic.path, diagnostic.message)
        };
        let level = match diagnostic.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let range = underline_range(source, &diagnostic.span);
        let mut group = level.primary_title(&title).element(
            Snippet::source(source)
                .path(origin)
                .annotation(AnnotationKind::Primary.span(range)),
        );
        if let Some(hint) = &diagnostic.hint {
            group = group.element(Level::HELP.message(hint.as_str()));
        }
        out.push_str(&renderer.render(&[group]));
        out.push_str("\n\n");
    }
    out
}

/// The byte range to underline: the value's own bytes, or one character at its position when the value is
/// empty or implicit; always clamped to character boundaries of `source`.
fn underline_range(source: &str, span: &SpanJson) -> std::ops::Range<usize> {
    let start = floor_char_boundary(source, span.byte_start.min(source.len()));
    let mut end = floor_char_boundary(source, (span.byte_start + span.byte_len).min(source.len()));
    if end <= start {
        end = source[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8());
    }
    // Underline within one line: multi-line values are marked by their first line.
    if let Some(newline) = source[start..end].find('\n') {
        end = (start + newline).max(start);
    }
    start..end
}

fn floor_char_boundary(s: &str, mut index: usize) -> usize {
    while index > 0 && !s.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_like_the_docs_say() {
        let root = Path::Root;
        let agents = root.key("agents");
        let agent = agents.key("vp-eng");
        let children = agent.key("children");
        assert_eq!(children.index(1).to_string(), "agents.vp-eng.children[1]");
        let odd = agents.key("my.agent");
        assert_eq!(odd.to_string(), "agents[\"my.agent\"]");
        assert_eq!(
            KeyPath::of(["agents", "ceo"]).index(0).to_string(),
            "agents.ceo[0]"
        );
    }

    #[test]
    fn render_survives_spans_past_the_end_and_inside_characters() {
        let diagnostic = Diagnostic::error(
            "x",
            Span {
                line: 1,
                column: 2,
                byte_start: 2,
                byte_len: 99,
            },
            "boom",
        )
        .with_hint("fix it");
        let text = render("c.yaml", "é: ü\n", &[diagnostic], false);
        assert!(text.contains("c.yaml"), "{text}");
        assert!(text.contains("fix it"), "{text}");
    }
}
