//! `OrgTree`: the validated org as a tree, answering who reports to whom, who may delegate to whom, and
//! whose memory is shared with whom.
//!
//! Invariants (guaranteed because an `OrgTree` is only built from a config that passed validation):
//! exactly one root; every other agent has exactly one parent that lists it as a child; no cycles; an
//! agent's level is its distance from the root. Queries about unknown ids answer "no" / empty rather
//! than panic, because ids often come from model output.
//!
//! It also answers where each agent's file and shell tools may reach (its workspace, read-write; its
//! descendants' workspaces, read-only; nothing else) and which Bash commands run without asking (its
//! `bash.allow`, narrowed by every manager above it that has a `bash` section). Both are computed once
//! here, from the same rules `validate` checks (module `workspace`), so tools never re-derive them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::schema::{BashPolicy, Config, SandboxSettings, Unlisted};
use crate::workspace;

#[derive(Clone, Debug)]
struct OrgNode {
    id: String,
    role: String,
    parent: Option<usize>,
    children: Vec<usize>,
    level: u32,
    share_with: Vec<usize>,
    /// Absolute, normalised.
    workspace: PathBuf,
    bash: Option<BashPolicy>,
    /// `bash.allow` after narrowing by the managers' sections.
    bash_allow: Vec<String>,
}

/// Where an agent's file and shell tools may reach. Paths are absolute and lexically normalised (the
/// tools still resolve symlinks themselves). `write` is the agent's own workspace; `read` are its
/// descendants' workspaces (read-only), without duplicates and without `write` itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceAccess {
    /// The agent's own workspace: read and written.
    pub write: PathBuf,
    /// Its descendants' workspaces: read only.
    pub read: Vec<PathBuf>,
}

/// The org chart of a validated config.
#[derive(Clone, Debug)]
pub struct OrgTree {
    nodes: Vec<OrgNode>,
    index: HashMap<String, usize>,
    root: usize,
    workspace_root: PathBuf,
    sandbox: SandboxSettings,
}

impl OrgTree {
    /// Builds the tree. Only called on configs that passed validation (see the module invariants).
    /// `base_dir` is the config file's directory, which a relative workspace root resolves against
    /// (`None`: the current directory).
    pub(crate) fn build(config: &Config, base_dir: Option<&Path>) -> OrgTree {
        let workspace_root = workspace::absolute(
            base_dir.unwrap_or(Path::new(".")),
            &config.framework.workspace.root,
        );
        let index: HashMap<String, usize> = config
            .agents
            .keys()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        let lookup = |id: &str| index.get(id).copied();
        let mut nodes: Vec<OrgNode> = config
            .agents
            .iter()
            .map(|(id, agent)| OrgNode {
                id: id.clone(),
                role: agent.role.clone(),
                parent: agent.parent.as_deref().and_then(lookup),
                children: agent.children.iter().filter_map(|c| lookup(c)).collect(),
                level: 0,
                share_with: agent
                    .memory
                    .share_with
                    .iter()
                    .filter_map(|s| lookup(s))
                    .collect(),
                // Validation refuses a workspace outside the root; the default stands in regardless.
                workspace: agent
                    .workspace
                    .as_deref()
                    .and_then(|w| workspace::agent_dir(&workspace_root, w).ok())
                    .unwrap_or_else(|| workspace_root.join(id)),
                bash: agent.bash.clone(),
                bash_allow: Vec::new(),
            })
            .collect();
        let root = nodes.iter().position(|n| n.parent.is_none()).unwrap_or(0);
        // Breadth-first from the root assigns levels; validation guarantees every node is reached.
        // Top-down, so each manager's allow-list is final before its subordinates are narrowed by it.
        let mut queue = std::collections::VecDeque::from([root]);
        while let Some(i) = queue.pop_front() {
            let managing = Self::managing_bash(&nodes, i);
            if let Some(bash) = &nodes[i].bash {
                nodes[i].bash_allow = match managing {
                    Some(m) => workspace::narrow(&bash.allow, &nodes[m].bash_allow),
                    None => workspace::own(&bash.allow),
                };
            }
            let level = nodes[i].level + 1;
            for c in nodes[i].children.clone() {
                nodes[c].level = level;
                queue.push_back(c);
            }
        }
        OrgTree {
            nodes,
            index,
            root,
            workspace_root,
            sandbox: config.framework.sandbox.clone(),
        }
    }

    /// The nearest ancestor of node `i` that has a `bash` section (bounded by the node count).
    fn managing_bash(nodes: &[OrgNode], i: usize) -> Option<usize> {
        let mut current = nodes[i].parent;
        for _ in 0..nodes.len() {
            let p = current?;
            if nodes[p].bash.is_some() {
                return Some(p);
            }
            current = nodes[p].parent;
        }
        None
    }

    fn node(&self, id: &str) -> Option<&OrgNode> {
        self.index.get(id).map(|&i| &self.nodes[i])
    }

    fn ids(&self, indexes: &[usize]) -> Vec<&str> {
        indexes.iter().map(|&i| self.nodes[i].id.as_str()).collect()
    }

    /// The root agent's id.
    pub fn root(&self) -> &str {
        &self.nodes[self.root].id
    }

    /// Every agent id, in config order.
    pub fn agent_ids(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.id.as_str())
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the org has no agents (never true for a validated config).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether `id` is an agent.
    pub fn contains(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }

