//! The files users are pointed at stay valid: the offline demo's config and its script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use opc_tests::scripted_llm::Script;

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/offline"))
}

#[test]
fn offline_demo_config_validates_without_warnings() {
    let loaded =
        opc_hierarchy::load(&examples().join("opc.config.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.report.warnings().count(), 0);
    assert_eq!(loaded.org.depth(), 3);
}

#[test]
fn offline_demo_script_parses_and_names_every_agent() {
    let script = Script::from_file(examples().join("script.json")).unwrap();
    let text = serde_json::to_string(&script).unwrap();
    for agent in ["ceo", "vp-eng", "lead-backend", "dev-backend"] {
        assert!(text.contains(&format!("Agent id: {agent}\\n")), "{agent}");
    }
}
