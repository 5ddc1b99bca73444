//! The `Checker` every rule family works through: the decoded config, the positioned tree, and the
//! diagnostics found so far, with the few lookups several families share (locating a key path,
//! suggesting an agent id, walking an agent's parent chain).
//!
//! Invariants: positions come only from the positioned tree ([`Checker::locate`] walks it for a key
//! path), so every diagnostic points at text the user wrote; the parent-chain walks are bounded by the
//! number of agents, so a config with a cycle cannot make them loop. The families depend on this
//! file, and it on none of them (only on `misspelt`, the other leaf).

use std::collections::HashMap;

use super::misspelt::Misspelt;
use crate::decode::did_you_mean;
use crate::diagnostic::{self, Anchor, Diagnostic, KeyPath, Segment};
use crate::schema::Config;
use crate::yaml::{Node, Span, Value};

/// The state every rule reads and appends to.
pub(super) struct Checker<'a> {
    /// The decoded config.
    pub(super) config: &'a Config,
    /// The positioned tree it was decoded from: the only source of positions.
    pub(super) doc: &'a Node,
    /// Unknown keys that stand for `parent`/`children`: what they explain is not reported again.
    pub(super) misspelt: Misspelt<'a>,
    /// What the rules found, in the order they found it (sorted by position later).
    pub(super) out: Vec<Diagnostic>,
}

/// Depth (hops from the root) of each agent whose ancestry reaches the root; agents under a missing
/// parent or in a cycle have none.
pub(super) type Depths<'a> = HashMap<&'a str, u32>;

impl<'a> Checker<'a> {
    /// A checker with nothing found yet.
    pub(super) fn new(config: &'a Config, doc: &'a Node) -> Self {
        Checker {
            config,
            doc,
            misspelt: Misspelt::find(config, doc),
            out: Vec::new(),
        }
    }

    fn locate(&self, path: &KeyPath, anchor: Anchor) -> Span {
        diagnostic::locate(self.doc, path, anchor)
    }

    pub(super) fn error(
        &mut self,
        path: KeyPath,
        anchor: Anchor,
        message: String,
        hint: impl Into<String>,
    ) {
        let span = self.locate(&path, anchor);
        self.out
            .push(Diagnostic::error(path, span, message).with_hint(hint));
    }

    pub(super) fn warning(
        &mut self,
        path: KeyPath,
        anchor: Anchor,
        message: String,
        hint: impl Into<String>,
    ) {
        let span = self.locate(&path, anchor);
        self.out
            .push(Diagnostic::warning(path, span, message).with_hint(hint));
    }

    /// The path of the `nth` element of the list at `list` whose text is `text` (decoding drops invalid
    /// items, so a decoded index is not always the YAML index).
    pub(super) fn item(&self, list: KeyPath, text: &str, nth: usize) -> KeyPath {
        self.item_where(list, nth, |node| node.value == Value::Str(text.to_string()))
    }

    pub(super) fn item_where(
        &self,
        list: KeyPath,
        nth: usize,
        matches: impl Fn(&Node) -> bool,
    ) -> KeyPath {
        let found = self.node_at(&list).and_then(|node| match &node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter(|(_, n)| matches(n))
                .nth(nth)
                .map(|(i, _)| i),
            _ => None,
        });
        match found {
            Some(index) => list.index(index),
            None => list,
        }
    }

    pub(super) fn node_at(&self, path: &KeyPath) -> Option<&'a Node> {
        path.0
            .iter()
            .try_fold(self.doc, |node, segment| match segment {
                Segment::Key(key) => node.get(key),
                Segment::Index(index) => node.element(*index),
            })
    }

    pub(super) fn agent_path(id: &str) -> KeyPath {
        KeyPath::of(["agents", id])
    }

    pub(super) fn suggest(&self, id: &str) -> String {
        // Defined, but under the wrong section (reported there by the decoder).
        if self
            .node_at(&KeyPath::of(["sharedBlocks", id]))
            .and_then(crate::schema::SharedBlock::agent_key)
            .is_some()
        {
            return format!("`{id}` is written under `sharedBlocks:`; move it under `agents:`");
        }
        match did_you_mean(id, self.config.agents.keys().map(String::as_str)) {
            Some(s) => format!("did you mean `{s}`? Otherwise define `{id}` under `agents:`"),
            None => format!("define `{id}` under `agents:`, or remove this reference"),
        }
    }

    /// `ceo → vp-eng → lead` for the agent `id`, root first.
    pub(super) fn chain(&self, id: &str) -> String {
        let mut ids = vec![id];
        let mut current = id;
        while let Some(parent) = self
            .config
            .agents
            .get(current)
            .and_then(|a| a.parent.as_deref())
        {
            if ids.contains(&parent) || ids.len() > self.config.agents.len() {
                break;
            }
            ids.push(parent);
            current = parent;
        }
        ids.reverse();
        ids.join(" → ")
    }
}

pub(super) fn provider_hint<'p>(
    providers: impl Iterator<Item = &'p str> + Clone,
    wanted: &str,
) -> String {
    let names: Vec<&str> = providers.clone().collect();
    if names.is_empty() {
        return "add a provider under `framework.providers`".to_string();
    }
    let list = names.join(", ");
    match did_you_mean(wanted, providers) {
        Some(s) if s != wanted => {
            format!("did you mean `{s}`? Write `provider/model`; configured providers: {list}")
        }
        _ => format!(
            "write `provider/model`, or set `framework.defaultProvider`; configured providers: {list}"
        ),
    }
}
