//! The int8 matrix multiply: which kernel runs, how the work is split over threads, and the public
//! [`QMatrix::matmul`].
//!
//! Kernels, fastest first: AVX-512 VNNI and AVX-VNNI (`vpdpbusd`, in [`x86`], the only module of the
//! workspace allowed `unsafe`), AVX2 (pulp's safe `V3` token, in [`avx2`]) and the portable reference
//! (plain Rust, every CPU, in [`portable`]). One is chosen once, at first use, by
//! `is_x86_feature_detected!`; `OPC_KERNEL=portable|avx2|avx512vnni|avxvnni` overrides it (benches,
//! bug reports), and [`from_env`] refuses a value this CPU cannot run.
//!
//! Invariant: every kernel computes the same f32 bits for every output (the order of operations is
//! fixed by `quant`'s definition and each output's sum runs in one SIMD lane), so the choice of
//! kernel, of thread count and of split never changes a result. `infer/tests/kernels.rs` checks it
//! bit for bit.
//!
//! Threads: rows are split across rayon's current pool when there are many, else output groups
//! (columns), each part computed into its own buffer and copied into place.

mod avx2;
mod portable;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::ops::Range;
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::quant::{LANES, QInput, QMatrix};

/// The environment variable that overrides the automatic choice.
pub const VAR: &str = "OPC_KERNEL";

/// An int8 kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, every CPU: the reference the others are checked against.
    Portable,
    /// x86 AVX2 (`vpmaddubsw` + `vpmaddwd`), through pulp's safe token.
    Avx2,
    /// x86 AVX-512 VNNI (`vpdpbusd` on 512 bits).
    Avx512Vnni,
    /// x86 AVX-VNNI (`vpdpbusd` on 256 bits, for CPUs without AVX-512).
    AvxVnni,
}

impl Kernel {
    /// Every kernel, fastest first (the automatic choice takes the first this CPU runs).
    pub const ALL: [Kernel; 4] = [
        Kernel::Avx512Vnni,
        Kernel::AvxVnni,
        Kernel::Avx2,
        Kernel::Portable,
    ];

    /// Its name, as `OPC_KERNEL` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512Vnni => "avx512vnni",
            Kernel::AvxVnni => "avxvnni",
        }
    }

    /// Whether this CPU can run it.
    pub fn runs_here(self) -> bool {
        Chosen::of(self).is_some()
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `OPC_KERNEL` names no kernel, or one this CPU cannot run.
#[derive(Debug, thiserror::Error)]
#[error(
    "{VAR}={value:?} {why}; this CPU runs: {runs}\nhint: unset {VAR} for the automatic choice \
     ({auto}), or set it to one of: {runs}"
)]
pub struct KernelError {
    value: String,
    why: &'static str,
    runs: String,
    auto: Kernel,
}

/// The kernels this CPU runs, fastest first.
pub fn available() -> Vec<Kernel> {
    Kernel::ALL.into_iter().filter(|k| k.runs_here()).collect()
}

/// The fastest kernel this CPU runs.
pub fn automatic() -> Kernel {
    Kernel::ALL
        .into_iter()
        .find(|k| k.runs_here())
        .unwrap_or(Kernel::Portable)
}

/// The kernel `OPC_KERNEL` asks for (the automatic one when it is unset or empty), or why it cannot
/// be used. The binary calls this at start-up, so a bad value stops it with the fix.
pub fn from_env() -> Result<Kernel, KernelError> {
    match std::env::var(VAR) {
        Err(_) => Ok(automatic()),
        Ok(v) if v.trim().is_empty() => Ok(automatic()),
        Ok(v) => parse(v.trim()),
    }
}

fn parse(value: &str) -> Result<Kernel, KernelError> {
    let runs = available()
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ");
    let err = |why| KernelError {
        value: value.to_owned(),
        why,
        runs: runs.clone(),
        auto: automatic(),
    };
    match Kernel::ALL
        .into_iter()
        .find(|k| k.name().eq_ignore_ascii_case(value))
    {
        None => Err(err("is not a kernel (portable, avx2, avx512vnni, avxvnni)")),
        Some(k) if !k.runs_here() => Err(err("needs instructions this CPU does not have")),
        Some(k) => Ok(k),
    }
}

