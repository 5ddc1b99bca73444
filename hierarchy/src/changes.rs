//! What changed between two configs, as a reload reports it: agents added, removed and changed (with
//! the keys that changed), other sections that changed, and settings that take effect only after a
//! restart.
//!
//! Why here: it is a pure function of configs (and of digests of the agents' prompt files, which the
//! caller reads), so it lives with the schema it compares; when a key is added to the schema, the diff
//! beside it is where to say whether a reload reports it.
//!
//! Invariants: a setting a running process cannot swap in (the web listener, Slack, Discord, the
//! database and where it is, the cluster's lease, telemetry) counts as needing a restart only when this change touched it and it now differs
//! from the value the process started with, so setting one back is not reported; agents and sections
//! are listed in file order; a prompt file counts as changed only when the agent's `prompt` key did
//! not (which is reported instead).

use std::collections::HashMap;

use serde::Serialize;

use crate::schema::Config;

/// What one change of config did, compared with the config before it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Changes {
    /// Agents only in the new config.
    pub added: Vec<String>,
    /// Agents only in the old config.
    pub removed: Vec<String>,
    /// Agents in both whose settings or prompt file changed.
    pub changed: Vec<AgentChange>,
    /// Other settings that changed and apply without a restart (`framework.privacy`,
    /// `gateway.rateLimit` …).
    pub sections: Vec<String>,
    /// Settings that now differ from the running ones and take effect only after a restart.
    pub restart_needed: Vec<String>,
}

/// An agent kept by a change whose settings changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentChange {
    /// The agent.
    pub agent: String,
    /// Its keys that changed (`tools`, `model` …; `prompt file` when only the file's text did).
    pub what: Vec<&'static str>,
}

impl Changes {
    /// From `old` (with a digest of each agent's prompt file, any hash: only equality is used) to
    /// `new`. Settings a reload cannot swap in are judged against `started`, the values actually
    /// running: one counts only when this change touched it and it now differs from what runs, so
    /// putting `listen` back is not reported as a change.
    pub fn between<D: PartialEq>(
        (o, old_prompts): (&Config, &HashMap<String, D>),
        (n, new_prompts): (&Config, &HashMap<String, D>),
        s: &Config,
    ) -> Changes {
        let mut changes = Changes {
            added: n
                .agents
                .keys()
                .filter(|a| !o.agents.contains_key(*a))
                .cloned()
                .collect(),
            removed: o
                .agents
                .keys()
                .filter(|a| !n.agents.contains_key(*a))
                .cloned()
                .collect(),
            ..Changes::default()
        };
        for (id, after) in &n.agents {
            let Some(before) = o.agents.get(id) else {
                continue;
            };
            let mut what = Vec::new();
            let mut differs = |key: &'static str, changed: bool| {
                if changed {
                    what.push(key);
                }
            };
            differs("role", before.role != after.role);
            differs("level", before.level != after.level);
            differs("parent", before.parent != after.parent);
            differs("children", before.children != after.children);
            differs("prompt", before.prompt != after.prompt);
            differs(
                "prompt file",
                before.prompt == after.prompt && old_prompts.get(id) != new_prompts.get(id),
            );
            differs("model", before.model != after.model);
            differs("tools", before.tools != after.tools);
            differs("memory", before.memory != after.memory);
            differs("approvers", before.approvers != after.approvers);
            if !what.is_empty() {
                changes.changed.push(AgentChange {
                    agent: id.clone(),
                    what,
                });
            }
        }

        let (of, nf) = (&o.framework, &n.framework);
        let mut section = |name: String, changed: bool| {
            if changed {
                changes.sections.push(name);
            }
        };
        section("framework.name".into(), of.name != nf.name);
        section(
            "framework.defaultModel".into(),
            of.default_model != nf.default_model,
        );
        section("framework.fastModel".into(), of.fast_model != nf.fast_model);
        section(
            "framework.defaultProvider".into(),
            of.default_provider != nf.default_provider,
        );
        for name in keys_of_either(of.providers.keys(), nf.providers.keys()) {
            section(
                format!("framework.providers.{name}"),
                of.providers.get(name) != nf.providers.get(name),
            );
        }
        let (om, nm) = (&of.memory, &nf.memory);
        section("framework.memory.storage".into(), om.storage != nm.storage);
        section(
            "framework.memory.postgres".into(),
            om.postgres != nm.postgres,
        );
        section(
            "framework.memory.embedding".into(),
            om.embedding != nm.embedding,
        );
        section(
            "framework.memory.graph".into(),
            om.graph_enabled != nm.graph_enabled,
        );
        section(
            "framework.memory.consolidation".into(),
            om.consolidation != nm.consolidation,
        );
        section("framework.execution".into(), of.execution != nf.execution);
        section("framework.privacy".into(), of.privacy != nf.privacy);
        // Read by the event log's purge at each run, so a new retention applies at the next purge.
        section("framework.console".into(), of.console != nf.console);
        let (og, ng) = (&o.gateway, &n.gateway);
        section("gateway.rateLimit".into(), og.rate_limit != ng.rate_limit);
        section("gateway.approvers".into(), og.approvers != ng.approvers);
        section(
            "gateway.approvalsChannel".into(),
            og.approvals_channel != ng.approvals_channel,
        );
        for label in keys_of_either(o.shared_blocks.keys(), n.shared_blocks.keys()) {
            section(
                format!("sharedBlocks.{label}"),
                o.shared_blocks.get(label) != n.shared_blocks.get(label),
            );
        }

