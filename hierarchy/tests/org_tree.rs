//! `OrgTree` queries on the example org:
//!
//! ```text
//! ceo ─┬─ vp-eng ─┬─ lead-backend ── dev-backend
//!      │          └─ lead-frontend ── dev-frontend
//!      └─ vp-ops ─── lead-support ── support-agent
//! ```

use std::path::Path;

use opc_hierarchy::OrgTree;

fn example() -> OrgTree {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../opc.config.yaml");
    opc_hierarchy::load(&path)
        .unwrap_or_else(|e| panic!("{e}"))
        .org
}

#[test]
fn structure_queries() {
    let org = example();
    assert_eq!(org.root(), "ceo");
    assert_eq!(org.len(), 9);
    assert_eq!(org.parent("vp-eng"), Some("ceo"));
    assert_eq!(org.parent("ceo"), None);
    assert_eq!(org.children("vp-eng"), ["lead-backend", "lead-frontend"]);
    assert_eq!(org.siblings("vp-eng"), ["vp-ops"]);
    assert!(org.siblings("ceo").is_empty());
    assert_eq!(
        org.ancestors("dev-backend"),
        ["lead-backend", "vp-eng", "ceo"]
    );
    assert_eq!(org.level("ceo"), Some(0));
    assert_eq!(org.level("support-agent"), Some(3));
    assert_eq!(org.depth(), 3);
    assert_eq!(org.role("vp-ops"), Some("VP Operations"));
    assert_eq!(org.descendants("vp-ops"), ["lead-support", "support-agent"]);
    assert!(org.is_ancestor("ceo", "dev-frontend"));
    assert!(!org.is_ancestor("vp-ops", "dev-frontend"));
}

#[test]
fn only_direct_children_can_be_delegated_to() {
    let org = example();
    assert!(org.may_delegate("ceo", "vp-eng"));
    assert!(org.may_delegate("lead-backend", "dev-backend"));
    for (from, to, why) in [
        ("ceo", "lead-backend", "grandchild"),
        ("vp-eng", "vp-ops", "sibling"),
        ("vp-eng", "ceo", "parent"),
        ("vp-eng", "vp-eng", "itself"),
        ("vp-eng", "lead-support", "cousin"),
        ("ceo", "nobody", "unknown target"),
        ("nobody", "vp-eng", "unknown source"),
    ] {
        assert!(
            !org.may_delegate(from, to),
            "{from} → {to} ({why}) must be refused"
        );
    }
}

#[test]
fn share_with_is_one_way_and_exact() {
    let org = example();
    assert!(org.shares_with("vp-eng", "vp-ops"));
    assert!(
        org.shares_with("vp-ops", "vp-eng"),
        "the example lists both directions"
    );
    assert!(!org.shares_with("lead-backend", "lead-frontend"));
    assert!(!org.shares_with("vp-eng", "nobody"));
}

#[test]
fn unknown_ids_answer_empty_never_panic() {
    let org = example();
    assert!(!org.contains("ghost"));
    assert_eq!(org.parent("ghost"), None);
    assert!(org.children("ghost").is_empty());
    assert!(org.siblings("ghost").is_empty());
    assert!(org.ancestors("ghost").is_empty());
    assert_eq!(org.level("ghost"), None);
}

#[test]
fn one_way_sharing_is_not_mirrored() {
    let text = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nagents:\n  ceo: { role: CEO, tools: [delegate], children: [a, b] }\n  a: { role: A, parent: ceo, memory: { shareWith: [b] } }\n  b: { role: B, parent: ceo }\n";
    let org = opc_hierarchy::parse("t.yaml", text.to_string(), None)
        .unwrap_or_else(|e| panic!("{e}"))
        .org;
    assert!(org.shares_with("a", "b"));
    assert!(!org.shares_with("b", "a"));
}

/// The example's workers write their own workspaces; the VP and the leads read their teams'; the
/// support branch is out of reach of engineering and the other way round.
#[test]
fn the_example_workspaces_and_allow_lists() {
    let org = example();
    let root = org.workspace_root().to_path_buf();
    assert!(root.is_absolute() && root.ends_with(".opc/workspaces"));
    let dev = org.workspace_access("dev-backend").expect("agent");
    assert_eq!(dev.write, root.join("repos/api"));
    assert!(dev.read.is_empty());
    let vp = org.workspace_access("vp-eng").expect("agent");
    assert_eq!(vp.write, root.join("vp-eng"));
    assert_eq!(
        vp.read,
        [
            root.join("lead-backend"),
            root.join("lead-frontend"),
            root.join("repos/api"),
            root.join("dev-frontend"),
        ]
    );
    assert!(!vp.read.contains(&root.join("support-agent")));
    let lead = org.workspace_access("lead-support").expect("agent");
    assert_eq!(lead.read, [root.join("support-agent")]);
    assert_eq!(
        org.bash_allow("dev-backend"),
        ["ls", "cat", "git status", "git diff", "cargo test"]
    );
    assert_eq!(
        org.bash_allow("dev-frontend"),
        ["ls", "cat", "git status", "git diff", "npm test"]
    );
    assert!(org.bash_allow("support-agent").is_empty());
    assert_eq!(
        org.bash_unlisted("dev-backend"),
        opc_hierarchy::schema::Unlisted::Ask
    );
    assert_eq!(
        org.sandbox().mode,
        opc_hierarchy::schema::SandboxMode::Enforce
    );
}
