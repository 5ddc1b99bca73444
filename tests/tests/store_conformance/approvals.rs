//! Human approvals: requested once per tool call, decided at most once — also when deciders race
//! on several connections (as nodes do) — expired ones rejected by the system, the chosen option's
//! outcome stored, and each request and decision recorded once in recall memory. What
//! `store/approvals.rs` promises, on every backend.

use std::time::Duration;

use opc_agents::store::{
    Approval, ApprovalState, Decided, OfferedOption, OptionOutcome, Store, SystemDecider, TaskId,
};

use super::harness::{child, root};
use crate::conformance;

/// A minute: long enough that nothing expires while a test runs.
const MINUTE: Duration = Duration::from_secs(60);

/// Ask for an approval of `summary` on task `id`'s behalf (tool call `tool`) with `options`, open
/// for `timeout`: the approval, and whether it was created now.
async fn ask(
    s: &dyn Store,
    id: TaskId,
    tool: &str,
    summary: &str,
    options: &[OfferedOption],
    timeout: Duration,
) -> (Approval, bool) {
    let task = s.task(id).await.unwrap();
    s.request_approval(&task, tool, summary, options, timeout)
        .await
        .unwrap()
}

/// Plain labels.
fn labels(list: &[&str]) -> Vec<OfferedOption> {
    list.iter().map(|l| OfferedOption::from(*l)).collect()
}

/// How many recall rows task `id` of conversation `c` has.
async fn recalled(s: &dyn Store, id: TaskId) -> usize {
    s.recall_seqs(id, "c").await.unwrap().len()
}

conformance! {
    /// Asking again for one tool call returns the same approval; it is decided once; an expired one
    /// is rejected by the system; an unknown one is not found.
    async fn approvals_are_decided_once_and_expire(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "ship it").await;
        let options = labels(&["approve", "reject"]);
        let (a, created) = ask(s, r, "t1", "ship?", &options, MINUTE).await;
        assert!(created, "{}", b.name);
        assert_eq!((a.state, a.task_id, a.root_id, a.agent.as_str()), (ApprovalState::Pending, r, r, "ceo"), "{}", b.name);
        assert_eq!((a.conversation_id.as_str(), a.tool_use_id.as_str(), a.summary.as_str()), ("c", "t1", "ship?"), "{}", b.name);
        assert!(a.expires_at >= a.created_at + 60_000, "{}: {a:?}", b.name);
        let (again, created) = ask(s, r, "t1", "ship?", &options, MINUTE).await;
        assert_eq!(again.id, a.id, "{}", b.name);
        assert!(!created, "{}", b.name);
        let first = s.decide(a.id, "approve", "u1").await.unwrap();
        assert!(matches!(&first, Decided::Recorded(x) if x.state == ApprovalState::Approved), "{}: {first:?}", b.name);
        let second = s.decide(a.id, "reject", "u2").await.unwrap();
        assert!(
            matches!(&second, Decided::AlreadyDecided(x) if x.decided_by.as_deref() == Some("u1") && x.state == ApprovalState::Approved),
            "{}: {second:?}", b.name
        );
        let (late, _) = ask(s, r, "t2", "ship?", &options, Duration::ZERO).await;
        let expired = s.decide(late.id, "approve", "u1").await.unwrap();
        let Decided::Expired(expired) = expired else {
            panic!("{}: not expired: {expired:?}", b.name)
        };
        assert_eq!(expired.state, ApprovalState::Rejected, "{}", b.name);
        assert_eq!(expired.system_decider(), Some(SystemDecider::Timeout), "{}", b.name);
        assert_eq!(expired.decision.as_deref(), Some("reject"), "{}", b.name);
        assert!(expired.decided_at.is_some(), "{}", b.name);
        assert_eq!(s.decide(999_999, "approve", "u1").await.unwrap(), Decided::NotFound, "{}", b.name);
        assert!(s.approval(999_999).await.unwrap().is_none(), "{}", b.name);
    }
}

