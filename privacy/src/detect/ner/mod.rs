//! The seam between pattern detection and a local NER model.
//!
//! Names and street addresses have no checksum a pattern can verify, so they come from a token
//! classification model run in-process. Loading one takes far longer than `opc run` may take to be
//! ready, so the model arrives later: a [`NerSlot`] is shared by the detector and the loader, starts
//! empty, and is filled once. Until then (or for good, when the model is absent) detection runs its
//! pattern tier alone.
//!
//! Invariant: a model never logs the text it sees.
//!
//! The model itself: [`Rampart`] (files fetched and verified by `opc-models`; the ONNX weights read by
//! [`onnx`], kept quantised and run by `opc-infer`'s int8 encoder through [`bert`], labels turned into
//! spans by [`decode`], scores put on the threshold's scale by [`calibration`], and what the model
//! cannot see added by [`rules`]).

pub mod bert;
pub mod calibration;
pub mod decode;
pub mod onnx;
mod rampart;
#[cfg(feature = "reference")]
mod reference;
pub mod rules;

pub use rampart::{NerError, Rampart};

use std::sync::{Arc, OnceLock};

use crate::Entity;

/// A loaded NER model.
pub trait NerModel: Send + Sync {
    /// `PERSON_NAME`, `ADDRESS` and `LOCATION` spans in `text` (byte offsets), scored 0 to 1 on the
    /// threshold's scale.
    fn entities(&self, text: &str) -> Vec<Entity>;

    /// [`NerModel::entities`] of each text, in order. A model that runs texts faster together (many
    /// short messages in one forward pass) overrides this; the result must be the same.
    fn entities_batch(&self, texts: &[&str]) -> Vec<Vec<Entity>> {
        texts.iter().map(|t| self.entities(t)).collect()
    }
}

/// Where a model lands once it has loaded; cheap to clone, shared by every detector.
#[derive(Clone, Default)]
pub struct NerSlot(Arc<OnceLock<Arc<dyn NerModel>>>);

impl NerSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fill the slot; `false` when it was already filled (the first model stays).
    pub fn set(&self, model: Arc<dyn NerModel>) -> bool {
        self.0.set(model).is_ok()
    }

    /// The model, once loaded.
    pub fn get(&self) -> Option<&Arc<dyn NerModel>> {
        self.0.get()
    }
}
