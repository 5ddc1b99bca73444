//! The console's live pages: agents with their state and spend today, each model provider's state
//! (its key, its last call's outcome), the cluster's nodes (PostgreSQL), recent conversations (with
//! the node that ran each) and
//! one conversation's delegation tree, approvals (decided here too), costs by agent, model and
//! platform, each platform's activity, and the engine's event stream.
//!
//! Everything is read from the engine's database and event bus, and the gateway's books: the
//! console keeps no state of its own, so it shows what `opc tasks` and the chat show.
//!
//! Invariants:
//! - a decision or a cancel goes through the engine, exactly as from the chat (one decision counts;
//!   a cancel takes the whole tree), and is recorded as made by the console;
//! - the event stream never carries streamed tokens (a page would drown in them), and a slow tab
//!   that falls behind is told how many events it missed rather than slowing the engine.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use opc_agents::store::{Decided, Spend, TaskRecord, now_ms};
use opc_agents::{EngineError, Event, TaskState};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::Admin;
use super::config::error;

/// How many of the latest LLM calls are looked through for each provider's last outcome.
const LATEST_CALLS: u32 = 5_000;

/// Recent conversations listed.
const RECENT: u32 = 50;
/// Approvals listed.
const APPROVALS: u32 = 100;

fn not_running() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the gateway is not running in this process",
    )
}

/// `GET /admin/api/agents`: every agent of the running org with its model, state (idle, thinking,
/// waiting on children, waiting on approval), tasks in flight, and tokens and cost today (UTC).
pub async fn agents(State(admin): State<Arc<Admin>>) -> Response {
    let (Some(gateway), Some(live)) = (admin.gateway.get(), admin.live.get()) else {
        return not_running();
    };
    let loaded = live.get();
    let engine = gateway.engine().clone();
    let read = tokio::spawn(async move {
        let store = engine.store();
        Ok::<_, opc_agents::store::StoreError>((
            store.live_tasks().await?,
            store.spend_since(start_of_day()).await?,
        ))
    })
    .await;
    let (live_tasks, spend) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    };
    let mut tasks: HashMap<&str, Vec<&TaskRecord>> = HashMap::new();
    for t in &live_tasks {
        tasks.entry(t.agent.as_str()).or_default().push(t);
    }
    let mut today: HashMap<&str, (u64, f64)> = HashMap::new();
    for s in &spend {
        let e = today.entry(s.agent.as_str()).or_default();
        e.0 += s.tokens_in + s.tokens_out;
        e.1 += s.cost_usd;
    }
    let org = &loaded.org;
    let agents: Vec<Value> = loaded
        .config
        .agents
        .iter()
        .map(|(id, agent)| {
            let mine = tasks.get(id.as_str()).map(Vec::as_slice).unwrap_or_default();
            let (tokens, cost) = today.get(id.as_str()).copied().unwrap_or_default();
            json!({
                "id": id,
                "role": agent.role,
                "level": agent.level,
                "parent": org.parent(id),
                "children": org.children(id),
                "model": agent.model.as_deref().unwrap_or(&loaded.config.framework.default_model),
                "tools": agent.tools.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "prompt": match &agent.prompt {
                    Some(opc_hierarchy::schema::Prompt::File(f)) => json!({"file": f.display().to_string()}),
                    Some(opc_hierarchy::schema::Prompt::Inline(text)) => json!({"text": text}),
                    None => Value::Null,
                },
                "state": state_of(mine),
                "tasks": mine.iter().map(|t| json!({"id": t.id, "root": t.root_id, "state": t.state.as_str(), "since": t.created_at})).collect::<Vec<_>>(),
                "tokens_today": tokens,
                "cost_today": cost,
            })
        })
        .collect();
    Json(json!({"generation": live.generation(), "root": org.root(), "agents": agents}))
        .into_response()
}

