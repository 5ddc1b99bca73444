//! End-to-end tests of the agents engine against the scripted LLM server over real HTTP on 127.0.0.1:
//! delegation down four levels, parallel delegation, compression, org enforcement, provider faults,
//! timeouts, approvals across a restart, cancellation — in both wire formats, streamed and not.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use opc_agents::store::{ApprovalState, Decided, StoreError, TaskRecord};
use opc_agents::{Engine, EngineError, Event, Outcome, RootRun, Store as _, TaskState};
use opc_tests::org::{Execution, KEY, OrgBuilder, TestOrg, Wire, approval_chain, marker, relay};
use opc_tests::scripted_llm::{Fault, Script, ScriptedLlm, Step};
use opc_tests::wait::{WAIT, next_event, wait_until, within};
use serde_json::json;

/// A request's outcome, within [`WAIT`].
async fn finish(run: RootRun) -> Outcome {
    within(WAIT, "the request to finish", run.wait()).await
}

/// Shut `engine` down, within [`WAIT`].
async fn stop(engine: &Engine) {
    within(WAIT, "the engine to shut down", engine.shutdown()).await;
}

/// A root's outcome after a restart, within [`WAIT`].
async fn finish_root(engine: &Engine, root: i64) -> Outcome {
    within(WAIT, "the resumed tree to finish", engine.wait_root(root))
        .await
        .unwrap()
}

async fn tree(engine: &Engine, root: i64) -> Vec<TaskRecord> {
    engine.store().tree(root).await.unwrap()
}

/// The task of `agent` in `root`'s tree.
async fn task_of(engine: &Engine, root: i64, agent: &str) -> Option<TaskRecord> {
    tree(engine, root)
        .await
        .into_iter()
        .find(|t| t.agent == agent)
}

/// The scripted LLM and the org `builder` sets up, and an engine on them (streaming or not). Keep
/// all three for the test's length: the LLM stops, and the org's directory goes, when dropped.
async fn start(builder: OrgBuilder, streaming: bool) -> (ScriptedLlm, TestOrg, Engine) {
    let (llm, org) = builder.start().await;
    let engine = org.engine(TestOrg::options(streaming)).await;
    (llm, org, engine)
}

/// Send `text` as a new request and wait for it: the root task's id, and the outcome.
async fn ask(engine: &Engine, text: &str) -> (i64, Outcome) {
    let run = engine.send(None, text).await.unwrap();
    let root = run.task;
    (root, finish(run).await)
}

/// The CEO's model call fails with `failure` on each of its 3 attempts (an answer would follow).
fn ceo_fails_every_attempt(failure: Step) -> Script {
    Script::new().agent(
        marker("ceo"),
        vec![
            failure.clone(),
            failure.clone(),
            failure,
            Step::text("never"),
        ],
    )
}

/// A manager that delegates `task` to `child` and never gets to answer (the test ends first).
fn delegate_only(child: &str, task: &str) -> Vec<Step> {
    vec![
        Step::tool("delegate", json!({"agent": child, "task": task})),
        Step::text("unused"),
    ]
}

/// The four-level chain: CEO → VP Eng → Backend Lead → Backend Dev, each passing the answer up.
fn chain_script() -> Script {
    Script::new()
        .agent(
            marker("ceo"),
            relay("vp-eng", "VP-TASK: plan the API", "CEO-FINAL: "),
        )
        .agent(
            marker("vp-eng"),
            relay("lead-backend", "LEAD-TASK: design endpoints", "VP-SAYS: "),
        )
        .agent(
            marker("lead-backend"),
            relay("dev-backend", "DEV-TASK: write the handler", "LEAD-SAYS: "),
        )
        .agent(marker("dev-backend"), vec![Step::text("DEV-RESULT-42")])
}

