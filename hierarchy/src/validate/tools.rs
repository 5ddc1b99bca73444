//! Tools and Bash allow-lists: leaves cannot delegate, managers that cannot delegate are flagged,
//! and each `bash` section is checked against the sections of the managers above it.
//!
//! Invariants: an allow-list is judged with the same coverage and narrowing rules the `OrgTree`
//! applies at run time (module `workspace`), so a warning here describes what will really happen; a
//! `bash` section never makes a config invalid (taking `Bash` away must stay one safe step).

use std::collections::{HashMap, HashSet};

use super::checker::{Checker, Depths};
use crate::diagnostic::Anchor;
use crate::schema::{Tool, Unlisted};
use crate::workspace;

impl<'a> Checker<'a> {
    /// Leaves cannot delegate; managers without delegation tools are probably a mistake.
    pub(super) fn tools(&mut self) {
        for (id, agent) in &self.config.agents {
            let list = Self::agent_path(id).key("tools");
            if agent.children.is_empty() {
                // With a misspelt `children`, the misspelt key is the mistake, not the tools.
                let explained = self.misspelt.children(id);
                let mut reported = HashSet::new();
                for tool in agent
                    .tools
                    .iter()
                    .filter(|t| !explained && t.delegates() && reported.insert(**t))
                {
                    let path = self.item(list.clone(), tool.as_str(), 0);
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{id}` has no children, so it cannot use `{tool}`"),
                        "remove the tool, or give the agent children",
                    );
                }
            } else if !agent.can_delegate() {
                let anchor_path = if self.node_at(&list).is_some() {
                    list.clone()
                } else {
                    Self::agent_path(id)
                };
                self.warning(
                    anchor_path,
                    Anchor::Key,
                    format!("`{id}` has children but neither `delegate` nor `delegateParallel`, so it can never hand them work"),
                    "add `delegate` (and `delegateParallel`) to its tools",
                );
            }
            let mut seen = HashSet::new();
            for tool in &agent.tools {
                if !seen.insert(tool) {
                    let path = self.item(list.clone(), tool.as_str(), 1);
                    self.warning(
                        path,
                        Anchor::Value,
                        format!("`{tool}` is listed twice"),
                        "list each tool once",
                    );
                }
            }
        }
    }

    /// `bash` sections: one on an agent that neither runs Bash nor manages anyone who does does
    /// nothing. That is a warning, not an error: the section grants nothing by itself, and taking
    /// `Bash` away (the safe direction, e.g. one click in the admin console) must not make the config
    /// invalid until the section is deleted too. On a manager without Bash whose team has it, the
    /// section is the team's ceiling, which is allowed. Each prefix a manager's list does not cover is a warning (it will ask,
    /// or be refused), and `"*"` that survives is a warning that every command runs without asking.
    ///
    /// `depths` are the shape rules' (they tell which agents' chains reach the root). Each agent's
    /// team and each manager's effective list are found once, so a large org costs its size times
    /// its depth.
    pub(super) fn bash(&mut self, depths: &Depths<'a>) {
        let config = self.config;
        let mut above_bash: Option<HashSet<&str>> = None;
        let mut allow_of: HashMap<&str, Vec<String>> = HashMap::new();
        for (id, agent) in &config.agents {
            let Some(bash) = &agent.bash else { continue };
            let section = Self::agent_path(id).key("bash");
            if !agent.tools.contains(&Tool::Bash) {
                let team_runs_bash = above_bash
                    .get_or_insert_with(|| self.above_bash(depths))
                    .contains(id.as_str());
                if !team_runs_bash {
                    self.warning(
                        section,
                        Anchor::Key,
                        format!("`{id}` has a `bash` section but not the `Bash` tool, and nobody below it has `Bash`: the section does nothing"),
                        "add `Bash` to its `tools`, or remove the `bash` section",
                    );
                    continue;
                }
            }
            let manager = self.bash_manager(id);
            let manager_allow =
                manager.map(|m| &*allow_of.entry(m).or_insert_with(|| self.effective_allow(m)));
            let list = section.key("allow");
            let mut seen: HashMap<&str, usize> = HashMap::new();
            for prefix in &bash.allow {
                let nth = seen.entry(prefix.as_str()).or_insert(0);
                let occurrence = *nth;
                *nth += 1;
                let trimmed = prefix.trim();
                let covered = manager_allow
                    .as_ref()
                    .is_none_or(|allow| allow.iter().any(|m| workspace::covers(m, trimmed)));
                if covered {
                    if trimmed == "*" && occurrence == 0 {
                        let path = self.item(list.clone(), prefix, occurrence);
                        self.warning(
                            path,
                            Anchor::Value,
                            format!("`\"*\"` lets `{id}` run every command without asking"),
                            "the sandbox still holds (its workspace only, no network unless `framework.sandbox.network`, no secrets, limits), but within it anything goes; list the commands it needs instead, e.g. `[\"cargo test\", \"git status\"]`",
                        );
                    }
                    continue;
                }
                let (Some(manager), Some(allow)) = (manager, &manager_allow) else {
                    continue;
                };
                let fate = match bash.unlisted {
                    Unlisted::Ask => "will ask before running",
                    Unlisted::Deny => "will be refused (`unlisted: deny`)",
                };
                let narrower: Vec<String> = allow
                    .iter()
                    .filter(|m| workspace::covers(trimmed, m))
                    .map(|m| format!("`{m}`"))
                    .collect();
                let message = if trimmed == "*" {
                    let only = if narrower.is_empty() {
                        "nothing".to_string()
                    } else {
                        narrower.join(", ")
                    };
                    format!(
                        "`\"*\"` is narrowed to what `{manager}` (the nearest manager with a `bash` section) allows: {only}; other commands {fate}"
                    )
                } else if narrower.is_empty() {
                    format!(
                        "`{trimmed}` is not allowed by `{manager}` (the nearest manager with a `bash` section), so it {fate}"
                    )
                } else {
                    format!(
                        "`{manager}` (the nearest manager with a `bash` section) allows `{trimmed}` only as {}; other `{trimmed}` commands {fate}",
                        narrower.join(", ")
                    )
                };
                let path = self.item(list.clone(), prefix, occurrence);
                self.warning(
                    path,
                    Anchor::Value,
                    message,
                    format!("a subordinate's `allow` only narrows its manager's: add `{trimmed}` to `agents.{manager}.bash.allow`, or remove it here"),
                );
            }
        }
    }

    /// The agents someone else who runs Bash reports to, directly or not: for each of them a `bash`
    /// section is that team's ceiling. One bounded walk up from each agent with `Bash` (a cycle
    /// cannot loop it), which stops early at an agent an earlier walk went on from when that agent's
    /// chain reaches the root (everything above it is marked already).
    fn above_bash(&self, depths: &Depths<'a>) -> HashSet<&'a str> {
        let agents = &self.config.agents;
        let mut above = HashSet::new();
        for (id, agent) in agents {
            if !agent.tools.contains(&Tool::Bash) {
                continue;
            }
            let mut current = agent.parent.as_deref();
            for _ in 0..agents.len() {
                let Some((key, manager)) = current.and_then(|p| agents.get_key_value(p)) else {
                    break;
                };
                if key == id || (!above.insert(key.as_str()) && depths.contains_key(key.as_str())) {
                    break;
                }
                current = manager.parent.as_deref();
            }
        }
        above
    }

    /// The nearest ancestor of `id` with a `bash` section (bounded, so a cycle cannot loop).
    fn bash_manager(&self, id: &str) -> Option<&'a str> {
        let agents = &self.config.agents;
        let mut current = agents.get(id)?.parent.as_deref()?;
        for _ in 0..agents.len() {
            let (key, agent) = agents.get_key_value(current)?;
            if agent.bash.is_some() {
                return Some(key.as_str());
            }
            current = agent.parent.as_deref()?;
        }
        None
    }

    /// `id`'s allow-list after narrowing by every manager section above it (what `OrgTree::bash_allow`
    /// answers), computed from the config so it also works on an org with other errors.
    fn effective_allow(&self, id: &str) -> Vec<String> {
        let agents = &self.config.agents;
        let mut chain: Vec<&str> = Vec::new();
        let mut current = Some(id);
        while let Some(at) = current {
            if chain.contains(&at) || chain.len() > agents.len() {
                break;
            }
            chain.push(at);
            current = self.bash_manager(at);
        }
        let mut allow: Option<Vec<String>> = None;
        for at in chain.iter().rev() {
            let Some(bash) = agents.get(*at).and_then(|a| a.bash.as_ref()) else {
                continue;
            };
            allow = Some(match allow {
                Some(manager) => workspace::narrow(&bash.allow, &manager),
                None => workspace::own(&bash.allow),
            });
        }
        allow.unwrap_or_default()
    }
}
