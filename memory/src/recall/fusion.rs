//! Fusing the BM25 and vector lists into one ranking, and the neighbour boost.
//!
//! - RRF (reciprocal rank fusion, k = 60): `Σ 1 / (k + rank)`; needs no score calibration.
//! - Weighted score fusion: each list's scores min-max normalised to [0, 1], then
//!   `w · vector + (1 − w) · bm25` (a message missing from a list gets 0 there).
//! - Neighbour boost: chat answers often span two turns (a question and its reply), so each
//!   candidate's score is raised by `β ×` the best score of its immediate neighbours in the same
//!   thread. Measured on LoCoMo (docs/memory.md), it is the largest single gain after fusion.
//! - Author boost: a candidate whose author the query names is raised by a constant (before the
//!   neighbour boost, so a named person's turn also lifts the turn that answers it).

use std::collections::{HashMap, HashSet};

use super::Message;

/// How the two lists are combined.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Fusion {
    /// Reciprocal rank fusion with constant `k`.
    Rrf {
        /// The constant (60 in the original paper).
        k: f32,
    },
    /// Min-max normalised scores, `vector · w + bm25 · (1 − w)`.
    Weighted {
        /// Weight of the vector score, 0–1.
        vector: f32,
    },
}

/// One fused candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fused {
    /// The message.
    pub seq: i64,
    /// Fused score.
    pub score: f32,
    /// 1-based rank in the BM25 list.
    pub bm25_rank: Option<usize>,
    /// 1-based rank in the vector list.
    pub vector_rank: Option<usize>,
}

fn min_max(list: &[(i64, f32)]) -> impl Fn(f32) -> f32 + use<> {
    let max = list.iter().map(|x| x.1).fold(f32::MIN, f32::max);
    let min = list.iter().map(|x| x.1).fold(f32::MAX, f32::min);
    let span = max - min;
    move |s| if span > 0.0 { (s - min) / span } else { 1.0 }
}

/// Fuse the two lists (each best first); the result is best first.
pub fn fuse(bm25: &[(i64, f32)], vector: &[(i64, f32)], fusion: Fusion) -> Vec<Fused> {
    let mut by_seq: HashMap<i64, Fused> = HashMap::new();
    let entry = |m: &mut HashMap<i64, Fused>, seq| {
        *m.entry(seq).or_insert(Fused {
            seq,
            score: 0.0,
            bm25_rank: None,
            vector_rank: None,
        })
    };
    let nb = min_max(bm25);
    let nv = min_max(vector);
    for (i, &(seq, s)) in bm25.iter().enumerate() {
        let mut f = entry(&mut by_seq, seq);
        f.bm25_rank = Some(i + 1);
        f.score += match fusion {
            Fusion::Rrf { k } => 1.0 / (k + (i + 1) as f32),
            Fusion::Weighted { vector } => (1.0 - vector) * nb(s),
        };
        by_seq.insert(seq, f);
    }
    for (i, &(seq, s)) in vector.iter().enumerate() {
        let mut f = entry(&mut by_seq, seq);
        f.vector_rank = Some(i + 1);
        f.score += match fusion {
            Fusion::Rrf { k } => 1.0 / (k + (i + 1) as f32),
            Fusion::Weighted { vector } => vector * nv(s),
        };
        by_seq.insert(seq, f);
    }
    let mut out: Vec<Fused> = by_seq.into_values().collect();
    sort(&mut out);
    out
}

/// Best first; ties by the lower seq (stable, deterministic).
pub fn sort(list: &mut [Fused]) {
    list.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
}

/// Raise by `weight` each candidate whose author the query names (a whole word of it, any case;
/// an author of several words when the query holds them all). A question about a person is mostly
/// answered by what that person said ("what do Melanie's kids like?" — Melanie's own turns).
/// Authors that are ids (`slack:U123`, `user`) are rarely named, so there it changes nothing.
pub fn author_boost(list: &mut [Fused], messages: &[Message], query: &str, weight: f32) {
    if weight == 0.0 {
        return;
    }
    let words: HashSet<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let named: HashSet<i64> = messages
        .iter()
        .filter(|m| {
            let mut parts = m
                .author
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .peekable();
            parts.peek().is_some() && parts.all(|p| words.contains(&p.to_lowercase()))
        })
        .map(|m| m.seq)
        .collect();
    if named.is_empty() {
        return;
    }
    for f in list.iter_mut() {
        if named.contains(&f.seq) {
            f.score += weight;
        }
    }
    sort(list);
}

