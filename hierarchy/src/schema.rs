//! The typed `opc.config.yaml`: every section, key, type and default.
//!
//! Each struct lists its YAML keys once (the `KEYS` constant next to its `decode`), so adding a setting is
//! adding a field, its key and one line of decoding. Defaults live in the `decode` functions and are
//! mirrored in docs/config.md.
//!
//! Invariant: these types say what is *well-formed*; whether the org makes sense (one root, no cycles,
//! models that name providers …) is checked afterwards by `validate`, which can see the whole config.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;

use crate::decode::{Decode, Decoder, keywords};
use crate::diagnostic::{Diagnostic, Path};
use crate::yaml::{Node, Value};

/// A whole `opc.config.yaml`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Global settings: models, providers, memory, execution limits, privacy.
    pub framework: Framework,
    /// Chat platforms.
    pub channels: Channels,
    /// How chat messages reach the org: rate limits, approvers, the approvals channel.
    pub gateway: Gateway,
    /// The org: agent id → agent, in file order.
    pub agents: IndexMap<String, Agent>,
    /// Memory blocks that several agents reference by label.
    pub shared_blocks: IndexMap<String, SharedBlock>,
}

/// `framework:` — settings that apply to the whole org.
#[derive(Clone, Debug, PartialEq)]
pub struct Framework {
    /// Display name of the org.
    pub name: String,
    /// Model used by agents that name none: `provider/model`, or a model of the default provider.
    pub default_model: String,
    /// Cheap model for summarising long child results and for consolidation; defaults to `default_model`.
    pub fast_model: Option<String>,
    /// Provider used for bare model names; optional when only one provider is configured.
    pub default_provider: Option<String>,
    /// Named LLM endpoints.
    pub providers: IndexMap<String, Provider>,
    /// Memory storage and embeddings.
    pub memory: MemorySettings,
    /// Concurrency, depth and time limits.
    pub execution: Execution,
    /// The privacy gateway.
    pub privacy: Privacy,
    /// Where agents' workspaces live (`framework.workspace`).
    pub workspace: WorkspaceSettings,
    /// How Bash commands are confined (`framework.sandbox`).
    pub sandbox: SandboxSettings,
    /// Several `opc run` nodes on one PostgreSQL database (`framework.cluster`).
    pub cluster: ClusterSettings,
    /// OpenTelemetry export (`framework.telemetry`); the standard `OTEL_*` variables win over it.
    pub telemetry: TelemetrySettings,
    /// The admin console (`framework.console`).
    pub console: ConsoleSettings,
}

/// `framework.console` — what the admin console keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct ConsoleSettings {
    /// How long the engine's events are kept for the Events page's history (`eventRetention`,
    /// default 7 days); older ones are deleted. At least [`ConsoleSettings::MIN_EVENT_RETENTION`].
    pub event_retention: Duration,
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        ConsoleSettings {
            event_retention: Duration::from_secs(7 * 24 * 60 * 60),
        }
    }
}

impl ConsoleSettings {
    /// The shortest retention: events younger than this are always kept.
    pub const MIN_EVENT_RETENTION: Duration = Duration::from_secs(60 * 60);
    const KEYS: &'static [&'static str] = &["eventRetention"];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let d = ConsoleSettings::default();
        let event_retention = f.or(cx, path, "eventRetention", d.event_retention);
        if event_retention < Self::MIN_EVENT_RETENTION {
            cx.push(
                Diagnostic::error(
                    path.key("eventRetention"),
                    f.node("eventRetention").map_or(node.span, |n| n.span),
                    format!(
                        "an event retention of {} is too short: the shortest is {}",
                        humantime::format_duration(event_retention),
                        humantime::format_duration(Self::MIN_EVENT_RETENTION)
                    ),
                )
                .with_hint("write e.g. `eventRetention: 7d` (the default) or `30d`; events are what the console's Events page can look back on"),
            );
            return None;
        }
        Some(ConsoleSettings { event_retention })
    }
}

/// `framework.telemetry` — where traces and metrics go over OTLP/HTTP. Everything is optional and
/// off by default; the standard `OTEL_*` variables win over these keys (`opc-telemetry` resolves
/// both). Headers (a hosted backend's API key) are never written here: `headersEnv` names the
/// variable holding them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TelemetrySettings {
    /// The collector's base URL (`http://127.0.0.1:4318`); `/v1/traces` and `/v1/metrics` are
    /// appended. `None`: no export unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
    pub endpoint: Option<String>,
    /// The OTLP/HTTP encoding; default `http/protobuf`.
    pub protocol: Option<OtlpProtocol>,
    /// The variable holding the export's headers (`name=value,name2=value2`).
    pub headers_env: Option<EnvVar>,
    /// Record the masked message content on model-call spans.
    pub capture_content: Option<bool>,
}

/// The OTLP/HTTP encoding of `framework.telemetry.protocol`. gRPC is not built, and is refused
/// with that said (see [`OtlpProtocol`]'s decoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf` (the default).
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

impl OtlpProtocol {
    /// The word that spells this value in `opc.config.yaml` (and in `OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::HttpProtobuf => "http/protobuf",
            OtlpProtocol::HttpJson => "http/json",
        }
    }
}

/// `framework.cluster` — how several `opc run` nodes share one org on PostgreSQL
/// (`framework.memory.storage: postgres`); with SQLite one process owns the file and this has no
/// effect.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSettings {
    /// How long a node's lease on a tree lasts without renewal (`leaseTtl`): when a node dies, its
    /// trees run again elsewhere after about this long. At least [`ClusterSettings::MIN_LEASE_TTL`].
    pub lease_ttl: Duration,
}

/// `framework.workspace` — the directory under which every agent's workspace lies.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkspaceSettings {
    /// As written; relative to the config file's directory. Default `.opc/workspaces`.
    pub root: PathBuf,
}

keywords! {
    /// Whether Bash runs inside the kernel sandbox.
    pub enum SandboxMode {
        /// Always sandboxed; where the kernel lacks a needed feature, Bash is refused (fail-closed).
        Enforce = "enforce",
        /// Commands run unconfined, with only the scrubbed environment. Warned about by `opc validate`
        /// and `opc run`.
        Off = "off",
    }
}

/// `framework.sandbox` — the confinement of Bash commands.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxSettings {
    /// `enforce` (default) or `off`.
    pub mode: SandboxMode,
    /// Whether commands may use the network (default false).
    pub network: bool,
    /// Extra environment variable NAMES passed into Bash, their values read from OPC's environment;
    /// never a provider key or a platform token (validation refuses names that look like one).
    pub env: Vec<String>,
}

keywords! {
    /// What happens to a Bash command that no `bash.allow` prefix covers.
    pub enum Unlisted {
        /// Ask the agent's approvers in the conversation (default).
        Ask = "ask",
        /// Refuse it: a tool error naming the policy.
        Deny = "deny",
    }
}

/// `agents.<id>.bash` — which commands run without asking.
#[derive(Clone, Debug, PartialEq)]
pub struct BashPolicy {
    /// Command prefixes that run at once (`"*"` = every command), as written; narrowed by the nearest
    /// ancestor with a `bash` section (see `OrgTree::bash_allow`).
    pub allow: Vec<String>,
    /// What happens to other commands.
    pub unlisted: Unlisted,
}

keywords! {
    /// Which wire protocol a provider speaks.
    pub enum ProviderKind {
        /// Anthropic Messages API.
        Anthropic = "anthropic",
        /// OpenAI Chat Completions, as served by OpenAI, Ollama, vLLM and llama.cpp.
        OpenAiCompatible = "openai-compatible",
    }
}

/// `framework.providers.<name>` — one LLM endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Provider {
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Base URL of the API.
    pub base_url: String,
    /// Environment variable that holds the API key (none for keyless local servers).
    pub api_key_env: Option<EnvVar>,
    /// Price table: model id → USD per million tokens.
    pub models: IndexMap<String, ModelPrice>,
    /// At most this many calls in flight to this provider (`maxConcurrentRequests`); unbounded if unset.
    pub max_concurrent_requests: Option<NonZeroU32>,
    /// At most this many calls started per minute (`requestsPerMinute`); unlimited if unset.
    pub requests_per_minute: Option<NonZeroU32>,
}

/// Price of one model in USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelPrice {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
}

keywords! {
    /// Where memory is stored.
    pub enum Storage {
        /// A local SQLite file (WAL mode).
        Sqlite = "sqlite",
        /// A PostgreSQL server (`framework.memory.postgres`), which several nodes can share.
        Postgres = "postgres",
    }
}

