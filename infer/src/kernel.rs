//! The int8 matrix multiply: AVX-512BW (pulp's `V4`), AVX2 (`V3`) or portable code, chosen at run time.
//!
//! Per output `y[m][n]`, per pair of blocks (64 bytes, one 512-bit register): `vpmaddubsw` multiplies
//! the weight bytes (u8) by the activation levels (i8) and adds neighbours into i16, `vpmaddwd` by ones
//! sums those into 16 i32 lanes of 4 products each, the weights' offset is taken off
//! (`zero · Σ x`, precomputed per lane), and the lanes are scaled (activation scale × weight scale of
//! their block) into an f32 accumulator. A tile of 4 rows × 3 outputs shares each load. The AVX2 path
//! does the same one block (256 bits) at a time. No VNNI: its intrinsics are not reachable without
//! `unsafe` (pulp does not expose them), and the workspace forbids `unsafe`.
//!
//! Threads: rows are split across rayon's current pool when there are many, else outputs (columns),
//! each part computed into its own buffer and copied into place.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m256, __m256i, __m512, __m512i};

#[cfg(target_arch = "x86_64")]
use pulp::x86::{V3, V4};
use rayon::prelude::*;

use crate::quant::{BLOCK, QInput, QMatrix};

/// The public multiply lives here, beside its kernels, so that `kernel` reaches `quant` (the data)
/// and never the other way round.
impl QMatrix {
    /// `y[m][n] = x[m] · W[n] + bias[n]` for `x` `[m][k]` (f32, row-major); `y` is `[m][n]`.
    /// Spread over rayon's current pool.
    pub fn matmul(&self, x: &[f32], y: &mut [f32]) {
        let m = x.len() / self.k;
        debug_assert_eq!(x.len(), m * self.k);
        debug_assert_eq!(y.len(), m * self.n);
        let input = QInput::new(x, self.k, self.zero);
        matmul(&input, self, y);
    }
}

/// Rows per tile.
const MR: usize = 4;
/// Outputs per tile (4 × 3 accumulators, the weights and the row's loads fit the 32 registers
/// without spilling; 4 × 4 spilled).
const NR: usize = 3;

/// `y = x · Wᵀ + bias`, `y` `[m][n]`.
pub(crate) fn matmul(x: &QInput, w: &QMatrix, y: &mut [f32]) {
    let (m, n) = (x.m, w.n);
    let threads = rayon::current_num_threads();
    let work = m * n * w.k;
    if threads <= 1 || work < 200_000 {
        block(x, w, 0..m, 0..n, y, n);
    } else if m >= 8 * threads {
        // Rows: each part writes whole rows of y.
        let rows_per = m.div_ceil(threads * 2).div_ceil(MR) * MR;
        y.par_chunks_mut(rows_per * n)
            .enumerate()
            .for_each(|(i, part)| {
                let r0 = i * rows_per;
                let r1 = (r0 + rows_per).min(m);
                block(x, w, r0..r1, 0..n, part, n);
            });
    } else {
        // Columns: each part computes [m][its columns], copied into place after.
        let cols_per = n.div_ceil(threads).div_ceil(NR) * NR;
        let parts: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(cols_per))
            .into_par_iter()
            .map(|i| {
                let c0 = i * cols_per;
                let c1 = (c0 + cols_per).min(n);
                let mut part = vec![0f32; m * (c1 - c0)];
                block(x, w, 0..m, c0..c1, &mut part, c1 - c0);
                (c0, part)
            })
            .collect();
        for (c0, part) in parts {
            let width = part.len() / m.max(1);
            for (row, src) in y.chunks_exact_mut(n).zip(part.chunks_exact(width)) {
                row[c0..c0 + width].copy_from_slice(src);
            }
        }
    }
}

/// Rows `rows` × outputs `cols` into `out` (row stride `ld`, starting at row `rows.start`, column
/// `cols.start`).
fn block(
    x: &QInput,
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &mut [f32],
    ld: usize,
) {
    let job = Block {
        x,
        w,
        rows,
        cols,
        out,
        ld,
    };
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = V4::try_new() {
        return simd.vectorize(
            #[inline(always)]
            || job.run_v4(simd),
        );
    } else if let Some(simd) = V3::try_new() {
        return simd.vectorize(
            #[inline(always)]
            || job.run_v3(simd),
        );
    }
    job.run_portable();
}

struct Block<'a> {
    x: &'a QInput,
    w: &'a QMatrix,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &'a mut [f32],
    ld: usize,
}

