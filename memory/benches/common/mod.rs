//! What the memory benches share: the seeded generator, the names their texts mention, the query
//! counts, percentiles, and the flag `cargo bench` passes.
//!
//! Invariant: the generator and the tables are the ones both benches always used, so a run writes
//! the same data as before and numbers stay comparable across versions.

use std::time::Duration;

use opc_memory::embed::DIM;

/// Timed queries per latency line.
pub const QUERIES: usize = 200;
/// Untimed queries first (caches, lazily loaded vectors).
pub const WARM_UP: usize = 20;

/// splitmix64: a tiny seeded generator, so every run writes the same data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Zipf-ish rank in 0..n: small ranks far more often (1/r).
    pub fn zipf(&mut self, n: usize) -> usize {
        let h = (n as f64).ln() + 0.5772;
        ((self.unit() * h).exp() as usize)
            .saturating_sub(1)
            .min(n - 1)
    }
    pub fn unit_vector(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIM).map(|_| self.unit() as f32 - 0.5).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

/// People the generated texts mention: rare tokens, so queries have short posting lists too.
pub const NAMES: &[&str] = &[
    "Alice", "Bruno", "Chen", "Dana", "Emeka", "Fatima", "Gustav", "Hana", "Ivan", "Julia",
    "Kenji", "Laura", "Miguel", "Nadia", "Oliver", "Priya", "Quentin", "Rosa", "Sven", "Tara",
];

/// The `p` percentile of sorted durations, in ms.
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// `cargo bench` runs a bench without libtest's harness with `--bench`: accepted and ignored.
#[derive(clap::Args)]
pub struct CargoBench {
    #[arg(long = "bench", hide = true)]
    _bench: bool,
}
