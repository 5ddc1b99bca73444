//! The cluster seam on PostgreSQL (`PgStore::cluster`): two stores on one database acting as two
//! nodes claim trees (one owner per tree, oldest first), renew and hand back leases, take expired
//! ones over with greater tokens, fence the old owner's writes out (before the takeover, or not at
//! all), stamp the tasks they run, and wake each other through the database's triggers.
//!
//! A test that needs a lease expired either waits for it ([`SHORT_TTL`], polling the claim with a
//! deadline) or expires it in the table; the others use [`LONG_TTL`], so that no lease runs out
//! while they look. They assert what happened in which order, never how long it took. Without a PostgreSQL server these tests skip with one line (`opc-testgate`, group
//! `postgres`), and fail under CI.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use opc_agents::llm::Message;
use opc_agents::store::cluster::RELAY_LIMIT;
use opc_agents::store::{
    Claimed, Cluster, Ending, NewTask, NodeIdentity, OfferedOption, PgStore, Store, StoreError,
    TaskId, TaskState, Wake,
};
use opc_tests::postgres::fresh_database;
use tokio::sync::broadcast;

/// The lease length of the test that waits for an expiry: short, so that it does not wait long.
const SHORT_TTL: Duration = Duration::from_millis(300);

/// The lease length of the other tests: no lease runs out unless the test expires it.
const LONG_TTL: Duration = Duration::from_secs(600);

/// How long anything expected may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// One node: its shared store and its cluster seam.
struct Node {
    store: Arc<PgStore>,
    cluster: Arc<dyn Cluster>,
}

fn identity(name: &str, instance: i64) -> NodeIdentity {
    NodeIdentity {
        id: name.to_string(),
        instance,
        address: Some(format!("{name}.test:7100")),
        host: format!("{name}-host"),
        pid: 4000 + u32::try_from(instance).unwrap(),
        started_ms: 1_000 * instance,
        config_digest: format!("digest-{name}"),
    }
}

/// Node `name` (process instance `instance`) on the database `url`, with leases of `ttl`.
async fn node(url: &str, name: &str, instance: i64, ttl: Duration) -> Node {
    let store = PgStore::connect(url, 8).await.unwrap();
    let cluster = store.cluster(identity(name, instance), ttl);
    Node {
        store: Arc::new(store),
        cluster,
    }
}

/// Two nodes, `a` (instance 1) and `b` (instance 2), with leases of `ttl`, on a fresh database;
/// `None`: no server here.
async fn two_nodes(test: &str, ttl: Duration) -> Option<(String, Node, Node)> {
    let url = fresh_database(test).await?;
    let a = node(&url, "a", 1, ttl).await;
    let b = node(&url, "b", 2, ttl).await;
    Some((url, a, b))
}

/// A new root task in `conversation`.
async fn root(store: &dyn Store, conversation: &str) -> TaskId {
    store
        .create_task(&NewTask {
            parent_id: None,
            conversation_id: conversation,
            agent: "ceo",
            depth: 0,
            tool_use_id: None,
            tool_index: 0,
            input: "do it",
            messages: &[Message::user("do it")],
            author: Some("web:alice"),
            trace: None,
        })
        .await
        .unwrap()
}

/// A child of `parent` (in `conversation`), created by tool call `tool`.
async fn child(
    store: &dyn Store,
    parent: TaskId,
    conversation: &str,
    tool: &str,
) -> Result<TaskId, StoreError> {
    store
        .create_task(&NewTask {
            parent_id: Some(parent),
            conversation_id: conversation,
            agent: "worker",
            depth: 1,
            tool_use_id: Some(tool),
            tool_index: 0,
            input: "do the part",
            messages: &[],
            author: None,
            trace: None,
        })
        .await
}

/// A plain connection to the database, for looking at (and expiring) leases.
async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// The lease on `root`: node, instance, token, expiry; `None`: no lease.
async fn lease(db: &tokio_postgres::Client, root: TaskId) -> Option<(String, i64, i64, i64)> {
    db.query_opt(
        "SELECT node, instance, token, expires_ms FROM tree_leases WHERE root_id = $1",
        &[&root],
    )
    .await
    .unwrap()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
}

