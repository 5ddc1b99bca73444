//! No cycle between the modules of any workspace crate, at any level (issue 23, section 1; issue 35,
//! section 1): not between a crate's top-level modules, and not between the children (files,
//! submodules) of any one module.
//!
//! Every workspace member with a `src` directory is checked, with no exception list: a reference that
//! closes a cycle fails here with the cycle named (`session -> tools -> session`,
//! `detect::address -> detect::postal -> detect::address`) and the file and path behind each of its
//! edges. The checker and what it counts as a reference (doc links included, plain comments not):
//! `opc_tests::module_graph`.
//!
//! Run alone: `cargo test -p opc-tests --test module_graph`.

use std::path::{Path, PathBuf};

use opc_tests::module_graph::{check, crate_graph};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The workspace members, as the root `Cargo.toml` lists them (`members = ["shapes", …]`).
fn members() -> Vec<String> {
    let manifest = workspace().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let list = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("members"))
        .and_then(|rest| rest.split_once('[').map(|(_, list)| list))
        .and_then(|list| list.split_once(']').map(|(list, _)| list))
        .unwrap_or_else(|| panic!("no one-line `members = [...]` in {}", manifest.display()));
    let mut members: Vec<String> = list
        .split(',')
        .map(|name| name.trim().trim_matches('"').to_string())
        .filter(|name| !name.is_empty())
        .collect();
    members.sort();
    members
}

/// Every workspace member with a `src` directory: the crates this test checks.
fn crates() -> Vec<String> {
    members()
        .into_iter()
        .filter(|krate| src(krate).is_dir())
        .collect()
}

fn src(krate: &str) -> PathBuf {
    workspace().join(krate).join("src")
}

#[test]
fn no_crate_has_a_module_cycle_at_any_level() {
    let failures: Vec<String> = crates()
        .iter()
        .filter_map(|krate| check(&src(krate)).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_workspace_member_is_checked() {
    let crates = crates();
    // Every member is a crate with sources: none slips out of the check for lack of a `src`.
    assert_eq!(crates, members(), "a member without src/");
    for krate in ["agents", "bot", "tests", "testgate"] {
        assert!(crates.iter().any(|c| c == krate), "{krate} is not checked");
    }
}

/// Prints every crate's module graphs and cycles (or those of the `src` directory in
/// `OPC_MODULE_GRAPH_SRC`): `cargo test -p opc-tests --test module_graph -- --ignored --nocapture`.
#[test]
#[ignore = "prints the graphs; asserts nothing"]
fn print_module_graphs() {
    let dirs: Vec<(String, PathBuf)> = match std::env::var_os("OPC_MODULE_GRAPH_SRC") {
        Some(dir) => vec![("OPC_MODULE_GRAPH_SRC".into(), PathBuf::from(dir))],
        None => crates().into_iter().map(|k| (k.clone(), src(&k))).collect(),
    };
    for (name, dir) in dirs {
        let graph = crate_graph(&dir).unwrap_or_else(|e| panic!("{e}"));
        println!("== {name} ({})", dir.display());
        for (level, modules) in &graph.levels {
            let level = if level.is_empty() { "<root>" } else { level };
            println!(" in {level}:");
            for line in modules.edge_lines() {
                println!("  {line}");
            }
        }
        print!("{}", graph.describe());
    }
}
