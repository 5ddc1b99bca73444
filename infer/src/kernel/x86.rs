//! The VNNI kernels: AVX-512 VNNI (512-bit `vpdpbusd`) and AVX-VNNI (256-bit, for CPUs without
//! AVX-512). **The only module of the workspace allowed `unsafe`** (see `docs/development.md`, "Where
//! `unsafe` may live"; `tests/tests/unsafe_policy.rs` enforces it).
//!
//! What is unsafe here, and why it is sound: only the calls into the `#[target_feature]` functions,
//! once per job. Such a call is sound when the CPU has the features, and the tokens ([`Avx512Vnni`],
//! [`AvxVnni`]) can only be made by `detect`, after `is_x86_feature_detected!` said so (at load, by
//! `kernel::chosen`). Inside, the intrinsics are safe functions (Rust ≥ 1.87 in a function with the
//! features), and every load goes through a slice or a fixed-size array (`pod_read_unaligned` of a
//! `&[u8; 64]`, indexing checked), so nothing reads past a slice's end whatever the shapes.
//!
//! The micro-kernel ("broadcast the activations, a vector of outputs"): the weights are packed 16
//! outputs × 4 consecutive `k` per 64 bytes (`quant::PackedBlock`), so one `vpdpbusd` adds 4 `k` of
//! 16 outputs into 16 i32 lanes, with the row's 4 activation bytes broadcast to every lane. Per block
//! of 32: 8 of them into an exact i32 dot, then the zero-point correction (one scalar per row and
//! block) and the f32 step of `quant`'s definition, lane by lane, in the same order as the portable
//! kernel (multiply, multiply, add: no FMA), so each output's bits are the portable one's.
//! Tiles: 6 rows × 32 outputs on AVX-512 (12 i32 + 12 f32 accumulators, 2 weight vectors and a
//! broadcast in 32 registers), 4 rows × 16 outputs on AVX-VNNI (16 registers: the f32 accumulators,
//! touched once per block, may live on the stack).

#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::{
    __m256, __m256i, __m512, __m512i, _mm256_add_ps, _mm256_cvtepi32_ps, _mm256_dpbusd_avx_epi32,
    _mm256_mul_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setzero_ps, _mm256_setzero_si256,
    _mm256_sub_epi32, _mm512_add_ps, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_mul_ps,
    _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_ps, _mm512_setzero_si512, _mm512_sub_epi32,
};

use pulp::bytemuck::{cast, pod_read_unaligned};

use super::Job;
use crate::quant::{BLOCK, LANES};

/// Proof that this CPU has AVX-512F, AVX-512BW and AVX-512 VNNI (made only by [`Avx512Vnni::detect`]).
#[derive(Clone, Copy)]
pub(super) struct Avx512Vnni(());

/// Proof that this CPU has AVX, AVX2, FMA and AVX-VNNI (made only by [`AvxVnni::detect`]).
#[derive(Clone, Copy)]
pub(super) struct AvxVnni(());

impl Avx512Vnni {
    /// The token, when the CPU has the features.
    pub(super) fn detect() -> Option<Self> {
        let has = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni");
        has.then_some(Self(()))
    }

    /// Every output of the job.
    pub(super) fn run(self, job: &mut Job) {
        // SAFETY: `self` exists only if `detect` saw avx512f, avx512bw and avx512vnni through
        // `is_x86_feature_detected!`, the features `run512` is compiled for. Bounds: `run512` reads
        // only through slices and fixed-size arrays (checked indexing), so no shape makes it read
        // out of bounds.
        unsafe { run512(job) }
    }
}

impl AvxVnni {
    /// The token, when the CPU has the features.
    pub(super) fn detect() -> Option<Self> {
        let has = is_x86_feature_detected!("avx")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("avxvnni");
        has.then_some(Self(()))
    }

    /// Every output of the job.
    pub(super) fn run(self, job: &mut Job) {
        // SAFETY: `self` exists only if `detect` saw avx, avx2, fma and avxvnni through
        // `is_x86_feature_detected!`, the features `run256` is compiled for. Bounds: `run256` reads
        // only through slices and fixed-size arrays (checked indexing).
        unsafe { run256(job) }
    }
}

/// One 64-byte weight vector (4 `k` × 16 outputs) of a packed block.
#[inline(always)]
fn quad(block: &[u8; BLOCK * LANES], t: usize) -> &[u8; 64] {
    let (quads, _) = block.as_chunks::<64>();
    &quads[t]
}

/// Walk the job's tiles: `rows` at a time (then 4, 2, 1 for the ragged end) × pairs of groups (then
/// one).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn run512(job: &mut Job) {
    let (rows, groups) = (job.rows.clone(), job.groups.clone());
    let mut g = groups.start;
    while g < groups.end {
        let two = g + 2 <= groups.end;
        let mut r = rows.start;
        while r < rows.end {
            let left = rows.end - r;
            let step = match (left, two) {
                (6.., true) => tile512::<6, 2>(job, r, g),
                (4.., true) => tile512::<4, 2>(job, r, g),
                (2.., true) => tile512::<2, 2>(job, r, g),
                (_, true) => tile512::<1, 2>(job, r, g),
                (6.., false) => tile512::<6, 1>(job, r, g),
                (4.., false) => tile512::<4, 1>(job, r, g),
                (2.., false) => tile512::<2, 1>(job, r, g),
                (_, false) => tile512::<1, 1>(job, r, g),
            };
            r += step;
        }
        g += if two { 2 } else { 1 };
    }
}

