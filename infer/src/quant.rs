//! Block-quantised matrices and activations, and the int8 matrix multiply over them.
//!
//! A weight matrix `[n, k]` is kept as one byte per value with one f32 scale per block of
//! [`BLOCK`] values along `k`: value = `(q - zero) * scale`. Rampart's 4-bit ONNX blocks (32 values,
//! zero point 8) fit this exactly, and f32 weights (MiniLM) are quantised into it at load with 7-bit
//! levels (`|q - zero| ≤ 63`).
//!
//! Activations are quantised per call, per row and per block of 32, to symmetric int8 (`|q| ≤ 127`):
//! a block with an outlier (BERT's hidden states have a few large dimensions) costs precision to that
//! block only. Each output is then `Σ_blocks sx·sw·Σ_i (w_i − zero)·x_i`, the integer dot exact.
//!
//! Invariant that keeps the kernels exact: the weight bytes are at most 127 and activation levels at
//! most 127 in magnitude, so `vpmaddubsw` (u8 × i8 pairs summed into i16) never saturates:
//! 2 · 127 · 127 < 32,767.

use rayon::prelude::*;

/// Values per quantisation block (along the input dimension).
pub const BLOCK: usize = 32;

/// Why a matrix could not be built.
#[derive(Debug, thiserror::Error)]
pub enum QuantError {
    /// Sizes do not agree.
    #[error("{0}")]
    Shape(String),
}

/// A weight matrix `[n, k]` (PyTorch's `[out, in]`) in quantised blocks, with its bias.
#[derive(Clone)]
pub struct QMatrix {
    /// Output features.
    pub n: usize,
    /// Input features (a multiple of [`BLOCK`]).
    pub k: usize,
    /// Subtracted from every byte.
    pub(crate) zero: u8,
    /// `[n][k]` bytes, each ≤ 127.
    pub(crate) q: Vec<u8>,
    /// `[n][k / BLOCK]`.
    pub(crate) scales: Vec<f32>,
    /// `[n]`.
    pub(crate) bias: Vec<f32>,
}

impl QMatrix {
    /// From signed levels (`[n][k]`, each in `-63..=63`, or `-8..=7` for 4-bit) and their block scales
    /// (`[n][k / BLOCK]`), exactly.
    pub fn from_levels(
        n: usize,
        k: usize,
        levels: &[i8],
        scales: Vec<f32>,
        bias: Vec<f32>,
    ) -> Result<Self, QuantError> {
        if !k.is_multiple_of(BLOCK) || levels.len() != n * k || scales.len() != n * k / BLOCK {
            return Err(QuantError::Shape(format!(
                "a {n}×{k} matrix needs k a multiple of {BLOCK}, {} levels and {} scales (got {} and {})",
                n * k,
                n * k / BLOCK,
                levels.len(),
                scales.len()
            )));
        }
        if bias.len() != n {
            return Err(QuantError::Shape(format!(
                "bias of {} for {n} outputs",
                bias.len()
            )));
        }
        if let Some(l) = levels.iter().find(|l| !(-63..=63).contains(*l)) {
            return Err(QuantError::Shape(format!("level {l} outside -63..=63")));
        }
        let zero = 64u8;
        let q = levels
            .iter()
            .map(|&l| (i16::from(l) + i16::from(zero)) as u8)
            .collect();
        Ok(Self {
            n,
            k,
            zero,
            q,
            scales,
            bias,
        })
    }

    /// Quantise an f32 matrix `[n][k]` (row-major, PyTorch's `[out, in]`): per block of 32, scale =
    /// max |w| / 63.
    pub fn quantize(n: usize, k: usize, w: &[f32], bias: Vec<f32>) -> Result<Self, QuantError> {
        if w.len() != n * k || !k.is_multiple_of(BLOCK) {
            return Err(QuantError::Shape(format!(
                "a {n}×{k} matrix (k a multiple of {BLOCK}) needs {} values, got {}",
                n * k,
                w.len()
            )));
        }
        let mut levels = vec![0i8; n * k];
        let mut scales = vec![0f32; n * k / BLOCK];
        for ((block, out), scale) in w
            .chunks_exact(BLOCK)
            .zip(levels.chunks_exact_mut(BLOCK))
            .zip(scales.iter_mut())
        {
            let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            if amax > 0.0 {
                *scale = amax / 63.0;
                let inv = 63.0 / amax;
                for (o, v) in out.iter_mut().zip(block) {
                    *o = (v * inv).round().clamp(-63.0, 63.0) as i8;
                }
            }
        }
        Self::from_levels(n, k, &levels, scales, bias)
    }

