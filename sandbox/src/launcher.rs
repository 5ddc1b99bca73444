//! The launcher: the process that restricts itself and becomes `bash -c COMMAND`.
//!
//! [`crate::Sandbox::run`] starts the launcher executable with [`MARKER`] as its only argument,
//! stdin a Unix socket, stdout and stderr the output pipe, and an empty environment. The launcher
//! reads a [`Spec`] (JSON) from the socket, then applies to itself, in this order:
//!
//! 1. `setsid`: a new session and process group, which the parent kills as a whole.
//! 2. When root: `setgroups([])`, `setgid`, `setuid` to [`crate::SANDBOX_UID`]: everything after
//!    runs unprivileged, so nothing below relies on root's powers (or can misuse them).
//! 3. `unshare(CLONE_NEWUSER | CLONE_NEWNET)` (without `NEWNET` when the network is allowed), and
//!    a uid/gid map of the user onto itself. The new network namespace has no interface up, not
//!    even loopback. The user namespace is where `RLIMIT_NPROC` is counted, so each run has its own
//!    process budget.
//! 4. rlimits: CPU, address space, processes, file size, and no core dumps.
//! 5. A check that the user can reach the working directory (root's parent dirs are often 0700).
//! 6. Landlock, at the highest ABI both the kernel and the `landlock` crate know, every access
//!    right handled, as a hard requirement: read+execute on the system's program and library
//!    directories and a few `/etc` files; read-write on `/dev/null`, `/dev/zero`, `/dev/urandom`;
//!    everything on the workdir and the private temp dir; read on `read_only`. Where the kernel has
//!    them, TCP bind/connect (ABI 4, when the network is off) and signals and abstract Unix sockets
//!    to processes outside the sandbox (ABI 6) are denied too. This also sets `no_new_privs`.
//! 7. seccomp (see [`crate::seccomp`]).
//! 8. exec `bash -c COMMAND` with the scrubbed environment, cwd = workdir, stdin `/dev/null`.
//!
//! Once every restriction holds, the launcher writes [`READY`] to the socket and execs. Every
//! failure is written to the socket (a JSON [`Failure`], after `READY` if exec itself failed) and
//! the launcher exits with 125; the socket is close-on-exec, so a successful exec closes it with
//! `READY` alone written. The parent thus tells "could not sandbox" from "the command exited 125",
//! and a launcher from an executable that is not one, without guessing.
//!
//! The launcher must be single-threaded for `unshare(CLONE_NEWUSER)`: [`enter_if_launcher`] runs
//! first in `main`, before any runtime starts, and the parent turns off jemalloc's background
//! thread for it (`_RJEM_MALLOC_CONF`).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    RestrictSelf, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use nix::unistd::{AccessFlags, Gid, Uid};
use serde::{Deserialize, Serialize};

use crate::policy::Limits;

/// The private argv marker: `<launcher> MARKER`. Unlikely in any real command line.
pub const MARKER: &str = "--opc-sandbox-launcher-v1";

/// What the launcher writes once every restriction holds, right before exec. The parent needs this
/// positive signal: an executable that is not a launcher also closes the socket without a word.
pub(crate) const READY: &[u8] = b"ready\n";

/// The exit code of a launcher that failed before exec (its reason is on the socket).
pub const LAUNCHER_FAILED: i32 = 125;

/// What the parent sends: the run, fully resolved (absolute paths, the temp dir made).
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct Spec {
    pub command: String,
    pub bash: PathBuf,
    pub workdir: PathBuf,
    pub tmpdir: PathBuf,
    pub read_only: Vec<PathBuf>,
    pub network: bool,
    pub env: Vec<(String, String)>,
    pub cpu_seconds: u64,
    pub memory_bytes: u64,
    pub processes: u64,
    pub file_size_bytes: u64,
}

impl Spec {
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            cpu_seconds: self.cpu_seconds,
            memory_bytes: self.memory_bytes,
            processes: self.processes,
            file_size_bytes: self.file_size_bytes,
        }
    }
}

/// What a failed launcher reports.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct Failure {
    /// Set when a kernel feature is missing (becomes `SandboxError::Unsupported`).
    pub unsupported: Option<String>,
    pub message: String,
}

impl Failure {
    fn setup(message: impl Into<String>) -> Failure {
        Failure {
            unsupported: None,
            message: message.into(),
        }
    }
    fn unsupported(feature: &str, detail: impl std::fmt::Display) -> Failure {
        Failure {
            unsupported: Some(format!("{feature} ({detail})")),
            message: format!("{feature}: {detail}"),
        }
    }
}

