//! A test org wired to the scripted LLM server: a config file in a temporary directory, and engines
//! built on it (sharing one database file, so a test can "restart" by building a second engine).
//!
//! The org (four levels on the engineering side, an approval-capable worker on the ops side):
//!
//! ```text
//! ceo ─┬─ vp-eng ── lead-backend ─┬─ dev-backend
//!      │                          └─ dev-data
//!      └─ vp-ops ── support
//! ```
//!
//! Every agent's system prompt carries `Agent id: {id}`, which is the scripted server's marker.
//!
//! Most tests start the same way: a scripted LLM on a script, this org pointed at it, then an engine
//! or `opc run` with the test key. [`TestOrg::scripted`] is that setup, in one place:
//!
//! ```no_run
//! # async fn example(script: opc_tests::scripted_llm::Script) {
//! use opc_tests::org::TestOrg;
//! let (llm, org) = TestOrg::scripted(script).sections("channels:\n  web: {}\n").start().await;
//! let opc = org.run(&[]);
//! # drop((llm, opc));
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use opc_agents::context::NoMemory;
use opc_agents::llm::layers::RetryPolicy;
use opc_agents::{Engine, EngineOptions, SqliteStore};

use crate::opc_process::OpcRun;
use crate::scripted_llm::{Script, ScriptedLlm, Step};

/// Which wire format the provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI-compatible Chat Completions.
    OpenAi,
}

/// The env var holding the test key, and its value.
pub const KEY_VAR: &str = "OPC_TEST_LLM_KEY";
/// The key the engine is given (the scripted server records it).
pub const KEY: &str = "test-key-123";

/// The marker of an agent in the scripted server.
pub fn marker(agent: &str) -> String {
    format!("Agent id: {agent}\n")
}

/// The `framework:` section of a one-provider org at the scripted server (`llm`, Anthropic wire, key in
/// [`KEY_VAR`]), with consolidation off (tests that want it turn it on themselves) and the privacy
/// gateway on or off (on: masking by patterns alone is accepted until the NER model loads,
/// `requireNer: false`, as in [`TestOrg`]). Agents and channels follow it in the test's own YAML.
pub fn framework_yaml(llm_url: &str, privacy: bool) -> String {
    let providers = llm_provider_yaml(llm_url, "        test-model: { input: 1.0, output: 1.0 }");
    format!(
        r#"
framework:
  defaultProvider: llm
  defaultModel: test-model
{providers}
  privacy: {{ enabled: {privacy}, requireNer: false }}
  memory: {{ consolidation: {{ enabled: false }} }}
"#
    )
}

/// The provider keys of `framework:` for a test that writes its own org (a sandboxed worker, its own
/// memory settings), indented for their place and with no line break at the end: `llm` at the
/// scripted server (Anthropic wire, key in [`KEY_VAR`]) serving `test-model`, the default model,
/// priced as in [`TestOrg`]. With `fast_model`, `test-fast` is the fast model, as in [`TestOrg`];
/// without it, `test-model` is the fast model too. One place for how such an org reaches the
/// scripted server.
pub fn provider_yaml(llm_url: &str, fast_model: bool) -> String {
    let test_model = "        test-model: { input: 3.0, output: 15.0 }";
    let (fast, models) = if fast_model {
        (
            "test-fast",
            format!("{test_model}\n        test-fast: {{ input: 1.0, output: 5.0 }}"),
        )
    } else {
        ("test-model", test_model.to_string())
    };
    let providers = llm_provider_yaml(llm_url, &models);
    format!("  defaultProvider: llm\n  defaultModel: test-model\n  fastModel: {fast}\n{providers}")
}

/// The `providers:` key of `framework:`, indented for its place and with no line break at the end:
/// the one provider `llm` at the scripted server (Anthropic wire, key in [`KEY_VAR`]) listing
/// `models` (model lines, indented 8 spaces). Behind [`framework_yaml`] and [`provider_yaml`], so the
/// orgs they frame reach the scripted server the same way and differ only in their models.
fn llm_provider_yaml(llm_url: &str, models: &str) -> String {
    format!(
        r#"  providers:
    llm:
      kind: anthropic
      baseUrl: {llm_url}
      apiKeyEnv: {KEY_VAR}
      models:
{models}"#
    )
}

