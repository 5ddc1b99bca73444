//! Masking texts before they are embedded remotely ([`EmbedMasker`]): the privacy gateway's detector
//! finds the personal data, and each real value is replaced by a fake that is a function of the
//! value alone, so the same person embeds the same way in every row, every query, every process.
//!
//! Why not the model calls' vault: a conversation's vault draws its fakes from a random seed in the
//! order values arrive, and lives as long as the conversation. A stored vector outlives both: the
//! query "what did Maria say" next week must meet Maria's rows embedded today, so her fake must be
//! the same then. Here the fake of a value is drawn from a generator seeded by a keyed hash of
//! (type, value) — a [`Vault`] of one value, so fakes keep the shapes the gateway gives them (a name
//! for a name, an address for an address) and the mode's style (`redact` gives typed placeholders).
//! The key is a secret kept beside the database: without it, the endpoint cannot test a guess
//! ("is this fake what `Maria Lopez` becomes?").
//!
//! Invariants:
//! - nothing is masked before the NER gate allows it: while a required NER model is not in, masking
//!   returns [`NotReady`] and the caller sends nothing (rows wait, they are embedded later);
//! - every occurrence of a value detected anywhere in the batch is replaced in every text of the
//!   batch (standalone occurrences, as the vault sweeps), and no fake equals a real value of the
//!   batch, so [`Masked::leak_in`] can check the exact bytes sent for every real value;
//! - values never leave this module except as counts by type; nothing here logs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opc_privacy::detect::Detector;
use opc_privacy::{Counts, EntityType, Style, Vault};
use sha2::{Digest, Sha256};

use crate::llm::privacy::{NerGate, PrivacyReport, TypeCounts};

/// Fakes remembered per masker; past it the memory is cleared (fakes are recomputed, identically).
const REMEMBERED: usize = 50_000;
/// Draws at a fake that is no real value of the batch before a typed placeholder is used.
const DRAWS: u64 = 8;

/// The NER model a required gate waits for is not in: nothing may be masked (and so sent) now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady(pub String);

/// Masks texts for a remote embedder (see the module doc).
pub struct EmbedMasker {
    detector: Arc<Detector>,
    gate: NerGate,
    style: Style,
    mode: &'static str,
    key: [u8; 32],
    fakes: Mutex<HashMap<(EntityType, String), Arc<str>>>,
}

impl std::fmt::Debug for EmbedMasker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key nor a value.
        f.debug_struct("EmbedMasker")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// A batch of masked texts, with what is needed to check the bytes sent.
pub struct Masked {
    /// The texts to send, in order.
    pub texts: Vec<String>,
    /// What was found, by type (never values).
    pub counts: Counts,
    reals: Vec<String>,
}

impl Masked {
    /// Whether `payload` still carries a real value of the batch (raw or JSON-escaped, standing
    /// alone): the egress check on the exact bytes sent.
    pub fn leaks(&self, payload: &str) -> bool {
        self.reals.iter().any(|real| {
            let escaped = serde_json::to_string(real).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            [real.as_str(), escaped]
                .into_iter()
                .any(|needle| occurrences(payload, needle).next().is_some())
        })
    }

    /// The report a model call would carry: counts by type.
    pub fn report(&self, mode: &'static str) -> PrivacyReport {
        PrivacyReport {
            mode,
            counts: TypeCounts::from(&self.counts),
            routed_to: None,
        }
    }
}

/// Whether `c` is part of a word (a value glued to it is part of something longer).
fn wordy(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Start offsets of `needle` in `hay` where it stands alone (not glued to a letter or digit).
fn occurrences<'a>(hay: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    hay.match_indices(needle).filter_map(move |(at, _)| {
        if needle.is_empty() {
            return None;
        }
        let before = hay[..at].chars().next_back().is_some_and(wordy)
            && needle.chars().next().is_some_and(wordy);
        let after = hay[at + needle.len()..].chars().next().is_some_and(wordy)
            && needle.chars().next_back().is_some_and(wordy);
        (!before && !after).then_some(at)
    })
}

impl EmbedMasker {
    /// A masker detecting with `detector` (the privacy gateway's, with its NER slot), waiting for the
    /// model as `gate` says, substituting in `style` (`Fake` for `mask` and `route`, `Placeholder`
    /// for `redact`), its fakes keyed by `key`.
    pub fn new(
        detector: Arc<Detector>,
        gate: NerGate,
        style: Style,
        mode: &'static str,
        key: [u8; 32],
    ) -> Self {
        EmbedMasker {
            detector,
            gate,
            style,
            mode,
            key,
            fakes: Mutex::new(HashMap::new()),
        }
    }

