//! Shared fixtures: a base directory laid out like an OPC deployment (a workspace, and beside it a
//! config, a database and another directory with a secret), the test launcher, and deadline-bounded
//! checks on processes.
//!
//! What a test needs from the machine (Landlock and namespaces, root, python3 or git) goes through
//! `opc_testgate`: skipped with one line on a developer's machine, a failure under CI, and counted
//! when the test gets past the gate.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use opc_sandbox::{Output, Policy, Probe, Sandbox, SandboxError};
use opc_testgate::Group;

pub const SECRET: &str = "the-secret-outside-the-workspace";
pub const CONFIG: &str = "llm:\n  api_key_env: ANTHROPIC_API_KEY # config-beside-the-workspace\n";
pub const DATABASE: &str = "SQLite format 3\0database-beside-the-workspace";

/// `base/` (0755) holding `work/` (the workspace, writable by the sandbox user), `opc.config.yaml`,
/// `opc.db` and `outside/secret.txt` beside it, all readable by anyone by plain permissions, so
/// only the sandbox stands between a command and them.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub base: PathBuf,
    pub work: PathBuf,
    pub secret: PathBuf,
    pub config: PathBuf,
    pub database: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let work = base.join("work");
        opc_sandbox::make_writable(&work).unwrap();
        std::fs::create_dir(base.join("outside")).unwrap();
        let secret = base.join("outside/secret.txt");
        std::fs::write(&secret, SECRET).unwrap();
        let config = base.join("opc.config.yaml");
        std::fs::write(&config, CONFIG).unwrap();
        let database = base.join("opc.db");
        std::fs::write(&database, DATABASE).unwrap();
        Fixture {
            _dir: dir,
            base,
            work,
            secret,
            config,
            database,
        }
    }

    /// A fixture for `test`, which needs an enforced sandbox: `None` when this kernel lacks a feature
    /// of the default policy (see [`supported`]).
    pub fn enforced(test: &str) -> Option<Fixture> {
        let fx = Fixture::new();
        supported(test, &fx.policy()).then_some(fx)
    }

    pub fn policy(&self) -> Policy {
        Policy::new(&self.work)
    }

    /// Every path under `base` with its contents (files) — to show nothing outside changed.
    pub fn snapshot_outside(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut all = Vec::new();
        walk(&self.base, &self.work, &mut all);
        all.sort();
        all
    }
}

fn walk(dir: &Path, skip: &Path, all: &mut Vec<(PathBuf, Option<Vec<u8>>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path == skip {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            all.push((path.clone(), None));
            walk(&path, skip, all);
        } else {
            all.push((path.clone(), std::fs::read(&path).ok()));
        }
    }
}

pub fn launcher() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_opc-sandbox-launcher"))
}

pub fn sandbox() -> Sandbox {
    Sandbox::new(launcher())
}

/// Whether this kernel can run `policy` enforced (the sandbox group): when not, `test` is skipped
/// with one line, or fails under CI.
#[track_caller]
pub fn supported(test: &str, policy: &Policy) -> bool {
    let missing = Probe::detect().missing(policy);
    if missing.is_empty() {
        opc_testgate::ran(Group::Sandbox, test);
        return true;
    }
    let why = format!("this kernel lacks {}", missing.join(", "));
    opc_testgate::skip(Group::Sandbox, test, &why)
}

/// Whether OPC runs as root here, so the sandbox drops commands to its own uid: when not, `test`
/// is skipped with one line, or fails under CI.
#[track_caller]
pub fn as_root(test: &str) -> bool {
    let owner = opc_sandbox::sandbox_owner().ok_or("not root, so no uid drop to test");
    opc_testgate::need(Group::Root, test, owner).is_some()
}

pub async fn run(policy: &Policy, command: &str) -> Output {
    run_for(policy, command, Duration::from_secs(30)).await
}

pub async fn run_for(policy: &Policy, command: &str, timeout: Duration) -> Output {
    // The outer bound only guards the test against a bug in `run`'s own timeout.
    let result: Result<Output, SandboxError> = tokio::time::timeout(
        timeout + Duration::from_secs(30),
        sandbox().run(policy, command, timeout),
    )
    .await
    .expect("run ended within its timeout");
    result.unwrap_or_else(|e| panic!("{command}: {e}"))
}

/// True once `pid` no longer runs (gone, or a zombie waiting for init), polling up to 10 s.
pub fn ends_within_deadline(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if !running(pid) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the `(comm)` field.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Pids of running processes whose command line contains `token`.
pub fn running_with(token: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(token) && running(pid) {
            pids.push(pid);
        }
    }
    pids
}

/// The first of `paths` that is installed (inside `/usr`, so the private root has it too); when
/// none is, `None` and `test` is skipped with one line, or fails under CI.
#[track_caller]
pub fn installed(test: &str, paths: &[&'static str]) -> Option<&'static str> {
    let found = paths.iter().copied().find(|p| Path::new(p).is_file());
    let found = found.ok_or_else(|| format!("none of {paths:?} is installed"));
    opc_testgate::need(Group::Programs, test, found)
}

/// Waits until no process whose command line holds `token` runs, failing with `what` (what
/// outlived what) after 10 s.
pub fn none_left_within_deadline(token: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !running_with(token).is_empty() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A token unique to this call, to find a test's own processes.
pub fn token(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!(
        "opc-sandbox-test-{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}