/// `GET /admin/api/providers`: every provider of the running config with who uses it, whether its key
/// is set (the variable's name, never its value) and its last call's outcome from the ledger (`ok`,
/// or the error's kind, message and time). A missing key is what the chat's banner shows; this is
/// where an operator sees it for every provider at once, before anyone chats.
pub async fn providers(State(admin): State<Arc<Admin>>) -> Response {
    let (Some(gateway), Some(live)) = (admin.gateway.get(), admin.live.get()) else {
        return not_running();
    };
    let loaded = live.get();
    let engine = gateway.engine().clone();
    let latest =
        match tokio::spawn(async move { engine.store().latest_calls(LATEST_CALLS).await }).await {
            Ok(Ok(latest)) => latest,
            Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
        };
    let framework = &loaded.config.framework;
    let mut used_by: HashMap<&str, Vec<&str>> = HashMap::new();
    for (id, agent) in &loaded.config.agents {
        let model = agent.model.as_deref().unwrap_or(&framework.default_model);
        if let Ok((provider, _)) = framework.resolve_model(model) {
            used_by.entry(provider).or_default().push(id);
        }
    }
    let summaries = framework
        .resolve_model(framework.fast_model())
        .ok()
        .map(|(provider, _)| provider);
    let providers: Vec<Value> = framework
        .providers
        .iter()
        .map(|(name, provider)| {
            let key = provider.api_key_env.as_ref().map(|var| {
                let set = std::env::var(var.name()).is_ok_and(|v| !v.trim().is_empty());
                json!({"var": var.name(), "set": set})
            });
            let state = match &key {
                None => "no key needed",
                Some(key) if key["set"] == true => "key set",
                Some(_) => "key missing",
            };
            // The ledger's newest row first: the first call of this provider is its last.
            let prefix = format!("{name}/");
            let last = latest
                .iter()
                .find(|c| c.model.starts_with(&prefix))
                .map(|c| match &c.error {
                    None => json!({"outcome": "ok", "model": c.model, "at": c.at}),
                    Some(message) => json!({
                        "outcome": "error",
                        "kind": error_kind(message),
                        "message": message,
                        "model": c.model,
                        "at": c.at,
                    }),
                });
            json!({
                "id": name,
                "kind": provider.kind.as_str(),
                "base_url": provider.base_url,
                "used_by": used_by.get(name.as_str()).cloned().unwrap_or_default(),
                "summaries": summaries == Some(name.as_str()),
                "key": key,
                "state": state,
                "last_call": last,
            })
        })
        .collect();
    Json(json!({"generation": live.generation(), "providers": providers})).into_response()
}

/// A failed call's kind, in words, from the ledger's error text (written by the LLM layer's error
/// messages: see `opc_agents::llm::LlmError`).
fn error_kind(message: &str) -> String {
    if let Some(at) = message.find(" returned HTTP ") {
        let status: String = message[at + 15..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        return match status.as_str() {
            "401" | "403" => format!("HTTP {status} (the key was refused)"),
            "429" => "HTTP 429 (rate-limited)".to_string(),
            _ => format!("HTTP {status}"),
        };
    }
    let kinds = [
        ("could not reach ", "unreachable"),
        ("response stream was cut off", "stream cut off"),
        ("sent a malformed response", "malformed response"),
        ("did not answer within", "timed out"),
        ("is missing: set the environment variable", "key missing"),
        ("no provider is configured for model", "unknown model"),
        ("egress guard stopped", "stopped by the privacy guard"),
        ("privacy gateway could not mask", "privacy gateway failed"),
    ];
    kinds
        .iter()
        .find(|(needle, _)| message.contains(needle))
        .map_or_else(|| "error".to_string(), |(_, kind)| (*kind).to_string())
}

/// What an agent is doing, from its live tasks: thinking beats waiting on a human, which beats
/// waiting on children.
pub(super) fn state_of(tasks: &[&TaskRecord]) -> &'static str {
    let has = |f: fn(TaskState) -> bool| tasks.iter().any(|t| f(t.state));
    if has(|s| {
        matches!(
            s,
            TaskState::Created
                | TaskState::Assigned
                | TaskState::Executing
                | TaskState::ResultPropagating
        )
    }) {
        "thinking"
    } else if has(|s| s == TaskState::AwaitingApproval) {
        "waiting on approval"
    } else if has(|s| s == TaskState::Delegated) {
        "waiting on children"
    } else {
        "idle"
    }
}

/// `GET /admin/api/nodes`: on PostgreSQL, every node of the cluster this process is one of, alive
/// or not: name, address, start, last heartbeat, trees it holds, slots in use, and its config
/// digest, flagged when it differs from the newest live node's (`config_differs`: a node still
/// running an older config, or a newer one the others have not restarted into). `cluster: false`
/// and no nodes on SQLite, where one process owns the file.
pub async fn nodes(State(admin): State<Arc<Admin>>) -> Response {
    let Some(cluster) = admin.cluster.clone() else {
        return Json(json!({"cluster": false, "nodes": []})).into_response();
    };
    let ttl = cluster.lease_ttl();
    let me = cluster.node().id.clone();
    let rows = match tokio::spawn(async move { cluster.nodes().await }).await {
        Ok(Ok(rows)) => rows,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    };
    Json(nodes_json(&rows, &me, ttl, now_ms())).into_response()
}