        let mut restart = |name: &str, changed: bool, running: bool| {
            if changed && !running {
                changes.restart_needed.push(name.to_string());
            }
        };
        restart(
            "channels.web",
            o.channels.web != n.channels.web,
            n.channels.web == s.channels.web,
        );
        restart(
            "channels.slack",
            o.channels.slack != n.channels.slack,
            n.channels.slack == s.channels.slack,
        );
        restart(
            "channels.discord",
            o.channels.discord != n.channels.discord,
            n.channels.discord == s.channels.discord,
        );
        restart(
            "framework.memory.path",
            om.path != nm.path,
            nm.path == s.framework.memory.path,
        );
        restart(
            "framework.memory.storage",
            om.storage != nm.storage,
            nm.storage == s.framework.memory.storage,
        );
        restart(
            "framework.memory.postgres",
            om.postgres != nm.postgres,
            nm.postgres == s.framework.memory.postgres,
        );
        // The embedder is built once, at start (a remote one with its endpoint, key and masker).
        restart(
            "framework.memory.embedding",
            om.embedding != nm.embedding,
            nm.embedding == s.framework.memory.embedding,
        );
        // A node's leases are renewed on the lease it joined with; the other nodes still run on
        // theirs, so a new `leaseTtl` takes effect as each node restarts.
        restart(
            "framework.cluster",
            of.cluster != nf.cluster,
            nf.cluster == s.framework.cluster,
        );
        // The exporters are built once, at start, before the logger (the `OTEL_*` variables are
        // read then too).
        restart(
            "framework.telemetry",
            of.telemetry != nf.telemetry,
            nf.telemetry == s.framework.telemetry,
        );
        changes
    }

    /// The changes in words: `added qa; changed vp-ops (tools, prompt file); changed gateway.rateLimit`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            parts.push(format!("added {}", self.added.join(", ")));
        }
        if !self.removed.is_empty() {
            parts.push(format!("removed {}", self.removed.join(", ")));
        }
        if !self.changed.is_empty() {
            let agents: Vec<String> = self
                .changed
                .iter()
                .map(|c| format!("{} ({})", c.agent, c.what.join(", ")))
                .collect();
            parts.push(format!("changed {}", agents.join(", ")));
        }
        if !self.sections.is_empty() {
            parts.push(format!("changed {}", self.sections.join(", ")));
        }
        if !self.restart_needed.is_empty() {
            parts.push(format!(
                "changed {} (applies at restart)",
                self.restart_needed.join(", ")
            ));
        }
        if parts.is_empty() {
            "no setting changed (comments or layout only, or values set back to the running ones)"
                .to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// The keys of `a`, then those only in `b`: every entry either side has, in file order.
fn keys_of_either<'a>(
    a: impl Iterator<Item = &'a String>,
    b: impl Iterator<Item = &'a String>,
) -> Vec<&'a String> {
    let mut keys: Vec<&String> = a.collect();
    for key in b {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid config: `framework` lines added to a minimal framework, then `rest` (agents and any
    /// other top-level sections).
    fn config(framework: &str, rest: &str) -> Config {
        let text = format!(
            "framework:\n  defaultModel: m\n  providers: {{ p: {{ kind: anthropic, models: {{ m: {{ input: 1, output: 1 }} }} }} }}\n{framework}{rest}"
        );
        crate::parse("t.yaml", text, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .config
    }

    const ORG: &str = "agents:\n  ceo: { role: CEO, tools: [delegate], children: [dev] }\n  dev: { role: Dev, parent: ceo, prompt: 'file:dev.md' }\n";

    fn digests(dev: u8) -> HashMap<String, u8> {
        HashMap::from([("dev".to_string(), dev)])
    }

    fn between(old: &Config, new: &Config, started: &Config) -> Changes {
        Changes::between((old, &digests(1)), (new, &digests(1)), started)
    }

    #[test]
    fn the_same_config_changes_nothing() {
        let c = config("", ORG);
        let changes = between(&c, &c, &c);
        assert_eq!(changes, Changes::default());
        assert_eq!(
            changes.describe(),
            "no setting changed (comments or layout only, or values set back to the running ones)"
        );
    }

    #[test]
    fn agents_added_removed_and_changed_are_named_with_their_keys() {
        let old = config("", ORG);
        let new = config(
            "",
            "agents:\n  ceo: { role: Chief, tools: [delegate], children: [qa] }\n  qa: { role: QA, parent: ceo }\n",
        );
        let changes = between(&old, &new, &old);
        assert_eq!(changes.added, ["qa"]);
        assert_eq!(changes.removed, ["dev"]);
        assert_eq!(
            changes.changed,
            [AgentChange {
                agent: "ceo".into(),
                what: vec!["role", "children"],
            }]
        );
        assert_eq!(
            changes.describe(),
            "added qa; removed dev; changed ceo (role, children)"
        );
    }

    /// A prompt file whose text changed is reported as such only while the `prompt` key stays.
    #[test]
    fn a_changed_prompt_file_is_told_from_a_changed_prompt_key() {
        let old = config("", ORG);
        let changes = Changes::between((&old, &digests(1)), (&old, &digests(2)), &old);
        assert_eq!(changes.changed[0].what, ["prompt file"]);
        let inline = config("", &ORG.replace("'file:dev.md'", "Be brief."));
        let changes = Changes::between((&old, &digests(1)), (&inline, &digests(2)), &old);
        assert_eq!(changes.changed[0].what, ["prompt"]);
    }

    #[test]
    fn sections_that_apply_now_are_listed_in_file_order() {
        let old = config("", ORG);
        let new = config(
            "  name: Renamed\n  privacy: { enabled: false }\n",
            &format!("gateway:\n  rateLimit: {{ perUser: {{ messages: 5, per: 1m }} }}\n{ORG}"),
        );
        let changes = between(&old, &new, &old);
        assert_eq!(
            changes.sections,
            ["framework.name", "framework.privacy", "gateway.rateLimit"]
        );
        assert!(changes.restart_needed.is_empty(), "{changes:?}");
    }

    /// The listener counts as needing a restart while it differs from the one running; setting it
    /// back to the running value is not a change.
    #[test]
    fn restart_settings_are_judged_against_the_running_values() {
        let started = config("", ORG);
        let moved = config(
            "",
            &format!("channels:\n  web: {{ listen: \"127.0.0.1:9000\" }}\n{ORG}"),
        );
        let changes = between(&started, &moved, &started);
        assert_eq!(changes.restart_needed, ["channels.web"]);
        assert!(changes.sections.is_empty(), "{changes:?}");
        assert_eq!(
            changes.describe(),
            "changed channels.web (applies at restart)"
        );
        assert_eq!(between(&moved, &started, &started), Changes::default());
    }

    /// A new lease needs a restart, like the storage it applies to; it is not applied live.
    #[test]
    fn a_changed_lease_needs_a_restart() {
        let started = config("  memory: { storage: postgres }\n", ORG);
        let longer = config(
            "  memory: { storage: postgres }\n  cluster: { leaseTtl: 30s }\n",
            ORG,
        );
        let changes = between(&started, &longer, &started);
        assert_eq!(changes.restart_needed, ["framework.cluster"]);
        assert!(changes.sections.is_empty(), "{changes:?}");
        assert_eq!(
            changes.describe(),
            "changed framework.cluster (applies at restart)"
        );
        // Set back to the running lease: nothing to restart for.
        assert_eq!(between(&longer, &started, &started), Changes::default());
    }

    /// The exporters are built at start: a telemetry change applies at the next restart.
    #[test]
    fn a_changed_telemetry_section_needs_a_restart() {
        let started = config("", ORG);
        let exporting = config(
            "  telemetry: { endpoint: \"http://127.0.0.1:4318\", captureContent: true }\n",
            ORG,
        );
        let changes = between(&started, &exporting, &started);
        assert_eq!(changes.restart_needed, ["framework.telemetry"]);
        assert!(changes.sections.is_empty(), "{changes:?}");
        assert_eq!(between(&exporting, &started, &started), Changes::default());
    }
}
