//! TEMPORARY shim of the privacy crate's API (BRIEF10), so the layer compiles before `detect` and
//! `vault` land on main. Removed at the merge; never shipped.
#![allow(dead_code, missing_docs, clippy::all)]

use std::borrow::Cow;
use std::fmt;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Style {
    #[default]
    Fake,
    Placeholder,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VaultFull {
    pub capacity: usize,
    pub kind: EntityType,
}

impl fmt::Display for VaultFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the privacy vault is full")
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts([u32; 10]);

impl Counts {
    pub fn get(&self, kind: EntityType) -> u32 {
        self.0[kind as usize]
    }
    pub fn add(&mut self, kind: EntityType) {
        self.0[kind as usize] += 1;
    }
    pub fn merge(&mut self, other: &Counts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
    pub fn total(&self) -> u32 {
        self.0.iter().sum()
    }
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = (EntityType, u32)> + '_ {
        EntityType::ALL
            .into_iter()
            .map(|t| (t, self.get(t)))
            .filter(|&(_, n)| n > 0)
    }
}

pub struct Masked {
    pub text: String,
    pub counts: Counts,
}

pub struct Vault {
    style: Style,
    capacity: usize,
    pairs: Vec<(String, String, EntityType)>,
}

impl Vault {
    pub fn new(_seed: u64, style: Style, capacity: usize) -> Vault {
        Vault {
            style,
            capacity,
            pairs: Vec::new(),
        }
    }
    pub fn substitute(&mut self, real: &str, kind: EntityType) -> Result<String, VaultFull> {
        if let Some((_, f, _)) = self.pairs.iter().find(|(r, _, _)| r == real) {
            return Ok(f.clone());
        }
        if self.pairs.len() >= self.capacity {
            return Err(VaultFull {
                capacity: self.capacity,
                kind,
            });
        }
        let n = self.pairs.len() + 1;
        let fake = match self.style {
            Style::Fake => format!("user{n}x@example.net"),
            Style::Placeholder => format!("[{kind}_{n}]"),
        };
        self.pairs.push((real.to_string(), fake.clone(), kind));
        Ok(fake)
    }
    pub fn mask(&mut self, text: &str, entities: &[Entity]) -> Result<Masked, VaultFull> {
        let mut out = String::new();
        let mut counts = Counts::default();
        let mut at = 0;
        for e in entities {
            out.push_str(&text[at..e.start]);
            out.push_str(&self.substitute(&text[e.start..e.end], e.kind)?);
            counts.add(e.kind);
            at = e.end;
        }
        out.push_str(&text[at..]);
        // sweep known values
        for (real, fake, kind) in &self.pairs {
            let n = out.matches(real.as_str()).count();
            if n > 0 {
                out = out.replace(real.as_str(), fake);
                for _ in 0..n {
                    counts.add(*kind);
                }
            }
        }
        Ok(Masked { text: out, counts })
    }
    pub fn restore<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut pairs: Vec<&(String, String, EntityType)> = self.pairs.iter().collect();
        pairs.sort_by_key(|p| std::cmp::Reverse(p.1.len()));
        let mut out = Cow::Borrowed(text);
        for (real, fake, _) in pairs {
            if out.contains(fake.as_str()) {
                out = Cow::Owned(out.replace(fake.as_str(), real));
            }
        }
        out
    }
    pub fn leak_in(&self, payload: &str) -> Option<EntityType> {
        self.pairs
            .iter()
            .find(|(r, _, _)| payload.contains(r.as_str()))
            .map(|p| p.2)
    }
    pub fn len(&self) -> usize {
        self.pairs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
    fn fakes(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|p| p.1.as_str())
    }
}

#[derive(Default)]
pub struct StreamRestorer {
    held: String,
}

impl StreamRestorer {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(&mut self, vault: &Vault, delta: &str) -> String {
        self.held.push_str(delta);
        // hold back the longest suffix that is a proper prefix of a fake
        let mut keep = 0;
        for fake in vault.fakes() {
            for k in (1..fake.len()).rev() {
                if k <= self.held.len()
                    && self.held.is_char_boundary(self.held.len() - k)
                    && fake.starts_with(&self.held[self.held.len() - k..])
                {
                    keep = keep.max(k);
                    break;
                }
            }
        }
        let cut = self.held.len() - keep;
        let ready: String = self.held[..cut].to_string();
        self.held = self.held[cut..].to_string();
        vault.restore(&ready).into_owned()
    }
    pub fn finish(&mut self, vault: &Vault) -> String {
        let rest = std::mem::take(&mut self.held);
        vault.restore(&rest).into_owned()
    }
    pub fn reset(&mut self) {
        self.held.clear();
    }
}

pub struct Conversation {
    vault: Vault,
}

impl Conversation {
    pub fn new(seed: u64, style: Style, capacity: usize) -> Self {
        Conversation {
            vault: Vault::new(seed, style, capacity),
        }
    }
    pub fn vault(&self) -> &Vault {
        &self.vault
    }
    pub fn mask_text(
        &mut self,
        detect: &dyn Fn(&str) -> Vec<Entity>,
        text: &str,
    ) -> Result<Masked, VaultFull> {
        let entities = detect(text);
        self.vault.mask(text, &entities)
    }
}
