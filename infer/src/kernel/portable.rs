//! The reference kernel: plain Rust, every CPU. The others are checked against it bit for bit, so
//! it spells out `quant`'s definition and nothing else: per output, per block in order,
//! `acc = acc + f32(dot − corr) * (sx * sw)`, then `acc + bias`.

use super::Job;
use crate::quant::{BLOCK, LANES};

/// Every output of the job, one at a time.
pub(super) fn run(job: &mut Job) {
    let (x, w) = (job.x, job.w);
    let blocks = w.k / BLOCK;
    for r in job.rows.clone() {
        for g in job.groups.clone() {
            let mut y = [0f32; LANES];
            for (lane, y) in y.iter_mut().enumerate() {
                let mut acc = 0f32;
                for b in 0..blocks {
                    let xq = &x.q[r * blocks + b];
                    let wq = &w.q[g * blocks + b];
                    let mut dot = 0i32;
                    for (t, &word) in xq.iter().enumerate() {
                        let xs = word.to_le_bytes();
                        let ws = &wq[(t * LANES + lane) * 4..][..4];
                        for (&a, &c) in xs.iter().zip(ws) {
                            dot += i32::from(a as i8) * i32::from(c);
                        }
                    }
                    let dot = dot - x.corr[r * blocks + b];
                    let s = x.scales[r * blocks + b] * w.scales[g * blocks + b][lane];
                    // Two roundings (Rust never fuses a multiply and an add): what the SIMD kernels do.
                    acc += dot as f32 * s;
                }
                *y = acc + w.bias[g][lane];
            }
            job.store(r, g, &y);
        }
    }
}
