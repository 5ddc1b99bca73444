//! Memory work shared by several nodes on one PostgreSQL database: a job is handed to one worker
//! (`next_memory_job` claims it), and consolidations are queued once per agent however many nodes
//! look at once. Each "node" here is a `PgStore` of its own (its own pool) on one fresh database;
//! the jobs are queued the way the engine queues them, by completing roots.
//!
//! Without a PostgreSQL server these tests skip with one line (`opc-testgate`, group `postgres`),
//! and fail under CI.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use opc_agents::llm::Message;
use opc_agents::store::{
    Ending, JobEnd, JobKind, NewTask, PgStore, Store, TaskId, TaskState, now_ms,
};
use opc_tests::postgres::fresh_database;
use opc_tests::wait::{WAIT, within};

/// The claim window of `next_memory_job` on PostgreSQL (10 minutes).
const CLAIM_WINDOW_MS: i64 = 10 * 60 * 1000;

/// Two nodes' stores on the database `url`.
async fn two_nodes(url: &str) -> [Arc<PgStore>; 2] {
    [
        Arc::new(PgStore::connect(url, 8).await.unwrap()),
        Arc::new(PgStore::connect(url, 8).await.unwrap()),
    ]
}

/// A new root task of `agent` in `conversation`.
async fn root(store: &dyn Store, conversation: &str, agent: &str) -> TaskId {
    store
        .create_task(&NewTask {
            parent_id: None,
            conversation_id: conversation,
            agent,
            depth: 0,
            tool_use_id: None,
            tool_index: 0,
            input: "work",
            messages: &[Message::user("work")],
            author: Some("web:alice"),
            trace: None,
        })
        .await
        .unwrap()
}

/// Complete root `id`: its completion queues its extraction.
async fn complete(store: &dyn Store, id: TaskId) {
    store.transition(id, TaskState::Assigned).await.unwrap();
    store.transition(id, TaskState::Executing).await.unwrap();
    let ended = store
        .finish(
            id,
            Ending::Completed {
                output: "done",
                summary: None,
            },
        )
        .await
        .unwrap();
    assert!(ended, "root {id} ends once");
}

/// The queued consolidations, per agent.
async fn queued_consolidations(store: &dyn Store) -> BTreeMap<String, usize> {
    let mut per_agent = BTreeMap::new();
    for job in store.memory_jobs(10_000).await.unwrap() {
        if job.kind == JobKind::Consolidate && job.state == "queued" {
            *per_agent.entry(job.agent).or_insert(0) += 1;
        }
    }
    per_agent
}

/// Workers on two nodes take jobs from one queue at once, each as fast as it can: every job is
/// handed out exactly once. A claimed job is not handed out again while its claim lasts, is
/// handed out again after it (its worker died), and an ended job never is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_is_handed_to_exactly_one_worker() {
    const JOBS: usize = 40;
    const WORKERS_PER_NODE: usize = 4;
    let Some(url) = fresh_database("pg_jobs_claim").await else {
        return;
    };
    let nodes = two_nodes(&url).await;
    for i in 0..JOBS {
        let r = root(&*nodes[i % 2], &format!("c{i}"), "ceo").await;
        complete(&*nodes[i % 2], r).await;
    }
    let queued: BTreeSet<i64> = nodes[0]
        .memory_jobs(1000)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(queued.len(), JOBS, "one extraction per completed root");

    let now = now_ms();
    let mut workers = Vec::new();
    for node in &nodes {
        for _ in 0..WORKERS_PER_NODE {
            let store = node.clone();
            workers.push(tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(job) = store.next_memory_job(now).await.unwrap() {
                    got.push(job.id);
                }
                got
            }));
        }
    }
    let mut handed = Vec::new();
    for worker in workers {
        handed.extend(
            within(WAIT, "the workers to drain the queue", worker)
                .await
                .unwrap(),
        );
    }
    let distinct: BTreeSet<i64> = handed.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        handed.len(),
        "a job was handed out twice: {handed:?}"
    );
    assert_eq!(distinct, queued, "every queued job is handed out");

    // Claimed: not due again while the claim lasts, from either node.
    for node in &nodes {
        assert_eq!(node.next_memory_job(now).await.unwrap(), None);
        assert_eq!(
            node.next_memory_job(now + CLAIM_WINDOW_MS - 1)
                .await
                .unwrap(),
            None
        );
    }
    // A worker ends half of them; the others' workers died: their jobs are due again after the
    // window, once each, and the ended ones never.
    let (ended, abandoned): (Vec<i64>, Vec<i64>) =
        distinct.iter().copied().partition(|id| id % 2 == 0);
    for id in &ended {
        assert!(
            nodes[1]
                .end_memory_job(*id, JobEnd::Done, None)
                .await
                .unwrap()
        );
    }
    let later = now + CLAIM_WINDOW_MS;
    let mut again = Vec::new();
    while let Some(job) = nodes[0].next_memory_job(later).await.unwrap() {
        assert_eq!(job.state, "queued");
        again.push(job.id);
        assert!(
            again.len() <= JOBS,
            "the queue hands out jobs forever: {again:?}"
        );
    }
    again.sort();
    assert_eq!(again, abandoned);
}

