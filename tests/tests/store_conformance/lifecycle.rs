//! Moving tasks along their lifecycle (begin, transitions, endings, cancellation) and startup
//! recovery: what `store/lifecycle.rs` and `store/recovery.rs` promise, on every backend — including
//! that two writers racing to move one task cannot both win.

use std::time::Duration;

use opc_agents::llm::{Content, Message, Role};
use opc_agents::store::{ApprovalState, Ending, JobKind, Store, StoreError, TaskId, TaskState};

use super::harness::{child, root};
use crate::conformance;

/// Walk `id` from CREATED to EXECUTING.
async fn executing(s: &dyn Store, id: TaskId) {
    s.transition(id, TaskState::Assigned).await.unwrap();
    s.transition(id, TaskState::Executing).await.unwrap();
}

/// Ask for an approval on task `id`'s behalf (tool call `tool`), open for `timeout`; its id.
async fn ask(s: &dyn Store, id: TaskId, tool: &str, timeout: Duration) -> i64 {
    let task = s.task(id).await.unwrap();
    s.request_approval(
        &task,
        tool,
        "ship?",
        &["approve".into(), "reject".into()],
        timeout,
    )
    .await
    .unwrap()
    .0
    .id
}

conformance! {
    /// Transitions follow the lifecycle; completing goes through RESULT_PROPAGATING; a second ending
    /// is ignored and the first kept.
    async fn lifecycle_transitions_are_checked(b: &Backend) {
        let s = &*b.store;
        let id = root(s, "c", "plan").await;
        assert_eq!(s.transition(id, TaskState::Assigned).await.unwrap(), TaskState::Created, "{}", b.name);
        let refused = s.transition(id, TaskState::Completed).await;
        assert!(
            matches!(refused, Err(StoreError::BadTransition { task, from: "ASSIGNED", to: "COMPLETED" }) if task == id),
            "{}: {refused:?}", b.name
        );
        s.transition(id, TaskState::Executing).await.unwrap();
        s.transition(id, TaskState::ResultPropagating).await.unwrap();
        let ended = s.finish(id, Ending::Completed { output: "done", summary: None }).await.unwrap();
        assert!(ended, "{}", b.name);
        // A second ending is ignored.
        assert!(!s.finish(id, Ending::Failed("late")).await.unwrap(), "{}", b.name);
        let task = s.task(id).await.unwrap();
        assert_eq!(task.state, TaskState::Completed, "{}", b.name);
        assert_eq!(task.output.as_deref(), Some("done"), "{}", b.name);
        assert_eq!(task.error, None, "{}", b.name);
        assert!(task.finished_at.is_some(), "{}", b.name);
    }
}

conformance! {
    /// Same-state is a no-op answering the state; an ended task moves nowhere; a missing task is an
    /// error; a refused `transition_and_save` saves nothing.
    async fn refused_transitions_change_nothing(b: &Backend) {
        let s = &*b.store;
        let id = root(s, "c", "plan").await;
        executing(s, id).await;
        assert_eq!(s.transition(id, TaskState::Executing).await.unwrap(), TaskState::Executing, "{}", b.name);
        assert_eq!(s.transition(id, TaskState::Delegated).await.unwrap(), TaskState::Executing, "{}", b.name);
        assert_eq!(s.transition(id, TaskState::AwaitingApproval).await.unwrap(), TaskState::Delegated, "{}", b.name);
        assert_eq!(s.transition(id, TaskState::Executing).await.unwrap(), TaskState::AwaitingApproval, "{}", b.name);
        assert_eq!(s.transition(id, TaskState::Failed).await.unwrap(), TaskState::Executing, "{}", b.name);
        for next in [TaskState::Executing, TaskState::Cancelled, TaskState::Escalated] {
            let refused = s.transition(id, next).await;
            assert!(
                matches!(refused, Err(StoreError::BadTransition { from: "FAILED", .. })),
                "{}: FAILED → {next:?}: {refused:?}", b.name
            );
        }
        let history = vec![Message::user("plan"), Message::user("tool results")];
        let refused = s.transition_and_save(id, TaskState::Executing, &history).await;
        assert!(matches!(refused, Err(StoreError::BadTransition { .. })), "{}: {refused:?}", b.name);
        assert_eq!(s.messages(id).await.unwrap(), vec![Message::user("plan")], "{}", b.name);
        assert_eq!(s.task(id).await.unwrap().state, TaskState::Failed, "{}", b.name);
        let missing = s.transition(id + 1000, TaskState::Assigned).await;
        assert!(matches!(missing, Err(StoreError::NoTask(t)) if t == id + 1000), "{}: {missing:?}", b.name);

        // An allowed one saves the history with the move.
        let other = root(s, "d", "other").await;
        s.transition(other, TaskState::Assigned).await.unwrap();
        let previous = s.transition_and_save(other, TaskState::Executing, &history).await.unwrap();
        assert_eq!(previous, TaskState::Assigned, "{}", b.name);
        assert_eq!(s.messages(other).await.unwrap(), history, "{}", b.name);
    }
}

