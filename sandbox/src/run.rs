//! The parent side: start the launcher, hand it the policy, collect bounded output, and make sure
//! the whole process tree is gone when `run` returns or is dropped.
//!
//! Lifetime of a run (the process group is the unit; seccomp keeps every descendant in it):
//! - bash exits: the rest of its group (e.g. `sleep 100 &`) is killed at once. A background job
//!   cannot keep `run` waiting, nor outlive the call. Output already written is kept.
//! - the timeout passes: the group is killed, bash reaped, `timed_out` set.
//! - the future is dropped (the tool call was cancelled): a guard kills the group; tokio reaps the
//!   launcher in the background; the temp dir is removed.
//!
//! After the kill the pipe is drained until every writer has closed it (they are dead: EOF comes at
//! once), with a short grace period for [`Mode::Off`], where a command can leave the group.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::process::Child;

use crate::capture::HeadTail;
use crate::error::SandboxError;
use crate::launcher::protocol::{Failure, READY, Spec};
use crate::launcher::{LAUNCHER_FAILED, MARKER};
use crate::layout;
use crate::policy::{Mode, Policy};
use crate::probe::Probe;

/// How long to keep reading output after the group was killed, for writers that left the group
/// (only possible with [`Mode::Off`]).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs commands; holds the launcher executable.
#[derive(Clone, Debug)]
pub struct Sandbox {
    launcher: PathBuf,
}

/// What a command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// stdout+stderr interleaved, ≤ 30,000 chars: head + "… N bytes omitted …" + tail.
    pub text: String,
    /// Bytes left out of `text`.
    pub omitted_bytes: u64,
    /// bash's exit code; None when killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed bash, if one did (SIGKILL on timeout).
    pub signal: Option<i32>,
    /// The timeout passed and the command was killed.
    pub timed_out: bool,
    /// From spawn to the end of the process group.
    pub duration: Duration,
}

impl Sandbox {
    /// `launcher` is an executable whose `main` calls [`crate::enter_if_launcher`] first; `opc`
    /// passes `std::env::current_exe()`.
    pub fn new(launcher: PathBuf) -> Sandbox {
        Sandbox { launcher }
    }

    /// The launcher executable.
    pub fn launcher(&self) -> &Path {
        &self.launcher
    }

