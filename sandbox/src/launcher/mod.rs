//! The launcher: the processes that restrict themselves and become `bash -c COMMAND`.
//!
//! [`crate::Sandbox::run`] starts the launcher executable (`opc` itself) with `MARKER <OPC's pid>`,
//! stdin a Unix socket, stdout and stderr the output pipe, and an empty environment. It runs in
//! two stages of the same executable:
//! - the **outer** stage ([`outer`]): a new session, the death signal tied to OPC, a PID namespace;
//!   it starts the inner stage and waits;
//! - the **inner** stage ([`inner`]): PID 1 of that namespace; a mount namespace holding only what
//!   the policy allows ([`mounts`]), the uid drop and a user namespace, rlimits, Landlock
//!   ([`rules`]), seccomp, then exec bash.
//!
//! Every failure before the exec reaches OPC as a [`protocol::Failure`] and the launcher exits 125:
//! the command never runs with less than asked. Both stages must be single-threaded for
//! `unshare(CLONE_NEWUSER)`: [`enter_if_launcher`] runs first in `main`, before any runtime starts,
//! and each stage is started without jemalloc's background thread (`_RJEM_MALLOC_CONF`).

mod environment;
mod inner;
mod mounts;
mod outer;
pub(crate) mod protocol;
mod rules;

pub use protocol::{LAUNCHER_FAILED, MARKER};

/// Call first thing in `main()` of any binary that launches sandboxes (`opc` does): if this process
/// was started as a sandbox launcher (a private argv marker), apply the policy to itself and become
/// `bash -c COMMAND`; never returns then. Otherwise returns at once.
pub fn enter_if_launcher() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).take(3).collect();
    match args.as_slice() {
        [marker, parent] if marker == protocol::MARKER => outer::main(parent),
        [marker] if marker == protocol::INNER => inner::main(),
        _ => {}
    }
}
