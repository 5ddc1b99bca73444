//! Discord on a cluster, end to end (issue 36 §2 "Platforms"): two real `opc run --node NAME`
//! processes on one config file and one PostgreSQL database (`leaseTtl: 3s`), both configured with
//! the same Discord bot, against the fake Discord (REST + v10 gateway websocket) and the scripted
//! LLM on loopback.
//! - exactly one node opens the gateway connection: once one has IDENTIFIED, no second IDENTIFY
//!   arrives while the holder renews its `discord-gateway` hold (`cluster_holds.expires_ms`
//!   advancing under the same instance) for a whole lease, so the other node asked and was refused;
//! - the holder killed with `kill -9`, the other node connects (a new IDENTIFY, which only it can
//!   send) before a deadline of the lease plus a margin, holds the singleton, and a mention sent
//!   through the fake afterwards is answered once (one reply posted, one model call).
//!
//! - a slow READY (withheld by the fake for longer than the lease) does not let the hold lapse:
//!   the node opening the connection renews its hold while it waits, so no second node
//!   IDENTIFIES, and once READY comes it is connected;
//! - a connection Discord closes for good (close 4014, after which serenity's client stops) is
//!   opened again by the node still holding the hold, and a mention is then answered once.
//!
//! Which node connected is judged by causality, not by the fake (whose IDENTIFY payloads do not
//! name a node): the hold row names the holder; killing it must end the only connection, or the
//! survivor, already connected, would never IDENTIFY again.
//!
//! Without a PostgreSQL server it skips with one line (`opc-testgate`, group `postgres`), and fails
//! under CI. A failing test prints every node's stderr (with the hold task's own info lines), the
//! IDENTIFYs and the fake's REST calls, then the cluster's tables; its message names the hold row.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use opc_tests::cluster::{Db, LEASE_TTL, framework_yaml, poll};
use opc_tests::fake_discord::{Author, CHANNEL_ID, FakeDiscord, GUILD_ID};
use opc_tests::opc_process::OpcRun;
use opc_tests::org::{Execution, Extras, KEY, KEY_VAR, TestOrg, Wire, marker};
use opc_tests::postgres::fresh_database;
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::wait::WAIT;
use serde_json::Value;

const A: &str = "node-a";
const B: &str = "node-b";
const BOT_VAR: &str = "OPC_TEST_DISCORD_BOT";
/// The singleton's name (`opc_bot::gateway::discord_hold::HOLD`).
const HOLD: &str = "discord-gateway";
/// The org's `leaseTtl` ([`LEASE_TTL`], whole seconds) as a duration.
fn lease() -> Duration {
    let secs = LEASE_TTL.strip_suffix('s').and_then(|s| s.parse().ok());
    Duration::from_secs(
        secs.unwrap_or_else(|| panic!("leaseTtl {LEASE_TTL:?} is not whole seconds")),
    )
}
/// What a takeover may take beyond the lease: the survivor's next ask (every lease / 3), then
/// `GET /gateway/bot`, the websocket and IDENTIFY, on two cores shared with other builds.
const MARGIN: Duration = Duration::from_secs(12);
/// Renewals of the holder's hold seen before the other node is judged to have been refused: each
/// comes a third of a lease after the last, and the other node asks as often, so three span a lease.
const RENEWALS: usize = 3;
/// Renewals seen while READY is withheld: more than a lease's worth, so a hold not renewed during
/// the open would have lapsed and the other node taken it.
const RENEWALS_WHILE_OPENING: usize = RENEWALS + 2;

/// The nodes of the test, shown when it fails.
struct Nodes {
    /// Declared first, so killed before the config's directory goes.
    runs: Vec<(String, OpcRun)>,
    db: Db,
    /// What the fake saw, read when the test fails.
    discord: FakeDiscord,
}

impl Nodes {
    fn node(&self, name: &str) -> &OpcRun {
        &self
            .runs
            .iter()
            .rfind(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no node {name:?} was started"))
            .1
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (name, run) in &self.runs {
                eprintln!("--- stderr of node {name} ---\n{}", run.stderr());
            }
            eprintln!("--- IDENTIFYs ---\n{:#?}", self.discord.identifies());
            let calls: Vec<String> = self
                .discord
                .calls()
                .iter()
                .map(|c| format!("{} {} → {} {}", c.method, c.path, c.status, c.body))
                .collect();
            eprintln!("--- Discord REST calls ---\n{calls:#?}");
            eprintln!("{}", self.db.dump_blocking());
        }
    }
}

/// The `discord-gateway` hold as the database has it: (node, instance, expires_ms).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    node: String,
    instance: i64,
    expires_ms: i64,
}