conformance! {
    /// The chosen option's outcome becomes the state and its label the decision, read back as
    /// recorded; a label that is not an option fails closed; the system's rejections read as such.
    async fn the_chosen_option_decides_the_outcome_and_is_stored(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "ship it").await;
        let options = labels(&["Yes, ship it", "No"]);
        let yes = ask(s, r, "t1", "ship?", &options, MINUTE).await.0;
        let no = ask(s, r, "t2", "ship?", &options, MINUTE).await.0;
        let stranger = ask(s, r, "t3", "ship?", &options, MINUTE).await.0;
        assert_eq!(yes.options[0].outcome, OptionOutcome::Approve, "{}", b.name);
        assert_eq!(yes.options[1].outcome, OptionOutcome::Reject, "{}", b.name);
        assert_eq!(yes.labels(), ["Yes, ship it", "No"], "{}", b.name);
        let Decided::Recorded(yes) = s.decide(yes.id, "Yes, ship it", "ana").await.unwrap() else {
            panic!("{}: not recorded", b.name)
        };
        assert_eq!(yes.state, ApprovalState::Approved, "{}", b.name);
        assert_eq!(yes.decision_text().as_deref(), Some("Approved: Yes, ship it — by ana"), "{}", b.name);
        let read = s.approval(yes.id).await.unwrap().unwrap();
        assert_eq!((read.state, read.decision.as_deref(), read.decided_by.as_deref()), (ApprovalState::Approved, Some("Yes, ship it"), Some("ana")), "{}", b.name);
        assert_eq!(read.options, yes.options, "{}: options read back resolved", b.name);
        let Decided::Recorded(no) = s.decide(no.id, "No", "ana").await.unwrap() else {
            panic!("{}: not recorded", b.name)
        };
        assert_eq!(no.decision_text().as_deref(), Some("Rejected: No — by ana"), "{}", b.name);
        // A label that is not an option fails closed.
        let Decided::Recorded(stranger) = s.decide(stranger.id, "approve", "ana").await.unwrap() else {
            panic!("{}: not recorded", b.name)
        };
        assert_eq!(stranger.state, ApprovalState::Rejected, "{}", b.name);
        let timed_out = ask(s, r, "t4", "ship?", &options, Duration::ZERO).await.0;
        let Decided::Expired(timed_out) = s.decide(timed_out.id, "Yes, ship it", "ana").await.unwrap() else {
            panic!("{}: not expired", b.name)
        };
        assert_eq!(timed_out.decision_text().as_deref(), Some("Rejected: no decision in time"), "{}", b.name);
        // Options offered with their outcome keep it.
        let explicit: Vec<OfferedOption> = serde_json::from_value(serde_json::json!([
            "Hold on",
            {"label": "Ship now", "outcome": "approve"},
            {"label": "Ship Friday", "outcome": "approve"}
        ]))
        .unwrap();
        let friday = ask(s, r, "t5", "ship?", &explicit, MINUTE).await.0;
        let outcomes: Vec<_> = friday.options.iter().map(|o| o.outcome).collect();
        assert_eq!(outcomes, [OptionOutcome::Reject, OptionOutcome::Approve, OptionOutcome::Approve], "{}", b.name);
        assert!(matches!(
            s.decide(friday.id, "Ship Friday", "ana").await.unwrap(),
            Decided::Recorded(a) if a.state == ApprovalState::Approved
        ), "{}", b.name);
    }
}

conformance! {
    /// Pending approvals are listed oldest first; recent ones newest first, decided or not, up to
    /// the limit.
    async fn approvals_are_listed_pending_and_recent(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "ship it").await;
        let options = labels(&["approve", "reject"]);
        let mut ids = Vec::new();
        for tool in ["t1", "t2", "t3"] {
            ids.push(ask(s, r, tool, "ship?", &options, MINUTE).await.0.id);
        }
        s.decide(ids[1], "reject", "ana").await.unwrap();
        let pending: Vec<_> = s.pending_approvals().await.unwrap().into_iter().map(|a| a.id).collect();
        assert_eq!(pending, [ids[0], ids[2]], "{}", b.name);
        let recent: Vec<_> = s.recent_approvals(2).await.unwrap().into_iter().map(|a| (a.id, a.state)).collect();
        assert_eq!(recent, [(ids[2], ApprovalState::Pending), (ids[1], ApprovalState::Rejected)], "{}", b.name);
        assert_eq!(s.recent_approvals(10).await.unwrap().len(), 3, "{}", b.name);
    }
}

