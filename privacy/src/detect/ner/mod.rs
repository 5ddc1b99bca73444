//! The seam between pattern detection and a local NER model.
//!
//! Names and street addresses have no checksum a pattern can verify, so they come from a token
//! classification model run in-process. Loading one takes far longer than `opc run` may take to be
//! ready, so the model arrives later: a [`NerSlot`] is shared by the detector and the loader, starts
//! empty, and is filled once. Until then detection runs its pattern tier alone, which is why the
//! privacy gateway asks the slot for its [`NerState`] and waits for it ([`NerSlot::ready_within`])
//! before it masks a request that may hold names: a request masked by patterns alone would carry
//! every name in it to the model.
//!
//! Loading. Whoever runs the gateway installs a loader ([`NerSlot::set_loader`]: read the model from
//! the cache, fetching it first if it is missing) and starts it ([`NerSlot::load`]). A load runs on a
//! thread of its own and ends `Ready` or `Failed` (with the reason: file and cause, never text). A
//! failed slot is tried again by the next caller that needs it, at most once per [`retry_delay`]
//! (2 s, or ten times as long as the failed attempt took, up to a minute): a model fetched with
//! `opc models fetch` beside a running gateway is picked up without a restart, and a model that
//! cannot load never costs more than a tenth of a core in failed attempts.
//!
//! Invariants: a model never logs the text it sees; the first model that lands stays (a slot is never
//! emptied or refilled); a failure never replaces a loaded model.
//!
//! The model itself: [`Rampart`] (files fetched and verified by `opc-models`; the ONNX weights read by
//! [`onnx`], kept quantised and run by `opc-infer`'s int8 encoder through [`bert`], labels turned into
//! spans by [`decode`], scores put on the threshold's scale by [`calibration`], and what the model
//! cannot see added by [`rules`]; places named in the gazetteer of [`places`] kept where the text
//! gives evidence of one).

pub mod bert;
pub mod calibration;
pub mod decode;
pub mod fields;
pub mod onnx;
pub mod places;
mod rampart;
#[cfg(feature = "reference")]
mod reference;
pub mod rules;

pub use rampart::{NerError, Rampart};

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

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

pub use opc_shapes::served_by_ner;

/// Where a slot's model is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NerState {
    /// No load has started yet.
    Idle,
    /// A load is under way.
    Loading,
    /// The model is in the slot.
    Ready,
    /// The last load failed, for this reason (which file and why; never text from a conversation).
    Failed(String),
}

impl NerState {
    /// `idle`, `loading`, `ready`, `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            NerState::Idle => "idle",
            NerState::Loading => "loading",
            NerState::Ready => "ready",
            NerState::Failed(_) => "failed",
        }
    }
}

impl fmt::Display for NerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NerState::Failed(reason) => write!(f, "failed: {reason}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// How a slot gets its model: called on the slot's loading thread, once per attempt.
pub type NerLoader = Arc<dyn Fn() -> Result<Arc<dyn NerModel>, String> + Send + Sync>;

/// The shortest wait between two load attempts.
const RETRY_MIN: Duration = Duration::from_secs(2);
/// The longest.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// How long after a failed attempt that took `took` the next one may start: ten times as long (so
/// failed loads use at most a tenth of a core), at least [`RETRY_MIN`] and at most [`RETRY_MAX`].
pub fn retry_delay(took: Duration) -> Duration {
    took.saturating_mul(10).clamp(RETRY_MIN, RETRY_MAX)
}

/// A slot's state and when a failed one may be tried again.
#[derive(Clone, Debug)]
struct Status {
    state: NerState,
    retry_at: Option<Instant>,
}

struct Inner {
    model: OnceLock<Arc<dyn NerModel>>,
    status: watch::Sender<Status>,
    loader: std::sync::Mutex<Option<NerLoader>>,
}

/// Where a model lands once it has loaded; cheap to clone, shared by every detector.
#[derive(Clone)]
pub struct NerSlot(Arc<Inner>);

impl Default for NerSlot {
    fn default() -> Self {
        NerSlot(Arc::new(Inner {
            model: OnceLock::new(),
            status: watch::Sender::new(Status {
                state: NerState::Idle,
                retry_at: None,
            }),
            loader: std::sync::Mutex::new(None),
        }))
    }
}

impl fmt::Debug for NerSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NerSlot({})", self.state())
    }
}

impl NerSlot {
    /// An empty slot, without a loader.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fill the slot; `false` when it was already filled (the first model stays).
    pub fn set(&self, model: Arc<dyn NerModel>) -> bool {
        let set = self.0.model.set(model).is_ok();
        self.publish_ready();
        set
    }

    /// The model, once loaded.
    pub fn get(&self) -> Option<&Arc<dyn NerModel>> {
        self.0.model.get()
    }

    /// The state now.
    pub fn state(&self) -> NerState {
        if self.get().is_some() {
            return NerState::Ready;
        }
        self.0.status.borrow().state.clone()
    }

    /// Install how this slot loads its model (replacing any earlier loader); nothing starts yet.
    pub fn set_loader(&self, loader: NerLoader) {
        *self.loader_lock() = Some(loader);
    }

