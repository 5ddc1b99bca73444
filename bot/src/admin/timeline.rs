//! The Tasks page's request timeline: one request's tree as a waterfall — every task with its start
//! and end, and inside it its model calls, tool calls and approval waits, each with its own start
//! and end (`GET /admin/api/tasks/{id}/timeline`).
//!
//! Where the times come from: a task's row (created, finished), the ledger (a call's row is written
//! when the call returns, so it started `duration_ms` before — [`TimedCall::started_at`]), the tool
//! calls (recorded when they finish, with their duration) and the approvals (asked, decided).
//!
//! Invariants:
//! - read-only, and from the engine's store alone: it shows what `/admin/api/tasks/{id}` shows;
//! - times are reported as stored; the one adjustment is a derived start (a call's end less its
//!   duration, both in whole ms) that reads before its task's start: a call cannot begin before its
//!   task, so that is rounding, and it is moved to the task's start. Ends are never moved (a segment
//!   ending after its task would be a bug worth seeing);
//! - something still running has `end: null`, and the answer carries the server's `now`, so the page
//!   draws it growing to now without trusting the browser's clock;
//! - tasks come parent before children, siblings in the order they were created (a waterfall reads
//!   as the tree).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use opc_adapters::Page;
use opc_agents::store::{
    Approval, StoreError, TaskId, TaskRecord, TimedCall, ToolCallRecord, now_ms,
};
use serde_json::{Value, json};

use super::Admin;
use super::config::error;

/// This module's endpoints.
pub(super) fn pages(admin: &Arc<Admin>) -> Vec<Page> {
    vec![Page::new(
        Method::GET,
        "/admin/api/tasks/{id}/timeline",
        timeline,
        admin.clone(),
    )]
}

/// What one request's timeline is drawn from.
struct Request {
    tree: Vec<TaskRecord>,
    calls: Vec<TimedCall>,
    tools: Vec<ToolCallRecord>,
    approvals: Vec<Approval>,
}

/// Why there is no timeline for an id.
enum Missing {
    /// No task has it.
    NoTask,
    /// The task is part of the request rooted at this task.
    NotRoot(TaskId),
}

