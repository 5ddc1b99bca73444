//! Several `opc run` nodes serving one org on one PostgreSQL database (issue 36 §2), end to end: two
//! real `opc run --node NAME` processes on one config file and one `DATABASE_URL`, the scripted LLM,
//! the web chat over loopback, and the database read back to see which node ran what.
//! - every request sent to one node still uses both nodes' slots;
//! - a node killed with `kill -9` in mid-delegation: the other takes its trees over, re-issues the
//!   model call that was in flight, and every conversation gets exactly one answer, no "failed";
//! - the node that received the requests killed with `kill -9`: the other posts their answers
//!   (of the trees it took over and of those it ran already), each once, where a page that
//!   reconnects to it sees them; a follow-up that waited on the dead node for its conversation is
//!   answered by the other, after the answer it waited for;
//! - an approval asked on one node is decided through the other node's web API, both ways, and
//!   each answer reaches the page its request came from;
//! - a web page on one node follows a tree running on the other (its trace, then its answer);
//! - a node paused (SIGSTOP) past its lease: the other takes the tree over; resumed, the paused
//!   node writes nothing into it and goes on serving;
//! - PostgreSQL restarted under traffic (a server of the test's own): the request in flight is
//!   answered once, every other one is answered once or refused (or noticed) with a clear error,
//!   the nodes keep running, and nothing is left half-written.
//!
//! The tests of this file run one at a time ([`SERIAL`]): each runs two nodes with a 3 s lease,
//! and two such clusters side by side on two busy cores would test the machine, not the product.
//! Without a PostgreSQL server they skip with one line (`opc-testgate`), and fail under CI. A
//! failing test prints every node's stderr and the cluster's tables; `OPC_TEST_NODE_LOG=info`
//! makes the nodes say more.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::time::Duration;

use opc_tests::cluster::{Cluster, Db, Root, Said, poll};
use opc_tests::org::{Execution, marker, relay, support_asks_approval};
use opc_tests::postgres::{PgServer, create_database, fresh_database};
use opc_tests::scripted_llm::{Script, ScriptedLlm, Step};
use opc_tests::sse::Sse;
use opc_tests::wait::{Deadline, WAIT, wait_until};
use opc_tests::web_chat::{say, start};
use opc_tests::{http_client, post_json};
use serde_json::{Value, json};

const A: &str = "node-a";
const B: &str = "node-b";

/// The deadline of an answer that may wait for a failover (a lease to lapse, the other node to
/// claim the tree, a model call re-issued) or for PostgreSQL to come back.
const FAILOVER: Duration = Duration::from_secs(60);

/// One cluster at a time (see the module doc).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn slots(n: u32) -> Execution {
    Execution {
        max_concurrent_agents: n,
        ..Execution::default()
    }
}

/// Wait on `sse` for a message (or its last edit) reading exactly `text`.
async fn answered(sse: &mut Sse, text: &str, limit: Duration) {
    sse.wait_for("message|edit", limit, |data| {
        data["text"].as_str() == Some(text)
    })
    .await;
}

/// The one answer conversation `conversation` must show: its transcript holds exactly one bot
/// message that is not an approval card, `expected`, and nothing (answer or notice) says the request failed or was interrupted.
async fn answered_once(db: &Db, conversation: &str, expected: &str) {
    let said = db.transcript(conversation).await;
    let bot: Vec<&Said> = said
        .iter()
        .filter(|s| s.author == "bot" && !s.card)
        .collect();
    assert!(
        bot.len() == 1 && bot[0].text == expected,
        "conversation {conversation}: expected one answer {expected:?}, the transcript is {said:#?}"
    );
    let alarming = said.iter().find(|s| {
        let text = s.text.to_lowercase();
        s.author != "user" && (text.contains("fail") || text.contains("interrupt"))
    });
    assert!(
        alarming.is_none(),
        "conversation {conversation} was told something went wrong: {alarming:?} (transcript {said:#?})"
    );
}