conformance! {
    /// `begin` assigns a new task, and makes it EXECUTING at once when a model turn is next (its
    /// history ends with a user message); a task already under way keeps its state.
    async fn begin_assigns_or_executes(b: &Backend) {
        let s = &*b.store;
        // A root's history ends with the request: a turn is next.
        let r = root(s, "c", "plan").await;
        let (task, messages) = s.begin(r).await.unwrap();
        assert_eq!(task.state, TaskState::Executing, "{}", b.name);
        assert_eq!(messages, vec![Message::user("plan")], "{}", b.name);
        assert_eq!(s.task(r).await.unwrap().state, TaskState::Executing, "{}", b.name);
        // A child with no history yet: assigned, and still assigned when begun again.
        let c = child(s, r, "c", "vp", "t1").await;
        let (task, messages) = s.begin(c).await.unwrap();
        assert_eq!((task.state, messages.len()), (TaskState::Assigned, 0), "{}", b.name);
        let (task, _) = s.begin(c).await.unwrap();
        assert_eq!(task.state, TaskState::Assigned, "{}", b.name);
        // Once a turn is next, an assigned task executes.
        s.save_messages(c, &[Message::user("do the part")]).await.unwrap();
        assert_eq!(s.begin(c).await.unwrap().0.state, TaskState::Executing, "{}", b.name);
        // A task waiting on its children, whose last message is the model's, stays as it is.
        let said = Message { role: Role::Assistant, content: vec![Content::text("delegating")] };
        s.transition(c, TaskState::Delegated).await.unwrap();
        s.save_messages(c, &[Message::user("do the part"), said.clone()]).await.unwrap();
        let (task, messages) = s.begin(c).await.unwrap();
        assert_eq!(task.state, TaskState::Delegated, "{}", b.name);
        assert_eq!(messages.last(), Some(&said), "{}", b.name);
        let missing = s.begin(r + 1000).await;
        assert!(matches!(missing, Err(StoreError::NoTask(_))), "{}: {missing:?}", b.name);
    }
}

