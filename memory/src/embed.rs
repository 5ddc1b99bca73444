//! Sentence embeddings for recall memory: `all-MiniLM-L6-v2` run in-process by `opc-infer`'s int8
//! encoder (the kernels the privacy NER runs on).
//!
//! Role: turn message texts into 384-d unit vectors the recall and facts stores compare by dot
//! product. The model is sentence-transformers' recipe exactly: BERT (6 layers, hidden 384) → mean
//! of the last hidden states over the attention mask → L2 normalisation, at most 256 word pieces (its
//! `sentence_bert_config.json`). The files come from `opc-models` ([`opc_models::MINILM`]), verified
//! by sha256 before loading.
//!
//! Weights: the safetensors file is f32; at load every linear layer is quantised to 7-bit levels with
//! one scale per block of 32 values and the word table to 8-bit per block (47 MB of f32 become ~13 MB),
//! and activations are quantised per block inside each multiply. Against the f32 model the vectors keep
//! a cosine above 0.999 (`tests/minilm_parity.rs` checks it against sentence-transformers' own).
//!
//! Why the tokenizer is reconfigured: the shipped `tokenizer.json` pads every input to a fixed 128 and
//! truncates at 128. Fixed padding wastes most of the attention work on short chat turns, and 128
//! truncates what sentence-transformers keeps (256). We do not pad at all (the encoder packs a batch's
//! sequences one after another) and truncate at 256; a sentence embeds the same alone and beside a
//! longer one (a test checks it).
//!
//! Loading takes seconds, longer than `opc run` may take to be ready, so the model arrives later: an
//! [`EmbedSlot`] is shared by the store's worker and the loader, starts empty, and is filled once.
//! Until then recall searches by BM25 alone.
//!
//! The seam: [`Embedder`] is any model — this one, or a remote OpenAI-compatible endpoint
//! (`opc-agents`) — saying its generation key ([`Embedder::model_id`]: model and dimensions), its
//! size, its preferred batch and its descriptor (what rebuilds it, never a secret). The stores keep
//! vectors per generation (`recall::generation`); a slot also holds the previous generation's
//! embedder ([`EmbedSlot::set_previous`]) so queries are embedded by the model of the vectors they
//! are compared with while a new generation fills. [`EmbedError::Unavailable`] means "try later":
//! the stores keep rows waiting and retry with backoff.
//!
//! Invariants: every vector an embedder returns has [`Embedder::dimensions`] components (the stores
//! check it and name the row otherwise); every vector MiniLM returns has [`DIM`] components and unit norm (or is all zero for a text
//! with no tokens, which then matches nothing); an embedder never logs the text it sees.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use std::collections::HashMap;

use opc_infer::{Encoder, EncoderError, QMatrix, QTable, Source};
use tokenizers::{Tokenizer, TruncationParams};

/// Dimensions of a MiniLM vector (other embedders say theirs through [`Embedder::dimensions`]; the
/// stores never assume this one).
pub const DIM: usize = 384;
/// Word pieces kept per text (sentence-transformers' `max_seq_length` for this model).
pub const MAX_PIECES: usize = 256;
/// Texts run through the model together. Larger batches amortise the per-call overhead but pad more.
const BATCH: usize = 32;
/// MiniLM's generation key: the id every vector it computed is stored with (the same string since
/// the first release, so databases from then keep their vectors as the active generation).
pub const MINILM_ID: &str = "all-MiniLM-L6-v2";

