//! Times the int8 multiply at the encoder's shapes (GMAC/s), for tuning the kernels.
use std::time::Instant;

fn main() {
    for &(m, n, k) in &[
        (25usize, 1152usize, 384usize),
        (25, 1536, 384),
        (25, 384, 1536),
        (1000, 1536, 384),
    ] {
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let q = opc_infer::QMatrix::quantize(n, k, &w, vec![0.0; n]).expect("shape fits");
        let mut y = vec![0f32; m * n];
        let reps = (2_000_000_000 / (m * n * k)).max(1);
        let t = Instant::now();
        for _ in 0..reps {
            q.matmul(&x, &mut y);
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "m{m} n{n} k{k}: {:.2} ms per multiply, {:.1} GMAC/s",
            s / reps as f64 * 1e3,
            (m * n * k * reps) as f64 / s / 1e9
        );
    }
}
