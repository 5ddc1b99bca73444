//! The memory worker: one tokio task per engine that runs the durable queue of memory jobs.
//!
//! Loop: read the next due job (oldest first); run it; end it (`done`, `rejected`, `failed`) or put
//! it off (an unreachable model: backoff; the daily cap: the next UTC day). With nothing due, sleep
//! until the next job is due, a root completes ([`MemoryWorker::wake`]), or the idle check for
//! consolidation is due. Jobs a stopped process left queued are simply the first ones read.
//!
//! Shutdown: the engine's token. A job in progress (its model call is what takes time) gets
//! [`GRACE`] to finish; past it, or when no job runs, the worker stops at once. A job stopped
//! mid-way stays queued, due at once (on a shared database another node takes it; else it runs at
//! the next start); its batch was written whole or not at all (the
//! apply runs to its end on the blocking pool, in one transaction).
//!
//! Invariant: the worker holds no agent slot and never waits on a session, so it can neither delay
//! a user's answer nor take a slot a conversation waits for.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

use opc_retry::{Jitter, RetryPolicy};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{JobOutcome, consolidate, extract};
use crate::events::Event;
use crate::state::EngineState;
use crate::store::{JobEnd, JobKind, MemoryJob, StoreError, now_ms};

/// The state the worker runs under: the engine's current one (a reload changes the config and the
/// call stack the next job uses).
pub(crate) type Current = Arc<dyn Fn() -> Arc<EngineState> + Send + Sync>;

/// How long a job in progress may go on after shutdown was asked (its model call usually ends well
/// within it; past it the job stays queued for the next start).
pub(crate) const GRACE: Duration = Duration::from_secs(3);
/// When a job whose model cannot be reached is tried again: 15 s after its first failed attempt,
/// doubling up to 15 min, and given up after its fifth. Not jittered: one worker per engine runs
/// the queue, so there is no crowd to spread.
const RETRY: RetryPolicy = RetryPolicy {
    max_attempts: 5,
    base_delay: Duration::from_secs(15),
    factor: 2,
    max_delay: Duration::from_secs(900),
    jitter: Jitter::None,
};
/// The longest the worker sleeps without looking at the queue.
const POLL: Duration = Duration::from_secs(30);
/// Wait after a failed read of the queue.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// The running worker: wake it when a root completes.
#[derive(Clone)]
pub(crate) struct MemoryWorker {
    wake: Arc<Notify>,
}

impl MemoryWorker {
    /// Start the worker on `tracker`, until `shutdown`.
    pub(crate) fn spawn(
        current: Current,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
    ) -> MemoryWorker {
        let wake = Arc::new(Notify::new());
        tracker.spawn(run(current, wake.clone(), shutdown));
        MemoryWorker { wake }
    }

    /// Look at the queue now (a root completed: its jobs are committed).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }
}

async fn run(current: Current, wake: Arc<Notify>, shutdown: CancellationToken) {
    let mut idle_checked: Option<Instant> = None;
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        let rt = current();
        let Some(facts) = rt.context().memory().fact_store() else {
            // A reload took the facts store away: nothing to do until one comes back.
            if !sleep(&wake, &shutdown, POLL).await {
                return;
            }
            continue;
        };
        let consolidation = rt.config().framework.memory.consolidation.clone();
        if consolidation.enabled
            && idle_checked.is_none_or(|at| at.elapsed() >= idle_check(&consolidation))
        {
            idle_checked = Some(Instant::now());
            let idle_ms = consolidation.idle_after.as_millis() as i64;
            if let Err(e) = rt.store().idle_consolidations(now_ms() - idle_ms).await {
                tracing::error!(error = %e, "cannot queue idle consolidations");
            }
        }
        let job = match rt.store().next_memory_job(now_ms()).await {
            Ok(job) => job,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the memory queue");
                if !sleep(&wake, &shutdown, STORE_RETRY).await {
                    return;
                }
                continue;
            }
        };
        let Some(job) = job else {
            let wait = match rt.store().next_memory_job_at().await {
                Ok(Some(at)) => Duration::from_millis((at - now_ms()).max(0) as u64).min(POLL),
                _ => POLL,
            };
            let wait = if consolidation.enabled {
                wait.min(idle_check(&consolidation))
            } else {
                wait
            };
            if !sleep(&wake, &shutdown, wait).await {
                return;
            }
            continue;
        };
        let work = run_job(&rt, &facts, &job);
        tokio::pin!(work);
        let outcome = tokio::select! {
            outcome = &mut work => outcome,
            _ = shutdown.cancelled() => {
                // A job in progress: a short grace to finish its call and apply its batch.
                match tokio::time::timeout(GRACE, &mut work).await {
                    Ok(outcome) => {
                        if let Err(e) = end(&rt, &job, outcome).await {
                            tracing::error!(job = job.id, error = %e, "cannot record a memory job's end");
                        }
                    }
                    Err(_) => {
                        // Due again at once: on a shared database the job was claimed for a
                        // while (`next_memory_job`), and another node can take it now.
                        if let Err(e) = rt
                            .store()
                            .defer_memory_job(job.id, now_ms(), false, "stopped by shutdown")
                            .await
                        {
                            tracing::warn!(job = job.id, error = %e, "cannot hand a memory job back; it is due again when its claim runs out");
                        }
                        tracing::info!(job = job.id, "memory job stopped by shutdown; it stays queued");
                    }
                }
                return;
            }
        };
        if let Err(e) = end(&rt, &job, outcome).await {
            tracing::error!(job = job.id, error = %e, "cannot record a memory job's end");
            if !sleep(&wake, &shutdown, STORE_RETRY).await {
                return;
            }
        }
    }
}

