//! The admin console, served by `opc run` under `/admin` on the web listener (the chat stays at `/`).
//!
//! Pages: **Org** (the tree with each agent's live state, the model providers, and on PostgreSQL
//! the cluster's nodes), **Tasks** (recent requests and one
//! request's delegation tree, with cancel), **Approvals** (decided here too), **Costs**, **Channels**,
//! **Events** (live), **Memory**, **Privacy** ([`live`], [`memory`]) and **Config** — the text of
//! `opc.config.yaml` validated as you type ([`config`]), structured edits as minimal text edits, and a
//! save with the diff first, an ETag check, an atomic write, the previous version kept and an audit
//! line ([`save`]), then applied to the running process ([`crate::reload`]); on PostgreSQL it also
//! lists the cluster's config history with the nodes running each version ([`cluster`]).
//!
//! Invariants:
//! - every endpoint is a [`Page`], so it sits behind the listener's one access check (loopback, or the
//!   access token) and the route-walk test covers it;
//! - the page loads nothing from another host: HTML, CSS and JS are compiled into the binary and served
//!   in one response under a per-response CSP nonce;
//! - validating text never touches the file on disk or the running config.

mod blocks;
mod cluster;
mod config;
mod live;
mod logs;
mod memory;
mod org;
mod overview;
mod save;
mod session;
mod timeline;
mod vault;

pub(crate) use logs::store::{EventStore, POSTGRES_COMPONENT as EVENTS_POSTGRES_COMPONENT};

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::State;
use axum::http::Method;
use axum::response::Response;
use opc_adapters::Page;

const PAGE: &str = include_str!("assets/admin.html");
const CSS: &str = include_str!("assets/admin.css");
const JS: &str = include_str!("assets/admin.js");
/// The page modules, one file each (a page's view is most of a file); they run before [`JS`], which
/// starts them with its shared helpers. Their styles follow [`CSS`].
const MODULES_JS: [&str; 9] = [
    include_str!("assets/graph.js"),
    include_str!("assets/session.js"),
    include_str!("assets/overview.js"),
    include_str!("assets/logs.js"),
    include_str!("assets/orggraph.js"),
    include_str!("assets/timeline.js"),
    include_str!("assets/blocks.js"),
    include_str!("assets/vault.js"),
    include_str!("assets/preview.js"),
];
const MODULES_CSS: [&str; 5] = [
    include_str!("assets/session.css"),
    include_str!("assets/overview.css"),
    include_str!("assets/orggraph.css"),
    include_str!("assets/timeline.css"),
    include_str!("assets/panels.css"),
];

/// Largest config text the console takes — to validate, to edit, to diff or to save (a 1,000-agent org
/// is ~200 kB). The one limit: every endpoint that reads a config text answers 413 above it.
const MAX_CONFIG_BYTES: usize = 4 << 20;

/// Largest request body of those endpoints, derived from [`MAX_CONFIG_BYTES`] and the same for all:
/// a save carries two texts (the edit and the version it started from), and JSON escaping can double a
/// text's size (a newline is `\n`). A body within it whose text is over the limit is refused by the
/// endpoint, with the same 413.
const MAX_BODY_BYTES: usize = 4 * MAX_CONFIG_BYTES;

