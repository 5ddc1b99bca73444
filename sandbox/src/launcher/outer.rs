//! The outer stage: the process OPC starts. It ties the run's life to OPC's and makes the PID
//! namespace whose first process is bash.
//!
//! Steps: read the [`Spec`]; `setsid` (the run's process group, which OPC kills as a whole);
//! when not root, a user namespace where the user is root (an unprivileged process needs one to
//! own the other namespaces); `unshare(CLONE_NEWPID)`; `PR_SET_PDEATHSIG(SIGKILL)` with a check
//! that OPC is still its parent; then it starts the inner stage (this executable again, which
//! becomes PID 1 of the new namespace and starts bash), hands it the spec, writes the uid/gid maps
//! it asks for, relays its verdict to OPC, closes OPC's socket, and waits: its exit status is
//! bash's (a signal that killed bash kills it too).
//!
//! Why two stages: nothing can run between `fork` and `exec` without `unsafe`, and a PID
//! namespace only takes the *children* of the process that made it. The chain then guarantees
//! that nothing outlives OPC, even `kill -9` of OPC: OPC dies → the kernel kills this stage (death
//! signal) → that kills the inner stage, PID 1 of the namespace (its own death signal) → the
//! kernel kills every process in the namespace. No cleanup at start-up is needed for processes, and none can
//! be missed.
//!
//! `Mode::Off` stops after the death signal and execs bash itself: no namespaces there, so a
//! command's children that double-fork can outlive a crash of OPC (docs/sandbox.md says so).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};

use nix::sched::CloneFlags;
use nix::sys::signal::Signal;

use super::environment::environment;
use super::protocol::{Ended, Failure, INNER, LAUNCHER_FAILED, MAP, MAPPED, READY, Spec};

/// Run the outer stage; never returns.
pub(super) fn main(parent: &OsStr) -> ! {
    // stdin is the socket to OPC; keep a close-on-exec copy, so neither bash nor the inner stage
    // holds it.
    let socket = rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3).map(UnixStream::from);
    let mut socket = match socket {
        Ok(socket) => socket,
        Err(e) => {
            eprintln!("opc sandbox launcher: duplicating the launcher's socket: {e}");
            std::process::exit(LAUNCHER_FAILED);
        }
    };
    let failure = match start(&mut socket, parent) {
        // The socket is closed by then: OPC learns of the failure from the output and the exit.
        Ok((child, inner)) => relay_and_wait(socket, child, inner),
        Err(failure) => {
            let _ = socket.write_all(&failure.to_line());
            failure
        }
    };
    // Also on stderr (the output pipe), for a launcher run by hand.
    eprintln!("opc sandbox launcher: {}", failure.message);
    std::process::exit(LAUNCHER_FAILED);
}

/// Everything up to the inner stage's `READY`; returns it running (or, with `Mode::Off`, execs).
fn start(socket: &mut UnixStream, parent: &OsStr) -> Result<(Child, UnixStream), Failure> {
    let mut input = Vec::new();
    socket
        .read_to_end(&mut input)
        .map_err(|e| Failure::setup(format!("reading the policy from OPC: {e}")))?;
    let spec: Spec = serde_json::from_slice(&input)
        .map_err(|e| Failure::setup(format!("the policy OPC sent is not valid: {e}")))?;
    let parent: i32 = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| Failure::setup("the launcher's argument is not OPC's pid"))?;
    nix::unistd::setsid().map_err(|e| Failure::setup(format!("setsid: {e}")))?;
    if spec.off {
        die_with(parent)?;
        return Err(exec_off(socket, &spec));
    }
    // Whose the command's files are: the sandbox user when OPC is root, else OPC's own user.
    let user = if spec.host_root {
        (crate::SANDBOX_UID, crate::SANDBOX_GID)
    } else {
        let user = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        own_user_namespace(user)?;
        user
    };
    nix::sched::unshare(CloneFlags::CLONE_NEWPID)
        .map_err(|e| Failure::unsupported("pid namespaces", format!("unshare: {e}")))?;
    // After the last credential change (a new user namespace clears the death signal).
    die_with(parent)?;
    let (ours, theirs) = UnixStream::pair()
        .map_err(|e| Failure::setup(format!("creating the inner stage's socket: {e}")))?;
    let mut child = Command::new("/proc/self/exe")
        .arg(INNER)
        .env_clear()
        // The inner stage must stay single-threaded (unshare of a user namespace).
        .env("_RJEM_MALLOC_CONF", "background_thread:false")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn()
        .map_err(|e| Failure::setup(format!("starting the inner stage: {e}")))?;
    match talk(&ours, &spec, &child, user) {
        Ok(()) => Ok((child, ours)),
        Err(failure) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(failure)
        }
    }
}

/// Hand the spec over and serve the inner stage until its verdict.
fn talk(ours: &UnixStream, spec: &Spec, child: &Child, user: (u32, u32)) -> Result<(), Failure> {
    let mut line = serde_json::to_vec(spec).map_err(|e| Failure::setup(e.to_string()))?;
    line.push(b'\n');
    let mut writer = ours;
    writer
        .write_all(&line)
        .map_err(|e| Failure::setup(format!("handing the policy to the inner stage: {e}")))?;
    loop {
        let line =
            read_line(ours).map_err(|e| Failure::setup(format!("reading the inner stage: {e}")))?;
        if line.is_empty() {
            return Err(Failure::setup(
                "the inner stage exited without a word (see the output)",
            ));
        }
        if line == MAP {
            write_maps(child.id(), user, spec.host_root)?;
            writer
                .write_all(MAPPED)
                .map_err(|e| Failure::setup(format!("answering the inner stage: {e}")))?;
        } else if line == READY {
            return Ok(());
        } else {
            return Err(serde_json::from_slice(&line).unwrap_or_else(|_| {
                Failure::setup(String::from_utf8_lossy(&line).trim().to_string())
            }));
        }
    }
}

