//! The vector index: every embedded message's vector, int8-quantised, in one flat array in memory,
//! searched by brute force — exactly below [`EXACT_BELOW`] rows, and above it through a one-bit
//! prefilter whose candidates are re-scored exactly.
//!
//! Why brute force over int8: recall lists are append-heavy and filtered per search (namespaces, a
//! time range), which approximate graphs (HNSW) handle badly — a filtered search over a graph either
//! loses recall or degenerates to a scan — and a scan has no build cost, exact results, and no
//! tuning. int8 (one scale per vector) quarters the memory of f32 (1M × 384 = 384 MB instead of
//! 1.5 GB) and the integer dot product vectorises well; it costs under 1% in cosine error for these
//! unit vectors. The f32 vectors stay in SQLite, the truth, and are re-quantised on load.
//!
//! Why a one-bit prefilter at scale: an int8 scan reads 384 bytes a row, about 50 ms at 1M rows on
//! this 2-core machine. The sign bits of a vector (48 bytes) rank rows by Hamming distance, which
//! tracks the angle between unit vectors; the closest [`candidates`] rows (at least 20 × the limit,
//! and 10,000) are then scored exactly with int8, so only a row whose sign pattern is unusually far
//! from the query despite a high cosine can be missed. The filter (namespaces, time) applies in the
//! first pass, so a filtered search never returns fewer rows than the filter allows.
//!
//! Dimensions: whatever the generation's embedder gives (384 for MiniLM); an index holds the vectors
//! of ONE model (`model`, a generation key), all of one length, fixed by the first vector pushed. A
//! vector of another length is refused with an error naming its row, never a panic; a query of
//! another length finds nothing. The store swaps a whole index when the generation switches, so a
//! query is never compared with vectors of another model.
//!
//! Invariants: each seq is held once — a vector pushed for a seq already held replaces it, and
//! [`VectorIndex::remove`] drops one (on PostgreSQL a row rewritten by `opc privacy erase` comes back
//! through the tail, and its old vector must not stay searchable); `cursor` is the largest seq pushed.

use std::collections::HashMap;

use super::RecallError;

/// Below this many rows every search is an exact int8 scan (a few ms); above it, the one-bit
/// prefilter runs first.
pub const EXACT_BELOW: usize = 65_536;

/// How many prefilter candidates are re-scored exactly for a search of `limit`.
pub fn candidates(limit: usize) -> usize {
    (limit * 20).max(10_000)
}

/// The in-memory vectors of one store, of one generation.
#[derive(Default)]
pub struct VectorIndex {
    /// The generation (embedder's model id) every vector held is of; empty: none yet.
    pub model: String,
    /// Components per vector (0 until the first push).
    dims: usize,
    /// 64-bit words of sign bits per row (`dims` rounded up to 64).
    words: usize,
    /// `dims` int8 components per row.
    data: Vec<i8>,
    /// `words` words of sign bits per row (bit set = component > 0).
    bits: Vec<u64>,
    /// Per row: the factor turning an int8 dot product back into a cosine (scale of the vector).
    scales: Vec<f32>,
    seqs: Vec<i64>,
    namespaces: Vec<u32>,
    times: Vec<i64>,
    /// Namespace name → small id.
    ns_ids: HashMap<String, u32>,
    /// One bit per seq held (seqs are dense identity values): tells a new seq from one held without
    /// scanning `seqs`, which only a replacement or a removal does.
    held: Vec<u64>,
    /// The last seq appended (0 when empty).
    pub cursor: i64,
}

/// Seqs at or above this are not tracked in `held` (a bitmap that large is not worth keeping):
/// they are looked up by a scan.
const HELD_LIMIT: i64 = 1 << 31;

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

/// The sign bits of a vector: bit `i` of word `i / 64` is set when component `i` is positive.
fn sign_bits(v: &[i8]) -> Vec<u64> {
    let mut out = vec![0u64; v.len().div_ceil(64)];
    for (i, x) in v.iter().enumerate() {
        if *x > 0 {
            out[i / 64] |= 1 << (i % 64);
        }
    }
    out
}

