//! Detection: recognisers for structured data, plus the NER tier for names and addresses.

pub mod ner;

pub use ner::{NerError, NerModel, NerSlot, Rampart};