/// What the console's endpoints share.
pub struct Admin {
    /// The config file `opc run` loaded.
    config_path: PathBuf,
    /// Where its relative paths (prompt files) resolve.
    base_dir: PathBuf,
    /// The page with its CSS and JS filled in (the nonce is per response).
    page: String,
    /// Held from a save's check of the file to its write.
    save_lock: tokio::sync::Mutex<()>,
    /// Applies a saved config to the running process (`opc run` attaches it once the engine and
    /// gateway exist; without it a save is written and applied at the next start).
    reloader: std::sync::OnceLock<Arc<crate::reload::Reloader>>,
    /// The running gateway (its engine, threads and channel books) for the live pages.
    gateway: std::sync::OnceLock<crate::gateway::Gateway>,
    /// The running config.
    live: std::sync::OnceLock<Arc<crate::live::LiveConfig>>,
    /// Recall memory, for the Memory page's search.
    recall: std::sync::OnceLock<opc_memory::recall::RecallStore>,
    /// The engine's events as the Events page streams them (see [`live::console_feed`]).
    feed: std::sync::OnceLock<tokio::sync::broadcast::Sender<live::ConsoleEvent>>,
    /// Cancelled when `opc run` stops: ends the console's event streams.
    closing: tokio_util::sync::CancellationToken,
    /// The cluster this process is a node of (PostgreSQL), for the Org page's nodes table and the
    /// Config page's cluster history; `None` on SQLite.
    cluster: Option<Arc<dyn opc_agents::store::Cluster>>,
    /// The engine's events as stored for the Events page's history and the overview (see [`logs`]):
    /// recorded from `attach` on.
    history: std::sync::OnceLock<logs::History>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("config_path", &self.config_path)
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// The console for the config at `config_path` (relative paths in it resolve against `base_dir`),
    /// of a process that is a node of `cluster` when it has one.
    pub fn new(
        config_path: PathBuf,
        base_dir: PathBuf,
        org_name: &str,
        cluster: Option<Arc<dyn opc_agents::store::Cluster>>,
    ) -> Arc<Admin> {
        let title = format!("{org_name} — OPC admin");
        let page = PAGE
            .replace("{{TITLE}}", &html_escape::encode_text(&title))
            .replace(
                "{{CSS}}",
                &[&[CSS][..], &MODULES_CSS[..]].concat().join("\n"),
            )
            .replace("{{JS}}", &[&MODULES_JS[..], &[JS][..]].concat().join("\n"));
        Arc::new(Admin {
            config_path,
            base_dir,
            page,
            save_lock: tokio::sync::Mutex::new(()),
            reloader: std::sync::OnceLock::new(),
            gateway: std::sync::OnceLock::new(),
            live: std::sync::OnceLock::new(),
            recall: std::sync::OnceLock::new(),
            feed: std::sync::OnceLock::new(),
            closing: tokio_util::sync::CancellationToken::new(),
            cluster,
            history: std::sync::OnceLock::new(),
        })
    }

    /// Serve the running process (set once): saves are applied with its reloader, the live pages
    /// read its gateway, config and recall memory.
    pub fn attach(&self, running: Running) {
        let _ = self.reloader.set(running.reloader);
        let feed = live::console_feed(running.gateway.engine(), self.closing.clone());
        let _ = self.feed.set(feed);
        // Stored events: this node's own (a cluster's nodes each record theirs, tagged).
        let node = self.cluster.as_ref().map(|c| c.node().id.clone());
        let history = logs::start(running.gateway.engine(), &running.live, node);
        let _ = self.history.set(history);
        let _ = self.gateway.set(running.gateway);
        let _ = self.live.set(running.live);
        let _ = self.recall.set(running.recall);
    }

    /// Settle what saves interrupted by a crash left behind ([`save::recover`]): called by `opc run`
    /// at start, before the listener serves. Returns one line per thing done.
    pub fn recover(&self) -> Vec<String> {
        save::recover(&self.config_path, &self.base_dir.join(save::HISTORY_DIR))
    }

    /// `opc run` is stopping: end open event streams.
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// The console's pages.
    pub fn pages(self: &Arc<Self>) -> Vec<Page> {
        let mut pages = self.core_pages();
        pages.extend(session::pages(self));
        pages.extend(overview::pages(self));
        pages.extend(logs::pages(self));
        pages.extend(org::pages(self));
        pages.extend(timeline::pages(self));
        pages.extend(blocks::pages(self));
        pages.extend(vault::pages(self));
        pages
    }

