//! Config reloads of a running `opc run`, as tests drive them: the file replaced the way an editor
//! saves it, and the generation the running org reports, which tests await instead of sleeping.
//!
//! Invariant: the config file is never seen half-written — the new text goes to a sibling file that
//! is renamed over the old one, so the watcher reads either the old config or the new one.

use serde_json::Value;

use crate::opc_process::OpcRun;

/// Write `text` over `file` as editors do: a new file renamed over the old one.
pub fn replace_file(file: &std::path::Path, text: &str) {
    let temp = file.with_extension("yaml.saving");
    std::fs::write(&temp, text).unwrap_or_else(|e| panic!("write {}: {e}", temp.display()));
    std::fs::rename(&temp, file)
        .unwrap_or_else(|e| panic!("rename {} over {}: {e}", temp.display(), file.display()));
}

/// The generation of the org `opc` runs (`/api/org`): 1 at start, one more per applied reload.
pub async fn generation(opc: &OpcRun) -> u64 {
    let url = opc.url("/api/org");
    let body: Value = crate::http_client()
        .get(&url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}"));
    body["generation"]
        .as_u64()
        .unwrap_or_else(|| panic!("no generation in {body}"))
}