/// Call first thing in `main()` of any binary that launches sandboxes (`opc` does): if this process
/// was started as a sandbox launcher (the private argv marker), apply the policy to itself and exec
/// `bash -c COMMAND`; never returns then. Otherwise returns at once.
pub fn enter_if_launcher() {
    let mut args = std::env::args_os();
    let (_, Some(marker), None) = (args.next(), args.next(), args.next()) else {
        return;
    };
    if marker != MARKER {
        return;
    }
    // stdin is the socket to the parent. Keep a close-on-exec copy for reporting, so a successful
    // exec closes it.
    let report = rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3).map(UnixStream::from);
    let failure = match report {
        Ok(mut socket) => {
            let failure = launch(&mut socket);
            let _ = socket.write_all(
                serde_json::to_string(&failure)
                    .unwrap_or_else(|_| failure.message.clone())
                    .as_bytes(),
            );
            failure
        }
        Err(e) => Failure::setup(format!("duplicating the launcher's socket: {e}")),
    };
    // Also on stderr (the output pipe), for a launcher run by hand.
    eprintln!("opc sandbox launcher: {}", failure.message);
    std::process::exit(LAUNCHER_FAILED);
}

/// Apply everything and exec; returns only on failure.
fn launch(socket: &mut UnixStream) -> Failure {
    let mut input = Vec::new();
    if let Err(e) = socket.read_to_end(&mut input) {
        return Failure::setup(format!("reading the policy from the parent: {e}"));
    }
    let spec: Spec = match serde_json::from_slice(&input) {
        Ok(spec) => spec,
        Err(e) => return Failure::setup(format!("the policy the parent sent is not valid: {e}")),
    };
    if let Err(failure) = restrict(&spec) {
        return failure;
    }
    // Every restriction holds: say so, then exec (whose failure would follow this line).
    if let Err(e) = socket.write_all(READY) {
        return Failure::setup(format!("telling the parent the sandbox is ready: {e}"));
    }
    exec(&spec)
}

fn restrict(spec: &Spec) -> Result<(), Failure> {
    nix::unistd::setsid().map_err(|e| Failure::setup(format!("setsid: {e}")))?;
    if nix::unistd::geteuid().is_root() {
        drop_root()?;
    }
    enter_namespaces(spec.network)?;
    set_limits(&spec.limits())?;
    nix::unistd::access(&spec.workdir, AccessFlags::R_OK | AccessFlags::W_OK | AccessFlags::X_OK)
        .map_err(|e| {
            Failure::setup(format!(
                "the workspace {} is not readable and writable by uid {} ({e}). Fix: when OPC runs as root, every parent directory of the workspace root must be traversable by others (chmod o+x), and the workspace owned by the sandbox user (the tools do this); or run OPC as an ordinary user",
                spec.workdir.display(),
                nix::unistd::getuid(),
            ))
        })?;
    landlock(spec)?;
    for program in crate::seccomp::filters().map_err(Failure::setup)? {
        seccompiler::apply_filter(&program)
            .map_err(|e| Failure::unsupported("seccomp", format!("installing the filter: {e}")))?;
    }
    Ok(())
}

fn drop_root() -> Result<(), Failure> {
    let gid = Gid::from_raw(crate::SANDBOX_GID);
    let uid = Uid::from_raw(crate::SANDBOX_UID);
    nix::unistd::setgroups(&[gid]).map_err(|e| Failure::setup(format!("setgroups: {e}")))?;
    nix::unistd::setgid(gid).map_err(|e| Failure::setup(format!("setgid: {e}")))?;
    nix::unistd::setuid(uid).map_err(|e| Failure::setup(format!("setuid: {e}")))?;
    // setuid from root drops root for good; check it cannot come back.
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok() || nix::unistd::geteuid().is_root() {
        return Err(Failure::setup(
            "could not drop root: setuid(0) still succeeds",
        ));
    }
    // A uid change clears the dumpable flag, which makes /proc/self root's, and the uid map below
    // unwritable. exec would set it back for bash anyway (bash is not setuid).
    nix::sys::prctl::set_dumpable(true)
        .map_err(|e| Failure::setup(format!("PR_SET_DUMPABLE: {e}")))?;
    Ok(())
}