async fn chain(wire: Wire, streaming: bool) {
    let (llm, _org, engine) = start(TestOrg::scripted(chain_script()).wire(wire), streaming).await;
    let mut events = engine.events().subscribe();
    let (root, outcome) = ask(&engine, "USER: build the API").await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    assert_eq!(outcome.text, "CEO-FINAL: VP-SAYS: LEAD-SAYS: DEV-RESULT-42");

    // Four independent sessions; each first request holds only its direct parent's task.
    let expected_first = [
        ("ceo", "USER: build the API"),
        ("vp-eng", "VP-TASK: plan the API"),
        ("lead-backend", "LEAD-TASK: design endpoints"),
        ("dev-backend", "DEV-TASK: write the handler"),
    ];
    for (agent, task) in expected_first {
        let requests = llm.requests_for(&marker(agent));
        assert!(!requests.is_empty(), "{agent} was never called");
        let first = &requests[0];
        assert_eq!(
            first.user_texts(),
            vec![task.to_string()],
            "{agent}'s first request"
        );
        assert_eq!(first.is_stream(), streaming);
        assert!(first.system.contains(&marker(agent)));
        let body = first.body.to_string();
        for (other, other_task) in expected_first {
            if other != agent {
                assert!(!body.contains(other_task), "{agent} saw {other}'s task");
            }
        }
        match wire {
            Wire::Anthropic => assert_eq!(first.header("x-api-key"), Some(KEY)),
            Wire::OpenAi => assert_eq!(
                first.header("authorization"),
                Some(&*format!("Bearer {KEY}"))
            ),
        }
    }
    // The leaf is offered only `escalate`; the managers the delegate tools.
    assert_eq!(
        llm.requests_for(&marker("dev-backend"))[0].tool_names(),
        vec!["escalate"]
    );
    assert_eq!(
        llm.requests_for(&marker("ceo"))[0].tool_names(),
        vec!["delegate", "delegate_parallel", "escalate"]
    );

    // The ledger: 4 linked tasks, each with tokens and cost.
    let tasks = tree(&engine, root).await;
    assert_eq!(tasks.len(), 4);
    let agents: Vec<&str> = tasks.iter().map(|t| t.agent.as_str()).collect();
    assert_eq!(agents, ["ceo", "vp-eng", "lead-backend", "dev-backend"]);
    for pair in tasks.windows(2) {
        assert_eq!(pair[1].parent_id, Some(pair[0].id));
        assert_eq!(pair[1].root_id, root);
    }
    for task in &tasks {
        assert_eq!(task.state, TaskState::Completed);
        assert!(task.tokens_in > 0 && task.tokens_out > 0, "{task:?}");
        assert!(task.cost_usd > 0.0, "{task:?}");
        let calls = engine.store().calls(task.id).await.unwrap();
        assert_eq!(calls.len(), if task.agent == "dev-backend" { 1 } else { 2 });
        assert_eq!(calls[0].model, "llm/test-model");
    }
    let total: f64 = tasks.iter().map(|t| t.cost_usd).sum();
    assert!((outcome.cost_usd - total).abs() < 1e-12);

    // The bus saw the delegation and, when streaming, the root's tokens.
    let mut delegated = 0;
    let mut root_tokens = String::new();
    while let Ok(event) = events.try_recv() {
        match event {
            Event::Delegated { .. } => delegated += 1,
            Event::Token { task, text, .. } if task == root => root_tokens.push_str(&text),
            _ => {}
        }
    }
    assert_eq!(delegated, 3);
    if streaming {
        assert_eq!(root_tokens, outcome.text);
    } else {
        assert!(root_tokens.is_empty());
    }
    stop(&engine).await;
}

#[tokio::test]
async fn four_level_chain_anthropic_streaming() {
    chain(Wire::Anthropic, true).await;
}

#[tokio::test]
async fn four_level_chain_anthropic_whole_responses() {
    chain(Wire::Anthropic, false).await;
}

#[tokio::test]
async fn four_level_chain_openai_streaming() {
    chain(Wire::OpenAi, true).await;
}

#[tokio::test]
async fn four_level_chain_openai_whole_responses() {
    chain(Wire::OpenAi, false).await;
}

/// A lead that fans `part A` out to dev-backend and `part B` to dev-data in one `delegate_parallel`,
/// under the chain CEO → VP Eng → lead.
fn parallel_script(dev_backend: Vec<Step>, dev_data: Vec<Step>) -> Script {
    Script::new()
        .agent(
            marker("lead-backend"),
            vec![
                Step::tool(
                    "delegate_parallel",
                    json!({"tasks": [
                        {"agent": "dev-backend", "task": "part A"},
                        {"agent": "dev-data", "task": "part B"}
                    ]}),
                ),
                Step::text("both: {{last_result}}"),
            ],
        )
        .agent(marker("dev-backend"), dev_backend)
        .agent(marker("dev-data"), dev_data)
        // The lead is the root of this test's tree only through the chain above it.
        .agent(marker("ceo"), relay("vp-eng", "go", ""))
        .agent(marker("vp-eng"), relay("lead-backend", "go", ""))
}

#[tokio::test]
async fn delegate_parallel_collects_every_childs_result_in_order() {
    let script = parallel_script(
        vec![Step::text("A-DONE").with_delay_ms(100)],
        vec![Step::text("B-DONE")],
    );
    let (llm, _org, engine) = start(TestOrg::scripted(script), true).await;
    let (_, outcome) = ask(&engine, "parallel please").await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    // Results come in the order asked for, whichever child finished first.
    let results: serde_json::Value =
        serde_json::from_str(outcome.text.trim_start_matches("both: ")).unwrap();
    assert_eq!(
        results,
        json!([
            {"agent": "dev-backend", "status": "completed", "result": "A-DONE"},
            {"agent": "dev-data", "status": "completed", "result": "B-DONE"}
        ])
    );
    // Isolation: each sibling saw only its own task.
    let a_body = llm.requests_for(&marker("dev-backend"))[0].body.to_string();
    let b_body = llm.requests_for(&marker("dev-data"))[0].body.to_string();
    assert!(a_body.contains("part A") && !a_body.contains("part B"));
    assert!(b_body.contains("part B") && !b_body.contains("part A"));
    stop(&engine).await;
}