conformance! {
    /// A request is recorded in recall memory once (asked again, it is not), each decision once:
    /// a person's, an expiry's and a cancellation's.
    async fn approval_requests_and_decisions_are_recalled_once(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "ship it").await;
        let options = labels(&["approve", "reject"]);
        let start = recalled(s, r).await;
        let (a, _) = ask(s, r, "t1", "ship v2", &options, MINUTE).await;
        assert_eq!(recalled(s, r).await, start + 1, "{}: the request", b.name);
        ask(s, r, "t1", "ship v2", &options, MINUTE).await;
        assert_eq!(recalled(s, r).await, start + 1, "{}: asked again, not recorded again", b.name);
        s.decide(a.id, "approve", "slack:U42").await.unwrap();
        assert_eq!(recalled(s, r).await, start + 2, "{}: the decision", b.name);
        s.decide(a.id, "reject", "slack:U43").await.unwrap();
        assert_eq!(recalled(s, r).await, start + 2, "{}: a refused second decision is not recorded", b.name);
        let (late, _) = ask(s, r, "t2", "wire $5k", &options, Duration::ZERO).await;
        s.decide(late.id, "approve", "slack:U42").await.unwrap();
        assert_eq!(recalled(s, r).await, start + 4, "{}: the request and the timeout", b.name);
        let (hire, _) = ask(s, r, "t3", "hire Ann", &options, MINUTE).await;
        s.cancel_subtree(r, "stopped").await.unwrap();
        let hire = s.approval(hire.id).await.unwrap().unwrap();
        assert_eq!((hire.state, hire.system_decider()), (ApprovalState::Rejected, Some(SystemDecider::Cancelled)), "{}", b.name);
        assert_eq!(hire.decision_text().as_deref(), Some("Rejected: the request was cancelled"), "{}", b.name);
        assert_eq!(recalled(s, r).await, start + 6, "{}: the request and the cancellation", b.name);
    }
}

conformance! {
    /// Several deciders (each on its own connection, as nodes are) race to decide one approval with
    /// different decisions: exactly one records, the others find it already decided, and what is
    /// read back is the winner's decision, recorded once in recall memory.
    async fn racing_decisions_decide_an_approval_once(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "ship it").await;
        let options = labels(&["Yes", "No", "Later"]);
        for round in 0..4 {
            let (a, _) = ask(s, r, &format!("race-{round}"), "ship?", &options, MINUTE).await;
            let before = recalled(s, r).await;
            let mut racers = Vec::new();
            for i in 0..8 {
                let store = b.store.clone();
                let decision = ["Yes", "No", "Later"][i % 3];
                racers.push(tokio::spawn(async move {
                    let by = format!("u{i}");
                    let out = store.decide(a.id, decision, &by).await.unwrap();
                    (decision, by, out)
                }));
            }
            let mut winners = Vec::new();
            for racer in racers {
                let (decision, by, out) = racer.await.unwrap();
                match out {
                    Decided::Recorded(x) => {
                        assert_eq!((x.decision.as_deref(), x.decided_by.as_deref()), (Some(decision), Some(by.as_str())), "{}", b.name);
                        winners.push((decision, by));
                    }
                    Decided::AlreadyDecided(x) => assert_ne!(x.state, ApprovalState::Pending, "{}", b.name),
                    other => panic!("{}: round {round}: {other:?}", b.name),
                }
            }
            assert_eq!(winners.len(), 1, "{}: round {round}: {winners:?}", b.name);
            let (decision, by) = &winners[0];
            let read = s.approval(a.id).await.unwrap().unwrap();
            let state = if *decision == "Yes" { ApprovalState::Approved } else { ApprovalState::Rejected };
            assert_eq!(
                (read.state, read.decision.as_deref(), read.decided_by.as_deref()),
                (state, Some(*decision), Some(by.as_str())),
                "{}: round {round}", b.name
            );
            assert_eq!(recalled(s, r).await, before + 1, "{}: round {round}: one decision recalled", b.name);
        }
    }
}

