//! TEMPORARY shim of the privacy crate's API (BRIEF10), so the layer compiles before `detect` and
//! `vault` land on main. Removed at the merge; never shipped.
#![allow(dead_code, missing_docs, clippy::all)]

pub use opc_privacy::detect::NerSlot;
pub use opc_privacy::{Entity, EntityType};

pub mod detect {
    pub use super::{DetectOptions, Detector, NerSlot};
}

pub struct DetectOptions {
    pub types: Vec<EntityType>,
    pub whitelist: Vec<String>,
    pub threshold: f32,
}

pub struct Detector {
    options: DetectOptions,
    ner: NerSlot,
}

impl Detector {
    pub fn new(options: DetectOptions, ner: NerSlot) -> Detector {
        Detector { options, ner }
    }

    /// Emails only (word containing `@` and a dot after it).
    pub fn detect(&self, text: &str) -> Vec<Entity> {
        let mut out = Vec::new();
        if !self.options.types.contains(&EntityType::Email) {
            return out;
        }
        let mut start = None;
        let bytes: Vec<(usize, char)> = text.char_indices().collect();
        let is_word = |c: char| c.is_alphanumeric() || "._%+-@".contains(c);
        let flush = |s: usize, e: usize, out: &mut Vec<Entity>| {
            let w = text[s..e].trim_end_matches('.');
            let e = s + w.len();
            if let Some((user, host)) = w.split_once('@')
                && !user.is_empty()
                && host.contains('.')
                && !self
                    .options
                    .whitelist
                    .iter()
                    .any(|x| x.eq_ignore_ascii_case(w))
            {
                out.push(Entity {
                    kind: EntityType::Email,
                    start: s,
                    end: e,
                    score: 1.0,
                });
            }
        };
        for &(i, c) in &bytes {
            match (start, is_word(c)) {
                (None, true) => start = Some(i),
                (Some(s), false) => {
                    flush(s, i, &mut out);
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            flush(s, text.len(), &mut out);
        }
        out
    }
}
