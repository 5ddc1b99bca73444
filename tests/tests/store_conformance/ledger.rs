//! The ledger: LLM calls and their totals, memory work kept apart, spend, the latest call per
//! model, what the privacy gateway did per task and per UTC day, and a model turn that completes
//! its task (the answer written to recall memory, the tree's extractions queued) in one transaction.

use opc_agents::llm::Message;
use opc_agents::llm::privacy::TypeCounts;
use opc_agents::store::{
    CallPrivacy, CallRecord, Ending, JobKind, StoreError, TaskId, TaskState, Totals, now_ms,
    tokens_text,
};

use super::harness::{child, root};
use crate::conformance;

/// A call of `ceo` on `p/m` for `task`: `tokens` in and out, $0.5 (nothing when its usage is
/// unknown).
fn call(task: TaskId, tokens: u64, usage_unknown: bool) -> CallRecord {
    CallRecord {
        task_id: task,
        agent: "ceo".into(),
        model: "p/m".into(),
        tokens_in: tokens,
        tokens_out: tokens,
        cost_usd: if usage_unknown { 0.0 } else { 0.5 },
        usage_unknown,
        duration_ms: 1,
        attempts: 1,
        tool_calls: vec!["delegate".into()],
        error: None,
        privacy: None,
    }
}

/// A call the privacy gateway handled in `mode`, with the counts of `counts` (JSON by type).
fn private(task: TaskId, mode: &str, counts: &str) -> CallRecord {
    let mut c = call(task, 1, false);
    c.privacy = Some(CallPrivacy {
        mode: mode.into(),
        counts: TypeCounts::from_json(counts),
        routed_to: (mode == "route").then(|| "local/trusted".to_string()),
        blocked: (mode == "blocked").then(|| "EMAIL".to_string()),
    });
    c
}

/// `YYYY-MM-DD` of the UTC day holding `ms` (days from the civil calendar, proleptic Gregorian).
fn utc_date(ms: i64) -> String {
    let z = ms.div_euclid(86_400_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

conformance! {
    /// A call without usage is recorded as unknown and counted, so totals are lower bounds and say
    /// so; a tree's totals include its children's calls.
    async fn calls_without_usage_are_counted_as_unknown_not_as_zero(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "hello").await;
        s.record_call(&call(r, 10, false)).await.unwrap();
        s.record_call(&call(r, 0, true)).await.unwrap();
        let calls = s.calls(r).await.unwrap();
        assert_eq!(calls.iter().map(|c| c.usage_unknown).collect::<Vec<_>>(), [false, true], "{}", b.name);
        assert_eq!(calls[0].tool_calls, ["delegate"], "{}", b.name);
        assert_eq!((calls[0].tokens_in, calls[0].cost_usd, calls[0].attempts), (10, 0.5, 1), "{}", b.name);
        assert_eq!(calls[0].privacy, None, "{}", b.name);
        let task = s.task(r).await.unwrap();
        assert_eq!((task.llm_calls, task.unknown_usage_calls), (2, 1), "{}", b.name);
        assert_eq!((task.tokens_in, task.tokens_out, task.cost_usd), (10, 10, 0.5), "{}", b.name);
        let totals = s.totals(r).await.unwrap();
        assert_eq!(
            totals,
            Totals { tokens_in: 10, tokens_out: 10, cost_usd: 0.5, unknown_usage_calls: 1 },
            "{}",
            b.name
        );
        assert_eq!(
            tokens_text(totals.tokens_in + totals.tokens_out, totals.unknown_usage_calls),
            "≥ 20 (usage unknown for 1 call)",
            "{}",
            b.name
        );
        // A child's calls count in the tree, not in the parent's own row.
        let kid = child(s, r, "c", "vp", "tool-1").await;
        s.record_call(&call(kid, 5, false)).await.unwrap();
        assert_eq!(s.tree_totals(r).await.unwrap(), (15, 15, 1.0), "{}", b.name);
        assert_eq!(s.task(r).await.unwrap().tokens_in, 10, "{}", b.name);
        // No tree, no spend.
        assert_eq!(s.totals(r + 1000).await.unwrap(), Totals::default(), "{}", b.name);
    }
}

conformance! {
    /// Memory work's calls are in the ledger, against their task, but never in its totals; an
    /// agent's memory tokens are summed since a time.
    async fn memory_calls_are_in_the_ledger_but_not_in_the_task_totals(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "hello").await;
        let call = CallRecord {
            task_id: r,
            agent: "ceo".into(),
            model: "p/fast".into(),
            tokens_in: 100,
            tokens_out: 20,
            cost_usd: 0.25,
            usage_unknown: false,
            duration_ms: 3,
            attempts: 1,
            tool_calls: vec!["record_facts".into()],
            error: None,
            privacy: None,
        };
        let id = s.record_memory_call(&call).await.unwrap();
        assert!(id > 0, "{}", b.name);
        let task = s.task(r).await.unwrap();
        assert_eq!((task.tokens_in, task.llm_calls), (0, 0), "{}", b.name);
        assert_eq!(s.totals(r).await.unwrap().tokens_in, 0, "{}", b.name);
        assert!(s.calls(r).await.unwrap().is_empty(), "{}: task calls only", b.name);
        let memory = s.memory_calls(r).await.unwrap();
        assert_eq!(memory.len(), 1, "{}", b.name);
        assert_eq!(memory[0].0, id, "{}", b.name);
        assert_eq!(memory[0].1.tool_calls, ["record_facts"], "{}", b.name);
        assert_eq!((memory[0].1.model.as_str(), memory[0].1.duration_ms), ("p/fast", 3), "{}", b.name);
        let second = s.record_memory_call(&call).await.unwrap();
        assert!(second > id, "{}", b.name);
        let ids: Vec<i64> = s.memory_calls(r).await.unwrap().into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, [id, second], "{}", b.name);
        assert_eq!(s.memory_tokens_since("ceo", 0).await.unwrap(), 240, "{}", b.name);
        assert_eq!(s.memory_tokens_since("vp", 0).await.unwrap(), 0, "{}", b.name);
        assert_eq!(s.memory_tokens_since("ceo", now_ms() + 60_000).await.unwrap(), 0, "{}", b.name);
    }
}

