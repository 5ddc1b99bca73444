//! Keys the decoder reported as unknown that stand for an agent's `parent:` or `children:` (a typo
//! such as `childs:`, or a synonym such as `reportsTo:`), with what they would have said.
//!
//! Such a key leaves the org without an edge it was meant to have, and every rule that looks at the
//! edge then has something to say: a root too many, a child its parent does not list, a leaf holding
//! `delegate`, levels one off below it. Those are all the same mistake, and listed by position they
//! bury it. The rules ask here first and leave them out, so the unknown key is the error a person
//! reads.
//!
//! Invariant: only findings that renaming the key would make go away are left out, and the unknown
//! key is always an error of its own (the decoder's), so a config never becomes valid through this.

use std::collections::HashMap;

use crate::decode::suggest_key;
use crate::schema::{Agent, Config};
use crate::yaml::{Node, Value};

/// The misspelt `parent`/`children` keys of a config's agents.
#[derive(Debug, Default)]
pub(super) struct Misspelt<'a> {
    /// Agents without `parent:` but with a key that stands for it, and the id its value names.
    parent: HashMap<&'a str, Option<&'a str>>,
    /// Agents without `children:` but with a key that stands for it, and the ids its value lists.
    children: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> Misspelt<'a> {
    /// Finds them in the `agents` mapping of `doc`, for the agents `config` holds.
    pub(super) fn find(config: &'a Config, doc: &'a Node) -> Self {
        let mut found = Misspelt::default();
        let Some(Value::Map(entries)) = doc.get("agents").map(|n| &n.value) else {
            return found;
        };
        for entry in entries {
            let Some((id, _)) = config.agents.get_key_value(entry.key.as_str()) else {
                continue;
            };
            let Value::Map(keys) = &entry.value.value else {
                continue;
            };
            for key in keys {
                if Agent::KEYS.contains(&key.key.as_str()) {
                    continue;
                }
                match suggest_key(&key.key, Agent::KEYS) {
                    Some("parent") if entry.value.get("parent").is_none() => {
                        found.parent.entry(id).or_insert_with(|| text(&key.value));
                    }
                    Some("children") if entry.value.get("children").is_none() => {
                        found
                            .children
                            .entry(id)
                            .or_insert_with(|| match &key.value.value {
                                Value::Seq(items) => items.iter().filter_map(text).collect(),
                                _ => text(&key.value).into_iter().collect(),
                            });
                    }
                    _ => {}
                }
            }
        }
        found
    }

    /// Whether any agent has a misspelt `parent`.
    pub(super) fn any_parent(&self) -> bool {
        !self.parent.is_empty()
    }

    /// Whether `id` has a misspelt `parent` (so it counts as a root, and everything below it is at
    /// the wrong depth).
    pub(super) fn parent(&self, id: &str) -> bool {
        self.parent.contains_key(id)
    }

    /// Whether `id`'s misspelt `parent` names `parent`.
    pub(super) fn names_parent(&self, id: &str, parent: &str) -> bool {
        self.parent.get(id).is_some_and(|p| *p == Some(parent))
    }

    /// Whether `id` has a misspelt `children` (so it counts as a leaf).
    pub(super) fn children(&self, id: &str) -> bool {
        self.children.contains_key(id)
    }

    /// Whether `id`'s misspelt `children` lists `child`.
    pub(super) fn lists_child(&self, id: &str, child: &str) -> bool {
        self.children
            .get(id)
            .is_some_and(|children| children.contains(&child))
    }
}

/// The string a node holds, if it is one.
fn text(node: &Node) -> Option<&str> {
    match &node.value {
        Value::Str(s) => Some(s),
        _ => None,
    }
}