/// The kernel every multiply uses: `OPC_KERNEL`'s when valid, else the automatic one (never panics;
/// [`from_env`] is what reports a bad value). Decided once per process.
pub fn selected() -> Kernel {
    chosen().kernel()
}

fn chosen() -> Chosen {
    static CHOSEN: OnceLock<Chosen> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let k = from_env().unwrap_or_else(|_| automatic());
        Chosen::of(k).unwrap_or(Chosen::Portable)
    })
}

/// A kernel with the proof that this CPU runs it (the x86 tokens exist only after a feature check).
#[derive(Clone, Copy)]
enum Chosen {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2(pulp::x86::V3),
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni(x86::Avx512Vnni),
    #[cfg(target_arch = "x86_64")]
    AvxVnni(x86::AvxVnni),
}

impl Chosen {
    fn of(kernel: Kernel) -> Option<Chosen> {
        match kernel {
            Kernel::Portable => Some(Chosen::Portable),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => pulp::x86::V3::try_new().map(Chosen::Avx2),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => x86::Avx512Vnni::detect().map(Chosen::Avx512Vnni),
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => x86::AvxVnni::detect().map(Chosen::AvxVnni),
            #[cfg(not(target_arch = "x86_64"))]
            _ => None,
        }
    }

    fn kernel(self) -> Kernel {
        match self {
            Chosen::Portable => Kernel::Portable,
            #[cfg(target_arch = "x86_64")]
            Chosen::Avx2(_) => Kernel::Avx2,
            #[cfg(target_arch = "x86_64")]
            Chosen::Avx512Vnni(_) => Kernel::Avx512Vnni,
            #[cfg(target_arch = "x86_64")]
            Chosen::AvxVnni(_) => Kernel::AvxVnni,
        }
    }

    fn run(self, job: &mut Job) {
        match self {
            Chosen::Portable => portable::run(job),
            #[cfg(target_arch = "x86_64")]
            Chosen::Avx2(simd) => avx2::run(simd, job),
            #[cfg(target_arch = "x86_64")]
            Chosen::Avx512Vnni(token) => token.run(job),
            #[cfg(target_arch = "x86_64")]
            Chosen::AvxVnni(token) => token.run(job),
        }
    }
}

/// The public multiply lives here, beside its kernels, so that `kernel` reaches `quant` (the data)
/// and never the other way round.
impl QMatrix {
    /// `y[m][n] = x[m] · W[n] + bias[n]` for `x` `[m][k]` (f32, row-major); `y` is `[m][n]`.
    /// Spread over rayon's current pool, with the [`selected`] kernel.
    pub fn matmul(&self, x: &[f32], y: &mut [f32]) {
        let m = x.len() / self.k;
        debug_assert_eq!(x.len(), m * self.k);
        debug_assert_eq!(y.len(), m * self.n);
        let input = QInput::new(&x[..m * self.k], self.k, self.zero);
        matmul(chosen(), &input, self, &mut y[..m * self.n]);
    }

    /// The same multiply with a given kernel (benches and the equality tests), or why this CPU cannot
    /// run it.
    pub fn matmul_with(&self, kernel: Kernel, x: &[f32], y: &mut [f32]) -> Result<(), KernelError> {
        let chosen = Chosen::of(kernel).ok_or_else(|| {
            parse(kernel.name()).err().unwrap_or_else(|| KernelError {
                value: kernel.name().into(),
                why: "is not available",
                runs: String::new(),
                auto: automatic(),
            })
        })?;
        let m = x.len() / self.k;
        let input = QInput::new(&x[..m * self.k], self.k, self.zero);
        matmul(chosen, &input, self, &mut y[..m * self.n]);
        Ok(())
    }
}

