//! The durable queue of memory work: extractions queued with a root's completion (and only then),
//! consolidations every `frequency` roots and when an agent is idle, jobs put off and ended once.
//! The races pin down what several nodes sharing one database rely on: one consolidation per
//! `frequency` roots, and one per idle agent, however many callers count or look at once.

use std::collections::BTreeMap;

use opc_agents::store::{Ending, JobEnd, JobKind, Store, TaskId, TaskState, now_ms};

use super::harness::{child, root};
use crate::conformance;

/// Take task `id` through ASSIGNED and EXECUTING to COMPLETED with `output`.
async fn complete(store: &dyn Store, id: TaskId, output: &str) {
    store.transition(id, TaskState::Assigned).await.unwrap();
    store.transition(id, TaskState::Executing).await.unwrap();
    let ended = store
        .finish(
            id,
            Ending::Completed {
                output,
                summary: None,
            },
        )
        .await
        .unwrap();
    assert!(ended, "task {id} ends once");
}

/// The consolidation jobs queued so far, per agent.
async fn consolidations(store: &dyn Store) -> BTreeMap<String, usize> {
    let mut per_agent = BTreeMap::new();
    for job in store.memory_jobs(1000).await.unwrap() {
        if job.kind == JobKind::Consolidate {
            *per_agent.entry(job.agent).or_insert(0) += 1;
        }
    }
    per_agent
}

conformance! {
    /// A child's completion queues nothing; the root's completion queues an extraction for every
    /// completed task of its tree (the root first), and none for a task that failed.
    async fn completing_a_root_queues_an_extraction_per_completed_task(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan the launch").await;
        let done = child(s, r, "c", "vp", "t1").await;
        let failed = child(s, r, "c", "vp", "t2").await;
        complete(s, done, "child answer").await;
        s.finish(failed, Ending::Failed("boom")).await.unwrap();
        assert!(s.memory_jobs(10).await.unwrap().is_empty(), "{}: a child queues nothing", b.name);
        complete(s, r, "root answer").await;
        let mut jobs = s.memory_jobs(10).await.unwrap();
        jobs.reverse();
        assert_eq!(
            jobs.iter()
                .map(|j| (j.kind, j.agent.as_str(), j.task, j.state.as_str()))
                .collect::<Vec<_>>(),
            [
                (JobKind::Extract, "ceo", Some(r), "queued"),
                (JobKind::Extract, "vp", Some(done), "queued")
            ],
            "{}",
            b.name
        );
        assert_eq!(jobs[0].root, Some(r), "{}", b.name);
        assert_eq!(jobs[1].root, Some(r), "{}", b.name);
        assert_eq!(jobs[0].conversation.as_deref(), Some("c"), "{}", b.name);
        assert_eq!(jobs[0].attempts, 0, "{}", b.name);
        let next = s.next_memory_job(now_ms()).await.unwrap();
        assert_eq!(next.map(|j| j.id), Some(jobs[0].id), "{}: the oldest job runs first", b.name);
    }
}

conformance! {
    /// A root that fails queues no memory work.
    async fn a_root_that_does_not_complete_queues_nothing(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan").await;
        s.finish(r, Ending::Failed("boom")).await.unwrap();
        assert!(s.memory_jobs(10).await.unwrap().is_empty(), "{}", b.name);
        assert_eq!(s.next_memory_job_at().await.unwrap(), None, "{}", b.name);
    }
}

