//! The environment a command gets: nothing of OPC's but what the policy lists, and git told not
//! to run code from the workspace's repository config.
//!
//! Why the git variables: the file tools write anywhere in the workspace without approval, so a
//! planted `.git/config` (or, when HOME was the workspace, `~/.gitconfig`) with
//! `core.fsmonitor = "touch pwned; echo"` made an allowlisted `git status` run the agent's code.
//! HOME is now private and fresh, the system and global configs are not read, and the repository
//! config's program-running keys are overridden through `GIT_CONFIG_COUNT` (which wins over every
//! config file). Build tools (`cargo`, `npm`, `make`) run workspace code by design; the sandbox,
//! not the allowlist, is the boundary there (docs/sandbox.md).

use std::ffi::OsString;
use std::path::Path;

use super::protocol::Spec;

/// Repository config keys that run a program, each forced to something inert.
const GIT_OVERRIDES: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", "ssh"),
    ("core.pager", "cat"),
];

/// The environment for `spec`, with the command's `home`, `tmp` and working directory as it sees
/// them.
pub(crate) fn environment(spec: &Spec, home: &Path, tmp: &Path) -> Vec<(String, OsString)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            OsString::from("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        ),
        ("HOME".to_string(), home.as_os_str().to_owned()),
        ("LANG".to_string(), OsString::from("C.UTF-8")),
        ("TERM".to_string(), OsString::from("dumb")),
        ("TMPDIR".to_string(), tmp.as_os_str().to_owned()),
    ];
    let mut set = |name: &str, value: OsString| {
        env.retain(|(n, _)| n != name);
        env.push((name.to_string(), value));
    };
    for (name, value) in &spec.env {
        set(name, OsString::from(value));
    }
    // After the policy's variables: these are a guarantee, not a default.
    set("GIT_CONFIG_NOSYSTEM", "1".into());
    set("GIT_CONFIG_GLOBAL", "/dev/null".into());
    set("GIT_PAGER", "cat".into());
    set("GIT_CONFIG_COUNT", GIT_OVERRIDES.len().to_string().into());
    for (i, (key, value)) in GIT_OVERRIDES.iter().enumerate() {
        set(&format!("GIT_CONFIG_KEY_{i}"), (*key).into());
        set(&format!("GIT_CONFIG_VALUE_{i}"), (*value).into());
    }
    env
}
