//! The chat platforms on a cluster (issue 36 §2 "Platforms"): what the cluster seam offers them on
//! PostgreSQL, and the real binary using it.
//! - `first_delivery`: two nodes racing on the same delivery keys, exactly one wins each; a repeat
//!   on the same node loses; old keys are forgotten by a heartbeat, new ones kept;
//! - `hold`: a named singleton is held by one instance at a time, renewed by its holder, moved to
//!   another node once it expired (or was let go), and a node that does not hold it cannot let it go;
//! - end to end, two `opc run --node` processes with Slack's HTTP Events API: the same Slack event
//!   sent to both nodes is answered once.
//!
//! They assert outcomes and order, never how long something took. Without a PostgreSQL server they
//! skip with one line (`opc-testgate`, group `postgres`), and fail under CI.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use opc_agents::store::{Cluster, NodeIdentity, PgStore};
use opc_tests::cluster::{Db, framework_yaml};
use opc_tests::fake_slack::{self, FakeSlack, app_mention};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::postgres::fresh_database;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::WAIT;

/// Leases that do not run out while a test looks.
const LONG_TTL: Duration = Duration::from_secs(600);
/// The lease of the test that waits for a hold to expire: short, so it does not wait long.
const SHORT_TTL: Duration = Duration::from_millis(300);

fn identity(name: &str, instance: i64) -> NodeIdentity {
    NodeIdentity {
        id: name.to_string(),
        instance,
        address: None,
        host: format!("{name}-host"),
        pid: 5000 + u32::try_from(instance).unwrap(),
        started_ms: 1_000 * instance,
        config_digest: "digest".to_string(),
    }
}

/// Node `name` (instance `instance`) on `url`, with leases of `ttl`.
async fn node(url: &str, name: &str, instance: i64, ttl: Duration) -> Arc<dyn Cluster> {
    let store = PgStore::connect(url, 8).await.unwrap();
    store.cluster(identity(name, instance), ttl)
}