conformance! {
    /// Each ending writes its own columns: an output (and summary), an error, an escalation, a
    /// cancellation reason. Completing a task that never executed is refused.
    async fn finish_records_each_ending(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan").await;
        executing(s, r).await;
        let failed = child(s, r, "c", "vp", "t1").await;
        let escalated = child(s, r, "c", "cto", "t2").await;
        let cancelled = child(s, r, "c", "cfo", "t3").await;
        let done = child(s, r, "c", "coo", "t4").await;

        // Completing straight from CREATED skips the lifecycle: refused, nothing written.
        let refused = s.finish(done, Ending::Completed { output: "x", summary: None }).await;
        assert!(
            matches!(refused, Err(StoreError::BadTransition { from: "CREATED", to: "COMPLETED", .. })),
            "{}: {refused:?}", b.name
        );
        assert_eq!(s.task(done).await.unwrap().output, None, "{}", b.name);

        assert!(s.finish(failed, Ending::Failed("model unreachable")).await.unwrap(), "{}", b.name);
        let json = r#"{"reason":"over budget"}"#;
        assert!(s.finish(escalated, Ending::Escalated(json)).await.unwrap(), "{}", b.name);
        assert!(s.finish(cancelled, Ending::Cancelled("stopped by alice")).await.unwrap(), "{}", b.name);
        // From EXECUTING, completing passes through RESULT_PROPAGATING implicitly.
        executing(s, done).await;
        let ended = s.finish(done, Ending::Completed { output: "the part", summary: Some("part") }).await;
        assert!(ended.unwrap(), "{}", b.name);

        let t = s.task(failed).await.unwrap();
        assert_eq!((t.state, t.error.as_deref(), t.output), (TaskState::Failed, Some("model unreachable"), None), "{}", b.name);
        let t = s.task(escalated).await.unwrap();
        assert_eq!((t.state, t.escalation.as_deref(), t.error), (TaskState::Escalated, Some(json), None), "{}", b.name);
        let t = s.task(cancelled).await.unwrap();
        assert_eq!((t.state, t.error.as_deref()), (TaskState::Cancelled, Some("stopped by alice")), "{}", b.name);
        let t = s.task(done).await.unwrap();
        assert_eq!(
            (t.state, t.output.as_deref(), t.summary.as_deref()),
            (TaskState::Completed, Some("the part"), Some("part")),
            "{}", b.name
        );
        for id in [failed, escalated, cancelled, done] {
            let t = s.task(id).await.unwrap();
            assert_eq!(t.finished_at, Some(t.updated_at), "{}: task {id}", b.name);
        }
        // An answer and an escalation are written to recall memory (besides each task's
        // instructions); a failure and a cancellation are not.
        let recalled = |id| async move { s.recall_seqs(id, "c").await.unwrap().len() };
        assert_eq!(recalled(done).await, 2, "{}", b.name);
        assert_eq!(recalled(escalated).await, 2, "{}", b.name);
        assert_eq!(recalled(failed).await, 1, "{}", b.name);
        assert_eq!(recalled(cancelled).await, 1, "{}", b.name);
        // A completed child queues no extraction yet: its root's completion does, for the tree's
        // completed tasks.
        assert!(s.memory_jobs(100).await.unwrap().is_empty(), "{}", b.name);
        s.transition(r, TaskState::ResultPropagating).await.unwrap();
        assert!(s.finish(r, Ending::Completed { output: "plan done", summary: None }).await.unwrap(), "{}", b.name);
        let mut extracted: Vec<_> = s
            .memory_jobs(100)
            .await
            .unwrap()
            .into_iter()
            .filter(|j| j.kind == JobKind::Extract)
            .filter_map(|j| j.task)
            .collect();
        extracted.sort();
        assert_eq!(extracted, vec![r, done], "{}", b.name);
    }
}