/// Raise each candidate by `beta ×` its best neighbour's score; `neighbours[i]` are the seqs adjacent
/// to `list[i]` in its thread. Scores are read before any is raised.
pub fn neighbour_boost(list: &mut [Fused], neighbours: &[(Option<i64>, Option<i64>)], beta: f32) {
    if beta == 0.0 {
        return;
    }
    let base: HashMap<i64, f32> = list.iter().map(|f| (f.seq, f.score)).collect();
    for (f, (prev, next)) in list.iter_mut().zip(neighbours) {
        let best = [prev, next]
            .iter()
            .filter_map(|n| n.and_then(|s| base.get(&s)).copied())
            .fold(0f32, f32::max);
        f.score += beta * best;
    }
    sort(list);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_rewards_agreement_and_weighted_follows_the_weight() {
        let bm25 = [(1, 9.0), (2, 5.0), (3, 1.0)];
        let vector = [(2, 0.9), (4, 0.8), (1, 0.1)];
        let rrf = fuse(&bm25, &vector, Fusion::Rrf { k: 60.0 });
        assert_eq!(rrf[0].seq, 2, "second in one list, first in the other");
        assert_eq!(rrf[0].bm25_rank, Some(2));
        assert_eq!(rrf[0].vector_rank, Some(1));
        assert_eq!(rrf.len(), 4);
        let dense = fuse(&bm25, &vector, Fusion::Weighted { vector: 1.0 });
        assert_eq!(dense[0].seq, 2);
        let sparse = fuse(&bm25, &vector, Fusion::Weighted { vector: 0.0 });
        assert_eq!(sparse[0].seq, 1);
    }

    #[test]
    fn a_neighbour_lifts_a_turn() {
        let mut list = fuse(
            &[(1, 3.0), (2, 2.0), (9, 1.9)],
            &[],
            Fusion::Weighted { vector: 0.0 },
        );
        let seqs: Vec<i64> = list.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, [1, 2, 9]);
        let neighbours: Vec<(Option<i64>, Option<i64>)> = list
            .iter()
            .map(|f| (Some(f.seq - 1), Some(f.seq + 1)))
            .collect();
        neighbour_boost(&mut list, &neighbours, 0.5);
        let seqs: Vec<i64> = list.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, [1, 2, 9], "1 and 2 lift each other, 9 has none");
        assert!(list[2].score < list[1].score);
    }

    fn said(seq: i64, author: &str) -> Message {
        Message {
            seq,
            namespace: "n".into(),
            author: author.into(),
            conversation: "c".into(),
            task: None,
            thread: None,
            source_id: None,
            time_ms: 0,
            content_hash: String::new(),
            text: String::new(),
        }
    }

    #[test]
    fn a_named_author_lifts_their_messages_and_ids_change_nothing() {
        let list = fuse(
            &[(1, 3.0), (2, 2.8), (3, 1.0)],
            &[],
            Fusion::Weighted { vector: 0.0 },
        );
        let messages = [said(1, "Caroline"), said(2, "Melanie"), said(3, "Mary Ann")];
        let order = |l: &[Fused]| l.iter().map(|f| f.seq).collect::<Vec<_>>();
        let mut named = list.clone();
        author_boost(&mut named, &messages, "What do Melanie's kids like?", 0.2);
        assert_eq!(order(&named), [2, 1, 3], "Melanie's own turn first");
        let mut both = list.clone();
        author_boost(&mut both, &messages, "Did mary meet ann?", 1.5);
        assert_eq!(order(&both), [3, 1, 2], "every word of a two-word author");
        let mut part = list.clone();
        author_boost(&mut part, &messages, "Did Mary call?", 1.5);
        assert_eq!(part, list, "one word of two is not the author");
        let mut off = list.clone();
        author_boost(&mut off, &messages, "What do Melanie's kids like?", 0.0);
        assert_eq!(off, list);
    }
}
