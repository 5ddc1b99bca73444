//! Workspaces, sandbox settings and Bash allow-lists: how the config keys decode and what `OrgTree`
//! answers for them (who reaches which directory, which prefixes run without asking).
//!
//! The org used throughout:
//!
//! ```text
//! ceo ─┬─ vp ─┬─ lead ─┬─ dev-a
//!      │      │        └─ dev-b
//!      │      └─ lead-2
//!      └─ ops
//! ```

use std::path::{Path, PathBuf};

use opc_hierarchy::schema::{SandboxMode, Unlisted};
use opc_hierarchy::{ConfigError, Loaded, WorkspaceAccess};

const HEAD: &str = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\n";

/// The org above; `extra` is appended to each agent's flow mapping by id (`("dev-a", "workspace: x")`),
/// `framework` lines go under `framework:`.
fn org(framework: &str, extra: &[(&str, &str)]) -> String {
    let agents = [
        ("ceo", "role: CEO, tools: [delegate], children: [vp, ops]"),
        (
            "vp",
            "role: VP, parent: ceo, tools: [delegate, Read, Grep, Glob], children: [lead, lead-2]",
        ),
        (
            "lead",
            "role: Lead, parent: vp, tools: [delegate, Read, Grep, Glob], children: [dev-a, dev-b]",
        ),
        (
            "dev-a",
            "role: Dev, parent: lead, tools: [Read, Write, Edit, Bash, Grep, Glob]",
        ),
        (
            "dev-b",
            "role: Dev, parent: lead, tools: [Read, Write, Edit, Bash, Grep, Glob]",
        ),
        ("lead-2", "role: Lead 2, parent: vp, tools: [Read, Bash]"),
        ("ops", "role: Ops, parent: ceo, tools: [Read, Write, Bash]"),
    ];
    let mut text = format!("{HEAD}{framework}agents:\n");
    for (id, body) in agents {
        let more: Vec<&str> = extra
            .iter()
            .filter(|(who, _)| *who == id)
            .map(|(_, e)| *e)
            .collect();
        let more = if more.is_empty() {
            String::new()
        } else {
            format!(", {}", more.join(", "))
        };
        text.push_str(&format!("  {id}: {{ {body}{more} }}\n"));
    }
    text
}

fn load(text: String) -> Loaded {
    opc_hierarchy::parse("t.yaml", text, Some(Path::new("/cfg"))).unwrap_or_else(|e| panic!("{e}"))
}

fn errors(text: String) -> Vec<String> {
    match opc_hierarchy::parse("t.yaml", text, Some(Path::new("/cfg"))) {
        Ok(loaded) => panic!("expected errors, got none: {:?}", loaded.report.lines()),
        Err(ConfigError::Invalid(report)) => report.errors().map(|d| d.to_string()).collect(),
        Err(e) => panic!("{e}"),
    }
}

fn p(path: &str) -> PathBuf {
    PathBuf::from(path)
}

#[test]
fn defaults_root_under_the_config_dir_and_one_workspace_per_agent() {
    let loaded = load(org("", &[]));
    let framework = &loaded.config.framework;
    assert_eq!(framework.workspace.root, p(".opc/workspaces"));
    assert_eq!(framework.sandbox.mode, SandboxMode::Enforce);
    assert!(!framework.sandbox.network);
    assert!(framework.sandbox.env.is_empty());
    let org = &loaded.org;
    assert_eq!(org.workspace_root(), Path::new("/cfg/.opc/workspaces"));
    assert_eq!(
        org.workspace("dev-a"),
        Some(p("/cfg/.opc/workspaces/dev-a"))
    );
    assert_eq!(org.workspace("nobody"), None);
    assert_eq!(org.workspace_access("nobody"), None);
    assert!(org.bash_allow("dev-a").is_empty());
    assert_eq!(org.bash_unlisted("dev-a"), Unlisted::Ask);
    assert_eq!(org.bash_unlisted("nobody"), Unlisted::Ask);
    assert_eq!(org.sandbox(), &framework.sandbox);
}