conformance! {
    /// The same root counts once; the `frequency`-th root queues a consolidation and restarts the
    /// count; an agent with roots counted and no consolidation queued gets one when idle, not
    /// before, and not while one is queued.
    async fn consolidation_is_queued_every_frequency_roots_and_when_idle(b: &Backend) {
        let s = &*b.store;
        let r1 = root(s, "c1", "one").await;
        let r2 = root(s, "c2", "two").await;
        assert_eq!(s.memory_root_seen("ceo", r1, r1, Some("c1"), 2).await.unwrap(), None, "{}", b.name);
        assert_eq!(
            s.memory_root_seen("ceo", r1, r1, Some("c1"), 2).await.unwrap(),
            None,
            "{}: the same root counts once",
            b.name
        );
        let job = s
            .memory_root_seen("ceo", r2, r2, Some("c2"), 2)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{}: the second root queues a consolidation", b.name));
        let queued = s.memory_jobs(1).await.unwrap().remove(0);
        assert_eq!((queued.id, queued.kind), (job, JobKind::Consolidate), "{}", b.name);
        assert_eq!((queued.task, queued.root), (Some(r2), Some(r2)), "{}", b.name);
        assert_eq!(queued.conversation.as_deref(), Some("c2"), "{}", b.name);
        assert!(
            s.idle_consolidations(now_ms() + 1).await.unwrap().is_empty(),
            "{}: the count started again",
            b.name
        );
        let r3 = root(s, "c3", "three").await;
        assert_eq!(s.memory_root_seen("ceo", r3, r3, Some("c3"), 5).await.unwrap(), None, "{}", b.name);
        assert!(
            s.idle_consolidations(now_ms() + 1).await.unwrap().is_empty(),
            "{}: a consolidation is queued already",
            b.name
        );
        assert!(s.end_memory_job(job, JobEnd::Done, None).await.unwrap(), "{}", b.name);
        assert!(
            s.idle_consolidations(now_ms() - 60_000).await.unwrap().is_empty(),
            "{}: not idle yet",
            b.name
        );
        let idle = s.idle_consolidations(now_ms() + 1).await.unwrap();
        assert_eq!(idle.len(), 1, "{}: {idle:?}", b.name);
        assert_eq!(idle[0].0, "ceo", "{}", b.name);
        let job = s.memory_jobs(1).await.unwrap().remove(0);
        assert_eq!(job.id, idle[0].1, "{}", b.name);
        assert_eq!((job.task, job.conversation.as_deref()), (Some(r3), Some("c3")), "{}", b.name);
        assert!(
            s.idle_consolidations(now_ms() + 1).await.unwrap().is_empty(),
            "{}: an idle agent is consolidated once",
            b.name
        );
    }
}

conformance! {
    /// A job put off is not due until its time and counts its failed attempt; an ended job is not
    /// ended again nor run again; a dropped job is gone.
    async fn a_deferred_job_waits_and_an_ended_one_is_not_run_again(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan").await;
        complete(s, r, "answer").await;
        let job = s
            .next_memory_job(now_ms())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{}: the completed root's extraction", b.name));
        let later = now_ms() + 60_000;
        s.defer_memory_job(job.id, later, true, "unreachable").await.unwrap();
        assert_eq!(s.next_memory_job(now_ms()).await.unwrap(), None, "{}", b.name);
        assert_eq!(s.next_memory_job_at().await.unwrap(), Some(later), "{}", b.name);
        let again = s.next_memory_job(later).await.unwrap().unwrap();
        assert_eq!((again.attempts, again.error.as_deref()), (1, Some("unreachable")), "{}", b.name);
        // A cap puts it off without counting an attempt.
        s.defer_memory_job(job.id, later, false, "capped").await.unwrap();
        let again = s.next_memory_job(later).await.unwrap().unwrap();
        assert_eq!((again.attempts, again.error.as_deref()), (1, Some("capped")), "{}", b.name);
        assert!(s.end_memory_job(job.id, JobEnd::Rejected, Some("bad")).await.unwrap(), "{}", b.name);
        assert!(!s.end_memory_job(job.id, JobEnd::Done, None).await.unwrap(), "{}", b.name);
        assert_eq!(s.next_memory_job(later).await.unwrap(), None, "{}", b.name);
        assert_eq!(s.next_memory_job_at().await.unwrap(), None, "{}", b.name);
        let ended = s.memory_jobs(1).await.unwrap().remove(0);
        assert_eq!((ended.state.as_str(), ended.error.as_deref()), ("rejected", Some("bad")), "{}", b.name);
        // An ended job is neither put off nor dropped.
        s.defer_memory_job(job.id, later + 1, true, "late").await.unwrap();
        s.drop_memory_job(job.id).await.unwrap();
        let kept = s.memory_jobs(1).await.unwrap().remove(0);
        assert_eq!((kept.id, kept.attempts, kept.state.as_str()), (job.id, 1, "rejected"), "{}", b.name);
        // A queued job that needs no work is dropped.
        let r2 = root(s, "c2", "again").await;
        let consolidation = s.memory_root_seen("ceo", r2, r2, Some("c2"), 1).await.unwrap().unwrap();
        assert_eq!(s.next_memory_job(now_ms()).await.unwrap().map(|j| j.id), Some(consolidation), "{}", b.name);
        s.drop_memory_job(consolidation).await.unwrap();
        assert_eq!(s.next_memory_job(now_ms()).await.unwrap(), None, "{}", b.name);
        assert!(s.memory_jobs(10).await.unwrap().iter().all(|j| j.id != consolidation), "{}", b.name);
    }
}