    fn loader_lock(&self) -> std::sync::MutexGuard<'_, Option<NerLoader>> {
        self.0.loader.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start loading on a thread of its own when the slot is idle, or failed and its retry is due,
    /// and a loader is installed. Returns whether a load is under way (started now or before).
    /// Cheap when there is nothing to do: callers ask before every masked request.
    pub fn load(&self) -> bool {
        self.load_at(Instant::now())
    }

    fn load_at(&self, now: Instant) -> bool {
        if self.get().is_some() {
            return false;
        }
        let Some(loader) = self.loader_lock().clone() else {
            return self.state() == NerState::Loading;
        };
        let mut started = false;
        let loading = self.0.status.send_if_modified(|status| {
            let due = match &status.state {
                NerState::Idle => true,
                NerState::Failed(_) => status.retry_at.is_none_or(|at| at <= now),
                NerState::Loading | NerState::Ready => false,
            };
            if due && self.0.model.get().is_none() {
                status.state = NerState::Loading;
                status.retry_at = None;
                started = true;
            }
            started
        });
        if !loading {
            return self.state() == NerState::Loading;
        }
        let slot = self.clone();
        let spawned = std::thread::Builder::new()
            .name("ner-load".into())
            .spawn(move || slot.run(&loader));
        if let Err(e) = spawned {
            self.publish_failed(
                format!("cannot start the loading thread: {e}"),
                Duration::ZERO,
            );
            return false;
        }
        true
    }

    /// Run `loader` on this thread and record its outcome.
    fn run(&self, loader: &NerLoader) {
        let started = Instant::now();
        // A loader that panics fails the attempt; it never leaves the slot loading for good.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loader()))
            .unwrap_or_else(|_| Err("the loader panicked".into()));
        match outcome {
            Ok(model) => {
                let _ = self.0.model.set(model);
                self.publish_ready();
            }
            Err(reason) => self.publish_failed(reason, started.elapsed()),
        }
    }

    /// Load on this thread now (short-lived commands, which cannot wait for a background load):
    /// the state it ends in. Does nothing but report when the slot is ready or a load is under way.
    pub fn load_blocking(&self) -> NerState {
        let Some(loader) = self.loader_lock().clone() else {
            return self.state();
        };
        let claimed = self.0.status.send_if_modified(|status| {
            let free = matches!(status.state, NerState::Idle | NerState::Failed(_))
                && self.0.model.get().is_none();
            if free {
                status.state = NerState::Loading;
                status.retry_at = None;
            }
            free
        });
        if claimed {
            self.run(&loader);
        }
        self.state()
    }

    fn publish_ready(&self) {
        self.0.status.send_modify(|status| {
            status.state = NerState::Ready;
            status.retry_at = None;
        });
    }

    fn publish_failed(&self, reason: String, took: Duration) {
        self.0.status.send_if_modified(|status| {
            if self.0.model.get().is_some() || status.state == NerState::Ready {
                return false;
            }
            status.state = NerState::Failed(reason);
            status.retry_at = Some(Instant::now() + retry_delay(took));
            true
        });
    }

