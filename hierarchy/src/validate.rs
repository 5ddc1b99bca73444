//! Semantic rules: does the decoded config describe a working org?
//!
//! Runs after decoding, on whatever decoded cleanly, so that one typo does not hide the other problems.
//! Rules speak in key paths (`agents.vp-eng.children[1]`); the shared `Checker` (module `checker`)
//! turns a path back into a line and column by walking the positioned tree, which is the only source
//! of positions.
//!
//! Each family of rules has its own module, all of them depending on `checker` and none on another:
//! `shape` (one root, no cycles, levels, depth), `references` (parents and children name agents and
//! agree), `tools` (delegation tools, Bash allow-lists a manager narrows), `sandbox` (workspaces inside
//! the root and apart, sandbox settings), `memory` (blocks, shared blocks, shareWith, consolidation),
//! `prompts` (prompt files), `models` (providers and prices), `privacy`, `channels` (the web
//! listener's exposure: a `publicUrl` needs an access token), `cluster` (`framework.cluster` has
//! an effect only on PostgreSQL) and `credentials` (no secret anywhere in
//! the file). [`check`] runs them in a fixed order, so diagnostics at the same position keep it.
//!
//! An unknown key that stands for `parent:` or `children:` (module `misspelt`, found when the checker
//! is made) explains several findings of `shape`, `references`, `tools` and `memory`; those rules
//! leave them out, so that the misspelt key is the one error reported for that mistake.

mod channels;
mod checker;
mod cluster;
mod credentials;
mod memory;
mod misspelt;
mod models;
mod privacy;
mod prompts;
mod references;
mod sandbox;
mod shape;
mod tools;

use std::path::Path as FsPath;

use crate::diagnostic::{Diagnostic, Path};
use crate::schema::Config;
use crate::yaml::Node;
use checker::Checker;

/// Runs every semantic rule. `base_dir` is where relative paths (prompt files) resolve; `None` skips the
/// checks that need a file system.
pub(crate) fn check(config: &Config, doc: &Node, base_dir: Option<&FsPath>) -> Vec<Diagnostic> {
    let mut checker = Checker::new(config, doc);
    checker.root();
    checker.parents();
    checker.children();
    let depths = checker.levels();
    checker.tools();
    checker.workspaces(base_dir);
    checker.bash(&depths);
    checker.sandbox();
    checker.memory(&depths);
    checker.consolidation();
    checker.cluster();
    if let Some(base_dir) = base_dir {
        checker.prompts(base_dir);
    }
    checker.models();
    checker.privacy();
    checker.web_exposure();
    checker.credentials(doc, Path::Root);
    checker.out
}
