//! Where agents' tools reach, and the sandbox around Bash: workspaces inside the root and apart from
//! each other and from what no agent may touch, and `framework.sandbox` settings that keep
//! credentials out of commands.
//!
//! Invariants: paths are compared lexically, with the rules the `OrgTree` hands to the tools (module
//! `workspace`), so what validates is exactly what the tools are given; a variable the config names
//! for a credential, or one shaped like a secret, never reaches the sandbox's environment.

use std::collections::HashMap;
use std::path::Path as FsPath;

use super::checker::Checker;
use crate::diagnostic::{Anchor, KeyPath};
use crate::schema::{Config, SandboxMode};
use crate::workspace::{self, Outside};

impl<'a> Checker<'a> {
    /// Every workspace lies strictly inside the root, and two agents' workspaces are the same directory
    /// or apart: one inside another would let its owner write where the other alone should (a
    /// manager into its team's, or into a sibling's). No workspace holds OPC's own files (the config's
    /// directory, the database), the home directory or the model cache, nor lies in the model cache.
    pub(super) fn workspaces(&mut self, base_dir: Option<&FsPath>) {
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
        // The first agent (in file order) to claim each directory. A workspace lies inside another
        // when one of its ancestor directories is claimed, and the earliest claim is the one named:
        // looking its few ancestors up keeps this linear in the number of agents (comparing every
        // pair of workspaces made `opc validate` of a large org quadratic).
        let mut first_claim: HashMap<&FsPath, usize> = HashMap::with_capacity(dirs.len());
        for (i, (_, dir)) in dirs.iter().enumerate() {
            first_claim.entry(dir.as_path()).or_insert(i);
        }
        for (id, dir) in &dirs {
            let inside = dir
                .ancestors()
                .skip(1)
                .filter_map(|above| first_claim.get(above).copied())
                .min();
            if let Some((outer, _)) = inside.map(|j| &dirs[j]) {
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
            let hit = protected
                .iter()
                .map(|(p, what)| (p, *what))
                .chain(home.as_ref().map(|h| (h, "the home directory")))
                .chain(models.as_ref().map(|m| (m, "the model cache")))
                .find(|(p, _)| p.starts_with(dir))
                .map(|(_, what)| what)
                .or_else(|| {
                    models
                        .as_ref()
                        .filter(|m| dir.starts_with(m))
                        .map(|_| "the model cache")
                });
            if let Some(what) = hit {
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

    /// `framework.sandbox`: `mode: off` is said out loud; `env` never passes a provider key or a
    /// platform token into commands a model writes (they could print it, and the model would read it).
    pub(super) fn sandbox(&mut self) {
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