    /// Stack matrices with the same `k` into one (`[n1 + n2 + …, k]`): Q, K and V in one multiply.
    pub fn concat(parts: &[QMatrix]) -> Result<Self, QuantError> {
        let Some(first) = parts.first() else {
            return Err(QuantError::Shape("nothing to concatenate".into()));
        };
        if parts.iter().any(|p| p.k != first.k || p.zero != first.zero) {
            return Err(QuantError::Shape(
                "concatenated matrices differ in k".into(),
            ));
        }
        Ok(Self {
            n: parts.iter().map(|p| p.n).sum(),
            k: first.k,
            zero: first.zero,
            q: parts.iter().flat_map(|p| p.q.iter().copied()).collect(),
            scales: parts
                .iter()
                .flat_map(|p| p.scales.iter().copied())
                .collect(),
            bias: parts.iter().flat_map(|p| p.bias.iter().copied()).collect(),
        })
    }

    /// Row `r` as f32 (the values, without bias).
    pub fn row(&self, r: usize, out: &mut [f32]) {
        let blocks = self.k / BLOCK;
        let zero = f32::from(self.zero);
        for ((o, q), s) in out
            .chunks_exact_mut(BLOCK)
            .zip(self.q[r * self.k..(r + 1) * self.k].chunks_exact(BLOCK))
            .zip(&self.scales[r * blocks..(r + 1) * blocks])
        {
            for (o, &q) in o.iter_mut().zip(q) {
                *o = (f32::from(q) - zero) * s;
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.q.len() + 4 * (self.scales.len() + self.bias.len())
    }
}

/// Activations `[m][k]` quantised per row and block for one multiply.
pub(crate) struct QInput {
    pub(crate) m: usize,
    /// `[m][k]` levels, `|q| ≤ 127`.
    pub(crate) q: Vec<i8>,
    /// `[m][k / BLOCK]` block scales.
    pub(crate) scales: Vec<f32>,
    /// `[m][k / 4]`: each block's scale repeated per group of 4 values (one SIMD lane each).
    pub(crate) lane_scales: Vec<f32>,
    /// `[m][k / 4]`: `zero · (sum of the 4 levels of that lane)`, what the weights' offset adds.
    pub(crate) corr: Vec<i32>,
}

impl QInput {
    pub(crate) fn new(x: &[f32], k: usize, zero: u8) -> Self {
        let m = x.len() / k;
        let mut out = Self {
            m,
            q: vec![0; m * k],
            scales: vec![0.0; m * k / BLOCK],
            lane_scales: vec![0.0; m * k / 4],
            corr: vec![0; m * k / 4],
        };
        let zero = i32::from(zero);
        let rows = out
            .q
            .par_chunks_mut(k)
            .zip(out.scales.par_chunks_mut(k / BLOCK))
            .zip(out.lane_scales.par_chunks_mut(k / 4))
            .zip(out.corr.par_chunks_mut(k / 4))
            .zip(x.par_chunks(k));
        #[allow(clippy::type_complexity)]
        let quantize_row = |((((q, s), ls), corr), x): (
            (((&mut [i8], &mut [f32]), &mut [f32]), &mut [i32]),
            &[f32],
        )| {
            quantize_row(x, q, s);
            for (ls, s) in ls.chunks_exact_mut(BLOCK / 4).zip(s.iter()) {
                ls.fill(*s);
            }
            for (c, q) in corr.iter_mut().zip(q.chunks_exact(4)) {
                *c = zero * q.iter().map(|&v| i32::from(v)).sum::<i32>();
            }
        };
        if m >= 16 {
            rows.for_each(quantize_row);
        } else {
            out.q
                .chunks_mut(k)
                .zip(out.scales.chunks_mut(k / BLOCK))
                .zip(out.lane_scales.chunks_mut(k / 4))
                .zip(out.corr.chunks_mut(k / 4))
                .zip(x.chunks(k))
                .for_each(quantize_row);
        }
        out
    }
}

/// Quantise one row to symmetric int8 per block: scale = max |x| / 127.
pub(crate) fn quantize_row(x: &[f32], q: &mut [i8], scales: &mut [f32]) {
    for ((x, q), s) in x
        .chunks_exact(BLOCK)
        .zip(q.chunks_exact_mut(BLOCK))
        .zip(scales.iter_mut())
    {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        if amax == 0.0 {
            *s = 0.0;
            q.fill(0);
            continue;
        }
        *s = amax / 127.0;
        let inv = 127.0 / amax;
        for (q, &v) in q.iter_mut().zip(x) {
            // Round half away from zero, clamped: |q| ≤ 127 keeps vpmaddubsw exact.
            *q = (v * inv).round().clamp(-127.0, 127.0) as i8;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A small deterministic generator (no dependency for tests).
    pub(crate) struct Lcg(pub u64);
    impl Lcg {
        pub(crate) fn next(&mut self) -> f32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
    }

    /// The definition, in f64: activations quantised as the kernel does, then
    /// `Σ_blocks sx · sw · Σ (w − zero) · x + bias`.
    fn reference(w: &QMatrix, x: &[f32]) -> Vec<f32> {
        let input = QInput::new(x, w.k, w.zero);
        let blocks = w.k / BLOCK;
        let mut y = vec![0f32; input.m * w.n];
        for i in 0..input.m {
            for n in 0..w.n {
                let mut acc = 0f64;
                for b in 0..blocks {
                    let dot: i64 = (b * BLOCK..(b + 1) * BLOCK)
                        .map(|c| {
                            i64::from(input.q[i * w.k + c])
                                * (i64::from(w.q[n * w.k + c]) - i64::from(w.zero))
                        })
                        .sum();
                    acc += dot as f64
                        * f64::from(input.scales[i * blocks + b])
                        * f64::from(w.scales[n * blocks + b]);
                }
                y[i * w.n + n] = (acc + f64::from(w.bias[n])) as f32;
            }
        }
        y
    }

    /// The same product in plain f32 (no activation rounding).
    fn dense(w: &QMatrix, x: &[f32]) -> Vec<f32> {
        let m = x.len() / w.k;
        let mut row = vec![0f32; w.k];
        let mut y = vec![0f32; m * w.n];
        for n in 0..w.n {
            w.row(n, &mut row);
            for i in 0..m {
                let dot: f64 = row
                    .iter()
                    .zip(&x[i * w.k..(i + 1) * w.k])
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                y[i * w.n + n] = dot as f32 + w.bias[n];
            }
        }
        y
    }

    #[test]
    fn kernels_compute_the_definition_for_every_shape() {
        let mut rng = Lcg(3);
        // Shapes that exercise the 4×4 tiles, their edges, a k with a trailing 32-block, and m
        // large enough to split rows across threads (and small, to split columns).
        for &(m, n, k) in &[
            (1, 1, 32),
            (3, 5, 96),
            (4, 4, 64),
            (7, 9, 384),
            (25, 384, 384),
            (70, 30, 1536),
        ] {
            let w: Vec<f32> = (0..n * k).map(|_| rng.next() * 0.1).collect();
            let bias: Vec<f32> = (0..n).map(|_| rng.next()).collect();
            let mut x: Vec<f32> = (0..m * k).map(|_| rng.next()).collect();
            // An outlier dimension, as BERT's hidden states have.
            x[k / 2] = 40.0;
            let q = QMatrix::quantize(n, k, &w, bias).unwrap();
            let want = reference(&q, &x);
            let exact = dense(&q, &x);
            let mut got = vec![0f32; m * n];
            q.matmul(&x, &mut got);
            let mut worst_rounding = 0f32;
            for (i, ((g, w), e)) in got.iter().zip(&want).zip(&exact).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "m{m} n{n} k{k} at {i}: {g} vs {w}"
                );
                if i >= n {
                    // Rows without the outlier: activation rounding stays small.
                    worst_rounding = worst_rounding.max((g - e).abs());
                }
            }
            assert!(worst_rounding < 0.03, "m{m} n{n} k{k}: {worst_rounding}");
        }
    }

    #[test]
    fn quantize_keeps_weights_within_half_a_level() {
        let mut rng = Lcg(9);
        let w: Vec<f32> = (0..4 * 64).map(|_| rng.next()).collect();
        let q = QMatrix::quantize(4, 64, &w, vec![0.0; 4]).unwrap();
        let mut row = vec![0f32; 64];
        for r in 0..4 {
            q.row(r, &mut row);
            for (b, (a, w)) in row.iter().zip(&w[r * 64..]).enumerate() {
                let s = q.scales[r * 2 + b / BLOCK];
                assert!((a - w).abs() <= s * 0.5 + 1e-6);
            }
        }
    }

    #[test]
    fn bad_shapes_are_refused_with_the_sizes() {
        let e = QMatrix::quantize(2, 30, &[0.0; 60], vec![0.0; 2])
            .err()
            .unwrap();
        assert!(e.to_string().contains("multiple of 32"), "{e}");
        let e = QMatrix::from_levels(1, 32, &[64; 32], vec![1.0], vec![0.0])
            .err()
            .unwrap();
        assert!(e.to_string().contains("outside"), "{e}");
    }
}
