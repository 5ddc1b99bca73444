//! Tree shape: one root, no cycles, levels that match each agent's depth, and a depth within
//! `framework.execution.maxHierarchyDepth`.
//!
//! Invariants: the parent chains are walked once, iteratively (an adversarially deep org cannot
//! overflow the stack), and a cycle is one error however many agents it holds, said at the `parent:`
//! of its first member in the file. A depth error is said only at the top of the branch that is too
//! deep, not again for everything under it. Agents under a missing parent or in a cycle get no depth,
//! so the rules that compare depths stay quiet about them (the parent rules have said why).

use std::collections::{HashMap, HashSet};

use super::checker::{Checker, Depths};
use crate::diagnostic::{Anchor, KeyPath};

impl<'a> Checker<'a> {
    /// One root: exactly one agent has no parent. None at all is said once, on `agents:`; each extra
    /// one is said on its own key, naming the first as the root. An agent whose `parent` is misspelt
    /// is no root: its misspelt key says why it has no parent (unless every root is one).
    pub(super) fn root(&mut self) {
        let agents = &self.config.agents;
        let mut roots: Vec<&str> = agents
            .iter()
            .filter(|(_, a)| a.parent.is_none())
            .map(|(id, _)| id.as_str())
            .collect();
        if roots.iter().any(|id| !self.misspelt.parent(id)) {
            roots.retain(|id| !self.misspelt.parent(id));
        }
        match roots.as_slice() {
            [] if !agents.is_empty() => self.error(
                KeyPath::of(["agents"]),
                Anchor::Key,
                "there is no root agent: every agent has a parent".into(),
                "the agent at the top (your CEO) must have no `parent:`",
            ),
            [first, rest @ ..] => {
                for extra in rest {
                    self.error(
                        Self::agent_path(extra),
                        Anchor::Key,
                        format!("`{extra}` has no parent, but `{first}` is already the root"),
                        format!(
                            "an org has exactly one root: give `{extra}` a `parent:`, or remove it"
                        ),
                    );
                }
            }
            [] => {}
        }
    }

    /// Levels match depth, depth within `maxHierarchyDepth`, no cycles (one error each). Returns each
    /// reachable agent's depth, which the memory rules compare. An agent at or under a misspelt
    /// `parent` has no depth: it would be at another one once the key is fixed.
    pub(super) fn levels(&mut self) -> Depths<'a> {
        let agents = &self.config.agents;
        let mut depths = self.depths();
        if self.misspelt.any_parent() {
            depths.retain(|id, _| !self.under_misspelt_parent(id));
        }
        let max = self.config.framework.execution.max_hierarchy_depth.get();
        for (id, agent) in agents {
            let Some(&depth) = depths.get(id.as_str()) else {
                continue;
            };
            if let Some(level) = agent.level
                && level != depth
            {
                let chain = self.chain(id);
                self.error(
                    Self::agent_path(id).key("level"),
                    Anchor::Value,
                    format!("level {level} does not match the agent's place in the tree: it is at level {depth} ({chain})"),
                    format!("set `level: {depth}`, or move the agent under a different parent"),
                );
            }
            let parent_depth_ok = agent
                .parent
                .as_deref()
                .and_then(|p| depths.get(p))
                .is_some_and(|&d| d <= max);
            if depth > max && parent_depth_ok {
                self.error(
                    Self::agent_path(id),
                    Anchor::Key,
                    format!("`{id}` is at depth {depth}, deeper than framework.execution.maxHierarchyDepth ({max})"),
                    "raise `maxHierarchyDepth`, or attach this branch higher in the tree",
                );
            }
        }
        depths
    }

    /// Walks every agent's parent chain once: depths for the chains that reach the root, one error per
    /// cycle. Iterative, so an adversarially deep org cannot overflow the stack.
    fn depths(&mut self) -> Depths<'a> {
        let agents = &self.config.agents;
        let mut depths: Depths<'a> = HashMap::with_capacity(agents.len());
        let mut dead: HashSet<&'a str> = HashSet::new();
        for start in agents.keys() {
            let mut chain: Vec<&'a str> = Vec::new();
            let mut on_chain: HashMap<&'a str, usize> = HashMap::new();
            let mut current = start.as_str();
            let base = loop {
                if let Some(&d) = depths.get(current) {
                    break Some(d);
                }
                if dead.contains(current) {
                    break None;
                }
                if let Some(&at) = on_chain.get(current) {
                    self.report_cycle(&chain[at..]);
                    break None;
                }
                let Some(agent) = agents.get(current) else {
                    break None;
                };
                on_chain.insert(current, chain.len());
                chain.push(current);
                match agent.parent.as_deref() {
                    None => {
                        depths.insert(current, 0);
                        chain.pop();
                        break Some(0);
                    }
                    Some(parent) => match agents.get_key_value(parent) {
                        Some((key, _)) => current = key.as_str(),
                        None => break None,
                    },
                }
            };
            match base {
                Some(base) => {
                    for (i, id) in chain.iter().rev().enumerate() {
                        depths.insert(
                            id,
                            base + 1 + u32::try_from(i).unwrap_or(u32::MAX - base - 1),
                        );
                    }
                }
                None => dead.extend(chain),
            }
        }
        depths
    }

    fn report_cycle(&mut self, members: &[&str]) {
        // Self-parenting is reported by the parent rule with a clearer message.
        if members.len() < 2 {
            return;
        }
        let first_in_file = self
            .config
            .agents
            .keys()
            .find(|id| members.contains(&id.as_str()))
            .map_or(members[0], String::as_str);
        let start = members
            .iter()
            .position(|m| *m == first_in_file)
            .unwrap_or(0);
        let mut loop_ids: Vec<&str> = members[start..]
            .iter()
            .chain(&members[..start])
            .copied()
            .collect();
        loop_ids.push(first_in_file);
        self.error(
            Self::agent_path(first_in_file).key("parent"),
            Anchor::Value,
            format!("the org has a cycle: {}", loop_ids.join(" → ")),
            "an agent cannot report to its own subordinate; change one `parent:` to break the loop",
        );
    }

    /// Whether `id` or an agent above it has a misspelt `parent` (bounded, so a cycle cannot loop).
    fn under_misspelt_parent(&self, id: &str) -> bool {
        let agents = &self.config.agents;
        let mut current = id;
        for _ in 0..=agents.len() {
            if self.misspelt.parent(current) {
                return true;
            }
            match agents.get(current).and_then(|a| a.parent.as_deref()) {
                Some(parent) => current = parent,
                None => return false,
            }
        }
        false
    }
}
