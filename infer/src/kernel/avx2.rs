//! The AVX2 kernel, for x86 CPUs without VNNI, written over pulp's safe `V3` token (no `unsafe`).
//!
//! The same micro-kernel as `x86`'s AVX-VNNI one (4 rows × 16 outputs, activations broadcast 4 bytes
//! at a time, weights packed 16 outputs × 4 `k`), with `vpdpbusd` spelled as `vpmaddubsw` (u8 × i8
//! pairs into i16, exact: 2 · 127 · 127 < 32,767) + `vpmaddwd` by ones (into i32) + an add. The f32
//! step is `quant`'s definition lane by lane, so the bits are the portable kernel's.

#[cfg(target_arch = "x86_64")]
pub(super) use imp::run;

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::x86_64::{__m256, __m256i};

    use pulp::bytemuck::{cast, pod_read_unaligned};
    use pulp::x86::V3;

    use super::super::Job;
    use crate::quant::{BLOCK, LANES};

    /// Every output of the job, compiled for AVX2.
    pub(in super::super) fn run(simd: V3, job: &mut Job) {
        simd.vectorize(
            #[inline(always)]
            || {
                let (rows, groups) = (job.rows.clone(), job.groups.clone());
                for g in groups {
                    let mut r = rows.start;
                    while r < rows.end {
                        r += match rows.end - r {
                            4.. => tile::<4>(simd, job, r, g),
                            2.. => tile::<2>(simd, job, r, g),
                            _ => tile::<1>(simd, job, r, g),
                        };
                    }
                }
            },
        )
    }

    /// `R` rows × one group of 16 outputs (two halves of 8), from row `r0`, group `g`; returns `R`.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // rows and halves index several arrays together
    fn tile<const R: usize>(simd: V3, job: &mut Job, r0: usize, g: usize) -> usize {
        let (a, a2) = (simd.avx, simd.avx2);
        let (x, w) = (job.x, job.w);
        let blocks = w.k / BLOCK;
        let ones = a._mm256_set1_epi16(1);
        let mut acc = [[a._mm256_setzero_ps(); 2]; R];
        for b in 0..blocks {
            let wb = &w.q[g * blocks + b];
            let (quads, _) = wb.as_chunks::<64>();
            let mut xb = [&x.q[r0 * blocks + b]; R];
            for i in 1..R {
                xb[i] = &x.q[(r0 + i) * blocks + b];
            }
            let mut dot = [[a._mm256_setzero_si256(); 2]; R];
            for t in 0..BLOCK / 4 {
                let (lo, hi) = quads[t].split_at(32);
                let wv: [__m256i; 2] = [pod_read_unaligned(lo), pod_read_unaligned(hi)];
                for i in 0..R {
                    let xv = a._mm256_set1_epi32(xb[i][t]);
                    for h in 0..2 {
                        let p = a2._mm256_madd_epi16(a2._mm256_maddubs_epi16(wv[h], xv), ones);
                        dot[i][h] = a2._mm256_add_epi32(dot[i][h], p);
                    }
                }
            }
            let sw: [__m256; 2] = cast(w.scales[g * blocks + b]);
            for i in 0..R {
                let at = (r0 + i) * blocks + b;
                let corr = a._mm256_set1_epi32(x.corr[at]);
                let sx = a._mm256_set1_ps(x.scales[at]);
                for h in 0..2 {
                    let d = a._mm256_cvtepi32_ps(a2._mm256_sub_epi32(dot[i][h], corr));
                    let s = a._mm256_mul_ps(sx, sw[h]);
                    acc[i][h] = a._mm256_add_ps(acc[i][h], a._mm256_mul_ps(d, s));
                }
            }
        }
        let bias: [__m256; 2] = cast(w.bias[g]);
        for i in 0..R {
            let y: [f32; LANES] = cast([
                a._mm256_add_ps(acc[i][0], bias[0]),
                a._mm256_add_ps(acc[i][1], bias[1]),
            ]);
            job.store(r0 + i, g, &y);
        }
        R
    }
}
