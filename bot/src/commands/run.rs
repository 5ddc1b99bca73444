//! `opc run`: the gateway — web chat on `channels.web.listen` (127.0.0.1:7420 by default), plus Slack and
//! Discord when their sections are in the config — wired to the agents engine.
//!
//! Start-up order is chosen so that the main job starts on a fresh machine and fails early otherwise:
//! config → platform secrets (a missing one is an error naming its variable) → database and engine (a
//! missing LLM key only warns: every message is then answered with a notice naming the variable) →
//! listening socket → platform connections → ready line on stdout. A cluster node (PostgreSQL) binds
//! its socket before the engine starts, since it records where it serves when it joins.
//!
//! On PostgreSQL, `opc run` is a node of a cluster (issue 36 §2): named by `--node NAME`, else
//! `OPC_NODE`, else `<host>-<pid>` ([`crate::node`]), it passes the cluster to the engine, which
//! queues every root in the database and runs those this node claims, under a lease of
//! `framework.cluster.leaseTtl`. Start-up says so in one line on stderr. On SQLite there is no
//! cluster: one process owns the file.
//!
//! `--listen IP:PORT` serves on another address than `channels.web.listen`, under the config's rule: an
//! address other machines can reach needs `channels.web.accessTokenEnv` (else `opc run` refuses, exit
//! 2, before anything starts). The config is left as written (the override is not a config change, so
//! a reload never reports the listener as changed). A `publicUrl` without `accessTokenEnv` is a config
//! error, so `opc run` refuses it like any invalid config.
//!
//! Every request passes the front door ([`opc_adapters::web::exposure`]) before routing: a foreign
//! `Host` is answered 421, and with a token every path under `/admin` and `/api` answers 401 without it.
//!
//! With `channels.web.accessTokenEnv`, browsers sign in (`/signin`) for a session kept in the org's
//! database ([`crate::sessions`]), so it survives a restart; `channels.web.viewerTokenEnv` names a
//! second token, for a read-only console. Both variables are read like the platforms' secrets (missing
//! or empty: refused, naming the variable), must differ, and are never printed.
//!
//! A running gateway reloads its config without a restart ([`crate::reload`]): on a save from the
//! admin console, a change to the file or a prompt file, or `SIGHUP`.
//!
//! With telemetry on (`OTEL_EXPORTER_OTLP_ENDPOINT` or `framework.telemetry`), start-up says where
//! traces and metrics go in one line on stderr; after a clean stop `main` flushes what is pending
//! (within 5 s).
//!
//! Invariants: an invalid config never starts a server (nor replaces a running one); secrets are read from the environment only and
//! never printed; SIGINT and SIGTERM stop accepting, close platform connections, let in-flight tasks
//! persist their state, and exit 0.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use opc_adapters::discord::{DiscordAdapter, DiscordConfig};
use opc_adapters::session::{Access, SignIn};
use opc_adapters::slack::{SlackAdapter, SlackConfig, SlackMode};
use opc_adapters::web::{WebChat, WebConfig};
use opc_adapters::{Adapter, Inbound};
use opc_agents::EngineOptions;
use opc_hierarchy::Loaded;
use opc_hierarchy::schema::{EnvVar, SlackMode as ConfigSlackMode};
use tokio::sync::mpsc;

use crate::gateway::threads::Threads;
use crate::gateway::{Gateway, Parts};
use crate::live::LiveConfig;
use crate::reload::Reloader;
use crate::term::{eprint, print};

mod org_page;
mod routes;

/// How many inbound events may wait for the gateway before adapters push back (HTTP 503 on the web
/// chat, a logged drop on platforms that already got their ack).
const INBOX_CAPACITY: usize = 4096;

pub fn run(
    path: &Path,
    listen: Option<SocketAddr>,
    node: Option<&str>,
    telemetry: Option<&opc_telemetry::Telemetry>,
) -> ExitCode {
    let started = Instant::now();
    let loaded = match crate::setup::load_config(path) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let address = match listen_address(&loaded.config.channels.web, listen) {
        Ok(address) => address,
        Err(message) => {
            eprint(&message);
            return ExitCode::from(2);
        }
    };
    let node = match node_name(&loaded, node) {
        Ok(node) => node,
        Err(message) => {
            eprint(&message);
            return ExitCode::from(2);
        }
    };
    match crate::setup::runtime() {
        Ok(runtime) => runtime.block_on(serve(
            Arc::new(loaded),
            path,
            address,
            node,
            started,
            telemetry,
        )),
        Err(code) => code,
    }
}