fn hamming(a: &[u64], b: &[u64]) -> u32 {
    // MiniLM's 384 dimensions are 6 words: a fixed-size compare the compiler unrolls (the prefilter
    // runs this once per row; the runtime-length loop measured ~5% slower at 200k rows).
    if let (Ok(a), Ok(b)) = (<&[u64; 6]>::try_from(a), <&[u64; 6]>::try_from(b)) {
        return (0..6).map(|i| (a[i] ^ b[i]).count_ones()).sum();
    }
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
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
    /// An empty index for the generation `model`.
    pub fn new(model: &str) -> Self {
        VectorIndex {
            model: model.to_string(),
            ..Default::default()
        }
    }

    /// Components per vector (0 while empty and never pushed to).
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Whether `seq` may be held: exact below [`HELD_LIMIT`], conservatively true above it.
    fn maybe_held(&self, seq: i64) -> bool {
        match usize::try_from(seq) {
            Ok(s) if seq < HELD_LIMIT => self
                .held
                .get(s / 64)
                .is_some_and(|w| w & (1 << (s % 64)) != 0),
            Ok(_) => true,
            Err(_) => self.seqs.contains(&seq),
        }
    }

    fn set_held(&mut self, seq: i64, on: bool) {
        if let Ok(s) = usize::try_from(seq)
            && seq < HELD_LIMIT
        {
            if self.held.len() <= s / 64 {
                if !on {
                    return;
                }
                self.held.resize(s / 64 + 1, 0);
            }
            if on {
                self.held[s / 64] |= 1 << (s % 64);
            } else {
                self.held[s / 64] &= !(1 << (s % 64));
            }
        }
    }

    /// The row holding `seq`, if any (a scan, done only when the bitmap says it may be held).
    fn row_of(&self, seq: i64) -> Option<usize> {
        if !self.maybe_held(seq) {
            return None;
        }
        self.seqs.iter().rposition(|s| *s == seq)
    }

    /// Drop the vector of `seq` (no-op when it is not held); whether one was dropped. The last row
    /// takes its place, so row order changes (search does not depend on it).
    pub fn remove(&mut self, seq: i64) -> bool {
        let Some(i) = self.row_of(seq) else {
            return false;
        };
        let (dims, words) = (self.dims, self.words);
        let last = self.len() - 1;
        if i != last {
            self.data
                .copy_within(last * dims..(last + 1) * dims, i * dims);
            self.bits
                .copy_within(last * words..(last + 1) * words, i * words);
        }
        self.data.truncate(last * dims);
        self.bits.truncate(last * words);
        self.scales.swap_remove(i);
        self.seqs.swap_remove(i);
        self.namespaces.swap_remove(i);
        self.times.swap_remove(i);
        self.set_held(seq, false);
        true
    }

    /// Add one message's vector, or replace the one held for its seq (each seq once). Any order (on
    /// PostgreSQL rows arrive in commit order, which is not seq order): search ranks by score, and
    /// hits carry their seq.
    pub fn push(
        &mut self,
        seq: i64,
        namespace: &str,
        time_ms: i64,
        vector: &[f32],
    ) -> Result<(), RecallError> {
        if self.dims == 0 && self.is_empty() && !vector.is_empty() {
            self.dims = vector.len();
            self.words = vector.len().div_ceil(64);
        }
        if vector.len() != self.dims {
            return Err(RecallError::Invalid(format!(
                "the vector of recall message {seq} has {} components where generation {:?} has {}: \
                 the embedder returned vectors of another size than it declares (check its \
                 `dimensions` setting); the row stays without a vector",
                vector.len(),
                self.model,
                self.dims
            )));
        }
        let (dims, words) = (self.dims, self.words);
        let next = u32::try_from(self.ns_ids.len()).unwrap_or(u32::MAX);
        let ns = *self.ns_ids.entry(namespace.to_string()).or_insert(next);
        let (q, scale) = quantise(vector);
        if let Some(i) = self.row_of(seq) {
            self.bits[i * words..(i + 1) * words].copy_from_slice(&sign_bits(&q));
            self.data[i * dims..(i + 1) * dims].copy_from_slice(&q);
            self.scales[i] = scale;
            self.namespaces[i] = ns;
            self.times[i] = time_ms;
            return Ok(());
        }
        self.bits.extend_from_slice(&sign_bits(&q));
        self.data.extend_from_slice(&q);
        self.scales.push(scale);
        self.seqs.push(seq);
        self.namespaces.push(ns);
        self.times.push(time_ms);
        self.set_held(seq, true);
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
        self.search_with(query, namespaces, range, limit, self.len() < EXACT_BELOW)
    }

    /// [`Self::search`], choosing the exact scan or the prefilter (the bench and the tests compare
    /// the two).
    pub fn search_with(
        &self,
        query: &[f32],
        namespaces: &[String],
        range: (i64, i64),
        limit: usize,
        exact: bool,
    ) -> Vec<(i64, f32)> {
        let allowed: Vec<u32> = namespaces
            .iter()
            .filter_map(|n| self.ns_ids.get(n).copied())
            .collect();
        if allowed.is_empty() || limit == 0 || query.len() != self.dims || self.dims == 0 {
            return Vec::new();
        }
        let (q, qscale) = quantise(query);
        // One bit per namespace id (ids are small: one per agent), so the filter is a shift and a mask.
        let mut mask = vec![0u64; self.ns_ids.len().div_ceil(64).max(1)];
        for id in &allowed {
            mask[*id as usize / 64] |= 1 << (id % 64);
        }
        let all_time = range == (i64::MIN, i64::MAX);
        let keep = |i: usize| {
            let ns = self.namespaces[i] as usize;
            mask[ns / 64] & (1 << (ns % 64)) != 0
                && (all_time || (self.times[i] >= range.0 && self.times[i] <= range.1))
        };
        let rows: Box<dyn Iterator<Item = usize>> = if exact {
            Box::new((0..self.len()).filter(|&i| keep(i)))
        } else {
            Box::new(self.prefilter(&q, candidates(limit), keep).into_iter())
        };
        // Keep the best `limit` in a small sorted buffer; the scan dominates, so this is cheap.
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(limit + 1);
        let mut floor = f32::MIN;
        for i in rows {
            let row = &self.data[i * self.dims..(i + 1) * self.dims];
            let score = dot_i8(&q, row) as f32 * self.scales[i];
            if best.len() == limit && score <= floor {
                continue;
            }
            let pos = best.partition_point(|b| b.0 >= score);
            best.insert(pos, (score, i));
            if best.len() > limit {
                best.pop();
            }
            if best.len() == limit {
                floor = best[limit - 1].0;
            }
        }
        best.into_iter()
            .map(|(s, i)| (self.seqs[i], s * qscale))
            .collect()
    }

    /// The rows passing `keep` whose sign bits are nearest the query's (Hamming distance): at least
    /// `want` of them when that many pass (all ties at the cut are kept, so the result does not depend
    /// on row order). The scan is split across the machine's cores (at most 4): it is memory- and
    /// popcount-bound, and a search is latency the user waits for.
    fn prefilter(&self, q: &[i8], want: usize, keep: impl Fn(usize) -> bool + Sync) -> Vec<usize> {
        let qbits = sign_bits(q);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        let chunk = self.len().div_ceil(threads).max(1);
        // Per chunk: each row's distance (u16::MAX for a row the filter drops) and a histogram.
        let scan = |start: usize| {
            let end = (start + chunk).min(self.len());
            let mut distance = vec![u16::MAX; end - start];
            let mut histogram = vec![0usize; self.dims + 1];
            let bits = &self.bits[start * self.words..end * self.words];
            for (offset, (d, row)) in distance
                .iter_mut()
                .zip(bits.chunks_exact(self.words))
                .enumerate()
            {
                if keep(start + offset) {
                    let h = hamming(row, &qbits);
                    *d = h as u16;
                    histogram[h as usize] += 1;
                }
            }
            (start, distance, histogram)
        };
        let parts: Vec<(usize, Vec<u16>, Vec<usize>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (1..threads)
                .map(|t| t * chunk)
                .filter(|start| *start < self.len())
                .map(|start| scope.spawn(move || scan(start)))
                .collect();
            let mut parts = vec![scan(0)];
            parts.extend(handles.into_iter().filter_map(|h| h.join().ok()));
            parts
        });
        // The smallest cut that keeps `want` rows.
        let mut cut = self.dims;
        let mut total = 0;
        for h in 0..=self.dims {
            total += parts.iter().map(|p| p.2[h]).sum::<usize>();
            if total >= want {
                cut = h;
                break;
            }
        }
        parts
            .iter()
            .flat_map(|(start, distance, _)| {
                distance
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| usize::from(**d) <= cut)
                    .map(move |(i, _)| start + i)
            })
            .collect()
    }
}