/// The nodes table as the console shows it (see [`nodes`]), at `now`.
fn nodes_json(rows: &[opc_agents::store::NodeRow], me: &str, ttl: Duration, now: i64) -> Value {
    let newest = crate::node::newest_digest(rows, now, ttl);
    let list: Vec<Value> = rows
        .iter()
        .map(|n| {
            let alive = n.alive(now, ttl);
            json!({
                "id": n.id,
                "address": n.address,
                "host": n.host,
                "pid": n.pid,
                "started_ms": n.started_ms,
                "heartbeat_ms": n.heartbeat_ms,
                "heartbeat_age": crate::node::age(n.heartbeat_ms, now),
                "alive": alive,
                "stopped": n.stopped,
                "state": if alive { "alive" } else if n.stopped { "stopped" } else { "lost" },
                "trees": n.trees,
                "slots_in_use": n.slots_in_use,
                "slots_total": n.slots_total,
                "config_digest": n.config_digest,
                "config_differs": newest.is_some_and(|d| d != n.config_digest),
                "this": n.id == me,
            })
        })
        .collect();
    json!({
        "cluster": true,
        "this": me,
        "lease_ms": ttl.as_millis() as u64,
        "newest_digest": newest,
        "nodes": list,
    })
}

/// Midnight UTC today, in Unix ms.
fn start_of_day() -> i64 {
    let now = now_ms();
    now - now.rem_euclid(86_400_000)
}