/// Rows per part when rows are split over threads: a multiple of every kernel's tile height.
const ROW_UNIT: usize = 12;

/// `y = x · Wᵀ + bias`, `y` `[m][n]`.
fn matmul(kernel: Chosen, x: &QInput, w: &QMatrix, y: &mut [f32]) {
    let (m, n, groups) = (x.m, w.n, w.groups());
    let threads = rayon::current_num_threads();
    let work = m * n * w.k;
    if threads <= 1 || work < 200_000 {
        kernel.run(&mut Job::new(x, w, 0..m, 0..groups, y, n));
    } else if m >= 8 * threads {
        // Rows: each part writes whole rows of y.
        let rows_per = m.div_ceil(threads * 2).div_ceil(ROW_UNIT) * ROW_UNIT;
        y.par_chunks_mut(rows_per * n)
            .enumerate()
            .for_each(|(i, part)| {
                let r0 = i * rows_per;
                let r1 = (r0 + rows_per).min(m);
                kernel.run(&mut Job::new(x, w, r0..r1, 0..groups, part, n));
            });
    } else {
        // Columns: each part computes [m][its outputs], copied into place after. Parts are whole
        // pairs of groups (a 32-wide tile).
        let groups_per = groups.div_ceil(threads).div_ceil(2) * 2;
        let parts: Vec<(usize, Vec<f32>)> = (0..groups.div_ceil(groups_per))
            .into_par_iter()
            .map(|i| {
                let g0 = i * groups_per;
                let g1 = (g0 + groups_per).min(groups);
                let width = (g1 * LANES).min(n) - g0 * LANES;
                let mut part = vec![0f32; m * width];
                kernel.run(&mut Job::new(x, w, 0..m, g0..g1, &mut part, width));
                (g0 * LANES, part)
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

/// Rows `rows` × output groups `groups` of one multiply, into `out` (row stride `ld`, starting at
/// row `rows.start`, output `groups.start · LANES`).
pub(crate) struct Job<'a> {
    pub(crate) x: &'a QInput,
    pub(crate) w: &'a QMatrix,
    pub(crate) rows: Range<usize>,
    pub(crate) groups: Range<usize>,
    out: &'a mut [f32],
    ld: usize,
}

impl<'a> Job<'a> {
    fn new(
        x: &'a QInput,
        w: &'a QMatrix,
        rows: Range<usize>,
        groups: Range<usize>,
        out: &'a mut [f32],
        ld: usize,
    ) -> Self {
        Self {
            x,
            w,
            rows,
            groups,
            out,
            ld,
        }
    }

    /// Store the 16 outputs of group `g` for row `r` (those past `n` are padding, dropped).
    #[inline(always)]
    pub(crate) fn store(&mut self, r: usize, g: usize, y: &[f32; LANES]) {
        let c = g * LANES;
        let width = LANES.min(self.w.n - c);
        let at = (r - self.rows.start) * self.ld + (c - self.groups.start * LANES);
        self.out[at..at + width].copy_from_slice(&y[..width]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_override_names_the_variable_the_value_and_the_fix() {
        let e = parse("avx9000")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        for part in [
            VAR,
            "\"avx9000\"",
            "is not a kernel",
            "portable",
            "hint: unset",
        ] {
            assert!(e.contains(part), "{part:?} missing from: {e}");
        }
        assert_eq!(parse("portable").ok(), Some(Kernel::Portable));
        // Names are case-blind; a kernel this CPU lacks is refused with the same message's shape.
        if Kernel::Avx2.runs_here() {
            assert_eq!(parse("AVX2").ok(), Some(Kernel::Avx2));
        } else {
            assert!(parse("avx2").is_err());
        }
    }

    #[test]
    fn the_automatic_choice_is_the_fastest_available() {
        assert_eq!(available().first().copied(), Some(automatic()));
        assert!(available().contains(&Kernel::Portable));
        assert!(Kernel::ALL.iter().any(|&k| k == selected()));
    }
}
