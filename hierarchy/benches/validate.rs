//! Benchmark: parse + validate a generated org of 1,000 agents (CEO → 10 VPs → 90 leads → 899 workers),
//! each with a memory block, tools, a model and an inline prompt, the way a large real config looks.
//!
//! Run: `cargo bench -p opc-hierarchy --bench validate`. Target: median < 20 ms.

use std::fmt::Write;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

/// A valid config with exactly `agents` agents in a four-level tree.
fn generate_org(agents: usize) -> String {
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
        let tools = if children.is_empty() {
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
    let org = generate_org(1000);
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
