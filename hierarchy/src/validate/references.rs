//! Names and references: every agent id the org chart mentions (`parent:`, `children:`) names an
//! agent, and the two directions agree.
//!
//! Invariants: an unknown name gets a "did you mean" among the agent ids (or, when it is written under
//! `sharedBlocks:` by mistake, says so); an entry is located in the document only once it is known
//! to be wrong, since finding it walks the tree.

use std::collections::HashSet;

use super::checker::Checker;
use crate::diagnostic::Anchor;

impl<'a> Checker<'a> {
    /// Each `parent:` names another agent, and that agent lists this one among its `children`.
    pub(super) fn parents(&mut self) {
        let agents = &self.config.agents;
        for (id, agent) in agents {
            let Some(parent) = &agent.parent else {
                continue;
            };
            let path = Self::agent_path(id).key("parent");
            if parent == id {
                self.error(
                    path,
                    Anchor::Value,
                    format!("`{id}` names itself as its parent"),
                    "name the agent it reports to",
                );
            } else if let Some(parent_agent) = agents.get(parent) {
                if !parent_agent.children.contains(id) && !self.misspelt.lists_child(parent, id) {
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{id}` names `{parent}` as its parent, but `agents.{parent}.children` does not list `{id}`"),
                        format!("add `{id}` to `agents.{parent}.children`, or change this parent"),
                    );
                }
            } else {
                let hint = self.suggest(parent);
                self.error(
                    path,
                    Anchor::Value,
                    format!("parent `{parent}` is not an agent"),
                    hint,
                );
            }
        }
    }

    /// Each `children` entry is listed once, names an agent, and that agent names this one as its
    /// parent (with a hint that never suggests closing a loop).
    pub(super) fn children(&mut self) {
        let agents = &self.config.agents;
        for (id, agent) in agents {
            let list = Self::agent_path(id).key("children");
            let mut seen = HashSet::new();
            let mut reported_twice = HashSet::new();
            for child in &agent.children {
                if !seen.insert(child.as_str()) {
                    if reported_twice.insert(child.as_str()) {
                        let path = self.item(list.clone(), child, 1);
                        self.error(
                            path,
                            Anchor::Value,
                            format!("`{child}` is listed twice"),
                            "list each child once",
                        );
                    }
                    continue;
                }
                // Located only when something is wrong: finding it walks the document.
                let path = || self.item(list.clone(), child, 0);
                match agents.get(child) {
                    None => {
                        let hint = self.suggest(child);
                        let path = path();
                        self.error(
                            path,
                            Anchor::Value,
                            format!("child `{child}` is not an agent"),
                            hint,
                        );
                    }
                    Some(c)
                        if c.parent.as_deref() != Some(id.as_str())
                            && !(c.parent.is_none() && self.misspelt.names_parent(child, id)) =>
                    {
                        let path = path();
                        let actual = match &c.parent {
                            Some(p) => format!("its parent is `{p}`"),
                            None => "it has no parent".to_string(),
                        };
                        // Suggest re-parenting only when it keeps the org a tree: if `child` is
                        // `id` or above it, `parent: {id}` on it would close a loop.
                        let hint = if self.is_ancestor(child, id) {
                            format!(
                                "remove `{child}` from this list: it is above `{id}` ({}), so making it report to `{id}` would create a cycle",
                                self.chain(id)
                            )
                        } else {
                            format!("set `parent: {id}` on `{child}`, or remove it from this list")
                        };
                        self.error(
                            path,
                            Anchor::Value,
                            format!("`{child}` is listed as a child of `{id}`, but {actual}"),
                            hint,
                        );
                    }
                    Some(_) => {}
                }
            }
        }
    }

    /// Whether `ancestor` is `id` or on `id`'s parent chain (bounded, so a cycle cannot loop).
    fn is_ancestor(&self, ancestor: &str, id: &str) -> bool {
        let mut current = id;
        for _ in 0..=self.config.agents.len() {
            if current == ancestor {
                return true;
            }
            match self
                .config
                .agents
                .get(current)
                .and_then(|a| a.parent.as_deref())
            {
                Some(parent) => current = parent,
                None => return false,
            }
        }
        false
    }
}