    /// Run `bash -c command` under `policy`. The future resolves when the command (its whole process
    /// group) ended or `timeout` passed; on timeout, and when the future is DROPPED (cancellation),
    /// the whole process tree is killed and reaped. Err = could not start (e.g. a missing kernel
    /// feature, fail-closed, with its name), never "the command failed".
    pub async fn run(
        &self,
        policy: &Policy,
        command: &str,
        timeout: Duration,
    ) -> Result<Output, SandboxError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        if policy.mode == Mode::Enforce
            && let Some(feature) = Probe::detect().missing(policy).into_iter().next()
        {
            return Err(SandboxError::Unsupported { feature });
        }
        let workdir = std::fs::canonicalize(&policy.workdir)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| {
                SandboxError::Policy(format!(
                    "the working directory {} does not exist or is not a directory; create it first",
                    policy.workdir.display()
                ))
            })?;
        let bash = find_bash()?;
        let read_only: Vec<PathBuf> = policy
            .read_only
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        let scratch = match policy.mode {
            Mode::Off => Some(scratch_dir()?),
            Mode::Enforce => None,
        };
        let spec = Spec {
            command: command.to_string(),
            bash,
            off: policy.mode == Mode::Off,
            host_root: crate::sandbox_owner().is_some(),
            shared: layout::shared(&workdir, &read_only),
            workdir,
            scratch: scratch.as_ref().map(|d| d.path().to_path_buf()),
            network: policy.network,
            env: policy.env.clone(),
            cpu_seconds: policy.limits.cpu_seconds,
            memory_bytes: policy.limits.memory_bytes,
            processes: policy.limits.processes,
            file_size_bytes: policy.limits.file_size_bytes,
        };

        let (reader, writer) = io::pipe().map_err(spawn_error("creating the output pipe"))?;
        let stderr = writer
            .try_clone()
            .map_err(spawn_error("creating the output pipe"))?;
        let (ours, theirs) =
            StdUnixStream::pair().map_err(spawn_error("creating the launcher's socket"))?;
        let mut cmd = std::process::Command::new(&self.launcher);
        cmd.arg(MARKER)
            .arg(std::process::id().to_string())
            .env_clear()
            // The launcher must stay single-threaded (unshare of a user namespace):
            // no jemalloc background thread.
            .env("_RJEM_MALLOC_CONF", "background_thread:false")
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(stderr));
        let mut child = crate::spawner::spawn(cmd)
            .await
            .map_err(spawn_error(&format!(
                "spawning {}",
                self.launcher.display()
            )))?;
        let pid = child.id().ok_or_else(|| {
            SandboxError::Spawn("the launcher exited before its pid was read".into())
        })?;
        // From here on, dropping this kills the whole group (cancellation included).
        let mut group = GroupGuard {
            pgid: pid as i32,
            _scratch: scratch,
        };
        hand_over(ours, &spec, &mut child, deadline, &self.launcher).await?;

        let mut output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
            .map_err(spawn_error("reading the output pipe"))?;
        let mut buffer = HeadTail::new(crate::KEEP_HEAD, crate::KEEP_TAIL);
        let mut chunk = vec![0u8; 64 * 1024];
        let mut eof = false;
        let mut timed_out = false;
        let exit: ExitStatus = loop {
            tokio::select! {
                read = output.read(&mut chunk), if !eof => match read {
                    Ok(0) | Err(_) => eof = true,
                    Ok(n) => buffer.push(&chunk[..n]),
                },
                status = child.wait() => {
                    break status.map_err(spawn_error("waiting for bash"))?;
                }
                _ = tokio::time::sleep_until(deadline) => {
                    timed_out = true;
                    group.kill();
                    break wait_killed(&mut child).await?;
                }
            }
        };
        // bash is gone: end whatever it left running, then take what is left in the pipe.
        group.kill();
        let drain_until = tokio::time::Instant::now() + DRAIN_GRACE;
        while !eof {
            tokio::select! {
                read = output.read(&mut chunk) => match read {
                    Ok(0) | Err(_) => eof = true,
                    Ok(n) => buffer.push(&chunk[..n]),
                },
                _ = tokio::time::sleep_until(drain_until) => break,
            }
        }
        group.kill();
        let (text, omitted_bytes) = buffer.finish();
        Ok(Output {
            text,
            omitted_bytes,
            exit_code: exit.code(),
            signal: exit.signal(),
            timed_out,
            duration: started.elapsed(),
        })
    }
}

/// Send the spec, then wait for the launcher's verdict: `READY` then EOF means bash is running; a
/// [`Failure`] means nothing ran; nothing at all means the executable is not a launcher.
async fn hand_over(
    socket: StdUnixStream,
    spec: &Spec,
    child: &mut Child,
    deadline: tokio::time::Instant,
    launcher: &Path,
) -> Result<(), SandboxError> {
    socket
        .set_nonblocking(true)
        .map_err(spawn_error("the launcher's socket"))?;
    let mut socket =
        tokio::net::UnixStream::from_std(socket).map_err(spawn_error("the launcher's socket"))?;
    let json = serde_json::to_vec(spec).map_err(|e| SandboxError::Spawn(e.to_string()))?;
    let talk = async {
        socket.write_all(&json).await?;
        socket.shutdown().await?;
        let mut verdict = Vec::new();
        socket.read_to_end(&mut verdict).await?;
        io::Result::Ok(verdict)
    };
    let verdict = match tokio::time::timeout_at(deadline, talk).await {
        Ok(Ok(verdict)) => verdict,
        Ok(Err(e)) => {
            // The launcher died before reading (e.g. the executable does not call
            // `enter_if_launcher`): say so, with its exit status.
            let status = wait_killed(child).await.ok();
            return Err(SandboxError::Spawn(format!(
                "talking to the launcher: {e} (it exited with {status:?}); is {} an executable that calls opc_sandbox::enter_if_launcher() first?",
                launcher.display()
            )));
        }
        Err(_) => {
            return Err(SandboxError::Spawn(
                "the launcher did not start bash before the timeout".into(),
            ));
        }
    };
    let verdict = match verdict.strip_prefix(READY) {
        Some([]) => return Ok(()),
        Some(failure) => failure.to_vec(),
        None if verdict.is_empty() => {
            let status = wait_killed(child).await.ok();
            return Err(SandboxError::Spawn(format!(
                "{} exited ({status:?}) without starting bash; is it an executable that calls opc_sandbox::enter_if_launcher() first?",
                launcher.display()
            )));
        }
        None => verdict,
    };
    let status = wait_killed(child).await.ok().and_then(|s| s.code());
    let failure: Failure = serde_json::from_slice(&verdict).unwrap_or_else(|_| Failure {
        unsupported: None,
        message: String::from_utf8_lossy(&verdict).into_owned(),
    });
    if status != Some(LAUNCHER_FAILED) {
        return Err(SandboxError::Setup(format!(
            "{} (and the launcher exited with {status:?}, not {LAUNCHER_FAILED})",
            failure.message
        )));
    }
    Err(match failure.unsupported {
        Some(feature) => SandboxError::Unsupported { feature },
        None => SandboxError::Setup(failure.message),
    })
}

