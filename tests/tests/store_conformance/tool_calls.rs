//! The tool-call ledger and the commands approved "for this conversation": calls read back per
//! tree in order, and an approval remembered per conversation, agent and exact command text. What
//! `store/tool_calls.rs` promises, on every backend.

use opc_agents::store::{TaskId, ToolCallRecord, ToolOutcome};

use super::harness::{child, root};
use crate::conformance;

/// A call of `tool` by task `task` (Bash calls carry a detail).
fn call(task: TaskId, tool: &str, outcome: ToolOutcome, exit: Option<i32>) -> ToolCallRecord {
    ToolCallRecord {
        task_id: task,
        agent: "a".into(),
        tool: tool.into(),
        tool_use_id: format!("t-{tool}"),
        outcome,
        exit_code: exit,
        detail: (tool == "Bash").then(|| "cargo test …".to_string()),
        duration_ms: 42,
        created_at: 0,
    }
}

conformance! {
    /// A tree's tool calls (its root's and its children's, no other tree's) read back in order,
    /// as recorded, stamped by the store.
    async fn tool_calls_are_read_back_per_tree_in_order(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c", "go").await;
        let c = child(s, r, "c", "dev", "d1").await;
        let other = root(s, "d", "elsewhere").await;
        s.record_tool_call(&call(r, "delegate", ToolOutcome::Ok, None)).await.unwrap();
        s.record_tool_call(&call(c, "Bash", ToolOutcome::Error, Some(101))).await.unwrap();
        s.record_tool_call(&call(other, "Bash", ToolOutcome::Ok, Some(0))).await.unwrap();
        s.record_tool_call(&call(c, "Bash", ToolOutcome::Error, Some(i32::MIN))).await.unwrap();
        let calls = s.tool_calls(r).await.unwrap();
        assert_eq!(calls.len(), 3, "{}: {calls:?}", b.name);
        assert_eq!(
            (calls[0].task_id, calls[0].tool.as_str(), calls[0].outcome, calls[0].exit_code, calls[0].detail.as_deref()),
            (r, "delegate", ToolOutcome::Ok, None, None),
            "{}", b.name
        );
        assert_eq!(
            (calls[1].task_id, calls[1].exit_code, calls[1].outcome, calls[1].detail.as_deref(), calls[1].duration_ms),
            (c, Some(101), ToolOutcome::Error, Some("cargo test …"), 42),
            "{}", b.name
        );
        assert_eq!((calls[1].agent.as_str(), calls[1].tool_use_id.as_str()), ("a", "t-Bash"), "{}", b.name);
        assert!(calls[1].created_at > 0, "{}", b.name);
        assert_eq!(calls[2].exit_code, Some(i32::MIN), "{}", b.name);
        assert_eq!(s.tool_calls(other).await.unwrap().len(), 1, "{}", b.name);
        assert!(s.tool_calls(other + 1000).await.unwrap().is_empty(), "{}", b.name);
    }
}

conformance! {
    /// An approved command is remembered for its conversation, agent and exact text only; approving
    /// it again is harmless.
    async fn an_approved_command_is_remembered_per_conversation_agent_and_exact_text(b: &Backend) {
        let s = &*b.store;
        assert!(!s.command_approved("c", "dev", "make x").await.unwrap(), "{}", b.name);
        s.approve_command("c", "dev", "make x", 7).await.unwrap();
        // Again is harmless.
        s.approve_command("c", "dev", "make x", 8).await.unwrap();
        assert!(s.command_approved("c", "dev", "make x").await.unwrap(), "{}", b.name);
        assert!(!s.command_approved("d", "dev", "make x").await.unwrap(), "{}", b.name);
        assert!(!s.command_approved("c", "ops", "make x").await.unwrap(), "{}", b.name);
        assert!(!s.command_approved("c", "dev", "make x ").await.unwrap(), "{}", b.name);
        assert!(!s.command_approved("c", "dev", "make").await.unwrap(), "{}", b.name);
    }
}

conformance! {
    /// Several nodes remembering the same command at once all succeed, and it is remembered.
    async fn racing_approvals_of_one_command_all_succeed(b: &Backend) {
        let mut racers = Vec::new();
        for i in 0..8 {
            let store = b.store.clone();
            racers.push(tokio::spawn(async move { store.approve_command("c", "dev", "make x", i).await }));
        }
        for racer in racers {
            racer.await.unwrap().unwrap_or_else(|e| panic!("{}: {e}", b.name));
        }
        assert!(b.store.command_approved("c", "dev", "make x").await.unwrap(), "{}", b.name);
    }
}
