//! Why a command could not be started. Never "the command failed": that is an [`crate::Output`].

/// A run that did not start. Each message says what, why, and how to fix it.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SandboxError {
    /// The kernel lacks a feature the policy needs; the run is refused (fail closed).
    #[error(
        "the Bash sandbox needs {feature}, which this kernel does not offer; Bash is refused (fail closed). Fix: run OPC on a kernel with it (Linux 5.13+ with Landlock enabled, user namespaces allowed), or set `framework.sandbox.mode: off` to run commands unsandboxed (not recommended); `opc validate` shows what the kernel offers"
    )]
    Unsupported {
        /// The missing feature, e.g. `landlock`, `user namespaces`, with what the kernel said in
        /// parentheses when known.
        feature: String,
    },
    /// The policy itself is unusable (e.g. the working directory does not exist).
    #[error("cannot run the command: {0}")]
    Policy(String),
    /// The launcher process could not be started or talked to.
    #[error(
        "cannot start the sandbox launcher: {0}. Fix: check that the OPC binary is still in place and the machine has free processes and file descriptors"
    )]
    Spawn(String),
    /// The launcher started but could not apply a restriction; nothing ran.
    #[error("the sandbox could not be set up, nothing ran: {0}")]
    Setup(String),
}
