//! Helpers shared by this crate's unit tests (compiled only under `cfg(test)`).
//!
//! Why: the recall and facts stores are tested without the model files, with a deterministic
//! stand-in for MiniLM: words hashed into buckets, so texts sharing words are close. The shape of
//! that stand-in lives here once; each store's tests keep their own bucket function, because their
//! expectations (which texts land near which) were written against it.

use crate::embed::DIM;

/// A unit-length bag-of-words vector of `text`: each word (split at non-alphanumerics, lowercased)
/// adds one to the bucket `bucket` picks for it (an index below [`DIM`]); a text with no words is the
/// zero vector.
pub(crate) fn bag_of_words(text: &str, bucket: impl Fn(&str) -> usize) -> Vec<f32> {
    let mut v = vec![0f32; DIM];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        v[bucket(&w.to_lowercase())] += 1.0;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    v
}
