//! # The example config's settings, and what tests that use them need
//!
//! Role: end-to-end tests that run "as users run it" take `framework.privacy` and
//! `framework.sandbox` from the repository's example `opc.config.yaml` at test time (so they follow
//! the example when it changes), and with privacy on they need the NER model. One place reads both,
//! and the gates for what such tests need (root, the cached model) go through `opc_testgate`: a
//! skip with one line on a developer's machine, a failure under CI, and a count of the tests that
//! got past them.
//!
//! The same tests write their orgs around those settings ([`framework_yaml`]), and the benches that
//! measure the example org itself run a fresh copy of it ([`copy_org`]): one place knows where the
//! example lives and how an org takes its settings.

use std::path::{Path, PathBuf};

use opc_hierarchy::yaml;
use opc_testgate::Group;
use serde_json::{Value, json};

use crate::opc_process::workspace_root;
use crate::org::provider_yaml;

/// Whether this process runs as root (the effective uid in `/proc/self/status`); when not, `test`
/// is skipped (the root group: the sandbox's hardest case, and the file tools' holes, are about
/// running as root).
#[track_caller]
pub fn root(test: &str) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or("unknown");
    let root = if euid == "0" {
        Ok(())
    } else {
        Err(format!("not running as root (euid {euid})"))
    };
    opc_testgate::need(Group::Root, test, root).is_some()
}

/// The cached NER model's root (`OPC_MODELS` for `opc run`); when the model is not there, `None`
/// and `test` is skipped (the NER group).
#[track_caller]
pub fn models_root(test: &str) -> Option<PathBuf> {
    let found = opc_models::cache_root()
        .and_then(|root| opc_models::RAMPART.locate(&root).map(|_| root))
        .map_err(|e| {
            format!(
                "the NER model is not in the cache ({e}); `.ci/run` fetches it with `opc models fetch`"
            )
        });
    opc_testgate::need(Group::Ner, test, found)
}

/// A YAML node as JSON (JSON is YAML, so it goes into a test config as a flow mapping, exactly as
/// written in the example).
pub fn to_json(node: &yaml::Node) -> Value {
    match &node.value {
        yaml::Value::Null => Value::Null,
        yaml::Value::Bool(b) => json!(b),
        yaml::Value::Int(i) => json!(i),
        yaml::Value::Float(f) => json!(f),
        yaml::Value::Str(s) => json!(s),
        yaml::Value::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        yaml::Value::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|e| (e.key.clone(), to_json(&e.value)))
                .collect(),
        ),
    }
}

/// The example config's `framework.privacy` and `framework.sandbox`, read with OPC's own YAML
/// reader.
pub fn settings() -> (Value, Value) {
    let path = workspace_root().join("opc.config.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read the example config {}: {e}", path.display()));
    let root = yaml::parse(&text).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    let framework = root
        .get("framework")
        .unwrap_or_else(|| panic!("no framework in {}", path.display()));
    let get = |key: &str| {
        to_json(
            framework
                .get(key)
                .unwrap_or_else(|| panic!("no framework.{key} in {}", path.display())),
        )
    };
    (get("privacy"), get("sandbox"))
}

/// The head of an org that runs as users run it, up to and including `agents:` (the caller writes
/// the agents after it, indented 2, then any other section): `framework:` named `name`, at the
/// scripted server `llm_url` ([`provider_yaml`], no fast model), with `privacy` and `sandbox` as
/// given — the example's, from [`settings`], once the test has checked what it is about —
/// consolidation off and a 10-minute task timeout (a sandboxed command may be slow on a busy
/// machine).
pub fn framework_yaml(name: &str, llm_url: &str, privacy: &Value, sandbox: &Value) -> String {
    let providers = provider_yaml(llm_url, false);
    format!(
        r#"
framework:
  name: {name}
{providers}
  privacy: {privacy}
  sandbox: {sandbox}
  memory: {{ consolidation: {{ enabled: false }} }}
  execution:
    taskTimeout: 10m
agents:
"#
    )
}

/// A fresh copy of the repository's example org in `dir`: its `opc.config.yaml` passed through
/// `edit` (port 0, a provider at a test server …), and its `prompts/`. Returns the config's path.
pub fn copy_org(dir: &Path, edit: impl FnOnce(String) -> String) -> PathBuf {
    let root = workspace_root();
    let original = std::fs::read_to_string(root.join("opc.config.yaml"))
        .unwrap_or_else(|e| panic!("read the example config: {e}"));
    let config = dir.join("opc.config.yaml");
    std::fs::write(&config, edit(original))
        .unwrap_or_else(|e| panic!("write {}: {e}", config.display()));
    let prompts = dir.join("prompts");
    std::fs::create_dir_all(&prompts)
        .unwrap_or_else(|e| panic!("create {}: {e}", prompts.display()));
    let entries = std::fs::read_dir(root.join("prompts"))
        .unwrap_or_else(|e| panic!("read the example's prompts: {e}"));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("read the example's prompts: {e}"));
        std::fs::copy(entry.path(), prompts.join(entry.file_name()))
            .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
    }
    config
}