/// Expire the lease on `root` now (as if its owner had stopped renewing it long ago).
async fn expire(db: &tokio_postgres::Client, root: TaskId) {
    let n = db
        .execute(
            "UPDATE tree_leases SET expires_ms = 0 WHERE root_id = $1",
            &[&root],
        )
        .await
        .unwrap();
    assert_eq!(n, 1, "root {root} has no lease to expire");
}

/// Claim `root` for `cluster`, looking again until it is claimable (its lease expired, or no writer
/// holds it) or [`DEADLINE`] passes.
async fn claim_when_free(cluster: &dyn Cluster, root: TaskId) -> Claimed {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(claimed) = cluster.claim_root(root).await.unwrap() {
            return claimed;
        }
        assert!(
            Instant::now() < deadline,
            "{} could not claim root {root} within {DEADLINE:?}",
            cluster.node().id
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Two nodes claiming at once: each queued root goes to exactly one of them, and neither reports a
/// takeover of a root nobody held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_root_is_claimed_by_exactly_one_of_two_concurrent_claimers() {
    let Some((_url, a, b)) = two_nodes("cluster_one_claimer", LONG_TTL).await else {
        return;
    };
    for round in 0..40 {
        let r = root(&*a.store, &format!("race-{round}")).await;
        let (ca, cb) = (a.cluster.clone(), b.cluster.clone());
        let first = tokio::spawn(async move { ca.claim().await.unwrap() });
        let second = tokio::spawn(async move { cb.claim().await.unwrap() });
        let claims: Vec<Claimed> = [first.await.unwrap(), second.await.unwrap()]
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(claims.len(), 1, "round {round}: {claims:?}");
        assert_eq!(claims[0].root, r, "round {round}");
        assert!(!claims[0].takeover, "round {round}: nobody held it before");
    }
}

/// Claims take the oldest live root first, skip ended ones and held ones, and `claim_root` takes
/// the one it names; claiming again one's own expired lease is a takeover (what ran under it is
/// unknown to the claim), with a new token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_take_the_oldest_live_root_first() {
    let Some((url, a, b)) = two_nodes("cluster_oldest_first", LONG_TTL).await else {
        return;
    };
    let db = raw(&url).await;
    let ended = root(&*a.store, "c0").await;
    a.store.finish(ended, Ending::Failed("gone")).await.unwrap();
    let r1 = root(&*a.store, "c1").await;
    let r2 = root(&*b.store, "c2").await;
    let r3 = root(&*a.store, "c3").await;
    // A child is never a tree of its own.
    child(&*a.store, r1, "c1", "t1").await.unwrap();

    let first = a.cluster.claim().await.unwrap().unwrap();
    let second = b.cluster.claim().await.unwrap().unwrap();
    assert_eq!((first.root, second.root), (r1, r2));
    assert!(second.token > first.token);
    assert_eq!(b.cluster.claim_root(r1).await.unwrap(), None, "r1 is a's");
    assert_eq!(a.cluster.claim_root(ended).await.unwrap(), None, "ended");
    let third = a.cluster.claim().await.unwrap().unwrap();
    assert_eq!(third.root, r3);
    assert_eq!(b.cluster.claim().await.unwrap(), None, "nothing left");

    // Named roots: r5 before the older r4.
    let r4 = root(&*a.store, "c4").await;
    let r5 = root(&*a.store, "c5").await;
    let named = b.cluster.claim_root(r5).await.unwrap().unwrap();
    assert_eq!((named.root, named.takeover), (r5, false));
    assert_eq!(a.cluster.claim().await.unwrap().unwrap().root, r4);

    // a's own lease on r1 expired and nobody took it: a claims it again under a new token, as a
    // takeover (the engine claims only trees it does not run, so its sessions for it are gone).
    expire(&db, r1).await;
    let again = a.cluster.claim().await.unwrap().unwrap();
    assert_eq!((again.root, again.takeover), (r1, true));
    assert!(again.token > named.token, "{again:?} after {named:?}");
    assert_eq!(lease(&db, r1).await.unwrap().2, again.token);
}