keywords! {
    /// Where embeddings are computed.
    pub enum EmbeddingProvider {
        /// In-process model (all-MiniLM-L6-v2).
        Local = "local",
        /// An OpenAI-compatible `/embeddings` endpoint.
        OpenAiCompatible = "openai-compatible",
    }
}

/// `framework.memory`.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySettings {
    /// Storage backend.
    pub storage: Storage,
    /// Database file, relative to the config file's directory.
    pub path: PathBuf,
    /// Embedding model.
    pub embedding: Embedding,
    /// Entity/relation graph memory.
    pub graph_enabled: bool,
    /// Sleep-time consolidation.
    pub consolidation: Consolidation,
    /// The PostgreSQL server, for `storage: postgres`.
    pub postgres: PostgresSettings,
}

/// `framework.memory.postgres`: where the PostgreSQL server is. The URL itself (it holds the
/// password) only ever comes from the environment variable named here.
#[derive(Clone, Debug, PartialEq)]
pub struct PostgresSettings {
    /// The variable holding the connection URL (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`).
    pub url_env: EnvVar,
    /// The most connections one node holds.
    pub max_connections: NonZeroU32,
}

impl Default for PostgresSettings {
    fn default() -> Self {
        PostgresSettings {
            url_env: EnvVar("DATABASE_URL".to_string()),
            max_connections: non_zero(16),
        }
    }
}

impl PostgresSettings {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, &["urlEnv", "maxConnections"])?;
        let d = PostgresSettings::default();
        if let Some(url) = f.node("urlEnv")
            && let crate::yaml::Value::Str(text) = &url.value
            && text.contains("://")
        {
            // A URL pasted where the variable's name belongs: it holds the password, so say what
            // it looks like without repeating it.
            let shown = text.split("://").next().unwrap_or("postgres");
            cx.push(
                Diagnostic::error(
                    path.key("urlEnv"),
                    url.span,
                    format!("`urlEnv` holds a connection URL (`{shown}://…`), which may carry a password, in the config file"),
                )
                .with_hint("write the name of the environment variable that holds the URL, e.g. `urlEnv: DATABASE_URL`, and set it where OPC runs: `export DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/opc`"),
            );
            return None;
        }
        Some(PostgresSettings {
            url_env: f.or(cx, path, "urlEnv", d.url_env),
            max_connections: f.or(cx, path, "maxConnections", d.max_connections),
        })
    }
}

/// `framework.memory.embedding`.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    /// Where embeddings are computed.
    pub provider: EmbeddingProvider,
    /// Model name.
    pub model: String,
    /// Vector dimensions.
    pub dimensions: NonZeroU32,
    /// Base URL of the OpenAI-compatible API (`POST {baseUrl}/embeddings`); required for
    /// `openai-compatible`, ignored for `local`.
    pub base_url: Option<String>,
    /// Environment variable holding the endpoint's API key (none for a keyless local server).
    pub api_key_env: Option<EnvVar>,
}

/// `framework.memory.consolidation`.
#[derive(Clone, Debug, PartialEq)]
pub struct Consolidation {
    /// Whether consolidation runs.
    pub enabled: bool,
    /// Run after this many agent interactions.
    pub frequency: NonZeroU32,
    /// Model for consolidation and fact extraction; defaults to the fast model.
    pub model: Option<String>,
    /// Memory-work tokens (extraction and consolidation, in and out) one agent may spend per UTC day;
    /// work past it waits for the next day (`maxTokensPerDay`).
    pub max_tokens_per_day: NonZeroU32,
    /// An agent idle this long after a completed task that consolidation has not seen yet gets a
    /// consolidation run without waiting for `frequency` tasks (`idleAfter`).
    pub idle_after: Duration,
}

/// `framework.execution`.
#[derive(Clone, Debug, PartialEq)]
pub struct Execution {
    /// Agent sessions running at once, across all tasks.
    pub max_concurrent_agents: NonZeroU32,
    /// Deepest allowed agent level (delegation hops from the root).
    pub max_hierarchy_depth: NonZeroU32,
    /// Time one task may take before it escalates as a timeout.
    pub task_timeout: Duration,
    /// Child results longer than this many tokens are summarised before the parent sees them.
    pub result_compression_threshold: NonZeroU32,
    /// Time a human has to decide an approval before it counts as rejected.
    pub approval_timeout: Duration,
}

keywords! {
    /// Kinds of personal data the privacy gateway detects: the config's spelling of
    /// `opc_shapes::EntityType`, which is what the detector supports. The two lists must name the same
    /// types in the same order (a test below checks it), so that every type the detector finds can be
    /// written here and `opc validate` can name the ones a config leaves out.
    pub enum PiiType {
        /// Person names.
        PersonName = "PERSON_NAME",
        /// E-mail addresses.
        Email = "EMAIL",
        /// Phone numbers.
        Phone = "PHONE",
        /// Payment card numbers (Luhn-checked).
        CreditCard = "CREDIT_CARD",
        /// API keys, tokens, private keys.
        ApiKey = "API_KEY",
        /// Postal addresses.
        Address = "ADDRESS",
        /// Cities, regions and countries named as someone's location.
        Location = "LOCATION",
        /// US social security numbers.
        Ssn = "SSN",
        /// IPv4 and IPv6 addresses.
        IpAddress = "IP_ADDRESS",
        /// International bank account numbers.
        Iban = "IBAN",
        /// URLs.
        Url = "URL",
    }
}

keywords! {
    /// What the privacy gateway does with detected personal data.
    pub enum PrivacyMode {
        /// Replace with consistent fake data of the same type, restored in replies.
        Mask = "mask",
        /// Replace with numbered typed placeholders (`[PERSON_NAME_1]`), restored in replies.
        Redact = "redact",
        /// Send requests containing personal data, unmasked, to `routeModel` (a model you trust).
        Route = "route",
    }
}

/// `framework.privacy`.
#[derive(Clone, Debug, PartialEq)]
pub struct Privacy {
    /// Global switch.
    pub enabled: bool,
    /// Which kinds of personal data to detect.
    pub detect_types: Vec<PiiType>,
    /// Terms never masked (public names such as the company's own).
    pub whitelist: Vec<String>,
    /// Minimum NER confidence, 0 to 1.
    pub confidence_threshold: f64,
    /// What to do with detected data.
    pub mode: PrivacyMode,
    /// `provider/model` that requests carrying personal data go to in `route` mode.
    pub route_model: Option<String>,
    /// How long an LLM call waits for the NER model (names, addresses) before it fails closed.
    pub ner_wait: Duration,
    /// Whether LLM calls need the NER model when a wanted type needs it (`false`: pattern-only
    /// masking until it loads, or for good if it cannot).
    pub require_ner: bool,
}

/// `channels:` — chat platforms. Slack and Discord run only when their section is present.
#[derive(Clone, Debug, PartialEq)]
pub struct Channels {
    /// Slack, if configured.
    pub slack: Option<Slack>,
    /// Discord, if configured.
    pub discord: Option<Discord>,
    /// The built-in web chat (always on).
    pub web: Web,
}

keywords! {
    /// How the Slack app receives events.
    pub enum SlackMode {
        /// Socket Mode websocket (needs no public URL).
        Socket = "socket",
        /// Events API over HTTP on the gateway's server.
        Http = "http",
    }
}

/// `channels.slack`.
#[derive(Clone, Debug, PartialEq)]
pub struct Slack {
    /// Socket Mode or HTTP Events API.
    pub mode: SlackMode,
    /// Env var holding the bot token (`xoxb-…`).
    pub bot_token_env: EnvVar,
    /// Env var holding the app-level token (`xapp-…`), needed for Socket Mode.
    pub app_token_env: Option<EnvVar>,
    /// Env var holding the signing secret, needed for HTTP mode.
    pub signing_secret_env: Option<EnvVar>,
    /// Slack Web API base URL (a proxy, or a fake in tests).
    pub api_base_url: String,
}

/// `channels.discord`.
#[derive(Clone, Debug, PartialEq)]
pub struct Discord {
    /// Env var holding the bot token.
    pub bot_token_env: EnvVar,
    /// Env var holding the application's public key, for the HTTP interactions endpoint.
    pub public_key_env: Option<EnvVar>,
    /// The application id (a public number, not a secret).
    pub application_id: Option<String>,
    /// Discord API base URL.
    pub api_base_url: String,
}

