//! What the slash commands answer: `/status`, `/agents`, `/tasks`, `/help` (and `/cancel`'s wording).
//!
//! Pure rendering over the engine's database and the org, as markdown; adapters turn it into each
//! platform's format. Answers are sent ephemerally, to the person who asked.
//!
//! Invariant: read-only — nothing here changes a task (cancelling is done by the gateway, after the
//! approver check).

use std::collections::HashMap;
use std::fmt::Write as _;

use opc_adapters::{Command, Platform};
use opc_agents::store::{Approval, Store, TaskId, TaskRecord};
use opc_hierarchy::OrgTree;

use opc_agents::store::now_ms;

/// `/status` on `platform`: every task that has not ended, grouped by tree, with its delegation path,
/// state and elapsed time, and its latest approval: waiting, or what was chosen and by whom
/// ("approval #5: Approved: Yes, ship it — by ana"). With nothing running it says how to start, in
/// the platform's own terms.
pub async fn status(store: &dyn Store, platform: Platform) -> String {
    let live = match store.live_tasks().await {
        Ok(live) => live,
        Err(e) => return format!("Could not read the tasks: {e}"),
    };
    if live.is_empty() {
        return format!("Nothing is running. {}", how_to_start(platform));
    }
    let mut roots: Vec<i64> = live.iter().map(|t| t.root_id).collect();
    roots.dedup();
    let mut out = format!(
        "**{} active task{}**\n",
        live.len(),
        if live.len() == 1 { "" } else { "s" }
    );
    let now = now_ms();
    let approvals = latest_approvals(store, &live).await;
    for root in roots {
        let tree = store.tree(root).await.unwrap_or_default();
        for task in live.iter().filter(|t| t.root_id == root) {
            let _ = writeln!(
                out,
                "• `#{}` {} — {} — {}{}",
                task.id,
                path(&tree, task).join(" › "),
                task.state.as_str(),
                elapsed(now - task.created_at),
                approvals
                    .get(&task.id)
                    .map(approval_note)
                    .unwrap_or_default()
            );
        }
    }
    out.push_str("Cancel a tree with `/cancel <id>` (approvers only).");
    out
}

/// How many of the latest approvals `/status` looks through for decided ones (pending ones are all
/// read): a live task's decision is recent, and the answer stays one cheap query.
const RECENT_APPROVALS: u32 = 200;

/// The latest approval of each live task: pending ones, and decided ones among the recent.
async fn latest_approvals(store: &dyn Store, live: &[TaskRecord]) -> HashMap<TaskId, Approval> {
    let mut latest: HashMap<TaskId, Approval> = HashMap::new();
    let pending = store.pending_approvals().await.unwrap_or_default();
    let recent = store
        .recent_approvals(RECENT_APPROVALS)
        .await
        .unwrap_or_default();
    for approval in pending.into_iter().chain(recent) {
        if !live.iter().any(|t| t.id == approval.task_id) {
            continue;
        }
        match latest.get(&approval.task_id) {
            Some(seen) if seen.id >= approval.id => {}
            _ => {
                latest.insert(approval.task_id, approval);
            }
        }
    }
    latest
}

/// ` — waiting for approval #5`, or ` — approval #5: Approved: Yes, ship it — by ana`.
fn approval_note(approval: &Approval) -> String {
    match approval.decision_text() {
        None => format!(" — waiting for approval #{}", approval.id),
        Some(text) => format!(" — approval #{}: {text}", approval.id),
    }
}

/// The agents from the root down to `task`'s agent.
fn path(tree: &[TaskRecord], task: &TaskRecord) -> Vec<String> {
    let mut path = vec![task.agent.clone()];
    let mut parent = task.parent_id;
    while let Some(id) = parent {
        match tree.iter().find(|t| t.id == id) {
            Some(up) => {
                path.push(up.agent.clone());
                parent = up.parent_id;
            }
            None => break,
        }
    }
    path.reverse();
    path
}

fn elapsed(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    if secs < 60 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs / 60) % 60)
    }
}

/// `/agents`: the org tree, one agent a line, indented by level.
pub fn agents(org: &OrgTree) -> String {
    let mut out = String::from("**The org**\n");
    let mut stack = vec![(org.root(), 0usize)];
    while let Some((id, depth)) = stack.pop() {
        let _ = writeln!(
            out,
            "{}• **{}** — {}",
            "    ".repeat(depth),
            id,
            org.role(id).unwrap_or_default()
        );
        stack.extend(org.children(id).into_iter().rev().map(|c| (c, depth + 1)));
    }
    out
}

