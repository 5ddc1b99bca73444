//! The element-wise and per-row pieces of the encoder, written as plain loops that the compiler
//! vectorises inside pulp's dispatch (compiled once per instruction set, picked at run time).
//!
//! `erf` and `exp` are polynomial approximations accurate to a few f32 ulps over the range that
//! matters (checked against f64 references in the tests), so GELU and softmax vectorise instead of
//! calling libm per value.

use rayon::prelude::*;

/// Run `f` compiled for the best instruction set this CPU has.
#[inline(always)]
pub(crate) fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}

/// `erf(x)`: a rational approximation on [-4, 4] (|error| < 2e-7; outside, ±1 in f32).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.9546e-3;
    p = x2 * p + -1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    p / q
}

/// `e^x` for x ≤ 0 or moderate (softmax's shifted scores): range reduction by ln 2 and a degree-6
/// polynomial; at or below -87 it is 0 (as softmax over a masked score wants).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // n = round(x / ln 2) by the magic-number trick (vectorises, unlike `round`).
    let t = x * std::f32::consts::LOG2_E + 12_582_912.0;
    let n = t - 12_582_912.0;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let mut p = 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    let bits = ((n as i32 + 127) << 23) as u32;
    if x <= -87.0 {
        0.0
    } else {
        p * f32::from_bits(bits)
    }
}

/// GELU with the exact (erf) form, in place.
pub fn gelu(x: &mut [f32]) {
    let run = |x: &mut [f32]| {
        dispatch(
            #[inline(always)]
            || {
                for v in x.iter_mut() {
                    *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
                }
            },
        )
    };
    if x.len() >= 1 << 16 {
        x.par_chunks_mut(1 << 14).for_each(run);
    } else {
        run(x);
    }
}

/// LayerNorm over rows of `width`: `(x − mean) / sqrt(var + eps) · weight + bias`, in place, after
/// adding `residual` (same shape) when given.
pub fn add_layer_norm(
    x: &mut [f32],
    residual: Option<&[f32]>,
    width: usize,
    weight: &[f32],
    bias: &[f32],
    eps: f32,
) {
    let row = |x: &mut [f32], res: Option<&[f32]>| {
        dispatch(
            #[inline(always)]
            || {
                if let Some(r) = res {
                    for (v, r) in x.iter_mut().zip(r) {
                        *v += r;
                    }
                }
                let n = x.len() as f32;
                let mean = lane_sum(x, |v| v) / n;
                let var = lane_sum(x, |v| (v - mean) * (v - mean)) / n;
                let inv = 1.0 / (var + eps).sqrt();
                for ((v, w), b) in x.iter_mut().zip(weight).zip(bias) {
                    *v = (*v - mean) * inv * w + b;
                }
            },
        )
    };
    let rows = x.len() / width;
    match residual {
        Some(r) if rows >= 64 => x
            .par_chunks_mut(width)
            .zip(r.par_chunks(width))
            .for_each(|(x, r)| row(x, Some(r))),
        Some(r) => x
            .chunks_mut(width)
            .zip(r.chunks(width))
            .for_each(|(x, r)| row(x, Some(r))),
        None if rows >= 64 => x.par_chunks_mut(width).for_each(|x| row(x, None)),
        None => x.chunks_mut(width).for_each(|x| row(x, None)),
    }
}

/// `Σ f(x)` in 16 interleaved partial sums (then added in order), so the loop vectorises (f32 adds
/// do not reassociate); the order is fixed, so the result is the same on every CPU.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    let (chunks, tail) = x.as_chunks::<16>();
    for c in chunks {
        for l in 0..16 {
            acc[l] += f(c[l]);
        }
    }
    for (a, &v) in acc.iter_mut().zip(tail) {
        *a += f(v);
    }
    acc.iter().sum()
}