/// `channels.web` — the built-in web chat.
#[derive(Clone, Debug, PartialEq)]
pub struct Web {
    /// Address to serve on.
    pub listen: SocketAddr,
    /// Env var holding the access token; required for a non-loopback `listen` and with `public_url`.
    pub access_token_env: Option<EnvVar>,
    /// Env var holding the viewer token: a read-only console (no config save, no approvals, no
    /// cancel, no block edits) and no chat. Needs `access_token_env` beside it.
    pub viewer_token_env: Option<EnvVar>,
    /// The address people open when a reverse proxy stands in front (`https://opc.example.com`): its
    /// host is one the listener answers to, and its origin one it accepts changes from. Only a scheme,
    /// a host and an optional port, normalised without a trailing `/`.
    pub public_url: Option<String>,
}

/// `gateway:` — how chat messages reach the org.
#[derive(Clone, Debug, PartialEq)]
pub struct Gateway {
    /// Messages allowed per user and per channel before the sender is asked to slow down.
    pub rate_limit: RateLimit,
    /// Who may decide any agent's approval requests (agents can add their own `approvers`).
    pub approvers: Vec<Approver>,
    /// Where approval cards are posted, per platform; unset: in the conversation's thread.
    pub approvals_channel: ApprovalsChannel,
}

/// `gateway.rateLimit` — checked before any LLM work; a message over the limit gets one polite notice.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    /// Per person (platform user id).
    pub per_user: Rate,
    /// Per channel (all its users together).
    pub per_channel: Rate,
}

/// `messages` per `per`: a burst of `messages` at once, then one every `per / messages`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// How many messages.
    pub messages: NonZeroU32,
    /// In how long.
    pub per: Duration,
}

/// `gateway.approvalsChannel` — channel ids per platform.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApprovalsChannel {
    /// A Slack channel id (`C0123ABCD`).
    pub slack: Option<String>,
    /// A Discord channel id.
    pub discord: Option<String>,
}

/// The name of an environment variable that holds a secret. Secrets never appear in the config itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnvVar(pub String);

impl EnvVar {
    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// One agent of the org.
#[derive(Clone, Debug, PartialEq)]
pub struct Agent {
    /// Title shown to other agents and humans ("VP Engineering").
    pub role: String,
    /// Declared level (0 for the root); must equal the agent's depth when given.
    pub level: Option<u32>,
    /// The agent this one reports to; `None` only for the root.
    pub parent: Option<String>,
    /// Agents that report to this one.
    pub children: Vec<String>,
    /// The agent's instructions.
    pub prompt: Option<Prompt>,
    /// Model override: `provider/model` or a model of the default provider.
    pub model: Option<String>,
    /// Tools the agent may call.
    pub tools: Vec<Tool>,
    /// Memory settings.
    pub memory: AgentMemory,
    /// Who may decide this agent's approval requests (in addition to global approvers).
    pub approvers: Vec<Approver>,
    /// The agent's workspace, relative to `framework.workspace.root`; `None`: `<root>/<agent id>`.
    pub workspace: Option<PathBuf>,
    /// Which Bash commands run without asking; `None`: every command follows `unlisted: ask`.
    pub bash: Option<BashPolicy>,
}

/// Where an agent's prompt comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// `file:prompts/ceo.md` — a file relative to the config file's directory.
    File(PathBuf),
    /// The prompt text itself.
    Inline(String),
}

keywords! {
    /// Tools an agent can be given, spelled as in the config.
    pub enum Tool {
        /// Hand a task to one direct child and wait for its answer.
        Delegate = "delegate",
        /// Hand tasks to several direct children at once.
        DelegateParallel = "delegateParallel",
        /// Pass a problem up to the parent (error, timeout, uncertainty, approval needed).
        Escalate = "escalate",
        /// Ask a human to approve or reject.
        RequestApproval = "requestApproval",
        /// Read memory the agent may see.
        MemoryRead = "memory_read",
        /// Write memory the agent may change.
        MemoryWrite = "memory_write",
        /// Replace text in a core memory block.
        MemoryReplace = "memory_replace",
        /// Append to a core memory block.
        MemoryInsert = "memory_insert",
        /// Search recall memory (past conversations) the agent may read.
        ConversationSearch = "conversation_search",
        /// Read a file.
        Read = "Read",
        /// Write a file.
        Write = "Write",
        /// Edit a file.
        Edit = "Edit",
        /// Run a shell command.
        Bash = "Bash",
        /// Search file contents.
        Grep = "Grep",
        /// Find files by pattern.
        Glob = "Glob",
    }
}

impl Tool {
    /// The tool's name on the wire, as models see it (`delegateParallel` → `delegate_parallel`).
    pub fn wire_name(self) -> &'static str {
        match self {
            Tool::DelegateParallel => "delegate_parallel",
            Tool::RequestApproval => "request_approval",
            other => other.as_str(),
        }
    }

    /// Whether this tool hands work to children (and so needs children to exist).
    pub fn delegates(self) -> bool {
        matches!(self, Tool::Delegate | Tool::DelegateParallel)
    }
}

/// `agents.<id>.memory`.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentMemory {
    /// Core memory blocks, always in the agent's context.
    pub blocks: Vec<Block>,
    /// Conversation-history search.
    pub recall: bool,
    /// Long-term fact extraction.
    pub archival: bool,
    /// Labels of `sharedBlocks` this agent sees.
    pub shared_blocks: Vec<String>,
    /// Same-level agents that may read this agent's memory.
    pub share_with: Vec<String>,
}

/// A core memory block owned by one agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Unique label within the agent ("persona").
    pub label: String,
    /// What the block is for, shown to the agent.
    pub description: String,
    /// Initial content.
    pub value: String,
    /// Maximum length in characters.
    pub limit: NonZeroU32,
    /// Whether the agent itself may not edit it.
    pub read_only: bool,
}

/// `sharedBlocks.<label>` — a block several agents reference.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedBlock {
    /// What the block is for.
    pub description: String,
    /// Initial content.
    pub value: String,
    /// Maximum length in characters.
    pub limit: NonZeroU32,
    /// Whether agents may not edit it.
    pub read_only: bool,
}

keywords! {
    /// Chat platforms an approver can be identified on.
    pub enum Platform {
        /// Slack.
        Slack = "slack",
        /// Discord.
        Discord = "discord",
        /// The built-in web chat.
        Web = "web",
    }
}

/// A person or role allowed to decide approvals: `slack:U012AB3CD`, `discord:role:1234567890`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Approver {
    /// Platform the id belongs to.
    pub platform: Platform,
    /// Whether `id` names a role (everyone holding it may approve) rather than one user.
    pub is_role: bool,
    /// The platform's user or role id.
    pub id: String,
}

const DEFAULT_BLOCK_LIMIT: u32 = 2000;
/// Where the web chat listens unless `channels.web.listen` says otherwise.
pub const DEFAULT_WEB_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 7420);

fn non_zero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

impl Config {
    const KEYS: &'static [&'static str] =
        &["framework", "channels", "gateway", "agents", "sharedBlocks"];

    /// Decodes a whole document. Returns `None` only when the document is not a mapping at all; otherwise
    /// every well-formed part is kept so that semantic checks can still run on the rest.
    pub(crate) fn decode(doc: &Node, cx: &mut Decoder) -> Option<Config> {
        let root = Path::Root;
        if doc.value == Value::Null {
            cx.push(
                Diagnostic::error(root, doc.span, "the config is empty")
                    .with_hint("run `opc init` to write a working example, then edit it"),
            );
            return None;
        }
        let f = cx.fields(doc, root, Self::KEYS)?;
        let framework = match f.node("framework") {
            Some(node) => Framework::decode(node, root.key("framework"), cx),
            None => {
                cx.push(
                    Diagnostic::error(root, doc.span, "missing required key `framework`")
                        .with_hint("add a `framework:` section with at least `defaultModel` and `providers`"),
                );
                None
            }
        };
        let channels = match f.node("channels") {
            Some(node) => Channels::decode(node, root.key("channels"), cx),
            None => Some(Channels::default()),
        };
        let gateway = match f.node("gateway") {
            Some(node) => Gateway::decode(node, root.key("gateway"), cx),
            None => Some(Gateway::default()),
        };
        let agents = decode_agents(doc, f.node("agents"), cx);
        let shared_blocks = f.or_default(cx, root, "sharedBlocks");
        Some(Config {
            framework: framework?,
            channels: channels.unwrap_or_default(),
            gateway: gateway.unwrap_or_default(),
            agents,
            shared_blocks,
        })
    }
}