impl Block<'_> {
    /// Walk the tiles: full 4×4 tiles, then the edges one row or one output at a time.
    #[inline(always)]
    fn tiles(&mut self, mut tile: impl FnMut(usize, usize, usize, usize, &mut [f32], usize)) {
        let (r0, r1, c0, c1) = (
            self.rows.start,
            self.rows.end,
            self.cols.start,
            self.cols.end,
        );
        let mut n = c0;
        while n < c1 {
            let nr = if n + NR <= c1 { NR } else { 1 };
            let mut m = r0;
            while m < r1 {
                let mr = if m + MR <= r1 { MR } else { 1 };
                tile(m, mr, n, nr, self.out, self.ld);
                m += mr;
            }
            n += nr;
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn run_v4(mut self, simd: V4) {
        let (x, w, r0, c0) = (self.x, self.w, self.rows.start, self.cols.start);
        self.tiles(
            #[inline(always)]
            |m, mr, n, nr, out, ld| {
                let at = |i: usize, j: usize| (m + i - r0) * ld + (n + j - c0);
                match (mr, nr) {
                    (MR, NR) => {
                        let y = tile_v4::<MR, NR>(simd, x, m, w, n);
                        for i in 0..MR {
                            for j in 0..NR {
                                out[at(i, j)] = y[i][j];
                            }
                        }
                    }
                    (MR, _) => {
                        let y = tile_v4::<MR, 1>(simd, x, m, w, n);
                        for i in 0..MR {
                            out[at(i, 0)] = y[i][0];
                        }
                    }
                    (_, NR) => {
                        let y = tile_v4::<1, NR>(simd, x, m, w, n);
                        for j in 0..NR {
                            out[at(0, j)] = y[0][j];
                        }
                    }
                    _ => out[at(0, 0)] = tile_v4::<1, 1>(simd, x, m, w, n)[0][0],
                }
            },
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn run_v3(mut self, simd: V3) {
        let (x, w, r0, c0) = (self.x, self.w, self.rows.start, self.cols.start);
        self.tiles(
            #[inline(always)]
            |m, mr, n, nr, out, ld| {
                let at = |i: usize, j: usize| (m + i - r0) * ld + (n + j - c0);
                match (mr, nr) {
                    (MR, NR) => {
                        let y = tile_v3::<MR, NR>(simd, x, m, w, n);
                        for i in 0..MR {
                            for j in 0..NR {
                                out[at(i, j)] = y[i][j];
                            }
                        }
                    }
                    _ => {
                        for i in 0..mr {
                            for j in 0..nr {
                                out[at(i, j)] = tile_v3::<1, 1>(simd, x, m + i, w, n + j)[0][0];
                            }
                        }
                    }
                }
            },
        );
    }

    fn run_portable(mut self) {
        let (x, w, r0, c0) = (self.x, self.w, self.rows.start, self.cols.start);
        self.tiles(
            #[inline(always)]
            |m, mr, n, nr, out, ld| {
                for i in 0..mr {
                    for j in 0..nr {
                        out[(m + i - r0) * ld + (n + j - c0)] =
                            portable(x, m + i, w, n + j, 0) + w.bias[n + j];
                    }
                }
            },
        );
    }
}

/// One output without bias, blocks from `from_block` on, in plain code (also the tail of the SIMD
/// paths).
#[inline(always)]
fn portable(x: &QInput, m: usize, w: &QMatrix, n: usize, from_block: usize) -> f32 {
    let k = w.k;
    let blocks = k / BLOCK;
    let zero = i32::from(w.zero);
    let xq = &x.q[m * k..(m + 1) * k];
    let wq = &w.q[n * k..(n + 1) * k];
    let mut acc = 0f32;
    for b in from_block..blocks {
        let dot: i32 = xq[b * BLOCK..(b + 1) * BLOCK]
            .iter()
            .zip(&wq[b * BLOCK..(b + 1) * BLOCK])
            .map(|(&a, &c)| i32::from(a) * (i32::from(c) - zero))
            .sum();
        acc += dot as f32 * x.scales[m * blocks + b] * w.scales[n * blocks + b];
    }
    acc
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn load512(bytes: &[u8]) -> __m512i {
    pulp::bytemuck::pod_read_unaligned(&bytes[..64])
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn load512_f32(v: &[f32]) -> __m512 {
    pulp::bytemuck::pod_read_unaligned(pulp::bytemuck::cast_slice(&v[..16]))
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn load512_i32(v: &[i32]) -> __m512i {
    pulp::bytemuck::pod_read_unaligned(pulp::bytemuck::cast_slice(&v[..16]))
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn load256(bytes: &[u8]) -> __m256i {
    pulp::bytemuck::pod_read_unaligned(&bytes[..32])
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn load256_i32(v: &[i32]) -> __m256i {
    pulp::bytemuck::pod_read_unaligned(pulp::bytemuck::cast_slice(&v[..8]))
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)] // tiles index rows and outputs together
/// A tile of `R` rows × `C` outputs (bias included), AVX-512.
#[inline(always)]
fn tile_v4<const R: usize, const C: usize>(
    simd: V4,
    x: &QInput,
    m: usize,
    w: &QMatrix,
    n: usize,
) -> [[f32; C]; R] {
    let f = simd.avx512f;
    let bw = simd.avx512bw;
    let k = w.k;
    let blocks = k / BLOCK;
    let chunks = k / 64;
    let ones = f._mm512_set1_epi16(1);
    let xbytes: &[u8] = pulp::bytemuck::cast_slice(&x.q);
    let mut acc = [[f._mm512_setzero_ps(); C]; R];
    for c in 0..chunks {
        let mut wv = [f._mm512_setzero_si512(); C];
        let mut sw = [f._mm512_setzero_ps(); C];
        for j in 0..C {
            let row = (n + j) * k + c * 64;
            wv[j] = load512(&w.q[row..]);
            let s = (n + j) * blocks + 2 * c;
            sw[j] = f._mm512_mask_blend_ps(
                0xff00,
                f._mm512_set1_ps(w.scales[s]),
                f._mm512_set1_ps(w.scales[s + 1]),
            );
        }
        for i in 0..R {
            let row = m + i;
            let xv = load512(&xbytes[row * k + c * 64..]);
            let lanes = row * (k / 4) + c * 16;
            let corr = load512_i32(&x.corr[lanes..]);
            let sx = load512_f32(&x.lane_scales[lanes..]);
            for j in 0..C {
                let p = bw._mm512_maddubs_epi16(wv[j], xv);
                let q = f._mm512_sub_epi32(bw._mm512_madd_epi16(p, ones), corr);
                let s = f._mm512_mul_ps(sx, sw[j]);
                acc[i][j] = f._mm512_fmadd_ps(f._mm512_cvtepi32_ps(q), s, acc[i][j]);
            }
        }
    }
    let mut out = [[0f32; C]; R];
    for i in 0..R {
        for j in 0..C {
            let tail = if chunks * 2 < blocks {
                portable(x, m + i, w, n + j, chunks * 2)
            } else {
                0.0
            };
            out[i][j] = f._mm512_reduce_add_ps(acc[i][j]) + tail + w.bias[n + j];
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)] // tiles index rows and outputs together
/// A tile of `R` rows × `C` outputs (bias included), AVX2.
#[inline(always)]
fn tile_v3<const R: usize, const C: usize>(
    simd: V3,
    x: &QInput,
    m: usize,
    w: &QMatrix,
    n: usize,
) -> [[f32; C]; R] {
    let a = simd.avx;
    let a2 = simd.avx2;
    let fma = simd.fma;
    let k = w.k;
    let blocks = k / BLOCK;
    let ones = a._mm256_set1_epi16(1);
    let xbytes: &[u8] = pulp::bytemuck::cast_slice(&x.q);
    let mut acc: [[__m256; C]; R] = [[a._mm256_setzero_ps(); C]; R];
    for b in 0..blocks {
        let mut wv = [a._mm256_setzero_si256(); C];
        let mut sw = [0f32; C];
        for j in 0..C {
            wv[j] = load256(&w.q[(n + j) * k + b * BLOCK..]);
            sw[j] = w.scales[(n + j) * blocks + b];
        }
        for i in 0..R {
            let row = m + i;
            let xv = load256(&xbytes[row * k + b * BLOCK..]);
            let corr = load256_i32(&x.corr[row * (k / 4) + b * 8..]);
            let sx = x.scales[row * blocks + b];
            for j in 0..C {
                let p = a2._mm256_maddubs_epi16(wv[j], xv);
                let q = a2._mm256_sub_epi32(a2._mm256_madd_epi16(p, ones), corr);
                let s = a._mm256_set1_ps(sx * sw[j]);
                acc[i][j] = fma._mm256_fmadd_ps(a._mm256_cvtepi32_ps(q), s, acc[i][j]);
            }
        }
    }
    let mut out = [[0f32; C]; R];
    for i in 0..R {
        for j in 0..C {
            let lanes: [f32; 8] = pulp::bytemuck::cast(acc[i][j]);
            out[i][j] = lanes.iter().sum::<f32>() + w.bias[n + j];
        }
    }
    out
}
