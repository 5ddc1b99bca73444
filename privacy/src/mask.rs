//! Masking: detected spans replaced by their substitutes, plus a sweep for values the vault already
//! knows, and the counts by type that go to the ledger and the event bus (never the values).
//!
//! Invariants:
//! - every span the detector reported is replaced (overlapping spans are merged, so nothing between
//!   them survives); spans that are not on `char` boundaries or out of range are a detector bug and are
//!   ignored rather than panicking;
//! - the text between spans is swept for real values the vault already holds (found earlier in the
//!   conversation, possibly by another agent): a name detected once is masked wherever it appears on
//!   its own, even where the detector missed it this time. The sweep follows the egress guard's rules
//!   (see `guard.rs`), so what `mask` produces passes the guard;
//! - `Counts` counts replaced occurrences per type.

use std::fmt;
use std::sync::Arc;

use crate::entity::{Entity, EntityType};
use crate::guard::GuardIndex;
use crate::vault::{Vault, VaultFull};

/// Replaced occurrences by type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts([u32; EntityType::ALL.len()]);

impl Counts {
    /// The count for `kind`.
    pub fn get(&self, kind: EntityType) -> u32 {
        self.0[kind as usize]
    }

    /// Count one more `kind`.
    pub fn add(&mut self, kind: EntityType) {
        self.0[kind as usize] += 1;
    }

    /// Add another text's counts (a call masks many texts).
    pub fn merge(&mut self, other: &Counts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// All occurrences.
    pub fn total(&self) -> u32 {
        self.0.iter().sum()
    }

    /// Whether nothing was masked.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The non-zero counts, in the config's order of types.
    pub fn iter(&self) -> impl Iterator<Item = (EntityType, u32)> + '_ {
        EntityType::ALL
            .into_iter()
            .map(|t| (t, self.get(t)))
            .filter(|&(_, n)| n > 0)
    }
}

impl fmt::Display for Counts {
    /// `PERSON_NAME 2, EMAIL 1` (empty when nothing was masked).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (kind, n)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{kind} {n}")?;
        }
        Ok(())
    }
}

/// A masked text and what was masked in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Masked {
    /// The text with substitutes in place of the real values.
    pub text: String,
    /// Replaced occurrences by type.
    pub counts: Counts,
}

/// Valid spans of `entities` in `text`, sorted, overlaps merged into one span (typed by the first).
fn spans(text: &str, entities: &[Entity]) -> Vec<(usize, usize, EntityType)> {
    let mut spans: Vec<(usize, usize, EntityType)> = entities
        .iter()
        .filter(|e| {
            e.start < e.end
                && e.end <= text.len()
                && text.is_char_boundary(e.start)
                && text.is_char_boundary(e.end)
        })
        .map(|e| (e.start, e.end, e.kind))
        .collect();
    spans.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
    let mut merged: Vec<(usize, usize, EntityType)> = Vec::with_capacity(spans.len());
    for (start, end, kind) in spans {
        match merged.last_mut() {
            Some(last) if start < last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end, kind)),
        }
    }
    merged
}

/// A text's spans and their substitutes, before the sweep.
struct Planned {
    spans: Vec<(usize, usize, EntityType)>,
    subs: Vec<Arc<str>>,
}

impl Vault {
    /// Mask `text` given its detected entities (byte spans); returns the masked text and counts by
    /// type. Fails when the vault cannot take a new value; the caller then fails the call closed.
    pub fn mask(&mut self, text: &str, entities: &[Entity]) -> Result<Masked, VaultFull> {
        let mut masked = self.mask_batch(&[(text, entities)])?;
        Ok(masked.pop().unwrap_or_else(|| Masked {
            text: text.to_string(),
            counts: Counts::default(),
        }))
    }

    /// Mask several texts (one request's system prompt, messages and tool parts) at once: the same as
    /// [`Vault::mask`] on each, but the sweep's index is rebuilt at most once for the batch rather than
    /// once per text that brought a new value.
    pub fn mask_batch(&mut self, items: &[(&str, &[Entity])]) -> Result<Vec<Masked>, VaultFull> {
        let mut planned = Vec::with_capacity(items.len());
        for (text, entities) in items {
            let spans = spans(text, entities);
            let mut subs = Vec::with_capacity(spans.len());
            for &(start, end, kind) in &spans {
                subs.push(self.substitute_arc(&text[start..end], kind)?);
            }
            planned.push(Planned { spans, subs });
        }
        if self.is_empty() {
            return Ok(items
                .iter()
                .map(|(text, _)| Masked {
                    text: text.to_string(),
                    counts: Counts::default(),
                })
                .collect());
        }
        let guard = self.guard_index();
        Ok(items
            .iter()
            .zip(planned)
            .map(|((text, _), plan)| render(text, &plan, &guard))
            .collect())
    }
}

