//! What a command may do: the caller's description of one run ([`Policy`]), before the launcher
//! turns it into kernel rules.

use std::path::PathBuf;

/// Whether the kernel sandbox applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every restriction; a kernel that lacks one refuses the run (fail closed).
    #[default]
    Enforce,
    /// No kernel sandbox: `bash -c` runs directly as OPC's user, with only the scrubbed environment,
    /// the working directory, a process group (killed on timeout), and the output cap. For machines
    /// without Landlock, chosen explicitly (`framework.sandbox.mode: off`); the caller warns.
    Off,
}

/// Resource limits (rlimits) applied to the command and everything it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_CPU`: CPU seconds per process (SIGXCPU, then SIGKILL).
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`: address space per process, in bytes.
    pub memory_bytes: u64,
    /// `RLIMIT_NPROC`: processes (and threads) the command may have at once. Counted inside the
    /// run's own user namespace, so concurrent runs do not share the budget.
    pub processes: u64,
    /// `RLIMIT_FSIZE`: the largest file a process may write, in bytes (SIGXFSZ beyond).
    pub file_size_bytes: u64,
}

impl Default for Limits {
    /// Sized for `cargo test` of a mid-sized crate: rustc and the linker reserve a lot of address
    /// space and run many threads; a fork bomb still stops at a few hundred processes.
    fn default() -> Self {
        Limits {
            cpu_seconds: 600,
            memory_bytes: 8 << 30,
            processes: 512,
            file_size_bytes: 1 << 30,
        }
    }
}

/// One run's sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// On or off (see [`Mode`]).
    pub mode: Mode,
    /// Read-write; the working directory and `HOME`. Must exist.
    pub workdir: PathBuf,
    /// Extra read-only trees (the agent's descendants' workspaces). Missing ones are skipped: a
    /// workspace nobody has written to yet has nothing to read.
    pub read_only: Vec<PathBuf>,
    /// Network access (`framework.sandbox.network`). Off: a private network namespace with no
    /// interface up, not even loopback.
    pub network: bool,
    /// Extra environment variables, beyond `PATH`, `HOME`, `LANG`, `TERM=dumb` and `TMPDIR`.
    pub env: Vec<(String, String)>,
    /// rlimits.
    pub limits: Limits,
}

impl Policy {
    /// Enforce mode, no network, no extra variables, default limits: the configuration's defaults.
    pub fn new(workdir: impl Into<PathBuf>) -> Policy {
        Policy {
            mode: Mode::Enforce,
            workdir: workdir.into(),
            read_only: Vec::new(),
            network: false,
            env: Vec::new(),
            limits: Limits::default(),
        }
    }
}
