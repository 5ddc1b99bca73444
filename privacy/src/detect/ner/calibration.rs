//! The NER tier's score calibration: one monotone curve per type from the model's raw span score
//! (the mean of 1 − P(O) over the span's tokens) onto the scale of `confidenceThreshold`, "how sure
//! before we mask".
//!
//! Why: the raw means of the three types are not on one scale, and none is on the scale the
//! threshold's default (0.85) was chosen for. A true name whose tokens the model reads at 0.6 scored
//! 0.6 and was dropped, although on our data nearly every span above 0.5 is personal data. Each curve
//! is piecewise linear through (0, 0), (`knee`, 0.85) and (1, 1): the raw score at which the type's
//! token F2 is best on the tuning data maps onto the default threshold, so that the default is the
//! best F2 point of a recall-first gateway, and a threshold above or below it still means more or
//! less certainty, in the same order as before (the curves are strictly increasing).
//!
//! The pattern tier needs no curve: its scores are set against the same default by construction
//! (validated matches 0.85 to 1.0, weak shapes 0.5 to 0.6 until a context word adds 0.35).
//!
//! How the knees were fitted (the only place these constants live): on the **tuning** split of the
//! generated corpus only (never the held-out split), by sweeping each type's raw threshold and
//! keeping the one with the best token F2 (ties to the lower threshold, for recall):
//!
//! ```text
//! cargo run --release -p opc-privacy --example ner_calibrate -- fit <tune.jsonl>
//! ```
//!
//! which prints the sweep and the constants to paste here. The values below: the tuning split
//! `cargo run -p opc-privacy --example pii_corpus -- --split tune --seed 1 --count 1500` (1,500 texts,
//! 2,481 names, 555 addresses, 301 locations), sweeping raw 0.50 to 0.95 in steps of 0.05. Below 0.50
//! (`decode::ENTITY_MIN`) no token counts without a cue, so the sweep starts there; a knee at the
//! floor means "every span the model reads is worth masking".

use crate::EntityType;

/// The default `confidenceThreshold` the knees map onto.
pub const DEFAULT_THRESHOLD: f32 = 0.85;

/// The score of a name or place a rule found (the rules in `rules.rs`, `fields.rs` and `places.rs`):
/// a decision, not a probability, set just above [`DEFAULT_THRESHOLD`] so that a user who raises the
/// threshold to demand more certainty drops these first.
pub const RULE_SCORE: f32 = 0.9;

/// A strictly increasing, piecewise-linear map of `[0, 1]` onto itself with `knee` ↦
/// [`DEFAULT_THRESHOLD`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Curve {
    /// The raw score that maps onto the default threshold (0 < knee < 1).
    pub knee: f32,
}

impl Curve {
    /// The calibrated score of a raw one.
    pub fn apply(self, raw: f32) -> f32 {
        let raw = raw.clamp(0.0, 1.0);
        let knee = self.knee.clamp(0.01, 0.99);
        if raw <= knee {
            DEFAULT_THRESHOLD * raw / knee
        } else {
            DEFAULT_THRESHOLD + (1.0 - DEFAULT_THRESHOLD) * (raw - knee) / (1.0 - knee)
        }
    }

    /// The raw score that maps onto `threshold` (the inverse of [`Curve::apply`]).
    pub fn raw_for(self, threshold: f32) -> f32 {
        let t = threshold.clamp(0.0, 1.0);
        let knee = self.knee.clamp(0.01, 0.99);
        if t <= DEFAULT_THRESHOLD {
            t * knee / DEFAULT_THRESHOLD
        } else {
            knee + (t - DEFAULT_THRESHOLD) * (1.0 - knee) / (1.0 - DEFAULT_THRESHOLD)
        }
    }
}

/// `PERSON_NAME`: best token F2 0.958 at raw 0.50 (P 0.965, R 0.956); at raw 0.85, where the old
/// default threshold cut, R was 0.915 (F2 0.926).
pub const PERSON_NAME: Curve = Curve { knee: 0.50 };
/// `ADDRESS`: best token F2 0.832 at raw 0.55 (P 0.953, R 0.807); at raw 0.85, F2 0.791.
pub const ADDRESS: Curve = Curve { knee: 0.55 };
/// `LOCATION`: best token F2 0.765 at raw 0.50 (P 0.856, R 0.745); at raw 0.85, F2 0.710.
pub const LOCATION: Curve = Curve { knee: 0.50 };

/// The curve of a type the model reports (others pass through unchanged).
pub fn curve(kind: EntityType) -> Curve {
    match kind {
        EntityType::PersonName => PERSON_NAME,
        EntityType::Address => ADDRESS,
        EntityType::Location => LOCATION,
        _ => Curve {
            knee: DEFAULT_THRESHOLD,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_are_increasing_and_hit_the_default_at_the_knee() {
        for curve in [
            PERSON_NAME,
            ADDRESS,
            LOCATION,
            Curve { knee: 0.2 },
            Curve { knee: 0.9 },
        ] {
            assert!((curve.apply(curve.knee) - DEFAULT_THRESHOLD).abs() < 1e-6);
            assert_eq!(curve.apply(0.0), 0.0);
            assert!((curve.apply(1.0) - 1.0).abs() < 1e-6);
            let mut last = -1.0;
            for i in 0..=100 {
                let raw = i as f32 / 100.0;
                let c = curve.apply(raw);
                assert!(c > last, "{curve:?} at {raw}");
                assert!((curve.raw_for(c) - raw).abs() < 1e-4, "{curve:?} at {raw}");
                last = c;
            }
        }
        // Other types pass through.
        assert!((curve(EntityType::Email).apply(0.7) - 0.7).abs() < 1e-6);
    }
}