/// The `agents:` mapping; agent ids are checked here because they are keys, not values.
fn decode_agents(doc: &Node, node: Option<&Node>, cx: &mut Decoder) -> IndexMap<String, Agent> {
    let root = Path::Root;
    let path = root.key("agents");
    let Some(node) = node else {
        cx.push(
            Diagnostic::error(root, doc.span, "missing required key `agents`")
                .with_hint("define at least one agent, the root: `agents: { ceo: { role: CEO } }`"),
        );
        return IndexMap::new();
    };
    let Some(entries) = cx.unique_entries(node, path) else {
        return IndexMap::new();
    };
    if entries.is_empty() {
        cx.push(
            Diagnostic::error(path, node.span, "no agents are defined")
                .with_hint("define at least one agent, the root: `ceo: { role: CEO }`"),
        );
    }
    let mut agents = IndexMap::with_capacity(entries.len());
    for entry in entries {
        if !is_agent_id(&entry.key) {
            cx.push(
                Diagnostic::error(
                    path.key(&entry.key),
                    entry.key_span,
                    format!("`{}` is not a valid agent id", entry.key),
                )
                .with_hint("agent ids use lowercase letters, digits and `-` only, e.g. `vp-eng`"),
            );
        }
        if let Some(agent) = Agent::decode(&entry.value, path.key(&entry.key), cx) {
            agents.insert(entry.key.clone(), agent);
        }
    }
    agents
}

/// Agent ids are `[a-z0-9-]+`: they appear in namespaces, URLs and tool arguments unescaped.
pub fn is_agent_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl Framework {
    const KEYS: &'static [&'static str] = &[
        "name",
        "defaultModel",
        "fastModel",
        "defaultProvider",
        "providers",
        "memory",
        "execution",
        "privacy",
        "workspace",
        "sandbox",
        "cluster",
        "telemetry",
        "console",
    ];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let default_model = f.required(
            cx,
            path,
            node,
            "defaultModel",
            "name the model agents use by default, e.g. `defaultModel: anthropic/claude-sonnet-4-20250514`",
        );
        let providers: IndexMap<String, Provider> = f.or_default(cx, path, "providers");
        if providers.is_empty() && f.node("providers").is_none() {
            cx.push(
                Diagnostic::error(path, cx.key_span(path), "no LLM provider is configured")
                    .with_hint("add `providers: { anthropic: { kind: anthropic, apiKeyEnv: ANTHROPIC_API_KEY } }`"),
            );
        }
        let memory = f
            .node("memory")
            .and_then(|n| MemorySettings::decode(n, path.key("memory"), cx));
        let execution = f
            .node("execution")
            .and_then(|n| Execution::decode(n, path.key("execution"), cx));
        let privacy = f
            .node("privacy")
            .and_then(|n| Privacy::decode(n, path.key("privacy"), cx));
        let workspace = f
            .node("workspace")
            .and_then(|n| WorkspaceSettings::decode(n, path.key("workspace"), cx));
        let sandbox = f
            .node("sandbox")
            .and_then(|n| SandboxSettings::decode(n, path.key("sandbox"), cx));
        let cluster = f
            .node("cluster")
            .and_then(|n| ClusterSettings::decode(n, path.key("cluster"), cx));
        let telemetry = f
            .node("telemetry")
            .and_then(|n| TelemetrySettings::decode(n, path.key("telemetry"), cx));
        let console = f
            .node("console")
            .and_then(|n| ConsoleSettings::decode(n, path.key("console"), cx));
        Some(Framework {
            name: f.or(cx, path, "name", "OPC".to_string()),
            default_model: default_model?,
            fast_model: f.optional(cx, path, "fastModel"),
            default_provider: f.optional(cx, path, "defaultProvider"),
            providers,
            memory: memory.unwrap_or_default(),
            execution: execution.unwrap_or_default(),
            privacy: privacy.unwrap_or_default(),
            workspace: workspace.unwrap_or_default(),
            sandbox: sandbox.unwrap_or_default(),
            cluster: cluster.unwrap_or_default(),
            telemetry: telemetry.unwrap_or_default(),
            console: console.unwrap_or_default(),
        })
    }

    /// The model that summarises long results and consolidates memory.
    pub fn fast_model(&self) -> &str {
        self.fast_model.as_deref().unwrap_or(&self.default_model)
    }

    /// Splits a model reference into (provider name, model id).
    ///
    /// `anthropic/claude-x` names its provider. A bare `claude-x` belongs to the one provider whose price
    /// table lists it, else to `defaultProvider`, else to the only provider there is.
    pub fn resolve_model<'a>(&'a self, model: &'a str) -> Result<(&'a str, &'a str), ModelError> {
        let prefix = model.split_once('/');
        if let Some((provider, id)) = prefix
            && let Some((name, _)) = self.providers.get_key_value(provider)
        {
            if id.is_empty() {
                return Err(ModelError::EmptyModel);
            }
            return Ok((name.as_str(), id));
        }
        let mut listing = self
            .providers
            .iter()
            .filter(|(_, p)| p.models.contains_key(model));
        let provider = match (listing.next(), listing.next()) {
            (Some((name, _)), None) => name,
            _ => match &self.default_provider {
                Some(default) => match self.providers.get_key_value(default.as_str()) {
                    Some((name, _)) => name,
                    None => return Err(ModelError::UnknownDefaultProvider(default.clone())),
                },
                None => match self.providers.len() {
                    0 => return Err(ModelError::NoProviders),
                    1 => self
                        .providers
                        .keys()
                        .next()
                        .ok_or(ModelError::NoProviders)?,
                    _ if prefix.is_some() => {
                        return Err(ModelError::UnknownProvider(
                            prefix.map_or("", |(p, _)| p).to_string(),
                        ));
                    }
                    _ => return Err(ModelError::Ambiguous),
                },
            },
        };
        // Model ids with a slash (`meta-llama/Llama-3-8B`) exist only behind OpenAI-compatible servers;
        // for any other provider `x/model` means "provider x", which is not configured.
        if let Some((unknown, _)) = prefix
            && self
                .providers
                .get(provider.as_str())
                .is_some_and(|p| p.kind != ProviderKind::OpenAiCompatible)
            && !self
                .providers
                .get(provider.as_str())
                .is_some_and(|p| p.models.contains_key(model))
        {
            return Err(ModelError::UnknownProvider(unknown.to_string()));
        }
        Ok((provider.as_str(), model))
    }
}

/// Why a model reference names no configured provider.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// `provider/` with nothing after the slash.
    #[error("the model id after the provider name is empty")]
    EmptyModel,
    /// `x/model` where `x` is not a configured provider.
    #[error("`{0}` is not a configured provider")]
    UnknownProvider(String),
    /// `defaultProvider` names no provider.
    #[error("framework.defaultProvider `{0}` is not a configured provider")]
    UnknownDefaultProvider(String),
    /// No providers at all.
    #[error("no provider is configured")]
    NoProviders,
    /// A bare model name with several providers and no default.
    #[error("several providers are configured and none is the default")]
    Ambiguous,
}

impl Decode for Provider {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const KEYS: &[&str] = &[
            "kind",
            "baseUrl",
            "apiKeyEnv",
            "models",
            "maxConcurrentRequests",
            "requestsPerMinute",
        ];
        let f = cx.fields(node, path, KEYS)?;
        // A bad `kind` or `baseUrl` is recorded; the provider keeps its name so that the models naming it
        // are not reported as unresolvable too.
        let kind = f
            .required::<ProviderKind>(
                cx,
                path,
                node,
                "kind",
                "say which API this is: `kind: anthropic` or `kind: openai-compatible`",
            )
            .unwrap_or(ProviderKind::Anthropic);
        let base_url = match (f.optional::<Url>(cx, path, "baseUrl"), kind) {
            (Some(url), _) => url.0,
            (None, ProviderKind::Anthropic) => "https://api.anthropic.com".to_string(),
            (None, ProviderKind::OpenAiCompatible) => {
                if f.node("baseUrl").is_none() {
                    cx.push(
                        Diagnostic::error(path, cx.key_span(path), "missing required key `baseUrl`")
                            .with_hint("an openai-compatible provider needs its URL, e.g. `baseUrl: http://127.0.0.1:11434/v1` for Ollama"),
                    );
                }
                String::new()
            }
        };
        let api_key_env = match kind {
            ProviderKind::Anthropic => Some(f.or(
                cx,
                path,
                "apiKeyEnv",
                EnvVar("ANTHROPIC_API_KEY".to_string()),
            )),
            ProviderKind::OpenAiCompatible => f.optional(cx, path, "apiKeyEnv"),
        };
        Some(Provider {
            kind,
            base_url,
            api_key_env,
            models: f.or_default(cx, path, "models"),
            max_concurrent_requests: f.optional(cx, path, "maxConcurrentRequests"),
            requests_per_minute: f.optional(cx, path, "requestsPerMinute"),
        })
    }
}