/// The root whose input holds `text` (the request's message); exactly one must.
fn root_of<'a>(roots: &'a [Root], text: &str) -> &'a Root {
    let found: Vec<&Root> = roots.iter().filter(|r| r.input.contains(text)).collect();
    assert_eq!(found.len(), 1, "roots asking {text:?}: {roots:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_sent_to_one_node_still_uses_both_nodes_slots() {
    let Some(url) = fresh_database("cluster_slots").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let llm = ScriptedLlm::start(
        Script::new().agent(marker("ceo"), vec![Step::text("Answer to {{input}}")]),
    )
    .await
    .unwrap();
    // Shown when the test fails: which agent was asked what, in order.
    llm.log_requests(true);
    let mut cluster = Cluster::new(&llm.url(), &url, slots(2));
    cluster.start(A);
    cluster.start(B);

    // Every model call is held, so no tree ends while the eight requests arrive at A: A has room
    // for two of them, and the rest wait in the database for a node with room.
    llm.hold();
    let mut chats = Vec::new();
    for i in 1..=8 {
        let text = format!("Request {i} of 8");
        let (conversation, sse) = start(cluster.node(A), &text).await;
        chats.push((text, conversation, sse));
    }
    let running = poll(WAIT, "trees running on both nodes", || async {
        let roots = cluster.db.roots().await;
        let on = |node: &str| {
            roots
                .iter()
                .filter(|r| !r.ended() && r.node.as_deref() == Some(node))
                .count()
        };
        (on(A) > 0 && on(B) > 0).then_some(roots)
    })
    .await;
    // Neither node runs more trees than it has slots.
    for node in [A, B] {
        let trees = running
            .iter()
            .filter(|r| !r.ended() && r.node.as_deref() == Some(node))
            .count();
        assert!(
            trees <= 2,
            "{node} runs {trees} trees with 2 slots: {running:#?}"
        );
    }

    llm.release();
    for (text, _, sse) in &mut chats {
        answered(sse, &format!("Answer to {text}"), FAILOVER).await;
    }
    for (text, conversation, _) in &chats {
        answered_once(&cluster.db, conversation, &format!("Answer to {text}")).await;
    }
    // The database says which node ran each: both did, and every request ended once, completed.
    let roots = cluster.db.roots().await;
    assert_eq!(roots.len(), 8, "{roots:#?}");
    assert!(roots.iter().all(|r| r.state == "COMPLETED"), "{roots:#?}");
    let nodes: BTreeSet<&str> = roots.iter().filter_map(|r| r.node.as_deref()).collect();
    assert_eq!(nodes, BTreeSet::from([A, B]), "{roots:#?}");
    let distinct: BTreeSet<String> = cluster
        .db
        .rows(
            "SELECT DISTINCT node FROM tasks WHERE node IS NOT NULL",
            &[],
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(distinct, BTreeSet::from([A.to_string(), B.to_string()]));

    // `opc tasks` names the node of each request, and `opc tasks nodes` lists both nodes.
    let (code, list, err) = cluster.cli(&["tasks"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(list.contains(A) && list.contains(B), "{list}");
    let (code, nodes, err) = cluster.cli(&["tasks", "nodes"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(nodes.contains(A) && nodes.contains(B), "{nodes}");
}

/// How long the first model call of each vp-eng session takes: long enough that the one a test
/// sees in flight on B is still in flight when B is killed a moment later (checked afterwards from
/// when the scripted LLM answered it), short enough that A's own trees soon free their slots.
const SLOW_MS: u64 = 8_000;

/// The CEO delegates to VP Engineering and relays its answer. VP Engineering's first call per task
/// is slow; the same call issued again (by a node that took the tree over) is answered at once.
fn slow_delegation() -> Script {
    Script::new()
        .agent(marker("ceo"), relay("vp-eng", "Handle: {{input}}", "CEO: "))
        .agent(
            marker("vp-eng"),
            vec![
                Step::text("Done for {{input}}").with_delay_ms(SLOW_MS),
                Step::text("Done for {{input}}"),
            ],
        )
}

/// Wait until every unfinished tree `node` runs has delegated (its delegated task asked the
/// model): a CEO call re-issued by the node taking a tree over would get the script's next step (a
/// scripted session counts its calls), not the same answer.
async fn every_tree_in_mid_delegation(cluster: &Cluster, llm: &ScriptedLlm, node: &str) {
    let vp_eng = marker("vp-eng");
    poll(
        WAIT,
        &format!("every tree on {node} in mid-delegation"),
        || async {
            let roots = cluster.db.roots().await;
            let requests = llm.requests_for(&vp_eng);
            roots
                .iter()
                .filter(|r| !r.ended() && r.node.as_deref() == Some(node))
                .all(|r| requests.iter().any(|q| q.session.contains(&r.input)))
                .then_some(())
        },
    )
    .await;
}

/// A tree node B runs whose delegated task's model call is in flight (asked, not answered yet).
async fn in_mid_delegation_on_b(cluster: &Cluster, llm: &ScriptedLlm) -> Root {
    in_mid_delegation_on(cluster, llm, B).await
}

/// A tree node `node` runs whose delegated task's model call is in flight (asked, not answered
/// yet).
async fn in_mid_delegation_on(cluster: &Cluster, llm: &ScriptedLlm, node: &str) -> Root {
    let vp_eng = marker("vp-eng");
    poll(
        WAIT,
        &format!("a tree on {node} in mid-delegation"),
        || async {
            let roots = cluster.db.roots().await;
            let requests = llm.requests_for(&vp_eng);
            roots.into_iter().find(|r| {
                !r.ended()
                    && r.node.as_deref() == Some(node)
                    && requests
                        .iter()
                        .any(|q| q.session.contains(&r.input) && q.answered_at.is_none())
            })
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_in_mid_delegation_leaves_every_conversation_answered_once() {
    let Some(url) = fresh_database("cluster_kill").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let script = slow_delegation();
    let llm = ScriptedLlm::start(script).await.unwrap();
    // Shown when the test fails: which agent was asked what, in order.
    llm.log_requests(true);
    let mut cluster = Cluster::new(&llm.url(), &url, slots(2));
    cluster.start(A);
    cluster.start(B);

    // Four requests at A, which has room for two trees: B claims the others.
    let mut chats = Vec::new();
    for i in 1..=4 {
        let text = format!("Ship feature {i}");
        let (conversation, sse) = start(cluster.node(A), &text).await;
        chats.push((text, conversation, sse));
    }
    let vp_eng = marker("vp-eng");
    // A tree B runs, whose delegated task's model call is in flight (asked, not answered yet).
    let victim = in_mid_delegation_on_b(&cluster, &llm).await;
    every_tree_in_mid_delegation(&cluster, &llm, B).await;
    let killed_at = cluster.kill9(B);
    // Every tree B held when it died (the one seen in flight among them).
    let orphans: Vec<Root> = cluster
        .db
        .roots()
        .await
        .into_iter()
        .filter(|r| !r.ended() && r.node.as_deref() == Some(B))
        .collect();
    assert!(
        orphans.iter().any(|r| r.id == victim.id),
        "{victim:?} is not among B's trees after the kill: {orphans:#?}"
    );

    // Every conversation is answered on A, exactly once, with what its own tree produced.
    for (text, _, sse) in &mut chats {
        answered(sse, &format!("CEO: Done for Handle: {text}"), FAILOVER).await;
    }
    for (text, conversation, _) in &chats {
        answered_once(
            &cluster.db,
            conversation,
            &format!("CEO: Done for Handle: {text}"),
        )
        .await;
    }

    // B's trees were finished by A.
    let roots = cluster.db.roots().await;
    assert_eq!(roots.len(), 4, "{roots:#?}");
    for orphan in &orphans {
        let now = roots.iter().find(|r| r.id == orphan.id).unwrap();
        assert_eq!(now.state, "COMPLETED", "{now:?}");
        assert_eq!(now.node.as_deref(), Some(A), "B's tree ended on {now:?}");
    }
    // The model call in flight on B when it died was issued again, after the kill, and only once
    // more: the first ask was still unanswered when B was killed.
    let asked: Vec<_> = llm
        .requests_for(&vp_eng)
        .into_iter()
        .filter(|q| q.session.contains(&victim.input))
        .collect();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(
        asked[0].answered_at.is_none_or(|at| at > killed_at),
        "the call was answered before B was killed, so B did not die in mid-delegation: {asked:#?}"
    );
    assert!(asked[1].received_at > killed_at, "{asked:#?}");
    // The CEO of that tree asked the model twice: its delegation, then its answer (nothing asked
    // again above the call that was in flight).
    let ceo_asked = llm
        .requests_for(&marker("ceo"))
        .into_iter()
        .filter(|q| victim.input.contains(&q.session) || q.session.contains(&victim.input))
        .count();
    assert_eq!(ceo_asked, 2, "the CEO of {victim:?}");
}

/// The node that received four requests (two trees on it, two on the other node) is killed in
/// mid-delegation: the survivor takes its trees over and the duty of posting every answer, and each
/// conversation gets exactly one answer, seen by a page that reconnects to the survivor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_that_received_requests_dies_and_the_other_posts_their_answers() {
    let Some(url) = fresh_database("cluster_reply_duty").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let llm = ScriptedLlm::start(slow_delegation()).await.unwrap();
    llm.log_requests(true);
    let mut cluster = Cluster::new(&llm.url(), &url, slots(2));
    cluster.start(A);
    cluster.start(B);
    // Four requests at A, which has room for two trees: B runs the others.
    let mut chats = Vec::new();
    for i in 1..=4 {
        let text = format!("Reply duty {i}");
        let (conversation, _sse) = start(cluster.node(A), &text).await;
        chats.push((text, conversation));
    }
    let on_a = in_mid_delegation_on(&cluster, &llm, A).await;
    let on_b = in_mid_delegation_on(&cluster, &llm, B).await;
    every_tree_in_mid_delegation(&cluster, &llm, A).await;
    // A streams every answer: it holds each reply's duty.
    let duties = || async {
        cluster
            .db
            .rows(
                "SELECT name, node FROM cluster_holds WHERE name LIKE 'reply:%' ORDER BY name",
                &[],
            )
            .await
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect::<Vec<_>>()
    };
    // (Taken as each answer's stream starts: the last may come a moment after its tree did.)
    let held = poll(WAIT, "A to hold the four replies' duties", || async {
        let held = duties().await;
        (held.len() == 4).then_some(held)
    })
    .await;
    assert!(
        held.iter().all(|(_, node)| node == A),
        "A should hold the four replies' duties: {held:?}"
    );
    cluster.kill9(A);

    // The page reconnects to B (a load balancer's next pick): each answer shows there, once.
    for (text, conversation) in &chats {
        let mut sse = Sse::connect(
            &cluster
                .node(B)
                .url(&format!("/api/conversations/{conversation}/events")),
            None,
        )
        .await;
        answered(&mut sse, &format!("CEO: Done for Handle: {text}"), FAILOVER).await;
    }
    for (text, conversation) in &chats {
        answered_once(
            &cluster.db,
            conversation,
            &format!("CEO: Done for Handle: {text}"),
        )
        .await;
    }
    let roots = cluster.db.roots().await;
    for root in [&on_a, &on_b] {
        let now = roots.iter().find(|r| r.id == root.id).unwrap();
        assert_eq!(
            (now.state.as_str(), now.node.as_deref()),
            ("COMPLETED", Some(B)),
            "{now:?}"
        );
    }
    // Every duty done, none left for another node to take up.
    poll(WAIT, "every reply duty to be done", || async {
        duties().await.is_empty().then_some(())
    })
    .await;
    cluster.stop_all();
}

/// A follow-up that waited on node A for its busy conversation (kept in the database) is answered
/// by node B after A is killed with `kill -9`: B posts the running request's answer, then answers
/// the follow-up, each once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_waiting_on_a_dead_node_is_answered_by_the_other() {
    let Some(url) = fresh_database("cluster_waiting").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let llm = ScriptedLlm::start(slow_delegation()).await.unwrap();
    llm.log_requests(true);
    let mut cluster = Cluster::new(&llm.url(), &url, slots(2));
    cluster.start(A);
    cluster.start(B);
    let first = "Waiting first";
    let (conversation, _sse) = start(cluster.node(A), first).await;
    // (On either node: A received it, and whichever node claims a queued root first runs it.)
    let node = poll(WAIT, "a node running the first request", || async {
        cluster
            .db
            .roots()
            .await
            .iter()
            .find(|r| r.input == first)
            .and_then(|r| r.node.clone())
    })
    .await;
    in_mid_delegation_on(&cluster, &llm, &node).await;
    // The follow-up waits on A behind the first request, kept in the database.
    let second = "Waiting second";
    say(cluster.node(A), &conversation, second).await;
    let kept = || async {
        cluster
            .db
            .rows("SELECT conversation FROM gateway_waiting", &[])
            .await
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
    };
    poll(WAIT, "the follow-up kept in the database", || async {
        (kept().await.len() == 1).then_some(())
    })
    .await;
    cluster.kill9(A);

    let mut sse = Sse::connect(
        &cluster
            .node(B)
            .url(&format!("/api/conversations/{conversation}/events")),
        None,
    )
    .await;
    let answers = poll(FAILOVER, "both answers on B's page", || async {
        let said = cluster.db.transcript(&conversation).await;
        let bot: Vec<String> = said
            .iter()
            .filter(|s| s.author == "bot" && !s.card)
            .map(|s| s.text.clone())
            .collect();
        (bot.len() >= 2).then_some(said)
    })
    .await;
    let order: Vec<(&str, &str)> = answers
        .iter()
        .map(|s| (s.author.as_str(), s.text.as_str()))
        .collect();
    let first_answer = format!("CEO: Done for Handle: {first}");
    assert_eq!(
        order.first(),
        Some(&("user", first)),
        "the transcript: {order:?}"
    );
    assert_eq!(order.get(1), Some(&("user", second)), "{order:?}");
    assert_eq!(
        order.get(2),
        Some(&("bot", first_answer.as_str())),
        "the first request's answer comes first: {order:?}"
    );
    assert_eq!(order.len(), 4, "one answer each: {order:?}");
    assert!(
        order[3].0 == "bot" && order[3].1.starts_with("CEO: ") && !order[3].1.contains("fail"),
        "the follow-up's answer: {order:?}"
    );
    answered(&mut sse, order[3].1, WAIT).await;
    assert!(kept().await.is_empty(), "nothing left waiting");
    cluster.stop_all();
}

/// The node that received a request is paused (SIGSTOP) past its lease while the other node runs
/// the tree: the other node posts the answer; resumed, the paused node posts nothing (its duty
/// moved on), and the conversation keeps its one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiving_node_paused_past_its_lease_does_not_post_the_answer_again() {
    let Some(url) = fresh_database("cluster_reply_pause").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let llm = ScriptedLlm::start(slow_delegation()).await.unwrap();
    llm.log_requests(true);
    // One tree a node: of two requests sent to A, B runs one.
    let mut cluster = Cluster::new(&llm.url(), &url, slots(1));
    cluster.start(A);
    cluster.start(B);
    let mut chats = Vec::new();
    for i in 1..=2 {
        let text = format!("Paused receiver {i}");
        let (conversation, _sse) = start(cluster.node(A), &text).await;
        chats.push((text, conversation));
    }
    // Both trees in mid-delegation (A's own too: a CEO call re-issued by the node taking over
    // would be the script's next step, not the same one).
    in_mid_delegation_on(&cluster, &llm, A).await;
    let on_b = in_mid_delegation_on_b(&cluster, &llm).await;
    signal(&cluster, A, "-STOP");
    let (text, conversation) = chats
        .iter()
        .find(|(text, _)| on_b.input.contains(text.as_str()))
        .unwrap();
    let expected = format!("CEO: Done for Handle: {text}");
    let mut sse = Sse::connect(
        &cluster
            .node(B)
            .url(&format!("/api/conversations/{conversation}/events")),
        None,
    )
    .await;
    answered(&mut sse, &expected, FAILOVER).await;
    signal(&cluster, A, "-CONT");
    // A wakes up streaming both answers: for each, its next renewal (every second) or its check
    // before posting finds the duty gone, and says so; B's answers stay the only ones.
    let lost = || {
        cluster
            .stderr()
            .matches("another node has this reply's duty now")
            .count()
    };
    poll(FAILOVER, "A to notice both replies moved on", || async {
        (lost() >= 2).then_some(())
    })
    .await;
    // Both conversations end answered once (A's own tree resumes on whichever node holds it).
    for (text, conversation) in &chats {
        let mut sse = Sse::connect(
            &cluster
                .node(B)
                .url(&format!("/api/conversations/{conversation}/events")),
            None,
        )
        .await;
        answered(&mut sse, &format!("CEO: Done for Handle: {text}"), FAILOVER).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(lost(), 2, "said once per duty: {}", cluster.stderr());
    for (text, conversation) in &chats {
        answered_once(
            &cluster.db,
            conversation,
            &format!("CEO: Done for Handle: {text}"),
        )
        .await;
    }
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_on_one_node_is_decided_on_the_other() {
    let Some(url) = fresh_database("cluster_approval").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    // The approval chain (CEO → VP Operations → Support, who asks a human), with each task naming
    // its request, so two requests in flight at once walk the script apart.
    let script = Script::new()
        .agent(
            marker("ceo"),
            relay("vp-ops", "refund for {{input}}", "CEO: "),
        )
        .agent(
            marker("vp-ops"),
            relay("support", "handle {{input}}", "VP: "),
        )
        .agent(marker("support"), support_asks_approval());
    let llm = ScriptedLlm::start(script).await.unwrap();
    // Shown when the test fails: which agent was asked what, in order.
    llm.log_requests(true);
    // One tree slot a node, so a node running one tree has no room for another.
    let mut cluster = Cluster::new(&llm.url(), &url, slots(1));
    cluster.start(A);
    cluster.start(B);

    // One request at each node, the second sent while the first's tree holds its node's only
    // slot (its model call held): so each node runs one of the two trees, and each approval is
    // decided through the node that does not run it — both ways.
    llm.hold();
    let mut chats = Vec::new();
    for node in [A, B] {
        let text = format!("Refund order 7, asked at {node}");
        let (conversation, sse) = start(cluster.node(node), &text).await;
        poll(WAIT, &format!("a node running {text:?}"), || async {
            let roots = cluster.db.roots().await;
            roots
                .iter()
                .any(|r| r.input == text && r.node.is_some())
                .then_some(())
        })
        .await;
        chats.push((node, text, conversation, sse));
    }
    let roots = cluster.db.roots().await;
    let nodes: BTreeSet<&str> = roots.iter().filter_map(|r| r.node.as_deref()).collect();
    assert_eq!(nodes, BTreeSet::from([A, B]), "{roots:#?}");
    llm.release();

    for (asked_at, text, conversation, sse) in &mut chats {
        // The approval its support agent asked for, and the node its tree runs on.
        let (approval, owner) = poll(WAIT, &format!("the approval of {text:?}"), || async {
            cluster
                .db
                .rows(
                    "SELECT a.id, r.node FROM approvals a JOIN tasks r ON r.id = a.root_id \
                     WHERE a.state = 'pending' AND r.input = $1",
                    &[&*text],
                )
                .await
                .first()
                .and_then(|row| Some((row.get::<_, i64>(0), row.get::<_, Option<String>>(1)?)))
        })
        .await;
        let other = if owner == A { B } else { A };
        eprintln!("{text:?}: its tree runs on {owner}, decided through {other}");
        // Decided through the web API of the node that does not run the tree.
        let (status, body) = post_json(
            &cluster
                .node(other)
                .url(&format!("/api/approvals/{approval}")),
            json!({ "option": "approve" }),
        )
        .await;
        assert_eq!(
            status, 202,
            "deciding approval {approval} (tree on {owner}) through {other}: {body}"
        );

        // The tree resumed where it runs and ended there, and its answer reached the page of the
        // node the request was sent to.
        let root = poll(WAIT, &format!("the tree of {text:?} to end"), || async {
            let roots = cluster.db.roots().await;
            Some(root_of(&roots, text).clone()).filter(Root::ended)
        })
        .await;
        assert_eq!(root.state, "COMPLETED", "{root:?}");
        assert_eq!(
            root.node.as_deref(),
            Some(owner.as_str()),
            "the tree moved although its node kept running: {root:?}"
        );
        let answer = root.output.clone().unwrap_or_default();
        assert!(
            answer.starts_with("CEO: VP: SUPPORT: approved by operator"),
            "{root:?}"
        );
        answered(sse, &answer, WAIT).await;
        answered_once(&cluster.db, conversation, &answer).await;
        let decided = cluster
            .db
            .rows("SELECT state FROM approvals WHERE id = $1", &[&approval])
            .await;
        assert_eq!(
            decided[0].get::<_, String>(0),
            "approved",
            "approval {approval} of the request sent to {asked_at}"
        );
    }
}

/// What became of a request sent as a new conversation.
#[derive(Debug)]
enum Asked {
    /// Accepted (201), then answered: the conversation must hold that one answer.
    Answered { text: String, conversation: String },
    /// Accepted (201), then told with a notice that it could not be done (the notice's text).
    Noticed {
        text: String,
        conversation: String,
        notice: String,
    },
    /// Refused at once: the status and the error shown.
    Refused {
        text: String,
        status: u16,
        error: String,
    },
}

impl Asked {
    fn text(&self) -> &str {
        match self {
            Asked::Answered { text, .. }
            | Asked::Noticed { text, .. }
            | Asked::Refused { text, .. } => text,
        }
    }
}

/// Send `text` as a new conversation to `node` (`POST /api/conversations` with the text) and see
/// what becomes of it on that node's page: answered (`Answer to <text>`), or told why not by a
/// notice, or refused at once. Nothing else may happen within [`FAILOVER`]: a request accepted and
/// then never answered nor noticed is a silent loss, and fails the test here. A refusal or a notice
/// must be clear: a 5xx with an `error`, a notice with words in it.
async fn ask(cluster: &Cluster, node: &'static str, text: &str) -> Asked {
    let url = cluster.node(node).url("/api/conversations");
    let response = http_client()
        .post(&url)
        .json(&json!({ "text": text }))
        .send()
        .await;
    let (status, body) = match response {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(e) => panic!("POST {url} ({node}) got no answer at all: {e}"),
    };
    if status != 201 {
        let error = body["error"].as_str().unwrap_or_default().to_string();
        assert!(
            (500..600).contains(&status) && !error.trim().is_empty(),
            "{node} refused {text:?} without a clear error: {status} {body}"
        );
        return Asked::Refused {
            text: text.to_string(),
            status,
            error,
        };
    }
    let conversation = body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {body}"))
        .to_string();
    // The page replays what happened so far, then follows it.
    let mut sse = Sse::connect(
        &cluster
            .node(node)
            .url(&format!("/api/conversations/{conversation}/events")),
        None,
    )
    .await;
    let expected = format!("Answer to {text}");
    let deadline = Deadline::after(
        FAILOVER,
        format!("an answer or a notice for {text:?} on {node}"),
    );
    loop {
        deadline
            .run(sse.wait_for("message|edit|notice", FAILOVER, |_| true))
            .await;
        let event = sse.seen.last().expect("the event just seen");
        let shown = event.data["text"].as_str().unwrap_or_default().to_string();
        if event.name == "notice" {
            assert!(
                !shown.trim().is_empty(),
                "{node} noticed {text:?} with an empty notice"
            );
            return Asked::Noticed {
                text: text.to_string(),
                conversation,
                notice: shown,
            };
        }
        if shown == expected {
            return Asked::Answered {
                text: text.to_string(),
                conversation,
            };
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_traffic_loses_nothing_and_half_writes_nothing() {
    let Some(server) = opc_testgate::need(
        opc_testgate::Group::Postgres,
        "cluster_postgres_restart",
        PgServer::start(),
    ) else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let url = create_database(&server.url("postgres"), "cluster_restart")
        .await
        .unwrap();
    let llm = ScriptedLlm::start(
        Script::new().agent(marker("ceo"), vec![Step::text("Answer to {{input}}")]),
    )
    .await
    .unwrap();
    // Shown when the test fails: which agent was asked what, in order.
    llm.log_requests(true);
    let mut cluster = Cluster::new(&llm.url(), &url, Execution::default());
    cluster.start(A);
    cluster.start(B);
    let mut asked = Vec::new();

    // Before: both nodes answer.
    for (node, text) in [
        (A, "Before the restart, at A"),
        (B, "Before the restart, at B"),
    ] {
        let reply = ask(&cluster, node, text).await;
        assert!(
            matches!(reply, Asked::Answered { .. }),
            "with the database up: {reply:?}"
        );
        asked.push(reply);
    }

    // In flight: a request whose model call is held when the server goes down. Its page is
    // followed from now on (its outcome is read after the restart).
    llm.hold();
    let in_flight = "In flight at A";
    let (flight_conversation, mut flight_page) = start(cluster.node(A), in_flight).await;
    wait_until(WAIT, "the in-flight request's model call", || {
        llm.requests_for(&marker("ceo"))
            .iter()
            .any(|q| q.session == in_flight)
    })
    .await;

    tokio::task::block_in_place(|| server.stop());
    // The held call is answered while the database is down: its node cannot record it.
    llm.release();
    wait_until(WAIT, "the in-flight call answered", || {
        llm.requests_for(&marker("ceo"))
            .iter()
            .any(|q| q.session == in_flight && q.answered_at.is_some())
    })
    .await;
    // During the outage: each request is refused clearly, or accepted and then answered or
    // noticed (`ask` waits for that, so these are sent in the background while the server is down).
    let during = {
        let a = ask(&cluster, A, "During the outage, at A");
        let b = ask(&cluster, B, "During the outage, at B");
        async move { (a.await, b.await) }
    };
    let restart = async {
        // Down longer than a lease, so every lease has lapsed when the server is back: the
        // nodes must sort out among themselves who finishes the tree that was in flight.
        tokio::time::sleep(Duration::from_secs(4)).await;
        tokio::task::block_in_place(|| server.restart()).unwrap();
    };
    let ((during_a, during_b), ()) = tokio::join!(during, restart);
    asked.push(during_a);
    asked.push(during_b);

    // The request that was in flight is answered once, as if nothing had happened.
    answered(
        &mut flight_page,
        &format!("Answer to {in_flight}"),
        FAILOVER,
    )
    .await;

    // After: each node answers requests again. One refused or noticed while the node reconnects
    // is a clear error (`ask` checks); the person sends again, as they would.
    for node in [A, B] {
        let deadline = tokio::time::Instant::now() + FAILOVER;
        for attempt in 1.. {
            let text = format!("After the restart, at {node}, attempt {attempt}");
            let reply = ask(&cluster, node, &text).await;
            let answered = matches!(reply, Asked::Answered { .. });
            asked.push(reply);
            if answered {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{node} answered no request for {FAILOVER:?} after PostgreSQL came back: {asked:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // What a person was told instead of an answer (shown with the output of a failing run).
    for reply in &asked {
        match reply {
            Asked::Noticed { text, notice, .. } => eprintln!("{text:?}: notice {notice:?}"),
            Asked::Refused {
                text,
                status,
                error,
            } => eprintln!("{text:?}: refused, {status} {error:?}"),
            Asked::Answered { .. } => {}
        }
    }

    // Nothing is left half-done: every task ended; each answered request has one completed tree
    // and one answer; a refused or noticed one left no task and no answer.
    poll(WAIT, "every task ended", || async {
        let states = cluster.db.rows("SELECT id, state FROM tasks", &[]).await;
        states
            .iter()
            .all(|row| opc_tests::cluster::ended(&row.get::<_, String>(1)))
            .then_some(())
    })
    .await;
    let roots = cluster.db.roots().await;
    let flight_root = root_of(&roots, in_flight);
    assert_eq!(flight_root.state, "COMPLETED", "{flight_root:?}");
    answered_once(
        &cluster.db,
        &flight_conversation,
        &format!("Answer to {in_flight}"),
    )
    .await;
    for reply in &asked {
        let text = reply.text();
        match reply {
            Asked::Answered { conversation, .. } => {
                let root = root_of(&roots, text);
                assert_eq!(root.state, "COMPLETED", "{root:?}");
                answered_once(&cluster.db, conversation, &format!("Answer to {text}")).await;
            }
            Asked::Noticed { conversation, .. } => {
                assert!(
                    roots.iter().all(|r| !r.input.contains(text)),
                    "{reply:?} has a task: {roots:#?}"
                );
                let said = cluster.db.transcript(conversation).await;
                assert!(
                    !said.iter().any(|s| s.author == "bot"),
                    "{reply:?} was answered too: {said:#?}"
                );
            }
            Asked::Refused { .. } => {
                assert!(
                    roots.iter().all(|r| !r.input.contains(text)),
                    "{reply:?} has a task: {roots:#?}"
                );
                let kept = cluster
                    .db
                    .rows(
                        "SELECT conversation FROM web_messages WHERE text = $1",
                        &[&text],
                    )
                    .await;
                assert!(kept.is_empty(), "{reply:?} is in the transcript");
            }
        }
    }
    let answered = asked
        .iter()
        .filter(|a| matches!(a, Asked::Answered { .. }))
        .count();
    assert_eq!(roots.len(), answered + 1, "{roots:#?}");
    // Both nodes kept running through the outage, and stop cleanly.
    cluster.stop_all();
}

/// A web page on one node follows a tree that runs on the other: the trace (the delegation) and
/// the answer reach the page of the node the request was sent to, the trace first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_one_node_follows_a_tree_running_on_the_other() {
    let Some(url) = fresh_database("cluster_stream").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let llm = ScriptedLlm::start(
        Script::new()
            .agent(
                marker("ceo"),
                relay("vp-eng", "plan for {{input}}", "CEO: "),
            )
            .agent(marker("vp-eng"), vec![Step::text("Answer to {{input}}")]),
    )
    .await
    .unwrap();
    llm.log_requests(true);
    // One tree slot a node: the node holding the first request has no room for the second.
    let mut cluster = Cluster::new(&llm.url(), &url, slots(1));
    cluster.start(A);
    cluster.start(B);
    llm.hold();
    let (_, _filler_sse) = start(cluster.node(A), "Filler").await;
    let busy = poll(WAIT, "a node running the filler", || async {
        cluster
            .db
            .roots()
            .await
            .iter()
            .find(|r| r.input == "Filler")
            .and_then(|r| r.node.clone())
    })
    .await;
    let (page, other) = if busy == A { (A, B) } else { (B, A) };
    // Sent to the busy node: it runs on the other one, and the page stays on the busy one.
    let text = "Streamed across";
    let (_, mut sse) = start(cluster.node(page), text).await;
    let runs_on = poll(WAIT, "a node running the streamed request", || async {
        cluster
            .db
            .roots()
            .await
            .iter()
            .find(|r| r.input == text)
            .and_then(|r| r.node.clone())
    })
    .await;
    assert_eq!(runs_on, other, "{}", cluster.db.dump_blocking());
    llm.release();
    let expected = format!("CEO: Answer to plan for {text}");
    answered(&mut sse, &expected, FAILOVER).await;
    let delegated = sse
        .seen
        .iter()
        .position(|e| e.name == "progress" && e.data["event"] == "delegated");
    let answer = sse
        .seen
        .iter()
        .position(|e| e.data["text"].as_str() == Some(expected.as_str()));
    assert!(
        matches!((delegated, answer), (Some(d), Some(a)) if d < a),
        "the page on {page} never showed the delegation made on {other} before the answer: {:?}\n{}",
        sse.seen
            .iter()
            .map(|e| (&e.name, &e.data))
            .collect::<Vec<_>>(),
        cluster.stderr()
    );
    cluster.stop_all();
}

/// `kill -STOP`/`-CONT` the node `name` (a pause: the process keeps its sockets and its state).
fn signal(cluster: &Cluster, name: &str, signal: &str) {
    let pid = cluster.node(name).pid();
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill {signal} {pid}: {e}"));
    assert!(status.success(), "kill {signal} {pid} ({name}): {status}");
}

/// A node paused (SIGSTOP) past its lease in mid-delegation: the other node takes the tree over and
/// answers it; resumed, the paused node gets its late model answer, notices it lost the tree, and
/// writes nothing into it (the delegated task keeps the one model call the new owner made, the
/// conversation its one answer), and it goes on running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_paused_past_its_lease_writes_nothing_into_the_tree_it_lost() {
    let Some(url) = fresh_database("cluster_pause").await else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let script = slow_delegation();
    let llm = ScriptedLlm::start(script).await.unwrap();
    llm.log_requests(true);
    // One tree a node: of two requests sent to A, B runs one.
    let mut cluster = Cluster::new(&llm.url(), &url, slots(1));
    cluster.start(A);
    cluster.start(B);
    let mut chats = Vec::new();
    for i in 1..=2 {
        let text = format!("Pause test {i}");
        let (conversation, sse) = start(cluster.node(A), &text).await;
        chats.push((text, conversation, sse));
    }
    let vp_eng = marker("vp-eng");
    let victim = in_mid_delegation_on_b(&cluster, &llm).await;
    signal(&cluster, B, "-STOP");
    let resumed = async {
        for (text, _, sse) in &mut chats {
            answered(sse, &format!("CEO: Done for Handle: {text}"), FAILOVER).await;
        }
    };
    resumed.await;
    let taken = cluster
        .db
        .roots()
        .await
        .into_iter()
        .find(|r| r.id == victim.id)
        .unwrap();
    assert_eq!(
        (taken.state.as_str(), taken.node.as_deref()),
        ("COMPLETED", Some(A)),
        "{taken:?}"
    );
    let calls = |id: i64| {
        let db = &cluster.db;
        async move {
            db.rows(
                "SELECT llm_calls, output FROM tasks WHERE root_id = $1 AND agent = 'vp-eng'",
                &[&id],
            )
            .await
            .iter()
            .map(|r| (r.get::<_, i64>(0), r.get::<_, Option<String>>(1)))
            .collect::<Vec<_>>()
        }
    };
    let before = calls(victim.id).await;
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0].0, 1, "the new owner's one call: {before:?}");

    // B wakes up: its late model answer arrives (the scripted LLM sent it while B was stopped), and
    // its heartbeat finds the lease gone.
    signal(&cluster, B, "-CONT");
    poll(FAILOVER, "B to notice it lost the tree", || async {
        let stderr = cluster.stderr();
        // The heartbeat's warning, or a refused write's error: both say so.
        stderr.contains("moved to another node").then_some(())
    })
    .await;
    // Past B's late answer: it is sent SLOW_MS after it was asked, and B has had a heartbeat since.
    // When B resumes before then, its heartbeat stops the tree and drops the call first, so that
    // answer is never sent at all: either way, past that moment nothing more comes to B.
    poll(
        FAILOVER,
        "B's late model answer to be sent or dropped",
        || async {
            let now = std::time::SystemTime::now();
            llm.requests_for(&vp_eng)
                .iter()
                .filter(|q| q.session.contains(&victim.input))
                .all(|q| {
                    q.answered_at.is_some()
                        || q.received_at + Duration::from_millis(SLOW_MS) + Duration::from_secs(1)
                            <= now
                })
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        calls(victim.id).await,
        before,
        "B wrote into the tree it lost"
    );
    for (text, conversation, _) in &chats {
        answered_once(
            &cluster.db,
            conversation,
            &format!("CEO: Done for Handle: {text}"),
        )
        .await;
    }
    // B is still serving: a new request sent to it is answered.
    let (_, mut sse) = start(cluster.node(B), "After the pause").await;
    answered(&mut sse, "CEO: Done for Handle: After the pause", FAILOVER).await;
    cluster.stop_all();
}
