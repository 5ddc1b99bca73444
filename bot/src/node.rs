//! Who this `opc` process is among the nodes serving one org on PostgreSQL (issue 36 §2): its name
//! (`opc run --node NAME`, else `OPC_NODE`, else `<host>-<pid>`), a random instance per start, the
//! address it serves on and a digest of the config it loaded; and how the nodes table is read
//! (which nodes run a config other than the newest live node's).
//!
//! Why a leaf of its own: `opc run`, `opc chat`, `opc tasks` and the admin console all need it, and
//! it needs none of them (only the engine's [`NodeIdentity`] and [`NodeRow`]).
//!
//! Invariants:
//! - a name is 1–64 characters of `A-Z a-z 0-9 . _ -`, whatever its source; a bad one is refused
//!   with a message naming where it came from (`--node` or `OPC_NODE`), never silently changed. The
//!   default is built from the host name with anything else replaced, so it always passes;
//! - the instance differs between two starts of the same name (a restarted node never renews its
//!   predecessor's leases), with no dependency beyond std: the process's randomly keyed hasher;
//! - the digest is of the config file's text as loaded, so two nodes with the same file agree.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use opc_agents::store::{NodeIdentity, NodeRow};
use sha2::{Digest, Sha256};

/// The environment variable naming this node when `--node` is not given.
pub const NODE_ENV: &str = "OPC_NODE";

/// The longest node name.
const MAX_NAME: usize = 64;

/// How many hex characters of the config's sha256 a node shows.
const DIGEST_CHARS: usize = 12;

/// Why `name` is not a node name, or `None` when it is one.
fn invalid(name: &str) -> Option<String> {
    let length = name.chars().count();
    if length == 0 {
        return Some("it is empty".to_string());
    }
    if length > MAX_NAME {
        return Some(format!("it is {length} characters long"));
    }
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .map(|c| format!("it contains {c:?}"))
}

/// The node's name: `flag` (`--node`), else `env` (the value of [`NODE_ENV`]; empty counts as
/// unset), else `<host>-<pid>`. A bad name is an error naming its source, with the rule.
pub fn resolve_name(
    flag: Option<&str>,
    env: Option<&str>,
    host: &str,
    pid: u32,
) -> Result<String, String> {
    let (name, source) = match (flag, env.filter(|v| !v.trim().is_empty())) {
        (Some(name), _) => (name, "--node".to_string()),
        (None, Some(name)) => (name, format!("the environment variable {NODE_ENV}")),
        (None, None) => return Ok(default_name(host, pid, "")),
    };
    match invalid(name) {
        None => Ok(name.to_string()),
        Some(why) => Err(format!(
            "error: {source} gives the node name {name:?}, which is not a valid node name: {why}\n\
             hint: use 1–{MAX_NAME} characters of letters, digits, `.`, `_` and `-` (e.g. \
             `--node a`, or `export {NODE_ENV}=web-1`); without either the name is `<host>-<pid>`\n"
        )),
    }
}

/// Whether `name` is the name this process gets by default (`<host>-<pid>`, or `opc chat`'s
/// `<host>-<pid>-chat`), not one given with `--node` or [`NODE_ENV`].
pub fn is_default_name(name: &str, pid: u32) -> bool {
    let host = hostname();
    name == default_name(&host, pid, "") || name == default_name(&host, pid, "-chat")
}

/// `<host>-<pid><suffix>`, with anything a name may not hold in the host name replaced by `-` and
/// the host shortened so the whole fits [`MAX_NAME`].
pub fn default_name(host: &str, pid: u32, suffix: &str) -> String {
    let tail = format!("-{pid}{suffix}");
    let room = MAX_NAME.saturating_sub(tail.len());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(room)
        .collect();
    let host = if host.is_empty() {
        "host".to_string()
    } else {
        host
    };
    format!("{host}{tail}")
}

/// This machine's host name, from the kernel (`/proc/sys/kernel/hostname`), or `host` where that
/// cannot be read. Not `$HOSTNAME`: shells set it without exporting it, so it is often missing.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string())
}

/// A random instance for this process: two starts of the same node never share one. From std's
/// randomly keyed hasher (its keys are drawn from the OS once per process), over the clock and pid.
pub fn instance() -> i64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_i64(opc_agents::store::now_ms());
    // Positive, so it reads plainly in the nodes table.
    (hasher.finish() >> 1) as i64
}

/// The first [`DIGEST_CHARS`] hex characters of the sha256 of `config` (the config file's text).
pub fn config_digest(config: &[u8]) -> String {
    let mut hex = format!("{:x}", Sha256::digest(config));
    hex.truncate(DIGEST_CHARS);
    hex
}

/// This process as a node: `name`, serving on `address`, running the config whose text is `config`.
pub fn identity(name: String, address: Option<String>, config: &[u8]) -> NodeIdentity {
    NodeIdentity {
        id: name,
        instance: instance(),
        address,
        host: hostname(),
        pid: std::process::id(),
        started_ms: opc_agents::store::now_ms(),
        config_digest: config_digest(config),
    }
}

