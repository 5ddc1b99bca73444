//! Every int8 kernel this CPU runs computes the portable kernel's results **bit for bit**
//! (`to_bits()` equality), on random shapes with ragged edges (outputs not a multiple of the 16- or
//! 32-wide tile, rows not a multiple of the 6- or 4-high one, `k` = 32 · odd), 7-bit and 4-bit
//! levels, random scales, activations with outliers, one row and many, and under every thread split
//! (rows, output groups, none).
//!
//! Gated by `opc-testgate`'s `vnni` group: on a CPU without AVX-512 VNNI or AVX-VNNI the VNNI
//! comparison skips on a developer's machine and fails under CI. The kernels compared are written to
//! `$OPC_TEST_GROUPS/../kernels-tested` for `.ci/run` to print.

#![allow(clippy::unwrap_used, missing_docs)]

use opc_infer::QMatrix;
use opc_infer::kernel::{self, Kernel};
use opc_testgate::Group;
use proptest::prelude::*;

/// A small deterministic generator, so a shrunk case reproduces from its seed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() % (1 << 24)) as f32 / (1 << 23) as f32 - 1.0
    }
}

struct Case {
    w: QMatrix,
    x: Vec<f32>,
    m: usize,
}

fn case(m: usize, n: usize, k: usize, four_bit: bool, seed: u64) -> Case {
    let mut rng = Lcg(seed);
    let (lo, hi) = if four_bit { (-8i64, 7i64) } else { (-63, 63) };
    let levels: Vec<i8> = (0..n * k)
        .map(|_| (lo + (rng.next() % (hi - lo + 1) as u64) as i64) as i8)
        .collect();
    // Scales over four decades, a few exactly zero (an all-zero block quantises so).
    let scales: Vec<f32> = (0..n * k / 32)
        .map(|_| match rng.next() % 16 {
            0 => 0.0,
            _ => 10f32.powf(-4.0 + 3.0 * (rng.unit() + 1.0) / 2.0),
        })
        .collect();
    let bias: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
    let mut x: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
    // Outliers, as BERT's hidden states have a few large dimensions; and a row block of zeros.
    for _ in 0..(m * k / 97).max(1) {
        let i = (rng.next() as usize) % x.len();
        x[i] = rng.unit() * 400.0;
    }
    if k >= 64 {
        x[32..64].fill(0.0);
    }
    Case {
        w: QMatrix::from_levels(n, k, &levels, scales, bias).unwrap(),
        x,
        m,
    }
}

fn run(kernel: Kernel, c: &Case, threads: usize) -> Vec<u32> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut y = vec![f32::NAN; c.m * c.w.n];
    pool.install(|| c.w.matmul_with(kernel, &c.x, &mut y))
        .unwrap();
    y.iter().map(|v| v.to_bits()).collect()
}

/// The kernels other than the portable one that this CPU runs.
fn others() -> Vec<Kernel> {
    kernel::available()
        .into_iter()
        .filter(|&k| k != Kernel::Portable)
        .collect()
}

fn shape() -> impl Strategy<Value = (usize, usize, usize, bool, u64)> {
    (
        prop_oneof![1usize..=13, 14usize..=70],
        1usize..=100,
        (0usize..=6).prop_map(|h| 32 * (2 * h + 1)),
        any::<bool>(),
        any::<u64>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Each kernel against the portable one, one thread and the splits of 2 and 3.
    #[test]
    fn every_kernel_gives_the_portable_bits((m, n, k, four_bit, seed) in shape()) {
        let c = case(m, n, k, four_bit, seed);
        let want = run(Kernel::Portable, &c, 1);
        for kernel in others() {
            for threads in [1, 2, 3] {
                let got = run(kernel, &c, threads);
                if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
                    prop_assert!(
                        false,
                        "{kernel} on {threads} threads, m{m} n{n} k{k} 4-bit {four_bit}: output {i} \
                         (row {}, column {}) is {} against the portable {}",
                        i / n, i % n, f32::from_bits(got[i]), f32::from_bits(want[i])
                    );
                }
            }
        }
        // The portable kernel under splits too.
        prop_assert_eq!(run(Kernel::Portable, &c, 2), want);
    }
}

/// The shapes the encoders use, large enough to split rows and columns over threads.
#[test]
fn encoder_shapes_give_the_portable_bits() {
    for &(m, n, k) in &[
        (25, 1152, 384),
        (3, 1536, 384),
        (50, 384, 1536),
        (97, 384, 384),
    ] {
        let c = case(m, n, k, false, (m * n + k) as u64);
        let want = run(Kernel::Portable, &c, 1);
        for kernel in others() {
            for threads in [1, 2, 4] {
                assert!(
                    run(kernel, &c, threads) == want,
                    "{kernel} on {threads} threads differs at m{m} n{n} k{k}"
                );
            }
        }
    }
}

/// The VNNI kernels ran here (the gate), and the record `.ci/run` prints.
#[test]
fn vnni_kernels_are_compared_on_this_cpu() {
    let test = "opc-infer kernels: VNNI against portable";
    let vnni: Vec<Kernel> = others()
        .into_iter()
        .filter(|k| matches!(k, Kernel::Avx512Vnni | Kernel::AvxVnni))
        .collect();
    if let Some(dir) = std::env::var_os("OPC_TEST_GROUPS") {
        let names: Vec<&str> = others().iter().map(|k| k.name()).collect();
        let line = format!(
            "{} (selected: {})\n",
            names.join(" "),
            kernel::selected().name()
        );
        let path = std::path::Path::new(&dir).join("..").join("kernels-tested");
        // A report, not a check: .ci/run shows nothing rather than failing when it cannot write.
        let _ = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(path, line));
    }
    if vnni.is_empty() {
        opc_testgate::skip(
            Group::Vnni,
            test,
            "this CPU has neither AVX-512 VNNI nor AVX-VNNI",
        );
        return;
    }
    opc_testgate::ran(Group::Vnni, test);
    // The comparison itself is the proptest above; here, one fixed ragged case per VNNI kernel so
    // this gated test checks something of its own.
    let c = case(7, 37, 96, true, 38);
    let want = run(Kernel::Portable, &c, 1);
    for k in vnni {
        assert!(run(k, &c, 1) == want, "{k} differs from portable");
    }
}