conformance! {
    /// Several requests for one tool call race: one approval exists, exactly one request reports it
    /// new, and it is recalled once.
    async fn racing_requests_for_one_call_create_one_approval(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "ship it").await;
        let task = s.task(r).await.unwrap();
        let before = recalled(s, r).await;
        let mut racers = Vec::new();
        for _ in 0..8 {
            let store = b.store.clone();
            let task = task.clone();
            racers.push(tokio::spawn(async move {
                store
                    .request_approval(&task, "t1", "ship?", &labels(&["approve", "reject"]), MINUTE)
                    .await
                    .unwrap()
            }));
        }
        let mut ids = Vec::new();
        let mut created = 0;
        for racer in racers {
            let (a, new) = racer.await.unwrap();
            ids.push(a.id);
            created += usize::from(new);
        }
        assert_eq!(created, 1, "{}", b.name);
        ids.dedup();
        assert_eq!(ids.len(), 1, "{}: {ids:?}", b.name);
        assert_eq!(s.pending_approvals().await.unwrap().len(), 1, "{}", b.name);
        assert_eq!(recalled(s, r).await, before + 1, "{}", b.name);
    }
}

conformance! {
    /// A person deciding races the task's cancellation (the system rejecting its approvals): the
    /// approval is decided once, by one of them, and that one decision is recalled.
    async fn a_decision_racing_a_cancellation_decides_once(b: &Backend) {
        let options = labels(&["approve", "reject"]);
        for round in 0..4 {
            let s = &*b.store;
            let conversation = format!("c{round}");
            let r = root(s, &conversation, "ship it").await;
            let task = s.task(r).await.unwrap();
            let (a, _) = s.request_approval(&task, "t1", "ship?", &options, MINUTE).await.unwrap();
            let before = s.recall_seqs(r, &conversation).await.unwrap().len();
            let (store1, store2) = (b.store.clone(), b.store.clone());
            let person = tokio::spawn(async move { store1.decide(a.id, "approve", "ana").await.unwrap() });
            let cancel = tokio::spawn(async move { store2.cancel_subtree(r, "stopped").await.unwrap() });
            let decided = person.await.unwrap();
            cancel.await.unwrap();
            let read = s.approval(a.id).await.unwrap().unwrap();
            match decided {
                Decided::Recorded(x) => {
                    assert_eq!(x.state, ApprovalState::Approved, "{}", b.name);
                    assert_eq!((read.state, read.decided_by.as_deref()), (ApprovalState::Approved, Some("ana")), "{}: round {round}", b.name);
                }
                Decided::AlreadyDecided(_) => {
                    assert_eq!(read.system_decider(), Some(SystemDecider::Cancelled), "{}: round {round}", b.name);
                }
                other => panic!("{}: round {round}: {other:?}", b.name),
            }
            // Cancelling records nothing else: the one decision is the one recall row added.
            let after = s.recall_seqs(r, &conversation).await.unwrap().len();
            assert_eq!(after, before + 1, "{}: round {round}", b.name);
            let again = s.decide(a.id, "reject", "bob").await.unwrap();
            assert!(matches!(again, Decided::AlreadyDecided(_)), "{}: {again:?}", b.name);
        }
    }
}

conformance! {
    /// A tree's approvals, its children's among them, oldest first with their times (asked, and
    /// decided once decided), and none of another tree's.
    async fn a_trees_approvals_are_listed_with_their_times(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "ship it").await;
        let kid = child(s, r, "c", "vp", "tool-1").await;
        let other = root(s, "d", "elsewhere").await;
        let options = labels(&["approve", "reject"]);
        let first = ask(s, r, "t1", "ship?", &options, MINUTE).await.0.id;
        let second = ask(s, kid, "t2", "refund?", &options, MINUTE).await.0.id;
        ask(s, other, "t3", "other?", &options, MINUTE).await;
        s.decide(first, "approve", "ana").await.unwrap();
        let listed = s.tree_approvals(r).await.unwrap();
        let seen: Vec<_> = listed.iter().map(|a| (a.id, a.task_id, a.state)).collect();
        assert_eq!(
            seen,
            [(first, r, ApprovalState::Approved), (second, kid, ApprovalState::Pending)],
            "{}",
            b.name
        );
        assert!(listed[0].decided_at.is_some_and(|d| d >= listed[0].created_at), "{}", b.name);
        assert_eq!(listed[1].decided_at, None, "{}", b.name);
        assert!(s.tree_approvals(r + 1000).await.unwrap().is_empty(), "{}", b.name);
    }
}