/// This node's name on PostgreSQL (`--node`, else `OPC_NODE`, else `<host>-<pid>`); `None` on
/// SQLite, where `--node` is noted as having no effect and `OPC_NODE` is not read.
fn node_name(loaded: &Loaded, flag: Option<&str>) -> Result<Option<String>, String> {
    if loaded.config.framework.memory.storage != opc_hierarchy::schema::Storage::Postgres {
        if flag.is_some() {
            eprint(
                "note: --node has no effect with `framework.memory.storage: sqlite`: one `opc run` owns the SQLite file\n",
            );
        }
        return Ok(None);
    }
    let env = std::env::var(crate::node::NODE_ENV).ok();
    crate::node::resolve_name(
        flag,
        env.as_deref(),
        &crate::node::hostname(),
        std::process::id(),
    )
    .map(Some)
}

/// The address to serve on: `--listen` when given, else `channels.web.listen`. `--listen` follows the
/// config's rule (checked there by validation): a non-loopback address needs an access token.
fn listen_address(
    web: &opc_hierarchy::schema::Web,
    listen: Option<SocketAddr>,
) -> Result<SocketAddr, String> {
    let Some(address) = listen else {
        return Ok(web.listen);
    };
    if !address.ip().is_loopback() && web.access_token_env.is_none() {
        return Err(format!(
            "error: --listen {address} is reachable from other machines, so the web chat needs an access token\n\
             hint: add `accessTokenEnv: OPC_WEB_TOKEN` under `channels.web` in the config (and export \
             OPC_WEB_TOKEN), or listen on 127.0.0.1\n"
        ));
    }
    Ok(address)
}

/// The secrets named by the config, read from the environment.
struct Secrets {
    slack: Option<SlackConfig>,
    discord: Option<DiscordConfig>,
    web_token: Option<String>,
    /// The viewer token (`channels.web.viewerTokenEnv`): a read-only console.
    viewer_token: Option<String>,
}

/// Read `var`, or explain which config key names it and how to fix it.
fn secret(var: &EnvVar, key: &str, remove: &str) -> Result<String, String> {
    match std::env::var(var.name()) {
        Ok(value) if !value.trim().is_empty() => Ok(value),
        _ => Err(format!(
            "error: `{key}` names the environment variable {name}, which is not set\n\
             hint: `export {name}=…` before `opc run`, or remove `{remove}` from the config\n",
            name = var.name()
        )),
    }
}

fn optional_secret(
    var: Option<&EnvVar>,
    key: &str,
    remove: &str,
) -> Result<Option<String>, String> {
    var.map(|var| secret(var, key, remove)).transpose()
}

