//! Conversations and task records.

use opc_agents::llm::Message;
use opc_agents::store::{NewTask, StoreError, TaskState};

use super::harness::{child, root};
use crate::conformance;

conformance! {
    /// A root is its own root, a child is in its parent's tree, and both read back as written.
    async fn tasks_read_back_as_written(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c1", "plan the launch").await;
        let c = child(s, r, "c1", "vp", "tool-1").await;
        let task = s.task(r).await.unwrap();
        assert_eq!((task.root_id, task.parent_id, task.state), (r, None, TaskState::Created), "{}", b.name);
        assert_eq!(task.input, "plan the launch", "{}", b.name);
        assert_eq!(task.conversation_id, "c1");
        let kid = s.task(c).await.unwrap();
        assert_eq!((kid.root_id, kid.parent_id, kid.depth, kid.agent.as_str()), (r, Some(r), 1, "vp"), "{}", b.name);
        assert_eq!(s.child_for(r, "tool-1", 0).await.unwrap().map(|t| t.id), Some(c), "{}", b.name);
        assert!(s.child_for(r, "tool-1", 1).await.unwrap().is_none(), "{}", b.name);
        let tree: Vec<_> = s.tree(r).await.unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(tree, vec![r, c], "{}", b.name);
        assert_eq!(s.last_root_task("c1").await.unwrap().map(|t| t.id), Some(r), "{}", b.name);
        assert!(s.last_root_task("nope").await.unwrap().is_none(), "{}", b.name);
        let live: Vec<_> = s.live_tasks().await.unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(live, vec![r, c], "{}", b.name);
        assert!(matches!(s.task(r + 1000).await, Err(StoreError::NoTask(_))), "{}", b.name);
    }
}

conformance! {
    /// One live root per conversation: a second is refused as busy, naming the live one.
    async fn a_conversation_has_one_live_root(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c1", "first").await;
        let second = s
            .create_task(&NewTask {
                parent_id: None,
                conversation_id: "c1",
                agent: "ceo",
                depth: 0,
                tool_use_id: None,
                tool_index: 0,
                input: "second",
                messages: &[],
                author: None,
                trace: None,
            })
            .await;
        assert!(matches!(second, Err(StoreError::Busy { task, .. }) if task == r), "{}: {second:?}", b.name);
        // Another conversation is free.
        root(s, "c2", "elsewhere").await;
    }
}

conformance! {
    /// Many senders racing to start a root in one conversation: exactly one wins.
    async fn racing_roots_in_one_conversation_start_once(b: &Backend) {
        let mut racers = Vec::new();
        for i in 0..8 {
            let s = b.store.clone();
            racers.push(tokio::spawn(async move {
                s.create_task(&NewTask {
                    parent_id: None,
                    conversation_id: "race",
                    agent: "ceo",
                    depth: 0,
                    tool_use_id: None,
                    tool_index: 0,
                    input: &format!("request {i}"),
                    messages: &[],
                    author: None,
                    trace: None,
                })
                .await
            }));
        }
        let mut won = 0;
        for r in racers {
            match r.await.unwrap() {
                Ok(_) => won += 1,
                Err(StoreError::Busy { .. }) => {}
                Err(e) => panic!("{}: {e}", b.name),
            }
        }
        assert_eq!(won, 1, "{}", b.name);
    }
}

conformance! {
    /// A session history is saved whole and read back; a missing task is an error.
    async fn session_histories_round_trip(b: &Backend) {
        let s = &*b.store;
        let r = root(s, "c1", "hi").await;
        assert_eq!(s.messages(r).await.unwrap(), vec![Message::user("hi")], "{}", b.name);
        let history = vec![Message::user("hi"), Message::user("hello, ünïcode ✓")];
        s.save_messages(r, &history).await.unwrap();
        assert_eq!(s.messages(r).await.unwrap(), history, "{}", b.name);
        assert!(matches!(s.messages(r + 99).await, Err(StoreError::NoTask(_))), "{}", b.name);
        let recent: Vec<_> = s.recent_roots(10).await.unwrap().into_iter().map(|t| t.id).collect();
        assert_eq!(recent, vec![r], "{}", b.name);
    }
}

conformance! {
    /// A task's trace context (the W3C `traceparent` it was created under) is stored with it and
    /// read back by every read that returns a task, `begin` included; a task created without one
    /// (telemetry off) reads back `None`.
    async fn a_tasks_trace_context_round_trips(b: &Backend) {
        const ROOT_TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        const CHILD_TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01";
        let s = &*b.store;
        let new = |conversation, parent, tool_use_id, input, trace| NewTask {
            parent_id: parent,
            conversation_id: conversation,
            agent: if parent.is_some() { "vp" } else { "ceo" },
            depth: u32::from(parent.is_some()),
            tool_use_id,
            tool_index: 0,
            input,
            messages: &[],
            author: None,
            trace,
        };
        let r = s.create_task(&new("c1", None, None, "plan", Some(ROOT_TRACE))).await.unwrap();
        let c = s
            .create_task(&new("c1", Some(r), Some("tool-1"), "part", Some(CHILD_TRACE)))
            .await
            .unwrap();
        let plain = s.create_task(&new("c2", None, None, "plain", None)).await.unwrap();
        let plain_child = s
            .create_task(&new("c2", Some(plain), Some("tool-2"), "part", None))
            .await
            .unwrap();
        let want = |id| match id {
            id if id == r => Some(ROOT_TRACE.to_string()),
            id if id == c => Some(CHILD_TRACE.to_string()),
            _ => None,
        };
        for id in [r, c, plain, plain_child] {
            assert_eq!(s.task(id).await.unwrap().trace, want(id), "{}: task {id}", b.name);
        }
        for t in s.tree(r).await.unwrap().into_iter().chain(s.tree(plain).await.unwrap()) {
            assert_eq!(t.trace, want(t.id), "{}: tree, task {}", b.name, t.id);
        }
        for t in s.live_tasks().await.unwrap().into_iter().chain(s.recent_roots(10).await.unwrap()) {
            assert_eq!(t.trace, want(t.id), "{}: live or recent, task {}", b.name, t.id);
        }
        let kid = s.child_for(r, "tool-1", 0).await.unwrap().unwrap();
        assert_eq!(kid.trace.as_deref(), Some(CHILD_TRACE), "{}", b.name);
        let last = s.last_root_task("c2").await.unwrap().unwrap();
        assert_eq!((last.id, last.trace), (plain, None), "{}", b.name);
        // The session's start reads the record too (its own query on PostgreSQL).
        let (begun, _) = s.begin(c).await.unwrap();
        assert_eq!(begun.trace.as_deref(), Some(CHILD_TRACE), "{}", b.name);
        let (begun, _) = s.begin(plain).await.unwrap();
        assert_eq!(begun.trace, None, "{}", b.name);
    }
}