/// Reap bash (after a kill), bounded: SIGKILL cannot be ignored, so this is quick; the bound is for
/// a process stuck in the kernel (e.g. uninterruptible I/O on a dead NFS mount).
async fn wait_killed(child: &mut Child) -> Result<ExitStatus, SandboxError> {
    match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
        Ok(status) => status.map_err(spawn_error("waiting for bash")),
        Err(_) => Err(SandboxError::Spawn(
            "bash did not end within 10 s of SIGKILL (stuck in the kernel?)".into(),
        )),
    }
}

/// Kills the process group when dropped (and on demand); removes the scratch dir when dropped.
struct GroupGuard {
    pgid: i32,
    /// Dropped after the kill (fields drop after `Drop::drop`).
    _scratch: Option<tempfile::TempDir>,
}

impl GroupGuard {
    /// SIGKILL every process of the group. ESRCH (the group is already empty) is fine.
    fn kill(&mut self) {
        let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn_error(what: &str) -> impl Fn(io::Error) -> SandboxError + '_ {
    move |e| SandboxError::Spawn(format!("{what}: {e}"))
}

/// bash, looked up in the usual places (not `PATH`: OPC's `PATH` is not the command's).
fn find_bash() -> Result<PathBuf, SandboxError> {
    ["/usr/bin/bash", "/bin/bash", "/usr/local/bin/bash"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            SandboxError::Policy(
                "bash is not installed (looked in /usr/bin, /bin, /usr/local/bin); install it"
                    .into(),
            )
        })
}

/// The prefix of a `Mode::Off` run's scratch directory: `opc-sandbox-<OPC's pid>-<random>`.
const SCRATCH_PREFIX: &str = "opc-sandbox-";

/// `Mode::Off` only (an enforced run's HOME and `/tmp` are tmpfs mounts that vanish with its
/// namespace): a fresh 0700 directory under the system temp dir holding `home/` and `tmp/`,
/// named after OPC's pid so [`Sandbox::remove_stale`] can tell a dead OPC's from a live one's.
fn scratch_dir() -> Result<tempfile::TempDir, SandboxError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(spawn_error("creating the private temp dir"))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(spawn_error("making the private temp dir private"))?;
    for sub in ["home", "tmp"] {
        std::fs::create_dir(dir.path().join(sub))
            .map_err(spawn_error("creating the private temp dir"))?;
    }
    Ok(dir)
}

impl Sandbox {
    /// Remove the scratch directories (`opc-sandbox-*` under the system temp dir) that no living
    /// OPC owns: left by a crash, or by a version that made one for every run. `opc run` calls it
    /// at start. Returns how many were removed.
    pub fn remove_stale() -> usize {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
                continue;
            };
            let owner = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
            if owner.is_some_and(alive) {
                continue;
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// Whether a process `pid` exists (EPERM: it does, owned by someone else).
fn alive(pid: i32) -> bool {
    !matches!(
        nix::sys::signal::kill(Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}
