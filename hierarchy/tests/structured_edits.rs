//! Structured edits on the example org as shipped: every action leaves a config that validates, and
//! adding an agent leaves every other line of the file byte for byte as it was (comments, order,
//! spacing), under every agent of the org.

#![allow(clippy::unwrap_used)]

use opc_hierarchy::edit::{Action, apply};

const EXAMPLE: &str = include_str!("../../opc.config.yaml");

fn valid(text: &str) -> opc_hierarchy::Loaded {
    match opc_hierarchy::parse("opc.config.yaml", text.to_string(), None) {
        Ok(loaded) => loaded,
        Err(opc_hierarchy::ConfigError::Invalid(report)) => {
            panic!("invalid after the edit:\n{}\n{text}", report.render(false))
        }
        Err(e) => panic!("{e}"),
    }
}

/// Lines of `before` that are not in `after`, in order: an edit that only adds lines leaves the
/// other lines, or at most the one line it extends, as they were.
fn lost_lines(before: &str, after: &str) -> Vec<String> {
    let mut after_lines = after.lines();
    let mut lost = Vec::new();
    'each: for line in before.lines() {
        for candidate in after_lines.by_ref() {
            if candidate == line {
                continue 'each;
            }
        }
        lost.push(line.to_string());
        after_lines = after.lines();
    }
    lost
}

#[test]
fn adding_an_agent_under_any_agent_changes_only_its_parents_children_line() {
    let loaded = valid(EXAMPLE);
    for parent in loaded.config.agents.keys() {
        let action = Action::AddAgent {
            id: "qa-lead".into(),
            parent: parent.clone(),
            role: "QA Lead".into(),
            model: None,
            tools: vec!["escalate".into()],
            prompt: Some("You own quality: test plans and release checks.".into()),
        };
        let out = apply(EXAMPLE, &action).unwrap_or_else(|e| panic!("under {parent}: {e}"));
        let after = valid(&out);
        assert_eq!(after.org.parent("qa-lead"), Some(parent.as_str()));
        // Every line is still there, except at most the parent's own `children:` line, which
        // gained the new id.
        let lost = lost_lines(EXAMPLE, &out);
        assert!(
            lost.len() <= 1 && lost.iter().all(|l| l.trim_start().starts_with("children:")),
            "under {parent}, lines changed: {lost:?}"
        );
        assert_eq!(
            out.lines().count(),
            EXAMPLE.lines().count() + 6 + usize::from(lost.is_empty())
        );
    }
}

#[test]
fn every_action_leaves_a_valid_config() {
    let loaded = valid(EXAMPLE);
    let leaf = loaded
        .config
        .agents
        .keys()
        .find(|id| loaded.org.children(id).is_empty())
        .unwrap()
        .clone();
    let root = loaded.org.root().to_string();
    // A manager with its team, moved under another VP (a VP keeps another report).
    let vps = loaded.org.children(&root);
    let (from, to) = (vps[0].to_string(), vps[1].to_string());
    let lead = loaded.org.children(&from)[0].to_string();
    assert!(
        loaded.org.children(&from).len() > 1,
        "the example's first VP has two leads"
    );
    // shareWith connects siblings.
    let peer = loaded.org.children(&from)[1].to_string();
    let actions = [
        Action::MoveAgent {
            id: lead.clone(),
            parent: to.clone(),
        },
        Action::SetField {
            id: leaf.clone(),
            field: "tools".into(),
            values: vec!["escalate".into()],
        },
        Action::SetField {
            id: leaf.clone(),
            field: "prompt".into(),
            values: vec!["Short: and sweet # not a comment".into()],
        },
        Action::SetField {
            id: leaf.clone(),
            field: "model".into(),
            values: vec![loaded.config.framework.default_model.clone()],
        },
        Action::ShareWith {
            id: lead.clone(),
            with: peer.clone(),
        },
    ];
    for action in &actions {
        let out = apply(EXAMPLE, action).unwrap_or_else(|e| panic!("{action:?}: {e}"));
        let after = valid(&out);
        match action {
            Action::MoveAgent { id, parent } => {
                assert_eq!(after.org.parent(id), Some(parent.as_str()));
                for report in loaded.org.children(id) {
                    assert_eq!(
                        after.org.parent(report),
                        Some(id.as_str()),
                        "the team moves along"
                    );
                }
            }
            Action::SetField { id, field, values } if field == "prompt" => {
                assert_eq!(
                    after.config.agents[id].prompt,
                    Some(opc_hierarchy::schema::Prompt::Inline(values[0].clone()))
                );
            }
            Action::ShareWith { id, with } => {
                assert!(after.config.agents[id].memory.share_with.contains(with));
            }
            _ => {}
        }
    }
    // Adding an agent and removing it again gives back the file, byte for byte.
    let added = apply(
        EXAMPLE,
        &Action::AddAgent {
            id: "qa-lead".into(),
            parent: from.clone(),
            role: "QA Lead".into(),
            model: None,
            tools: Vec::new(),
            prompt: None,
        },
    )
    .unwrap();
    valid(&added);
    let removed = apply(
        &added,
        &Action::RemoveAgent {
            id: "qa-lead".into(),
        },
    )
    .unwrap();
    assert_eq!(removed, EXAMPLE);
}