#[test]
fn keys_decode_as_written() {
    let loaded = load(org(
        "  workspace: { root: ../work }\n  sandbox: { mode: off, network: true, env: [CARGO_HOME, http_proxy] }\n",
        &[(
            "dev-a",
            "workspace: repos/api, bash: { allow: [\"cargo test\", ls], unlisted: deny }",
        )],
    ));
    let config = &loaded.config;
    assert_eq!(config.framework.workspace.root, p("../work"));
    assert_eq!(config.framework.sandbox.mode, SandboxMode::Off);
    assert!(config.framework.sandbox.network);
    assert_eq!(config.framework.sandbox.env, ["CARGO_HOME", "http_proxy"]);
    let dev = &config.agents["dev-a"];
    assert_eq!(dev.workspace, Some(p("repos/api")));
    let bash = dev.bash.as_ref().expect("bash section");
    assert_eq!(bash.allow, ["cargo test", "ls"]);
    assert_eq!(bash.unlisted, Unlisted::Deny);
    // The root resolves against the config's directory and is normalised.
    assert_eq!(loaded.org.workspace_root(), Path::new("/work"));
    assert_eq!(loaded.org.workspace("dev-a"), Some(p("/work/repos/api")));
    assert_eq!(loaded.org.bash_allow("dev-a"), ["cargo test", "ls"]);
    assert_eq!(loaded.org.bash_unlisted("dev-a"), Unlisted::Deny);
}

#[test]
fn an_absolute_root_is_kept() {
    let loaded = load(org("  workspace: { root: /srv/ws/./x/.. }\n", &[]));
    assert_eq!(loaded.org.workspace_root(), Path::new("/srv/ws"));
    assert_eq!(loaded.org.workspace("ceo"), Some(p("/srv/ws/ceo")));
}

#[test]
fn own_workspace_is_written_descendants_are_read_nothing_else() {
    let org = load(org("", &[])).org;
    let ws = |id: &str| p(&format!("/cfg/.opc/workspaces/{id}"));
    assert_eq!(
        org.workspace_access("dev-a"),
        Some(WorkspaceAccess {
            write: ws("dev-a"),
            read: vec![]
        })
    );
    assert_eq!(
        org.workspace_access("lead"),
        Some(WorkspaceAccess {
            write: ws("lead"),
            read: vec![ws("dev-a"), ws("dev-b")]
        })
    );
    let vp = org.workspace_access("vp").expect("known agent");
    assert_eq!(vp.write, ws("vp"));
    assert_eq!(
        vp.read,
        [ws("lead"), ws("lead-2"), ws("dev-a"), ws("dev-b")]
    );
    // Not a sibling's (ops), not a manager's (ceo).
    assert!(!vp.read.contains(&ws("ops")) && !vp.read.contains(&ws("ceo")));
    let ceo = org.workspace_access("ceo").expect("known agent");
    assert_eq!(ceo.read.len(), 6);
    assert!(!ceo.read.contains(&ceo.write));
}

#[test]
fn agents_naming_the_same_path_share_it_once() {
    let org = load(org(
        "",
        &[
            ("dev-a", "workspace: repos/api"),
            ("dev-b", "workspace: ./repos/x/../api"),
            ("lead", "workspace: repos/api"),
        ],
    ))
    .org;
    let shared = p("/cfg/.opc/workspaces/repos/api");
    assert_eq!(org.workspace("dev-a"), Some(shared.clone()));
    assert_eq!(org.workspace("dev-b"), Some(shared.clone()));
    // The lead writes the shared directory and reads nothing more: its team's workspace is its own.
    assert_eq!(
        org.workspace_access("lead"),
        Some(WorkspaceAccess {
            write: shared.clone(),
            read: vec![]
        })
    );
    // The VP reads it once.
    let vp = org.workspace_access("vp").expect("known agent");
    assert_eq!(
        vp.read,
        [shared.clone(), p("/cfg/.opc/workspaces/lead-2")],
        "deduplicated, in breadth-first order"
    );
}

