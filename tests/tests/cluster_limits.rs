//! Limits that hold for a cluster, not per node (issue 36 §2), on PostgreSQL: two stores on one
//! database acting as two nodes share a provider's `maxConcurrentRequests` and `requestsPerMinute`
//! ([`Cluster::limits`]) and the gateway's per-user and per-channel rates ([`Cluster::rates`]).
//!
//! "Not admitted" is asserted as "not admitted within a short wait" (the admission itself waits
//! until it is), and "admitted" within a generous deadline; no test times how long anything took.
//! A slot's renewal is read from the table. Without a PostgreSQL server these tests skip with one
//! line (`opc-testgate`, group `postgres`), and fail under CI.

#![allow(clippy::unwrap_used)]

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use opc_agents::llm::layers::{SharedLimits, SharedSlot};
use opc_agents::store::cluster::{RateScope, SharedRates};
use opc_agents::store::{Cluster, NodeIdentity, PgStore};
use opc_hierarchy::schema::Rate;
use opc_tests::postgres::fresh_database;

/// The lease (and slot) length of the test that waits for a dead node's slot to free.
const SHORT_TTL: Duration = Duration::from_millis(300);

/// The lease length of the other tests: no slot runs out while they look.
const LONG_TTL: Duration = Duration::from_secs(600);

/// How long anything expected may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// How long a call that must not be admitted is given to show it is not.
const REFUSED_FOR: Duration = Duration::from_millis(300);

/// One node's cluster seam and its shared limits.
struct Node {
    cluster: Arc<dyn Cluster>,
    limits: Arc<dyn SharedLimits>,
}

fn identity(name: &str, instance: i64) -> NodeIdentity {
    NodeIdentity {
        id: name.to_string(),
        instance,
        address: None,
        host: format!("{name}-host"),
        pid: 4000 + u32::try_from(instance).unwrap(),
        started_ms: 1_000 * instance,
        config_digest: format!("digest-{name}"),
    }
}

/// Two nodes, `a` (instance 1) and `b` (instance 2), with leases of `ttl`, on a fresh database;
/// `None`: no server here.
async fn two_nodes(test: &str, ttl: Duration) -> Option<(String, Node, Node)> {
    let url = fresh_database(test).await?;
    let mut nodes = Vec::new();
    for (name, instance) in [("a", 1), ("b", 2)] {
        let store = PgStore::connect(&url, 8).await.unwrap();
        let cluster = store.cluster(identity(name, instance), ttl);
        let limits = cluster.limits();
        nodes.push(Node { cluster, limits });
    }
    let b = nodes.pop().unwrap();
    let a = nodes.pop().unwrap();
    Some((url, a, b))
}

/// A plain connection to the database, for looking at the tables.
async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Admit a call to provider `p` within [`DEADLINE`] (a failure if it is not).
async fn admitted(node: &Node, max: Option<u32>, per_minute: Option<u32>) -> SharedSlot {
    tokio::time::timeout(DEADLINE, node.limits.admit("p", max, per_minute))
        .await
        .expect("admitted within the deadline")
        .unwrap()
}

/// Whether a call to provider `p` is admitted within [`REFUSED_FOR`] (one admitted is given back).
async fn admitted_soon(node: &Node, max: Option<u32>, per_minute: Option<u32>) -> bool {
    match tokio::time::timeout(REFUSED_FOR, node.limits.admit("p", max, per_minute)).await {
        Ok(slot) => {
            slot.unwrap();
            true
        }
        Err(_) => false,
    }
}