conformance! {
    /// Cancelling a root reaches its whole live subtree, and the subtree's pending approvals are
    /// rejected on the system's behalf.
    async fn cancel_reaches_the_whole_subtree_and_rejects_its_approvals(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan").await;
        let c = child(s, r, "c", "vp", "t1").await;
        let g = child(s, c, "c", "dev", "t2").await;
        let approval = ask(s, g, "t3", Duration::from_secs(60)).await;
        let cancelled = s.cancel_subtree(r, "cancelled by user").await.unwrap();
        assert_eq!(cancelled, vec![r, c, g], "{}", b.name);
        let approval = s.approval(approval).await.unwrap().unwrap();
        assert_eq!(approval.state, ApprovalState::Rejected, "{}", b.name);
        assert_eq!(approval.decided_by.as_deref(), Some("cancelled"), "{}", b.name);
        assert_eq!(approval.decision.as_deref(), Some("reject"), "{}", b.name);
        for id in [r, c, g] {
            let t = s.task(id).await.unwrap();
            assert_eq!((t.state, t.error.as_deref()), (TaskState::Cancelled, Some("cancelled by user")), "{}: {id}", b.name);
            assert!(t.finished_at.is_some(), "{}: {id}", b.name);
        }
        assert!(s.pending_approvals().await.unwrap().is_empty(), "{}", b.name);
        // Nothing is left to cancel; the conversation is free again.
        assert!(s.cancel_subtree(r, "again").await.unwrap().is_empty(), "{}", b.name);
        assert_eq!(s.task(r).await.unwrap().error.as_deref(), Some("cancelled by user"), "{}", b.name);
        root(s, "c", "next request").await;
    }
}

conformance! {
    /// Cancelling below a task spares the task itself and every task that already ended, but reaches
    /// a live task under an ended one; a missing task is an error.
    async fn cancel_descendants_spares_the_task_and_ended_ones(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "plan").await;
        executing(s, r).await;
        let ended = child(s, r, "c", "vp", "t1").await;
        let orphan = child(s, ended, "c", "dev", "t2").await;
        let live = child(s, r, "c", "cto", "t3").await;
        let other = root(s, "d", "elsewhere").await;
        s.finish(ended, Ending::Failed("broke")).await.unwrap();
        let cancelled = s.cancel_descendants(r, "the parent moved on").await.unwrap();
        assert_eq!(cancelled, vec![orphan, live], "{}", b.name);
        assert_eq!(s.task(r).await.unwrap().state, TaskState::Executing, "{}", b.name);
        let t = s.task(ended).await.unwrap();
        assert_eq!((t.state, t.error.as_deref()), (TaskState::Failed, Some("broke")), "{}", b.name);
        for id in [orphan, live] {
            let t = s.task(id).await.unwrap();
            assert_eq!((t.state, t.error.as_deref()), (TaskState::Cancelled, Some("the parent moved on")), "{}: {id}", b.name);
        }
        assert_eq!(s.task(other).await.unwrap().state, TaskState::Created, "{}", b.name);
        // Cancelling a subtree from the middle leaves what is above it.
        let mid = child(s, r, "c", "cfo", "t4").await;
        let leaf = child(s, mid, "c", "dev", "t5").await;
        assert_eq!(s.cancel_subtree(mid, "no longer needed").await.unwrap(), vec![mid, leaf], "{}", b.name);
        assert_eq!(s.task(r).await.unwrap().state, TaskState::Executing, "{}", b.name);
        for missing in [s.cancel_subtree(r + 1000, "x").await, s.cancel_descendants(r + 1000, "x").await] {
            assert!(matches!(missing, Err(StoreError::NoTask(_))), "{}: {missing:?}", b.name);
        }
    }
}