/// The config digest of the newest live node (the latest start among those alive at `now_ms`):
/// the config a rolling restart is moving to. `None` when no node is alive.
pub fn newest_digest(nodes: &[NodeRow], now_ms: i64, ttl: Duration) -> Option<&str> {
    nodes
        .iter()
        .filter(|n| n.alive(now_ms, ttl))
        .max_by_key(|n| (n.started_ms, n.heartbeat_ms))
        .map(|n| n.config_digest.as_str())
}

/// How long ago `then_ms` was, at `now_ms`, in a few characters: `800ms`, `4s`, `3m12s`, `2h05m`,
/// `3d`.
pub fn age(then_ms: i64, now_ms: i64) -> String {
    let ms = (now_ms - then_ms).max(0);
    let s = ms / 1000;
    if ms < 1000 {
        format!("{ms}ms")
    } else if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s / 60) % 60)
    } else {
        format!("{}d", s / 86_400)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_flag_wins_over_the_variable_which_wins_over_host_and_pid() {
        assert_eq!(resolve_name(Some("a"), Some("b"), "box", 7).unwrap(), "a");
        assert_eq!(resolve_name(None, Some("b"), "box", 7).unwrap(), "b");
        assert_eq!(resolve_name(None, None, "box", 7).unwrap(), "box-7");
        // An empty variable is an unset one.
        assert_eq!(resolve_name(None, Some(" "), "box", 7).unwrap(), "box-7");
    }

    #[test]
    fn a_bad_name_is_refused_naming_its_source_and_the_rule() {
        let long = "x".repeat(65);
        for (flag, env, source, why) in [
            (Some("a b"), None, "--node", "it contains ' '"),
            (Some(""), Some("ok"), "--node", "it is empty"),
            (Some(long.as_str()), None, "--node", "65 characters long"),
            (None, Some("nœud"), "OPC_NODE", "it contains 'œ'"),
            (None, Some("a/b"), "OPC_NODE", "it contains '/'"),
        ] {
            let error = resolve_name(flag, env, "box", 7).unwrap_err();
            assert!(error.contains(source), "{error}");
            assert!(error.contains(why), "{error}");
            assert!(error.contains("1–64 characters"), "{error}");
        }
        // Exactly 64, and every allowed character, are fine.
        let edge = "x".repeat(64);
        assert_eq!(resolve_name(Some(&edge), None, "h", 1).unwrap(), edge);
        assert_eq!(
            resolve_name(Some("A-z_0.9"), None, "h", 1).unwrap(),
            "A-z_0.9"
        );
    }

    #[test]
    fn the_default_name_is_always_valid() {
        let long = "a".repeat(100);
        for (host, suffix) in [
            ("box.example.com", ""),
            ("weird host!", ""),
            ("", ""),
            (long.as_str(), "-chat"),
        ] {
            let name = default_name(host, 4_294_967_295, suffix);
            assert_eq!(invalid(&name), None, "{name}");
            assert!(name.ends_with(&format!("-4294967295{suffix}")), "{name}");
        }
        assert_eq!(default_name("weird host!", 3, ""), "weird-host--3");
        assert_eq!(default_name("box", 3, "-chat"), "box-3-chat");
        assert_eq!(default_name("", 3, ""), "host-3");
    }

    #[test]
    fn the_digest_is_twelve_hex_characters_of_the_text() {
        let a = config_digest(b"framework: {}\n");
        assert_eq!(a.len(), 12);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
        assert_eq!(a, config_digest(b"framework: {}\n"));
        assert_ne!(a, config_digest(b"framework: { name: x }\n"));
        // sha256("") begins e3b0c44298fc.
        assert_eq!(config_digest(b""), "e3b0c44298fc");
    }

    #[test]
    fn two_instances_differ() {
        assert_ne!(instance(), instance());
        assert!(instance() >= 0);
    }

    fn row(id: &str, started: i64, heartbeat: i64, stopped: bool, digest: &str) -> NodeRow {
        NodeRow {
            instance: 1,
            id: id.into(),
            address: None,
            host: "h".into(),
            pid: 1,
            started_ms: started,
            heartbeat_ms: heartbeat,
            stopped,
            trees: 0,
            slots_total: 4,
            slots_in_use: 0,
            config_digest: digest.into(),
        }
    }

    #[test]
    fn the_newest_digest_is_the_latest_started_live_node() {
        let ttl = Duration::from_secs(15);
        let now = 100_000;
        let nodes = [
            row("a", 1_000, 99_000, false, "old"),
            row("b", 50_000, 99_500, false, "new"),
            // Started later, but left or dead: not the config the cluster runs.
            row("c", 60_000, 99_900, true, "gone"),
            row("d", 70_000, 10_000, false, "dead"),
        ];
        assert_eq!(newest_digest(&nodes, now, ttl), Some("new"));
        assert_eq!(newest_digest(&nodes[2..], now, ttl), None);
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(age(0, 800), "800ms");
        assert_eq!(age(0, 4_000), "4s");
        assert_eq!(age(0, 192_000), "3m12s");
        assert_eq!(age(0, 7_500_000), "2h05m");
        assert_eq!(age(0, 3 * 86_400_000), "3d");
        assert_eq!(age(10, 0), "0ms", "a clock a little behind is now");
    }
}