fn secrets(loaded: &Loaded) -> Result<Secrets, String> {
    let channels = &loaded.config.channels;
    let slack = match &channels.slack {
        Some(slack) => {
            let remove = "channels.slack";
            Some(SlackConfig {
                mode: match slack.mode {
                    ConfigSlackMode::Socket => SlackMode::Socket,
                    ConfigSlackMode::Http => SlackMode::Http,
                },
                bot_token: secret(&slack.bot_token_env, "channels.slack.botTokenEnv", remove)?,
                app_token: match slack.mode {
                    ConfigSlackMode::Socket => optional_secret(
                        slack.app_token_env.as_ref(),
                        "channels.slack.appTokenEnv",
                        remove,
                    )?,
                    ConfigSlackMode::Http => None,
                },
                signing_secret: match slack.mode {
                    ConfigSlackMode::Http => optional_secret(
                        slack.signing_secret_env.as_ref(),
                        "channels.slack.signingSecretEnv",
                        remove,
                    )?,
                    ConfigSlackMode::Socket => None,
                },
                api_base_url: slack.api_base_url.clone(),
            })
        }
        None => None,
    };
    let discord = match &channels.discord {
        Some(discord) => {
            let remove = "channels.discord";
            Some(DiscordConfig {
                bot_token: secret(
                    &discord.bot_token_env,
                    "channels.discord.botTokenEnv",
                    remove,
                )?,
                public_key: optional_secret(
                    discord.public_key_env.as_ref(),
                    "channels.discord.publicKeyEnv",
                    remove,
                )?,
                application_id: discord.application_id.clone(),
                api_base_url: discord.api_base_url.clone(),
            })
        }
        None => None,
    };
    let web_token = optional_secret(
        channels.web.access_token_env.as_ref(),
        "channels.web.accessTokenEnv",
        "channels.web.accessTokenEnv",
    )?;
    let viewer_token = optional_secret(
        channels.web.viewer_token_env.as_ref(),
        "channels.web.viewerTokenEnv",
        "channels.web.viewerTokenEnv",
    )?;
    // The same value for both would make every viewer an admin (the access token wins).
    if let (Some(admin), Some(viewer), Some(admin_var), Some(viewer_var)) = (
        &web_token,
        &viewer_token,
        &channels.web.access_token_env,
        &channels.web.viewer_token_env,
    ) && admin == viewer
    {
        return Err(format!(
            "error: `channels.web.accessTokenEnv` ({}) and `channels.web.viewerTokenEnv` ({}) hold the same token, \
             so a viewer would be an admin\n\
             hint: give the viewer token a value of its own (e.g. `export {}=$(openssl rand -hex 32)`)\n",
            admin_var.name(),
            viewer_var.name(),
            viewer_var.name()
        ));
    }
    Ok(Secrets {
        slack,
        discord,
        web_token,
        viewer_token,
    })
}