conformance! {
    /// Many writers racing to move one EXECUTING task to two different endings: exactly one moves
    /// it (the others find it ended: refused, or a same-state no-op), and the task holds the
    /// winner's ending. Both through `transition` and through `finish`.
    async fn racing_endings_of_one_task_win_once(b: &Backend) {
        for round in 0..4 {
            let id = root(&*b.store, &format!("race-{round}"), "plan").await;
            executing(&*b.store, id).await;
            let mut racers = Vec::new();
            for i in 0..12 {
                let s = b.store.clone();
                let next = if i % 2 == 0 { TaskState::Failed } else { TaskState::Cancelled };
                racers.push(tokio::spawn(async move { (next, s.transition(id, next).await) }));
            }
            let mut winners = Vec::new();
            let mut results = Vec::new();
            for r in racers {
                let (next, result) = r.await.unwrap();
                match result {
                    Ok(TaskState::Executing) => winners.push(next),
                    other => results.push((next, other)),
                }
            }
            assert_eq!(winners.len(), 1, "{}: round {round}: winners {winners:?}", b.name);
            let state = b.store.task(id).await.unwrap().state;
            assert_eq!(state, winners[0], "{}: round {round}", b.name);
            for (next, result) in results {
                match result {
                    Ok(same) => assert!(same == next && same == state, "{}: {next:?} → {same:?}", b.name),
                    Err(StoreError::BadTransition { task, .. }) => assert_eq!(task, id, "{}", b.name),
                    Err(e) => panic!("{}: round {round}: {e}", b.name),
                }
            }
            // The other conversation's root is free to start: the task ended.
            root(&*b.store, &format!("race-{round}"), "next").await;
        }
        for round in 0..4 {
            let id = root(&*b.store, &format!("finish-{round}"), "plan").await;
            executing(&*b.store, id).await;
            let mut racers = Vec::new();
            for i in 0..12 {
                let s = b.store.clone();
                racers.push(tokio::spawn(async move {
                    let (state, ending) = if i % 2 == 0 {
                        (TaskState::Failed, Ending::Failed("racer"))
                    } else {
                        (TaskState::Cancelled, Ending::Cancelled("racer"))
                    };
                    (state, s.finish(id, ending).await)
                }));
            }
            let mut winners = Vec::new();
            for r in racers {
                let (state, result) = r.await.unwrap();
                match result {
                    Ok(true) => winners.push(state),
                    Ok(false) => {}
                    Err(e) => panic!("{}: round {round}: {e}", b.name),
                }
            }
            assert_eq!(winners.len(), 1, "{}: round {round}: winners {winners:?}", b.name);
            assert_eq!(b.store.task(id).await.unwrap().state, winners[0], "{}: round {round}", b.name);
        }
    }
}

conformance! {
    /// A cancel racing a completion of one task in its subtree: the task ends once, either
    /// completed (and then not reported as cancelled) or cancelled.
    async fn cancel_racing_a_completion_ends_the_task_once(b: &Backend) {
        for round in 0..6 {
            let conversation = format!("c-{round}");
            let r = root(&*b.store, &conversation, "plan").await;
            executing(&*b.store, r).await;
            let c = child(&*b.store, r, &conversation, "vp", "t1").await;
            executing(&*b.store, c).await;
            let s = b.store.clone();
            let cancel = tokio::spawn(async move { s.cancel_subtree(r, "stop").await });
            let s = b.store.clone();
            let finish = tokio::spawn(async move { s.finish(c, Ending::Failed("done badly")).await });
            let cancelled = cancel.await.unwrap().unwrap();
            let finished = finish.await.unwrap().unwrap();
            let t = state_and_error(&*b.store, c).await;
            if finished {
                assert_eq!(cancelled, vec![r], "{}: round {round}", b.name);
                assert_eq!(t, (TaskState::Failed, Some("done badly".to_string())), "{}: round {round}", b.name);
            } else {
                assert_eq!(cancelled, vec![r, c], "{}: round {round}", b.name);
                assert_eq!(t, (TaskState::Cancelled, Some("stop".to_string())), "{}: round {round}", b.name);
            }
        }
    }
}

/// A task's state and error.
async fn state_and_error(s: &dyn Store, id: TaskId) -> (TaskState, Option<String>) {
    let t = s.task(id).await.unwrap();
    (t.state, t.error)
}

