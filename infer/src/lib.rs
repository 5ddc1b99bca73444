//! A BERT encoder over quantized weights, on the CPU: the kernels and forward pass shared by the
//! privacy NER (Rampart) and recall's embedder (all-MiniLM-L6-v2).
//!
//! Role: keep the weights quantized in memory (one byte per value, one scale per block of 32, packed
//! for the kernels) and run them with int8 kernels: AVX-512 VNNI or AVX-VNNI (`vpdpbusd`), AVX2
//! (pulp's safe token) or portable code, picked once at load ([`kernel::selected`], overridden by
//! `OPC_KERNEL`). Neither model crate depends on the other; both depend on this one.
//!
//! Invariants: `unsafe` lives in one module only, `kernel::x86` (denied everywhere else in the crate,
//! forbidden in every other crate); every kernel gives the same bits (checked by a proptest), so
//! neither the CPU nor `OPC_KERNEL` changes a result; a sequence's result does not depend on what it
//! is batched with (rows are packed, never padded); nothing here sees text, only token ids.

pub mod bert;
pub mod kernel;
pub mod ops;
pub mod quant;

pub use bert::{Config, Encoder, EncoderError, Hidden, QTable, Source};
pub use ops::Dense;
pub use quant::{BLOCK, QMatrix, QuantError};
