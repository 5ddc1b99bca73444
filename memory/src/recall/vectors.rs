//! The vector index: every embedded message's vector, int8-quantised, in one flat array in memory,
//! searched by brute force.
//!
//! Why brute force over int8: recall lists are append-heavy and filtered per search (namespaces, a
//! time range), which approximate graphs (HNSW) handle badly — a filtered search over a graph either
//! loses recall or degenerates to a scan — and a scan has no build cost, exact results, and no
//! tuning. int8 (one scale per vector) quarters the memory of f32 (1M × 384 = 384 MB instead of
//! 1.5 GB) and the integer dot product vectorises well; it costs under 1% in cosine error for these
//! unit vectors. The f32 vectors stay in SQLite, the truth, and are re-quantised on load.
//!
//! Invariant: rows are appended in `seq` order; `cursor` is the last seq appended.

use std::collections::HashMap;

use super::RecallError;
use crate::embed::DIM;

/// The in-memory vectors of one store.
#[derive(Default)]
pub struct VectorIndex {
    /// `DIM` int8 components per row.
    data: Vec<i8>,
    /// Per row: the factor turning an int8 dot product back into a cosine (scale of the vector).
    scales: Vec<f32>,
    seqs: Vec<i64>,
    namespaces: Vec<u32>,
    times: Vec<i64>,
    /// Namespace name → small id.
    ns_ids: HashMap<String, u32>,
    /// The last seq appended (0 when empty).
    pub cursor: i64,
}

/// Quantise a unit vector: components scaled so the largest magnitude is 127.
pub fn quantise(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    (
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
            .collect(),
        scale,
    )
}

fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Chunks of 16 with i32 lanes: the compiler vectorises this (pmaddwd on x86).
    let mut acc = [0i32; 16];
    let chunks_a = a.chunks_exact(16);
    let chunks_b = b.chunks_exact(16);
    let (ra, rb) = (chunks_a.remainder(), chunks_b.remainder());
    for (ca, cb) in chunks_a.zip(chunks_b) {
        for i in 0..16 {
            acc[i] += i32::from(ca[i]) * i32::from(cb[i]);
        }
    }
    let tail: i32 = ra
        .iter()
        .zip(rb)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    acc.iter().sum::<i32>() + tail
}

impl VectorIndex {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Append one message's vector (seq must exceed every earlier one).
    pub fn push(
        &mut self,
        seq: i64,
        namespace: &str,
        time_ms: i64,
        vector: &[f32],
    ) -> Result<(), RecallError> {
        if vector.len() != DIM {
            return Err(RecallError::Index(format!(
                "vector of message {seq} has {} components, expected {DIM}",
                vector.len()
            )));
        }
        let next = u32::try_from(self.ns_ids.len()).unwrap_or(u32::MAX);
        let ns = *self.ns_ids.entry(namespace.to_string()).or_insert(next);
        let (q, scale) = quantise(vector);
        self.data.extend_from_slice(&q);
        self.scales.push(scale);
        self.seqs.push(seq);
        self.namespaces.push(ns);
        self.times.push(time_ms);
        self.cursor = self.cursor.max(seq);
        Ok(())
    }

    /// The best `limit` rows for the unit vector `query` as (seq, cosine), best first, among
    /// `namespaces` within `[from, to]` ms.
    pub fn search(
        &self,
        query: &[f32],
        namespaces: &[String],
        range: (i64, i64),
        limit: usize,
    ) -> Vec<(i64, f32)> {
        let allowed: Vec<u32> = namespaces
            .iter()
            .filter_map(|n| self.ns_ids.get(n).copied())
            .collect();
        if allowed.is_empty() || limit == 0 || query.len() != DIM {
            return Vec::new();
        }
        let (q, qscale) = quantise(query);
        // Keep the best `limit` in a small sorted buffer; the scan dominates, so this is cheap.
        let mut best: Vec<(i32, f32, usize)> = Vec::with_capacity(limit + 1);
        let mut floor = f32::MIN;
        for (i, row) in self.data.chunks_exact(DIM).enumerate() {
            if !allowed.contains(&self.namespaces[i]) {
                continue;
            }
            let t = self.times[i];
            if t < range.0 || t > range.1 {
                continue;
            }
            let score = dot_i8(&q, row) as f32 * self.scales[i];
            if best.len() == limit && score <= floor {
                continue;
            }
            let pos = best.partition_point(|b| b.1 >= score);
            best.insert(pos, (0, score, i));
            if best.len() > limit {
                best.pop();
            }
            if best.len() == limit {
                floor = best[limit - 1].1;
            }
        }
        best.into_iter()
            .map(|(_, s, i)| (self.seqs[i], s * qscale))
            .collect()
    }
}

/// f32 components as little-endian bytes (the SQLite blob).
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`to_blob`]; `None` for a blob of the wrong length.
pub fn from_blob(b: &[u8]) -> Option<Vec<f32>> {
    if b.len() != DIM * 4 {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn unit(seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        let v: Vec<f32> = (0..DIM)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) - 0.5
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    #[test]
    fn finds_the_nearest_within_the_allowed_namespaces_and_time() {
        let mut idx = VectorIndex::default();
        for i in 1..=50 {
            let ns = if i % 2 == 0 { "even" } else { "odd" };
            idx.push(i, ns, i * 10, &unit(i as u32)).unwrap();
        }
        let hits = idx.search(&unit(8), &["even".into()], (i64::MIN, i64::MAX), 3);
        assert_eq!(hits[0].0, 8);
        assert!((hits[0].1 - 1.0).abs() < 0.01, "{}", hits[0].1);
        assert!(hits.iter().all(|h| h.0 % 2 == 0));
        assert!(
            idx.search(&unit(8), &["odd".into()], (i64::MIN, i64::MAX), 50)
                .iter()
                .all(|h| h.0 != 8)
        );
        let ranged = idx.search(&unit(8), &["even".into()], (100, 200), 50);
        assert!(ranged.iter().all(|h| (10..=20).contains(&h.0)));
        assert_eq!(ranged.len(), 6);
        assert!(
            idx.search(&unit(8), &["nobody".into()], (i64::MIN, i64::MAX), 5)
                .is_empty()
        );
    }

    #[test]
    fn quantised_cosine_is_close_to_exact() {
        let (a, b) = (unit(1), unit(2));
        let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let mut idx = VectorIndex::default();
        idx.push(1, "n", 0, &b).unwrap();
        let got = idx.search(&a, &["n".into()], (i64::MIN, i64::MAX), 1)[0].1;
        assert!((got - exact).abs() < 0.01, "{got} vs {exact}");
        assert_eq!(from_blob(&to_blob(&a)).unwrap(), a);
    }
}