/// Write, as `opc.config.yaml` in `dir`, the smallest org with recall: the CEO alone (recall on, as
/// by default) with `conversation_search`, at the scripted server `llm_url` ([`framework_yaml`],
/// privacy off), and the web chat on port 0. Returns the config's path.
pub fn write_recall_org(dir: &Path, llm_url: &str) -> PathBuf {
    let frame = framework_yaml(llm_url, false);
    let yaml = format!(
        r#"{frame}agents:
  ceo:
    role: CEO
    tools: [conversation_search]
channels:
  web: {{ listen: "127.0.0.1:0" }}
"#
    );
    let path = dir.join("opc.config.yaml");
    std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// A scripted manager that delegates `task` to `child`, then answers `prefix` + the child's answer.
pub fn relay(child: &str, task: &str, prefix: &str) -> Vec<Step> {
    vec![
        Step::tool(
            "delegate",
            serde_json::json!({"agent": child, "task": task}),
        ),
        Step::text(format!("{prefix}{{{{last_result}}}}")),
    ]
}

/// The `agents:` entries (indented 2) of a chain of managers, `managers[0]` the root at level 0 and
/// each the parent of the next, the last the parent of `leaf` (whose own entry the caller writes,
/// at level `managers.len()`): each manager with `delegate` and `escalate`, recall off.
pub fn manager_chain_yaml(managers: &[(&str, &str)], leaf: &str) -> String {
    let mut yaml = String::new();
    for (level, (id, role)) in managers.iter().enumerate() {
        let parent = match level {
            0 => String::new(),
            _ => format!("    parent: {}\n", managers[level - 1].0),
        };
        let child = managers.get(level + 1).map_or(leaf, |(next, _)| next);
        yaml.push_str(&format!(
            "  {id}:\n    role: {role}\n    level: {level}\n{parent}    tools: [delegate, escalate]\n    \
             memory: {{ recall: false }}\n    children: [{child}]\n"
        ));
    }
    yaml
}

/// The approval chain many tests drive: the CEO relays a refund to VP Ops, who relays it to
/// Support, who asks a human to approve "Refund $120 for order 7" and answers with the decision
/// ([`support_asks_approval`]). The final answer is `CEO: VP: SUPPORT: <decision>`.
pub fn approval_chain() -> Script {
    Script::new()
        .agent(marker("ceo"), relay("vp-ops", "refund", "CEO: "))
        .agent(marker("vp-ops"), relay("support", "refund order 7", "VP: "))
        .agent(marker("support"), support_asks_approval())
}

/// Support's part of [`approval_chain`], for a test whose managers above it are scripted otherwise:
/// ask a human to approve "Refund $120 for order 7", then answer `SUPPORT: <decision>`.
pub fn support_asks_approval() -> Vec<Step> {
    vec![
        Step::tool(
            "request_approval",
            serde_json::json!({"summary": "Refund $120 for order 7"}),
        ),
        Step::text("SUPPORT: {{last_result}}"),
    ]
}

/// Extra YAML for [`TestOrg::with_extras`]; each part is inserted as written (indent it for its place).
#[derive(Clone, Copy, Debug, Default)]
pub struct Extras<'a> {
    /// Providers after `llm` (indented 4 spaces: `    trusted:\n      kind: …`).
    pub providers: &'a str,
    /// Keys of `framework` (indented 2 spaces: `  privacy:\n    mode: redact`).
    pub framework: &'a str,
    /// Top-level sections (`channels:`, `gateway:` …).
    pub sections: &'a str,
}

/// A config on disk, pointing at `llm_url`.
pub struct TestOrg {
    dir: tempfile::TempDir,
    /// The loaded config.
    pub loaded: opc_hierarchy::Loaded,
}

/// Settings of the `execution` section.
#[derive(Clone, Debug)]
pub struct Execution {
    /// `maxConcurrentAgents`.
    pub max_concurrent_agents: u32,
    /// `taskTimeout`.
    pub task_timeout: &'static str,
    /// `resultCompressionThreshold`.
    pub compression_threshold: u32,
    /// `approvalTimeout`.
    pub approval_timeout: &'static str,
}

impl Default for Execution {
    fn default() -> Self {
        Execution {
            max_concurrent_agents: 10,
            task_timeout: "5m",
            compression_threshold: 2000,
            approval_timeout: "1h",
        }
    }
}