/// Concurrency shown by causality, not by timing: dev-backend's model call never answers, yet dev-data
/// runs to completion meanwhile. Run one after the other, dev-data could not start until dev-backend
/// had finished, which it cannot (its call hangs, and the attempt timeout is far beyond the wait).
#[tokio::test]
async fn delegate_parallel_runs_children_concurrently() {
    let script = parallel_script(vec![Step::fault(Fault::Hang)], vec![Step::text("B-DONE")]);
    let (llm, org) = TestOrg::scripted(script).start().await;
    let mut options = TestOrg::options(true);
    options.attempt_timeout = Duration::from_secs(600);
    let engine = org.engine(options).await;
    let run = engine.send(None, "parallel please").await.unwrap();
    let root = run.task;
    let state_of = async |agent: &str| task_of(&engine, root, agent).await.map(|t| t.state);
    // The store is read asynchronously, so the wait polls here (within the same deadline).
    let deadline = tokio::time::Instant::now() + WAIT;
    while state_of("dev-data").await != Some(TaskState::Completed) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for dev-data to complete while dev-backend's call hangs"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // dev-backend is still at its first (hanging) call: dev-data ran while it was working.
    assert_eq!(llm.requests_for(&marker("dev-backend")).len(), 1);
    assert_eq!(state_of("dev-backend").await, Some(TaskState::Executing));
    // Cancelling ends the four still running (CEO, VP, lead, dev-backend); dev-data had finished.
    assert_eq!(engine.cancel(root).await.unwrap().len(), 4);
    assert_eq!(finish(run).await.state, TaskState::Cancelled);
    stop(&engine).await;
}

#[tokio::test]
async fn long_child_results_reach_the_parent_summarised() {
    let long = "detail ".repeat(200); // ~350 tokens by the engine's estimate
    let script = Script::new()
        .agent(
            marker("lead-backend"),
            relay("dev-backend", "report", "lead got: "),
        )
        .agent(marker("dev-backend"), vec![Step::text(long.clone())])
        .agent(
            "Agent id: opc-summarizer",
            vec![Step::text("SHORT-SUMMARY")],
        )
        .agent(marker("ceo"), relay("vp-eng", "go", ""))
        .agent(marker("vp-eng"), relay("lead-backend", "go", ""));
    let builder = TestOrg::scripted(script)
        .wire(Wire::OpenAi)
        .execution(Execution {
            compression_threshold: 100,
            ..Execution::default()
        });
    let (llm, _org, engine) = start(builder, false).await;
    let (root, outcome) = ask(&engine, "go").await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    // The lead's second request has the summary, never the original.
    let lead = llm.requests_for(&marker("lead-backend"));
    let second = lead[1].body.to_string();
    assert!(second.contains("SHORT-SUMMARY"));
    assert!(
        !second.contains("detail detail"),
        "the lead saw the raw report"
    );
    // The summariser got the original, with the fast model.
    let summarizer = llm.requests_for("Agent id: opc-summarizer");
    assert_eq!(summarizer.len(), 1);
    assert!(summarizer[0].body.to_string().contains("detail detail"));
    assert_eq!(summarizer[0].body["model"], "test-fast");
    // The original stays in the task record, the summary next to it; the call is in the ledger.
    let dev = task_of(&engine, root, "dev-backend").await.unwrap();
    assert_eq!(dev.output.as_deref(), Some(long.as_str()));
    assert!(dev.summary.as_deref().unwrap().contains("SHORT-SUMMARY"));
    let calls = engine.store().calls(dev.id).await.unwrap();
    assert_eq!(calls.iter().filter(|c| c.agent == "summarizer").count(), 1);
    stop(&engine).await;
}

