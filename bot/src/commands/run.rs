//! `opc run`: start OPC on the config's web address.
//!
//! This first version validates the config and serves a read-only view of the org: `/` (the org
//! chart as a page), `/api/org` (the same as JSON) and `/healthz`. The chat gateway issue turns this
//! into the full gateway (web chat, Slack, Discord); the start-up and shutdown path here is what it
//! builds on.
//!
//! Invariants: an invalid config never starts a server; SIGINT and SIGTERM stop accepting, finish
//! in-flight requests and exit 0.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{Html, Json};
use axum::routing::get;
use opc_hierarchy::{Loaded, OrgTree};
use serde_json::{Value, json};

use super::{eprint, print};

pub fn run(path: &Path) -> ExitCode {
    let loaded = match super::load_config(path) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    match super::runtime() {
        Ok(runtime) => runtime.block_on(serve(Arc::new(loaded))),
        Err(code) => code,
    }
}

async fn serve(loaded: Arc<Loaded>) -> ExitCode {
    let address = loaded.config.channels.web.listen;
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(e) => {
            eprint(&format!(
                "error: cannot listen on {address}: {e}\nhint: stop whatever uses that port, or change `channels.web.listen`\n"
            ));
            return ExitCode::FAILURE;
        }
    };
    let bound = listener.local_addr().unwrap_or(address);
    print(&format!(
        "opc: {} — {} agents; org view on http://{bound}/ (Ctrl-C to stop)\n",
        loaded.config.framework.name,
        loaded.org.len()
    ));
    let app = Router::new()
        .route("/", get(org_page))
        .route("/api/org", get(org_json))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(loaded);
    match axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
    {
        Ok(()) => {
            print("opc: stopped\n");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprint(&format!("error: server failed: {e}\n"));
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM, whichever comes first.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
}

/// The org as JSON: each agent with its role, level, parent and children, root first.
async fn org_json(State(loaded): State<Arc<Loaded>>) -> Json<Value> {
    let org = &loaded.org;
    let agents: Vec<Value> = breadth_first(org)
        .into_iter()
        .map(|id| {
            json!({
                "id": id,
                "role": org.role(id),
                "level": org.level(id),
                "parent": org.parent(id),
                "children": org.children(id),
            })
        })
        .collect();
    Json(json!({"name": loaded.config.framework.name, "root": org.root(), "agents": agents}))
}

/// The org chart as a page of nested lists.
async fn org_page(State(loaded): State<Arc<Loaded>>) -> Html<String> {
    let org = &loaded.org;
    let name = html_escape::encode_text(&loaded.config.framework.name);
    let mut page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{name} — OPC</title>\
         <style>body{{font:15px system-ui,sans-serif;margin:2em}}li{{margin:.3em 0}}.role{{color:#555}}</style>\
         </head><body><h1>{name}</h1><p>{} agents in {} levels.</p><ul>",
        org.len(),
        org.depth() + 1
    );
    // Iterative walk with explicit close markers, so a deep org cannot overflow the stack.
    enum Step<'a> {
        Open(&'a str),
        Close,
    }
    let mut stack = vec![Step::Open(org.root())];
    while let Some(step) = stack.pop() {
        match step {
            Step::Open(id) => {
                let role = html_escape::encode_text(org.role(id).unwrap_or_default());
                let _ = write!(
                    page,
                    "<li><b>{}</b> <span class=\"role\">{role}</span><ul>",
                    html_escape::encode_text(id)
                );
                stack.push(Step::Close);
                stack.extend(org.children(id).into_iter().rev().map(Step::Open));
            }
            Step::Close => page.push_str("</ul></li>"),
        }
    }
    page.push_str("</ul></body></html>");
    Html(page)
}

fn breadth_first(org: &OrgTree) -> Vec<&str> {
    let mut order = vec![org.root()];
    order.extend(org.descendants(org.root()));
    order
}
