//! # opc-sandbox — `bash -c` under a kernel sandbox
//!
//! Role: run one shell command for an agent's Bash tool so that it can touch its workspace and
//! nothing else, even when the agent may run any command (`allow: ["*"]`). The restrictions come
//! from the kernel (Landlock, seccomp, user and network namespaces, rlimits, `no_new_privs`), not from
//! inspecting the command, so what the command does does not matter.
//!
//! How: `unsafe` is forbidden in this workspace, so nothing runs between `fork` and `exec` in the
//! parent (`pre_exec` is unsafe). Instead [`Sandbox::run`] spawns a *launcher*, the same executable
//! (`opc`) started with a private argv marker; [`enter_if_launcher`], called first in `main`,
//! recognises the marker, applies every restriction to its own fresh, single-threaded process and
//! then execs `bash -c COMMAND`. See [`launcher`] for the order and why.
//!
//! Invariants:
//! - Fail closed: a launcher that cannot apply a restriction exits with a message on a private
//!   channel; [`Sandbox::run`] turns it into a [`SandboxError`]. There is no path that runs the
//!   command with fewer restrictions than asked, except [`Mode::Off`], which the caller chose.
//! - The whole process tree is one process group (a new session; seccomp denies `setsid` and
//!   `setpgid` to the command), and it is killed on timeout, on cancellation (the future dropped),
//!   and as soon as bash itself exits (background jobs do not outlive the command).
//! - Output is bounded: stdout and stderr share one pipe, of which only the first and last
//!   ~15,000 bytes are kept.
//!
//! Design notes: docs/sandbox.md.

mod capture;
mod error;
pub mod launcher;
pub mod layout;
mod owner;
mod policy;
mod probe;
mod run;
mod seccomp;
mod spawner;

pub use error::SandboxError;
pub use launcher::enter_if_launcher;
pub use owner::{SANDBOX_GID, SANDBOX_UID, make_writable, sandbox_owner};
pub use policy::{Limits, Mode, Policy};
pub use probe::Probe;
pub use run::{Output, Sandbox};

/// Bytes kept from the start and from the end of a command's output (the rest is counted as
/// omitted). Both together, with the marker between them, stay under the Bash tool's 30,000
/// characters.
pub const KEEP_HEAD: usize = 14_950;
/// See [`KEEP_HEAD`].
pub const KEEP_TAIL: usize = 14_950;