#[tokio::test]
async fn delegation_outside_direct_children_is_a_tool_error_and_creates_no_task() {
    let script = Script::new()
        .agent(
            marker("vp-eng"),
            vec![
                // grandchild, sibling, parent, unknown, self; then malformed arguments; then a bad
                // parallel batch (one bad target → nothing runs).
                Step::tools([
                    ("delegate", json!({"agent": "dev-backend", "task": "x"})),
                    ("delegate", json!({"agent": "vp-ops", "task": "x"})),
                    ("delegate", json!({"agent": "ceo", "task": "x"})),
                    ("delegate", json!({"agent": "nobody", "task": "x"})),
                ]),
                Step::tools([
                    ("delegate", json!({"agent": "lead-backend"})),
                    ("delegate", json!({"agent": "lead-backend", "task": "x", "priority": 1})),
                    ("escalate", json!({"type": "panic", "reason": "x"})),
                    ("no_such_tool", json!({})),
                ]),
                Step::tool(
                    "delegate_parallel",
                    json!({"tasks": [{"agent": "lead-backend", "task": "ok"}, {"agent": "support", "task": "no"}]}),
                ),
                Step::text("VP gave up"),
            ],
        )
        .agent(
            marker("ceo"),
            relay("vp-eng", "go", ""),
        );
    let (llm, _org, engine) = start(TestOrg::scripted(script), false).await;
    let (root, outcome) = ask(&engine, "go").await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    assert_eq!(outcome.text, "VP gave up");
    // No task beyond CEO → VP.
    let agents: Vec<String> = tree(&engine, root)
        .await
        .into_iter()
        .map(|t| t.agent)
        .collect();
    assert_eq!(agents, ["ceo", "vp-eng"]);

    let vp = llm.requests_for(&marker("vp-eng"));
    let results = |i: usize| -> Vec<serde_json::Value> {
        vp[i].body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_array()
            .unwrap()
            .clone()
    };
    let first = results(1);
    assert_eq!(first.len(), 4);
    for (block, needle) in first.iter().zip([
        "`dev-backend`: that agent is below your direct subordinates",
        "`vp-ops`: that agent is not in your team",
        "`ceo`: that agent is above you",
        "`nobody`: there is no agent with that id",
    ]) {
        assert_eq!(block["type"], "tool_result");
        assert_eq!(block["is_error"], true);
        let text = block["content"].as_str().unwrap();
        assert!(text.contains(needle), "{text}");
        assert!(text.contains("You can delegate to: lead-backend"), "{text}");
    }
    let second = results(2);
    for (block, needle) in second.iter().zip([
        "missing field `task`",
        "unknown field `priority`",
        "unknown variant `panic`",
        "unknown tool `no_such_tool`",
    ]) {
        assert_eq!(block["is_error"], true);
        let text = block["content"].as_str().unwrap();
        assert!(text.contains(needle), "{text}");
    }
    let third = results(3);
    let text = third[0]["content"].as_str().unwrap();
    assert!(text.starts_with("no task was delegated"), "{text}");
    stop(&engine).await;
}

#[tokio::test]
async fn rate_limits_and_cut_streams_are_retried() {
    let script = Script::new().agent(
        marker("ceo"),
        vec![
            Step::status(429, Some("0.05")),
            Step::fault(Fault::Cut),
            Step::text("FINALLY"),
        ],
    );
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let (llm, _org, engine) = start(TestOrg::scripted(script.clone()).wire(wire), true).await;
        let mut events = engine.events().subscribe();
        let (root, outcome) = ask(&engine, "hello").await;
        assert_eq!(
            outcome.state,
            TaskState::Completed,
            "{wire:?}: {}",
            outcome.text
        );
        assert_eq!(outcome.text, "FINALLY");
        assert_eq!(llm.requests().len(), 3);
        let calls = engine.store().calls(root).await.unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].attempts, 3);
        // The cut stream's partial text was withdrawn before the retry.
        let mut restarted = false;
        while let Ok(event) = events.try_recv() {
            restarted |= matches!(event, Event::StreamRestarted { task } if task == root);
        }
        assert!(restarted, "{wire:?}");
        stop(&engine).await;
    }
}

#[tokio::test]
async fn repeated_server_errors_fail_the_task_with_a_clear_error() {
    let script = ceo_fails_every_attempt(Step::status(500, None));
    let (llm, _org, engine) = start(TestOrg::scripted(script), false).await;
    let (root, outcome) = ask(&engine, "hello").await;
    assert_eq!(outcome.state, TaskState::Failed);
    assert!(
        outcome
            .text
            .starts_with("ceo: the model call failed: llm returned HTTP 500"),
        "{}",
        outcome.text
    );
    assert!(
        outcome.text.contains("gave up after 3 attempts"),
        "{}",
        outcome.text
    );
    assert_eq!(llm.requests().len(), 3);
    let record = engine.store().task(root).await.unwrap();
    assert_eq!(record.state, TaskState::Failed);
    assert_eq!(record.error.as_deref(), Some(outcome.text.as_str()));
    let calls = engine.store().calls(root).await.unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].attempts, 3);
    let error = calls[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("HTTP 500"), "{error:?}");

    // A malformed body is not retried: it fails at once, clearly.
    let script = Script::new().agent(
        marker("ceo"),
        vec![Step::fault(Fault::Malformed), Step::text("never")],
    );
    let (llm, _org, engine) = start(TestOrg::scripted(script).wire(Wire::OpenAi), false).await;
    let (_, outcome) = ask(&engine, "hello").await;
    assert_eq!(outcome.state, TaskState::Failed);
    assert!(
        outcome.text.contains("sent a malformed response"),
        "{}",
        outcome.text
    );
    assert_eq!(llm.requests().len(), 1);
    stop(&engine).await;
}