/// The setup of [`TestOrg::scripted`]: the script, and what differs from the default org.
#[must_use = "call `start` to start the scripted LLM and write the org"]
pub struct OrgBuilder {
    script: Script,
    wire: Wire,
    execution: Execution,
    sections: String,
}

impl OrgBuilder {
    /// The wire format the org's provider speaks (default: Anthropic).
    pub fn wire(mut self, wire: Wire) -> OrgBuilder {
        self.wire = wire;
        self
    }

    /// The `execution` settings (default: [`Execution::default`]).
    pub fn execution(mut self, execution: Execution) -> OrgBuilder {
        self.execution = execution;
        self
    }

    /// Top-level YAML sections (`channels:`, `gateway:` …) appended to the org.
    pub fn sections(mut self, sections: impl Into<String>) -> OrgBuilder {
        self.sections = sections.into();
        self
    }

    /// Start the scripted LLM on the script and write the org pointed at it. The server stops when
    /// the returned [`ScriptedLlm`] is dropped, so keep it for the test's length.
    pub async fn start(self) -> (ScriptedLlm, TestOrg) {
        let llm = ScriptedLlm::start(self.script)
            .await
            .unwrap_or_else(|e| panic!("start the scripted LLM: {e}"));
        let org = TestOrg::with_sections(&llm.url(), self.wire, self.execution, &self.sections);
        (llm, org)
    }
}

impl TestOrg {
    /// The usual start of a test: a scripted LLM serving `script` and this org pointed at it
    /// (Anthropic wire, default execution settings, no extra sections unless the builder says so).
    pub fn scripted(script: Script) -> OrgBuilder {
        OrgBuilder {
            script,
            wire: Wire::Anthropic,
            execution: Execution::default(),
            sections: String::new(),
        }
    }

    /// `opc run` on this org with the test key, and `env` added (platform tokens …); waits for its
    /// ready line.
    pub fn run(&self, env: &[(&str, &str)]) -> OpcRun {
        let mut all = vec![(KEY_VAR, KEY)];
        all.extend_from_slice(env);
        OpcRun::start(&self.config_path(), &all)
    }

    /// Write the config for a server at `llm_url` speaking `wire`.
    pub fn new(llm_url: &str, wire: Wire, execution: Execution) -> TestOrg {
        TestOrg::with_sections(llm_url, wire, execution, "")
    }

    /// Like [`TestOrg::new`], with extra top-level YAML sections (`channels:`, `gateway:` …) appended.
    pub fn with_sections(
        llm_url: &str,
        wire: Wire,
        execution: Execution,
        sections: &str,
    ) -> TestOrg {
        TestOrg::with_extras(
            llm_url,
            wire,
            execution,
            &Extras {
                sections,
                ..Extras::default()
            },
        )
    }