/// `/tasks`: recent requests with their state and the cost of their whole tree.
pub async fn tasks(store: &dyn Store) -> String {
    let roots = match store.recent_roots(10).await {
        Ok(roots) => roots,
        Err(e) => return format!("Could not read the tasks: {e}"),
    };
    if roots.is_empty() {
        return "No requests yet.".into();
    }
    let mut out = String::from("**Recent requests**\n");
    for root in &roots {
        let (tokens_in, tokens_out, cost) = store.tree_totals(root.id).await.unwrap_or((0, 0, 0.0));
        let end = root.finished_at.unwrap_or_else(now_ms);
        let _ = writeln!(
            out,
            "• `#{}` {} — {} — {} tokens — ${cost:.4} — “{}”",
            root.id,
            root.state.as_str(),
            elapsed(end - root.created_at),
            tokens_in + tokens_out,
            excerpt(&root.input, 40)
        );
    }
    out
}

fn excerpt(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max - 1).collect::<String>())
    }
}

/// How a person starts a request on `platform`: the web chat has a message box, not mentions.
fn how_to_start(platform: Platform) -> &'static str {
    match platform {
        Platform::Web => "Type a request in the message box to start something.",
        Platform::Slack | Platform::Discord => "Mention me with a request to start something.",
    }
}

/// `/help` for `platform`, optionally after saying what was not understood. The web chat has no
/// mentions or threads: each message continues the conversation on the page, and its operator is an
/// approver.
pub fn help(platform: Platform, unknown: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(unknown) = unknown {
        let _ = writeln!(out, "I don't know `{unknown}`.");
    }
    out.push_str("**Commands**\n");
    for (name, what) in Command::ALL {
        let what = match platform {
            Platform::Web => what.trim_end_matches(" (approvers only)"),
            _ => what,
        };
        let _ = writeln!(out, "• `/{name}` — {what}");
    }
    out.push_str(match platform {
        Platform::Web => {
            "Type a request to start; every message continues this conversation. \
             **New conversation** starts another; the **Org chart** link shows who answers."
        }
        _ => {
            "Mention me with a request to start a conversation; reply in its thread to continue it."
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn status_with_nothing_running_says_how_to_start_in_the_platforms_terms() {
        let store = opc_agents::SqliteStore::in_memory().unwrap_or_else(|e| panic!("{e}"));
        let web = status(&store, Platform::Web).await;
        assert!(web.starts_with("Nothing is running."), "{web}");
        assert!(
            web.contains("message box") && !web.contains("Mention"),
            "{web}"
        );
        let slack = status(&store, Platform::Slack).await;
        assert!(slack.contains("Mention me"), "{slack}");
    }

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn status_shows_what_was_chosen_on_a_live_tasks_approval() {
        let store = opc_agents::SqliteStore::in_memory().unwrap();
        store.create_conversation("c", "ceo").await.unwrap();
        let root = store
            .create_task(&opc_agents::store::NewTask {
                parent_id: None,
                conversation_id: "c",
                agent: "ceo",
                depth: 0,
                tool_use_id: None,
                tool_index: 0,
                input: "ship it?",
                messages: &[],
                author: None,
                trace: None,
            })
            .await
            .unwrap();
        let task = store.task(root).await.unwrap();
        let options = ["Yes, ship it".into(), "No".into()];
        let ask = async |id: &str| {
            store
                .request_approval(
                    &task,
                    id,
                    "ship v2",
                    &options,
                    std::time::Duration::from_secs(60),
                )
                .await
                .unwrap()
                .0
        };
        let first = ask("t1").await;
        let waiting = status(&store, Platform::Slack).await;
        assert!(
            waiting.contains(&format!("waiting for approval #{}", first.id)),
            "{waiting}"
        );
        store
            .decide(first.id, "Yes, ship it", "ana (slack:U1)")
            .await
            .unwrap();
        let decided = status(&store, Platform::Slack).await;
        assert!(
            decided.contains(&format!(
                "approval #{}: Approved: Yes, ship it — by ana (slack:U1)",
                first.id
            )),
            "{decided}"
        );
        // The latest approval of the task is the one shown.
        let second = ask("t2").await;
        store.decide(second.id, "No", "bo").await.unwrap();
        let latest = status(&store, Platform::Slack).await;
        assert!(
            latest.contains(&format!("approval #{}: Rejected: No — by bo", second.id))
                && !latest.contains("Yes, ship it"),
            "{latest}"
        );
    }

    #[test]
    fn help_on_the_web_speaks_of_the_page_not_of_mentions_and_threads() {
        let web = help(Platform::Web, Some("/frobnicate"));
        assert!(
            web.contains("`/frobnicate`") && web.contains("`/status`"),
            "{web}"
        );
        assert!(web.contains("New conversation"), "{web}");
        assert!(!web.contains("Mention") && !web.contains("thread"), "{web}");
        assert!(!web.contains("approvers only"), "{web}");
        let slack = help(Platform::Slack, None);
        assert!(
            slack.contains("Mention me") && slack.contains("approvers only"),
            "{slack}"
        );
    }
}