impl Decode for ModelPrice {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const KEYS: &[&str] = &["input", "output"];
        let f = cx.fields(node, path, KEYS)?;
        let mut price = |key: &str| {
            let value = f.or(cx, path, key, 0.0_f64);
            if value < 0.0 {
                cx.push(
                    Diagnostic::error(
                        path.key(key),
                        f.node(key).map_or(node.span, |n| n.span),
                        "a price cannot be negative",
                    )
                    .with_hint("write the price in USD per million tokens, e.g. 3.0"),
                );
            }
            value.max(0.0)
        };
        Some(ModelPrice {
            input: price("input"),
            output: price("output"),
        })
    }
}

/// An http(s) URL. Only the shape is checked here; the HTTP client parses it fully when it connects.
struct Url(String);

impl Decode for Url {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let text = String::decode(node, path, cx)?;
        let rest = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"));
        match rest {
            Some(host)
                if !host.is_empty()
                    && !host.starts_with('/')
                    && !text.contains(char::is_whitespace) =>
            {
                Some(Url(text.trim_end_matches('/').to_string()))
            }
            _ => {
                cx.push(
                    Diagnostic::error(path, node.span, format!("`{text}` is not an http(s) URL"))
                        .with_hint("write the full URL, e.g. https://api.example.com or http://127.0.0.1:8080/v1"),
                );
                None
            }
        }
    }
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            storage: Storage::Sqlite,
            path: PathBuf::from(".opc/opc.db"),
            embedding: Embedding::default(),
            graph_enabled: false,
            consolidation: Consolidation::default(),
            postgres: PostgresSettings::default(),
        }
    }
}

impl MemorySettings {
    const KEYS: &'static [&'static str] = &[
        "storage",
        "path",
        "postgres",
        "embedding",
        "graph",
        "consolidation",
    ];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let default = MemorySettings::default();
        let embedding = match f.node("embedding") {
            Some(n) => Embedding::decode(n, path.key("embedding"), cx).unwrap_or_default(),
            None => Embedding::default(),
        };
        let graph_enabled = match f.node("graph") {
            Some(n) => {
                let graph_path = path.key("graph");
                cx.fields(n, graph_path, &["enabled"])
                    .is_some_and(|g| g.or(cx, graph_path, "enabled", false))
            }
            None => false,
        };
        let consolidation = match f.node("consolidation") {
            Some(n) => Consolidation::decode(n, path.key("consolidation"), cx).unwrap_or_default(),
            None => Consolidation::default(),
        };
        let postgres = match f.node("postgres") {
            Some(n) => PostgresSettings::decode(n, path.key("postgres"), cx).unwrap_or_default(),
            None => PostgresSettings::default(),
        };
        Some(MemorySettings {
            postgres,
            storage: f.or(cx, path, "storage", default.storage),
            path: f
                .optional::<String>(cx, path, "path")
                .map_or(default.path, PathBuf::from),
            embedding,
            graph_enabled,
            consolidation,
        })
    }
}

impl Default for Embedding {
    fn default() -> Self {
        Embedding {
            provider: EmbeddingProvider::Local,
            model: "all-MiniLM-L6-v2".to_string(),
            dimensions: non_zero(384),
            base_url: None,
            api_key_env: None,
        }
    }
}

impl Embedding {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const KEYS: &[&str] = &["provider", "model", "dimensions", "baseUrl", "apiKeyEnv"];
        let f = cx.fields(node, path, KEYS)?;
        let d = Embedding::default();
        let provider = f.or(cx, path, "provider", d.provider);
        // `baseUrl` is checked as an http(s) URL whenever it is given (a typo should not wait until
        // the provider is switched to be reported); a remote provider cannot run without it.
        let base_url = f.optional::<Url>(cx, path, "baseUrl").map(|url| url.0);
        if provider == EmbeddingProvider::OpenAiCompatible && f.node("baseUrl").is_none() {
            cx.push(
                Diagnostic::error(path, cx.key_span(path), "missing required key `baseUrl`")
                    .with_hint("openai-compatible embeddings need the API's URL (OPC posts to `{baseUrl}/embeddings`), e.g. `baseUrl: https://api.openai.com/v1`, or `http://127.0.0.1:11434/v1` for Ollama"),
            );
        }
        Some(Embedding {
            provider,
            model: f.or(cx, path, "model", d.model),
            dimensions: f.or(cx, path, "dimensions", d.dimensions),
            base_url,
            api_key_env: f.optional(cx, path, "apiKeyEnv"),
        })
    }
}

impl Default for Consolidation {
    fn default() -> Self {
        Consolidation {
            enabled: true,
            frequency: non_zero(5),
            model: None,
            max_tokens_per_day: non_zero(200_000),
            idle_after: Duration::from_secs(10 * 60),
        }
    }
}

impl Consolidation {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const KEYS: &[&str] = &[
            "enabled",
            "frequency",
            "model",
            "maxTokensPerDay",
            "idleAfter",
        ];
        let f = cx.fields(node, path, KEYS)?;
        let d = Consolidation::default();
        Some(Consolidation {
            enabled: f.or(cx, path, "enabled", d.enabled),
            frequency: f.or(cx, path, "frequency", d.frequency),
            model: f.optional(cx, path, "model"),
            max_tokens_per_day: f.or(cx, path, "maxTokensPerDay", d.max_tokens_per_day),
            idle_after: f.or(cx, path, "idleAfter", d.idle_after),
        })
    }
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            lease_ttl: Duration::from_secs(15),
        }
    }
}

impl ClusterSettings {
    /// The shortest lease accepted: a node renews its leases with each heartbeat (a fraction of the
    /// lease), and a shorter one would let a garbage-collection pause, a slow disk or one retried
    /// query hand a healthy node's trees to another node.
    pub const MIN_LEASE_TTL: Duration = Duration::from_secs(3);

    const KEYS: &'static [&'static str] = &["leaseTtl"];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let d = ClusterSettings::default();
        let lease_ttl = f.or(cx, path, "leaseTtl", d.lease_ttl);
        if lease_ttl < Self::MIN_LEASE_TTL {
            cx.push(
                Diagnostic::error(
                    path.key("leaseTtl"),
                    f.node("leaseTtl").map_or(node.span, |n| n.span),
                    format!(
                        "a lease of {} is too short: the shortest is {}",
                        humantime::format_duration(lease_ttl),
                        humantime::format_duration(Self::MIN_LEASE_TTL)
                    ),
                )
                .with_hint("a node renews its leases with every heartbeat, so a pause shorter than the lease must not move its trees; write e.g. `leaseTtl: 15s` (the default), or `5s` for faster failover"),
            );
            return None;
        }
        Some(ClusterSettings { lease_ttl })
    }
}

impl TelemetrySettings {
    const KEYS: &'static [&'static str] = &["endpoint", "protocol", "headersEnv", "captureContent"];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        Some(TelemetrySettings {
            endpoint: f.optional::<Url>(cx, path, "endpoint").map(|url| url.0),
            protocol: f.optional(cx, path, "protocol"),
            headers_env: f.optional(cx, path, "headersEnv"),
            capture_content: f.optional(cx, path, "captureContent"),
        })
    }
}

impl Decode for OtlpProtocol {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        // gRPC is what most examples show, so it gets its own answer: what to write instead.
        if matches!(&node.value, crate::yaml::Value::Str(text) if text == "grpc") {
            cx.push(
                Diagnostic::error(
                    path,
                    node.span,
                    "`grpc` is not supported: this build exports OTLP over HTTP only",
                )
                .with_hint("write `protocol: http/protobuf` and point `endpoint` at the collector's OTLP/HTTP port (4318, not gRPC's 4317)"),
            );
            return None;
        }
        cx.keyword(
            node,
            path,
            &[
                ("http/protobuf", OtlpProtocol::HttpProtobuf),
                ("http/json", OtlpProtocol::HttpJson),
            ],
        )
    }
}

impl Default for Execution {
    fn default() -> Self {
        Execution {
            max_concurrent_agents: non_zero(10),
            max_hierarchy_depth: non_zero(6),
            task_timeout: Duration::from_secs(5 * 60),
            result_compression_threshold: non_zero(2000),
            approval_timeout: Duration::from_secs(60 * 60),
        }
    }
}

