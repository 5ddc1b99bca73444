//! Semantic rules: does the decoded config describe a working org?
//!
//! Runs after decoding, on whatever decoded cleanly, so that one typo does not hide the other problems.
//! Rules speak in key paths (`agents.vp-eng.children[1]`); [`Checker::locate`] turns a path back into a
//! line and column by walking the positioned tree, which is the only source of positions.
//!
//! The rules, in the order they run: org shape (one root, parents exist, parent/children agree, no
//! cycles, levels, depth), tools, workspaces and Bash (workspaces inside the root and apart, `bash`
//! sections that do something, allow-lists a manager narrows, sandbox settings), memory (blocks, shared
//! blocks, shareWith), prompts, models, privacy, the web listener's exposure (a `publicUrl` needs an
//! access token), and finally credentials anywhere in the file.

use std::collections::{HashMap, HashSet};
use std::path::Path as FsPath;

use crate::decode::did_you_mean;
use crate::diagnostic::{self, Anchor, Diagnostic, KeyPath, Path, Segment};
use crate::prompt_file::PromptFileError;
use crate::schema::{Config, PrivacyMode, Prompt, ProviderKind, SandboxMode, Tool, Unlisted};
use crate::secrets;
use crate::workspace::{self, Outside};
use crate::yaml::{Node, Span, Value};

/// Runs every semantic rule. `base_dir` is where relative paths (prompt files) resolve; `None` skips the
/// checks that need a file system.
pub(crate) fn check(config: &Config, doc: &Node, base_dir: Option<&FsPath>) -> Vec<Diagnostic> {
    let mut checker = Checker {
        config,
        doc,
        out: Vec::new(),
    };
    let depths = checker.org_shape();
    checker.tools();
    checker.workspaces(base_dir);
    checker.bash();
    checker.sandbox();
    checker.memory(&depths);
    checker.consolidation();
    if let Some(base_dir) = base_dir {
        checker.prompts(base_dir);
    }
    checker.models();
    checker.privacy();
    checker.web_exposure();
    checker.credentials(doc, Path::Root);
    checker.out
}

struct Checker<'a> {
    config: &'a Config,
    doc: &'a Node,
    out: Vec<Diagnostic>,
}

/// Depth (hops from the root) of each agent whose ancestry reaches the root; agents under a missing
/// parent or in a cycle have none.
type Depths<'a> = HashMap<&'a str, u32>;

impl<'a> Checker<'a> {
    fn locate(&self, path: &KeyPath, anchor: Anchor) -> Span {
        diagnostic::locate(self.doc, path, anchor)
    }

    fn error(&mut self, path: KeyPath, anchor: Anchor, message: String, hint: impl Into<String>) {
        let span = self.locate(&path, anchor);
        self.out
            .push(Diagnostic::error(path, span, message).with_hint(hint));
    }

    fn warning(&mut self, path: KeyPath, anchor: Anchor, message: String, hint: impl Into<String>) {
        let span = self.locate(&path, anchor);
        self.out
            .push(Diagnostic::warning(path, span, message).with_hint(hint));
    }

    /// The path of the `nth` element of the list at `list` whose text is `text` (decoding drops invalid
    /// items, so a decoded index is not always the YAML index).
    fn item(&self, list: KeyPath, text: &str, nth: usize) -> KeyPath {
        self.item_where(list, nth, |node| node.value == Value::Str(text.to_string()))
    }

    fn item_where(&self, list: KeyPath, nth: usize, matches: impl Fn(&Node) -> bool) -> KeyPath {
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

    fn node_at(&self, path: &KeyPath) -> Option<&'a Node> {
        path.0
            .iter()
            .try_fold(self.doc, |node, segment| match segment {
                Segment::Key(key) => node.get(key),
                Segment::Index(index) => node.element(*index),
            })
    }

    fn agent_path(id: &str) -> KeyPath {
        KeyPath::of(["agents", id])
    }