    /// The pages of the console's first pages (org, tasks, approvals, costs, events, memory, privacy,
    /// config).
    fn core_pages(self: &Arc<Self>) -> Vec<Page> {
        vec![
            Page::new(Method::GET, "/admin", page, self.clone()),
            Page::new(Method::GET, "/admin/api/config", config::read, self.clone()),
            Page::new(
                Method::POST,
                "/admin/api/config/edit",
                config::edit,
                self.clone(),
            )
            .body_limit(MAX_BODY_BYTES),
            Page::new(
                Method::GET,
                "/admin/api/reload",
                reload_status,
                self.clone(),
            ),
            Page::new(Method::GET, "/admin/api/agents", live::agents, self.clone()),
            Page::new(
                Method::GET,
                "/admin/api/providers",
                live::providers,
                self.clone(),
            ),
            Page::new(Method::GET, "/admin/api/nodes", live::nodes, self.clone()),
            Page::new(Method::GET, "/admin/api/tasks", live::tasks, self.clone()),
            Page::new(
                Method::GET,
                "/admin/api/tasks/{id}",
                live::task,
                self.clone(),
            ),
            Page::new(
                Method::POST,
                "/admin/api/tasks/{id}/cancel",
                live::cancel,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/approvals",
                live::approvals,
                self.clone(),
            ),
            Page::new(
                Method::POST,
                "/admin/api/approvals/{id}",
                live::decide,
                self.clone(),
            ),
            Page::new(Method::GET, "/admin/api/costs", live::costs, self.clone()),
            Page::new(
                Method::GET,
                "/admin/api/channels",
                live::channels,
                self.clone(),
            ),
            Page::new(Method::GET, "/admin/api/events", live::events, self.clone()),
            Page::new(
                Method::GET,
                "/admin/api/memory/blocks",
                memory::blocks,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/memory/search",
                memory::search,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/memory/facts",
                memory::facts,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/memory/facts/{id}",
                memory::fact_history,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/memory/graph",
                memory::graph,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/privacy",
                memory::privacy,
                self.clone(),
            ),
            Page::new(
                Method::POST,
                "/admin/api/config/validate",
                config::validate,
                self.clone(),
            )
            .body_limit(MAX_BODY_BYTES),
            Page::new(
                Method::POST,
                "/admin/api/config/diff",
                save::preview,
                self.clone(),
            )
            .body_limit(MAX_BODY_BYTES),
            Page::new(
                Method::POST,
                "/admin/api/config/save",
                save::save,
                self.clone(),
            )
            .body_limit(MAX_BODY_BYTES),
            Page::new(
                Method::GET,
                "/admin/api/config/history",
                save::list,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/config/cluster",
                cluster::cluster_history,
                self.clone(),
            ),
            Page::new(
                Method::GET,
                "/admin/api/config/history/{name}",
                save::version,
                self.clone(),
            ),
        ]
    }
}

/// What the console reads of a running `opc run`.
pub struct Running {
    /// Applies saved configs.
    pub reloader: Arc<crate::reload::Reloader>,
    /// The gateway (and its engine).
    pub gateway: crate::gateway::Gateway,
    /// The running config.
    pub live: Arc<crate::live::LiveConfig>,
    /// Recall memory.
    pub recall: opc_memory::recall::RecallStore,
}

/// `GET /admin/api/reload`: the running config's generation and the last reload (the console's banner
/// shows a refused one).
async fn reload_status(State(admin): State<Arc<Admin>>) -> axum::Json<serde_json::Value> {
    axum::Json(match admin.reloader.get() {
        Some(reloader) => serde_json::to_value(reloader.status()).unwrap_or_default(),
        None => serde_json::json!({"generation": 1, "last": null, "stale": false, "reload": false}),
    })
}

/// The console's one HTML response, with a fresh CSP nonce.
async fn page(State(admin): State<Arc<Admin>>) -> Response {
    opc_adapters::pages::html_page(&admin.page)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_page_is_whole_and_loads_nothing_from_elsewhere() {
        let admin = Admin::new("opc.config.yaml".into(), ".".into(), "Acme <Labs>", None);
        assert!(
            admin.page.contains("{{NONCE}}"),
            "the nonce is filled per response"
        );
        assert!(
            !admin.page.replace("{{NONCE}}", "n").contains("{{"),
            "every placeholder but the nonce filled"
        );
        assert!(admin.page.contains("Acme &lt;Labs&gt; — OPC admin"));
        for external in ["http://", "https://", "//cdn", "src=\"//"] {
            assert!(!admin.page.contains(external), "{external}");
        }
    }
}
