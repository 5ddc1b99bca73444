//! The Rampart NER model: tokenizer + BERT + label decoding, behind [`NerModel`].

use std::path::Path;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use tokenizers::Tokenizer;

use super::NerModel;
use super::bert::{Bert, Config};
use super::decode::{self, Piece, TokenPred};
use super::onnx;
use crate::Entity;

/// Tokens per window (special tokens excluded). Shorter than the model's 510 so attention stays
/// cheap and the model sees the sentence-sized context it was tuned on.
const WINDOW: usize = 256;
/// Tokens shared by consecutive windows; each token is labelled by the window where it is furthest
/// from an edge.
const OVERLAP: usize = 48;
/// Windows run through the model together.
const BATCH: usize = 8;

/// Why the model could not load.
#[derive(Debug, thiserror::Error)]
pub enum NerError {
    /// The model files are not there or do not verify.
    #[error(transparent)]
    Files(#[from] opc_models::Error),
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The files are not the model we expect.
    #[error("the model files are not usable: {0}")]
    Format(String),
}

fn format_err(e: impl std::fmt::Display) -> NerError {
    NerError::Format(e.to_string())
}

/// The Rampart token classifier (6-layer uncased BERT, hidden 384), dequantised to f32.
pub struct Rampart {
    tokenizer: Tokenizer,
    bert: Bert,
    /// The piece of each label id, and whether it is `O`.
    pieces: Vec<Piece>,
    outside: usize,
    cls: u32,
    sep: u32,
}

impl Rampart {
    /// Load from the verified cache (`$OPC_MODELS`, else the user's cache dir).
    pub fn load_cached() -> Result<Self, NerError> {
        let root = opc_models::cache_root()?;
        let dir = opc_models::RAMPART.locate(&root)?;
        Self::load(&dir)
    }

    /// Load from a model directory holding `config.json`, `tokenizer.json` and `model_q4.onnx`.
    pub fn load(dir: &Path) -> Result<Self, NerError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| NerError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let config: serde_json::Value =
            serde_json::from_slice(&read("config.json")?).map_err(format_err)?;
        let int = |k: &str| -> Result<usize, NerError> {
            config[k]
                .as_u64()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| NerError::Format(format!("config.json has no {k}")))
        };
        let cfg = Config {
            hidden: int("hidden_size")?,
            heads: int("num_attention_heads")?,
            layers: int("num_hidden_layers")?,
            max_positions: int("max_position_embeddings")?,
            eps: config["layer_norm_eps"].as_f64().unwrap_or(1e-12),
        };
        let labels = config["id2label"]
            .as_object()
            .ok_or_else(|| NerError::Format("config.json has no id2label".into()))?;
        let mut pieces = vec![Piece::Other; labels.len()];
        let mut outside = usize::MAX;
        for (id, label) in labels {
            let id: usize = id.parse().map_err(format_err)?;
            let label = label.as_str().unwrap_or("O");
            let slot = pieces
                .get_mut(id)
                .ok_or_else(|| NerError::Format("label ids are not dense".into()))?;
            *slot = Piece::from_label(label);
            if label == "O" {
                outside = id;
            }
        }
        if outside == usize::MAX {
            return Err(NerError::Format("no O label".into()));
        }

        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?).map_err(format_err)?;
        // We window by hand: no truncation, no padding, whatever the file says.
        tokenizer.with_truncation(None).map_err(format_err)?;
        tokenizer.with_padding(None);
        let special = |t: &str| {
            tokenizer
                .token_to_id(t)
                .ok_or_else(|| NerError::Format(format!("tokenizer has no {t}")))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);

        let bytes = read("model_q4.onnx")?;
        let graph = onnx::parse(&bytes).map_err(format_err)?;
        // Linear layers run in f32 (dequantised once): on this CPU path candle's Q4_0 kernels are ~4×
        // slower for sentence-sized inputs. OPC_NER_Q4=1 keeps them 4-bit instead: ~35 MB less memory.
        let q4 = if std::env::var_os("OPC_NER_Q4").is_some_and(|v| !v.is_empty() && v != "0") {
            graph.q4_weights().map_err(format_err)?
        } else {
            std::collections::HashMap::new()
        };
        let word = graph.u8_table("bert.embeddings.word_embeddings.weight");
        let weights = graph.weights(&q4).map_err(format_err)?;
        drop(graph);
        drop(bytes);
        let bert = Bert::new(cfg, weights, q4, word).map_err(format_err)?;
        Ok(Self {
            tokenizer,
            bert,
            pieces,
            outside,
            cls,
            sep,
        })
    }

    /// Load into an `Arc<dyn NerModel>` for a [`super::NerSlot`].
    pub fn shared(self) -> Arc<dyn NerModel> {
        Arc::new(self)
    }

    /// Per-token predictions for `text`, in order.
    pub fn token_predictions(&self, text: &str) -> Result<Vec<TokenPred>, NerError> {
        let encoding = self.tokenizer.encode(text, false).map_err(format_err)?;
        let ids = encoding.get_ids();
        let offsets = encoding.get_offsets();
        let words = encoding.get_word_ids();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let budget = WINDOW.min(self.bert.max_positions() - 2);
        let windows = plan_windows(words, budget, OVERLAP.min(budget / 2));
        // Token i belongs to the window where it is furthest from an edge: cut halfway through
        // each overlap.
        let mut owner_from = vec![0usize; windows.len()];
        for k in 1..windows.len() {
            owner_from[k] = (windows[k].0 + windows[k - 1].1).div_ceil(2);
        }
        let mut out = Vec::with_capacity(ids.len());
        let mut rows: Vec<(usize, Vec<f32>)> = Vec::with_capacity(ids.len());
        for (batch_no, batch) in windows.chunks(BATCH).enumerate() {
            let len = batch.iter().map(|(s, e)| e - s + 2).max().unwrap_or(2);
            let mut flat = Vec::with_capacity(batch.len() * len);
            let mut lens = Vec::with_capacity(batch.len());
            for &(s, e) in batch {
                flat.push(self.cls);
                flat.extend_from_slice(&ids[s..e]);
                flat.push(self.sep);
                flat.resize(flat.len() + len - (e - s + 2), 0);
                lens.push(e - s + 2);
            }
            let input =
                Tensor::from_vec(flat, (batch.len(), len), &Device::Cpu).map_err(format_err)?;
            let probs = self.bert.probabilities(&input, &lens).map_err(format_err)?;
            let mut probs: Vec<Vec<Vec<f32>>> = probs.to_vec3().map_err(format_err)?;
            for (j, &(s, e)) in batch.iter().enumerate() {
                let k = batch_no * BATCH + j;
                let from = owner_from[k];
                let to = owner_from.get(k + 1).copied().unwrap_or(e);
                for i in from.max(s)..to.min(e) {
                    let (start, end) = offsets[i];
                    if end <= start {
                        continue;
                    }
                    rows.push((i, std::mem::take(&mut probs[j][i - s + 1])));
                }
            }
        }
        // One prediction per word: the mean of its word pieces' label probabilities, so a word is
        // never split between two types ("Ing|eborg") or cut short ("In|ês").
        let mut at = 0;
        while at < rows.len() {
            let first = rows[at].0;
            let mut last = at;
            while last + 1 < rows.len() {
                let (i, next) = (rows[last].0, rows[last + 1].0);
                let same_word = words[next].is_some() && words[next] == words[first];
                if !(same_word && next == i + 1 && offsets[next].0 == offsets[i].1) {
                    break;
                }
                last += 1;
            }
            let mut mean = std::mem::take(&mut rows[at].1);
            for (_, row) in &rows[at + 1..=last] {
                for (m, p) in mean.iter_mut().zip(row) {
                    *m += p;
                }
            }
            let n = (last - at + 1) as f32;
            mean.iter_mut().for_each(|m| *m /= n);
            out.push(self.predict(&mean, offsets[first].0, offsets[rows[last].0].1));
            at = last + 1;
        }
        Ok(out)
    }

    /// The token's best entity piece (B- and I- of one type summed) and its entity probability.
    fn predict(&self, row: &[f32], start: usize, end: usize) -> TokenPred {
        let p_outside = row.get(self.outside).copied().unwrap_or(1.0);
        let score = 1.0 - p_outside;
        let mut best = (Piece::Other, 0.0f32);
        let mut sums: [(Piece, f32); 9] = [(Piece::Other, 0.0); 9];
        for (id, &p) in row.iter().enumerate() {
            let piece = self.pieces.get(id).copied().unwrap_or(Piece::Other);
            let slot = &mut sums[piece as usize];
            slot.0 = piece;
            slot.1 += p;
        }
        for &(piece, p) in &sums {
            if piece != Piece::Other && p > best.1 {
                best = (piece, p);
            }
        }
        // An entity when O is not the most likely outcome against all entity labels together.
        let piece = if score >= ENTITY_MIN {
            best.0
        } else {
            Piece::Other
        };
        TokenPred {
            start,
            end,
            piece,
            score,
        }
    }
}

