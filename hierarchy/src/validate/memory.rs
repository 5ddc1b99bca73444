//! Memory: block labels and initial values, shared blocks that exist and are used, `shareWith` only
//! between siblings, and `framework.memory.consolidation` keys that have an effect.
//!
//! Invariants: `shareWith` is judged by the depths the shape rules computed, so an agent the shape
//! rules already reported (under a missing parent, in a cycle) is not reported again here; only
//! consolidation keys written in the file are judged, since the defaults need no defence.

use std::collections::{HashMap, HashSet};

use super::checker::{Checker, Depths};
use crate::decode::did_you_mean;
use crate::diagnostic::{Anchor, KeyPath};
use crate::yaml::Value;

impl<'a> Checker<'a> {
    /// Block labels unique per agent, initial values within limits, shared blocks exist, shareWith
    /// targets exist and are at the same level.
    pub(super) fn memory(&mut self, depths: &Depths<'a>) {
        let config = self.config;
        for (label, block) in &config.shared_blocks {
            let length = block.value.chars().count();
            if length > block.limit.get() as usize {
                self.error(
                    KeyPath::of(["sharedBlocks", label, "value"]),
                    Anchor::Value,
                    format!(
                        "the initial value is {length} characters, over the block's limit of {}",
                        block.limit
                    ),
                    "shorten the value, or raise `limit`",
                );
            }
        }
        let mut referenced: HashSet<&str> = HashSet::new();
        for (id, agent) in &config.agents {
            let memory = &agent.memory;
            let blocks = Self::agent_path(id).key("memory").key("blocks");
            let mut labels: HashMap<&str, usize> = HashMap::new();
            for block in &memory.blocks {
                let nth = labels.entry(&block.label).or_insert(0);
                let occurrence = *nth;
                *nth += 1;
                // Located only when something is wrong: finding it walks the document.
                let block_path = |checker: &Self| {
                    checker.item_where(blocks.clone(), occurrence, |n| {
                        n.get("label")
                            .is_some_and(|l| l.value == Value::Str(block.label.clone()))
                    })
                };
                if occurrence == 1 {
                    let path = block_path(self).key("label");
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{id}` already has a block labelled `{}`", block.label),
                        "block labels must be unique per agent; rename one",
                    );
                }
                if memory.shared_blocks.contains(&block.label) {
                    let path = block_path(self).key("label");
                    self.error(
                        path,
                        Anchor::Value,
                        format!(
                            "`{}` is both an own block and a shared block of `{id}`",
                            block.label
                        ),
                        "rename the own block, so memory tools know which one is meant",
                    );
                }
                let length = block.value.chars().count();
                if length > block.limit.get() as usize {
                    let path = block_path(self).key("value");
                    self.error(
                        path,
                        Anchor::Value,
                        format!("the initial value is {length} characters, over the block's limit of {}", block.limit),
                        "shorten the value, or raise `limit`",
                    );
                }
            }

            let shared = Self::agent_path(id).key("memory").key("sharedBlocks");
            let mut referenced_here = HashSet::new();
            for label in &memory.shared_blocks {
                if !referenced_here.insert(label.as_str()) {
                    let path = self.item(shared.clone(), label, 1);
                    self.warning(
                        path,
                        Anchor::Value,
                        format!("`{label}` is listed twice"),
                        "list each shared block once",
                    );
                    continue;
                }
                referenced.insert(label);
                if !config.shared_blocks.contains_key(label) {
                    let hint = match did_you_mean(
                        label,
                        config.shared_blocks.keys().map(String::as_str),
                    ) {
                        Some(s) => format!(
                            "did you mean `{s}`? Otherwise define it under the top-level `sharedBlocks:`"
                        ),
                        None => format!("define `{label}` under the top-level `sharedBlocks:`"),
                    };
                    let path = self.item(shared.clone(), label, 0);
                    self.error(
                        path,
                        Anchor::Value,
                        format!("shared block `{label}` is not defined"),
                        hint,
                    );
                }
            }

            let share = Self::agent_path(id).key("memory").key("shareWith");
            let mut seen = HashSet::new();
            for other in &memory.share_with {
                let path = self.item(
                    share.clone(),
                    other,
                    usize::from(!seen.insert(other.as_str())),
                );
                if other == id {
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{id}` shares with itself"),
                        "remove it: an agent always sees its own memory",
                    );
                    continue;
                }
                if !config.agents.contains_key(other) {
                    let hint = self.suggest(other);
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{other}` is not an agent"),
                        hint,
                    );
                    continue;
                }
                if let (Some(mine), Some(theirs)) =
                    (depths.get(id.as_str()), depths.get(other.as_str()))
                    && mine != theirs
                {
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{id}` is at level {mine} but `{other}` is at level {theirs}: shareWith only connects agents at the same level"),
                        "superiors already read their subordinates' memory; remove this entry",
                    );
                    continue;
                }
                let parent_of = |a: &str| {
                    config
                        .agents
                        .get(a)
                        .and_then(|x| x.parent.clone())
                        .unwrap_or_default()
                };
                let (mine, theirs) = (parent_of(id), parent_of(other));
                // A misspelt `parent` on either side is the mistake, said where it is.
                let explained = self.misspelt.parent(id) || self.misspelt.parent(other);
                if mine != theirs && !explained {
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{id}` (under `{mine}`) and `{other}` (under `{theirs}`) are not siblings: shareWith only connects agents with the same manager, and nobody reads across branches"),
                        format!("remove this entry; their common superior already reads both, or move `{other}` under `{mine}`"),
                    );
                }
            }
        }
        for label in config.shared_blocks.keys() {
            if !referenced.contains(label.as_str()) {
                self.warning(
                    KeyPath::of(["sharedBlocks", label]),
                    Anchor::Key,
                    format!("shared block `{label}` is not used by any agent"),
                    "list it in some agent's `memory.sharedBlocks`, or remove it",
                );
            }
        }
    }

    /// `framework.memory.consolidation` against what runs: consolidation and fact extraction work on
    /// the facts of agents with `memory.archival`, so keys written for them without any such agent,
    /// or written for consolidation while it is off, do nothing, and a daily cap below one memory
    /// call stops memory work after its first call each day. Only keys written in the file are
    /// judged: consolidation is on by default, and a config that never mentions it is not asked to.
    pub(super) fn consolidation(&mut self) {
        /// Roughly the smallest memory call: its system prompt, a short exchange, a few listed facts
        /// and the `record_facts` answer.
        const SMALLEST_CALL: u32 = 1_000;
        let base = KeyPath::of(["framework", "memory", "consolidation"]);
        let Some(node) = self.node_at(&base) else {
            return;
        };
        let written = |key: &str| node.get(key).is_some();
        let settings = &self.config.framework.memory.consolidation;
        let archival = self.config.agents.values().any(|a| a.memory.archival);
        if !settings.enabled {
            for key in ["frequency", "idleAfter"] {
                if written(key) {
                    self.warning(
                        base.clone().key(key),
                        Anchor::Key,
                        format!("`{key}` has no effect: consolidation is off (`enabled: false`)"),
                        "set `enabled: true` to consolidate, or remove the key",
                    );
                }
            }
        }
        if !archival {
            if settings.enabled && written("enabled") {
                self.warning(
                    base.clone().key("enabled"),
                    Anchor::Value,
                    "consolidation is on, but no agent has `memory.archival: true`: there are no facts to consolidate, so it never runs".into(),
                    "turn on `memory.archival` for the agents whose facts should be kept, or set `enabled: false`",
                );
            }
            for key in ["maxTokensPerDay", "model"] {
                if written(key) && !(settings.enabled && written("enabled")) {
                    self.warning(
                        base.clone().key(key),
                        Anchor::Key,
                        format!("`{key}` has no effect: no agent has `memory.archival: true`, so no memory work runs"),
                        "turn on `memory.archival` for the agents whose facts should be kept, or remove the key",
                    );
                }
            }
        }
        let cap = settings.max_tokens_per_day.get();
        if written("maxTokensPerDay") && cap < SMALLEST_CALL {
            self.warning(
                base.key("maxTokensPerDay"),
                Anchor::Value,
                format!("{cap} tokens a day is less than one memory call (about {SMALLEST_CALL}): each agent's memory work stops after its first call of the day"),
                format!("raise it to at least {SMALLEST_CALL}; the default is 200000"),
            );
        }
    }
}