conformance! {
    /// Spend is grouped by agent, model, conversation and work (memory work apart), most expensive
    /// first, and only since the time asked.
    async fn spend_is_grouped_by_agent_model_and_conversation(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "hello").await;
        s.record_call(&call(r, 10, false)).await.unwrap();
        s.record_call(&call(r, 5, false)).await.unwrap();
        let spend = s.spend_since(0).await.unwrap();
        assert_eq!(spend.len(), 1, "{}", b.name);
        assert_eq!((spend[0].calls, spend[0].conversation.as_str()), (2, "c"), "{}", b.name);
        assert_eq!((spend[0].tokens_in, spend[0].tokens_out, spend[0].cost_usd), (15, 15, 1.0), "{}", b.name);
        assert_eq!((spend[0].agent.as_str(), spend[0].model.as_str(), spend[0].work.as_str()), ("ceo", "p/m", "task"), "{}", b.name);
        let mut memory = call(r, 1, false);
        memory.cost_usd = 0.125;
        s.record_memory_call(&memory).await.unwrap();
        let other = root(s, "d", "elsewhere").await;
        let mut pricey = call(other, 7, false);
        pricey.cost_usd = 3.0;
        s.record_call(&pricey).await.unwrap();
        let spend = s.spend_since(0).await.unwrap();
        let rows: Vec<_> = spend.iter().map(|x| (x.conversation.as_str(), x.work.as_str(), x.calls)).collect();
        assert_eq!(rows, [("d", "task", 1), ("c", "task", 2), ("c", "memory", 1)], "{}", b.name);
        assert!(s.spend_since(now_ms() + 60_000).await.unwrap().is_empty(), "{}", b.name);
    }
}