async fn serve(
    loaded: Arc<Loaded>,
    path: &Path,
    address: SocketAddr,
    node: Option<String>,
    started: Instant,
    telemetry: Option<&opc_telemetry::Telemetry>,
) -> ExitCode {
    // serenity, slack-morphism and reqwest all use rustls; one process-wide provider must be chosen
    // before the first TLS client exists.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let secrets = match secrets(&loaded) {
        Ok(secrets) => secrets,
        Err(message) => {
            eprint(&message);
            return ExitCode::from(2);
        }
    };
    let database = match crate::setup::database(&loaded) {
        Ok(database) => database,
        Err(code) => return code,
    };
    let engine_store = match crate::setup::open(&database).await {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    // The gateway's threads and cards, and (below) the web chat's transcript, keep their own
    // connections to the org's database.
    let opened = match &database {
        crate::setup::Database::Sqlite(path) => Threads::open(path).map(|threads| {
            (
                threads,
                opc_adapters::web::WebDatabase::Sqlite(path.clone()),
            )
        }),
        crate::setup::Database::Postgres { url, .. } => {
            match (
                opc_pg::Blocking::connect(url, "gateway"),
                opc_pg::Blocking::connect(url, "web"),
            ) {
                (Ok(gateway), Ok(web)) => Threads::open_postgres(gateway)
                    .map(|threads| (threads, opc_adapters::web::WebDatabase::Postgres(web))),
                (Err(e), _) | (_, Err(e)) => {
                    eprint(&format!("error: {e}\n"));
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    let (threads, web_database) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            eprint(&format!("error: {e}\n"));
            return ExitCode::FAILURE;
        }
    };
    // The console's sign-in sessions, in the same database, when there is a token to sign in with.
    let sessions = match &secrets.web_token {
        Some(_) => match open_sessions(&database) {
            Ok(sessions) => Some(sessions),
            Err(message) => {
                eprint(&message);
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    // Scratch dirs that unsandboxed runs of a crashed OPC left behind. Enforced runs leave none:
    // their HOME and /tmp vanish with their mount namespace, and their processes die with OPC.
    let stale = opc_sandbox::Sandbox::remove_stale();
    if stale > 0 {
        eprint(&format!(
            "opc: removed {stale} sandbox scratch dir(s) left by a crashed OPC\n"
        ));
    }
    // On PostgreSQL this process is a node of the org's cluster (see the module doc): its socket
    // first, so the node joins with the address it serves on.
    let early = match &node {
        Some(_) => match bind(address).await {
            Ok(listener) => Some(listener),
            Err(code) => return code,
        },
        None => None,
    };
    let missing_key = crate::setup::missing_key(&loaded);
    let lease = loaded.config.framework.cluster.lease_ttl;
    let cluster = node.and_then(|name| {
        let serves = early
            .as_ref()
            .map(|l| l.local_addr().unwrap_or(address).to_string());
        let identity = crate::node::identity(name, serves, loaded.report.source.as_bytes());
        engine_store.cluster(identity, lease)
    });
    let options = EngineOptions {
        // With no key, resumed trees could only fail; they wait for a restart with the key set.
        resume_suspended: missing_key.is_none(),
        cluster: cluster.clone(),
        ..EngineOptions::default()
    };
    let (engine, recall) =
        match super::chat::build_engine(&loaded, &database, engine_store.store, options).await {
            Ok(parts) => parts,
            Err(message) => {
                eprint(&message);
                return ExitCode::from(2);
            }
        };
    if let (Some(cluster), crate::setup::Database::Postgres { place, .. }) = (&cluster, &database) {
        eprint(&format!(
            "opc: node {} joined the cluster on PostgreSQL at {place} (lease {})\n",
            cluster.node().id,
            humantime::format_duration(lease)
        ));
    }
    let embeds = loaded.config.agents.values().any(|a| {
        a.memory.recall
            || a.memory.archival
            || a.tools
                .contains(&opc_hierarchy::schema::Tool::ConversationSearch)
    });
    if let Some(telemetry) = telemetry {
        eprint(&format!("opc: {}\n", telemetry.description()));
        // The queue gauges, read when metrics are collected (on the SDK's thread): calls waiting
        // for the NER model, and recall rows waiting for their embedding (when anything embeds).
        let store = recall.store.clone();
        let backlog = move || {
            let (_, vectors, last) = store.cursors().ok()?;
            u64::try_from(last.saturating_sub(vectors)).ok()
        };
        opc_telemetry::metrics::observe_queues(
            opc_agents::llm::privacy::ner_queue,
            embeds.then(|| Box::new(backlog) as Box<dyn Fn() -> Option<u64> + Send + Sync>),
        );
    }
    if let Some((provider, var)) = &missing_key {
        eprint(&format!(
            "warning: the API key for provider `{provider}` is missing: set {var} and restart; \
             until then every message is answered with this notice\n"
        ));
    }

    let listener = match early {
        Some(listener) => listener,
        None => match bind(address).await {
            Ok(listener) => listener,
            Err(code) => return code,
        },
    };
    let bound = listener.local_addr().unwrap_or(address);
    // The names the listener answers to (its `Host` check): known once the port is bound.
    let names = match opc_adapters::pages::Names::new(
        bound,
        loaded.config.channels.web.public_url.as_deref(),
    ) {
        Ok(names) => names,
        Err(e) => {
            eprint(&format!("error: {e}\nhint: fix `channels.web.publicUrl`\n"));
            return ExitCode::from(2);
        }
    };

    let (inbox, inbound) = mpsc::channel::<Inbound>(INBOX_CAPACITY);
    let web = match WebChat::new(
        WebConfig {
            title: loaded.config.framework.name.clone(),
            database: web_database,
        },
        inbox.clone(),
    ) {
        Ok(web) => web,
        Err(e) => {
            eprint(&format!(
                "error: {e}\nhint: `framework.memory.path` must be a writable file path\n"
            ));
            return ExitCode::FAILURE;
        }
    };
    let mut adapters: Vec<Arc<dyn Adapter>> = vec![web];
    if let Some(config) = secrets.slack {
        match SlackAdapter::connect(config, inbox.clone()).await {
            Ok(slack) => adapters.push(slack),
            Err(e) => {
                return platform_failed("Slack", &e.to_string(), "channels.slack", &adapters).await;
            }
        }
    }
    // Discord: alone, the gateway connection opens now; in a cluster only the node holding the
    // cluster's Discord singleton opens it (`gateway::discord_hold`), and every node serves REST and
    // the interactions endpoint.
    let mut discord_hold = None;
    if let Some(config) = secrets.discord {
        let connected = match &cluster {
            Some(cluster) => DiscordAdapter::standby(config, inbox.clone())
                .await
                .inspect(|discord| {
                    discord_hold = Some(crate::gateway::discord_hold::DiscordHold::spawn(
                        discord.clone(),
                        cluster.clone(),
                    ));
                }),
            None => DiscordAdapter::connect(config, inbox.clone()).await,
        };
        match connected {
            Ok(discord) => adapters.push(discord),
            Err(e) => {
                return platform_failed("Discord", &e.to_string(), "channels.discord", &adapters)
                    .await;
            }
        }
    }
    drop(inbox);

    let live = LiveConfig::new(loaded.clone());
    let admin = crate::admin::Admin::new(
        path.to_path_buf(),
        loaded.base_dir.clone(),
        &loaded.config.framework.name,
        cluster.clone(),
    );
    // A save cut short by a crash (kill -9, power loss) left a temporary file or an unrecorded copy.
    for note in admin.recover() {
        eprint(&format!("opc: {note}\n"));
    }
    // Who may come in: the access token, the viewer token, and sessions signed in with either.
    let web = &loaded.config.channels.web;
    let mut access = Access::new(
        secrets.web_token.as_deref(),
        secrets.viewer_token.as_deref(),
    );
    if let Some(store) = sessions {
        access = access.with_sign_in(SignIn {
            store,
            limit: Arc::new(crate::sessions::Attempts::new()),
            secure: web
                .public_url
                .as_deref()
                .is_some_and(|url| url.trim().to_ascii_lowercase().starts_with("https://")),
            title: loaded.config.framework.name.clone(),
        });
    }
    let access = Arc::new(access);
    // The front door before routing: a foreign `Host` is answered 421, and with a token every path
    // under /admin and /api needs it first (see `opc_adapters::web::exposure`).
    let exposure = match opc_adapters::web::exposure::Exposure::new(
        bound,
        web.public_url.as_deref(),
        access.clone(),
    ) {
        Ok(exposure) => exposure,
        Err(e) => {
            eprint(&format!("error: {e}\nhint: fix `channels.web.publicUrl`\n"));
            return ExitCode::from(2);
        }
    };
    let app = exposure.guard(routes::app(
        &live,
        &admin,
        &adapters,
        access,
        names,
        engine.ner_slot(),
    ));
    let platforms: Vec<&str> = adapters.iter().map(|a| a.platform().as_str()).collect();
    // The privacy detector's NER slot, taken before the engine moves into the gateway, and how it
    // loads. Until the model lands, LLM calls that need it wait (up to `nerWait`) and fail closed
    // without it, or, with `requireNer: false`, go out masked by patterns alone. The slot keeps the
    // loader even when nothing needs it yet: a reload that asks for names starts it, a call arriving
    // before the load below starts it, and a failed load is retried by the next call that needs it.
    let ner = engine.ner_slot();
    {
        let privacy = &loaded.config.framework.privacy;
        let meanwhile = if privacy.require_ner {
            format!(
                "LLM calls wait for it (up to {}, `nerWait`) and fail closed without it",
                humantime::format_duration(privacy.ner_wait)
            )
        } else {
            "privacy masks by patterns alone (`requireNer: false`): names and addresses reach the LLM unmasked".to_string()
        };
        super::models::install_ner_loader(&ner, meanwhile);
    }
    let gateway = Gateway::new(Parts {
        live: live.clone(),
        engine: engine.clone(),
        missing_key,
        adapters: adapters.clone(),
        threads,
        cluster: cluster.clone(),
    });
    gateway.start(inbound).await;
    // Hot reload: saves from the console, changes on disk, SIGHUP.
    let reloader = Reloader::new(
        path.to_path_buf(),
        live.clone(),
        engine.clone(),
        gateway.clone(),
    );
    admin.attach(crate::admin::Running {
        reloader: reloader.clone(),
        gateway: gateway.clone(),
        live,
        recall: recall.store.clone(),
    });
    reloader.on_sighup();
    let watcher = reloader.watch();
    // On a cluster, configs saved in other nodes' consoles are written here and applied.
    let _follower = cluster.as_ref().map(|c| reloader.follow(c.clone()));
    // Listen for signals before saying "ready": a SIGTERM sent the moment the ready line appears must
    // stop OPC gracefully, not kill it with the default action.
    let stop = StopSignals::register();
    print(&format!(
        "opc: {} — {} agents; web chat on http://{bound}/ (admin console: /admin) · channels: {} · ready in {} ms (Ctrl-C to stop)\n",
        loaded.config.framework.name,
        loaded.org.len(),
        platforms.join(", "),
        started.elapsed().as_millis()
    ));
    // The privacy gateway's NER model loads (or is fetched first) after "ready", on its own thread,
    // when a wanted type needs it.
    if opc_agents::llm::privacy::needs_ner(&loaded.config) {
        ner.load();
    }
    // Recall's and facts' embedder, the same way: until the local model lands, both search by
    // keywords (BM25); a remote endpoint (`openai-compatible`) is ready at once.
    if embeds {
        super::embedder::fill(&loaded, &recall.embed, &recall.store, &engine);
    }
    // On a signal: stop accepting, and close the adapters at once — that ends open event streams and
    // platform sockets, which graceful shutdown would otherwise wait for forever.
    let closing = adapters.clone();
    let console = admin.clone();
    // With the peer's address: forwarded headers are trusted only from a loopback peer.
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        stop.recv().await;
        console.close();
        for adapter in &closing {
            adapter.shutdown().await;
        }
    })
    .await;
    drop(watcher);
    // The Discord connection closed with the adapters; give its hold back for another node.
    if let Some(hold) = discord_hold {
        hold.stop().await;
    }
    gateway.shutdown().await;
    drop(ner);
    // Stops the recall indexer (it finishes the batch it is on; the rest is caught up at next start).
    drop(recall);
    match served {
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

/// The sessions table in the org's database (its own connection), or the printed error.
fn open_sessions(
    database: &crate::setup::Database,
) -> Result<Arc<crate::sessions::Sessions>, String> {
    let opened = match database {
        crate::setup::Database::Sqlite(path) => crate::sessions::Sessions::open(path),
        crate::setup::Database::Postgres { url, .. } => opc_pg::Blocking::connect(url, "sessions")
            .map_err(crate::sessions::SessionsError::from)
            .and_then(crate::sessions::Sessions::open_postgres),
    };
    opened.map(Arc::new).map_err(|e| format!("error: {e}\n"))
}

/// The web listener on `address`, or the printed error (exit 1).
async fn bind(address: SocketAddr) -> Result<tokio::net::TcpListener, ExitCode> {
    tokio::net::TcpListener::bind(address).await.map_err(|e| {
        eprint(&format!(
            "error: cannot listen on {address}: {e}\nhint: stop whatever uses that port, or change `channels.web.listen` (or pass --listen IP:PORT)\n"
        ));
        ExitCode::FAILURE
    })
}

async fn platform_failed(
    platform: &str,
    error: &str,
    section: &str,
    started: &[Arc<dyn Adapter>],
) -> ExitCode {
    for adapter in started {
        adapter.shutdown().await;
    }
    eprint(&format!(
        "error: cannot connect to {platform}: {error}\nhint: check the token named in `{section}`, or remove `{section}` to run without {platform}\n"
    ));
    ExitCode::from(2)
}

/// SIGINT (Ctrl-C) and SIGTERM, registered at once: a signal that arrives before anything awaits
/// [`StopSignals::recv`] is kept, not handled by the default action (which would kill the process).
struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn register() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let interrupt = signal(SignalKind::interrupt());
            let terminate = signal(SignalKind::terminate());
            for (name, result) in [("SIGINT", &interrupt), ("SIGTERM", &terminate)] {
                if let Err(e) = result {
                    tracing::warn!(signal = name, error = %e, "could not listen for a stop signal");
                }
            }
            StopSignals {
                interrupt: interrupt.ok(),
                terminate: terminate.ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// Resolves on SIGINT or SIGTERM, whichever comes first.
    async fn recv(mut self) {
        #[cfg(unix)]
        {
            async fn next(signal: Option<&mut tokio::signal::unix::Signal>) {
                match signal {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                () = next(self.interrupt.as_mut()) => {},
                () = next(self.terminate.as_mut()) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
