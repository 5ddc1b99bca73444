//! Structured edits of `opc.config.yaml` as minimal text edits: add an agent under a parent, remove
//! or move an agent, set one of an agent's fields (model, tools, prompt, approvers), add a
//! `shareWith`.
//!
//! Why text edits and not "parse, change, print": a config is a document its admin wrote — comments,
//! key order, quoting, blank lines. Re-serialising would lose all of it. Each action here finds its
//! places in the positioned tree ([`crate::yaml`]) and inserts, replaces or deletes only the bytes it
//! must; every other line of the file stays byte for byte as it was.
//!
//! Invariants:
//! - an edit either applies whole or returns an [`EditError`] saying why, and the text is unchanged;
//! - an edit keeps the tree consistent: a new agent is listed in its parent's `children` with
//!   `parent` and `level` set; a move updates both parents and every moved level. Other rules may
//!   still fire (a manager left with no reports keeps its `delegate` tool): the caller shows them;
//! - values written are valid YAML scalars (quoted when plain text would mean something else);
//! - the result is not validated here: the caller shows it with the usual diagnostics before saving.

use std::fmt;

use crate::yaml::{self, Entry, Node, Value};

/// A structured change to the config text. As JSON (the admin console's form):
/// `{"kind": "add_agent", "id", "parent", "role", "model"?, "tools"?, "prompt"?}`,
/// `{"kind": "remove_agent", "id"}`, `{"kind": "move_agent", "id", "parent"}`,
/// `{"kind": "set_field", "id", "field", "values"}`, `{"kind": "share_with", "id", "with"}`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// A new agent under `parent`, listed in its children, one level below it.
    AddAgent {
        /// The new agent's id.
        id: String,
        /// Its manager.
        parent: String,
        /// Its role (shown in the org chart).
        role: String,
        /// Its model, when not the default.
        #[serde(default)]
        model: Option<String>,
        /// Its tools.
        #[serde(default)]
        tools: Vec<String>,
        /// Its prompt (inline text), if any.
        #[serde(default)]
        prompt: Option<String>,
    },
    /// Remove an agent that manages nobody (its reports must be moved or removed first).
    RemoveAgent {
        /// The agent.
        id: String,
    },
    /// Put an agent (and everyone under it) under another parent.
    MoveAgent {
        /// The agent.
        id: String,
        /// Its new manager.
        parent: String,
    },
    /// Set one of an agent's fields: `model` or `prompt` (a string), `tools` or `approvers` (a list).
    SetField {
        /// The agent.
        id: String,
        /// `model`, `prompt`, `tools` or `approvers`.
        field: String,
        /// The new value: one string for `model` and `prompt`, the items for lists.
        values: Vec<String>,
    },
    /// Let `with` read `id`'s recall memory: add `with` to `agents.<id>.memory.shareWith`.
    ShareWith {
        /// The agent whose memory is shared.
        id: String,
        /// Who may read it.
        with: String,
    },
}

/// Why an edit was not made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditError(pub String);

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EditError {}

fn fail<T>(message: impl Into<String>) -> Result<T, EditError> {
    Err(EditError(message.into()))
}

/// Apply `action` to `text`, returning the new text.
pub fn apply(text: &str, action: &Action) -> Result<String, EditError> {
    let root = yaml::parse(text).map_err(|e| {
        EditError(format!(
            "the config is not valid YAML at line {} ({}); fix it in the editor first",
            e.span.line, e.message
        ))
    })?;
    let doc = Doc { text, root: &root };
    let mut edits = Edits::default();
    match action {
        Action::AddAgent {
            id,
            parent,
            role,
            model,
            tools,
            prompt,
        } => doc.add_agent(
            &mut edits,
            id,
            parent,
            role,
            model.as_deref(),
            tools,
            prompt.as_deref(),
        )?,
        Action::RemoveAgent { id } => doc.remove_agent(&mut edits, id)?,
        Action::MoveAgent { id, parent } => doc.move_agent(&mut edits, id, parent)?,
        Action::SetField { id, field, values } => doc.set_field(&mut edits, id, field, values)?,
        Action::ShareWith { id, with } => doc.share_with(&mut edits, id, with)?,
    }
    edits.apply(text)
}

/// Replacements of byte ranges, applied together.
#[derive(Default)]
struct Edits(Vec<(usize, usize, String)>);