/// `R` rows × `G` groups of 16 outputs, from row `r0`, group `g0`; returns `R`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
#[allow(clippy::needless_range_loop)] // rows and groups index several arrays together
fn tile512<const R: usize, const G: usize>(job: &mut Job, r0: usize, g0: usize) -> usize {
    let (x, w) = (job.x, job.w);
    let blocks = w.k / BLOCK;
    let mut acc = [[_mm512_setzero_ps(); G]; R];
    for b in 0..blocks {
        let mut wb = [&w.q[g0 * blocks + b]; G];
        for g in 1..G {
            wb[g] = &w.q[(g0 + g) * blocks + b];
        }
        let mut xb = [&x.q[r0 * blocks + b]; R];
        for i in 1..R {
            xb[i] = &x.q[(r0 + i) * blocks + b];
        }
        let mut dot = [[_mm512_setzero_si512(); G]; R];
        for t in 0..BLOCK / 4 {
            let mut wv = [_mm512_setzero_si512(); G];
            for g in 0..G {
                wv[g] = pod_read_unaligned::<__m512i>(quad(wb[g], t));
            }
            for i in 0..R {
                let xv = _mm512_set1_epi32(xb[i][t]);
                for g in 0..G {
                    dot[i][g] = _mm512_dpbusd_epi32(dot[i][g], wv[g], xv);
                }
            }
        }
        let mut sw = [_mm512_setzero_ps(); G];
        for g in 0..G {
            sw[g] = cast::<[f32; LANES], __m512>(w.scales[(g0 + g) * blocks + b]);
        }
        for i in 0..R {
            let at = (r0 + i) * blocks + b;
            let corr = _mm512_set1_epi32(x.corr[at]);
            let sx = _mm512_set1_ps(x.scales[at]);
            for g in 0..G {
                let d = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot[i][g], corr));
                acc[i][g] = _mm512_add_ps(acc[i][g], _mm512_mul_ps(d, _mm512_mul_ps(sx, sw[g])));
            }
        }
    }
    for g in 0..G {
        let bias = cast::<[f32; LANES], __m512>(w.bias[g0 + g]);
        for i in 0..R {
            let y: [f32; LANES] = cast(_mm512_add_ps(acc[i][g], bias));
            job.store(r0 + i, g0 + g, &y);
        }
    }
    R
}

/// Walk the job's tiles: 4 rows at a time (then 2, 1) × one group (two 256-bit halves).
#[target_feature(enable = "avx,avx2,fma,avxvnni")]
fn run256(job: &mut Job) {
    let (rows, groups) = (job.rows.clone(), job.groups.clone());
    for g in groups {
        let mut r = rows.start;
        while r < rows.end {
            r += match rows.end - r {
                4.. => tile256::<4>(job, r, g),
                2.. => tile256::<2>(job, r, g),
                _ => tile256::<1>(job, r, g),
            };
        }
    }
}

/// `R` rows × one group of 16 outputs (two halves of 8), from row `r0`, group `g`; returns `R`.
#[target_feature(enable = "avx,avx2,fma,avxvnni")]
#[inline]
#[allow(clippy::needless_range_loop)] // rows and halves index several arrays together
fn tile256<const R: usize>(job: &mut Job, r0: usize, g: usize) -> usize {
    let (x, w) = (job.x, job.w);
    let blocks = w.k / BLOCK;
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for b in 0..blocks {
        let wb = &w.q[g * blocks + b];
        let mut xb = [&x.q[r0 * blocks + b]; R];
        for i in 1..R {
            xb[i] = &x.q[(r0 + i) * blocks + b];
        }
        let mut dot = [[_mm256_setzero_si256(); 2]; R];
        for t in 0..BLOCK / 4 {
            let (lo, hi) = quad(wb, t).split_at(32);
            let wv: [__m256i; 2] = [pod_read_unaligned(lo), pod_read_unaligned(hi)];
            for i in 0..R {
                let xv = _mm256_set1_epi32(xb[i][t]);
                for h in 0..2 {
                    dot[i][h] = _mm256_dpbusd_avx_epi32(dot[i][h], wv[h], xv);
                }
            }
        }
        let sw: [__m256; 2] = cast(w.scales[g * blocks + b]);
        for i in 0..R {
            let at = (r0 + i) * blocks + b;
            let corr = _mm256_set1_epi32(x.corr[at]);
            let sx = _mm256_set1_ps(x.scales[at]);
            for h in 0..2 {
                let d = _mm256_cvtepi32_ps(_mm256_sub_epi32(dot[i][h], corr));
                acc[i][h] = _mm256_add_ps(acc[i][h], _mm256_mul_ps(d, _mm256_mul_ps(sx, sw[h])));
            }
        }
    }
    let bias: [__m256; 2] = cast(w.bias[g]);
    for i in 0..R {
        let y: [f32; LANES] = cast([
            _mm256_add_ps(acc[i][0], bias[0]),
            _mm256_add_ps(acc[i][1], bias[1]),
        ]);
        job.store(r0 + i, g, &y);
    }
    R
}