impl Execution {
    const KEYS: &'static [&'static str] = &[
        "maxConcurrentAgents",
        "maxHierarchyDepth",
        "taskTimeout",
        "resultCompressionThreshold",
        "approvalTimeout",
    ];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let d = Execution::default();
        Some(Execution {
            max_concurrent_agents: f.or(cx, path, "maxConcurrentAgents", d.max_concurrent_agents),
            max_hierarchy_depth: f.or(cx, path, "maxHierarchyDepth", d.max_hierarchy_depth),
            task_timeout: f.or(cx, path, "taskTimeout", d.task_timeout),
            result_compression_threshold: f.or(
                cx,
                path,
                "resultCompressionThreshold",
                d.result_compression_threshold,
            ),
            approval_timeout: f.or(cx, path, "approvalTimeout", d.approval_timeout),
        })
    }
}

impl Default for Privacy {
    fn default() -> Self {
        Privacy {
            enabled: true,
            detect_types: PiiType::ALL.to_vec(),
            whitelist: Vec::new(),
            confidence_threshold: 0.85,
            mode: PrivacyMode::Mask,
            route_model: None,
            ner_wait: Duration::from_secs(30),
            require_ner: true,
        }
    }
}

impl Privacy {
    const KEYS: &'static [&'static str] = &[
        "enabled",
        "detectTypes",
        "whitelist",
        "confidenceThreshold",
        "mode",
        "routeModel",
        "nerWait",
        "requireNer",
    ];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let d = Privacy::default();
        let mut confidence_threshold =
            f.or(cx, path, "confidenceThreshold", d.confidence_threshold);
        if !(0.0..=1.0).contains(&confidence_threshold) {
            let span = f.node("confidenceThreshold").map_or(node.span, |n| n.span);
            cx.push(
                Diagnostic::error(
                    path.key("confidenceThreshold"),
                    span,
                    format!("must be between 0 and 1, found {confidence_threshold}"),
                )
                .with_hint("0.85 is a good start: higher masks less, lower masks more"),
            );
            confidence_threshold = d.confidence_threshold;
        }
        Some(Privacy {
            enabled: f.or(cx, path, "enabled", d.enabled),
            detect_types: f.or(cx, path, "detectTypes", d.detect_types),
            whitelist: f.or_default(cx, path, "whitelist"),
            confidence_threshold,
            mode: f.or(cx, path, "mode", d.mode),
            route_model: f.optional(cx, path, "routeModel"),
            ner_wait: f.or(cx, path, "nerWait", d.ner_wait),
            require_ner: f.or(cx, path, "requireNer", d.require_ner),
        })
    }
}

impl Default for Channels {
    fn default() -> Self {
        Channels {
            slack: None,
            discord: None,
            web: Web {
                listen: DEFAULT_WEB_LISTEN,
                access_token_env: None,
                viewer_token_env: None,
                public_url: None,
            },
        }
    }
}

impl Channels {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, &["slack", "discord", "web"])?;
        let web = match f.node("web") {
            Some(n) => Web::decode(n, path.key("web"), cx),
            None => None,
        };
        Some(Channels {
            slack: f.optional(cx, path, "slack"),
            discord: f.optional(cx, path, "discord"),
            web: web.unwrap_or(Channels::default().web),
        })
    }
}

impl Default for Gateway {
    fn default() -> Self {
        Gateway {
            rate_limit: RateLimit {
                per_user: Rate {
                    messages: non_zero(10),
                    per: Duration::from_secs(60),
                },
                per_channel: Rate {
                    messages: non_zero(60),
                    per: Duration::from_secs(60),
                },
            },
            approvers: Vec::new(),
            approvals_channel: ApprovalsChannel::default(),
        }
    }
}

impl Gateway {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, &["rateLimit", "approvers", "approvalsChannel"])?;
        let d = Gateway::default();
        let rate_limit = match f.node("rateLimit") {
            Some(n) => {
                let path = path.key("rateLimit");
                let limits = cx.fields(n, path, &["perUser", "perChannel"])?;
                RateLimit {
                    per_user: limits.or(cx, path, "perUser", d.rate_limit.per_user),
                    per_channel: limits.or(cx, path, "perChannel", d.rate_limit.per_channel),
                }
            }
            None => d.rate_limit,
        };
        let approvals_channel = match f.node("approvalsChannel") {
            Some(n) => {
                let path = path.key("approvalsChannel");
                let channels = cx.fields(n, path, &["slack", "discord"])?;
                ApprovalsChannel {
                    slack: channels.optional(cx, path, "slack"),
                    discord: snowflake(&channels, cx, path, "discord"),
                }
            }
            None => ApprovalsChannel::default(),
        };
        Some(Gateway {
            rate_limit,
            approvers: f.or_default(cx, path, "approvers"),
            approvals_channel,
        })
    }
}

impl Decode for Rate {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, &["messages", "per"])?;
        Some(Rate {
            messages: f.required(
                cx,
                path,
                node,
                "messages",
                "say how many messages are allowed, e.g. `{ messages: 10, per: 1m }`",
            )?,
            per: f.required(
                cx,
                path,
                node,
                "per",
                "say in how long, e.g. `{ messages: 10, per: 1m }`",
            )?,
        })
    }
}

/// A Discord id: a number in YAML unless quoted; both spellings mean the same id.
fn snowflake(
    f: &crate::decode::Fields<'_>,
    cx: &mut Decoder,
    path: Path<'_>,
    key: &str,
) -> Option<String> {
    match f.node(key) {
        Some(Node {
            value: Value::Int(i),
            ..
        }) if *i > 0 => Some(i.to_string()),
        Some(_) => f.optional::<String>(cx, path, key),
        None => None,
    }
}

impl Decode for Slack {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const KEYS: &[&str] = &[
            "mode",
            "botTokenEnv",
            "appTokenEnv",
            "signingSecretEnv",
            "apiBaseUrl",
        ];
        let f = cx.fields(node, path, KEYS)?;
        let given_mode = f.optional::<SlackMode>(cx, path, "mode");
        let mode_is_valid = given_mode.is_some() || f.node("mode").is_none();
        let mode = given_mode.unwrap_or(SlackMode::Socket);
        let app_token_env = f.optional(cx, path, "appTokenEnv");
        let signing_secret_env = f.optional(cx, path, "signingSecretEnv");
        let needed = match mode {
            _ if !mode_is_valid => None,
            SlackMode::Socket if app_token_env.is_none() && f.node("appTokenEnv").is_none() => {
                Some((
                    "appTokenEnv",
                    "Socket Mode needs the app-level token: `appTokenEnv: SLACK_APP_TOKEN`",
                ))
            }
            SlackMode::Http
                if signing_secret_env.is_none() && f.node("signingSecretEnv").is_none() =>
            {
                Some((
                    "signingSecretEnv",
                    "HTTP mode verifies requests with the signing secret: `signingSecretEnv: SLACK_SIGNING_SECRET`",
                ))
            }
            _ => None,
        };
        if let Some((key, hint)) = needed {
            let span = cx.key_span(path);
            cx.push(
                Diagnostic::error(
                    path,
                    span,
                    format!("missing required key `{key}` for mode `{mode}`"),
                )
                .with_hint(hint),
            );
        }
        Some(Slack {
            mode,
            bot_token_env: f.required(
                cx,
                path,
                node,
                "botTokenEnv",
                "name the env var that holds the bot token: `botTokenEnv: SLACK_BOT_TOKEN`",
            )?,
            app_token_env,
            signing_secret_env,
            api_base_url: f
                .optional::<Url>(cx, path, "apiBaseUrl")
                .map_or_else(|| "https://slack.com/api".to_string(), |u| u.0),
        })
    }
}

impl Decode for Discord {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const KEYS: &[&str] = &["botTokenEnv", "publicKeyEnv", "applicationId", "apiBaseUrl"];
        let f = cx.fields(node, path, KEYS)?;
        let application_id = snowflake(&f, cx, path, "applicationId");
        Some(Discord {
            bot_token_env: f.required(
                cx,
                path,
                node,
                "botTokenEnv",
                "name the env var that holds the bot token: `botTokenEnv: DISCORD_BOT_TOKEN`",
            )?,
            public_key_env: f.optional(cx, path, "publicKeyEnv"),
            application_id,
            api_base_url: f
                .optional::<Url>(cx, path, "apiBaseUrl")
                .map_or_else(|| "https://discord.com/api".to_string(), |u| u.0),
        })
    }
}