/// A heartbeat renews exactly the leases its instance says it runs trees under (expired ones it
/// still holds included) and returns their roots, and hands its other leases back; it records the
/// node's slots; the leases of ended trees are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_renews_only_its_own_leases_and_returns_them() {
    let Some((url, a, b)) = two_nodes("cluster_heartbeat", LONG_TTL).await else {
        return;
    };
    let db = raw(&url).await;
    a.cluster.join(4).await.unwrap();
    b.cluster.join(2).await.unwrap();
    let r1 = root(&*a.store, "c1").await;
    let r2 = root(&*a.store, "c2").await;
    let r3 = root(&*a.store, "c3").await;
    let t1 = a.cluster.claim().await.unwrap().unwrap();
    let t2 = b.cluster.claim().await.unwrap().unwrap();
    let t3 = a.cluster.claim().await.unwrap().unwrap();
    assert_eq!((t1.root, t2.root, t3.root), (r1, r2, r3));
    for r in [r1, r2, r3] {
        expire(&db, r).await;
    }

    let a_runs = [(r1, t1.token), (r3, t3.token)];
    assert_eq!(a.cluster.heartbeat(3, &a_runs).await.unwrap(), vec![r1, r3]);
    assert!(lease(&db, r1).await.unwrap().3 > 0, "a's lease renewed");
    assert!(lease(&db, r3).await.unwrap().3 > 0, "a's lease renewed");
    assert_eq!(lease(&db, r2).await.unwrap().3, 0, "b's lease left alone");
    assert_eq!(
        b.cluster.heartbeat(1, &[(r2, t2.token)]).await.unwrap(),
        vec![r2]
    );
    assert!(lease(&db, r2).await.unwrap().3 > 0);
    // Renewing keeps the token: the owner's fenced stores keep writing.
    assert_eq!(lease(&db, r1).await.unwrap().2, t1.token);

    let nodes = a.cluster.nodes().await.unwrap();
    let slots: Vec<(&str, u32, u32)> = nodes
        .iter()
        .map(|n| (n.id.as_str(), n.slots_in_use, n.slots_total))
        .collect();
    assert_eq!(slots, vec![("a", 3, 4), ("b", 1, 2)]);

    // r1's tree ends (through a's fenced store): the next heartbeat no longer holds it.
    let fenced = a.cluster.fenced(r1, t1.token);
    fenced.begin(r1).await.unwrap();
    fenced
        .finish(
            r1,
            Ending::Completed {
                output: "done",
                summary: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(a.cluster.heartbeat(2, &a_runs).await.unwrap(), vec![r3]);
    assert_eq!(
        lease(&db, r1).await,
        None,
        "an ended tree's lease is dropped"
    );
    // Any node's heartbeat drops it, whoever held it: b's tree r2 ends without b releasing it.
    b.store.finish(r2, Ending::Failed("x")).await.unwrap();
    a.cluster.heartbeat(2, &a_runs).await.unwrap();
    assert_eq!(lease(&db, r2).await, None);
    assert_eq!(
        b.cluster.heartbeat(0, &[(r2, t2.token)]).await.unwrap(),
        Vec::<TaskId>::new()
    );
    // A lease a's process no longer runs a tree under (not in what it says it runs) is handed
    // back by its heartbeat, not renewed: any node may claim the tree, as a takeover.
    assert_eq!(
        a.cluster.heartbeat(1, &[]).await.unwrap(),
        Vec::<TaskId>::new()
    );
    assert_eq!(lease(&db, r3).await.unwrap().3, 0, "r3's lease handed back");
    let retaken = b.cluster.claim().await.unwrap().unwrap();
    assert_eq!((retaken.root, retaken.takeover), (r3, true));
}

/// A lease that ran out is taken over by another node with a greater token; the tree's tasks are
/// stamped with the node that runs them; the old owner's writes are refused whole, the new owner's
/// go through; a release with the old token leaves the new lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_taken_over_and_the_old_owner_is_fenced_out() {
    let Some((url, a, b)) = two_nodes("cluster_takeover", SHORT_TTL).await else {
        return;
    };
    let db = raw(&url).await;
    let r = root(&*a.store, "c").await;
    assert_eq!(a.store.task(r).await.unwrap().node, None, "queued: no node");
    let old = a.cluster.claim().await.unwrap().unwrap();
    assert_eq!((old.root, old.takeover), (r, false));
    assert_eq!(a.store.task(r).await.unwrap().node.as_deref(), Some("a"));

    let fa = a.cluster.fenced(r, old.token);
    fa.begin(r).await.unwrap();
    let kid = child(&*fa, r, "c", "t1").await.unwrap();
    assert_eq!(a.store.task(kid).await.unwrap().node.as_deref(), Some("a"));
    let history = vec![Message::user("do it"), Message::user("more")];
    fa.save_messages(r, &history).await.unwrap();
    // Unfenced, the shared store still writes (the console, recovery): no fence, no node.
    let shared_kid = child(&*a.store, r, "c", "t2").await.unwrap();
    assert_eq!(a.store.task(shared_kid).await.unwrap().node, None);

    // a stops renewing; b waits for the lease to run out (nothing here expires it by hand).
    let new = claim_when_free(&*b.cluster, r).await;
    assert!(new.takeover, "another instance held it: {new:?}");
    assert!(new.token > old.token, "{new:?} after {old:?}");
    let (owner, instance, token, _) = lease(&db, r).await.unwrap();
    assert_eq!((owner.as_str(), instance, token), ("b", 2, new.token));
    for task in [r, kid, shared_kid] {
        assert_eq!(b.store.task(task).await.unwrap().node.as_deref(), Some("b"));
    }

    // The old owner's writes, every kind, are refused and change nothing.
    let before = serde_json::to_value(b.store.tree(r).await.unwrap()).unwrap();
    let before_messages = b.store.messages(r).await.unwrap();
    let fenced = |result: Result<(), StoreError>, what: &str| match result {
        Err(StoreError::Fenced { root }) => assert_eq!(root, r, "{what}"),
        other => panic!("{what}: the old owner's write was not fenced: {other:?}"),
    };
    fenced(
        fa.save_messages(r, &[Message::user("stale")]).await,
        "save_messages",
    );
    fenced(
        fa.transition_and_save(r, TaskState::Executing, &[Message::user("stale")])
            .await
            .map(|_| ()),
        "transition_and_save",
    );
    fenced(
        fa.transition(r, TaskState::Executing).await.map(|_| ()),
        "transition",
    );
    fenced(
        fa.finish(kid, Ending::Failed("stale")).await.map(|_| ()),
        "finish",
    );
    fenced(child(&*fa, r, "c", "t3").await.map(|_| ()), "create_task");
    fenced(
        fa.cancel_subtree(r, "stale").await.map(|_| ()),
        "cancel_subtree",
    );
    fenced(fa.add_notice("c", Some(r), "stale").await, "add_notice");
    assert_eq!(
        serde_json::to_value(b.store.tree(r).await.unwrap()).unwrap(),
        before,
        "the tree's rows changed"
    );
    assert_eq!(b.store.messages(r).await.unwrap(), before_messages);
    assert!(b.store.notices("c").await.unwrap().is_empty());
    // Reads through the old store still work (they are the shared store's).
    assert_eq!(fa.task(r).await.unwrap().id, r);

    // The new owner writes.
    let fb = b.cluster.fenced(r, new.token);
    let newer = vec![Message::user("do it"), Message::user("on b")];
    fb.save_messages(r, &newer).await.unwrap();
    assert_eq!(b.store.messages(r).await.unwrap(), newer);

    // A release with the stale token leaves b's lease; b's own release of the live tree expires
    // it (the next claim is a takeover), and b's store is still b's until someone claims it.
    a.cluster.release(r, old.token).await.unwrap();
    let owners = a.cluster.owners(&[r, kid]).await.unwrap();
    assert_eq!(owners.get(&r).map(String::as_str), Some("b"));
    assert_eq!(owners.len(), 1, "{owners:?}");
    fb.save_messages(r, &newer).await.unwrap();
    b.cluster.release(r, new.token).await.unwrap();
    assert!(a.cluster.owners(&[r]).await.unwrap().is_empty());
    let again = a.cluster.claim().await.unwrap().unwrap();
    assert_eq!((again.root, again.takeover), (r, true));
    assert!(matches!(
        fb.save_messages(r, &newer).await,
        Err(StoreError::Fenced { .. })
    ));
}