fn enter_namespaces(network: bool) -> Result<(), Failure> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if !network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    nix::sched::unshare(flags).map_err(|e| {
        let feature = if network {
            "user namespaces"
        } else {
            "user and network namespaces"
        };
        Failure::unsupported(feature, format!("unshare: {e}"))
    })?;
    // Map the user onto itself, so files keep their owner's name inside.
    let write = |file: &str, text: String| {
        std::fs::write(file, text)
            .map_err(|e| Failure::unsupported("user namespaces", format!("writing {file}: {e}")))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

fn set_limits(limits: &Limits) -> Result<(), Failure> {
    for (resource, value, name) in [
        (Resource::RLIMIT_CPU, limits.cpu_seconds, "RLIMIT_CPU"),
        (Resource::RLIMIT_AS, limits.memory_bytes, "RLIMIT_AS"),
        (Resource::RLIMIT_NPROC, limits.processes, "RLIMIT_NPROC"),
        (
            Resource::RLIMIT_FSIZE,
            limits.file_size_bytes,
            "RLIMIT_FSIZE",
        ),
        (Resource::RLIMIT_CORE, 0, "RLIMIT_CORE"),
    ] {
        nix::sys::resource::setrlimit(resource, value, value)
            .map_err(|e| Failure::setup(format!("setrlimit {name}={value}: {e}")))?;
    }
    Ok(())
}

/// System directories: read and execute.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
];

/// `/etc` entries that bash, the loader, libc's name services and TLS clients read. Not `/etc`
/// whole: it holds secrets (`shadow`, keys under `ssl/private`, service credentials).
const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/resolv.conf",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/gitconfig",
    "/etc/inputrc",
];

/// Devices: read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/dev/full",
];

fn landlock(spec: &Spec) -> Result<(), Failure> {
    let status = RestrictSelf::default()
        .no_new_privs(false)
        .apply()
        .map(|s| s.landlock)
        .map_err(|e| Failure::unsupported("landlock", e))?;
    let abi = match status {
        LandlockStatus::Available { effective_abi, .. } => effective_abi,
        LandlockStatus::NotEnabled => {
            return Err(Failure::unsupported("landlock", "not enabled at boot"));
        }
        LandlockStatus::NotImplemented => {
            return Err(Failure::unsupported(
                "landlock",
                "not built into this kernel",
            ));
        }
    };
    let fail = |e: landlock::RulesetError| Failure::unsupported("landlock", e);
    let read_exec = AccessFs::from_read(abi);
    let read_write = AccessFs::from_all(abi);
    let file_rw = AccessFs::from_file(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?;
    if !spec.network && abi >= ABI::V4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(fail)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(fail)?;
    }
    let mut created = ruleset.create().map_err(fail)?;
    let mut add = |path: &Path, access, must_exist: bool| -> Result<(), Failure> {
        match PathFd::new(path) {
            Ok(fd) => {
                // A file gets only the file rights of the set (directory rights do not apply).
                let access = if path.is_dir() {
                    access
                } else {
                    access & file_rw
                };
                (&mut created)
                    .add_rule(PathBeneath::new(fd, access))
                    .map(|_| ())
                    .map_err(|e| Failure::unsupported("landlock", e))
            }
            Err(_) if !must_exist => Ok(()),
            Err(e) => Err(Failure::setup(format!("{}: {e}", path.display()))),
        }
    };
    for dir in SYSTEM_DIRS.iter().chain(ETC_FILES) {
        add(Path::new(dir), read_exec, false)?;
    }
    for dev in DEVICES {
        add(Path::new(dev), file_rw, false)?;
    }
    for dir in &spec.read_only {
        add(dir, read_exec, false)?;
    }
    add(&spec.workdir, read_write, true)?;
    add(&spec.tmpdir, read_write, true)?;
    let status = created.restrict_self().map_err(fail)?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(Failure::unsupported(
            "landlock",
            format!("the ruleset was not fully enforced ({:?})", status.ruleset),
        ));
    }
    Ok(())
}

/// The environment a command gets: nothing of OPC's but what the policy lists.
pub(crate) fn environment(spec: &Spec) -> Vec<(String, OsString)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            OsString::from("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        ),
        ("HOME".to_string(), spec.workdir.clone().into_os_string()),
        ("LANG".to_string(), OsString::from("C.UTF-8")),
        ("TERM".to_string(), OsString::from("dumb")),
        ("TMPDIR".to_string(), spec.tmpdir.clone().into_os_string()),
    ];
    for (name, value) in &spec.env {
        env.retain(|(n, _)| n != name);
        env.push((name.clone(), OsString::from(value)));
    }
    env
}

fn exec(spec: &Spec) -> Failure {
    let error = Command::new(&spec.bash)
        .arg("-c")
        .arg(&spec.command)
        .env_clear()
        .envs(environment(spec))
        .current_dir(&spec.workdir)
        .stdin(Stdio::null())
        .exec();
    Failure::setup(format!("executing {}: {error}", spec.bash.display()))
}
