//! Sentence embeddings for recall memory: `all-MiniLM-L6-v2` run in-process with candle.
//!
//! Role: turn message texts into 384-d unit vectors the recall store compares by dot product. The model
//! is sentence-transformers' recipe exactly: BERT (6 layers, hidden 384) → mean of the last hidden
//! states over the attention mask → L2 normalisation, at most 256 word pieces (its
//! `sentence_bert_config.json`). The files come from `opc-models` ([`opc_models::MINILM`]), verified
//! by sha256 before loading.
//!
//! Why the tokenizer is reconfigured: the shipped `tokenizer.json` pads every input to a fixed 128 and
//! truncates at 128. Fixed padding wastes most of the attention work on short chat turns, and 128
//! truncates what sentence-transformers keeps (256). We pad each batch to its longest member instead
//! and truncate at 256; mean pooling over the mask makes the padding invisible in the result (a test
//! checks a sentence embeds the same alone and beside a longer one).
//!
//! Loading takes seconds, longer than `opc run` may take to be ready, so the model arrives later: an
//! [`EmbedSlot`] is shared by the store's worker and the loader, starts empty, and is filled once.
//! Until then recall searches by BM25 alone.
//!
//! Invariants: every vector returned has [`DIM`] components and unit norm (or is all zero for a text
//! with no tokens, which then matches nothing); an embedder never logs the text it sees.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Dimensions of a vector.
pub const DIM: usize = 384;
/// Word pieces kept per text (sentence-transformers' `max_seq_length` for this model).
pub const MAX_PIECES: usize = 256;
/// Texts run through the model together. Larger batches amortise the per-call overhead but pad more.
const BATCH: usize = 32;

/// Something that turns texts into unit vectors of [`DIM`] components.
pub trait Embedder: Send + Sync {
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// A short name recorded with each stored vector (so a model change can re-embed).
    fn model_id(&self) -> &'static str;
}

/// Where an embedder lands once loaded; cheap to clone, shared by the store and the loader.
#[derive(Clone, Default)]
pub struct EmbedSlot(Arc<OnceLock<Arc<dyn Embedder>>>);

impl EmbedSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// A slot already holding `model`.
    pub fn with(model: Arc<dyn Embedder>) -> Self {
        let slot = Self::new();
        slot.set(model);
        slot
    }

    /// Fill the slot; `false` when it was already filled (the first model stays).
    pub fn set(&self, model: Arc<dyn Embedder>) -> bool {
        self.0.set(model).is_ok()
    }

    /// The model, once loaded.
    pub fn get(&self) -> Option<&Arc<dyn Embedder>> {
        self.0.get()
    }
}

/// Why the embedder could not load or run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
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
    #[error("the embedding model files are not usable: {0}")]
    Format(String),
    /// Running the model failed.
    #[error("embedding failed: {0}")]
    Run(String),
}

fn run_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Run(e.to_string())
}

/// all-MiniLM-L6-v2 on the CPU.
pub struct MiniLm {
    tokenizer: Tokenizer,
    bert: BertModel,
    device: Device,
}

impl MiniLm {
    /// Load from the verified cache (`$OPC_MODELS`, else the user's cache dir).
    pub fn load_cached() -> Result<Self, EmbedError> {
        let root = opc_models::cache_root()?;
        let dir = opc_models::MINILM.locate(&root)?;
        Self::load(&dir)
    }

    /// Load into an `Arc<dyn Embedder>` for an [`EmbedSlot`].
    pub fn load_shared() -> Result<Arc<dyn Embedder>, EmbedError> {
        Ok(Arc::new(Self::load_cached()?))
    }

