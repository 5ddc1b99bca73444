//! The workspace's crate graph, checked: the config crate (`opc-hierarchy`) builds none of the privacy
//! crate's ML stack, and the README's crate graph is the one `cargo metadata` reports.
//!
//! Why a test: both drift silently. A `use opc_privacy::…` added to the config crate for one helper
//! brings candle, tokenizers, gemm, phone metadata and zip back into every build of the YAML parser;
//! an edge added to a `Cargo.toml` leaves the README's picture stale. `cargo test --workspace` (and so
//! `.ci/run`) runs this.
//!
//! The README's graph is the fenced `text` block right after the line
//! `<!-- crate-graph: checked by tests/tests/crate_graph.rs -->`: one line per workspace crate, the crate
//! then `->` and its workspace dependencies (normal and build, not dev), comma-separated; a crate with
//! none stands alone on its line.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// What the config crate must never depend on, directly or not.
const NOT_IN_THE_CONFIG_CRATE: &[&str] = &[
    "candle-core",
    "candle-nn",
    "tokenizers",
    "gemm",
    "phonenumber",
    "zip",
    "opc-privacy",
    "opc-infer",
];

const MARKER: &str = "<!-- crate-graph: checked by tests/tests/crate_graph.rs -->";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Run cargo (the one running this test) offline in the workspace root; its stdout.
fn cargo(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .arg("--offline")
        .current_dir(workspace_root())
        .output()
        .unwrap_or_else(|e| panic!("running cargo {args:?}: {e}"));
    assert!(
        output.status.success(),
        "cargo {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("cargo prints UTF-8")
}

#[test]
fn the_config_crate_does_not_build_the_ml_stack() {
    let tree = cargo(&[
        "tree",
        "-p",
        "opc-hierarchy",
        "-e",
        "normal,build",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    let names: BTreeSet<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(names.contains("opc-hierarchy"), "{tree}");
    assert!(names.contains("opc-shapes"), "{tree}");
    let found: Vec<&&str> = NOT_IN_THE_CONFIG_CRATE
        .iter()
        .filter(|name| names.contains(**name))
        .collect();
    assert!(
        found.is_empty(),
        "opc-hierarchy depends on {found:?}; the config crate must not build the privacy crate's ML \
         stack: take what it needs from opc-shapes (or move it there). `cargo tree -p opc-hierarchy -e \
         normal -i <crate>` shows the path."
    );
}

/// Each workspace crate and its workspace dependencies (normal and build), from `cargo metadata`.
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let metadata: Value =
        serde_json::from_str(&cargo(&["metadata", "--format-version", "1", "--no-deps"])).unwrap();
    let packages = metadata["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|name| members.contains(name))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The README's crate graph block, parsed; panics naming the line when it is malformed.
fn readme_graph(readme: &str) -> BTreeMap<String, BTreeSet<String>> {
    let after = readme
        .split_once(MARKER)
        .unwrap_or_else(|| panic!("README.md has no `{MARKER}` line"))
        .1;
    let block = after
        .trim_start()
        .strip_prefix("```text\n")
        .unwrap_or_else(|| panic!("README.md: a ```text block must follow `{MARKER}`"));
    let block = &block[..block
        .find("```")
        .expect("README.md: the crate graph block is not closed")];
    let mut graph = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (name, deps) = line.split_once("->").unwrap_or((line, ""));
        let deps: BTreeSet<String> = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect();
        let previous = graph.insert(name.trim().to_string(), deps);
        assert!(
            previous.is_none(),
            "README.md's crate graph lists `{}` twice",
            name.trim()
        );
    }
    graph
}

/// The block as it should read, for the failure message.
fn render(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    graph
        .iter()
        .map(|(name, deps)| match deps.is_empty() {
            true => name.clone(),
            false => format!(
                "{name} -> {}",
                deps.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_readme_crate_graph_is_the_workspace_graph() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let documented = readme_graph(&readme);
    let actual = workspace_graph();
    assert!(
        documented == actual,
        "README.md's crate graph disagrees with the workspace's Cargo.toml files; the block after \
         `{MARKER}` should read:\n```text\n{}\n```",
        render(&actual)
    );
}

#[test]
fn a_malformed_or_stale_graph_is_caught() {
    let stale = format!("{MARKER}\n```text\nopc-a -> opc-b\nopc-b\n```\n");
    let graph = readme_graph(&stale);
    assert_eq!(graph["opc-a"], BTreeSet::from(["opc-b".to_string()]));
    assert!(graph["opc-b"].is_empty());
    assert_ne!(graph, workspace_graph());
    assert_eq!(render(&graph), "opc-a -> opc-b\nopc-b");
}