/// One line from the inner stage, with its `\n` (empty at EOF), read a byte at a time: a buffered
/// reader could take the next line too (the verdict of a command that ended at once arrives with
/// `READY`) and drop it with the buffer, and the command's exit code would be lost.
fn read_line(mut stream: &UnixStream) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return Ok(line),
            Ok(_) => {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    return Ok(line);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Tell OPC, close its socket (so it sees EOF while the command runs), wait for the inner stage
/// and end as bash ended.
fn relay_and_wait(mut socket: UnixStream, mut child: Child, inner: UnixStream) -> Failure {
    if let Err(e) = socket.write_all(READY) {
        let _ = child.kill();
        return Failure::setup(format!("telling OPC the sandbox is ready: {e}"));
    }
    drop(socket);
    // fd 0 is the other copy of OPC's socket.
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = rustix::stdio::dup2_stdin(&null);
    }
    let line = read_line(&inner).unwrap_or_default();
    let status = child.wait();
    match serde_json::from_slice::<Ended>(&line) {
        Ok(Ended::Code(code)) => std::process::exit(code),
        Ok(Ended::Signal(signal)) => {
            if let Ok(signal) = Signal::try_from(signal) {
                let _ = nix::sys::signal::raise(signal);
            }
            std::process::exit(128 + signal)
        }
        // The inner stage died without a word (killed): end as it ended.
        Err(_) => match status {
            Ok(status) => {
                if let Some(signal) = status.signal().and_then(|s| Signal::try_from(s).ok()) {
                    let _ = nix::sys::signal::raise(signal);
                }
                std::process::exit(status.code().unwrap_or(LAUNCHER_FAILED))
            }
            Err(e) => Failure::setup(format!("waiting for the inner stage: {e}")),
        },
    }
}

/// `PR_SET_PDEATHSIG(SIGKILL)`, then check that OPC did not die before it was set (the signal
/// would never come): its parent must still be `parent`.
fn die_with(parent: i32) -> Result<(), Failure> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| Failure::setup(format!("PR_SET_PDEATHSIG: {e}")))?;
    if nix::unistd::getppid().as_raw() != parent {
        return Err(Failure::setup("OPC exited before the command started"));
    }
    Ok(())
}

/// An ordinary user's own user namespace, where it is root (uid 0 maps to `user`): the inner
/// stage keeps those powers across its exec and builds the private root with them, then drops
/// them in a nested namespace where it is `user` again ([`write_maps`]).
fn own_user_namespace((uid, gid): (u32, u32)) -> Result<(), Failure> {
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| Failure::unsupported("user namespaces", format!("unshare: {e}")))?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text)
            .map_err(|e| Failure::unsupported("user namespaces", format!("writing {file}: {e}")))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))
}

/// The inner stage made its (last) user namespace and can no longer write its own maps: make it
/// `user` there. As root, the sandbox user onto itself; as an ordinary user, the user onto the
/// outer namespace's root, which is that user on the host.
fn write_maps(pid: u32, (uid, gid): (u32, u32), host_root: bool) -> Result<(), Failure> {
    let (outer_uid, outer_gid) = if host_root { (uid, gid) } else { (0, 0) };
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), text)
            .map_err(|e| Failure::unsupported("user namespaces", format!("writing {file}: {e}")))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {outer_uid} 1"))?;
    write("gid_map", format!("{gid} {outer_gid} 1"))
}

/// `Mode::Off`: bash in place of this process, with the scrubbed environment.
fn exec_off(socket: &mut UnixStream, spec: &Spec) -> Failure {
    let Some(scratch) = &spec.scratch else {
        return Failure::setup("no scratch directory for an unsandboxed run");
    };
    let env = environment(spec, &scratch.join("home"), &scratch.join("tmp"));
    if let Err(e) = socket.write_all(READY) {
        return Failure::setup(format!("telling OPC the command starts: {e}"));
    }
    let error = Command::new(&spec.bash)
        .arg("-c")
        .arg(&spec.command)
        .env_clear()
        .envs(env)
        .current_dir(&spec.workdir)
        .stdin(Stdio::null())
        .exec();
    Failure::setup(format!("executing {}: {error}", spec.bash.display()))
}

#[cfg(test)]
mod read_line_tests {
    use super::*;

    /// The inner stage's `READY` and the verdict of a command that ended at once can arrive in one
    /// read: each is read on its own, and the verdict is not lost.
    #[test]
    fn two_lines_sent_together_are_read_one_at_a_time() {
        let (mut inner, outer) = UnixStream::pair().expect("a socket pair");
        let mut verdict = serde_json::to_vec(&Ended::Code(7)).expect("encode");
        verdict.push(b'\n');
        inner.write_all(READY).expect("write READY");
        inner.write_all(&verdict).expect("write the verdict");
        drop(inner);
        assert_eq!(read_line(&outer).expect("first"), READY);
        let second = read_line(&outer).expect("second");
        assert_eq!(second, verdict);
        assert!(matches!(
            serde_json::from_slice::<Ended>(&second),
            Ok(Ended::Code(7))
        ));
        assert_eq!(read_line(&outer).expect("at EOF"), b"");
    }
}
