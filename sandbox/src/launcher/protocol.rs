//! What OPC and the two launcher stages say to each other.
//!
//! OPC → outer stage (its stdin, a Unix socket): one JSON [`Spec`], then OPC shuts its writing half.
//! Outer → OPC: [`READY`] once bash is about to run, or a JSON [`Failure`]; then EOF (the outer stage
//! closes the socket: nothing else of the run holds it).
//!
//! Outer → inner stage (the inner stage's stdin, a private socket pair): the [`Spec`] as one line.
//! Inner → outer: lines — [`MAP`] ("write my uid/gid maps", answered by [`MAPPED`]),
//! then [`READY`] or a JSON [`Failure`], and once bash has ended, a JSON [`Ended`]. The outer stage
//! keeps its end open throughout: the inner stage takes a closed socket to mean its parent died.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::layout::Shared;
use crate::policy::Limits;

/// The private argv marker of the outer stage: `<launcher> MARKER <OPC's pid>`.
pub const MARKER: &str = "--opc-sandbox-launcher-v2";
/// The private argv marker of the inner stage: `/proc/self/exe INNER`.
pub(crate) const INNER: &str = "--opc-sandbox-inner-v2";

/// Everything holds and bash is about to run. A positive signal: an executable that is not a
/// launcher also closes the socket without a word.
pub(crate) const READY: &[u8] = b"ready\n";
/// Inner → outer: "write my uid and gid maps" (a dropped root cannot write its own).
pub(crate) const MAP: &[u8] = b"map\n";
/// Outer → inner: the maps are written.
pub(crate) const MAPPED: &[u8] = b"mapped\n";

/// The exit code of a launcher that failed before exec (its reason is on the socket).
pub const LAUNCHER_FAILED: i32 = 125;

/// One run, fully resolved by OPC (absolute, canonical host paths).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub(crate) struct Spec {
    pub command: String,
    pub bash: PathBuf,
    /// `Mode::Off`: no kernel sandbox; the outer stage execs bash itself.
    pub off: bool,
    /// OPC runs as root (on the host): commands run as [`crate::SANDBOX_UID`].
    pub host_root: bool,
    /// The agent's workspace on the host (seen as [`crate::layout::WORKSPACE`]).
    pub workdir: PathBuf,
    /// Read-only trees and where they appear.
    pub shared: Vec<Shared>,
    /// `Mode::Off` only: a fresh host directory holding `home/` and `tmp/` (there is no private
    /// root to hold them).
    pub scratch: Option<PathBuf>,
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

/// Inner → outer, after `READY`: how bash ended (the inner stage, the namespace's init, cannot
/// mirror a signal by dying of it).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// What a failed launcher reports.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct Failure {
    /// Set when a kernel feature is missing (becomes `SandboxError::Unsupported`).
    pub unsupported: Option<String>,
    pub message: String,
}

impl Failure {
    pub(crate) fn setup(message: impl Into<String>) -> Failure {
        Failure {
            unsupported: None,
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(feature: &str, detail: impl std::fmt::Display) -> Failure {
        Failure {
            unsupported: Some(format!("{feature} ({detail})")),
            message: format!("{feature}: {detail}"),
        }
    }

    /// As sent on a socket: one JSON line.
    pub(crate) fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| self.message.clone().into());
        line.push(b'\n');
        line
    }
}
