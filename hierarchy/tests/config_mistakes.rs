//! Mistakes a newcomer made in a first config, and what `opc validate` tells them: each report must
//! point at the line to fix, put the real mistake first (alone, when the rest only follows from it),
//! and give advice that, followed, makes the config better rather than worse.

use opc_hierarchy::{ConfigError, Diagnostic, Severity};

const HEAD: &str = "framework:\n  defaultModel: claude-sonnet-4-5\n  providers:\n    anthropic: { kind: anthropic, models: { claude-sonnet-4-5: { input: 3, output: 15 } } }\n";

/// The errors of `source` (which must be invalid), in the order they are reported.
fn errors(source: &str) -> Vec<Diagnostic> {
    match opc_hierarchy::parse("opc.config.yaml", source.to_string(), None) {
        Ok(_) => panic!("accepted, but should be invalid:\n{source}"),
        Err(ConfigError::Invalid(report)) => report
            .diagnostics
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .collect(),
        Err(e) => panic!("{e}"),
    }
}

fn hint(d: &Diagnostic) -> &str {
    d.hint.as_deref().unwrap_or("")
}

/// A CEO over a VP over a lead, written with `agent_lines` in place of the VP's block.
fn org(vp: &str) -> String {
    format!(
        "{HEAD}agents:\n  ceo:\n    role: CEO\n    tools: [delegate]\n    children: [vp]\n  vp:\n{vp}  lead:\n    role: Lead\n    parent: vp\n    level: 2\n"
    )
}

#[test]
fn a_dedented_key_is_reported_on_its_own_line_and_the_advice_fixes_it() {
    // `role:` level with `vp:` (line 11), and between two keys of the block (line 12).
    let right_after =
        org("  role: VP\n    parent: ceo\n    tools: [delegate]\n    children: [lead]\n");
    let in_between =
        org("    parent: ceo\n  role: VP\n    tools: [delegate]\n    children: [lead]\n");
    for (source, line) in [(right_after, 11_u32), (in_between, 12)] {
        let found = errors(&source);
        assert_eq!(found.len(), 1, "{found:?}");
        let d = &found[0];
        assert_eq!((d.line(), d.column()), (line, 1), "{d}");
        assert!(
            d.message.contains(&format!("line {line} (`role: VP`)")),
            "{d}"
        );
        assert!(
            hint(d).contains(&format!("indent line {line} by 4 spaces")),
            "{d}"
        );
        // Doing what the hint says gives a valid config.
        let fixed: String = source
            .split_inclusive('\n')
            .enumerate()
            .map(|(i, text)| {
                if u32::try_from(i + 1) == Ok(line) {
                    format!("  {text}")
                } else {
                    text.to_string()
                }
            })
            .collect();
        if let Err(e) = opc_hierarchy::parse("opc.config.yaml", fixed, None) {
            panic!("following the hint should fix the config: {e}");
        }
    }
}

#[test]
fn a_misspelt_children_is_the_one_error_reported() {
    for typo in ["childs", "chidren", "Children_"] {
        let source = format!(
            "{HEAD}agents:\n  ceo:\n    role: CEO\n    tools: [delegate, delegateParallel]\n    {typo}: [vp]\n  vp:\n    role: VP\n    parent: ceo\n    level: 1\n"
        );
        let found = errors(&source);
        // Not also: `ceo` has no children so cannot delegate (twice), `vp`'s parent does not list it.
        assert_eq!(found.len(), 1, "{typo}: {found:?}");
        assert_eq!(found[0].path, format!("agents.ceo.{typo}"));
        assert!(
            found[0].message.contains(&format!("unknown key `{typo}`")),
            "{}",
            found[0]
        );
        assert!(
            hint(&found[0]).contains("did you mean `children`?"),
            "{}",
            found[0]
        );
    }
    // Consequences it does not explain are still reported: a child the misspelt list leaves out.
    let source = format!(
        "{HEAD}agents:\n  ceo:\n    role: CEO\n    tools: [memory_read]\n    childs: [vp]\n  vp:\n    role: VP\n    parent: ceo\n  ops:\n    role: Ops\n    parent: ceo\n"
    );
    let paths: Vec<String> = errors(&source).into_iter().map(|d| d.path).collect();
    assert_eq!(paths, ["agents.ceo.childs", "agents.ops.parent"]);
}

#[test]
fn words_for_the_manager_and_the_team_suggest_parent_and_children() {
    for word in ["reportsTo", "reports_to", "manager", "boss", "Supervisor"] {
        // `vp` then has no parent: the misspelt key explains the extra root, the child `ceo` lists
        // without a parent, and the level of `vp` and of the lead under it.
        let source = org(&format!(
            "    role: VP\n    {word}: ceo\n    level: 1\n    tools: [delegate]\n    children: [lead]\n"
        ));
        let found = errors(&source);
        assert_eq!(found.len(), 1, "{word}: {found:?}");
        assert_eq!(found[0].path, format!("agents.vp.{word}"));
        assert!(
            hint(&found[0]).starts_with("did you mean `parent`?"),
            "{}",
            found[0]
        );
    }
    for word in ["subordinates", "reports", "direct_reports"] {
        let source = org(&format!(
            "    role: VP\n    parent: ceo\n    tools: [delegate]\n    {word}: [lead]\n"
        ));
        let found = errors(&source);
        assert_eq!(found.len(), 1, "{word}: {found:?}");
        assert!(
            hint(&found[0]).starts_with("did you mean `children`?"),
            "{}",
            found[0]
        );
    }
    // Only where the key meant exists: `manager` under `framework` is just unknown.
    let source = format!("{HEAD}  manager: x\nagents:\n  ceo:\n    role: CEO\n");
    let found = errors(&source);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(!hint(&found[0]).contains("parent"), "{}", found[0]);
}

#[test]
fn a_secret_pasted_into_an_env_key_says_so_and_names_a_variable_for_it() {
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCD";
    let token = "xoxb-1234567890-abcdefghijkl";
    let source = format!(
        "framework:\n  defaultModel: claude-sonnet-4-5\n  providers:\n    anthropic:\n      kind: anthropic\n      apiKeyEnv: {key}\n      models: {{ claude-sonnet-4-5: {{ input: 3, output: 15 }} }}\nchannels:\n  slack:\n    botTokenEnv: {token}\n    appTokenEnv: SLACK_APP_TOKEN\nagents:\n  ceo:\n    role: CEO\n"
    );
    let found = errors(&source);
    assert_eq!(found.len(), 2, "{found:?}");
    for (d, secret, line, variable) in [
        (&found[0], key, "apiKeyEnv", "ANTHROPIC_API_KEY"),
        (&found[1], token, "botTokenEnv", "SLACK_BOT_TOKEN"),
    ] {
        let text = format!("{} {}", d.message, hint(d));
        assert!(
            d.message.contains("looks like a secret")
                && d.message.contains("must not be written in the config"),
            "{d}"
        );
        assert!(
            hint(d).contains(&format!("`{line}: {variable}`"))
                && hint(d).contains(&format!("export {variable}=")),
            "{d}"
        );
        // Masked: its start is shown, so the user knows which one, but never the whole of it.
        assert!(!text.contains(secret), "{text}");
        assert!(d.message.contains(&secret[..7]), "{d}");
    }
    // The Slack advice is not given for the model provider's key.
    assert!(!hint(&found[0]).contains("SLACK"), "{}", found[0]);
}