    /// Like [`TestOrg::new`], with extra YAML: more providers, more `framework` keys (`privacy:` …)
    /// and top-level sections.
    pub fn with_extras(
        llm_url: &str,
        wire: Wire,
        execution: Execution,
        extras: &Extras<'_>,
    ) -> TestOrg {
        let Extras {
            providers: more_providers,
            framework: more_framework,
            sections,
        } = *extras;
        let (kind, base) = match wire {
            Wire::Anthropic => ("anthropic", llm_url.to_string()),
            Wire::OpenAi => ("openai-compatible", format!("{llm_url}/v1")),
        };
        let Execution {
            max_concurrent_agents,
            task_timeout,
            compression_threshold,
            approval_timeout,
        } = execution;
        // Privacy is on, with masking by patterns alone accepted until the NER model loads
        // (`requireNer: false`): these orgs test delegation, memory and channels, and must neither
        // wait for the model nor need it (an engine built in a test process has no loader). The NER
        // gate has its own tests (`tests/tests/privacy_ner_wait.rs`). A test that writes its own
        // `privacy:` section decides for itself.
        let privacy = if more_framework.contains("  privacy:") {
            ""
        } else {
            "  privacy: { requireNer: false }\n"
        };
        // Recall is off in the shared test org: the scripted LLM keys sessions (and tests count requests) by
        // each session's first user message, which recalled memory from earlier conversations in the
        // same database would change. Recall has its own tests (`tests/tests/memory_recall.rs`).
        let yaml = format!(
            r#"
framework:
  name: Test Org
  defaultProvider: llm
  defaultModel: test-model
  fastModel: test-fast
  providers:
    llm:
      kind: {kind}
      baseUrl: {base}
      apiKeyEnv: {KEY_VAR}
      models:
        test-model: {{ input: 3.0, output: 15.0 }}
        test-fast: {{ input: 1.0, output: 5.0 }}
{more_providers}
{privacy}{more_framework}
  execution:
    maxConcurrentAgents: {max_concurrent_agents}
    taskTimeout: {task_timeout}
    resultCompressionThreshold: {compression_threshold}
    approvalTimeout: {approval_timeout}
agents:
  ceo:
    role: CEO
    level: 0
    prompt: "You run the company."
    tools: [delegate, delegateParallel, escalate]
    memory: {{ recall: false }}
    children: [vp-eng, vp-ops]
  vp-eng:
    role: VP Engineering
    level: 1
    parent: ceo
    tools: [delegate, delegateParallel, escalate]
    memory: {{ recall: false }}
    children: [lead-backend]
  vp-ops:
    role: VP Operations
    level: 1
    parent: ceo
    tools: [delegate, escalate, requestApproval]
    memory: {{ recall: false }}
    children: [support]
  lead-backend:
    role: Backend Lead
    level: 2
    parent: vp-eng
    tools: [delegate, delegateParallel, escalate]
    memory: {{ recall: false }}
    children: [dev-backend, dev-data]
  dev-backend:
    role: Backend Developer
    level: 3
    parent: lead-backend
    tools: [escalate]
    memory: {{ recall: false }}
  dev-data:
    role: Data Engineer
    level: 3
    parent: lead-backend
    tools: [escalate]
    memory: {{ recall: false }}
  support:
    role: Support Agent
    level: 2
    parent: vp-ops
    tools: [escalate, requestApproval]
    memory: {{ recall: false }}
{sections}
"#
        );
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("opc.config.yaml");
        std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("write config: {e}"));
        let loaded = match opc_hierarchy::load(&path) {
            Ok(loaded) => loaded,
            Err(opc_hierarchy::ConfigError::Invalid(report)) => {
                panic!("test org invalid:\n{}", report.render(false))
            }
            Err(e) => panic!("test org: {e}"),
        };
        TestOrg { dir, loaded }
    }

    /// The database file every engine of this org shares.
    pub fn database(&self) -> PathBuf {
        self.dir.path().join("opc.db")
    }

    /// The config file.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("opc.config.yaml")
    }

    /// Engine options for tests: fast retries.
    pub fn options(streaming: bool) -> EngineOptions {
        EngineOptions {
            streaming,
            max_turns: 10,
            max_tokens: 1024,
            attempt_timeout: Duration::from_secs(10),
            retry: RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(200),
                ..RetryPolicy::default()
            },
            resume_suspended: true,
            sandbox: None,
            cluster: None,
        }
    }

    /// An engine on the org's database, with the test key in its environment.
    pub async fn engine(&self, options: EngineOptions) -> Engine {
        let store = SqliteStore::open(&self.database()).unwrap_or_else(|e| panic!("store: {e}"));
        self.engine_on(Arc::new(store), options).await
    }

    /// An engine for this org over `store` (a PostgreSQL one, say), no memory.
    pub async fn engine_on(
        &self,
        store: Arc<dyn opc_agents::Store>,
        options: EngineOptions,
    ) -> Engine {
        Engine::from_config(&self.loaded, store, Arc::new(NoMemory), options, |var| {
            (var == KEY_VAR).then(|| KEY.to_string())
        })
        .await
        .unwrap_or_else(|e| panic!("engine: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manager_chain_is_written_as_a_hand_written_org_would_be() {
        assert_eq!(
            manager_chain_yaml(&[("ceo", "CEO"), ("vp", "VP Engineering")], "worker"),
            "  ceo:\n    role: CEO\n    level: 0\n    tools: [delegate, escalate]\n    \
             memory: { recall: false }\n    children: [vp]\n  \
             vp:\n    role: VP Engineering\n    level: 1\n    parent: ceo\n    \
             tools: [delegate, escalate]\n    memory: { recall: false }\n    children: [worker]\n"
        );
    }
}