/// Two nodes looking for idle agents while a third counts new roots of the same agents, round after
/// round: each idle agent gets exactly one consolidation per round, and no agent ever has two
/// queued at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_idle_looks_on_two_nodes_queue_one_consolidation_per_agent() {
    const AGENTS: usize = 8;
    const ROUNDS: usize = 6;
    let Some(url) = fresh_database("pg_jobs_idle").await else {
        return;
    };
    let nodes = two_nodes(&url).await;
    let counter = Arc::new(PgStore::connect(&url, 8).await.unwrap());
    for round in 0..ROUNDS {
        // Every agent has a root consolidation has not seen.
        let conversation = format!("round{round}");
        let r = root(&*nodes[0], &conversation, "ceo").await;
        for a in 0..AGENTS {
            let queued = nodes[round % 2]
                .memory_root_seen(&format!("agent{a}"), r, r, Some(&conversation), 1000)
                .await
                .unwrap();
            assert_eq!(queued, None, "round {round}");
        }
        let idle_before = now_ms() + 60_000;
        let mut looks = Vec::new();
        for node in &nodes {
            let store = node.clone();
            looks.push(tokio::spawn(async move {
                store.idle_consolidations(idle_before).await.unwrap()
            }));
        }
        // Meanwhile another node counts a further root of every agent (not enough to queue one).
        let more = root(&*counter, &format!("{conversation}-more"), "ceo").await;
        let counting = {
            let store = counter.clone();
            let conversation = format!("{conversation}-more");
            tokio::spawn(async move {
                for a in 0..AGENTS {
                    let queued = store
                        .memory_root_seen(
                            &format!("agent{a}"),
                            more,
                            more,
                            Some(&conversation),
                            1000,
                        )
                        .await
                        .unwrap();
                    assert_eq!(queued, None);
                }
            })
        };
        let mut picked: BTreeMap<String, usize> = BTreeMap::new();
        for look in looks {
            for (agent, _job) in within(WAIT, "an idle look", look).await.unwrap() {
                *picked.entry(agent).or_insert(0) += 1;
            }
        }
        within(WAIT, "the counting node", counting).await.unwrap();
        assert_eq!(picked.len(), AGENTS, "round {round}: {picked:?}");
        assert!(
            picked.values().all(|n| *n == 1),
            "round {round}: an agent was consolidated twice: {picked:?}"
        );
        let queued = queued_consolidations(&*nodes[0]).await;
        assert_eq!(queued.len(), AGENTS, "round {round}: {queued:?}");
        assert!(
            queued.values().all(|n| *n == 1),
            "round {round}: two consolidations queued for one agent: {queued:?}"
        );
        // While they are queued, no further look queues another.
        for node in &nodes {
            assert!(
                node.idle_consolidations(idle_before)
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
        for job in nodes[1].memory_jobs(10_000).await.unwrap() {
            if job.state == "queued" {
                nodes[1]
                    .end_memory_job(job.id, JobEnd::Done, None)
                    .await
                    .unwrap();
            }
        }
        // The roots counted meanwhile are pending again: the next round's look picks them up with
        // its own root, and still once per agent.
    }
}

/// Many roots of one agent counted on two nodes at once: exactly one consolidation per
/// `frequency` roots between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_counts_on_two_nodes_queue_one_consolidation_per_frequency() {
    const ROOTS: usize = 24;
    const FREQUENCY: u32 = 4;
    let Some(url) = fresh_database("pg_jobs_count").await else {
        return;
    };
    let nodes = two_nodes(&url).await;
    let mut roots = Vec::new();
    for i in 0..ROOTS {
        roots.push(root(&*nodes[0], &format!("c{i}"), "ceo").await);
    }
    let mut counts = Vec::new();
    for (i, r) in roots.into_iter().enumerate() {
        let store = nodes[i % 2].clone();
        counts.push(tokio::spawn(async move {
            let conversation = format!("c{i}");
            store
                .memory_root_seen("ceo", r, r, Some(&conversation), FREQUENCY)
                .await
                .unwrap()
        }));
    }
    let mut queued = 0;
    for count in counts {
        if within(WAIT, "a root count", count).await.unwrap().is_some() {
            queued += 1;
        }
    }
    assert_eq!(queued, ROOTS / FREQUENCY as usize);
    assert_eq!(
        queued_consolidations(&*nodes[1]).await.get("ceo").copied(),
        Some(ROOTS / FREQUENCY as usize)
    );
}