#[tokio::test]
async fn a_child_timeout_reaches_the_parent_as_a_structured_escalation() {
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-ops", "slow thing", "CEO: "))
        .agent(marker("vp-ops"), relay("support", "very slow", "VP: "))
        .agent(marker("support"), vec![Step::fault(Fault::Hang)]);
    let builder = TestOrg::scripted(script).execution(Execution {
        // Long enough for the managers' own calls on a loaded machine; the leaf hangs for ever.
        task_timeout: "2s",
        ..Execution::default()
    });
    let (llm, _org, engine) = start(builder, false).await;
    let (root, outcome) = ask(&engine, "go").await;
    // The VP's second request carries the escalation; its (scripted) answer reaches the CEO in time.
    let vp = llm.requests_for(&marker("vp-ops"));
    assert_eq!(vp.len(), 2, "{}", outcome.text);
    let result = vp[1].user_texts().last().cloned().unwrap();
    let escalation: serde_json::Value = serde_json::from_str(&result).unwrap();
    assert_eq!(escalation["type"], "timeout");
    assert_eq!(escalation["escalated_by"], "support");
    let reason = escalation["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("2s"), "{reason}");
    let support = task_of(&engine, root, "support").await.unwrap();
    assert_eq!(support.state, TaskState::Escalated);
    stop(&engine).await;
}

#[tokio::test]
async fn escalations_travel_up_one_level_at_a_time() {
    let script = Script::new()
        .agent(
            marker("ceo"),
            delegate_only("vp-eng", "ship"),
        )
        .agent(
            marker("vp-eng"),
            vec![
                Step::tool("delegate", json!({"agent": "lead-backend", "task": "ship"})),
                // The VP cannot resolve it and passes it on.
                Step::tool(
                    "escalate",
                    json!({"type": "uncertainty", "reason": "lead unsure: {{last_result}}", "partial_result": "half"}),
                ),
            ],
        )
        .agent(
            marker("lead-backend"),
            vec![Step::tool("escalate", json!({"type": "uncertainty", "reason": "which DB?"}))],
        )
;
    let (llm, _org, engine) = start(TestOrg::scripted(script).wire(Wire::OpenAi), true).await;
    let (root, outcome) = ask(&engine, "go").await;
    // The CEO (root) has no escalate tool: it gets the VP's escalation as its tool result and answers.
    let ceo = llm.requests_for(&marker("ceo"));
    let result: serde_json::Value =
        serde_json::from_str(ceo[1].user_texts().last().unwrap()).unwrap();
    assert_eq!(result["escalated_by"], "vp-eng");
    assert_eq!(result["type"], "uncertainty");
    assert!(result["reason"].as_str().unwrap().contains("which DB?"));
    assert_eq!(outcome.state, TaskState::Completed);
    let states: Vec<(String, TaskState)> = tree(&engine, root)
        .await
        .into_iter()
        .map(|t| (t.agent, t.state))
        .collect();
    assert_eq!(
        states,
        [
            ("ceo".to_string(), TaskState::Completed),
            ("vp-eng".to_string(), TaskState::Escalated),
            ("lead-backend".to_string(), TaskState::Escalated)
        ]
    );
    stop(&engine).await;
}

async fn next_approval(events: &mut tokio::sync::broadcast::Receiver<Event>) -> (i64, Vec<String>) {
    next_event(events, WAIT, "an approval request", |event| match event {
        Event::ApprovalRequested { approval, path, .. } => Some((approval, path)),
        _ => None,
    })
    .await
}

/// Send the approval chain's request to `engine` and wait until Support asks for the approval: the
/// run, the approval, and the path of agents to it.
async fn refund_until_approval(engine: &Engine) -> (RootRun, i64, Vec<String>) {
    let mut events = engine.events().subscribe();
    let run = engine.send(None, "please refund").await.unwrap();
    let (approval, path) = next_approval(&mut events).await;
    (run, approval, path)
}

/// A new engine on `org`'s database after the last one stopped cleanly: it found no task
/// interrupted.
async fn restart(org: &TestOrg, streaming: bool) -> Engine {
    let engine = org.engine(TestOrg::options(streaming)).await;
    assert!(
        engine.recovery().interrupted.is_empty(),
        "{:?}",
        engine.recovery()
    );
    engine
}

/// Wait until `agent`'s session has started.
async fn started(events: &mut tokio::sync::broadcast::Receiver<Event>, agent: &str) {
    next_event(events, WAIT, &format!("{agent} to start"), |event| {
        matches!(event, Event::AgentStarted { agent: a, .. } if a == agent).then_some(())
    })
    .await
}

#[tokio::test]
async fn approvals_survive_a_restart_and_are_decided_once() {
    let (llm, org) = TestOrg::scripted(approval_chain()).start().await;

    let first = org.engine(TestOrg::options(true)).await;
    let (run, approval, path) = refund_until_approval(&first).await;
    let root = run.task;
    assert_eq!(path, ["ceo", "vp-ops", "support"]);
    let pending = first.pending_approvals().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].summary, "Refund $120 for order 7");
    let states: Vec<TaskState> = tree(&first, root).await.iter().map(|t| t.state).collect();
    assert_eq!(
        states,
        [
            TaskState::Delegated,
            TaskState::Delegated,
            TaskState::AwaitingApproval
        ]
    );
    // The process goes away with the approval pending.
    stop(&first).await;
    drop(run);
    drop(first);

    let second = restart(&org, true).await;
    assert_eq!(second.recovery().pending_approvals.len(), 1);
    let decided = second.decide(approval, "approve", "U-alice").await.unwrap();
    assert!(
        matches!(decided, Decided::Recorded(ref a) if a.state == ApprovalState::Approved),
        "{decided:?}"
    );
    let outcome = finish_root(&second, root).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    assert_eq!(outcome.text, "CEO: VP: SUPPORT: approved by U-alice");
    // A second decision is refused and changes nothing.
    let again = second.decide(approval, "reject", "U-bob").await.unwrap();
    assert!(
        matches!(again, Decided::AlreadyDecided(ref a) if a.decided_by.as_deref() == Some("U-alice"))
    );
    // A decision that is not an option is an error that names the options.
    let error = second.decide(approval, "maybe", "U-bob").await.unwrap_err();
    assert!(
        matches!(
            &error,
            EngineError::BadDecision { approval: a, given, options }
                if *a == approval && given == "maybe" && options.iter().any(|o| o == "approve")
        ),
        "{error:?}"
    );
    // So is an approval that does not exist.
    assert!(
        matches!(
            second.decide(approval + 1000, "approve", "U-bob").await,
            Err(EngineError::NoApproval(id)) if id == approval + 1000
        ),
        "an unknown approval id is refused as such"
    );
    // Nothing ran twice: one support session start, one approval request to the model.
    assert_eq!(llm.requests_for(&marker("support")).len(), 2);
    assert_eq!(llm.requests_for(&marker("ceo")).len(), 2);
    stop(&second).await;
}