impl Edits {
    fn insert(&mut self, at: usize, text: String) {
        self.0.push((at, at, text));
    }

    fn replace(&mut self, start: usize, end: usize, text: String) {
        self.0.push((start, end, text));
    }

    fn apply(self, text: &str) -> Result<String, EditError> {
        // Later ranges first, so earlier offsets stay valid; inserts at one offset land in the order
        // they were made (the later one is applied first, then the earlier one before it).
        let mut edits: Vec<(usize, (usize, usize, String))> =
            self.0.into_iter().enumerate().collect();
        edits.sort_by(|(i, a), (j, b)| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(j.cmp(i)));
        let mut out = text.to_string();
        let mut floor = usize::MAX;
        for (_, (start, end, with)) in edits {
            if end > floor || end > out.len() || start > end {
                return fail("the edit touches the same text twice; make it in the editor instead");
            }
            if !out.is_char_boundary(start) || !out.is_char_boundary(end) {
                return fail("the edit does not fall on whole characters");
            }
            out.replace_range(start..end, &with);
            floor = start;
        }
        Ok(out)
    }
}

struct Doc<'a> {
    text: &'a str,
    root: &'a Node,
}

impl Doc<'_> {
    fn agents(&self) -> Result<&[Entry], EditError> {
        match self.root.get("agents").and_then(Node::entries) {
            Some(agents) if !agents.is_empty() => Ok(agents),
            _ => fail("the config has no `agents:` mapping to edit"),
        }
    }

    fn agent(&self, id: &str) -> Result<&Entry, EditError> {
        self.agents()?
            .iter()
            .find(|e| e.key == id)
            .ok_or_else(|| EditError(format!("there is no agent `{id}`")))
    }

    /// The agent's fields, which must be written as an indented block (`key: value` lines).
    fn block_fields<'e>(&self, agent: &'e Entry) -> Result<&'e [Entry], EditError> {
        match agent.value.entries() {
            Some(fields) if !fields.is_empty() && !self.is_flow(&agent.value) => Ok(fields),
            _ => fail(format!(
                "agent `{}` is not written as an indented block of `key: value` lines; edit it in the editor",
                agent.key
            )),
        }
    }

    fn is_flow(&self, node: &Node) -> bool {
        matches!(
            self.text.as_bytes().get(node.span.byte_start),
            Some(b'[' | b'{')
        )
    }

    /// Text of a scalar field of `agent` (`level`, `parent`).
    fn scalar<'n>(&self, agent: &'n Entry, key: &str) -> Option<&'n Node> {
        agent
            .value
            .get(key)
            .filter(|n| !matches!(n.value, Value::Seq(_) | Value::Map(_)))
    }

    fn level(&self, agent: &Entry) -> Result<i64, EditError> {
        match self.scalar(agent, "level").map(|n| &n.value) {
            Some(Value::Int(level)) => Ok(*level),
            _ => fail(format!("agent `{}` has no whole-number `level`", agent.key)),
        }
    }

    /// Byte just past the end of `node` (for a flow collection, its closing bracket).
    fn node_end(&self, node: &Node) -> usize {
        let start = node.span.byte_start;
        let inner = match &node.value {
            Value::Seq(items) => items.iter().map(|n| self.node_end(n)).max(),
            Value::Map(entries) => entries
                .iter()
                .map(|e| {
                    self.node_end(&e.value)
                        .max(e.key_span.byte_start + e.key_span.byte_len)
                })
                .max(),
            _ => None,
        };
        match (&node.value, self.is_flow(node)) {
            (Value::Seq(_) | Value::Map(_), true) => {
                let close = if matches!(node.value, Value::Seq(_)) {
                    b']'
                } else {
                    b'}'
                };
                let from = inner.unwrap_or(start + 1);
                self.text.as_bytes()[from..]
                    .iter()
                    .position(|b| *b == close)
                    .map_or(self.text.len(), |p| from + p + 1)
            }
            (Value::Seq(_) | Value::Map(_), false) => inner.unwrap_or(start),
            _ => start + node.span.byte_len,
        }
    }

    /// Start of the line holding byte `at`.
    fn line_start(&self, at: usize) -> usize {
        self.text[..at.min(self.text.len())]
            .rfind('\n')
            .map_or(0, |p| p + 1)
    }

    /// Just past the newline ending the line holding byte `at` (or the end of the text).
    fn line_end(&self, at: usize) -> usize {
        let at = at.min(self.text.len());
        self.text[at..]
            .find('\n')
            .map_or(self.text.len(), |p| at + p + 1)
    }

    /// Where the lines of `entry` end: after its last value's line, and after comment lines
    /// indented under it that follow.
    fn entry_end(&self, entry: &Entry) -> usize {
        let key_indent = entry.key_span.column as usize - 1;
        let last = self
            .node_end(&entry.value)
            .max(entry.key_span.byte_start + entry.key_span.byte_len);
        let mut end = self.line_end(last.saturating_sub(1).max(entry.key_span.byte_start));
        while end < self.text.len() {
            let next = self.line_end(end);
            let line = &self.text[end..next];
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            if trimmed.starts_with('#') && indent > key_indent {
                end = next;
            } else {
                break;
            }
        }
        end
    }

    /// Indentation of the fields of the agents' blocks (from the first agent written as a block).
    fn field_indent(&self) -> Result<String, EditError> {
        let agents = self.agents()?;
        let indent = agents
            .iter()
            .find_map(|a| match a.value.entries() {
                Some(fields) if !fields.is_empty() && !self.is_flow(&a.value) => {
                    Some(fields[0].key_span.column as usize - 1)
                }
                _ => None,
            })
            .unwrap_or(agents[0].key_span.column as usize + 1);
        Ok(" ".repeat(indent))
    }

    /// Add `item` to the list under `key` in `owner`'s block (creating `key: [item]` when absent).
    fn add_to_list(
        &self,
        edits: &mut Edits,
        owner: &Entry,
        key: &str,
        item: &str,
        indent: &str,
    ) -> Result<(), EditError> {
        match owner.value.entry(key) {
            None => {
                edits.insert(
                    self.entry_end(owner),
                    format!("{indent}{key}: [{}]\n", scalar(item)),
                );
                Ok(())
            }
            Some(list) => self.append_item(edits, list, item),
        }
    }

    /// Append `item` to the list `entry` holds (flow `[a, b]` or block `- a` lines).
    fn append_item(&self, edits: &mut Edits, entry: &Entry, item: &str) -> Result<(), EditError> {
        let Value::Seq(items) = &entry.value.value else {
            if entry.value.value == Value::Null {
                // `key:` with nothing after it.
                let at = entry.key_span.byte_start + entry.key_span.byte_len;
                let colon = self.text[at..].find(':').map_or(at, |p| at + p + 1);
                edits.insert(colon, format!(" [{}]", scalar(item)));
                return Ok(());
            }
            return fail(format!("`{}` is not a list", entry.key));
        };
        if items
            .iter()
            .any(|n| n.value == Value::Str(item.to_string()))
        {
            return fail(format!("`{item}` is already in `{}`", entry.key));
        }
        if self.is_flow(&entry.value) {
            match items.last() {
                Some(last) => edits.insert(self.node_end(last), format!(", {}", scalar(item))),
                None => edits.insert(entry.value.span.byte_start + 1, scalar(item)),
            }
            return Ok(());
        }
        let Some(last) = items.last() else {
            return fail(format!(
                "`{}` is an empty block list; edit it in the editor",
                entry.key
            ));
        };
        let first = &items[0];
        let line = self.line_start(first.span.byte_start);
        let dash = self.text[line..first.span.byte_start]
            .find('-')
            .map_or(0, |p| p);
        let gap = &self.text[line + dash + 1..first.span.byte_start];
        edits.insert(
            self.line_end(self.node_end(last).saturating_sub(1)),
            format!("{}-{gap}{}\n", " ".repeat(dash), scalar(item)),
        );
        Ok(())
    }

    /// Remove `item` from the list under `key` in `owner`.
    fn remove_from_list(
        &self,
        edits: &mut Edits,
        owner: &Entry,
        key: &str,
        item: &str,
    ) -> Result<(), EditError> {
        let Some(entry) = owner.value.entry(key) else {
            return Ok(());
        };
        let Value::Seq(items) = &entry.value.value else {
            return Ok(());
        };
        let Some(index) = items
            .iter()
            .position(|n| n.value == Value::Str(item.to_string()))
        else {
            return Ok(());
        };
        let node = &items[index];
        if self.is_flow(&entry.value) {
            let (start, end) = if index + 1 < items.len() {
                (node.span.byte_start, items[index + 1].span.byte_start)
            } else if index > 0 {
                (self.node_end(&items[index - 1]), self.node_end(node))
            } else {
                (node.span.byte_start, self.node_end(node))
            };
            edits.replace(start, end, String::new());
        } else {
            if items.len() == 1 {
                // The last one: the whole `key:` goes (an agent with no reports has no list).
                let start = self.line_start(entry.key_span.byte_start);
                edits.replace(start, self.entry_end(entry), String::new());
                return Ok(());
            }
            let start = self.line_start(node.span.byte_start);
            edits.replace(
                start,
                self.line_end(self.node_end(node).saturating_sub(1)),
                String::new(),
            );
        }
        Ok(())
    }

    /// Set `key` in `owner`'s block to the YAML text `value` (replacing what is there, or adding a
    /// line).
    fn set_key(&self, edits: &mut Edits, owner: &Entry, key: &str, value: String, indent: &str) {
        match owner.value.entry(key) {
            Some(entry) => {
                let start = entry.key_span.byte_start + entry.key_span.byte_len;
                let colon = self.text[start..]
                    .find(':')
                    .map_or(start, |p| start + p + 1);
                let end = if matches!(entry.value.value, Value::Seq(_) | Value::Map(_))
                    && !self.is_flow(&entry.value)
                {
                    // A block value: replace its lines too.
                    self.entry_end(entry).saturating_sub(1)
                } else if entry.value.value == Value::Null {
                    colon
                } else {
                    self.node_end(&entry.value)
                };
                edits.replace(colon, end.max(colon), format!(" {value}"));
            }
            None => edits.insert(self.entry_end(owner), format!("{indent}{key}: {value}\n")),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add_agent(
        &self,
        edits: &mut Edits,
        id: &str,
        parent: &str,
        role: &str,
        model: Option<&str>,
        tools: &[String],
        prompt: Option<&str>,
    ) -> Result<(), EditError> {
        check_id(id)?;
        if role.trim().is_empty() {
            return fail("give the new agent a role (what the org chart shows)");
        }
        if self.agent(id).is_ok() {
            return fail(format!("there is already an agent `{id}`"));
        }
        let manager = self.agent(parent)?;
        let indent = self.field_indent()?;
        self.block_fields(manager)?;
        let level = self.level(manager)? + 1;
        let agents = self.agents()?;
        let key_indent = " ".repeat(agents[0].key_span.column as usize - 1);
        let mut block = format!(
            "{key_indent}{}:\n{indent}role: {}\n{indent}level: {level}\n{indent}parent: {}\n",
            scalar(id),
            scalar(role),
            scalar(parent)
        );
        if let Some(model) = model.filter(|m| !m.trim().is_empty()) {
            block.push_str(&format!("{indent}model: {}\n", scalar(model)));
        }
        if !tools.is_empty() {
            block.push_str(&format!("{indent}tools: {}\n", list(tools)));
        }
        if let Some(prompt) = prompt.filter(|p| !p.trim().is_empty()) {
            block.push_str(&format!("{indent}prompt: {}\n", scalar(prompt)));
        }
        let last = agents.last().unwrap_or(manager);
        let mut at = self.entry_end(last);
        if at == self.text.len() && !self.text.ends_with('\n') {
            block.insert(0, '\n');
        }
        // Right after the parent's last report, when it has some, so the file reads in org order;
        // otherwise after the last agent.
        if let Some(Value::Seq(children)) = manager.value.get("children").map(|n| &n.value)
            && let Some(Value::Str(last_child)) = children.last().map(|n| &n.value)
            && let Ok(child) = self.agent(last_child)
        {
            at = self.entry_end(child);
            if at == self.text.len() && !self.text.ends_with('\n') {
                block.insert(0, '\n');
            }
        }
        // The parent's list first: when it is a new line at the end of the parent's block, it must
        // come before the new agent's block inserted at the same place.
        self.add_to_list(edits, manager, "children", id, &indent)?;
        edits.insert(at, block);
        Ok(())
    }

    fn remove_agent(&self, edits: &mut Edits, id: &str) -> Result<(), EditError> {
        let agent = self.agent(id)?;
        let reports = self.children_of(agent);
        if !reports.is_empty() {
            return fail(format!(
                "`{id}` manages {}: move or remove them first",
                reports.join(", ")
            ));
        }
        if let Some(Value::Str(parent)) = self.scalar(agent, "parent").map(|n| &n.value) {
            if let Ok(manager) = self.agent(parent) {
                self.remove_from_list(edits, manager, "children", id)?;
            }
        } else {
            return fail(format!(
                "`{id}` is the root of the org; it cannot be removed"
            ));
        }
        let start = self.line_start(agent.key_span.byte_start);
        edits.replace(start, self.entry_end(agent), String::new());
        Ok(())
    }

    fn children_of(&self, agent: &Entry) -> Vec<String> {
        match agent.value.get("children").map(|n| &n.value) {
            Some(Value::Seq(items)) => items
                .iter()
                .filter_map(|n| match &n.value {
                    Value::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    fn move_agent(&self, edits: &mut Edits, id: &str, parent: &str) -> Result<(), EditError> {
        let agent = self.agent(id)?;
        let manager = self.agent(parent)?;
        if id == parent {
            return fail("an agent cannot report to itself");
        }
        // Not under itself: walk up from the new parent.
        let mut up = Some(parent.to_string());
        let mut steps = 0;
        while let Some(current) = up {
            if current == id {
                return fail(format!(
                    "`{parent}` reports to `{id}`: moving `{id}` under it would make a cycle"
                ));
            }
            steps += 1;
            if steps > self.agents()?.len() {
                break;
            }
            up = self.agent(&current).ok().and_then(|a| {
                match self.scalar(a, "parent").map(|n| &n.value) {
                    Some(Value::Str(p)) => Some(p.clone()),
                    _ => None,
                }
            });
        }
        let Some(Value::Str(old)) = self.scalar(agent, "parent").map(|n| n.value.clone()) else {
            return fail(format!("`{id}` is the root of the org; it cannot be moved"));
        };
        if old == parent {
            return fail(format!("`{id}` already reports to `{parent}`"));
        }
        let indent = self.field_indent()?;
        self.block_fields(agent)?;
        self.block_fields(manager)?;
        if let Ok(previous) = self.agent(&old) {
            self.remove_from_list(edits, previous, "children", id)?;
        }
        self.add_to_list(edits, manager, "children", id, &indent)?;
        self.set_key(edits, agent, "parent", scalar(parent), &indent);
        // Levels: the agent one below its new parent, and its whole subtree with it.
        let shift = self.level(manager)? + 1 - self.level(agent)?;
        if shift != 0 {
            let mut stack = vec![id.to_string()];
            let mut seen = 0;
            while let Some(current) = stack.pop() {
                seen += 1;
                if seen > self.agents()?.len() {
                    break;
                }
                let entry = self.agent(&current)?;
                let level = self.level(entry)?;
                self.set_key(edits, entry, "level", (level + shift).to_string(), &indent);
                stack.extend(self.children_of(entry));
            }
        }
        Ok(())
    }

    fn set_field(
        &self,
        edits: &mut Edits,
        id: &str,
        field: &str,
        values: &[String],
    ) -> Result<(), EditError> {
        let agent = self.agent(id)?;
        self.block_fields(agent)?;
        let indent = self.field_indent()?;
        let value = match field {
            "model" | "prompt" => match values {
                [one] if !one.trim().is_empty() => scalar(one),
                _ => return fail(format!("`{field}` takes one non-empty value")),
            },
            "tools" | "approvers" => list(values),
            other => {
                return fail(format!(
                    "`{other}` cannot be set here; the console sets model, prompt, tools and approvers"
                ));
            }
        };
        self.set_key(edits, agent, field, value, &indent);
        Ok(())
    }

    fn share_with(&self, edits: &mut Edits, id: &str, with: &str) -> Result<(), EditError> {
        let agent = self.agent(id)?;
        self.agent(with)?;
        if id == with {
            return fail("an agent always reads its own memory");
        }
        self.block_fields(agent)?;
        let indent = self.field_indent()?;
        let Some(memory) = agent.value.entry("memory") else {
            edits.insert(
                self.entry_end(agent),
                format!("{indent}memory: {{ shareWith: [{}] }}\n", scalar(with)),
            );
            return Ok(());
        };
        match &memory.value.value {
            Value::Map(entries) if self.is_flow(&memory.value) => match memory
                .value
                .entry("shareWith")
            {
                Some(list) => self.append_item(edits, list, with),
                None => {
                    let text = format!("shareWith: [{}]", scalar(with));
                    match entries.last() {
                        Some(last) => edits.insert(self.node_end(&last.value), format!(", {text}")),
                        None => edits.insert(memory.value.span.byte_start + 1, format!(" {text} ")),
                    }
                    Ok(())
                }
            },
            Value::Map(entries) if !entries.is_empty() => {
                let inner = " ".repeat(entries[0].key_span.column as usize - 1);
                self.add_to_list(edits, memory, "shareWith", with, &inner)
            }
            _ => fail(format!(
                "`agents.{id}.memory` is not a mapping; edit it in the editor"
            )),
        }
    }
}

/// Agent ids as the validator accepts them (letters, digits, `-` and `_`), checked here so a typo in
/// a form is caught before it becomes text.
fn check_id(id: &str) -> Result<(), EditError> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return fail(format!(
            "`{id}` is not a valid agent id: use letters, digits, `-` and `_` (e.g. `qa-lead`)"
        ));
    }
    Ok(())
}

/// `text` as a YAML scalar: plain when it reads back as the same string, else double-quoted.
pub fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text.trim() == text
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.ends_with(':')
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || " _-./@+()'".contains(c))
        && !text.starts_with(['-', '@', '\'', '.'])
        && yaml::parse(text).is_ok_and(|n| n.value == Value::Str(text.to_string()));
    if plain {
        text.to_string()
    } else {
        serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
    }
}

/// `items` as a flow list: `[a, b]`.
fn list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|i| scalar(i)).collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const ORG: &str = "\
# Our org — comments and spacing are the admin's.
framework:
  name: Acme   # the display name
