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