/// f32 components as little-endian bytes (the SQLite blob).
pub fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`to_blob`]; `None` for a blob that is empty or not whole f32s (any dimensions:
/// the index checks the length against its generation's).
pub fn from_blob(b: &[u8]) -> Option<Vec<f32>> {
    if b.is_empty() || !b.len().is_multiple_of(4) {
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
    use crate::embed::DIM;

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
    fn the_prefilter_keeps_the_nearest_and_honours_the_filter() {
        let mut idx = VectorIndex::default();
        let n = 20_000;
        for i in 1..=n {
            let ns = if i % 4 == 0 { "four" } else { "other" };
            idx.push(i, ns, i, &unit(i as u32)).unwrap();
        }
        let all = ["four".to_string(), "other".to_string()];
        // A query near row 1234: both paths find it first.
        let mut near = unit(1234);
        near[0] += 0.05;
        let norm = near.iter().map(|x| x * x).sum::<f32>().sqrt();
        near.iter_mut().for_each(|x| *x /= norm);
        for exact in [true, false] {
            let hits = idx.search_with(&near, &all, (i64::MIN, i64::MAX), 10, exact);
            assert_eq!(hits[0].0, 1234, "exact {exact}");
            assert_eq!(hits.len(), 10);
        }
        // Filtered: only rows of the namespace and the range, and as many as asked.
        let hits = idx.search_with(&near, &["four".into()], (100, 8_000), 50, false);
        assert_eq!(hits.len(), 50);
        assert!(
            hits.iter()
                .all(|(s, _)| s % 4 == 0 && (100..=8_000).contains(s))
        );
        // A filter narrower than the candidate count: every row it allows is scored.
        let hits = idx.search_with(&near, &["four".into()], (1, 40), 100, false);
        assert_eq!(hits.len(), 10);
        // On random vectors (the hardest case for the bits: no row is much nearer than the rest) the
        // prefilter still finds nearly all of the exact top 10 at this ratio (10,000 of 20,000).
        let mut found = 0;
        for s in 0..20 {
            let q = unit(900_000 + s);
            let exact = idx.search_with(&q, &all, (i64::MIN, i64::MAX), 10, true);
            let approx = idx.search_with(&q, &all, (i64::MIN, i64::MAX), 10, false);
            found += exact
                .iter()
                .filter(|e| approx.iter().any(|a| a.0 == e.0))
                .count();
        }
        assert!(found >= 190, "{found} of 200");
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

    #[test]
    fn other_dimensions_work_and_a_wrong_length_is_an_error_naming_the_row() {
        let mut idx = VectorIndex::new("small");
        let v = |seed: u32| unit(seed)[..48].to_vec();
        for i in 1..=10 {
            idx.push(i, "n", i, &v(i as u32)).unwrap();
        }
        assert_eq!(idx.dims(), 48);
        let all = (i64::MIN, i64::MAX);
        assert_eq!(idx.search(&v(3), &["n".into()], all, 1)[0].0, 3);
        let err = idx.push(11, "n", 11, &unit(11)).unwrap_err().to_string();
        assert!(err.contains("message 11") && err.contains("384"), "{err}");
        assert_eq!(idx.len(), 10, "nothing pushed");
        // A query of another length finds nothing (never compared, never a panic).
        assert!(idx.search(&unit(3), &["n".into()], all, 5).is_empty());
        assert!(
            idx.search_with(&unit(3), &["n".into()], all, 5, false)
                .is_empty()
        );
    }

    #[test]
    fn a_seq_pushed_again_replaces_its_vector_and_a_removed_one_is_never_found() {
        let mut idx = VectorIndex::default();
        for i in 1..=20 {
            idx.push(i, "n", i, &unit(i as u32)).unwrap();
        }
        // Seq 5 rewritten (an erasure): its new vector replaces the old one, once.
        idx.push(5, "n", 5, &unit(500)).unwrap();
        assert_eq!(idx.len(), 20);
        let all = (i64::MIN, i64::MAX);
        assert_ne!(idx.search(&unit(5), &["n".into()], all, 1)[0].0, 5);
        assert_eq!(idx.search(&unit(500), &["n".into()], all, 1)[0].0, 5);
        // Removed (its vector dropped, not recomputed yet): no search finds it.
        assert!(idx.remove(5));
        assert!(!idx.remove(5));
        assert_eq!(idx.len(), 19);
        assert!(
            idx.search(&unit(500), &["n".into()], all, 20)
                .iter()
                .all(|h| h.0 != 5)
        );
        // The row that took its place is still found as itself.
        assert_eq!(idx.search(&unit(20), &["n".into()], all, 1)[0].0, 20);
        idx.push(5, "n", 5, &unit(5)).unwrap();
        assert_eq!(idx.search(&unit(5), &["n".into()], all, 1)[0].0, 5);
        assert_eq!(idx.len(), 20);
    }
}