    /// Load from a directory holding `config.json`, `tokenizer.json` and `model.safetensors`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| EmbedError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| EmbedError::Format(format!("config.json: {e}")))?;
        if config.hidden_size != DIM {
            return Err(EmbedError::Format(format!(
                "config.json: hidden size {} (expected {DIM})",
                config.hidden_size
            )));
        }
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| EmbedError::Format(format!("tokenizer.json: {e}")))?;
        let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(0);
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id,
            pad_token: "[PAD]".into(),
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_PIECES,
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError::Format(format!("tokenizer truncation: {e}")))?;
        let device = Device::Cpu;
        let weights = read("model.safetensors")?;
        let format = |e: candle_core::Error| EmbedError::Format(format!("model.safetensors: {e}"));
        let mut tensors =
            candle_core::safetensors::load_buffer(&weights, &device).map_err(format)?;
        drop(weights);
        // candle's `Linear` multiplies by `weight.t()`. Stored as PyTorch has it (`[out, in]`,
        // contiguous), that transpose is strided, and the matrix multiply re-packs the whole weight
        // on every call: at sentence-sized inputs that packing cost more than the arithmetic. Each
        // linear weight is therefore kept as the transposed view of an `[in, out]` contiguous copy, so
        // `weight.t()` is contiguous. Same values, same results; ~1.4× faster here.
        for (name, tensor) in tensors.iter_mut() {
            if name.ends_with(".weight") && !name.contains("embeddings") && tensor.rank() == 2 {
                *tensor = tensor
                    .t()
                    .and_then(|t| t.contiguous())
                    .and_then(|t| t.t())
                    .map_err(format)?;
            }
        }
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let bert = BertModel::load(vb, &config)
            .map_err(|e| EmbedError::Format(format!("model.safetensors: {e}")))?;
        Ok(Self {
            tokenizer,
            bert,
            device,
        })
    }

    /// One batch (padded to its longest member) through the model.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(run_err)?;
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        if n == 0 || len == 0 {
            return Ok(vec![vec![0.0; DIM]; n]);
        }
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device).map_err(run_err)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device).map_err(run_err)?;
        let types = ids.zeros_like().map_err(run_err)?;
        let hidden = self
            .bert
            .forward(&ids, &types, Some(&mask))
            .map_err(run_err)?;
        // Mean pooling over the mask: sum(h * m) / max(sum(m), 1e-9), as sentence-transformers.
        let m = mask
            .to_dtype(DType::F32)
            .and_then(|m| m.unsqueeze(2))
            .map_err(run_err)?;
        let summed = hidden
            .broadcast_mul(&m)
            .and_then(|x| x.sum(1))
            .map_err(run_err)?;
        let counts = m
            .sum(1)
            .and_then(|c| c.clamp(1e-9, f64::MAX))
            .map_err(run_err)?;
        let mean = summed.broadcast_div(&counts).map_err(run_err)?;
        let rows: Vec<Vec<f32>> = mean.to_vec2().map_err(run_err)?;
        Ok(rows.into_iter().map(normalise).collect())
    }
}

/// L2-normalise (sentence-transformers' `Normalize`: divide by max(norm, 1e-12)).
fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    for x in &mut v {
        *x /= norm;
    }
    v
}

impl Embedder for MiniLm {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Batch texts of similar length together so little attention work goes to padding; results
        // are put back in the caller's order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn model_id(&self) -> &'static str {
        "all-MiniLM-L6-v2"
    }
}

/// Dot product of two vectors (cosine similarity for unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The model, or `None` (with one line) when it is not fetched here.
    fn model() -> Option<MiniLm> {
        match MiniLm::load_cached() {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("skipping: embedding model not available ({e})");
                None
            }
        }
    }

    #[test]
    fn vectors_are_unit_norm_and_deterministic_and_paraphrases_are_closer() {
        let Some(m) = model() else { return };
        let texts = [
            "The cat sits on the mat.",
            "A cat is sitting on a rug.",
            "Quarterly revenue grew by eight percent.",
            "The cat sits on the mat.",
        ];
        let v = m.embed(&texts).unwrap();
        assert_eq!(v.len(), 4);
        for x in &v {
            assert_eq!(x.len(), DIM);
            assert!((dot(x, x) - 1.0).abs() < 1e-5);
        }
        assert_eq!(v[0], v[3], "identical texts, identical vectors");
        assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.3);
    }

    #[test]
    fn padding_does_not_change_a_vector() {
        let Some(m) = model() else { return };
        let short = "Where did Caroline go last weekend?";
        let long = "Caroline told Melanie a long story about the support group she went to, the \
                    people she met there, the painting she started afterwards and the trip she plans.";
        let alone = m.embed_batch(&[short]).unwrap().remove(0);
        let padded = m.embed_batch(&[short, long]).unwrap().remove(0);
        for (a, b) in alone.iter().zip(&padded) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn empty_text_gets_a_vector_of_the_right_size() {
        let Some(m) = model() else { return };
        let v = m.embed(&["", "hello"]).unwrap();
        assert_eq!(v[0].len(), DIM);
        assert_eq!(v[1].len(), DIM);
    }
}