async fn held(db: &Db) -> Option<Held> {
    db.rows(
        "SELECT node, instance, expires_ms FROM cluster_holds WHERE name = $1",
        &[&HOLD],
    )
    .await
    .first()
    .map(|row| Held {
        node: row.get(0),
        instance: row.get(1),
        expires_ms: row.get(2),
    })
}

/// Watch the hold until `from`'s holder has renewed it `renewals` times (each a later
/// `expires_ms`, the same instance); panics if it moved to another instance meanwhile, or after
/// [`WAIT`]. The last row seen.
async fn renewed(db: &Db, from: &Held, renewals: usize) -> Held {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut last = from.clone();
    let mut seen = 0;
    while seen < renewals {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {renewals} renewals of {from:?}: {seen} seen, \
             the last {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let Some(now) = held(db).await else {
            panic!("the hold {from:?} is gone");
        };
        assert_eq!(
            (&now.node, now.instance),
            (&last.node, last.instance),
            "the hold moved from {last:?} to {now:?} while its holder was alive"
        );
        if now.expires_ms > last.expires_ms {
            seen += 1;
            last = now;
        }
    }
    last
}

/// `kill -9` `run`, and wait until it is dead (a zombie, not reaped, so its stderr stays readable).
fn kill9(name: &str, run: &OpcRun) {
    let pid = run.pid();
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill -9 {pid}: {e}"));
    assert!(status.success(), "kill -9 {pid} ({name}): {status}");
    let deadline = std::time::Instant::now() + WAIT;
    while !dead(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "node {name} (pid {pid}) still runs {WAIT:?} after kill -9"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether child `pid` has died: gone, or a zombie waiting to be reaped.
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) {
        // `pid (comm) S …`: the state follows the last `)`.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// The scripted LLM, the test org (Discord through `discord`, on the cluster at `url`), and the
/// nodes A and B started on it. Keep the org until the nodes are gone (it holds the config).
async fn start_cluster(url: &str, discord: FakeDiscord) -> (Nodes, ScriptedLlm, TestOrg) {
    let llm = ScriptedLlm::start(
        Script::new().agent(marker("ceo"), vec![Step::text("Answer to {{input}}")]),
    )
    .await
    .unwrap();
    llm.log_requests(true);
    let sections = format!(
        "channels:\n  web: {{ listen: \"127.0.0.1:0\" }}\n  discord:\n    botTokenEnv: {BOT_VAR}\n    apiBaseUrl: {}\n",
        discord.api_url()
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
    let bot = discord.bot_token();
    // The hold task's and the connection's own lines (took the hold, closed or reopened the
    // connection) are shown on failure.
    let log = std::env::var("OPC_TEST_NODE_LOG").unwrap_or_else(|_| {
        "warn,opc_bot::gateway::discord_hold=info,opc_adapters::discord=info".to_string()
    });
    let start = |name: &str| {
        let run = OpcRun::start_with_args(
            &org.config_path(),
            &["--node", name],
            &[
                (KEY_VAR, KEY),
                ("DATABASE_URL", url),
                (BOT_VAR, bot.as_str()),
                ("OPC_LOG", log.as_str()),
            ],
        );
        (name.to_string(), run)
    };
    let mut nodes = Nodes {
        runs: Vec::new(),
        db: Db::new(url),
        discord,
    };
    nodes.runs.push(start(A));
    nodes.runs.push(start(B));
    (nodes, llm, org)
}

/// A mention of `question` sent through the fake is answered once across the cluster: one reply
/// posted (streamed: posted, then edited to the answer) in the thread started from it, none in the
/// channel, one model call; and the holder `holding` goes on renewing its hold meanwhile.
async fn answered_once(nodes: &Nodes, llm: &ScriptedLlm, holding: &Held, question: &str) {
    let discord = &nodes.discord;
    let answer = format!("Answer to {question}");
    let mention = format!("<@{}> {question}", discord.bot_user_id());
    let thread = discord.dispatch_message_create(
        CHANNEL_ID,
        Some(GUILD_ID),
        &Author::user("1300000000000000001", "alice"),
        &mention,
        true,
    );
    assert!(
        discord.wait_for_message(&thread, &answer, WAIT).await,
        "no answer in thread {thread}"
    );
    let still = renewed(&nodes.db, holding, 1).await;
    let posted = discord.calls_matching("POST", &format!("/api/v10/channels/{thread}/messages"));
    let in_channel =
        discord.calls_matching("POST", &format!("/api/v10/channels/{CHANNEL_ID}/messages"));
    let posted = posted.len() + in_channel.len();
    let shown: Vec<String> = discord
        .messages_in(&thread)
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        posted == 1 && shown == vec![answer.clone()],
        "one reply posted: {posted} posts, thread {thread} shows {shown:?} ({still:?})"
    );
    let asked = llm
        .requests()
        .iter()
        .filter(|r| r.session.contains(question))
        .count();
    assert_eq!(asked, 1, "{question:?} was run once across the cluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_ready_keeps_the_hold_and_a_gateway_closed_for_good_is_opened_again() {
    let Some(url) = fresh_database("cluster_discord_ready").await else {
        return;
    };
    let discord = FakeDiscord::start().await;
    discord.withhold_ready();
    let (nodes, llm, _org) = start_cluster(&url, discord).await;
    let db = nodes.db.clone();
    let discord = &nodes.discord;

    // 1. One node IDENTIFIES and waits for READY, withheld for more than a lease: it keeps
    // renewing its hold meanwhile, so the other node is refused and opens no second connection.
    poll(WAIT, "a first IDENTIFY", || async {
        (!discord.identifies().is_empty()).then_some(())
    })
    .await;
    let holder = poll(WAIT, "the discord-gateway hold", || held(&db)).await;
    let kept = renewed(&db, &holder, RENEWALS_WHILE_OPENING).await;
    let identified = discord.identifies();
    assert_eq!(
        (identified.len(), discord.open_sockets()),
        (1, 1),
        "one IDENTIFY and one websocket while {} waited for READY ({kept:?}): {identified:#?}",
        holder.node
    );
    // READY comes: the holder registers the commands (its open is done) and stays the only one.
    discord.release_ready();
    poll(
        WAIT,
        "the slash commands registered after READY",
        || async {
            (!discord
                .calls_matching("PUT", "/api/v10/applications/*/commands")
                .is_empty())
            .then_some(())
        },
    )
    .await;
    let kept = renewed(&db, &kept, RENEWALS).await;
    assert_eq!(discord.identifies().len(), 1, "{:#?}", discord.identifies());

    // 2. Discord closes the connection for good: the holder, still holding, opens it again.
    assert_eq!(
        discord.close_sessions(4014),
        1,
        "one ready session to close"
    );
    poll(lease() + MARGIN, "the holder to IDENTIFY again", || async {
        (discord.identifies().len() >= 2).then_some(())
    })
    .await;
    let now = held(&db).await;
    assert!(
        now.as_ref()
            .is_some_and(|h| (&h.node, h.instance) == (&holder.node, holder.instance)),
        "the connection was opened again, but the hold is {now:?} (was {kept:?})"
    );
    // Opened again (READY, commands), it answers a mention once.
    poll(WAIT, "the commands registered again", || async {
        (discord
            .calls_matching("PUT", "/api/v10/applications/*/commands")
            .len()
            >= 2)
            .then_some(())
    })
    .await;
    answered_once(&nodes, &llm, now.as_ref().unwrap(), "Is the gateway back?").await;
    let identified: Vec<Value> = discord.identifies();
    assert_eq!(identified.len(), 2, "{identified:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_holds_the_discord_gateway_and_another_takes_over_when_it_dies() {
    let Some(url) = fresh_database("cluster_discord").await else {
        return;
    };
    let (nodes, llm, _org) = start_cluster(&url, FakeDiscord::start().await).await;
    let db = nodes.db.clone();
    let discord = &nodes.discord;

    // 1. One node connects; the hold names it.
    poll(WAIT, "a first IDENTIFY", || async {
        (!discord.identifies().is_empty()).then_some(())
    })
    .await;
    let holder = poll(WAIT, "the discord-gateway hold", || held(&db)).await;
    assert!(
        holder.node == A || holder.node == B,
        "the hold names neither node: {holder:?}"
    );
    // Both nodes run their hold task from before their ready line, and the other asks as often as
    // the holder renews: while the holder renews for a whole lease, the other is refused and
    // stays off the gateway.
    let kept = renewed(&db, &holder, RENEWALS).await;
    let identified = discord.identifies();
    assert_eq!(
        identified.len(),
        1,
        "a second gateway connection while {} held the hold ({kept:?}): {identified:#?}",
        holder.node
    );

    // 2. The holder dies: the other node takes the hold over and connects.
    let (dying, survivor) = if holder.node == A { (A, B) } else { (B, A) };
    kill9(dying, nodes.node(dying));
    let takeover = lease() + MARGIN;
    poll(
        takeover,
        &format!("{survivor} to IDENTIFY after {dying} died"),
        || async { (discord.identifies().len() >= 2).then_some(()) },
    )
    .await;
    let now = held(&db).await;
    assert!(
        now.as_ref()
            .is_some_and(|h| h.node == survivor && h.instance != holder.instance),
        "{survivor} connected, but the hold is {now:?} (was {holder:?})"
    );

    // A mention sent now is answered once, in the thread started from it.
    answered_once(&nodes, &llm, now.as_ref().unwrap(), "What is our runway?").await;
    let identified = discord.identifies();
    assert_eq!(identified.len(), 2, "{identified:#?}");
}