/// The old owner writing as fast as it can while another node takes the tree over: every write
/// it got an Ok for was stored, none committed after the takeover (what the old owner had stored
/// when the claim returned is all it ever stores), and none after the new owner's first write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_write_racing_a_takeover_never_lands_after_it() {
    let Some((url, a, b)) = two_nodes("cluster_fence_race", LONG_TTL).await else {
        return;
    };
    let db = raw(&url).await;
    let r = root(&*a.store, "c").await;
    let mut owner = a.cluster.claim().await.unwrap().unwrap();
    a.cluster.fenced(r, owner.token).begin(r).await.unwrap();
    let nodes = [a.cluster.clone(), b.cluster.clone()];
    for round in 0..24 {
        let (old, new) = (&nodes[round % 2], &nodes[(round + 1) % 2]);
        let old_store = old.fenced(r, owner.token);
        expire(&db, r).await;
        let old_text = format!("old-{round}");
        // A second writer holds the root's task row (a transition locks it), as sessions do: the
        // takeover, which stamps the tree's rows, must neither deadlock with it nor let it through.
        let locker = tokio::spawn({
            let old_store = old_store.clone();
            async move {
                let deadline = Instant::now() + DEADLINE;
                loop {
                    match old_store.transition(r, TaskState::Executing).await {
                        Ok(_) => {}
                        Err(StoreError::Fenced { root }) if root == r => return,
                        Err(e) => panic!("round {round}: {e}"),
                    }
                    assert!(
                        Instant::now() < deadline,
                        "round {round}: the old owner kept writing past the takeover"
                    );
                }
            }
        });
        let writer = tokio::spawn({
            let old_text = old_text.clone();
            async move {
                let deadline = Instant::now() + DEADLINE;
                let mut stored = 0usize;
                loop {
                    match old_store.add_notice("c", Some(r), &old_text).await {
                        Ok(()) => stored += 1,
                        Err(StoreError::Fenced { root }) if root == r => return stored,
                        Err(e) => panic!("round {round}: {e}"),
                    }
                    assert!(
                        Instant::now() < deadline,
                        "round {round}: the old owner kept writing past the takeover"
                    );
                }
            }
        });
        let claimer = tokio::spawn({
            let new = new.clone();
            async move {
                // Let the writer get going first, in most rounds.
                tokio::time::sleep(Duration::from_millis(fastrand_ms(round))).await;
                claim_when_free(&*new, r).await
            }
        });
        let claimed = claimer.await.unwrap();
        assert!(claimed.takeover, "round {round}: {claimed:?}");
        assert!(claimed.token > owner.token, "round {round}");
        // What the old owner had stored when the takeover had committed (and its claim returned).
        let at_takeover = old_notices(&*a.store, &old_text).await;
        let new_text = format!("new-{round}");
        new.fenced(r, claimed.token)
            .add_notice("c", Some(r), &new_text)
            .await
            .unwrap();
        let stored = writer.await.unwrap();
        locker.await.unwrap();

        let notices = a.store.undelivered_notices().await.unwrap();
        let marker = notices.iter().find(|n| n.text == new_text).unwrap().id;
        let old_ids = old_notices(&*a.store, &old_text).await;
        assert_eq!(old_ids.len(), stored, "round {round}: Ok means stored");
        assert_eq!(
            old_ids, at_takeover,
            "round {round}: an old write committed after the takeover"
        );
        assert!(
            old_ids.iter().all(|id| *id < marker),
            "round {round}: an old write landed after the takeover ({old_ids:?}, marker {marker})"
        );
        owner = claimed;
    }
}