/// A plain connection to the database, for looking at and ageing rows.
async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_delivery_is_first_on_exactly_one_node_and_old_ones_are_forgotten() {
    let Some(url) = fresh_database("cluster_first_delivery").await else {
        return;
    };
    let a = node(&url, "a", 1, LONG_TTL).await;
    let b = node(&url, "b", 2, LONG_TTL).await;

    // Both nodes offer every key at once, on connections of their own.
    let keys: Vec<String> = (0..200).map(|i| format!("slack:event:Ev{i:06}")).collect();
    let races = keys.iter().map(|key| {
        let (a, b) = (a.clone(), b.clone());
        let key = key.clone();
        async move {
            let (x, y) = tokio::join!(a.first_delivery(&key), b.first_delivery(&key));
            (key, x.unwrap(), y.unwrap())
        }
    });
    let results = futures_util::future::join_all(races).await;
    let mut won = [0usize; 2];
    for (key, x, y) in &results {
        assert!(
            x ^ y,
            "{key}: first on a = {x}, on b = {y}; exactly one must be"
        );
        won[usize::from(*y)] += 1;
    }
    assert_eq!(won[0] + won[1], keys.len());
    // A repeat is a repeat on the node that won it too.
    assert!(!a.first_delivery(&keys[0]).await.unwrap());
    assert!(!b.first_delivery(&keys[0]).await.unwrap());

    // A key seen long ago is forgotten by a heartbeat; the ones just seen are kept.
    let db = raw(&url).await;
    db.execute(
        "UPDATE cluster_deliveries SET seen_ms = 0 WHERE key = $1",
        &[&keys[1]],
    )
    .await
    .unwrap();
    a.join(1).await.unwrap();
    a.heartbeat(0, &[]).await.unwrap();
    let left: i64 = db
        .query_one("SELECT count(*) FROM cluster_deliveries", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, i64::try_from(keys.len()).unwrap() - 1);
    assert!(
        b.first_delivery(&keys[1]).await.unwrap(),
        "a forgotten key is new again"
    );
    assert!(!b.first_delivery(&keys[2]).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_is_exclusive_renewed_by_its_holder_and_let_go_only_by_it() {
    let Some(url) = fresh_database("cluster_hold_exclusive").await else {
        return;
    };
    let a = node(&url, "a", 1, LONG_TTL).await;
    let b = node(&url, "b", 2, LONG_TTL).await;
    // A restart of node a under the same name is another instance: it does not hold a's hold.
    let a_again = node(&url, "a", 3, LONG_TTL).await;

    // Both ask at once: exactly one gets it.
    let (x, y) = tokio::join!(a.hold("discord-gateway"), b.hold("discord-gateway"));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(x ^ y, "a holds: {x}, b holds: {y}; exactly one must");
    let (holder, other) = if x { (&a, &b) } else { (&b, &a) };
    assert!(holder.hold("discord-gateway").await.unwrap(), "renewed");
    assert!(!other.hold("discord-gateway").await.unwrap());
    assert!(!a_again.hold("discord-gateway").await.unwrap());
    // Another name is another singleton.
    assert!(other.hold("something-else").await.unwrap());

    // Letting go of what one does not hold changes nothing.
    other.let_go("discord-gateway").await.unwrap();
    a_again.let_go("discord-gateway").await.unwrap();
    assert!(!other.hold("discord-gateway").await.unwrap());
    assert!(holder.hold("discord-gateway").await.unwrap());

    // The holder lets go: the other takes it at once, and the first cannot take it back.
    holder.let_go("discord-gateway").await.unwrap();
    assert!(other.hold("discord-gateway").await.unwrap());
    assert!(!holder.hold("discord-gateway").await.unwrap());

    // Expired (its holder stopped renewing long ago): anyone takes it.
    let db = raw(&url).await;
    let n = db
        .execute(
            "UPDATE cluster_holds SET expires_ms = 0 WHERE name = 'discord-gateway'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(a_again.hold("discord-gateway").await.unwrap());
    assert!(!other.hold("discord-gateway").await.unwrap());
    let (node, instance): (String, i64) = db
        .query_one(
            "SELECT node, instance FROM cluster_holds WHERE name = 'discord-gateway'",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!((node.as_str(), instance), ("a", 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_not_renewed_moves_to_another_node_after_its_lease() {
    let Some(url) = fresh_database("cluster_hold_expiry").await else {
        return;
    };
    let a = node(&url, "a", 1, SHORT_TTL).await;
    let b = node(&url, "b", 2, SHORT_TTL).await;
    assert!(a.hold("discord-gateway").await.unwrap());
    // a stops renewing (it died): b asks until it gets it, within a deadline.
    let deadline = Instant::now() + WAIT;
    while !b.hold("discord-gateway").await.unwrap() {
        assert!(
            Instant::now() < deadline,
            "b never took the hold a stopped renewing"
        );
        tokio::time::sleep(SHORT_TTL / 3).await;
    }
    // Never both: asked in turn, at most one of them holds it (a, back, gets it only if b's hold
    // lapsed meanwhile, and then b's renewal is refused).
    let a_holds = a.hold("discord-gateway").await.unwrap();
    let b_holds = b.hold("discord-gateway").await.unwrap();
    assert!(!(a_holds && b_holds), "both hold the singleton");
}

// ----- end to end: the real binary, two nodes, Slack's Events API -----

const BOT_VAR: &str = "OPC_TEST_SLACK_BOT";
const SECRET_VAR: &str = "OPC_TEST_SLACK_SECRET";
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// POST `body` to `node`'s `/slack/events`, signed at `timestamp` (`retry`: as Slack's retry
/// `X-Slack-Retry-Num`); the HTTP status.
async fn send_event(node: &OpcRun, body: &str, timestamp: i64, retry: Option<u32>) -> u16 {
    let mut request = opc_tests::http_client()
        .post(node.url("/slack/events"))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in fake_slack::signed_headers(SECRET, timestamp, body) {
        request = request.header(name, value);
    }
    if let Some(n) = retry {
        request = request.header("x-slack-retry-num", n.to_string());
    }
    request.send().await.unwrap().status().as_u16()
}

/// The texts posted (or edited in) thread `thread` of channel `channel`.
fn posted_in(slack: &FakeSlack, channel: &str, thread: &str) -> Vec<String> {
    let calls = slack.calls();
    let in_thread: Vec<String> = calls
        .iter()
        .filter(|c| c.method == "chat.postMessage")
        .filter(|c| c.params["channel"] == channel && c.params["thread_ts"] == thread)
        .filter_map(|c| c.response_ts())
        .collect();
    calls
        .iter()
        .filter(|c| {
            (c.method == "chat.postMessage"
                && c.params["channel"] == channel
                && c.params["thread_ts"] == thread)
                || (c.method == "chat.update"
                    && c.params["ts"]
                        .as_str()
                        .is_some_and(|ts| in_thread.iter().any(|t| t == ts)))
        })
        .filter_map(|c| c.params["text"].as_str().map(str::to_string))
        .collect()
}

/// Wait until thread `thread` shows `text`.
async fn wait_for_answer(slack: &FakeSlack, channel: &str, thread: &str, text: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let posted = posted_in(slack, channel, thread);
        if posted.iter().any(|t| t == text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {text:?} in thread {thread}: {posted:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_slack_event_sent_to_two_nodes_is_answered_once() {
    let Some(url) = fresh_database("cluster_slack_once").await else {
        return;
    };
    let slack = FakeSlack::start().await;
    let llm = ScriptedLlm::start(
        Script::new().agent(marker("ceo"), vec![Step::text("Answer to {{input}}")]),
    )
    .await
    .unwrap();
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  slack:\n    mode: http\n    botTokenEnv: {BOT_VAR}\n    signingSecretEnv: {SECRET_VAR}\n    apiBaseUrl: {}\n",
        slack.api_url()
    );
    let framework = framework_yaml();
    let org = TestOrg::with_extras(
        &llm.url(),
        Wire::Anthropic,
        Execution::default(),
        &Extras {
            framework: &framework,
            sections: &sections,
            ..Extras::default()
        },
    );
    let bot = slack.bot_token();
    let start = |name: &str| {
        OpcRun::start_with_args(
            &org.config_path(),
            &["--node", name],
            &[
                (KEY_VAR, KEY),
                ("DATABASE_URL", url.as_str()),
                (BOT_VAR, bot.as_str()),
                (SECRET_VAR, SECRET),
            ],
        )
    };
    let a = start("node-a");
    let b = start("node-b");
    let now = fake_slack::now_unix();

    // The same event reaches both nodes (a load balancer sent Slack's retry to the other one; or
    // both got it): each accepts it, one answers.
    let twice = app_mention("C1", "U1", "<@W11> first request", "6000.0001", None).to_string();
    let (x, y) = tokio::join!(
        send_event(&a, &twice, now, None),
        send_event(&b, &twice, now + 1, Some(1))
    );
    assert_eq!((x, y), (200, 200), "both nodes accept the delivery");
    // A later event, sent to both nodes in turn, after the first: each node's gateway decides its
    // events in order, so once it is answered, both nodes have decided on the first one.
    let later = app_mention("C1", "U1", "<@W11> later request", "6000.0002", None).to_string();
    assert_eq!(send_event(&a, &later, now + 2, None).await, 200);
    assert_eq!(send_event(&b, &later, now + 3, Some(1)).await, 200);
    wait_for_answer(&slack, "C1", "6000.0002", "Answer to later request").await;
    wait_for_answer(&slack, "C1", "6000.0001", "Answer to first request").await;

    for (thread, question) in [
        ("6000.0001", "first request"),
        ("6000.0002", "later request"),
    ] {
        let answers: Vec<String> = posted_in(&slack, "C1", thread)
            .into_iter()
            .filter(|t| t.contains("Answer to"))
            .collect();
        let posts = slack
            .calls_of("chat.postMessage")
            .into_iter()
            .filter(|c| c.params["thread_ts"] == thread)
            .count();
        assert_eq!(posts, 1, "thread {thread}: one message posted, {answers:?}");
        let asked = llm
            .requests()
            .iter()
            .filter(|r| r.session.contains(question))
            .count();
        assert_eq!(asked, 1, "{question:?} was run once across the cluster");
        let roots = Db::new(&url).roots().await;
        let runs = roots.iter().filter(|r| r.input.contains(question)).count();
        assert_eq!(runs, 1, "one root for {question:?}: {roots:#?}");
    }
    drop((a, b));
}