impl Web {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(
            node,
            path,
            &["listen", "accessTokenEnv", "viewerTokenEnv", "publicUrl"],
        )?;
        let listen = match f.node("listen") {
            Some(n) => {
                let text = String::decode(n, path.key("listen"), cx)?;
                match text.parse::<SocketAddr>() {
                    Ok(addr) => addr,
                    Err(_) => {
                        cx.push(
                            Diagnostic::error(
                                path.key("listen"),
                                n.span,
                                format!("`{text}` is not an address:port"),
                            )
                            .with_hint("write an IP address and port, e.g. 127.0.0.1:7420"),
                        );
                        return None;
                    }
                }
            }
            None => DEFAULT_WEB_LISTEN,
        };
        let access_token_env = f.optional(cx, path, "accessTokenEnv");
        if !listen.ip().is_loopback() && f.node("accessTokenEnv").is_none() {
            let span = f.node("listen").map_or(node.span, |n| n.span);
            cx.push(
                Diagnostic::error(
                    path.key("listen"),
                    span,
                    format!("`{listen}` is reachable from other machines, so the web chat needs an access token"),
                )
                .with_hint("add `accessTokenEnv: OPC_WEB_TOKEN` (and export it), or listen on 127.0.0.1"),
            );
        }
        let public_url = match f.node("publicUrl") {
            Some(n) => Some(public_url(n, path.key("publicUrl"), cx)?),
            None => None,
        };
        let viewer_token_env = f.optional(cx, path, "viewerTokenEnv");
        if viewer_token_env.is_some() && f.node("accessTokenEnv").is_none() {
            let span = f.node("viewerTokenEnv").map_or(node.span, |n| n.span);
            cx.push(
                Diagnostic::error(
                    path.key("viewerTokenEnv"),
                    span,
                    "a viewer token needs an access token beside it",
                )
                .with_hint("add `accessTokenEnv: OPC_WEB_TOKEN` under `channels.web` (the admins' token; export it where `opc run` starts), or remove `viewerTokenEnv`"),
            );
        }
        Some(Web {
            listen,
            access_token_env,
            viewer_token_env,
            public_url,
        })
    }
}

/// `channels.web.publicUrl`: `http(s)://host[:port]`, nothing after the host but an optional `/`
/// (the pages are served at the root of it, and a browser's `Origin` carries only these parts).
fn public_url(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<String> {
    let text = String::decode(node, path, cx)?;
    let trimmed = text.trim().trim_end_matches('/');
    let authority = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"));
    let valid = authority.is_some_and(|authority| {
        let (host, port) = match authority.rsplit_once(':') {
            // `[::1]:8443` or `host:8443`; a bare IPv6 literal (`[::1]`) has no port after its `]`.
            Some((host, port)) if !port.contains(']') => (host, Some(port)),
            _ => (authority, None),
        };
        let host_ok = !host.is_empty()
            && if let Some(v6) = host.strip_prefix('[') {
                v6.strip_suffix(']')
                    .is_some_and(|v6| v6.parse::<std::net::Ipv6Addr>().is_ok())
            } else {
                host.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            };
        let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
        host_ok && port_ok
    });
    if valid {
        return Some(trimmed.to_ascii_lowercase());
    }
    cx.push(
        Diagnostic::error(
            path,
            node.span,
            format!("`{text}` is not a public URL: it must be `http(s)://` and a host, with an optional port and nothing after it"),
        )
        .with_hint("write the address people open in their browser, e.g. `publicUrl: https://opc.example.com` (OPC is served at the root of it)"),
    );
    None
}

impl Decode for EnvVar {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let name = String::decode(node, path, cx)?;
        if crate::secrets::looks_like_secret(&name) {
            cx.push(pasted_secret(node, path, &name));
            return None;
        }
        let valid = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            cx.push(
                Diagnostic::error(
                    path,
                    node.span,
                    format!("`{name}` is not an environment variable name"),
                )
                .with_hint("use capital letters, digits and `_`, e.g. SLACK_BOT_TOKEN"),
            );
            return None;
        }
        Some(EnvVar(name))
    }
}

/// The error for a credential pasted where the name of the variable holding it belongs
/// (`apiKeyEnv: sk-…`): what it looks like, shown masked; that it must not be in the file; and the
/// line to write instead, with a variable named after the key (`apiKeyEnv: ANTHROPIC_API_KEY`) and
/// where the secret goes (`export ANTHROPIC_API_KEY=…`), so the advice fits the key it is on.
fn pasted_secret(node: &Node, path: Path<'_>, value: &str) -> Diagnostic {
    let value = value.trim();
    let kind = crate::secrets::find_secret(value).unwrap_or("credential");
    let (key, variable) = match path {
        Path::Key(parent, key) => (key, env_var_for(parent, key)),
        _ => ("…Env", "MY_SECRET".to_string()),
    };
    Diagnostic::error(
        path,
        node.span,
        format!(
            "this looks like a secret itself ({} {kind}, `{}`), not the name of an environment variable: a secret must not be written in the config",
            crate::secrets::article(kind),
            crate::secrets::mask(value)
        ),
    )
    .with_hint(format!(
        "treat it as leaked and rotate it with its issuer; then name a variable here instead (`{key}: {variable}`) and export the new secret in it where OPC runs (`export {variable}=…`)"
    ))
}

/// A variable name for the `…Env` key `key` under `parent`: the section's name and the key's, in
/// capitals (`slack` + `botTokenEnv` → `SLACK_BOT_TOKEN`, `anthropic` + `apiKeyEnv` →
/// `ANTHROPIC_API_KEY`).
fn env_var_for(parent: &Path<'_>, key: &str) -> String {
    let mut name = String::new();
    if let Path::Key(_, section) = parent {
        for c in section.chars() {
            name.push(if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            });
        }
        name.push('_');
    }
    for c in key.strip_suffix("Env").unwrap_or(key).chars() {
        if c.is_ascii_uppercase() && !name.is_empty() && !name.ends_with('_') {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

impl Agent {
    /// The keys an agent's mapping may hold (validation reads them too, to tell what an unknown key
    /// stood for).
    pub(crate) const KEYS: &'static [&'static str] = &[
        "role",
        "level",
        "parent",
        "children",
        "prompt",
        "model",
        "tools",
        "memory",
        "approvers",
        "workspace",
        "bash",
    ];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let role: Option<String> = f.required(
            cx,
            path,
            node,
            "role",
            "give the agent a title, e.g. `role: VP Engineering`",
        );
        if let (Some(role), Some(role_node)) = (&role, f.node("role"))
            && role.trim().is_empty()
        {
            cx.push(
                Diagnostic::error(path.key("role"), role_node.span, "the role is empty")
                    .with_hint("give the agent a title, e.g. `role: VP Engineering`"),
            );
        }
        let memory = match f.node("memory") {
            Some(n) => AgentMemory::decode(n, path.key("memory"), cx).unwrap_or_default(),
            None => AgentMemory::default(),
        };
        // A missing or mistyped role is already an error; the agent keeps its place in the org so that
        // its parent and children are not reported as broken too.
        Some(Agent {
            role: role.unwrap_or_default(),
            level: f.optional(cx, path, "level"),
            parent: f.optional(cx, path, "parent"),
            children: f.or_default(cx, path, "children"),
            prompt: f.optional(cx, path, "prompt"),
            model: f.optional(cx, path, "model"),
            tools: f.or_default(cx, path, "tools"),
            memory,
            approvers: f.or_default(cx, path, "approvers"),
            workspace: f
                .node("workspace")
                .and_then(|n| relative_dir(n, path.key("workspace"), cx)),
            bash: f.optional(cx, path, "bash"),
        })
    }

    /// Whether the agent has a delegation tool.
    pub fn can_delegate(&self) -> bool {
        self.tools.iter().any(|t| t.delegates())
    }
}

impl Decode for Prompt {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let text = String::decode(node, path, cx)?;
        match text.strip_prefix("file:") {
            Some(file) if file.trim().is_empty() => {
                cx.push(
                    Diagnostic::error(path, node.span, "`file:` names no file")
                        .with_hint("write the path after `file:`, e.g. `file:prompts/ceo.md`"),
                );
                None
            }
            Some(file) => Some(Prompt::File(PathBuf::from(file.trim()))),
            None => Some(Prompt::Inline(text)),
        }
    }
}

impl Default for AgentMemory {
    fn default() -> Self {
        AgentMemory {
            blocks: Vec::new(),
            recall: true,
            archival: false,
            shared_blocks: Vec::new(),
            share_with: Vec::new(),
        }
    }
}