/// The ids of the notices with `text`, in order.
async fn old_notices(store: &dyn Store, text: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = store
        .undelivered_notices()
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.text == text)
        .map(|n| n.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// A small, varying delay for round `round` (0 to 3 ms), without a random-number dependency.
fn fastrand_ms(round: usize) -> u64 {
    [0, 1, 3, 2][round % 4]
}

/// Leaving hands every tree back at once (the next claim, on another node, is a takeover, with no
/// wait for the lease); the nodes table shows each node's trees and slots, and the one that left as
/// stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leave_hands_the_trees_back_at_once_and_nodes_shows_who_holds_what() {
    let Some((url, a, b)) = two_nodes("cluster_leave", LONG_TTL).await else {
        return;
    };
    a.cluster.join(4).await.unwrap();
    b.cluster.join(2).await.unwrap();
    let r1 = root(&*a.store, "c1").await;
    let r2 = root(&*a.store, "c2").await;
    let r3 = root(&*a.store, "c3").await;
    assert_eq!(a.cluster.claim().await.unwrap().unwrap().root, r1);
    assert_eq!(a.cluster.claim().await.unwrap().unwrap().root, r2);
    assert_eq!(b.cluster.claim().await.unwrap().unwrap().root, r3);
    assert_eq!(b.cluster.claim().await.unwrap(), None);

    let nodes = b.cluster.nodes().await.unwrap();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    let (na, nb) = (&nodes[0], &nodes[1]);
    assert_eq!(
        (na.id.as_str(), na.trees, na.slots_total, na.stopped),
        ("a", 2, 4, false)
    );
    assert_eq!(
        (nb.id.as_str(), nb.trees, nb.slots_total, nb.stopped),
        ("b", 1, 2, false)
    );
    assert_eq!(na.address.as_deref(), Some("a.test:7100"));
    assert_eq!(
        (na.host.as_str(), na.pid, na.started_ms),
        ("a-host", 4001, 1000)
    );
    assert_eq!(na.config_digest, "digest-a");
    assert!(na.heartbeat_ms > 0);

    a.cluster.leave().await.unwrap();
    // No waiting for the leases: they were handed back.
    let mut taken = [
        b.cluster.claim().await.unwrap().unwrap(),
        b.cluster.claim().await.unwrap().unwrap(),
    ];
    taken.sort_by_key(|c| c.root);
    assert_eq!(
        taken
            .iter()
            .map(|c| (c.root, c.takeover))
            .collect::<Vec<_>>(),
        vec![(r1, true), (r2, true)]
    );
    let owners = a.cluster.owners(&[r1, r2, r3]).await.unwrap();
    assert!(
        owners.values().all(|n| n == "b") && owners.len() == 3,
        "{owners:?}"
    );
    let nodes = b.cluster.nodes().await.unwrap();
    assert_eq!((nodes[0].trees, nodes[0].stopped), (0, true));
    assert!(!nodes[0].alive(nodes[0].heartbeat_ms, LONG_TTL), "a left");
    assert_eq!(nodes[1].trees, 3);

    // A restart under the same name is a new instance that replaces the row.
    let again = node(&url, "a", 7, LONG_TTL).await;
    again.cluster.join(4).await.unwrap();
    let nodes = b.cluster.nodes().await.unwrap();
    assert_eq!(
        (nodes[0].id.as_str(), nodes[0].stopped, nodes[0].pid),
        ("a", false, 4007)
    );
}

