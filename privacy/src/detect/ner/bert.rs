//! Rampart's BERT with its token-classification head, over `opc-infer`'s quantised encoder.
//!
//! The ONNX file's 4-bit `MatMulNBits` blocks become `opc-infer` matrices exactly (each level and
//! f32 block scale as stored: nothing is rounded), the 8-bit word table stays 8-bit, and the
//! classifier (384 → 35 labels) runs in f32 unless the file stores it 4-bit too. Activations are
//! quantised to int8 per block of 32 inside each multiply, as onnxruntime's int8 path for these nodes
//! does.

use std::collections::HashMap;

use opc_infer::{Config, Dense, Encoder, EncoderError, QMatrix, QTable, Source, ops};

use super::onnx::{BlockWeight, Graph, Weight};

/// The classifier head.
enum Head {
    Dense(Dense),
    Quant(QMatrix),
}

/// The loaded model.
pub struct Bert {
    encoder: Encoder,
    head: Head,
    labels: usize,
}

/// The ONNX weights as an encoder [`Source`].
struct OnnxSource {
    floats: HashMap<String, Weight>,
    blocks: HashMap<String, BlockWeight>,
}

fn missing(name: &str) -> EncoderError {
    EncoderError::Weight {
        name: name.into(),
        why: "not in the model".into(),
    }
}

impl Source for OnnxSource {
    fn tensor(&mut self, name: &str) -> Result<(Vec<f32>, Vec<usize>), EncoderError> {
        let w = self.floats.remove(name).ok_or_else(|| missing(name))?;
        Ok((w.data, w.shape))
    }

    fn linear(&mut self, prefix: &str) -> Result<QMatrix, EncoderError> {
        let name = format!("{prefix}.weight");
        let (bias, _) = self.tensor(&format!("{prefix}.bias"))?;
        if let Some(b) = self.blocks.remove(&name) {
            if b.block % opc_infer::BLOCK == 0 {
                let repeat = b.block / opc_infer::BLOCK;
                let scales = b
                    .scales
                    .iter()
                    .flat_map(|&s| std::iter::repeat_n(s, repeat))
                    .collect();
                return Ok(QMatrix::from_levels(b.n, b.k, &b.levels, scales, bias)?);
            }
            // Blocks smaller than 32: the values, re-quantised (not the case for Rampart 1.4).
            let mut values = Vec::with_capacity(b.n * b.k);
            for (i, &l) in b.levels.iter().enumerate() {
                values.push(f32::from(l) * b.scales[i / b.block]);
            }
            return Ok(QMatrix::quantize(b.n, b.k, &values, bias)?);
        }
        let (w, shape) = self.tensor(&name)?;
        let [n, k] = shape[..] else {
            return Err(EncoderError::Weight {
                name,
                why: format!("shape {shape:?}, expected [out, in]"),
            });
        };
        Ok(QMatrix::quantize(n, k, &w, bias)?)
    }
}

impl Bert {
    /// Build the model from the parsed ONNX graph.
    pub fn new(config: Config, graph: &Graph<'_>) -> Result<Self, EncoderError> {
        let word_name = "bert.embeddings.word_embeddings.weight";
        let blocks = graph.block_weights().map_err(onnx_err)?;
        let table = graph.u8_table(word_name);
        let mut skip: HashMap<String, ()> = blocks.keys().map(|k| (k.clone(), ())).collect();
        if table.is_some() {
            skip.insert(word_name.into(), ());
        }
        let floats = graph.weights(&skip).map_err(onnx_err)?;
        let mut src = OnnxSource { floats, blocks };
        let word = match table {
            Some(t) => {
                let [rows, width] = t.shape[..] else {
                    return Err(EncoderError::Weight {
                        name: word_name.into(),
                        why: format!("shape {:?}", t.shape),
                    });
                };
                QTable::from_u8(rows, width, t.bytes, t.scale, t.zero)?
            }
            None => {
                let (w, shape) = src.tensor(word_name)?;
                let [rows, width] = shape[..] else {
                    return Err(missing(word_name));
                };
                QTable::quantize(rows, width, &w)?
            }
        };
        let encoder = Encoder::new(config, "bert.", word, &mut src)?;
        let head = if src.blocks.contains_key("classifier.weight") {
            Head::Quant(src.linear("classifier")?)
        } else {
            let (weight, shape) = src.tensor("classifier.weight")?;
            let (bias, _) = src.tensor("classifier.bias")?;
            let [n, k] = shape[..] else {
                return Err(missing("classifier.weight"));
            };
            Head::Dense(Dense { n, k, weight, bias })
        };
        let (labels, k) = match &head {
            Head::Dense(d) => (d.n, d.k),
            Head::Quant(q) => (q.n, q.k),
        };
        if k != encoder.hidden() {
            return Err(EncoderError::Weight {
                name: "classifier.weight".into(),
                why: format!("{k} inputs for hidden size {}", encoder.hidden()),
            });
        }
        Ok(Self {
            encoder,
            head,
            labels,
        })
    }

    /// The longest sequence the model takes, special tokens included.
    pub fn max_positions(&self) -> usize {
        self.encoder.max_positions()
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        self.encoder.weight_bytes()
            + match &self.head {
                Head::Dense(d) => 4 * (d.weight.len() + d.bias.len()),
                Head::Quant(q) => q.bytes(),
            }
    }

    /// Label probabilities of each position of each sequence (`[CLS]` … `[SEP]` included).
    pub fn probabilities(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<Vec<f32>>>, EncoderError> {
        let hidden = self.encoder.forward(seqs)?;
        let mut logits = match &self.head {
            Head::Dense(d) => d.forward(&hidden.data),
            Head::Quant(q) => {
                let mut y = vec![0f32; hidden.data.len() / q.k * q.n];
                q.matmul(&hidden.data, &mut y);
                y
            }
        };
        ops::softmax_rows(&mut logits, self.labels);
        Ok(hidden
            .starts
            .windows(2)
            .map(|w| {
                logits[w[0] * self.labels..w[1] * self.labels]
                    .chunks_exact(self.labels)
                    .map(<[f32]>::to_vec)
                    .collect()
            })
            .collect())
    }
}

fn onnx_err(e: super::onnx::OnnxError) -> EncoderError {
    EncoderError::Weight {
        name: "model_q4.onnx".into(),
        why: e.to_string(),
    }
}
