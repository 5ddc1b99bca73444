//! The Org page's agent panel: `GET /admin/api/agents/{id}` — one agent of the running org as the
//! console's graph (`assets/orggraph.js`) opens it: its place in the tree, role, model, tools, memory
//! (its core blocks, recall, archival, what it shares and what is shared with it), workspace, Bash
//! rules, its live state and its recent tasks.
//!
//! Invariants:
//! - everything comes from the running config ([`crate::live::LiveConfig`]) and the engine's store,
//!   through operations the store already has: the console keeps no state of its own;
//! - an agent the running org does not have is a 404 that names it and says where the ids come from;
//! - nothing secret is answered: a block's limit and flags but not its text (a block can hold what a
//!   conversation taught the agent), a task's instructions cut to one short line, no prompt text
//!   beyond what `GET /admin/api/agents` already shows.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use opc_adapters::Page;
use opc_agents::store::TaskRecord;
use opc_hierarchy::schema::{Agent, Approver, Prompt, Unlisted};
use serde_json::{Value, json};

use super::Admin;
use super::config::error;

/// Recent requests looked through for an agent's recent tasks.
const ROOTS_SCANNED: u32 = 50;
/// Recent tasks answered per agent, newest first.
const RECENT_TASKS: usize = 10;

/// This module's endpoints.
pub(super) fn pages(admin: &Arc<Admin>) -> Vec<Page> {
    vec![Page::new(
        Method::GET,
        "/admin/api/agents/{id}",
        agent,
        admin.clone(),
    )]
}

/// `GET /admin/api/agents/{id}`: the agent's panel (see the module's doc for what it holds).
async fn agent(State(admin): State<Arc<Admin>>, Path(id): Path<String>) -> Response {
    let (Some(gateway), Some(live)) = (admin.gateway.get(), admin.live.get()) else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is not running in this process",
        );
    };
    let loaded = live.get();
    let Some(config) = loaded.config.agents.get(&id) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!(
                "there is no agent `{}` in the running org: the ids are the keys under `agents:` in \
                 the config (GET /api/org lists them)",
                crate::term::one_line(&id, 80)
            ),
        );
    };
    let engine = gateway.engine().clone();
    let wanted = id.clone();
    let read = tokio::spawn(async move {
        let store = engine.store();
        let live_tasks: Vec<TaskRecord> = store
            .live_tasks()
            .await?
            .into_iter()
            .filter(|t| t.agent == wanted)
            .collect();
        // A request's tree holds its root too, so every task of the agent is in one of the trees.
        let mut recent = Vec::new();
        for root in store.recent_roots(ROOTS_SCANNED).await? {
            recent.extend(
                store
                    .tree(root.id)
                    .await?
                    .into_iter()
                    .filter(|t| t.agent == wanted),
            );
        }
        Ok::<_, opc_agents::store::StoreError>((live_tasks, recent))
    })
    .await;
    let (live_tasks, mut recent) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    };
    recent.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    recent.truncate(RECENT_TASKS);
    let live_refs: Vec<&TaskRecord> = live_tasks.iter().collect();
    Json(panel(
        &loaded,
        &id,
        config,
        super::live::state_of(&live_refs),
        &live_tasks,
        &recent,
    ))
    .into_response()
}

/// The panel's JSON for agent `id` (its entry `agent`) of the running config `loaded`.
fn panel(
    loaded: &opc_hierarchy::Loaded,
    id: &str,
    agent: &Agent,
    state: &str,
    live_tasks: &[TaskRecord],
    recent: &[TaskRecord],
) -> Value {
    let org = &loaded.org;
    let shared_by: Vec<&str> = loaded
        .config
        .agents
        .iter()
        .filter(|(_, other)| other.memory.share_with.iter().any(|r| r == id))
        .map(|(owner, _)| owner.as_str())
        .collect();
    let bash_tool = agent.tools.contains(&opc_hierarchy::schema::Tool::Bash);
    let task = |t: &TaskRecord| {
        json!({
            "id": t.id,
            "root": t.root_id,
            "parent": t.parent_id,
            "state": t.state.as_str(),
            "live": !t.state.is_terminal(),
            "created_at": t.created_at,
            "finished_at": t.finished_at,
            "input": crate::term::one_line(&t.input, 120),
        })
    };
    json!({
        "id": id,
        "role": agent.role,
        "level": org.level(id),
        "parent": org.parent(id),
        "children": org.children(id),
        "model": agent.model.as_deref().unwrap_or(&loaded.config.framework.default_model),
        "tools": agent.tools.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "prompt": match &agent.prompt {
            Some(Prompt::File(f)) => json!({"file": f.display().to_string()}),
            Some(Prompt::Inline(_)) => json!({"inline": true}),
            None => Value::Null,
        },
        "approvers": agent.approvers.iter().map(approver).collect::<Vec<_>>(),
        "memory": {
            "blocks": agent.memory.blocks.iter().map(|b| json!({
                "label": b.label,
                "description": b.description,
                "limit": b.limit.get(),
                "read_only": b.read_only,
            })).collect::<Vec<_>>(),
            "recall": agent.memory.recall,
            "archival": agent.memory.archival,
            "shared_blocks": agent.memory.shared_blocks,
            "share_with": agent.memory.share_with,
            "shared_by": shared_by,
        },
        "workspace": org.workspace(id).map(|p| p.display().to_string()),
        "bash": {
            "tool": bash_tool,
            "configured": agent.bash.is_some(),
            "allow": org.bash_allow(id),
            "written": agent.bash.as_ref().map(|b| b.allow.clone()).unwrap_or_default(),
            "unlisted": match org.bash_unlisted(id) {
                Unlisted::Ask => "ask",
                Unlisted::Deny => "deny",
            },
        },
        "state": state,
        "tasks": live_tasks.iter().map(task).collect::<Vec<_>>(),
        "recent": recent.iter().map(task).collect::<Vec<_>>(),
    })
}

/// An approver as written in the config: `slack:U012AB3CD`, `discord:role:1234`.
fn approver(a: &Approver) -> String {
    format!(
        "{}:{}{}",
        a.platform,
        if a.is_role { "role:" } else { "" },
        a.id
    )
}