/// What the next wake-ups up to relayed text `mark` are (ticks left out), failing after
/// [`DEADLINE`].
async fn wakes_until(rx: &mut broadcast::Receiver<Wake>, mark: &str) -> Vec<Wake> {
    let deadline = Instant::now() + DEADLINE;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Err(_) => panic!("no `{mark}` within {DEADLINE:?}; saw {seen:?}"),
            Ok(Err(e)) => panic!("the wake-ups ended: {e}; saw {seen:?}"),
            Ok(Ok(Wake::Events(text))) if text == mark => return seen,
            Ok(Ok(Wake::Tick)) => {}
            Ok(Ok(wake)) => seen.push(wake),
        }
    }
}

/// The triggers wake the other nodes at each commit: `work` for a new root (not for a child),
/// `approval:<id>` when an approval is decided, `cancelled:<id>` for every cancelled task and
/// `ended:<id>` for a root that ended; a relay reaches them as sent, and one over the limit is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_triggers_wake_the_other_nodes() {
    let Some((_url, a, b)) = two_nodes("cluster_wakes", LONG_TTL).await else {
        return;
    };
    let mut rx = b.cluster.wakes();
    // The listener connects in the background: relay until b hears one.
    let deadline = Instant::now() + DEADLINE;
    'listening: for n in 0.. {
        let mark = format!("hello-{n}");
        a.cluster.relay(&mark).await.unwrap();
        let wait = Instant::now() + Duration::from_millis(200);
        while let Ok(Ok(wake)) =
            tokio::time::timeout(wait.saturating_duration_since(Instant::now()), rx.recv()).await
        {
            if wake == Wake::Events(mark.clone()) {
                break 'listening;
            }
        }
        assert!(Instant::now() < deadline, "b never heard a relay");
    }

    let r = root(&*a.store, "c").await;
    let kid = child(&*a.store, r, "c", "t1").await.unwrap();
    a.cluster.relay("m1").await.unwrap();
    assert_eq!(wakes_until(&mut rx, "m1").await, vec![Wake::Work]);

    let task = a.store.task(r).await.unwrap();
    let options: Vec<OfferedOption> = ["approve", "reject"]
        .into_iter()
        .map(OfferedOption::from)
        .collect();
    let (approval, _) = a
        .store
        .request_approval(&task, "t9", "ship?", &options, Duration::from_secs(60))
        .await
        .unwrap();
    a.cluster.relay("m2").await.unwrap();
    assert_eq!(wakes_until(&mut rx, "m2").await, vec![], "still pending");
    a.store.decide(approval.id, "approve", "u1").await.unwrap();
    a.cluster.relay("m3").await.unwrap();
    assert_eq!(
        wakes_until(&mut rx, "m3").await,
        vec![Wake::Approval(approval.id)]
    );

    a.store.cancel_subtree(r, "stop").await.unwrap();
    a.cluster.relay("m4").await.unwrap();
    let mut seen = wakes_until(&mut rx, "m4").await;
    seen.sort_by_key(|w| format!("{w:?}"));
    let mut expected = vec![Wake::Cancelled(r), Wake::Cancelled(kid), Wake::RootEnded(r)];
    expected.sort_by_key(|w| format!("{w:?}"));
    assert_eq!(seen, expected);

    // A root that completes: ended, not cancelled; a child ending is no root ending.
    let r2 = root(&*a.store, "c2").await;
    let kid2 = child(&*a.store, r2, "c2", "t1").await.unwrap();
    a.store.finish(kid2, Ending::Failed("no")).await.unwrap();
    a.store.begin(r2).await.unwrap();
    a.store
        .finish(
            r2,
            Ending::Completed {
                output: "done",
                summary: None,
            },
        )
        .await
        .unwrap();
    a.cluster.relay("m5").await.unwrap();
    assert_eq!(
        wakes_until(&mut rx, "m5").await,
        vec![Wake::Work, Wake::RootEnded(r2)]
    );

    // Leaving wakes the others to claim.
    a.cluster.leave().await.unwrap();
    a.cluster.relay("m6").await.unwrap();
    assert_eq!(wakes_until(&mut rx, "m6").await, vec![Wake::Work]);

    // A relay holds anything up to the limit, colons included; over it, nothing is sent.
    let long = format!("x:{}", "y".repeat(RELAY_LIMIT - 2));
    a.cluster.relay(&long).await.unwrap();
    a.cluster.relay("m7").await.unwrap();
    assert_eq!(wakes_until(&mut rx, "m7").await, vec![Wake::Events(long)]);
    assert!(a.cluster.relay(&"z".repeat(RELAY_LIMIT + 1)).await.is_err());
}