/// Something that turns texts into unit vectors of [`Embedder::dimensions`] components.
pub trait Embedder: Send + Sync {
    /// One unit vector per text, in order, each of `self.dimensions()` components.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// The generation key stored with each vector: the model AND its dimensions ([`MINILM_ID`] for
    /// the local model; `openai-compatible:<model>:<dims>` for a remote one). Vectors of two ids are
    /// never compared.
    fn model_id(&self) -> &str;
    /// Components per vector (384 for MiniLM).
    fn dimensions(&self) -> usize;
    /// Texts per call the embedder prefers (the stores batch by it).
    fn batch_size(&self) -> usize {
        32
    }
    /// The vector of one search query. A search runs before an agent's task, so an embedder that
    /// can be slow to fail (a remote endpoint that hangs) answers this quickly or fails, without the
    /// retries that background indexing can afford; the store then searches by keywords.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed(&[text])?
            .pop()
            .ok_or_else(|| EmbedError::Run("the embedder returned no vector for the query".into()))
    }
    /// What the stores record for this embedder's generation, so that a later start can build it
    /// again to embed queries while a newer generation fills: `{"provider", "model", "dimensions",
    /// "baseUrl", "apiKeyEnv"}` — never a secret. The default describes a local model.
    fn descriptor(&self) -> serde_json::Value {
        serde_json::json!({
            "provider": "local",
            "model": self.model_id(),
            "dimensions": self.dimensions(),
        })
    }
}

/// Where embedders land once loaded; cheap to clone, shared by the stores and the loaders.
///
/// It holds the configured embedder (`set`, filled once) and, optionally, the embedder of the
/// generation the stores hold on disk when that is another model (`set_previous`): while the stores
/// fill the new generation in the background, searches keep embedding their queries with the
/// previous one, so a query is only ever compared with vectors of its own model.
#[derive(Clone, Default)]
pub struct EmbedSlot {
    current: Arc<OnceLock<Arc<dyn Embedder>>>,
    previous: Arc<OnceLock<Arc<dyn Embedder>>>,
}

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
        self.current.set(model).is_ok()
    }

    /// The configured model, once loaded.
    pub fn get(&self) -> Option<&Arc<dyn Embedder>> {
        self.current.get()
    }

    /// Register the embedder of the generation on disk when the configured one is another model
    /// (rebuilt from the descriptor the stores recorded, see `generations`); `false` when one was
    /// registered already.
    pub fn set_previous(&self, model: Arc<dyn Embedder>) -> bool {
        self.previous.set(model).is_ok()
    }

    /// The previous generation's embedder, when registered.
    pub fn previous(&self) -> Option<&Arc<dyn Embedder>> {
        self.previous.get()
    }

    /// The loaded embedder whose [`Embedder::model_id`] is `id` (the configured one or the
    /// previous one), if any.
    pub fn for_model(&self, id: &str) -> Option<Arc<dyn Embedder>> {
        [self.get(), self.previous()]
            .into_iter()
            .flatten()
            .find(|m| m.model_id() == id)
            .cloned()
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
    /// The embedder cannot run now (endpoint down, rate limited, timed out): the stores try again
    /// later with backoff; rows keep waiting, nothing is lost, keyword search goes on.
    #[error("the embedder is unavailable for now: {0}")]
    Unavailable(String),
}

fn run_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Run(e.to_string())
}

/// all-MiniLM-L6-v2 on the CPU.
pub struct MiniLm {
    tokenizer: Tokenizer,
    encoder: Encoder,
}

/// The safetensors file's f32 tensors as an encoder [`Source`]: linear layers quantised as taken.
struct Tensors(HashMap<String, (Vec<f32>, Vec<usize>)>);

impl Source for Tensors {
    fn tensor(&mut self, name: &str) -> Result<(Vec<f32>, Vec<usize>), EncoderError> {
        self.0.remove(name).ok_or_else(|| EncoderError::Weight {
            name: name.into(),
            why: "not in model.safetensors".into(),
        })
    }

    fn linear(&mut self, prefix: &str) -> Result<QMatrix, EncoderError> {
        let (w, shape) = self.tensor(&format!("{prefix}.weight"))?;
        let (bias, _) = self.tensor(&format!("{prefix}.bias"))?;
        let [n, k] = shape[..] else {
            return Err(EncoderError::Weight {
                name: format!("{prefix}.weight"),
                why: format!("shape {shape:?}, expected [out, in]"),
            });
        };
        Ok(QMatrix::quantize(n, k, &w, bias)?)
    }
}

/// The subset of `config.json` the encoder needs.
#[derive(serde::Deserialize)]
struct Config {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default)]
    hidden_act: Option<String>,
}