conformance! {
    /// Recovery fails what a stopped process left running (with a notice to each interrupted root's
    /// conversation), keeps trees suspended on a pending approval, and rejects expired approvals
    /// while keeping their trees for the engine to re-enter.
    async fn recovery_fails_running_tasks_but_keeps_suspended_chains(b: &Backend) {
        let s = &*b.store;
        // Chain 1: root → child awaiting approval. Both stay.
        let r1 = root(s, "c", "plan").await;
        let c1 = child(s, r1, "c", "vp", "t1").await;
        let waiting = ask(s, c1, "t2", Duration::from_secs(60)).await;
        // Chain 2: root executing, with a running child. Both interrupted; one notice.
        let r2 = root(s, "d", "draft").await;
        executing(s, r2).await;
        let c2 = child(s, r2, "d", "cto", "t1").await;
        executing(s, c2).await;
        // Chain 3: root → child whose approval expired while nothing ran. Rejected, tree kept.
        let r3 = root(s, "e", "ship").await;
        let c3 = child(s, r3, "e", "vp", "t1").await;
        executing(s, c3).await;
        s.transition(c3, TaskState::AwaitingApproval).await.unwrap();
        let expired = ask(s, c3, "t2", Duration::ZERO).await;
        // An ended tree is left alone.
        let r4 = root(s, "f", "old").await;
        s.finish(r4, Ending::Failed("long ago")).await.unwrap();

        let recovery = s.recover().await.unwrap();
        assert_eq!(
            recovery.interrupted,
            vec![(r2, "d".to_string(), true), (c2, "d".to_string(), false)],
            "{}", b.name
        );
        assert_eq!(recovery.expired_approvals, vec![expired], "{}", b.name);
        let pending: Vec<_> = recovery.pending_approvals.iter().map(|a| a.id).collect();
        assert_eq!(pending, vec![waiting], "{}", b.name);
        assert_eq!(recovery.suspended_roots, vec![r1, r3], "{}", b.name);

        for id in [r2, c2] {
            let t = s.task(id).await.unwrap();
            assert_eq!(t.state, TaskState::Failed, "{}: {id}", b.name);
            assert!(t.error.unwrap_or_default().starts_with("interrupted"), "{}: {id}", b.name);
        }
        assert_eq!(s.task(r1).await.unwrap().state, TaskState::Created, "{}", b.name);
        assert_eq!(s.task(c1).await.unwrap().state, TaskState::Created, "{}", b.name);
        assert_eq!(s.task(r3).await.unwrap().state, TaskState::Created, "{}", b.name);
        assert_eq!(s.task(c3).await.unwrap().state, TaskState::AwaitingApproval, "{}", b.name);
        assert_eq!(s.task(r4).await.unwrap().error.as_deref(), Some("long ago"), "{}", b.name);
        let a = s.approval(expired).await.unwrap().unwrap();
        assert_eq!((a.state, a.decided_by.as_deref()), (ApprovalState::Rejected, Some("timeout")), "{}", b.name);
        assert_eq!(s.approval(waiting).await.unwrap().unwrap().state, ApprovalState::Pending, "{}", b.name);
        let notices = s.notices("d").await.unwrap();
        assert_eq!(notices.len(), 1, "{}: {notices:?}", b.name);
        assert!(notices[0].contains(&format!("Task {r2} was interrupted")), "{}: {notices:?}", b.name);
        for conversation in ["c", "e", "f"] {
            assert!(s.notices(conversation).await.unwrap().is_empty(), "{}: {conversation}", b.name);
        }

        // A second recovery keeps the tree still waiting on its pending approval. The tree whose
        // approval expired was kept only for the engine to re-enter after the first; not re-entered
        // (no engine ran), it is now left over like any running task, and interrupted. (A later
        // millisecond: recovery tells its own expiries by their decision time.)
        tokio::time::sleep(Duration::from_millis(5)).await;
        let again = s.recover().await.unwrap();
        assert_eq!(
            again.interrupted,
            vec![(r3, "e".to_string(), true), (c3, "e".to_string(), false)],
            "{}", b.name
        );
        assert!(again.expired_approvals.is_empty(), "{}: {again:?}", b.name);
        assert_eq!(again.suspended_roots, vec![r1], "{}", b.name);
        assert_eq!(again.pending_approvals.len(), 1, "{}", b.name);
    }
}