    /// The mode's name, for reports.
    pub fn mode(&self) -> &'static str {
        self.mode
    }

    /// The substitute of `real` (of type `kind`), avoiding every value in `avoid`.
    fn fake(&self, kind: EntityType, real: &str, avoid: &dyn Fn(&str) -> bool) -> Arc<str> {
        let mut fakes = self.fakes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fake) = fakes.get(&(kind, real.to_string()))
            && !avoid(fake)
        {
            return fake.clone();
        }
        let mut chosen: Option<Arc<str>> = None;
        for draw in 0..DRAWS {
            let mut vault = Vault::new(self.seed(kind, real, draw), self.style, 1);
            if let Ok(fake) = vault.substitute(real, kind)
                && !avoid(&fake)
            {
                chosen = Some(Arc::from(fake));
                break;
            }
        }
        let fake = chosen.unwrap_or_else(|| {
            // Eight fakes in a row were real values of this batch: a placeholder cannot be one.
            Arc::from(format!("[{}]", kind.as_str().to_uppercase()))
        });
        if fakes.len() >= REMEMBERED {
            fakes.clear();
        }
        fakes.insert((kind, real.to_string()), fake.clone());
        fake
    }

    /// The generator seed for `real`'s fake: a keyed hash, so the fake is a function of the value.
    fn seed(&self, kind: EntityType, real: &str, draw: u64) -> u64 {
        let mut hash = Sha256::new();
        hash.update(self.key);
        hash.update(kind.as_str().as_bytes());
        hash.update([0]);
        hash.update(real.as_bytes());
        hash.update(draw.to_le_bytes());
        let digest = hash.finalize();
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(seed)
    }

    /// Mask every text of a batch. [`NotReady`] when the NER gate does not allow masking now.
    pub fn mask(&self, texts: &[&str]) -> Result<Masked, NotReady> {
        self.gate.ready_now().map_err(NotReady)?;
        let found = self.detector.detect_batch(texts);
        let mut counts = Counts::default();
        // Every real value of the batch, longest first (a sweep replaces the longest match).
        let mut values: Vec<(String, EntityType)> = Vec::new();
        for (text, entities) in texts.iter().zip(&found) {
            for e in entities {
                counts.add(e.kind);
                let real = e.text(text);
                if !real.trim().is_empty() && !values.iter().any(|(v, _)| v == real) {
                    values.push((real.to_string(), e.kind));
                }
            }
        }
        values.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        let is_real = |s: &str| values.iter().any(|(v, _)| v == s);
        let subs: Vec<(&str, Arc<str>)> = values
            .iter()
            .map(|(real, kind)| (real.as_str(), self.fake(*kind, real, &is_real)))
            .collect();
        let masked = texts
            .iter()
            .zip(&found)
            .map(|(text, entities)| replace(text, entities, &subs))
            .collect();
        Ok(Masked {
            texts: masked,
            counts,
            reals: values.into_iter().map(|(v, _)| v).collect(),
        })
    }
}

/// `text` with each detected span, and every standalone occurrence of a value in `subs` (longest
/// first), replaced by its substitute.
fn replace(text: &str, entities: &[opc_privacy::Entity], subs: &[(&str, Arc<str>)]) -> String {
    let sub_of = |real: &str| {
        subs.iter()
            .find(|(r, _)| *r == real)
            .map(|(_, s)| s.clone())
    };
    let mut spans: Vec<(usize, usize, Arc<str>)> = entities
        .iter()
        .filter_map(|e| sub_of(e.text(text)).map(|s| (e.start, e.end, s)))
        .collect();
    for (real, sub) in subs {
        for at in occurrences(text, real) {
            spans.push((at, at + real.len(), sub.clone()));
        }
    }
    // Earliest first, the longest at one start; overlapping later spans are dropped.
    spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, sub) in spans {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(&sub);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use opc_privacy::detect::{DetectOptions, NerSlot};

    use super::*;

    fn masker(key: u8) -> EmbedMasker {
        let detector = Arc::new(Detector::new(
            DetectOptions {
                types: EntityType::ALL.to_vec(),
                whitelist: vec![],
                threshold: 0.5,
            },
            NerSlot::default(),
        ));
        EmbedMasker::new(
            detector,
            NerGate::optional(NerSlot::default()),
            Style::Fake,
            "mask",
            [key; 32],
        )
    }

    #[test]
    fn a_value_gets_the_same_fake_in_every_batch_and_every_masker_with_the_key() {
        let (a, b) = (masker(1), masker(1));
        let one = a.mask(&["Write to maria.lopez@example.com today"]).unwrap();
        let two = b
            .mask(&[
                "unrelated alice@example.org first",
                "maria.lopez@example.com said hi, maria.lopez@example.com again",
            ])
            .unwrap();
        assert!(!one.texts[0].contains("maria.lopez@example.com"));
        let fake = one.texts[0]
            .trim_start_matches("Write to ")
            .trim_end_matches(" today");
        assert_eq!(two.texts[1], format!("{fake} said hi, {fake} again"));
        assert_eq!(one.counts.get(EntityType::Email), 1);
        // Another key, another fake.
        let other = masker(2).mask(&["maria.lopez@example.com"]).unwrap();
        assert_ne!(other.texts[0], fake);
    }

    #[test]
    fn a_value_found_in_one_text_is_swept_from_the_others_and_the_guard_sees_leaks() {
        let m = masker(3);
        // The address is found in every text it stands in, and swept from any the detector missed.
        let batch = m
            .mask(&[
                "call bob@example.net now",
                "bob@example.net",
                "nothing here",
            ])
            .unwrap();
        for text in &batch.texts {
            assert!(!text.contains("bob@example.net"), "{text}");
        }
        assert_eq!(batch.texts[2], "nothing here");
        let body = serde_json::json!({"input": batch.texts}).to_string();
        assert!(!batch.leaks(&body));
        let leaked = serde_json::json!({"input": ["bob@example.net"]}).to_string();
        assert!(batch.leaks(&leaked));
    }

    #[test]
    fn a_required_ner_model_that_is_not_in_masks_nothing() {
        let detector = Arc::new(Detector::new(
            DetectOptions {
                types: EntityType::ALL.to_vec(),
                whitelist: vec![],
                threshold: 0.5,
            },
            NerSlot::default(),
        ));
        let slot = NerSlot::default();
        slot.set_loader(Arc::new(|| Err("not fetched".into())));
        let m = EmbedMasker::new(
            detector,
            NerGate::required(slot, std::time::Duration::from_secs(1)),
            Style::Fake,
            "mask",
            [0; 32],
        );
        let error = m.mask(&["Maria"]).err().unwrap();
        assert!(error.0.contains("NER"), "{}", error.0);
    }
}