/// A token is part of an entity when P(O) is at most `1 - ENTITY_MIN`.
const ENTITY_MIN: f32 = 0.5;

/// Split `count` tokens into overlapping `[start, end)` windows of at most `budget` tokens; each
/// window after the first starts `overlap` tokens before the previous end, moved back to a word start.
fn plan_windows(words: &[Option<u32>], budget: usize, overlap: usize) -> Vec<(usize, usize)> {
    let count = words.len();
    let mut windows = Vec::new();
    let mut start = 0;
    while start < count {
        let end = (start + budget).min(count);
        windows.push((start, end));
        if end == count {
            break;
        }
        let mut next = end - overlap;
        while next > start + 1 && words[next].is_some() && words[next] == words[next - 1] {
            next -= 1;
        }
        start = next;
    }
    windows
}

impl NerModel for Rampart {
    fn entities(&self, text: &str) -> Vec<Entity> {
        match self.token_predictions(text) {
            Ok(tokens) => decode::spans(text, &tokens),
            // Never log the text; a failing model finds nothing and the pattern tier still runs.
            Err(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_every_token_and_start_on_words() {
        let words: Vec<Option<u32>> = (0..1000u32).map(|i| Some(i / 3)).collect();
        let w = plan_windows(&words, 256, 48);
        assert_eq!(w.first().map(|w| w.0), Some(0));
        assert_eq!(w.last().map(|w| w.1), Some(1000));
        for pair in w.windows(2) {
            assert!(pair[1].0 < pair[0].1, "overlap");
            assert!(pair[1].0 > pair[0].0, "progress");
            assert_ne!(words[pair[1].0], words[pair[1].0 - 1], "starts on a word");
        }
        assert_eq!(plan_windows(&words[..10], 256, 48), vec![(0, 10)]);
        assert!(plan_windows(&[], 256, 48).is_empty());
    }
}