agents:
  ceo:
    role: CEO
    level: 0
    children: [vp-eng, vp-ops]   # two VPs

  vp-eng:
    role: VP Engineering
    level: 1
    parent: ceo
    tools: [delegate]
    children:
      - dev
    # the VP's notes stay with it
  dev:
    role: Developer
    level: 2
    parent: vp-eng
    memory: { recall: false }
  vp-ops:
    role: \"VP Operations\"
    level: 1
    parent: ceo
channels: {}
";

    fn lines_kept(before: &str, after: &str) {
        let old: Vec<&str> = before.lines().collect();
        let new: Vec<&str> = after.lines().collect();
        let diff = similar::TextDiff::from_lines(before, after);
        for change in diff.iter_all_changes() {
            if change.tag() == similar::ChangeTag::Delete {
                panic!(
                    "a line was removed or changed: {:?}\n{after}",
                    change.value()
                );
            }
        }
        assert!(new.len() > old.len());
    }

    fn add(id: &str, parent: &str) -> Action {
        Action::AddAgent {
            id: id.into(),
            parent: parent.into(),
            role: "QA Lead".into(),
            model: None,
            tools: vec!["escalate".into()],
            prompt: Some("Test: everything.".into()),
        }
    }

    #[test]
    fn adding_an_agent_only_adds_lines() {
        let out = apply(ORG, &add("qa", "vp-ops")).unwrap();
        lines_kept(ORG, &out);
        assert!(out.contains("  qa:\n    role: QA Lead\n    level: 2\n    parent: vp-ops\n    tools: [escalate]\n    prompt: \"Test: everything.\"\n"), "{out}");
        assert!(out.contains("  vp-ops:\n    role: \"VP Operations\"\n    level: 1\n    parent: ceo\n    children: [qa]\n"), "{out}");
        // Under a parent with a block list: a new `- item` line, and the block after its last report.
        let out = apply(ORG, &add("qa", "vp-eng")).unwrap();
        assert!(
            out.contains("    children:\n      - dev\n      - qa\n    # the VP's notes"),
            "{out}"
        );
        assert!(
            out.contains("    memory: { recall: false }\n  qa:\n"),
            "{out}"
        );
        lines_kept(ORG, &out);
        // A flow list gets `, item`.
        let out = apply(ORG, &add("cto", "ceo")).unwrap();
        assert!(
            out.contains("    children: [vp-eng, vp-ops, cto]   # two VPs\n"),
            "{out}"
        );
    }

    #[test]
    fn bad_requests_say_why_and_change_nothing() {
        for (action, says) in [
            (add("dev", "ceo"), "already an agent `dev`"),
            (add("qa", "nobody"), "no agent `nobody`"),
            (add("q a", "ceo"), "not a valid agent id"),
            (
                Action::RemoveAgent {
                    id: "vp-eng".into(),
                },
                "manages dev",
            ),
            (Action::RemoveAgent { id: "ceo".into() }, "manages vp-eng"),
            (
                Action::MoveAgent {
                    id: "vp-eng".into(),
                    parent: "dev".into(),
                },
                "cycle",
            ),
            (
                Action::SetField {
                    id: "dev".into(),
                    field: "level".into(),
                    values: vec!["3".into()],
                },
                "cannot be set here",
            ),
        ] {
            let e = apply(ORG, &action).unwrap_err();
            assert!(e.0.contains(says), "{action:?}: {e}");
        }
    }

    #[test]
    fn remove_move_set_and_share() {
        let out = apply(
            ORG,
            &Action::RemoveAgent {
                id: "vp-ops".into(),
            },
        )
        .unwrap();
        assert!(
            out.contains("    children: [vp-eng]   # two VPs\n"),
            "{out}"
        );
        assert!(!out.contains("vp-ops"), "{out}");
        assert!(
            out.ends_with("    memory: { recall: false }\nchannels: {}\n"),
            "{out}"
        );

        let out = apply(
            ORG,
            &Action::MoveAgent {
                id: "dev".into(),
                parent: "vp-ops".into(),
            },
        )
        .unwrap();
        assert!(
            out.contains("  dev:\n    role: Developer\n    level: 2\n    parent: vp-ops\n"),
            "{out}"
        );
        assert!(
            out.contains("    parent: ceo\n    children: [dev]\n"),
            "{out}"
        );
        let out = apply(
            &out,
            &Action::MoveAgent {
                id: "vp-ops".into(),
                parent: "vp-eng".into(),
            },
        )
        .unwrap();
        assert!(
            out.contains(
                "  vp-ops:\n    role: \"VP Operations\"\n    level: 2\n    parent: vp-eng\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("  dev:\n    role: Developer\n    level: 3\n"),
            "the subtree moves down: {out}"
        );

        let out = apply(
            ORG,
            &Action::SetField {
                id: "vp-eng".into(),
                field: "tools".into(),
                values: vec!["delegate".into(), "escalate".into()],
            },
        )
        .unwrap();
        assert!(out.contains("    tools: [delegate, escalate]\n"), "{out}");
        let out = apply(
            ORG,
            &Action::SetField {
                id: "dev".into(),
                field: "model".into(),
                values: vec!["anthropic/claude-sonnet-4-5".into()],
            },
        )
        .unwrap();
        assert!(
            out.contains("    memory: { recall: false }\n    model: anthropic/claude-sonnet-4-5\n"),
            "{out}"
        );

        let out = apply(
            ORG,
            &Action::ShareWith {
                id: "dev".into(),
                with: "vp-eng".into(),
            },
        )
        .unwrap();
        assert!(
            out.contains("    memory: { recall: false, shareWith: [vp-eng] }\n"),
            "{out}"
        );
        let out = apply(
            &out,
            &Action::ShareWith {
                id: "dev".into(),
                with: "ceo".into(),
            },
        )
        .unwrap();
        assert!(out.contains("shareWith: [vp-eng, ceo] }"), "{out}");
        let out = apply(
            ORG,
            &Action::ShareWith {
                id: "vp-ops".into(),
                with: "ceo".into(),
            },
        )
        .unwrap();
        assert!(
            out.contains("    parent: ceo\n    memory: { shareWith: [ceo] }\nchannels"),
            "{out}"
        );
    }

    #[test]
    fn scalars_read_back_as_written() {
        for text in [
            "plain",
            "VP Operations",
            "yes",
            "1.5",
            "a: b",
            "#x",
            "",
            " pad",
            "null",
            "[x]",
            "O'Brien",
            "ünïcode",
        ] {
            let yaml = format!("k: {}\n", scalar(text));
            let node = yaml::parse(&yaml).unwrap();
            assert_eq!(
                node.get("k").unwrap().value,
                Value::Str(text.into()),
                "{yaml}"
            );
        }
    }
}