#[test]
fn a_subordinate_allow_list_only_narrows_its_managers() {
    let loaded = load(org(
        "",
        &[
            ("vp", "bash: { allow: [git, \"cargo test\", ls] }"),
            // lead has no bash section: the dev answers to the VP's.
            (
                "dev-a",
                "bash: { allow: [\"git status\", cargo, rm, ls, gitk, \"*\"] }",
            ),
            ("dev-b", "bash: { allow: [\"*\"] }"),
            ("lead-2", "bash: { allow: [\"git diff\", \" ls \"] }"),
            // Under the root, which has no bash section: its own list stands.
            ("ops", "bash: { allow: [\"*\", \"rm -rf tmp\"] }"),
        ],
    ));
    let org = &loaded.org;
    assert_eq!(org.bash_allow("vp"), ["git", "cargo test", "ls"]);
    assert_eq!(
        org.bash_allow("dev-a"),
        ["git status", "cargo test", "ls", "git"],
        "kept where covered, narrowed to the VP's where wider, dropped where the VP allows nothing like it"
    );
    assert_eq!(org.bash_allow("dev-b"), ["git", "cargo test", "ls"]);
    assert_eq!(org.bash_allow("lead-2"), ["git diff", "ls"]);
    assert_eq!(org.bash_allow("ops"), ["*", "rm -rf tmp"]);
    assert!(
        org.bash_allow("lead").is_empty(),
        "no section, nothing allowed"
    );
}

#[test]
fn narrowing_follows_every_section_up_the_chain() {
    let org = load(org(
        "",
        &[
            ("ceo", "bash: { allow: [\"git\", \"ls\"] }"),
            ("vp", "bash: { allow: [\"*\"] }"),
            ("lead", "bash: { allow: [\"git\", \"cargo\"] }"),
            (
                "dev-a",
                "bash: { allow: [\"git log\", \"cargo test\", ls] }",
            ),
        ],
    ))
    .org;
    assert_eq!(org.bash_allow("vp"), ["git", "ls"]);
    assert_eq!(org.bash_allow("lead"), ["git"]);
    assert_eq!(org.bash_allow("dev-a"), ["git log"]);
}

#[test]
fn unknown_keys_are_errors_with_suggestions() {
    let found = errors(org(
        "  workspace: { rot: x }\n  sandbox: { mode: enforce, netwrk: true }\n",
        &[(
            "dev-a",
            "bash: { allow: [ls], unlisted: ask, alow: [cat] }, workspce: x",
        )],
    ));
    let joined = found.join("\n");
    for (path, hint) in [
        ("framework.workspace.rot", "did you mean `root`?"),
        ("framework.sandbox.netwrk", "did you mean `network`?"),
        ("agents.dev-a.bash.alow", "did you mean `allow`?"),
        ("agents.dev-a.workspce", "did you mean `workspace`?"),
    ] {
        assert!(
            found
                .iter()
                .any(|e| e.contains(path) && e.contains("unknown key") && e.contains(hint)),
            "no unknown-key error at {path}:\n{joined}"
        );
    }
    assert_eq!(found.len(), 4, "{joined}");
}

#[test]
fn bad_values_are_errors_where_they_are_written() {
    let found = errors(org(
        "  sandbox: { mode: strict, network: maybe, env: [\"NOT A NAME\"] }\n",
        &[(
            "dev-a",
            "bash: { allow: [ls, \"  \"], unlisted: never }, workspace: \"\"",
        )],
    ));
    let joined = found.join("\n");
    for (path, text) in [
        ("framework.sandbox.mode", "strict"),
        ("framework.sandbox.network", "expected"),
        (
            "framework.sandbox.env[0]",
            "not an environment variable name",
        ),
        ("agents.dev-a.bash.allow[1]", "an empty prefix"),
        ("agents.dev-a.bash.unlisted", "never"),
        ("agents.dev-a.workspace", "the workspace is empty"),
    ] {
        assert!(
            found.iter().any(|e| e.contains(path) && e.contains(text)),
            "no error at {path} saying {text}:\n{joined}"
        );
    }
    assert_eq!(found.len(), 6, "{joined}");
}
