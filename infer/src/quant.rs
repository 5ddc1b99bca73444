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
//! The f32 arithmetic is defined once, so that every kernel computes the same bits: per output, for
//! each block in order, `acc = acc + f32(dot) * (sx * sw)` (two roundings, no fused multiply-add;
//! `dot` is the exact i32 `Σ w·x − zero·Σ x`, below 2^24 so its conversion is exact), then
//! `y = acc + bias`. The weights are laid out for the SIMD kernels (16 outputs side by side, see
//! [`QMatrix`]) so each output's sum runs in one lane, in that order.
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

/// Outputs per group in the packed layout: one 512-bit register of i32 lanes, or two 256-bit ones.
pub(crate) const LANES: usize = 16;

/// One block of one group: `[BLOCK / 4][LANES][4]` bytes, 4 consecutive `k` of one output per i32
/// lane, so one `vpdpbusd` takes 4 `k` × 16 outputs.
pub(crate) type PackedBlock = [u8; BLOCK * LANES];

/// A weight matrix `[n, k]` (PyTorch's `[out, in]`) in quantised blocks, with its bias.
///
/// Kept in the one layout every kernel reads (so the weights are held once, whichever kernel runs):
/// outputs in groups of [`LANES`] (the last group padded with level 0, scale 0), and per group and
/// block of 32 `k`, a [`PackedBlock`]. Scales and bias follow the groups, 16 to an array.
#[derive(Clone)]
pub struct QMatrix {
    /// Output features.
    pub n: usize,
    /// Input features (a multiple of [`BLOCK`]).
    pub k: usize,
    /// Subtracted from every byte.
    pub(crate) zero: u8,
    /// `[n.div_ceil(LANES)][k / BLOCK]` blocks, each byte ≤ 127.
    pub(crate) q: Vec<PackedBlock>,
    /// `[groups][k / BLOCK][LANES]`.
    pub(crate) scales: Vec<[f32; LANES]>,
    /// `[groups][LANES]` (0 past `n`).
    pub(crate) bias: Vec<[f32; LANES]>,
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
        let blocks = k / BLOCK;
        Ok(Self::pack(
            n,
            k,
            zero,
            |r, c| (i16::from(levels[r * k + c]) + i16::from(zero)) as u8,
            |r, b| scales[r * blocks + b],
            |r| bias[r],
        ))
    }

    /// Lay out a matrix from its byte, scale and bias at (output, input) / (output, block) / output.
    fn pack(
        n: usize,
        k: usize,
        zero: u8,
        byte: impl Fn(usize, usize) -> u8,
        scale: impl Fn(usize, usize) -> f32,
        bias: impl Fn(usize) -> f32,
    ) -> Self {
        let groups = n.div_ceil(LANES);
        let blocks = k / BLOCK;
        let mut q = vec![[zero; BLOCK * LANES]; groups * blocks];
        let mut s = vec![[0f32; LANES]; groups * blocks];
        let mut b = vec![[0f32; LANES]; groups];
        for r in 0..n {
            let (g, lane) = (r / LANES, r % LANES);
            b[g][lane] = bias(r);
            for blk in 0..blocks {
                s[g * blocks + blk][lane] = scale(r, blk);
                let out = &mut q[g * blocks + blk];
                for i in 0..BLOCK {
                    out[(i / 4 * LANES + lane) * 4 + i % 4] = byte(r, blk * BLOCK + i);
                }
            }
        }
        Self {
            n,
            k,
            zero,
            q,
            scales: s,
            bias: b,
        }
    }

    /// The stored byte of output `r`, input `c`.
    #[inline(always)]
    pub(crate) fn byte(&self, r: usize, c: usize) -> u8 {
        let blocks = self.k / BLOCK;
        let i = c % BLOCK;
        self.q[r / LANES * blocks + c / BLOCK][(i / 4 * LANES + r % LANES) * 4 + i % 4]
    }

    /// The scale of output `r`, block `b`.
    #[inline(always)]
    pub(crate) fn scale(&self, r: usize, b: usize) -> f32 {
        self.scales[r / LANES * (self.k / BLOCK) + b][r % LANES]
    }

    /// The bias of output `r`.
    #[inline(always)]
    pub(crate) fn bias(&self, r: usize) -> f32 {
        self.bias[r / LANES][r % LANES]
    }

    /// Output groups of [`LANES`] (the last one possibly partial).
    pub(crate) fn groups(&self) -> usize {
        self.n.div_ceil(LANES)
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
        // Output r of the whole is output r - start of the part that holds it.
        let mut owner = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            owner.extend((0..p.n).map(|r| (i, r)));
        }
        Ok(Self::pack(
            owner.len(),
            first.k,
            first.zero,
            |r, c| parts[owner[r].0].byte(owner[r].1, c),
            |r, b| parts[owner[r].0].scale(owner[r].1, b),
            |r| parts[owner[r].0].bias(owner[r].1),
        ))
    }

    /// Row `r` as f32 (the values, without bias).
    pub fn row(&self, r: usize, out: &mut [f32]) {
        let zero = f32::from(self.zero);
        for (c, o) in out.iter_mut().enumerate().take(self.k) {
            *o = (f32::from(self.byte(r, c)) - zero) * self.scale(r, c / BLOCK);
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.q[..])
            + std::mem::size_of_val(&self.scales[..])
            + std::mem::size_of_val(&self.bias[..])
    }
}

