//! The inner stage: PID 1 of the run's PID namespace, which restricts itself and becomes bash.
//!
//! Steps, in this order:
//! 1. read the [`Spec`] from the outer stage;
//! 2. `unshare(CLONE_NEWNS)` (and `CLONE_NEWNET` when the network is off: a namespace with no
//!    interface up, not even loopback) and the private root ([`super::mounts`]);
//! 3. when OPC is root: `setgroups`/`setgid`/`setuid` to [`crate::SANDBOX_UID`] (checked: `setuid(0)`
//!    must fail afterwards); then, either way, a user namespace of its own, whose maps the outer
//!    stage writes (the command's user onto itself; for an ordinary OPC, the user namespace the
//!    outer stage made, where this stage was root, is left behind). The user namespace is where
//!    `RLIMIT_NPROC` is counted, so each run has its own process budget;
//! 4. rlimits: CPU, address space, processes, file size, no core dumps;
//! 5. a check that the user can use `/workspace`;
//! 6. Landlock ([`super::rules`]) and seccomp ([`crate::seccomp`]);
//! 7. `PR_SET_PDEATHSIG(SIGKILL)` — last, because a credential change clears it — and a check
//!    that the outer stage still holds its socket (a PID 1 cannot ask for its parent's pid);
//! 8. `READY`, then start `bash -c COMMAND` (cwd `/workspace`, stdin `/dev/null`) and stay as the
//!    namespace's init, reaping orphans; when bash ends, how it ended goes to the outer stage and
//!    this process exits, so the kernel kills everything left in the namespace.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use nix::sys::signal::Signal;
use nix::unistd::{AccessFlags, Gid, Uid};

use super::environment::environment;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::protocol::{Ended, Failure, LAUNCHER_FAILED, MAP, MAPPED, READY, Spec};
use crate::layout::{HOME, TMP, WORKSPACE};
use crate::policy::Limits;

/// Run the inner stage; never returns.
pub(super) fn main() -> ! {
    let socket = rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3).map(UnixStream::from);
    let Ok(socket) = socket else {
        eprintln!("opc sandbox launcher: the inner stage has no socket");
        std::process::exit(LAUNCHER_FAILED);
    };
    let mut reader = BufReader::new(&socket);
    let failure = match restrict(&socket, &mut reader) {
        Ok(spec) => run_bash(&socket, &spec),
        Err(failure) => failure,
    };
    let mut writer = &socket;
    let _ = writer.write_all(&failure.to_line());
    eprintln!("opc sandbox launcher: {}", failure.message);
    std::process::exit(LAUNCHER_FAILED);
}

fn restrict(socket: &UnixStream, reader: &mut BufReader<&UnixStream>) -> Result<Spec, Failure> {
    let mut line = Vec::new();
    reader
        .read_until(b'\n', &mut line)
        .map_err(|e| Failure::setup(format!("reading the policy: {e}")))?;
    let spec: Spec = serde_json::from_slice(&line)
        .map_err(|e| Failure::setup(format!("the policy is not valid: {e}")))?;
    let mut flags = CloneFlags::CLONE_NEWNS;
    if !spec.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    nix::sched::unshare(flags).map_err(|e| {
        Failure::unsupported(
            if spec.network {
                "mount namespaces"
            } else {
                "mount and network namespaces"
            },
            format!("unshare: {e}"),
        )
    })?;
    let owner = spec
        .host_root
        .then_some((crate::SANDBOX_UID, crate::SANDBOX_GID));
    super::mounts::enter(&spec, owner, spec.file_size_bytes)?;
    if spec.host_root {
        drop_root()?;
    }
    // The last user namespace: the command's own (its process budget), where it is no one special.
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| Failure::unsupported("user namespaces", format!("unshare: {e}")))?;
    let mut writer = socket;
    writer
        .write_all(MAP)
        .map_err(|e| Failure::setup(format!("asking for the uid map: {e}")))?;
    let mut answer = Vec::new();
    reader
        .read_until(b'\n', &mut answer)
        .map_err(|e| Failure::setup(format!("waiting for the uid map: {e}")))?;
    if answer != MAPPED {
        return Err(serde_json::from_slice(&answer)
            .unwrap_or_else(|_| Failure::setup("the outer stage did not write the uid map")));
    }
    set_limits(&spec.limits())?;
    nix::unistd::access(WORKSPACE, AccessFlags::R_OK | AccessFlags::W_OK | AccessFlags::X_OK)
        .map_err(|e| {
            Failure::setup(format!(
                "the workspace is not readable and writable by uid {} ({e}). Fix: when OPC runs as root, the workspace must be owned by the sandbox user (the tools do this)",
                nix::unistd::getuid(),
            ))
        })?;
    super::rules::apply(&spec)?;
    for program in crate::seccomp::filters(spec.network).map_err(Failure::setup)? {
        seccompiler::apply_filter(&program)
            .map_err(|e| Failure::unsupported("seccomp", format!("installing the filter: {e}")))?;
    }
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| Failure::setup(format!("PR_SET_PDEATHSIG: {e}")))?;
    parent_alive(socket)?;
    Ok(spec)
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
    Ok(())
}

/// The outer stage keeps its end of the socket open until `READY`: a closed end (EOF on a
/// non-blocking peek) means it died before the death signal was set, so nothing would stop this
/// run when OPC is gone.
fn parent_alive(socket: &UnixStream) -> Result<(), Failure> {
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    let alive = match rustix::net::recv(socket, &mut [0u8; 1], flags) {
        Ok((0, _)) => false,
        Ok(_) => true,
        Err(e) => e == rustix::io::Errno::AGAIN,
    };
    if alive {
        Ok(())
    } else {
        Err(Failure::setup("the launcher's outer stage is gone"))
    }
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

/// Say `READY`, start bash, and stay as the namespace's init: reap every process reparented here
/// until bash ends, then report how bash ended on the socket and exit (which ends the namespace).
/// Returns only on failure.
///
/// Why not exec bash as PID 1: the kernel shields a namespace's init from its own namespace's
/// signals, so `kill $$` (or a program signalling its shell) would do nothing.
fn run_bash(socket: &UnixStream, spec: &Spec) -> Failure {
    let mut writer = socket;
    if let Err(e) = writer.write_all(READY) {
        return Failure::setup(format!("telling the outer stage the sandbox is ready: {e}"));
    }
    let bash = Command::new(&spec.bash)
        .arg("-c")
        .arg(&spec.command)
        .env_clear()
        .envs(environment(spec, Path::new(HOME), Path::new(TMP)))
        .current_dir(WORKSPACE)
        .stdin(Stdio::null())
        .spawn();
    let bash = match bash {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(e) => return Failure::setup(format!("executing {}: {e}", spec.bash.display())),
    };
    let ended = loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == bash => break Ended::Code(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == bash => {
                break Ended::Signal(signal as i32);
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Failure::setup(format!("waiting for bash: {e}")),
        }
    };
    let mut line = serde_json::to_vec(&ended).unwrap_or_default();
    line.push(b'\n');
    let _ = writer.write_all(&line);
    std::process::exit(0)
}