/// The masked text: planned spans replaced, the gaps between them swept for known values.
fn render(text: &str, plan: &Planned, guard: &GuardIndex) -> Masked {
    let mut counts = Counts::default();
    let mut out = String::with_capacity(text.len() + 16);
    let mut cursor = 0;
    let sweep_to = |out: &mut String, counts: &mut Counts, from: usize, to: usize| {
        let mut last = from;
        for found in guard.sweep(text, from..to) {
            out.push_str(&text[last..found.start]);
            out.push_str(&found.replacement);
            counts.add(found.kind);
            last = found.end;
        }
        out.push_str(&text[last..to]);
    };
    for (&(start, end, kind), sub) in plan.spans.iter().zip(&plan.subs) {
        sweep_to(&mut out, &mut counts, cursor, start);
        out.push_str(sub);
        counts.add(kind);
        cursor = end;
    }
    sweep_to(&mut out, &mut counts, cursor, text.len());
    Masked { text: out, counts }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::vault::Style;

    use super::*;

    fn entity(text: &str, value: &str, kind: EntityType) -> Entity {
        let start = text.find(value).unwrap_or(0);
        Entity {
            kind,
            start,
            end: start + value.len(),
            score: 1.0,
        }
    }

    #[test]
    fn counts_display_and_total() {
        let mut c = Counts::default();
        assert_eq!(c.to_string(), "");
        c.add(EntityType::Email);
        c.add(EntityType::PersonName);
        c.add(EntityType::PersonName);
        assert_eq!(c.to_string(), "PERSON_NAME 2, EMAIL 1");
        assert_eq!(c.total(), 3);
        let mut d = Counts::default();
        d.add(EntityType::Iban);
        d.merge(&c);
        assert_eq!(d.to_string(), "PERSON_NAME 2, EMAIL 1, IBAN 1");
    }

    #[test]
    fn masks_spans_and_restores_them() {
        let mut v = Vault::new(2, Style::Fake, 100);
        let text = "Alice Jones <alice@corp.io> wrote to Bob.";
        let ents = [
            entity(text, "Alice Jones", EntityType::PersonName),
            entity(text, "alice@corp.io", EntityType::Email),
            entity(text, "Bob", EntityType::PersonName),
        ];
        let masked = v.mask(text, &ents).unwrap();
        assert!(
            !masked.text.contains("Alice")
                && !masked.text.contains("alice@")
                && !masked.text.contains("Bob")
        );
        assert_eq!(masked.counts.to_string(), "PERSON_NAME 2, EMAIL 1");
        assert_eq!(v.restore(&masked.text), text);
        assert_eq!(v.leak_in(&masked.text), None);
    }

    #[test]
    fn sweeps_known_values_the_detector_missed() {
        let mut v = Vault::new(2, Style::Fake, 100);
        let first = "Ask Alice Jones.";
        v.mask(
            first,
            &[entity(first, "Alice Jones", EntityType::PersonName)],
        )
        .unwrap();
        // The detector found nothing this time; the vault still knows the name.
        let later = "Alice Jones said the Annual report is late; alice Jones too.";
        let masked = v.mask(later, &[]).unwrap();
        assert!(!masked.text.contains("Alice Jones"), "{}", masked.text);
        assert!(
            masked.text.contains("alice Jones"),
            "case matters: {}",
            masked.text
        );
        assert_eq!(masked.counts.to_string(), "PERSON_NAME 1");
        assert_eq!(v.restore(&masked.text), later);
    }

    #[test]
    fn overlapping_and_invalid_spans() {
        let mut v = Vault::new(2, Style::Placeholder, 100);
        let text = "née Zoë Smith-Jones";
        let zoe = text.find("Zoë").unwrap_or(0);
        let ents = [
            Entity {
                kind: EntityType::PersonName,
                start: zoe,
                end: zoe + "Zoë Smith".len(),
                score: 0.9,
            },
            Entity {
                kind: EntityType::PersonName,
                start: zoe + "Zoë ".len(),
                end: text.len(),
                score: 0.9,
            },
            // Inside the 'ë' (not a char boundary), and out of range: ignored.
            Entity {
                kind: EntityType::Email,
                start: zoe + 3,
                end: zoe + 5,
                score: 0.9,
            },
            Entity {
                kind: EntityType::Email,
                start: 2,
                end: 999,
                score: 0.9,
            },
        ];
        let masked = v.mask(text, &ents).unwrap();
        assert_eq!(masked.text, "née [PERSON_NAME_1]");
        assert_eq!(v.restore(&masked.text), text);
    }

    #[test]
    fn a_batch_masks_like_one_text_at_a_time() {
        let texts = [
            "Alice Jones wrote",
            "to alice@corp.io",
            "and Alice Jones again, Bob too",
        ];
        let ents: Vec<Vec<Entity>> = vec![
            vec![entity(texts[0], "Alice Jones", EntityType::PersonName)],
            vec![entity(texts[1], "alice@corp.io", EntityType::Email)],
            vec![entity(texts[2], "Bob", EntityType::PersonName)],
        ];
        let mut one = Vault::new(4, Style::Fake, 100);
        let singles: Vec<Masked> = texts
            .iter()
            .zip(&ents)
            .map(|(t, e)| one.mask(t, e).unwrap())
            .collect();
        let mut batch = Vault::new(4, Style::Fake, 100);
        let items: Vec<(&str, &[Entity])> = texts
            .iter()
            .zip(&ents)
            .map(|(t, e)| (*t, e.as_slice()))
            .collect();
        assert_eq!(batch.mask_batch(&items).unwrap(), singles);
        // The third text's second "Alice Jones" was swept (the detector only reported Bob).
        assert_eq!(singles[2].counts.to_string(), "PERSON_NAME 2");
    }

    #[test]
    fn vault_full_fails_the_mask() {
        let mut v = Vault::new(2, Style::Fake, 1);
        let text = "a@x.io b@x.io";
        let ents = [
            entity(text, "a@x.io", EntityType::Email),
            entity(text, "b@x.io", EntityType::Email),
        ];
        assert!(v.mask(text, &ents).is_err());
    }
}