conformance! {
    /// The recall rows of a task are the ones written for it, in order, in its conversation only.
    async fn recall_seqs_are_a_tasks_own_rows(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan the launch").await;
        let c = child(s, r, "c", "vp", "t1").await;
        let of_root = s.recall_seqs(r, "c").await.unwrap();
        let of_child = s.recall_seqs(c, "c").await.unwrap();
        assert!(!of_root.is_empty(), "{}: the root's request is recalled", b.name);
        assert!(!of_child.is_empty(), "{}: the child's request is recalled", b.name);
        assert!(of_root.windows(2).all(|w| w[0] < w[1]), "{}: {of_root:?}", b.name);
        assert!(of_root.iter().all(|seq| !of_child.contains(seq)), "{}", b.name);
        assert!(s.recall_seqs(r, "elsewhere").await.unwrap().is_empty(), "{}", b.name);
    }
}

conformance! {
    /// Many callers (as several nodes) counting different roots of one agent at once: exactly one
    /// consolidation per `frequency` roots, and the count left over is what remains.
    async fn racing_root_counts_queue_one_consolidation_per_frequency(b: &Backend) {
        const ROOTS: usize = 12;
        const FREQUENCY: u32 = 3;
        let mut roots = Vec::new();
        for i in 0..ROOTS {
            roots.push(root(&*b.store, &format!("c{i}"), "work").await);
        }
        let mut racers = Vec::new();
        for (i, r) in roots.iter().copied().enumerate() {
            let s = b.store.clone();
            racers.push(tokio::spawn(async move {
                let conversation = format!("c{i}");
                s.memory_root_seen("ceo", r, r, Some(&conversation), FREQUENCY).await
            }));
        }
        let mut queued = Vec::new();
        for racer in racers {
            match racer.await.unwrap() {
                Ok(Some(job)) => queued.push(job),
                Ok(None) => {}
                Err(e) => panic!("{}: {e}", b.name),
            }
        }
        assert_eq!(queued.len(), ROOTS / FREQUENCY as usize, "{}: {queued:?}", b.name);
        assert_eq!(
            consolidations(&*b.store).await.get("ceo").copied(),
            Some(ROOTS / FREQUENCY as usize),
            "{}",
            b.name
        );
        // Every root was counted: nothing is left pending, so an idle look queues nothing more.
        for job in &queued {
            b.store.end_memory_job(*job, JobEnd::Done, None).await.unwrap();
        }
        assert!(
            b.store.idle_consolidations(now_ms() + 1).await.unwrap().is_empty(),
            "{}: every root was counted toward a consolidation",
            b.name
        );
    }
}

conformance! {
    /// Two callers (as two nodes) looking for idle agents at once: every idle agent gets exactly
    /// one consolidation between them, round after round.
    async fn racing_idle_looks_queue_one_consolidation_per_agent(b: &Backend) {
        const AGENTS: usize = 6;
        for round in 0..4 {
            let r = root(&*b.store, &format!("round{round}"), "work").await;
            for a in 0..AGENTS {
                let agent = format!("agent{a}");
                child(&*b.store, r, &format!("round{round}"), &agent, &format!("t{a}")).await;
                let queued = b
                    .store
                    .memory_root_seen(&agent, r, r, Some(&format!("round{round}")), 100)
                    .await
                    .unwrap();
                assert_eq!(queued, None, "{}", b.name);
            }
            let idle_before = now_ms() + 1;
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let s = b.store.clone();
                    tokio::spawn(async move { s.idle_consolidations(idle_before).await })
                })
                .collect();
            let mut picked = BTreeMap::new();
            for racer in racers {
                for (agent, _job) in racer.await.unwrap().unwrap_or_else(|e| panic!("{}: {e}", b.name)) {
                    *picked.entry(agent).or_insert(0) += 1;
                }
            }
            assert_eq!(picked.len(), AGENTS, "{} round {round}: {picked:?}", b.name);
            assert!(picked.values().all(|n| *n == 1), "{} round {round}: {picked:?}", b.name);
            let queued = consolidations(&*b.store).await;
            assert_eq!(queued.len(), AGENTS, "{} round {round}: {queued:?}", b.name);
            assert!(queued.values().all(|n| *n == round + 1), "{} round {round}: {queued:?}", b.name);
            // The consolidation is about the agent's task of that root.
            let jobs = b.store.memory_jobs(AGENTS as u32).await.unwrap();
            for job in &jobs {
                let task = job.task.unwrap_or_else(|| panic!("{}: {job:?}", b.name));
                assert_eq!(b.store.task(task).await.unwrap().agent, job.agent, "{}", b.name);
                assert_eq!(job.root, Some(r), "{}", b.name);
            }
            for job in jobs {
                b.store.end_memory_job(job.id, JobEnd::Done, None).await.unwrap();
            }
        }
    }
}
