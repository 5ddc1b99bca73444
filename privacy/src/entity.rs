//! What a detector finds: a typed span of personal data in a text.
//!
//! Invariants:
//! - `start..end` are **byte** offsets into the text the entity was found in, on `char` boundaries
//!   (callers that need code points, such as `opc privacy detect`, convert at the edge);
//! - the vocabulary of [`EntityType`] is the config's (`PERSON_NAME`, `EMAIL`, …), so a type name printed
//!   anywhere can be pasted into `framework.privacy.detectTypes`. The type itself lives in `opc-shapes`,
//!   the dependency-free crate the config validator shares with this one.

pub use opc_shapes::EntityType;

/// One detected span.
#[derive(Clone, Debug, PartialEq)]
pub struct Entity {
    /// Its type.
    pub kind: EntityType,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
    /// Confidence, 0 to 1, after context words were applied.
    pub score: f32,
}

impl Entity {
    /// The span's text in `text` (the text it was found in).
    pub fn text<'a>(&self, text: &'a str) -> &'a str {
        &text[self.start..self.end]
    }
}
