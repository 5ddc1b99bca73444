//! A stand-in embedding for tests of the vector paths: each word hashed into one of
//! [`opc_memory::embed::DIM`] buckets, normalised. Texts that share words are near each other, so a
//! test can tell "found by meaning" from "not found" without the model.

use opc_memory::embed::DIM;

/// The unit vector of `text`'s words (case-folded, split on anything not alphanumeric).
pub fn words(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIM];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = w
            .to_lowercase()
            .bytes()
            .fold(5381usize, |h, b| h.wrapping_mul(33) ^ usize::from(b));
        v[h % DIM] += 1.0;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.into_iter().map(|x| x / n).collect()
}