/// Activations `[m][k]` quantised per row and block for one multiply.
pub(crate) struct QInput {
    pub(crate) m: usize,
    /// `[m][k / BLOCK]` blocks of levels (`|q| ≤ 127`), 4 consecutive levels per i32 (little-endian
    /// bytes), the unit a kernel broadcasts.
    pub(crate) q: Vec<[i32; BLOCK / 4]>,
    /// `[m][k / BLOCK]` block scales.
    pub(crate) scales: Vec<f32>,
    /// `[m][k / BLOCK]`: `zero · Σ levels of the block`, what the weights' offset adds to the dot.
    pub(crate) corr: Vec<i32>,
}

impl QInput {
    pub(crate) fn new(x: &[f32], k: usize, zero: u8) -> Self {
        let m = x.len() / k;
        let blocks = k / BLOCK;
        let mut out = Self {
            m,
            q: vec![[0; BLOCK / 4]; m * blocks],
            scales: vec![0.0; m * blocks],
            corr: vec![0; m * blocks],
        };
        let zero = i32::from(zero);
        // Rows at a time, compiled for the best instruction set (rounding and the byte packing
        // vectorise only with SSE4.1 and up).
        let rows = |q: &mut [[i32; BLOCK / 4]], s: &mut [f32], corr: &mut [i32], x: &[f32]| {
            crate::ops::dispatch(
                #[inline(always)]
                || {
                    let (xb, _) = x.as_chunks::<BLOCK>();
                    for (((q, s), c), x) in q.iter_mut().zip(s).zip(corr).zip(xb) {
                        let mut levels = [0i8; BLOCK];
                        *s = quantize_block(x, &mut levels);
                        let (quads, _) = levels.as_chunks::<4>();
                        for (q, l) in q.iter_mut().zip(quads) {
                            *q = i32::from_le_bytes(l.map(|v| v as u8));
                        }
                        *c = zero * levels.iter().map(|&v| i32::from(v)).sum::<i32>();
                    }
                },
            )
        };
        const ROWS_PER_TASK: usize = 8;
        if m >= 2 * ROWS_PER_TASK {
            let per = ROWS_PER_TASK * blocks;
            out.q
                .par_chunks_mut(per)
                .zip(out.scales.par_chunks_mut(per))
                .zip(out.corr.par_chunks_mut(per))
                .zip(x.par_chunks(ROWS_PER_TASK * k))
                .for_each(|(((q, s), c), x)| rows(q, s, c, x));
        } else {
            rows(&mut out.q, &mut out.scales, &mut out.corr, x);
        }
        out
    }

    /// The level of row `i`, input `c`.
    #[cfg(test)]
    pub(crate) fn level(&self, i: usize, c: usize) -> i8 {
        let blocks = self.q.len() / self.m.max(1);
        let word = self.q[i * blocks + c / BLOCK][c % BLOCK / 4];
        word.to_le_bytes()[c % 4] as i8
    }
}

/// Quantise one block to symmetric int8: scale = max |x| / 127 (returned).
#[inline(always)]
fn quantize_block(x: &[f32; BLOCK], q: &mut [i8; BLOCK]) -> f32 {
    // The maximum in 16 lanes (max is exact, so the order does not matter; a fold would not
    // vectorise).
    let mut lanes = [0f32; 16];
    for half in x.as_chunks::<16>().0 {
        for l in 0..16 {
            lanes[l] = lanes[l].max(half[l].abs());
        }
    }
    let amax = lanes.iter().fold(0f32, |m, &v| m.max(v));
    if amax == 0.0 {
        q.fill(0);
        return 0.0;
    }
    let inv = 127.0 / amax;
    for (q, &v) in q.iter_mut().zip(x) {
        // Round half away from zero, clamped: |q| ≤ 127 keeps vpmaddubsw exact.
        *q = (v * inv).round().clamp(-127.0, 127.0) as i8;
    }
    amax / 127.0
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
                            i64::from(input.level(i, c))
                                * (i64::from(w.byte(n, c)) - i64::from(w.zero))
                        })
                        .sum();
                    acc += dot as f64
                        * f64::from(input.scales[i * blocks + b])
                        * f64::from(w.scale(n, b));
                }
                y[i * w.n + n] = (acc + f64::from(w.bias(n))) as f32;
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
                y[i * w.n + n] = dot as f32 + w.bias(n);
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
                let s = q.scale(r, b / BLOCK);
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
