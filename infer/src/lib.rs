//! A BERT encoder over quantized weights, on the CPU: the kernels and forward pass shared by the
//! privacy NER (Rampart) and recall's embedder (all-MiniLM-L6-v2).
//!
//! Role: keep the weights quantized in memory (one byte per value, one scale per block of 32) and run
//! them with int8 kernels written over pulp's safe SIMD tokens (AVX-512BW, AVX2, or portable code,
//! picked at run time). Neither model crate depends on the other; both depend on this one.
//!
//! Invariants: no `unsafe`; a sequence's result does not depend on what it is batched with (rows are
//! packed, never padded); nothing here sees text, only token ids.

pub mod bert;
mod kernel;
pub mod ops;
pub mod quant;

pub use bert::{Config, Encoder, EncoderError, Hidden, QTable, Source};
pub use ops::Dense;
pub use quant::{BLOCK, QMatrix, QuantError};
