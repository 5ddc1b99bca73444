//! Benchmark: parse + validate a generated org of 1,000 agents (CEO → 10 VPs → 90 leads → 899 workers),
//! each with a memory block, tools, a model and an inline prompt, the way a large real config looks.
//! A second org adds what made validation quadratic once: a written workspace and a `bash` section
//! on every agent (managers narrowing their teams' allow-lists, workers running `Bash`), loaded from
//! a file as `opc validate` does, so a rule that compares every agent with every other shows here.
//!
//! Run: `cargo bench -p opc-hierarchy --bench validate`. Target: parse + validate of either 1,000-agent
//! org costs about twice the YAML parse alone (the `yaml_parse_only` breakdown), so that `opc validate`
//! as a process, which also probes the kernel, stays under 200 ms. A rule that compares every agent
//! with every other shows up as a multiple of the parse: the workspace-nesting rule once made it 15×.

use std::fmt::Write;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

/// A valid config with exactly `agents` agents in a four-level tree. With `bash`, every agent also
/// writes its workspace and a `bash` section: the CEO's is the ceiling, each level narrows it, and the
/// workers (the only ones with the `Bash` tool) list what they run.
fn generate_org(agents: usize, bash: bool) -> String {
    let mut yaml = String::from(
        "framework:\n  name: Large Org\n  defaultModel: claude-sonnet-4-5\n  fastModel: claude-haiku-4-5\n  providers:\n    anthropic:\n      kind: anthropic\n      models:\n        claude-sonnet-4-5: { input: 3.0, output: 15.0 }\n        claude-haiku-4-5: { input: 1.0, output: 5.0 }\n  execution:\n    maxConcurrentAgents: 200\n    taskTimeout: 5m\n\nsharedBlocks:\n  policies: { description: Shared policies, value: Be kind, limit: 5000 }\n\nagents:\n",
    );
    // Level sizes: 1 root, 10 VPs, 9 leads per VP, the rest workers spread over the leads.
    let vps = 10;
    let leads = 90;
    let workers = agents.saturating_sub(1 + vps + leads);
    let children_of = |kind: &str, n: usize, of: usize, i: usize| -> Vec<String> {
        (0..n)
            .filter(|j| j % of == i)
            .map(|j| format!("{kind}-{j}"))
            .collect()
    };
    let mut agent = |id: &str,
                     role: &str,
                     level: u32,
                     parent: Option<&str>,
                     children: &[String],
                     share: Option<&str>| {
        let tools = if children.is_empty() && bash {
            "[escalate, memory_read, memory_write, Bash]"
        } else if children.is_empty() {
            "[escalate, memory_read, memory_write]"
        } else {
            "[delegate, delegateParallel, escalate, memory_read]"
        };
        let _ = writeln!(yaml, "  {id}:\n    role: {role}\n    level: {level}");
        if let Some(parent) = parent {
            let _ = writeln!(yaml, "    parent: {parent}");
        }
        let _ = writeln!(yaml, "    children: [{}]", children.join(", "));
        let _ = writeln!(
            yaml,
            "    prompt: \"You are the {role}. Do your part well and report back briefly.\""
        );
        let _ = writeln!(
            yaml,
            "    model: {}",
            if level == 3 {
                "claude-haiku-4-5"
            } else {
                "anthropic/claude-sonnet-4-5"
            }
        );
        let _ = writeln!(yaml, "    tools: {tools}");
        if bash {
            let allow = match level {
                0 => "[cargo, git, ls, make]",
                1 => "[cargo, git, ls]",
                2 => "[\"cargo test\", \"cargo build\", git, ls]",
                _ => "[\"cargo test --lib\", \"git status\", \"git diff\", ls]",
            };
            let _ = writeln!(
                yaml,
                "    workspace: teams/{id}\n    bash:\n      allow: {allow}\n      unlisted: ask"
            );
        }
        let _ = writeln!(
            yaml,
            "    memory:\n      blocks:\n        - label: persona\n          description: Who you are\n          value: \"{role}\"\n          limit: 2000\n      recall: true\n      sharedBlocks: [policies]"
        );
        if let Some(share) = share {
            let _ = writeln!(yaml, "      shareWith: [{share}]");
        }
    };
    agent(
        "ceo",
        "CEO",
        0,
        None,
        &(0..vps).map(|v| format!("vp-{v}")).collect::<Vec<_>>(),
        None,
    );
    for v in 0..vps {
        let share = format!("vp-{}", (v + 1) % vps);
        agent(
            &format!("vp-{v}"),
            "VP",
            1,
            Some("ceo"),
            &children_of("lead", leads, vps, v),
            Some(&share),
        );
    }
    for l in 0..leads {
        let parent = format!("vp-{}", l % vps);
        agent(
            &format!("lead-{l}"),
            "Lead",
            2,
            Some(&parent),
            &children_of("worker", workers, leads, l),
            None,
        );
    }
    for w in 0..workers {
        let parent = format!("lead-{}", w % leads);
        agent(
            &format!("worker-{w}"),
            "Worker",
            3,
            Some(&parent),
            &[],
            None,
        );
    }
    yaml
}

fn bench(c: &mut Criterion) {
    let org = generate_org(1000, false);
    let loaded = opc_hierarchy::parse("org-1000.yaml", org.clone(), None)
        .unwrap_or_else(|e| panic!("the generated org must be valid: {e}"));
    assert_eq!(loaded.org.len(), 1000);

    c.bench_function("parse_and_validate_1000_agents", |b| {
        b.iter_batched(
            || org.clone(),
            |text| black_box(opc_hierarchy::parse("org-1000.yaml", text, None)),
            BatchSize::LargeInput,
        )
    });

    // Breakdown: the YAML parse into the positioned tree alone.
    c.bench_function("yaml_parse_only_1000_agents", |b| {
        b.iter(|| black_box(opc_hierarchy::yaml::parse(&org)))
    });

    // As `opc validate` runs it: read from a file, so that relative paths have a directory.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
    let file = dir.path().join("org-1000-bash.yaml");
    std::fs::write(&file, generate_org(1000, true))
        .unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    let loaded = opc_hierarchy::load(&file)
        .unwrap_or_else(|e| panic!("the generated org with bash must be valid: {e}"));
    assert_eq!(loaded.org.len(), 1000);
    assert_eq!(
        loaded.report.diagnostics.len(),
        0,
        "{:?}",
        loaded.report.lines()
    );
    c.bench_function(
        "load_and_validate_1000_agents_with_workspaces_and_bash",
        |b| b.iter(|| black_box(opc_hierarchy::load(&file))),
    );

    let example = include_str!("../../opc.config.yaml").to_string();
    c.bench_function("parse_and_validate_example_org", |b| {
        b.iter_batched(
            || example.clone(),
            |text| black_box(opc_hierarchy::parse("opc.config.yaml", text, None)),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