/// `GET /admin/api/tasks`: recent conversations' requests (root tasks), newest first, each with its
/// whole tree's totals (live while it runs), its platform, and the node that ran it (`cluster`:
/// whether this process is a node of one, so the page shows the column).
pub async fn tasks(State(admin): State<Arc<Admin>>) -> Response {
    let Some(gateway) = admin.gateway.get() else {
        return not_running();
    };
    let engine = gateway.engine().clone();
    let platforms = gateway.platforms();
    let cluster = admin.cluster.is_some();
    let read = tokio::spawn(async move {
        let store = engine.store();
        let roots = store.recent_roots(RECENT).await?;
        let mut out = Vec::with_capacity(roots.len());
        for root in roots {
            let totals = store.totals(root.id).await?;
            out.push((root, totals));
        }
        Ok::<_, opc_agents::store::StoreError>(out)
    })
    .await;
    match read {
        Ok(Ok(roots)) => {
            let now = now_ms();
            let list: Vec<Value> = roots
                .into_iter()
                .map(|(root, totals)| {
                    json!({
                        "id": root.id,
                        "conversation": root.conversation_id,
                        "node": root.node,
                        "platform": platforms.get(&root.conversation_id).map_or("cli", String::as_str),
                        "agent": root.agent,
                        "input": crate::term::one_line(&root.input, 120),
                        "state": root.state.as_str(),
                        "live": !root.state.is_terminal(),
                        "created_at": root.created_at,
                        "duration_ms": root.finished_at.unwrap_or(now) - root.created_at,
                        "tokens_in": totals.tokens_in,
                        "tokens_out": totals.tokens_out,
                        "cost_usd": totals.cost_usd,
                        "unknown_usage_calls": totals.unknown_usage_calls,
                    })
                })
                .collect();
            Json(json!({"cluster": cluster, "tasks": list})).into_response()
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

/// `GET /admin/api/tasks/{id}`: one request's delegation tree — every task with its timeline
/// (state, times), its LLM calls (tokens, cost, attempts, tools asked for), its approvals, and the
/// final answer or error. `{id}` may be any task of the tree.
pub async fn task(State(admin): State<Arc<Admin>>, Path(id): Path<i64>) -> Response {
    let Some(gateway) = admin.gateway.get() else {
        return not_running();
    };
    let engine = gateway.engine().clone();
    let read = tokio::spawn(async move {
        let store = engine.store();
        let task = store.task(id).await?;
        let tree = store.tree(task.root_id).await?;
        let mut calls = BTreeMap::new();
        for t in &tree {
            calls.insert(t.id, store.calls(t.id).await?);
        }
        let approvals: Vec<_> = store
            .recent_approvals(10_000)
            .await?
            .into_iter()
            .filter(|a| a.root_id == task.root_id)
            .collect();
        let totals = store.totals(task.root_id).await?;
        let tools = store.tool_calls(task.root_id).await?;
        Ok::<_, opc_agents::store::StoreError>((tree, calls, approvals, totals, tools))
    })
    .await;
    match read {
        Ok(Ok((tree, calls, approvals, totals, tools))) => {
            let tasks: Vec<Value> = tree
                .iter()
                .map(|t| {
                    // The task's tool calls: tool, duration, outcome, a command's exit code, and
                    // what the tool noted as safe to show (never its input).
                    let own: Vec<_> = tools.iter().filter(|c| c.task_id == t.id).collect();
                    json!({
                        "task": t,
                        "state": t.state.as_str(),
                        "calls": calls.get(&t.id),
                        "tools": own,
                    })
                })
                .collect();
            Json(json!({"tasks": tasks, "approvals": approvals, "totals": totals})).into_response()
        }
        Ok(Err(opc_agents::store::StoreError::NoTask(_))) => {
            error(StatusCode::NOT_FOUND, &format!("there is no task {id}"))
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

/// `POST /admin/api/tasks/{id}/cancel`: cancel the request `{id}` belongs to, with its whole tree,
/// as `/cancel` does in a chat.
pub async fn cancel(State(admin): State<Arc<Admin>>, Path(id): Path<i64>) -> Response {
    let Some(gateway) = admin.gateway.get() else {
        return not_running();
    };
    let engine = gateway.engine().clone();
    let root = match engine.store().task(id).await {
        Ok(t) => t.root_id,
        Err(opc_agents::store::StoreError::NoTask(_)) => {
            return error(StatusCode::NOT_FOUND, &format!("there is no task {id}"));
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    match tokio::spawn(async move { engine.cancel(root).await }).await {
        Ok(Ok(cancelled)) => {
            tracing::info!(
                root,
                tasks = cancelled.len(),
                "request cancelled from the admin console"
            );
            Json(json!({"root": root, "cancelled": cancelled})).into_response()
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the cancel did not finish",
        ),
    }
}

/// `GET /admin/api/approvals`: the latest approvals, pending and decided, newest first.
pub async fn approvals(State(admin): State<Arc<Admin>>) -> Response {
    let Some(gateway) = admin.gateway.get() else {
        return not_running();
    };
    let engine = gateway.engine().clone();
    match tokio::spawn(async move { engine.store().recent_approvals(APPROVALS).await }).await {
        Ok(Ok(list)) => Json(json!({"approvals": list})).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    }
}

/// A decision from the console.
#[derive(Deserialize)]
pub struct Decision {
    decision: String,
}

/// `POST /admin/api/approvals/{id}` with `{"decision"}`: decide as the operator, as in the web chat.
pub async fn decide(
    State(admin): State<Arc<Admin>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    body: Result<Json<Decision>, JsonRejection>,
) -> Response {
    let Some(gateway) = admin.gateway.get() else {
        return not_running();
    };
    let Ok(Json(body)) = body else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "expected a JSON body {\"decision\": \"<one of the approval's options>\"}",
        );
    };
    let engine = gateway.engine().clone();
    let by = super::save::who(&headers);
    match tokio::spawn(async move { engine.decide(id, &body.decision, by).await }).await {
        Ok(Ok(Decided::Recorded(a))) => Json(json!({"decided": true, "approval": a})).into_response(),
        Ok(Ok(Decided::AlreadyDecided(a))) => (
            StatusCode::CONFLICT,
            Json(json!({"error": format!("approval {id} was already decided: {}", a.decision_text().unwrap_or_default()), "approval": a})),
        )
            .into_response(),
        Ok(Ok(Decided::Expired(a))) => (
            StatusCode::CONFLICT,
            Json(json!({"error": format!("approval {id} had expired; it was rejected"), "approval": a})),
        )
            .into_response(),
        Ok(Err(EngineError::NoApproval(_)) | Ok(Decided::NotFound)) => {
            error(StatusCode::NOT_FOUND, &format!("there is no approval {id}"))
        }
        Ok(Err(e @ EngineError::BadDecision { .. })) => {
            error(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string())
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the decision did not finish"),
    }
}

/// `GET /admin/api/costs`: spend today, this week (7 days) and this month (30 days), by agent, by
/// model and by platform, most expensive first; and apart, by kind of work (`by_work`: `task`, the
/// conversations' own calls, and `memory`, fact extraction and consolidation after them) with the
/// memory work by agent (`memory_by_agent`), and `embedding`, the remote embedding calls of recall
/// and facts (issue 39), by model in `embeddings`. The totals and `by_model` hold every kind;
/// `by_agent` and `by_platform` the calls of agents (embedding calls have neither).
pub async fn costs(State(admin): State<Arc<Admin>>) -> Response {
    let Some(gateway) = admin.gateway.get() else {
        return not_running();
    };
    let engine = gateway.engine().clone();
    let platforms = gateway.platforms();
    let day = 86_400_000;
    let periods = [
        ("today", start_of_day()),
        ("week", now_ms() - 7 * day),
        ("month", now_ms() - 30 * day),
    ];
    let read = tokio::spawn(async move {
        let store = engine.store();
        let mut spend = Vec::with_capacity(periods.len());
        for (name, since) in periods {
            let mut rows = store.spend_since(since).await?;
            let embedding = store.embedding_spend_since(since).await?;
            rows.extend(embedding);
            spend.push((name, rows));
        }
        Ok::<_, opc_agents::store::StoreError>(spend)
    })
    .await;
    let spend = match read {
        Ok(Ok(spend)) => spend,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the read did not finish"),
    };
    let mut out = serde_json::Map::new();
    for (name, rows) in spend {
        let (embedding, calls): (Vec<Spend>, Vec<Spend>) =
            rows.iter().cloned().partition(|s| s.work == "embedding");
        let platform_of = |s: &Spend| {
            platforms
                .get(&s.conversation)
                .cloned()
                .unwrap_or_else(|| "cli".into())
        };
        out.insert(
            name.into(),
            json!({
                "total": group(&rows, |_| "all".into()).first().cloned().unwrap_or(json!({"key": "all", "calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0})),
                "by_agent": group(&calls, |s| s.agent.clone()),
                "by_model": group(&rows, |s| s.model.clone()),
                "by_platform": group(&calls, platform_of),
                "by_work": group(&rows, |s| s.work.clone()),
                "memory_by_agent": group(
                    &rows.iter().filter(|s| s.work == "memory").cloned().collect::<Vec<_>>(),
                    |s| s.agent.clone(),
                ),
                "embeddings": group(&embedding, |s| s.model.clone()),
            }),
        );
    }
    Json(Value::Object(out)).into_response()
}

/// Sum `rows` by `key`, most expensive first.
fn group(rows: &[Spend], key: impl Fn(&Spend) -> String) -> Vec<Value> {
    let mut sums: HashMap<String, (u64, u64, u64, f64)> = HashMap::new();
    for r in rows {
        let e = sums.entry(key(r)).or_default();
        e.0 += r.calls;
        e.1 += r.tokens_in;
        e.2 += r.tokens_out;
        e.3 += r.cost_usd;
    }
    let mut out: Vec<(String, (u64, u64, u64, f64))> = sums.into_iter().collect();
    out.sort_by(|a, b| b.1.3.total_cmp(&a.1.3).then(a.0.cmp(&b.0)));
    out.into_iter()
        .map(|(k, (calls, i, o, cost))| {
            json!({"key": k, "calls": calls, "tokens_in": i, "tokens_out": o, "cost_usd": cost})
        })
        .collect()
}

/// `GET /admin/api/channels`: each running platform's activity since start.
pub async fn channels(State(admin): State<Arc<Admin>>) -> Response {
    let Some(gateway) = admin.gateway.get() else {
        return not_running();
    };
    let list: Vec<Value> = gateway
        .channels()
        .into_iter()
        .map(|(platform, stats)| json!({"platform": platform.as_str(), "connected": true, "stats": stats}))
        .collect();
    Json(json!({"channels": list})).into_response()
}

/// One engine event as the console streams it: its kind and its JSON, serialised once for every tab.
#[derive(Clone)]
pub struct ConsoleEvent {
    kind: Arc<str>,
    json: Arc<str>,
}

/// How many console events a slow tab may fall behind before it is told it missed some.
const CONSOLE_BACKLOG: usize = 1024;

/// The console's own event feed: one task follows the engine's bus, drops streamed tokens and
/// serialises each other event once; tabs subscribe here. So fifty open tabs cost the engine one
/// subscriber, not fifty woken for every token.
pub fn console_feed(
    engine: &opc_agents::Engine,
    closing: tokio_util::sync::CancellationToken,
) -> tokio::sync::broadcast::Sender<ConsoleEvent> {
    let (feed, _) = tokio::sync::broadcast::channel(CONSOLE_BACKLOG);
    let sender = feed.clone();
    let mut receiver = engine.events().subscribe();
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                next = receiver.recv() => next,
                () = closing.cancelled() => return,
            };
            match next {
                Ok(Event::Token { .. }) => {}
                Ok(event) => {
                    if sender.receiver_count() == 0 {
                        continue;
                    }
                    let value = serde_json::to_value(&event).unwrap_or_default();
                    let kind: Arc<str> = value["event"].as_str().unwrap_or("event").into();
                    let _ = sender.send(ConsoleEvent {
                        kind,
                        json: value.to_string().into(),
                    });
                }
                // The feed itself fell behind the engine: tell the tabs.
                Err(RecvError::Lagged(missed)) => {
                    let _ = sender.send(ConsoleEvent {
                        kind: "lagged".into(),
                        json: json!({"missed": missed}).to_string().into(),
                    });
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    feed
}

/// `GET /admin/api/events`: the engine's events as they happen (server-sent events named by kind),
/// streamed tokens left out.
pub async fn events(State(admin): State<Arc<Admin>>) -> Response {
    let Some(feed) = admin.feed.get() else {
        return not_running();
    };
    let receiver = feed.subscribe();
    let closing = admin.closing.clone();
    let stream = futures_util::stream::unfold(receiver, move |mut receiver| {
        let closing = closing.clone();
        async move {
            let next = tokio::select! {
                next = receiver.recv() => next,
                // `opc run` is stopping: end the stream so the server can close.
                () = closing.cancelled() => return None,
            };
            let sse = match next {
                Ok(event) => SseEvent::default().event(&*event.kind).data(&*event.json),
                Err(RecvError::Lagged(missed)) => SseEvent::default()
                    .event("lagged")
                    .data(json!({"missed": missed}).to_string()),
                Err(RecvError::Closed) => return None,
            };
            Some((Ok::<SseEvent, Infallible>(sse), receiver))
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn row(
        id: &str,
        started: i64,
        heartbeat: i64,
        stopped: bool,
        digest: &str,
    ) -> opc_agents::store::NodeRow {
        opc_agents::store::NodeRow {
            instance: 1,
            id: id.into(),
            address: Some(format!("10.0.0.1:{}", 7000 + started / 1000)),
            host: "box".into(),
            pid: 42,
            started_ms: started,
            heartbeat_ms: heartbeat,
            stopped,
            trees: 2,
            slots_total: 4,
            slots_in_use: 1,
            config_digest: digest.into(),
        }
    }

    /// Every node is listed with its state; a differing config is flagged against the newest live
    /// node's, and this process's node is marked.
    #[test]
    fn nodes_are_listed_with_their_state_and_config() {
        let ttl = Duration::from_secs(15);
        let rows = [
            row("a", 1_000, 99_000, false, "aaaaaaaaaaaa"),
            row("b", 2_000, 98_000, false, "bbbbbbbbbbbb"),
            row("c", 3_000, 50_000, false, "aaaaaaaaaaaa"),
            row("d", 4_000, 60_000, true, "aaaaaaaaaaaa"),
        ];
        let v = nodes_json(&rows, "a", ttl, 100_000);
        assert_eq!(v["cluster"], true);
        assert_eq!(v["newest_digest"], "bbbbbbbbbbbb");
        let states: Vec<(&str, &str, bool, bool)> = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["id"].as_str().unwrap(),
                    n["state"].as_str().unwrap(),
                    n["config_differs"].as_bool().unwrap(),
                    n["this"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            states,
            [
                ("a", "alive", true, true),
                ("b", "alive", false, false),
                ("c", "lost", true, false),
                ("d", "stopped", true, false),
            ]
        );
        assert_eq!(v["nodes"][0]["heartbeat_age"], "1s");
        assert_eq!(v["nodes"][0]["slots_in_use"], 1);
        assert_eq!(v["nodes"][0]["address"], "10.0.0.1:7001");
    }

    #[test]
    fn failed_calls_are_named_by_their_kind() {
        assert_eq!(
            error_kind("llm returned HTTP 401: invalid x-api-key (gave up after 1 attempts)"),
            "HTTP 401 (the key was refused)"
        );
        assert_eq!(error_kind("llm returned HTTP 503: busy"), "HTTP 503");
        assert_eq!(
            error_kind("could not reach llm at http://127.0.0.1:9: refused"),
            "unreachable"
        );
        assert_eq!(
            error_kind("the API key for provider `llm` is missing: set the environment variable K"),
            "key missing"
        );
        assert_eq!(error_kind("something else"), "error");
    }
}