    /// Wait, up to `wait`, until the model is in the slot. Starts a load when none has started; when
    /// the last load failed, waits for one retry if it falls due within `wait` (a caller never waits
    /// for more than one attempt after a failure: the failure is its answer). Returns the state it
    /// ends in: `Ready`; `Failed` when the last attempt failed; `Loading` (or `Idle`, when nobody has
    /// installed a loader) when the time ran out. Never polls: it sleeps on the slot's changes and on
    /// the retry's due time.
    pub async fn ready_within(&self, wait: Duration) -> NerState {
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = self.0.status.subscribe();
        // Whether this caller saw a failure and then an attempt after it.
        let (mut saw_failure, mut retried) = (false, false);
        loop {
            if self.get().is_some() {
                return NerState::Ready;
            }
            let status = changes.borrow_and_update().clone();
            match status.state {
                NerState::Ready => return NerState::Ready,
                NerState::Failed(reason) => {
                    if retried {
                        return NerState::Failed(reason);
                    }
                    saw_failure = true;
                    let now = tokio::time::Instant::now();
                    match status.retry_at.map(tokio::time::Instant::from_std) {
                        // Due: start it (unless nobody installed a loader), then wait on it.
                        Some(at) if at <= now => {
                            if !self.load() {
                                return NerState::Failed(reason);
                            }
                            retried = true;
                        }
                        // Due in time: sleep until it is (or the slot changes), then look again.
                        Some(at) if at <= deadline => {
                            let _ = tokio::time::timeout_at(at, changes.changed()).await;
                        }
                        _ => return NerState::Failed(reason),
                    }
                }
                state @ (NerState::Idle | NerState::Loading) => {
                    if state == NerState::Idle && self.load() {
                        continue;
                    }
                    retried |= saw_failure;
                    match tokio::time::timeout_at(deadline, changes.changed()).await {
                        Ok(Ok(())) => {}
                        // Out of time (the sender lives as long as the slot, so `changed` only ends
                        // with it).
                        _ => return self.state(),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Mutex;
    use std::sync::mpsc;

    use super::*;
    use crate::EntityType;

    struct NoSpans;

    impl NerModel for NoSpans {
        fn entities(&self, _: &str) -> Vec<Entity> {
            Vec::new()
        }
    }

    /// A loader that waits for the test to say how the attempt ends (`None`: it fails).
    fn gated() -> (NerLoader, mpsc::Sender<bool>, Arc<Mutex<u32>>) {
        let (tx, rx) = mpsc::channel::<bool>();
        let rx = Mutex::new(rx);
        let attempts = Arc::new(Mutex::new(0));
        let counted = attempts.clone();
        let loader: NerLoader = Arc::new(move || {
            *counted.lock().unwrap() += 1;
            match rx.lock().unwrap().recv() {
                Ok(true) => Ok(Arc::new(NoSpans) as Arc<dyn NerModel>),
                _ => Err("model_q4.onnx is missing".into()),
            }
        });
        (loader, tx, attempts)
    }

    #[test]
    fn every_type_is_either_served_by_the_model_or_not() {
        let served: Vec<&str> = EntityType::ALL
            .into_iter()
            .filter(|t| served_by_ner(*t))
            .map(EntityType::as_str)
            .collect();
        assert!(served.contains(&"PERSON_NAME") && served.contains(&"ADDRESS"));
        assert!(!served.contains(&"EMAIL"));
    }

    #[test]
    fn retries_wait_longer_after_slower_failures_within_bounds() {
        assert_eq!(retry_delay(Duration::ZERO), RETRY_MIN);
        assert_eq!(retry_delay(Duration::from_secs(1)), Duration::from_secs(10));
        assert_eq!(retry_delay(Duration::from_secs(3600)), RETRY_MAX);
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_the_model_lands() {
        let slot = NerSlot::new();
        let (loader, release, _) = gated();
        slot.set_loader(loader);
        let waiting = tokio::spawn({
            let slot = slot.clone();
            async move { slot.ready_within(Duration::from_secs(60)).await }
        });
        // The waiter started the load, which holds until released.
        release.send(true).unwrap();
        assert_eq!(waiting.await.unwrap(), NerState::Ready);
        assert!(slot.get().is_some());
    }

    #[tokio::test]
    async fn without_the_model_in_time_the_wait_ends_loading() {
        let slot = NerSlot::new();
        let (loader, release, _) = gated();
        slot.set_loader(loader);
        assert_eq!(
            slot.ready_within(Duration::from_millis(20)).await,
            NerState::Loading
        );
        // No loader at all: nothing will fill it, and the wait ends idle.
        let lonely = NerSlot::new();
        assert_eq!(
            lonely.ready_within(Duration::from_millis(20)).await,
            NerState::Idle
        );
        release.send(true).unwrap();
    }

    #[tokio::test]
    async fn a_failure_is_reported_and_retried_only_once_due() {
        let slot = NerSlot::new();
        let (loader, release, attempts) = gated();
        slot.set_loader(loader);
        release.send(false).unwrap();
        assert_eq!(
            slot.load_blocking(),
            NerState::Failed("model_q4.onnx is missing".into())
        );
        // The retry is not due yet and falls after this short wait: no second attempt.
        let state = slot.ready_within(Duration::from_millis(10)).await;
        assert_eq!(state, NerState::Failed("model_q4.onnx is missing".into()));
        assert_eq!(*attempts.lock().unwrap(), 1);
        assert!(!slot.load(), "not due yet");
        // Once due, the next caller starts it again; this time it loads.
        assert!(slot.load_at(Instant::now() + RETRY_MIN));
        release.send(true).unwrap();
        assert_eq!(
            slot.ready_within(Duration::from_secs(60)).await,
            NerState::Ready
        );
        assert_eq!(*attempts.lock().unwrap(), 2);
    }

    #[tokio::test]
    async fn a_wait_long_enough_for_the_retry_sleeps_until_it_and_retries() {
        let slot = NerSlot::new();
        let (loader, release, attempts) = gated();
        slot.set_loader(loader);
        release.send(false).unwrap();
        assert!(matches!(slot.load_blocking(), NerState::Failed(_)));
        release.send(true).unwrap();
        assert_eq!(
            slot.ready_within(Duration::from_secs(60)).await,
            NerState::Ready
        );
        assert_eq!(*attempts.lock().unwrap(), 2);
    }

    #[test]
    fn a_model_set_by_hand_stays_and_a_late_failure_does_not_replace_it() {
        let slot = NerSlot::new();
        assert_eq!(slot.state(), NerState::Idle);
        assert!(slot.set(Arc::new(NoSpans)));
        assert!(!slot.set(Arc::new(NoSpans)));
        slot.publish_failed("late".into(), Duration::ZERO);
        assert_eq!(slot.state(), NerState::Ready);
        let (loader, _release, attempts) = gated();
        slot.set_loader(loader);
        assert!(!slot.load());
        assert_eq!(*attempts.lock().unwrap(), 0);
    }
}