#[tokio::test]
async fn undecided_approvals_are_rejected_at_the_timeout() {
    let builder = TestOrg::scripted(approval_chain())
        .wire(Wire::OpenAi)
        .execution(Execution {
            approval_timeout: "3s",
            // The deadline is paused while the human decides: this must not escalate, although it is
            // shorter than the approval's. (Long enough for the calls before the approval on a loaded
            // machine: the order of the two timeouts is the point, not their length.)
            task_timeout: "2s",
            ..Execution::default()
        });
    let (_llm, _org, engine) = start(builder, false).await;
    let (run, approval, _) = refund_until_approval(&engine).await;
    let outcome = finish(run).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    assert_eq!(
        outcome.text,
        "CEO: VP: SUPPORT: rejected: no decision was made before the approval timed out"
    );
    let record = engine.store().approval(approval).await.unwrap().unwrap();
    assert_eq!(record.state, ApprovalState::Rejected);
    assert_eq!(record.decided_by.as_deref(), Some("timeout"));
    // Deciding after the timeout is refused.
    assert!(matches!(
        engine.decide(approval, "approve", "U-late").await.unwrap(),
        Decided::AlreadyDecided(_)
    ));
    stop(&engine).await;
}

#[tokio::test]
async fn cancelling_a_root_cancels_its_whole_subtree() {
    let script = Script::new()
        .agent(marker("ceo"), delegate_only("vp-eng", "go"))
        .agent(marker("vp-eng"), delegate_only("lead-backend", "go"))
        .agent(marker("lead-backend"), delegate_only("dev-backend", "go"))
        .agent(marker("dev-backend"), vec![Step::fault(Fault::Hang)]);
    let (_llm, _org, engine) = start(TestOrg::scripted(script), true).await;
    let mut events = engine.events().subscribe();
    let run = engine.send(None, "go").await.unwrap();
    let root = run.task;
    // Wait until the leaf is running.
    started(&mut events, "dev-backend").await;
    let cancelled = engine.cancel(root).await.unwrap();
    assert_eq!(cancelled.len(), 4);
    let outcome = finish(run).await;
    assert_eq!(outcome.state, TaskState::Cancelled);
    for task in tree(&engine, root).await {
        assert_eq!(task.state, TaskState::Cancelled, "{}", task.agent);
        assert!(task.finished_at.is_some());
    }
    stop(&engine).await;
}

