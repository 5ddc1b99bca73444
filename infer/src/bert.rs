//! A BERT encoder (post-LayerNorm, exact GELU) over quantised weights, on the CPU.
//!
//! Embeddings (word + position + token type 0, LayerNorm), then per layer: Q, K and V in one int8
//! multiply, self-attention per sequence and head in f32, the output projection + residual +
//! LayerNorm, the GELU feed-forward + residual + LayerNorm. Returns the last hidden states.
//!
//! Sequences of different lengths run together without padding: their rows are packed one after
//! another, every linear layer multiplies them all at once, and attention only looks within a
//! sequence. So a batch costs what its real tokens cost, and a text's result does not depend on
//! what it was batched with (beyond the last bits of f32 summation order: none here, each row's
//! arithmetic is the same whoever its neighbours are).

use rayon::prelude::*;

use crate::ops::{self, dispatch};
use crate::quant::{BLOCK, QMatrix, QuantError};

/// Why the encoder could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum EncoderError {
    /// A weight is missing or has the wrong shape.
    #[error("weight {name}: {why}")]
    Weight {
        /// The weight's name.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// The input does not fit the model.
    #[error("{0}")]
    Input(String),
}

impl From<QuantError> for EncoderError {
    fn from(e: QuantError) -> Self {
        EncoderError::Weight {
            name: "matrix".into(),
            why: e.to_string(),
        }
    }
}

/// The shape of the model.
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
    pub eps: f32,
}

/// Where the encoder's weights come from, named as PyTorch's `BertModel` names them (after a
/// prefix such as `bert.`).
pub trait Source {
    /// A float tensor, flattened, and its shape.
    fn tensor(&mut self, name: &str) -> Result<(Vec<f32>, Vec<usize>), EncoderError>;
    /// The linear layer `{prefix}.weight` (`[out, in]`) + `{prefix}.bias`, quantised.
    fn linear(&mut self, prefix: &str) -> Result<QMatrix, EncoderError>;
}

/// An embedding table kept 8-bit: row `r` is `(q − zero) · scale[block]`.
pub struct QTable {
    rows: usize,
    width: usize,
    bytes: Vec<u8>,
    zero: f32,
    /// One per block of 32 per row, or a single scale for the whole table.
    scales: Vec<f32>,
}

impl QTable {
    /// A table stored 8-bit with one scale and zero point (ONNX `DequantizeLinear`).
    pub fn from_u8(
        rows: usize,
        width: usize,
        bytes: Vec<u8>,
        scale: f32,
        zero: f32,
    ) -> Result<Self, EncoderError> {
        if bytes.len() != rows * width {
            return Err(EncoderError::Weight {
                name: "word embeddings".into(),
                why: format!("{} bytes for {rows}×{width}", bytes.len()),
            });
        }
        Ok(Self {
            rows,
            width,
            bytes,
            zero,
            scales: vec![scale],
        })
    }

    /// Quantise an f32 table `[rows][width]` per block of 32: scale = max |v| / 127, zero 128.
    pub fn quantize(rows: usize, width: usize, values: &[f32]) -> Result<Self, EncoderError> {
        if values.len() != rows * width || !width.is_multiple_of(BLOCK) {
            return Err(EncoderError::Weight {
                name: "word embeddings".into(),
                why: format!("{} values for {rows}×{width}", values.len()),
            });
        }
        let mut bytes = vec![0u8; values.len()];
        let mut scales = vec![0f32; values.len() / BLOCK];
        for ((v, q), s) in values
            .chunks_exact(BLOCK)
            .zip(bytes.chunks_exact_mut(BLOCK))
            .zip(scales.iter_mut())
        {
            let amax = v.iter().fold(0f32, |m, x| m.max(x.abs()));
            *s = amax / 127.0;
            let inv = if amax > 0.0 { 127.0 / amax } else { 0.0 };
            for (q, x) in q.iter_mut().zip(v) {
                *q = ((x * inv).round().clamp(-127.0, 127.0) + 128.0) as u8;
            }
        }
        Ok(Self {
            rows,
            width,
            bytes,
            zero: 128.0,
            scales,
        })
    }