conformance! {
    /// The latest call per model, newest first, among the last `window` calls only.
    async fn the_latest_call_per_model_is_found_within_the_window(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "hello").await;
        let mut failed = call(r, 0, false);
        failed.error = Some("p returned HTTP 401: bad key".into());
        s.record_call(&call(r, 1, false)).await.unwrap();
        s.record_call(&failed).await.unwrap();
        let mut other = call(r, 1, false);
        other.model = "q/m".into();
        s.record_call(&other).await.unwrap();
        let latest = s.latest_calls(100).await.unwrap();
        assert_eq!(
            latest.iter().map(|c| (c.model.as_str(), c.error.as_deref())).collect::<Vec<_>>(),
            [("q/m", None), ("p/m", Some("p returned HTTP 401: bad key"))],
            "{}",
            b.name
        );
        assert!(latest.iter().all(|c| c.at > 0), "{}", b.name);
        // Only the last call is looked at: `p/m` is outside a window of one.
        let latest = s.latest_calls(1).await.unwrap();
        assert_eq!(latest.iter().map(|c| c.model.as_str()).collect::<Vec<_>>(), ["q/m"], "{}", b.name);
        assert!(s.latest_calls(0).await.unwrap().is_empty(), "{}", b.name);
    }
}

conformance! {
    /// What the privacy gateway did, per task of a tree (the most each type carried in one request,
    /// routed and blocked calls counted) and per UTC day (masked values summed), never values.
    async fn privacy_is_counted_per_task_and_per_utc_day(b: &Backend) {
        let s = &*b.store;
        let before = now_ms();
        let r = root(s, "c", "hello").await;
        let kid = child(s, r, "c", "vp", "tool-1").await;
        s.record_call(&private(r, "mask", r#"{"PERSON_NAME": 2, "EMAIL": 1}"#)).await.unwrap();
        s.record_call(&private(r, "mask", r#"{"PERSON_NAME": 1, "EMAIL": 3}"#)).await.unwrap();
        s.record_call(&private(r, "route", "{}")).await.unwrap();
        s.record_call(&private(kid, "blocked", "{}")).await.unwrap();
        s.record_call(&call(kid, 1, false)).await.unwrap();
        let calls = s.calls(r).await.unwrap();
        assert_eq!(calls[0].privacy, private(r, "mask", r#"{"PERSON_NAME": 2, "EMAIL": 1}"#).privacy, "{}", b.name);
        assert_eq!(s.calls(kid).await.unwrap()[0].privacy.as_ref().and_then(|p| p.blocked.as_deref()), Some("EMAIL"), "{}", b.name);

        let by_task = s.privacy_by_task(r).await.unwrap();
        assert_eq!(by_task.len(), 2, "{}: {by_task:?}", b.name);
        let own = &by_task[&r];
        assert_eq!(own.masked, TypeCounts::from_json(r#"{"PERSON_NAME": 2, "EMAIL": 3}"#), "{}", b.name);
        assert_eq!((own.routed, own.blocked), (1, 0), "{}", b.name);
        assert_eq!((by_task[&kid].routed, by_task[&kid].blocked), (0, 1), "{}", b.name);
        assert!(by_task[&kid].masked.is_empty(), "{}", b.name);
        assert!(s.privacy_by_task(r + 1000).await.unwrap().is_empty(), "{}", b.name);

        let days = s.privacy_by_day(0).await.unwrap();
        let after = now_ms();
        assert_eq!(days.len(), 1, "{}: {days:?}", b.name);
        let today = &days[0];
        assert!(
            [utc_date(before), utc_date(after)].contains(&today.day),
            "{}: {} is not today (UTC)",
            b.name,
            today.day
        );
        assert_eq!((today.calls, today.routed, today.blocked), (4, 1, 1), "{}", b.name);
        assert_eq!(
            today.masked.iter().map(|(k, n)| (k.as_str(), *n)).collect::<Vec<_>>(),
            [("EMAIL", 4), ("PERSON_NAME", 3)],
            "{}",
            b.name
        );
        assert!(s.privacy_by_day(after + 60_000).await.unwrap().is_empty(), "{}", b.name);
    }
}

conformance! {
    /// A final turn completes its task in the turn's transaction: the call counted, the history
    /// saved, the output stored, the answer written to recall memory and the root's extraction
    /// queued. A turn on a task that already ended records the call and keeps the ending; one on a
    /// task that may not complete yet is refused whole.
    async fn a_final_turn_completes_its_task_with_its_recall_answer(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan the launch").await;
        // Not executing yet: the turn is refused, and nothing of it is stored.
        let early = s.record_turn(&call(r, 3, false), None, Some("too soon")).await;
        assert!(
            matches!(early, Err(StoreError::BadTransition { task, .. }) if task == r),
            "{}: {early:?}",
            b.name
        );
        assert_eq!(s.task(r).await.unwrap().llm_calls, 0, "{}", b.name);
        assert!(s.calls(r).await.unwrap().is_empty(), "{}", b.name);

        s.begin(r).await.unwrap();
        // A turn that does not end the task: counted and saved, the task goes on.
        let history = vec![Message::user("plan the launch"), Message::user("thinking")];
        assert!(!s.record_turn(&call(r, 2, false), Some(&history), None).await.unwrap(), "{}", b.name);
        assert_eq!(s.messages(r).await.unwrap(), history, "{}", b.name);
        assert_eq!(s.task(r).await.unwrap().state, TaskState::Executing, "{}", b.name);
        let given = s.recall_seqs(r, "c").await.unwrap();
        assert_eq!(given.len(), 1, "{}: the instructions only", b.name);

        let last = vec![Message::user("plan the launch"), Message::user("the plan")];
        let done = s.record_turn(&call(r, 5, false), Some(&last), Some("the plan")).await.unwrap();
        assert!(done, "{}", b.name);
        let task = s.task(r).await.unwrap();
        assert_eq!((task.state, task.output.as_deref()), (TaskState::Completed, Some("the plan")), "{}", b.name);
        assert!(task.finished_at.is_some(), "{}", b.name);
        assert_eq!((task.llm_calls, task.tokens_in), (2, 7), "{}", b.name);
        assert_eq!(s.messages(r).await.unwrap(), last, "{}", b.name);
        let seqs = s.recall_seqs(r, "c").await.unwrap();
        assert_eq!(seqs.len(), 2, "{}: instructions and answer", b.name);
        assert_eq!(seqs[0], given[0], "{}", b.name);
        let jobs = s.memory_jobs(10).await.unwrap();
        assert_eq!(
            jobs.iter().map(|j| (j.kind, j.task)).collect::<Vec<_>>(),
            [(JobKind::Extract, Some(r))],
            "{}",
            b.name
        );

        // Ended already: the call is recorded, the ending and its answer kept.
        let again = s.record_turn(&call(r, 1, false), None, Some("another plan")).await.unwrap();
        assert!(!again, "{}", b.name);
        let task = s.task(r).await.unwrap();
        assert_eq!((task.output.as_deref(), task.llm_calls), (Some("the plan"), 3), "{}", b.name);
        assert_eq!(s.recall_seqs(r, "c").await.unwrap().len(), 2, "{}", b.name);
        assert_eq!(s.memory_jobs(10).await.unwrap().len(), 1, "{}", b.name);

        // A cancelled task keeps its cancellation, with no answer.
        let other = root(s, "d", "second").await;
        s.begin(other).await.unwrap();
        assert!(s.finish(other, Ending::Cancelled("stop")).await.unwrap(), "{}", b.name);
        assert!(!s.record_turn(&call(other, 1, false), None, Some("late")).await.unwrap(), "{}", b.name);
        let task = s.task(other).await.unwrap();
        assert_eq!((task.state, task.output), (TaskState::Cancelled, None), "{}", b.name);
        assert_eq!(s.recall_seqs(other, "d").await.unwrap().len(), 1, "{}", b.name);
        // A missing task is not silently counted.
        assert!(s.record_turn(&call(other + 1000, 1, false), None, Some("x")).await.is_err(), "{}", b.name);
    }
}

conformance! {
    /// Many final turns racing on one task (as two nodes could): every call is counted, the task
    /// completes once, with one answer in recall memory and one extraction queued.
    async fn racing_final_turns_complete_once(b: &Backend) {
        let r = root(&*b.store, "race", "go").await;
        b.store.begin(r).await.unwrap();
        let mut racers = Vec::new();
        for i in 0..8 {
            let s = b.store.clone();
            racers.push(tokio::spawn(async move {
                s.record_turn(&call(r, 1, false), None, Some(&format!("answer {i}"))).await
            }));
        }
        let mut won = 0;
        for racer in racers {
            if racer.await.unwrap().unwrap_or_else(|e| panic!("{}: {e}", b.name)) {
                won += 1;
            }
        }
        assert_eq!(won, 1, "{}", b.name);
        let task = b.store.task(r).await.unwrap();
        assert_eq!(task.state, TaskState::Completed, "{}", b.name);
        assert_eq!((task.llm_calls, task.tokens_in, task.cost_usd), (8, 8, 4.0), "{}", b.name);
        assert_eq!(b.store.calls(r).await.unwrap().len(), 8, "{}", b.name);
        assert_eq!(b.store.recall_seqs(r, "race").await.unwrap().len(), 2, "{}", b.name);
        assert_eq!(b.store.memory_jobs(10).await.unwrap().len(), 1, "{}", b.name);
    }
}

conformance! {
    /// A final turn racing a cancellation: exactly one ending wins, and what is stored agrees with
    /// it (an answer in recall memory only when the turn won).
    async fn a_final_turn_racing_a_cancellation_ends_the_task_once(b: &Backend) {
        for round in 0..6 {
            let conversation = format!("race-{round}");
            let r = root(&*b.store, &conversation, "go").await;
            b.store.begin(r).await.unwrap();
            let s = b.store.clone();
            let turn = tokio::spawn(async move {
                s.record_turn(&call(r, 1, false), None, Some("the answer")).await
            });
            let s = b.store.clone();
            let cancel = tokio::spawn(async move { s.finish(r, Ending::Cancelled("stop")).await });
            let completed = turn.await.unwrap().unwrap_or_else(|e| panic!("{}: {e}", b.name));
            let cancelled = cancel.await.unwrap().unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert!(completed != cancelled, "{}: completed {completed}, cancelled {cancelled}", b.name);
            let task = b.store.task(r).await.unwrap();
            let answers = b.store.recall_seqs(r, &conversation).await.unwrap().len() - 1;
            if completed {
                assert_eq!((task.state, task.output.as_deref(), answers), (TaskState::Completed, Some("the answer"), 1), "{}", b.name);
            } else {
                assert_eq!((task.state, task.output.as_deref(), answers), (TaskState::Cancelled, None, 0), "{}", b.name);
            }
            // The call is counted either way.
            assert_eq!(task.llm_calls, 1, "{}", b.name);
        }
    }
}

conformance! {
    /// A tree's task calls (memory work apart), every task's, in the order recorded, each with the
    /// time it ended — the ledger's row is written when the call returns, so its start is its end
    /// less its duration — and only that tree's.
    async fn a_trees_calls_carry_the_time_they_ended(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "hello").await;
        let kid = child(s, r, "c", "vp", "tool-1").await;
        let other = root(s, "d", "elsewhere").await;
        let before = now_ms();
        let mut first = call(r, 10, false);
        first.duration_ms = 40;
        s.record_call(&first).await.unwrap();
        s.record_call(&call(kid, 5, false)).await.unwrap();
        s.record_call(&call(other, 7, false)).await.unwrap();
        let mut memory = call(kid, 3, false);
        memory.agent = "vp".into();
        s.record_memory_call(&memory).await.unwrap();
        let after = now_ms();
        let calls = s.tree_calls(r).await.unwrap();
        assert_eq!(
            calls.iter().map(|c| (c.call.task_id, c.call.tokens_in)).collect::<Vec<_>>(),
            [(r, 10), (kid, 5)],
            "{}",
            b.name
        );
        for c in &calls {
            assert!((before..=after).contains(&c.ended_at), "{}: {} not in {before}..={after}", b.name, c.ended_at);
        }
        assert!(calls[0].ended_at <= calls[1].ended_at, "{}", b.name);
        assert_eq!(calls[0].started_at(), calls[0].ended_at - 40, "{}", b.name);
        assert!(s.tree_calls(r + 1000).await.unwrap().is_empty(), "{}", b.name);
    }
}