impl AgentMemory {
    const KEYS: &'static [&'static str] =
        &["blocks", "recall", "archival", "sharedBlocks", "shareWith"];

    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, Self::KEYS)?;
        let d = AgentMemory::default();
        Some(AgentMemory {
            blocks: f.or_default(cx, path, "blocks"),
            recall: f.or(cx, path, "recall", d.recall),
            archival: f.or(cx, path, "archival", d.archival),
            shared_blocks: f.or_default(cx, path, "sharedBlocks"),
            share_with: f.or_default(cx, path, "shareWith"),
        })
    }
}

impl Decode for Block {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const KEYS: &[&str] = &["label", "description", "value", "limit", "readOnly"];
        let f = cx.fields(node, path, KEYS)?;
        let label: String = f.required(
            cx,
            path,
            node,
            "label",
            "name the block, e.g. `label: persona`",
        )?;
        Some(Block {
            label,
            description: f.or_default(cx, path, "description"),
            value: f.or_default(cx, path, "value"),
            limit: f.or(cx, path, "limit", non_zero(DEFAULT_BLOCK_LIMIT)),
            read_only: f.or(cx, path, "readOnly", false),
        })
    }
}

impl SharedBlock {
    const KEYS: &'static [&'static str] = &["description", "value", "limit", "readOnly"];

    /// The first key of `node` that only an agent has (`role`, `parent` …), if any: an agent pasted
    /// under `sharedBlocks:` instead of `agents:`.
    pub(crate) fn agent_key(node: &Node) -> Option<&crate::yaml::Entry> {
        node.entries()?.iter().find(|e| {
            Agent::KEYS.contains(&e.key.as_str()) && !Self::KEYS.contains(&e.key.as_str())
        })
    }
}

impl Decode for SharedBlock {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        // One error that says where the agent belongs, instead of an "unknown key" per agent key and
        // an "unused shared block" warning for something that is not a block.
        if let Some(entry) = Self::agent_key(node) {
            let id = match path {
                Path::Key(_, id) => id,
                _ => "it",
            };
            cx.push(
                Diagnostic::error(
                    path.key(&entry.key),
                    entry.key_span,
                    format!(
                        "`{}` is an agent key; this agent seems to sit under `sharedBlocks:` — move it under `agents:`",
                        entry.key
                    ),
                )
                .with_hint(format!(
                    "cut `{id}:` and the lines under it, and paste them under `agents:`, indented like the other agents; a shared block has only {}",
                    Self::KEYS.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
                )),
            );
            return None;
        }
        let f = cx.fields(node, path, Self::KEYS)?;
        Some(SharedBlock {
            description: f.or_default(cx, path, "description"),
            value: f.or_default(cx, path, "value"),
            limit: f.or(cx, path, "limit", non_zero(DEFAULT_BLOCK_LIMIT)),
            read_only: f.or(cx, path, "readOnly", false),
        })
    }
}

/// The default `framework.workspace.root`, relative to the config file's directory.
pub const DEFAULT_WORKSPACE_ROOT: &str = ".opc/workspaces";

impl Default for WorkspaceSettings {
    fn default() -> Self {
        WorkspaceSettings {
            root: PathBuf::from(DEFAULT_WORKSPACE_ROOT),
        }
    }
}

impl WorkspaceSettings {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, &["root"])?;
        let root = match f.node("root") {
            Some(n) => {
                let text = String::decode(n, path.key("root"), cx)?;
                if text.trim().is_empty() {
                    cx.push(
                        Diagnostic::error(path.key("root"), n.span, "the workspace root is empty")
                            .with_hint(format!("name a directory, e.g. `root: {DEFAULT_WORKSPACE_ROOT}` (relative to this file), or remove the key for that default")),
                    );
                    return None;
                }
                PathBuf::from(text)
            }
            None => PathBuf::from(DEFAULT_WORKSPACE_ROOT),
        };
        Some(WorkspaceSettings { root })
    }
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::Enforce,
            network: false,
            env: Vec::new(),
        }
    }
}

impl SandboxSettings {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, &["mode", "network", "env"])?;
        let d = SandboxSettings::default();
        let env: Vec<EnvName> = f.or_default(cx, path, "env");
        Some(SandboxSettings {
            mode: f.or(cx, path, "mode", d.mode),
            network: f.or(cx, path, "network", d.network),
            env: env.into_iter().map(|n| n.0).collect(),
        })
    }
}

/// One `framework.sandbox.env` entry: a variable name (any case: `http_proxy` is one).
struct EnvName(String);

impl Decode for EnvName {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let name = String::decode(node, path, cx)?;
        let valid = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if valid {
            return Some(EnvName(name));
        }
        let message = if crate::secrets::looks_like_secret(&name) {
            "this looks like a secret itself, not the name of an environment variable".to_string()
        } else {
            format!("`{name}` is not an environment variable name")
        };
        cx.push(
            Diagnostic::error(path, node.span, message).with_hint(
                "list variable names only (letters, digits and `_`, e.g. `CARGO_HOME`); their values are read from OPC's environment",
            ),
        );
        None
    }
}

/// A directory written relative to another (`agents.<id>.workspace`): a non-empty string. Whether it
/// stays inside the root is a semantic rule (`validate`), which can point at it with the root in hand.
fn relative_dir(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<PathBuf> {
    let text = String::decode(node, path, cx)?;
    if text.trim().is_empty() {
        cx.push(
            Diagnostic::error(path, node.span, "the workspace is empty")
                .with_hint("name a directory under `framework.workspace.root`, e.g. `workspace: repos/api`, or remove the key for `<root>/<agent id>`"),
        );
        return None;
    }
    Some(PathBuf::from(text))
}

impl Decode for BashPolicy {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let f = cx.fields(node, path, &["allow", "unlisted"])?;
        let allow: Vec<Prefix> = f.or_default(cx, path, "allow");
        Some(BashPolicy {
            allow: allow.into_iter().map(|p| p.0).collect(),
            unlisted: f.or(cx, path, "unlisted", Unlisted::Ask),
        })
    }
}

/// One `bash.allow` entry: the start of a command, never empty (an empty prefix would cover every
/// command while looking like nothing; `"*"` says that on purpose).
struct Prefix(String);

impl Decode for Prefix {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        let prefix = String::decode(node, path, cx)?;
        if prefix.trim().is_empty() {
            cx.push(
                Diagnostic::error(path, node.span, "an empty prefix")
                    .with_hint("write the start of a command, e.g. `cargo test`, or `\"*\"` for every command; or remove the entry"),
            );
            return None;
        }
        Some(Prefix(prefix))
    }
}

impl Decode for Approver {
    fn decode(node: &Node, path: Path<'_>, cx: &mut Decoder) -> Option<Self> {
        const HINT: &str =
            "write `slack:U012AB3CD`, `discord:123456789012345678`, or `discord:role:<role id>`";
        let text = String::decode(node, path, cx)?;
        let parsed = text.split_once(':').and_then(|(platform, rest)| {
            let platform = Platform::ALL
                .iter()
                .copied()
                .find(|p| p.as_str() == platform)?;
            let (is_role, id) = match rest.strip_prefix("role:") {
                Some(role) => (true, role),
                None => (false, rest.strip_prefix("user:").unwrap_or(rest)),
            };
            let id_ok = !id.is_empty() && !id.contains(char::is_whitespace) && !id.contains(':');
            id_ok.then(|| Approver {
                platform,
                is_role,
                id: id.to_string(),
            })
        });
        match parsed {
            None => cx.push(
                Diagnostic::error(path, node.span, format!("`{text}` is not an approver"))
                    .with_hint(HINT),
            ),
            // Web users have no identity an entry could match: accepting one would suggest that only
            // that user decides, while in fact everyone who reaches the web chat does.
            Some(Approver {
                platform: Platform::Web,
                ..
            }) => {
                cx.push(
                    Diagnostic::error(
                        path,
                        node.span,
                        format!("`{text}`: web chat users cannot be listed as approvers"),
                    )
                    .with_hint(
                        "remove this entry: the web chat is the operator's console, and anyone who can \
                         reach it (on loopback, or with the access token) decides approvals there; \
                         list Slack or Discord approvers here",
                    ),
                );
                return None;
            }
            Some(_) => {}
        }
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema's `detectTypes` vocabulary and the detector's types are one list in two crates: a
    /// type added to one and not the other could never be configured, or never be detected.
    #[test]
    fn detect_types_agree_with_the_detector() {
        let schema: Vec<&str> = PiiType::ALL.iter().map(|t| t.as_str()).collect();
        let detector: Vec<&str> = opc_shapes::EntityType::ALL
            .iter()
            .map(|t| t.as_str())
            .collect();
        assert_eq!(schema, detector);
        assert_eq!(Privacy::default().detect_types, PiiType::ALL.to_vec());
    }
}