/// How often idle agents are looked for: a tenth of `idleAfter`, between 1 s and [`POLL`].
fn idle_check(consolidation: &opc_hierarchy::schema::Consolidation) -> Duration {
    (consolidation.idle_after / 10).clamp(Duration::from_secs(1), POLL)
}

/// Sleep up to `wait`, or until woken; `false` when shutdown was asked.
async fn sleep(wake: &Notify, shutdown: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = wake.notified() => true,
        _ = tokio::time::sleep(wait) => true,
        _ = shutdown.cancelled() => false,
    }
}

/// Run one job (its store errors become a retry).
async fn run_job(
    rt: &EngineState,
    facts: &opc_memory::facts::FactStore,
    job: &MemoryJob,
) -> Result<JobOutcome, StoreError> {
    let archival = rt
        .config()
        .agents
        .get(&job.agent)
        .is_some_and(|a| a.memory.archival);
    if !archival {
        return Ok(JobOutcome::Done);
    }
    // The job's `update_memory facts` span, in the trace of the request it is about (the task's
    // stored context), after that request's answer: memory work is off the request path.
    let span = crate::spans::memory_span(opc_telemetry::conventions::UPDATE_MEMORY, "facts");
    if let Some(task) = job.task
        && !span.is_disabled()
        && let Ok(record) = rt.store().task(task).await
    {
        opc_telemetry::carry::adopt(&span, record.trace.as_deref());
    }
    match job.kind {
        JobKind::Extract => extract::run(rt, facts, job).instrument(span).await,
        JobKind::Consolidate if rt.config().framework.memory.consolidation.enabled => {
            consolidate::run(rt, facts, job).instrument(span).await
        }
        JobKind::Consolidate => Ok(JobOutcome::Done),
    }
}

/// Record how `job` went: end it or put it off; count its root toward consolidation.
async fn end(
    rt: &EngineState,
    job: &MemoryJob,
    outcome: Result<JobOutcome, StoreError>,
) -> Result<(), StoreError> {
    let store = rt.store();
    let archival = rt
        .config()
        .agents
        .get(&job.agent)
        .is_some_and(|a| a.memory.archival);
    if !archival {
        // Not work: an agent that keeps no facts leaves no job behind.
        return store.drop_memory_job(job.id).await;
    }
    let outcome = outcome.unwrap_or_else(|e| JobOutcome::Retry(e.to_string()));
    let ran = matches!(outcome, JobOutcome::Done | JobOutcome::Rejected(_));
    match outcome {
        JobOutcome::Done => {
            store.end_memory_job(job.id, JobEnd::Done, None).await?;
        }
        JobOutcome::Rejected(reason) => {
            store
                .end_memory_job(job.id, JobEnd::Rejected, Some(&reason))
                .await?;
        }
        JobOutcome::Capped { until } => {
            store
                .defer_memory_job(
                    job.id,
                    until,
                    false,
                    "consolidation.maxTokensPerDay reached",
                )
                .await?;
        }
        JobOutcome::Retry(error) => {
            let attempts = job.attempts + 1;
            if !RETRY.allows_another(attempts) {
                tracing::warn!(job = job.id, agent = %job.agent, attempts, "a memory job gave up");
                store
                    .end_memory_job(job.id, JobEnd::Failed, Some(&error))
                    .await?;
                rt.events().publish(Event::MemoryWorkFailed {
                    agent: job.agent.clone(),
                    task: job.task,
                    kind: job.kind.as_str().to_string(),
                    attempts,
                    error,
                });
            } else {
                let at = now_ms() + RETRY.delay(attempts, None).as_millis() as i64;
                store.defer_memory_job(job.id, at, true, &error).await?;
            }
        }
    }
    let consolidation = &rt.config().framework.memory.consolidation;
    if ran
        && job.kind == JobKind::Extract
        && consolidation.enabled
        && let (Some(root), Some(task)) = (job.root, job.task)
    {
        store
            .memory_root_seen(
                &job.agent,
                root,
                task,
                job.conversation.as_deref(),
                consolidation.frequency.get(),
            )
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait after a job's first, second, … failed attempt.
    #[test]
    fn backoff_doubles_up_to_a_ceiling() {
        assert_eq!(RETRY.delay(1, None), Duration::from_secs(15));
        assert_eq!(RETRY.delay(2, None), Duration::from_secs(30));
        assert_eq!(RETRY.delay(11, None), Duration::from_secs(900));
    }

    #[test]
    fn a_job_is_given_up_after_its_fifth_failed_attempt() {
        assert!((1..5).all(|n| RETRY.allows_another(n)));
        assert!(!RETRY.allows_another(5));
    }
}