    /// The agent's role title.
    pub fn role(&self, id: &str) -> Option<&str> {
        self.node(id).map(|n| n.role.as_str())
    }

    /// The agent's parent; `None` for the root and for unknown ids.
    pub fn parent(&self, id: &str) -> Option<&str> {
        let parent = self.node(id)?.parent?;
        Some(&self.nodes[parent].id)
    }

    /// The agent's direct children, in config order.
    pub fn children(&self, id: &str) -> Vec<&str> {
        self.node(id)
            .map_or_else(Vec::new, |n| self.ids(&n.children))
    }

    /// Agents with the same parent, excluding the agent itself.
    pub fn siblings(&self, id: &str) -> Vec<&str> {
        match self.parent(id) {
            Some(parent) => self
                .children(parent)
                .into_iter()
                .filter(|c| *c != id)
                .collect(),
            None => Vec::new(),
        }
    }

    /// The agent's superiors, nearest first, ending with the root.
    pub fn ancestors(&self, id: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut current = self.node(id).and_then(|n| n.parent);
        while let Some(i) = current {
            out.push(self.nodes[i].id.as_str());
            current = self.nodes[i].parent;
        }
        out
    }

    /// Every agent below `id`, breadth-first.
    pub fn descendants(&self, id: &str) -> Vec<&str> {
        let Some(&start) = self.index.get(id) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut queue = std::collections::VecDeque::from(self.nodes[start].children.clone());
        while let Some(i) = queue.pop_front() {
            out.push(self.nodes[i].id.as_str());
            queue.extend(self.nodes[i].children.iter().copied());
        }
        out
    }

    /// Distance from the root (the root is level 0).
    pub fn level(&self, id: &str) -> Option<u32> {
        self.node(id).map(|n| n.level)
    }

    /// The deepest level in the org.
    pub fn depth(&self) -> u32 {
        self.nodes.iter().map(|n| n.level).max().unwrap_or(0)
    }

    /// Whether `from` may hand a task to `to`: only to its direct children — never a grandchild, a
    /// sibling, its parent, itself or an unknown id.
    pub fn may_delegate(&self, from: &str, to: &str) -> bool {
        match (self.index.get(from), self.index.get(to)) {
            (Some(&from), Some(&to)) => self.nodes[to].parent == Some(from),
            _ => false,
        }
    }

    /// Whether `ancestor` is above `id` in the tree (strictly).
    pub fn is_ancestor(&self, ancestor: &str, id: &str) -> bool {
        self.ancestors(id).contains(&ancestor)
    }

    /// Whether `owner` shares its memory with `reader` through `shareWith`. Sharing is one-way: `owner`
    /// listing `reader` lets `reader` see `owner`'s memory, not the reverse.
    pub fn shares_with(&self, owner: &str, reader: &str) -> bool {
        match (self.node(owner), self.index.get(reader)) {
            (Some(owner), Some(reader)) => owner.share_with.contains(reader),
            _ => false,
        }
    }

    /// The absolute workspace root (`framework.workspace.root` resolved against the config file's dir).
    pub fn workspace_root(&self) -> &Path {
        &self.workspace_root
    }

    /// The agent's workspace: `<root>/<agents.X.workspace>` or `<root>/<agent id>`. `None` for an
    /// unknown agent.
    pub fn workspace(&self, agent: &str) -> Option<PathBuf> {
        self.node(agent).map(|n| n.workspace.clone())
    }

    /// Where the agent's file and shell tools may reach: its own workspace to write, its descendants'
    /// to read. Never a sibling's or a manager's (unless they name the same directory on purpose).
    pub fn workspace_access(&self, agent: &str) -> Option<WorkspaceAccess> {
        let node = self.node(agent)?;
        let mut read: Vec<PathBuf> = Vec::new();
        // A set beside the list, so that the root of a large org is not quadratic in its size.
        let mut listed: HashSet<&Path> = HashSet::from([node.workspace.as_path()]);
        for id in self.descendants(agent) {
            let Some(d) = self.node(id) else { continue };
            if listed.insert(d.workspace.as_path()) {
                read.push(d.workspace.clone());
            }
        }
        Some(WorkspaceAccess {
            write: node.workspace.clone(),
            read,
        })
    }

    /// The prefixes that run without asking: the agent's `bash.allow`, narrowed by its nearest ancestor
    /// that has a `bash` section (recursively) to what both allow: a prefix the ancestor covers stays;
    /// one that covers narrower ancestor prefixes (`cargo` under `cargo test`, or `"*"`) becomes those.
    /// Coverage is word-wise: `"*"` covers all, otherwise the child prefix is the ancestor's or starts
    /// with it followed by a space. Trimmed, without duplicates. Empty if the agent has no `bash`.
    pub fn bash_allow(&self, agent: &str) -> Vec<String> {
        self.node(agent)
            .map_or_else(Vec::new, |n| n.bash_allow.clone())
    }

    /// `unlisted` of the agent's `bash` section (`Ask` when absent).
    pub fn bash_unlisted(&self, agent: &str) -> Unlisted {
        self.node(agent)
            .and_then(|n| n.bash.as_ref())
            .map_or(Unlisted::Ask, |b| b.unlisted)
    }

    /// `framework.sandbox`.
    pub fn sandbox(&self) -> &SandboxSettings {
        &self.sandbox
    }
}