/// `GET /admin/api/tasks/{id}/timeline`: the waterfall of the request whose root task is `{id}` (see
/// the module doc for the shape). 404 for an unknown id and for a task that is not a request's root
/// (the message names the root to ask for).
async fn timeline(
    State(admin): State<Arc<Admin>>,
    id: Result<Path<TaskId>, PathRejection>,
) -> Response {
    let Ok(Path(id)) = id else {
        return error(
            StatusCode::BAD_REQUEST,
            "the task id in /admin/api/tasks/{id}/timeline must be a number, e.g. /admin/api/tasks/12/timeline",
        );
    };
    let Some(gateway) = admin.gateway.get() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is not running in this process",
        );
    };
    let engine = gateway.engine().clone();
    let read = tokio::spawn(async move {
        let store = engine.store();
        let task = match store.task(id).await {
            Ok(task) => task,
            Err(StoreError::NoTask(_)) => return Ok(Err(Missing::NoTask)),
            Err(e) => return Err(e),
        };
        if task.root_id != id {
            return Ok(Err(Missing::NotRoot(task.root_id)));
        }
        Ok(Ok(Request {
            tree: store.tree(id).await?,
            calls: store.tree_calls(id).await?,
            tools: store.tool_calls(id).await?,
            approvals: store.tree_approvals(id).await?,
        }))
    })
    .await;
    match read {
        Ok(Ok(Ok(request))) => Json(waterfall(id, request, now_ms())).into_response(),
        Ok(Ok(Err(Missing::NoTask))) => error(
            StatusCode::NOT_FOUND,
            &format!("there is no task {id}: pick a request from the list of recent requests"),
        ),
        Ok(Ok(Err(Missing::NotRoot(root)))) => error(
            StatusCode::NOT_FOUND,
            &format!(
                "task {id} is not a request's root task: it belongs to request {root}; ask for /admin/api/tasks/{root}/timeline"
            ),
        ),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

/// The timeline's JSON for the request rooted at `root`, as of `now`.
fn waterfall(root: TaskId, request: Request, now: i64) -> Value {
    let Request {
        tree,
        calls,
        tools,
        approvals,
    } = request;
    let mut segments: HashMap<TaskId, Vec<Value>> = HashMap::new();
    for c in &calls {
        segments.entry(c.call.task_id).or_default().push(json!({
            "kind": "model",
            "start": c.started_at(),
            "end": c.ended_at,
            "label": c.call.model,
            "tokens_in": c.call.tokens_in,
            "tokens_out": c.call.tokens_out,
            "usage_unknown": c.call.usage_unknown,
            "cost_usd": c.call.cost_usd,
            "attempts": c.call.attempts,
            "tools": c.call.tool_calls,
            "error": c.call.error,
        }));
    }
    for t in &tools {
        let duration = i64::try_from(t.duration_ms).unwrap_or(i64::MAX);
        segments.entry(t.task_id).or_default().push(json!({
            "kind": "tool",
            "start": t.created_at.saturating_sub(duration),
            "end": t.created_at,
            "label": t.tool,
            "tool": t.tool,
            "outcome": t.outcome,
            "exit_code": t.exit_code,
            "detail": t.detail,
        }));
    }
    for a in &approvals {
        segments.entry(a.task_id).or_default().push(json!({
            "kind": "approval",
            "start": a.created_at,
            "end": a.decided_at,
            "label": a.summary,
            "approval": a.id,
            "state": a.state,
            "decision": a.decision,
            "decided_by": a.decided_by,
            "expires_at": a.expires_at,
        }));
    }
    for t in &tree {
        if let Some(list) = segments.get_mut(&t.id) {
            for s in list.iter_mut() {
                if s["kind"] != "approval"
                    && s["start"].as_i64().is_some_and(|at| at < t.created_at)
                {
                    s["start"] = json!(t.created_at);
                }
            }
        }
    }
    for list in segments.values_mut() {
        list.sort_by_key(|s| s["start"].as_i64().unwrap_or_default());
    }
    let start = tree
        .iter()
        .find(|t| t.id == root)
        .map_or(now, |t| t.created_at);
    let end = tree
        .iter()
        .find(|t| t.id == root)
        .and_then(|t| t.finished_at);
    let tasks: Vec<Value> = tree_order(&tree)
        .into_iter()
        .map(|t| {
            json!({
                "id": t.id,
                "parent": t.parent_id,
                "agent": t.agent,
                "depth": t.depth,
                "state": t.state.as_str(),
                "live": !t.state.is_terminal(),
                "start": t.created_at,
                "end": t.finished_at,
                "tokens_in": t.tokens_in,
                "tokens_out": t.tokens_out,
                "cost_usd": t.cost_usd,
                "unknown_usage_calls": t.unknown_usage_calls,
                "segments": segments.remove(&t.id).unwrap_or_default(),
            })
        })
        .collect();
    json!({"root": root, "start": start, "end": end, "now": now, "tasks": tasks})
}

/// The tree's tasks parent first, each parent's children in the order they were created (by id).
/// Iterative, so a deep tree cannot overflow the stack; a task whose parent is not in the tree
/// (never, for a tree read in one query) is kept, at the end.
fn tree_order(tree: &[TaskRecord]) -> Vec<&TaskRecord> {
    let mut children: HashMap<Option<TaskId>, Vec<&TaskRecord>> = HashMap::new();
    for t in tree {
        children.entry(t.parent_id).or_default().push(t);
    }
    for list in children.values_mut() {
        list.sort_by_key(|t| t.id);
    }
    let mut out = Vec::with_capacity(tree.len());
    let mut stack: Vec<&TaskRecord> = children
        .get(&None)
        .map(|roots| roots.iter().rev().copied().collect())
        .unwrap_or_default();
    while let Some(t) = stack.pop() {
        out.push(t);
        if let Some(kids) = children.get(&Some(t.id)) {
            stack.extend(kids.iter().rev().copied());
        }
    }
    if out.len() < tree.len() {
        let seen: std::collections::HashSet<TaskId> = out.iter().map(|t| t.id).collect();
        out.extend(tree.iter().filter(|t| !seen.contains(&t.id)));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use opc_agents::TaskState;

    fn task(id: TaskId, parent: Option<TaskId>) -> TaskRecord {
        TaskRecord {
            id,
            parent_id: parent,
            root_id: 1,
            conversation_id: "c".into(),
            agent: format!("a{id}"),
            depth: 0,
            tool_use_id: None,
            tool_index: 0,
            state: TaskState::Completed,
            input: String::new(),
            output: None,
            summary: None,
            error: None,
            escalation: None,
            created_at: id * 10,
            updated_at: id * 10,
            finished_at: Some(1000 - id),
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: 0.0,
            llm_calls: 0,
            unknown_usage_calls: 0,
            node: None,
            trace: None,
        }
    }

    #[test]
    fn the_tree_reads_parent_first_and_children_in_creation_order() {
        // 1 ─┬─ 2 ── 4
        //    └─ 3
        let tree = [
            task(3, Some(1)),
            task(4, Some(2)),
            task(1, None),
            task(2, Some(1)),
        ];
        let ids: Vec<_> = tree_order(&tree).iter().map(|t| t.id).collect();
        assert_eq!(ids, [1, 2, 4, 3]);
    }

    #[test]
    fn a_running_request_has_no_end_and_its_segments_start_before_they_end_in_order() {
        let mut root = task(1, None);
        root.state = TaskState::Executing;
        root.finished_at = None;
        let call = TimedCall {
            ended_at: 300,
            call: opc_agents::store::CallRecord {
                task_id: 1,
                agent: "a1".into(),
                model: "p/m".into(),
                tokens_in: 5,
                tokens_out: 6,
                cost_usd: 0.25,
                usage_unknown: false,
                duration_ms: 100,
                attempts: 1,
                tool_calls: vec!["delegate".into()],
                error: None,
                privacy: None,
            },
        };
        let tool = ToolCallRecord {
            task_id: 1,
            agent: "a1".into(),
            tool: "bash".into(),
            tool_use_id: "t".into(),
            outcome: opc_agents::store::ToolOutcome::Ok,
            exit_code: Some(0),
            detail: None,
            duration_ms: 50,
            created_at: 150,
        };
        let json = waterfall(
            1,
            Request {
                tree: vec![root],
                calls: vec![call],
                tools: vec![tool],
                approvals: Vec::new(),
            },
            5000,
        );
        assert_eq!(json["end"], Value::Null);
        assert_eq!(json["now"], 5000);
        let t = &json["tasks"][0];
        assert_eq!(
            (t["end"].clone(), t["live"].clone()),
            (Value::Null, Value::Bool(true))
        );
        let spans: Vec<_> = t["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["kind"].as_str().unwrap(),
                    s["start"].as_i64().unwrap(),
                    s["end"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(spans, [("tool", 100, 150), ("model", 200, 300)]);
        assert_eq!(t["segments"][1]["tokens_out"], 6);
    }
}