    fn suggest(&self, id: &str) -> String {
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

    /// One root; parents exist and list their children; children name their parent; no cycles; levels
    /// match depth; depth within `maxHierarchyDepth`. Returns each reachable agent's depth.
    fn org_shape(&mut self) -> Depths<'a> {
        let agents = &self.config.agents;
        let roots: Vec<&str> = agents
            .iter()
            .filter(|(_, a)| a.parent.is_none())
            .map(|(id, _)| id.as_str())
            .collect();
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
                if !parent_agent.children.contains(id) {
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
                    Some(c) if c.parent.as_deref() != Some(id.as_str()) => {
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

        let depths = self.depths();
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

    /// `ceo → vp-eng → lead` for the agent `id`, root first.
    fn chain(&self, id: &str) -> String {
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

    /// Leaves cannot delegate; managers without delegation tools are probably a mistake.
    fn tools(&mut self) {
        for (id, agent) in &self.config.agents {
            let list = Self::agent_path(id).key("tools");
            if agent.children.is_empty() {
                let mut reported = HashSet::new();
                for tool in agent
                    .tools
                    .iter()
                    .filter(|t| t.delegates() && reported.insert(**t))
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

    /// Every workspace lies strictly inside the root, and two agents' workspaces are the same directory
    /// or apart: one inside another would let its owner write where the other alone should (a
    /// manager into its team's, or into a sibling's). No workspace holds OPC's own files (the config's
    /// directory, the database), the home directory or the model cache, nor lies in the model cache.
    fn workspaces(&mut self, base_dir: Option<&FsPath>) {
        let config = self.config;
        let base = base_dir.unwrap_or(FsPath::new("."));
        let root = workspace::absolute(base, &config.framework.workspace.root);
        let root_text = config.framework.workspace.root.display().to_string();
        let mut dirs: Vec<(&str, std::path::PathBuf)> = Vec::new();
        for (id, agent) in &config.agents {
            let Some(written) = &agent.workspace else {
                dirs.push((id, root.join(id)));
                continue;
            };
            let path = Self::agent_path(id).key("workspace");
            let shown = written.display();
            let reason = match workspace::agent_dir(&root, written) {
                Ok(dir) => {
                    dirs.push((id, dir));
                    continue;
                }
                Err(Outside::Absolute) => format!(
                    "`{shown}` is an absolute path; a workspace is written relative to the workspace root (`{root_text}`)"
                ),
                Err(Outside::Climbs) => {
                    format!("`{shown}` climbs out of the workspace root (`{root_text}`) with `..`")
                }
                Err(Outside::IsRoot) => format!(
                    "`{shown}` is the workspace root itself, which holds every other agent's workspace"
                ),
            };
            self.error(
                path,
                Anchor::Value,
                reason,
                format!("name a directory inside the root, e.g. `workspace: repos/{id}`; to put workspaces elsewhere, move the root with `framework.workspace.root`"),
            );
        }
        for (i, (id, dir)) in dirs.iter().enumerate() {
            let inside = dirs
                .iter()
                .enumerate()
                .find(|(j, (_, other))| *j != i && dir != other && dir.starts_with(other));
            if let Some((_, (outer, _))) = inside {
                let anchor_path = if config.agents[*id].workspace.is_some() {
                    Self::agent_path(id).key("workspace")
                } else {
                    Self::agent_path(outer).key("workspace")
                };
                self.error(
                    anchor_path,
                    Anchor::Value,
                    format!("`{id}`'s workspace lies inside `{outer}`'s, so `{outer}` could write into it"),
                    format!("give `{id}` a workspace beside `{outer}`'s (e.g. `workspace: {id}`), or the very same one (`workspace:` with the same path) if they are meant to share it"),
                );
            }
        }
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| workspace::normalise(FsPath::new(&h)));
        let protected = [
            (
                workspace::absolute(base, FsPath::new(".")),
                "the config file's directory",
            ),
            (
                workspace::absolute(base, &config.framework.memory.path),
                "OPC's database (`framework.memory.path`)",
            ),
        ];
        // The model cache as `opc-models` finds it (`$OPC_MODELS`, else the user's cache dir): neither
        // holding it nor inside it, since the models are code-adjacent data OPC loads.
        let env_dir = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(std::path::PathBuf::from)
        };
        let models = env_dir("OPC_MODELS")
            .or_else(|| env_dir("XDG_CACHE_HOME").map(|c| c.join("opc/models")))
            .or_else(|| env_dir("HOME").map(|h| h.join(".cache/opc/models")))
            .map(|m| workspace::normalise(&m));
        for (id, dir) in &dirs {
            let inside_models = models
                .as_ref()
                .filter(|m| dir.starts_with(m))
                .map(|m| (m.clone(), "the model cache"));
            let hit = protected
                .iter()
                .map(|(p, what)| (p.clone(), *what))
                .chain(home.clone().map(|h| (h, "the home directory")))
                .chain(models.clone().map(|m| (m, "the model cache")))
                .find(|(p, _)| p.starts_with(dir))
                .or(inside_models);
            if let Some((_, what)) = hit {
                let path = if config.agents[*id].workspace.is_some() {
                    Self::agent_path(id).key("workspace")
                } else {
                    KeyPath::of(["framework", "workspace", "root"])
                };
                self.error(
                    path,
                    Anchor::Value,
                    format!("`{id}`'s workspace ({}) holds or lies in {what}, which no agent may reach", dir.display()),
                    "keep workspaces in a directory of their own, such as the default `framework.workspace.root: .opc/workspaces`",
                );
            }
        }
    }

    /// `bash` sections: one on an agent that neither runs Bash nor manages anyone who does does
    /// nothing. That is a warning, not an error: the section grants nothing by itself, and taking
    /// `Bash` away (the safe direction, e.g. one click in the admin console) must not make the config
    /// invalid until the section is deleted too. On a manager without Bash whose team has it, the
    /// section is the team's ceiling, which is allowed. Each prefix a manager's list does not cover is a warning (it will ask,
    /// or be refused), and `"*"` that survives is a warning that every command runs without asking.
    fn bash(&mut self) {
        let config = self.config;
        for (id, agent) in &config.agents {
            let Some(bash) = &agent.bash else { continue };
            let section = Self::agent_path(id).key("bash");
            let runs_bash = |a: &crate::schema::Agent| a.tools.contains(&Tool::Bash);
            if !runs_bash(agent) {
                let team_runs_bash = config
                    .agents
                    .iter()
                    .any(|(other, a)| other != id && runs_bash(a) && self.is_ancestor(id, other));
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
            let manager_allow = manager.map(|m| self.effective_allow(m));
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

    /// `framework.sandbox`: `mode: off` is said out loud; `env` never passes a provider key or a
    /// platform token into commands a model writes (they could print it, and the model would read it).
    fn sandbox(&mut self) {
        let config = self.config;
        let sandbox = &config.framework.sandbox;
        if sandbox.mode == SandboxMode::Off {
            self.warning(
                KeyPath::of(["framework", "sandbox", "mode"]),
                Anchor::Value,
                "`mode: off`: Bash commands run without the kernel sandbox, with OPC's own user and file access (only the environment is still scrubbed)".into(),
                "remove `mode: off` (the default `enforce` refuses Bash where the kernel lacks a feature, naming it); run `opc validate` to see what this kernel offers",
            );
        }
        let configured = configured_secret_envs(config);
        let list = KeyPath::of(["framework", "sandbox", "env"]);
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for name in &sandbox.env {
            let nth = seen.entry(name.as_str()).or_insert(0);
            let occurrence = *nth;
            *nth += 1;
            let why = if let Some(key) = configured.iter().find(|(n, _)| n == name).map(|(_, k)| k)
            {
                Some(format!("`{name}` is the config's `{key}`"))
            } else {
                secret_env_shape(name)
                    .map(|shape| format!("`{name}` looks like a secret ({shape})"))
            };
            if let Some(why) = why {
                let path = self.item(list.clone(), name, occurrence);
                self.error(
                    path,
                    Anchor::Value,
                    format!("{why}: the sandbox's environment never holds a provider key or a platform token"),
                    "remove it: a command could print it and the model would read it; give tools what they need through files in the workspace, or a variable that holds no credential",
                );
            } else if occurrence == 1 {
                let path = self.item(list.clone(), name, occurrence);
                self.warning(
                    path,
                    Anchor::Value,
                    format!("`{name}` is listed twice"),
                    "list each variable once",
                );
            }
        }
    }

    /// Block labels unique per agent, initial values within limits, shared blocks exist, shareWith
    /// targets exist and are at the same level.
    fn memory(&mut self, depths: &Depths<'a>) {
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
                if mine != theirs {
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

    /// Prompt files lie inside the config file's directory (once symlinks are followed), are regular
    /// files with one name, readable UTF-8 within the size cap, and not empty (read through
    /// [`crate::read_prompt_file`], as every other reader does).
    fn prompts(&mut self, base_dir: &FsPath) {
        for (id, agent) in &self.config.agents {
            let path = Self::agent_path(id).key("prompt");
            match &agent.prompt {
                Some(Prompt::File(file)) => match crate::read_prompt_file(base_dir, file) {
                    Ok(text) if text.trim().is_empty() => self.warning(
                        path,
                        Anchor::Value,
                        format!("prompt file `{}` is empty", file.display()),
                        "write the agent's instructions into it",
                    ),
                    Ok(_) => {}
                    Err(e) => {
                        let hint = e.hint();
                        let message = match &e {
                            // The path as written and as resolved: a relative path resolves against
                            // the config's directory, which is not always where the user stands.
                            PromptFileError::Io {
                                path: resolved,
                                source,
                            } => format!(
                                "cannot read prompt file `{}` ({}): {source}",
                                file.display(),
                                resolved.display()
                            ),
                            other => other.to_string(),
                        };
                        self.error(path, Anchor::Value, message, hint);
                    }
                },
                Some(Prompt::Inline(text)) if text.trim().is_empty() => self.warning(
                    path,
                    Anchor::Value,
                    "the prompt is empty".into(),
                    "write the agent's instructions, or `file:prompts/<id>.md`",
                ),
                _ => {}
            }
        }
    }

    /// `framework.memory.consolidation` against what runs: consolidation and fact extraction work on
    /// the facts of agents with `memory.archival`, so keys written for them without any such agent,
    /// or written for consolidation while it is off, do nothing, and a daily cap below one memory
    /// call stops memory work after its first call each day. Only keys written in the file are
    /// judged: consolidation is on by default, and a config that never mentions it is not asked to.
    fn consolidation(&mut self) {
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

    /// Every model reference names a configured provider; models without a price get a warning.
    fn models(&mut self) {
        let framework = &self.config.framework;
        if let Some(default) = &framework.default_provider
            && !framework.providers.contains_key(default)
        {
            let hint = provider_hint(framework.providers.keys().map(String::as_str), default);
            self.error(
                KeyPath::of(["framework", "defaultProvider"]),
                Anchor::Value,
                format!("`{default}` is not a configured provider"),
                hint,
            );
        }
        let mut references: Vec<(KeyPath, &str)> = vec![(
            KeyPath::of(["framework", "defaultModel"]),
            framework.default_model.as_str(),
        )];
        if let Some(fast) = &framework.fast_model {
            references.push((KeyPath::of(["framework", "fastModel"]), fast));
        }
        if let Some(model) = &framework.memory.consolidation.model {
            references.push((
                KeyPath::of(["framework", "memory", "consolidation", "model"]),
                model,
            ));
        }
        for (id, agent) in &self.config.agents {
            if let Some(model) = &agent.model {
                references.push((Self::agent_path(id).key("model"), model));
            }
        }
        let mut unpriced_warned = HashSet::new();
        for (path, model) in references {
            match framework.resolve_model(model) {
                Ok((provider, id)) => {
                    let priced = framework
                        .providers
                        .get(provider)
                        .is_some_and(|p| p.models.contains_key(id));
                    if priced {
                        continue;
                    }
                    if !model.contains('/')
                        && let Some(family) = foreign_family(framework, provider, id)
                    {
                        self.error(
                            path,
                            Anchor::Value,
                            format!("`{id}` looks like {family} model, but it resolves to provider `{provider}`, which serves Anthropic models"),
                            format!(
                                "add a provider for it (`kind: openai-compatible` with its `baseUrl`) and write `<provider>/{id}`, or use a Claude model; configured providers: {}",
                                framework.providers.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                            ),
                        );
                        continue;
                    }
                    if !unpriced_warned.insert((provider, id)) {
                        continue;
                    }
                    let priced_ids = framework
                        .providers
                        .values()
                        .flat_map(|p| p.models.keys().map(String::as_str));
                    match did_you_mean(id, priced_ids).filter(|s| *s != id) {
                        Some(near) => self.warning(
                            path,
                            Anchor::Value,
                            format!("provider `{provider}` has no price for `{id}`: did you mean `{near}`?"),
                            format!("write `{near}` if that is the model you meant; otherwise add `{id}: {{ input: …, output: … }}` (USD per million tokens) to `framework.providers.{provider}.models`, or its cost counts as 0"),
                        ),
                        None => self.warning(
                            path,
                            Anchor::Value,
                            format!("provider `{provider}` has no price for `{id}`, so its cost will be counted as 0"),
                            format!("add `{id}: {{ input: …, output: … }}` (USD per million tokens) to `framework.providers.{provider}.models`"),
                        ),
                    }
                }
                Err(e) => {
                    let wanted = model.split_once('/').map_or(model, |(p, _)| p);
                    let hint =
                        provider_hint(framework.providers.keys().map(String::as_str), wanted);
                    self.error(
                        path,
                        Anchor::Value,
                        format!("model `{model}` names no configured provider: {e}"),
                        hint,
                    );
                }
            }
        }
    }

    /// `privacy.routeModel`: required in mode `route`, written `provider/model`, naming a configured
    /// provider and one of the models it lists (the trusted model personal data is sent to must be
    /// chosen on purpose, never resolved by a default); ignored, with a warning, in other modes.
    fn privacy(&mut self) {
        self.detect_types();
        self.require_ner();
        let framework = &self.config.framework;
        let privacy = &framework.privacy;
        let path = KeyPath::of(["framework", "privacy", "routeModel"]);
        let providers = || framework.providers.keys().map(String::as_str);
        match (privacy.mode, privacy.route_model.as_deref()) {
            (PrivacyMode::Route, None) if privacy.enabled => self.error(
                KeyPath::of(["framework", "privacy", "mode"]),
                Anchor::Value,
                "mode `route` needs `routeModel`: the model that requests carrying personal data are sent to".into(),
                "add `routeModel: <provider>/<model>`, a model on a provider you trust (for example a local OpenAI-compatible server)",
            ),
            (PrivacyMode::Route, Some(reference)) => {
                let Some((provider, id)) = reference.split_once('/') else {
                    self.error(
                        path,
                        Anchor::Value,
                        format!("`{reference}` names no provider: the route model is written `provider/model`"),
                        provider_hint(providers(), reference),
                    );
                    return;
                };
                match framework.providers.get(provider) {
                    None => {
                        let hint = provider_hint(providers(), provider);
                        self.error(
                            path,
                            Anchor::Value,
                            format!("`{provider}` is not a configured provider"),
                            hint,
                        );
                    }
                    Some(p) if !p.models.contains_key(id) => self.error(
                        path,
                        Anchor::Value,
                        format!("provider `{provider}` lists no model `{id}`"),
                        format!(
                            "add `{id}: {{ input: 0, output: 0 }}` (or its prices) to `framework.providers.{provider}.models`: the model personal data goes to must be configured"
                        ),
                    ),
                    Some(_) => {}
                }
            }
            (mode, Some(_)) if mode != PrivacyMode::Route => self.warning(
                path,
                Anchor::Key,
                format!("`routeModel` is used only in mode `route`; the mode is `{}`", mode.as_str()),
                "remove it, or set `mode: route`",
            ),
            _ => {}
        }
    }

    /// An enabled privacy gateway whose `detectTypes` leaves out a type the detector supports lets that
    /// kind of personal data reach the model unmasked (an IBAN, say). That may be deliberate, but the
    /// shipped example once did it by accident, so it is worth a warning that names each type left out.
    /// The detector's own list ([`opc_shapes::EntityType::ALL`]) is the reference: what it can find
    /// and is not asked to find is what leaks.
    fn detect_types(&mut self) {
        let privacy = &self.config.framework.privacy;
        let path = KeyPath::of(["framework", "privacy", "detectTypes"]);
        // Left out, the key defaults to every type; written, it is what the user chose.
        if !privacy.enabled || self.node_at(&path).is_none() {
            return;
        }
        let missing: Vec<&str> = opc_shapes::EntityType::ALL
            .iter()
            .map(|t| t.as_str())
            .filter(|name| !privacy.detect_types.iter().any(|t| t.as_str() == *name))
            .collect();
        if missing.is_empty() {
            return;
        }
        let (list, them) = match missing.as_slice() {
            [one] => (format!("`{one}`"), "it"),
            [init @ .., last] => (
                format!(
                    "{} and `{last}`",
                    init.iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "them",
            ),
            [] => return,
        };
        self.warning(
            path,
            Anchor::Value,
            format!(
                "`detectTypes` leaves out {list}, which the detector supports: such personal data reaches the model unmasked"
            ),
            format!(
                "add {} to the list, or remove `detectTypes` so that every type is detected; keep {them} out only if that data may leave this machine",
                missing.join(", ")
            ),
        );
    }

    /// `requireNer: false` lets LLM calls go out masked by patterns alone while the NER model loads
    /// (and for good when it cannot load): the types only the model finds well (names, addresses)
    /// then reach the model unmasked. Allowed, on purpose, so said once, naming those types.
    fn require_ner(&mut self) {
        let privacy = &self.config.framework.privacy;
        if !privacy.enabled || privacy.require_ner {
            return;
        }
        let served: Vec<&str> = privacy
            .detect_types
            .iter()
            .map(|t| t.as_str())
            .filter(|name| {
                opc_shapes::EntityType::parse(name).is_some_and(opc_shapes::served_by_ner)
            })
            .collect();
        let list = match served.as_slice() {
            [] => return,
            [one] => format!("`{one}`"),
            [init @ .., last] => format!(
                "{} and `{last}`",
                init.iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.warning(
            KeyPath::of(["framework", "privacy", "requireNer"]),
            Anchor::Value,
            format!(
                "`requireNer: false`: {list} are found by the NER model, so until it has loaded (or for good, if it cannot load) they reach the LLM unmasked"
            ),
            "remove `requireNer: false` so LLM calls wait for the model (up to `nerWait`) and fail closed without it; fetch it ahead with `opc models fetch`",
        );
    }

    /// `channels.web`: a listener other people can reach needs `accessTokenEnv`. Its two cases:
    /// a non-loopback `listen` (reported when `listen` is decoded, at its value), and a `publicUrl`,
    /// reported here: a reverse proxy makes a loopback listener public, and without the token anyone
    /// who finds the URL has the admin console, whose config editor can allow every Bash command.
    /// One missing token is one error: with a non-loopback `listen` the decoder has said it already,
    /// and so it has for an `accessTokenEnv` that is written but is not a variable name.
    fn web_exposure(&mut self) {
        let web = &self.config.channels.web;
        let token_written = self
            .node_at(&KeyPath::of(["channels", "web", "accessTokenEnv"]))
            .is_some();
        if web.public_url.is_none() || token_written || !web.listen.ip().is_loopback() {
            return;
        }
        self.error(
            KeyPath::of(["channels", "web", "publicUrl"]),
            Anchor::Value,
            "with `publicUrl` set, the web chat and the admin console are reachable through the proxy, so they need an access token".into(),
            "add `accessTokenEnv: OPC_WEB_TOKEN` under `channels.web` and export OPC_WEB_TOKEN (e.g. `openssl rand -hex 32`) where `opc run` starts; or remove `publicUrl` to serve on loopback only",
        );
    }

    /// No credential anywhere in the file: secrets come from environment variables only. Walks with a
    /// borrowed path so that the whole-document scan allocates nothing unless it finds something.
    fn credentials(&mut self, node: &Node, path: Path<'_>) {
        match &node.value {
            Value::Str(text) => {
                // `…Env` values are checked (with a better message) when they are decoded.
                let is_env_key = matches!(path, Path::Key(_, key) if key.ends_with("Env"));
                if !is_env_key && let Some(kind) = secrets::find_secret(text) {
                    self.out.push(
                        Diagnostic::error(path, node.span, format!("this looks like {} {kind}; secrets must not be written in the config", article(kind)))
                            .with_hint(ROTATE_HINT),
                    );
                }
            }
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.credentials(item, path.index(i));
                }
            }
            Value::Map(entries) => {
                for entry in entries {
                    self.credentials(&entry.value, path.key(&entry.key));
                }
            }
            _ => {}
        }
    }
}

/// The model family `id` belongs to when it cannot be served by `provider`: a bare id of a known
/// other vendor's family (OpenAI, Google, Meta, Mistral …) resolved to Anthropic's own API. Names of
/// no known family are left to the unpriced-model warning.
/// OpenAI-compatible servers serve any name, and a proxy behind a custom `baseUrl` may too, so only
/// Anthropic's API is judged.
fn foreign_family(
    framework: &crate::schema::Framework,
    provider: &str,
    id: &str,
) -> Option<&'static str> {
    let p = framework.providers.get(provider)?;
    if p.kind != ProviderKind::Anthropic
        || p.base_url.trim_end_matches('/') != "https://api.anthropic.com"
    {
        return None;
    }
    let lower = id.to_ascii_lowercase();
    if lower.starts_with("claude") {
        return None;
    }
    const FAMILIES: &[(&str, &str)] = &[
        ("gpt-", "an OpenAI"),
        ("chatgpt", "an OpenAI"),
        ("o1", "an OpenAI"),
        ("o3", "an OpenAI"),
        ("o4", "an OpenAI"),
        ("text-embedding", "an OpenAI"),
        ("gemini", "a Google"),
        ("gemma", "a Google"),
        ("llama", "a Meta Llama"),
        ("mistral", "a Mistral"),
        ("mixtral", "a Mistral"),
        ("codestral", "a Mistral"),
        ("qwen", "a Qwen"),
        ("deepseek", "a DeepSeek"),
        ("phi", "a Microsoft Phi"),
        ("grok", "an xAI"),
        ("command", "a Cohere"),
    ];
    FAMILIES
        .iter()
        .find(|(prefix, _)| lower.starts_with(prefix))
        .map(|(_, family)| *family)
}

/// Every environment variable name the config uses for a credential, with the key that names it.
fn configured_secret_envs(config: &Config) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, provider) in &config.framework.providers {
        if let Some(env) = &provider.api_key_env {
            out.push((
                env.0.clone(),
                format!("framework.providers.{name}.apiKeyEnv"),
            ));
        }
    }
    let channels = &config.channels;
    if let Some(slack) = &channels.slack {
        out.push((
            slack.bot_token_env.0.clone(),
            "channels.slack.botTokenEnv".into(),
        ));
        if let Some(env) = &slack.app_token_env {
            out.push((env.0.clone(), "channels.slack.appTokenEnv".into()));
        }
        if let Some(env) = &slack.signing_secret_env {
            out.push((env.0.clone(), "channels.slack.signingSecretEnv".into()));
        }
    }
    if let Some(discord) = &channels.discord {
        out.push((
            discord.bot_token_env.0.clone(),
            "channels.discord.botTokenEnv".into(),
        ));
        if let Some(env) = &discord.public_key_env {
            out.push((env.0.clone(), "channels.discord.publicKeyEnv".into()));
        }
    }
    if let Some(env) = &channels.web.access_token_env {
        out.push((env.0.clone(), "channels.web.accessTokenEnv".into()));
    }
    out
}

/// The shape that makes a variable name look like it holds a credential (`*_API_KEY`, `*_TOKEN`,
/// `*_SECRET`, passwords, private and access keys, credentials), or `None`. Case-insensitive.
fn secret_env_shape(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    const SHAPES: &[(&str, &str)] = &[
        ("API_KEY", "an API key"),
        ("APIKEY", "an API key"),
        ("TOKEN", "a token"),
        ("SECRET", "a secret"),
        ("PASSWORD", "a password"),
        ("PASSWD", "a password"),
        ("PRIVATE_KEY", "a private key"),
        ("ACCESS_KEY", "an access key"),
        ("CREDENTIAL", "a credential"),
    ];
    SHAPES
        .iter()
        .find(|(part, _)| upper.contains(part))
        .map(|(_, shape)| *shape)
        .or_else(|| (upper == "KEY" || upper.ends_with("_KEY")).then_some("a key"))
}

/// What to do about a credential found in the file.
pub(crate) const ROTATE_HINT: &str = "treat it as leaked and rotate it with its issuer (it is in this file, and maybe in version control or a backup); then remove it, export the new one as an environment variable, and name that variable in the matching `…Env` key";

fn provider_hint<'p>(providers: impl Iterator<Item = &'p str> + Clone, wanted: &str) -> String {
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

/// "a" or "an" before `word`, by its first letter (good enough for the credential names above).
fn article(word: &str) -> &'static str {
    if word.starts_with(['A', 'E', 'I', 'O', 'U', 'a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use crate::{ConfigError, Severity, parse};

    const ORG: &str = "framework:\n  defaultModel: m\n  providers: { p: { kind: anthropic, models: { m: { input: 1, output: 1 } } } }\nagents:\n  ceo: { role: CEO }\n";

    /// The errors of `ORG` with `web` as its `channels.web` section: `(line, column, path, message,
    /// hint)` each.
    fn web_errors(web: &str) -> Vec<(u32, u32, String, String, String)> {
        match parse("test.yaml", format!("{ORG}channels:\n  web:\n{web}"), None) {
            Ok(_) => Vec::new(),
            Err(ConfigError::Invalid(report)) => report
                .diagnostics
                .into_iter()
                .filter(|d| d.severity == Severity::Error)
                .map(|d| {
                    (
                        d.line(),
                        d.column(),
                        d.path.clone(),
                        d.message.clone(),
                        d.hint.clone().unwrap_or_default(),
                    )
                })
                .collect(),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_public_url_needs_an_access_token() {
        let errors = web_errors("    publicUrl: https://opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (line, column, path, message, hint) = &errors[0];
        assert_eq!(
            (*line, *column, path.as_str()),
            (8, 16, "channels.web.publicUrl")
        );
        assert!(message.contains("access token"), "{message}");
        assert!(
            hint.contains("accessTokenEnv: OPC_WEB_TOKEN") && hint.contains("remove `publicUrl`"),
            "{hint}"
        );
        // With the token: valid.
        assert_eq!(
            web_errors(
                "    publicUrl: https://opc.example.com\n    accessTokenEnv: OPC_WEB_TOKEN\n"
            ),
            Vec::new()
        );
    }

    #[test]
    fn one_missing_token_is_one_error() {
        // A reachable `listen` already says the token is missing; `publicUrl` does not repeat it.
        let errors =
            web_errors("    listen: 0.0.0.0:7420\n    publicUrl: https://opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].2, "channels.web.listen");
        // A token that is written but not a variable name is reported as such, and only as such.
        let errors =
            web_errors("    accessTokenEnv: web-token\n    publicUrl: https://opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].2, "channels.web.accessTokenEnv");
        // An invalid `publicUrl` is reported as invalid, not as also needing a token.
        let errors = web_errors("    publicUrl: opc.example.com\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].3.contains("not a public URL"), "{errors:?}");
        // Loopback without `publicUrl` needs none.
        assert_eq!(web_errors("    listen: 127.0.0.1:7420\n"), Vec::new());
    }
}