fn default_eps() -> f64 {
    1e-12
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
        if config.hidden_act.as_deref().is_some_and(|a| a != "gelu") {
            return Err(EmbedError::Format(format!(
                "config.json: activation {:?} (expected gelu)",
                config.hidden_act
            )));
        }
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| EmbedError::Format(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_PIECES,
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError::Format(format!("tokenizer truncation: {e}")))?;
        let format = |e: String| EmbedError::Format(format!("model.safetensors: {e}"));
        let weights = read("model.safetensors")?;
        let file =
            safetensors::SafeTensors::deserialize(&weights).map_err(|e| format(e.to_string()))?;
        let mut tensors = HashMap::new();
        for (name, view) in file.tensors() {
            if view.dtype() != safetensors::Dtype::F32 {
                continue; // position_ids (i64) and the like: not weights.
            }
            let data = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            tensors.insert(name, (data, view.shape().to_vec()));
        }
        drop(file);
        drop(weights);
        let mut src = Tensors(tensors);
        let word_name = "embeddings.word_embeddings.weight";
        let (word, shape) = src.tensor(word_name).map_err(|e| format(e.to_string()))?;
        let [rows, width] = shape[..] else {
            return Err(format(format!("{word_name}: shape {shape:?}")));
        };
        let word = QTable::quantize(rows, width, &word).map_err(|e| format(e.to_string()))?;
        let cfg = opc_infer::Config {
            hidden: config.hidden_size,
            heads: config.num_attention_heads,
            layers: config.num_hidden_layers,
            max_positions: config.max_position_embeddings,
            eps: config.layer_norm_eps as f32,
        };
        let encoder = Encoder::new(cfg, "", word, &mut src).map_err(|e| format(e.to_string()))?;
        Ok(Self { tokenizer, encoder })
    }

    /// Bytes of model weights held in memory.
    pub fn weight_bytes(&self) -> usize {
        self.encoder.weight_bytes()
    }

    /// One batch through the model (sequences packed, not padded).
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(run_err)?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        // Texts with no tokens at all (not even the special ones) get a zero vector.
        let real: Vec<&[u32]> = ids.iter().copied().filter(|s| !s.is_empty()).collect();
        let hidden = self.encoder.forward(&real).map_err(run_err)?;
        let mut pooled = hidden.starts.windows(2).map(|w| {
            // Mean pooling over the sequence (every position is real: nothing is padded).
            let mut mean = vec![0f32; DIM];
            for row in hidden.data[w[0] * DIM..w[1] * DIM].chunks_exact(DIM) {
                for (m, v) in mean.iter_mut().zip(row) {
                    *m += v;
                }
            }
            let n = (w[1] - w[0]).max(1) as f32;
            mean.iter_mut().for_each(|m| *m /= n);
            normalise(mean)
        });
        ids.iter()
            .map(|s| {
                if s.is_empty() {
                    Some(vec![0.0; DIM])
                } else {
                    pooled.next()
                }
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| EmbedError::Run("fewer vectors than texts".into()))
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

    fn model_id(&self) -> &str {
        MINILM_ID
    }

    fn dimensions(&self) -> usize {
        DIM
    }

    fn batch_size(&self) -> usize {
        BATCH
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

    /// The model, or `None` when it is not fetched here: `test` is then skipped with one line (a
    /// failure under CI, see `opc-testgate`).
    fn model(test: &str) -> Option<MiniLm> {
        opc_testgate::need(
            opc_testgate::Group::Embedding,
            test,
            MiniLm::load_cached()
                .map_err(|e| format!("embedding model not available ({e}); `opc models fetch`")),
        )
    }

    #[test]
    fn vectors_are_unit_norm_and_deterministic_and_paraphrases_are_closer() {
        let Some(m) = model("vectors_are_unit_norm_and_deterministic_and_paraphrases_are_closer")
        else {
            return;
        };
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
        let Some(m) = model("padding_does_not_change_a_vector") else {
            return;
        };
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
        let Some(m) = model("empty_text_gets_a_vector_of_the_right_size") else {
            return;
        };
        let v = m.embed(&["", "hello"]).unwrap();
        assert_eq!(v[0].len(), DIM);
        assert_eq!(v[1].len(), DIM);
    }
}
