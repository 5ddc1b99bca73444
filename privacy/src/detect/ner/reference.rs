//! The previous NER path, kept for side-by-side comparison only (`--features reference`): the same
//! weights dequantised to f32 and run by candle. The product runs [`super::bert`].
//!
//! Post-LayerNorm BERT as in the original paper (and PyTorch's `BertForTokenClassification`):
//! embeddings (word + position + token type, LayerNorm), then per layer self-attention (with a padding
//! mask) + residual + LayerNorm and a GELU (erf) feed-forward + residual + LayerNorm, then a linear
//! classifier over every token.

use std::collections::HashMap;

use candle_core::{Device, Module, Result, Tensor};
use candle_nn::LayerNorm;

use super::onnx::{U8Table, Weight};

/// A linear layer in f32.
struct Linear(candle_nn::Linear);

impl Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.0.forward(x)
    }
}

/// The shape of the model (from `config.json`).
#[derive(Debug, Clone)]
pub struct Config {
    /// Hidden size.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Layers.
    pub layers: usize,
    /// Position embeddings (the longest input, special tokens included).
    pub max_positions: usize,
    /// LayerNorm epsilon.
    pub eps: f64,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

/// The loaded model.
pub struct Bert {
    config: Config,
    word: Tensor,
    /// When `word` is 8-bit: its scale and offset (`q * scale + offset`).
    word_affine: Option<(f64, f64)>,
    position: Tensor,
    token_type0: Tensor,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
    classifier: Linear,
}

struct Weights {
    map: HashMap<String, Weight>,
    device: Device,
}

impl Weights {
    fn take(&mut self, name: &str) -> Result<Tensor> {
        let Some(w) = self.map.remove(name) else {
            candle_core::bail!("the model has no weight {name}")
        };
        Tensor::from_vec(w.data, w.shape, &self.device)
    }

    fn linear(&mut self, prefix: &str) -> Result<Linear> {
        let name = format!("{prefix}.weight");
        let bias = self.take(&format!("{prefix}.bias"))?;
        // candle's `Linear` multiplies by `weight.t()`. Stored as PyTorch has it (`[out, in]`,
        // contiguous), that transpose is strided and the matrix multiply re-packs the whole weight on
        // every call, which at sentence-sized inputs cost more than the arithmetic. Kept instead as
        // the transposed view of an `[in, out]` contiguous copy, `weight.t()` is contiguous: same
        // values and results, a sentence alone runs ~2× faster.
        let weight = self.take(&name)?.t()?.contiguous()?.t()?;
        Ok(Linear(candle_nn::Linear::new(weight, Some(bias))))
    }

    fn norm(&mut self, prefix: &str, eps: f64) -> Result<LayerNorm> {
        let weight = self.take(&format!("{prefix}.weight"))?;
        let bias = self.take(&format!("{prefix}.bias"))?;
        Ok(LayerNorm::new(weight, bias, eps))
    }
}

impl Bert {
    /// Build the model from PyTorch-named weights (see [`super::onnx::Graph::weights`]).
    pub fn new(
        config: Config,
        weights: HashMap<String, Weight>,
        word_u8: Option<U8Table>,
    ) -> Result<Self> {
        let mut w = Weights {
            map: weights,
            device: Device::Cpu,
        };
        let eps = config.eps;
        let (word, word_affine) = match word_u8 {
            // The largest table stays 8-bit in memory (7.6 MB instead of 30 MB) and is
            // dequantised per looked-up row.
            Some(t) => {
                w.map.remove("bert.embeddings.word_embeddings.weight");
                let scale = f64::from(t.scale);
                let tensor = Tensor::from_vec(t.bytes, t.shape, &Device::Cpu)?;
                (tensor, Some((scale, -f64::from(t.zero) * scale)))
            }
            None => (w.take("bert.embeddings.word_embeddings.weight")?, None),
        };
        let position = w.take("bert.embeddings.position_embeddings.weight")?;
        let token_type0 = w
            .take("bert.embeddings.token_type_embeddings.weight")?
            .get(0)?;
        let emb_norm = w.norm("bert.embeddings.LayerNorm", eps)?;
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let p = format!("bert.encoder.layer.{i}");
            layers.push(Layer {
                query: w.linear(&format!("{p}.attention.self.query"))?,
                key: w.linear(&format!("{p}.attention.self.key"))?,
                value: w.linear(&format!("{p}.attention.self.value"))?,
                attn_out: w.linear(&format!("{p}.attention.output.dense"))?,
                attn_norm: w.norm(&format!("{p}.attention.output.LayerNorm"), eps)?,
                intermediate: w.linear(&format!("{p}.intermediate.dense"))?,
                output: w.linear(&format!("{p}.output.dense"))?,
                out_norm: w.norm(&format!("{p}.output.LayerNorm"), eps)?,
            });
        }
        let classifier = w.linear("classifier")?;
        Ok(Self {
            config,
            word,
            word_affine,
            position,
            token_type0,
            emb_norm,
            layers,
            classifier,
        })
    }

    /// The longest sequence the model takes, special tokens included.
    pub fn max_positions(&self) -> usize {
        self.config.max_positions
    }

    /// Label probabilities `[batch, len, labels]` for `ids` `[batch, len]` (u32), where `lens[b]`
    /// tokens of row `b` are real and the rest padding.
    pub fn probabilities(&self, ids: &Tensor, lens: &[usize]) -> Result<Tensor> {
        let (batch, len) = ids.dims2()?;
        let (hidden, heads) = (self.config.hidden, self.config.heads);
        let head_dim = hidden / heads;
        let flat = ids.flatten_all()?;
        let mut x = self.word.index_select(&flat, 0)?;
        if let Some((scale, offset)) = self.word_affine {
            x = x.to_dtype(candle_core::DType::F32)?.affine(scale, offset)?;
        }
        let x = x.reshape((batch, len, hidden))?;
        let x = x.broadcast_add(&self.position.narrow(0, 0, len)?)?;
        let x = x.broadcast_add(&self.token_type0)?;
        let mut x = self.emb_norm.forward(&x)?;
        // Additive mask over keys: 0 for real tokens, a large negative for padding.
        let mask = if lens.iter().all(|&l| l == len) {
            None
        } else {
            let mut m = vec![0f32; batch * len];
            for (b, &l) in lens.iter().enumerate() {
                m[b * len + l.min(len)..(b + 1) * len].fill(-1e9);
            }
            Some(Tensor::from_vec(m, (batch, 1, 1, len), &Device::Cpu)?)
        };
        let scale = 1.0 / (head_dim as f64).sqrt();
        for layer in &self.layers {
            let split = |t: Tensor| -> Result<Tensor> {
                t.reshape((batch, len, heads, head_dim))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let q = split(layer.query.forward(&x)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let mut scores = (q.matmul(&k.t()?)? * scale)?;
            if let Some(mask) = &mask {
                scores = scores.broadcast_add(mask)?;
            }
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((batch, len, hidden))?;
            let attn = layer
                .attn_norm
                .forward(&(layer.attn_out.forward(&ctx)? + &x)?)?;
            let inter = layer.intermediate.forward(&attn)?.gelu_erf()?;
            x = layer
                .out_norm
                .forward(&(layer.output.forward(&inter)? + attn)?)?;
        }
        let logits = self.classifier.forward(&x)?;
        candle_nn::ops::softmax_last_dim(&logits)
    }
}
