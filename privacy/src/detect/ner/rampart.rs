//! The Rampart NER model: tokenizer + BERT + label decoding, behind [`NerModel`].

use std::path::Path;
use std::sync::Arc;

use tokenizers::Tokenizer;

use super::NerModel;
use super::bert::Bert;
use super::decode::{self, Piece, TokenPred};
use super::onnx;
use super::places::{self, Gazetteer, PlacesError};
use crate::Entity;

/// Tokens per window (special tokens excluded). Shorter than the model's 510 so attention stays
/// cheap and the model sees the sentence-sized context it was tuned on.
const WINDOW: usize = 256;
/// Tokens shared by consecutive windows; each token is labelled by the window where it is furthest
/// from an edge.
const OVERLAP: usize = 48;
/// Token positions in one forward pass (windows of one long text, or many short texts, padded to the
/// longest in the pass). A pass over ~40 sentences costs less than half as much per sentence as one
/// pass each: the matrix multiplies get more rows per weight read and spread better over the cores.
/// Measured on the synthetic corpus: 512, 1,024 and 2,048 positions give about the same (~200
/// sentences/s), 4,096 less (~170). The largest activation of a pass is BATCH_TOKENS × 1,536 floats.
const BATCH_TOKENS: usize = 1024;

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
    /// The place gazetteer (part of the NER tier: it serves `LOCATION`) is missing or unreadable.
    #[error(transparent)]
    Places(#[from] PlacesError),
}

fn format_err(e: impl std::fmt::Display) -> NerError {
    NerError::Format(e.to_string())
}

/// The Rampart token classifier (6-layer uncased BERT, hidden 384), its weights kept quantised.
pub struct Rampart {
    tokenizer: Tokenizer,
    bert: Engine,
    /// The piece of each label id, and whether it is `O`.
    pieces: Vec<Piece>,
    outside: usize,
    cls: u32,
    sep: u32,
    /// Place names for `LOCATION` (see [`places`]); `None` only for a model loaded from a bare
    /// directory ([`Rampart::load`]), as tests and comparisons do.
    places: Option<Arc<Gazetteer>>,
}

impl Rampart {
    /// Load the model and the place gazetteer from the verified cache (`$OPC_MODELS`, else the
    /// user's cache dir). Either missing is an error that names `opc models fetch`: the NER tier
    /// without its gazetteer would miss most places, and that must never pass unnoticed.
    pub fn load_cached() -> Result<Self, NerError> {
        let root = opc_models::cache_root()?;
        let dir = opc_models::RAMPART.locate(&root)?;
        let places = Gazetteer::load_cached()?;
        Ok(Self::load(&dir)?.with_places(Arc::new(places)))
    }

    /// Use `places` for `LOCATION`.
    pub fn with_places(mut self, places: Arc<Gazetteer>) -> Self {
        self.places = Some(places);
        self
    }

    /// The place gazetteer in use, if any.
    pub fn places(&self) -> Option<&Gazetteer> {
        self.places.as_deref()
    }

    /// The entities of `text` given its tokens' predictions: the decoder's, then the gazetteer's.
    pub fn decode(&self, text: &str, tokens: &[TokenPred]) -> Vec<Entity> {
        let mut spans = decode::spans(text, tokens);
        if let Some(places) = &self.places {
            places::apply(places, text, tokens, &mut spans);
        }
        spans
    }

    /// Load from a model directory holding `config.json`, `tokenizer.json` and `model_q4.onnx`.
    pub fn load(dir: &Path) -> Result<Self, NerError> {
        Self::load_engine(dir, false)
    }

    /// The previous path, for side-by-side comparison: the same weights dequantised to f32 and run
    /// by candle (`--features reference`).
    #[cfg(feature = "reference")]
    pub fn load_reference(dir: &Path) -> Result<Self, NerError> {
        Self::load_engine(dir, true)
    }

    /// Bytes of model weights held in memory.
    pub fn weight_bytes(&self) -> usize {
        match &self.bert {
            Engine::Int8(b) => b.weight_bytes(),
            #[cfg(feature = "reference")]
            Engine::Candle(_) => 0,
        }
    }

