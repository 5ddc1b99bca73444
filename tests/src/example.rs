//! # The example config's settings, and what tests that use them need
//!
//! Role: end-to-end tests that run "as users run it" take `framework.privacy` and
//! `framework.sandbox` from the repository's example `opc.config.yaml` at test time (so they follow
//! the example when it changes), and with privacy on they need the NER model. One place reads both,
//! and one place decides what a missing requirement means: a skip with one line on a developer's
//! machine, a failure under CI.

use std::path::PathBuf;

use opc_hierarchy::yaml;
use serde_json::{Value, json};

use crate::opc_process::workspace_root;

/// Whether this is CI (`CI` set to anything but empty, `false` or `0`): missing requirements fail.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// A test cannot run here because of `why`: under CI that fails the test; otherwise one line says
/// so, and the caller returns. Always `false`, for `if !ok && !skip(…)`.
pub fn skip(test: &str, why: &str) -> bool {
    assert!(!ci(), "{test}: {why}, and CI is set");
    eprintln!("{test}: skipped, {why}");
    false
}

/// Whether this process runs as root (the effective uid in `/proc/self/status`); when not, [`skip`]
/// (the sandbox's hardest case, and the file tools' holes, are about running as root).
pub fn root(test: &str) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or("unknown");
    euid == "0" || skip(test, &format!("not running as root (euid {euid})"))
}

/// The cached NER model's root (`OPC_MODELS` for `opc run`), or `None` after [`skip`].
pub fn models_root(test: &str) -> Option<PathBuf> {
    let root = opc_models::cache_root().ok();
    let found = root
        .as_ref()
        .is_some_and(|root| opc_models::RAMPART.locate(root).is_ok());
    if found {
        return root;
    }
    skip(
        test,
        &format!(
            "the NER model is not in the cache ({root:?}; `.ci/run` fetches it with `opc models fetch`)"
        ),
    );
    None
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