#[tokio::test]
async fn follow_ups_continue_the_root_session_and_crashes_are_reported() {
    let script = Script::new().agent(
        marker("ceo"),
        vec![Step::text("first answer"), Step::text("second answer")],
    );
    let (llm, _org, engine) = start(TestOrg::scripted(script), false).await;
    let (_, first) = ask(&engine, "question one").await;
    assert_eq!(first.text, "first answer");
    let second = finish(
        engine
            .send(Some(&first.conversation), "question two")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(second.text, "second answer");
    assert_eq!(second.conversation, first.conversation);
    let requests = llm.requests_for(&marker("ceo"));
    let body = &requests[1].body["messages"];
    assert_eq!(body[0]["content"][0]["text"], "question one");
    assert_eq!(body[1]["content"][0]["text"], "first answer");
    assert_eq!(body[2]["content"][0]["text"], "question two");
    stop(&engine).await;

    // A task left EXECUTING by a crash is marked FAILED on startup, and its conversation is told.
    let hang = Script::new().agent(marker("ceo"), vec![Step::fault(Fault::Hang)]);
    let (llm, org) = TestOrg::scripted(hang).start().await;
    let engine = org.engine(TestOrg::options(false)).await;
    let mut events = engine.events().subscribe();
    let run = engine.send(None, "will crash").await.unwrap();
    let (root, conversation) = (run.task, run.conversation.clone());
    started(&mut events, "ceo").await;
    wait_until(WAIT, "the CEO's model call to reach the server", || {
        !llm.requests().is_empty()
    })
    .await;
    stop(&engine).await;
    drop(engine);
    let engine = org.engine(TestOrg::options(false)).await;
    assert_eq!(
        engine.recovery().interrupted,
        vec![(root, conversation.clone(), true)]
    );
    let record = engine.store().task(root).await.unwrap();
    assert_eq!(record.state, TaskState::Failed);
    assert!(record.error.unwrap().starts_with("interrupted"));
    assert_eq!(
        engine.store().notices(&conversation).await.unwrap().len(),
        1
    );
    stop(&engine).await;
}

#[tokio::test]
async fn a_root_escalation_is_shown_to_the_human() {
    let script = Script::new().agent(
        marker("ceo"),
        vec![Step::tool(
            "escalate",
            json!({"type": "approval_needed", "reason": "budget above my limit", "partial_result": "draft plan"}),
        )],
    );
    let (_llm, _org, engine) = start(TestOrg::scripted(script), false).await;
    let (_, outcome) = ask(&engine, "spend $1M").await;
    assert_eq!(outcome.state, TaskState::Escalated);
    assert_eq!(
        outcome.text,
        "Escalated by ceo (approval_needed): budget above my limit\nPartial result: draft plan"
    );
    assert_eq!(outcome.escalation.unwrap().reason, "budget above my limit");
    stop(&engine).await;
}

#[tokio::test]
async fn a_session_that_never_answers_fails_at_the_turn_limit() {
    // The CEO keeps delegating (the last step repeats), so it never gives a final answer.
    let script = Script::new()
        .agent(
            marker("ceo"),
            vec![Step::tool(
                "delegate",
                json!({"agent": "vp-ops", "task": "again"}),
            )],
        )
        .agent(marker("vp-ops"), vec![Step::text("done")]);
    let (llm, _org, engine) = start(TestOrg::scripted(script).wire(Wire::OpenAi), false).await;
    let (_, outcome) = ask(&engine, "loop").await;
    assert_eq!(outcome.state, TaskState::Failed);
    assert_eq!(
        outcome.text,
        "ceo reached the limit of 10 model turns without a final answer"
    );
    assert_eq!(llm.requests_for(&marker("ceo")).len(), 10);
    stop(&engine).await;
}

#[tokio::test]
async fn delegating_and_asking_for_approval_in_one_turn_works() {
    let script = Script::new()
        .agent(marker("ceo"), relay("vp-ops", "refund", "CEO: "))
        .agent(
            marker("vp-ops"),
            vec![
                Step::tools([
                    (
                        "delegate",
                        json!({"agent": "support", "task": "prepare the refund"}),
                    ),
                    ("request_approval", json!({"summary": "Refund $120?"})),
                ]),
                Step::text("VP done"),
            ],
        )
        .agent(
            marker("support"),
            vec![Step::text("prepared").with_delay_ms(100)],
        );
    let (llm, _org, engine) = start(TestOrg::scripted(script), false).await;
    let mut events = engine.events().subscribe();
    let run = engine.send(None, "go").await.unwrap();
    let (approval, _) = next_approval(&mut events).await;
    engine.decide(approval, "approve", "U-1").await.unwrap();
    let outcome = finish(run).await;
    assert_eq!(outcome.state, TaskState::Completed, "{}", outcome.text);
    assert_eq!(outcome.text, "CEO: VP done");
    let vp = llm.requests_for(&marker("vp-ops"));
    assert_eq!(
        vp[1].user_texts()[1..],
        ["prepared".to_string(), "approved by U-1".to_string()]
    );
    stop(&engine).await;
}

#[tokio::test]
async fn an_approval_that_expires_while_stopped_is_rejected_on_restart() {
    let (_llm, org) = TestOrg::scripted(approval_chain())
        .execution(Execution {
            // Long enough that the first engine stops well before it (checked below), short enough
            // to wait out.
            approval_timeout: "2s",
            ..Execution::default()
        })
        .start()
        .await;
    let first = org.engine(TestOrg::options(false)).await;
    let (run, approval, _) = refund_until_approval(&first).await;
    let root = run.task;
    stop(&first).await;
    drop((run, first));
    // It expires while nothing runs: still pending in the database, then past its deadline.
    let store = opc_agents::SqliteStore::open(&org.database()).unwrap();
    let record = store.approval(approval).await.unwrap().unwrap();
    assert_eq!(
        record.state,
        ApprovalState::Pending,
        "the approval must still be pending when the first engine has stopped"
    );
    wait_until(WAIT, "the approval's deadline to pass", || {
        opc_agents::store::now_ms() > record.expires_at
    })
    .await;
    drop(store);

    let second = restart(&org, false).await;
    assert_eq!(second.recovery().expired_approvals.len(), 1);
    assert_eq!(second.recovery().suspended_roots, vec![root]);
    let outcome = finish_root(&second, root).await;
    assert_eq!(
        outcome.text,
        "CEO: VP: SUPPORT: rejected: no decision was made before the approval timed out"
    );
    stop(&second).await;
}

#[tokio::test]
async fn a_suspended_tree_can_be_cancelled_after_a_restart_and_one_engine_owns_a_database() {
    let (llm, org) = TestOrg::scripted(approval_chain())
        .wire(Wire::OpenAi)
        .start()
        .await;
    let first = org.engine(TestOrg::options(true)).await;
    let (run, approval, _) = refund_until_approval(&first).await;
    let root = run.task;

    // A second engine on the same database is refused while the first holds it.
    let store = opc_agents::SqliteStore::open(&org.database()).unwrap();
    let error = opc_agents::Engine::from_config(
        &org.loaded,
        std::sync::Arc::new(store),
        std::sync::Arc::new(opc_agents::context::NoMemory),
        TestOrg::options(true),
        |_| Some(KEY.to_string()),
    )
    .await
    .err()
    .expect("second engine refused");
    assert!(
        matches!(error, EngineError::Store(StoreError::Locked { .. })),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("another OPC process is using"),
        "{error}"
    );

    stop(&first).await;
    drop((run, first));
    let second = org.engine(TestOrg::options(true)).await;
    let mut events = second.events().subscribe();
    let cancelled = second.cancel(root).await.unwrap();
    assert_eq!(cancelled.len(), 3);
    // The rejection is announced, so a chat card can be updated.
    let resolved = next_event(
        &mut events,
        WAIT,
        "the approval's rejection",
        |event| match event {
            Event::ApprovalResolved {
                approval: a,
                by,
                decision,
                ..
            } => Some((a, by, decision)),
            _ => None,
        },
    )
    .await;
    assert_eq!(
        resolved,
        (approval, "cancelled".to_string(), "reject".to_string())
    );
    let outcome = finish_root(&second, root).await;
    assert_eq!(outcome.state, TaskState::Cancelled);
    let record = second.store().approval(approval).await.unwrap().unwrap();
    assert_eq!(record.state, ApprovalState::Rejected);
    assert_eq!(record.decided_by.as_deref(), Some("cancelled"));
    // No model call ran after the cancel.
    assert_eq!(llm.requests_for(&marker("support")).len(), 1);
    stop(&second).await;
}

#[tokio::test]
async fn a_stream_cut_on_every_attempt_fails_cleanly() {
    let script = ceo_fails_every_attempt(Step::fault(Fault::Cut));
    let (_llm, _org, engine) = start(TestOrg::scripted(script).wire(Wire::OpenAi), true).await;
    let (_, outcome) = ask(&engine, "hello").await;
    assert_eq!(outcome.state, TaskState::Failed);
    assert!(
        outcome.text.contains("response stream was cut off")
            && outcome.text.contains("gave up after 3 attempts"),
        "{}",
        outcome.text
    );
    stop(&engine).await;
}