    fn load_engine(dir: &Path, reference: bool) -> Result<Self, NerError> {
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
        let cfg = opc_infer::Config {
            hidden: int("hidden_size")?,
            heads: int("num_attention_heads")?,
            layers: int("num_hidden_layers")?,
            max_positions: int("max_position_embeddings")?,
            eps: config["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32,
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
        let bert = if reference {
            reference_engine(cfg, &graph)?
        } else {
            Engine::Int8(Bert::new(cfg, &graph).map_err(format_err)?)
        };
        drop(graph);
        drop(bytes);
        Ok(Self {
            tokenizer,
            bert,
            pieces,
            outside,
            cls,
            sep,
            places: None,
        })
    }

    /// Load into an `Arc<dyn NerModel>` for a [`super::NerSlot`].
    pub fn shared(self) -> Arc<dyn NerModel> {
        Arc::new(self)
    }

    /// Per-token predictions for `text`, in order.
    pub fn token_predictions(&self, text: &str) -> Result<Vec<TokenPred>, NerError> {
        self.batch_predictions(&[text])?
            .pop()
            .ok_or_else(|| NerError::Format("no prediction".into()))
    }

    /// Per-token predictions for each of `texts`, in order. The texts' windows run through the model
    /// together, in batches of similar length: one forward pass over many short sentences costs far
    /// less per sentence than one pass each (the matrix multiplies get more rows per weight read).
    pub fn batch_predictions(&self, texts: &[&str]) -> Result<Vec<Vec<TokenPred>>, NerError> {
        let mut docs = Vec::with_capacity(texts.len());
        for text in texts {
            docs.push(self.plan(text)?);
        }
        // Every window of every text, shortest first, so a batch pads little.
        let mut order: Vec<(usize, usize)> = docs
            .iter()
            .enumerate()
            .flat_map(|(d, doc)| (0..doc.windows.len()).map(move |w| (d, w)))
            .collect();
        order.sort_by_key(|&(d, w)| {
            let (s, e) = docs[d].windows[w];
            e - s
        });
        // Consecutive windows (similar lengths) share a forward pass, up to BATCH_TOKENS positions.
        // One pass at a time: candle already spreads each matrix multiply over the cores, and two
        // passes at once would only queue on its thread pool.
        let mut done: Vec<(usize, usize, Vec<Vec<f32>>)> = Vec::with_capacity(order.len());
        let mut at = 0;
        while at < order.len() {
            let mut end = at + 1;
            while end < order.len()
                && (end - at + 1) * self.padded_len(&docs, order[end]) <= BATCH_TOKENS
            {
                end += 1;
            }
            done.extend(self.run_batch(&docs, &order[at..end])?);
            at = end;
        }
        for (d, w, mut probs) in done {
            let doc = &mut docs[d];
            let (s, e) = doc.windows[w];
            // Token i belongs to the window where it is furthest from an edge: cut halfway
            // through each overlap.
            let from = if w == 0 {
                0
            } else {
                (s + doc.windows[w - 1].1).div_ceil(2)
            };
            let to = doc
                .windows
                .get(w + 1)
                .map_or(e, |next| (next.0 + e).div_ceil(2));
            for i in from.max(s)..to.min(e) {
                let (start, end) = doc.offsets[i];
                if end <= start {
                    continue;
                }
                doc.rows.push((i, std::mem::take(&mut probs[i - s + 1])));
            }
        }
        Ok(docs.into_iter().map(|doc| self.words(doc)).collect())
    }

    /// The length of a window as the model sees it (with `[CLS]` and `[SEP]`).
    fn padded_len(&self, docs: &[Planned], (d, w): (usize, usize)) -> usize {
        docs[d].windows[w].1 - docs[d].windows[w].0 + 2
    }

    /// One forward pass over `batch` (text, window) pairs: per pair, the label probabilities of each
    /// position of the window (`[CLS]` first).
    #[allow(clippy::type_complexity)]
    fn run_batch(
        &self,
        docs: &[Planned],
        batch: &[(usize, usize)],
    ) -> Result<Vec<(usize, usize, Vec<Vec<f32>>)>, NerError> {
        let len = batch
            .iter()
            .map(|&dw| self.padded_len(docs, dw))
            .max()
            .unwrap_or(2);
        let seqs: Vec<Vec<u32>> = batch
            .iter()
            .map(|&(d, w)| {
                let (s, e) = docs[d].windows[w];
                let mut seq = Vec::with_capacity(e - s + 2);
                seq.push(self.cls);
                seq.extend_from_slice(&docs[d].ids[s..e]);
                seq.push(self.sep);
                seq
            })
            .collect();
        let probs = self.bert.probabilities(&seqs, len)?;
        Ok(batch
            .iter()
            .zip(probs)
            .map(|(&(d, w), p)| (d, w, p))
            .collect())
    }

    /// Tokenise `text` and cut it into windows.
    fn plan(&self, text: &str) -> Result<Planned, NerError> {
        let encoding = self.tokenizer.encode(text, false).map_err(format_err)?;
        let budget = WINDOW.min(self.bert.max_positions() - 2);
        let windows = plan_windows(encoding.get_word_ids(), budget, OVERLAP.min(budget / 2));
        Ok(Planned {
            ids: encoding.get_ids().to_vec(),
            offsets: encoding.get_offsets().to_vec(),
            words: encoding.get_word_ids().to_vec(),
            windows,
            rows: Vec::new(),
        })
    }

    /// One prediction per word: the mean of its word pieces' label probabilities, so a word is never
    /// split between two types ("Ing|eborg") or cut short ("In|ês").
    fn words(&self, mut doc: Planned) -> Vec<TokenPred> {
        // Windows ran in length order; put the tokens back in text order.
        doc.rows.sort_by_key(|r| r.0);
        let (rows, words, offsets) = (&mut doc.rows, &doc.words, &doc.offsets);
        let mut out = Vec::with_capacity(rows.len());
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
        out
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
        // Decoding decides whether the token counts (`decode::ENTITY_MIN`, lower after a name cue);
        // the best piece is reported whatever its weight, unless the model reads the token as a type
        // the pattern tier handles (a phone's digits, an e-mail): then it is none of ours.
        let others = sums[Piece::Other as usize].1 - p_outside;
        let piece = if others > best.1 {
            Piece::Other
        } else {
            best.0
        };
        TokenPred {
            start,
            end,
            piece,
            score,
        }
    }
}

/// What runs the network: `opc-infer`'s int8 encoder, or (for comparison) the f32 candle port.
enum Engine {
    Int8(Bert),
    #[cfg(feature = "reference")]
    Candle(super::reference::Bert),
}

impl Engine {
    fn max_positions(&self) -> usize {
        match self {
            Engine::Int8(b) => b.max_positions(),
            #[cfg(feature = "reference")]
            Engine::Candle(b) => b.max_positions(),
        }
    }

    /// Label probabilities per position of each sequence; `len` is the longest (the candle path
    /// pads to it; the int8 path packs the sequences unpadded).
    #[allow(unused_variables)]
    fn probabilities(&self, seqs: &[Vec<u32>], len: usize) -> Result<Vec<Vec<Vec<f32>>>, NerError> {
        match self {
            Engine::Int8(b) => {
                let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
                b.probabilities(&refs).map_err(format_err)
            }
            #[cfg(feature = "reference")]
            Engine::Candle(b) => {
                use candle_core::{Device, Tensor};
                let mut flat = Vec::with_capacity(seqs.len() * len);
                let mut lens = Vec::with_capacity(seqs.len());
                for s in seqs {
                    flat.extend_from_slice(s);
                    flat.resize(flat.len() + len - s.len(), 0);
                    lens.push(s.len());
                }
                let input =
                    Tensor::from_vec(flat, (seqs.len(), len), &Device::Cpu).map_err(format_err)?;
                let probs = b.probabilities(&input, &lens).map_err(format_err)?;
                probs.to_vec3().map_err(format_err)
            }
        }
    }
}

#[cfg(feature = "reference")]
fn reference_engine(cfg: opc_infer::Config, graph: &onnx::Graph<'_>) -> Result<Engine, NerError> {
    let config = super::reference::Config {
        hidden: cfg.hidden,
        heads: cfg.heads,
        layers: cfg.layers,
        max_positions: cfg.max_positions,
        eps: f64::from(cfg.eps),
    };
    let word = graph.u8_table("bert.embeddings.word_embeddings.weight");
    let none: std::collections::HashMap<String, ()> = std::collections::HashMap::new();
    let weights = graph.weights(&none).map_err(format_err)?;
    let bert = super::reference::Bert::new(config, weights, word).map_err(format_err)?;
    Ok(Engine::Candle(bert))
}

#[cfg(not(feature = "reference"))]
fn reference_engine(_: opc_infer::Config, _: &onnx::Graph<'_>) -> Result<Engine, NerError> {
    Err(NerError::Format("built without the reference path".into()))
}

/// One text on its way through the model: its tokens, its windows, and the label probabilities of
/// each token (set by the window that owns it).
struct Planned {
    ids: Vec<u32>,
    offsets: Vec<(usize, usize)>,
    words: Vec<Option<u32>>,
    windows: Vec<(usize, usize)>,
    rows: Vec<(usize, Vec<f32>)>,
}

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
            Ok(tokens) => self.decode(text, &tokens),
            // Never log the text; a failing model finds nothing and the pattern tier still runs.
            Err(_) => Vec::new(),
        }
    }

    fn entities_batch(&self, texts: &[&str]) -> Vec<Vec<Entity>> {
        match self.batch_predictions(texts) {
            Ok(all) => texts
                .iter()
                .zip(all)
                .map(|(text, tokens)| self.decode(text, &tokens))
                .collect(),
            // One text the tokenizer refuses must not cost the others their names: one at a time.
            Err(_) => texts.iter().map(|t| self.entities(t)).collect(),
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
