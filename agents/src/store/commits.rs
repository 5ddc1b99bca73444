//! The store's commit latency: `opc.store.commit.duration` (seconds), one measurement per write
//! transaction's commit, with `opc.store.backend` = `sqlite` | `postgres` (issue 37, §4).
//!
//! What is measured, per backend (each site says so too):
//! - SQLite: the group commit's `COMMIT` on the writer thread, alone (one measurement per group,
//!   however many operations it holds: a group is one transaction);
//! - PostgreSQL: a write transaction's `COMMIT` round trip alone; a pipelined write sends its
//!   COMMIT with its statements, so there the round trip that carries the COMMIT is measured
//!   (the whole write for a one-round-trip write, its second round trip for a read-then-write).
//!
//! A commit that fails is measured too: its wait was as real to the caller as a good one's.
//!
//! Cost with telemetry off: the instruments are the API's no-ops, so a commit pays two monotonic
//! clock reads (vDSO, tens of nanoseconds) and one virtual call that does nothing, against a commit
//! of tens of microseconds at the least.
//!
//! A leaf: both backends use it; it uses no other file of `store/`.

use std::time::{Duration, Instant};

use opc_telemetry::metrics::{instruments, kv};
use opc_telemetry::opentelemetry::metrics::Histogram;

/// The attribute that names the backend.
const BACKEND: &str = "opc.store.backend";

/// The backend a commit ran on, as `opc.store.backend` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Record one commit on `backend` that started at `started` (now is its end).
pub(super) fn record(backend: Backend, started: Instant) {
    record_on(&instruments().store_commit, backend, started.elapsed());
}

/// Record `took` on `histogram`, in seconds (the conventions' unit for durations).
fn record_on(histogram: &Histogram<f64>, backend: Backend, took: Duration) {
    histogram.record(took.as_secs_f64(), &[kv(BACKEND, backend.as_str())]);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opc_telemetry::opentelemetry::KeyValue;
    use opc_telemetry::opentelemetry::metrics::SyncInstrument;

    use super::*;

    /// An instrument that keeps what it was given.
    #[derive(Default)]
    struct Kept(Mutex<Vec<(f64, Vec<KeyValue>)>>);

    impl SyncInstrument<f64> for Kept {
        fn measure(&self, measurement: f64, attributes: &[KeyValue]) {
            self.0
                .lock()
                .unwrap()
                .push((measurement, attributes.to_vec()));
        }
    }

    /// A commit is recorded once, in seconds, with its backend as the only attribute.
    #[test]
    fn a_commit_is_recorded_in_seconds_by_backend() {
        let kept = Arc::new(Kept::default());
        let histogram = Histogram::new(kept.clone());
        record_on(&histogram, Backend::Sqlite, Duration::from_millis(1500));
        record_on(&histogram, Backend::Postgres, Duration::from_micros(250));
        let got = kept.0.lock().unwrap();
        assert_eq!(got.len(), 2);
        assert!((got[0].0 - 1.5).abs() < 1e-9, "{}", got[0].0);
        assert_eq!(got[0].1, [KeyValue::new("opc.store.backend", "sqlite")]);
        assert!((got[1].0 - 0.000_25).abs() < 1e-12, "{}", got[1].0);
        assert_eq!(got[1].1, [KeyValue::new("opc.store.backend", "postgres")]);
    }
}