/// The expiry of every slot of `instance`, by slot.
async fn slot_expiries(db: &tokio_postgres::Client, instance: i64) -> Vec<i64> {
    db.query(
        "SELECT expires_ms FROM provider_slots WHERE instance = $1 ORDER BY id",
        &[&instance],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[tokio::test]
async fn at_most_max_concurrent_calls_run_across_both_nodes() {
    let Some((url, a, b)) = two_nodes("cluster_limits_concurrent", LONG_TTL).await else {
        return;
    };
    let first = admitted(&a, Some(2), None).await;
    let _second = admitted(&b, Some(2), None).await;
    // Both slots are taken, one on each node: neither node admits a third.
    assert!(!admitted_soon(&a, Some(2), None).await);
    assert!(!admitted_soon(&b, Some(2), None).await);
    // Another provider has its own slots.
    let other = tokio::time::timeout(DEADLINE, b.limits.admit("q", Some(2), None)).await;
    assert!(other.expect("another provider's slot").is_ok());
    // One call ends on node a: a call waiting on node b is admitted.
    let waiting = tokio::spawn({
        let limits = b.limits.clone();
        async move { limits.admit("p", Some(2), None).await.map(|_| ()) }
    });
    drop(first);
    tokio::time::timeout(DEADLINE, waiting)
        .await
        .expect("admitted after a slot was freed")
        .unwrap()
        .unwrap();
    // The waiting call's slot was given back when it dropped: one held row is left for `p`.
    let db = raw(&url).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let held: i64 = db
            .query_one(
                "SELECT count(*) FROM provider_slots WHERE provider = 'p'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if held == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{held} slots held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_heartbeat_renews_its_own_slots_only() {
    let Some((url, a, b)) = two_nodes("cluster_limits_renew", LONG_TTL).await else {
        return;
    };
    let _a_slot = admitted(&a, Some(5), None).await;
    let _b_slot = admitted(&b, Some(5), None).await;
    let db = raw(&url).await;
    // Move both slots' expiries back, so a renewal shows whatever the clock's resolution.
    db.execute("UPDATE provider_slots SET expires_ms = 1000", &[])
        .await
        .unwrap();
    a.cluster.heartbeat(0, &[]).await.unwrap();
    let renewed = slot_expiries(&db, 1).await;
    assert_eq!(renewed.len(), 1);
    assert!(renewed[0] > 1000, "a's slot renewed: {renewed:?}");
    assert_eq!(
        slot_expiries(&db, 2).await,
        vec![1000],
        "b's slot untouched"
    );
}

#[tokio::test]
async fn a_dead_nodes_slot_frees_after_the_lease() {
    let Some((_url, a, b)) = two_nodes("cluster_limits_dead", SHORT_TTL).await else {
        return;
    };
    // Node a dies in the middle of a call: nothing gives its slot back, and it never beats again.
    std::mem::forget(admitted(&a, Some(1), None).await);
    drop(a);
    // Node b's call waits for the slot, which expires with the lease.
    let _slot = admitted(&b, Some(1), None).await;
}

#[tokio::test]
async fn the_rate_is_the_clusters_a_burst_then_one_per_interval() {
    let Some((_url, a, b)) = two_nodes("cluster_limits_rate", LONG_TTL).await else {
        return;
    };
    // 60 a minute: the first 60 start at once, whichever node they come to.
    for i in 0..60 {
        let node = if i % 2 == 0 { &a } else { &b };
        drop(admitted(node, None, Some(60)).await);
    }
    // The 61st waits for its time (a second after the burst), on either node.
    assert!(!admitted_soon(&a, None, Some(60)).await);
    assert!(!admitted_soon(&b, None, Some(60)).await);
    // And then it starts.
    drop(admitted(&b, None, Some(60)).await);
}

#[tokio::test]
async fn a_call_over_the_rate_takes_no_slot() {
    let Some((url, a, b)) = two_nodes("cluster_limits_both", LONG_TTL).await else {
        return;
    };
    // One call a minute, two at a time: the second waits for the rate though a slot is free, and
    // holds none while it waits.
    let _held = admitted(&a, Some(2), Some(1)).await;
    assert!(!admitted_soon(&b, Some(2), Some(1)).await);
    let db = raw(&url).await;
    let held: i64 = db
        .query_one("SELECT count(*) FROM provider_slots", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, 1);
}

/// `n` messages per minute.
fn per_minute(n: u32) -> Rate {
    Rate {
        messages: NonZeroU32::new(n).unwrap(),
        per: Duration::from_secs(60),
    }
}

#[tokio::test]
async fn the_gateway_rate_limits_are_counted_over_both_nodes() {
    let Some((url, a, b)) = two_nodes("cluster_limits_gateway", LONG_TTL).await else {
        return;
    };
    let (ra, rb): (Arc<dyn SharedRates>, Arc<dyn SharedRates>) =
        (a.cluster.rates(), b.cluster.rates());
    let mut taken = Vec::new();
    for i in 0..8 {
        let rates = if i % 2 == 0 { &ra } else { &rb };
        taken.push(
            rates
                .take(RateScope::User, "slack:W:U1", per_minute(3))
                .await
                .unwrap(),
        );
    }
    assert_eq!(
        taken,
        [true, true, true, false, false, false, false, false],
        "3 a minute over both nodes"
    );
    // A refused message is not counted, and the scopes and keys are apart.
    assert!(
        ra.take(RateScope::Channel, "slack:W:U1", per_minute(3))
            .await
            .unwrap()
    );
    assert!(
        rb.take(RateScope::User, "slack:W:U2", per_minute(3))
            .await
            .unwrap()
    );

    // Counts long conforming again are forgotten by a heartbeat; a provider's count stays.
    let db = raw(&url).await;
    db.execute(
        "INSERT INTO provider_rates (key, tat_ms) VALUES ('user:old', 0), ('channel:old', 0), \
         ('provider:old', 0)",
        &[],
    )
    .await
    .unwrap();
    a.cluster.heartbeat(0, &[]).await.unwrap();
    let keys: Vec<String> = db
        .query("SELECT key FROM provider_rates ORDER BY key", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        keys,
        [
            "channel:slack:W:U1",
            "provider:old",
            "user:slack:W:U1",
            "user:slack:W:U2"
        ]
    );
}