/// Softmax of one row, in place.
#[inline(always)]
pub(crate) fn softmax(x: &mut [f32]) {
    // The maximum in 16 lanes too (vectorises; max is exact, so the order does not matter).
    let mut lanes = [f32::NEG_INFINITY; 16];
    let (chunks, tail) = x.as_chunks::<16>();
    for c in chunks {
        for l in 0..16 {
            lanes[l] = lanes[l].max(c[l]);
        }
    }
    for (m, &v) in lanes.iter_mut().zip(tail) {
        *m = m.max(v);
    }
    let max = lanes.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    for v in x.iter_mut() {
        *v = exp(*v - max);
    }
    let sum = lane_sum(x, |v| v);
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// Softmax of each row of `width`, in place (the classifier's labels).
pub fn softmax_rows(x: &mut [f32], width: usize) {
    dispatch(
        #[inline(always)]
        || x.chunks_mut(width).for_each(softmax),
    )
}

/// A small f32 linear layer `[n][k]` (a classifier head), kept exact.
pub struct Dense {
    /// Outputs.
    pub n: usize,
    /// Inputs.
    pub k: usize,
    /// `[n][k]`.
    pub weight: Vec<f32>,
    /// `[n]`.
    pub bias: Vec<f32>,
}

impl Dense {
    /// `y[m][n] = x[m] · W[n] + bias[n]`.
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        let m = x.len() / self.k;
        let mut y = vec![0f32; m * self.n];
        dispatch(
            #[inline(always)]
            || {
                for (x, y) in x.chunks_exact(self.k).zip(y.chunks_exact_mut(self.n)) {
                    for ((y, w), b) in y
                        .iter_mut()
                        .zip(self.weight.chunks_exact(self.k))
                        .zip(&self.bias)
                    {
                        // Eight partial sums so the loop vectorises (f32 adds do not reassociate).
                        let mut acc = [0f32; 8];
                        for (xs, ws) in x.chunks_exact(8).zip(w.chunks_exact(8)) {
                            for l in 0..8 {
                                acc[l] += xs[l] * ws[l];
                            }
                        }
                        let tail: f32 = x[x.len() / 8 * 8..]
                            .iter()
                            .zip(&w[w.len() / 8 * 8..])
                            .map(|(a, b)| a * b)
                            .sum();
                        *y = acc.iter().sum::<f32>() + tail + b;
                    }
                }
            },
        );
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erf by its Maclaurin series in f64 (converges fast on [-4, 4] with enough terms).
    fn erf_ref(x: f64) -> f64 {
        if x.abs() > 3.0 {
            // Continued-fraction-free: 1 - erfc via the asymptotic series is not needed at this
            // precision; erf(±3..4) is ±1 to 2e-5 and f32 resolves that.
            let mut sum = 0.0;
            let mut term = x;
            let mut n = 0.0;
            while n < 200.0 {
                sum += term / (2.0 * n + 1.0);
                n += 1.0;
                term *= -x * x / n;
            }
            return 2.0 / std::f64::consts::PI.sqrt() * sum;
        }
        let mut sum = 0.0;
        let mut term = x;
        let mut n = 0.0;
        while term.abs() > 1e-17 || n < 5.0 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -x * x / n;
        }
        2.0 / std::f64::consts::PI.sqrt() * sum
    }

    #[test]
    fn erf_is_accurate_over_its_range() {
        let mut worst = 0f64;
        for i in -4000..=4000 {
            let x = i as f64 / 1000.0;
            let got = f64::from(erf(x as f32));
            worst = worst.max((got - erf_ref(x)).abs());
        }
        assert!(worst < 1e-6, "worst {worst}");
        assert_eq!(erf(9.0), erf(4.0));
    }

    #[test]
    fn exp_is_accurate_where_softmax_uses_it() {
        for i in -8690..=1000 {
            let x = i as f32 / 100.0;
            let (got, want) = (f64::from(exp(x)), f64::from(x).exp());
            assert!(
                ((got - want) / want).abs() < 2e-6,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert_eq!(exp(-1e9), 0.0);
    }

    #[test]
    fn layer_norm_and_softmax_rows() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0];
        add_layer_norm(&mut x, None, 4, &[1.0; 4], &[0.5; 4], 1e-12);
        let mean: f32 = x[..4].iter().sum::<f32>() / 4.0;
        assert!((mean - 0.5).abs() < 1e-6);
        assert!(
            x[4..].iter().all(|v| (v - 0.5).abs() < 1e-6),
            "a constant row"
        );
        let mut s = vec![0.0, 0.0, 1000.0, 0.0];
        softmax_rows(&mut s, 2);
        assert_eq!(s, vec![0.5, 0.5, 1.0, 0.0]);
    }
}