    fn add_row(&self, r: usize, out: &mut [f32]) {
        let q = &self.bytes[r * self.width..(r + 1) * self.width];
        if let [scale] = self.scales[..] {
            for (o, &q) in out.iter_mut().zip(q) {
                *o += (f32::from(q) - self.zero) * scale;
            }
        } else {
            let blocks = self.width / BLOCK;
            for ((o, q), s) in out
                .chunks_exact_mut(BLOCK)
                .zip(q.chunks_exact(BLOCK))
                .zip(&self.scales[r * blocks..(r + 1) * blocks])
            {
                for (o, &q) in o.iter_mut().zip(q) {
                    *o += (f32::from(q) - self.zero) * s;
                }
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.len() + 4 * self.scales.len()
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    qkv: QMatrix,
    attn_out: QMatrix,
    attn_norm: Norm,
    intermediate: QMatrix,
    output: QMatrix,
    out_norm: Norm,
}

/// The loaded encoder.
pub struct Encoder {
    config: Config,
    word: QTable,
    position: Vec<f32>,
    token_type0: Vec<f32>,
    emb_norm: Norm,
    layers: Vec<Layer>,
}

/// Hidden states of a batch: `data` is `[Σ len][hidden]`, sequence `i` at rows
/// `starts[i]..starts[i + 1]`.
pub struct Hidden {
    /// Row-major states.
    pub data: Vec<f32>,
    /// Row offsets, one more than sequences.
    pub starts: Vec<usize>,
}

fn vector(src: &mut dyn Source, name: &str, len: usize) -> Result<Vec<f32>, EncoderError> {
    let (v, _) = src.tensor(name)?;
    if v.len() < len {
        return Err(EncoderError::Weight {
            name: name.into(),
            why: format!("{} values, expected at least {len}", v.len()),
        });
    }
    Ok(v)
}

impl Encoder {
    /// Build from `src`, names under `prefix` (`"bert."` or `""`), with the word table given.
    pub fn new(
        config: Config,
        prefix: &str,
        word: QTable,
        src: &mut dyn Source,
    ) -> Result<Self, EncoderError> {
        let h = config.hidden;
        if config.heads == 0
            || !h.is_multiple_of(config.heads)
            || !h.is_multiple_of(BLOCK)
            || word.width != h
        {
            return Err(EncoderError::Weight {
                name: "config".into(),
                why: format!(
                    "hidden {h} with {} heads and a word table {} wide does not fit",
                    config.heads, word.width
                ),
            });
        }
        let mut norm = |name: &str| -> Result<Norm, EncoderError> {
            Ok(Norm {
                weight: vector(src, &format!("{name}.weight"), h)?,
                bias: vector(src, &format!("{name}.bias"), h)?,
            })
        };
        let emb_norm = norm(&format!("{prefix}embeddings.LayerNorm"))?;
        let position = vector(
            src,
            &format!("{prefix}embeddings.position_embeddings.weight"),
            config.max_positions * h,
        )?;
        let mut token_type0 = vector(
            src,
            &format!("{prefix}embeddings.token_type_embeddings.weight"),
            h,
        )?;
        token_type0.truncate(h);
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let p = format!("{prefix}encoder.layer.{i}");
            let q = src.linear(&format!("{p}.attention.self.query"))?;
            let k = src.linear(&format!("{p}.attention.self.key"))?;
            let v = src.linear(&format!("{p}.attention.self.value"))?;
            let qkv = QMatrix::concat(&[q, k, v])?;
            let attn_out = src.linear(&format!("{p}.attention.output.dense"))?;
            let intermediate = src.linear(&format!("{p}.intermediate.dense"))?;
            let output = src.linear(&format!("{p}.output.dense"))?;
            let shapes_fit = qkv.n == 3 * h
                && qkv.k == h
                && attn_out.n == h
                && attn_out.k == h
                && intermediate.k == h
                && output.n == h
                && output.k == intermediate.n;
            if !shapes_fit {
                return Err(EncoderError::Weight {
                    name: p,
                    why: "layer shapes do not fit the hidden size".into(),
                });
            }
            let mut norm = |name: &str| -> Result<Norm, EncoderError> {
                Ok(Norm {
                    weight: vector(src, &format!("{name}.weight"), h)?,
                    bias: vector(src, &format!("{name}.bias"), h)?,
                })
            };
            layers.push(Layer {
                qkv,
                attn_out,
                attn_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                intermediate,
                output,
                out_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Self {
            config,
            word,
            position,
            token_type0,
            emb_norm,
            layers,
        })
    }

    /// The longest sequence the model takes, special tokens included.
    pub fn max_positions(&self) -> usize {
        self.config.max_positions
    }

    /// Hidden size.
    pub fn hidden(&self) -> usize {
        self.config.hidden
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        let f = |n: &Norm| 4 * (n.weight.len() + n.bias.len());
        self.word.bytes()
            + 4 * (self.position.len() + self.token_type0.len())
            + f(&self.emb_norm)
            + self
                .layers
                .iter()
                .map(|l| {
                    l.qkv.bytes()
                        + l.attn_out.bytes()
                        + l.intermediate.bytes()
                        + l.output.bytes()
                        + f(&l.attn_norm)
                        + f(&l.out_norm)
                })
                .sum::<usize>()
    }

    /// The last hidden states of each sequence of token ids (special tokens included), run together.
    pub fn forward(&self, seqs: &[&[u32]]) -> Result<Hidden, EncoderError> {
        let h = self.config.hidden;
        let mut starts = Vec::with_capacity(seqs.len() + 1);
        starts.push(0);
        for s in seqs {
            if s.len() > self.config.max_positions {
                return Err(EncoderError::Input(format!(
                    "a sequence of {} tokens is longer than the model's {}",
                    s.len(),
                    self.config.max_positions
                )));
            }
            if let Some(id) = s.iter().find(|&&id| id as usize >= self.word.rows) {
                return Err(EncoderError::Input(format!(
                    "token id {id} is outside the vocabulary ({})",
                    self.word.rows
                )));
            }
            starts.push(starts.last().copied().unwrap_or(0) + s.len());
        }
        let rows = starts.last().copied().unwrap_or(0);
        let mut x = vec![0f32; rows * h];
        for (s, seq) in seqs.iter().enumerate() {
            for (p, &id) in seq.iter().enumerate() {
                let out = &mut x[(starts[s] + p) * h..(starts[s] + p + 1) * h];
                out.copy_from_slice(&self.position[p * h..(p + 1) * h]);
                for (o, t) in out.iter_mut().zip(&self.token_type0) {
                    *o += t;
                }
                self.word.add_row(id as usize, out);
            }
        }
        let eps = self.config.eps;
        ops::add_layer_norm(
            &mut x,
            None,
            h,
            &self.emb_norm.weight,
            &self.emb_norm.bias,
            eps,
        );
        let mut qkv = vec![0f32; rows * 3 * h];
        let mut ctx = vec![0f32; rows * h];
        let mut attn = vec![0f32; rows * h];
        for layer in &self.layers {
            layer.qkv.matmul(&x, &mut qkv);
            self.attention(&qkv, &starts, &mut ctx);
            layer.attn_out.matmul(&ctx, &mut attn);
            ops::add_layer_norm(
                &mut attn,
                Some(&x),
                h,
                &layer.attn_norm.weight,
                &layer.attn_norm.bias,
                eps,
            );
            let mut inter = vec![0f32; rows * layer.intermediate.n];
            layer.intermediate.matmul(&attn, &mut inter);
            ops::gelu(&mut inter);
            layer.output.matmul(&inter, &mut x);
            ops::add_layer_norm(
                &mut x,
                Some(&attn),
                h,
                &layer.out_norm.weight,
                &layer.out_norm.bias,
                eps,
            );
        }
        Ok(Hidden { data: x, starts })
    }

    /// Scaled dot-product attention within each sequence, per head; `qkv` rows are `[q | k | v]`.
    fn attention(&self, qkv: &[f32], starts: &[usize], ctx: &mut [f32]) {
        let h = self.config.hidden;
        let heads = self.config.heads;
        let hd = h / heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let tasks: Vec<(usize, usize)> = (0..starts.len() - 1)
            .flat_map(|s| (0..heads).map(move |head| (s, head)))
            .collect();
        let run = |&(s, head): &(usize, usize)| -> Vec<f32> {
            let (r0, len) = (starts[s], starts[s + 1] - starts[s]);
            let mut out = vec![0f32; len * hd];
            dispatch(
                #[inline(always)]
                || {
                    // K transposed ([hd][len], rows padded to 16 with zeros) so each query's
                    // scores are axpys over keys in whole vectors.
                    let lp = len.div_ceil(16) * 16;
                    let mut kt = vec![0f32; hd * lp];
                    for j in 0..len {
                        let k = &qkv[(r0 + j) * 3 * h + h + head * hd..][..hd];
                        for (d, &v) in k.iter().enumerate() {
                            kt[d * lp + j] = v;
                        }
                    }
                    let mut scores = vec![0f32; lp];
                    // Accumulators are local arrays (registers), 16 lanes at a time, so the loops
                    // vectorise; each score and each output sums in the same order as one scalar
                    // loop would (over d, over keys).
                    for i in 0..len {
                        let q = &qkv[(r0 + i) * 3 * h + head * hd..][..hd];
                        let (sc, _) = scores.as_chunks_mut::<16>();
                        for (c, sc) in sc.iter_mut().enumerate() {
                            let mut acc = [0f32; 16];
                            for (d, &qd) in q.iter().enumerate() {
                                let qd = qd * scale;
                                let k = &kt[d * lp + c * 16..][..16];
                                for l in 0..16 {
                                    acc[l] += qd * k[l];
                                }
                            }
                            *sc = acc;
                        }
                        ops::softmax(&mut scores[..len]);
                        let o = &mut out[i * hd..(i + 1) * hd];
                        let v_at = |j: usize| (r0 + j) * 3 * h + 2 * h + head * hd;
                        let (oc, tail) = o.as_chunks_mut::<16>();
                        for (c, oc) in oc.iter_mut().enumerate() {
                            let mut acc = [0f32; 16];
                            for (j, &p) in scores[..len].iter().enumerate() {
                                let v = &qkv[v_at(j) + c * 16..][..16];
                                for l in 0..16 {
                                    acc[l] += p * v[l];
                                }
                            }
                            *oc = acc;
                        }
                        let done = hd - tail.len();
                        for (t, o) in tail.iter_mut().enumerate() {
                            for (j, &p) in scores[..len].iter().enumerate() {
                                *o += p * qkv[v_at(j) + done + t];
                            }
                        }
                    }
                },
            );
            out
        };
        let rows: usize = starts.last().copied().unwrap_or(0);
        let results: Vec<Vec<f32>> = if rows * rows.min(64) >= 4096 {
            tasks.par_iter().map(run).collect()
        } else {
            tasks.iter().map(run).collect()
        };
        for (&(s, head), out) in tasks.iter().zip(results) {
            for (i, o) in out.chunks_exact(hd).enumerate() {
                ctx[(starts[s] + i) * h + head * hd..][..hd].copy_from_slice(o);
            }
        }
    }
}
