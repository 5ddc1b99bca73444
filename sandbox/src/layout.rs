//! Where things are as the command sees them: the fixed paths of the private root the launcher
//! builds (the launcher's inner stage), and where each read-only tree of a policy appears in it.
//!
//! Invariants: the command never sees a host path of a workspace. Its own workspace is always
//! [`WORKSPACE`]; a descendant's workspace nested inside it keeps its place (read-only there); any
//! other is `/team/<its directory name>`, made unique with `-2`, `-3`… in the policy's order, so the
//! same policy always gives the same names.

use std::path::{Path, PathBuf};

/// The agent's workspace (read-write), the command's working directory.
pub const WORKSPACE: &str = "/workspace";
/// Where the descendants' workspaces appear (read-only).
pub const TEAM: &str = "/team";
/// `HOME`: a private directory, fresh for each run, outside the workspace.
pub const HOME: &str = "/home/agent";
/// `TMPDIR`: private, fresh for each run.
pub const TMP: &str = "/tmp";

/// A read-only tree: its host path and where the command sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shared {
    /// The canonical host path.
    pub host: PathBuf,
    /// The path inside the sandbox.
    pub inside: PathBuf,
}

/// Where each of `read_only` (canonical host paths) appears for a command whose workspace is
/// `workdir` (canonical). The workspace itself and duplicates are left out.
pub fn shared(workdir: &Path, read_only: &[PathBuf]) -> Vec<Shared> {
    let mut out: Vec<Shared> = Vec::new();
    for host in read_only {
        if host == workdir || out.iter().any(|s| &s.host == host) {
            continue;
        }
        let inside = match host.strip_prefix(workdir) {
            Ok(rel) => Path::new(WORKSPACE).join(rel),
            Err(_) => {
                let name = host
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "workspace".to_string());
                let mut inside = Path::new(TEAM).join(&name);
                let mut n = 2;
                while out.iter().any(|s| s.inside == inside) {
                    inside = Path::new(TEAM).join(format!("{name}-{n}"));
                    n += 1;
                }
                inside
            }
        };
        out.push(Shared {
            host: host.clone(),
            inside,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_trees_keep_their_place_and_others_get_unique_team_names() {
        let work = Path::new("/srv/ws/lead");
        let got = shared(
            work,
            &[
                PathBuf::from("/srv/ws/dev-a"),
                PathBuf::from("/srv/ws/lead/sub"),
                PathBuf::from("/srv/other/dev-a"),
                PathBuf::from("/srv/ws/dev-a"),
                PathBuf::from("/srv/ws/lead"),
            ],
        );
        let inside: Vec<_> = got.iter().map(|s| s.inside.clone()).collect();
        assert_eq!(
            inside,
            [
                PathBuf::from("/team/dev-a"),
                PathBuf::from("/workspace/sub"),
                PathBuf::from("/team/dev-a-2"),
            ]
        );
    }
}
